//! ROS 2's graph, sans I/O: the `ros_discovery_info` sample that names a participant's
//! nodes and their readers' and writers' GUIDs, which `ros2 node list` and `ros2 node
//! info` read, in the layout of the ROS 2 release on the graph ([`Distro`]).

use fcan_ros2::dynamic::RosValue;
use fcan_ros2::Interfaces;

use crate::dds::Gid;

/// The ROS 2 release whose `ros_discovery_info` layout the bridge writes: Humble's
/// `Gid` holds 24 bytes, Jazzy's and Kilted's 16. Nothing else the bridge sends depends
/// on the release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Distro {
    /// Humble (and Iron): a 24-byte `Gid`.
    Humble,
    /// Jazzy, Kilted: a 16-byte `Gid`.
    Jazzy,
}

impl Distro {
    /// The release named by `$ROS_DISTRO` (`humble`, `iron` → Humble's layout; anything
    /// else, or none → Jazzy's).
    pub fn from_env(v: Option<&str>) -> Distro {
        match v.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
            Some("humble" | "iron") => Distro::Humble,
            _ => Distro::Jazzy,
        }
    }
}

impl std::str::FromStr for Distro {
    type Err = String;
    fn from_str(s: &str) -> Result<Distro, String> {
        match s.to_ascii_lowercase().as_str() {
            "humble" | "iron" => Ok(Distro::Humble),
            "jazzy" | "kilted" => Ok(Distro::Jazzy),
            _ => Err(format!("`{s}`: expected humble, iron, jazzy or kilted")),
        }
    }
}

/// The topic of ROS 2's graph.
pub const TOPIC: &str = "ros_discovery_info";
/// Its type (Jazzy's `rmw_dds_common`, bundled).
pub const TYPE: &str = "rmw_dds_common/msg/ParticipantEntitiesInfo";
/// Humble's layout of the same DDS type, under a name of its own in the bridge's store
/// (the bundled `rmw_dds_common` is Jazzy's).
pub const HUMBLE_TYPE: &str = "fcan_humble_graph/msg/ParticipantEntitiesInfo";

/// The interface store with Humble's graph messages beside the bundled ones.
pub fn store_with_humble_graph() -> Interfaces {
    let mut store = Interfaces::bundled();
    for (name, text) in [
        ("fcan_humble_graph/msg/Gid", "char[24] data\n"),
        (
            "fcan_humble_graph/msg/NodeEntitiesInfo",
            "string<=256 node_namespace\nstring<=256 node_name\nGid[] reader_gid_seq\nGid[] writer_gid_seq\n",
        ),
        (
            "fcan_humble_graph/msg/ParticipantEntitiesInfo",
            "Gid gid\nNodeEntitiesInfo[] node_entities_info_seq\n",
        ),
    ] {
        // Constant definitions: they read and add (a test runs this).
        if let Ok(m) = fcan_ros2::idl::parse_msg(name, text) {
            let _ = store.add_message(m);
        }
    }
    store
}

/// One node as the graph names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphNode {
    /// Its name (`motor_driver1`), in namespace `/`.
    pub name: String,
    /// Its readers' GUIDs.
    pub readers: Vec<Gid>,
    /// Its writers' GUIDs.
    pub writers: Vec<Gid>,
}

/// The `ros_discovery_info` sample of participant `participant` with `nodes`: the
/// store type to encode it as, and the value.
pub fn participant_info(
    distro: Distro,
    participant: &Gid,
    nodes: &[GraphNode],
) -> (&'static str, RosValue) {
    // Humble's Gid is the 16-byte GUID and 8 zero bytes.
    let len = if distro == Distro::Humble { 24 } else { 16 };
    let gid = |g: &Gid| {
        RosValue::Msg(vec![RosValue::Seq(
            g.iter()
                .copied()
                .chain(std::iter::repeat(0))
                .take(len)
                .map(|b| RosValue::UInt(u64::from(b)))
                .collect(),
        )])
    };
    let nodes = nodes
        .iter()
        .map(|n| {
            RosValue::Msg(vec![
                RosValue::Str("/".into()),
                RosValue::Str(n.name.clone()),
                RosValue::Seq(n.readers.iter().map(gid).collect()),
                RosValue::Seq(n.writers.iter().map(gid).collect()),
            ])
        })
        .collect();
    let ty = match distro {
        Distro::Humble => HUMBLE_TYPE,
        _ => TYPE,
    };
    (
        ty,
        RosValue::Msg(vec![gid(participant), RosValue::Seq(nodes)]),
    )
}
