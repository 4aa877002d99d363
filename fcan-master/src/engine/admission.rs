//! Admission by bus time: data frames reach the link at the pace of the bus, behind the
//! configuration plane, and a publish is refused once the data already waiting would
//! take longer than a bound to send.
//!
//! Why. A link queues what it is given in its own order: a SocketCAN qdisc is FIFO, a
//! controller's transmit FIFO too, and the simulated bus arbitrates the master's own
//! frames by identifier, so standard-id data always beats the extended-id heartbeat. A
//! burst of 2,000 commands handed over at once put 0.3–0.5 s of data in front of the
//! master's heartbeat, every node's 300 ms master-lost watchdog fired and the whole bus
//! stopped. So the engine keeps two transmit queues:
//!
//! - the **configuration plane** (heartbeats, provisioning, requests, updates) goes to
//!   the link as soon as it is queued: it is small and its timing is what keeps nodes
//!   alive;
//! - **data frames** wait here and are handed over in bursts of at most
//!   [`EngineConfig::data_lead_us`] of bus time, and only while the bus load stays
//!   within [`EngineConfig::bus_load_limit_percent`] — every frame counted, the master's
//!   own and every frame it hears from the nodes. Whatever the link does, a
//!   configuration frame never waits behind more than the lead, and the nodes keep the
//!   bus time they use. That matters as much as the heartbeat: a node whose transmit
//!   queue cannot drain (the master's lower data identifiers win every arbitration)
//!   stops taking requests from its receive queue, and with them the master's
//!   heartbeats. Measured on the example bus: the nodes alone load a Classical bus to
//!   63 %; a flood of commands at even 80 % of the bus suspended them all with the
//!   heartbeat on time.
//!
//! Other senders can fill the bus on their own (a foreign device, a saturated link): the
//! load limit alone would then hold the master's commands back for ever. So data always
//! gets at least [`DATA_FLOOR_PERCENT`] of the bus: a second clock counts only the
//! master's data, and a frame goes when either clock allows it (on the wire it still
//! wins arbitration by its identifier, as any CAN frame).
//!
//! What waits is bounded in bus time, not in messages: while more than
//! [`EngineConfig::data_backlog_us`] of data waits, a publish is refused with
//! [`CallError::Busy`] (nothing is staged, so nothing is dropped silently), and the
//! client that outran the bus learns it at once. Frames of a node that left RUNNING
//! while they waited are withdrawn, never sent to whoever holds the identifier next.
//!
//! The pace is an estimate from the bit rates ([`BitRates::frame_time`]): other
//! senders' frames also take the bus, so the link may still hold some of the lead when
//! the next data goes out; the lead bounds how much.
//!
//! [`EngineConfig::data_lead_us`]: super::EngineConfig::data_lead_us
//! [`EngineConfig::bus_load_limit_percent`]: super::EngineConfig::bus_load_limit_percent
//! [`EngineConfig::data_backlog_us`]: super::EngineConfig::data_backlog_us
//! [`CallError::Busy`]: super::CallError::Busy
//! [`BitRates::frame_time`]: crate::transport::sim::BitRates::frame_time

use std::collections::VecDeque;

use fcan_core::frame::Frame;

/// The share of the bus (percent) the master's data frames get whatever the others send.
pub const DATA_FLOOR_PERCENT: u64 = 10;

/// A data frame waiting for the bus, with what is needed to withdraw it.
#[derive(Clone, Debug)]
pub(super) struct Queued {
    pub frame: Frame,
    /// The node it is for and the run of that node it was built for (see
    /// `NodeRecord::run`): sent only while the node is still in that run.
    pub node: u8,
    pub run: u64,
    /// Its time on the wire (ns).
    pub cost_ns: u64,
}

/// The data queue and the estimates of the bus time used.
#[derive(Debug, Default)]
pub(super) struct Pacer {
    queue: VecDeque<Queued>,
    /// Bus time of the frames in `queue` (ns).
    waiting_ns: u64,
    /// A virtual clock of the bus time used (ns, engine clock): every frame on the bus
    /// (handed over by the master or heard from a node) moves it by its time on the
    /// wire divided by the load limit, so data is handed over only while the bus load
    /// stays within the limit (a token bucket whose depth is the lead).
    budget_ns: u64,
    /// When the link will have sent everything the master handed it, if nothing else
    /// took the bus (ns).
    sent_by_ns: u64,
    /// A virtual clock of the master's own data only (ns): each data frame moves it by
    /// its time on the wire over [`DATA_FLOOR_PERCENT`], so data gets at least that
    /// share of the bus when others fill it.
    floor_ns: u64,
    /// No data is handed over before this (ns): a configuration frame is in the link.
    /// The configuration plane rides extended identifiers, which lose every
    /// arbitration to data: data handed over behind it, however little at a time,
    /// would keep a frame pending at every arbitration and the heartbeat waiting.
    hold_until_ns: u64,
}

impl Pacer {
    /// Queues a data frame.
    pub fn push(&mut self, q: Queued) {
        self.waiting_ns += q.cost_ns;
        self.queue.push_back(q);
    }

    /// Bus time of the data frames waiting (µs, rounded up).
    pub fn waiting_us(&self) -> u64 {
        self.waiting_ns.div_ceil(1000)
    }

    /// The master handed a frame of `cost_ns` to the link at `now_ns` (a configuration
    /// frame when `config`), with the bus load limited to `limit_percent` (1..=100).
    pub fn sent(&mut self, now_ns: u64, cost_ns: u64, limit_percent: u8, config: bool) {
        self.heard(now_ns, cost_ns, limit_percent);
        self.sent_by_ns = self.sent_by_ns.max(now_ns) + cost_ns;
        if config {
            self.hold_until_ns = self.sent_by_ns;
        } else {
            self.floor_ns = self.floor_ns.max(now_ns) + cost_ns * 100 / DATA_FLOOR_PERCENT;
        }
    }

    /// Another sender's frame of `cost_ns` took the bus at `at_ns`.
    pub fn heard(&mut self, at_ns: u64, cost_ns: u64, limit_percent: u8) {
        let limit = u64::from(limit_percent.clamp(1, 100));
        self.budget_ns = self.budget_ns.max(at_ns) + cost_ns * 100 / limit;
    }

    /// The next data frame, if one may be handed over at `now_ns`: no configuration
    /// frame is in the link, and the bus time used (or the master's data within its
    /// floor) is at most `lead_ns` ahead of now.
    pub fn pop_ready(&mut self, now_ns: u64, lead_ns: u64) -> Option<Queued> {
        if self.queue.is_empty()
            || now_ns < self.hold_until_ns
            || self.budget_ns.min(self.floor_ns) > now_ns + lead_ns
        {
            return None;
        }
        let q = self.queue.pop_front()?;
        self.waiting_ns -= q.cost_ns;
        Some(q)
    }

    /// When the next data frame may be handed over (µs), if one waits.
    pub fn next_release_us(&self, lead_ns: u64) -> Option<u64> {
        (!self.queue.is_empty()).then(|| {
            self.budget_ns
                .min(self.floor_ns)
                .saturating_sub(lead_ns)
                .max(self.hold_until_ns)
                .div_ceil(1000)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::frame::{CanId, Mtu};

    fn q(cost_ns: u64) -> Queued {
        Queued {
            frame: Frame::padded(Mtu::Classic, CanId::Standard(0x100), &[0; 8]).unwrap(),
            node: 1,
            run: 1,
            cost_ns,
        }
    }

    #[test]
    fn data_is_handed_over_only_within_the_lead() {
        let mut p = Pacer::default();
        for _ in 0..10 {
            p.push(q(1_000_000));
        }
        assert_eq!(p.waiting_us(), 10_000);
        let mut handed = 0;
        while let Some(f) = p.pop_ready(0, 3_000_000) {
            p.sent(0, f.cost_ns, 100, false);
            handed += 1;
        }
        // 0, 1 and 2 ms of lead taken, then a fourth: the link idles at 4 ms > 3 ms.
        assert_eq!(handed, 4);
        assert_eq!(p.next_release_us(3_000_000), Some(1_000));
        assert!(p.pop_ready(999_000, 3_000_000).is_none());
        assert!(p.pop_ready(1_000_000, 3_000_000).is_some());
    }

    #[test]
    fn data_waits_until_a_configuration_frame_is_out() {
        let mut p = Pacer::default();
        p.push(q(100));
        p.sent(0, 500_000, 100, true);
        // Well within the lead, but the heartbeat would lose arbitration to it.
        assert!(p.pop_ready(0, 4_000_000).is_none());
        assert_eq!(p.next_release_us(4_000_000), Some(500));
        assert!(p.pop_ready(500_000, 4_000_000).is_some());
        assert_eq!(p.next_release_us(4_000_000), None);
    }

    #[test]
    fn frames_heard_use_the_budget_too() {
        let mut p = Pacer::default();
        p.push(q(100));
        // The master's data used its floor (1 ms at 10 %: until 10 ms) and the others
        // 5 ms of the bus: the load limit holds the next frame until 2 ms.
        p.sent(0, 1_000_000, 100, false);
        p.heard(0, 5_000_000, 100);
        assert!(p.pop_ready(0, 4_000_000).is_none());
        assert_eq!(p.next_release_us(4_000_000), Some(2_000));
        assert!(p.pop_ready(2_000_000, 4_000_000).is_some());
    }

    #[test]
    fn data_keeps_its_floor_when_others_fill_the_bus() {
        let mut p = Pacer::default();
        for _ in 0..1000 {
            p.push(q(100_000));
        }
        // Another sender fills the whole bus; the master still sends 10 % of it.
        let mut sent_ns = 0;
        for ms in 0..=100u64 {
            p.heard(ms * 1_000_000, 1_000_000, 90);
            while let Some(f) = p.pop_ready(ms * 1_000_000, 2_000_000) {
                p.sent(ms * 1_000_000, f.cost_ns, 90, false);
                sent_ns += f.cost_ns;
            }
        }
        let expected = 10_000_000 + 2_000_000 * DATA_FLOOR_PERCENT / 100;
        assert!(
            sent_ns.abs_diff(expected) <= 200_000,
            "{sent_ns} vs {expected}"
        );
    }

    #[test]
    fn an_idle_link_starts_from_now() {
        let mut p = Pacer::default();
        p.sent(0, 1_000, 100, true);
        p.sent(10_000_000, 1_000, 100, false);
        p.push(q(1));
        // The link went idle long ago: the lead counts from now, not from the past.
        assert!(p.pop_ready(10_000_000, 1_000).is_some());
    }
}
