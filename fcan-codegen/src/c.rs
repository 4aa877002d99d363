//! C99 source for a node on the C API of `fcan-node-c` (`fcan.h`): `fcan-codegen c`.
//!
//! For a node `io_board{i}` it writes `fcan_io_board.h` and `fcan_io_board.c`: the
//! descriptor tables (`fcan_io_board_desc`, all `const`, so in flash), the schema blob
//! and its SHA-256, the RAM size (`FCAN_IO_BOARD_RAM_BYTES`), one struct per topic,
//! request and response with its little-endian `_pack`/`_unpack`, typed param reads,
//! topic publish/take, the service and parameter-batch dispatch to handlers the
//! application defines, and `fcan_io_board_init`.
//!
//! Every number is the Rust backend's: the layout comes from [`fcan_core::numbering`],
//! the arena offsets from [`fcan_core::arena`] (the [`crate::rust::Tables`] the Rust
//! `DESC` is written from), the service slot buffer from
//! [`fcan_core::limits::service_slot_bytes`]. Names: node `io_board{i}` gives the
//! prefix `fcan_io_board` ([`node_stem`]), a type `DigitalOut` is `digital_out`
//! ([`crate::rust::snake`]), a `/` in a param, topic or service name
//! becomes `__` ([`c_name`]), an instance array is named as the Rust `Node` method
//! names it. Names that collide, or that C or C++ reserve, are reported at the schema
//! key that produced them, as the Rust backend does.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use fcan_core::hash::SchemaDigest;
use fcan_core::ir::{BlockType, Field, Limits};
use fcan_core::msg::DataDirection;
use fcan_core::numbering::{MessageLayout, Numbering};
use fcan_core::types::{Scalar, ScalarType};
use fcan_core::validate::PathSeg;

use crate::diag::{Diagnostic, Diagnostics};
use crate::frontend::key;
use crate::inspect::scalar_text;
use crate::load::Loaded;
use crate::rust::{
    array_method, check_arena_size, comment_text, file_names, name_errors, snake, squeeze,
    type_path, Names, Tables,
};

/// What `fcan-codegen c` writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct COutput {
    /// The schema blob (`schema.bin`), as [`crate::generate`] makes it.
    pub blob: Vec<u8>,
    /// Its SHA-256.
    pub digest: SchemaDigest,
    /// `fcan_<node>`: the stem of both files and the prefix of every C name.
    pub stem: String,
    /// The header (`<stem>.h`).
    pub header: String,
    /// The source (`<stem>.c`).
    pub source: String,
}

impl COutput {
    /// `fcan_io_board.h`.
    pub fn header_file(&self) -> String {
        format!("{}.h", self.stem)
    }

    /// `fcan_io_board.c`.
    pub fn source_file(&self) -> String {
        format!("{}.c", self.stem)
    }

    /// The text of `schema.sha256`: lowercase hex and a newline.
    pub fn sha256_text(&self) -> String {
        format!("{}\n", self.digest)
    }

    /// Writes the header, the source, `schema.bin` and `schema.sha256` into `dir`
    /// (created if missing); an unchanged file is left alone. Returns the paths written.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        crate::write_files(
            dir,
            vec![
                (
                    dir.join(self.header_file()),
                    self.header.as_bytes().to_vec(),
                ),
                (
                    dir.join(self.source_file()),
                    self.source.as_bytes().to_vec(),
                ),
                (dir.join("schema.bin"), self.blob.clone()),
                (dir.join("schema.sha256"), self.sha256_text().into_bytes()),
            ],
        )
    }
}

/// Compiles a loaded schema to C. Fails only on problems that are about C: two
/// generated names that collide, a name `fcan.h` already takes.
pub fn generate(loaded: &Loaded) -> Result<COutput, Diagnostics> {
    let blob = fcan_core::blob::encode(&loaded.schema);
    let digest = SchemaDigest::of(&blob);
    let model = Model::of(loaded)?;
    let header = model.header(loaded, &blob, &digest);
    let source = model.source(loaded, &blob, &digest);
    Ok(COutput {
        blob,
        digest,
        stem: model.p.clone(),
        header,
        source,
    })
}

/// A schema name in C: `velocity/kp` → `velocity__kp`.
pub fn c_name(name: &str) -> String {
    name.replace('/', "__")
}

/// A schema name in a macro: `velocity/kp` → `VELOCITY__KP`, `sampleRate` →
/// `SAMPLE_RATE`.
pub fn c_upper(name: &str) -> String {
    name.split('/')
        .map(|p| snake(p).to_ascii_uppercase())
        .collect::<Vec<_>>()
        .join("__")
}

/// The node's part of every name: `io_board{i}` → `io_board`, `MdCtl_{i}` → `mdctl`
/// (`{i}` dropped, runs of `_` joined, lower case: what `fcan-node-c`'s CMake and make
/// integrations read from the `node:` line for the common `name{i}`).
pub fn node_stem(node: &str) -> String {
    let s = squeeze(&node.replace("{i}", "_")).to_ascii_lowercase();
    if s.is_empty() {
        "node".into()
    } else {
        s
    }
}

/// Every name `fcan.h` defines (macros, types, functions): a generated name must not be
/// one of them. `tests/c.rs` checks the list against the header.
#[rustfmt::skip]
pub const FCAN_H_NAMES: &[&str] = &[
    "FCAN_H", "FCAN_PTR64", "FCAN_PTR32", "FCAN_ABI_VERSION", "FCAN_FRAME_EXTENDED",
    "FCAN_FRAME_FD", "FCAN_FRAME_BRS", "FCAN_DIR_M2S", "FCAN_DIR_S2M",
    "FCAN_PARAM_HAS_MIN", "FCAN_PARAM_HAS_MAX", "FCAN_TYPE_BOOL", "FCAN_TYPE_U8",
    "FCAN_TYPE_I8", "FCAN_TYPE_U16", "FCAN_TYPE_I16", "FCAN_TYPE_U32", "FCAN_TYPE_I32",
    "FCAN_TYPE_U64", "FCAN_TYPE_I64", "FCAN_TYPE_F32", "FCAN_TYPE_F64",
    "FCAN_CONTROLLER_CLASSIC", "FCAN_CONTROLLER_FD", "FCAN_REPLY_OK",
    "FCAN_REPLY_ACCEPTED", "FCAN_REPLY_BUSY", "FCAN_REPLY_FAILED",
    "FCAN_REPLY_BAD_REQUEST", "FCAN_EVENT_ACKNOWLEDGED", "FCAN_EVENT_STARTED",
    "FCAN_EVENT_MASTER_LOST", "FCAN_EVENT_ID_COLLISION", "FCAN_EVENT_PLAN_RESET",
    "FCAN_OK", "FCAN_ERR_ARG", "FCAN_ERR_RAM", "FCAN_ERR_DESC", "FCAN_ERR_CONFIG",
    "FCAN_ERR_REENTRANT", "FCAN_ERR_INDEX", "FCAN_ERR_NOT_WIRED", "FCAN_ERR_DIRECTION",
    "FCAN_ERR_LENGTH", "FCAN_ERR_TOKEN", "FCAN_ERR_FRAME", "FCAN_ERR_DECODE", "FCAN_STATE_UNPROVISIONED",
    // The update build's (under FCAN_UPDATE).
    "FCAN_UPDATE", "FCAN_UPDATE_ACCEPT", "FCAN_UPDATE_LOW_BATTERY", "FCAN_UPDATE_NOT_SAFE",
    "FCAN_UPDATE_REFUSED", "fcan_node_set_update", "fcan_update_begin_fn", "fcan_update_mark_fn",
    "fcan_update_offer_t", "fcan_update_offered_fn", "fcan_update_read_fn",
    "fcan_update_reboot_fn", "fcan_update_t", "fcan_update_write_fn",
    "FCAN_STATE_PROVISIONED", "FCAN_STATE_RUNNING", "FCAN_STATE_SUSPENDED",
    "FCAN_STATE_FAULT", "FCAN_RAM_FIXED", "FCAN_RAM_PER_TYPE", "FCAN_RAM_PER_TOPIC",
    "FCAN_RAM_PER_PARAM", "FCAN_RAM_PER_SERVICE", "FCAN_RAM_PER_BLOCK",
    "FCAN_RAM_PER_ARRAY", "FCAN_RAM_PER_TOPIC_SLOT", "FCAN_RAM_PER_FRAME",
    "FCAN_RAM_PER_ENTRY", "FCAN_RAM_PER_SERVICE_SLOT", "FCAN_RAM_BYTES", "RAM_ALIGN",
    "fcan_node_t", "fcan_topic_desc_t", "fcan_param_desc_t", "fcan_service_desc_t",
    "fcan_type_desc_t", "fcan_array_desc_t", "fcan_block_desc_t", "fcan_node_desc_t",
    "fcan_frame_t", "fcan_transmit_fn", "fcan_deferred_t", "fcan_service_call_t",
    "fcan_service_fn", "fcan_params_changed_fn", "fcan_event_fn", "fcan_callbacks_t",
    "fcan_node_config_t", "fcan_topic_info_t", "fcan_counters_t", "fcan_node_ram_needed",
    "fcan_node_user", "fcan_node_init", "fcan_node_ingest", "fcan_node_poll",
    "fcan_node_poll_at", "fcan_node_publish", "fcan_node_topic", "fcan_node_param",
    "fcan_node_complete", "fcan_node_state", "fcan_node_counters", "fcan_strerror",
];

/// Words a struct member cannot be: C (C99 to C23) and C++ keywords, the macros and
/// types of the headers the generated header includes, and the macros GCC predefines
/// outside strict ISO mode. A field or param with such a name gets a `_` appended.
#[rustfmt::skip]
const MEMBER_RESERVED: &[&str] = &[
    // C
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double",
    "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
    "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
    "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "_Bool",
    "_Complex", "_Imaginary", "_Alignas", "_Alignof", "_Atomic", "_Generic", "_Noreturn",
    "_Static_assert", "_Thread_local", "_BitInt", "_Decimal32", "_Decimal64",
    "_Decimal128", "alignas", "alignof", "bool", "constexpr", "false", "nullptr",
    "static_assert", "thread_local", "true", "typeof", "typeof_unqual",
    // C++
    "and", "and_eq", "asm", "bitand", "bitor", "catch", "char8_t", "char16_t", "char32_t",
    "class", "co_await", "co_return", "co_yield", "compl", "concept", "const_cast",
    "consteval", "constinit", "decltype", "delete", "dynamic_cast", "explicit", "export",
    "friend", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "operator", "or",
    "or_eq", "private", "protected", "public", "reinterpret_cast", "requires",
    "static_cast", "template", "this", "throw", "try", "typeid", "typename", "using",
    "virtual", "wchar_t", "xor", "xor_eq",
    // <stddef.h>, <string.h>, <stdbool.h>
    "NULL", "offsetof", "size_t", "ptrdiff_t", "__bool_true_false_are_defined",
    // <stdint.h> types (the scalar types' names must keep their meaning in C++ class
    // scope) and the macros not built below
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
    "uint64_t", "intptr_t", "uintptr_t", "intmax_t", "uintmax_t", "INTPTR_MIN",
    "INTPTR_MAX", "UINTPTR_MAX", "INTMAX_MIN", "INTMAX_MAX", "UINTMAX_MAX", "INTMAX_C",
    "UINTMAX_C", "PTRDIFF_MIN", "PTRDIFF_MAX", "SIG_ATOMIC_MIN", "SIG_ATOMIC_MAX",
    "SIZE_MAX", "WCHAR_MIN", "WCHAR_MAX", "WINT_MIN", "WINT_MAX",
    // GCC without -std=c99
    "linux", "unix", "i386",
];

/// Whether `name` is one of `<stdint.h>`'s width macros (`INT8_MAX`, `UINT_LEAST16_MAX`,
/// `INT32_C` …).
fn is_stdint_macro(name: &str) -> bool {
    let body = name.strip_prefix('U').unwrap_or(name);
    let Some(rest) = body.strip_prefix("INT") else {
        return false;
    };
    let rest = rest
        .strip_prefix("_LEAST")
        .or_else(|| rest.strip_prefix("_FAST"))
        .unwrap_or(rest);
    let digits = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    digits.len() < rest.len() && matches!(digits, "_MIN" | "_MAX" | "_C")
}

/// The C type of a scalar type.
pub fn c_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::Bool => "bool",
        ScalarType::U8 => "uint8_t",
        ScalarType::I8 => "int8_t",
        ScalarType::U16 => "uint16_t",
        ScalarType::I16 => "int16_t",
        ScalarType::U32 => "uint32_t",
        ScalarType::I32 => "int32_t",
        ScalarType::U64 => "uint64_t",
        ScalarType::I64 => "int64_t",
        ScalarType::F32 => "float",
        ScalarType::F64 => "double",
    }
}

/// The `FCAN_TYPE_*` macro of a scalar type.
fn type_macro(ty: ScalarType) -> String {
    format!("FCAN_TYPE_{}", ty.name().to_ascii_uppercase())
}

/// A value as the C tables hold it: its packed little-endian bytes in the low bytes of
/// a `uint64_t` (`1.5f32` → `0x3FC00000`), as `fcan-node-c` reads it back.
pub fn value_bits(v: &Scalar) -> u64 {
    let mut b = [0u8; 8];
    v.write(&mut b).expect("a scalar is at most 8 bytes");
    u64::from_le_bytes(b)
}

/// Text safe inside a `/* */` comment: no control characters, no `*/` or `/*`, no
/// trigraph.
fn c_comment(s: &str) -> String {
    comment_text(s)
        .replace("*/", "*\\/")
        .replace("/*", "/\\*")
        .replace("??", "?\\?")
}

// ---------------------------------------------------------------- the model

/// A field of a message (or a param), as C sees it.
struct CField {
    /// The schema name.
    name: String,
    /// The struct member.
    member: String,
    ty: ScalarType,
    len: Option<u32>,
    /// Byte offset in the packed message.
    offset: usize,
}

impl CField {
    /// The member declaration: `float gain[16]`.
    fn decl(&self) -> String {
        match self.len {
            Some(n) => format!("{} {}[{n}]", c_type(self.ty), self.member),
            None => format!("{} {}", c_type(self.ty), self.member),
        }
    }
}

/// One topic value, request or response: its struct and codec.
struct CMsg {
    /// What it is, for comments ("topic `state` (s2m, 2 bytes, …)").
    doc: String,
    /// `fcan_io_board_digital_out_state_t`.
    ty: String,
    /// `FCAN_IO_BOARD_DIGITAL_OUT_STATE_SIZE`.
    size_macro: String,
    size: usize,
    pack: String,
    unpack: String,
    fields: Vec<CField>,
}

struct CTopic {
    index: usize,
    m2s: bool,
    period_us: u32,
    offset: usize,
    stage_offset: usize,
    index_macro: String,
    /// `..._publish_<topic>` (s2m) or `..._take_<topic>` (m2s).
    func: String,
    msg: CMsg,
}

struct CService {
    index: usize,
    name: String,
    index_macro: String,
    /// The application's handler.
    handler: String,
    complete: String,
    /// The static function that decodes, calls the handler and encodes.
    call: String,
    request: CMsg,
    response: CMsg,
}

struct CParam {
    index: usize,
    field: CField,
    size: usize,
    offset: usize,
    default: Scalar,
    min: Option<Scalar>,
    max: Option<Scalar>,
    macro_: String,
    func: String,
    doc: String,
}

struct CType {
    index: usize,
    name: String,
    index_macro: String,
    topics_table: String,
    params_table: String,
    services_table: String,
    params_struct: String,
    params_fn: String,
    changed_fn: String,
    params: Vec<CParam>,
    topics: Vec<CTopic>,
    services: Vec<CService>,
    topic_bytes: usize,
    stage_bytes: usize,
    param_bytes: usize,
}

struct CArray {
    ns: String,
    ty: String,
    type_index: usize,
    max_count: u32,
    first_block: u8,
    count_macro: String,
    block_macro: String,
}

/// Everything the two files are written from.
struct Model {
    /// `fcan_io_board`.
    p: String,
    /// `FCAN_IO_BOARD`.
    m: String,
    types: Vec<CType>,
    arrays: Vec<CArray>,
    tables: Tables,
    limits: Limits,
    has_services: bool,
    has_params: bool,
}

/// Collects the model's names and the problems with them.
struct Namer<'a> {
    loaded: &'a Loaded,
    global: Names,
    diags: Vec<Diagnostic>,
}

impl Namer<'_> {
    fn add(&mut self, name: &str, from: &str, path: &[PathSeg]) -> String {
        self.global
            .add(self.loaded, &mut self.diags, name, from, path);
        name.to_string()
    }

    /// Struct members for `fields` (schema names, a `_` appended to reserved words),
    /// each member once per struct.
    fn members(&mut self, st: &str, fields: &[(String, PathSeg)], base: &[PathSeg]) -> Vec<String> {
        let mut scope = Names::of_lang("C", &[], format!("in struct `{st}`"), &[], "");
        let mut out = Vec::new();
        for (name, seg) in fields {
            let mut member = c_name(name);
            while MEMBER_RESERVED.contains(&member.as_str())
                || is_stdint_macro(&member)
                || self.global.contains(&member)
            {
                member.push('_');
            }
            let mut path = base.to_vec();
            path.push(seg.clone());
            scope.add(
                self.loaded,
                &mut self.diags,
                &member,
                &format!("`{name}`"),
                &path,
            );
            out.push(member);
        }
        out
    }
}

impl Model {
    fn of(loaded: &Loaded) -> Result<Model, Diagnostics> {
        let schema = &loaded.schema;
        let numbering = Numbering::of(schema).expect("a validated schema numbers");
        let tables = Tables::of(schema, &numbering);
        let stem = node_stem(&schema.node);
        let p = format!("fcan_{stem}");
        let m = p.to_ascii_uppercase();
        let mut n = Namer {
            loaded,
            global: Names::of_lang("C", &[], "in the generated C", FCAN_H_NAMES, "fcan.h"),
            diags: Vec::new(),
        };
        check_arena_size(loaded, &tables, &mut n.diags);
        let node = [key("node")];
        let from = format!("node `{}`", schema.node);
        for name in [
            format!("{m}_H_INCLUDED"),
            format!("{m}_ARRAYS"),
            format!("{m}_RAM_BYTES"),
            format!("{m}_SCHEMA_BLOB_LEN"),
            format!("{p}_ram_t"),
            format!("{p}_config_t"),
            format!("{p}_init"),
            format!("{p}_desc"),
            format!("{p}_schema_blob"),
            format!("{p}_schema_sha256"),
            format!("{p}__types"),
            format!("{p}__arrays"),
            format!("{p}__blocks"),
            format!("{p}__service"),
            format!("{p}__params_changed"),
            format!("{p}__float_is_binary32"),
            format!("{p}__double_is_binary64"),
        ] {
            n.add(&name, &from, &node);
        }
        for ty in ScalarType::ALL {
            for dir in ["put", "get"] {
                n.add(&format!("{p}__{dir}_{}", ty.name()), &from, &node);
            }
        }
        let arrays = schema
            .instances
            .iter()
            .enumerate()
            .map(|(ai, a)| {
                let konst = array_method(a).to_ascii_uppercase();
                let path = [key("instances"), PathSeg::Index(ai), key("ns")];
                let from = format!("instances[{ai}] (ns `{}`)", a.ns);
                CArray {
                    ns: a.ns.clone(),
                    ty: a.ty.clone(),
                    type_index: schema
                        .types
                        .iter()
                        .position(|t| t.name == a.ty)
                        .unwrap_or(0),
                    max_count: a.max_count,
                    first_block: numbering.array_base[ai],
                    count_macro: n.add(&format!("{m}_{konst}_MAX_COUNT"), &from, &path),
                    block_macro: n.add(&format!("{m}_{konst}"), &from, &path),
                }
            })
            .collect();
        let mut types = Vec::new();
        for (ti, t) in schema.types.iter().enumerate() {
            types.push(type_model(&mut n, &p, &m, &numbering, &tables, ti, t));
        }
        if !n.diags.is_empty() {
            return Err(name_errors(loaded, n.diags));
        }
        Ok(Model {
            has_services: types.iter().any(|t| !t.services.is_empty()),
            has_params: types.iter().any(|t| !t.params.is_empty()),
            p,
            m,
            types,
            arrays,
            tables,
            limits: schema.limits,
        })
    }
}

/// One type's names, layouts and table rows.
fn type_model(
    n: &mut Namer<'_>,
    p: &str,
    m: &str,
    numbering: &Numbering,
    tables: &Tables,
    ti: usize,
    t: &BlockType,
) -> CType {
    let tt = &tables.types[ti];
    let tl = &numbering.layouts[ti];
    let lower = snake(&t.name);
    let upper = lower.to_ascii_uppercase();
    let tpath = type_path(t, &[]);
    let from = format!("type `{}`", t.name);
    let tp = format!("{p}_{lower}");
    let tm = format!("{m}_{upper}");
    let index_macro = n.add(&format!("{tm}_TYPE_INDEX"), &from, &tpath);
    let topics_table = n.add(&format!("{p}__{lower}_topics"), &from, &tpath);
    let params_table = n.add(&format!("{p}__{lower}_params"), &from, &tpath);
    let services_table = n.add(&format!("{p}__{lower}_services"), &from, &tpath);
    let (params_struct, params_fn, changed_fn) = if t.params.is_empty() {
        Default::default()
    } else {
        (
            n.add(&format!("{tp}_params_t"), &from, &tpath),
            n.add(&format!("{tp}_params"), &from, &tpath),
            n.add(&format!("{tp}_params_changed"), &from, &tpath),
        )
    };

    // Params.
    let mut params = Vec::new();
    let pfields: Vec<(String, PathSeg)> = t
        .params
        .iter()
        .map(|q| (q.name.clone(), key(&q.name)))
        .collect();
    for (pi, q) in t.params.iter().enumerate() {
        let path = type_path(t, &["params", &q.name]);
        let from = format!("param `{}`", q.name);
        let macro_ = n.add(&format!("{tm}_PARAM_{}", c_upper(&q.name)), &from, &path);
        let func = n.add(&format!("{tp}_param_{}", c_name(&q.name)), &from, &path);
        let (size, offset) = tt.params[pi];
        debug_assert_eq!(size, tl.param_sizes[pi]);
        let mut doc = format!("`{}`: {}", q.name, q.ty);
        if let Some(len) = q.len {
            doc.push_str(&format!("[{len}]"));
        }
        doc.push_str(&format!(", default {}", scalar_text(&q.default)));
        if let Some(v) = &q.min {
            doc.push_str(&format!(", min {}", scalar_text(v)));
        }
        if let Some(v) = &q.max {
            doc.push_str(&format!(", max {}", scalar_text(v)));
        }
        params.push(CParam {
            index: pi,
            field: CField {
                name: q.name.clone(),
                member: String::new(),
                ty: q.ty,
                len: q.len,
                offset: 0,
            },
            size,
            offset,
            default: q.default,
            min: q.min,
            max: q.max,
            macro_,
            func,
            doc: c_comment(&doc),
        });
    }

    // Topics.
    let mut topics = Vec::new();
    for (i, tp_) in t.topics.iter().enumerate() {
        let path = type_path(t, &["topics", &tp_.name]);
        let from = format!("topic `{}`", tp_.name);
        let name = c_name(&tp_.name);
        let m2s = tp_.dir == DataDirection::M2s;
        let index_macro = n.add(&format!("{tm}_TOPIC_{}", c_upper(&tp_.name)), &from, &path);
        let func = if m2s {
            n.add(&format!("{tp}_take_{name}"), &from, &path)
        } else {
            n.add(&format!("{tp}_publish_{name}"), &from, &path)
        };
        let (size, offset, stage_offset) = tt.topics[i];
        let dir = if m2s { "m2s" } else { "s2m" };
        let when = match (m2s, tp_.period_us) {
            (true, _) => "sent by the master".to_string(),
            (false, 0) => "sent once per publish".to_string(),
            (false, p) => format!("sent every {p} us"),
        };
        let doc = format!("Topic `{}` ({dir}, {size} bytes, {when})", tp_.name);
        let msg = msg_model(
            n,
            &format!("{tp}_{name}"),
            &format!("{tm}_{}", c_upper(&tp_.name)),
            c_comment(&doc),
            &tp_.fields,
            &tl.topics[i],
            &from,
            &path,
        );
        debug_assert_eq!(msg.size, size);
        topics.push(CTopic {
            index: i,
            m2s,
            period_us: tp_.period_us,
            offset,
            stage_offset,
            index_macro,
            func,
            msg,
        });
    }

    // Services.
    let mut services = Vec::new();
    for (i, sv) in t.services.iter().enumerate() {
        let path = type_path(t, &["services", &sv.name]);
        let from = format!("service `{}`", sv.name);
        let name = c_name(&sv.name);
        let up = c_upper(&sv.name);
        let index_macro = n.add(&format!("{tm}_SERVICE_{up}"), &from, &path);
        let handler = n.add(&format!("{tp}_{name}"), &from, &path);
        let complete = n.add(&format!("{tp}_{name}_complete"), &from, &path);
        let call = n.add(&format!("{p}__call_{lower}_{name}"), &from, &path);
        let (req, resp) = tt.services[i];
        let request = msg_model(
            n,
            &format!("{tp}_{name}_request"),
            &format!("{tm}_{up}_REQUEST"),
            c_comment(&format!("Request of service `{}` ({req} bytes)", sv.name)),
            &sv.request,
            &tl.requests[i],
            &format!("{from} (request)"),
            &path,
        );
        let response = msg_model(
            n,
            &format!("{tp}_{name}_response"),
            &format!("{tm}_{up}_RESPONSE"),
            c_comment(&format!("Response of service `{}` ({resp} bytes)", sv.name)),
            &sv.response,
            &tl.responses[i],
            &format!("{from} (response)"),
            &path,
        );
        services.push(CService {
            index: i,
            name: sv.name.clone(),
            index_macro,
            handler,
            complete,
            call,
            request,
            response,
        });
    }

    // Members last: a member must not be any global name (a macro would replace it).
    let members = n.members(&params_struct, &pfields, &type_path(t, &["params"]));
    for (q, member) in params.iter_mut().zip(members) {
        q.field.member = member;
    }
    for tp_ in &mut topics {
        let path = type_path(t, &["topics", &t.topics[tp_.index].name, "fields"]);
        set_members(n, &mut tp_.msg, &path);
    }
    for s in &mut services {
        let base = type_path(t, &["services", &s.name]);
        let mut req = base.clone();
        req.push(key("request"));
        set_members(n, &mut s.request, &req);
        let mut resp = base;
        resp.push(key("response"));
        set_members(n, &mut s.response, &resp);
    }

    CType {
        index: ti,
        name: t.name.clone(),
        index_macro,
        topics_table,
        params_table,
        services_table,
        params_struct,
        params_fn,
        changed_fn,
        params,
        topics,
        services,
        topic_bytes: tt.topic_bytes,
        stage_bytes: tt.stage_bytes,
        param_bytes: tt.param_bytes,
    }
}

fn set_members(n: &mut Namer<'_>, msg: &mut CMsg, base: &[PathSeg]) {
    let fields: Vec<(String, PathSeg)> = msg
        .fields
        .iter()
        .map(|f| (f.name.clone(), key(&f.name)))
        .collect();
    let members = n.members(&msg.ty, &fields, base);
    for (f, member) in msg.fields.iter_mut().zip(members) {
        f.member = member;
    }
}

/// A message's struct, macros and codec names; members are set later.
#[allow(clippy::too_many_arguments)]
fn msg_model(
    n: &mut Namer<'_>,
    base: &str,
    macro_base: &str,
    doc: String,
    fields: &[Field],
    layout: &MessageLayout,
    from: &str,
    path: &[PathSeg],
) -> CMsg {
    CMsg {
        doc,
        ty: n.add(&format!("{base}_t"), from, path),
        size_macro: n.add(&format!("{macro_base}_SIZE"), from, path),
        size: layout.size,
        pack: n.add(&format!("{base}_pack"), from, path),
        unpack: n.add(&format!("{base}_unpack"), from, path),
        fields: fields
            .iter()
            .zip(&layout.fields)
            .map(|(f, l)| CField {
                name: f.name.clone(),
                member: String::new(),
                ty: f.ty,
                len: f.len,
                offset: l.offset,
            })
            .collect(),
    }
}

// ---------------------------------------------------------------- the header

/// Lines of a block comment, each `indent` deep.
fn comment(out: &mut String, indent: &str, lines: &[String]) {
    if lines.len() == 1 {
        let _ = writeln!(out, "{indent}/* {} */", lines[0]);
        return;
    }
    let _ = writeln!(out, "{indent}/*");
    for l in lines {
        if l.is_empty() {
            let _ = writeln!(out, "{indent} *");
        } else {
            let _ = writeln!(out, "{indent} * {l}");
        }
    }
    let _ = writeln!(out, "{indent} */");
}

fn banner(out: &mut String, title: &str) {
    let _ = writeln!(out, "\n/* ---- {title} ---- */\n");
}

impl Model {
    /// The comment both files start with.
    fn preamble(&self, loaded: &Loaded, file: &str, blob: &[u8], digest: &SchemaDigest) -> String {
        let mut out = String::new();
        comment(
            &mut out,
            "",
            &[
                format!(
                    "{file}: generated by fcan-codegen {} (`fcan-codegen c`). Do not edit:",
                    env!("CARGO_PKG_VERSION")
                ),
                "change the schema and generate again.".into(),
                String::new(),
                format!(
                    "Node `{}`, protocol {}, from: {}.",
                    c_comment(&loaded.schema.node),
                    loaded.schema.protocol,
                    file_names(loaded)
                        .iter()
                        .map(|f| c_comment(f))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                format!("Schema blob: {} bytes, SHA-256 {digest}.", blob.len()),
            ],
        );
        out
    }

    fn header(&self, loaded: &Loaded, blob: &[u8], digest: &SchemaDigest) -> String {
        let (p, m) = (&self.p, &self.m);
        let mut h = self.preamble(loaded, &format!("{p}.h"), blob, digest);
        comment(
            &mut h,
            "",
            &[
                "The node's C API over fcan.h (docs/firmware-c.md): its descriptor, RAM size and"
                    .into(),
                format!("`{p}_init`; per block type the message structs with `_pack`/`_unpack`"),
                "(little-endian, fields back to back, as the wire carries them), typed param"
                    .into(),
                "reads, topic publish/take, and the handlers the application must define (a".into(),
                "missing one is a link error). Blocks are numbered as the schema's instance".into(),
                format!("arrays list them (`{m}_<NS>(i)`); topic, param and service indices are"),
                "schema order within the type. Every function returning int32_t returns FCAN_OK"
                    .into(),
                "(or a byte count, for `_pack`/`_unpack`) or a negative error.".into(),
            ],
        );
        let _ = writeln!(h, "\n#ifndef {m}_H_INCLUDED\n#define {m}_H_INCLUDED\n");
        h.push_str("#include <stdbool.h>\n#include <stdint.h>\n\n#include \"fcan.h\"\n\n");
        h.push_str("#ifdef __cplusplus\nextern \"C\" {\n#endif\n");

        banner(&mut h, "The node");
        self.header_node(&mut h, blob);
        for t in &self.types {
            banner(&mut h, &format!("Block type {}", t.name));
            self.header_type(&mut h, t);
        }
        h.push_str("\n#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n");
        let _ = writeln!(h, "\n#endif  /* {m}_H_INCLUDED */");
        h
    }

    fn header_node(&self, h: &mut String, blob: &[u8]) {
        let (p, m) = (&self.p, &self.m);
        let t = &self.tables;
        comment(
            h,
            "",
            &["Instance arrays (their `counts` in the config).".into()],
        );
        let _ = writeln!(h, "#define {m}_ARRAYS {}", self.arrays.len());
        for (ai, a) in self.arrays.iter().enumerate() {
            let last = a.first_block as u32 + a.max_count - 1;
            comment(
                h,
                "",
                &[format!(
                    "Array {ai}: `{}`, type {}, at most {} (blocks {}..{last}); `{}(i)` is the block number of instance i.",
                    a.ns, a.ty, a.max_count, a.first_block, a.block_macro
                )],
            );
            let _ = writeln!(h, "#define {} {}", a.count_macro, a.max_count);
            let _ = writeln!(
                h,
                "#define {}(i) ((uint8_t)({} + (i)))",
                a.block_macro, a.first_block
            );
        }
        let count = |f: &dyn Fn(&CType) -> usize| self.types.iter().map(f).sum::<usize>();
        let svc_slots = if self.has_services {
            self.limits.service_reassembly.max(1)
        } else {
            0
        };
        let svc_buf = if self.has_services { t.svc_buf } else { 0 };
        h.push('\n');
        comment(
            h,
            "",
            &[
                "RAM the node needs: an upper bound of fcan_node_ram_needed(&".to_string()
                    + p
                    + "_desc)",
                format!("on any target. Give `{p}_init` a `{p}_ram_t` (static, 8-byte aligned)."),
            ],
        );
        let _ = writeln!(
            h,
            "#define {m}_RAM_BYTES FCAN_RAM_BYTES({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {})",
            self.types.len(),
            count(&|t| t.topics.len()),
            count(&|t| t.params.len()),
            count(&|t| t.services.len()),
            t.blocks.len(),
            self.arrays.len(),
            t.topic_bytes,
            t.stage_bytes,
            t.param_bytes,
            t.topic_slots,
            self.limits.max_frames,
            self.limits.max_copy_entries,
            svc_slots,
            svc_buf
        );
        let _ = writeln!(
            h,
            "typedef struct {{\n    uint64_t words[({m}_RAM_BYTES + 7) / 8];\n}} {p}_ram_t;\n"
        );
        comment(
            h,
            "",
            &["How a board boots the node (see fcan_node_config_t).".into()],
        );
        h.push_str("typedef struct {\n");
        h.push_str("    /* This node's id on the bus, 1..=127. */\n    uint8_t node_id;\n");
        h.push_str(
            "    /* FCAN_CONTROLLER_CLASSIC or FCAN_CONTROLLER_FD. */\n    uint8_t controller;\n",
        );
        h.push_str(
            "    /* Random per boot (a hardware RNG, ADC noise). */\n    uint32_t boot_id;\n",
        );
        if self.arrays.is_empty() {
            h.push_str(
                "    /* Unused: the node has no instance arrays. */\n    uint8_t counts[1];\n",
            );
        } else {
            let _ = writeln!(
                h,
                "    /* Instances wired per array, each <= its _MAX_COUNT ({}). */\n    uint8_t counts[{m}_ARRAYS];",
                self.arrays
                    .iter()
                    .map(|a| a.count_macro.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        h.push_str("    /* Required: hands a frame to the CAN controller. */\n    fcan_transmit_fn transmit;\n");
        h.push_str("    /* Optional (NULL): events (FCAN_EVENT_*). */\n    fcan_event_fn event;\n");
        h.push_str("    /* Passed back to `transmit` and `event`. */\n    void *user;\n");
        let _ = writeln!(h, "}} {p}_config_t;\n");
        comment(
            h,
            "",
            &[
                "Builds and boots the node in `ram` with this schema's descriptor and the".into(),
                "generated service and parameter dispatch. NULL on error, with the FCAN_ERR_*"
                    .into(),
                "in `*error` (when not NULL). Call again on the same area to reboot.".into(),
            ],
        );
        let _ = writeln!(
            h,
            "fcan_node_t *{p}_init({p}_ram_t *ram, const {p}_config_t *config, int32_t *error);\n"
        );
        comment(h, "", &["The node's descriptor (const, in flash).".into()]);
        let _ = writeln!(h, "extern const fcan_node_desc_t {p}_desc;");
        comment(
            h,
            "",
            &["The schema blob the node serves to the master, and its SHA-256.".into()],
        );
        let _ = writeln!(h, "#define {m}_SCHEMA_BLOB_LEN {}", blob.len());
        let _ = writeln!(h, "extern const uint8_t {p}_schema_blob[];");
        let _ = writeln!(h, "extern const uint8_t {p}_schema_sha256[32];");
    }

    fn header_msg(&self, h: &mut String, msg: &CMsg) {
        h.push('\n');
        comment(h, "", &[format!("{}.", msg.doc)]);
        h.push_str("typedef struct {\n");
        if msg.fields.is_empty() {
            h.push_str("    uint8_t reserved; /* C has no empty struct; not sent */\n");
        }
        for f in &msg.fields {
            let _ = writeln!(h, "    {};", f.decl());
        }
        let _ = writeln!(h, "}} {};", msg.ty);
        let _ = writeln!(h, "#define {} {}", msg.size_macro, msg.size);
        let _ = writeln!(
            h,
            "/* Packs `*m` into `out` ({} bytes); returns {}, or -1 for a NULL pointer. */",
            msg.size_macro, msg.size
        );
        let _ = writeln!(
            h,
            "int32_t {}(const {} *m, uint8_t *out);",
            msg.pack, msg.ty
        );
        let _ = writeln!(
            h,
            "/* Unpacks `in` ({} bytes) into `*m`; returns {}, or -1 for a NULL pointer or a bool byte other than 0 and 1. */",
            msg.size_macro, msg.size
        );
        let _ = writeln!(
            h,
            "int32_t {}({} *m, const uint8_t *in);",
            msg.unpack, msg.ty
        );
    }

    fn header_type(&self, h: &mut String, t: &CType) {
        let _ = writeln!(h, "#define {} {}", t.index_macro, t.index);
        for tp in &t.topics {
            let _ = writeln!(h, "#define {} {}", tp.index_macro, tp.index);
        }
        for s in &t.services {
            let _ = writeln!(h, "#define {} {}", s.index_macro, s.index);
        }
        for tp in &t.topics {
            self.header_msg(h, &tp.msg);
            if tp.m2s {
                comment(
                    h,
                    "",
                    &[
                        "The last complete value from the master, decoded into `*out`; its".into(),
                        "generation and time into `*info` (may be NULL). FCAN_OK, also before the".into(),
                        "first value: then `*out` is all zero and info->generation is 0. Errors as".into(),
                        "fcan_node_topic; FCAN_ERR_DECODE (and `*out` zero) if the bytes do not decode.".into(),
                    ],
                );
                let _ = writeln!(
                    h,
                    "int32_t {}(fcan_node_t *node, uint8_t block, {} *out, fcan_topic_info_t *info);",
                    tp.func, tp.msg.ty
                );
            } else {
                comment(
                    h,
                    "",
                    &["Packs `*msg` and publishes it (fcan_node_publish).".into()],
                );
                let _ = writeln!(
                    h,
                    "int32_t {}(fcan_node_t *node, uint8_t block, const {} *msg);",
                    tp.func, tp.msg.ty
                );
            }
        }
        for s in &t.services {
            self.header_msg(h, &s.request);
            self.header_msg(h, &s.response);
            h.push('\n');
            comment(
                h,
                "",
                &[
                    format!("Handler of service `{}` (the application defines it): `*request` is", c_comment(&s.name)),
                    "decoded (a request that does not decode never gets here), `*response` zeroed.".into(),
                    "Fill it and return FCAN_REPLY_OK; or copy `*token`, return FCAN_REPLY_ACCEPTED".into(),
                    format!("and answer later with {}; or return FCAN_REPLY_BUSY", s.complete),
                    "or FCAN_REPLY_FAILED. Runs inside fcan_node_poll.".into(),
                ],
            );
            let _ = writeln!(
                h,
                "int32_t {}(fcan_node_t *node, uint8_t block, const {} *request, {} *response, const fcan_deferred_t *token);",
                s.handler, s.request.ty, s.response.ty
            );
            comment(
                h,
                "",
                &["Completes a deferred call of this service with its response (fcan_node_complete); FCAN_ERR_TOKEN for a token of another service.".into()],
            );
            let _ = writeln!(
                h,
                "int32_t {}(fcan_node_t *node, const fcan_deferred_t *token, const {} *response);",
                s.complete, s.response.ty
            );
        }
        if t.params.is_empty() {
            return;
        }
        h.push('\n');
        comment(
            h,
            "",
            &["Params: each macro is its index and its bit in `changed`.".into()],
        );
        for q in &t.params {
            let _ = writeln!(h, "#define {} {}", q.macro_, q.index);
        }
        h.push_str("typedef struct {\n");
        for q in &t.params {
            let _ = writeln!(h, "    /* {}. */\n    {};", q.doc, q.field.decl());
        }
        let _ = writeln!(h, "}} {};", t.params_struct);
        comment(
            h,
            "",
            &[
                "Every param's current value (the schema defaults until the master sets them)."
                    .into(),
            ],
        );
        let _ = writeln!(
            h,
            "int32_t {}(fcan_node_t *node, uint8_t block, {} *out);",
            t.params_fn, t.params_struct
        );
        comment(
            h,
            "",
            &["One param's current value (an array param: every element) into `out`.".into()],
        );
        for q in &t.params {
            let out = match q.field.len {
                Some(len) => format!("{} out[{len}]", c_type(q.field.ty)),
                None => format!("{} *out", c_type(q.field.ty)),
            };
            let _ = writeln!(
                h,
                "int32_t {}(fcan_node_t *node, uint8_t block, {out});",
                q.func
            );
        }
        comment(
            h,
            "",
            &[
                "The application defines it: a batch of param writes to `block` ended; bit i of".into(),
                format!("`changed` is set for each param i written. Runs inside fcan_node_poll (read them with {}).", t.params_fn),
            ],
        );
        let _ = writeln!(
            h,
            "void {}(fcan_node_t *node, uint8_t block, uint32_t changed);",
            t.changed_fn
        );
    }
}

// ---------------------------------------------------------------- the source

/// How one element is read or written: `buf[idx]` is its first byte.
struct Elem<'a> {
    ty: ScalarType,
    buf: &'a str,
    idx: String,
}

impl Elem<'_> {
    /// A pointer to the element's first byte.
    fn ptr(&self) -> String {
        if self.idx == "0u" {
            self.buf.to_string()
        } else {
            format!("{} + {}", self.buf, self.idx)
        }
    }
}

/// The element positions of a field: one for a scalar, a loop index for a fixed array.
fn elem_index(f: &CField) -> String {
    match f.len {
        None => format!("{}u", f.offset),
        Some(_) => {
            let size = f.ty.size();
            let step = if size == 1 {
                "i".to_string()
            } else {
                format!("{size}u * i")
            };
            if f.offset == 0 {
                step
            } else {
                format!("{}u + {step}", f.offset)
            }
        }
    }
}

/// The source's helper functions a message or param codec calls.
#[derive(Default)]
struct Helpers {
    put: BTreeSet<ScalarType>,
    get: BTreeSet<ScalarType>,
}

impl Helpers {
    /// A statement writing `val` as element `e`.
    fn put(&mut self, p: &str, e: &Elem<'_>, val: &str) -> String {
        match e.ty {
            ScalarType::Bool => format!("{}[{}] = (uint8_t)({val} ? 1u : 0u);", e.buf, e.idx),
            ScalarType::U8 => format!("{}[{}] = {val};", e.buf, e.idx),
            ScalarType::I8 => format!("{}[{}] = (uint8_t){val};", e.buf, e.idx),
            ty => {
                self.put.insert(ty);
                format!("{p}__put_{}({}, {val});", ty.name(), e.ptr())
            }
        }
    }

    /// Statements reading element `e` into `dst`; a bool byte other than 0 and 1
    /// returns `fail`.
    fn get(&mut self, p: &str, e: &Elem<'_>, dst: &str, fail: &str) -> String {
        match e.ty {
            ScalarType::Bool => format!(
                "if ({b}[{i}] > 1u) {{\n    return {fail};\n}}\n{dst} = {b}[{i}] != 0u;",
                b = e.buf,
                i = e.idx
            ),
            ScalarType::U8 => format!("{dst} = {}[{}];", e.buf, e.idx),
            ty => {
                self.get.insert(ty);
                format!("{dst} = {p}__get_{}({});", ty.name(), e.ptr())
            }
        }
    }

    /// The helpers used, with the ones they call, as C.
    fn render(&self, p: &str) -> String {
        use ScalarType as S;
        let base = |t: S| match t {
            S::I16 | S::U16 => Some(S::U16),
            S::I32 | S::U32 | S::F32 => Some(S::U32),
            S::I64 | S::U64 | S::F64 => Some(S::U64),
            _ => None,
        };
        let mut put: BTreeSet<S> = self.put.clone();
        put.extend(self.put.iter().filter_map(|t| base(*t)));
        let mut get: BTreeSet<S> = self.get.clone();
        get.extend(self.get.iter().filter_map(|t| base(*t)));
        let mut out = String::new();
        let floats = |s: &BTreeSet<S>, t: S| s.contains(&t);
        if floats(&put, S::F32) || floats(&get, S::F32) {
            let _ = writeln!(
                out,
                "/* f32 is IEEE-754 binary32 on the wire: so must `float` be. */\n#if FLT_MANT_DIG != 24 || FLT_MAX_EXP != 128\n#error \"fcan: float is not IEEE-754 binary32\"\n#endif\ntypedef char {p}__float_is_binary32[(sizeof(float) == 4u) ? 1 : -1];\n"
            );
        }
        if floats(&put, S::F64) || floats(&get, S::F64) {
            let _ = writeln!(
                out,
                "/* f64 is IEEE-754 binary64 on the wire: so must `double` be. */\n#if DBL_MANT_DIG != 53 || DBL_MAX_EXP != 1024\n#error \"fcan: double is not IEEE-754 binary64\"\n#endif\ntypedef char {p}__double_is_binary64[(sizeof(double) == 8u) ? 1 : -1];\n"
            );
        }
        let bytes = |n: usize| -> String {
            (0..n)
                .map(|k| {
                    if k == 0 {
                        "    out[0] = (uint8_t)(v & 0xFFu);\n".to_string()
                    } else {
                        format!("    out[{k}] = (uint8_t)((v >> {}) & 0xFFu);\n", 8 * k)
                    }
                })
                .collect()
        };
        for t in [S::U16, S::U32, S::U64] {
            if put.contains(&t) {
                let _ = writeln!(
                    out,
                    "static void {p}__put_{n}(uint8_t *out, {c} v)\n{{\n{b}}}\n",
                    n = t.name(),
                    c = c_type(t),
                    b = bytes(t.size())
                );
            }
        }
        for (t, u) in [(S::I16, S::U16), (S::I32, S::U32), (S::I64, S::U64)] {
            if put.contains(&t) {
                let _ = writeln!(
                    out,
                    "static void {p}__put_{n}(uint8_t *out, {c} v)\n{{\n    {p}__put_{un}(out, ({uc})v);\n}}\n",
                    n = t.name(),
                    c = c_type(t),
                    un = u.name(),
                    uc = c_type(u)
                );
            }
        }
        for (t, u) in [(S::F32, S::U32), (S::F64, S::U64)] {
            if put.contains(&t) {
                let _ = writeln!(
                    out,
                    "static void {p}__put_{n}(uint8_t *out, {c} v)\n{{\n    {uc} bits;\n    memcpy(&bits, &v, sizeof bits);\n    {p}__put_{un}(out, bits);\n}}\n",
                    n = t.name(),
                    c = c_type(t),
                    un = u.name(),
                    uc = c_type(u)
                );
            }
        }
        for t in [S::U16, S::U32, S::U64] {
            if get.contains(&t) {
                let c = c_type(t);
                let expr = if t == S::U16 {
                    "(uint16_t)((unsigned)in[0] | ((unsigned)in[1] << 8))".to_string()
                } else {
                    (0..t.size())
                        .map(|k| {
                            if k == 0 {
                                format!("({c})in[0]")
                            } else {
                                format!("(({c})in[{k}] << {})", 8 * k)
                            }
                        })
                        .collect::<Vec<_>>()
                        .join("\n        | ")
                };
                let _ = writeln!(
                    out,
                    "static {c} {p}__get_{n}(const uint8_t *in)\n{{\n    return {expr};\n}}\n",
                    n = t.name()
                );
            }
        }
        // Signed and float values: the unsigned bit pattern copied into the type (the
        // exact-width signed types are two's complement, so this is defined behaviour).
        for (t, u) in [
            (S::I8, S::U8),
            (S::I16, S::U16),
            (S::I32, S::U32),
            (S::I64, S::U64),
            (S::F32, S::U32),
            (S::F64, S::U64),
        ] {
            if get.contains(&t) {
                let read = if u == S::U8 {
                    "in[0]".to_string()
                } else {
                    format!("{p}__get_{}(in)", u.name())
                };
                let _ = writeln!(
                    out,
                    "static {c} {p}__get_{n}(const uint8_t *in)\n{{\n    {uc} bits = {read};\n    {c} v;\n    memcpy(&v, &bits, sizeof v);\n    return v;\n}}\n",
                    n = t.name(),
                    c = c_type(t),
                    uc = c_type(u)
                );
            }
        }
        out
    }
}

/// `text` with every line indented by `pad` spaces (empty lines stay empty).
fn indent(text: &str, pad: usize) -> String {
    let sp = " ".repeat(pad);
    text.lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("{sp}{l}\n")
            }
        })
        .collect()
}

/// Statements writing or reading every field of `fields` from or to `buf`, through
/// `access` (`m->` for a message).
fn codec_body(
    hp: &mut Helpers,
    p: &str,
    fields: &[CField],
    buf: &str,
    access: &dyn Fn(&CField) -> String,
    write: bool,
    fail: &str,
) -> String {
    let mut body = String::new();
    for f in fields {
        let e = Elem {
            ty: f.ty,
            buf,
            idx: elem_index(f),
        };
        let val = match f.len {
            None => access(f),
            Some(_) => format!("{}[i]", access(f)),
        };
        let stmt = if write {
            hp.put(p, &e, &val)
        } else {
            hp.get(p, &e, &val, fail)
        };
        match f.len {
            None => body.push_str(&indent(&stmt, 4)),
            Some(n) => {
                let _ = writeln!(body, "    for (i = 0u; i < {n}u; i++) {{");
                body.push_str(&indent(&stmt, 8));
                body.push_str("    }\n");
            }
        }
    }
    body
}

/// A buffer's declared length: C has no zero-length array.
/// The declaration of a packing buffer for a message of `size` bytes: an empty message
/// still needs one byte (C99 has no empty arrays), initialised, since nothing packs into
/// it and gcc -Os flags passing it on as maybe-uninitialized.
fn buf_decl(size: usize) -> String {
    if size == 0 {
        "    uint8_t buf[1] = {0};".into()
    } else {
        format!("    uint8_t buf[{size}];")
    }
}

impl Model {
    fn source(&self, loaded: &Loaded, blob: &[u8], digest: &SchemaDigest) -> String {
        let p = &self.p;
        let mut hp = Helpers::default();
        let mut body = String::new();
        self.source_tables(&mut body, blob, digest);
        for t in &self.types {
            // Each function below starts with a blank line.
            let _ = write!(body, "\n/* ---- Block type {} ---- */\n", t.name);
            for tp in &t.topics {
                self.source_msg(&mut body, &mut hp, &tp.msg);
                self.source_topic(&mut body, t, tp);
            }
            for s in &t.services {
                self.source_msg(&mut body, &mut hp, &s.request);
                self.source_msg(&mut body, &mut hp, &s.response);
                self.source_service(&mut body, t, s);
            }
            self.source_params(&mut body, &mut hp, t);
        }
        banner(&mut body, "Dispatch and init");
        self.source_dispatch(&mut body);

        let mut c = self.preamble(loaded, &format!("{p}.c"), blob, digest);
        let _ = writeln!(c, "\n#include \"{p}.h\"\n");
        let helpers = hp.render(p);
        if helpers.contains("FLT_") || helpers.contains("DBL_") {
            c.push_str("#include <float.h>\n");
        }
        c.push_str("#include <string.h>\n");
        if !helpers.is_empty() {
            banner(&mut c, "Little-endian helpers");
            c.push_str(helpers.trim_end());
            c.push('\n');
        }
        c.push_str(&body);
        c
    }

    fn source_tables(&self, c: &mut String, blob: &[u8], digest: &SchemaDigest) {
        let (p, m) = (&self.p, &self.m);
        banner(c, "The schema blob and its SHA-256");
        let _ = writeln!(c, "const uint8_t {p}_schema_blob[{m}_SCHEMA_BLOB_LEN] = {{");
        byte_lines(c, blob);
        c.push_str("};\n\n");
        let _ = writeln!(c, "const uint8_t {p}_schema_sha256[32] = {{");
        byte_lines(c, &digest.0);
        c.push_str("};\n");

        banner(c, "The descriptor");
        for t in &self.types {
            if !t.topics.is_empty() {
                let _ = writeln!(
                    c,
                    "static const fcan_topic_desc_t {}[{}] = {{",
                    t.topics_table,
                    t.topics.len()
                );
                for tp in &t.topics {
                    let _ = writeln!(
                        c,
                        "    {{ .period_us = {}u, .size = {}u, .offset = {}u, .stage_offset = {}u, .dir = {} }},",
                        tp.period_us,
                        tp.msg.size,
                        tp.offset,
                        tp.stage_offset,
                        if tp.m2s { "FCAN_DIR_M2S" } else { "FCAN_DIR_S2M" }
                    );
                }
                c.push_str("};\n\n");
            }
            if !t.params.is_empty() {
                let _ = writeln!(
                    c,
                    "static const fcan_param_desc_t {}[{}] = {{",
                    t.params_table,
                    t.params.len()
                );
                for q in &t.params {
                    let flags = match (q.min.is_some(), q.max.is_some()) {
                        (false, false) => "0u",
                        (true, false) => "FCAN_PARAM_HAS_MIN",
                        (false, true) => "FCAN_PARAM_HAS_MAX",
                        (true, true) => "FCAN_PARAM_HAS_MIN | FCAN_PARAM_HAS_MAX",
                    };
                    let _ = writeln!(
                        c,
                        "    {{ .default_bits = UINT64_C(0x{:X}), .min_bits = UINT64_C(0x{:X}), .max_bits = UINT64_C(0x{:X}), .count = {}u, .offset = {}u, .scalar_type = {}, .flags = {flags} }}, /* {} */",
                        value_bits(&q.default),
                        q.min.as_ref().map_or(0, value_bits),
                        q.max.as_ref().map_or(0, value_bits),
                        q.field.len.unwrap_or(1),
                        q.offset,
                        type_macro(q.field.ty),
                        q.doc
                    );
                }
                c.push_str("};\n\n");
            }
            if !t.services.is_empty() {
                let _ = writeln!(
                    c,
                    "static const fcan_service_desc_t {}[{}] = {{",
                    t.services_table,
                    t.services.len()
                );
                for s in &t.services {
                    let _ = writeln!(
                        c,
                        "    {{ .request_size = {}u, .response_size = {}u }},",
                        s.request.size, s.response.size
                    );
                }
                c.push_str("};\n\n");
            }
        }
        let table = |name: &str, n: usize| {
            if n == 0 {
                "NULL".to_string()
            } else {
                name.to_string()
            }
        };
        if !self.types.is_empty() {
            let _ = writeln!(
                c,
                "static const fcan_type_desc_t {p}__types[{}] = {{",
                self.types.len()
            );
            for t in &self.types {
                let _ = writeln!(
                    c,
                    "    {{ .name = \"{}\", .topics = {}, .params = {}, .services = {}, .n_topics = {}u, .n_params = {}u, .n_services = {}u, .topic_bytes = {}u, .stage_bytes = {}u, .param_bytes = {}u }},",
                    t.name,
                    table(&t.topics_table, t.topics.len()),
                    table(&t.params_table, t.params.len()),
                    table(&t.services_table, t.services.len()),
                    t.topics.len(),
                    t.params.len(),
                    t.services.len(),
                    t.topic_bytes,
                    t.stage_bytes,
                    t.param_bytes
                );
            }
            c.push_str("};\n\n");
        }
        if !self.arrays.is_empty() {
            let _ = writeln!(
                c,
                "static const fcan_array_desc_t {p}__arrays[{}] = {{",
                self.arrays.len()
            );
            for a in &self.arrays {
                let _ = writeln!(
                    c,
                    "    {{ .type_index = {}u, .max_count = {}u, .first_block = {}u }}, /* {} */",
                    a.type_index,
                    a.max_count,
                    a.first_block,
                    c_comment(&a.ns)
                );
            }
            c.push_str("};\n\n");
        }
        let blocks = &self.tables.blocks;
        if !blocks.is_empty() {
            let _ = writeln!(
                c,
                "static const fcan_block_desc_t {p}__blocks[{}] = {{",
                blocks.len()
            );
            for (i, b) in blocks.iter().enumerate() {
                let _ = writeln!(
                    c,
                    "    {{ .topic_offset = {}u, .stage_offset = {}u, .param_offset = {}u, .topic_slot = {}u, .type_index = {}u, .array = {}u, .index = {}u }}, /* block {i} */",
                    b.topic_offset,
                    b.stage_offset,
                    b.param_offset,
                    b.topic_slot,
                    b.type_index,
                    b.array,
                    b.index
                );
            }
            c.push_str("};\n\n");
        }
        let t = &self.tables;
        let l = &self.limits;
        let _ = writeln!(c, "const fcan_node_desc_t {p}_desc = {{");
        let _ = writeln!(c, "    .abi = FCAN_ABI_VERSION,");
        let _ = writeln!(c, "    .blob_len = {m}_SCHEMA_BLOB_LEN,");
        let _ = writeln!(c, "    .blob = {p}_schema_blob,");
        let _ = writeln!(
            c,
            "    .hash = {{ {} }},",
            digest
                .prefix()
                .0
                .iter()
                .map(|b| format!("0x{b:02x}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            c,
            "    .types = {},",
            table(&format!("{p}__types"), self.types.len())
        );
        let _ = writeln!(
            c,
            "    .arrays = {},",
            table(&format!("{p}__arrays"), self.arrays.len())
        );
        let _ = writeln!(
            c,
            "    .blocks = {},",
            table(&format!("{p}__blocks"), blocks.len())
        );
        let _ = writeln!(c, "    .n_types = {}u,", self.types.len());
        let _ = writeln!(c, "    .n_arrays = {}u,", self.arrays.len());
        let _ = writeln!(c, "    .n_blocks = {}u,", blocks.len());
        let _ = writeln!(c, "    .max_frames = {}u,", l.max_frames);
        let _ = writeln!(c, "    .max_copy_entries = {}u,", l.max_copy_entries);
        let _ = writeln!(c, "    .service_buffer = {}u,", l.service_buffer);
        let _ = writeln!(c, "    .service_reassembly = {}u,", l.service_reassembly);
        let _ = writeln!(c, "    .topic_bytes = {}u,", t.topic_bytes);
        let _ = writeln!(c, "    .stage_bytes = {}u,", t.stage_bytes);
        let _ = writeln!(c, "    .param_bytes = {}u,", t.param_bytes);
        let _ = writeln!(c, "    .topic_slots = {}u,", t.topic_slots);
        let _ = writeln!(c, "    .max_request = {}u,", t.max_request);
        let _ = writeln!(c, "    .max_response = {}u,", t.max_response);
        c.push_str("};\n");
    }

    fn source_msg(&self, c: &mut String, hp: &mut Helpers, msg: &CMsg) {
        let p = &self.p;
        let loop_var = if msg.fields.iter().any(|f| f.len.is_some()) {
            "    uint32_t i;\n"
        } else {
            ""
        };
        let access = |f: &CField| format!("m->{}", f.member);
        let _ = writeln!(
            c,
            "\nint32_t {}(const {} *m, uint8_t *out)\n{{",
            msg.pack, msg.ty
        );
        if msg.fields.is_empty() {
            c.push_str("    (void)out;\n    if (m == NULL) {\n        return -1;\n    }\n    return 0;\n}\n");
        } else {
            c.push_str(loop_var);
            c.push_str("    if (m == NULL || out == NULL) {\n        return -1;\n    }\n");
            c.push_str(&codec_body(hp, p, &msg.fields, "out", &access, true, "-1"));
            let _ = writeln!(c, "    return {};\n}}", msg.size);
        }
        let _ = writeln!(
            c,
            "\nint32_t {}({} *m, const uint8_t *in)\n{{",
            msg.unpack, msg.ty
        );
        if msg.fields.is_empty() {
            c.push_str("    (void)in;\n    if (m == NULL) {\n        return -1;\n    }\n    m->reserved = 0u;\n    return 0;\n}\n");
        } else {
            c.push_str(loop_var);
            c.push_str("    if (m == NULL || in == NULL) {\n        return -1;\n    }\n");
            c.push_str(&codec_body(hp, p, &msg.fields, "in", &access, false, "-1"));
            let _ = writeln!(c, "    return {};\n}}", msg.size);
        }
    }

    fn source_topic(&self, c: &mut String, _t: &CType, tp: &CTopic) {
        let msg = &tp.msg;
        if tp.m2s {
            let _ = writeln!(
                c,
                "\nint32_t {}(fcan_node_t *node, uint8_t block, {} *out, fcan_topic_info_t *info)\n{{",
                tp.func, msg.ty
            );
            let _ = writeln!(c, "{}", buf_decl(msg.size));
            c.push_str("    fcan_topic_info_t meta;\n    int32_t n;\n");
            c.push_str("    if (out == NULL) {\n        return FCAN_ERR_ARG;\n    }\n");
            c.push_str("    memset(out, 0, sizeof *out);\n");
            c.push_str("    meta.generation = 0u;\n    meta.received_at_us = 0u;\n");
            let _ = writeln!(
                c,
                "    n = fcan_node_topic(node, block, {}, buf, (uint32_t)sizeof buf, &meta);",
                tp.index_macro
            );
            c.push_str("    if (n < 0) {\n        return n;\n    }\n");
            c.push_str("    if (info != NULL) {\n        *info = meta;\n    }\n");
            c.push_str("    if (meta.generation == 0u) {\n        return FCAN_OK;\n    }\n");
            let _ = writeln!(
                c,
                "    if (n != {} || {}(out, buf) < 0) {{\n        memset(out, 0, sizeof *out);\n        return FCAN_ERR_DECODE;\n    }}\n    return FCAN_OK;\n}}",
                msg.size_macro, msg.unpack
            );
        } else {
            let _ = writeln!(
                c,
                "\nint32_t {}(fcan_node_t *node, uint8_t block, const {} *msg)\n{{",
                tp.func, msg.ty
            );
            let _ = writeln!(c, "{}", buf_decl(msg.size));
            let _ = writeln!(
                c,
                "    if ({}(msg, buf) < 0) {{\n        return FCAN_ERR_ARG;\n    }}",
                msg.pack
            );
            let _ = writeln!(
                c,
                "    return fcan_node_publish(node, block, {}, buf, {}u);\n}}",
                tp.index_macro, msg.size
            );
        }
    }

    fn source_service(&self, c: &mut String, t: &CType, s: &CService) {
        let p = &self.p;
        let (req, resp) = (&s.request, &s.response);
        // Typed completion.
        let _ = writeln!(
            c,
            "\nint32_t {}(fcan_node_t *node, const fcan_deferred_t *token, const {} *response)\n{{",
            s.complete, resp.ty
        );
        let _ = writeln!(c, "{}", buf_decl(resp.size));
        c.push_str(
            "    if (token == NULL || response == NULL) {\n        return FCAN_ERR_ARG;\n    }\n",
        );
        let _ = writeln!(
            c,
            "    if (token->service != {} || token->block >= {}u || {p}__blocks[token->block].type_index != {}) {{\n        return FCAN_ERR_TOKEN;\n    }}",
            s.index_macro,
            self.tables.blocks.len(),
            t.index_macro
        );
        let _ = writeln!(
            c,
            "    if ({}(response, buf) < 0) {{\n        return FCAN_ERR_ARG;\n    }}",
            resp.pack
        );
        let _ = writeln!(
            c,
            "    return fcan_node_complete(node, token, buf, {}u);\n}}",
            resp.size
        );
        // The call: request decoded, handler, response encoded.
        let _ = writeln!(
            c,
            "\nstatic int32_t {}(fcan_node_t *node, const fcan_service_call_t *call, uint8_t *response, uint32_t response_cap, uint32_t *response_len)\n{{",
            s.call
        );
        let _ = writeln!(
            c,
            "    {} request;\n    {} reply;\n    int32_t r;",
            req.ty, resp.ty
        );
        c.push_str(
            "    memset(&request, 0, sizeof request);\n    memset(&reply, 0, sizeof reply);\n",
        );
        let _ = writeln!(
            c,
            "    if (call->request_len != {} || {}(&request, call->request) < 0) {{\n        return FCAN_REPLY_BAD_REQUEST;\n    }}",
            req.size_macro, req.unpack
        );
        let _ = writeln!(
            c,
            "    r = {}(node, call->block, &request, &reply, &call->token);",
            s.handler
        );
        // An empty response needs no room (and `response_cap < 0` would not compile
        // cleanly).
        let room = if resp.size == 0 {
            c.push_str("    (void)response_cap;\n");
            String::new()
        } else {
            format!("response_cap < {} || ", resp.size_macro)
        };
        let _ = writeln!(
            c,
            "    if (r == FCAN_REPLY_OK) {{\n        if ({room}{}(&reply, response) < 0) {{\n            return FCAN_REPLY_FAILED;\n        }}\n        *response_len = {};\n    }}\n    return r;\n}}",
            resp.pack, resp.size_macro
        );
    }

    fn source_params(&self, c: &mut String, hp: &mut Helpers, t: &CType) {
        let p = &self.p;
        if t.params.is_empty() {
            return;
        }
        for q in &t.params {
            let out = match q.field.len {
                Some(len) => format!("{} out[{len}]", c_type(q.field.ty)),
                None => format!("{} *out", c_type(q.field.ty)),
            };
            // The param as a one-field message at offset 0 of `buf`.
            let elem_field = CField {
                name: q.field.name.clone(),
                member: String::new(),
                ty: q.field.ty,
                len: q.field.len,
                offset: 0,
            };
            let _ = writeln!(
                c,
                "\nint32_t {}(fcan_node_t *node, uint8_t block, {out})\n{{",
                q.func
            );
            let _ = writeln!(c, "{}\n    int32_t n;", buf_decl(q.size));
            if q.field.len.is_some() {
                c.push_str("    uint32_t i;\n");
            }
            c.push_str("    if (out == NULL) {\n        return FCAN_ERR_ARG;\n    }\n");
            let _ = writeln!(
                c,
                "    n = fcan_node_param(node, block, {}, buf, (uint32_t)sizeof buf);",
                q.macro_
            );
            c.push_str("    if (n < 0) {\n        return n;\n    }\n");
            let _ = writeln!(
                c,
                "    if (n != {}) {{\n        return FCAN_ERR_LENGTH;\n    }}",
                q.size
            );
            let access = |_: &CField| {
                if q.field.len.is_some() {
                    "out".to_string()
                } else {
                    "*out".to_string()
                }
            };
            c.push_str(&codec_body(
                hp,
                p,
                std::slice::from_ref(&elem_field),
                "buf",
                &access,
                false,
                "FCAN_ERR_DECODE",
            ));
            c.push_str("    return FCAN_OK;\n}\n");
        }
        let _ = writeln!(
            c,
            "\nint32_t {}(fcan_node_t *node, uint8_t block, {} *out)\n{{\n    int32_t r;\n    if (out == NULL) {{\n        return FCAN_ERR_ARG;\n    }}",
            t.params_fn, t.params_struct
        );
        for q in &t.params {
            let arg = if q.field.len.is_some() {
                format!("out->{}", q.field.member)
            } else {
                format!("&out->{}", q.field.member)
            };
            let _ = writeln!(
                c,
                "    r = {}(node, block, {arg});\n    if (r != FCAN_OK) {{\n        return r;\n    }}",
                q.func
            );
        }
        c.push_str("    return FCAN_OK;\n}\n");
    }

    fn source_dispatch(&self, c: &mut String) {
        let (p, m) = (&self.p, &self.m);
        let n_blocks = self.tables.blocks.len();
        if self.has_services {
            let _ = writeln!(
                c,
                "static int32_t {p}__service(void *user, fcan_node_t *node, const fcan_service_call_t *call, uint8_t *response, uint32_t response_cap, uint32_t *response_len)\n{{"
            );
            c.push_str("    (void)user;\n");
            c.push_str("    if (call == NULL || response_len == NULL) {\n        return FCAN_REPLY_FAILED;\n    }\n");
            c.push_str("    *response_len = 0u;\n");
            let _ = writeln!(
                c,
                "    if (call->block >= {n_blocks}u) {{\n        return FCAN_REPLY_BAD_REQUEST;\n    }}"
            );
            let _ = writeln!(c, "    switch ({p}__blocks[call->block].type_index) {{");
            for t in self.types.iter().filter(|t| !t.services.is_empty()) {
                let _ = writeln!(
                    c,
                    "    case {}:\n        switch (call->service) {{",
                    t.index_macro
                );
                for s in &t.services {
                    let _ = writeln!(
                        c,
                        "        case {}:\n            return {}(node, call, response, response_cap, response_len);",
                        s.index_macro, s.call
                    );
                }
                c.push_str("        default:\n            break;\n        }\n        break;\n");
            }
            c.push_str(
                "    default:\n        break;\n    }\n    return FCAN_REPLY_BAD_REQUEST;\n}\n\n",
            );
        }
        if self.has_params {
            let _ = writeln!(
                c,
                "static void {p}__params_changed(void *user, fcan_node_t *node, uint8_t block, uint32_t changed)\n{{"
            );
            c.push_str("    (void)user;\n");
            let _ = writeln!(
                c,
                "    if (block >= {n_blocks}u) {{\n        return;\n    }}"
            );
            let _ = writeln!(c, "    switch ({p}__blocks[block].type_index) {{");
            for t in self.types.iter().filter(|t| !t.params.is_empty()) {
                let _ = writeln!(
                    c,
                    "    case {}:\n        {}(node, block, changed);\n        break;",
                    t.index_macro, t.changed_fn
                );
            }
            c.push_str("    default:\n        break;\n    }\n}\n\n");
        }
        let _ = writeln!(
            c,
            "fcan_node_t *{p}_init({p}_ram_t *ram, const {p}_config_t *config, int32_t *error)\n{{"
        );
        c.push_str("    fcan_node_config_t cfg;\n");
        c.push_str("    if (ram == NULL || config == NULL) {\n        if (error != NULL) {\n            *error = FCAN_ERR_ARG;\n        }\n        return NULL;\n    }\n");
        c.push_str("    memset(&cfg, 0, sizeof cfg);\n");
        c.push_str(
            "    cfg.node_id = config->node_id;\n    cfg.controller = config->controller;\n",
        );
        let _ = writeln!(c, "    cfg.n_counts = {m}_ARRAYS;");
        c.push_str("    cfg.boot_id = config->boot_id;\n");
        if self.arrays.is_empty() {
            c.push_str("    cfg.counts = NULL;\n");
        } else {
            c.push_str("    cfg.counts = config->counts;\n");
        }
        c.push_str("    cfg.callbacks.user = config->user;\n    cfg.callbacks.transmit = config->transmit;\n");
        if self.has_services {
            let _ = writeln!(c, "    cfg.callbacks.service = {p}__service;");
        } else {
            c.push_str("    cfg.callbacks.service = NULL;\n");
        }
        if self.has_params {
            let _ = writeln!(c, "    cfg.callbacks.params_changed = {p}__params_changed;");
        } else {
            c.push_str("    cfg.callbacks.params_changed = NULL;\n");
        }
        c.push_str("    cfg.callbacks.event = config->event;\n");
        let _ = writeln!(
            c,
            "    return fcan_node_init(ram, (uint32_t)sizeof *ram, &{p}_desc, &cfg, error);\n}}"
        );
    }
}

/// Bytes as `0x..,` items, 16 to a line, indented by 4.
fn byte_lines(out: &mut String, bytes: &[u8]) {
    for row in bytes.chunks(16) {
        let _ = writeln!(
            out,
            "    {}",
            row.iter()
                .map(|b| format!("0x{b:02x},"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(c_name("velocity/kp"), "velocity__kp");
        assert_eq!(c_upper("velocity/kp"), "VELOCITY__KP");
        assert_eq!(c_upper("sampleRate"), "SAMPLE_RATE");
        assert_eq!(node_stem("io_board{i}"), "io_board");
        assert_eq!(node_stem("MdController{i}"), "mdcontroller");
        assert_eq!(node_stem("a_{i}_b"), "a_b");
        assert!(is_stdint_macro("INT8_MAX"));
        assert!(is_stdint_macro("UINT_LEAST16_MAX"));
        assert!(is_stdint_macro("UINT64_C"));
        assert!(!is_stdint_macro("INT"));
        assert!(!is_stdint_macro("INTERVAL_MAX"));
    }

    #[test]
    fn bits() {
        assert_eq!(value_bits(&Scalar::F32(1.5)), 0x3FC0_0000);
        assert_eq!(value_bits(&Scalar::I8(-1)), 0xFF);
        assert_eq!(value_bits(&Scalar::Bool(true)), 1);
        assert_eq!(value_bits(&Scalar::F64(1.0)), 0x3FF0_0000_0000_0000);
    }
}
