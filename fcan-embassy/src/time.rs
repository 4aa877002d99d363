//! The run loop's clock on embassy-time (feature `embassy-time`): whatever time driver
//! the firmware links (embassy-stm32's `time-driver-*`, esp-hal's, a SysTick one).

use embassy_time::{Duration, Instant, Timer};

use crate::run::Clock;

/// embassy-time's `Instant` as the node's wrapping microsecond clock.
pub fn instant_us(at: Instant) -> u32 {
    at.as_micros() as u32
}

/// The embassy-time clock in wrapping µs (its tick rate decides the resolution).
#[derive(Clone, Copy, Debug, Default)]
pub struct EmbassyClock;

impl Clock for EmbassyClock {
    fn now_us(&mut self) -> u32 {
        instant_us(Instant::now())
    }

    async fn sleep_until(&mut self, at_us: u32) {
        let now = Instant::now();
        let ahead = at_us.wrapping_sub(instant_us(now)) as i32;
        if ahead > 0 {
            Timer::at(now + Duration::from_micros(ahead as u64)).await;
        }
    }
}
