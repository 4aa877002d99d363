//! What a face (the Foxglove server, the ROS 2 bridge) serves: the running nodes, each by
//! its id, boot and schema, so a reboot or a new schema is a new node; and the one rule
//! that turns the served set into the running set ([`resync`]).

use fcan_core::hash::SchemaDigest;

use crate::engine::Phase;
use crate::master::NodeInfo;

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
        .map(|n| NodeKey::new(n.id.get(), n.boot_id, n.digest))
        .collect()
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
}
