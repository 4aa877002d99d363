//! The `fcan-codegen` command line.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fcan_codegen::{diff, generate, inspect, load_files, Diagnostics};

/// The fcan schema compiler: checks YAML schemas, writes the schema blob, its SHA-256 and
/// the Rust module for fcan-runtime-nostd (or C for fcan-node-c), shows numbering tables
/// and compares versions.
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
  fcan-codegen c node.yaml motor.type.yaml --out build/fcan
  fcan-codegen inspect node.yaml motor.type.yaml --json
  fcan-codegen diff --old v1/*.yaml --new v2/*.yaml
  fcan-codegen ros-package node.yaml motor.type.yaml --out ros_ws/src

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
        /// Generate `App::update` for firmware updates over the bus (the firmware
        /// enables fcan-runtime-nostd's `update` feature; docs/protocol.md §3.14).
        #[arg(long)]
        firmware_updates: bool,
    },
    /// Validate and write C99 for the node on the C API of fcan-node-c (fcan.h):
    /// DIR/fcan_<node>.h, DIR/fcan_<node>.c, DIR/schema.bin and DIR/schema.sha256.
    ///
    /// The header declares the node's descriptor, its RAM size (FCAN_<NODE>_RAM_BYTES,
    /// an fcan_<node>_ram_t to give fcan_<node>_init), per block type one struct per
    /// topic, request and response with _pack/_unpack, typed param reads, topic
    /// publish/take, and the handlers the application must define: one per service and
    /// fcan_<node>_<type>_params_changed per type with params (a missing one is a link
    /// error). Names: node `io_board{i}` → fcan_io_board_, type `DigitalOut` →
    /// digital_out, a `/` in a name → `__`. The .c needs only fcan.h, memcpy and memset
    /// and builds with -std=c99 -Wall -Wextra -Wpedantic -Wconversion. Nothing is
    /// written when the schema has errors (FILE:LINE:COL: error: MESSAGE, as `check`).
    #[command(after_help = "Example:
  fcan-codegen c schema/examples/io_board.yaml --out build/fcan
  # then compile build/fcan/fcan_io_board.c with your sources
  # (-I build/fcan -I fcan-node-c/include), define the handlers the header
  # declares, and link libfcan_node.a.

With CMake, include fcan-node-c/cmake/fcan.cmake and call
  fcan_generate_schema(TARGET my-firmware SCHEMA node.yaml motor.type.yaml)
which runs this at build time; make: fcan-node-c/make/fcan.mk. The guide:
docs/firmware-c.md.")]
    C {
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
    /// Write ROS 2 interface packages (.msg/.srv, package.xml, CMakeLists.txt) for the
    /// ROS types the bridge builds from these nodes' schemas, so `colcon build` once
    /// lets `ros2 topic echo` decode what `fcan serve --ros2` publishes.
    ///
    /// A topic or service whose `ros.type` names a bundled standard interface
    /// (std_msgs, std_srvs, geometry_msgs, sensor_msgs, trajectory_msgs, ...) needs no
    /// package; fcan's own `fcan_msgs` (the bridge's `node_info` service) is always
    /// written. One that names another type (`fibril_control_msgs/msg/Feedback`) gets
    /// it built from its fcan fields, sorted by name; one without `ros:` gets a
    /// generated type in `fcan_<node>_msgs`. Give every node of the robot in one run
    /// (the first node's files, then `--node FILE...` per further node): nodes that
    /// name one custom type must agree on it, and the packages are written once.
    ///
    /// Prints each topic's and service's ROS type and RIHS01 hash; notes (a field the
    /// ROS type does not carry, a `ros:` that could not be honoured and the type used
    /// instead) go to stderr. A package directory this command did not write is never
    /// touched. The mapping: docs/ros2.md.
    #[command(after_help = "Examples:
  fcan-codegen ros-package schema/examples/motor_driver.yaml --out ros_ws/src
  fcan-codegen ros-package md.node.yaml md.instances.yaml md_motor.type.yaml \\
      --node robstride.node.yaml robstride.instances.yaml robstride_motor.type.yaml \\
      --out ros_ws/src
  cd ros_ws && colcon build && source install/setup.bash")]
    RosPackage {
        /// Schema files forming the first node.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Schema files forming one more node (repeat for each node).
        #[arg(long = "node", num_args = 1.., action = clap::ArgAction::Append, value_name = "FILE")]
        // Flat here; main() reads the grouping from clap's occurrences.
        nodes: Vec<PathBuf>,
        /// The directory the packages are written into (a colcon workspace's `src`).
        #[arg(long, short, value_name = "DIR")]
        out: PathBuf,
    },
}

fn ros_package(nodes: Vec<Vec<PathBuf>>, out: &std::path::Path) -> ExitCode {
    use fcan_ros2::{mapping, package, rihs, Interfaces};
    let mut store = Interfaces::bundled();
    let mut mapped = Vec::new();
    let mut failed = false;
    for files in &nodes {
        match load_files(files).and_then(|l| generate(&l).map(|_| l)) {
            Ok(l) => mapped.push(mapping::map_schema(&l.schema, &mut store)),
            Err(d) => {
                report(&d);
                failed = true;
            }
        }
    }
    if failed {
        return ExitCode::from(1);
    }
    let origin = |o: mapping::Origin| match o {
        mapping::Origin::Bundled => "bundled",
        mapping::Origin::Custom => "custom",
        _ => "generated",
    };
    let hash = |name: &str| {
        rihs::type_hash(&store, name).map_or_else(|e| e.to_string(), |h| h.to_string())
    };
    for m in &mapped {
        for t in &m.topics {
            println!(
                "{}.{}: {} ({}) {}",
                t.block,
                t.topic,
                t.ros_type,
                origin(t.origin),
                hash(&t.ros_type)
            );
        }
        for s in &m.services {
            println!(
                "{}.{}: {} ({}) {}",
                s.block,
                s.service,
                s.ros_type,
                origin(s.origin),
                hash(&s.ros_type)
            );
        }
        for n in &m.notes {
            eprintln!("note: {n}");
        }
    }
    // Never empty: fcan's own `fcan_msgs` (the bridge's node_info service) is always in.
    for p in package::packages(&store, &mapped) {
        match p.write(out) {
            Ok(dir) => println!(
                "wrote {} ({} messages, {} services)",
                dir.display(),
                p.messages.len(),
                p.services.len()
            ),
            Err(e) => {
                eprintln!("{}: error: {e}", out.display());
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}

fn report(d: &Diagnostics) -> ExitCode {
    let mut err = std::io::stderr().lock();
    for line in d.iter() {
        let _ = writeln!(err, "{line}");
    }
    ExitCode::from(1)
}

fn main() -> ExitCode {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::RosPackage { files, out, .. } => {
            // Each `--node` occurrence is one node's files.
            let mut all = vec![files];
            if let Some(occurrences) = matches
                .subcommand_matches("ros-package")
                .and_then(|m| m.get_occurrences::<PathBuf>("nodes"))
            {
                all.extend(occurrences.map(|o| o.cloned().collect::<Vec<_>>()));
            }
            ros_package(all, &out)
        }
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
        Command::Generate {
            files,
            out,
            firmware_updates,
        } => {
            let mut opts = fcan_codegen::Options::default();
            opts.firmware_updates = firmware_updates;
            let result = load_files(&files).and_then(|l| fcan_codegen::generate_with(&l, &opts));
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
        Command::C { files, out } => {
            match load_files(&files).and_then(|l| fcan_codegen::c::generate(&l)) {
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
