//! Topics: each a channel, forwarded from the master while some client watches it;
//! clients' publishes on command topics, queued, admitted or refused, and handed to the
//! master in the order they came.
//!
//! The decisions are plain functions, tested below: whether a watch starts or stops a
//! forwarder ([`Watchers`]), whether a publish is admitted or refused and as which
//! [`Refusal`] ([`admission`], [`Refused`]), whether a refusal is said now or paced out
//! ([`Told`]) and what it says ([`refusal_text`]), what a client advertising a channel
//! is warned of ([`advertise_warning`]).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use fcan_core::msg::DataDirection;
use fcan_master::registry::TopicInfo;
use fcan_master::serving::lock;
use fcan_master::text::Untrusted;
use fcan_master::value::Value;
use fcan_master::{ErrorKind, MasterApi, MasterError};
use foxglove::websocket::{ChannelView, Client, ClientChannel, ServerListener, Status};
use foxglove::{ChannelBuilder, ChannelId, PartialMetadata, RawChannel, Schema};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{shown, Shared, TARGET};
use crate::mapping::{self, WallClock, MESSAGE_ENCODING, SCHEMA_ENCODING};

/// Client publishes handed to the master at once by the publish worker (fewer than
/// `join_all`'s 30, so they are polled in order, one after the other).
const PIPELINE: usize = 16;

/// One topic's channel.
pub(super) struct TopicChannel {
    pub(super) name: String,
    channel: Arc<RawChannel>,
    forwarding: Mutex<Forwarding>,
}

/// Who watches a channel, and its forwarder.
#[derive(Default)]
struct Forwarding {
    watchers: Watchers,
    /// Forwards the master's samples while watched.
    task: Option<JoinHandle<()>>,
}

/// How many clients watch a channel, sans I/O: the first watch starts its forwarder,
/// the last unwatch stops it; once the node is no longer served, nothing starts one.
#[derive(Debug, Default)]
struct Watchers {
    count: usize,
    closed: bool,
}

impl Watchers {
    /// A client subscribed: `true` when the forwarder is to start.
    fn watch(&mut self) -> bool {
        if self.closed {
            return false;
        }
        self.count += 1;
        self.count == 1
    }

    /// A client unsubscribed (or left): `true` when the forwarder is to stop.
    fn unwatch(&mut self) -> bool {
        self.count = self.count.saturating_sub(1);
        self.count == 0
    }

    /// The node is no longer served.
    fn close(&mut self) {
        self.closed = true;
    }
}

impl TopicChannel {
    pub(super) fn id(&self) -> ChannelId {
        self.channel.id()
    }

    /// Whether its forwarder runs (the topic is subscribed at the master).
    pub(super) fn is_forwarding(&self) -> bool {
        lock(&self.forwarding)
            .task
            .as_ref()
            .is_some_and(|t| !t.is_finished())
    }

    /// Stops forwarding for good and closes the channel.
    pub(super) fn close(&self) {
        {
            let mut f = lock(&self.forwarding);
            f.watchers.close();
            if let Some(t) = f.task.take() {
                t.abort();
            }
        }
        // Outside the lock: closing a subscribed channel calls `on_unsubscribe`.
        self.channel.close();
    }
}

/// What kind of refusal a client is told of: each kind is reported at most once a
/// second per (client, topic), so a flood of one kind never hides the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Refusal {
    /// The message (its encoding, size, JSON, topic, value) or the master's answer to it.
    Bad,
    /// The client outran the bus (the master's `busy`) or the server (its queue full, a
    /// message waited too long for the master): the same message later may pass.
    Busy,
}

/// Why a client's publish is refused. The words are only written out when the client
/// is told ([`Refused::reason`]): a flood is refused cheaply.
#[derive(Debug)]
enum Refused {
    /// Larger than [`super::FoxgloveOptions::max_payload`].
    TooLarge { len: usize, limit: usize },
    /// [`super::FoxgloveOptions::publish_queue`] messages already wait.
    QueueFull { queue: usize },
    /// It waited longer than [`super::FoxgloveOptions::publish_wait`] for the master.
    Stale { waited: Duration, limit: Duration },
    /// Not the `json` encoding.
    Encoding(String),
    /// Not JSON of a message.
    Json(String),
    /// A feedback (s2m) topic: the node publishes it.
    FromNode,
    /// No such topic on a running node.
    NoTopic,
    /// The master refused it.
    Master(MasterError),
}

impl Refused {
    /// The kind the client is told of.
    fn kind(&self) -> Refusal {
        match self {
            Refused::QueueFull { .. } | Refused::Stale { .. } => Refusal::Busy,
            Refused::Master(e) if is_busy(e) => Refusal::Busy,
            _ => Refusal::Bad,
        }
    }

    /// Why, in words, of a publish on `topic`.
    fn reason(&self, topic: &str) -> String {
        match self {
            Refused::TooLarge { len, limit } => {
                format!("message of {len} bytes exceeds the limit of {limit}")
            }
            Refused::QueueFull { queue } => format!(
                "the server is busy: {queue} messages already wait for the master (queue full)"
            ),
            Refused::Stale { waited, limit } => format!(
                "the server is busy: the message waited {} ms for the master (the limit is {} ms)",
                waited.as_millis(),
                limit.as_millis()
            ),
            Refused::Encoding(e) => format!(
                "encoding `{}` is not supported; advertise the channel with encoding `json`",
                shown(e)
            ),
            Refused::Json(why) => why.clone(),
            Refused::FromNode => format!(
                "{} is published by the node (s2m), not by a client",
                shown(topic)
            ),
            Refused::NoTopic => {
                format!("no command topic named {} on a running node", shown(topic))
            }
            Refused::Master(e) => e.to_string(),
        }
    }
}

/// Whether the master refused because commands already wait for the bus (or too many
/// requests are in flight): the kind [`ErrorKind::Busy`], the same from an in-process
/// master and a remote one.
fn is_busy(e: &MasterError) -> bool {
    e.kind() == ErrorKind::Busy
}

/// Whether a client's message taken from the queue goes to the master: not older than
/// `limit`, JSON, on an m2s topic of a running node (`dir`, the direction of its topic
/// if a served node has it, is only asked for a message that passed the rest).
fn admission(
    waited: Duration,
    limit: Duration,
    encoding: &str,
    payload: &[u8],
    dir: impl FnOnce() -> Option<DataDirection>,
) -> Result<Value, Refused> {
    if waited > limit {
        return Err(Refused::Stale { waited, limit });
    }
    if encoding != MESSAGE_ENCODING {
        return Err(Refused::Encoding(encoding.to_string()));
    }
    let value = mapping::decode_message(payload).map_err(Refused::Json)?;
    match dir() {
        Some(DataDirection::M2s) => Ok(value),
        Some(DataDirection::S2m) => Err(Refused::FromNode),
        None => Err(Refused::NoTopic),
    }
}

/// Whether refusal number `n` (counted from 1) is logged: the first 20, then one in
/// 1000.
fn logged(n: u64) -> bool {
    n <= 20 || n.is_multiple_of(1000)
}

/// The status a client is told its publish on `topic` was refused with, `more` others
/// of its kind held back since the last.
fn refusal_text(topic: &str, why: &str, more: u64) -> String {
    let also = if more > 0 {
        format!(" ({more} more refused since the last report)")
    } else {
        String::new()
    };
    format!(
        "fcan: publish on {} refused: {}{also}",
        shown(topic),
        Untrusted(why)
    )
}

/// How long a refusal of one kind on one topic keeps the client from hearing the next.
const TOLD_PACE: Duration = Duration::from_secs(1);

/// Entries [`Told`] keeps per (client, kind), and (client, kind) pairs, before it
/// forgets the ones older than [`TOLD_PACE`].
const TOLD_MAX: usize = 4096;

/// When each (client, kind of refusal, topic) was last told of a refused publish, and
/// how many refusals of that kind it was not told of since; sans I/O.
#[derive(Default)]
pub(super) struct Told(HashMap<(u32, Refusal), HashMap<String, (Instant, u64)>>);

impl Told {
    /// `Some(n)` when client `client` is to be told now of a refusal of `kind` on
    /// `topic`, `n` the others held back since it was last told; `None` when it was told
    /// less than a second ago (the refusal is counted for the next).
    fn due(&mut self, client: u32, kind: Refusal, topic: &str, now: Instant) -> Option<u64> {
        let per_topic = self.0.entry((client, kind)).or_default();
        let more = match per_topic.get_mut(topic) {
            Some(e) if now.duration_since(e.0) < TOLD_PACE => {
                e.1 += 1;
                return None;
            }
            Some(e) => std::mem::replace(e, (now, 0)).1,
            None => {
                per_topic.insert(topic.to_string(), (now, 0));
                0
            }
        };
        // Bounded: a client cycling through topic names cannot grow this for ever.
        if per_topic.len() > TOLD_MAX {
            per_topic.retain(|_, (t, _)| now.duration_since(*t) < TOLD_PACE);
        }
        if self.0.len() > TOLD_MAX {
            self.0
                .retain(|_, m| m.values().any(|(t, _)| now.duration_since(*t) < TOLD_PACE));
        }
        Some(more)
    }
}

/// What a client advertising a channel on `topic` with `encoding` is warned of, as
/// (kind, text): a channel is accepted either way (the node may come later), but the
/// user should see why nothing moves. `dir` is asked only for a `json` channel.
fn advertise_warning(
    topic: &str,
    encoding: &str,
    dir: impl FnOnce() -> Option<DataDirection>,
) -> Option<(&'static str, String)> {
    if encoding != MESSAGE_ENCODING {
        return Some((
            "encoding",
            format!(
                "fcan: channel {} uses encoding `{}`: only `json` is accepted",
                shown(topic),
                shown(encoding)
            ),
        ));
    }
    if dir() != Some(DataDirection::M2s) {
        return Some((
            "not a command",
            format!(
                "fcan: {} is not a command (m2s) topic of a running node: its messages will be refused",
                shown(topic)
            ),
        ));
    }
    None
}

/// A client's message on one of its channels, waiting to be published.
pub(super) struct Publish {
    /// When it arrived.
    at: Instant,
    client: Client,
    topic: String,
    encoding: String,
    payload: Vec<u8>,
}

impl<M: MasterApi> Shared<M> {
    /// Builds (and so advertises) topic `t`'s channel; `None` (logged) if it cannot be.
    pub(super) fn build_channel(&self, t: &TopicInfo) -> Option<Arc<TopicChannel>> {
        let spec = mapping::channel_spec(t);
        let built = ChannelBuilder::new(spec.topic.clone())
            .context(&self.ctx)
            .message_encoding(MESSAGE_ENCODING)
            .schema(Schema::new(spec.schema_name, SCHEMA_ENCODING, spec.schema))
            .metadata(spec.metadata)
            .build_raw();
        match built {
            Ok(ch) => Some(Arc::new(TopicChannel {
                name: spec.topic,
                channel: ch,
                forwarding: Mutex::default(),
            })),
            Err(e) => {
                tracing::warn!(
                    target: TARGET,
                    parent: &self.span,
                    "channel {}: {e}",
                    Untrusted(&t.name)
                );
                None
            }
        }
    }

    /// A client subscribed to a channel: forward its topic from the master if it is
    /// the first.
    fn watch(&self, id: ChannelId) {
        let Some(c) = self.channel(id) else {
            return;
        };
        let mut f = lock(&c.forwarding);
        if f.watchers.watch() {
            f.task = Some(self.rt.spawn(forward(
                self.master.clone(),
                c.name.clone(),
                c.channel.clone(),
                self.clock,
            )));
        }
    }

    /// A client unsubscribed (or left): stop forwarding after the last one.
    fn unwatch(&self, id: ChannelId) {
        let Some(c) = self.channel(id) else {
            return;
        };
        let mut f = lock(&c.forwarding);
        if f.watchers.unwatch() {
            if let Some(t) = f.task.take() {
                // Dropping the receiver ends the master's subscription.
                t.abort();
            }
        }
    }

    /// A publish refused: counted (by kind), logged (the first 20, then one in 1000),
    /// and the client told (at most once a second per topic and kind of refusal, with
    /// the count of the others). The reason is only written out when it is said.
    fn refuse(&self, client: &Client, topic: &str, r: Refused) {
        let c = &self.counters;
        match &r {
            Refused::QueueFull { .. } => c.queue_full.fetch_add(1, Ordering::Relaxed),
            Refused::Stale { .. } => c.stale.fetch_add(1, Ordering::Relaxed),
            Refused::Master(e) if is_busy(e) => c.busy.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        let n = c.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let mut text = None;
        let mut why = || -> String { text.get_or_insert_with(|| r.reason(topic)).clone() };
        if logged(n) {
            tracing::warn!(
                target: TARGET,
                parent: &self.span,
                "refused publish #{n} on {}: {}",
                shown(topic),
                Untrusted(&why())
            );
        }
        let id = u32::from(client.id());
        let due = lock(&self.told).due(id, r.kind(), topic, Instant::now());
        if let Some(more) = due {
            client.send_status(Status::error(refusal_text(topic, &why(), more)));
        }
    }

    /// Publishes the clients' messages in the order they arrived, up to [`PIPELINE`]
    /// at a time: each batch is checked here, then handed to the master together (the
    /// master takes them in order and answers each), so the queue drains at the
    /// master's pace of answering, not one round trip per message.
    pub(super) async fn publish_worker(self: Arc<Self>, mut rx: mpsc::Receiver<Publish>) {
        let mut batch = Vec::with_capacity(PIPELINE);
        while rx.recv_many(&mut batch, PIPELINE).await > 0 {
            let master = &self.master;
            let calls: Vec<_> = batch
                .drain(..)
                .filter_map(|p| self.admit(p))
                .map(|(p, value)| async move {
                    let r = master.publish(&p.topic, value).await;
                    (p, r)
                })
                .collect();
            // Polled in order: each publish reaches the master's queue in the order the
            // messages arrived (its queue is fair), so a later command for a motor never
            // overtakes an earlier one.
            for (p, r) in futures_util::future::join_all(calls).await {
                match r {
                    Ok(()) => {
                        self.counters.published.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => self.refuse(&p.client, &p.topic, Refused::Master(e)),
                }
            }
        }
    }

    /// A message taken from the queue, checked ([`admission`]) before it goes to the
    /// master; refused (and the client told) otherwise.
    fn admit(&self, p: Publish) -> Option<(Publish, Value)> {
        let checked = admission(
            p.at.elapsed(),
            self.opts.publish_wait,
            &p.encoding,
            &p.payload,
            || self.topic_dir(&p.topic),
        );
        match checked {
            Ok(value) => Some((p, value)),
            Err(r) => {
                self.refuse(&p.client, &p.topic, r);
                None
            }
        }
    }
}

/// Forwards topic `name`'s samples from the master to its channel until aborted.
async fn forward<M: MasterApi>(
    master: M,
    name: String,
    channel: Arc<RawChannel>,
    clock: WallClock,
) {
    let Ok(mut rx) = master.subscribe(&name).await else {
        // The node went; a resync closes the channel.
        return;
    };
    let mut buf = Vec::with_capacity(256);
    while let Some(s) = rx.recv().await {
        mapping::encode_message(&s.value, &mut buf);
        channel.log_with_meta(&buf, PartialMetadata::with_log_time(clock.nanos(s.at)));
    }
}

/// The client callbacks.
pub(super) struct Listener<M>(pub(super) Weak<Shared<M>>);

impl<M: MasterApi> ServerListener for Listener<M> {
    fn on_subscribe(&self, _client: Client, channel: ChannelView) {
        if let Some(s) = self.0.upgrade() {
            s.watch(channel.id());
        }
    }

    fn on_unsubscribe(&self, _client: Client, channel: ChannelView) {
        if let Some(s) = self.0.upgrade() {
            s.unwatch(channel.id());
        }
    }

    fn on_client_advertise(&self, client: Client, channel: &ClientChannel) {
        let Some(s) = self.0.upgrade() else { return };
        let warning = advertise_warning(&channel.topic, &channel.encoding, || {
            s.topic_dir(&channel.topic)
        });
        if let Some((kind, text)) = warning {
            s.say(&client, kind, Status::warning(text));
        }
    }

    fn on_message_data(&self, client: Client, channel: &ClientChannel, payload: &[u8]) {
        let Some(s) = self.0.upgrade() else { return };
        if payload.len() > s.opts.max_payload {
            let r = Refused::TooLarge {
                len: payload.len(),
                limit: s.opts.max_payload,
            };
            return s.refuse(&client, &channel.topic, r);
        }
        let p = Publish {
            at: Instant::now(),
            client: client.clone(),
            topic: channel.topic.clone(),
            encoding: channel.encoding.clone(),
            payload: payload.to_vec(),
        };
        if s.publish_tx.try_send(p).is_err() {
            let r = Refused::QueueFull {
                queue: s.opts.publish_queue.max(1),
            };
            s.refuse(&client, &channel.topic, r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_first_watch_starts_the_forwarder_and_the_last_unwatch_stops_it() {
        let mut w = Watchers::default();
        assert!(w.watch());
        assert!(!w.watch());
        assert!(!w.unwatch());
        assert!(w.unwatch());
        // An unwatch too many (a client leaving twice) never goes below zero.
        assert!(w.unwatch());
        assert!(w.watch());
        // Once the node is no longer served, nothing starts a forwarder again.
        w.close();
        assert!(w.unwatch());
        assert!(!w.watch());
        assert!(!w.watch());
    }

    #[test]
    fn a_publish_is_admitted_only_as_json_of_a_command_topic_in_time() {
        let m2s = || Some(DataDirection::M2s);
        let ok = admission(MS, 50 * MS, "json", br#"{"a":1}"#, m2s).unwrap();
        assert_eq!(ok, mapping::decode_message(br#"{"a":1}"#).unwrap());

        // Waited too long: busy, whatever it carries, and the topic never looked up.
        let r = admission(51 * MS, 50 * MS, "cbor", b"x", || unreachable!()).unwrap_err();
        assert!(matches!(r, Refused::Stale { .. }));
        assert_eq!(r.kind(), Refusal::Busy);
        assert_eq!(
            r.reason("/t"),
            "the server is busy: the message waited 51 ms for the master (the limit is 50 ms)"
        );

        let r = admission(MS, 50 * MS, "cbor", b"{}", m2s).unwrap_err();
        assert_eq!(r.kind(), Refusal::Bad);
        assert!(r.reason("/t").contains("encoding `cbor` is not supported"));

        let r = admission(MS, 50 * MS, "json", b"{not json", m2s).unwrap_err();
        assert!(matches!(r, Refused::Json(_)));
        assert_eq!(r.kind(), Refusal::Bad);

        let r = admission(MS, 50 * MS, "json", b"{}", || Some(DataDirection::S2m)).unwrap_err();
        assert_eq!(r.kind(), Refusal::Bad);
        assert_eq!(
            r.reason("/md1/motor0/feedback"),
            "/md1/motor0/feedback is published by the node (s2m), not by a client"
        );

        let r = admission(MS, 50 * MS, "json", b"{}", || None).unwrap_err();
        assert_eq!(r.kind(), Refusal::Bad);
        assert_eq!(
            r.reason("/nope"),
            "no command topic named /nope on a running node"
        );
    }

    #[test]
    fn refusals_outside_admission_have_their_kinds() {
        let full = Refused::QueueFull { queue: 8 };
        assert_eq!(full.kind(), Refusal::Busy);
        assert_eq!(
            full.reason("/t"),
            "the server is busy: 8 messages already wait for the master (queue full)"
        );
        let big = Refused::TooLarge { len: 10, limit: 5 };
        assert_eq!(big.kind(), Refusal::Bad);
        assert_eq!(
            big.reason("/t"),
            "message of 10 bytes exceeds the limit of 5"
        );
        // The master's `busy` (in-process or remote) is the client outrunning the bus;
        // any other error of the master's is the message's.
        let busy = Refused::Master(MasterError::Remote {
            kind: ErrorKind::Busy,
            message: "backlog".into(),
        });
        assert_eq!(busy.kind(), Refusal::Busy);
        assert_eq!(Refused::Master(MasterError::Stopped).kind(), Refusal::Bad);
    }

    #[test]
    fn a_refusal_is_said_once_a_second_per_client_kind_and_topic() {
        let mut told = Told::default();
        let t0 = Instant::now();
        assert_eq!(told.due(1, Refusal::Busy, "/a", t0), Some(0));
        assert_eq!(told.due(1, Refusal::Busy, "/a", t0 + 10 * MS), None);
        assert_eq!(told.due(1, Refusal::Busy, "/a", t0 + 500 * MS), None);
        // Another kind, topic or client is said at once: one flood hides no other.
        assert_eq!(told.due(1, Refusal::Bad, "/a", t0 + 10 * MS), Some(0));
        assert_eq!(told.due(1, Refusal::Busy, "/b", t0 + 10 * MS), Some(0));
        assert_eq!(told.due(2, Refusal::Busy, "/a", t0 + 10 * MS), Some(0));
        // A second on, with the count of those held back.
        assert_eq!(told.due(1, Refusal::Busy, "/a", t0 + 1000 * MS), Some(2));
        assert_eq!(told.due(1, Refusal::Busy, "/a", t0 + 2000 * MS), Some(0));
    }

    #[test]
    fn what_is_told_stays_bounded() {
        let mut told = Told::default();
        let t0 = Instant::now();
        for i in 0..=TOLD_MAX {
            told.due(1, Refusal::Bad, &format!("/t{i}"), t0);
        }
        assert_eq!(told.0[&(1, Refusal::Bad)].len(), TOLD_MAX + 1);
        // The next, a second on, forgets the old ones.
        told.due(1, Refusal::Bad, "/new", t0 + 1000 * MS);
        assert_eq!(told.0[&(1, Refusal::Bad)].len(), 1);
    }

    #[test]
    fn refusals_are_logged_first_then_one_in_a_thousand() {
        let logged: Vec<u64> = (1..=3000).filter(|n| logged(*n)).collect();
        assert_eq!(logged.len(), 20 + 3);
        assert_eq!(&logged[18..], &[19, 20, 1000, 2000, 3000]);
    }

    #[test]
    fn a_refusal_status_escapes_and_cuts_what_the_client_sent() {
        assert_eq!(
            refusal_text("/a", "bad value", 0),
            "fcan: publish on /a refused: bad value"
        );
        assert_eq!(
            refusal_text("/a", "bad value", 3),
            "fcan: publish on /a refused: bad value (3 more refused since the last report)"
        );
        let long = format!("/{}\u{1b}", "x".repeat(100));
        let text = refusal_text(&long, "why\u{7}", 0);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text}"
        );
        assert!(text.contains('…'), "{text}");
    }

    #[test]
    fn an_advertised_channel_is_warned_of_unless_a_json_command_topic() {
        assert_eq!(
            advertise_warning("/a", "json", || Some(DataDirection::M2s)),
            None
        );
        let (kind, text) = advertise_warning("/a", "cbor", || unreachable!()).unwrap();
        assert_eq!(kind, "encoding");
        assert!(text.contains("uses encoding `cbor`"), "{text}");
        for dir in [Some(DataDirection::S2m), None] {
            let (kind, text) = advertise_warning("/a", "json", || dir).unwrap();
            assert_eq!(kind, "not a command");
            assert!(
                text.starts_with("fcan: /a is not a command (m2s) topic"),
                "{text}"
            );
        }
    }
}
