//! An in-process simulated CAN / CAN FD bus.
//!
//! ```
//! use fcan_core::frame::{CanId, Frame, Mtu};
//! use fcan_transport::{sim::SimBus, Transport};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let bus = SimBus::new(Default::default());
//! let mut master = bus.endpoint(Mtu::Fd);
//! let mut node = bus.endpoint(Mtu::Fd);
//! let f = Frame::fd(CanId::Standard(0x100), &[1; 64]).unwrap();
//! master.send(&f).await.unwrap();
//! let got = node.recv().await.unwrap();
//! assert_eq!(got.frame, f);
//! // 64 bytes with BRS at 1/5 Mbit/s: about 140 µs of (virtual) wire time.
//! assert!(bus.now().as_micros() >= 139);
//! # }
//! ```
//!
//! # Time: one design for tests and for the demo
//!
//! The bus keeps no clock of its own. It reads tokio's clock and computes, lazily and
//! exactly, what the wire did up to that instant ([`BusModel`]): which frame won each
//! arbitration, when its last bit passed, who received it. A receiver gets a frame only
//! once tokio's clock has reached the end of that frame, waiting (`sleep_until`) if needed.
//!
//! * In a normal tokio runtime that paces delivery to the wall clock: the demo sees
//!   realistic timing, and the bus load over a window is real.
//! * Under a paused clock (`#[tokio::test(start_paused = true)]`, `tokio::time::pause`)
//!   the same code runs in virtual time: tokio jumps straight to the next frame end when all
//!   tasks wait, so a test is deterministic and instantaneous. A test can also step the
//!   clock itself with `tokio::time::advance`.
//!
//! Create the bus inside the runtime whose clock it should use.
//!
//! tokio's timers have millisecond resolution, so a waiting receiver wakes up to 1 ms
//! after the frame's end (also under a paused clock, where the clock then jumps to the
//! timer tick). The model's figures do not depend on that: [`Received::at`] is the exact
//! end of the frame, and the history holds exact queueing, start and end times: the model
//! is evaluated lazily but exactly, and a frame queued at time t competes in every
//! arbitration after t, whenever anyone looks.
//!
//! # Measurements
//!
//! [`SimBus::history`] lists every transmission with its queueing time, start, end and
//! bits; [`SimBus::load`] gives the bus load over a window; [`SimBus::totals`] the running
//! totals. Fault injection wraps endpoints: see [`fault`](super::fault).

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fcan_core::frame::{Frame, Mtu};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Received, Transport, TransportError};

pub mod bittime;
pub mod model;

pub use bittime::{
    crc15, fd_rejected_bits, frame_bits, BitRates, FrameBits, ERROR_FRAME_BITS, TRAILER_BITS,
};
pub use model::{BusModel, BusTotals, EndpointId, Outcome, RxItem, TxRecord, DEFAULT_HISTORY};

/// Options of a simulated bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Arbitration and data bit rates.
    pub rates: BitRates,
    /// How many transmission records to keep for [`SimBus::history`] and
    /// [`SimBus::load`].
    pub history: usize,
}

impl Default for SimConfig {
    /// 1 / 5 Mbit/s, [`DEFAULT_HISTORY`] records.
    fn default() -> Self {
        SimConfig {
            rates: BitRates::default(),
            history: DEFAULT_HISTORY,
        }
    }
}

/// Options of one endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointConfig {
    /// Name for messages and logs; `None`: `sim#N`.
    pub name: Option<String>,
    /// [`Mtu::Classic`] for a Classical-CAN-only node (it destroys FD frames on the bus).
    pub mtu: Mtu,
    /// Frames the endpoint may have queued; one more fails with
    /// [`TransportError::TxQueueFull`].
    pub tx_queue_len: usize,
}

impl Default for EndpointConfig {
    /// An FD endpoint with a 64-frame transmit queue.
    fn default() -> Self {
        EndpointConfig {
            name: None,
            mtu: Mtu::Fd,
            tx_queue_len: 64,
        }
    }
}

struct Shared {
    model: Mutex<BusModel>,
    origin: Instant,
    changed: Notify,
}

/// A handle on a simulated bus; clones share the bus.
#[derive(Clone)]
pub struct SimBus {
    shared: Arc<Shared>,
}

impl core::fmt::Debug for SimBus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimBus")
            .field("rates", &self.rates())
            .field("now", &self.now())
            .finish()
    }
}

impl SimBus {
    /// A new idle bus whose time starts now (on tokio's clock).
    pub fn new(config: SimConfig) -> SimBus {
        let mut model = BusModel::new(config.rates);
        model.set_history_limit(config.history);
        SimBus {
            shared: Arc::new(Shared {
                model: Mutex::new(model),
                origin: Instant::now(),
                changed: Notify::new(),
            }),
        }
    }

    fn model(&self) -> MutexGuard<'_, BusModel> {
        // The model is never left half-updated by a panic worth propagating.
        self.shared
            .model
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn now_ns(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.shared.origin)
            .as_nanos() as u64
    }

    fn instant(&self, ns: u64) -> Instant {
        self.shared.origin + Duration::from_nanos(ns)
    }

    /// Time since the bus was created, on tokio's clock.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now_ns())
    }

    /// The bus's bit rates.
    pub fn rates(&self) -> BitRates {
        self.model().rates()
    }

    /// Attaches an FD or Classical-CAN-only endpoint with default options.
    pub fn endpoint(&self, mtu: Mtu) -> SimEndpoint {
        self.endpoint_with(EndpointConfig {
            mtu,
            ..Default::default()
        })
    }

    /// Attaches an endpoint.
    pub fn endpoint_with(&self, config: EndpointConfig) -> SimEndpoint {
        let mut model = self.model();
        // Catch up first, so the new endpoint only hears frames that start after it joins.
        model.advance(self.now_ns(), true);
        let id = model.attach("", config.mtu, config.tx_queue_len);
        let name = config.name.unwrap_or_else(|| format!("sim#{}", id.0));
        model.set_name(id, &name);
        drop(model);
        SimEndpoint {
            bus: self.clone(),
            id,
            name,
            mtu: config.mtu,
        }
    }

    /// Runs the model up to now and returns the transmission records, oldest first.
    pub fn history(&self) -> Vec<TxRecord> {
        let mut m = self.model();
        m.advance(self.now_ns(), true);
        m.history().copied().collect()
    }

    /// Running totals up to now.
    pub fn totals(&self) -> BusTotals {
        let mut m = self.model();
        m.advance(self.now_ns(), true);
        m.totals()
    }

    /// Bus load over `window` (times since the bus started), 0.0 ..= 1.0.
    pub fn load(&self, window: Range<Duration>) -> f64 {
        let mut m = self.model();
        m.advance(self.now_ns(), true);
        m.load(window)
    }
}

/// One node's connection to a [`SimBus`]. Detaches when dropped.
pub struct SimEndpoint {
    bus: SimBus,
    id: EndpointId,
    name: String,
    mtu: Mtu,
}

impl core::fmt::Debug for SimEndpoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimEndpoint")
            .field("name", &self.name)
            .field("mtu", &self.mtu)
            .finish()
    }
}

impl SimEndpoint {
    /// This endpoint's id on its bus (as in [`TxRecord::sender`]).
    pub fn id(&self) -> EndpointId {
        self.id
    }

    /// The bus this endpoint is attached to.
    pub fn bus(&self) -> &SimBus {
        &self.bus
    }

    /// Takes the next frame or bus error if one has been delivered by now, without waiting.
    pub fn try_recv(&mut self) -> Option<Result<Received, TransportError>> {
        let now = self.bus.now_ns();
        let item = self.bus.model().poll_rx(self.id, now)?;
        Some(self.convert(item))
    }

    fn convert(&self, item: RxItem) -> Result<Received, TransportError> {
        match item {
            RxItem::Frame { frame, at } => Ok(Received {
                frame,
                at: self.bus.instant(at).into_std(),
            }),
            RxItem::Error { kind, .. } => Err(TransportError::BusError(kind)),
        }
    }
}

impl Drop for SimEndpoint {
    fn drop(&mut self) {
        self.bus.model().detach(self.id);
        self.bus.shared.changed.notify_waiters();
    }
}

impl Transport for SimEndpoint {
    fn name(&self) -> &str {
        &self.name
    }

    fn mtu(&self) -> Mtu {
        self.mtu
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        let now = self.bus.now_ns();
        self.bus.model().enqueue(now, self.id, *frame)?;
        self.bus.shared.changed.notify_waiters();
        Ok(())
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        loop {
            let changed = self.bus.shared.changed.notified();
            tokio::pin!(changed);
            // Register for wake-ups before looking, so no send slips between look and wait.
            changed.as_mut().enable();
            let next = {
                let now = self.bus.now_ns();
                let mut m = self.bus.model();
                if let Some(item) = m.poll_rx(self.id, now) {
                    drop(m);
                    return self.convert(item);
                }
                m.next_event(self.id)
            };
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(self.bus.instant(at)) => {}
                        _ = &mut changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}
