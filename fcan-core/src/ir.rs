//! The schema IR: one node's block types and instance arrays, after merging and dropping
//! unused types. Codegen builds it from YAML; the master decodes it from the blob. Both
//! then number it with [`crate::numbering`] and check it with [`crate::validate`].

use alloc::string::String;
use alloc::vec::Vec;

use crate::msg::DataDirection;
use crate::types::{Scalar, ScalarType};

/// [`crate::PROTOCOL_VERSION`] as the schema's `protocol:` key holds it.
pub const PROTOCOL_VERSION: u32 = crate::PROTOCOL_VERSION as u32;

/// One node's schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// `protocol:`.
    pub protocol: u32,
    /// `node:`, e.g. `md_controller{i}` (`{i}` = node id at boot).
    pub node: String,
    /// `options.allocation` (`static` is the only value the Rust runtime uses; kept for
    /// the ancestor's schemas).
    pub allocation: String,
    /// `limits:`.
    pub limits: Limits,
    /// The block types some instance uses, sorted by name.
    pub types: Vec<BlockType>,
    /// The instance arrays, in numbering order.
    pub instances: Vec<InstanceArray>,
}

/// What a node accepts; the master plans within these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most data frames in the node's plan.
    pub max_frames: u32,
    /// Most copy entries over all frames.
    pub max_copy_entries: u32,
    /// Bytes of reassembly buffer per service slot; 0 = single-frame requests only.
    pub service_buffer: u32,
    /// Service requests the node can hold at once (reassembling or deferred).
    pub service_reassembly: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frames: 32,
            max_copy_entries: 128,
            service_buffer: 0,
            service_reassembly: 1,
        }
    }
}

/// A block type: the params, topics and services one instance of it has.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockType {
    /// Type name (`MdMotor`).
    pub name: String,
    /// In declaration order; the index is the changed-mask bit.
    pub params: Vec<Param>,
    /// In declaration order.
    pub topics: Vec<Topic>,
    /// In declaration order.
    pub services: Vec<Service>,
}

/// A field of a topic or service message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name (an identifier; may be a Rust keyword such as `type`).
    pub name: String,
    /// Element type.
    pub ty: ScalarType,
    /// `None` for a scalar, `Some(n)` for a fixed array of `n ≥ 1` elements.
    pub len: Option<u32>,
}

impl Field {
    /// Element count (1 for a scalar).
    pub fn count(&self) -> usize {
        self.len.unwrap_or(1) as usize
    }

    /// Packed size in bytes.
    pub fn size(&self) -> usize {
        self.ty.size() * self.count()
    }
}

/// A parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Name; `/` separates hierarchy (`velocity/kp`).
    pub name: String,
    /// Element type.
    pub ty: ScalarType,
    /// `None` for a scalar, `Some(n)` for a fixed array (every element gets `default`
    /// and the same bounds).
    pub len: Option<u32>,
    /// Value at boot.
    pub default: Scalar,
    /// Inclusive lower bound.
    pub min: Option<Scalar>,
    /// Inclusive upper bound.
    pub max: Option<Scalar>,
}

impl Param {
    /// Packed size in bytes.
    pub fn size(&self) -> usize {
        self.ty.size() * self.len.unwrap_or(1) as usize
    }
}

/// A topic.
#[derive(Clone, Debug, PartialEq)]
pub struct Topic {
    /// Name; `/` separates hierarchy.
    pub name: String,
    /// `m2s` (commands) or `s2m` (feedback).
    pub dir: DataDirection,
    /// s2m: period in µs, 0 = sent once per commit. m2s: always 0.
    pub period_us: u32,
    /// In declaration order; packed back to back.
    pub fields: Vec<Field>,
    /// ROS metadata, carried to the master untouched.
    pub ros: Option<Ros>,
}

/// A service.
#[derive(Clone, Debug, PartialEq)]
pub struct Service {
    /// Name; `/` separates hierarchy.
    pub name: String,
    /// Request fields (may be empty).
    pub request: Vec<Field>,
    /// Response fields (may be empty).
    pub response: Vec<Field>,
    /// ROS metadata.
    pub ros: Option<Ros>,
}

/// `ros: {type, map}`: a ROS type name and field renames, for bridges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ros {
    /// e.g. `std_msgs/msg/Bool`.
    pub ty: String,
    /// `(fcan field, ROS field)` pairs, sorted by fcan field.
    pub map: Vec<(String, String)>,
}

/// `instances: [{type, max_count, ns}]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceArray {
    /// Name of the block type.
    pub ty: String,
    /// Compile-time ceiling; the count actually wired is announced at boot.
    pub max_count: u32,
    /// Namespace pattern; `{i}` is the instance index (required when `max_count > 1`).
    pub ns: String,
}

impl InstanceArray {
    /// The namespace of instance `i` (`{i}` replaced).
    ///
    /// ```
    /// use fcan_core::ir::InstanceArray;
    /// let a = InstanceArray { ty: "M".into(), max_count: 2, ns: "motor{i}".into() };
    /// assert_eq!(a.ns_of(1), "motor1");
    /// ```
    pub fn ns_of(&self, i: u32) -> String {
        self.ns.replace("{i}", &alloc::format!("{i}"))
    }
}

impl Schema {
    /// The block type an instance array uses.
    pub fn type_of(&self, array: &InstanceArray) -> Option<&BlockType> {
        self.types.iter().find(|t| t.name == array.ty)
    }

    /// The node name for a node id (`{i}` replaced).
    pub fn node_name(&self, node_id: u8) -> String {
        self.node.replace("{i}", &alloc::format!("{node_id}"))
    }
}
