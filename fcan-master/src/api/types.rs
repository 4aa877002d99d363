//! The plain data of the API: a node as the user sees it, the status snapshot, a frame
//! on the bus. A user reads them; only a master builds them (non-exhaustive).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fcan_core::frame::Frame;
use fcan_core::hash::SchemaDigest;
use fcan_core::id::NodeId;
use serde::{Deserialize, Serialize};

use crate::engine::{EngineStats, Phase};

/// A node as the user sees it.
///
/// Its serde shape is the node info of the remote API and one line of
/// `fcan nodes --json` (`docs/remote.md`, "Node info"; `docs/cli.md`), declared here once:
/// every field present, `null` when absent; enumerations by their stable names
/// ([`crate::json::with`]). Reading it back checks every field (the text may come from a
/// remote daemon); `driver`, `watchdog`, `firmware` and `collision` may be missing (an
/// older daemon's), the others may not.
///
/// ```
/// # fn show(n: &fcan_master::NodeInfo) -> serde_json::Result<()> {
/// let line = serde_json::to_string(n)?;
/// let back: fcan_master::NodeInfo = serde_json::from_str(&line)?;
/// assert_eq!(&back, n);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NodeInfo {
    /// Node id.
    #[serde(with = "crate::json::with::node_id")]
    pub id: NodeId,
    /// Name (`md3`).
    pub name: String,
    /// Where the master is with the node (its `Display` is what the CLI prints:
    /// `running`, `provisioning`, `offline`, `failed: …`).
    #[serde(with = "crate::json::with::phase")]
    pub phase: Phase,
    /// State the node reported.
    #[serde(with = "crate::json::with::node_state")]
    pub state: fcan_core::msg::NodeState,
    /// Boot id.
    pub boot_id: u32,
    /// Bus mode.
    #[serde(with = "crate::json::with::bus_mode")]
    pub mode: fcan_core::msg::BusMode,
    /// Data frames planned.
    pub frames: usize,
    /// Error summary from its heartbeat.
    pub errors: u16,
    /// The SHA-256 of the node's schema blob, once known (`Display`: 64 hex digits).
    /// JSON: `schema`.
    #[serde(rename = "schema", with = "crate::json::with::opt_digest")]
    pub digest: Option<SchemaDigest>,
    /// Where this master got the schema; `None` while unknown.
    // `null` while unknown, but never missing (an explicit `deserialize_with` makes a
    // missing `Option` field an error, as `schema`'s is).
    #[serde(deserialize_with = "Option::deserialize")]
    pub schema_source: Option<SchemaSource>,
    /// The device driver that presents this node (`robstride`), for an off-the-shelf
    /// device on the bus; `None` for an fcan board.
    // Missing from daemons that predate device drivers.
    #[serde(default)]
    pub driver: Option<String>,
    /// The device's own command watchdog as its driver arms it (`200 ms`, `off`,
    /// `none`), for an off-the-shelf device; `None` for an fcan board (whose watchdog is
    /// the protocol's master-lost timeout, always armed).
    // Missing from daemons that predate device watchdogs in node info.
    #[serde(default, with = "crate::json::with::opt_text")]
    pub watchdog: Option<fcan_transport::DeviceWatchdog>,
    /// The version string of the firmware it runs, for a node that takes firmware
    /// updates; `None` while unknown or for a node that does not.
    // Missing from daemons that predate firmware updates.
    #[serde(default)]
    pub firmware: Option<String>,
    /// The boot id of a second board heard claiming this node id within the offline
    /// timeout (docs/protocol.md §5.3): two boards with one id; `None` normally.
    // Missing from daemons that predate collision reports.
    #[serde(default)]
    pub collision: Option<u32>,
}

/// Where a master got a node's schema blob. JSON: `"downloaded"` or `"cache"`
/// ([`SchemaSource::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
