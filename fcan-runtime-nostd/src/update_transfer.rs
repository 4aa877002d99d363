//! What the node keeps of one firmware-update transfer between polls (`docs/protocol.md`
//! §3.14): the phase, the offered size and SHA-256, how far it stored or checked, and the
//! read-back hash. Plain data in the node's core; `update` acts on it.

use fcan_core::msg::update::Sha256;
use fcan_core::msg::{UpdatePhase, UpdateReason};

/// One transfer's state: static RAM, no image buffer.
pub(crate) struct UpdateState {
    pub phase: UpdatePhase,
    pub reason: UpdateReason,
    pub size: u32,
    pub image: Sha256,
    /// Bytes stored from offset 0 (while receiving) or hashed (while verifying).
    pub next: u32,
    /// Transfer id of the COMMIT, echoed by the unsolicited Verified STATUS.
    pub commit_transfer: u8,
    /// The Verified STATUS still has to be queued.
    pub tell_verified: bool,
    /// `reboot` was called (a PC-side node returns from it).
    pub rebooted: bool,
    pub hasher: Option<sha2::Sha256>,
}

impl UpdateState {
    pub(crate) const IDLE: UpdateState = UpdateState {
        phase: UpdatePhase::Idle,
        reason: UpdateReason::None,
        size: 0,
        image: [0; 32],
        next: 0,
        commit_transfer: 0,
        tell_verified: false,
        rebooted: false,
        hasher: None,
    };

    pub(crate) fn fail(&mut self, reason: UpdateReason) {
        *self = UpdateState {
            reason,
            ..UpdateState::IDLE
        };
    }
}
