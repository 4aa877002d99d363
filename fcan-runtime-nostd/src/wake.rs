//! When the node next needs a [`crate::Node::poll`]: the earliest of its deadlines, so
//! a firmware that sleeps (an RTIC or embassy task, a `wfi` loop) wakes only when the
//! node has work, as smoltcp's `Interface::poll_at` does.

use crate::lifecycle::Lifecycle;
use crate::services;
use crate::state::Core;
use crate::storage::PartsRef;
use fcan_core::timing::{At, Us};

/// The earliest deadline so far, on the wrapping clock (deadlines already passed count
/// as `now`).
struct Earliest {
    now: At,
    at: Option<At>,
}

impl Earliest {
    fn add(&mut self, deadline: At) {
        // How far ahead: a deadline behind us is due now.
        let ahead = self.now.until(deadline);
        if self.at.is_none_or(|a| ahead < self.now.until(a)) {
            self.at = Some(if ahead == Us(0) { self.now } else { deadline });
        }
    }

    fn now(&mut self) {
        self.add(self.now);
    }
}

/// The node's next deadline at `now`; `None` when nothing is scheduled (only a received
/// frame or a call of the application can give it work).
pub(crate) fn poll_at(core: &Core, p: &PartsRef<'_>, work_queued: bool, now: At) -> Option<At> {
    let life = &core.life;
    if life.is_fault() {
        return None;
    }
    let mut e = Earliest { now, at: None };
    if matches!(life.stage, Lifecycle::Boot)
        || work_queued
        || core.commit_pending
        || core.resume.get().is_some()
    {
        e.now();
    }
    if life.is_listening() {
        e.add(life.due);
        // Nothing else runs before the window closes.
        return e.at;
    }
    if life.stage.announcing() {
        e.add(life.due);
    }
    if life.acknowledged() {
        e.add(life.heartbeat_due);
    }
    if life.is_running() {
        if let Some(t) = life.watchdog_expiry() {
            // `timers` fires once more than the timeout has passed.
            e.add(t);
        }
        for f in p.frames.get(..core.plan.frames as usize).unwrap_or(&[]) {
            if !f.s2m || f.group_index != 0 {
                continue;
            }
            if f.period > Us(0) {
                e.add(f.next_due);
            } else if f.pending != 0 {
                e.now();
            }
        }
    }
    for s in p.svc.iter() {
        match services::due(s) {
            Some(None) => e.now(),
            Some(Some(t)) => e.add(t),
            None => {}
        }
    }
    e.at
}
