//! The plain data of the API: a node as the user sees it, the status snapshot, a frame
//! on the bus. A user reads them; only a master builds them (non-exhaustive).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fcan_core::frame::Frame;
use fcan_core::hash::SchemaDigest;
use fcan_core::id::NodeId;

use crate::engine::{EngineStats, Phase};

/// A node as the user sees it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct NodeInfo {
    /// Node id.
    pub id: NodeId,
    /// Name (`md3`).
    pub name: String,
    /// Where the master is with the node (its `Display` is what the CLI prints:
    /// `running`, `provisioning`, `offline`, `failed: …`).
    pub phase: Phase,
    /// State the node reported.
    pub state: fcan_core::msg::NodeState,
    /// Boot id.
    pub boot_id: u32,
    /// The SHA-256 of the node's schema blob, once known (`Display`: 64 hex digits).
    pub digest: Option<SchemaDigest>,
    /// Where this master got the schema; `None` while unknown.
    pub schema_source: Option<SchemaSource>,
    /// Error summary from its heartbeat.
    pub errors: u16,
    /// Bus mode.
    pub mode: fcan_core::msg::BusMode,
    /// Data frames planned.
    pub frames: usize,
    /// The device driver that presents this node (`robstride`), for an off-the-shelf
    /// device on the bus; `None` for an fcan board.
    pub driver: Option<String>,
    /// The device's own command watchdog as its driver arms it (`200 ms`, `off`,
    /// `none`), for an off-the-shelf device; `None` for an fcan board (whose watchdog is
    /// the protocol's master-lost timeout, always armed).
    pub watchdog: Option<fcan_transport::DeviceWatchdog>,
    /// The version string of the firmware it runs, for a node that takes firmware
    /// updates; `None` while unknown or for a node that does not.
    pub firmware: Option<String>,
    /// The boot id of a second board heard claiming this node id within the offline
    /// timeout (docs/protocol.md §5.3): two boards with one id; `None` normally.
    pub collision: Option<u32>,
}

/// Where a master got a node's schema blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SchemaSource {
    /// Downloaded from the node (SCHEMA_READ).
    Downloaded,
    /// Found in the blob cache by digest: a warm start, no schema transfer.
    Cache,
}

impl SchemaSource {
    /// `"downloaded"` or `"cache"`, as the CLI prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaSource::Downloaded => "downloaded",
            SchemaSource::Cache => "cache",
        }
    }
}

impl std::fmt::Display for SchemaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A snapshot for monitors. Non-exhaustive: a user reads it, only the master builds it
/// (so fields can be added):
///
/// ```compile_fail,E0639
/// let s = fcan_master::Status {
///     nodes: Vec::new(),
///     samples: Default::default(),
///     stats: Default::default(),
///     bus_busy: std::time::Duration::ZERO,
/// };
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Status {
    /// Nodes.
    pub nodes: Vec<NodeInfo>,
    /// Samples received per topic name since start.
    pub samples: BTreeMap<String, u64>,
    /// Engine counters.
    pub stats: EngineStats,
    /// Wire time of every frame seen or sent since start, at [`MasterOptions::rates`](crate::MasterOptions::rates):
    /// its growth over an interval divided by the interval is the bus load.
    pub bus_busy: Duration,
}

/// A frame that passed on the bus as the master saw it: received, or sent by the master.
/// What `candump` on the interface would log, for recorders ([`Master::frames`](crate::Master::frames)).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct BusFrame {
    /// The frame.
    pub frame: Frame,
    /// When it was received or sent.
    pub at: Instant,
    /// `true`: the master sent it.
    pub sent: bool,
}

impl BusFrame {
    /// A frame seen at `at` (for a master implementation outside this crate).
    pub fn new(frame: Frame, at: Instant, sent: bool) -> BusFrame {
        BusFrame { frame, at, sent }
    }
}

/// Frames a [`Master::frames`](crate::Master::frames) receiver may fall behind by before it loses the oldest
/// (and learns how many, as `RecvError::Lagged`): about a second of a busy FD bus.
pub const FRAMES_BACKLOG: usize = 8192;
