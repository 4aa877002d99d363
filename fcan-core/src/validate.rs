//! Semantic checks of a schema: the complete set, so firmware CI can validate a schema
//! with no master and no bus, and the master applies the same checks to a downloaded blob.
//!
//! Every error carries the path of the offending key in the schema's YAML structure
//! (`types.MdMotor.params.velocity/kp.min`), which the codegen maps to `file:line:col`.

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
/// ```
/// use fcan_core::validate::did_you_mean;
/// assert_eq!(did_you_mean("perod_us", ["period_us", "fields", "dir"]), Some("period_us"));
/// assert_eq!(did_you_mean("zzz", ["period_us"]), None);
/// ```
pub fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
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

/// Runs every check; returns all problems found (empty = valid).
pub fn validate(schema: &Schema) -> Vec<SchemaError> {
    let mut v = Checker { errors: Vec::new() };
    v.schema(schema);
    v.errors
}

struct Checker {
    errors: Vec<SchemaError>,
}

impl Checker {
    fn err(&mut self, path: Vec<PathSeg>, message: impl Into<String>) {
        self.errors.push(SchemaError {
            path,
            message: message.into(),
        });
    }

    fn schema(&mut self, s: &Schema) {
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
        let mut seen: Vec<(String, &str)> = Vec::new();
        for name in names {
            let at = path!["types", ty, kind, name];
            if !is_hierarchical_name(name) {
                self.err(
                    at.clone(),
                    format!("`{name}` is not a name: use identifiers ([A-Za-z_][A-Za-z0-9_]*) separated by `/`"),
                );
            }
            let flat = flat_name(name);
            if let Some((_, other)) = seen.iter().find(|(f, _)| *f == flat) {
                if *other == name {
                    self.err(at, format!("duplicate name `{name}`"));
                } else {
                    self.err(
                        at,
                        format!("`{name}` collides with `{other}` once `/` becomes `_`"),
                    );
                }
            } else {
                seen.push((flat, name));
            }
        }
    }

    fn fields(&mut self, base: Vec<PathSeg>, fields: &[Field]) {
        let mut seen: Vec<&str> = Vec::new();
        for f in fields {
            let mut at = base.clone();
            at.push((&f.name).into());
            if !is_identifier(&f.name) {
                self.err(
                    at.clone(),
                    format!("field name `{}` is not an identifier", f.name),
                );
            }
            if seen.contains(&f.name.as_str()) {
                self.err(at.clone(), format!("duplicate field `{}`", f.name));
            }
            seen.push(&f.name);
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
        for (from, _) in &ros.map {
            if !field_sets
                .iter()
                .any(|fs| fs.iter().any(|f| &f.name == from))
            {
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
        let mut seen_ns: alloc::collections::BTreeMap<String, usize> = Default::default();
        for (i, a) in s.instances.iter().enumerate() {
            let at = |k: &str| path!["instances", i, k];
            if s.type_of(a).is_none() {
                let hint = did_you_mean(&a.ty, s.types.iter().map(|t| t.name.as_str()))
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
