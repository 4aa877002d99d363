//! The `fcan` command line, as a library: [`run`] is the binary; [`execute`] runs one
//! command against a [`Master`] that is already running (the demo uses it with its
//! simulated nodes attached).
//!
//! The CLI is its own crate so that a program using `fcan-master` as a library compiles
//! neither clap nor a YAML parser.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod value_text;
pub use value_text::parse_value;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use fcan_core::msg::DataDirection;

use fcan_master::cache::{BlobStore, DiskStore, MemoryStore};
use fcan_master::engine::Event;
use fcan_master::master::{Master, MasterError, MasterOptions};
use fcan_master::registry::Registry;
use fcan_master::text::{json_safe, Untrusted};
use fcan_master::transport::sim::SimBus;
use fcan_master::value::{unpack_param, Value};
use fcan_master::Phase;

const AFTER_HELP: &str = "\
Examples:
  fcan --bus socketcan:can0 nodes
  fcan --bus socketcan:can0 topic echo /md3/motor0/feedback --count 5
  fcan --bus socketcan:can0 topic pub /md3/motor0/target '{type: 1, value: 2.5}'
  fcan --bus socketcan:can0 service call /md3/motor0/reset_encoder '{offset: false, value: 0}'
  fcan --bus socketcan:can0 param set md3.motor0.velocity.kp 0.8
  fcan --bus socketcan:can0 monitor

Values are JSON or YAML flow syntax. Names: topics and services /<node>/<ns>/<name>,
parameters <node>.<ns>.<param>. `--json` prints one JSON object per line.";

/// `fcan`: talk to fcan nodes on a CAN or CAN FD bus.
#[derive(Parser, Debug, Clone)]
#[command(name = "fcan", version, about = "Talk to fcan nodes on a CAN or CAN FD bus: discovery, topics, services, parameters.", after_help = AFTER_HELP)]
pub struct Cli {
    /// The bus: `socketcan:IFACE` (FD when the interface MTU is 72), or `sim` (only
    /// meaningful inside the demo, which attaches simulated nodes).
    #[arg(
        long,
        global = true,
        default_value = "socketcan:can0",
        env = "FCAN_BUS"
    )]
    pub bus: String,
    /// Output one JSON object per line, for scripts.
    #[arg(long, global = true)]
    pub json: bool,
    /// Where downloaded schema blobs are cached (default: $XDG_CACHE_HOME/fcan/blobs).
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Do not use the on-disk schema cache.
    #[arg(long, global = true)]
    pub no_cache: bool,
    /// How long to wait for nodes to be discovered and provisioned, in ms.
    #[arg(long, global = true, default_value_t = 2000, value_name = "MS")]
    pub discover_ms: u64,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// One `fcan` command.
#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// List the nodes: id, name, state, bus mode, frames, errors, schema.
    Nodes,
    /// Topics: list, info, echo, pub, hz.
    #[command(subcommand)]
    Topic(TopicCmd),
    /// Services: list, call.
    #[command(subcommand)]
    Service(ServiceCmd),
    /// Parameters: list, get, set, dump, load.
    #[command(subcommand)]
    Param(ParamCmd),
    /// Schemas: show a node's schema as the master decoded it.
    #[command(subcommand)]
    Schema(SchemaCmd),
    /// A refreshing view of nodes, topic rates and bus counters.
    Monitor(MonitorArgs),
}

/// Limits for commands that stream.
#[derive(Args, Debug, Clone, Default)]
pub struct StreamArgs {
    /// Stop after this many messages.
    #[arg(long, short = 'n')]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, short = 't')]
    pub timeout: Option<f64>,
}

/// `fcan topic …`
#[derive(Subcommand, Debug, Clone)]
pub enum TopicCmd {
    /// List topics with direction, rate and fields.
    List,
    /// Show a topic's fields and types.
    Info {
        /// Topic name, e.g. /md3/motor0/feedback.
        name: String,
    },
    /// Print a topic's values as they arrive.
    #[command(after_help = "Example: fcan topic echo /md3/motor0/feedback --count 10")]
    Echo {
        /// Topic name.
        name: String,
        /// Limits.
        #[command(flatten)]
        stream: StreamArgs,
    },
    /// Publish a value to an m2s topic.
    #[command(
        after_help = "Example: fcan topic pub /md3/motor0/target '{type: 1, value: 2.5}' --rate 100 --count 500"
    )]
    Pub {
        /// Topic name.
        name: String,
        /// The value (JSON or YAML flow syntax).
        value: String,
        /// Publish this many times (default once).
        #[arg(long, short = 'n', default_value_t = 1)]
        count: u64,
        /// Publications per second when publishing more than once.
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
    },
    /// Measure a topic's rate.
    Hz {
        /// Topic name.
        name: String,
        /// Measuring window in seconds.
        #[arg(long, short = 'w', default_value_t = 2.0)]
        window: f64,
    },
}

/// `fcan service …`
#[derive(Subcommand, Debug, Clone)]
pub enum ServiceCmd {
    /// List services with their request and response fields.
    List,
    /// Call a service and print the response.
    #[command(after_help = "Example: fcan service call /io1/board/run_self_test '{}'")]
    Call {
        /// Service name.
        name: String,
        /// The request (JSON or YAML flow syntax); `{}` for an empty request.
        #[arg(default_value = "{}")]
        value: String,
    },
}

/// `fcan param …`
#[derive(Subcommand, Debug, Clone)]
pub enum ParamCmd {
    /// List parameters with type, default and range.
    List,
    /// Read a parameter from its node.
    Get {
        /// Parameter name, e.g. md3.motor0.velocity.kp.
        name: String,
    },
    /// Write a parameter (range-checked here and on the node; restored after reboots).
    Set {
        /// Parameter name.
        name: String,
        /// The value.
        value: String,
    },
    /// Read every parameter (optionally only those starting with PREFIX) as YAML.
    Dump {
        /// Only names starting with this.
        prefix: Option<String>,
    },
    /// Write every parameter in a YAML file of `name: value` lines (as `dump` prints).
    Load {
        /// The file.
        file: PathBuf,
    },
}

/// `fcan schema …`
#[derive(Subcommand, Debug, Clone)]
pub enum SchemaCmd {
    /// Show a node's schema (by node id or name).
    Show {
        /// Node id or name.
        node: String,
    },
}

/// `fcan monitor` options.
#[derive(Args, Debug, Clone)]
pub struct MonitorArgs {
    /// Refresh period in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Stop after this many refreshes.
    #[arg(long, short = 'n')]
    pub count: Option<u64>,
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// From the master.
    #[error(transparent)]
    Master(#[from] MasterError),
    /// Reading a file or writing output.
    #[error("{0}")]
    Io(String),
    /// Anything else, for people.
    #[error("{0}")]
    Usage(String),
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Io(e.to_string())
    }
}

/// Output settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct Output {
    /// One JSON object per line.
    pub json: bool,
}

/// Runs `fcan` as the binary does: opens the bus, starts a master, waits for discovery,
/// runs the command. `sim` is the simulated bus `--bus sim` attaches to.
pub async fn run(cli: Cli, sim: Option<&SimBus>) -> Result<(), CliError> {
    run_to(cli, sim, &mut std::io::stdout().lock()).await
}

/// [`run`], writing the command's output to `out` (for tests that run `fcan` command
/// lines in-process).
pub async fn run_to(cli: Cli, sim: Option<&SimBus>, out: &mut dyn Write) -> Result<(), CliError> {
    let transport = fcan_master::transport::open(&cli.bus, sim).map_err(MasterError::from)?;
    let store: Box<dyn BlobStore> = if cli.no_cache {
        Box::new(MemoryStore::new())
    } else {
        Box::new(DiskStore::new(
            cli.cache_dir.clone().unwrap_or_else(DiskStore::default_dir),
        ))
    };
    let master = Master::start(
        transport,
        MasterOptions {
            store,
            ..Default::default()
        },
    )
    .await?;
    settle(&master, Duration::from_millis(cli.discover_ms)).await?;
    execute(&master, &cli.command, Output { json: cli.json }, out).await
}

/// Waits until discovery has settled: at least `wait` has passed with no node still
/// being read or provisioned (at most 3 × `wait`).
pub async fn settle(master: &Master, wait: Duration) -> Result<(), CliError> {
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

/// One JSON line. Every string in it may have come from a node: `json_safe` leaves none
/// of the characters a terminal acts on raw (the value read back is the same).
fn json_line(out: &mut dyn Write, v: serde_json::Value) -> Result<(), CliError> {
    writeln!(out, "{}", json_safe(v.to_string()))?;
    Ok(())
}

fn deadline(stream: &StreamArgs) -> Option<tokio::time::Instant> {
    stream
        .timeout
        .map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)))
}

fn fields_summary(fields: &[fcan_core::ir::Field]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|f| match f.len {
            Some(n) => format!("{}: [{}; {n}]", Untrusted(&f.name), f.ty),
            None => format!("{}: {}", Untrusted(&f.name), f.ty),
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

fn period(dir: DataDirection, us: u32) -> String {
    match (dir, us) {
        (DataDirection::M2s, _) => "on publish".into(),
        (DataDirection::S2m, 0) => "on commit".into(),
        (DataDirection::S2m, us) => format!("{} Hz", 1e6 / us as f64),
    }
}

/// Runs one command against a running master, writing to `out`.
pub async fn execute(
    master: &Master,
    cmd: &Command,
    o: Output,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match execute_command(master, cmd, o, out).await {
        Err(CliError::Master(MasterError::Unknown(u))) => Err(not_found(master, u).await),
        r => r,
    }
}

/// A name that is not among the running nodes' topics, services or parameters. While a
/// node has announced but is not running, the name may well be one of its own: say what
/// did not happen instead of claiming the name does not exist.
async fn not_found(master: &Master, unknown: fcan_master::registry::UnknownName) -> CliError {
    let Ok(nodes) = master.nodes().await else {
        return MasterError::Unknown(unknown).into();
    };
    let unfinished: Vec<String> = nodes
        .iter()
        .filter(|n| n.phase != Phase::Running)
        .map(|n| {
            format!(
                "node {} ({:?}) announced but provisioning did not finish: {} (node state {:?})",
                n.id, n.name, n.phase, n.state
            )
        })
        .collect();
    if unfinished.is_empty() {
        return MasterError::Unknown(unknown).into();
    }
    CliError::Usage(format!(
        "{} `{}` is not among the running nodes', and {}; it may be one of theirs. \
         Try again, or give discovery more time (--discover-ms)",
        unknown.kind,
        unknown.name,
        unfinished.join("; ")
    ))
}

async fn execute_command(
    master: &Master,
    cmd: &Command,
    o: Output,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match cmd {
        Command::Nodes => {
            let nodes = master.nodes().await?;
            if o.json {
                for n in nodes {
                    json_line(
                        out,
                        serde_json::json!({"id": n.id.get(), "name": n.name, "phase": n.phase.to_string(), "state": format!("{:?}", n.state),
                            "boot_id": n.boot_id, "mode": format!("{:?}", n.mode), "frames": n.frames, "errors": n.errors, "schema": n.digest.map(|d| d.to_string()), "schema_source": n.schema_source.map(|s| s.as_str())}),
                    )?;
                }
            } else {
                writeln!(
                    out,
                    "{:>3}  {:<20} {:<14} {:<16} {:<8} {:>6} {:>6}  SCHEMA",
                    "ID", "NAME", "STATE", "PHASE", "MODE", "FRAMES", "ERRORS"
                )?;
                for n in nodes {
                    let mut digest = n
                        .digest
                        .map_or("-".to_string(), |d| d.to_string()[..16].to_string());
                    if let Some(source) = n.schema_source {
                        digest.push_str(&format!(" ({source})"));
                    }
                    writeln!(
                        out,
                        "{:>3}  {:<20} {:<14} {:<16} {:<8} {:>6} {:>6}  {digest}",
                        n.id,
                        Untrusted(&n.name),
                        format!("{:?}", n.state),
                        Untrusted(&n.phase.to_string()),
                        format!("{:?}", n.mode),
                        n.frames,
                        n.errors
                    )?;
                }
            }
        }
        Command::Topic(t) => topic(master, t, o, out).await?,
        Command::Service(s) => service(master, s, o, out).await?,
        Command::Param(p) => param(master, p, o, out).await?,
        Command::Schema(SchemaCmd::Show { node }) => {
            let nodes = master.nodes().await?;
            let n = nodes
                .iter()
                .find(|n| n.name == *node || node.parse::<u8>().ok() == Some(n.id.get()))
                .ok_or_else(|| {
                    let names: Vec<String> = nodes
                        .iter()
                        .map(|n| format!("{} ({})", Untrusted(&n.name), n.id))
                        .collect();
                    CliError::Usage(format!(
                        "no node `{}`; known: {}",
                        Untrusted(node),
                        names.join(", ")
                    ))
                })?;
            let schema = master.schema(n.id).await?.ok_or_else(|| {
                CliError::Usage(format!("node {} has no schema yet", Untrusted(&n.name)))
            })?;
            writeln!(
                out,
                "{}",
                render_schema(&schema.schema, &schema.digest.to_string())
            )?;
        }
        Command::Monitor(m) => monitor(master, m, o, out).await?,
    }
    Ok(())
}

async fn topic(
    master: &Master,
    cmd: &TopicCmd,
    o: Output,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match cmd {
        TopicCmd::List => {
            for t in master.registry().await?.topics {
                if o.json {
                    json_line(
                        out,
                        serde_json::json!({"name": t.name, "dir": format!("{:?}", t.dir).to_lowercase(), "period_us": t.period_us, "fields": fields_summary(&t.fields)}),
                    )?;
                } else {
                    writeln!(
                        out,
                        "{:<40} {:<4} {:<12} {}",
                        Untrusted(&t.name),
                        format!("{:?}", t.dir).to_lowercase(),
                        period(t.dir, t.period_us),
                        fields_summary(&t.fields)
                    )?;
                }
            }
        }
        TopicCmd::Info { name } => {
            let reg = master.registry().await?;
            let t = reg.topic(name).map_err(MasterError::from)?;
            writeln!(out, "topic:     {}", Untrusted(&t.name))?;
            writeln!(out, "direction: {:?}", t.dir)?;
            writeln!(out, "rate:      {}", period(t.dir, t.period_us))?;
            writeln!(
                out,
                "size:      {} bytes",
                fcan_core::numbering::layout(&t.fields).size
            )?;
            if let Some(r) = &t.ros_type {
                writeln!(out, "ros type:  {}", Untrusted(r))?;
            }
            writeln!(out, "fields:")?;
            for f in &t.fields {
                match f.len {
                    Some(n) => writeln!(out, "  {}: [{}; {n}]", Untrusted(&f.name), f.ty)?,
                    None => writeln!(out, "  {}: {}", Untrusted(&f.name), f.ty)?,
                }
            }
        }
        TopicCmd::Echo { name, stream } => {
            // Times count from the request: samples can arrive before `subscribe` returns.
            let start = fcan_master::transport::now();
            let mut sub = master.subscribe(name).await?;
            let end = deadline(stream);
            let mut n = 0u64;
            while stream.count.is_none_or(|c| n < c) {
                let next = match end {
                    Some(d) => match tokio::time::timeout_at(d, sub.recv()).await {
                        Ok(s) => s,
                        Err(_) => break,
                    },
                    None => sub.recv().await,
                };
                let Some(s) = next else { break };
                n += 1;
                let t = s.at.saturating_duration_since(start).as_secs_f64();
                if o.json {
                    json_line(
                        out,
                        serde_json::json!({"topic": &*s.name, "t": t, "value": s.value.to_json()}),
                    )?;
                } else {
                    writeln!(out, "[{t:9.3}] {}", s.value)?;
                }
                out.flush()?;
            }
            if let Some(c) = stream.count {
                if n < c {
                    return Err(CliError::Usage(format!(
                        "received {n} of {c} messages on {name} before the timeout"
                    )));
                }
            }
        }
        TopicCmd::Pub {
            name,
            value,
            count,
            rate,
        } => {
            let v = parse_value(value).map_err(MasterError::from)?;
            let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
            let mut tick = tokio::time::interval(period);
            for _ in 0..*count {
                tick.tick().await;
                master.publish(name, v.clone()).await?;
            }
            if o.json {
                json_line(out, serde_json::json!({"topic": name, "published": count}))?;
            } else {
                writeln!(out, "published {count} × {name} = {v}")?;
            }
        }
        TopicCmd::Hz { name, window } => {
            let mut sub = master.subscribe(name).await?;
            let end = tokio::time::Instant::now() + Duration::from_secs_f64(*window);
            let mut times = Vec::new();
            while let Ok(Some(s)) = tokio::time::timeout_at(end, sub.recv()).await {
                times.push(s.at);
            }
            let gaps: Vec<f64> = times
                .windows(2)
                .map(|w| w[1].duration_since(w[0]).as_secs_f64())
                .collect();
            let rate = if gaps.is_empty() {
                0.0
            } else {
                gaps.len() as f64 / gaps.iter().sum::<f64>()
            };
            let (min, max) = gaps
                .iter()
                .fold((f64::MAX, 0.0f64), |(a, b), g| (a.min(*g), b.max(*g)));
            if o.json {
                json_line(
                    out,
                    serde_json::json!({"topic": name, "samples": times.len(), "rate_hz": rate,
                    "min_gap_s": if gaps.is_empty() { 0.0 } else { min }, "max_gap_s": max}),
                )?;
            } else if gaps.is_empty() {
                writeln!(
                    out,
                    "{name}: {} message(s) in {window} s — not enough to measure a rate",
                    times.len()
                )?;
            } else {
                writeln!(
                    out,
                    "{name}: {rate:.2} Hz over {} messages (gap min {:.3} ms, max {:.3} ms)",
                    times.len(),
                    min * 1e3,
                    max * 1e3
                )?;
            }
            if times.is_empty() {
                return Err(CliError::Usage(format!(
                    "no message on {name} in {window} s"
                )));
            }
        }
    }
    Ok(())
}

async fn service(
    master: &Master,
    cmd: &ServiceCmd,
    o: Output,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match cmd {
        ServiceCmd::List => {
            for s in master.registry().await?.services {
                if o.json {
                    json_line(
                        out,
                        serde_json::json!({"name": s.name, "request": fields_summary(&s.request), "response": fields_summary(&s.response)}),
                    )?;
                } else {
                    writeln!(
                        out,
                        "{:<40} {} -> {}",
                        Untrusted(&s.name),
                        fields_summary(&s.request),
                        fields_summary(&s.response)
                    )?;
                }
            }
        }
        ServiceCmd::Call { name, value } => {
            let v = parse_value(value).map_err(MasterError::from)?;
            let resp = master.call(name, v).await?;
            if o.json {
                json_line(
                    out,
                    serde_json::json!({"service": name, "response": resp.to_json()}),
                )?;
            } else {
                writeln!(out, "{resp}")?;
            }
        }
    }
    Ok(())
}

async fn param(
    master: &Master,
    cmd: &ParamCmd,
    o: Output,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match cmd {
        ParamCmd::List => {
            for p in master.registry().await?.params {
                let d = &p.decl;
                let show = |s: Option<fcan_core::types::Scalar>| {
                    s.map_or("-".to_string(), |v| Value::from_scalar(v).to_string())
                };
                if o.json {
                    json_line(
                        out,
                        serde_json::json!({"name": p.name, "type": d.ty.name(), "default": Value::from_scalar(d.default).to_json(),
                        "min": d.min.map(|v| Value::from_scalar(v).to_json()), "max": d.max.map(|v| Value::from_scalar(v).to_json())}),
                    )?;
                } else {
                    writeln!(
                        out,
                        "{:<44} {:<5} default {:<8} min {:<8} max {}",
                        Untrusted(&p.name),
                        d.ty.name(),
                        show(Some(d.default)),
                        show(d.min),
                        show(d.max)
                    )?;
                }
            }
        }
        ParamCmd::Get { name } => {
            let v = master.param_get(name).await?;
            if o.json {
                json_line(out, serde_json::json!({"name": name, "value": v.to_json()}))?;
            } else {
                writeln!(out, "{v}")?;
            }
        }
        ParamCmd::Set { name, value } => {
            let v = parse_value(value).map_err(MasterError::from)?;
            master.param_set(name, v.clone()).await?;
            if o.json {
                json_line(
                    out,
                    serde_json::json!({"name": name, "value": v.to_json(), "set": true}),
                )?;
            } else {
                writeln!(out, "{name} = {v}")?;
            }
        }
        ParamCmd::Dump { prefix } => {
            let reg: Registry = master.registry().await?;
            for p in reg.params.iter().filter(|p| {
                prefix
                    .as_ref()
                    .is_none_or(|x| p.name.starts_with(x.as_str()))
            }) {
                let v = master.param_get(&p.name).await?;
                if o.json {
                    json_line(
                        out,
                        serde_json::json!({"name": p.name, "value": v.to_json()}),
                    )?;
                } else {
                    writeln!(out, "{}: {}", Untrusted(&p.name), v)?;
                }
            }
        }
        ParamCmd::Load { file } => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| CliError::Io(format!("{}: {e}", file.display())))?;
            let map: BTreeMap<String, serde_yaml_ng::Value> = serde_yaml_ng::from_str(&text)
                .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
            let mut failed = 0;
            for (name, v) in map {
                let text = serde_yaml_ng::to_string(&v).unwrap_or_default();
                let r = match parse_value(text.trim()) {
                    Ok(v) => master.param_set(&name, v).await.map_err(CliError::from),
                    Err(e) => Err(CliError::Master(MasterError::Value(e))),
                };
                match r {
                    Ok(()) => writeln!(out, "{name}: ok")?,
                    Err(e) => {
                        failed += 1;
                        writeln!(out, "{name}: {}", Untrusted(&e.to_string()))?;
                    }
                }
            }
            if failed > 0 {
                return Err(CliError::Usage(format!("{failed} parameter(s) not set")));
            }
        }
    }
    Ok(())
}

async fn monitor(
    master: &Master,
    m: &MonitorArgs,
    o: Output,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut events = master.events();
    let mut last = master.status().await?;
    let mut last_t = tokio::time::Instant::now();
    let mut recent: Vec<String> = Vec::new();
    let tty = std::io::stdout().is_terminal() && !o.json;
    let mut n = 0u64;
    loop {
        tokio::time::sleep(Duration::from_millis(m.interval_ms)).await;
        while let Ok(e) = events.try_recv() {
            if let Some(line) = describe_event(&e) {
                recent.push(line);
            }
        }
        if recent.len() > 5 {
            recent.drain(..recent.len() - 5);
        }
        let now = master.status().await?;
        let dt = last_t.elapsed().as_secs_f64().max(1e-6);
        last_t = tokio::time::Instant::now();
        if o.json {
            let rates: BTreeMap<&String, f64> = now
                .samples
                .iter()
                .map(|(k, v)| {
                    (
                        k,
                        (v - last.samples.get(k).copied().unwrap_or(0)) as f64 / dt,
                    )
                })
                .collect();
            json_line(
                out,
                serde_json::json!({"nodes": now.nodes.iter().map(|n| serde_json::json!({"id": n.id.get(), "name": n.name, "phase": n.phase.to_string(), "errors": n.errors})).collect::<Vec<_>>(),
                "rates_hz": rates, "bus_load": (now.bus_busy.saturating_sub(last.bus_busy)).as_secs_f64() / dt, "rx_frames": now.stats.rx_frames, "tx_frames": now.stats.tx_frames}),
            )?;
        } else {
            if tty {
                write!(out, "\x1b[2J\x1b[H")?;
            }
            let load = (now.bus_busy.saturating_sub(last.bus_busy)).as_secs_f64() / dt * 100.0;
            writeln!(out, "fcan monitor — {} node(s), bus load {load:.1} % (at 1/5 Mbit/s), rx {} frames ({:.0}/s), tx {} frames ({:.0}/s), retries {}, malformed {}",
                now.nodes.len(), now.stats.rx_frames, (now.stats.rx_frames - last.stats.rx_frames) as f64 / dt,
                now.stats.tx_frames, (now.stats.tx_frames - last.stats.tx_frames) as f64 / dt, now.stats.retries, now.stats.rx_malformed)?;
            writeln!(
                out,
                "{:>3}  {:<20} {:<16} {:<8} {:>6}",
                "ID", "NAME", "PHASE", "MODE", "ERRORS"
            )?;
            for node in &now.nodes {
                writeln!(
                    out,
                    "{:>3}  {:<20} {:<16} {:<8} {:>6}",
                    node.id,
                    Untrusted(&node.name),
                    Untrusted(&node.phase.to_string()),
                    format!("{:?}", node.mode),
                    node.errors
                )?;
            }
            writeln!(out, "{:<44} {:>10}", "TOPIC", "RATE")?;
            for (k, v) in &now.samples {
                let rate = (v - last.samples.get(k).copied().unwrap_or(0)) as f64 / dt;
                writeln!(out, "{:<44} {rate:>8.1}/s", Untrusted(k))?;
            }
            for line in &recent {
                writeln!(out, "  · {line}")?;
            }
            if !tty {
                writeln!(out)?;
            }
        }
        out.flush()?;
        last = now;
        n += 1;
        if m.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
    }
}

/// One line for people about an engine event, or `None` for the chatty ones.
pub fn describe_event(e: &Event) -> Option<String> {
    Some(match e {
        Event::Announced { node, boot_id } => {
            format!("node {node} announced (boot {boot_id:#010x})")
        }
        Event::SchemaReady {
            node,
            digest,
            cached,
        } => {
            format!(
                "node {node}: schema {} {}",
                &digest.to_string()[..16],
                if *cached {
                    "from cache"
                } else {
                    "downloaded and verified"
                }
            )
        }
        Event::Online { node } => format!("node {node} running"),
        Event::Rebooted { node, .. } => {
            format!("node {node} rebooted: re-provisioning, restoring parameters")
        }
        Event::Offline { node } => format!("node {node} offline"),
        Event::Failed { node, reason } => format!("node {node} failed: {}", Untrusted(reason)),
        Event::Collision { node, boot_ids } => format!(
            "node id {node} is used by two nodes (boot ids {:#010x}, {:#010x})",
            boot_ids.0, boot_ids.1
        ),
        Event::OtherMaster { session } => {
            format!("another master (session {session:#010x}) is on this bus")
        }
        Event::ClassicNodeOnFdLink { node } => {
            format!("node {node} cannot do CAN FD: using Classical CAN frames with it")
        }
        // Request completions, and events added later (`Event` is non_exhaustive).
        _ => return None,
    })
}

/// A schema as YAML-like text, the way `fcan schema show` prints it.
pub fn render_schema(s: &fcan_core::ir::Schema, digest: &str) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "# sha256 {digest}");
    let _ = writeln!(o, "node: {}\nprotocol: {}", Untrusted(&s.node), s.protocol);
    let l = &s.limits;
    let _ = writeln!(o, "limits: {{max_frames: {}, max_copy_entries: {}, service_buffer: {}, service_reassembly: {}}}", l.max_frames, l.max_copy_entries, l.service_buffer, l.service_reassembly);
    let _ = writeln!(o, "types:");
    for t in &s.types {
        let _ = writeln!(o, "  {}:", Untrusted(&t.name));
        if !t.params.is_empty() {
            let _ = writeln!(o, "    params:");
            for p in &t.params {
                let mut line = format!(
                    "{{type: {}, default: {}",
                    p.ty,
                    Value::from_scalar(p.default)
                );
                if let Some(m) = p.min {
                    let _ = write!(line, ", min: {}", Value::from_scalar(m));
                }
                if let Some(m) = p.max {
                    let _ = write!(line, ", max: {}", Value::from_scalar(m));
                }
                let _ = writeln!(o, "      {}: {line}}}", Untrusted(&p.name));
            }
        }
        if !t.topics.is_empty() {
            let _ = writeln!(o, "    topics:");
            for tp in &t.topics {
                let _ = writeln!(
                    o,
                    "      {}: {{dir: {}, period_us: {}, fields: {}}}",
                    Untrusted(&tp.name),
                    format!("{:?}", tp.dir).to_lowercase(),
                    tp.period_us,
                    fields_summary(&tp.fields)
                );
            }
        }
        if !t.services.is_empty() {
            let _ = writeln!(o, "    services:");
            for sv in &t.services {
                let _ = writeln!(
                    o,
                    "      {}: {{request: {}, response: {}}}",
                    Untrusted(&sv.name),
                    fields_summary(&sv.request),
                    fields_summary(&sv.response)
                );
            }
        }
    }
    let _ = writeln!(o, "instances:");
    for a in &s.instances {
        let _ = writeln!(
            o,
            "  - {{type: {}, max_count: {}, ns: \"{}\"}}",
            Untrusted(&a.ty),
            a.max_count,
            Untrusted(&a.ns)
        );
    }
    o
}

/// Reads a parameter's packed value into a [`Value`] (for callers holding raw bytes).
pub fn param_value(p: &fcan_master::registry::ParamInfo, bytes: &[u8]) -> Option<Value> {
    unpack_param(p.decl.ty, p.decl.len, bytes).ok()
}
