//! The eight-motor driver as an async firmware: the same node, application, "CAN
//! controller" driver and self-test as the polling binary (`src/main.rs`), with the node
//! as a task of the embassy executor that sleeps until it has something to do.
//!
//! What wakes what:
//!
//! - **A frame arrives.** The controller's receive interrupt (`PendSV` here, in
//!   `mailbox.rs`) moves the frames into the node's receive `Mailbox` (stamped with the
//!   time) and signals `mailbox::RX_READY`. That wakes the node task.
//! - **A deadline comes.** After each poll the task asks the node when it next needs one
//!   (`poll_at`: listen window, heartbeat, periodic frames, master watchdog, ...) and
//!   takes the earlier of that and the application's next control step (every
//!   `CONTROL_PERIOD_US`). An embassy-time timer for that instant goes into the timer
//!   queue of the SysTick time driver (`systick_driver.rs`), whose tick interrupt wakes
//!   the task when it is due.
//! - **The transmit ring has room again** (`mailbox::TX_FREED`, the controller's
//!   transmit-complete interrupt): waited for only after the ring refused a frame (the
//!   node keeps it and offers it again at its next poll).
//! - Otherwise the executor sleeps (`WFE`); a waker's `SEV` or any interrupt ends it.
//!
//! So the task polls the node after a frame, at a deadline, or after the ring had room
//! again, and at no other time: no busy loop. Each wake-up it takes the frames, reads the
//! clock, polls (the driver runs its control step when due), and computes the next wake
//! time, in [`motor`], the one place that calls `MotorDriver`.
//!
//! With feature `selftest` (default) a second task is the self-test master of
//! `selftest.rs`: it plays the bus every `BUS_TICK_US` and checks what the node does, the
//! same script as the polling binary's, and prints `fcan firmware async self-test: PASS`.
//!
//! `#![no_std]`, no heap: tasks, the node and the mailbox are statics. This file's own
//! `unsafe` is the PWM stand-in registers (and the `HardFault` signature cortex-m-rt
//! asks for); the executor comes from `cortex_m::singleton!`, the node is shared through
//! `embassy_sync`'s `ThreadModeMutex`, the time driver owns `SYST`. The shared modules'
//! blocks are as in the polling binary, each with its SAFETY comment.
#![no_std]
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]

#[path = "../../mailbox.rs"]
mod mailbox;
#[cfg(feature = "selftest")]
#[path = "../../selftest.rs"]
mod selftest;
#[cfg(feature = "update")]
#[path = "../../staging.rs"]
mod staging;
#[path = "../../stop.rs"]
mod stop;
mod systick_driver;

/// The node clock of this binary, as `mailbox.rs` and `selftest.rs` read it: the
/// embassy-time clock in µs (it moves in 100 µs ticks, see [`systick_driver`]), wrapped
/// to 32 bits like the polling binary's `clock::now_us`.
mod clock {
    pub fn now_us() -> u32 {
        embassy_time::Instant::now().as_micros() as u32
    }
}

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use stop::halt;

use cortex_m_rt::entry;
use embassy_executor::Executor;
use embassy_futures::select::{select, Either};
use embassy_futures::yield_now;
use embassy_time::{with_deadline, Duration, Instant};
use fcan_runtime_nostd::MailboxConsumer;

use mailbox::MAILBOX_SLOTS;

/// Every call into `MotorDriver` of this binary, so that a change of its API touches only
/// this module: boot, one turn of the node, and when the next turn is due.
mod motor {
    use core::cell::RefCell;

    use embassy_sync::blocking_mutex::ThreadModeMutex;
    use fcan_example_motor_driver::{gen, MotorDriver, CONTROL_PERIOD_US};
    use fcan_runtime_nostd::fcan_core::frame::Frame;
    use fcan_runtime_nostd::fcan_core::id::NodeId;
    use fcan_runtime_nostd::fcan_core::timing::reached;
    use fcan_runtime_nostd::{Controller, MailboxConsumer, Transmit, TxRefused};

    use crate::mailbox::{TxMailbox, MAILBOX_SLOTS};

    /// This board's node id (on a real board: address switches).
    pub const NODE_ID: u8 = 5;

    /// The whole node: fcan runtime buffers, generated wrapper and motor application, in
    /// static RAM, initialised by a constant and configured in place by [`boot`].
    ///
    /// Shared by the node task and (self-test) the master task, both in thread mode on
    /// one executor: a task runs until its next `await`, and neither holds the borrow
    /// across one, so the `RefCell` never refuses. `ThreadModeMutex` makes the static
    /// `Sync` without a critical section (it asserts that no interrupt handler reaches
    /// it: none does, the receive interrupt only fills the mailbox).
    pub static DRIVER: ThreadModeMutex<RefCell<MotorDriver>> =
        ThreadModeMutex::new(RefCell::new(MotorDriver::unconfigured()));

    /// Configures the node in place; `false` if it cannot (not with generated buffers).
    #[inline(never)]
    pub fn boot(boot_id: u32) -> bool {
        let Some(node_id) = NodeId::new(NODE_ID) else {
            return false;
        };
        let config = gen::Config {
            node_id,
            boot_id,
            counts: gen::Counts::MAX,
            controller: Controller::Fd,
        };
        let mut fw = DRIVER.borrow().borrow_mut();
        if fw.configure(config).is_err() {
            return false;
        }
        #[cfg(feature = "update")]
        match crate::staging::Staging::take() {
            Some(s) => fw.take_updates(s),
            None => return false,
        }
        true
    }

    /// The controller's transmit ring, noting whether it refused a frame.
    pub struct Tx {
        pub refused: bool,
    }

    impl Transmit for Tx {
        fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
            let r = TxMailbox.transmit(frame);
            self.refused |= r.is_err();
            r
        }
    }

    /// When the application's next control step is due. `MotorDriver::poll` runs the
    /// step at the first poll at or after its due time and schedules the next one a
    /// period after that poll; this mirrors that rule (same start: due at once after
    /// boot) from the times the task polls at, so the task can wake for it without asking
    /// the driver.
    pub struct Control {
        due: u32,
    }

    impl Control {
        pub const fn new() -> Self {
            Control { due: 0 }
        }
    }

    /// What the task does next.
    pub enum Next {
        /// Sleep until this time (µs on the node clock) or a frame, or room in the
        /// transmit ring if `Tx::refused`.
        Sleep(u32),
        /// The node has work now (a frame or service it could not finish in one poll):
        /// poll again once the other tasks have had their turn.
        Again,
    }

    /// One turn of the node: the frames the receive interrupt queued, the clock, the
    /// poll (control step when due, then the node), the PWM outputs. Returns when the
    /// node needs the next turn, and the clock it polled at.
    pub fn turn(
        inbox: &mut MailboxConsumer<'static, MAILBOX_SLOTS>,
        tx: &mut Tx,
        control: &mut Control,
        now_us: impl FnOnce() -> u32,
    ) -> (u32, Next) {
        let mut fw = DRIVER.borrow().borrow_mut();
        fw.receive_from(inbox);
        // Read after taking the frames: none was stamped later than the time polled at.
        let now = now_us();
        tx.refused = false;
        fw.poll(now, tx);
        if reached(now, control.due) {
            control.due = now.wrapping_add(CONTROL_PERIOD_US);
        }
        #[cfg(not(feature = "selftest"))]
        for i in 0..fcan_example_motor_driver::MOTORS {
            if let Some(a) = fw.axis(i) {
                crate::pwm::set(i, a.duty);
            }
        }
        let node = fw.node.poll_at(now);
        // Signed distance from `now` on the wrapping clock (a deadline passed is 0).
        let ahead = |t: u32| (t.wrapping_sub(now) as i32).max(0);
        let next = match node {
            // A refused frame makes `poll_at` answer "now"; it waits for room in the
            // ring (or the next control step) instead.
            _ if tx.refused => Next::Sleep(control.due),
            Some(t) if ahead(t) == 0 => Next::Again,
            Some(t) if ahead(t) < ahead(control.due) => Next::Sleep(t),
            _ => Next::Sleep(control.due),
        };
        (now, next)
    }
}

/// How often the node task woke, and why (printed by the self-test).
pub struct Wakes {
    pub polls: AtomicU32,
    pub by_frame: AtomicU32,
    pub by_timer: AtomicU32,
    pub by_tx_room: AtomicU32,
    pub again: AtomicU32,
}

pub static WAKES: Wakes = Wakes {
    polls: AtomicU32::new(0),
    by_frame: AtomicU32::new(0),
    by_timer: AtomicU32::new(0),
    by_tx_room: AtomicU32::new(0),
    again: AtomicU32::new(0),
};

/// The node task.
#[embassy_executor::task]
async fn node_task(mut inbox: MailboxConsumer<'static, MAILBOX_SLOTS>) -> ! {
    let mut tx = motor::Tx { refused: false };
    let mut control = motor::Control::new();
    loop {
        // Clear the wake-up events before looking at the mailbox and the ring: an event
        // after this point (a frame queued while we poll) stays set, and the wait below
        // returns at once. No frame waits for the next deadline.
        mailbox::RX_READY.reset();
        mailbox::TX_FREED.reset();
        let mut at = Instant::from_ticks(0);
        let (now, next) = motor::turn(&mut inbox, &mut tx, &mut control, || {
            at = Instant::now();
            at.as_micros() as u32
        });
        WAKES.polls.fetch_add(1, Relaxed);
        match next {
            motor::Next::Again => {
                WAKES.again.fetch_add(1, Relaxed);
                yield_now().await;
            }
            motor::Next::Sleep(deadline) => {
                // The node's wrapping µs deadline as an embassy `Instant`: the same clock,
                // 64 bits wide.
                let ahead = deadline.wrapping_sub(now) as i32;
                let wake = at + Duration::from_micros(ahead.max(0) as u64);
                let rx = mailbox::RX_READY.wait();
                let why = if tx.refused {
                    // Also wake when the bus has taken a frame: the refused one can go.
                    match with_deadline(wake, select(rx, mailbox::TX_FREED.wait())).await {
                        Ok(Either::First(())) => &WAKES.by_frame,
                        Ok(Either::Second(())) => &WAKES.by_tx_room,
                        Err(_) => &WAKES.by_timer,
                    }
                } else {
                    match with_deadline(wake, rx).await {
                        Ok(()) => &WAKES.by_frame,
                        Err(_) => &WAKES.by_timer,
                    }
                };
                why.fetch_add(1, Relaxed);
            }
        }
    }
}

/// A boot id: random per boot on a real board (TRNG); here SysTick's phase mixed with a
/// constant, as in the polling binary.
fn boot_id() -> u32 {
    let t = cortex_m::peripheral::SYST::get_current();
    0x9E37_79B9u32.wrapping_mul(t ^ 0xA5A5_5A5A) ^ 0x1234_5678
}

#[entry]
fn main() -> ! {
    #[cfg(feature = "selftest")]
    selftest::paint_stack();
    let Some(p) = cortex_m::Peripherals::take() else {
        halt()
    };
    systick_driver::start(p.SYST);
    if !motor::boot(boot_id()) {
        fail("node did not boot");
    }
    #[cfg(feature = "selftest")]
    {
        let (boot_stack, _) = selftest::stack_used();
        cortex_m_semihosting::hprintln!(
            "  stack used by boot (MotorDriver::configure in place in its static): {} B",
            boot_stack
        );
    }
    let Some(inbox) = mailbox::start_receiving() else {
        fail("no receive mailbox")
    };
    let Some(executor) = cortex_m::singleton!(: Executor = Executor::new()) else {
        halt()
    };
    executor.run(move |spawner| {
        match node_task(inbox) {
            Ok(t) => spawner.spawn(t),
            Err(_) => fail("cannot spawn the node task"),
        }
        #[cfg(feature = "selftest")]
        match bench::master_task() {
            Ok(t) => spawner.spawn(t),
            Err(_) => fail("cannot spawn the self-test master"),
        }
    })
}

/// The self-test master as a task, and the node as it sees it.
#[cfg(feature = "selftest")]
mod bench {
    use core::ops::Deref;
    use core::sync::atomic::Ordering::Relaxed;

    use cortex_m_semihosting::debug::{exit, EXIT_FAILURE, EXIT_SUCCESS};
    use cortex_m_semihosting::hprintln;
    use embassy_time::{Instant, Timer};
    use fcan_example_motor_driver::MotorDriver;

    use crate::{motor, selftest, WAKES};

    /// How often the master looks at the bus: it sends what is due and reads what the
    /// node sent. The node does not depend on it (it wakes on the frames).
    const BUS_TICK_US: u64 = 100;

    /// The node as the master sees it: it runs on its own, in its task.
    struct NodeTask;

    impl selftest::Firmware for NodeTask {
        async fn turn(&mut self) -> u32 {
            // The node task runs meanwhile, when a frame or its deadline wakes it.
            Timer::after_micros(BUS_TICK_US).await;
            crate::clock::now_us()
        }

        fn driver(&self) -> impl Deref<Target = MotorDriver> + '_ {
            motor::DRIVER.borrow().borrow()
        }
    }

    #[embassy_executor::task]
    pub async fn master_task() {
        let start = Instant::now();
        let r = selftest::script(
            NodeTask,
            "async self-test",
            "embassy-time, 10 kHz SysTick tick, 25 MHz core clock (QEMU: host time); node as an embassy task",
        )
        .await;
        let secs = start.elapsed().as_millis() as f32 / 1000.0;
        let polls = WAKES.polls.load(Relaxed);
        hprintln!(
            "  node task: {} polls in {:.1} s ({:.0} per second), woken by {} frame signals, {} timers, {} transmit-ring signals; {} immediate re-polls",
            polls,
            secs,
            polls as f32 / secs,
            WAKES.by_frame.load(Relaxed),
            WAKES.by_timer.load(Relaxed),
            WAKES.by_tx_room.load(Relaxed),
            WAKES.again.load(Relaxed)
        );
        match r {
            Ok(()) => {
                hprintln!("fcan firmware async self-test: PASS");
                exit(EXIT_SUCCESS);
            }
            Err(e) => {
                hprintln!("FAIL: {}", e);
                exit(EXIT_FAILURE);
            }
        }
    }
}

#[cfg(not(feature = "selftest"))]
mod pwm {
    use core::ptr::{addr_of_mut, write_volatile};

    use fcan_example_motor_driver::MOTORS;

    /// PWM compare registers of the eight motor bridges (stand-ins in RAM on this board).
    static mut DUTY: [f32; MOTORS] = [0.0; MOTORS];

    /// Writes one motor's duty.
    pub fn set(i: usize, duty: f32) {
        if i < MOTORS {
            // SAFETY: index checked; only the node task calls this (one thread), nothing
            // else references `DUTY`; a volatile write, as to a peripheral register.
            unsafe { write_volatile(addr_of_mut!(DUTY[i]), duty) }
        }
    }
}

/// Reports (self-test) and stops.
fn fail(_what: &str) -> ! {
    #[cfg(feature = "selftest")]
    {
        cortex_m_semihosting::hprintln!("FAIL: {}", _what);
        cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    }
    halt()
}
