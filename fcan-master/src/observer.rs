//! The observer: decodes a bus it does not own, from the frames alone, sans I/O.
//!
//! A capture (`candump -L` from can-utils, fcan's recorder, a logger on the robot) holds
//! everything a master and its nodes said: each node's ANNOUNCE (boot id, blob length and
//! hash, wired instance counts), the SCHEMA_DATA chunks of any blob the master
//! downloaded, the FRAME_DEFINEs of each plan, and the data frames. The observer follows
//! that conversation the way the master does and decodes the data frames of both
//! directions into named topic values, with the master's own rules: the one data-frame
//! unpacker ([`crate::engine`]'s), [`NodeSchema::decode`] for blobs (verified against the
//! announced hash), [`Registry::add_schema`] for names.
//!
//! What it cannot decode is counted in [`ObserverStats`], never guessed: a data frame
//! whose identifier no FRAME_DEFINE of the capture defined (the capture began after
//! provisioning), or whose node's blob is neither in the capture nor in the blob store.
//!
//! ```
//! use fcan_core::frame::{CanId, Frame};
//! use fcan_master::observer::{Observation, Observer};
//! let mut obs = Observer::new(None);
//! let frame = Frame::classic(CanId::Standard(0x123), &[1, 2, 3]).unwrap();
//! let mut seen = 0;
//! obs.push(&frame, 0, &mut |o: Observation| seen += 1);
//! assert_eq!(seen, 0);
//! assert_eq!(obs.stats().undecoded_no_plan, 1);
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use fcan_core::frame::{CanId, Frame};
use fcan_core::hash::{HashPrefix, SchemaDigest};
use fcan_core::id::{ConfigId, Direction, NodeId};
use fcan_core::ir::Field;
use fcan_core::msg::{Announce, ConfigMessage, DataDirection, FrameDefine, SchemaData};
use fcan_core::segment::ReassemblyPool;

use crate::cache::BlobStore;
use crate::engine::{unpack_data_frame, NodeSchema, Staging, Unpacked};
use crate::planner::{Plan, PlannedFrame};
use crate::registry::Registry;
use crate::value::{unpack_message_named, Value};

/// Something the observer learned from the frames.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Observation {
    /// A node's schema is known (from the capture's SCHEMA_DATA or the blob store): its
    /// topics can be decoded from now on.
    Schema {
        /// The node.
        node: NodeId,
        /// Its name (`motor_driver1`).
        name: String,
        /// Its decoded schema.
        schema: Arc<NodeSchema>,
        /// Where the blob came from.
        from_capture: bool,
    },
    /// A FRAME_DEFINE: frame `index` of node `node`'s plan (index 0 starts a new plan).
    FrameDefined {
        /// The node.
        node: NodeId,
        /// The frame.
        frame: PlannedFrame,
    },
    /// A topic value carried by a data frame.
    Sample(ObservedSample),
}

/// One topic value decoded from the capture.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ObservedSample {
    /// The node.
    pub node: NodeId,
    /// The topic's name (`/<node>/<ns>/<topic>`).
    pub topic: Arc<str>,
    /// Which way it flowed.
    pub dir: DataDirection,
    /// The value.
    pub value: Value,
    /// When (the time passed to [`Observer::push`]).
    pub at: u64,
}

/// What the observer saw and what it could not decode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObserverStats {
    /// Frames taken in.
    pub frames: u64,
    /// Data frames (standard identifiers).
    pub data_frames: u64,
    /// Topic values decoded.
    pub samples: u64,
    /// Configuration messages decoded (whole, after reassembly).
    pub config_messages: u64,
    /// Data frames no FRAME_DEFINE of the capture defined: not decoded.
    pub undecoded_no_plan: u64,
    /// Data frames of a planned node whose blob is neither in the capture nor in the
    /// store: not decoded.
    pub undecoded_no_schema: u64,
    /// Frames not as their definition says (too short, a bad presence mask) or
    /// configuration messages that do not decode.
    pub malformed: u64,
    /// Multi-frame transfers or topic groups broken by a missing or out-of-order part.
    pub broken_transfers: u64,
    /// Blobs assembled from the capture and verified.
    pub schemas_from_capture: u64,
    /// Blobs found in the store.
    pub schemas_from_store: u64,
    /// Blobs that did not match their announcement or did not decode.
    pub schemas_invalid: u64,
}

/// What the capture told of one node.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ObservedNodeInfo {
    /// The node.
    pub node: NodeId,
    /// Its name, once its schema is known.
    pub name: Option<String>,
    /// Its boot id, if its ANNOUNCE was captured.
    pub boot_id: Option<u32>,
    /// Its schema, if known.
    pub schema: Option<Arc<NodeSchema>>,
    /// Its plan's frames the capture defined, in plan order.
    pub plan: Plan,
    /// Whether no frame of the plan is missing (a FRAME_DEFINE not captured).
    pub plan_complete: bool,
}

/// One topic of a node, resolved for decoding.
struct TopicSlot {
    name: Arc<str>,
    dir: DataDirection,
    fields: Vec<Field>,
    names: Vec<Arc<str>>,
}

#[derive(Default)]
struct ObservedNode {
    boot_id: Option<u32>,
    blob_len: u32,
    hash: Option<HashPrefix>,
    counts: Vec<u8>,
    /// Blob bytes from the capture's SCHEMA_DATA so far.
    blob: Vec<u8>,
    schema: Option<Arc<NodeSchema>>,
    topics_of: BTreeMap<(u8, u8), TopicSlot>,
    plan: Vec<Option<PlannedFrame>>,
    buffers: BTreeMap<(u8, u8), Vec<u8>>,
    /// A store lookup was made for this announcement (made once).
    looked_up: bool,
}

/// Data identifiers the observer tracks: every standard identifier.
const IDS: usize = 0x800;

/// Decodes a bus from its frames alone (module docs).
pub struct Observer {
    store: Option<Box<dyn BlobStore>>,
    nodes: BTreeMap<u8, ObservedNode>,
    /// Standard identifier → (node, plan index).
    routes: Vec<Option<(u8, u8)>>,
    staging: BTreeMap<(u8, u8, u8), Staging>,
    rx: Box<ReassemblyPool<32, 8192>>,
    /// Every schema known, by announced hash and length: nodes running the same blob
    /// share it (the master downloads it once, so the capture holds it once).
    schemas: BTreeMap<(HashPrefix, u32), Arc<NodeSchema>>,
    stats: ObserverStats,
}

impl Observer {
    /// An observer that looks up blobs the capture does not hold in `store`.
    pub fn new(store: Option<Box<dyn BlobStore>>) -> Observer {
        Observer {
            store,
            nodes: BTreeMap::new(),
            routes: vec![None; IDS],
            staging: BTreeMap::new(),
            rx: Box::new(ReassemblyPool::new()),
            schemas: BTreeMap::new(),
            stats: ObserverStats::default(),
        }
    }

    /// What was seen so far.
    pub fn stats(&self) -> ObserverStats {
        self.stats
    }

    /// Every topic, service and parameter of the nodes whose schema is known.
    pub fn registry(&self) -> Registry {
        let mut reg = Registry::default();
        for (&id, n) in &self.nodes {
            let (Some(s), Some(node)) = (&n.schema, NodeId::new(id)) else {
                continue;
            };
            reg.add_schema(node, s, |b| {
                n.counts.get(b.array).is_some_and(|c| b.index < *c as u32)
            });
        }
        reg
    }

    /// The nodes heard, with what the capture told of each.
    pub fn nodes(&self) -> Vec<ObservedNodeInfo> {
        self.nodes
            .iter()
            .filter_map(|(&id, n)| {
                Some(ObservedNodeInfo {
                    node: NodeId::new(id)?,
                    name: n.schema.as_ref().map(|s| s.schema.node_name(id)),
                    boot_id: n.boot_id,
                    schema: n.schema.clone(),
                    plan: Plan {
                        frames: n.plan.iter().flatten().cloned().collect(),
                    },
                    plan_complete: n.plan.iter().all(Option::is_some),
                })
            })
            .collect()
    }

    /// Takes one frame seen on the bus at `at` (µs on any monotonic clock; the
    /// reassembly of multi-frame transfers uses it for its timeout) and reports what it
    /// teaches to `out`.
    pub fn push(&mut self, frame: &Frame, at: u64, out: &mut impl FnMut(Observation)) {
        self.stats.frames += 1;
        match frame.id() {
            CanId::Standard(id) => self.on_data(id, frame.data(), at, out),
            CanId::Extended(_) => {
                let Ok(cid) = ConfigId::from_can_id(frame.id()) else {
                    return; // another protocol's frame: not ours to count
                };
                match self.rx.push(cid, frame.data(), at as u32) {
                    Ok(Some(p)) => {
                        let payload = p.to_vec();
                        self.on_message(cid, &payload, out);
                    }
                    Ok(None) => {}
                    Err(_) => self.stats.broken_transfers += 1,
                }
            }
        }
    }

    fn on_message(&mut self, cid: ConfigId, payload: &[u8], out: &mut impl FnMut(Observation)) {
        let Ok(msg) = ConfigMessage::decode(cid.opcode, cid.dir, payload) else {
            self.stats.malformed += 1;
            return;
        };
        self.stats.config_messages += 1;
        let node = cid.node.get();
        match (msg, cid.dir) {
            (ConfigMessage::Announce(a), Direction::ToMaster) => self.on_announce(node, &a, out),
            (ConfigMessage::SchemaData(d), Direction::ToMaster) => {
                self.on_schema_data(node, &d, out)
            }
            (ConfigMessage::FrameDefine(fd), Direction::ToNode) => {
                self.on_frame_define(node, &fd, out)
            }
            _ => {}
        }
    }

    fn on_announce(&mut self, node: u8, a: &Announce, out: &mut impl FnMut(Observation)) {
        let n = self.nodes.entry(node).or_default();
        if n.boot_id == Some(a.boot_id) && n.hash == Some(a.hash) {
            return; // an ANNOUNCE repeated (a DISCOVER answered again)
        }
        // A reboot (or a first hearing): the node forgets its plan; the master plans it
        // again with FRAME_DEFINEs the capture will show.
        let schema = self.schemas.get(&(a.hash, a.blob_len)).cloned();
        *n = ObservedNode {
            boot_id: Some(a.boot_id),
            blob_len: a.blob_len,
            hash: Some(a.hash),
            counts: a.counts.to_vec(),
            ..ObservedNode::default()
        };
        self.routes
            .iter_mut()
            .filter(|r| matches!(r, Some((x, _)) if *x == node))
            .for_each(|r| *r = None);
        self.staging.retain(|k, _| k.0 != node);
        match schema {
            Some(s) => self.set_schema(node, s, false, false, out),
            None => self.look_up(node, out),
        }
    }

    /// The blob from the store, once per announcement.
    fn look_up(&mut self, node: u8, out: &mut impl FnMut(Observation)) {
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        let (Some(hash), Some(store)) = (n.hash, self.store.as_ref()) else {
            return;
        };
        if n.schema.is_some() || n.looked_up {
            return;
        }
        n.looked_up = true;
        let Some((digest, blob)) = store.find(hash, n.blob_len) else {
            return;
        };
        match NodeSchema::decode(digest, blob) {
            Ok(s) => self.set_schema(node, Arc::new(s), false, true, out),
            Err(_) => self.stats.schemas_invalid += 1,
        }
    }

    fn on_schema_data(&mut self, node: u8, d: &SchemaData, out: &mut impl FnMut(Observation)) {
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        if n.schema.is_some() {
            return;
        }
        let at = d.offset as usize;
        if at > n.blob.len() || at + d.data.len() > n.blob_len as usize {
            // A chunk after a gap (its predecessor was not captured), or past the
            // announced length: the blob cannot be assembled from this.
            self.stats.broken_transfers += 1;
            return;
        }
        // A chunk read again (the master retried) replaces what follows it.
        n.blob.truncate(at);
        n.blob.extend_from_slice(d.data);
        if n.blob.len() != n.blob_len as usize {
            return;
        }
        let blob = std::mem::take(&mut n.blob);
        let digest = SchemaDigest::of(&blob);
        if !n.hash.is_some_and(|h| digest.matches(h)) {
            self.stats.schemas_invalid += 1;
            return;
        }
        match NodeSchema::decode(digest, blob) {
            Ok(s) => self.set_schema(node, Arc::new(s), true, true, out),
            Err(_) => self.stats.schemas_invalid += 1,
        }
    }

    fn set_schema(
        &mut self,
        node: u8,
        s: Arc<NodeSchema>,
        from_capture: bool,
        count: bool,
        out: &mut impl FnMut(Observation),
    ) {
        if let Some(h) = self.nodes.get(&node).and_then(|n| n.hash) {
            let len = self.nodes.get(&node).map_or(0, |n| n.blob_len);
            self.schemas.entry((h, len)).or_insert_with(|| s.clone());
        }
        let Some(n) = self.nodes.get_mut(&node) else {
            return;
        };
        let Some(id) = NodeId::new(node) else { return };
        if count {
            if from_capture {
                self.stats.schemas_from_capture += 1;
            } else {
                self.stats.schemas_from_store += 1;
            }
        }
        let mut reg = Registry::default();
        let counts = n.counts.clone();
        reg.add_schema(id, &s, |b| {
            counts.get(b.array).is_some_and(|c| b.index < *c as u32)
        });
        n.topics_of = reg
            .topics
            .into_iter()
            .map(|t| {
                let names = t
                    .fields
                    .iter()
                    .map(|f| Arc::from(f.name.as_str()))
                    .collect();
                let slot = TopicSlot {
                    name: Arc::from(t.name.as_str()),
                    dir: t.dir,
                    fields: t.fields,
                    names,
                };
                ((t.block, t.topic), slot)
            })
            .collect();
        n.schema = Some(s.clone());
        out(Observation::Schema {
            node: id,
            name: s.schema.node_name(node),
            schema: s,
            from_capture,
        });
    }

    fn on_frame_define(&mut self, node: u8, fd: &FrameDefine, out: &mut impl FnMut(Observation)) {
        let Some(id) = NodeId::new(node) else { return };
        let h = fd.header;
        let Some(slot) = self.routes.get_mut(h.std_id as usize) else {
            self.stats.malformed += 1;
            return;
        };
        let n = self.nodes.entry(node).or_default();
        let k = h.index as usize;
        // Index 0 starts a new plan; a lower index truncates (`docs/protocol.md` §4).
        n.plan.truncate(k);
        n.plan.resize(k, None);
        let frame = PlannedFrame {
            header: h,
            entries: fd.entries.iter().collect(),
        };
        n.plan.push(Some(frame.clone()));
        let keep = n.plan.len() as u8;
        *slot = Some((node, h.index));
        // Identifiers of this node's dropped frames are free now.
        for (i, r) in self.routes.iter_mut().enumerate() {
            if let Some((x, idx)) = *r {
                if x == node && idx >= keep && i != h.std_id as usize {
                    *r = None;
                }
            }
        }
        out(Observation::FrameDefined { node: id, frame });
    }

    fn on_data(&mut self, id: u16, data: &[u8], at: u64, out: &mut impl FnMut(Observation)) {
        self.stats.data_frames += 1;
        let Some(Some((node, index))) = self.routes.get(id as usize).copied() else {
            self.stats.undecoded_no_plan += 1;
            return;
        };
        let Some(n) = self.nodes.get_mut(&node) else {
            self.stats.undecoded_no_plan += 1;
            return;
        };
        let Some(Some(frame)) = n.plan.get(index as usize) else {
            self.stats.undecoded_no_plan += 1;
            return;
        };
        let Some(schema) = &n.schema else {
            self.stats.undecoded_no_schema += 1;
            return;
        };
        // Topic buffers by the schema's layout, made when first needed.
        for e in &frame.entries {
            n.buffers.entry((e.block, e.topic)).or_insert_with(|| {
                let size = schema
                    .numbering
                    .layout_of(e.block)
                    .and_then(|l| l.topics.get(e.topic as usize))
                    .map_or(0, |l| l.size);
                vec![0; size]
            });
        }
        let Some(node_id) = NodeId::new(node) else {
            return;
        };
        let topics_of = &n.topics_of;
        let stats = &mut self.stats;
        let mut deliver = |block: u8, topic: u8, bytes: &[u8]| {
            let Some(t) = topics_of.get(&(block, topic)) else {
                return;
            };
            match unpack_message_named(&t.fields, &t.names, bytes) {
                Ok(value) => {
                    stats.samples += 1;
                    out(Observation::Sample(ObservedSample {
                        node: node_id,
                        topic: t.name.clone(),
                        dir: t.dir,
                        value,
                        at,
                    }));
                }
                Err(_) => stats.malformed += 1,
            }
        };
        match unpack_data_frame(
            node,
            frame,
            data,
            &mut n.buffers,
            &mut self.staging,
            &mut deliver,
        ) {
            Unpacked::Done | Unpacked::Partial => {}
            Unpacked::Malformed => self.stats.malformed += 1,
            Unpacked::GroupBroken => self.stats.broken_transfers += 1,
        }
    }
}
