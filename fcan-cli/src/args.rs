//! What the user typed: the clap structures of every `fcan` command and their help text.
//!
//! Every subcommand's help carries an example, and every number it takes names its unit
//! in its value name (`<SECONDS>`, `<MS>`, `<HZ>`, `<N>`), so `fcan topic pub --help` says
//! how to use it without the README.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
With a daemon (`fcan serve`) running, every command attaches to it and starts at once;
without one, each command is a one-shot master (discovery takes ~2 s).

Examples:
  fcan serve --bus socketcan:can0 &
  fcan --bus socketcan:can0 nodes
  fcan --bus socketcan:can0 topic echo /motor_driver1/motor0/feedback --count 5
  fcan --bus socketcan:can0 topic pub /motor_driver1/motor0/target '{type: 1, value: 2.5}'
  fcan --bus socketcan:can0 service call /motor_driver1/motor0/reset_encoder '{offset: false, value: 0}'
  fcan --bus socketcan:can0 param set motor_driver1.motor0.velocity.kp 0.8
  fcan --bus socketcan:can0 monitor --count 3   (three refreshes; without --count until Ctrl-C)
  fcan serve --bus socketcan:can0     (the bus-owner daemon: fcan serve --help)
  fcan fake --schema schema/examples/motor_driver.yaml --node-id 1   (a fake node of any schema: fcan fake --help)
  fcan update motor_driver1 md-2.1.0.fcimg  (new firmware over the bus: fcan update --help)

Values are JSON or YAML flow syntax. Names: topics and services /<node>/<ns>/<name>,
parameters <node>.<ns>.<param>. `--json` prints one JSON object per line (docs/cli.md
lists the fields of each command).";

/// The help heading of the options that say which bus and how to reach it: every command
/// takes them, each command's help lists them under it, after its own options.
pub const CONNECTION: &str = "Connection";

/// `fcan`: talk to fcan nodes on a CAN or CAN FD bus.
#[derive(Parser, Debug, Clone)]
#[command(name = "fcan", version, about = "Talk to fcan nodes on a CAN or CAN FD bus: discovery, topics, services, parameters.", after_help = AFTER_HELP)]
pub struct Cli {
    /// The bus: `socketcan:IFACE` (FD when the interface MTU is 72), `sim` (only
    /// meaningful inside the demo, which attaches simulated nodes), or the name a daemon
    /// serves it under. Default: the daemon's bus when it serves exactly one, else
    /// `socketcan:can0`.
    #[arg(help_heading = CONNECTION, long, global = true, env = "FCAN_BUS")]
    pub bus: Option<String>,
    /// Output one JSON object per line, for scripts (fields: docs/cli.md).
    #[arg(long, global = true)]
    pub json: bool,
    /// Where downloaded schema blobs are cached (default: $XDG_CACHE_HOME/fcan/blobs).
    #[arg(help_heading = CONNECTION, long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Do not use the on-disk schema cache.
    #[arg(help_heading = CONNECTION, long, global = true)]
    pub no_cache: bool,
    /// How long to wait for nodes to be discovered and provisioned, in milliseconds
    /// (a one-shot master only: a daemon has discovered them already).
    #[arg(help_heading = CONNECTION, long, global = true, default_value_t = 2000, value_name = "MS")]
    pub discover_ms: u64,
    /// Attach to the fcan daemon (`fcan serve`) at this Zenoh endpoint, e.g.
    /// `tcp/192.168.1.5:7447`; fails if it cannot be reached or does not serve `--bus`.
    /// Without it, `fcan` tries the local daemon at tcp/127.0.0.1:7447 and, when none
    /// serves the bus, runs a one-shot master (and says so on stderr).
    #[arg(help_heading = CONNECTION, long, global = true, env = "FCAN_CONNECT", value_name = "ENDPOINT")]
    pub connect: Option<String>,
    /// Never attach to a daemon (not even FCAN_CONNECT's): run a one-shot master that
    /// opens the bus itself, discovers the nodes, runs the command and exits.
    #[arg(help_heading = CONNECTION, long, global = true)]
    pub no_daemon: bool,
    /// An off-the-shelf device on the bus (`robstride:id=1,model=RS03`, `mit:id=3`;
    /// docs/drivers.md), repeatable: a one-shot master drives it as `fcan serve --device`
    /// does, and `fcan decode` decodes its frames with its driver. (A daemon drives its
    /// own devices: give them to `fcan serve`.)
    #[arg(help_heading = CONNECTION, long = "device", global = true, value_name = "DRIVER:KEYS")]
    pub devices: Vec<String>,
    /// A YAML bus file listing devices (`devices: [{driver: robstride, id: 1}, …]`), as
    /// `fcan serve --bus-file` takes it.
    #[arg(help_heading = CONNECTION, long = "bus-file", global = true, value_name = "FILE")]
    pub bus_file: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// One `fcan` command.
#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// List the nodes: id, name, state, phase, bus mode, planned frames, errors, schema.
    #[command(long_about = NODES_ABOUT, after_help = "Example: fcan nodes --json")]
    Nodes,
    /// Topics: list, info, echo, pub, hz.
    #[command(
        subcommand,
        after_help = "Example: fcan topic echo /motor_driver1/motor0/feedback --count 10"
    )]
    Topic(TopicCmd),
    /// Services: list, call.
    #[command(
        subcommand,
        after_help = "Example: fcan service call /motor_driver1/motor0/clear_fault '{}'"
    )]
    Service(ServiceCmd),
    /// Parameters: list, get, set, dump, load.
    #[command(
        subcommand,
        after_help = "Example: fcan param set motor_driver1.motor0.velocity.kp 0.8"
    )]
    Param(ParamCmd),
    /// Schemas: show a node's schema as the master decoded it (`fcan schema NODE` is
    /// `fcan schema show NODE`).
    #[command(
        subcommand,
        after_help = "Example: fcan schema show motor_driver1   (or: fcan schema motor_driver1)"
    )]
    Schema(SchemaCmd),
    /// A refreshing view of nodes, topic rates (messages per second) and bus counters.
    #[command(after_help = "Example: fcan monitor --interval-ms 500 --count 10")]
    Monitor(MonitorArgs),
    /// Decode a candump capture offline, into JSON lines or MCAP.
    ///
    /// A `candump -L` log made by anything (can-utils, fcan's recorder, a logger on the
    /// robot) into the JSON lines of `fcan topic echo --json` or an MCAP file. Needs no
    /// bus and no daemon.
    #[command(after_help = DECODE_HELP)]
    Decode(DecodeArgs),
    /// The frame plan per node; `--dbc FILE` writes it as a DBC.
    ///
    /// Which data frame (identifier) carries which topics, for each node; `--dbc FILE`
    /// writes it as a DBC for cantools, SavvyCAN or Vector tools.
    #[command(after_help = "\
Examples:
  fcan plan                            (every node's frames: id, direction, length, topics)
  fcan plan --node motor_driver1 --json
  fcan plan --dbc robot.dbc            (then: python -c 'import cantools; cantools.database.load_file(\"robot.dbc\")')

DBC cannot describe the frames of a split group (a topic larger than a frame) nor say
that the plan changes when the master re-provisions: the file's comment lists what it
leaves out (docs/recording.md).")]
    Plan(PlanArgs),
    /// Record the bus into an MCAP file, until Ctrl-C.
    ///
    /// Every topic of every running node (and of nodes that come up meanwhile), the raw
    /// frames, the schema blobs, plans and node info; Ctrl-C finishes the file. Open it
    /// in Foxglove or Lichtblick.
    #[command(after_help = "\
Examples:
  fcan record run.mcap                 (until Ctrl-C; progress and size on stderr)
  fcan record run.mcap --duration 10
  fcan record run.mcap --duration 5 --no-frames   (decoded topics only)

With a daemon (`fcan serve`) or the demo running, the recording attaches to it; without
one, a one-shot master discovers the nodes first (their provisioning is then not in the
raw frames: to keep it, capture with `candump -L` and use `fcan decode --mcap`). The
file's layout: docs/recording.md.")]
    Record(RecordArgs),
    /// Write new firmware into a node over the bus, or into every node of a schema.
    ///
    /// The node checks the image (size, board, SHA-256 after reading it back), reboots
    /// into it, and the master provisions it again, restoring the parameters set so far
    /// that the new schema still has and saying which it no longer has. Stopped or cut
    /// off, it resumes: run the same command again and the node keeps what it stored.
    #[command(after_help = UPDATE_HELP)]
    Update(UpdateArgs),
    /// The bus owner: one long-running master per bus, served over Zenoh (fcan serve --help).
    ///
    /// `fcan serve` has options of its own (`--bus` repeats, `--listen`, `--foxglove`,
    /// `--ros2`, `--device`…): `fcan serve --help` (or `fcan help serve`) lists them.
    #[command(
        disable_help_flag = true,
        after_help = "Example: fcan serve --bus socketcan:can0   (every option: fcan serve --help)"
    )]
    Serve(OwnArgs),
    /// Fake nodes of any schema, run by the node runtime on this PC (fcan fake --help).
    ///
    /// `fcan fake` has options of its own (`--schema`, `--node-id`, `--mirror`,
    /// `--device`…): `fcan fake --help` (or `fcan help fake`) lists them.
    #[command(
        disable_help_flag = true,
        after_help = "Example: fcan fake --schema schema/examples/motor_driver.yaml --node-id 1   (every option: fcan fake --help)"
    )]
    Fake(OwnArgs),
}

const NODES_ABOUT: &str = "\
List the nodes: id, name, state, phase, bus mode, planned frames, errors, schema.

Columns:
  STATE    what the node itself last reported (unprovisioned, provisioned, running,
           suspended, fault)
  PHASE    where the master is with it (reading schema, provisioning, running, offline,
           failed: REASON); both say `running` on a healthy node, they differ while the
           master provisions it, when the node stops on its own (fault, suspended), or
           when it has gone silent (offline: the state is the last one heard)
  MODE     the bus mode the master told it to use (classic, fd, fd_brs)
  PLANNED  data frames in the node's frame plan (a count, not traffic: `fcan plan`
           lists them, `fcan monitor` shows the traffic)
  ERRORS   the error summary of the node's last heartbeat: the sum since boot of its
           trouble counters (malformed frames, requests dropped in a bad state,
           transfers dropped half-way, NAKs sent, services busy, master lost), wrapping;
           0 on a healthy bus. The counters one by one: STATS, docs/protocol.md §3.12
           (no fcan command reads them yet). A master that leaves (every one-shot
           command) leaves no `master lost` (docs/protocol.md §5.4)
  SCHEMA   the first 16 hex digits of its schema's SHA-256, and where the master got
           it (downloaded, cache)";

/// The arguments of a command with a parser of its own (`serve`, `fake`): the binary
/// hands them to that parser before this one runs (`fcan_cli::serve::serve_argv`); here
/// they only make the command known (`fcan --help`, `fcan help serve`, the demo's
/// prompt).
#[derive(Args, Debug, Clone, Default)]
pub struct OwnArgs {
    /// Its arguments (`fcan serve --help`, `fcan fake --help`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

const UPDATE_HELP: &str = "\
Examples:
  fcan update io_board3 io_board-2.1.0.fcimg      (an image file: FCANIMG1 + manifest + binary)
  fcan update io_board3 firmware.bin --schema io_board.yaml --version 2.1.0
  fcan update --all-of 'io_board{i}' io_board-2.1.0.fcimg   (every node of that schema, in turn)
  fcan update io_board7 --schema io_board_v2.yaml --version 2.0.0
                                                  (a fake node: its firmware is its schema blob)
  fcan update firmware.bin --schema io_board.yaml --version 2.1.0 --write-image io_board-2.1.0.fcimg
                                                  (make the image file, offline)
  fcan update io_board3 --abort                   (drop the transfer; the old firmware runs on)

Only a node built with the runtime's `update` feature takes updates (`fcan nodes` shows
its firmware version); by default a node refuses while RUNNING unless its application
agrees (motors disabled). With --all-of, nodes already announcing the image's schema are
skipped, and the first failure stops the rest (an image that fails on one board is not
sent to the others). Attached to a daemon the update runs in the daemon: a client cut off
(Ctrl-C) may run the same command again, and follows the same update to its end.
Progress goes to the terminal; --json prints one object per line:
{\"event\": \"progress\" | \"done\" | \"skipped\" | \"aborted\", ...} (docs/cli.md).";

/// `fcan update` options.
#[derive(Args, Debug, Clone)]
pub struct UpdateArgs {
    /// `NODE IMAGE` (node name or id, then the image file); with --all-of only `IMAGE`.
    /// The image may be left out with --schema: the image is then the schema blob itself
    /// (what a fake node runs).
    #[arg(value_name = "NODE IMAGE", num_args = 0..=2)]
    pub targets: Vec<String>,
    /// Update every node whose schema is this: its name as written (`io_board{i}`) or
    /// the first hex digits (at least 8) of the SHA-256 nodes announce now.
    #[arg(long, value_name = "SCHEMA")]
    pub all_of: Option<String>,
    /// The schema the new firmware announces (YAML files, or its blob), for a raw
    /// firmware binary (an image file names it already).
    #[arg(long, value_name = "FILE")]
    pub schema: Vec<PathBuf>,
    /// The version string the new firmware reports (at most 32 bytes, e.g. 2.1.0),
    /// needed for a raw binary: an image file names it already.
    #[arg(long, value_name = "TEXT")]
    pub version: Option<String>,
    /// Share of the bus the image may take, in percent of its bit time: other nodes'
    /// data frames win arbitration anyway; the share leaves room for the rest.
    #[arg(long, default_value_t = 25.0, value_name = "PERCENT")]
    pub bus_share: f64,
    /// Write the image file (FCANIMG1: manifest + bytes) made of a raw binary with
    /// --schema and --version, instead of updating anything: no bus, no daemon. Give only
    /// the binary (no node), or nothing for a fake node's image (its schema blob).
    #[arg(long, value_name = "FILE")]
    pub write_image: Option<PathBuf>,
    /// Tell the node to drop the update transfer it holds (ABORT) and end the update of
    /// it that runs, if any; it keeps running the firmware it has. Give only the node.
    #[arg(long)]
    pub abort: bool,
}

/// `fcan record` options.
#[derive(Args, Debug, Clone)]
pub struct RecordArgs {
    /// The MCAP file to write (replaced if it exists).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Stop after this many seconds (fractions allowed) instead of at Ctrl-C.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Leave the raw frames out (only the decoded topics).
    #[arg(long)]
    pub no_frames: bool,
}

/// `fcan plan` options.
#[derive(Args, Debug, Clone, Default)]
pub struct PlanArgs {
    /// Only this node (name or id).
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// Write the plan as a DBC file instead of printing it.
    #[arg(long, value_name = "FILE")]
    pub dbc: Option<PathBuf>,
}

const DECODE_HELP: &str = "\
What the capture must hold: the nodes' ANNOUNCEs and the master's FRAME_DEFINEs (start
candump before the master provisions the nodes: before `fcan serve`, or power the nodes
up while it runs). Each node's schema comes from the SCHEMA_DATA in the capture or, when
the master had it cached, from the blob cache (--cache-dir; --no-cache: the capture only).
What cannot be decoded is counted on stderr, never guessed.

Examples:
  candump -L can0 > run.log            (in another terminal, while the robot runs)
  fcan decode run.log                  (JSON lines: {\"topic\", \"t\", \"value\"}; t = capture time, s)
  fcan decode run.log --topic /motor_driver1/motor0/feedback | jq .value.position
  fcan decode run.log --mcap run.mcap  (open in Foxglove or Lichtblick)
  candump -L can0 | fcan decode -      (live, from a pipe)";

/// `fcan decode` options.
#[derive(Args, Debug, Clone)]
pub struct DecodeArgs {
    /// The capture: a `candump -L` log file, or `-` for standard input.
    #[arg(value_name = "CAPTURE")]
    pub capture: PathBuf,
    /// Write an MCAP file instead of JSON lines (one channel per topic, the raw frames,
    /// the schema blobs and plans: docs/recording.md).
    #[arg(long, value_name = "FILE")]
    pub mcap: Option<PathBuf>,
    /// Only this topic (repeatable; JSON lines only — an MCAP file keeps every topic).
    #[arg(long, value_name = "NAME")]
    pub topic: Vec<String>,
}

/// Limits for commands that stream.
#[derive(Args, Debug, Clone, Default)]
pub struct StreamArgs {
    /// Stop after this many messages.
    #[arg(long, short = 'n', value_name = "N")]
    pub count: Option<u64>,
    /// Stop after this many seconds (fractions allowed: 0.5).
    #[arg(long, short = 't', value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

/// `fcan topic …`
#[derive(Subcommand, Debug, Clone)]
pub enum TopicCmd {
    /// List topics with direction, rate and fields.
    #[command(after_help = "Example: fcan topic list --json")]
    List,
    /// Show a topic's direction, rate, size in bytes, and fields with their types.
    #[command(after_help = "Example: fcan topic info /motor_driver1/motor0/feedback")]
    Info {
        /// Topic name, e.g. /motor_driver1/motor0/feedback.
        name: String,
    },
    /// Print a topic's values as they arrive, with the time in seconds since the command
    /// started.
    #[command(after_help = "Example: fcan topic echo /motor_driver1/motor0/feedback --count 10")]
    Echo {
        /// Topic name.
        name: String,
        /// Limits.
        #[command(flatten)]
        stream: StreamArgs,
    },
    /// Publish a value to an m2s topic.
    #[command(
        after_help = "Example: fcan topic pub /motor_driver1/motor0/target '{type: 1, value: 2.5}' --rate 100 --count 500\n(500 publications at 100 Hz: 5 seconds)"
    )]
    Pub {
        /// Topic name.
        name: String,
        /// The value (JSON or YAML flow syntax).
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// Publish this many times (default once).
        #[arg(long, short = 'n', default_value_t = 1, value_name = "N")]
        count: u64,
        /// Publications per second (Hz) when publishing more than once.
        #[arg(long, default_value_t = 10.0, value_name = "HZ")]
        rate: f64,
    },
    /// Measure a topic's rate in messages per second (Hz) and the gaps between them.
    #[command(
        after_help = "Example: fcan topic hz /motor_driver1/motor0/feedback --window 5\n         fcan topic hz /motor_driver1/motor0/feedback -n 100   (the first 100 messages, at most 2 s)"
    )]
    Hz {
        /// Topic name.
        name: String,
        /// Measuring window in seconds (the longest it measures).
        #[arg(long, short = 'w', default_value_t = 2.0, value_name = "SECONDS")]
        window: f64,
        /// Stop after this many messages (within the window).
        #[arg(long, short = 'n', value_name = "N")]
        count: Option<u64>,
    },
}

/// `fcan service …`
#[derive(Subcommand, Debug, Clone)]
pub enum ServiceCmd {
    /// List services with their request and response fields.
    #[command(after_help = "Example: fcan service list --json")]
    List,
    /// Call a service and print the response.
    #[command(
        after_help = "Example: fcan service call /motor_driver1/motor0/reset_encoder '{offset: true, value: 0}'"
    )]
    Call {
        /// Service name.
        name: String,
        /// The request (JSON or YAML flow syntax); `{}` for an empty request.
        #[arg(default_value = "{}", allow_hyphen_values = true)]
        value: String,
    },
}

/// `fcan param …`
#[derive(Subcommand, Debug, Clone)]
pub enum ParamCmd {
    /// List parameters with type, default and range (in the parameter's own unit, as
    /// the schema declares it).
    #[command(after_help = "Example: fcan param list")]
    List,
    /// Read a parameter from its node.
    #[command(after_help = "Example: fcan param get motor_driver1.motor0.velocity.kp")]
    Get {
        /// Parameter name, e.g. motor_driver1.motor0.velocity.kp.
        name: String,
    },
    /// Write a parameter (range-checked here and on the node; restored after reboots).
    #[command(after_help = "Example: fcan param set motor_driver1.motor0.velocity.kp 0.8")]
    Set {
        /// Parameter name.
        name: String,
        /// The value, in the parameter's unit (`fcan param list` shows its range); a
        /// negative one as it is (`-1`, `-.inf`).
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Read every parameter (optionally only those starting with PREFIX) as YAML.
    #[command(after_help = "Example: fcan param dump motor_driver1.motor0. > motor0.yaml")]
    Dump {
        /// Only names starting with this.
        prefix: Option<String>,
    },
    /// Write every parameter in a YAML file of `name: value` lines (as `dump` prints).
    #[command(after_help = "Example: fcan param load motor0.yaml")]
    Load {
        /// The file.
        file: PathBuf,
    },
}

/// `fcan schema …`
#[derive(Subcommand, Debug, Clone)]
pub enum SchemaCmd {
    /// Show a node's schema (by node id or name); rates as `period_us`, in microseconds.
    #[command(after_help = "Example: fcan schema show motor_driver1   (or: fcan schema show 3)")]
    Show {
        /// Node id or name.
        node: String,
    },
    /// `fcan schema NODE`: the same as `fcan schema show NODE`.
    #[command(external_subcommand)]
    Node(Vec<String>),
}

/// `fcan monitor` options.
#[derive(Args, Debug, Clone)]
pub struct MonitorArgs {
    /// Refresh period in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub interval_ms: u64,
    /// Stop after this many refreshes.
    #[arg(long, short = 'n', value_name = "N")]
    pub count: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every command, `fcan` itself included, with its path (`fcan topic pub`).
    fn all(cmd: &clap::Command, path: String, acc: &mut Vec<(String, clap::Command)>) {
        acc.push((path.clone(), cmd.clone()));
        // clap's generated `help` subcommands are not ours.
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            all(sub, format!("{path} {}", sub.get_name()), acc);
        }
    }

    /// Issue 33 item 5: a negative number is a value, not an option, wherever a value
    /// is typed; options around it still count.
    #[test]
    fn negative_numbers_are_values() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("fcan").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        };
        let cli = parse(&["param", "set", "md3.motor0.velocity.kp", "-1", "--json"]);
        assert!(cli.json);
        assert!(
            matches!(&cli.command, Command::Param(ParamCmd::Set { value, .. }) if value == "-1")
        );
        let cli = parse(&["--json", "param", "set", "md3.motor0.velocity.kp", "-.inf"]);
        assert!(
            matches!(&cli.command, Command::Param(ParamCmd::Set { value, .. }) if value == "-.inf")
        );
        let cli = parse(&["topic", "pub", "/md3/motor0/target", "-2.5", "--count", "3"]);
        assert!(matches!(
            &cli.command,
            Command::Topic(TopicCmd::Pub { value, count: 3, .. }) if value == "-2.5"
        ));
        let cli = parse(&["service", "call", "/md3/motor0/reset_encoder", "-1e-3"]);
        assert!(matches!(
            &cli.command,
            Command::Service(ServiceCmd::Call { value, .. }) if value == "-1e-3"
        ));
    }

    /// Issue 38 item 14: every command's help lists the connection flags apart, under
    /// one `Connection` heading after its own options — the same layout everywhere.
    #[test]
    fn connection_flags_are_grouped_under_one_heading() {
        let mut root = Cli::command();
        root.build();
        let mut cmds = Vec::new();
        all(&root, "fcan".into(), &mut cmds);
        for (path, mut cmd) in cmds {
            let help = cmd.render_help().to_string();
            let at = help
                .find(&format!("\n{CONNECTION}:\n"))
                .unwrap_or_else(|| panic!("`{path} --help` has no {CONNECTION} heading:\n{help}"));
            let (own, connection) = help.split_at(at);
            for flag in [
                "--bus <BUS>",
                "--connect <ENDPOINT>",
                "--no-daemon",
                "--discover-ms <MS>",
                "--device <DRIVER:KEYS>",
                "--bus-file <FILE>",
                "--cache-dir <DIR>",
                "--no-cache",
            ] {
                assert!(connection.contains(flag), "`{path} --help`: {flag}\n{help}");
                assert!(
                    !own.contains(flag),
                    "`{path} --help`: {flag} ungrouped\n{help}"
                );
            }
        }
    }

    /// Issue 38 item 11: `fcan schema NODE` is `fcan schema show NODE`.
    #[test]
    fn schema_node_is_schema_show_node() {
        let cli = Cli::try_parse_from(["fcan", "schema", "md3"]).unwrap();
        assert!(
            matches!(&cli.command, Command::Schema(SchemaCmd::Node(w)) if w == &["md3"]),
            "{:?}",
            cli.command
        );
        let cli = Cli::try_parse_from(["fcan", "schema", "show", "md3"]).unwrap();
        assert!(matches!(&cli.command, Command::Schema(SchemaCmd::Show { node }) if node == "md3"));
    }

    #[test]
    fn every_subcommand_has_an_example_and_every_number_a_unit() {
        let mut root = Cli::command();
        root.build();
        let mut cmds = Vec::new();
        all(&root, "fcan".into(), &mut cmds);
        assert!(cmds.len() > 15, "{}", cmds.len());
        for (path, mut cmd) in cmds {
            let help = cmd.render_long_help().to_string();
            assert!(help.contains("Example"), "`{path} --help` has no example");
            for arg in cmd.get_arguments() {
                let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
                if arg.is_positional() || !takes_value {
                    continue;
                }
                let id = arg.get_id().as_str();
                if matches!(id, "bus" | "cache_dir" | "connect") {
                    continue;
                }
                let unit = arg
                    .get_value_names()
                    .and_then(|v| v.first())
                    .map(|v| v.as_str().to_string());
                // A file or a name is not a number: it names what it is instead.
                if matches!(
                    unit.as_deref(),
                    Some("FILE" | "NAME" | "NODE" | "DRIVER:KEYS" | "SCHEMA" | "TEXT")
                ) {
                    continue;
                }
                assert!(
                    matches!(
                        unit.as_deref(),
                        Some("SECONDS" | "MS" | "HZ" | "N" | "PERCENT")
                    ),
                    "`{path} --{id}` does not say its unit: {unit:?}"
                );
            }
        }
    }
}
