//! The device host, sans I/O: every configured device presented to the master as an fcan
//! node, run by the firmware's own runtime on the PC side of the link.
//!
//! The master is unchanged: it discovers these nodes, reads their blobs, plans, starts,
//! heartbeats and re-provisions them as it does boards. Their configuration and data
//! frames never reach the real bus; the host routes them:
//!
//! - master → bus ([`DeviceHost::from_master`]): a configuration frame addressed to a
//!   device's node goes to that node only, a broadcast to the nodes *and* the bus, a data
//!   frame one of the nodes takes (its plan says so) to that node only; the rest to the bus;
//! - bus → master ([`DeviceHost::from_bus`]): a frame a device claims goes to its driver
//!   and no further (vendor identifiers can look like fcan ones: docs/drivers.md); an fcan
//!   node's configuration frame carrying a device node's id is also shown to that node, so
//!   the runtime's own id-collision rule applies; everything else goes to the master;
//! - the nodes' own frames go to the master only, the drivers' frames to the bus only.
//!
//! Time is microseconds since the host's start (`u64`); the runtime gets its low 32 bits,
//! as a board's wrapping clock.
//!
//! Bounded: each queue holds at most [`QUEUE_LIMIT`] frames (the oldest are dropped and
//! counted), so no device and no bus traffic can make the host grow.

use std::collections::VecDeque;
use std::sync::Arc;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId};
use fcan_core::msg::DataDirection;
use fcan_fake::{FakeSchema, VecStorage};
use fcan_runtime_nostd::codegen::{Dispatch, ServiceCall, ServiceOutcome};
use fcan_runtime_nostd::{
    Context, Controller, DeferredToken, Event, Node, NodeConfig, Transmit, TxRefused,
};

use crate::device::{Device, Io, NodeEvent, Note, Served, Severity};

/// Most frames waiting in each direction; beyond it the oldest are dropped (and counted).
pub const QUEUE_LIMIT: usize = 1024;

/// Where a frame the master sends goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To the real bus only.
    Bus,
    /// To device nodes only: nothing goes on the bus.
    Devices,
    /// To device nodes and to the bus (a broadcast).
    Both,
}

/// The host's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Frames devices claimed from the bus.
    pub claimed: u64,
    /// Frames drivers queued for the bus.
    pub to_bus: u64,
    /// Frames dropped because a queue was full.
    pub dropped: u64,
    /// Times a device's node booted (the device answered after silence).
    pub boots: u64,
}

/// Why a device cannot be hosted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// Two devices (or a device and the node id space) clash.
    #[error("{0}")]
    Clash(String),
    /// The device needs a link this one is not (CAN FD frames on a Classical link).
    #[error("{device}: {why}")]
    Link {
        /// The device.
        device: String,
        /// What it needs and how to get it.
        why: String,
    },
    /// The device's schema blob does not run (a driver bug).
    #[error("{device}: its schema does not run: {why}")]
    Schema {
        /// The device.
        device: String,
        /// Why.
        why: String,
    },
}

struct Hosted {
    dev: Box<dyn Device>,
    schema: Arc<FakeSchema>,
    node: Option<Node<VecStorage>>,
    /// Per topic of block 0: the generation last handed to the driver.
    seen: Vec<u32>,
    /// Per service: the call waiting for the driver's answer.
    pending: Vec<Option<DeferredToken>>,
    /// Something reached the node since its last poll.
    dirty: bool,
}

/// Every device on one bus. See the [module docs](self).
pub struct DeviceHost {
    hosted: Vec<Hosted>,
    controller: Controller,
    to_bus: VecDeque<Frame>,
    to_master: VecDeque<Frame>,
    notes: VecDeque<Note>,
    stats: HostStats,
    boot_seed: u32,
}

impl std::fmt::Debug for DeviceHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceHost")
            .field(
                "devices",
                &self
                    .hosted
                    .iter()
                    .map(|h| h.dev.describe())
                    .collect::<Vec<_>>(),
            )
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl DeviceHost {
    /// A host for `devices` on a link of `mtu`. Refuses two devices with one node id.
    pub fn new(mtu: Mtu, devices: Vec<Box<dyn Device>>) -> Result<DeviceHost, HostError> {
        let mut hosted: Vec<Hosted> = Vec::with_capacity(devices.len());
        for dev in devices {
            if mtu == Mtu::Classic && dev.link_needed() == Mtu::Fd {
                return Err(HostError::Link {
                    device: dev.describe(),
                    why: "it sends CAN FD frames, but this bus is Classical CAN (8-byte frames \
                          only): open the bus as CAN FD with the device set to CAN FD, or set \
                          the device to Classical CAN (leave `fd` out)"
                        .into(),
                });
            }
            if let Some(other) = hosted.iter().find(|h| h.dev.node_id() == dev.node_id()) {
                return Err(HostError::Clash(format!(
                    "{} and {} both want fcan node id {}: give one another `node=`",
                    other.dev.describe(),
                    dev.describe(),
                    dev.node_id()
                )));
            }
            let schema = FakeSchema::from_blob(dev.blob()).map_err(|e| HostError::Schema {
                device: dev.describe(),
                why: e.to_string(),
            })?;
            let ty = schema
                .schema
                .instances
                .first()
                .and_then(|a| schema.schema.types.iter().find(|t| t.name == a.ty));
            let (topics, services) = ty.map_or((0, 0), |t| (t.topics.len(), t.services.len()));
            hosted.push(Hosted {
                dev,
                schema,
                node: None,
                seen: vec![0; topics],
                pending: vec![None; services],
                dirty: false,
            });
        }
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9E37_79B9, |d| d.subsec_nanos() ^ d.as_secs() as u32);
        Ok(DeviceHost {
            hosted,
            controller: match mtu {
                Mtu::Fd => Controller::Fd,
                Mtu::Classic => Controller::Classic,
            },
            to_bus: VecDeque::new(),
            to_master: VecDeque::new(),
            notes: VecDeque::new(),
            stats: HostStats::default(),
            boot_seed: seed | 1,
        })
    }

    /// The node ids the devices are presented under, with their drivers.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &'static str)> + '_ {
        self.hosted
            .iter()
            .map(|h| (h.dev.node_id(), h.dev.driver()))
    }

    /// Which driver presents node `id` and how it arms the device's command watchdog,
    /// if a device is node `id`: what node info shows.
    pub fn origin(&self, id: NodeId) -> Option<fcan_transport::NodeOrigin> {
        self.hosted
            .iter()
            .find(|h| h.dev.node_id() == id)
            .map(|h| fcan_transport::NodeOrigin {
                driver: h.dev.driver(),
                watchdog: h.dev.watchdog(),
            })
    }

    /// The command watchdog of the device presented as node `id`, as its driver arms
    /// it (`None` when no device is node `id`): what node info shows beside the driver.
    pub fn watchdog(&self, id: NodeId) -> Option<crate::device::Watchdog> {
        self.hosted
            .iter()
            .find(|h| h.dev.node_id() == id)
            .map(|h| h.dev.watchdog())
    }

    /// Frames waiting: (for the bus, for the master). Never above [`QUEUE_LIMIT`] each.
    pub fn queued(&self) -> (usize, usize) {
        (self.to_bus.len(), self.to_master.len())
    }

    /// The host's counters.
    pub fn stats(&self) -> HostStats {
        self.stats
    }

    /// A frame the master sends, at `now`: delivered to device nodes as [`Route`] says;
    /// the caller puts it on the bus when the route includes the bus.
    pub fn from_master(&mut self, now: u64, frame: &Frame) -> Route {
        match frame.id() {
            CanId::Extended(raw) => {
                let Ok(id) = ConfigId::from_raw(raw) else {
                    return Route::Bus;
                };
                if id.dir != Direction::ToNode {
                    return Route::Bus;
                }
                if id.node.is_broadcast() {
                    for h in &mut self.hosted {
                        h.deliver(now, frame);
                    }
                    return if self.hosted.iter().any(|h| h.node.is_some()) {
                        Route::Both
                    } else {
                        Route::Bus
                    };
                }
                match self.hosted.iter_mut().find(|h| h.dev.node_id() == id.node) {
                    Some(h) => {
                        h.deliver(now, frame);
                        Route::Devices
                    }
                    None => Route::Bus,
                }
            }
            CanId::Standard(std_id) => {
                for h in &mut self.hosted {
                    if h.node.as_mut().is_some_and(|n| n.takes_data_id(std_id)) {
                        h.deliver(now, frame);
                        return Route::Devices;
                    }
                }
                Route::Bus
            }
        }
    }

    /// A frame from the bus, at `now`. Returns `true` when it is a device's (answered by
    /// it, or sent to it: it goes no further); `false`: the master takes it.
    pub fn from_bus(&mut self, now: u64, frame: &Frame) -> bool {
        if !self.hosted.iter().any(|h| h.dev.claims(frame))
            && self.hosted.iter().any(|h| h.dev.owns(frame))
        {
            // Sent to a device by someone else on the bus: the device's traffic, not the
            // master's.
            self.stats.claimed += 1;
            return true;
        }
        let Some(i) = self.hosted.iter().position(|h| h.dev.claims(frame)) else {
            // An fcan node speaking with a device node's id: let that node see it, so
            // the runtime's collision rule decides (the later one goes to FAULT).
            if let CanId::Extended(raw) = frame.id() {
                if let Ok(id) = ConfigId::from_raw(raw) {
                    if id.dir == Direction::ToMaster {
                        if let Some(h) = self.hosted.iter_mut().find(|h| h.dev.node_id() == id.node)
                        {
                            h.deliver(now, frame);
                        }
                    }
                }
            }
            return false;
        };
        self.stats.claimed += 1;
        let mut io = Io::default();
        self.hosted[i].dev.on_frame(now, frame, &mut io);
        self.settle(i, now, io);
        true
    }

    /// Sends to the bus failed for want of room or while bus-off (a wedged bus): every
    /// device is told, so none takes the silence for its own absence.
    pub fn bus_wedged(&mut self, now: u64) {
        for h in &mut self.hosted {
            h.dev.on_bus_wedged(now);
        }
    }

    /// When [`poll`](Self::poll) next has work (`now` when something is waiting).
    pub fn poll_at(&self, now: u64) -> Option<u64> {
        let mut at: Option<u64> = None;
        let mut earliest = |t: u64| at = Some(at.map_or(t, |a| a.min(t)));
        for h in &self.hosted {
            // Dirty, or a node to boot or silence.
            if h.dirty || h.dev.present() != h.node.is_some() {
                earliest(now);
            }
            if let Some(t) = h.dev.poll_at() {
                earliest(t);
            }
            if let Some(n) = &h.node {
                if let Some(t) = n.poll_at(now as u32) {
                    // The runtime's instant on its wrapping clock, as a span from now.
                    let ahead = t.wrapping_sub(now as u32);
                    earliest(if ahead > u32::MAX / 2 {
                        now
                    } else {
                        now + u64::from(ahead)
                    });
                }
            }
        }
        at
    }

    /// Runs everything due at `now`: the drivers' work, then the nodes (handlers, timers,
    /// due frames), then the commands that arrived handed to the drivers.
    pub fn poll(&mut self, now: u64) {
        for i in 0..self.hosted.len() {
            let mut io = Io::default();
            if self.hosted[i].dev.poll_at().is_some_and(|t| t <= now) {
                self.hosted[i].dev.poll(now, &mut io);
            }
            self.settle(i, now, io);
            self.run_node(i, now);
        }
    }

    /// The next frame for the real bus, if any (the caller sends it, then calls
    /// [`sent_to_bus`](Self::sent_to_bus); on failure it leaves it queued).
    pub fn peek_to_bus(&self) -> Option<&Frame> {
        self.to_bus.front()
    }

    /// The frame [`peek_to_bus`](Self::peek_to_bus) gave was sent.
    pub fn sent_to_bus(&mut self) {
        self.to_bus.pop_front();
    }

    /// The next frame for the master, if any.
    pub fn pop_to_master(&mut self) -> Option<Frame> {
        self.to_master.pop_front()
    }

    /// What happened since the last call, in words with a severity (devices that came
    /// and went, faults).
    pub fn take_notes(&mut self) -> Vec<Note> {
        self.notes.drain(..).collect()
    }

    /// Queues a note for the log; past [`QUEUE_LIMIT`] the oldest goes (a device that
    /// comes and goes while nobody drains the notes must not grow them).
    fn say(&mut self, note: Note) {
        if self.notes.len() >= QUEUE_LIMIT {
            self.notes.pop_front();
        }
        self.notes.push_back(note);
    }

    /// Applies what a driver handed back, and boots or silences its node as the device
    /// comes and goes.
    fn settle(&mut self, i: usize, now: u64, io: Io) {
        let Io {
            to_bus,
            publish,
            complete,
            notes,
        } = io;
        for f in to_bus {
            self.stats.to_bus += 1;
            push_bounded(&mut self.to_bus, f, &mut self.stats.dropped);
        }
        for n in notes {
            self.say(n);
        }
        let present = self.hosted[i].dev.present();
        if present && self.hosted[i].node.is_none() {
            self.boot(i, now);
        } else if !present && self.hosted[i].node.is_some() {
            let h = &mut self.hosted[i];
            h.node = None;
            h.pending.iter_mut().for_each(|p| *p = None);
            let text = format!(
                "{} stopped answering: node {} is silent until it does",
                h.dev.describe(),
                h.dev.node_id()
            );
            self.say(Note::new(Severity::Warn, text));
        }
        let h = &mut self.hosted[i];
        let Some(node) = h.node.as_mut() else {
            return;
        };
        for (topic, bytes) in publish {
            // Before START the runtime keeps the value for the first frame.
            let _ = node.publish(0, topic, &bytes);
            h.dirty = true;
        }
        for (service, response) in complete {
            if let Some(token) = h.pending.get_mut(service as usize).and_then(Option::take) {
                let _ = node.complete(token, &response);
                h.dirty = true;
            }
        }
    }

    /// Starts the device's node with a fresh boot id: it announces, and the master
    /// provisions it as any node that booted.
    fn boot(&mut self, i: usize, now: u64) {
        self.boot_seed ^= self.boot_seed << 13;
        self.boot_seed ^= self.boot_seed >> 17;
        self.boot_seed ^= self.boot_seed << 5;
        let boot_id = self.boot_seed;
        let controller = self.controller;
        let h = &mut self.hosted[i];
        let desc = h.schema.desc;
        let counts: Vec<u8> = desc.arrays.iter().map(|a| a.max_count).collect();
        match Node::new(
            desc,
            VecStorage::new(desc, &h.schema.arena),
            NodeConfig {
                node_id: h.dev.node_id(),
                boot_id,
                counts: &counts,
                controller,
            },
        ) {
            Ok(node) => {
                h.seen = (0..h.seen.len())
                    .map(|t| node.topic(0, t as u8).map_or(0, |r| r.generation))
                    .collect();
                h.node = Some(node);
                h.dirty = true;
                self.stats.boots += 1;
                let text = format!(
                    "{} answers: presented as fcan node {} (watchdog: {})",
                    h.dev.describe(),
                    h.dev.node_id(),
                    h.dev.watchdog()
                );
                self.say(Note::new(Severity::Info, text));
            }
            Err(e) => {
                let text = format!("{}: its node does not start: {e:?}", h.dev.describe());
                self.say(Note::new(Severity::Error, text));
            }
        }
        let _ = now;
    }

    /// Polls device `i`'s node and hands the driver what the node's side did.
    fn run_node(&mut self, i: usize, now: u64) {
        let h = &mut self.hosted[i];
        let Some(node) = h.node.as_mut() else {
            return;
        };
        h.dirty = false;
        let mut io = Io::default();
        let mut tx = ToMaster {
            queue: &mut self.to_master,
            dropped: &mut self.stats.dropped,
        };
        let mut bridge = Bridge {
            dev: h.dev.as_mut(),
            io: &mut io,
            now,
            pending: &mut h.pending,
            changed: 0,
        };
        node.poll(now as u32, &mut tx, &mut bridge);
        let changed = bridge.changed;
        if changed != 0 {
            let node_ref = &*node;
            let value = |p: u8| node_ref.param(0, p).map(<[u8]>::to_vec);
            h.dev.on_params(now, changed, &value, &mut io);
        }
        // Commands that arrived since the last look, in topic order.
        let desc = h.schema.desc;
        if let Some(td) = desc
            .blocks
            .first()
            .and_then(|b| desc.types.get(b.type_index as usize))
        {
            for (t, tp) in td.topics.iter().enumerate() {
                if tp.dir != DataDirection::M2s {
                    continue;
                }
                let Some(read) = node.topic(0, t as u8) else {
                    continue;
                };
                let Some(seen) = h.seen.get_mut(t) else {
                    continue;
                };
                if read.generation != *seen {
                    *seen = read.generation;
                    let bytes = read.bytes.to_vec();
                    h.dev.on_command(now, t as u8, &bytes, &mut io);
                }
            }
        }
        self.settle(i, now, io);
    }
}

impl Hosted {
    fn deliver(&mut self, now: u64, frame: &Frame) {
        if let Some(n) = self.node.as_mut() {
            n.receive(frame, now as u32);
            self.dirty = true;
        }
    }
}

fn push_bounded(q: &mut VecDeque<Frame>, f: Frame, dropped: &mut u64) {
    if q.len() >= QUEUE_LIMIT {
        q.pop_front();
        *dropped += 1;
    }
    q.push_back(f);
}

/// The nodes' transmit side: into the master's queue.
struct ToMaster<'a> {
    queue: &'a mut VecDeque<Frame>,
    dropped: &'a mut u64,
}

impl Transmit for ToMaster<'_> {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        push_bounded(self.queue, *frame, self.dropped);
        Ok(())
    }
}

/// The node's application side: the driver.
struct Bridge<'a> {
    dev: &'a mut dyn Device,
    io: &'a mut Io,
    now: u64,
    pending: &'a mut Vec<Option<DeferredToken>>,
    changed: u32,
}

impl Dispatch for Bridge<'_> {
    fn service(
        &mut self,
        _cx: &mut Context<'_>,
        call: ServiceCall<'_>,
        response: &mut [u8],
    ) -> ServiceOutcome {
        let Some(slot) = self.pending.get_mut(call.service as usize) else {
            return ServiceOutcome::BadRequest;
        };
        if slot.is_some() {
            return ServiceOutcome::Busy;
        }
        match self
            .dev
            .on_service(self.now, call.service, call.request, self.io)
        {
            Served::Done(bytes) => match response.get_mut(..bytes.len()) {
                Some(out) => {
                    out.copy_from_slice(&bytes);
                    ServiceOutcome::Done(bytes.len())
                }
                None => ServiceOutcome::Failed,
            },
            Served::Pending => {
                *slot = Some(call.token);
                ServiceOutcome::Accepted
            }
            Served::Busy => ServiceOutcome::Busy,
        }
    }

    fn params_changed(&mut self, _cx: &mut Context<'_>, block: u8, changed: u32) {
        if block == 0 {
            self.changed |= changed;
        }
    }

    fn event(&mut self, event: Event) {
        let e = match event {
            Event::Started => NodeEvent::Started,
            Event::MasterLost => NodeEvent::MasterLost,
            _ => return,
        };
        self.dev.on_node(self.now, e, self.io);
    }
}
