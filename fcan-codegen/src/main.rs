//! The `fcan-codegen` command line.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fcan_codegen::{diff, generate, inspect, load_files, Diagnostics};

/// The fcan schema compiler: checks YAML schemas, writes the schema blob, its SHA-256 and
/// the Rust module for fcan-runtime-nostd, shows numbering tables and compares versions.
///
/// Several files form one node: they are merged in the order of their file names (so the
/// order on the command line never matters), and block types no instance uses are
/// dropped. Errors are printed as FILE:LINE:COL: error: MESSAGE, all of them, and the
/// exit status is 1.
#[derive(Parser)]
#[command(name = "fcan-codegen", version, propagate_version = true)]
#[command(after_help = "Examples:
  fcan-codegen check schema/examples/motor_driver.yaml
  fcan-codegen generate node.yaml motor.type.yaml --out src/generated
  fcan-codegen inspect node.yaml motor.type.yaml --json
  fcan-codegen diff --old v1/*.yaml --new v2/*.yaml

The schema language: docs/schema.md. In build.rs use fcan_codegen::Builder instead.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate schema files; write nothing.
    ///
    /// Prints one line per problem (FILE:LINE:COL: error: MESSAGE) on stderr and exits
    /// with 1, or prints a one-line summary and exits with 0.
    #[command(after_help = "Example:
  fcan-codegen check node.yaml motor.type.yaml sensor.type.yaml
  ok: md_controller{i}: 2 types, 12 blocks, blob 1234 bytes, sha256 3f2a…")]
    Check {
        /// Schema files forming one node.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Validate and write DIR/fcan_gen.rs, DIR/schema.bin and DIR/schema.sha256.
    ///
    /// fcan_gen.rs is a module for `include!` (no inner attributes), needing only
    /// fcan-runtime-nostd. schema.sha256 holds the lowercase hex digest and a newline.
    /// Nothing is written when the schema has errors.
    #[command(after_help = "Example:
  fcan-codegen generate schema/examples/motor_driver.yaml --out target/fcan
  # then, in the firmware:
  mod fcan { include!(\"../target/fcan/fcan_gen.rs\"); }")]
    Generate {
        /// Schema files forming one node.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Output directory (created if missing).
        #[arg(long, short, value_name = "DIR")]
        out: PathBuf,
    },
    /// Show the numbering: blocks, each type's params (with changed-mask bits), topics
    /// and services, their packed sizes and frames on Classical CAN and CAN FD.
    #[command(after_help = "Examples:
  fcan-codegen inspect schema/examples/io_board.yaml
  fcan-codegen inspect schema/examples/io_board.yaml --json | jq '.types[0].topics'")]
    Inspect {
        /// Schema files forming one node.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Compare two versions of a node's schema and name every change that breaks the
    /// wire or moves a changed-mask bit.
    ///
    /// Exit status: 0 when the new version is compatible, 1 when something breaks (or a
    /// schema does not validate).
    #[command(after_help = "Example:
  fcan-codegen diff --old old/node.yaml old/motor.yaml --new node.yaml motor.yaml
  breaking  types.Motor.params.velocity/kp: param `velocity/kp` moved from bit 2 to bit 3 …
  ok        types.Motor.topics.feedback.period_us: 10000 -> 5000
  1 breaking change(s), 1 compatible")]
    Diff {
        /// The old version's files.
        #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
        old: Vec<PathBuf>,
        /// The new version's files.
        #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
        new: Vec<PathBuf>,
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
}

fn report(d: &Diagnostics) -> ExitCode {
    let mut err = std::io::stderr().lock();
    for line in d.iter() {
        let _ = writeln!(err, "{line}");
    }
    ExitCode::from(1)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { files } => match load_files(&files).and_then(|l| {
            let out = generate(&l)?;
            Ok((l, out))
        }) {
            Ok((l, out)) => {
                let blocks: u32 = l.schema.instances.iter().map(|a| a.max_count).sum();
                println!(
                    "ok: {}: {} types, {} blocks, blob {} bytes, sha256 {}",
                    l.schema.node,
                    l.schema.types.len(),
                    blocks,
                    out.blob.len(),
                    out.digest
                );
                ExitCode::SUCCESS
            }
            Err(d) => report(&d),
        },
        Command::Generate { files, out } => {
            let result = load_files(&files).and_then(|l| generate(&l));
            match result {
                Ok(o) => match o.write_to(&out) {
                    Ok(paths) => {
                        for p in paths {
                            println!("wrote {}", p.display());
                        }
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("{}: error: cannot write output: {e}", out.display());
                        ExitCode::from(1)
                    }
                },
                Err(d) => report(&d),
            }
        }
        Command::Inspect { files, json } => match load_files(&files) {
            Ok(l) => {
                let r = inspect::report(&l.schema);
                if json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&r).expect("report serializes")
                    );
                } else {
                    print!("{}", r.to_text());
                }
                ExitCode::SUCCESS
            }
            Err(d) => report(&d),
        },
        Command::Diff { old, new, json } => {
            let (o, n) = (load_files(&old), load_files(&new));
            let (o, n) = match (o, n) {
                (Ok(o), Ok(n)) => (o, n),
                (o, n) => {
                    let mut all = Vec::new();
                    for d in [o.err(), n.err()].into_iter().flatten() {
                        all.extend(d.0);
                    }
                    return report(&Diagnostics(all));
                }
            };
            let changes = diff::diff(&o.schema, &n.schema);
            let compatible = diff::is_compatible(&changes);
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "compatible": compatible,
                        "changes": changes,
                    }))
                    .expect("changes serialize")
                );
            } else {
                for c in &changes {
                    println!("{c}");
                }
                let breaking = changes
                    .iter()
                    .filter(|c| c.severity == diff::Severity::Breaking)
                    .count();
                if changes.is_empty() {
                    println!("no changes");
                } else {
                    println!(
                        "{breaking} breaking change(s), {} compatible",
                        changes.len() - breaking
                    );
                }
            }
            if compatible {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
    }
}
