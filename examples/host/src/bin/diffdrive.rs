//! A differential-drive controller at 500 Hz on the cycle API (`fcan_cycle`,
//! docs/control.md), driving two example motor drivers on the simulated bus.
//!
//! The scenario, printed as it happens:
//! 1. **activation**: both nodes running, `clear_fault` called on each and its answer
//!    checked, every wheel state fresh;
//! 2. **driving**: a twist (forward, then a turn) turned into wheel velocities every
//!    2 ms, odometry from the wheel positions every half second;
//! 3. **a node pulled** mid-run (motor_driver2's task stops, as if its cable came
//!    loose): the loop faults when the right wheel's feedback is older than 50 ms, the
//!    bounded safe stop sends zero velocity (5 times, then silence), the fault stays
//!    latched;
//! 4. **recovery**: the board comes back (a new boot), the master re-provisions it and
//!    restores its gains, the application clears the fault and activates again, and
//!    drives on.
//!
//! The loop runs on its own OS thread, as a real controller would: `read` and `write`
//! never wait on I/O (the master runs on the tokio runtime beside it). The configuration
//! is `examples/host/config/diffdrive.yaml`, built into the binary (`--config` reads
//! another).
//!
//! ```sh
//! cargo run --release -p fcan-examples --bin diffdrive
//! ```
//!
//! `--right robstride` makes the right wheel a RobStride RS02 (simulated, CAN id 2)
//! driven by fcan's robstride driver on the same bus (`config/diffdrive-robstride.yaml`,
//! docs/drivers.md): the loop cannot tell, but for its units (rad, rad/s).

use std::f64::consts::PI;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use fcan_core::frame::Mtu;
use fcan_cycle::{Cycle, CycleConfig, CycleError};
use fcan_drivers::robstride::model::Model;
use fcan_drivers::robstride::sim::SimMotor;
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::{devices, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_examples::{motor_driver, run_node_shared};
use fcan_master::transport::sim::{SimBus, SimConfig};
use fcan_master::value::Value;
use fcan_master::{Master, MasterApi, MasterOptions};

/// The configuration this example ships with.
const DEFAULT_CONFIG: &str = include_str!("../../config/diffdrive.yaml");
/// The same with the right wheel a RobStride.
const ROBSTRIDE_CONFIG: &str = include_str!("../../config/diffdrive-robstride.yaml");

/// Wheel radius (m) and track width (m) of the imaginary base.
const WHEEL_RADIUS: f64 = 0.05;
const TRACK: f64 = 0.30;

/// fcan diff-drive: a 500 Hz control loop on the cycle API, with a node pulled mid-run.
#[derive(Parser)]
#[command(
    version,
    after_help = "Example: cargo run --release -p fcan-examples --bin diffdrive -- --drive 2"
)]
struct Args {
    /// The cycle configuration (YAML; default: the built-in config/diffdrive.yaml).
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Run the bus as Classical CAN instead of CAN FD.
    #[arg(long)]
    classic: bool,
    /// Seconds of driving before the node is pulled (and after recovery).
    #[arg(long, default_value_t = 3.0)]
    drive: f64,
    /// Do not pull a node: drive, then stop and deactivate.
    #[arg(long)]
    no_pull: bool,
    /// What drives the right wheel: `board` (an fcan motor driver) or `robstride` (a
    /// RobStride RS02 through fcan's device driver).
    #[arg(long, value_name = "board|robstride", default_value = "board")]
    right: Right,
}

/// The right wheel's motor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Right {
    /// motor_driver2, an fcan board (rev, rev/s).
    Board,
    /// A RobStride RS02 with CAN id 2, node `robstride2` (rad, rad/s).
    Robstride,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The device link's notes (the RobStride answering) on stderr, `diffdrive devices: …`.
    fcan_cli::diagnostics::init("diffdrive");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match run(&args, &runtime) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("diffdrive: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load_config(args: &Args) -> Result<CycleConfig, String> {
    let (text, name) = match &args.config {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?,
            path.display().to_string(),
        ),
        None if args.right == Right::Robstride => (
            ROBSTRIDE_CONFIG.to_string(),
            "config/diffdrive-robstride.yaml".into(),
        ),
        None => (DEFAULT_CONFIG.to_string(), "config/diffdrive.yaml".into()),
    };
    let config: CycleConfig = serde_yaml_ng::from_str(&text).map_err(|e| format!("{name}: {e}"))?;
    config.check().map_err(|e| format!("{name}: {e}"))?;
    Ok(config)
}

fn run(args: &Args, rt: &tokio::runtime::Runtime) -> Result<(), Box<dyn std::error::Error>> {
    let config = load_config(args)?;
    let mtu = if args.classic { Mtu::Classic } else { Mtu::Fd };
    let fd = mtu == Mtu::Fd;
    let _enter = rt.enter();
    let bus = SimBus::new(SimConfig::default());
    let _md1 = run_node_shared(bus.endpoint(mtu), motor_driver(1, 1, fd));
    let right = RightWheel::start(args.right, &bus, mtu);
    let master = match args.right {
        Right::Board => rt.block_on(Master::start(bus.endpoint(mtu), MasterOptions::default()))?,
        Right::Robstride => {
            let spec = DeviceSpec::parse("robstride:id=2,model=RS02")?;
            let host = DeviceHost::new(mtu, devices(&[spec])?)?;
            let link = DeviceLink::new(bus.endpoint(mtu), host);
            rt.block_on(Master::start(link, MasterOptions::default()))?
        }
    };
    rt.block_on(master.wait_for_nodes(2, Duration::from_secs(5)))?;
    println!(
        "nodes running: motor_driver1, {} ({mtu:?} bus)",
        right.node()
    );
    // Gains for the velocity loops; the master restores them after any reboot.
    let boards: &[&str] = match args.right {
        Right::Board => &["motor_driver1", "motor_driver2"],
        Right::Robstride => &["motor_driver1"],
    };
    rt.block_on(async {
        for node in boards {
            for (p, v) in [("kp", 0.05), ("ki", 1.0)] {
                master
                    .param_set(&format!("{node}.motor0.velocity.{p}"), Value::Float(v))
                    .await?;
            }
        }
        Ok::<_, fcan_master::MasterError>(())
    })?;

    let mut cycle = rt.block_on(Cycle::configure(
        master.clone(),
        config,
        Duration::from_secs(5),
    ))?;
    println!(
        "configured: states {:?}, commands {:?}, {} Hz",
        cycle.state_names(),
        cycle.command_names(),
        cycle.config().rate_hz
    );

    // The loop's own thread: everything below is what a controller does.
    let pull = !args.no_pull;
    let args_right = args.right;
    let drive = Duration::from_secs_f64(args.drive);
    let handle = rt.handle().clone();
    let master = master.clone();
    let old_boot = rt.block_on(boot_id(&master, 2))?;
    let scale = right.revs_per_unit();
    let control = std::thread::spawn(move || -> Result<(), CycleError> {
        let t0 = Instant::now();
        handle.block_on(cycle.activate(Duration::from_secs(2)))?;
        println!("active in {:?}", t0.elapsed());
        let mut base = Base::new(&cycle, scale);

        let pull_right = || right.pull();
        let end = drive_for(&mut cycle, &mut base, drive, pull.then_some(&pull_right));
        match end {
            Ok(()) => {}
            Err(CycleError::Faulted(fault)) => {
                println!("FAULT: {fault}");
                // The safe stop runs already; wait for it to end (bounded).
                handle.block_on(cycle.deactivate())?;
                println!(
                    "safe stop done: {} safe batches sent, then silence",
                    cycle.stats().safe_stop_sends
                );
                print_stats(&cycle);

                if args_right == Right::Robstride {
                    // A motor whose cable came loose is gone once the driver has heard
                    // nothing for LOST_US; one back sooner is caught when it no longer
                    // holds a parameter the master wrote (docs/drivers.md).
                    std::thread::sleep(
                        Duration::from_micros(fcan_drivers::robstride::LOST_US)
                            + Duration::from_millis(200),
                    );
                }
                println!("{} comes back (a new boot) ...", right.node());
                let _guard = handle.enter();
                let _back = RightWheel::start(args_right, &bus, mtu);
                let t1 = Instant::now();
                handle.block_on(rebooted(&master, 2, old_boot))?;
                println!(
                    "{} re-provisioned {:?} after its boot (listen window, announce, plan, parameters restored by the master)",
                    right.node(),
                    t1.elapsed()
                );
                let cleared = cycle.clear_fault();
                println!(
                    "fault cleared: {}",
                    cleared.map(|f| f.to_string()).unwrap_or_default()
                );
                handle.block_on(cycle.activate(Duration::from_secs(2)))?;
                println!("active again");
                // The new boot counts its wheel from zero: odometry restarts from here.
                base.last = None;
                drive_for(&mut cycle, &mut base, drive, None)?;
            }
            Err(e) => return Err(e),
        }
        // Stop, then deactivate (`deactivate` alone would leave the wheels on their last
        // command: it flushes the commands once and stops nothing).
        handle.block_on(cycle.safe_stop())?;
        println!("stopped and deactivated: wheels commanded to their safe values");
        print_stats(&cycle);
        Ok(())
    });
    control
        .join()
        .map_err(|_| "the control thread panicked")??;
    Ok(())
}

/// The right wheel's motor on the simulated bus: a board, or a simulated RobStride.
enum RightWheel {
    Board(fcan_examples::SharedNode<fcan_example_motor_driver::MotorDriver>),
    Robstride(tokio::task::JoinHandle<()>),
}

impl RightWheel {
    /// Boots it on `bus` (inside the runtime).
    fn start(right: Right, bus: &SimBus, mtu: Mtu) -> RightWheel {
        match right {
            Right::Board => RightWheel::Board(run_node_shared(
                bus.endpoint(mtu),
                motor_driver(2, 1, mtu == Mtu::Fd),
            )),
            Right::Robstride => {
                let motor: Box<dyn SimDevice> = Box::new(SimMotor::new(2, Model::Rs02));
                RightWheel::Robstride(tokio::spawn(fcan_drivers::sim::run(
                    bus.endpoint(mtu),
                    vec![motor],
                )))
            }
        }
    }

    fn node(&self) -> &'static str {
        match self {
            RightWheel::Board(_) => "motor_driver2",
            RightWheel::Robstride(_) => "robstride2",
        }
    }

    /// Revolutions per unit of its position (and velocity per unit of its velocity).
    fn revs_per_unit(&self) -> f64 {
        match self {
            RightWheel::Board(_) => 1.0,
            RightWheel::Robstride(_) => 1.0 / (2.0 * PI),
        }
    }

    /// Off the bus, as if its cable came loose.
    fn pull(&self) {
        println!("-- pulling {} off the bus --", self.node());
        match self {
            RightWheel::Board(node) => node.stop(),
            RightWheel::Robstride(task) => task.abort(),
        }
    }
}

/// Node `id`'s boot id as the master knows it.
async fn boot_id(master: &Master, id: u8) -> Result<u32, fcan_master::MasterError> {
    let nodes = master.nodes().await?;
    Ok(nodes
        .iter()
        .find(|n| n.id.get() == id)
        .map_or(0, |n| n.boot_id))
}

/// Waits until node `id` runs again under a boot id other than `old`: the master saw
/// the reboot and provisioned the new boot (before that, it may still list the old one
/// as running until its offline timeout).
async fn rebooted(master: &Master, id: u8, old: u32) -> Result<(), CycleError> {
    let t0 = tokio::time::Instant::now();
    loop {
        let nodes = master.nodes().await?;
        if nodes
            .iter()
            .any(|n| n.id.get() == id && n.boot_id != old && n.phase == fcan_master::Phase::Running)
        {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(5) {
            return Err(CycleError::Master(fcan_master::MasterError::Stopped));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The base's state: which index is which, and odometry.
struct Base {
    /// Revolutions per unit of the right wheel's states and commands (1 for a board's
    /// rev and rev/s, 1/2π for a RobStride's rad and rad/s).
    right_scale: f64,
    left_pos: usize,
    right_pos: usize,
    left_vel: usize,
    right_vel: usize,
    left_cmd: usize,
    right_cmd: usize,
    last: Option<(f64, f64)>,
    x: f64,
    y: f64,
    theta: f64,
}

impl Base {
    fn new<M: MasterApi>(cycle: &Cycle<M>, right_scale: f64) -> Base {
        let s = |n: &str| {
            cycle
                .state_index(n)
                .unwrap_or_else(|| panic!("no state {n} in the configuration"))
        };
        let c = |n: &str| {
            cycle
                .command_index(n)
                .unwrap_or_else(|| panic!("no command {n} in the configuration"))
        };
        Base {
            right_scale,
            left_pos: s("left_wheel/position"),
            right_pos: s("right_wheel/position"),
            left_vel: s("left_wheel/velocity"),
            right_vel: s("right_wheel/velocity"),
            left_cmd: c("left_wheel/velocity"),
            right_cmd: c("right_wheel/velocity"),
            last: None,
            x: 0.0,
            y: 0.0,
            theta: 0.0,
        }
    }

    /// Odometry from wheel positions (revolutions).
    fn odometry(&mut self, left: f64, right: f64) {
        if let Some((l0, r0)) = self.last {
            let dl = (left - l0) * 2.0 * PI * WHEEL_RADIUS;
            let dr = (right - r0) * 2.0 * PI * WHEEL_RADIUS;
            let d = (dl + dr) / 2.0;
            self.theta += (dr - dl) / TRACK;
            self.x += d * self.theta.cos();
            self.y += d * self.theta.sin();
        }
        self.last = Some((left, right));
    }
}

/// Wheel velocities (rev/s) for a twist: `v` m/s forward, `w` rad/s turning left.
fn wheels(v: f64, w: f64) -> (f64, f64) {
    let to_rev = |m_per_s: f64| m_per_s / (2.0 * PI * WHEEL_RADIUS);
    (to_rev(v - w * TRACK / 2.0), to_rev(v + w * TRACK / 2.0))
}

/// Drives for `time` at the cycle's period; with `pull`, pulls the right wheel's motor
/// off the bus half way.
fn drive_for<M: MasterApi>(
    cycle: &mut Cycle<M>,
    base: &mut Base,
    time: Duration,
    pull: Option<&dyn Fn()>,
) -> Result<(), CycleError> {
    let period = cycle.period();
    let start = Instant::now();
    let mut next = start;
    let mut commands = vec![0.0; cycle.command_names().len()];
    let mut pulled: Option<Instant> = None;
    let mut last_print = start;
    loop {
        let now = Instant::now();
        let t = now - start;
        if t >= time && pulled.is_none() {
            return Ok(());
        }
        if let (Some(pull), None) = (pull, pulled) {
            if t >= time / 2 {
                pull();
                pulled = Some(now);
            }
        }
        let states = match cycle.read() {
            Ok(s) => s,
            Err(e) => {
                if let Some(p) = pulled {
                    println!("fault detected {:?} after the pull", p.elapsed());
                }
                return Err(e);
            }
        };
        let k = base.right_scale;
        let (lp, rp) = (
            states.value(base.left_pos),
            k * states.value(base.right_pos),
        );
        let (lv, rv) = (
            states.value(base.left_vel),
            k * states.value(base.right_vel),
        );
        base.odometry(lp, rp);
        // Forward at 0.3 m/s, then a left turn at 1 rad/s.
        let (v, w) = if t.as_secs_f64() % 2.0 < 1.0 {
            (0.3, 0.0)
        } else {
            (0.2, 1.0)
        };
        let (l, r) = wheels(v, w);
        commands[base.left_cmd] = l;
        commands[base.right_cmd] = r / k;
        cycle.write(&commands)?;
        if now - last_print >= Duration::from_millis(500) {
            last_print = now;
            println!(
                "t={:4.1}s  wheels L {lv:+.2} R {rv:+.2} rev/s (cmd {l:+.2} {r:+.2})  odom x={:+.2} y={:+.2} θ={:+.2}",
                t.as_secs_f64(),
                base.x,
                base.y,
                base.theta
            );
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            // Late: skip the missed ticks rather than run a burst (counted as misses).
            next = now;
        }
    }
}

fn print_stats<M: MasterApi>(cycle: &Cycle<M>) {
    let s = cycle.stats();
    println!(
        "stats: {} cycles, period mean {:?} (nominal {:?}), jitter p50 {:?} p99 {:?} max {:?}, {} deadline misses; read mean {:?} max {:?}, write mean {:?} max {:?}; {} batches sent, {} merged",
        s.cycles,
        s.period.mean,
        s.nominal,
        s.jitter_p50,
        s.jitter_p99,
        s.jitter_max,
        s.deadline_misses,
        s.read_time.mean,
        s.read_time.max,
        s.write_time.mean,
        s.write_time.max,
        s.batches_sent,
        s.batches_coalesced
    );
}
