//! What a control loop reads and writes: joints, their state and command interfaces,
//! each mapped to a field of a node's topic ([`CycleConfig`]), from a file (any serde
//! format: JSON here, YAML through the application's YAML crate) or a builder.
//!
//! The mapping is text checked in two steps: [`CycleConfig::check`] (syntax, names,
//! duplicates: no master needed, so a bad file fails at start-up) and
//! [`super::Cycle::configure`] (against the schemas the nodes serve).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::CycleError;

/// A control loop's configuration: its rate, its joints, what activation calls and how a
/// safe stop is made.
///
/// ```
/// use fcan_cycle::CycleConfig;
/// let config = CycleConfig::from_json(r#"{
///   "rate_hz": 500,
///   "feedback_timeout_ms": 50,
///   "joints": [
///     { "name": "left_wheel",
///       "states": [ { "interface": "velocity", "from": "/motor_driver1/motor0/feedback.velocity" } ],
///       "commands": [ { "interface": "velocity", "to": "/motor_driver1/motor0/target{type: 1}.value", "safe": 0.0 } ] }
///   ]
/// }"#).unwrap();
/// assert_eq!(config.states().count(), 1);
///
/// // The same with the builder.
/// let built = CycleConfig::new(500.0)
///     .feedback_timeout(std::time::Duration::from_millis(50))
///     .state("left_wheel/velocity", "/motor_driver1/motor0/feedback.velocity")
///     .command("left_wheel/velocity", "/motor_driver1/motor0/target{type: 1}.value", 0.0);
/// assert_eq!(built.states().collect::<Vec<_>>(), config.states().collect::<Vec<_>>());
/// ```
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CycleConfig {
    /// The loop's nominal rate: the period statistics and deadline misses are measured
    /// against `1 / rate_hz`, and the safe stop repeats at that period.
    pub rate_hz: f64,
    /// How old a state may grow before the loop faults (per state: [`StateConfig::timeout_ms`]).
    /// This is the host-side feedback timeout; the device's own command watchdog (e.g. the
    /// example motor's `command_timeout_ms`) is separate and stays the last line.
    #[serde(default = "default_feedback_timeout_ms")]
    pub feedback_timeout_ms: u64,
    /// A cycle is a deadline miss when its period exceeds the nominal period by more
    /// than this fraction of it.
    #[serde(default = "default_deadline_tolerance")]
    pub deadline_tolerance: f64,
    /// The joints, in the order their interfaces are numbered.
    pub joints: Vec<JointConfig>,
    /// Services activation calls, in order, after every node runs and before the states
    /// are waited for (e.g. an enable or clear-fault service). A step's `undo` is called
    /// when a later part of the activation fails.
    #[serde(default)]
    pub enable: Vec<ServiceStep>,
    /// How long activation waits for every device to report ready (its `ready`
    /// condition, no fault, every state fresh), polling every 20 ms.
    #[serde(default = "default_ready_timeout_ms")]
    pub ready_timeout_ms: u64,
    /// Sequenced commands: each write increments a sequence command, and the device's
    /// echo of it must follow within an acknowledgement timeout.
    #[serde(default)]
    pub acks: Vec<AckConfig>,
    /// How the loop stops on a fault (and on [`super::Cycle::safe_stop`]).
    #[serde(default)]
    pub safe_stop: SafeStopConfig,
}

fn default_ready_timeout_ms() -> u64 {
    3000
}

fn default_feedback_timeout_ms() -> u64 {
    100
}

fn default_deadline_tolerance() -> f64 {
    0.1
}

/// One joint (a wheel, an axis): its state and command interfaces.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct JointConfig {
    /// The joint's name (`left_wheel`); an interface is named `<joint>/<interface>`.
    pub name: String,
    /// What the loop reads.
    #[serde(default)]
    pub states: Vec<StateConfig>,
    /// What the loop writes.
    #[serde(default)]
    pub commands: Vec<CommandConfig>,
    /// When the joint's device is ready to be driven: activation waits for it.
    #[serde(default)]
    pub ready: Option<Condition>,
    /// The device's own fault words: a fault (a bit set, or a code not `ok`) latches
    /// [`super::Fault::Device`], naming the joint, the field and the bits.
    #[serde(default)]
    pub faults: Vec<FaultConfig>,
    /// A field the device holds true while it follows the loop's commands and clears when
    /// its own command watchdog stops it: once seen true after activation, its clearing
    /// latches [`super::Fault::DeviceWatchdog`].
    #[serde(default)]
    pub watchdog: Option<Condition>,
}

/// A condition on one state field (`/<node>/<ns>/<topic>.<field>`): the field equals
/// `equals`, or is non-zero (true) when `equals` is not given.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Condition {
    /// The field.
    pub from: String,
    /// The value that satisfies it (default: any non-zero value).
    #[serde(default)]
    pub equals: Option<f64>,
}

impl Condition {
    /// `from` non-zero, or equal to `equals`.
    pub fn new(from: &str, equals: Option<f64>) -> Condition {
        Condition {
            from: from.to_string(),
            equals,
        }
    }

    /// Whether `v` satisfies the condition.
    pub fn holds(&self, v: f64) -> bool {
        match self.equals {
            Some(want) => v == want,
            None => v != 0.0 && !v.is_nan(),
        }
    }

    /// `field = 2` or `field ≠ 0`, for people.
    pub fn describe(&self) -> String {
        match self.equals {
            Some(v) => format!("{} = {v}", self.from),
            None => format!("{} ≠ 0", self.from),
        }
    }
}

/// How a device's fault field reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum FaultKind {
    /// A bit word: any bit set is a fault, each named by `names` (else `bit N`).
    #[default]
    Bits,
    /// A code: any value not in `ok` is a fault, named by `names` (else `code N`).
    Code,
}

/// One of a device's own fault fields (the RobStride feedback's six fault bits or its
/// type-21 fault word, an MIT motor's error code).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct FaultConfig {
    /// `/<node>/<ns>/<topic>.<field>`: an integer (or bool) field of an s2m topic.
    pub from: String,
    /// `bits` (default) or `code`.
    #[serde(default)]
    pub kind: FaultKind,
    /// Names, by bit number (`bits`) or by code (`code`): `{0: undervoltage, …}`.
    #[serde(default)]
    pub names: BTreeMap<u64, String>,
    /// For `code`: the values that are not faults (default `[0]`).
    #[serde(default)]
    pub ok: Option<Vec<u64>>,
    /// For `code`: the values that say the device's own command watchdog expired (a
    /// Damiao motor's `0xD`, communication lost): reported as
    /// [`super::Fault::DeviceWatchdog`], not as a device fault.
    #[serde(default)]
    pub watchdog_codes: Vec<u64>,
}

impl FaultConfig {
    /// A bit word read from `from`, its bits named by `names` (bit, name).
    pub fn bits(from: &str, names: &[(u64, &str)]) -> FaultConfig {
        FaultConfig {
            from: from.to_string(),
            kind: FaultKind::Bits,
            names: names.iter().map(|(b, n)| (*b, n.to_string())).collect(),
            ok: None,
            watchdog_codes: Vec::new(),
        }
    }

    /// A code read from `from`: values in `ok` are healthy, the others named by `names`.
    pub fn code(from: &str, ok: &[u64], names: &[(u64, &str)]) -> FaultConfig {
        FaultConfig {
            from: from.to_string(),
            kind: FaultKind::Code,
            names: names.iter().map(|(b, n)| (*b, n.to_string())).collect(),
            ok: Some(ok.to_vec()),
            watchdog_codes: Vec::new(),
        }
    }

    /// Codes that say the device's own command watchdog expired (`kind: code`).
    pub fn watchdog_codes(mut self, codes: &[u64]) -> FaultConfig {
        self.watchdog_codes = codes.to_vec();
        self
    }

    /// The names of what `value` says is wrong: empty when it is no fault.
    pub fn fault_names(&self, value: u64) -> Vec<String> {
        match self.kind {
            FaultKind::Bits => (0..64u64)
                .filter(|b| value & (1 << b) != 0)
                .map(|b| {
                    self.names
                        .get(&b)
                        .cloned()
                        .unwrap_or_else(|| format!("bit {b}"))
                })
                .collect(),
            FaultKind::Code => {
                let ok = self.ok.as_deref().unwrap_or(&[0]);
                if ok.contains(&value) {
                    Vec::new()
                } else {
                    vec![self
                        .names
                        .get(&value)
                        .cloned()
                        .unwrap_or_else(|| format!("code {value}"))]
                }
            }
        }
    }
}

/// A sequenced command and its acknowledgement: the cycle sets `command` (an integer
/// command interface, `<joint>/<interface>`) to a sequence number it increments at every
/// write, whatever value the loop passes for it, and the device echoes it in `echo` (a
/// state interface). When the oldest write not yet echoed is older than `timeout_ms`, the
/// cycle latches [`super::Fault::AckTimeout`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AckConfig {
    /// The sequence command, `<joint>/<interface>`.
    pub command: String,
    /// The state echoing it, `<joint>/<interface>`.
    pub echo: String,
    /// The acknowledgement timeout.
    pub timeout_ms: u64,
}

/// A state interface: one field of an s2m topic.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct StateConfig {
    /// `position`, `velocity`, …
    pub interface: String,
    /// `/<node>/<ns>/<topic>.<field>` or `….<field>[<i>]` for an array element.
    pub from: String,
    /// This state's feedback timeout, if not [`CycleConfig::feedback_timeout_ms`].
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// A command interface: one field of an m2s topic.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CommandConfig {
    /// `velocity`, `effort`, …
    pub interface: String,
    /// `/<node>/<ns>/<topic>{<field>: <value>, …}.<field>`: the topic, constants for
    /// the fields no command drives (`{type: 1}` selects velocity mode on the example
    /// motor), and the field this command drives.
    pub to: String,
    /// What the safe stop sends (required: every command says how it stops): a number,
    /// or `hold` (the last measured value of the state interface of the same
    /// `<joint>/<interface>` name, taken when the stop starts).
    pub safe: Safe,
    /// The command's value at activation. Without it, a command with a state interface
    /// of the same name starts from that state's value measured at activation; any other
    /// starts from its numeric `safe` value.
    #[serde(default)]
    pub initial: Option<f64>,
}

/// What a command's safe stop sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Safe {
    /// This value.
    Value(f64),
    /// The last measured value of the state interface of the same name (`hold` in a
    /// file): a position joint stops where it is.
    Hold,
}

impl Safe {
    /// The number, unless `Hold`.
    pub fn value(self) -> Option<f64> {
        match self {
            Safe::Value(v) => Some(v),
            Safe::Hold => None,
        }
    }
}

impl From<f64> for Safe {
    fn from(v: f64) -> Safe {
        Safe::Value(v)
    }
}

impl std::fmt::Display for Safe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Safe::Value(v) => write!(f, "{v}"),
            Safe::Hold => f.write_str("hold"),
        }
    }
}

impl<'de> Deserialize<'de> for Safe {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Safe, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Safe;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number or `hold`")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Safe, E> {
                Ok(Safe::Value(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Safe, E> {
                Ok(Safe::Value(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Safe, E> {
                Ok(Safe::Value(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Safe, E> {
                if v == "hold" {
                    Ok(Safe::Hold)
                } else {
                    Err(E::custom(format!(
                        "safe: `{v}` is neither a number nor `hold`"
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A service called during activation.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServiceStep {
    /// `/<node>/<ns>/<service>`.
    pub call: String,
    /// The request, as JSON (`{}` when omitted).
    #[serde(default = "empty_object")]
    pub request: serde_json::Value,
    /// Fields the response must hold, e.g. `{"success": true}`; any other answer fails
    /// the activation, naming the service and what it answered.
    #[serde(default)]
    pub expect: Option<serde_json::Value>,
    /// What undoes this step (a disable, a stop), called when a later part of the
    /// activation fails, or this step itself fails or times out (it may have acted).
    #[serde(default)]
    pub undo: Option<UndoStep>,
}

/// The call that undoes an enable step.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct UndoStep {
    /// `/<node>/<ns>/<service>`.
    pub call: String,
    /// The request, as JSON (`{}` when omitted).
    #[serde(default = "empty_object")]
    pub request: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// The bounded safe stop: the safe commands sent `repeats` times, `interval_ms` apart
/// (by default the loop's period), then nothing: the nodes' own command watchdogs take
/// over from there.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SafeStopConfig {
    /// How many times the safe commands are sent (≥ 1).
    #[serde(default = "default_repeats")]
    pub repeats: u32,
    /// Time between two sends, in ms (default: the loop's period).
    #[serde(default)]
    pub interval_ms: Option<f64>,
}

fn default_repeats() -> u32 {
    3
}

impl Default for SafeStopConfig {
    fn default() -> Self {
        SafeStopConfig {
            repeats: default_repeats(),
            interval_ms: None,
        }
    }
}

/// A state interface as the loop numbers it (see [`CycleConfig::states`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StateItem<'a> {
    /// `<joint>/<interface>`.
    pub name: String,
    /// Where it comes from.
    pub from: &'a str,
    /// Its feedback timeout.
    pub timeout: Duration,
}

/// A command interface as the loop numbers it (see [`CycleConfig::commands`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CommandItem<'a> {
    /// `<joint>/<interface>`.
    pub name: String,
    /// Where it goes.
    pub to: &'a str,
    /// Its safe value.
    pub safe: Safe,
    /// Its explicit initial value.
    pub initial: Option<f64>,
}

/// What a monitored field (not an interface) tells the cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MonitorKind {
    Ready,
    Fault(usize),
    Watchdog,
}

/// A field the cycle reads for itself (readiness, faults, the device watchdog).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MonitorItem<'a> {
    pub joint: &'a str,
    pub kind: MonitorKind,
    pub from: &'a str,
}

impl CycleConfig {
    /// An empty configuration for a loop at `rate_hz`, with the defaults (feedback
    /// timeout 100 ms, deadline tolerance 10 %, safe stop 3 times at the loop's period).
    pub fn new(rate_hz: f64) -> CycleConfig {
        CycleConfig {
            rate_hz,
            feedback_timeout_ms: default_feedback_timeout_ms(),
            deadline_tolerance: default_deadline_tolerance(),
            joints: Vec::new(),
            enable: Vec::new(),
            ready_timeout_ms: default_ready_timeout_ms(),
            acks: Vec::new(),
            safe_stop: SafeStopConfig::default(),
        }
    }

    /// Parses a JSON configuration (the fields of this struct) and [checks](Self::check)
    /// it. Any serde format works the same way: deserialize a `CycleConfig`, then call
    /// `check`.
    pub fn from_json(text: &str) -> Result<CycleConfig, CycleError> {
        let config: CycleConfig = serde_json::from_str(text)
            .map_err(|e| CycleError::Config(format!("cycle configuration: {e}")))?;
        config.check()?;
        Ok(config)
    }

    /// Sets the default feedback timeout.
    pub fn feedback_timeout(mut self, timeout: Duration) -> CycleConfig {
        self.feedback_timeout_ms = timeout.as_millis() as u64;
        self
    }

    /// Adds a state interface `<joint>/<interface>` read from `from`.
    pub fn state(mut self, name: &str, from: &str) -> CycleConfig {
        let (joint, interface) = split_name(name);
        self.joint(joint).states.push(StateConfig {
            interface: interface.to_string(),
            from: from.to_string(),
            timeout_ms: None,
        });
        self
    }

    /// Adds a command interface `<joint>/<interface>` written to `to`, with its safe
    /// value: a number, or [`Safe::Hold`].
    pub fn command(mut self, name: &str, to: &str, safe: impl Into<Safe>) -> CycleConfig {
        let (joint, interface) = split_name(name);
        self.joint(joint).commands.push(CommandConfig {
            interface: interface.to_string(),
            to: to.to_string(),
            safe: safe.into(),
            initial: None,
        });
        self
    }

    /// Gives command `<joint>/<interface>` (added before) an explicit initial value.
    pub fn initial(mut self, name: &str, value: f64) -> CycleConfig {
        let (joint, interface) = split_name(name);
        if let Some(c) = self
            .joint(joint)
            .commands
            .iter_mut()
            .find(|c| c.interface == interface)
        {
            c.initial = Some(value);
        }
        self
    }

    /// Sets joint `joint`'s readiness condition.
    pub fn ready(mut self, joint: &str, condition: Condition) -> CycleConfig {
        self.joint(joint).ready = Some(condition);
        self
    }

    /// Adds a fault field to joint `joint`.
    pub fn fault(mut self, joint: &str, fault: FaultConfig) -> CycleConfig {
        self.joint(joint).faults.push(fault);
        self
    }

    /// Sets joint `joint`'s device-watchdog field: true while the device follows
    /// commands.
    pub fn watchdog(mut self, joint: &str, condition: Condition) -> CycleConfig {
        self.joint(joint).watchdog = Some(condition);
        self
    }

    /// Adds a sequenced command: `command` carries a sequence number, `echo` its echo,
    /// which must follow within `timeout`.
    pub fn ack(mut self, command: &str, echo: &str, timeout: Duration) -> CycleConfig {
        self.acks.push(AckConfig {
            command: command.to_string(),
            echo: echo.to_string(),
            timeout_ms: timeout.as_millis() as u64,
        });
        self
    }

    /// Sets how long activation waits for the devices to be ready.
    pub fn ready_timeout(mut self, timeout: Duration) -> CycleConfig {
        self.ready_timeout_ms = timeout.as_millis() as u64;
        self
    }

    /// Adds a service activation calls, with the response fields it must return.
    pub fn enable(
        mut self,
        service: &str,
        request: serde_json::Value,
        expect: Option<serde_json::Value>,
    ) -> CycleConfig {
        self.enable.push(ServiceStep {
            call: service.to_string(),
            request,
            expect,
            undo: None,
        });
        self
    }

    /// Gives the last enable step added the call that undoes it.
    pub fn undo(mut self, service: &str, request: serde_json::Value) -> CycleConfig {
        if let Some(step) = self.enable.last_mut() {
            step.undo = Some(UndoStep {
                call: service.to_string(),
                request,
            });
        }
        self
    }

    /// Sets the safe stop: `repeats` sends, `interval` apart.
    pub fn safe_stop(mut self, repeats: u32, interval: Duration) -> CycleConfig {
        self.safe_stop = SafeStopConfig {
            repeats,
            interval_ms: Some(interval.as_secs_f64() * 1e3),
        };
        self
    }

    fn joint(&mut self, name: &str) -> &mut JointConfig {
        let i = match self.joints.iter().position(|j| j.name == name) {
            Some(i) => i,
            None => {
                self.joints.push(JointConfig {
                    name: name.to_string(),
                    states: Vec::new(),
                    commands: Vec::new(),
                    ready: None,
                    faults: Vec::new(),
                    watchdog: None,
                });
                self.joints.len() - 1
            }
        };
        &mut self.joints[i]
    }

    /// Every state interface, numbered in order (joint by joint): the index of a state
    /// in [`super::States`].
    pub fn states(&self) -> impl Iterator<Item = StateItem<'_>> {
        self.joints.iter().flat_map(move |j| {
            j.states.iter().map(move |s| StateItem {
                name: format!("{}/{}", j.name, s.interface),
                from: &s.from,
                timeout: Duration::from_millis(s.timeout_ms.unwrap_or(self.feedback_timeout_ms)),
            })
        })
    }

    /// Every command interface, numbered in order: the index of a command in the slice
    /// [`super::Cycle::write`] takes.
    pub fn commands(&self) -> impl Iterator<Item = CommandItem<'_>> {
        self.joints.iter().flat_map(|j| {
            j.commands.iter().map(move |c| CommandItem {
                name: format!("{}/{}", j.name, c.interface),
                to: &c.to,
                safe: c.safe,
                initial: c.initial,
            })
        })
    }

    /// The fields the cycle reads for itself, after the states: per joint its ready
    /// condition, fault fields and watchdog.
    pub(crate) fn monitors(&self) -> impl Iterator<Item = MonitorItem<'_>> {
        self.joints.iter().flat_map(|j| {
            let ready = j.ready.iter().map(move |c| MonitorItem {
                joint: &j.name,
                kind: MonitorKind::Ready,
                from: &c.from,
            });
            let faults = j.faults.iter().enumerate().map(move |(i, f)| MonitorItem {
                joint: &j.name,
                kind: MonitorKind::Fault(i),
                from: &f.from,
            });
            let watchdog = j.watchdog.iter().map(move |c| MonitorItem {
                joint: &j.name,
                kind: MonitorKind::Watchdog,
                from: &c.from,
            });
            ready.chain(faults).chain(watchdog)
        })
    }

    /// How long activation waits for the devices to be ready.
    pub fn ready_wait(&self) -> Duration {
        Duration::from_millis(self.ready_timeout_ms)
    }

    /// The nominal period.
    pub fn period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.rate_hz)
    }

    /// Time between two sends of the safe stop.
    pub fn safe_stop_interval(&self) -> Duration {
        match self.safe_stop.interval_ms {
            Some(ms) => Duration::from_secs_f64(ms / 1e3),
            None => self.period(),
        }
    }

    /// Checks what can be checked without a master: the rate, names (non-empty,
    /// unique), every path's syntax, the safe values finite, the safe stop bounded.
    /// Errors name the interface and the text at fault.
    pub fn check(&self) -> Result<(), CycleError> {
        let bad = |what: String| Err(CycleError::Config(what));
        if !(self.rate_hz.is_finite() && self.rate_hz > 0.0 && self.rate_hz <= 100_000.0) {
            return bad(format!(
                "rate_hz: {} is not a rate (0 < rate_hz ≤ 100000)",
                self.rate_hz
            ));
        }
        if !(self.deadline_tolerance.is_finite() && self.deadline_tolerance >= 0.0) {
            return bad(format!(
                "deadline_tolerance: {} is not a fraction ≥ 0",
                self.deadline_tolerance
            ));
        }
        if self.feedback_timeout_ms == 0 {
            return bad("feedback_timeout_ms: 0 would fault on every cycle".into());
        }
        if self.safe_stop.repeats == 0 || self.safe_stop.repeats > 1000 {
            return bad(format!(
                "safe_stop.repeats: {} (between 1 and 1000: the safe commands must go out, and the stop must end)",
                self.safe_stop.repeats
            ));
        }
        if let Some(ms) = self.safe_stop.interval_ms {
            if !(ms.is_finite() && ms > 0.0 && ms <= 10_000.0) {
                return bad(format!(
                    "safe_stop.interval_ms: {ms} (0 < interval ≤ 10000 ms)"
                ));
            }
        }
        if self.joints.is_empty() {
            return bad("joints: none (a loop reads or writes at least one joint)".into());
        }
        let mut joints = BTreeMap::new();
        for j in &self.joints {
            if !is_name(&j.name) {
                return bad(format!(
                    "joint `{}`: a joint name is letters, digits and `_` (it names interfaces `<joint>/<interface>`)",
                    j.name
                ));
            }
            if joints.insert(j.name.as_str(), ()).is_some() {
                return bad(format!("joint `{}` is declared twice", j.name));
            }
            let mut seen = BTreeMap::new();
            for s in &j.states {
                if !is_name(&s.interface) {
                    return bad(format!(
                        "state `{}/{}`: an interface name is letters, digits and `_`",
                        j.name, s.interface
                    ));
                }
                if seen.insert(("state", s.interface.as_str()), ()).is_some() {
                    return bad(format!(
                        "state `{}/{}` is declared twice",
                        j.name, s.interface
                    ));
                }
                if s.timeout_ms == Some(0) {
                    return bad(format!(
                        "state `{}/{}`: timeout_ms 0 would fault on every cycle",
                        j.name, s.interface
                    ));
                }
                FieldRef::parse(&s.from, false).map_err(|e| {
                    CycleError::Config(format!("state `{}/{}`: {e}", j.name, s.interface))
                })?;
            }
            for c in &j.commands {
                if !is_name(&c.interface) {
                    return bad(format!(
                        "command `{}/{}`: an interface name is letters, digits and `_`",
                        j.name, c.interface
                    ));
                }
                if seen.insert(("command", c.interface.as_str()), ()).is_some() {
                    return bad(format!(
                        "command `{}/{}` is declared twice",
                        j.name, c.interface
                    ));
                }
                if let Safe::Value(v) = c.safe {
                    if !v.is_finite() {
                        return bad(format!(
                            "command `{}/{}`: safe value {v} is not a finite number",
                            j.name, c.interface
                        ));
                    }
                }
                if let Some(v) = c.initial {
                    if !v.is_finite() {
                        return bad(format!(
                            "command `{}/{}`: initial value {v} is not a finite number",
                            j.name, c.interface
                        ));
                    }
                }
                if c.safe == Safe::Hold && !j.states.iter().any(|s| s.interface == c.interface) {
                    return bad(format!(
                        "command `{}/{}`: safe: hold holds the measured value of state `{}/{}`, and the joint has no such state (add it, or give a number)",
                        j.name, c.interface, j.name, c.interface
                    ));
                }
                FieldRef::parse(&c.to, true).map_err(|e| {
                    CycleError::Config(format!("command `{}/{}`: {e}", j.name, c.interface))
                })?;
            }
        }
        for m in self.monitors() {
            let what = match m.kind {
                MonitorKind::Ready => "ready",
                MonitorKind::Fault(_) => "faults",
                MonitorKind::Watchdog => "watchdog",
            };
            FieldRef::parse(m.from, false)
                .map_err(|e| CycleError::Config(format!("joint `{}`: {what}: {e}", m.joint)))?;
        }
        for j in &self.joints {
            for f in &j.faults {
                if f.kind == FaultKind::Bits && f.names.keys().any(|&b| b >= 64) {
                    return bad(format!(
                        "joint `{}`: faults: {}: a bit number is 0 to 63",
                        j.name, f.from
                    ));
                }
                if f.kind == FaultKind::Bits && (f.ok.is_some() || !f.watchdog_codes.is_empty()) {
                    return bad(format!(
                        "joint `{}`: faults: {}: `ok` and `watchdog_codes` are for `kind: code`",
                        j.name, f.from
                    ));
                }
            }
        }
        for step in &self.enable {
            for call in std::iter::once(&step.call).chain(step.undo.iter().map(|u| &u.call)) {
                if !call.starts_with('/') {
                    return bad(format!(
                        "enable: `{call}` is not a service path (`/<node>/<ns>/<service>`)"
                    ));
                }
            }
        }
        if self.ready_timeout_ms == 0 {
            return bad("ready_timeout_ms: 0 leaves no time to see a device ready".into());
        }
        let mut sequenced = BTreeMap::new();
        for a in &self.acks {
            if !self.commands().any(|c| c.name == a.command) {
                return bad(format!(
                    "acks: `{}` is not a command interface (`<joint>/<interface>`)",
                    a.command
                ));
            }
            if !self.states().any(|s| s.name == a.echo) {
                return bad(format!(
                    "acks: `{}` (the echo of `{}`) is not a state interface",
                    a.echo, a.command
                ));
            }
            if a.timeout_ms == 0 {
                return bad(format!(
                    "acks: `{}`: timeout_ms 0 would fault on every write",
                    a.command
                ));
            }
            if sequenced.insert(a.command.as_str(), ()).is_some() {
                return bad(format!("acks: `{}` is sequenced twice", a.command));
            }
        }
        Ok(())
    }
}

fn split_name(name: &str) -> (&str, &str) {
    name.split_once('/').unwrap_or((name, ""))
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A parsed `/<node>/<ns>/<topic>{<k>: <v>, …}.<field>[<i>]`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FieldRef {
    /// `/<node>/<ns>/<topic>`.
    pub topic: String,
    /// The constants (`{type: 1}`), in the order written.
    pub constants: Vec<(String, serde_json::Value)>,
    /// The field.
    pub field: String,
    /// The array element, if any.
    pub elem: Option<u32>,
}

impl FieldRef {
    /// Parses a reference; constants only where `constants_allowed` (commands).
    pub fn parse(text: &str, constants_allowed: bool) -> Result<FieldRef, String> {
        let shape = if constants_allowed {
            "`/<node>/<ns>/<topic>{<field>: <value>, …}.<field>`"
        } else {
            "`/<node>/<ns>/<topic>.<field>`"
        };
        let fail = |why: &str| Err(format!("`{text}`: {why} (expected {shape})"));
        if !text.starts_with('/') {
            return fail("not a topic path");
        }
        let (topic, constants, rest) = match text.find('{') {
            Some(open) => {
                if !constants_allowed {
                    return fail("a state reads a field; constants `{…}` are for commands");
                }
                let Some(close) = text[open..].find('}').map(|c| open + c) else {
                    return fail("`{` without `}`");
                };
                let constants = parse_constants(&text[open + 1..close])
                    .map_err(|why| format!("`{text}`: {why} (expected {shape})"))?;
                let Some(rest) = text[close + 1..].strip_prefix('.') else {
                    return fail("the field after `}` is missing (`….<field>`)");
                };
                (&text[..open], constants, rest)
            }
            None => match text.rsplit_once('.') {
                Some((topic, field)) => (topic, Vec::new(), field),
                None => return fail("no field (`….<field>`)"),
            },
        };
        let segments: Vec<&str> = topic[1..].split('/').collect();
        if segments.len() < 2 || segments.iter().any(|s| s.is_empty()) {
            return fail("the topic path has an empty or missing part");
        }
        let (field, elem) = match rest.split_once('[') {
            Some((field, index)) => {
                let Some(index) = index.strip_suffix(']') else {
                    return fail("`[` without `]`");
                };
                match index.parse::<u32>() {
                    Ok(i) => (field, Some(i)),
                    Err(_) => return fail("an array index is a whole number"),
                }
            }
            None => (rest, None),
        };
        if !is_name(field) {
            return fail("the field name is letters, digits and `_`");
        }
        Ok(FieldRef {
            topic: topic.to_string(),
            constants,
            field: field.to_string(),
            elem,
        })
    }
}

/// `type: 1, mode: true` → pairs. Values are JSON scalars (numbers, booleans).
fn parse_constants(text: &str) -> Result<Vec<(String, serde_json::Value)>, String> {
    let mut out: Vec<(String, serde_json::Value)> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once(':') else {
            return Err(format!("constant `{part}` is not `<field>: <value>`"));
        };
        let (k, v) = (k.trim(), v.trim());
        if !is_name(k) {
            return Err(format!("constant `{part}`: `{k}` is not a field name"));
        }
        let value: serde_json::Value = serde_json::from_str(v)
            .map_err(|_| format!("constant `{part}`: `{v}` is not a number or a boolean"))?;
        if !(value.is_number() || value.is_boolean()) {
            return Err(format!(
                "constant `{part}`: `{v}` is not a number or a boolean"
            ));
        }
        if out.iter().any(|(seen, _)| seen == k) {
            return Err(format!("constant `{k}` is given twice"));
        }
        out.push((k.to_string(), value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_refs_parse() {
        let r = FieldRef::parse("/md1/motor0/target{type: 1}.value", true).unwrap();
        assert_eq!(r.topic, "/md1/motor0/target");
        assert_eq!(
            r.constants,
            vec![("type".to_string(), serde_json::json!(1))]
        );
        assert_eq!((r.field.as_str(), r.elem), ("value", None));
        let r = FieldRef::parse("/io/io/adc.values[3]", false).unwrap();
        assert_eq!(
            (r.topic.as_str(), r.field.as_str(), r.elem),
            ("/io/io/adc", "values", Some(3))
        );
        for (bad, why) in [
            ("md1/motor0/feedback.position", "not a topic path"),
            ("/md1/motor0/feedback", "no field"),
            ("/md1//feedback.position", "empty or missing part"),
            ("/md1/motor0/feedback.", "field name"),
            ("/md1/motor0/target{type: 1}.value", "constants"),
            ("/md1/motor0/feedback.values[x]", "whole number"),
        ] {
            let e = FieldRef::parse(bad, false).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let e = FieldRef::parse("/md1/m0/target{type 1}.value", true).unwrap_err();
        assert!(e.contains("not `<field>: <value>`"), "{e}");
        let e = FieldRef::parse("/md1/m0/target{type: \"x\"}.value", true).unwrap_err();
        assert!(e.contains("not a number or a boolean"), "{e}");
    }

    #[test]
    fn check_names_what_is_wrong() {
        let ok = CycleConfig::new(100.0).state("a/p", "/n/m/f.p");
        ok.check().unwrap();
        let e = CycleConfig::new(100.0)
            .state("a/p", "/n/m/f.p")
            .state("a/p", "/n/m/f.q")
            .check()
            .unwrap_err();
        assert!(
            e.to_string().contains("state `a/p` is declared twice"),
            "{e}"
        );
        let e = CycleConfig::new(0.0)
            .state("a/p", "/n/m/f.p")
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("rate_hz"), "{e}");
        let e = CycleConfig::new(100.0)
            .command("a/v", "/n/m/t.v", f64::NAN)
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("command `a/v`: safe value"), "{e}");
        let e = CycleConfig::from_json(r#"{"rate_hz": 10, "joints": [], "bogus": 1}"#).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = CycleConfig::from_json(
            r#"{"rate_hz": 10, "joints": [{"name": "a", "commands": [{"interface": "v", "to": "/n/m/t.v"}]}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("safe"), "{e}");
    }

    #[test]
    fn the_safety_fields_are_checked() {
        let base = || {
            CycleConfig::new(100.0)
                .state("a/p", "/n/m/f.p")
                .command("a/p", "/n/m/t.p", Safe::Hold)
                .command("a/seq", "/n/m/t.seq", 0.0)
        };
        base().check().unwrap();
        let e = base()
            .ack("a/sq", "a/p", Duration::from_millis(10))
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("`a/sq` is not a command"), "{e}");
        let e = base()
            .ack("a/seq", "a/echo", Duration::from_millis(10))
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("`a/echo`"), "{e}");
        let e = base()
            .ack("a/seq", "a/p", Duration::ZERO)
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("timeout_ms 0"), "{e}");
        let e = base()
            .fault(
                "a",
                FaultConfig::bits("/n/m/f.faults", &[]).watchdog_codes(&[13]),
            )
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("for `kind: code`"), "{e}");
        let e = base()
            .ready("a", Condition::new("n/m/f.ready", None))
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("joint `a`: ready"), "{e}");
        let e = base().initial("a/p", f64::INFINITY).check().unwrap_err();
        assert!(e.to_string().contains("initial value inf"), "{e}");
        let e = base().ready_timeout(Duration::ZERO).check().unwrap_err();
        assert!(e.to_string().contains("ready_timeout_ms"), "{e}");
    }

    #[test]
    fn fault_names_come_from_bits_or_codes() {
        let bits = FaultConfig::bits("/n/m/f.x", &[(0, "undervoltage"), (5, "uncalibrated")]);
        assert!(bits.fault_names(0).is_empty());
        assert_eq!(bits.fault_names(0b100001), ["undervoltage", "uncalibrated"]);
        assert_eq!(bits.fault_names(0b10), ["bit 1"]);
        let code = FaultConfig::code("/n/m/f.e", &[0, 1], &[(2, "over-current")]);
        assert!(code.fault_names(1).is_empty());
        assert_eq!(code.fault_names(2), ["over-current"]);
        assert_eq!(code.fault_names(7), ["code 7"]);
        let parsed: FaultConfig = serde_json::from_str(
            r#"{"from": "/n/m/f.e", "kind": "code", "ok": [0, 1], "names": {"13": "communication lost"}, "watchdog_codes": [13]}"#,
        )
        .unwrap();
        assert_eq!(parsed.fault_names(13), ["communication lost"]);
        assert_eq!(parsed.watchdog_codes, [13]);
    }
}
