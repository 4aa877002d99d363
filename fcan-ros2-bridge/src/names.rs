//! ROS 2 names as DDS spells them (the convention rmw_cyclonedds and rmw_fastrtps
//! share): a topic `/a/b` is the DDS topic `rt/a/b`; a type `pkg/msg/Name` is the DDS
//! type `pkg::msg::dds_::Name_`.

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
