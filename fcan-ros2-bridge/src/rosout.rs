//! What the master sees happen to the nodes, as ROS 2 log lines on `/rosout` (what
//! `rqt_console` and `ros2 topic echo /rosout` show), sans I/O: which events are worth a
//! line, at which level, under which logger name, and the `rcl_interfaces/msg/Log` that
//! carries it.
//!
//! A line's logger is the node it is about (`motor_driver1`, as rclpy names a node's
//! logger), so `rqt_console` filters by node; lines about the bus as a whole (another
//! master heard) carry the bridge's own node name.

use std::time::SystemTime;

use fcan_core::id::NodeId;
use fcan_master::MasterEvent;
use fcan_ros2::dynamic::{ros_time, RosValue};

use crate::dds::Qos;

/// The ROS topic.
pub const TOPIC: &str = "/rosout";

/// The ROS type.
pub const TYPE: &str = "rcl_interfaces/msg/Log";

/// rcl's `/rosout` QoS: reliable, transient local (a console that starts late gets the
/// recent lines), keep last 1000.
pub const QOS: Qos = Qos {
    reliable: true,
    depth: 1000,
    transient_local: true,
};

/// A line's severity: `rcl_interfaces/msg/Log`'s constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Level {
    /// Pedantic detail.
    Debug = 10,
    /// Something normal happened.
    Info = 20,
    /// Something went wrong and the bridge or the master copes.
    Warn = 30,
    /// Something is broken and needs a person.
    Error = 40,
}

/// One log line: its level, its logger (a node name) and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Severity.
    pub level: Level,
    /// The logger: the node it is about, without the leading `/`.
    pub logger: String,
    /// The text.
    pub msg: String,
}

/// The line a master event deserves, if any. `name_of` gives a node's name (the
/// schema's node name, as the node is named on ROS 2); `bridge` names the lines about
/// the bus as a whole.
///
/// ```
/// use fcan_core::id::NodeId;
/// use fcan_master::MasterEvent;
/// use fcan_ros2_bridge::rosout::{of_event, Level};
///
/// let id = NodeId::new(2).unwrap();
/// let line = of_event(&MasterEvent::Offline { node: id }, |_| "motor_driver2".into(), "fcan_bridge").unwrap();
/// assert_eq!((line.level, line.logger.as_str()), (Level::Warn, "motor_driver2"));
/// // Progress inside provisioning is not worth a console line.
/// assert!(of_event(&MasterEvent::Announced { node: id, boot_id: 1 }, |_| String::new(), "b").is_none());
/// ```
pub fn of_event(e: &MasterEvent, name_of: impl Fn(NodeId) -> String, bridge: &str) -> Option<Line> {
    let about = |node: &NodeId, level: Level, msg: String| {
        Some(Line {
            level,
            logger: name_of(*node),
            msg,
        })
    };
    match e {
        MasterEvent::Online { node } => about(node, Level::Info, "online: its topics flow".into()),
        MasterEvent::Rebooted { node, old, new } => about(
            node,
            Level::Warn,
            format!("rebooted (boot id {old} → {new}); the master provisions it again"),
        ),
        MasterEvent::Offline { node } => about(
            node,
            Level::Warn,
            "offline: it fell silent; its topics and services are gone until it comes back"
                .into(),
        ),
        MasterEvent::Failed { node, reason } => about(
            node,
            Level::Error,
            format!(
                "could not be provisioned: {reason} (retried when it announces itself again)"
            ),
        ),
        MasterEvent::Collision { node, boot_ids } => about(
            node,
            Level::Error,
            format!(
                "two nodes answer to node id {} (boot ids {} and {}): give one another id",
                node.get(),
                boot_ids.0,
                boot_ids.1
            ),
        ),
        MasterEvent::ClassicNodeOnFdLink { node } => about(
            node,
            Level::Warn,
            "cannot do CAN FD: it is run on Classical CAN frames".into(),
        ),
        MasterEvent::OtherMaster { session } => Some(Line {
            level: Level::Error,
            logger: bridge.to_string(),
            msg: format!(
                "another master (session {session:#010x}) is on this bus: two owners fight over the nodes"
            ),
        }),
        _ => None,
    }
}

/// The `rcl_interfaces/msg/Log` of a line written at `stamp` by `function` (the file is
/// the bridge's, as rcl names the source of a line).
pub fn message(line: &Line, stamp: SystemTime, function: &str) -> RosValue {
    RosValue::Msg(vec![
        ros_time(stamp),
        RosValue::UInt(line.level as u64),
        RosValue::Str(line.logger.clone()),
        RosValue::Str(line.msg.clone()),
        RosValue::Str("fcan-ros2-bridge".into()),
        RosValue::Str(function.to_string()),
        RosValue::UInt(0),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> NodeId {
        NodeId::new(n).unwrap()
    }

    #[test]
    fn faults_are_errors_losses_are_warnings_and_comings_are_info() {
        let name = |n: NodeId| format!("node{}", n.get());
        let level = |e: MasterEvent| of_event(&e, name, "bridge").map(|l| (l.level, l.logger));
        assert_eq!(
            level(MasterEvent::Failed {
                node: id(3),
                reason: "x".into()
            }),
            Some((Level::Error, "node3".into()))
        );
        assert_eq!(
            level(MasterEvent::Rebooted {
                node: id(3),
                old: 1,
                new: 2
            }),
            Some((Level::Warn, "node3".into()))
        );
        assert_eq!(
            level(MasterEvent::Online { node: id(4) }),
            Some((Level::Info, "node4".into()))
        );
        assert_eq!(
            level(MasterEvent::Collision {
                node: id(5),
                boot_ids: (1, 2)
            }),
            Some((Level::Error, "node5".into()))
        );
        assert_eq!(
            level(MasterEvent::OtherMaster { session: 7 }),
            Some((Level::Error, "bridge".into()))
        );
        assert_eq!(
            level(MasterEvent::Announced {
                node: id(3),
                boot_id: 9
            }),
            None
        );
    }

    #[test]
    fn the_log_message_has_rcl_interfaces_layout() {
        let store = fcan_ros2::Interfaces::bundled();
        let line = Line {
            level: Level::Error,
            logger: "motor_driver1".into(),
            msg: "could not be provisioned".into(),
        };
        let m = message(&line, SystemTime::UNIX_EPOCH, "on_event");
        let bytes = fcan_ros2::dynamic::encode(&store, TYPE, &m).unwrap();
        let back = fcan_ros2::dynamic::decode(&store, TYPE, &bytes).unwrap();
        let RosValue::Msg(f) = back else { panic!() };
        assert_eq!(f[1], RosValue::UInt(40));
        assert_eq!(f[2].as_str(), Some("motor_driver1"));
        assert_eq!(f[3].as_str(), Some("could not be provisioned"));
    }
}
