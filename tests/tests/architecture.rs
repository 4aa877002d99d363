//! Keeps `docs/architecture.md` true to the tree.
//!
//! * Its crate tables list exactly the workspace members (and the crates outside the
//!   workspace it names), each at its path, with its real rust-version, features and
//!   `no_std`-ness, all read from `cargo metadata` and the crate roots.
//! * Its dependency graph has exactly the fcan → fcan dependency edges `cargo metadata`
//!   reports, with their kinds.
//! * Its module table lists every top-level module of each crate it covers.
//! * Every `fcan_…::…` path it writes in backticks names an item that exists in the
//!   sources (module files, declarations, re-exports).
//! * Its extension points hold: every device driver module of `fcan-drivers` (one that
//!   implements `Device`) is registered in the one table, `fcan_drivers::registry::DRIVERS`.
//!
//! Each check returns the list of disagreements, so one failure names all of them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn page() -> String {
    std::fs::read_to_string(root().join("docs/architecture.md"))
        .expect("docs/architecture.md exists")
}

/// `cargo metadata --no-deps` for one manifest: its packages.
fn metadata(manifest: &Path) -> Vec<Json> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo metadata for {}: {}",
        manifest.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Json = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    j["packages"].as_array().expect("packages").clone()
}

/// One crate as the tree has it.
#[derive(Debug)]
struct Krate {
    name: String,
    /// Directory relative to the repository root.
    dir: String,
    rust_version: Option<String>,
    /// Feature names (without `default`) and the ones `default` turns on.
    features: BTreeSet<String>,
    default_features: BTreeSet<String>,
    /// (dependency, kind, optional) for fcan's own (path) dependencies.
    deps: Vec<(String, String, bool)>,
    /// The library's root file, else the first binary's.
    root_file: PathBuf,
    /// The crate name as Rust paths spell it (`fcan_core`).
    lib_name: String,
}

fn krate(p: &Json) -> Krate {
    let root = root();
    let manifest = PathBuf::from(p["manifest_path"].as_str().expect("manifest_path"));
    let dir = manifest
        .parent()
        .expect("manifest dir")
        .strip_prefix(&root)
        .expect("crate inside the repository")
        .to_string_lossy()
        .into_owned();
    let features = p["features"].as_object().expect("features");
    let default_features = features
        .get("default")
        .and_then(Json::as_array)
        .map(|d| {
            d.iter()
                .filter_map(Json::as_str)
                .filter(|f| !f.contains(':') && !f.contains('/'))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let deps = p["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .filter(|d| d.get("path").is_some_and(|x| !x.is_null()))
        .map(|d| {
            (
                d["name"].as_str().expect("dep name").to_string(),
                d["kind"].as_str().unwrap_or("normal").to_string(),
                d["optional"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    let targets = p["targets"].as_array().expect("targets");
    let has = |t: &Json, k: &str| {
        t["kind"]
            .as_array()
            .is_some_and(|ks| ks.iter().any(|x| x == k))
    };
    let target = targets
        .iter()
        .find(|t| has(t, "lib"))
        .or_else(|| targets.iter().find(|t| has(t, "bin")))
        .expect("a lib or bin target");
    Krate {
        name: p["name"].as_str().expect("name").to_string(),
        dir,
        rust_version: p["rust_version"].as_str().map(String::from),
        features: features
            .keys()
            .filter(|k| *k != "default")
            .cloned()
            .collect(),
        default_features,
        deps,
        root_file: PathBuf::from(target["src_path"].as_str().expect("src_path")),
        lib_name: target["name"].as_str().expect("name").replace('-', "_"),
    }
}

/// The rows of the markdown table that follows `marker` (header and rule skipped).
fn table_after(text: &str, marker: &str) -> Vec<Vec<String>> {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("the page has no `{marker}`"));
    text[start + marker.len()..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            // `\|` inside a cell is an escaped pipe, not a column break.
            l.replace("\\|", "\u{1}")
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace('\u{1}', "|"))
                .collect()
        })
        .collect()
}

/// The text between backticks in `cell`, in order.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

/// The crates outside the workspace the page lists: their manifests.
fn outside_manifests(text: &str) -> Vec<PathBuf> {
    table_after(text, "<!-- crates: outside -->")
        .iter()
        .map(|row| root().join(ticked(&row[1])[0].as_str()).join("Cargo.toml"))
        .collect()
}

/// Every crate the page should describe: workspace members and the crates outside.
fn tree_crates(text: &str) -> (Vec<Krate>, Vec<Krate>) {
    let inside = metadata(&root().join("Cargo.toml"))
        .iter()
        .map(krate)
        .collect();
    let outside = outside_manifests(text)
        .iter()
        .flat_map(|m| metadata(m))
        .map(|p| krate(&p))
        .collect();
    (inside, outside)
}

fn no_std_of(k: &Krate) -> &'static str {
    let src = std::fs::read_to_string(&k.root_file).expect("crate root readable");
    if src.lines().any(|l| l.trim() == "#![no_std]") {
        "yes"
    } else if src.contains("cfg_attr(not(feature = \"std\"), no_std)") {
        "without `std`"
    } else {
        "no"
    }
}

/// Disagreements between one crate table and the crates it should list.
fn check_table(text: &str, marker: &str, crates: &[Krate]) -> Vec<String> {
    let mut bad = Vec::new();
    let rows = table_after(text, marker);
    let listed: BTreeSet<String> = rows.iter().map(|r| ticked(&r[0]).concat()).collect();
    let real: BTreeSet<String> = crates.iter().map(|k| k.name.clone()).collect();
    for missing in real.difference(&listed) {
        bad.push(format!("{marker}: crate {missing} is not in the table"));
    }
    for extra in listed.difference(&real) {
        bad.push(format!(
            "{marker}: the table lists {extra}, which is not a crate"
        ));
    }
    for row in &rows {
        let name = ticked(&row[0]).concat();
        let Some(k) = crates.iter().find(|k| k.name == name) else {
            continue;
        };
        if row.len() != 6 {
            bad.push(format!("{name}: the row needs 6 cells"));
            continue;
        }
        let path = ticked(&row[1]).concat();
        if path != k.dir {
            bad.push(format!("{name}: path {path}, the tree has {}", k.dir));
        }
        let no_std = no_std_of(k);
        if row[3] != no_std {
            bad.push(format!(
                "{name}: no_std `{}`, the tree says `{no_std}`",
                row[3]
            ));
        }
        let (mut feats, mut defaults) = (BTreeSet::new(), BTreeSet::new());
        if row[4] != "—" {
            for piece in row[4].split(',') {
                let f = ticked(piece).concat();
                if piece.contains("(default)") {
                    defaults.insert(f.clone());
                }
                feats.insert(f);
            }
        }
        if feats != k.features || defaults != k.default_features {
            bad.push(format!(
                "{name}: features {feats:?} (default {defaults:?}), the tree has {:?} (default {:?})",
                k.features, k.default_features
            ));
        }
        let rv = k.rust_version.clone().unwrap_or_else(|| "—".into());
        if row[5] != rv {
            bad.push(format!(
                "{name}: rust-version {}, the tree has {rv}",
                row[5]
            ));
        }
    }
    bad
}

#[test]
fn crate_tables_match_cargo_metadata() {
    let text = page();
    let (inside, outside) = tree_crates(&text);
    let mut bad = check_table(&text, "<!-- crates: workspace -->", &inside);
    bad.extend(check_table(&text, "<!-- crates: outside -->", &outside));
    assert!(bad.is_empty(), "docs/architecture.md:\n{}", bad.join("\n"));
}

/// (from, to, kind) with kind `normal`, `normal (optional)` for one a feature turns on
/// (drawn `-- FEATURE -->`), `build`, `dev`.
type Edge = (String, String, String);

/// The edges of the page's mermaid graph, crate names with `-`.
fn page_edges(text: &str) -> BTreeSet<Edge> {
    let start = text
        .find("<!-- deps -->")
        .expect("the page has a deps graph");
    let graph = &text[start..];
    let graph = &graph[graph.find("```mermaid").expect("mermaid block")..];
    let graph = &graph[..graph[3..].find("```").expect("closed block") + 3];
    let name = |s: &str| s.trim().replace('_', "-");
    graph
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            // `a -- feature --> b`: the feature's name is for the reader.
            if let Some((a, rest)) = l.split_once(" -- ") {
                if let Some((_, b)) = rest.split_once(" --> ") {
                    return Some((name(a), name(b), "normal (optional)".to_string()));
                }
            }
            for (arrow, kind) in [
                (" -. build .-> ", "build"),
                (" -. dev .-> ", "dev"),
                (" --> ", "normal"),
            ] {
                if let Some((a, b)) = l.split_once(arrow) {
                    return Some((name(a), name(b), kind.to_string()));
                }
            }
            None
        })
        .collect()
}

/// The tree's fcan → fcan edges; a dev-dependency already a normal one is left out.
fn tree_edges(crates: &[Krate]) -> BTreeSet<Edge> {
    let mut edges = BTreeSet::new();
    for k in crates {
        let normal: BTreeSet<&str> = k
            .deps
            .iter()
            .filter(|d| d.1 == "normal")
            .map(|d| d.0.as_str())
            .collect();
        for (dep, kind, optional) in &k.deps {
            let kind = match (kind.as_str(), optional) {
                ("dev", _) if normal.contains(dep.as_str()) => continue,
                ("normal", true) => "normal (optional)".to_string(),
                (k, _) => k.to_string(),
            };
            edges.insert((k.name.clone(), dep.clone(), kind));
        }
    }
    edges
}

#[test]
fn dependency_graph_matches_cargo_metadata() {
    let text = page();
    let (mut crates, outside) = tree_crates(&text);
    crates.extend(outside);
    let real = tree_edges(&crates);
    let drawn = page_edges(&text);
    let mut bad = Vec::new();
    for e in real.difference(&drawn) {
        bad.push(format!("missing edge {} -> {} ({})", e.0, e.1, e.2));
    }
    for e in drawn.difference(&real) {
        bad.push(format!(
            "edge {} -> {} ({}) is not in the tree",
            e.0, e.1, e.2
        ));
    }
    assert!(
        bad.is_empty(),
        "docs/architecture.md graph:\n{}",
        bad.join("\n")
    );
}

/// The `mod NAME;` declarations of a crate root (test-only modules left out).
fn top_modules(root_file: &Path) -> BTreeSet<String> {
    let src = std::fs::read_to_string(root_file).expect("crate root readable");
    let mut cfg_test = false;
    let mut mods = BTreeSet::new();
    for line in src.lines().map(str::trim) {
        if line.starts_with("#[cfg(test)]") {
            cfg_test = true;
            continue;
        }
        let decl = line
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        if let Some(rest) = decl.strip_prefix("mod ") {
            if let Some(name) = rest.strip_suffix(';') {
                if !cfg_test {
                    mods.insert(name.trim().to_string());
                }
            }
        }
        if !line.starts_with("#[") {
            cfg_test = false;
        }
    }
    mods
}

#[test]
fn module_table_lists_every_module() {
    let text = page();
    let (crates, _) = tree_crates(&text);
    let rows = table_after(&text, "<!-- modules -->");
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in &rows {
        let path = ticked(&row[0]).concat();
        let parts: Vec<&str> = path.split("::").collect();
        if parts.len() == 2 {
            listed
                .entry(parts[0].to_string())
                .or_default()
                .insert(parts[1].to_string());
        }
    }
    assert!(!listed.is_empty(), "the module table is empty");
    let mut bad = Vec::new();
    for (lib, mods) in &listed {
        let Some(k) = crates.iter().find(|k| &k.lib_name == lib) else {
            bad.push(format!("{lib} is not a workspace crate"));
            continue;
        };
        let real = top_modules(&k.root_file);
        for m in real.difference(mods) {
            bad.push(format!("module {lib}::{m} is not in the table"));
        }
        for m in mods.difference(&real) {
            bad.push(format!(
                "the table lists {lib}::{m}, which the crate root does not declare"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "docs/architecture.md modules:\n{}",
        bad.join("\n")
    );
}

/// Rust source of one crate: every `.rs` file under its root's directory.
struct Source {
    files: BTreeMap<PathBuf, String>,
}

impl Source {
    fn of(root_file: &Path) -> Source {
        let mut files = BTreeMap::new();
        let mut stack = vec![root_file.parent().expect("src dir").to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).expect("readable dir").flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).expect("readable source");
                    files.insert(p, text);
                }
            }
        }
        Source { files }
    }

    fn text(&self, file: &Path) -> &str {
        self.files.get(file).map(String::as_str).unwrap_or("")
    }

    /// The file of module `name` declared in module file `parent` (None: not a module).
    fn module(&self, parent: &Path, name: &str) -> Option<PathBuf> {
        let declared = self.text(parent).lines().any(|l| {
            let l = l
                .trim()
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            l == format!("mod {name};") || l == format!("mod {name} {{")
        });
        if !declared {
            return None;
        }
        // Children of `lib.rs`, `main.rs` and `mod.rs` sit beside them; those of `x.rs`
        // in `x/`.
        let stem = parent.file_stem()?.to_str()?;
        let dir = if ["lib", "main", "mod"].contains(&stem) {
            parent.parent()?.to_path_buf()
        } else {
            parent.with_extension("")
        };
        [
            dir.join(format!("{name}.rs")),
            dir.join(name).join("mod.rs"),
        ]
        .into_iter()
        .find(|p| self.files.contains_key(p))
        // An inline `mod x { … }`: items live in the parent file.
        .or_else(|| Some(parent.to_path_buf()))
    }

    /// Whether `text` declares `name` as an item.
    fn declares(text: &str, name: &str) -> bool {
        const KINDS: [&str; 9] = [
            "struct", "enum", "trait", "fn", "type", "const", "static", "union", "mod",
        ];
        text.lines().any(|l| {
            let words: Vec<&str> = l
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
                .filter(|w| !w.is_empty())
                .collect();
            words
                .windows(2)
                .any(|w| (KINDS.contains(&w[0]) || w[0] == "macro_rules!") && w[1] == name)
                || {
                    // A name a declarative macro turns into an item (`NodeState {` inside
                    // `wire_enum! { … }`), an enum variant, or a struct field.
                    let t = l.trim_start();
                    t.strip_prefix(name).is_some_and(|r| {
                        r.is_empty()
                            || r.starts_with([' ', '(', '{', ',', '='])
                            || r.starts_with(':') && !r.starts_with("::")
                    }) || t
                        .strip_prefix("pub ")
                        .and_then(|r| r.strip_prefix(name))
                        .is_some_and(|r| r.starts_with(':'))
                }
        })
    }

    fn declared_anywhere(&self, name: &str) -> bool {
        self.files.values().any(|t| Self::declares(t, name))
    }

    /// Whether module file `file` makes `name` visible: declares it, re-exports it by
    /// name, or re-exports a module's items by glob where that module declares it.
    fn visible_in(&self, file: &Path, name: &str) -> bool {
        let text = self.text(file);
        if Self::declares(text, name) {
            return true;
        }
        let mut uses = String::new();
        let mut in_use = false;
        for l in text.lines() {
            let t = l.trim();
            if t.starts_with("pub use ") || t.starts_with("pub(crate) use ") {
                in_use = true;
            }
            if in_use {
                uses.push_str(t);
                uses.push(' ');
                if t.ends_with(';') {
                    in_use = false;
                    uses.push('\n');
                }
            }
        }
        uses.lines().any(|u| {
            let words: Vec<&str> = u
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '*'))
                .filter(|w| !w.is_empty())
                .collect();
            if words.contains(&name) {
                return self.declared_anywhere(name) || u.contains(" as ");
            }
            // `pub use module::*;`
            words.last() == Some(&"*")
                && words.len() >= 2
                && self
                    .module(file, words[words.len() - 2])
                    .is_some_and(|m| m != file && self.visible_in(&m, name))
        })
    }

    /// Resolves `a::b::C::d` (without the crate name); the first segment that does not
    /// resolve, if any.
    fn resolve(&self, root_file: &Path, segments: &[&str]) -> Result<(), String> {
        let mut file = root_file.to_path_buf();
        let mut rest = segments;
        while let Some((first, tail)) = rest.split_first() {
            match self.module(&file, first) {
                Some(m) => {
                    file = m;
                    rest = tail;
                }
                None => break,
            }
        }
        let Some((item, members)) = rest.split_first() else {
            return Ok(()); // a module path
        };
        if !self.visible_in(&file, item) {
            return Err(format!("`{item}` is not in {}", file.display()));
        }
        for m in members {
            if !self.declared_anywhere(m) {
                return Err(format!("`{m}` is declared nowhere in the crate"));
            }
        }
        Ok(())
    }
}

/// Every backticked `crate::path` on the page (trailing `()` dropped).
fn page_paths(text: &str) -> BTreeSet<String> {
    ticked(text)
        .into_iter()
        .map(|t| t.trim_end_matches("()").to_string())
        .filter(|t| {
            t.starts_with("fcan_")
                && t.contains("::")
                && t.split("::")
                    .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'))
        })
        .collect()
}

#[test]
fn every_path_on_the_page_exists() {
    let text = page();
    let (mut crates, outside) = tree_crates(&text);
    crates.extend(outside);
    let paths = page_paths(&text);
    assert!(paths.len() > 50, "too few paths found: {paths:?}");
    let mut sources = BTreeMap::new();
    let mut bad = Vec::new();
    for path in &paths {
        let segments: Vec<&str> = path.split("::").collect();
        let Some(k) = crates.iter().find(|k| k.lib_name == segments[0]) else {
            bad.push(format!("`{path}`: no crate {}", segments[0]));
            continue;
        };
        let src = sources
            .entry(k.lib_name.clone())
            .or_insert_with(|| Source::of(&k.root_file));
        if let Err(e) = src.resolve(&k.root_file, &segments[1..]) {
            bad.push(format!("`{path}`: {e}"));
        }
    }
    assert!(
        bad.is_empty(),
        "docs/architecture.md paths:\n{}",
        bad.join("\n")
    );
}

/// The checks fail when the page and the tree disagree (each mutation below must be
/// caught).
#[test]
fn the_checks_catch_a_disagreement() {
    let text = page();
    let (mut crates, outside) = tree_crates(&text);
    crates.extend(outside);

    // A renamed item.
    let k = crates
        .iter()
        .find(|k| k.lib_name == "fcan_master")
        .expect("fcan-master");
    let src = Source::of(&k.root_file);
    assert!(src.resolve(&k.root_file, &["Master", "subscribe"]).is_ok());
    assert!(src
        .resolve(&k.root_file, &["Master", "subscribe_to_nothing"])
        .is_err());
    assert!(src
        .resolve(&k.root_file, &["engine", "Engine", "handle_frame"])
        .is_ok());
    assert!(src
        .resolve(&k.root_file, &["engine", "NoSuchEngine"])
        .is_err());
    assert!(src
        .resolve(&k.root_file, &["nosuchmodule", "Engine"])
        .is_err());

    // A dependency edge drawn that the tree does not have, and one left out.
    let real = tree_edges(&crates);
    let mut drawn = page_edges(&text);
    assert_eq!(drawn, real);
    drawn.insert(("fcan-router".into(), "fcan-master".into(), "normal".into()));
    assert_ne!(drawn, real);

    // A crate the tables do not list.
    let (mut more, _) = tree_crates(&text);
    assert!(check_table(&text, "<!-- crates: workspace -->", &more).is_empty());
    let mut ghost = krate(&metadata(&root().join("Cargo.toml"))[0]);
    ghost.name = "fcan-ghost".into();
    more.push(ghost);
    assert!(!check_table(&text, "<!-- crates: workspace -->", &more).is_empty());
}

/// The modules of `crate_src` (its `src/*.rs` files other than `lib.rs`) and, for each,
/// the sibling modules it names through `crate::<module>`.
fn module_uses(crate_src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<PathBuf> = std::fs::read_dir(crate_src)
        .expect("the crate's src directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| p.file_name().is_some_and(|n| n != "lib.rs"))
        .collect();
    let names: BTreeSet<String> = files
        .iter()
        .filter_map(|p| p.file_stem()?.to_str().map(str::to_owned))
        .collect();
    let mut graph = BTreeMap::new();
    for f in &files {
        let me = f
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_owned();
        let text = std::fs::read_to_string(f).expect("a module file");
        let mut uses = BTreeSet::new();
        // `crate::a::…`, and the names inside `use crate::{a, b::c}`.
        let mut words: Vec<&str> = Vec::new();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                words.extend(group[..end].split(',').map(|w| w.trim()));
            } else {
                words.push(rest);
            }
        }
        for w in words {
            let name: String = w
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if names.contains(&name) && name != me {
                uses.insert(name);
            }
        }
        graph.insert(me, uses);
    }
    graph
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == n) {
            let mut cycle = path[at..].to_vec();
            cycle.push(n.to_owned());
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_owned());
        for m in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, graph, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
}

/// The node runtime's modules depend on each other in one direction only: each can be
/// read (and changed) knowing only the ones below it.
#[test]
fn the_runtime_has_no_module_cycles() {
    let graph = module_uses(&root().join("fcan-runtime-nostd/src"));
    assert!(graph.len() > 10, "modules found: {graph:?}");
    assert!(
        graph.get("node").is_some_and(|u| u.contains("state")),
        "the scan must see `use crate::state` in node.rs: {graph:?}"
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "fcan-runtime-nostd has a module cycle: {}",
            cycle.join(" -> ")
        );
    }
}

/// The top-level modules of `crate_src` with a file that implements the driver contract
/// (`impl … Device for …`, `SimDevice` not counted): the driver modules.
fn driver_modules(crate_src: &Path) -> BTreeSet<String> {
    let mut mods = BTreeSet::new();
    for f in rust_files(crate_src) {
        let text = std::fs::read_to_string(&f).expect("a source file");
        let implements = text.lines().map(str::trim).any(|l| {
            l.starts_with("impl") && (l.contains(" Device for ") || l.contains("::Device for "))
        });
        if !implements {
            continue;
        }
        let rel = f.strip_prefix(crate_src).expect("under src");
        let first = rel.components().next().expect("a file");
        let name = Path::new(first.as_os_str())
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a module name")
            .to_owned();
        mods.insert(name);
    }
    mods
}

/// Disagreements between the driver modules and the registered driver names (a driver's
/// name is its module's, by convention: docs/drivers.md, "Adding a driver").
fn registry_disagreements(
    modules: &BTreeSet<String>,
    registered: &BTreeSet<String>,
) -> Vec<String> {
    let mut bad = Vec::new();
    for m in modules.difference(registered) {
        bad.push(format!(
            "fcan_drivers::{m} implements Device but is not registered: add `crate::{m}::DRIVER,` \
             to DRIVERS in fcan-drivers/src/registry.rs"
        ));
    }
    for r in registered.difference(modules) {
        bad.push(format!(
            "driver `{r}` is registered but no module fcan_drivers::{r} implements Device \
             (a driver's name is its module's)"
        ));
    }
    bad
}

/// The one-place rule of device drivers: every module of `fcan-drivers` that implements
/// `Device` is in `fcan_drivers::registry::DRIVERS` (under its module's name), so a
/// driver cannot be half-added — written but unknown to `--device`, bus files, the fuzz
/// target and the docs' checks.
#[test]
fn every_driver_module_is_registered() {
    let modules = driver_modules(&root().join("fcan-drivers/src"));
    assert!(
        modules.contains("robstride") && modules.contains("mit"),
        "the scan must see the drivers: {modules:?}"
    );
    let registered: BTreeSet<String> = fcan_drivers::registry::names().map(str::to_owned).collect();
    let bad = registry_disagreements(&modules, &registered);
    assert!(bad.is_empty(), "device drivers:\n{}", bad.join("\n"));

    // The check catches a driver left out of the table, and a name with no module.
    let mut fewer = registered.clone();
    fewer.remove("mit");
    assert_eq!(registry_disagreements(&modules, &fewer).len(), 1);
    let mut more = registered;
    more.insert("stepper".into());
    assert_eq!(registry_disagreements(&modules, &more).len(), 1);
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("a source directory") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// What starts a face other than the remote API: only `fcan-cli/src/faces.rs` may say it
/// among the commands that serve a bus.
const FACE_STARTS: [&str; 3] = [
    "FoxgloveServer::start(",
    "Ros2Bridge::start(",
    "JointsBridge::start(",
];

/// The files (path, text) of the commands that serve a bus which start a face
/// themselves, instead of through `fcan_cli::faces::start`.
fn faces_started_elsewhere(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(path, _)| !path.ends_with("fcan-cli/src/faces.rs"))
        .filter_map(|(path, text)| {
            let starts: Vec<&str> = FACE_STARTS
                .iter()
                .copied()
                .filter(|s| {
                    text.lines()
                        .filter(|l| !l.trim_start().starts_with("//"))
                        .any(|l| l.contains(s))
                })
                .collect();
            (!starts.is_empty()).then(|| {
                format!(
                    "{path} starts a face itself ({}): start it in fcan_cli::faces::start",
                    starts.join(", ")
                )
            })
        })
        .collect()
}

/// Maps keyed by a node id declared in a face's source: the supervisor's `ServedSet` is
/// the one map of served nodes.
fn face_node_maps(files: &[(String, String)]) -> Vec<String> {
    let keyed = [
        "BTreeMap<u8,",
        "HashMap<u8,",
        "BTreeMap<NodeId,",
        "HashMap<NodeId,",
    ];
    let mut bad = Vec::new();
    for (path, text) in files {
        for (i, l) in text.lines().enumerate() {
            let code = l.split("//").next().unwrap_or("");
            if keyed.iter().any(|k| code.replace(' ', "").contains(k)) {
                bad.push(format!("{path}:{}: a map by node id: {}", i + 1, l.trim()));
            }
        }
    }
    bad
}

/// The one-place rule of faces (docs/architecture.md, "Extension points"): `fcan serve`,
/// `fcan fake` and the demo start Foxglove, ROS 2 and the joints only through
/// `fcan_cli::faces::start`, and no face keeps a map of served nodes of its own (the
/// supervisor's `ServedSet` holds each face's per-node handle).
#[test]
fn faces_start_in_one_place_and_keep_no_map_of_their_own() {
    let read = |dirs: &[&str]| -> Vec<(String, String)> {
        dirs.iter()
            .flat_map(|d| rust_files(&root().join(d)))
            .map(|p| {
                let text = std::fs::read_to_string(&p).expect("a source file");
                let rel = p.strip_prefix(root()).unwrap_or(&p).display().to_string();
                (rel, text)
            })
            .collect()
    };
    let commands = read(&["fcan-cli/src", "examples/host/src"]);
    assert!(
        commands
            .iter()
            .any(|(p, t)| p.ends_with("fcan-cli/src/faces.rs") && t.contains(FACE_STARTS[0])),
        "the scan must see faces.rs start Foxglove"
    );
    let bad = faces_started_elsewhere(&commands);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let faces = read(&[
        "fcan-remote/src/server",
        "fcan-foxglove/src",
        "fcan-ros2-bridge/src",
    ]);
    assert!(faces.len() > 5, "the scan must see the faces' sources");
    let bad = face_node_maps(&faces);
    assert!(bad.is_empty(), "{}", bad.join("\n"));

    // The checks catch a command that starts a face itself and a face's own map.
    let demo = (
        "examples/host/src/bin/demo.rs".to_string(),
        "let b = Ros2Bridge::start(m, dds, o).await;".to_string(),
    );
    assert_eq!(faces_started_elsewhere(&[demo]).len(), 1);
    let face = (
        "fcan-foxglove/src/server.rs".to_string(),
        "    nodes: BTreeMap<u8, NodeServed>,".to_string(),
    );
    assert_eq!(face_node_maps(&[face]).len(), 1);
}
