//! A CiA 402 drive under the cycle API: the `cia402` driver in a device host under a real
//! fcan master, the simulated drive (node 5, CSP) on the simulated bus, and a cycle with
//! one joint on it, configured as docs/drivers.md says (`error_code` as a `kind: code`
//! fault, 0x8130 in `watchdog_codes`) and enabled through the drive's `enable` service.
//! A drive fault (EMCY 0x2310) latches `Fault::Device` naming the field and the code, and
//! the loop makes its safe stop; the drive's heartbeat-consumer EMCY 0x8130 latches
//! `Fault::DeviceWatchdog`.
//!
//! Paused clock: bus, drive, host, master and loop run on tokio's virtual time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_cycle::{Cycle, CycleConfig, CycleError, Fault};
use fcan_drivers::cia402::sim::SimCia402;
use fcan_drivers::cia402::state::State;
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices_on, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_master::{Master, MasterOptions, Phase};
use fcan_transport::sim::{SimBus, SimConfig};

const FIELD: &str = "/drive5/cia402/status.error_code";

/// The configuration docs/drivers.md gives for the cycle API (YAML there, JSON here).
const CONFIG: &str = r#"{
  "rate_hz": 100,
  "joints": [
    { "name": "axis",
      "states": [ { "interface": "position", "from": "/drive5/cia402/status.position" } ],
      "commands": [ { "interface": "position", "to": "/drive5/cia402/command{velocity: 0, torque: 0}.position", "safe": "hold" } ],
      "faults": [ { "from": "/drive5/cia402/status.error_code", "kind": "code", "watchdog_codes": [33072] } ] }
  ],
  "enable": [ { "call": "/drive5/cia402/enable", "expect": { "success": true } } ]
}"#;

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

async fn rig() -> Rig {
    let mtu = Mtu::Fd;
    let bus = SimBus::new(SimConfig::default());
    let drive = Arc::new(Mutex::new(SimCia402::new(5)));
    let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(drive.clone())];
    let sims = tokio::spawn(fcan_drivers::sim::run(bus.endpoint(mtu), sims));
    let specs = [DeviceSpec::parse("cia402:id=5,mode=csp,counts=1000").unwrap()];
    let host = DeviceHost::new(mtu, devices_on(&specs, mtu).unwrap()).unwrap();
    let link = DeviceLink::new(bus.endpoint(mtu), host);
    let m = Master::start(link, MasterOptions::default())
        .await
        .expect("master starts");
    let start = tokio::time::Instant::now();
    loop {
        let nodes = m.nodes().await.expect("master alive");
        if nodes
            .iter()
            .any(|n| n.id.get() == 5 && n.phase == Phase::Running)
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "drive5 not running"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Rig { m, drive, sims }
}

/// `cycles` periods of read and write, the position command from `command`.
async fn run(
    cycle: &mut Cycle<Master>,
    cycles: usize,
    command: impl Fn(usize) -> f64,
) -> Result<(), CycleError> {
    let mut tick = tokio::time::interval(cycle.period());
    for i in 0..cycles {
        tick.tick().await;
        cycle.read()?;
        cycle.write(&[command(i)])?;
    }
    Ok(())
}

async fn run_until_fault(cycle: &mut Cycle<Master>, cycles: usize, hold: f64) -> Fault {
    match run(cycle, cycles, |_| hold).await {
        Err(CycleError::Faulted(f)) => f,
        Err(e) => panic!("not a fault: {e}"),
        Ok(()) => panic!("no fault in {cycles} cycles"),
    }
}

/// A running cycle on drive5, enabled by its activation, having moved the drive to 0.5.
async fn running(r: &Rig) -> Cycle<Master> {
    let config = CycleConfig::from_json(CONFIG).unwrap();
    let mut cycle = Cycle::configure(r.m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    assert_eq!(
        r.drive.lock().unwrap().state(),
        State::OperationEnabled,
        "the cycle's enable step ran the state machine"
    );
    run(&mut cycle, 50, |i| 0.01 * (i as f64).min(50.0))
        .await
        .unwrap();
    run(&mut cycle, 20, |_| 0.5).await.unwrap();
    let p = cycle
        .states()
        .value(cycle.state_index("axis/position").unwrap());
    let rad_per_inc = std::f64::consts::TAU / 1000.0;
    assert!(
        (p - 0.5).abs() <= 2.0 * rad_per_inc,
        "the drive follows: {p}"
    );
    cycle
}

#[tokio::test(start_paused = true)]
async fn a_drive_fault_latches_a_device_fault_naming_the_code_and_stops_safely() {
    let r = rig().await;
    let mut cycle = running(&r).await;
    assert_eq!(cycle.stats().safe_stop_sends, 0);

    r.drive.lock().unwrap().inject_fault(0x2310);
    let f = run_until_fault(&mut cycle, 20, 0.5).await;
    match &f {
        Fault::Device {
            joint,
            field,
            value,
            ..
        } => {
            assert_eq!(&**joint, "axis");
            assert_eq!(&**field, FIELD);
            assert_eq!(*value, 0x2310);
            assert_eq!(*value, 8976);
        }
        other => panic!("not a device fault: {other}"),
    }
    assert_eq!(f.cause(), "device_fault");
    let text = f.to_string();
    assert!(
        text.contains(FIELD) && text.contains("0x2310") && text.contains("joint axis"),
        "{text}"
    );
    // Latched: the loop refuses to go on, with the same fault.
    match cycle.read() {
        Err(CycleError::Faulted(again)) => assert_eq!(again.to_string(), text),
        other => panic!("not latched: {:?}", other.map(|_| ())),
    }
    assert_eq!(cycle.fault().map(Fault::cause), Some("device_fault"));
    // The safe stop: the held position sent the configured 3 times.
    cycle.deactivate().await.unwrap();
    assert_eq!(cycle.stats().safe_stop_sends, 3);
    assert_eq!(r.drive.lock().unwrap().state(), State::Fault);
}

#[tokio::test(start_paused = true)]
async fn the_drives_heartbeat_consumer_emcy_is_the_device_watchdog() {
    let r = rig().await;
    let mut cycle = running(&r).await;

    // The EMCY a drive sends when its heartbeat consumer (its command watchdog) expires.
    r.drive.lock().unwrap().inject_fault(0x8130);
    let f = run_until_fault(&mut cycle, 20, 0.5).await;
    match &f {
        Fault::DeviceWatchdog {
            joint,
            field,
            value,
        } => {
            assert_eq!(&**joint, "axis");
            assert_eq!(&**field, FIELD);
            assert_eq!(*value, 33072.0);
        }
        other => panic!("not the device watchdog: {other}"),
    }
    assert_eq!(f.cause(), "device_watchdog");
    assert!(f.to_string().contains("device side"), "{f}");
    cycle.deactivate().await.unwrap();
    assert_eq!(cycle.stats().safe_stop_sends, 3);
}
