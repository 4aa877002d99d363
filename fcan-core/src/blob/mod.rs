//! The schema blob: the IR encoded as protobuf (`schema/fcan_schema.proto`),
//! deterministically, so one schema gives one byte string and one [`SchemaDigest`].
//!
//! ```
//! use fcan_core::blob;
//! use fcan_core::ir::*;
//! let schema = Schema {
//!     protocol: PROTOCOL_VERSION, node: "n{i}".into(), allocation: "static".into(),
//!     limits: Limits::default(), types: vec![], instances: vec![],
//! };
//! let bytes = blob::encode(&schema);
//! assert_eq!(blob::decode(&bytes).unwrap(), schema);
//! assert_eq!(blob::digest(&schema), fcan_core::hash::SchemaDigest::of(&bytes));
//! ```

/// The prost types generated from `schema/fcan_schema.proto` (checked in; a test keeps
/// them in step with the `.proto`).
#[allow(missing_docs, clippy::all)]
pub mod pb {
    include!("pb.rs");
}

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use prost::Message;

use crate::hash::SchemaDigest;
use crate::ir::{BlockType, Field, InstanceArray, Limits, Param, Ros, Schema, Service, Topic};
use crate::msg::DataDirection;
use crate::types::{Scalar, ScalarType};

/// Why bytes are not a schema blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlobError {
    /// Not valid protobuf for the schema message.
    Protobuf(String),
    /// Valid protobuf, but a value has no meaning (unknown type code, a value of the
    /// wrong kind for its param, a missing required part). Says where.
    Invalid(String),
}

impl core::fmt::Display for BlobError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BlobError::Protobuf(e) => write!(f, "schema blob does not decode: {e}"),
            BlobError::Invalid(e) => write!(f, "schema blob is invalid: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for BlobError {}

/// Largest schema blob the protocol carries, in bytes (`docs/protocol.md` §3.3, §6).
///
/// A master refuses an ANNOUNCE whose blob length is larger before reading anything, and
/// the codegen refuses to produce such a blob, so every blob a node can serve fits. 64 KiB
/// is many times the largest real schema (the eight-motor driver's is about 1 KB) and
/// keeps a download, its checks and the memory it takes bounded.
pub const MAX_BLOB_LEN: u32 = 64 * 1024;

/// The length of a schema's blob: `encode(schema).len()`.
pub fn encoded_len(schema: &Schema) -> usize {
    to_pb(schema).encoded_len()
}

/// Encodes a schema as its blob.
pub fn encode(schema: &Schema) -> Vec<u8> {
    to_pb(schema).encode_to_vec()
}

/// The SHA-256 of a schema's blob.
pub fn digest(schema: &Schema) -> SchemaDigest {
    SchemaDigest::of(&encode(schema))
}

/// Decodes a blob. Structural checks only; run [`crate::validate::validate`] for the
/// semantic ones.
pub fn decode(bytes: &[u8]) -> Result<Schema, BlobError> {
    let pb = pb::Schema::decode(bytes).map_err(|e| BlobError::Protobuf(e.to_string()))?;
    from_pb(pb)
}

fn to_pb(s: &Schema) -> pb::Schema {
    pb::Schema {
        protocol: s.protocol,
        node: s.node.clone(),
        allocation: s.allocation.clone(),
        limits: Some(pb::Limits {
            max_frames: s.limits.max_frames,
            max_copy_entries: s.limits.max_copy_entries,
            service_buffer: s.limits.service_buffer,
            service_reassembly: s.limits.service_reassembly,
        }),
        types: s.types.iter().map(type_to_pb).collect(),
        instances: s
            .instances
            .iter()
            .map(|a| pb::InstanceArray {
                r#type: a.ty.clone(),
                max_count: a.max_count,
                ns: a.ns.clone(),
            })
            .collect(),
    }
}

fn type_to_pb(t: &BlockType) -> pb::BlockType {
    pb::BlockType {
        name: t.name.clone(),
        params: t
            .params
            .iter()
            .map(|p| pb::Param {
                name: p.name.clone(),
                r#type: p.ty.code() as i32,
                len: p.len.unwrap_or(0),
                default: Some(value_to_pb(&p.default)),
                min: p.min.as_ref().map(value_to_pb),
                max: p.max.as_ref().map(value_to_pb),
            })
            .collect(),
        topics: t
            .topics
            .iter()
            .map(|tp| pb::Topic {
                name: tp.name.clone(),
                dir: match tp.dir {
                    DataDirection::M2s => pb::Direction::M2s as i32,
                    DataDirection::S2m => pb::Direction::S2m as i32,
                },
                period_us: tp.period_us,
                fields: fields_to_pb(&tp.fields),
                ros: tp.ros.as_ref().map(ros_to_pb),
            })
            .collect(),
        services: t
            .services
            .iter()
            .map(|sv| pb::Service {
                name: sv.name.clone(),
                request: fields_to_pb(&sv.request),
                response: fields_to_pb(&sv.response),
                ros: sv.ros.as_ref().map(ros_to_pb),
            })
            .collect(),
    }
}

fn fields_to_pb(fields: &[Field]) -> Vec<pb::Field> {
    fields
        .iter()
        .map(|f| pb::Field {
            name: f.name.clone(),
            r#type: f.ty.code() as i32,
            len: f.len.unwrap_or(0),
        })
        .collect()
}

fn ros_to_pb(r: &Ros) -> pb::Ros {
    pb::Ros {
        r#type: r.ty.clone(),
        map: r
            .map
            .iter()
            .map(|(a, b)| pb::RosRename {
                field: a.clone(),
                ros_field: b.clone(),
            })
            .collect(),
    }
}

fn value_to_pb(v: &Scalar) -> pb::Value {
    use pb::value::Kind;
    let kind = match *v {
        Scalar::Bool(b) => Kind::B(b),
        Scalar::U8(x) => Kind::U(x as u64),
        Scalar::U16(x) => Kind::U(x as u64),
        Scalar::U32(x) => Kind::U(x as u64),
        Scalar::U64(x) => Kind::U(x),
        Scalar::I8(x) => Kind::I(x as i64),
        Scalar::I16(x) => Kind::I(x as i64),
        Scalar::I32(x) => Kind::I(x as i64),
        Scalar::I64(x) => Kind::I(x),
        Scalar::F32(x) => Kind::F(x as f64),
        Scalar::F64(x) => Kind::F(x),
    };
    pb::Value { kind: Some(kind) }
}

fn invalid(what: impl Into<String>) -> BlobError {
    BlobError::Invalid(what.into())
}

fn scalar_type(code: i32, at: &str) -> Result<ScalarType, BlobError> {
    u8::try_from(code)
        .ok()
        .and_then(ScalarType::from_code)
        .ok_or_else(|| invalid(alloc::format!("{at}: unknown type code {code}")))
}

fn array_len(len: u32) -> Option<u32> {
    (len != 0).then_some(len)
}

/// Converts a blob value to a scalar of type `ty`, refusing a value of the wrong kind or
/// out of the type's range.
fn value_from_pb(v: &pb::Value, ty: ScalarType, at: &str) -> Result<Scalar, BlobError> {
    use pb::value::Kind;
    let bad = || invalid(alloc::format!("{at}: value does not fit type {ty}"));
    let kind = v.kind.ok_or_else(bad)?;
    Ok(match (ty, kind) {
        (ScalarType::Bool, Kind::B(b)) => Scalar::Bool(b),
        (ScalarType::U8, Kind::U(x)) => Scalar::U8(x.try_into().map_err(|_| bad())?),
        (ScalarType::U16, Kind::U(x)) => Scalar::U16(x.try_into().map_err(|_| bad())?),
        (ScalarType::U32, Kind::U(x)) => Scalar::U32(x.try_into().map_err(|_| bad())?),
        (ScalarType::U64, Kind::U(x)) => Scalar::U64(x),
        (ScalarType::I8, Kind::I(x)) => Scalar::I8(x.try_into().map_err(|_| bad())?),
        (ScalarType::I16, Kind::I(x)) => Scalar::I16(x.try_into().map_err(|_| bad())?),
        (ScalarType::I32, Kind::I(x)) => Scalar::I32(x.try_into().map_err(|_| bad())?),
        (ScalarType::I64, Kind::I(x)) => Scalar::I64(x),
        (ScalarType::F32, Kind::F(x)) => {
            let f = x as f32;
            if f as f64 != x && !x.is_nan() {
                return Err(bad());
            }
            Scalar::F32(f)
        }
        (ScalarType::F64, Kind::F(x)) => Scalar::F64(x),
        _ => return Err(bad()),
    })
}

fn fields_from_pb(fields: Vec<pb::Field>, at: &str) -> Result<Vec<Field>, BlobError> {
    fields
        .into_iter()
        .map(|f| {
            let ty = scalar_type(f.r#type, &alloc::format!("{at}.{}", f.name))?;
            Ok(Field {
                name: f.name,
                ty,
                len: array_len(f.len),
            })
        })
        .collect()
}

fn ros_from_pb(r: Option<pb::Ros>) -> Option<Ros> {
    r.map(|r| Ros {
        ty: r.r#type,
        map: r.map.into_iter().map(|m| (m.field, m.ros_field)).collect(),
    })
}

fn from_pb(s: pb::Schema) -> Result<Schema, BlobError> {
    let limits = s.limits.ok_or_else(|| invalid("limits missing"))?;
    let mut types = Vec::with_capacity(s.types.len());
    for t in s.types {
        let mut params = Vec::with_capacity(t.params.len());
        for p in t.params {
            let at = alloc::format!("{}.params.{}", t.name, p.name);
            let ty = scalar_type(p.r#type, &at)?;
            let default = p
                .default
                .as_ref()
                .ok_or_else(|| invalid(alloc::format!("{at}: default missing")))?;
            params.push(Param {
                ty,
                len: array_len(p.len),
                default: value_from_pb(default, ty, &at)?,
                min: p
                    .min
                    .as_ref()
                    .map(|v| value_from_pb(v, ty, &at))
                    .transpose()?,
                max: p
                    .max
                    .as_ref()
                    .map(|v| value_from_pb(v, ty, &at))
                    .transpose()?,
                name: p.name,
            });
        }
        let mut topics = Vec::with_capacity(t.topics.len());
        for tp in t.topics {
            let at = alloc::format!("{}.topics.{}", t.name, tp.name);
            let dir = match pb::Direction::try_from(tp.dir) {
                Ok(pb::Direction::M2s) => DataDirection::M2s,
                Ok(pb::Direction::S2m) => DataDirection::S2m,
                Err(_) => {
                    return Err(invalid(alloc::format!(
                        "{at}: unknown direction {}",
                        tp.dir
                    )))
                }
            };
            topics.push(Topic {
                fields: fields_from_pb(tp.fields, &at)?,
                ros: ros_from_pb(tp.ros),
                name: tp.name,
                dir,
                period_us: tp.period_us,
            });
        }
        let mut services = Vec::with_capacity(t.services.len());
        for sv in t.services {
            let at = alloc::format!("{}.services.{}", t.name, sv.name);
            services.push(Service {
                request: fields_from_pb(sv.request, &at)?,
                response: fields_from_pb(sv.response, &at)?,
                ros: ros_from_pb(sv.ros),
                name: sv.name,
            });
        }
        types.push(BlockType {
            name: t.name,
            params,
            topics,
            services,
        });
    }
    Ok(Schema {
        protocol: s.protocol,
        node: s.node,
        allocation: s.allocation,
        limits: Limits {
            max_frames: limits.max_frames,
            max_copy_entries: limits.max_copy_entries,
            service_buffer: limits.service_buffer,
            service_reassembly: limits.service_reassembly,
        },
        types,
        instances: s
            .instances
            .into_iter()
            .map(|a| InstanceArray {
                ty: a.r#type,
                max_count: a.max_count,
                ns: a.ns,
            })
            .collect(),
    })
}
