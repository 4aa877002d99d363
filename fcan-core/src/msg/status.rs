//! Enumerations carried inside messages: node states, NAK reasons, service statuses,
//! fault codes, bus modes.

macro_rules! wire_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident = $val:expr,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub enum $name { $($(#[$vm])* $var = $val,)* }

        impl $name {
            /// Every value, in wire order.
            pub const ALL: &'static [$name] = &[$($name::$var,)*];

            /// The value for a wire byte, or `None` for an unknown one.
            pub const fn from_u8(v: u8) -> Option<$name> {
                match v { $($val => Some($name::$var),)* _ => None }
            }
        }

        impl TryFrom<u8> for $name {
            type Error = crate::msg::DecodeError;
            fn try_from(v: u8) -> Result<Self, Self::Error> {
                $name::from_u8(v).ok_or(crate::msg::DecodeError::BadEnum(v))
            }
        }
    };
}

wire_enum! {
    /// The node state machine (`docs/protocol.md` §5).
    NodeState {
        /// Booted; listening, then announcing until a master acknowledges.
        Unprovisioned = 0,
        /// Acknowledged by a master; accepts FRAME_DEFINE, PARAM_SET, services.
        Provisioned = 1,
        /// Started: data frames flow.
        Running = 2,
        /// The master was lost while running: outputs stopped, plan kept, announcing again.
        Suspended = 3,
        /// Stopped for good until reboot (e.g. node-id collision).
        Fault = 4,
    }
}

wire_enum! {
    /// Why a node is in [`NodeState::Fault`] (or 0 when it is not).
    FaultCode {
        /// No fault.
        None = 0,
        /// Another node answers to the same node id.
        IdCollision = 1,
        /// The application declared a fault.
        Application = 2,
    }
}

wire_enum! {
    /// The status byte of a RESULT frame: `Ok` is an ACK, anything else a NAK and its reason.
    ResultCode {
        /// Accepted and applied.
        Ok = 0,
        /// Payload too short, too long, or malformed.
        BadLength = 1,
        /// A block, topic, param, service or frame index the node does not have.
        BadIndex = 2,
        /// Not allowed in the node's current state.
        BadState = 3,
        /// Parameter below its minimum.
        BelowMin = 4,
        /// Parameter above its maximum.
        AboveMax = 5,
        /// NaN or infinity where a number is required.
        NotFinite = 6,
        /// A value that is not valid for its type (a bool byte other than 0/1).
        BadValue = 7,
        /// More frames than `limits.max_frames`.
        LimitFrames = 8,
        /// More copy entries than `limits.max_copy_entries`.
        LimitEntries = 9,
        /// Standard ID outside the data range or already used by another frame.
        BadStdId = 10,
        /// A copy entry outside its topic or its frame, or overlapping another (detail =
        /// entry index).
        BadEntry = 11,
        /// The plan as a whole is inconsistent (START count, incomplete group).
        BadPlan = 12,
        /// The block exists in the schema but is not wired on this board.
        NotWired = 13,
        /// The node cannot take the request now; try again.
        Busy = 14,
        /// A protocol feature this node does not implement.
        Unsupported = 15,
    }
}

wire_enum! {
    /// The status of a service response.
    ServiceStatus {
        /// Done; the response body follows.
        Ok = 0,
        /// Taken; the real response follows later with the same transfer id. The master
        /// restarts its timeout.
        Accepted = 1,
        /// No free slot or handler busy; try again.
        Busy = 2,
        /// The handler ran and reported a failure.
        AppError = 3,
        /// Unknown block or service index, or an instance that is not wired.
        BadIndex = 4,
        /// The request body did not decode (wrong length, bad bool).
        BadRequest = 5,
        /// Services are not served in the node's current state.
        BadState = 6,
        /// The handler deferred the call (ACCEPTED) and the application did not complete
        /// it within [`crate::timing::DEFERRED_SERVICE_TIMEOUT_US`]: the node gave the
        /// slot up. Sent with the call's transfer id, like the response it replaces.
        Expired = 7,
    }
}

wire_enum! {
    /// How a node must transmit once acknowledged.
    BusMode {
        /// Classical CAN frames only.
        Classic = 0,
        /// CAN FD frames at the arbitration rate (no bit-rate switching).
        Fd = 1,
        /// CAN FD frames with bit-rate switching.
        FdBrs = 2,
    }
}

impl BusMode {
    /// The frame kind this mode uses.
    pub const fn mtu(self) -> crate::frame::Mtu {
        match self {
            BusMode::Classic => crate::frame::Mtu::Classic,
            BusMode::Fd | BusMode::FdBrs => crate::frame::Mtu::Fd,
        }
    }
}

impl From<crate::types::RangeError> for ResultCode {
    fn from(e: crate::types::RangeError) -> Self {
        use crate::types::RangeError;
        match e {
            RangeError::NotFinite => ResultCode::NotFinite,
            RangeError::BelowMin => ResultCode::BelowMin,
            RangeError::AboveMax => ResultCode::AboveMax,
            RangeError::WrongType => ResultCode::BadValue,
        }
    }
}
