//! Errors the application can get from the node's API (never from bus input: bus input
//! is counted, NAKed or dropped, not returned).

/// [`crate::Node::new`] refused its inputs: the generated tables, the buffers and the
/// board configuration do not fit together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigError {
    /// `counts` has not one entry per instance array.
    CountsLength,
    /// `counts[array]` is above the array's `max_count`.
    CountTooLarge {
        /// The instance array.
        array: u8,
    },
    /// The topic arena is smaller than [`crate::codegen::NodeDesc::topic_bytes`].
    TopicBytes,
    /// The staging arena is smaller than [`crate::codegen::NodeDesc::stage_bytes`].
    StageBytes,
    /// The param arena is smaller than [`crate::codegen::NodeDesc::param_bytes`].
    ParamBytes,
    /// Fewer changed-parameter masks (`Buffers`' `BLOCKS`) than the descriptor has blocks.
    Blocks,
    /// Fewer topic state slots than [`crate::codegen::NodeDesc::topic_slots`].
    TopicSlots,
    /// Fewer plan frames than `limits.max_frames`.
    Frames,
    /// Fewer copy entries than `limits.max_copy_entries`.
    Entries,
    /// Fewer service slots than `limits.service_reassembly` (or none for a node that has
    /// services).
    ServiceSlots,
    /// A service slot buffer is smaller than
    /// [`crate::codegen::NodeDesc::required_service_buffer`].
    ServiceBuffer,
    /// A parameter is larger than a PARAM_SET can carry through the node's
    /// configuration reassembly buffer ([`crate::CONFIG_REASSEMBLY_BYTES`]).
    ParamTooLarge,
    /// The descriptor tables contradict themselves (an index or offset out of range, more
    /// than 255 blocks or 256 topic slots, more than 32 params in a type, a default of the
    /// wrong type).
    BadDesc,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::CountsLength => {
                f.write_str("counts must have one entry per instance array")
            }
            ConfigError::CountTooLarge { array } => {
                write!(f, "instance count of array {array} exceeds its max_count")
            }
            ConfigError::TopicBytes => f.write_str("topic arena too small"),
            ConfigError::StageBytes => f.write_str("staging arena too small"),
            ConfigError::ParamBytes => f.write_str("param arena too small"),
            ConfigError::Blocks => f.write_str("too few changed-parameter masks for the blocks"),
            ConfigError::TopicSlots => f.write_str("too few topic slots"),
            ConfigError::Frames => f.write_str("too few plan frames for limits.max_frames"),
            ConfigError::Entries => f.write_str("too few copy entries for limits.max_copy_entries"),
            ConfigError::ServiceSlots => f.write_str("too few service slots"),
            ConfigError::ServiceBuffer => f.write_str("service slot buffer too small"),
            ConfigError::ParamTooLarge => f.write_str("a parameter is too large for PARAM_SET"),
            ConfigError::BadDesc => f.write_str("inconsistent node descriptor"),
        }
    }
}

/// Why [`crate::Node::publish`] refused a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PublishError {
    /// No such block or topic.
    BadIndex,
    /// The block exists but is not wired on this board.
    NotWired,
    /// The topic is m2s: the master writes it, the node does not.
    WrongDirection,
    /// `bytes` is not exactly the topic's packed size.
    BadLength,
}

impl core::fmt::Display for PublishError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            PublishError::BadIndex => "no such block or topic",
            PublishError::NotWired => "block not wired",
            PublishError::WrongDirection => "topic is m2s",
            PublishError::BadLength => "value length differs from the topic size",
        })
    }
}

/// Why [`crate::Node::complete`] refused a deferred reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CompleteError {
    /// The token names no deferred call: wrong slot, already completed, expired
    /// (`DEFERRED_SERVICE_TIMEOUT_US`), or the slot was recycled for another request
    /// (the token's generation differs).
    UnknownToken,
    /// The response is longer than the service's response size.
    TooLong,
}

impl core::fmt::Display for CompleteError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            CompleteError::UnknownToken => "no deferred call for this token",
            CompleteError::TooLong => "response longer than the service's response size",
        })
    }
}
