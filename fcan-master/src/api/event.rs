//! [`MasterEvent`]: what a master tells its users happened, the engine's events without
//! its request completions (those answer the request that asked, not every listener).

use fcan_core::hash::SchemaDigest;
use fcan_core::id::NodeId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
/// Its serde shape is the event of the remote API and of `fcan monitor --json`
/// (`docs/remote.md`, "Events"): `kind` (`announced`, `schema_ready`, `online`,
/// `rebooted`, `offline`, `failed`, `collision`, `other_master`,
/// `classic_node_on_fd_link`, `params_carried`, `param_changed`, `update_progress`),
/// `node` (the id, `null` for a bus-wide event), `text` for people
/// ([`describe_event`](crate::json::describe_event)) and the variant's own fields,
/// declared here once. [`MasterEvent::UpdateDone`] has none: it answers the request that
/// began the update, so serializing it is an error. Reading one back checks every field
/// and ignores `text`.
///
/// ```
/// use fcan_master::MasterEvent;
/// let e = MasterEvent::Rebooted { node: fcan_core::id::NodeId::new(3).unwrap(), old: 1, new: 2 };
/// let j = serde_json::to_value(&e).unwrap();
/// assert_eq!(j, serde_json::json!({"kind": "rebooted", "node": 3, "old": 1, "new": 2,
///     "text": "node 3 rebooted: re-provisioning, restoring parameters"}));
/// assert_eq!(serde_json::from_value::<MasterEvent>(j).unwrap(), e);
/// ```
///
/// [`MasterApi::events`]: crate::MasterApi::events
// The shape is derived here, once. `remote = "Self"` makes the derive emit it as the
// associated functions `MasterEvent::serialize(&e, s)` and `MasterEvent::deserialize(d)`
// instead of the traits; the trait impls below wrap them to add `text` (computed, so not
// derivable) and `node: null` for a bus-wide event. Serialize through the trait
// (`serde_json::to_value(&e)`, `e.serialize(s)`), which has the documented shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum MasterEvent {
    /// A node announced itself (first time, or again).
    Announced {
        /// Node id.
        #[serde(with = "crate::json::with::node_id")]
        node: NodeId,
        /// Its boot id.
        boot_id: u32,
    },
    /// A node's schema is known: from the cache or downloaded and verified.
    SchemaReady {
        /// Node id.
        #[serde(with = "crate::json::with::node_id")]
        node: NodeId,
        /// Full digest.
        #[serde(with = "crate::json::with::digest")]
        digest: SchemaDigest,
        /// Whether it came from the cache (no transfer).
        cached: bool,
    },
    /// A node was started: its topics flow.
    Online {
        /// Node id.
        #[serde(with = "crate::json::with::node_id")]
        node: NodeId,
    },
    /// A node came back with a new boot id; it is being re-provisioned.
    Rebooted {
        /// Node id.
        #[serde(with = "crate::json::with::node_id")]
        node: NodeId,
        /// Boot id before.
        old: u32,
        /// Boot id now.
        new: u32,
    },
    /// A node fell silent.
    Offline {
        /// Node id.
        #[serde(with = "crate::json::with::node_id")]
        node: NodeId,
    },
    /// A node could not be provisioned; it is retried when it announces again.
    Failed {
        /// Node id.
        #[serde(with = "crate::json::with::node_id")]
        node: NodeId,
        /// Why, for people (may quote the node: untrusted text).
        reason: String,
    },
    /// Two nodes answer to one node id.
    Collision {
        /// Node id.
        #[serde(with = "crate::json::with::node_id")]
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
        #[serde(with = "crate::json::with::node_id")]
        node: NodeId,
    },
    /// How far a firmware update is.
    UpdateProgress {
        /// The update's id (one per update the master runs).
        id: u64,
        /// Node id.
        #[serde(with = "crate::json::with::node_id")]
        node: NodeId,
        /// Where it stands.
        #[serde(with = "crate::json::with::update_step")]
        step: UpdateStep,
        /// Bytes, rate, ETA (JSON: its fields `acked`, `size`, `rate`, `eta_s`,
        /// `resent` beside the event's).
        #[serde(flatten, with = "crate::json::ProgressDef")]
        progress: Progress,
    },
    /// A firmware update ended: the new firmware runs and is provisioned, or why not.
    /// No JSON: it answers the request that began the update.
    #[serde(skip)]
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
        #[serde(with = "crate::json::with::node_id")]
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
        #[serde(with = "crate::json::with::node_id")]
        node: NodeId,
        /// `node.block.param`.
        name: String,
        /// The value the node took.
        #[serde(with = "crate::json::with::value")]
        value: Value,
    },
}

/// The derived shape (`kind`, the variant's fields) with `text` for people, and
/// `node: null` for a bus-wide event (`other_master`), as `docs/remote.md` has it.
impl Serialize for MasterEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(flatten, serialize_with = "derived")]
            event: &'a MasterEvent,
            #[serde(skip_serializing_if = "Option::is_none")]
            node: Option<Option<u8>>,
            text: String,
        }
        fn derived<S: Serializer>(e: &&MasterEvent, s: S) -> Result<S::Ok, S::Error> {
            // The inherent function `#[serde(remote = "Self")]` derived.
            MasterEvent::serialize(e, s)
        }
        let text = crate::json::describe_event(self)
            .ok_or_else(|| serde::ser::Error::custom("this event has no JSON (an update's end)"))?;
        Shown {
            event: self,
            node: self.node().is_none().then_some(None),
            text,
        }
        .serialize(s)
    }
}

/// The derived shape; `text` and a bus-wide event's `node` are ignored (as any field
/// the event does not have: a newer daemon's additions do not break an older reader).
impl<'de> Deserialize<'de> for MasterEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MasterEvent, D::Error> {
        // The inherent function `#[serde(remote = "Self")]` derived.
        MasterEvent::deserialize(d)
    }
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
