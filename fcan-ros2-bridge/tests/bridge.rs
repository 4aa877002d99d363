//! The bridge over the example nodes on the simulated bus, with an in-memory DDS in place
//! of RustDDS (the real one is judged by Cyclone DDS in `.ci/ros2-dds-peer.sh`): which
//! topics get which endpoints, that what is written is the master's samples in CDR,
//! that a command from DDS reaches a node and a malformed one does not, and that a node
//! that goes or reboots takes its endpoints with it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::id::NodeId;
use fcan_core::msg::DataDirection;
use fcan_e2e::{World, IO3, MD1, MD2};
use fcan_ros2::mapping::Origin;
use fcan_ros2::{cdr, Interfaces};
use fcan_ros2_bridge::dds::{Dds, DdsError, DdsWriter, Endpoint};
use fcan_ros2_bridge::{Ros2Bridge, Ros2Options};
use futures_util::stream::BoxStream;
use tokio::sync::mpsc;

/// Every sample written, by DDS topic; readers fed by the test; live writers counted.
#[derive(Clone, Default)]
struct MemDds {
    written: Arc<Mutex<BTreeMap<String, Vec<Vec<u8>>>>>,
    feeds: Arc<Mutex<BTreeMap<String, mpsc::UnboundedSender<Vec<u8>>>>>,
    made: Arc<AtomicUsize>,
    live_writers: Arc<AtomicUsize>,
}

struct MemWriter {
    topic: String,
    dds: MemDds,
}

impl Drop for MemWriter {
    fn drop(&mut self) {
        self.dds.live_writers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl DdsWriter for MemWriter {
    fn write(&self, cdr: &[u8]) -> Result<(), DdsError> {
        let mut w = self.dds.written.lock().unwrap();
        w.entry(self.topic.clone()).or_default().push(cdr.to_vec());
        Ok(())
    }
}

impl Dds for MemDds {
    type Writer = MemWriter;
    fn writer(&self, e: &Endpoint) -> Result<MemWriter, DdsError> {
        self.made.fetch_add(1, Ordering::SeqCst);
        self.live_writers.fetch_add(1, Ordering::SeqCst);
        Ok(MemWriter {
            topic: e.topic.clone(),
            dds: self.clone(),
        })
    }
    fn reader(&self, e: &Endpoint) -> Result<BoxStream<'static, Vec<u8>>, DdsError> {
        self.made.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::unbounded_channel();
        self.feeds.lock().unwrap().insert(e.topic.clone(), tx);
        Ok(Box::pin(futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|v| (v, rx)) },
        )))
    }
}

fn quiet() -> Ros2Options {
    let mut o = Ros2Options::default();
    o.log = Some(Arc::new(|_: &str| {}));
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
    let writers = routes
        .iter()
        .filter(|r| r.dir == DataDirection::S2m)
        .count();
    assert_eq!(dds.live_writers.load(Ordering::SeqCst), writers);
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
        .map(|b| cdr::decode(&store, &route.binding, &route.fields, b).unwrap())
        .collect();
    // The master's samples are a run of what the bridge wrote (numbered by `sequence`).
    let start = written
        .iter()
        .position(|v| v == &seen[0])
        .expect("first sample written");
    assert_eq!(&written[start..start + seen.len()], &seen[..]);
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
    // motor1: a Target without its `type` byte, and a cut header: never sent.
    let bad = feed("rt/motor_driver1/motor1/target");
    for _ in 0..20 {
        bad.send(vec![0, 1, 0, 0, 0, 0, 0, 63]).unwrap();
        bad.send(vec![0, 1]).unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // motor0: duty 0.5, streamed as a ROS node would.
    let good = feed("rt/motor_driver1/motor0/target");
    for _ in 0..60 {
        good.send(target_cdr(0.5, 0)).unwrap();
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
    let md1 = count(&bridge, "/motor_driver1/");
    let md2 = count(&bridge, "/motor_driver2/");
    let writers = dds.live_writers.load(Ordering::SeqCst);
    let made = dds.made.load(Ordering::SeqCst);
    assert!(md1 > 0 && md2 > 0);
    // motor_driver1 reboots: served again, on new endpoints, the old ones dropped.
    w.reboot_motor(MD1);
    settle("motor_driver1 served again on new endpoints", || {
        dds.made.load(Ordering::SeqCst) == made + md1
            && count(&bridge, "/motor_driver1/") == md1
            && dds.live_writers.load(Ordering::SeqCst) == writers
    })
    .await;
    // motor_driver2 leaves the bus: its endpoints go (4 motors: one feedback writer each).
    w.motors.remove(&MD2).unwrap().stop();
    settle("motor_driver2's endpoints gone", || {
        count(&bridge, "/motor_driver2/") == 0
            && dds.live_writers.load(Ordering::SeqCst) == writers - 4
    })
    .await;
    bridge.stop();
    settle("every writer dropped", || {
        dds.live_writers.load(Ordering::SeqCst) == 0
    })
    .await;
}
