//! `fcan fake`: fake nodes of any schema, run by the firmware's own runtime
//! (`fcan-fake`), on the simulated bus (with the bus owner serving it, as `fcan serve
//! --bus sim` does, so other `fcan` commands attach) or on SocketCAN (`docs/fake.md`).
//!
//! Like `serve`, it has its own parser ([`FakeCli`]): it takes `--schema`, `--node-id`
//! and `--mirror` several times and `--bus` once, and runs until Ctrl-C. YAML schemas
//! are compiled in-process with the `fcan-codegen` library (without its `cli` feature):
//! the one place outside build scripts that depends on it, because a fake node is
//! started from the schema files a firmware is built from.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use fcan_core::frame::Mtu;
use fcan_core::id::NodeId;
use fcan_fake::run::{run_fake, Running};
use fcan_fake::{FakeConfig, FakeNode, FakeSchema, Mirror};
use fcan_master::transport::sim::SimBus;
use fcan_master::transport::Transport;

use crate::serve::ServeCli;
use crate::CliError;

const FAKE_HELP: &str = "\
Examples:
  fcan fake --schema schema/examples/motor_driver.yaml --node-id 3   # on the simulated bus, served
  fcan --bus sim nodes                                                # ... from another shell
  fcan fake --schema schema/examples/motor_driver.yaml --node-id 4 --bus mine=sim   # served as `mine`
  fcan fake --schema node.yaml types/*.yaml --node-id 1 --node-id 2 --count 'motor*=2'
  fcan fake --schema schema/examples/motor_driver.yaml --node-id 3 \\
      --mirror 'motor*/target.value=motor*/feedback.position'
  fcan fake --schema schema.bin --node-id 5 --bus socketcan:vcan0
  fcan fake --schema schema/examples/motor_driver.yaml --node-id 3 --bus 'sim:drop=1%,bus_off=100ms/60s'  # faults
  fcan fake --schema schema/examples/motor_driver.yaml --node-id 3 --foxglove 127.0.0.1:8765  # and for Foxglove
  fcan fake --device robstride:id=1,model=RS03 --device mit:id=3   # simulated devices
  fcan fake --bus socketcan:vcan0 --device robstride:id=1            # ... on SocketCAN

--schema takes the YAML files of one node (merged as fcan-codegen merges them) or one
schema blob (fcan-codegen's schema.bin). Each node announces, serves its blob, takes
the master's plan, parameters (ranges enforced by the node runtime, as on the board)
and service calls (answered OK with a zeroed response). Feedback (s2m) topics carry
zeros, except the fields a mirror rule fills from a command (m2s) each time the
command arrives: COMMAND=FEEDBACK, `*` the instance index on both sides, values
converted with saturation; --mirror-file FILE holds one rule a line (docs/fake.md).

With --bus sim (or sim:classic) the nodes sit on a simulated bus in this process and
a master owns it and serves it over Zenoh exactly as `fcan serve --bus sim` does:
`fcan --bus sim …` from any shell attaches (--listen picks the endpoint, by default
tcp/127.0.0.1:7447). --bus NAME=sim[:…] serves it as bus NAME (`fcan --bus NAME …`).
Beside a daemon that serves a bus of the same name on that port (the demo's `sim`),
it serves on a free port instead and prints the `fcan --connect tcp/127.0.0.1:PORT …`
line to use. With --bus socketcan:IFACE the nodes are on that interface (FD
when its MTU is 72) and a master elsewhere (`fcan serve`) provisions them. Progress on
stderr; Ctrl-C stops.

Faults on the simulated bus, at every endpoint (each node's and the master's), each
receiver drawing on its own: --bus 'sim:drop=1%,corrupt=0.1%,duplicate=0.5%,
delay=1%,delay_by=2ms,bus_off=100ms/60s,seed=7' (a frame lost, destroyed by a CRC
error, received twice, held back; off the bus 100 ms once a minute). Probabilities
take their `%`; without seed=N one is drawn and shown in the `serving` line, so a run
can be repeated (docs/cli.md, Bus specs).

--device runs a simulated off-the-shelf device that answers on the bus as the real one
does (a RobStride motor, an MIT-mode motor; docs/drivers.md). On a simulated bus the
master serving it drives these devices as `fcan serve --device` would, so they are
nodes to every `fcan` command (`/robstride1/motor/feedback`); on SocketCAN, run
`fcan serve --bus socketcan:IFACE --device …` with the same specs.";

/// `fcan fake`: run fake nodes of a schema.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "fcan fake",
    version,
    about = "Fake nodes: any schema run by the firmware's own node runtime on this PC, on the simulated bus (served) or SocketCAN.",
    after_help = FAKE_HELP
)]
pub struct FakeCli {
    /// The node's schema: its YAML files (several are merged), or one blob file.
    #[arg(long, value_name = "FILE", num_args = 1.., required_unless_present = "devices",
          requires = "node_ids")]
    pub schema: Vec<PathBuf>,
    /// A node id (0..=126) to run the schema as. Repeat for several nodes.
    #[arg(long = "node-id", value_name = "N", required_unless_present = "devices",
          requires = "schema", value_parser = clap::value_parser!(u8).range(0..=126))]
    pub node_ids: Vec<u8>,
    /// A simulated off-the-shelf device, answering on the bus as the real one does:
    /// `robstride:id=1,model=RS03`, `mit:id=3,layout=damiao` (docs/drivers.md). Repeat
    /// for several. On a simulated bus the master serving it drives these devices too.
    #[arg(long = "device", value_name = "DRIVER:KEYS")]
    pub devices: Vec<String>,
    /// Instances wired in an array: `ARRAY=K`, the array named by its ns with `*` for
    /// the index (`motor*`), or by its type. Others are wired to their max_count.
    #[arg(long = "count", value_name = "ARRAY=K")]
    pub counts: Vec<String>,
    /// A mirror rule `COMMAND=FEEDBACK`, e.g. `motor*/target.value=motor*/feedback.position`.
    /// Repeatable.
    #[arg(long = "mirror", value_name = "RULE")]
    pub mirror: Vec<String>,
    /// A file of mirror rules, one a line (`#` comments).
    #[arg(long = "mirror-file", value_name = "FILE")]
    pub mirror_file: Vec<PathBuf>,
    /// Take firmware updates over the bus, reporting this firmware version: the node
    /// announces the capability, and `fcan update NODE --schema NEW.yaml --version V`
    /// reboots it with the new schema (a fake node's firmware is its schema blob).
    #[arg(long, value_name = "VERSION")]
    pub firmware: Option<String>,
    /// The bus: `sim`, `sim:classic` (simulated, served over Zenoh), with faults
    /// `sim:drop=1%,corrupt=0.1%,…` (below), `NAME=sim[:…]` (served as bus NAME),
    /// `socketcan:IFACE`, or `udp-multicast`
    /// (python-can's udp_multicast bus on this machine: docs/cli.md, "Bus specs").
    #[arg(long, value_name = "SPEC", default_value = "sim")]
    pub bus: String,
    /// With a simulated bus: listen on this Zenoh endpoint instead of
    /// tcp/127.0.0.1:7447. Repeatable.
    #[arg(long, value_name = "ENDPOINT")]
    pub listen: Vec<String>,
    /// With a simulated bus: connect to this Zenoh endpoint. Repeatable.
    #[arg(long, value_name = "ENDPOINT")]
    pub connect: Vec<String>,
    /// With a simulated bus: where the master caches schema blobs.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// With a simulated bus: the master keeps no on-disk schema cache.
    #[arg(long)]
    pub no_cache: bool,
    /// With a simulated bus, the faces its master serves it through besides the remote
    /// API, as `fcan serve` takes them (`--foxglove ADDR`, `--ros2`, …).
    #[command(flatten)]
    pub faces: crate::faces::FaceArgs,
}

/// If the command line's subcommand is `fake`, its arguments for [`FakeCli`];
/// otherwise `None`.
///
/// ```
/// use std::ffi::OsString;
/// let argv: Vec<OsString> = ["fcan", "fake", "--schema", "a.yaml"].iter().map(OsString::from).collect();
/// assert_eq!(fcan_cli::fake::fake_argv(&argv).unwrap().len(), 3);
/// ```
pub fn fake_argv(argv: &[OsString]) -> Option<Vec<OsString>> {
    crate::serve::own_argv(argv, "fake")
}

/// The blob `--schema` names: the YAML files compiled (merged, validated), or a blob
/// file read as it is.
pub fn load_blob(files: &[PathBuf]) -> Result<Vec<u8>, CliError> {
    let yaml = |p: &PathBuf| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"));
    match files {
        [] => Err(CliError::Usage("--schema: no file".into())),
        [one] if !yaml(one) => {
            std::fs::read(one).map_err(|e| CliError::Io(format!("--schema {}: {e}", one.display())))
        }
        _ if files.iter().all(yaml) => {
            let loaded = fcan_codegen::load_files(files)
                .map_err(|d| CliError::Usage(format!("--schema: the schema is invalid:\n{d}")))?;
            Ok(fcan_core::blob::encode(&loaded.schema))
        }
        _ => Err(CliError::Usage(
            "--schema takes YAML files (.yaml, .yml) or one blob file, not both".into(),
        )),
    }
}

/// The mirror of `--mirror` and `--mirror-file`.
pub fn load_mirror(rules: &[String], files: &[PathBuf]) -> Result<Mirror, CliError> {
    let mut m = Mirror::new();
    for r in rules {
        m.add(r, "--mirror")
            .map_err(|e| CliError::Usage(e.to_string()))?;
    }
    for f in files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| CliError::Io(format!("--mirror-file {}: {e}", f.display())))?;
        m.add_file(&text, &f.display().to_string())
            .map_err(|e| CliError::Usage(e.to_string()))?;
    }
    Ok(m)
}

/// `ARRAY=K` pairs of `--count`.
fn parse_counts(counts: &[String]) -> Result<Vec<(String, u8)>, CliError> {
    counts
        .iter()
        .map(|c| {
            let (a, k) = c.split_once('=').ok_or_else(|| {
                CliError::Usage(format!("--count {c}: expected ARRAY=K, e.g. motor*=2"))
            })?;
            let k = k.trim().parse::<u8>().map_err(|_| {
                CliError::Usage(format!("--count {c}: K must be a count (0..=255)"))
            })?;
            Ok((a.trim().to_string(), k))
        })
        .collect()
}

/// A boot id drawn per node and run, never 0, as a board draws one at boot.
fn boot_id() -> u32 {
    loop {
        let b = fastrand::u32(..);
        if b != 0 {
            return b;
        }
    }
}

/// Everything checked before a bus is touched: the schema, the counts, the mirror and
/// one fake node per id (built for an FD or a Classical link as `fd` says).
fn nodes(cli: &FakeCli, fd: bool) -> Result<Vec<FakeNode>, CliError> {
    if cli.schema.is_empty() {
        // Devices only (`--device`).
        return Ok(Vec::new());
    }
    let blob = load_blob(&cli.schema)?;
    let schema =
        FakeSchema::from_blob(&blob).map_err(|e| CliError::Usage(format!("--schema: {e}")))?;
    let counts = schema
        .counts(&parse_counts(&cli.counts)?)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let mirror = load_mirror(&cli.mirror, &cli.mirror_file)?;
    let mut ids = cli.node_ids.clone();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() != cli.node_ids.len() {
        return Err(CliError::Usage("--node-id: the same id twice".into()));
    }
    ids.iter()
        .map(|&id| {
            let node_id = NodeId::new(id)
                .ok_or_else(|| CliError::Usage(format!("--node-id {id}: 0..=126")))?;
            let mut node = FakeNode::new(
                Arc::clone(&schema),
                FakeConfig {
                    node_id,
                    boot_id: boot_id(),
                    counts: Some(counts.clone()),
                    fd_capable: fd,
                    mirror: mirror.clone(),
                },
            )
            .map_err(|e| CliError::Usage(e.to_string()))?;
            if let Some(v) = &cli.firmware {
                node.take_updates(v);
            }
            Ok(node)
        })
        .collect()
}

/// Runs the fake nodes until Ctrl-C. `sim` is the simulated bus `sim` specs put them
/// on (a new one when `None`, as in the binary).
pub async fn fake(mut cli: FakeCli, sim: Option<&SimBus>) -> Result<(), CliError> {
    // `NAME=sim[:…]`: the simulated bus served under NAME (as `fcan serve` names one).
    let (name, spec) = crate::serve::split_name(&cli.bus);
    let (name, spec) = (name.map(str::to_string), spec.to_string());
    let simulated = spec == "sim" || spec.starts_with("sim:");
    let multicast = spec == "udp-multicast" || spec.starts_with("udp-multicast:");
    if !simulated && !multicast && !spec.starts_with("socketcan:") {
        return Err(CliError::Usage(format!(
            "--bus {}: fake nodes run on `sim`, `sim:classic`, `sim:OPTION,…` (faults: `sim:drop=1%`), `NAME=sim…` (served as bus NAME), `socketcan:IFACE` or `udp-multicast[:OPTION,…]` (python-can's bus)",
            cli.bus
        )));
    }
    if let (Some(n), false) = (&name, simulated) {
        // Only a simulated bus is served by `fcan fake`; a real one by `fcan serve`.
        return Err(CliError::Usage(format!(
            "--bus {}: only a simulated bus is served by `fcan fake`, so only it takes a name (`--bus {n}=sim`); name this one where it is served: `fcan serve --bus {n}={spec}`",
            cli.bus
        )));
    }
    if !simulated && (cli.faces.foxglove.is_some() || cli.faces.ros2) {
        // No master runs here: a real bus's master is `fcan serve`'s.
        return Err(CliError::Usage(format!(
            "--bus {}: --foxglove and --ros2 serve the master's bus, and `fcan fake` runs a master only on a simulated bus; give them to the `fcan serve --bus {spec}` that owns this one",
            cli.bus
        )));
    }
    cli.bus = spec;
    // Every endpoint (the nodes', the master's) opens with one spec: faults without a
    // seed get one drawn now, shown in the `serving` line.
    cli.bus = fcan_master::transport::spec::pin_seed(&cli.bus);
    let own_sim;
    let sim = match (simulated, sim) {
        (true, Some(s)) => Some(s),
        (true, None) => {
            own_sim = SimBus::new(Default::default());
            Some(&own_sim)
        }
        (false, _) => None,
    };
    // Opened first, so the nodes are built for the link's frame kind.
    let first =
        fcan_master::transport::open(&cli.bus, sim).map_err(fcan_master::MasterError::from)?;
    let fd = first.mtu() == Mtu::Fd;
    let nodes = nodes(&cli, fd)?;
    let mut running = Vec::new();
    let mut first = Some(first);
    let mut sims = Vec::new();
    for d in &cli.devices {
        let spec =
            fcan_drivers::spec::DeviceSpec::parse(d).map_err(|e| CliError::Usage(e.to_string()))?;
        let sim_dev = spec
            .simulated()
            .map_err(|e| CliError::Usage(e.to_string()))?;
        eprintln!("fcan fake: simulated {} on {}", sim_dev.describe(), cli.bus);
        sims.push(sim_dev);
    }
    let devices_task = if sims.is_empty() {
        None
    } else {
        let t = match first.take() {
            Some(t) => t,
            None => fcan_master::transport::open(&cli.bus, sim)
                .map_err(fcan_master::MasterError::from)?,
        };
        Some(tokio::spawn(fcan_drivers::sim::run(t, sims)))
    };
    for n in nodes {
        eprintln!(
            "fcan fake: node {} (`{}`) on {} ({}), {}",
            n.node().node_id().get(),
            n.name(),
            cli.bus,
            if fd { "CAN FD" } else { "Classical CAN" },
            mirror_copies(n.routes().len())
        );
        let t = match first.take() {
            Some(t) => t,
            None => fcan_master::transport::open(&cli.bus, sim)
                .map_err(fcan_master::MasterError::from)?,
        };
        running.push(run_fake(t, n));
    }
    let running = Arc::new(running);
    let log = tokio::spawn(log_events(Arc::clone(&running)));
    let result = match sim {
        Some(sim) => {
            // The bus owner on the same simulated bus, served as `fcan serve` serves it;
            // it returns on Ctrl-C.
            let serve = ServeCli {
                buses: vec![match &name {
                    Some(n) => format!("{n}={}", cli.bus),
                    None => cli.bus.clone(),
                }],
                listen: cli.listen.clone(),
                connect: cli.connect.clone(),
                zenoh_config: None,
                cache_dir: cli.cache_dir.clone(),
                no_cache: cli.no_cache,
                delivery: fcan_remote::Delivery::Prompt,
                faces: cli.faces.clone(),
                devices: cli.devices.clone(),
                bus_files: Vec::new(),
            };
            crate::serve::serve_as(serve, Some(sim), "fcan fake").await
        }
        None => {
            let interrupted = crate::serve::interrupt()?;
            eprintln!("fcan fake: ready; Ctrl-C stops");
            tokio::select! {
                r = interrupted => r.map_err(CliError::from),
                _ = all_stopped(&running) => Err(CliError::Io(format!("{}: the bus closed", cli.bus))),
            }
        }
    };
    log.abort();
    if let Some(t) = devices_task {
        t.abort();
    }
    // The logger may have been stopped between two polls: what happened since is still
    // printed, before the summary that counts it.
    for r in running.iter() {
        r.stop();
    }
    print_events(&running);
    for r in running.iter() {
        let (name, s) = r.with(|n| (n.name().to_string(), n.stats()));
        eprintln!(
            "fcan fake [{name}]: stopped; {} service calls answered, {} parameter commits, {} feedback publications mirrored",
            s.services, s.param_commits, s.mirrored
        );
    }
    result
}

/// Until every node's loop has ended (never, with no node: devices only).
async fn all_stopped(running: &[Running]) {
    if running.is_empty() {
        return std::future::pending().await;
    }
    while !running.iter().all(Running::is_stopped) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the nodes did, on stderr, as it happens (every 50 ms).
async fn log_events(running: Arc<Vec<Running>>) {
    loop {
        print_events(&running);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Prints the events the nodes have recorded since the last call.
fn print_events(running: &[Running]) {
    for r in running {
        let lines: Vec<String> = r.with(|n| {
            n.take_events()
                .iter()
                .map(|e| format!("fcan fake [{}]: {}", n.name(), n.describe(e)))
                .collect()
        });
        for l in lines {
            eprintln!("{}", fcan_master::text::Untrusted(&l));
        }
    }
}

/// `1 mirror copy`, `3 mirror copies`.
fn mirror_copies(n: usize) -> String {
    format!("{n} mirror {}", if n == 1 { "copy" } else { "copies" })
}

#[cfg(test)]
mod tests {
    /// Issue 38 item 15: `1 mirror copy`, not `1 mirror copies`.
    #[test]
    fn mirror_copies_are_counted_in_english() {
        assert_eq!(super::mirror_copies(0), "0 mirror copies");
        assert_eq!(super::mirror_copies(1), "1 mirror copy");
        assert_eq!(super::mirror_copies(2), "2 mirror copies");
    }
}
