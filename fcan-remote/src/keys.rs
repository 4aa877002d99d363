//! The key expressions of the remote API (`docs/remote.md`), built and parsed in this one
//! place. Root `fcan`, then the bus, then a fixed chunk naming the kind of entity, so a
//! topic, a service and a parameter of the same name never collide:
//!
//! | key | entity |
//! |---|---|
//! | `fcan/<bus>/topic/<node>/<ns>/<name>` | topic samples (s2m) and commands (m2s) |
//! | `fcan/<bus>/publish` | several m2s commands in one put, published as one batch |
//! | `fcan/<bus>/samples/<node>` | a node's s2m samples, those of one frame in one put |
//! | `fcan/<bus>/service/<node>/<ns>/<name>` | service queryable |
//! | `fcan/<bus>/param/<node>/<ns>/<name>` | parameter queryable |
//! | `fcan/<bus>/node/<node>` | node info queryable |
//! | `fcan/<bus>/plan/<node>` | frame plan queryable |
//! | `fcan/<bus>/alive/<node>` | liveliness token of a running node |
//! | `fcan/<bus>/schema/<sha256 hex>` | schema blob queryable |
//! | `fcan/<bus>/status` | status queryable and periodic put |
//! | `fcan/<bus>/frames` | raw frames, while subscribed |
//! | `fcan/<bus>/events` | engine events |
//! | `fcan/<bus>/registry` | registry queryable |
//! | `fcan/<bus>/joints/status` | the joints face's status (`fcan serve --joints`): queryable and put on change |
//!
//! `<name>` may contain `/` (`velocity/kp`): its chunks are kept.
//!
//! ```
//! use fcan_remote::keys::{self, Entity};
//! assert_eq!(keys::topic("can0", "/md3/motor0/feedback").unwrap(), "fcan/can0/topic/md3/motor0/feedback");
//! assert_eq!(keys::param("can0", "md3.motor0.velocity.kp").unwrap(), "fcan/can0/param/md3/motor0/velocity/kp");
//! assert_eq!(keys::publish("can0").unwrap(), "fcan/can0/publish");
//! assert_eq!(keys::samples("can0", "md3").unwrap(), "fcan/can0/samples/md3");
//! assert_eq!(
//!     keys::parse("fcan/can0/param/md3/motor0/velocity/kp"),
//!     Some(("can0".to_string(), Entity::Param("md3.motor0.velocity.kp".to_string())))
//! );
//! ```

/// The root chunk of every key.
pub const ROOT: &str = "fcan";

/// What a key names (the bus aside).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Entity {
    /// A topic, by its master name `/<node>/<ns>/<name>`.
    Topic(String),
    /// Several m2s topics published as one batch (the payload names them).
    Publish,
    /// One node's s2m samples, grouped by frame, by node name.
    Samples(String),
    /// A service, by its master name `/<node>/<ns>/<name>`.
    Service(String),
    /// A parameter, by its master name `<node>.<ns>.<name with / as .>`.
    Param(String),
    /// A node's info, by node name.
    Node(String),
    /// A node's frame plan, by node name.
    Plan(String),
    /// A request to provision a node again, by node name.
    Reprovision(String),
    /// A firmware update of a node, by node name (a query whose payload is the image).
    Update(String),
    /// Every frame on the bus (while subscribed).
    Frames,
    /// A node's liveliness token, by node name.
    Alive(String),
    /// A schema blob, by its SHA-256 in hex.
    Schema(String),
    /// The bus status.
    Status,
    /// The bus events.
    Events,
    /// The registry.
    Registry,
    /// The status of the daemon's joints face (`fcan serve --ros2 --joints`).
    JointsStatus,
}

/// Whether `s` is a key-safe bus name: `[A-Za-z0-9_-]+`.
pub fn is_bus_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `s` is usable as one key chunk (not empty, none of Zenoh's special
/// characters, not a wildcard).
fn chunk_ok(s: &str) -> bool {
    !s.is_empty() && !s.contains(['/', '*', '$', '?', '#']) && s != "**"
}

/// `/<node>/<ns>/<name>` → `<node>/<ns>/<name>`, checked.
fn slash_path(name: &str) -> Option<&str> {
    let rest = name.strip_prefix('/')?;
    let mut it = rest.splitn(3, '/');
    let (node, ns, tail) = (it.next()?, it.next()?, it.next()?);
    (chunk_ok(node) && chunk_ok(ns) && tail.split('/').all(chunk_ok)).then_some(rest)
}

fn base(bus: &str) -> Option<String> {
    is_bus_name(bus).then(|| format!("{ROOT}/{bus}"))
}

/// The key of topic `name` (`/<node>/<ns>/<name>`) on `bus`.
pub fn topic(bus: &str, name: &str) -> Option<String> {
    Some(format!("{}/topic/{}", base(bus)?, slash_path(name)?))
}

/// The key of service `name` (`/<node>/<ns>/<name>`) on `bus`.
pub fn service(bus: &str, name: &str) -> Option<String> {
    Some(format!("{}/service/{}", base(bus)?, slash_path(name)?))
}

/// The key of parameter `name` (`<node>.<ns>.<name>`, the master's dotted name; the
/// name's dots become chunks, as `velocity/kp` is named `velocity.kp`) on `bus`.
pub fn param(bus: &str, name: &str) -> Option<String> {
    let chunks: Vec<&str> = name.split('.').collect();
    (chunks.len() >= 3 && chunks.iter().all(|c| chunk_ok(c)))
        .then(|| {
            format!(
                "{}/param/{}",
                base(bus).unwrap_or_default(),
                chunks.join("/")
            )
        })
        .filter(|_| is_bus_name(bus))
}

/// The key of a node's info.
pub fn node(bus: &str, node: &str) -> Option<String> {
    chunk_ok(node).then_some(())?;
    Some(format!("{}/node/{node}", base(bus)?))
}

/// The key that provisions a node again (a query, no payload).
pub fn reprovision(bus: &str, node: &str) -> Option<String> {
    chunk_ok(node).then_some(())?;
    Some(format!("{}/reprovision/{node}", base(bus)?))
}

/// The key that writes a firmware image into a node (a query; the payload:
/// `crate::wire::update_payload`).
pub fn update(bus: &str, node: &str) -> Option<String> {
    chunk_ok(node).then_some(())?;
    Some(format!("{}/update/{node}", base(bus)?))
}

/// The key of a node's frame plan.
pub fn plan(bus: &str, node: &str) -> Option<String> {
    chunk_ok(node).then_some(())?;
    Some(format!("{}/plan/{node}", base(bus)?))
}

/// The key of a node's liveliness token.
pub fn alive(bus: &str, node: &str) -> Option<String> {
    chunk_ok(node).then_some(())?;
    Some(format!("{}/alive/{node}", base(bus)?))
}

/// The key of a schema blob by its digest (64 hex digits).
pub fn schema(bus: &str, digest: &fcan_core::hash::SchemaDigest) -> Option<String> {
    Some(format!("{}/schema/{digest}", base(bus)?))
}

/// The key of a batch of m2s commands: one put carries several topics' values, so the
/// daemon publishes them together and a frame they share goes out once.
pub fn publish(bus: &str) -> Option<String> {
    Some(format!("{}/publish", base(bus)?))
}

/// The key of a node's grouped samples: each put carries the samples decoded from one
/// frame, `{"/<node>/<ns>/<topic>": value, …}`, for a client that wants all of a node's
/// topics for a fraction of the puts.
pub fn samples(bus: &str, node: &str) -> Option<String> {
    chunk_ok(node).then_some(())?;
    Some(format!("{}/samples/{node}", base(bus)?))
}

/// The key of the joints face's status (put on change, queryable).
pub fn joints_status(bus: &str) -> Option<String> {
    Some(format!("{}/joints/status", base(bus)?))
}

/// The status key.
pub fn status(bus: &str) -> Option<String> {
    Some(format!("{}/status", base(bus)?))
}

/// The raw frames key.
pub fn frames(bus: &str) -> Option<String> {
    Some(format!("{}/frames", base(bus)?))
}

/// The events key.
pub fn events(bus: &str) -> Option<String> {
    Some(format!("{}/events", base(bus)?))
}

/// The registry key.
pub fn registry(bus: &str) -> Option<String> {
    Some(format!("{}/registry", base(bus)?))
}

/// The wildcard over every key of one kind on `bus` (`fcan/<bus>/<kind>/**`).
pub fn all_of(bus: &str, kind: &str) -> Option<String> {
    Some(format!("{}/{kind}/**", base(bus)?))
}

/// Splits a concrete key into its bus and entity; `None` for a key outside the API.
pub fn parse(key: &str) -> Option<(String, Entity)> {
    let mut it = key.splitn(4, '/');
    if it.next()? != ROOT {
        return None;
    }
    let bus = it.next()?;
    if !is_bus_name(bus) {
        return None;
    }
    let kind = it.next()?;
    let rest = it.next();
    let entity = match (kind, rest) {
        ("status", None) => Entity::Status,
        ("publish", None) => Entity::Publish,
        ("events", None) => Entity::Events,
        ("frames", None) => Entity::Frames,
        ("registry", None) => Entity::Registry,
        ("joints", Some("status")) => Entity::JointsStatus,
        ("topic" | "service" | "param", Some(rest)) => {
            let chunks: Vec<&str> = rest.split('/').collect();
            if chunks.len() < 3 || !chunks.iter().all(|c| chunk_ok(c)) {
                return None;
            }
            match kind {
                "topic" => Entity::Topic(format!("/{rest}")),
                "service" => Entity::Service(format!("/{rest}")),
                _ => {
                    // The master names params with dots; a dot inside a chunk would
                    // make the name ambiguous.
                    if chunks.iter().any(|c| c.contains('.')) {
                        return None;
                    }
                    Entity::Param(chunks.join("."))
                }
            }
        }
        (
            "node" | "plan" | "reprovision" | "update" | "alive" | "schema" | "samples",
            Some(rest),
        ) if chunk_ok(rest) => match kind {
            "node" => Entity::Node(rest.to_string()),
            "plan" => Entity::Plan(rest.to_string()),
            "reprovision" => Entity::Reprovision(rest.to_string()),
            "update" => Entity::Update(rest.to_string()),
            "alive" => Entity::Alive(rest.to_string()),
            "samples" => Entity::Samples(rest.to_string()),
            _ => Entity::Schema(rest.to_string()),
        },
        _ => return None,
    };
    Some((bus.to_string(), entity))
}

/// The node name of a topic or service name (`/<node>/…`) or param name (`<node>.…`).
pub fn node_of(name: &str) -> &str {
    let n = name.strip_prefix('/').unwrap_or(name);
    n.split(['/', '.']).next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_and_parse_round_trip() {
        let t = topic("sim", "/md1/motor0/feedback").unwrap();
        assert_eq!(t, "fcan/sim/topic/md1/motor0/feedback");
        assert_eq!(
            parse(&t),
            Some(("sim".into(), Entity::Topic("/md1/motor0/feedback".into())))
        );
        let s = service("can-0", "/io3/port0/set/all").unwrap();
        assert_eq!(
            parse(&s),
            Some(("can-0".into(), Entity::Service("/io3/port0/set/all".into())))
        );
        let p = param("sim", "md1.motor0.velocity.kp").unwrap();
        assert_eq!(p, "fcan/sim/param/md1/motor0/velocity/kp");
        assert_eq!(
            parse(&p),
            Some(("sim".into(), Entity::Param("md1.motor0.velocity.kp".into())))
        );
        for (k, e) in [
            (status("b").unwrap(), Entity::Status),
            (publish("b").unwrap(), Entity::Publish),
            (events("b").unwrap(), Entity::Events),
            (registry("b").unwrap(), Entity::Registry),
            (joints_status("b").unwrap(), Entity::JointsStatus),
            (node("b", "md1").unwrap(), Entity::Node("md1".into())),
            (alive("b", "md1").unwrap(), Entity::Alive("md1".into())),
            (samples("b", "md1").unwrap(), Entity::Samples("md1".into())),
        ] {
            assert_eq!(parse(&k), Some(("b".into(), e)));
        }
        let d = fcan_core::hash::SchemaDigest::of(b"blob");
        assert_eq!(
            parse(&schema("b", &d).unwrap()),
            Some(("b".into(), Entity::Schema(d.to_string())))
        );
    }

    #[test]
    fn refuses_what_is_not_a_key_of_the_api() {
        assert_eq!(topic("bad bus", "/a/b/c"), None);
        assert_eq!(topic("b", "a/b/c"), None);
        assert_eq!(topic("b", "/a/b"), None);
        assert_eq!(topic("b", "/a/*/c"), None);
        assert_eq!(param("b", "a.b"), None);
        assert_eq!(parse("ros/b/status"), None);
        assert_eq!(parse("fcan/b/status/x"), None);
        assert_eq!(publish("bad bus"), None);
        assert_eq!(parse("fcan/b/publish/a/b/c"), None);
        assert_eq!(parse("fcan/b/topic/a/b"), None);
        assert_eq!(parse("fcan/b/node/a/b"), None);
        assert_eq!(parse("fcan/b/weird"), None);
        assert_eq!(node_of("/md1/motor0/x"), "md1");
        assert_eq!(node_of("md1.motor0.x"), "md1");
    }
}
