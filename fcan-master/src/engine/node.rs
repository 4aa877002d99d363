//! What the master knows about one node.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use fcan_core::hash::{HashPrefix, SchemaDigest};
use fcan_core::id::NodeId;
use fcan_core::ir::Schema;
use fcan_core::msg::{BusMode, NodeState};
use fcan_core::numbering::Numbering;

use crate::planner::Plan;

/// A node's schema, decoded and numbered once, shared by every node that runs it.
#[derive(Debug)]
#[non_exhaustive]
pub struct NodeSchema {
    /// The IR.
    pub schema: Schema,
    /// Its numbering.
    pub numbering: Numbering,
    /// SHA-256 of the blob.
    pub digest: SchemaDigest,
    /// The blob itself (for `schema show`).
    pub blob: Vec<u8>,
}

impl NodeSchema {
    /// Decodes, validates (as untrusted input) and numbers a blob whose digest was
    /// verified: the one path from blob bytes to a schema, for the master and for a
    /// remote client that fetched the blob. On failure: the reason and the blob's length.
    ///
    /// ```
    /// # use fcan_master::engine::NodeSchema;
    /// # use fcan_core::hash::SchemaDigest;
    /// let blob = b"not a schema".to_vec();
    /// assert!(NodeSchema::decode(SchemaDigest::of(&blob), blob).is_err());
    /// ```
    pub fn decode(digest: SchemaDigest, blob: Vec<u8>) -> Result<NodeSchema, (String, u32)> {
        let len = blob.len() as u32;
        // Bounded: the blob is at most MAX_BLOB_LEN bytes and the checks are linear in it
        // (under 2 ms at the limit, docs/performance.md), so they run between two frames
        // without delaying a heartbeat.
        let checked = fcan_core::blob::decode(&blob)
            .map_err(|e| e.to_string())
            .and_then(
                |schema| match fcan_core::validate::validate_untrusted(&schema) {
                    Some(e) => Err(format!("schema is invalid: {e}")),
                    None => Ok(schema),
                },
            )
            .and_then(|schema| {
                let numbering = Numbering::of(&schema)
                    .map_err(|e| crate::planner::PlanError::Numbering(e).to_string())?;
                Ok((schema, numbering))
            });
        match checked {
            Ok((schema, numbering)) => Ok(NodeSchema {
                schema,
                numbering,
                digest,
                blob,
            }),
            Err(reason) => Err((reason, len)),
        }
    }
}

/// What a node said about itself in its last ANNOUNCE.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Announcement {
    /// Protocol version.
    pub protocol: u8,
    /// Capability bits.
    pub caps: u8,
    /// Boot id.
    pub boot_id: u32,
    /// Blob length.
    pub blob_len: u32,
    /// Hash prefix.
    pub hash: HashPrefix,
    /// Instances wired per array.
    pub counts: Vec<u8>,
}

/// Where the master is with a node.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Downloading its blob.
    Reading,
    /// Acknowledged; defining frames, restoring params, starting.
    Provisioning,
    /// Started; data flows.
    Running,
    /// Provisioning failed; retried when the node announces again.
    Failed(String),
    /// Silent for longer than the offline timeout.
    Offline,
}

impl std::fmt::Display for Phase {
    /// `reading schema`, `provisioning`, `running`, `offline`, `failed: <reason>` (the
    /// reason may quote text from the node: escape it before printing to a terminal).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Phase::Reading => f.write_str("reading schema"),
            Phase::Provisioning => f.write_str("provisioning"),
            Phase::Running => f.write_str("running"),
            Phase::Offline => f.write_str("offline"),
            Phase::Failed(r) => write!(f, "failed: {r}"),
        }
    }
}

/// One step of provisioning or a user command that waits for RESULT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    FrameDefine(usize),
    ParamSet {
        block: u8,
        param: u8,
        value: Vec<u8>,
        commit: bool,
        req: Option<u64>,
    },
    ParamGet {
        block: u8,
        param: u8,
        req: u64,
    },
    Start,
    /// The master leaves: FRAME_DEFINE index 0 (the plan's first frame again) takes a
    /// RUNNING node back to PROVISIONED — data stopped at once, the master-lost watchdog
    /// off — so a master that goes on purpose leaves no `master_lost` behind
    /// (docs/protocol.md §5.4).
    Leave,
}

impl std::fmt::Display for Step {
    /// The command as the protocol names it, for the reason a node failed
    /// (`FRAME_DEFINE of frame 3`), never a `Debug` dump of the step.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::FrameDefine(i) => write!(f, "FRAME_DEFINE of frame {i}"),
            Step::Leave => f.write_str("FRAME_DEFINE of frame 0 (the master leaves)"),
            Step::ParamSet {
                block,
                param,
                req: None,
                ..
            } => write!(f, "PARAM_SET restoring block {block} param {param}"),
            Step::ParamSet { block, param, .. } => {
                write!(f, "PARAM_SET of block {block} param {param}")
            }
            Step::ParamGet { block, param, .. } => {
                write!(f, "PARAM_GET of block {block} param {param}")
            }
            Step::Start => f.write_str("START"),
        }
    }
}

/// A step sent and waiting for its answer.
#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    pub step: Step,
    pub transfer: u8,
    pub deadline: u64,
    pub tries: u8,
}

/// A blob download in progress.
#[derive(Clone, Debug)]
pub(crate) struct Download {
    pub buf: Vec<u8>,
    pub transfer: u8,
    pub deadline: u64,
    pub tries: u8,
}

/// A service call waiting for its response. The node's answer must name the same
/// block and service under the call's transfer id (and come from this node, as a
/// SERVICE response) to complete it.
#[derive(Clone, Debug)]
pub(crate) struct PendingCall {
    pub id: u64,
    pub block: u8,
    pub service: u8,
    pub deadline: u64,
    pub accepted: bool,
}

/// Requests of the user one node may have outstanding at once: service calls waiting
/// for their response plus parameter reads and writes queued or in flight
/// (docs/protocol.md §3.11). One more fails at once with
/// [`crate::engine::CallError::TooManyRequests`]. Well below the 256 transfer ids, so a
/// pending call's id is never reused while it waits.
pub const MAX_OUTSTANDING_REQUESTS: usize = 32;

/// Everything the master holds for one node id.
#[derive(Debug)]
#[non_exhaustive]
pub struct NodeRecord {
    /// Node id.
    pub id: NodeId,
    /// Last announcement.
    pub announce: Announcement,
    /// The schema, once known.
    pub schema: Option<Arc<NodeSchema>>,
    /// Whether this master took the schema from its blob cache (`Some(true)`) or
    /// downloaded it from the node (`Some(false)`); `None` while unknown.
    pub schema_cached: Option<bool>,
    /// The plan, once made.
    pub plan: Option<Plan>,
    /// Frame kind the node was told to use.
    pub mode: BusMode,
    /// The state the node last reported.
    pub state: NodeState,
    /// The master's view.
    pub phase: Phase,
    /// Microseconds (engine clock) of the last frame from it.
    pub last_seen: u64,
    /// Error summary from its last heartbeat.
    pub errors: u16,
    /// Parameter values the user set, restored after every reboot:
    /// (block, param) → packed value.
    pub user_params: BTreeMap<(u8, u8), Vec<u8>>,
    /// Latest packed value of every topic, by (block, topic).
    pub topics: BTreeMap<(u8, u8), Vec<u8>>,
    /// The version string of the firmware it runs, for a node that takes updates (asked
    /// once it runs, and told by every update answer); `None` until known.
    pub firmware_version: Option<String>,
    pub(crate) update: Option<super::update::UpdateRun>,
    pub(crate) version_query: Option<super::update::VersionQuery>,
    /// The schema before the node rebooted with another one, until the new one is known
    /// (to carry the user's parameters over).
    pub(crate) prev_schema: Option<Arc<NodeSchema>>,
    /// Parameters carried to a new schema (restored, dropped), for the update's report.
    pub(crate) carried: Option<(Vec<String>, Vec<String>)>,
    pub(crate) steps: VecDeque<Step>,
    pub(crate) in_flight: Option<InFlight>,
    pub(crate) download: Option<Download>,
    pub(crate) calls: BTreeMap<u8, PendingCall>,
    pub(crate) next_transfer: u8,
    /// ANNOUNCE_ACKs re-sent because the node answered BAD_STATE (the ack was lost).
    pub(crate) reacks: u8,
    /// The boot id before the last one announced: if that boot is heard again, the
    /// "reboot" was a second node claiming this id (protocol §5.3).
    pub(crate) prev_boot: Option<u32>,
    /// Which run this is: a number the engine gives each time the node starts running,
    /// so data frames queued for an earlier run are never sent (`admission.rs`).
    pub(crate) run: u64,
    /// An ANNOUNCE of another boot held while the known one may still answer (§5.3).
    pub(crate) held: Option<super::collision::Held>,
    /// Another boot heard claiming this id, and when last (µs): a second board.
    pub(crate) collision: Option<(u32, u64)>,
}

impl NodeRecord {
    /// The boot id of a second board heard claiming this node id, if one was heard
    /// within the offline timeout (docs/protocol.md §5.3).
    pub fn collision(&self) -> Option<u32> {
        self.collision.map(|(boot, _)| boot)
    }

    pub(crate) fn new(id: u8, announce: Announcement, now: u64) -> Self {
        NodeRecord {
            id: super::nid(id),
            announce,
            schema: None,
            schema_cached: None,
            plan: None,
            mode: BusMode::Classic,
            state: NodeState::Unprovisioned,
            phase: Phase::Reading,
            last_seen: now,
            errors: 0,
            user_params: BTreeMap::new(),
            topics: BTreeMap::new(),
            firmware_version: None,
            update: None,
            version_query: None,
            prev_schema: None,
            carried: None,
            steps: VecDeque::new(),
            in_flight: None,
            download: None,
            calls: BTreeMap::new(),
            next_transfer: 0,
            reacks: 0,
            prev_boot: None,
            run: 0,
            held: None,
            collision: None,
        }
    }

    /// A fresh transfer id for a request to this node: the next one that no pending
    /// service call, step in flight or download is using (at most
    /// [`MAX_OUTSTANDING_REQUESTS`] + 2 of the 256 are), so an answer can only ever match
    /// the request it answers.
    pub(crate) fn transfer(&mut self) -> u8 {
        for _ in 0..=u8::MAX {
            self.next_transfer = self.next_transfer.wrapping_add(1);
            let t = self.next_transfer;
            let busy = self.calls.contains_key(&t)
                || self.in_flight.as_ref().is_some_and(|f| f.transfer == t)
                || self.download.as_ref().is_some_and(|d| d.transfer == t)
                || self.update.as_ref().is_some_and(|u| u.uses(t))
                || self.version_query.is_some_and(|q| q.transfer() == t);
            if !busy {
                break;
            }
        }
        self.next_transfer
    }

    /// The user's requests to this node not finished yet: service calls waiting, and
    /// parameter reads and writes queued or in flight.
    pub(crate) fn outstanding(&self) -> usize {
        let user_step = |s: &Step| {
            matches!(
                s,
                Step::ParamSet { req: Some(_), .. } | Step::ParamGet { .. }
            )
        };
        self.calls.len()
            + self.steps.iter().filter(|s| user_step(s)).count()
            + self.in_flight.as_ref().is_some_and(|f| user_step(&f.step)) as usize
    }

    /// The node's name with `{i}` replaced, or `node<id>` before its schema is known.
    pub fn name(&self) -> String {
        match &self.schema {
            Some(s) => s.schema.node_name(self.id.get()),
            None => format!("node{}", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Step;

    /// A failed node's reason names the command as the protocol does, not as `Debug`
    /// prints the engine's step (which dumped the packed value of a parameter).
    #[test]
    fn steps_read_as_protocol_commands() {
        let set = |req| Step::ParamSet {
            block: 2,
            param: 1,
            value: vec![0; 4],
            commit: true,
            req,
        };
        assert_eq!(Step::FrameDefine(3).to_string(), "FRAME_DEFINE of frame 3");
        assert_eq!(set(Some(7)).to_string(), "PARAM_SET of block 2 param 1");
        assert_eq!(set(None).to_string(), "PARAM_SET restoring block 2 param 1");
        let get = Step::ParamGet {
            block: 0,
            param: 5,
            req: 1,
        };
        assert_eq!(get.to_string(), "PARAM_GET of block 0 param 5");
        assert_eq!(Step::Start.to_string(), "START");
    }
}
