//! fcan values in ROS 2's wire encoding: CDR (XCDR1, plain, little-endian out; both
//! byte orders in), driven by a [`Binding`] from [`crate::mapping`].
//!
//! [`encode`] writes a whole ROS message from an fcan message value: every ROS field,
//! the bound ones from their fcan field, the rest zero. [`decode`] reads a whole ROS
//! message and returns the fcan message value, refusing what the fcan fields cannot
//! hold: a number out of range, a sequence of the wrong length.
//!
//! The bytes are [`crate::dynamic`]'s, the crate's one CDR codec: this module only
//! pairs an fcan value with the ROS message's value tree, so alignment, byte order,
//! length checks and bounds live (and are fuzzed) in one place. Decoding therefore
//! checks the whole message, the fields no fcan field takes included (a bool byte
//! other than 0 or 1, a string that is not UTF-8, a truncated or lying buffer), and
//! nothing in the input decides how much is allocated.

use fcan_core::ir::Field;
use fcan_core::types::ScalarType;
use fcan_value::Value;

use crate::dynamic::{self, err, At, Reader, RosValue, Writer};
pub use crate::dynamic::{CdrError, CDR_LE};
use crate::idl::{BaseType, Primitive, RosField, Shape};
use crate::interfaces::Interfaces;
use crate::mapping::{fcan_range, Binding, Slot};

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
    let values = fields
        .iter()
        .map(|f| {
            value
                .field(&f.name)
                .ok_or_else(|| err(&At::Field(&At::Root, &f.name), "missing in the fcan value"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut w = Writer::new();
    walk(store, binding, &mut |rf, slot, at, depth| {
        let v = match slot {
            Some(i) => from_fcan(rf, &fields[i], values[i], at)?,
            None => dynamic::zero_field(store, rf, at, depth)?,
        };
        w.field(store, rf, &v, at, depth)
    })?;
    Ok(w.finish())
}

/// What [`walk`] calls for each ROS field that is not a nested message with slots of
/// its own: the field, the fcan field bound to it (`None`: no fcan field, zero), where
/// it is, and its message's nesting depth.
type Visit<'v> = dyn FnMut(&RosField, Option<usize>, &At, usize) -> Result<(), CdrError> + 'v;

/// Visits the fields of `binding`'s message in wire order, going into the nested
/// messages that have slots of their own: [`encode`] and [`decode`] walk a binding
/// alike, so an error names the first field at fault in wire order.
fn walk(store: &Interfaces, binding: &Binding, visit: &mut Visit) -> Result<(), CdrError> {
    walk_message(store, &binding.message, &binding.slots, &At::Root, 0, visit)
}

/// [`walk`] through message `ty` at `at`, nesting `depth`, filled by `slots`.
fn walk_message(
    store: &Interfaces,
    ty: &str,
    slots: &[Slot],
    at: &At,
    depth: usize,
    visit: &mut Visit,
) -> Result<(), CdrError> {
    dynamic::check_depth(at, depth)?;
    for (k, rf) in dynamic::message(store, ty, at)?
        .wire_fields()
        .iter()
        .enumerate()
    {
        let here = At::Field(at, &rf.name);
        match slots.get(k).unwrap_or(&Slot::Zero) {
            Slot::Zero => visit(rf, None, &here, depth)?,
            Slot::Field(i) => visit(rf, Some(*i), &here, depth)?,
            Slot::Nested(inner) => {
                let BaseType::Nested(n) = &rf.base else {
                    return Err(err(&here, "not a message"));
                };
                walk_message(store, n, inner, &here, depth + 1, visit)?;
            }
        }
    }
    Ok(())
}

/// The ROS value of ROS field `rf` from fcan field `f`'s value: the shapes must pair
/// (the binding saw to that); the encoder checks each number against its ROS type.
fn from_fcan(rf: &RosField, f: &Field, v: &Value, at: &At) -> Result<RosValue, CdrError> {
    let BaseType::Primitive(p) = rf.base else {
        return Err(err(at, "an fcan value cannot fill it"));
    };
    let scalar = |v: &Value, at: &At| match v {
        Value::Bool(b) => Ok(RosValue::Bool(*b)),
        Value::Int(x) => Ok(RosValue::Int(*x)),
        Value::UInt(x) => Ok(RosValue::UInt(*x)),
        Value::Float(x) => Ok(RosValue::Float(*x)),
        _ => Err(err(at, format!("{v:?} cannot fill {}", p.msg_name()))),
    };
    match (rf.shape, f.len) {
        (Shape::Single, None) => scalar(v, at),
        (Shape::Single, Some(_)) | (_, None) => Err(err(at, "shape mismatch")),
        (_, Some(n)) => {
            let Value::Array(items) = v else {
                return Err(err(at, "expected an array"));
            };
            if items.len() != n as usize {
                return Err(err(
                    at,
                    format!("{} values, the fcan field has {n}", items.len()),
                ));
            }
            let items = items.iter().enumerate();
            items
                .map(|(k, item)| scalar(item, &At::Index(at, k)))
                .collect::<Result<_, _>>()
                .map(RosValue::Seq)
        }
    }
}

/// The reply a service gives when the call failed (the node refused, the master timed
/// out): every field zero except a top-level `string message` no fcan field fills,
/// which carries `why`, as `std_srvs/srv/SetBool` and `Trigger` answer `success: false`
/// with a message. `None` when the response type has no such field.
///
/// ```
/// use fcan_core::ir::{Field, Ros};
/// use fcan_core::types::ScalarType;
/// use fcan_ros2::mapping::{bind_topic, Flow};
/// let mut store = fcan_ros2::Interfaces::bundled();
/// let fields = [Field { name: "ok".into(), ty: ScalarType::Bool, len: None }];
/// let ros = Ros { ty: "std_msgs/msg/Bool".into(), map: vec![("ok".into(), "data".into())] };
/// let b = bind_topic(&mut store, &ros, &fields, Flow::ToRos).unwrap();
/// // std_msgs/Bool has no `message`: no refusal to give.
/// assert!(fcan_ros2::cdr::encode_refusal(&store, &b, "busy").is_none());
/// // std_srvs/SetBool's response has one: `success` false, `message` the reason.
/// let types = fcan_ros2::mapping::map_schema(&fcan_ros2::example_schema(), &mut store);
/// let set = types.service("Solenoid", "set").unwrap();
/// let bytes = fcan_ros2::cdr::encode_refusal(&store, &set.response, "busy").unwrap();
/// assert_eq!(bytes, [0, 1, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, b'b', b'u', b's', b'y', 0]);
/// ```
pub fn encode_refusal(store: &Interfaces, binding: &Binding, why: &str) -> Option<Vec<u8>> {
    let msg = store.message(&binding.message)?;
    let at = msg.wire_fields().iter().position(|f| {
        f.name == "message"
            && f.base == BaseType::Primitive(Primitive::String)
            && f.shape == Shape::Single
    })?;
    if binding.slots.get(at) != Some(&Slot::Zero) {
        return None;
    }
    let RosValue::Msg(mut values) = dynamic::zero(store, &binding.message).ok()? else {
        return None;
    };
    // A ROS string ends at its first NUL, so the codec refuses one inside; the reason
    // comes from the node and the master, and is worth more than a lost reply.
    values[at] = RosValue::Str(why.replace('\0', "\u{fffd}"));
    dynamic::encode(store, &binding.message, &RosValue::Msg(values)).ok()
}

/// Decodes a ROS message (with its encapsulation header) bound by `binding` into the
/// fcan message value of `fields` ([`Value::Struct`], fields in schema order).
///
/// ```
/// use fcan_core::ir::{Field, Ros};
/// use fcan_core::types::ScalarType;
/// use fcan_value::Value;
/// use fcan_ros2::mapping::{bind_topic, Flow};
/// let mut store = fcan_ros2::Interfaces::bundled();
/// let fields = [Field { name: "level".into(), ty: ScalarType::U8, len: None }];
/// let ros = Ros { ty: "std_msgs/msg/Int32".into(), map: vec![("level".into(), "data".into())] };
/// let b = bind_topic(&mut store, &ros, &fields, Flow::FromRos).unwrap();
/// let v = fcan_ros2::cdr::decode(&store, &b, &fields, &[0, 1, 0, 0, 200, 0, 0, 0]).unwrap();
/// assert_eq!(v.field("level"), Some(&Value::UInt(200)));
/// // An int32 the u8 cannot hold is refused, naming the ROS field.
/// let e = fcan_ros2::cdr::decode(&store, &b, &fields, &[0, 1, 0, 0, 0, 1, 0, 0]).unwrap_err();
/// assert_eq!(e.to_string(), "data: 256 does not fit the fcan field's u8");
/// ```
pub fn decode(
    store: &Interfaces,
    binding: &Binding,
    fields: &[Field],
    bytes: &[u8],
) -> Result<Value, CdrError> {
    let mut r = Reader::new(bytes)?;
    let mut out: Vec<Option<Value>> = vec![None; fields.len()];
    walk(store, binding, &mut |rf, slot, at, depth| {
        // Fields no fcan field takes are read all the same: the whole message is
        // checked, and the next field starts where this one ends.
        let v = r.field(store, rf, at, depth)?;
        if let Some(i) = slot {
            out[i] = Some(to_fcan(rf, &fields[i], &v, at)?);
        }
        Ok(())
    })?;
    let mut values = Vec::with_capacity(fields.len());
    for (f, v) in fields.iter().zip(out) {
        let v = v.ok_or_else(|| {
            err(
                &At::Field(&At::Root, &f.name),
                "no ROS field fills this fcan field",
            )
        })?;
        values.push((f.name.as_str().into(), v));
    }
    Ok(Value::Struct(values))
}

/// fcan field `f`'s value from the decoded value of ROS field `rf`.
fn to_fcan(rf: &RosField, f: &Field, v: &RosValue, at: &At) -> Result<Value, CdrError> {
    let BaseType::Primitive(p) = rf.base else {
        return Err(err(at, "not a primitive"));
    };
    let items = match (rf.shape, f.len, v) {
        (Shape::Single, None, v) => return scalar(p, f.ty, v, at),
        (Shape::Array(m), Some(n), RosValue::Seq(items)) if m == n => items,
        (Shape::Sequence | Shape::BoundedSequence(_), Some(n), RosValue::Seq(items)) => {
            if items.len() != n as usize {
                return Err(err(
                    at,
                    format!("{} values; the fcan field takes exactly {n}", items.len()),
                ));
            }
            items
        }
        _ => return Err(err(at, "shape mismatch")),
    };
    let items = items.iter().enumerate();
    items
        .map(|(k, item)| scalar(p, f.ty, item, &At::Index(at, k)))
        .collect::<Result<_, _>>()
        .map(Value::Array)
}

/// One decoded ROS primitive (of type `p`) as the fcan type `ty`, refusing what does
/// not fit.
fn scalar(p: Primitive, ty: ScalarType, v: &RosValue, at: &At) -> Result<Value, CdrError> {
    let int = match (ty, v) {
        (ScalarType::Bool, RosValue::Bool(b)) => return Ok(Value::Bool(*b)),
        (ScalarType::F32, RosValue::Float(x)) if x.is_finite() && x.abs() > f64::from(f32::MAX) => {
            return Err(err(at, format!("{x:e} does not fit an f32")))
        }
        // An fcan f32 is held as its shortest decimal (fcan-value's one number rule), the
        // value the node holds, whatever width the ROS side sent.
        (ScalarType::F32, RosValue::Float(x)) => {
            return Ok(Value::Float(fcan_value::f32_to_f64(*x as f32)))
        }
        (ScalarType::F64, RosValue::Float(x)) => return Ok(Value::Float(*x)),
        (ScalarType::Bool | ScalarType::F32 | ScalarType::F64, _) => None,
        (_, RosValue::Int(x)) => Some(i128::from(*x)),
        (_, RosValue::UInt(x)) => Some(i128::from(*x)),
        _ => None,
    };
    let Some(x) = int else {
        return Err(err(
            at,
            format!("{} does not pair with {}", p.msg_name(), ty.name()),
        ));
    };
    let (lo, hi) = fcan_range(ty);
    if x < lo || x > hi {
        return Err(err(
            at,
            format!("{x} does not fit the fcan field's {}", ty.name()),
        ));
    }
    Ok(match ty {
        ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64 => {
            Value::Int(x as i64)
        }
        _ => Value::UInt(x as u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::map_schema;

    /// The example schema's `Solenoid.set` (`std_srvs/srv/SetBool`): the request's
    /// `data` and the response's `success` are bound, the response's `message` is not.
    fn set() -> (
        Interfaces,
        crate::mapping::ServiceType,
        fcan_core::ir::Service,
    ) {
        let schema = crate::example_schema();
        let mut store = Interfaces::bundled();
        let types = map_schema(&schema, &mut store);
        let st = types.service("Solenoid", "set").unwrap().clone();
        (store, st, schema.types[0].services[0].clone())
    }

    #[test]
    fn a_refusal_keeps_a_reason_with_a_nul() {
        let (store, st, _) = set();
        let bytes = encode_refusal(&store, &st.response, "no\0de").unwrap();
        let v = dynamic::decode(&store, &st.response.message, &bytes).unwrap();
        assert_eq!(
            v,
            RosValue::Msg(vec![
                RosValue::Bool(false),
                RosValue::Str("no\u{fffd}de".into())
            ])
        );
    }

    #[test]
    fn fields_no_fcan_field_takes_are_checked_too() {
        let (store, st, decl) = set();
        let resp = |message: &[u8]| {
            let mut b = CDR_LE.to_vec();
            b.extend([1, 0, 0, 0]);
            b.extend((message.len() as u32).to_le_bytes());
            b.extend(message);
            decode(&store, &st.response, &decl.response, &b)
        };
        let ok = resp(b"fine\0").unwrap();
        assert_eq!(ok.field("success"), Some(&Value::Bool(true)));
        let e = resp(b"fine").unwrap_err();
        assert_eq!(e.to_string(), "message: a string without its NUL");
        let e = resp(b"\xc3\0").unwrap_err();
        assert_eq!(e.to_string(), "message: not UTF-8");
    }

    #[test]
    fn encoding_refuses_what_the_ros_field_cannot_hold() {
        let (store, st, decl) = set();
        let value = |v: Value| Value::Struct(vec![("on".into(), v)]);
        let e = encode(&store, &st.request, &decl.request, &value(Value::UInt(1))).unwrap_err();
        assert_eq!(e.to_string(), "data: an integer cannot fill bool");
        let e = encode(&store, &st.request, &decl.request, &Value::Struct(vec![])).unwrap_err();
        assert_eq!(e.to_string(), "on: missing in the fcan value");
        let e = encode(
            &store,
            &st.request,
            &decl.request,
            &value(Value::Array(vec![])),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "data: Array([]) cannot fill bool");
    }
}
