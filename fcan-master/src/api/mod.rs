//! The front door: what an application does with a master, whether the master runs in
//! this process ([`Master`](crate::Master)) or in a bus-owner daemon reached over the
//! network (`fcan_remote::RemoteMaster`). Everything here is also at the crate root.
//!
//! * [`MasterApi`]: the trait. Nodes ([`NodeInfo`], [`Phase`]), the [`Registry`] of names,
//!   [`Status`], schemas ([`NodeSchema`]) and frame plans ([`Plan`]); topics
//!   ([`subscribe`](MasterApi::subscribe) → [`Sample`], [`publish`](MasterApi::publish)),
//!   services ([`call`](MasterApi::call)), parameters
//!   ([`param_get`](MasterApi::param_get), [`param_set`](MasterApi::param_set)), firmware
//!   updates, every frame on the bus ([`BusFrame`]) and [`MasterEvent`]s. Values are
//!   dynamic ([`Value`]), shaped by the nodes' schemas, known only at run time.
//! * One error model: every method fails with a [`MasterError`], and
//!   [`MasterError::kind`] says what kind of failure it is ([`ErrorKind`]: unknown name,
//!   bad value, not running, timeout, refused, busy, …). The kinds are the same in
//!   process and remote, so match the kind to decide what to do; match the variants
//!   (a [`CallError`], an [`UpdateError`]) for the details a local master has.
//!
//! Write application code against the trait, generic over `M: MasterApi`:
//!
//! ```
//! use std::time::Duration;
//! use fcan_master::value::Value;
//! use fcan_master::{ErrorKind, MasterApi, MasterError, MasterEvent};
//!
//! /// Switches output 0 of io_board3 on, after checking its configuration: the same
//! /// code for a master in this process and one behind the remote API.
//! async fn switch_on<M: MasterApi>(m: &M) -> Result<Value, MasterError> {
//!     let mut events = m.events();
//!     m.wait_for_nodes(1, Duration::from_secs(3)).await?;
//!     // The node came online before we were done waiting: its event is there.
//!     let mut online = false;
//!     while let Ok(e) = events.try_recv() {
//!         online |= matches!(e, MasterEvent::Online { .. });
//!     }
//!     assert!(online);
//!
//!     // Parameters by name, checked against the node's schema first.
//!     m.param_set("io_board3.out0.min_on_ms", Value::UInt(20)).await?;
//!     assert_eq!(m.param_get("io_board3.out0.min_on_ms").await?, Value::UInt(20));
//!
//!     // Failures by kind: the same kinds whichever master answers.
//!     match m.param_get("io_board3.out0.no_such_param").await {
//!         Err(e) if e.kind() == ErrorKind::UnknownName => {} // a typo: say so
//!         Err(e) if e.kind() == ErrorKind::Busy => {}        // try again later
//!         other => panic!("{other:?}"),
//!     }
//!
//!     // A service call: a request value in, the response value out.
//!     let on = Value::from_json_str(r#"{"on": true}"#).expect("a value");
//!     m.call("/io_board3/out0/set", on).await
//! }
//!
//! // In process: a master on the simulated bus, with a fake io board (the example
//! // firmware's schema, run by the node runtime) as node 3.
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # // The paused clock: the master's waits take no real time in a doctest.
//! # let rt = tokio::runtime::Builder::new_current_thread()
//! #     .enable_all()
//! #     .start_paused(true)
//! #     .build()?;
//! # rt.block_on(async {
//! use fcan_core::frame::Mtu;
//! use fcan_fake::{FakeConfig, FakeNode, FakeSchema, Mirror};
//! use fcan_master::transport::sim::SimBus;
//!
//! let bus = SimBus::new(Default::default());
//! let schema = FakeSchema::from_blob(fcan_example_io_board::gen::DESC.blob)?;
//! let node = FakeNode::new(
//!     schema,
//!     FakeConfig {
//!         node_id: fcan_core::id::NodeId::new(3).unwrap(),
//!         boot_id: 7,
//!         counts: None,
//!         fd_capable: true,
//!         mirror: Mirror::new(),
//!     },
//! )?;
//! let _node = fcan_fake::run::run_fake(bus.endpoint(Mtu::Fd), node);
//!
//! let master = fcan_master::Master::start(bus.endpoint(Mtu::Fd), Default::default()).await?;
//! let response = switch_on(&master).await?;
//! println!("io_board3 answered {response}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! Remote: the same function runs over `fcan_remote::RemoteMaster`, the `MasterApi` of
//! a daemon (`fcan serve`) that owns the bus, reached over Zenoh (`docs/remote.md`):
//!
//! ```ignore
//! let session = fcan_remote::session::SessionConfig::client().open().await?.session;
//! let remote = fcan_remote::RemoteMaster::connect(&session, "can0", Default::default()).await?;
//! let response = switch_on(&remote).await?;
//! ```
//!
//! (`ignore`d here: `fcan-remote` depends on this crate. `tests/tests/error_kinds.rs` runs
//! one client function over both and checks they fail with the same kinds.) A remote
//! error is a [`MasterError::Remote`] carrying the kind the daemon's master classified;
//! a match on [`MasterError::kind`] reads it the same as a local error.
//!
//! [`Event`](crate::engine::Event), the engine's own, is for sans-IO users of
//! [`engine`](crate::engine): it also carries the request completions, which a master
//! routes back to the request that asked instead of showing them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};

mod error;
mod event;
mod types;

pub use error::{ErrorKind, MasterError};
pub use event::MasterEvent;
pub use types::{BusFrame, NodeInfo, SchemaSource, Status, FRAMES_BACKLOG};

// The rest of the vocabulary of the trait's signatures, defined where the work is done
// and named here so an application finds it in one place.
pub use crate::dispatch::Sample;
pub use crate::engine::{
    CallError, EngineStats, NodeSchema, Phase, UpdateError, UpdateReport, UpdateStep,
};
pub use crate::planner::Plan;
pub use crate::registry::{ParamInfo, Registry, ServiceInfo, TopicInfo, UnknownName};
pub use crate::update::{Progress, UpdateConfig, UpdateImage};
pub use crate::value::{Value, ValueError};
pub use fcan_core::id::NodeId;
pub use fcan_transport::DeviceWatchdog;

/// The operations of a master that an application uses: nodes, topics, services,
/// parameters, events. See [`Master`](crate::Master) for what each does; a remote
/// implementation documents its own timing.
///
/// Every method takes `&self` and the futures are `Send`, so a handle can be cloned into
/// as many tasks as the application likes.
pub trait MasterApi: Clone + Send + Sync + 'static {
    /// The nodes known, with where the master is with each.
    fn nodes(&self) -> impl Future<Output = Result<Vec<NodeInfo>, MasterError>> + Send;

    /// Every topic, service and parameter of the running nodes.
    fn registry(&self) -> impl Future<Output = Result<Registry, MasterError>> + Send;

    /// A snapshot for monitors: nodes, sample counts, counters, bus time.
    fn status(&self) -> impl Future<Output = Result<Status, MasterError>> + Send;

    /// A node's decoded schema, once the master has it.
    fn schema(
        &self,
        node: NodeId,
    ) -> impl Future<Output = Result<Option<Arc<NodeSchema>>, MasterError>> + Send;

    /// A node's frame plan (what its FRAME_DEFINEs said), once the master planned it.
    fn plan(&self, node: NodeId) -> impl Future<Output = Result<Option<Plan>, MasterError>> + Send;

    /// Master events (nodes announced, running, rebooted, offline, failed …), from now on.
    fn events(&self) -> broadcast::Receiver<MasterEvent>;

    /// Every frame on the bus from now on, received and sent (see [`Master::frames`](crate::Master::frames);
    /// a remote implementation documents its own timing and backlog).
    fn frames(
        &self,
    ) -> impl Future<Output = Result<broadcast::Receiver<BusFrame>, MasterError>> + Send;

    /// Every sample of topic `topic` (`/<node>/<ns>/<name>`), from now on.
    fn subscribe(
        &self,
        topic: &str,
    ) -> impl Future<Output = Result<mpsc::UnboundedReceiver<Sample>, MasterError>> + Send;

    /// Every sample of topic `topic` from now on, sent into `tx`: several topics into one
    /// channel, in the order they came. The default forwards a [`subscribe`](Self::subscribe)
    /// on a task of its own, until `tx`'s receiver is dropped.
    fn subscribe_into(
        &self,
        topic: &str,
        tx: mpsc::UnboundedSender<Sample>,
    ) -> impl Future<Output = Result<(), MasterError>> + Send {
        let sub = self.subscribe(topic);
        async move {
            let mut rx = sub.await?;
            tokio::spawn(async move {
                while let Some(s) = rx.recv().await {
                    if tx.send(s).is_err() {
                        return;
                    }
                }
            });
            Ok(())
        }
    }

    /// Publishes an m2s topic.
    fn publish(
        &self,
        topic: &str,
        value: Value,
    ) -> impl Future<Output = Result<(), MasterError>> + Send;

    /// Publishes several m2s topics as one batch (a frame shared by several topics goes
    /// out once).
    fn publish_many(
        &self,
        items: Vec<(String, Value)>,
    ) -> impl Future<Output = Result<(), MasterError>> + Send;

    /// Calls a service and waits for its response.
    fn call(
        &self,
        service: &str,
        request: Value,
    ) -> impl Future<Output = Result<Value, MasterError>> + Send;

    /// Reads a parameter from the node.
    fn param_get(&self, param: &str) -> impl Future<Output = Result<Value, MasterError>> + Send;

    /// Writes a parameter (checked against the schema, then by the node).
    fn param_set(
        &self,
        param: &str,
        value: Value,
    ) -> impl Future<Output = Result<(), MasterError>> + Send;

    /// Writes a parameter and returns the value the node holds afterwards, read back
    /// from it: what a face shows after a write, so every face shows the same (an `f32`
    /// parameter set to `1e-50` holds `0`; a device may hold what it made of the value).
    /// The default is [`param_set`](Self::param_set) then [`param_get`](Self::param_get);
    /// the in-process master reads back as soon as the node acknowledged the write, and
    /// the remote client gets the daemon's read-back in its reply.
    fn param_set_read_back(
        &self,
        param: &str,
        value: Value,
    ) -> impl Future<Output = Result<Value, MasterError>> + Send {
        async move {
            self.param_set(param, value).await?;
            self.param_get(param).await
        }
    }

    /// Provisions a running (or failed) node again (see [`Master::reprovision`](crate::Master::reprovision)).
    fn reprovision(&self, node: NodeId) -> impl Future<Output = Result<(), MasterError>> + Send;

    /// Writes a firmware image into a node over the bus and returns once it runs it,
    /// provisioned again (see [`Master::update`](crate::Master::update)); progress comes as
    /// [`MasterEvent::UpdateProgress`] on
    /// [`events`](Self::events).
    fn update(
        &self,
        node: NodeId,
        image: UpdateImage,
        cfg: UpdateConfig,
    ) -> impl Future<Output = Result<UpdateReport, MasterError>> + Send;

    /// Drops the node's update transfer and ends an update of it (see
    /// [`Master::abort_update`](crate::Master::abort_update)).
    fn abort_update(&self, node: NodeId) -> impl Future<Output = Result<(), MasterError>> + Send;

    /// Waits until at least `n` nodes are running, polling [`nodes`](Self::nodes).
    fn wait_for_nodes(
        &self,
        n: usize,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<NodeInfo>, MasterError>> + Send {
        async move {
            // tokio's clock, so a paused (virtual) clock bounds the wait too.
            let start = tokio::time::Instant::now();
            loop {
                let nodes = self.nodes().await?;
                let running = nodes.iter().filter(|x| x.phase == Phase::Running).count();
                if running >= n {
                    return Ok(nodes);
                }
                if start.elapsed() >= timeout {
                    return Err(MasterError::NotEnoughNodes {
                        found: running,
                        wanted: n,
                        waited: timeout,
                    });
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Master;

    /// Generic application code: compiles against the trait only.
    async fn running_names<M: MasterApi>(m: &M) -> Result<Vec<String>, MasterError> {
        Ok(m.nodes()
            .await?
            .into_iter()
            .filter(|n| n.phase == Phase::Running)
            .map(|n| n.name)
            .collect())
    }

    #[tokio::test(start_paused = true)]
    async fn master_implements_the_trait() {
        let bus = crate::transport::sim::SimBus::new(Default::default());
        let master = Master::start(bus.endpoint(fcan_core::frame::Mtu::Fd), Default::default())
            .await
            .unwrap();
        // No node on the bus: the trait's calls reach the master task and come back.
        assert_eq!(running_names(&master).await.unwrap(), Vec::<String>::new());
        let e = MasterApi::wait_for_nodes(&master, 1, Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                MasterError::NotEnoughNodes {
                    found: 0,
                    wanted: 1,
                    ..
                }
            ),
            "{e}"
        );
    }
}
