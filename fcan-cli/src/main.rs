//! The `fcan` command: see `fcan --help`.

use std::process::ExitCode;

use clap::Parser;
use fcan_cli::{run, Cli};
use fcan_master::text::Untrusted;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli, None).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors quote names and reasons that came from nodes.
            eprintln!("fcan: error: {}", Untrusted(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}
