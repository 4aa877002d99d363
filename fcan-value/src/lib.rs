//! Dynamic values: what topics, services and parameters carry, built at run time from a
//! node's schema. Convertible to and from JSON; packed and unpacked with the field layout
//! rules of `fcan_core` (never restated here).
//!
//! * [`Value`] and packing ([`pack_message`], [`unpack_message`], [`pack_param`], …);
//! * [`json_schema`]: a message's JSON Schema and the JSON a viewer shows;
//! * [`text`]: printing text that came from the bus.
//!
//! The master re-exports this crate as `fcan_master::value` (and `json_schema`, `text`
//! under their names); a face that needs values only (fcan-ros2) depends on this crate
//! and not on the master.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod json_schema;
pub mod text;

use std::fmt;
use std::sync::Arc;

use fcan_core::ir::Field;
use fcan_core::pack::{Reader, Writer};
use fcan_core::types::{Scalar, ScalarType};
use fcan_core::validate::did_you_mean;

/// A value of any schema type.
///
/// Deliberately exhaustive: its variants mirror the schema's scalar kinds, arrays and
/// messages, and a new kind of field would change the wire protocol (a new protocol
/// version), so users may match every variant when they render or convert values.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// Any signed integer type.
    Int(i64),
    /// Any unsigned integer type.
    UInt(u64),
    /// `f32` or `f64`.
    Float(f64),
    /// A fixed array.
    Array(Vec<Value>),
    /// A message: fields in schema order. Names are shared (`Arc<str>`): decoding a
    /// topic sample copies no strings.
    Struct(Vec<(Arc<str>, Value)>),
}

/// A value that does not fit its type. Names the field.
///
/// Exhaustive on purpose: value parsers outside this crate (the CLI's YAML flow values)
/// build it, and a path plus a message is all it will ever say.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ValueError {
    /// Which field (`value`, `positions[2]`, or `(value)` for a whole parameter).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

fn err(path: &str, message: impl Into<String>) -> ValueError {
    ValueError {
        path: path.to_string(),
        message: message.into(),
    }
}

impl Value {
    /// From a scalar.
    #[inline]
    pub fn from_scalar(s: Scalar) -> Value {
        match s {
            Scalar::Bool(v) => Value::Bool(v),
            Scalar::U8(v) => Value::UInt(v as u64),
            Scalar::U16(v) => Value::UInt(v as u64),
            Scalar::U32(v) => Value::UInt(v as u64),
            Scalar::U64(v) => Value::UInt(v),
            Scalar::I8(v) => Value::Int(v as i64),
            Scalar::I16(v) => Value::Int(v as i64),
            Scalar::I32(v) => Value::Int(v as i64),
            Scalar::I64(v) => Value::Int(v),
            Scalar::F32(v) => Value::Float(v as f64),
            Scalar::F64(v) => Value::Float(v),
        }
    }

    /// To a scalar of type `ty`, refusing what does not fit (an integer out of range, a
    /// fraction for an integer type, a number for a bool).
    ///
    /// ```
    /// use fcan_value::Value;
    /// use fcan_core::types::{Scalar, ScalarType};
    /// assert_eq!(Value::Int(7).to_scalar(ScalarType::U8, "x").unwrap(), Scalar::U8(7));
    /// assert!(Value::Int(300).to_scalar(ScalarType::U8, "x").is_err());
    /// assert!(Value::Float(1.5).to_scalar(ScalarType::I32, "x").is_err());
    /// assert_eq!(Value::Int(2).to_scalar(ScalarType::F32, "x").unwrap(), Scalar::F32(2.0));
    /// ```
    pub fn to_scalar(&self, ty: ScalarType, path: &str) -> Result<Scalar, ValueError> {
        let range = || err(path, format!("{} does not fit {ty}", self));
        let int = |v: &Value| -> Option<i128> {
            match *v {
                Value::Int(i) => Some(i as i128),
                Value::UInt(u) => Some(u as i128),
                Value::Float(f) if f.fract() == 0.0 && f.is_finite() && f.abs() < 1.9e19 => {
                    Some(f as i128)
                }
                _ => None,
            }
        };
        Ok(match ty {
            ScalarType::Bool => match self {
                Value::Bool(b) => Scalar::Bool(*b),
                _ => return Err(err(path, format!("expected true or false, got {self}"))),
            },
            ScalarType::F32 | ScalarType::F64 => {
                let f = match *self {
                    Value::Float(f) => f,
                    Value::Int(i) => i as f64,
                    Value::UInt(u) => u as f64,
                    _ => return Err(err(path, format!("expected a number, got {self}"))),
                };
                if ty == ScalarType::F32 {
                    if f.is_finite() && f.abs() > f32::MAX as f64 {
                        return Err(range());
                    }
                    Scalar::F32(f as f32)
                } else {
                    Scalar::F64(f)
                }
            }
            _ => {
                let i = int(self).ok_or_else(|| match self {
                    Value::Float(_) => err(path, format!("{ty} needs a whole number, got {self}")),
                    _ => err(path, format!("expected an integer, got {self}")),
                })?;
                macro_rules! fit {
                    ($t:ty, $v:ident) => {
                        Scalar::$v(<$t>::try_from(i).map_err(|_| range())?)
                    };
                }
                match ty {
                    ScalarType::U8 => fit!(u8, U8),
                    ScalarType::I8 => fit!(i8, I8),
                    ScalarType::U16 => fit!(u16, U16),
                    ScalarType::I16 => fit!(i16, I16),
                    ScalarType::U32 => fit!(u32, U32),
                    ScalarType::I32 => fit!(i32, I32),
                    ScalarType::U64 => fit!(u64, U64),
                    _ => fit!(i64, I64),
                }
            }
        })
    }

    /// A field of a [`Value::Struct`] by name.
    ///
    /// ```
    /// use fcan_value::Value;
    /// let v = Value::from_json_str(r#"{"on": true}"#).unwrap();
    /// assert_eq!(v.field("on"), Some(&Value::Bool(true)));
    /// assert_eq!(v.field("off"), None);
    /// ```
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields.iter().find(|(n, _)| &**n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value as `f64`, for any number (`None` for bools, arrays and structs).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Float(f) => Some(f),
            Value::Int(i) => Some(i as f64),
            Value::UInt(u) => Some(u as f64),
            _ => None,
        }
    }

    /// A number as a parser read it (what it can be as a `u64`, an `i64`, an `f64`),
    /// by the one rule every text form follows: an unsigned integer is [`Value::UInt`],
    /// a negative one [`Value::Int`], anything else [`Value::Float`] (NaN if the parser
    /// has no float for it either). The field's type converts it later.
    ///
    /// ```
    /// use fcan_value::Value;
    /// assert_eq!(Value::from_number(Some(3), Some(3), Some(3.0)), Value::UInt(3));
    /// assert_eq!(Value::from_number(None, Some(-3), Some(-3.0)), Value::Int(-3));
    /// assert_eq!(Value::from_number(None, None, Some(0.5)), Value::Float(0.5));
    /// ```
    pub fn from_number(u: Option<u64>, i: Option<i64>, f: Option<f64>) -> Value {
        match (u, i) {
            (Some(u), _) => Value::UInt(u),
            (None, Some(i)) => Value::Int(i),
            (None, None) => Value::Float(f.unwrap_or(f64::NAN)),
        }
    }

    /// From JSON.
    pub fn from_json(j: &serde_json::Value) -> Result<Value, ValueError> {
        Ok(match j {
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::from_number(n.as_u64(), n.as_i64(), n.as_f64()),
            serde_json::Value::Array(a) => {
                Value::Array(a.iter().map(Value::from_json).collect::<Result<_, _>>()?)
            }
            serde_json::Value::Object(o) => Value::Struct(
                o.iter()
                    .map(|(k, v)| Ok((Arc::from(k.as_str()), Value::from_json(v)?)))
                    .collect::<Result<_, _>>()?,
            ),
            serde_json::Value::String(s) => match s.as_str() {
                // JSON has no NaN or infinity; accept their YAML spellings so a user can
                // try them (and be refused by the range check with a clear reason).
                ".nan" | "NaN" | "nan" => Value::Float(f64::NAN),
                ".inf" | "inf" | "Infinity" => Value::Float(f64::INFINITY),
                "-.inf" | "-inf" | "-Infinity" => Value::Float(f64::NEG_INFINITY),
                _ => {
                    return Err(err(
                        "(value)",
                        format!("strings are not a value type: {s:?}"),
                    ))
                }
            },
            serde_json::Value::Null => return Err(err("(value)", "null is not a value")),
        })
    }

    /// To JSON (NaN and infinities, which JSON lacks, become `null`). Struct fields come
    /// out sorted by name (a `serde_json` map); to write JSON text in the schema's order
    /// without building a tree, serialize the value itself (`serde_json::to_vec(&value)`).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => (*i).into(),
            Value::UInt(u) => (*u).into(),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Value::Array(a) => serde_json::Value::Array(a.iter().map(Value::to_json).collect()),
            Value::Struct(s) => serde_json::Value::Object(
                s.iter()
                    .map(|(k, v)| (k.to_string(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// Parses JSON text (`{"type": 1, "value": 0.5}`, `[1, 2]`, `true`). The `fcan` CLI
    /// also accepts YAML flow syntax (`fcan_cli::parse_value`); a library takes JSON only,
    /// so it carries no YAML parser.
    ///
    /// ```
    /// use fcan_value::Value;
    /// let v = Value::from_json_str(r#"{"type": 2, "value": 0.5}"#).unwrap();
    /// assert_eq!(v, Value::Struct(vec![("type".into(), Value::UInt(2)), ("value".into(), Value::Float(0.5))]));
    /// assert!(Value::from_json_str("{type: 2}").is_err());
    /// ```
    pub fn from_json_str(text: &str) -> Result<Value, ValueError> {
        let j: serde_json::Value =
            serde_json::from_str(text).map_err(|e| err("(value)", format!("not JSON: {e}")))?;
        Value::from_json(&j)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Field names come from a node's blob.
        f.write_str(&text::json_safe(self.to_json().to_string()))
    }
}

/// Packs one field (scalar or array) from a value.
fn pack_field(
    w: &mut Writer,
    ty: ScalarType,
    len: Option<u32>,
    v: &Value,
    path: &str,
) -> Result<(), ValueError> {
    match len {
        None => {
            let s = v.to_scalar(ty, path)?;
            w.scalar(&s).map_err(|_| err(path, "value too long"))
        }
        Some(n) => {
            let Value::Array(items) = v else {
                return Err(err(path, format!("expected an array of {n} {ty}, got {v}")));
            };
            if items.len() != n as usize {
                return Err(err(
                    path,
                    format!("expected {n} elements, got {}", items.len()),
                ));
            }
            for (i, item) in items.iter().enumerate() {
                pack_field(w, ty, None, item, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
    }
}

fn unpack_field(r: &mut Reader, ty: ScalarType, len: Option<u32>) -> Result<Value, ValueError> {
    let one = |r: &mut Reader| {
        r.scalar(ty)
            .map(Value::from_scalar)
            .map_err(|e| err("(bytes)", e.to_string()))
    };
    match len {
        None => one(r),
        Some(n) => Ok(Value::Array(
            (0..n).map(|_| one(r)).collect::<Result<_, _>>()?,
        )),
    }
}

/// Packs a message value (a [`Value::Struct`] with every field) into bytes.
///
/// ```
/// use fcan_core::ir::Field;
/// use fcan_core::types::ScalarType;
/// use fcan_value::{pack_message, Value};
/// let fields = [Field { name: "on".into(), ty: ScalarType::Bool, len: None }];
/// assert_eq!(pack_message(&fields, &Value::from_json_str(r#"{"on": true}"#).unwrap()).unwrap(), vec![1]);
/// let e = pack_message(&fields, &Value::from_json_str(r#"{"of": true}"#).unwrap()).unwrap_err();
/// assert!(e.to_string().contains("did you mean `on`"));
/// ```
pub fn pack_message(fields: &[Field], value: &Value) -> Result<Vec<u8>, ValueError> {
    let size = fcan_core::numbering::layout(fields).size;
    let mut buf = vec![0u8; size];
    let mut w = Writer::new(&mut buf);
    let items: &[(Arc<str>, Value)] = match value {
        Value::Struct(items) => items,
        _ if fields.is_empty() => &[],
        other => {
            return Err(err(
                "(value)",
                format!("expected {{field: value, …}}, got {other}"),
            ))
        }
    };
    for (name, _) in items {
        if !fields.iter().any(|f| *f.name == **name) {
            let hint = did_you_mean(name, fields.iter().map(|f| f.name.as_str()))
                .map(|c| format!("; did you mean `{c}`?"))
                .unwrap_or_default();
            let known: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            return Err(err(
                name,
                format!("no such field{hint} (fields: {})", known.join(", ")),
            ));
        }
    }
    for f in fields {
        let v = items
            .iter()
            .find(|(n, _)| **n == *f.name)
            .map(|(_, v)| v)
            .ok_or_else(|| err(&f.name, "missing"))?;
        pack_field(&mut w, f.ty, f.len, v, &f.name)?;
    }
    Ok(buf)
}

/// Unpacks message bytes into a [`Value::Struct`].
pub fn unpack_message(fields: &[Field], bytes: &[u8]) -> Result<Value, ValueError> {
    let names: Vec<Arc<str>> = fields.iter().map(|f| Arc::from(f.name.as_str())).collect();
    unpack_message_named(fields, &names, bytes)
}

/// [`unpack_message`] with the field names already shared: the hot path for topic
/// samples, which decodes without allocating a string.
pub fn unpack_message_named(
    fields: &[Field],
    names: &[Arc<str>],
    bytes: &[u8],
) -> Result<Value, ValueError> {
    let mut out = Vec::with_capacity(fields.len());
    let mut at = 0;
    for (f, name) in fields.iter().zip(names) {
        let size = f.ty.size();
        let value = match f.len {
            None => read_value(f.ty, bytes.get(at..).unwrap_or(&[]), &f.name)?,
            Some(n) => {
                let mut items = Vec::with_capacity(n as usize);
                for k in 0..n as usize {
                    let b = bytes.get(at + k * size..).unwrap_or(&[]);
                    items.push(read_value(f.ty, b, &f.name)?);
                }
                Value::Array(items)
            }
        };
        at += size * f.len.unwrap_or(1) as usize;
        out.push((name.clone(), value));
    }
    Ok(Value::Struct(out))
}

/// One scalar from bytes into a [`Value`], by fcan-core's packing rule.
#[inline]
fn read_value(ty: ScalarType, b: &[u8], field: &str) -> Result<Value, ValueError> {
    Scalar::read(ty, b)
        .map(Value::from_scalar)
        .map_err(|e| err(field, e.to_string()))
}

/// Packs a parameter value (a scalar, or an array for an array param).
pub fn pack_param(ty: ScalarType, len: Option<u32>, value: &Value) -> Result<Vec<u8>, ValueError> {
    let size = ty.size() * len.unwrap_or(1) as usize;
    let mut buf = vec![0u8; size];
    pack_field(&mut Writer::new(&mut buf), ty, len, value, "(value)")?;
    Ok(buf)
}

/// Unpacks a parameter value.
pub fn unpack_param(ty: ScalarType, len: Option<u32>, bytes: &[u8]) -> Result<Value, ValueError> {
    unpack_field(&mut Reader::new(bytes), ty, len)
}

/// JSON text straight from a value, fields in the schema's order, with no intermediate
/// tree: the remote server encodes every sample it serves this way. Non-finite floats
/// become `null`, as in [`Value::to_json`].
///
/// ```
/// use fcan_value::Value;
/// let v = Value::from_json_str(r#"{"type": 2, "value": 0.5}"#).unwrap();
/// assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"type":2,"value":0.5}"#);
/// assert_eq!(serde_json::to_string(&Value::Float(f64::NAN)).unwrap(), "null");
/// ```
impl serde::Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Value::Bool(b) => ser.serialize_bool(*b),
            Value::Int(i) => ser.serialize_i64(*i),
            Value::UInt(u) => ser.serialize_u64(*u),
            Value::Float(f) if f.is_finite() => ser.serialize_f64(*f),
            Value::Float(_) => ser.serialize_unit(),
            Value::Array(a) => {
                let mut seq = ser.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Value::Struct(fields) => {
                let mut map = ser.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(&**k, v)?;
                }
                map.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn serialized_text_is_the_json_tree_in_schema_order() {
        let v = Value::Struct(vec![
            ("z".into(), Value::Float(f64::INFINITY)),
            (
                "a".into(),
                Value::Array(vec![Value::Int(-3), Value::UInt(u64::MAX)]),
            ),
            (
                "m".into(),
                Value::Struct(vec![
                    ("on".into(), Value::Bool(true)),
                    ("x".into(), Value::Float(0.1)),
                ]),
            ),
        ]);
        let text = serde_json::to_string(&v).unwrap();
        // Same JSON as the tree ...
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            v.to_json()
        );
        // ... with the fields in the value's (the schema's) order.
        assert!(
            text.starts_with(r#"{"z":null,"a":[-3,18446744073709551615],"m""#),
            "{text}"
        );
    }

    use super::*;

    fn fields() -> Vec<Field> {
        vec![
            Field {
                name: "type".into(),
                ty: ScalarType::U8,
                len: None,
            },
            Field {
                name: "value".into(),
                ty: ScalarType::F32,
                len: None,
            },
            Field {
                name: "p".into(),
                ty: ScalarType::I16,
                len: Some(2),
            },
        ]
    }

    #[test]
    fn message_roundtrip_through_bytes_and_json() {
        let v = Value::from_json_str(r#"{"type": 3, "value": -0.5, "p": [-2, 7]}"#).unwrap();
        let bytes = pack_message(&fields(), &v).unwrap();
        assert_eq!(bytes.len(), 1 + 4 + 4);
        let back = unpack_message(&fields(), &bytes).unwrap();
        assert_eq!(
            back.to_json(),
            serde_json::json!({"type": 3, "value": -0.5, "p": [-2, 7]})
        );
    }

    #[test]
    fn errors_name_the_field() {
        let e = pack_message(
            &fields(),
            &Value::from_json_str(r#"{"type": 300, "value": 1, "p": [1, 2]}"#).unwrap(),
        )
        .unwrap_err();
        assert_eq!(e.path, "type");
        let e = pack_message(
            &fields(),
            &Value::from_json_str(r#"{"type": 1, "value": 1, "p": [1]}"#).unwrap(),
        )
        .unwrap_err();
        assert_eq!(e.path, "p");
        assert!(e.message.contains("expected 2 elements"));
        let e = pack_message(
            &fields(),
            &Value::from_json_str(r#"{"type": 1, "p": [1, 2]}"#).unwrap(),
        )
        .unwrap_err();
        assert_eq!((e.path.as_str(), e.message.as_str()), ("value", "missing"));
        let e = pack_message(
            &fields(),
            &Value::from_json_str(r#"{"type": 1, "value": true, "p": [1, 2]}"#).unwrap(),
        )
        .unwrap_err();
        assert_eq!(e.path, "value");
    }

    #[test]
    fn params_pack_to_their_type() {
        assert_eq!(
            pack_param(ScalarType::F32, None, &Value::Float(1.0)).unwrap(),
            1.0f32.to_le_bytes()
        );
        assert_eq!(
            unpack_param(ScalarType::U32, None, &7u32.to_le_bytes()).unwrap(),
            Value::UInt(7)
        );
        assert!(pack_param(ScalarType::Bool, None, &Value::UInt(1)).is_err());
    }
}
