//! `fcan serve`: the bus owner. One long-running master per bus, each served over Zenoh
//! by `fcan_remote::Server` (key space: `docs/remote.md`), until Ctrl-C; with
//! `--foxglove ADDR`, its one bus also as a Foxglove WebSocket (`docs/foxglove.md`);
//! with `--ros2`, every bus's running nodes as ROS 2 topics over DDS (`docs/ros2.md`).
//!
//! `serve` has its own argument parser ([`ServeCli`]) because it takes `--bus` several
//! times, where every other command takes one: the binary hands it the command line
//! when the subcommand is `serve` ([`serve_argv`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use fcan_master::transport::sim::SimBus;
use fcan_remote::server::{Server, ServerOptions};
use fcan_remote::session::SessionConfig;
use tracing::Instrument;

use crate::CliError;

const SERVE_HELP: &str = "\
Examples:
  fcan serve                                   # socketcan:can0, served as bus `can0`
  fcan serve --bus socketcan:can0 --bus socketcan:can1
  fcan serve --bus arm=socketcan:can0 --listen tcp/0.0.0.0:7447
  fcan serve --bus can0=socketcan:can0 --zenoh-config zenoh-tls.json5
  fcan serve --bus socketcan:can0 --foxglove 127.0.0.1:8765   # and for Foxglove/Lichtblick
  fcan serve --bus socketcan:can0 --ros2                       # and as ROS 2 topics (DDS)
  fcan serve --bus socketcan:can0 --ros2 --joints robot.yaml   # and joint states for ros2_control
  fcan serve --bus socketcan:can0 --device robstride:id=1,model=RS03 --device mit:id=3
  fcan serve --bus socketcan:can0 --bus-file robot.yaml        # devices: [{driver: …}]

Off-the-shelf devices on the bus (--device, --bus-file; docs/drivers.md) are driven by
the daemon and served as fcan nodes (`/robstride1/motor/feedback`, `fcan nodes` says
`driver: robstride`), beside the fcan boards, to every program and face.

Then, from any program on this machine (or another, with --listen): the key space
fcan/<bus>/… (docs/remote.md), e.g. the status:  z_get -s 'fcan/*/status'.

Safe by default: the daemon listens on tcp/127.0.0.1:7447 only, with no multicast or
gossip scouting. If that port is taken (a Zenoh router, e.g. rmw_zenoh's, or another
daemon of fcan), it joins whoever holds it instead; if a bus of the same name is served
there already, it serves on a free port of its own and prints the `fcan --connect …`
line to use. --listen opens other endpoints (think
before exposing motors to a network); --zenoh-config starts from a Zenoh JSON5 file
(TLS, access control). Ctrl-C stops the daemon: its nodes are told the master leaves
(they stop at once, counting no lost master), keep their parameters, and a new daemon
takes them over.";

/// `fcan serve`: own the buses and serve them over Zenoh.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "fcan serve",
    version,
    about = "The bus owner: one long-running master per bus, served over Zenoh to any program (docs/remote.md).",
    after_help = SERVE_HELP
)]
pub struct ServeCli {
    /// A bus to own: `[NAME=]SPEC`. Repeat for several. NAME (`[A-Za-z0-9_-]+`) is the
    /// bus's name in the key space, by default the interface (`socketcan:can0` → `can0`,
    /// `sim` → `sim`, an empty simulated bus). A simulated bus takes faults at its
    /// endpoints: `sim:drop=1%,corrupt=0.1%,duplicate=0.5%,delay=1%,delay_by=2ms,
    /// bus_off=100ms/60s,seed=N` (probabilities with `%`; docs/cli.md "Bus specs").
    #[arg(
        long = "bus",
        value_name = "[NAME=]SPEC",
        default_value = "socketcan:can0"
    )]
    pub buses: Vec<String>,
    /// An off-the-shelf device on the bus, driven by the daemon and served as an fcan
    /// node: `DRIVER:KEY=VALUE,…`, e.g. `robstride:id=1,model=RS03` or
    /// `mit:id=3,layout=damiao`. Repeat for several; with several buses, prefix the bus
    /// name (`arm/robstride:id=1`). Drivers and keys: docs/drivers.md.
    #[arg(long = "device", value_name = "[BUS/]DRIVER:KEYS")]
    pub devices: Vec<String>,
    /// A YAML bus file listing devices (`devices: [{driver: robstride, id: 1, model:
    /// RS03}, …]`), for many; with several buses, give `--bus-file BUS=FILE`.
    #[arg(long = "bus-file", value_name = "[BUS=]FILE")]
    pub bus_files: Vec<String>,
    /// Listen on this Zenoh endpoint (`tcp/HOST:PORT`) instead of tcp/127.0.0.1:7447.
    /// Repeatable.
    #[arg(long, value_name = "ENDPOINT")]
    pub listen: Vec<String>,
    /// Connect to this Zenoh endpoint (a router or another daemon). Repeatable.
    #[arg(long, value_name = "ENDPOINT")]
    pub connect: Vec<String>,
    /// Start from this Zenoh JSON5 configuration (TLS, access control).
    #[arg(long, value_name = "FILE")]
    pub zenoh_config: Option<PathBuf>,
    /// Where downloaded schema blobs are cached (default: $XDG_CACHE_HOME/fcan/blobs).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Do not use the on-disk schema cache.
    #[arg(long)]
    pub no_cache: bool,
    /// How samples leave for the network: `prompt` (what reaches the daemon together,
    /// a frame's samples, is written together at once: latency first), `batched` (Zenoh
    /// may hold a sample up to 1 ms: about half the CPU under heavy load) or `express`
    /// (each sample on its own: the most CPU). docs/performance.md compares them.
    #[arg(long, value_name = "prompt|batched|express", default_value = "prompt")]
    pub delivery: fcan_remote::Delivery,
    /// The faces besides the remote API (Foxglove, ROS 2, the joints): the same flags
    /// in every command that serves a bus.
    #[command(flatten)]
    pub faces: crate::faces::FaceArgs,
}

pub use crate::faces::{joints_config, ros2_domain};

/// If the command line's subcommand is `serve`, its arguments for [`ServeCli`]
/// (`fcan serve` first, then what followed `serve`); otherwise `None`.
///
/// ```
/// use std::ffi::OsString;
/// let argv: Vec<OsString> = ["fcan", "serve", "--bus", "sim"].iter().map(OsString::from).collect();
/// assert_eq!(fcan_cli::serve::serve_argv(&argv).unwrap().len(), 3);
/// let argv: Vec<OsString> = ["fcan", "--bus", "serve", "nodes"].iter().map(OsString::from).collect();
/// assert!(fcan_cli::serve::serve_argv(&argv).is_none());
/// ```
pub fn serve_argv(argv: &[OsString]) -> Option<Vec<OsString>> {
    own_argv(argv, "serve")
}

/// If the command line's subcommand is `name` (a command with a parser of its own:
/// `serve`, `fake`), `fcan NAME` then what followed it; otherwise `None`.
pub(crate) fn own_argv(argv: &[OsString], name: &str) -> Option<Vec<OsString>> {
    // Global options that take a value (their value is not the subcommand).
    const WITH_VALUE: [&str; 6] = [
        "--bus",
        "--cache-dir",
        "--discover-ms",
        "--connect",
        "--device",
        "--bus-file",
    ];
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i].to_str()?;
        if a == name {
            let mut out = vec![OsString::from(format!("fcan {name}"))];
            out.extend(argv[i + 1..].iter().cloned());
            return Some(out);
        }
        if !a.starts_with('-') {
            return None;
        }
        if WITH_VALUE.contains(&a) {
            i += 1;
        }
        i += 1;
    }
    None
}

/// Ctrl-C (SIGINT), listened for from the moment this is called (`tokio::signal::ctrl_c`
/// only listens from its first poll, so a signal between a "ready" line and that poll
/// would be lost).
pub(crate) fn interrupt() -> std::io::Result<impl std::future::Future<Output = std::io::Result<()>>>
{
    #[cfg(unix)]
    {
        let mut sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        Ok(async move {
            sig.recv().await;
            Ok(())
        })
    }
    #[cfg(not(unix))]
    {
        Ok(tokio::signal::ctrl_c())
    }
}

/// `[NAME=]SPEC` → (name, spec): the name given, else the interface or the spec's kind.
///
/// ```
/// use fcan_cli::serve::bus_name;
/// assert_eq!(bus_name("socketcan:can0").unwrap(), ("can0".into(), "socketcan:can0".into()));
/// assert_eq!(bus_name("arm=socketcan:can1").unwrap(), ("arm".into(), "socketcan:can1".into()));
/// assert_eq!(bus_name("sim").unwrap(), ("sim".into(), "sim".into()));
/// // A spec's own `=` (sim faults) names nothing: a NAME has no `:`.
/// assert_eq!(bus_name("sim:drop=1%").unwrap(), ("sim".into(), "sim:drop=1%".into()));
/// assert_eq!(bus_name("lossy=sim:drop=1%").unwrap(), ("lossy".into(), "sim:drop=1%".into()));
/// // python-can's bus is one bus whatever its options: named after the transport.
/// assert_eq!(
///     bus_name("udp-multicast:ipv4,port=43114").unwrap(),
///     ("udp-multicast".into(), "udp-multicast:ipv4,port=43114".into())
/// );
/// assert!(bus_name("socketcan:can.0").is_err());
/// ```
pub fn bus_name(arg: &str) -> Result<(String, String), CliError> {
    let (name, spec) = match split_name(arg) {
        (Some(n), s) => (n.to_string(), s.to_string()),
        (None, _) => {
            let n = match arg.split_once(':') {
                Some(("socketcan", iface)) => iface.to_string(),
                Some(("sim" | "udp-multicast", _)) | None => {
                    arg.split(':').next().unwrap_or(arg).to_string()
                }
                Some((_, rest)) => rest
                    .rsplit('/')
                    .next()
                    .unwrap_or(rest)
                    .split('.')
                    .next()
                    .unwrap_or(rest)
                    .to_string(),
            };
            (n, arg.to_string())
        }
    };
    if !fcan_remote::keys::is_bus_name(&name) {
        return Err(CliError::Usage(format!(
            "bus name `{name}` is not key-safe (letters, digits, `_`, `-`): name it, e.g. `--bus mybus={spec}`"
        )));
    }
    Ok((name, spec))
}

/// `[NAME=]SPEC` → (NAME, SPEC). The first `=` ends a NAME only when no `:` comes
/// before it: in `sim:drop=1%` it belongs to the spec.
pub(crate) fn split_name(arg: &str) -> (Option<&str>, &str) {
    match arg.split_once('=') {
        Some((n, s)) if !n.contains(':') => (Some(n), s),
        _ => (None, arg),
    }
}

/// The devices of `--device` and `--bus-file`, by bus name. An unprefixed device or
/// file belongs to the only bus; with several buses it must name one.
pub fn devices_by_bus(
    buses: &[(String, String)],
    devices: &[String],
    files: &[String],
) -> Result<std::collections::BTreeMap<String, Vec<fcan_drivers::spec::DeviceSpec>>, CliError> {
    use fcan_drivers::spec::{BusFile, DeviceSpec};
    let names: Vec<&str> = buses.iter().map(|(n, _)| n.as_str()).collect();
    let which = |given: Option<&str>, what: &str| -> Result<String, CliError> {
        match (given, names.as_slice()) {
            (Some(b), _) if names.contains(&b) => Ok(b.to_string()),
            (Some(b), _) => Err(CliError::Usage(format!(
                "{what}: no bus `{b}` (buses: {})",
                names.join(", ")
            ))),
            (None, [one]) => Ok(one.to_string()),
            (None, _) => Err(CliError::Usage(format!(
                "{what}: several buses ({}): name one, e.g. `{}/…`",
                names.join(", "),
                names.first().copied().unwrap_or("bus")
            ))),
        }
    };
    let mut out: std::collections::BTreeMap<String, Vec<DeviceSpec>> = Default::default();
    for d in devices {
        // `BUS/DRIVER:…`: a `/` before the first `:` names the bus.
        let (bus, text) = match d.split_once(':') {
            Some((head, _)) if head.contains('/') => {
                let (b, rest) = d.split_once('/').unwrap_or(("", d));
                (Some(b), rest)
            }
            _ => (None, d.as_str()),
        };
        let spec = DeviceSpec::parse(text).map_err(|e| CliError::Usage(e.to_string()))?;
        out.entry(which(bus, &format!("--device {d}"))?)
            .or_default()
            .push(spec);
    }
    for f in files {
        let (bus, path) = match f.split_once('=') {
            Some((b, p)) => (Some(b), p),
            None => (None, f.as_str()),
        };
        let file = BusFile::read(std::path::Path::new(path))
            .map_err(|e| CliError::Usage(e.to_string()))?;
        out.entry(which(bus, &format!("--bus-file {f}"))?)
            .or_default()
            .extend(file.devices);
    }
    // Each bus's devices configured once here, so a bad key fails before anything opens.
    for specs in out.values() {
        fcan_drivers::spec::devices(specs).map_err(|e| CliError::Usage(e.to_string()))?;
    }
    Ok(out)
}

/// A bus of this name is served already where this daemon joined (`joined`: the
/// endpoint it found taken, or `None` when it was told where to connect): what works
/// instead, for `command`. `fcan serve` may rename its bus; both may serve on a port of
/// their own, reached with `fcan --connect`.
fn already_served(bus: &str, joined: Option<&str>, command: &str) -> CliError {
    let bus = fcan_master::text::Untrusted(bus);
    let there = match joined {
        Some(ep) => format!(
            "the daemon on {ep} (the demo, `fcan serve` or another `fcan fake`) serves a bus `{bus}` already, and this one joined it"
        ),
        None => format!("a bus `{bus}` is already served through this Zenoh network"),
    };
    let port = free_local_port();
    let own = format!(
        "run this one on a port of its own, `{command} … --listen tcp/127.0.0.1:{port}`, and attach to it with `fcan --connect tcp/127.0.0.1:{port} …`"
    );
    let rename = if command == "fcan serve" {
        ", or give it another name (`--bus NAME=SPEC`: commands then take `--bus NAME`)"
    } else {
        ", or give it another name (`--bus NAME=sim`: commands then take `--bus NAME`)"
    };
    CliError::Usage(format!(
        "{there}: {own}{rename}; or stop the other (docs/fake.md, \"Beside a running daemon\")"
    ))
}

/// A local TCP port to suggest for `--listen`: the first free one from 7448 (next to
/// the default 7447), else one the kernel hands out.
fn free_local_port() -> u16 {
    (7448..7464)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .or_else(|| {
            let l = std::net::TcpListener::bind(("127.0.0.1", 0)).ok()?;
            Some(l.local_addr().ok()?.port())
        })
        .unwrap_or(7448)
}

/// Runs the daemon until Ctrl-C. `sim` is the simulated bus `sim` specs attach to; with
/// `None` (the binary), each `sim` bus is a simulated bus of its own, empty: a way to
/// try the daemon out.
pub async fn serve(cli: ServeCli, sim: Option<&SimBus>) -> Result<(), CliError> {
    serve_as(cli, sim, "fcan serve").await
}

/// [`serve`] for `command` (`fcan serve`, or `fcan fake`, which takes no bus name):
/// what a refusal suggests is what that command takes.
pub(crate) async fn serve_as(
    cli: ServeCli,
    sim: Option<&SimBus>,
    command: &str,
) -> Result<(), CliError> {
    // Listening for Ctrl-C starts before "ready" is printed: a SIGINT sent the moment
    // "ready" appears must stop the daemon, not be lost (as one CI run showed).
    let interrupted = interrupt()?;
    let mut buses: Vec<(String, String)> = Vec::new();
    for b in &cli.buses {
        let (name, spec) = bus_name(b)?;
        if buses.iter().any(|(n, _)| *n == name) {
            return Err(CliError::Usage(format!(
                "two buses named `{name}`: name them, e.g. `--bus a={spec}`"
            )));
        }
        // A simulated bus's options are checked before anything is served; faults
        // without a seed get one drawn now, shown in the `serving` line below.
        if spec == "sim" || spec.starts_with("sim:") {
            fcan_master::transport::spec::SimSpec::parse(&spec)
                .map_err(fcan_master::MasterError::from)?;
        }
        buses.push((name, fcan_master::transport::spec::pin_seed(&spec)));
    }
    let plan = cli.faces.check(&buses)?;
    let devices = devices_by_bus(&buses, &cli.devices, &cli.bus_files)?;
    let mut faces = Vec::new();
    let mut opened = SessionConfig::daemon()
        .listen(cli.listen.clone())
        .connect(cli.connect.clone())
        .zenoh_config(cli.zenoh_config.clone())
        .open()
        .await
        .map_err(|e| CliError::Usage(e.to_string()))?;
    // The default port was taken, so this daemon joined its holder: if a bus of the same
    // name is served there (the demo's `sim`, another fake's), it serves on a free port
    // of its own instead, and says how to attach. Endpoints the user chose are kept (a
    // clash there is refused below, naming a free port).
    let mut moved = None;
    if let Some(ep) = opened.joined.clone() {
        let served = fcan_remote::client::buses(&opened.session, std::time::Duration::from_secs(2))
            .await
            .unwrap_or_default();
        if let Some((name, _)) = buses.iter().find(|(n, _)| served.contains(n)) {
            let own = format!("tcp/127.0.0.1:{}", free_local_port());
            eprintln!(
                "fcan serve: {ep} is taken by a daemon that serves a bus `{}` too: serving on {own} instead",
                fcan_master::text::Untrusted(name)
            );
            let _ = opened.session.close().await;
            opened = SessionConfig::daemon()
                .listen(vec![own.clone()])
                .open()
                .await
                .map_err(|e| CliError::Usage(e.to_string()))?;
            moved = Some(own);
        }
    }
    if let Some(ep) = &opened.joined {
        eprintln!("fcan serve: {ep} is taken (a Zenoh router or another fcan daemon): joined it");
    }
    for ep in &opened.listening {
        eprintln!("fcan serve: listening on {ep}");
    }
    for ep in opened
        .connected
        .iter()
        .filter(|e| Some(*e) != opened.joined.as_ref())
    {
        eprintln!("fcan serve: connecting to {ep}");
    }
    if let Some(f) = &cli.zenoh_config {
        eprintln!("fcan serve: Zenoh configuration from {}", f.display());
    }
    let clock = Instant::now();
    let mut servers = Vec::new();
    let mut masters = Vec::new();
    for (name, spec) in &buses {
        let own_sim;
        let sim = match sim {
            Some(s) => Some(s),
            None => {
                own_sim = SimBus::new(Default::default());
                Some(&own_sim)
            }
        };
        let on_bus = devices.get(name).map(Vec::as_slice).unwrap_or_default();
        let master =
            crate::start_master(spec, sim, cli.no_cache, cli.cache_dir.as_deref(), on_bus).await?;
        for d in on_bus {
            eprintln!("fcan serve [{name}]: device {d}");
        }
        masters.push(master.clone());
        let mut opts = ServerOptions::default();
        opts.clock = clock;
        opts.delivery = cli.delivery;
        // Every face of this bus starts in its span: their diagnostics name the bus.
        let span = crate::diagnostics::bus_span(name);
        let server = Server::start(master.clone(), &opened.session, name, opts)
            .instrument(span.clone())
            .await
            .map_err(|e| match e {
                fcan_remote::RemoteError::AlreadyServed(bus) => {
                    already_served(&bus, opened.joined.as_deref(), command)
                }
                e => CliError::Usage(e.to_string()),
            })?;
        eprintln!("fcan serve [{name}]: serving {spec} as fcan/{name}/…");
        if let Some(own) = &moved {
            eprintln!(
                "{command}: serving bus {name} on {own} — attach with `fcan --connect {own} …`"
            );
        }
        let started = crate::faces::start(
            &cli.faces,
            &plan,
            name,
            &master,
            Some(&opened.session),
            command,
        )
        .instrument(span.clone())
        .await?;
        for line in started.lines() {
            eprintln!("{line}");
        }
        faces.push(started);
        servers.push(server);
    }
    eprintln!("fcan serve: ready; Ctrl-C stops");
    interrupted.await?;
    eprintln!("fcan serve: stopping");
    // The faces first: an active joints loop sends its safe stop while the bus is still
    // owned, and puts its last status (`stopped`) before the session closes.
    for f in faces {
        f.stop().await;
    }
    drop(servers);
    // Then each bus's master leaves on purpose: its nodes stop at once and count no lost
    // master; a new daemon takes them over.
    for m in masters {
        let _ = m.leave().await;
    }
    let _ = opened.session.close().await;
    Ok(())
}
