//! The one error model of a master, in-process and remote: [`MasterError`] says what
//! went wrong (typed where a caller acts on the difference), [`ErrorKind`] says what
//! kind of failure it is, the same over [`Master`](crate::Master) and over the remote
//! client. The remote API's wire spells the kinds ([`ErrorKind::as_str`],
//! [`ErrorKind::from_wire`]); the classification is here, once.

use std::time::Duration;

use crate::engine::{CallError, UpdateError};
use crate::registry::UnknownName;
use crate::transport::TransportError;
use crate::value::ValueError;

/// What kind of failure a [`MasterError`] is: what an application matches on to decide
/// what to do (retry later, fix the name, give up), the same whether the master runs in
/// this process or behind the remote API.
///
/// ```
/// use fcan_master::{ErrorKind, MasterError};
/// fn retry_later(e: &MasterError) -> bool {
///     matches!(e.kind(), ErrorKind::Busy | ErrorKind::Timeout | ErrorKind::NotRunning)
/// }
/// let e = MasterError::Remote { kind: ErrorKind::Busy, message: "too many".into() };
/// assert!(retry_later(&e));
/// assert!(!retry_later(&MasterError::Stopped));
/// // The wire spelling, both ways; a spelling this version does not know is not lost.
/// assert_eq!(ErrorKind::NotRunning.as_str(), "not_running");
/// assert_eq!(ErrorKind::from_wire("busy"), ErrorKind::Busy);
/// assert_eq!(ErrorKind::from_wire("on_fire"), ErrorKind::Unrecognized);
/// ```
///
/// Non-exhaustive: new failures bring new kinds, so a `match` keeps a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No such topic, service, parameter, node or schema (`unknown_name`).
    UnknownName,
    /// The value does not fit: type, range, NaN, a bad image (`bad_value`).
    BadValue,
    /// The node is known but not running, went away while asked, or its phase does not
    /// allow what was asked: asked again later it may succeed (`not_running`).
    NotRunning,
    /// No answer in time: from the node, or from the nodes waited for (`timeout`).
    Timeout,
    /// The node (or the service) said no (`refused`).
    Refused,
    /// Too many requests in flight, or commands already wait for the bus: asked again
    /// later it may succeed (`busy`).
    Busy,
    /// No remote master (daemon) answered: the network or the daemon is down
    /// (`unreachable`; a remote client's own).
    Unreachable,
    /// The master has stopped (its task ended: the link failed, or it left the bus);
    /// every later request fails the same (`stopped`).
    Stopped,
    /// Another master owns the bus: this one did not start (`other_master`).
    OtherMaster,
    /// The link to the bus failed (`transport`).
    Transport,
    /// Anything else (`internal`).
    Internal,
    /// A kind this version does not know, spelled by a newer remote master: the error's
    /// message says which (`unrecognized` when spelled again).
    Unrecognized,
}

impl ErrorKind {
    /// Every kind, in declaration order (for tests and tables).
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::UnknownName,
        ErrorKind::BadValue,
        ErrorKind::NotRunning,
        ErrorKind::Timeout,
        ErrorKind::Refused,
        ErrorKind::Busy,
        ErrorKind::Unreachable,
        ErrorKind::Stopped,
        ErrorKind::OtherMaster,
        ErrorKind::Transport,
        ErrorKind::Internal,
        ErrorKind::Unrecognized,
    ];

    /// The kind as the remote API's wire spells it (`unknown_name`, `busy`, …;
    /// `docs/remote.md`, "Replies and errors").
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::UnknownName => "unknown_name",
            ErrorKind::BadValue => "bad_value",
            ErrorKind::NotRunning => "not_running",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Refused => "refused",
            ErrorKind::Busy => "busy",
            ErrorKind::Unreachable => "unreachable",
            ErrorKind::Stopped => "stopped",
            ErrorKind::OtherMaster => "other_master",
            ErrorKind::Transport => "transport",
            ErrorKind::Internal => "internal",
            ErrorKind::Unrecognized => "unrecognized",
        }
    }

    /// The kind a wire spelling names; a spelling this version does not know (a newer
    /// daemon's) is [`ErrorKind::Unrecognized`], never a panic or a guess.
    pub fn from_wire(s: &str) -> ErrorKind {
        ErrorKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .unwrap_or(ErrorKind::Unrecognized)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a master could not start or a request failed.
///
/// [`kind`](MasterError::kind) classifies every variant; an application that only
/// needs to know what to do next matches the kind, which is the same over the remote
/// client (whose errors come as [`MasterError::Remote`]).
///
/// Non-exhaustive (new features bring new failures): a match outside this crate keeps a
/// catch-all arm. One that lists every variant does not compile:
///
/// ```compile_fail,E0004
/// use fcan_master::MasterError;
/// fn retry(e: &MasterError) -> bool {
///     match e {
///         MasterError::OtherMaster { .. } => false,
///         MasterError::Transport(_) => true,
///         MasterError::Unknown(_) => false,
///         MasterError::Value(_) => false,
///         MasterError::Call(_) => true,
///         MasterError::Update(_) => true,
///         MasterError::NotEnoughNodes { .. } => true,
///         MasterError::Stopped => false,
///         MasterError::Remote { .. } => true,
///     }
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MasterError {
    /// Another master owns this bus.
    #[error("another fcan master (session {session:#010x}) is already running on this bus; two masters would fight over the nodes — stop the other one first")]
    OtherMaster {
        /// Its session id.
        session: u32,
    },
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// No such name.
    #[error(transparent)]
    Unknown(#[from] UnknownName),
    /// A value does not fit.
    #[error("bad value: {0}")]
    Value(#[from] ValueError),
    /// The request failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// A firmware update did not start or did not finish.
    #[error(transparent)]
    Update(#[from] UpdateError),
    /// Nodes did not show up in time.
    #[error("only {found} of {wanted} node(s) online after {waited:?}")]
    NotEnoughNodes {
        /// Online.
        found: usize,
        /// Wanted.
        wanted: usize,
        /// How long we waited.
        waited: Duration,
    },
    /// The master task stopped.
    #[error("the master has stopped")]
    Stopped,
    /// A remote master (the bus-owner daemon, reached by `fcan-remote`) or the network
    /// to it failed the request: the kind the daemon classified it as (the same a local
    /// master's error has), or [`ErrorKind::Unreachable`] when no daemon answered.
    #[error("{kind}: {}", crate::text::Untrusted(.message))]
    Remote {
        /// The error kind.
        kind: ErrorKind,
        /// The message for people (from the daemon: untrusted text).
        message: String,
    },
}

impl MasterError {
    /// What kind of failure this is: the one classification, used by the remote API's
    /// server to spell its replies, so a `match` on it works the same in-process and
    /// remote.
    pub fn kind(&self) -> ErrorKind {
        match self {
            MasterError::OtherMaster { .. } => ErrorKind::OtherMaster,
            MasterError::Transport(_) => ErrorKind::Transport,
            MasterError::Unknown(_) => ErrorKind::UnknownName,
            MasterError::Value(_) => ErrorKind::BadValue,
            MasterError::Call(c) => call_kind(c),
            MasterError::Update(u) => update_kind(u),
            MasterError::NotEnoughNodes { .. } => ErrorKind::Timeout,
            MasterError::Stopped => ErrorKind::Stopped,
            MasterError::Remote { kind, .. } => *kind,
        }
    }
}

/// Exhaustive on purpose (this crate sees every variant): a new `CallError` does not
/// compile until it is classified.
fn call_kind(c: &CallError) -> ErrorKind {
    match c {
        CallError::NodeNotOnline(_) | CallError::NodeLost(_) | CallError::WrongPhase(_) => {
            ErrorKind::NotRunning
        }
        CallError::BadTarget(_) => ErrorKind::UnknownName,
        CallError::BadValue(_) => ErrorKind::BadValue,
        CallError::Refused(_) | CallError::Status(_) => ErrorKind::Refused,
        CallError::Timeout(_) => ErrorKind::Timeout,
        CallError::TooManyRequests { .. } | CallError::Busy { .. } => ErrorKind::Busy,
    }
}

/// Exhaustive on purpose, as [`call_kind`].
fn update_kind(u: &UpdateError) -> ErrorKind {
    match u {
        UpdateError::NodeNotOnline(_) => ErrorKind::NotRunning,
        UpdateError::Busy(_) => ErrorKind::Busy,
        UpdateError::BadImage(_) => ErrorKind::BadValue,
        UpdateError::Silent(_) | UpdateError::NotBack(_) => ErrorKind::Timeout,
        UpdateError::NotSupported(_)
        | UpdateError::WrongBoard { .. }
        | UpdateError::Refused { .. }
        | UpdateError::Aborted(_) => ErrorKind::Refused,
        // The node verified or booted, but not as it should: neither the caller's
        // mistake nor worth a plain retry.
        UpdateError::NotVerified(_)
        | UpdateError::Provisioning { .. }
        | UpdateError::NotBooted(_) => ErrorKind::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_spelling() {
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_wire(k.as_str()), k, "{k}");
        }
        assert_eq!(ErrorKind::from_wire(""), ErrorKind::Unrecognized);
        assert_eq!(ErrorKind::from_wire("BUSY"), ErrorKind::Unrecognized);
    }

    #[test]
    fn remote_errors_keep_their_display() {
        let e = MasterError::Remote {
            kind: ErrorKind::Timeout,
            message: "no answer".into(),
        };
        assert_eq!(e.to_string(), "timeout: no answer");
        assert_eq!(e.kind(), ErrorKind::Timeout);
    }

    #[test]
    fn in_process_errors_are_classified() {
        let n = fcan_core::id::NodeId::new(3).unwrap();
        let cases = [
            (MasterError::Call(CallError::Timeout(n)), ErrorKind::Timeout),
            (
                MasterError::Call(CallError::NodeNotOnline(n)),
                ErrorKind::NotRunning,
            ),
            (
                MasterError::Call(CallError::Busy {
                    node: n,
                    waiting_us: 2,
                    limit_us: 1,
                }),
                ErrorKind::Busy,
            ),
            (MasterError::Stopped, ErrorKind::Stopped),
            (
                MasterError::NotEnoughNodes {
                    found: 0,
                    wanted: 1,
                    waited: Duration::ZERO,
                },
                ErrorKind::Timeout,
            ),
            (MasterError::Update(UpdateError::Busy(n)), ErrorKind::Busy),
        ];
        for (e, k) in cases {
            assert_eq!(e.kind(), k, "{e}");
        }
    }
}
