//! The faces a bus is served through besides the remote API: Foxglove, ROS 2 and the
//! ROS 2 joints (docs/foxglove.md, docs/ros2.md). One place for all of them: their flags
//! ([`FaceArgs`], flattened into `fcan serve`, `fcan fake` and the demo), what is
//! checked before anything opens ([`FaceArgs::check`]), and the one function that
//! starts them on a bus ([`start`]) and hands back what stops them in order
//! ([`Faces::stop`]).
//!
//! A new face is a flag here, a block in [`start`] and a field in [`Faces`]: every
//! command that serves a bus gets it (docs/architecture.md, "How to add a face").

use std::net::SocketAddr;
use std::time::Duration;

use fcan_master::Master;
use fcan_ros2_bridge::joints::{JointsBridge, JointsOptions, JointsStatus};
use tracing::Instrument;

use crate::CliError;

/// The faces' flags, the same in every command that serves a bus.
#[derive(clap::Args, Debug, Clone)]
pub struct FaceArgs {
    /// Also serve the bus as a Foxglove WebSocket on this address (e.g. 127.0.0.1:8765),
    /// for Foxglove or Lichtblick (docs/foxglove.md). One bus only: a Foxglove layout
    /// opens one connection, so run one `fcan serve` per bus to view several.
    #[arg(long, value_name = "ADDR")]
    pub foxglove: Option<SocketAddr>,
    /// Also put every running node's topics in a ROS 2 graph over DDS (docs/ros2.md):
    /// `/motor_driver1/motor0/feedback` is a ROS 2 topic, commands published from ROS
    /// reach the nodes. No ROS installation needed.
    #[arg(long)]
    pub ros2: bool,
    /// The DDS domain of `--ros2` (default: $ROS_DOMAIN_ID, else 0).
    #[arg(long, value_name = "N", requires = "ros2")]
    pub ros2_domain: Option<u16>,
    /// How far `--ros2` reaches: `localhost` (this machine only, the default) or
    /// `subnet` (every network interface, as stock ROS 2 does).
    #[arg(
        long,
        value_name = "localhost|subnet",
        default_value = "localhost",
        requires = "ros2"
    )]
    pub ros2_range: fcan_ros2_bridge::rustdds_backend::Range,
    /// How `--ros2` frames service requests and replies, as the ROS 2 programs calling
    /// them do: `cyclonedds` (rmw_cyclonedds) or `fastdds` (rmw_fastrtps, stock ROS 2's
    /// default). Default: from $RMW_IMPLEMENTATION, else fastdds.
    #[arg(long, value_name = "cyclonedds|fastdds", requires = "ros2")]
    pub ros2_rmw: Option<fcan_ros2_bridge::Framing>,
    /// The ROS 2 release of the programs on the graph, for the layout of the node list
    /// `ros2 node list` reads (humble, iron, jazzy, kilted). Default: from $ROS_DISTRO,
    /// else jazzy.
    #[arg(long, value_name = "RELEASE", requires = "ros2")]
    pub ros2_distro: Option<fcan_ros2_bridge::Distro>,
    /// With `--ros2`: run a control loop on the joints of this cycle configuration (YAML,
    /// docs/control.md; its `rate_hz` is the loop's and the states' rate) and serve them
    /// for ros2_control (topic_based_ros2_control's TopicBasedSystem, docs/ros2.md):
    /// `sensor_msgs/msg/JointState` states out, JointState commands in. A fault (a node
    /// lost, stale feedback) stops the joints until `/fcan_joints/clear_fault` is called.
    /// With several buses, name the bus: `BUS=FILE`.
    #[arg(long, value_name = "[BUS=]FILE", requires = "ros2")]
    pub joints: Option<String>,
    /// Where `--joints` publishes the joint states (TopicBasedSystem's
    /// `joint_states_topic`).
    #[arg(
        long,
        value_name = "TOPIC",
        default_value = fcan_ros2_bridge::joints::DEFAULT_STATES_TOPIC,
        requires = "joints"
    )]
    pub joints_states_topic: String,
    /// Where `--joints` takes JointState commands from (TopicBasedSystem's
    /// `joint_commands_topic`).
    #[arg(
        long,
        value_name = "TOPIC",
        default_value = fcan_ros2_bridge::joints::DEFAULT_COMMANDS_TOPIC,
        requires = "joints"
    )]
    pub joints_commands_topic: String,
    /// Stop sending `--joints` commands when none arrived for this long (the nodes'
    /// own command watchdogs then stop the joints); a new command resumes. Default:
    /// the last command holds, as a ros2_control hardware interface holds it.
    #[arg(long, value_name = "MS", requires = "joints")]
    pub joints_command_timeout: Option<u64>,
}

impl Default for FaceArgs {
    /// No face: what a command serves when no face flag is given.
    fn default() -> Self {
        FaceArgs {
            foxglove: None,
            ros2: false,
            ros2_domain: None,
            ros2_range: fcan_ros2_bridge::rustdds_backend::Range::Localhost,
            ros2_rmw: None,
            ros2_distro: None,
            joints: None,
            joints_states_topic: fcan_ros2_bridge::joints::DEFAULT_STATES_TOPIC.into(),
            joints_commands_topic: fcan_ros2_bridge::joints::DEFAULT_COMMANDS_TOPIC.into(),
            joints_command_timeout: None,
        }
    }
}

/// What [`FaceArgs::check`] found: the faces' configuration, checked, before any bus
/// opens.
#[derive(Debug, Clone, Default)]
pub struct FacePlan {
    /// `--joints`: the bus it runs on and its cycle configuration.
    pub joints: Option<(String, fcan_cycle::CycleConfig)>,
}

impl FaceArgs {
    /// Checks the flags against the buses to serve (name, spec), so a bad flag or file
    /// fails before anything starts: Foxglove serves one bus; the joints' topics are
    /// ROS names and differ; the joints' file reads and checks ([`joints_config`]).
    pub fn check(&self, buses: &[(String, String)]) -> Result<FacePlan, CliError> {
        if self.foxglove.is_some() && buses.len() > 1 {
            return Err(CliError::Usage(
                "--foxglove serves one bus: a Foxglove layout opens one connection. Run one `fcan serve --bus … --foxglove ADDR` per bus, each on its own port".into(),
            ));
        }
        let joints = match &self.joints {
            Some(arg) => {
                for t in [&self.joints_states_topic, &self.joints_commands_topic] {
                    fcan_ros2_bridge::joints::check_topic(t)
                        .map_err(|e| CliError::Usage(format!("--joints topic {e}")))?;
                }
                if self.joints_states_topic == self.joints_commands_topic {
                    return Err(CliError::Usage(
                        "--joints-states-topic and --joints-commands-topic are the same topic"
                            .into(),
                    ));
                }
                Some(joints_config(arg, buses)?)
            }
            None => None,
        };
        Ok(FacePlan { joints })
    }
}

/// The `--joints [BUS=]FILE` of `fcan serve`: the bus it runs on (the only one, or the
/// one named) and its cycle configuration, read as YAML and checked
/// ([`fcan_cycle::CycleConfig::check`]), so a bad file fails before anything
/// starts.
pub fn joints_config(
    arg: &str,
    buses: &[(String, String)],
) -> Result<(String, fcan_cycle::CycleConfig), CliError> {
    let names: Vec<&str> = buses.iter().map(|(n, _)| n.as_str()).collect();
    let (bus, path) = match arg.split_once('=') {
        Some((b, p)) if names.contains(&b) => (b.to_string(), p),
        Some((b, _))
            if fcan_remote::keys::is_bus_name(b) && !std::path::Path::new(arg).exists() =>
        {
            return Err(CliError::Usage(format!(
                "--joints {arg}: no bus `{b}` (buses: {})",
                names.join(", ")
            )))
        }
        _ => match names.as_slice() {
            [one] => (one.to_string(), arg),
            _ => {
                return Err(CliError::Usage(format!(
                    "--joints {arg}: several buses ({}): name one, e.g. `--joints {}={arg}`",
                    names.join(", "),
                    names.first().copied().unwrap_or("bus")
                )))
            }
        },
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("--joints {path}: {e}")))?;
    let config: fcan_cycle::CycleConfig = serde_yaml_ng::from_str(&text)
        .map_err(|e| CliError::Usage(format!("--joints {path}: {e}")))?;
    config
        .check()
        .map_err(|e| CliError::Usage(format!("--joints {path}: {e}")))?;
    Ok((bus, config))
}

/// The DDS domain: `--ros2-domain`, else `$ROS_DOMAIN_ID`, else 0.
pub fn ros2_domain(flag: Option<u16>) -> Result<u16, String> {
    if let Some(d) = flag {
        return Ok(d);
    }
    match std::env::var("ROS_DOMAIN_ID") {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| format!("ROS_DOMAIN_ID={v} is not a domain number")),
        _ => Ok(0),
    }
}

/// The faces of one bus, running. Dropping them stops them at once;
/// [`stop`](Faces::stop) stops them in order (the joints' safe stop first).
#[derive(Default)]
pub struct Faces {
    foxglove: Option<fcan_foxglove::FoxgloveServer>,
    ros2: Option<fcan_ros2_bridge::Ros2Bridge>,
    joints: Option<(JointsBridge, Option<tokio::task::JoinHandle<()>>)>,
    lines: Vec<String>,
}

impl std::fmt::Debug for Faces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faces")
            .field("lines", &self.lines)
            .finish_non_exhaustive()
    }
}

impl Faces {
    /// The Foxglove server, with `--foxglove`.
    pub fn foxglove(&self) -> Option<&fcan_foxglove::FoxgloveServer> {
        self.foxglove.as_ref()
    }

    /// The ROS 2 bridge, with `--ros2`.
    pub fn ros2(&self) -> Option<&fcan_ros2_bridge::Ros2Bridge> {
        self.ros2.as_ref()
    }

    /// What the faces serve, a line each, to print (`Foxglove: ws://…`, `ROS 2: …`,
    /// `ROS 2 joints: …`): where a user (or a script waiting for them) finds them.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// Stops the faces: an active joints loop first, sending its safe stop while the
    /// bus is still owned, and putting its last status (`stopped`); then the others.
    pub async fn stop(self) {
        let Faces {
            foxglove,
            ros2,
            joints,
            ..
        } = self;
        if let Some((j, status)) = joints {
            j.stop().await;
            if let Some(status) = status {
                let _ = tokio::time::timeout(Duration::from_secs(1), status).await;
            }
        }
        drop(foxglove);
        drop(ros2);
    }
}

/// Starts the faces `args` asks for on bus `bus` of `master`: one function for `fcan
/// serve`, `fcan fake` and the demo. `program` names the server to Foxglove clients
/// (`fcan serve`, `fcan demo`); `session` is the remote API's Zenoh session, where the
/// joints' status is served (`fcan/<bus>/joints/status`, docs/remote.md); `plan` is
/// what [`FaceArgs::check`] found. Call it inside the bus's span: the faces'
/// diagnostics name the bus.
pub async fn start(
    args: &FaceArgs,
    plan: &FacePlan,
    bus: &str,
    master: &Master,
    session: Option<&zenoh::Session>,
    program: &str,
) -> Result<Faces, CliError> {
    let span = tracing::Span::current();
    let mut faces = Faces::default();
    if let Some(addr) = args.foxglove {
        let mut fopts = fcan_foxglove::FoxgloveOptions::default();
        fopts.name = format!("{program} (bus {bus})");
        let fox = fcan_foxglove::FoxgloveServer::start(master.clone(), addr, fopts)
            .instrument(span.clone())
            .await
            .map_err(|e| CliError::Usage(format!("--foxglove {addr}: {e}")))?;
        faces.lines.push(format!(
            "Foxglove: {} (open in Lichtblick/Foxglove: Open connection → Foxglove WebSocket → this URL)",
            fox.url()
        ));
        faces.foxglove = Some(fox);
    }
    if args.ros2 {
        let domain = ros2_domain(args.ros2_domain).map_err(CliError::Usage)?;
        let dds = fcan_ros2_bridge::rustdds_backend::RustDds::new(domain, args.ros2_range)
            .map_err(|e| CliError::Usage(format!("--ros2: {e}")))?;
        let mut ropts = fcan_ros2_bridge::Ros2Options::default();
        if let Some(f) = args.ros2_rmw {
            ropts.framing = f;
        }
        if let Some(d) = args.ros2_distro {
            ropts.distro = d;
        }
        // The bridge's own node (its /rosout and /parameter_events), one per bus: a
        // ROS name takes letters, digits and `_` only.
        ropts.node_name = format!(
            "fcan_{}",
            bus.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect::<String>()
        );
        if let Some((_, config)) = plan.joints.as_ref().filter(|(b, _)| b == bus) {
            let mut jopts = JointsOptions::default();
            jopts.states_topic = args.joints_states_topic.clone();
            jopts.commands_topic = args.joints_commands_topic.clone();
            jopts.command_timeout = args.joints_command_timeout.map(Duration::from_millis);
            jopts.framing = ropts.framing;
            let j = JointsBridge::start(master.clone(), &dds, config.clone(), jopts)
                .map_err(|e| CliError::Usage(format!("--joints: {e}")))?;
            faces.lines.push(format!(
                "ROS 2 joints: {} at {} Hz; states on {}, commands from {}, status {}, {} (docs/ros2.md)",
                config
                    .joints
                    .iter()
                    .map(|j| j.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                config.rate_hz,
                args.joints_states_topic,
                args.joints_commands_topic,
                fcan_ros2_bridge::joints::STATUS_TOPIC,
                fcan_ros2_bridge::joints::CLEAR_FAULT_SERVICE,
            ));
            let status = match session {
                Some(s) => Some(
                    serve_joints_status(s, bus, j.watch())
                        .await
                        .map_err(|e| CliError::Usage(format!("--joints: {e}")))?,
                ),
                None => None,
            };
            faces.joints = Some((j, status));
        }
        let bridge = fcan_ros2_bridge::Ros2Bridge::start(master.clone(), dds, ropts)
            .instrument(span.clone())
            .await;
        faces.lines.push(format!(
            "ROS 2: DDS domain {domain}, {:?}; {} topics now (ros2 topic list; docs/ros2.md)",
            args.ros2_range,
            bridge.routes().len()
        ));
        faces.ros2 = Some(bridge);
    }
    Ok(faces)
}

/// Serves the joints' status of bus `bus` on `fcan_remote::keys::joints_status`
/// (`docs/remote.md`; JSON [`crate::views::JointsView`]): puts each value
/// `watch` gives (the current one first), answers queries with the latest, until the
/// joints are gone (their last value put, `stopped`).
async fn serve_joints_status(
    session: &zenoh::Session,
    bus: &str,
    mut watch: tokio::sync::watch::Receiver<JointsStatus>,
) -> Result<tokio::task::JoinHandle<()>, zenoh::Error> {
    // Bus names are checked key-safe when the daemon starts (`bus_name`).
    let key = fcan_remote::keys::joints_status(bus)
        .ok_or_else(|| zenoh::Error::from(format!("bus name `{bus}` is not key-safe")))?;
    let queryable = session.declare_queryable(&key).await?;
    let session = session.clone();
    let json = |s: &JointsStatus| {
        serde_json::to_string(&crate::views::JointsView::of(s)).unwrap_or_default()
    };
    Ok(tokio::spawn(async move {
        let mut latest = json(&watch.borrow_and_update());
        let _ = session.put(&key, latest.clone()).await;
        loop {
            tokio::select! {
                q = queryable.recv_async() => match q {
                    Ok(q) => {
                        let _ = q.reply(&key, latest.clone()).await;
                    }
                    Err(_) => break,
                },
                changed = watch.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    latest = json(&watch.borrow_and_update());
                    let _ = session.put(&key, latest.clone()).await;
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        faces: FaceArgs,
    }

    /// The defaults a literal gives are the ones the parser gives: a command that
    /// builds `FaceArgs::default()` serves what one without face flags would.
    #[test]
    fn the_default_is_what_no_flag_parses_to() {
        let parsed = Cmd::try_parse_from(["x"]).unwrap().faces;
        let d = FaceArgs::default();
        assert_eq!(format!("{parsed:?}"), format!("{d:?}"));
    }

    #[test]
    fn a_face_flag_needs_its_face() {
        assert!(Cmd::try_parse_from(["x", "--ros2-domain", "3"]).is_err());
        assert!(Cmd::try_parse_from(["x", "--ros2", "--ros2-domain", "3"]).is_ok());
        assert!(Cmd::try_parse_from(["x", "--joints-command-timeout", "5"]).is_err());
    }

    #[test]
    fn foxglove_serves_one_bus() {
        let args = Cmd::try_parse_from(["x", "--foxglove", "127.0.0.1:0"])
            .unwrap()
            .faces;
        let two = [
            ("a".to_string(), "sim".to_string()),
            ("b".to_string(), "sim".to_string()),
        ];
        let e = args.check(&two).unwrap_err().to_string();
        assert!(e.contains("one bus"), "{e}");
        assert!(args.check(&two[..1]).is_ok());
    }
}
