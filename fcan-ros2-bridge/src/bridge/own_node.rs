//! What the bridge says as a ROS node of its own ([`Ros2Options::node_name`]): the
//! graph on `ros_discovery_info` (the served nodes with their endpoints, and the
//! bridge's node), laid out by [`crate::graph`], and `/rosout` lines
//! ([`crate::rosout`]): the master's events and the refusals worth saying.
//! (`/parameter_events`, the bridge node's other writer, is `parameters`'.)
//!
//! [`Ros2Options::node_name`]: super::Ros2Options::node_name

use fcan_core::id::NodeId;
use fcan_master::api::MasterApi;
use fcan_master::serving::lock;
use fcan_master::MasterEvent;
use fcan_ros2::dynamic;

use super::{Shared, TARGET};
use crate::dds::{Dds, DdsWriter, Gid};
use crate::graph::{self, GraphNode};
use crate::rosout::{self, Level, Line};

/// The nodes the graph lists: the `served` ones, then the bridge's own node `own_name`
/// with its writers `own_writers` (`/rosout`, `/parameter_events`) if it has any.
fn graph_nodes(
    mut served: Vec<GraphNode>,
    own_name: &str,
    own_writers: Vec<Gid>,
) -> Vec<GraphNode> {
    if !own_writers.is_empty() {
        served.push(GraphNode {
            name: own_name.to_string(),
            readers: vec![],
            writers: own_writers,
        });
    }
    served
}

/// The logger of a refusal on `name`: the node that a topic or service
/// (`/motor_driver1/motor0/target`) or a node (`motor_driver1`) belongs to.
fn logger_of(name: &str) -> &str {
    name.trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or(name)
}

impl<M: MasterApi, D: Dds> Shared<M, D> {
    /// The name of node `id` as the master knows it, else `node<id>`.
    async fn name_of(&self, id: NodeId) -> String {
        let nodes = self.master.nodes().await.unwrap_or_default();
        nodes
            .into_iter()
            .find(|n| n.id == id && !n.name.is_empty())
            .map_or_else(|| format!("node{}", id.get()), |n| n.name)
    }

    /// The `/rosout` line of a master event, if it deserves one; `served` names the
    /// node while it is served (a node that went is named by its served entry).
    pub(super) async fn log_event(&self, e: &MasterEvent, served: Option<&str>) {
        let name = match (served, e.node()) {
            (Some(n), _) => n.to_string(),
            (None, Some(id)) => self.name_of(id).await,
            (None, None) => String::new(),
        };
        if let Some(line) = rosout::of_event(e, |_| name.clone(), &self.opts.node_name) {
            self.rosout(&line, "master_event");
        }
    }

    /// Writes a line on `/rosout`.
    fn rosout(&self, line: &Line, function: &str) {
        let Some(w) = &self.rosout else { return };
        let now = std::time::SystemTime::now();
        let encoded = dynamic::encode(
            &lock(&self.store),
            rosout::TYPE,
            &rosout::message(line, now, function),
        );
        if let Err(e) = encoded
            .map_err(|e| e.to_string())
            .and_then(|b| w.write(&b, None, Some(now)).map_err(|e| e.to_string()))
        {
            tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", rosout::TOPIC);
        }
    }

    /// A refusal worth saying: on stderr (through the log) and on `/rosout` as a warning
    /// of the node that `name` (a topic or service `/motor_driver1/motor0/target`, or a
    /// node `motor_driver1`) belongs to.
    pub(super) fn warn(&self, name: &str, text: String) {
        tracing::warn!(target: TARGET, parent: &self.span, "{text}");
        self.rosout(
            &Line {
                level: Level::Warn,
                logger: logger_of(name).to_string(),
                msg: text,
            },
            "refusal",
        );
    }

    /// Publishes this participant's nodes and their endpoints on `ros_discovery_info`,
    /// where ROS 2 tools (`ros2 node list`, `ros2 node info`) look for them: the served
    /// nodes, and the bridge's own node with its `/rosout` and `/parameter_events`.
    pub(super) fn publish_graph(&self) {
        let Some(writer) = &self.graph else { return };
        let served: Vec<GraphNode> = self.served.flat_map(|s| {
            Some(GraphNode {
                name: s.node.name.clone(),
                readers: s.handle.gids.readers.clone(),
                writers: s.handle.gids.writers.clone(),
            })
        });
        let own: Vec<Gid> = [&self.rosout, &self.param_events]
            .into_iter()
            .flatten()
            .map(|w| w.gid())
            .collect();
        let nodes = graph_nodes(served, &self.opts.node_name, own);
        let (ty, info) = graph::participant_info(self.opts.distro, &self.dds.gid(), &nodes);
        match dynamic::encode(&lock(&self.store), ty, &info) {
            Ok(b) => {
                if let Err(e) = writer.write(&b, None, None) {
                    tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", graph::TOPIC);
                }
            }
            Err(e) => tracing::warn!(target: TARGET, parent: &self.span, "{}: {e}", graph::TOPIC),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, r: u8, w: u8) -> GraphNode {
        GraphNode {
            name: name.into(),
            readers: vec![[r; 16]],
            writers: vec![[w; 16]],
        }
    }

    #[test]
    fn the_graph_lists_the_served_nodes_then_the_bridges_own() {
        let served = vec![node("md1", 1, 2), node("md2", 3, 4)];
        let nodes = graph_nodes(served.clone(), "fcan_bridge", vec![[9; 16], [8; 16]]);
        assert_eq!(nodes.len(), 3);
        assert_eq!(nodes[..2], served[..]);
        assert_eq!(
            nodes[2],
            GraphNode {
                name: "fcan_bridge".into(),
                readers: vec![],
                writers: vec![[9; 16], [8; 16]],
            }
        );
    }

    #[test]
    fn the_bridges_node_without_writers_is_not_listed() {
        assert_eq!(
            graph_nodes(vec![node("md1", 1, 2)], "fcan_bridge", vec![]),
            vec![node("md1", 1, 2)]
        );
        assert!(graph_nodes(vec![], "fcan_bridge", vec![]).is_empty());
    }

    #[test]
    fn a_refusal_is_logged_as_its_nodes() {
        assert_eq!(logger_of("/motor_driver1/motor0/target"), "motor_driver1");
        assert_eq!(logger_of("/motor_driver1/get_parameters"), "motor_driver1");
        assert_eq!(logger_of("motor_driver1"), "motor_driver1");
        assert_eq!(logger_of(""), "");
    }
}
