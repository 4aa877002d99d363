//! Control loops on the PC: a cycle API in the manner of ros2_control's
//! `SystemInterface`, on any [`MasterApi`] (the in-process [`fcan_master::Master`], or a
//! daemon's bus through the remote client).
//!
//! ```text
//!   configure ──► Inactive ──activate(timeout)──► Active ──deactivate()──► Inactive
//!                    ▲                              │ stale state, node lost,
//!                    └──────── clear_fault() ◄── Faulted   batch refused
//! ```
//!
//! * **Configure** ([`Cycle::configure`]): a [`CycleConfig`] maps every joint's state
//!   and command interfaces to fields of node topics
//!   (`/motor_driver1/motor0/feedback.position`,
//!   `/motor_driver1/motor0/target{type: 1}.value`), checked against the schemas the
//!   nodes serve, with errors that name the field. The state topics are subscribed from
//!   here on.
//! * **Activate** ([`Cycle::activate`]): every mapped node running, the enable services
//!   called and their answers checked, every device ready (states fresh, `ready`
//!   conditions met, no fault bits; probed from the states every 20 ms, 3 s by default),
//!   the commands seeded ([`Cycle::commands`]: an explicit `initial`, else the measured
//!   state of the same name, else the numeric `safe`) — or an error naming what is
//!   missing, after undoing the enable steps started.
//! * **The loop**: [`Cycle::read`] returns the newest states with their ages, copied
//!   from lock-free cells the receive side writes (the loop never waits on I/O);
//!   [`Cycle::write`] hands every command of the cycle to the writer task as one batch
//!   (one `publish_many`: a frame shared by several commands goes out once). Neither
//!   allocates nor blocks after activation.
//! * **Faults**: a state older than its feedback timeout (host side), a device's own
//!   fault bits or code, a device that stopped following commands by its own watchdog
//!   (device side), a sequenced command not acknowledged in time, a mapped node
//!   offline, rebooted or failed, a batch the master refused — each its own [`Fault`]
//!   with its own [`Fault::cause`]. The first fault is latched: `read` and `write` answer
//!   [`CycleError::Faulted`] until [`Cycle::clear_fault`], and a **bounded safe stop**
//!   runs at once: the configured safe commands (`hold`: the position measured when the
//!   stop starts), sent `safe_stop.repeats` times, then silence (the nodes' own
//!   watchdogs take over).
//! * **Deactivate** ([`Cycle::deactivate`]): the commands in force sent once more, no
//!   safe stop, no disable; [`Cycle::safe_stop`] stops first.
//! * **Statistics** ([`Cycle::stats`]): period, jitter (p50/p99/max), deadline misses,
//!   read/write cost, batches sent and merged.
//!
//! This crate uses the master through [`MasterApi`] only (nothing of its engine), which
//! is why it is a crate of its own: a control application depends on it and the master,
//! and the master carries no control-loop code.
//!
//! Timing: on the in-process master a batch reaches the bus one task hop after `write`.
//! Through the remote client it crosses the network first (loopback: ~100 µs, see
//! `docs/performance.md`), states arrive as the daemon forwards them, and a safe stop is
//! only as prompt as the link; the daemon's own node supervision still applies.
//!
//! ```no_run
//! # async fn demo(master: fcan_master::Master) -> Result<(), fcan_cycle::CycleError> {
//! use std::time::Duration;
//! use fcan_cycle::{Cycle, CycleConfig};
//!
//! let config = CycleConfig::new(500.0)
//!     .state("left/velocity", "/motor_driver1/motor0/feedback.velocity")
//!     .command("left/velocity", "/motor_driver1/motor0/target{type: 1}.value", 0.0);
//! let mut cycle = Cycle::configure(master, config, Duration::from_secs(2)).await?;
//! cycle.activate(Duration::from_secs(2)).await?;
//! let mut interval = tokio::time::interval(cycle.period());
//! for _ in 0..1000 {
//!     interval.tick().await;
//!     let velocity = cycle.read()?.value(0);
//!     cycle.write(&[(1.0 - velocity) * 0.5])?;
//! }
//! cycle.deactivate().await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod config;
mod io;
mod resolve;
mod stats;
mod store;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

pub use config::{
    AckConfig, CommandConfig, CommandItem, Condition, CycleConfig, FaultConfig, FaultKind,
    JointConfig, Safe, SafeStopConfig, ServiceStep, StateConfig, StateItem, UndoStep,
};
pub use stats::{CycleStats, Spread};

use fcan_master::api::MasterApi;
use fcan_master::engine::Phase;
use fcan_master::MasterError;
use resolve::{command_range, Layout, Unresolved};
use store::{Shared, WriteMode};

/// Why a cycle stopped: latched until [`Cycle::clear_fault`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Fault {
    /// A state was not refreshed within its feedback timeout (the host-side deadline:
    /// the cycle's clock, the cycle's fault).
    #[error("feedback timeout (host side): state {state} ({from}) is {age:?} old, past its feedback timeout of {timeout:?}")]
    Stale {
        /// `<joint>/<interface>`.
        state: Arc<str>,
        /// Its topic field.
        from: Arc<str>,
        /// Its age when the fault was raised.
        age: Duration,
        /// Its timeout.
        timeout: Duration,
    },
    /// A node the loop reads or writes went offline, rebooted or failed.
    #[error("node {node} {what}")]
    NodeLost {
        /// Its name.
        node: Arc<str>,
        /// `went offline`, `rebooted`, `failed: <reason>`.
        what: Arc<str>,
    },
    /// The master refused a batch of commands.
    #[error("the master refused the commands: {reason}")]
    WriteRefused {
        /// Why.
        reason: Arc<str>,
    },
    /// The master stopped delivering a state topic (it shut down).
    #[error("the master stopped delivering {topic}")]
    MasterGone {
        /// The topic.
        topic: Arc<str>,
    },
    /// A device reported a fault of its own (a fault bit, an error code).
    #[error("device fault (reported by the device): joint {joint}: {field} = {value:#x}: {}", .names.join(", "))]
    Device {
        /// The joint whose `faults` field it is.
        joint: Arc<str>,
        /// The field, `/<node>/<ns>/<topic>.<field>`.
        field: Arc<str>,
        /// Its value.
        value: u64,
        /// What it says: the names of the bits set, or of the code.
        names: Vec<Arc<str>>,
    },
    /// A device stopped following commands by itself: its `watchdog` field, true since
    /// activation, went false (the device-side command watchdog: the device's clock).
    #[error("device command watchdog (device side): joint {joint}: {field} is {value} (the device stopped following commands: its own command timeout expired)")]
    DeviceWatchdog {
        /// The joint.
        joint: Arc<str>,
        /// The field, `/<node>/<ns>/<topic>.<field>`.
        field: Arc<str>,
        /// The value it took.
        value: f64,
    },
    /// A sequenced command was not acknowledged in time (the acknowledgement deadline:
    /// the cycle measures it from each write to its echo).
    #[error("acknowledgement timeout: command {command} not echoed by {echo} for {lag:?}, past its acknowledgement timeout of {timeout:?}")]
    AckTimeout {
        /// The sequence command, `<joint>/<interface>`.
        command: Arc<str>,
        /// The state that echoes it.
        echo: Arc<str>,
        /// How long the oldest write not echoed has waited.
        lag: Duration,
        /// The timeout.
        timeout: Duration,
    },
}

impl Fault {
    /// The fault's cause as one word, for status lines and logs: `feedback_timeout`,
    /// `device_watchdog`, `ack_timeout`, `device_fault`, `node_lost`, `write_refused`,
    /// `master_gone`.
    pub fn cause(&self) -> &'static str {
        match self {
            Fault::Stale { .. } => "feedback_timeout",
            Fault::DeviceWatchdog { .. } => "device_watchdog",
            Fault::AckTimeout { .. } => "ack_timeout",
            Fault::Device { .. } => "device_fault",
            Fault::NodeLost { .. } => "node_lost",
            Fault::WriteRefused { .. } => "write_refused",
            Fault::MasterGone { .. } => "master_gone",
        }
    }
}

/// What the cycle API answers when it cannot do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CycleError {
    /// The configuration is malformed (no master needed to tell).
    #[error("{0}")]
    Config(String),
    /// A path does not fit the schema the node serves.
    #[error("{item}: {path}: {reason}")]
    Field {
        /// ``state `<joint>/<interface>` `` or `command …`.
        item: String,
        /// The path as configured.
        path: String,
        /// What is wrong, naming the field.
        reason: String,
    },
    /// Configuration waited for nodes that never offered their topics.
    #[error("cycle configuration: waited {waited:?} for {}: not running (check `fcan nodes`)", .nodes.join(", "))]
    NodesMissing {
        /// Node names.
        nodes: Vec<String>,
        /// How long it waited.
        waited: Duration,
    },
    /// Activation did not complete in time.
    #[error("activation timed out after {waited:?}: {}", .missing.join("; "))]
    ActivationTimeout {
        /// Every node, state or service still missing, for people.
        missing: Vec<String>,
        /// The timeout.
        waited: Duration,
    },
    /// An enable service answered something other than expected, or failed.
    #[error("activation: {service}: {reason}")]
    EnableFailed {
        /// The service.
        service: String,
        /// What went wrong.
        reason: String,
    },
    /// The cycle is latched in a fault: [`Cycle::clear_fault`], then activate again.
    #[error("faulted: {0}")]
    Faulted(Fault),
    /// `read`/`write` on a cycle that is not active.
    #[error("the cycle is not active (activate it first)")]
    NotActive,
    /// `write` got a slice of the wrong length.
    #[error("write: {got} commands for {expected} command interfaces")]
    CommandCount {
        /// Command interfaces configured.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// A command value its field cannot carry (not finite, out of range): the batch is
    /// refused whole and the previous commands stay in force.
    #[error("write: command {command} = {value} does not fit its field")]
    BadCommand {
        /// `<joint>/<interface>`.
        command: Arc<str>,
        /// The value.
        value: f64,
    },
    /// The master failed.
    #[error(transparent)]
    Master(#[from] MasterError),
}

/// Where a cycle is.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Lifecycle {
    /// Configured; nothing is sent.
    Inactive,
    /// The loop runs.
    Active,
    /// A fault is latched; the safe stop runs or ran.
    Faulted(Fault),
}

/// The states of one [`Cycle::read`]: values (as `f64`; a bool as 1/0) and ages, by the
/// index of [`CycleConfig::states`].
#[derive(Clone, Copy, Debug)]
pub struct States<'a> {
    names: &'a [Arc<str>],
    values: &'a [f64],
    ages: &'a [Duration],
}

impl<'a> States<'a> {
    /// State `i`'s value.
    ///
    /// # Panics
    /// If `i` is not a state index: a programming error, like a slice index.
    pub fn value(&self, i: usize) -> f64 {
        self.values[i]
    }

    /// State `i`'s age (time since its sample arrived).
    ///
    /// # Panics
    /// If `i` is not a state index.
    pub fn age(&self, i: usize) -> Duration {
        self.ages[i]
    }

    /// Every value, by index.
    pub fn values(&self) -> &'a [f64] {
        self.values
    }

    /// Every age, by index.
    pub fn ages(&self) -> &'a [Duration] {
        self.ages
    }

    /// The index of state `<joint>/<interface>` (a linear search: look it up once,
    /// before the loop).
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| &**n == name)
    }
}

/// How often activation probes the nodes and the devices' readiness.
const PROBE_PERIOD: Duration = Duration::from_millis(20);

/// How long one `undo` call may take (the master's own service timeout is 1.5 s).
const UNDO_TIMEOUT: Duration = Duration::from_millis(1500);

/// A control loop over a master's nodes. See the [module documentation](self).
pub struct Cycle<M: MasterApi> {
    master: M,
    config: CycleConfig,
    layout: Arc<Layout>,
    shared: Arc<Shared>,
    lifecycle: Lifecycle,
    state_names: Vec<Arc<str>>,
    command_names: Vec<Arc<str>>,
    /// Per cell: (state, position in the cell) of every state it holds.
    cell_states: Vec<Vec<(usize, usize)>>,
    values: Vec<f64>,
    ages: Vec<Duration>,
    stamps: Vec<u64>,
    scratch: Vec<f64>,
    ranges: Vec<(f64, f64)>,
    recorder: stats::Recorder,
    cycles: u64,
    last_read: Option<Instant>,
    tasks: Vec<JoinHandle<()>>,
    /// The commands in force: seeded at activation, then the last written.
    commands: Vec<f64>,
    /// A batch was written since activation.
    wrote: bool,
    readies: Vec<ReadyMon>,
    device_faults: Vec<FaultMon>,
    watchdogs: Vec<WatchMon>,
    acks: Vec<AckMon>,
}

/// A joint's readiness condition.
struct ReadyMon {
    joint: Arc<str>,
    state: usize,
    condition: Condition,
}

/// A device's fault field.
struct FaultMon {
    joint: Arc<str>,
    field: Arc<str>,
    state: usize,
    config: FaultConfig,
}

impl FaultMon {
    /// The fault `value` is, if any (allocates only then).
    fn check(&self, value: f64) -> Option<Fault> {
        if !value.is_finite() {
            return None;
        }
        let word = value as i64 as u64;
        let faulty = match self.config.kind {
            FaultKind::Bits => word != 0,
            FaultKind::Code => !self.config.ok.as_deref().unwrap_or(&[0]).contains(&word),
        };
        if faulty
            && self.config.kind == FaultKind::Code
            && self.config.watchdog_codes.contains(&word)
        {
            return Some(Fault::DeviceWatchdog {
                joint: self.joint.clone(),
                field: self.field.clone(),
                value: value.trunc(),
            });
        }
        faulty.then(|| Fault::Device {
            joint: self.joint.clone(),
            field: self.field.clone(),
            value: word,
            names: self
                .config
                .fault_names(word)
                .into_iter()
                .map(Arc::from)
                .collect(),
        })
    }
}

/// A joint's device-watchdog field.
struct WatchMon {
    joint: Arc<str>,
    field: Arc<str>,
    state: usize,
    condition: Condition,
    /// Seen true since activation.
    armed: bool,
}

/// Write times kept per sequenced command (the echo may lag this many writes and still
/// be timed exactly).
const ACK_RING: usize = 1024;

/// A sequenced command and its echo.
struct AckMon {
    command: usize,
    echo: usize,
    timeout: Duration,
    /// The sequence wraps at this (the field's range).
    modulus: u64,
    /// The last sequence number written (unwrapped).
    last: u64,
    /// The highest one echoed.
    acked: u64,
    /// When each of the last [`ACK_RING`] numbers was written.
    times: Box<[Instant]>,
    /// When the oldest write not echoed was made.
    pending_since: Option<Instant>,
}

impl AckMon {
    /// Takes echo value `e` (wrapped) into account; returns how long the oldest write
    /// not echoed has waited at `now`.
    fn lag(&mut self, e: f64, now: Instant) -> Option<Duration> {
        if e.is_finite() && e >= 0.0 {
            let m = self.modulus;
            let e = (e as u64) % m;
            // The newest number written that wraps to `e`.
            let back = (self.last % m + m - e) % m;
            if let Some(c) = self.last.checked_sub(back) {
                if c > self.acked {
                    self.acked = c;
                    self.pending_since = if c >= self.last {
                        None
                    } else if self.last - (c + 1) < ACK_RING as u64 {
                        Some(self.times[((c + 1) % ACK_RING as u64) as usize])
                    } else {
                        Some(self.times[((self.last + 1) % ACK_RING as u64) as usize])
                    };
                }
            }
        }
        self.pending_since.map(|t| now.saturating_duration_since(t))
    }

    /// The next sequence number, written at `now`: its wrapped value.
    fn next(&mut self, now: Instant) -> f64 {
        self.last += 1;
        self.times[(self.last % ACK_RING as u64) as usize] = now;
        if self.pending_since.is_none() {
            self.pending_since = Some(now);
        }
        (self.last % self.modulus) as f64
    }
}

/// The node a path names (`/<node>/…`).
fn node_of(path: &str) -> &str {
    path.trim_start_matches('/').split('/').next().unwrap_or("")
}

/// How far a sequence number of type `ty` counts before it wraps, or `None` for a type
/// that does not count.
fn sequence_modulus(ty: fcan_core::types::ScalarType) -> Option<u64> {
    use fcan_core::types::ScalarType as T;
    Some(match ty {
        T::U8 => 1 << 8,
        T::U16 => 1 << 16,
        T::U32 => 1 << 32,
        T::I8 => 1 << 7,
        T::I16 => 1 << 15,
        T::I32 => 1 << 31,
        T::U64 | T::I64 => 1 << 53,
        _ => return None,
    })
}

impl<M: MasterApi> Drop for Cycle<M> {
    /// Ends the I/O tasks. A cycle dropped while active sends nothing more: drop it after
    /// [`Cycle::deactivate`] to stop the nodes first (their watchdogs stop them anyway).
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The time now, on tokio's clock when inside a runtime (so a paused test clock rules
/// the loop as it rules the master), as a std `Instant` like [`fcan_master::Sample::at`].
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl<M: MasterApi> Cycle<M> {
    /// Checks `config` ([`CycleConfig::check`]), then against the schemas of the running
    /// nodes, waiting up to `wait` for nodes that do not run yet; subscribes the state
    /// topics and starts the I/O tasks. The cycle is [`Lifecycle::Inactive`].
    ///
    /// Errors name the interface and the field: an unknown topic (with the nearest
    /// name), a field the topic does not have (with those it has), a state on a command
    /// topic or the reverse, an array without an index, a command-topic field neither
    /// driven nor constant, a constant that does not fit its field.
    pub async fn configure(
        master: M,
        config: CycleConfig,
        wait: Duration,
    ) -> Result<Cycle<M>, CycleError> {
        config.check()?;
        let start = tokio::time::Instant::now();
        let layout = loop {
            let registry = master.registry().await?;
            match resolve::resolve(&config, &registry) {
                Ok(layout) => break layout,
                Err(Unresolved::Error(e)) => return Err(e),
                Err(Unresolved::Missing(nodes)) => {
                    if start.elapsed() >= wait {
                        return Err(CycleError::NodesMissing {
                            nodes,
                            waited: wait,
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        let layout = Arc::new(layout);
        let shared = Arc::new(Shared::new(
            layout.state_topics.iter().map(|t| t.picks.len()),
            layout.commands.len(),
        ));
        let cell_states: Vec<Vec<(usize, usize)>> = layout
            .state_topics
            .iter()
            .map(|topic| {
                topic
                    .picks
                    .iter()
                    .enumerate()
                    .map(|(pos, &(_, _, state))| (state, pos))
                    .collect()
            })
            .collect();
        let scratch = vec![0.0; shared.cells.iter().map(|c| c.len()).max().unwrap_or(0)];
        let mut tasks = Vec::new();
        for (t, topic) in layout.state_topics.iter().enumerate() {
            let rx = master.subscribe(&topic.name).await?;
            tasks.push(tokio::spawn(io::receive(
                rx,
                shared.clone(),
                layout.clone(),
                t,
            )));
        }
        tasks.push(tokio::spawn(io::watch_nodes(
            master.events(),
            shared.clone(),
            layout.clone(),
        )));
        tasks.push(tokio::spawn(io::writer(
            master.clone(),
            shared.clone(),
            layout.clone(),
            config.safe_stop.repeats,
            config.safe_stop_interval(),
        )));
        let n = layout.states.len();
        // The monitored fields sit after the interfaces, in `monitors()` order.
        let mut readies = Vec::new();
        let mut device_faults = Vec::new();
        let mut watchdogs = Vec::new();
        for (k, m) in config.monitors().enumerate() {
            let state = layout.interfaces + k;
            let Some(j) = config.joints.iter().find(|j| j.name == m.joint) else {
                continue;
            };
            match m.kind {
                config::MonitorKind::Ready => readies.push(ReadyMon {
                    joint: m.joint.into(),
                    state,
                    condition: j.ready.clone().expect("a ready monitor has its condition"),
                }),
                config::MonitorKind::Fault(i) => device_faults.push(FaultMon {
                    joint: m.joint.into(),
                    field: m.from.into(),
                    state,
                    config: j.faults[i].clone(),
                }),
                config::MonitorKind::Watchdog => watchdogs.push(WatchMon {
                    joint: m.joint.into(),
                    field: m.from.into(),
                    state,
                    condition: j
                        .watchdog
                        .clone()
                        .expect("a watchdog monitor has its condition"),
                    armed: false,
                }),
            }
        }
        let mut acks = Vec::new();
        for a in &config.acks {
            let command = layout.commands.iter().position(|c| *c.name == *a.command);
            let echo = layout.states[..layout.interfaces]
                .iter()
                .position(|s| *s.name == *a.echo);
            let (Some(command), Some(echo)) = (command, echo) else {
                return Err(CycleError::Config(format!(
                    "acks: `{}` / `{}`: not an interface",
                    a.command, a.echo
                )));
            };
            let Some(modulus) = sequence_modulus(layout.commands[command].ty) else {
                return Err(CycleError::Config(format!(
                    "acks: command `{}` is a {:?} field: a sequence number is an integer",
                    a.command, layout.commands[command].ty
                )));
            };
            acks.push(AckMon {
                command,
                echo,
                timeout: Duration::from_millis(a.timeout_ms),
                modulus,
                last: 0,
                acked: 0,
                times: vec![Instant::now(); ACK_RING].into_boxed_slice(),
                pending_since: None,
            });
        }
        let seeds = layout
            .commands
            .iter()
            .map(|c| c.initial.or(c.safe.value()).unwrap_or(0.0))
            .collect();
        Ok(Cycle {
            state_names: layout.states[..layout.interfaces]
                .iter()
                .map(|s| s.name.clone())
                .collect(),
            command_names: layout.commands.iter().map(|c| c.name.clone()).collect(),
            ranges: layout
                .commands
                .iter()
                .map(|c| command_range(c.ty))
                .collect(),
            recorder: stats::Recorder::new(config.period(), config.deadline_tolerance),
            master,
            config,
            layout,
            shared,
            lifecycle: Lifecycle::Inactive,
            cell_states,
            values: vec![0.0; n],
            ages: vec![Duration::MAX; n],
            stamps: vec![0; n],
            scratch,
            cycles: 0,
            last_read: None,
            tasks,
            commands: seeds,
            wrote: false,
            readies,
            device_faults,
            watchdogs,
            acks,
        })
    }

    /// Where the cycle is.
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// The latched fault, if any.
    pub fn fault(&self) -> Option<&Fault> {
        match &self.lifecycle {
            Lifecycle::Faulted(f) => Some(f),
            _ => None,
        }
    }

    /// The master the cycle runs on.
    pub fn master(&self) -> &M {
        &self.master
    }

    /// The nominal period (`1 / rate_hz`).
    pub fn period(&self) -> Duration {
        self.config.period()
    }

    /// The configuration.
    pub fn config(&self) -> &CycleConfig {
        &self.config
    }

    /// State names (`<joint>/<interface>`), by index.
    pub fn state_names(&self) -> &[Arc<str>] {
        &self.state_names
    }

    /// Command names, by index: the order [`Cycle::write`] takes them in.
    pub fn command_names(&self) -> &[Arc<str>] {
        &self.command_names
    }

    /// The index of state `<joint>/<interface>`.
    pub fn state_index(&self, name: &str) -> Option<usize> {
        self.state_names.iter().position(|n| &**n == name)
    }

    /// The index of command `<joint>/<interface>`.
    pub fn command_index(&self, name: &str) -> Option<usize> {
        self.command_names.iter().position(|n| &**n == name)
    }

    /// Activates:
    ///
    /// 1. waits until every mapped node runs;
    /// 2. calls the enable services in order (each answer checked against its
    ///    `expect`);
    /// 3. waits until every device is ready, polling every 20 ms for at most
    ///    `ready_timeout_ms` (3 s by default): every state fresh (younger than its
    ///    timeout), every joint's `ready` condition true, no fault field showing a fault.
    ///    The probe only reads states: it calls no service;
    /// 4. seeds the commands ([`Cycle::commands`]): an explicit `initial`, else the
    ///    measured value of the state of the same name, else the numeric `safe` value.
    ///
    /// Nothing is sent until the loop's first [`Cycle::write`]. A safe stop still
    /// running from a fault or a deactivation is waited for first. When a step fails
    /// or the timeout passes once an enable step has started, the `undo` calls of the
    /// steps started are made, last first, and the error says so; the error names every
    /// node, service, state and device still missing, and the cycle stays inactive.
    pub async fn activate(&mut self, timeout: Duration) -> Result<(), CycleError> {
        match &self.lifecycle {
            Lifecycle::Active => return Ok(()),
            Lifecycle::Faulted(f) => return Err(CycleError::Faulted(f.clone())),
            Lifecycle::Inactive => {}
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = |missing: Vec<String>| CycleError::ActivationTimeout {
            missing,
            waited: timeout,
        };
        if !io::wait_stopped(&self.shared, deadline).await {
            return Err(timed_out(vec![
                "the previous safe stop is still running".into()
            ]));
        }
        // 1. Nodes.
        loop {
            let nodes = self.master.nodes().await?;
            let missing: Vec<String> = self
                .layout
                .nodes
                .iter()
                .filter_map(|n| match nodes.iter().find(|i| i.id == n.id) {
                    Some(i) if i.phase == Phase::Running => None,
                    Some(i) => Some(format!("node {} is {}", n.name, i.phase)),
                    None => Some(format!("node {} is not on the bus", n.name)),
                })
                .collect();
            if missing.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(timed_out(missing));
            }
            tokio::time::sleep(PROBE_PERIOD).await;
        }
        // 2 and 3, undone on failure.
        let mut started = 0;
        if let Err(mut e) = self
            .enable_and_wait_ready(deadline, timeout, &mut started)
            .await
        {
            let undone = self.undo(started).await;
            if !undone.is_empty() {
                match &mut e {
                    CycleError::ActivationTimeout { missing, .. } => missing.extend(undone),
                    CycleError::EnableFailed { reason, .. } => {
                        reason.push_str(&format!("; {}", undone.join("; ")))
                    }
                    _ => {}
                }
            }
            return Err(e);
        }
        // 4. Seeds, from the states just read.
        for (i, c) in self.layout.commands.iter().enumerate() {
            self.commands[i] = match (c.initial, c.state) {
                (Some(v), _) => v,
                (None, Some(s)) if self.values[s].is_finite() => {
                    let (lo, hi) = command_range(c.ty);
                    self.values[s].clamp(lo, hi)
                }
                _ => c.safe.value().unwrap_or(0.0),
            };
        }
        for a in &mut self.acks {
            let echo = self.values[a.echo];
            let start = if echo.is_finite() && echo >= 0.0 {
                (echo as u64) % a.modulus
            } else {
                0
            };
            // The device's current echo counts as acknowledged.
            a.last = start;
            a.acked = start;
            a.pending_since = None;
            self.commands[a.command] = start as f64;
        }
        for (slot, &v) in self.shared.commands.iter().zip(&self.commands) {
            slot.store(v.to_bits(), std::sync::atomic::Ordering::Relaxed);
        }
        for w in &mut self.watchdogs {
            w.armed = false;
        }
        self.wrote = false;
        // A fault raised while inactive (a node that rebooted before activation) is
        // history: what matters is that everything is up now.
        self.shared.clear_fault();
        self.recorder.reset();
        self.cycles = 0;
        self.last_read = None;
        // The writer sends nothing until the loop's first `write` (`write` refuses while
        // inactive, so no batch is pending).
        self.shared.set_mode(WriteMode::Normal);
        self.lifecycle = Lifecycle::Active;
        Ok(())
    }

    /// Activation's steps 2 (enable services; `started` counts the steps called) and 3
    /// (readiness).
    async fn enable_and_wait_ready(
        &mut self,
        deadline: tokio::time::Instant,
        timeout: Duration,
        started: &mut usize,
    ) -> Result<(), CycleError> {
        let timed_out = |missing: Vec<String>| CycleError::ActivationTimeout {
            missing,
            waited: timeout,
        };
        for step in &self.config.enable {
            let request = fcan_master::value::Value::from_json(&step.request).map_err(|e| {
                CycleError::EnableFailed {
                    service: step.call.clone(),
                    reason: format!("request: {e}"),
                }
            })?;
            *started += 1;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let answer =
                match tokio::time::timeout(left, self.master.call(&step.call, request)).await {
                    Err(_) => {
                        return Err(timed_out(vec![format!(
                            "service {} did not answer",
                            step.call
                        )]))
                    }
                    Ok(Err(e)) => {
                        return Err(CycleError::EnableFailed {
                            service: step.call.clone(),
                            reason: e.to_string(),
                        })
                    }
                    Ok(Ok(v)) => v,
                };
            if let Some(expect) = &step.expect {
                io::check_expected(&answer, expect).map_err(|reason| CycleError::EnableFailed {
                    service: step.call.clone(),
                    reason,
                })?;
            }
        }
        let ready_deadline = deadline.min(tokio::time::Instant::now() + self.config.ready_wait());
        loop {
            self.snapshot(now());
            let missing = self.not_ready();
            if missing.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= ready_deadline {
                return Err(timed_out(missing));
            }
            tokio::time::sleep(PROBE_PERIOD).await;
        }
    }

    /// What keeps the devices from being ready, for people: stale states, `ready`
    /// conditions not met, faults shown.
    fn not_ready(&self) -> Vec<String> {
        let mut missing: Vec<String> = self.layout.states[..self.layout.interfaces]
            .iter()
            .enumerate()
            .filter(|(i, s)| self.ages[*i] > s.timeout)
            .map(|(i, s)| {
                if self.stamps[i] == 0 {
                    format!("state {} ({}) never received", s.name, s.from)
                } else {
                    format!("state {} ({}) is {:?} old", s.name, s.from, self.ages[i])
                }
            })
            .collect();
        for r in &self.readies {
            let ok = self.stamps[r.state] != 0 && r.condition.holds(self.values[r.state]);
            if !ok {
                let is = if self.stamps[r.state] == 0 {
                    "never received".to_string()
                } else {
                    format!("is {}", self.values[r.state])
                };
                missing.push(format!(
                    "device {} (joint {}) not ready: {} ({is})",
                    node_of(&r.condition.from),
                    r.joint,
                    r.condition.describe()
                ));
            }
        }
        for f in &self.device_faults {
            if self.stamps[f.state] == 0 {
                continue;
            }
            if let Some(fault) = f.check(self.values[f.state]) {
                missing.push(format!(
                    "device {} (joint {}) not ready: {fault}",
                    node_of(&f.field),
                    f.joint
                ));
            }
        }
        missing
    }

    /// Calls the `undo` of the first `started` enable steps, last first; what happened,
    /// for people.
    async fn undo(&self, started: usize) -> Vec<String> {
        let mut done = Vec::new();
        for step in self.config.enable[..started.min(self.config.enable.len())]
            .iter()
            .rev()
        {
            let Some(undo) = &step.undo else { continue };
            let outcome = match fcan_master::value::Value::from_json(&undo.request) {
                Err(e) => format!("request: {e}"),
                Ok(request) => {
                    match tokio::time::timeout(UNDO_TIMEOUT, self.master.call(&undo.call, request))
                        .await
                    {
                        Err(_) => "no answer".to_string(),
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(v)) => format!("answered {}", v.to_json()),
                    }
                }
            };
            done.push(format!("undone: {} ({outcome})", undo.call));
        }
        done
    }

    /// Copies every state cell into `values`/`stamps` and computes ages at `now`.
    fn snapshot(&mut self, now: Instant) {
        for (c, cell) in self.shared.cells.iter().enumerate() {
            let n = cell.len();
            let Some(scratch) = self.scratch.get_mut(..n) else {
                continue;
            };
            // A cell being written on every try keeps this state's previous values
            // (their age tells the loop how old they are).
            let Some(at) = cell.read(scratch) else {
                continue;
            };
            for &(state, pos) in &self.cell_states[c] {
                self.values[state] = scratch[pos];
                self.stamps[state] = at;
            }
        }
        for (i, &stamp) in self.stamps.iter().enumerate() {
            self.ages[i] = if stamp == 0 {
                Duration::MAX
            } else {
                self.shared.age(stamp, now)
            };
        }
    }

    /// Reads the newest states (lock-free: copies from the cells the receive side
    /// writes; never waits on I/O, never allocates) and checks them: a state past its
    /// feedback timeout, or a fault the I/O side raised, latches the cycle in a fault
    /// and starts the safe stop. The states stay readable through
    /// [`Cycle::states`] after a fault.
    pub fn read(&mut self) -> Result<States<'_>, CycleError> {
        let started = now();
        match &self.lifecycle {
            Lifecycle::Active => {}
            Lifecycle::Faulted(f) => return Err(CycleError::Faulted(f.clone())),
            Lifecycle::Inactive => return Err(CycleError::NotActive),
        }
        if let Some(last) = self.last_read {
            self.recorder
                .period(started.saturating_duration_since(last));
        }
        self.last_read = Some(started);
        self.cycles += 1;
        self.snapshot(started);
        let mut fault = self.shared.take_fault();
        if fault.is_none() {
            for (i, s) in self.layout.states[..self.layout.interfaces]
                .iter()
                .enumerate()
            {
                if self.ages[i] > s.timeout {
                    fault = Some(Fault::Stale {
                        state: s.name.clone(),
                        from: s.from.clone(),
                        age: self.ages[i],
                        timeout: s.timeout,
                    });
                    break;
                }
            }
        }
        if fault.is_none() {
            fault = self.check_devices(started);
        }
        let result = match fault {
            Some(f) => {
                self.latch(f.clone());
                Err(CycleError::Faulted(f))
            }
            None => Ok(()),
        };
        self.recorder.read(now().saturating_duration_since(started));
        result.map(|()| self.states())
    }

    /// The devices' own word, in order: a fault field showing a fault, a watchdog field
    /// that went false once seen true, a sequenced command whose echo lags past its
    /// timeout. Allocates only to build the fault it returns.
    fn check_devices(&mut self, now: Instant) -> Option<Fault> {
        for f in &self.device_faults {
            if self.stamps[f.state] != 0 {
                if let Some(fault) = f.check(self.values[f.state]) {
                    return Some(fault);
                }
            }
        }
        for w in &mut self.watchdogs {
            if self.stamps[w.state] == 0 {
                continue;
            }
            let v = self.values[w.state];
            if w.condition.holds(v) {
                w.armed = true;
            } else if w.armed {
                return Some(Fault::DeviceWatchdog {
                    joint: w.joint.clone(),
                    field: w.field.clone(),
                    value: v,
                });
            }
        }
        for a in &mut self.acks {
            if let Some(lag) = a.lag(self.values[a.echo], now) {
                if lag > a.timeout {
                    return Some(Fault::AckTimeout {
                        command: self.command_names[a.command].clone(),
                        echo: self.state_names[a.echo].clone(),
                        lag,
                        timeout: a.timeout,
                    });
                }
            }
        }
        None
    }

    /// The states of the last read (or of activation), whatever the lifecycle.
    pub fn states(&self) -> States<'_> {
        let n = self.layout.interfaces;
        States {
            names: &self.state_names,
            values: &self.values[..n],
            ages: &self.ages[..n],
        }
    }

    /// The commands in force, by command index: after activation their seeds (an
    /// explicit `initial`, else the measured value of the state of the same name, else
    /// the numeric `safe` value), then the last batch written. A loop that changes only
    /// some commands starts from these, so a command it never set never moves its
    /// joint.
    pub fn commands(&self) -> &[f64] {
        &self.commands
    }

    fn latch(&mut self, fault: Fault) {
        if self.shared.mode() == WriteMode::Normal {
            self.shared.set_mode(WriteMode::SafeStop);
        }
        self.lifecycle = Lifecycle::Faulted(fault);
    }

    /// Writes every command of this cycle (by [`Cycle::command_names`] index) as one
    /// batch: stored for the writer task, which sends it as one `publish_many`. Never
    /// waits on I/O, never allocates. A value its field cannot carry (not finite, out
    /// of range) refuses the whole batch and the previous commands stay in force; the
    /// cycle does not fault (the application decides).
    pub fn write(&mut self, commands: &[f64]) -> Result<(), CycleError> {
        let started = now();
        match &self.lifecycle {
            Lifecycle::Active => {}
            Lifecycle::Faulted(f) => return Err(CycleError::Faulted(f.clone())),
            Lifecycle::Inactive => return Err(CycleError::NotActive),
        }
        if commands.len() != self.ranges.len() {
            return Err(CycleError::CommandCount {
                expected: self.ranges.len(),
                got: commands.len(),
            });
        }
        for (i, (&v, &(lo, hi))) in commands.iter().zip(&self.ranges).enumerate() {
            let v_checked = if self.layout.commands[i].ty.is_float() {
                v
            } else {
                v.round()
            };
            if !(v.is_finite() && v_checked >= lo && v_checked <= hi) {
                return Err(CycleError::BadCommand {
                    command: self.command_names[i].clone(),
                    value: v,
                });
            }
        }
        self.commands.copy_from_slice(commands);
        // Sequenced commands: the next number, whatever the loop passed.
        for a in &mut self.acks {
            self.commands[a.command] = a.next(started);
        }
        for (slot, &v) in self.shared.commands.iter().zip(&self.commands) {
            slot.store(v.to_bits(), std::sync::atomic::Ordering::Relaxed);
        }
        self.wrote = true;
        self.shared
            .written
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        self.shared.wake.notify_one();
        self.recorder
            .write(now().saturating_duration_since(started));
        Ok(())
    }

    /// Deactivates: the commands in force (the last batch written) are sent once more,
    /// per node, and then nothing: no safe stop, no disable call, so each device keeps
    /// its last command (a position joint stays where it was sent) until its own
    /// watchdog or the next activation. Nothing is sent when nothing was written since
    /// activation. Waited for (bounded). On a faulted cycle it waits for the fault's safe
    /// stop and the fault stays latched. To stop the devices first, use
    /// [`Cycle::safe_stop`].
    pub async fn deactivate(&mut self) -> Result<(), CycleError> {
        if self.lifecycle == Lifecycle::Active {
            self.shared.set_mode(if self.wrote {
                WriteMode::Flush
            } else {
                WriteMode::Silent
            });
        }
        self.wait_inactive().await
    }

    /// Stops and deactivates: the bounded safe stop (each command's `safe` value, a
    /// `hold` the measured value of its state, `safe_stop.repeats` times, then silence),
    /// waited for; the cycle becomes [`Lifecycle::Inactive`]. On a faulted cycle it
    /// waits for the fault's safe stop and the fault stays latched.
    pub async fn safe_stop(&mut self) -> Result<(), CycleError> {
        if self.lifecycle == Lifecycle::Active {
            self.shared.set_mode(WriteMode::SafeStop);
        }
        self.wait_inactive().await
    }

    /// Waits for the stop or flush under way, then leaves `Active`.
    async fn wait_inactive(&mut self) -> Result<(), CycleError> {
        let bound = self.safe_stop_bound();
        let deadline = tokio::time::Instant::now() + bound;
        let stopped = io::wait_stopped(&self.shared, deadline).await;
        if self.lifecycle == Lifecycle::Active {
            self.lifecycle = Lifecycle::Inactive;
        }
        if !stopped {
            return Err(CycleError::ActivationTimeout {
                missing: vec!["the safe stop did not finish (the master is not answering)".into()],
                waited: bound,
            });
        }
        Ok(())
    }

    /// How long a safe stop may take: its sends, and a second for the master.
    fn safe_stop_bound(&self) -> Duration {
        self.config.safe_stop_interval() * self.config.safe_stop.repeats + Duration::from_secs(1)
    }

    /// Clears a latched fault: the cycle becomes [`Lifecycle::Inactive`] and must be
    /// activated again (which checks everything afresh). Returns the fault cleared.
    pub fn clear_fault(&mut self) -> Option<Fault> {
        match std::mem::replace(&mut self.lifecycle, Lifecycle::Inactive) {
            Lifecycle::Faulted(f) => {
                self.shared.clear_fault();
                Some(f)
            }
            other => {
                self.lifecycle = other;
                None
            }
        }
    }

    /// What the loop measured since activation.
    pub fn stats(&self) -> CycleStats {
        use std::sync::atomic::Ordering::Relaxed;
        let mut s = self.recorder.snapshot(self.cycles);
        s.batches_written = self.shared.written.load(Relaxed);
        s.batches_sent = self.shared.sent.load(Relaxed);
        s.batches_coalesced = self.shared.coalesced.load(Relaxed);
        s.safe_stop_sends = self.shared.safe_sends.load(Relaxed);
        s.flush_sends = self.shared.flush_sends.load(Relaxed);
        s
    }
}
