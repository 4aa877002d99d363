//! A CiA 402 drive end to end: the `cia402` driver in a device host under a real fcan
//! master, the simulated drive answering on the simulated bus. The driver brings the
//! drive up (its PDO mapping seen in the drive's dictionary), the master presents it as
//! node 5, `enable` runs the state machine, a CSP command moves it, a fault comes out as
//! an EMCY and a latched error code, and a silenced drive takes its node offline.
//!
//! Paused clock: bus, drive, host and master run on tokio's virtual time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_drivers::cia402::sim::SimCia402;
use fcan_drivers::cia402::state::State;
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices_on, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_master::value::Value;
use fcan_master::{Master, MasterOptions, Phase};
use fcan_transport::sim::{SimBus, SimConfig};

struct Rig {
    m: Master,
    drive: Arc<Mutex<SimCia402>>,
    sims: tokio::task::JoinHandle<()>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.sims.abort();
    }
}

async fn phase_of(m: &Master, id: u8) -> Option<Phase> {
    let nodes = m.nodes().await.expect("master alive");
    nodes
        .into_iter()
        .find(|n| n.id.get() == id)
        .map(|n| n.phase)
}

async fn rig(spec: &str, drive: SimCia402) -> Rig {
    rig_on(Mtu::Fd, spec, drive).await
}

async fn rig_on(mtu: Mtu, spec: &str, drive: SimCia402) -> Rig {
    let bus = SimBus::new(SimConfig::default());
    let drive = Arc::new(Mutex::new(drive));
    let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(drive.clone())];
    let sims = tokio::spawn(fcan_drivers::sim::run(bus.endpoint(mtu), sims));
    let specs = [DeviceSpec::parse(spec).unwrap()];
    let host = DeviceHost::new(mtu, devices_on(&specs, mtu).unwrap()).unwrap();
    let link = DeviceLink::new(bus.endpoint(mtu), host);
    let m = Master::start(link, MasterOptions::default())
        .await
        .expect("master starts");
    Rig { m, drive, sims }
}

async fn until_running(m: &Master, id: u8) {
    let start = tokio::time::Instant::now();
    while phase_of(m, id).await != Some(Phase::Running) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "node {id} not running: {:?}",
            phase_of(m, id).await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn empty() -> Value {
    Value::Struct(Vec::new())
}

fn success(v: &Value) -> bool {
    matches!(v.field("success"), Some(Value::Bool(true)))
}

fn num(v: &Value, f: &str) -> f64 {
    v.field(f).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

#[tokio::test(start_paused = true)]
async fn a_drive_is_brought_up_enabled_commanded_faulted_and_lost() {
    let r = rig("cia402:id=5,mode=csp,counts=1000", SimCia402::new(5)).await;
    until_running(&r.m, 5).await;
    {
        let d = r.drive.lock().unwrap();
        assert_eq!(d.od().u64(0x1400, 1), Some(0x505), "RPDO A's COB-ID");
        assert_eq!(
            d.od().u64(0x1600, 2),
            Some(0x607A_0020),
            "target position mapped"
        );
        assert_eq!(
            d.od().u64(0x1A00, 1),
            Some(0x6041_0010),
            "statusword mapped"
        );
        assert_eq!(d.od().u64(0x1016, 1), Some((127 << 16) | 200), "watchdog");
    }
    let mut status = r.m.subscribe("/drive5/cia402/status").await.unwrap();
    let mut emcy = r.m.subscribe("/drive5/cia402/emcy").await.unwrap();

    let reply = r.m.call("/drive5/cia402/enable", empty()).await.unwrap();
    assert!(success(&reply), "{reply:?}");
    assert_eq!(r.drive.lock().unwrap().state(), State::OperationEnabled);

    let cmd = Value::Struct(vec![
        ("position".into(), Value::Float(1.0)),
        ("velocity".into(), Value::Float(0.0)),
        ("torque".into(), Value::Float(0.0)),
    ]);
    r.m.publish("/drive5/cia402/command", cmd).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut last = None;
    while let Ok(s) = status.try_recv() {
        last = Some(s.value);
    }
    let last = last.expect("status samples");
    let rad_per_inc = std::f64::consts::TAU / 1000.0;
    assert!(
        (num(&last, "position") - 1.0).abs() <= rad_per_inc,
        "{last:?}"
    );
    assert_eq!(num(&last, "state"), 4.0, "operation enabled");
    assert_eq!(num(&last, "mode"), 8.0, "csp");
    assert_eq!(num(&last, "error_code"), 0.0);

    r.drive.lock().unwrap().inject_fault(0x2310);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let e = emcy.try_recv().expect("the EMCY published").value;
    assert_eq!(num(&e, "code"), f64::from(0x2310));
    assert_eq!(num(&e, "register"), 1.0);
    // The five manufacturer bytes A1…A5, little-endian.
    assert_eq!(num(&e, "data"), 0xA5_A4A3_A2A1u64 as f64);
    let mut last = None;
    while let Ok(s) = status.try_recv() {
        last = Some(s.value);
    }
    let last = last.expect("status samples");
    assert_eq!(num(&last, "state"), 7.0, "fault");
    assert_eq!(num(&last, "error_code"), f64::from(0x2310), "latched");
    let reply = r.m.call("/drive5/cia402/enable", empty()).await.unwrap();
    assert!(!success(&reply), "no enable from Fault");
    let reply =
        r.m.call("/drive5/cia402/fault_reset", empty())
            .await
            .unwrap();
    assert!(success(&reply), "{reply:?}");

    r.drive.lock().unwrap().silence(true);
    let start = tokio::time::Instant::now();
    while phase_of(&r.m, 5).await == Some(Phase::Running) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never went offline"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(phase_of(&r.m, 5).await, Some(Phase::Offline));
}

/// CANopen buses are Classical: the drive's node fits a Classical plan, and a drive
/// whose EDS has no torque actual (0x6077; ros2_canopen's `cia402_slave.eds`, the one
/// the python `canopen` judge serves) is brought up with TPDO B without it, its status
/// torque NaN. Both failed once: the node's plan needed 9 frames of its 8, and TPDO B
/// mapped 0x6077 as required, so such a drive was never brought up.
#[tokio::test(start_paused = true)]
async fn a_drive_without_torque_actual_runs_on_a_classical_link() {
    let eds_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/peers/cia402_slave.eds"
    );
    let eds =
        fcan_drivers::cia402::eds::Eds::parse(&std::fs::read_to_string(eds_path).unwrap()).unwrap();
    assert!(!eds.has(0x6077, 0), "the judge's EDS has no torque actual");
    let spec = format!("cia402:id=5,mode=csp,counts=1000,eds={eds_path}");
    let r = rig_on(
        Mtu::Classic,
        &spec,
        SimCia402::with_eds(5, &eds).without(0x6077),
    )
    .await;
    until_running(&r.m, 5).await;
    assert_eq!(
        r.drive.lock().unwrap().od().u64(0x1A01, 0),
        Some(2),
        "TPDO B: velocity and mode display only"
    );
    let mut status = r.m.subscribe("/drive5/cia402/status").await.unwrap();
    let reply = r.m.call("/drive5/cia402/enable", empty()).await.unwrap();
    assert!(success(&reply), "{reply:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut last = None;
    while let Ok(s) = status.try_recv() {
        last = Some(s.value);
    }
    let last = last.expect("status samples on a Classical link");
    assert_eq!(num(&last, "state"), 4.0, "operation enabled: {last:?}");
    assert_eq!(
        num(&last, "mode"),
        8.0,
        "mode display still mapped: {last:?}"
    );
    assert!(num(&last, "torque").is_nan(), "no torque actual: {last:?}");
}
