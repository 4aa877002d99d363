//! The simulated bus as a pure state machine over explicit time.
//!
//! [`BusModel`] knows nothing of clocks or tasks: every call says what time it is (in
//! nanoseconds since the bus started), in the style of smoltcp's `poll(timestamp, …)`. It
//! is what [`SimBus`](super::SimBus) drives from tokio's clock, and what unit tests drive
//! by hand.
//!
//! # Model
//!
//! * Each endpoint queues frames (up to its transmit-queue length). The bus is a single
//!   wire: when it is idle and frames are pending, the one with the lowest
//!   [`CanId::arbitration_key`] wins; equal identifiers go in the order they were queued.
//!   Every pending frame of every endpoint competes, as if each node's controller had
//!   enough transmit buffers sorted by priority.
//! * The winner occupies the wire for its exact bit time ([`frame_bits`]) and is delivered
//!   to every *other* attached endpoint at the end of its last bit (SocketCAN without
//!   `recv_own_msgs`). Transmission is not interruptible; a frame queued while another is
//!   on the wire waits for the end of intermission.
//! * A CAN FD frame on a bus where some attached endpoint is Classical-CAN-only is
//!   destroyed by that node's error frame: every endpoint, sender included, receives a
//!   [`BusErrorKind::Form`] error, nobody receives the frame, and the sender does not retry
//!   (one-shot; a real controller would retransmit until error-passive / bus-off). The wire
//!   is busy for [`fd_rejected_bits`].
//! * "Simultaneous" frames are those pending when the bus goes idle. A frame queued at
//!   exactly the instant the bus goes idle still joins that arbitration if it is queued
//!   before anyone observes the bus at that instant.
//!
//! [`CanId::arbitration_key`]: fcan_core::frame::CanId::arbitration_key

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Duration;

use fcan_core::frame::{Frame, Mtu};

use super::bittime::{fd_rejected_bits, frame_bits, BitRates, FrameBits};
use crate::{BusErrorKind, TransportError};

/// Identifies an endpoint attached to one bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(pub usize);

/// What a bus delivers to one endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RxItem {
    /// A frame, delivered at the end of its last bit (ns since the bus started).
    Frame {
        /// The frame.
        frame: Frame,
        /// Delivery time, ns.
        at: u64,
    },
    /// An error frame on the bus.
    Error {
        /// What the error was.
        kind: BusErrorKind,
        /// When it ended, ns.
        at: u64,
    },
}

impl RxItem {
    /// The delivery time in ns since the bus started.
    pub fn at(&self) -> u64 {
        match self {
            RxItem::Frame { at, .. } | RxItem::Error { at, .. } => *at,
        }
    }
}

/// What became of one transmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Received by this many endpoints.
    Delivered {
        /// Number of receiving endpoints.
        receivers: usize,
    },
    /// Destroyed by a Classical-CAN-only endpoint's error frame (it was CAN FD).
    FdRejected,
}

/// One transmission on the wire, for measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxRecord {
    /// Who sent it.
    pub sender: EndpointId,
    /// The frame.
    pub frame: Frame,
    /// When the sender queued it.
    pub queued: Duration,
    /// When its SOF went on the wire (after winning arbitration).
    pub start: Duration,
    /// When the wire became free again (end of intermission or of the error frame).
    pub end: Duration,
    /// The bits it occupied the wire with.
    pub bits: FrameBits,
    /// Delivered or destroyed.
    pub outcome: Outcome,
}

impl TxRecord {
    /// Time spent waiting for the bus (queueing and lost arbitrations).
    pub fn queueing_latency(&self) -> Duration {
        self.start - self.queued
    }
    /// Time from queueing to delivery.
    pub fn total_latency(&self) -> Duration {
        self.end - self.queued
    }
}

/// Running totals since the bus started (kept even when the history is trimmed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BusTotals {
    /// Frames delivered.
    pub frames: u64,
    /// Frames destroyed by error frames.
    pub errors: u64,
    /// Bits put on the wire (including error frames).
    pub bits: u64,
    /// Total time the wire was busy.
    pub busy: Duration,
}

#[derive(Debug)]
struct Endpoint {
    name: String,
    mtu: Mtu,
    tx_queue_len: usize,
    queued: usize,
    attached: bool,
    rx: VecDeque<RxItem>,
}

#[derive(Debug)]
struct Pending {
    seq: u64,
    key: u64,
    sender: EndpointId,
    frame: Frame,
    queued: u64,
}

/// The bus state machine. See the [module docs](self).
#[derive(Debug)]
pub struct BusModel {
    rates: BitRates,
    free_at: u64,
    seq: u64,
    pending: Vec<Pending>,
    endpoints: Vec<Endpoint>,
    history: VecDeque<TxRecord>,
    history_limit: usize,
    totals: BusTotals,
}

/// Default number of [`TxRecord`]s a bus keeps.
pub const DEFAULT_HISTORY: usize = 65_536;

impl BusModel {
    /// An idle bus with the given bit rates and no endpoints.
    pub fn new(rates: BitRates) -> Self {
        BusModel {
            rates,
            free_at: 0,
            seq: 0,
            pending: Vec::new(),
            endpoints: Vec::new(),
            history: VecDeque::new(),
            history_limit: DEFAULT_HISTORY,
            totals: BusTotals::default(),
        }
    }

    /// Keeps at most `limit` transmission records (oldest dropped first); totals are kept
    /// regardless.
    pub fn set_history_limit(&mut self, limit: usize) {
        self.history_limit = limit;
        while self.history.len() > limit {
            self.history.pop_front();
        }
    }

    /// The bit rates.
    pub fn rates(&self) -> BitRates {
        self.rates
    }

    /// Attaches an endpoint.
    pub fn attach(&mut self, name: &str, mtu: Mtu, tx_queue_len: usize) -> EndpointId {
        self.endpoints.push(Endpoint {
            name: name.to_string(),
            mtu,
            tx_queue_len,
            queued: 0,
            attached: true,
            rx: VecDeque::new(),
        });
        EndpointId(self.endpoints.len() - 1)
    }

    /// Detaches an endpoint: its queued frames are withdrawn and it receives nothing more.
    pub fn detach(&mut self, id: EndpointId) {
        if let Some(ep) = self.endpoints.get_mut(id.0) {
            ep.attached = false;
            ep.rx.clear();
            ep.queued = 0;
        }
        self.pending.retain(|p| p.sender != id);
    }

    /// Renames an endpoint (the name appears in its error messages).
    pub fn set_name(&mut self, id: EndpointId, name: &str) {
        if let Some(ep) = self.endpoints.get_mut(id.0) {
            ep.name = name.to_string();
        }
    }

    /// The name an endpoint was attached with.
    pub fn name(&self, id: EndpointId) -> &str {
        &self.endpoints[id.0].name
    }

    /// Queues `frame` from `sender` at time `now` (ns).
    pub fn enqueue(
        &mut self,
        now: u64,
        sender: EndpointId,
        frame: Frame,
    ) -> Result<(), TransportError> {
        self.advance(now, false);
        let ep = self
            .endpoints
            .get_mut(sender.0)
            .filter(|e| e.attached)
            .ok_or(TransportError::Closed)?;
        crate::check_id(&frame)?;
        crate::check_mtu(&ep.name, ep.mtu, &frame)?;
        if ep.queued >= ep.tx_queue_len {
            return Err(TransportError::TxQueueFull);
        }
        ep.queued += 1;
        self.seq += 1;
        self.pending.push(Pending {
            seq: self.seq,
            key: frame.id().arbitration_key(),
            sender,
            frame,
            queued: now,
        });
        Ok(())
    }

    /// When the next transmission starts, if any frame is pending.
    fn next_start(&self) -> Option<u64> {
        let earliest = self.pending.iter().map(|p| p.queued).min()?;
        Some(earliest.max(self.free_at))
    }

    /// Runs the bus up to `now`: every transmission that starts before `now` (or at `now`
    /// when `inclusive`) is arbitrated and its outcome delivered (with its end time, which
    /// may lie after `now`).
    pub fn advance(&mut self, now: u64, inclusive: bool) {
        while let Some(start) = self.next_start() {
            if start > now || (start == now && !inclusive) {
                break;
            }
            let winner = self
                .pending
                .iter()
                .enumerate()
                .filter(|(_, p)| p.queued <= start)
                .min_by_key(|(_, p)| (p.key, p.seq))
                .map(|(i, _)| i)
                .expect("a frame queued by `start`");
            let p = self.pending.swap_remove(winner);
            self.transmit(start, p);
        }
    }

    fn transmit(&mut self, start: u64, p: Pending) {
        if let Some(ep) = self.endpoints.get_mut(p.sender.0) {
            ep.queued = ep.queued.saturating_sub(1);
        }
        let rejected = p.frame.is_fd()
            && self
                .endpoints
                .iter()
                .any(|e| e.attached && e.mtu == Mtu::Classic);
        let bits = if rejected {
            fd_rejected_bits(&p.frame)
        } else {
            frame_bits(&p.frame)
        };
        let dur = self.rates.duration(bits).as_nanos() as u64;
        let end = start + dur;
        let outcome = if rejected {
            for ep in self.endpoints.iter_mut().filter(|e| e.attached) {
                ep.rx.push_back(RxItem::Error {
                    kind: BusErrorKind::Form,
                    at: end,
                });
            }
            self.totals.errors += 1;
            Outcome::FdRejected
        } else {
            let mut receivers = 0;
            for (i, ep) in self.endpoints.iter_mut().enumerate() {
                if ep.attached && i != p.sender.0 {
                    ep.rx.push_back(RxItem::Frame {
                        frame: p.frame,
                        at: end,
                    });
                    receivers += 1;
                }
            }
            self.totals.frames += 1;
            Outcome::Delivered { receivers }
        };
        self.totals.bits += bits.total() as u64;
        self.totals.busy += Duration::from_nanos(dur);
        self.free_at = end;
        if self.history_limit > 0 {
            if self.history.len() >= self.history_limit {
                self.history.pop_front();
            }
            self.history.push_back(TxRecord {
                sender: p.sender,
                frame: p.frame,
                queued: Duration::from_nanos(p.queued),
                start: Duration::from_nanos(start),
                end: Duration::from_nanos(end),
                bits,
                outcome,
            });
        }
    }

    /// Runs the bus up to `now` (inclusive) and takes the endpoint's next item if it has
    /// been delivered by `now`.
    pub fn poll_rx(&mut self, id: EndpointId, now: u64) -> Option<RxItem> {
        self.advance(now, true);
        let ep = self.endpoints.get_mut(id.0)?;
        if ep.rx.front().is_some_and(|i| i.at() <= now) {
            ep.rx.pop_front()
        } else {
            None
        }
    }

    /// The earliest time something may become available to `id`: its next delivery, or the
    /// next transmission start (whose outcome is decided then). `None`: nothing scheduled.
    pub fn next_event(&self, id: EndpointId) -> Option<u64> {
        let head = self.endpoints.get(id.0)?.rx.front().map(|i| i.at());
        match (head, self.next_start()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the bus has nothing queued.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// When the last transmission so far ends.
    pub fn busy_until(&self) -> u64 {
        self.free_at
    }

    /// Transmission records, oldest first.
    pub fn history(&self) -> impl Iterator<Item = &TxRecord> {
        self.history.iter()
    }

    /// Running totals.
    pub fn totals(&self) -> BusTotals {
        self.totals
    }

    /// Fraction of `window` during which the wire was busy (0.0 ..= 1.0), from the kept
    /// history. Transmissions straddling the window's edges count for their overlap.
    pub fn load(&self, window: Range<Duration>) -> f64 {
        if window.end <= window.start {
            return 0.0;
        }
        let busy: Duration = self
            .history
            .iter()
            .map(|r| {
                let s = r.start.max(window.start);
                let e = r.end.min(window.end);
                e.saturating_sub(s)
            })
            .sum();
        busy.as_secs_f64() / (window.end - window.start).as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::frame::CanId;

    fn classic(id: CanId) -> Frame {
        Frame::classic(id, &[0x55; 8]).unwrap()
    }

    #[test]
    fn lone_frame_delivered_to_others_at_end() {
        let mut m = BusModel::new(BitRates::default());
        let a = m.attach("a", Mtu::Fd, 8);
        let b = m.attach("b", Mtu::Fd, 8);
        let c = m.attach("c", Mtu::Fd, 8);
        let f = classic(CanId::Standard(0x100));
        m.enqueue(1_000, a, f).unwrap();
        let end = 1_000 + BitRates::default().frame_time(&f).as_nanos() as u64;
        assert_eq!(m.poll_rx(b, end - 1), None);
        assert_eq!(m.poll_rx(b, end), Some(RxItem::Frame { frame: f, at: end }));
        assert_eq!(m.poll_rx(c, end), Some(RxItem::Frame { frame: f, at: end }));
        assert_eq!(m.poll_rx(a, end + 10_000), None, "no echo to the sender");
        let rec = m.history().next().unwrap();
        assert_eq!(rec.outcome, Outcome::Delivered { receivers: 2 });
        assert_eq!(rec.queueing_latency(), Duration::ZERO);
    }

    #[test]
    fn frame_queued_as_the_bus_goes_idle_joins_that_arbitration() {
        let mut m = BusModel::new(BitRates::default());
        let a = m.attach("a", Mtu::Fd, 8);
        let b = m.attach("b", Mtu::Fd, 8);
        let r = m.attach("r", Mtu::Fd, 8);
        let low = classic(CanId::Standard(0x700));
        let high = classic(CanId::Standard(0x001));
        m.enqueue(0, a, classic(CanId::Standard(0x400))).unwrap();
        m.enqueue(0, a, low).unwrap();
        m.advance(0, true); // 0x400 goes on the wire at 0
        let idle = m.busy_until();
        // 0x001 is queued exactly when 0x400 ends: it beats 0x700, queued long before.
        m.enqueue(idle, b, high).unwrap();
        let far = 1_000_000;
        let ids: Vec<u32> = core::iter::from_fn(|| m.poll_rx(r, far))
            .map(|i| match i {
                RxItem::Frame { frame, .. } => frame.id().raw(),
                RxItem::Error { .. } => panic!(),
            })
            .collect();
        assert_eq!(ids, vec![0x400, 0x001, 0x700]);
        let h: Vec<_> = m.history().collect();
        assert_eq!(h[1].start.as_nanos() as u64, idle);
        assert_eq!(h[1].queueing_latency(), Duration::ZERO);
        assert_eq!(h[2].queueing_latency(), h[2].start);
    }

    #[test]
    fn tx_queue_limit() {
        let mut m = BusModel::new(BitRates::default());
        let a = m.attach("a", Mtu::Fd, 2);
        let f = classic(CanId::Standard(1));
        m.enqueue(0, a, f).unwrap();
        m.enqueue(0, a, f).unwrap();
        assert!(matches!(
            m.enqueue(0, a, f),
            Err(TransportError::TxQueueFull)
        ));
        m.advance(1, true); // first frame goes on the wire: space for one more
        m.enqueue(1, a, f).unwrap();
    }

    #[test]
    fn detach_withdraws_frames() {
        let mut m = BusModel::new(BitRates::default());
        let a = m.attach("a", Mtu::Fd, 8);
        let b = m.attach("b", Mtu::Fd, 8);
        m.enqueue(0, a, classic(CanId::Standard(1))).unwrap();
        m.detach(a);
        assert!(m.is_idle());
        assert_eq!(m.poll_rx(b, 1_000_000), None);
        assert!(matches!(
            m.enqueue(0, a, classic(CanId::Standard(1))),
            Err(TransportError::Closed)
        ));
    }
}
