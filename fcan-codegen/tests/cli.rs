//! The `fcan-codegen` binary on the corpora, the examples and the ancestor's schemas.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{
    bad_cases, example_cases, fibril_cases, good_cases, say_fibril_absent, workspace_root, Case,
};
use fcan_core::hash::SchemaDigest;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fcan-codegen"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("the binary runs")
}

fn paths(files: &[PathBuf]) -> Vec<String> {
    files.iter().map(|p| p.display().to_string()).collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `# expect: LINE:COL MESSAGE` lines of a file.
fn expectations(file: &Path) -> Vec<(u32, u32, String)> {
    let src = std::fs::read_to_string(file).expect("read");
    src.lines()
        .filter_map(|l| l.strip_prefix("# expect: "))
        .map(|rest| {
            let (pos, msg) = rest.split_once(' ').expect("LINE:COL MESSAGE");
            let (l, c) = pos.split_once(':').expect("LINE:COL");
            (
                l.parse().expect("line"),
                c.parse().expect("col"),
                msg.trim().to_string(),
            )
        })
        .collect()
}

#[test]
fn bad_schemas_fail_with_every_expected_error_and_write_nothing() {
    let cases = bad_cases();
    assert!(
        cases.len() >= 25,
        "the bad corpus has {} cases",
        cases.len()
    );
    for case in cases {
        let files = paths(&case.files);
        let mut expected = Vec::new();
        for (f, p) in files.iter().zip(&case.files) {
            for (l, c, m) in expectations(p) {
                expected.push((f.clone(), l, c, m));
            }
        }
        assert!(
            !expected.is_empty(),
            "{}: a bad schema needs `# expect:` lines",
            case.name
        );
        let tmp = tempfile::tempdir().expect("tempdir");
        let out_dir = tmp.path().join("out");
        for cmd in ["check", "generate"] {
            let mut args: Vec<&str> = vec![cmd];
            args.extend(files.iter().map(String::as_str));
            let out_arg = out_dir.display().to_string();
            if cmd == "generate" {
                args.extend(["--out", &out_arg]);
            }
            let out = run(&args);
            let stderr = text(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{} ({cmd}): exit status; stderr:\n{stderr}",
                case.name
            );
            assert!(out.stdout.is_empty(), "{}: no stdout on failure", case.name);
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(
                lines.len(),
                expected.len(),
                "{} ({cmd}): one line per expected error; got:\n{stderr}",
                case.name
            );
            for (f, l, c, m) in &expected {
                let prefix = format!("{f}:{l}:{c}: error: ");
                assert!(
                    lines
                        .iter()
                        .any(|line| line.starts_with(&prefix) && line.contains(m.as_str())),
                    "{} ({cmd}): expected `{prefix}…{m}…` in:\n{stderr}",
                    case.name
                );
            }
            assert!(
                !out_dir.exists(),
                "{}: no output may be written for a bad schema",
                case.name
            );
        }
    }
}

fn generate_to(files: &[String], dir: &Path) -> Output {
    let mut args: Vec<&str> = vec!["generate"];
    args.extend(files.iter().map(String::as_str));
    let d = dir.display().to_string();
    args.extend(["--out", &d]);
    run(&args)
}

fn check_outputs(name: &str, dir: &Path) -> (Vec<u8>, String, String) {
    let blob = std::fs::read(dir.join("schema.bin")).expect("schema.bin");
    let sha = std::fs::read_to_string(dir.join("schema.sha256")).expect("schema.sha256");
    let rust = std::fs::read_to_string(dir.join("fcan_gen.rs")).expect("fcan_gen.rs");
    assert_eq!(sha, format!("{}\n", SchemaDigest::of(&blob)), "{name}");
    assert_eq!(sha.len(), 65, "{name}: 64 hex digits and a newline");
    assert!(sha[..64]
        .chars()
        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)));
    fcan_core::blob::decode(&blob).unwrap_or_else(|e| panic!("{name}: blob decodes: {e}"));
    assert!(
        !rust.contains("#!["),
        "{name}: no inner attributes (include!)"
    );
    assert!(rust.contains(&format!("pub static BLOB: [u8; {}]", blob.len())));
    (blob, sha, rust)
}

fn all_good() -> Vec<Case> {
    let mut v = good_cases();
    v.extend(example_cases());
    v
}

#[test]
fn good_schemas_check_and_generate_deterministically_in_any_file_order() {
    let cases = all_good();
    assert!(cases.len() >= 6);
    for case in cases {
        let files = paths(&case.files);
        let mut args = vec!["check"];
        args.extend(files.iter().map(String::as_str));
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}: check failed:\n{}",
            case.name,
            text(&out.stderr)
        );
        assert!(text(&out.stdout).starts_with("ok: "));

        let tmp = tempfile::tempdir().expect("tempdir");
        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        let out = generate_to(&files, &a);
        assert!(out.status.success(), "{}: {}", case.name, text(&out.stderr));
        let mut reversed = files.clone();
        reversed.reverse();
        let out = generate_to(&reversed, &b);
        assert!(out.status.success(), "{}: {}", case.name, text(&out.stderr));
        let first = check_outputs(&case.name, &a);
        let second = check_outputs(&case.name, &b);
        assert_eq!(
            first, second,
            "{}: outputs must not depend on file order",
            case.name
        );
        // And again into the same directory: byte-identical.
        let out = generate_to(&files, &a);
        assert!(out.status.success());
        assert_eq!(check_outputs(&case.name, &a), first);
    }
}

#[test]
fn merge_order_is_by_file_name_not_argument_order() {
    let case = good_cases()
        .into_iter()
        .find(|c| c.name == "split_node")
        .expect("split_node case");
    assert!(case.files.len() >= 4);
    let mut orders = vec![case.files.clone()];
    let mut rev = case.files.clone();
    rev.reverse();
    orders.push(rev);
    let mut rot = case.files.clone();
    rot.rotate_left(2);
    orders.push(rot);
    let outputs: Vec<_> = orders
        .iter()
        .map(|o| fcan_codegen::compile_files(o).expect("compiles"))
        .collect();
    for o in &outputs[1..] {
        assert_eq!(o, &outputs[0]);
    }
    let loaded = fcan_codegen::load_files(&case.files).expect("loads");
    // a_instances.yaml sorts before b_instances.yaml.
    let tys: Vec<&str> = loaded
        .schema
        .instances
        .iter()
        .map(|a| a.ty.as_str())
        .collect();
    assert_eq!(tys, ["Wheel", "Gripper"]);
}

#[test]
fn unused_types_are_dropped_from_the_blob() {
    let case = good_cases()
        .into_iter()
        .find(|c| c.name == "all_features")
        .expect("all_features case");
    let out = fcan_codegen::compile_files(&case.files).expect("compiles");
    let schema = fcan_core::blob::decode(&out.blob).expect("decodes");
    let names: Vec<&str> = schema.types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Everything", "Lonely"]);
    assert!(!out.rust.contains("pub mod unused"));
}

#[test]
fn fibril_nodes_check_and_generate_unchanged() {
    let Some(cases) = fibril_cases() else {
        say_fibril_absent();
        return;
    };
    let expected_blocks = [
        ("fibril_md", 12),
        ("fibril_air", 6),
        ("fibril_robstride", 4),
    ];
    for case in cases {
        for f in &case.files {
            assert!(f.exists(), "{} is listed in the fibril README", f.display());
        }
        let files = paths(&case.files);
        let mut args = vec!["check"];
        args.extend(files.iter().map(String::as_str));
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}: check failed:\n{}",
            case.name,
            text(&out.stderr)
        );
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = generate_to(&files, tmp.path());
        assert!(
            out.status.success(),
            "{}: generate failed:\n{}",
            case.name,
            text(&out.stderr)
        );
        let (blob, _, _) = check_outputs(&case.name, tmp.path());
        let schema = fcan_core::blob::decode(&blob).expect("decodes");
        let n = fcan_core::numbering::Numbering::of(&schema).expect("numbers");
        let want = expected_blocks
            .iter()
            .find(|(n, _)| *n == case.name)
            .expect("known node")
            .1;
        assert_eq!(n.blocks.len(), want, "{}", case.name);
    }
}

#[test]
fn inspect_prints_numbering_sizes_and_frames() {
    let f = workspace_root().join("schema/examples/io_board.yaml");
    let f = f.display().to_string();
    let out = run(&["inspect", &f]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("type AnalogSensor"), "{t}");
    // samples: 16 x i16 + u16 = 34 bytes: 5 frames of 7 payload bytes on Classical CAN
    // (8 minus the sequence byte), 1 on FD.
    let line = t
        .lines()
        .find(|l| l.contains(" samples "))
        .expect("samples row");
    assert!(line.contains("34 B") && line.contains("5 / 1"), "{line}");

    let out = run(&["inspect", &f, "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let sensor = v["types"]
        .as_array()
        .expect("types")
        .iter()
        .find(|t| t["name"] == "AnalogSensor")
        .expect("AnalogSensor");
    let samples = &sensor["topics"][0];
    assert_eq!(samples["name"], "samples");
    assert_eq!(samples["size"], 34);
    assert_eq!(samples["frames_classic"], 5);
    assert_eq!(samples["frames_fd"], 1);
    let configure = &sensor["services"][0];
    assert_eq!(configure["request_size"], 15);
    assert_eq!(configure["request_frames_classic"], 3); // 15 + 2 header bytes
    assert_eq!(v["blocks"].as_array().expect("blocks").len(), 17);
    assert_eq!(v["arrays"][2]["first_block"], 16);
    assert_eq!(sensor["params"][2]["mask"], 4);
}

const BASE: &str = "node: d{i}
protocol: 2
types:
  M:
    params:
      a: { type: f32, default: 0.0 }
      b: { type: f32, default: 0.0 }
    topics:
      cmd:
        dir: m2s
        fields: { x: f32, y: u8 }
      fb:
        dir: s2m
        period_us: 1000
        fields: { p: f32 }
    services:
      go:
        request: { speed: f32 }
        response: { ok: bool }
instances:
  - { type: M, max_count: 2, ns: \"m{i}\" }
";

fn diff(new: &str) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let o = tmp.path().join("old.yaml");
    let n = tmp.path().join("new.yaml");
    std::fs::write(&o, BASE).expect("write");
    std::fs::write(&n, new).expect("write");
    let out = run(&[
        "diff",
        "--old",
        &o.display().to_string(),
        "--new",
        &n.display().to_string(),
    ]);
    (out.status.code(), text(&out.stdout) + &text(&out.stderr))
}

#[test]
fn diff_names_every_breaking_change() {
    let (code, t) = diff(BASE);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("no changes"), "{t}");

    // Reordered params move changed-mask bits.
    let (code, t) = diff(&BASE.replace(
        "      a: { type: f32, default: 0.0 }\n      b: { type: f32, default: 0.0 }",
        "      b: { type: f32, default: 0.0 }\n      a: { type: f32, default: 0.0 }",
    ));
    assert_eq!(code, Some(1), "{t}");
    assert!(
        t.contains("types.M.params.a:") && t.contains("moved from bit 0 to bit 1"),
        "{t}"
    );
    assert!(t.contains("types.M.params.b:"), "{t}");

    // A removed field.
    let (code, t) = diff(&BASE.replace("{ x: f32, y: u8 }", "{ x: f32 }"));
    assert_eq!(code, Some(1));
    assert!(
        t.contains("types.M.topics.cmd.fields.y: field 1 removed"),
        "{t}"
    );

    // A retyped field.
    let (code, t) = diff(&BASE.replace("{ p: f32 }", "{ p: f64 }"));
    assert_eq!(code, Some(1));
    assert!(
        t.contains("types.M.topics.fb.fields.p: retyped f32 -> f64"),
        "{t}"
    );

    // A topic inserted before others renumbers them.
    let (code, t) = diff(&BASE.replace(
        "    topics:\n",
        "    topics:\n      extra:\n        dir: m2s\n        fields: { z: u8 }\n",
    ));
    assert_eq!(code, Some(1));
    assert!(
        t.contains("types.M.topics.cmd:") && t.contains("renumbered"),
        "{t}"
    );

    // A service request retyped.
    let (code, t) = diff(&BASE.replace("{ speed: f32 }", "{ speed: i32 }"));
    assert_eq!(code, Some(1));
    assert!(
        t.contains("types.M.services.go.request.speed: retyped"),
        "{t}"
    );

    // Appending is compatible: a param, a topic, a field that keeps the framing, a new
    // period, a larger ceiling on the last array.
    let appended = BASE
        .replace(
            "      b: { type: f32, default: 0.0 }",
            "      b: { type: f32, default: 0.0 }\n      c: { type: u8, default: 1 }",
        )
        .replace("{ x: f32, y: u8 }", "{ x: f32, y: u8, z: u8 }")
        .replace("period_us: 1000", "period_us: 2000")
        .replace("max_count: 2", "max_count: 3");
    let (code, t) = diff(&appended);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("param appended at bit 2"), "{t}");
    assert!(
        t.contains("field appended (5 -> 6 bytes, same framing)"),
        "{t}"
    );
    assert!(t.contains("0 breaking change(s)"), "{t}");

    // A field that pushes a topic past one Classical CAN frame changes its framing.
    let (code, t) = diff(&BASE.replace("{ x: f32, y: u8 }", "{ x: f32, y: u8, z: f32 }"));
    assert_eq!(code, Some(1));
    assert!(t.contains("framing changes"), "{t}");

    // A smaller ceiling removes blocks.
    let (code, t) = diff(&BASE.replace("max_count: 2", "max_count: 1"));
    assert_eq!(code, Some(1));
    assert!(t.contains("instances[0].max_count"), "{t}");

    // An invalid new schema is an error with its position.
    let (code, t) = diff(&BASE.replace("dir: s2m", "dir: up"));
    assert_eq!(code, Some(1));
    assert!(t.contains("new.yaml:13:9: error: dir `up`"), "{t}");
}

#[test]
fn help_teaches_with_examples() {
    for sub in ["check", "generate", "inspect", "diff"] {
        let out = run(&[sub, "--help"]);
        assert!(out.status.success());
        let t = text(&out.stdout);
        assert!(t.contains("Example"), "{sub} --help has an example:\n{t}");
        assert!(t.contains(&format!("fcan-codegen {sub}")), "{t}");
    }
}

/// A file name no one would choose but anyone can create: line breaks carrying code,
/// a comment terminator in its directory, an ANSI escape, a bidi override.
pub const HOSTILE_NAME: &str =
    "evil\npub fn injected() {}\n#![x] \r\u{1b}[2J \u{202e}gnp\u{2028}x.yaml";

#[test]
fn a_hostile_file_name_is_escaped_in_the_generated_rust() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("x*");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(HOSTILE_NAME);
    let src = common::good_cases()
        .into_iter()
        .find(|c| c.name.starts_with("minimal"))
        .expect("the minimal good schema");
    std::fs::copy(&src.files[0], &file).unwrap();
    let out_dir = tmp.path().join("out");
    let out = generate_to(&[file.display().to_string()], &out_dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rust = std::fs::read_to_string(out_dir.join("fcan_gen.rs")).unwrap();
    assert!(
        !rust
            .lines()
            .any(|l| l.trim_start().starts_with("pub fn injected")),
        "the file name injected a line"
    );
    for bad in ['\r', '\u{1b}', '\u{202e}', '\u{2028}'] {
        assert!(!rust.contains(bad), "{bad:?} reached the generated Rust");
    }
    // The name is still there, readable, on the one comment line.
    let line = rust
        .lines()
        .find(|l| l.contains("from: "))
        .expect("the from: line");
    assert!(line.starts_with("// "), "{line}");
    assert!(
        line.contains(
            r"evil\u{a}pub fn injected() {}\u{a}#![x] \u{d}\u{1b}[2J \u{202e}gnp\u{2028}x.yaml"
        ),
        "{line}"
    );
}

/// `ros-package` for the three ancestor nodes in one run: every custom and generated
/// type written once, in its package, with the files colcon needs; run again, a type
/// no schema uses any more is gone; a directory it did not write is never touched.
#[test]
fn ros_package_writes_each_package_once_and_guards_foreign_directories() {
    let Some(nodes) = fibril_cases() else {
        say_fibril_absent();
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("src");
    let mut args = vec!["ros-package".to_string()];
    for (i, n) in nodes.iter().enumerate() {
        if i > 0 {
            args.push("--node".into());
        }
        args.extend(paths(&n.files));
    }
    args.extend(["--out".into(), out.display().to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&argv);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains("MdMotor.feedback: fibril_control_msgs/msg/Feedback (custom) RIHS01_"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Solenoid.state: std_msgs/msg/Bool (bundled)"),
        "{stdout}"
    );
    assert!(stdout.contains("wrote "), "{stdout}");
    let fb = std::fs::read_to_string(out.join("fibril_control_msgs/msg/Feedback.msg")).unwrap();
    assert!(
        fb.ends_with("bool is_ready\nfloat32 output\nfloat32 position\nfloat32 velocity\n"),
        "{fb}"
    );
    let srv =
        std::fs::read_to_string(out.join("fibril_control_msgs/srv/ResetEncoder.srv")).unwrap();
    assert!(
        srv.ends_with("bool offset\nfloat32 value\n---\nbool success\n"),
        "{srv}"
    );
    let cmake = std::fs::read_to_string(out.join("fibril_control_msgs/CMakeLists.txt")).unwrap();
    for f in [
        "\"msg/Feedback.msg\"",
        "\"msg/Target.msg\"",
        "\"srv/ResetEncoder.srv\"",
        "rosidl_generate_interfaces",
    ] {
        assert!(cmake.contains(f), "{cmake}");
    }
    let xml = std::fs::read_to_string(out.join("fibril_control_msgs/package.xml")).unwrap();
    assert!(
        xml.contains("<name>fibril_control_msgs</name>")
            && xml.contains("rosidl_interface_packages")
    );
    assert!(out
        .join("fcan_rc26_robstride_msgs/msg/RobstrideMotorDiagnostics.msg")
        .is_file());
    assert!(
        !out.join("std_msgs").exists() && !out.join("std_srvs").exists(),
        "bundled types need no package"
    );

    // Again with the md node only: robstride's generated package stays (another node's),
    // but within fibril_control_msgs nothing is stale, and a stray file in msg/ goes.
    std::fs::write(out.join("fibril_control_msgs/msg/Old.msg"), "int32 x\n").unwrap();
    let mut again = vec!["ros-package".to_string()];
    again.extend(paths(&nodes[0].files));
    again.extend(["--out".into(), out.display().to_string()]);
    let argv: Vec<&str> = again.iter().map(String::as_str).collect();
    let o = run(&argv);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!out.join("fibril_control_msgs/msg/Old.msg").exists());
    assert!(out.join("fibril_control_msgs/msg/Feedback.msg").is_file());

    // A package directory someone else wrote is refused, untouched.
    std::fs::write(
        out.join("fibril_control_msgs/package.xml"),
        "<package>mine</package>",
    )
    .unwrap();
    let o = run(&argv);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("was not written by fcan-codegen ros-package"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(out.join("fibril_control_msgs/package.xml")).unwrap(),
        "<package>mine</package>"
    );
}

/// A `ros:` the bridge cannot honour is a note on stderr, and the topic still gets a
/// type (its generated one), in the package written.
#[test]
fn ros_package_notes_a_fallback_and_still_writes_the_type() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let schema = tmp.path().join("n.yaml");
    std::fs::write(
        &schema,
        "node: n{i}\nprotocol: 2\ntypes:\n  T:\n    topics:\n      x: { dir: s2m, period_us: 1000, fields: { v: u32 }, ros: { type: std_msgs/msg/Int16, map: { v: data } } }\ninstances:\n  - { type: T, max_count: 1, ns: t }\n",
    )
    .unwrap();
    let out = tmp.path().join("src");
    let o = run(&[
        "ros-package",
        &schema.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("note: n{i}: T.x: `v` → Int16.data: int16 cannot hold every u32 value; carried as fcan_n_msgs/msg/TX instead"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("fcan_n_msgs/msg/TX.msg"))
            .unwrap()
            .lines()
            .last(),
        Some("uint32 v")
    );
    // A schema with errors writes nothing.
    std::fs::write(
        &schema,
        "node: n{i}\nprotocol: 2\ntypes: {}\ninstances: []\nbogus: 1\n",
    )
    .unwrap();
    let out2 = tmp.path().join("src2");
    let o = run(&[
        "ros-package",
        &schema.display().to_string(),
        "--out",
        &out2.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!out2.exists());
}
