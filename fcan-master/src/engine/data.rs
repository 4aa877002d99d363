//! The data plane: publishing m2s topics (staged, then each frame once) and decoding
//! s2m frames into topic samples, sequenced groups whole or not at all.

use super::*;
use fcan_core::dataframe::{self, Piece};
use fcan_core::group::{stage_part, PartOutcome};
use fcan_core::msg::CopyEntry;
use fcan_core::presence::PresenceBits;

use crate::planner::PlannedFrame;

impl Engine {
    /// Publishes an m2s topic: stores its value and sends every frame that carries it.
    pub fn publish(
        &mut self,
        node: NodeId,
        block: u8,
        topic: u8,
        bytes: &[u8],
        now: u64,
        sink: &mut impl SampleSink,
    ) -> Result<(), CallError> {
        self.stage_publish(node, block, topic, bytes, now, sink)?;
        self.flush_published();
        Ok(())
    }

    /// Stores a new value of an m2s topic and marks the frames that carry it, without
    /// sending them yet: publishing the targets of eight motors that share one frame,
    /// then [`Engine::flush_published`], sends that frame once, not eight times.
    /// [`Engine::poll`] flushes too.
    pub fn stage_publish(
        &mut self,
        node_id: NodeId,
        block: u8,
        topic: u8,
        bytes: &[u8],
        now: u64,
        sink: &mut impl SampleSink,
    ) -> Result<(), CallError> {
        self.tick(now);
        self.admit_publish(node_id, block, topic, bytes.len())?;
        let node = node_id.get();
        let Some(rec) = self.nodes.get_mut(&node) else {
            return Err(CallError::NodeNotOnline(node_id));
        };
        let framed = rec
            .plan
            .as_ref()
            .is_some_and(|p| p.frames_of(block, topic).next().is_some());
        let Some(buf) = rec.topics.get_mut(&(block, topic)) else {
            return Err(CallError::NodeNotOnline(node_id));
        };
        buf.copy_from_slice(bytes);
        sink.sample(node_id, block, topic, bytes, now);
        let seq = self.group_seq.entry((node, block, topic)).or_insert(0);
        *seq = seq.wrapping_add(1);
        if framed {
            self.published_m2s.insert((node, block, topic));
        }
        Ok(())
    }

    /// [`Engine::check_publish`], counting a refusal for the backlog
    /// ([`EngineStats::publish_busy`]).
    pub fn admit_publish(
        &mut self,
        node_id: NodeId,
        block: u8,
        topic: u8,
        len: usize,
    ) -> Result<(), CallError> {
        let r = self.check_publish(node_id, block, topic, len);
        if matches!(r, Err(CallError::Busy { .. })) {
            self.stats.publish_busy += 1;
        }
        r
    }

    /// Every rule [`Engine::stage_publish`] applies to publishing `len` bytes on an m2s
    /// topic now, without changing anything: a batch is checked whole before any of it
    /// is staged (a refusal after others were staged would send those with the next
    /// flush).
    pub fn check_publish(
        &self,
        node_id: NodeId,
        block: u8,
        topic: u8,
        len: usize,
    ) -> Result<(), CallError> {
        let node = node_id.get();
        let rec = self
            .nodes
            .get(&node)
            .ok_or(CallError::NodeNotOnline(node_id))?;
        if rec.phase != Phase::Running {
            return Err(CallError::NodeNotOnline(node_id));
        }
        let schema = rec
            .schema
            .as_ref()
            .ok_or(CallError::NodeNotOnline(node_id))?;
        let ty = schema
            .numbering
            .block(block)
            .and_then(|b| schema.schema.types.get(b.type_index))
            .ok_or_else(|| CallError::BadTarget(format!("node {node} has no block {block}")))?;
        let t = ty
            .topics
            .get(topic as usize)
            .ok_or_else(|| CallError::BadTarget(format!("block {block} has no topic {topic}")))?;
        if t.dir != DataDirection::M2s {
            return Err(CallError::BadTarget(format!(
                "topic {} is s2m: the node publishes it",
                t.name
            )));
        }
        if rec.plan.is_none() {
            return Err(CallError::NodeNotOnline(node_id));
        }
        let Some(buf) = rec.topics.get(&(block, topic)) else {
            return Err(CallError::BadTarget(format!(
                "topic {} of block {block} is not planned (instance not wired?)",
                t.name
            )));
        };
        if len != buf.len() {
            return Err(CallError::BadValue(format!(
                "topic {} is {} bytes, got {len}",
                t.name,
                buf.len(),
            )));
        }
        // Last: a wrong name or value is the more useful answer.
        let waiting_us = self.pacer.waiting_us();
        if waiting_us > self.cfg.data_backlog_us {
            return Err(CallError::Busy {
                node: node_id,
                waiting_us,
                limit_us: self.cfg.data_backlog_us,
            });
        }
        Ok(())
    }

    /// Sends every frame carrying a topic [`Engine::stage_publish`] staged, once each, in
    /// plan order. A masked (shared) frame delivers exactly the staged topics: its mask
    /// has their bits and the bytes of its other topics are zero, so a node never takes
    /// a value nobody published in this batch for a fresh one.
    pub fn flush_published(&mut self) {
        let published = std::mem::take(&mut self.published_m2s);
        let nodes: std::collections::BTreeSet<u8> = published.iter().map(|k| k.0).collect();
        for node in nodes {
            // A node that left RUNNING since (a reboot, a new plan) would drop the frame.
            let Some(rec) = self.nodes.get(&node).filter(|r| r.phase == Phase::Running) else {
                continue;
            };
            let mtu = rec.mode.mtu();
            // Bit-rate switching only for a node acknowledged with it: a node in plain FD
            // mode has no BRS capability and cannot receive a switched frame.
            let brs = rec.mode == BusMode::FdBrs;
            let Some(plan) = rec.plan.as_ref() else {
                continue;
            };
            let is_published = |e: &CopyEntry| published.contains(&(node, e.block, e.topic));
            for f in &plan.frames {
                if f.header.dir != DataDirection::M2s || !f.entries.iter().any(is_published) {
                    continue;
                }
                // The builder the node uses for its s2m frames: the published topics'
                // entries, and the mask of their presence bits.
                let mut payload = vec![0u8; f.header.len as usize];
                let pieces = f.entries.iter().map(|e| Piece {
                    topic: (e.block, e.topic),
                    src: e.src_offset,
                    dst: e.dst_offset,
                    len: e.len,
                });
                let mask = dataframe::build(
                    &mut payload,
                    pieces,
                    |(block, topic), _| published.contains(&(node, block, topic)),
                    |key| rec.topics.get(&key).map(Vec::as_slice),
                );
                if f.header.masked {
                    payload[0] = mask;
                } else if f.header.sequenced {
                    // A group carries one topic; all its parts carry that publication's
                    // number.
                    let seq = f
                        .entries
                        .first()
                        .and_then(|e| self.group_seq.get(&(node, e.block, e.topic)));
                    payload[0] = seq.copied().unwrap_or(0);
                }
                if let Ok(frame) = Frame::padded(mtu, CanId::Standard(f.header.std_id), &payload) {
                    let frame = if mtu == Mtu::Fd && !brs {
                        frame.without_brs()
                    } else {
                        frame
                    };
                    // Paced by bus time behind the configuration plane
                    // (`admission.rs`); counted when handed to the link.
                    let cost_ns = self.frame_cost_ns(&frame);
                    self.pacer.push(admission::Queued {
                        frame,
                        node,
                        run: rec.run,
                        cost_ns,
                    });
                }
            }
        }
    }

    pub(super) fn handle_data(
        &mut self,
        id: u16,
        data: &[u8],
        at: u64,
        sink: &mut impl SampleSink,
    ) {
        let Some(Some(route)) = self.routes.get(id as usize).copied() else {
            self.stats.rx_unrouted += 1;
            return;
        };
        let Some(rec) = self.nodes.get_mut(&route.node) else {
            return;
        };
        rec.last_seen = at;
        if rec.held.is_some() {
            // A newcomer sends no data before START: the known boot is alive (§5.3).
            self.known_boot_alive(route.node, at);
        }
        let Some(rec) = self.nodes.get_mut(&route.node) else {
            return;
        };
        let Some(frame) = rec
            .plan
            .as_ref()
            .and_then(|p| p.frames.get(route.frame as usize))
        else {
            return;
        };
        if frame.header.dir != DataDirection::S2m {
            self.stats.rx_malformed += 1;
            return;
        }
        let mut deliver = |block, topic, bytes: &[u8]| {
            sink.sample(nid(route.node), block, topic, bytes, at);
        };
        match unpack_data_frame(
            route.node,
            frame,
            data,
            &mut rec.topics,
            &mut self.staging,
            &mut deliver,
        ) {
            Unpacked::Done | Unpacked::Partial => {}
            Unpacked::Malformed => self.stats.rx_malformed += 1,
            Unpacked::GroupBroken => self.stats.rx_reassembly_dropped += 1,
        }
    }
}

/// What [`unpack_data_frame`] made of a data frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unpacked {
    /// Its topics were delivered (or it completed a group).
    Done,
    /// A part of a group, kept until the rest arrives.
    Partial,
    /// Shorter than its definition, or a presence mask naming topics it does not carry.
    Malformed,
    /// A part out of order or of another publication: the group so far is dropped.
    GroupBroken,
}

/// Unpacks one data frame of node `node` defined by `frame` into the topic buffers
/// `topics` (keyed by block and topic, each the topic's packed size), calling `deliver`
/// with every topic value the frame completes: the one decoding of data frames, for the
/// master (s2m frames) and the observer of a capture (both directions).
///
/// A masked frame delivers the topics whose bit is set; a sequenced group (`group_parts
/// > 1`) is assembled in `staging` and delivered whole or not at all.
pub(crate) fn unpack_data_frame(
    node: u8,
    frame: &PlannedFrame,
    data: &[u8],
    topics: &mut BTreeMap<(u8, u8), Vec<u8>>,
    staging: &mut BTreeMap<(u8, u8, u8), Staging>,
    deliver: &mut impl FnMut(u8, u8, &[u8]),
) -> Unpacked {
    let h = frame.header;
    if data.len() < h.len as usize {
        return Unpacked::Malformed;
    }
    if h.group_parts <= 1 {
        // A bit for a topic the frame does not carry means the frame is not from a
        // conforming node.
        let mask = if h.masked {
            let keys = frame.entries.iter().map(|e| (e.block, e.topic));
            let all = fcan_core::presence::all_of(keys).unwrap_or(u8::MAX);
            match data.first() {
                Some(&m) if m & !all == 0 => Some(m),
                _ => return Unpacked::Malformed,
            }
        } else {
            None
        };
        let mut bits = PresenceBits::new();
        for e in &frame.entries {
            let bit = bits.bit((e.block, e.topic));
            if let Some(m) = mask {
                if bit.is_none_or(|b| m & (1 << b) == 0) {
                    continue;
                }
            }
            let Some(buf) = topics.get_mut(&(e.block, e.topic)) else {
                continue;
            };
            let (s, d, l) = (e.src_offset as usize, e.dst_offset as usize, e.len as usize);
            if let (Some(dst), Some(src)) = (buf.get_mut(s..s + l), data.get(d..d + l)) {
                dst.copy_from_slice(src);
                deliver(e.block, e.topic, buf);
            }
        }
        return Unpacked::Done;
    }
    // A sequenced group: whole or nothing, assembled as the node assembles one
    // (`fcan_core::group`): parts in order with one sequence byte, each entry copied to
    // its source offset in a staged copy that starts from the live value.
    let Some(e) = frame.entries.first().copied() else {
        return Unpacked::Malformed;
    };
    let Some(&seq) = data.first() else {
        return Unpacked::Malformed;
    };
    let Some(live) = topics.get_mut(&(e.block, e.topic)) else {
        return Unpacked::Malformed;
    };
    let st = staging.entry((node, e.block, e.topic)).or_default();
    let head = u16::from(h.index).saturating_sub(u16::from(h.group_index));
    let outcome = st.progress.part(head, h.group_index, h.group_parts, seq);
    match outcome {
        PartOutcome::Started { .. } => st.bytes.clone_from(live),
        PartOutcome::Broken { .. } => return Unpacked::GroupBroken,
        _ => {}
    }
    let pieces = frame
        .entries
        .iter()
        .map(|e| (e.src_offset, e.dst_offset, e.len));
    if !stage_part(&mut st.bytes, data, pieces) {
        st.progress.stop();
        return Unpacked::Malformed;
    }
    if !matches!(outcome, PartOutcome::Complete) {
        return Unpacked::Partial;
    }
    live.copy_from_slice(&st.bytes);
    deliver(e.block, e.topic, live);
    Unpacked::Done
}
