//! Which DDS endpoint carries each topic of a running node, sans I/O: the node's
//! schema mapped to ROS types ([`fcan_ros2::mapping`]) and its registry entries
//! (the instances it announced) give one [`Route`] per topic.

use fcan_core::id::NodeId;
use fcan_core::ir::Field;
use fcan_core::msg::DataDirection;
use fcan_master::engine::NodeSchema;
use fcan_master::registry::Registry;
use fcan_ros2::mapping::{map_schema, Binding, Note, Origin};
use fcan_ros2::{rihs, Interfaces};

use crate::dds::{Endpoint, Qos};
use crate::names::{dds_topic, dds_type};

/// One topic as the bridge carries it.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// The topic's name, on the bus and in ROS (`/motor_driver1/motor0/feedback`).
    pub name: String,
    /// s2m: the bridge publishes it; m2s: the bridge subscribes and publishes on the bus.
    pub dir: DataDirection,
    /// The ROS type (`example_msgs/msg/Feedback`).
    pub ros_type: String,
    /// Where the type came from.
    pub origin: Origin,
    /// Its RIHS01 hash.
    pub type_hash: String,
    /// The DDS endpoint.
    pub endpoint: Endpoint,
    /// The fcan fields and where they go.
    pub binding: Binding,
    /// The topic's fcan fields.
    pub fields: Vec<Field>,
}

/// QoS of the bridge's writers: ROS 2's default (reliable, volatile, keep last 10),
/// which a subscriber of either reliability matches.
pub const WRITER_QOS: Qos = Qos::DEFAULT;

/// QoS of the writers of on-commit topics (`period_us: 0`, a state sent when it
/// changes): reliable, transient local, keep last 1, so a subscriber that joins later
/// and asks for transient local gets the state now (ROS's "latched" topics).
pub const STATE_QOS: Qos = Qos {
    reliable: true,
    depth: 1,
    transient_local: true,
};

/// QoS of the bridge's readers: best effort, keep last 10, which a publisher of either
/// reliability matches (a reliable reader would not hear a best-effort publisher).
pub const READER_QOS: Qos = Qos {
    reliable: false,
    depth: 10,
    transient_local: false,
};

/// One service as the bridge serves it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceRoute {
    /// The service's name, on the bus and in ROS (`/io_board3/out0/set`).
    pub name: String,
    /// The ROS service type (`std_srvs/srv/SetBool`).
    pub ros_type: String,
    /// Where the type came from.
    pub origin: Origin,
    /// Where requests arrive: `rq/<name>Request`, type `<pkg>::srv::dds_::<Name>_Request_`.
    pub request_endpoint: Endpoint,
    /// Where replies go: `rr/<name>Reply`, type `…_Response_`.
    pub reply_endpoint: Endpoint,
    /// The request's fields and binding.
    pub request: (Binding, Vec<Field>),
    /// The response's fields and binding.
    pub response: (Binding, Vec<Field>),
}

/// QoS of service requests and replies: ROS 2's default for services (reliable,
/// volatile, keep last 10).
pub const SERVICE_QOS: Qos = Qos::DEFAULT;

/// Everything the bridge carries for one node.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct NodeRoutes {
    /// Its topics.
    pub topics: Vec<Route>,
    /// Its services.
    pub services: Vec<ServiceRoute>,
    /// What its mapping noted (a field left out, a `ros:` not honoured).
    pub notes: Vec<Note>,
}

/// The routes of node `node` running `schema`, for the topics and services `registry`
/// lists for it.
pub fn node_routes(
    node: NodeId,
    schema: &NodeSchema,
    registry: &Registry,
    store: &mut Interfaces,
) -> NodeRoutes {
    let types = map_schema(&schema.schema, store);
    let mut services = Vec::new();
    for sv in registry.services.iter().filter(|s| s.node == node) {
        let Some(block) = schema
            .numbering
            .blocks
            .iter()
            .find(|b| b.number == sv.block)
        else {
            continue;
        };
        let Some(bt) = schema.schema.types.get(block.type_index) else {
            continue;
        };
        let Some(decl) = bt.services.get(sv.service as usize) else {
            continue;
        };
        let Some(st) = types.service(&bt.name, &decl.name) else {
            continue;
        };
        // rmw announces the service's hash on both of its endpoints.
        let hash = rihs::type_hash(store, &st.ros_type).ok();
        let ep = |topic: String, ty: String| Endpoint {
            topic,
            type_name: dds_type(&ty),
            qos: SERVICE_QOS,
            type_hash: hash,
        };
        let base = sv.name.trim_start_matches('/');
        services.push(ServiceRoute {
            name: sv.name.clone(),
            ros_type: st.ros_type.clone(),
            origin: st.origin,
            request_endpoint: ep(format!("rq/{base}Request"), st.request.message.clone()),
            reply_endpoint: ep(format!("rr/{base}Reply"), st.response.message.clone()),
            request: (st.request.clone(), decl.request.clone()),
            response: (st.response.clone(), decl.response.clone()),
        });
    }
    let mut routes = Vec::new();
    for t in registry.topics.iter().filter(|t| t.node == node) {
        let Some(block) = schema.numbering.blocks.iter().find(|b| b.number == t.block) else {
            continue;
        };
        let Some(bt) = schema.schema.types.get(block.type_index) else {
            continue;
        };
        let Some(topic) = bt.topics.get(t.topic as usize) else {
            continue;
        };
        let Some(tt) = types.topic(&bt.name, &topic.name) else {
            continue;
        };
        let hash = rihs::type_hash(store, &tt.ros_type).ok();
        let type_hash = hash.map_or_else(String::new, |h| h.to_string());
        routes.push(Route {
            name: t.name.clone(),
            dir: t.dir,
            ros_type: tt.ros_type.clone(),
            origin: tt.origin,
            type_hash,
            endpoint: Endpoint {
                topic: dds_topic(&t.name),
                type_name: dds_type(&tt.ros_type),
                qos: match t.dir {
                    DataDirection::S2m if t.period_us == 0 => STATE_QOS,
                    DataDirection::S2m => WRITER_QOS,
                    DataDirection::M2s => READER_QOS,
                },
                type_hash: hash,
            },
            binding: tt.binding.clone(),
            fields: topic.fields.clone(),
        });
    }
    NodeRoutes {
        topics: routes,
        services,
        notes: types.notes,
    }
}
