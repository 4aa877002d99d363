//! The `fcan` command: see `fcan --help`.

use std::process::ExitCode;

use clap::Parser;
use fcan_cli::{run, Cli};
use fcan_master::text::{json_safe, Untrusted};

fn main() -> ExitCode {
    // `fcan serve` (the daemon) has its own parser and a multi-threaded runtime.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(args) = fcan_cli::serve::serve_argv(&argv) {
        let cli = fcan_cli::serve::ServeCli::parse_from(args);
        fcan_cli::diagnostics::init("fcan serve");
        let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        return match rt.block_on(fcan_cli::serve::serve(cli, None)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fcan serve: error: {}", Untrusted(&e.to_string()));
                ExitCode::FAILURE
            }
        };
    }
    // `fcan fake` too: fake nodes and, on a simulated bus, the daemon serving it.
    if let Some(args) = fcan_cli::fake::fake_argv(&argv) {
        let cli = fcan_cli::fake::FakeCli::parse_from(args);
        fcan_cli::diagnostics::init("fcan fake");
        let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        return match rt.block_on(fcan_cli::fake::fake(cli, None)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fcan fake: error: {}", Untrusted(&e.to_string()));
                ExitCode::FAILURE
            }
        };
    }
    // Zenoh (attach mode) refuses a current-thread runtime; one worker is enough.
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(cli_main())
}

async fn cli_main() -> ExitCode {
    let cli = Cli::parse();
    fcan_cli::diagnostics::init("fcan");
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
