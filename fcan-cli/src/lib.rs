//! The `fcan` command line, as a library: [`run`] is the binary; [`execute`] runs one
//! command against a [`Master`] that is already running (the demo uses it with its
//! simulated nodes attached).
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
//! - this file: the wiring.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod args;
mod exec;
mod render;
mod value_text;
pub mod views;

pub use args::{Cli, Command, MonitorArgs, ParamCmd, SchemaCmd, ServiceCmd, StreamArgs, TopicCmd};
pub use render::describe_event;
pub use value_text::parse_value;

use std::io::{IsTerminal, Write};
use std::time::Duration;

use fcan_master::cache::{BlobStore, DiskStore, MemoryStore};
use fcan_master::master::{Master, MasterError, MasterOptions};
use fcan_master::transport::sim::SimBus;
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
    /// Anything else, for people.
    #[error("{0}")]
    Usage(String),
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Io(e.to_string())
    }
}

impl CliError {
    /// The error as `fcan --json` reports it.
    pub fn view(&self) -> views::ErrorView {
        views::ErrorView {
            kind: match self {
                CliError::Master(_) => "master",
                CliError::Io(_) => "io",
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
