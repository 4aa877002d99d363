//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The crate directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    crate_dir()
        .parent()
        .expect("crate has a parent")
        .to_path_buf()
}

/// One schema case: a name and the files that form the node.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub files: Vec<PathBuf>,
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// The cases in a corpus directory: each `*.yaml` file is a node, each sub-directory is
/// a node made of its `*.yaml` files.
pub fn cases(dir: &Path) -> Vec<Case> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_stem()
            .expect("name")
            .to_string_lossy()
            .replace('-', "_");
        if p.is_dir() {
            out.push(Case {
                name,
                files: yaml_files(&p),
            });
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(Case {
                name,
                files: vec![p],
            });
        }
    }
    out
}

/// The good corpus.
pub fn good_cases() -> Vec<Case> {
    cases(&crate_dir().join("tests/corpus/good"))
}

/// The bad corpus.
pub fn bad_cases() -> Vec<Case> {
    cases(&crate_dir().join("tests/corpus/bad"))
}

/// The project's example schemas (`schema/examples/*.yaml`, one node each).
pub fn example_cases() -> Vec<Case> {
    cases(&workspace_root().join("schema/examples"))
}

/// The ancestor's schemas beside the workspace, if that directory exists.
pub fn fibril_dir() -> Option<PathBuf> {
    let d = workspace_root().join("../shared/compat/fibril");
    d.is_dir().then_some(d)
}

/// The three fibril nodes (from `shared/compat/fibril/README.md`), read in place.
pub fn fibril_cases() -> Option<Vec<Case>> {
    let d = fibril_dir()?;
    let node = |name: &str, files: &[&str]| Case {
        name: name.to_string(),
        files: files.iter().map(|f| d.join(f)).collect(),
    };
    Some(vec![
        node(
            "fibril_md",
            &[
                "md.node.yaml",
                "md.instances.yaml",
                "md_motor.type.yaml",
                "adc_port.type.yaml",
                "robstride_motor.type.yaml",
                "solenoid.type.yaml",
            ],
        ),
        node(
            "fibril_air",
            &[
                "air.node.yaml",
                "solenoid.type.yaml",
                "md_motor.type.yaml",
                "robstride_motor.type.yaml",
                "adc_port.type.yaml",
            ],
        ),
        node(
            "fibril_robstride",
            &[
                "robstride.node.yaml",
                "robstride.instances.yaml",
                "robstride_motor.type.yaml",
                "solenoid.type.yaml",
            ],
        ),
    ])
}

/// Says clearly that the fibril check is skipped; fails instead where
/// `FCAN_REQUIRE_FIBRIL` is set (CI: a check that skips there would pass having checked
/// nothing).
pub fn say_fibril_absent() {
    assert!(
        std::env::var_os("FCAN_REQUIRE_FIBRIL").is_none(),
        "FCAN_REQUIRE_FIBRIL is set but {} does not exist: the fibril check must run",
        workspace_root().join("../shared/compat/fibril").display()
    );
    eprintln!(
        "NOTE: {} does not exist; the fibril compatibility check is SKIPPED (it runs when \
         the shared/ directory sits beside the workspace)",
        workspace_root().join("../shared/compat/fibril").display()
    );
}

// ---------------------------------------------------------------- the toolchain's parts

/// One test at a time asks rustup for a missing part (two `rustup` runs at once on one
/// toolchain would race).
static RUSTUP: Mutex<()> = Mutex::new(());

/// The compiler the inner cargo builds use: `RUSTC` if set, else `rustc` from `PATH`
/// (under rustup the proxy, choosing the toolchain from the `RUSTUP_TOOLCHAIN` and
/// `RUSTUP_HOME` rustup set for the cargo running this test, as the inner cargo does).
fn rustc() -> OsString {
    std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into())
}

fn sysroot() -> PathBuf {
    let out = Command::new(rustc())
        .args(["--print", "sysroot"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?} --print sysroot: {e}", rustc()));
    assert!(
        out.status.success(),
        "{:?} --print sysroot failed: {}",
        rustc(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Whether the toolchain has `core` for `target` (what a `no_std` build for it needs).
fn has_core(sysroot: &Path, target: &str) -> bool {
    std::fs::read_dir(sysroot.join("lib/rustlib").join(target).join("lib")).is_ok_and(|d| {
        d.filter_map(|e| e.ok()).any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("libcore-") && n.ends_with(".rlib")
        })
    })
}

/// The rustup command line for `args` (`target add …`, `component add …`), naming the
/// toolchain this test runs under when rustup chose it (`RUSTUP_TOOLCHAIN`): typed in a
/// shell anywhere, it fixes that one.
fn rustup_line(args: &[&str]) -> String {
    let (verb, rest) = args.split_at(2);
    match std::env::var("RUSTUP_TOOLCHAIN") {
        Ok(t) if !t.is_empty() => {
            format!(
                "rustup {} --toolchain {t} {}",
                verb.join(" "),
                rest.join(" ")
            )
        }
        _ => format!("rustup {}", args.join(" ")),
    }
}

/// Runs `rustup ARGS` (rustup takes the toolchain and its home from the `RUSTUP_TOOLCHAIN`
/// and `RUSTUP_HOME` it set for this test); panics at once, in one line saying `what` is
/// missing and the command that installs it, if rustup is not there or fails. What it
/// does goes to the terminal even when the test passes (the harness captures only the
/// test's `print!`s): a test that downloads says so.
fn rustup_add(args: &[&str], what: &str) {
    let line = rustup_line(args);
    let _ = writeln!(std::io::stderr(), "NOTE: {what}; adding it: `{line}`");
    // No stack trace under an error (rustup prints one with `RUST_BACKTRACE=1`).
    let out = Command::new("rustup")
        .args(args)
        .env("RUST_LIB_BACKTRACE", "0")
        .output();
    if let Ok(out) = &out {
        let _ = std::io::stderr().write_all(&out.stderr);
    }
    match out {
        Err(e) => {
            panic!("{what}, and rustup cannot run ({e}): install it with `{line}`, then test again")
        }
        Ok(out) if !out.status.success() => {
            let err = String::from_utf8_lossy(&out.stderr);
            let mut lines = err.lines().map(str::trim).filter(|l| !l.is_empty());
            let last = lines
                .clone()
                .rfind(|l| l.starts_with("error"))
                .or(lines.next_back())
                .unwrap_or("no message");
            panic!(
                "{what}, and `{line}` failed ({}): run it by hand, then test again",
                last.trim()
            )
        }
        Ok(_) => {}
    }
}

/// Makes sure the toolchain the inner builds use has `core` for `target`, adding it with
/// rustup if not: `rust-toolchain.toml` names the thumb targets, so this is what the file
/// asks for anyway. rustup adds a file's targets to an installed toolchain only when it
/// may install by itself: with `RUSTUP_AUTO_INSTALL=0` (CI machines, and the README's
/// reader who skipped `rustup toolchain install`) a pinned toolchain that was already
/// there without them stays so, and the build would fail deep inside with "the target
/// may not be installed". Fails at once with the command to run where that cannot be
/// done.
pub fn ensure_target(target: &str) {
    let _one = RUSTUP.lock().unwrap_or_else(|e| e.into_inner());
    let root = sysroot();
    if has_core(&root, target) {
        return;
    }
    let what = format!(
        "the {target} target is not installed for the Rust toolchain at {}",
        root.display()
    );
    rustup_add(&["target", "add", target], &what);
    assert!(
        has_core(&root, target),
        "{what}, and `{}` ran but did not add it there (is {:?} rustup's?)",
        rustup_line(&["target", "add", target]),
        rustc()
    );
}

/// Makes sure `cargo clippy` runs with the cargo the tests use, adding the component
/// with rustup if not (`rust-toolchain.toml` names it; as with the targets, rustup adds
/// nothing to an installed toolchain with `RUSTUP_AUTO_INSTALL=0`).
pub fn ensure_clippy() {
    let _one = RUSTUP.lock().unwrap_or_else(|e| e.into_inner());
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let runs = || {
        Command::new(&cargo)
            .args(["clippy", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if runs() {
        return;
    }
    let what = format!(
        "`cargo clippy` does not run for the Rust toolchain at {}",
        sysroot().display()
    );
    rustup_add(&["component", "add", "clippy"], &what);
    assert!(
        runs(),
        "{what}, and `{}` ran but it still does not",
        rustup_line(&["component", "add", "clippy"])
    );
}
