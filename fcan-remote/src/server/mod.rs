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
//! The server's jobs, one module each: `puts` (puts in, queued and published), `queries`
//! (queryables answered: requests decoded, the master asked, replies encoded, sans I/O),
//! `forward` (samples and frames out); this module holds the shared state, the start,
//! the status, the Zenoh side of queries (taken, bounded, replied) and, as a face of
//! [`fcan_master::serving::Supervisor`], which nodes are served.
//!
//! Bounded: payloads over [`ServerOptions::max_payload`] are refused, at most
//! [`ServerOptions::max_in_flight`] queries run at once (more are answered `busy`), each
//! for at most [`ServerOptions::request_timeout`]; puts wait in a queue of
//! [`ServerOptions::put_queue`] (a put that finds it full is refused) for at most
//! [`ServerOptions::put_wait`] (then it is refused `busy`).
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

mod forward;
mod puts;
mod queries;

use forward::{forward, forward_frames, TopicOut};
use puts::Put;
use queries::{QKind, Request};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fcan_core::msg::DataDirection;
use fcan_master::json::event_to_json;
use fcan_master::registry::Registry;
use fcan_master::serving::{lock, Face, NodeTasks, ServedNode, ServedSet, Supervisor, Unserved};
use fcan_master::MasterEvent;
use fcan_master::{Master, MasterApi, NodeInfo};
use serde_json::Value as Json;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use zenoh::query::{Query, Queryable};
use zenoh::sample::Locality;
use zenoh::Session;

use crate::keys::{self};
use crate::wire::{Attachment, ErrorReply};
use crate::RemoteError;
use fcan_master::ErrorKind;

/// How long [`Server::start`] waits for another server of the same bus name to answer.
const BUS_PROBE: Duration = Duration::from_secs(2);

/// The target of the server's `tracing` events (nodes served, puts refused). Each carries
/// the bus name as its `bus` field and is a child of the span current when
/// [`Server::start`] was called.
const TARGET: &str = "fcan::remote";

/// The longest an update query runs on the daemon: the transfer of the largest image
/// at a small bus share, the node's reboot and provisioning (the engine ends the update
/// earlier when the node falls silent).
pub const UPDATE_REQUEST_TIMEOUT: Duration = Duration::from_secs(3600);

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
    /// (default 1024; it bounds memory, `put_wait` bounds time).
    pub put_queue: usize,
    /// How long a put may wait in the queue: one that waited longer is refused as
    /// `busy` (counted in `busy_puts`), so the queue never holds seconds of commands
    /// that would reach the bus stale (default 50 ms).
    pub put_wait: Duration,
    /// The status put period (default 1 s).
    pub status_period: Duration,
    /// The daemon's clock origin: samples' `t_us` count from it (default: when the
    /// options were made; give every bus of one daemon the same).
    pub clock: Instant,
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
            put_wait: Duration::from_millis(50),
            status_period: Duration::from_secs(1),
            clock: Instant::now(),
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
    /// Puts refused because the client outran the bus (counted in `rejected_puts` too):
    /// the master's backlog limit (kind `busy`), the put queue full, or a put that
    /// waited longer than [`ServerOptions::put_wait`].
    pub busy_puts: u64,
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
    busy_puts: AtomicU64,
    samples: AtomicU64,
    sample_groups: AtomicU64,
}

/// What the server holds for one RUNNING node (the [`Face::Node`] the supervisor
/// keeps): its sample forwarder, aborted on drop, and its liveliness token, dropped
/// with it.
struct NodeServed {
    _tasks: NodeTasks,
    _token: Option<zenoh::liveliness::LivelinessToken>,
}

struct Shared<M> {
    master: M,
    session: Session,
    bus: String,
    opts: ServerOptions,
    /// The span current at start: the parent of the server's events, which run on
    /// tasks and Zenoh's threads where no span of the caller's is current.
    span: tracing::Span,
    counters: Arc<Counters>,
    inflight: Arc<Semaphore>,
    rt: tokio::runtime::Handle,
    /// RUNNING nodes by id: the [`Supervisor`]'s set, which it fills.
    served: ServedSet<NodeServed>,
    /// Bus load over the last status period (0–1).
    load: Mutex<f64>,
    /// The master's registry, for checking batches without a copy of it per batch (a
    /// client may stream one every millisecond); dropped on every engine event and
    /// status tick, when what it holds may have changed. A copy a moment stale can only
    /// word a refusal differently: `Master::publish_many` checks the whole batch again
    /// against its own before staging any of it.
    registry: Mutex<Option<Arc<Registry>>>,
}

/// A running server. Dropping it stops serving (queryables and subscriptions are
/// undeclared, liveliness tokens dropped); the master goes on.
pub struct Server<M = Master> {
    shared: Arc<Shared<M>>,
    /// Stops serving every node (the supervisor's `stop`: their forwarders and tokens
    /// dropped).
    stop: Box<dyn Fn() + Send + Sync>,
    tasks: Vec<JoinHandle<()>>,
    _queryables: Vec<Queryable<()>>,
    _puts: [zenoh::pubsub::Subscriber<()>; 2],
}

impl<M> Drop for Server<M> {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        (self.stop)();
    }
}

impl<M: MasterApi> Server<M> {
    /// Serves `master`'s bus as `bus` (a key-safe name, `[A-Za-z0-9_-]+`) on `session`.
    /// Must be called within a tokio runtime.
    pub async fn start(
        master: M,
        session: &Session,
        bus: &str,
        opts: ServerOptions,
    ) -> Result<Self, RemoteError> {
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
        let (put_tx, put_rx) = tokio::sync::mpsc::channel::<Put>(opts.put_queue);
        let shared = Arc::new(Shared {
            master,
            session: session.clone(),
            bus: bus.to_string(),
            inflight: Arc::new(Semaphore::new(opts.max_in_flight)),
            opts,
            span: tracing::Span::current(),
            counters: Arc::default(),
            rt: tokio::runtime::Handle::current(),
            served: ServedSet::new(),
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
            (keys::all_of(bus, "update"), QKind::Update),
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
        let sup = Supervisor::with_set(
            shared.master.clone(),
            Arc::new(RemoteFace(shared.clone())),
            shared.served.clone(),
            shared.opts.status_period,
        );
        sup.resync().await;
        let mut tasks = tasks;
        tasks.push(sup.spawn());
        Ok(Self {
            shared,
            stop: Box::new(move || sup.stop()),
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
        self.shared
            .served
            .nodes()
            .into_iter()
            .map(|n| n.name)
            .collect()
    }
}

impl<M: MasterApi> Shared<M> {
    fn counters(&self) -> ServerCounters {
        let c = &self.counters;
        ServerCounters {
            puts: c.puts.load(Ordering::Relaxed),
            rejected_puts: c.rejected_puts.load(Ordering::Relaxed),
            queries: c.queries.load(Ordering::Relaxed),
            busy: c.busy.load(Ordering::Relaxed),
            busy_puts: c.busy_puts.load(Ordering::Relaxed),
            samples: c.samples.load(Ordering::Relaxed),
            sample_groups: c.sample_groups.load(Ordering::Relaxed),
        }
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

    /// The status JSON: `fcan_master::Status::to_json` plus `bus`, `t_us`, `load`,
    /// `rejected_puts`, `busy_puts`, `puts`, `queries`, `busy`, `samples_put`,
    /// `sample_groups_put`.
    async fn status_json(&self) -> Result<Json, fcan_master::MasterError> {
        queries::status_json(&self.master, self).await
    }

    /// `Err` unless the node of `name` is RUNNING (and served).
    async fn not_running(&self, name: &str) -> Result<(), ErrorReply> {
        queries::not_running(&self.master, self, name).await
    }

    /// Takes one query from Zenoh and sends its replies: `busy` at once when
    /// [`ServerOptions::max_in_flight`] run already; otherwise decoded and answered by
    /// the sans-I/O core ([`queries`]) within [`ServerOptions::request_timeout`].
    fn on_query(this: &Arc<Self>, k: QKind, q: Query) {
        this.counters.queries.fetch_add(1, Ordering::Relaxed);
        let Ok(permit) = this.inflight.clone().try_acquire_owned() else {
            this.counters.busy.fetch_add(1, Ordering::Relaxed);
            let e = ErrorReply::new(ErrorKind::Busy, "too many requests in flight; retry later");
            this.rt.spawn(async move {
                let _ = q.reply_err(e.to_bytes()).await;
            });
            return;
        };
        let sh = this.clone();
        this.rt.spawn(async move {
            let _permit = permit;
            let payload = q.payload().map(|p| p.to_bytes()).unwrap_or_default();
            // An update carries an image and lasts as long as its transfer and the
            // node's reboot: its own bounds (the engine's update has its own timeouts).
            let (max_payload, timeout) = match k {
                QKind::Update => (
                    fcan_master::update::MAX_IMAGE_LEN + 64 * 1024,
                    UPDATE_REQUEST_TIMEOUT,
                ),
                _ => (sh.opts.max_payload, sh.opts.request_timeout),
            };
            let answer = async {
                let req = Request::decode(k, q.key_expr(), &payload, max_payload)?;
                queries::answer(&sh.master, &*sh, req).await
            };
            let answer = match tokio::time::timeout(timeout, answer).await {
                Ok(a) => a,
                Err(_) => Err(ErrorReply::new(
                    ErrorKind::Timeout,
                    format!("no answer within {timeout:?}"),
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
    async fn put_event(&self, e: &MasterEvent) {
        // The master marks its registry stale before sending the event.
        self.forget_registry();
        if let Some(j) = event_to_json(e) {
            let key = keys::events(&self.bus).expect("bus name checked");
            let _ = self.session.put(&key, j.to_string()).await;
        }
    }

    /// Starts serving RUNNING node `n`: one forwarding task for its s2m topics and its
    /// liveliness token.
    async fn serve(&self, n: &NodeInfo, registry: &Registry) -> NodeServed {
        let mut tasks = NodeTasks::new();
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
        tracing::info!(
            target: TARGET,
            parent: &self.span,
            bus = %self.bus,
            node = %fcan_master::text::Untrusted(&n.name),
            "node {} (id {}) running: serving {} topic(s)",
            fcan_master::text::Untrusted(&n.name),
            n.id,
            topics
        );
        NodeServed {
            _tasks: tasks,
            _token: token,
        }
    }
}

/// The server as the [`Supervisor`]'s face: serving a node is forwarding its samples and
/// holding its liveliness token.
struct RemoteFace<M>(Arc<Shared<M>>);

impl<M: MasterApi> Face for RemoteFace<M> {
    type Node = NodeServed;

    async fn serve(&self, node: &NodeInfo, registry: &Registry) -> Option<NodeServed> {
        Some(self.0.serve(node, registry).await)
    }

    fn unserve(&self, node: &ServedNode, served: NodeServed, why: &Unserved) {
        // Dropping the handle aborts its forwarder and drops its token.
        drop(served);
        let name = &node.name;
        if why.is_logged() {
            tracing::info!(
                target: TARGET,
                parent: &self.0.span,
                bus = %self.0.bus,
                node = %fcan_master::text::Untrusted(name),
                "node {} no longer served as running ({why})",
                fcan_master::text::Untrusted(name)
            );
        }
    }

    async fn on_event(&self, e: &MasterEvent, _name: Option<&str>) {
        self.0.put_event(e).await;
    }
}
