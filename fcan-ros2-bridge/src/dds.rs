//! The DDS the bridge needs, as a thin trait of ours: a participant that makes writers
//! and readers of already-encoded CDR on a named topic with a named type. The bridge
//! never names a RustDDS type; [`crate::rustdds_backend`] is the one implementation.

use std::time::SystemTime;

use fcan_ros2::rihs::TypeHash;
use futures_util::stream::BoxStream;

use crate::rpc::SampleId;

/// How reliable and how deep an endpoint is (ROS 2's QoS profiles, the part the bridge
/// sets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Qos {
    /// Reliable (`true`) or best effort.
    pub reliable: bool,
    /// Keep the last `depth` samples.
    pub depth: u16,
    /// Transient local (a late joiner gets the last samples) or volatile.
    pub transient_local: bool,
}

impl Qos {
    /// ROS 2's default for topics: reliable, volatile, keep last 10.
    pub const DEFAULT: Qos = Qos {
        reliable: true,
        depth: 10,
        transient_local: false,
    };
}

/// One writer or reader to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The DDS topic (`rt/motor_driver1/motor0/feedback`).
    pub topic: String,
    /// The DDS type (`example_msgs::msg::dds_::Feedback_`).
    pub type_name: String,
    /// Its QoS.
    pub qos: Qos,
    /// The ROS type's RIHS01 hash, announced in the endpoint's USER_DATA as rmw does
    /// (REP-2011: [`crate::names::user_data`]), so ROS 2 tools see it
    /// (`ros2 topic info -v`, rclpy's `get_publishers_info_by_topic`). `None`: not
    /// announced, which ROS reports as an unknown hash.
    pub type_hash: Option<TypeHash>,
}

/// Why DDS refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("DDS: {0}")]
pub struct DdsError(pub String);

/// A DDS participant.
pub trait Dds: Send + Sync + 'static {
    /// A writer of one topic.
    type Writer: DdsWriter;
    /// Makes a writer.
    fn writer(&self, e: &Endpoint) -> Result<Self::Writer, DdsError>;
    /// Makes a reader: a stream of samples, and the reader's GUID.
    fn reader(&self, e: &Endpoint) -> Result<Reader, DdsError>;
    /// The participant's GUID (the `gid` ROS 2's graph names it by).
    fn gid(&self) -> Gid;
}

/// A DDS GUID: 12 bytes of participant prefix and 4 of entity id, as ROS 2's graph
/// (`rmw_dds_common/msg/Gid`, Jazzy) names participants, readers and writers.
pub type Gid = [u8; 16];

/// A reader: its samples and its GUID.
pub struct Reader {
    /// The samples, as they arrive.
    pub samples: BoxStream<'static, Received>,
    /// The reader's GUID.
    pub gid: Gid,
}

/// A sample read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// CDR with its encapsulation header.
    pub cdr: Vec<u8>,
    /// The sample's identity (its writer and sequence number), where the DDS knows it.
    pub id: Option<SampleId>,
    /// Its source timestamp, if the writer gave one.
    pub source_time: Option<SystemTime>,
}

/// A writer of one topic.
pub trait DdsWriter: Send + Sync + 'static {
    /// Writes one sample: CDR with its encapsulation header; for a service reply in the
    /// Fast DDS framing, the request it answers as its related sample identity; its
    /// source timestamp (the bridge gives the time the frame reached the master).
    fn write(
        &self,
        cdr: &[u8],
        related: Option<SampleId>,
        source_time: Option<SystemTime>,
    ) -> Result<(), DdsError>;
    /// The writer's GUID.
    fn gid(&self) -> Gid;
}
