//! The cycle's safety rules (issue 34, items 2–4), through its public API, against fake
//! nodes of a test schema (run by the firmware's own runtime, `fcan-fake`) on the
//! simulated bus under a real master, on a paused clock:
//!
//! * hold, don't jump: a command never written starts from its measured state, an
//!   explicit initial value wins, a safe stop of a `hold` command sends the position
//!   measured when the fault latched, deactivation flushes the commands once (no safe
//!   stop, no disable), a failed activation undoes the enables it started, readiness
//!   is probed from the states only;
//! * a device's own fault bits latch a fault naming the joint, the field and the bit;
//! * the three deadlines (host-side feedback timeout, device-side command watchdog,
//!   acknowledgement timeout) each fire alone, with a cause of their own.
//!
//! The test device: `cmd` (m2s: `position`, `seq`) is mirrored into `feedback.target`
//! and `feedback.seq` (the echo); `sim` (m2s) is the test's hand on the device: it sets
//! `feedback.position`, `faults`, `driven` and `ready`. So the device's position does not
//! follow its command (it "has not got there yet"), and `feedback.target` shows the
//! last position command the device received.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::id::NodeId;
use fcan_cycle::{Condition, Cycle, CycleConfig, CycleError, Fault, FaultConfig, Lifecycle, Safe};
use fcan_fake::run::{run_fake, Running};
use fcan_fake::{FakeConfig, FakeNode, FakeSchema, Mirror};
use fcan_master::api::MasterApi;
use fcan_master::transport::sim::{SimBus, SimConfig};
use fcan_master::value::Value;
use fcan_master::{BusFrame, MasterError, NodeInfo, Sample, Status};
use fcan_master::{Master, MasterOptions};
use tokio::sync::{broadcast, mpsc};

const SCHEMA: &str = r#"
node: joint{i}
protocol: 2
options:
  allocation: static
limits:
  max_frames: 16
  max_copy_entries: 32
  service_buffer: 0
  service_reassembly: 1
types:
  Joint:
    topics:
      cmd:
        dir: m2s
        fields:
          position: f32
          seq: u16
      sim:
        dir: m2s
        fields:
          position: f32
          faults: u32
          driven: bool
          ready: bool
      feedback:
        dir: s2m
        period_us: 2000
        fields:
          position: f32
          target: f32
          seq: u16
          faults: u32
          driven: bool
          ready: bool
    services:
      enable:
        request: {}
        response: { success: bool }
      disable:
        request: {}
        response: { success: bool }
instances:
  - { type: Joint, max_count: 1, ns: j }
"#;

/// One simulated bus, a master, fake joint devices `joint1`, `joint2`, ….
struct World {
    _bus: SimBus,
    master: Master,
    nodes: Vec<Running>,
}

async fn world(n: u8) -> World {
    let loaded = fcan_codegen::load_sources(&[fcan_codegen::Source {
        name: "joint.yaml".into(),
        text: SCHEMA.into(),
    }])
    .expect("the test schema is valid");
    let blob = fcan_core::blob::encode(&loaded.schema);
    let schema = FakeSchema::from_blob(&blob).expect("the blob runs");
    let bus = SimBus::new(SimConfig::default());
    let master = Master::start(bus.endpoint(Mtu::Fd), MasterOptions::default())
        .await
        .expect("master starts");
    let mut nodes = Vec::new();
    for id in 1..=n {
        let mut mirror = Mirror::new();
        mirror
            .add("j/cmd.position=j/feedback.target", "test")
            .unwrap();
        mirror.add("j/cmd.seq=j/feedback.seq", "test").unwrap();
        mirror.add("j/sim=j/feedback", "test").unwrap();
        let node = FakeNode::new(
            schema.clone(),
            FakeConfig {
                node_id: NodeId::new(id).unwrap(),
                boot_id: 0x5afe_0000 + id as u32,
                counts: None,
                fd_capable: true,
                mirror,
            },
        )
        .expect("the fake node boots");
        nodes.push(run_fake(bus.endpoint(Mtu::Fd), node));
    }
    master
        .wait_for_nodes(n as usize, Duration::from_secs(5))
        .await
        .expect("the fake nodes run");
    World {
        _bus: bus,
        master,
        nodes,
    }
}

/// Sets what device `id` reports (its position, fault word, watchdog and ready flags).
async fn sim<M: MasterApi>(m: &M, id: u8, position: f64, faults: u32, driven: bool, ready: bool) {
    let v = Value::from_json(&serde_json::json!({
        "position": position, "faults": faults, "driven": driven, "ready": ready
    }))
    .unwrap();
    m.publish(&format!("/joint{id}/j/sim"), v).await.unwrap();
    // Mirrored, then sent with the next feedback.
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// A field of the newest feedback of device `id`, read through the master.
async fn feedback<M: MasterApi>(m: &M, id: u8, name: &str) -> f64 {
    let mut rx = m
        .subscribe(&format!("/joint{id}/j/feedback"))
        .await
        .unwrap();
    let s = tokio::time::timeout(Duration::from_millis(100), rx.recv())
        .await
        .expect("feedback comes")
        .unwrap();
    let Value::Struct(fields) = &s.value else {
        panic!("not a struct: {}", s.value)
    };
    let v = &fields.iter().find(|(n, _)| &**n == name).unwrap().1;
    match v {
        Value::Float(x) => *x,
        Value::UInt(u) => *u as f64,
        Value::Int(i) => *i as f64,
        Value::Bool(b) => *b as u8 as f64,
        other => panic!("not a number: {other}"),
    }
}

/// Joint `a` on device 1: position state and command (`hold`), the echo of the last
/// command (`target`).
fn one_joint() -> CycleConfig {
    CycleConfig::new(200.0)
        .feedback_timeout(Duration::from_millis(50))
        .state("a/position", "/joint1/j/feedback.position")
        .state("a/target", "/joint1/j/feedback.target")
        .command("a/position", "/joint1/j/cmd{seq: 0}.position", Safe::Hold)
        .safe_stop(3, Duration::from_millis(5))
}

/// Runs the loop for `cycles` periods, writing `command(cycle)` (the commands in force,
/// changed), and returns the first error.
async fn run<M: MasterApi>(
    cycle: &mut Cycle<M>,
    cycles: usize,
    mut command: impl FnMut(&mut [f64]),
) -> Result<(), CycleError> {
    let mut tick = tokio::time::interval(cycle.period());
    for _ in 0..cycles {
        tick.tick().await;
        cycle.read()?;
        let mut c = cycle.commands().to_vec();
        command(&mut c);
        cycle.write(&c)?;
    }
    Ok(())
}

/// Runs the loop until it faults (at most `cycles` periods); the fault.
async fn run_until_fault<M: MasterApi>(
    cycle: &mut Cycle<M>,
    cycles: usize,
    mut command: impl FnMut(&mut [f64]),
) -> Fault {
    match run(cycle, cycles, &mut command).await {
        Err(CycleError::Faulted(f)) => f,
        Err(e) => panic!("not a fault: {e}"),
        Ok(()) => panic!("no fault in {cycles} cycles"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_position_joint_never_commanded_does_not_move_on_activation() {
    let w = world(2).await;
    let m = &w.master;
    sim(m, 1, 0.7, 0, false, false).await;
    sim(m, 2, 0.2, 0, false, false).await;
    let config = CycleConfig::new(200.0)
        .state("a/position", "/joint1/j/feedback.position")
        .state("a/target", "/joint1/j/feedback.target")
        .state("b/position", "/joint2/j/feedback.position")
        .state("b/target", "/joint2/j/feedback.target")
        .command("a/position", "/joint1/j/cmd{seq: 0}.position", Safe::Hold)
        .command("b/position", "/joint2/j/cmd{seq: 0}.position", 0.0);
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    let (a, b) = (
        cycle.command_index("a/position").unwrap(),
        cycle.command_index("b/position").unwrap(),
    );
    // Seeded from the measured positions (b's numeric safe value 0.0 is not where it
    // is, so it is not where it starts).
    let seeds = cycle.commands().to_vec();
    assert!((seeds[a] - 0.7).abs() < 1e-6, "{seeds:?}");
    assert!((seeds[b] - 0.2).abs() < 1e-6, "{seeds:?}");
    // Activation itself sends nothing.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        feedback(m, 1, "target").await,
        0.0,
        "nothing sent on activation"
    );

    // The loop moves b only; a goes on being sent where it is.
    run(&mut cycle, 50, |c| c[b] = 0.5).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let a_target = feedback(m, 1, "target").await;
    assert!((a_target - 0.7).abs() < 1e-6, "a was sent {a_target}");
    let b_target = feedback(m, 2, "target").await;
    assert!((b_target - 0.5).abs() < 1e-6, "b was sent {b_target}");
}

#[tokio::test(start_paused = true)]
async fn an_explicit_initial_value_is_kept() {
    let w = world(1).await;
    let m = &w.master;
    sim(m, 1, 0.7, 0, false, false).await;
    let config = one_joint().initial("a/position", 0.4);
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    assert_eq!(
        cycle.commands(),
        [0.4],
        "the initial value wins over the state"
    );
    run(&mut cycle, 10, |_| {}).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let t = feedback(m, 1, "target").await;
    assert!((t - 0.4).abs() < 1e-6, "sent {t}");
}

#[tokio::test(start_paused = true)]
async fn a_fault_holds_the_measured_position() {
    let w = world(1).await;
    let m = &w.master;
    sim(m, 1, 0.7, 0, false, false).await;
    let config = one_joint().fault("a", FaultConfig::bits("/joint1/j/feedback.faults", &[]));
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    // Commanded to 0.9; the device is still at 0.7.
    run(&mut cycle, 20, |c| c[0] = 0.9).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!((feedback(m, 1, "target").await - 0.9).abs() < 1e-6);
    // A fault: the safe stop sends the measured 0.7, not the last command 0.9 (nor 0).
    sim(m, 1, 0.7, 0b100, false, false).await;
    let f = run_until_fault(&mut cycle, 20, |c| c[0] = 0.9).await;
    assert_eq!(f.cause(), "device_fault", "{f}");
    // The device moves on after the fault: the hold is a snapshot, not a moving target.
    sim(m, 1, 0.3, 0b100, false, false).await;
    cycle.deactivate().await.unwrap(); // waits for the safe stop
    tokio::time::sleep(Duration::from_millis(10)).await;
    let t = feedback(m, 1, "target").await;
    assert!((t - 0.7).abs() < 1e-6, "the safe stop sent {t}");
    assert_eq!(cycle.stats().safe_stop_sends, 3);
}

#[tokio::test(start_paused = true)]
async fn a_device_fault_bit_latches_with_its_name() {
    let w = world(1).await;
    let m = &w.master;
    sim(m, 1, 0.0, 0, false, false).await;
    let config = one_joint().fault(
        "a",
        FaultConfig::bits(
            "/joint1/j/feedback.faults",
            &[
                (0, "undervoltage"),
                (1, "overcurrent"),
                (2, "overtemperature"),
            ],
        ),
    );
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    run(&mut cycle, 20, |_| {}).await.unwrap();
    sim(m, 1, 0.0, 0b10 | 1 << 9, false, false).await;
    let f = run_until_fault(&mut cycle, 10, |_| {}).await;
    match &f {
        Fault::Device {
            joint,
            field,
            value,
            names,
        } => {
            assert_eq!(&**joint, "a");
            assert_eq!(&**field, "/joint1/j/feedback.faults");
            assert_eq!(*value, 0b10 | 1 << 9);
            let names: Vec<&str> = names.iter().map(|n| &**n).collect();
            assert_eq!(names, ["overcurrent", "bit 9"]);
        }
        other => panic!("not a device fault: {other}"),
    }
    let text = f.to_string();
    assert!(
        text.contains("overcurrent") && text.contains("joint a"),
        "{text}"
    );
    // Latched: read and write refuse until cleared.
    assert!(matches!(cycle.read(), Err(CycleError::Faulted(_))));
    assert!(matches!(cycle.write(&[0.0]), Err(CycleError::Faulted(_))));
    assert_eq!(cycle.lifecycle(), &Lifecycle::Faulted(f));
    // A device still showing the fault is not ready: activation names it.
    cycle.deactivate().await.unwrap();
    cycle.clear_fault();
    let e = cycle
        .activate(Duration::from_millis(300))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("device joint1 (joint a) not ready") && e.contains("overcurrent"),
        "{e}"
    );
}

/// Joint `a` with every deadline configured: feedback timeout 50 ms, the device's
/// `driven` flag as its watchdog, `seq` acknowledged within 100 ms.
fn guarded() -> CycleConfig {
    CycleConfig::new(200.0)
        .feedback_timeout(Duration::from_millis(50))
        .state("a/position", "/joint1/j/feedback.position")
        .state("a/seq", "/joint1/j/feedback.seq")
        .command("a/position", "/joint1/j/cmd.position", Safe::Hold)
        .command("a/seq", "/joint1/j/cmd.seq", 0.0)
        .watchdog("a", Condition::new("/joint1/j/feedback.driven", None))
        .fault("a", FaultConfig::bits("/joint1/j/feedback.faults", &[]))
        .ack("a/seq", "a/seq", Duration::from_millis(100))
}

/// A master whose publishes to one topic can be dropped: commands lost on their way.
#[derive(Clone)]
struct Lossy {
    inner: Master,
    topic: &'static str,
    drop: Arc<AtomicBool>,
}

impl MasterApi for Lossy {
    fn nodes(
        &self,
    ) -> impl std::future::Future<Output = Result<Vec<NodeInfo>, MasterError>> + Send {
        self.inner.nodes()
    }
    fn registry(
        &self,
    ) -> impl std::future::Future<Output = Result<fcan_master::registry::Registry, MasterError>> + Send
    {
        self.inner.registry()
    }
    fn status(&self) -> impl std::future::Future<Output = Result<Status, MasterError>> + Send {
        self.inner.status()
    }
    fn schema(
        &self,
        node: NodeId,
    ) -> impl std::future::Future<
        Output = Result<Option<Arc<fcan_master::engine::NodeSchema>>, MasterError>,
    > + Send {
        self.inner.schema(node)
    }
    fn plan(
        &self,
        node: NodeId,
    ) -> impl std::future::Future<Output = Result<Option<fcan_master::planner::Plan>, MasterError>> + Send
    {
        self.inner.plan(node)
    }
    fn events(&self) -> broadcast::Receiver<fcan_master::MasterEvent> {
        MasterApi::events(&self.inner)
    }
    fn frames(
        &self,
    ) -> impl std::future::Future<Output = Result<broadcast::Receiver<BusFrame>, MasterError>> + Send
    {
        MasterApi::frames(&self.inner)
    }
    fn subscribe(
        &self,
        topic: &str,
    ) -> impl std::future::Future<Output = Result<mpsc::UnboundedReceiver<Sample>, MasterError>> + Send
    {
        MasterApi::subscribe(&self.inner, topic)
    }
    fn publish(
        &self,
        topic: &str,
        value: Value,
    ) -> impl std::future::Future<Output = Result<(), MasterError>> + Send {
        MasterApi::publish(&self.inner, topic, value)
    }
    fn publish_many(
        &self,
        mut items: Vec<(String, Value)>,
    ) -> impl std::future::Future<Output = Result<(), MasterError>> + Send {
        if self.drop.load(Ordering::Relaxed) {
            items.retain(|(t, _)| t != self.topic);
        }
        let inner = self.inner.clone();
        async move {
            if items.is_empty() {
                return Ok(());
            }
            MasterApi::publish_many(&inner, items).await
        }
    }
    fn call(
        &self,
        service: &str,
        request: Value,
    ) -> impl std::future::Future<Output = Result<Value, MasterError>> + Send {
        MasterApi::call(&self.inner, service, request)
    }
    fn param_get(
        &self,
        param: &str,
    ) -> impl std::future::Future<Output = Result<Value, MasterError>> + Send {
        MasterApi::param_get(&self.inner, param)
    }
    fn param_set(
        &self,
        param: &str,
        value: Value,
    ) -> impl std::future::Future<Output = Result<(), MasterError>> + Send {
        MasterApi::param_set(&self.inner, param, value)
    }
    fn reprovision(
        &self,
        node: NodeId,
    ) -> impl std::future::Future<Output = Result<(), MasterError>> + Send {
        MasterApi::reprovision(&self.inner, node)
    }
    fn update(
        &self,
        node: NodeId,
        image: fcan_master::update::UpdateImage,
        cfg: fcan_master::update::UpdateConfig,
    ) -> impl std::future::Future<Output = Result<fcan_master::engine::UpdateReport, MasterError>> + Send
    {
        MasterApi::update(&self.inner, node, image, cfg)
    }
    fn abort_update(
        &self,
        node: NodeId,
    ) -> impl std::future::Future<Output = Result<(), MasterError>> + Send {
        MasterApi::abort_update(&self.inner, node)
    }
}

/// The guarded joint, active, driven for 200 ms with no fault (so every deadline is
/// armed and none fires by itself).
async fn guarded_running(w: &World) -> (Cycle<Lossy>, Arc<AtomicBool>) {
    sim(&w.master, 1, 0.7, 0, true, true).await;
    let drop = Arc::new(AtomicBool::new(false));
    let lossy = Lossy {
        inner: w.master.clone(),
        topic: "/joint1/j/cmd",
        drop: drop.clone(),
    };
    let mut cycle = Cycle::configure(lossy, guarded(), Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    run(&mut cycle, 40, |_| {}).await.unwrap();
    let seq = cycle.state_index("a/seq").unwrap();
    assert!(
        cycle.states().value(seq) > 0.0,
        "the device echoes the sequence"
    );
    (cycle, drop)
}

#[tokio::test(start_paused = true)]
async fn the_feedback_timeout_fires_alone() {
    let w = world(1).await;
    let (mut cycle, _) = guarded_running(&w).await;
    // The device falls silent: no feedback at all.
    w.nodes[0].stop();
    let f = run_until_fault(&mut cycle, 40, |_| {}).await;
    assert!(matches!(f, Fault::Stale { .. }), "{f}");
    assert_eq!(f.cause(), "feedback_timeout");
    assert!(
        f.to_string().starts_with("feedback timeout (host side)"),
        "{f}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_device_watchdog_fires_alone() {
    let w = world(1).await;
    let (mut cycle, _) = guarded_running(&w).await;
    // The device says it stopped following commands; feedback and echoes go on.
    sim(&w.master, 1, 0.7, 0, false, true).await;
    let f = run_until_fault(&mut cycle, 10, |_| {}).await;
    match &f {
        Fault::DeviceWatchdog {
            joint,
            field,
            value,
        } => {
            assert_eq!(&**joint, "a");
            assert_eq!(&**field, "/joint1/j/feedback.driven");
            assert_eq!(*value, 0.0);
        }
        other => panic!("not the device watchdog: {other}"),
    }
    assert_eq!(f.cause(), "device_watchdog");
    assert!(f.to_string().contains("device side"), "{f}");
}

#[tokio::test(start_paused = true)]
async fn the_ack_timeout_fires_alone() {
    let w = world(1).await;
    let (mut cycle, drop) = guarded_running(&w).await;
    // The commands stop reaching the device; its feedback stays fresh and it still
    // says it is driven (its own watchdog is slower, or off).
    drop.store(true, Ordering::Relaxed);
    let t0 = tokio::time::Instant::now();
    let f = run_until_fault(&mut cycle, 60, |_| {}).await;
    let after = t0.elapsed();
    match &f {
        Fault::AckTimeout {
            command,
            echo,
            lag,
            timeout,
        } => {
            assert_eq!((&**command, &**echo), ("a/seq", "a/seq"));
            assert_eq!(*timeout, Duration::from_millis(100));
            assert!(*lag > *timeout, "{lag:?}");
        }
        other => panic!("not the acknowledgement timeout: {other}"),
    }
    assert_eq!(f.cause(), "ack_timeout");
    assert!(
        after >= Duration::from_millis(100) && after < Duration::from_millis(130),
        "{after:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn deactivation_flushes_the_commands_once_and_sends_no_disable() {
    let w = world(1).await;
    let m = &w.master;
    sim(m, 1, 0.7, 0, false, false).await;
    let config = one_joint()
        .enable("/joint1/j/enable", serde_json::json!({}), None)
        .undo("/joint1/j/disable", serde_json::json!({}));
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    let services = w.nodes[0].with(|n| n.stats().services);
    assert_eq!(services, 1, "the enable");
    run(&mut cycle, 20, |c| c[0] = 0.9).await.unwrap();
    cycle.deactivate().await.unwrap();
    assert_eq!(cycle.lifecycle(), &Lifecycle::Inactive);
    let s = cycle.stats();
    assert_eq!((s.flush_sends, s.safe_stop_sends), (1, 0), "{s:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let t = feedback(m, 1, "target").await;
    assert!((t - 0.9).abs() < 1e-6, "the last command stays: {t}");
    assert_eq!(
        w.nodes[0].with(|n| n.stats().services),
        1,
        "no disable called"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_activation_undoes_the_enables_it_started() {
    let w = world(2).await;
    let m = &w.master;
    sim(m, 1, 0.0, 0, false, false).await;
    sim(m, 2, 0.0, 0, false, false).await;
    // The fake devices answer `success: false`: the second step fails.
    let config = one_joint()
        .enable("/joint1/j/enable", serde_json::json!({}), None)
        .undo("/joint1/j/disable", serde_json::json!({}))
        .enable(
            "/joint2/j/enable",
            serde_json::json!({}),
            Some(serde_json::json!({"success": true})),
        )
        .undo("/joint2/j/disable", serde_json::json!({}))
        .enable("/joint1/j/enable", serde_json::json!({}), None);
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    let e = cycle.activate(Duration::from_secs(2)).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, CycleError::EnableFailed { .. }), "{text}");
    // Last first: the failed step (it may have acted), then the one before; the third
    // step never started.
    let undo2 = text.find("undone: /joint2/j/disable").expect(&text);
    let undo1 = text.find("undone: /joint1/j/disable").expect(&text);
    assert!(undo2 < undo1, "{text}");
    let calls = |i: usize| w.nodes[i].with(|n| n.stats().services);
    assert_eq!((calls(0), calls(1)), (2, 2), "enable + disable on each");
    assert_eq!(cycle.lifecycle(), &Lifecycle::Inactive);

    // A readiness timeout after the enables undoes them too.
    let config = one_joint()
        .ready("a", Condition::new("/joint1/j/feedback.ready", None))
        .ready_timeout(Duration::from_millis(200))
        .enable("/joint1/j/enable", serde_json::json!({}), None)
        .undo("/joint1/j/disable", serde_json::json!({}));
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    let e = cycle
        .activate(Duration::from_secs(2))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("device joint1 (joint a) not ready"), "{e}");
    assert!(e.contains("undone: /joint1/j/disable"), "{e}");
    assert_eq!(calls(0), 4);
}

#[tokio::test(start_paused = true)]
async fn readiness_is_probed_from_the_states_until_every_device_is_ready() {
    let w = world(2).await;
    let m = &w.master;
    sim(m, 1, 0.0, 0, false, false).await;
    sim(m, 2, 0.0, 0, false, true).await;
    let config = one_joint()
        .state("b/position", "/joint2/j/feedback.position")
        .ready("a", Condition::new("/joint1/j/feedback.ready", None))
        .ready("b", Condition::new("/joint2/j/feedback.ready", Some(1.0)));
    let mut cycle = Cycle::configure(m.clone(), config.clone(), Duration::from_secs(1))
        .await
        .unwrap();
    // joint1 never ready: the 3 s default passes, and only it is named.
    let t0 = tokio::time::Instant::now();
    let e = cycle
        .activate(Duration::from_secs(10))
        .await
        .unwrap_err()
        .to_string();
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_millis(3100),
        "{waited:?}"
    );
    assert!(e.contains("device joint1 (joint a) not ready"), "{e}");
    assert!(!e.contains("joint2"), "{e}");
    // Ready 100 ms into the activation: active soon after, within one probe period.
    let master = m.clone();
    let later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        sim(&master, 1, 0.0, 0, false, true).await;
    });
    let t0 = tokio::time::Instant::now();
    cycle.activate(Duration::from_secs(10)).await.unwrap();
    later.await.unwrap();
    assert!(
        t0.elapsed() < Duration::from_millis(150),
        "{:?}",
        t0.elapsed()
    );
    // The probe called no service.
    assert_eq!(w.nodes[0].with(|n| n.stats().services), 0);
}

#[test]
fn hold_needs_a_state_of_the_same_name() {
    let e = CycleConfig::new(100.0)
        .state("a/velocity", "/n/m/f.v")
        .command("a/position", "/n/m/t.p", Safe::Hold)
        .check()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("command `a/position`: safe: hold") && e.contains("state `a/position`"),
        "{e}"
    );
    let ok = CycleConfig::from_json(
        r#"{"rate_hz": 100, "joints": [{"name": "a",
            "states": [{"interface": "position", "from": "/n/m/f.p"}],
            "commands": [{"interface": "position", "to": "/n/m/t.p", "safe": "hold"},
                         {"interface": "velocity", "to": "/n/m/t.v", "safe": 0, "initial": 0.5}]}]}"#,
    )
    .unwrap();
    let safe: Vec<Safe> = ok.commands().map(|c| c.safe).collect();
    assert_eq!(safe, [Safe::Hold, Safe::Value(0.0)]);
    let e = CycleConfig::from_json(
        r#"{"rate_hz": 100, "joints": [{"name": "a",
            "commands": [{"interface": "position", "to": "/n/m/t.p", "safe": "stay"}]}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("neither a number nor `hold`"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn a_code_the_device_gives_for_its_own_watchdog_is_the_device_watchdog() {
    let w = world(1).await;
    let m = &w.master;
    sim(m, 1, 0.0, 0, false, false).await;
    // As a Damiao motor's state nibble: 0 and 1 healthy, 0xD communication lost.
    let code = FaultConfig::code(
        "/joint1/j/feedback.faults",
        &[0, 1],
        &[(0x9, "under-voltage"), (0xD, "communication lost")],
    )
    .watchdog_codes(&[0xD]);
    let config = one_joint().fault("a", code);
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    sim(m, 1, 0.0, 1, false, false).await;
    run(&mut cycle, 10, |_| {}).await.unwrap();
    sim(m, 1, 0.0, 0xD, false, false).await;
    let f = run_until_fault(&mut cycle, 10, |_| {}).await;
    assert!(
        matches!(&f, Fault::DeviceWatchdog { value, .. } if *value == 13.0),
        "{f}"
    );
    cycle.deactivate().await.unwrap();
    cycle.clear_fault();
    // Another code is a device fault, named.
    sim(m, 1, 0.0, 1, false, false).await;
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    sim(m, 1, 0.0, 0x9, false, false).await;
    let f = run_until_fault(&mut cycle, 10, |_| {}).await;
    assert_eq!(f.cause(), "device_fault");
    assert!(f.to_string().ends_with("= 0x9: under-voltage"), "{f}");
}
