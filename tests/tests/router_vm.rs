//! The `fcan-router` binary on real kernel SocketCAN: the router process between `vcan0`
//! (the real master) and `vcan1` (a scripted node), discovery, topics, a service and a
//! parameter through it, counters on SIGUSR1 and a clean exit on Ctrl-C (SIGINT).
//!
//! Needs SocketCAN with `vcan0` and `vcan1` up, which a host may not have: the test is
//! `#[ignore]`d (and fails when forced without them), and `.ci/vm-router.sh` runs it
//! with `--ignored` inside the VM of `../shared/tools/run-in-vm.sh`
//! (`run-in-vm.sh --with target/…/fcan-router <this test binary> --ignored …`), which
//! puts the router binary on `PATH`.

mod scripted_node;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_master::transport::{open, Transport};
use fcan_master::value::Value;
use fcan_master::{Master, MasterOptions};
use scripted_node::*;

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid we spawned; no memory is involved.
    let r = unsafe { libc::kill(pid as libc::pid_t, sig) };
    assert_eq!(r, 0, "kill({pid}, {sig})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs SocketCAN: .ci/vm-router.sh runs it in a VM"]
async fn router_binary_between_vcan0_and_vcan1() {
    for iface in ["vcan0", "vcan1"] {
        assert!(
            std::path::Path::new("/sys/class/net").join(iface).exists(),
            "no {iface}: this test needs SocketCAN with vcan0 and vcan1 up \
             (.ci/vm-router.sh runs it in a VM)"
        );
    }
    let bin = std::env::var("FCAN_ROUTER_BIN").unwrap_or_else(|_| "fcan-router".into());
    let mut router = Command::new(&bin)
        .args([
            "--uplink",
            "socketcan:vcan0",
            "--downlink",
            "socketcan:vcan1",
            "--stats-interval",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let pid = router.id();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(router.try_wait().unwrap().is_none(), "router exited early");

    let node_link = open("socketcan:vcan1", None).expect("vcan1");
    let fd = node_link.mtu() == Mtu::Fd;
    println!("vcan MTU: {}", if fd { "CAN FD" } else { "classic" });
    let node = spawn_node(
        node_link,
        NodeSpec {
            id: 7,
            boot_id: 0x7777_0001,
            fd,
        },
        blob(),
    );
    let master = Master::start(
        open("socketcan:vcan0", None).expect("vcan0"),
        MasterOptions::default(),
    )
    .await
    .expect("master on vcan0");

    let nodes = master
        .wait_for_nodes(1, Duration::from_secs(20))
        .await
        .expect("the node on vcan1 is discovered and provisioned through the router");
    println!("nodes: {nodes:?}");

    let mut sub = master.subscribe("/n7/motor/feedback").await.unwrap();
    let sample = tokio::time::timeout(Duration::from_secs(2), sub.recv())
        .await
        .expect("feedback through the router")
        .unwrap();
    println!("sample: {sample:?}");

    for i in 0..5 {
        master
            .publish(
                "/n7/motor/cmd",
                Value::Struct(vec![
                    ("vel".into(), Value::Float(i as f64)),
                    ("torque".into(), Value::Float(0.5)),
                ]),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(node.log().m2s.len(), 5, "every command reached the node");

    let y = master
        .call(
            "/n7/motor/ping",
            Value::Struct(vec![("x".into(), Value::UInt(1))]),
        )
        .await
        .expect("service through the router");
    assert_eq!(y, Value::Struct(vec![("y".into(), Value::UInt(2))]));
    master
        .param_set("n7.motor.gain", Value::Float(3.0))
        .await
        .expect("param through the router");
    assert_eq!(
        master.param_get("n7.motor.gain").await.unwrap(),
        Value::Float(3.0)
    );

    // Counters on request, then a clean stop.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    signal(pid, libc::SIGUSR1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(pid, libc::SIGINT);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = router.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "router did not stop on SIGINT"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut out = String::new();
    router
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    router
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    println!("--- router stderr ---\n{err}--- router stdout ---\n{out}");
    assert!(status.success(), "router exit status {status:?}");
    assert!(
        err.contains("node 7 on downlink 0 (vcan1)"),
        "learning logged"
    );
    assert!(err.contains("final counters"));
    let reports = out.matches("learned: nodes=1 ").count();
    assert!(
        reports >= 3,
        "periodic, SIGUSR1 and final reports: {reports}"
    );
    assert!(out.contains("dropped 0:"), "nothing dropped");
}
