//! Numbering and layout: the one function codegen and master both use to turn a schema
//! into block numbers, indices, byte offsets and names (`docs/protocol.md` §7).
//!
//! Rules, all stable when a schema only appends:
//! - instance arrays are numbered in schema order; block numbers are array-major:
//!   array 0's instances `0..max_count`, then array 1's, and so on (at most
//!   [`MAX_BLOCKS`]);
//! - params, topics, services and fields are numbered in declaration order within their
//!   type; a param's index is its bit in the changed mask;
//! - a message's fields are packed back to back in declaration order.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::frame::Mtu;
use crate::ir::{BlockType, Field, Schema};

/// Most blocks (instances over all arrays) one node can have; block numbers are a byte
/// and `0xFF` is reserved.
pub const MAX_BLOCKS: usize = 255;
/// Most params one type can have: the changed mask is a `u32`.
pub const MAX_PARAMS_PER_TYPE: usize = 32;
/// Most topics, and most services, one type can have (their index is a byte).
pub const MAX_TOPICS_PER_TYPE: usize = 255;
/// Most services one type can have.
pub const MAX_SERVICES_PER_TYPE: usize = 255;

/// Where one field sits in its packed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldLayout {
    /// Byte offset.
    pub offset: usize,
    /// Packed size.
    pub size: usize,
}

/// The packed layout of a topic, request, response or param set.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MessageLayout {
    /// Total packed size.
    pub size: usize,
    /// One layout per field, in declaration order.
    pub fields: Vec<FieldLayout>,
}

/// Packs fields back to back.
///
/// ```
/// use fcan_core::ir::Field;
/// use fcan_core::numbering::layout;
/// use fcan_core::types::ScalarType;
/// let fields = [
///     Field { name: "type".into(), ty: ScalarType::U8, len: None },
///     Field { name: "value".into(), ty: ScalarType::F32, len: Some(2) },
/// ];
/// let l = layout(&fields);
/// assert_eq!(l.size, 9);
/// assert_eq!(l.fields[1].offset, 1);
/// ```
pub fn layout(fields: &[Field]) -> MessageLayout {
    let mut offset = 0;
    let field_layouts = fields
        .iter()
        .map(|f| {
            let f_layout = FieldLayout {
                offset,
                size: f.size(),
            };
            offset += f_layout.size;
            f_layout
        })
        .collect();
    MessageLayout {
        size: offset,
        fields: field_layouts,
    }
}

/// How many data frames a topic of `size` bytes occupies on a link: one when it fits a
/// frame, otherwise a sequenced group whose frames each give their first byte to the
/// sequence number.
///
/// ```
/// use fcan_core::{frame::Mtu, numbering::topic_frames};
/// assert_eq!(topic_frames(Mtu::Classic, 8), 1);
/// assert_eq!(topic_frames(Mtu::Classic, 9), 2);   // 7 + 2
/// assert_eq!(topic_frames(Mtu::Classic, 15), 3);  // 7 + 7 + 1
/// assert_eq!(topic_frames(Mtu::Fd, 64), 1);
/// assert_eq!(topic_frames(Mtu::Fd, 65), 2);
/// ```
pub const fn topic_frames(mtu: Mtu, size: usize) -> usize {
    let p = mtu.payload();
    if size <= p {
        1
    } else {
        size.div_ceil(p - 1)
    }
}

/// How many configuration-plane frames a service request or response body needs,
/// including its header ([`crate::msg::ServiceRequest::HEADER_LEN`] or
/// [`crate::msg::ServiceResponse::HEADER_LEN`]).
pub const fn transfer_frames(mtu: Mtu, len: usize) -> usize {
    crate::segment::segment_count(mtu, len)
}

/// The changed-mask bit of param `index`.
///
/// ```
/// assert_eq!(fcan_core::numbering::changed_bit(3), 0b1000);
/// ```
pub const fn changed_bit(index: usize) -> u32 {
    1u32 << index
}

/// A name with hierarchy separators flattened for identifiers: `velocity/kp` →
/// `velocity_kp`. Two names of one kind that flatten alike collide.
pub fn flat_name(name: &str) -> String {
    name.replace('/', "_")
}

/// Topic and service path: `/<node>/<ns>/<name>`.
///
/// ```
/// assert_eq!(fcan_core::numbering::topic_path("md3", "motor0", "feedback"), "/md3/motor0/feedback");
/// ```
pub fn topic_path(node: &str, ns: &str, name: &str) -> String {
    format!("/{node}/{ns}/{name}")
}

/// Parameter path: `<node>.<ns>.<param>` with every `/` turned into `.`.
///
/// ```
/// assert_eq!(fcan_core::numbering::param_path("md3", "motor0", "velocity/kp"), "md3.motor0.velocity.kp");
/// ```
pub fn param_path(node: &str, ns: &str, name: &str) -> String {
    format!("{node}.{ns}.{name}").replace('/', ".")
}

/// The layouts of one block type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeLayout {
    /// Per topic.
    pub topics: Vec<MessageLayout>,
    /// Per service, the request.
    pub requests: Vec<MessageLayout>,
    /// Per service, the response.
    pub responses: Vec<MessageLayout>,
    /// Per param, its packed size.
    pub param_sizes: Vec<usize>,
}

impl TypeLayout {
    /// Lays out every message of a type.
    pub fn of(ty: &BlockType) -> TypeLayout {
        TypeLayout {
            topics: ty.topics.iter().map(|t| layout(&t.fields)).collect(),
            requests: ty.services.iter().map(|s| layout(&s.request)).collect(),
            responses: ty.services.iter().map(|s| layout(&s.response)).collect(),
            param_sizes: ty.params.iter().map(|p| p.size()).collect(),
        }
    }
}

/// One block: an instance of an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Global block number (what the wire carries).
    pub number: u8,
    /// Index of its instance array.
    pub array: usize,
    /// Index within the array.
    pub index: u32,
    /// Index of its type in [`Schema::types`].
    pub type_index: usize,
    /// Its namespace (`motor0`).
    pub ns: String,
}

/// The numbering of a whole schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Numbering {
    /// Every block, by number.
    pub blocks: Vec<Block>,
    /// The first block number of each instance array.
    pub array_base: Vec<u8>,
    /// Per type (same order as [`Schema::types`]).
    pub layouts: Vec<TypeLayout>,
}

/// The schema cannot be numbered (run [`crate::validate`] first for the full story).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NumberingError {
    /// An instance array names a type the schema does not have.
    UnknownType(String),
    /// More than [`MAX_BLOCKS`] blocks.
    TooManyBlocks(usize),
}

impl Numbering {
    /// Numbers a schema.
    ///
    /// ```
    /// use fcan_core::ir::*;
    /// use fcan_core::numbering::Numbering;
    /// let schema = Schema {
    ///     protocol: 2, node: "n{i}".into(), allocation: "static".into(),
    ///     limits: Limits::default(),
    ///     types: vec![BlockType { name: "T".into(), params: vec![], topics: vec![], services: vec![] }],
    ///     instances: vec![
    ///         InstanceArray { ty: "T".into(), max_count: 3, ns: "a{i}".into() },
    ///         InstanceArray { ty: "T".into(), max_count: 1, ns: "b".into() },
    ///     ],
    /// };
    /// let n = Numbering::of(&schema).unwrap();
    /// assert_eq!(n.array_base, vec![0, 3]);
    /// assert_eq!(n.blocks[3].ns, "b");
    /// assert_eq!(n.block_number(0, 2), Some(2));
    /// assert_eq!(n.block_number(0, 3), None);
    /// ```
    pub fn of(schema: &Schema) -> Result<Numbering, NumberingError> {
        let mut blocks = Vec::new();
        let mut array_base = Vec::new();
        for (a, arr) in schema.instances.iter().enumerate() {
            let type_index = schema
                .types
                .iter()
                .position(|t| t.name == arr.ty)
                .ok_or_else(|| NumberingError::UnknownType(arr.ty.clone()))?;
            let total = blocks.len() + arr.max_count as usize;
            if total > MAX_BLOCKS {
                return Err(NumberingError::TooManyBlocks(total));
            }
            array_base.push(blocks.len() as u8);
            for i in 0..arr.max_count {
                blocks.push(Block {
                    number: blocks.len() as u8,
                    array: a,
                    index: i,
                    type_index,
                    ns: arr.ns_of(i),
                });
            }
        }
        Ok(Numbering {
            blocks,
            array_base,
            layouts: schema.types.iter().map(TypeLayout::of).collect(),
        })
    }

    /// The block number of instance `index` of array `array`.
    pub fn block_number(&self, array: usize, index: u32) -> Option<u8> {
        let base = *self.array_base.get(array)?;
        let b = self.blocks.get(base as usize + index as usize)?;
        (b.array == array).then_some(b.number)
    }

    /// A block by number.
    pub fn block(&self, number: u8) -> Option<&Block> {
        self.blocks.get(number as usize)
    }

    /// The layouts of a block's type.
    pub fn layout_of(&self, number: u8) -> Option<&TypeLayout> {
        self.layouts.get(self.block(number)?.type_index)
    }
}
