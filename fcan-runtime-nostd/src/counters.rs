//! Saturating counter helpers: counters never wrap and never panic.

/// Adds one, saturating at `u32::MAX`.
pub(crate) fn bump(c: &mut u32) {
    *c = c.saturating_add(1);
}
