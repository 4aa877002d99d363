//! The node clock: microseconds from SysTick, polled (no interrupt).
//!
//! SysTick runs free from the core clock (`SYSCLK_HZ`, 25 MHz on the MPS2 FPGA images,
//! which QEMU models) with the largest reload, 2^24 ticks (0.67 s); [`Clock::now_us`]
//! adds the ticks elapsed since its last call, so it must be called at least every
//! 0.67 s — the main loop calls it every iteration. QEMU's SysTick follows the host's
//! clock (QEMU is not cycle-accurate), so under QEMU this is wall time, which is what the
//! self-test's timeouts need.
//!
//! If SysTick does not move (an emulator without it), the clock falls back to a virtual
//! counter that advances `VIRTUAL_STEP_US` per call; the self-test prints which it uses.

use core::cell::RefCell;

use cortex_m::interrupt::{self, Mutex};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;

/// Core clock of the MPS2 AN385/AN386 images.
pub const SYSCLK_HZ: u32 = 25_000_000;
const TICKS_PER_US: u32 = SYSCLK_HZ / 1_000_000;
const RELOAD: u32 = 0x00FF_FFFF;
/// Virtual-clock step per `now_us` call when SysTick is dead.
pub const VIRTUAL_STEP_US: u32 = 50;

/// A free-running µs clock.
pub struct Clock {
    syst: SYST,
    last: u32,
    /// Ticks not yet turned into a whole microsecond.
    rem: u32,
    us: u32,
    virtual_us: Option<u32>,
}

impl Clock {
    /// Starts SysTick and checks it moves.
    pub fn new(mut syst: SYST) -> Clock {
        syst.disable_interrupt();
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(RELOAD);
        syst.clear_current();
        syst.enable_counter();
        let first = SYST::get_current();
        let mut moving = false;
        for _ in 0..100_000 {
            if SYST::get_current() != first {
                moving = true;
                break;
            }
        }
        Clock {
            syst,
            last: SYST::get_current(),
            rem: 0,
            us: 0,
            virtual_us: if moving { None } else { Some(0) },
        }
    }

    /// Whether the clock is the virtual fallback.
    #[allow(dead_code)]
    pub fn is_virtual(&self) -> bool {
        self.virtual_us.is_some()
    }

    /// Microseconds since [`Clock::new`], wrapping.
    pub fn now_us(&mut self) -> u32 {
        if let Some(v) = self.virtual_us.as_mut() {
            *v = v.wrapping_add(VIRTUAL_STEP_US);
            return *v;
        }
        let _ = &self.syst;
        let cur = SYST::get_current();
        // SysTick counts down.
        let elapsed = self.last.wrapping_sub(cur) & RELOAD;
        self.last = cur;
        // u32 arithmetic only (no 64-bit division helper in the image).
        self.rem += elapsed;
        self.us = self.us.wrapping_add(self.rem / TICKS_PER_US);
        self.rem %= TICKS_PER_US;
        self.us
    }
}

/// The one clock, shared by the main loop and the CAN receive interrupt (which stamps
/// frames as they arrive).
static CLOCK: Mutex<RefCell<Option<Clock>>> = Mutex::new(RefCell::new(None));

/// Starts SysTick as the shared clock; returns whether it is the virtual fallback.
pub fn install(syst: SYST) -> bool {
    let c = Clock::new(syst);
    let virt = c.is_virtual();
    interrupt::free(|cs| CLOCK.borrow(cs).replace(Some(c)));
    virt
}

/// Microseconds since [`install`], wrapping (0 before it); callable from the main loop
/// and from interrupt handlers (a short critical section).
pub fn now_us() -> u32 {
    interrupt::free(|cs| {
        CLOCK
            .borrow(cs)
            .borrow_mut()
            .as_mut()
            .map_or(0, Clock::now_us)
    })
}
