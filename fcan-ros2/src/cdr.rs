//! fcan values in ROS 2's wire encoding: CDR (XCDR1, plain, little-endian out; both
//! byte orders in), driven by a [`Binding`] from [`crate::mapping`].
//!
//! [`encode`] writes a whole ROS message from an fcan message value: every ROS field,
//! the bound ones from their fcan field, the rest zero. [`decode`] reads a whole ROS
//! message and returns the fcan message value, refusing what the fcan fields cannot
//! hold: a number out of range, a sequence of the wrong length, a bool byte other than
//! 0 or 1, a truncated or lying buffer. Nothing in the input decides how much is
//! allocated: a sequence length is checked against the bytes left before anything is
//! read.

use fcan_core::ir::Field;
use fcan_core::types::ScalarType;
use fcan_value::Value;

use crate::idl::{BaseType, Message, Primitive, RosField, Shape};
use crate::interfaces::Interfaces;
use crate::mapping::{fcan_range, ros_range, Binding, Slot};

/// The encapsulation header of plain CDR, little-endian.
pub const CDR_LE: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// A value that cannot be encoded or bytes that cannot be decoded. Names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct CdrError {
    /// The ROS field (`positions[1]`, `linear.x`), or `(message)`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

fn err(path: &str, message: impl Into<String>) -> CdrError {
    CdrError {
        path: if path.is_empty() {
            "(message)".to_string()
        } else {
            path.to_string()
        },
        message: message.into(),
    }
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}.{name}")
    }
}

/// Encodes an fcan message value (a [`Value::Struct`] of the fcan fields) as the ROS
/// message of `binding`, with its encapsulation header.
///
/// ```
/// use fcan_core::ir::Field;
/// use fcan_core::types::ScalarType;
/// use fcan_value::Value;
/// let mut store = fcan_ros2::Interfaces::bundled();
/// let fields = [Field { name: "on".into(), ty: ScalarType::Bool, len: None }];
/// let ros = fcan_core::ir::Ros { ty: "std_msgs/msg/Bool".into(), map: vec![("on".into(), "data".into())] };
/// let binding = fcan_ros2::mapping::bind_topic(&mut store, &ros, &fields, fcan_ros2::mapping::Flow::ToRos).unwrap();
/// let value = Value::Struct(vec![("on".into(), Value::Bool(true))]);
/// assert_eq!(fcan_ros2::cdr::encode(&store, &binding, &fields, &value).unwrap(), [0, 1, 0, 0, 1]);
/// ```
pub fn encode(
    store: &Interfaces,
    binding: &Binding,
    fields: &[Field],
    value: &Value,
) -> Result<Vec<u8>, CdrError> {
    let msg = store
        .message(&binding.message)
        .ok_or_else(|| err("", format!("`{}` is not a known type", binding.message)))?;
    let values = field_values(fields, value)?;
    let mut w = Writer {
        buf: CDR_LE.to_vec(),
    };
    w.message(store, msg, &binding.slots, fields, &values, "")?;
    Ok(w.buf)
}

/// The reply a service gives when the call failed (the node refused, the master timed
/// out): every field zero except a top-level `string message` no fcan field fills,
/// which carries `why`, as `std_srvs/srv/SetBool` and `Trigger` answer `success: false`
/// with a message. `None` when the response type has no such field.
///
/// ```
/// use fcan_core::ir::Field;
/// use fcan_core::types::ScalarType;
/// let mut store = fcan_ros2::Interfaces::bundled();
/// let fields = [Field { name: "ok".into(), ty: ScalarType::Bool, len: None }];
/// let ros = fcan_core::ir::Ros { ty: "std_msgs/msg/Bool".into(), map: vec![("ok".into(), "data".into())] };
/// let b = fcan_ros2::mapping::bind_topic(&mut store, &ros, &fields, fcan_ros2::mapping::Flow::ToRos).unwrap();
/// // std_msgs/Bool has no `message`: no refusal to give.
/// assert!(fcan_ros2::cdr::encode_refusal(&store, &b, "busy").is_none());
/// ```
pub fn encode_refusal(store: &Interfaces, binding: &Binding, why: &str) -> Option<Vec<u8>> {
    let msg = store.message(&binding.message)?;
    let wire = msg.wire_fields();
    let at = wire.iter().position(|f| {
        f.name == "message"
            && f.base == BaseType::Primitive(Primitive::String)
            && f.shape == Shape::Single
    })?;
    if binding.slots.get(at) != Some(&Slot::Zero) {
        return None;
    }
    let mut w = Writer {
        buf: CDR_LE.to_vec(),
    };
    for (k, rf) in wire.iter().enumerate() {
        if k == at {
            w.align(4);
            let len = u32::try_from(why.len() + 1).ok()?;
            w.buf.extend_from_slice(&len.to_le_bytes());
            w.buf.extend_from_slice(why.as_bytes());
            w.buf.push(0);
        } else {
            w.zero(store, rf, &rf.name).ok()?;
        }
    }
    Some(w.buf)
}

fn field_values<'a>(fields: &[Field], value: &'a Value) -> Result<Vec<&'a Value>, CdrError> {
    fields
        .iter()
        .map(|f| {
            value
                .field(&f.name)
                .ok_or_else(|| err(&f.name, "missing in the fcan value"))
        })
        .collect()
}

struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// Pads to `n` bytes, counted from the end of the encapsulation header.
    fn align(&mut self, n: usize) {
        while (self.buf.len() - 4) % n != 0 {
            self.buf.push(0);
        }
    }

    fn message(
        &mut self,
        store: &Interfaces,
        msg: &Message,
        slots: &[Slot],
        fields: &[Field],
        values: &[&Value],
        path: &str,
    ) -> Result<(), CdrError> {
        for (rf, slot) in msg.wire_fields().iter().zip(slots) {
            let here = join(path, &rf.name);
            match slot {
                Slot::Zero => self.zero(store, rf, &here)?,
                Slot::Field(i) => {
                    let (f, v) = (&fields[*i], values[*i]);
                    self.field(rf, f, v, &here)?;
                }
                Slot::Nested(inner) => {
                    let BaseType::Nested(n) = &rf.base else {
                        return Err(err(&here, "not a message"));
                    };
                    let nested = store
                        .message(n)
                        .ok_or_else(|| err(&here, format!("`{n}` is not a known type")))?;
                    self.message(store, nested, inner, fields, values, &here)?;
                }
            }
        }
        Ok(())
    }

    fn field(&mut self, rf: &RosField, f: &Field, v: &Value, path: &str) -> Result<(), CdrError> {
        let BaseType::Primitive(p) = rf.base else {
            return Err(err(path, "an fcan value cannot fill it"));
        };
        match (rf.shape, f.len) {
            (Shape::Single, None) => self.primitive(p, v, path),
            (shape, Some(n)) => {
                let Value::Array(items) = v else {
                    return Err(err(path, "expected an array"));
                };
                if items.len() != n as usize {
                    return Err(err(
                        path,
                        format!("{} values, the fcan field has {n}", items.len()),
                    ));
                }
                if shape != Shape::Array(n) {
                    self.align(4);
                    self.buf.extend_from_slice(&n.to_le_bytes());
                }
                for (k, item) in items.iter().enumerate() {
                    self.primitive(p, item, &format!("{path}[{k}]"))?;
                }
                Ok(())
            }
            _ => Err(err(path, "shape mismatch")),
        }
    }

    fn primitive(&mut self, p: Primitive, v: &Value, path: &str) -> Result<(), CdrError> {
        let size = p
            .size()
            .ok_or_else(|| err(path, "an fcan value cannot fill a string"))?;
        self.align(size);
        match (p, v) {
            (Primitive::Bool, Value::Bool(b)) => self.buf.push(u8::from(*b)),
            (Primitive::Float32, Value::Float(x)) => {
                self.buf.extend_from_slice(&(*x as f32).to_le_bytes())
            }
            (Primitive::Float64, Value::Float(x)) => self.buf.extend_from_slice(&x.to_le_bytes()),
            (p, Value::Int(_) | Value::UInt(_)) => {
                let x = match v {
                    Value::Int(x) => i128::from(*x),
                    Value::UInt(x) => i128::from(*x),
                    _ => unreachable!("matched above"),
                };
                let (lo, hi) = ros_range(p)
                    .ok_or_else(|| err(path, format!("an integer cannot fill {}", p.msg_name())))?;
                if x < lo || x > hi {
                    return Err(err(path, format!("{x} does not fit {}", p.msg_name())));
                }
                self.buf.extend_from_slice(&x.to_le_bytes()[..size]);
            }
            _ => return Err(err(path, format!("{v:?} cannot fill {}", p.msg_name()))),
        }
        Ok(())
    }

    fn zero(&mut self, store: &Interfaces, rf: &RosField, path: &str) -> Result<(), CdrError> {
        let count = match rf.shape {
            Shape::Single => 1,
            Shape::Array(n) => n,
            Shape::Sequence | Shape::BoundedSequence(_) => {
                self.align(4);
                self.buf.extend_from_slice(&0u32.to_le_bytes());
                return Ok(());
            }
        };
        for _ in 0..count {
            match &rf.base {
                BaseType::Primitive(Primitive::String) | BaseType::BoundedString(_) => {
                    self.align(4);
                    self.buf.extend_from_slice(&1u32.to_le_bytes());
                    self.buf.push(0);
                }
                BaseType::Primitive(p) => {
                    let size = p.size().unwrap_or(1);
                    self.align(size);
                    self.buf.extend(std::iter::repeat_n(0, size));
                }
                BaseType::Nested(n) => {
                    let nested = store
                        .message(n)
                        .ok_or_else(|| err(path, format!("`{n}` is not a known type")))?;
                    for f in nested.wire_fields() {
                        self.zero(store, &f, &join(path, &f.name))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Decodes a ROS message (with its encapsulation header) bound by `binding` into the
/// fcan message value of `fields` ([`Value::Struct`], fields in schema order).
pub fn decode(
    store: &Interfaces,
    binding: &Binding,
    fields: &[Field],
    bytes: &[u8],
) -> Result<Value, CdrError> {
    let msg = store
        .message(&binding.message)
        .ok_or_else(|| err("", format!("`{}` is not a known type", binding.message)))?;
    let little = match bytes.get(..4) {
        Some([0x00, 0x01, _, _]) => true,
        Some([0x00, 0x00, _, _]) => false,
        Some(h) => {
            return Err(err(
                "",
                format!("encapsulation {:02x}{:02x} is not plain CDR", h[0], h[1]),
            ))
        }
        None => return Err(err("", "shorter than the encapsulation header")),
    };
    let mut r = Reader {
        bytes,
        at: 4,
        little,
    };
    let mut out: Vec<Option<Value>> = vec![None; fields.len()];
    r.message(store, msg, &binding.slots, fields, &mut out, "", 0)?;
    let mut values = Vec::with_capacity(fields.len());
    for (f, v) in fields.iter().zip(out) {
        let v = v.ok_or_else(|| err(&f.name, "no ROS field fills this fcan field"))?;
        values.push((f.name.as_str().into(), v));
    }
    Ok(Value::Struct(values))
}

/// Nesting deeper than this in a decoded message is refused (the bundled types reach 4).
const MAX_DEPTH: usize = 16;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    little: bool,
}

impl Reader<'_> {
    fn align(&mut self, n: usize, path: &str) -> Result<(), CdrError> {
        let pad = (n - (self.at - 4) % n) % n;
        self.take(pad, path).map(|_| ())
    }

    fn take(&mut self, n: usize, path: &str) -> Result<&[u8], CdrError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| err(path, "the message ends early"))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self, path: &str) -> Result<u32, CdrError> {
        self.align(4, path)?;
        let b: [u8; 4] = self
            .take(4, path)?
            .try_into()
            .map_err(|_| err(path, "short"))?;
        Ok(if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn message(
        &mut self,
        store: &Interfaces,
        msg: &Message,
        slots: &[Slot],
        fields: &[Field],
        out: &mut [Option<Value>],
        path: &str,
        depth: usize,
    ) -> Result<(), CdrError> {
        if depth > MAX_DEPTH {
            return Err(err(path, "nested too deep"));
        }
        let wire = msg.wire_fields();
        for (k, rf) in wire.iter().enumerate() {
            let here = join(path, &rf.name);
            match slots.get(k).unwrap_or(&Slot::Zero) {
                Slot::Field(i) => {
                    let f = &fields[*i];
                    out[*i] = Some(self.field(rf, f, &here)?);
                }
                Slot::Nested(inner) => {
                    let BaseType::Nested(n) = &rf.base else {
                        return Err(err(&here, "not a message"));
                    };
                    let nested = store
                        .message(n)
                        .ok_or_else(|| err(&here, format!("`{n}` is not a known type")))?;
                    self.message(store, nested, inner, fields, out, &here, depth + 1)?;
                }
                Slot::Zero => self.skip(store, rf, &here, depth)?,
            }
        }
        Ok(())
    }

    fn field(&mut self, rf: &RosField, f: &Field, path: &str) -> Result<Value, CdrError> {
        let BaseType::Primitive(p) = rf.base else {
            return Err(err(path, "not a primitive"));
        };
        let count = match (rf.shape, f.len) {
            (Shape::Single, None) => return self.primitive(p, f.ty, path),
            (Shape::Array(m), Some(n)) if m == n => n,
            (Shape::Sequence | Shape::BoundedSequence(_), Some(n)) => {
                let got = self.u32(path)?;
                if got != n {
                    return Err(err(
                        path,
                        format!("{got} values; the fcan field takes exactly {n}"),
                    ));
                }
                n
            }
            _ => return Err(err(path, "shape mismatch")),
        };
        let mut items = Vec::with_capacity(count as usize);
        for k in 0..count {
            items.push(self.primitive(p, f.ty, &format!("{path}[{k}]"))?);
        }
        Ok(Value::Array(items))
    }

    /// Reads one ROS primitive and converts it to the fcan type, refusing what does
    /// not fit.
    fn primitive(&mut self, p: Primitive, ty: ScalarType, path: &str) -> Result<Value, CdrError> {
        let size = p
            .size()
            .ok_or_else(|| err(path, "a string cannot fill an fcan field"))?;
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
        let unsigned = u64::from_le_bytes(b);
        let v = match p {
            Primitive::Bool => match unsigned {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                x => return Err(err(path, format!("bool byte {x} is neither 0 nor 1"))),
            },
            Primitive::Float32 => Value::Float(f64::from(f32::from_bits(unsigned as u32))),
            Primitive::Float64 => Value::Float(f64::from_bits(unsigned)),
            _ => {
                let signed = matches!(
                    p,
                    Primitive::Int8 | Primitive::Int16 | Primitive::Int32 | Primitive::Int64
                );
                let x: i128 = if signed {
                    let shift = 64 - 8 * size as u32;
                    i128::from(((unsigned << shift) as i64) >> shift)
                } else {
                    i128::from(unsigned)
                };
                let (lo, hi) = fcan_range(ty);
                if x < lo || x > hi {
                    return Err(err(
                        path,
                        format!("{x} does not fit the fcan field's {}", ty.name()),
                    ));
                }
                return Ok(match ty {
                    ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64 => {
                        Value::Int(x as i64)
                    }
                    _ => Value::UInt(x as u64),
                });
            }
        };
        match (ty, v) {
            (ScalarType::Bool, v @ Value::Bool(_)) => Ok(v),
            (ScalarType::F32, Value::Float(x))
                if x.is_finite() && x.abs() > f64::from(f32::MAX) =>
            {
                Err(err(path, format!("{x:e} does not fit an f32")))
            }
            (ScalarType::F32 | ScalarType::F64, v @ Value::Float(_)) => Ok(v),
            (ty, _) => Err(err(
                path,
                format!("{} does not pair with {}", p.msg_name(), ty.name()),
            )),
        }
    }

    /// Reads past a field no fcan field takes, checking only that the bytes are there.
    fn skip(
        &mut self,
        store: &Interfaces,
        rf: &RosField,
        path: &str,
        depth: usize,
    ) -> Result<(), CdrError> {
        if depth > MAX_DEPTH {
            return Err(err(path, "nested too deep"));
        }
        let count = match rf.shape {
            Shape::Single => 1,
            Shape::Array(n) => n,
            Shape::Sequence | Shape::BoundedSequence(_) => {
                let n = self.u32(path)?;
                if let Shape::BoundedSequence(bound) = rf.shape {
                    if n > bound {
                        return Err(err(path, format!("{n} elements; at most {bound}")));
                    }
                }
                // Every element takes at least one byte: a count beyond the bytes left
                // is a lie, found before any loop runs.
                if n as usize > self.bytes.len() - self.at {
                    return Err(err(
                        path,
                        format!("{n} elements in {} bytes", self.bytes.len() - self.at),
                    ));
                }
                n
            }
        };
        for _ in 0..count {
            match &rf.base {
                BaseType::Primitive(Primitive::String) | BaseType::BoundedString(_) => {
                    let len = self.u32(path)? as usize;
                    self.take(len, path)?;
                }
                BaseType::Primitive(p) => {
                    let size = p.size().unwrap_or(1);
                    self.align(size, path)?;
                    self.take(size, path)?;
                }
                BaseType::Nested(n) => {
                    let nested = store
                        .message(n)
                        .ok_or_else(|| err(path, format!("`{n}` is not a known type")))?;
                    for f in nested.wire_fields() {
                        self.skip(store, &f, &join(path, &f.name), depth + 1)?;
                    }
                }
            }
        }
        Ok(())
    }
}
