//! Discovery: ANNOUNCE handling, acknowledgement, and the schema — from the cache or
//! downloaded in chunks and verified against the announced hash.

use super::*;

impl Engine {
    pub(super) fn on_announce(&mut self, node: u8, a: &Announce, at: u64) {
        self.events.push_back(Event::Announced {
            node,
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
        let mode = if self.cfg.mtu == Mtu::Fd && a.caps & caps::FD != 0 {
            if self.cfg.brs && a.caps & caps::BRS != 0 {
                BusMode::FdBrs
            } else {
                BusMode::Fd
            }
        } else {
            if self.cfg.mtu == Mtu::Fd {
                self.events.push_back(Event::ClassicNodeOnFdLink { node });
            }
            BusMode::Classic
        };
        if let Some(rec) = self.nodes.get_mut(&node) {
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
                    boot_id: a.boot_id,
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
                if rec.announce.boot_id != a.boot_id {
                    rec.prev_boot = Some(rec.announce.boot_id);
                    self.events.push_back(Event::Rebooted {
                        node,
                        old: rec.announce.boot_id,
                        new: a.boot_id,
                    });
                    false
                } else {
                    // Same boot: a lost ack, a master restart on its side, or master-lost
                    // recovery. A suspended node with its plan only needs START.
                    a.state == NodeState::Suspended && rec.plan.is_some() && rec.announce == ann
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
        rec.announce = ann;
        rec.mode = mode;
        rec.state = a.state;
        requeue_in_flight(rec);
        rec.steps.retain(|s| {
            matches!(
                s,
                Step::ParamSet { req: Some(_), .. } | Step::ParamGet { .. }
            )
        });
        if schema_changed {
            rec.schema = None;
            rec.schema_cached = None;
            if let Some(plan) = rec.plan.take() {
                self.release_plan(node, &plan);
            }
        }
        let boot_id = a.boot_id;
        self.fail_calls(node, CallError::NodeLost(node));
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
        let (prefix, len) = (rec.announce.hash, rec.announce.blob_len);
        let found = self
            .schemas
            .values()
            .find(|s| s.digest.matches(prefix) && s.blob.len() as u64 == len as u64)
            .cloned()
            .or_else(|| {
                let (digest, blob) = self.store.find(prefix, len)?;
                self.load_schema(digest, blob).ok()
            });
        match found {
            Some(s) => {
                self.events.push_back(Event::SchemaReady {
                    node,
                    digest: s.digest,
                    cached: true,
                });
                if let Some(rec) = self.nodes.get_mut(&node) {
                    rec.schema = Some(s);
                    rec.schema_cached = Some(true);
                }
                self.begin_provisioning(node, at);
            }
            None => {
                let Some(rec) = self.nodes.get_mut(&node) else {
                    return;
                };
                rec.phase = Phase::Reading;
                rec.download = Some(Download {
                    buf: Vec::new(),
                    transfer: 0,
                    deadline: 0,
                    tries: 0,
                });
                self.request_chunk(node, at, true);
            }
        }
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
        let schema = fcan_core::blob::decode(&blob).map_err(|e| e.to_string())?;
        let errors = fcan_core::validate::validate(&schema);
        if let Some(e) = errors.first() {
            return Err(format!("schema is invalid: {e}"));
        }
        let numbering = Numbering::of(&schema).map_err(|e| format!("{e:?}"))?;
        let s = Arc::new(NodeSchema {
            schema,
            numbering,
            digest,
            blob,
        });
        self.schemas.insert(digest, s.clone());
        Ok(s)
    }

    pub(super) fn request_chunk(&mut self, node: u8, now: u64, fresh: bool) {
        let t = if fresh { self.transfer(node) } else { 0 };
        let timeout = self.cfg.command_timeout_us * 4;
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
        let Some(dl) = &mut rec.download else { return };
        if dl.transfer != transfer || d.offset as usize != dl.buf.len() {
            return;
        }
        self.stats.schema_bytes_read += d.data.len() as u64;
        dl.buf.extend_from_slice(d.data);
        let total = rec.announce.blob_len as usize;
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
                let _ = self.store.store(digest, &s.blob);
                self.events.push_back(Event::SchemaReady {
                    node,
                    digest,
                    cached: false,
                });
                if let Some(rec) = self.nodes.get_mut(&node) {
                    rec.schema = Some(s);
                    rec.schema_cached = Some(false);
                }
                self.begin_provisioning(node, at);
            }
            Err(reason) => self.fail_node(node, reason),
        }
    }
}

/// Segments per SCHEMA_DATA chunk the master asks for. A lost segment costs its whole
/// transfer, so a chunk of the protocol's maximum (128 segments) on a lossy Classical CAN
/// bus rarely arrives whole (0.99^128 ≈ 28 % at 1 % loss) and the download fails after
/// its retries; 16 segments arrive whole 85 % of the time for one extra round trip per
/// 122 bytes.
pub(super) const SCHEMA_CHUNK_SEGMENTS: usize = 16;

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
