//! A NaN through the remote API: the daemon writes a NaN float field as JSON `null`, and
//! `fcan_remote::RemoteMaster` reads it back as NaN (`Value::from_written_json`), the
//! sample's other fields intact. Before the fix the client parsed samples with
//! `Value::from_json`, which refuses `null`, and dropped the whole sample.
//!
//! The NaN comes from an off-the-shelf driver: a CiA 402 drive without torque actual
//! (0x6077, absent from `tests/peers/cia402_slave.eds`) publishes `torque` NaN on
//! `/drive5/cia402/status`. The drive runs under a master on a Classical simulated bus,
//! served by `fcan_remote::Server` over Zenoh on loopback, a `RemoteMaster` subscribed.
//!
//! Real time, as in `remote.rs`: Zenoh's own runtimes do not follow a paused clock, so
//! every wait is bounded generously and polls.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_drivers::cia402::eds::Eds;
use fcan_drivers::cia402::sim::SimCia402;
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices_on, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_e2e::free_port;
use fcan_master::value::Value;
use fcan_master::{Master, MasterApi, MasterOptions, Phase};
use fcan_remote::server::{Server, ServerOptions};
use fcan_remote::session::SessionConfig;
use fcan_remote::{ClientOptions, RemoteMaster};
use fcan_transport::sim::{SimBus, SimConfig};

/// Generous bound for anything that should happen "soon" on a loaded 2-core box.
const SOON: Duration = Duration::from_secs(60);

fn ep(port: u16) -> String {
    format!("tcp/127.0.0.1:{port}")
}

fn float(v: &Value, f: &str) -> f64 {
    match v.field(f) {
        Some(Value::Float(x)) => *x,
        other => panic!("field {f} is {other:?} in {v:?}"),
    }
}

fn num(v: &Value, f: &str) -> f64 {
    v.field(f)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number {f} in {v:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nan_field_of_a_sample_reaches_a_remote_subscriber_as_nan() {
    let eds_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/peers/cia402_slave.eds"
    );
    let eds = Eds::parse(&std::fs::read_to_string(eds_path).unwrap()).unwrap();
    assert!(!eds.has(0x6077, 0), "the EDS has no torque actual");

    // The drive, its driver under a master, on a Classical simulated bus.
    let mtu = Mtu::Classic;
    let bus = SimBus::new(SimConfig::default());
    let drive = Arc::new(Mutex::new(SimCia402::with_eds(5, &eds).without(0x6077)));
    let sims: Vec<Box<dyn SimDevice>> = vec![Box::new(drive.clone())];
    let sims = tokio::spawn(fcan_drivers::sim::run(bus.endpoint(mtu), sims));
    let spec = format!("cia402:id=5,mode=csp,counts=1000,eds={eds_path}");
    let specs = [DeviceSpec::parse(&spec).unwrap()];
    let host = DeviceHost::new(mtu, devices_on(&specs, mtu).unwrap()).unwrap();
    let link = DeviceLink::new(bus.endpoint(mtu), host);
    let master = Master::start(link, MasterOptions::default())
        .await
        .expect("master starts");

    // Served over Zenoh on loopback, a client connected.
    let port = free_port();
    let dz = SessionConfig::daemon()
        .listen([ep(port)])
        .open()
        .await
        .expect("daemon session opens")
        .session;
    let _server = Server::start(master.clone(), &dz, "sim", ServerOptions::default())
        .await
        .unwrap();
    let cz = SessionConfig::client()
        .connect([ep(port)])
        .open()
        .await
        .expect("client session opens")
        .session;
    let m = RemoteMaster::connect(&cz, "sim", ClientOptions::default())
        .await
        .unwrap();
    let t0 = std::time::Instant::now();
    loop {
        let running = m.nodes().await.ok().is_some_and(|ns| {
            ns.iter()
                .any(|n| n.id.get() == 5 && n.phase == Phase::Running)
        });
        if running {
            break;
        }
        assert!(t0.elapsed() < SOON, "drive 5 not running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Locally the status carries torque NaN; remotely the same samples arrive.
    let mut local = master.subscribe("/drive5/cia402/status").await.unwrap();
    let mut remote = m.subscribe("/drive5/cia402/status").await.unwrap();
    let reply = m
        .call("/drive5/cia402/enable", Value::Struct(Vec::new()))
        .await;
    assert!(
        matches!(
            reply.as_ref().map(|r| r.field("success")),
            Ok(Some(Value::Bool(true)))
        ),
        "{reply:?}"
    );
    let l = tokio::time::timeout(SOON, local.recv())
        .await
        .expect("a local sample in time")
        .expect("local subscription open");
    assert!(float(&l.value, "torque").is_nan(), "{:?}", l.value);

    // Until the drive reports operation enabled: every remote sample has torque NaN and
    // its other fields numbers.
    let t0 = std::time::Instant::now();
    let last = loop {
        let s = tokio::time::timeout(SOON, remote.recv())
            .await
            .expect("a remote status sample in time (a NaN sample dropped?)")
            .expect("remote subscription open");
        assert!(
            float(&s.value, "torque").is_nan(),
            "torque NaN: {:?}",
            s.value
        );
        if num(&s.value, "state") == 4.0 {
            break s.value;
        }
        assert!(t0.elapsed() < SOON, "never enabled: {:?}", s.value);
    };
    assert_eq!(num(&last, "mode"), 8.0, "mode display: {last:?}");
    assert!(
        float(&last, "position").is_finite() && float(&last, "velocity").is_finite(),
        "{last:?}"
    );
    drop(drive);
    sims.abort();
}
