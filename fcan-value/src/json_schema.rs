//! JSON for viewers: a JSON Schema for any topic, service or parameter, made at run time
//! from the schema blob's fields, and the value encoding that goes with it.
//!
//! Foxglove, Lichtblick and every tool reading an MCAP file's JSON channels parse numbers
//! as IEEE doubles (JavaScript's `JSON.parse`), which silently rounds an integer beyond
//! 2^53. fcan's 64-bit fields can hold such values, so the encoding for viewers
//! ([`ViewerJson`]) writes an integer as a JSON number when a double holds it exactly
//! (|v| ≤ 2^53) and as a decimal string otherwise: lossless, and plottable in every case
//! a plot makes sense. The schema of a 64-bit field says so (`"type": ["integer",
//! "string"]`). Non-finite floats are `null`, as everywhere in fcan's JSON.
//!
//! ```
//! use fcan_core::ir::Field;
//! use fcan_core::types::ScalarType;
//! use fcan_value::json_schema::{message_schema, ViewerJson};
//! use fcan_value::Value;
//! let fields = [
//!     Field { name: "position".into(), ty: ScalarType::F32, len: None },
//!     Field { name: "ticks".into(), ty: ScalarType::U64, len: None },
//! ];
//! let schema = message_schema("feedback", &fields);
//! assert_eq!(schema["properties"]["position"]["type"], serde_json::json!(["number", "null"]));
//! let v = Value::Struct(vec![("position".into(), Value::Float(0.5)), ("ticks".into(), Value::UInt(u64::MAX))]);
//! assert_eq!(
//!     serde_json::to_string(&ViewerJson(&v)).unwrap(),
//!     r#"{"position":0.5,"ticks":"18446744073709551615"}"#
//! );
//! ```

use fcan_core::ir::Field;
use fcan_core::types::ScalarType;
use serde_json::{json, Map, Value as Json};

use crate::Value;

/// The largest integer magnitude an IEEE double holds exactly.
pub const MAX_SAFE_INTEGER: u64 = 1 << 53;

/// JSON Schema (draft 2020-12) of one scalar or fixed-array field.
pub fn field_schema(ty: ScalarType, len: Option<u32>) -> Json {
    let one = scalar_schema(ty);
    match len {
        None => one,
        Some(n) => json!({
            "type": "array",
            "items": one,
            "minItems": n,
            "maxItems": n,
        }),
    }
}

fn scalar_schema(ty: ScalarType) -> Json {
    use ScalarType::*;
    match ty {
        Bool => json!({"type": "boolean"}),
        F32 | F64 => json!({
            "type": ["number", "null"],
            "description": format!("{} (null when not finite)", ty.name()),
        }),
        U64 | I64 => json!({
            "type": ["integer", "string"],
            "description": format!(
                "{}: a number when |v| ≤ 2^53, else a decimal string (no precision lost)",
                ty.name()
            ),
        }),
        _ => {
            let (min, max) = int_range(ty);
            json!({"type": "integer", "minimum": min, "maximum": max, "description": ty.name()})
        }
    }
}

fn int_range(ty: ScalarType) -> (i64, i64) {
    use ScalarType::*;
    match ty {
        U8 => (0, u8::MAX as i64),
        I8 => (i8::MIN as i64, i8::MAX as i64),
        U16 => (0, u16::MAX as i64),
        I16 => (i16::MIN as i64, i16::MAX as i64),
        U32 => (0, u32::MAX as i64),
        I32 => (i32::MIN as i64, i32::MAX as i64),
        _ => (i64::MIN, i64::MAX),
    }
}

/// JSON Schema of a message (a topic's value, a service request or response): an object
/// with every field, all required, nothing else. `serde_json`'s map (without its
/// `preserve_order` feature, which nothing here turns on) sorts the properties by name;
/// [`message_schema_text`] writes them in schema order.
pub fn message_schema(title: &str, fields: &[Field]) -> Json {
    let mut props = Map::new();
    for f in fields {
        props.insert(f.name.clone(), field_schema(f.ty, f.len));
    }
    let required: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

/// [`message_schema`] as JSON text with the properties in schema order, the order a
/// viewer then lists the fields in.
///
/// ```
/// use fcan_core::ir::Field;
/// use fcan_core::types::ScalarType;
/// let f = |n: &str| Field { name: n.into(), ty: ScalarType::Bool, len: None };
/// let text = fcan_value::json_schema::message_schema_text("t", &[f("z"), f("a")]);
/// assert!(text.find(r#""z":"#) < text.find(r#""a":"#));
/// ```
pub fn message_schema_text(title: &str, fields: &[Field]) -> String {
    use serde::ser::SerializeMap;
    struct Props<'a>(&'a [Field]);
    impl serde::Serialize for Props<'_> {
        fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
            let mut map = ser.serialize_map(Some(self.0.len()))?;
            for f in self.0 {
                map.serialize_entry(&f.name, &field_schema(f.ty, f.len))?;
            }
            map.end()
        }
    }
    struct Schema<'a>(&'a str, &'a [Field]);
    impl serde::Serialize for Schema<'_> {
        fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
            let whole = message_schema(self.0, &[]);
            let mut map = ser.serialize_map(None)?;
            if let Json::Object(m) = &whole {
                for (k, v) in m {
                    match k.as_str() {
                        "properties" => map.serialize_entry(k, &Props(self.1))?,
                        "required" => map.serialize_entry(
                            k,
                            &self.1.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
                        )?,
                        _ => map.serialize_entry(k, v)?,
                    }
                }
            }
            map.end()
        }
    }
    // Plain strings and numbers: serializing cannot fail.
    serde_json::to_string(&Schema(title, fields)).unwrap_or_default()
}

/// A [`Value`] serialized for viewers: like its own `Serialize`, except that an integer
/// a double cannot hold exactly is a decimal string (module docs).
#[derive(Clone, Copy, Debug)]
pub struct ViewerJson<'a>(pub &'a Value);

impl serde::Serialize for ViewerJson<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Int(i) if i.unsigned_abs() > MAX_SAFE_INTEGER => {
                ser.collect_str(&format_args!("{i}"))
            }
            Value::UInt(u) if *u > MAX_SAFE_INTEGER => ser.collect_str(&format_args!("{u}")),
            Value::Array(a) => {
                let mut seq = ser.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&ViewerJson(v))?;
                }
                seq.end()
            }
            Value::Struct(fields) => {
                let mut map = ser.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(&**k, &ViewerJson(v))?;
                }
                map.end()
            }
            other => other.serialize(ser),
        }
    }
}

/// A viewer's JSON back to a [`Value`]: the inverse of [`ViewerJson`] (a decimal string
/// where an integer is expected is read as that integer). What a client publishes or
/// sends as a request goes through this, then through the same checks as any value.
/// A `null` (what a non-finite float is written as) is refused: it names no number.
pub fn value_from_viewer_json(j: &Json) -> Result<Value, crate::ValueError> {
    fn fix(j: &Json) -> Json {
        match j {
            Json::String(s) => {
                if let Ok(u) = s.parse::<u64>() {
                    Json::from(u)
                } else if let Ok(i) = s.parse::<i64>() {
                    Json::from(i)
                } else {
                    j.clone()
                }
            }
            Json::Array(a) => Json::Array(a.iter().map(fix).collect()),
            Json::Object(o) => Json::Object(o.iter().map(|(k, v)| (k.clone(), fix(v))).collect()),
            other => other.clone(),
        }
    }
    Value::from_json(&fix(j))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str, ty: ScalarType, len: Option<u32>) -> Field {
        Field {
            name: name.into(),
            ty,
            len,
        }
    }

    #[test]
    fn schema_lists_every_field_in_order_with_its_bounds() {
        let s = message_schema(
            "t",
            &[
                f("on", ScalarType::Bool, None),
                f("pos", ScalarType::F32, Some(3)),
                f("mode", ScalarType::I8, None),
            ],
        );
        assert_eq!(s["required"], json!(["on", "pos", "mode"]));
        let props = s["properties"].as_object().unwrap();
        assert_eq!(props.len(), 3);
        // The text keeps the schema's order, and is the same schema.
        let fields = [
            f("on", ScalarType::Bool, None),
            f("pos", ScalarType::F32, Some(3)),
            f("mode", ScalarType::I8, None),
        ];
        let text = message_schema_text("t", &fields);
        let at = |k: &str| text.find(&format!("\"{k}\":{{")).unwrap();
        assert!(at("on") < at("pos") && at("pos") < at("mode"), "{text}");
        assert_eq!(serde_json::from_str::<Json>(&text).unwrap(), s);
        assert_eq!(s["properties"]["pos"]["minItems"], 3);
        assert_eq!(s["properties"]["pos"]["maxItems"], 3);
        assert_eq!(s["properties"]["mode"]["minimum"], -128);
        assert_eq!(s["properties"]["mode"]["maximum"], 127);
        assert_eq!(s["additionalProperties"], false);
    }

    #[test]
    fn big_integers_are_strings_and_come_back_exactly() {
        let v = Value::Struct(vec![
            ("a".into(), Value::Int(i64::MIN)),
            ("b".into(), Value::UInt(MAX_SAFE_INTEGER)),
            ("c".into(), Value::UInt(MAX_SAFE_INTEGER + 1)),
            (
                "d".into(),
                Value::Array(vec![Value::Int(-5), Value::Float(f64::NAN)]),
            ),
        ]);
        let text = serde_json::to_string(&ViewerJson(&v)).unwrap();
        assert_eq!(
            text,
            r#"{"a":"-9223372036854775808","b":9007199254740992,"c":"9007199254740993","d":[-5,null]}"#
        );
        // `null` (a non-finite float) is no value a client can send back.
        let mut j: Json = serde_json::from_str(&text).unwrap();
        assert!(value_from_viewer_json(&j).is_err());
        j["d"] = json!([-5, 0.5]);
        let back = value_from_viewer_json(&j).unwrap();
        assert_eq!(back.field("a"), Some(&Value::Int(i64::MIN)));
        assert_eq!(back.field("c"), Some(&Value::UInt(MAX_SAFE_INTEGER + 1)));
    }
}
