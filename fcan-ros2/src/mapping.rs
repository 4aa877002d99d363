//! Which ROS 2 type each topic and service of a schema is carried as, and where each
//! fcan field goes in it. Sans I/O: a pure function of the schema and the interface
//! store ([`map_schema`]), used alike by the bridge (from a node's blob, at run time)
//! and by `fcan-codegen ros-package` (from YAML).
//!
//! | the schema says | the ROS type | fields |
//! |---|---|---|
//! | `ros: {type}` naming a bundled interface (`std_msgs/msg/Bool`) | that interface | by name, renamed by `ros.map` (`on: data`; a dotted target such as `linear.x` reaches into a nested message) |
//! | `ros: {type}` naming another type (`fibril_control_msgs/msg/Feedback`) | a **custom** type built from the fcan fields | one per fcan field, named as `ros.map` says, **sorted by name**, so two schemas that declare one type with the same fields in different orders agree on it |
//! | no `ros:` | a **generated** type `fcan_<node>_msgs/msg/<Block><Topic>` ([`generated_package`]) | one per fcan field, in declaration order |
//!
//! On the way to ROS (an s2m topic, a service response) a ROS field no fcan field fills
//! is zero (empty for strings and sequences), and an fcan field the ROS type has no
//! field for is left out (a [`Note`] says so). On the way from ROS (an m2s topic, a
//! service request) every fcan field must have a ROS field, or the type is refused.
//! Element types pair bool with bool, integer with integer, float with float; towards
//! ROS the ROS type must hold every value of the fcan type (`u8` into `int16` yes,
//! `u32` into `int16` no); from ROS a value the fcan type cannot hold refuses the
//! message at run time ([`crate::cdr`]). An fcan array of `n` pairs with `T[n]`,
//! `T[]` or `T[<=m]` (`m ≥ n`); from ROS a sequence must hold exactly `n` values.
//!
//! A `ros:` the bridge cannot honour (a type in a bundled package it does not bundle, a
//! field that does not pair, a custom type another schema already defined differently)
//! does not lose the topic: it is carried as its generated type, with a [`Note`] saying
//! why.

use fcan_core::ir::{Field, Ros, Schema};
use fcan_core::msg::DataDirection;
use fcan_core::types::ScalarType;

use crate::idl::{is_field_name, BaseType, Message, Primitive, RosField, Service, Shape, TypeName};
use crate::interfaces::{primitive_of, Interfaces};

/// Where a ROS type came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// A bundled standard interface the schema names.
    Bundled,
    /// A type the schema names, built from its fcan fields.
    Custom,
    /// A type named by the bridge (no `ros:`, or one it could not honour).
    Generated,
}

/// What fills one field of a ROS message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Slot {
    /// The fcan field with this index.
    Field(usize),
    /// Nothing: zero, empty string, empty sequence, a message of zeros.
    Zero,
    /// A nested message, some of whose fields are filled: one slot per field.
    Nested(Vec<Slot>),
}

/// One fcan message (a topic, a request or a response) bound to a ROS message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The ROS message's full name (`std_srvs/srv/SetBool_Request`).
    pub message: String,
    /// One slot per field of the ROS message ([`Message::wire_fields`]).
    pub slots: Vec<Slot>,
    /// fcan fields the ROS message does not carry (towards ROS only).
    pub dropped: Vec<usize>,
}

/// Which way values cross the bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// fcan → ROS: an s2m topic, a service response.
    ToRos,
    /// ROS → fcan: an m2s topic, a service request.
    FromRos,
}

/// A topic's ROS type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicType {
    /// The block type (`MdMotor`).
    pub block: String,
    /// The topic (`feedback`).
    pub topic: String,
    /// The topic's direction.
    pub dir: DataDirection,
    /// The ROS type (`fibril_control_msgs/msg/Feedback`).
    pub ros_type: String,
    /// Where the type came from.
    pub origin: Origin,
    /// The fields.
    pub binding: Binding,
}

/// A service's ROS type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceType {
    /// The block type.
    pub block: String,
    /// The service (`reset_encoder`).
    pub service: String,
    /// The ROS service type (`std_srvs/srv/SetBool`).
    pub ros_type: String,
    /// Where the type came from.
    pub origin: Origin,
    /// The request (from ROS).
    pub request: Binding,
    /// The response (to ROS).
    pub response: Binding,
}

/// Something a user should know about the mapping: a field left out, a `ros:` not
/// honoured and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// `md_controller{i}: MdMotor.feedback`.
    pub at: String,
    /// What happened.
    pub message: String,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// Every topic's and service's ROS type for one node schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaTypes {
    /// The package of the generated types ([`generated_package`]).
    pub package: String,
    /// One per (block type, topic), block types by name, topics in schema order.
    pub topics: Vec<TopicType>,
    /// One per (block type, service).
    pub services: Vec<ServiceType>,
    /// What the user should know.
    pub notes: Vec<Note>,
}

impl SchemaTypes {
    /// A topic's type.
    pub fn topic(&self, block: &str, topic: &str) -> Option<&TopicType> {
        self.topics
            .iter()
            .find(|t| t.block == block && t.topic == topic)
    }

    /// A service's type.
    pub fn service(&self, block: &str, service: &str) -> Option<&ServiceType> {
        self.services
            .iter()
            .find(|s| s.block == block && s.service == service)
    }
}

/// The package of a node's generated types: `fcan_` + the node name without its `{i}`,
/// in ROS package spelling, + `_msgs`. No bundled package starts with `fcan_`.
///
/// ```
/// assert_eq!(fcan_ros2::mapping::generated_package("md_controller{i}"), "fcan_md_controller_msgs");
/// assert_eq!(fcan_ros2::mapping::generated_package("IoBoard-{i}"), "fcan_io_board_msgs");
/// ```
pub fn generated_package(node: &str) -> String {
    let base = snake_case(&node.replace("{i}", ""));
    if base.is_empty() {
        "fcan_node_msgs".to_string()
    } else {
        format!("fcan_{base}_msgs")
    }
}

/// `snake_case` for ROS names: lower case, `_` before an inner capital and for any
/// other character, no doubled, leading or trailing `_`.
fn snake_case(s: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in s.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = true;
        } else {
            out.push('_');
            prev_lower = false;
        }
    }
    let parts: Vec<&str> = out.split('_').filter(|p| !p.is_empty()).collect();
    let mut s = parts.join("_");
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'n');
    }
    s
}

/// `CamelCase` of a name's `_`- and `/`-separated parts (`analog/samples` → `AnalogSamples`).
fn camel_case(s: &str) -> String {
    let mut out = String::new();
    for part in s.split(['_', '/']).filter(|p| !p.is_empty()) {
        let mut c = part.chars();
        if let Some(first) = c.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(c.filter(|c| c.is_ascii_alphanumeric()));
        }
    }
    if !out.starts_with(|c: char| c.is_ascii_uppercase()) {
        out.insert(0, 'T');
    }
    out
}

/// A ROS field name for an fcan field name the bridge names itself (generated types).
fn ros_field_name(fcan: &str) -> String {
    if is_field_name(fcan) {
        fcan.to_string()
    } else {
        let s = snake_case(fcan);
        if s.is_empty() {
            "field".to_string()
        } else {
            s
        }
    }
}

/// Maps every topic and service of `schema` to a ROS type, adding the custom and
/// generated types to `store`. Block types are taken by name, so the result, and which
/// of two conflicting custom definitions wins, does not depend on file order.
pub fn map_schema(schema: &Schema, store: &mut Interfaces) -> SchemaTypes {
    let package = generated_package(&schema.node);
    let mut out = SchemaTypes {
        package: package.clone(),
        topics: Vec::new(),
        services: Vec::new(),
        notes: Vec::new(),
    };
    let mut blocks: Vec<_> = schema.types.iter().collect();
    blocks.sort_by(|a, b| a.name.cmp(&b.name));
    for bt in blocks {
        for t in &bt.topics {
            let at = format!("{}: {}.{}", schema.node, bt.name, t.name);
            let flow = match t.dir {
                DataDirection::S2m => Flow::ToRos,
                DataDirection::M2s => Flow::FromRos,
            };
            let named = t
                .ros
                .as_ref()
                .map(|ros| named_topic(store, ros, &t.fields, flow));
            let (ros_type, origin, binding) = match named {
                Some(Ok((origin, binding, dropped_notes))) => {
                    for n in dropped_notes {
                        out.notes.push(Note {
                            at: at.clone(),
                            message: n,
                        });
                    }
                    (binding.message.clone(), origin, binding)
                }
                other => {
                    let base = format!(
                        "{package}/msg/{}{}",
                        camel_case(&bt.name),
                        camel_case(&t.name)
                    );
                    let (name, binding) = generated_topic(store, &base, &t.fields);
                    if let Some(Err(why)) = other {
                        out.notes.push(Note {
                            at: at.clone(),
                            message: format!("{why}; carried as {name} instead"),
                        });
                    }
                    (name, Origin::Generated, binding)
                }
            };
            out.topics.push(TopicType {
                block: bt.name.clone(),
                topic: t.name.clone(),
                dir: t.dir,
                ros_type,
                origin,
                binding,
            });
        }
        for sv in &bt.services {
            let at = format!("{}: {}.{}", schema.node, bt.name, sv.name);
            let named = sv
                .ros
                .as_ref()
                .map(|ros| named_service(store, ros, &sv.request, &sv.response));
            let (ros_type, origin, request, response) = match named {
                Some(Ok((origin, req, resp, notes))) => {
                    for n in notes {
                        out.notes.push(Note {
                            at: at.clone(),
                            message: n,
                        });
                    }
                    let name = req.message.trim_end_matches("_Request").to_string();
                    (name, origin, req, resp)
                }
                other => {
                    let base = format!(
                        "{package}/srv/{}{}",
                        camel_case(&bt.name),
                        camel_case(&sv.name)
                    );
                    let (name, req, resp) =
                        generated_service(store, &base, &sv.request, &sv.response);
                    if let Some(Err(why)) = other {
                        out.notes.push(Note {
                            at: at.clone(),
                            message: format!("{why}; carried as {name} instead"),
                        });
                    }
                    (name, Origin::Generated, req, resp)
                }
            };
            out.services.push(ServiceType {
                block: bt.name.clone(),
                service: sv.name.clone(),
                ros_type,
                origin,
                request,
                response,
            });
        }
    }
    out
}

type Named = (Origin, Binding, Vec<String>);

/// Binds one topic's fields to the ROS type its `ros:` names (bundled or custom), as
/// [`map_schema`] does, without the fallback to a generated type: the error says why
/// it cannot be honoured.
pub fn bind_topic(
    store: &mut Interfaces,
    ros: &Ros,
    fields: &[Field],
    flow: Flow,
) -> Result<Binding, String> {
    named_topic(store, ros, fields, flow).map(|(_, b, _)| b)
}

fn named_topic(
    store: &mut Interfaces,
    ros: &Ros,
    fields: &[Field],
    flow: Flow,
) -> Result<Named, String> {
    let t = TypeName::parse(&ros.ty).map_err(|e| e.to_string())?;
    if t.kind != "msg" {
        return Err(format!("ros.type `{}` is not a message type", ros.ty));
    }
    if store.message(&ros.ty).is_some() && store.is_bundled(&ros.ty) {
        let (binding, notes) = bind(store, &ros.ty, fields, &ros.map, flow)?;
        return Ok((Origin::Bundled, binding, notes));
    }
    if store.is_bundled_package(t.package) {
        return Err(format!(
            "`{}` is not a {} type the bridge bundles",
            ros.ty, t.package
        ));
    }
    let m = custom_message(&ros.ty, fields, &ros.map)?;
    store.add_message(m).map_err(|c| c.to_string())?;
    let (binding, notes) = bind(store, &ros.ty, fields, &ros.map, flow)?;
    Ok((Origin::Custom, binding, notes))
}

fn named_service(
    store: &mut Interfaces,
    ros: &Ros,
    request: &[Field],
    response: &[Field],
) -> Result<(Origin, Binding, Binding, Vec<String>), String> {
    let t = TypeName::parse(&ros.ty).map_err(|e| e.to_string())?;
    if t.kind != "srv" {
        return Err(format!("ros.type `{}` is not a service type", ros.ty));
    }
    let origin = if store.service(&ros.ty).is_some() && store.is_bundled(&ros.ty) {
        Origin::Bundled
    } else if store.is_bundled_package(t.package) {
        return Err(format!(
            "`{}` is not a {} type the bridge bundles",
            ros.ty, t.package
        ));
    } else {
        let s = Service {
            name: ros.ty.clone(),
            request: custom_message(&format!("{}_Request", ros.ty), request, &ros.map)?,
            response: custom_message(&format!("{}_Response", ros.ty), response, &ros.map)?,
        };
        store.add_service(s).map_err(|c| c.to_string())?;
        Origin::Custom
    };
    let (req, mut notes) = bind(
        store,
        &format!("{}_Request", ros.ty),
        request,
        &ros.map,
        Flow::FromRos,
    )?;
    let (resp, more) = bind(
        store,
        &format!("{}_Response", ros.ty),
        response,
        &ros.map,
        Flow::ToRos,
    )?;
    notes.extend(more);
    Ok((origin, req, resp, notes))
}

/// A custom type: one ROS field per fcan field, named by `ros.map`, sorted by name.
fn custom_message(
    name: &str,
    fields: &[Field],
    map: &[(String, String)],
) -> Result<Message, String> {
    let mut ros_fields = Vec::new();
    for f in fields {
        let target = map
            .iter()
            .find(|(k, _)| *k == f.name)
            .map_or(f.name.as_str(), |(_, v)| v.as_str());
        if !is_field_name(target) {
            return Err(format!(
                "`{target}` is not a ROS field name (lower case, digits, single underscores); rename it with ros.map"
            ));
        }
        if ros_fields.iter().any(|r: &RosField| r.name == target) {
            return Err(format!("two fields are named `{target}` in {name}"));
        }
        ros_fields.push(own_field(target.to_string(), f));
    }
    ros_fields.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Message {
        name: name.to_string(),
        fields: ros_fields,
    })
}

fn own_field(name: String, f: &Field) -> RosField {
    RosField {
        name,
        base: BaseType::Primitive(primitive_of(f.ty)),
        shape: f.len.map_or(Shape::Single, Shape::Array),
    }
}

/// A generated message, fields in declaration order; a name already taken by another
/// definition gets a number (`…2`, `…3`).
fn generated_message(store: &mut Interfaces, base: &str, fields: &[Field]) -> String {
    let mut n = 1;
    loop {
        let name = if n == 1 {
            base.to_string()
        } else {
            format!("{base}{n}")
        };
        let m = generated_fields(&name, fields);
        if store.add_message(m).is_ok() {
            return name;
        }
        n += 1;
    }
}

fn generated_fields(name: &str, fields: &[Field]) -> Message {
    let mut ros_fields: Vec<RosField> = Vec::new();
    for f in fields {
        let mut fname = ros_field_name(&f.name);
        while ros_fields.iter().any(|r| r.name == fname) {
            fname.push_str("_2");
        }
        ros_fields.push(own_field(fname, f));
    }
    Message {
        name: name.to_string(),
        fields: ros_fields,
    }
}

fn generated_topic(store: &mut Interfaces, base: &str, fields: &[Field]) -> (String, Binding) {
    let name = generated_message(store, base, fields);
    (name.clone(), in_order(name, fields.len()))
}

fn in_order(message: String, n: usize) -> Binding {
    Binding {
        message,
        slots: if n == 0 {
            vec![Slot::Zero]
        } else {
            (0..n).map(Slot::Field).collect()
        },
        dropped: Vec::new(),
    }
}

fn generated_service(
    store: &mut Interfaces,
    base: &str,
    request: &[Field],
    response: &[Field],
) -> (String, Binding, Binding) {
    let mut n = 1;
    loop {
        let name = if n == 1 {
            base.to_string()
        } else {
            format!("{base}{n}")
        };
        let s = Service {
            name: name.clone(),
            request: generated_fields(&format!("{name}_Request"), request),
            response: generated_fields(&format!("{name}_Response"), response),
        };
        if store.add_service(s).is_ok() {
            return (
                name.clone(),
                in_order(format!("{name}_Request"), request.len()),
                in_order(format!("{name}_Response"), response.len()),
            );
        }
        n += 1;
    }
}

/// Binds fcan fields to the fields of a known ROS message by name (after `ros.map`).
fn bind(
    store: &Interfaces,
    message: &str,
    fields: &[Field],
    map: &[(String, String)],
    flow: Flow,
) -> Result<(Binding, Vec<String>), String> {
    let msg = store
        .message(message)
        .ok_or_else(|| format!("`{message}` is not a known type"))?;
    let short = message.rsplit('/').next().unwrap_or(message);
    let mut slots = vec![Slot::Zero; msg.wire_fields().len()];
    let mut dropped = Vec::new();
    let mut notes = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let explicit = map
            .iter()
            .find(|(k, _)| *k == f.name)
            .map(|(_, v)| v.as_str());
        let target = explicit.unwrap_or(&f.name);
        match resolve(store, msg, target) {
            None if explicit.is_some() => {
                return Err(format!(
                    "ros.map sends `{}` to `{target}`, which {short} has not",
                    f.name
                ))
            }
            None if flow == Flow::ToRos => {
                dropped.push(i);
                notes.push(format!(
                    "{short} has no field `{}`; it is not carried",
                    f.name
                ));
            }
            None => {
                return Err(format!(
                    "{short} has no field `{}` to fill it from (name one with ros.map)",
                    f.name
                ))
            }
            Some((path, rf)) => {
                pairs(f, rf, flow)
                    .map_err(|why| format!("`{}` → {short}.{target}: {why}", f.name))?;
                place(store, msg, &mut slots, &path, i)
                    .map_err(|()| format!("two fields go to {short}.{target}"))?;
            }
        }
    }
    Ok((
        Binding {
            message: message.to_string(),
            slots,
            dropped,
        },
        notes,
    ))
}

/// The field a dotted path names, with the field indices down to it.
fn resolve<'a>(
    store: &'a Interfaces,
    msg: &'a Message,
    path: &str,
) -> Option<(Vec<usize>, &'a RosField)> {
    let mut indices = Vec::new();
    let mut current = msg;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let (i, f) = current
            .fields
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == part)?;
        indices.push(i);
        if parts.peek().is_none() {
            return Some((indices, f));
        }
        match (&f.base, f.shape) {
            (BaseType::Nested(n), Shape::Single) => current = store.message(n)?,
            _ => return None,
        }
    }
    None
}

fn place(
    store: &Interfaces,
    msg: &Message,
    slots: &mut [Slot],
    path: &[usize],
    field: usize,
) -> Result<(), ()> {
    let (first, rest) = path.split_first().ok_or(())?;
    let slot = slots.get_mut(*first).ok_or(())?;
    if rest.is_empty() {
        return match slot {
            Slot::Zero => {
                *slot = Slot::Field(field);
                Ok(())
            }
            _ => Err(()),
        };
    }
    let BaseType::Nested(n) = &msg.fields[*first].base else {
        return Err(());
    };
    let nested = store.message(n).ok_or(())?;
    if *slot == Slot::Zero {
        *slot = Slot::Nested(vec![Slot::Zero; nested.wire_fields().len()]);
    }
    match slot {
        Slot::Nested(inner) => place(store, nested, inner, rest, field),
        _ => Err(()),
    }
}

/// Whether an fcan field and a ROS field pair (see the module docs).
fn pairs(f: &Field, rf: &RosField, flow: Flow) -> Result<(), String> {
    let shape_ok = match (f.len, rf.shape) {
        (None, Shape::Single) => true,
        (Some(n), Shape::Array(m)) => n == m,
        (Some(_), Shape::Sequence) => true,
        (Some(n), Shape::BoundedSequence(m)) => m >= n,
        _ => false,
    };
    if !shape_ok {
        let fcan = f
            .len
            .map_or("a single value".to_string(), |n| format!("{n} values"));
        return Err(format!(
            "{fcan} cannot fill a ROS {}",
            shape_words(rf.shape)
        ));
    }
    let p = match &rf.base {
        BaseType::Primitive(p) if *p != Primitive::String => *p,
        _ => return Err("a ROS string or message cannot hold an fcan value".to_string()),
    };
    let ok = match (family(f.ty), ros_range(p)) {
        (Family::Bool, None) => p == Primitive::Bool,
        (Family::Float, None) => match flow {
            Flow::FromRos => matches!(p, Primitive::Float32 | Primitive::Float64),
            Flow::ToRos => {
                p == Primitive::Float64 || (p == Primitive::Float32 && f.ty == ScalarType::F32)
            }
        },
        (Family::Int, Some((lo, hi))) => match flow {
            Flow::FromRos => true,
            Flow::ToRos => {
                let (flo, fhi) = fcan_range(f.ty);
                lo <= flo && fhi <= hi
            }
        },
        _ => false,
    };
    if ok {
        Ok(())
    } else if flow == Flow::ToRos && family(f.ty) == family_of(p) {
        Err(format!(
            "{} cannot hold every {} value",
            p.msg_name(),
            f.ty.name()
        ))
    } else {
        Err(format!(
            "{} does not pair with {}",
            f.ty.name(),
            p.msg_name()
        ))
    }
}

fn shape_words(s: Shape) -> String {
    match s {
        Shape::Single => "single value".to_string(),
        Shape::Array(n) => format!("array of {n}"),
        Shape::Sequence => "sequence".to_string(),
        Shape::BoundedSequence(n) => format!("sequence of at most {n}"),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Bool,
    Int,
    Float,
}

fn family(t: ScalarType) -> Family {
    match t {
        ScalarType::Bool => Family::Bool,
        ScalarType::F32 | ScalarType::F64 => Family::Float,
        _ => Family::Int,
    }
}

fn family_of(p: Primitive) -> Family {
    match p {
        Primitive::Bool => Family::Bool,
        Primitive::Float32 | Primitive::Float64 => Family::Float,
        _ => Family::Int,
    }
}

/// The range of a ROS integer type (`byte` and `char` are 8-bit unsigned); `None`
/// for the others.
pub(crate) fn ros_range(p: Primitive) -> Option<(i128, i128)> {
    Some(match p {
        Primitive::Byte | Primitive::Char | Primitive::UInt8 => (0, u8::MAX as i128),
        Primitive::Int8 => (i8::MIN as i128, i8::MAX as i128),
        Primitive::Int16 => (i16::MIN as i128, i16::MAX as i128),
        Primitive::UInt16 => (0, u16::MAX as i128),
        Primitive::Int32 => (i32::MIN as i128, i32::MAX as i128),
        Primitive::UInt32 => (0, u32::MAX as i128),
        Primitive::Int64 => (i64::MIN as i128, i64::MAX as i128),
        Primitive::UInt64 => (0, u64::MAX as i128),
        _ => return None,
    })
}

/// The range of an fcan integer type.
pub(crate) fn fcan_range(t: ScalarType) -> (i128, i128) {
    match t {
        ScalarType::U8 => (0, u8::MAX as i128),
        ScalarType::I8 => (i8::MIN as i128, i8::MAX as i128),
        ScalarType::U16 => (0, u16::MAX as i128),
        ScalarType::I16 => (i16::MIN as i128, i16::MAX as i128),
        ScalarType::U32 => (0, u32::MAX as i128),
        ScalarType::I32 => (i32::MIN as i128, i32::MAX as i128),
        ScalarType::U64 => (0, u64::MAX as i128),
        ScalarType::I64 => (i64::MIN as i128, i64::MAX as i128),
        _ => (0, 1),
    }
}
