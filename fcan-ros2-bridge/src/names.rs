//! ROS 2 names as DDS spells them (the convention rmw_cyclonedds and rmw_fastrtps
//! share): a topic `/a/b` is the DDS topic `rt/a/b`; a type `pkg/msg/Name` is the DDS
//! type `pkg::msg::dds_::Name_`; a type's hash is announced in an endpoint's USER_DATA
//! as `typehash=RIHS01_…;`.

use fcan_ros2::rihs::TypeHash;

/// The DDS topic of a ROS topic.
///
/// ```
/// assert_eq!(fcan_ros2_bridge::names::dds_topic("/motor_driver1/motor0/feedback"), "rt/motor_driver1/motor0/feedback");
/// ```
pub fn dds_topic(ros_topic: &str) -> String {
    format!("rt/{}", ros_topic.trim_start_matches('/'))
}

/// The DDS type of a ROS message type (a service's halves included).
///
/// ```
/// use fcan_ros2_bridge::names::dds_type;
/// assert_eq!(dds_type("std_msgs/msg/Bool"), "std_msgs::msg::dds_::Bool_");
/// assert_eq!(dds_type("std_srvs/srv/SetBool_Request"), "std_srvs::srv::dds_::SetBool_Request_");
/// ```
pub fn dds_type(ros_type: &str) -> String {
    let mut parts: Vec<&str> = ros_type.split('/').collect();
    let name = parts.pop().unwrap_or("");
    let mut s = parts.join("::");
    s.push_str("::dds_::");
    s.push_str(name);
    s.push('_');
    s
}

/// The USER_DATA of an endpoint of a type with hash `hash`: `typehash=RIHS01_<hex>;`,
/// what rmw_fastrtps and rmw_cyclonedds announce (rmw_dds_common's
/// `encode_type_hash_for_user_data_qos`) and what ROS 2 reads the hash from.
///
/// ```
/// let store = fcan_ros2::Interfaces::bundled();
/// let h = fcan_ros2::rihs::type_hash(&store, "std_msgs/msg/String").unwrap();
/// assert_eq!(
///     fcan_ros2_bridge::names::user_data(&h),
///     b"typehash=RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18;"
/// );
/// ```
pub fn user_data(hash: &TypeHash) -> Vec<u8> {
    format!("typehash={hash};").into_bytes()
}
