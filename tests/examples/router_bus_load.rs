//! Bus load with and without the router, on simulated buses (virtual time, bit-exact
//! frame timing): the real master, four scripted nodes, each sending its 8-byte feedback
//! every 20 ms, and the master commanding every node at 100 Hz.
//!
//! * shared: master and the four nodes on one bus;
//! * routed: master on the uplink, nodes 1–2 on downlink A, nodes 3–4 on downlink B.
//!
//! `cargo run --release -p fcan-e2e --example router_bus_load [classic|fd]`

#[path = "../tests/scripted_node/mod.rs"]
mod scripted_node;

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_master::transport::sim::SimBus;
use fcan_master::value::Value;
use fcan_master::{Master, MasterOptions};
use fcan_router::bridge::{Bridge, BridgeOptions};
use scripted_node::*;

const NODES: u8 = 4;
const WARMUP: Duration = Duration::from_secs(10);
const WINDOW: Duration = Duration::from_secs(5);

async fn drive(master: &Master) {
    master
        .wait_for_nodes(NODES as usize, Duration::from_secs(30))
        .await
        .expect("nodes running");
    let start = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while start.elapsed() < WARMUP + WINDOW - Duration::from_secs(3) {
        tick.tick().await;
        for id in 1..=NODES {
            let v = Value::Struct(vec![
                ("vel".into(), Value::Float(1.0)),
                ("torque".into(), Value::Float(2.0)),
            ]);
            master
                .publish(&format!("/n{id}/motor/cmd"), v)
                .await
                .unwrap();
        }
    }
}

fn window(bus: &SimBus) -> f64 {
    let end = bus.now();
    bus.load(end - WINDOW..end)
}

async fn shared(mtu: Mtu) -> f64 {
    let bus = SimBus::new(Default::default());
    let _nodes: Vec<_> = (1..=NODES)
        .map(|id| {
            spawn_node(
                bus.endpoint(mtu),
                NodeSpec {
                    id,
                    boot_id: 0x100 + id as u32,
                    fd: mtu == Mtu::Fd,
                },
                blob(),
            )
        })
        .collect();
    let master = Master::start(bus.endpoint(mtu), MasterOptions::default())
        .await
        .unwrap();
    drive(&master).await;
    window(&bus)
}

async fn routed(mtu: Mtu) -> (f64, f64, f64) {
    let up = SimBus::new(Default::default());
    let a = SimBus::new(Default::default());
    let b = SimBus::new(Default::default());
    let bridge: Bridge<2> = Bridge::start(
        up.endpoint(mtu),
        vec![a.endpoint(mtu), b.endpoint(mtu)],
        BridgeOptions::default(),
    )
    .unwrap();
    let _nodes: Vec<_> = (1..=NODES)
        .map(|id| {
            let bus = if id <= NODES / 2 { &a } else { &b };
            spawn_node(
                bus.endpoint(mtu),
                NodeSpec {
                    id,
                    boot_id: 0x100 + id as u32,
                    fd: mtu == Mtu::Fd,
                },
                blob(),
            )
        })
        .collect();
    let master = Master::start(up.endpoint(mtu), MasterOptions::default())
        .await
        .unwrap();
    drive(&master).await;
    let loads = (window(&up), window(&a), window(&b));
    let c = bridge.stop().await;
    println!(
        "router: up received {} sent {}; A sent {}; B sent {}; dropped {}",
        c.up.received,
        c.up.sent,
        c.down[0].sent,
        c.down[1].sent,
        c.dropped.total()
    );
    loads
}

fn main() {
    let mtu = match std::env::args().nth(1).as_deref() {
        Some("fd") => Mtu::Fd,
        _ => Mtu::Classic,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let s = shared(mtu).await;
        let (u, a, b) = routed(mtu).await;
        println!(
            "{} links, 1/5 Mbit/s, {NODES} nodes, feedback 50 Hz + commands 100 Hz per node, load over {WINDOW:?}:",
            if mtu == Mtu::Fd { "CAN FD" } else { "Classical CAN" },
        );
        println!("  shared bus:           {:5.2} %", s * 100.0);
        println!("  routed: uplink        {:5.2} %", u * 100.0);
        println!("  routed: downlink A    {:5.2} %   ({:+.0} % vs shared)", a * 100.0, (a / s - 1.0) * 100.0);
        println!("  routed: downlink B    {:5.2} %   ({:+.0} % vs shared)", b * 100.0, (b / s - 1.0) * 100.0);
    });
}
