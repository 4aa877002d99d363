//! The cycle API's cost and timing in real time (docs/performance.md, "Control loop"):
//! a loop on its own thread over simulated motors, measured. By default 1 kHz over 16
//! joints (two example motor drivers with 8 motors each, on the simulated CAN FD bus):
//! 32 states (position, velocity), 16 velocity commands. `--motors robstride` drives
//! simulated RobStride motors instead, through fcan's device driver (Classical CAN, as
//! RobStride buses are; one MIT frame and one feedback frame per motor per cycle), for
//! the side-by-side figures of docs/performance.md ("RobStride"). Prints the cycle
//! statistics, the bus load, and the cost of waking a parked tokio task from the loop's
//! thread (what `write` pays to hand its batch over).
//!
//! ```sh
//! cargo run --release -p fcan-examples --bin cycle-bench -- --seconds 10
//! cargo run --release -p fcan-examples --bin cycle-bench -- --motors robstride --joints 8 --rate 300 --classic
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use fcan_core::frame::Mtu;
use fcan_cycle::{Cycle, CycleConfig};
use fcan_drivers::robstride::model::Model;
use fcan_drivers::robstride::sim::SimMotor;
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_examples::{motor_driver, run_node_shared};
use fcan_master::transport::sim::{SimBus, SimConfig};
use fcan_master::{Master, MasterOptions};

/// fcan cycle-bench: a control loop on the cycle API, measured.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// How long the loop runs.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Loop rate.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// The motors: `fcan` (example motor drivers, 8 motors each) or `robstride`
    /// (simulated RobStride RS03s, CAN ids 1…, driven by fcan's device driver).
    #[arg(long, value_name = "fcan|robstride", default_value = "fcan")]
    motors: Motors,
    /// How many joints (motors).
    #[arg(long, default_value_t = 16)]
    joints: u8,
    /// Classical CAN (1 Mbit/s) instead of CAN FD.
    #[arg(long)]
    classic: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Motors {
    Fcan,
    Robstride,
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let _enter = rt.enter();
    let mtu = if args.classic { Mtu::Classic } else { Mtu::Fd };
    let bus = SimBus::new(SimConfig::default());
    let mut config = CycleConfig::new(args.rate);
    let mut boards = Vec::new();
    let mut sims: Vec<Box<dyn SimDevice>> = Vec::new();
    let mut specs = Vec::new();
    match args.motors {
        Motors::Fcan => {
            let drivers = args.joints.div_ceil(8);
            for d in 0..drivers {
                let id = d + 1;
                let here = (args.joints - d * 8).min(8);
                boards.push(run_node_shared(
                    bus.endpoint(mtu),
                    motor_driver(id, here, mtu == Mtu::Fd),
                ));
                for m in 0..here {
                    let (j, t) = (
                        format!("md{id}_m{m}"),
                        format!("/motor_driver{id}/motor{m}"),
                    );
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
        }
        Motors::Robstride => {
            for id in 1..=args.joints {
                sims.push(Box::new(SimMotor::new(id, Model::Rs03)));
                specs.push(
                    DeviceSpec::parse(&format!("robstride:id={id},model=RS03")).expect("spec"),
                );
                let (j, t) = (format!("rs{id}"), format!("/robstride{id}/motor"));
                config = config
                    .state(&format!("{j}/position"), &format!("{t}/feedback.position"))
                    .state(&format!("{j}/velocity"), &format!("{t}/feedback.velocity"))
                    .command(
                        &format!("{j}/velocity"),
                        &format!(
                            "{t}/mit{{position: 0.0, kp: 0.0, kd: 2.0, torque: 0.0}}.velocity"
                        ),
                        0.0,
                    )
                    .enable(
                        &format!("{t}/enable"),
                        serde_json::json!({}),
                        Some(serde_json::json!({"success": true})),
                    );
            }
        }
    }
    let nodes = boards.len() + specs.len();
    let _sims =
        (!sims.is_empty()).then(|| rt.spawn(fcan_drivers::sim::run(bus.endpoint(mtu), sims)));
    let master = if specs.is_empty() {
        rt.block_on(Master::start(bus.endpoint(mtu), MasterOptions::default()))
    } else {
        let host = DeviceHost::new(mtu, devices(&specs).expect("devices")).expect("host");
        let link = DeviceLink::new(bus.endpoint(mtu), host);
        rt.block_on(Master::start(link, MasterOptions::default()))
    }
    .expect("master");
    rt.block_on(master.wait_for_nodes(nodes, Duration::from_secs(10)))
        .expect("nodes");
    let mut cycle = rt
        .block_on(Cycle::configure(
            master.clone(),
            config,
            Duration::from_secs(5),
        ))
        .expect("configure");
    rt.block_on(cycle.activate(Duration::from_secs(5)))
        .expect("activate");
    let bus_from = bus.now();
    let seconds = args.seconds;
    let handle = rt.handle().clone();
    let loop_thread = std::thread::spawn(move || {
        let period = cycle.period();
        let mut commands = vec![0.0; cycle.command_names().len()];
        let mut cost: Vec<Duration> = Vec::with_capacity((seconds * args.rate) as usize + 1);
        let start = Instant::now();
        let mut next = start;
        let mut fault = None;
        while start.elapsed().as_secs_f64() < seconds {
            let t0 = Instant::now();
            // A loop the bus cannot carry faults (stale states): reported, not hidden.
            let v = match cycle.read() {
                Ok(s) => s.value(1),
                Err(e) => {
                    fault = Some((start.elapsed(), e));
                    break;
                }
            };
            for (i, c) in commands.iter_mut().enumerate() {
                *c = 0.5 + 0.1 * (i as f64) + 0.0 * v;
            }
            if let Err(e) = cycle.write(&commands) {
                fault = Some((start.elapsed(), e));
                break;
            }
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
        (cycle.stats(), cost, fault)
    });
    let (s, mut cost, fault) = loop_thread.join().expect("loop thread");
    let bus_to = bus.now();
    let load = bus.load(bus_from..bus_to);
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
        "cycle-bench: {} Hz, {} joints ({} states, {} commands) on {}, {seconds} s, {} sim bus; bus load {:.1} %",
        args.rate,
        args.joints,
        2 * u32::from(args.joints),
        args.joints,
        match args.motors {
            Motors::Fcan => "fcan motor drivers",
            Motors::Robstride => "RobStride RS03s (fcan-drivers)",
        },
        if args.classic { "Classical CAN 1 Mbit/s" } else { "CAN FD" },
        load * 100.0
    );
    if let Some((at, e)) = &fault {
        println!("  FAULTED after {at:?}: {e} (the figures below are up to the fault)");
    }
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
