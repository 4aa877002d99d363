//! The "CAN controller": a receive and a transmit mailbox ring in static RAM, in the
//! layout of a controller's message RAM (identifier word, control word, 64 data bytes).
//!
//! The MPS2 board has no CAN controller. On a real board the controller (or its DMA, as
//! with FDCAN message RAM) fills [`RX`] and raises its receive interrupt; here the
//! self-test master plays the bus (feature `selftest`): it writes [`RX`] and pends
//! `PendSV`, which stands in for that interrupt. In the size build nothing in the
//! program touches the bus side at all.
//!
//! The receive interrupt ([`PendSV`]) moves what [`RX`] holds into the node's receive
//! mailbox (`fcan_runtime_nostd::Mailbox`) through its producer, stamped with the
//! time; the main loop takes the frames with `receive_from` before each poll. The
//! handler never touches the node, and the mailbox needs no `unsafe`.
//!
//! With feature `async` the two interrupts of a real controller that an async firmware
//! sleeps on are signalled too: [`RX_READY`] when the receive interrupt has queued frames,
//! [`TX_FREED`] when the bus took a frame from [`TX`] (a controller's transmit-complete
//! interrupt). The polling binary ignores them.
//!
//! Why `unsafe` and volatile: the rings are shared with "hardware", i.e. with a writer the
//! compiler cannot see. Every access to them is a volatile read or write through a raw
//! pointer, so LTO can neither assume the receive ring stays empty (and delete the node's
//! receive path) nor drop the frames written to the transmit ring. Soundness: no two
//! accesses ever overlap: [`TX`] is touched only from the main loop; [`RX`] is written
//! by the bus side with interrupts off and read only inside `PendSV`, the one interrupt
//! that touches it; every slot is plain integers (any bit pattern is a valid
//! `RawMsg`), and indices are reduced modulo `N` before use, so garbage written by the
//! "hardware" can only produce a frame the driver rejects, never an out-of-bounds access.

#[cfg(feature = "irq-receive")]
use core::cell::RefCell;
use core::ptr::{addr_of, addr_of_mut, read_volatile, write_volatile};

use cortex_m::interrupt;
#[cfg(feature = "irq-receive")]
use cortex_m::interrupt::Mutex;
#[cfg(feature = "irq-receive")]
use cortex_m_rt::exception;
use fcan_runtime_nostd::fcan_core::frame::{CanId, Frame, FD_MAX_LEN};
#[cfg(feature = "irq-receive")]
use fcan_runtime_nostd::{Mailbox, MailboxConsumer, MailboxProducer};
use fcan_runtime_nostd::{Transmit, TxRefused};

/// One message-RAM slot.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawMsg {
    /// Bit 31: extended (IDE); bits 28..0: identifier.
    pub id: u32,
    /// Bits 6..0: payload length; bit 8: FD frame; bit 9: bit-rate switching.
    pub ctrl: u32,
    /// Payload.
    pub data: [u8; FD_MAX_LEN],
}

const IDE: u32 = 1 << 31;
const FDF: u32 = 1 << 8;
const BRS: u32 = 1 << 9;

/// A single-producer single-consumer ring of `N` slots. `head` is written by the producer
/// only, `tail` by the consumer only; `head - tail` (wrapping) is the fill level.
#[repr(C)]
pub struct Ring<const N: usize> {
    head: u32,
    tail: u32,
    slots: [RawMsg; N],
}

impl<const N: usize> Ring<N> {
    const EMPTY: RawMsg = RawMsg {
        id: 0,
        ctrl: 0,
        data: [0; FD_MAX_LEN],
    };
    /// An empty ring (for the statics).
    pub const fn new() -> Self {
        Ring {
            head: 0,
            tail: 0,
            slots: [Self::EMPTY; N],
        }
    }
}

/// Receive FIFO depth (bus → node).
pub const RX_SLOTS: usize = 32;
/// Transmit FIFO depth (node → bus).
pub const TX_SLOTS: usize = 32;

/// Bus → firmware.
static mut RX: Ring<RX_SLOTS> = Ring::new();
/// Firmware → bus.
static mut TX: Ring<TX_SLOTS> = Ring::new();
/// Frames the driver dropped because their slot did not hold a valid frame.
static mut RX_INVALID: u32 = 0;

/// Writes `f` into the ring; `false` when it is full.
///
/// # Safety
/// `ring` points to one of this module's statics and no other access to it is in progress
/// (see the module's soundness note).
unsafe fn push<const N: usize>(ring: *mut Ring<N>, f: &Frame) -> bool {
    // SAFETY: the caller guarantees `ring` is valid and not accessed concurrently; every
    // place written is a plain integer field inside the static.
    unsafe {
        let head = read_volatile(addr_of!((*ring).head));
        let tail = read_volatile(addr_of!((*ring).tail));
        if head.wrapping_sub(tail) as usize >= N {
            return false;
        }
        let mut msg = RawMsg {
            id: 0,
            ctrl: f.len() as u32,
            data: [0; FD_MAX_LEN],
        };
        msg.id = match f.id() {
            CanId::Standard(id) => id as u32,
            CanId::Extended(id) => id | IDE,
        };
        if f.is_fd() {
            msg.ctrl |= FDF;
        }
        if f.is_brs() {
            msg.ctrl |= BRS;
        }
        msg.data[..f.len()].copy_from_slice(f.data());
        let slot = addr_of_mut!((*ring).slots[head as usize % N]);
        write_volatile(slot, msg);
        write_volatile(addr_of_mut!((*ring).head), head.wrapping_add(1));
        true
    }
}

/// Takes the oldest slot out of the ring, as raw bytes.
///
/// # Safety
/// As [`push`].
unsafe fn pop<const N: usize>(ring: *mut Ring<N>) -> Option<RawMsg> {
    // SAFETY: as in `push`; `RawMsg` is valid for any bit pattern.
    unsafe {
        let head = read_volatile(addr_of!((*ring).head));
        let tail = read_volatile(addr_of!((*ring).tail));
        if head == tail {
            return None;
        }
        let msg = read_volatile(addr_of!((*ring).slots[tail as usize % N]));
        write_volatile(addr_of_mut!((*ring).tail), tail.wrapping_add(1));
        Some(msg)
    }
}

/// What a driver does with a message-RAM slot: checks it is a legal CAN / CAN FD frame.
fn to_frame(m: &RawMsg) -> Option<Frame> {
    let len = (m.ctrl & 0x7F) as usize;
    let data = m.data.get(..len)?;
    let id = if m.id & IDE != 0 {
        CanId::extended(m.id & !IDE)?
    } else {
        CanId::standard(u16::try_from(m.id).ok()?)?
    };
    if m.ctrl & FDF != 0 {
        let f = Frame::fd(id, data).ok()?;
        Some(if m.ctrl & BRS != 0 {
            f
        } else {
            f.without_brs()
        })
    } else {
        Frame::classic(id, data).ok()
    }
}

/// Driver side (the receive interrupt, or the main loop without `irq-receive`): the
/// next received frame, skipping (and counting) invalid slots.
pub fn rx_pop() -> Option<Frame> {
    loop {
        // SAFETY: called only from `PendSV` (with `irq-receive`) or only from the main
        // loop (without); the one writer of `RX` (`rx_push`) runs with interrupts off, so
        // it never overlaps this.
        let m = unsafe { pop(addr_of_mut!(RX))? };
        match to_frame(&m) {
            Some(f) => return Some(f),
            // SAFETY: as above; a plain counter only this handler writes.
            None => unsafe {
                let p = addr_of_mut!(RX_INVALID);
                write_volatile(p, read_volatile(p).wrapping_add(1));
            },
        }
    }
}

/// Frames dropped by the driver as invalid.
#[allow(dead_code)]
pub fn rx_invalid() -> u32 {
    // SAFETY: a plain aligned `u32` read with interrupts off, so `PendSV` (its only
    // writer) cannot be halfway through updating it.
    interrupt::free(|_| unsafe { read_volatile(addr_of!(RX_INVALID)) })
}

/// Bus side (self-test master): puts a frame on the node's receive ring and raises the
/// receive interrupt, as a controller does.
#[allow(dead_code)]
pub fn rx_push(f: &Frame) -> bool {
    // SAFETY: `RX` is only reached through this module's functions, by one context at a
    // time: here with interrupts off, in `PendSV` (which nothing preempts that touches
    // `RX`), so the two never overlap.
    let ok = interrupt::free(|_| unsafe { push(addr_of_mut!(RX), f) });
    #[cfg(feature = "irq-receive")]
    cortex_m::peripheral::SCB::set_pendsv();
    ok
}

#[cfg(feature = "irq-receive")]
/// Slots of the node's receive mailbox (one fewer frames): the frames the main loop may
/// leave waiting while it runs the control loop; at 1 Mbit/s at most eight frames end
/// within a millisecond.
pub const MAILBOX_SLOTS: usize = 16;

/// Set by the receive interrupt when it has queued frames in the mailbox: the async node
/// task waits on it (with its next deadline). A `Signal` holds the event until the task
/// takes it, so a frame queued between the task's last look and its wait still wakes it.
#[cfg(feature = "async")]
pub static RX_READY: embassy_sync::signal::Signal<
    embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex,
    (),
> = embassy_sync::signal::Signal::new();

/// Set when the bus takes a frame from the transmit ring (the controller's
/// transmit-complete interrupt): a node task whose frame was refused by a full ring waits
/// on it.
#[cfg(feature = "async")]
pub static TX_FREED: embassy_sync::signal::Signal<
    embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex,
    (),
> = embassy_sync::signal::Signal::new();

#[cfg(feature = "irq-receive")]
/// The receive interrupt's end of the mailbox, handed over once at boot.
static RX_PRODUCER: Mutex<RefCell<Option<MailboxProducer<'static, MAILBOX_SLOTS>>>> =
    Mutex::new(RefCell::new(None));

#[cfg(feature = "irq-receive")]
/// Creates the receive mailbox, gives its producer to the receive interrupt and returns
/// the consumer for the main loop; `None` if called twice.
pub fn start_receiving() -> Option<MailboxConsumer<'static, MAILBOX_SLOTS>> {
    let mailbox = cortex_m::singleton!(: Mailbox<MAILBOX_SLOTS> = Mailbox::new())?;
    let (producer, consumer) = mailbox.split();
    interrupt::free(|cs| RX_PRODUCER.borrow(cs).replace(Some(producer)));
    Some(consumer)
}

#[cfg(feature = "irq-receive")]
/// Frames the receive interrupt could not queue because the mailbox was full.
#[allow(dead_code)]
pub fn mailbox_dropped() -> u32 {
    interrupt::free(|cs| {
        RX_PRODUCER
            .borrow(cs)
            .borrow()
            .as_ref()
            .map_or(0, MailboxProducer::dropped)
    })
}

#[cfg(feature = "irq-receive")]
/// The CAN receive interrupt (PendSV stands in for it: the board has no controller):
/// every valid frame in the controller's receive ring goes into the mailbox, stamped
/// with the time it is taken.
#[exception]
fn PendSV() {
    let now = crate::clock::now_us();
    let _queued = interrupt::free(|cs| {
        let mut queued = false;
        if let Some(p) = RX_PRODUCER.borrow(cs).borrow_mut().as_mut() {
            while let Some(f) = rx_pop() {
                // A full mailbox drops the frame and counts it, as a controller's FIFO
                // overrun would.
                p.push(f, now);
                queued = true;
            }
        }
        queued
    });
    #[cfg(feature = "async")]
    if _queued {
        RX_READY.signal(());
    }
}

/// Bus side (self-test master): takes the oldest frame the node transmitted.
#[allow(dead_code)]
pub fn tx_pop() -> Option<Frame> {
    // SAFETY: `TX` is only reached through this module's functions, from one thread.
    let m = unsafe { pop(addr_of_mut!(TX))? };
    #[cfg(feature = "async")]
    TX_FREED.signal(());
    to_frame(&m)
}

/// The node's transmit interface: writes into the TX ring, refuses when it is full (the
/// runtime keeps the frame and offers it again on a later poll).
pub struct TxMailbox;

impl Transmit for TxMailbox {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        // SAFETY: `TX` is only reached through this module's functions, from one thread.
        if unsafe { push(addr_of_mut!(TX), frame) } {
            Ok(())
        } else {
            Err(TxRefused)
        }
    }
}
