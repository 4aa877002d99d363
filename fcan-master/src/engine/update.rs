//! Firmware updates in the engine (`docs/protocol.md` §3.14, §5.4): one
//! [`UpdateSession`] per node, its requests under transfer ids of their own, the node's
//! answers routed back to it, the reboot into the new firmware, and the parameters the
//! new schema still has. Also the firmware version every update-capable node reports
//! (one QUERY once it runs), so `fcan nodes` shows what each board runs.

use super::*;
use crate::update::{Failure, Outgoing, SessionState, UpdateConfig, UpdateImage, UpdateSession};
use fcan_core::msg::{UpdatePhase, UpdateReason, UpdateReply, UpdateRequest};

/// How long the master waits, after the node verified the image, for it to come back
/// running the new firmware (reboot, announce, blob download, provisioning) before the
/// update ends in [`UpdateError::NotBack`]. A bootloader that copies a megabyte takes
/// seconds; this leaves room for it.
pub const REBOOT_TIMEOUT_US: u64 = 60_000_000;

/// [`Event::UpdateProgress`] at most this often per update (and at each change of step).
pub const PROGRESS_PERIOD_US: u64 = 250_000;

/// Transfer ids one update remembers (a window of DATA plus the odd QUERY); an answer
/// under an older one is stale and ignored. Well under the 256 ids, with the
/// [`MAX_OUTSTANDING_REQUESTS`] a node's user requests may hold.
const MAX_UPDATE_TRANSFERS: usize = 64;

/// Times the master offers the image again after the node came back without it (a
/// power cut while it verified boots the old firmware: offered again, it resumes)
/// before the update ends in [`UpdateError::NotBooted`].
pub const MAX_REOFFERS: u8 = 2;

/// QUERYs sent for a node's firmware version before the master stops asking.
const VERSION_QUERIES: u8 = 3;

/// Where an update stands, as [`Event::UpdateProgress`] tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpdateStep {
    /// The offer is out.
    Offering,
    /// The image flows.
    Sending,
    /// Every byte is stored; the node reads the image back and checks its SHA-256.
    Verifying,
    /// The node marked the image bootable and reboots into it; the master waits for it
    /// to announce the new schema and provisions it.
    Rebooting,
}

impl std::fmt::Display for UpdateStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UpdateStep::Offering => "offering",
            UpdateStep::Sending => "sending",
            UpdateStep::Verifying => "verifying",
            UpdateStep::Rebooting => "rebooting",
        })
    }
}

/// What a finished update did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpdateReport {
    /// The version the node runs now (the image's).
    pub version: String,
    /// The schema it announces now.
    pub schema: SchemaDigest,
    /// Whether the schema is another one than before the update.
    pub schema_changed: bool,
    /// Parameters the user had set that the new schema still has (same block, name and
    /// type), restored: `node.block.param` paths.
    pub restored: Vec<String>,
    /// Parameters the user had set that the new schema does not have (or with another
    /// type), not restored.
    pub dropped: Vec<String>,
}

/// Why an update did not start, or ended without the new firmware running.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpdateError {
    /// No such node, or it is offline.
    #[error("node {0} is not online")]
    NodeNotOnline(NodeId),
    /// The node does not announce capability bit 2 (a firmware built without the
    /// runtime's `update` feature, or a device the master drives).
    #[error("node {0} does not take firmware updates (it does not announce the capability)")]
    NotSupported(NodeId),
    /// The image is for nodes of another schema name: refused before a byte is sent.
    #[error("the image is for `{}` boards; node {node} runs `{}`", crate::text::Untrusted(.image), crate::text::Untrusted(.node_schema))]
    WrongBoard {
        /// Node id.
        node: NodeId,
        /// The schema name the image declares.
        image: String,
        /// The node's schema name.
        node_schema: String,
    },
    /// The image has no bytes, or more than the protocol's `u32` size.
    #[error("the image is empty or too large ({0} bytes)")]
    BadImage(usize),
    /// An update of that node is already running.
    #[error("node {0} is already being updated with another image")]
    Busy(NodeId),
    /// The node refused or ended the transfer.
    #[error("node {node} refused: {}", reason_text(*.reason))]
    Refused {
        /// Node id.
        node: NodeId,
        /// Its reason.
        reason: UpdateReason,
    },
    /// The node stopped answering (it keeps what it stored: the same image offered
    /// again resumes).
    #[error("node {0} stopped answering during the update; offer the same image again to resume")]
    Silent(NodeId),
    /// The node said it verifies the image for longer than
    /// [`crate::update::verify_budget_us`] allows for its size.
    #[error("node {0} kept verifying the image for too long; it runs the firmware it had unless it reboots into the new one")]
    NotVerified(NodeId),
    /// The node verified the image but did not come back running it in time.
    #[error("node {0} verified the image but did not come back running it")]
    NotBack(NodeId),
    /// Aborted by the user ([`Engine::abort_update`]): the node dropped what it stored.
    #[error("the update of node {0} was aborted; the node runs the firmware it had")]
    Aborted(NodeId),
    /// The new firmware runs, but the master could not provision it.
    #[error("node {node} runs the new firmware but could not be provisioned: {}", crate::text::Untrusted(.reason))]
    Provisioning {
        /// Node id.
        node: NodeId,
        /// Why.
        reason: String,
    },
    /// The node rebooted after the image was committed but announces another schema
    /// than the image declares, more than [`MAX_REOFFERS`] times (its boot code kept the
    /// old firmware, or the image declares the wrong schema).
    #[error("node {0} came back without the new firmware (it announces another schema than the image's)")]
    NotBooted(NodeId),
}

/// A node's update reason in words.
pub fn reason_text(reason: UpdateReason) -> &'static str {
    match reason {
        UpdateReason::None => "no reason given",
        UpdateReason::Unsupported => "it has no staging area for updates",
        UpdateReason::TooLarge => "the image is larger than its staging area",
        UpdateReason::WrongBoard => "the image is for another board",
        UpdateReason::NotSafe => "not safe now (its application refuses while it runs)",
        UpdateReason::LowBattery => "battery too low",
        UpdateReason::Busy => "busy verifying another image",
        UpdateReason::NoOffer => "it has no offer for that image",
        UpdateReason::Incomplete => "the image is incomplete",
        UpdateReason::HashMismatch => "the image read back does not match its SHA-256",
        UpdateReason::FlashError => "its flash failed",
        UpdateReason::BadOffer => "the offer is invalid",
        UpdateReason::Refused => "its application refused",
        UpdateReason::Aborted => "the transfer was aborted",
        _ => "a reason this master does not know",
    }
}

/// After the node verified: waiting for its reboot, then for its provisioning.
#[derive(Clone, Debug)]
enum Stage {
    Transfer,
    Rebooting { deadline: u64 },
}

/// One node's update inside the engine.
#[derive(Debug)]
pub(crate) struct UpdateRun {
    id: u64,
    session: UpdateSession,
    /// Transfer ids of requests out, oldest first, each with the offset of the DATA
    /// chunk it carried.
    transfers: VecDeque<(u8, Option<u32>)>,
    stage: Stage,
    last_step: Option<UpdateStep>,
    next_progress: u64,
    /// The schema before the update.
    old_schema: Option<SchemaDigest>,
    /// Reboots after COMMIT without the new firmware so far.
    reoffers: u8,
}

impl UpdateRun {
    pub(crate) fn uses(&self, transfer: u8) -> bool {
        self.transfers.iter().any(|(t, _)| *t == transfer)
    }

    fn step(&self) -> UpdateStep {
        match (&self.stage, self.session.state()) {
            (Stage::Rebooting { .. }, _) | (_, SessionState::Done) => UpdateStep::Rebooting,
            (_, SessionState::Offering) => UpdateStep::Offering,
            (_, SessionState::Sending) => UpdateStep::Sending,
            _ => UpdateStep::Verifying,
        }
    }

    fn deadline(&self) -> Option<u64> {
        match self.stage {
            Stage::Transfer => self.session.poll_at(),
            Stage::Rebooting { deadline } => Some(deadline),
        }
    }
}

/// A node's firmware version query.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VersionQuery {
    transfer: u8,
    tries: u8,
    deadline: u64,
}

impl VersionQuery {
    pub(crate) fn transfer(&self) -> u8 {
        self.transfer
    }
}

impl Engine {
    /// Starts writing `image` into `node` (the request's id comes back in
    /// [`Event::UpdateDone`]; [`Event::UpdateProgress`] reports on the way). Checked
    /// first, with nothing sent: the node runs or is provisioned (not offline), it
    /// announced the update capability, the image names the node's schema name, and no
    /// other update of it runs. The same image asked again while its update runs returns
    /// that update's id (whoever asks again waits for the same end).
    pub fn start_update(
        &mut self,
        node: NodeId,
        image: UpdateImage,
        cfg: UpdateConfig,
        now: u64,
    ) -> Result<u64, UpdateError> {
        let raw = node.get();
        let rec = self.updatable(node)?;
        if let Some(run) = &rec.update {
            // The same image again (a client that was cut off runs its command again):
            // it joins the update that runs, which goes on from where it is.
            if run.session.image().sha256() == image.sha256()
                && run.session.image().schema() == image.schema()
            {
                return Ok(run.id);
            }
            return Err(UpdateError::Busy(node));
        }
        if image.is_empty() || u32::try_from(image.len()).is_err() {
            return Err(UpdateError::BadImage(image.len()));
        }
        // Without the schema (still reading it, or refused) the node checks the name.
        if let Some(s) = &rec.schema {
            if s.schema.node != image.node() {
                return Err(UpdateError::WrongBoard {
                    node,
                    image: image.node().to_owned(),
                    node_schema: s.schema.node.clone(),
                });
            }
        }
        let mtu = rec.mode.mtu();
        let old_schema = rec.schema.as_ref().map(|s| s.digest);
        let id = self.new_request(raw);
        let run = UpdateRun {
            id,
            session: UpdateSession::new(image, cfg, mtu),
            transfers: VecDeque::new(),
            stage: Stage::Transfer,
            last_step: None,
            next_progress: now,
            old_schema,
            reoffers: 0,
        };
        if let Some(rec) = self.nodes.get_mut(&raw) {
            rec.update = Some(run);
        }
        self.poll_update(raw, now);
        Ok(id)
    }

    /// The record of a node that may be asked about updates: known, not offline, and
    /// announcing the capability.
    fn updatable(&mut self, node: NodeId) -> Result<&mut NodeRecord, UpdateError> {
        let rec = self
            .nodes
            .get_mut(&node.get())
            .filter(|r| r.phase != Phase::Offline)
            .ok_or(UpdateError::NodeNotOnline(node))?;
        if rec.announce.caps & caps::UPDATE == 0 {
            return Err(UpdateError::NotSupported(node));
        }
        Ok(rec)
    }

    pub(super) fn update_deadline(rec: &NodeRecord) -> Option<u64> {
        let u = rec.update.as_ref().and_then(|u| u.deadline());
        let v = rec.version_query.map(|q| q.deadline);
        match (u, v) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Tells `node` to forget its update transfer (ABORT: what it stored is dropped; the
    /// firmware it runs stays) and ends this master's update of it, if one runs, with
    /// [`UpdateError::Aborted`]. Sent also when none runs here: a node may hold the
    /// transfer of a master that was lost. Checked first: the node is known, not offline,
    /// and takes updates.
    pub fn abort_update(&mut self, node: NodeId) -> Result<(), UpdateError> {
        let raw = node.get();
        let rec = self.updatable(node)?;
        let run = rec.update.take();
        let transfer = rec.transfer();
        let mtu = rec.mode.mtu();
        self.send(
            node,
            transfer,
            &ConfigMessage::UpdateRequest(UpdateRequest::Abort),
            mtu,
        );
        if let Some(run) = run {
            self.finish_update(raw, run.id, Err(UpdateError::Aborted(node)));
        }
        Ok(())
    }

    /// The node went offline. An update in its transfer ends ([`UpdateError::Silent`]:
    /// the node keeps what it stored, the same image offered again resumes) rather than
    /// retrying a node that is gone. One waiting for the reboot goes on waiting until
    /// [`REBOOT_TIMEOUT_US`]: a boot loader copying the image may be quiet for longer than
    /// the offline timeout.
    pub(super) fn update_on_offline(&mut self, node: u8) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        if !matches!(rec.update.as_ref().map(|r| &r.stage), Some(Stage::Transfer)) {
            return;
        }
        if let Some(run) = rec.update.take() {
            self.finish_update(node, run.id, Err(UpdateError::Silent(nid(node))));
        }
    }

    fn finish_update(&mut self, node: u8, id: u64, result: Result<UpdateReport, UpdateError>) {
        self.pending_user.remove(&id);
        self.events.push_back(Event::UpdateDone {
            id,
            node: nid(node),
            result,
        });
    }

    /// The update's timers and requests: what the session sends, its progress, its end.
    pub(super) fn poll_update(&mut self, node: u8, now: u64) {
        self.poll_version_query(node, now);
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let Some(mut run) = rec.update.take() else {
            return;
        };
        if let Stage::Rebooting { deadline } = run.stage {
            if now >= deadline {
                self.finish_update(node, run.id, Err(UpdateError::NotBack(nid(node))));
                return;
            }
        } else {
            for out in run.session.poll(now) {
                let Some(rec) = self.nodes.get_mut(&node) else {
                    return;
                };
                let transfer = rec.transfer_avoiding(&run);
                let mtu = rec.mode.mtu();
                let offset = match out {
                    Outgoing::Data { offset, .. } => Some(offset),
                    _ => None,
                };
                if run.transfers.len() == MAX_UPDATE_TRANSFERS {
                    run.transfers.pop_front();
                }
                run.transfers.push_back((transfer, offset));
                let msg = ConfigMessage::UpdateRequest(out.request(&run.session));
                self.send(nid(node), transfer, &msg, mtu);
            }
        }
        if let Some(result) = self.update_outcome(node, &mut run, now) {
            self.finish_update(node, run.id, result);
            return;
        }
        self.update_progress_event(node, &mut run, now);
        if let Some(rec) = self.nodes.get_mut(&node) {
            rec.update = Some(run);
        }
    }

    /// The end of the transfer: a failure, or the node verified (the run waits for the
    /// reboot; `Some` only when it ended).
    fn update_outcome(
        &mut self,
        node: u8,
        run: &mut UpdateRun,
        now: u64,
    ) -> Option<Result<UpdateReport, UpdateError>> {
        match (run.session.state(), &run.stage) {
            (SessionState::Failed(Failure::Node(reason)), _) => Some(Err(UpdateError::Refused {
                node: nid(node),
                reason,
            })),
            (SessionState::Failed(Failure::NotVerified), _) => {
                Some(Err(UpdateError::NotVerified(nid(node))))
            }
            (SessionState::Failed(_), _) => Some(Err(UpdateError::Silent(nid(node)))),
            (SessionState::Done, Stage::Transfer) => {
                run.stage = Stage::Rebooting {
                    deadline: now + REBOOT_TIMEOUT_US,
                };
                None
            }
            _ => None,
        }
    }

    fn update_progress_event(&mut self, node: u8, run: &mut UpdateRun, now: u64) {
        let step = run.step();
        if run.last_step == Some(step) && now < run.next_progress {
            return;
        }
        run.last_step = Some(step);
        run.next_progress = now + PROGRESS_PERIOD_US;
        self.events.push_back(Event::UpdateProgress {
            id: run.id,
            node: nid(node),
            step,
            progress: run.session.progress(),
        });
    }

    /// An UPDATE reply from `node`: to its update, or to the version query.
    pub(super) fn on_update_reply(&mut self, node: u8, transfer: u8, reply: &UpdateReply, at: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        rec.last_seen = at;
        if let (Some(q), UpdateReply::Status(s)) = (rec.version_query, reply) {
            if q.transfer == transfer {
                rec.firmware_version = Some(s.version.to_owned());
                rec.version_query = None;
                return;
            }
        }
        let Some(run) = rec.update.as_mut() else {
            return;
        };
        let Some(i) = run.transfers.iter().position(|(t, _)| *t == transfer) else {
            return; // stale, or not ours
        };
        // A DATA answer is one PROGRESS; the transfer id is spent. A COMMIT may be
        // answered twice (Verifying, then Verified), so other ids stay until they age out.
        let answered = run.transfers.get(i).and_then(|(_, o)| *o);
        if answered.is_some() {
            run.transfers.remove(i);
        }
        if let UpdateReply::Status(s) = reply {
            rec.firmware_version = Some(s.version.to_owned());
            if s.phase == UpdatePhase::Verified {
                // The node reboots now: the old version string is history.
                rec.firmware_version = None;
            }
        }
        run.session.on_reply(reply, answered, at);
        self.poll_update(node, at);
    }

    /// `node` announced a new boot: the update learns whether the new firmware runs.
    pub(super) fn update_on_reboot(&mut self, node: u8, prefix: [u8; 8], now: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        rec.firmware_version = None;
        rec.version_query = None;
        let Some(run) = rec.update.as_mut() else {
            return;
        };
        run.transfers.clear();
        let new = run.session.image().schema().get(..8) == Some(&prefix[..]);
        let committed = matches!(
            run.session.state(),
            SessionState::Committing | SessionState::Verifying | SessionState::Done
        );
        run.session.node_rebooted(prefix);
        if committed && !new {
            // Committed (or verified), and back with another schema: the old firmware
            // runs. Offered again (it resumes), a few times.
            run.reoffers += 1;
            if run.reoffers > MAX_REOFFERS || run.session.state() == SessionState::Done {
                let id = run.id;
                rec.update = None;
                self.finish_update(node, id, Err(UpdateError::NotBooted(nid(node))));
                return;
            }
            run.stage = Stage::Transfer;
        }
        if run.session.state() == SessionState::Done && matches!(run.stage, Stage::Transfer) {
            run.stage = Stage::Rebooting {
                deadline: now + REBOOT_TIMEOUT_US,
            };
        }
    }

    /// `node` runs again after provisioning: an update waiting for it ends well, and an
    /// update-capable node is asked its firmware version.
    pub(super) fn update_on_online(&mut self, node: u8, now: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        if rec.announce.caps & caps::UPDATE != 0 && rec.firmware_version.is_none() {
            rec.version_query = Some(VersionQuery {
                transfer: 0,
                tries: 0,
                deadline: now,
            });
        }
        let rebooted = rec
            .update
            .as_ref()
            .is_some_and(|u| matches!(u.stage, Stage::Rebooting { .. }));
        if !rebooted {
            self.poll_version_query(node, now);
            return;
        }
        let Some(run) = rec.update.take() else {
            return;
        };
        let Some(schema) = rec.schema.as_ref().map(|s| s.digest) else {
            return;
        };
        // Carried to a new schema (`carry_params`), or, with the same schema, every
        // parameter set so far, set again under its number as after any reboot (the
        // report said "restored: none" when one was kept).
        let same_schema = run.old_schema == Some(schema);
        let (restored, dropped) = rec.carried.take().unwrap_or_else(|| {
            let same = rec.schema.as_ref().filter(|_| same_schema);
            let restored = same.map_or_else(Vec::new, |s| {
                let name = s.schema.node_name(node);
                rec.user_params
                    .keys()
                    .filter_map(|&(block, param)| {
                        let (ns, p) = param_decl(s, block, param)?;
                        Some(fcan_core::numbering::param_path(&name, &ns, &p.name))
                    })
                    .collect()
            });
            (restored, Vec::new())
        });
        rec.firmware_version = Some(run.session.image().version().to_owned());
        rec.version_query = None;
        let report = UpdateReport {
            version: run.session.image().version().to_owned(),
            schema,
            schema_changed: !same_schema,
            restored,
            dropped,
        };
        self.events.push_back(Event::UpdateProgress {
            id: run.id,
            node: nid(node),
            step: UpdateStep::Rebooting,
            progress: run.session.progress(),
        });
        self.finish_update(node, run.id, Ok(report));
    }

    /// Provisioning failed: an update waiting for the new firmware to run ends.
    pub(super) fn update_on_failed(&mut self, node: u8, reason: &str) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let rebooted = rec
            .update
            .as_ref()
            .is_some_and(|u| matches!(u.stage, Stage::Rebooting { .. }));
        if !rebooted {
            return;
        }
        if let Some(run) = rec.update.take() {
            self.finish_update(
                node,
                run.id,
                Err(UpdateError::Provisioning {
                    node: nid(node),
                    reason: reason.to_owned(),
                }),
            );
        }
    }

    /// Sends the version QUERY when due, a few times at most.
    fn poll_version_query(&mut self, node: u8, now: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let Some(mut q) = rec.version_query else {
            return;
        };
        if now < q.deadline || rec.update.is_some() {
            return;
        }
        if q.tries >= VERSION_QUERIES {
            rec.version_query = None;
            return;
        }
        q.tries += 1;
        q.transfer = rec.transfer();
        q.deadline = now + self.cfg.command_timeout_us;
        rec.version_query = Some(q);
        let mtu = rec.mode.mtu();
        let msg = ConfigMessage::UpdateRequest(UpdateRequest::Query);
        self.send(nid(node), q.transfer, &msg, mtu);
    }

    /// The parameters the user set, carried from the schema `old` to the node's new one
    /// by block namespace, parameter name and type: kept under their new numbers, or
    /// dropped. Returns the `node.block.param` paths of each (for the report).
    pub(super) fn carry_params(&mut self, node: u8, old: &NodeSchema) -> Option<()> {
        let rec = self.nodes.get_mut(&node)?;
        let new = rec.schema.clone()?;
        if new.digest == old.digest || rec.user_params.is_empty() {
            return Some(());
        }
        let name = new.schema.node_name(node);
        let mut kept = BTreeMap::new();
        let (mut restored, mut dropped) = (Vec::new(), Vec::new());
        for ((block, param), value) in std::mem::take(&mut rec.user_params) {
            let Some((ns, p)) = param_decl(old, block, param) else {
                continue;
            };
            let path = fcan_core::numbering::param_path(&name, &ns, &p.name);
            let found = new.numbering.blocks.iter().find_map(|b| {
                let ty = new.schema.types.get(b.type_index)?;
                let (i, q) = ty
                    .params
                    .iter()
                    .enumerate()
                    .find(|(_, q)| q.name == p.name)?;
                (b.ns == ns && q.ty == p.ty && q.len == p.len).then_some((b.number, i as u8))
            });
            match found {
                Some(k) => {
                    kept.insert(k, value);
                    restored.push(path);
                }
                None => dropped.push(path),
            }
        }
        rec.user_params = kept;
        rec.carried = Some((restored.clone(), dropped.clone()));
        self.events.push_back(Event::ParamsCarried {
            node: nid(node),
            restored,
            dropped,
        });
        Some(())
    }
}

/// The namespace and declaration of `block`'s param `param` in `schema`.
fn param_decl(schema: &NodeSchema, block: u8, param: u8) -> Option<(String, fcan_core::ir::Param)> {
    let b = schema.numbering.block(block)?;
    let ty = schema.schema.types.get(b.type_index)?;
    Some((b.ns.clone(), ty.params.get(param as usize)?.clone()))
}

impl NodeRecord {
    /// A fresh transfer id that the update `run` (taken out of the record while it
    /// sends) does not use either.
    fn transfer_avoiding(&mut self, run: &UpdateRun) -> u8 {
        for _ in 0..=u8::MAX {
            let t = self.transfer();
            if !run.uses(t) {
                return t;
            }
        }
        self.transfer()
    }
}
