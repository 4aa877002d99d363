//! How both firmware binaries stop: `halt` (sleep for good), and the panic and HardFault
//! handlers, which in the self-test report the failure and exit QEMU with a failure code.
//! Included by `src/main.rs` and, with `#[path]`, by the async binary.

/// Sleeps for good.
pub fn halt() -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}

/// A panic cannot come from bus input (the runtime never panics on input); if anything
/// panics anyway: report and exit QEMU with failure in the self-test, stop otherwise.
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    #[cfg(feature = "selftest")]
    {
        cortex_m_semihosting::hprintln!("FAIL: panic: {}", _info);
        cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    }
    halt()
}

#[cfg(feature = "selftest")]
#[cortex_m_rt::exception]
unsafe fn HardFault(_frame: &cortex_m_rt::ExceptionFrame) -> ! {
    cortex_m_semihosting::hprintln!("FAIL: HardFault at {:#x}", _frame.pc());
    cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    halt()
}
