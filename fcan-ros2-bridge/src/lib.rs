//! The ROS 2 face of an fcan bus over DDS: every running node's topics as ROS 2 topics,
//! built at run time from the nodes' blobs (`fcan serve --ros2`, the demo's `--ros2`).
//!
//! - [`names`]: ROS names as DDS spells them;
//! - [`routes`] (sans I/O): a node's topics → DDS endpoints, ROS types and bindings;
//! - [`dds`]: the thin DDS trait the bridge uses; [`rustdds_backend`] implements it on
//!   RustDDS (pure Rust: no ROS installation needed to build or run);
//! - [`drops`] (sans I/O): commands from DDS that did not reach the bus, counted per
//!   writer, and when to say so;
//! - [`rpc`] (sans I/O): ROS 2 services on DDS, both framings;
//! - [`params`] (sans I/O): a node's parameters as its ROS 2 parameters;
//! - [`graph`] (sans I/O): the `ros_discovery_info` that names the nodes;
//! - [`rosout`] (sans I/O): what happens to the nodes as `/rosout` log lines;
//! - [`joints`]: the joints of a cycle configuration as `sensor_msgs/msg/JointState`
//!   both ways, for ros2_control (the mapping sans I/O, and the loop's task);
//! - [`bridge`]: the shell that keeps the endpoints in step with the bus.
//!
//! The types come from [`fcan_ros2`]; the mapping is described in `docs/ros2.md`.
//!
//! What the bridge says about itself goes to `tracing`: target `fcan::ros2` for the
//! bridge, `fcan::joints` for the joints, each event a child of the span current when the
//! face was started. `fcan serve` prints them on stderr; a program without a subscriber
//! prints nothing. (`/rosout` is the nodes' log on the ROS side, written either way.)

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bridge;
pub mod dds;
pub mod drops;
pub mod graph;
pub mod joints;
pub mod names;
pub mod params;
pub mod rosout;
pub mod routes;
pub mod rpc;
pub mod rustdds_backend;

pub use bridge::{Ros2Bridge, Ros2Options, Ros2Stats};
pub use drops::WriterDrops;
pub use graph::Distro;
pub use rpc::Framing;
