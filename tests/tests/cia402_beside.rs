//! The proof of the CiA 402 issue: "the same drive beside fcan boards and a RobStride under
//! one `fcan serve`". On one simulated bus — CAN FD, then Classical — the example motor
//! driver and I/O board, a simulated RobStride and a simulated CiA 402 drive (node 5, CSP),
//! the two devices hosted by one `DeviceHost` on one `DeviceLink` under one master. Every
//! node runs; the drive is enabled and a CSP command moves it; the RobStride is enabled
//! and commanded; a board's feedback keeps flowing; no node collides or reboots, and no
//! identifier the master planned leaves fcan's data plane (0x100..=0x3FF) or is one of
//! the COB-IDs drive 5 runs on (its PDOs as the driver maps them, SDOs, heartbeat, EMCY).
//!
//! Paused clock: bus, boards, devices, host and master all run on tokio's virtual time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::id::NodeId;
use fcan_drivers::cia402::sim::SimCia402;
use fcan_drivers::cia402::state::State;
use fcan_drivers::robstride::model::Model;
use fcan_drivers::robstride::sim::SimMotor;
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices_on, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_e2e::{wait_running, World, IO3, MD1};
use fcan_master::value::Value;
use fcan_master::MasterEvent;

const RS: u8 = 10;
const DRIVE: u8 = 5;

fn empty() -> Value {
    Value::Struct(Vec::new())
}

fn success(v: &Value) -> bool {
    matches!(v.field("success"), Some(Value::Bool(true)))
}

fn num(v: &Value, field: &str) -> f64 {
    v.field(field)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number `{field}` in {v:?}"))
}

async fn beside(mtu: Mtu) {
    let mut w = World::new(mtu);
    w.add_motor(MD1, 2);
    w.add_io(IO3);
    let motor = Arc::new(Mutex::new(SimMotor::new(RS, Model::Rs03)));
    let drive = Arc::new(Mutex::new(SimCia402::new(DRIVE)));
    let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(motor.clone()), Box::new(drive.clone())];
    let sims = tokio::spawn(fcan_drivers::sim::run(w.endpoint(), sims));
    let specs = [
        DeviceSpec::parse("robstride:id=10,model=RS03").unwrap(),
        DeviceSpec::parse("cia402:id=5,mode=csp,counts=1000").unwrap(),
    ];
    let host = DeviceHost::new(mtu, devices_on(&specs, mtu).unwrap()).unwrap();
    let m = w.start_master_on(DeviceLink::new(w.endpoint(), host)).await;
    let mut events = m.events();
    wait_running(&m, &[MD1, IO3, RS, DRIVE], Duration::from_secs(10)).await;

    let nodes = m.nodes().await.unwrap();
    let find = |id: u8| nodes.iter().find(|n| n.id.get() == id).unwrap();
    assert_eq!(find(RS).driver.as_deref(), Some("robstride"), "{mtu:?}");
    assert_eq!(find(DRIVE).name, "drive5", "{mtu:?}");
    assert_eq!(find(DRIVE).driver.as_deref(), Some("cia402"), "{mtu:?}");
    assert_eq!(find(MD1).driver, None, "{mtu:?}: a board has no driver");
    assert_eq!(find(IO3).driver, None, "{mtu:?}");

    // The drive's PDOs are on CANopen's own identifiers, never on one the master planned.
    assert_eq!(
        drive.lock().unwrap().od().u64(0x1400, 1),
        Some(0x505),
        "{mtu:?}: RPDO A's COB-ID"
    );
    // Those the driver puts it on (its PDOs moved off the predefined set, which sits over
    // fcan's data plane and is disabled), its SDO channel, heartbeat and EMCY.
    use fcan_drivers::cia402::wire;
    let canopen: Vec<u16> = [
        wire::TPDO_A,
        wire::TPDO_B,
        wire::RPDO_A,
        wire::RPDO_B,
        wire::SDO_TX,
        wire::SDO_RX,
        wire::HEARTBEAT,
        wire::EMCY,
    ]
    .iter()
    .map(|base| base + u16::from(DRIVE))
    .collect();
    let mut planned = 0;
    for id in [MD1, IO3, RS, DRIVE] {
        let Some(plan) = m.plan(NodeId::new(id).unwrap()).await.unwrap() else {
            continue;
        };
        for f in &plan.frames {
            let std_id = f.header.std_id;
            planned += 1;
            assert!(
                (0x100..=0x3FF).contains(&std_id),
                "{mtu:?}: node {id} planned 0x{std_id:03X}, outside fcan's data plane"
            );
            assert!(
                !canopen.contains(&std_id),
                "{mtu:?}: node {id} planned 0x{std_id:03X}, a COB-ID of drive 5"
            );
        }
    }
    assert!(planned > 0, "{mtu:?}: the boards have plans");

    let mut board = m.subscribe("/motor_driver1/motor0/feedback").await.unwrap();
    let mut status = m.subscribe("/drive5/cia402/status").await.unwrap();
    let mut rs_fb = m.subscribe("/robstride10/motor/feedback").await.unwrap();

    assert!(
        drive.lock().unwrap().position().abs() < 1.0,
        "{mtu:?}: the drive starts at 0"
    );
    // The drive: enabled through its service, then moved by CSP commands.
    let reply = m.call("/drive5/cia402/enable", empty()).await.unwrap();
    assert!(success(&reply), "{mtu:?}: {reply:?}");
    assert_eq!(drive.lock().unwrap().state(), State::OperationEnabled);
    // The RobStride: enabled as in the devices test.
    let reply = m.call("/robstride10/motor/enable", empty()).await.unwrap();
    assert!(success(&reply), "{mtu:?}: {reply:?}");
    assert!(motor.lock().unwrap().enabled(), "{mtu:?}");

    let csp = Value::Struct(vec![
        ("position".into(), Value::Float(1.0)),
        ("velocity".into(), Value::Float(0.0)),
        ("torque".into(), Value::Float(0.0)),
    ]);
    let mit = Value::Struct(vec![
        ("position".into(), Value::Float(1.5)),
        ("velocity".into(), Value::Float(0.0)),
        ("kp".into(), Value::Float(40.0)),
        ("kd".into(), Value::Float(2.0)),
        ("torque".into(), Value::Float(0.0)),
    ]);
    let (mut boards, mut statuses, mut rs_last, mut last) = (0, 0, f64::NAN, None);
    for _ in 0..200 {
        m.publish("/drive5/cia402/command", csp.clone())
            .await
            .unwrap();
        m.publish("/robstride10/motor/mit", mit.clone())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        while board.try_recv().is_ok() {
            boards += 1;
        }
        while let Ok(s) = status.try_recv() {
            statuses += 1;
            last = Some(s.value);
        }
        while let Ok(s) = rs_fb.try_recv() {
            rs_last = num(&s.value, "position");
        }
    }
    let last = last.expect("drive status samples");
    assert!(statuses > 10, "{mtu:?}: {statuses} drive statuses in 1 s");
    let rad_per_inc = std::f64::consts::TAU / 1000.0;
    assert!(
        (num(&last, "position") - 1.0).abs() <= rad_per_inc,
        "{mtu:?}: the drive's status position: {last:?}"
    );
    // The drive itself is at 1 rad: 1000/2π ≈ 159 increments (counts=1000).
    let incs = drive.lock().unwrap().position();
    assert!(
        (incs * rad_per_inc - 1.0).abs() <= rad_per_inc,
        "{mtu:?}: the drive moved: {incs} increments"
    );
    assert_eq!(num(&last, "state"), 4.0, "{mtu:?}: operation enabled");
    assert_eq!(num(&last, "mode"), 8.0, "{mtu:?}: csp");
    let truth = motor.lock().unwrap().position();
    assert!(
        (truth - 1.5).abs() < 0.05,
        "{mtu:?}: the RobStride reached 1.5 rad: {truth}"
    );
    assert!(
        (rs_last - truth).abs() < 0.01,
        "{mtu:?}: RobStride feedback {rs_last} vs {truth}"
    );
    assert!(boards > 10, "{mtu:?}: {boards} board feedbacks in 1 s");

    // Everyone still running, nobody collided, rebooted, failed or went offline.
    wait_running(&m, &[MD1, IO3, RS, DRIVE], Duration::from_millis(1)).await;
    while let Ok(e) = events.try_recv() {
        assert!(
            !matches!(
                e,
                MasterEvent::Collision { .. }
                    | MasterEvent::Rebooted { .. }
                    | MasterEvent::Failed { .. }
                    | MasterEvent::Offline { .. }
                    | MasterEvent::OtherMaster { .. }
            ),
            "{mtu:?}: {e:?}"
        );
    }
    sims.abort();
}

#[tokio::test(start_paused = true)]
async fn a_cia402_drive_beside_boards_and_a_robstride_on_fd() {
    beside(Mtu::Fd).await;
}

#[tokio::test(start_paused = true)]
async fn a_cia402_drive_beside_boards_and_a_robstride_on_classical() {
    beside(Mtu::Classic).await;
}
