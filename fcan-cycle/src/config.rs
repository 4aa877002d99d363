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
    /// are waited for (e.g. an enable or clear-fault service).
    #[serde(default)]
    pub enable: Vec<ServiceStep>,
    /// How the loop stops: on [`super::Cycle::deactivate`] and on a fault.
    #[serde(default)]
    pub safe_stop: SafeStopConfig,
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
    /// What the safe stop sends (required: every command says how it stops).
    pub safe: f64,
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
    pub safe: f64,
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
    /// value.
    pub fn command(mut self, name: &str, to: &str, safe: f64) -> CycleConfig {
        let (joint, interface) = split_name(name);
        self.joint(joint).commands.push(CommandConfig {
            interface: interface.to_string(),
            to: to.to_string(),
            safe,
        });
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
        });
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
            })
        })
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
                if !c.safe.is_finite() {
                    return bad(format!(
                        "command `{}/{}`: safe value {} is not a finite number",
                        j.name, c.interface, c.safe
                    ));
                }
                FieldRef::parse(&c.to, true).map_err(|e| {
                    CycleError::Config(format!("command `{}/{}`: {e}", j.name, c.interface))
                })?;
            }
        }
        for step in &self.enable {
            if !step.call.starts_with('/') {
                return bad(format!(
                    "enable: `{}` is not a service path (`/<node>/<ns>/<service>`)",
                    step.call
                ));
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
}
