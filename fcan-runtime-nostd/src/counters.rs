//! Saturating counter helpers: counters never wrap and never panic.

use fcan_core::msg::Counters;

/// Adds one, saturating at `u32::MAX`. Out of line: called from some sixty places, where
/// inlined copies cost ~230 B of flash and a call costs nothing that matters.
#[inline(never)]
pub(crate) fn bump(c: &mut u32) {
    *c = c.saturating_add(1);
}

/// All counters zero; `Counters::default()` in a `const` context.
pub(crate) const ZERO: Counters = Counters {
    rx_handled: 0,
    rx_malformed: 0,
    rx_ignored: 0,
    rx_bad_state: 0,
    reassembly_dropped: 0,
    tx_refused: 0,
    tx_frames: 0,
    naks_sent: 0,
    services_busy: 0,
    master_lost: 0,
};
