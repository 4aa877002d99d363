//! The generated Rust compiles and agrees with fcan-core.
//!
//! One scratch workspace under the system temp dir holds:
//! - `gen`: a `#![no_std]`, `#![deny(missing_docs)]` library with one module per good
//!   corpus schema, per example schema (and per fibril node when `../shared` exists), each
//!   with an `App` implementation; built with `RUSTFLAGS=-D warnings` for the host and
//!   for `thumbv7em-none-eabihf`, and linted with `cargo clippy -- -D warnings` for both;
//!   its host tests decode every `BLOB` with `fcan_core::blob::decode`, number it with
//!   `Numbering::of` and compare with the generated `DESC` and constants, then boot a
//!   `Node` on the runtime and read every instance's params back as the schema defaults;
//! - `missing_handler`: an `App` that leaves one service handler out, which must not
//!   compile.
//!
//! The inner builds use their own target directory so they do not wait on the outer
//! build lock.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    ensure_clippy, ensure_target, example_cases, fibril_cases, good_cases, say_fibril_absent,
    workspace_root, Case,
};
use fcan_codegen::rust::{ident, pascal, snake, upper};
use fcan_core::ir::Schema;
use fcan_core::numbering::Numbering;

const TARGET: &str = "thumbv7em-none-eabihf";

/// A name unique to this checkout, so two clones testing at once do not share files.
fn tag() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in workspace_root().display().to_string().bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("fcan-codegen-compile-test-{}", tag()))
}

fn inner_target() -> PathBuf {
    std::env::temp_dir().join(format!("fcan-codegen-compile-target-{}", tag()))
}

fn cargo(dir: &Path, args: &[&str]) -> (bool, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", inner_target())
        .env("RUSTFLAGS", "-D warnings")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .expect("cargo runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).expect("write");
    }
}

/// An `App` for a schema: every service answers `Reply::Ok(Default::default())`.
fn app_impl(module: &str, schema: &Schema) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "/// An application for `{module}`.");
    let _ = writeln!(s, "pub mod {module}_app {{");
    let _ = writeln!(s, "    use super::{module}::*;");
    let _ = writeln!(
        s,
        "    #[allow(unused_imports)]\n    use ::fcan_runtime_nostd::{{Event, Reply}};"
    );
    let _ = writeln!(s, "    /// Counts what it is asked.");
    let _ = writeln!(s, "    #[derive(Default)]");
    let _ = writeln!(
        s,
        "    pub struct TestApp {{\n        /// Service calls.\n        pub calls: u32,\n        /// Events.\n        pub events: u32,\n        /// Params-changed calls.\n        pub changes: u32,\n    }}"
    );
    for t in &schema.types {
        let m = ident(&snake(&t.name));
        let _ = writeln!(s, "    impl {m}::Handler for TestApp {{");
        for sv in &t.services {
            let base = pascal(&sv.name);
            let _ = writeln!(
                s,
                "        fn {}(&mut self, handle: {m}::Handle<'_>, request: {m}::{base}Request, token: Deferred<{m}::{base}Response>) -> Reply<{m}::{base}Response> {{\n            let _ = (handle.instance(), request, token);\n            self.calls += 1;\n            Reply::Ok(Default::default())\n        }}",
                ident(&sv.name)
            );
        }
        let _ = writeln!(
            s,
            "        fn on_params_changed(&mut self, _handle: {m}::Handle<'_>, _changed: u32) {{\n            self.changes += 1;\n        }}"
        );
        let _ = writeln!(s, "    }}");
    }
    let _ = writeln!(
        s,
        "    impl App for TestApp {{\n        fn on_event(&mut self, _event: Event) {{\n            self.events += 1;\n        }}\n    }}\n}}"
    );
    s
}

/// Host test for one module: the generated tables against fcan-core's numbering of the
/// decoded blob, and a node booted on the runtime.
fn agree_test(module: &str, schema: &Schema) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "#[test]\nfn {module}_agrees_with_core() {{");
    let _ = writeln!(s, "    use gen::{module} as g;");
    let _ = writeln!(
        s,
        "    let (schema, n) = check_tables(&g::BLOB, &g::SCHEMA_SHA256, &g::DESC);"
    );
    let _ = writeln!(s, "    assert_eq!(g::NODE_NAME, schema.node);");
    let _ = writeln!(s, "    assert_eq!(g::PROTOCOL, schema.protocol);");
    let _ = writeln!(s, "    assert_eq!(g::ARRAY_COUNT, schema.instances.len());");
    let _ = writeln!(
        s,
        "    for (i, a) in schema.instances.iter().enumerate() {{ assert_eq!(g::MAX_COUNTS[i] as u32, a.max_count); }}"
    );
    for (ti, t) in schema.types.iter().enumerate() {
        let m = format!("g::{}", ident(&snake(&t.name)));
        let _ = writeln!(s, "    assert_eq!({m}::TYPE_INDEX as usize, {ti});");
        let _ = writeln!(s, "    assert_eq!(schema.types[{ti}].name, {:?});", t.name);
        let _ = writeln!(s, "    let l = &n.layouts[{ti}];");
        for (i, tp) in t.topics.iter().enumerate() {
            let _ = writeln!(
                s,
                "    assert_eq!({m}::TOPIC_{} as usize, {i});\n    assert_eq!({m}::{}::SIZE, l.topics[{i}].size);\n    assert_eq!(schema.types[{ti}].topics[{i}].name, {:?});",
                upper(&tp.name),
                pascal(&tp.name),
                tp.name
            );
        }
        for (i, sv) in t.services.iter().enumerate() {
            let b = pascal(&sv.name);
            let _ = writeln!(
                s,
                "    assert_eq!({m}::SERVICE_{} as usize, {i});\n    assert_eq!({m}::{b}Request::SIZE, l.requests[{i}].size);\n    assert_eq!({m}::{b}Response::SIZE, l.responses[{i}].size);",
                upper(&sv.name)
            );
        }
        let ps = format!("{m}::{}Params", t.name);
        for (i, p) in t.params.iter().enumerate() {
            let _ = writeln!(
                s,
                "    assert_eq!({m}::PARAM_{0}.index() as usize, {i});\n    assert_eq!({ps}::{1}_BIT, fcan_core::numbering::changed_bit({i}));\n    assert_eq!({m}::PARAM_{0}.bit(), {ps}::{1}_BIT);",
                upper(&p.name),
                upper(&p.name)
            );
        }
        let _ = writeln!(
            s,
            "    assert_eq!({ps}::SIZE, l.param_sizes.iter().sum::<usize>());"
        );
        // The params struct packs to exactly the schema defaults.
        let _ = writeln!(
            s,
            "    {{\n        let mut buf = [0u8; {ps}::SIZE + 1];\n        let len = {ps}::default().encode(&mut buf).unwrap();\n        assert_eq!(len, {ps}::SIZE);\n        let mut expect = Vec::new();\n        for p in &schema.types[{ti}].params {{\n            for _ in 0..p.len.unwrap_or(1) {{\n                let mut b = [0u8; 8];\n                let k = p.default.write(&mut b).unwrap();\n                expect.extend_from_slice(&b[..k]);\n            }}\n        }}\n        assert_eq!(&buf[..len], &expect[..]);\n        assert_eq!({ps}::decode(&buf[..len]).unwrap(), {ps}::default());\n    }}"
        );
    }
    // Boot a node and read every instance's params back.
    let _ = writeln!(
        s,
        "    let config = g::Config {{ node_id: fcan_core::id::NodeId::new(5).unwrap(), boot_id: 0x1234_5678, counts: g::Counts::MAX, controller: fcan_runtime_nostd::Controller::Fd }};\n    assert_eq!(g::Counts::MAX.to_array(), g::MAX_COUNTS);\n    let mut node = g::Node::new(config).expect(\"node boots\");"
    );
    for (ai, a) in schema.instances.iter().enumerate() {
        let method = {
            let base = a.ns.replace("{i}", "_");
            let m = base
                .split('_')
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join("_");
            if m.is_empty() {
                snake(&a.ty)
            } else {
                m
            }
        };
        let method = ident(&method);
        let t = schema.types.iter().find(|t| t.name == a.ty).expect("type");
        let ps = format!("g::{}::{}Params", ident(&snake(&t.name)), t.name);
        let _ = writeln!(
            s,
            "    for i in 0..{} {{\n        let h = node.{method}(i).expect(\"instance exists\");\n        assert_eq!(h.block(), n.block_number({ai}, i as u32).unwrap());\n        assert!(h.is_wired());\n        assert_eq!(h.params(), Some({ps}::default()));\n    }}\n    assert!(node.{method}({}).is_none());",
            a.max_count, a.max_count
        );
    }
    let _ = writeln!(
        s,
        "    static UNCONFIGURED: g::Node = g::Node::unconfigured();\n    assert!(!UNCONFIGURED.is_configured());\n    let mut late = g::Node::unconfigured();\n    late.configure(config).expect(\"configures in place\");\n    assert!(late.is_configured());\n    assert_eq!(late.state(), node.state());\n    assert_eq!(late.counters(), node.counters());\n"
    );
    let _ = writeln!(
        s,
        "    let mut app = gen::{module}_app::TestApp::default();\n    let mut tx = Sink(0);\n    for t in 0..50u32 {{ node.poll(t * 10_000, &mut tx, &mut app); }}\n    assert!(tx.0 > 0, \"the node announces itself\");\n    assert_eq!(app.calls, 0);\n}}\n"
    );
    s
}

const AGREE_PRELUDE: &str = r#"//! Generated tables agree with fcan-core (written by fcan-codegen's compile test).

use fcan_core::hash::SchemaDigest;
use fcan_core::ir::Schema;
use fcan_core::numbering::Numbering;
use fcan_runtime_nostd::codegen::NodeDesc;
use fcan_runtime_nostd::{Transmit, TxRefused};

struct Sink(usize);
impl Transmit for Sink {
    fn transmit(&mut self, _frame: &fcan_core::frame::Frame) -> Result<(), TxRefused> {
        self.0 += 1;
        Ok(())
    }
}

fn check_tables(blob: &[u8], sha: &[u8; 32], desc: &NodeDesc) -> (Schema, Numbering) {
    let schema = fcan_core::blob::decode(blob).expect("the blob decodes");
    assert!(fcan_core::validate::validate(&schema).is_empty());
    let n = Numbering::of(&schema).expect("numbers");
    let digest = SchemaDigest::of(blob);
    assert_eq!(&digest.0, sha);
    assert_eq!(desc.hash, digest.prefix());
    assert_eq!(desc.blob, blob);
    assert_eq!(desc.limits.max_frames as u32, schema.limits.max_frames);
    assert_eq!(desc.limits.max_copy_entries as u32, schema.limits.max_copy_entries);
    assert_eq!(desc.limits.service_buffer as u32, schema.limits.service_buffer);
    assert_eq!(desc.limits.service_reassembly as u32, schema.limits.service_reassembly);
    assert_eq!(desc.types.len(), schema.types.len());
    assert_eq!(desc.arrays.len(), schema.instances.len());
    for (i, a) in desc.arrays.iter().enumerate() {
        assert_eq!(a.first_block, n.array_base[i]);
        assert_eq!(a.max_count as u32, schema.instances[i].max_count);
        assert_eq!(schema.types[a.type_index as usize].name, schema.instances[i].ty);
    }
    let (mut max_req, mut max_resp) = (0, 0);
    for (ti, (td, l)) in desc.types.iter().zip(&n.layouts).enumerate() {
        let t = &schema.types[ti];
        assert_eq!(td.name, t.name);
        assert_eq!(td.topics.len(), l.topics.len());
        let (mut off, mut stage) = (0usize, 0usize);
        for (i, tp) in td.topics.iter().enumerate() {
            assert_eq!(tp.size as usize, l.topics[i].size);
            assert_eq!(tp.offset as usize, off);
            assert_eq!(tp.dir, t.topics[i].dir);
            assert_eq!(tp.period_us, t.topics[i].period_us);
            let multi = fcan_core::numbering::topic_frames(fcan_core::frame::Mtu::Classic, l.topics[i].size) > 1;
            if tp.dir == fcan_core::msg::DataDirection::M2s && multi {
                assert_eq!(tp.stage_offset as usize, stage);
                stage += l.topics[i].size;
            } else {
                assert_eq!(tp.stage_offset, u16::MAX);
            }
            off += l.topics[i].size;
        }
        assert_eq!(td.topic_bytes as usize, off);
        assert_eq!(td.stage_bytes as usize, stage);
        let mut poff = 0usize;
        assert_eq!(td.params.len(), l.param_sizes.len());
        for (i, p) in td.params.iter().enumerate() {
            assert_eq!(p.size(), l.param_sizes[i]);
            assert_eq!(p.offset as usize, poff);
            assert_eq!(p.ty, t.params[i].ty);
            assert_eq!(p.default_value(), Some(t.params[i].default));
            assert_eq!(p.min(), Ok(t.params[i].min));
            assert_eq!(p.max(), Ok(t.params[i].max));
            poff += l.param_sizes[i];
        }
        assert_eq!(td.param_bytes as usize, poff);
        assert_eq!(td.services.len(), l.requests.len());
        for (i, s) in td.services.iter().enumerate() {
            assert_eq!(s.request_size as usize, l.requests[i].size);
            assert_eq!(s.response_size as usize, l.responses[i].size);
            max_req = max_req.max(l.requests[i].size);
            max_resp = max_resp.max(l.responses[i].size);
        }
    }
    assert_eq!(desc.max_request, max_req);
    assert_eq!(desc.max_response, max_resp);
    assert_eq!(desc.blocks.len(), n.blocks.len());
    let (mut to, mut so, mut po, mut slot) = (0usize, 0usize, 0usize, 0usize);
    for (bd, b) in desc.blocks.iter().zip(&n.blocks) {
        assert_eq!(bd.type_index as usize, b.type_index);
        assert_eq!(bd.array as usize, b.array);
        assert_eq!(bd.index as u32, b.index);
        assert_eq!(bd.topic_offset as usize, to);
        assert_eq!(bd.stage_offset as usize, so);
        assert_eq!(bd.param_offset as usize, po);
        assert_eq!(bd.topic_slot as usize, slot);
        let td = &desc.types[b.type_index];
        to += td.topic_bytes as usize;
        so += td.stage_bytes as usize;
        po += td.param_bytes as usize;
        slot += td.topics.len();
    }
    assert_eq!(desc.topic_bytes, to);
    assert_eq!(desc.stage_bytes, so);
    assert_eq!(desc.param_bytes, po);
    assert_eq!(desc.topic_slots, slot);
    (schema, n)
}
"#;

/// A firmware-style use of the generated code: a deferred service answered later, a
/// commit-triggered publish, typed m2s reads and params.
const BUILT_LIB: &str = r#"//! Uses the io_board schema through build.rs.
#![no_std]
#![deny(missing_docs)]

/// The generated module.
pub mod fcan {
    include!(concat!(env!("OUT_DIR"), "/fcan_gen.rs"));
}

use fcan::{analog_sensor as analog, digital_in, digital_out, App, Deferred, Node};
use fcan_runtime_nostd::{Event, Reply};

/// The board's application.
pub struct Board {
    pending: Option<(u8, Deferred<digital_out::SetResponse>)>,
    safe: bool,
    /// Its staging area for firmware updates (the build script asks for `App::update`).
    flash: fcan_runtime_nostd::update::SimFlash<1024>,
}

impl Default for Board {
    fn default() -> Self {
        Board {
            pending: None,
            safe: false,
            flash: fcan_runtime_nostd::update::SimFlash::new(b"v1", "1.0.0"),
        }
    }
}

impl digital_out::Handler for Board {
    fn set(
        &mut self,
        out: digital_out::Handle<'_>,
        request: digital_out::SetRequest,
        token: Deferred<digital_out::SetResponse>,
    ) -> Reply<digital_out::SetResponse> {
        if self.pending.is_some() {
            return Reply::Busy;
        }
        let _ = (request.on, out.param(digital_out::PARAM_MIN_ON_MS));
        self.pending = Some((out.instance(), token));
        Reply::Accepted
    }

    fn on_params_changed(&mut self, mut out: digital_out::Handle<'_>, changed: u32) {
        if changed & digital_out::PARAM_MIN_ON_MS.bit() != 0 {
            self.safe = false;
            let _ = out.publish_state(&digital_out::State { on: false, fault: false });
        }
    }
}

impl digital_in::Handler for Board {}

impl analog::Handler for Board {
    fn configure(
        &mut self,
        _sensor: analog::Handle<'_>,
        request: analog::ConfigureRequest,
        _token: Deferred<analog::ConfigureResponse>,
    ) -> Reply<analog::ConfigureResponse> {
        Reply::Ok(analog::ConfigureResponse {
            accepted: request.channel_mask != 0,
        })
    }

    fn calibrate(
        &mut self,
        _sensor: analog::Handle<'_>,
        _request: analog::CalibrateRequest,
        _token: Deferred<analog::CalibrateResponse>,
    ) -> Reply<analog::CalibrateResponse> {
        Reply::Failed
    }
}

impl App for Board {
    fn on_event(&mut self, event: Event) {
        if event == Event::MasterLost {
            self.safe = true;
        }
    }

    fn update(&mut self) -> Option<&mut dyn fcan_runtime_nostd::Update> {
        Some(&mut self.flash)
    }
}

/// One pass of the main loop.
pub fn step(node: &mut Node, board: &mut Board, now_us: u32, tx: &mut impl fcan_runtime_nostd::Transmit) {
    node.poll(now_us, tx, board);
    if let Some((i, token)) = board.pending.take() {
        let _ = node.complete(token, &digital_out::SetResponse { success: true, settle_ms: 3 });
        if let Some(mut out) = node.out(i) {
            let _ = out.publish_state(&digital_out::State { on: true, fault: false });
        }
    }
    if let Some(mut sensor) = node.analog(0) {
        let gain = sensor.params().map(|p| p.gain[0]).unwrap_or(1.0);
        if let Some(th) = sensor.thresholds() {
            let _ = (th.value.low[0], th.generation, th.received_at_us, gain);
        }
        let _ = sensor.publish_samples(&analog::Samples::default());
    }
}
"#;

#[test]
fn generated_code_compiles_for_host_and_thumbv7em_and_agrees_with_core() {
    // Before any inner build: the thumb target and clippy this test builds and lints with
    // (rustup adds them where the pinned toolchain was there without them; else the test
    // stops here with the command to run, not deep in a build log).
    ensure_target(TARGET);
    ensure_clippy();
    let mut cases: Vec<(String, Case)> = Vec::new();
    for c in good_cases() {
        cases.push((format!("good_{}", c.name), c));
    }
    for c in example_cases() {
        cases.push((format!("example_{}", c.name), c));
    }
    match fibril_cases() {
        Some(f) => cases.extend(f.into_iter().map(|c| (c.name.clone(), c))),
        None => say_fibril_absent(),
    }
    assert!(cases.len() >= 6, "the corpus has good schemas");
    // A schema read from a hostile file name (line breaks carrying code, control and
    // bidi characters): the name is escaped in the generated comment, and the module
    // still builds with `-D warnings` (rustc refuses bidi controls in comments).
    let minimal = good_cases()
        .into_iter()
        .find(|c| c.name.starts_with("minimal"))
        .expect("the minimal good schema");
    let hostile_dir = std::env::temp_dir().join(format!("fcan-codegen-hostile-{}", tag()));
    std::fs::create_dir_all(&hostile_dir).expect("mkdir");
    let hostile =
        hostile_dir.join("evil\npub fn injected() {}\n#![x] \r\u{1b}[2J \u{202e}gnp\u{2028}x.yaml");
    std::fs::copy(&minimal.files[0], &hostile).expect("copy the minimal schema");
    cases.push((
        "hostile_file_name".into(),
        Case {
            name: "hostile_file_name".into(),
            files: vec![hostile],
        },
    ));

    let root = scratch();
    let ws = workspace_root();
    write(
        &root.join("Cargo.toml"),
        "[workspace]\nresolver = \"2\"\nmembers = [\"gen\", \"missing_handler\", \"built\"]\n",
    );
    // Same dependency versions as the project.
    std::fs::copy(ws.join("Cargo.lock"), root.join("Cargo.lock")).expect("copy Cargo.lock");
    let runtime = ws.join("fcan-runtime-nostd");
    let core = ws.join("fcan-core");
    write(
        &root.join("gen/Cargo.toml"),
        &format!(
            "[package]\nname = \"gen\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nfcan-runtime-nostd = {{ path = {:?} }}\n\n[dev-dependencies]\nfcan-core = {{ path = {:?}, features = [\"std\"] }}\n",
            runtime.display().to_string(),
            core.display().to_string()
        ),
    );
    let mut lib =
        String::from("//! Generated modules under test.\n#![no_std]\n#![deny(missing_docs)]\n\n");
    let mut agree = String::from(AGREE_PRELUDE);
    for (module, case) in &cases {
        let loaded = fcan_codegen::load_files(&case.files)
            .unwrap_or_else(|e| panic!("{module} loads:\n{e}"));
        let out = fcan_codegen::generate(&loaded).unwrap_or_else(|e| panic!("{module}:\n{e}"));
        write(&root.join(format!("gen/src/{module}.rs")), &out.rust);
        let _ = writeln!(
            lib,
            "/// Generated for `{module}`.\npub mod {module} {{\n    include!(\"{module}.rs\");\n}}\n"
        );
        lib.push_str(&app_impl(module, &loaded.schema));
        agree.push_str(&agree_test(module, &loaded.schema));
        // The schema the test expects is the one core decodes, not only the IR we built.
        let n = Numbering::of(&loaded.schema).expect("numbers");
        assert!(!n.blocks.is_empty());
    }
    write(&root.join("gen/src/lib.rs"), &lib);
    write(&root.join("gen/tests/agree.rs"), &agree);

    write(
        &root.join("missing_handler/Cargo.toml"),
        &format!(
            "[package]\nname = \"missing_handler\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nfcan-runtime-nostd = {{ path = {:?} }}\n",
            runtime.display().to_string()
        ),
    );
    write(
        &root.join("missing_handler/src/lib.rs"),
        r#"//! An application that forgets the `clear_fault` handler: must not compile.
#![no_std]
#![allow(missing_docs)]
pub mod g {
    include!("../../gen/src/example_motor_driver.rs");
}
use fcan_runtime_nostd::{Event, Reply};
pub struct A;
impl g::motor::Handler for A {
    fn reset_encoder(
        &mut self,
        _motor: g::motor::Handle<'_>,
        _request: g::motor::ResetEncoderRequest,
        _token: g::Deferred<g::motor::ResetEncoderResponse>,
    ) -> Reply<g::motor::ResetEncoderResponse> {
        Reply::Busy
    }
}
impl g::App for A {
    fn on_event(&mut self, _event: Event) {}
}
"#,
    );

    // A firmware-style crate whose build.rs uses the Builder.
    write(
        &root.join("built/Cargo.toml"),
        &format!(
            "[package]\nname = \"built\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nfcan-runtime-nostd = {{ path = {:?}, features = [\"update\"] }}\n\n[build-dependencies]\nfcan-codegen = {{ path = {:?}, default-features = false }}\n",
            runtime.display().to_string(),
            ws.join("fcan-codegen").display().to_string()
        ),
    );
    let io_board = ws.join("schema/examples/io_board.yaml");
    write(
        &root.join("built/build.rs"),
        &format!(
            "fn main() -> Result<(), fcan_codegen::BuildError> {{\n    fcan_codegen::Builder::new()\n        .schemas([{:?}])\n        .firmware_updates(true)\n        .compile()?;\n    Ok(())\n}}\n",
            io_board.display().to_string()
        ),
    );
    write(&root.join("built/src/lib.rs"), BUILT_LIB);

    let (ok, log) = cargo(&root, &["test", "-p", "gen"]);
    assert!(ok, "host build + agreement tests failed:\n{log}");
    assert!(log.contains("test result: ok"), "{log}");

    let (ok, log) = cargo(&root, &["build", "-p", "gen", "--target", TARGET]);
    assert!(ok, "build for {TARGET} failed:\n{log}");

    let (ok, log) = cargo(
        &root,
        &[
            "clippy",
            "-p",
            "gen",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    );
    assert!(ok, "clippy (host) failed:\n{log}");
    let (ok, log) = cargo(
        &root,
        &[
            "clippy", "-p", "gen", "--target", TARGET, "--", "-D", "warnings",
        ],
    );
    assert!(ok, "clippy ({TARGET}) failed:\n{log}");

    let (ok, log) = cargo(&root, &["build", "-p", "built"]);
    assert!(ok, "the build.rs Builder crate failed:\n{log}");
    // With `firmware_updates(true)` and the runtime's `update` feature, for the board too.
    let (ok, log) = cargo(&root, &["build", "-p", "built", "--target", TARGET]);
    assert!(
        ok,
        "the Builder crate (firmware updates) for {TARGET} failed:\n{log}"
    );
    let tgt = inner_target().join("debug/build");
    let outputs: Vec<String> = std::fs::read_dir(&tgt)
        .expect("build dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("built-"))
        .filter_map(|e| std::fs::read_to_string(e.path().join("output")).ok())
        .collect();
    assert!(
        outputs
            .iter()
            .any(|o| o.contains(&format!("cargo:rerun-if-changed={}", io_board.display()))),
        "the build script prints rerun-if-changed for its schema: {outputs:?}"
    );

    let (ok, log) = cargo(&root, &["build", "-p", "missing_handler"]);
    assert!(!ok, "an App without every service handler must not compile");
    assert!(
        log.contains("E0046") && log.contains("clear_fault"),
        "expected error E0046 naming `clear_fault`:\n{log}"
    );
}
