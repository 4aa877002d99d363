//! Fault injection, as a wrapper around any [`Transport`] (smoltcp's
//! `phy::FaultInjector` style).
//!
//! A [`FaultInjector`] sits in front of one node, like a noisy stretch of cable: it
//! applies faults to the frames that node **receives**, each decided by a seeded RNG, so a
//! run is reproducible. To disturb a frame for every node, wrap every receiver. Each frame
//! from the inner transport goes through these draws, in this order:
//!
//! 1. **drop** (`drop`): the frame silently never arrives.
//! 2. **corrupt** (`corrupt`): one payload bit flips. On a real bus the CRC catches that:
//!    the frame is destroyed and every node sees an error frame. So by default
//!    ([`CorruptMode::Detected`]) the frame is replaced by a
//!    [`TransportError::BusError`]`(`[`BusErrorKind::Crc`]`)` (the sender's automatic
//!    retransmission is not modelled: the frame is lost). [`CorruptMode::Undetected`]
//!    instead delivers the frame with the flipped bit, as if the CRC had missed it: a
//!    fuzz-like test of the layers above. Frames without payload pass unchanged in that
//!    mode.
//! 3. **duplicate** (`duplicate`): the frame arrives twice.
//! 4. **delay** (`delay`): the frame arrives `delay_by` later (on tokio's clock); frames
//!    behind it overtake it.
//!
//! **Bus-off** is switched by hand through a [`BusOffSwitch`], or on a timetable
//! ([`FaultInjector::schedule_bus_off`]): while it is on, `send` fails with
//! [`TransportError::BusOff`], `recv` reports `BusOff` once and then discards everything
//! until the switch is reset, when `recv` reports [`TransportError::Restarted`] once
//! (what SocketCAN reports around a bus-off).
//!
//! [`open`](super::open) builds injectors from a spec string:
//! `sim:drop=1%,corrupt=0.1%,bus_off=100ms/60s,seed=7` (see [`spec`](super::spec)).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use fcan_core::frame::{Frame, Mtu};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{BusErrorKind, Received, Transport, TransportError};

/// What a corrupted frame becomes. Deliberately exhaustive: a CRC either catches the
/// corruption or it does not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CorruptMode {
    /// The CRC catches it: a CRC bus error instead of the frame (what a real bus does).
    #[default]
    Detected,
    /// The CRC misses it: the frame arrives with one payload bit flipped.
    Undetected,
}

/// Fault probabilities (each 0.0 ..= 1.0) and parameters. Default: no faults.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// Probability a frame is dropped.
    pub drop: f64,
    /// Probability a frame is corrupted.
    pub corrupt: f64,
    /// What corruption does.
    pub corrupt_mode: CorruptMode,
    /// Probability a frame is duplicated.
    pub duplicate: f64,
    /// Probability a frame is delayed.
    pub delay: f64,
    /// How long a delayed frame is held back.
    pub delay_by: Duration,
}

/// What the injector did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FaultStats {
    /// Frames taken from the inner transport (while not bus-off).
    pub seen: u64,
    /// Frames dropped.
    pub dropped: u64,
    /// Frames corrupted (detected or not).
    pub corrupted: u64,
    /// Frames duplicated.
    pub duplicated: u64,
    /// Frames delayed (a duplicated and delayed frame counts once).
    pub delayed: u64,
    /// Frames discarded while bus-off.
    pub lost_bus_off: u64,
}

/// Bus-off on a timetable: the controller is off the bus for `lasting`, once every
/// `every` ([`FaultInjector::schedule_bus_off`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusOffSchedule {
    /// How long each bus-off lasts (shorter than `every`).
    pub lasting: Duration,
    /// How often the controller goes bus-off.
    pub every: Duration,
}

/// Puts a [`FaultInjector`] into bus-off and back; clones control the same injector.
#[derive(Clone, Debug)]
pub struct BusOffSwitch(Arc<watch::Sender<bool>>);

impl BusOffSwitch {
    /// The controller goes bus-off.
    pub fn trip(&self) {
        self.0.send_replace(true);
    }
    /// The controller recovers.
    pub fn recover(&self) {
        self.0.send_replace(false);
    }
    /// Whether it is bus-off now.
    pub fn is_bus_off(&self) -> bool {
        *self.0.borrow()
    }
}

/// A transport whose received frames suffer seeded faults. See the [module docs](self).
pub struct FaultInjector<T> {
    inner: T,
    config: FaultConfig,
    rng: fastrand::Rng,
    stats: FaultStats,
    ready: VecDeque<Result<Received, TransportError>>,
    held: Vec<(Instant, Received)>,
    switch: BusOffSwitch,
    state: watch::Receiver<bool>,
    reported_off: bool,
}

impl<T: core::fmt::Debug> core::fmt::Debug for FaultInjector<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FaultInjector")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .field("stats", &self.stats)
            .finish()
    }
}

impl<T: Transport> FaultInjector<T> {
    /// Wraps `inner`; `seed` makes every decision reproducible.
    pub fn new(inner: T, config: FaultConfig, seed: u64) -> Self {
        let (tx, rx) = watch::channel(false);
        FaultInjector {
            inner,
            config,
            rng: fastrand::Rng::with_seed(seed),
            stats: FaultStats::default(),
            ready: VecDeque::new(),
            held: Vec::new(),
            switch: BusOffSwitch(Arc::new(tx)),
            state: rx,
            reported_off: false,
        }
    }

    /// The switch that puts this injector into bus-off and back.
    pub fn bus_off_switch(&self) -> BusOffSwitch {
        self.switch.clone()
    }

    /// Puts this injector into bus-off on `schedule` from now on, by a tokio task that
    /// works its [`BusOffSwitch`]: off for `lasting`, once every `every`. The first
    /// bus-off starts at a point of the first period drawn from the seed (so endpoints
    /// scheduled together do not all leave the bus at once), the next ones `every` after
    /// it. A switch tripped by hand meanwhile is recovered at the end of the timetable's
    /// next bus-off. The task ends when the injector is dropped. Call inside a tokio
    /// runtime.
    ///
    /// # Panics
    ///
    /// If `every` is zero or `lasting` is not shorter than `every`.
    pub fn schedule_bus_off(&mut self, schedule: BusOffSchedule) -> tokio::task::JoinHandle<()> {
        let BusOffSchedule { lasting, every } = schedule;
        assert!(
            !every.is_zero() && lasting < every,
            "a bus-off must be shorter than its period: {schedule:?}"
        );
        let every_ns = u64::try_from(every.as_nanos()).unwrap_or(u64::MAX);
        let first = Duration::from_nanos(self.rng.u64(..every_ns));
        let switch = self.switch.clone();
        let mut off_at = Instant::now() + first;
        tokio::spawn(async move {
            loop {
                for (at, off) in [(off_at, true), (off_at + lasting, false)] {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        // Every receiver, the injector's, is gone: it was dropped.
                        _ = switch.0.closed() => return,
                    }
                    if off {
                        switch.trip();
                    } else {
                        switch.recover();
                    }
                }
                off_at += every;
            }
        })
    }

    /// What happened so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// Changes the fault probabilities from now on.
    pub fn set_config(&mut self, config: FaultConfig) {
        self.config = config;
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The wrapped transport, mutably.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Unwraps (frames held back by `delay` are lost).
    pub fn into_inner(self) -> T {
        self.inner
    }

    fn hit(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.f64() < p
    }

    /// Runs one received frame through the fault draws.
    fn apply(&mut self, mut rx: Received) {
        self.stats.seen += 1;
        if self.hit(self.config.drop) {
            self.stats.dropped += 1;
            return;
        }
        if self.hit(self.config.corrupt) {
            self.stats.corrupted += 1;
            match self.config.corrupt_mode {
                CorruptMode::Detected => {
                    self.ready
                        .push_back(Err(TransportError::BusError(BusErrorKind::Crc)));
                    return;
                }
                CorruptMode::Undetected => {
                    if rx.frame.len() > 0 {
                        let bit = self.rng.usize(..rx.frame.len() * 8);
                        rx.frame = flip_bit(&rx.frame, bit);
                    }
                }
            }
        }
        let copies = if self.hit(self.config.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        if self.hit(self.config.delay) {
            self.stats.delayed += 1;
            let release = Instant::now() + self.config.delay_by;
            for _ in 0..copies {
                let at = release.into_std();
                self.held.push((release, Received { at, ..rx }));
            }
            self.held.sort_by_key(|(t, _)| *t);
        } else {
            for _ in 0..copies {
                self.ready.push_back(Ok(rx));
            }
        }
    }
}

/// `frame` with payload bit `bit` (0 = MSB of byte 0) inverted.
fn flip_bit(frame: &Frame, bit: usize) -> Frame {
    let mut data = [0u8; 64];
    let n = frame.len();
    data[..n].copy_from_slice(frame.data());
    data[bit / 8] ^= 0x80 >> (bit % 8);
    super::rebuild(frame, &data[..n])
}

impl<T: Transport> Transport for FaultInjector<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn mtu(&self) -> Mtu {
        self.inner.mtu()
    }

    fn node_origin(&self, node: fcan_core::id::NodeId) -> Option<crate::NodeOrigin> {
        self.inner.node_origin(node)
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        if self.switch.is_bus_off() {
            return Err(TransportError::BusOff);
        }
        self.inner.send(frame).await
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        loop {
            let off = *self.state.borrow_and_update();
            if off {
                if !self.reported_off {
                    self.reported_off = true;
                    self.ready.clear();
                    self.held.clear();
                    return Err(TransportError::BusOff);
                }
                tokio::select! {
                    _ = self.state.changed() => {}
                    r = self.inner.recv() => match r {
                        Ok(_) => self.stats.lost_bus_off += 1,
                        Err(e) if e.is_fatal() => return Err(e),
                        // other bus events go unseen while off the bus
                        Err(_) => {}
                    },
                }
                continue;
            }
            if self.reported_off {
                self.reported_off = false;
                return Err(TransportError::Restarted);
            }
            if let Some(r) = self.ready.pop_front() {
                return r;
            }
            let now = Instant::now();
            if self.held.first().is_some_and(|(t, _)| *t <= now) {
                return Ok(self.held.remove(0).1);
            }
            let next_release = self.held.first().map(|(t, _)| *t);
            tokio::select! {
                r = self.inner.recv() => match r {
                    Ok(rx) => self.apply(rx),
                    Err(e) => return Err(e),
                },
                _ = sleep_until_opt(next_release) => {}
                _ = self.state.changed() => {}
            }
        }
    }
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => core::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::frame::CanId;

    #[test]
    fn flip_changes_exactly_one_bit() {
        let f = Frame::fd(CanId::Standard(1), &[0; 12])
            .unwrap()
            .without_brs();
        let g = flip_bit(&f, 13);
        assert_eq!(g.data()[1], 0x04);
        assert!(g.is_fd() && !g.is_brs());
        assert_eq!(g.len(), 12);
    }
}
