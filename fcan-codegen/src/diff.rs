//! `fcan-codegen diff`: which changes between two versions of a schema break the wire or
//! move a changed-mask bit, and which are safe.
//!
//! Breaking: anything that changes a block number, a topic/service/param index, a field's
//! offset or type, a message's framing (its frame count on Classical CAN or CAN FD), a
//! topic's direction, or the protocol. Safe: appended instance arrays, params, topics,
//! services and fields (when the framing stays), new defaults and bounds, periods, names
//! of namespaces and nodes, ROS metadata, limits.

use std::fmt;

use fcan_core::frame::Mtu;
use fcan_core::ir::{BlockType, Field, Schema};
use fcan_core::msg::{ServiceRequest, ServiceResponse};
use fcan_core::numbering::{layout, topic_frames, transfer_frames};
use serde::Serialize;

use crate::inspect::scalar_text;

/// How much a change matters. Deliberately exhaustive: a change either breaks
/// compatibility or it does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Breaks the wire or moves a changed-mask bit.
    Breaking,
    /// Safe for nodes and masters built for either version.
    Compatible,
}

/// One change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Breaking or not.
    pub severity: Severity,
    /// Where, as a schema path (`types.MdMotor.params.velocity/kp`).
    pub path: String,
    /// What changed and why it matters.
    pub message: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.severity {
            Severity::Breaking => "breaking",
            Severity::Compatible => "ok",
        };
        write!(f, "{tag:<9} {}: {}", self.path, self.message)
    }
}

struct Diff {
    changes: Vec<Change>,
}

impl Diff {
    fn breaking(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.changes.push(Change {
            severity: Severity::Breaking,
            path: path.into(),
            message: message.into(),
        });
    }
    fn ok(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.changes.push(Change {
            severity: Severity::Compatible,
            path: path.into(),
            message: message.into(),
        });
    }
}

/// Every change from `old` to `new`, breaking ones first within each part.
pub fn diff(old: &Schema, new: &Schema) -> Vec<Change> {
    let mut d = Diff {
        changes: Vec::new(),
    };
    if old.protocol != new.protocol {
        d.breaking(
            "protocol",
            format!("protocol {} -> {}", old.protocol, new.protocol),
        );
    }
    if old.node != new.node {
        d.ok(
            "node",
            format!(
                "node name `{}` -> `{}` (names on the master change, numbers do not)",
                old.node, new.node
            ),
        );
    }
    let (lo, ln) = (&old.limits, &new.limits);
    for (k, a, b) in [
        ("max_frames", lo.max_frames, ln.max_frames),
        ("max_copy_entries", lo.max_copy_entries, ln.max_copy_entries),
        ("service_buffer", lo.service_buffer, ln.service_buffer),
        (
            "service_reassembly",
            lo.service_reassembly,
            ln.service_reassembly,
        ),
    ] {
        if a != b {
            d.ok(format!("limits.{k}"), format!("{a} -> {b}"));
        }
    }
    instances(&mut d, old, new);
    for ot in &old.types {
        if let Some(nt) = new.types.iter().find(|t| t.name == ot.name) {
            block_type(&mut d, ot, nt);
        }
    }
    d.changes
}

fn instances(d: &mut Diff, old: &Schema, new: &Schema) {
    let last = old.instances.len().saturating_sub(1);
    for (i, oa) in old.instances.iter().enumerate() {
        let path = format!("instances[{i}]");
        let Some(na) = new.instances.get(i) else {
            d.breaking(
                path,
                format!(
                    "instance array `{}` ({}) removed: its blocks are gone",
                    oa.ns, oa.ty
                ),
            );
            continue;
        };
        if oa.ty != na.ty {
            d.breaking(
                format!("{path}.type"),
                format!(
                    "type {} -> {}: blocks {}.. now mean something else",
                    oa.ty, na.ty, oa.ns
                ),
            );
        }
        if oa.max_count != na.max_count {
            if na.max_count < oa.max_count {
                d.breaking(
                    format!("{path}.max_count"),
                    format!(
                        "max_count {} -> {}: instances {}..{} are gone",
                        oa.max_count, na.max_count, na.max_count, oa.max_count
                    ),
                );
            } else if i != last {
                d.breaking(
                    format!("{path}.max_count"),
                    format!(
                        "max_count {} -> {}: every block of the arrays after it is renumbered",
                        oa.max_count, na.max_count
                    ),
                );
            } else {
                d.ok(
                    format!("{path}.max_count"),
                    format!(
                        "max_count {} -> {} (last array: no block moves)",
                        oa.max_count, na.max_count
                    ),
                );
            }
        }
        if oa.ns != na.ns {
            d.ok(
                format!("{path}.ns"),
                format!(
                    "ns `{}` -> `{}` (names on the master change, numbers do not)",
                    oa.ns, na.ns
                ),
            );
        }
    }
    for (i, na) in new.instances.iter().enumerate().skip(old.instances.len()) {
        d.ok(
            format!("instances[{i}]"),
            format!("instance array `{}` ({}) appended", na.ns, na.ty),
        );
    }
}

/// Compares items matched by index; names say whether an item moved or was renamed.
fn moved_or_renamed<'a>(
    kind: &str,
    what: &str,
    old_name: &str,
    new_name: &str,
    new_names: impl Iterator<Item = &'a str>,
    old_index: usize,
) -> String {
    let new_names: Vec<&str> = new_names.collect();
    match new_names.iter().position(|n| *n == old_name) {
        Some(j) => format!(
            "{kind} `{old_name}` moved from {what} {old_index} to {what} {j} (`{new_name}` took its place)"
        ),
        None => format!(
            "{kind} {what} {old_index} was `{old_name}`, is now `{new_name}`"
        ),
    }
}

fn block_type(d: &mut Diff, ot: &BlockType, nt: &BlockType) {
    let tp = format!("types.{}", ot.name);
    for (i, op) in ot.params.iter().enumerate() {
        let path = format!("{tp}.params.{}", op.name);
        let Some(np) = nt.params.get(i) else {
            let moved = nt.params.iter().position(|p| p.name == op.name);
            let msg = match moved {
                Some(j) => format!("moved from bit {i} to bit {j}: the changed-mask bit moves"),
                None => format!("removed (changed-mask bit {i})"),
            };
            d.breaking(path, msg);
            continue;
        };
        if op.name != np.name {
            let msg = moved_or_renamed(
                "param",
                "bit",
                &op.name,
                &np.name,
                nt.params.iter().map(|p| p.name.as_str()),
                i,
            );
            d.breaking(path, format!("{msg}: the changed-mask bit moves"));
            continue;
        }
        if op.ty != np.ty || op.len != np.len {
            d.breaking(
                path.clone(),
                format!(
                    "retyped {} -> {}",
                    type_text(op.ty.name(), op.len),
                    type_text(np.ty.name(), np.len)
                ),
            );
        }
        let opt = |v: &Option<fcan_core::types::Scalar>| {
            v.as_ref().map(scalar_text).unwrap_or_else(|| "none".into())
        };
        if op.default != np.default && op.ty == np.ty {
            d.ok(
                format!("{path}.default"),
                format!(
                    "{} -> {}",
                    scalar_text(&op.default),
                    scalar_text(&np.default)
                ),
            );
        }
        if op.min != np.min && op.ty == np.ty {
            d.ok(
                format!("{path}.min"),
                format!("{} -> {}", opt(&op.min), opt(&np.min)),
            );
        }
        if op.max != np.max && op.ty == np.ty {
            d.ok(
                format!("{path}.max"),
                format!("{} -> {}", opt(&op.max), opt(&np.max)),
            );
        }
    }
    for (i, np) in nt.params.iter().enumerate().skip(ot.params.len()) {
        if !ot.params.iter().any(|p| p.name == np.name) {
            d.ok(
                format!("{tp}.params.{}", np.name),
                format!("param appended at bit {i}"),
            );
        }
    }

    for (i, ot_) in ot.topics.iter().enumerate() {
        let path = format!("{tp}.topics.{}", ot_.name);
        let Some(nt_) = nt.topics.get(i) else {
            let msg = match nt.topics.iter().position(|t| t.name == ot_.name) {
                Some(j) => format!("renumbered from topic {i} to topic {j}"),
                None => format!("topic {i} removed"),
            };
            d.breaking(path, msg);
            continue;
        };
        if ot_.name != nt_.name {
            let msg = moved_or_renamed(
                "topic",
                "index",
                &ot_.name,
                &nt_.name,
                nt.topics.iter().map(|t| t.name.as_str()),
                i,
            );
            d.breaking(path, format!("{msg}: the topic is renumbered"));
            continue;
        }
        if ot_.dir != nt_.dir {
            d.breaking(
                format!("{path}.dir"),
                format!("direction {:?} -> {:?}", ot_.dir, nt_.dir),
            );
        }
        if ot_.period_us != nt_.period_us {
            d.ok(
                format!("{path}.period_us"),
                format!("{} -> {}", ot_.period_us, nt_.period_us),
            );
        }
        if ot_.ros != nt_.ros {
            d.ok(format!("{path}.ros"), "ROS metadata changed");
        }
        fields(
            d,
            &format!("{path}.fields"),
            &ot_.fields,
            &nt_.fields,
            |n| (topic_frames(Mtu::Classic, n), topic_frames(Mtu::Fd, n)),
        );
    }
    for (i, n) in nt.topics.iter().enumerate().skip(ot.topics.len()) {
        if !ot.topics.iter().any(|t| t.name == n.name) {
            d.ok(
                format!("{tp}.topics.{}", n.name),
                format!("topic appended at index {i}"),
            );
        }
    }

    for (i, os) in ot.services.iter().enumerate() {
        let path = format!("{tp}.services.{}", os.name);
        let Some(ns) = nt.services.get(i) else {
            let msg = match nt.services.iter().position(|s| s.name == os.name) {
                Some(j) => format!("renumbered from service {i} to service {j}"),
                None => format!("service {i} removed"),
            };
            d.breaking(path, msg);
            continue;
        };
        if os.name != ns.name {
            let msg = moved_or_renamed(
                "service",
                "index",
                &os.name,
                &ns.name,
                nt.services.iter().map(|s| s.name.as_str()),
                i,
            );
            d.breaking(path, format!("{msg}: the service is renumbered"));
            continue;
        }
        if os.ros != ns.ros {
            d.ok(format!("{path}.ros"), "ROS metadata changed");
        }
        fields(
            d,
            &format!("{path}.request"),
            &os.request,
            &ns.request,
            |n| {
                let n = n + ServiceRequest::HEADER_LEN;
                (
                    transfer_frames(Mtu::Classic, n),
                    transfer_frames(Mtu::Fd, n),
                )
            },
        );
        fields(
            d,
            &format!("{path}.response"),
            &os.response,
            &ns.response,
            |n| {
                let n = n + ServiceResponse::HEADER_LEN;
                (
                    transfer_frames(Mtu::Classic, n),
                    transfer_frames(Mtu::Fd, n),
                )
            },
        );
    }
    for (i, n) in nt.services.iter().enumerate().skip(ot.services.len()) {
        if !ot.services.iter().any(|s| s.name == n.name) {
            d.ok(
                format!("{tp}.services.{}", n.name),
                format!("service appended at index {i}"),
            );
        }
    }
}

fn type_text(ty: &str, len: Option<u32>) -> String {
    match len {
        Some(n) => format!("{ty}[{n}]"),
        None => ty.to_string(),
    }
}

fn fields(
    d: &mut Diff,
    path: &str,
    old: &[Field],
    new: &[Field],
    frames: impl Fn(usize) -> (usize, usize),
) {
    let mut broke = false;
    for (i, of) in old.iter().enumerate() {
        let fpath = format!("{path}.{}", of.name);
        let Some(nf) = new.get(i) else {
            d.breaking(fpath, format!("field {i} removed"));
            broke = true;
            continue;
        };
        if of.name != nf.name {
            let moved = new.iter().position(|f| f.name == of.name);
            let msg = match moved {
                Some(j) => {
                    format!("field moved from position {i} to {j}: every offset after it changes")
                }
                None => format!(
                    "field {i} was `{}`, is now `{}` (offsets after it may change)",
                    of.name, nf.name
                ),
            };
            d.breaking(fpath, msg);
            broke = true;
            continue;
        }
        if of.ty != nf.ty || of.len != nf.len {
            d.breaking(
                fpath,
                format!(
                    "retyped {} -> {}",
                    type_text(of.ty.name(), of.len),
                    type_text(nf.ty.name(), nf.len)
                ),
            );
            broke = true;
        }
    }
    if broke || new.len() <= old.len() {
        return;
    }
    let (os, ns) = (layout(old).size, layout(new).size);
    let (of, nf) = (frames(os), frames(ns));
    for f in &new[old.len()..] {
        let fpath = format!("{path}.{}", f.name);
        if of != nf {
            d.breaking(
                fpath,
                format!(
                    "field appended; the message grows from {os} to {ns} bytes and its framing changes (classic/FD frames {}/{} -> {}/{})",
                    of.0, of.1, nf.0, nf.1
                ),
            );
        } else {
            d.ok(
                fpath,
                format!("field appended ({os} -> {ns} bytes, same framing)"),
            );
        }
    }
}

/// Whether any change is breaking.
pub fn is_compatible(changes: &[Change]) -> bool {
    changes.iter().all(|c| c.severity == Severity::Compatible)
}
