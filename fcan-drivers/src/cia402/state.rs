//! The CiA 402 power state machine **as data** (CiA 402-2 / IEC 61800-7-201 §6.2 "Device
//! control": Figure "State machine", Table "Statusword bits for the states" (the 0x004F /
//! 0x006F patterns) and Table "Command coding" of the controlword bits 7, 3, 2, 1, 0).
//!
//! The driver reads the drive's state from the statusword ([`State::of`]) and asks
//! [`next`] for the controlword that moves it one transition toward its goal; the
//! simulated drive applies a command with [`transition`]. Both read the same table, so
//! the unit tests below check it against the standard's transitions one by one, with
//! vectors written from the standard (never from this code).

/// A state of the power state machine (CiA 402-2 Figure "State machine").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Statusword `xxxx xxxx x0xx 0000` (mask 0x004F = 0x0000).
    NotReadyToSwitchOn,
    /// `xxxx xxxx x1xx 0000` (0x004F = 0x0040).
    SwitchOnDisabled,
    /// `xxxx xxxx x01x 0001` (0x006F = 0x0021).
    ReadyToSwitchOn,
    /// `xxxx xxxx x01x 0011` (0x006F = 0x0023).
    SwitchedOn,
    /// `xxxx xxxx x01x 0111` (0x006F = 0x0027).
    OperationEnabled,
    /// `xxxx xxxx x00x 0111` (0x006F = 0x0007).
    QuickStopActive,
    /// `xxxx xxxx x0xx 1111` (0x004F = 0x000F).
    FaultReactionActive,
    /// `xxxx xxxx x0xx 1000` (0x004F = 0x0008).
    Fault,
}

impl State {
    /// Every state, in the order of their [`code`](Self::code)s.
    pub const ALL: [State; 8] = [
        State::NotReadyToSwitchOn,
        State::SwitchOnDisabled,
        State::ReadyToSwitchOn,
        State::SwitchedOn,
        State::OperationEnabled,
        State::QuickStopActive,
        State::FaultReactionActive,
        State::Fault,
    ];

    /// The state a statusword says, or `None` for a pattern the table does not have.
    pub fn of(statusword: u16) -> Option<State> {
        let s = statusword;
        Some(if s & 0x4F == 0x00 {
            State::NotReadyToSwitchOn
        } else if s & 0x4F == 0x40 {
            State::SwitchOnDisabled
        } else if s & 0x6F == 0x21 {
            State::ReadyToSwitchOn
        } else if s & 0x6F == 0x23 {
            State::SwitchedOn
        } else if s & 0x6F == 0x27 {
            State::OperationEnabled
        } else if s & 0x6F == 0x07 {
            State::QuickStopActive
        } else if s & 0x4F == 0x0F {
            State::FaultReactionActive
        } else if s & 0x4F == 0x08 {
            State::Fault
        } else {
            return None;
        })
    }

    /// The state's bits of a statusword (bits 0–3, 5, 6; bit 4 "voltage enabled" set
    /// where the voltage is on): what a drive in this state sends.
    pub fn statusword(self) -> u16 {
        match self {
            State::NotReadyToSwitchOn => 0x0000,
            State::SwitchOnDisabled => 0x0040,
            State::ReadyToSwitchOn => 0x0021,
            State::SwitchedOn => 0x0033,
            State::OperationEnabled => 0x0037,
            State::QuickStopActive => 0x0017,
            State::FaultReactionActive => 0x001F,
            State::Fault => 0x0008,
        }
    }

    /// The code the `status` topic carries: 0 not ready to switch on, 1 switch on
    /// disabled, 2 ready to switch on, 3 switched on, 4 operation enabled, 5 quick stop
    /// active, 6 fault reaction active, 7 fault (255: a statusword the table lacks).
    pub fn code(self) -> u8 {
        State::ALL.iter().position(|&s| s == self).unwrap_or(255) as u8
    }
}

impl core::fmt::Display for State {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            State::NotReadyToSwitchOn => "Not ready to switch on",
            State::SwitchOnDisabled => "Switch on disabled",
            State::ReadyToSwitchOn => "Ready to switch on",
            State::SwitchedOn => "Switched on",
            State::OperationEnabled => "Operation enabled",
            State::QuickStopActive => "Quick stop active",
            State::FaultReactionActive => "Fault reaction active",
            State::Fault => "Fault",
        })
    }
}

/// A device control command (CiA 402-2 Table "Command coding"), as controlword bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Command {
    /// `0xxx x110`: 0x0006 (transitions 2, 6, 8).
    Shutdown,
    /// `0xxx 0111`: 0x0007 (transition 3). Same bits as disable operation.
    SwitchOn,
    /// `0xxx 1111`: 0x000F (transitions 3 + 4 from ready to switch on).
    SwitchOnEnableOperation,
    /// `0xxx xx0x`: 0x0000 (transitions 7, 9, 10, 12).
    DisableVoltage,
    /// `0xxx x01x`: 0x0002 (transitions 7, 10, 11).
    QuickStop,
    /// `0xxx 0111`: 0x0007 (transition 5).
    DisableOperation,
    /// `0xxx 1111`: 0x000F (transitions 4, 16).
    EnableOperation,
    /// Bit 7 rising (`0 → 1`, 0x0080): transition 15.
    FaultReset,
}

impl Command {
    /// The controlword bits 0–3 and 7 of the command (the rest are the mode's).
    pub fn controlword(self) -> u16 {
        match self {
            Command::Shutdown => 0x0006,
            Command::SwitchOn | Command::DisableOperation => 0x0007,
            Command::SwitchOnEnableOperation | Command::EnableOperation => 0x000F,
            Command::DisableVoltage => 0x0000,
            Command::QuickStop => 0x0002,
            Command::FaultReset => 0x0080,
        }
    }
}

/// The transition the drive makes in `state` on controlword `cw` (`prev`: the
/// controlword before it, for the fault reset's rising edge): its number in the
/// standard's table and the state it leads to, or `None` when the command does nothing
/// there. Transitions 0, 1 (start-up), 13 and 14 (a fault) are the drive's own, not a
/// command's; 16 (quick stop → operation enabled) is taken, as for quick stop option
/// codes 5–8.
pub fn transition(state: State, prev: u16, cw: u16) -> Option<(u8, State)> {
    use State::*;
    let b = |n: u16| cw & (1 << n) != 0;
    // The command coding, in the order of the table (bit 7 first: a set bit 7 with no
    // rising edge is no command of bits 0–3 in Fault, but is elsewhere "don't care").
    let rising7 = b(7) && prev & 0x80 == 0;
    let disable_voltage = !b(1);
    let quick_stop = b(1) && !b(2);
    let shutdown = b(1) && b(2) && !b(0);
    let on = b(0) && b(1) && b(2);
    let enable = on && b(3);
    match state {
        Fault => rising7.then_some((15, SwitchOnDisabled)),
        NotReadyToSwitchOn | FaultReactionActive => None,
        SwitchOnDisabled => shutdown.then_some((2, ReadyToSwitchOn)),
        ReadyToSwitchOn if disable_voltage || quick_stop => Some((7, SwitchOnDisabled)),
        ReadyToSwitchOn => on.then_some((3, SwitchedOn)),
        SwitchedOn if disable_voltage || quick_stop => Some((10, SwitchOnDisabled)),
        SwitchedOn if shutdown => Some((6, ReadyToSwitchOn)),
        SwitchedOn => enable.then_some((4, OperationEnabled)),
        OperationEnabled if disable_voltage => Some((9, SwitchOnDisabled)),
        OperationEnabled if quick_stop => Some((11, QuickStopActive)),
        OperationEnabled if shutdown => Some((8, ReadyToSwitchOn)),
        OperationEnabled => (on && !b(3)).then_some((5, SwitchedOn)),
        QuickStopActive if disable_voltage => Some((12, SwitchOnDisabled)),
        QuickStopActive => enable.then_some((16, OperationEnabled)),
    }
}

/// Where the driver drives the state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Goal {
    /// Operation enabled (the `enable` service).
    OperationEnabled,
    /// Switch on disabled (the `disable` service): the power stage off.
    SwitchOnDisabled,
    /// Quick stop active, or switch on disabled for a drive that was not enabled.
    QuickStop,
    /// Out of Fault (the `fault_reset` service): switch on disabled.
    FaultReset,
}

/// What to do next toward a goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Next {
    /// The goal is reached.
    Done,
    /// Send this command.
    Send(Command),
    /// Wait: the drive moves by itself (not ready to switch on, fault reaction).
    Wait,
    /// The goal cannot be reached from here by a command (enable in Fault: a fault
    /// reset is the operator's decision, never the driver's own).
    Stuck,
}

/// The next command from `state` toward `goal` (one transition of the standard's table).
pub fn next(state: State, goal: Goal) -> Next {
    use State::*;
    match (goal, state) {
        (_, NotReadyToSwitchOn | FaultReactionActive) => Next::Wait,
        (Goal::OperationEnabled, OperationEnabled) => Next::Done,
        (Goal::OperationEnabled, SwitchOnDisabled) => Next::Send(Command::Shutdown),
        (Goal::OperationEnabled, ReadyToSwitchOn) => Next::Send(Command::SwitchOn),
        (Goal::OperationEnabled, SwitchedOn) => Next::Send(Command::EnableOperation),
        // 12, then up again: transition 16 is optional (quick stop option codes 5–8).
        (Goal::OperationEnabled, QuickStopActive) => Next::Send(Command::DisableVoltage),
        (Goal::OperationEnabled, Fault) => Next::Stuck,
        (Goal::SwitchOnDisabled | Goal::FaultReset, SwitchOnDisabled) => Next::Done,
        (Goal::SwitchOnDisabled, Fault) => Next::Done,
        (Goal::SwitchOnDisabled, _) => Next::Send(Command::DisableVoltage),
        (Goal::QuickStop, QuickStopActive | SwitchOnDisabled | Fault) => Next::Done,
        (Goal::QuickStop, _) => Next::Send(Command::QuickStop),
        (Goal::FaultReset, Fault) => Next::Send(Command::FaultReset),
        (Goal::FaultReset, _) => Next::Done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use State::*;

    /// Statusword vectors, CiA 402-2 Table "Statusword bits" (bit 4 voltage enabled and
    /// the high bits varied: they are "x").
    #[test]
    fn statusword_patterns() {
        let v: &[(u16, State)] = &[
            (0x0000, NotReadyToSwitchOn),
            (0x0020, NotReadyToSwitchOn),
            (0x0250, SwitchOnDisabled),
            (0x0040, SwitchOnDisabled),
            (0x0021, ReadyToSwitchOn),
            (0x0231, ReadyToSwitchOn),
            (0x0233, SwitchedOn),
            (0x0237, OperationEnabled),
            (0x1637, OperationEnabled),
            (0x0017, QuickStopActive),
            (0x0007, QuickStopActive),
            (0x001F, FaultReactionActive),
            (0x002F, FaultReactionActive),
            (0x0008, Fault),
            (0x0218, Fault),
        ];
        for &(sw, s) in v {
            assert_eq!(State::of(sw), Some(s), "{sw:#06X}");
        }
        assert_eq!(State::of(0x0041), None, "bit 6 with bit 0: no state");
        for s in State::ALL {
            assert_eq!(State::of(s.statusword()), Some(s), "{s}");
        }
        assert_eq!(Fault.code(), 7);
        assert_eq!(OperationEnabled.code(), 4);
    }

    /// Every commanded transition of CiA 402-2's table: (number, from, controlword,
    /// to), the controlwords from Table "Command coding".
    #[test]
    fn the_standards_transitions() {
        let v: &[(u8, State, u16, State)] = &[
            (2, SwitchOnDisabled, 0x0006, ReadyToSwitchOn),
            (3, ReadyToSwitchOn, 0x0007, SwitchedOn),
            (4, SwitchedOn, 0x000F, OperationEnabled),
            (5, OperationEnabled, 0x0007, SwitchedOn),
            (6, SwitchedOn, 0x0006, ReadyToSwitchOn),
            (7, ReadyToSwitchOn, 0x0000, SwitchOnDisabled),
            (7, ReadyToSwitchOn, 0x0002, SwitchOnDisabled),
            (8, OperationEnabled, 0x0006, ReadyToSwitchOn),
            (9, OperationEnabled, 0x0000, SwitchOnDisabled),
            (10, SwitchedOn, 0x0000, SwitchOnDisabled),
            (10, SwitchedOn, 0x0002, SwitchOnDisabled),
            (11, OperationEnabled, 0x0002, QuickStopActive),
            (12, QuickStopActive, 0x0000, SwitchOnDisabled),
            (15, Fault, 0x0080, SwitchOnDisabled),
            (16, QuickStopActive, 0x000F, OperationEnabled),
        ];
        for &(n, from, cw, to) in v {
            assert_eq!(transition(from, 0, cw), Some((n, to)), "transition {n}");
        }
        // Bit 7 held high is no fault reset: only its rising edge is.
        assert_eq!(transition(Fault, 0x0080, 0x0080), None);
        // Nothing moves a drive in fault reaction, and enable operation is no command in
        // switch on disabled.
        assert_eq!(transition(FaultReactionActive, 0, 0x0080), None);
        assert_eq!(transition(SwitchOnDisabled, 0, 0x000F), None);
    }

    #[test]
    fn the_way_to_each_goal() {
        // Enable: 2, 3, 4.
        assert_eq!(
            next(SwitchOnDisabled, Goal::OperationEnabled),
            Next::Send(Command::Shutdown)
        );
        assert_eq!(Command::Shutdown.controlword(), 0x0006);
        assert_eq!(
            next(ReadyToSwitchOn, Goal::OperationEnabled),
            Next::Send(Command::SwitchOn)
        );
        assert_eq!(
            next(SwitchedOn, Goal::OperationEnabled),
            Next::Send(Command::EnableOperation)
        );
        assert_eq!(Command::EnableOperation.controlword(), 0x000F);
        assert_eq!(next(OperationEnabled, Goal::OperationEnabled), Next::Done);
        assert_eq!(next(Fault, Goal::OperationEnabled), Next::Stuck);
        assert_eq!(
            next(OperationEnabled, Goal::QuickStop),
            Next::Send(Command::QuickStop)
        );
        assert_eq!(Command::QuickStop.controlword(), 0x0002);
        assert_eq!(
            next(OperationEnabled, Goal::SwitchOnDisabled),
            Next::Send(Command::DisableVoltage)
        );
        assert_eq!(
            next(Fault, Goal::FaultReset),
            Next::Send(Command::FaultReset)
        );
        assert_eq!(Command::FaultReset.controlword(), 0x0080);
        assert_eq!(next(FaultReactionActive, Goal::FaultReset), Next::Wait);
    }
}
