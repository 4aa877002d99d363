//! The receive mailbox: frames an interrupt handler takes from the CAN controller, on
//! their way to the node, stamped with their arrival time. The handler holds the
//! [`MailboxProducer`] and never touches the node; the main loop (or task) holds the
//! [`MailboxConsumer`] and hands what waits to [`crate::Node::receive_from`] before each
//! poll. It is `heapless`'s single-producer single-consumer queue, so neither side
//! takes a lock or needs `unsafe`.

use fcan_core::frame::Frame;

/// A received frame and when it arrived (the node's wrapping microsecond clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stamped {
    /// The frame.
    pub frame: Frame,
    /// When the controller received it.
    pub at_us: u32,
}

/// A queue of `N - 1` received frames between an interrupt handler and the node.
///
/// Size it for the frames that may arrive while the main loop is busy elsewhere: at
/// 1 Mbit/s on Classical CAN at most eight frames end within a millisecond.
///
/// ```
/// use fcan_runtime_nostd::{Mailbox, Stamped};
/// use fcan_runtime_nostd::fcan_core::frame::{CanId, Frame};
///
/// let mut mailbox: Mailbox<4> = Mailbox::new();
/// let (mut isr, mut main) = mailbox.split();
/// // In the CAN receive interrupt:
/// let frame = Frame::classic(CanId::Standard(0x120), &[1, 2]).unwrap();
/// assert!(isr.push(frame, 1_000));
/// // In the main loop, before `node.poll`: `node.receive_from(&mut main)`.
/// assert_eq!(main.pop(), Some(Stamped { frame, at_us: 1_000 }));
/// ```
pub struct Mailbox<const N: usize>(heapless::spsc::Queue<Stamped, N>);

impl<const N: usize> Mailbox<N> {
    /// An empty mailbox: `const`, so it can be a `static`.
    pub const fn new() -> Self {
        Mailbox(heapless::spsc::Queue::new())
    }

    /// The two ends: the producer for the interrupt handler, the consumer for the loop
    /// that polls the node. For a `static` mailbox, take `&'static mut` to it once at
    /// boot (`cortex_m::singleton!`, `static_cell`).
    pub fn split(&mut self) -> (MailboxProducer<'_, N>, MailboxConsumer<'_, N>) {
        let (p, c) = self.0.split();
        (MailboxProducer { q: p, dropped: 0 }, MailboxConsumer(c))
    }
}

impl<const N: usize> Default for Mailbox<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The interrupt handler's end of a [`Mailbox`].
pub struct MailboxProducer<'a, const N: usize> {
    q: heapless::spsc::Producer<'a, Stamped, N>,
    dropped: u32,
}

impl<const N: usize> MailboxProducer<'_, N> {
    /// Queues `frame`, received at `at_us`; `false` (and counted in
    /// [`MailboxProducer::dropped`]) when the mailbox is full.
    pub fn push(&mut self, frame: Frame, at_us: u32) -> bool {
        let ok = self.q.enqueue(Stamped { frame, at_us }).is_ok();
        if !ok {
            self.dropped = self.dropped.saturating_add(1);
        }
        ok
    }

    /// Frames refused because the mailbox was full.
    pub fn dropped(&self) -> u32 {
        self.dropped
    }
}

/// The node's end of a [`Mailbox`].
pub struct MailboxConsumer<'a, const N: usize>(heapless::spsc::Consumer<'a, Stamped, N>);

impl<const N: usize> MailboxConsumer<'_, N> {
    /// The oldest frame, taken out.
    pub fn pop(&mut self) -> Option<Stamped> {
        self.0.dequeue()
    }
}
