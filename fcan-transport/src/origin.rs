//! What presents a node on a link when it is not an fcan board: [`NodeOrigin`], which
//! the master shows in node info (`fcan nodes`: `driver: robstride, watchdog 200 ms`).
//!
//! It lives here, beside [`Transport::node_origin`](crate::Transport::node_origin),
//! because the layer that presents devices (`fcan-drivers`' `DeviceLink`) is a link
//! layer and the master knows links only through [`Transport`](crate::Transport).

use core::fmt;
use core::str::FromStr;

/// A device presented as an fcan node by a driver on the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeOrigin {
    /// The driver's name (`robstride`, `mit`).
    pub driver: &'static str,
    /// The device's own command watchdog, as the driver arms it.
    pub watchdog: DeviceWatchdog,
}

/// A device's own command watchdog — the timer *in the device* that stops it when the
/// bus owner falls silent — as its driver arms it (docs/drivers.md, "When the PC dies").
///
/// ```
/// use fcan_transport::DeviceWatchdog;
/// let w = DeviceWatchdog::Armed { ms: 200 };
/// assert_eq!(w.to_string(), "200 ms");
/// assert_eq!("200 ms".parse::<DeviceWatchdog>(), Ok(w));
/// assert_eq!("off".parse::<DeviceWatchdog>(), Ok(DeviceWatchdog::Off));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceWatchdog {
    /// Written to the device before every enable and confirmed before the enable goes
    /// out: the device stops `ms` milliseconds after it last heard the bus owner.
    Armed {
        /// The timeout, ms.
        ms: u32,
    },
    /// Turned off on purpose (`watchdog=off`): the device keeps its last command when the
    /// bus owner dies. Written as off before every enable, and every such enable is
    /// logged as a warning.
    Off,
    /// The device has none the driver arms: only the host side (the cycle API's feedback
    /// timeout and safe stop, the bus owner itself) stops it.
    None,
}

impl DeviceWatchdog {
    /// Whether the device stops by itself when the bus owner dies.
    pub fn stops_device(self) -> bool {
        matches!(self, DeviceWatchdog::Armed { .. })
    }
}

impl fmt::Display for DeviceWatchdog {
    /// `200 ms`, `off`, `none`: what [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceWatchdog::Armed { ms } => write!(f, "{ms} ms"),
            DeviceWatchdog::Off => f.write_str("off"),
            DeviceWatchdog::None => f.write_str("none"),
        }
    }
}

impl FromStr for DeviceWatchdog {
    type Err = String;

    /// Reads [`Display`](fmt::Display)'s text back (a remote client reads node info as
    /// JSON from a daemon).
    fn from_str(s: &str) -> Result<DeviceWatchdog, String> {
        match s {
            "off" => Ok(DeviceWatchdog::Off),
            "none" => Ok(DeviceWatchdog::None),
            _ => s
                .strip_suffix(" ms")
                .and_then(|ms| ms.parse().ok())
                .filter(|&ms| ms > 0)
                .map(|ms| DeviceWatchdog::Armed { ms })
                .ok_or_else(|| format!("`{s}` is not a device watchdog (`200 ms`, `off`, `none`)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_watchdog_reads_back_and_junk_is_refused() {
        for w in [
            DeviceWatchdog::Armed { ms: 1 },
            DeviceWatchdog::Armed { ms: u32::MAX },
            DeviceWatchdog::Off,
            DeviceWatchdog::None,
        ] {
            assert_eq!(w.to_string().parse::<DeviceWatchdog>(), Ok(w));
        }
        for bad in ["", "0 ms", "200ms", "-1 ms", "on", "4294967296 ms"] {
            assert!(bad.parse::<DeviceWatchdog>().is_err(), "{bad}");
        }
    }
}
