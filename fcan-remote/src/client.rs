//! [`RemoteMaster`]: a client of one bus of an fcan daemon with the
//! [`MasterApi`] of the in-process master.
//!
//! Timing and differences from the in-process [`Master`](fcan_master::Master):
//!
//! * every request is a Zenoh query, bounded by [`ClientOptions::timeout`]; a daemon
//!   error comes back as [`MasterError::Remote`] with the daemon's [`ErrorKind`], the
//!   kind a local master's error has ([`ErrorKind::Unreachable`] when no daemon
//!   answered), so a `match` on [`MasterError::kind`] works the same on either;
//! * [`publish`](MasterApi::publish) is a Zenoh put, which has no reply: the client
//!   checks the topic and the value against the registry first (the same checks as the
//!   master), the daemon checks again and counts what it refuses;
//!   [`publish_many`](MasterApi::publish_many) checks every item the same way, then
//!   sends them all in one put on `fcan/<bus>/publish`, which the daemon publishes as
//!   one batch (a frame shared by several of the topics goes out once) or, if any item
//!   is bad, not at all;
//! * [`Sample::at`](fcan_master::Sample) is the daemon's receive time mapped onto this
//!   process's clock: `t_us` of the attachment plus the smallest (arrival − `t_us`)
//!   seen, so the gaps between samples are the bus's, not the network's (re-anchored
//!   when the daemon restarts). Every status reply (its `t_us`) counts as such an arrival,
//!   and [`subscribe`](MasterApi::subscribe) asks for one first: the first samples of a
//!   subscription, often a backlog, are then mapped within one round trip of the truth
//!   instead of by their own delay;
//! * [`registry`](MasterApi::registry) and [`schema`](MasterApi::schema) are rebuilt
//!   here from the schema blobs fetched by digest, checked (SHA-256, decoding,
//!   validation) as the master checks a node's blob.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use fcan_master::MasterApi;
//! use fcan_remote::{ClientOptions, RemoteMaster, SessionConfig};
//! let zenoh = SessionConfig::client().open().await?.session;
//! let m = RemoteMaster::connect(&zenoh, "can0", ClientOptions::default()).await?;
//! for n in m.nodes().await? {
//!     println!("{} {}", n.name, n.phase);
//! }
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fcan_core::hash::SchemaDigest;
use fcan_core::id::NodeId;
use fcan_core::msg::DataDirection;
use fcan_master::engine::NodeSchema;
use fcan_master::planner::Plan;
use fcan_master::registry::Registry;
use fcan_master::transport::candump::{self, LogEntry};
use fcan_master::value::{pack_message, Value};
use fcan_master::MasterEvent;
use fcan_master::{BusFrame, MasterApi, MasterError, NodeInfo, Sample, Status};
use serde_json::Value as Json;
use tokio::sync::{broadcast, mpsc};
use zenoh::Session;

use crate::keys;
use crate::wire::{batch_json, registry_blocks, Attachment, ErrorReply};
use fcan_master::ErrorKind;

/// How a client runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions {
    /// How long one request may take (default 12 s: above the daemon's own 10 s bound,
    /// so the daemon's `timeout` error, which says more, arrives first).
    pub timeout: Duration,
    /// The largest reply accepted, bytes (default 1 MiB).
    pub max_reply: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            timeout: Duration::from_secs(12),
            max_reply: 1 << 20,
        }
    }
}

/// Schema blobs decoded, by digest (bounded).
const MAX_SCHEMAS: usize = 64;

struct Inner {
    session: Session,
    bus: String,
    opts: ClientOptions,
    events: broadcast::Sender<MasterEvent>,
    _events_sub: zenoh::pubsub::Subscriber<()>,
    schemas: Mutex<BTreeMap<SchemaDigest, Arc<NodeSchema>>>,
    /// The registry as last fetched, for checking puts; cleared on every event.
    registry: Arc<Mutex<Option<Arc<Registry>>>>,
    /// The daemon's clock as seen from here, shared by every subscription.
    clock: Arc<Mutex<Clock>>,
}

/// A client of one bus of an fcan daemon. Cheap to clone.
#[derive(Clone)]
pub struct RemoteMaster {
    inner: Arc<Inner>,
}

fn unreachable(what: impl std::fmt::Display) -> MasterError {
    MasterError::Remote {
        kind: ErrorKind::Unreachable,
        message: what.to_string(),
    }
}

fn internal(what: impl std::fmt::Display) -> MasterError {
    MasterError::Remote {
        kind: ErrorKind::Internal,
        message: what.to_string(),
    }
}

/// The bus names visible on `session`: every daemon's `fcan/*/status` that answers
/// within `timeout`.
pub async fn buses(session: &Session, timeout: Duration) -> Result<Vec<String>, MasterError> {
    let replies = session
        .get("fcan/*/status")
        .timeout(timeout)
        .await
        .map_err(unreachable)?;
    let mut out = BTreeSet::new();
    while let Ok(r) = replies.recv_async().await {
        if let Ok(s) = r.result() {
            if let Some((bus, keys::Entity::Status)) = keys::parse(s.key_expr().as_str()) {
                out.insert(bus);
            }
        }
    }
    Ok(out.into_iter().collect())
}

impl RemoteMaster {
    /// A client of bus `bus` on `session` (it listens for events from now on).
    pub async fn connect(
        session: &Session,
        bus: &str,
        opts: ClientOptions,
    ) -> Result<RemoteMaster, MasterError> {
        let key = keys::events(bus).ok_or_else(|| internal(format!("bad bus name `{bus}`")))?;
        let (events, _) = broadcast::channel(1024);
        let tx = events.clone();
        let registry: Arc<Mutex<Option<Arc<Registry>>>> = Arc::default();
        let reg = registry.clone();
        let sub = session
            .declare_subscriber(key)
            .callback(move |s| {
                // Any event may change what the registry holds.
                *reg.lock().unwrap_or_else(|p| p.into_inner()) = None;
                // `MasterEvent`'s own serde shape (docs/remote.md, "Events"); an event
                // this client does not know (a newer daemon's) is skipped.
                let e = serde_json::from_slice::<MasterEvent>(&s.payload().to_bytes());
                if let Ok(e) = e {
                    let _ = tx.send(e);
                }
            })
            .await
            .map_err(unreachable)?;
        Ok(RemoteMaster {
            inner: Arc::new(Inner {
                session: session.clone(),
                bus: bus.to_string(),
                opts,
                events,
                _events_sub: sub,
                schemas: Mutex::new(BTreeMap::new()),
                registry,
                clock: Arc::new(Mutex::new(Clock { origin: None })),
            }),
        })
    }

    fn lock_clock(&self) -> std::sync::MutexGuard<'_, Clock> {
        self.inner.clock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bus this client talks to.
    pub fn bus(&self) -> &str {
        &self.inner.bus
    }

    /// One query: the first reply's payload, or the daemon's error.
    async fn query(&self, key: String, payload: Option<Vec<u8>>) -> Result<Vec<u8>, MasterError> {
        self.query_for(key, payload, self.inner.opts.timeout).await
    }

    /// [`query`](Self::query) with its own time bound.
    async fn query_for(
        &self,
        key: String,
        payload: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Vec<u8>, MasterError> {
        let mut get = self.inner.session.get(&key).timeout(timeout);
        if let Some(p) = payload {
            get = get.payload(p);
        }
        let replies = get.await.map_err(unreachable)?;
        let reply = replies.recv_async().await.map_err(|_| {
            unreachable(format!(
                "no fcan daemon answered on {key} within {timeout:?}"
            ))
        })?;
        match reply.result() {
            Ok(s) => {
                let bytes = s.payload().to_bytes();
                if bytes.len() > self.inner.opts.max_reply {
                    return Err(internal(format!(
                        "reply of {} bytes is too large",
                        bytes.len()
                    )));
                }
                Ok(bytes.into_owned())
            }
            Err(e) => {
                let bytes = e.payload().to_bytes();
                Err(match serde_json::from_slice::<ErrorReply>(&bytes) {
                    Ok(r) => r.into_error(),
                    Err(_) => MasterError::Remote {
                        kind: ErrorKind::Internal,
                        message: String::from_utf8_lossy(&bytes).into_owned(),
                    },
                })
            }
        }
    }

    /// `fcan/<bus>/update/<node name>` of node `node` (not listed: not online).
    async fn update_key(&self, node: NodeId) -> Result<String, MasterError> {
        let nodes = self.nodes().await?;
        let Some(n) = nodes.iter().find(|n| n.id == node) else {
            return Err(fcan_master::engine::UpdateError::NodeNotOnline(node).into());
        };
        keys::update(&self.inner.bus, &n.name)
            .ok_or_else(|| internal(format!("node name {} is not key-safe", n.name)))
    }

    async fn query_json(&self, key: String, payload: Option<Vec<u8>>) -> Result<Json, MasterError> {
        let bytes = self.query(key, payload).await?;
        serde_json::from_slice(&bytes).map_err(|e| internal(format!("reply is not JSON: {e}")))
    }

    fn key(&self, k: Option<String>, name: &str) -> Result<String, MasterError> {
        k.ok_or_else(|| MasterError::Remote {
            kind: ErrorKind::UnknownName,
            message: format!(
                "`{}` is not a name of the remote API",
                fcan_master::text::Untrusted(name)
            ),
        })
    }

    /// The node's schema blob by digest, fetched once, checked.
    async fn schema_of(&self, digest: SchemaDigest) -> Result<Arc<NodeSchema>, MasterError> {
        if let Some(s) = self
            .inner
            .schemas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&digest)
        {
            return Ok(s.clone());
        }
        let key = keys::schema(&self.inner.bus, &digest).expect("bus name checked");
        let blob = self.query(key, None).await?;
        if SchemaDigest::of(&blob) != digest {
            return Err(internal(format!(
                "the daemon's blob for {digest} does not hash to it"
            )));
        }
        let s = Arc::new(
            NodeSchema::decode(digest, blob)
                .map_err(|(why, _)| internal(format!("schema {digest}: {why}")))?,
        );
        let mut cache = self.inner.schemas.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_SCHEMAS {
            cache.clear();
        }
        cache.insert(digest, s.clone());
        Ok(s)
    }

    /// The registry, from the cache of the last one if no event came since.
    async fn cached_registry(&self) -> Result<Arc<Registry>, MasterError> {
        let cached = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match cached {
            Some(r) => Ok(r),
            None => self.refresh_registry().await,
        }
    }

    /// Fetches the registry and caches it.
    async fn refresh_registry(&self) -> Result<Arc<Registry>, MasterError> {
        let r = Arc::new(self.fetch_registry().await?);
        *self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(r.clone());
        Ok(r)
    }

    /// The topic `name` from the cached registry, or (a node may have come since) from a
    /// fresh one.
    async fn topic_info(
        &self,
        name: &str,
    ) -> Result<fcan_master::registry::TopicInfo, MasterError> {
        if let Ok(t) = self.cached_registry().await?.topic(name) {
            return Ok(t.clone());
        }
        Ok(self.refresh_registry().await?.topic(name)?.clone())
    }

    async fn fetch_registry(&self) -> Result<Registry, MasterError> {
        let key = keys::registry(&self.inner.bus).expect("bus name checked");
        let j = self.query_json(key, None).await?;
        let blocks = registry_blocks(&j);
        let mut r = Registry::default();
        for n in self.nodes().await? {
            let wired: BTreeSet<u8> = blocks
                .iter()
                .filter(|(node, _)| *node == n.id.get())
                .map(|(_, b)| *b)
                .collect();
            let Some(digest) = n.digest else { continue };
            if wired.is_empty() {
                continue;
            }
            let s = self.schema_of(digest).await?;
            r.add_schema(n.id, &s, |b| wired.contains(&b.number));
        }
        Ok(r)
    }

    /// Checks a put as the master would (name, direction, value) before sending it.
    async fn check_put(&self, topic: &str, value: &Value) -> Result<String, MasterError> {
        let t = self.topic_info(topic).await?;
        if t.dir != DataDirection::M2s {
            return Err(MasterError::Remote {
                kind: ErrorKind::BadValue,
                message: format!(
                    "topic {} is published by the node (s2m), not by a master",
                    fcan_master::text::Untrusted(topic)
                ),
            });
        }
        pack_message(&t.fields, value).map_err(|e| e.within(topic))?;
        self.key(keys::topic(&self.inner.bus, topic), topic)
    }
}

/// A request's or parameter's payload: its JSON, with NaN and the infinities (which JSON
/// lacks) as the strings `NaN`, `inf`, `-inf` the daemon reads as them — so it refuses
/// them saying why (must be finite), as a local master does, not as `null`.
fn payload(v: &Value) -> Vec<u8> {
    fn json(v: &Value) -> Json {
        match v {
            Value::Float(f) if f.is_nan() => Json::from("NaN"),
            Value::Float(f) if f.is_infinite() => Json::from(if *f > 0.0 { "inf" } else { "-inf" }),
            Value::Array(a) => Json::Array(a.iter().map(json).collect()),
            Value::Struct(s) => {
                Json::Object(s.iter().map(|(k, v)| (k.to_string(), json(v))).collect())
            }
            v => v.to_json(),
        }
    }
    json(v).to_string().into_bytes()
}

/// `v` with its struct fields in the schema's order (JSON objects arrive sorted by name;
/// the in-process master gives the schema's order).
fn in_order(v: Value, fields: &[fcan_core::ir::Field]) -> Value {
    match v {
        Value::Struct(mut got) => {
            let mut out = Vec::with_capacity(got.len());
            for f in fields {
                if let Some(i) = got.iter().position(|(n, _)| **n == *f.name) {
                    out.push(got.swap_remove(i));
                }
            }
            out.extend(got);
            Value::Struct(out)
        }
        v => v,
    }
}

/// Maps the daemon's `t_us` onto this process's clock (see the module doc).
struct Clock {
    /// Local instant of the daemon's t_us = 0, as estimated.
    origin: Option<Instant>,
}

impl Clock {
    /// `t_us` (daemon clock) read by the daemon no later than `now` (this clock).
    fn at(&mut self, t_us: u64) -> Instant {
        self.seen_at(t_us, Instant::now())
    }

    fn seen_at(&mut self, t_us: u64, now: Instant) -> Instant {
        let t = Duration::from_micros(t_us);
        let candidate = now.checked_sub(t).unwrap_or(now);
        let origin = match self.origin {
            // A smaller delay seen: a better estimate.
            Some(o) if candidate < o => candidate,
            // Over a second later than the estimate: the daemon restarted.
            Some(o) if candidate.duration_since(o) > Duration::from_secs(1) => candidate,
            Some(o) => o,
            None => candidate,
        };
        self.origin = Some(origin);
        origin + t
    }
}

// One shape for every method, the trait's (some need owned copies before the future).
#[allow(clippy::manual_async_fn)]
impl MasterApi for RemoteMaster {
    fn nodes(&self) -> impl Future<Output = Result<Vec<NodeInfo>, MasterError>> + Send {
        async move { Ok(self.status().await?.nodes) }
    }

    fn registry(&self) -> impl Future<Output = Result<Registry, MasterError>> + Send {
        async move { Ok(Registry::clone(&*self.refresh_registry().await?)) }
    }

    fn status(&self) -> impl Future<Output = Result<Status, MasterError>> + Send {
        async move {
            let key = keys::status(&self.inner.bus).expect("bus name checked");
            let j = self.query_json(key, None).await?;
            // The daemon read its clock before this reply arrived: a bound for the
            // mapping of sample times (see the module doc).
            if let Some(t_us) = j.get("t_us").and_then(Json::as_u64) {
                self.lock_clock().at(t_us);
            }
            Status::from_json(&j).map_err(|e| internal(format!("status: {e}")))
        }
    }

    fn schema(
        &self,
        node: NodeId,
    ) -> impl Future<Output = Result<Option<Arc<NodeSchema>>, MasterError>> + Send {
        async move {
            let nodes = self.nodes().await?;
            match nodes.iter().find(|n| n.id == node).and_then(|n| n.digest) {
                Some(d) => Ok(Some(self.schema_of(d).await?)),
                None => Ok(None),
            }
        }
    }

    fn plan(&self, node: NodeId) -> impl Future<Output = Result<Option<Plan>, MasterError>> + Send {
        async move {
            let nodes = self.nodes().await?;
            let Some(n) = nodes.iter().find(|n| n.id == node) else {
                return Ok(None);
            };
            let key = keys::plan(&self.inner.bus, &n.name)
                .ok_or_else(|| internal(format!("node name {} is not key-safe", n.name)))?;
            let j = self.query_json(key, None).await?;
            if j.is_null() {
                return Ok(None);
            }
            Plan::from_json(&j)
                .map(Some)
                .map_err(|e| internal(format!("plan: {e}")))
        }
    }

    fn reprovision(&self, node: NodeId) -> impl Future<Output = Result<(), MasterError>> + Send {
        async move {
            let nodes = self.nodes().await?;
            let Some(n) = nodes.iter().find(|n| n.id == node) else {
                return Err(MasterError::Call(
                    fcan_master::engine::CallError::NodeNotOnline(node),
                ));
            };
            let key = keys::reprovision(&self.inner.bus, &n.name)
                .ok_or_else(|| internal(format!("node name {} is not key-safe", n.name)))?;
            self.query_json(key, None).await?;
            Ok(())
        }
    }

    /// One query on `fcan/<bus>/update/<node>` carrying the image; the daemon answers
    /// once the node runs it (progress comes as `update_progress` events), so the query
    /// waits as long as the daemon may ([`crate::server::UPDATE_REQUEST_TIMEOUT`]).
    fn update(
        &self,
        node: NodeId,
        image: fcan_master::update::UpdateImage,
        cfg: fcan_master::update::UpdateConfig,
    ) -> impl Future<Output = Result<fcan_master::engine::UpdateReport, MasterError>> + Send {
        async move {
            let key = self.update_key(node).await?;
            let payload = crate::wire::update_payload(&image, cfg.share);
            let bytes = self
                .query_for(
                    key,
                    Some(payload),
                    crate::server::UPDATE_REQUEST_TIMEOUT + self.inner.opts.timeout,
                )
                .await?;
            let j: Json = serde_json::from_slice(&bytes)
                .map_err(|e| internal(format!("reply is not JSON: {e}")))?;
            fcan_master::engine::UpdateReport::from_json(&j)
                .map_err(|e| internal(format!("update report: {e}")))
        }
    }

    /// A query on `fcan/<bus>/update/<node>` with the options `{"abort": true}`.
    fn abort_update(&self, node: NodeId) -> impl Future<Output = Result<(), MasterError>> + Send {
        async move {
            let key = self.update_key(node).await?;
            self.query_json(key, Some(crate::wire::abort_payload()))
                .await?;
            Ok(())
        }
    }

    fn events(&self) -> broadcast::Receiver<MasterEvent> {
        self.inner.events.subscribe()
    }

    /// The daemon puts the frames it sees on `fcan/<bus>/frames` while someone
    /// subscribes (one put per wake-up, docs/remote.md); each call subscribes anew. Times
    /// are mapped like sample times; frames the daemon could not put fast enough are lost
    /// (its `lost` lines are not passed on).
    fn frames(
        &self,
    ) -> impl Future<Output = Result<broadcast::Receiver<BusFrame>, MasterError>> + Send {
        async move {
            let key = keys::frames(&self.inner.bus).expect("bus name checked");
            self.status().await?; // anchors the clock mapping
            let (tx, rx) = broadcast::channel(fcan_master::FRAMES_BACKLOG);
            let clock = self.inner.clock.clone();
            let cb_tx = tx.clone();
            let sub = self
                .inner
                .session
                .declare_subscriber(key)
                .callback(move |s| {
                    let payload = s.payload().to_bytes();
                    let Ok(text) = std::str::from_utf8(&payload) else {
                        return;
                    };
                    for line in text.lines() {
                        let mut it = line.splitn(3, ' ');
                        let (Some(t), Some(dir), Some(frame)) = (it.next(), it.next(), it.next())
                        else {
                            continue;
                        };
                        let Ok(t_us) = t.parse::<u64>() else { continue };
                        let sent = match dir {
                            "tx" => true,
                            "rx" => false,
                            _ => continue, // `lost` and what a later daemon may add
                        };
                        let Ok(LogEntry::Frame(frame)) = candump::parse_frame(frame) else {
                            continue;
                        };
                        let at = clock.lock().unwrap_or_else(|p| p.into_inner()).at(t_us);
                        let _ = cb_tx.send(BusFrame::new(frame, at, sent));
                    }
                })
                .await
                .map_err(unreachable)?;
            // The subscription lives while a receiver does.
            tokio::spawn(async move {
                while tx.receiver_count() > 0 {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                drop(sub);
            });
            Ok(rx)
        }
    }

    fn subscribe(
        &self,
        topic: &str,
    ) -> impl Future<Output = Result<mpsc::UnboundedReceiver<Sample>, MasterError>> + Send {
        let topic = topic.to_string();
        async move {
            let key = self.key(keys::topic(&self.inner.bus, &topic), &topic)?;
            // Unknown names fail here as on the master; the fields give the order.
            let fields = self.topic_info(&topic).await?.fields;
            // Anchor the clock mapping by a round trip before the first sample (a
            // subscription often starts with a backlog whose delay would skew it).
            self.status().await?;
            let (tx, rx) = mpsc::unbounded_channel();
            let name: Arc<str> = Arc::from(topic.as_str());
            let clock = self.inner.clock.clone();
            let cb_tx = tx.clone();
            let max = self.inner.opts.max_reply;
            let sub = self
                .inner
                .session
                .declare_subscriber(key)
                .callback(move |s| {
                    let payload = s.payload().to_bytes();
                    if payload.len() > max {
                        return;
                    }
                    let Some(value) = serde_json::from_slice::<Json>(&payload)
                        .ok()
                        .and_then(|j| Value::from_written_json(&j).ok())
                    else {
                        return;
                    };
                    let att = s
                        .attachment()
                        .and_then(|a| serde_json::from_slice::<Attachment>(&a.to_bytes()).ok());
                    let at = match att {
                        Some(a) => clock.lock().unwrap_or_else(|p| p.into_inner()).at(a.t_us),
                        None => Instant::now(),
                    };
                    let _ = cb_tx.send(Sample::new(name.clone(), in_order(value, &fields), at));
                })
                .await
                .map_err(unreachable)?;
            // The subscription lives until the receiver is dropped.
            tokio::spawn(async move {
                tx.closed().await;
                drop(sub);
            });
            Ok(rx)
        }
    }

    fn publish(
        &self,
        topic: &str,
        value: Value,
    ) -> impl Future<Output = Result<(), MasterError>> + Send {
        let topic = topic.to_string();
        async move {
            let key = self.check_put(&topic, &value).await?;
            self.inner
                .session
                .put(key, value.to_json().to_string())
                .await
                .map_err(unreachable)
        }
    }

    fn publish_many(
        &self,
        items: Vec<(String, Value)>,
    ) -> impl Future<Output = Result<(), MasterError>> + Send {
        async move {
            // All checked before any is sent, as the master does; the daemon checks again.
            for (t, v) in &items {
                self.check_put(t, v).await?;
            }
            // The daemon refuses an empty batch (a client's mistake seen in the status);
            // here, publishing nothing does nothing, as on the master.
            if items.is_empty() {
                return Ok(());
            }
            // One put, so the daemon publishes them together: a frame several of them
            // share goes out once, not once per topic.
            let key = keys::publish(&self.inner.bus).expect("bus name checked");
            self.inner
                .session
                .put(key, batch_json(&items).to_string())
                .await
                .map_err(unreachable)
        }
    }

    fn call(
        &self,
        service: &str,
        request: Value,
    ) -> impl Future<Output = Result<Value, MasterError>> + Send {
        let service = service.to_string();
        async move {
            let key = self.key(keys::service(&self.inner.bus, &service), &service)?;
            let j = self.query_json(key, Some(payload(&request))).await?;
            let v = Value::from_written_json(&j)?;
            let r = self.cached_registry().await?;
            Ok(match r.service(&service) {
                Ok(s) => in_order(v, &s.response),
                Err(_) => v,
            })
        }
    }

    fn param_get(&self, param: &str) -> impl Future<Output = Result<Value, MasterError>> + Send {
        let param = param.to_string();
        async move {
            let key = self.key(keys::param(&self.inner.bus, &param), &param)?;
            let j = self.query_json(key, None).await?;
            let v = j
                .get("value")
                .ok_or_else(|| internal("reply has no `value`"))?;
            Ok(Value::from_written_json(v)?)
        }
    }

    fn param_set(
        &self,
        param: &str,
        value: Value,
    ) -> impl Future<Output = Result<(), MasterError>> + Send {
        let set = self.param_set_read_back(param, value);
        async move { set.await.map(drop) }
    }

    /// One query: the daemon writes the parameter, reads it back and replies with the
    /// value the node holds (`{"value": V}`).
    fn param_set_read_back(
        &self,
        param: &str,
        value: Value,
    ) -> impl Future<Output = Result<Value, MasterError>> + Send {
        let param = param.to_string();
        async move {
            let key = self.key(keys::param(&self.inner.bus, &param), &param)?;
            let j = self.query_json(key, Some(payload(&value))).await?;
            let v = j
                .get("value")
                .ok_or_else(|| internal("reply has no `value`"))?;
            Ok(Value::from_written_json(v)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_anchored_clock_maps_a_backlog_to_its_bus_times() {
        let base = Instant::now();
        // A status reply: the daemon read t_us = 1000 ms, the reply arrived 0.2 ms later.
        let mut c = Clock { origin: None };
        c.seen_at(1_000_000, base + 1000 * MS + MS / 5);
        // Then a backlog: samples received by the daemon at 1001..1005 ms all arrive here
        // together at 1010 ms.
        let got: Vec<Instant> = (1..=5)
            .map(|k| c.seen_at(1_000_000 + k * 1000, base + 1010 * MS))
            .collect();
        for (k, at) in got.iter().enumerate() {
            let truth = base + (1001 + k as u32) * MS;
            let err = at.duration_since(truth);
            assert!(err <= MS / 5, "sample {k}: {err:?} late");
        }
        // Unanchored, the same backlog maps to its own arrival: the first sample 9 ms late.
        let mut raw = Clock { origin: None };
        let first = raw.seen_at(1_001_000, base + 1010 * MS);
        assert_eq!(first.duration_since(base + 1001 * MS), 9 * MS);
    }

    #[test]
    fn a_daemon_restart_re_anchors() {
        let base = Instant::now();
        let mut c = Clock { origin: None };
        c.seen_at(5_000_000, base + 5000 * MS);
        // The daemon restarted: its clock counts from zero again, 2 s later.
        let at = c.seen_at(1000, base + 7001 * MS);
        assert_eq!(at, base + 7001 * MS);
        // ... and later samples map by the new origin.
        assert_eq!(c.seen_at(3000, base + 7010 * MS), base + 7003 * MS);
    }
}
