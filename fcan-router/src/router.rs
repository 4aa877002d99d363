//! The routing core: one uplink, `N` downlinks, sans-IO.
//!
//! The driver hands every received frame to [`Router::route`] with the link it came from
//! and the time; the router answers with the links to send it to. It never sends, never
//! allocates and never panics. The rules are in `docs/router.md`.
//!
//! It changes one thing in a frame: the CAN FD capability bits of an ANNOUNCE coming up
//! from a Classical CAN downlink, so the master never plans FD frames for a node whose
//! bus cannot carry them.

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::{is_data_id, ConfigId, Direction, IdError, NodeId, Opcode};
use fcan_core::msg::{caps, Announce, ConfigMessage, CopyEntry, DataDirection, FrameHeader};
use fcan_core::timing::NODE_OFFLINE_TIMEOUT_US;

use crate::capture::{Captured, Captures, PREFIX_MAX};
use crate::counters::{bump, Counters, DropReason};
use crate::event::{Event, EventQueue};
use crate::link::{Link, LinkSet};
use crate::tables::{NodeEntry, NodeTable, StdEntry, StdTable, DATA_IDS, NODE_SLOTS};

/// Transfers (ANNOUNCE / FRAME_DEFINE headers) followed at once.
pub const CAPTURE_SLOTS: usize = 8;
/// Events held until [`Router::pop_event`] takes them.
pub const EVENT_QUEUE: usize = 16;

/// Bytes the decoders are given: a captured prefix followed by zeros standing in for the
/// variable part, as long as the longest variable part a one-byte count can announce.
const SCRATCH: usize = {
    let fd = fcan_core::msg::FrameDefine::HEADER_LEN + u8::MAX as usize * CopyEntry::LEN;
    let an = fcan_core::msg::Announce::FIXED_LEN + u8::MAX as usize;
    if fd > an {
        fd
    } else {
        an
    }
};

/// How a router is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterConfig<const N: usize> {
    /// The uplink's frame kind.
    pub uplink_mtu: Mtu,
    /// Each downlink's frame kind; `None` for a downlink that is not connected (broadcasts
    /// skip it). Lets one `Router<N>` type serve fewer than `N` buses.
    pub downlink_mtu: [Option<Mtu>; N],
    /// Send m2s data frames with an identifier the router has not learned to every
    /// downlink instead of dropping them (default `false`). Useful when the router starts
    /// after the master provisioned the nodes and the master will not provision again.
    pub flood_unknown_m2s: bool,
    /// Pass frames that are not fcan's (standard IDs outside the data range, extended IDs
    /// without the configuration marker) up, and from the uplink to every downlink
    /// (default `true`: emergency stops and time sync on `0x000..0x100` reach every bus).
    pub forward_foreign: bool,
}

impl<const N: usize> RouterConfig<N> {
    /// Every link of the same kind, all `N` downlinks connected.
    pub const fn uniform(mtu: Mtu) -> Self {
        RouterConfig {
            uplink_mtu: mtu,
            downlink_mtu: [Some(mtu); N],
            flood_unknown_m2s: false,
            forward_foreign: true,
        }
    }
}

/// Where one frame goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Route {
    /// The links to send the frame to (never the one it came from).
    pub to: LinkSet,
    /// Why the frame, or one of its destinations, was dropped.
    pub dropped: Option<DropReason>,
}

impl Route {
    fn to(to: LinkSet) -> Route {
        Route { to, dropped: None }
    }

    fn drop(reason: DropReason) -> Route {
        Route {
            to: LinkSet::EMPTY,
            dropped: Some(reason),
        }
    }
}

/// The routing core for `N` downlinks with room for `IDS` learned data identifiers (by
/// default every identifier of the data range, so the table is never full).
///
/// ```
/// use fcan_core::frame::{Frame, Mtu};
/// use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
/// use fcan_core::msg::{ConfigMessage, NodeHeartbeat, NodeState, FaultCode};
/// use fcan_router::{Link, Router, RouterConfig};
///
/// let mut r: Router<2> = Router::new(RouterConfig::uniform(Mtu::Classic));
/// // Node 5 heartbeats on downlink 1: the router learns where it is.
/// let hb = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
///     state: NodeState::Running, fault: FaultCode::None, boot_id: 42, errors: 0,
/// });
/// let mut buf = [0u8; 8];
/// hb.encode(&mut buf).unwrap();
/// let id = ConfigId::single(Opcode::Heartbeat, Direction::ToMaster, NodeId::new(5).unwrap(), 0);
/// let route = r.route(Link::Down(1), &mut Frame::classic(id.can_id(), &buf).unwrap(), 0);
/// assert_eq!(route.to.iter().collect::<Vec<_>>(), [Link::Up]);
/// assert_eq!(r.node_link(NodeId::new(5).unwrap(), 1), Some(Link::Down(1)));
/// ```
#[derive(Clone, Debug)]
pub struct Router<const N: usize, const IDS: usize = DATA_IDS> {
    config: RouterConfig<N>,
    downlinks: LinkSet,
    nodes: NodeTable,
    std_ids: StdTable<IDS>,
    captures: Captures<CAPTURE_SLOTS>,
    events: EventQueue<EVENT_QUEUE>,
    counters: Counters<N>,
    sweep: usize,
    prefix: [u8; PREFIX_MAX],
    scratch: [u8; SCRATCH],
}

impl<const N: usize, const IDS: usize> Router<N, IDS> {
    const LINKS_FIT: () = assert!(
        N <= LinkSet::MAX_DOWNLINKS,
        "a router has at most 31 downlinks"
    );

    /// A router with empty tables.
    pub fn new(config: RouterConfig<N>) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::LINKS_FIT;
        let mut downlinks = LinkSet::EMPTY;
        for (i, m) in config.downlink_mtu.iter().enumerate() {
            if m.is_some() {
                downlinks.insert(Link::Down(i as u8));
            }
        }
        Router {
            config,
            downlinks,
            nodes: NodeTable::new(),
            std_ids: StdTable::new(),
            captures: Captures::new(),
            events: EventQueue::new(),
            counters: Counters::default(),
            sweep: 0,
            prefix: [0; PREFIX_MAX],
            scratch: [0; SCRATCH],
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RouterConfig<N> {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> &Counters<N> {
        &self.counters
    }

    /// The next event, oldest first.
    pub fn pop_event(&mut self) -> Option<Event> {
        self.events.pop()
    }

    /// The frame kind of a link (`None` for a link the router does not have).
    pub fn mtu(&self, link: Link) -> Option<Mtu> {
        match link {
            Link::Up => Some(self.config.uplink_mtu),
            Link::Down(i) => self.config.downlink_mtu.get(i as usize).copied().flatten(),
        }
    }

    /// Where frames for `node` go now (`None`: unknown or forgotten).
    pub fn node_link(&self, node: NodeId, now_us: u32) -> Option<Link> {
        let e = self.nodes.get(node)?;
        is_live(e, now_us).then_some(Link::Down(e.link))
    }

    /// Every node entry, live or forgotten.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &NodeEntry)> {
        self.nodes.iter()
    }

    /// Every learned data identifier, in identifier order.
    pub fn std_ids(&self) -> impl Iterator<Item = &StdEntry> {
        self.std_ids.iter()
    }

    /// How many data identifiers the table holds (at most `IDS`).
    pub fn std_id_count(&self) -> usize {
        self.std_ids.len()
    }

    /// How many nodes route now (heard within the offline timeout).
    pub fn live_nodes(&self, now_us: u32) -> usize {
        self.nodes
            .iter()
            .filter(|(_, e)| is_live(e, now_us))
            .count()
    }

    /// Events waiting for [`Router::pop_event`].
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// Multi-frame ANNOUNCE / FRAME_DEFINE headers being followed.
    pub fn captures_in_progress(&self) -> usize {
        self.captures.in_progress()
    }

    /// Where an m2s frame with `std_id` goes now (`None`: unknown, s2m, or its node is
    /// not live).
    pub fn std_id_link(&self, std_id: u16, now_us: u32) -> Option<Link> {
        let e = self.std_ids.get(std_id)?;
        if e.dir != DataDirection::M2s {
            return None;
        }
        self.node_link(e.node, now_us)
    }

    /// Tells the router that the driver could not send a frame on `link`; counted as
    /// [`DropReason::SendFailed`].
    pub fn send_failed(&mut self, link: Link) {
        let _ = link;
        self.counters.dropped.add(DropReason::SendFailed);
    }

    /// Runs timers: forgets nodes silent for `NODE_OFFLINE_TIMEOUT_US` and abandons
    /// stalled captures. Call it every few hundred milliseconds (at the latest every
    /// half hour, so the wrapping microsecond clock stays unambiguous).
    pub fn poll(&mut self, now_us: u32) {
        for i in 0..NODE_SLOTS {
            self.sweep_slot(i, now_us);
        }
        self.captures.expire(now_us);
    }

    /// Decides where `frame`, received on `from` at `now_us` (a wrapping microsecond
    /// clock), goes, and learns from it. Never returns `from` itself, never a link the
    /// router does not have, and never a Classical CAN link for an FD frame.
    ///
    /// The driver sends `frame` as it is after the call: the first segment of an
    /// ANNOUNCE from a downlink whose path to the master is Classical CAN has its FD
    /// capabilities cleared ([`caps::unusable_on`], counted `fd_masked` on that
    /// downlink), so the master acknowledges the node in Classical CAN mode and plans
    /// only frames its bus can carry. No other frame is ever changed.
    pub fn route(&mut self, from: Link, frame: &mut Frame, now_us: u32) -> Route {
        // Amortised expiry: one node slot per frame.
        self.sweep = (self.sweep + 1) % NODE_SLOTS;
        self.sweep_slot(self.sweep, now_us);

        let known = self.has_link(from);
        match self.counters.link_mut(from) {
            Some(c) if known => bump(&mut c.received),
            _ => {
                self.counters.dropped.add(DropReason::InvalidLink);
                return Route::drop(DropReason::InvalidLink);
            }
        }
        let mut route = match frame.id() {
            CanId::Standard(id) if is_data_id(id) => self.route_data(from, id, now_us),
            CanId::Standard(_) => self.route_foreign(from),
            CanId::Extended(raw) => match ConfigId::from_raw(raw) {
                Ok(cid) => self.route_config(from, cid, frame, now_us),
                Err(IdError::NotConfigPlane) => self.route_foreign(from),
                Err(_) => Route::drop(DropReason::Malformed),
            },
        };
        route.to.remove(from);
        // Never an FD frame onto a Classical CAN link: drop that destination, count it.
        if frame.is_fd() {
            for l in route.to.iter() {
                if self.mtu(l) == Some(Mtu::Classic) {
                    route.to.remove(l);
                    route.dropped = Some(DropReason::Mtu);
                    self.counters.dropped.add(DropReason::Mtu);
                    if let Some(c) = self.counters.link_mut(l) {
                        bump(&mut c.mtu_dropped);
                    }
                }
            }
        }
        if route.to.is_empty() {
            if let Some(r) = route.dropped {
                if r != DropReason::Mtu {
                    self.counters.dropped.add(r);
                }
            }
        } else if let Some(c) = self.counters.link_mut(from) {
            bump(&mut c.forwarded);
        }
        for l in route.to.iter() {
            if let Some(c) = self.counters.link_mut(l) {
                bump(&mut c.sent);
            }
        }
        route
    }

    fn has_link(&self, link: Link) -> bool {
        link == Link::Up || self.downlinks.contains(link)
    }

    fn route_foreign(&mut self, from: Link) -> Route {
        if !self.config.forward_foreign {
            return Route::default();
        }
        bump(&mut self.counters.foreign);
        match from {
            Link::Up => Route::to(self.downlinks),
            Link::Down(_) => Route::to(LinkSet::one(Link::Up)),
        }
    }

    fn route_data(&mut self, from: Link, std_id: u16, now_us: u32) -> Route {
        if from != Link::Up {
            // Everything of the data plane from a downlink is the nodes' and goes up.
            if self.std_ids.get(std_id).is_none() {
                bump(&mut self.counters.up_unlearned_std_id);
            }
            return Route::to(LinkSet::one(Link::Up));
        }
        match self.std_ids.get(std_id) {
            Some(e) if e.dir == DataDirection::M2s => match self.node_link(e.node, now_us) {
                Some(l) => Route::to(LinkSet::one(l)),
                None => Route::drop(DropReason::UnknownNode),
            },
            Some(_) => Route::drop(DropReason::WrongWay),
            None if self.config.flood_unknown_m2s => {
                bump(&mut self.counters.flooded_unknown_std_id);
                Route::to(self.downlinks)
            }
            None => Route::drop(DropReason::UnknownStdId),
        }
    }

    fn route_config(&mut self, from: Link, cid: ConfigId, frame: &mut Frame, now_us: u32) -> Route {
        match (from, cid.dir) {
            (Link::Down(i), Direction::ToMaster) => {
                if cid.opcode == Opcode::Discover && cid.segment == 0 {
                    self.mask_caps(i, frame);
                }
                self.heard_node(i, cid, frame, now_us);
                Route::to(LinkSet::one(Link::Up))
            }
            (Link::Up, Direction::ToNode) => {
                if cid.opcode == Opcode::FrameDefine && !cid.node.is_broadcast() {
                    self.follow_frame_define(cid, frame, now_us);
                }
                if cid.node.is_broadcast() {
                    return Route::to(self.downlinks);
                }
                match self.node_link(cid.node, now_us) {
                    Some(l) => Route::to(LinkSet::one(l)),
                    None if cid.opcode == Opcode::Discover => {
                        // "Are you there?" to a node we have not heard: ask everywhere.
                        bump(&mut self.counters.flooded_unknown_node);
                        Route::to(self.downlinks)
                    }
                    None => Route::drop(DropReason::UnknownNode),
                }
            }
            _ => Route::drop(DropReason::WrongWay),
        }
    }

    /// Clears, in the first segment of an ANNOUNCE from downlink `link`, the capability
    /// bits the path to the master cannot honour: a node with an FD controller on a
    /// Classical CAN downlink must be spoken to in Classical CAN frames. The capability
    /// byte is in segment 0 on either frame kind and the transfer carries no checksum,
    /// so fcan-core's `Announce::clear_caps` on this one frame is the whole job.
    fn mask_caps(&mut self, link: u8, frame: &mut Frame) {
        let Some(down) = self.mtu(Link::Down(link)) else {
            return;
        };
        // The path is as capable as its least capable link.
        let clear = caps::unusable_on(down.min(self.config.uplink_mtu));
        if clear == 0 {
            return;
        }
        if let Some(bits) = Announce::clear_caps(frame.data_mut(), clear) {
            if bits != 0 {
                if let Some(c) = self.counters.link_mut(Link::Down(link)) {
                    bump(&mut c.fd_masked);
                }
            }
        }
    }

    /// Learns from a node → master frame heard on downlink `link`.
    fn heard_node(&mut self, link: u8, cid: ConfigId, frame: &Frame, now_us: u32) {
        let node = cid.node;
        let claim = match cid.opcode {
            Opcode::Heartbeat => true,
            Opcode::Discover => cid.segment == 0,
            _ => false,
        };
        // The boot_id, when this frame completes it.
        let boot = match cid.opcode {
            Opcode::Heartbeat => match ConfigMessage::decode(cid.opcode, cid.dir, frame.data()) {
                Ok(ConfigMessage::NodeHeartbeat(hb)) => Some(hb.boot_id),
                _ => None,
            },
            Opcode::Discover => self.follow_announce(cid, frame, now_us),
            _ => None,
        };
        self.observe(node, link, claim, boot, now_us);
    }

    fn observe(&mut self, node: NodeId, link: u8, claim: bool, boot: Option<u32>, now_us: u32) {
        let Some(slot) = self.nodes.slot_mut(node) else {
            return;
        };
        let here = Link::Down(link);
        let old = *slot;
        let fresh = NodeEntry {
            link,
            boot_id: boot,
            last_seen_us: now_us,
            live: true,
        };
        let mut rebooted = false;
        match old {
            Some(e) if is_live(&e, now_us) && e.link == link => {
                rebooted = matches!((e.boot_id, boot), (Some(o), Some(b)) if o != b);
                *slot = Some(NodeEntry {
                    boot_id: boot.or(e.boot_id),
                    ..fresh
                });
            }
            Some(e) if is_live(&e, now_us) => {
                if claim {
                    bump(&mut self.counters.collisions);
                    self.emit(Event::Collision {
                        node,
                        owner: Link::Down(e.link),
                        other: here,
                        boot_id: boot,
                    });
                }
                return;
            }
            Some(e) => {
                // Known but forgotten: it is back, here (perhaps on another downlink).
                rebooted = matches!((e.boot_id, boot), (Some(o), Some(b)) if o != b);
                *slot = Some(NodeEntry {
                    boot_id: boot.or(e.boot_id),
                    ..fresh
                });
                bump(&mut self.counters.learned.nodes);
                if e.link != link {
                    bump(&mut self.counters.learned.nodes_moved);
                    self.emit(Event::NodeMoved {
                        node,
                        from: Link::Down(e.link),
                        to: here,
                    });
                } else {
                    self.emit(Event::NodeLearned { node, link: here });
                }
            }
            None => {
                *slot = Some(fresh);
                bump(&mut self.counters.learned.nodes);
                self.emit(Event::NodeLearned { node, link: here });
            }
        }
        if let (true, Some(b)) = (rebooted, boot) {
            bump(&mut self.counters.learned.nodes_rebooted);
            self.emit(Event::NodeRebooted {
                node,
                link: here,
                boot_id: b,
            });
            self.forget_plan(node);
        }
    }

    /// Follows an ANNOUNCE; its boot_id once the fixed part is in.
    fn follow_announce(&mut self, cid: ConfigId, frame: &Frame, now_us: u32) -> Option<u32> {
        match self.capture(cid, frame, now_us)? {
            ConfigMessage::Announce(a) => Some(a.boot_id),
            _ => None,
        }
    }

    /// Follows a FRAME_DEFINE; learns its identifier once the header is in.
    fn follow_frame_define(&mut self, cid: ConfigId, frame: &Frame, now_us: u32) {
        let header = match self.capture_header(cid, frame, now_us) {
            Some(h) => h,
            None => return,
        };
        self.learn_std_id(cid.node, header);
    }

    fn capture(&mut self, cid: ConfigId, frame: &Frame, now_us: u32) -> Option<ConfigMessage<'_>> {
        match self
            .captures
            .push(cid, frame.data(), now_us, &mut self.prefix)
        {
            Captured::Done => {}
            Captured::Missed => {
                bump(&mut self.counters.capture_missed);
                return None;
            }
            Captured::Nothing => return None,
        }
        let want = crate::capture::wanted(&cid)?;
        // Only the prefix area is ever written: the rest of the scratch stays zero.
        let area = self.scratch.get_mut(..PREFIX_MAX)?;
        let (head, rest) = area.split_at_mut(want.min(PREFIX_MAX));
        head.copy_from_slice(self.prefix.get(..head.len())?);
        rest.fill(0);
        ConfigMessage::decode(cid.opcode, cid.dir, &self.scratch).ok()
    }

    fn capture_header(&mut self, cid: ConfigId, frame: &Frame, now_us: u32) -> Option<FrameHeader> {
        match self.capture(cid, frame, now_us)? {
            ConfigMessage::FrameDefine(fd) => Some(fd.header),
            _ => None,
        }
    }

    fn learn_std_id(&mut self, node: NodeId, h: FrameHeader) {
        if !is_data_id(h.std_id) {
            return; // the node NAKs it (BAD_STD_ID) and keeps its plan
        }
        let entry = StdEntry {
            std_id: h.std_id,
            node,
            index: h.index,
            dir: h.dir,
        };
        // Index k truncates the node's plan to k frames, then defines frame k. A retry
        // (the same definition again) changes nothing.
        let removed = self
            .std_ids
            .retain(|e| !(e.node == node && e.index >= h.index && *e != entry));
        self.add_forgotten_std_ids(removed);
        let previous = self.std_ids.get(h.std_id).copied();
        if previous == Some(entry) {
            return;
        }
        let nodes = &self.nodes;
        // When full, an identifier of a forgotten node makes room.
        let evictable = |e: &StdEntry| nodes.get(e.node).is_none_or(|n| !n.live);
        match self.std_ids.insert(entry, evictable) {
            Ok(evicted) => {
                bump(&mut self.counters.learned.std_ids);
                let replaced = usize::from(evicted) + usize::from(previous.is_some());
                self.add_forgotten_std_ids(replaced);
            }
            Err(_) => {
                self.counters.dropped.add(DropReason::TableFull);
                self.emit(Event::TableFull {
                    node,
                    std_id: h.std_id,
                });
            }
        }
    }

    fn forget_plan(&mut self, node: NodeId) {
        let removed = self.std_ids.retain(|e| e.node != node);
        self.add_forgotten_std_ids(removed);
    }

    fn add_forgotten_std_ids(&mut self, n: usize) {
        let f = &mut self.counters.learned.std_ids_forgotten;
        *f = f.saturating_add(n as u64);
    }

    fn sweep_slot(&mut self, i: usize, now_us: u32) {
        let Some(Some(e)) = self.nodes.by_index_mut(i) else {
            return;
        };
        if e.live && !is_live(e, now_us) {
            e.live = false;
            let link = Link::Down(e.link);
            bump(&mut self.counters.learned.nodes_forgotten);
            if let Some(node) = NodeId::new(i as u8) {
                self.emit(Event::NodeForgotten { node, link });
            }
        }
    }

    fn emit(&mut self, e: Event) {
        if !self.events.push(e) {
            bump(&mut self.counters.events_lost);
        }
    }
}

/// Whether a node entry routes: not forgotten, and heard within the offline timeout.
fn is_live(e: &NodeEntry, now_us: u32) -> bool {
    e.live && now_us.wrapping_sub(e.last_seen_us) < NODE_OFFLINE_TIMEOUT_US
}
