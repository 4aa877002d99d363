//! Queries from other sessions (services, parameters, node info, plans, reprovisioning,
//! schema blobs, status and registry), answered sans I/O: [`Request::decode`] turns what
//! arrived (the queryable, the key expression, the payload) into a typed [`Request`],
//! [`answer`] asks the master through [`MasterApi`] and encodes the replies. Zenoh is
//! the shell's business (`Shared::on_query` in the parent module): it takes a query,
//! bounds it ([`ServerOptions::max_in_flight`](super::ServerOptions::max_in_flight),
//! [`ServerOptions::request_timeout`](super::ServerOptions::request_timeout)) and sends
//! what [`answer`] gives. So every key, JSON shape and error kind of the queryables is
//! decided here, and tested here without a network.

use fcan_core::hash::SchemaDigest;
use fcan_master::serving::lock;
use fcan_master::value::{Shape, Value};
use fcan_master::{MasterApi, MasterError};
use serde_json::{json, Value as Json};
use zenoh::key_expr::KeyExpr;

use crate::keys::{self, Entity};
use crate::wire::{param_reply, registry_json, ErrorReply};
use fcan_master::ErrorKind;

use super::forward::is_wild;
use super::Shared;

/// Which queryable a query arrived on.
#[derive(Clone, Copy, Debug)]
pub(super) enum QKind {
    Service,
    Param,
    Node,
    Plan,
    Reprovision,
    Update,
    Schema,
    Status,
    Registry,
}

/// One reply: the key it answers on and its payload.
pub(super) type Reply = (String, Vec<u8>);

/// A request's JSON payload: `None` when there is none, or why it is not JSON. Decoded
/// with the request but reported only once the node is found RUNNING: a query to a node
/// that is not gets `not_running` whatever it carries. Made a value then ([`value_for`]),
/// knowing what the value is for.
type Body = Result<Option<Json>, ErrorReply>;

/// A query decoded: what it asks of the master.
#[derive(Debug)]
pub(super) enum Request {
    /// Nothing to answer: a wildcard on a queryable that answers one entity at a time.
    Nothing,
    /// The bus status.
    Status,
    /// The registry.
    Registry,
    /// The info of every node whose key `pattern` matches (`fcan/<bus>/node/*` lists
    /// them all; a key without wildcards that matches none is an unknown name).
    Nodes { pattern: KeyExpr<'static> },
    /// A node's frame plan, by node name; replied on `key`.
    Plan { key: String, node: String },
    /// Provision a node again, by node name; replied on `key`.
    Reprovision { key: String, node: String },
    /// Write a firmware image into a node, by node name (the image and bus share, or
    /// why the payload is not one); replied on `key` once the node runs it.
    Update {
        key: String,
        node: String,
        ask: Result<crate::wire::UpdateAsk, ErrorReply>,
    },
    /// A schema blob by digest (`hex` as asked); replied on `key`.
    Schema {
        key: String,
        hex: String,
        digest: SchemaDigest,
    },
    /// A service call with its request; replied on `key`.
    Call {
        key: String,
        service: String,
        request: Body,
    },
    /// A parameter read (no payload) or write (the value); replied on `key`.
    Param {
        key: String,
        param: String,
        value: Body,
    },
}

impl Request {
    /// Decodes a query on queryable `k` for key expression `key` with `payload`
    /// (empty when none), refusing payloads over `max_payload` bytes.
    pub(super) fn decode(
        k: QKind,
        key: &KeyExpr<'_>,
        payload: &[u8],
        max_payload: usize,
    ) -> Result<Request, ErrorReply> {
        if payload.len() > max_payload {
            return Err(ErrorReply::new(
                ErrorKind::BadValue,
                format!(
                    "payload of {} bytes exceeds the limit of {max_payload}",
                    payload.len()
                ),
            ));
        }
        let one_at_a_time = matches!(
            k,
            QKind::Plan
                | QKind::Reprovision
                | QKind::Update
                | QKind::Schema
                | QKind::Service
                | QKind::Param
        );
        if one_at_a_time && is_wild(key) {
            // Never on a wildcard: a query names one entity (and reprovisioning is one
            // node at a time).
            return Ok(Request::Nothing);
        }
        let entity = keys::parse(key.as_str()).map(|(_, e)| e);
        let own = key.to_string();
        Ok(match k {
            QKind::Status => Request::Status,
            QKind::Registry => Request::Registry,
            QKind::Node => Request::Nodes {
                pattern: key.clone().into_owned(),
            },
            QKind::Plan => match entity {
                Some(Entity::Plan(node)) => Request::Plan { key: own, node },
                _ => return Err(ErrorReply::new(ErrorKind::UnknownName, "not a plan key")),
            },
            QKind::Reprovision => match entity {
                Some(Entity::Reprovision(node)) => Request::Reprovision { key: own, node },
                _ => {
                    return Err(ErrorReply::new(
                        ErrorKind::UnknownName,
                        "not a reprovision key",
                    ))
                }
            },
            QKind::Update => match entity {
                Some(Entity::Update(node)) => Request::Update {
                    key: own,
                    node,
                    ask: crate::wire::parse_update_ask(payload),
                },
                _ => return Err(ErrorReply::new(ErrorKind::UnknownName, "not an update key")),
            },
            QKind::Schema => {
                let Some(Entity::Schema(hex)) = entity else {
                    return Err(ErrorReply::new(ErrorKind::UnknownName, "not a schema key"));
                };
                let digest = SchemaDigest::from_hex(&hex).ok_or_else(|| {
                    ErrorReply::new(ErrorKind::UnknownName, "not a SHA-256 in hex")
                })?;
                Request::Schema {
                    key: own,
                    hex,
                    digest,
                }
            }
            QKind::Service | QKind::Param => match entity {
                Some(Entity::Service(service)) => Request::Call {
                    key: own,
                    service,
                    request: body(payload),
                },
                Some(Entity::Param(param)) => Request::Param {
                    key: own,
                    param,
                    value: body(payload),
                },
                _ => {
                    return Err(ErrorReply::new(
                        ErrorKind::UnknownName,
                        format!("not a service or param key: {key}"),
                    ))
                }
            },
        })
    }
}

/// A payload as JSON.
fn body(payload: &[u8]) -> Body {
    if payload.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(payload)
        .map(Some)
        .map_err(|e| ErrorReply::new(ErrorKind::BadValue, format!("payload is not JSON: {e}")))
}

/// What a payload is for: a service's request or a parameter, by name.
#[derive(Clone, Copy)]
enum For<'a> {
    Request(&'a str),
    Param(&'a str),
}

/// A payload as the value for `what` (by fcan's one number rule), or `bad_value` naming
/// the service or parameter, the field, and — for a string or `null`, which are no value
/// — what the field there takes, from the registry.
async fn value_for<M: MasterApi>(master: &M, j: &Json, what: For<'_>) -> Result<Value, ErrorReply> {
    let e = match Value::from_json(j) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let (name, typed) = match (what, master.registry().await) {
        (For::Request(name), Ok(r)) => (
            name,
            r.service(name)
                .ok()
                .map(|s| Value::from_json_as(j, Shape::Message(&s.request))),
        ),
        (For::Param(name), Ok(r)) => (
            name,
            r.param(name)
                .ok()
                .map(|p| Value::from_json_as(j, Shape::Param(p.decl.ty, p.decl.len))),
        ),
        (For::Request(name) | For::Param(name), Err(_)) => (name, None),
    };
    let e = match typed {
        Some(Err(typed)) => typed,
        _ => e,
    };
    Err(ErrorReply::new(
        ErrorKind::BadValue,
        e.within(name).to_string(),
    ))
}

/// What answering needs of the server besides its master.
pub(super) trait ServerView: Sync {
    /// The bus name served.
    fn bus(&self) -> &str;
    /// Whether the node named `node` is served as RUNNING now.
    fn serves(&self, node: &str) -> bool;
    /// Adds the server's own fields to the master's status JSON object.
    fn add_status_fields(&self, status: &mut serde_json::Map<String, Json>);
}

/// The status JSON: `fcan_master::Status::to_json` plus the server's fields (see
/// [`ServerView::add_status_fields`]).
pub(super) async fn status_json<M: MasterApi>(
    master: &M,
    server: &impl ServerView,
) -> Result<Json, MasterError> {
    let mut j = master.status().await?.to_json();
    if let Json::Object(m) = &mut j {
        server.add_status_fields(m);
    }
    Ok(j)
}

/// `Err` unless the node of `name` (a topic, service or parameter name, or a node name)
/// is RUNNING and served: `not_running` with its phase when the master knows it,
/// `unknown_name` when not.
pub(super) async fn not_running<M: MasterApi>(
    master: &M,
    server: &impl ServerView,
    name: &str,
) -> Result<(), ErrorReply> {
    let node = keys::node_of(name);
    if server.serves(node) {
        return Ok(());
    }
    let nodes = master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
    Err(match nodes.iter().find(|n| n.name == node) {
        Some(n) => ErrorReply::new(
            ErrorKind::NotRunning,
            format!("node {} is not running ({})", n.name, n.phase),
        ),
        None => ErrorReply::new(
            ErrorKind::UnknownName,
            format!(
                "no node named `{}` on bus {}",
                fcan_master::text::Untrusted(node),
                server.bus()
            ),
        ),
    })
}

/// The replies to one decoded request, asking `master`: (key, payload) pairs, or one
/// error.
pub(super) async fn answer<M: MasterApi>(
    master: &M,
    server: &impl ServerView,
    req: Request,
) -> Result<Vec<Reply>, ErrorReply> {
    let bus = server.bus();
    let own = |key: Option<String>| key.expect("bus name checked");
    let of = |e: MasterError| ErrorReply::of(&e);
    match req {
        Request::Nothing => Ok(Vec::new()),
        Request::Status => {
            let s = status_json(master, server).await.map_err(of)?;
            Ok(vec![(own(keys::status(bus)), s.to_string().into_bytes())])
        }
        Request::Registry => {
            let r = master.registry().await.map_err(of)?;
            Ok(vec![(
                own(keys::registry(bus)),
                registry_json(&r).to_string().into_bytes(),
            )])
        }
        Request::Nodes { pattern } => {
            let nodes = master.nodes().await.map_err(of)?;
            let mut out = Vec::new();
            for n in nodes {
                let Some(key) = keys::node(bus, &n.name) else {
                    continue;
                };
                let Ok(ke) = KeyExpr::try_from(key.clone()) else {
                    continue;
                };
                if pattern.intersects(&ke) {
                    out.push((key, n.to_json().to_string().into_bytes()));
                }
            }
            if out.is_empty() && !is_wild(&pattern) {
                return Err(ErrorReply::new(
                    ErrorKind::UnknownName,
                    format!("no node at {pattern}"),
                ));
            }
            Ok(out)
        }
        Request::Plan { key, node } => {
            let n = node_named(master, &node).await?;
            let plan = master.plan(n).await.map_err(of)?;
            let j = plan.map_or(Json::Null, |p| p.to_json());
            Ok(vec![(key, j.to_string().into_bytes())])
        }
        Request::Reprovision { key, node } => {
            let n = node_named(master, &node).await?;
            master.reprovision(n).await.map_err(of)?;
            Ok(vec![(key, b"null".to_vec())])
        }
        Request::Update { key, node, ask } => {
            let n = node_named(master, &node).await?;
            match ask? {
                crate::wire::UpdateAsk::Start(image, share) => {
                    let cfg = fcan_master::update::UpdateConfig {
                        share,
                        ..Default::default()
                    };
                    let report = master.update(n, *image, cfg).await.map_err(of)?;
                    Ok(vec![(key, report.to_json().to_string().into_bytes())])
                }
                crate::wire::UpdateAsk::Abort => {
                    master.abort_update(n).await.map_err(of)?;
                    Ok(vec![(key, b"null".to_vec())])
                }
            }
        }
        Request::Schema { key, hex, digest } => {
            let nodes = master.nodes().await.map_err(of)?;
            for n in nodes.iter().filter(|n| n.digest == Some(digest)) {
                if let Some(s) = master.schema(n.id).await.map_err(of)? {
                    return Ok(vec![(key, s.blob.clone())]);
                }
            }
            Err(ErrorReply::new(
                ErrorKind::UnknownName,
                format!("no schema {hex} on this bus"),
            ))
        }
        Request::Call {
            key,
            service,
            request,
        } => {
            not_running(master, server, &service).await?;
            let Some(request) = request? else {
                return Err(ErrorReply::new(
                    ErrorKind::BadValue,
                    "a service call needs a JSON request payload",
                ));
            };
            let request = value_for(master, &request, For::Request(&service)).await?;
            let response = master.call(&service, request).await.map_err(of)?;
            Ok(vec![(key, response.to_json().to_string().into_bytes())])
        }
        Request::Param { key, param, value } => {
            not_running(master, server, &param).await?;
            let reply = match value? {
                None => param_reply(&master.param_get(&param).await.map_err(of)?),
                Some(j) => {
                    let v = value_for(master, &j, For::Param(&param)).await?;
                    // The value the node holds after the write, read back: what every
                    // face shows (a value its type rounds, what a device made of it).
                    param_reply(&master.param_set_read_back(&param, v).await.map_err(of)?)
                }
            };
            Ok(vec![(key, reply.to_string().into_bytes())])
        }
    }
}

/// The id of the node named `name`, or `unknown_name`.
async fn node_named<M: MasterApi>(
    master: &M,
    name: &str,
) -> Result<fcan_core::id::NodeId, ErrorReply> {
    let nodes = master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
    nodes
        .iter()
        .find(|n| n.name == name)
        .map(|n| n.id)
        .ok_or_else(|| {
            ErrorReply::new(
                ErrorKind::UnknownName,
                format!("no node {name} on this bus"),
            )
        })
}

/// The running server as the answers see it.
impl<M: MasterApi> ServerView for Shared<M> {
    fn bus(&self) -> &str {
        &self.bus
    }

    fn serves(&self, node: &str) -> bool {
        self.served
            .find_map(|s| (s.node.name == node).then_some(()))
            .is_some()
    }

    fn add_status_fields(&self, m: &mut serde_json::Map<String, Json>) {
        let c = self.counters();
        m.insert("bus".into(), self.bus.clone().into());
        m.insert(
            "t_us".into(),
            (self.opts.clock.elapsed().as_micros() as u64).into(),
        );
        m.insert("load".into(), json!(*lock(&self.load)));
        m.insert("rejected_puts".into(), c.rejected_puts.into());
        m.insert("puts".into(), c.puts.into());
        m.insert("queries".into(), c.queries.into());
        m.insert("busy".into(), c.busy.into());
        m.insert("busy_puts".into(), c.busy_puts.into());
        m.insert("samples_put".into(), c.samples.into());
        m.insert("sample_groups_put".into(), c.sample_groups.into());
    }
}

#[cfg(test)]
mod tests {
    //! The queryables request → reply, without Zenoh: keys and payloads in, replies (or
    //! the error reply) out, against a fake master that records what it was asked.

    use std::sync::{Arc, Mutex};

    use fcan_core::id::NodeId;
    use fcan_master::engine::{CallError, NodeSchema};
    use fcan_master::planner::Plan;
    use fcan_master::registry::Registry;
    use fcan_master::MasterEvent;
    use fcan_master::{BusFrame, NodeInfo, Sample, Status};
    use tokio::sync::{broadcast, mpsc};

    use super::*;

    const DIGEST: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    /// A master with two nodes: `md1` (id 1) running, `md2` (id 2) offline. `md1` has a
    /// plan and one parameter, `md1.motor0.gain` (an f32, 0.5, at most 10); every
    /// service answers `{success: true}`.
    #[derive(Clone)]
    struct FakeMaster {
        nodes: Vec<NodeInfo>,
        /// What `md1.motor0.gain` holds, as an f32 does.
        gain: Arc<Mutex<Value>>,
        /// What it was asked to do (calls, parameter writes, reprovisioning), in order.
        asked: Arc<Mutex<Vec<String>>>,
    }

    impl FakeMaster {
        fn new() -> FakeMaster {
            let node = |id: u8, name: &str, phase: &str| {
                NodeInfo::from_json(&json!({
                    "id": id, "name": name, "phase": phase, "state": "running",
                    "boot_id": 7, "mode": "fd", "frames": 2, "errors": 0,
                    "schema": DIGEST, "schema_source": "downloaded", "driver": null,
                }))
                .unwrap()
            };
            FakeMaster {
                nodes: vec![node(1, "md1", "running"), node(2, "md2", "offline")],
                gain: Arc::new(Mutex::new(Value::Float(0.5))),
                asked: Arc::default(),
            }
        }

        fn asked(&self) -> Vec<String> {
            self.asked.lock().unwrap().clone()
        }

        fn record(&self, what: String) {
            self.asked.lock().unwrap().push(what);
        }
    }

    impl MasterApi for FakeMaster {
        async fn nodes(&self) -> Result<Vec<NodeInfo>, MasterError> {
            Ok(self.nodes.clone())
        }
        async fn registry(&self) -> Result<Registry, MasterError> {
            Ok(Registry::default())
        }
        async fn status(&self) -> Result<Status, MasterError> {
            let mut s = Status::default();
            s.nodes = self.nodes.clone();
            Ok(s)
        }
        async fn schema(&self, _: NodeId) -> Result<Option<Arc<NodeSchema>>, MasterError> {
            Ok(None)
        }
        async fn plan(&self, node: NodeId) -> Result<Option<Plan>, MasterError> {
            Ok((node.get() == 1).then(|| Plan::from_json(&json!({"frames": []})).unwrap()))
        }
        fn events(&self) -> broadcast::Receiver<MasterEvent> {
            broadcast::channel(1).1
        }
        async fn frames(&self) -> Result<broadcast::Receiver<BusFrame>, MasterError> {
            Ok(broadcast::channel(1).1)
        }
        async fn subscribe(&self, _: &str) -> Result<mpsc::UnboundedReceiver<Sample>, MasterError> {
            Ok(mpsc::unbounded_channel().1)
        }
        async fn publish(&self, topic: &str, _: Value) -> Result<(), MasterError> {
            self.record(format!("publish {topic}"));
            Ok(())
        }
        async fn publish_many(&self, _: Vec<(String, Value)>) -> Result<(), MasterError> {
            self.record("publish_many".into());
            Ok(())
        }
        async fn call(&self, service: &str, request: Value) -> Result<Value, MasterError> {
            self.record(format!("call {service} {}", request.to_json()));
            Ok(Value::from_json(&json!({"success": true})).unwrap())
        }
        async fn param_get(&self, param: &str) -> Result<Value, MasterError> {
            match param {
                "md1.motor0.gain" => Ok(self.gain.lock().unwrap().clone()),
                _ => Err(CallError::BadTarget(format!("no param {param}")).into()),
            }
        }
        async fn param_set(&self, param: &str, value: Value) -> Result<(), MasterError> {
            if matches!(value, Value::Float(v) if v > 10.0) {
                return Err(CallError::BadValue(format!("{param}: above max 10")).into());
            }
            self.record(format!("param_set {param} {}", value.to_json()));
            let stored = value.to_scalar(fcan_core::types::ScalarType::F32, param)?;
            *self.gain.lock().unwrap() = Value::from_scalar(stored);
            Ok(())
        }
        async fn reprovision(&self, node: NodeId) -> Result<(), MasterError> {
            self.record(format!("reprovision {node}"));
            Ok(())
        }
        async fn update(
            &self,
            node: NodeId,
            image: fcan_master::update::UpdateImage,
            cfg: fcan_master::update::UpdateConfig,
        ) -> Result<fcan_master::engine::UpdateReport, MasterError> {
            self.record(format!(
                "update {node} {} {} bytes share {}",
                image.version(),
                image.len(),
                cfg.share
            ));
            Err(fcan_master::engine::UpdateError::NotSupported(node).into())
        }
        async fn abort_update(&self, node: NodeId) -> Result<(), MasterError> {
            self.record(format!("abort_update {node}"));
            Ok(())
        }
    }

    /// A server of bus `can0` serving `md1` as RUNNING.
    struct View;

    impl ServerView for View {
        fn bus(&self) -> &str {
            "can0"
        }
        fn serves(&self, node: &str) -> bool {
            node == "md1"
        }
        fn add_status_fields(&self, status: &mut serde_json::Map<String, Json>) {
            status.insert("bus".into(), "can0".into());
        }
    }

    const LIMIT: usize = 64;

    /// Decodes and answers one query with a fresh fake master; the master comes back to
    /// say what it was asked.
    async fn ask(
        k: QKind,
        key: &str,
        payload: &str,
    ) -> (FakeMaster, Result<Vec<Reply>, ErrorReply>) {
        let master = FakeMaster::new();
        let key = KeyExpr::try_from(key).unwrap();
        let replies = match Request::decode(k, &key, payload.as_bytes(), LIMIT) {
            Ok(req) => answer(&master, &View, req).await,
            Err(e) => Err(e),
        };
        (master, replies)
    }

    /// The replies as (key, JSON), failing on an error reply.
    fn json_replies(r: Result<Vec<Reply>, ErrorReply>) -> Vec<(String, Json)> {
        r.unwrap()
            .into_iter()
            .map(|(k, b)| (k, serde_json::from_slice(&b).unwrap()))
            .collect()
    }

    /// The error reply's kind and message, failing on replies.
    fn error(r: Result<Vec<Reply>, ErrorReply>) -> (ErrorKind, String) {
        let e = r.unwrap_err();
        (e.kind(), e.message)
    }

    #[tokio::test]
    async fn a_payload_over_the_limit_is_bad_value_whatever_the_queryable() {
        let big = "1".repeat(LIMIT + 1);
        for (k, key) in [
            (QKind::Status, "fcan/can0/status"),
            (QKind::Param, "fcan/can0/param/md1/motor0/gain"),
        ] {
            let (master, r) = ask(k, key, &big).await;
            let (kind, message) = error(r);
            assert_eq!(kind, ErrorKind::BadValue, "{key}");
            assert!(message.contains("exceeds the limit of 64"), "{message}");
            assert_eq!(master.asked(), Vec::<String>::new());
        }
    }

    #[tokio::test]
    async fn a_wildcard_on_a_one_at_a_time_queryable_gets_no_reply_and_asks_nothing() {
        for (k, key) in [
            (QKind::Service, "fcan/can0/service/**"),
            (QKind::Param, "fcan/can0/param/md1/*/gain"),
            (QKind::Plan, "fcan/can0/plan/*"),
            (QKind::Reprovision, "fcan/can0/reprovision/*"),
            (QKind::Schema, "fcan/can0/schema/*"),
        ] {
            let (master, r) = ask(k, key, "1").await;
            assert_eq!(r.unwrap(), Vec::<Reply>::new(), "{key}");
            assert_eq!(master.asked(), Vec::<String>::new(), "{key}");
        }
    }

    #[tokio::test]
    async fn a_key_of_another_kind_is_an_unknown_name() {
        for (k, key, says) in [
            (QKind::Plan, "fcan/can0/node/md1", "not a plan key"),
            (
                QKind::Reprovision,
                "fcan/can0/plan/md1",
                "not a reprovision key",
            ),
            (QKind::Schema, "fcan/can0/node/md1", "not a schema key"),
            (
                QKind::Service,
                "fcan/can0/node/md1",
                "not a service or param key",
            ),
        ] {
            let (kind, message) = error(ask(k, key, "").await.1);
            assert_eq!(kind, ErrorKind::UnknownName, "{key}");
            assert!(message.contains(says), "{key}: {message}");
        }
    }

    #[tokio::test]
    async fn a_schema_key_that_is_not_a_sha256_is_an_unknown_name() {
        let (kind, message) = error(ask(QKind::Schema, "fcan/can0/schema/abc", "").await.1);
        assert_eq!(kind, ErrorKind::UnknownName);
        assert_eq!(message, "not a SHA-256 in hex");
    }

    #[tokio::test]
    async fn a_schema_no_node_has_is_an_unknown_name() {
        let key = format!("fcan/can0/schema/{DIGEST}");
        let (kind, message) = error(ask(QKind::Schema, &key, "").await.1);
        assert_eq!(kind, ErrorKind::UnknownName);
        assert_eq!(message, format!("no schema {DIGEST} on this bus"));
    }

    #[tokio::test]
    async fn the_status_is_the_masters_with_the_servers_fields_on_the_status_key() {
        let r = json_replies(ask(QKind::Status, "fcan/can0/status", "").await.1);
        assert_eq!(r.len(), 1);
        let (key, status) = &r[0];
        assert_eq!(key, "fcan/can0/status");
        assert_eq!(status["bus"], "can0");
        let mut want = Status::default();
        want.nodes = FakeMaster::new().nodes;
        let mut want = want.to_json();
        want["bus"] = "can0".into();
        assert_eq!(*status, want);
    }

    #[tokio::test]
    async fn the_registry_is_replied_on_the_registry_key() {
        let r = json_replies(ask(QKind::Registry, "fcan/can0/registry", "").await.1);
        assert_eq!(
            r,
            [(
                "fcan/can0/registry".to_string(),
                registry_json(&Registry::default())
            )]
        );
    }

    #[tokio::test]
    async fn node_info_is_the_nodes_json_line_on_its_key() {
        let r = json_replies(ask(QKind::Node, "fcan/can0/node/md2", "").await.1);
        let md2 = &FakeMaster::new().nodes[1];
        assert_eq!(r, [("fcan/can0/node/md2".to_string(), md2.to_json())]);
    }

    #[tokio::test]
    async fn a_node_wildcard_lists_every_node_it_matches() {
        let r = json_replies(ask(QKind::Node, "fcan/can0/node/*", "").await.1);
        let keys: Vec<&str> = r.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["fcan/can0/node/md1", "fcan/can0/node/md2"]);
        let r = ask(QKind::Node, "fcan/can0/node/zz$*", "").await.1;
        assert_eq!(r.unwrap(), Vec::<Reply>::new());
    }

    #[tokio::test]
    async fn a_node_key_that_matches_no_node_is_an_unknown_name() {
        let (kind, message) = error(ask(QKind::Node, "fcan/can0/node/md9", "").await.1);
        assert_eq!(kind, ErrorKind::UnknownName);
        assert_eq!(message, "no node at fcan/can0/node/md9");
    }

    #[tokio::test]
    async fn a_service_call_reaches_the_master_and_replies_its_response() {
        let key = "fcan/can0/service/md1/out0/set";
        let (master, r) = ask(QKind::Service, key, r#"{"on": true}"#).await;
        assert_eq!(
            json_replies(r),
            [(key.to_string(), json!({"success": true}))]
        );
        assert_eq!(master.asked(), [r#"call /md1/out0/set {"on":true}"#]);
    }

    #[tokio::test]
    async fn a_service_call_without_a_request_is_bad_value_and_not_sent() {
        let (master, r) = ask(QKind::Service, "fcan/can0/service/md1/out0/set", "").await;
        let (kind, message) = error(r);
        assert_eq!(kind, ErrorKind::BadValue);
        assert_eq!(message, "a service call needs a JSON request payload");
        assert_eq!(master.asked(), Vec::<String>::new());
    }

    #[tokio::test]
    async fn a_payload_that_is_not_a_json_value_is_bad_value_and_not_sent() {
        for payload in ["not json", "null"] {
            let key = "fcan/can0/param/md1/motor0/gain";
            let (master, r) = ask(QKind::Param, key, payload).await;
            let (kind, _) = error(r);
            assert_eq!(kind, ErrorKind::BadValue, "{payload}");
            assert_eq!(master.asked(), Vec::<String>::new());
        }
    }

    #[tokio::test]
    async fn a_param_query_without_payload_reads_the_value() {
        let key = "fcan/can0/param/md1/motor0/gain";
        let (master, r) = ask(QKind::Param, key, "").await;
        assert_eq!(json_replies(r), [(key.to_string(), json!({"value": 0.5}))]);
        assert_eq!(master.asked(), Vec::<String>::new());
    }

    #[tokio::test]
    async fn a_param_query_with_a_value_writes_it_and_replies_it() {
        let key = "fcan/can0/param/md1/motor0/gain";
        let (master, r) = ask(QKind::Param, key, "2.5").await;
        assert_eq!(json_replies(r), [(key.to_string(), json!({"value": 2.5}))]);
        assert_eq!(master.asked(), ["param_set md1.motor0.gain 2.5"]);
    }

    /// Issue 33 item 5: the reply to a write is what the node holds then, read back —
    /// not the value asked for.
    #[tokio::test]
    async fn a_param_write_replies_the_value_the_node_holds() {
        let key = "fcan/can0/param/md1/motor0/gain";
        let (master, r) = ask(QKind::Param, key, "1e-50").await;
        assert_eq!(json_replies(r), [(key.to_string(), json!({"value": 0.0}))]);
        assert_eq!(master.asked(), ["param_set md1.motor0.gain 1e-50"]);
        let (_, r) = ask(QKind::Param, key, "0.7").await;
        let replies = json_replies(r);
        assert_eq!(
            serde_json::to_string(&replies[0].1).unwrap(),
            r#"{"value":0.7}"#
        );
    }

    /// A payload that holds no value names the parameter and the field.
    #[tokio::test]
    async fn a_string_for_a_param_is_bad_value_naming_it() {
        let key = "fcan/can0/param/md1/motor0/gain";
        let (master, r) = ask(QKind::Param, key, r#""x""#).await;
        let (kind, message) = error(r);
        assert_eq!(kind, ErrorKind::BadValue);
        assert!(
            message.starts_with(r#"md1.motor0.gain: got the string "x""#),
            "{message}"
        );
        assert_eq!(master.asked(), Vec::<String>::new());
    }

    #[tokio::test]
    async fn a_master_refusal_is_replied_with_its_kind_and_reason() {
        let key = "fcan/can0/param/md1/motor0/gain";
        let (master, r) = ask(QKind::Param, key, "200.0").await;
        let (kind, message) = error(r);
        assert_eq!(kind, ErrorKind::BadValue);
        assert!(message.contains("max 10"), "{message}");
        assert_eq!(master.asked(), Vec::<String>::new());
        let (kind, message) = error(
            ask(QKind::Param, "fcan/can0/param/md1/motor0/kq", "")
                .await
                .1,
        );
        assert_eq!(kind, ErrorKind::UnknownName);
        assert!(message.contains("md1.motor0.kq"), "{message}");
    }

    #[tokio::test]
    async fn a_query_to_a_node_not_served_is_not_running_with_its_phase_whatever_it_carries() {
        for payload in ["", "1.0", "not json"] {
            let key = "fcan/can0/param/md2/motor0/gain";
            let (master, r) = ask(QKind::Param, key, payload).await;
            let (kind, message) = error(r);
            assert_eq!(kind, ErrorKind::NotRunning, "{payload:?}");
            assert_eq!(message, "node md2 is not running (offline)");
            assert_eq!(master.asked(), Vec::<String>::new());
        }
        let (kind, _) = error(
            ask(QKind::Service, "fcan/can0/service/md2/a/b", "{}")
                .await
                .1,
        );
        assert_eq!(kind, ErrorKind::NotRunning);
    }

    #[tokio::test]
    async fn a_query_to_a_node_nobody_knows_is_an_unknown_name_naming_the_bus() {
        let (kind, message) = error(
            ask(QKind::Service, "fcan/can0/service/md7/a/b", "{}")
                .await
                .1,
        );
        assert_eq!(kind, ErrorKind::UnknownName);
        assert_eq!(message, "no node named `md7` on bus can0");
    }

    #[tokio::test]
    async fn a_plan_is_replied_as_json_and_as_null_before_the_node_is_planned() {
        let r = json_replies(ask(QKind::Plan, "fcan/can0/plan/md1", "").await.1);
        assert_eq!(
            r,
            [("fcan/can0/plan/md1".to_string(), json!({"frames": []}))]
        );
        let r = json_replies(ask(QKind::Plan, "fcan/can0/plan/md2", "").await.1);
        assert_eq!(r, [("fcan/can0/plan/md2".to_string(), Json::Null)]);
        let (kind, message) = error(ask(QKind::Plan, "fcan/can0/plan/md7", "").await.1);
        assert_eq!(kind, ErrorKind::UnknownName);
        assert_eq!(message, "no node md7 on this bus");
    }

    #[tokio::test]
    async fn reprovision_reaches_the_master_and_replies_null() {
        let key = "fcan/can0/reprovision/md2";
        let (master, r) = ask(QKind::Reprovision, key, "").await;
        assert_eq!(json_replies(r), [(key.to_string(), Json::Null)]);
        assert_eq!(master.asked(), ["reprovision 2"]);
        let (master, r) = ask(QKind::Reprovision, "fcan/can0/reprovision/md7", "").await;
        assert_eq!(error(r).0, ErrorKind::UnknownName);
        assert_eq!(master.asked(), Vec::<String>::new());
    }

    /// An update query starts an update with the image and share it carries, or aborts
    /// with `{"abort": true}`; a payload that is neither is `bad_value` and asks nothing.
    #[tokio::test]
    async fn update_queries_start_or_abort_by_their_options() {
        let own = "fcan/can0/update/md2";
        let key = KeyExpr::try_from(own).unwrap();
        let master = FakeMaster::new();
        let ask = |payload: Vec<u8>| {
            let req = Request::decode(QKind::Update, &key, &payload, 1 << 20);
            let master = &master;
            async move {
                match req {
                    Ok(req) => answer(master, &View, req).await,
                    Err(e) => Err(e),
                }
            }
        };
        let r = ask(crate::wire::abort_payload()).await;
        assert_eq!(json_replies(r), [(own.to_string(), Json::Null)]);
        let image = fcan_master::update::UpdateImage::new(vec![1; 10], [0; 32], "md{i}", "2.0.0");
        // The fake master refuses every update (no capability): the kind says so.
        let r = ask(crate::wire::update_payload(&image, 0.5)).await;
        assert_eq!(error(r).0, ErrorKind::Refused);
        assert_eq!(
            master.asked(),
            ["abort_update 2", "update 2 2.0.0 10 bytes share 0.5"]
        );
        for bad in [Vec::new(), b"\x02\0\0\0{}".to_vec(), vec![0xFF; 40]] {
            assert_eq!(error(ask(bad).await).0, ErrorKind::BadValue);
        }
        let mut extra = crate::wire::abort_payload();
        extra.extend_from_slice(&image.to_file());
        assert_eq!(error(ask(extra).await).0, ErrorKind::BadValue);
        assert_eq!(master.asked().len(), 2, "nothing more asked");
    }
}
