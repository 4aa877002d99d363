//! What the router counts. Every counter saturates; none ever wraps or panics.

use crate::link::Link;

/// Why a frame, or one destination of it, was not forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// An m2s data frame from the uplink whose standard identifier no FRAME_DEFINE the
    /// router saw assigned.
    UnknownStdId,
    /// A unicast configuration frame (or an m2s data frame) for a node the router does not
    /// know, or whose entry has expired.
    UnknownNode,
    /// A FRAME_DEFINE whose identifier could not be learned because the identifier table
    /// is full of live entries. The FRAME_DEFINE itself is still forwarded; this counts the
    /// lost learning, and the frames that need it later count as [`Self::UnknownStdId`].
    TableFull,
    /// The driver could not hand the frame to a link (queue full, bus off …), reported
    /// through [`Router::send_failed`](crate::Router::send_failed).
    SendFailed,
    /// A CAN FD frame for a link that carries Classical CAN only. Never truncated.
    Mtu,
    /// A frame going the wrong way: node → master traffic heard on the uplink (a node
    /// there talks to the master directly), master → node traffic heard on a downlink
    /// (downlinks talk only to the master), an s2m data identifier sent from the uplink.
    WrongWay,
    /// An fcan configuration identifier with a reserved opcode or a broadcast source.
    Malformed,
    /// A frame given to the router with a link it does not have.
    InvalidLink,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 8] = [
        DropReason::UnknownStdId,
        DropReason::UnknownNode,
        DropReason::TableFull,
        DropReason::SendFailed,
        DropReason::Mtu,
        DropReason::WrongWay,
        DropReason::Malformed,
        DropReason::InvalidLink,
    ];

    /// A short name (`unknown_std_id` …) for logs.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::UnknownStdId => "unknown_std_id",
            DropReason::UnknownNode => "unknown_node",
            DropReason::TableFull => "table_full",
            DropReason::SendFailed => "send_failed",
            DropReason::Mtu => "mtu",
            DropReason::WrongWay => "wrong_way",
            DropReason::Malformed => "malformed",
            DropReason::InvalidLink => "invalid_link",
        }
    }
}

/// Drops by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounters {
    counts: [u64; DropReason::ALL.len()],
}

impl DropCounters {
    /// Drops for one reason.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.counts.get(reason as usize).copied().unwrap_or(0)
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// `(reason, count)` for every reason.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (*r, self.get(*r)))
    }

    pub(crate) fn add(&mut self, reason: DropReason) {
        if let Some(c) = self.counts.get_mut(reason as usize) {
            *c = c.saturating_add(1);
        }
    }
}

/// Traffic of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkCounters {
    /// Frames taken from this link.
    pub received: u64,
    /// Frames taken from this link and forwarded to at least one other link.
    pub forwarded: u64,
    /// Frames the router gave this link to send (forwarded *to* it).
    pub sent: u64,
    /// CAN FD frames for this link not sent because it carries Classical CAN only (also
    /// counted in `dropped.mtu`).
    pub mtu_dropped: u64,
    /// ANNOUNCEs from this downlink forwarded with their CAN FD capabilities cleared,
    /// because the path to the master is Classical CAN (the node runs Classical CAN).
    pub fd_masked: u64,
}

/// What the router learned and forgot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LearnCounters {
    /// Nodes learned (first time, or again after being forgotten).
    pub nodes: u64,
    /// Nodes that came back on another downlink than before.
    pub nodes_moved: u64,
    /// Nodes heard with a new boot_id (their identifiers are forgotten).
    pub nodes_rebooted: u64,
    /// Nodes forgotten after `NODE_OFFLINE_TIMEOUT_US` of silence.
    pub nodes_forgotten: u64,
    /// Standard identifiers learned from FRAME_DEFINE.
    pub std_ids: u64,
    /// Standard identifiers forgotten (plan cleared or truncated, node rebooted,
    /// identifier given to another node, stale entry evicted).
    pub std_ids_forgotten: u64,
}

/// Every counter of a router with `N` downlinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters<const N: usize> {
    /// The uplink: `received`/`forwarded` is the master → nodes direction, `sent` the
    /// nodes → master direction.
    pub up: LinkCounters,
    /// Each downlink: `received`/`forwarded` is nodes → master from that bus, `sent` is
    /// master → nodes onto it.
    pub down: [LinkCounters; N],
    /// Frames (or destinations of a frame) not forwarded, by reason.
    pub dropped: DropCounters,
    /// Learning.
    pub learned: LearnCounters,
    /// Node-id collisions: an ANNOUNCE or HEARTBEAT for a node id that is live on another
    /// downlink.
    pub collisions: u64,
    /// Unicast DISCOVERs for unknown nodes, sent to every downlink.
    pub flooded_unknown_node: u64,
    /// m2s data frames with an unknown identifier sent to every downlink (only with
    /// [`RouterConfig::flood_unknown_m2s`](crate::RouterConfig::flood_unknown_m2s)).
    pub flooded_unknown_std_id: u64,
    /// Data frames from a downlink forwarded up with an identifier the router did not
    /// learn (the master counts them as unrouted if it does not know them either).
    pub up_unlearned_std_id: u64,
    /// Frames that are not fcan's (standard IDs outside the data range, extended IDs
    /// without the configuration marker) passed through.
    pub foreign: u64,
    /// Multi-frame ANNOUNCE / FRAME_DEFINE headers the router could not follow (no free
    /// capture slot, or out-of-order segments); the frames were still forwarded.
    pub capture_missed: u64,
    /// Events dropped because the event queue was full.
    pub events_lost: u64,
}

impl<const N: usize> Default for Counters<N> {
    fn default() -> Self {
        Counters {
            up: LinkCounters::default(),
            down: [LinkCounters::default(); N],
            dropped: DropCounters::default(),
            learned: LearnCounters::default(),
            collisions: 0,
            flooded_unknown_node: 0,
            flooded_unknown_std_id: 0,
            up_unlearned_std_id: 0,
            foreign: 0,
            capture_missed: 0,
            events_lost: 0,
        }
    }
}

impl<const N: usize> Counters<N> {
    /// The counters of one link (`None` for a downlink the router does not have).
    pub fn link(&self, link: Link) -> Option<&LinkCounters> {
        match link {
            Link::Up => Some(&self.up),
            Link::Down(i) => self.down.get(i as usize),
        }
    }

    pub(crate) fn link_mut(&mut self, link: Link) -> Option<&mut LinkCounters> {
        match link {
            Link::Up => Some(&mut self.up),
            Link::Down(i) => self.down.get_mut(i as usize),
        }
    }
}

/// `*c += 1`, saturating.
pub(crate) fn bump(c: &mut u64) {
    *c = c.saturating_add(1);
}
