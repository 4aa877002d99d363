//! Rust source for a node: typed messages, params, handler traits, the static
//! descriptor and a typed wrapper over `fcan_runtime_nostd::Node`, rendered with the
//! minijinja template `templates/fcan_gen.rs.j2`.
//!
//! This module computes names (with `r#` escapes), numbers and flags, and hands them to
//! the template as plain data; all Rust syntax (field reads and writes, the `*Desc`
//! tables, `Buffers<...>`) is written by the template. The only Rust it formats is
//! literals: scalar values ([`value_expr`], exact for floats), string literals and the
//! `byte` filter's `0x..`.
//!
//! Every number in the output comes from [`fcan_core::numbering`]; this module only adds
//! them up into the runtime's arena offsets (see [`Tables`]).

use std::collections::BTreeMap;

use fcan_core::hash::SchemaDigest;
use fcan_core::ir::{BlockType, Field, InstanceArray, Limits};
use fcan_core::msg::DataDirection;
use fcan_core::numbering::{flat_name, Numbering, TypeLayout};
use fcan_core::types::{Scalar, ScalarType};
use fcan_core::validate::PathSeg;
use serde::Serialize;

use crate::diag::{Diagnostic, Diagnostics};
use crate::frontend::key;
use crate::load::{finish, Loaded};

const TEMPLATE: &str = include_str!("../templates/fcan_gen.rs.j2");

/// Words that are keywords in some Rust edition; such names become raw identifiers.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "try", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof",
    "unsized", "virtual", "yield",
];
/// Keywords that cannot be raw identifiers.
const NOT_RAW: &[&str] = &["self", "Self", "super", "crate", "_"];

/// Item names the generated code uses inside each type module.
const MODULE_RESERVED: &[&str] = &[
    "Handler",
    "Context",
    "Param",
    "ParamType",
    "Handle",
    "Deferred",
    "Received",
    "Message",
    "Reply",
    "Reader",
    "Writer",
    "OutOfSpace",
    "ReadError",
    "PublishError",
    "CompleteError",
    "RawNode",
    "Option",
    "Result",
    "Some",
    "None",
    "Ok",
    "Err",
    "Default",
    "Clone",
    "Copy",
    "Debug",
    "PartialEq",
    "Sized",
    "Self",
];
/// Methods of a generated handle.
const HANDLE_RESERVED: &[&str] = &[
    "params", "param", "block", "instance", "is_wired", "now_us", "cx",
];
/// Methods of the generated `Node`.
const NODE_RESERVED: &[&str] = &[
    "new",
    "unconfigured",
    "configure",
    "receive",
    "receive_from",
    "poll",
    "poll_at",
    "complete",
    "fault",
    "node_id",
    "boot_id",
    "bus_mode",
    "is_configured",
    "rx_overflows",
    "raw",
    "raw_mut",
    "deref",
    "deref_mut",
    "state",
    "counters",
    "is_wired",
    "topic",
    "publish",
    "param",
];

/// `velocity/kp` → `velocity_kp`; keywords → `r#type`.
pub fn ident(name: &str) -> String {
    let flat = flat_name(name);
    if KEYWORDS.contains(&flat.as_str()) {
        format!("r#{flat}")
    } else {
        flat
    }
}

/// `MdMotor` → `md_motor`, `IOBoard` → `io_board`.
pub fn snake(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1);
            let boundary = match prev {
                Some('_') => false,
                Some(p) if p.is_ascii_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_ascii_uppercase() => next.is_some_and(|n| n.is_ascii_lowercase()),
                _ => false,
            };
            if boundary {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `motion_target` → `MotionTarget`, `imu/raw` → `ImuRaw`.
pub fn pascal(name: &str) -> String {
    flat_name(name)
        .split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            let first = c.next().map(|f| f.to_ascii_uppercase());
            first.into_iter().chain(c).collect::<String>()
        })
        .collect()
}

/// `velocity/kp` → `VELOCITY_KP`, `fooBar` → `FOO_BAR`.
pub fn upper(name: &str) -> String {
    snake(&flat_name(name)).to_ascii_uppercase()
}

/// A Rust expression for a value (exact: floats print in their shortest round-trip form).
pub fn value_expr(v: &Scalar) -> String {
    fn float(s: String) -> String {
        if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        }
    }
    match *v {
        Scalar::Bool(b) => b.to_string(),
        Scalar::U8(x) => x.to_string(),
        Scalar::U16(x) => x.to_string(),
        Scalar::U32(x) => x.to_string(),
        Scalar::U64(x) => x.to_string(),
        Scalar::I8(x) if x == i8::MIN => "i8::MIN".into(),
        Scalar::I16(x) if x == i16::MIN => "i16::MIN".into(),
        Scalar::I32(x) if x == i32::MIN => "i32::MIN".into(),
        Scalar::I64(x) if x == i64::MIN => "i64::MIN".into(),
        Scalar::I8(x) => x.to_string(),
        Scalar::I16(x) => x.to_string(),
        Scalar::I32(x) => x.to_string(),
        Scalar::I64(x) => x.to_string(),
        Scalar::F32(x) => float(format!("{x:?}")),
        Scalar::F64(x) => float(format!("{x:?}")),
    }
}

/// The Rust variant name shared by `Scalar` and `ScalarType` (`F32` for `f32`).
fn variant_name(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::Bool => "Bool",
        ScalarType::U8 => "U8",
        ScalarType::I8 => "I8",
        ScalarType::U16 => "U16",
        ScalarType::I16 => "I16",
        ScalarType::U32 => "U32",
        ScalarType::I32 => "I32",
        ScalarType::U64 => "U64",
        ScalarType::I64 => "I64",
        ScalarType::F32 => "F32",
        ScalarType::F64 => "F64",
    }
}

/// The runtime's arena layout, computed by [`fcan_core::arena::Arena`] (the fake node
/// builds its tables with the same function): generated `DESC` tables are exactly these
/// numbers.
pub use fcan_core::arena::{Arena as Tables, BlockArena as BlockTables, TypeArena as TypeTables};

// The template's context: plain data (numbers, names, flags, and values already written
// as Rust literals by `value_expr`); every piece of Rust syntax is in the template.

/// One message field or param: the template writes its type (`f32`, `[f32; 4]`), its
/// `Writer`/`Reader` calls (named after the scalar type) and its zero value.
#[derive(Serialize)]
struct FieldCtx {
    name: String,
    ident: String,
    /// The scalar type's name: the Rust type, and the `Writer`/`Reader` method.
    ty: &'static str,
    /// Fixed array length, `None` for a scalar.
    len: Option<u32>,
}

/// A value as the template writes it: `Scalar::{variant}({lit})` or just `lit`.
#[derive(Serialize)]
struct ValueCtx {
    /// The `Scalar` / `ScalarType` variant (`F32`).
    variant: &'static str,
    /// The value as a Rust literal ([`value_expr`]).
    lit: String,
}

impl ValueCtx {
    fn of(v: &Scalar) -> ValueCtx {
        ValueCtx {
            variant: variant_name(v.ty()),
            lit: value_expr(v),
        }
    }
}

#[derive(Serialize)]
struct MsgCtx {
    name: String,
    doc: String,
    size: usize,
    fields: Vec<FieldCtx>,
}

#[derive(Serialize)]
struct TopicCtx {
    index: usize,
    name: String,
    konst: String,
    m2s: bool,
    method: String,
    period_us: u32,
    offset: usize,
    stage_offset: usize,
    msg: MsgCtx,
}

#[derive(Serialize)]
struct ServiceCtx {
    index: usize,
    name: String,
    konst: String,
    method: String,
    request: MsgCtx,
    response: MsgCtx,
}

#[derive(Serialize)]
struct ParamCtx {
    index: usize,
    konst: String,
    bit: String,
    /// Name, type and length, as for a message field.
    #[serde(flatten)]
    field: FieldCtx,
    /// `ScalarType` variant of the param.
    variant: &'static str,
    offset: usize,
    default: ValueCtx,
    min: Option<ValueCtx>,
    max: Option<ValueCtx>,
    doc: String,
}

#[derive(Serialize)]
struct TypeCtx {
    index: usize,
    name: String,
    /// `name` as a Rust string literal.
    name_lit: String,
    module: String,
    params_struct: String,
    params: Vec<ParamCtx>,
    topics: Vec<TopicCtx>,
    services: Vec<ServiceCtx>,
    topic_bytes: usize,
    stage_bytes: usize,
    param_bytes: usize,
}

#[derive(Serialize)]
struct ArrayCtx {
    index: usize,
    ty: String,
    type_index: usize,
    module: String,
    ns: String,
    method: String,
    konst: String,
    max_count: u32,
    first_block: u8,
}

/// One block of the runtime's table (see [`BlockTables`]).
#[derive(Serialize)]
struct BlockCtx {
    type_index: usize,
    array: usize,
    index: u32,
    ordinal: u32,
    topic_offset: usize,
    stage_offset: usize,
    param_offset: usize,
    topic_slot: usize,
}

#[derive(Serialize)]
struct LimitsCtx {
    max_frames: u32,
    max_copy_entries: u32,
    service_buffer: u32,
    service_reassembly: u32,
}

/// The const parameters of the runtime's `Buffers`, in its order.
#[derive(Serialize)]
struct BuffersCtx {
    topic_bytes: usize,
    stage_bytes: usize,
    param_bytes: usize,
    blocks: usize,
    topic_slots: usize,
    frames: usize,
    copy_entries: usize,
    service_slots: usize,
    service_buffer: usize,
}

#[derive(Serialize)]
struct Ctx {
    version: &'static str,
    files: Vec<String>,
    node: String,
    /// `node` as a Rust string literal.
    node_lit: String,
    protocol: u32,
    sha256: String,
    blob: Vec<u8>,
    sha_bytes: Vec<u8>,
    prefix_bytes: Vec<u8>,
    limits: LimitsCtx,
    types: Vec<TypeCtx>,
    arrays: Vec<ArrayCtx>,
    blocks: Vec<BlockCtx>,
    has_services: bool,
    /// `App::update` and its forwarding ([`crate::Options::firmware_updates`]).
    updates: bool,
    topic_bytes: usize,
    stage_bytes: usize,
    param_bytes: usize,
    topic_slots: usize,
    max_request: usize,
    max_response: usize,
    buffers: BuffersCtx,
}

fn field_ctx(f: &Field) -> FieldCtx {
    FieldCtx {
        name: f.name.clone(),
        ident: ident(&f.name),
        ty: f.ty.name(),
        len: f.len,
    }
}

/// Text that is safe inside a generated `//` comment: a file name is the one string that
/// reaches the generated Rust without being checked as an identifier, and a newline in
/// it would end the comment and inject code. Control characters (line breaks included)
/// and Unicode bidirectional controls (which rustc refuses in comments) are written as
/// `\u{..}` escapes; everything else is kept, so an ordinary name reads as itself.
pub(crate) fn comment_text(s: &str) -> String {
    let bidi = |c: char| matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || bidi(c) || c == '\u{2028}' || c == '\u{2029}' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn msg_ctx(name: String, doc: String, fields: &[Field], size: usize) -> MsgCtx {
    MsgCtx {
        name,
        doc,
        size,
        fields: fields.iter().map(field_ctx).collect(),
    }
}

/// Collects the generated names of one scope and reports collisions at the schema key
/// that produced the second one. Shared by the Rust and the C backend.
pub(crate) struct Names {
    /// The language the names are in, for messages (`Rust`, `C`).
    lang: &'static str,
    /// Names the language cannot use at all.
    refused: &'static [&'static str],
    scope: String,
    seen: BTreeMap<String, String>,
}

impl Names {
    /// A scope of Rust names.
    fn new(scope: impl Into<String>, reserved: &[&str], why: &str) -> Names {
        Names::of_lang("Rust", NOT_RAW, scope, reserved, why)
    }

    /// A scope of names in `lang`; `refused` are names it cannot use, `reserved` names
    /// `why` already takes.
    pub(crate) fn of_lang(
        lang: &'static str,
        refused: &'static [&'static str],
        scope: impl Into<String>,
        reserved: &[&str],
        why: &str,
    ) -> Names {
        Names {
            lang,
            refused,
            scope: scope.into(),
            seen: reserved
                .iter()
                .map(|n| ((*n).to_string(), why.to_string()))
                .collect(),
        }
    }

    /// Whether `name` is taken in this scope.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.seen.contains_key(name)
    }

    /// Takes `name` for `from` (e.g. "param `kp`"), or reports at `path` why it cannot.
    pub(crate) fn add(
        &mut self,
        loaded: &Loaded,
        diags: &mut Vec<Diagnostic>,
        name: &str,
        from: &str,
        path: &[PathSeg],
    ) {
        let lang = self.lang;
        let bare = name.trim_start_matches("r#");
        if bare.is_empty() || self.refused.contains(&bare) {
            diags.push(loaded.locator.diag(
                path,
                format!(
                    "{from} gives the {lang} name `{bare}`, which {lang} cannot use; rename it"
                ),
            ));
            return;
        }
        if let Some(other) = self.seen.get(bare) {
            let msg = format!(
                "{from} gives the {lang} name `{bare}` {}, which is already used by {other}; rename one of them",
                self.scope
            );
            diags.push(loaded.locator.diag(path, msg));
            return;
        }
        self.seen.insert(bare.to_string(), from.to_string());
    }
}

/// Renders the Rust module for a loaded schema.
pub fn render(
    loaded: &Loaded,
    blob: &[u8],
    digest: &SchemaDigest,
    opts: &crate::Options,
) -> Result<String, Diagnostics> {
    let schema = &loaded.schema;
    let numbering = Numbering::of(schema).expect("a validated schema numbers");
    let tables = Tables::of(schema, &numbering);
    let mut diags = Vec::new();
    check_arena_size(loaded, &tables, &mut diags);
    let mut top = Names::new(
        "at the top of the generated module",
        TOP_RESERVED,
        "the generated code",
    );
    let arrays = array_ctxs(loaded, &numbering, &mut top, &mut diags);
    let types = (0..schema.types.len())
        .map(|ti| type_ctx(loaded, &numbering, &tables, ti, &mut top, &mut diags))
        .collect();
    if !diags.is_empty() {
        return Err(name_errors(loaded, diags));
    }
    let mut ctx = module_ctx(loaded, blob, digest, &tables, types, arrays);
    ctx.updates = opts.firmware_updates;
    Ok(render_template(&ctx) + "\n")
}

/// The names the generated module defines at its top, whatever the schema.
const TOP_RESERVED: &[&str] = &[
    "BLOB",
    "SCHEMA_SHA256",
    "DESC",
    "Buffers",
    "Node",
    "RawNode",
    "App",
    "Deferred",
    "Received",
    "Message",
    "Reply",
    "Controller",
    "Schema",
    "Counts",
    "Config",
    "instance_of",
    "ARRAY_COUNT",
    "MAX_COUNTS",
    "NODE_NAME",
    "PROTOCOL",
    "INSTANCE_OF_BLOCK",
    "AppDispatch",
];

/// Arena offsets are u16 in the runtime's tables.
pub(crate) fn check_arena_size(loaded: &Loaded, tables: &Tables, diags: &mut Vec<Diagnostic>) {
    if let Some((what, total)) = tables.too_large() {
        diags.push(loaded.locator.diag(
            &[key("instances")],
            format!("the node's {what} arena would be {total} bytes; the runtime's tables address at most 65535"),
        ));
    }
}

/// The instance arrays: each one's method on the generated Node and its `_MAX_COUNT`
/// constant.
fn array_ctxs(
    loaded: &Loaded,
    numbering: &Numbering,
    top: &mut Names,
    diags: &mut Vec<Diagnostic>,
) -> Vec<ArrayCtx> {
    let schema = &loaded.schema;
    let mut node_names = Names::new(
        "as a method of the generated Node",
        NODE_RESERVED,
        "the generated Node",
    );
    let mut array_ctx = Vec::new();
    for (ai, a) in schema.instances.iter().enumerate() {
        let method = array_method(a);
        let ipath = [key("instances"), PathSeg::Index(ai), key("ns")];
        node_names.add(
            loaded,
            diags,
            &method,
            &format!("instances[{ai}] (ns `{}`)", a.ns),
            &ipath,
        );
        let konst = upper(&method);
        top.add(
            loaded,
            diags,
            &format!("{konst}_MAX_COUNT"),
            &format!("instances[{ai}] (ns `{}`)", a.ns),
            &ipath,
        );
        let ty_index = schema
            .types
            .iter()
            .position(|t| t.name == a.ty)
            .unwrap_or(0);
        array_ctx.push(ArrayCtx {
            index: ai,
            ty: a.ty.clone(),
            type_index: ty_index,
            module: ident(&snake(&a.ty)),
            ns: a.ns.clone(),
            konst,
            method: ident(&method),
            max_count: a.max_count,
            first_block: numbering.array_base[ai],
        });
    }
    array_ctx
}

/// An instance array's name in generated code: its `ns` with `{i}` dropped and runs of
/// `_` joined (`out{i}` → `out`, `a_{i}_b` → `a_b`), or the type's snake name when
/// nothing is left. The Rust `Node` method and `<NAME>_MAX_COUNT`, the C
/// `FCAN_<NODE>_<NAME>(i)` and `FCAN_<NODE>_<NAME>_MAX_COUNT`.
pub(crate) fn array_method(a: &InstanceArray) -> String {
    let method = squeeze(&a.ns.replace("{i}", "_"));
    if method.is_empty() {
        snake(&a.ty)
    } else {
        method
    }
}

/// `a__b_` → `a_b`: runs of `_` become one, none at either end.
pub(crate) fn squeeze(s: &str) -> String {
    s.split('_')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

/// The scopes one type's generated names land in, besides the top of the module.
struct TypeNames {
    /// Items of the type's module: the params struct, message structs.
    items: Names,
    /// Constants of the type's module.
    consts: Names,
    /// The params struct's changed-mask bits.
    bits: Names,
    /// Methods of the type's `Handle`.
    methods: Names,
    /// Methods of the type's `Handler` trait.
    handler: Names,
}

impl TypeNames {
    fn new(module: &str, params_struct: &str) -> TypeNames {
        TypeNames {
            items: Names::new(
                format!("in module `{module}`"),
                MODULE_RESERVED,
                "the generated code",
            ),
            consts: Names::new(
                format!("as a constant in module `{module}`"),
                &["TYPE_INDEX"],
                "the generated code",
            ),
            bits: Names::new(
                format!("as a constant of `{params_struct}`"),
                &["SIZE"],
                "the generated code",
            ),
            methods: Names::new(
                format!("as a method of `{module}::Handle`"),
                HANDLE_RESERVED,
                "the generated handle",
            ),
            handler: Names::new(
                format!("as a method of `{module}::Handler`"),
                &["on_params_changed"],
                "the generated Handler trait",
            ),
        }
    }
}

/// The schema path of a key under type `t` (`types.<t>.<rest>…`).
pub(crate) fn type_path(t: &BlockType, rest: &[&str]) -> Vec<PathSeg> {
    let mut p = vec![key("types"), key(&t.name)];
    p.extend(rest.iter().map(|s| key(s)));
    p
}

/// One type's module: its params, topics and services.
fn type_ctx(
    loaded: &Loaded,
    numbering: &Numbering,
    tables: &Tables,
    ti: usize,
    top: &mut Names,
    diags: &mut Vec<Diagnostic>,
) -> TypeCtx {
    let t = &loaded.schema.types[ti];
    let tt = &tables.types[ti];
    let tpath = type_path(t, &[]);
    let module = snake(&t.name);
    top.add(
        loaded,
        diags,
        &module,
        &format!("type `{}` (as a module)", t.name),
        &tpath,
    );
    let params_struct = format!("{}Params", t.name);
    let mut names = TypeNames::new(&module, &params_struct);
    names
        .items
        .add(loaded, diags, &params_struct, "the params struct", &tpath);
    let params = param_ctxs(loaded, t, tt, &numbering.layouts[ti], &mut names, diags);
    let topics = topic_ctxs(loaded, t, tt, &mut names, diags);
    let services = service_ctxs(loaded, t, tt, &mut names, diags);
    TypeCtx {
        index: ti,
        name: t.name.clone(),
        name_lit: format!("{:?}", t.name),
        module: ident(&module),
        params_struct,
        params,
        topics,
        services,
        topic_bytes: tt.topic_bytes,
        stage_bytes: tt.stage_bytes,
        param_bytes: tt.param_bytes,
    }
}

/// A type's params: constants, changed-mask bits, offsets and doc lines.
fn param_ctxs(
    loaded: &Loaded,
    t: &BlockType,
    tt: &TypeTables,
    tl: &TypeLayout,
    names: &mut TypeNames,
    diags: &mut Vec<Diagnostic>,
) -> Vec<ParamCtx> {
    let mut params = Vec::new();
    for (pi, p) in t.params.iter().enumerate() {
        let ppath = type_path(t, &["params", &p.name]);
        let from = format!("param `{}`", p.name);
        let konst = format!("PARAM_{}", upper(&p.name));
        names.consts.add(loaded, diags, &konst, &from, &ppath);
        let bit = format!("{}_BIT", upper(&p.name));
        names.bits.add(loaded, diags, &bit, &from, &ppath);
        let field = FieldCtx::param(p);
        if NOT_RAW.contains(&field.ident.as_str()) {
            diags.push(loaded.locator.diag(
                &ppath,
                format!(
                    "{from} gives the Rust name `{}`, which Rust cannot use; rename it",
                    field.ident
                ),
            ));
        }
        let (size, off) = tt.params[pi];
        debug_assert_eq!(size, tl.param_sizes[pi]);
        let mut doc = format!("`{}`: {}", p.name, p.ty);
        if let Some(n) = p.len {
            doc.push_str(&format!("[{n}]"));
        }
        doc.push_str(&format!(
            ", default {}",
            crate::inspect::scalar_text(&p.default)
        ));
        if let Some(m) = &p.min {
            doc.push_str(&format!(", min {}", crate::inspect::scalar_text(m)));
        }
        if let Some(m) = &p.max {
            doc.push_str(&format!(", max {}", crate::inspect::scalar_text(m)));
        }
        doc.push('.');
        params.push(ParamCtx {
            index: pi,
            bit,
            konst,
            field,
            variant: variant_name(p.ty),
            offset: off,
            default: ValueCtx::of(&p.default),
            min: p.min.as_ref().map(ValueCtx::of),
            max: p.max.as_ref().map(ValueCtx::of),
            doc,
        });
    }
    params
}

/// A type's topics: message structs, constants and handle methods.
fn topic_ctxs(
    loaded: &Loaded,
    t: &BlockType,
    tt: &TypeTables,
    names: &mut TypeNames,
    diags: &mut Vec<Diagnostic>,
) -> Vec<TopicCtx> {
    let mut topics = Vec::new();
    for (i, tp) in t.topics.iter().enumerate() {
        let path = type_path(t, &["topics", &tp.name]);
        let from = format!("topic `{}`", tp.name);
        let name = pascal(&tp.name);
        names.items.add(loaded, diags, &name, &from, &path);
        let konst = format!("TOPIC_{}", upper(&tp.name));
        names.consts.add(loaded, diags, &konst, &from, &path);
        let m2s = tp.dir == DataDirection::M2s;
        let method = if m2s {
            ident(&tp.name)
        } else {
            format!("publish_{}", flat_name(&tp.name))
        };
        names.methods.add(loaded, diags, &method, &from, &path);
        check_fields(
            loaded,
            diags,
            &tp.fields,
            &path
                .iter()
                .cloned()
                .chain([key("fields")])
                .collect::<Vec<_>>(),
        );
        let (size, off, st) = tt.topics[i];
        let dir = if m2s { "m2s" } else { "s2m" };
        let when = match (m2s, tp.period_us) {
            (true, _) => "sent by the master".to_string(),
            (false, 0) => "sent once per publish (commit-triggered)".to_string(),
            (false, p) => format!("sent every {p} µs"),
        };
        topics.push(TopicCtx {
            index: i,
            name: tp.name.clone(),
            konst,
            m2s,
            method,
            period_us: tp.period_us,
            offset: off,
            stage_offset: st,
            msg: msg_ctx(
                name,
                format!("Topic `{}` ({dir}, {size} bytes, {when}).", tp.name),
                &tp.fields,
                size,
            ),
        });
    }
    topics
}

/// A type's services: request and response structs, constants and handler methods.
fn service_ctxs(
    loaded: &Loaded,
    t: &BlockType,
    tt: &TypeTables,
    names: &mut TypeNames,
    diags: &mut Vec<Diagnostic>,
) -> Vec<ServiceCtx> {
    let mut services = Vec::new();
    for (i, sv) in t.services.iter().enumerate() {
        let path = type_path(t, &["services", &sv.name]);
        let from = format!("service `{}`", sv.name);
        let base = pascal(&sv.name);
        let (req, resp) = tt.services[i];
        names.items.add(
            loaded,
            diags,
            &format!("{base}Request"),
            &format!("{from} (request)"),
            &path,
        );
        names.items.add(
            loaded,
            diags,
            &format!("{base}Response"),
            &format!("{from} (response)"),
            &path,
        );
        let konst = format!("SERVICE_{}", upper(&sv.name));
        names.consts.add(loaded, diags, &konst, &from, &path);
        let method = ident(&sv.name);
        names.handler.add(loaded, diags, &method, &from, &path);
        check_fields(
            loaded,
            diags,
            &sv.request,
            &path
                .iter()
                .cloned()
                .chain([key("request")])
                .collect::<Vec<_>>(),
        );
        check_fields(
            loaded,
            diags,
            &sv.response,
            &path
                .iter()
                .cloned()
                .chain([key("response")])
                .collect::<Vec<_>>(),
        );
        services.push(ServiceCtx {
            index: i,
            name: sv.name.clone(),
            konst,
            method,
            request: msg_ctx(
                format!("{base}Request"),
                format!("Request of service `{}` ({req} bytes).", sv.name),
                &sv.request,
                req,
            ),
            response: msg_ctx(
                format!("{base}Response"),
                format!("Response of service `{}` ({resp} bytes).", sv.name),
                &sv.response,
                resp,
            ),
        });
    }
    services
}

/// The naming errors, one per offending key: a name that collides as a struct usually
/// collides as a constant too.
pub(crate) fn name_errors(loaded: &Loaded, mut diags: Vec<Diagnostic>) -> Diagnostics {
    let mut seen = std::collections::BTreeSet::new();
    diags.retain(|d| seen.insert((d.file.clone(), d.line, d.col)));
    finish(&loaded.locator, diags)
}

/// The template's whole context: the node, its blob and digest, limits, types, arrays,
/// the runtime's tables and buffer sizes.
fn module_ctx(
    loaded: &Loaded,
    blob: &[u8],
    digest: &SchemaDigest,
    tables: &Tables,
    types: Vec<TypeCtx>,
    arrays: Vec<ArrayCtx>,
) -> Ctx {
    let schema = &loaded.schema;
    let l = &schema.limits;
    Ctx {
        version: env!("CARGO_PKG_VERSION"),
        files: file_names(loaded),
        node: schema.node.clone(),
        node_lit: format!("{:?}", schema.node),
        protocol: schema.protocol,
        sha256: digest.to_string(),
        blob: blob.to_vec(),
        sha_bytes: digest.0.to_vec(),
        prefix_bytes: digest.prefix().0.to_vec(),
        limits: LimitsCtx {
            max_frames: l.max_frames,
            max_copy_entries: l.max_copy_entries,
            service_buffer: l.service_buffer,
            service_reassembly: l.service_reassembly,
        },
        has_services: schema.types.iter().any(|t| !t.services.is_empty()),
        updates: false,
        types,
        arrays,
        blocks: block_ctxs(tables),
        topic_bytes: tables.topic_bytes,
        stage_bytes: tables.stage_bytes,
        param_bytes: tables.param_bytes,
        topic_slots: tables.topic_slots,
        max_request: tables.max_request,
        max_response: tables.max_response,
        buffers: buffers_ctx(tables, l),
    }
}

/// The input files' names (without directories), safe in a comment, in merge order.
pub(crate) fn file_names(loaded: &Loaded) -> Vec<String> {
    loaded
        .files
        .iter()
        .map(|f| {
            let name = std::path::Path::new(f)
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| f.clone());
            comment_text(&name)
        })
        .collect()
}

/// The runtime's block table, as [`BlockTables`] computed it.
fn block_ctxs(tables: &Tables) -> Vec<BlockCtx> {
    tables
        .blocks
        .iter()
        .map(|b| BlockCtx {
            type_index: b.type_index,
            array: b.array,
            index: b.index,
            ordinal: b.ordinal,
            topic_offset: b.topic_offset,
            stage_offset: b.stage_offset,
            param_offset: b.param_offset,
            topic_slot: b.topic_slot,
        })
        .collect()
}

/// The sizes of the runtime's `Buffers`.
fn buffers_ctx(tables: &Tables, l: &Limits) -> BuffersCtx {
    // The runtime's `Buffers` takes no zero-sized part: an unused one is one element.
    let clamp = |v: usize| v.max(1);
    BuffersCtx {
        topic_bytes: clamp(tables.topic_bytes),
        stage_bytes: clamp(tables.stage_bytes),
        param_bytes: clamp(tables.param_bytes),
        blocks: clamp(tables.blocks.len()),
        topic_slots: clamp(tables.topic_slots),
        frames: clamp(l.max_frames as usize),
        copy_entries: clamp(l.max_copy_entries as usize),
        service_slots: clamp(l.service_reassembly as usize),
        service_buffer: clamp(tables.svc_buf),
    }
}

/// The built-in template filled in with `ctx`.
fn render_template(ctx: &Ctx) -> String {
    let mut env = minijinja::Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .expect("syntax config"),
    );
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    // A byte as the template writes it in the blob and hash arrays (`0x0a`).
    env.add_filter("byte", |b: u8| format!("0x{b:02x}"));
    env.add_template("fcan_gen.rs", TEMPLATE)
        .expect("the built-in template parses");
    env.get_template("fcan_gen.rs")
        .and_then(|t| t.render(minijinja::value::Serde(ctx)))
        .expect("the built-in template renders")
}

/// Field names Rust cannot use even as raw identifiers.
fn check_fields(loaded: &Loaded, diags: &mut Vec<Diagnostic>, fields: &[Field], base: &[PathSeg]) {
    for f in fields {
        if NOT_RAW.contains(&f.name.as_str()) {
            let mut p = base.to_vec();
            p.push(key(&f.name));
            diags.push(loaded.locator.diag(
                &p,
                format!(
                    "field `{}` cannot be a Rust field name (not even as `r#{}`); rename it",
                    f.name, f.name
                ),
            ));
        }
    }
}

impl FieldCtx {
    fn param(p: &fcan_core::ir::Param) -> FieldCtx {
        field_ctx(&Field {
            name: p.name.clone(),
            ty: p.ty,
            len: p.len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(snake("MdMotor"), "md_motor");
        assert_eq!(snake("IOBoard"), "io_board");
        assert_eq!(snake("Motor2"), "motor2");
        assert_eq!(snake("Md_Motor"), "md_motor");
        assert_eq!(pascal("motion_target"), "MotionTarget");
        assert_eq!(pascal("imu/raw"), "ImuRaw");
        assert_eq!(pascal("fooBar"), "FooBar");
        assert_eq!(upper("velocity/kp"), "VELOCITY_KP");
        assert_eq!(ident("type"), "r#type");
        assert_eq!(ident("velocity/kp"), "velocity_kp");
    }

    #[test]
    fn values() {
        assert_eq!(value_expr(&Scalar::F32(1.0)), "1.0");
        assert_eq!(value_expr(&Scalar::F32(0.9)), "0.9");
        assert_eq!(value_expr(&Scalar::F64(1e300)), "1e300");
        assert_eq!(value_expr(&Scalar::I8(-128)), "i8::MIN");
        assert_eq!(value_expr(&Scalar::U64(u64::MAX)), "18446744073709551615");
    }
}
