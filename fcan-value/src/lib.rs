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
    /// `f32` or `f64`. An `f32` field's value is held as [`f32_to_f64`] gives it: the
    /// `f64` of the shortest decimal that reads back as that `f32` (`0.7`, not
    /// `0.699999988079071`), so every face prints what the node holds as a person
    /// writes it, and that text reads back as the same `f32`.
    Float(f64),
    /// A fixed array.
    Array(Vec<Value>),
    /// A message: fields in schema order. Names are shared (`Arc<str>`): decoding a
    /// topic sample copies no strings.
    Struct(Vec<(Arc<str>, Value)>),
}

/// A value that does not fit its type. Names the field and says what it expected
/// (`value: expected a number (f32), got true`).
///
/// Exhaustive on purpose: value parsers outside this crate build it, and a path plus a
/// message is all it will ever say.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ValueError {
    /// Which field (`value`, `positions[2]`), `(value)` for the whole value (a
    /// parameter, or a message that is not `{field: value, …}`), `(value)[2]` for an
    /// element of it; once [`within`](ValueError::within) a name, the full path
    /// (`/motor_driver1/motor0/target.value`, `motor_driver1.motor0.velocity.kp`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// The path of a whole value in a [`ValueError`].
pub const WHOLE: &str = "(value)";

impl ValueError {
    /// The error of a value meant for `name` (a topic or service path, a parameter
    /// name): its path made whole, so the message names the node and the field.
    ///
    /// ```
    /// use fcan_value::{pack_param, Value};
    /// use fcan_core::types::ScalarType;
    /// let e = pack_param(ScalarType::F32, None, &Value::Bool(true)).unwrap_err();
    /// assert_eq!(
    ///     e.within("md3.motor0.velocity.kp").to_string(),
    ///     "md3.motor0.velocity.kp: expected a number (f32), got true"
    /// );
    /// let e = pack_param(ScalarType::U8, Some(2), &Value::from_json_str("[1, 300]").unwrap()).unwrap_err();
    /// assert_eq!(e.within("io3.out0.gain").path, "io3.out0.gain[1]");
    /// ```
    pub fn within(self, name: &str) -> ValueError {
        let path = match self.path.strip_prefix(WHOLE) {
            Some(rest) => format!("{name}{rest}"),
            None if self.path.starts_with('[') => format!("{name}{}", self.path),
            None => format!("{name}.{}", self.path),
        };
        ValueError { path, ..self }
    }
}

/// What a value is written for, so that a parser can say what each field expects
/// ([`Value::from_json_as`]).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Shape<'a> {
    /// A message (a topic value, a service request or response): its fields.
    Message(&'a [Field]),
    /// A parameter: its element type, and its length for a fixed array.
    Param(ScalarType, Option<u32>),
}

/// What a field of type `ty` takes, for messages: `a number (f32)`, `an integer (u8)`,
/// `true or false (bool)`.
pub fn expected(ty: ScalarType) -> String {
    match ty {
        ScalarType::Bool => "true or false (bool)".into(),
        ScalarType::F32 | ScalarType::F64 => format!("a number ({ty})"),
        _ => format!("an integer ({ty})"),
    }
}

/// What a field of type `ty` (a fixed array of `len` with `Some`) takes, for messages.
fn expected_field(ty: ScalarType, len: Option<u32>) -> String {
    match len {
        None => expected(ty),
        Some(n) => format!("an array of {n} {ty}"),
    }
}

/// A value as an error message quotes it: JSON, except NaN and the infinities (which
/// JSON writes `null`), named as such.
fn quoted(v: &Value) -> String {
    match *v {
        Value::Float(f) if f.is_nan() => "NaN".into(),
        Value::Float(f) if f.is_infinite() => (if f > 0.0 { "inf" } else { "-inf" }).into(),
        _ => v.to_string(),
    }
}

/// An `f32` as the `f64` a [`Value`] holds for it: the `f64` nearest the shortest
/// decimal that reads back as `x` (`0.7f32` → `0.7`, where `x as f64` is
/// `0.699999988079071`), so the number prints as that decimal and any reader that
/// parses it, as `f32` or as `f64` then narrowed, gets `x` back. Where the nearest `f64`
/// of that decimal would narrow to another `f32` (the decimal lies within a hair of the
/// midpoint of two `f32`s: about one `f32` in a few million), `x` exactly instead.
///
/// ```
/// use fcan_value::f32_to_f64;
/// assert_eq!(f32_to_f64(0.7), 0.7);
/// assert_eq!(f32_to_f64(1e-45), 1e-45);
/// assert_eq!(f32_to_f64(-3.0), -3.0);
/// for x in [0.1f32, 1.0 / 3.0, f32::MAX, f32::MIN_POSITIVE, 7.038531e-26] {
///     assert_eq!(f32_to_f64(x) as f32, x);
/// }
/// ```
#[inline]
pub fn f32_to_f64(x: f32) -> f64 {
    let exact = x as f64;
    // Whole numbers below 2^24 print as themselves already (no shorter decimal is
    // within half a unit of them); so do 0, NaN and the infinities.
    if !x.is_finite() || (exact.trunc() == exact && exact.abs() < 16_777_216.0) {
        return exact;
    }
    let mut buf = zmij::Buffer::new();
    let text = buf.format_finite(x);
    let near = decimal_to_f64(text).unwrap_or_else(|| text.parse().unwrap_or(exact));
    if near as f32 == x {
        near
    } else {
        exact
    }
}

/// Powers of ten an `f64` holds exactly.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The `f64` nearest a short decimal (`-12.5`, `7.038531e-26`), computed exactly when its
/// digits and its power of ten are both exact in an `f64` (one correctly rounded
/// multiplication or division), `None` otherwise (then the full parser decides).
#[inline]
fn decimal_to_f64(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let (neg, mut i) = match b.first() {
        Some(b'-') => (true, 1),
        _ => (false, 0),
    };
    let (mut digits, mut exp, mut frac) = (0u64, 0i32, false);
    while let Some(&c) = b.get(i) {
        match c {
            b'0'..=b'9' => {
                digits = digits.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
                exp -= i32::from(frac);
            }
            b'.' => frac = true,
            b'e' | b'E' => {
                exp = exp.checked_add(text.get(i + 1..)?.parse::<i32>().ok()?)?;
                break;
            }
            _ => return None,
        }
        i += 1;
    }
    if digits >= 1 << 53 {
        return None;
    }
    let m = digits as f64;
    let v = match exp {
        0..=22 => m * POW10[exp as usize],
        -22..=-1 => m / POW10[(-exp) as usize],
        _ => return None,
    };
    Some(if neg { -v } else { v })
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
            Scalar::F32(v) => Value::Float(f32_to_f64(v)),
            Scalar::F64(v) => Value::Float(v),
        }
    }

    /// To a scalar of type `ty`, refusing what does not fit (an integer out of range, a
    /// fraction for an integer type, a number for a bool), saying what `ty` takes.
    ///
    /// ```
    /// use fcan_value::Value;
    /// use fcan_core::types::{Scalar, ScalarType};
    /// assert_eq!(Value::Int(7).to_scalar(ScalarType::U8, "x").unwrap(), Scalar::U8(7));
    /// assert_eq!(
    ///     Value::Int(300).to_scalar(ScalarType::U8, "x").unwrap_err().to_string(),
    ///     "x: 300 does not fit u8 (0 to 255)"
    /// );
    /// assert_eq!(
    ///     Value::Float(1.5).to_scalar(ScalarType::I32, "x").unwrap_err().to_string(),
    ///     "x: expected a whole number (i32), got 1.5"
    /// );
    /// assert_eq!(Value::Int(2).to_scalar(ScalarType::F32, "x").unwrap(), Scalar::F32(2.0));
    /// ```
    pub fn to_scalar(&self, ty: ScalarType, path: &str) -> Result<Scalar, ValueError> {
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
                _ => {
                    return Err(err(
                        path,
                        format!("expected {}, got {}", expected(ty), quoted(self)),
                    ))
                }
            },
            ScalarType::F32 | ScalarType::F64 => {
                let f = match *self {
                    Value::Float(f) => f,
                    Value::Int(i) => i as f64,
                    Value::UInt(u) => u as f64,
                    _ => {
                        return Err(err(
                            path,
                            format!("expected {}, got {}", expected(ty), quoted(self)),
                        ))
                    }
                };
                if ty == ScalarType::F32 {
                    if f.is_finite() && f.abs() > f32::MAX as f64 {
                        return Err(err(
                            path,
                            format!(
                                "{} does not fit f32 (at most ±{:e})",
                                quoted(self),
                                f32::MAX
                            ),
                        ));
                    }
                    Scalar::F32(f as f32)
                } else {
                    Scalar::F64(f)
                }
            }
            _ => {
                let i = int(self).ok_or_else(|| match self {
                    Value::Float(_) => err(
                        path,
                        format!("expected a whole number ({ty}), got {}", quoted(self)),
                    ),
                    _ => err(
                        path,
                        format!("expected {}, got {}", expected(ty), quoted(self)),
                    ),
                })?;
                let range = |lo: i128, hi: i128| {
                    err(
                        path,
                        format!("{} does not fit {ty} ({lo} to {hi})", quoted(self)),
                    )
                };
                macro_rules! fit {
                    ($t:ty, $v:ident) => {
                        Scalar::$v(
                            <$t>::try_from(i)
                                .map_err(|_| range(<$t>::MIN as i128, <$t>::MAX as i128))?,
                        )
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

    /// From JSON. JSON has no NaN or infinity: the strings `NaN`, `.nan`, `inf`,
    /// `.inf`, `Infinity` (and their negatives) stand for them, so a user can write them
    /// and be told where they are refused. Any other string, and `null`, is no value:
    /// the error names where it is in the value (`value`, `gains[2]`); to also say what
    /// the field there expects, parse with [`Value::from_json_as`].
    ///
    /// ```
    /// use fcan_value::Value;
    /// let e = Value::from_json_str(r#"{"type": 1, "value": "x"}"#).unwrap_err();
    /// assert_eq!(e.to_string(), r#"value: got the string "x", which is no value (a number, true or false, an array or {field: value, …})"#);
    /// ```
    pub fn from_json(j: &serde_json::Value) -> Result<Value, ValueError> {
        from_json_at(j, Want::Any, WHOLE)
    }

    /// From JSON that [`Value`]'s `Serialize` wrote (a sample, a service response or a
    /// parameter value sent by the daemon): as [`Value::from_json`], and `null` read as
    /// NaN, which is how a NaN or an infinity was written (JSON has neither). A reader of
    /// such JSON must take `null` back, or a sample whose field is NaN — an MIT motor's
    /// temperature where its reply carries none, a CiA 402 drive's torque where it has
    /// no torque sensor — would be refused as a whole.
    ///
    /// ```
    /// use fcan_value::Value;
    /// let written = serde_json::to_value(&Value::Struct(vec![
    ///     ("torque".into(), Value::Float(f64::NAN)),
    ///     ("velocity".into(), Value::Float(0.5)),
    /// ]))
    /// .unwrap();
    /// assert_eq!(written.to_string(), r#"{"torque":null,"velocity":0.5}"#);
    /// let back = Value::from_written_json(&written).unwrap();
    /// assert!(back.field("torque").and_then(Value::as_f64).unwrap().is_nan());
    /// assert_eq!(back.field("velocity").and_then(Value::as_f64), Some(0.5));
    /// assert!(Value::from_json(&written).is_err(), "typed by hand, null is no value");
    /// ```
    pub fn from_written_json(j: &serde_json::Value) -> Result<Value, ValueError> {
        use serde_json::Value as J;
        Ok(match j {
            J::Null => Value::Float(f64::NAN),
            J::Array(a) => Value::Array(
                a.iter()
                    .map(Value::from_written_json)
                    .collect::<Result<_, _>>()?,
            ),
            J::Object(o) => Value::Struct(
                o.iter()
                    .map(|(k, v)| Ok((Arc::from(k.as_str()), Value::from_written_json(v)?)))
                    .collect::<Result<_, ValueError>>()?,
            ),
            other => Value::from_json(other)?,
        })
    }

    /// From JSON meant for `shape`: as [`Value::from_json`], and a string or `null`
    /// where the shape has a field is refused saying what the field takes.
    ///
    /// ```
    /// use fcan_core::ir::Field;
    /// use fcan_core::types::ScalarType;
    /// use fcan_value::{Shape, Value};
    /// let fields = [Field { name: "value".into(), ty: ScalarType::F32, len: None }];
    /// let j = serde_json::json!({"value": "x"});
    /// let e = Value::from_json_as(&j, Shape::Message(&fields)).unwrap_err();
    /// assert_eq!(
    ///     e.within("/md3/motor0/target").to_string(),
    ///     r#"/md3/motor0/target.value: expected a number (f32), got the string "x""#
    /// );
    /// let e = Value::from_json_as(&serde_json::json!(null), Shape::Param(ScalarType::U8, None)).unwrap_err();
    /// assert_eq!(e.to_string(), "(value): expected an integer (u8), got null");
    /// ```
    pub fn from_json_as(j: &serde_json::Value, shape: Shape<'_>) -> Result<Value, ValueError> {
        let want = match shape {
            Shape::Message(fields) => Want::Message(fields),
            Shape::Param(ty, len) => Want::Field(ty, len),
        };
        from_json_at(j, want, WHOLE)
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

/// What a JSON walk expects where it is.
#[derive(Clone, Copy)]
enum Want<'a> {
    /// Nothing known.
    Any,
    /// A message's fields.
    Message(&'a [Field]),
    /// A field: its type, and its length for a fixed array.
    Field(ScalarType, Option<u32>),
}

/// `path` joined with a struct field's name.
fn member(path: &str, name: &str) -> String {
    if path == WHOLE {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn from_json_at(j: &serde_json::Value, want: Want<'_>, path: &str) -> Result<Value, ValueError> {
    use serde_json::Value as J;
    let no_value = |got: String| {
        let message = match want {
            Want::Any => format!(
                "got {got}, which is no value (a number, true or false, an array or {{field: value, …}})"
            ),
            Want::Message(_) => format!("expected {{field: value, …}}, got {got}"),
            Want::Field(ty, len) => format!("expected {}, got {got}", expected_field(ty, len)),
        };
        err(path, message)
    };
    Ok(match j {
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => Value::from_number(n.as_u64(), n.as_i64(), n.as_f64()),
        J::Array(a) => {
            let item = match want {
                Want::Field(ty, Some(_)) => Want::Field(ty, None),
                _ => Want::Any,
            };
            Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, v)| from_json_at(v, item, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        J::Object(o) => Value::Struct(
            o.iter()
                .map(|(k, v)| {
                    let field = match want {
                        Want::Message(fields) => fields
                            .iter()
                            .find(|f| f.name == *k)
                            .map_or(Want::Any, |f| Want::Field(f.ty, f.len)),
                        _ => Want::Any,
                    };
                    Ok((
                        Arc::from(k.as_str()),
                        from_json_at(v, field, &member(path, k))?,
                    ))
                })
                .collect::<Result<_, _>>()?,
        ),
        J::String(s) => match s.as_str() {
            // JSON has no NaN or infinity: their usual spellings stand for them, so a
            // user can write them (and be refused where they are not taken).
            ".nan" | "NaN" | "nan" => Value::Float(f64::NAN),
            ".inf" | "inf" | "Infinity" | "+.inf" | "+inf" => Value::Float(f64::INFINITY),
            "-.inf" | "-inf" | "-Infinity" => Value::Float(f64::NEG_INFINITY),
            _ => return Err(no_value(format!("the string {s:?}"))),
        },
        J::Null => return Err(no_value("null".into())),
    })
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Field names come from a node's blob.
        f.write_str(&text::json_safe(self.to_json().to_string()))
    }
}

/// Packs one field (scalar or array) from a value; `finite`: a float must be finite.
fn pack_field(
    w: &mut Writer,
    ty: ScalarType,
    len: Option<u32>,
    v: &Value,
    path: &str,
    finite: bool,
) -> Result<(), ValueError> {
    match len {
        None => {
            let s = v.to_scalar(ty, path)?;
            if finite && !s.as_f64().is_finite() {
                return Err(err(
                    path,
                    format!(
                        "expected a finite number ({ty}), got {}: a command carries no NaN or infinity",
                        quoted(v)
                    ),
                ));
            }
            w.scalar(&s).map_err(|_| err(path, "value too long"))
        }
        Some(n) => {
            let Value::Array(items) = v else {
                return Err(err(
                    path,
                    format!("expected an array of {n} {ty}, got {}", quoted(v)),
                ));
            };
            if items.len() != n as usize {
                return Err(err(
                    path,
                    format!(
                        "expected an array of {n} {ty}, got {} element(s)",
                        items.len()
                    ),
                ));
            }
            for (i, item) in items.iter().enumerate() {
                pack_field(w, ty, None, item, &format!("{path}[{i}]"), finite)?;
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

/// Packs a command — an m2s topic value or a service request, a [`Value::Struct`]
/// with every field — into bytes. A float field must be finite: the schema language
/// has no way to let a command field carry NaN or an infinity, and none must reach a
/// node's control loop (docs/schema.md). Errors name the field (`value`, `p[1]`, or
/// `(value)`); [`ValueError::within`] puts the topic's or service's name in front.
///
/// ```
/// use fcan_core::ir::Field;
/// use fcan_core::types::ScalarType;
/// use fcan_value::{pack_message, Value};
/// let fields = [Field { name: "on".into(), ty: ScalarType::Bool, len: None }];
/// assert_eq!(pack_message(&fields, &Value::from_json_str(r#"{"on": true}"#).unwrap()).unwrap(), vec![1]);
/// let e = pack_message(&fields, &Value::from_json_str(r#"{"of": true}"#).unwrap()).unwrap_err();
/// assert!(e.to_string().contains("did you mean `on`"));
/// let fields = [Field { name: "value".into(), ty: ScalarType::F32, len: None }];
/// let e = pack_message(&fields, &Value::from_json_str(r#"{"value": ".nan"}"#).unwrap()).unwrap_err();
/// assert_eq!(e.path, "value");
/// assert!(e.message.starts_with("expected a finite number (f32), got NaN"));
/// ```
pub fn pack_message(fields: &[Field], value: &Value) -> Result<Vec<u8>, ValueError> {
    let size = fcan_core::numbering::layout(fields).size;
    let mut buf = vec![0u8; size];
    let mut w = Writer::new(&mut buf);
    let items: &[(Arc<str>, Value)] = match value {
        Value::Struct(items) => items,
        _ if fields.is_empty() => &[],
        other => {
            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            return Err(err(
                WHOLE,
                format!(
                    "expected {{field: value, …}} with {}, got {}",
                    names.join(", "),
                    quoted(other)
                ),
            ));
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
            .ok_or_else(|| {
                err(
                    &f.name,
                    format!("missing: expected {}", expected_field(f.ty, f.len)),
                )
            })?;
        pack_field(&mut w, f.ty, f.len, v, &f.name, true)?;
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

/// Packs a parameter value (a scalar, or an array for an array param). Errors name
/// `(value)` or `(value)[i]`; [`ValueError::within`] puts the parameter's name there.
/// NaN and the infinities pack: the range check refuses them, saying so (the master's
/// `check_param_value`, and the node's).
pub fn pack_param(ty: ScalarType, len: Option<u32>, value: &Value) -> Result<Vec<u8>, ValueError> {
    let size = ty.size() * len.unwrap_or(1) as usize;
    let mut buf = vec![0u8; size];
    pack_field(&mut Writer::new(&mut buf), ty, len, value, WHOLE, false)?;
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
        assert_eq!(e.message, "expected an array of 2 i16, got 1 element(s)");
        let e = pack_message(
            &fields(),
            &Value::from_json_str(r#"{"type": 1, "p": [1, 2]}"#).unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.message.as_str()),
            ("value", "missing: expected a number (f32)")
        );
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

    /// A decimal reads as the f64 nearest it (serde_json's `float_roundtrip`).
    #[test]
    fn json_numbers_read_exactly() {
        for (text, f) in [
            ("1e-50", 1e-50),
            ("0.1", 0.1),
            ("2.2250738585072014e-308", 2.2250738585072014e-308),
        ] {
            assert_eq!(
                Value::from_json_str(text).unwrap(),
                Value::Float(f),
                "{text}"
            );
        }
    }

    /// Issue 33 item 5 / issue 38 item 4: an f32 prints as the f32 it is, in text and in
    /// JSON, and what prints reads back as the same f32.
    #[test]
    fn f32_values_print_as_f32() {
        let v = unpack_param(ScalarType::F32, None, &0.7f32.to_le_bytes()).unwrap();
        assert_eq!(v.to_string(), "0.7");
        assert_eq!(serde_json::to_string(&v).unwrap(), "0.7");
        assert_eq!(v.to_json(), serde_json::json!(0.7));
        let back = Value::from_json_str(&v.to_string()).unwrap();
        assert_eq!(
            pack_param(ScalarType::F32, None, &back).unwrap(),
            0.7f32.to_le_bytes()
        );
        // A message's fields and arrays too; f64 fields keep every digit.
        let fields = [
            Field {
                name: "a".into(),
                ty: ScalarType::F32,
                len: Some(2),
            },
            Field {
                name: "b".into(),
                ty: ScalarType::F64,
                len: None,
            },
        ];
        let mut bytes = Vec::new();
        bytes.extend(0.1f32.to_le_bytes());
        bytes.extend((-123.456f32).to_le_bytes());
        bytes.extend((0.7f32 as f64).to_le_bytes());
        let v = unpack_message(&fields, &bytes).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"a":[0.1,-123.456],"b":0.699999988079071}"#
        );
        // What a subnormal f32 underflows to is 0, printed so.
        let tiny = pack_param(ScalarType::F32, None, &Value::Float(1e-50)).unwrap();
        assert_eq!(
            unpack_param(ScalarType::F32, None, &tiny)
                .unwrap()
                .to_string(),
            "0.0"
        );
    }

    /// Every f32 bit pattern of a sample of 1M (plus the edges) narrows back to itself
    /// from the f64 a Value holds, and prints no longer than the f32's shortest decimal.
    #[test]
    fn f32_to_f64_round_trips() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let edges = [
            0u32,
            0x8000_0000,
            1,
            0x8000_0001,
            0x007f_ffff,
            0x0080_0000,
            0x7f7f_ffff,
            0xff7f_ffff,
            0x15ae_43fd,
            0x3f80_0000,
            0x4b80_0000,
            0x4b7f_ffff,
        ];
        let sample = (0..1_000_000).map(|_| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng as u32
        });
        for bits in edges.into_iter().chain(sample) {
            let x = f32::from_bits(bits);
            if !x.is_finite() {
                continue;
            }
            let v = f32_to_f64(x);
            assert_eq!((v as f32).to_bits(), x.to_bits(), "{x:e}");
            let shortest = format!("{x:e}");
            let printed = format!("{v:e}");
            assert!(printed.len() <= shortest.len().max(24), "{x:e}: {printed}");
        }
    }

    #[test]
    fn errors_say_what_the_field_takes() {
        let msg = |v: &str| {
            pack_message(&fields(), &Value::from_json_str(v).unwrap())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            msg(r#"{"type": true, "value": 1, "p": [1, 2]}"#),
            "type: expected an integer (u8), got true"
        );
        assert_eq!(
            msg(r#"{"type": 1.5, "value": 1, "p": [1, 2]}"#),
            "type: expected a whole number (u8), got 1.5"
        );
        assert_eq!(
            msg(r#"{"type": 1, "value": 1, "p": [1, 70000]}"#),
            "p[1]: 70000 does not fit i16 (-32768 to 32767)"
        );
        assert_eq!(
            msg(r#"{"type": 1, "value": 1e39, "p": [1, 2]}"#),
            "value: 1e+39 does not fit f32 (at most ±3.4028235e38)"
        );
        assert_eq!(
            msg("3"),
            "(value): expected {field: value, …} with type, value, p, got 3"
        );
        // Strings and null: where they are, and with the shape, what belongs there.
        let j = serde_json::json!({"type": 1, "value": "x", "p": [1, 2]});
        let e = Value::from_json(&j).unwrap_err();
        assert_eq!(e.path, "value");
        let e = Value::from_json_as(&j, Shape::Message(&fields())).unwrap_err();
        assert_eq!(
            e.within("/md1/motor0/target").to_string(),
            r#"/md1/motor0/target.value: expected a number (f32), got the string "x""#
        );
        let j = serde_json::json!({"type": 1, "value": 2, "p": [1, null]});
        let e = Value::from_json_as(&j, Shape::Message(&fields())).unwrap_err();
        assert_eq!(e.to_string(), "p[1]: expected an integer (i16), got null");
        let e = Value::from_json_as(
            &serde_json::json!([1, "2"]),
            Shape::Param(ScalarType::F32, Some(2)),
        )
        .unwrap_err();
        assert_eq!(
            e.within("io3.analog.gain").to_string(),
            r#"io3.analog.gain[1]: expected a number (f32), got the string "2""#
        );
        let e = Value::from_json_as(&serde_json::json!("x"), Shape::Param(ScalarType::F32, None))
            .unwrap_err();
        assert_eq!(
            e.within("md1.motor0.velocity.kp").to_string(),
            r#"md1.motor0.velocity.kp: expected a number (f32), got the string "x""#
        );
    }

    /// Issue 33 item 5: commands carry no NaN or infinity; parameters leave them to the
    /// range check.
    #[test]
    fn commands_refuse_non_finite_floats() {
        for bad in [".nan", "inf", "-Infinity"] {
            let v = Value::from_json(&serde_json::json!({"type": 1, "value": bad, "p": [1, 2]}))
                .unwrap();
            let e = pack_message(&fields(), &v).unwrap_err();
            assert_eq!(e.path, "value", "{bad}");
            assert!(
                e.message
                    .starts_with("expected a finite number (f32), got "),
                "{e}"
            );
        }
        let f64s = [Field {
            name: "x".into(),
            ty: ScalarType::F64,
            len: Some(2),
        }];
        let e = pack_message(
            &f64s,
            &Value::Struct(vec![(
                "x".into(),
                Value::Array(vec![Value::Float(1.0), Value::Float(f64::NEG_INFINITY)]),
            )]),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "x[1]: expected a finite number (f64), got -inf: a command carries no NaN or infinity"
        );
        assert!(pack_param(ScalarType::F32, None, &Value::Float(f64::NAN)).is_ok());
    }
}
