//! The eight-motor driver (`examples/motor-driver`) as a real Cortex-M4F firmware for the
//! Arm MPS2-AN386 board, which QEMU emulates (`qemu-system-arm -machine mps2-an386`).
//!
//! - The node and its application live in one `static` ([`DRIVER`]), so their RAM shows
//!   up in static RAM; it is initialised by a constant (`MotorDriver::unconfigured`) and
//!   configured in place at boot, so it is never built on the stack.
//! - Frames come from and go to the mailbox rings of [`mailbox`] (a CAN controller's
//!   message RAM stand-in; the board has no CAN controller). Received frames reach the
//!   node from an interrupt handler through a `fcan_runtime_nostd::Mailbox`.
//! - Time is SysTick ([`clock`]).
//! - Feature `selftest` (default): a master on the same chip drives the node over the
//!   in-RAM loopback bus through discovery, schema download, planning, START, commands and
//!   master loss, checks what comes back, and exits QEMU through semihosting.
//! - Without it (`--no-default-features`, the size build): the endless node loop, with the
//!   motor duties written to PWM compare registers (stand-ins in RAM).
//! - Feature `update` (on with `selftest`): firmware updates over the bus into the spare
//!   region of [`staging`].
//!
//! `unsafe` is used only here, in the firmware binary, and every block says why it is
//! sound: the static node ([`boot`]), the controller's rings ([`mailbox`]), the PWM
//! registers, and (self-test) stack painting.
#![no_std]
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]

mod clock;
mod mailbox;
#[cfg(feature = "selftest")]
mod selftest;
#[cfg(feature = "update")]
mod staging;
mod stop;

use core::ptr::addr_of_mut;

use cortex_m_rt::entry;
use fcan_example_motor_driver::{gen, MotorDriver};
use fcan_runtime_nostd::fcan_core::id::NodeId;
use fcan_runtime_nostd::Controller;
use stop::halt;

/// This board's node id (on a real board: address switches).
pub const NODE_ID: u8 = 5;

/// The whole node: fcan runtime buffers, generated wrapper and the motor application.
/// Initialised by a constant (never built on the stack), configured in place by [`boot`].
static mut DRIVER: MotorDriver = MotorDriver::unconfigured();

/// Boots the node in [`DRIVER`] (configured in place) and hands out the only reference
/// to it.
///
/// Returns `None` when the generated buffers do not fit the schema (cannot happen with
/// generated code; checked anyway, and reported by the caller).
///
/// Not inlined, so its frame (a few hundred bytes: `configure` writes through `&mut`,
/// the node is never moved) is released before the main loop.
#[inline(never)]
fn boot(boot_id: u32) -> Option<&'static mut MotorDriver> {
    static mut BOOTED: bool = false;
    let node_id = NodeId::new(NODE_ID)?;
    // SAFETY: single-threaded, and `BOOTED` makes this run at most once, so the `&mut`
    // handed out is the only reference to `DRIVER` that ever exists.
    let fw = unsafe {
        let booted = &mut *addr_of_mut!(BOOTED);
        if *booted {
            return None;
        }
        *booted = true;
        &mut *addr_of_mut!(DRIVER)
    };
    let config = gen::Config {
        node_id,
        boot_id,
        counts: gen::Counts::MAX,
        controller: Controller::Fd,
    };
    fw.configure(config).ok()?;
    #[cfg(feature = "update")]
    fw.take_updates(staging::Staging::take()?);
    Some(fw)
}

/// A boot id: random per boot on a real board (TRNG); here SysTick's phase after the
/// clock check, mixed with a constant.
fn boot_id() -> u32 {
    let t = cortex_m::peripheral::SYST::get_current();
    0x9E37_79B9u32.wrapping_mul(t ^ 0xA5A5_5A5A) ^ 0x1234_5678
}

#[cfg(not(feature = "selftest"))]
mod pwm {
    use core::ptr::{addr_of_mut, write_volatile};

    /// PWM compare registers of the eight motor bridges (stand-ins in RAM on this board).
    static mut DUTY: [f32; fcan_example_motor_driver::MOTORS] =
        [0.0; fcan_example_motor_driver::MOTORS];

    /// Writes one motor's duty.
    pub fn set(i: usize, duty: f32) {
        if i < fcan_example_motor_driver::MOTORS {
            // SAFETY: index checked; single-threaded, nothing else references `DUTY`; a
            // volatile write, as to a peripheral register.
            unsafe { write_volatile(addr_of_mut!(DUTY[i]), duty) }
        }
    }
}

#[cfg(not(feature = "selftest"))]
#[entry]
fn main() -> ! {
    let Some(p) = cortex_m::Peripherals::take() else {
        halt()
    };
    clock::install(p.SYST);
    let Some(fw) = boot(boot_id()) else { halt() };
    #[cfg(feature = "irq-receive")]
    let Some(mut inbox) = mailbox::start_receiving() else {
        halt()
    };
    let mut tx = mailbox::TxMailbox;
    loop {
        // The frames the receive interrupt queued, or (without `irq-receive`) what the
        // controller holds, read here.
        #[cfg(feature = "irq-receive")]
        fw.receive_from(&mut inbox);
        #[cfg(not(feature = "irq-receive"))]
        while let Some(frame) = mailbox::rx_pop() {
            fw.receive(&frame, clock::now_us());
        }
        // Read after taking the frames: none was stamped later than the time polled at.
        let now = clock::now_us();
        fw.poll(now, &mut tx);
        for i in 0..fcan_example_motor_driver::MOTORS {
            if let Some(a) = fw.axis(i) {
                pwm::set(i, a.duty);
            }
        }
    }
}

#[cfg(feature = "selftest")]
#[entry]
fn main() -> ! {
    use cortex_m_semihosting::debug::{exit, EXIT_FAILURE, EXIT_SUCCESS};
    use cortex_m_semihosting::hprintln;

    selftest::paint_stack();
    let Some(p) = cortex_m::Peripherals::take() else {
        halt()
    };
    let virtual_clock = clock::install(p.SYST);
    let id = boot_id();
    let Some(fw) = boot(id) else {
        hprintln!("FAIL: node did not boot");
        exit(EXIT_FAILURE);
        halt()
    };
    let (boot_stack, _) = selftest::stack_used();
    hprintln!(
        "  stack used by boot (MotorDriver::configure in place in its static): {} B",
        boot_stack
    );
    let Some(inbox) = mailbox::start_receiving() else {
        hprintln!("FAIL: no receive mailbox");
        exit(EXIT_FAILURE);
        halt()
    };
    match selftest::run(fw, inbox, virtual_clock) {
        Ok(()) => {
            hprintln!("fcan firmware self-test: PASS");
            exit(EXIT_SUCCESS);
        }
        Err(e) => {
            hprintln!("FAIL: {}", e);
            exit(EXIT_FAILURE);
        }
    }
    halt()
}
