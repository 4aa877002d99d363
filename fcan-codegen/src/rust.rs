//! Rust source for a node: typed messages, params, handler traits, the static
//! descriptor and a typed wrapper over `fcan_runtime_nostd::Node`, rendered with the
//! minijinja template `templates/fcan_gen.rs.j2`.
//!
//! Every number in the output comes from [`fcan_core::numbering`]; this module only adds
//! them up into the runtime's arena offsets (see [`Tables`]).

use std::collections::BTreeMap;

use fcan_core::hash::SchemaDigest;
use fcan_core::ir::Field;
use fcan_core::msg::DataDirection;
use fcan_core::numbering::{flat_name, Numbering};
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

fn rust_scalar(ty: ScalarType) -> &'static str {
    ty.name()
}

fn zero(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::Bool => "false",
        ScalarType::F32 | ScalarType::F64 => "0.0",
        _ => "0",
    }
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

fn scalar_ctor(v: &Scalar) -> String {
    format!("Scalar::{}({})", variant_name(v.ty()), value_expr(v))
}

fn scalar_type_path(ty: ScalarType) -> String {
    format!("ScalarType::{}", variant_name(ty))
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

#[derive(Serialize)]
struct FieldCtx {
    name: String,
    ident: String,
    rust_ty: String,
    write: String,
    read: String,
    zero: String,
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
    msg: MsgCtx,
    desc: String,
}

#[derive(Serialize)]
struct ServiceCtx {
    index: usize,
    name: String,
    konst: String,
    method: String,
    request: MsgCtx,
    response: MsgCtx,
    desc: String,
}

#[derive(Serialize)]
struct ParamCtx {
    index: usize,
    mask: String,
    name: String,
    ident: String,
    konst: String,
    bit: String,
    rust_ty: String,
    write: String,
    read: String,
    default: String,
    doc: String,
    desc: String,
}

#[derive(Serialize)]
struct TypeCtx {
    index: usize,
    name: String,
    module: String,
    params_struct: String,
    params: Vec<ParamCtx>,
    param_size: usize,
    topics: Vec<TopicCtx>,
    services: Vec<ServiceCtx>,
    desc: String,
}

#[derive(Serialize)]
struct ArrayCtx {
    index: usize,
    ty: String,
    module: String,
    ns: String,
    method: String,
    konst: String,
    max_count: u32,
    first_block: u8,
    desc: String,
}

#[derive(Serialize)]
struct Ctx {
    version: &'static str,
    files: Vec<String>,
    node: String,
    node_lit: String,
    protocol: u32,
    sha256: String,
    blob_len: usize,
    blob_lines: Vec<String>,
    sha_bytes: String,
    prefix_bytes: String,
    limits: String,
    types: Vec<TypeCtx>,
    arrays: Vec<ArrayCtx>,
    blocks: Vec<String>,
    ordinals: String,
    max_counts: String,
    has_services: bool,
    topic_bytes: usize,
    stage_bytes: usize,
    param_bytes: usize,
    topic_slots: usize,
    max_request: usize,
    max_response: usize,
    buffers: String,
}

fn bytes_lines(bytes: &[u8], per_line: usize) -> Vec<String> {
    bytes
        .chunks(per_line)
        .map(|c| {
            c.iter()
                .map(|b| format!("0x{b:02x},"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn inline_bytes(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("0x{b:02x}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn field_ctx(f: &Field) -> FieldCtx {
    let m = f.ty.name();
    let id = ident(&f.name);
    match f.len {
        None => FieldCtx {
            name: f.name.clone(),
            rust_ty: rust_scalar(f.ty).into(),
            write: format!("w.{m}(self.{id})?;"),
            read: format!("r.{m}()?"),
            zero: zero(f.ty).into(),
            ident: id,
        },
        Some(n) => FieldCtx {
            name: f.name.clone(),
            rust_ty: format!("[{}; {n}]", rust_scalar(f.ty)),
            write: format!("for v in &self.{id} {{\n    w.{m}(*v)?;\n}}"),
            read: format!(
                "{{\n    let mut a = [{}; {n}];\n    for v in a.iter_mut() {{\n        *v = r.{m}()?;\n    }}\n    a\n}}",
                zero(f.ty)
            ),
            zero: format!("[{}; {n}]", zero(f.ty)),
            ident: id,
        },
    }
}

/// Text that is safe inside a generated `//` comment: a file name is the one string that
/// reaches the generated Rust without being checked as an identifier, and a newline in
/// it would end the comment and inject code. Control characters (line breaks included)
/// and Unicode bidirectional controls (which rustc refuses in comments) are written as
/// `\u{..}` escapes; everything else is kept, so an ordinary name reads as itself.
fn comment_text(s: &str) -> String {
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
/// that produced the second one.
struct Names {
    scope: String,
    seen: BTreeMap<String, String>,
}

impl Names {
    fn new(scope: impl Into<String>, reserved: &[&str], why: &str) -> Names {
        Names {
            scope: scope.into(),
            seen: reserved
                .iter()
                .map(|n| ((*n).to_string(), why.to_string()))
                .collect(),
        }
    }

    fn add(
        &mut self,
        loaded: &Loaded,
        diags: &mut Vec<Diagnostic>,
        rust: &str,
        from: &str,
        path: &[PathSeg],
    ) {
        let bare = rust.trim_start_matches("r#");
        if bare.is_empty() || NOT_RAW.contains(&bare) {
            diags.push(loaded.locator.diag(
                path,
                format!("{from} gives the Rust name `{bare}`, which Rust cannot use; rename it"),
            ));
            return;
        }
        if let Some(other) = self.seen.get(bare) {
            let msg = format!(
                "{from} gives the Rust name `{bare}` {}, which is already used by {other}; rename one of them",
                self.scope
            );
            diags.push(loaded.locator.diag(path, msg));
            return;
        }
        self.seen.insert(bare.to_string(), from.to_string());
    }
}

/// Renders the Rust module for a loaded schema.
pub fn render(loaded: &Loaded, blob: &[u8], digest: &SchemaDigest) -> Result<String, Diagnostics> {
    let schema = &loaded.schema;
    let numbering = Numbering::of(schema).expect("a validated schema numbers");
    let tables = Tables::of(schema, &numbering);
    let mut diags = Vec::new();

    // Arena offsets are u16 in the runtime's tables.
    if let Some((what, total)) = tables.too_large() {
        diags.push(loaded.locator.diag(
            &[key("instances")],
            format!("the node's {what} arena would be {total} bytes; the runtime's tables address at most 65535"),
        ));
    }

    let mut top = Names::new(
        "at the top of the generated module",
        &[
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
        ],
        "the generated code",
    );
    let mut node_names = Names::new(
        "as a method of the generated Node",
        NODE_RESERVED,
        "the generated Node",
    );
    let mut array_ctx = Vec::new();
    for (ai, a) in schema.instances.iter().enumerate() {
        let base = a.ns.replace("{i}", "_");
        let method = base
            .split('_')
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("_");
        let method = if method.is_empty() {
            snake(&a.ty)
        } else {
            method
        };
        let ipath = [key("instances"), PathSeg::Index(ai), key("ns")];
        node_names.add(
            loaded,
            &mut diags,
            &method,
            &format!("instances[{ai}] (ns `{}`)", a.ns),
            &ipath,
        );
        let konst = upper(&method);
        top.add(
            loaded,
            &mut diags,
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
            module: ident(&snake(&a.ty)),
            ns: a.ns.clone(),
            konst,
            method: ident(&method),
            max_count: a.max_count,
            first_block: numbering.array_base[ai],
            desc: format!(
                "ArrayDesc {{ type_index: {ty_index}, max_count: {}, first_block: {} }}",
                a.max_count, numbering.array_base[ai]
            ),
        });
    }

    let mut type_ctx = Vec::new();
    for (ti, t) in schema.types.iter().enumerate() {
        let tt = &tables.types[ti];
        let tl = &numbering.layouts[ti];
        let tpath = vec![key("types"), key(&t.name)];
        let sub = |rest: &[&str]| {
            let mut p = tpath.clone();
            p.extend(rest.iter().map(|s| key(s)));
            p
        };
        let module = snake(&t.name);
        top.add(
            loaded,
            &mut diags,
            &module,
            &format!("type `{}` (as a module)", t.name),
            &tpath,
        );
        let params_struct = format!("{}Params", t.name);
        let mut items = Names::new(
            format!("in module `{module}`"),
            MODULE_RESERVED,
            "the generated code",
        );
        items.add(
            loaded,
            &mut diags,
            &params_struct,
            "the params struct",
            &tpath,
        );
        let mut consts = Names::new(
            format!("as a constant in module `{module}`"),
            &["TYPE_INDEX"],
            "the generated code",
        );
        let mut bits = Names::new(
            format!("as a constant of `{params_struct}`"),
            &["SIZE"],
            "the generated code",
        );
        let mut methods = Names::new(
            format!("as a method of `{module}::Handle`"),
            HANDLE_RESERVED,
            "the generated handle",
        );
        let mut handler = Names::new(
            format!("as a method of `{module}::Handler`"),
            &["on_params_changed"],
            "the generated Handler trait",
        );

        let mut params = Vec::new();
        for (pi, p) in t.params.iter().enumerate() {
            let ppath = sub(&["params", &p.name]);
            let from = format!("param `{}`", p.name);
            let konst = format!("PARAM_{}", upper(&p.name));
            consts.add(loaded, &mut diags, &konst, &from, &ppath);
            let bit = format!("{}_BIT", upper(&p.name));
            bits.add(loaded, &mut diags, &bit, &from, &ppath);
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
            let default = match p.len {
                None => value_expr(&p.default),
                Some(n) => format!("[{}; {n}]", value_expr(&p.default)),
            };
            params.push(ParamCtx {
                index: pi,
                mask: if pi == 0 { "1".into() } else { format!("1 << {pi}") },
                name: p.name.clone(),
                ident: field.ident,
                bit,
                konst,
                rust_ty: field.rust_ty,
                write: field.write,
                read: field.read,
                default,
                doc,
                desc: format!(
                    "ParamDesc {{ ty: {}, count: {}, offset: {off}, default: {}, min: {}, max: {} }}",
                    scalar_type_path(p.ty),
                    p.len.unwrap_or(1),
                    scalar_ctor(&p.default),
                    p.min.as_ref().map_or("None".into(), |m| format!("Some({})", scalar_ctor(m))),
                    p.max.as_ref().map_or("None".into(), |m| format!("Some({})", scalar_ctor(m))),
                ),
            });
        }

        let mut topics = Vec::new();
        for (i, tp) in t.topics.iter().enumerate() {
            let path = sub(&["topics", &tp.name]);
            let from = format!("topic `{}`", tp.name);
            let name = pascal(&tp.name);
            items.add(loaded, &mut diags, &name, &from, &path);
            let konst = format!("TOPIC_{}", upper(&tp.name));
            consts.add(loaded, &mut diags, &konst, &from, &path);
            let m2s = tp.dir == DataDirection::M2s;
            let method = if m2s {
                ident(&tp.name)
            } else {
                format!("publish_{}", flat_name(&tp.name))
            };
            methods.add(loaded, &mut diags, &method, &from, &path);
            check_fields(
                loaded,
                &mut diags,
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
                msg: msg_ctx(
                    name,
                    format!("Topic `{}` ({dir}, {size} bytes, {when}).", tp.name),
                    &tp.fields,
                    size,
                ),
                desc: format!(
                    "TopicDesc {{ dir: DataDirection::{}, period_us: {}, size: {size}, offset: {off}, stage_offset: {st} }}",
                    if m2s { "M2s" } else { "S2m" },
                    tp.period_us
                ),
            });
        }

        let mut services = Vec::new();
        for (i, sv) in t.services.iter().enumerate() {
            let path = sub(&["services", &sv.name]);
            let from = format!("service `{}`", sv.name);
            let base = pascal(&sv.name);
            let (req, resp) = tt.services[i];
            items.add(
                loaded,
                &mut diags,
                &format!("{base}Request"),
                &format!("{from} (request)"),
                &path,
            );
            items.add(
                loaded,
                &mut diags,
                &format!("{base}Response"),
                &format!("{from} (response)"),
                &path,
            );
            let konst = format!("SERVICE_{}", upper(&sv.name));
            consts.add(loaded, &mut diags, &konst, &from, &path);
            let method = ident(&sv.name);
            handler.add(loaded, &mut diags, &method, &from, &path);
            check_fields(
                loaded,
                &mut diags,
                &sv.request,
                &path
                    .iter()
                    .cloned()
                    .chain([key("request")])
                    .collect::<Vec<_>>(),
            );
            check_fields(
                loaded,
                &mut diags,
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
                desc: format!("ServiceDesc {{ request_size: {req}, response_size: {resp} }}"),
            });
        }
        let topic_descs: Vec<&str> = topics.iter().map(|t| t.desc.as_str()).collect();
        let param_descs: Vec<&str> = params.iter().map(|t| t.desc.as_str()).collect();
        let service_descs: Vec<&str> = services.iter().map(|t| t.desc.as_str()).collect();
        let desc = format!(
            "TypeDesc {{ name: {:?}, topics: &[{}], params: &[{}], services: &[{}], topic_bytes: {}, stage_bytes: {}, param_bytes: {} }}",
            t.name,
            topic_descs.join(", "),
            param_descs.join(", "),
            service_descs.join(", "),
            tt.topic_bytes,
            tt.stage_bytes,
            tt.param_bytes
        );
        type_ctx.push(TypeCtx {
            index: ti,
            name: t.name.clone(),
            module: ident(&module),
            params_struct,
            param_size: tt.param_bytes,
            params,
            topics,
            services,
            desc,
        });
    }

    if !diags.is_empty() {
        // One error per offending key: a name that collides as a struct usually collides
        // as a constant too.
        let mut seen = std::collections::BTreeSet::new();
        diags.retain(|d| seen.insert((d.file.clone(), d.line, d.col)));
        return Err(finish(&loaded.locator, diags));
    }

    let blocks = tables
        .blocks
        .iter()
        .map(|b| {
            format!(
                "BlockDesc {{ type_index: {}, array: {}, index: {}, topic_offset: {}, stage_offset: {}, param_offset: {}, topic_slot: {} }}",
                b.type_index, b.array, b.index, b.topic_offset, b.stage_offset, b.param_offset, b.topic_slot
            )
        })
        .collect();
    let ordinals = tables
        .blocks
        .iter()
        .map(|b| b.ordinal.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let l = &schema.limits;
    let clamp = |v: usize| v.max(1);
    let buffers = format!(
        "::fcan_runtime_nostd::Buffers<{}, {}, {}, {}, {}, {}, {}, {}, {}>",
        clamp(tables.topic_bytes),
        clamp(tables.stage_bytes),
        clamp(tables.param_bytes),
        clamp(tables.blocks.len()),
        clamp(tables.topic_slots),
        clamp(l.max_frames as usize),
        clamp(l.max_copy_entries as usize),
        clamp(l.service_reassembly as usize),
        clamp(tables.svc_buf),
    );
    let ctx = Ctx {
        version: env!("CARGO_PKG_VERSION"),
        files: loaded
            .files
            .iter()
            .map(|f| {
                let name = std::path::Path::new(f)
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| f.clone());
                comment_text(&name)
            })
            .collect(),
        node: schema.node.clone(),
        node_lit: format!("{:?}", schema.node),
        protocol: schema.protocol,
        sha256: digest.to_string(),
        blob_len: blob.len(),
        blob_lines: bytes_lines(blob, 16),
        sha_bytes: bytes_lines(&digest.0, 16).join("\n    "),
        prefix_bytes: inline_bytes(&digest.prefix().0),
        limits: format!(
            "LimitsDesc {{ max_frames: {}, max_copy_entries: {}, service_buffer: {}, service_reassembly: {} }}",
            l.max_frames, l.max_copy_entries, l.service_buffer, l.service_reassembly
        ),
        has_services: schema.types.iter().any(|t| !t.services.is_empty()),
        types: type_ctx,
        arrays: array_ctx,
        blocks,
        ordinals,
        max_counts: schema
            .instances
            .iter()
            .map(|a| a.max_count.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        topic_bytes: tables.topic_bytes,
        stage_bytes: tables.stage_bytes,
        param_bytes: tables.param_bytes,
        topic_slots: tables.topic_slots,
        max_request: tables.max_request,
        max_response: tables.max_response,
        buffers,
    };
    let mut env = minijinja::Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .expect("syntax config"),
    );
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.add_filter("indent_by", |s: String, n: usize| {
        let pad = " ".repeat(n);
        s.lines()
            .enumerate()
            .map(|(i, l)| {
                if i == 0 || l.is_empty() {
                    l.to_string()
                } else {
                    format!("{pad}{l}")
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    env.add_template("fcan_gen.rs", TEMPLATE)
        .expect("the built-in template parses");
    let out = env
        .get_template("fcan_gen.rs")
        .and_then(|t| t.render(minijinja::value::Serde(&ctx)))
        .expect("the built-in template renders");
    Ok(out + "\n")
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
