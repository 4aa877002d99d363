//! Discovery: ANNOUNCE handling, acknowledgement, and the schema — from the cache or
//! downloaded in chunks and verified against the announced hash.

use super::*;

use fcan_core::blob::MAX_BLOB_LEN;
use fcan_core::hash::HashPrefix;

use crate::cache::Lookup;

impl Engine {
    pub(super) fn on_announce(&mut self, node: u8, a: &Announce, at: u64) {
        if self.leaving {
            // A master on its way out acknowledges nobody: the next one will.
            return;
        }
        self.events.push_back(Event::Announced {
            node: nid(node),
            boot_id: a.boot_id,
        });
        let ann = Announcement {
            protocol: a.protocol,
            caps: a.caps,
            boot_id: a.boot_id,
            blob_len: a.blob_len,
            hash: a.hash,
            counts: a.counts.to_vec(),
        };
        if a.protocol as u32 != fcan_core::ir::PROTOCOL_VERSION {
            let rec = self
                .nodes
                .entry(node)
                .or_insert_with(|| NodeRecord::new(node, ann.clone(), at));
            rec.last_seen = at;
            let reason = format!(
                "speaks protocol {}, this master {}",
                a.protocol,
                fcan_core::ir::PROTOCOL_VERSION
            );
            self.fail_node(node, reason);
            return;
        }
        if self.hold_newcomer(node, &ann, a.state, at) {
            // Another boot than the one we know, which may still be alive (§5.3).
            return;
        }
        self.announced(node, ann, a.state, at);
    }

    /// An ANNOUNCE taken: acknowledged, and the node read, provisioned or started as
    /// what it said calls for.
    pub(super) fn announced(&mut self, node: u8, ann: Announcement, state: NodeState, at: u64) {
        let boot_id = ann.boot_id;
        let mode = if self.cfg.mtu == Mtu::Fd && ann.caps & caps::FD != 0 {
            if self.cfg.brs && ann.caps & caps::BRS != 0 {
                BusMode::FdBrs
            } else {
                BusMode::Fd
            }
        } else {
            if self.cfg.mtu == Mtu::Fd {
                self.events
                    .push_back(Event::ClassicNodeOnFdLink { node: nid(node) });
            }
            BusMode::Classic
        };
        if let Some(rec) = self.nodes.get_mut(&node) {
            if rec.announce == ann
                && rec.phase == Phase::Running
                && state == NodeState::Running
                && rec.mode == mode
                && rec.plan.is_some()
            {
                // A running node of ours answering a DISCOVER (ours, or one another device
                // sent on a shared bus): same boot, same schema, still running the plan we
                // gave it. Re-provisioning would clear its plan and stop its outputs until
                // START for nothing, so a DISCOVER never disturbs a running node.
                rec.last_seen = at;
                rec.state = state;
                return;
            }
            let busy = rec.in_flight.is_some() || rec.download.is_some();
            if rec.announce == ann
                && busy
                && matches!(rec.phase, Phase::Reading | Phase::Provisioning)
            {
                // The boot we are reading or provisioning announced again: an answer to
                // DISCOVER or a back-off repeat sent before our ack arrived (possibly
                // queued before the provisioning we already did). Ack again and carry
                // on: starting over would abandon the steps in flight, and the state in
                // a stale announcement could even make us send START to a half-defined
                // plan.
                rec.last_seen = at;
                let ack = ConfigMessage::AnnounceAck(AnnounceAck {
                    boot_id: ann.boot_id,
                    session: self.cfg.session,
                    mode: rec.mode,
                });
                let t = rec.transfer();
                self.send(
                    NodeId::new(node).unwrap_or(NodeId::BROADCAST),
                    t,
                    &ack,
                    Mtu::Classic,
                );
                return;
            }
        }
        let resume = match self.nodes.get_mut(&node) {
            Some(rec) => {
                rec.last_seen = at;
                if rec.announce.boot_id != ann.boot_id {
                    rec.prev_boot = Some(rec.announce.boot_id);
                    self.events.push_back(Event::Rebooted {
                        node: nid(node),
                        old: rec.announce.boot_id,
                        new: ann.boot_id,
                    });
                    self.update_on_reboot(node, ann.hash.0, at);
                    false
                } else {
                    // Same boot: a lost ack, a master restart on its side, or master-lost
                    // recovery. A suspended node with its plan only needs START.
                    state == NodeState::Suspended && rec.plan.is_some() && rec.announce == ann
                }
            }
            None => {
                self.nodes
                    .insert(node, NodeRecord::new(node, ann.clone(), at));
                false
            }
        };
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let schema_changed = rec.announce.hash != ann.hash || rec.announce.counts != ann.counts;
        // A plan is sized for the frame length of the mode it was made for: a node that
        // comes back able to do less (or more) FD needs a new plan, not the old one.
        let frames_changed = rec.plan.is_some() && rec.mode.mtu() != mode.mtu();
        rec.announce = ann;
        rec.mode = mode;
        rec.state = state;
        requeue_in_flight(rec);
        rec.steps.retain(|s| {
            matches!(
                s,
                Step::ParamSet { req: Some(_), .. } | Step::ParamGet { .. }
            )
        });
        if schema_changed {
            // Kept until the new schema is known, to carry the user's parameters over.
            if let Some(old) = rec.schema.take() {
                rec.prev_schema = Some(old);
            }
            rec.schema_cached = None;
        }
        let resume = resume && !schema_changed && !frames_changed;
        if schema_changed || frames_changed {
            if let Some(plan) = rec.plan.take() {
                self.release_plan(node, &plan);
            }
        }
        self.fail_calls(node, CallError::NodeLost(nid(node)));
        let ack = ConfigMessage::AnnounceAck(AnnounceAck {
            boot_id,
            session: self.cfg.session,
            mode,
        });
        let t = self.transfer(node);
        self.send(
            NodeId::new(node).unwrap_or(NodeId::BROADCAST),
            t,
            &ack,
            Mtu::Classic,
        );
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        rec.phase = Phase::Provisioning;
        if resume {
            rec.steps.push_front(Step::Start);
            self.next_step(node, at);
            return;
        }
        if rec.schema.is_some() {
            self.begin_provisioning(node, at);
            return;
        }
        self.find_schema(node, at);
    }

    /// The schema of a node that announced a blob we do not hold decoded: refused at
    /// once if too large or known bad, else from the cache, else downloaded.
    fn find_schema(&mut self, node: u8, at: u64) {
        self.blobs.lookups.remove(&node);
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let (prefix, len) = (rec.announce.hash, rec.announce.blob_len);
        rec.phase = Phase::Reading;
        rec.download = None;
        if len > MAX_BLOB_LEN {
            // Checked before anything is read: a node cannot make us hold more.
            self.fail_node(
                node,
                format!("announces a {len}-byte schema blob; the protocol limit is {MAX_BLOB_LEN}"),
            );
            return;
        }
        if let Some(reason) = self.blobs.rejected_for(prefix, len) {
            // Read and refused before: do not pay for the download and checks again.
            self.fail_node(node, reason);
            return;
        }
        let found = self
            .schemas
            .values()
            .find(|s| s.digest.matches(prefix) && s.blob.len() as u64 == len as u64)
            .cloned();
        if let Some(s) = found {
            self.schema_ready(node, s, true, at);
            return;
        }
        self.blobs.lookups.insert(node, (prefix, len));
        self.resume_lookup(node, at);
    }

    /// Asks the cache again for a node waiting on a lookup; acts on the answer if there
    /// is one yet (a store that does its I/O on another thread answers `Pending` first).
    fn resume_lookup(&mut self, node: u8, at: u64) {
        let Some(&(prefix, len)) = self.blobs.lookups.get(&node) else {
            return;
        };
        let wanted = self.nodes.get(&node).is_some_and(|r| {
            r.phase == Phase::Reading
                && r.schema.is_none()
                && r.announce.hash == prefix
                && r.announce.blob_len == len
        });
        if !wanted {
            self.blobs.lookups.remove(&node);
            return;
        }
        match self.store.lookup(prefix, len) {
            Lookup::Pending => {}
            Lookup::Found(digest, blob) => {
                self.blobs.lookups.remove(&node);
                match self.load_schema(digest, blob) {
                    Ok(s) => self.schema_ready(node, s, true, at),
                    // A cached blob that no longer passes (an older master's checks):
                    // read it from the node instead.
                    Err(_) => self.queue_download(node, at),
                }
            }
            Lookup::Missing => {
                self.blobs.lookups.remove(&node);
                self.queue_download(node, at);
            }
        }
    }

    /// Starts a download now, or queues it while [`MAX_DOWNLOADS`] are running.
    fn queue_download(&mut self, node: u8, at: u64) {
        let running = self.nodes.values().filter(|r| r.download.is_some()).count();
        if running >= MAX_DOWNLOADS {
            if !self.blobs.queued.contains(&node) {
                self.blobs.queued.push_back(node);
            }
            return;
        }
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        rec.download = Some(Download {
            buf: Vec::new(),
            transfer: 0,
            deadline: 0,
            tries: 0,
        });
        self.request_chunk(node, at, true);
    }

    /// Called from [`Engine::poll`]: answers of the cache, and queued downloads whose
    /// turn has come.
    pub(super) fn resume_blob_work(&mut self, now: u64) {
        let waiting: Vec<u8> = self.blobs.lookups.keys().copied().collect();
        for node in waiting {
            self.resume_lookup(node, now);
        }
        while !self.blobs.queued.is_empty()
            && self.nodes.values().filter(|r| r.download.is_some()).count() < MAX_DOWNLOADS
        {
            let Some(node) = self.blobs.queued.pop_front() else {
                break;
            };
            let wanted = self.nodes.get(&node).is_some_and(|r| {
                r.phase == Phase::Reading && r.schema.is_none() && r.download.is_none()
            });
            if wanted {
                self.queue_download(node, now);
            }
        }
    }

    fn schema_ready(&mut self, node: u8, s: Arc<NodeSchema>, cached: bool, at: u64) {
        self.events.push_back(Event::SchemaReady {
            node: nid(node),
            digest: s.digest,
            cached,
        });
        let mut prev = None;
        if let Some(rec) = self.nodes.get_mut(&node) {
            rec.schema = Some(s);
            rec.schema_cached = Some(cached);
            rec.phase = Phase::Provisioning;
            prev = rec.prev_schema.take();
        }
        if let Some(old) = prev {
            self.carry_params(node, &old);
        }
        self.begin_provisioning(node, at);
    }

    /// Decodes, validates and numbers a verified blob; remembers it.
    pub(super) fn load_schema(
        &mut self,
        digest: SchemaDigest,
        blob: Vec<u8>,
    ) -> Result<Arc<NodeSchema>, String> {
        if let Some(s) = self.schemas.get(&digest) {
            return Ok(s.clone());
        }
        if let Some(reason) = self.blobs.rejected.get(&digest) {
            return Err(reason.clone());
        }
        // Bounded: the blob is at most MAX_BLOB_LEN bytes and the checks are linear in it
        // (under 2 ms at the limit, docs/performance.md), so they run here, between two
        // frames, without delaying a heartbeat.
        let s = match NodeSchema::decode(digest, blob) {
            Ok(s) => Arc::new(s),
            Err((reason, len)) => {
                self.blobs.reject(digest, len, &reason);
                return Err(reason);
            }
        };
        self.schemas.insert(digest, s.clone());
        if self.schemas.len() > MAX_SCHEMAS_DECODED {
            // Keep what nodes use; forget decoded schemas nobody holds (they are in the
            // cache if they are needed again).
            self.schemas.retain(|_, s| Arc::strong_count(s) > 1);
        }
        Ok(s)
    }

    pub(super) fn request_chunk(&mut self, node: u8, now: u64, fresh: bool) {
        let t = if fresh { self.transfer(node) } else { 0 };
        let timeout = self.cfg.schema_chunk_timeout_us();
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let mtu = rec.mode.mtu();
        let Some(d) = &mut rec.download else { return };
        if fresh {
            d.transfer = t;
            d.tries = 0;
        }
        d.deadline = now + timeout;
        let offset = d.buf.len() as u32;
        let remaining = rec.announce.blob_len.saturating_sub(offset);
        let len = remaining.min(schema_chunk(mtu) as u32) as u16;
        let transfer = d.transfer;
        let msg = ConfigMessage::SchemaRead(SchemaRead { offset, len });
        self.send(
            NodeId::new(node).unwrap_or(NodeId::BROADCAST),
            transfer,
            &msg,
            mtu,
        );
    }

    pub(super) fn on_schema_data(&mut self, node: u8, transfer: u8, d: &SchemaData, at: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        rec.last_seen = at;
        let mtu = rec.mode.mtu();
        let total = rec.announce.blob_len as usize;
        let Some(dl) = &mut rec.download else { return };
        // Only the chunk asked for: at the offset requested, no longer than requested
        // (so a node cannot grow the buffer past its announced length).
        let asked = total.saturating_sub(dl.buf.len()).min(schema_chunk(mtu));
        if dl.transfer != transfer || d.offset as usize != dl.buf.len() || d.data.len() > asked {
            self.stats.rx_malformed += 1;
            return;
        }
        self.stats.schema_bytes_read += d.data.len() as u64;
        dl.buf.extend_from_slice(d.data);
        if dl.buf.len() < total && !d.data.is_empty() {
            self.request_chunk(node, at, true);
            return;
        }
        let Some(dl) = rec.download.take() else {
            return;
        };
        let digest = SchemaDigest::of(&dl.buf);
        if dl.buf.len() != total || !digest.matches(rec.announce.hash) {
            // Never trust a blob that does not match the announcement: read it again.
            rec.download = Some(Download {
                buf: Vec::new(),
                transfer: 0,
                deadline: 0,
                tries: dl.tries + 1,
            });
            if dl.tries + 1 > self.cfg.command_retries {
                rec.download = None;
                self.fail_node(
                    node,
                    format!(
                        "downloaded schema does not match the announced hash {}",
                        rec_hash(self, node)
                    ),
                );
                return;
            }
            self.request_chunk(node, at, true);
            return;
        }
        match self.load_schema(digest, dl.buf) {
            Ok(s) => {
                // The blobs nodes use now are kept when the cache evicts.
                let mut in_use: Vec<SchemaDigest> = self
                    .nodes
                    .values()
                    .filter_map(|n| n.schema.as_ref().map(|s| s.digest))
                    .collect();
                in_use.push(digest);
                self.store.in_use(&in_use);
                let _ = self.store.store(digest, &s.blob);
                self.schema_ready(node, s, false, at);
            }
            Err(reason) => self.fail_node(node, reason),
        }
        self.resume_blob_work(at);
    }
}

/// Blob downloads at once; more nodes reading wait their turn, so the memory the
/// downloads hold is at most `MAX_DOWNLOADS × MAX_BLOB_LEN` (256 KiB).
pub const MAX_DOWNLOADS: usize = 4;

/// Decoded schemas kept beyond those nodes use.
const MAX_SCHEMAS_DECODED: usize = 32;

/// Blobs refused (by digest) remembered, so a node re-announcing one is refused again
/// without a download or a check.
pub const MAX_REJECTED: usize = 64;

/// Bounded state of the blob work: lookups waiting on the cache, downloads waiting for a
/// slot, and blobs refused before.
#[derive(Default)]
pub(super) struct BlobWork {
    /// Nodes waiting on a cache lookup: (prefix, length) asked.
    pub lookups: BTreeMap<u8, (HashPrefix, u32)>,
    /// Nodes waiting for a download slot, in order (each at most once).
    pub queued: VecDeque<u8>,
    /// Refused blobs: digest → (length, why); at most [`MAX_REJECTED`], oldest dropped.
    pub rejected: BTreeMap<SchemaDigest, String>,
    rejected_len: BTreeMap<SchemaDigest, u32>,
    rejected_order: VecDeque<SchemaDigest>,
}

impl BlobWork {
    fn reject(&mut self, digest: SchemaDigest, len: u32, reason: &str) {
        if self.rejected.contains_key(&digest) {
            return;
        }
        if self.rejected_order.len() >= MAX_REJECTED {
            if let Some(old) = self.rejected_order.pop_front() {
                self.rejected.remove(&old);
                self.rejected_len.remove(&old);
            }
        }
        // A reason is at most a line: it names what a node sent.
        let reason: String = reason.chars().take(300).collect();
        self.rejected.insert(digest, reason);
        self.rejected_len.insert(digest, len);
        self.rejected_order.push_back(digest);
    }

    /// Why a blob of this prefix and length was refused before, if it was. The same trust
    /// as a cache hit: prefix and length name a blob (§6).
    fn rejected_for(&self, prefix: HashPrefix, len: u32) -> Option<String> {
        self.rejected_len
            .iter()
            .find(|(d, l)| d.matches(prefix) && **l == len)
            .and_then(|(d, _)| self.rejected.get(d).cloned())
    }
}

/// Segments per SCHEMA_DATA chunk the master asks for. A lost segment costs its whole
/// transfer, so a chunk of the protocol's maximum (128 segments) on a lossy Classical CAN
/// bus rarely arrives whole (0.99^128 ≈ 28 % at 1 % loss) and the download fails after
/// its retries; 16 segments arrive whole 85 % of the time for one extra round trip per
/// 122 bytes.
pub(super) const SCHEMA_CHUNK_SEGMENTS: usize = 16;

/// How many command timeouts one SCHEMA_READ may take: its answer is up to
/// [`SCHEMA_CHUNK_SEGMENTS`] frames, not the one frame of a RESULT, sent by a node that
/// also keeps its data frames going (its segments queue behind them), so a chunk on a busy
/// Classical CAN link can take several single-frame round trips.
pub(super) const SCHEMA_CHUNK_TIMEOUT_FACTOR: u64 = 4;

/// Blob bytes asked for per SCHEMA_READ on a link of this kind.
pub(super) fn schema_chunk(mtu: Mtu) -> usize {
    SchemaData::max_chunk(mtu.payload()).min(SCHEMA_CHUNK_SEGMENTS * mtu.payload() - 6)
}

pub(super) fn rec_hash(engine: &Engine, node: u8) -> String {
    engine
        .nodes
        .get(&node)
        .map(|n| n.announce.hash.to_string())
        .unwrap_or_default()
}
