//! Mirrors: which command (m2s) fields a fake node copies into which feedback (s2m)
//! fields, like ros2_control's `GenericSystem` mirrors commands to states.
//!
//! A rule is `COMMAND=FEEDBACK` (or `COMMAND -> FEEDBACK`), each side a topic of this
//! node named as in its paths without the node, and a field:
//!
//! ```text
//! motor0/target.value=motor0/feedback.position     one field of one instance
//! motor*/target.value=motor*/feedback.position     every instance: `*` is the index, the same on both sides
//! motor*/trajectory.positions[0]=motor*/feedback.position   one element of a fixed array
//! motor*/target=motor*/status                      every field the two topics share by name
//! ```
//!
//! Values convert between scalar types with saturation
//! ([`fcan_core::types::Scalar::saturate`]); a fixed array maps onto a fixed array of
//! the same length, element by element. Rules are checked against the schema when the
//! node is built ([`Mirror::resolve`]): an unknown topic or field, a left side that is
//! not a command or a right side that is not feedback, or shapes that cannot convert is
//! an error naming the rule and the field.

use fcan_core::ir::{Field, Schema};
use fcan_core::msg::DataDirection;
use fcan_core::types::{Scalar, ScalarType};

use crate::desc::FakeSchema;

/// A rule that cannot be read or does not fit the schema. The message names the rule
/// (and where it came from: `--mirror` or `FILE:LINE`) and the field at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("mirror `{rule}` ({origin}): {message}")]
pub struct MirrorError {
    /// The rule as written.
    pub rule: String,
    /// Where it was written.
    pub origin: String,
    /// What is wrong, naming the field.
    pub message: String,
}

/// One side of a rule as written.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Side {
    /// `motor*/target`: namespace and topic, `*` for the instance index.
    topic: String,
    /// The field, or `None` for every field shared by name.
    field: Option<String>,
    /// An element of a fixed-array field.
    element: Option<u32>,
}

/// One rule as written.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    text: String,
    origin: String,
    from: Side,
    to: Side,
}

/// The mirror rules of a fake node, as written (not yet checked against a schema).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mirror {
    rules: Vec<Rule>,
}

impl Mirror {
    /// No rules: feedback stays at its defaults (zero).
    pub fn new() -> Mirror {
        Mirror::default()
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Adds one rule; `origin` says where it was written (`--mirror`, `FILE:LINE`).
    ///
    /// ```
    /// let mut m = fcan_fake::Mirror::new();
    /// m.add("motor*/target.value=motor*/feedback.position", "--mirror").unwrap();
    /// assert!(m.add("motor*/target.value", "--mirror").is_err());
    /// ```
    pub fn add(&mut self, text: &str, origin: &str) -> Result<(), MirrorError> {
        let err = |message: String| MirrorError {
            rule: text.trim().to_string(),
            origin: origin.to_string(),
            message,
        };
        let (from, to) = text
            .split_once("->")
            .or_else(|| text.split_once('='))
            .ok_or_else(|| {
                err(
                    "expected COMMAND=FEEDBACK, e.g. motor*/target.value=motor*/feedback.position"
                        .into(),
                )
            })?;
        let from = side(from.trim()).map_err(&err)?;
        let to = side(to.trim()).map_err(&err)?;
        if from.topic.contains('*') != to.topic.contains('*') {
            return Err(err(
                "`*` (the instance index) must be on both sides or on neither".into(),
            ));
        }
        self.rules.push(Rule {
            text: text.trim().to_string(),
            origin: origin.to_string(),
            from,
            to,
        });
        Ok(())
    }

    /// Adds the rules of a mirror file: one rule a line; blank lines and lines starting
    /// with `#` are skipped. `name` names the file in errors (`name:LINE`).
    ///
    /// ```
    /// let mut m = fcan_fake::Mirror::new();
    /// m.add_file("# commands to feedback\nmotor*/target.value=motor*/feedback.position\n", "m.txt").unwrap();
    /// let e = m.add_file("\nnonsense\n", "m.txt").unwrap_err();
    /// assert_eq!(e.origin, "m.txt:2");
    /// ```
    pub fn add_file(&mut self, text: &str, name: &str) -> Result<(), MirrorError> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            self.add(line, &format!("{name}:{}", i + 1))?;
        }
        Ok(())
    }

    /// Checks every rule against `schema` and resolves it to the blocks, topics and
    /// fields it copies between.
    pub fn resolve(&self, schema: &FakeSchema) -> Result<Routes, MirrorError> {
        let mut routes = Routes::default();
        for rule in &self.rules {
            let err = |message: String| MirrorError {
                rule: rule.text.clone(),
                origin: rule.origin.clone(),
                message,
            };
            let from = find_topic(schema, &rule.from.topic).map_err(&err)?;
            let to = find_topic(schema, &rule.to.topic).map_err(&err)?;
            let (ft, tt) = (&from.topic, &to.topic);
            if ft.dir != DataDirection::M2s {
                return Err(err(format!(
                    "`{}` is feedback (s2m): the left side is the command (m2s) whose value is copied",
                    rule.from.topic
                )));
            }
            if tt.dir != DataDirection::S2m {
                return Err(err(format!(
                    "`{}` is a command (m2s): the right side is the feedback (s2m) the value is copied to",
                    rule.to.topic
                )));
            }
            let pairs = field_pairs(rule, ft, tt).map_err(&err)?;
            let fl = &schema.numbering.layouts[from.type_index].topics[from.topic_index];
            let tl = &schema.numbering.layouts[to.type_index].topics[to.topic_index];
            for (fi, fe, ti, te, count) in pairs {
                let (ff, tf) = (&ft.fields[fi], &tt.fields[ti]);
                let copy = FieldCopy {
                    from_ty: ff.ty,
                    from_offset: fl.fields[fi].offset + fe * ff.ty.size(),
                    to_ty: tf.ty,
                    to_offset: tl.fields[ti].offset + te * tf.ty.size(),
                    count,
                };
                for (index, from_block) in &from.blocks {
                    // `*` binds one index on both sides; without it each side is one block.
                    let to_block = if rule.from.topic.contains('*') {
                        to.blocks.iter().find(|(i, _)| i == index).map(|(_, b)| *b)
                    } else {
                        to.blocks.first().map(|(_, b)| *b)
                    };
                    if let Some(to_block) = to_block {
                        routes.push(
                            (*from_block, from.topic_index as u8),
                            (to_block, to.topic_index as u8),
                            copy,
                        );
                    }
                }
            }
        }
        Ok(routes)
    }
}

/// `motor*/target.value[2]` → its parts.
fn side(text: &str) -> Result<Side, String> {
    let bad = |why: &str| Err(format!("`{text}`: {why}"));
    if text.is_empty() {
        return bad("empty side: expected NS/TOPIC.FIELD");
    }
    let (topic, field) = match text.rsplit_once('.') {
        Some((t, f)) => (t, Some(f)),
        None => (text, None),
    };
    let topic = topic.trim_start_matches('/');
    if topic.is_empty() || topic.split('/').any(str::is_empty) {
        return bad("expected NS/TOPIC.FIELD, e.g. motor0/feedback.position");
    }
    let (field, element) = match field {
        None => (None, None),
        Some(f) => match f.split_once('[') {
            None => (Some(f.to_string()), None),
            Some((name, rest)) => {
                let Some(k) = rest.strip_suffix(']').and_then(|k| k.parse::<u32>().ok()) else {
                    return bad("an element is written FIELD[INDEX], e.g. positions[0]");
                };
                (Some(name.to_string()), Some(k))
            }
        },
    };
    if field.as_deref() == Some("") {
        return bad("no field after `.`");
    }
    Ok(Side {
        topic: topic.to_string(),
        field,
        element,
    })
}

/// A topic a side names, and the blocks it covers.
struct Found<'s> {
    type_index: usize,
    topic_index: usize,
    topic: &'s fcan_core::ir::Topic,
    /// (instance index, block number), in index order.
    blocks: Vec<(u32, u8)>,
}

/// `ns/topic` of instance pattern `ns` (`motor{i}`), with `{i}` written as `index`.
fn name_of(ns: &str, topic: &str, index: &str) -> String {
    let ns = ns.replace("{i}", index);
    if ns.is_empty() {
        topic.to_string()
    } else {
        format!("{ns}/{topic}")
    }
}

fn find_topic<'s>(schema: &'s FakeSchema, want: &str) -> Result<Found<'s>, String> {
    let s: &Schema = &schema.schema;
    let n = &schema.numbering;
    for (ai, a) in s.instances.iter().enumerate() {
        let Some(type_index) = s.types.iter().position(|t| t.name == a.ty) else {
            continue;
        };
        for (topic_index, t) in s.types[type_index].topics.iter().enumerate() {
            let blocks: Vec<(u32, u8)> = (0..a.max_count)
                .filter(|&i| {
                    let index = if want.contains('*') {
                        "*".to_string()
                    } else {
                        i.to_string()
                    };
                    name_of(&a.ns, &t.name, &index) == want
                })
                .filter_map(|i| n.block_number(ai, i).map(|b| (i, b)))
                .collect();
            if !blocks.is_empty() {
                return Ok(Found {
                    type_index,
                    topic_index,
                    topic: t,
                    blocks,
                });
            }
        }
    }
    let mut known: Vec<String> = Vec::new();
    for a in &s.instances {
        if let Some(t) = s.types.iter().find(|t| t.name == a.ty) {
            for tp in &t.topics {
                let star = if a.ns.contains("{i}") { "*" } else { "" };
                known.push(name_of(
                    &a.ns,
                    &tp.name,
                    if star.is_empty() { "" } else { star },
                ));
            }
        }
    }
    Err(format!(
        "no topic `{want}` on node `{}`; its topics: {}",
        s.node,
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    ))
}

/// One field pair a rule copies: (from field, from element, to field, to element,
/// elements to copy).
type FieldPair = (usize, usize, usize, usize, usize);

/// (block, topic): one topic of one block.
type TopicAt = (u8, u8);

/// The field pairs a rule copies.
fn field_pairs(
    rule: &Rule,
    ft: &fcan_core::ir::Topic,
    tt: &fcan_core::ir::Topic,
) -> Result<Vec<FieldPair>, String> {
    let names = |t: &fcan_core::ir::Topic| -> String {
        t.fields
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let lookup = |side: &Side, t: &fcan_core::ir::Topic, name: &str| -> Result<usize, String> {
        t.fields.iter().position(|f| f.name == name).ok_or_else(|| {
            format!(
                "`{}` has no field `{name}`; its fields: {}",
                side.topic,
                names(t)
            )
        })
    };
    match (&rule.from.field, &rule.to.field) {
        (Some(a), Some(b)) => {
            let fi = lookup(&rule.from, ft, a)?;
            let ti = lookup(&rule.to, tt, b)?;
            let one = shape(&rule.from, &ft.fields[fi])?;
            let other = shape(&rule.to, &tt.fields[ti])?;
            if one.2 != other.2 {
                return Err(format!(
                    "`{}.{a}` holds {} and `{}.{b}` holds {}: they cannot convert (pick one element with [INDEX])",
                    rule.from.topic,
                    count_text(one.2, &ft.fields[fi]),
                    rule.to.topic,
                    count_text(other.2, &tt.fields[ti]),
                ));
            }
            Ok(vec![(fi, one.1, ti, other.1, one.2)])
        }
        (None, None) => {
            let mut pairs = Vec::new();
            for (fi, f) in ft.fields.iter().enumerate() {
                if let Some(ti) = tt.fields.iter().position(|g| g.name == f.name) {
                    let (a, b) = (f.len.unwrap_or(1), tt.fields[ti].len.unwrap_or(1));
                    if f.len.is_some() != tt.fields[ti].len.is_some() || a != b {
                        return Err(format!(
                            "field `{}` is {} in `{}` and {} in `{}`: they cannot convert",
                            f.name,
                            count_text(a as usize, f),
                            rule.from.topic,
                            count_text(b as usize, &tt.fields[ti]),
                            rule.to.topic
                        ));
                    }
                    pairs.push((fi, 0, ti, 0, a as usize));
                }
            }
            if pairs.is_empty() {
                return Err(format!(
                    "`{}` ({}) and `{}` ({}) share no field name: name the fields, e.g. {}.FIELD={}.FIELD",
                    rule.from.topic,
                    names(ft),
                    rule.to.topic,
                    names(tt),
                    rule.from.topic,
                    rule.to.topic
                ));
            }
            Ok(pairs)
        }
        _ => Err(
            "name a field on both sides (NS/TOPIC.FIELD), or on neither to copy every field the topics share"
                .into(),
        ),
    }
}

/// (field, first element, elements) a side selects of `f`.
fn shape(side: &Side, f: &Field) -> Result<(usize, usize, usize), String> {
    match (side.element, f.len) {
        (None, None) => Ok((0, 0, 1)),
        (None, Some(n)) => Ok((0, 0, n as usize)),
        (Some(k), Some(n)) if k < n => Ok((0, k as usize, 1)),
        (Some(k), Some(n)) => Err(format!(
            "`{}.{}` has {n} elements: [{k}] is out of range",
            side.topic, f.name
        )),
        (Some(_), None) => Err(format!(
            "`{}.{}` is one {}, not a fixed array: drop the [INDEX]",
            side.topic, f.name, f.ty
        )),
    }
}

fn count_text(n: usize, f: &Field) -> String {
    if f.len.is_none() {
        format!("one {}", f.ty)
    } else {
        format!("{n} × {}", f.ty)
    }
}

/// One copy of field values from a command's bytes into a feedback's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldCopy {
    from_ty: ScalarType,
    from_offset: usize,
    to_ty: ScalarType,
    to_offset: usize,
    count: usize,
}

impl FieldCopy {
    /// Copies the values from `command` into `feedback`, converting with saturation.
    /// Returns `false` (and copies nothing more) when the command's bytes do not read as
    /// its type (a bool byte that is neither 0 nor 1) or a side is too short.
    pub(crate) fn apply(&self, command: &[u8], feedback: &mut [u8]) -> bool {
        for k in 0..self.count {
            let from = self.from_offset + k * self.from_ty.size();
            let to = self.to_offset + k * self.to_ty.size();
            let Some(v) = command
                .get(from..)
                .and_then(|b| Scalar::read(self.from_ty, b).ok())
            else {
                return false;
            };
            if feedback
                .get_mut(to..)
                .and_then(|b| v.saturate(self.to_ty).write(b))
                .is_none()
            {
                return false;
            }
        }
        true
    }
}

/// The checked rules: for each command topic of a block, the copies into feedback
/// topics its new values trigger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    /// (command block, command topic) → [(feedback block, feedback topic, copy)].
    pub(crate) sources: Vec<(TopicAt, Vec<(TopicAt, FieldCopy)>)>,
}

impl Routes {
    fn push(&mut self, from: TopicAt, to: TopicAt, copy: FieldCopy) {
        match self.sources.iter_mut().find(|(k, _)| *k == from) {
            Some((_, v)) => v.push((to, copy)),
            None => self.sources.push((from, vec![(to, copy)])),
        }
    }

    /// Field copies in all (one per rule and instance, and per shared field).
    pub fn len(&self) -> usize {
        self.sources.iter().map(|(_, v)| v.len()).sum()
    }

    /// Whether nothing is mirrored.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_convert_with_saturation_element_by_element() {
        // f32 at offset 1 of the command → u8 at offset 0 of the feedback.
        let c = FieldCopy {
            from_ty: ScalarType::F32,
            from_offset: 1,
            to_ty: ScalarType::U8,
            to_offset: 0,
            count: 1,
        };
        let mut cmd = [0u8; 5];
        cmd[1..].copy_from_slice(&300.5f32.to_le_bytes());
        let mut fb = [7u8; 2];
        assert!(c.apply(&cmd, &mut fb));
        assert_eq!(fb, [255, 7]);
        // Two i16 elements → two f32 elements.
        let c = FieldCopy {
            from_ty: ScalarType::I16,
            from_offset: 0,
            to_ty: ScalarType::F32,
            to_offset: 0,
            count: 2,
        };
        let cmd = [0xFF, 0xFF, 0x02, 0x00];
        let mut fb = [0u8; 8];
        assert!(c.apply(&cmd, &mut fb));
        assert_eq!(f32::from_le_bytes(fb[..4].try_into().unwrap()), -1.0);
        assert_eq!(f32::from_le_bytes(fb[4..].try_into().unwrap()), 2.0);
        // A bool byte that is neither 0 nor 1 is not copied.
        let c = FieldCopy {
            from_ty: ScalarType::Bool,
            from_offset: 0,
            to_ty: ScalarType::Bool,
            to_offset: 0,
            count: 1,
        };
        let mut fb = [0u8; 1];
        assert!(!c.apply(&[2], &mut fb));
        assert_eq!(fb, [0]);
    }
}
