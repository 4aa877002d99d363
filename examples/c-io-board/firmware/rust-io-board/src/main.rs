//! The Rust I/O board (`examples/io-board`) with the main loop of the C firmware beside
//! it (`../main.c`): two frame rings in RAM standing in for a CAN controller, SysTick as
//! the µs clock, the outputs' levels written to a GPIO stand-in, node id 2, every
//! instance wired, CAN FD. Built only to compare sizes with the C firmware (`../README.md`);
//! the Rust I/O board's behaviour is tested by `tests/tests/conformance.rs`.
#![no_std]
#![no_main]

use core::mem::MaybeUninit;
use core::panic::PanicInfo;
use core::ptr::{addr_of, addr_of_mut, read_volatile, write_volatile};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::entry;
use fcan_example_io_board::{gen, IoBoard, OUTPUTS};
use fcan_runtime_nostd::fcan_core::frame::{CanId, Frame, FD_MAX_LEN};
use fcan_runtime_nostd::fcan_core::id::NodeId;
use fcan_runtime_nostd::{Controller, Transmit, TxRefused};

/// One frame slot, in the layout of the C firmware's `fcan_frame_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Slot {
    id: u32,
    len: u8,
    flags: u8,
    reserved: [u8; 2],
    data: [u8; FD_MAX_LEN],
}

const RING: usize = 32;
const EXTENDED: u8 = 1;
const FD: u8 = 2;
const BRS: u8 = 4;

#[repr(C)]
struct Ring {
    head: u32,
    tail: u32,
    slot: [Slot; RING],
}

const EMPTY: Slot = Slot {
    id: 0,
    len: 0,
    flags: 0,
    reserved: [0; 2],
    data: [0; FD_MAX_LEN],
};

/// Written by the "controller" too: every access is volatile (as `main.c`'s rings, which
/// are global for the same reason).
static mut CAN_RX: Ring = Ring {
    head: 0,
    tail: 0,
    slot: [EMPTY; RING],
};
static mut CAN_TX: Ring = Ring {
    head: 0,
    tail: 0,
    slot: [EMPTY; RING],
};
static mut GPIO_OUT: u32 = 0;
static mut BOARD: MaybeUninit<IoBoard> = MaybeUninit::uninit();

fn rx_pop() -> Option<Frame> {
    // SAFETY: single-threaded; volatile accesses to a ring only this loop reads.
    unsafe {
        let r = addr_of_mut!(CAN_RX);
        let tail = read_volatile(addr_of!((*r).tail));
        if tail == read_volatile(addr_of!((*r).head)) {
            return None;
        }
        let s = read_volatile(addr_of!((*r).slot[tail as usize % RING]));
        write_volatile(addr_of_mut!((*r).tail), tail.wrapping_add(1));
        let id = if s.flags & EXTENDED != 0 {
            CanId::Extended(s.id)
        } else {
            CanId::Standard(s.id as u16)
        };
        let data = s.data.get(..s.len as usize)?;
        if s.flags & FD != 0 {
            let f = Frame::fd(id, data).ok()?;
            Some(if s.flags & BRS != 0 {
                f
            } else {
                f.without_brs()
            })
        } else {
            Frame::classic(id, data).ok()
        }
    }
}

struct Tx;

impl Transmit for Tx {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        // SAFETY: single-threaded; volatile accesses to a ring only this loop writes.
        unsafe {
            let r = addr_of_mut!(CAN_TX);
            let head = read_volatile(addr_of!((*r).head));
            if head.wrapping_sub(read_volatile(addr_of!((*r).tail))) as usize >= RING {
                return Err(TxRefused);
            }
            let mut s = EMPTY;
            let (raw, ext) = match frame.id() {
                CanId::Standard(id) => (id as u32, 0),
                CanId::Extended(id) => (id, EXTENDED),
            };
            s.id = raw;
            s.flags =
                ext | if frame.is_fd() { FD } else { 0 } | if frame.is_brs() { BRS } else { 0 };
            s.len = frame.data().len() as u8;
            s.data[..frame.data().len()].copy_from_slice(frame.data());
            write_volatile(addr_of_mut!((*r).slot[head as usize % RING]), s);
            write_volatile(addr_of_mut!((*r).head), head.wrapping_add(1));
        }
        Ok(())
    }
}

/// SysTick as a free-running µs clock (as `../clock.c`).
struct Clock {
    last: u32,
    rem: u32,
    us: u32,
}

impl Clock {
    fn now_us(&mut self) -> u32 {
        let cur = SYST::get_current();
        let elapsed = self.last.wrapping_sub(cur) & 0x00FF_FFFF;
        self.last = cur;
        self.rem += elapsed;
        self.us = self.us.wrapping_add(self.rem / 25);
        self.rem %= 25;
        self.us
    }
}

#[entry]
fn main() -> ! {
    let Some(mut p) = cortex_m::Peripherals::take() else {
        halt()
    };
    p.SYST.set_clock_source(SystClkSource::Core);
    p.SYST.set_reload(0x00FF_FFFF);
    p.SYST.clear_current();
    p.SYST.enable_counter();
    let mut clock = Clock {
        last: SYST::get_current(),
        rem: 0,
        us: 0,
    };
    let t = SYST::get_current();
    let config = gen::Config {
        node_id: NodeId::new(2).unwrap_or_else(|| halt()),
        boot_id: 0x9E37_79B9u32.wrapping_mul(t ^ 0xA5A5_5A5A) ^ 0x1234_5678,
        counts: gen::Counts::MAX,
        controller: Controller::Fd,
    };
    let Ok(board) = IoBoard::new(config) else {
        halt()
    };
    // SAFETY: the only reference to BOARD, made once.
    let board = unsafe { (*addr_of_mut!(BOARD)).write(board) };
    let mut tx = Tx;
    loop {
        while let Some(f) = rx_pop() {
            board.receive(&f, clock.now_us());
        }
        board.poll(clock.now_us(), &mut tx);
        let mut levels = 0u32;
        for i in 0..OUTPUTS {
            if board.output(i) == Some(true) {
                levels |= 1 << i;
            }
        }
        // SAFETY: a volatile write, as to a GPIO register.
        unsafe { write_volatile(addr_of_mut!(GPIO_OUT), levels) }
    }
}

fn halt() -> ! {
    loop {
        cortex_m::asm::nop();
    }
}

#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    halt()
}
