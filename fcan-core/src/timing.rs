//! Protocol timing: the periods and timeouts both sides rely on (`docs/protocol.md` §5).
//! All in microseconds unless the name says otherwise.

/// A node stays silent this long after boot, listening for another node with its id.
pub const LISTEN_WINDOW_US: u32 = 300_000;
/// Up to this much extra listening, drawn from `boot_id`, so boards powered together do
/// not announce in lockstep.
pub const LISTEN_JITTER_US: u32 = 100_000;
/// First ANNOUNCE retry interval; doubles on every unanswered ANNOUNCE.
pub const ANNOUNCE_BACKOFF_MIN_US: u32 = 100_000;
/// Longest ANNOUNCE retry interval.
pub const ANNOUNCE_BACKOFF_MAX_US: u32 = 2_000_000;
/// A node sends HEARTBEAT this often once acknowledged.
pub const NODE_HEARTBEAT_PERIOD_US: u32 = 1_000_000;
/// The master sends HEARTBEAT this often: four times per default master-lost timeout,
/// so a node survives two heartbeats lost in a row (a 225 ms gap) and still stops
/// 300 ms after its master died. At 100 ms two losses left a 300 ms gap, and with the
/// bus's jitter 1 % loss suspended nodes several times an hour (docs/protocol.md §5).
/// The node does not know this period; only the master uses it.
pub const MASTER_HEARTBEAT_PERIOD_US: u32 = 75_000;
/// Master-lost timeout a master sends in START by default (0 would disable it).
pub const DEFAULT_MASTER_TIMEOUT_MS: u16 = 300;
/// The master marks a node offline after this long without any frame from it.
pub const NODE_OFFLINE_TIMEOUT_US: u32 = 3 * NODE_HEARTBEAT_PERIOD_US;
/// Default time a master waits for a service response (restarted by ACCEPTED).
pub const SERVICE_TIMEOUT_MS: u32 = 1_500;
/// A node gives up a deferred service call (its handler answered ACCEPTED) that the
/// application has not completed this long after accepting it, or after the master's
/// last repeat of the request: it answers EXPIRED and frees the slot, so a forgotten
/// call cannot hold a slot forever. Shorter than [`SERVICE_TIMEOUT_MS`], so a master
/// still waiting hears why the call ended.
pub const DEFERRED_SERVICE_TIMEOUT_US: u32 = 1_000_000;
/// Time a master waits for the RESULT of a configuration command before retrying.
pub const COMMAND_TIMEOUT_MS: u32 = 100;

/// Whether the wrapping microsecond clock has reached `deadline`: true when `now` is at
/// or past it, for deadlines less than 2^31 µs (~35 min) ahead.
///
/// ```
/// use fcan_core::timing::reached;
/// assert!(reached(100, 100));
/// assert!(!reached(99, 100));
/// assert!(reached(5, u32::MAX - 5)); // the clock wrapped
/// ```
pub const fn reached(now: u32, deadline: u32) -> bool {
    At(now).reached(At(deadline))
}

/// An instant on a node's wrapping 32-bit microsecond clock (it wraps every ~71.6 min).
///
/// Instants have no order of their own, only relative to each other within 2^31 µs:
/// compare them with [`At::reached`] and [`At::since`], never with `<` (so `At` is
/// deliberately not `PartialOrd`). Here rather than in the node runtime because the
/// rule is the protocol's ([`reached`], [`MAX_PERIOD_US`]) and every user of that clock
/// (the runtime, the reassembly pool, firmware loops) should share one definition; the
/// master has a real clock (`std::time::Instant`) and needs none of this.
///
/// ```
/// use fcan_core::timing::{At, Us};
/// let t = At(u32::MAX - 5);
/// let due = t + Us(10); // wraps
/// assert_eq!(due, At(4));
/// assert!(!t.reached(due) && (t + Us(10)).reached(due));
/// assert_eq!(At(4).since(t), Us(10));
/// assert_eq!(t.until(due), Us(10));
/// assert_eq!(due.until(t), Us(0)); // already past
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct At(pub u32);

/// A span of microseconds (a period, a timeout, a back-off).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Us(pub u32);

impl At {
    /// Whether this instant is at or past `deadline`, for deadlines less than 2^31 µs
    /// (~35 min) ahead.
    pub const fn reached(self, deadline: At) -> bool {
        (self.0.wrapping_sub(deadline.0) as i32) >= 0
    }

    /// Time elapsed since `earlier` (wrapping: `earlier` is taken to be in the past).
    pub const fn since(self, earlier: At) -> Us {
        Us(self.0.wrapping_sub(earlier.0))
    }

    /// Time left until `deadline`: zero once it is [reached](At::reached).
    pub const fn until(self, deadline: At) -> Us {
        let ahead = deadline.0.wrapping_sub(self.0) as i32;
        Us(if ahead > 0 { ahead as u32 } else { 0 })
    }

    /// `d` later, on the wrapping clock.
    pub const fn after(self, d: Us) -> At {
        At(self.0.wrapping_add(d.0))
    }
}

impl core::ops::Add<Us> for At {
    type Output = At;
    fn add(self, d: Us) -> At {
        self.after(d)
    }
}

impl Us {
    /// `ms` milliseconds.
    pub const fn from_ms(ms: u16) -> Us {
        Us(ms as u32 * 1000)
    }
}

/// The longest s2m period a node accepts (2^31 − 1 µs, about 35.8 minutes): deadlines
/// are compared on the wrapping 32-bit clock with [`reached`], which only tells "past"
/// from "future" for deadlines less than 2^31 µs ahead. A longer period would look
/// already reached and send the frame on every poll, so schema validation refuses it
/// and a node NAKs a FRAME_DEFINE carrying it (BAD_PLAN).
pub const MAX_PERIOD_US: u32 = i32::MAX as u32;

/// Whether an s2m frame period is one a node can schedule: `0` (on commit) or at most
/// [`MAX_PERIOD_US`].
///
/// ```
/// use fcan_core::timing::{period_ok, MAX_PERIOD_US};
/// assert!(period_ok(0) && period_ok(MAX_PERIOD_US));
/// assert!(!period_ok(MAX_PERIOD_US + 1));
/// ```
pub const fn period_ok(period_us: u32) -> bool {
    period_us <= MAX_PERIOD_US
}
