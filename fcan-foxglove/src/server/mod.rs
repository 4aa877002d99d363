//! The shell: one master served by the `foxglove` crate's WebSocket server. What it
//! advertises comes from [`crate::mapping`]; this module only moves things between the
//! master and the server.
//!
//! * Channels live in a private `foxglove::Context`, so two servers in one process (two
//!   buses) never share one.
//! * A topic is subscribed at the master only while at least one client subscribes to
//!   its channel (the listener's `on_subscribe`/`on_unsubscribe`); an unwatched server
//!   decodes nothing.
//! * Nodes come and go: the served set is kept the running set by
//!   [`fcan_master::serving::Supervisor`] (on every master event that changes who runs,
//!   and every [`FoxgloveOptions::resync_period`] as a backstop), which holds each
//!   node's handle (`NodeServed`); a stopped node's handle is dropped: its channels are
//!   closed (clients see them unadvertised), its services removed, its parameters
//!   forgotten.
//! * Client input is bounded: publishes wait in one queue of
//!   [`FoxgloveOptions::publish_queue`] (full → refused), payloads over
//!   [`FoxgloveOptions::max_payload`] are refused, and nothing a client sends can panic
//!   or block the server's poll loop (callbacks only lock briefly and spawn).
//! * A client that outruns the bus is told so: the master admits commands by bus time
//!   (docs/protocol.md §5.5) and refuses the rest `busy`; the client gets an error
//!   status saying so (at most one a second per topic, with the count of the others),
//!   and [`FoxgloveCounters::busy`] counts them. The queue in front of the master holds
//!   messages not yet admitted, not commands waiting for the bus: the master answers
//!   each at once (admitted or busy), several at a time, so the queue drains at the
//!   master's pace of answering, whatever the bus carries; and a message that waited
//!   longer than [`FoxgloveOptions::publish_wait`] for that (a client faster than the
//!   server) is refused busy too. So what the face holds is bounded in time, and what
//!   the master holds in bus time; the queue's length only bounds memory.
//!
//! The server's jobs, one module each, with their decisions as plain functions tested
//! there: `topics` (channels, watching and forwarding, client publishes admitted or
//! refused), `services` (calls), `parameters` (reads and writes), `graph` (the
//! connection graph and the statuses a node leaves); this module holds the shared
//! state, the start and stop, the statuses' pace and, as a face of the supervisor,
//! what serving one node holds.

mod graph;
mod parameters;
mod services;
mod topics;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use fcan_core::msg::DataDirection;
use fcan_master::registry::{ParamInfo, Registry};
use fcan_master::serving::{lock, Face, ServedNode, ServedSet, Supervisor, Unserved};
use fcan_master::text::Untrusted;
use fcan_master::MasterApi;
use fcan_master::MasterEvent;
use fcan_master::NodeInfo;
use foxglove::websocket::{AnyClient, Capability, Client, Status, StatusLevel};
use foxglove::{ChannelId, Context, WebSocketServer, WebSocketServerHandle};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::gate::{self, Gate, Pacer};
use crate::mapping::{WallClock, MESSAGE_ENCODING};
use parameters::Params;
use topics::{Listener, Publish, Told, TopicChannel};

/// The target of the server's `tracing` events (nodes served, publishes refused). Each
/// is a child of the span current when [`FoxgloveServer::start`] was called, so a program
/// serving several masters tells them apart by starting each in a span of its own.
pub(crate) const TARGET: &str = "fcan::foxglove";

/// How a [`FoxgloveServer`] runs.
#[derive(Clone)]
#[non_exhaustive]
pub struct FoxgloveOptions {
    /// The server's name, shown by the app (default `fcan`).
    pub name: String,
    /// Messages queued per client before the oldest are dropped (default 1024).
    pub message_backlog: usize,
    /// The largest client message (publish, service request) accepted, bytes
    /// (default 64 KiB).
    pub max_payload: usize,
    /// The largest WebSocket message or frame a client may send, bytes (default
    /// 8 MiB): a larger one closes the connection with close code 1009 (message too
    /// big) and the reason.
    pub max_client_message: usize,
    /// Client publishes waiting to be published; one that finds the queue full is
    /// refused (default 1024). A bound on memory: how long a message may wait is
    /// [`FoxgloveOptions::publish_wait`].
    pub publish_queue: usize,
    /// How long a client's publish may wait in the queue for the master before it is
    /// refused as busy (default 50 ms). The master itself holds a command for at most
    /// its backlog bound of bus time (20 ms by default, docs/protocol.md §5.5); a
    /// command older than this would only delay the ones after it.
    pub publish_wait: Duration,
    /// Parameter reads running at once when a client asks for all of them (default 8).
    pub param_reads: usize,
    /// How often the served nodes are checked against the running ones, besides on
    /// every master event (default 1 s).
    pub resync_period: Duration,
}

impl Default for FoxgloveOptions {
    fn default() -> Self {
        FoxgloveOptions {
            name: "fcan".into(),
            message_backlog: 1024,
            max_payload: 64 * 1024,
            max_client_message: 8 << 20,
            publish_queue: 1024,
            publish_wait: Duration::from_millis(50),
            param_reads: 8,
            resync_period: Duration::from_secs(1),
        }
    }
}

/// What a [`FoxgloveServer`] did with its clients' publishes so far
/// ([`FoxgloveServer::counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FoxgloveCounters {
    /// Client publishes the master accepted (sent to the node).
    pub published: u64,
    /// Client publishes refused, for any reason; each client is told, at most once a
    /// second per topic and kind (with the count of the others).
    pub refused: u64,
    /// Of `refused`: refused by the master because more commands already wait for the
    /// bus than it admits (its `busy`, docs/protocol.md §5.5): the client outran the bus.
    pub busy: u64,
    /// Of `refused`: refused because [`FoxgloveOptions::publish_queue`] messages already
    /// waited for the master: the client outran the server.
    pub queue_full: u64,
    /// Of `refused`: refused because it waited longer than
    /// [`FoxgloveOptions::publish_wait`] for the master: the client outran the server.
    pub stale: u64,
}

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FoxgloveError {
    /// The WebSocket server failed (the address is taken, …).
    #[error("Foxglove server: {0}")]
    Server(#[from] foxglove::FoxgloveError),
    /// The address cannot be listened on (taken, not this machine's, …).
    #[error("Foxglove server: {0}")]
    Bind(#[from] std::io::Error),
}

/// A running Foxglove WebSocket server for one master. Dropping it (or [`stop`]) stops
/// serving: clients are disconnected, the port is released; the master goes on.
///
/// [`stop`]: FoxgloveServer::stop
pub struct FoxgloveServer {
    shared: Arc<dyn Served>,
    /// Stops serving every node (the supervisor's `stop`: each node's handle dropped,
    /// which closes its channels and aborts its forwarders).
    stop: Box<dyn Fn() + Send + Sync>,
    addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for FoxgloveServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FoxgloveServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl FoxgloveServer {
    /// Serves `master` on `addr` (port 0: any free port, see [`local_addr`]). Must be
    /// called within a multi-threaded tokio runtime.
    ///
    /// [`local_addr`]: FoxgloveServer::local_addr
    pub async fn start<M: MasterApi>(
        master: M,
        addr: SocketAddr,
        opts: FoxgloveOptions,
    ) -> Result<FoxgloveServer, FoxgloveError> {
        // Clients come through the relay (`gate`) on `addr`; the crate's server listens
        // on a loopback port of its own behind it.
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (publish_tx, publish_rx) = mpsc::channel(opts.publish_queue.max(1));
        let ctx = Context::new();
        let shared = Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            master,
            ctx: ctx.clone(),
            rt: Handle::current(),
            span: tracing::Span::current(),
            clock: WallClock::now(),
            handle: Mutex::new(None),
            served: ServedSet::new(),
            advertising: Mutex::new(Vec::new()),
            publish_tx,
            counters: Counters::default(),
            told: Mutex::new(Told::default()),
            said: Mutex::new(Pacer::default()),
            opts: opts.clone(),
        });
        let weak = Arc::downgrade(&shared);
        let handle = WebSocketServer::new()
            .context(&ctx)
            .name(opts.name.clone())
            .bind("127.0.0.1", 0)
            .capabilities([
                Capability::ClientPublish,
                Capability::Parameters,
                Capability::Services,
                Capability::ConnectionGraph,
            ])
            .supported_encodings([MESSAGE_ENCODING])
            .listener(Arc::new(Listener(weak.clone())))
            .parameter_handler(Arc::new(Params(weak.clone())))
            .message_backlog_size(opts.message_backlog)
            .start()
            .await?;
        let gate = Arc::new(Gate {
            inner: SocketAddr::from(([127, 0, 0, 1], handle.port())),
            max_message: opts.max_client_message.max(1024),
            span: shared.span.clone(),
            log: Mutex::new(Pacer::default()),
        });
        *lock(&shared.handle) = Some(handle);
        // The backstop tick also covers a remote master's events that arrive before its
        // node list shows the node.
        let sup = Supervisor::with_set(
            shared.master.clone(),
            shared.clone(),
            shared.served.clone(),
            opts.resync_period,
        );
        let tasks = vec![
            tokio::spawn(gate::serve(listener, gate)),
            tokio::spawn(shared.clone().publish_worker(publish_rx)),
            sup.spawn(),
        ];
        sup.resync().await;
        tracing::info!(target: TARGET, parent: &shared.span, "serving on ws://{addr}");
        Ok(FoxgloveServer {
            shared,
            stop: Box::new(move || sup.stop()),
            addr,
            tasks,
        })
    }

    /// The address served (with the port chosen, if 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://ADDR`, what to type into the app's "Open connection".
    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// The channels advertised now (topic names, sorted).
    pub fn channels(&self) -> Vec<String> {
        self.shared.channels()
    }

    /// The topics subscribed at the master now: those some client watches (sorted).
    pub fn watched(&self) -> Vec<String> {
        self.shared.watched()
    }

    /// What was done with the clients' publishes so far.
    pub fn counters(&self) -> FoxgloveCounters {
        self.shared.counters()
    }

    /// Stops serving (as dropping does).
    pub fn stop(self) {}
}

impl Drop for FoxgloveServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        // The WebSocket server first (clients disconnected, as before any node goes),
        // then every node's handle (channels closed, forwarders aborted).
        self.shared.shutdown();
        (self.stop)();
    }
}

/// What [`FoxgloveServer`] needs of its shared state, without the master's type.
trait Served: Send + Sync {
    fn channels(&self) -> Vec<String>;
    fn watched(&self) -> Vec<String>;
    fn counters(&self) -> FoxgloveCounters;
    fn shutdown(&self);
}

/// The server as the [`Supervisor`]'s face: serving a node is advertising its
/// channels, services and parameters.
impl<M: MasterApi> Face for Shared<M> {
    type Node = NodeServed<M>;

    async fn serve(&self, node: &NodeInfo, registry: &Registry) -> Option<NodeServed<M>> {
        Some(Shared::serve(self, node, registry))
    }

    fn unserve(&self, node: &ServedNode, handle: NodeServed<M>, why: &Unserved) {
        Shared::unserve(self, node, handle, why);
    }

    async fn served_changed(&self, served: &ServedSet<NodeServed<M>>) {
        // Every node served is in the set now: its channels are found there.
        lock(&self.advertising).clear();
        self.publish_graph(served).await;
    }

    /// A collision is an error status in the app; a parameter write the node
    /// acknowledged, whoever made it, is heard by the clients subscribed to it.
    async fn on_event(&self, e: &MasterEvent, name: Option<&str>) {
        if let MasterEvent::Collision { .. } = e {
            return self.collision(e, name);
        }
        if let MasterEvent::ParamChanged { name, value, .. } = e {
            self.param_changed(name, value);
        }
    }
}

struct Shared<M> {
    /// Itself, for the handlers made after start (services of nodes that come).
    me: Weak<Self>,
    master: M,
    ctx: Arc<Context>,
    rt: Handle,
    /// The span current at start: the parent of the server's events, which run on
    /// tasks and the `foxglove` crate's threads where no span of the caller's is current.
    span: tracing::Span,
    opts: FoxgloveOptions,
    clock: WallClock,
    /// The WebSocket server; `None` once stopped.
    handle: Mutex<Option<WebSocketServerHandle>>,
    /// The served nodes, each with its channels, services, parameters and topics: the
    /// [`Supervisor`]'s set, which it fills; every lookup (a channel by id, a parameter
    /// or topic by name) is answered from it.
    served: ServedSet<NodeServed<M>>,
    /// The channels `serve` built for the node it is serving, which the set does not
    /// hold until `serve` returns: a client may subscribe to a channel as soon as it is
    /// advertised, before the supervisor holds the node. Cleared when the set changed.
    advertising: Mutex<Vec<Arc<TopicChannel>>>,
    publish_tx: mpsc::Sender<Publish>,
    counters: Counters,
    /// When each (client, kind of refusal, topic) was last told of a refused publish,
    /// and how many refusals of that kind it was not told of since.
    told: Mutex<Told>,
    /// The pace of the other statuses a client's requests raise (per client and kind).
    said: Mutex<Pacer>,
}

/// The longest name (topic, parameter, encoding) a status echoes back; a longer one is
/// cut there, with `…`.
const ECHOED: usize = 64;

/// `name` as a status or log line shows what a client sent: escaped
/// ([`Untrusted`]) and cut to [`ECHOED`] characters.
fn shown(name: &str) -> String {
    let text = Untrusted(name).to_string();
    match text.char_indices().nth(ECHOED) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// [`FoxgloveCounters`], as they are counted.
#[derive(Default)]
struct Counters {
    published: AtomicU64,
    /// Also the log's throttle.
    refused: AtomicU64,
    busy: AtomicU64,
    queue_full: AtomicU64,
    stale: AtomicU64,
}

/// What the server holds for one node it serves (the [`Face::Node`] the supervisor
/// keeps in its set): its channels, services, parameters and topics. Dropping it takes
/// the node off the server: its channels are closed (clients see them go, their
/// forwarders aborted) and its services removed.
struct NodeServed<M> {
    /// The server, to remove the services from.
    shared: Weak<Shared<M>>,
    channels: Vec<Arc<TopicChannel>>,
    services: Vec<String>,
    /// Its parameters by name.
    params: BTreeMap<String, ParamInfo>,
    /// Its topics and their direction: a client may publish the m2s ones.
    topics: BTreeMap<String, DataDirection>,
}

impl<M> Drop for NodeServed<M> {
    fn drop(&mut self) {
        // Never under the set's lock (the supervisor takes a handle out first): closing
        // a subscribed channel calls `on_unsubscribe`, which reads the set.
        for c in &self.channels {
            c.close();
        }
        if let Some(s) = self.shared.upgrade() {
            s.with_server(|h| h.remove_services(&self.services));
        }
    }
}

impl<M: MasterApi> Served for Shared<M> {
    fn channels(&self) -> Vec<String> {
        let mut v = self.served.flat_map(|s| {
            s.handle
                .channels
                .iter()
                .map(|c| c.name.clone())
                .collect::<Vec<_>>()
        });
        v.sort();
        v
    }

    fn watched(&self) -> Vec<String> {
        let mut v = self.served.flat_map(|s| {
            s.handle
                .channels
                .iter()
                .filter(|c| c.is_forwarding())
                .map(|c| c.name.clone())
                .collect::<Vec<_>>()
        });
        v.sort();
        v
    }

    fn counters(&self) -> FoxgloveCounters {
        let c = &self.counters;
        FoxgloveCounters {
            published: c.published.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            busy: c.busy.load(Ordering::Relaxed),
            queue_full: c.queue_full.load(Ordering::Relaxed),
            stale: c.stale.load(Ordering::Relaxed),
        }
    }

    fn shutdown(&self) {
        lock(&self.advertising).clear();
        // Outside the lock: stopping calls back into the listener.
        let handle = lock(&self.handle).take();
        if let Some(h) = handle {
            // Dropping the shutdown handle aborts the client tasks at once.
            drop(h.stop());
        }
    }
}

impl<M> Shared<M> {
    /// Runs `f` with the WebSocket server, unless it has stopped.
    fn with_server(&self, f: impl FnOnce(&WebSocketServerHandle)) {
        if let Some(h) = lock(&self.handle).as_ref() {
            f(h);
        }
    }
}

impl<M: MasterApi> Shared<M> {
    /// Handlers keep a weak reference, so the server they are registered with does
    /// not keep the state (and the master) alive.
    fn weak(&self) -> Weak<Self> {
        self.me.clone()
    }

    /// The channel Foxglove knows as `id`, of a served node (or of the node being
    /// served).
    fn channel(&self, id: ChannelId) -> Option<Arc<TopicChannel>> {
        // The node being served first: once `advertising` is cleared, the set holds it.
        let building = lock(&self.advertising)
            .iter()
            .find(|c| c.id() == id)
            .cloned();
        building.or_else(|| {
            self.served
                .find_map(|s| s.handle.channels.iter().find(|c| c.id() == id).cloned())
        })
    }

    /// Parameter `name` of a served node.
    fn param(&self, name: &str) -> Option<ParamInfo> {
        self.served.find_map(|s| s.handle.params.get(name).cloned())
    }

    /// The direction of topic `name` of a served node.
    fn topic_dir(&self, name: &str) -> Option<DataDirection> {
        self.served.find_map(|s| s.handle.topics.get(name).copied())
    }

    /// Every parameter of the served nodes, by name.
    fn param_names(&self) -> Vec<String> {
        let mut v = self
            .served
            .flat_map(|s| s.handle.params.keys().cloned().collect::<Vec<_>>());
        v.sort();
        v
    }

    /// Starts serving a running node: its services, channels, parameters.
    fn serve(&self, node: &NodeInfo, r: &Registry) -> NodeServed<M> {
        let name = node.name.as_str();
        let mine = |n: fcan_core::id::NodeId| n == node.id;
        let services = self.add_services(name, r.services.iter().filter(|s| mine(s.node)));
        // The warning `unserve` left, now that the node is back.
        self.node_back(name);
        let mut served = NodeServed {
            shared: self.weak(),
            channels: Vec::new(),
            services,
            params: BTreeMap::new(),
            topics: BTreeMap::new(),
        };
        // Channels are built under the `advertising` lock: each is advertised as it is
        // built, and a client's subscribe (`watch`, which takes this lock) must find it
        // before the supervisor holds this node. The `foxglove` crate calls no listener
        // while adding a channel.
        let mut building = lock(&self.advertising);
        building.clear();
        for t in r.topics.iter().filter(|t| mine(t.node)) {
            if let Some(c) = self.build_channel(t) {
                building.push(c.clone());
                served.channels.push(c);
            }
            served.topics.insert(t.name.clone(), t.dir);
        }
        drop(building);
        for p in r.params.iter().filter(|p| mine(p.node)) {
            served.params.insert(p.name.clone(), p.clone());
        }
        tracing::info!(
            target: TARGET,
            parent: &self.span,
            node = %Untrusted(name),
            "node {} (id {}) running: {} channel(s), {} service(s), {} parameter(s)",
            Untrusted(name),
            node.id,
            served.channels.len(),
            served.services.len(),
            served.params.len()
        );
        served
    }

    /// Stops serving a node: closes its channels (clients see them go), removes its
    /// services and parameters, and leaves a warning in the app until it is back.
    fn unserve(&self, node: &ServedNode, handle: NodeServed<M>, why: &Unserved) {
        // Dropping the handle closes the node's channels and removes its services.
        drop(handle);
        self.node_gone(&node.name, why);
        if !why.is_logged() {
            return;
        }
        tracing::info!(
            target: TARGET,
            parent: &self.span,
            node = %Untrusted(&node.name),
            "node {} no longer served ({})",
            Untrusted(&node.name),
            why
        );
    }

    /// Tells a client what its request came to, at most once a second per kind of
    /// status (with the count of the others): a client whose requests raise thousands
    /// of statuses gets a few, and stays connected. The kind is the text (digits aside),
    /// not only `kind`: two different refusals in one second (a value out of bounds,
    /// then a read-only bound) are both said; the same refusal repeated is paced.
    fn say(&self, client: &impl StatusTo, kind: &str, status: Status) {
        let key = format!("{} {kind}: {}", client.key(), status.message);
        let due = lock(&self.said).due(&key, Instant::now());
        if let Some(more) = due {
            let text = format!("{}{more}", status.message);
            client.status(Status::new(status.level, text));
        }
    }
}

/// A client a status can be sent to (a publishing client, or one asking for
/// parameters).
trait StatusTo {
    /// Its id, as the key of its statuses' pace.
    fn key(&self) -> u64;
    fn status(&self, status: Status);
}

impl StatusTo for Client {
    fn key(&self) -> u64 {
        u64::from(u32::from(self.id()))
    }
    fn status(&self, status: Status) {
        self.send_status(status);
    }
}

impl StatusTo for AnyClient {
    fn key(&self) -> u64 {
        u64::from(u32::from(self.id()))
    }
    fn status(&self, status: Status) {
        match status.level {
            StatusLevel::Error => self.send_error(status.message),
            StatusLevel::Warning => self.send_warning(status.message),
            _ => self.send_info(status.message),
        }
    }
}
