//! The `fcan` binary itself: errors as a JSON line with `--json`, as text without, and
//! `--help` that teaches (an example, units).

use std::process::Command;

fn fcan(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fcan"))
        .args(args)
        .env_remove("FCAN_BUS")
        .output()
        .expect("runs fcan")
}

#[test]
fn errors_are_one_json_line_with_json_and_text_without() {
    // `socketcan` without an interface: refused before any bus is touched.
    let out = fcan(&["--json", "--bus", "socketcan", "nodes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let e: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(e["kind"], "master", "{e}");
    assert!(
        e["error"].as_str().unwrap().contains("interface name"),
        "{e}"
    );
    assert_eq!(e.as_object().unwrap().len(), 2, "{e}");

    let out = fcan(&["--bus", "socketcan", "nodes"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("fcan: error: "), "{stderr}");
}

#[test]
fn help_has_an_example_and_units() {
    let out = fcan(&["topic", "pub", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("Example: fcan topic pub"), "{help}");
    assert!(help.contains("--rate <HZ>"), "{help}");
    let out = fcan(&["topic", "echo", "--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("--timeout <SECONDS>"), "{help}");
}
