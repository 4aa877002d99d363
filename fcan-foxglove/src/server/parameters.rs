//! Parameters: a client's reads and writes (each request in a task of its own), and
//! the writes the master reports, whoever made them, published to the clients
//! subscribed. What each name a client sends comes to ([`get_step`], [`set_step`]),
//! what a read answers ([`read_answer`]) and the one status a request's errors make
//! ([`summary`]) are plain functions, tested below.

use std::sync::{Arc, Weak};

use fcan_master::registry::ParamInfo;
use fcan_master::text::Untrusted;
use fcan_master::value::Value;
use fcan_master::MasterApi;
use foxglove::websocket::{
    AnyClient, GetParametersResponder, Parameter, ParameterHandler, SetParametersResponder, Status,
};

use super::{shown, Shared};
use crate::mapping::{self, ParamRef};

/// What a name a client asks to read comes to.
#[derive(Debug)]
enum Get {
    /// The parameter, read from its node.
    Read(ParamInfo),
    /// A bound, answered from the schema.
    Answer(Parameter),
    /// Nothing to answer: why.
    Refuse(String),
}

/// What client name `name` reads: `lookup` finds a served node's parameter by its
/// registry name.
fn get_step(name: &str, lookup: impl FnOnce(&str) -> Option<ParamInfo>) -> Get {
    let r = mapping::param_ref(name);
    let base = match r {
        ParamRef::Value(n) | ParamRef::Min(n) | ParamRef::Max(n) => n,
    };
    let Some(info) = lookup(base) else {
        return Get::Refuse(format!("no parameter named {}", shown(name)));
    };
    match r {
        ParamRef::Min(_) | ParamRef::Max(_) => {
            let max = matches!(r, ParamRef::Max(_));
            match mapping::bound_parameter(name, &info.decl, max) {
                Some(p) => Get::Answer(p),
                None => Get::Refuse(format!(
                    "parameter {} has no {} bound",
                    info.name,
                    if max { "upper" } else { "lower" }
                )),
            }
        }
        _ => Get::Read(info),
    }
}

/// What reading parameter `info` as `v` answers: the parameter, and its bounds beside
/// it when the client asked for everything (`all`).
fn read_answer(info: &ParamInfo, v: &Value, all: bool) -> Vec<Parameter> {
    let mut ps = vec![mapping::to_parameter(&info.name, info.decl.ty, v)];
    if all {
        ps.extend(mapping::bound_parameters(info));
    }
    ps
}

/// What a parameter a client writes comes to.
#[derive(Debug)]
enum Set {
    /// Nothing is written or read back: why.
    Refuse(String),
    /// The value to write (or why it cannot be); what the node holds is read back
    /// either way.
    Write(ParamInfo, Result<Value, String>),
}

/// What writing `p` comes to: `lookup` finds a served node's parameter by its registry
/// name.
fn set_step(p: &Parameter, lookup: impl FnOnce(&str) -> Option<ParamInfo>) -> Set {
    let name = p.name.as_str();
    let ParamRef::Value(n) = mapping::param_ref(name) else {
        return Set::Refuse(format!(
            "{} is read-only (a bound from the node's schema)",
            shown(name)
        ));
    };
    let Some(info) = lookup(n) else {
        return Set::Refuse(format!("no parameter named {}", shown(name)));
    };
    let value = match p.value.as_ref().map(mapping::from_parameter) {
        None => Err("a parameter cannot be unset".to_string()),
        Some(v) => v,
    };
    Set::Write(info, value)
}

/// How many of a request's errors its status spells out.
const SPELLED: usize = 5;

/// The one status text a request's `errors` make (the first [`SPELLED`], then how many
/// more), or `None` if there are none.
fn summary(mut errors: Vec<String>) -> Option<String> {
    if errors.is_empty() {
        return None;
    }
    let n = errors.len();
    errors.truncate(SPELLED);
    let more = if n > SPELLED {
        format!(" (and {} more)", n - SPELLED)
    } else {
        String::new()
    };
    Some(format!("{}{more}", errors.join("; ")))
}

impl<M: MasterApi> Shared<M> {
    /// The values of parameters `names` (every parameter and bound if empty), read
    /// from the nodes; what cannot be read is reported to the client.
    async fn get_params(&self, client: &AnyClient, names: Vec<String>) -> Vec<Parameter> {
        let (wanted, all) = if names.is_empty() {
            (self.param_names(), true)
        } else {
            (names, false)
        };
        let limit = Arc::new(tokio::sync::Semaphore::new(self.opts.param_reads.max(1)));
        let mut reads = tokio::task::JoinSet::new();
        let mut out: Vec<Option<Vec<Parameter>>> = vec![None; wanted.len()];
        let mut errors = Vec::new();
        for (i, name) in wanted.iter().enumerate() {
            match get_step(name, |n| self.param(n)) {
                Get::Refuse(why) => errors.push(why),
                Get::Answer(p) => out[i] = Some(vec![p]),
                Get::Read(info) => {
                    let master = self.master.clone();
                    let limit = limit.clone();
                    reads.spawn(async move {
                        let _slot = limit.acquire_owned().await;
                        (i, master.param_get(&info.name).await, info)
                    });
                }
            }
        }
        while let Some(r) = reads.join_next().await {
            let Ok((i, r, info)) = r else { continue };
            match r {
                Ok(v) => out[i] = Some(read_answer(&info, &v, all)),
                Err(e) => errors.push(format!("{}: {}", info.name, Untrusted(&e.to_string()))),
            }
        }
        if let Some(text) = summary(errors) {
            self.say(
                client,
                "get parameters",
                Status::error(format!("fcan: could not read: {text}")),
            );
        }
        out.into_iter().flatten().flatten().collect()
    }

    /// Writes parameters; each answer is the value the node holds afterwards.
    async fn set_params(&self, client: &AnyClient, params: Vec<Parameter>) -> Vec<Parameter> {
        let mut out = Vec::new();
        // One status per request, however many parameters it names.
        let mut errors = Vec::new();
        for p in params {
            let (info, value) = match set_step(&p, |n| self.param(n)) {
                Set::Refuse(why) => {
                    errors.push(why);
                    continue;
                }
                Set::Write(info, value) => (info, value),
            };
            let result = match value {
                Err(why) => Err(why),
                Ok(v) => self
                    .master
                    .param_set(&info.name, v)
                    .await
                    .map_err(|e| e.to_string()),
            };
            if let Err(why) = result {
                errors.push(format!(
                    "parameter {} not set: {}",
                    info.name,
                    Untrusted(&why)
                ));
            }
            // What the node holds now, set or not.
            match self.master.param_get(&info.name).await {
                Ok(v) => out.push(mapping::to_parameter(&info.name, info.decl.ty, &v)),
                Err(e) => errors.push(format!(
                    "parameter {} could not be read back: {}",
                    info.name,
                    Untrusted(&e.to_string())
                )),
            }
        }
        if let Some(text) = summary(errors) {
            self.say(
                client,
                "set parameters",
                Status::error(format!("fcan: {text}")),
            );
        }
        out
    }

    /// A parameter write the node acknowledged, whoever made it (the CLI, Zenoh, ROS 2,
    /// this server): clients subscribed to the parameter hear the new value. (A write made
    /// here is also published after its answer, with the value read back; the same value
    /// twice changes nothing in the app.)
    pub(super) fn param_changed(&self, name: &str, value: &Value) {
        let Some(ty) = self.param(name).map(|p| p.decl.ty) else {
            return;
        };
        let p = mapping::to_parameter(name, ty, value);
        self.with_server(|h| h.publish_parameter_values(vec![p]));
    }
}

/// Parameter reads and writes, each in a task of its own.
pub(super) struct Params<M>(pub(super) Weak<Shared<M>>);

impl<M: MasterApi> ParameterHandler for Params<M> {
    fn get(
        &self,
        client: AnyClient,
        names: Vec<String>,
        _request_id: Option<String>,
        responder: GetParametersResponder,
    ) {
        let Some(s) = self.0.upgrade() else {
            return responder.respond(Vec::new());
        };
        let rt = s.rt.clone();
        rt.spawn(async move {
            let values = s.get_params(&client, names).await;
            responder.respond(values);
        });
    }

    fn set(
        &self,
        client: AnyClient,
        parameters: Vec<Parameter>,
        _request_id: Option<String>,
        responder: SetParametersResponder,
    ) {
        let Some(s) = self.0.upgrade() else {
            return responder.respond(Vec::new());
        };
        let rt = s.rt.clone();
        rt.spawn(async move {
            let values = s.set_params(&client, parameters).await;
            responder.respond(values.clone());
            // The responder answers the requester only; subscribers hear it here.
            s.with_server(|h| h.publish_parameter_values(values));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_master::registry::Registry;

    /// The motor driver's (two motors) and the I/O board's parameters.
    fn registry() -> Registry {
        crate::mapping::example_registry()
    }

    const KP: &str = "motor_driver1.motor0.velocity.kp";
    /// Declares an upper bound only.
    const MIN_ON: &str = "io_board3.out0.min_on_ms";

    #[test]
    fn a_read_is_of_the_node_a_bound_from_the_schema() {
        let r = registry();
        let lookup = |n: &str| r.param(n).ok().cloned();
        match get_step(KP, lookup) {
            Get::Read(info) => assert_eq!(info.name, KP),
            other => panic!("{other:?}"),
        }
        match get_step(&format!("{KP}/max"), lookup) {
            Get::Answer(p) => assert_eq!(p.name, format!("{KP}/max")),
            other => panic!("{other:?}"),
        }
        match get_step(&format!("{MIN_ON}/min"), lookup) {
            Get::Refuse(why) => assert_eq!(why, format!("parameter {MIN_ON} has no lower bound")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            get_step(&format!("{MIN_ON}/max"), lookup),
            Get::Answer(_)
        ));
        // An unknown name is echoed escaped.
        match get_step("no.such\u{1b}/max", lookup) {
            Get::Refuse(why) => {
                assert!(why.starts_with("no parameter named no.such"), "{why}");
                assert!(!why.contains('\u{1b}'), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reading_everything_answers_the_bounds_too() {
        let r = registry();
        let kp = r.param(KP).unwrap();
        let v = Value::from_scalar(kp.decl.default);
        let names = |ps: Vec<Parameter>| ps.into_iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(names(read_answer(kp, &v, false)), [KP]);
        assert_eq!(
            names(read_answer(kp, &v, true)),
            [KP.to_string(), format!("{KP}/min"), format!("{KP}/max")]
        );
    }

    #[test]
    fn a_write_is_of_a_known_parameter_and_a_value() {
        let r = registry();
        let lookup = |n: &str| r.param(n).ok().cloned();
        match set_step(&Parameter::float64(KP, 0.5), lookup) {
            Set::Write(info, Ok(v)) => {
                assert_eq!(info.name, KP);
                assert_eq!(v, Value::Float(0.5));
            }
            other => panic!("{other:?}"),
        }
        // Unset: written as nothing, but what the node holds is still read back.
        match set_step(&Parameter::empty(KP), lookup) {
            Set::Write(_, Err(why)) => assert_eq!(why, "a parameter cannot be unset"),
            other => panic!("{other:?}"),
        }
        match set_step(&Parameter::float64(format!("{KP}/max"), 1.0), lookup) {
            Set::Refuse(why) => assert_eq!(
                why,
                format!("{KP}/max is read-only (a bound from the node's schema)")
            ),
            other => panic!("{other:?}"),
        }
        match set_step(&Parameter::float64("no.such", 1.0), lookup) {
            Set::Refuse(why) => assert_eq!(why, "no parameter named no.such"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_requests_errors_make_one_status_of_five_and_a_count() {
        assert_eq!(summary(Vec::new()), None);
        assert_eq!(summary(vec!["a".into(), "b".into()]).unwrap(), "a; b");
        let seven: Vec<String> = (1..=7).map(|i| format!("e{i}")).collect();
        assert_eq!(summary(seven).unwrap(), "e1; e2; e3; e4; e5 (and 2 more)");
    }
}
