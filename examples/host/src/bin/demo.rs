//! The fcan demo: a master and three example nodes on an in-process simulated CAN FD bus
//! (or Classical CAN with `--classic`). No hardware, no root. `--bus 'sim:drop=1%'` puts
//! faults at every endpoint of that bus (docs/cli.md "Bus specs").
//!
//! It shows discovery and provisioning as they happen, then live data for a few seconds
//! while it commands the motors, then lets you type `fcan` commands against the running
//! system (`nodes`, `topic echo /motor_driver1/motor0/feedback -n 3`, `param set …`).
//!
//! All the while it serves the remote API (docs/remote.md) for its bus, named `sim`, on
//! `tcp/127.0.0.1:7447` (loopback only, no scouting): a second terminal can run
//! `fcan --bus sim topic echo …` or `python3 examples/python/fcan_example.py` against the
//! live demo. `--serve ENDPOINT` picks another endpoint, `--no-serve` serves nothing.
//!
//! `--foxglove 127.0.0.1:8765` also serves a Foxglove WebSocket (docs/foxglove.md):
//! open Lichtblick or Foxglove, connect to `ws://127.0.0.1:8765`, plot
//! `/motor_driver1/motor0/feedback.position`.
//!
//! `--ros2` also puts every node's topics in a ROS 2 graph over DDS (docs/ros2.md),
//! on this machine only: `ros2 topic echo /motor_driver1/motor0/feedback` in a ROS 2
//! shell (with the interface package `fcan-codegen ros-package` writes).
//!
//! ```sh
//! cargo run -p fcan-examples --bin demo
//! ```

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Parser;
use fcan_cli::{describe_event, execute, Cli, Command, Output, StreamArgs, TopicCmd};
use fcan_core::frame::Mtu;
use fcan_drivers::spec::{devices, DeviceSpec};
use fcan_drivers::{DeviceHost, DeviceLink};
use fcan_examples::{io_board, motor_driver, run_node};
use fcan_master::text::Untrusted;
use fcan_master::transport::sim::{SimBus, SimConfig};
use fcan_master::transport::spec::{pin_seed, SimSpec};
use fcan_master::value::Value;
use fcan_master::{Master, MasterOptions};
use fcan_remote::{Server, ServerOptions, SessionConfig};
use tokio::io::AsyncBufReadExt;

/// fcan demo: master + example nodes on a simulated bus.
#[derive(Parser)]
#[command(
    version,
    after_help = "Examples:
  cargo run -p fcan-examples --bin demo -- --seconds 3 --no-repl
  cargo run -p fcan-examples --bin demo -- --bus 'sim:drop=1%'   # 1 % of frames lost at each receiver"
)]
struct Args {
    /// Run the bus as Classical CAN (1 Mbit/s, 8-byte frames) instead of CAN FD (1/5 Mbit/s).
    #[arg(long)]
    classic: bool,
    /// The simulated bus every endpoint (each node's, each device's, the master's) opens:
    /// `sim`, `sim:classic`, or with faults at each of them, e.g.
    /// `sim:drop=1%,corrupt=0.1%,duplicate=0.5%,delay=1%,delay_by=2ms,bus_off=100ms/60s,seed=7`
    /// (probabilities with their `%`; docs/cli.md "Bus specs").
    #[arg(long, value_name = "SPEC", default_value = "sim")]
    bus: String,
    /// How long to show live data before the prompt.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Exit after the live data instead of offering the `fcan>` prompt.
    #[arg(long)]
    no_repl: bool,
    /// Serve the remote API (Zenoh, docs/remote.md) on this endpoint; the bus is `sim`.
    /// If the endpoint is taken (a Zenoh router, another daemon), the demo joins it.
    #[arg(long, value_name = "ENDPOINT", default_value = DEFAULT_ENDPOINT)]
    serve: String,
    /// Serve no remote API.
    #[arg(long)]
    no_serve: bool,
    /// The faces besides the remote API, as `fcan serve` takes them: `--foxglove ADDR`
    /// (a Foxglove WebSocket for Foxglove or Lichtblick: every topic a channel,
    /// parameters, services, publishing; docs/foxglove.md), `--ros2` (every node's
    /// topics in a ROS 2 graph over DDS, domain $ROS_DOMAIN_ID or 0, this machine only;
    /// docs/ros2.md), `--joints FILE` (with `--ros2`).
    #[command(flatten)]
    faces: fcan_cli::faces::FaceArgs,
    /// Also put a simulated off-the-shelf device on the bus and drive it as `fcan serve
    /// --device` does: `robstride:id=10,model=RS03`, `mit:id=0x20` (docs/drivers.md).
    /// It is a node like the boards (`/robstride10/motor/feedback`). Repeatable.
    #[arg(long = "device", value_name = "DRIVER:KEYS")]
    devices: Vec<String>,
}

/// Where the demo serves by default: loopback only, like `fcan serve`.
const DEFAULT_ENDPOINT: &str = "tcp/127.0.0.1:7447";

/// The demo's bus name in the remote API's keys (`fcan/sim/…`).
const BUS: &str = "sim";

// Zenoh's blocking paths (closing a session) need the multi-thread runtime.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // The faces' and the device link's diagnostics on stderr (stdout is the demo's own
    // output), `demo foxglove: …`, `demo ros2: …`, `demo devices: …`.
    fcan_cli::diagnostics::init("demo");
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo: {}", Untrusted(&e.to_string()));
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    // Faults without a seed get one drawn now, and printed, so a run can be repeated.
    let spec_text = pin_seed(&args.bus);
    let mut spec = SimSpec::parse(&spec_text).map_err(|e| {
        format!("--bus: {e} (the demo's nodes run in this process: its bus is simulated)")
    })?;
    if args.classic {
        spec.mtu = Mtu::Classic;
    }
    let mtu = spec.mtu;
    let fd = mtu == Mtu::Fd;
    let bus = SimBus::new(SimConfig::default());
    println!(
        "fcan demo — simulated {} bus at {} kbit/s{}",
        if fd { "CAN FD" } else { "Classical CAN" },
        bus.rates().nominal / 1000,
        if fd {
            format!(" / {} kbit/s data", bus.rates().data / 1000)
        } else {
            String::new()
        }
    );
    if spec.has_faults() {
        println!("faults at every endpoint (each node's and the master's): {spec_text}");
    }
    println!("nodes: motor_driver1 (8 motors), motor_driver2 (4 motors), io_board3\n");
    // Each node is the firmware crate's no_std code, run by a host task.
    let _motors1 = run_node(spec.open(&bus), motor_driver(1, 8, fd));
    let _motors2 = run_node(spec.open(&bus), motor_driver(2, 4, fd));
    let _io = run_node(spec.open(&bus), io_board(3, fd));

    let mut specs = Vec::new();
    let mut sims = Vec::new();
    for d in &args.devices {
        let spec = DeviceSpec::parse(d)?;
        let sim = spec.simulated()?;
        println!(
            "device: simulated {} (driven by the master)",
            sim.describe()
        );
        sims.push(sim);
        specs.push(spec);
    }
    let _devices =
        (!sims.is_empty()).then(|| tokio::spawn(fcan_drivers::sim::run(spec.open(&bus), sims)));
    let master = if specs.is_empty() {
        Master::start(spec.open(&bus), MasterOptions::default()).await?
    } else {
        let host = DeviceHost::new(mtu, devices(&specs)?)?;
        let link = DeviceLink::new(spec.open(&bus), host);
        Master::start(link, MasterOptions::default()).await?
    };
    let mut events = master.events();
    // Discovery and provisioning, as it happens.
    let started = tokio::time::Instant::now();
    let mut online = 0;
    let expected = 3 + specs.len();
    while online < expected && started.elapsed() < Duration::from_secs(10) {
        match tokio::time::timeout(Duration::from_millis(200), events.recv()).await {
            Ok(Ok(e)) => {
                if matches!(e, fcan_master::MasterEvent::Online { .. }) {
                    online += 1;
                }
                if let Some(line) = describe_event(&e) {
                    println!("[{:7.1} ms] {line}", started.elapsed().as_secs_f64() * 1e3);
                }
            }
            _ => continue,
        }
    }
    println!();
    let mut out = std::io::stdout();
    execute(&master, &Command::Nodes, Output::default(), &mut out).await?;
    println!();
    // Served from here on, through the live data and the prompt, until the demo exits.
    let _served = if args.no_serve {
        None
    } else {
        serve(&master, &args.serve).await?
    };

    // The other faces, started as `fcan serve` starts them (fcan_cli::faces).
    let plan = args.faces.check(&[(BUS.to_string(), spec_text.clone())])?;
    let faces = fcan_cli::faces::start(
        &args.faces,
        &plan,
        BUS,
        &master,
        _served.as_ref().map(|s| &s._session.session),
        "fcan demo",
    )
    .await?;
    for line in faces.lines() {
        println!("{line}");
    }
    if faces.foxglove().is_some() {
        println!("  plot /motor_driver1/motor0/feedback.position (docs/foxglove.md)");
    }
    if !faces.lines().is_empty() {
        println!();
    }

    live(&master, &bus, args.seconds).await?;
    if args.no_repl {
        faces.stop().await;
        return Ok(());
    }
    let r = repl(&master).await;
    faces.stop().await;
    r
}
/// Serves the remote API for the demo's bus on `endpoint`, and says how to use it.
/// `None` if the bus name is already served where the demo joined.
async fn serve(
    master: &Master,
    endpoint: &str,
) -> Result<Option<Served>, Box<dyn std::error::Error>> {
    // The daemon's defaults (loopback, no scouting), on this endpoint: if it is taken
    // (a Zenoh router, another demo or daemon), join whoever holds it.
    let mut config = SessionConfig::daemon();
    if endpoint != DEFAULT_ENDPOINT {
        config = if port_taken(endpoint) {
            config.connect([endpoint.to_string()])
        } else {
            config.listen([endpoint.to_string()])
        };
    }
    let opened = config.open().await?;
    // Joined someone else's port with a bus `sim` there (another demo): the server
    // refuses to serve the name twice.
    let server = match Server::start(
        master.clone(),
        &opened.session,
        BUS,
        ServerOptions::default(),
    )
    .await
    {
        Err(fcan_remote::RemoteError::AlreadyServed(_)) => {
            println!(
                "remote API: not served: a bus `{BUS}` is already served through {} (another demo?); --serve ENDPOINT for a port of its own\n",
                opened.connected.join(", ")
            );
            return Ok(None);
        }
        r => r?,
    };
    match &opened.joined {
        Some(ep) => println!(
            "remote API: {ep} is taken (a Zenoh router or another fcan daemon): joined it; bus `{BUS}` served through it (docs/remote.md). In another terminal:"
        ),
        None => println!(
            "remote API: bus `{BUS}` served on {endpoint}, loopback only (docs/remote.md). In another terminal:"
        ),
    }
    let connect = if endpoint == DEFAULT_ENDPOINT {
        String::new()
    } else {
        format!(" --connect {endpoint}")
    };
    println!("  fcan{connect} --bus {BUS} topic echo /motor_driver1/motor0/feedback -n 3");
    println!("  python3 examples/python/fcan_example.py{connect}\n");
    Ok(Some(Served {
        _server: server,
        _session: opened,
    }))
}

/// Whether a listener on `tcp/HOST:PORT` would fail now because someone holds it.
fn port_taken(endpoint: &str) -> bool {
    endpoint
        .strip_prefix("tcp/")
        .is_some_and(|addr| std::net::TcpListener::bind(addr).is_err())
}

/// What serving holds: dropped when the demo exits.
struct Served {
    _server: Server,
    _session: fcan_remote::session::Opened,
}

/// Commands the motors and prints what comes back.
async fn live(
    master: &Master,
    bus: &SimBus,
    seconds: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    // Gains for a crisp response, set through the master like a user would.
    for (name, v) in [
        ("motor_driver1.motor0.velocity.kp", "0.05"),
        ("motor_driver1.motor0.velocity.ki", "1.0"),
        ("motor_driver1.motor0.position.kp", "8.0"),
        ("motor_driver1.motor1.velocity.kp", "0.05"),
        ("motor_driver1.motor1.velocity.ki", "1.0"),
    ] {
        master.param_set(name, fcan_cli::parse_value(v)?).await?;
    }
    let mut fb0 = master.subscribe("/motor_driver1/motor0/feedback").await?;
    let mut fb1 = master.subscribe("/motor_driver1/motor1/feedback").await?;
    let mut samples = master.subscribe("/io_board3/analog/samples").await?;
    let mut edges = master.subscribe("/io_board3/in0/edge").await?;
    println!(
        "live: motor0 follows a position sine, motor1 a velocity step; analog and inputs stream\n"
    );
    println!(
        "{:>6}  {:>9} {:>9}  {:>9}  {:>7}  {:>5}  {:>8}",
        "t [s]", "m0 target", "m0 pos", "m1 vel", "ana ch0", "in0", "bus load"
    );
    let start = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut last_print = start;
    let (mut pos, mut vel, mut ana, mut in0) = (0.0, 0.0, 0i64, false);
    while start.elapsed().as_secs_f64() < seconds {
        tick.tick().await;
        let t = start.elapsed().as_secs_f64();
        let target = 2.0 * (t * 1.5).sin();
        let v1 = if t < seconds / 2.0 { 10.0 } else { -5.0 };
        // One batch: the two targets share a frame, which then goes out once.
        master
            .publish_many(vec![
                (
                    "/motor_driver1/motor0/target".into(),
                    fcan_cli::parse_value(&format!("{{type: 2, value: {target}}}"))?,
                ),
                (
                    "/motor_driver1/motor1/target".into(),
                    fcan_cli::parse_value(&format!("{{type: 1, value: {v1}}}"))?,
                ),
            ])
            .await?;
        while let Ok(s) = fb0.try_recv() {
            pos = field_f64(&s.value, "position");
        }
        while let Ok(s) = fb1.try_recv() {
            vel = field_f64(&s.value, "velocity");
        }
        while let Ok(s) = samples.try_recv() {
            if let Some(Value::Array(raw)) = s.value.field("raw") {
                ana = raw.first().and_then(Value::as_f64).unwrap_or(0.0) as i64;
            }
        }
        while let Ok(s) = edges.try_recv() {
            in0 = s.value.field("level") == Some(&Value::Bool(true));
        }
        if last_print.elapsed() >= Duration::from_millis(250) {
            last_print = tokio::time::Instant::now();
            let now = bus.now();
            let load = bus.load(now.saturating_sub(Duration::from_millis(250))..now);
            println!(
                "{t:6.2}  {target:9.3} {pos:9.3}  {vel:9.3}  {ana:7}  {:>5}  {:7.1}%",
                if in0 { "high" } else { "low" },
                load * 100.0
            );
        }
    }
    println!();
    Ok(())
}

fn field_f64(v: &Value, name: &str) -> f64 {
    v.field(name).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// `fcan>` prompt: every `fcan` subcommand, run by the CLI library against this master.
async fn repl(master: &Master) -> Result<(), Box<dyn std::error::Error>> {
    println!("Try the fcan CLI against the running nodes (streams stop after 5 s unless -n/-t is given):");
    println!("  nodes | topic list | topic echo /motor_driver1/motor0/feedback -n 3");
    println!("  service call /io_board3/out0/set '{{on: true}}' | param get motor_driver1.motor0.velocity.kp");
    println!("  param set motor_driver1.motor0.velocity.kp 200   (out of range: refused)   | monitor -n 3");
    println!("  quit\n");
    let tty = std::io::stdin().is_terminal();
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        if tty {
            print!("fcan> ");
            std::io::stdout().flush()?;
        }
        let Some(line) = lines.next_line().await? else {
            return Ok(());
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if matches!(line, "quit" | "exit" | "q") {
            return Ok(());
        }
        if !tty {
            println!("fcan> {line}");
        }
        let Some(words) = shlex::split(line) else {
            println!("unbalanced quotes");
            continue;
        };
        let words: Vec<String> = std::iter::once("fcan".to_string())
            .chain(words.into_iter().skip_while(|w| w == "fcan"))
            .collect();
        let cli = match Cli::try_parse_from(&words) {
            Ok(c) => c,
            Err(e) => {
                let _ = e.print();
                continue;
            }
        };
        let cmd = with_default_limits(cli.command);
        let mut out = std::io::stdout();
        if let Err(e) = execute(master, &cmd, Output { json: cli.json }, &mut out).await {
            // Errors quote names and reasons that came from nodes.
            println!("error: {}", Untrusted(&e.to_string()));
        }
    }
}

/// Streams without a limit would never return to the prompt: give them 5 seconds.
fn with_default_limits(cmd: Command) -> Command {
    match cmd {
        Command::Topic(TopicCmd::Echo { name, stream })
            if stream.count.is_none() && stream.timeout.is_none() =>
        {
            Command::Topic(TopicCmd::Echo {
                name,
                stream: StreamArgs {
                    count: None,
                    timeout: Some(5.0),
                },
            })
        }
        Command::Monitor(mut m) if m.count.is_none() => {
            m.count = Some(5);
            Command::Monitor(m)
        }
        other => other,
    }
}
