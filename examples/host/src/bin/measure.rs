//! End-to-end figures on the simulated bus (bit-time model), in virtual time:
//! provisioning time cold and warm, bus load with the motor example at 1 kHz targets,
//! and command-to-feedback latency. See docs/performance.md, "End to end".
//!
//! ```sh
//! cargo run --release -p fcan-examples --bin measure
//! ```

use std::sync::Arc;
use std::time::Duration;

use fcan_core::frame::{CanId, Mtu};
use fcan_examples::{motor_driver, run_node_shared};
use fcan_master::cache::MemoryStore;
use fcan_master::engine::CallError;
use fcan_master::transport::sim::{SimBus, SimConfig};
use fcan_master::value::Value;
use fcan_master::{Master, MasterError, MasterOptions};
use tokio::time::Instant;

const NODE: u8 = 1;
const MOTORS: u8 = 8;

async fn start(bus: &SimBus, mtu: Mtu, store: &Arc<MemoryStore>) -> Master {
    Master::start(
        bus.endpoint(mtu),
        MasterOptions {
            store: Box::new(store.clone()),
            ..Default::default()
        },
    )
    .await
    .expect("master starts")
}

async fn running(m: &Master) -> Duration {
    let t0 = Instant::now();
    loop {
        let n = m.nodes().await.expect("master");
        if n.iter()
            .any(|n| n.id.get() == NODE && n.phase == fcan_master::Phase::Running)
        {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "not provisioned");
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
}

/// Provisioning time: the node has booted and is announcing; from `Master::start`
/// returning (its DISCOVER queued) to the node RUNNING.
async fn provisioning(mtu: Mtu, store: &Arc<MemoryStore>) -> (Duration, u64) {
    let bus = SimBus::new(SimConfig::default());
    let _node = run_node_shared(
        bus.endpoint(mtu),
        motor_driver(NODE, MOTORS, mtu == Mtu::Fd),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let m = start(&bus, mtu, store).await;
    let t = running(&m).await;
    let frames = bus.totals().frames;
    (t, frames)
}

fn f(v: f64) -> Value {
    Value::Float(v)
}

async fn link(mtu: Mtu) {
    let name = if mtu == Mtu::Fd {
        "CAN FD 1/5 Mbit/s (BRS)"
    } else {
        "Classical CAN 1 Mbit/s"
    };
    let store = Arc::new(MemoryStore::new());
    let (cold, _) = provisioning(mtu, &store).await;
    let (warm, _) = provisioning(mtu, &store).await;

    // Load: one motor driver, 8 motors, the master publishing every motor's target at
    // 1 kHz, the node sending feedback at its schema period (5 ms).
    let bus = SimBus::new(SimConfig::default());
    let node = run_node_shared(
        bus.endpoint(mtu),
        motor_driver(NODE, MOTORS, mtu == Mtu::Fd),
    );
    let m = start(&bus, mtu, &store).await;
    running(&m).await;
    let names: Vec<String> = (0..MOTORS)
        .map(|i| format!("/motor_driver1/motor{i}/target"))
        .collect();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.tick().await;
    let from = bus.now();
    // All eight targets go out as one batch per tick, so a frame that carries several of
    // them is sent once. Run 1 s, longer than the master-lost timeout, to show the
    // configuration plane keeps working. On Classical CAN each target needs its own frame
    // and the offered load exceeds the bus: the master admits commands by bus time
    // (docs/protocol.md §5.5) and refuses a batch `Busy` while 20 ms of them wait; the
    // refusals are counted, and the heartbeat keeps the node running.
    let ticks = 1000u32;
    let mut busy = 0u32;
    for k in 0..ticks {
        tick.tick().await;
        let batch: Vec<(String, Value)> = names
            .iter()
            .map(|n| {
                let v = Value::Struct(vec![
                    ("type".into(), Value::UInt(1)),
                    ("value".into(), f((k % 100) as f64 * 0.1)),
                ]);
                (n.clone(), v)
            })
            .collect();
        match m.publish_many(batch).await {
            Ok(()) => {}
            Err(MasterError::Call(CallError::Busy { .. })) => busy += 1,
            Err(e) => {
                let st = node.with(|f| (f.node.state(), f.node.counters()));
                panic!(
                    "publish at {k} ms: {e}; master sees {:?}; node {st:?}",
                    m.nodes().await
                );
            }
        }
    }
    let lost = node.with(|f| f.node.counters().master_lost);
    assert_eq!(lost, 0, "the node lost its master under the load");
    let to = bus.now();
    let load = bus.load(from..to);
    let secs = (to - from).as_secs_f64();
    let (mut m2s, mut s2m, mut cfg) = ((0u64, 0.0f64), (0u64, 0.0f64), (0u64, 0.0f64));
    for r in bus
        .history()
        .iter()
        .filter(|r| r.start >= from && r.end <= to)
    {
        let busy = (r.end - r.start).as_secs_f64();
        let slot = match r.frame.id() {
            CanId::Standard(_) if r.sender.0 == 0 => &mut s2m,
            CanId::Standard(_) => &mut m2s,
            CanId::Extended(_) => &mut cfg,
        };
        slot.0 += 1;
        slot.1 += busy;
    }
    let fb_1khz = (m2s.1 + 5.0 * s2m.1 + cfg.1) / secs;
    let queued: Vec<f64> = bus
        .history()
        .iter()
        .filter(|r| r.start >= from && r.end <= to && r.sender.0 != 0)
        .filter(|r| matches!(r.frame.id(), CanId::Standard(_)))
        .map(|r| r.queueing_latency().as_secs_f64() * 1e3)
        .collect();
    let max_queue = queued.iter().copied().fold(0.0, f64::max);
    let m2s_bytes: Vec<usize> = bus
        .history()
        .iter()
        .filter(|r| {
            r.start >= from && r.sender.0 != 0 && matches!(r.frame.id(), CanId::Standard(_))
        })
        .map(|r| r.frame.len())
        .take(1)
        .collect();
    // What one publish per topic (no batching) would offer: 8000 frames/s of this size.
    let per_frame = m2s.1 / m2s.0.max(1) as f64;
    let offered = per_frame * 8000.0;

    // Latency: motor 0 stopped (no fresh command: feedback `ready` false); publish a duty
    // command at a random phase; latency = from the publish call to the end (on the wire)
    // of the first feedback frame with `ready` true, i.e. computed by a control step that
    // used the command.
    let mut fb = m
        .subscribe("/motor_driver1/motor0/feedback")
        .await
        .expect("sub");
    let mut lat = Vec::new();
    fastrand::seed(1);
    for _ in 0..100 {
        tokio::time::sleep(
            Duration::from_millis(150) + Duration::from_micros(fastrand::u64(..5000)),
        )
        .await;
        while fb.try_recv().is_ok() {}
        let t0 = tokio::time::Instant::now().into_std();
        let v = Value::Struct(vec![
            ("type".into(), Value::UInt(0)),
            ("value".into(), f(0.2)),
        ]);
        m.publish("/motor_driver1/motor0/target", v)
            .await
            .expect("publish");
        loop {
            let s = fb.recv().await.expect("feedback");
            let ready = matches!(&s.value, Value::Struct(fs) if fs.iter().any(|(n, v)| &**n == "ready" && *v == Value::Bool(true)));
            if ready {
                lat.push(s.at.saturating_duration_since(t0).as_secs_f64() * 1e3);
                break;
            }
        }
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    let mean = lat.iter().sum::<f64>() / lat.len() as f64;
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize];
    drop(node);

    println!("## {name}");
    println!(
        "provisioning, 1 node (8 motors): cold {:.1} ms, warm {:.1} ms",
        cold.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e3
    );
    println!(
        "load, targets 8 x 1 kHz + feedback 8 x 200 Hz: {:.1} % ({} m2s frames/s {:.1} %, {} s2m frames/s {:.1} %, {} config frames/s {:.1} %)",
        load * 100.0,
        (m2s.0 as f64 / secs).round(),
        m2s.1 / secs * 100.0,
        (s2m.0 as f64 / secs).round(),
        s2m.1 / secs * 100.0,
        (cfg.0 as f64 / secs).round(),
        cfg.1 / secs * 100.0
    );
    println!("batches refused busy (the bus full): {busy} of {ticks}; node master_lost {lost}");
    println!(
        "m2s frame: {m2s_bytes:?} bytes, {:.1} us on the wire; one frame per publish: 8 x 1 kHz offers {:.1} % of the bus; max m2s queueing {max_queue:.2} ms",
        per_frame * 1e6,
        offered * 100.0
    );
    println!(
        "load with feedback at 1 kHz (s2m wire time x 5, computed): {:.1} %",
        fb_1khz * 100.0
    );
    println!(
        "command-to-feedback latency (n={}): min {:.2} ms, median {:.2} ms, mean {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        lat[0],
        p(0.5),
        mean,
        p(0.99),
        lat[lat.len() - 1]
    );
    println!();
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    link(Mtu::Fd).await;
    link(Mtu::Classic).await;
}
