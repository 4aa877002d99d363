//! The joints face (`fcan_ros2_bridge::joints`, `fcan serve --ros2 --joints`) over the
//! example motor drivers on the simulated bus, with an in-memory DDS as in
//! `tests/bridge.rs`: JointState commands move the motors and the JointStates published
//! follow their feedback; refused commands change nothing; the states come at about the
//! configured rate; a node pulled latches a fault, the states stop and commands have no
//! effect until `clear_fault` activates the loop again; with a command timeout, silence
//! stops the joints (their own watchdogs) until the next command. The status watcher
//! (`JointsBridge::watch`, what `fcan serve` puts on `fcan/<bus>/joints/status`) sees
//! each change: active, then faulted with the fault's own cause, then stopped.

use std::time::{Duration, Instant};

use fcan_core::frame::Mtu;
use fcan_cycle::CycleConfig;
use fcan_e2e::capture::Capture;
use fcan_e2e::{World, MD1, MD2};
use fcan_master::Master;
use fcan_ros2::dynamic::{self, RosValue};
use fcan_ros2::Interfaces;
use fcan_ros2_bridge::dds::Received;
use fcan_ros2_bridge::joints::{
    JointsBridge, JointsOptions, JointsState, JointsStatus, JOINT_STATE,
};
use fcan_ros2_bridge::rpc::Framing;
use tokio::sync::mpsc;

mod common;
use common::MemDds;

const STATES: &str = "rt/robot_joint_states";
const COMMANDS: &str = "rt/robot_joint_commands";
const RATE: f64 = 100.0;

/// Two wheels: motor 0 of each driver, in velocity mode; the left one with an effort
/// state (its current), the right one without. A generous feedback timeout: the test
/// runs in real time on a busy machine.
fn config() -> CycleConfig {
    CycleConfig::from_json(&format!(
        r#"{{
  "rate_hz": {RATE},
  "feedback_timeout_ms": 200,
  "joints": [
    {{ "name": "left_wheel",
      "states": [
        {{ "interface": "position", "from": "/motor_driver1/motor0/feedback.position" }},
        {{ "interface": "velocity", "from": "/motor_driver1/motor0/feedback.velocity" }},
        {{ "interface": "effort", "from": "/motor_driver1/motor0/feedback.current" }} ],
      "commands": [
        {{ "interface": "velocity", "to": "/motor_driver1/motor0/target{{type: 1}}.value", "safe": 0.0 }} ] }},
    {{ "name": "right_wheel",
      "states": [
        {{ "interface": "position", "from": "/motor_driver2/motor0/feedback.position" }},
        {{ "interface": "velocity", "from": "/motor_driver2/motor0/feedback.velocity" }} ],
      "commands": [
        {{ "interface": "velocity", "to": "/motor_driver2/motor0/target{{type: 1}}.value", "safe": 0.0 }} ] }}
  ],
  "enable": [
    {{ "call": "/motor_driver1/motor0/clear_fault", "expect": {{ "success": true }} }},
    {{ "call": "/motor_driver2/motor0/clear_fault", "expect": {{ "success": true }} }} ],
  "safe_stop": {{ "repeats": 3, "interval_ms": 10 }}
}}"#
    ))
    .unwrap()
}

/// Gains so the example motors follow a velocity command.
async fn tune(m: &Master, node: &str) {
    for (p, v) in [("kp", 0.05), ("ki", 1.0)] {
        m.param_set(
            &format!("{node}.motor0.velocity.{p}"),
            fcan_master::value::Value::Float(v),
        )
        .await
        .unwrap();
    }
}

fn options() -> JointsOptions {
    let mut o = JointsOptions::default();
    o.framing = Framing::Cyclone;
    o
}

async fn settle<F: FnMut() -> bool>(what: &str, bound: Duration, mut f: F) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < bound, "{what}: not reached in {bound:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn floats(v: &[f64]) -> RosValue {
    RosValue::Seq(v.iter().map(|x| RosValue::Float(*x)).collect())
}

/// A JointState command as a ROS publisher (TopicBasedSystem) sends it.
fn command(names: &[&str], position: &[f64], velocity: &[f64]) -> Received {
    let v = RosValue::Msg(vec![
        RosValue::Msg(vec![
            RosValue::Msg(vec![RosValue::Int(0), RosValue::UInt(0)]),
            RosValue::Str(String::new()),
        ]),
        RosValue::Seq(names.iter().map(|n| RosValue::Str(n.to_string())).collect()),
        floats(position),
        floats(velocity),
        floats(&[]),
    ]);
    Received {
        cdr: dynamic::encode(&Interfaces::bundled(), JOINT_STATE, &v).unwrap(),
        id: None,
        source_time: None,
    }
}

/// One published JointState: names, position, velocity, effort.
struct State {
    names: Vec<String>,
    position: Vec<f64>,
    velocity: Vec<f64>,
    effort: Vec<f64>,
}

fn count(dds: &MemDds, topic: &str) -> usize {
    dds.written.lock().unwrap().get(topic).map_or(0, Vec::len)
}

fn latest(dds: &MemDds) -> State {
    let b = dds.written.lock().unwrap()[STATES]
        .last()
        .unwrap()
        .0
        .clone();
    let RosValue::Msg(f) = dynamic::decode(&Interfaces::bundled(), JOINT_STATE, &b).unwrap() else {
        panic!()
    };
    let nums = |v: &RosValue| -> Vec<f64> {
        v.as_seq()
            .unwrap()
            .iter()
            .map(|x| match x {
                RosValue::Float(f) => *f,
                o => panic!("{o:?}"),
            })
            .collect()
    };
    State {
        names: f[1]
            .as_seq()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect(),
        position: nums(&f[2]),
        velocity: nums(&f[3]),
        effort: nums(&f[4]),
    }
}

/// The last status published on `/fcan_joints/status`.
fn status_topic(dds: &MemDds) -> String {
    let b = dds.written.lock().unwrap()["rt/fcan_joints/status"]
        .last()
        .unwrap()
        .0
        .clone();
    let RosValue::Msg(f) =
        dynamic::decode(&Interfaces::bundled(), "std_msgs/msg/String", &b).unwrap()
    else {
        panic!()
    };
    f[0].as_str().unwrap().to_string()
}

/// Streams `cmd` every 20 ms for `time`.
async fn stream(
    feed: &mpsc::UnboundedSender<Received>,
    time: Duration,
    cmd: impl Fn() -> Received,
) {
    let start = Instant::now();
    while start.elapsed() < time {
        feed.send(cmd()).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn axis_velocity(w: &World, id: u8) -> f32 {
    w.motor(id).with(|f| f.axis(0).unwrap().velocity)
}

/// The joints started in `log`'s span: their diagnostics are its lines.
async fn started(m: &Master, dds: &MemDds, log: &Capture) -> JointsBridge {
    tune(m, "motor_driver1").await;
    tune(m, "motor_driver2").await;
    let joints = log
        .span()
        .in_scope(|| JointsBridge::start(m.clone(), dds, config(), options()))
        .unwrap();
    settle("the joints active", Duration::from_secs(10), || {
        joints.status() == "active"
    })
    .await;
    assert_eq!(status_topic(dds), "active");
    joints
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joint_state_commands_move_the_joints_and_the_states_follow() {
    let (w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let lines = Capture::new();
    let joints = started(&m, &dds, &lines).await;
    let feed = dds.feeds.lock().unwrap()[COMMANDS].clone();

    // Before any command, nothing moves.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(axis_velocity(&w, MD1), 0.0);

    // 2 s of velocity commands, as TopicBasedSystem streams them.
    stream(&feed, Duration::from_secs(2), || {
        command(&["left_wheel", "right_wheel"], &[], &[2.0, -1.0])
    })
    .await;
    let s = latest(&dds);
    assert_eq!(s.names, ["left_wheel", "right_wheel"]);
    assert!(
        (s.velocity[0] - 2.0).abs() < 0.3,
        "left follows: {:?}",
        s.velocity
    );
    assert!(
        (s.velocity[1] + 1.0).abs() < 0.3,
        "right follows: {:?}",
        s.velocity
    );
    assert!(
        s.position[0] > 1.0 && s.position[1] < -0.5,
        "{:?}",
        s.position
    );
    // Only the left wheel has an effort state: the right one's is NaN.
    assert_eq!(s.effort.len(), 2);
    assert!(
        s.effort[0].is_finite() && s.effort[1].is_nan(),
        "{:?}",
        s.effort
    );
    // The firmware agrees with what was published.
    let v = f64::from(axis_velocity(&w, MD1));
    assert!(
        (v - s.velocity[0]).abs() < 0.3,
        "motor {v}, published {}",
        s.velocity[0]
    );
    let st = joints.stats();
    assert!(st.commands >= 80, "{st:?}");
    assert_eq!((st.refused, st.faults), (0, 0), "{st:?}");

    // One joint only: the other keeps its last command.
    stream(&feed, Duration::from_millis(1500), || {
        command(&["right_wheel"], &[], &[1.0])
    })
    .await;
    let s = latest(&dds);
    assert!(
        (s.velocity[0] - 2.0).abs() < 0.3,
        "left held: {:?}",
        s.velocity
    );
    assert!(
        (s.velocity[1] - 1.0).abs() < 0.3,
        "right turned: {:?}",
        s.velocity
    );

    // The state rate over a window, against the configured 100 Hz (loosely: this is a
    // real-time test on a shared machine).
    let (n0, t0) = (count(&dds, STATES), Instant::now());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rate = (count(&dds, STATES) - n0) as f64 / t0.elapsed().as_secs_f64();
    println!("states at {rate:.1} Hz (configured {RATE} Hz)");
    assert!(rate > 0.5 * RATE && rate < 1.1 * RATE, "{rate} Hz");

    // Refused whole, logged, nothing changes: arrays of the wrong length, an unknown
    // joint, a position for a joint without a position command, a value the f32 field
    // cannot carry (the cycle's range check).
    let before = joints.stats();
    for bad in [
        command(&["left_wheel", "right_wheel"], &[], &[0.0]),
        command(&["left_wheel", "elbow"], &[], &[0.0, 0.0]),
        command(&["left_wheel"], &[0.0], &[]),
        command(&["left_wheel"], &[], &[1e300]),
    ] {
        feed.send(bad).unwrap();
        // One at a time: the refusal log is limited to a line a second.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let after = joints.stats();
    assert_eq!(after.refused - before.refused, 4, "{after:?}");
    assert_eq!(after.commands, before.commands, "{after:?}");
    let s = latest(&dds);
    assert!(
        (s.velocity[0] - 2.0).abs() < 0.3,
        "left unchanged: {:?}",
        s.velocity
    );
    let log = lines.text();
    for words in [
        "WARN fcan::joints: /robot_joint_commands: refused: `velocity` has 1 values for 2 names",
        "refused: unknown joint `elbow` (joints: left_wheel, right_wheel)",
        "refused: joint `left_wheel` has no `position` command interface",
        "refused: write: command left_wheel/velocity = 1000000",
        "does not fit its field",
    ] {
        assert!(log.contains(words), "{words}:\n{log}");
    }
    joints.stop().await;
    assert_eq!(status_topic(&dds), "stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pulled_node_latches_a_fault_and_commands_have_no_effect_until_cleared() {
    let (mut w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let lines = Capture::new();
    let joints = started(&m, &dds, &lines).await;
    let feed = dds.feeds.lock().unwrap()[COMMANDS].clone();
    stream(&feed, Duration::from_secs(1), || {
        command(&["left_wheel", "right_wheel"], &[], &[1.0, 1.0])
    })
    .await;
    assert!(axis_velocity(&w, MD1) > 0.5);

    // motor_driver2 leaves the bus, as if its cable came loose.
    w.motor(MD2).stop();
    settle("the fault latched", Duration::from_secs(3), || {
        joints.status().starts_with("faulted")
    })
    .await;
    let status = status_topic(&dds);
    println!("status: {status}");
    assert!(status.starts_with("faulted: "), "{status}");
    assert!(
        status.contains("motor_driver2"),
        "names the node or its state: {status}"
    );
    // Its own cause, first in the status and in the log line (`/rosout`): the host-side
    // feedback timeout, or the node going offline, whichever the cycle saw first.
    assert!(
        status.starts_with("faulted: feedback timeout (host side): ")
            || status.starts_with("faulted: node motor_driver2 went offline"),
        "{status}"
    );
    let log = lines.text();
    assert!(
        (log.contains(
            "ERROR fcan::joints: FAULT (feedback_timeout): feedback timeout (host side)"
        ) || log.contains("ERROR fcan::joints: FAULT (node_lost): node motor_driver2"))
            && log.contains("/fcan_joints/clear_fault"),
        "{log}"
    );

    // The states stop; commands have no effect: the left wheel (on a board still on the
    // bus) was stopped by the safe stop and stays stopped.
    let n = count(&dds, STATES);
    let before = joints.stats();
    stream(&feed, Duration::from_secs(1), || {
        command(&["left_wheel", "right_wheel"], &[], &[3.0, 3.0])
    })
    .await;
    assert_eq!(count(&dds, STATES), n, "no state published while faulted");
    let v = axis_velocity(&w, MD1);
    assert!(v.abs() < 0.1, "left wheel stopped, not driven: {v}");
    let after = joints.stats();
    assert_eq!(after.commands, before.commands, "{after:?}");
    assert!(after.ignored - before.ignored >= 40, "{after:?}");
    assert_eq!(after.faults, 1, "{after:?}");

    // motor_driver2 comes back (a new boot); clear_fault activates again.
    let boot = w.reboot_motor(MD2);
    let start = Instant::now();
    while !fcan_e2e::node_info(&m, MD2)
        .await
        .is_some_and(|n| n.boot_id == boot && n.phase == fcan_master::Phase::Running)
    {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "motor_driver2 back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let reply_topic = "rr/fcan_joints/clear_faultReply";
    let request = |seq: i64| {
        let body = dynamic::encode(
            &Interfaces::bundled(),
            "std_srvs/srv/Trigger_Request",
            &RosValue::Msg(vec![RosValue::UInt(0)]),
        )
        .unwrap();
        let mut b = vec![0, 1, 0, 0];
        b.extend(9u64.to_le_bytes());
        b.extend(seq.to_le_bytes());
        b.extend(&body[4..]);
        Received {
            cdr: b,
            id: None,
            source_time: None,
        }
    };
    let service = dds.feeds.lock().unwrap()["rq/fcan_joints/clear_faultRequest"].clone();
    let mut answer = (false, String::new());
    for seq in 1..=5 {
        service.send(request(seq)).unwrap();
        settle("clear_fault answered", Duration::from_secs(5), || {
            count(&dds, reply_topic) == seq as usize
        })
        .await;
        let b = dds.written.lock().unwrap()[reply_topic]
            .last()
            .unwrap()
            .0
            .clone();
        assert_eq!(
            &b[12..20],
            &seq.to_le_bytes(),
            "the reply names the request"
        );
        let mut body = b[..4].to_vec();
        body.extend(&b[20..]);
        let RosValue::Msg(f) = dynamic::decode(
            &Interfaces::bundled(),
            "std_srvs/srv/Trigger_Response",
            &body,
        )
        .unwrap() else {
            panic!()
        };
        answer = (
            f[0] == RosValue::Bool(true),
            f[1].as_str().unwrap().to_string(),
        );
        if answer.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(answer, (true, "active".to_string()));
    assert_eq!(status_topic(&dds), "active");

    // Commands move the joints again, the new boot of motor_driver2 included.
    stream(&feed, Duration::from_millis(1500), || {
        command(&["left_wheel", "right_wheel"], &[], &[1.0, -1.0])
    })
    .await;
    let s = latest(&dds);
    assert!((s.velocity[0] - 1.0).abs() < 0.3, "{:?}", s.velocity);
    assert!((s.velocity[1] + 1.0).abs() < 0.3, "{:?}", s.velocity);
    assert!(count(&dds, STATES) > n, "states again");
    assert_eq!(joints.stats().activations, 2);
}

/// With a command timeout: commands that stop coming are no longer sent, the motor's
/// own watchdog stops it, the loop stays active (states go on), and the next command
/// resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_command_timeout_silence_stops_the_joints_until_the_next_command() {
    let (w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let lines = Capture::new();
    tune(&m, "motor_driver1").await;
    tune(&m, "motor_driver2").await;
    let mut opts = options();
    opts.command_timeout = Some(Duration::from_millis(300));
    let joints = lines
        .span()
        .in_scope(|| JointsBridge::start(m.clone(), &dds, config(), opts))
        .unwrap();
    settle("the joints active", Duration::from_secs(10), || {
        joints.status() == "active"
    })
    .await;
    let feed = dds.feeds.lock().unwrap()[COMMANDS].clone();
    stream(&feed, Duration::from_secs(1), || {
        command(&["left_wheel"], &[], &[2.0])
    })
    .await;
    assert!(axis_velocity(&w, MD1) > 1.5);
    // Silence: after 300 ms the loop stops sending, 100 ms later the motor's watchdog
    // stops it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let v = axis_velocity(&w, MD1);
    assert!(v.abs() < 0.1, "stopped by its watchdog: {v}");
    assert_eq!(joints.status(), "active");
    let n = count(&dds, STATES);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(count(&dds, STATES) > n + 10, "the states go on");
    let log = lines.text();
    assert!(
        log.contains("WARN fcan::joints: no command for 300ms: commands no longer sent"),
        "{log}"
    );
    // The next command resumes.
    stream(&feed, Duration::from_secs(1), || {
        command(&["left_wheel"], &[], &[2.0])
    })
    .await;
    assert!(axis_velocity(&w, MD1) > 1.5);
    assert!(lines
        .lines()
        .iter()
        .any(|l| l == "INFO fcan::joints: commands resumed"));
}

/// Hold, don't jump: a position joint no JointState names is sent the position measured
/// at activation (the cycle's seed), not its `safe` number, while another joint is
/// commanded; and a safe stop holds it where it was measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_joint_never_commanded_holds_where_it_is() {
    let (w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let lines = Capture::new();
    tune(&m, "motor_driver1").await;
    tune(&m, "motor_driver2").await;
    // motor_driver1's position loop, strong enough that any other target (0, the
    // old default of a command never set) moves it well within a second.
    m.param_set(
        "motor_driver1.motor0.position.kp",
        fcan_master::value::Value::Float(4.0),
    )
    .await
    .unwrap();
    // The left joint's encoder reads 1.5 where it stands.
    let answer = m
        .call(
            "/motor_driver1/motor0/reset_encoder",
            fcan_master::value::Value::Struct(vec![
                ("offset".into(), fcan_master::value::Value::Bool(false)),
                ("value".into(), fcan_master::value::Value::Float(1.5)),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(answer.to_json()["success"], true);
    let config = CycleConfig::from_json(&format!(
        r#"{{
  "rate_hz": {RATE},
  "feedback_timeout_ms": 200,
  "joints": [
    {{ "name": "left_wheel",
      "states": [ {{ "interface": "position", "from": "/motor_driver1/motor0/feedback.position" }} ],
      "commands": [
        {{ "interface": "position", "to": "/motor_driver1/motor0/target{{type: 2}}.value", "safe": "hold" }} ] }},
    {{ "name": "right_wheel",
      "states": [
        {{ "interface": "position", "from": "/motor_driver2/motor0/feedback.position" }},
        {{ "interface": "velocity", "from": "/motor_driver2/motor0/feedback.velocity" }} ],
      "commands": [
        {{ "interface": "velocity", "to": "/motor_driver2/motor0/target{{type: 1}}.value", "safe": 0.0, "initial": 0.0 }} ] }}
  ],
  "safe_stop": {{ "repeats": 3, "interval_ms": 10 }}
}}"#
    ))
    .unwrap();
    let joints = lines
        .span()
        .in_scope(|| JointsBridge::start(m.clone(), &dds, config, options()))
        .unwrap();
    settle("the joints active", Duration::from_secs(10), || {
        joints.status() == "active"
    })
    .await;
    let feed = dds.feeds.lock().unwrap()[COMMANDS].clone();
    // Only the right wheel is commanded; the left one's position goes out each cycle.
    stream(&feed, Duration::from_millis(1500), || {
        command(&["right_wheel"], &[], &[1.0])
    })
    .await;
    let s = latest(&dds);
    assert!(
        (s.velocity[1] - 1.0).abs() < 0.3,
        "right turns: {:?}",
        s.velocity
    );
    assert!(
        (s.position[0] - 1.5).abs() < 0.05,
        "left holds where it was: {:?}",
        s.position
    );
    // The firmware agrees: it holds 1.5 on its encoder's reading.
    let at = w.motor(MD1).with(|f| f.axis(0).unwrap().position);
    assert!((f64::from(at) - 1.5).abs() < 0.05, "motor at {at}");
    assert_eq!(joints.stats().faults, 0);
    joints.stop().await;
}

/// The observer of the loop's status: every change reaches it, as a value with the
/// fault's cause apart. A node pulled: `faulted`, cause `feedback_timeout` (its feedback
/// stops within the 200 ms timeout, long before the master calls it offline after 3 s),
/// the fault's text the status topic's; `since` moves with each new state; `stop` ends
/// with `stopped`, which the watcher still sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_watcher_sees_the_fault_with_its_cause() {
    let (w, m) = World::standard(Mtu::Fd).await;
    let dds = MemDds::default();
    let lines = Capture::new();
    let joints = started(&m, &dds, &lines).await;
    let mut rx = joints.watch();
    let now = rx.borrow_and_update().clone();
    assert_eq!(now.state, JointsState::Active, "{now:?}");
    assert_eq!((now.cause, now.fault.as_deref()), (None, None));
    assert_eq!(now.text, "active");
    // Every later change, collected as it comes.
    let seen = tokio::spawn(async move {
        let mut seen: Vec<JointsStatus> = Vec::new();
        while rx.changed().await.is_ok() {
            seen.push(rx.borrow_and_update().clone());
        }
        seen
    });

    let pulled_at = std::time::SystemTime::now();
    w.motor(MD2).stop();
    settle("the fault latched", Duration::from_secs(3), || {
        joints.status().starts_with("faulted")
    })
    .await;
    let f = joints.watch().borrow().clone();
    assert_eq!(f.state, JointsState::Faulted, "{f:?}");
    assert_eq!(f.cause, Some("feedback_timeout"), "{f:?}");
    let fault = f.fault.clone().expect("the fault's text");
    assert!(
        fault.starts_with("feedback timeout (host side): state right_wheel/"),
        "{fault}"
    );
    assert_eq!(f.text, format!("faulted: {fault}"));
    assert_eq!(status_topic(&dds), f.text, "the topic says the same");
    assert!(f.since >= pulled_at && f.since > now.since, "{f:?} {now:?}");

    joints.stop().await;
    let seen = tokio::time::timeout(Duration::from_secs(5), seen)
        .await
        .expect("the watcher ends when the loop is gone")
        .unwrap();
    let states: Vec<JointsState> = seen.iter().map(|s| s.state).collect();
    assert_eq!(
        states,
        [JointsState::Faulted, JointsState::Stopped],
        "{seen:?}"
    );
    assert_eq!(seen[0], f);
    assert_eq!(seen[1].cause, None);
}
