//! Two boards with one node id (docs/protocol.md §5.3): found, reported, never both
//! served.
//!
//! A newcomer with a taken id announces; the board that holds the id answers that
//! ANNOUNCE with a HEARTBEAT at once (rule 2), and the newcomer, not yet acknowledged,
//! hears it and goes to FAULT (rule 1) — provided nobody acknowledged it first. The
//! master used to acknowledge a changed boot id as a reboot within a few milliseconds,
//! before the old board's answer arrived: a node written from the spec alone then ran
//! beside the old one on the same data identifiers. So an ANNOUNCE naming another boot
//! than the one the master knows, while that one is still heard, is **held** for
//! [`COLLISION_HOLD_US`]: any sign of the known boot meanwhile (its HEARTBEAT, its
//! ANNOUNCE, its data frames) proves two boards, and the newcomer is never
//! acknowledged. A board that really rebooted was silent through its listen window
//! (300 ms at least), so it loses nothing but the hold.
//!
//! Two boards that are both acknowledged anyway (a master started after both, a node
//! that ignores rule 1) show up as HEARTBEATs of two boot ids: the master serves
//! neither (the node fails, publishes are refused) until one of them has been silent for
//! the offline timeout.

use super::*;

/// How long an ANNOUNCE with a new boot id waits for the known boot to show it is
/// alive (µs): its rule-2 HEARTBEAT comes at the holder's next poll, milliseconds
/// after the ANNOUNCE; a rebooted board was silent for 300 ms before announcing.
pub const COLLISION_HOLD_US: u64 = 100_000;

/// A newcomer's ANNOUNCE held while the known boot may still answer.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub announce: Announcement,
    pub state: NodeState,
    /// When it is taken for a reboot (µs).
    pub until: u64,
}

impl Engine {
    /// Holds an ANNOUNCE of `node` naming another boot than the known one while the
    /// known one may be alive; true when held (nothing else is done with it now). An
    /// ANNOUNCE of the known boot during a hold proves it alive.
    pub(super) fn hold_newcomer(
        &mut self,
        node: u8,
        ann: &Announcement,
        state: NodeState,
        at: u64,
    ) -> bool {
        let offline_us = self.cfg.offline_timeout_us;
        let Some(rec) = self.nodes.get_mut(&node) else {
            return false;
        };
        if ann.boot_id == rec.announce.boot_id {
            self.known_boot_alive(node, at);
            return false;
        }
        let alive = rec.phase != Phase::Offline && at < rec.last_seen + offline_us;
        if !alive {
            rec.held = None;
            return false;
        }
        if let Some((boot, seen)) = rec.collision.as_mut() {
            if *boot == ann.boot_id {
                // The collider announces again (it did not go to FAULT): still refused.
                *seen = at;
                return true;
            }
        }
        match rec.held.as_mut() {
            Some(h) if h.announce.boot_id == ann.boot_id => {
                // Its back-off repeat: the deadline stays.
                h.announce = ann.clone();
                h.state = state;
            }
            _ => {
                rec.held = Some(Held {
                    announce: ann.clone(),
                    state,
                    until: at + COLLISION_HOLD_US,
                })
            }
        }
        true
    }

    /// The known boot of `node` showed it is alive (a HEARTBEAT, an ANNOUNCE or a data
    /// frame of it): a newcomer held meanwhile is a second board with the same id.
    pub(super) fn known_boot_alive(&mut self, node: u8, at: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let Some(h) = rec.held.take() else {
            return;
        };
        let known = rec.announce.boot_id;
        rec.collision = Some((h.announce.boot_id, at));
        self.events.push_back(Event::Collision {
            node: nid(node),
            boot_ids: (known, h.announce.boot_id),
        });
    }

    /// A newcomer held past [`COLLISION_HOLD_US`] with no sign of the known boot: the
    /// board rebooted. Its ANNOUNCE is handled now.
    pub(super) fn release_held(&mut self, node: u8, now: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        if rec.held.as_ref().is_none_or(|h| now < h.until) {
            return;
        }
        let Some(h) = rec.held.take() else {
            return;
        };
        self.announced(node, h.announce, h.state, now);
    }

    /// A HEARTBEAT of `node` naming `boot`, not the boot the master knows: a second
    /// acknowledged board holds the id. Neither is served (the node fails) until one of
    /// them has been silent for the offline timeout.
    pub(super) fn foreign_heartbeat(&mut self, node: u8, boot: u32, at: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let known = rec.announce.boot_id;
        let first = rec.collision.is_none_or(|(b, _)| b != boot);
        rec.collision = Some((boot, at));
        if rec
            .held
            .as_ref()
            .is_some_and(|h| h.announce.boot_id == boot)
        {
            // The held newcomer was acknowledged by someone: both are.
            rec.held = None;
        }
        let failed = matches!(rec.phase, Phase::Failed(_));
        if first {
            self.events.push_back(Event::Collision {
                node: nid(node),
                boot_ids: (known, boot),
            });
        }
        if !failed {
            self.fail_node(
                node,
                format!(
                    "two boards answer to node id {node} (boot ids {known:#010x} and \
                     {boot:#010x}): give each board its own id"
                ),
            );
        }
    }

    /// Whether `node` is held back for a collision heard within the offline timeout at
    /// `at` (then it is not asked to announce again); forgets a collider silent longer.
    pub(super) fn in_collision(&mut self, node: u8, at: u64) -> bool {
        let offline_us = self.cfg.offline_timeout_us;
        let Some(rec) = self.nodes.get_mut(&node) else {
            return false;
        };
        match rec.collision {
            Some((_, seen)) if at < seen + offline_us => true,
            Some(_) => {
                rec.collision = None;
                false
            }
            None => false,
        }
    }
}
