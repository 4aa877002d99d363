//! A node's parameters as its ROS 2 parameters, sans I/O: names, types, values and
//! descriptors in `rcl_interfaces` terms, and the requests of the six parameter
//! services answered from the registry ([`list`], [`descriptor`], [`type_of`]) or turned
//! into master calls ([`to_value`], [`from_value`]).
//!
//! The fcan parameter `motor_driver1.motor0.velocity.kp` is the parameter
//! `motor0.velocity.kp` of the ROS node `/motor_driver1`; its range is the descriptor's
//! `floating_point_range` or `integer_range`; a value the node refuses is a set result
//! with `successful: false` and the node's reason. A set that succeeds is announced on
//! `/parameter_events` ([`event`]), where rclcpp's `ParameterEventHandler` and
//! `ros2 param` watchers look.

use std::time::SystemTime;

use fcan_core::ir::Param;
use fcan_core::types::{Scalar, ScalarType};
use fcan_master::engine::check_param_value;
use fcan_master::registry::ParamInfo;
use fcan_master::value::{pack_param, Value};
use fcan_ros2::dynamic::{ros_time, RosValue};

use crate::dds::Qos;

/// The topic of parameter changes.
pub const EVENTS_TOPIC: &str = "/parameter_events";

/// Its type.
pub const EVENT_TYPE: &str = "rcl_interfaces/msg/ParameterEvent";

/// rcl's `/parameter_events` QoS: reliable, volatile, keep last 1000.
pub const EVENTS_QOS: Qos = Qos {
    reliable: true,
    depth: 1000,
    transient_local: false,
};

/// The parameter services of a ROS 2 node: (service name under the node, type).
pub const SERVICES: [(&str, &str); 6] = [
    (
        "describe_parameters",
        "rcl_interfaces/srv/DescribeParameters",
    ),
    (
        "get_parameter_types",
        "rcl_interfaces/srv/GetParameterTypes",
    ),
    ("get_parameters", "rcl_interfaces/srv/GetParameters"),
    ("list_parameters", "rcl_interfaces/srv/ListParameters"),
    ("set_parameters", "rcl_interfaces/srv/SetParameters"),
    (
        "set_parameters_atomically",
        "rcl_interfaces/srv/SetParametersAtomically",
    ),
];

/// `rcl_interfaces/msg/ParameterType` values.
pub mod kind {
    /// No such parameter.
    pub const NOT_SET: u8 = 0;
    /// `bool`.
    pub const BOOL: u8 = 1;
    /// `int64`.
    pub const INTEGER: u8 = 2;
    /// `float64`.
    pub const DOUBLE: u8 = 3;
    /// `bool[]`.
    pub const BOOL_ARRAY: u8 = 6;
    /// `int64[]`.
    pub const INTEGER_ARRAY: u8 = 7;
    /// `float64[]`.
    pub const DOUBLE_ARRAY: u8 = 8;
}

/// One node's parameters under their ROS names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeParams {
    /// (ROS name `motor0.velocity.kp`, fcan name `motor_driver1.motor0.velocity.kp`, declaration).
    pub params: Vec<(String, String, Param)>,
}

impl NodeParams {
    /// The parameters of node `node_name` among `all`.
    pub fn of(node_name: &str, all: &[ParamInfo]) -> NodeParams {
        let prefix = format!("{node_name}.");
        NodeParams {
            params: all
                .iter()
                .filter_map(|p| {
                    p.name
                        .strip_prefix(&prefix)
                        .map(|ros| (ros.to_string(), p.name.clone(), p.decl.clone()))
                })
                .collect(),
        }
    }

    /// A parameter by its ROS name: (fcan name, declaration).
    pub fn get(&self, ros_name: &str) -> Option<(&str, &Param)> {
        self.params
            .iter()
            .find(|(r, _, _)| r == ros_name)
            .map(|(_, f, d)| (f.as_str(), d))
    }
}

fn is_float(t: ScalarType) -> bool {
    matches!(t, ScalarType::F32 | ScalarType::F64)
}

/// The `ParameterType` of a declaration.
pub fn type_of(d: &Param) -> u8 {
    match (d.ty, d.len.is_some()) {
        (ScalarType::Bool, false) => kind::BOOL,
        (ScalarType::Bool, true) => kind::BOOL_ARRAY,
        (t, false) if is_float(t) => kind::DOUBLE,
        (t, true) if is_float(t) => kind::DOUBLE_ARRAY,
        (_, false) => kind::INTEGER,
        (_, true) => kind::INTEGER_ARRAY,
    }
}

/// A `ParameterValue` with `type` and one member set (index into its fields).
fn parameter_value(ty: u8, slot: Option<(usize, RosValue)>) -> RosValue {
    let mut v = vec![
        RosValue::UInt(u64::from(ty)),
        RosValue::Bool(false),
        RosValue::Int(0),
        RosValue::Float(0.0),
        RosValue::Str(String::new()),
        RosValue::Seq(vec![]),
        RosValue::Seq(vec![]),
        RosValue::Seq(vec![]),
        RosValue::Seq(vec![]),
        RosValue::Seq(vec![]),
    ];
    if let Some((i, x)) = slot {
        v[i] = x;
    }
    RosValue::Msg(v)
}

/// `ParameterValue` of type NOT_SET (an unknown name, or a value ROS cannot hold).
pub fn not_set() -> RosValue {
    parameter_value(kind::NOT_SET, None)
}

fn int_of(v: &Value) -> Option<RosValue> {
    match v {
        Value::Int(i) => Some(RosValue::Int(*i)),
        Value::UInt(u) => i64::try_from(*u).ok().map(RosValue::Int),
        _ => None,
    }
}

fn scalar_of(ty: ScalarType, v: &Value) -> Option<RosValue> {
    match (ty, v) {
        (ScalarType::Bool, Value::Bool(b)) => Some(RosValue::Bool(*b)),
        (t, Value::Float(x)) if is_float(t) => Some(RosValue::Float(*x)),
        (t, v) if !is_float(t) && t != ScalarType::Bool => int_of(v),
        _ => None,
    }
}

/// The `ParameterValue` of an fcan parameter value (NOT_SET if ROS cannot hold it: a
/// `u64` above `i64::MAX`).
pub fn to_value(d: &Param, v: &Value) -> RosValue {
    let ty = type_of(d);
    // ParameterValue's members: bool 1, integer 2, double 3, bool[] 6, integer[] 7, double[] 8.
    let slot = match ty {
        kind::BOOL => 1,
        kind::INTEGER => 2,
        kind::DOUBLE => 3,
        kind::BOOL_ARRAY => 6,
        kind::INTEGER_ARRAY => 7,
        _ => 8,
    };
    let x = match (d.len, v) {
        (None, v) => scalar_of(d.ty, v),
        (Some(_), Value::Array(items)) => items
            .iter()
            .map(|i| scalar_of(d.ty, i))
            .collect::<Option<Vec<_>>>()
            .map(RosValue::Seq),
        _ => None,
    };
    match x {
        Some(x) => parameter_value(ty, Some((slot, x))),
        None => not_set(),
    }
}

/// The fcan value of a `ParameterValue` for declaration `d`, or why it cannot be one
/// (its type differs; the master and the node check range and bounds).
pub fn from_value(d: &Param, pv: &RosValue) -> Result<Value, String> {
    let RosValue::Msg(f) = pv else {
        return Err("not a ParameterValue".into());
    };
    let want = type_of(d);
    let got = match f.first() {
        Some(RosValue::UInt(t)) => *t as u8,
        _ => return Err("not a ParameterValue".into()),
    };
    if got != want {
        return Err(format!(
            "the parameter is {} (ParameterType {want}), the value ParameterType {got}",
            describe_type(d)
        ));
    }
    let one = |x: &RosValue| -> Result<Value, String> {
        match (d.ty, x) {
            (ScalarType::Bool, RosValue::Bool(b)) => Ok(Value::Bool(*b)),
            (t, RosValue::Float(v)) if is_float(t) => Ok(Value::Float(*v)),
            (t, RosValue::Int(i)) if t.name().starts_with('i') => Ok(Value::Int(*i)),
            (_, RosValue::Int(i)) => u64::try_from(*i)
                .map(Value::UInt)
                .map_err(|_| format!("{i} is negative; the parameter is {}", d.ty.name())),
            _ => Err("a value of another type".into()),
        }
    };
    let slot = match want {
        kind::BOOL => 1,
        kind::INTEGER => 2,
        kind::DOUBLE => 3,
        kind::BOOL_ARRAY => 6,
        kind::INTEGER_ARRAY => 7,
        _ => 8,
    };
    let x = f.get(slot).ok_or("not a ParameterValue")?;
    match d.len {
        None => one(x),
        Some(_) => x
            .as_seq()
            .ok_or_else(|| "not a sequence".to_string())?
            .iter()
            .map(one)
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
    }
}

/// The fcan value of a `ParameterValue` checked as the master and the node will check
/// it (type, element count, range), so a set of several parameters can be refused
/// before any is written.
pub fn checked_value(d: &Param, pv: &RosValue) -> Result<Value, String> {
    let v = from_value(d, pv)?;
    let bytes = pack_param(d.ty, d.len, &v).map_err(|e| e.to_string())?;
    check_param_value(d, &bytes).map_err(|e| e.to_string())?;
    Ok(v)
}

/// `rcl_interfaces/msg/Parameter`: a name and its `ParameterValue`.
pub fn parameter(ros_name: &str, value: RosValue) -> RosValue {
    RosValue::Msg(vec![RosValue::Str(ros_name.to_string()), value])
}

/// The `rcl_interfaces/msg/ParameterEvent` saying that the parameters `changed`
/// ([`parameter`]s) of ROS node `node` (`motor_driver1`) took new values at `stamp`.
pub fn event(node: &str, changed: Vec<RosValue>, stamp: SystemTime) -> RosValue {
    RosValue::Msg(vec![
        ros_time(stamp),
        RosValue::Str(format!("/{}", node.trim_start_matches('/'))),
        RosValue::Seq(vec![]),
        RosValue::Seq(changed),
        RosValue::Seq(vec![]),
    ])
}

fn describe_type(d: &Param) -> String {
    match d.len {
        None => d.ty.name().to_string(),
        Some(n) => format!("{}[{n}]", d.ty.name()),
    }
}

fn bound_f(s: &Option<Scalar>) -> Option<f64> {
    s.as_ref().and_then(|s| Value::from_scalar(*s).as_f64())
}

/// The smallest and largest value of type `t` (fcan-core's saturation rule).
fn type_limits(t: ScalarType) -> (f64, f64) {
    let lo = Scalar::F64(f64::MIN).saturate(t).as_f64();
    let hi = Scalar::F64(f64::MAX).saturate(t).as_f64();
    (lo, hi.min(i64::MAX as f64))
}

/// The `ParameterDescriptor` of a parameter: its type, a description, its range.
pub fn descriptor(ros_name: &str, d: &Param) -> RosValue {
    let (lo, hi) = (bound_f(&d.min), bound_f(&d.max));
    let (tlo, thi) = type_limits(d.ty);
    let mut float_range = vec![];
    let mut int_range = vec![];
    if (lo.is_some() || hi.is_some()) && d.len.is_none() {
        let (from, to) = (lo.unwrap_or(tlo), hi.unwrap_or(thi));
        if is_float(d.ty) {
            float_range.push(RosValue::Msg(vec![
                RosValue::Float(from),
                RosValue::Float(to),
                RosValue::Float(0.0),
            ]));
        } else if d.ty != ScalarType::Bool {
            int_range.push(RosValue::Msg(vec![
                RosValue::Int(from as i64),
                RosValue::Int(to as i64),
                RosValue::UInt(0),
            ]));
        }
    }
    let mut constraints = String::new();
    if let Some(n) = d.len {
        constraints = format!("exactly {n} elements");
        if lo.is_some() || hi.is_some() {
            constraints.push_str(&format!(
                ", each in [{}, {}]",
                lo.map_or("-".into(), |x| x.to_string()),
                hi.map_or("-".into(), |x| x.to_string())
            ));
        }
    }
    RosValue::Msg(vec![
        RosValue::Str(ros_name.to_string()),
        RosValue::UInt(u64::from(type_of(d))),
        RosValue::Str(format!("fcan parameter, {} on the node", describe_type(d))),
        RosValue::Str(constraints),
        RosValue::Bool(false),
        RosValue::Bool(false),
        RosValue::Seq(float_range),
        RosValue::Seq(int_range),
    ])
}

/// The descriptor of a name the node does not have: its type NOT_SET.
pub fn unknown_descriptor(ros_name: &str) -> RosValue {
    RosValue::Msg(vec![
        RosValue::Str(ros_name.to_string()),
        RosValue::UInt(u64::from(kind::NOT_SET)),
        RosValue::Str(String::new()),
        RosValue::Str(String::new()),
        RosValue::Bool(false),
        RosValue::Bool(false),
        RosValue::Seq(vec![]),
        RosValue::Seq(vec![]),
    ])
}

/// `ListParametersResult` for `prefixes` and `depth` (0: all levels), as rclcpp answers.
pub fn list(p: &NodeParams, prefixes: &[String], depth: u64) -> RosValue {
    let mut names = Vec::new();
    let mut found_prefixes: Vec<String> = Vec::new();
    for (name, _, _) in &p.params {
        let rest = if prefixes.is_empty() {
            Some(name.as_str())
        } else {
            prefixes.iter().find_map(|pre| {
                if name == pre {
                    Some("")
                } else {
                    name.strip_prefix(pre.as_str())
                        .and_then(|r| r.strip_prefix('.'))
                }
            })
        };
        let Some(rest) = rest else { continue };
        let levels = rest.matches('.').count() as u64;
        if depth != 0 && levels >= depth {
            continue;
        }
        names.push(RosValue::Str(name.clone()));
        if let Some((pre, _)) = name.rsplit_once('.') {
            if !found_prefixes.iter().any(|x| x == pre) {
                found_prefixes.push(pre.to_string());
            }
        }
    }
    RosValue::Msg(vec![
        RosValue::Seq(names),
        RosValue::Seq(found_prefixes.into_iter().map(RosValue::Str).collect()),
    ])
}

/// `SetParametersResult`.
pub fn set_result(result: Result<(), String>) -> RosValue {
    match result {
        Ok(()) => RosValue::Msg(vec![RosValue::Bool(true), RosValue::Str(String::new())]),
        Err(why) => RosValue::Msg(vec![RosValue::Bool(false), RosValue::Str(why)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(ty: ScalarType, len: Option<u32>, min: Option<Scalar>, max: Option<Scalar>) -> Param {
        Param {
            name: "p".into(),
            ty,
            len,
            default: Scalar::U8(0),
            min,
            max,
        }
    }

    #[test]
    fn values_cross_both_ways_and_types_must_agree() {
        let f = decl(ScalarType::F32, None, None, None);
        let pv = to_value(&f, &Value::Float(0.5));
        assert_eq!(from_value(&f, &pv), Ok(Value::Float(0.5)));
        let u = decl(ScalarType::U16, None, None, None);
        let pv = to_value(&u, &Value::UInt(7));
        assert_eq!(from_value(&u, &pv), Ok(Value::UInt(7)));
        assert!(from_value(&f, &pv).unwrap_err().contains("ParameterType 2"));
        let neg = parameter_value(kind::INTEGER, Some((2, RosValue::Int(-1))));
        assert!(from_value(&u, &neg).unwrap_err().contains("negative"));
        let a = decl(ScalarType::Bool, Some(2), None, None);
        let v = Value::Array(vec![Value::Bool(true), Value::Bool(false)]);
        assert_eq!(from_value(&a, &to_value(&a, &v)), Ok(v));
        let big = decl(ScalarType::U64, None, None, None);
        assert_eq!(to_value(&big, &Value::UInt(u64::MAX)), not_set());
    }

    #[test]
    fn a_value_out_of_range_is_refused_before_it_is_written() {
        let d = decl(
            ScalarType::F32,
            None,
            Some(Scalar::F32(0.0)),
            Some(Scalar::F32(10.0)),
        );
        let ok = to_value(&d, &Value::Float(2.5));
        assert_eq!(checked_value(&d, &ok), Ok(Value::Float(2.5)));
        let high = parameter_value(kind::DOUBLE, Some((3, RosValue::Float(11.0))));
        assert!(checked_value(&d, &high)
            .unwrap_err()
            .contains("above its max"));
        let short = decl(ScalarType::I8, None, None, None);
        let wide = parameter_value(kind::INTEGER, Some((2, RosValue::Int(300))));
        assert!(checked_value(&short, &wide).is_err());
    }

    #[test]
    fn a_parameter_event_names_the_node_and_what_changed() {
        let store = fcan_ros2::Interfaces::bundled();
        let d = decl(ScalarType::F32, None, None, None);
        let e = event(
            "motor_driver1",
            vec![parameter(
                "motor0.velocity.kp",
                to_value(&d, &Value::Float(0.25)),
            )],
            SystemTime::UNIX_EPOCH,
        );
        let bytes = fcan_ros2::dynamic::encode(&store, EVENT_TYPE, &e).unwrap();
        let RosValue::Msg(f) = fcan_ros2::dynamic::decode(&store, EVENT_TYPE, &bytes).unwrap()
        else {
            panic!()
        };
        assert_eq!(f[1].as_str(), Some("/motor_driver1"));
        assert!(f[2].as_seq().unwrap().is_empty());
        let changed = f[3].as_seq().unwrap();
        assert_eq!(changed.len(), 1);
        let RosValue::Msg(p) = &changed[0] else {
            panic!()
        };
        assert_eq!(p[0].as_str(), Some("motor0.velocity.kp"));
        assert_eq!(from_value(&d, &p[1]), Ok(Value::Float(0.25)));
    }

    #[test]
    fn listing_follows_prefixes_and_depth() {
        let p = NodeParams {
            params: ["motor0.velocity.kp", "motor0.invert", "motor1.invert"]
                .iter()
                .map(|n| {
                    (
                        n.to_string(),
                        format!("md1.{n}"),
                        decl(ScalarType::Bool, None, None, None),
                    )
                })
                .collect(),
        };
        let names = |v: RosValue| -> Vec<String> {
            let RosValue::Msg(f) = v else { panic!() };
            f[0].as_seq()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(list(&p, &[], 0)).len(), 3);
        assert_eq!(
            names(list(&p, &["motor0".into()], 0)),
            ["motor0.velocity.kp", "motor0.invert"]
        );
        assert_eq!(names(list(&p, &["motor0".into()], 1)), ["motor0.invert"]);
        assert!(names(list(&p, &[], 1)).is_empty());
    }
}
