//! The embassy-time driver of this board: a 10 kHz tick from SysTick.
//!
//! Why a driver of our own: embassy-time needs one per chip, and the HALs that ship one
//! (embassy-stm32, -nrf, -rp) use a peripheral timer with a compare register. The MPS2
//! board has no HAL, and the timer every Cortex-M has is SysTick, which has no compare
//! register: it counts down from its reload value and interrupts on reaching 0. The
//! driver (the `Driver` trait of `embassy-time-driver`, a tick counter and the timer
//! queue of `embassy-time-queue-utils`) is small enough to write here.
//!
//! SysTick runs free with a fixed period of one tick, 100 µs (2,500 cycles at 25 MHz),
//! and its interrupt counts the ticks: the tick count *is* the clock (`now`), and it
//! never drifts, since the counter is never stopped or reloaded by hand. In the same
//! interrupt, when the earliest timer of the queue is due, the queue wakes the tasks whose
//! timers are due and gives the next one. So a timer fires at the first tick at or after
//! its instant, up to 100 µs late, and the chip wakes 10,000 times a second for a few
//! dozen instructions.
//!
//! The node's clock is this one (`clock::now_us` is `Instant::now()` in µs), so it moves
//! in 100 µs steps. That is what keeps the node's schedules exact: `MotorDriver` runs its
//! control step at the first poll at or after its due time and schedules the next one
//! `CONTROL_PERIOD_US` after that poll; with a 1 µs clock and wake-ups up to a tick late,
//! every control period would stretch by that lateness (1.1 ms instead of 1 ms). With the
//! clock in ticks, a poll at tick `t` schedules the next step at tick `t + 10`, and the
//! interrupt of that tick wakes the task, so the poll's time is again exactly the due
//! time. 100 µs is far below what the protocol's timeouts and periods (milliseconds)
//! resolve.
//!
//! Tickless (restarting SysTick with a period that ends at the next timer) was tried
//! first: on hardware it loses a few cycles per restart, but under QEMU a cleared SysTick
//! only reloads when QEMU's own timer callback runs, so every restart lost that latency
//! and the clock fell 20-80 % behind the host's under load. A free-running periodic
//! SysTick is exact on both.
//!
//! The timer queue is `embassy-time-queue-utils`'s default, the executor's integrated one
//! (timers live in the task headers: no capacity to choose, no heap). Everything runs
//! inside `cortex_m::interrupt::free`: the state is shared by thread mode (`now`,
//! `schedule_wake`) and the SysTick and receive interrupts. No `unsafe`: the driver owns
//! `SYST`.

use core::cell::RefCell;
use core::task::Waker;

use cortex_m::interrupt::{self, Mutex};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::exception;
use embassy_time_driver::{Driver, TICK_HZ};
use embassy_time_queue_utils::Queue;

/// Core clock of the MPS2 AN385/AN386 images, which clocks SysTick.
pub const SYSCLK_HZ: u64 = 25_000_000;
/// SysTick cycles per tick (the feature `embassy-time-driver/tick-hz-10_000` sets the
/// tick rate, in Cargo.toml).
const CYCLES_PER_TICK: u64 = SYSCLK_HZ / TICK_HZ;
const _: () = assert!(CYCLES_PER_TICK * TICK_HZ == SYSCLK_HZ && CYCLES_PER_TICK <= 1 << 24);

struct State {
    /// Ticks since [`start`].
    ticks: u64,
    /// When the queue's earliest timer is due (`u64::MAX`: none).
    alarm: u64,
    queue: Queue,
}

/// The driver: all its state behind one critical-section mutex.
struct SysTickDriver {
    state: Mutex<RefCell<State>>,
}

impl Driver for SysTickDriver {
    fn now(&self) -> u64 {
        interrupt::free(|cs| self.state.borrow(cs).borrow().ticks)
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        interrupt::free(|cs| {
            let mut s = self.state.borrow(cs).borrow_mut();
            // `true` when the queue's earliest timer may have changed; `next_expiration`
            // wakes at once a timer already due.
            if s.queue.schedule_wake(at, waker) {
                let now = s.ticks;
                s.alarm = s.queue.next_expiration(now);
            }
        });
    }
}

embassy_time_driver::time_driver_impl!(static DRIVER: SysTickDriver = SysTickDriver {
    state: Mutex::new(RefCell::new(State {
        ticks: 0,
        alarm: u64::MAX,
        queue: Queue::new(),
    })),
});

/// Starts SysTick as the time base, with its interrupt every tick; call once at boot.
/// (Before, the clock reads 0.)
pub fn start(mut syst: SYST) {
    syst.disable_counter();
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(CYCLES_PER_TICK as u32 - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

/// A tick: counts it and, when the earliest timer is due, wakes the due ones.
#[exception]
fn SysTick() {
    interrupt::free(|cs| {
        let mut s = DRIVER.state.borrow(cs).borrow_mut();
        s.ticks += 1;
        if s.ticks >= s.alarm {
            let now = s.ticks;
            s.alarm = s.queue.next_expiration(now);
        }
    });
}
