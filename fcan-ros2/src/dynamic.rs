//! Any ROS message as a value tree, in CDR both ways: what the bridge needs for messages
//! that are not fcan values, such as the parameter services' (`rcl_interfaces`), which
//! carry strings and sequences of messages.
//!
//! [`decode`] reads untrusted bytes: every length is checked against the bytes left
//! before anything is allocated or looped over, strings must be UTF-8 and end in NUL,
//! bounded sequences and strings keep their bounds, and nesting is limited.

use crate::idl::{BaseType, Primitive, RosField, Shape};
use crate::interfaces::Interfaces;

/// A ROS value.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RosValue {
    /// `bool`.
    Bool(bool),
    /// Any signed integer type.
    Int(i64),
    /// Any unsigned integer type, `byte` and `char`.
    UInt(u64),
    /// `float32`, `float64`.
    Float(f64),
    /// `string`.
    Str(String),
    /// An array or sequence.
    Seq(Vec<RosValue>),
    /// A message: its fields' values in order ([`crate::idl::Message::wire_fields`]).
    Msg(Vec<RosValue>),
}

impl RosValue {
    /// Field `name` of a message value of type `ty`.
    pub fn field<'a>(&'a self, store: &Interfaces, ty: &str, name: &str) -> Option<&'a RosValue> {
        let RosValue::Msg(values) = self else {
            return None;
        };
        let i = store
            .message(ty)?
            .wire_fields()
            .iter()
            .position(|f| f.name == name)?;
        values.get(i)
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            RosValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The elements, if this is a sequence.
    pub fn as_seq(&self) -> Option<&[RosValue]> {
        match self {
            RosValue::Seq(v) => Some(v),
            _ => None,
        }
    }
}

/// Bytes that are not a message of the type, or a value that does not fit it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynError(pub String);

impl std::fmt::Display for DynError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DynError {}

fn bad(path: &str, what: impl std::fmt::Display) -> DynError {
    DynError(format!("{path}: {what}"))
}

/// Nesting deeper than this is refused.
const MAX_DEPTH: usize = 16;

/// Encodes a message value of type `ty` as plain CDR, little-endian, with its
/// encapsulation header.
///
/// ```
/// use fcan_ros2::dynamic::{encode, decode, RosValue};
/// let store = fcan_ros2::Interfaces::bundled();
/// let v = RosValue::Msg(vec![RosValue::Bool(true), RosValue::Str("ok".into())]);
/// let bytes = encode(&store, "rcl_interfaces/msg/SetParametersResult", &v).unwrap();
/// assert_eq!(bytes, [0, 1, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, b'o', b'k', 0]);
/// assert_eq!(decode(&store, "rcl_interfaces/msg/SetParametersResult", &bytes).unwrap(), v);
/// ```
pub fn encode(store: &Interfaces, ty: &str, value: &RosValue) -> Result<Vec<u8>, DynError> {
    let mut w = W {
        buf: vec![0, 1, 0, 0],
    };
    w.msg(store, ty, value, "", 0)?;
    Ok(w.buf)
}

struct W {
    buf: Vec<u8>,
}

impl W {
    fn align(&mut self, n: usize) {
        while (self.buf.len() - 4) % n != 0 {
            self.buf.push(0);
        }
    }

    fn msg(
        &mut self,
        store: &Interfaces,
        ty: &str,
        v: &RosValue,
        path: &str,
        depth: usize,
    ) -> Result<(), DynError> {
        if depth > MAX_DEPTH {
            return Err(bad(path, "nested too deep"));
        }
        let m = store
            .message(ty)
            .ok_or_else(|| bad(path, format!("`{ty}` is not a known type")))?;
        let fields = m.wire_fields();
        let RosValue::Msg(values) = v else {
            return Err(bad(path, format!("expected a {ty}")));
        };
        if values.len() != fields.len() {
            return Err(bad(
                path,
                format!("{} values for {} fields", values.len(), fields.len()),
            ));
        }
        for (f, v) in fields.iter().zip(values) {
            let here = if path.is_empty() {
                f.name.clone()
            } else {
                format!("{path}.{}", f.name)
            };
            self.field(store, f, v, &here, depth)?;
        }
        Ok(())
    }

    fn field(
        &mut self,
        store: &Interfaces,
        f: &RosField,
        v: &RosValue,
        path: &str,
        depth: usize,
    ) -> Result<(), DynError> {
        match f.shape {
            Shape::Single => self.one(store, &f.base, v, path, depth),
            shape => {
                let items = v.as_seq().ok_or_else(|| bad(path, "expected a sequence"))?;
                match shape {
                    Shape::Array(n) if items.len() != n as usize => {
                        return Err(bad(
                            path,
                            format!("{} elements, the array has {n}", items.len()),
                        ))
                    }
                    Shape::BoundedSequence(n) if items.len() > n as usize => {
                        return Err(bad(path, format!("{} elements, at most {n}", items.len())))
                    }
                    Shape::Array(_) => {}
                    _ => {
                        self.align(4);
                        let n = u32::try_from(items.len()).map_err(|_| bad(path, "too long"))?;
                        self.buf.extend_from_slice(&n.to_le_bytes());
                    }
                }
                for (k, item) in items.iter().enumerate() {
                    self.one(store, &f.base, item, &format!("{path}[{k}]"), depth)?;
                }
                Ok(())
            }
        }
    }

    fn one(
        &mut self,
        store: &Interfaces,
        base: &BaseType,
        v: &RosValue,
        path: &str,
        depth: usize,
    ) -> Result<(), DynError> {
        match base {
            BaseType::Nested(n) => self.msg(store, n, v, path, depth + 1),
            BaseType::Primitive(Primitive::String) | BaseType::BoundedString(_) => {
                let s = v.as_str().ok_or_else(|| bad(path, "expected a string"))?;
                if let BaseType::BoundedString(n) = base {
                    if s.len() > *n as usize {
                        return Err(bad(path, format!("{} bytes, at most {n}", s.len())));
                    }
                }
                if s.contains('\0') {
                    return Err(bad(path, "a string with a NUL"));
                }
                self.align(4);
                let n = u32::try_from(s.len() + 1).map_err(|_| bad(path, "too long"))?;
                self.buf.extend_from_slice(&n.to_le_bytes());
                self.buf.extend_from_slice(s.as_bytes());
                self.buf.push(0);
                Ok(())
            }
            BaseType::Primitive(p) => {
                let size = p.size().unwrap_or(1);
                self.align(size);
                let x: i128 = match (p, v) {
                    (Primitive::Bool, RosValue::Bool(b)) => i128::from(*b),
                    (Primitive::Float32, RosValue::Float(x)) => {
                        self.buf.extend_from_slice(&(*x as f32).to_le_bytes());
                        return Ok(());
                    }
                    (Primitive::Float64, RosValue::Float(x)) => {
                        self.buf.extend_from_slice(&x.to_le_bytes());
                        return Ok(());
                    }
                    (_, RosValue::Int(x)) => i128::from(*x),
                    (_, RosValue::UInt(x)) => i128::from(*x),
                    _ => return Err(bad(path, format!("{v:?} is not a {}", p.msg_name()))),
                };
                let (lo, hi) = crate::mapping::ros_range(*p).unwrap_or((0, 1));
                if x < lo || x > hi {
                    return Err(bad(path, format!("{x} does not fit {}", p.msg_name())));
                }
                self.buf.extend_from_slice(&x.to_le_bytes()[..size]);
                Ok(())
            }
        }
    }
}

/// Decodes a message of type `ty` (CDR with its encapsulation header, either byte order).
pub fn decode(store: &Interfaces, ty: &str, bytes: &[u8]) -> Result<RosValue, DynError> {
    let little = match bytes.get(..4) {
        Some([0, 1, _, _]) => true,
        Some([0, 0, _, _]) => false,
        _ => return Err(bad("(message)", "not plain CDR")),
    };
    let mut r = R {
        b: bytes,
        at: 4,
        little,
    };
    r.msg(store, ty, "", 0)
}

struct R<'a> {
    b: &'a [u8],
    at: usize,
    little: bool,
}

impl R<'_> {
    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn take(&mut self, n: usize, path: &str) -> Result<&[u8], DynError> {
        if n > self.left() {
            return Err(bad(path, "the message ends early"));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn align(&mut self, n: usize, path: &str) -> Result<(), DynError> {
        let pad = (n - (self.at - 4) % n) % n;
        self.take(pad, path).map(|_| ())
    }

    fn word(&mut self, size: usize, path: &str) -> Result<u64, DynError> {
        self.align(size, path)?;
        let little = self.little;
        let raw = self.take(size, path)?;
        let mut b = [0u8; 8];
        if little {
            b[..size].copy_from_slice(raw);
        } else {
            for (k, x) in raw.iter().rev().enumerate() {
                b[k] = *x;
            }
        }
        Ok(u64::from_le_bytes(b))
    }

    fn msg(
        &mut self,
        store: &Interfaces,
        ty: &str,
        path: &str,
        depth: usize,
    ) -> Result<RosValue, DynError> {
        if depth > MAX_DEPTH {
            return Err(bad(path, "nested too deep"));
        }
        let m = store
            .message(ty)
            .ok_or_else(|| bad(path, format!("`{ty}` is not a known type")))?;
        let mut out = Vec::new();
        for f in m.wire_fields() {
            let here = if path.is_empty() {
                f.name.clone()
            } else {
                format!("{path}.{}", f.name)
            };
            out.push(self.field(store, &f, &here, depth)?);
        }
        Ok(RosValue::Msg(out))
    }

    fn field(
        &mut self,
        store: &Interfaces,
        f: &RosField,
        path: &str,
        depth: usize,
    ) -> Result<RosValue, DynError> {
        let n = match f.shape {
            Shape::Single => return self.one(store, &f.base, path, depth),
            Shape::Array(n) => n as usize,
            Shape::Sequence | Shape::BoundedSequence(_) => {
                let n = self.word(4, path)? as usize;
                if let Shape::BoundedSequence(b) = f.shape {
                    if n > b as usize {
                        return Err(bad(path, format!("{n} elements, at most {b}")));
                    }
                }
                // Every element takes at least one byte.
                if n > self.left() {
                    return Err(bad(path, format!("{n} elements in {} bytes", self.left())));
                }
                n
            }
        };
        let mut items = Vec::with_capacity(n.min(self.left()));
        for k in 0..n {
            items.push(self.one(store, &f.base, &format!("{path}[{k}]"), depth)?);
        }
        Ok(RosValue::Seq(items))
    }

    fn one(
        &mut self,
        store: &Interfaces,
        base: &BaseType,
        path: &str,
        depth: usize,
    ) -> Result<RosValue, DynError> {
        match base {
            BaseType::Nested(n) => self.msg(store, n, path, depth + 1),
            BaseType::Primitive(Primitive::String) | BaseType::BoundedString(_) => {
                let n = self.word(4, path)? as usize;
                let raw = self.take(n, path)?;
                let Some((0, text)) = raw.split_last() else {
                    return Err(bad(path, "a string without its NUL"));
                };
                // Found by the fuzzer: the encoder refuses a NUL inside a string, so the
                // decoder must too (a ROS string ends at its first NUL).
                if text.contains(&0) {
                    return Err(bad(path, "a NUL inside a string"));
                }
                if let BaseType::BoundedString(b) = base {
                    if text.len() > *b as usize {
                        return Err(bad(path, format!("{} bytes, at most {b}", text.len())));
                    }
                }
                let s = std::str::from_utf8(text).map_err(|_| bad(path, "not UTF-8"))?;
                Ok(RosValue::Str(s.to_string()))
            }
            BaseType::Primitive(p) => {
                let size = p.size().unwrap_or(1);
                let u = self.word(size, path)?;
                Ok(match p {
                    Primitive::Bool => match u {
                        0 => RosValue::Bool(false),
                        1 => RosValue::Bool(true),
                        x => return Err(bad(path, format!("bool byte {x}"))),
                    },
                    Primitive::Float32 => RosValue::Float(f64::from(f32::from_bits(u as u32))),
                    Primitive::Float64 => RosValue::Float(f64::from_bits(u)),
                    Primitive::Int8 | Primitive::Int16 | Primitive::Int32 | Primitive::Int64 => {
                        let shift = 64 - 8 * size as u32;
                        RosValue::Int(((u << shift) as i64) >> shift)
                    }
                    _ => RosValue::UInt(u),
                })
            }
        }
    }
}
