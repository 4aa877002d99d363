//! Names → targets: the topics, services and parameters the master offers, built at run
//! time from each running node's schema (`docs/protocol.md` §7 for the naming rules).

use fcan_core::id::NodeId;
use fcan_core::ir::{Field, Param};
use fcan_core::msg::DataDirection;
use fcan_core::numbering::{param_path, topic_path};
use fcan_core::validate::did_you_mean;

use crate::engine::{Engine, NodeRecord, NodeSchema, Phase};

/// A topic of a running node.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct TopicInfo {
    /// `/<node>/<ns>/<topic>`.
    pub name: String,
    /// Node id.
    pub node: NodeId,
    /// Block number.
    pub block: u8,
    /// Topic index.
    pub topic: u8,
    /// Direction.
    pub dir: DataDirection,
    /// s2m period (0 = on commit).
    pub period_us: u32,
    /// Fields.
    pub fields: Vec<Field>,
    /// ROS type, if the schema names one.
    pub ros_type: Option<String>,
}

/// A service of a running node.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ServiceInfo {
    /// `/<node>/<ns>/<service>`.
    pub name: String,
    /// Node id.
    pub node: NodeId,
    /// Block number.
    pub block: u8,
    /// Service index.
    pub service: u8,
    /// Request fields.
    pub request: Vec<Field>,
    /// Response fields.
    pub response: Vec<Field>,
}

/// A parameter of a running node.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ParamInfo {
    /// `<node>.<ns>.<param>`.
    pub name: String,
    /// Node id.
    pub node: NodeId,
    /// Block number.
    pub block: u8,
    /// Param index.
    pub param: u8,
    /// Its declaration (type, default, bounds).
    pub decl: Param,
}

/// Everything the master offers right now.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Registry {
    /// Topics.
    pub topics: Vec<TopicInfo>,
    /// Services.
    pub services: Vec<ServiceInfo>,
    /// Parameters.
    pub params: Vec<ParamInfo>,
}

/// A name that is not offered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
// The hint lists names from node schemas: escaped like every node string printed.
#[error("no {kind} named `{}`{}", crate::text::Untrusted(.name), crate::text::Untrusted(.hint))]
pub struct UnknownName {
    /// `topic`, `service` or `param`.
    pub kind: &'static str,
    /// The name asked for.
    pub name: String,
    /// "; did you mean …?" or empty.
    pub hint: String,
}

fn unknown<'a>(
    kind: &'static str,
    name: &str,
    known: impl Iterator<Item = &'a str>,
) -> UnknownName {
    let hint = did_you_mean(name, known)
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default();
    UnknownName {
        kind,
        name: name.to_string(),
        hint,
    }
}

impl Registry {
    /// Builds the registry from every node the engine has running (or provisioning: its
    /// schema is known).
    pub fn of(engine: &Engine) -> Registry {
        let mut r = Registry::default();
        for n in engine.nodes() {
            if matches!(n.phase, Phase::Running | Phase::Provisioning) {
                r.add_node(n);
            }
        }
        r
    }

    fn add_node(&mut self, n: &NodeRecord) {
        let Some(s) = &n.schema else { return };
        let counts = &n.announce.counts;
        self.add_schema(n.id, s, |b| {
            counts.get(b.array).is_some_and(|c| b.index < *c as u32)
        });
    }

    /// Adds the topics, services and parameters of node `node` running schema `s`, for
    /// the blocks `wired` accepts (the instances the node announced). The master builds
    /// its registry so; a remote client rebuilds the same registry from the schema blob.
    pub fn add_schema(
        &mut self,
        node: NodeId,
        s: &NodeSchema,
        wired: impl Fn(&fcan_core::numbering::Block) -> bool,
    ) {
        let node_name = s.schema.node_name(node.get());
        for b in &s.numbering.blocks {
            if !wired(b) {
                continue;
            }
            let ty = &s.schema.types[b.type_index];
            for (i, t) in ty.topics.iter().enumerate() {
                self.topics.push(TopicInfo {
                    name: topic_path(&node_name, &b.ns, &t.name),
                    node,
                    block: b.number,
                    topic: i as u8,
                    dir: t.dir,
                    period_us: t.period_us,
                    fields: t.fields.clone(),
                    ros_type: t.ros.as_ref().map(|r| r.ty.clone()),
                });
            }
            for (i, sv) in ty.services.iter().enumerate() {
                self.services.push(ServiceInfo {
                    name: topic_path(&node_name, &b.ns, &sv.name),
                    node,
                    block: b.number,
                    service: i as u8,
                    request: sv.request.clone(),
                    response: sv.response.clone(),
                });
            }
            for (i, p) in ty.params.iter().enumerate() {
                self.params.push(ParamInfo {
                    name: param_path(&node_name, &b.ns, &p.name),
                    node,
                    block: b.number,
                    param: i as u8,
                    decl: p.clone(),
                });
            }
        }
    }

    /// The topic a copy entry of node `node`'s plan names (`block`, `topic`), if offered.
    pub fn topic_at(&self, node: NodeId, block: u8, topic: u8) -> Option<&TopicInfo> {
        self.topics
            .iter()
            .find(|t| t.node == node && t.block == block && t.topic == topic)
    }

    /// A topic by name.
    pub fn topic(&self, name: &str) -> Result<&TopicInfo, UnknownName> {
        self.topics
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| unknown("topic", name, self.topics.iter().map(|t| t.name.as_str())))
    }

    /// A service by name.
    pub fn service(&self, name: &str) -> Result<&ServiceInfo, UnknownName> {
        self.services
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| {
                unknown(
                    "service",
                    name,
                    self.services.iter().map(|t| t.name.as_str()),
                )
            })
    }

    /// A parameter by name.
    pub fn param(&self, name: &str) -> Result<&ParamInfo, UnknownName> {
        self.params
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| unknown("param", name, self.params.iter().map(|t| t.name.as_str())))
    }

    /// The topic with these numbers (for the sample counts of [`crate::Status`]).
    pub(crate) fn topic_name(&self, node: NodeId, block: u8, topic: u8) -> Option<&TopicInfo> {
        self.topics
            .iter()
            .find(|t| t.node == node && t.block == block && t.topic == topic)
    }
}
