//! One error model: the same client function, written against `MasterApi` only, run
//! over an in-process `Master` and over a `RemoteMaster` (a daemon serving its own
//! master over Zenoh on loopback), sees the same `ErrorKind` for the same faults:
//! an unknown name, a bad value, a node that never answers (timeout), too many requests
//! to one node (busy), a node gone offline (not running), a master that has stopped.
//!
//! Real time, as `remote.rs` (whose docs say why): the faults are made by the test
//! (a node's task stopped), never left to the clock, and the waits poll with a generous
//! bound.

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_e2e::*;
use fcan_master::value::Value;
use fcan_master::{ErrorKind, Master, MasterApi, MasterError, Phase};
use fcan_remote::server::{Server, ServerOptions};
use fcan_remote::session::SessionConfig;
use fcan_remote::{ClientOptions, RemoteMaster};

/// Generous bound for anything that should happen "soon" on a loaded 2-core box.
const SOON: Duration = Duration::from_secs(60);

/// Requests sent at once to the silent node: two more than a node may have
/// outstanding (`fcan_master::engine::MAX_OUTSTANDING_REQUESTS`), so the last two are
/// refused at once and the others time out.
const FLOOD: usize = fcan_master::engine::MAX_OUTSTANDING_REQUESTS + 2;

/// The kinds one fault gave, by the fault's name, in the order the faults were made.
type Kinds = Vec<(&'static str, Vec<ErrorKind>)>;

fn kind_of<T: std::fmt::Debug>(r: Result<T, MasterError>) -> ErrorKind {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.kind(),
    }
}

/// The client function: makes each fault through `m` and returns the kinds it saw.
/// `silence` stops io_board3 (pulls its power) and `stop_master` stops the master; both
/// are the test's doing, not the client's, so they come in as closures.
async fn faults<M: MasterApi>(
    m: &M,
    silence: impl FnOnce(),
    stop_master: impl AsyncFnOnce(),
) -> Kinds {
    let mut kinds: Kinds = Vec::new();
    // A name no node offers.
    let e = m.param_get("motor_driver1.motor0.velocity.kq").await;
    kinds.push(("unknown name", vec![kind_of(e)]));
    // A value outside the parameter's bounds, and one of the wrong type.
    let kp = "motor_driver1.motor0.velocity.kp";
    let e1 = m.param_set(kp, Value::Float(200.0)).await;
    let e2 = m.call("/io_board3/out0/set", val("{on: 5}")).await;
    kinds.push(("bad value", vec![kind_of(e1), kind_of(e2)]));

    // io_board3 stops answering; the master learns it only after the offline timeout
    // (3 s), longer than a service's (1.5 s): every call sent now times out, except
    // those past the node's limit of outstanding requests, refused at once.
    silence();
    let calls: Vec<_> = (0..FLOOD)
        .map(|_| {
            let m = m.clone();
            tokio::spawn(async move { m.call("/io_board3/out1/set", val("{on: true}")).await })
        })
        .collect();
    let mut flood = Vec::new();
    for c in calls {
        flood.push(kind_of(c.await.expect("the call's task")));
    }
    flood.sort_by_key(|k| k.as_str());
    kinds.push(("silent node", flood));

    // Once the master has it offline: not running, whether asked by name or in a call.
    let t0 = std::time::Instant::now();
    loop {
        let nodes = m.nodes().await.expect("nodes");
        if nodes
            .iter()
            .any(|n| n.id.get() == IO3 && n.phase == Phase::Offline)
        {
            break;
        }
        assert!(t0.elapsed() < SOON, "io_board3 never went offline");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e1 = m.call("/io_board3/out1/set", val("{on: true}")).await;
    let e2 = m.param_get("io_board3.out1.min_on_ms").await;
    kinds.push(("offline node", vec![kind_of(e1), kind_of(e2)]));

    // The master stops (leaves the bus): every request fails the same from then on.
    stop_master().await;
    let t0 = std::time::Instant::now();
    let stopped = loop {
        match m.nodes().await {
            Err(e) => break e.kind(),
            // A remote master may answer from before the stop for a moment.
            Ok(_) => {
                assert!(t0.elapsed() < SOON, "the master never stopped answering");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    kinds.push(("stopped master", vec![stopped]));
    kinds
}

/// What both runs must see.
fn expected() -> Kinds {
    let mut silent = vec![ErrorKind::Timeout; FLOOD - 2];
    silent.extend([ErrorKind::Busy; 2]);
    silent.sort_by_key(|k| k.as_str());
    vec![
        ("unknown name", vec![ErrorKind::UnknownName]),
        ("bad value", vec![ErrorKind::BadValue, ErrorKind::BadValue]),
        ("silent node", silent),
        (
            "offline node",
            vec![ErrorKind::NotRunning, ErrorKind::NotRunning],
        ),
        ("stopped master", vec![ErrorKind::Stopped]),
    ]
}

async fn leave(master: &Master) {
    master.leave().await.expect("the master leaves");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_faults_give_the_same_kinds_in_process_and_remote() {
    // In process.
    let (w, master) = World::standard(Mtu::Fd).await;
    let local = faults(&master, || w.io(IO3).stop(), async || leave(&master).await).await;
    assert_eq!(local, expected(), "in process");

    // Remote: a daemon serves its master over Zenoh on loopback.
    let (w, master) = World::standard(Mtu::Fd).await;
    let port = free_port();
    let ep = format!("tcp/127.0.0.1:{port}");
    let dz = SessionConfig::daemon()
        .listen([ep.clone()])
        .open()
        .await
        .expect("daemon session opens")
        .session;
    let _server = Server::start(master.clone(), &dz, "sim", ServerOptions::default())
        .await
        .expect("the server starts");
    let cz = SessionConfig::client()
        .connect([ep])
        .open()
        .await
        .expect("client session opens")
        .session;
    let remote = RemoteMaster::connect(&cz, "sim", ClientOptions::default())
        .await
        .expect("the client connects");
    MasterApi::wait_for_nodes(&remote, 3, SOON)
        .await
        .expect("the daemon's three nodes run");
    let got = faults(&remote, || w.io(IO3).stop(), async || leave(&master).await).await;
    assert_eq!(got, expected(), "remote");
}
