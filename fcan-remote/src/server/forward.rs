//! Samples out: each RUNNING node's s2m samples, and every bus frame, put on their keys
//! while a subscriber in another session matches them (a node's samples are subscribed at
//! the master only then).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use fcan_master::MasterApi;
use zenoh::key_expr::KeyExpr;
use zenoh::sample::Locality;

use super::{Counters, Delivery, Shared};
use crate::wire::Attachment;

impl<M: MasterApi> Shared<M> {
    /// The publishers of one key the server puts samples on.
    pub(super) async fn topic_out(
        &self,
        key: String,
        wake: Arc<tokio::sync::Notify>,
    ) -> Option<TopicOut> {
        // Remote destinations only: the server's own put subscriber on `topic/**` would
        // otherwise match every topic (and receive every sample).
        let declare = |express: bool| {
            self.session
                .declare_publisher(key.clone())
                .express(express)
                .allowed_destination(Locality::Remote)
        };
        let publisher = declare(self.opts.delivery == Delivery::Express)
            .await
            .ok()?;
        // Only `Prompt` sends a wake-up's last put through the express publisher.
        let last = match self.opts.delivery {
            Delivery::Prompt => Some(declare(true).await.ok()?),
            _ => None,
        };
        Some(TopicOut::new(publisher, last, wake).await)
    }
}

pub(super) fn is_wild(k: &KeyExpr<'_>) -> bool {
    k.as_str().contains('*') || k.as_str().contains('$')
}

/// One served topic: its publisher and whether any subscriber matches it.
pub(super) struct TopicOut {
    publisher: zenoh::pubsub::Publisher<'static>,
    /// With [`Delivery::Prompt`], the same key, express: the last put of a wake-up goes
    /// through it, which sends the batch holding that wake-up's earlier (batched) puts
    /// at once rather than letting Zenoh hold it for more (up to 1 ms).
    last: Option<zenoh::pubsub::Publisher<'static>>,
    matched: Arc<std::sync::atomic::AtomicBool>,
    _listener: Option<zenoh::matching::MatchingListener<()>>,
}

impl TopicOut {
    /// `wake` is notified whenever the key gains or loses its last subscriber.
    pub(super) async fn new(
        publisher: zenoh::pubsub::Publisher<'static>,
        last: Option<zenoh::pubsub::Publisher<'static>>,
        wake: Arc<tokio::sync::Notify>,
    ) -> TopicOut {
        // Whether any subscriber matches the key: without one, a sample is neither
        // encoded nor put, and without one on any of a node's keys the node's topics are
        // not even decoded (an unwatched bus costs the daemon nothing past the master).
        let matched = Arc::new(std::sync::atomic::AtomicBool::new(
            publisher
                .matching_status()
                .await
                .map(|m| m.matching())
                .unwrap_or(true),
        ));
        let m2 = matched.clone();
        let listener = publisher
            .matching_listener()
            .callback(move |m| {
                m2.store(m.matching(), Ordering::Relaxed);
                wake.notify_one();
            })
            .await
            .ok();
        // Read again: a subscriber may have come between the first read and the listener.
        let now = match &listener {
            Some(_) => publisher
                .matching_status()
                .await
                .map(|m| m.matching())
                .unwrap_or(true),
            None => true,
        };
        matched.fetch_or(now, Ordering::Relaxed);
        TopicOut {
            publisher,
            last,
            matched,
            _listener: listener,
        }
    }
}

/// At most this many samples are taken from the channel per wake-up, so the puts of
/// one drain cannot hold back the next frame's for long.
const DRAIN: usize = 256;

/// The samples of one frame as one JSON object, `{"/<node>/<ns>/<topic>": value, …}`.
struct FrameSamples<'a>(&'a [fcan_master::Sample]);

impl serde::Serialize for FrameSamples<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = ser.serialize_map(Some(self.0.len()))?;
        for s in self.0 {
            map.serialize_entry(&*s.name, &s.value)?;
        }
        map.end()
    }
}

/// Puts every sample of one node's topics with its attachment: on its topic key while a
/// subscriber matches it, and, while one matches the node's `samples` key, the samples
/// of each frame (those received at one instant) together. Each wake-up drains what has
/// queued (the samples of a frame arrive together).
///
/// Subscribed at the master only while some key of the node is matched (`wake` says
/// when that changes): unsubscribed, the master does not decode the node's samples at
/// all, which was most of what an unwatched daemon cost (docs/performance.md).
pub(super) async fn forward<M: MasterApi>(
    master: M,
    wake: Arc<tokio::sync::Notify>,
    outs: BTreeMap<String, TopicOut>,
    group: Option<TopicOut>,
    mut att: Attachment,
    clock: Instant,
    count: Arc<Counters>,
) {
    let wanted = || {
        outs.values()
            .chain(group.iter())
            .any(|o| o.matched.load(Ordering::Relaxed))
    };
    // Buffers reused for every put: the samples drained, the JSON text, the attachment.
    let mut drained = Vec::with_capacity(DRAIN);
    let mut payload = Vec::with_capacity(256);
    let mut attachment = Vec::with_capacity(128);
    let mut rx: Option<tokio::sync::mpsc::UnboundedReceiver<fcan_master::Sample>> = None;
    loop {
        if !wanted() {
            // Dropping the receiver ends the master's subscriptions.
            rx = None;
            wake.notified().await;
            continue;
        }
        let r = match &mut rx {
            Some(r) => r,
            None => {
                let (tx, r) = tokio::sync::mpsc::unbounded_channel();
                for name in outs.keys() {
                    if master.subscribe_into(name, tx.clone()).await.is_err() {
                        // The master stopped, or the node went (a resync follows).
                        return;
                    }
                }
                rx.insert(r)
            }
        };
        let first = tokio::select! {
            s = r.recv() => match s {
                Some(s) => s,
                None => return,
            },
            _ = wake.notified() => continue,
        };
        drained.clear();
        drained.push(first);
        while drained.len() < DRAIN {
            match r.try_recv() {
                Ok(s) => drained.push(s),
                Err(_) => break,
            }
        }
        let watched = |s: &fcan_master::Sample| {
            outs.get(&*s.name)
                .is_some_and(|o| o.matched.load(Ordering::Relaxed))
        };
        let group = group.as_ref().filter(|g| g.matched.load(Ordering::Relaxed));
        // The samples to put, read once: a subscriber may come or go meanwhile (the
        // flags are atomics), and the count below must match the puts made.
        let single: Vec<&fcan_master::Sample> = drained.iter().filter(|s| watched(s)).collect();
        // How many puts this wake-up makes, so the last one can be express.
        let mut left =
            single.len() + group.map_or(0, |_| drained.chunk_by(|a, b| a.at == b.at).count());
        for s in single {
            let out = &outs[&*s.name];
            left -= 1;
            att.t_us = s.at.saturating_duration_since(clock).as_micros() as u64;
            if put(
                out,
                left == 0,
                &s.value,
                &att,
                &mut payload,
                &mut attachment,
            )
            .await
            {
                count.samples.fetch_add(1, Ordering::Relaxed);
            }
        }
        let Some(g) = group else {
            continue;
        };
        for frame in drained.chunk_by(|a, b| a.at == b.at) {
            left -= 1;
            att.t_us = frame[0].at.saturating_duration_since(clock).as_micros() as u64;
            if put(
                g,
                left == 0,
                &FrameSamples(frame),
                &att,
                &mut payload,
                &mut attachment,
            )
            .await
            {
                count.sample_groups.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Puts the bus's raw frames on `fcan/<bus>/frames` while a subscriber matches it (the
/// master is asked for them only then): each put is the frames drained at one wake-up,
/// one line each, `<t_us> <rx|tx> <candump frame>` (`123##1A0B`), `t_us` on the clock of
/// sample attachments; a line `<t_us> lost <n>` says `n` frames were dropped because the
/// daemon could not put them fast enough (docs/remote.md).
pub(super) async fn forward_frames<M: MasterApi>(
    master: M,
    out: TopicOut,
    wake: Arc<tokio::sync::Notify>,
    clock: Instant,
) {
    use std::fmt::Write as _;
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    let mut rx: Option<tokio::sync::broadcast::Receiver<fcan_master::BusFrame>> = None;
    let mut text = String::with_capacity(4096);
    let t_us = |at: Instant| at.saturating_duration_since(clock).as_micros() as u64;
    loop {
        if !out.matched.load(Ordering::Relaxed) {
            rx = None;
            wake.notified().await;
            continue;
        }
        let r = match &mut rx {
            Some(r) => r,
            None => match master.frames().await {
                Ok(r) => rx.insert(r),
                // The master has stopped: nothing more to forward.
                Err(_) => return,
            },
        };
        let first = tokio::select! {
            f = r.recv() => f,
            _ = wake.notified() => continue,
        };
        text.clear();
        let line = |text: &mut String, f: Result<fcan_master::BusFrame, RecvError>| match f {
            Ok(f) => {
                let dir = if f.sent { "tx" } else { "rx" };
                let frame = fcan_master::transport::candump::format_frame(&f.frame, true);
                let _ = writeln!(text, "{} {dir} {frame}", t_us(f.at));
                true
            }
            Err(RecvError::Lagged(n)) => {
                let _ = writeln!(text, "{} lost {n}", t_us(Instant::now()));
                true
            }
            Err(RecvError::Closed) => false,
        };
        if !line(&mut text, first) {
            return;
        }
        for _ in 0..DRAIN * 4 {
            match r.try_recv() {
                Ok(f) => {
                    line(&mut text, Ok(f));
                }
                Err(TryRecvError::Lagged(n)) => {
                    line(&mut text, Err(RecvError::Lagged(n)));
                }
                Err(_) => break,
            }
        }
        let _ = out.publisher.put(text.as_bytes().to_vec()).await;
    }
}

/// One put of `value` as JSON with `att`, through reused buffers; `true` if it went.
/// `last`: the last put of a wake-up (sent express with [`Delivery::Prompt`]).
async fn put(
    out: &TopicOut,
    last: bool,
    value: &impl serde::Serialize,
    att: &Attachment,
    payload: &mut Vec<u8>,
    attachment: &mut Vec<u8>,
) -> bool {
    payload.clear();
    attachment.clear();
    serde_json::to_writer(&mut *payload, value).is_ok()
        && serde_json::to_writer(&mut *attachment, att).is_ok()
        && match (last, &out.last) {
            (true, Some(express)) => express,
            _ => &out.publisher,
        }
        .put(payload.as_slice())
        .attachment(attachment.as_slice())
        .await
        .is_ok()
}
