//! The run loop: frames in with their time, the node polled, a sleep until the node's
//! next deadline or the next frame, the node's frames out through the port. Sans-IO in
//! the smoltcp sense: it knows no chip and no executor, only a [`CanPort`] and a
//! [`Clock`], so the host tests drive it with fakes and a firmware with embassy.

use core::task::Poll;

use embassy_futures::select::{select, Either};
use embassy_futures::{poll_once, yield_now};
use fcan_core::frame::Frame;
use fcan_runtime_nostd::{Transmit, TxRefused};

use crate::port::{BusState, CanPort, Received, Refused, RxError};

/// What the loop drives: a node and its application, each poll running both.
///
/// A generated node with its application implements it in three lines (the io-board
/// example, `examples/nucleo-g474re`):
///
/// ```
/// use fcan_embassy::Firmware;
/// use fcan_runtime_nostd::{fcan_core::frame::Frame, Transmit};
/// use fcan_example_io_board::IoBoard;
///
/// struct Board(IoBoard);
/// impl Firmware for Board {
///     fn receive(&mut self, frame: &Frame, now_us: u32) { self.0.receive(frame, now_us) }
///     fn poll(&mut self, now_us: u32, tx: &mut impl Transmit) { self.0.poll(now_us, tx) }
///     fn poll_at(&self, now_us: u32) -> Option<u32> { self.0.node.poll_at(now_us) }
/// }
/// ```
pub trait Firmware {
    /// One received frame, at `now_us` (when it was received).
    fn receive(&mut self, frame: &Frame, now_us: u32);
    /// The node's (and the application's) work: frames go out through `tx`, which may
    /// refuse them (the node keeps and re-offers them).
    fn poll(&mut self, now_us: u32, tx: &mut impl Transmit);
    /// When the next poll is due (the node's `poll_at`, or earlier for the
    /// application's own timers); `None`: only a frame gives it work.
    fn poll_at(&self, now_us: u32) -> Option<u32>;
}

/// The loop's clock: wrapping microseconds, as the node counts them.
#[allow(async_fn_in_trait)]
pub trait Clock {
    /// Now, in wrapping µs.
    fn now_us(&mut self) -> u32;
    /// Resolves at `at_us` (wrapping: a time up to 2^31 µs in the past resolves at once).
    /// Cancel-safe.
    async fn sleep_until(&mut self, at_us: u32);
}

/// How the loop waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RunConfig {
    /// After the controller refused a frame (FIFO full, bus-off): how long before it is
    /// offered again, unless a frame arrives first. About one frame's time on the bus:
    /// the FIFO has room again by then. 200 µs: an 8-byte Classical frame at 500 kbit/s
    /// takes 220–270 µs.
    pub tx_retry_us: u32,
    /// The longest sleep: the controller's bus state is looked at, and the application
    /// polled, at least this often even when the node has no deadline.
    pub max_sleep_us: u32,
    /// Frames taken from the controller after the one that woke the loop, before it
    /// polls (bounded, so a flood cannot starve the node's own timers).
    pub rx_burst: u8,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            tx_retry_us: 200,
            max_sleep_us: 100_000,
            rx_burst: 16,
        }
    }
}

/// What the loop counted since it started (wrapping counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stats {
    /// Polls of the firmware.
    pub polls: u32,
    /// Frames handed to the node.
    pub rx_frames: u32,
    /// Bus errors the controller reported.
    pub rx_bus_errors: u32,
    /// Receive FIFO overflows.
    pub rx_overruns: u32,
    /// Received frames fcan does not take (remote frames, bad lengths).
    pub rx_skipped: u32,
    /// Frames the controller queued.
    pub tx_frames: u32,
    /// Frames refused for lack of room (offered again later by the node).
    pub tx_full: u32,
    /// Frames refused as unsupported (an FD frame on a Classical port).
    pub tx_unsupported: u32,
    /// Times the controller was seen entering bus-off.
    pub bus_off: u32,
    /// Times it was seen back on the bus after bus-off.
    pub recovered: u32,
}

/// What [`Runner::turn`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Next {
    /// Sleep until this time (wrapping µs) or a frame.
    Sleep(u32),
    /// Work waits now (the node could not finish in one poll): poll again after letting
    /// other tasks run.
    Again,
}

/// What ended a [`Runner::wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Wake {
    /// A frame (or a receive error) came.
    Frame,
    /// The deadline came.
    Timer,
    /// Nothing: [`Next::Again`] yielded once.
    Again,
}

/// The node's `Transmit` over the port: counts, and notes a refusal for the wait.
struct Tx<'a, P> {
    port: &'a mut P,
    stats: &'a mut Stats,
    refused: bool,
}

impl<P: CanPort> Transmit for Tx<'_, P> {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        match self.port.send(frame) {
            Ok(()) => {
                self.stats.tx_frames = self.stats.tx_frames.wrapping_add(1);
                Ok(())
            }
            Err(why) => {
                let n = match why {
                    Refused::Full => &mut self.stats.tx_full,
                    Refused::Unsupported => &mut self.stats.tx_unsupported,
                };
                *n = n.wrapping_add(1);
                self.refused = true;
                Err(TxRefused)
            }
        }
    }
}

/// Signed distance from `now` to `t` on the wrapping clock.
fn ahead(now: u32, t: u32) -> i32 {
    t.wrapping_sub(now) as i32
}

/// The loop, one turn at a time ([`Runner::turn`] then [`Runner::wait`]), or for good
/// ([`Runner::run`], [`run_node`]).
pub struct Runner<P, C> {
    port: P,
    clock: C,
    config: RunConfig,
    stats: Stats,
    bus_off: bool,
}

impl<P: CanPort, C: Clock> Runner<P, C> {
    /// A loop over `port` and `clock`. Configure the node with `P::CONTROLLER`.
    pub fn new(port: P, clock: C, config: RunConfig) -> Self {
        Runner {
            port,
            clock,
            config,
            stats: Stats::default(),
            bus_off: false,
        }
    }

    /// What it counted.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The port (a test's fake, a driver's own counters).
    pub fn port_mut(&mut self) -> &mut P {
        &mut self.port
    }

    /// The clock.
    pub fn clock_mut(&mut self) -> &mut C {
        &mut self.clock
    }

    /// Runs `fw` for good: turn, wait, turn, ...
    pub async fn run<F: Firmware>(&mut self, fw: &mut F) -> ! {
        loop {
            let next = self.turn(fw);
            self.wait(fw, next).await;
        }
    }

    /// One poll: the bus state looked at (bus-off counted, recovery started), `fw`
    /// polled at the clock's time with the port as its transmitter, and when the next
    /// turn is due. After a refused frame that is `tx_retry_us` on: `poll_at` says "now"
    /// while a frame waits, and polling at once would only be refused again.
    pub fn turn<F: Firmware>(&mut self, fw: &mut F) -> Next {
        self.check_bus();
        let now = self.clock.now_us();
        let mut tx = Tx {
            port: &mut self.port,
            stats: &mut self.stats,
            refused: false,
        };
        fw.poll(now, &mut tx);
        let refused = tx.refused;
        self.stats.polls = self.stats.polls.wrapping_add(1);
        if refused {
            // Whatever the node's deadline: earlier, the frame would be refused again;
            // later, the frame would wait for it.
            let retry = self.config.tx_retry_us.min(i32::MAX as u32);
            return Next::Sleep(now.wrapping_add(retry));
        }
        let max = self.config.max_sleep_us.min(i32::MAX as u32) as i32;
        match fw.poll_at(now) {
            Some(t) if ahead(now, t) <= 0 => Next::Again,
            Some(t) => Next::Sleep(now.wrapping_add(ahead(now, t).min(max) as u32)),
            None => Next::Sleep(now.wrapping_add(max as u32)),
        }
    }

    /// Waits as `next` says: for a frame or the deadline, whichever first. A frame is
    /// handed to `fw` with its time, and then up to `rx_burst` more that are already
    /// waiting in the controller.
    pub async fn wait<F: Firmware>(&mut self, fw: &mut F, next: Next) -> Wake {
        let deadline = match next {
            Next::Again => {
                yield_now().await;
                return Wake::Again;
            }
            Next::Sleep(t) => t,
        };
        let got = match select(self.port.read(), self.clock.sleep_until(deadline)).await {
            Either::First(r) => r,
            Either::Second(()) => return Wake::Timer,
        };
        self.take(fw, got);
        for _ in 0..self.config.rx_burst {
            match poll_once(self.port.read()) {
                Poll::Ready(r) => self.take(fw, r),
                Poll::Pending => break,
            }
        }
        Wake::Frame
    }

    fn take<F: Firmware>(&mut self, fw: &mut F, r: Result<Received, RxError>) {
        let s = &mut self.stats;
        let n = match r {
            Ok(Received { frame, at_us }) => {
                let at = at_us.unwrap_or_else(|| self.clock.now_us());
                fw.receive(&frame, at);
                &mut s.rx_frames
            }
            Err(RxError::Bus) => &mut s.rx_bus_errors,
            Err(RxError::Overrun) => &mut s.rx_overruns,
            Err(RxError::Skipped) => &mut s.rx_skipped,
            Err(RxError::BusOff) => {
                // Counted (and recovery started) by the bus-state check, once.
                self.enter_bus_off();
                return;
            }
        };
        *n = n.wrapping_add(1);
    }

    fn check_bus(&mut self) {
        match self.port.bus_state() {
            Some(BusState::BusOff) => self.enter_bus_off(),
            Some(BusState::ErrorActive | BusState::ErrorPassive) if self.bus_off => {
                self.bus_off = false;
                self.stats.recovered = self.stats.recovered.wrapping_add(1);
            }
            _ => {}
        }
    }

    fn enter_bus_off(&mut self) {
        if !self.bus_off {
            self.bus_off = true;
            self.stats.bus_off = self.stats.bus_off.wrapping_add(1);
            self.port.recover();
        }
    }
}

/// Runs the node `fw` on `port` for good, on `clock`: the loop of [`Runner`].
///
/// ```ignore
/// // In an embassy task (examples/nucleo-g474re):
/// let port = Fd(FdCan::new(can));
/// run_node(&mut board, port, EmbassyClock, RunConfig::default()).await
/// ```
pub async fn run_node<F: Firmware, P: CanPort, C: Clock>(
    fw: &mut F,
    port: P,
    clock: C,
    config: RunConfig,
) -> ! {
    Runner::new(port, clock, config).run(fw).await
}
