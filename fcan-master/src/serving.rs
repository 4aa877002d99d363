//! What a face (the Foxglove server, the ROS 2 bridge, the remote API) serves: the
//! running nodes, each by its id, boot and schema, so a reboot or a new schema is a new
//! node; the one rule that turns the served set into the running set ([`resync`]); and
//! the one [`Supervisor`] that applies it for every face: on each node event and on a
//! backstop tick, one resync at a time, telling its [`Face`] which node to serve and
//! which to stop serving, and why ([`Unserved`]).
//!
//! A face is only its protocol: what serving one node means (endpoints, channels,
//! queryables), held in its [`Face::Node`] handle, and what to do when the served set
//! changed (publish its graph). The supervisor keeps the handles in its one
//! [`ServedSet`] (a face reads it, never keeps a map of its own) and drops a node's
//! handle when it stops serving the node: dropping the handle is what takes the node
//! off the face ([`NodeTasks`] for a face whose endpoints live on tasks).
//!
//! ```
//! # async fn demo(master: fcan_master::Master) {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use fcan_master::NodeInfo;
//! use fcan_master::registry::Registry;
//! use fcan_master::serving::{Face, ServedNode, Supervisor, Unserved};
//!
//! /// A face that prints what it would serve; its handle is the node's topic count.
//! struct Printer;
//!
//! impl Face for Printer {
//!     type Node = usize;
//!     async fn serve(&self, node: &NodeInfo, registry: &Registry) -> Option<usize> {
//!         let topics = registry.topics.iter().filter(|t| t.node == node.id).count();
//!         println!("serving {} ({topics} topics)", node.name);
//!         Some(topics)
//!     }
//!     fn unserve(&self, node: &ServedNode, topics: usize, why: &Unserved) {
//!         println!("{} no longer served ({why}); it had {topics} topics", node.name);
//!     }
//! }
//!
//! let sup = Supervisor::new(master, Arc::new(Printer), Duration::from_secs(1));
//! sup.resync().await; // serve the nodes running now
//! let served: usize = sup.set().fold(0, |n, s| n + s.handle); // what the face holds
//! println!("{} nodes, {served} topics", sup.served().len());
//! let task = sup.spawn(); // then follow the bus
//! # task.abort();
//! # }
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fcan_core::hash::SchemaDigest;
use fcan_core::id::NodeId;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::api::MasterApi;
use crate::api::MasterEvent;
use crate::api::NodeInfo;
use crate::engine::Phase;
use crate::registry::Registry;

/// Locks a mutex, poisoned or not: a face's state stays consistent between statements
/// (no invariant spans a panic), so a panic elsewhere while holding the lock must not
/// take the face down with it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A node as served: its id and what makes a new boot or schema a new node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeKey {
    /// Node id.
    pub id: NodeId,
    /// Boot id.
    pub boot_id: u32,
    /// Schema digest.
    pub digest: Option<SchemaDigest>,
}

impl NodeKey {
    /// A node key.
    pub fn new(id: NodeId, boot_id: u32, digest: Option<SchemaDigest>) -> NodeKey {
        NodeKey {
            id,
            boot_id,
            digest,
        }
    }

    /// The key of a node as the master reports it.
    pub fn of(n: &NodeInfo) -> NodeKey {
        NodeKey::new(n.id, n.boot_id, n.digest)
    }
}

/// What a resync does: the nodes to stop serving, then the ones to start serving.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resync {
    /// Served, but not running any more, or running another boot or schema.
    pub stop: Vec<NodeKey>,
    /// Running and not served (a rebooted node is in both lists).
    pub start: Vec<NodeKey>,
}

/// Makes the served set the running set: which nodes to stop and start serving.
pub fn resync(served: &[NodeKey], running: &[NodeKey]) -> Resync {
    Resync {
        stop: served
            .iter()
            .filter(|s| !running.contains(s))
            .copied()
            .collect(),
        start: running
            .iter()
            .filter(|r| !served.contains(r))
            .copied()
            .collect(),
    }
}

/// The keys of the running nodes among `nodes` (what a face should serve).
pub fn running(nodes: &[NodeInfo]) -> Vec<NodeKey> {
    nodes
        .iter()
        .filter(|n| n.phase == Phase::Running)
        .map(NodeKey::of)
        .collect()
}

/// Why a node stopped being served.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unserved {
    /// The node runs again as a new node: another boot, or another schema (it is served
    /// again at once, or when its provisioning ends).
    Rebooted,
    /// It is known but not running: in this phase (offline, failed, provisioning).
    Phase(Phase),
    /// The master no longer knows it.
    Gone,
    /// The face is stopping.
    Stopped,
}

impl Unserved {
    /// Why the node of `key` is no longer to be served, given the nodes known now.
    pub fn of(key: &NodeKey, nodes: &[NodeInfo]) -> Unserved {
        match nodes.iter().find(|n| n.id == key.id) {
            // Another boot (provisioned again, or running already), or the same boot
            // with another schema.
            Some(n)
                if n.boot_id != key.boot_id
                    || n.phase == Phase::Running
                    || (n.digest.is_some() && n.digest != key.digest) =>
            {
                Unserved::Rebooted
            }
            Some(n) => Unserved::Phase(n.phase.clone()),
            None => Unserved::Gone,
        }
    }
}

impl Unserved {
    /// Whether a face logs that the node stopped being served for this reason: not
    /// when the face itself stops (every node at once, at the end of a program: the
    /// program says it stops, once).
    pub fn is_logged(&self) -> bool {
        !matches!(self, Unserved::Stopped)
    }
}

impl std::fmt::Display for Unserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unserved::Rebooted => f.write_str("rebooted"),
            Unserved::Phase(p) => write!(f, "{p}"),
            Unserved::Gone => f.write_str("gone"),
            Unserved::Stopped => f.write_str("the face stopped"),
        }
    }
}

/// A node served: its key and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServedNode {
    /// Id, boot and schema.
    pub key: NodeKey,
    /// The node's name (its schema's).
    pub name: String,
}

/// One node in a [`ServedSet`]: who it is, and what the face holds for it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Served<H> {
    /// Id, boot, schema and name.
    pub node: ServedNode,
    /// The face's handle ([`Face::Node`]).
    pub handle: H,
}

/// The nodes a [`Supervisor`] serves, by id, each with its face's handle: the one map
/// of served nodes. The supervisor writes it; the face reads it (a clone shares the
/// same set), e.g. to find the node a client's channel belongs to, or to list what it
/// carries. Reads run under the set's lock: keep them short, and never await in them.
pub struct ServedSet<H>(Arc<Mutex<BTreeMap<NodeId, Served<H>>>>);

impl<H> Clone for ServedSet<H> {
    fn clone(&self) -> Self {
        ServedSet(self.0.clone())
    }
}

impl<H> Default for ServedSet<H> {
    fn default() -> Self {
        ServedSet(Arc::new(Mutex::new(BTreeMap::new())))
    }
}

impl<H> std::fmt::Debug for ServedSet<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.nodes()).finish()
    }
}

impl<H> ServedSet<H> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The nodes served now, by id.
    pub fn nodes(&self) -> Vec<ServedNode> {
        lock(&self.0).values().map(|s| s.node.clone()).collect()
    }

    /// How many nodes are served.
    pub fn len(&self) -> usize {
        lock(&self.0).len()
    }

    /// Whether no node is served.
    pub fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }

    /// The name of node `id` while it is served.
    pub fn name_of(&self, id: NodeId) -> Option<String> {
        lock(&self.0).get(&id).map(|s| s.node.name.clone())
    }

    /// `f` of node `id`'s entry, while it is served.
    pub fn get<R>(&self, id: NodeId, f: impl FnOnce(&Served<H>) -> R) -> Option<R> {
        lock(&self.0).get(&id).map(f)
    }

    /// The first `Some` that `f` gives over the served nodes, by id.
    pub fn find_map<R>(&self, f: impl FnMut(&Served<H>) -> Option<R>) -> Option<R> {
        lock(&self.0).values().find_map(f)
    }

    /// Folds `f` over the served nodes, by id.
    pub fn fold<A>(&self, init: A, f: impl FnMut(A, &Served<H>) -> A) -> A {
        lock(&self.0).values().fold(init, f)
    }

    /// Everything `f` gives for each served node, by id, flattened.
    pub fn flat_map<R, I: IntoIterator<Item = R>>(&self, f: impl FnMut(&Served<H>) -> I) -> Vec<R> {
        lock(&self.0).values().flat_map(f).collect()
    }

    fn insert(&self, node: ServedNode, handle: H) {
        // Resync stops a node before it serves it again, so there is no old entry; if
        // there were, it is dropped after the lock is released: a handle's drop may call
        // back into the face, which reads this set (Foxglove's closing channels do).
        let old = lock(&self.0).insert(node.key.id, Served { node, handle });
        drop(old);
    }

    fn remove(&self, id: NodeId) -> Option<Served<H>> {
        lock(&self.0).remove(&id)
    }

    fn take_all(&self) -> Vec<Served<H>> {
        std::mem::take(&mut *lock(&self.0)).into_values().collect()
    }
}

/// The tasks that serve one node on a face (its forwarders, its endpoints' loops):
/// aborted when this is dropped, which drops what they own. The usual [`Face::Node`]
/// handle, or part of one.
#[derive(Debug, Default)]
pub struct NodeTasks(Vec<JoinHandle<()>>);

impl NodeTasks {
    /// No tasks yet.
    pub fn new() -> NodeTasks {
        NodeTasks::default()
    }

    /// Adds a task.
    pub fn push(&mut self, task: JoinHandle<()>) {
        self.0.push(task);
    }

    /// How many tasks.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for NodeTasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// What a face does for the [`Supervisor`]: serve a node, stop serving it, hear the
/// master's events, and say the served set changed. Every method is called by one task
/// at a time per supervisor (resyncs do not overlap).
pub trait Face: Send + Sync + 'static {
    /// What the face holds for one node it serves (its endpoints, channels, tasks). The
    /// supervisor keeps it in its [`ServedSet`] while the node is served and drops it
    /// when it stops serving the node: dropping it must take the node off the face.
    type Node: Send + 'static;

    /// Starts serving running node `node`; `registry` is the master's, fetched once per
    /// resync. `None`: it could not (the face logs why); it is tried again at the next
    /// resync.
    fn serve(
        &self,
        node: &NodeInfo,
        registry: &Registry,
    ) -> impl Future<Output = Option<Self::Node>> + Send;

    /// Stops serving `node` for `why`: `handle` was taken out of the set and is dropped
    /// when this returns (a face logs, or tells its clients first).
    fn unserve(&self, node: &ServedNode, handle: Self::Node, why: &Unserved) {
        let _ = (node, handle, why);
    }

    /// A master event, as it comes, before the resync it may cause; `name` is the node's
    /// while it is served.
    fn on_event(&self, e: &MasterEvent, name: Option<&str>) -> impl Future<Output = ()> + Send {
        let _ = (e, name);
        async {}
    }

    /// The served set changed (a resync stopped or started a node): `served` is it now.
    fn served_changed(&self, served: &ServedSet<Self::Node>) -> impl Future<Output = ()> + Send {
        let _ = served;
        async {}
    }
}

/// Keeps a [`Face`]'s served nodes the running ones: resyncs on every node event
/// (online, offline, rebooted, failed, or a lagged event stream) and on a backstop tick
/// (a missed event; a remote master's event that comes before its node list shows the
/// node), one resync at a time.
pub struct Supervisor<M, F: Face> {
    master: M,
    face: Arc<F>,
    served: ServedSet<F::Node>,
    resyncing: tokio::sync::Mutex<()>,
    period: Duration,
}

impl<M: MasterApi, F: Face> Supervisor<M, F> {
    /// A supervisor of `face` over `master`, with a backstop resync every `period`.
    /// Nothing is served until [`resync`](Self::resync) or [`spawn`](Self::spawn).
    pub fn new(master: M, face: Arc<F>, period: Duration) -> Arc<Self> {
        Self::with_set(master, face, ServedSet::new(), period)
    }

    /// [`new`](Self::new), keeping the served nodes in `set`: a face that reads the set
    /// from its own tasks (a client's request) makes it first and keeps a clone.
    pub fn with_set(
        master: M,
        face: Arc<F>,
        set: ServedSet<F::Node>,
        period: Duration,
    ) -> Arc<Self> {
        Arc::new(Supervisor {
            master,
            face,
            served: set,
            resyncing: tokio::sync::Mutex::new(()),
            period,
        })
    }

    /// The face.
    pub fn face(&self) -> &Arc<F> {
        &self.face
    }

    /// The served nodes with the face's handles.
    pub fn set(&self) -> &ServedSet<F::Node> {
        &self.served
    }

    /// The nodes served now, by id.
    pub fn served(&self) -> Vec<ServedNode> {
        self.served.nodes()
    }

    /// The name of node `id` while it is served.
    pub fn name_of(&self, id: NodeId) -> Option<String> {
        self.served.name_of(id)
    }

    /// Follows the master: the event loop, on its own task (abort it to stop following;
    /// [`stop`](Self::stop) then unserves every node). Returns when the master's event
    /// stream closes.
    pub fn spawn(self: &Arc<Self>) -> JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move { me.run().await })
    }

    async fn run(&self) {
        let mut rx = self.master.events();
        let mut tick = tokio::time::interval(self.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                e = rx.recv() => match e {
                    Ok(e) => {
                        let name = match e.node() {
                            Some(id) => self.name_of(id),
                            None => None,
                        };
                        self.face.on_event(&e, name.as_deref()).await;
                        if matches!(
                            e,
                            MasterEvent::Online { .. } | MasterEvent::Offline { .. } | MasterEvent::Rebooted { .. } | MasterEvent::Failed { .. }
                        ) {
                            self.resync().await;
                        }
                    }
                    Err(RecvError::Lagged(_)) => self.resync().await,
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick() => self.resync().await,
            }
        }
    }

    /// Makes the served nodes the running ones now: stops serving what went, rebooted
    /// or changed schema, then serves what runs and is not served.
    pub async fn resync(&self) {
        let _one = self.resyncing.lock().await;
        let Ok(nodes) = self.master.nodes().await else {
            return;
        };
        let served: Vec<NodeKey> = self.served.nodes().iter().map(|n| n.key).collect();
        let plan = resync(&served, &running(&nodes));
        if plan.stop.is_empty() && plan.start.is_empty() {
            return;
        }
        for key in &plan.stop {
            if let Some(gone) = self.served.remove(key.id) {
                self.face
                    .unserve(&gone.node, gone.handle, &Unserved::of(key, &nodes));
            }
        }
        let registry = if plan.start.is_empty() {
            None
        } else {
            self.master.registry().await.ok()
        };
        if let Some(r) = &registry {
            for key in &plan.start {
                let Some(n) = nodes.iter().find(|n| n.id == key.id) else {
                    continue;
                };
                if let Some(handle) = self.face.serve(n, r).await {
                    let node = ServedNode {
                        key: *key,
                        name: n.name.clone(),
                    };
                    self.served.insert(node, handle);
                }
            }
        }
        self.face.served_changed(&self.served).await;
    }

    /// Stops serving every node ([`Unserved::Stopped`]). The event loop, if spawned,
    /// must be aborted first or it serves them again.
    pub fn stop(&self) {
        for gone in self.served.take_all() {
            self.face
                .unserve(&gone.node, gone.handle, &Unserved::Stopped);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resync_stops_what_went_and_starts_what_came() {
        let d = Some(SchemaDigest::of(b"x"));
        let id = |n| NodeId::new(n).unwrap();
        let a = NodeKey::new(id(1), 10, d);
        let b = NodeKey::new(id(2), 20, d);
        let b2 = NodeKey::new(id(2), 21, d);
        let c = NodeKey::new(id(3), 30, None);
        assert_eq!(
            resync(&[], &[a, b]),
            Resync {
                stop: vec![],
                start: vec![a, b]
            }
        );
        assert_eq!(resync(&[a, b], &[a, b]), Resync::default());
        // b rebooted (new boot id), c came, a went.
        assert_eq!(
            resync(&[a, b], &[b2, c]),
            Resync {
                stop: vec![a, b],
                start: vec![b2, c]
            }
        );
    }

    fn info(boot_id: u32, phase: Phase, digest: Option<SchemaDigest>) -> NodeInfo {
        NodeInfo {
            id: NodeId::new(1).unwrap(),
            name: "n".into(),
            phase,
            state: fcan_core::msg::NodeState::Running,
            boot_id,
            digest,
            schema_source: None,
            errors: 0,
            mode: fcan_core::msg::BusMode::Classic,
            frames: 0,
            driver: None,
            watchdog: None,
            firmware: None,
            collision: None,
        }
    }

    #[test]
    fn why_a_node_stopped_is_decided_by_one_rule() {
        let d = Some(SchemaDigest::of(b"a"));
        let key = NodeKey::new(NodeId::new(1).unwrap(), 10, d);
        assert_eq!(Unserved::of(&key, &[]), Unserved::Gone);
        assert_eq!(
            Unserved::of(&key, &[info(10, Phase::Offline, d)]),
            Unserved::Phase(Phase::Offline)
        );
        // Another boot, provisioning or running: a reboot, not a phase.
        assert_eq!(
            Unserved::of(&key, &[info(11, Phase::Provisioning, d)]),
            Unserved::Rebooted
        );
        // The same boot running with another schema (provisioned again after an update).
        let other = Some(SchemaDigest::of(b"b"));
        assert_eq!(
            Unserved::of(&key, &[info(10, Phase::Running, other)]),
            Unserved::Rebooted
        );
        assert_eq!(Unserved::Phase(Phase::Offline).to_string(), "offline");
    }
}
