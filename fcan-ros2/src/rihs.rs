//! RIHS01 type hashes, computed the way ROS 2 (Iron and later) does: the type's
//! description (its fields, and those of every type it references, default values left
//! out) as JSON in one fixed layout, hashed with SHA-256, written `RIHS01_<hex>`. Jazzy
//! announces it in each endpoint's `USER_DATA` (`typehash=RIHS01_…;`), and tools such as
//! `ros2 topic info -v` show it.
//!
//! A service is hashed as ROS describes it: a type `pkg/srv/Name` with the fields
//! `request_message`, `response_message` and `event_message` (`pkg/srv/Name_Event`:
//! `service_msgs/ServiceEventInfo info`, the request and the response as `[<=1]`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::idl::{BaseType, IdlError, Primitive, RosField, Shape};
use crate::interfaces::Interfaces;

/// A RIHS01 hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeHash(pub [u8; 32]);

impl std::fmt::Display for TypeHash {
    /// `RIHS01_` and 64 lower-case hex digits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RIHS01_")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The hash of a message, a service's half, or a service (by its full name).
///
/// ```
/// let store = fcan_ros2::Interfaces::bundled();
/// let h = fcan_ros2::rihs::type_hash(&store, "std_msgs/msg/String").unwrap();
/// // The hash `ros2 topic info -v` shows for std_msgs/msg/String on Jazzy.
/// assert_eq!(h.to_string(), "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18");
/// ```
pub fn type_hash(store: &Interfaces, name: &str) -> Result<TypeHash, IdlError> {
    let json = description_json(store, name)?;
    Ok(TypeHash(Sha256::digest(json.as_bytes()).into()))
}

/// The JSON text that is hashed: `{"type_description": …, "referenced_type_descriptions":
/// [… sorted by name]}`, with Python's default separators (`", "`, `": "`), as
/// `rosidl_generator_type_description` writes it.
pub fn description_json(store: &Interfaces, name: &str) -> Result<String, IdlError> {
    let mut referenced = BTreeMap::new();
    collect(store, name, &mut referenced, 0)?;
    let top = referenced
        .remove(name)
        .ok_or_else(|| IdlError(format!("`{name}` is not a known type")))?;
    let mut s = String::from("{\"type_description\": ");
    s.push_str(&top);
    s.push_str(", \"referenced_type_descriptions\": [");
    for (i, d) in referenced.values().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(d);
    }
    s.push_str("]}");
    Ok(s)
}

/// Types nest at most this deep (the bundled ones reach 4); a deeper chain is refused
/// rather than followed.
const MAX_DEPTH: usize = 16;

fn collect(
    store: &Interfaces,
    name: &str,
    out: &mut BTreeMap<String, String>,
    depth: usize,
) -> Result<(), IdlError> {
    if out.contains_key(name) {
        return Ok(());
    }
    if depth > MAX_DEPTH {
        return Err(IdlError(format!(
            "`{name}` nests more than {MAX_DEPTH} deep"
        )));
    }
    let m = store
        .message(name)
        .ok_or_else(|| IdlError(format!("`{name}` is not a known type")))?;
    let fields = m.wire_fields();
    let mut s = format!("{{\"type_name\": \"{}\", \"fields\": [", m.name);
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        field_json(f, &mut s);
    }
    s.push_str("]}");
    out.insert(name.to_string(), s);
    for f in &fields {
        if let BaseType::Nested(n) = &f.base {
            collect(store, n, out, depth + 1)?;
        }
    }
    Ok(())
}

fn field_json(f: &RosField, s: &mut String) {
    let (base_id, string_capacity, nested) = match &f.base {
        BaseType::Primitive(p) => (primitive_id(*p), 0, ""),
        BaseType::BoundedString(n) => (21, *n, ""),
        BaseType::Nested(n) => (1, 0, n.as_str()),
    };
    let (offset, capacity) = match f.shape {
        Shape::Single => (0, 0),
        Shape::Array(n) => (48, n),
        Shape::BoundedSequence(n) => (96, n),
        Shape::Sequence => (144, 0),
    };
    let _ = write!(
        s,
        "{{\"name\": \"{}\", \"type\": {{\"type_id\": {}, \"capacity\": {capacity}, \"string_capacity\": {string_capacity}, \"nested_type_name\": \"{nested}\"}}}}",
        f.name,
        base_id + offset
    );
}

/// `type_description_interfaces/msg/FieldType`'s numbers.
fn primitive_id(p: Primitive) -> u32 {
    match p {
        Primitive::Int8 => 2,
        Primitive::UInt8 => 3,
        Primitive::Int16 => 4,
        Primitive::UInt16 => 5,
        Primitive::Int32 => 6,
        Primitive::UInt32 => 7,
        Primitive::Int64 => 8,
        Primitive::UInt64 => 9,
        Primitive::Float32 => 10,
        Primitive::Float64 => 11,
        Primitive::Char => 13,
        Primitive::Bool => 15,
        Primitive::Byte => 16,
        Primitive::String => 17,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_lists_references_once_sorted() {
        let store = Interfaces::bundled();
        let j = description_json(&store, "sensor_msgs/msg/Imu").unwrap();
        let refs: Vec<_> = j
            .match_indices("{\"type_name\": \"")
            .map(|(i, _)| j[i + 15..].split('"').next().unwrap())
            .collect();
        assert_eq!(
            refs,
            [
                "sensor_msgs/msg/Imu",
                "builtin_interfaces/msg/Time",
                "geometry_msgs/msg/Quaternion",
                "geometry_msgs/msg/Vector3",
                "std_msgs/msg/Header"
            ]
        );
        assert!(type_hash(&store, "no_such/msg/Type").is_err());
    }
}
