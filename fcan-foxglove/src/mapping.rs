//! What Foxglove is told, sans I/O: the registry's topics, services and parameters as
//! channel, service and parameter descriptions, the value conversions both ways, wall
//! time for samples, and which nodes to start or stop serving. Everything here is a pure
//! function of its inputs; [`crate::FoxgloveServer`] is the shell that hands the results
//! to the `foxglove` crate's WebSocket server.
//!
//! | fcan | Foxglove |
//! |---|---|
//! | topic `/<node>/<ns>/<topic>` (s2m and m2s) | channel of the same name, message encoding [`MESSAGE_ENCODING`], schema encoding [`SCHEMA_ENCODING`], schema `fcan.<node>.<ns>.<topic>` ([`channel_spec`]) |
//! | sample | message: [`ViewerJson`] of the value, log time = the sample's arrival as Unix nanoseconds ([`WallClock`]) |
//! | service `/<node>/<ns>/<service>` | service of the same name, JSON request and response with JSON Schemas ([`service_spec`]) |
//! | parameter `<node>.<ns>.<param>` | parameter of the same name ([`to_parameter`], [`from_parameter`]); its bounds as read-only `<name>/min`, `<name>/max` ([`bound_parameters`]) |

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use fcan_core::ir::{Field, Param};
use fcan_core::msg::DataDirection;
use fcan_core::types::{Scalar, ScalarType};
use fcan_master::json_schema::{
    message_schema_text, value_from_viewer_json, ViewerJson, MAX_SAFE_INTEGER,
};
use fcan_master::registry::{ParamInfo, Registry, ServiceInfo, TopicInfo};
use fcan_master::value::Value;
use foxglove::websocket::{Parameter, ParameterType, ParameterValue};

/// The message encoding of every channel, service request and response, and the only
/// encoding accepted from a client.
pub const MESSAGE_ENCODING: &str = "json";

/// The schema encoding of every channel and service schema.
pub const SCHEMA_ENCODING: &str = "jsonschema";

/// The suffix of a parameter's read-only lower bound (`<name>/min`). A registry
/// parameter name never holds a `/` (`fcan_core::numbering::param_path` turns them into
/// dots), so the bound parameters cannot collide with a real one.
pub const MIN_SUFFIX: &str = "/min";

/// The suffix of a parameter's read-only upper bound (`<name>/max`).
pub const MAX_SUFFIX: &str = "/max";

/// The schema name of a topic or service path: `/motor_driver1/motor0/feedback` →
/// `fcan.motor_driver1.motor0.feedback`.
///
/// One name per path rather than the topic's ROS type: the JSON carries fcan's field
/// names (a ROS map may rename them), and a schema name with two definitions (two
/// schemas that declare one ROS type differently) would confuse a viewer's schema table.
///
/// ```
/// assert_eq!(fcan_foxglove::mapping::schema_name("/md1/motor0/feedback"), "fcan.md1.motor0.feedback");
/// ```
pub fn schema_name(path: &str) -> String {
    let mut s = String::with_capacity(path.len() + 5);
    s.push_str("fcan");
    for part in path.split('/').filter(|p| !p.is_empty()) {
        s.push('.');
        s.push_str(part);
    }
    s
}

/// One channel as Foxglove is told about it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ChannelSpec {
    /// The topic: the registry's name, `/<node>/<ns>/<topic>`.
    pub topic: String,
    /// `fcan.<node>.<ns>.<topic>` ([`schema_name`]).
    pub schema_name: String,
    /// The JSON Schema, as JSON text, properties in the schema's field order.
    pub schema: Vec<u8>,
    /// Which way the topic flows: s2m (the node publishes, a client subscribes) or m2s (a
    /// client publishes; subscribers see every value the master publishes).
    pub dir: DataDirection,
    /// Channel metadata: `fcan.dir` (`s2m`/`m2s`), `fcan.period_us` (s2m),
    /// `fcan.ros_type` (when the schema names one).
    pub metadata: BTreeMap<String, String>,
}

/// The channel of a topic (either direction).
pub fn channel_spec(t: &TopicInfo) -> ChannelSpec {
    let mut metadata = BTreeMap::new();
    let dir = match t.dir {
        DataDirection::S2m => "s2m",
        DataDirection::M2s => "m2s",
    };
    metadata.insert("fcan.dir".to_string(), dir.to_string());
    if t.dir == DataDirection::S2m {
        metadata.insert("fcan.period_us".to_string(), t.period_us.to_string());
    }
    if let Some(ros) = &t.ros_type {
        metadata.insert("fcan.ros_type".to_string(), ros.clone());
    }
    ChannelSpec {
        topic: t.name.clone(),
        schema_name: schema_name(&t.name),
        schema: message_schema_text(&t.name, &t.fields).into_bytes(),
        dir: t.dir,
        metadata,
    }
}

/// One service as Foxglove is told about it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ServiceSpec {
    /// `/<node>/<ns>/<service>`.
    pub name: String,
    /// `fcan.<node>.<ns>.<service>`.
    pub schema_name: String,
    /// The request's schema name (`….Request`) and JSON Schema text.
    pub request: (String, Vec<u8>),
    /// The response's schema name (`….Response`) and JSON Schema text.
    pub response: (String, Vec<u8>),
}

/// The service description of a service.
pub fn service_spec(s: &ServiceInfo) -> ServiceSpec {
    let name = schema_name(&s.name);
    let part = |suffix: &str, fields: &[Field]| {
        let title = format!("{} {}", s.name, suffix.to_ascii_lowercase());
        (
            format!("{name}.{suffix}"),
            message_schema_text(&title, fields).into_bytes(),
        )
    };
    ServiceSpec {
        request: part("Request", &s.request),
        response: part("Response", &s.response),
        name: s.name.clone(),
        schema_name: name,
    }
}

/// Who publishes, subscribes to and provides what, for Foxglove's topic graph: a node
/// publishes its s2m topics, subscribes to its m2s topics and provides its services.
/// Keys are topic or service names, values node names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Graph {
    /// s2m topic → the node publishing it.
    pub published: BTreeMap<String, BTreeSet<String>>,
    /// m2s topic → the node subscribing to it.
    pub subscribed: BTreeMap<String, BTreeSet<String>>,
    /// service → the node providing it.
    pub services: BTreeMap<String, BTreeSet<String>>,
}

/// The topic graph of a registry.
pub fn graph(r: &Registry) -> Graph {
    let mut g = Graph::default();
    for t in &r.topics {
        let side = match t.dir {
            DataDirection::S2m => &mut g.published,
            DataDirection::M2s => &mut g.subscribed,
        };
        side.entry(t.name.clone())
            .or_default()
            .insert(node_of(&t.name).to_string());
    }
    for s in &r.services {
        g.services
            .entry(s.name.clone())
            .or_default()
            .insert(node_of(&s.name).to_string());
    }
    g
}

/// The node part of a topic or service path (`/md1/motor0/feedback` → `md1`).
fn node_of(path: &str) -> &str {
    path.trim_start_matches('/').split('/').next().unwrap_or("")
}

/// What a parameter name a client sends refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParamRef<'a> {
    /// The parameter itself (the registry's name).
    Value(&'a str),
    /// Its lower bound, read-only (`<name>/min`).
    Min(&'a str),
    /// Its upper bound, read-only (`<name>/max`).
    Max(&'a str),
}

/// Parses a client's parameter name.
///
/// ```
/// use fcan_foxglove::mapping::{param_ref, ParamRef};
/// assert_eq!(param_ref("md1.motor0.velocity.kp"), ParamRef::Value("md1.motor0.velocity.kp"));
/// assert_eq!(param_ref("md1.motor0.velocity.kp/max"), ParamRef::Max("md1.motor0.velocity.kp"));
/// ```
pub fn param_ref(name: &str) -> ParamRef<'_> {
    if let Some(p) = name.strip_suffix(MIN_SUFFIX) {
        ParamRef::Min(p)
    } else if let Some(p) = name.strip_suffix(MAX_SUFFIX) {
        ParamRef::Max(p)
    } else {
        ParamRef::Value(name)
    }
}

/// A parameter's value as Foxglove shows it. Integers beyond 2^53 are decimal strings
/// (as in [`ViewerJson`]), floats carry the `float64` type hint so that 1.0 stays a
/// float, an `f32` is written as its shortest decimal (0.05, not 0.05000000074505806:
/// the same `f32` when read back), a non-finite float as `NaN`, `inf` or `-inf`.
pub fn to_parameter(name: &str, ty: ScalarType, v: &Value) -> Parameter {
    let float = matches!(ty, ScalarType::F32 | ScalarType::F64);
    let r#type = match (float, v) {
        (true, Value::Array(_)) => Some(ParameterType::Float64Array),
        (true, _) => Some(ParameterType::Float64),
        _ => None,
    };
    Parameter {
        name: name.to_string(),
        r#type,
        value: Some(parameter_value(ty, v)),
    }
}

fn parameter_value(ty: ScalarType, v: &Value) -> ParameterValue {
    match v {
        Value::Bool(b) => ParameterValue::Bool(*b),
        Value::Int(i) if i.unsigned_abs() <= MAX_SAFE_INTEGER => ParameterValue::Integer(*i),
        Value::Int(i) => ParameterValue::String(i.to_string()),
        Value::UInt(u) if *u <= MAX_SAFE_INTEGER => ParameterValue::Integer(*u as i64),
        Value::UInt(u) => ParameterValue::String(u.to_string()),
        Value::Float(f) if f.is_nan() => ParameterValue::String("NaN".into()),
        Value::Float(f) if f.is_infinite() => {
            ParameterValue::String(if *f > 0.0 { "inf" } else { "-inf" }.into())
        }
        Value::Float(f) if ty == ScalarType::F32 => {
            // The shortest decimal that reads back as the same f32.
            let short = (*f as f32).to_string().parse::<f64>().unwrap_or(*f);
            ParameterValue::Float64(short)
        }
        Value::Float(f) => ParameterValue::Float64(*f),
        Value::Array(a) => {
            ParameterValue::Array(a.iter().map(|x| parameter_value(ty, x)).collect())
        }
        // A parameter is a scalar or a fixed array; a struct never comes from a node.
        Value::Struct(fields) => ParameterValue::Dict(
            fields
                .iter()
                .map(|(k, x)| (k.to_string(), parameter_value(ty, x)))
                .collect(),
        ),
    }
}

/// A client's parameter value as a [`Value`] for `MasterApi::param_set`, which then
/// checks it against the declaration (type, length, bounds) like any other write.
/// Accepts what [`to_parameter`] writes: numbers, booleans, decimal strings for big
/// integers, `NaN`/`inf` spellings, arrays of those.
pub fn from_parameter(v: &ParameterValue) -> Result<Value, String> {
    Ok(match v {
        ParameterValue::Bool(b) => Value::Bool(*b),
        ParameterValue::Integer(i) => Value::Int(*i),
        ParameterValue::Float64(f) => Value::Float(*f),
        ParameterValue::String(s) => {
            if let Ok(u) = s.trim().parse::<u64>() {
                Value::UInt(u)
            } else if let Ok(i) = s.trim().parse::<i64>() {
                Value::Int(i)
            } else {
                Value::from_json(&serde_json::Value::String(s.clone())).map_err(|_| {
                    format!(
                        "a text value is not a number: {:?}",
                        fcan_master::text::Untrusted(s).to_string()
                    )
                })?
            }
        }
        ParameterValue::Array(a) => {
            Value::Array(a.iter().map(from_parameter).collect::<Result<_, _>>()?)
        }
        ParameterValue::Dict(_) => {
            return Err("a parameter is a scalar or a fixed array, not a dict".into())
        }
    })
}

/// The read-only bound parameters of one parameter: `<name>/min` and `<name>/max`, each
/// only if the schema declares that bound (one scalar, which holds for every element of
/// a fixed array).
pub fn bound_parameters(p: &ParamInfo) -> Vec<Parameter> {
    let mut out = Vec::new();
    for (suffix, bound) in [(MIN_SUFFIX, &p.decl.min), (MAX_SUFFIX, &p.decl.max)] {
        if let Some(b) = bound {
            out.push(to_parameter(
                &format!("{}{suffix}", p.name),
                p.decl.ty,
                &Value::from_scalar(*b),
            ));
        }
    }
    out
}

/// One bound parameter (`Min` or `Max` of [`param_ref`]), if declared.
pub fn bound_parameter(name: &str, decl: &Param, max: bool) -> Option<Parameter> {
    let b: &Option<Scalar> = if max { &decl.max } else { &decl.min };
    b.map(|b| to_parameter(name, decl.ty, &Value::from_scalar(b)))
}

/// A client's message (a publish or a service request) as a [`Value`]: JSON text, big
/// integers possibly as decimal strings ([`value_from_viewer_json`]).
pub fn decode_message(payload: &[u8]) -> Result<Value, String> {
    let j: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
    value_from_viewer_json(&j).map_err(|e| e.to_string())
}

/// A value as the JSON text Foxglove receives ([`ViewerJson`]), into `buf` (cleared).
pub fn encode_message(v: &Value, buf: &mut Vec<u8>) {
    buf.clear();
    // Serializing a `Value` to a `Vec` cannot fail (non-finite floats are `null`).
    let _ = serde_json::to_writer(&mut *buf, &ViewerJson(v));
}

/// Maps the monotonic instants of samples to wall time (Unix nanoseconds), the time
/// base of Foxglove's log times, from one reading of both clocks.
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    at: Instant,
    unix_nanos: u64,
}

impl WallClock {
    /// Reads both clocks now.
    pub fn now() -> WallClock {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        WallClock::at(Instant::now(), unix)
    }

    /// The clock that reads `unix_nanos` at `at`.
    pub fn at(at: Instant, unix_nanos: u64) -> WallClock {
        WallClock { at, unix_nanos }
    }

    /// `t` in Unix nanoseconds.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use fcan_foxglove::mapping::WallClock;
    /// let t0 = Instant::now();
    /// let c = WallClock::at(t0 + Duration::from_millis(1), 5_000_000);
    /// assert_eq!(c.nanos(t0 + Duration::from_millis(3)), 7_000_000);
    /// assert_eq!(c.nanos(t0), 4_000_000);
    /// ```
    pub fn nanos(&self, t: Instant) -> u64 {
        match t.checked_duration_since(self.at) {
            Some(d) => self.unix_nanos.saturating_add(d.as_nanos() as u64),
            None => self
                .unix_nanos
                .saturating_sub(self.at.duration_since(t).as_nanos() as u64),
        }
    }
}

/// A node as served (the rule that keeps the served set the running one is
/// [`fcan_master::serving::Supervisor`]'s, for every face).
pub use fcan_master::serving::NodeKey;

/// The unit tests' registry: the example motor driver (node 1, two motors) and I/O
/// board (node 3, every block).
#[cfg(test)]
pub(crate) fn example_registry() -> Registry {
    use fcan_core::hash::SchemaDigest;
    use fcan_core::id::NodeId;
    use fcan_master::engine::NodeSchema;
    let mut r = Registry::default();
    for (id, blob) in [
        (1, fcan_example_motor_driver::gen::BLOB.to_vec()),
        (3, fcan_example_io_board::gen::BLOB.to_vec()),
    ] {
        let s = NodeSchema::decode(SchemaDigest::of(&blob), blob).expect("example blob");
        r.add_schema(NodeId::new(id).unwrap(), &s, |b| b.index < 2);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        example_registry()
    }

    fn schema_of(spec: &ChannelSpec) -> serde_json::Value {
        serde_json::from_slice(&spec.schema).expect("schema is JSON")
    }

    #[test]
    fn every_topic_is_a_channel_with_its_fields_schema() {
        let r = registry();
        let fb = r.topic("/motor_driver1/motor0/feedback").unwrap();
        let c = channel_spec(fb);
        assert_eq!(c.topic, "/motor_driver1/motor0/feedback");
        assert_eq!(c.schema_name, "fcan.motor_driver1.motor0.feedback");
        assert_eq!(c.dir, DataDirection::S2m);
        assert_eq!(c.metadata["fcan.dir"], "s2m");
        assert_eq!(c.metadata["fcan.period_us"], "5000");
        assert_eq!(c.metadata["fcan.ros_type"], "example_msgs/msg/Feedback");
        let s = schema_of(&c);
        assert_eq!(
            s["required"],
            serde_json::json!(["ready", "position", "velocity", "current"])
        );
        // The text lists the properties in that order too (a viewer shows them so).
        let text = String::from_utf8(c.schema.clone()).unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\":{{")).unwrap();
        assert!(at("ready") < at("position") && at("velocity") < at("current"));
        assert_eq!(s["properties"]["ready"]["type"], "boolean");
        assert_eq!(s["title"], "/motor_driver1/motor0/feedback");

        let target = channel_spec(r.topic("/motor_driver1/motor1/target").unwrap());
        assert_eq!(target.dir, DataDirection::M2s);
        assert_eq!(target.metadata["fcan.dir"], "m2s");
        assert!(!target.metadata.contains_key("fcan.period_us"));
        let s = schema_of(&target);
        assert_eq!(s["properties"]["type"]["maximum"], 255);

        // A fixed array field keeps its length.
        let raw = channel_spec(r.topic("/io_board3/analog/samples").unwrap());
        let s = schema_of(&raw);
        assert_eq!(s["properties"]["raw"]["minItems"], 16);
        assert_eq!(s["properties"]["raw"]["items"]["minimum"], -32768);
    }

    #[test]
    fn services_have_request_and_response_schemas() {
        let r = registry();
        let s = service_spec(r.service("/motor_driver1/motor0/reset_encoder").unwrap());
        assert_eq!(s.schema_name, "fcan.motor_driver1.motor0.reset_encoder");
        assert_eq!(
            s.request.0,
            "fcan.motor_driver1.motor0.reset_encoder.Request"
        );
        assert_eq!(
            s.response.0,
            "fcan.motor_driver1.motor0.reset_encoder.Response"
        );
        let req: serde_json::Value = serde_json::from_slice(&s.request.1).unwrap();
        assert_eq!(req["required"], serde_json::json!(["offset", "value"]));
        let resp: serde_json::Value = serde_json::from_slice(&s.response.1).unwrap();
        assert_eq!(resp["properties"]["success"]["type"], "boolean");
        // An empty request is an empty object, not a missing schema.
        let c = service_spec(r.service("/io_board3/analog/calibrate").unwrap());
        let req: serde_json::Value = serde_json::from_slice(&c.request.1).unwrap();
        assert_eq!(req["properties"], serde_json::json!({}));
    }

    #[test]
    fn the_graph_names_publishers_subscribers_and_providers() {
        let g = graph(&registry());
        assert_eq!(
            g.published["/motor_driver1/motor0/feedback"],
            BTreeSet::from(["motor_driver1".to_string()])
        );
        assert!(!g.published.contains_key("/motor_driver1/motor0/target"));
        assert!(g.subscribed.contains_key("/motor_driver1/motor0/target"));
        assert!(g.services.contains_key("/io_board3/out0/set"));
    }

    #[test]
    fn parameter_names_and_bounds() {
        let r = registry();
        let kp = r.param("motor_driver1.motor0.velocity.kp").unwrap();
        let b = bound_parameters(kp);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].name, "motor_driver1.motor0.velocity.kp/min");
        assert_eq!(b[0].value, Some(ParameterValue::Float64(0.0)));
        assert_eq!(b[1].name, "motor_driver1.motor0.velocity.kp/max");
        assert_eq!(b[1].value, Some(ParameterValue::Float64(100.0)));
        assert_eq!(b[1].r#type, Some(ParameterType::Float64));
        // Only the bounds the schema declares: min_on_ms has a max only.
        let m = r.param("io_board3.out0.min_on_ms").unwrap();
        let names: Vec<String> = bound_parameters(m).into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["io_board3.out0.min_on_ms/max"]);
        assert!(bound_parameter("x/min", &m.decl, false).is_none());
        assert_eq!(
            bound_parameter("x/max", &m.decl, true).unwrap().value,
            Some(ParameterValue::Integer(5000))
        );
        // No real parameter name ends in a bound suffix.
        for p in &r.params {
            assert_eq!(param_ref(&p.name), ParamRef::Value(&p.name));
        }
        assert_eq!(param_ref("a.b/min"), ParamRef::Min("a.b"));
    }

    #[test]
    fn parameter_values_both_ways() {
        // f32: the shortest decimal; 1.0 stays a float by its type hint.
        let p = to_parameter("k", ScalarType::F32, &Value::Float(0.05f32 as f64));
        assert_eq!(p.value, Some(ParameterValue::Float64(0.05)));
        assert_eq!(p.r#type, Some(ParameterType::Float64));
        let p = to_parameter("k", ScalarType::F64, &Value::Float(0.1 + 0.2));
        assert_eq!(p.value, Some(ParameterValue::Float64(0.1 + 0.2)));
        // Integers, big ones as strings, booleans, arrays.
        let p = to_parameter("n", ScalarType::U16, &Value::UInt(100));
        assert_eq!(
            (p.value, p.r#type),
            (Some(ParameterValue::Integer(100)), None)
        );
        let p = to_parameter("n", ScalarType::U64, &Value::UInt(u64::MAX));
        assert_eq!(p.value, Some(ParameterValue::String(u64::MAX.to_string())));
        let p = to_parameter("n", ScalarType::I64, &Value::Int(i64::MIN));
        assert_eq!(p.value, Some(ParameterValue::String(i64::MIN.to_string())));
        let p = to_parameter("b", ScalarType::Bool, &Value::Bool(true));
        assert_eq!(p.value, Some(ParameterValue::Bool(true)));
        let p = to_parameter(
            "g",
            ScalarType::F32,
            &Value::Array(vec![Value::Float(1.0), Value::Float(f64::NAN)]),
        );
        assert_eq!(p.r#type, Some(ParameterType::Float64Array));
        assert_eq!(
            p.value,
            Some(ParameterValue::Array(vec![
                ParameterValue::Float64(1.0),
                ParameterValue::String("NaN".into())
            ]))
        );

        // Back: what to_parameter writes reads back as the same value.
        for (ty, v) in [
            (ScalarType::U64, Value::UInt(u64::MAX)),
            (ScalarType::I64, Value::Int(i64::MIN)),
            (ScalarType::I32, Value::Int(-7)),
            (ScalarType::Bool, Value::Bool(false)),
            (ScalarType::F64, Value::Float(2.5)),
        ] {
            let p = to_parameter("x", ty, &v);
            let back = from_parameter(p.value.as_ref().unwrap()).unwrap();
            assert_eq!(
                back.to_scalar(ty, "x").unwrap(),
                v.to_scalar(ty, "x").unwrap(),
                "{ty}"
            );
        }
        let nan = from_parameter(&ParameterValue::String("NaN".into())).unwrap();
        assert!(matches!(nan, Value::Float(f) if f.is_nan()));
        // What is no value: refused with a reason, never a panic.
        assert!(from_parameter(&ParameterValue::String("fast".into()))
            .unwrap_err()
            .contains("not a number"));
        assert!(from_parameter(&ParameterValue::Dict(Default::default())).is_err());
        assert!(
            from_parameter(&ParameterValue::Array(vec![ParameterValue::Dict(
                Default::default()
            )]))
            .is_err()
        );
    }

    #[test]
    fn client_messages_decode_or_say_why() {
        let v = decode_message(br#"{"type": 1, "value": 5.0}"#).unwrap();
        assert_eq!(v.field("type"), Some(&Value::UInt(1)));
        let big = decode_message(br#"{"n": "18446744073709551615"}"#).unwrap();
        assert_eq!(big.field("n"), Some(&Value::UInt(u64::MAX)));
        assert!(decode_message(b"{not json")
            .unwrap_err()
            .starts_with("not JSON"));
        assert!(decode_message(br#"{"a": null}"#).is_err());
        assert!(decode_message(&[0xff, 0xfe]).is_err());
        let mut buf = vec![1, 2, 3];
        encode_message(&big, &mut buf);
        assert_eq!(buf, br#"{"n":"18446744073709551615"}"#);
    }

    #[test]
    fn wall_clock_maps_instants_to_unix_nanos() {
        let now = WallClock::now();
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let t = now.nanos(Instant::now());
        assert!(t.abs_diff(unix) < 1_000_000_000, "{t} vs {unix}");
        let c = WallClock::at(Instant::now(), 10);
        assert_eq!(
            c.nanos(Instant::now() - std::time::Duration::from_secs(1)),
            0
        );
    }
}
