//! A Damiao motor on CAN FD, end to end: the `mit` driver (`layout=damiao,fd=true`) in a
//! device host under a real fcan master, the simulated motor set to CAN FD answering on
//! the simulated bus (1 Mbit/s nominal, 5 Mbit/s data: OpenArm's rates), every frame
//! between them an FD frame of DLC 8 — with BRS as configured — on the wire.
//!
//! Paused clock: bus, motor, host and master run on tokio's virtual time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::{CanId, Mtu};
use fcan_drivers::mit::sim::SimMit;
use fcan_drivers::mit::wire::{Framing, Layout, Ranges};
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices_on, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_master::value::Value;
use fcan_master::{Master, MasterOptions, Phase};
use fcan_transport::sim::{SimBus, SimConfig, TxRecord};

/// The motor's CAN id and the id it replies on (OpenArm's first joint: 0x01 → 0x11).
const ID: u16 = 0x01;
const MASTER: u16 = 0x11;

struct Rig {
    bus: SimBus,
    m: Master,
    mit: Arc<Mutex<SimMit>>,
    sims: tokio::task::JoinHandle<()>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.sims.abort();
    }
}

/// An FD bus with the simulated DM-J4310 (id 0x01, replies on 0x11) framed as `motor`,
/// and a master driving it as `spec` says.
async fn rig(spec: &str, motor: Framing) -> Rig {
    let bus = SimBus::new(SimConfig {
        history: 1 << 20,
        ..Default::default()
    });
    let mit = Arc::new(Mutex::new(
        SimMit::new(ID, MASTER, Layout::Damiao, Ranges::DM_J4310).with_framing(motor),
    ));
    let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(mit.clone())];
    let sims = tokio::spawn(fcan_drivers::sim::run(bus.endpoint(Mtu::Fd), sims));
    let specs = [DeviceSpec::parse(spec).unwrap()];
    let host = DeviceHost::new(Mtu::Fd, devices_on(&specs, Mtu::Fd).unwrap()).unwrap();
    let link = DeviceLink::new(bus.endpoint(Mtu::Fd), host);
    let m = Master::start(link, MasterOptions::default())
        .await
        .expect("master starts");
    // The device's node runs from the start (MIT motors speak only when spoken to).
    let start = tokio::time::Instant::now();
    loop {
        let nodes = m.nodes().await.expect("master alive");
        if nodes
            .iter()
            .any(|n| n.id.get() == 1 && n.phase == Phase::Running)
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "node 1 not running: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Rig { bus, m, mit, sims }
}

fn empty() -> Value {
    Value::Struct(Vec::new())
}

fn success(v: &Value) -> bool {
    matches!(v.field("success"), Some(Value::Bool(true)))
}

fn command(position: f64, kp: f64, kd: f64) -> Value {
    Value::Struct(vec![
        ("position".into(), Value::Float(position)),
        ("velocity".into(), Value::Float(0.0)),
        ("kp".into(), Value::Float(kp)),
        ("kd".into(), Value::Float(kd)),
        ("torque".into(), Value::Float(0.0)),
    ])
}

/// The frames on the wire with standard identifier `id`.
fn on_wire(bus: &SimBus, id: u16) -> Vec<TxRecord> {
    bus.history()
        .into_iter()
        .filter(|r| r.frame.id() == CanId::Standard(id))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_damiao_on_can_fd_is_enabled_commanded_and_disabled_through_a_master() {
    let r = rig(
        "mit:id=1,master=0x11,layout=damiao,vmax=30,tmax=10,fd=true",
        Framing::Fd { brs: true },
    )
    .await;
    let reply = r.m.call("/mit1/motor/enable", empty()).await.unwrap();
    assert!(success(&reply), "{reply:?}");
    assert!(r.mit.lock().unwrap().enabled());
    let mut fb = r.m.subscribe("/mit1/motor/feedback").await.unwrap();
    for _ in 0..300 {
        r.m.publish("/mit1/motor/mit", command(-2.0, 20.0, 1.0))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let truth = r.mit.lock().unwrap().position();
    assert!((truth + 2.0).abs() < 0.05, "moved to -2 rad: {truth}");
    let mut last = None;
    while let Ok(s) = fb.try_recv() {
        last = Some(s.value);
    }
    let last = last.expect("feedback came");
    let position = last.field("position").and_then(Value::as_f64).unwrap();
    assert!(
        (position - f64::from(truth)).abs() < 0.01,
        "feedback {position} vs {truth}"
    );
    assert_eq!(
        last.field("error").and_then(Value::as_f64),
        Some(1.0),
        "Damiao state 1: enabled"
    );
    let reply = r.m.call("/mit1/motor/disable", empty()).await.unwrap();
    assert!(success(&reply));
    assert!(!r.mit.lock().unwrap().enabled());

    // On the wire: every frame to the motor (its id, and the register frames of its
    // command watchdog on 0x7FF) and from it an FD frame of DLC 8 with BRS.
    let mut to = on_wire(&r.bus, ID);
    to.extend(on_wire(&r.bus, 0x7FF));
    let from = on_wire(&r.bus, MASTER);
    assert!(to.len() >= 300, "commands on the wire: {}", to.len());
    assert_eq!(from.len(), to.len(), "one reply per frame");
    for rec in to.iter().chain(&from) {
        let f = &rec.frame;
        assert!(f.is_fd() && f.is_brs() && f.len() == 8, "{f:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn brs_false_sends_fd_frames_at_the_nominal_rate() {
    let r = rig(
        "mit:id=1,master=0x11,layout=damiao,fd=true,brs=false",
        Framing::Fd { brs: true },
    )
    .await;
    let reply = r.m.call("/mit1/motor/enable", empty()).await.unwrap();
    assert!(success(&reply), "{reply:?}");
    for _ in 0..10 {
        r.m.publish("/mit1/motor/mit", command(0.5, 10.0, 1.0))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut to = on_wire(&r.bus, ID);
    to.extend(on_wire(&r.bus, 0x7FF));
    let from = on_wire(&r.bus, MASTER);
    assert!(to.len() >= 10 && from.len() == to.len());
    assert!(to.iter().all(|r| r.frame.is_fd() && !r.frame.is_brs()));
    assert!(from.iter().all(|r| r.frame.is_fd() && r.frame.is_brs()));
    // The bus model saw it: 8 bytes at 1 Mbit/s take longer than at 5.
    let took = |r: &TxRecord| r.end - r.start;
    let slow = to.iter().map(took).min().unwrap();
    let fast = from.iter().map(took).max().unwrap();
    assert!(slow > fast, "without BRS {slow:?} vs with {fast:?}");
    assert!(to.iter().all(|r| r.bits.data == 0) && from.iter().all(|r| r.bits.data > 0));
}

#[tokio::test(start_paused = true)]
async fn a_motor_left_on_classical_can_never_hears_fd_frames() {
    // The driver set to FD, the motor to Classical: a Classical controller does not
    // receive FD frames, so the enable goes unanswered and is refused after 800 ms.
    let r = rig(
        "mit:id=1,master=0x11,layout=damiao,fd=true",
        Framing::Classic,
    )
    .await;
    let reply = r.m.call("/mit1/motor/enable", empty()).await.unwrap();
    assert!(!success(&reply), "{reply:?}");
    assert!(!r.mit.lock().unwrap().enabled());
    assert!(on_wire(&r.bus, MASTER).is_empty(), "no reply");
}
