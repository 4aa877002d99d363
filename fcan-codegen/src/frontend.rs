//! One schema file: YAML tree → typed pieces of the IR, with the position of every key.
//!
//! This layer reports what YAML itself can tell: syntax, unknown and duplicate keys,
//! values of the wrong kind, numbers that do not fit their type, NaN and infinity, bad
//! `dir`, unknown scalar type names. Everything semantic is left to
//! [`fcan_core::validate`].

use std::collections::BTreeMap;

use fcan_core::ir::{BlockType, Field, InstanceArray, Param, Ros, Service, Topic};
use fcan_core::msg::DataDirection;
use fcan_core::types::{Scalar, ScalarType};
use fcan_core::validate::{did_you_mean, PathSeg};

use crate::yaml::{Kind, Node, Pos};

/// A path into the schema structure, as [`fcan_core::validate::SchemaError`] uses.
pub type Path = Vec<PathSeg>;

pub(crate) fn key(s: &str) -> PathSeg {
    PathSeg::Key(s.to_string())
}

/// A value together with the position of the key that set it.
#[derive(Clone, Debug)]
pub struct At<T> {
    pub value: T,
    pub pos: Pos,
}

/// What one file contributes.
#[derive(Debug, Default)]
pub struct FileDoc {
    pub node: Option<At<String>>,
    pub protocol: Option<At<u32>>,
    pub allocation: Option<At<String>>,
    /// `limits.<key>` values.
    pub limits: BTreeMap<String, At<u32>>,
    /// Types, in file order, with the position of their name key.
    pub types: Vec<At<BlockType>>,
    /// Instance arrays that converted cleanly, with their index in this file's list.
    pub instances: Vec<(usize, InstanceArray)>,
    /// Position of the `instances` key.
    pub instances_pos: Option<Pos>,
    /// Position of every key (`instances` paths use this file's indices).
    pub positions: BTreeMap<Path, Pos>,
    /// Elements that had a problem here; semantic errors under them are not reported
    /// (they would only echo the first problem).
    pub tainted: Vec<Path>,
    /// Problems found.
    pub errors: Vec<(Pos, String)>,
}

const TOP_KEYS: &[&str] = &[
    "node",
    "protocol",
    "options",
    "limits",
    "types",
    "instances",
];
const OPTION_KEYS: &[&str] = &["allocation"];
const LIMIT_KEYS: &[&str] = &[
    "max_frames",
    "max_copy_entries",
    "service_buffer",
    "service_reassembly",
];
const TYPE_KEYS: &[&str] = &["params", "topics", "services"];
const PARAM_KEYS: &[&str] = &["type", "default", "min", "max", "len"];
const TOPIC_KEYS: &[&str] = &["dir", "period_us", "fields", "ros"];
const SERVICE_KEYS: &[&str] = &["request", "response", "ros"];
const FIELD_KEYS: &[&str] = &["type", "len"];
const ROS_KEYS: &[&str] = &["type", "map"];
const INSTANCE_KEYS: &[&str] = &["type", "max_count", "ns"];

struct Entry<'a> {
    key: &'a str,
    pos: Pos,
    value: &'a Node,
}

struct Conv {
    doc: FileDoc,
}

/// Converts one parsed file.
pub fn convert(root: Option<&Node>) -> FileDoc {
    let mut c = Conv {
        doc: FileDoc::default(),
    };
    if let Some(root) = root {
        c.top(root);
    }
    c.doc
}

fn type_list() -> String {
    ScalarType::ALL
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Conv {
    fn err(&mut self, pos: Pos, msg: impl Into<String>) {
        self.doc.errors.push((pos, msg.into()));
    }

    fn taint(&mut self, path: &Path) {
        self.doc.tainted.push(path.clone());
    }

    fn record(&mut self, path: &Path, pos: Pos) {
        self.doc.positions.entry(path.clone()).or_insert(pos);
    }

    /// The entries of a mapping (null = empty). `allowed` = fixed key set (unknown keys
    /// are errors, with a suggestion); `None` = the keys are names. Duplicate keys are
    /// errors. Records every key's position under `base`.
    fn map<'a>(
        &mut self,
        node: &'a Node,
        base: &Path,
        what: &str,
        allowed: Option<&[&str]>,
    ) -> Option<Vec<Entry<'a>>> {
        if node.is_null() {
            return Some(Vec::new());
        }
        let Kind::Map(items) = &node.kind else {
            self.err(
                node.pos,
                format!("{what} must be a mapping, not {}", node.describe()),
            );
            return None;
        };
        let mut out: Vec<Entry<'a>> = Vec::with_capacity(items.len());
        for (k, v) in items {
            let Some(name) = k.as_scalar() else {
                self.err(k.pos, format!("a key in {what} must be a plain name"));
                continue;
            };
            if let Some(first) = out.iter().find(|e| e.key == name) {
                let first = first.pos;
                self.err(
                    k.pos,
                    format!(
                        "duplicate key `{name}` in {what} (first at line {}, column {})",
                        first.line, first.col
                    ),
                );
                continue;
            }
            if let Some(allowed) = allowed {
                if !allowed.contains(&name) {
                    let hint = did_you_mean(name, allowed.iter().copied())
                        .map(|c| format!("; did you mean `{c}`?"))
                        .unwrap_or_else(|| format!(" (expected one of: {})", allowed.join(", ")));
                    self.err(k.pos, format!("unknown key `{name}` in {what}{hint}"));
                    continue;
                }
            }
            let mut p = base.clone();
            p.push(key(name));
            self.record(&p, k.pos);
            out.push(Entry {
                key: name,
                pos: k.pos,
                value: v,
            });
        }
        Some(out)
    }

    fn string(&mut self, e: &Entry, what: &str) -> Option<String> {
        match &e.value.kind {
            Kind::Scalar { value, .. } if !e.value.is_null() => Some(value.clone()),
            _ => {
                self.err(
                    e.pos,
                    format!("{what} must be a string, not {}", e.value.describe()),
                );
                None
            }
        }
    }

    fn u32(&mut self, e: &Entry, what: &str) -> Option<u32> {
        let text = match &e.value.kind {
            Kind::Scalar { value, plain: true } if !e.value.is_null() => value.as_str(),
            _ => {
                self.err(
                    e.pos,
                    format!("{what} must be a whole number, not {}", e.value.describe()),
                );
                return None;
            }
        };
        match parse_int(text) {
            Some(v) if (0..=u32::MAX as i128).contains(&v) => Some(v as u32),
            Some(v) => {
                self.err(
                    e.pos,
                    format!("{what} is {v}; it must be between 0 and {}", u32::MAX),
                );
                None
            }
            None => {
                self.err(
                    e.pos,
                    format!("{what} must be a whole number, not `{text}`"),
                );
                None
            }
        }
    }

    fn scalar_type(&mut self, e: &Entry, what: &str) -> Option<ScalarType> {
        let name = self.string(e, what)?;
        match ScalarType::from_name(&name) {
            Some(t) => Some(t),
            None => {
                let names: Vec<&str> = ScalarType::ALL.iter().map(|t| t.name()).collect();
                let hint = did_you_mean(&name, names.iter().copied())
                    .map(|c| format!("; did you mean `{c}`?"))
                    .unwrap_or_else(|| format!(" (types are: {})", type_list()));
                self.err(e.pos, format!("unknown type `{name}`{hint}"));
                None
            }
        }
    }

    fn top(&mut self, root: &Node) {
        let Some(entries) = self.map(root, &vec![], "the schema file", Some(TOP_KEYS)) else {
            return;
        };
        for e in entries {
            match e.key {
                "node" => {
                    if let Some(v) = self.string(&e, "node") {
                        self.doc.node = Some(At {
                            value: v,
                            pos: e.pos,
                        });
                    }
                }
                "protocol" => {
                    if let Some(v) = self.u32(&e, "protocol") {
                        self.doc.protocol = Some(At {
                            value: v,
                            pos: e.pos,
                        });
                    }
                }
                "options" => {
                    let base = vec![key("options")];
                    let Some(opts) = self.map(e.value, &base, "options", Some(OPTION_KEYS)) else {
                        continue;
                    };
                    for o in opts {
                        if let Some(v) = self.string(&o, "options.allocation") {
                            self.doc.allocation = Some(At {
                                value: v,
                                pos: o.pos,
                            });
                        }
                    }
                }
                "limits" => {
                    let base = vec![key("limits")];
                    let Some(lims) = self.map(e.value, &base, "limits", Some(LIMIT_KEYS)) else {
                        continue;
                    };
                    for l in lims {
                        if let Some(v) = self.u32(&l, &format!("limits.{}", l.key)) {
                            self.doc.limits.insert(
                                l.key.to_string(),
                                At {
                                    value: v,
                                    pos: l.pos,
                                },
                            );
                        }
                    }
                }
                "types" => {
                    let base = vec![key("types")];
                    let Some(types) = self.map(e.value, &base, "types", None) else {
                        continue;
                    };
                    for t in types {
                        let ty = self.block_type(&t);
                        self.doc.types.push(At {
                            value: ty,
                            pos: t.pos,
                        });
                    }
                }
                "instances" => {
                    self.doc.instances_pos = Some(e.pos);
                    self.instances(e.value);
                }
                _ => unreachable!("keys are checked against TOP_KEYS"),
            }
        }
    }

    fn block_type(&mut self, t: &Entry) -> BlockType {
        let mut ty = BlockType {
            name: t.key.to_string(),
            params: Vec::new(),
            topics: Vec::new(),
            services: Vec::new(),
        };
        let base = vec![key("types"), key(t.key)];
        let what = format!("type {}", t.key);
        let Some(parts) = self.map(t.value, &base, &what, Some(TYPE_KEYS)) else {
            self.taint(&base);
            return ty;
        };
        for part in parts {
            let mut pbase = base.clone();
            pbase.push(key(part.key));
            let what = format!("{}.{}", t.key, part.key);
            let Some(items) = self.map(part.value, &pbase, &what, None) else {
                self.taint(&pbase);
                continue;
            };
            for item in items {
                let mut ipath = pbase.clone();
                ipath.push(key(item.key));
                let errors_before = self.doc.errors.len();
                match part.key {
                    "params" => {
                        if let Some(p) = self.param(&item, &ipath) {
                            ty.params.push(p);
                        }
                    }
                    "topics" => {
                        if let Some(tp) = self.topic(&item, &ipath) {
                            ty.topics.push(tp);
                        }
                    }
                    "services" => {
                        if let Some(sv) = self.service(&item, &ipath) {
                            ty.services.push(sv);
                        }
                    }
                    _ => unreachable!("keys are checked against TYPE_KEYS"),
                }
                if self.doc.errors.len() > errors_before {
                    self.taint(&ipath);
                }
            }
        }
        ty
    }

    fn param(&mut self, item: &Entry, path: &Path) -> Option<Param> {
        let what = format!("param `{}`", item.key);
        let entries = self.map(item.value, path, &what, Some(PARAM_KEYS))?;
        let get = |k: &str| entries.iter().find(|e| e.key == k);
        let Some(te) = get("type") else {
            self.err(item.pos, format!("{what} needs a `type`"));
            return None;
        };
        let ty = self.scalar_type(te, &format!("{what} type"))?;
        let len = match get("len") {
            Some(e) => Some(self.u32(e, "len")?),
            None => None,
        };
        let mut ok = true;
        let mut value = |c: &mut Conv, k: &str| -> Option<Scalar> {
            let e = get(k)?;
            match scalar_value(e.value, ty) {
                Ok(v) => Some(v),
                Err(m) => {
                    c.err(e.pos, format!("{k}: {m}"));
                    ok = false;
                    None
                }
            }
        };
        let default = value(self, "default");
        let min = value(self, "min");
        let max = value(self, "max");
        if !ok {
            return None;
        }
        let Some(default) = default else {
            self.err(
                item.pos,
                format!("{what} needs a `default` (its value at boot)"),
            );
            return None;
        };
        Some(Param {
            name: item.key.to_string(),
            ty,
            len,
            default,
            min,
            max,
        })
    }

    fn fields(&mut self, node: &Node, path: &Path, what: &str) -> Option<Vec<Field>> {
        let entries = self.map(node, path, what, None)?;
        let mut out = Vec::with_capacity(entries.len());
        let mut ok = true;
        for e in entries {
            let mut fpath = path.clone();
            fpath.push(key(e.key));
            let fwhat = format!("field `{}`", e.key);
            let field = match &e.value.kind {
                Kind::Scalar { .. } => self.scalar_type(&e, &fwhat).map(|ty| Field {
                    name: e.key.to_string(),
                    ty,
                    len: None,
                }),
                Kind::Map(_) => (|| {
                    let sub = self.map(e.value, &fpath, &fwhat, Some(FIELD_KEYS))?;
                    let Some(te) = sub.iter().find(|s| s.key == "type") else {
                        self.err(e.pos, format!("{fwhat} needs a `type`"));
                        return None;
                    };
                    let ty = self.scalar_type(te, &fwhat)?;
                    let len = match sub.iter().find(|s| s.key == "len") {
                        Some(l) => Some(self.u32(l, "len")?),
                        None => None,
                    };
                    Some(Field {
                        name: e.key.to_string(),
                        ty,
                        len,
                    })
                })(),
                Kind::Seq(_) => {
                    self.err(
                        e.pos,
                        format!("{fwhat}: write `name: type` or `name: {{ type: T, len: N }}`, not a list"),
                    );
                    None
                }
            };
            match field {
                Some(f) => out.push(f),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn ros(&mut self, e: &Entry, path: &Path) -> Option<Ros> {
        let mut rpath = path.clone();
        rpath.push(key("ros"));
        let entries = self.map(e.value, &rpath, "ros", Some(ROS_KEYS))?;
        let mut ty = None;
        let mut map = Vec::new();
        for r in entries {
            match r.key {
                "type" => ty = Some(self.string(&r, "ros.type")?),
                "map" => {
                    let mut mpath = rpath.clone();
                    mpath.push(key("map"));
                    for m in self.map(r.value, &mpath, "ros.map", None)? {
                        let to = self.string(&m, &format!("ros.map.{}", m.key))?;
                        map.push((m.key.to_string(), to));
                    }
                }
                _ => unreachable!(),
            }
        }
        let Some(ty) = ty else {
            self.err(
                e.pos,
                "ros needs a `type` (the ROS message or service type)",
            );
            return None;
        };
        map.sort();
        Some(Ros { ty, map })
    }

    fn topic(&mut self, item: &Entry, path: &Path) -> Option<Topic> {
        let what = format!("topic `{}`", item.key);
        let entries = self.map(item.value, path, &what, Some(TOPIC_KEYS))?;
        let get = |k: &str| entries.iter().find(|e| e.key == k);
        let dir = match get("dir") {
            None => {
                self.err(item.pos, format!("{what} needs a `dir` (m2s or s2m)"));
                None
            }
            Some(e) => match self.string(e, "dir")?.as_str() {
                "m2s" => Some(DataDirection::M2s),
                "s2m" => Some(DataDirection::S2m),
                other => {
                    let hint = did_you_mean(other, ["m2s", "s2m"])
                        .map(|c| format!("; did you mean `{c}`?"))
                        .unwrap_or_default();
                    self.err(
                        e.pos,
                        format!("dir `{other}` is not a direction: use m2s (master to node) or s2m (node to master){hint}"),
                    );
                    None
                }
            },
        };
        let period = match get("period_us") {
            Some(e) => Some((self.u32(e, "period_us")?, e.pos)),
            None => None,
        };
        let fields = match get("fields") {
            Some(e) => {
                let mut fpath = path.clone();
                fpath.push(key("fields"));
                self.fields(e.value, &fpath, &format!("{what} fields"))?
            }
            None => Vec::new(),
        };
        let ros = match get("ros") {
            Some(e) => Some(self.ros(e, path)?),
            None => None,
        };
        let dir = dir?;
        let period_us = match (dir, period) {
            (DataDirection::S2m, None) => {
                self.err(
                    item.pos,
                    format!("{what} is s2m and needs `period_us` (0 = sent once per commit)"),
                );
                return None;
            }
            // A zero period on an m2s topic passes core validation (it is the IR's value
            // for m2s), but writing the key at all is the mistake.
            (DataDirection::M2s, Some((0, pos))) => {
                self.err(
                    pos,
                    "period_us is for s2m topics; an m2s topic is sent when the master publishes",
                );
                return None;
            }
            (_, Some((p, _))) => p,
            (DataDirection::M2s, None) => 0,
        };
        Some(Topic {
            name: item.key.to_string(),
            dir,
            period_us,
            fields,
            ros,
        })
    }

    fn service(&mut self, item: &Entry, path: &Path) -> Option<Service> {
        let what = format!("service `{}`", item.key);
        let entries = self.map(item.value, path, &what, Some(SERVICE_KEYS))?;
        let mut sv = Service {
            name: item.key.to_string(),
            request: Vec::new(),
            response: Vec::new(),
            ros: None,
        };
        let mut ok = true;
        for e in &entries {
            let mut p = path.clone();
            p.push(key(e.key));
            match e.key {
                "request" => match self.fields(e.value, &p, &format!("{what} request")) {
                    Some(f) => sv.request = f,
                    None => ok = false,
                },
                "response" => match self.fields(e.value, &p, &format!("{what} response")) {
                    Some(f) => sv.response = f,
                    None => ok = false,
                },
                "ros" => match self.ros(e, path) {
                    Some(r) => sv.ros = Some(r),
                    None => ok = false,
                },
                _ => unreachable!(),
            }
        }
        ok.then_some(sv)
    }

    fn instances(&mut self, node: &Node) {
        if node.is_null() {
            return;
        }
        let Kind::Seq(items) = &node.kind else {
            self.err(
                node.pos,
                format!(
                    "instances must be a list of {{ type, max_count, ns }}, not {}",
                    node.describe()
                ),
            );
            return;
        };
        for (i, item) in items.iter().enumerate() {
            let path = vec![key("instances"), PathSeg::Index(i)];
            self.record(&path, item.pos);
            let before = self.doc.errors.len();
            let Some(entries) = self.map(item, &path, "an instance", Some(INSTANCE_KEYS)) else {
                continue;
            };
            let get = |k: &str| entries.iter().find(|e| e.key == k);
            let need = |c: &mut Conv, k: &str, what: &str| {
                if get(k).is_none() {
                    c.err(item.pos, format!("an instance needs `{k}` ({what})"));
                }
            };
            need(self, "type", "the block type");
            need(
                self,
                "max_count",
                "the most instances the firmware can wire",
            );
            need(self, "ns", "the namespace, with `{i}` for the index");
            let ty = get("type").and_then(|e| self.string(e, "type"));
            let max_count = get("max_count").and_then(|e| self.u32(e, "max_count"));
            let ns = get("ns").and_then(|e| self.string(e, "ns"));
            if self.doc.errors.len() > before {
                continue;
            }
            if let (Some(ty), Some(max_count), Some(ns)) = (ty, max_count, ns) {
                self.doc
                    .instances
                    .push((i, InstanceArray { ty, max_count, ns }));
            }
        }
    }
}

/// Parses a YAML 1.2 core-schema integer: decimal with optional sign, `0x…`, `0o…`.
fn parse_int(text: &str) -> Option<i128> {
    let (neg, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let v = if let Some(h) = digits.strip_prefix("0x") {
        i128::from_str_radix(h, 16).ok()?
    } else if let Some(o) = digits.strip_prefix("0o") {
        i128::from_str_radix(o, 8).ok()?
    } else {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<i128>().ok()?
    };
    Some(if neg { -v } else { v })
}

fn is_non_finite_literal(text: &str) -> bool {
    let t = text.trim_start_matches(['+', '-']).to_ascii_lowercase();
    matches!(t.as_str(), ".nan" | "nan" | ".inf" | "inf" | "infinity")
}

/// Parses a YAML 1.2 core-schema float (or integer) to `f64`; `None` if it is not one.
fn parse_float(text: &str) -> Option<f64> {
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'))
    {
        return parse_int(text).map(|v| v as f64);
    }
    text.parse::<f64>().ok()
}

/// Converts a YAML scalar to a value of `ty`, or says why it cannot be one.
pub(crate) fn scalar_value(node: &Node, ty: ScalarType) -> Result<Scalar, String> {
    let text = match &node.kind {
        Kind::Scalar { value, plain: true } if !node.is_null() => value.as_str(),
        _ => {
            return Err(format!(
                "expected a value of type {ty}, found {}",
                node.describe()
            ))
        }
    };
    if is_non_finite_literal(text) {
        return Err(format!(
            "`{text}` is not allowed: a value of type {ty} must be a finite number (NaN and infinity would reach control loops)"
        ));
    }
    if ty == ScalarType::Bool {
        return match text {
            "true" | "True" | "TRUE" => Ok(Scalar::Bool(true)),
            "false" | "False" | "FALSE" => Ok(Scalar::Bool(false)),
            _ => Err(format!("expected true or false, found `{text}`")),
        };
    }
    if ty.is_float() {
        let v = parse_float(text).ok_or_else(|| format!("expected a number, found `{text}`"))?;
        if !v.is_finite() {
            return Err(format!("{text} does not fit {ty}"));
        }
        return Ok(if ty == ScalarType::F32 {
            let f = v as f32;
            if !f.is_finite() {
                return Err(format!(
                    "{text} does not fit f32 (largest is {:e})",
                    f32::MAX
                ));
            }
            Scalar::F32(f)
        } else {
            Scalar::F64(v)
        });
    }
    let v = match parse_int(text) {
        Some(v) => v,
        None if parse_float(text).is_some() => {
            return Err(format!(
                "{text} is not a whole number, but the type is {ty}"
            ))
        }
        None => {
            return Err(format!(
                "expected a whole number of type {ty}, found `{text}`"
            ))
        }
    };
    let range = |lo: i128, hi: i128| {
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{v} does not fit {ty} ({lo}..={hi})"))
        }
    };
    Ok(match ty {
        ScalarType::U8 => Scalar::U8(range(0, u8::MAX as i128)? as u8),
        ScalarType::I8 => Scalar::I8(range(i8::MIN as i128, i8::MAX as i128)? as i8),
        ScalarType::U16 => Scalar::U16(range(0, u16::MAX as i128)? as u16),
        ScalarType::I16 => Scalar::I16(range(i16::MIN as i128, i16::MAX as i128)? as i16),
        ScalarType::U32 => Scalar::U32(range(0, u32::MAX as i128)? as u32),
        ScalarType::I32 => Scalar::I32(range(i32::MIN as i128, i32::MAX as i128)? as i32),
        ScalarType::U64 => Scalar::U64(range(0, u64::MAX as i128)? as u64),
        ScalarType::I64 => Scalar::I64(range(i64::MIN as i128, i64::MAX as i128)? as i64),
        ScalarType::Bool | ScalarType::F32 | ScalarType::F64 => unreachable!(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse;

    fn value(text: &str, ty: ScalarType) -> Result<Scalar, String> {
        let doc = parse(&format!("v: {text}\n")).unwrap().unwrap();
        let Kind::Map(items) = doc.kind else { panic!() };
        scalar_value(&items[0].1, ty)
    }

    /// `schema/fcan-schema.json` (for editors) knows exactly the keys the parser knows.
    #[test]
    fn json_schema_has_the_same_keys() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../schema/fcan-schema.json");
        let text = std::fs::read_to_string(path).expect("the JSON Schema exists");
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let keys = |o: &serde_json::Value| -> Vec<String> {
            let mut k: Vec<String> = o["properties"]
                .as_object()
                .expect("properties")
                .keys()
                .cloned()
                .collect();
            k.sort();
            k
        };
        let sorted = |ks: &[&str]| -> Vec<String> {
            let mut k: Vec<String> = ks.iter().map(|s| s.to_string()).collect();
            k.sort();
            k
        };
        let d = &v["definitions"];
        assert_eq!(keys(&v), sorted(TOP_KEYS));
        assert_eq!(keys(&v["properties"]["options"]), sorted(OPTION_KEYS));
        assert_eq!(keys(&v["properties"]["limits"]), sorted(LIMIT_KEYS));
        assert_eq!(keys(&d["blockType"]), sorted(TYPE_KEYS));
        assert_eq!(keys(&d["param"]), sorted(PARAM_KEYS));
        assert_eq!(keys(&d["topic"]), sorted(TOPIC_KEYS));
        assert_eq!(keys(&d["service"]), sorted(SERVICE_KEYS));
        assert_eq!(keys(&d["ros"]), sorted(ROS_KEYS));
        assert_eq!(keys(&d["instance"]), sorted(INSTANCE_KEYS));
        assert_eq!(
            keys(&d["fields"]["additionalProperties"]["oneOf"][1]),
            sorted(FIELD_KEYS)
        );
        let types: Vec<&str> = d["scalarType"]["enum"]
            .as_array()
            .expect("enum")
            .iter()
            .map(|t| t.as_str().expect("str"))
            .collect();
        let ours: Vec<&str> = ScalarType::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(types, ours);
    }

    #[test]
    fn values() {
        assert_eq!(value("1", ScalarType::F32), Ok(Scalar::F32(1.0)));
        assert_eq!(value("-0.5", ScalarType::F64), Ok(Scalar::F64(-0.5)));
        assert_eq!(value("1e3", ScalarType::F32), Ok(Scalar::F32(1000.0)));
        assert_eq!(value("0x10", ScalarType::U8), Ok(Scalar::U8(16)));
        assert_eq!(value("-128", ScalarType::I8), Ok(Scalar::I8(-128)));
        assert_eq!(value("true", ScalarType::Bool), Ok(Scalar::Bool(true)));
        assert!(value("256", ScalarType::U8)
            .unwrap_err()
            .contains("does not fit u8"));
        assert!(value(".nan", ScalarType::F32)
            .unwrap_err()
            .contains("finite"));
        assert!(value("-.inf", ScalarType::F64)
            .unwrap_err()
            .contains("finite"));
        assert!(value("1.5", ScalarType::U32).unwrap_err().contains("whole"));
        assert!(value("'1'", ScalarType::U32)
            .unwrap_err()
            .contains("quoted"));
        assert!(value("1e39", ScalarType::F32)
            .unwrap_err()
            .contains("does not fit f32"));
        assert!(value("yes", ScalarType::Bool).is_err());
    }
}
