//! The runtime's [`NodeDesc`] built at run time from a schema blob: the same tables
//! `fcan-codegen` writes into a firmware as `static`s, computed by the same functions
//! (`fcan_core::numbering` for sizes and indices, `fcan_core::arena` for the arena
//! offsets), so a fake node runs a schema exactly as its firmware would.

use std::sync::Arc;

use fcan_core::arena::Arena;
use fcan_core::hash::SchemaDigest;
use fcan_core::ir::Schema;
use fcan_core::numbering::Numbering;
use fcan_runtime_nostd::codegen::{
    ArrayDesc, BlockDesc, LimitsDesc, NodeDesc, ParamDesc, ServiceDesc, TopicDesc, TypeDesc,
};

/// Why a blob cannot run as a fake node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DescError {
    /// The blob does not decode.
    #[error(transparent)]
    Blob(#[from] fcan_core::blob::BlobError),
    /// The schema in it breaks a rule of `fcan_core::validate`.
    #[error("the schema is invalid: {0}")]
    Invalid(String),
    /// A number does not fit the runtime's tables (an arena over 64 KiB, ...).
    #[error("{0}")]
    TooLarge(String),
}

/// A schema ready to run as fake nodes: decoded, validated, numbered and laid out, with
/// the runtime's tables built and kept for the life of the process.
///
/// The runtime takes its tables as `&'static` (on a microcontroller they are in flash),
/// so they are leaked, once per schema: every fake node of the schema shares them, and a
/// process runs a handful of schemas, so the memory is bounded by what the user started.
#[derive(Debug)]
pub struct FakeSchema {
    /// The decoded schema.
    pub schema: Schema,
    /// Its numbering (block numbers, message layouts).
    pub numbering: Numbering,
    /// Its arena layout.
    pub arena: Arena,
    /// The runtime's tables (leaked: see above).
    pub desc: &'static NodeDesc,
}

impl FakeSchema {
    /// Decodes, validates, numbers and lays out `blob`, and builds the runtime's tables.
    pub fn from_blob(blob: &[u8]) -> Result<Arc<FakeSchema>, DescError> {
        let (schema, numbering, arena) = prepare(blob)?;
        let desc = tables(blob, &schema, &numbering, &arena)?;
        Ok(Arc::new(FakeSchema {
            schema,
            numbering,
            arena,
            desc: Box::leak(Box::new(desc)),
        }))
    }

    /// The node name pattern (`md_controller{i}`).
    pub fn node_name(&self) -> &str {
        &self.schema.node
    }
}

/// The runtime's tables for `blob`, as `fcan-codegen` would generate them for the schema
/// it holds. Leaks the tables' slices (see [`FakeSchema`]); call it once per schema.
pub fn node_desc(blob: &[u8]) -> Result<NodeDesc, DescError> {
    let (schema, numbering, arena) = prepare(blob)?;
    tables(blob, &schema, &numbering, &arena)
}

fn prepare(blob: &[u8]) -> Result<(Schema, Numbering, Arena), DescError> {
    let schema = fcan_core::blob::decode(blob)?;
    if let Some(first) = fcan_core::validate::validate(&schema).into_iter().next() {
        return Err(DescError::Invalid(first.to_string()));
    }
    let numbering = Numbering::of(&schema).map_err(|e| DescError::Invalid(format!("{e:?}")))?;
    let arena = Arena::of(&schema, &numbering);
    if let Some((what, total)) = arena.too_large() {
        return Err(DescError::TooLarge(format!(
            "the node's {what} arena would be {total} bytes; the runtime's tables address at most 65535"
        )));
    }
    Ok((schema, numbering, arena))
}

/// `v` as the narrower integer the tables hold, or an error naming `what`.
fn fit<T: TryFrom<usize>>(v: usize, what: &str) -> Result<T, DescError> {
    T::try_from(v)
        .map_err(|_| DescError::TooLarge(format!("{what} ({v}) does not fit the runtime's tables")))
}

fn leak<T>(v: Vec<T>) -> &'static [T] {
    Box::leak(v.into_boxed_slice())
}

/// The tables, field by field as the code generator's template writes them.
fn tables(
    blob: &[u8],
    schema: &Schema,
    numbering: &Numbering,
    arena: &Arena,
) -> Result<NodeDesc, DescError> {
    let mut types = Vec::with_capacity(schema.types.len());
    for (t, ta) in schema.types.iter().zip(&arena.types) {
        let mut topics = Vec::with_capacity(t.topics.len());
        for (tp, &(size, offset, stage)) in t.topics.iter().zip(&ta.topics) {
            topics.push(TopicDesc {
                dir: tp.dir,
                period_us: tp.period_us,
                size: fit(size, "a topic's size")?,
                offset: fit(offset, "a topic's offset")?,
                stage_offset: fit(stage, "a topic's staging offset")?,
            });
        }
        let mut params = Vec::with_capacity(t.params.len());
        for (p, &(_, offset)) in t.params.iter().zip(&ta.params) {
            params.push(ParamDesc::new(
                p.ty,
                fit(p.len.unwrap_or(1) as usize, "a param's length")?,
                fit(offset, "a param's offset")?,
                p.default,
                p.min,
                p.max,
            ));
        }
        let mut services = Vec::with_capacity(ta.services.len());
        for &(req, resp) in &ta.services {
            services.push(ServiceDesc {
                request_size: fit(req, "a service request's size")?,
                response_size: fit(resp, "a service response's size")?,
            });
        }
        types.push(TypeDesc {
            name: Box::leak(t.name.clone().into_boxed_str()),
            topics: leak(topics),
            params: leak(params),
            services: leak(services),
            topic_bytes: fit(ta.topic_bytes, "a type's topic bytes")?,
            stage_bytes: fit(ta.stage_bytes, "a type's staging bytes")?,
            param_bytes: fit(ta.param_bytes, "a type's param bytes")?,
        });
    }
    let mut arrays = Vec::with_capacity(schema.instances.len());
    for (a, &first_block) in schema.instances.iter().zip(&numbering.array_base) {
        let type_index = schema
            .types
            .iter()
            .position(|t| t.name == a.ty)
            .ok_or_else(|| DescError::Invalid(format!("no type `{}`", a.ty)))?;
        arrays.push(ArrayDesc {
            type_index: fit(type_index, "a type index")?,
            max_count: fit(a.max_count as usize, "an array's max_count")?,
            first_block,
        });
    }
    let mut blocks = Vec::with_capacity(arena.blocks.len());
    for b in &arena.blocks {
        blocks.push(BlockDesc {
            type_index: fit(b.type_index, "a type index")?,
            array: fit(b.array, "an array index")?,
            index: fit(b.index as usize, "an instance index")?,
            topic_offset: fit(b.topic_offset, "a block's topic offset")?,
            stage_offset: fit(b.stage_offset, "a block's staging offset")?,
            param_offset: fit(b.param_offset, "a block's param offset")?,
            topic_slot: fit(b.topic_slot, "a block's first topic slot")?,
        });
    }
    let l = &schema.limits;
    let desc = NodeDesc {
        blob: leak(blob.to_vec()),
        hash: SchemaDigest::of(blob).prefix(),
        limits: LimitsDesc {
            max_frames: fit(l.max_frames as usize, "limits.max_frames")?,
            max_copy_entries: fit(l.max_copy_entries as usize, "limits.max_copy_entries")?,
            service_buffer: fit(l.service_buffer as usize, "limits.service_buffer")?,
            service_reassembly: fit(l.service_reassembly as usize, "limits.service_reassembly")?,
        },
        types: leak(types),
        arrays: leak(arrays),
        blocks: leak(blocks),
        topic_bytes: arena.topic_bytes,
        stage_bytes: arena.stage_bytes,
        param_bytes: arena.param_bytes,
        topic_slots: arena.topic_slots,
        max_request: arena.max_request,
        max_response: arena.max_response,
    };
    // The runtime trusts its descriptor (`Node::configure` does not check it): one built
    // at run time is checked here, as codegen's tests check the generated ones.
    desc.check()
        .map_err(|e| DescError::TooLarge(format!("the runtime's tables: {e}")))?;
    Ok(desc)
}
