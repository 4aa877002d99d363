//! [`MasterApi`]: what an application does with a master, whether the master runs in
//! this process ([`Master`](crate::Master)) or in a bus-owner daemon reached over the network (the
//! remote client of `fcan-remote`). Application code written against the trait runs
//! unchanged on either.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};

mod error;
mod types;

pub use error::{ErrorKind, MasterError};
pub use types::{BusFrame, NodeInfo, SchemaSource, Status, FRAMES_BACKLOG};

// The rest of the vocabulary of the trait's signatures, defined where the work is done
// and named here so an application finds it in one place.
pub use crate::dispatch::Sample;
pub use crate::engine::{
    CallError, EngineStats, Event, NodeSchema, Phase, UpdateError, UpdateReport, UpdateStep,
};
pub use crate::planner::Plan;
pub use crate::registry::{ParamInfo, Registry, ServiceInfo, TopicInfo, UnknownName};
pub use crate::update::{Progress, UpdateConfig, UpdateImage};
pub use crate::value::{Value, ValueError};
pub use fcan_core::id::NodeId;
pub use fcan_transport::DeviceWatchdog;

/// The operations of a master that an application uses: nodes, topics, services,
/// parameters, events. See [`Master`](crate::Master) for what each does; a remote implementation
/// documents its own timing.
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
    fn events(&self) -> broadcast::Receiver<Event>;

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
    /// [`Event::UpdateProgress`] on
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
