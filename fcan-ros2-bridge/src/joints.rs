//! Joints for ros2_control: the joints of a cycle configuration
//! ([`fcan_cycle::CycleConfig`], `docs/control.md`) as `sensor_msgs/msg/JointState`
//! on DDS, both ways, the way `topic_based_ros2_control`'s `TopicBasedSystem` (and any
//! controller reading joint states) expects them (`fcan serve --ros2 --joints FILE`).
//!
//! - [`JointMap`] (sans I/O): which state and command interface of the cycle each
//!   `position`, `velocity`, `effort` of a JointState is, a state message from a read, the
//!   command updates a JointState asks for (or why it is refused).
//! - [`JointsBridge`]: the thin task that runs the loop: configure, activate (the enable
//!   steps), then once per period `read` → a JointState on the states topic, and every
//!   command accepted written through the cycle (which checks the ranges); a fault
//!   latched by the cycle stops the states, sends the safe stop (a `safe: hold` command
//!   the position measured at the fault), refuses commands until
//!   `/fcan_joints/clear_fault` activates the loop again. The fault's text starts with
//!   its cause (`feedback timeout (host side)`, `device command watchdog (device side)`,
//!   `acknowledgement timeout`, `device fault`, `node … went offline`), on the status
//!   topic and in the log (`/rosout`), whose line also gives [`fcan_cycle::Fault::cause`].
//!   The same status as a value, [`JointsStatus`] (state, cause, fault text, since when),
//!   is watched with [`JointsBridge::watch`]: `fcan serve` puts it on the Zenoh key
//!   `fcan/<bus>/joints/status`, which `fcan monitor` shows (`docs/remote.md`).
//!   Stopping the joints deactivates the cycle: the commands in force are flushed once,
//!   and no safe stop or disable is sent.
//!
//! The rules (`docs/ros2.md`, "Joint states for ros2_control"):
//!
//! * **States**: one JointState per cycle, joints in the configuration's order, `name`
//!   and one array per interface `position`, `velocity`, `effort`: empty when no joint
//!   has that state interface, else one value per joint, NaN for a joint without it
//!   (JointState's own convention: "all arrays either empty or as long as `name`").
//!   `header.stamp` is the wall time the oldest value of the message reached the master.
//! * **Commands**: a JointState names some joints; each of its arrays is empty or has a
//!   value per name (else the message is refused). A value goes to the joint's command
//!   interface of the array's name; NaN means "no command for this one". A finite value
//!   for an interface the joint does not have, an unknown or repeated joint name, refuse
//!   the whole message, as does a value the field cannot carry (the cycle's range check).
//!   A command interface holds its last accepted value; one never commanded carries its
//!   seed from the activation ([`Cycle::commands`]): its explicit `initial` value, else
//!   the value measured then by its state interface of the same name (a position joint
//!   no JointState names stays where it is), else its numeric `safe` value.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use fcan_cycle::{Cycle, CycleConfig, CycleError, Lifecycle};
use fcan_master::api::MasterApi;
use fcan_ros2::dynamic::{self, ros_time, RosValue};
use fcan_ros2::{rihs, Interfaces};
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt};
use tokio::task::JoinHandle;

use crate::dds::{Dds, DdsError, DdsWriter, Endpoint, Received};
use crate::names::{dds_topic, dds_type};
use crate::routes::{READER_QOS, SERVICE_QOS, STATE_QOS, WRITER_QOS};
use crate::rpc::{reply, split_request, Framing};

/// The message type both ways.
pub const JOINT_STATE: &str = "sensor_msgs/msg/JointState";

/// Where the states go by default: `TopicBasedSystem`'s `joint_states_topic` default.
pub const DEFAULT_STATES_TOPIC: &str = "/robot_joint_states";

/// Where commands come from by default: `TopicBasedSystem`'s `joint_commands_topic`
/// default.
pub const DEFAULT_COMMANDS_TOPIC: &str = "/robot_joint_commands";

/// The loop's status as text (`std_msgs/msg/String`, transient local): `active`,
/// `faulted: …`, `configuring: …`, `activating: …`, `inactive: …`, `stopped`.
pub const STATUS_TOPIC: &str = "/fcan_joints/status";

/// Clears a latched fault and activates the loop again (`std_srvs/srv/Trigger`).
pub const CLEAR_FAULT_SERVICE: &str = "/fcan_joints/clear_fault";

/// The target of the joints' `tracing` events (configured, active, faults, refused
/// commands); each is a child of the span current when [`JointsBridge::start`] was called.
const TARGET: &str = "fcan::joints";

/// The interfaces a JointState carries, in its order.
pub const INTERFACES: [&str; 3] = ["position", "velocity", "effort"];

/// Checks a ROS topic name given for the states or commands: absolute, segments of
/// letters, digits and `_`, not starting with a digit.
///
/// ```
/// use fcan_ros2_bridge::joints::check_topic;
/// assert!(check_topic("/robot_joint_states").is_ok());
/// assert!(check_topic("/arm/joint_commands").is_ok());
/// assert!(check_topic("robot_joint_states").is_err());
/// assert!(check_topic("/robot//states").is_err());
/// assert!(check_topic("/robot/1states").is_err());
/// assert!(check_topic("/robot states").is_err());
/// ```
pub fn check_topic(name: &str) -> Result<(), String> {
    let Some(rest) = name.strip_prefix('/') else {
        return Err(format!("`{name}`: a topic name starts with `/`"));
    };
    for seg in rest.split('/') {
        let ok = seg
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(format!(
                "`{name}`: each part of a topic name is letters, digits and `_`, not starting with a digit"
            ));
        }
    }
    Ok(())
}

/// Why a command JointState was refused (nothing of it is applied).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandRefused {
    /// The bytes are not a JointState.
    #[error("not a sensor_msgs/msg/JointState: {0}")]
    Undecodable(String),
    /// `name` is empty.
    #[error("no joint named")]
    NoJoints,
    /// An array that is neither empty nor as long as `name`.
    #[error("`{array}` has {got} values for {names} names (an array is empty or has one value per name)")]
    Lengths {
        /// `position`, `velocity` or `effort`.
        array: &'static str,
        /// Its length.
        got: usize,
        /// `name`'s length.
        names: usize,
    },
    /// A joint the configuration does not have.
    #[error("unknown joint `{name}` (joints: {known})")]
    UnknownJoint {
        /// The name sent.
        name: String,
        /// The joints configured, for people.
        known: String,
    },
    /// A joint named twice.
    #[error("joint `{0}` is named twice")]
    Repeated(String),
    /// A value (not NaN) for an interface the joint has no command interface of.
    #[error("joint `{joint}` has no `{interface}` command interface (send NaN there, or leave `{interface}` empty)")]
    NoInterface {
        /// The joint.
        joint: String,
        /// `position`, `velocity` or `effort`.
        interface: &'static str,
    },
}

/// The joints of a cycle as JointState, both ways (sans I/O).
#[derive(Clone, Debug, PartialEq)]
pub struct JointMap {
    joints: Vec<String>,
    /// Per interface of [`INTERFACES`], per joint: the state index.
    states: [Vec<Option<usize>>; 3],
    /// Per interface, per joint: the command index.
    commands: [Vec<Option<usize>>; 3],
    /// Command interfaces no JointState array drives, by name.
    undriven: Vec<String>,
}

impl JointMap {
    /// The map of `joints` (in their order), given the cycle's state and command names
    /// (`<joint>/<interface>`, by index: [`Cycle::state_names`], [`Cycle::command_names`]).
    pub fn new<S: AsRef<str>, C: AsRef<str>>(
        joints: &[String],
        state_names: &[S],
        command_names: &[C],
    ) -> JointMap {
        let index = |names: &[&str], j: &str, i: &str| {
            let want = format!("{j}/{i}");
            names.iter().position(|n| *n == want)
        };
        let s: Vec<&str> = state_names.iter().map(AsRef::as_ref).collect();
        let c: Vec<&str> = command_names.iter().map(AsRef::as_ref).collect();
        let per = |names: &[&str]| -> [Vec<Option<usize>>; 3] {
            INTERFACES.map(|i| joints.iter().map(|j| index(names, j, i)).collect())
        };
        let undriven = c
            .iter()
            .filter(|n| {
                n.rsplit_once('/')
                    .is_none_or(|(_, i)| !INTERFACES.contains(&i))
            })
            .map(|n| n.to_string())
            .collect();
        JointMap {
            joints: joints.to_vec(),
            states: per(&s),
            commands: per(&c),
            undriven,
        }
    }

    /// The map of a configuration (its numbering is the cycle's).
    pub fn from_config(config: &CycleConfig) -> JointMap {
        let joints: Vec<String> = config.joints.iter().map(|j| j.name.clone()).collect();
        let states: Vec<String> = config.states().map(|s| s.name).collect();
        let commands: Vec<String> = config.commands().map(|c| c.name).collect();
        JointMap::new(&joints, &states, &commands)
    }

    /// The joints, in the order the states name them.
    pub fn joints(&self) -> &[String] {
        &self.joints
    }

    /// What a user should know about this map: joints without a position state
    /// (`TopicBasedSystem` reads `position` for every joint it is sent), command
    /// interfaces no JointState drives (they carry their seed from the activation).
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let has_position = self.states[0].iter().any(Option::is_some);
        for (j, name) in self.joints.iter().enumerate() {
            if self.states[0][j].is_none() {
                notes.push(if has_position {
                    format!("joint {name} has no position state: its position is NaN")
                } else {
                    format!("joint {name} has no position state (no joint has one: `position` is empty, which TopicBasedSystem cannot read)")
                });
            }
        }
        for c in &self.undriven {
            notes.push(format!(
                "command {c} is not position, velocity or effort: no JointState sets it, it carries its value from the activation (its `initial`, else its state of the same name, else its numeric `safe`)"
            ));
        }
        notes
    }

    /// The JointState of one read: `values` by state index, stamped `stamp`.
    pub fn state_message(&self, values: &[f64], stamp: SystemTime) -> RosValue {
        let array = |per: &[Option<usize>]| {
            if per.iter().all(Option::is_none) {
                return RosValue::Seq(Vec::new());
            }
            RosValue::Seq(
                per.iter()
                    .map(|i| {
                        RosValue::Float(i.and_then(|i| values.get(i).copied()).unwrap_or(f64::NAN))
                    })
                    .collect(),
            )
        };
        RosValue::Msg(vec![
            RosValue::Msg(vec![ros_time(stamp), RosValue::Str(String::new())]),
            RosValue::Seq(
                self.joints
                    .iter()
                    .map(|j| RosValue::Str(j.clone()))
                    .collect(),
            ),
            array(&self.states[0]),
            array(&self.states[1]),
            array(&self.states[2]),
        ])
    }

    /// The command updates (command index, value) a JointState asks for, or why it is
    /// refused whole. Values are not range-checked here: the cycle's `write` does that.
    pub fn commands(&self, msg: &RosValue) -> Result<Vec<(usize, f64)>, CommandRefused> {
        let undecodable = |what: &str| CommandRefused::Undecodable(what.to_string());
        let RosValue::Msg(fields) = msg else {
            return Err(undecodable("not a message"));
        };
        let [_header, names, arrays @ ..] = fields.as_slice() else {
            return Err(undecodable("too few fields"));
        };
        let names: Vec<&str> = names
            .as_seq()
            .ok_or_else(|| undecodable("`name` is not a sequence"))?
            .iter()
            .map(|n| {
                n.as_str()
                    .ok_or_else(|| undecodable("a name is not a string"))
            })
            .collect::<Result<_, _>>()?;
        if names.is_empty() {
            return Err(CommandRefused::NoJoints);
        }
        if arrays.len() != INTERFACES.len() {
            return Err(undecodable("not the fields of a JointState"));
        }
        let mut values: Vec<Vec<f64>> = Vec::with_capacity(3);
        for (k, a) in arrays.iter().enumerate() {
            let items = a
                .as_seq()
                .ok_or_else(|| undecodable("an array is not a sequence"))?;
            if !items.is_empty() && items.len() != names.len() {
                return Err(CommandRefused::Lengths {
                    array: INTERFACES[k],
                    got: items.len(),
                    names: names.len(),
                });
            }
            values.push(
                items
                    .iter()
                    .map(|v| match v {
                        RosValue::Float(x) => Ok(*x),
                        _ => Err(undecodable("an array value is not a number")),
                    })
                    .collect::<Result<_, _>>()?,
            );
        }
        let mut updates = Vec::new();
        for (n, name) in names.iter().enumerate() {
            if names[..n].contains(name) {
                return Err(CommandRefused::Repeated(name.to_string()));
            }
            let Some(j) = self.joints.iter().position(|x| x == name) else {
                return Err(CommandRefused::UnknownJoint {
                    name: name.to_string(),
                    known: self.joints.join(", "),
                });
            };
            for (k, vs) in values.iter().enumerate() {
                let Some(&v) = vs.get(n) else { continue };
                if v.is_nan() {
                    continue;
                }
                match self.commands[k][j] {
                    Some(c) => updates.push((c, v)),
                    None => {
                        return Err(CommandRefused::NoInterface {
                            joint: name.to_string(),
                            interface: INTERFACES[k],
                        })
                    }
                }
            }
        }
        Ok(updates)
    }
}

/// Where the loop is, as [`JointsStatus::state`] names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JointsState {
    /// Waiting for the nodes, or retrying a configuration that failed.
    Configuring,
    /// Running the enable steps (retried by itself until the first fault).
    Activating,
    /// Running: states published, commands written.
    Active,
    /// An activation after a fault failed: waiting for `clear_fault`.
    Inactive,
    /// A fault latched: the safe stop sent, states stopped, commands refused until
    /// `clear_fault`.
    Faulted,
    /// The loop ended ([`JointsBridge::stop`]).
    Stopped,
}

impl JointsState {
    /// Its name: `configuring`, `activating`, `active`, `inactive`, `faulted`,
    /// `stopped` (the first word of the status text).
    pub fn as_str(self) -> &'static str {
        match self {
            JointsState::Configuring => "configuring",
            JointsState::Activating => "activating",
            JointsState::Active => "active",
            JointsState::Inactive => "inactive",
            JointsState::Faulted => "faulted",
            JointsState::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for JointsState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The loop's status as a value: what [`STATUS_TOPIC`] says as text, with the fault's
/// cause apart. Watched with [`JointsBridge::watch`]; a new value on every change of
/// the text.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct JointsStatus {
    /// Where the loop is.
    pub state: JointsState,
    /// While faulted: the fault's cause as one word ([`fcan_cycle::Fault::cause`]:
    /// `feedback_timeout`, `device_watchdog`, `ack_timeout`, `device_fault`,
    /// `node_lost`, `write_refused`, `master_gone`).
    pub cause: Option<&'static str>,
    /// While faulted: the fault for people (it starts with its cause in words, e.g.
    /// `feedback timeout (host side): …`).
    pub fault: Option<String>,
    /// The status text, as published on [`STATUS_TOPIC`] (`faulted: <fault>`,
    /// `configuring: <why>` …).
    pub text: String,
    /// When the loop entered [`state`](Self::state) (wall time).
    pub since: SystemTime,
}

impl JointsStatus {
    fn new(state: JointsState, text: String) -> JointsStatus {
        JointsStatus {
            state,
            cause: None,
            fault: None,
            text,
            since: SystemTime::now(),
        }
    }
}

/// How the joints run.
#[derive(Clone)]
#[non_exhaustive]
pub struct JointsOptions {
    /// Where the states go ([`DEFAULT_STATES_TOPIC`]).
    pub states_topic: String,
    /// Where commands come from ([`DEFAULT_COMMANDS_TOPIC`]).
    pub commands_topic: String,
    /// How long one configuration attempt waits for the nodes.
    pub configure_wait: Duration,
    /// How long one activation may take.
    pub activate_timeout: Duration,
    /// Between two configuration or (at start) activation attempts.
    pub retry: Duration,
    /// When set: commands older than this are no longer sent (the nodes' own command
    /// watchdogs then stop the joints); a new command resumes. Off by default: the
    /// last command holds, as a ros2_control hardware interface holds it.
    pub command_timeout: Option<Duration>,
    /// How `clear_fault` requests and replies are framed.
    pub framing: Framing,
}

impl Default for JointsOptions {
    fn default() -> Self {
        JointsOptions {
            states_topic: DEFAULT_STATES_TOPIC.into(),
            commands_topic: DEFAULT_COMMANDS_TOPIC.into(),
            configure_wait: Duration::from_secs(1),
            activate_timeout: Duration::from_secs(2),
            retry: Duration::from_secs(1),
            command_timeout: None,
            framing: Framing::from_rmw(std::env::var("RMW_IMPLEMENTATION").ok().as_deref()),
        }
    }
}

/// What the joints did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JointsStats {
    /// JointStates published.
    pub states: u64,
    /// Command messages accepted (written through the cycle).
    pub commands: u64,
    /// Command messages refused (see [`CommandRefused`], or the cycle's range check).
    pub refused: u64,
    /// Command messages that arrived while the loop was not active (faulted,
    /// configuring, activating): dropped.
    pub ignored: u64,
    /// Faults latched.
    pub faults: u64,
    /// Activations that succeeded.
    pub activations: u64,
}

#[derive(Default)]
struct Counters {
    states: AtomicU64,
    commands: AtomicU64,
    refused: AtomicU64,
    ignored: AtomicU64,
    faults: AtomicU64,
    activations: AtomicU64,
}

struct Shared {
    counters: Counters,
    status: tokio::sync::watch::Sender<JointsStatus>,
}

/// The running joints. Dropping it ends the loop at once (nothing more is sent: the
/// nodes' watchdogs stop the joints); [`stop`](JointsBridge::stop) deactivates the
/// cycle first (the commands in force flushed once).
pub struct JointsBridge {
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
    stop: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for JointsBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JointsBridge").finish_non_exhaustive()
    }
}

/// The DDS endpoints of the joints.
struct Io<W> {
    states: W,
    status: W,
    reply: W,
    commands: BoxStream<'static, Received>,
    requests: BoxStream<'static, Received>,
}

impl JointsBridge {
    /// Makes the DDS endpoints on `dds` (the states and status writers, the commands
    /// reader, the `clear_fault` service), then starts the loop on `master`: it
    /// configures the cycle (retrying while nodes are missing), activates it (retrying
    /// until it succeeds), and runs. `config` should be [checked](CycleConfig::check).
    pub fn start<M: MasterApi, D: Dds>(
        master: M,
        dds: &D,
        config: CycleConfig,
        opts: JointsOptions,
    ) -> Result<JointsBridge, DdsError> {
        // The parent of the loop's events, which run on its own task.
        let span = tracing::Span::current();
        // Each endpoint announces its type's hash; a service's halves, the service's.
        let store = Interfaces::bundled();
        let ep = |topic: String, ty: &str, qos| {
            let hashed = match ty.split_once("/srv/") {
                Some(_) => ty
                    .trim_end_matches("_Request")
                    .trim_end_matches("_Response"),
                None => ty,
            };
            Endpoint {
                topic,
                type_name: dds_type(ty),
                qos,
                type_hash: rihs::type_hash(&store, hashed).ok(),
            }
        };
        let service = CLEAR_FAULT_SERVICE.trim_start_matches('/');
        let io = Io {
            states: dds.writer(&ep(dds_topic(&opts.states_topic), JOINT_STATE, WRITER_QOS))?,
            status: dds.writer(&ep(
                dds_topic(STATUS_TOPIC),
                "std_msgs/msg/String",
                STATE_QOS,
            ))?,
            reply: dds.writer(&ep(
                format!("rr/{service}Reply"),
                "std_srvs/srv/Trigger_Response",
                SERVICE_QOS,
            ))?,
            commands: dds
                .reader(&ep(
                    dds_topic(&opts.commands_topic),
                    JOINT_STATE,
                    READER_QOS,
                ))?
                .samples,
            requests: dds
                .reader(&ep(
                    format!("rq/{service}Request"),
                    "std_srvs/srv/Trigger_Request",
                    SERVICE_QOS,
                ))?
                .samples,
        };
        let map = JointMap::from_config(&config);
        for n in map.notes() {
            tracing::info!(target: TARGET, parent: &span, "note: {n}");
        }
        let shared = Arc::new(Shared {
            counters: Counters::default(),
            status: tokio::sync::watch::Sender::new(JointsStatus::new(
                JointsState::Configuring,
                WAITING.into(),
            )),
        });
        let stop = Arc::new(tokio::sync::Notify::new());
        // Set from the cycle's seeds at each activation (nothing is sent before).
        let held = Vec::new();
        let lp = Loop {
            master,
            period: config.period(),
            config,
            map,
            cycle: None,
            io,
            store: Interfaces::bundled(),
            span,
            opts,
            shared: shared.clone(),
            held,
            armed: false,
            written: false,
            last_command: Instant::now(),
            expired: false,
            auto_activate: true,
            next_try: Instant::now(),
            last_problem: String::new(),
            refusals: Limiter::default(),
        };
        let task = tokio::spawn(lp.run(stop.clone()));
        Ok(JointsBridge {
            shared,
            task: Some(task),
            stop,
        })
    }

    /// What the joints did so far.
    pub fn stats(&self) -> JointsStats {
        let c = &self.shared.counters;
        JointsStats {
            states: c.states.load(Ordering::Relaxed),
            commands: c.commands.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            ignored: c.ignored.load(Ordering::Relaxed),
            faults: c.faults.load(Ordering::Relaxed),
            activations: c.activations.load(Ordering::Relaxed),
        }
    }

    /// The status, as published on [`STATUS_TOPIC`].
    pub fn status(&self) -> String {
        self.shared.status.borrow().text.clone()
    }

    /// The status as a value, and each change of it: the observer of the loop's
    /// lifecycle and faults (`fcan serve` puts it on `fcan/<bus>/joints/status`). The
    /// receiver sees the current value at once; the last change, `stopped`, is sent
    /// before [`stop`](JointsBridge::stop) returns.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<JointsStatus> {
        self.shared.status.subscribe()
    }

    /// Stops the loop: an active loop is deactivated (the commands in force flushed once,
    /// no safe stop, no disable; waited for, bounded by the cycle), then the endpoints
    /// go.
    pub async fn stop(mut self) {
        self.stop.notify_one();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for JointsBridge {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// The status while the first configuration waits for the nodes.
const WAITING: &str = "configuring: waiting for the nodes";

/// At most one line a second for a recurring complaint; the rest counted.
#[derive(Default)]
struct Limiter {
    last: Option<Instant>,
    held_back: u64,
}

impl Limiter {
    fn line(&mut self, line: String) -> Option<String> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.held_back += 1;
            return None;
        }
        self.last = Some(now);
        let more = std::mem::take(&mut self.held_back);
        Some(if more > 0 {
            format!("{line} ({more} more refused since the last line)")
        } else {
            line
        })
    }
}

/// The loop's state, owned by its task.
struct Loop<M: MasterApi, W> {
    master: M,
    config: CycleConfig,
    period: Duration,
    map: JointMap,
    cycle: Option<Cycle<M>>,
    io: Io<W>,
    store: Interfaces,
    /// The span current at start: the parent of the loop's events.
    span: tracing::Span,
    opts: JointsOptions,
    shared: Arc<Shared>,
    /// The commands in force, by command index: the cycle's seeds at activation, then
    /// what the accepted commands set.
    held: Vec<f64>,
    /// A command arrived since the last activation: the held commands go out.
    armed: bool,
    /// A batch was written since the last tick.
    written: bool,
    last_command: Instant,
    /// The commands are older than the command timeout (not sent).
    expired: bool,
    /// Activation is retried by itself (until the first fault).
    auto_activate: bool,
    next_try: Instant,
    /// The last configuration or activation problem logged (said once).
    last_problem: String,
    refusals: Limiter,
}

impl<M: MasterApi, W: DdsWriter> Loop<M, W> {
    async fn run(mut self, stop: Arc<tokio::sync::Notify>) {
        self.set_status(JointsState::Configuring, WAITING.into());
        let mut tick = tokio::time::interval(self.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                biased;
                _ = stop.notified() => break,
                _ = tick.tick() => self.on_tick().await,
                Some(s) = self.io.commands.next() => self.on_command(s),
                Some(r) = self.io.requests.next() => self.on_request(r).await,
            }
        }
        if let Some(c) = &mut self.cycle {
            if c.lifecycle() == &Lifecycle::Active {
                match c.deactivate().await {
                    Ok(()) => tracing::info!(
                        target: TARGET,
                        parent: &self.span,
                        "deactivated: the commands in force flushed once (no safe stop, no disable)"
                    ),
                    Err(e) => {
                        tracing::warn!(target: TARGET, parent: &self.span, "deactivation: {e}")
                    }
                }
            }
        }
        self.set_status(JointsState::Stopped, "stopped".into());
    }

    fn set_status(&mut self, state: JointsState, text: String) {
        self.set_status_with(JointsStatus::new(state, text));
    }

    /// Publishes `new` on [`STATUS_TOPIC`] and to the watchers, if its text changed; its
    /// `since` stays the old one while the state does not change.
    fn set_status_with(&mut self, mut new: JointsStatus) {
        let changed = self.shared.status.send_if_modified(|s| {
            if s.text == new.text {
                return false;
            }
            if s.state == new.state {
                new.since = s.since;
            }
            *s = new.clone();
            true
        });
        if !changed {
            return;
        }
        let v = RosValue::Msg(vec![RosValue::Str(new.text)]);
        if let Ok(b) = dynamic::encode(&self.store, "std_msgs/msg/String", &v) {
            if let Err(e) = self.io.status.write(&b, None, None) {
                tracing::warn!(target: TARGET, parent: &self.span, "{STATUS_TOPIC}: {e}");
            }
        }
    }

    /// Logs a configuration or activation problem once (until it changes).
    fn problem(&mut self, text: String) {
        if text != self.last_problem {
            tracing::warn!(target: TARGET, parent: &self.span, "{text}");
            self.last_problem.clone_from(&text);
        }
    }

    async fn on_tick(&mut self) {
        let Some(cycle) = &mut self.cycle else {
            if Instant::now() < self.next_try {
                return;
            }
            match Cycle::configure(
                self.master.clone(),
                self.config.clone(),
                self.opts.configure_wait,
            )
            .await
            {
                Ok(c) => {
                    // The cycle's numbering (the configuration's, by construction).
                    let joints: Vec<String> =
                        self.config.joints.iter().map(|j| j.name.clone()).collect();
                    self.map = JointMap::new(&joints, c.state_names(), c.command_names());
                    tracing::info!(
                        target: TARGET,
                        parent: &self.span,
                        "configured: joints {}; states on {}, commands from {}",
                        joints.join(", "),
                        self.opts.states_topic,
                        self.opts.commands_topic
                    );
                    self.cycle = Some(c);
                    self.last_problem.clear();
                    // A failure is logged and retried on a later tick.
                    let _ = self.activate().await;
                }
                Err(e) => {
                    self.problem(format!("configuration: {e} (retrying)"));
                    self.set_status(JointsState::Configuring, format!("configuring: {e}"));
                    self.next_try = Instant::now() + self.opts.retry;
                }
            }
            return;
        };
        match cycle.lifecycle() {
            Lifecycle::Active => {}
            Lifecycle::Inactive => {
                if self.auto_activate && Instant::now() >= self.next_try {
                    let _ = self.activate().await;
                }
                return;
            }
            // States stop while faulted; the safe stop runs in the cycle.
            _ => return,
        }
        let read = match cycle.read() {
            Ok(states) => {
                let oldest = states.ages().iter().max().copied().unwrap_or_default();
                let stamp = SystemTime::now()
                    .checked_sub(oldest)
                    .unwrap_or_else(SystemTime::now);
                Ok((states.values().to_vec(), stamp))
            }
            Err(e) => Err(e),
        };
        let (values, stamp) = match read {
            Ok(r) => r,
            Err(CycleError::Faulted(f)) => {
                self.shared.counters.faults.fetch_add(1, Ordering::Relaxed);
                self.armed = false;
                self.auto_activate = false;
                tracing::error!(
                    target: TARGET,
                    parent: &self.span,
                    "FAULT ({}): {f}; the safe stop is sent, states stop, commands have no effect until {CLEAR_FAULT_SERVICE} is called",
                    f.cause()
                );
                let mut status = JointsStatus::new(JointsState::Faulted, format!("faulted: {f}"));
                status.cause = Some(f.cause());
                status.fault = Some(f.to_string());
                self.set_status_with(status);
                return;
            }
            Err(e) => {
                self.problem(format!("read: {e}"));
                return;
            }
        };
        let msg = self.map.state_message(&values, stamp);
        match dynamic::encode(&self.store, JOINT_STATE, &msg) {
            Ok(b) => match self.io.states.write(&b, None, Some(stamp)) {
                Ok(()) => {
                    self.shared.counters.states.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => self.problem(format!("{}: {e}", self.opts.states_topic)),
            },
            Err(e) => self.problem(format!("{}: {e}", self.opts.states_topic)),
        }
        if !self.armed {
            return;
        }
        if let Some(t) = self.opts.command_timeout {
            let old = self.last_command.elapsed() > t;
            if old && !self.expired {
                tracing::warn!(
                    target: TARGET,
                    parent: &self.span,
                    "no command for {t:?}: commands no longer sent (the nodes' watchdogs stop the joints) until the next one"
                );
            }
            self.expired = old;
            if old {
                return;
            }
        }
        if !std::mem::take(&mut self.written) {
            if let Some(cycle) = &mut self.cycle {
                if let Err(e) = cycle.write(&self.held) {
                    self.problem(format!("write: {e}"));
                }
            }
        }
    }

    /// Activates the cycle; on success, commands that waited are dropped and nothing is
    /// sent until the next one.
    async fn activate(&mut self) -> Result<(), String> {
        if self.cycle.is_none() {
            return Err("not configured yet".into());
        }
        self.set_status(JointsState::Activating, "activating".into());
        let Some(cycle) = &mut self.cycle else {
            return Err("not configured yet".into());
        };
        match cycle.activate(self.opts.activate_timeout).await {
            Ok(()) => {
                let mut dropped = 0;
                while let Some(Some(_)) = self.io.commands.next().now_or_never() {
                    dropped += 1;
                }
                self.shared
                    .counters
                    .ignored
                    .fetch_add(dropped, Ordering::Relaxed);
                self.shared
                    .counters
                    .activations
                    .fetch_add(1, Ordering::Relaxed);
                self.armed = false;
                self.written = false;
                self.expired = false;
                // A command no JointState sets starts where the cycle seeded it: a
                // position joint where it is measured, never a jump to a safe value.
                self.held = cycle.commands().to_vec();
                self.last_problem.clear();
                tracing::info!(
                    target: TARGET,
                    parent: &self.span,
                    "active: the enable steps done, every state fresh"
                );
                self.set_status(JointsState::Active, "active".into());
                Ok(())
            }
            Err(e) => {
                let why = e.to_string();
                if self.auto_activate {
                    self.problem(format!("activation: {why} (retrying)"));
                    self.set_status(JointsState::Activating, format!("activating: {why}"));
                } else {
                    tracing::warn!(target: TARGET, parent: &self.span, "activation: {why}");
                    self.set_status(
                        JointsState::Inactive,
                        format!("inactive: {why}; call {CLEAR_FAULT_SERVICE} to try again"),
                    );
                }
                self.next_try = Instant::now() + self.opts.retry;
                Err(why)
            }
        }
    }

    fn refuse(&mut self, why: String) {
        self.shared.counters.refused.fetch_add(1, Ordering::Relaxed);
        if let Some(line) = self
            .refusals
            .line(format!("{}: refused: {why}", self.opts.commands_topic))
        {
            tracing::warn!(target: TARGET, parent: &self.span, "{line}");
        }
    }

    fn on_command(&mut self, sample: Received) {
        let Some(cycle) = self
            .cycle
            .as_mut()
            .filter(|c| c.lifecycle() == &Lifecycle::Active)
        else {
            self.shared.counters.ignored.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let updates = dynamic::decode(&self.store, JOINT_STATE, &sample.cdr)
            .map_err(|e| CommandRefused::Undecodable(e.to_string()))
            .and_then(|msg| self.map.commands(&msg));
        let updates = match updates {
            Ok(u) => u,
            Err(e) => return self.refuse(e.to_string()),
        };
        let mut candidate = self.held.clone();
        for (c, v) in updates {
            if let Some(slot) = candidate.get_mut(c) {
                *slot = v;
            }
        }
        match cycle.write(&candidate) {
            Ok(()) => {
                self.held = candidate;
                self.armed = true;
                self.written = true;
                self.last_command = Instant::now();
                if std::mem::take(&mut self.expired) {
                    tracing::info!(target: TARGET, parent: &self.span, "commands resumed");
                }
                self.shared
                    .counters
                    .commands
                    .fetch_add(1, Ordering::Relaxed);
            }
            Err(CycleError::Faulted(_) | CycleError::NotActive) => {
                self.shared.counters.ignored.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.refuse(e.to_string()),
        }
    }

    /// `clear_fault`: clears a latched fault and activates again; answers whether the
    /// loop is active, and why not.
    async fn on_request(&mut self, req: Received) {
        let Ok((id, _body)) = split_request(self.opts.framing, &req.cdr, req.id) else {
            return;
        };
        let (ok, message) = match &mut self.cycle {
            None => (
                false,
                format!(
                    "not configured yet: {}",
                    self.shared.status.borrow().text.clone()
                ),
            ),
            Some(c) if c.lifecycle() == &Lifecycle::Active => (true, "active (no fault)".into()),
            Some(c) => {
                if let Some(f) = c.clear_fault() {
                    tracing::info!(
                        target: TARGET,
                        parent: &self.span,
                        "fault cleared ({f}); activating again"
                    );
                }
                match self.activate().await {
                    Ok(()) => (true, "active".into()),
                    Err(why) => (false, why),
                }
            }
        };
        let v = RosValue::Msg(vec![RosValue::Bool(ok), RosValue::Str(message)]);
        match dynamic::encode(&self.store, "std_srvs/srv/Trigger_Response", &v) {
            Ok(b) => {
                let (bytes, related) = reply(&id, &b);
                if let Err(e) = self.io.reply.write(&bytes, related, None) {
                    tracing::warn!(
                        target: TARGET,
                        parent: &self.span,
                        "{CLEAR_FAULT_SERVICE}: reply not written: {e}"
                    );
                }
            }
            Err(e) => tracing::warn!(
                target: TARGET,
                parent: &self.span,
                "{CLEAR_FAULT_SERVICE}: {e}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> JointMap {
        let config = CycleConfig::new(100.0)
            .state("left/position", "/m1/motor0/feedback.position")
            .state("left/velocity", "/m1/motor0/feedback.velocity")
            .state("left/effort", "/m1/motor0/feedback.current")
            .state("right/position", "/m2/motor0/feedback.position")
            .state("right/velocity", "/m2/motor0/feedback.velocity")
            .command("left/velocity", "/m1/motor0/target{type: 1}.value", 0.0)
            .command("right/velocity", "/m2/motor0/target{type: 1}.value", 0.0)
            .command("right/position", "/m2/motor0/trajectory.position", 0.0);
        JointMap::from_config(&config)
    }

    fn floats(v: &[f64]) -> RosValue {
        RosValue::Seq(v.iter().map(|x| RosValue::Float(*x)).collect())
    }

    fn command(names: &[&str], p: &[f64], v: &[f64], e: &[f64]) -> RosValue {
        RosValue::Msg(vec![
            RosValue::Msg(vec![
                ros_time(SystemTime::UNIX_EPOCH),
                RosValue::Str("".into()),
            ]),
            RosValue::Seq(names.iter().map(|n| RosValue::Str(n.to_string())).collect()),
            floats(p),
            floats(v),
            floats(e),
        ])
    }

    fn seq_floats(v: &RosValue) -> Vec<f64> {
        v.as_seq()
            .unwrap()
            .iter()
            .map(|x| match x {
                RosValue::Float(f) => *f,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn states_become_a_joint_state_with_nan_for_a_missing_interface() {
        let m = map();
        let stamp = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 250_000_000);
        // State indices: left p, v, e, right p, v.
        let msg = m.state_message(&[1.0, 2.0, 3.0, 4.0, 5.0], stamp);
        // Through CDR and back, as a ROS subscriber reads it.
        let store = Interfaces::bundled();
        let b = dynamic::encode(&store, JOINT_STATE, &msg).unwrap();
        let back = dynamic::decode(&store, JOINT_STATE, &b).unwrap();
        let RosValue::Msg(f) = &back else { panic!() };
        assert_eq!(
            f[0],
            RosValue::Msg(vec![
                RosValue::Msg(vec![
                    RosValue::Int(1_700_000_000),
                    RosValue::UInt(250_000_000)
                ]),
                RosValue::Str(String::new())
            ])
        );
        assert_eq!(
            f[1],
            RosValue::Seq(vec![
                RosValue::Str("left".into()),
                RosValue::Str("right".into())
            ])
        );
        assert_eq!(seq_floats(&f[2]), [1.0, 4.0]);
        assert_eq!(seq_floats(&f[3]), [2.0, 5.0]);
        let effort = seq_floats(&f[4]);
        assert_eq!(effort[0], 3.0);
        assert!(effort[1].is_nan(), "right has no effort state: NaN");
    }

    #[test]
    fn an_interface_no_joint_has_is_an_empty_array() {
        let config = CycleConfig::new(100.0)
            .state("a/position", "/m1/motor0/feedback.position")
            .state("b/position", "/m1/motor1/feedback.position");
        let m = JointMap::from_config(&config);
        let RosValue::Msg(f) = m.state_message(&[0.5, -0.5], SystemTime::UNIX_EPOCH) else {
            panic!()
        };
        assert_eq!(seq_floats(&f[2]), [0.5, -0.5]);
        assert_eq!(f[3], RosValue::Seq(vec![]));
        assert_eq!(f[4], RosValue::Seq(vec![]));
        assert!(m.notes().is_empty(), "{:?}", m.notes());
    }

    #[test]
    fn commands_go_to_the_interfaces_of_their_names() {
        let m = map();
        // Command indices: left/velocity 0, right/velocity 1, right/position 2.
        assert_eq!(
            m.commands(&command(&["left", "right"], &[], &[1.5, -2.0], &[]))
                .unwrap(),
            [(0, 1.5), (1, -2.0)]
        );
        // Some joints only, in any order; NaN: no command there.
        assert_eq!(
            m.commands(&command(&["right"], &[0.25], &[f64::NAN], &[]))
                .unwrap(),
            [(2, 0.25)]
        );
        assert_eq!(
            m.commands(&command(
                &["right", "left"],
                &[0.5, f64::NAN],
                &[1.0, 2.0],
                &[]
            ))
            .unwrap(),
            [(2, 0.5), (1, 1.0), (0, 2.0)]
        );
        // A value the field cannot carry passes here: the cycle refuses it.
        assert_eq!(
            m.commands(&command(&["left"], &[], &[f64::INFINITY], &[]))
                .unwrap(),
            [(0, f64::INFINITY)]
        );
    }

    #[test]
    fn mismatches_are_refused_whole() {
        let m = map();
        let e = m
            .commands(&command(&["left", "right"], &[], &[1.0], &[]))
            .unwrap_err();
        assert_eq!(
            e,
            CommandRefused::Lengths {
                array: "velocity",
                got: 1,
                names: 2
            }
        );
        assert!(
            e.to_string()
                .contains("`velocity` has 1 values for 2 names"),
            "{e}"
        );
        let e = m
            .commands(&command(&["left", "elbow"], &[], &[1.0, 1.0], &[]))
            .unwrap_err();
        assert!(
            matches!(&e, CommandRefused::UnknownJoint { name, .. } if name == "elbow"),
            "{e:?}"
        );
        assert!(e.to_string().contains("joints: left, right"), "{e}");
        assert_eq!(
            m.commands(&command(&["left", "left"], &[], &[1.0, 2.0], &[]))
                .unwrap_err(),
            CommandRefused::Repeated("left".into())
        );
        assert_eq!(
            m.commands(&command(&["left"], &[0.1], &[1.0], &[]))
                .unwrap_err(),
            CommandRefused::NoInterface {
                joint: "left".into(),
                interface: "position"
            }
        );
        assert_eq!(
            m.commands(&command(&[], &[], &[], &[])).unwrap_err(),
            CommandRefused::NoJoints
        );
        assert!(matches!(
            m.commands(&RosValue::Msg(vec![])).unwrap_err(),
            CommandRefused::Undecodable(_)
        ));
    }

    #[test]
    fn commands_decode_from_cdr_as_a_publisher_sends_them() {
        let m = map();
        let store = Interfaces::bundled();
        let b = dynamic::encode(
            &store,
            JOINT_STATE,
            &command(&["left", "right"], &[], &[0.5, 0.75], &[]),
        )
        .unwrap();
        let msg = dynamic::decode(&store, JOINT_STATE, &b).unwrap();
        assert_eq!(m.commands(&msg).unwrap(), [(0, 0.5), (1, 0.75)]);
    }

    #[test]
    fn notes_name_a_missing_position_and_undriven_commands() {
        let config = CycleConfig::new(100.0)
            .state("a/position", "/m1/motor0/feedback.position")
            .state("b/velocity", "/m1/motor1/feedback.velocity")
            .command("a/kp", "/m1/motor0/mit{velocity: 0.0}.kp", 0.0);
        let notes = JointMap::from_config(&config).notes();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].contains("joint b has no position state"),
            "{notes:?}"
        );
        assert!(notes[1].contains("command a/kp"), "{notes:?}");
    }
}
