//! `fcan-codegen inspect`: the numbering table of a schema, every message's packed size
//! and how many frames it takes on Classical CAN and on CAN FD. All numbers come from
//! [`fcan_core::numbering`].

use std::fmt::Write as _;

use fcan_core::frame::Mtu;
use fcan_core::ir::Schema;
use fcan_core::msg::{DataDirection, ServiceRequest, ServiceResponse};
use fcan_core::numbering::{changed_bit, topic_frames, transfer_frames, Numbering};
use fcan_core::types::Scalar;
use serde::Serialize;

/// The whole report (`inspect --json` prints it as JSON).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    /// `node:`.
    pub node: String,
    /// `protocol:`.
    pub protocol: u32,
    /// SHA-256 of the blob, lowercase hex.
    pub sha256: String,
    /// Blob length in bytes.
    pub blob_len: usize,
    /// `limits:`.
    pub limits: LimitsReport,
    /// Block types, in blob order.
    pub types: Vec<TypeReport>,
    /// Instance arrays, in numbering order.
    pub arrays: Vec<ArrayReport>,
    /// Every block, by number.
    pub blocks: Vec<BlockReport>,
}

/// `limits:`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LimitsReport {
    /// Most data frames.
    pub max_frames: u32,
    /// Most copy entries.
    pub max_copy_entries: u32,
    /// Service reassembly buffer bytes.
    pub service_buffer: u32,
    /// Service slots.
    pub service_reassembly: u32,
}

/// One block type.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TypeReport {
    /// Index in the blob.
    pub index: usize,
    /// Name.
    pub name: String,
    /// Params; the index is the changed-mask bit.
    pub params: Vec<ParamReport>,
    /// Topics.
    pub topics: Vec<TopicReport>,
    /// Services.
    pub services: Vec<ServiceReport>,
}

/// One param.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ParamReport {
    /// Index = changed-mask bit number.
    pub index: usize,
    /// The mask value (`1 << index`).
    pub mask: u32,
    /// Name.
    pub name: String,
    /// Element type.
    pub ty: String,
    /// Array length, if an array.
    pub len: Option<u32>,
    /// Packed size.
    pub size: usize,
    /// Default, as text.
    pub default: String,
    /// Lower bound, as text.
    pub min: Option<String>,
    /// Upper bound, as text.
    pub max: Option<String>,
}

/// One topic.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct TopicReport {
    /// Index within the type.
    pub index: usize,
    /// Name.
    pub name: String,
    /// `m2s` or `s2m`.
    pub dir: String,
    /// s2m period, 0 = on commit.
    pub period_us: u32,
    /// Packed size.
    pub size: usize,
    /// Frames on Classical CAN.
    pub frames_classic: usize,
    /// Frames on CAN FD.
    pub frames_fd: usize,
}

/// One service.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ServiceReport {
    /// Index within the type.
    pub index: usize,
    /// Name.
    pub name: String,
    /// Packed request size (without the 2-byte request header).
    pub request_size: usize,
    /// Packed response size (without the 3-byte response header).
    pub response_size: usize,
    /// Request frames on Classical CAN (header included).
    pub request_frames_classic: usize,
    /// Request frames on CAN FD.
    pub request_frames_fd: usize,
    /// Response frames on Classical CAN (header included).
    pub response_frames_classic: usize,
    /// Response frames on CAN FD.
    pub response_frames_fd: usize,
}

/// One instance array.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ArrayReport {
    /// Index.
    pub index: usize,
    /// Type name.
    pub ty: String,
    /// Ceiling.
    pub max_count: u32,
    /// Namespace pattern.
    pub ns: String,
    /// Block number of instance 0.
    pub first_block: u8,
}

/// One block.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct BlockReport {
    /// Block number.
    pub number: u8,
    /// Instance array.
    pub array: usize,
    /// Index in the array.
    pub index: u32,
    /// Type name.
    pub ty: String,
    /// Namespace.
    pub ns: String,
}

/// A value as schema text.
pub fn scalar_text(v: &Scalar) -> String {
    match *v {
        Scalar::Bool(b) => b.to_string(),
        Scalar::U8(x) => x.to_string(),
        Scalar::I8(x) => x.to_string(),
        Scalar::U16(x) => x.to_string(),
        Scalar::I16(x) => x.to_string(),
        Scalar::U32(x) => x.to_string(),
        Scalar::I32(x) => x.to_string(),
        Scalar::U64(x) => x.to_string(),
        Scalar::I64(x) => x.to_string(),
        Scalar::F32(x) => format!("{x:?}"),
        Scalar::F64(x) => format!("{x:?}"),
    }
}

/// Builds the report for a valid schema.
pub fn report(schema: &Schema) -> Report {
    let numbering = Numbering::of(schema).expect("a validated schema numbers");
    let blob = fcan_core::blob::encode(schema);
    let types = schema
        .types
        .iter()
        .zip(&numbering.layouts)
        .enumerate()
        .map(|(index, (t, l))| TypeReport {
            index,
            name: t.name.clone(),
            params: t
                .params
                .iter()
                .enumerate()
                .map(|(i, p)| ParamReport {
                    index: i,
                    mask: changed_bit(i),
                    name: p.name.clone(),
                    ty: p.ty.name().into(),
                    len: p.len,
                    size: l.param_sizes[i],
                    default: scalar_text(&p.default),
                    min: p.min.as_ref().map(scalar_text),
                    max: p.max.as_ref().map(scalar_text),
                })
                .collect(),
            topics: t
                .topics
                .iter()
                .enumerate()
                .map(|(i, tp)| {
                    let size = l.topics[i].size;
                    TopicReport {
                        index: i,
                        name: tp.name.clone(),
                        dir: match tp.dir {
                            DataDirection::M2s => "m2s".into(),
                            DataDirection::S2m => "s2m".into(),
                        },
                        period_us: tp.period_us,
                        size,
                        frames_classic: topic_frames(Mtu::Classic, size),
                        frames_fd: topic_frames(Mtu::Fd, size),
                    }
                })
                .collect(),
            services: t
                .services
                .iter()
                .enumerate()
                .map(|(i, sv)| {
                    let req = l.requests[i].size;
                    let resp = l.responses[i].size;
                    let rq = req + ServiceRequest::HEADER_LEN;
                    let rs = resp + ServiceResponse::HEADER_LEN;
                    ServiceReport {
                        index: i,
                        name: sv.name.clone(),
                        request_size: req,
                        response_size: resp,
                        request_frames_classic: transfer_frames(Mtu::Classic, rq),
                        request_frames_fd: transfer_frames(Mtu::Fd, rq),
                        response_frames_classic: transfer_frames(Mtu::Classic, rs),
                        response_frames_fd: transfer_frames(Mtu::Fd, rs),
                    }
                })
                .collect(),
        })
        .collect();
    Report {
        node: schema.node.clone(),
        protocol: schema.protocol,
        sha256: fcan_core::hash::SchemaDigest::of(&blob).to_string(),
        blob_len: blob.len(),
        limits: LimitsReport {
            max_frames: schema.limits.max_frames,
            max_copy_entries: schema.limits.max_copy_entries,
            service_buffer: schema.limits.service_buffer,
            service_reassembly: schema.limits.service_reassembly,
        },
        types,
        arrays: schema
            .instances
            .iter()
            .enumerate()
            .map(|(i, a)| ArrayReport {
                index: i,
                ty: a.ty.clone(),
                max_count: a.max_count,
                ns: a.ns.clone(),
                first_block: numbering.array_base[i],
            })
            .collect(),
        blocks: numbering
            .blocks
            .iter()
            .map(|b| BlockReport {
                number: b.number,
                array: b.array,
                index: b.index,
                ty: schema.types[b.type_index].name.clone(),
                ns: b.ns.clone(),
            })
            .collect(),
    }
}

impl Report {
    /// The human-readable table.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "node      {}", self.node);
        let _ = writeln!(s, "protocol  {}", self.protocol);
        let _ = writeln!(
            s,
            "blob      {} bytes, sha256 {}",
            self.blob_len, self.sha256
        );
        let l = &self.limits;
        let _ = writeln!(
            s,
            "limits    max_frames {}, max_copy_entries {}, service_buffer {}, service_reassembly {}",
            l.max_frames, l.max_copy_entries, l.service_buffer, l.service_reassembly
        );
        let _ = writeln!(s, "\nblocks");
        let _ = writeln!(
            s,
            "  {:>5}  {:>5}  {:>5}  {:<20} ns",
            "block", "array", "index", "type"
        );
        for b in &self.blocks {
            let _ = writeln!(
                s,
                "  {:>5}  {:>5}  {:>5}  {:<20} {}",
                b.number, b.array, b.index, b.ty, b.ns
            );
        }
        for t in &self.types {
            let _ = writeln!(s, "\ntype {} (index {})", t.name, t.index);
            if !t.params.is_empty() {
                let _ = writeln!(s, "  params (index = changed-mask bit)");
                for p in &t.params {
                    let ty = match p.len {
                        Some(n) => format!("{}[{n}]", p.ty),
                        None => p.ty.clone(),
                    };
                    let mut range = String::new();
                    if let Some(m) = &p.min {
                        let _ = write!(range, " min {m}");
                    }
                    if let Some(m) = &p.max {
                        let _ = write!(range, " max {m}");
                    }
                    let _ = writeln!(
                        s,
                        "    {:>2}  mask 0x{:08x}  {:<28} {:<8} {:>3} B  default {}{}",
                        p.index, p.mask, p.name, ty, p.size, p.default, range
                    );
                }
            }
            if !t.topics.is_empty() {
                let _ = writeln!(
                    s,
                    "  topics                                   size  frames classic/fd"
                );
                for tp in &t.topics {
                    let when = match (tp.dir.as_str(), tp.period_us) {
                        ("m2s", _) => String::new(),
                        (_, 0) => " on commit".into(),
                        (_, p) => format!(" every {p} us"),
                    };
                    let _ = writeln!(
                        s,
                        "    {:>2}  {:<24} {:<4} {:>5} B  {:>3} / {:<3}{}",
                        tp.index, tp.name, tp.dir, tp.size, tp.frames_classic, tp.frames_fd, when
                    );
                }
            }
            if !t.services.is_empty() {
                let _ = writeln!(
                    s,
                    "  services                      request  frames c/fd   response  frames c/fd"
                );
                for sv in &t.services {
                    let _ = writeln!(
                        s,
                        "    {:>2}  {:<24} {:>5} B  {:>3} / {:<3}   {:>6} B  {:>3} / {:<3}",
                        sv.index,
                        sv.name,
                        sv.request_size,
                        sv.request_frames_classic,
                        sv.request_frames_fd,
                        sv.response_size,
                        sv.response_frames_classic,
                        sv.response_frames_fd
                    );
                }
            }
        }
        s.lines().map(|l| l.trim_end().to_string() + "\n").collect()
    }
}
