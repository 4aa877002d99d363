//! HEARTBEAT in both directions, and START.

use super::{DecodeError, EncodeError, FaultCode, NodeState};
use crate::pack::{Reader, Writer};

/// Master HEARTBEAT (master → broadcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MasterHeartbeat {
    /// The master's session id. Hearing a master heartbeat with a session that is not
    /// one's own is how a master detects a second master on the bus.
    pub session: u32,
}

impl MasterHeartbeat {
    /// Encoded size.
    pub const LEN: usize = 4;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        Ok(w.u32(self.session)?)
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(MasterHeartbeat { session: r.u32()? })
    }
}

/// Node HEARTBEAT (node → master). Exactly 8 bytes, so one Classical CAN frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NodeHeartbeat {
    /// Current state.
    pub state: NodeState,
    /// Why the node is in FAULT (`None` otherwise).
    pub fault: FaultCode,
    /// Random per boot.
    pub boot_id: u32,
    /// Total of the node's error counters, wrapping; when it moves, the master may read
    /// STATS for the detail.
    pub errors: u16,
}

impl NodeHeartbeat {
    /// Encoded size.
    pub const LEN: usize = 8;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(self.state as u8)?;
        w.u8(self.fault as u8)?;
        w.u32(self.boot_id)?;
        Ok(w.u16(self.errors)?)
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(NodeHeartbeat {
            state: r.u8()?.try_into()?,
            fault: r.u8()?.try_into()?,
            boot_id: r.u32()?,
            errors: r.u16()?,
        })
    }
}

/// START (master → node): commit the frame plan and run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Start {
    /// How many frames the plan has; the node NAKs with `BadPlan` unless it holds
    /// exactly frames `0..frame_count`.
    pub frame_count: u8,
    /// Master-lost timeout in milliseconds; 0 disables the watchdog.
    pub master_timeout_ms: u16,
}

impl Start {
    /// Encoded size.
    pub const LEN: usize = 3;

    pub(crate) fn encode(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.u8(self.frame_count)?;
        Ok(w.u16(self.master_timeout_ms)?)
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Start {
            frame_count: r.u8()?,
            master_timeout_ms: r.u16()?,
        })
    }
}
