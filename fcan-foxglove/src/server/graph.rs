//! The connection graph of the served nodes (Foxglove's Topic Graph panel) and the
//! statuses a node leaves in the app (stopped, back, two boards on one id). Which nodes
//! the graph keeps ([`kept`]) and which status a stopped node leaves
//! ([`unserved_status`]) are plain functions, tested below.

use fcan_master::serving::{ServedSet, Unserved};
use fcan_master::{MasterApi, MasterEvent};
use foxglove::websocket::{ConnectionGraph, Status};

use super::{NodeServed, Shared};
use crate::mapping::{self, Graph};

/// The id of the status a node leaves in the app (stopped, or a collision on its id),
/// which it takes back when it is served again.
fn status_id(node: &str) -> String {
    format!("fcan.node.{node}")
}

/// Graph `g` with only what the `served` nodes publish, subscribe to or provide: the
/// registry may list a node still provisioning.
fn kept(g: Graph, served: &[String]) -> Graph {
    let keep = |ids: &std::collections::BTreeSet<String>| ids.iter().any(|n| served.contains(n));
    Graph {
        published: g.published.into_iter().filter(|(_, i)| keep(i)).collect(),
        subscribed: g.subscribed.into_iter().filter(|(_, i)| keep(i)).collect(),
        services: g.services.into_iter().filter(|(_, i)| keep(i)).collect(),
    }
}

/// The warning node `name` leaves in the app when it is no longer served for `why`,
/// until it is back: none when it rebooted (it is served again at once).
fn unserved_status(name: &str, why: &Unserved) -> Option<Status> {
    if *why == Unserved::Rebooted {
        return None;
    }
    Some(Status::warning(format!("fcan: node {name} is {why}")).with_id(status_id(name)))
}

/// The error two boards answering to one id (docs/protocol.md §5.3) leave in the app,
/// as the master describes it (`text`), under the node's status id (`node`: its name
/// while served, else `node<id>`): the user must fix it on the boards; the app shows it
/// until this node's status changes.
fn collision_status(node: &str, text: &str) -> Status {
    Status::error(format!("fcan: {text}")).with_id(status_id(node))
}

impl<M: MasterApi> Shared<M> {
    /// The topic graph of the served nodes, for Foxglove's Topic Graph panel.
    pub(super) async fn publish_graph(&self, served: &ServedSet<NodeServed<M>>) {
        let Ok(r) = self.master.registry().await else {
            return;
        };
        let served: Vec<String> = served.nodes().into_iter().map(|n| n.name).collect();
        let g = kept(mapping::graph(&r), &served);
        let mut graph = ConnectionGraph::new();
        for (t, ids) in &g.published {
            graph.set_published_topic(t, ids.iter().cloned());
        }
        for (t, ids) in &g.subscribed {
            graph.set_subscribed_topic(t, ids.iter().cloned());
        }
        for (s, ids) in &g.services {
            graph.set_advertised_service(s, ids.iter().cloned());
        }
        self.with_server(|h| {
            let _ = h.publish_connection_graph(graph);
        });
    }

    /// Node `name` is served (again): the warning it left goes.
    pub(super) fn node_back(&self, name: &str) {
        self.with_server(|h| h.remove_status(vec![status_id(name)]));
    }

    /// Node `name` is no longer served for `why`: the warning it leaves.
    pub(super) fn node_gone(&self, name: &str, why: &Unserved) {
        if let Some(status) = unserved_status(name, why) {
            self.with_server(|h| h.publish_status(status));
        }
    }

    /// Two boards answer to one id: an error in the app (`name`: the node's while
    /// served).
    pub(super) fn collision(&self, e: &MasterEvent, name: Option<&str>) {
        let MasterEvent::Collision { node, .. } = e else {
            return;
        };
        if let Some(text) = fcan_master::json::describe_event(e) {
            let node = name.map_or_else(|| format!("node{}", node.get()), str::to_string);
            let status = collision_status(&node, &text);
            self.with_server(|h| h.publish_status(status));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_master::Phase;
    use foxglove::websocket::StatusLevel;
    use std::collections::{BTreeMap, BTreeSet};

    fn of(entries: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
        entries
            .iter()
            .map(|(t, n)| (t.to_string(), BTreeSet::from([n.to_string()])))
            .collect()
    }

    #[test]
    fn the_graph_keeps_only_the_served_nodes() {
        let g = Graph {
            published: of(&[("/md1/m0/fb", "md1"), ("/io3/a/s", "io3")]),
            subscribed: of(&[("/md1/m0/target", "md1"), ("/io3/out0/set", "io3")]),
            services: of(&[("/md1/m0/home", "md1"), ("/io3/reset", "io3")]),
        };
        let k = kept(g.clone(), &["md1".to_string()]);
        assert_eq!(k.published, of(&[("/md1/m0/fb", "md1")]));
        assert_eq!(k.subscribed, of(&[("/md1/m0/target", "md1")]));
        assert_eq!(k.services, of(&[("/md1/m0/home", "md1")]));
        assert_eq!(kept(g.clone(), &[]), Graph::default());
        assert_eq!(kept(g.clone(), &["md1".into(), "io3".into()]), g);
    }

    #[test]
    fn a_stopped_node_leaves_a_warning_unless_it_rebooted() {
        assert!(unserved_status("md1", &Unserved::Rebooted).is_none());
        let s = unserved_status("md1", &Unserved::Gone).unwrap();
        assert_eq!(s.level, StatusLevel::Warning);
        assert_eq!(s.message, "fcan: node md1 is gone");
        assert_eq!(s.id.as_deref(), Some("fcan.node.md1"));
        let s = unserved_status("md1", &Unserved::Phase(Phase::Offline)).unwrap();
        assert!(s.message.starts_with("fcan: node md1 is "), "{}", s.message);
        // The collision's error takes the same id: the node's status in the app.
        let c = collision_status("md1", "two boards");
        assert_eq!(c.level, StatusLevel::Error);
        assert_eq!(c.message, "fcan: two boards");
        assert_eq!(c.id, s.id);
    }
}
