//! The ROS 2 face of an fcan bus over DDS.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod dds;
pub mod rustdds_backend;
