//! The feedback angle made continuous.
//!
//! Since the "type 2 update" (manuals §4.2.3) a motor reports its angle looping within
//! −4π..4π, "which enables cycle counting": a host that samples often enough sees every
//! wrap as a jump of about 8π and counts it. [`Unwrap`] does that counting: each sample
//! moves the output by the difference from the previous sample, taken modulo the span
//! into −span/2..span/2. It is correct as long as the true angle moves less than half a
//! span (4π, two turns) between samples; after a silence longer than `gap_us` that can
//! no longer be assumed, so the next sample starts over from the raw angle.

use core::f64::consts::PI;

/// Unwraps the wrapped feedback angle of one motor.
#[derive(Clone, Debug)]
pub struct Unwrap {
    span: f64,
    gap_us: u64,
    /// The last raw sample and when it came.
    last: Option<(f64, u64)>,
    /// The continuous output at the last sample.
    out: f64,
}

impl Default for Unwrap {
    /// A span of 8π (the ±4π loop) and a 1 s gap.
    fn default() -> Unwrap {
        Unwrap::new((8.0 * PI) as f32, 1_000_000)
    }
}

impl Unwrap {
    /// `span` is the full wrap period (8π for RobStride feedback); a sample arriving
    /// more than `gap_us` after the previous one restarts from the raw angle.
    pub fn new(span: f32, gap_us: u64) -> Unwrap {
        Unwrap {
            span: f64::from(span),
            gap_us,
            last: None,
            out: 0.0,
        }
    }

    /// Feeds one raw (wrapped) angle sampled at `now_us` and returns the continuous
    /// angle. A NaN or infinite sample is ignored: the previous output is returned (NaN
    /// before any sample) and the state is kept.
    pub fn update(&mut self, raw: f32, now_us: u64) -> f64 {
        if !raw.is_finite() {
            return if self.last.is_some() {
                self.out
            } else {
                f64::NAN
            };
        }
        let raw = f64::from(raw);
        match self.last {
            // A clock that stepped back counts as no gap (saturating_sub gives 0).
            Some((prev, t)) if now_us.saturating_sub(t) <= self.gap_us => {
                let mut delta = raw - prev;
                if self.span > 0.0 {
                    // Into -span/2..=span/2: the shortest way round.
                    delta -= self.span * (delta / self.span).round();
                }
                self.out += delta;
            }
            _ => self.out = raw,
        }
        self.last = Some((raw, now_us));
        self.out
    }

    /// Forgets the history, so the next sample is taken as it is: after a set-zero (the
    /// motor's angle jumps to 0 without wrapping) or a reboot.
    pub fn reset(&mut self) {
        self.last = None;
        self.out = 0.0;
    }
}
