//! The `fcan` command: see `fcan --help`.

use std::process::ExitCode;

use clap::Parser;
use fcan_cli::{run, Cli};
use fcan_master::text::{json_safe, Untrusted};

fn main() -> ExitCode {
    // `fcan serve` (the daemon) has its own parser and a multi-threaded runtime.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `fcan help serve` is `fcan serve --help`: their own parsers hold their help.
    if argv.len() == 3 && argv[1] == "help" && (argv[2] == "serve" || argv[2] == "fake") {
        argv = vec![argv[0].clone(), argv[2].clone(), "--help".into()];
    }
    if let Some(args) = fcan_cli::serve::serve_argv(&argv) {
        let cli = fcan_cli::serve::ServeCli::parse_from(args);
        fcan_cli::diagnostics::init("fcan serve");
        let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        return match rt.block_on(fcan_cli::serve::serve(cli, None)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                print_error("fcan serve", &e);
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
                print_error("fcan fake", &e);
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

/// A daemon's (`serve`, `fake`) error on stderr. Its messages are about local things (a
/// schema file, an option, the bus) and may span lines — a schema's diagnostics, one
/// `file:line:col` a line: each line is printed as a line, escaped on its own.
fn print_error(command: &str, e: &fcan_cli::CliError) {
    let text = e.to_string();
    let mut lines = text.lines();
    eprintln!(
        "{command}: error: {}",
        Untrusted(lines.next().unwrap_or_default())
    );
    for line in lines {
        eprintln!("{}", Untrusted(line));
    }
}

async fn cli_main() -> ExitCode {
    let cli = Cli::parse();
    fcan_cli::diagnostics::init("fcan");
    let json = cli.json;
    match run(cli, None).await {
        // `fcan … | head`: the reader has what it wanted; nothing failed (docs/cli.md).
        Ok(()) | Err(fcan_cli::CliError::OutputClosed) => ExitCode::SUCCESS,
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
