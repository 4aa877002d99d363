//! What a hostile or broken DDS peer gets (issue 33, "faces report what is true"), with
//! the in-memory DDS of `common` in place of RustDDS and the example nodes on the
//! simulated bus:
//!
//! * a command holding NaN or an infinity is refused, counted and logged (at most once a
//!   second per writer), and never reaches the node; a finite one after it does;
//! * a service request whose header names its client but whose body does not decode is
//!   answered (a node's own services too: `set_parameters_atomically` with
//!   `successful: false` and the reason) and logged at most once a second;
//! * a request that names no client (shorter than the Cyclone header) cannot be answered:
//!   it is counted and logged, at most once a second.

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_e2e::capture::Capture;
use fcan_e2e::{World, MD1};
use fcan_ros2::dynamic::{self, RosValue};
use fcan_ros2::Interfaces;
use fcan_ros2_bridge::dds::Received;
use fcan_ros2_bridge::rpc::{Framing, SampleId};
use fcan_ros2_bridge::{Ros2Bridge, Ros2Options};
use tracing::Instrument;

mod common;
use common::MemDds;

fn opts() -> Ros2Options {
    let mut o = Ros2Options::default();
    o.framing = Framing::Cyclone;
    o.resync_period = Duration::from_millis(100);
    o
}

/// example_msgs/msg/Target: float32 setpoint, uint8 type (0 = duty).
fn target_cdr(setpoint: f32) -> Vec<u8> {
    let mut b = vec![0, 1, 0, 0];
    b.extend(setpoint.to_le_bytes());
    b.push(0);
    b
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

fn lines_with(log: &Capture, needle: &str) -> Vec<String> {
    log.lines()
        .into_iter()
        .filter(|l| l.contains(needle))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nan_or_infinite_command_is_refused_counted_and_logged() {
    let (w, m) = World::standard(Mtu::Fd).await;
    let log = Capture::new();
    let dds = MemDds::default();
    let bridge = Ros2Bridge::start(m.clone(), dds.clone(), opts())
        .instrument(log.span().clone())
        .await;
    let feed = dds.feeds.lock().unwrap()["rt/motor_driver1/motor0/target"].clone();
    let writer = [0x42; 16];
    let mut seq = 0;
    let mut send = |v: f32| {
        seq += 1;
        feed.send(Received {
            cdr: target_cdr(v),
            id: Some(SampleId {
                writer_guid: writer,
                seq,
            }),
            source_time: None,
        })
        .unwrap();
    };
    // 300 non-finite duties over 300 ms: none may reach the node.
    for i in 0..300 {
        send([f32::NAN, f32::INFINITY, f32::NEG_INFINITY][i % 3]);
        if i % 10 == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    settle("300 refusals", || bridge.stats().refused == 300).await;
    let s = bridge.stats();
    assert_eq!((s.non_finite, s.forwarded), (300, 0), "{s:?}");
    let v = w.motor(MD1).with(|f| f.axis(0).unwrap().velocity);
    assert_eq!(v, 0.0, "a non-finite duty moved motor0");
    let said = lines_with(&log, "finite numbers only");
    assert!(
        said[0].contains("/motor_driver1/motor0/target: refused: value is NaN"),
        "{said:?}"
    );
    // Logged per writer at most once a second: the first, maybe one more.
    assert!((1..=2).contains(&said.len()), "{said:?}");
    let drops = bridge.drops();
    let d = drops
        .iter()
        .find(|d| d.writer == Some(writer))
        .expect("the writer's drops");
    assert_eq!(d.refused, 300);
    // A finite command after them is carried.
    for _ in 0..40 {
        send(0.5);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    settle("motor0 moving", || {
        w.motor(MD1).with(|f| f.axis(0).unwrap().velocity) > 0.05
    })
    .await;
    assert_eq!(bridge.stats().non_finite, 300);
}

/// A request in the Cyclone framing: client id, sequence number, then `body`'s fields.
fn cyclone_request(client: u64, seq: i64, fields: &[u8]) -> Received {
    let mut b = vec![0, 1, 0, 0];
    b.extend(client.to_le_bytes());
    b.extend(seq.to_le_bytes());
    b.extend(fields);
    Received {
        cdr: b,
        id: None,
        source_time: None,
    }
}

fn replies(dds: &MemDds, topic: &str) -> Vec<Vec<u8>> {
    dds.written
        .lock()
        .unwrap()
        .get(topic)
        .map(|w| w.iter().map(|(b, _)| b.clone()).collect())
        .unwrap_or_default()
}

/// The reply's fields after the Cyclone header, as `ty`.
fn reply_body(store: &Interfaces, ty: &str, b: &[u8]) -> RosValue {
    let mut body = b[..4].to_vec();
    body.extend(&b[20..]);
    dynamic::decode(store, ty, &body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_service_request_is_logged_and_answered_where_it_names_its_client() {
    let (_w, m) = World::standard(Mtu::Fd).await;
    let log = Capture::new();
    let dds = MemDds::default();
    let bridge = Ros2Bridge::start(m.clone(), dds.clone(), opts())
        .instrument(log.span().clone())
        .await;
    let store = Interfaces::bundled();

    // A node's own service: set_parameters_atomically whose sequence of parameters
    // claims 2^31 elements in 4 bytes. The header names the client: answered
    // `successful: false` with the reason.
    let feed =
        dds.feeds.lock().unwrap()["rq/motor_driver1/set_parameters_atomicallyRequest"].clone();
    let topic = "rr/motor_driver1/set_parameters_atomicallyReply";
    for seq in 1..=50 {
        feed.send(cyclone_request(77, seq, &[0, 0, 0, 0x80]))
            .unwrap();
    }
    settle("50 answers", || replies(&dds, topic).len() == 50).await;
    let b = &replies(&dds, topic)[0];
    assert_eq!(&b[4..12], &77u64.to_le_bytes());
    assert_eq!(&b[12..20], &1i64.to_le_bytes());
    let RosValue::Msg(f) = reply_body(
        &store,
        "rcl_interfaces/srv/SetParametersAtomically_Response",
        b,
    ) else {
        panic!()
    };
    let RosValue::Msg(result) = &f[0] else {
        panic!()
    };
    assert_eq!(result[0], RosValue::Bool(false));
    let why = result[1].as_str().unwrap();
    assert!(why.contains("does not decode"), "{why}");
    // get_parameters: its response has no place for a reason; answered empty.
    let feed = dds.feeds.lock().unwrap()["rq/motor_driver1/get_parametersRequest"].clone();
    feed.send(cyclone_request(78, 9, &[0xff, 0xff, 0xff, 0x7f]))
        .unwrap();
    let topic = "rr/motor_driver1/get_parametersReply";
    settle("get_parameters answered", || {
        replies(&dds, topic).len() == 1
    })
    .await;
    let RosValue::Msg(f) = reply_body(
        &store,
        "rcl_interfaces/srv/GetParameters_Response",
        &replies(&dds, topic)[0],
    ) else {
        panic!()
    };
    assert_eq!(f[0].as_seq().map(<[RosValue]>::len), Some(0));

    // Logged, at most once a second per service: 50 malformed requests, a line or two.
    let said = lines_with(&log, "set_parameters_atomically: refused: a ");
    assert!((1..=2).contains(&said.len()), "{said:?}");
    assert!(said[0].contains("does not decode"), "{said:?}");
    assert_eq!(
        lines_with(&log, "/motor_driver1/get_parameters: refused").len(),
        1
    );

    // A node service's request too short to hold the header: it names no client, so
    // nothing can be answered; counted and logged at most once a second.
    let feed = dds.feeds.lock().unwrap()["rq/motor_driver1/node_infoRequest"].clone();
    for _ in 0..30 {
        feed.send(Received {
            cdr: vec![0, 1, 0, 0, 1],
            id: None,
            source_time: None,
        })
        .unwrap();
    }
    settle("30 unanswerable", || {
        bridge.stats().calls_unanswerable == 30
    })
    .await;
    assert!(replies(&dds, "rr/motor_driver1/node_infoReply").is_empty());
    let said = lines_with(
        &log,
        "/motor_driver1/node_info: a request that cannot be answered",
    );
    assert!((1..=2).contains(&said.len()), "{said:?}");
    assert!(
        said[0].contains("shorter than the Cyclone request header"),
        "{said:?}"
    );

    // A routed service (the node's own SetBool): the same, and a malformed body is
    // answered with the reason (as before) and logged at most once a second.
    let feed = dds.feeds.lock().unwrap()["rq/io_board3/out0/setRequest"].clone();
    for _ in 0..20 {
        feed.send(Received {
            cdr: vec![0, 1, 0, 0, 1, 2],
            id: None,
            source_time: None,
        })
        .unwrap();
    }
    for seq in 1..=20 {
        // A bool byte of 7.
        feed.send(cyclone_request(5, seq, &[7])).unwrap();
    }
    let topic = "rr/io_board3/out0/setReply";
    settle("20 refusals answered", || replies(&dds, topic).len() == 20).await;
    settle("50 unanswerable", || {
        bridge.stats().calls_unanswerable == 50
    })
    .await;
    let said = lines_with(
        &log,
        "/io_board3/out0/set: a request that cannot be answered",
    );
    assert!((1..=2).contains(&said.len()), "{said:?}");
    let said = lines_with(&log, "/io_board3/out0/set: refused: ");
    assert!((1..=2).contains(&said.len()), "{said:?}");
    assert!(said[0].contains("answered with the reason"), "{said:?}");
}
