//! The `fcan` command: see `fcan --help`.

use std::process::ExitCode;

use clap::Parser;
use fcan_cli::{run, Cli};
use fcan_master::text::{json_safe, Untrusted};

// Zenoh (attach mode) refuses a current-thread runtime; one worker is enough.
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    match run(cli, None).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if json => {
            // One JSON line, like the output (`docs/cli.md`).
            let line = serde_json::to_string(&e.view()).unwrap_or_default();
            eprintln!("{}", json_safe(line));
            ExitCode::FAILURE
        }
        Err(e) => {
            // Errors quote names and reasons that came from nodes.
            eprintln!("fcan: error: {}", Untrusted(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}
