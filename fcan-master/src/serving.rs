//! What a face (the Foxglove server, the ROS 2 bridge, the remote API) serves: the
//! running nodes, each by its id, boot and schema, so a reboot or a new schema is a new
//! node; the one rule that turns the served set into the running set ([`resync`]); and
//! the one [`Supervisor`] that applies it for every face: on each node event and on a
//! backstop tick, one resync at a time, telling its [`Face`] which node to serve and
//! which to stop serving, and why ([`Unserved`]).
//!
//! A face is only its protocol: what serving one node means (endpoints, channels,
//! queryables), and what to do when the served set changed (publish its graph).
//!
//! ```
//! # async fn demo(master: fcan_master::Master) {
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use fcan_master::NodeInfo;
//! use fcan_master::registry::Registry;
//! use fcan_master::serving::{Face, NodeKey, Supervisor, Unserved};
//!
//! /// A face that prints what it would serve.
//! #[derive(Default)]
//! struct Printer(Mutex<Vec<String>>);
//!
//! impl Face for Printer {
//!     async fn serve(&self, node: &NodeInfo, registry: &Registry) -> bool {
//!         let topics = registry.topics.iter().filter(|t| t.node == node.id).count();
//!         println!("serving {} ({topics} topics)", node.name);
//!         true
//!     }
//!     fn unserve(&self, _key: NodeKey, name: &str, why: &Unserved) {
//!         println!("{name} no longer served ({why})");
//!     }
//! }
//!
//! let sup = Supervisor::new(master, Arc::new(Printer::default()), Duration::from_secs(1));
//! sup.resync().await; // serve the nodes running now
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
    pub id: u8,
    /// Boot id.
    pub boot_id: u32,
    /// Schema digest.
    pub digest: Option<SchemaDigest>,
}

impl NodeKey {
    /// A node key.
    pub fn new(id: u8, boot_id: u32, digest: Option<SchemaDigest>) -> NodeKey {
        NodeKey {
            id,
            boot_id,
            digest,
        }
    }

    /// The key of a node as the master reports it.
    pub fn of(n: &NodeInfo) -> NodeKey {
        NodeKey::new(n.id.get(), n.boot_id, n.digest)
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
        match nodes.iter().find(|n| n.id.get() == key.id) {
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

/// What a face does for the [`Supervisor`]: serve a node, stop serving it, hear the
/// master's events, and say the served set changed. Every method is called by one task
/// at a time per supervisor (resyncs do not overlap).
pub trait Face: Send + Sync + 'static {
    /// Starts serving running node `node`; `registry` is the master's, fetched once per
    /// resync. `false`: it could not (the face logs why); it is tried again at the next
    /// resync.
    fn serve(&self, node: &NodeInfo, registry: &Registry) -> impl Future<Output = bool> + Send;

    /// Stops serving node `key`, named `name`, for `why`.
    fn unserve(&self, key: NodeKey, name: &str, why: &Unserved);

    /// A master event, as it comes, before the resync it may cause; `name` is the node's
    /// while it is served.
    fn on_event(&self, e: &MasterEvent, name: Option<&str>) -> impl Future<Output = ()> + Send {
        let _ = (e, name);
        async {}
    }

    /// The served set changed (a resync stopped or started a node): `served` is it now.
    fn served_changed(&self, served: &[ServedNode]) -> impl Future<Output = ()> + Send {
        let _ = served;
        async {}
    }
}

/// Keeps a [`Face`]'s served nodes the running ones: resyncs on every node event
/// (online, offline, rebooted, failed, or a lagged event stream) and on a backstop tick
/// (a missed event; a remote master's event that comes before its node list shows the
/// node), one resync at a time.
pub struct Supervisor<M, F> {
    master: M,
    face: Arc<F>,
    served: Mutex<BTreeMap<u8, ServedNode>>,
    resyncing: tokio::sync::Mutex<()>,
    period: Duration,
}

impl<M: MasterApi, F: Face> Supervisor<M, F> {
    /// A supervisor of `face` over `master`, with a backstop resync every `period`.
    /// Nothing is served until [`resync`](Self::resync) or [`spawn`](Self::spawn).
    pub fn new(master: M, face: Arc<F>, period: Duration) -> Arc<Self> {
        Arc::new(Supervisor {
            master,
            face,
            served: Mutex::new(BTreeMap::new()),
            resyncing: tokio::sync::Mutex::new(()),
            period,
        })
    }

    /// The face.
    pub fn face(&self) -> &Arc<F> {
        &self.face
    }

    /// The nodes served now, by id.
    pub fn served(&self) -> Vec<ServedNode> {
        lock(&self.served).values().cloned().collect()
    }

    /// The name of node `id` while it is served.
    pub fn name_of(&self, id: NodeId) -> Option<String> {
        lock(&self.served).get(&id.get()).map(|n| n.name.clone())
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
        let served: Vec<NodeKey> = lock(&self.served).values().map(|n| n.key).collect();
        let plan = resync(&served, &running(&nodes));
        if plan.stop.is_empty() && plan.start.is_empty() {
            return;
        }
        for key in &plan.stop {
            let gone = lock(&self.served).remove(&key.id);
            if let Some(n) = gone {
                self.face.unserve(*key, &n.name, &Unserved::of(key, &nodes));
            }
        }
        let registry = if plan.start.is_empty() {
            None
        } else {
            self.master.registry().await.ok()
        };
        if let Some(r) = &registry {
            for key in &plan.start {
                let Some(n) = nodes.iter().find(|n| n.id.get() == key.id) else {
                    continue;
                };
                if self.face.serve(n, r).await {
                    lock(&self.served).insert(
                        key.id,
                        ServedNode {
                            key: *key,
                            name: n.name.clone(),
                        },
                    );
                }
            }
        }
        let now = self.served();
        self.face.served_changed(&now).await;
    }

    /// Stops serving every node ([`Unserved::Stopped`]). The event loop, if spawned,
    /// must be aborted first or it serves them again.
    pub fn stop(&self) {
        let all = std::mem::take(&mut *lock(&self.served));
        for n in all.into_values() {
            self.face.unserve(n.key, &n.name, &Unserved::Stopped);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resync_stops_what_went_and_starts_what_came() {
        let d = Some(SchemaDigest::of(b"x"));
        let a = NodeKey::new(1, 10, d);
        let b = NodeKey::new(2, 20, d);
        let b2 = NodeKey::new(2, 21, d);
        let c = NodeKey::new(3, 30, None);
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
        let key = NodeKey::new(1, 10, d);
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
