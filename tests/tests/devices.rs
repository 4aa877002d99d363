//! Off-the-shelf devices on the same bus as fcan boards, under one master (issue 24): a
//! simulated RobStride motor and a simulated MIT-mode motor answer on the simulated bus as
//! the real ones do; the master runs on `fcan_drivers::DeviceLink`, and the devices are
//! fcan nodes to it — listed, provisioned, their topics, services and parameters used
//! through `MasterApi` exactly as a board's are. Classical CAN, as RobStride buses are.
//!
//! Paused clock: the simulated bus, the devices, the host and the master all run on
//! tokio's virtual time, so every wait is exact and takes no real time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_drivers::mit::sim::SimMit;
use fcan_drivers::robstride::model::{Model, RUN_MODE};
use fcan_drivers::robstride::sim::SimMotor;
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_e2e::capture::Capture;
use fcan_e2e::{wait_running, World, IO3, MD1};
use fcan_master::value::Value;
use fcan_master::Master;

const RS: u8 = 10;
const MIT: u8 = 32;

struct Rig {
    w: World,
    m: Master,
    motor: Arc<Mutex<SimMotor>>,
    mit: Arc<Mutex<SimMit>>,
    sims: tokio::task::JoinHandle<()>,
}

/// Boards MD1 (2 motors) and IO3, a RobStride RS03 with CAN id 10 and a MIT motor with
/// id 0x20 (both simulated), and a master that drives the two devices.
async fn rig() -> Rig {
    let mut w = World::new(Mtu::Classic);
    w.add_motor(MD1, 2);
    w.add_io(IO3);
    let motor = Arc::new(Mutex::new(SimMotor::new(RS, Model::Rs03)));
    let mit = Arc::new(Mutex::new(SimMit::new(
        0x20,
        0,
        Default::default(),
        Default::default(),
    )));
    let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(motor.clone()), Box::new(mit.clone())];
    let sims = tokio::spawn(fcan_drivers::sim::run(w.endpoint(), sims));
    let specs = [
        DeviceSpec::parse("robstride:id=10,model=RS03").unwrap(),
        DeviceSpec::parse("mit:id=0x20").unwrap(),
    ];
    let host = DeviceHost::new(Mtu::Classic, devices(&specs).unwrap()).unwrap();
    // The link's notes are `tracing` events, children of the span current when it is made.
    let notes = Capture::new();
    let link = notes
        .span()
        .in_scope(|| DeviceLink::new(w.endpoint(), host));
    let m = w.start_master_on(link).await;
    wait_running(&m, &[MD1, IO3, RS, MIT], Duration::from_secs(10)).await;
    if std::env::var_os("FCAN_TEST_LOG").is_some() {
        eprintln!("{}", notes.text());
    }
    // Both devices came: each said so (the note is flushed before its node's
    // frames reach the master, so before it can run).
    let said = notes.text();
    assert!(
        said.lines().all(|l| l.starts_with("INFO fcan::drivers: ")),
        "{said}"
    );
    assert_eq!(
        said.matches("answers: presented as fcan node").count(),
        2,
        "{said}"
    );
    Rig {
        w,
        m,
        motor,
        mit,
        sims,
    }
}

fn empty() -> Value {
    Value::Struct(Vec::new())
}

fn mit_command(position: f64, kp: f64, kd: f64) -> Value {
    Value::Struct(vec![
        ("position".into(), Value::Float(position)),
        ("velocity".into(), Value::Float(0.0)),
        ("kp".into(), Value::Float(kp)),
        ("kd".into(), Value::Float(kd)),
        ("torque".into(), Value::Float(0.0)),
    ])
}

fn success(v: &Value) -> bool {
    matches!(v.field("success"), Some(Value::Bool(true)))
}

fn num(v: &Value, field: &str) -> f64 {
    v.field(field)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number `{field}` in {v:?}"))
}

#[tokio::test(start_paused = true)]
async fn devices_are_nodes_beside_the_boards() {
    let r = rig().await;
    let nodes = r.m.nodes().await.unwrap();
    let find = |id: u8| nodes.iter().find(|n| n.id.get() == id).unwrap();
    assert_eq!(find(RS).name, "robstride10");
    assert_eq!(find(RS).driver.as_deref(), Some("robstride"));
    assert_eq!(find(MIT).name, "mit32");
    assert_eq!(find(MIT).driver.as_deref(), Some("mit"));
    assert_eq!(find(MD1).driver, None, "an fcan board has no driver");
    assert_eq!(find(IO3).driver, None);
    // Node info says what stops each device when the bus owner dies: the RobStride's
    // own watchdog, armed by default; the MIT motor as its driver arms it; a board
    // (whose watchdog is the protocol's) shows none.
    assert_eq!(
        find(RS).watchdog,
        Some(fcan_master::DeviceWatchdog::Armed { ms: 200 })
    );
    assert!(find(MIT).watchdog.is_some(), "{:?}", find(MIT));
    assert_eq!(find(MD1).watchdog, None);
    // The boards' data still flows beside the devices.
    let mut fb =
        r.m.subscribe("/motor_driver1/motor0/feedback")
            .await
            .unwrap();
    tokio::time::timeout(Duration::from_secs(1), fb.recv())
        .await
        .expect("board feedback flows")
        .unwrap();
    drop(r.sims);
}

#[tokio::test(start_paused = true)]
async fn robstride_enable_command_and_feedback() {
    let r = rig().await;
    assert!(!r.motor.lock().unwrap().enabled());
    let reply =
        r.m.call("/robstride10/motor/enable", empty())
            .await
            .unwrap();
    assert!(success(&reply), "{reply:?}");
    assert!(
        r.motor.lock().unwrap().enabled(),
        "the motor got the enable frame"
    );

    // An MIT command towards 1.5 rad: the motor's own law moves it there, and the
    // feedback topic (decoded from its type-2 frames) says so.
    let mut fb = r.m.subscribe("/robstride10/motor/feedback").await.unwrap();
    let mut last = f64::NAN;
    for _ in 0..200 {
        r.m.publish("/robstride10/motor/mit", mit_command(1.5, 40.0, 2.0))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        while let Ok(s) = fb.try_recv() {
            last = num(&s.value, "position");
            assert_eq!(num(&s.value, "mode"), 2.0, "running: {:?}", s.value);
        }
    }
    let truth = r.motor.lock().unwrap().position();
    assert!(
        (truth - 1.5).abs() < 0.05,
        "the motor reached 1.5 rad: {truth}"
    );
    assert!(
        (last - truth).abs() < 0.01,
        "feedback {last} vs the motor's {truth}"
    );

    // stop: confirmed by the motor's reset mode.
    let reply = r.m.call("/robstride10/motor/stop", empty()).await.unwrap();
    assert!(success(&reply), "{reply:?}");
    assert!(!r.motor.lock().unwrap().enabled());
}

#[tokio::test(start_paused = true)]
async fn robstride_position_unwraps_across_the_frame_range() {
    let r = rig().await;
    // 30 rad is beyond the frame's ±4π: the frame wraps, the topic must not.
    r.motor.lock().unwrap().set_position(30.0);
    let reply =
        r.m.call("/robstride10/motor/enable", empty())
            .await
            .unwrap();
    assert!(success(&reply));
    let mut fb = r.m.subscribe("/robstride10/motor/feedback").await.unwrap();
    // Walk the motor from 30 rad to 40 rad in small steps, commanding each.
    let mut seen = Vec::new();
    for step in 0..=100 {
        let p = 30.0 + f64::from(step) * 0.1;
        r.motor.lock().unwrap().set_position(p);
        r.m.publish("/robstride10/motor/mit", mit_command(p, 0.0, 0.0))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        while let Ok(s) = fb.try_recv() {
            seen.push(num(&s.value, "position"));
        }
    }
    let first = seen.first().copied().unwrap();
    let last = seen.last().copied().unwrap();
    // The first frame after a gap starts the unwrap from the wrapped value; from then on
    // every step is continuous: no jump of 8π.
    for w in seen.windows(2) {
        assert!((w[1] - w[0]).abs() < 0.5, "a jump in {seen:?}");
    }
    assert!(
        (last - first - 10.0).abs() < 0.3,
        "moved 10 rad: {first} → {last}"
    );
}

#[tokio::test(start_paused = true)]
async fn robstride_params_reach_the_motor_and_come_back_after_it_reboots() {
    let mut r = rig().await;
    // Refused on the node, naming the bound (RS03's torque range).
    let e =
        r.m.param_set("robstride10.motor.limit_torque", Value::Float(1000.0))
            .await
            .unwrap_err();
    assert!(e.to_string().contains("60"), "names RS03's 60 N·m: {e}");
    r.m.param_set("robstride10.motor.run_mode", Value::UInt(2))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        r.motor.lock().unwrap().param_value(RUN_MODE).map(|v| v[0]),
        Some(2),
        "run_mode written to the motor"
    );

    // Power-cycle the motor: silent for 1.5 s, then a fresh one (run_mode forgotten).
    let boot = |nodes: &[fcan_master::NodeInfo]| {
        nodes
            .iter()
            .find(|n| n.id.get() == RS)
            .map(|n| (n.boot_id, n.phase.clone()))
    };
    let (old_boot, _) = boot(&r.m.nodes().await.unwrap()).unwrap();
    r.sims.abort();
    let mut events = r.m.events();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let fresh = Arc::new(Mutex::new(SimMotor::new(RS, Model::Rs03)));
    assert_eq!(
        fresh.lock().unwrap().param_value(RUN_MODE).map(|v| v[0]),
        Some(0)
    );
    let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(fresh.clone()), Box::new(r.mit.clone())];
    r.sims = tokio::spawn(fcan_drivers::sim::run(r.w.endpoint(), sims));
    // The motor answers again: a node that rebooted, running again once re-provisioned.
    fcan_e2e::eventually(
        "the motor's node back, rebooted",
        Duration::from_secs(10),
        || {
            let m = r.m.clone();
            async move {
                match boot(&m.nodes().await.unwrap()) {
                    Some((b, fcan_master::Phase::Running)) if b != old_boot => Some(()),
                    _ => None,
                }
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        fresh.lock().unwrap().param_value(RUN_MODE).map(|v| v[0]),
        Some(2),
        "the master re-provisioned the motor that came back: run_mode written again"
    );
    let mut rebooted = false;
    while let Ok(e) = events.try_recv() {
        rebooted |=
            matches!(e, fcan_master::MasterEvent::Rebooted { node, .. } if node.get() == RS);
    }
    assert!(rebooted, "the master saw the motor's node reboot");
}

/// The bus owner dies while a RobStride spins (issue 34): the motor's own command
/// watchdog, which the driver armed before enabling it (`canTimeout`, 200 ms by
/// default), drops it to reset mode; nothing on the PC side is left to stop it.
#[tokio::test(start_paused = true)]
async fn a_robstride_stops_by_its_own_watchdog_when_the_bus_owner_dies() {
    use fcan_drivers::robstride::model::CAN_TIMEOUT;
    let r = rig().await;
    let reply =
        r.m.call("/robstride10/motor/enable", empty())
            .await
            .unwrap();
    assert!(success(&reply), "{reply:?}");
    // Armed before the enable: 200 ms = 4000 × 50 µs.
    assert_eq!(
        r.motor.lock().unwrap().param_value(CAN_TIMEOUT),
        Some(4000u32.to_le_bytes())
    );
    // Spinning at 3 rad/s (kd only), commanded every 5 ms.
    let spin = Value::Struct(vec![
        ("position".into(), Value::Float(0.0)),
        ("velocity".into(), Value::Float(3.0)),
        ("kp".into(), Value::Float(0.0)),
        ("kd".into(), Value::Float(5.0)),
        ("torque".into(), Value::Float(0.0)),
    ]);
    for _ in 0..200 {
        r.m.publish("/robstride10/motor/mit", spin.clone())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // With the bus owner alive and silent for a second, it keeps running.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        r.motor.lock().unwrap().enabled(),
        "the living bus owner keeps it fed"
    );
    let v = r.motor.lock().unwrap().velocity();
    assert!((v - 3.0).abs() < 0.2, "spinning: {v}");

    // The bus owner goes (its last handle dropped: its task and the device link end).
    let Rig { m, motor, sims, .. } = r;
    drop(m);
    let gone = tokio::time::Instant::now();
    let mut stopped_after = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if !motor.lock().unwrap().enabled() {
            stopped_after = Some(gone.elapsed());
            break;
        }
    }
    let after = stopped_after.expect("the motor still runs 500 ms after its bus owner died");
    assert!(
        after <= Duration::from_millis(200 + 10),
        "in reset mode {after:?} after the bus owner died"
    );
    drop(sims);
}

#[tokio::test(start_paused = true)]
async fn mit_motor_enable_and_command() {
    let r = rig().await;
    let reply = r.m.call("/mit32/motor/enable", empty()).await.unwrap();
    assert!(success(&reply), "{reply:?}");
    assert!(r.mit.lock().unwrap().enabled());
    let mut fb = r.m.subscribe("/mit32/motor/feedback").await.unwrap();
    for _ in 0..300 {
        r.m.publish("/mit32/motor/mit", mit_command(-2.0, 20.0, 1.0))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let truth = r.mit.lock().unwrap().position();
    assert!((truth + 2.0).abs() < 0.05, "moved to -2 rad: {truth}");
    let mut last = f64::NAN;
    while let Ok(s) = fb.try_recv() {
        last = num(&s.value, "position");
    }
    assert!(
        (last - f64::from(truth)).abs() < 0.01,
        "feedback {last} vs {truth}"
    );
    let reply = r.m.call("/mit32/motor/disable", empty()).await.unwrap();
    assert!(success(&reply));
    assert!(!r.mit.lock().unwrap().enabled());
}

#[test]
fn bad_device_specs_name_the_key() {
    let err = |s: &str| {
        DeviceSpec::parse(s)
            .and_then(|d| devices(&[d]))
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    assert!(err("robstride:id=1,modle=RS03").contains("`modle`"));
    assert!(err("robstride:id=1,model=RS09").contains("model"));
    assert!(err("robstride:model=RS03").contains("`id`"));
    assert!(err("robstride:id=300").contains("`id`"));
    assert!(
        err("mit:id=0x120").contains("`id`"),
        "ids ≥ 0x100 are fcan's data plane"
    );
    assert!(err("stepper:id=1").contains("no driver `stepper`"));
    let two = [
        DeviceSpec::parse("robstride:id=1").unwrap(),
        DeviceSpec::parse("mit:id=1").unwrap(),
    ];
    let e = devices(&two).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("node id 1"), "{e}");
    let twice = [
        DeviceSpec::parse("robstride:id=1").unwrap(),
        DeviceSpec::parse("robstride:id=1,node=5").unwrap(),
    ];
    let e = devices(&twice).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("robstride motor 1"), "{e}");
}

/// Foxglove's channels of a driven device come from its schema through the same mapping
/// a board's do: a JSON Schema with the fields, the service with its request and
/// response — no driver-specific code in fcan-foxglove.
#[tokio::test(start_paused = true)]
async fn foxglove_channels_of_a_driven_device() {
    let r = rig().await;
    let registry = r.m.registry().await.unwrap();
    let fb = registry
        .topics
        .iter()
        .find(|t| t.name == "/robstride10/motor/feedback")
        .expect("in the registry");
    let spec = fcan_foxglove::mapping::channel_spec(fb);
    let schema: serde_json::Value = serde_json::from_slice(&spec.schema).unwrap();
    for field in [
        "position",
        "velocity",
        "torque",
        "temperature",
        "mode",
        "faults",
    ] {
        assert!(
            schema["properties"].get(field).is_some(),
            "{field}: {schema}"
        );
    }
    assert_eq!(spec.metadata["fcan.dir"], "s2m");
    let mit = registry
        .topics
        .iter()
        .find(|t| t.name == "/mit32/motor/mit")
        .expect("in the registry");
    assert_eq!(
        fcan_foxglove::mapping::channel_spec(mit).metadata["fcan.dir"],
        "m2s"
    );
    let enable = registry
        .services
        .iter()
        .find(|s| s.name == "/robstride10/motor/enable")
        .expect("a service");
    let svc = fcan_foxglove::mapping::service_spec(enable);
    let response: serde_json::Value = serde_json::from_slice(&svc.response.1).unwrap();
    assert!(
        response["properties"].get("success").is_some(),
        "{response}"
    );
}

/// `--device` on a one-shot command (no daemon): the command's own master drives the
/// device (as `fcan record` and every other one-shot command would).
#[tokio::test(start_paused = true)]
async fn a_one_shot_command_drives_devices_too() {
    use clap::Parser;
    let mut w = World::new(Mtu::Classic);
    w.add_motor(MD1, 2);
    let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(SimMotor::new(RS, Model::Rs03))];
    let _sims = tokio::spawn(fcan_drivers::sim::run(w.endpoint(), sims));
    let cli = fcan_cli::Cli::try_parse_from([
        "fcan",
        "--bus",
        "sim",
        "--no-cache",
        "--json",
        "--device",
        "robstride:id=10,model=RS03",
        "nodes",
    ])
    .unwrap();
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    fcan_cli::run_with(cli, Some(&w.bus), None, &mut out, &mut notes)
        .await
        .expect("the one-shot master runs");
    let nodes: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = |id: u64| nodes.iter().find(|n| n["id"] == id).cloned();
    assert_eq!(
        find(u64::from(RS)).unwrap()["driver"],
        "robstride",
        "{nodes:?}"
    );
    assert_eq!(
        find(u64::from(MD1)).unwrap()["driver"],
        serde_json::Value::Null
    );
    // The device's watchdog as the driver arms it, read back by the remote client's
    // parser; a board has none.
    assert_eq!(find(u64::from(RS)).unwrap()["watchdog"], "200 ms");
    assert_eq!(
        find(u64::from(MD1)).unwrap()["watchdog"],
        serde_json::Value::Null
    );
    for n in &nodes {
        let info = fcan_master::NodeInfo::from_json(n).expect("node info reads back");
        assert_eq!(
            info.watchdog.map(|w| w.to_string()).as_deref(),
            n["watchdog"].as_str()
        );
    }
    // A watchdog turned off by name is shouted in the table: that motor keeps its last
    // command when the bus owner dies.
    let cli = fcan_cli::Cli::try_parse_from([
        "fcan",
        "--bus",
        "sim",
        "--no-cache",
        "--device",
        "robstride:id=10,model=RS03,watchdog=off",
        "nodes",
    ])
    .unwrap();
    let mut out = Vec::new();
    fcan_cli::run_with(cli, Some(&w.bus), None, &mut out, &mut Vec::new())
        .await
        .expect("the one-shot master runs");
    let table = String::from_utf8(out).unwrap();
    let row = table
        .lines()
        .find(|l| l.contains("robstride10"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("driver: robstride, WATCHDOG OFF"), "{table}");
    let board = table.lines().find(|l| l.contains("motor_driver1")).unwrap();
    assert!(!board.contains("watchdog"), "{table}");
    // A bad device is refused before the bus is opened.
    let cli = fcan_cli::Cli::try_parse_from([
        "fcan",
        "--bus",
        "sim",
        "--device",
        "robstride:id=10,colour=red",
        "nodes",
    ])
    .unwrap();
    let e = fcan_cli::run_with(cli, Some(&w.bus), None, &mut Vec::new(), &mut Vec::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("`colour`"), "{e}");
    // A device set to CAN FD on a Classical bus is refused up front, named, rather than
    // every frame of it dropped by the link.
    let cli = fcan_cli::Cli::try_parse_from([
        "fcan",
        "--bus",
        "sim:classic",
        "--device",
        "mit:id=1,layout=damiao,fd=true",
        "nodes",
    ])
    .unwrap();
    let e = fcan_cli::run_with(cli, Some(&w.bus), None, &mut Vec::new(), &mut Vec::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mit id 0x001 (fd)") && e.contains("Classical CAN"),
        "{e}"
    );
}

/// Damiao's own command watchdog (register 9, `TIMEOUT`), armed by the `mit` driver
/// before the enable: a simulated Damiao spinning under a real master stops within
/// `watchdog_ms` of its bus owner dying, and says so (state 0xD); with `watchdog=off` it
/// keeps spinning.
#[tokio::test(start_paused = true)]
async fn a_damiao_stops_by_its_own_watchdog_when_the_bus_owner_dies() {
    use fcan_drivers::mit::wire::{Layout, Ranges};
    for (spec, armed) in [
        (
            "mit:id=0x21,master=0x11,layout=damiao,vmax=30,tmax=10",
            true,
        ),
        (
            "mit:id=0x21,master=0x11,layout=damiao,vmax=30,tmax=10,watchdog=off",
            false,
        ),
    ] {
        let w = World::new(Mtu::Classic);
        let mit = Arc::new(Mutex::new(SimMit::new(
            0x21,
            0x11,
            Layout::Damiao,
            Ranges::DM_J4310,
        )));
        let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(mit.clone())];
        let sims = tokio::spawn(fcan_drivers::sim::run(w.endpoint(), sims));
        let specs = [DeviceSpec::parse(spec).unwrap()];
        let host = DeviceHost::new(Mtu::Classic, devices(&specs).unwrap()).unwrap();
        let m = w.start_master_on(DeviceLink::new(w.endpoint(), host)).await;
        wait_running(&m, &[0x21], Duration::from_secs(10)).await;
        let reply = m.call("/mit33/motor/enable", empty()).await.unwrap();
        assert!(success(&reply), "{spec}: {reply:?}");
        // Armed before the enable: 200 ms = 4000 counts of 50 µs (or off).
        assert_eq!(
            mit.lock().unwrap().timeout_register(),
            if armed { 4000 } else { 0 },
            "{spec}"
        );
        let spin = Value::Struct(vec![
            ("position".into(), Value::Float(0.0)),
            ("velocity".into(), Value::Float(3.0)),
            ("kp".into(), Value::Float(0.0)),
            ("kd".into(), Value::Float(2.0)),
            ("torque".into(), Value::Float(0.0)),
        ]);
        for _ in 0..200 {
            m.publish("/mit33/motor/mit", spin.clone()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // With the bus owner alive and silent for a second, it keeps running.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(mit.lock().unwrap().enabled(), "{spec}: kept fed");
        let v = mit.lock().unwrap().velocity();
        assert!((v - 3.0).abs() < 0.3, "{spec}: spinning: {v}");

        // The bus owner goes (its last handle dropped: its task and the device link end).
        drop(m);
        let gone = tokio::time::Instant::now();
        let mut stopped_after = None;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if !mit.lock().unwrap().enabled() {
                stopped_after = Some(gone.elapsed());
                break;
            }
        }
        if armed {
            let after =
                stopped_after.expect("the motor still runs 500 ms after its bus owner died");
            assert!(
                after <= Duration::from_millis(200 + 10),
                "out of motor mode {after:?} after the bus owner died"
            );
            assert_eq!(mit.lock().unwrap().error(), 0xD, "lost communication");
        } else {
            assert_eq!(stopped_after, None, "watchdog=off: nothing stops it");
            let v = mit.lock().unwrap().velocity();
            assert!((v - 3.0).abs() < 0.3, "still spinning: {v}");
        }
        drop(sims);
        drop(w);
    }
}

/// `report_ms=20` (issue 38: `topic echo` of a RobStride's feedback printed nothing until a
/// command went out): the driver turns the motor's active reporting on (type 24, period
/// `EPScan_time`) whenever the motor answers after silence, so its feedback arrives every
/// 20 ms with no command; without the key the motor reports only in reply to one.
#[tokio::test(start_paused = true)]
async fn a_robstride_with_active_reporting_reports_without_commands() {
    for (spec, reporting) in [
        ("robstride:id=10,model=RS03,report_ms=20", true),
        ("robstride:id=10,model=RS03", false),
    ] {
        let w = World::new(Mtu::Classic);
        let motor = Arc::new(Mutex::new(SimMotor::new(RS, Model::Rs03)));
        let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(motor.clone())];
        let _sims = tokio::spawn(fcan_drivers::sim::run(w.endpoint(), sims));
        let specs = [DeviceSpec::parse(spec).unwrap()];
        let host = DeviceHost::new(Mtu::Classic, devices(&specs).unwrap()).unwrap();
        let m = w.start_master_on(DeviceLink::new(w.endpoint(), host)).await;
        wait_running(&m, &[RS], Duration::from_secs(10)).await;
        let mut fb = m.subscribe("/robstride10/motor/feedback").await.unwrap();
        // Settled: what the motor answered while it appeared is behind us.
        tokio::time::sleep(Duration::from_millis(200)).await;
        while fb.try_recv().is_ok() {}
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut n = 0;
        while fb.try_recv().is_ok() {
            n += 1;
        }
        if reporting {
            assert!((45..=55).contains(&n), "{spec}: {n} reports in 1 s");
        } else {
            assert_eq!(n, 0, "{spec}: the motor reports only in reply to a command");
        }
    }
    // One spec serves the bus owner and `fcan fake` alike.
    assert!(DeviceSpec::parse("robstride:id=10,report_ms=20")
        .unwrap()
        .simulated()
        .is_ok());
    // The period is checked: the motor reports every 10 ms + a multiple of 5 ms.
    let e = devices(&[DeviceSpec::parse("robstride:id=10,report_ms=12").unwrap()])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("`report_ms` = 12") && e.contains("10, 15, 20"),
        "{e}"
    );
}
