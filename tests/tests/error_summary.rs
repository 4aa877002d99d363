//! The heartbeat's error summary counts trouble only (issue 10, items 12 and 18): on a
//! healthy bus full of other nodes' traffic — periodic feedback from every board, the
//! master's commands, parameter writes and service calls — every node reports 0 errors,
//! in its own counters and in what the master shows (`fcan nodes`, `fcan monitor`).

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_core::msg::Counters;
use fcan_e2e::*;

fn counters(w: &World, id: u8) -> Counters {
    if let Some(m) = w.motors.get(&id) {
        return m.with(|f| f.node.counters());
    }
    w.io(id).with(|f| f.node.counters())
}

async fn healthy_nodes_report_no_errors(mtu: Mtu) {
    // The I/O board boots late, into a bus where the motor drivers already run: its
    // listen window and provisioning see their data frames and the master's heartbeats.
    let mut w = World::new(mtu);
    w.add_motor(MD1, 8);
    w.add_motor(MD2, 4);
    let m = w.start_master().await;
    wait_running(&m, &[MD1, MD2], Duration::from_secs(3)).await;
    w.add_io(IO3);
    wait_running(&m, &[MD1, MD2, IO3], Duration::from_secs(3)).await;

    // Normal operation for a few seconds: commands, a parameter, services.
    for i in 0..40 {
        let v = format!("{{type: 1, value: {}}}", i as f64 * 0.1);
        m.publish("/motor_driver1/motor0/target", val(&v))
            .await
            .unwrap();
        m.publish("/motor_driver2/motor1/target", val(&v))
            .await
            .unwrap();
        if i % 10 == 0 {
            m.call("/io_board3/out0/set", val("{on: true}"))
                .await
                .unwrap();
            m.call("/io_board3/analog/calibrate", val("{}"))
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A heartbeat (1 s) has carried the latest summary to the master.
    tokio::time::sleep(Duration::from_millis(1_100)).await;

    let nodes = m.nodes().await.unwrap();
    for id in [MD1, MD2, IO3] {
        let c = counters(&w, id);
        assert!(c.rx_handled > 0 && c.tx_frames > 0, "node {id}: {c:?}");
        assert!(
            c.rx_ignored > 0,
            "node {id} heard other nodes' traffic: {c:?}"
        );
        assert_eq!(c.error_summary(), 0, "node {id}: {c:?}");
        let info = nodes.iter().find(|n| n.id.get() == id).unwrap();
        assert_eq!(info.errors, 0, "node {id} as the master sees it: {c:?}");
    }
}

/// One-shot commands leave no lost master behind (issue 33 item 5): each `fcan nodes`
/// starts a master of its own and leaves on purpose when done (`Master::leave`: the
/// nodes stop at once, PROVISIONED, watchdog off), so after three of them the nodes'
/// error summaries are still 0 and the third one shows `ERRORS 0`. A master dropped
/// without leaving (a killed one) still suspends the nodes by their watchdogs and counts.
async fn one_shot_commands_leave_no_lost_master(mtu: Mtu) {
    use clap::Parser;
    use fcan_core::msg::NodeState;
    let mut w = World::new(mtu);
    w.add_motor(MD1, 2);
    w.add_io(IO3);
    for round in 0..3 {
        let cli =
            fcan_cli::Cli::try_parse_from(["fcan", "--bus", "sim", "--no-cache", "nodes"]).unwrap();
        let mut out = Vec::new();
        fcan_cli::run_with(cli, Some(&w.bus), None, &mut out, &mut Vec::new())
            .await
            .expect("fcan nodes");
        let table = String::from_utf8(out).unwrap();
        for id in [MD1, IO3] {
            let row = table
                .lines()
                .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
                .unwrap_or_else(|| panic!("round {round}: node {id} missing:\n{table}"));
            let errors: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(
                errors[6], "0",
                "round {round}: ERRORS of node {id}:\n{table}"
            );
        }
        // The master left: the nodes stopped at once, with nothing counted.
        for id in [MD1, IO3] {
            assert_eq!(w.node_state(id), NodeState::Provisioned, "round {round}");
            assert_eq!(counters(&w, id).master_lost, 0, "round {round}, node {id}");
        }
        // Long past the master-lost timeout: still nothing counted.
        tokio::time::sleep(Duration::from_millis(500)).await;
        for id in [MD1, IO3] {
            assert_eq!(counters(&w, id).master_lost, 0, "round {round}, node {id}");
        }
    }
    // A master that dies without leaving is still caught by the nodes' watchdogs.
    let m = w.start_master().await;
    wait_running(&m, &[MD1, IO3], Duration::from_secs(3)).await;
    drop(m);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(w.node_state(MD1), NodeState::Suspended);
    assert_eq!(counters(&w, MD1).master_lost, 1);
}

both_links!(
    healthy_nodes_report_no_errors,
    one_shot_commands_leave_no_lost_master
);
