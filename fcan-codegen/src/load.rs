//! Several schema files → one validated [`Schema`], or every problem with `file:line:col`.
//!
//! Merge rules (also in `docs/schema.md`):
//! - files are put in a canonical order first: by file name (basename), then by full
//!   path; so the result never depends on the order they were given in;
//! - `types` from all files merge; a type defined twice is an error at the second
//!   definition (in canonical order), naming the first;
//! - `node`, `protocol`, `options.allocation` and each `limits.<key>` may be set by
//!   several files only to the same value;
//! - `instances` lists are concatenated in canonical file order, each in its own order;
//! - the IR's types are sorted by name and only the types some instance uses are kept.

use std::collections::BTreeMap;
use std::path::Path as FsPath;

use fcan_core::ir::{BlockType, InstanceArray, Limits, Schema};
use fcan_core::validate::{did_you_mean, validate, PathSeg};

use crate::diag::{Diagnostic, Diagnostics};
use crate::frontend::{convert, key, At, FileDoc, Path};
use crate::yaml::{parse, Pos};

/// One schema source: a name for messages (usually the path) and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Shown in diagnostics; also decides the merge order (basename, then full text).
    pub name: String,
    /// YAML text.
    pub text: String,
}

impl Source {
    /// Reads a file; the path as given becomes the name.
    pub fn read(path: impl AsRef<FsPath>) -> Result<Source, Diagnostic> {
        let path = path.as_ref();
        let name = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Source { name, text }),
            Err(e) => Err(Diagnostic::new(
                name,
                Pos { line: 1, col: 1 },
                format!("cannot read the file: {e}"),
            )),
        }
    }
}

/// Maps paths in the merged schema to the file and position that set them.
#[derive(Clone, Debug, Default)]
pub struct Locator {
    files: Vec<String>,
    positions: BTreeMap<Path, (usize, Pos)>,
}

impl Locator {
    /// Where the key at `path` was written; falls back to the nearest enclosing key, then
    /// to the start of the first file.
    pub fn locate(&self, path: &[PathSeg]) -> (usize, Pos) {
        let mut p = path.to_vec();
        loop {
            if let Some(at) = self.positions.get(&p) {
                return *at;
            }
            if p.pop().is_none() {
                return (0, Pos { line: 1, col: 1 });
            }
        }
    }

    /// A diagnostic at `path`.
    pub fn diag(&self, path: &[PathSeg], message: impl Into<String>) -> Diagnostic {
        let (f, pos) = self.locate(path);
        self.diag_at(f, pos, message)
    }

    fn diag_at(&self, file: usize, pos: Pos, message: impl Into<String>) -> Diagnostic {
        let name = self.files.get(file).cloned().unwrap_or_default();
        Diagnostic::new(name, pos, message)
    }

    fn where_(&self, file: usize, pos: Pos) -> String {
        format!("{}:{}:{}", self.files[file], pos.line, pos.col)
    }

    /// The canonical index of a file name (for sorting diagnostics).
    fn file_rank(&self, name: &str) -> usize {
        self.files
            .iter()
            .position(|f| f == name)
            .unwrap_or(usize::MAX)
    }
}

/// A merged, validated schema and where each of its parts came from.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The IR: types sorted by name, unused types dropped, instances in merge order.
    pub schema: Schema,
    /// Positions, for codegen-level errors.
    pub locator: Locator,
    /// The inputs in canonical (merge) order.
    pub files: Vec<String>,
}

/// Sorts diagnostics by file (canonical order), line and column, and drops repeats.
pub(crate) fn finish(locator: &Locator, mut diags: Vec<Diagnostic>) -> Diagnostics {
    diags.sort_by(|a, b| {
        (locator.file_rank(&a.file), a.line, a.col, &a.message).cmp(&(
            locator.file_rank(&b.file),
            b.line,
            b.col,
            &b.message,
        ))
    });
    diags.dedup();
    Diagnostics(diags)
}

fn basename(name: &str) -> &str {
    FsPath::new(name)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or(name)
}

/// Parses, merges and validates schema sources.
pub fn load_sources(sources: &[Source]) -> Result<Loaded, Diagnostics> {
    let order = canonical_order(sources);
    let mut m = Merge::parse_files(&order);
    if order.is_empty() {
        return Err(Diagnostics(vec![Diagnostic::new(
            "<none>",
            Pos { line: 1, col: 1 },
            "no schema files given",
        )]));
    }
    let settings = m.merge_settings();
    m.require_node_and_protocol(&settings);
    let types = m.merge_types();
    let instances = m.merge_instances();
    // Every type a file declares, used or not: an instance naming a type that is not
    // there gets a did-you-mean among them (the unused ones are dropped below).
    let declared: Vec<String> = types.keys().cloned().collect();
    let schema = Schema {
        protocol: settings.protocol.unwrap_or(fcan_core::ir::PROTOCOL_VERSION),
        node: settings.node.unwrap_or_else(|| "node".into()),
        allocation: settings.allocation.unwrap_or_else(|| "static".into()),
        limits: settings.limits,
        types: used_types(types, &instances),
        instances,
    };
    if !m.syntax_failed {
        m.check_instances_declared(&schema);
        m.validate_merged(&schema, &declared);
    }
    if !m.diags.is_empty() {
        return Err(finish(&m.locator, m.diags));
    }
    let files = m.locator.files.clone();
    Ok(Loaded {
        schema,
        locator: m.locator,
        files,
    })
}

/// The sources by file name (basename), then by full path, each name once: the merge
/// never depends on the order they were given in.
fn canonical_order(sources: &[Source]) -> Vec<&Source> {
    let mut order: Vec<&Source> = sources.iter().collect();
    order.sort_by(|a, b| (basename(&a.name), &a.name).cmp(&(basename(&b.name), &b.name)));
    order.dedup_by(|a, b| a.name == b.name);
    order
}

/// The types by name, each with the file and position that defined it.
type TypeDefs = BTreeMap<String, (usize, Pos, BlockType)>;

/// The types some instance uses, sorted by name.
fn used_types(types: TypeDefs, instances: &[InstanceArray]) -> Vec<BlockType> {
    types
        .into_values()
        .filter(|(_, _, t)| instances.iter().any(|a| a.ty == t.name))
        .map(|(_, _, t)| t)
        .collect()
}

/// The top-level settings as merged over the files.
struct Settings {
    node: Option<String>,
    protocol: Option<u32>,
    allocation: Option<String>,
    limits: Limits,
}

/// One merge in progress: the files' documents in canonical order, where each merged
/// part came from, and every problem found so far.
struct Merge {
    locator: Locator,
    docs: Vec<FileDoc>,
    diags: Vec<Diagnostic>,
    /// Paths whose semantic errors are not reported: they would only echo a problem
    /// already reported there.
    tainted: Vec<Path>,
    syntax_failed: bool,
}

impl Merge {
    /// Parses each file; a file that does not parse counts as empty.
    fn parse_files(order: &[&Source]) -> Merge {
        let mut m = Merge {
            locator: Locator {
                files: order.iter().map(|s| s.name.clone()).collect(),
                positions: BTreeMap::new(),
            },
            docs: Vec::new(),
            diags: Vec::new(),
            tainted: Vec::new(),
            syntax_failed: false,
        };
        for (f, src) in order.iter().enumerate() {
            let doc = match parse(&src.text) {
                Ok(root) => convert(root.as_ref()),
                Err(e) => {
                    m.diags.push(m.locator.diag_at(f, e.pos, e.message));
                    m.syntax_failed = true;
                    FileDoc::default()
                }
            };
            for (pos, msg) in &doc.errors {
                m.diags.push(m.locator.diag_at(f, *pos, msg.clone()));
            }
            m.docs.push(doc);
        }
        m
    }

    /// The scalars: node, protocol, allocation, each limit.
    fn merge_settings(&mut self) -> Settings {
        let node = self.merge_scalar(vec![key("node")], "node", |d| d.node.as_ref());
        let protocol =
            self.merge_scalar(vec![key("protocol")], "protocol", |d| d.protocol.as_ref());
        let allocation = self.merge_scalar(
            vec![key("options"), key("allocation")],
            "options.allocation",
            |d| d.allocation.as_ref(),
        );
        let mut limits = Limits::default();
        for (k, slot) in [
            ("max_frames", &mut limits.max_frames),
            ("max_copy_entries", &mut limits.max_copy_entries),
            ("service_buffer", &mut limits.service_buffer),
            ("service_reassembly", &mut limits.service_reassembly),
        ] {
            let label = format!("limits.{k}");
            if let Some(v) =
                self.merge_scalar(vec![key("limits"), key(k)], &label, |d| d.limits.get(k))
            {
                *slot = v;
            }
        }
        Settings {
            node,
            protocol,
            allocation,
            limits,
        }
    }

    /// One scalar, as the first file (in canonical order) that sets it sets it; a file
    /// that sets it to another value is an error.
    fn merge_scalar<T: Clone + PartialEq + std::fmt::Display>(
        &mut self,
        path: Path,
        label: &str,
        get: impl Fn(&FileDoc) -> Option<&At<T>>,
    ) -> Option<T> {
        let mut first: Option<(usize, &At<T>)> = None;
        for (f, doc) in self.docs.iter().enumerate() {
            let Some(v) = get(doc) else { continue };
            match first {
                None => {
                    first = Some((f, v));
                    self.locator.positions.insert(path.clone(), (f, v.pos));
                }
                Some((ff, fv)) if fv.value != v.value => {
                    let msg = format!(
                        "{label} is `{}` here but `{}` at {}; files may repeat a setting only with the same value",
                        v.value,
                        fv.value,
                        self.locator.where_(ff, fv.pos)
                    );
                    self.diags.push(self.locator.diag_at(f, v.pos, msg));
                }
                Some(_) => {}
            }
        }
        first.map(|(_, v)| v.value.clone())
    }

    /// `node` and `protocol` have no default; unless a syntax error may have hidden
    /// them, some file must set them.
    fn require_node_and_protocol(&mut self, settings: &Settings) {
        if settings.node.is_none() && !self.syntax_failed {
            self.tainted.push(vec![key("node")]);
            self.diags.push(self.locator.diag_at(
                0,
                Pos { line: 1, col: 1 },
                "no file sets `node:` (the node name, e.g. `md_controller{i}`)",
            ));
        }
        if settings.protocol.is_none() && !self.syntax_failed {
            self.tainted.push(vec![key("protocol")]);
            self.diags.push(self.locator.diag_at(
                0,
                Pos { line: 1, col: 1 },
                format!(
                    "no file sets `protocol:` (this fcan speaks protocol {})",
                    fcan_core::ir::PROTOCOL_VERSION
                ),
            ));
        }
    }

    /// The types of all files; a type defined twice is an error at the second
    /// definition, naming the first.
    fn merge_types(&mut self) -> TypeDefs {
        let mut types: TypeDefs = BTreeMap::new();
        for (f, doc) in self.docs.iter().enumerate() {
            for At { value: ty, pos } in &doc.types {
                if let Some((ff, fpos, _)) = types.get(&ty.name) {
                    let msg = format!(
                        "type `{}` is already defined at {}",
                        ty.name,
                        self.locator.where_(*ff, *fpos)
                    );
                    self.diags.push(self.locator.diag_at(f, *pos, msg));
                    continue;
                }
                types.insert(ty.name.clone(), (f, *pos, ty.clone()));
                let prefix = [key("types"), key(&ty.name)];
                for (p, at) in doc.positions.range(prefix.to_vec()..) {
                    if !p.starts_with(&prefix) {
                        break;
                    }
                    self.locator.positions.insert(p.clone(), (f, *at));
                }
            }
            for t in &doc.tainted {
                if !matches!(t.first(), Some(PathSeg::Key(k)) if k == "types") {
                    continue;
                }
                self.tainted.push(t.clone());
            }
        }
        types
    }

    /// The instance arrays of all files concatenated in canonical order, their
    /// positions renumbered from each file's indices to the merged ones.
    fn merge_instances(&mut self) -> Vec<InstanceArray> {
        let mut instances: Vec<InstanceArray> = Vec::new();
        for (f, doc) in self.docs.iter().enumerate() {
            if let Some(pos) = doc.instances_pos {
                self.locator
                    .positions
                    .entry(vec![key("instances")])
                    .or_insert((f, pos));
            }
            for (local, arr) in &doc.instances {
                let global = instances.len();
                let prefix = [key("instances"), PathSeg::Index(*local)];
                for (p, at) in doc.positions.range(prefix.to_vec()..) {
                    if !p.starts_with(&prefix) {
                        break;
                    }
                    let mut gp = vec![key("instances"), PathSeg::Index(global)];
                    gp.extend_from_slice(&p[2..]);
                    self.locator.positions.insert(gp, (f, *at));
                }
                instances.push(arr.clone());
            }
        }
        instances
    }

    /// A node needs at least one instance array, and some file must say so.
    fn check_instances_declared(&mut self, schema: &Schema) {
        if schema.instances.is_empty() && self.docs.iter().all(|d| d.instances_pos.is_none()) {
            self.diags.push(self.locator.diag_at(
                0,
                Pos { line: 1, col: 1 },
                "no file declares `instances:`; a node needs at least one instance array",
            ));
        }
    }

    /// fcan-core's checks of the merged schema, each at the file and position that set
    /// the offending part; none under a tainted path.
    /// `declared`: every type the files declare, the unused ones included (an instance's
    /// unknown type gets a did-you-mean among them: the schema has only the used ones).
    fn validate_merged(&mut self, schema: &Schema, declared: &[String]) {
        for mut e in validate(schema) {
            if self.tainted.iter().any(|t| e.path.starts_with(t)) {
                continue;
            }
            // fcan-core reports an array whose ns lacks `{i}` twice: once for the missing
            // `{i}` and once as colliding with itself. Keep the first, clearer one.
            if let [PathSeg::Key(k), PathSeg::Index(i), ..] = e.path.as_slice() {
                if k == "instances"
                    && e.message
                        .ends_with(&format!("is also produced by instances[{i}]"))
                {
                    continue;
                }
            }
            if let [PathSeg::Key(k), PathSeg::Index(i), PathSeg::Key(f)] = e.path.as_slice() {
                let ty = schema.instances.get(*i).map(|a| a.ty.as_str());
                if let Some(ty) = ty.filter(|_| k == "instances" && f == "type") {
                    if !e.message.contains("did you mean") {
                        if let Some(c) = did_you_mean(ty, declared.iter().map(String::as_str)) {
                            e.message.push_str(&format!("; did you mean `{c}`?"));
                        }
                    }
                }
            }
            self.diags.push(self.locator.diag(&e.path, e.message));
        }
    }
}

/// Reads, merges and validates schema files.
pub fn load_files<P: AsRef<FsPath>>(paths: &[P]) -> Result<Loaded, Diagnostics> {
    let mut sources = Vec::new();
    let mut diags = Vec::new();
    for p in paths {
        match Source::read(p) {
            Ok(s) => sources.push(s),
            Err(d) => diags.push(d),
        }
    }
    if !diags.is_empty() {
        return Err(Diagnostics(diags));
    }
    load_sources(&sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 38 item 13: an instance naming a type a letter off gets a did-you-mean,
    /// like a key does — although the type, used by no instance, is dropped before
    /// fcan-core's checks.
    #[test]
    fn an_unknown_instance_type_gets_a_did_you_mean() {
        let src = |ty: &str| {
            Source {
            name: "n.yaml".into(),
            text: format!(
                "node: x{{i}}\nprotocol: 2\ntypes:\n  Motor:\n    topics:\n      t: {{dir: m2s, fields: {{a: f32}}}}\ninstances:\n  - {{type: {ty}, max_count: 1, ns: a}}\n"
            ),
        }
        };
        let d = load_sources(&[src("Moter")]).unwrap_err().to_string();
        assert!(
            d.contains("n.yaml:8:6: error: unknown type `Moter`; did you mean `Motor`?"),
            "{d}"
        );
        let d = load_sources(&[src("Valve")]).unwrap_err().to_string();
        assert!(
            d.contains("unknown type `Valve`") && !d.contains("did you mean"),
            "{d}"
        );
    }
}
