//! The cycle API's cost and timing in real time (docs/performance.md, "Control loop"):
//! a 1 kHz loop on its own thread over 16 joints (two example motor drivers with 8
//! motors each, on the simulated CAN FD bus): 32 states (position, velocity), 16
//! velocity commands. Prints the cycle statistics, and the cost of waking a parked
//! tokio task from the loop's thread (what `write` pays to hand its batch over).
//!
//! ```sh
//! cargo run --release -p fcan-examples --bin cycle-bench -- --seconds 10
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use fcan_core::frame::Mtu;
use fcan_examples::{motor_driver, run_node_shared};
use fcan_master::cycle::{Cycle, CycleConfig};
use fcan_master::transport::sim::{SimBus, SimConfig};
use fcan_master::{Master, MasterOptions};

/// fcan cycle-bench: a 1 kHz, 16-joint loop on the cycle API, measured.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// How long the loop runs.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Loop rate.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let _enter = rt.enter();
    let bus = SimBus::new(SimConfig::default());
    let _md1 = run_node_shared(bus.endpoint(Mtu::Fd), motor_driver(1, 8, true));
    let _md2 = run_node_shared(bus.endpoint(Mtu::Fd), motor_driver(2, 8, true));
    let master = rt
        .block_on(Master::start(
            bus.endpoint(Mtu::Fd),
            MasterOptions::default(),
        ))
        .expect("master");
    rt.block_on(master.wait_for_nodes(2, Duration::from_secs(5)))
        .expect("nodes");
    let mut config = CycleConfig::new(args.rate);
    for node in ["motor_driver1", "motor_driver2"] {
        for m in 0..8 {
            let (j, t) = (format!("{node}_m{m}"), format!("/{node}/motor{m}"));
            config = config
                .state(&format!("{j}/position"), &format!("{t}/feedback.position"))
                .state(&format!("{j}/velocity"), &format!("{t}/feedback.velocity"))
                .command(
                    &format!("{j}/velocity"),
                    &format!("{t}/target{{type: 1}}.value"),
                    0.0,
                );
        }
    }
    let mut cycle = rt
        .block_on(Cycle::configure(
            master.clone(),
            config,
            Duration::from_secs(5),
        ))
        .expect("configure");
    rt.block_on(cycle.activate(Duration::from_secs(2)))
        .expect("activate");
    let seconds = args.seconds;
    let handle = rt.handle().clone();
    let loop_thread = std::thread::spawn(move || {
        let period = cycle.period();
        let mut commands = vec![0.0; cycle.command_names().len()];
        let mut cost: Vec<Duration> = Vec::with_capacity((seconds * args.rate) as usize + 1);
        let start = Instant::now();
        let mut next = start;
        while start.elapsed().as_secs_f64() < seconds {
            let t0 = Instant::now();
            let v = cycle.read().expect("read").value(1);
            for (i, c) in commands.iter_mut().enumerate() {
                *c = 0.5 + 0.1 * (i as f64) + 0.0 * v;
            }
            cycle.write(&commands).expect("write");
            cost.push(t0.elapsed());
            next += period;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
        }
        handle.block_on(cycle.deactivate()).expect("deactivate");
        (cycle.stats(), cost)
    });
    let (s, mut cost) = loop_thread.join().expect("loop thread");
    cost.sort();
    let pct = |q: f64| cost[((cost.len() - 1) as f64 * q) as usize];

    // The hand-over alone: waking a parked tokio task from this thread.
    let notify = Arc::new(tokio::sync::Notify::new());
    let waiter = {
        let n = notify.clone();
        rt.spawn(async move {
            loop {
                n.notified().await;
            }
        })
    };
    std::thread::sleep(Duration::from_millis(10));
    let mut wake: Vec<Duration> = (0..2000)
        .map(|_| {
            std::thread::sleep(Duration::from_micros(500));
            let t0 = Instant::now();
            notify.notify_one();
            t0.elapsed()
        })
        .collect();
    waiter.abort();
    wake.sort();

    println!(
        "cycle-bench: {} Hz, 16 joints (32 states, 16 commands), {seconds} s, CAN FD sim bus",
        args.rate
    );
    println!(
        "  read+write per cycle: p50 {:?}  p99 {:?}  max {:?}",
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    println!(
        "  read: mean {:?} max {:?};  write: mean {:?} max {:?}",
        s.read_time.mean, s.read_time.max, s.write_time.mean, s.write_time.max
    );
    println!(
        "  waking a parked tokio task (Notify::notify_one) from the loop thread: p50 {:?} p99 {:?}",
        wake[wake.len() / 2],
        wake[wake.len() * 99 / 100]
    );
    println!(
        "  period mean {:?} (nominal {:?}); jitter p50 {:?} p99 {:?} max {:?}; {} deadline misses in {} cycles",
        s.period.mean, s.nominal, s.jitter_p50, s.jitter_p99, s.jitter_max, s.deadline_misses, s.cycles
    );
    println!(
        "  batches: {} written, {} sent, {} merged",
        s.batches_written, s.batches_sent, s.batches_coalesced
    );
}
