//! The server: one [`Master`]'s bus served over a Zenoh session under `fcan/<bus>/…`
//! (`docs/remote.md`).
//!
//! * every s2m sample of every RUNNING node is put on its topic key with the
//!   [`Attachment`], while a subscriber in another session matches the key; the server
//!   follows nodes coming, rebooting and going (engine events, and the status tick as a
//!   backstop) without a restart;
//! * a put on an m2s topic key is checked and published on the bus; a refused put is
//!   counted (`rejected_puts` in the status) and logged, never sent;
//! * a put on `fcan/<bus>/publish` carries several m2s topics' values: all are checked,
//!   then published as one batch ([`Master::publish_many`]), so a frame they share goes
//!   out once; one bad item refuses the whole batch;
//! * services, parameters, node info, schema blobs, status and registry are queryables;
//! * the status is put every second, every engine event as it happens;
//! * each RUNNING node holds a liveliness token.
//!
//! Bounded: payloads over [`ServerOptions::max_payload`] are refused, at most
//! [`ServerOptions::max_in_flight`] queries run at once (more are answered `busy`), each
//! for at most [`ServerOptions::request_timeout`]; puts wait in a queue of
//! [`ServerOptions::put_queue`] (a put that finds it full is refused).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use fcan_master::{Master, MasterOptions};
//! use fcan_remote::{server::{Server, ServerOptions}, session::SessionConfig};
//! let bus = fcan_master::transport::open("socketcan:can0", None)?;
//! let master = Master::start(bus, MasterOptions::default()).await?;
//! let zenoh = SessionConfig::daemon().open().await?.session;
//! let server = Server::start(master, &zenoh, "can0", ServerOptions::default()).await?;
//! tokio::time::sleep(std::time::Duration::from_secs(60)).await;
//! drop(server);
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fcan_core::hash::SchemaDigest;
use fcan_core::msg::DataDirection;
use fcan_master::engine::Event;
use fcan_master::json::event_to_json;
use fcan_master::registry::Registry;
use fcan_master::serving::{lock, Face, NodeKey, Supervisor, Unserved};
use fcan_master::value::{pack_message, Value};
use fcan_master::{Master, NodeInfo};
use serde_json::{json, Value as Json};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use zenoh::key_expr::KeyExpr;
use zenoh::query::{Query, Queryable};
use zenoh::sample::Locality;
use zenoh::Session;

use crate::keys::{self, Entity};
use crate::wire::{batch_from_json, kind, param_reply, registry_json, Attachment, ErrorReply};
use crate::RemoteError;

/// How long [`Server::start`] waits for another server of the same bus name to answer.
const BUS_PROBE: Duration = Duration::from_secs(2);

/// Where the server's log lines go (one line each, without the trailing newline).
pub use fcan_master::serving::Log;

/// How a server runs.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServerOptions {
    /// The largest put or query payload accepted, bytes (default 64 KiB).
    pub max_payload: usize,
    /// How long one query may take (default 10 s).
    pub request_timeout: Duration,
    /// Queries running at once; more are answered `busy` (default 64).
    pub max_in_flight: usize,
    /// Puts waiting to be published; a put that finds the queue full is refused
    /// (default 1024).
    pub put_queue: usize,
    /// The status put period (default 1 s).
    pub status_period: Duration,
    /// The daemon's clock origin: samples' `t_us` count from it (default: when the
    /// options were made; give every bus of one daemon the same).
    pub clock: Instant,
    /// Log lines (default: stderr, `fcan serve [<bus>]: …`).
    pub log: Option<Log>,
    /// How samples leave for the network: the latency/CPU trade-off
    /// ([`Delivery`]; default [`Delivery::Prompt`]).
    pub delivery: Delivery,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_payload: 64 * 1024,
            request_timeout: Duration::from_secs(10),
            max_in_flight: 64,
            put_queue: 1024,
            status_period: Duration::from_secs(1),
            clock: Instant::now(),
            log: None,
            delivery: Delivery::Prompt,
        }
    }
}

/// How the server's sample puts leave for the network. Measured side by side in
/// docs/performance.md ("fcan-remote"): on the project's 2-core machine, at 5,700
/// frames/s with every sample watched on its topic key, p99 0.8 ms for +20 % of a core
/// (prompt), 2.5 ms for +13 % (batched), 5.5 ms for +68 % (express).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// The samples that reach the server together (a frame's, or a burst's) are written
    /// together, at once: the last put of each wake-up is express, which sends the
    /// batch holding the others. Latency first (motors are behind this API).
    #[default]
    Prompt,
    /// Zenoh's adaptive batching alone: a put may wait while others are written, up to
    /// 1 ms. About half the CPU of `Prompt` under heavy load, for a tail of ~1–2 ms.
    Batched,
    /// Every sample written on its own, at once: the most CPU (two thread hand-offs and
    /// a write per sample), and under load the longest queues.
    Express,
}

impl std::str::FromStr for Delivery {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "prompt" => Ok(Delivery::Prompt),
            "batched" => Ok(Delivery::Batched),
            "express" => Ok(Delivery::Express),
            _ => Err(format!(
                "`{s}` is not a delivery: prompt (default), batched or express"
            )),
        }
    }
}

/// The server's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerCounters {
    /// Puts received on m2s topic keys and on the batch key (a batch counts once).
    pub puts: u64,
    /// Puts refused (bad key, value, node not running, queue full; a batch with any bad
    /// item, once): never sent.
    pub rejected_puts: u64,
    /// Queries received.
    pub queries: u64,
    /// Queries answered `busy`.
    pub busy: u64,
    /// Samples put on topic keys.
    pub samples: u64,
    /// Puts on `samples/<node>` keys (one frame's samples each).
    pub sample_groups: u64,
}

#[derive(Default)]
struct Counters {
    puts: AtomicU64,
    rejected_puts: AtomicU64,
    queries: AtomicU64,
    busy: AtomicU64,
    samples: AtomicU64,
    sample_groups: AtomicU64,
}

/// What the server keeps for one RUNNING node: its sample forwarders and its token.
struct NodeServed {
    name: String,
    tasks: Vec<JoinHandle<()>>,
    _token: Option<zenoh::liveliness::LivelinessToken>,
}

impl Drop for NodeServed {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

struct Shared {
    master: Master,
    session: Session,
    bus: String,
    opts: ServerOptions,
    log: Log,
    counters: Arc<Counters>,
    inflight: Arc<Semaphore>,
    rt: tokio::runtime::Handle,
    /// RUNNING nodes by id (the [`Supervisor`] decides which).
    served: Mutex<BTreeMap<u8, NodeServed>>,
    /// Bus load over the last status period (0–1).
    load: Mutex<f64>,
    /// The master's registry, for checking batches without a copy of it per batch (a
    /// client may stream one every millisecond); dropped on every engine event and
    /// status tick, when what it holds may have changed. A copy a moment stale can only
    /// word a refusal differently: `Master::publish_many` checks the whole batch again
    /// against its own before staging any of it.
    registry: Mutex<Option<Arc<Registry>>>,
}

/// A put waiting to be published. Single puts and batches share one queue, so they are
/// published in the order they arrived.
enum Put {
    /// A value for the m2s topic named (the payload of a put on its key).
    Topic(String, Vec<u8>),
    /// The payload of a put on `fcan/<bus>/publish`.
    Batch(Vec<u8>),
}

/// Which queryable a query arrived on.
#[derive(Clone, Copy, Debug)]
enum QKind {
    Service,
    Param,
    Node,
    Plan,
    Reprovision,
    Schema,
    Status,
    Registry,
}

/// A running server. Dropping it stops serving (queryables and subscriptions are
/// undeclared, liveliness tokens dropped); the master goes on.
pub struct Server {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    _queryables: Vec<Queryable<()>>,
    _puts: [zenoh::pubsub::Subscriber<()>; 2],
}

impl Drop for Server {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        lock(&self.shared.served).clear();
    }
}

impl Server {
    /// Serves `master`'s bus as `bus` (a key-safe name, `[A-Za-z0-9_-]+`) on `session`.
    /// Must be called within a tokio runtime.
    pub async fn start(
        master: Master,
        session: &Session,
        bus: &str,
        opts: ServerOptions,
    ) -> Result<Server, RemoteError> {
        if !keys::is_bus_name(bus) {
            return Err(RemoteError::BadBus(bus.to_string()));
        }
        // One server per bus name in one Zenoh network: a second would take the first's
        // samples for commands (and refuse and log every one). A session that reaches no
        // other server gets its answer at once; the timeout bounds a slow peer.
        let served = crate::client::buses(session, opts.request_timeout.min(BUS_PROBE))
            .await
            .map_err(|e| RemoteError::Zenoh(e.to_string()))?;
        if served.iter().any(|b| b == bus) {
            return Err(RemoteError::AlreadyServed(bus.to_string()));
        }
        let log = opts.log.clone().unwrap_or_else(|| {
            let bus = bus.to_string();
            Arc::new(move |line: &str| eprintln!("fcan serve [{bus}]: {line}"))
        });
        let (put_tx, put_rx) = tokio::sync::mpsc::channel::<Put>(opts.put_queue);
        let shared = Arc::new(Shared {
            master,
            session: session.clone(),
            bus: bus.to_string(),
            inflight: Arc::new(Semaphore::new(opts.max_in_flight)),
            opts,
            log,
            counters: Arc::default(),
            rt: tokio::runtime::Handle::current(),
            served: Mutex::new(BTreeMap::new()),
            load: Mutex::new(0.0),
            registry: Mutex::new(None),
        });
        let zerr = |e: zenoh::Error| RemoteError::Zenoh(e.to_string());
        let mut queryables = Vec::new();
        for (key, k) in [
            (keys::all_of(bus, "service"), QKind::Service),
            (keys::all_of(bus, "param"), QKind::Param),
            (keys::all_of(bus, "node"), QKind::Node),
            (keys::all_of(bus, "plan"), QKind::Plan),
            (keys::all_of(bus, "reprovision"), QKind::Reprovision),
            (keys::all_of(bus, "schema"), QKind::Schema),
            (keys::status(bus), QKind::Status),
            (keys::registry(bus), QKind::Registry),
        ] {
            let sh = shared.clone();
            let q = session
                .declare_queryable(key.expect("bus name checked"))
                .callback(move |q| Shared::on_query(&sh, k, q))
                .await
                .map_err(zerr)?;
            queryables.push(q);
        }
        // One subscriber for topic puts, one for batches, both feeding the one queue. The
        // server's own sample puts are not commands: remote origin only.
        let (sh, tx) = (shared.clone(), put_tx.clone());
        let topic_puts = session
            .declare_subscriber(keys::all_of(bus, "topic").expect("bus name checked"))
            .allowed_origin(Locality::Remote)
            .callback(move |s| sh.on_put(s, &tx))
            .await
            .map_err(zerr)?;
        let sh = shared.clone();
        let batch_puts = session
            .declare_subscriber(keys::publish(bus).expect("bus name checked"))
            .allowed_origin(Locality::Remote)
            .callback(move |s| sh.on_put(s, &put_tx))
            .await
            .map_err(zerr)?;
        let frames_pub = session
            .declare_publisher(keys::frames(bus).expect("bus name checked"))
            .await
            .map_err(zerr)?;
        let wake = Arc::new(tokio::sync::Notify::new());
        let frames_out = TopicOut::new(frames_pub, None, wake.clone()).await;
        let tasks = vec![
            tokio::spawn(forward_frames(
                shared.master.clone(),
                frames_out,
                wake,
                shared.opts.clock,
            )),
            tokio::spawn(shared.clone().put_worker(put_rx)),
            tokio::spawn(shared.clone().status_loop()),
        ];
        // The served set follows the nodes: on every event, and on each status period as
        // a backstop.
        let sup = Supervisor::new(
            shared.master.clone(),
            Arc::new(RemoteFace(shared.clone())),
            shared.opts.status_period,
        );
        sup.resync().await;
        let mut tasks = tasks;
        tasks.push(sup.spawn());
        Ok(Server {
            shared,
            tasks,
            _queryables: queryables,
            _puts: [topic_puts, batch_puts],
        })
    }

    /// The bus name served.
    pub fn bus(&self) -> &str {
        &self.shared.bus
    }

    /// The server's counters.
    pub fn counters(&self) -> ServerCounters {
        self.shared.counters()
    }

    /// The names of the nodes served as RUNNING now.
    pub fn running(&self) -> Vec<String> {
        lock(&self.shared.served)
            .values()
            .map(|n| n.name.clone())
            .collect()
    }
}

impl Shared {
    fn counters(&self) -> ServerCounters {
        let c = &self.counters;
        ServerCounters {
            puts: c.puts.load(Ordering::Relaxed),
            rejected_puts: c.rejected_puts.load(Ordering::Relaxed),
            queries: c.queries.load(Ordering::Relaxed),
            busy: c.busy.load(Ordering::Relaxed),
            samples: c.samples.load(Ordering::Relaxed),
            sample_groups: c.sample_groups.load(Ordering::Relaxed),
        }
    }

    /// A put refused: counted, logged (the first 20, then one in 1000, so a flood of
    /// bad puts cannot flood the log).
    fn reject_put(&self, topic: &str, reason: &str) {
        let n = self.counters.rejected_puts.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= 20 || n.is_multiple_of(1000) {
            (self.log)(&format!(
                "refused put #{n} on {}: {}",
                fcan_master::text::Untrusted(topic),
                fcan_master::text::Untrusted(reason)
            ));
        }
    }

    fn on_put(&self, s: zenoh::sample::Sample, queue: &tokio::sync::mpsc::Sender<Put>) {
        if s.kind() != zenoh::sample::SampleKind::Put {
            return;
        }
        self.counters.puts.fetch_add(1, Ordering::Relaxed);
        let key = s.key_expr().as_str();
        if s.payload().len() > self.opts.max_payload {
            return self.reject_put(
                key,
                &format!(
                    "payload of {} bytes exceeds the limit of {}",
                    s.payload().len(),
                    self.opts.max_payload
                ),
            );
        }
        let bytes = s.payload().to_bytes().into_owned();
        let put = match keys::parse(key) {
            Some((_, Entity::Topic(name))) => Put::Topic(name, bytes),
            Some((_, Entity::Publish)) => Put::Batch(bytes),
            _ => return self.reject_put(key, "not a topic or batch key"),
        };
        if queue.try_send(put).is_err() {
            self.reject_put(key, "too many puts waiting (queue full)");
        }
    }

    /// Publishes the queued puts in order.
    async fn put_worker(self: Arc<Self>, mut rx: tokio::sync::mpsc::Receiver<Put>) {
        while let Some(put) = rx.recv().await {
            let (name, bytes) = match put {
                Put::Topic(name, bytes) => (name, bytes),
                Put::Batch(bytes) => {
                    if let Err(why) = self.publish_batch(&bytes).await {
                        let key = keys::publish(&self.bus).expect("bus name checked");
                        self.reject_put(&key, &why);
                    }
                    continue;
                }
            };
            if let Err(why) = self.not_running(&name).await {
                self.reject_put(&name, &why.message);
                continue;
            }
            let value = match serde_json::from_slice::<Json>(&bytes)
                .map_err(|e| format!("not JSON: {e}"))
                .and_then(|j| Value::from_json(&j).map_err(|e| e.to_string()))
            {
                Ok(v) => v,
                Err(why) => {
                    self.reject_put(&name, &why);
                    continue;
                }
            };
            if let Err(e) = self.master.publish(&name, value).await {
                self.reject_put(&name, &e.to_string());
            }
        }
    }

    /// Publishes a batch (the payload of a put on `fcan/<bus>/publish`) with one
    /// [`Master::publish_many`], after checking every item as a put on its own key is
    /// checked (an m2s topic, its node RUNNING, the value packs): one bad item refuses
    /// the whole batch, nothing is sent, and the reason names the item.
    async fn publish_batch(&self, bytes: &[u8]) -> Result<(), String> {
        let items = batch_from_json(bytes)?;
        let mut registry = self.registry(false).await?;
        for (name, value) in &items {
            // As for a put on a topic key: a node that is not RUNNING is named as such
            // (its topics are not in the registry).
            self.not_running(name).await.map_err(|e| e.message)?;
            if registry.topic(name).is_err() {
                // A node may have come since the registry was taken.
                registry = self.registry(true).await?;
            }
            let t = registry.topic(name).map_err(|e| e.to_string())?;
            if t.dir != DataDirection::M2s {
                return Err(format!(
                    "topic {name} is published by the node (s2m), not by a master"
                ));
            }
            pack_message(&t.fields, value).map_err(|e| format!("{name}: {e}"))?;
        }
        self.master
            .publish_many(items)
            .await
            .map_err(|e| e.to_string())
    }

    /// The master's registry, the cached copy unless `fresh`.
    async fn registry(&self, fresh: bool) -> Result<Arc<Registry>, String> {
        if !fresh {
            if let Some(r) = lock(&self.registry).clone() {
                return Ok(r);
            }
        }
        let r = Arc::new(self.master.registry().await.map_err(|e| e.to_string())?);
        *lock(&self.registry) = Some(r.clone());
        Ok(r)
    }

    /// Drops the cached registry: nodes may have come, gone or rebooted.
    fn forget_registry(&self) {
        *lock(&self.registry) = None;
    }

    /// `Err` unless the node of `name` is RUNNING (and served).
    async fn not_running(&self, name: &str) -> Result<(), ErrorReply> {
        let node = keys::node_of(name);
        let served = lock(&self.served).values().any(|n| n.name == node);
        if served {
            return Ok(());
        }
        let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
        Err(match nodes.iter().find(|n| n.name == node) {
            Some(n) => ErrorReply::new(
                kind::NOT_RUNNING,
                format!("node {} is not running ({})", n.name, n.phase),
            ),
            None => ErrorReply::new(
                kind::UNKNOWN_NAME,
                format!(
                    "no node named `{}` on bus {}",
                    fcan_master::text::Untrusted(node),
                    self.bus
                ),
            ),
        })
    }

    fn on_query(this: &Arc<Self>, k: QKind, q: Query) {
        this.counters.queries.fetch_add(1, Ordering::Relaxed);
        let Ok(permit) = this.inflight.clone().try_acquire_owned() else {
            this.counters.busy.fetch_add(1, Ordering::Relaxed);
            let e = ErrorReply::new(kind::BUSY, "too many requests in flight; retry later");
            this.rt.spawn(async move {
                let _ = q.reply_err(e.to_bytes()).await;
            });
            return;
        };
        let sh = this.clone();
        this.rt.spawn(async move {
            let _permit = permit;
            let answer = match tokio::time::timeout(sh.opts.request_timeout, sh.answer(k, &q)).await
            {
                Ok(a) => a,
                Err(_) => Err(ErrorReply::new(
                    kind::TIMEOUT,
                    format!("no answer within {:?}", sh.opts.request_timeout),
                )),
            };
            match answer {
                Ok(replies) => {
                    for (key, bytes) in replies {
                        let _ = q.reply(key, bytes).await;
                    }
                }
                Err(e) => {
                    let _ = q.reply_err(e.to_bytes()).await;
                }
            }
        });
    }

    /// The replies to one query: (key, payload) pairs, or one error.
    async fn answer(&self, k: QKind, q: &Query) -> Result<Vec<(String, Vec<u8>)>, ErrorReply> {
        let payload = q
            .payload()
            .map(|p| p.to_bytes().into_owned())
            .unwrap_or_default();
        if payload.len() > self.opts.max_payload {
            return Err(ErrorReply::new(
                kind::BAD_VALUE,
                format!(
                    "payload of {} bytes exceeds the limit of {}",
                    payload.len(),
                    self.opts.max_payload
                ),
            ));
        }
        let qkey: &KeyExpr<'static> = q.key_expr();
        let own = |key: Option<String>| key.expect("bus name checked");
        match k {
            QKind::Status => {
                let s = self.status_json().await.map_err(|e| ErrorReply::of(&e))?;
                Ok(vec![(
                    own(keys::status(&self.bus)),
                    s.to_string().into_bytes(),
                )])
            }
            QKind::Registry => {
                let r = self
                    .master
                    .registry()
                    .await
                    .map_err(|e| ErrorReply::of(&e))?;
                Ok(vec![(
                    own(keys::registry(&self.bus)),
                    registry_json(&r).to_string().into_bytes(),
                )])
            }
            QKind::Node => {
                // A wildcard (`fcan/<bus>/node/*`) lists every node that matches.
                let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
                let mut out = Vec::new();
                for n in nodes {
                    let Some(key) = keys::node(&self.bus, &n.name) else {
                        continue;
                    };
                    let Ok(ke) = KeyExpr::try_from(key.clone()) else {
                        continue;
                    };
                    if qkey.intersects(&ke) {
                        out.push((key, n.to_json().to_string().into_bytes()));
                    }
                }
                if out.is_empty() && !is_wild(qkey) {
                    return Err(ErrorReply::new(
                        kind::UNKNOWN_NAME,
                        format!("no node at {qkey}"),
                    ));
                }
                Ok(out)
            }
            QKind::Plan => {
                if is_wild(qkey) {
                    return Ok(Vec::new());
                }
                let Some((_, Entity::Plan(name))) = keys::parse(qkey.as_str()) else {
                    return Err(ErrorReply::new(kind::UNKNOWN_NAME, "not a plan key"));
                };
                let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
                let Some(n) = nodes.iter().find(|n| n.name == name) else {
                    return Err(ErrorReply::new(
                        kind::UNKNOWN_NAME,
                        format!("no node {name} on this bus"),
                    ));
                };
                let plan = self
                    .master
                    .plan(n.id)
                    .await
                    .map_err(|e| ErrorReply::of(&e))?;
                let j = plan.map_or(Json::Null, |p| p.to_json());
                Ok(vec![(qkey.to_string(), j.to_string().into_bytes())])
            }
            QKind::Reprovision => {
                if is_wild(qkey) {
                    // Never on a wildcard: reprovisioning is one node at a time.
                    return Ok(Vec::new());
                }
                let Some((_, Entity::Reprovision(name))) = keys::parse(qkey.as_str()) else {
                    return Err(ErrorReply::new(kind::UNKNOWN_NAME, "not a reprovision key"));
                };
                let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
                let Some(n) = nodes.iter().find(|n| n.name == name) else {
                    return Err(ErrorReply::new(
                        kind::UNKNOWN_NAME,
                        format!("no node {name} on this bus"),
                    ));
                };
                self.master
                    .reprovision(n.id)
                    .await
                    .map_err(|e| ErrorReply::of(&e))?;
                Ok(vec![(qkey.to_string(), b"null".to_vec())])
            }
            QKind::Schema => {
                if is_wild(qkey) {
                    return Ok(Vec::new());
                }
                let Some((_, Entity::Schema(hex))) = keys::parse(qkey.as_str()) else {
                    return Err(ErrorReply::new(kind::UNKNOWN_NAME, "not a schema key"));
                };
                let digest = SchemaDigest::from_hex(&hex)
                    .ok_or_else(|| ErrorReply::new(kind::UNKNOWN_NAME, "not a SHA-256 in hex"))?;
                let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
                for n in nodes.iter().filter(|n| n.digest == Some(digest)) {
                    if let Some(s) = self
                        .master
                        .schema(n.id)
                        .await
                        .map_err(|e| ErrorReply::of(&e))?
                    {
                        return Ok(vec![(qkey.to_string(), s.blob.clone())]);
                    }
                }
                Err(ErrorReply::new(
                    kind::UNKNOWN_NAME,
                    format!("no schema {hex} on this bus"),
                ))
            }
            QKind::Service | QKind::Param => {
                if is_wild(qkey) {
                    return Ok(Vec::new());
                }
                let entity = keys::parse(qkey.as_str()).map(|(_, e)| e);
                let (name, is_param) = match entity {
                    Some(Entity::Service(n)) => (n, false),
                    Some(Entity::Param(n)) => (n, true),
                    _ => {
                        return Err(ErrorReply::new(
                            kind::UNKNOWN_NAME,
                            format!("not a service or param key: {qkey}"),
                        ))
                    }
                };
                self.not_running(&name).await?;
                let value = if payload.is_empty() {
                    None
                } else {
                    let j: Json = serde_json::from_slice(&payload).map_err(|e| {
                        ErrorReply::new(kind::BAD_VALUE, format!("payload is not JSON: {e}"))
                    })?;
                    Some(
                        Value::from_json(&j)
                            .map_err(|e| ErrorReply::new(kind::BAD_VALUE, e.to_string()))?,
                    )
                };
                let reply = match (is_param, value) {
                    (false, None) => {
                        return Err(ErrorReply::new(
                            kind::BAD_VALUE,
                            "a service call needs a JSON request payload",
                        ))
                    }
                    (false, Some(v)) => self.master.call(&name, v).await.map(|r| r.to_json()),
                    (true, None) => self.master.param_get(&name).await.map(|v| param_reply(&v)),
                    (true, Some(v)) => self
                        .master
                        .param_set(&name, v.clone())
                        .await
                        .map(|()| param_reply(&v)),
                };
                let reply = reply.map_err(|e| ErrorReply::of(&e))?;
                Ok(vec![(qkey.to_string(), reply.to_string().into_bytes())])
            }
        }
    }

    /// The status JSON: `fcan_master::Status::to_json` plus `bus`, `t_us`, `load`,
    /// `rejected_puts`, `puts`, `queries`, `busy`, `samples_put`, `sample_groups_put`.
    async fn status_json(&self) -> Result<Json, fcan_master::MasterError> {
        let s = self.master.status().await?;
        let mut j = s.to_json();
        let c = self.counters();
        if let Json::Object(m) = &mut j {
            m.insert("bus".into(), self.bus.clone().into());
            m.insert(
                "t_us".into(),
                (self.opts.clock.elapsed().as_micros() as u64).into(),
            );
            m.insert("load".into(), json!(*lock(&self.load)));
            m.insert("rejected_puts".into(), c.rejected_puts.into());
            m.insert("puts".into(), c.puts.into());
            m.insert("queries".into(), c.queries.into());
            m.insert("busy".into(), c.busy.into());
            m.insert("samples_put".into(), c.samples.into());
            m.insert("sample_groups_put".into(), c.sample_groups.into());
        }
        Ok(j)
    }

    async fn status_loop(self: Arc<Self>) {
        let key = keys::status(&self.bus).expect("bus name checked");
        let mut tick = tokio::time::interval(self.opts.status_period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<(Duration, Instant)> = None;
        loop {
            tick.tick().await;
            let Ok(s) = self.master.status().await else {
                return;
            };
            let now = Instant::now();
            if let Some((busy, at)) = last {
                let dt = now.duration_since(at).as_secs_f64();
                if dt > 0.0 {
                    *lock(&self.load) =
                        (s.bus_busy.saturating_sub(busy).as_secs_f64() / dt).min(1.0);
                }
            }
            last = Some((s.bus_busy, now));
            // What the registry holds may have changed without an event: take it again.
            self.forget_registry();
            if let Ok(j) = self.status_json().await {
                let _ = self.session.put(&key, j.to_string()).await;
            }
        }
    }

    /// Puts a master event on `fcan/<bus>/events`.
    async fn put_event(&self, e: &Event) {
        // The master marks its registry stale before sending the event.
        self.forget_registry();
        if let Some(j) = event_to_json(e) {
            let key = keys::events(&self.bus).expect("bus name checked");
            let _ = self.session.put(&key, j.to_string()).await;
        }
    }

    /// Starts serving RUNNING node `n`: one forwarding task for its s2m topics and its
    /// liveliness token.
    async fn serve(&self, n: &NodeInfo, registry: &Registry) -> bool {
        let mut tasks = Vec::new();
        let digest = n.digest.map(|d| d.to_string()).unwrap_or_default();
        // One forwarding task per node, subscribed at the master only while a
        // remote subscriber matches one of the node's keys (see `forward`).
        let wake = Arc::new(tokio::sync::Notify::new());
        let mut outs = BTreeMap::new();
        for t in registry
            .topics
            .iter()
            .filter(|t| t.node == n.id && t.dir == DataDirection::S2m)
        {
            let Some(key) = keys::topic(&self.bus, &t.name) else {
                continue;
            };
            if let Some(out) = self.topic_out(key, wake.clone()).await {
                outs.insert(t.name.clone(), out);
            }
        }
        let topics = outs.len();
        let group = match keys::samples(&self.bus, &n.name) {
            Some(key) => self.topic_out(key, wake.clone()).await,
            None => None,
        };
        tasks.push(tokio::spawn(forward(
            self.master.clone(),
            wake,
            outs,
            group,
            Attachment {
                t_us: 0,
                boot_id: n.boot_id,
                digest,
            },
            self.opts.clock,
            self.counters.clone(),
        )));
        let token = match keys::alive(&self.bus, &n.name) {
            Some(k) => self.session.liveliness().declare_token(k).await.ok(),
            None => None,
        };
        (self.log)(&format!(
            "node {} (id {}) running: serving {} topic(s)",
            fcan_master::text::Untrusted(&n.name),
            n.id,
            topics
        ));
        lock(&self.served).insert(
            n.id.get(),
            NodeServed {
                name: n.name.clone(),
                tasks,
                _token: token,
            },
        );
        true
    }
}

/// The server as the [`Supervisor`]'s face: serving a node is forwarding its samples and
/// holding its liveliness token.
struct RemoteFace(Arc<Shared>);

impl Face for RemoteFace {
    async fn serve(&self, node: &NodeInfo, registry: &Registry) -> bool {
        self.0.serve(node, registry).await
    }

    fn unserve(&self, key: NodeKey, name: &str, why: &Unserved) {
        // Dropping the entry aborts its forwarder and drops its token.
        let gone = lock(&self.0.served).remove(&key.id);
        if gone.is_some() {
            (self.0.log)(&format!(
                "node {} no longer served as running ({why})",
                fcan_master::text::Untrusted(name)
            ));
        }
    }

    async fn on_event(&self, e: &Event, _name: Option<&str>) {
        self.0.put_event(e).await;
    }
}

impl Shared {
    /// The publishers of one key the server puts samples on.
    async fn topic_out(&self, key: String, wake: Arc<tokio::sync::Notify>) -> Option<TopicOut> {
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

fn is_wild(k: &KeyExpr<'_>) -> bool {
    k.as_str().contains('*') || k.as_str().contains('$')
}

/// One served topic: its publisher and whether any subscriber matches it.
struct TopicOut {
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
    async fn new(
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
struct Group<'a>(&'a [fcan_master::Sample]);

impl serde::Serialize for Group<'_> {
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
async fn forward(
    master: Master,
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
                &Group(frame),
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
async fn forward_frames(
    master: Master,
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
        let r = rx.get_or_insert_with(|| master.frames());
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
