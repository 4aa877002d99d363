//! Parameters: the six parameter services of every node answered from the registry or
//! through the master (`set_parameters_atomically` all or nothing), and
//! `/parameter_events`: a write through this bridge is announced by it, grouped per
//! request as rcl does; a write made elsewhere (the CLI, Zenoh, Foxglove, a cycle) is
//! announced when the master's [`MasterEvent::ParamChanged`] comes, and the event of
//! one of the bridge's own writes is taken off instead of announced twice.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use fcan_core::id::NodeId;
use fcan_master::api::MasterApi;
use fcan_master::serving::lock;
use fcan_master::value::Value;
#[cfg(doc)]
use fcan_master::MasterEvent;
use fcan_ros2::dynamic::{self, RosValue};

use super::{Shared, TARGET};
use crate::dds::{Dds, DdsWriter};
use crate::params::{
    checked_value, descriptor, kind, list, not_set, parameter, set_result, to_value as param_value,
    type_of, unknown_descriptor, NodeParams,
};

/// How long a parameter write of this bridge's waits for its [`MasterEvent::ParamChanged`]
/// before it is forgotten (the event comes within one bus round trip; a receiver that
/// lagged behind the event channel lost it).
const OWN_WRITE_TTL: Duration = Duration::from_secs(10);

/// Parameter writes this bridge made (fcan name, when), oldest first, each waiting for
/// the master's [`MasterEvent::ParamChanged`] that acknowledges it. Entries older than
/// [`OWN_WRITE_TTL`] are dropped first, so events lost to a lagging receiver cannot
/// silence later writes for long.
#[derive(Debug, Default)]
pub(super) struct OwnWrites(VecDeque<(String, Instant)>);

impl OwnWrites {
    /// Drops the writes older than [`OWN_WRITE_TTL`] at `now` (oldest first).
    fn forget_old(&mut self, now: Instant) {
        while self
            .0
            .front()
            .is_some_and(|(_, at)| now.saturating_duration_since(*at) > OWN_WRITE_TTL)
        {
            self.0.pop_front();
        }
    }

    /// The bridge writes parameter `fcan` at `now`.
    fn wrote(&mut self, fcan: &str, now: Instant) {
        self.forget_old(now);
        self.0.push_back((fcan.to_string(), now));
    }

    /// The write of `fcan` just made was refused: no event follows it (the latest write
    /// of that name is taken off).
    fn refused(&mut self, fcan: &str) {
        if let Some(i) = self.0.iter().rposition(|(n, _)| n == fcan) {
            self.0.remove(i);
        }
    }

    /// The master says `fcan` changed, at `now`: whether it is one of this bridge's own
    /// writes (then taken off, by name, oldest first: each acknowledged write has one
    /// event), which the bridge announced itself; else a write made elsewhere.
    fn is_own(&mut self, fcan: &str, now: Instant) -> bool {
        self.forget_old(now);
        match self.0.iter().position(|(n, _)| n == fcan) {
            Some(i) => {
                self.0.remove(i);
                true
            }
            None => false,
        }
    }
}

/// The `Parameter` to announce for a write made elsewhere of fcan parameter `fcan` to
/// `value`, if it is one of `params` (the served node's).
fn announced(params: &NodeParams, fcan: &str, value: &Value) -> Option<RosValue> {
    let (ros, _, decl) = params.params.iter().find(|(_, f, _)| f == fcan)?;
    Some(parameter(ros, param_value(decl, value)))
}

/// The name and value of an `rcl_interfaces/msg/Parameter` (empty and NOT_SET when it
/// is not one).
fn name_and_value(item: &RosValue) -> (&str, &RosValue) {
    static NOT_SET: std::sync::OnceLock<RosValue> = std::sync::OnceLock::new();
    let fields = match item {
        RosValue::Msg(f) => f.as_slice(),
        _ => &[],
    };
    (
        fields.first().and_then(RosValue::as_str).unwrap_or(""),
        fields
            .get(1)
            .unwrap_or_else(|| NOT_SET.get_or_init(not_set)),
    )
}

/// The strings of a request's `string[]` field (none if it is not one).
fn strings(v: Option<&RosValue>) -> Vec<String> {
    v.and_then(RosValue::as_seq)
        .unwrap_or(&[])
        .iter()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// What `set_parameters` writes for item `name` = `pv`: the fcan parameter and its
/// value, or why the item is refused without a write.
fn set_one<'p>(
    params: &'p NodeParams,
    name: &str,
    pv: &RosValue,
) -> Result<(&'p str, Value), String> {
    match params.get(name) {
        Some((fcan, decl)) => checked_value(decl, pv).map(|v| (fcan, v)),
        None => Err(format!("no parameter `{name}` on this node")),
    }
}

/// What `set_parameters_atomically` writes for item `name` = `pv`: the fcan parameter
/// and its value, or why the whole request is refused before anything is written.
fn set_atomic_one<'p>(
    params: &'p NodeParams,
    name: &str,
    pv: &RosValue,
) -> Result<(&'p str, Value), String> {
    let (fcan, decl) = params
        .get(name)
        .ok_or_else(|| format!("no parameter `{name}` on this node; nothing was set"))?;
    let v = checked_value(decl, pv).map_err(|e| format!("{name}: {e}; nothing was set"))?;
    Ok((fcan, v))
}

/// Why a `set_parameters_atomically` failed: the node refused `name` for `e`, after
/// which the ones written before it were `restored` to their old values, or `lost`
/// (could not be, with why). `true` with it: the node was left with new values, worth
/// a warning.
fn atomic_failure(name: &str, e: &str, restored: &[&str], lost: &[String]) -> (String, bool) {
    let mut why = format!("{name}: {e}");
    if !restored.is_empty() {
        why.push_str(&format!("; put back: {}", restored.join(", ")));
    }
    if !lost.is_empty() {
        why.push_str(&format!("; could NOT put back: {}", lost.join(", ")));
    }
    (why, !lost.is_empty())
}

/// `describe_parameters`' response: a descriptor per name, of an unknown name too.
fn describe(params: &NodeParams, names: &[String]) -> RosValue {
    RosValue::Msg(vec![RosValue::Seq(
        names
            .iter()
            .map(|n| match params.get(n) {
                Some((_, d)) => descriptor(n, d),
                None => unknown_descriptor(n),
            })
            .collect(),
    )])
}

/// `get_parameter_types`' response: a `ParameterType` per name (NOT_SET if unknown).
fn types(params: &NodeParams, names: &[String]) -> RosValue {
    RosValue::Msg(vec![RosValue::Seq(
        names
            .iter()
            .map(|n| {
                RosValue::UInt(u64::from(
                    params.get(n).map_or(kind::NOT_SET, |(_, d)| type_of(d)),
                ))
            })
            .collect(),
    )])
}

impl<M: MasterApi, D: Dds> Shared<M, D> {
    /// The response of parameter service `svc` of node `node` to request `req` (its
    /// fields).
    pub(super) async fn param_call(
        &self,
        svc: &str,
        node: &str,
        params: &NodeParams,
        req: &[RosValue],
    ) -> RosValue {
        match svc {
            "get_parameters" => {
                let mut values = Vec::new();
                for n in strings(req.first()) {
                    values.push(match params.get(&n) {
                        Some((fcan, decl)) => match self.master.param_get(fcan).await {
                            Ok(v) => param_value(decl, &v),
                            Err(_) => not_set(),
                        },
                        None => not_set(),
                    });
                }
                RosValue::Msg(vec![RosValue::Seq(values)])
            }
            "set_parameters" => {
                let items = req.first().and_then(RosValue::as_seq).unwrap_or(&[]);
                let mut results = Vec::new();
                let mut changed = Vec::new();
                for item in items {
                    let (name, pv) = name_and_value(item);
                    let result = match set_one(params, name, pv) {
                        Ok((fcan, v)) => self.write_param(fcan, v).await.map_err(|e| e.to_string()),
                        Err(e) => Err(e),
                    };
                    if result.is_ok() {
                        changed.push(parameter(name, pv.clone()));
                    }
                    results.push(set_result(result));
                }
                self.parameters_changed(node, changed);
                RosValue::Msg(vec![RosValue::Seq(results)])
            }
            "set_parameters_atomically" => {
                let items = req.first().and_then(RosValue::as_seq).unwrap_or(&[]);
                let result = self.set_atomically(node, params, items).await;
                RosValue::Msg(vec![set_result(result)])
            }
            "list_parameters" => {
                let depth = match req.get(1) {
                    Some(RosValue::UInt(d)) => *d,
                    _ => 0,
                };
                RosValue::Msg(vec![list(params, &strings(req.first()), depth)])
            }
            "describe_parameters" => describe(params, &strings(req.first())),
            _ => types(params, &strings(req.first())),
        }
    }

    /// `set_parameters_atomically`: all of `items` or none. Each value is checked as the
    /// master and the node will check it before any is written; the old values are read;
    /// then they are written in order, and if the node refuses one, those written before
    /// it get their old values back. The node has no transaction of its own, so between
    /// the first write and the last its parameters are partly new (a control loop reading
    /// them sees that); what "atomic" buys is that the request ends all-or-nothing.
    async fn set_atomically(
        &self,
        node: &str,
        params: &NodeParams,
        items: &[RosValue],
    ) -> Result<(), String> {
        let mut plan = Vec::new();
        for item in items {
            let (name, pv) = name_and_value(item);
            let (fcan, v) = set_atomic_one(params, name, pv)?;
            let old = self.master.param_get(fcan).await.map_err(|e| {
                format!("{name}: its value cannot be read to keep: {e}; nothing was set")
            })?;
            plan.push((name, fcan, v, old, pv));
        }
        for (k, (name, fcan, v, _, _)) in plan.iter().enumerate() {
            if let Err(e) = self.write_param(fcan, v.clone()).await {
                let mut restored = Vec::new();
                let mut lost = Vec::new();
                for (n, f, _, old, _) in plan[..k].iter().rev() {
                    match self.write_param(f, old.clone()).await {
                        Ok(()) => restored.push(*n),
                        Err(e) => lost.push(format!("{n} ({e})")),
                    }
                }
                let (why, left_new) = atomic_failure(name, &e.to_string(), &restored, &lost);
                if left_new {
                    self.warn(
                        node,
                        format!("set_parameters_atomically left new values: {why}"),
                    );
                }
                return Err(why);
            }
        }
        self.parameters_changed(
            node,
            plan.iter()
                .map(|(name, _, _, _, pv)| parameter(name, (*pv).clone()))
                .collect(),
        );
        Ok(())
    }

    /// Writes a parameter for a ROS 2 client; this bridge announces it itself (see
    /// [`OwnWrites`]).
    async fn write_param(&self, fcan: &str, v: Value) -> Result<(), fcan_master::MasterError> {
        lock(&self.own_writes).wrote(fcan, Instant::now());
        let r = self.master.param_set(fcan, v).await;
        if r.is_err() {
            // No event follows a refused write.
            lock(&self.own_writes).refused(fcan);
        }
        r
    }

    /// The master's [`MasterEvent::ParamChanged`]: a write made elsewhere (the CLI,
    /// Zenoh, Foxglove, a cycle) is announced on `/parameter_events` as the served
    /// node's; one of this bridge's own is taken off [`OwnWrites`].
    pub(super) fn param_changed(&self, node: NodeId, name: &str, value: &Value) {
        if lock(&self.own_writes).is_own(name, Instant::now()) {
            return;
        }
        let announce = self
            .served
            .get(node, |s| {
                Some((
                    s.node.name.clone(),
                    announced(&s.handle.params, name, value)?,
                ))
            })
            .flatten();
        if let Some((node_name, p)) = announce {
            self.parameters_changed(&node_name, vec![p]);
        }
    }

    /// Says on `/parameter_events` that node `node`'s parameters `changed` took new values.
    fn parameters_changed(&self, node: &str, changed: Vec<RosValue>) {
        let Some(w) = &self.param_events else { return };
        if changed.is_empty() {
            return;
        }
        let now = std::time::SystemTime::now();
        let event = crate::params::event(node, changed, now);
        let encoded = dynamic::encode(&lock(&self.store), crate::params::EVENT_TYPE, &event);
        if let Err(e) = encoded
            .map_err(|e| e.to_string())
            .and_then(|b| w.write(&b, None, Some(now)).map_err(|e| e.to_string()))
        {
            tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", crate::params::EVENTS_TOPIC);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::ir::Param;
    use fcan_core::types::{Scalar, ScalarType};

    fn f32_decl(max: f32) -> Param {
        Param {
            name: "kp".into(),
            ty: ScalarType::F32,
            len: None,
            default: Scalar::F32(0.0),
            min: Some(Scalar::F32(0.0)),
            max: Some(Scalar::F32(max)),
        }
    }

    fn params() -> NodeParams {
        NodeParams {
            params: vec![
                ("motor0.kp".into(), "md1.motor0.kp".into(), f32_decl(10.0)),
                (
                    "motor0.enabled".into(),
                    "md1.motor0.enabled".into(),
                    Param {
                        name: "enabled".into(),
                        ty: ScalarType::Bool,
                        len: None,
                        default: Scalar::Bool(false),
                        min: None,
                        max: None,
                    },
                ),
            ],
        }
    }

    fn double(x: f64) -> RosValue {
        param_value(&f32_decl(10.0), &Value::Float(x))
    }

    #[test]
    fn the_event_of_an_own_write_is_taken_off_once_per_write() {
        let t = Instant::now();
        let mut own = OwnWrites::default();
        own.wrote("a", t);
        own.wrote("a", t);
        own.wrote("b", t);
        assert!(own.is_own("a", t));
        assert!(own.is_own("a", t));
        // A third change of `a` is someone else's write: announced.
        assert!(!own.is_own("a", t));
        assert!(own.is_own("b", t));
        assert!(!own.is_own("c", t));
    }

    #[test]
    fn a_refused_write_takes_off_its_own_entry_the_latest() {
        let t = Instant::now();
        let mut own = OwnWrites::default();
        own.wrote("a", t);
        own.wrote("a", t + Duration::from_secs(9));
        own.refused("a");
        // The entry left is the one of `t`, forgotten by `t + 11 s`.
        assert!(!own.is_own("a", t + Duration::from_secs(11)));
    }

    #[test]
    fn own_writes_are_forgotten_after_their_ttl_oldest_first() {
        let t = Instant::now();
        let mut own = OwnWrites::default();
        own.wrote("a", t);
        assert!(own.is_own("a", t + OWN_WRITE_TTL));
        own.wrote("a", t);
        assert!(!own.is_own("a", t + OWN_WRITE_TTL + Duration::from_millis(1)));
        own.wrote("a", t);
        own.wrote("b", t + Duration::from_secs(5));
        // At t + 12 s, `a` (12 s old) is dropped, `b` (7 s) kept.
        assert!(own.is_own("b", t + Duration::from_secs(12)));
        assert!(!own.is_own("a", t + Duration::from_secs(12)));
    }

    #[test]
    fn a_write_made_elsewhere_is_announced_under_its_ros_name() {
        let p = params();
        assert_eq!(
            announced(&p, "md1.motor0.kp", &Value::Float(2.5)),
            Some(parameter("motor0.kp", double(2.5)))
        );
        assert_eq!(announced(&p, "md1.motor0.ki", &Value::Float(2.5)), None);
        assert_eq!(announced(&p, "motor0.kp", &Value::Float(2.5)), None);
    }

    #[test]
    fn a_parameter_item_reads_its_name_and_value() {
        let item = parameter("motor0.kp", double(1.0));
        assert_eq!(name_and_value(&item), ("motor0.kp", &double(1.0)));
        assert_eq!(name_and_value(&RosValue::Bool(true)), ("", &not_set()));
        let no_value = RosValue::Msg(vec![RosValue::Str("x".into())]);
        assert_eq!(name_and_value(&no_value), ("x", &not_set()));
    }

    #[test]
    fn set_parameters_refuses_an_unknown_name_or_a_value_out_of_range() {
        let p = params();
        assert_eq!(
            set_one(&p, "motor0.kp", &double(2.0)),
            Ok(("md1.motor0.kp", Value::Float(2.0)))
        );
        assert_eq!(
            set_one(&p, "motor0.ki", &double(2.0)),
            Err("no parameter `motor0.ki` on this node".into())
        );
        let high = set_one(&p, "motor0.kp", &double(11.0)).unwrap_err();
        assert!(high.contains("above its max"), "{high}");
        assert!(set_one(&p, "motor0.enabled", &double(1.0)).is_err());
    }

    #[test]
    fn set_atomically_refuses_before_writing_and_says_nothing_was_set() {
        let p = params();
        assert_eq!(
            set_atomic_one(&p, "motor0.kp", &double(2.0)),
            Ok(("md1.motor0.kp", Value::Float(2.0)))
        );
        assert_eq!(
            set_atomic_one(&p, "x", &double(2.0)),
            Err("no parameter `x` on this node; nothing was set".into())
        );
        let high = set_atomic_one(&p, "motor0.kp", &double(11.0)).unwrap_err();
        assert!(high.starts_with("motor0.kp: "), "{high}");
        assert!(high.ends_with("; nothing was set"), "{high}");
    }

    #[test]
    fn a_failed_atomic_set_says_what_was_put_back_and_warns_of_what_was_not() {
        assert_eq!(
            atomic_failure("c", "refused", &[], &[]),
            ("c: refused".to_string(), false)
        );
        assert_eq!(
            atomic_failure("c", "refused", &["b", "a"], &[]),
            ("c: refused; put back: b, a".to_string(), false)
        );
        assert_eq!(
            atomic_failure("c", "refused", &["b"], &["a (timeout)".to_string()]),
            (
                "c: refused; put back: b; could NOT put back: a (timeout)".to_string(),
                true
            )
        );
    }

    #[test]
    fn types_and_descriptors_answer_unknown_names_too() {
        let p = params();
        let names = [
            "motor0.kp".to_string(),
            "nope".into(),
            "motor0.enabled".into(),
        ];
        assert_eq!(
            types(&p, &names),
            RosValue::Msg(vec![RosValue::Seq(vec![
                RosValue::UInt(u64::from(kind::DOUBLE)),
                RosValue::UInt(u64::from(kind::NOT_SET)),
                RosValue::UInt(u64::from(kind::BOOL)),
            ])])
        );
        assert_eq!(
            describe(&p, &names[..2]),
            RosValue::Msg(vec![RosValue::Seq(vec![
                descriptor("motor0.kp", &f32_decl(10.0)),
                unknown_descriptor("nope"),
            ])])
        );
    }

    #[test]
    fn a_request_string_list_keeps_only_strings() {
        let v = RosValue::Seq(vec![
            RosValue::Str("a".into()),
            RosValue::UInt(1),
            RosValue::Str("b".into()),
        ]);
        assert_eq!(strings(Some(&v)), ["a", "b"]);
        assert!(strings(None).is_empty());
        assert!(strings(Some(&RosValue::Str("a".into()))).is_empty());
    }
}
