//! Two CiA 402 drives on one bus (ids 5 and 6), both hosted under a real fcan master with
//! the simulated drives answering on the simulated bus: with `sync=off` on the second,
//! the bus carries one producer's SYNC (one per `sync_ms`) and each drive sends one TPDO
//! A and one TPDO B per SYNC, its `status` topic a sample per SYNC; without it, both
//! devices produce SYNC and everything comes twice per period. A producer whose own drive
//! is gone keeps the SYNC the other drive runs on.
//!
//! Paused clock: bus, drives, host and master run on tokio's virtual time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::{CanId, Mtu};
use fcan_drivers::cia402::sim::SimCia402;
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices_on, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_master::{Master, MasterOptions, Phase};
use fcan_transport::sim::{SimBus, SimConfig};
use fcan_transport::Transport;

/// The SYNC period of the specs below.
const SYNC_MS: u64 = 10;
/// The window counted.
const WINDOW: Duration = Duration::from_secs(1);

struct Rig {
    m: Master,
    drives: [Arc<Mutex<SimCia402>>; 2],
    /// Every standard identifier on the wire, from a listening endpoint.
    heard: Arc<Mutex<Vec<u16>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|t| t.abort());
    }
}

async fn rig(specs: [&str; 2]) -> Rig {
    let bus = SimBus::new(SimConfig::default());
    let drives = [5, 6].map(|id| Arc::new(Mutex::new(SimCia402::new(id))));
    let sims: Vec<Box<dyn SimDevice>> = drives
        .iter()
        .map(|d| Box::new(d.clone()) as Box<dyn SimDevice>)
        .collect();
    let mut tasks = vec![tokio::spawn(fcan_drivers::sim::run(
        bus.endpoint(Mtu::Fd),
        sims,
    ))];
    let heard = Arc::new(Mutex::new(Vec::new()));
    let mut tap = bus.endpoint(Mtu::Fd);
    let h = heard.clone();
    tasks.push(tokio::spawn(async move {
        while let Ok(r) = tap.recv().await {
            if let CanId::Standard(id) = r.frame.id() {
                h.lock().unwrap().push(id);
            }
        }
    }));
    let specs = specs.map(|s| DeviceSpec::parse(s).unwrap());
    let host = DeviceHost::new(Mtu::Fd, devices_on(&specs, Mtu::Fd).unwrap()).unwrap();
    let link = DeviceLink::new(bus.endpoint(Mtu::Fd), host);
    let m = Master::start(link, MasterOptions::default())
        .await
        .expect("master starts");
    Rig {
        m,
        drives,
        heard,
        tasks,
    }
}

async fn phase_of(m: &Master, id: u8) -> Option<Phase> {
    let nodes = m.nodes().await.expect("master alive");
    nodes
        .into_iter()
        .find(|n| n.id.get() == id)
        .map(|n| n.phase)
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

/// Over [`WINDOW`] of a running pair: SYNC frames, TPDO A and B of each drive, and the
/// status samples of each node.
struct Counts {
    sync: usize,
    tpdo_a: [usize; 2],
    tpdo_b: [usize; 2],
    status: [usize; 2],
}

async fn count(r: &Rig) -> Counts {
    until_running(&r.m, 5).await;
    until_running(&r.m, 6).await;
    let mut status = [
        r.m.subscribe("/drive5/cia402/status").await.unwrap(),
        r.m.subscribe("/drive6/cia402/status").await.unwrap(),
    ];
    // Settled: both brought up and cycling.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for s in &mut status {
        while s.try_recv().is_ok() {}
    }
    let from = r.heard.lock().unwrap().len();
    // Sliced, so the subscriptions never hold more than a few dozen samples.
    let mut samples = [0usize; 2];
    let slices = 10;
    for _ in 0..slices {
        tokio::time::sleep(WINDOW / slices).await;
        for (n, s) in samples.iter_mut().zip(&mut status) {
            while s.try_recv().is_ok() {
                *n += 1;
            }
        }
    }
    let heard = r.heard.lock().unwrap()[from..].to_vec();
    let n = |id: u16| heard.iter().filter(|&&x| x == id).count();
    Counts {
        sync: n(0x080),
        tpdo_a: [n(0x485), n(0x486)],
        tpdo_b: [n(0x685), n(0x686)],
        status: samples,
    }
}

fn near(got: usize, want: usize, what: &str) {
    assert!(
        got.abs_diff(want) <= 1,
        "{what}: {got} in {WINDOW:?}, want {want} ± 1"
    );
}

#[tokio::test(start_paused = true)]
async fn one_producer_one_sync_per_period_and_one_tpdo_each_per_sync() {
    let r = rig([
        "cia402:id=5,mode=csp,sync_ms=10",
        "cia402:id=6,mode=csv,sync_ms=10,sync=off",
    ])
    .await;
    let c = count(&r).await;
    let per_window = (WINDOW.as_millis() as u64 / SYNC_MS) as usize;
    near(c.sync, per_window, "SYNC frames (0x080)");
    for i in 0..2 {
        let id = 5 + i;
        near(
            c.tpdo_a[i],
            c.sync,
            &format!("drive {id}'s TPDO A per SYNC"),
        );
        near(
            c.tpdo_b[i],
            c.sync,
            &format!("drive {id}'s TPDO B per SYNC"),
        );
        near(
            c.status[i],
            c.sync,
            &format!("/drive{id}/cia402/status samples"),
        );
    }
    // 0x60C2 has the producer's period on the drive without SYNC of its own too.
    let d6 = r.drives[1].lock().unwrap();
    assert_eq!(d6.od().u64(0x60C2, 1), Some(SYNC_MS));
}

/// Without `sync=off` both devices produce SYNC: twice the SYNC, and each drive's TPDOs
/// and status twice per period (what the case above guards against).
#[tokio::test(start_paused = true)]
async fn two_producers_double_everything() {
    let r = rig([
        "cia402:id=5,mode=csp,sync_ms=10",
        "cia402:id=6,mode=csv,sync_ms=10",
    ])
    .await;
    let c = count(&r).await;
    let per_window = (WINDOW.as_millis() as u64 / SYNC_MS) as usize;
    assert!(
        c.sync.abs_diff(2 * per_window) <= 2,
        "SYNC frames: {} in {WINDOW:?}, want {} ± 2",
        c.sync,
        2 * per_window
    );
    for i in 0..2 {
        assert!(
            c.tpdo_a[i].abs_diff(c.sync) <= 2 && c.status[i].abs_diff(c.sync) <= 2,
            "drive {}: TPDO A {}, status {} for {} SYNC",
            5 + i,
            c.tpdo_a[i],
            c.status[i],
            c.sync
        );
    }
}

/// The producer's own drive goes silent (its node offline): the SYNC goes on at its
/// period, and the other drive's status keeps coming at that rate.
#[tokio::test(start_paused = true)]
async fn the_producer_keeps_sync_while_its_drive_is_gone() {
    let r = rig([
        "cia402:id=5,mode=csp,sync_ms=10",
        "cia402:id=6,mode=csv,sync_ms=10,sync=off",
    ])
    .await;
    until_running(&r.m, 5).await;
    until_running(&r.m, 6).await;
    r.drives[0].lock().unwrap().silence(true);
    let start = tokio::time::Instant::now();
    while phase_of(&r.m, 5).await == Some(Phase::Running) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never went offline"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut status = r.m.subscribe("/drive6/cia402/status").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    while status.try_recv().is_ok() {}
    let from = r.heard.lock().unwrap().len();
    let syncs = r.drives[1].lock().unwrap().syncs();
    let mut samples = 0;
    for _ in 0..10 {
        tokio::time::sleep(WINDOW / 10).await;
        while status.try_recv().is_ok() {
            samples += 1;
        }
    }
    let sync = r.heard.lock().unwrap()[from..]
        .iter()
        .filter(|&&x| x == 0x080)
        .count();
    let per_window = (WINDOW.as_millis() as u64 / SYNC_MS) as usize;
    assert_ne!(phase_of(&r.m, 5).await, Some(Phase::Running), "still gone");
    near(
        sync,
        per_window,
        "SYNC frames with the producer's drive gone",
    );
    near(
        (r.drives[1].lock().unwrap().syncs() - syncs) as usize,
        sync,
        "SYNCs drive 6 took",
    );
    near(samples, sync, "/drive6/cia402/status samples");
}

/// `sync` takes `off`, by name; anything else is refused naming what it takes.
#[test]
fn sync_takes_only_off() {
    let dev = |s: &str| DeviceSpec::parse(s).unwrap().device().map(|_| ());
    dev("cia402:id=5,sync=off").unwrap();
    dev("cia402:id=5,sync=OFF").unwrap();
    for bad in ["on", "0", "false", ""] {
        let err = dev(&format!("cia402:id=5,sync={bad}")).unwrap_err().0;
        assert!(
            err.contains("only `sync=off` is taken"),
            "sync={bad}: {err}"
        );
    }
}
