//! The `fcan` command: see `fcan --help`.

use std::process::ExitCode;

use clap::Parser;
use fcan_master::cli::{run, Cli};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli, None).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fcan: error: {e}");
            ExitCode::FAILURE
        }
    }
}
