use fcan_core::frame::{CanId, Mtu};
use fcan_core::id::ConfigId;
use fcan_core::msg::ConfigMessage;
use fcan_e2e::*;
use std::time::Duration;

#[tokio::test(start_paused = true)]
#[allow(unused_variables, clippy::all)]
async fn trace() {
    let mtu = if std::env::var("CLASSIC").is_ok() {
        Mtu::Classic
    } else {
        Mtu::Fd
    };
    let mut w = World::new(mtu);
    w.add_motor(MD1, 8);
    w.add_motor(MD2, 4);
    w.add_io(IO3);
    let mut master = w.start_master().await;
    let cold = std::env::var("COLD").is_ok();
    if !cold {
        let _ = tokio::time::timeout(
            Duration::from_secs(3),
            wait_running(&master, &[1, 2, 3], Duration::from_secs(3)),
        )
        .await;
        drop(master);
        master = w.start_master().await;
    }
    let m2 = master.clone();
    tokio::spawn(async move {
        loop {
            let _ = m2.nodes().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let want: u8 = std::env::var("NODE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    for r in w.bus.history() {
        if let CanId::Extended(_) = r.frame.id() {
            let id = ConfigId::from_can_id(r.frame.id()).unwrap();
            if id.node.get() != want && id.node.get() != 127 {
                continue;
            }
            let m = ConfigMessage::decode(id.opcode, id.dir, r.frame.data())
                .map(|m| format!("{m:?}"))
                .unwrap_or_else(|_| {
                    format!("seg {} eot {} len {}", id.segment, id.eot, r.frame.len())
                });
            let m: String = m.chars().take(150).collect();
            println!(
                "{:>10.3} ms  s{} {:?} {:?} n{} t{} {}",
                r.start.as_secs_f64() * 1e3,
                r.sender.0,
                id.opcode,
                id.dir,
                id.node.get(),
                id.transfer,
                m
            );
        }
    }
    println!("{:?}", master.status().await.unwrap().stats);
    println!(
        "{:?}",
        master
            .nodes()
            .await
            .unwrap()
            .iter()
            .map(|n| (n.id, n.phase.clone()))
            .collect::<Vec<_>>()
    );
}
