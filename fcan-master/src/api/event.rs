//! [`MasterEvent`]: what a master tells its users happened, the engine's events without
//! its request completions (those answer the request that asked, not every listener).

use fcan_core::hash::SchemaDigest;
use fcan_core::id::NodeId;

use crate::engine::{Event, UpdateError, UpdateReport, UpdateStep};
use crate::update::Progress;
use crate::value::Value;

/// A master event: nodes announced, running, rebooted, offline, failed, collisions,
/// firmware updates, parameter changes. What [`MasterApi::events`] carries, in process
/// and remote alike; the engine's own [`Event`] adds the request completions a sans-IO
/// user routes back to its callers.
///
/// Non-exhaustive: new features bring new events, so a `match` keeps a catch-all arm.
///
/// ```
/// use fcan_master::MasterEvent;
/// fn went_away(e: &MasterEvent) -> Option<u8> {
///     match e {
///         MasterEvent::Offline { node } | MasterEvent::Rebooted { node, .. } => Some(node.get()),
///         _ => None,
///     }
/// }
/// let n = fcan_core::id::NodeId::new(3).unwrap();
/// assert_eq!(went_away(&MasterEvent::Offline { node: n }), Some(3));
/// assert_eq!(went_away(&MasterEvent::Online { node: n }), None);
/// ```
///
/// [`MasterApi::events`]: crate::MasterApi::events
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum MasterEvent {
    /// A node announced itself (first time, or again).
    Announced {
        /// Node id.
        node: NodeId,
        /// Its boot id.
        boot_id: u32,
    },
    /// A node's schema is known: from the cache or downloaded and verified.
    SchemaReady {
        /// Node id.
        node: NodeId,
        /// Full digest.
        digest: SchemaDigest,
        /// Whether it came from the cache (no transfer).
        cached: bool,
    },
    /// A node was started: its topics flow.
    Online {
        /// Node id.
        node: NodeId,
    },
    /// A node came back with a new boot id; it is being re-provisioned.
    Rebooted {
        /// Node id.
        node: NodeId,
        /// Boot id before.
        old: u32,
        /// Boot id now.
        new: u32,
    },
    /// A node fell silent.
    Offline {
        /// Node id.
        node: NodeId,
    },
    /// A node could not be provisioned; it is retried when it announces again.
    Failed {
        /// Node id.
        node: NodeId,
        /// Why, for people (may quote the node: untrusted text).
        reason: String,
    },
    /// Two nodes answer to one node id.
    Collision {
        /// Node id.
        node: NodeId,
        /// The two boot ids seen.
        boot_ids: (u32, u32),
    },
    /// Another master's heartbeat was heard: two owners would fight over the bus.
    OtherMaster {
        /// Its session id.
        session: u32,
    },
    /// A node on an FD link cannot do FD: it is run on Classical CAN frames.
    ClassicNodeOnFdLink {
        /// Node id.
        node: NodeId,
    },
    /// How far a firmware update is.
    UpdateProgress {
        /// The update's id (one per update the master runs).
        id: u64,
        /// Node id.
        node: NodeId,
        /// Where it stands.
        step: UpdateStep,
        /// Bytes, rate, ETA.
        progress: Progress,
    },
    /// A firmware update ended: the new firmware runs and is provisioned, or why not.
    UpdateDone {
        /// The update's id, as in [`MasterEvent::UpdateProgress`].
        id: u64,
        /// Node id.
        node: NodeId,
        /// What it did, or why it failed.
        result: Result<UpdateReport, UpdateError>,
    },
    /// A node came back with another schema: the parameters the user had set were
    /// carried to it by block, name and type; those it no longer has are dropped.
    ParamsCarried {
        /// Node id.
        node: NodeId,
        /// `node.block.param` paths restored.
        restored: Vec<String>,
        /// `node.block.param` paths the new schema does not have (or with another type).
        dropped: Vec<String>,
    },
    /// A user's parameter write was acknowledged by the node, whoever asked (a face, the
    /// CLI, a cycle): faces that announce parameter changes hear writes made through the
    /// others.
    ParamChanged {
        /// Node id.
        node: NodeId,
        /// `node.block.param`.
        name: String,
        /// The value the node took.
        value: Value,
    },
}

impl MasterEvent {
    /// The event users see for an engine event: `None` for the request completions
    /// ([`Event::CallDone`], [`Event::ParamDone`]), which go to the request that asked.
    /// What the master's task forwards; a sans-IO user of the engine may do the same.
    pub fn from_engine(e: Event) -> Option<MasterEvent> {
        Some(match e {
            Event::Announced { node, boot_id } => MasterEvent::Announced { node, boot_id },
            Event::SchemaReady {
                node,
                digest,
                cached,
            } => MasterEvent::SchemaReady {
                node,
                digest,
                cached,
            },
            Event::Online { node } => MasterEvent::Online { node },
            Event::Rebooted { node, old, new } => MasterEvent::Rebooted { node, old, new },
            Event::Offline { node } => MasterEvent::Offline { node },
            Event::Failed { node, reason } => MasterEvent::Failed { node, reason },
            Event::Collision { node, boot_ids } => MasterEvent::Collision { node, boot_ids },
            Event::OtherMaster { session } => MasterEvent::OtherMaster { session },
            Event::ClassicNodeOnFdLink { node } => MasterEvent::ClassicNodeOnFdLink { node },
            Event::UpdateProgress {
                id,
                node,
                step,
                progress,
            } => MasterEvent::UpdateProgress {
                id,
                node,
                step,
                progress,
            },
            Event::UpdateDone { id, node, result } => MasterEvent::UpdateDone { id, node, result },
            Event::ParamsCarried {
                node,
                restored,
                dropped,
            } => MasterEvent::ParamsCarried {
                node,
                restored,
                dropped,
            },
            Event::ParamChanged { node, name, value } => {
                MasterEvent::ParamChanged { node, name, value }
            }
            // Exhaustive on purpose (this crate sees every variant): a new engine event
            // does not compile until it is decided whether users see it.
            Event::CallDone { .. } | Event::ParamDone { .. } => return None,
        })
    }

    /// The node the event is about, if it is about one.
    pub fn node(&self) -> Option<NodeId> {
        match self {
            MasterEvent::Announced { node, .. }
            | MasterEvent::SchemaReady { node, .. }
            | MasterEvent::Online { node }
            | MasterEvent::Rebooted { node, .. }
            | MasterEvent::Offline { node }
            | MasterEvent::Failed { node, .. }
            | MasterEvent::Collision { node, .. }
            | MasterEvent::ClassicNodeOnFdLink { node }
            | MasterEvent::UpdateProgress { node, .. }
            | MasterEvent::UpdateDone { node, .. }
            | MasterEvent::ParamsCarried { node, .. }
            | MasterEvent::ParamChanged { node, .. } => Some(*node),
            MasterEvent::OtherMaster { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_completions_are_not_master_events() {
        let n = NodeId::new(4).unwrap();
        assert_eq!(
            MasterEvent::from_engine(Event::CallDone {
                id: 1,
                result: Ok(vec![])
            }),
            None
        );
        assert_eq!(
            MasterEvent::from_engine(Event::ParamDone {
                id: 2,
                result: Ok(None)
            }),
            None
        );
        let e = MasterEvent::from_engine(Event::Offline { node: n }).unwrap();
        assert_eq!(e, MasterEvent::Offline { node: n });
        assert_eq!(e.node(), Some(n));
    }
}
