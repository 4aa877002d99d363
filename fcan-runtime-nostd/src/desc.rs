//! Static descriptions of a node's schema, emitted by `fcan-codegen` as `static` tables in
//! flash. The runtime reads sizes, offsets, bounds and defaults from here and never
//! derives a layout itself: codegen computed every number with `fcan_core::numbering`.

use crate::error::ConfigError;
use fcan_core::hash::HashPrefix;
use fcan_core::msg::DataDirection;
use fcan_core::types::{Scalar, ScalarType, ValueError};

/// One topic of a block type.
///
/// `#[repr(C)]` in this field order, like every table below that holds no slice: the C
/// API's generated tables (`fcan_topic_desc_t` in `fcan.h`) have this layout, so
/// `fcan-node-c` reads them in place instead of copying them into RAM.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TopicDesc {
    /// s2m: period in µs, 0 = sent on commit. m2s: 0.
    pub period_us: u32,
    /// Packed size in bytes.
    pub size: u16,
    /// Offset of this topic's bytes within the block's topic area.
    pub offset: u16,
    /// m2s topics only: offset of this topic's staging bytes within the block's staging
    /// area, or `u16::MAX` when the topic never spans several frames (≤ 8 bytes) and so
    /// needs no staging.
    pub stage_offset: u16,
    /// `m2s` (commands in) or `s2m` (feedback out).
    pub dir: DataDirection,
}

/// One parameter of a block type.
///
/// The default and the bounds are held as bits ([`Scalar::to_bits`]: the packed value in
/// the low bytes), 32 bytes a parameter in flash rather than 56 with three `Scalar`s, and
/// the layout of the C API's `fcan_param_desc_t`. Build one with [`ParamDesc::new`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ParamDesc {
    /// The value at boot (every element of an array), as bits.
    pub default_bits: u64,
    /// Inclusive lower bound when `flags & ParamDesc::HAS_MIN`, as bits.
    pub min_bits: u64,
    /// Inclusive upper bound when `flags & ParamDesc::HAS_MAX`, as bits.
    pub max_bits: u64,
    /// Element count (1 for a scalar).
    pub count: u16,
    /// Offset of the packed value within the block's param area.
    pub offset: u16,
    /// Element type.
    pub ty: ScalarType,
    /// [`ParamDesc::HAS_MIN`] | [`ParamDesc::HAS_MAX`].
    pub flags: u8,
}

impl ParamDesc {
    /// `flags`: `min_bits` holds a lower bound.
    pub const HAS_MIN: u8 = 1;
    /// `flags`: `max_bits` holds an upper bound.
    pub const HAS_MAX: u8 = 2;

    /// Packed size in bytes.
    pub const fn size(&self) -> usize {
        self.ty.size() * self.count as usize
    }

    /// A parameter of `count` elements of `ty` at `offset`, with its default and
    /// bounds. `const`: generated tables are built with it at compile time.
    pub const fn new(
        ty: ScalarType,
        count: u16,
        offset: u16,
        default: Scalar,
        min: Option<Scalar>,
        max: Option<Scalar>,
    ) -> ParamDesc {
        let (min_bits, has_min) = match min {
            Some(v) => (v.to_bits(), Self::HAS_MIN),
            None => (0, 0),
        };
        let (max_bits, has_max) = match max {
            Some(v) => (v.to_bits(), Self::HAS_MAX),
            None => (0, 0),
        };
        ParamDesc {
            default_bits: default.to_bits(),
            min_bits,
            max_bits,
            count,
            offset,
            ty,
            flags: has_min | has_max,
        }
    }

    /// The value at boot, or `None` when the bits are not a value of `ty` (a bool other
    /// than 0 or 1).
    pub fn default_value(&self) -> Option<Scalar> {
        Scalar::from_bits(self.ty, self.default_bits).ok()
    }

    /// The lower bound: `Ok(None)` without one, an error when its bits are no value of
    /// the type (a bool other than 0 or 1).
    pub fn min(&self) -> Result<Option<Scalar>, ValueError> {
        self.bound(Self::HAS_MIN, self.min_bits)
    }

    /// The upper bound: `Ok(None)` without one, an error when its bits are no value of
    /// the type.
    pub fn max(&self) -> Result<Option<Scalar>, ValueError> {
        self.bound(Self::HAS_MAX, self.max_bits)
    }

    // Out of line: one copy of the decoding for both bounds (flash on a firmware).
    #[inline(never)]
    fn bound(&self, flag: u8, bits: u64) -> Result<Option<Scalar>, ValueError> {
        if self.flags & flag == 0 {
            return Ok(None);
        }
        Scalar::from_bits(self.ty, bits).map(Some)
    }
}

/// One service of a block type (`#[repr(C)]`: `fcan_service_desc_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServiceDesc {
    /// Packed request size (without the message header).
    pub request_size: u16,
    /// Packed response size (without the message header).
    pub response_size: u16,
}

/// One block type.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TypeDesc {
    /// Type name, for diagnostics.
    pub name: &'static str,
    /// In schema order.
    pub topics: &'static [TopicDesc],
    /// In schema order (the index is the changed-mask bit).
    pub params: &'static [ParamDesc],
    /// In schema order.
    pub services: &'static [ServiceDesc],
    /// Bytes of topic area one instance needs (sum of topic sizes).
    pub topic_bytes: u16,
    /// Bytes of staging area one instance needs (sum of multi-frame m2s topic sizes).
    pub stage_bytes: u16,
    /// Bytes of param area one instance needs (sum of param sizes).
    pub param_bytes: u16,
}

/// One block (an instance of an instance array), by block number (`#[repr(C)]`:
/// `fcan_block_desc_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockDesc {
    /// Offset of the block's topic area in the node's topic arena.
    pub topic_offset: u16,
    /// Offset of the block's staging area in the node's staging arena.
    pub stage_offset: u16,
    /// Offset of the block's param area in the node's param arena.
    pub param_offset: u16,
    /// Index of the block's first topic in the node's per-topic state table; topic `t`
    /// of the block is entry `topic_slot + t`.
    pub topic_slot: u16,
    /// Index into [`NodeDesc::types`].
    pub type_index: u8,
    /// Index of its instance array.
    pub array: u8,
    /// Index within the array (compared against the count wired at boot).
    pub index: u8,
}

/// One instance array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArrayDesc {
    /// Index into [`NodeDesc::types`].
    pub type_index: u8,
    /// The schema's `max_count`.
    pub max_count: u8,
    /// Block number of instance 0.
    pub first_block: u8,
}

/// The schema's `limits:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LimitsDesc {
    /// Most data frames in a plan.
    pub max_frames: u16,
    /// Most copy entries in a plan.
    pub max_copy_entries: u16,
    /// Bytes of a service reassembly buffer (0 = single-frame requests only).
    pub service_buffer: u16,
    /// Service slots.
    pub service_reassembly: u8,
}

/// Where a [`crate::Node`] finds its [`NodeDesc`].
///
/// Generated code implements it for a zero-sized type that names the schema's `static`
/// descriptor, so the node stores no pointer: an unconfigured node is all zero bytes
/// and a `static` of it goes to `.bss` (no initialiser image in flash), and the
/// descriptor's address is a constant in the code. A descriptor built at run time (a
/// simulated node reading a blob) is passed as `&'static NodeDesc`, which implements
/// the trait too.
pub trait Descriptor {
    /// The descriptor.
    fn desc(&self) -> &'static NodeDesc;
}

impl Descriptor for &'static NodeDesc {
    fn desc(&self) -> &'static NodeDesc {
        self
    }
}

/// Everything the runtime knows about its node's schema.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NodeDesc {
    /// The schema blob served by SCHEMA_READ.
    pub blob: &'static [u8],
    /// First 8 bytes of the blob's SHA-256, announced.
    pub hash: HashPrefix,
    /// Limits.
    pub limits: LimitsDesc,
    /// Block types, in the blob's order.
    pub types: &'static [TypeDesc],
    /// Instance arrays, in numbering order.
    pub arrays: &'static [ArrayDesc],
    /// Every block, by block number.
    pub blocks: &'static [BlockDesc],
    /// Total topic arena bytes (sum over blocks).
    pub topic_bytes: usize,
    /// Total staging arena bytes.
    pub stage_bytes: usize,
    /// Total param arena bytes.
    pub param_bytes: usize,
    /// Total per-topic state entries (sum over blocks of their type's topic count).
    pub topic_slots: usize,
    /// Largest packed service request.
    pub max_request: usize,
    /// Largest packed service response.
    pub max_response: usize,
}

impl NodeDesc {
    /// The smallest service slot buffer (`SVC_BUF` of [`crate::codegen::Buffers`]) this node
    /// accepts: `fcan_core::limits::service_slot_bytes`, the rule the code generator
    /// sizes the buffers by (the schema's `service_buffer`, one Classical frame, the
    /// largest request and response with their headers, and the largest request +
    /// response of one service, since a slot keeps the request while the handler writes
    /// the response next to it). `0` for a node without services.
    ///
    /// `const`, so generated code can size the buffers from the static descriptor:
    /// `const SVC_BUF: usize = NODE.required_service_buffer();`
    pub const fn required_service_buffer(&self) -> usize {
        if !self.has_services() {
            return 0;
        }
        fcan_core::limits::service_slot_bytes(
            self.limits.service_buffer as usize,
            self.max_request,
            self.max_response,
            self.largest_service_pair(),
        )
    }

    /// The largest `request_size + response_size` of any one service.
    const fn largest_service_pair(&self) -> usize {
        let mut best = 0;
        let mut types = self.types;
        // Slice patterns instead of indexing: const-compatible and cannot panic.
        while let [ty, rest @ ..] = types {
            let mut services = ty.services;
            while let [svc, more @ ..] = services {
                let need = svc.request_size as usize + svc.response_size as usize;
                if need > best {
                    best = need;
                }
                services = more;
            }
            types = rest;
        }
        best
    }

    /// Whether any block type has a service.
    pub const fn has_services(&self) -> bool {
        let mut types = self.types;
        while let [ty, rest @ ..] = types {
            if !ty.services.is_empty() {
                return true;
            }
            types = rest;
        }
        false
    }

    /// A block and its type, or `None` for a block number the node does not have.
    // Out of line: the data path and the plan checks call it from many places (~110 B).
    #[inline(never)]
    pub fn block(&self, block: u8) -> Option<(&'static BlockDesc, &'static TypeDesc)> {
        let b = self.blocks.get(block as usize)?;
        let t = self.types.get(b.type_index as usize)?;
        Some((b, t))
    }
}

impl NodeDesc {
    /// Checks the tables against each other (every index and offset in range, at most
    /// 255 blocks and 256 topic slots, at most 32 parameters a type, every parameter
    /// small enough for a PARAM_SET), so that later lookups can only miss on bus input,
    /// never on the node's own tables.
    ///
    /// [`crate::Node::configure`] does not call it: a descriptor the code generator
    /// emits is consistent by construction (its tests check this function on every
    /// generated descriptor), and leaving the check out of the firmware saves ~300 bytes
    /// of flash. A descriptor built any other way (a PC-side fake node builds one from a
    /// blob) is checked here before use. An inconsistent descriptor cannot make the node
    /// panic or touch memory out of bounds (every lookup is checked); it only makes it
    /// misbehave.
    pub fn check(&self) -> Result<(), ConfigError> {
        let desc = self;
        let bad = ConfigError::BadDesc;
        // Plan entries name a topic's state slot in one byte (`PlanEntry`).
        if desc.blocks.len() > 255 || desc.arrays.len() > 255 || desc.topic_slots > 256 {
            return Err(bad);
        }
        for b in desc.blocks.iter() {
            let td = desc.types.get(b.type_index as usize).ok_or(bad)?;
            let arr = desc.arrays.get(b.array as usize).ok_or(bad)?;
            if b.index >= arr.max_count || td.params.len() > 32 {
                return Err(bad);
            }
            for t in td.topics.iter() {
                let end = b.topic_offset as usize + t.offset as usize + t.size as usize;
                if end > desc.topic_bytes {
                    return Err(ConfigError::BadDesc);
                }
                if t.dir == fcan_core::msg::DataDirection::M2s && t.stage_offset != u16::MAX {
                    let end = b.stage_offset as usize + t.stage_offset as usize + t.size as usize;
                    if end > desc.stage_bytes {
                        return Err(bad);
                    }
                }
            }
            if b.topic_slot as usize + td.topics.len() > desc.topic_slots {
                return Err(bad);
            }
            for pd in td.params.iter() {
                if b.param_offset as usize + pd.offset as usize + pd.size() > desc.param_bytes {
                    return Err(bad);
                }
                if pd.default_value().is_none() || pd.min().is_err() || pd.max().is_err() {
                    return Err(bad);
                }
                if !fcan_core::limits::param_fits(pd.size()) {
                    return Err(ConfigError::ParamTooLarge);
                }
            }
        }
        Ok(())
    }
}
