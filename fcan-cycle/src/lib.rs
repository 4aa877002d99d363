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
//!   called and their answers checked, every state fresh — or an error naming what is
//!   missing when the timeout passes.
//! * **The loop**: [`Cycle::read`] returns the newest states with their ages, copied
//!   from lock-free cells the receive side writes (the loop never waits on I/O);
//!   [`Cycle::write`] hands every command of the cycle to the writer task as one batch
//!   (one `publish_many`: a frame shared by several commands goes out once). Neither
//!   allocates nor blocks after activation.
//! * **Faults**: a state older than its feedback timeout (host side; the device's own
//!   command watchdog is separate and stays), a mapped node offline, rebooted or failed,
//!   a batch the master refused. The first fault is latched: `read` and `write` answer
//!   [`CycleError::Faulted`] until [`Cycle::clear_fault`], and a **bounded safe stop**
//!   runs at once: the configured safe commands, sent `safe_stop.repeats` times, then
//!   silence (the nodes' own watchdogs take over).
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
    CommandConfig, CommandItem, CycleConfig, JointConfig, SafeStopConfig, ServiceStep, StateConfig,
    StateItem,
};
pub use stats::{CycleStats, Spread};

use fcan_master::api::MasterApi;
use fcan_master::engine::Phase;
use fcan_master::master::MasterError;
use resolve::{command_range, Layout, Unresolved};
use store::{Shared, WriteMode};

/// Why a cycle stopped: latched until [`Cycle::clear_fault`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Fault {
    /// A state was not refreshed within its feedback timeout.
    #[error("state {state} ({from}) is {age:?} old, past its feedback timeout of {timeout:?}")]
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
        Ok(Cycle {
            state_names: layout.states.iter().map(|s| s.name.clone()).collect(),
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

    /// Activates: waits until every mapped node runs, calls the enable services in order
    /// (each answer checked against its `expect`), then waits until every state is
    /// fresh (younger than its timeout). A safe stop still running from a fault or a
    /// deactivation is waited for first. On timeout the error names every node, service
    /// and state still missing; the cycle stays inactive.
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
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // 2. Enable services.
        for step in &self.config.enable {
            let request = fcan_master::value::Value::from_json(&step.request).map_err(|e| {
                CycleError::EnableFailed {
                    service: step.call.clone(),
                    reason: format!("request: {e}"),
                }
            })?;
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
        // 3. Fresh states.
        loop {
            self.snapshot(now());
            let missing: Vec<String> = self
                .layout
                .states
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
            if missing.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(timed_out(missing));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
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
            for (i, s) in self.layout.states.iter().enumerate() {
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

    /// The states of the last read (or of activation), whatever the lifecycle.
    pub fn states(&self) -> States<'_> {
        States {
            names: &self.state_names,
            values: &self.values,
            ages: &self.ages,
        }
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
        for (slot, &v) in self.shared.commands.iter().zip(commands) {
            slot.store(v.to_bits(), std::sync::atomic::Ordering::Relaxed);
        }
        self.shared
            .written
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        self.shared.wake.notify_one();
        self.recorder
            .write(now().saturating_duration_since(started));
        Ok(())
    }

    /// Deactivates: the bounded safe stop (the safe commands `safe_stop.repeats` times,
    /// then silence), waited for. On a faulted cycle it waits for the fault's safe stop
    /// and the fault stays latched.
    pub async fn deactivate(&mut self) -> Result<(), CycleError> {
        if self.lifecycle == Lifecycle::Active {
            self.shared.set_mode(WriteMode::SafeStop);
        }
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
        s
    }
}
