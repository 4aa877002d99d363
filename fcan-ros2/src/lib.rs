//! The ROS 2 face of an fcan bus: which ROS 2 type every topic and service of a node's
//! schema is carried as, built at run time from the schema (or its blob) like every
//! other face.
//!
//! This crate is the types layer, sans I/O:
//!
//! - [`idl`]: ROS interface definitions as data, the `.msg`/`.srv` format both ways;
//! - [`interfaces`]: the store of every type the bridge can name, starting with the
//!   bundled standard interfaces (std_msgs, std_srvs, geometry_msgs, sensor_msgs,
//!   trajectory_msgs, builtin_interfaces);
//! - [`mapping`]: a schema's topics and services → ROS types and field bindings
//!   (`ros: {type, map}`, custom types built from the fcan fields, generated types);
//! - [`rihs`]: RIHS01 type hashes, as Jazzy announces them;
//! - [`dynamic`]: any ROS message as a value tree ↔ CDR (the parameter services' types):
//!   the crate's one CDR codec;
//! - [`cdr`] (feature `values`): fcan values ↔ CDR bytes through a binding, over
//!   [`dynamic`];
//! - [`package`]: the ROS 2 interface package `fcan-codegen ros-package` writes.
//!
//! The mapping is described in `docs/ros2.md`.
//!
//! ```
//! use fcan_ros2::{mapping, Interfaces};
//! let mut store = Interfaces::bundled();
//! let schema = fcan_ros2::example_schema();
//! let types = mapping::map_schema(&schema, &mut store);
//! let state = types.topic("Solenoid", "state").unwrap();
//! assert_eq!(state.ros_type, "std_msgs/msg/Bool");
//! println!("{}", fcan_ros2::rihs::type_hash(&store, &state.ros_type).unwrap());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bundled;
#[cfg(feature = "values")]
pub mod cdr;
pub mod dynamic;
pub mod idl;
pub mod interfaces;
pub mod mapping;
pub mod package;
pub mod rihs;

pub use interfaces::Interfaces;

/// A small schema for examples and tests: one `Solenoid` block whose `state` topic is a
/// `std_msgs/msg/Bool` (`on` → `data`) and whose `set` service is a
/// `std_srvs/srv/SetBool`.
#[doc(hidden)]
pub fn example_schema() -> fcan_core::ir::Schema {
    use fcan_core::ir::*;
    use fcan_core::msg::DataDirection;
    use fcan_core::types::ScalarType;
    let on = Field {
        name: "on".into(),
        ty: ScalarType::Bool,
        len: None,
    };
    let success = Field {
        name: "success".into(),
        ty: ScalarType::Bool,
        len: None,
    };
    Schema {
        protocol: PROTOCOL_VERSION,
        node: "valves{i}".into(),
        allocation: "static".into(),
        limits: Limits::default(),
        types: vec![BlockType {
            name: "Solenoid".into(),
            params: vec![],
            topics: vec![Topic {
                name: "state".into(),
                dir: DataDirection::S2m,
                period_us: 0,
                fields: vec![on.clone()],
                ros: Some(Ros {
                    ty: "std_msgs/msg/Bool".into(),
                    map: vec![("on".into(), "data".into())],
                }),
            }],
            services: vec![Service {
                name: "set".into(),
                request: vec![on],
                response: vec![success],
                ros: Some(Ros {
                    ty: "std_srvs/srv/SetBool".into(),
                    map: vec![
                        ("on".into(), "data".into()),
                        ("success".into(), "success".into()),
                    ],
                }),
            }],
        }],
        instances: vec![InstanceArray {
            ty: "Solenoid".into(),
            max_count: 2,
            ns: "valve{i}".into(),
        }],
    }
}
