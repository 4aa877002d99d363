//! Any ROS message as a value tree, in CDR both ways: the crate's one CDR codec (plain
//! XCDR1; little-endian out, both byte orders in; the 4-byte encapsulation header;
//! alignment counted from after it). The bridge uses it directly for messages that are
//! not fcan values, such as the parameter services' (`rcl_interfaces`), which carry
//! strings and sequences of messages; [`crate::cdr`] pairs fcan values with it.
//!
//! [`decode`] reads untrusted bytes: every length is checked against the bytes left
//! before anything is allocated or looped over, strings must be UTF-8 and end in their
//! only NUL, bool bytes must be 0 or 1, bounded sequences and strings keep their
//! bounds, and nesting is limited. [`encode`] refuses what [`decode`] would refuse, so
//! whatever decodes encodes again.

use std::fmt;

use crate::idl::{BaseType, Message, Primitive, RosField, Shape};
use crate::interfaces::Interfaces;
use crate::mapping::ros_range;

/// The encapsulation header of plain CDR, little-endian.
pub const CDR_LE: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

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

/// Bytes that are not a message of the type, or a value that does not fit it. Names
/// the field.
///
/// ```
/// let store = fcan_ros2::Interfaces::bundled();
/// let e = fcan_ros2::dynamic::decode(&store, "std_msgs/msg/Bool", &[0, 1, 0, 0, 2]).unwrap_err();
/// assert_eq!((e.path.as_str(), e.message.as_str()), ("data", "bool byte 2 is neither 0 nor 1"));
/// assert_eq!(e.to_string(), "data: bool byte 2 is neither 0 nor 1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CdrError {
    /// The ROS field (`positions[1]`, `linear.x`), or `(message)`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for CdrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for CdrError {}

/// Where a value sits in its message (`linear.x`, `positions[1]`). The walks carry it
/// on the stack and render it only for an error, so a good message costs no path
/// strings.
#[derive(Clone, Copy)]
pub(crate) enum At<'a> {
    /// The message itself.
    Root,
    /// A field of the message at the first place.
    Field(&'a At<'a>, &'a str),
    /// An element of the array or sequence at the first place.
    Index(&'a At<'a>, usize),
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Root => f.write_str("(message)"),
            At::Field(At::Root, name) => f.write_str(name),
            At::Field(parent, name) => write!(f, "{parent}.{name}"),
            At::Index(parent, k) => write!(f, "{parent}[{k}]"),
        }
    }
}

pub(crate) fn err(at: &At, message: impl Into<String>) -> CdrError {
    CdrError {
        path: at.to_string(),
        message: message.into(),
    }
}

/// Nesting deeper than this is refused (the bundled types reach 4); it also stops a
/// store whose types contain themselves.
const MAX_DEPTH: usize = 16;

/// Refuses nesting deeper than [`MAX_DEPTH`]: every walk into a message calls it.
pub(crate) fn check_depth(at: &At, depth: usize) -> Result<(), CdrError> {
    if depth > MAX_DEPTH {
        return Err(err(at, "nested too deep"));
    }
    Ok(())
}

/// Message type `ty` of the store, or an error at `at`.
pub(crate) fn message<'s>(
    store: &'s Interfaces,
    ty: &str,
    at: &At,
) -> Result<&'s Message, CdrError> {
    store
        .message(ty)
        .ok_or_else(|| err(at, format!("`{ty}` is not a known type")))
}

/// A wall time as `builtin_interfaces/msg/Time` (before 1970: 0).
pub fn ros_time(t: std::time::SystemTime) -> RosValue {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    RosValue::Msg(vec![
        RosValue::Int(
            i64::try_from(d.as_secs())
                .unwrap_or(i64::MAX)
                .min(i64::from(i32::MAX)),
        ),
        RosValue::UInt(u64::from(d.subsec_nanos())),
    ])
}

/// The value of a message of type `ty` with every field zero: 0, false, `""`, empty
/// sequences, arrays of zeros, nested messages of zeros (what ROS's default
/// constructors give). A start for a message most of whose fields stay zero.
///
/// ```
/// use fcan_ros2::dynamic::{encode, zero, RosValue};
/// let store = fcan_ros2::Interfaces::bundled();
/// let v = zero(&store, "rcl_interfaces/msg/SetParametersResult").unwrap();
/// assert_eq!(v, RosValue::Msg(vec![RosValue::Bool(false), RosValue::Str(String::new())]));
/// let bytes = encode(&store, "rcl_interfaces/msg/SetParametersResult", &v).unwrap();
/// assert_eq!(bytes, [0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
/// ```
pub fn zero(store: &Interfaces, ty: &str) -> Result<RosValue, CdrError> {
    zero_msg(store, ty, &At::Root, 0)
}

/// [`zero`] at `at`, nesting `depth`.
fn zero_msg(store: &Interfaces, ty: &str, at: &At, depth: usize) -> Result<RosValue, CdrError> {
    check_depth(at, depth)?;
    message(store, ty, at)?
        .wire_fields()
        .iter()
        .map(|f| zero_field(store, f, &At::Field(at, &f.name), depth))
        .collect::<Result<_, _>>()
        .map(RosValue::Msg)
}

/// The zero value of field `f` of a message at nesting `depth` (see [`zero`]).
pub(crate) fn zero_field(
    store: &Interfaces,
    f: &RosField,
    at: &At,
    depth: usize,
) -> Result<RosValue, CdrError> {
    let one = |at: &At| {
        Ok(match &f.base {
            BaseType::Nested(n) => return zero_msg(store, n, at, depth + 1),
            BaseType::Primitive(Primitive::String) | BaseType::BoundedString(_) => {
                RosValue::Str(String::new())
            }
            BaseType::Primitive(Primitive::Bool) => RosValue::Bool(false),
            BaseType::Primitive(Primitive::Float32 | Primitive::Float64) => RosValue::Float(0.0),
            BaseType::Primitive(p) if signed(*p) => RosValue::Int(0),
            BaseType::Primitive(_) => RosValue::UInt(0),
        })
    };
    match f.shape {
        Shape::Single => one(at),
        Shape::Array(n) => (0..n as usize)
            .map(|k| one(&At::Index(at, k)))
            .collect::<Result<_, _>>()
            .map(RosValue::Seq),
        Shape::Sequence | Shape::BoundedSequence(_) => Ok(RosValue::Seq(Vec::new())),
    }
}

fn signed(p: Primitive) -> bool {
    matches!(
        p,
        Primitive::Int8 | Primitive::Int16 | Primitive::Int32 | Primitive::Int64
    )
}

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
/// // A value out of its type's range is refused, naming the field.
/// let v = RosValue::Msg(vec![RosValue::Int(300)]);
/// let e = encode(&store, "std_msgs/msg/UInt8", &v).unwrap_err();
/// assert_eq!(e.to_string(), "data: 300 does not fit uint8");
/// ```
pub fn encode(store: &Interfaces, ty: &str, value: &RosValue) -> Result<Vec<u8>, CdrError> {
    let mut w = Writer::new();
    w.msg(store, ty, value, &At::Root, 0)?;
    Ok(w.finish())
}

/// Writes a message field by field: [`encode`] and [`crate::cdr`]'s walk.
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// A message with its encapsulation header and no field yet.
    pub(crate) fn new() -> Writer {
        Writer {
            buf: CDR_LE.to_vec(),
        }
    }

    /// The bytes written.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.buf
    }

    /// Pads to `n` bytes, counted from the end of the encapsulation header.
    fn align(&mut self, n: usize) {
        let pad = (n - (self.buf.len() - CDR_LE.len()) % n) % n;
        self.buf.extend(std::iter::repeat_n(0, pad));
    }

    fn u32(&mut self, n: usize, at: &At) -> Result<(), CdrError> {
        let n = u32::try_from(n).map_err(|_| err(at, "too long"))?;
        self.align(4);
        self.buf.extend_from_slice(&n.to_le_bytes());
        Ok(())
    }

    fn msg(
        &mut self,
        store: &Interfaces,
        ty: &str,
        v: &RosValue,
        at: &At,
        depth: usize,
    ) -> Result<(), CdrError> {
        check_depth(at, depth)?;
        let fields = message(store, ty, at)?.wire_fields();
        let RosValue::Msg(values) = v else {
            return Err(err(at, format!("expected a {ty}")));
        };
        if values.len() != fields.len() {
            return Err(err(
                at,
                format!("{} values for {} fields", values.len(), fields.len()),
            ));
        }
        for (f, v) in fields.iter().zip(values) {
            self.field(store, f, v, &At::Field(at, &f.name), depth)?;
        }
        Ok(())
    }

    /// Writes the value of field `f` of a message at nesting `depth`.
    pub(crate) fn field(
        &mut self,
        store: &Interfaces,
        f: &RosField,
        v: &RosValue,
        at: &At,
        depth: usize,
    ) -> Result<(), CdrError> {
        if f.shape == Shape::Single {
            return self.one(store, &f.base, v, at, depth);
        }
        let items = v.as_seq().ok_or_else(|| err(at, "expected a sequence"))?;
        match f.shape {
            Shape::Array(n) if items.len() != n as usize => {
                return Err(err(
                    at,
                    format!("{} elements, the array has {n}", items.len()),
                ))
            }
            Shape::BoundedSequence(n) if items.len() > n as usize => {
                return Err(err(at, format!("{} elements, at most {n}", items.len())))
            }
            Shape::Array(_) => {}
            _ => self.u32(items.len(), at)?,
        }
        for (k, item) in items.iter().enumerate() {
            self.one(store, &f.base, item, &At::Index(at, k), depth)?;
        }
        Ok(())
    }

    fn one(
        &mut self,
        store: &Interfaces,
        base: &BaseType,
        v: &RosValue,
        at: &At,
        depth: usize,
    ) -> Result<(), CdrError> {
        let p = match base {
            BaseType::Nested(n) => return self.msg(store, n, v, at, depth + 1),
            BaseType::Primitive(Primitive::String) | BaseType::BoundedString(_) => {
                let s = v.as_str().ok_or_else(|| err(at, "expected a string"))?;
                if let BaseType::BoundedString(n) = base {
                    if s.len() > *n as usize {
                        return Err(err(at, format!("{} bytes, at most {n}", s.len())));
                    }
                }
                if s.contains('\0') {
                    return Err(err(at, "a string with a NUL"));
                }
                self.u32(s.len() + 1, at)?;
                self.buf.extend_from_slice(s.as_bytes());
                self.buf.push(0);
                return Ok(());
            }
            BaseType::Primitive(p) => *p,
        };
        let size = p.size().unwrap_or(1);
        self.align(size);
        match (p, v) {
            (Primitive::Bool, RosValue::Bool(b)) => self.buf.push(u8::from(*b)),
            (Primitive::Float32, RosValue::Float(x)) => {
                self.buf.extend_from_slice(&(*x as f32).to_le_bytes())
            }
            (Primitive::Float64, RosValue::Float(x)) => {
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            (p, RosValue::Int(_) | RosValue::UInt(_)) => {
                let x = match v {
                    RosValue::Int(x) => i128::from(*x),
                    RosValue::UInt(x) => i128::from(*x),
                    _ => unreachable!("matched above"),
                };
                let (lo, hi) = ros_range(p)
                    .ok_or_else(|| err(at, format!("an integer cannot fill {}", p.msg_name())))?;
                if x < lo || x > hi {
                    return Err(err(at, format!("{x} does not fit {}", p.msg_name())));
                }
                self.buf.extend_from_slice(&x.to_le_bytes()[..size]);
            }
            _ => return Err(err(at, format!("{v:?} cannot fill {}", p.msg_name()))),
        }
        Ok(())
    }
}

/// Decodes a message of type `ty` (CDR with its encapsulation header, either byte order).
///
/// ```
/// use fcan_ros2::dynamic::{decode, RosValue};
/// let store = fcan_ros2::Interfaces::bundled();
/// // Big-endian: the header's second byte is 0.
/// let v = decode(&store, "std_msgs/msg/Int16", &[0, 0, 0, 0, 0xff, 0xfe]).unwrap();
/// assert_eq!(v, RosValue::Msg(vec![RosValue::Int(-2)]));
/// // A sequence count beyond the bytes left is refused before anything is allocated.
/// let e = decode(&store, "std_msgs/msg/String", &[0, 1, 0, 0, 0xff, 0xff, 0xff, 0x7f]).unwrap_err();
/// assert_eq!(e.to_string(), "data: the message ends early");
/// ```
pub fn decode(store: &Interfaces, ty: &str, bytes: &[u8]) -> Result<RosValue, CdrError> {
    Reader::new(bytes)?.msg(store, ty, &At::Root, 0)
}

/// Reads a message field by field: [`decode`] and [`crate::cdr`]'s walk.
pub(crate) struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    little: bool,
}

impl<'a> Reader<'a> {
    /// Reads the encapsulation header: plain CDR, either byte order.
    pub(crate) fn new(bytes: &'a [u8]) -> Result<Reader<'a>, CdrError> {
        let little = match bytes.get(..4) {
            Some([0x00, 0x01, _, _]) => true,
            Some([0x00, 0x00, _, _]) => false,
            Some(h) => {
                return Err(err(
                    &At::Root,
                    format!("encapsulation {:02x}{:02x} is not plain CDR", h[0], h[1]),
                ))
            }
            None => return Err(err(&At::Root, "shorter than the encapsulation header")),
        };
        Ok(Reader {
            b: bytes,
            at: CDR_LE.len(),
            little,
        })
    }

    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn take(&mut self, n: usize, at: &At) -> Result<&[u8], CdrError> {
        if n > self.left() {
            return Err(err(at, "the message ends early"));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    /// Skips the padding to `n` bytes, counted from the end of the encapsulation header.
    fn align(&mut self, n: usize, at: &At) -> Result<(), CdrError> {
        let pad = (n - (self.at - CDR_LE.len()) % n) % n;
        self.take(pad, at).map(|_| ())
    }

    /// An unsigned word of `size` bytes (1 to 8), aligned, in the sample's byte order.
    fn word(&mut self, size: usize, at: &At) -> Result<u64, CdrError> {
        self.align(size, at)?;
        let little = self.little;
        let raw = self.take(size, at)?;
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
        at: &At,
        depth: usize,
    ) -> Result<RosValue, CdrError> {
        check_depth(at, depth)?;
        message(store, ty, at)?
            .wire_fields()
            .iter()
            .map(|f| self.field(store, f, &At::Field(at, &f.name), depth))
            .collect::<Result<_, _>>()
            .map(RosValue::Msg)
    }

    /// Reads the value of field `f` of a message at nesting `depth`.
    pub(crate) fn field(
        &mut self,
        store: &Interfaces,
        f: &RosField,
        at: &At,
        depth: usize,
    ) -> Result<RosValue, CdrError> {
        let n = match f.shape {
            Shape::Single => return self.one(store, &f.base, at, depth),
            Shape::Array(n) => n as usize,
            Shape::Sequence | Shape::BoundedSequence(_) => {
                let n = self.word(4, at)? as usize;
                if let Shape::BoundedSequence(b) = f.shape {
                    if n > b as usize {
                        return Err(err(at, format!("{n} elements, at most {b}")));
                    }
                }
                // Every element takes at least one byte: a count beyond the bytes left
                // is a lie, found before any loop runs.
                if n > self.left() {
                    return Err(err(at, format!("{n} elements in {} bytes", self.left())));
                }
                n
            }
        };
        // An array's size comes from the type, not the bytes; still, it cannot hold
        // more elements than there are bytes left.
        let mut items = Vec::with_capacity(n.min(self.left()));
        for k in 0..n {
            items.push(self.one(store, &f.base, &At::Index(at, k), depth)?);
        }
        Ok(RosValue::Seq(items))
    }

    fn one(
        &mut self,
        store: &Interfaces,
        base: &BaseType,
        at: &At,
        depth: usize,
    ) -> Result<RosValue, CdrError> {
        match base {
            BaseType::Nested(n) => self.msg(store, n, at, depth + 1),
            BaseType::Primitive(Primitive::String) | BaseType::BoundedString(_) => {
                let n = self.word(4, at)? as usize;
                let raw = self.take(n, at)?;
                let Some((0, text)) = raw.split_last() else {
                    return Err(err(at, "a string without its NUL"));
                };
                // Found by the fuzzer: the encoder refuses a NUL inside a string, so the
                // decoder must too (a ROS string ends at its first NUL).
                if text.contains(&0) {
                    return Err(err(at, "a NUL inside a string"));
                }
                if let BaseType::BoundedString(b) = base {
                    if text.len() > *b as usize {
                        return Err(err(at, format!("{} bytes, at most {b}", text.len())));
                    }
                }
                let s = std::str::from_utf8(text).map_err(|_| err(at, "not UTF-8"))?;
                Ok(RosValue::Str(s.to_string()))
            }
            BaseType::Primitive(p) => {
                let size = p.size().unwrap_or(1);
                let u = self.word(size, at)?;
                Ok(match p {
                    Primitive::Bool => match u {
                        0 => RosValue::Bool(false),
                        1 => RosValue::Bool(true),
                        x => return Err(err(at, format!("bool byte {x} is neither 0 nor 1"))),
                    },
                    Primitive::Float32 => RosValue::Float(f64::from(f32::from_bits(u as u32))),
                    Primitive::Float64 => RosValue::Float(f64::from_bits(u)),
                    p if signed(*p) => {
                        let shift = 64 - 8 * size as u32;
                        RosValue::Int(((u << shift) as i64) >> shift)
                    }
                    _ => RosValue::UInt(u),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Interfaces {
        Interfaces::bundled()
    }

    #[test]
    fn alignment_counts_from_after_the_header() {
        // rcl_interfaces/ParameterValue: uint8, bool, then int64 at offset 8 and
        // float64 at 16 (after the header), then the string's length at 24.
        let s = store();
        let ty = "rcl_interfaces/msg/ParameterValue";
        let RosValue::Msg(mut v) = zero(&s, ty).unwrap() else {
            panic!("a message")
        };
        v[0] = RosValue::UInt(2);
        v[1] = RosValue::Bool(true);
        v[2] = RosValue::Int(-2);
        v[3] = RosValue::Float(0.5);
        v[4] = RosValue::Str("p".into());
        let v = RosValue::Msg(v);
        let bytes = encode(&s, ty, &v).unwrap();
        let mut want = vec![0, 1, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0];
        want.extend((-2i64).to_le_bytes());
        want.extend(0.5f64.to_le_bytes());
        want.extend([2, 0, 0, 0, b'p', 0]);
        // Five empty sequences: the first count pads from 30 to 32.
        want.extend([0, 0]);
        want.extend([0; 20]);
        assert_eq!(bytes, want);
        assert_eq!(decode(&s, ty, &bytes).unwrap(), v);
        // The same message big-endian: every word reversed, the padding the same.
        let mut be = vec![0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0];
        be.extend((-2i64).to_be_bytes());
        be.extend(0.5f64.to_be_bytes());
        be.extend([0, 0, 0, 2, b'p', 0, 0, 0]);
        be.extend([0; 20]);
        assert_eq!(decode(&s, ty, &be).unwrap(), v);
    }

    #[test]
    fn an_integer_fills_integers_only() {
        let s = store();
        let int = |ty: &str, v: RosValue| encode(&s, ty, &RosValue::Msg(vec![v]));
        let refused = |ty: &str, v: RosValue| int(ty, v).unwrap_err().to_string();
        // Either integer variant fills either integer type, within its range.
        assert_eq!(
            int("std_msgs/msg/UInt8", RosValue::Int(5)).unwrap(),
            [0, 1, 0, 0, 5]
        );
        let e = refused("std_msgs/msg/Int8", RosValue::UInt(300));
        assert_eq!(e, "data: 300 does not fit int8");
        // An integer is not a float's or a bool's bits.
        let e = refused("std_msgs/msg/Float64", RosValue::Int(1));
        assert_eq!(e, "data: an integer cannot fill float64");
        let e = refused("std_msgs/msg/Bool", RosValue::UInt(1));
        assert_eq!(e, "data: an integer cannot fill bool");
        let e = refused("std_msgs/msg/Int32", RosValue::Float(1.0));
        assert_eq!(e, "data: Float(1.0) cannot fill int32");
    }

    #[test]
    fn errors_name_the_field_nested_and_indexed() {
        let s = store();
        // Twist: linear.x is there, linear.y is not.
        let mut b = CDR_LE.to_vec();
        b.extend(1.0f64.to_le_bytes());
        let e = decode(&s, "geometry_msgs/msg/Twist", &b).unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.message.as_str()),
            ("linear.y", "the message ends early")
        );
        // Two positions announced, one there (after the padding to 8).
        let mut b = CDR_LE.to_vec();
        b.extend(2u32.to_le_bytes());
        b.extend([0; 4]);
        b.extend(1.0f64.to_le_bytes());
        let e = decode(&s, "trajectory_msgs/msg/JointTrajectoryPoint", &b).unwrap_err();
        assert_eq!(e.to_string(), "positions[1]: the message ends early");
        // The header itself.
        let e = decode(&s, "std_msgs/msg/Bool", &[0, 1]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "(message): shorter than the encapsulation header"
        );
        let e = decode(&s, "std_msgs/msg/Bool", &[0, 7, 0, 0, 1]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "(message): encapsulation 0007 is not plain CDR"
        );
        let e = encode(&s, "std_msgs/msg/Nope", &RosValue::Msg(vec![])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "(message): `std_msgs/msg/Nope` is not a known type"
        );
    }

    #[test]
    fn strings_end_in_their_only_nul_and_are_utf8() {
        let s = store();
        let string = |raw: &[u8]| {
            let mut b = CDR_LE.to_vec();
            b.extend((raw.len() as u32).to_le_bytes());
            b.extend(raw);
            decode(&s, "std_msgs/msg/String", &b).map_err(|e| e.message)
        };
        assert_eq!(
            string(b"ok\0"),
            Ok(RosValue::Msg(vec![RosValue::Str("ok".into())]))
        );
        assert_eq!(string(b"ok!").unwrap_err(), "a string without its NUL");
        assert_eq!(string(b"").unwrap_err(), "a string without its NUL");
        assert_eq!(string(b"o\0k\0").unwrap_err(), "a NUL inside a string");
        assert_eq!(string(b"\xff\0").unwrap_err(), "not UTF-8");
        let nul = RosValue::Msg(vec![RosValue::Str("o\0k".into())]);
        let e = encode(&s, "std_msgs/msg/String", &nul).unwrap_err();
        assert_eq!(e.to_string(), "data: a string with a NUL");
    }

    #[test]
    fn a_zero_message_is_what_ros_default_constructs() {
        let s = store();
        let z = zero(&s, "sensor_msgs/msg/Range").unwrap();
        let bytes = encode(&s, "sensor_msgs/msg/Range", &z).unwrap();
        // Header: stamp (two words) and an empty frame_id (length 1, its NUL); then
        // radiation_type, padding to 4, five float32.
        let mut want = CDR_LE.to_vec();
        want.extend([0; 8]);
        want.extend([1, 0, 0, 0, 0]);
        want.extend([0; 3 + 20]);
        assert_eq!(bytes, want);
    }

    #[test]
    fn ros_time_splits_seconds_and_nanoseconds() {
        let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::new(5, 7);
        assert_eq!(
            ros_time(t),
            RosValue::Msg(vec![RosValue::Int(5), RosValue::UInt(7)])
        );
        let before = std::time::SystemTime::UNIX_EPOCH - std::time::Duration::from_secs(1);
        assert_eq!(
            ros_time(before),
            RosValue::Msg(vec![RosValue::Int(0), RosValue::UInt(0)])
        );
    }
}
