//! Semantic checks of a schema: the complete set, so firmware CI can validate a schema
//! with no master and no bus, and the master applies the same checks to a downloaded blob.
//!
//! Every error carries the path of the offending key in the schema's YAML structure
//! (`types.MdMotor.params.velocity/kp.min`), which the codegen maps to `file:line:col`.
//!
//! The master runs these checks on a blob a node sent, so they must cost time linear in
//! the blob whatever it holds: the hard caps ([`MAX_NAME_LEN`], [`MAX_TYPES`],
//! [`MAX_ITEMS_PER_TYPE`], [`MAX_FIELDS`], [`MAX_INSTANCE_ARRAYS`]) are checked first, in
//! one cheap pass, and a schema over any of them is refused before any other check;
//! duplicates are found with ordered sets, never by scanning; and "did you mean" hints
//! (edit distances) are bounded in length and number, and skipped altogether by
//! [`validate_untrusted`], which the master uses.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Ordering;

use crate::frame::Mtu;
use crate::ir::{BlockType, Field, Param, Ros, Schema, PROTOCOL_VERSION};
use crate::msg::{DataDirection, ServiceRequest, ServiceResponse};
use crate::numbering::{
    flat_name, layout, topic_frames, MAX_BLOCKS, MAX_PARAMS_PER_TYPE, MAX_SERVICES_PER_TYPE,
    MAX_TOPICS_PER_TYPE,
};
use crate::segment::max_transfer_len;
use crate::types::{check_range, RangeError};

/// Longest name, in bytes: node, type, param, topic, service, field, namespace, ROS type
/// and `ros.map` names. Beyond it a schema is refused before any other check.
pub const MAX_NAME_LEN: usize = 128;
/// Most block types a schema can hold: each is used by an instance array (the codegen
/// drops the others), and a node has at most [`MAX_BLOCKS`] blocks.
pub const MAX_TYPES: usize = MAX_BLOCKS;
/// Most instance arrays: each has at least one instance.
pub const MAX_INSTANCE_ARRAYS: usize = MAX_BLOCKS;
/// Most params, topics or services of one kind in one type (indices are a byte). The
/// tighter [`MAX_PARAMS_PER_TYPE`] is an ordinary error; this one is a hard cap.
pub const MAX_ITEMS_PER_TYPE: usize = 255;
/// Most fields in one topic, request or response, and most `ros.map` entries. Every field
/// takes at least a byte and no message is larger than 255 Classical CAN frames, so no
/// valid schema comes near it.
pub const MAX_FIELDS: usize = 2048;

/// "Did you mean" hints one validation computes at most: each is an edit distance per
/// candidate, so their number is bounded as their length is.
const MAX_SUGGESTIONS: usize = 8;

/// One step of a path into the schema's structure.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathSeg {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

impl From<&str> for PathSeg {
    fn from(s: &str) -> Self {
        PathSeg::Key(s.to_string())
    }
}
impl From<&String> for PathSeg {
    fn from(s: &String) -> Self {
        PathSeg::Key(s.clone())
    }
}
impl From<usize> for PathSeg {
    fn from(i: usize) -> Self {
        PathSeg::Index(i)
    }
}

/// One problem with a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    /// Where: the key the problem is about.
    pub path: Vec<PathSeg>,
    /// What, in one sentence.
    pub message: String,
}

impl core::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, seg) in self.path.iter().enumerate() {
            match seg {
                PathSeg::Key(k) if i == 0 => write!(f, "{k}")?,
                PathSeg::Key(k) => write!(f, ".{k}")?,
                PathSeg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        write!(f, ": {}", self.message)
    }
}

macro_rules! path {
    ($($seg:expr),* $(,)?) => { vec![$(PathSeg::from($seg)),*] };
}

/// Whether `s` is an identifier: `[A-Za-z_][A-Za-z0-9_]*`.
///
/// ```
/// use fcan_core::validate::is_identifier;
/// assert!(is_identifier("type") && is_identifier("_x1"));
/// assert!(!is_identifier("1x") && !is_identifier("a-b") && !is_identifier(""));
/// ```
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `s` is a hierarchical name: identifiers separated by single `/`.
///
/// ```
/// use fcan_core::validate::is_hierarchical_name;
/// assert!(is_hierarchical_name("velocity/kp"));
/// assert!(!is_hierarchical_name("velocity//kp") && !is_hierarchical_name("/kp"));
/// ```
pub fn is_hierarchical_name(s: &str) -> bool {
    s.split('/').all(is_identifier)
}

/// The closest of `candidates` to `word`, when close enough to be a likely typo.
///
/// Bounded: a word or candidate longer than [`MAX_NAME_LEN`] bytes is no typo of anything
/// (the edit distance would cost the product of the lengths), so it gives no hint.
///
/// ```
/// use fcan_core::validate::did_you_mean;
/// assert_eq!(did_you_mean("perod_us", ["period_us", "fields", "dir"]), Some("period_us"));
/// assert_eq!(did_you_mean("zzz", ["period_us"]), None);
/// ```
pub fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    if word.len() > MAX_NAME_LEN {
        return None;
    }
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| c.len() <= MAX_NAME_LEN)
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Runs every check; returns all problems found (empty = valid), with "did you mean"
/// hints for people.
pub fn validate(schema: &Schema) -> Vec<SchemaError> {
    let mut v = Checker {
        errors: Vec::new(),
        suggestions: MAX_SUGGESTIONS,
    };
    v.schema(schema);
    v.errors
}

/// The same checks as [`validate`] for a schema that came from the bus: no hints (nobody
/// reads them and they cost edit distances), only the first problem, if any. Its cost is
/// linear in the size of the schema whatever the schema holds.
pub fn validate_untrusted(schema: &Schema) -> Option<SchemaError> {
    let mut v = Checker {
        errors: Vec::new(),
        suggestions: 0,
    };
    v.schema(schema);
    v.errors.into_iter().next()
}

struct Checker {
    errors: Vec<SchemaError>,
    /// "Did you mean" hints still allowed.
    suggestions: usize,
}

/// `name` for an error message, cut short if over [`MAX_NAME_LEN`].
fn shown(name: &str) -> String {
    if name.len() <= MAX_NAME_LEN {
        return name.to_string();
    }
    let mut end = 32;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end])
}

impl Checker {
    fn err(&mut self, path: Vec<PathSeg>, message: impl Into<String>) {
        self.errors.push(SchemaError {
            path,
            message: message.into(),
        });
    }

    fn suggest<'c>(
        &mut self,
        word: &str,
        candidates: impl IntoIterator<Item = &'c str>,
    ) -> Option<&'c str> {
        if self.suggestions == 0 {
            return None;
        }
        self.suggestions -= 1;
        did_you_mean(word, candidates)
    }

    fn schema(&mut self, s: &Schema) {
        // The hard caps first: past them nothing else is looked at, so no check below
        // can cost more than a pass over a bounded schema.
        if !self.caps(s) {
            return;
        }
        let len = crate::blob::encoded_len(s);
        if len > crate::blob::MAX_BLOB_LEN as usize {
            self.err(
                Vec::new(),
                format!(
                    "the schema blob would be {len} bytes; the protocol carries at most {} (fcan_core::blob::MAX_BLOB_LEN)",
                    crate::blob::MAX_BLOB_LEN
                ),
            );
        }
        if s.protocol != PROTOCOL_VERSION {
            self.err(
                path!["protocol"],
                format!(
                    "protocol {} is not supported (this fcan speaks protocol {PROTOCOL_VERSION})",
                    s.protocol
                ),
            );
        }
        let node_ok = !s.node.is_empty() && is_identifier(&s.node.replace("{i}", "0"));
        if !node_ok {
            self.err(
                path!["node"],
                format!(
                    "node name `{}` must be an identifier, optionally with `{{i}}` for the node id",
                    s.node
                ),
            );
        }
        self.limits(s);
        for t in &s.types {
            self.block_type(s, t);
        }
        self.instances(s);
        self.node_limits(s);
    }

    /// The hard caps, in one pass that looks at each name's length only. Reports the first
    /// cap exceeded and returns false then.
    fn caps(&mut self, s: &Schema) -> bool {
        let long = |n: &str| n.len() > MAX_NAME_LEN;
        let too_long = |what: &str, n: &str| {
            format!(
                "{what} `{}` is {} bytes long; names are at most {MAX_NAME_LEN}",
                shown(n),
                n.len()
            )
        };
        if long(&s.node) {
            self.err(path!["node"], too_long("node name", &s.node));
            return false;
        }
        if s.types.len() > MAX_TYPES {
            self.err(
                path!["types"],
                format!("{} types; a schema has at most {MAX_TYPES}", s.types.len()),
            );
            return false;
        }
        if s.instances.len() > MAX_INSTANCE_ARRAYS {
            self.err(
                path!["instances"],
                format!(
                    "{} instance arrays; a node has at most {MAX_BLOCKS} blocks",
                    s.instances.len()
                ),
            );
            return false;
        }
        for (i, a) in s.instances.iter().enumerate() {
            for (key, n) in [("type", &a.ty), ("ns", &a.ns)] {
                if long(n) {
                    self.err(path!["instances", i, key], too_long(key, n));
                    return false;
                }
            }
        }
        for t in &s.types {
            if long(&t.name) {
                self.err(
                    path!["types", &shown(&t.name)],
                    too_long("type name", &t.name),
                );
                return false;
            }
            let at = |kind: &str| path!["types", &t.name, kind];
            for (kind, n) in [
                ("params", t.params.len()),
                ("topics", t.topics.len()),
                ("services", t.services.len()),
            ] {
                if n > MAX_ITEMS_PER_TYPE {
                    self.err(
                        at(kind),
                        format!(
                            "type {} has {n} {kind}; at most {MAX_ITEMS_PER_TYPE} per type",
                            t.name
                        ),
                    );
                    return false;
                }
            }
            let names = t.params.iter().map(|p| ("params", p.name.as_str()));
            let names = names.chain(t.topics.iter().map(|p| ("topics", p.name.as_str())));
            let names = names.chain(t.services.iter().map(|p| ("services", p.name.as_str())));
            for (kind, n) in names {
                if long(n) {
                    self.err(at(kind), too_long("name", n));
                    return false;
                }
            }
            let topics = t
                .topics
                .iter()
                .map(|x| ("topics", &x.name, &x.fields, &x.ros));
            let services = t.services.iter().flat_map(|x| {
                [
                    ("services", &x.name, &x.request, &x.ros),
                    ("services", &x.name, &x.response, &None),
                ]
            });
            for (kind, name, fields, ros) in topics.chain(services) {
                let map = ros.as_ref().map_or(0, |r| r.map.len());
                if fields.len() > MAX_FIELDS || map > MAX_FIELDS {
                    self.err(
                        path!["types", &t.name, kind, name],
                        format!(
                            "{name} has {} fields and {map} ros.map entries; at most {MAX_FIELDS} of each",
                            fields.len()
                        ),
                    );
                    return false;
                }
                let ros_names = ros.iter().flat_map(|r| {
                    core::iter::once(r.ty.as_str())
                        .chain(r.map.iter().flat_map(|(a, b)| [a.as_str(), b.as_str()]))
                });
                let mut names = fields.iter().map(|f| f.name.as_str()).chain(ros_names);
                if let Some(n) = names.find(|n| long(n)) {
                    self.err(path!["types", &t.name, kind, name], too_long("name", n));
                    return false;
                }
            }
        }
        true
    }

    fn limits(&mut self, s: &Schema) {
        let l = &s.limits;
        if l.max_frames == 0 || l.max_frames > 255 {
            self.err(
                path!["limits", "max_frames"],
                format!(
                    "max_frames is {}; it must be 1..=255 (frame indices are a byte)",
                    l.max_frames
                ),
            );
        }
        if l.max_copy_entries == 0 || l.max_copy_entries > u16::MAX as u32 {
            self.err(
                path!["limits", "max_copy_entries"],
                format!(
                    "max_copy_entries is {}; it must be 1..=65535",
                    l.max_copy_entries
                ),
            );
        }
        let max_buf = max_transfer_len(Mtu::Classic) as u32;
        if l.service_buffer > max_buf {
            self.err(
                path!["limits", "service_buffer"],
                format!(
                    "service_buffer is {} bytes; a request must also work on Classical CAN, whose transfers carry at most {max_buf}",
                    l.service_buffer
                ),
            );
        }
        if l.service_reassembly > 255 {
            self.err(
                path!["limits", "service_reassembly"],
                format!(
                    "service_reassembly is {}; it must be at most 255",
                    l.service_reassembly
                ),
            );
        }
        let has_services = s.types.iter().any(|t| !t.services.is_empty());
        if has_services && l.service_reassembly == 0 {
            self.err(
                path!["limits", "service_reassembly"],
                "service_reassembly is 0 but the node has services; it needs at least one slot",
            );
        }
    }

    fn block_type(&mut self, s: &Schema, t: &BlockType) {
        let tp = |rest: &[&str]| {
            let mut p = path!["types", &t.name];
            p.extend(rest.iter().map(|k| PathSeg::from(*k)));
            p
        };
        if !is_identifier(&t.name) {
            self.err(
                tp(&[]),
                format!("type name `{}` is not an identifier", t.name),
            );
        }
        if t.params.len() > MAX_PARAMS_PER_TYPE {
            self.err(
                tp(&["params"]),
                format!(
                    "type {} has {} params; the changed mask (a u32) carries at most {MAX_PARAMS_PER_TYPE}",
                    t.name,
                    t.params.len()
                ),
            );
        }
        if t.topics.len() > MAX_TOPICS_PER_TYPE {
            self.err(
                tp(&["topics"]),
                format!("at most {MAX_TOPICS_PER_TYPE} topics per type"),
            );
        }
        if t.services.len() > MAX_SERVICES_PER_TYPE {
            self.err(
                tp(&["services"]),
                format!("at most {MAX_SERVICES_PER_TYPE} services per type"),
            );
        }
        self.names(&t.name, "params", t.params.iter().map(|p| p.name.as_str()));
        self.names(&t.name, "topics", t.topics.iter().map(|p| p.name.as_str()));
        self.names(
            &t.name,
            "services",
            t.services.iter().map(|p| p.name.as_str()),
        );
        for p in &t.params {
            self.param(&t.name, p);
        }
        for topic in &t.topics {
            let at = |k: &str| path!["types", &t.name, "topics", &topic.name, k];
            if topic.fields.is_empty() {
                self.err(at("fields"), format!("topic {} has no fields", topic.name));
            }
            if topic.dir == DataDirection::M2s && topic.period_us != 0 {
                self.err(
                    at("period_us"),
                    "period_us is for s2m topics; an m2s topic is sent when the master publishes",
                );
            }
            self.fields(
                path!["types", &t.name, "topics", &topic.name, "fields"],
                &topic.fields,
            );
            self.ros(
                path!["types", &t.name, "topics", &topic.name, "ros"],
                &topic.ros,
                &[&topic.fields],
            );
            let size = layout(&topic.fields).size;
            let frames = topic_frames(Mtu::Classic, size);
            if size > u16::MAX as usize || frames > 255 {
                self.err(
                    at("fields"),
                    format!(
                        "topic {} is {size} bytes; at most 255 frames per topic",
                        topic.name
                    ),
                );
            } else if frames > s.limits.max_frames as usize {
                self.err(
                    at("fields"),
                    format!(
                        "topic {} is {size} bytes, which needs {frames} frames on Classical CAN, but limits.max_frames is {}",
                        topic.name, s.limits.max_frames
                    ),
                );
            }
        }
        for sv in &t.services {
            let base = path!["types", &t.name, "services", &sv.name];
            let at = |k: &str| {
                let mut p = base.clone();
                p.push(k.into());
                p
            };
            self.fields(at("request"), &sv.request);
            self.fields(at("response"), &sv.response);
            self.ros(at("ros"), &sv.ros, &[&sv.request, &sv.response]);
            let req = layout(&sv.request).size + ServiceRequest::HEADER_LEN;
            let resp = layout(&sv.response).size + ServiceResponse::HEADER_LEN;
            let one_frame = Mtu::Classic.payload();
            let max = max_transfer_len(Mtu::Classic);
            if req > max {
                self.err(
                    at("request"),
                    format!(
                        "request is {req} bytes with its header; a transfer carries at most {max}"
                    ),
                );
            } else if req > one_frame && req > s.limits.service_buffer as usize {
                self.err(
                    at("request"),
                    format!(
                        "request is {req} bytes with its header, more than one Classical CAN frame, so it needs limits.service_buffer >= {req} (it is {})",
                        s.limits.service_buffer
                    ),
                );
            }
            if resp > max {
                self.err(at("response"), format!("response is {resp} bytes with its header; a transfer carries at most {max}"));
            }
        }
    }

    /// Names of one kind within a type: valid, unique, and unique once flattened.
    fn names<'a>(&mut self, ty: &str, kind: &str, names: impl Iterator<Item = &'a str>) {
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for name in names {
            let at = path!["types", ty, kind, name];
            if !is_hierarchical_name(name) {
                self.err(
                    at.clone(),
                    format!("`{name}` is not a name: use identifiers ([A-Za-z_][A-Za-z0-9_]*) separated by `/`"),
                );
            }
            let flat = flat_name(name);
            if let Some(other) = seen.get(&flat) {
                if *other == name {
                    self.err(at, format!("duplicate name `{name}`"));
                } else {
                    self.err(
                        at,
                        format!("`{name}` collides with `{other}` once `/` becomes `_`"),
                    );
                }
            } else {
                seen.insert(flat, name);
            }
        }
    }

    fn fields(&mut self, base: Vec<PathSeg>, fields: &[Field]) {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for f in fields {
            let mut at = base.clone();
            at.push((&f.name).into());
            if !is_identifier(&f.name) {
                self.err(
                    at.clone(),
                    format!("field name `{}` is not an identifier", f.name),
                );
            }
            if !seen.insert(&f.name) {
                self.err(at.clone(), format!("duplicate field `{}`", f.name));
            }
            if f.len == Some(0) {
                at.push("len".into());
                self.err(at, "array len must be at least 1");
            }
        }
    }

    fn ros(&mut self, base: Vec<PathSeg>, ros: &Option<Ros>, field_sets: &[&[Field]]) {
        let Some(ros) = ros else { return };
        if ros.ty.is_empty() {
            let mut at = base.clone();
            at.push("type".into());
            self.err(at, "ros.type is empty");
        }
        let names: BTreeSet<&str> = field_sets
            .iter()
            .flat_map(|fs| fs.iter().map(|f| f.name.as_str()))
            .collect();
        for (from, _) in &ros.map {
            if !names.contains(from.as_str()) {
                let mut at = base.clone();
                at.push("map".into());
                at.push(from.into());
                self.err(
                    at,
                    format!("ros.map renames `{from}`, which is not a field here"),
                );
            }
        }
    }

    fn param(&mut self, ty: &str, p: &Param) {
        let at = |k: &str| path!["types", ty, "params", &p.name, k];
        if p.len == Some(0) {
            self.err(at("len"), "array len must be at least 1");
        }
        for (key, v) in [("default", Some(p.default)), ("min", p.min), ("max", p.max)] {
            let Some(v) = v else { continue };
            match check_range(p.ty, &v, None, None) {
                Err(RangeError::NotFinite) => self.err(
                    at(key),
                    format!("{key} must be a finite number, not {}", v.as_f64()),
                ),
                Err(_) => self.err(at(key), format!("{key} is not a {}", p.ty)),
                Ok(()) => {}
            }
        }
        if p.ty == crate::types::ScalarType::Bool && (p.min.is_some() || p.max.is_some()) {
            self.err(
                at(if p.min.is_some() { "min" } else { "max" }),
                "a bool param has no range",
            );
        }
        if let (Some(min), Some(max)) = (p.min, p.max) {
            if min.cmp_value(&max) == Some(Ordering::Greater) {
                self.err(
                    at("min"),
                    format!("min {} is greater than max {}", min.as_f64(), max.as_f64()),
                );
                return;
            }
        }
        match check_range(p.ty, &p.default, p.min, p.max) {
            Err(RangeError::BelowMin) => self.err(
                at("default"),
                format!(
                    "default {} is below min {}",
                    p.default.as_f64(),
                    p.min.map_or(0.0, |m| m.as_f64())
                ),
            ),
            Err(RangeError::AboveMax) => self.err(
                at("default"),
                format!(
                    "default {} is above max {}",
                    p.default.as_f64(),
                    p.max.map_or(0.0, |m| m.as_f64())
                ),
            ),
            _ => {}
        }
    }

    fn instances(&mut self, s: &Schema) {
        let mut total = 0usize;
        let mut seen_ns: BTreeMap<String, usize> = Default::default();
        let types: BTreeSet<&str> = s.types.iter().map(|t| t.name.as_str()).collect();
        for (i, a) in s.instances.iter().enumerate() {
            let at = |k: &str| path!["instances", i, k];
            if !types.contains(a.ty.as_str()) {
                let hint = self
                    .suggest(&a.ty, s.types.iter().map(|t| t.name.as_str()))
                    .map(|c| format!("; did you mean `{c}`?"))
                    .unwrap_or_default();
                self.err(at("type"), format!("unknown type `{}`{hint}", a.ty));
            }
            if a.max_count == 0 || a.max_count > 255 {
                self.err(
                    at("max_count"),
                    format!("max_count is {}; it must be 1..=255", a.max_count),
                );
            }
            if a.max_count > 1 && !a.ns.contains("{i}") {
                self.err(
                    at("ns"),
                    format!("ns `{}` has no `{{i}}` but max_count is {}, so its instances would share one name", a.ns, a.max_count),
                );
            }
            if !is_identifier(&a.ns.replace("{i}", "0")) {
                self.err(
                    at("ns"),
                    format!(
                        "ns `{}` must be an identifier, optionally with `{{i}}`",
                        a.ns
                    ),
                );
            }
            // Past MAX_BLOCKS the schema is refused anyway (below); expanding more
            // namespaces would only let a hostile blob cost memory and time.
            let budget = MAX_BLOCKS.saturating_sub(total) as u32;
            for k in 0..a.max_count.min(budget) {
                let ns = a.ns_of(k);
                // Repeats within this array are the missing-`{i}` error above.
                if let Some(other) = seen_ns.get(&ns).filter(|o| **o != i) {
                    self.err(
                        at("ns"),
                        format!("namespace `{ns}` is also produced by instances[{other}]"),
                    );
                    break;
                }
                seen_ns.insert(ns, i);
            }
            total += a.max_count as usize;
        }
        if total > MAX_BLOCKS {
            self.err(
                path!["instances"],
                format!("{total} instances in all; a node has at most {MAX_BLOCKS} (block numbers are a byte)"),
            );
        }
    }
}

/// Limits a node runtime enforces ([`crate::limits`], [`crate::timing::MAX_PERIOD_US`]),
/// checked here so a schema that validates yields a firmware that boots and a plan
/// the node accepts. Kept apart from the structural checks above.
impl Checker {
    fn node_limits(&mut self, s: &Schema) {
        self.arenas(s);
        for t in &s.types {
            for topic in &t.topics {
                if !crate::timing::period_ok(topic.period_us) {
                    self.err(
                        path!["types", &t.name, "topics", &topic.name, "period_us"],
                        format!(
                            "period_us is {}; a node schedules periods up to {} µs (2^31 - 1, about 35 minutes) on its wrapping 32-bit clock",
                            topic.period_us,
                            crate::timing::MAX_PERIOD_US
                        ),
                    );
                }
            }
            for p in &t.params {
                // Overflow-safe: a huge `len` must not wrap into a small size.
                let size = (p.ty.size() as u64).saturating_mul(u64::from(p.len.unwrap_or(1)));
                if size > crate::limits::MAX_PARAM_BYTES as u64 {
                    self.err(
                        path!["types", &t.name, "params", &p.name, "len"],
                        format!(
                            "param {} is {size} bytes; a node receives at most {} bytes per parameter (one PARAM_SET in its {}-byte configuration buffer)",
                            p.name,
                            crate::limits::MAX_PARAM_BYTES,
                            crate::limits::CONFIG_REASSEMBLY_BYTES
                        ),
                    );
                }
            }
        }
    }

    /// The runtime's tables address the node's topic, staging and param arenas and its
    /// topic-state table with `u16` offsets ([`crate::limits::MAX_ARENA`]).
    fn arenas(&mut self, s: &Schema) {
        // (topic bytes, staging bytes, param bytes, topics) of one block of each type.
        let per_type: alloc::collections::BTreeMap<&str, [u64; 4]> = s
            .types
            .iter()
            .map(|t| {
                let mut sizes = [0u64, 0, 0, t.topics.len() as u64];
                for topic in &t.topics {
                    let size = layout(&topic.fields).size as u64;
                    sizes[0] = sizes[0].saturating_add(size);
                    if topic.dir == DataDirection::M2s
                        && topic_frames(Mtu::Classic, size as usize) > 1
                    {
                        sizes[1] = sizes[1].saturating_add(size);
                    }
                }
                for p in &t.params {
                    let size = (p.ty.size() as u64).saturating_mul(u64::from(p.len.unwrap_or(1)));
                    sizes[2] = sizes[2].saturating_add(size);
                }
                (t.name.as_str(), sizes)
            })
            .collect();
        let mut totals = [0u64; 4];
        for a in &s.instances {
            // An unknown type is reported elsewhere.
            let Some(sizes) = per_type.get(a.ty.as_str()) else {
                continue;
            };
            for (total, size) in totals.iter_mut().zip(sizes) {
                *total = total.saturating_add(size.saturating_mul(u64::from(a.max_count)));
            }
        }
        let max = crate::limits::MAX_ARENA as u64;
        let arenas = [
            ("topic arena", "bytes"),
            ("staging arena", "bytes"),
            ("param arena", "bytes"),
            ("topic-state table", "entries"),
        ];
        for ((what, unit), total) in arenas.iter().zip(totals) {
            if total > max {
                self.err(
                    path!["instances"],
                    format!("the node's {what} would be {total} {unit} over all instances; a node's tables address at most {max}"),
                );
            }
        }
    }
}
