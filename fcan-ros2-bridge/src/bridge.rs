//! The bridge: a master's running nodes as ROS 2 topics, kept in step with the bus.
//!
//! The shell around [`crate::routes`], a face of [`fcan_master::serving::Supervisor`]:
//! on every node event (and every [`Ros2Options::resync_period`] as a backstop) the
//! served nodes are made the running ones; a node served gets a DDS writer per s2m
//! topic, fed by a master subscription, and a DDS reader per m2s topic, whose samples
//! are decoded and published through [`MasterApi::publish`], the same checks as any
//! publish. A node that goes, reboots or changes schema loses its endpoints at once.
//! A ROS message that cannot be mapped is counted and logged, never sent.
//!
//! The bridge is a ROS node of its own too ([`Ros2Options::node_name`]): it publishes
//! what happens to the nodes on `/rosout` ([`crate::rosout`]) and the parameters set
//! through it on `/parameter_events` ([`crate::params::event`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::id::NodeId;
use fcan_core::msg::DataDirection;
use fcan_master::api::MasterApi;
use fcan_master::registry::Registry;
use fcan_master::serving::{lock, Face, NodeTasks, ServedNode, ServedSet, Supervisor, Unserved};
use fcan_master::MasterEvent;
use fcan_master::NodeInfo;
use fcan_master::{ErrorKind, MasterError};
use fcan_ros2::dynamic::{self, RosValue};
use fcan_ros2::{cdr, rihs, Interfaces};
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use crate::dds::Endpoint;
use crate::dds::{Dds, DdsWriter, Gid};
use crate::drops::{Dropped, Pace, RouteDrops, WriterDrops};
use crate::graph::{self, Distro, GraphNode};
use crate::names::dds_type;
use crate::params::{
    checked_value, descriptor, kind, list, not_set, parameter, set_result, to_value as param_value,
    type_of, unknown_descriptor, NodeParams, SERVICES as PARAM_SERVICES,
};
use crate::rosout::{self, Level, Line};
use crate::routes::{node_routes, Route, ServiceRoute, SERVICE_QOS};
use crate::rpc::{reply, split_request, Framing};

/// The target of the bridge's `tracing` events (nodes on the graph, refusals, endpoints
/// that failed); each is a child of the span current when [`Ros2Bridge::start`] was
/// called.
const TARGET: &str = "fcan::ros2";

/// How the bridge runs.
#[derive(Clone)]
#[non_exhaustive]
pub struct Ros2Options {
    /// How often the served nodes are compared with the running ones even without an
    /// event.
    pub resync_period: Duration,
    /// How service requests and replies are framed (default: from `RMW_IMPLEMENTATION`,
    /// [`Framing::from_rmw`]).
    pub framing: Framing,
    /// How long a service call may take on the bus before the caller gets a refusal.
    pub call_timeout: Duration,
    /// Which ROS 2 release's graph messages to write (default: from `$ROS_DISTRO`,
    /// else Jazzy).
    pub distro: Distro,
    /// The bridge's own ROS node, which publishes `/rosout` and `/parameter_events`
    /// (default `fcan_bridge`; `fcan serve` names it after the bus).
    pub node_name: String,
}

impl Default for Ros2Options {
    fn default() -> Self {
        Ros2Options {
            resync_period: Duration::from_secs(1),
            framing: Framing::from_rmw(std::env::var("RMW_IMPLEMENTATION").ok().as_deref()),
            call_timeout: Duration::from_secs(5),
            distro: Distro::from_env(std::env::var("ROS_DISTRO").ok().as_deref()),
            node_name: "fcan_bridge".into(),
        }
    }
}

/// What crossed the bridge so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ros2Stats {
    /// Samples written to DDS (s2m topics).
    pub written: u64,
    /// Samples read from DDS and published on the bus (m2s topics).
    pub forwarded: u64,
    /// Samples from DDS that were not sent: undecodable, not fitting the fcan fields, or
    /// refused by the master. Per writer: [`Ros2Bridge::drops`].
    pub refused: u64,
    /// Of `refused`: refused by the master because more commands already waited for the
    /// bus than it admits (its `busy`, docs/protocol.md §5.5): a writer outran the bus.
    pub busy: u64,
    /// Command samples the bridge never saw: gaps in their writers' sequence numbers
    /// (overwritten in the reader's history while the bridge was behind, or lost on the
    /// way). Per writer: [`Ros2Bridge::drops`].
    pub missed: u64,
    /// Bus samples that could not be written (encoding or DDS failure).
    pub failed: u64,
    /// Service calls answered with the node's response.
    pub calls: u64,
    /// Service requests refused (undecodable, or the call failed on the bus).
    pub calls_refused: u64,
    /// Of `calls_refused`: requests that cannot be answered, not being requests of the
    /// bridge's framing (shorter than the Cyclone header, or without the sample
    /// identity Fast DDS names a request by): counted and logged, never answered.
    pub calls_unanswerable: u64,
    /// Of `refused`: commands holding NaN or an infinity (no command field may).
    pub non_finite: u64,
}

#[derive(Default)]
struct Counters {
    written: AtomicU64,
    forwarded: AtomicU64,
    refused: AtomicU64,
    busy: AtomicU64,
    missed: AtomicU64,
    failed: AtomicU64,
    calls: AtomicU64,
    calls_refused: AtomicU64,
    calls_unanswerable: AtomicU64,
    non_finite: AtomicU64,
}

/// The services the bridge gives every node besides its own and its parameter
/// services: the node's info as the master sees it, and provisioning it again (the
/// ancestor's `NodeInfo` and `ReprovisionNode`): (name under the node, type).
pub const NODE_SERVICES: [(&str, &str); 2] = [
    ("node_info", "fcan_msgs/srv/NodeInfo"),
    ("reprovision", "std_srvs/srv/Trigger"),
];

/// Calls one service may have in flight at once.
pub const MAX_CALLS_IN_FLIGHT: usize = 8;

/// The GUIDs of a node's readers and writers, for the graph.
#[derive(Default)]
struct NodeGids {
    readers: Vec<Gid>,
    writers: Vec<Gid>,
}

/// What the bridge holds for a node it serves (the [`Face::Node`] the supervisor
/// keeps). Its tasks own the node's DDS endpoints: dropping it aborts them, which drops
/// the writers and readers, which leaves the graph.
struct NodeServed {
    /// Its parameters under their ROS names (for `/parameter_events`).
    params: Arc<NodeParams>,
    gids: NodeGids,
    routes: Vec<Route>,
    services: Vec<ServiceRoute>,
    _tasks: NodeTasks,
}

struct Shared<M, D: Dds> {
    master: M,
    graph: Option<D::Writer>,
    /// `/rosout`, written by the bridge's node.
    rosout: Option<D::Writer>,
    /// `/parameter_events`, written by the bridge's node.
    param_events: Option<D::Writer>,
    dds: D,
    /// The span current at start: the parent of the bridge's events, which run on its
    /// tasks where no span of the caller's is current.
    span: tracing::Span,
    store: Mutex<Interfaces>,
    /// The nodes served, by id: the [`Supervisor`]'s set, which it fills.
    served: ServedSet<NodeServed>,
    /// Parameter writes this bridge made (fcan name, when), oldest first. It announces
    /// those itself, grouped per request as rcl does, so the master's
    /// [`MasterEvent::ParamChanged`] for each is taken off here instead of announced twice.
    own_writes: Mutex<std::collections::VecDeque<(String, std::time::Instant)>>,
    counters: Arc<Counters>,
    /// What the command topics' writers sent that did not reach the bus, by topic (kept
    /// when a node goes, so its counts survive a reboot).
    drops: Mutex<BTreeMap<String, Arc<Mutex<RouteDrops>>>>,
    opts: Ros2Options,
}

/// Now, on tokio's clock (the master's: a paused test clock too), for the drop reports'
/// pace.
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// Whether the master refused because commands already wait for the bus (or too many
/// requests are in flight): the kind [`ErrorKind::Busy`], the same from an in-process
/// master and a remote one.
fn is_busy(e: &MasterError) -> bool {
    e.kind() == ErrorKind::Busy
}

/// The first field of `v` that holds NaN or an infinity (`setpoint`, `positions[2]`),
/// with its value. No schema field says it may carry one, so a command holding one is
/// refused: a non-finite number reaching a control loop is the ancestor's known weak
/// point (docs/ros2.md, "Commands").
fn non_finite(v: &fcan_master::value::Value) -> Option<(String, f64)> {
    use fcan_master::value::Value;
    match v {
        Value::Float(f) if !f.is_finite() => Some((String::new(), *f)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, x)| non_finite(x).map(|(p, f)| (format!("[{i}]{p}"), f))),
        Value::Struct(fields) => fields.iter().find_map(|(name, x)| {
            non_finite(x).map(|(p, f)| {
                let sep = if p.is_empty() || p.starts_with('[') {
                    ""
                } else {
                    "."
                };
                (format!("{name}{sep}{p}"), f)
            })
        }),
        _ => None,
    }
}

/// The answer of node service `svc` to a request that does not decode: the response
/// type with every field zero, and the reason where it has a place for one
/// (`reprovision`'s `message`, `set_parameters_atomically`'s `reason`).
fn refused_response(store: &Interfaces, svc: &str, response_ty: &str, why: &str) -> RosValue {
    let why = why.replace('\0', "\u{fffd}");
    match svc {
        "reprovision" => RosValue::Msg(vec![RosValue::Bool(false), RosValue::Str(why)]),
        "set_parameters_atomically" => RosValue::Msg(vec![set_result(Err(why))]),
        _ => dynamic::zero(store, response_ty).unwrap_or(RosValue::Msg(vec![])),
    }
}

/// Why a command holding NaN or an infinity is refused.
const NON_FINITE: &str =
    "a command carries finite numbers only (no field of a command topic may hold NaN or an infinity)";

/// The text of a non-finite value as every face prints it.
fn float_text(f: f64) -> &'static str {
    if f.is_nan() {
        "NaN"
    } else if f > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// The name and value of an `rcl_interfaces/msg/Parameter` (empty and NOT_SET when it
/// is not one).
fn name_and_value(item: &RosValue) -> (&str, &RosValue) {
    static NOT_SET: std::sync::OnceLock<RosValue> = std::sync::OnceLock::new();
    let fields = match item {
        RosValue::Msg(f) => f.as_slice(),
        _ => &[],
    };
    (
        fields.first().and_then(RosValue::as_str).unwrap_or(""),
        fields
            .get(1)
            .unwrap_or_else(|| NOT_SET.get_or_init(not_set)),
    )
}

/// The wall-clock time of a monotonic instant (a sample's arrival), for the DDS
/// source timestamp.
fn wall(at: std::time::Instant) -> std::time::SystemTime {
    let ago = at.elapsed();
    std::time::SystemTime::now()
        .checked_sub(ago)
        .unwrap_or_else(std::time::SystemTime::now)
}

fn master_of<M: MasterApi, D: Dds>(s: &Shared<M, D>) -> M {
    s.master.clone()
}

/// How long a parameter write of this bridge's waits for its [`MasterEvent::ParamChanged`]
/// before it is forgotten (the event comes within one bus round trip; a receiver that
/// lagged behind the event channel lost it).
const OWN_WRITE_TTL: Duration = Duration::from_secs(10);

/// Drops the own writes older than [`OWN_WRITE_TTL`] (oldest first).
fn forget_old(own: &mut std::collections::VecDeque<(String, std::time::Instant)>) {
    while own
        .front()
        .is_some_and(|(_, at)| at.elapsed() > OWN_WRITE_TTL)
    {
        own.pop_front();
    }
}

/// The bridge as the [`Supervisor`]'s face.
struct RosFace<M, D: Dds>(Arc<Shared<M, D>>);

impl<M: MasterApi, D: Dds> Face for RosFace<M, D> {
    type Node = NodeServed;

    async fn serve(&self, node: &NodeInfo, registry: &Registry) -> Option<NodeServed> {
        self.0.serve(node, registry).await
    }

    fn unserve(&self, node: &ServedNode, served: NodeServed, why: &Unserved) {
        // Dropping the handle aborts its tasks, which drops its DDS endpoints.
        drop(served);
        let name = &node.name;
        tracing::info!(target: TARGET, parent: &self.0.span, node = %name, "{name} left the ROS 2 graph ({why})");
    }

    async fn on_event(&self, e: &MasterEvent, name: Option<&str>) {
        if let MasterEvent::ParamChanged { node, name, value } = e {
            self.0.param_changed(*node, name, value);
        }
        self.0.log_event(e, name).await;
    }

    async fn served_changed(&self, _served: &ServedSet<NodeServed>) {
        self.0.publish_graph();
    }
}

/// A running bridge. Dropping it (or [`stop`](Ros2Bridge::stop)) removes every endpoint.
pub struct Ros2Bridge {
    stats: Arc<Counters>,
    routes: Arc<dyn Fn() -> Vec<Route> + Send + Sync>,
    services: Arc<dyn Fn() -> Vec<ServiceRoute> + Send + Sync>,
    drops: Arc<dyn Fn() -> Vec<WriterDrops> + Send + Sync>,
    task: JoinHandle<()>,
    stop: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Ros2Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ros2Bridge").finish_non_exhaustive()
    }
}

impl Ros2Bridge {
    /// Bridges `master`'s running nodes onto `dds`. Serves the nodes running now before
    /// it returns.
    pub async fn start<M: MasterApi, D: Dds>(master: M, dds: D, opts: Ros2Options) -> Ros2Bridge {
        let span = tracing::Span::current();
        // The graph writer: reliable, transient local, keep last 1, as rmw does it.
        let store = graph::store_with_humble_graph();
        let graph = dds
            .writer(&Endpoint {
                topic: graph::TOPIC.into(),
                type_name: dds_type(graph::TYPE),
                qos: crate::routes::STATE_QOS,
                // Humble's graph type is another layout under the same name: no hash.
                type_hash: match opts.distro {
                    Distro::Jazzy => rihs::type_hash(&store, graph::TYPE).ok(),
                    _ => None,
                },
            })
            .map_err(|e| {
                tracing::warn!(
                    target: TARGET,
                    parent: &span,
                    "{}: {e}; the nodes will not show in ros2 node list",
                    graph::TOPIC
                )
            })
            .ok();
        let own = |topic: &str, ty: &str, qos| {
            dds.writer(&Endpoint {
                topic: crate::names::dds_topic(topic),
                type_name: dds_type(ty),
                qos,
                type_hash: rihs::type_hash(&store, ty).ok(),
            })
            .map_err(|e| tracing::warn!(target: TARGET, parent: &span, "{topic}: {e}"))
            .ok()
        };
        let rosout = own(rosout::TOPIC, rosout::TYPE, rosout::QOS);
        let param_events = own(
            crate::params::EVENTS_TOPIC,
            crate::params::EVENT_TYPE,
            crate::params::EVENTS_QOS,
        );
        let shared = Arc::new(Shared {
            master,
            graph,
            rosout,
            param_events,
            dds,
            span,
            store: Mutex::new(store),
            served: ServedSet::new(),
            own_writes: Mutex::new(std::collections::VecDeque::new()),
            counters: Arc::new(Counters::default()),
            drops: Mutex::new(BTreeMap::new()),
            opts,
        });
        let period = shared.opts.resync_period;
        let sup = Supervisor::with_set(
            master_of(&shared),
            Arc::new(RosFace(shared.clone())),
            shared.served.clone(),
            period,
        );
        sup.resync().await;
        let task = sup.spawn();
        let for_routes = shared.clone();
        let for_services = shared.clone();
        let for_drops = shared.clone();
        Ros2Bridge {
            stats: shared.counters.clone(),
            routes: Arc::new(move || for_routes.served.flat_map(|s| s.handle.routes.clone())),
            services: Arc::new(move || for_services.served.flat_map(|s| s.handle.services.clone())),
            drops: Arc::new(move || {
                let routes: Vec<_> = lock(&for_drops.drops).values().cloned().collect();
                routes.iter().flat_map(|r| lock(r).writers()).collect()
            }),
            task,
            stop: Arc::new(move || sup.stop()),
        }
    }

    /// What crossed the bridge so far.
    pub fn stats(&self) -> Ros2Stats {
        let c = &self.stats;
        Ros2Stats {
            written: c.written.load(Ordering::Relaxed),
            forwarded: c.forwarded.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            busy: c.busy.load(Ordering::Relaxed),
            missed: c.missed.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            calls: c.calls.load(Ordering::Relaxed),
            calls_refused: c.calls_refused.load(Ordering::Relaxed),
            calls_unanswerable: c.calls_unanswerable.load(Ordering::Relaxed),
            non_finite: c.non_finite.load(Ordering::Relaxed),
        }
    }

    /// The topics carried now.
    pub fn routes(&self) -> Vec<Route> {
        (self.routes)()
    }

    /// The services served now.
    pub fn services(&self) -> Vec<ServiceRoute> {
        (self.services)()
    }

    /// What each DDS writer of a command topic sent that did not reach the bus (refused
    /// busy, refused otherwise, never seen), by topic and writer; writers with no drops
    /// are left out. Each writer's drops are also logged, the first at once, then at
    /// most once a second with the count since (`docs/ros2.md`).
    pub fn drops(&self) -> Vec<WriterDrops> {
        (self.drops)()
    }

    /// Stops: every endpoint leaves the graph.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Ros2Bridge {
    fn drop(&mut self) {
        self.task.abort();
        (self.stop)();
    }
}

impl<M: MasterApi, D: Dds> Shared<M, D> {
    /// Starts serving running node `node`: its topics, services, parameter and node
    /// services on DDS, each on its own task.
    async fn serve(self: &Arc<Self>, node: &NodeInfo, registry: &Registry) -> Option<NodeServed> {
        let id = node.id;
        let Ok(Some(schema)) = self.master.schema(id).await else {
            return None;
        };
        let nr = node_routes(id, &schema, registry, &mut lock(&self.store));
        for n in &nr.notes {
            tracing::info!(target: TARGET, parent: &self.span, "note: {n}");
        }
        let mut tasks = NodeTasks::new();
        let mut gids = NodeGids::default();
        for r in &nr.topics {
            match self.carry(r, &mut gids).await {
                Ok(t) => tasks.push(t),
                Err(e) => tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", r.name),
            }
        }
        let topics = tasks.len();
        for r in &nr.services {
            match self.serve_calls(r, &mut gids) {
                Ok(t) => tasks.push(t),
                Err(e) => tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", r.name),
            }
        }
        let name = node.name.clone();
        let services = tasks.len() - topics;
        let params = Arc::new(NodeParams::of(&name, &registry.params));
        for (svc, ty) in NODE_SERVICES.into_iter().chain(PARAM_SERVICES) {
            match self.serve_node_service(&name, id, svc, ty, params.clone(), &mut gids) {
                Ok(t) => tasks.push(t),
                Err(e) => tracing::warn!(target: TARGET, parent: &self.span, "/{name}/{svc}: {e}"),
            }
        }
        tracing::info!(target: TARGET, parent: &self.span, node = %name, "{name}: {topics} topics, {services} services, {} parameters on ROS 2 ({:?} service framing)",
            params.params.len(),
            self.opts.framing);
        Some(NodeServed {
            params,
            gids,
            routes: nr.topics,
            services: nr.services,
            _tasks: tasks,
        })
    }

    /// The name of node `id` as the master knows it, else `node<id>`.
    async fn name_of(&self, id: NodeId) -> String {
        let nodes = self.master.nodes().await.unwrap_or_default();
        nodes
            .into_iter()
            .find(|n| n.id == id && !n.name.is_empty())
            .map_or_else(|| format!("node{}", id.get()), |n| n.name)
    }

    /// The `/rosout` line of a master event, if it deserves one; `served` names the
    /// node while it is served (a node that went is named by its served entry).
    async fn log_event(&self, e: &MasterEvent, served: Option<&str>) {
        let name = match (served, e.node()) {
            (Some(n), _) => n.to_string(),
            (None, Some(id)) => self.name_of(id).await,
            (None, None) => String::new(),
        };
        if let Some(line) = rosout::of_event(e, |_| name.clone(), &self.opts.node_name) {
            self.rosout(&line, "master_event");
        }
    }

    /// Writes a line on `/rosout`.
    fn rosout(&self, line: &Line, function: &str) {
        let Some(w) = &self.rosout else { return };
        let now = std::time::SystemTime::now();
        let encoded = dynamic::encode(
            &lock(&self.store),
            rosout::TYPE,
            &rosout::message(line, now, function),
        );
        if let Err(e) = encoded
            .map_err(|e| e.to_string())
            .and_then(|b| w.write(&b, None, Some(now)).map_err(|e| e.to_string()))
        {
            tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", rosout::TOPIC);
        }
    }

    /// A refusal worth saying: on stderr (through the log) and on `/rosout` as a warning
    /// of the node that `name` (a topic or service `/motor_driver1/motor0/target`, or a
    /// node `motor_driver1`) belongs to.
    fn warn(&self, name: &str, text: String) {
        tracing::warn!(target: TARGET, parent: &self.span, "{text}");
        let logger = name
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or(name);
        self.rosout(
            &Line {
                level: Level::Warn,
                logger: logger.to_string(),
                msg: text,
            },
            "refusal",
        );
    }

    /// Writes a parameter for a ROS 2 client; this bridge announces it itself (see
    /// `own_writes`).
    async fn write_param(
        &self,
        fcan: &str,
        v: fcan_master::value::Value,
    ) -> Result<(), fcan_master::MasterError> {
        {
            let mut own = lock(&self.own_writes);
            forget_old(&mut own);
            own.push_back((fcan.to_string(), std::time::Instant::now()));
        }
        let r = self.master.param_set(fcan, v).await;
        if r.is_err() {
            // No event follows a refused write.
            let mut own = lock(&self.own_writes);
            if let Some(i) = own.iter().rposition(|(n, _)| n == fcan) {
                own.remove(i);
            }
        }
        r
    }

    /// The master's [`MasterEvent::ParamChanged`]: a write made elsewhere (the CLI, Zenoh,
    /// Foxglove, a cycle) is announced on `/parameter_events` as the served node's; one
    /// of this bridge's own is taken off `own_writes` (by name, oldest first: each
    /// acknowledged write has one event). Entries older than [`OWN_WRITE_TTL`] are
    /// dropped first, so events lost to a lagging receiver cannot silence later writes
    /// for long.
    fn param_changed(&self, node: NodeId, name: &str, value: &fcan_master::value::Value) {
        {
            let mut own = lock(&self.own_writes);
            forget_old(&mut own);
            if let Some(i) = own.iter().position(|(n, _)| n == name) {
                own.remove(i);
                return;
            }
        }
        let announce = self
            .served
            .get(node, |s| {
                let (ros, _, decl) = s.handle.params.params.iter().find(|(_, f, _)| f == name)?;
                Some((
                    s.node.name.clone(),
                    parameter(ros, param_value(decl, value)),
                ))
            })
            .flatten();
        if let Some((node_name, p)) = announce {
            self.parameters_changed(&node_name, vec![p]);
        }
    }

    /// Says on `/parameter_events` that node `node`'s parameters `changed` took new values.
    fn parameters_changed(&self, node: &str, changed: Vec<RosValue>) {
        let Some(w) = &self.param_events else { return };
        if changed.is_empty() {
            return;
        }
        let now = std::time::SystemTime::now();
        let event = crate::params::event(node, changed, now);
        let encoded = dynamic::encode(&lock(&self.store), crate::params::EVENT_TYPE, &event);
        if let Err(e) = encoded
            .map_err(|e| e.to_string())
            .and_then(|b| w.write(&b, None, Some(now)).map_err(|e| e.to_string()))
        {
            tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", crate::params::EVENTS_TOPIC);
        }
    }

    /// Publishes this participant's nodes and their endpoints on `ros_discovery_info`,
    /// where ROS 2 tools (`ros2 node list`, `ros2 node info`) look for them: the served
    /// nodes, and the bridge's own node with its `/rosout` and `/parameter_events`.
    fn publish_graph(&self) {
        let Some(writer) = &self.graph else { return };
        let mut nodes: Vec<GraphNode> = self.served.flat_map(|s| {
            Some(GraphNode {
                name: s.node.name.clone(),
                readers: s.handle.gids.readers.clone(),
                writers: s.handle.gids.writers.clone(),
            })
        });
        let own: Vec<Gid> = [&self.rosout, &self.param_events]
            .into_iter()
            .flatten()
            .map(|w| w.gid())
            .collect();
        if !own.is_empty() {
            nodes.push(GraphNode {
                name: self.opts.node_name.clone(),
                readers: vec![],
                writers: own,
            });
        }
        let (ty, info) = graph::participant_info(self.opts.distro, &self.dds.gid(), &nodes);
        match dynamic::encode(&lock(&self.store), ty, &info) {
            Ok(b) => {
                if let Err(e) = writer.write(&b, None, None) {
                    tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", graph::TOPIC);
                }
            }
            Err(e) => tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", graph::TOPIC),
        }
    }

    /// Starts serving one service: the task owns its request reader and reply writer.
    /// Calls run concurrently, at most [`MAX_CALLS_IN_FLIGHT`] per service (a node
    /// holds few calls at once anyway and answers BUSY beyond them); a request beyond
    /// that waits for one to finish.
    fn serve_calls(
        self: &Arc<Self>,
        r: &ServiceRoute,
        gids: &mut NodeGids,
    ) -> Result<JoinHandle<()>, String> {
        let writer = Arc::new(
            self.dds
                .writer(&r.reply_endpoint)
                .map_err(|e| e.to_string())?,
        );
        let reader = self
            .dds
            .reader(&r.request_endpoint)
            .map_err(|e| e.to_string())?;
        gids.readers.push(reader.gid);
        gids.writers.push(writer.gid());
        let mut requests = reader.samples;
        let me = self.clone();
        let route = Arc::new(r.clone());
        Ok(tokio::spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CALLS_IN_FLIGHT));
            let warned = Arc::new(Mutex::new(Pace::default()));
            let mut unanswerable = Pace::default();
            let mut calls = tokio::task::JoinSet::new();
            while let Some(req) = requests.next().await {
                // Finished calls are reaped as new ones come.
                while calls.try_join_next().is_some() {}
                let (id, body) = match split_request(me.opts.framing, &req.cdr, req.id) {
                    Ok(split) => split,
                    Err(e) => {
                        // Not a request in this framing: a client of the other framing,
                        // or garbage. No client to answer: counted and said.
                        me.unanswerable(&route.name, &mut unanswerable, &e.0);
                        continue;
                    }
                };
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (me, route, writer, warned) =
                    (me.clone(), route.clone(), writer.clone(), warned.clone());
                calls.spawn(async move {
                    let _permit = permit;
                    let sample = me.answer(&route, &body, &warned).await;
                    if let Some(b) = sample {
                        let (bytes, related) = reply(&id, &b);
                        if let Err(e) = writer.write(&bytes, related, None) {
                            tracing::warn!(target: TARGET, parent: &me.span, "{}: reply not written: {e}", route.name);
                        }
                    }
                });
            }
        }))
    }

    /// Serves one of a node's own services (`/<node>/get_parameters`, `node_info`, …):
    /// requests answered one at a time, from the registry or through the master.
    fn serve_node_service(
        self: &Arc<Self>,
        node: &str,
        node_id: NodeId,
        svc: &'static str,
        ty: &'static str,
        params: Arc<NodeParams>,
        gids: &mut NodeGids,
    ) -> Result<JoinHandle<()>, String> {
        // rmw announces the service's hash on both of its endpoints.
        let hash = rihs::type_hash(&lock(&self.store), ty).ok();
        let ep = |topic: String, ty: String| Endpoint {
            topic,
            type_name: dds_type(&ty),
            qos: SERVICE_QOS,
            type_hash: hash,
        };
        let request_ty = format!("{ty}_Request");
        let response_ty = format!("{ty}_Response");
        let writer = self
            .dds
            .writer(&ep(format!("rr/{node}/{svc}Reply"), response_ty.clone()))
            .map_err(|e| e.to_string())?;
        let reader = self
            .dds
            .reader(&ep(format!("rq/{node}/{svc}Request"), request_ty.clone()))
            .map_err(|e| e.to_string())?;
        gids.readers.push(reader.gid);
        gids.writers.push(writer.gid());
        let mut requests = reader.samples;
        let me = self.clone();
        let name = format!("/{node}/{svc}");
        let node = node.to_string();
        Ok(tokio::spawn(async move {
            let mut unanswerable = Pace::default();
            let mut malformed = Pace::default();
            while let Some(req) = requests.next().await {
                let (id, body) = match split_request(me.opts.framing, &req.cdr, req.id) {
                    Ok(split) => split,
                    Err(e) => {
                        me.unanswerable(&name, &mut unanswerable, &e.0);
                        continue;
                    }
                };
                let decoded = dynamic::decode(&lock(&me.store), &request_ty, &body);
                let (response, answered) = match decoded {
                    Ok(request) => (
                        me.node_call(svc, &node, node_id, &params, &request).await,
                        true,
                    ),
                    Err(e) => {
                        // The request names its client: answered, with the reason where
                        // the response has a place for one.
                        me.counters.calls_refused.fetch_add(1, Ordering::Relaxed);
                        let why = format!("a {request_ty} that does not decode: {e}");
                        if let Some(more) = malformed.due(now()) {
                            me.warn(&name, format!("{name}: refused: {why}; answered{more}"));
                        }
                        let refusal = refused_response(&lock(&me.store), svc, &response_ty, &why);
                        (refusal, false)
                    }
                };
                let encoded = dynamic::encode(&lock(&me.store), &response_ty, &response);
                match encoded {
                    Ok(b) => {
                        if answered {
                            me.counters.calls.fetch_add(1, Ordering::Relaxed);
                        }
                        let (bytes, related) = reply(&id, &b);
                        if let Err(e) = writer.write(&bytes, related, None) {
                            tracing::warn!(target: TARGET, parent: &me.span, "{name}: reply not written: {e}");
                        }
                    }
                    Err(e) => tracing::warn!(target: TARGET, parent: &me.span, "{name}: {e}"),
                }
            }
        }))
    }

    /// A service request that cannot be answered (not a request of this framing: no
    /// Cyclone header, no sample identity): counted, and said at `pace`.
    fn unanswerable(&self, name: &str, pace: &mut Pace, why: &str) {
        self.counters.calls_refused.fetch_add(1, Ordering::Relaxed);
        self.counters
            .calls_unanswerable
            .fetch_add(1, Ordering::Relaxed);
        if let Some(more) = pace.due(now()) {
            let framing = match self.opts.framing {
                Framing::Cyclone => "rmw_cyclonedds's (a 16-byte header before the fields)",
                _ => "Fast DDS's (the request named by its sample identity)",
            };
            self.warn(
                name,
                format!(
                    "{name}: a request that cannot be answered: {why}; this bridge reads requests in {framing} framing (--ros2-rmw){more}"
                ),
            );
        }
    }

    /// The response of node service `svc` (a parameter service, `node_info`,
    /// `reprovision`) of node `id` to `request`.
    async fn node_call(
        &self,
        svc: &str,
        node: &str,
        id: NodeId,
        params: &NodeParams,
        request: &RosValue,
    ) -> RosValue {
        let RosValue::Msg(req) = request else {
            return RosValue::Msg(vec![]);
        };
        match svc {
            "node_info" => {
                let nodes = self.master.nodes().await.unwrap_or_default();
                let Some(n) = nodes.iter().find(|n| n.id == id) else {
                    return RosValue::Msg(vec![]);
                };
                let j = n.to_json();
                let text = |k: &str| RosValue::Str(j[k].as_str().unwrap_or("").to_string());
                return RosValue::Msg(vec![
                    RosValue::UInt(u64::from(n.id.get())),
                    RosValue::Str(n.name.clone()),
                    RosValue::Str(n.phase.to_string()),
                    text("state"),
                    RosValue::UInt(u64::from(n.boot_id)),
                    text("schema"),
                    text("schema_source"),
                    RosValue::UInt(u64::from(n.errors)),
                    text("mode"),
                    RosValue::UInt(n.frames as u64),
                ]);
            }
            "reprovision" => {
                let (ok, why) = match self.master.reprovision(id).await {
                    Ok(()) => (true, String::new()),
                    Err(e) => (false, e.to_string()),
                };
                return RosValue::Msg(vec![RosValue::Bool(ok), RosValue::Str(why)]);
            }
            _ => {}
        }
        let strings = |v: Option<&RosValue>| -> Vec<String> {
            v.and_then(RosValue::as_seq)
                .unwrap_or(&[])
                .iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        };
        match svc {
            "get_parameters" => {
                let mut values = Vec::new();
                for n in strings(req.first()) {
                    values.push(match params.get(&n) {
                        Some((fcan, decl)) => match self.master.param_get(fcan).await {
                            Ok(v) => param_value(decl, &v),
                            Err(_) => not_set(),
                        },
                        None => not_set(),
                    });
                }
                RosValue::Msg(vec![RosValue::Seq(values)])
            }
            "set_parameters" => {
                let items = req.first().and_then(RosValue::as_seq).unwrap_or(&[]);
                let mut results = Vec::new();
                let mut changed = Vec::new();
                for item in items {
                    let (name, pv) = name_and_value(item);
                    let result = match params.get(name) {
                        Some((fcan, decl)) => match checked_value(decl, pv) {
                            Ok(v) => self.write_param(fcan, v).await.map_err(|e| e.to_string()),
                            Err(e) => Err(e),
                        },
                        None => Err(format!("no parameter `{name}` on this node")),
                    };
                    if result.is_ok() {
                        changed.push(parameter(name, pv.clone()));
                    }
                    results.push(set_result(result));
                }
                self.parameters_changed(node, changed);
                RosValue::Msg(vec![RosValue::Seq(results)])
            }
            "set_parameters_atomically" => {
                let items = req.first().and_then(RosValue::as_seq).unwrap_or(&[]);
                let result = self.set_atomically(node, params, items).await;
                RosValue::Msg(vec![set_result(result)])
            }
            "list_parameters" => {
                let depth = match req.get(1) {
                    Some(RosValue::UInt(d)) => *d,
                    _ => 0,
                };
                RosValue::Msg(vec![list(params, &strings(req.first()), depth)])
            }
            "describe_parameters" => RosValue::Msg(vec![RosValue::Seq(
                strings(req.first())
                    .iter()
                    .map(|n| match params.get(n) {
                        Some((_, d)) => descriptor(n, d),
                        None => unknown_descriptor(n),
                    })
                    .collect(),
            )]),
            _ => RosValue::Msg(vec![RosValue::Seq(
                strings(req.first())
                    .iter()
                    .map(|n| {
                        RosValue::UInt(u64::from(
                            params.get(n).map_or(kind::NOT_SET, |(_, d)| type_of(d)),
                        ))
                    })
                    .collect(),
            )]),
        }
    }

    /// `set_parameters_atomically`: all of `items` or none. Each value is checked as the
    /// master and the node will check it before any is written; the old values are read;
    /// then they are written in order, and if the node refuses one, those written before
    /// it get their old values back. The node has no transaction of its own, so between
    /// the first write and the last its parameters are partly new (a control loop reading
    /// them sees that); what "atomic" buys is that the request ends all-or-nothing.
    async fn set_atomically(
        &self,
        node: &str,
        params: &NodeParams,
        items: &[RosValue],
    ) -> Result<(), String> {
        let mut plan = Vec::new();
        for item in items {
            let (name, pv) = name_and_value(item);
            let (fcan, decl) = params
                .get(name)
                .ok_or_else(|| format!("no parameter `{name}` on this node; nothing was set"))?;
            let v = checked_value(decl, pv).map_err(|e| format!("{name}: {e}; nothing was set"))?;
            let old = self.master.param_get(fcan).await.map_err(|e| {
                format!("{name}: its value cannot be read to keep: {e}; nothing was set")
            })?;
            plan.push((name, fcan, v, old, pv));
        }
        for (k, (name, fcan, v, _, _)) in plan.iter().enumerate() {
            if let Err(e) = self.write_param(fcan, v.clone()).await {
                let mut restored = Vec::new();
                let mut lost = Vec::new();
                for (n, f, _, old, _) in plan[..k].iter().rev() {
                    match self.write_param(f, old.clone()).await {
                        Ok(()) => restored.push(*n),
                        Err(e) => lost.push(format!("{n} ({e})")),
                    }
                }
                let mut why = format!("{name}: {e}");
                if !restored.is_empty() {
                    why.push_str(&format!("; put back: {}", restored.join(", ")));
                }
                if !lost.is_empty() {
                    why.push_str(&format!("; could NOT put back: {}", lost.join(", ")));
                    self.warn(
                        node,
                        format!("set_parameters_atomically left new values: {why}"),
                    );
                }
                return Err(why);
            }
        }
        self.parameters_changed(
            node,
            plan.iter()
                .map(|(name, _, _, _, pv)| parameter(name, (*pv).clone()))
                .collect(),
        );
        Ok(())
    }

    /// One call: the request decoded, called on the bus, the response encoded; or the
    /// refusal with its reason where the response type can say it.
    async fn answer(
        &self,
        route: &ServiceRoute,
        body: &[u8],
        warned: &Mutex<Pace>,
    ) -> Option<Vec<u8>> {
        let decoded = {
            let store = lock(&self.store);
            cdr::decode(&store, &route.request.0, &route.request.1, body)
        };
        let outcome = match decoded {
            Ok(v) => {
                match tokio::time::timeout(self.opts.call_timeout, self.master.call(&route.name, v))
                    .await
                {
                    Ok(Ok(resp)) => {
                        let store = lock(&self.store);
                        cdr::encode(&store, &route.response.0, &route.response.1, &resp)
                            .map_err(|e| e.to_string())
                    }
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!("no answer within {:?}", self.opts.call_timeout)),
                }
            }
            Err(e) => Err(format!(
                "a {} request that does not fit: {e}",
                route.ros_type
            )),
        };
        match outcome {
            Ok(b) => {
                self.counters.calls.fetch_add(1, Ordering::Relaxed);
                Some(b)
            }
            Err(why) => {
                self.counters.calls_refused.fetch_add(1, Ordering::Relaxed);
                let store = lock(&self.store);
                let reply = cdr::encode_refusal(&store, &route.response.0, &why);
                drop(store);
                let due = lock(warned).due(now());
                if let Some(more) = due {
                    let answered = if reply.is_some() {
                        "answered with the reason"
                    } else {
                        "not answered: its response type has no `message` to say why"
                    };
                    self.warn(
                        &route.name,
                        format!("{}: refused: {why}; {answered}{more}", route.name),
                    );
                }
                reply
            }
        }
    }

    /// Starts carrying one topic: the task owns its DDS endpoint.
    async fn carry(
        self: &Arc<Self>,
        r: &Route,
        gids: &mut NodeGids,
    ) -> Result<JoinHandle<()>, String> {
        let me = self.clone();
        let route = r.clone();
        match r.dir {
            DataDirection::S2m => {
                let writer = self.dds.writer(&r.endpoint).map_err(|e| e.to_string())?;
                gids.writers.push(writer.gid());
                let mut rx = self
                    .master
                    .subscribe(&r.name)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(tokio::spawn(async move {
                    let mut warned = false;
                    while let Some(sample) = rx.recv().await {
                        let store = lock(&me.store);
                        let bytes =
                            cdr::encode(&store, &route.binding, &route.fields, &sample.value);
                        drop(store);
                        match bytes.map_err(|e| e.to_string()).and_then(|b| {
                            writer
                                .write(&b, None, Some(wall(sample.at)))
                                .map_err(|e| e.to_string())
                        }) {
                            Ok(()) => {
                                me.counters.written.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => {
                                me.counters.failed.fetch_add(1, Ordering::Relaxed);
                                if !warned {
                                    tracing::warn!(target: TARGET, parent: &me.span, "{}: not written: {e} (further failures counted only)",
                                        route.name);
                                    warned = true;
                                }
                            }
                        }
                    }
                }))
            }
            DataDirection::M2s => {
                let reader = self.dds.reader(&r.endpoint).map_err(|e| e.to_string())?;
                gids.readers.push(reader.gid);
                let mut samples = reader.samples;
                let drops = lock(&self.drops)
                    .entry(r.name.clone())
                    .or_insert_with(|| Arc::new(Mutex::new(RouteDrops::new(&r.name))))
                    .clone();
                Ok(tokio::spawn(async move {
                    while let Some(sample) = samples.next().await {
                        let writer = sample.id.map(|i| i.writer_guid);
                        if let Some(id) = sample.id {
                            let (missed, report) = lock(&drops).seen(id.writer_guid, id.seq, now());
                            if missed > 0 {
                                me.counters.missed.fetch_add(missed, Ordering::Relaxed);
                            }
                            if let Some(text) = report {
                                me.warn(&route.name, text);
                            }
                        }
                        let decoded = {
                            let store = lock(&me.store);
                            cdr::decode(&store, &route.binding, &route.fields, &sample.cdr)
                        };
                        let result = match decoded {
                            Ok(v) => match non_finite(&v) {
                                Some((field, f)) => Err((
                                    false,
                                    format!("{field} is {}: {NON_FINITE}", float_text(f)),
                                )),
                                None => me
                                    .master
                                    .publish(&route.name, v)
                                    .await
                                    .map_err(|e| (is_busy(&e), e.to_string())),
                            },
                            Err(e) => Err((
                                false,
                                format!("a {} that does not fit: {e}", route.ros_type),
                            )),
                        };
                        match result {
                            Ok(()) => {
                                me.counters.forwarded.fetch_add(1, Ordering::Relaxed);
                            }
                            Err((busy, why)) => {
                                me.counters.refused.fetch_add(1, Ordering::Relaxed);
                                if why.contains(NON_FINITE) {
                                    me.counters.non_finite.fetch_add(1, Ordering::Relaxed);
                                }
                                let why = if busy {
                                    me.counters.busy.fetch_add(1, Ordering::Relaxed);
                                    Dropped::Busy(&why)
                                } else {
                                    Dropped::Refused(&why)
                                };
                                let report = lock(&drops).dropped(writer, why, now());
                                if let Some(text) = report {
                                    me.warn(&route.name, text);
                                }
                            }
                        }
                    }
                }))
            }
        }
    }
}
