//! The `fcan` command line, as a library: [`run`] is the binary; [`execute`] runs one
//! command against a master that is already running (the demo uses it with its
//! simulated nodes attached). A command attaches to a bus-owner daemon (`fcan serve`)
//! when one serves the bus ([`attach`]), and otherwise runs a one-shot [`Master`].
//!
//! The CLI is its own crate so that a program using `fcan-master` as a library compiles
//! neither clap nor a YAML parser. One job per module:
//!
//! - [`args`]: what the user typed (clap structures, help text);
//! - `exec`: runs a command against a [`Master`] and reports [`views`], knowing nothing
//!   of formatting;
//! - [`views`]: the serde view structs, the JSON shape of each command (`docs/cli.md`);
//! - `render`: text tables or JSON lines from the views, every node-supplied string
//!   escaped;
//! - [`serve`]: `fcan serve`, the bus-owner daemon (its own parser: `--bus` repeats);
//! - [`faces`]: the faces besides the remote API (Foxglove, ROS 2, the joints): their
//!   flags, flattened into `serve`, `fake` and the demo, and the one function that
//!   starts them;
//! - [`fake`]: `fcan fake`, fake nodes of any schema (its own parser), on the simulated
//!   bus with `serve`'s bus owner, or on SocketCAN;
//! - [`diagnostics`]: the `tracing` subscriber that prints the faces' and device links'
//!   diagnostics on stderr;
//! - this file: the wiring.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod args;
pub mod attach;
mod dbc;
mod decode;
pub mod diagnostics;
mod exec;
pub mod faces;
pub mod fake;
pub mod mcap_file;
mod record;
mod render;
pub mod serve;
mod update;
mod value_text;
pub mod views;

pub use args::{Cli, Command, MonitorArgs, ParamCmd, SchemaCmd, ServiceCmd, StreamArgs, TopicCmd};
pub use render::describe_event;
pub use value_text::{parse_value, parse_value_as};

use std::io::{IsTerminal, Write};
use std::time::Duration;

use fcan_master::cache::{BlobStore, DiskStore, MemoryStore};
use fcan_master::transport::sim::SimBus;
use fcan_master::{Master, MasterError, MasterOptions};
use fcan_master::{MasterApi, Phase};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// From the master.
    #[error(transparent)]
    Master(#[from] MasterError),
    /// Reading a file or writing output.
    #[error("{0}")]
    Io(String),
    /// Reaching the daemon asked for (`--connect`), or a daemon that does not serve the
    /// bus.
    #[error("{0}")]
    Daemon(String),
    /// The daemon (the bus's master) or a node refused: the daemon's message, which
    /// says what a local master would (the node's reason, the bound).
    #[error("{}", fcan_master::text::Untrusted(.message))]
    Remote {
        /// The error's kind, as a local master's error would have it.
        kind: fcan_master::ErrorKind,
        /// The daemon's message.
        message: String,
    },
    /// Anything else, for people.
    #[error("{0}")]
    Usage(String),
    /// Whoever read the output stopped reading (`fcan … | head`: a broken pipe). Not a
    /// failure: the binary exits quietly with status 0 (docs/cli.md).
    #[error("the output was closed (broken pipe)")]
    OutputClosed,
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return CliError::OutputClosed;
        }
        CliError::Io(e.to_string())
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        match e.io_error_kind() {
            Some(std::io::ErrorKind::BrokenPipe) => CliError::OutputClosed,
            _ => CliError::Io(e.to_string()),
        }
    }
}

impl CliError {
    /// The error as `fcan --json` reports it.
    pub fn view(&self) -> views::ErrorView {
        views::ErrorView {
            kind: match self {
                CliError::Master(_) | CliError::Remote { .. } => "master",
                CliError::Io(_) | CliError::OutputClosed => "io",
                CliError::Daemon(_) => "daemon",
                CliError::Usage(_) => "usage",
            },
            error: self.to_string(),
        }
    }
}

/// Output settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct Output {
    /// One JSON object per line.
    pub json: bool,
}

/// Runs `fcan` as the binary does: attaches to the daemon that serves the bus (the
/// local one at [`attach::LOCAL_DAEMON`] by default, `--connect` for another) or, when
/// there is none, opens the bus, starts a one-shot master, waits for discovery and runs
/// the command. `sim` is the simulated bus `--bus sim` attaches to.
pub async fn run(cli: Cli, sim: Option<&SimBus>) -> Result<(), CliError> {
    run_to(cli, sim, &mut std::io::stdout().lock()).await
}

/// [`run`], writing the command's output to `out` (for tests that run `fcan` command
/// lines in-process). With a simulated bus of the caller's (`sim`), the local daemon is
/// not looked for: that bus lives in this process, no daemon can serve it (`--connect`
/// still attaches).
pub async fn run_to(cli: Cli, sim: Option<&SimBus>, out: &mut dyn Write) -> Result<(), CliError> {
    let local = sim.is_none().then_some(attach::LOCAL_DAEMON);
    run_with(cli, sim, local, out, &mut std::io::stderr()).await
}

/// [`run_to`] with the daemon looked for by default (`local_daemon`; `None`: none) and
/// where the note "running a one-shot master" goes (`notes`; stderr in the binary).
pub async fn run_with(
    cli: Cli,
    sim: Option<&SimBus>,
    local_daemon: Option<&str>,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<(), CliError> {
    let o = Output { json: cli.json };
    if let Command::Serve(a) | Command::Fake(a) = &cli.command {
        // Their own parsers (the binary's `main`): here no bus is opened for them.
        let name = if matches!(cli.command, Command::Serve(_)) {
            "serve"
        } else {
            "fake"
        };
        return Err(CliError::Usage(format!(
            "`fcan {name}` runs through its own parser (the `fcan` binary: `fcan {name} {}`)",
            a.args.join(" ")
        )));
    }
    let devices = device_specs(&cli)?;
    if let Command::Update(u) = &cli.command {
        if let Some(path) = &u.write_image {
            // Offline: the image file is made of local files only.
            return update::write_image(u, path, cli.json, out);
        }
    }
    if let Command::Decode(args) = &cli.command {
        // Offline: no bus, no daemon; the blob cache only for schemas the capture lacks.
        let store = (!cli.no_cache).then(|| blob_store(cli.cache_dir.as_deref()));
        return decode::decode(args, &devices, store, out, notes);
    }
    // A spec that names no bus is refused before any network or bus is touched.
    let asked = cli.bus.as_deref().map(attach::bus_name).transpose()?;
    let asked_bus = asked.as_ref().map(|(bus, _)| bus.as_str());
    if !cli.no_daemon {
        if let Some(ep) = &cli.connect {
            // Asked for: that daemon or an error, never a master of our own beside it.
            let d = attach::reach(ep, attach::CONNECT_TIMEOUT)
                .await
                .map_err(|e| CliError::Daemon(format!("cannot reach fcan daemon at {ep}: {e}")))?;
            let bus = match asked_bus {
                Some(b) => b.to_string(),
                None => only_bus(&d, &cli.command)?,
            };
            refuse_devices(&devices, &d)?;
            return on_daemon(&d, &bus, &cli.command, o, out).await;
        }
        if let Some(ep) = local_daemon {
            match attach::reach(ep, attach::PROBE_TIMEOUT).await {
                Ok(d) => match asked_bus {
                    Some(bus) if usable(&d, bus, &cli.command) => {
                        refuse_devices(&devices, &d)?;
                        return on_daemon(&d, bus, &cli.command, o, out).await;
                    }
                    Some(bus) => writeln!(
                        notes,
                        "fcan: the fcan daemon on {ep} serves {}, not bus `{bus}`: running a one-shot master",
                        served(&d.buses)
                    )?,
                    // No --bus: the daemon's bus when it serves one, a clear choice when
                    // it serves several (a one-shot master beside it would fight it).
                    None if !d.buses.is_empty() => {
                        let bus = only_bus(&d, &cli.command)?;
                        refuse_devices(&devices, &d)?;
                        return on_daemon(&d, &bus, &cli.command, o, out).await;
                    }
                    None => writeln!(
                        notes,
                        "fcan: the fcan daemon on {ep} serves no bus: running a one-shot master on {}",
                        attach::DEFAULT_BUS
                    )?,
                },
                Err(_) => writeln!(
                    notes,
                    "fcan: no fcan daemon on {ep}: running a one-shot master (start `fcan serve` to share the bus)"
                )?,
            }
        }
    }
    let spec = match asked {
        Some((_, spec)) => spec,
        None => attach::bus_name(attach::DEFAULT_BUS)?.1,
    };
    one_shot(&cli, &spec, &devices, sim, out).await
}

/// The devices of `--device` and `--bus-file`, parsed (not yet configured).
fn device_specs(cli: &Cli) -> Result<Vec<fcan_drivers::spec::DeviceSpec>, CliError> {
    let usage = |e: fcan_drivers::spec::SpecError| CliError::Usage(e.to_string());
    let mut specs = Vec::new();
    for d in &cli.devices {
        specs.push(fcan_drivers::spec::DeviceSpec::parse(d).map_err(usage)?);
    }
    if let Some(f) = &cli.bus_file {
        specs.extend(fcan_drivers::spec::BusFile::read(f).map_err(usage)?.devices);
    }
    if !specs.is_empty() {
        // Every key checked before a bus or a daemon is touched.
        fcan_drivers::spec::devices(&specs).map_err(usage)?;
    }
    Ok(specs)
}

/// A daemon owns the bus and drives its own devices: `--device` cannot add any.
fn refuse_devices(
    devices: &[fcan_drivers::spec::DeviceSpec],
    d: &attach::Daemon,
) -> Result<(), CliError> {
    if devices.is_empty() {
        return Ok(());
    }
    Err(CliError::Daemon(format!(
        "the fcan daemon at {} owns the bus and drives its own devices: give --device to `fcan serve`, or run a one-shot master with --no-daemon",
        d.endpoint
    )))
}

/// Whether `cmd` can run on daemon `d`: it serves `bus`, or the command is `monitor`,
/// which shows every bus the daemon serves.
fn usable(d: &attach::Daemon, bus: &str, cmd: &Command) -> bool {
    d.buses.iter().any(|b| b == bus) || matches!(cmd, Command::Monitor(_)) && !d.buses.is_empty()
}

/// The bus of daemon `d` a command without `--bus` runs on: its only one (any of them
/// for `monitor`, which shows them all); several or none is an error naming them.
fn only_bus(d: &attach::Daemon, cmd: &Command) -> Result<String, CliError> {
    match d.buses.as_slice() {
        [one] => Ok(one.clone()),
        [first, ..] if matches!(cmd, Command::Monitor(_)) => Ok(first.clone()),
        [] => Err(CliError::Daemon(format!(
            "the fcan daemon at {} serves no bus",
            d.endpoint
        ))),
        _ => Err(CliError::Daemon(format!(
            "the fcan daemon at {} serves {}: choose one with --bus",
            d.endpoint,
            served(&d.buses)
        ))),
    }
}

/// `bus `a`, `b`` or `no bus`, for messages.
fn served(buses: &[String]) -> String {
    if buses.is_empty() {
        return "no bus".into();
    }
    let names: Vec<String> = buses
        .iter()
        .map(|b| format!("`{}`", fcan_master::text::Untrusted(b)))
        .collect();
    format!("bus {}", names.join(", "))
}

/// Runs the command on the daemon `d`: on `bus`, or with `fcan monitor` on every bus
/// it serves.
async fn on_daemon(
    d: &attach::Daemon,
    bus: &str,
    cmd: &Command,
    o: Output,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if !usable(d, bus, cmd) {
        return Err(CliError::Daemon(format!(
            "the fcan daemon at {} serves {}, not bus `{bus}` (--bus)",
            d.endpoint,
            served(&d.buses)
        )));
    }
    let opts = fcan_remote::ClientOptions::default();
    let remote = |e: MasterError| match e {
        // The daemon's words, printed as a local master's would be.
        MasterError::Remote { kind, message } if kind != fcan_master::ErrorKind::Unreachable => {
            CliError::Remote { kind, message }
        }
        e => CliError::Master(e),
    };
    if let Command::Monitor(m) = cmd {
        // Every bus the daemon serves, each under its name.
        let mut masters = Vec::with_capacity(d.buses.len());
        for b in &d.buses {
            let rm = fcan_remote::RemoteMaster::connect(&d.session, b, opts.clone())
                .await
                .map_err(remote)?;
            masters.push((Some(b.clone()), rm));
        }
        let tty = std::io::stdout().is_terminal();
        let mut renderer = render::Renderer::new(out, o.json, tty);
        return exec::monitor_buses(&masters, Some(&d.session), m, &mut renderer)
            .await
            .map_err(|e| match e {
                CliError::Master(e) => remote(e),
                e => e,
            });
    }
    let rm = fcan_remote::RemoteMaster::connect(&d.session, bus, opts)
        .await
        .map_err(remote)?;
    execute(&rm, cmd, o, out).await.map_err(|e| match e {
        CliError::Master(e) => remote(e),
        e => e,
    })
}

/// Opens `spec` and starts a master on it with the schema cache the options name (none
/// with `no_cache`, else `cache_dir` or the default directory): the one-shot commands'
/// and `fcan serve`'s. With `devices`, the master drives them beside the fcan nodes
/// (`fcan_drivers::DeviceLink` around the link).
pub(crate) async fn start_master(
    spec: &str,
    sim: Option<&SimBus>,
    no_cache: bool,
    cache_dir: Option<&std::path::Path>,
    devices: &[fcan_drivers::spec::DeviceSpec],
) -> Result<Master, CliError> {
    let transport = fcan_master::transport::open(spec, sim).map_err(MasterError::from)?;
    let store: Box<dyn BlobStore> = if no_cache {
        Box::new(MemoryStore::new())
    } else {
        blob_store(cache_dir)
    };
    let opts = MasterOptions {
        store,
        ..Default::default()
    };
    if devices.is_empty() {
        return Ok(Master::start(transport, opts).await?);
    }
    let drivers =
        fcan_drivers::spec::devices(devices).map_err(|e| CliError::Usage(e.to_string()))?;
    let mtu = fcan_master::transport::Transport::mtu(&transport);
    let host =
        fcan_drivers::DeviceHost::new(mtu, drivers).map_err(|e| CliError::Usage(e.to_string()))?;
    // The link's notes (devices that came and went) name the bus by its spec.
    let link =
        diagnostics::bus_span(spec).in_scope(|| fcan_drivers::DeviceLink::new(transport, host));
    Ok(Master::start(link, opts).await?)
}

/// The on-disk blob cache: `cache_dir`, or the default directory.
fn blob_store(cache_dir: Option<&std::path::Path>) -> Box<dyn BlobStore> {
    Box::new(DiskStore::new(
        cache_dir.map_or_else(DiskStore::default_dir, Into::into),
    ))
}

/// A master of our own: opens the bus, discovers, runs the command, exits.
async fn one_shot(
    cli: &Cli,
    spec: &str,
    devices: &[fcan_drivers::spec::DeviceSpec],
    sim: Option<&SimBus>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if sim.is_none() && (spec == "sim" || spec.starts_with("sim:")) {
        // The simulated bus lives inside the program that runs it: nothing to open here.
        return Err(CliError::Usage(format!(
            "no fcan daemon serves the simulated bus `{spec}`: it lives inside the program that runs it. {START}"
        )));
    }
    let master = start_master(spec, sim, cli.no_cache, cli.cache_dir.as_deref(), devices)
        .await
        .map_err(|e| match e {
            CliError::Master(MasterError::Transport(
                fcan_master::transport::TransportError::NoSuchInterface(iface),
            )) => CliError::Usage(format!(
                "no CAN interface `{iface}` on this machine (--bus {spec}), and no fcan daemon serves that bus. {START} On a real bus: `fcan serve --bus socketcan:IFACE` (`ip link` lists the interfaces); a virtual one: `sudo ip link add dev vcan0 type vcan && sudo ip link set vcan0 mtu 72 up` (README, \"Quickstart on vcan\"), then `--bus socketcan:vcan0`"
            )),
            e => e,
        })?;
    let done = match settle(&master, Duration::from_millis(cli.discover_ms)).await {
        Ok(()) => execute(&master, &cli.command, Output { json: cli.json }, out).await,
        Err(e) => Err(e),
    };
    // Whatever the command did, the master leaves on purpose: the nodes it started stop
    // at once and count no lost master (a healthy node's error summary stays clean
    // however many one-shot commands ran). A master that cannot say so is noticed by
    // the nodes' watchdogs, as a killed one is.
    let _ = master.leave().await;
    done
}

/// What to start when a command finds no bus: a daemon that serves one, to attach to.
const START: &str = "To try fcan without hardware, start the demo (`cargo run -p fcan-examples --bin demo`: simulated nodes on a bus it serves) or fake nodes of a schema (`fcan fake --schema FILE --node-id N`) in another terminal, then run this command again: it attaches to them.";

/// Waits until discovery has settled: at least `wait` has passed with no node still
/// being read or provisioned (at most 3 × `wait`).
async fn settle(master: &Master, wait: Duration) -> Result<(), CliError> {
    let start = tokio::time::Instant::now();
    tokio::time::sleep(wait.min(Duration::from_millis(300))).await;
    loop {
        let nodes = master.nodes().await?;
        let busy = nodes
            .iter()
            .any(|n| matches!(n.phase, Phase::Reading | Phase::Provisioning));
        if (!busy && start.elapsed() >= wait) || start.elapsed() >= wait * 3 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs one command against a running master, writing text (or JSON lines with
/// `o.json`) to `out`. `master` is any [`MasterApi`]: the in-process [`Master`] (the
/// demo, the tests) or a bus-owner daemon's remote client; the command code is the same.
pub async fn execute<M: MasterApi>(
    master: &M,
    cmd: &Command,
    o: Output,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    // Only a terminal gets the monitor's redraw; `out` is stdout in the binary and demo.
    let tty = std::io::stdout().is_terminal();
    let mut renderer = render::Renderer::new(out, o.json, tty);
    exec::run(master, cmd, &mut renderer).await
}
