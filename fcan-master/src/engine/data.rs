//! The data plane: publishing m2s topics (staged, then each frame once) and decoding
//! s2m frames into topic samples, sequenced groups whole or not at all.

use super::*;

impl Engine {
    /// Publishes an m2s topic: stores its value and sends every frame that carries it.
    pub fn publish(
        &mut self,
        node: u8,
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
        node: u8,
        block: u8,
        topic: u8,
        bytes: &[u8],
        now: u64,
        sink: &mut impl SampleSink,
    ) -> Result<(), CallError> {
        let rec = self
            .nodes
            .get(&node)
            .ok_or(CallError::NodeNotOnline(node))?;
        if rec.phase != Phase::Running {
            return Err(CallError::NodeNotOnline(node));
        }
        let schema = rec.schema.clone().ok_or(CallError::NodeNotOnline(node))?;
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
        let Some(plan) = rec.plan.clone() else {
            return Err(CallError::NodeNotOnline(node));
        };
        let Some(rec) = self.nodes.get_mut(&node) else {
            return Err(CallError::NodeNotOnline(node));
        };
        let Some(buf) = rec.topics.get_mut(&(block, topic)) else {
            return Err(CallError::BadTarget(format!(
                "topic {} of block {block} is not planned (instance not wired?)",
                t.name
            )));
        };
        if bytes.len() != buf.len() {
            return Err(CallError::BadValue(format!(
                "topic {} is {} bytes, got {}",
                t.name,
                buf.len(),
                bytes.len()
            )));
        }
        buf.copy_from_slice(bytes);
        sink.sample(node, block, topic, bytes, now);
        let seq = self.group_seq.entry((node, block, topic)).or_insert(0);
        *seq = seq.wrapping_add(1);
        for (i, f) in plan.frames.iter().enumerate() {
            if f.entries
                .iter()
                .any(|e| e.block == block && e.topic == topic)
            {
                self.dirty_m2s.insert((node, i));
            }
        }
        Ok(())
    }

    /// Sends every frame [`Engine::stage_publish`] marked, once each, in plan order.
    pub fn flush_published(&mut self) {
        let dirty = std::mem::take(&mut self.dirty_m2s);
        for (node, i) in dirty {
            let Some(rec) = self.nodes.get(&node) else {
                continue;
            };
            let mtu = rec.mode.mtu();
            let Some(f) = rec.plan.as_ref().and_then(|p| p.frames.get(i)) else {
                continue;
            };
            let mut payload = vec![0u8; f.header.len as usize];
            if f.header.sequenced {
                // A group carries one topic; all its parts carry that publication's number.
                let seq = f
                    .entries
                    .first()
                    .and_then(|e| self.group_seq.get(&(node, e.block, e.topic)));
                payload[0] = seq.copied().unwrap_or(0);
            }
            for e in &f.entries {
                let Some(src) = rec.topics.get(&(e.block, e.topic)) else {
                    continue;
                };
                let (s, d, l) = (e.src_offset as usize, e.dst_offset as usize, e.len as usize);
                if let (Some(dst), Some(src)) = (payload.get_mut(d..d + l), src.get(s..s + l)) {
                    dst.copy_from_slice(src);
                }
            }
            if let Ok(frame) = Frame::padded(mtu, CanId::Standard(f.header.std_id), &payload) {
                let frame = if mtu == Mtu::Fd && !self.cfg.brs {
                    frame.without_brs()
                } else {
                    frame
                };
                self.out.push_back(frame);
                self.stats.tx_frames += 1;
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
        let Some(frame) = rec
            .plan
            .as_ref()
            .and_then(|p| p.frames.get(route.frame as usize))
        else {
            return;
        };
        let h = frame.header;
        if h.dir != DataDirection::S2m || data.len() < h.len as usize {
            self.stats.rx_malformed += 1;
            return;
        }
        if h.group_parts <= 1 {
            for e in &frame.entries {
                let Some(buf) = rec.topics.get_mut(&(e.block, e.topic)) else {
                    continue;
                };
                let (s, d, l) = (e.src_offset as usize, e.dst_offset as usize, e.len as usize);
                if let (Some(dst), Some(src)) = (buf.get_mut(s..s + l), data.get(d..d + l)) {
                    dst.copy_from_slice(src);
                    sink.sample(route.node, e.block, e.topic, buf, at);
                }
            }
            return;
        }
        // A sequenced group: whole or nothing.
        let Some(e) = frame.entries.first().copied() else {
            return;
        };
        let key = (route.node, e.block, e.topic);
        let seq = data[0];
        let (d, l) = (e.dst_offset as usize, e.len as usize);
        let Some(piece) = data.get(d..d + l) else {
            return;
        };
        if h.group_index == 0 {
            self.staging.insert(
                key,
                Staging {
                    seq,
                    next: 1,
                    bytes: piece.to_vec(),
                },
            );
        } else {
            match self.staging.get_mut(&key) {
                Some(st) if st.seq == seq && st.next == h.group_index => {
                    st.bytes.extend_from_slice(piece);
                    st.next += 1;
                }
                _ => {
                    self.staging.remove(&key);
                    self.stats.rx_reassembly_dropped += 1;
                    return;
                }
            }
        }
        if h.group_index + 1 == h.group_parts {
            let Some(st) = self.staging.remove(&key) else {
                return;
            };
            if let Some(buf) = rec.topics.get_mut(&(e.block, e.topic)) {
                if buf.len() == st.bytes.len() {
                    buf.copy_from_slice(&st.bytes);
                    sink.sample(route.node, e.block, e.topic, buf, at);
                }
            }
        }
    }
}
