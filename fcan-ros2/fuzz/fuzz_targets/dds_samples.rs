//! What a DDS peer can send the ROS 2 bridge: any bytes as a sample of any type it
//! names. The first byte picks a message of the interface store (every bundled
//! interface, the services' halves, fcan_msgs), the rest is the sample; it is decoded
//! by the crate's one CDR codec (`dynamic`: parameter services, graph) and, for the
//! mapped topics and services of a schema that pairs every fcan scalar type and shape
//! with ROS fields, through the fcan-value layer over it (`cdr`). Checked: no panic
//! (debug assertions on), and a decoded value re-encodes (what the bridge would send
//! back is always encodable).
#![no_main]

use std::sync::OnceLock;

use fcan_core::ir::{BlockType, Field, InstanceArray, Limits, Ros, Schema, Service, Topic};
use fcan_core::msg::DataDirection;
use fcan_core::types::ScalarType;
use fcan_ros2::mapping::{map_schema, Binding};
use fcan_ros2::{cdr, dynamic, Interfaces};
use libfuzzer_sys::fuzz_target;

struct World {
    store: Interfaces,
    names: Vec<String>,
    bindings: Vec<(Binding, Vec<Field>)>,
}

fn f(name: &str, ty: ScalarType, len: Option<u32>) -> Field {
    Field { name: name.into(), ty, len }
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let mut store = Interfaces::bundled();
        let all = vec![
            f("b", ScalarType::Bool, None),
            f("u", ScalarType::U64, Some(3)),
            f("i", ScalarType::I16, None),
            f("x", ScalarType::F32, Some(2)),
            f("y", ScalarType::F64, None),
        ];
        let ros = |ty: &str, map: &[(&str, &str)]| {
            Some(Ros { ty: ty.into(), map: map.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect() })
        };
        let topic = |name: &str, fields: Vec<Field>, r| Topic {
            name: name.into(),
            dir: DataDirection::M2s,
            period_us: 0,
            fields,
            ros: r,
        };
        let schema = Schema {
            protocol: fcan_core::ir::PROTOCOL_VERSION,
            node: "fuzz{i}".into(),
            allocation: "static".into(),
            limits: Limits::default(),
            types: vec![BlockType {
                name: "T".into(),
                params: vec![],
                topics: vec![
                    topic("generated", all.clone(), None),
                    topic("custom", all.clone(), ros("fuzz_msgs/msg/All", &[])),
                    topic(
                        "twist",
                        vec![f("vx", ScalarType::F32, None), f("wz", ScalarType::F64, None)],
                        ros("geometry_msgs/msg/Twist", &[("vx", "linear.x"), ("wz", "angular.z")]),
                    ),
                    topic(
                        "point",
                        vec![f("positions", ScalarType::F32, Some(2))],
                        ros("trajectory_msgs/msg/JointTrajectoryPoint", &[]),
                    ),
                    topic(
                        "narrow",
                        vec![f("data", ScalarType::U8, None)],
                        ros("std_msgs/msg/Int64", &[]),
                    ),
                ],
                services: vec![Service {
                    name: "set".into(),
                    request: vec![f("on", ScalarType::Bool, None)],
                    response: vec![f("ok", ScalarType::Bool, None)],
                    ros: ros("std_srvs/srv/SetBool", &[("on", "data"), ("ok", "success")]),
                }],
            }],
            instances: vec![InstanceArray { ty: "T".into(), max_count: 1, ns: "t".into() }],
        };
        let mapped = map_schema(&schema, &mut store);
        let mut bindings: Vec<(Binding, Vec<Field>)> = mapped
            .topics
            .iter()
            .zip(&schema.types[0].topics)
            .map(|(t, decl)| (t.binding.clone(), decl.fields.clone()))
            .collect();
        bindings.push((mapped.services[0].request.clone(), schema.types[0].services[0].request.clone()));
        let names = store.messages().map(|m| m.name.clone()).collect();
        World { store, names, bindings }
    })
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    let Some((&pick, sample)) = data.split_first() else { return };
    let name = &w.names[pick as usize % w.names.len()];
    if let Ok(v) = dynamic::decode(&w.store, name, sample) {
        dynamic::encode(&w.store, name, &v).expect("a decoded value re-encodes");
    }
    let (b, fields) = &w.bindings[pick as usize % w.bindings.len()];
    if let Ok(v) = cdr::decode(&w.store, b, fields, sample) {
        cdr::encode(&w.store, b, fields, &v).expect("a decoded fcan value re-encodes");
    }
});
