//! The bridge over the example nodes on the simulated bus, with an in-memory DDS in place
//! of RustDDS (the real one is judged by Cyclone DDS in `.ci/ros2-dds-peer.sh`): which
//! topics get which endpoints, that what is written is the master's samples in CDR,
//! that a command from DDS reaches a node and a malformed one does not, and that a node
//! that goes or reboots takes its endpoints with it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::id::NodeId;
use fcan_core::msg::DataDirection;
use fcan_e2e::{World, IO3, MD1, MD2};
use fcan_ros2::dynamic::{self, RosValue};
use fcan_ros2::mapping::Origin;
use fcan_ros2::{cdr, Interfaces};
use fcan_ros2_bridge::dds::Received;
use fcan_ros2_bridge::rpc::{Framing, SampleId};
use fcan_ros2_bridge::{Ros2Bridge, Ros2Options};
use tokio::sync::mpsc;

mod common;
use common::MemDds;

/// The nodes the latest `ros_discovery_info` sample names, with their reader and
/// writer counts; and the participant gid it names.
fn graph(dds: &MemDds) -> (Vec<(String, usize, usize)>, Vec<RosValue>) {
    let store = Interfaces::bundled();
    let w = dds.written.lock().unwrap();
    let (b, _) = w["ros_discovery_info"].last().unwrap().clone();
    let v = dynamic::decode(&store, "rmw_dds_common/msg/ParticipantEntitiesInfo", &b).unwrap();
    let RosValue::Msg(f) = v else { panic!() };
    let nodes = f[1]
        .as_seq()
        .unwrap()
        .iter()
        .map(|n| {
            let RosValue::Msg(n) = n else { panic!() };
            assert_eq!(n[0].as_str(), Some("/"));
            (
                n[1].as_str().unwrap().to_string(),
                n[2].as_seq().unwrap().len(),
                n[3].as_seq().unwrap().len(),
            )
        })
        .collect();
    let RosValue::Msg(gid) = &f[0] else { panic!() };
    (nodes, gid[0].as_seq().unwrap().to_vec())
}

fn quiet() -> Ros2Options {
    let mut o = Ros2Options::default();
    o.framing = Framing::Cyclone;
    o.resync_period = Duration::from_millis(100);
    o
}

async fn settle<F: Fn() -> bool>(what: &str, f: F) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not reached in 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_topic_of_the_running_nodes_gets_its_endpoint() {
    let (_w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let bridge = Ros2Bridge::start(m.clone(), dds.clone(), quiet()).await;
    let registry = m.registry().await.unwrap();
    let routes = bridge.routes();
    assert_eq!(routes.len(), registry.topics.len());
    let r = |name: &str| {
        routes
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let fb = r("/motor_driver1/motor0/feedback");
    assert_eq!(
        (
            fb.ros_type.as_str(),
            fb.origin,
            fb.endpoint.topic.as_str(),
            fb.endpoint.type_name.as_str()
        ),
        (
            "example_msgs/msg/Feedback",
            Origin::Custom,
            "rt/motor_driver1/motor0/feedback",
            "example_msgs::msg::dds_::Feedback_"
        )
    );
    assert!(fb.type_hash.starts_with("RIHS01_"));
    let samples = r("/io_board3/analog/samples");
    assert_eq!(
        samples.ros_type,
        "fcan_io_board_msgs/msg/AnalogSensorSamples"
    );
    assert_eq!(samples.origin, Origin::Generated);
    let state = r("/io_board3/out0/state");
    assert_eq!(
        (state.ros_type.as_str(), state.endpoint.qos.transient_local),
        ("std_msgs/msg/Bool", true)
    );
    assert!(!fb.endpoint.qos.transient_local && fb.endpoint.qos.reliable);
    let target = r("/motor_driver2/motor3/target");
    assert_eq!(
        (target.dir, target.endpoint.qos.reliable),
        (DataDirection::M2s, false)
    );
    // A writer per s2m topic, and a reply writer per service.
    let writers = routes
        .iter()
        .filter(|r| r.dir == DataDirection::S2m)
        .count();
    assert_eq!(bridge.services().len(), registry.services.len());
    // And the eight node services (six for parameters, node_info, reprovision) of each
    // of the three nodes, ros_discovery_info, /rosout and /parameter_events.
    assert_eq!(
        dds.live_writers.load(Ordering::SeqCst),
        writers + registry.services.len() + 3 * 8 + 3,
        "and the graph's, /rosout's and /parameter_events' writers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_written_is_the_masters_samples_in_cdr() {
    let (_w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let bridge = Ros2Bridge::start(m.clone(), dds.clone(), quiet()).await;
    let route = bridge
        .routes()
        .into_iter()
        .find(|r| r.name == "/io_board3/analog/samples")
        .unwrap();
    let mut rx = m.subscribe("/io_board3/analog/samples").await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 20 {
        seen.push(rx.recv().await.unwrap().value);
    }
    settle("the bridge wrote them too", || {
        dds.written
            .lock()
            .unwrap()
            .get(&route.endpoint.topic)
            .is_some_and(|w| w.len() > 25)
    })
    .await;
    // The types as a ROS program would have them: from the schema, independently.
    let mut store = Interfaces::bundled();
    let schema = m.schema(NodeId::new(IO3).unwrap()).await.unwrap().unwrap();
    fcan_ros2::mapping::map_schema(&schema.schema, &mut store);
    let written: Vec<_> = dds.written.lock().unwrap()[&route.endpoint.topic]
        .iter()
        .map(|(b, _)| cdr::decode(&store, &route.binding, &route.fields, b).unwrap())
        .collect();
    // The master's samples are a run of what the bridge wrote (numbered by `sequence`).
    // Any run: a node restarted under load (a slow machine's master-lost timer) sends
    // the same numbers and values again, so the first match may be an earlier run.
    assert!(
        written.windows(seen.len()).any(|w| w == &seen[..]),
        "the {} samples the master delivered are not a run of the {} the bridge wrote",
        seen.len(),
        written.len()
    );
    assert!(bridge.stats().written >= written.len() as u64);
}

fn target_cdr(setpoint: f32, ty: u8) -> Vec<u8> {
    // example_msgs/msg/Target: fields sorted by name: float32 setpoint, uint8 type.
    let mut b = vec![0, 1, 0, 0];
    b.extend(setpoint.to_le_bytes());
    b.push(ty);
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_from_dds_reaches_the_node_and_a_malformed_one_does_not() {
    let (w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let bridge = Ros2Bridge::start(m.clone(), dds.clone(), quiet()).await;
    let feed = |topic: &str| dds.feeds.lock().unwrap()[topic].clone();
    let sample = |cdr: Vec<u8>| Received {
        cdr,
        id: None,
        source_time: None,
    };
    // motor1: a Target without its `type` byte, and a cut header: never sent.
    let bad = feed("rt/motor_driver1/motor1/target");
    for _ in 0..20 {
        bad.send(sample(vec![0, 1, 0, 0, 0, 0, 0, 63])).unwrap();
        bad.send(sample(vec![0, 1])).unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // motor0: duty 0.5, streamed as a ROS node would.
    let good = feed("rt/motor_driver1/motor0/target");
    for _ in 0..60 {
        good.send(sample(target_cdr(0.5, 0))).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let v0 = w.motor(MD1).with(|f| f.axis(0).unwrap().velocity);
    let v1 = w.motor(MD1).with(|f| f.axis(1).unwrap().velocity);
    assert!(v0 > 0.05, "motor0 velocity {v0}");
    assert_eq!(v1, 0.0, "motor1 moved");
    let s = bridge.stats();
    assert!(s.forwarded >= 50, "{s:?}");
    assert_eq!(s.refused, 40, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_goes_or_reboots_takes_its_endpoints_with_it() {
    let (mut w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let bridge = Ros2Bridge::start(m.clone(), dds.clone(), quiet()).await;
    let count = |b: &Ros2Bridge, node: &str| {
        b.routes()
            .iter()
            .filter(|r| r.name.starts_with(node))
            .count()
    };
    let svc = |b: &Ros2Bridge, node: &str| {
        b.services()
            .iter()
            .filter(|r| r.name.starts_with(node))
            .count()
    };
    let md1_topics = count(&bridge, "/motor_driver1/");
    // Endpoints: one per topic, two (request reader, reply writer) per service and per
    // parameter service.
    let md1 = md1_topics + 2 * svc(&bridge, "/motor_driver1/") + 2 * 8;
    // The graph names the three nodes, each with its readers and writers, under this
    // participant's GUID.
    let (nodes, gid) = graph(&dds);
    let names: Vec<_> = nodes.iter().map(|n| n.0.as_str()).collect();
    assert_eq!(
        names,
        ["motor_driver1", "motor_driver2", "io_board3", "fcan_bridge"]
    );
    assert_eq!(gid, vec![RosValue::UInt(7); 16]);
    let md1_entry = nodes[0].clone();
    assert_eq!(
        md1_entry.1 + md1_entry.2,
        md1,
        "every endpoint of motor_driver1"
    );
    let md2 = count(&bridge, "/motor_driver2/");
    let writers = dds.live_writers.load(Ordering::SeqCst);
    let made = dds.made.load(Ordering::SeqCst);
    assert!(md1 > 0 && md2 > 0);
    // motor_driver1 reboots: served again, on new endpoints, the old ones dropped.
    w.reboot_motor(MD1);
    settle("motor_driver1 served again on new endpoints", || {
        dds.made.load(Ordering::SeqCst) == made + md1
            && count(&bridge, "/motor_driver1/") == md1_topics
            && dds.live_writers.load(Ordering::SeqCst) == writers
    })
    .await;
    // motor_driver2 leaves the bus: its endpoints go (4 motors: a feedback writer and
    // two service reply writers each; six parameter service reply writers).
    w.motors.remove(&MD2).unwrap().stop();
    settle("motor_driver2's endpoints gone", || {
        count(&bridge, "/motor_driver2/") == 0
            && svc(&bridge, "/motor_driver2/") == 0
            && dds.live_writers.load(Ordering::SeqCst) == writers - 12 - 8
    })
    .await;
    // The graph saw it leave (and motor_driver1 come back).
    settle("the graph without motor_driver2", || {
        let names: Vec<_> = graph(&dds).0.into_iter().map(|n| n.0).collect();
        names == ["motor_driver1", "io_board3", "fcan_bridge"]
    })
    .await;
    bridge.stop();
    settle("every writer dropped", || {
        dds.live_writers.load(Ordering::SeqCst) == 0
    })
    .await;
}

/// A SetBool request for io_board3/out0/set in the given framing.
fn set_request(framing: Framing, on: bool, client: u64, seq: i64) -> Received {
    match framing {
        Framing::Cyclone => {
            let mut b = vec![0, 1, 0, 0];
            b.extend(client.to_le_bytes());
            b.extend(seq.to_le_bytes());
            b.push(u8::from(on));
            Received {
                cdr: b,
                id: None,
                source_time: None,
            }
        }
        _ => Received {
            cdr: vec![0, 1, 0, 0, u8::from(on)],
            id: Some(SampleId {
                writer_guid: [client as u8; 16],
                seq,
            }),
            source_time: None,
        },
    }
}

/// `SetBool_Response` (bool success, string message) after `skip` header bytes.
fn set_response(b: &[u8], skip: usize) -> (bool, String) {
    let body = &b[4 + skip..];
    let len = u32::from_le_bytes(body[4..8].try_into().unwrap()) as usize;
    let text = String::from_utf8(body[8..8 + len - 1].to_vec()).unwrap();
    (body[0] == 1, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_call_is_answered_in_the_cyclone_framing_and_a_refusal_says_why() {
    let (w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let bridge = Ros2Bridge::start(m.clone(), dds.clone(), quiet()).await;
    let svc = bridge
        .services()
        .into_iter()
        .find(|s| s.name == "/io_board3/out0/set")
        .unwrap();
    assert_eq!(
        (
            svc.ros_type.as_str(),
            svc.request_endpoint.topic.as_str(),
            svc.request_endpoint.type_name.as_str(),
            svc.reply_endpoint.topic.as_str(),
            svc.reply_endpoint.type_name.as_str()
        ),
        (
            "std_srvs/srv/SetBool",
            "rq/io_board3/out0/setRequest",
            "std_srvs::srv::dds_::SetBool_Request_",
            "rr/io_board3/out0/setReply",
            "std_srvs::srv::dds_::SetBool_Response_"
        )
    );
    let requests = dds.feeds.lock().unwrap()["rq/io_board3/out0/setRequest"].clone();
    let replies = || {
        dds.written
            .lock()
            .unwrap()
            .get("rr/io_board3/out0/setReply")
            .cloned()
            .unwrap_or_default()
    };
    // A sequence number above 2^32: echoed whole.
    let seq = (7i64 << 32) | 3;
    requests
        .send(set_request(Framing::Cyclone, true, 0xfeed, seq))
        .unwrap();
    settle("the reply", || replies().len() == 1).await;
    let (b, related) = replies()[0].clone();
    assert_eq!(related, None);
    assert_eq!(&b[4..12], &0xfeedu64.to_le_bytes());
    assert_eq!(&b[12..20], &seq.to_le_bytes());
    assert_eq!(set_response(&b, 16), (true, String::new()));
    settle("out0 on", || w.io(IO3).with(|f| f.output(0)) == Some(true)).await;
    // out1 settles for 500 ms (its `min_on_ms`): a set is answered when the relay has
    // settled, and a set while one settles is the node's BUSY, answered as
    // success = false with the node's reason.
    m.param_set("io_board3.out1.min_on_ms", fcan_e2e::val("500"))
        .await
        .unwrap();
    let requests1 = dds.feeds.lock().unwrap()["rq/io_board3/out1/setRequest"].clone();
    for (on, seq) in [(true, 1), (false, 2), (true, 3)] {
        requests1
            .send(set_request(Framing::Cyclone, on, 2, seq))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let replies1 = || {
        dds.written
            .lock()
            .unwrap()
            .get("rr/io_board3/out1/setReply")
            .cloned()
            .unwrap_or_default()
    };
    settle("three replies on out1", || replies1().len() == 3).await;
    let by_seq = |seq: i64| {
        let r = replies1();
        let b = r
            .iter()
            .find(|(b, _)| b[12..20] == seq.to_le_bytes())
            .unwrap_or_else(|| panic!("no reply to {seq}"))
            .0
            .clone();
        set_response(&b, 16)
    };
    assert_eq!(by_seq(1), (true, String::new()));
    for seq in [2, 3] {
        let (ok, why) = by_seq(seq);
        assert!(!ok && why.to_lowercase().contains("busy"), "{seq}: {why}");
    }
    assert_eq!(bridge.stats().calls_refused, 2);
    // Garbage on the request topic (shorter than the header): no reply, counted.
    let before = replies().len();
    requests
        .send(Received {
            cdr: vec![0, 1, 0, 0, 1],
            id: None,
            source_time: None,
        })
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(replies().len(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_fast_dds_framing_the_reply_names_the_request_by_its_sample_identity() {
    let (_w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let mut opts = quiet();
    opts.framing = Framing::FastDds;
    let _bridge = Ros2Bridge::start(m.clone(), dds.clone(), opts).await;
    let requests = dds.feeds.lock().unwrap()["rq/io_board3/out2/setRequest"].clone();
    requests
        .send(set_request(Framing::FastDds, true, 9, 41))
        .unwrap();
    let replies = || {
        dds.written
            .lock()
            .unwrap()
            .get("rr/io_board3/out2/setReply")
            .cloned()
            .unwrap_or_default()
    };
    settle("the reply", || replies().len() == 1).await;
    let (b, related) = replies()[0].clone();
    assert_eq!(
        related,
        Some(SampleId {
            writer_guid: [9; 16],
            seq: 41
        })
    );
    assert_eq!(set_response(&b, 0), (true, String::new()));
    // A request without a sample identity cannot be answered: none is.
    requests
        .send(Received {
            cdr: vec![0, 1, 0, 0, 1],
            id: None,
            source_time: None,
        })
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(replies().len(), 1);
}

/// A parameter service request in the Cyclone framing.
fn param_request(store: &Interfaces, ty: &str, seq: i64, v: &RosValue) -> Received {
    let body = dynamic::encode(store, &format!("{ty}_Request"), v).unwrap();
    let mut b = vec![0, 1, 0, 0];
    b.extend(5u64.to_le_bytes());
    b.extend(seq.to_le_bytes());
    b.extend(&body[4..]);
    Received {
        cdr: b,
        id: None,
        source_time: None,
    }
}

fn strs(v: &[&str]) -> RosValue {
    RosValue::Seq(v.iter().map(|s| RosValue::Str(s.to_string())).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_are_listed_read_described_and_set_with_the_nodes_answer() {
    let (_w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let _bridge = Ros2Bridge::start(m.clone(), dds.clone(), quiet()).await;
    let call = |svc: &'static str, ty: &'static str, seq: i64, v: RosValue| {
        let dds = dds.clone();
        async move { param_call(&dds, svc, ty, seq, v).await }
    };
    let field = |v: &RosValue, i: usize| match v {
        RosValue::Msg(f) => f[i].clone(),
        other => panic!("{other:?}"),
    };
    // list: motor0's parameters, recursively, as `motor0.…`.
    let listed = call(
        "list_parameters",
        "rcl_interfaces/srv/ListParameters",
        1,
        RosValue::Msg(vec![strs(&["motor0"]), RosValue::UInt(0)]),
    )
    .await;
    let names = field(&field(&listed, 0), 0);
    let names: Vec<_> = names
        .as_seq()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert!(
        names.contains(&"motor0.velocity.kp".to_string()),
        "{names:?}"
    );
    assert!(names.iter().all(|n| n.starts_with("motor0.")), "{names:?}");
    // describe: the schema's range.
    let d = call(
        "describe_parameters",
        "rcl_interfaces/srv/DescribeParameters",
        2,
        RosValue::Msg(vec![strs(&["motor0.velocity.kp"])]),
    )
    .await;
    let desc = field(&d, 0).as_seq().unwrap()[0].clone();
    assert_eq!(field(&desc, 1), RosValue::UInt(3), "double");
    assert_eq!(
        field(&desc, 6).as_seq().unwrap()[0],
        RosValue::Msg(vec![
            RosValue::Float(0.0),
            RosValue::Float(100.0),
            RosValue::Float(0.0)
        ])
    );
    // set 1.5: successful; get reads it back from the node.
    let pv = |x: f64| {
        RosValue::Msg(vec![
            RosValue::UInt(3),
            RosValue::Bool(false),
            RosValue::Int(0),
            RosValue::Float(x),
            RosValue::Str(String::new()),
            RosValue::Seq(vec![]),
            RosValue::Seq(vec![]),
            RosValue::Seq(vec![]),
            RosValue::Seq(vec![]),
            RosValue::Seq(vec![]),
        ])
    };
    let param = |name: &str, v: RosValue| RosValue::Msg(vec![RosValue::Str(name.into()), v]);
    let set = call(
        "set_parameters",
        "rcl_interfaces/srv/SetParameters",
        3,
        RosValue::Msg(vec![RosValue::Seq(vec![
            param("motor0.velocity.kp", pv(1.5)),
            param("motor0.velocity.kp", pv(1000.0)),
            param("motor0.nope", pv(1.0)),
        ])]),
    )
    .await;
    let results = field(&set, 0).as_seq().unwrap().to_vec();
    assert_eq!(
        results[0],
        RosValue::Msg(vec![RosValue::Bool(true), RosValue::Str(String::new())])
    );
    for (r, words) in [
        (&results[1], "100"),
        (&results[2], "no parameter `motor0.nope`"),
    ] {
        assert_eq!(field(r, 0), RosValue::Bool(false));
        let why = field(r, 1);
        assert!(why.as_str().unwrap().contains(words), "{why:?}");
    }
    let got = call(
        "get_parameters",
        "rcl_interfaces/srv/GetParameters",
        4,
        RosValue::Msg(vec![strs(&["motor0.velocity.kp", "motor0.nope"])]),
    )
    .await;
    let values = field(&got, 0).as_seq().unwrap().to_vec();
    assert_eq!(
        (field(&values[0], 0), field(&values[0], 3)),
        (RosValue::UInt(3), RosValue::Float(1.5))
    );
    assert_eq!(field(&values[1], 0), RosValue::UInt(0), "NOT_SET");
    let types = call(
        "get_parameter_types",
        "rcl_interfaces/srv/GetParameterTypes",
        5,
        RosValue::Msg(vec![strs(&["motor0.invert", "motor0.command_timeout_ms"])]),
    )
    .await;
    assert_eq!(
        field(&types, 0),
        RosValue::Seq(vec![RosValue::UInt(1), RosValue::UInt(2)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_info_and_reprovision_per_node() {
    let (_w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let _bridge = Ros2Bridge::start(m.clone(), dds.clone(), quiet()).await;
    let store = Interfaces::bundled();
    let call = |svc: &'static str, ty: &'static str, seq: i64| {
        let dds = dds.clone();
        let store = store.clone();
        async move {
            let reply_topic = format!("rr/io_board3/{svc}Reply");
            let feed = dds.feeds.lock().unwrap()[&format!("rq/io_board3/{svc}Request")].clone();
            feed.send(param_request(
                &store,
                ty,
                seq,
                &RosValue::Msg(vec![RosValue::UInt(0)]),
            ))
            .unwrap();
            settle(svc, || {
                dds.written
                    .lock()
                    .unwrap()
                    .get(&reply_topic)
                    .is_some_and(|w| !w.is_empty())
            })
            .await;
            let (b, _) = dds.written.lock().unwrap()[&reply_topic]
                .last()
                .unwrap()
                .clone();
            let mut body = b[..4].to_vec();
            body.extend(&b[20..]);
            let RosValue::Msg(f) =
                dynamic::decode(&store, &format!("{ty}_Response"), &body).unwrap()
            else {
                panic!()
            };
            f
        }
    };
    let info = call("node_info", "fcan_msgs/srv/NodeInfo", 1).await;
    let n = fcan_e2e::node_info(&m, IO3).await.unwrap();
    assert_eq!(info[0], RosValue::UInt(u64::from(IO3)));
    assert_eq!(info[1].as_str(), Some("io_board3"));
    assert_eq!(info[2].as_str(), Some("running"));
    assert_eq!(info[4], RosValue::UInt(u64::from(n.boot_id)));
    assert_eq!(
        info[5].as_str(),
        Some(n.digest.unwrap().to_string().as_str())
    );
    assert_eq!(info[8].as_str(), Some("fd_brs"));
    let re = call("reprovision", "std_srvs/srv/Trigger", 2).await;
    assert_eq!(re, vec![RosValue::Bool(true), RosValue::Str(String::new())]);
    settle("io_board3 provisioning or running again", || true).await;
    let phase = fcan_e2e::node_info(&m, IO3).await.unwrap().phase;
    assert!(
        matches!(
            phase,
            fcan_master::Phase::Provisioning | fcan_master::Phase::Running
        ),
        "{phase}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn humbles_graph_has_24_byte_gids() {
    let (_w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let mut opts = quiet();
    opts.distro = fcan_ros2_bridge::Distro::Humble;
    let _bridge = Ros2Bridge::start(m.clone(), dds.clone(), opts).await;
    // Humble's rmw_dds_common, written here from its definitions.
    let mut store = Interfaces::bundled();
    for (name, text) in [
        ("humble/msg/Gid", "char[24] data\n"),
        (
            "humble/msg/NodeEntitiesInfo",
            "string<=256 node_namespace\nstring<=256 node_name\nGid[] reader_gid_seq\nGid[] writer_gid_seq\n",
        ),
        ("humble/msg/ParticipantEntitiesInfo", "Gid gid\nNodeEntitiesInfo[] node_entities_info_seq\n"),
    ] {
        store
            .add_message(fcan_ros2::idl::parse_msg(name, text).unwrap())
            .unwrap();
    }
    let (b, _) = dds.written.lock().unwrap()["ros_discovery_info"]
        .last()
        .unwrap()
        .clone();
    let v = dynamic::decode(&store, "humble/msg/ParticipantEntitiesInfo", &b).unwrap();
    let RosValue::Msg(f) = v else { panic!() };
    let RosValue::Msg(gid) = &f[0] else { panic!() };
    let bytes = gid[0].as_seq().unwrap();
    assert_eq!(bytes.len(), 24);
    assert_eq!(&bytes[..16], &vec![RosValue::UInt(7); 16][..]);
    assert_eq!(&bytes[16..], &vec![RosValue::UInt(0); 8][..]);
    assert_eq!(
        f[1].as_seq().unwrap().len(),
        4,
        "three nodes and the bridge's own"
    );
    assert_eq!(
        fcan_ros2_bridge::Distro::from_env(Some("humble")),
        fcan_ros2_bridge::Distro::Humble
    );
    assert_eq!(
        fcan_ros2_bridge::Distro::from_env(None),
        fcan_ros2_bridge::Distro::Jazzy
    );
}

/// A RobStride motor on the bus, driven by fcan's device driver (issue 24), is a ROS 2
/// node like the boards: its topics and services come from the schema its driver ships,
/// through the same code — nothing here or in the bridge knows a driver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driven_device_is_a_ros2_node_like_a_board() {
    use fcan_drivers::robstride::{model::Model, sim::SimMotor};
    use fcan_drivers::sim::SimDevice;
    use fcan_drivers::spec::{devices, DeviceSpec};
    use fcan_drivers::{DeviceHost, DeviceLink};

    let mut w = World::new(Mtu::Classic);
    w.add_motor(MD1, 2);
    let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(SimMotor::new(10, Model::Rs03))];
    let _sims = tokio::spawn(fcan_drivers::sim::run(w.endpoint(), sims));
    let spec = DeviceSpec::parse("robstride:id=10,model=RS03").unwrap();
    let host = DeviceHost::new(Mtu::Classic, devices(&[spec]).unwrap()).unwrap();
    let m = w.start_master_on(DeviceLink::new(w.endpoint(), host)).await;
    fcan_e2e::wait_running(&m, &[MD1, 10], Duration::from_secs(20)).await;
    let dds = MemDds::default();
    let bridge = Ros2Bridge::start(m.clone(), dds.clone(), quiet()).await;
    let routes = bridge.routes();
    let fb = routes
        .iter()
        .find(|r| r.name == "/robstride10/motor/feedback")
        .expect("the motor's feedback is a ROS 2 topic");
    assert_eq!(fb.endpoint.topic, "rt/robstride10/motor/feedback");
    assert_eq!(fb.origin, Origin::Generated, "{}", fb.ros_type);
    assert!(
        routes
            .iter()
            .any(|r| r.name == "/robstride10/motor/mit" && r.dir == DataDirection::M2s),
        "the MIT command is a ROS 2 topic to subscribe from"
    );
    let services = bridge.services();
    let enable = services
        .iter()
        .find(|s| s.name == "/robstride10/motor/enable")
        .expect("enable is a ROS 2 service");
    assert_eq!(enable.ros_type, "std_srvs/srv/Trigger");
    // The motor's feedback reaches DDS as the master decodes it: enable, command, read.
    let reply = m
        .call(
            "/robstride10/motor/enable",
            fcan_master::value::Value::Struct(vec![]),
        )
        .await
        .unwrap();
    assert_eq!(
        reply.field("success"),
        Some(&fcan_master::value::Value::Bool(true))
    );
    let mut rx = m.subscribe("/robstride10/motor/feedback").await.unwrap();
    let cmd = fcan_master::value::Value::from_json_str(
        r#"{"position": 0.5, "velocity": 0, "kp": 20, "kd": 1, "torque": 0}"#,
    )
    .unwrap();
    m.publish("/robstride10/motor/mit", cmd).await.unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("feedback")
        .unwrap()
        .value;
    let topic = fb.endpoint.topic.clone();
    settle("the bridge wrote the feedback", || {
        dds.written
            .lock()
            .unwrap()
            .get(&topic)
            .is_some_and(|w| !w.is_empty())
    })
    .await;
    let mut store = Interfaces::bundled();
    let schema = m.schema(NodeId::new(10).unwrap()).await.unwrap().unwrap();
    fcan_ros2::mapping::map_schema(&schema.schema, &mut store);
    let written: Vec<_> = dds.written.lock().unwrap()[&topic]
        .iter()
        .map(|(b, _)| cdr::decode(&store, &fb.binding, &fb.fields, b).unwrap())
        .collect();
    assert!(written.contains(&seen), "{seen:?} not among {written:?}");
}

/// A master whose `param_set` of one parameter fails as a node's refusal would: what a
/// node that refuses a value its schema allows (its application says no) looks like to
/// the bridge.
#[derive(Clone)]
struct Refusing {
    inner: fcan_master::Master,
    refuse: &'static str,
}

impl fcan_master::api::MasterApi for Refusing {
    async fn nodes(&self) -> Result<Vec<fcan_master::NodeInfo>, fcan_master::MasterError> {
        self.inner.nodes().await
    }
    async fn registry(&self) -> Result<fcan_master::registry::Registry, fcan_master::MasterError> {
        fcan_master::api::MasterApi::registry(&self.inner).await
    }
    async fn status(&self) -> Result<fcan_master::Status, fcan_master::MasterError> {
        fcan_master::api::MasterApi::status(&self.inner).await
    }
    async fn schema(
        &self,
        node: NodeId,
    ) -> Result<Option<Arc<fcan_master::engine::NodeSchema>>, fcan_master::MasterError> {
        fcan_master::api::MasterApi::schema(&self.inner, node).await
    }
    async fn plan(
        &self,
        node: NodeId,
    ) -> Result<Option<fcan_master::planner::Plan>, fcan_master::MasterError> {
        fcan_master::api::MasterApi::plan(&self.inner, node).await
    }
    fn events(&self) -> tokio::sync::broadcast::Receiver<fcan_master::MasterEvent> {
        self.inner.events()
    }
    async fn frames(
        &self,
    ) -> Result<tokio::sync::broadcast::Receiver<fcan_master::BusFrame>, fcan_master::MasterError>
    {
        fcan_master::api::MasterApi::frames(&self.inner).await
    }
    async fn subscribe(
        &self,
        topic: &str,
    ) -> Result<mpsc::UnboundedReceiver<fcan_master::Sample>, fcan_master::MasterError> {
        fcan_master::api::MasterApi::subscribe(&self.inner, topic).await
    }
    async fn publish(
        &self,
        topic: &str,
        value: fcan_master::value::Value,
    ) -> Result<(), fcan_master::MasterError> {
        self.inner.publish(topic, value).await
    }
    async fn publish_many(
        &self,
        items: Vec<(String, fcan_master::value::Value)>,
    ) -> Result<(), fcan_master::MasterError> {
        fcan_master::api::MasterApi::publish_many(&self.inner, items).await
    }
    async fn call(
        &self,
        service: &str,
        request: fcan_master::value::Value,
    ) -> Result<fcan_master::value::Value, fcan_master::MasterError> {
        self.inner.call(service, request).await
    }
    async fn param_get(
        &self,
        param: &str,
    ) -> Result<fcan_master::value::Value, fcan_master::MasterError> {
        self.inner.param_get(param).await
    }
    async fn param_set(
        &self,
        param: &str,
        value: fcan_master::value::Value,
    ) -> Result<(), fcan_master::MasterError> {
        if param == self.refuse {
            return Err(fcan_master::engine::CallError::BadValue(
                "the application refuses it now".into(),
            )
            .into());
        }
        self.inner.param_set(param, value).await
    }
    async fn reprovision(&self, node: NodeId) -> Result<(), fcan_master::MasterError> {
        self.inner.reprovision(node).await
    }
    async fn update(
        &self,
        node: NodeId,
        image: fcan_master::update::UpdateImage,
        cfg: fcan_master::update::UpdateConfig,
    ) -> Result<fcan_master::engine::UpdateReport, fcan_master::MasterError> {
        self.inner.update(node, image, cfg).await
    }
    async fn abort_update(&self, node: NodeId) -> Result<(), fcan_master::MasterError> {
        self.inner.abort_update(node).await
    }
}

/// A `ParameterValue` holding a double.
fn double(x: f64) -> RosValue {
    RosValue::Msg(vec![
        RosValue::UInt(3),
        RosValue::Bool(false),
        RosValue::Int(0),
        RosValue::Float(x),
        RosValue::Str(String::new()),
        RosValue::Seq(vec![]),
        RosValue::Seq(vec![]),
        RosValue::Seq(vec![]),
        RosValue::Seq(vec![]),
        RosValue::Seq(vec![]),
    ])
}

fn ros_param(name: &str, v: RosValue) -> RosValue {
    RosValue::Msg(vec![RosValue::Str(name.into()), v])
}

/// Calls a parameter service of motor_driver1 (Cyclone framing) and decodes the reply.
async fn param_call(dds: &MemDds, svc: &str, ty: &str, seq: i64, v: RosValue) -> RosValue {
    let store = Interfaces::bundled();
    let reply_topic = format!("rr/motor_driver1/{svc}Reply");
    let before = dds
        .written
        .lock()
        .unwrap()
        .get(&reply_topic)
        .map_or(0, |w| w.len());
    let feed = dds.feeds.lock().unwrap()[&format!("rq/motor_driver1/{svc}Request")].clone();
    feed.send(param_request(&store, ty, seq, &v)).unwrap();
    settle(svc, || {
        dds.written
            .lock()
            .unwrap()
            .get(&reply_topic)
            .is_some_and(|w| w.len() > before)
    })
    .await;
    let (b, _) = dds.written.lock().unwrap()[&reply_topic][before].clone();
    assert_eq!(
        &b[12..20],
        &seq.to_le_bytes(),
        "the reply names the request"
    );
    let mut body = b[..4].to_vec();
    body.extend(&b[20..]);
    dynamic::decode(&store, &format!("{ty}_Response"), &body).unwrap()
}

/// The parameter events written so far: (node, [(name, double value)]).
fn parameter_events(dds: &MemDds) -> Vec<(String, Vec<(String, f64)>)> {
    let store = Interfaces::bundled();
    let w = dds.written.lock().unwrap();
    w.get("rt/parameter_events")
        .map(|v| v.as_slice())
        .unwrap_or(&[])
        .iter()
        .map(|(b, _)| {
            let RosValue::Msg(f) =
                dynamic::decode(&store, "rcl_interfaces/msg/ParameterEvent", b).unwrap()
            else {
                panic!()
            };
            let changed = f[3]
                .as_seq()
                .unwrap()
                .iter()
                .map(|p| {
                    let RosValue::Msg(p) = p else { panic!() };
                    let RosValue::Msg(v) = &p[1] else { panic!() };
                    let RosValue::Float(x) = v[3] else { panic!() };
                    (p[0].as_str().unwrap().to_string(), x)
                })
                .collect();
            (f[1].as_str().unwrap().to_string(), changed)
        })
        .collect()
}

async fn kp(m: &fcan_master::Master, motor: u8) -> f64 {
    m.param_get(&format!("motor_driver1.motor{motor}.velocity.kp"))
        .await
        .unwrap()
        .as_f64()
        .unwrap()
}

fn result_of(v: &RosValue) -> (bool, String) {
    let RosValue::Msg(f) = v else { panic!() };
    let RosValue::Msg(r) = &f[0] else { panic!() };
    (
        r[0] == RosValue::Bool(true),
        r[1].as_str().unwrap().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sets_are_announced_on_parameter_events_and_atomic_sets_are_all_or_nothing() {
    let (_w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let master = Refusing {
        inner: m.clone(),
        refuse: "motor_driver1.motor1.velocity.ki",
    };
    let _bridge = Ros2Bridge::start(master, dds.clone(), quiet()).await;
    let atomic = "rcl_interfaces/srv/SetParametersAtomically";
    // Two parameters at once: both written, one event naming both.
    let r = param_call(
        &dds,
        "set_parameters_atomically",
        atomic,
        1,
        RosValue::Msg(vec![RosValue::Seq(vec![
            ros_param("motor0.velocity.kp", double(2.5)),
            ros_param("motor1.velocity.kp", double(3.5)),
        ])]),
    )
    .await;
    assert_eq!(result_of(&r), (true, String::new()));
    assert_eq!((kp(&m, 0).await, kp(&m, 1).await), (2.5, 3.5));
    assert_eq!(
        parameter_events(&dds),
        vec![(
            "/motor_driver1".to_string(),
            vec![
                ("motor0.velocity.kp".to_string(), 2.5),
                ("motor1.velocity.kp".to_string(), 3.5)
            ]
        )]
    );
    // One value out of range: refused before anything is written.
    let r = param_call(
        &dds,
        "set_parameters_atomically",
        atomic,
        2,
        RosValue::Msg(vec![RosValue::Seq(vec![
            ros_param("motor0.velocity.kp", double(7.0)),
            ros_param("motor1.velocity.kp", double(1000.0)),
        ])]),
    )
    .await;
    let (ok, why) = result_of(&r);
    assert!(!ok);
    assert!(
        why.contains("above its max") && why.contains("nothing was set"),
        "{why}"
    );
    assert_eq!(kp(&m, 0).await, 2.5, "the first value was not written");
    // The node refuses the second after the first was written: the first is put back.
    let r = param_call(
        &dds,
        "set_parameters_atomically",
        atomic,
        3,
        RosValue::Msg(vec![RosValue::Seq(vec![
            ros_param("motor0.velocity.kp", double(9.0)),
            ros_param("motor1.velocity.ki", double(1.0)),
        ])]),
    )
    .await;
    let (ok, why) = result_of(&r);
    assert!(!ok);
    assert!(
        why.contains("refuses it now") && why.contains("put back: motor0.velocity.kp"),
        "{why}"
    );
    assert_eq!(kp(&m, 0).await, 2.5, "rolled back");
    assert_eq!(
        parameter_events(&dds).len(),
        1,
        "failed sets announce nothing"
    );
    // set_parameters: each on its own; the event names only those that took.
    let r = param_call(
        &dds,
        "set_parameters",
        "rcl_interfaces/srv/SetParameters",
        4,
        RosValue::Msg(vec![RosValue::Seq(vec![
            ros_param("motor0.velocity.kp", double(4.0)),
            ros_param("motor0.velocity.kp", double(-1.0)),
        ])]),
    )
    .await;
    let RosValue::Msg(f) = &r else { panic!() };
    assert_eq!(f[0].as_seq().unwrap().len(), 2);
    assert_eq!(
        parameter_events(&dds).last().unwrap().1,
        vec![("motor0.velocity.kp".to_string(), 4.0)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_happens_to_the_nodes_reaches_rosout_under_their_names() {
    let (mut w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let _bridge = Ros2Bridge::start(m.clone(), dds.clone(), quiet()).await;
    let lines = || -> Vec<(u64, String, String)> {
        let store = Interfaces::bundled();
        let w = dds.written.lock().unwrap();
        w.get("rt/rosout")
            .map(|v| v.as_slice())
            .unwrap_or(&[])
            .iter()
            .map(|(b, _)| {
                let RosValue::Msg(f) =
                    dynamic::decode(&store, "rcl_interfaces/msg/Log", b).unwrap()
                else {
                    panic!()
                };
                let RosValue::UInt(level) = f[1] else {
                    panic!()
                };
                (
                    level,
                    f[2].as_str().unwrap().to_string(),
                    f[3].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // The bridge's own node publishes /rosout and /parameter_events in the graph.
    let (nodes, _) = graph(&dds);
    assert!(
        nodes.contains(&("fcan_bridge".to_string(), 0, 2)),
        "{nodes:?}"
    );
    // A command that does not fit: refused, and said once on /rosout as the node's warning.
    let feed = dds.feeds.lock().unwrap()["rt/motor_driver1/motor0/target"].clone();
    feed.send(Received {
        cdr: vec![0, 1, 0, 0, 1],
        id: None,
        source_time: None,
    })
    .unwrap();
    settle("a refusal on /rosout", || {
        lines()
            .iter()
            .any(|(l, n, msg)| *l == 30 && n == "motor_driver1" && msg.contains("refused"))
    })
    .await;
    // motor_driver2 leaves the bus: a warning under its name.
    w.motors.remove(&MD2).unwrap().stop();
    settle("an offline warning for motor_driver2", || {
        lines()
            .iter()
            .any(|(l, n, msg)| *l == 30 && n == "motor_driver2" && msg.contains("offline"))
    })
    .await;
    // motor_driver1 reboots: a warning, then an info line when it runs again.
    w.reboot_motor(MD1);
    settle(
        "a reboot warning and an online line for motor_driver1",
        || {
            let l = lines();
            let reboot = l.iter().position(|(l, n, msg)| {
                *l == 30 && n == "motor_driver1" && msg.contains("rebooted")
            });
            let online = l
                .iter()
                .rposition(|(l, n, _)| *l == 20 && n == "motor_driver1");
            matches!((reboot, online), (Some(r), Some(o)) if o > r)
        },
    )
    .await;
}
