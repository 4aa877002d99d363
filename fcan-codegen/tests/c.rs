//! `fcan-codegen c`: the generated C compiles cleanly (gcc, clang, arm-none-eabi-gcc, the
//! header under g++), its tables are the Rust backend's, its codecs follow the wire
//! rule, its dispatch routes to the right handler, a missing handler does not link, and
//! a schema with errors writes nothing.
//!
//! The C programs here link the generated `.c` against `STUB`, a stand-in for
//! `libfcan_node.a` written for these tests (it records what is published and
//! completed, serves params as their descriptor defaults and topics from a buffer the
//! test fills), so no Rust static library needs building. The real library runs the
//! generated C in `tests/tests/c_node.rs`.
//!
//! Compilers: gcc must be there; clang, arm-none-eabi-gcc and g++ are used when present
//! and skipped with a note otherwise, unless `FCAN_REQUIRE_CLANG`, `FCAN_REQUIRE_ARM_GCC`
//! or `FCAN_REQUIRE_GXX` is set (then their absence fails).

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{example_cases, fibril_cases, good_cases, say_fibril_absent, workspace_root, Case};
use fcan_codegen::rust::{snake, Tables};
use fcan_codegen::{load_files, Loaded};
use fcan_core::msg::DataDirection;
use fcan_core::numbering::Numbering;
use fcan_core::types::Scalar;

/// The flags the generated C must be clean under. `-Os`: some warnings (maybe-uninitialized)
/// come only from the optimiser's analysis, and firmware builds optimise (an empty
/// response's packing buffer once passed unoptimised builds and failed `-Os -Werror`).
const STRICT: &[&str] = &[
    "-Os",
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-Wpedantic",
    "-Werror",
    "-Wconversion",
    "-Wshadow",
];
/// The test programs' own flags.
const TEST_FLAGS: &[&str] = &["-std=c99", "-Wall", "-Wextra", "-Werror"];
const ARM: &[&str] = &[
    "-mcpu=cortex-m4",
    "-mthumb",
    "-mfloat-abi=hard",
    "-mfpu=fpv4-sp-d16",
];

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fcan-codegen"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn include_dir() -> PathBuf {
    workspace_root().join("fcan-node-c/include")
}

/// Whether `cmd` runs.
fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether an optional compiler is there; says SKIPPED if not, fails if `env` is set.
fn optional(cmd: &str, env: &str) -> bool {
    if have(cmd) {
        return true;
    }
    assert!(
        std::env::var_os(env).is_none(),
        "{env} is set but `{cmd}` does not run"
    );
    eprintln!("NOTE: `{cmd}` not found: its check is SKIPPED (set {env}=1 to require it)");
    false
}

fn require_gcc() {
    assert!(
        have("gcc"),
        "gcc is needed to test the generated C (install gcc)"
    );
}

/// Runs `fcan-codegen c FILES --out DIR`; panics unless it succeeds.
fn gen(files: &[PathBuf], dir: &Path) -> String {
    let out = bin()
        .arg("c")
        .args(files)
        .arg("--out")
        .arg(dir)
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "fcan-codegen c {files:?} failed:\n{}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// `fcan_<node>`, derived here from the rule (`{i}` dropped, lower case).
fn stem(loaded: &Loaded) -> String {
    let node = loaded.schema.node.replace("{i}", "");
    format!("fcan_{}", node.trim_matches('_').to_ascii_lowercase())
}

fn load(case: &Case) -> Loaded {
    load_files(&case.files).unwrap_or_else(|d| panic!("{}: {d}", case.name))
}

/// Runs a compiler; `Err(stderr)` when it fails.
fn cc(compiler: &str, args: &[&str], extra: &[&Path]) -> Result<(), String> {
    let out = Command::new(compiler)
        .args(args)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{compiler} {args:?} {extra:?}:\n{}",
            text(&out.stderr)
        ))
    }
}

/// Compiles the generated `.c` in `dir` to an object with `compiler` and the strict
/// flags (plus `extra`).
fn compile_generated(compiler: &str, dir: &Path, stem: &str, extra: &[&str]) -> Result<(), String> {
    let inc = format!("-I{}", include_dir().display());
    let gdir = format!("-I{}", dir.display());
    let obj = dir.join(format!("{stem}.{}.o", compiler.replace('/', "_")));
    let mut args: Vec<&str> = STRICT.to_vec();
    args.extend(extra);
    args.extend([inc.as_str(), gdir.as_str(), "-c"]);
    let src = dir.join(format!("{stem}.c"));
    let o = obj.display().to_string();
    args.extend(["-o", o.as_str()]);
    cc(compiler, &args, &[src.as_path()])
}

/// Builds a host program from the generated `.c` (strict flags), `STUB` and the test's
/// `sources` (their own flags) with gcc; `Err(stderr)` when compiling or linking fails.
fn build(dir: &Path, stem: &str, sources: &[(&str, String)]) -> Result<PathBuf, String> {
    build_with(dir, stem, sources, None)
}

/// [`build`], linked with the library at `lib` instead of `STUB` when given.
fn build_with(
    dir: &Path,
    stem: &str,
    sources: &[(&str, String)],
    lib: Option<&Path>,
) -> Result<PathBuf, String> {
    let inc = format!("-I{}", include_dir().display());
    let gdir = format!("-I{}", dir.display());
    compile_generated("gcc", dir, stem, &[])?;
    let mut objs = vec![dir.join(format!("{stem}.gcc.o"))];
    let mut all: Vec<(&str, String)> = Vec::new();
    if lib.is_none() {
        all.push(("stub", STUB.to_string()));
    }
    all.extend(sources.iter().cloned());
    for (name, src) in &all {
        let c = dir.join(format!("{name}.c"));
        std::fs::write(&c, src).expect("write a test source");
        let o = dir.join(format!("{name}.o"));
        let os = o.display().to_string();
        let mut args: Vec<&str> = TEST_FLAGS.to_vec();
        args.extend([inc.as_str(), gdir.as_str(), "-c", "-o", os.as_str()]);
        cc("gcc", &args, &[c.as_path()])?;
        objs.push(o);
    }
    let exe = dir.join("prog");
    let e = exe.display().to_string();
    let mut refs: Vec<&Path> = objs.iter().map(PathBuf::as_path).collect();
    refs.extend(lib);
    cc("gcc", &["-o", e.as_str()], &refs)?;
    Ok(exe)
}

fn run(exe: &Path) -> String {
    let out: Output = Command::new(exe).output().expect("the test program runs");
    assert!(
        out.status.success(),
        "{} failed: {}{}",
        exe.display(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A stand-in for `libfcan_node.a` (see the module comment).
const STUB: &str = r#"
#include <string.h>
#include "fcan.h"

const fcan_node_desc_t *stub_desc;
fcan_node_config_t stub_cfg;
uint8_t stub_counts[256];
uint8_t stub_sent[256];
uint32_t stub_sent_len;
int stub_sent_block = -1;
int stub_sent_index = -1;
int stub_sent_kind; /* 1 publish, 2 complete */
uint8_t stub_topic[256];
uint32_t stub_topic_len;
uint32_t stub_generation;

static uint32_t scalar_size(uint8_t t)
{
    switch (t) {
    case FCAN_TYPE_BOOL: case FCAN_TYPE_U8: case FCAN_TYPE_I8: return 1;
    case FCAN_TYPE_U16: case FCAN_TYPE_I16: return 2;
    case FCAN_TYPE_U32: case FCAN_TYPE_I32: case FCAN_TYPE_F32: return 4;
    default: return 8;
    }
}

uint32_t fcan_node_ram_needed(const fcan_node_desc_t *desc) { (void)desc; return 0; }

fcan_node_t *fcan_node_init(void *ram, uint32_t ram_bytes, const fcan_node_desc_t *desc,
                            const fcan_node_config_t *config, int32_t *error)
{
    (void)ram_bytes;
    stub_desc = desc;
    stub_cfg = *config;
    if (config->n_counts > 0) {
        memcpy(stub_counts, config->counts, config->n_counts);
    }
    if (error != NULL) {
        *error = FCAN_OK;
    }
    return (fcan_node_t *)ram;
}

int32_t fcan_node_ingest(fcan_node_t *node, const fcan_frame_t *frame, uint32_t now_us)
{ (void)node; (void)frame; (void)now_us; return FCAN_OK; }
int32_t fcan_node_poll(fcan_node_t *node, uint32_t now_us) { (void)node; (void)now_us; return FCAN_OK; }
int32_t fcan_node_poll_at(fcan_node_t *node, uint32_t now_us, uint32_t *deadline_us)
{ (void)node; (void)now_us; (void)deadline_us; return 0; }

int32_t fcan_node_publish(fcan_node_t *node, uint8_t block, uint8_t topic, const uint8_t *bytes, uint32_t len)
{
    (void)node;
    memcpy(stub_sent, bytes, len);
    stub_sent_len = len;
    stub_sent_block = block;
    stub_sent_index = topic;
    stub_sent_kind = 1;
    return FCAN_OK;
}

int32_t fcan_node_topic(fcan_node_t *node, uint8_t block, uint8_t topic, uint8_t *out, uint32_t cap,
                        fcan_topic_info_t *info)
{
    (void)node; (void)block; (void)topic;
    if (cap < stub_topic_len) {
        return FCAN_ERR_LENGTH;
    }
    memcpy(out, stub_topic, stub_topic_len);
    if (info != NULL) {
        info->generation = stub_generation;
        info->received_at_us = 1234u;
    }
    return (int32_t)stub_topic_len;
}

/* A param's value: its default from the descriptor, every element. */
int32_t fcan_node_param(fcan_node_t *node, uint8_t block, uint8_t param, uint8_t *out, uint32_t cap)
{
    const fcan_type_desc_t *t;
    const fcan_param_desc_t *p;
    uint32_t size, k, j, n;
    (void)node;
    if (stub_desc == NULL || block >= stub_desc->n_blocks) {
        return FCAN_ERR_INDEX;
    }
    t = &stub_desc->types[stub_desc->blocks[block].type_index];
    if (param >= t->n_params) {
        return FCAN_ERR_INDEX;
    }
    p = &t->params[param];
    size = scalar_size(p->scalar_type);
    n = size * p->count;
    if (cap < n) {
        return FCAN_ERR_LENGTH;
    }
    for (k = 0; k < p->count; k++) {
        for (j = 0; j < size; j++) {
            out[k * size + j] = (uint8_t)(p->default_bits >> (8u * j));
        }
    }
    return (int32_t)n;
}

int32_t fcan_node_complete(fcan_node_t *node, const fcan_deferred_t *token, const uint8_t *response, uint32_t len)
{
    (void)node;
    if (len > 0) {
        memcpy(stub_sent, response, len);
    }
    stub_sent_len = len;
    stub_sent_block = token->block;
    stub_sent_index = token->service;
    stub_sent_kind = 2;
    return FCAN_OK;
}

int32_t fcan_node_state(fcan_node_t *node) { (void)node; return FCAN_STATE_UNPROVISIONED; }
int32_t fcan_node_counters(fcan_node_t *node, fcan_counters_t *out)
{ (void)node; memset(out, 0, sizeof *out); return FCAN_OK; }
const char *fcan_strerror(int32_t code) { (void)code; return "stub"; }
"#;

/// Do-nothing definitions of every handler a node needs, named by the rule (type in
/// snake case, `/` → `__`) so they compile only against a header that agrees.
fn handler_stubs(loaded: &Loaded) -> String {
    let p = stem(loaded);
    let mut c = format!("#include \"{p}.h\"\n");
    for t in &loaded.schema.types {
        let tn = snake(&t.name);
        for s in &t.services {
            let f = format!("{p}_{tn}_{}", s.name.replace('/', "__"));
            let _ = writeln!(
                c,
                "int32_t {f}(fcan_node_t *node, uint8_t block, const {f}_request_t *request, {f}_response_t *response, const fcan_deferred_t *token)\n{{ (void)node; (void)block; (void)request; (void)response; (void)token; return FCAN_REPLY_FAILED; }}"
            );
        }
        if !t.params.is_empty() {
            let _ = writeln!(
                c,
                "void {p}_{tn}_params_changed(fcan_node_t *node, uint8_t block, uint32_t changed)\n{{ (void)node; (void)block; (void)changed; }}"
            );
        }
    }
    c
}

/// A `main` that boots the node through the generated init (on the stub).
fn boot_main(p: &str) -> String {
    format!(
        r#"
#include <string.h>
#include "{p}.h"
static int32_t tx(void *user, const fcan_frame_t *frame) {{ (void)user; (void)frame; return 0; }}
int main(void)
{{
    static {p}_ram_t ram;
    {p}_config_t cfg;
    int32_t err = -100;
    memset(&cfg, 0, sizeof cfg);
    cfg.node_id = 1;
    cfg.transmit = tx;
    return {p}_init(&ram, &cfg, &err) == (fcan_node_t *)(void *)&ram && err == FCAN_OK ? 0 : 1;
}}
"#
    )
}

/// Every schema the C backend is checked on: the examples, the good corpus, the fibril
/// nodes (when present), an empty node and names C and C++ reserve.
fn all_cases(scratch: &Path) -> Vec<Case> {
    let mut cases = example_cases();
    cases.extend(good_cases());
    match fibril_cases() {
        Some(f) => cases.extend(f),
        None => say_fibril_absent(),
    }
    let write = |name: &str, yaml: &str| {
        let f = scratch.join(format!("{name}.yaml"));
        std::fs::write(&f, yaml).expect("write a schema");
        Case {
            name: name.into(),
            files: vec![f],
        }
    };
    cases.push(write(
        "empty",
        "node: empty{i}\nprotocol: 2\ntypes: {}\ninstances: []\n",
    ));
    cases.push(write("c_names", C_NAMES));
    cases
}

/// Names that are keywords or macros in C or C++, `/` names, every scalar type, an
/// empty response.
const C_NAMES: &str = r#"
node: C_Names_{i}
protocol: 2
limits: { service_reassembly: 1, service_buffer: 64 }
types:
  Odd:
    params:
      float: { type: f32, default: 1.5 }
      gain/kp: { type: f64, default: -2.25, min: -10.0 }
      true: { type: bool, default: true }
      INT8_MAX: { type: i8, default: -3, min: -100 }
      class: { type: i64, default: -1 }
    topics:
      int:
        dir: s2m
        period_us: 1000
        fields:
          default: u8
          class: i8
          true: bool
          bool: u16
          INT8_MAX: i16
          this: u32
          new: i32
          linux: u64
          register: i64
          float: f32
          double: { type: f64, len: 2 }
      imu/raw:
        dir: m2s
        fields: { x: f32, y: f32 }
    services:
      do/it:
        request: { while: u8, uint8_t: u8 }
        response: {}
instances:
  - { type: Odd, max_count: 2, ns: "odd_{i}" }
"#;

#[test]
fn every_schema_compiles_cleanly_with_gcc_clang_arm_gcc_and_gxx() {
    require_gcc();
    let clang = optional("clang", "FCAN_REQUIRE_CLANG");
    let arm = optional("arm-none-eabi-gcc", "FCAN_REQUIRE_ARM_GCC");
    let gxx = optional("g++", "FCAN_REQUIRE_GXX");
    let tmp = tempfile::tempdir().expect("tempdir");
    let cases = all_cases(tmp.path());
    assert!(cases.len() >= 8, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let loaded = load(case);
        let p = stem(&loaded);
        let dir = tmp.path().join(&case.name);
        let stdout = gen(&case.files, &dir);
        for f in [
            format!("{p}.h"),
            format!("{p}.c"),
            "schema.bin".into(),
            "schema.sha256".into(),
        ] {
            let path = dir.join(&f);
            assert!(path.is_file(), "{}: {f} not written", case.name);
            assert!(
                stdout.contains(&format!("wrote {}", path.display())),
                "{}: stdout does not list {f}:\n{stdout}",
                case.name
            );
        }
        let mut check = |r: Result<(), String>| {
            if let Err(e) = r {
                failures.push(format!("{}: {e}", case.name));
            }
        };
        check(compile_generated("gcc", &dir, &p, &[]));
        if clang {
            check(compile_generated("clang", &dir, &p, &[]));
        }
        if arm {
            check(compile_generated("arm-none-eabi-gcc", &dir, &p, ARM));
        }
        if gxx {
            // The header from C++ (its `extern "C"`, member names).
            let cpp = dir.join("header_check.cpp");
            std::fs::write(
                &cpp,
                format!("#include \"{p}.h\"\nint main() {{ return 0; }}\n"),
            )
            .expect("write");
            let inc = format!("-I{}", include_dir().display());
            let gdir = format!("-I{}", dir.display());
            check(cc(
                "g++",
                &[
                    "-std=c++11",
                    "-Wall",
                    "-Wextra",
                    "-Wpedantic",
                    "-Werror",
                    "-fsyntax-only",
                    &inc,
                    &gdir,
                ],
                &[cpp.as_path()],
            ));
        }
        // And linked with every handler defined (the names the rule gives), booted.
        check(
            build(
                &dir,
                &p,
                &[
                    ("handlers", handler_stubs(&loaded)),
                    ("boot", boot_main(&p)),
                ],
            )
            .map(|exe| {
                run(&exe);
            }),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// With `FCAN_NODE_LIB` naming a host `libfcan_node.a` (`fcan-node-c/scripts/build-lib.sh`),
/// every schema's generated node boots on the real library with every instance wired,
/// in no more RAM than `FCAN_<NODE>_RAM_BYTES`: the library's own checks
/// (`NodeDesc::check`) accept the generated tables. Ignored by default: it needs the
/// built archive, which `.ci/c.sh` builds and then runs this with `--include-ignored`.
#[test]
#[ignore = "needs FCAN_NODE_LIB (a host libfcan_node.a from build-lib.sh): .ci/c.sh runs it"]
fn every_node_boots_on_the_real_library() {
    let lib = std::env::var_os("FCAN_NODE_LIB")
        .map(PathBuf::from)
        .expect("FCAN_NODE_LIB names a host libfcan_node.a (fcan-node-c/scripts/build-lib.sh)");
    assert!(
        lib.is_file(),
        "FCAN_NODE_LIB={} is not a file",
        lib.display()
    );
    require_gcc();
    let tmp = tempfile::tempdir().expect("tempdir");
    for case in all_cases(tmp.path()) {
        let loaded = load(&case);
        let p = stem(&loaded);
        let dir = tmp.path().join(&case.name);
        gen(&case.files, &dir);
        let main = format!(
            r#"
#include <stdio.h>
#include <string.h>
#include "{p}.h"
static int32_t tx(void *user, const fcan_frame_t *frame) {{ (void)user; (void)frame; return 0; }}
int main(void)
{{
    static {p}_ram_t ram;
    {p}_config_t cfg;
    int32_t err = -100;
    unsigned i;
    fcan_node_t *node;
    memset(&cfg, 0, sizeof cfg);
    cfg.node_id = 3;
    cfg.controller = FCAN_CONTROLLER_FD;
    cfg.transmit = tx;
    for (i = 0; i < {p}_desc.n_arrays; i++) {{
        cfg.counts[i] = {p}_desc.arrays[i].max_count;
    }}
    node = {p}_init(&ram, &cfg, &err);
    printf("%d %d %d\n", node != NULL, (int)err,
           fcan_node_ram_needed(&{p}_desc) > 0 && fcan_node_ram_needed(&{p}_desc) <= sizeof ram);
    return 0;
}}
"#
        );
        let exe = build_with(
            &dir,
            &p,
            &[("main", main), ("handlers", handler_stubs(&loaded))],
            Some(&lib),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(run(&exe), "1 0 1\n", "{}: init, error, RAM", case.name);
    }
}

#[test]
fn reserved_names_cover_fcan_h() {
    let h = std::fs::read_to_string(include_dir().join("fcan.h")).expect("read fcan.h");
    // Without comments: they mention names that are not declared.
    let mut code = String::new();
    let mut rest = h.as_str();
    while !rest.is_empty() {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                code.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |e| &rest[l + e..]);
            }
            (_, Some(b)) => {
                code.push_str(&rest[..b]);
                rest = rest[b..].find("*/").map_or("", |e| &rest[b + e + 2..]);
            }
            _ => {
                code.push_str(rest);
                rest = "";
            }
        }
    }
    let mut defined = std::collections::BTreeSet::new();
    for tok in code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if tok.starts_with("fcan_") || tok.starts_with("FCAN_") {
            defined.insert(tok.to_string());
        }
    }
    for l in code.lines() {
        if let Some(d) = l.trim().strip_prefix("#define ") {
            let name: String = d
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            defined.insert(name);
        }
    }
    assert!(defined.len() > 80, "{defined:?}");
    let missing: Vec<_> = defined
        .iter()
        .filter(|n| !fcan_codegen::c::FCAN_H_NAMES.contains(&n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "fcan.h defines names fcan_codegen::c::FCAN_H_NAMES lacks: {missing:?}"
    );
}

// ------------------------------------------------------------ tables and the blob

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn bits(v: &Scalar) -> u64 {
    let mut b = [0u8; 8];
    v.write(&mut b).expect("a scalar fits 8 bytes");
    u64::from_le_bytes(b)
}

/// The C program printing the node's blob, digest and every descriptor field.
fn printer(p: &str) -> String {
    format!(
        r#"
#include <stdio.h>
#include "{p}.h"

static void hex(const char *what, const uint8_t *b, uint32_t n)
{{
    uint32_t i;
    printf("%s ", what);
    for (i = 0; i < n; i++) {{
        printf("%02x", (unsigned)b[i]);
    }}
    printf("\n");
}}

int main(void)
{{
    const fcan_node_desc_t *d = &{p}_desc;
    unsigned i, j;
    hex("blob", {p}_schema_blob, {P}_SCHEMA_BLOB_LEN);
    hex("sha256", {p}_schema_sha256, 32);
    printf("abi_ok %d\n", d->abi == FCAN_ABI_VERSION);
    printf("blob_len %u\n", (unsigned)d->blob_len);
    printf("blob_ptr_ok %d\n", d->blob == {p}_schema_blob);
    hex("hash", d->hash, 8);
    printf("limits %u %u %u %u reserved %u %u %u\n", (unsigned)d->max_frames, (unsigned)d->max_copy_entries,
           (unsigned)d->service_buffer, (unsigned)d->service_reassembly,
           (unsigned)d->reserved[0], (unsigned)d->reserved[1], (unsigned)d->reserved[2]);
    printf("totals %lu %lu %lu %lu %lu %lu\n", (unsigned long)d->topic_bytes, (unsigned long)d->stage_bytes,
           (unsigned long)d->param_bytes, (unsigned long)d->topic_slots, (unsigned long)d->max_request,
           (unsigned long)d->max_response);
    printf("counts %u %u %u\n", (unsigned)d->n_types, (unsigned)d->n_arrays, (unsigned)d->n_blocks);
    for (i = 0; i < d->n_types; i++) {{
        const fcan_type_desc_t *t = &d->types[i];
        printf("type %u %s topics %u params %u services %u bytes %u %u %u\n", i, t->name,
               (unsigned)t->n_topics, (unsigned)t->n_params, (unsigned)t->n_services,
               (unsigned)t->topic_bytes, (unsigned)t->stage_bytes, (unsigned)t->param_bytes);
        for (j = 0; j < t->n_topics; j++) {{
            const fcan_topic_desc_t *x = &t->topics[j];
            printf("topic %u %u dir %u period %lu size %u offset %u stage %u reserved %u\n", i, j,
                   (unsigned)x->dir, (unsigned long)x->period_us, (unsigned)x->size, (unsigned)x->offset,
                   (unsigned)x->stage_offset, (unsigned)x->reserved);
        }}
        for (j = 0; j < t->n_params; j++) {{
            const fcan_param_desc_t *x = &t->params[j];
            printf("param %u %u type %u count %u offset %u flags %u default %016llx min %016llx max %016llx reserved %u %u\n",
                   i, j, (unsigned)x->scalar_type, (unsigned)x->count, (unsigned)x->offset, (unsigned)x->flags,
                   (unsigned long long)x->default_bits, (unsigned long long)x->min_bits,
                   (unsigned long long)x->max_bits, (unsigned)x->reserved[0], (unsigned)x->reserved[1]);
        }}
        for (j = 0; j < t->n_services; j++) {{
            printf("service %u %u %u %u\n", i, j, (unsigned)t->services[j].request_size,
                   (unsigned)t->services[j].response_size);
        }}
    }}
    for (i = 0; i < d->n_arrays; i++) {{
        const fcan_array_desc_t *a = &d->arrays[i];
        printf("array %u type %u max %u first %u reserved %u\n", i, (unsigned)a->type_index,
               (unsigned)a->max_count, (unsigned)a->first_block, (unsigned)a->reserved);
    }}
    for (i = 0; i < d->n_blocks; i++) {{
        const fcan_block_desc_t *b = &d->blocks[i];
        printf("block %u type %u array %u index %u topic %u stage %u param %u slot %u reserved %u\n", i,
               (unsigned)b->type_index, (unsigned)b->array, (unsigned)b->index, (unsigned)b->topic_offset,
               (unsigned)b->stage_offset, (unsigned)b->param_offset, (unsigned)b->topic_slot,
               (unsigned)b->reserved);
    }}
    return 0;
}}
"#,
        P = p.to_ascii_uppercase()
    )
}

/// What `printer` must print: the Rust backend's blob and digest (`generate`) and its
/// `DESC` tables (`fcan_codegen::rust::Tables`, from which the Rust template writes
/// them), with the schema's limits and params.
fn expected_desc(loaded: &Loaded) -> Vec<String> {
    let s = &loaded.schema;
    let rust = fcan_codegen::generate(loaded).expect("the Rust backend generates");
    let t = Tables::of(s, &Numbering::of(s).expect("numbers"));
    let l = &s.limits;
    let mut out = vec![
        format!("blob {}", hex(&rust.blob)),
        format!("sha256 {}", hex(&rust.digest.0)),
        "abi_ok 1".into(),
        format!("blob_len {}", rust.blob.len()),
        "blob_ptr_ok 1".into(),
        format!("hash {}", hex(&rust.digest.prefix().0)),
        format!(
            "limits {} {} {} {} reserved 0 0 0",
            l.max_frames, l.max_copy_entries, l.service_buffer, l.service_reassembly
        ),
        format!(
            "totals {} {} {} {} {} {}",
            t.topic_bytes,
            t.stage_bytes,
            t.param_bytes,
            t.topic_slots,
            t.max_request,
            t.max_response
        ),
        format!(
            "counts {} {} {}",
            s.types.len(),
            s.instances.len(),
            t.blocks.len()
        ),
    ];
    for (i, (ty, tt)) in s.types.iter().zip(&t.types).enumerate() {
        out.push(format!(
            "type {i} {} topics {} params {} services {} bytes {} {} {}",
            ty.name,
            ty.topics.len(),
            ty.params.len(),
            ty.services.len(),
            tt.topic_bytes,
            tt.stage_bytes,
            tt.param_bytes
        ));
        for (j, (tp, (size, off, stage))) in ty.topics.iter().zip(&tt.topics).enumerate() {
            let dir = match tp.dir {
                DataDirection::M2s => 0,
                DataDirection::S2m => 1,
            };
            out.push(format!(
                "topic {i} {j} dir {dir} period {} size {size} offset {off} stage {stage} reserved 0",
                tp.period_us
            ));
        }
        for (j, (q, (_, off))) in ty.params.iter().zip(&tt.params).enumerate() {
            let flags = u8::from(q.min.is_some()) | (u8::from(q.max.is_some()) << 1);
            out.push(format!(
                "param {i} {j} type {} count {} offset {off} flags {flags} default {:016x} min {:016x} max {:016x} reserved 0 0",
                q.ty.code(),
                q.len.unwrap_or(1),
                bits(&q.default),
                q.min.as_ref().map_or(0, bits),
                q.max.as_ref().map_or(0, bits),
            ));
        }
        for (j, (req, resp)) in tt.services.iter().enumerate() {
            out.push(format!("service {i} {j} {req} {resp}"));
        }
    }
    let numbering = Numbering::of(s).expect("numbers");
    for (i, a) in s.instances.iter().enumerate() {
        let ti = s.types.iter().position(|x| x.name == a.ty).expect("type");
        out.push(format!(
            "array {i} type {ti} max {} first {} reserved 0",
            a.max_count, numbering.array_base[i]
        ));
    }
    for (i, b) in t.blocks.iter().enumerate() {
        out.push(format!(
            "block {i} type {} array {} index {} topic {} stage {} param {} slot {} reserved 0",
            b.type_index,
            b.array,
            b.index,
            b.topic_offset,
            b.stage_offset,
            b.param_offset,
            b.topic_slot
        ));
    }
    out
}

/// The header's `#define NAME VALUE` lines, as a map.
fn defines(header: &str) -> std::collections::BTreeMap<String, String> {
    header
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|d| d.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// The header's numbers besides the tables: instance arrays, the RAM size's counts.
fn check_header_numbers(loaded: &Loaded, header: &str) {
    let s = &loaded.schema;
    let p = stem(loaded);
    let m = p.to_ascii_uppercase();
    let defs = defines(header);
    let t = Tables::of(s, &Numbering::of(s).expect("numbers"));
    let numbering = Numbering::of(s).expect("numbers");
    assert_eq!(defs[&format!("{m}_ARRAYS")], s.instances.len().to_string());
    for (i, a) in s.instances.iter().enumerate() {
        // `out{i}` → OUT (as the Rust backend's `OUT_MAX_COUNT`).
        let ns =
            a.ns.replace("{i}", "_")
                .split('_')
                .filter(|x| !x.is_empty())
                .collect::<Vec<_>>()
                .join("_")
                .to_ascii_uppercase();
        assert_eq!(
            defs[&format!("{m}_{ns}_MAX_COUNT")],
            a.max_count.to_string(),
            "{ns}"
        );
        assert_eq!(
            defs[&format!("{m}_{ns}(i)")],
            format!("((uint8_t)({} + (i)))", numbering.array_base[i])
        );
    }
    let services: usize = s.types.iter().map(|t| t.services.len()).sum();
    let (slots, buf) = if services > 0 {
        // NodeDesc::required_service_buffer, as fcan-node-c sizes a slot.
        let pair = t
            .types
            .iter()
            .flat_map(|x| x.services.iter().map(|(a, b)| a + b))
            .max()
            .unwrap_or(0);
        (
            s.limits.service_reassembly.max(1) as usize,
            fcan_core::limits::service_slot_bytes(
                s.limits.service_buffer as usize,
                t.max_request,
                t.max_response,
                pair,
            ),
        )
    } else {
        (0, 0)
    };
    let ram = format!(
        "FCAN_RAM_BYTES({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {slots}, {buf})",
        s.types.len(),
        s.types.iter().map(|t| t.topics.len()).sum::<usize>(),
        s.types.iter().map(|t| t.params.len()).sum::<usize>(),
        services,
        t.blocks.len(),
        s.instances.len(),
        t.topic_bytes,
        t.stage_bytes,
        t.param_bytes,
        t.topic_slots,
        s.limits.max_frames,
        s.limits.max_copy_entries,
    );
    assert_eq!(defs[&format!("{m}_RAM_BYTES")], ram);
    assert_eq!(
        defs[&format!("{m}_SCHEMA_BLOB_LEN")],
        fcan_core::blob::encode(s).len().to_string()
    );
}

#[test]
fn blob_digest_and_descriptor_are_the_rust_backends() {
    require_gcc();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cases: Vec<Case> = example_cases()
        .into_iter()
        .filter(|c| c.name == "io_board" || c.name == "motor_driver")
        .collect();
    assert_eq!(cases.len(), 2, "io_board and motor_driver examples");
    match fibril_cases() {
        Some(f) => cases.extend(f),
        None => say_fibril_absent(),
    }
    for case in &cases {
        let loaded = load(case);
        let p = stem(&loaded);
        let dir = tmp.path().join(&case.name);
        gen(&case.files, &dir);
        // schema.bin and schema.sha256 byte for byte as `generate` writes them.
        let rust_dir = tmp.path().join(format!("{}_rust", case.name));
        let rust = fcan_codegen::compile_files(&case.files).expect("generate");
        rust.write_to(&rust_dir).expect("write");
        for f in ["schema.bin", "schema.sha256"] {
            assert_eq!(
                std::fs::read(dir.join(f)).expect("read"),
                std::fs::read(rust_dir.join(f)).expect("read"),
                "{}: {f}",
                case.name
            );
        }
        let header = std::fs::read_to_string(dir.join(format!("{p}.h"))).expect("header");
        check_header_numbers(&loaded, &header);
        let exe = build(
            &dir,
            &p,
            &[
                ("printer", printer(&p)),
                ("handlers", handler_stubs(&loaded)),
            ],
        )
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let got: Vec<String> = run(&exe).lines().map(str::to_string).collect();
        let want = expected_desc(&loaded);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{}: line {i} of the descriptor", case.name);
        }
        assert_eq!(got.len(), want.len(), "{}: descriptor lines", case.name);
        // The blob the descriptor serves is schema.bin.
        assert_eq!(
            got[0],
            format!(
                "blob {}",
                hex(&std::fs::read(dir.join("schema.bin")).expect("bin"))
            )
        );
    }
}

// ------------------------------------------------------------ codecs and dispatch

/// io_board's application for the codec and dispatch test: handlers that record and
/// answer, and a `main` that prints what the generated functions did.
const IO_MAIN: &str = r#"
#include <stdio.h>
#include <string.h>
#include "fcan_io_board.h"

extern fcan_node_config_t stub_cfg;
extern uint8_t stub_counts[256];
extern uint8_t stub_sent[256];
extern uint32_t stub_sent_len;
extern int stub_sent_block, stub_sent_index, stub_sent_kind;
extern uint8_t stub_topic[256];
extern uint32_t stub_topic_len;
extern uint32_t stub_generation;

static fcan_deferred_t kept;

static void hex(const char *what, const uint8_t *b, uint32_t n)
{
    uint32_t i;
    printf("%s ", what);
    for (i = 0; i < n; i++) {
        printf("%02x", (unsigned)b[i]);
    }
    printf("\n");
}

int32_t fcan_io_board_digital_out_set(fcan_node_t *node, uint8_t block,
    const fcan_io_board_digital_out_set_request_t *request,
    fcan_io_board_digital_out_set_response_t *response, const fcan_deferred_t *token)
{
    (void)node;
    printf("handler set block %u on %d service %u zeroed %d\n", (unsigned)block, (int)request->on,
           (unsigned)token->service, !response->success && response->settle_ms == 0);
    response->success = request->on;
    response->settle_ms = 500;
    return FCAN_REPLY_OK;
}

int32_t fcan_io_board_analog_sensor_configure(fcan_node_t *node, uint8_t block,
    const fcan_io_board_analog_sensor_configure_request_t *request,
    fcan_io_board_analog_sensor_configure_response_t *response, const fcan_deferred_t *token)
{
    (void)node; (void)token;
    printf("handler configure block %u mask %04x averaging %u label %c%c\n", (unsigned)block,
           (unsigned)request->channel_mask, (unsigned)request->averaging, request->label[0], request->label[11]);
    response->accepted = true;
    return FCAN_REPLY_OK;
}

int32_t fcan_io_board_analog_sensor_calibrate(fcan_node_t *node, uint8_t block,
    const fcan_io_board_analog_sensor_calibrate_request_t *request,
    fcan_io_board_analog_sensor_calibrate_response_t *response, const fcan_deferred_t *token)
{
    (void)node; (void)request; (void)response;
    printf("handler calibrate block %u\n", (unsigned)block);
    kept = *token;
    return FCAN_REPLY_ACCEPTED;
}

void fcan_io_board_digital_out_params_changed(fcan_node_t *node, uint8_t block, uint32_t changed)
{ (void)node; printf("changed digital_out %u %lx\n", (unsigned)block, (unsigned long)changed); }
void fcan_io_board_digital_in_params_changed(fcan_node_t *node, uint8_t block, uint32_t changed)
{ (void)node; printf("changed digital_in %u %lx\n", (unsigned)block, (unsigned long)changed); }
void fcan_io_board_analog_sensor_params_changed(fcan_node_t *node, uint8_t block, uint32_t changed)
{ (void)node; printf("changed analog_sensor %u %lx\n", (unsigned)block, (unsigned long)changed); }

static int32_t transmit(void *user, const fcan_frame_t *frame) { (void)user; (void)frame; return 0; }

static int32_t call(fcan_node_t *node, uint8_t block, uint8_t service, const uint8_t *req, uint32_t len)
{
    fcan_service_call_t c;
    uint8_t resp[64];
    uint32_t resp_len = 99;
    int32_t r;
    memset(&c, 0, sizeof c);
    c.block = block;
    c.service = service;
    c.request_len = len;
    c.request = req;
    c.token.block = block;
    c.token.service = service;
    c.token.generation = 7;
    r = stub_cfg.callbacks.service(stub_cfg.callbacks.user, node, &c, resp, sizeof resp, &resp_len);
    printf("reply %d len %u ", (int)r, (unsigned)resp_len);
    hex("bytes", resp, r == FCAN_REPLY_OK ? resp_len : 0);
    return r;
}

int main(void)
{
    static fcan_io_board_ram_t ram;
    fcan_io_board_config_t cfg;
    fcan_node_t *node;
    int32_t err = -100;
    int32_t rc;
    uint8_t buf[64];
    unsigned i;

    /* Codecs. */
    {
        fcan_io_board_analog_sensor_samples_t s;
        for (i = 0; i < 16; i++) {
            s.raw[i] = (int16_t)((int)i * 3001 - 24000);
        }
        s.sequence = 0xBEEF;
        printf("samples_pack %d ", (int)fcan_io_board_analog_sensor_samples_pack(&s, buf));
        hex("bytes", buf, FCAN_IO_BOARD_ANALOG_SENSOR_SAMPLES_SIZE);
    }
    {
        fcan_io_board_digital_out_set_response_t r, back;
        r.success = true;
        r.settle_ms = 0x1234;
        printf("set_response_pack %d ", (int)fcan_io_board_digital_out_set_response_pack(&r, buf));
        hex("bytes", buf, FCAN_IO_BOARD_DIGITAL_OUT_SET_RESPONSE_SIZE);
        rc = fcan_io_board_digital_out_set_response_unpack(&back, buf);
        printf("set_response_unpack %d %d %u\n", (int)rc, (int)back.success, (unsigned)back.settle_ms);
        buf[0] = 2;
        printf("set_response_bool2 %d\n", (int)fcan_io_board_digital_out_set_response_unpack(&back, buf));
    }
    {
        fcan_io_board_analog_sensor_thresholds_t t, back;
        for (i = 0; i < 8; i++) {
            t.low[i] = (int16_t)(-(int)i * 100 - 1);
            t.high[i] = (int16_t)(i * 1000);
        }
        t.enable = true;
        printf("thresholds_pack %d ", (int)fcan_io_board_analog_sensor_thresholds_pack(&t, buf));
        hex("bytes", buf, FCAN_IO_BOARD_ANALOG_SENSOR_THRESHOLDS_SIZE);
        rc = fcan_io_board_analog_sensor_thresholds_unpack(&back, buf);
        printf("thresholds_unpack %d same %d\n", (int)rc,
               memcmp(back.low, t.low, sizeof t.low) == 0 && memcmp(back.high, t.high, sizeof t.high) == 0
               && back.enable);
        buf[32] = 2;
        printf("thresholds_bool2 %d\n", (int)fcan_io_board_analog_sensor_thresholds_unpack(&back, buf));
    }
    {
        fcan_io_board_digital_in_edge_t e;
        e.level = true;
        e.count = 0xDEADBEEFu;
        printf("edge_pack %d ", (int)fcan_io_board_digital_in_edge_pack(&e, buf));
        hex("bytes", buf, FCAN_IO_BOARD_DIGITAL_IN_EDGE_SIZE);
    }

    /* Init: the config reaches fcan_node_init with the generated dispatch. */
    memset(&cfg, 0, sizeof cfg);
    cfg.node_id = 5;
    cfg.controller = FCAN_CONTROLLER_FD;
    cfg.boot_id = 0xCAFEu;
    cfg.counts[0] = 3;
    cfg.counts[1] = 8;
    cfg.counts[2] = 1;
    cfg.transmit = transmit;
    node = fcan_io_board_init(&ram, &cfg, &err);
    printf("init %d err %d id %u ctl %u boot %lx n_counts %u counts %u %u %u callbacks %d %d %d\n",
           node == (fcan_node_t *)&ram, (int)err, (unsigned)stub_cfg.node_id, (unsigned)stub_cfg.controller,
           (unsigned long)stub_cfg.boot_id, (unsigned)stub_cfg.n_counts, (unsigned)stub_counts[0],
           (unsigned)stub_counts[1], (unsigned)stub_counts[2], stub_cfg.callbacks.service != NULL,
           stub_cfg.callbacks.params_changed != NULL, stub_cfg.callbacks.transmit == transmit);
    printf("blocks %u %u %u\n", (unsigned)FCAN_IO_BOARD_OUT(3), (unsigned)FCAN_IO_BOARD_IN(2),
           (unsigned)FCAN_IO_BOARD_ANALOG(0));

    /* Params: the stub serves the descriptor's defaults. */
    {
        fcan_io_board_analog_sensor_params_t a;
        fcan_io_board_digital_out_params_t o;
        uint8_t d = 0;
        memset(&a, 0x55, sizeof a);
        memset(&o, 0x55, sizeof o);
        rc = fcan_io_board_analog_sensor_params(node, FCAN_IO_BOARD_ANALOG(0), &a);
        printf("analog_params %d gain %g %g offset %g rate %u\n", (int)rc,
               (double)a.gain[0], (double)a.gain[15], (double)a.offset[7], (unsigned)a.rate_hz);
        rc = fcan_io_board_digital_out_params(node, FCAN_IO_BOARD_OUT(1), &o);
        printf("out_params %d min_on %u active_low %d\n", (int)rc, (unsigned)o.min_on_ms, (int)o.active_low);
        rc = fcan_io_board_digital_in_param_debounce_ms(node, FCAN_IO_BOARD_IN(0), &d);
        printf("debounce %d %u\n", (int)rc, (unsigned)d);
    }

    /* Publish. */
    {
        fcan_io_board_digital_out_state_t st;
        st.on = true;
        st.fault = false;
        rc = fcan_io_board_digital_out_publish_state(node, FCAN_IO_BOARD_OUT(3), &st);
        printf("publish %d kind %d block %d topic %d ", (int)rc, stub_sent_kind, stub_sent_block,
               stub_sent_index);
        hex("bytes", stub_sent, stub_sent_len);
    }

    /* Take: nothing yet, then a value, then one that does not decode. */
    {
        fcan_io_board_analog_sensor_thresholds_t t, z;
        fcan_topic_info_t info;
        memset(&z, 0, sizeof z);
        memset(&t, 0x55, sizeof t);
        info.generation = 99;
        stub_topic_len = 33;
        memset(stub_topic, 0x11, 33);
        stub_generation = 0;
        rc = fcan_io_board_analog_sensor_take_thresholds(node, 16, &t, &info);
        printf("take_none %d gen %lu zero %d\n", (int)rc, (unsigned long)info.generation,
               memcmp(&t, &z, sizeof t) == 0);
        for (i = 0; i < 33; i++) {
            stub_topic[i] = (uint8_t)i;
        }
        stub_topic[32] = 1;
        stub_generation = 7;
        rc = fcan_io_board_analog_sensor_take_thresholds(node, 16, &t, &info);
        printf("take %d gen %lu at %lu low0 %d high7 %d enable %d\n", (int)rc,
               (unsigned long)info.generation, (unsigned long)info.received_at_us, (int)t.low[0],
               (int)t.high[7], (int)t.enable);
        printf("take_null_info %d\n", (int)fcan_io_board_analog_sensor_take_thresholds(node, 16, &t, NULL));
        stub_topic[32] = 2;
        rc = fcan_io_board_analog_sensor_take_thresholds(node, 16, &t, &info);
        printf("take_bad %d zero %d\n", (int)rc, memcmp(&t, &z, sizeof t) == 0);
    }

    /* Services through the callback fcan_node_init was given. */
    {
        uint8_t on = 1, two = 2;
        uint8_t conf[15] = {0x34, 0x12, 9, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'z'};
        fcan_io_board_analog_sensor_calibrate_response_t done;
        fcan_io_board_digital_out_set_response_t wrong;
        call(node, FCAN_IO_BOARD_OUT(2), FCAN_IO_BOARD_DIGITAL_OUT_SERVICE_SET, &on, 1);
        call(node, FCAN_IO_BOARD_OUT(2), FCAN_IO_BOARD_DIGITAL_OUT_SERVICE_SET, &two, 1);
        call(node, FCAN_IO_BOARD_OUT(2), FCAN_IO_BOARD_DIGITAL_OUT_SERVICE_SET, &on, 0);
        call(node, FCAN_IO_BOARD_IN(0), 0, &on, 1);
        call(node, FCAN_IO_BOARD_OUT(0), 1, &on, 1);
        call(node, 17, 0, &on, 1);
        call(node, FCAN_IO_BOARD_ANALOG(0), FCAN_IO_BOARD_ANALOG_SENSOR_SERVICE_CONFIGURE, conf, 15);
        call(node, FCAN_IO_BOARD_ANALOG(0), FCAN_IO_BOARD_ANALOG_SENSOR_SERVICE_CALIBRATE, NULL, 0);
        memset(&done, 0, sizeof done);
        memset(&wrong, 0, sizeof wrong);
        printf("complete_wrong_service %d\n", (int)fcan_io_board_digital_out_set_complete(node, &kept, &wrong));
        rc = fcan_io_board_analog_sensor_calibrate_complete(node, &kept, &done);
        printf("complete %d kind %d block %d service %d len %u\n", (int)rc, stub_sent_kind,
               stub_sent_block, stub_sent_index, (unsigned)stub_sent_len);
    }

    /* Parameter batches, routed by block type. */
    stub_cfg.callbacks.params_changed(stub_cfg.callbacks.user, node, FCAN_IO_BOARD_OUT(7), 3);
    stub_cfg.callbacks.params_changed(stub_cfg.callbacks.user, node, FCAN_IO_BOARD_IN(1), 1);
    stub_cfg.callbacks.params_changed(stub_cfg.callbacks.user, node, FCAN_IO_BOARD_ANALOG(0), 4);
    stub_cfg.callbacks.params_changed(stub_cfg.callbacks.user, node, 200, 1);
    printf("end\n");
    return 0;
}
"#;

/// Little-endian, back to back: the wire rule, written here on its own.
fn le(parts: &[&[u8]]) -> String {
    hex(&parts.concat())
}

#[test]
fn io_board_codecs_params_topics_and_dispatch() {
    require_gcc();
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = vec![workspace_root().join("schema/examples/io_board.yaml")];
    let dir = tmp.path().join("io");
    gen(&files, &dir);
    let exe = build(&dir, "fcan_io_board", &[("main", IO_MAIN.to_string())])
        .unwrap_or_else(|e| panic!("{e}"));
    let got = run(&exe);

    let samples: Vec<u8> = (0..16)
        .flat_map(|i: i32| ((i * 3001 - 24000) as i16).to_le_bytes())
        .chain(0xBEEFu16.to_le_bytes())
        .collect();
    let thresholds: Vec<u8> = (0..8)
        .flat_map(|i: i32| ((-i * 100 - 1) as i16).to_le_bytes())
        .chain((0..8).flat_map(|i: i32| ((i * 1000) as i16).to_le_bytes()))
        .chain([1u8])
        .collect();
    // What `take` decodes from bytes 0, 1, 2, …: low[0] = 0x0100, high[7] = bytes 30, 31.
    let low0 = i16::from_le_bytes([0, 1]);
    let high7 = i16::from_le_bytes([30, 31]);
    let want = [
        format!("samples_pack 34 bytes {}", hex(&samples)),
        format!(
            "set_response_pack 3 bytes {}",
            le(&[&[1], &0x1234u16.to_le_bytes()])
        ),
        "set_response_unpack 3 1 4660".into(),
        "set_response_bool2 -1".into(),
        format!("thresholds_pack 33 bytes {}", hex(&thresholds)),
        "thresholds_unpack 33 same 1".into(),
        "thresholds_bool2 -1".into(),
        format!(
            "edge_pack 5 bytes {}",
            le(&[&[1], &0xDEAD_BEEFu32.to_le_bytes()])
        ),
        "init 1 err 0 id 5 ctl 1 boot cafe n_counts 3 counts 3 8 1 callbacks 1 1 1".into(),
        "blocks 3 10 16".into(),
        "analog_params 0 gain 1 1 offset 0 rate 100".into(),
        "out_params 0 min_on 0 active_low 0".into(),
        "debounce 0 5".into(),
        "publish 0 kind 1 block 3 topic 0 bytes 0100".into(),
        "take_none 0 gen 0 zero 1".into(),
        format!("take 0 gen 7 at 1234 low0 {low0} high7 {high7} enable 1"),
        "take_null_info 0".into(),
        "take_bad -12 zero 1".into(),
        // set on block 2: decoded, handler answers, response packed.
        "handler set block 2 on 1 service 0 zeroed 1".into(),
        format!("reply 0 len 3 bytes {}", le(&[&[1], &500u16.to_le_bytes()])),
        // A bool byte of 2, and a short request: BAD_REQUEST, no handler.
        "reply 4 len 0 bytes ".into(),
        "reply 4 len 0 bytes ".into(),
        // A type without services, a service the type lacks, a block the node lacks.
        "reply 4 len 0 bytes ".into(),
        "reply 4 len 0 bytes ".into(),
        "reply 4 len 0 bytes ".into(),
        "handler configure block 16 mask 1234 averaging 9 label az".into(),
        "reply 0 len 1 bytes 01".into(),
        "handler calibrate block 16".into(),
        "reply 1 len 0 bytes ".into(),
        "complete_wrong_service -10".into(),
        "complete 0 kind 2 block 16 service 1 len 0".into(),
        "changed digital_out 7 3".into(),
        "changed digital_in 9 1".into(),
        "changed analog_sensor 16 4".into(),
        "end".into(),
    ];
    let got: Vec<&str> = got.lines().collect();
    for (i, w) in want.iter().enumerate() {
        assert_eq!(
            got.get(i).copied(),
            Some(w.as_str()),
            "line {i}:\n{}",
            got.join("\n")
        );
    }
    assert_eq!(got.len(), want.len(), "{}", got.join("\n"));
}

/// Every scalar type through a message codec and a param read, on `C_NAMES`.
#[test]
fn every_scalar_type_packs_by_the_wire_rule() {
    require_gcc();
    let tmp = tempfile::tempdir().expect("tempdir");
    let f = tmp.path().join("c_names.yaml");
    std::fs::write(&f, C_NAMES).expect("write");
    let files = vec![f];
    let dir = tmp.path().join("out");
    gen(&files, &dir);
    let loaded = load_files(&files).expect("loads");
    let main = r#"
#include <stdio.h>
#include <string.h>
#include "fcan_c_names.h"
static int32_t tx(void *user, const fcan_frame_t *frame) { (void)user; (void)frame; return 0; }
int main(void)
{
    static fcan_c_names_ram_t ram;
    fcan_c_names_config_t cfg;
    fcan_c_names_odd_int_t m, back;
    fcan_c_names_odd_params_t p;
    fcan_node_t *node;
    uint8_t buf[FCAN_C_NAMES_ODD_INT_SIZE];
    int32_t rc;
    unsigned i;
    memset(&m, 0, sizeof m);
    m.default_ = 0xAB;
    m.class_ = -5;
    m.true_ = true;
    m.bool_ = 0xBEEF;
    m.INT8_MAX_ = -12345;
    m.this_ = 0xDEADBEEFu;
    m.new_ = -123456789;
    m.linux_ = 0x0123456789ABCDEFull;
    m.register_ = -1234567890123ll;
    m.float_ = 1.5f;
    m.double_[0] = -2.25;
    m.double_[1] = 1e300;
    rc = fcan_c_names_odd_int_pack(&m, buf);
    printf("pack %d ", (int)rc);
    for (i = 0; i < sizeof buf; i++) {
        printf("%02x", (unsigned)buf[i]);
    }
    printf("\n");
    memset(&back, 0x55, sizeof back);
    rc = fcan_c_names_odd_int_unpack(&back, buf);
    printf("unpack %d same %d\n", (int)rc,
           back.default_ == m.default_ && back.class_ == m.class_ && back.true_ == m.true_
           && back.bool_ == m.bool_ && back.INT8_MAX_ == m.INT8_MAX_ && back.this_ == m.this_
           && back.new_ == m.new_ && back.linux_ == m.linux_ && back.register_ == m.register_
           && back.float_ == m.float_ && back.double_[0] == m.double_[0] && back.double_[1] == m.double_[1]);
    memset(&cfg, 0, sizeof cfg);
    cfg.node_id = 1;
    cfg.counts[0] = 2;
    cfg.transmit = tx;
    node = fcan_c_names_init(&ram, &cfg, &rc);
    memset(&p, 0x55, sizeof p);
    rc = fcan_c_names_odd_params(node, FCAN_C_NAMES_ODD(1), &p);
    printf("params %d %g %g %d %d %lld\n", (int)rc, (double)p.float_, p.gain__kp, (int)p.true_,
           (int)p.INT8_MAX_, (long long)p.class_);
    return 0;
}
"#;
    let exe = build(
        &dir,
        "fcan_c_names",
        &[("main", main.into()), ("handlers", handler_stubs(&loaded))],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let got = run(&exe);
    let wire = le(&[
        &[0xAB],
        &(-5i8).to_le_bytes(),
        &[1],
        &0xBEEFu16.to_le_bytes(),
        &(-12345i16).to_le_bytes(),
        &0xDEAD_BEEFu32.to_le_bytes(),
        &(-123_456_789i32).to_le_bytes(),
        &0x0123_4567_89AB_CDEFu64.to_le_bytes(),
        &(-1_234_567_890_123i64).to_le_bytes(),
        &1.5f32.to_le_bytes(),
        &(-2.25f64).to_le_bytes(),
        &1e300f64.to_le_bytes(),
    ]);
    assert_eq!(
        got,
        format!("pack 51 {wire}\nunpack 51 same 1\nparams 0 1.5 -2.25 1 -3 -1\n")
    );
}

// ------------------------------------------------------------ errors

#[test]
fn a_schema_with_errors_writes_nothing_and_says_where() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // A schema error (as `check` and `generate` report it) and two C naming errors.
    let cases = [
        (
            "bad.yaml",
            "node: bad{i}\nprotocol: 2\ntypes:\n  T:\n    topics:\n      t: { dir: sideways, fields: { a: u8 } }\ninstances:\n  - { type: T, max_count: 1, ns: t }\n",
            "bad.yaml:6:",
        ),
        (
            "clash.yaml",
            "node: clash{i}\nprotocol: 2\nlimits: { service_reassembly: 1 }\ntypes:\n  T:\n    topics:\n      set_request: { dir: s2m, period_us: 0, fields: { a: u8 } }\n    services:\n      set: { request: { a: u8 }, response: {} }\ninstances:\n  - { type: T, max_count: 1, ns: t }\n",
            "clash.yaml:9:7: error: service `set` (request) gives the C name `fcan_clash_t_set_request_t`",
        ),
        (
            "node.yaml",
            "node: node{i}\nprotocol: 2\ntypes:\n  T:\n    params: { p: { type: u8, default: 0 } }\ninstances:\n  - { type: T, max_count: 1, ns: t }\n",
            "node.yaml:1:1: error: node `node{i}` gives the C name `fcan_node_",
        ),
    ];
    for (file, yaml, expect) in cases {
        let f = tmp.path().join(file);
        std::fs::write(&f, yaml).expect("write");
        let out_dir = tmp.path().join(format!("out_{file}"));
        let out = bin()
            .arg("c")
            .arg(&f)
            .arg("--out")
            .arg(&out_dir)
            .output()
            .expect("runs");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{file}: {stderr}");
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&format!("{}", tmp.path().join(expect).display()))),
            "{file}: expected `{expect}` in:\n{stderr}"
        );
        for l in stderr.lines() {
            let rest = l
                .strip_prefix(&format!("{}:", f.display()))
                .unwrap_or_else(|| panic!("{file}: not FILE:LINE:COL: {l}"));
            let mut parts = rest.splitn(3, ':');
            assert!(
                parts.next().is_some_and(|n| n.parse::<u32>().is_ok()),
                "{l}"
            );
            assert!(
                parts.next().is_some_and(|n| n.parse::<u32>().is_ok()),
                "{l}"
            );
            assert!(
                parts.next().is_some_and(|r| r.starts_with(" error: ")),
                "{l}"
            );
        }
        assert!(text(&out.stdout).is_empty(), "{file}: stdout");
        assert!(
            !out_dir.exists(),
            "{file}: {} was created",
            out_dir.display()
        );
    }
    // The schema error is the one `generate` reports, word for word.
    let f = tmp.path().join("bad.yaml");
    let c = bin()
        .arg("c")
        .arg(&f)
        .arg("--out")
        .arg(tmp.path().join("x"))
        .output()
        .expect("runs");
    let g = bin()
        .arg("generate")
        .arg(&f)
        .arg("--out")
        .arg(tmp.path().join("y"))
        .output()
        .expect("runs");
    assert_eq!(text(&c.stderr), text(&g.stderr));
}

#[test]
fn a_missing_handler_is_a_link_error_naming_it() {
    require_gcc();
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = vec![workspace_root().join("schema/examples/io_board.yaml")];
    let dir = tmp.path().join("io");
    gen(&files, &dir);
    let main = r#"
#include "fcan_io_board.h"
static int32_t transmit(void *user, const fcan_frame_t *frame) { (void)user; (void)frame; return 0; }
int main(void)
{
    static fcan_io_board_ram_t ram;
    fcan_io_board_config_t cfg = { 0 };
    int32_t err;
    cfg.node_id = 1;
    cfg.transmit = transmit;
    return fcan_io_board_init(&ram, &cfg, &err) == 0;
}
"#;
    // Every handler but one: the link fails and names the one left out.
    let loaded = load_files(&files).expect("loads");
    let all = handler_stubs(&loaded);
    let without_set: String = {
        let mut lines = all.lines().peekable();
        let mut out = String::new();
        while let Some(l) = lines.next() {
            if l.starts_with("int32_t fcan_io_board_digital_out_set(") {
                lines.next(); // its body
                continue;
            }
            out.push_str(l);
            out.push('\n');
        }
        out
    };
    assert_ne!(without_set, all);
    let err = build(
        &dir,
        "fcan_io_board",
        &[("main", main.into()), ("handlers", without_set)],
    )
    .expect_err("links without the handler");
    assert!(
        err.contains("fcan_io_board_digital_out_set") && err.contains("undefined reference"),
        "{err}"
    );
    // No handler at all: every one is named.
    let err = build(&dir, "fcan_io_board", &[("main", main.into())]).expect_err("links");
    for h in [
        "fcan_io_board_digital_out_set",
        "fcan_io_board_analog_sensor_configure",
        "fcan_io_board_analog_sensor_calibrate",
        "fcan_io_board_digital_out_params_changed",
        "fcan_io_board_digital_in_params_changed",
        "fcan_io_board_analog_sensor_params_changed",
    ] {
        assert!(err.contains(h), "{h} not named:\n{err}");
    }
    // With all of them it links and runs.
    let exe = build(
        &dir,
        "fcan_io_board",
        &[("main", main.into()), ("handlers", all)],
    )
    .expect("links with every handler");
    run(&exe);
}
