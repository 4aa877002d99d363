//! A [`CycleConfig`] checked against the schemas the nodes serve: every path names a
//! topic of a running node, in the right direction, and a field of it that holds a
//! number; every command topic has each field driven by a command or fixed by a
//! constant. The result is the loop's layout, by index: nothing is looked up by name
//! once the loop runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fcan_core::id::NodeId;
use fcan_core::ir::Field;
use fcan_core::msg::DataDirection;
use fcan_core::types::ScalarType;

use super::config::{CommandItem, CycleConfig, FieldRef, MonitorKind, Safe, StateItem};
use super::CycleError;
use fcan_master::registry::{Registry, TopicInfo};
use fcan_master::value::Value;

/// A state interface: where its value sits.
#[derive(Clone, Debug)]
pub(crate) struct StateSlot {
    pub name: Arc<str>,
    pub from: Arc<str>,
    pub timeout: Duration,
}

/// An s2m topic the loop reads, and which of its values go to which state.
#[derive(Clone, Debug)]
pub(crate) struct StateTopic {
    pub name: String,
    /// (field index, element index, state index) for every state read from this topic.
    pub picks: Vec<(usize, usize, usize)>,
}

/// A command interface.
#[derive(Clone, Debug)]
pub(crate) struct CommandSlot {
    pub name: Arc<str>,
    /// Index into [`Layout::command_topics`].
    pub topic: usize,
    pub ty: ScalarType,
    pub safe: Safe,
    pub initial: Option<f64>,
    /// The state interface of the same name, if any.
    pub state: Option<usize>,
    /// Where that state sits: (state topic = cell, position in the cell).
    pub cell: Option<(usize, usize)>,
}

/// An m2s topic the loop writes: its constants, and which command drives which field.
#[derive(Clone, Debug)]
pub(crate) struct CommandTopic {
    pub name: String,
    pub node: NodeId,
    /// The message with the constants set and every driven field 0.
    pub template: Value,
    /// (field index, element index, command index).
    pub drives: Vec<(usize, usize, usize)>,
}

/// The nodes the loop depends on.
#[derive(Clone, Debug)]
pub(crate) struct NodeRef {
    pub id: NodeId,
    pub name: Arc<str>,
}

/// The loop's layout.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// The state interfaces, then the monitored fields (`interfaces..`).
    pub states: Vec<StateSlot>,
    /// How many of `states` are interfaces.
    pub interfaces: usize,
    pub state_topics: Vec<StateTopic>,
    pub commands: Vec<CommandSlot>,
    pub command_topics: Vec<CommandTopic>,
    pub nodes: Vec<NodeRef>,
}

/// Per command topic: what set each (field, element) so far, for people.
type Setters = BTreeMap<(usize, usize), String>;

/// Why a configuration does not resolve yet or at all.
pub(crate) enum Unresolved {
    /// These nodes offer no topic (yet): waiting may help.
    Missing(Vec<String>),
    /// A definite error.
    Error(CycleError),
}

/// The node a topic path names (`/<node>/…` → `<node>`).
fn node_of(topic: &str) -> &str {
    topic[1..].split('/').next().unwrap_or("")
}

/// Resolves `config` against `registry`.
pub(crate) fn resolve(config: &CycleConfig, registry: &Registry) -> Result<Layout, Unresolved> {
    let mut r = Resolver::new(registry);
    for item in config.states() {
        r.add_state(item)?;
    }
    let interfaces = r.states.len();
    for m in config.monitors() {
        let name = match m.kind {
            MonitorKind::Ready => format!("{} ready", m.joint),
            MonitorKind::Fault(i) => format!("{} faults[{i}]", m.joint),
            MonitorKind::Watchdog => format!("{} watchdog", m.joint),
        };
        let before = r.states.len();
        r.add_state(StateItem {
            name,
            from: m.from,
            timeout: Duration::MAX,
        })?;
        if let (MonitorKind::Fault(_), Some(ty)) = (m.kind, r.types.get(before)) {
            if matches!(ty, ScalarType::F32 | ScalarType::F64) {
                return Err(field_err(
                    format!("joint `{}`: faults", m.joint),
                    m.from,
                    "a fault field is an integer or a bool (a word of bits, or a code)".into(),
                ));
            }
        }
    }
    for item in config.commands() {
        r.add_command(item)?;
    }
    if !r.missing.is_empty() {
        return Err(Unresolved::Missing(r.missing));
    }
    r.check_every_field_chosen()?;
    // Each command's state of the same name, and where its value sits.
    for c in &mut r.commands {
        c.state = r.states[..interfaces].iter().position(|s| s.name == c.name);
        c.cell = c.state.and_then(|state| {
            r.state_topics.iter().enumerate().find_map(|(t, topic)| {
                topic
                    .picks
                    .iter()
                    .position(|&(_, _, s)| s == state)
                    .map(|pos| (t, pos))
            })
        });
    }
    Ok(Layout {
        interfaces,
        states: r.states,
        state_topics: r.state_topics,
        commands: r.commands,
        command_topics: r.command_topics,
        nodes: r.nodes,
    })
}

/// A definite error about one item's path.
fn field_err(item: String, path: &str, reason: String) -> Unresolved {
    Unresolved::Error(CycleError::Field {
        item,
        path: path.to_string(),
        reason,
    })
}

/// The layout as [`resolve`] builds it, item by item.
struct Resolver<'r> {
    registry: &'r Registry,
    /// The nodes that offer at least one topic.
    present: BTreeSet<&'r str>,
    /// The nodes named by a path that offer no topic (yet), each once.
    missing: Vec<String>,
    nodes: Vec<NodeRef>,
    states: Vec<StateSlot>,
    state_topics: Vec<StateTopic>,
    commands: Vec<CommandSlot>,
    command_topics: Vec<CommandTopic>,
    /// Per command topic: its fields, and what set each (field, element) so far.
    setters: Vec<(Vec<Field>, Setters)>,
    /// Per state: its field's type.
    types: Vec<ScalarType>,
}

impl<'r> Resolver<'r> {
    fn new(registry: &'r Registry) -> Self {
        Resolver {
            registry,
            present: registry.topics.iter().map(|t| node_of(&t.name)).collect(),
            missing: Vec::new(),
            nodes: Vec::new(),
            states: Vec::new(),
            state_topics: Vec::new(),
            commands: Vec::new(),
            command_topics: Vec::new(),
            setters: Vec::new(),
            types: Vec::new(),
        }
    }

    fn note_missing(&mut self, node: &str) {
        if !self.missing.iter().any(|m| m == node) {
            self.missing.push(node.to_string());
        }
    }

    fn add_node(&mut self, t: &TopicInfo) {
        if !self.nodes.iter().any(|n| n.id == t.node) {
            self.nodes.push(NodeRef {
                id: t.node,
                name: node_of(&t.name).into(),
            });
        }
    }

    /// One state: its s2m topic and field, unless its node offers no topic yet.
    fn add_state(&mut self, item: StateItem) -> Result<(), Unresolved> {
        // `check` parsed every path already; a failure here is a configuration that
        // skipped it.
        let r = FieldRef::parse(item.from, false).map_err(|e| {
            Unresolved::Error(CycleError::Config(format!("state `{}`: {e}", item.name)))
        })?;
        if !self.present.contains(node_of(&r.topic)) {
            self.note_missing(node_of(&r.topic));
            return Ok(());
        }
        let t = self
            .registry
            .topic(&r.topic)
            .map_err(|e| field_err(format!("state `{}`", item.name), item.from, e.to_string()))?;
        if t.dir != DataDirection::S2m {
            return Err(field_err(
                format!("state `{}`", item.name),
                item.from,
                format!(
                    "{} is a command topic (m2s): a state reads feedback (s2m)",
                    t.name
                ),
            ));
        }
        let (field, elem, ty) = pick(t, &r)
            .map_err(|reason| field_err(format!("state `{}`", item.name), item.from, reason))?;
        self.add_node(t);
        let topic = match self.state_topics.iter().position(|s| s.name == t.name) {
            Some(i) => i,
            None => {
                self.state_topics.push(StateTopic {
                    name: t.name.clone(),
                    picks: Vec::new(),
                });
                self.state_topics.len() - 1
            }
        };
        self.state_topics[topic]
            .picks
            .push((field, elem, self.states.len()));
        self.types.push(ty);
        self.states.push(StateSlot {
            name: item.name.into(),
            from: item.from.into(),
            timeout: item.timeout,
        });
        Ok(())
    }

    /// One command: its m2s topic's constants, and the field it drives, unless its node
    /// offers no topic yet.
    fn add_command(&mut self, item: CommandItem) -> Result<(), Unresolved> {
        let what = format!("command `{}`", item.name);
        let r = FieldRef::parse(item.to, true)
            .map_err(|e| Unresolved::Error(CycleError::Config(format!("{what}: {e}"))))?;
        if !self.present.contains(node_of(&r.topic)) {
            self.note_missing(node_of(&r.topic));
            return Ok(());
        }
        let t = self
            .registry
            .topic(&r.topic)
            .map_err(|e| field_err(what.clone(), item.to, e.to_string()))?;
        if t.dir != DataDirection::M2s {
            return Err(field_err(
                what,
                item.to,
                format!(
                    "{} is a feedback topic (s2m): a command writes an m2s topic",
                    t.name
                ),
            ));
        }
        let (field, elem, ty) =
            pick(t, &r).map_err(|reason| field_err(what.clone(), item.to, reason))?;
        self.add_node(t);
        let topic = match self.command_topics.iter().position(|c| c.name == t.name) {
            Some(i) => i,
            None => {
                self.command_topics.push(CommandTopic {
                    name: t.name.clone(),
                    node: t.node,
                    template: zero_message(&t.fields),
                    drives: Vec::new(),
                });
                self.setters.push((t.fields.clone(), BTreeMap::new()));
                self.command_topics.len() - 1
            }
        };
        self.set_constants(topic, t, &r, &what, item.to)?;
        let (_, set) = &mut self.setters[topic];
        if let Some(prev) = set.get(&(field, elem)) {
            return Err(field_err(
                what,
                item.to,
                format!("this field is already set by {prev}"),
            ));
        }
        set.insert((field, elem), what.clone());
        self.command_topics[topic]
            .drives
            .push((field, elem, self.commands.len()));
        self.commands.push(CommandSlot {
            name: item.name.into(),
            topic,
            ty,
            safe: item.safe,
            initial: item.initial,
            state: None,
            cell: None,
        });
        Ok(())
    }

    /// The constants of command `what`'s path into its topic's template, each checked
    /// against its field's type; two commands may both write the same constant, but not
    /// two different values.
    fn set_constants(
        &mut self,
        topic: usize,
        t: &TopicInfo,
        r: &FieldRef,
        what: &str,
        path: &str,
    ) -> Result<(), Unresolved> {
        let (fields, set) = &mut self.setters[topic];
        for (name, value) in &r.constants {
            let Some(fi) = fields.iter().position(|f| &f.name == name) else {
                return Err(field_err(
                    what.to_string(),
                    path,
                    format!(
                        "{} has no field `{name}` to set (fields: {})",
                        t.name,
                        field_names(&t.fields)
                    ),
                ));
            };
            let f = &fields[fi];
            if f.len.is_some() {
                return Err(field_err(
                    what.to_string(),
                    path,
                    format!("`{name}` is an array: a constant sets a scalar field"),
                ));
            }
            let v = Value::from_json(value)
                .and_then(|v| v.to_scalar(f.ty, name).map(Value::from_scalar))
                .map_err(|e| field_err(what.to_string(), path, e.to_string()))?;
            let by = format!("the constant `{name}: {value}` of {what}");
            match set.get(&(fi, 0)) {
                Some(prev) if prev.starts_with("the constant") => {
                    if field_value(&self.command_topics[topic].template, fi, 0) != Some(&v) {
                        return Err(field_err(
                            what.to_string(),
                            path,
                            format!("`{name}` is set differently by {prev}"),
                        ));
                    }
                }
                Some(prev) => {
                    return Err(field_err(
                        what.to_string(),
                        path,
                        format!("`{name}` is already driven by {prev}"),
                    ))
                }
                None => {
                    set.insert((fi, 0), by);
                    set_field(&mut self.command_topics[topic].template, fi, 0, v);
                }
            }
        }
        Ok(())
    }

    /// Every field of every command topic driven or constant: the loop never sends a
    /// field nobody chose.
    fn check_every_field_chosen(&self) -> Result<(), Unresolved> {
        for (topic, (fields, set)) in self.command_topics.iter().zip(&self.setters) {
            for (fi, f) in fields.iter().enumerate() {
                for e in 0..f.count() {
                    if !set.contains_key(&(fi, e)) {
                        let elem = f.len.map(|_| format!("[{e}]")).unwrap_or_default();
                        let driver = self
                            .commands
                            .iter()
                            .find(|c| self.command_topics[c.topic].name == topic.name)
                            .map(|c| c.name.to_string())
                            .unwrap_or_default();
                        return Err(Unresolved::Error(CycleError::Field {
                            item: format!("command `{driver}`"),
                            path: topic.name.clone(),
                            reason: format!(
                                "field `{}{elem}` of {} is neither driven by a command nor set by a constant (add `{{{}: <value>}}` to the path, or a command for it)",
                                f.name, topic.name, f.name
                            ),
                        }));
                    }
                }
            }
        }
        Ok(())
    }
}

fn field_names(fields: &[Field]) -> String {
    fields
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The field (and element) `r` names in `t`, and its type.
fn pick(t: &TopicInfo, r: &FieldRef) -> Result<(usize, usize, ScalarType), String> {
    let Some(fi) = t.fields.iter().position(|f| f.name == r.field) else {
        return Err(format!(
            "{} has no field `{}` (fields: {})",
            t.name,
            r.field,
            field_names(&t.fields)
        ));
    };
    let f = &t.fields[fi];
    let elem = match (f.len, r.elem) {
        (None, None) => 0,
        (Some(n), Some(e)) if e < n => e as usize,
        (Some(n), Some(e)) => {
            return Err(format!(
                "`{}` has {n} elements: index {e} is out of range",
                f.name
            ))
        }
        (Some(n), None) => {
            return Err(format!(
                "`{}` is an array of {n}: name one element (`{}[0]`)",
                f.name, f.name
            ))
        }
        (None, Some(_)) => return Err(format!("`{}` is not an array", f.name)),
    };
    Ok((fi, elem, f.ty))
}

/// A message of `fields` with every value 0 (false).
fn zero_message(fields: &[Field]) -> Value {
    let zero = |ty: ScalarType| match ty {
        ScalarType::Bool => Value::Bool(false),
        ScalarType::F32 | ScalarType::F64 => Value::Float(0.0),
        ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64 => Value::Int(0),
        _ => Value::UInt(0),
    };
    Value::Struct(
        fields
            .iter()
            .map(|f| {
                let v = match f.len {
                    None => zero(f.ty),
                    Some(n) => Value::Array((0..n).map(|_| zero(f.ty)).collect()),
                };
                (Arc::from(f.name.as_str()), v)
            })
            .collect(),
    )
}

/// Element `elem` of field `field` of a message.
pub(crate) fn field_value(message: &Value, field: usize, elem: usize) -> Option<&Value> {
    let Value::Struct(fields) = message else {
        return None;
    };
    match &fields.get(field)?.1 {
        Value::Array(items) => items.get(elem),
        v if elem == 0 => Some(v),
        _ => None,
    }
}

/// Sets element `elem` of field `field` of a message (no-op on a shape mismatch).
pub(crate) fn set_field(message: &mut Value, field: usize, elem: usize, value: Value) {
    let Value::Struct(fields) = message else {
        return;
    };
    let Some((_, slot)) = fields.get_mut(field) else {
        return;
    };
    match slot {
        Value::Array(items) => {
            if let Some(item) = items.get_mut(elem) {
                *item = value;
            }
        }
        v => *v = value,
    }
}

/// A number as a value of type `ty`, for a command the loop already range-checked
/// ([`command_range`]): integers rounded to the nearest, a bool true when non-zero.
pub(crate) fn command_value(ty: ScalarType, v: f64) -> Value {
    match ty {
        ScalarType::Bool => Value::Bool(v != 0.0),
        ScalarType::F32 | ScalarType::F64 => Value::Float(v),
        ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64 => {
            Value::Int(v.round() as i64)
        }
        _ => Value::UInt(v.round() as u64),
    }
}

/// The numbers a command of type `ty` accepts (after rounding, for integers).
pub(crate) fn command_range(ty: ScalarType) -> (f64, f64) {
    match ty {
        ScalarType::Bool => (f64::MIN, f64::MAX),
        ScalarType::F32 => (-(f32::MAX as f64), f32::MAX as f64),
        ScalarType::F64 => (f64::MIN, f64::MAX),
        ScalarType::U8 => (0.0, u8::MAX as f64),
        ScalarType::U16 => (0.0, u16::MAX as f64),
        ScalarType::U32 => (0.0, u32::MAX as f64),
        // The largest f64 below 2^64 (and ≥ -2^63): every number in range converts.
        ScalarType::U64 => (0.0, 18_446_744_073_709_549_568.0),
        ScalarType::I8 => (i8::MIN as f64, i8::MAX as f64),
        ScalarType::I16 => (i16::MIN as f64, i16::MAX as f64),
        ScalarType::I32 => (i32::MIN as f64, i32::MAX as f64),
        _ => (-9_223_372_036_854_775_808.0, 9_223_372_036_854_774_784.0),
    }
}

/// A state's value as a number: numbers as they are, a bool as 1 or 0.
pub(crate) fn state_number(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        v => v.as_f64(),
    }
}
