//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

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
