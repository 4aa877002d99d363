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
//!   and every [`FoxgloveOptions::resync_period`] as a backstop); a stopped node's channels are closed (clients see them unadvertised), its
//!   services removed, its parameters forgotten.
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

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use fcan_core::msg::DataDirection;
use fcan_master::registry::{ParamInfo, Registry};
use fcan_master::serving::{lock, Face, ServedNode, ServedSet, Supervisor, Unserved};
use fcan_master::text::Untrusted;
use fcan_master::MasterEvent;
use fcan_master::NodeInfo;
use fcan_master::{ErrorKind, MasterApi, MasterError};
use foxglove::websocket::service::{Handler, Request, Responder, Service, ServiceSchema};
use foxglove::websocket::{
    AnyClient, Capability, ChannelView, Client, ClientChannel, ClientId, ConnectionGraph,
    GetParametersResponder, Parameter, ParameterHandler, ServerListener, SetParametersResponder,
    Status, StatusLevel,
};
use foxglove::{
    ChannelBuilder, ChannelId, Context, PartialMetadata, RawChannel, Schema, WebSocketServer,
    WebSocketServerHandle,
};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::gate::{self, Gate, Pacer};
use crate::mapping::{self, ParamRef, WallClock, MESSAGE_ENCODING, SCHEMA_ENCODING};

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
            told: Mutex::new(HashMap::new()),
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

    /// A parameter write the node acknowledged, whoever made it (the CLI, Zenoh, ROS 2,
    /// this server): clients subscribed to the parameter hear the new value. (A write made
    /// here is also published after its answer, with the value read back; the same value
    /// twice changes nothing in the app.)
    async fn on_event(&self, e: &MasterEvent, name: Option<&str>) {
        if let MasterEvent::Collision { node, .. } = e {
            // Two boards answer to one id (docs/protocol.md §5.3): an error the user must
            // fix on the boards; the app shows it until this node's status changes.
            if let Some(text) = fcan_master::json::describe_event(e) {
                let id = status_id(name.unwrap_or(&format!("node{}", node.get())));
                self.with_server(|h| {
                    h.publish_status(Status::error(format!("fcan: {text}")).with_id(id))
                });
            }
            return;
        }
        let MasterEvent::ParamChanged { name, value, .. } = e else {
            return;
        };
        let Some(ty) = self.param(name).map(|p| p.decl.ty) else {
            return;
        };
        let p = mapping::to_parameter(name, ty, value);
        self.with_server(|h| h.publish_parameter_values(vec![p]));
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

/// See `Shared::told`.
type Told = HashMap<(ClientId, Refusal), HashMap<String, (Instant, u64)>>;

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

/// What kind of refusal a client is told of: each kind is reported at most once a
/// second per (client, topic), so a flood of one kind never hides the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Refusal {
    /// The message (its encoding, size, JSON, topic, value) or the master's answer to it.
    Bad,
    /// The client outran the bus (the master's `busy`) or the server (its queue full, a
    /// message waited too long for the master): the same message later may pass.
    Busy,
}

/// Whether the master refused because commands already wait for the bus (or too many
/// requests are in flight): the kind [`ErrorKind::Busy`], the same from an in-process
/// master and a remote one.
fn is_busy(e: &MasterError) -> bool {
    e.kind() == ErrorKind::Busy
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

/// One topic's channel.
struct TopicChannel {
    name: String,
    channel: Arc<RawChannel>,
    forwarding: Mutex<Forwarding>,
}

/// Who watches a channel, and its forwarder.
#[derive(Default)]
struct Forwarding {
    /// Clients subscribed.
    watchers: usize,
    /// Forwards the master's samples while watched.
    task: Option<JoinHandle<()>>,
    /// The node is no longer served: no forwarder is started again.
    closed: bool,
}

impl TopicChannel {
    fn id(&self) -> ChannelId {
        self.channel.id()
    }

    /// Whether its forwarder runs (the topic is subscribed at the master).
    fn is_forwarding(&self) -> bool {
        lock(&self.forwarding)
            .task
            .as_ref()
            .is_some_and(|t| !t.is_finished())
    }

    /// Stops forwarding for good and closes the channel.
    fn close(&self) {
        {
            let mut f = lock(&self.forwarding);
            f.closed = true;
            if let Some(t) = f.task.take() {
                t.abort();
            }
        }
        // Outside the lock: closing a subscribed channel calls `on_unsubscribe`.
        self.channel.close();
    }
}

/// Client publishes handed to the master at once by the publish worker (fewer than
/// `join_all`'s 30, so they are polled in order, one after the other).
const PIPELINE: usize = 16;

/// A client's message on one of its channels, waiting to be published.
struct Publish {
    /// When it arrived.
    at: Instant,
    client: Client,
    topic: String,
    encoding: String,
    payload: Vec<u8>,
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

    /// Starts serving a running node: its channels, services, parameters.
    fn serve(&self, node: &NodeInfo, r: &Registry) -> NodeServed<M> {
        let name = node.name.as_str();
        let mine = |n: fcan_core::id::NodeId| n == node.id;
        let mut served = NodeServed {
            shared: self.weak(),
            channels: Vec::new(),
            services: Vec::new(),
            params: BTreeMap::new(),
            topics: BTreeMap::new(),
        };
        let services: Vec<Service> = r
            .services
            .iter()
            .filter(|s| mine(s.node))
            .map(|s| {
                let spec = mapping::service_spec(s);
                served.services.push(spec.name.clone());
                let schema = ServiceSchema::new(spec.schema_name)
                    .with_request(
                        MESSAGE_ENCODING,
                        Schema::new(spec.request.0, SCHEMA_ENCODING, spec.request.1),
                    )
                    .with_response(
                        MESSAGE_ENCODING,
                        Schema::new(spec.response.0, SCHEMA_ENCODING, spec.response.1),
                    );
                Service::builder(spec.name.clone(), schema).handler(Call {
                    shared: self.weak(),
                    name: spec.name,
                })
            })
            .collect();
        self.with_server(|h| {
            if let Err(e) = h.add_services(services) {
                tracing::warn!(
                    target: TARGET,
                    parent: &self.span,
                    node = %Untrusted(name),
                    "services of node {}: {e}",
                    Untrusted(name)
                );
            }
            // The warning `unserve` left, now that the node is back.
            h.remove_status(vec![status_id(name)]);
        });
        // Channels are built under the `advertising` lock: each is advertised as it is
        // built, and a client's subscribe (`watch`, which takes this lock) must find it
        // before the supervisor holds this node. The `foxglove` crate calls no listener
        // while adding a channel.
        let mut building = lock(&self.advertising);
        building.clear();
        for t in r.topics.iter().filter(|t| mine(t.node)) {
            let spec = mapping::channel_spec(t);
            let built = ChannelBuilder::new(spec.topic.clone())
                .context(&self.ctx)
                .message_encoding(MESSAGE_ENCODING)
                .schema(Schema::new(spec.schema_name, SCHEMA_ENCODING, spec.schema))
                .metadata(spec.metadata)
                .build_raw();
            match built {
                Ok(ch) => {
                    let c = Arc::new(TopicChannel {
                        name: spec.topic,
                        channel: ch,
                        forwarding: Mutex::default(),
                    });
                    building.push(c.clone());
                    served.channels.push(c);
                }
                Err(e) => tracing::warn!(
                    target: TARGET,
                    parent: &self.span,
                    "channel {}: {e}",
                    Untrusted(&t.name)
                ),
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
        self.with_server(|h| {
            if *why != Unserved::Rebooted {
                h.publish_status(
                    Status::warning(format!("fcan: node {} is {why}", node.name))
                        .with_id(status_id(&node.name)),
                );
            }
        });
        tracing::info!(
            target: TARGET,
            parent: &self.span,
            node = %Untrusted(&node.name),
            "node {} no longer served ({})",
            Untrusted(&node.name),
            why
        );
    }

    /// The topic graph of the running nodes, for Foxglove's Topic Graph panel.
    async fn publish_graph(&self, served: &ServedSet<NodeServed<M>>) {
        let Ok(r) = self.master.registry().await else {
            return;
        };
        // Only the nodes served: the registry may list one still provisioning.
        let served: Vec<String> = served.nodes().into_iter().map(|n| n.name).collect();
        let g = mapping::graph(&r);
        let keep =
            |ids: &std::collections::BTreeSet<String>| ids.iter().any(|n| served.contains(n));
        let mut graph = ConnectionGraph::new();
        for (t, ids) in g.published.iter().filter(|(_, i)| keep(i)) {
            graph.set_published_topic(t, ids.iter().cloned());
        }
        for (t, ids) in g.subscribed.iter().filter(|(_, i)| keep(i)) {
            graph.set_subscribed_topic(t, ids.iter().cloned());
        }
        for (s, ids) in g.services.iter().filter(|(_, i)| keep(i)) {
            graph.set_advertised_service(s, ids.iter().cloned());
        }
        self.with_server(|h| {
            let _ = h.publish_connection_graph(graph);
        });
    }

    /// Handlers keep a weak reference, so the server they are registered with does
    /// not keep the state (and the master) alive.
    fn weak(&self) -> Weak<Self> {
        self.me.clone()
    }

    /// A client subscribed to a channel: forward its topic from the master if it is
    /// the first.
    fn watch(&self, id: ChannelId) {
        let Some(c) = self.channel(id) else {
            return;
        };
        let mut f = lock(&c.forwarding);
        if f.closed {
            return;
        }
        f.watchers += 1;
        if f.watchers == 1 {
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
        f.watchers = f.watchers.saturating_sub(1);
        if f.watchers == 0 {
            if let Some(t) = f.task.take() {
                // Dropping the receiver ends the master's subscription.
                t.abort();
            }
        }
    }

    /// Tells a client its publish was refused (at most once a second per topic and kind
    /// of refusal, with the count of the others), and logs it (the first 20, then one in
    /// 1000). The reason is only written out when it is said: a flood is refused cheaply.
    fn refuse(&self, client: &Client, topic: &str, kind: Refusal, reason: impl FnOnce() -> String) {
        let n = self.counters.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let mut reason = Some(reason);
        let mut text = None;
        let mut why = || -> String {
            text.get_or_insert_with(|| reason.take().map(|f| f()).unwrap_or_default())
                .clone()
        };
        if n <= 20 || n.is_multiple_of(1000) {
            tracing::warn!(
                target: TARGET,
                parent: &self.span,
                "refused publish #{n} on {}: {}",
                shown(topic),
                Untrusted(&why())
            );
        }
        let more = {
            let mut told = lock(&self.told);
            let now = Instant::now();
            let per_topic = told.entry((client.id(), kind)).or_default();
            let more = match per_topic.get_mut(topic) {
                Some(e) if now.duration_since(e.0) < Duration::from_secs(1) => {
                    e.1 += 1;
                    return;
                }
                Some(e) => std::mem::replace(e, (now, 0)).1,
                None => {
                    per_topic.insert(topic.to_string(), (now, 0));
                    0
                }
            };
            // Bounded: a client cycling through topic names cannot grow this for ever.
            if per_topic.len() > 4096 {
                per_topic.retain(|_, (t, _)| now.duration_since(*t) < Duration::from_secs(1));
            }
            if told.len() > 4096 {
                told.retain(|_, m| {
                    m.values()
                        .any(|(t, _)| now.duration_since(*t) < Duration::from_secs(1))
                });
            }
            more
        };
        let also = if more > 0 {
            format!(" ({more} more refused since the last report)")
        } else {
            String::new()
        };
        client.send_status(Status::error(format!(
            "fcan: publish on {} refused: {}{also}",
            shown(topic),
            Untrusted(&why())
        )));
    }

    /// Publishes the clients' messages in the order they arrived, up to [`PIPELINE`]
    /// at a time: each batch is checked here, then handed to the master together (the
    /// master takes them in order and answers each), so the queue drains at the
    /// master's pace of answering, not one round trip per message.
    async fn publish_worker(self: Arc<Self>, mut rx: mpsc::Receiver<Publish>) {
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
                    Err(e) if is_busy(&e) => {
                        self.counters.busy.fetch_add(1, Ordering::Relaxed);
                        self.refuse(&p.client, &p.topic, Refusal::Busy, || e.to_string());
                    }
                    Err(e) => self.refuse(&p.client, &p.topic, Refusal::Bad, || e.to_string()),
                }
            }
        }
    }

    /// A message taken from the queue, checked before it goes to the master: not older
    /// than [`FoxgloveOptions::publish_wait`], JSON of an m2s topic of a running node.
    /// Refused (and the client told) otherwise.
    fn admit(&self, p: Publish) -> Option<(Publish, fcan_master::value::Value)> {
        let waited = p.at.elapsed();
        if waited > self.opts.publish_wait {
            self.counters.stale.fetch_add(1, Ordering::Relaxed);
            self.refuse(&p.client, &p.topic, Refusal::Busy, || {
                format!(
                    "the server is busy: the message waited {} ms for the master (the limit is {} ms)",
                    waited.as_millis(),
                    self.opts.publish_wait.as_millis()
                )
            });
            return None;
        }
        if p.encoding != MESSAGE_ENCODING {
            self.refuse(&p.client, &p.topic, Refusal::Bad, || {
                format!(
                    "encoding `{}` is not supported; advertise the channel with encoding `json`",
                    shown(&p.encoding)
                )
            });
            return None;
        }
        let value = match mapping::decode_message(&p.payload) {
            Ok(v) => v,
            Err(why) => {
                self.refuse(&p.client, &p.topic, Refusal::Bad, || why);
                return None;
            }
        };
        let dir = self.topic_dir(&p.topic);
        if dir != Some(DataDirection::M2s) {
            self.refuse(&p.client, &p.topic, Refusal::Bad, || match dir {
                Some(_) => format!(
                    "{} is published by the node (s2m), not by a client",
                    shown(&p.topic)
                ),
                None => format!(
                    "no command topic named {} on a running node",
                    shown(&p.topic)
                ),
            });
            return None;
        }
        Some((p, value))
    }

    /// The values of parameters `names` (every parameter and bound if empty), read
    /// from the nodes; what cannot be read is reported to the client.
    async fn get_params(&self, client: &AnyClient, names: Vec<String>) -> Vec<Parameter> {
        let (wanted, all) = if names.is_empty() {
            (self.param_names(), true)
        } else {
            (names, false)
        };
        let limit = Arc::new(tokio::sync::Semaphore::new(self.opts.param_reads.max(1)));
        let mut reads = tokio::task::JoinSet::new();
        let mut out: Vec<Option<Vec<Parameter>>> = vec![None; wanted.len()];
        let mut errors = Vec::new();
        for (i, name) in wanted.iter().enumerate() {
            let info = {
                let base = match mapping::param_ref(name) {
                    ParamRef::Value(n) | ParamRef::Min(n) | ParamRef::Max(n) => n,
                };
                self.param(base)
            };
            let Some(info) = info else {
                errors.push(format!("no parameter named {}", shown(name)));
                continue;
            };
            match mapping::param_ref(name) {
                ParamRef::Min(_) | ParamRef::Max(_) => {
                    let max = matches!(mapping::param_ref(name), ParamRef::Max(_));
                    match mapping::bound_parameter(name, &info.decl, max) {
                        Some(p) => out[i] = Some(vec![p]),
                        None => errors.push(format!(
                            "parameter {} has no {} bound",
                            info.name,
                            if max { "upper" } else { "lower" }
                        )),
                    }
                }
                _ => {
                    let master = self.master.clone();
                    let limit = limit.clone();
                    reads.spawn(async move {
                        let _slot = limit.acquire_owned().await;
                        (i, master.param_get(&info.name).await, info)
                    });
                }
            }
        }
        while let Some(r) = reads.join_next().await {
            let Ok((i, r, info)) = r else { continue };
            match r {
                Ok(v) => {
                    let mut ps = vec![mapping::to_parameter(&info.name, info.decl.ty, &v)];
                    if all {
                        // Asked for everything: the bounds too, beside each parameter.
                        ps.extend(mapping::bound_parameters(&info));
                    }
                    out[i] = Some(ps);
                }
                Err(e) => errors.push(format!("{}: {}", info.name, Untrusted(&e.to_string()))),
            }
        }
        if !errors.is_empty() {
            let n = errors.len();
            errors.truncate(5);
            let more = if n > 5 {
                format!(" (and {} more)", n - 5)
            } else {
                String::new()
            };
            self.say(
                client,
                "get parameters",
                Status::error(format!("fcan: could not read: {}{more}", errors.join("; "))),
            );
        }
        out.into_iter().flatten().flatten().collect()
    }

    /// Writes parameters; each answer is the value the node holds afterwards.
    async fn set_params(&self, client: &AnyClient, params: Vec<Parameter>) -> Vec<Parameter> {
        let mut out = Vec::new();
        // One status per request, however many parameters it names.
        let mut errors = Vec::new();
        for p in params {
            let name = p.name.as_str();
            let info = match mapping::param_ref(name) {
                ParamRef::Value(n) => self.param(n),
                _ => {
                    errors.push(format!(
                        "{} is read-only (a bound from the node's schema)",
                        shown(name)
                    ));
                    continue;
                }
            };
            let Some(info) = info else {
                errors.push(format!("no parameter named {}", shown(name)));
                continue;
            };
            let result = match p.value.as_ref().map(mapping::from_parameter) {
                None => Err("a parameter cannot be unset".to_string()),
                Some(Err(why)) => Err(why),
                Some(Ok(v)) => self
                    .master
                    .param_set(&info.name, v)
                    .await
                    .map_err(|e| e.to_string()),
            };
            if let Err(why) = result {
                errors.push(format!(
                    "parameter {} not set: {}",
                    info.name,
                    Untrusted(&why)
                ));
            }
            // What the node holds now, set or not.
            match self.master.param_get(&info.name).await {
                Ok(v) => out.push(mapping::to_parameter(&info.name, info.decl.ty, &v)),
                Err(e) => errors.push(format!(
                    "parameter {} could not be read back: {}",
                    info.name,
                    Untrusted(&e.to_string())
                )),
            }
        }
        if !errors.is_empty() {
            let n = errors.len();
            errors.truncate(5);
            let more = if n > 5 {
                format!(" (and {} more)", n - 5)
            } else {
                String::new()
            };
            self.say(
                client,
                "set parameters",
                Status::error(format!("fcan: {}{more}", errors.join("; "))),
            );
        }
        out
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

/// The id of the warning a stopped node leaves in the app.
fn status_id(node: &str) -> String {
    format!("fcan.node.{node}")
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
struct Listener<M>(Weak<Shared<M>>);

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
        // Accepted either way (the node may come later); said now so the user sees why
        // nothing moves.
        if channel.encoding != MESSAGE_ENCODING {
            s.say(
                &client,
                "encoding",
                Status::warning(format!(
                    "fcan: channel {} uses encoding `{}`: only `json` is accepted",
                    shown(&channel.topic),
                    shown(&channel.encoding)
                )),
            );
        } else if s.topic_dir(&channel.topic) != Some(DataDirection::M2s) {
            s.say(
                &client,
                "not a command",
                Status::warning(format!(
                    "fcan: {} is not a command (m2s) topic of a running node: its messages will be refused",
                    shown(&channel.topic)
                )),
            );
        }
    }

    fn on_message_data(&self, client: Client, channel: &ClientChannel, payload: &[u8]) {
        let Some(s) = self.0.upgrade() else { return };
        if payload.len() > s.opts.max_payload {
            let why = format!(
                "message of {} bytes exceeds the limit of {}",
                payload.len(),
                s.opts.max_payload
            );
            return s.refuse(&client, &channel.topic, Refusal::Bad, || why);
        }
        let p = Publish {
            at: Instant::now(),
            client: client.clone(),
            topic: channel.topic.clone(),
            encoding: channel.encoding.clone(),
            payload: payload.to_vec(),
        };
        if s.publish_tx.try_send(p).is_err() {
            s.counters.queue_full.fetch_add(1, Ordering::Relaxed);
            s.refuse(&client, &channel.topic, Refusal::Busy, || {
                format!(
                    "the server is busy: {} messages already wait for the master (queue full)",
                    s.opts.publish_queue.max(1)
                )
            });
        }
    }
}

/// Parameter reads and writes, each in a task of its own.
struct Params<M>(Weak<Shared<M>>);

impl<M: MasterApi> ParameterHandler for Params<M> {
    fn get(
        &self,
        client: AnyClient,
        names: Vec<String>,
        _request_id: Option<String>,
        responder: GetParametersResponder,
    ) {
        let Some(s) = self.0.upgrade() else {
            return responder.respond(Vec::new());
        };
        let rt = s.rt.clone();
        rt.spawn(async move {
            let values = s.get_params(&client, names).await;
            responder.respond(values);
        });
    }

    fn set(
        &self,
        client: AnyClient,
        parameters: Vec<Parameter>,
        _request_id: Option<String>,
        responder: SetParametersResponder,
    ) {
        let Some(s) = self.0.upgrade() else {
            return responder.respond(Vec::new());
        };
        let rt = s.rt.clone();
        rt.spawn(async move {
            let values = s.set_params(&client, parameters).await;
            responder.respond(values.clone());
            // The responder answers the requester only; subscribers hear it here.
            s.with_server(|h| h.publish_parameter_values(values));
        });
    }
}

/// One service: a call is `MasterApi::call`.
struct Call<M> {
    shared: Weak<Shared<M>>,
    name: String,
}

impl<M: MasterApi> Handler for Call<M> {
    fn call(&self, request: Request, responder: Responder) {
        let Some(s) = self.shared.upgrade() else {
            return responder.respond_err("the server is stopping".into());
        };
        let name = self.name.clone();
        let rt = s.rt.clone();
        rt.spawn(async move {
            if request.payload().len() > s.opts.max_payload {
                return responder.respond_err(format!(
                    "request of {} bytes exceeds the limit of {}",
                    request.payload().len(),
                    s.opts.max_payload
                ));
            }
            let value = match mapping::decode_message(request.payload()) {
                Ok(v) => v,
                Err(why) => return responder.respond_err(why),
            };
            match s.master.call(&name, value).await {
                Ok(v) => {
                    let mut buf = Vec::new();
                    mapping::encode_message(&v, &mut buf);
                    responder.respond_ok(buf);
                }
                Err(e) => responder.respond_err(Untrusted(&e.to_string()).to_string()),
            }
        });
    }
}
