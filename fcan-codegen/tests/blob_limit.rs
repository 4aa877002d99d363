//! The codegen refuses a schema whose blob would exceed the protocol limit
//! (`fcan_core::blob::MAX_BLOB_LEN`), in `check` and in `generate`, and writes nothing.

use std::fmt::Write;
use std::process::Command;

use fcan_core::blob::MAX_BLOB_LEN;

/// A schema of `types` types of 20 m2s topics of 10 fields each: about 4.3 KB of blob
/// per type.
fn schema(types: usize) -> String {
    let mut y = String::from("node: big\nprotocol: 2\ntypes:\n");
    for t in 0..types {
        writeln!(y, "  Type{t}:\n    topics:").unwrap();
        for j in 0..20 {
            write!(y, "      topic_{j}: {{ dir: m2s, fields: {{").unwrap();
            for f in 0..10 {
                write!(y, " field_number_{f}: u8,").unwrap();
            }
            writeln!(y, " }} }}").unwrap();
        }
    }
    y.push_str("instances:\n");
    for t in 0..types {
        writeln!(y, "  - {{ type: Type{t}, max_count: 1, ns: b{t} }}").unwrap();
    }
    y
}

#[test]
fn a_schema_over_the_blob_limit_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let ok = tmp.path().join("ok.yaml");
    std::fs::write(&ok, schema(12)).unwrap();
    let big = tmp.path().join("big.yaml");
    std::fs::write(&big, schema(20)).unwrap();
    let out_dir = tmp.path().join("out");
    let run = |file: &std::path::Path, cmd: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_fcan-codegen"));
        c.arg(cmd).arg(file);
        if cmd == "generate" {
            c.arg("--out").arg(&out_dir);
        }
        c.output().unwrap()
    };
    // Under the limit: fine, and the blob is what it says.
    let out = run(&ok, "generate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let blob = std::fs::read(out_dir.join("schema.bin")).unwrap();
    assert!(blob.len() > 40_000 && blob.len() <= MAX_BLOB_LEN as usize);
    std::fs::remove_dir_all(&out_dir).unwrap();
    // Over it: one clear error, nothing written.
    for cmd in ["check", "generate"] {
        let out = run(&big, cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{cmd}: {stderr}");
        assert!(
            stderr.contains("big.yaml:1:1: error: the schema blob would be")
                && stderr.contains(&format!("the protocol carries at most {MAX_BLOB_LEN}")),
            "{cmd}: {stderr}"
        );
        assert!(!out_dir.exists(), "{cmd}: nothing written");
    }
}
