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
//!
//! Its parts, each one job, the decisions in plain functions tested beside them:
//! - this module: starting and stopping, the [`Face`] the supervisor drives, and what
//!   serving one node holds (its endpoints' tasks, GUIDs, routes and parameters);
//! - `topics`: s2m samples to DDS writers, m2s DDS samples to [`MasterApi::publish`];
//! - `services`: node service calls over DDS, request/reply framing, in-flight limits;
//! - `parameters`: the parameter services, set atomically, `/parameter_events` and the
//!   bookkeeping of the bridge's own writes;
//! - `own_node`: the graph on `ros_discovery_info` and the `/rosout` lines.

mod own_node;
mod parameters;
mod services;
mod topics;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_master::api::MasterApi;
use fcan_master::registry::Registry;
use fcan_master::serving::{lock, Face, NodeTasks, ServedNode, ServedSet, Supervisor, Unserved};
use fcan_master::MasterEvent;
use fcan_master::NodeInfo;
use fcan_ros2::{rihs, Interfaces};
use tokio::task::JoinHandle;

use crate::dds::{Dds, Endpoint, Gid};
use crate::drops::{RouteDrops, WriterDrops};
use crate::graph::{self, Distro};
use crate::names::dds_type;
use crate::params::{NodeParams, SERVICES as PARAM_SERVICES};
use crate::rosout;
use crate::routes::{node_routes, Route, ServiceRoute};
use crate::rpc::Framing;

use parameters::OwnWrites;

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
    /// Parameter writes this bridge made. It announces those itself, grouped per
    /// request as rcl does, so the master's [`MasterEvent::ParamChanged`] for each is
    /// taken off here instead of announced twice.
    own_writes: Mutex<OwnWrites>,
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

fn master_of<M: MasterApi, D: Dds>(s: &Shared<M, D>) -> M {
    s.master.clone()
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
        if !why.is_logged() {
            return;
        }
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
            own_writes: Mutex::new(OwnWrites::default()),
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
}
