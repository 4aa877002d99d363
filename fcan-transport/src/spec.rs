//! Opening a transport from a spec string, as a command line gives it.
//!
//! | spec | transport |
//! |---|---|
//! | `socketcan:IFACE` | [`SocketCanTransport`] on `IFACE` (Linux) |
//! | `sim` | an FD endpoint on the [`SimBus`] the caller passes |
//! | `sim:classic`, `sim:fd` | a Classical-CAN-only / FD endpoint on that bus |
//! | `replay:FILE` | [`ReplayTransport`] of the candump log `FILE`, as fast as asked |

use fcan_core::frame::{Frame, Mtu};

use super::replay::{ReplayOptions, ReplayTransport};
use super::sim::{SimBus, SimEndpoint};
#[cfg(target_os = "linux")]
use super::socketcan::SocketCanTransport;
use super::{Received, Transport, TransportError};

/// Any transport [`open`] can build.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyTransport {
    /// `socketcan:IFACE`.
    #[cfg(target_os = "linux")]
    SocketCan(SocketCanTransport),
    /// `sim`, `sim:classic`, `sim:fd`.
    Sim(SimEndpoint),
    /// `replay:FILE`.
    Replay(ReplayTransport),
}

/// Opens the transport `spec` names (see the [table](self)); `sim` is the bus `sim` specs
/// attach to. Call inside a tokio runtime.
///
/// ```
/// use fcan_transport::{open, TransportError};
/// let err = open("can0", None).unwrap_err();
/// assert!(matches!(err, TransportError::InvalidSpec { .. }));
/// assert!(err.to_string().contains("socketcan:IFACE"));
/// ```
pub fn open(spec: &str, sim: Option<&SimBus>) -> Result<AnyTransport, TransportError> {
    let bad = |reason: &str| TransportError::InvalidSpec {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let (kind, arg) = match spec.split_once(':') {
        Some((k, a)) => (k, Some(a)),
        None => (spec, None),
    };
    match (kind, arg) {
        ("socketcan", Some(iface)) if !iface.is_empty() => {
            #[cfg(target_os = "linux")]
            {
                SocketCanTransport::open(iface).map(AnyTransport::SocketCan)
            }
            #[cfg(not(target_os = "linux"))]
            {
                Err(bad("SocketCAN exists on Linux only"))
            }
        }
        ("socketcan", _) => Err(bad(
            "`socketcan` needs an interface name, e.g. `socketcan:can0`",
        )),
        ("sim", arg) => {
            let mtu = match arg {
                None | Some("fd") => Mtu::Fd,
                Some("classic") => Mtu::Classic,
                Some(other) => {
                    return Err(bad(&format!(
                        "unknown sim option `{other}` (use `sim`, `sim:fd` or `sim:classic`)"
                    )))
                }
            };
            let bus = sim.ok_or_else(|| bad("`sim` needs a simulated bus, and none was given"))?;
            Ok(AnyTransport::Sim(bus.endpoint(mtu)))
        }
        ("replay", Some(path)) if !path.is_empty() => {
            ReplayTransport::open(path, ReplayOptions::default()).map(AnyTransport::Replay)
        }
        ("replay", _) => Err(bad("`replay` needs a file, e.g. `replay:bus.log`")),
        ("", _) => Err(bad("empty spec")),
        (other, _) => Err(bad(&format!("unknown transport kind `{other}`"))),
    }
}

impl Transport for AnyTransport {
    fn name(&self) -> &str {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.name(),
            AnyTransport::Sim(t) => t.name(),
            AnyTransport::Replay(t) => t.name(),
        }
    }

    fn mtu(&self) -> Mtu {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.mtu(),
            AnyTransport::Sim(t) => t.mtu(),
            AnyTransport::Replay(t) => t.mtu(),
        }
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.send(frame).await,
            AnyTransport::Sim(t) => t.send(frame).await,
            AnyTransport::Replay(t) => t.send(frame).await,
        }
    }

    async fn send_batch(&mut self, frames: &[Frame]) -> Result<usize, TransportError> {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.send_batch(frames).await,
            AnyTransport::Sim(t) => t.send_batch(frames).await,
            AnyTransport::Replay(t) => t.send_batch(frames).await,
        }
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.recv().await,
            AnyTransport::Sim(t) => t.recv().await,
            AnyTransport::Replay(t) => t.recv().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(spec: &str, bus: Option<&SimBus>) -> String {
        match open(spec, bus) {
            Err(e @ TransportError::InvalidSpec { .. }) => e.to_string(),
            other => panic!("{spec}: {other:?}"),
        }
    }

    #[tokio::test]
    async fn specs() {
        let bus = SimBus::new(Default::default());
        assert!(matches!(open("sim", Some(&bus)), Ok(AnyTransport::Sim(t)) if t.mtu() == Mtu::Fd));
        assert!(
            matches!(open("sim:classic", Some(&bus)), Ok(AnyTransport::Sim(t)) if t.mtu() == Mtu::Classic)
        );
        assert!(reason("sim", None).contains("needs a simulated bus"));
        assert!(reason("sim:xl", Some(&bus)).contains("unknown sim option `xl`"));
        assert!(reason("socketcan", None).contains("needs an interface name"));
        assert!(reason("socketcan:", None).contains("needs an interface name"));
        assert!(reason("can0", None).contains("unknown transport kind `can0`"));
        assert!(reason("", None).contains("empty spec"));
        assert!(reason("replay:", None).contains("needs a file"));
        // every spec error lists what is accepted
        assert!(reason("x", None).contains("accepted: `socketcan:IFACE`, `sim`"));
        #[cfg(target_os = "linux")]
        assert!(matches!(
            open("socketcan:fcan-nosuch0", None),
            Err(TransportError::NoSuchInterface(n)) if n == "fcan-nosuch0"
        ));
        assert!(matches!(
            open("replay:/nonexistent/fcan.log", None),
            Err(TransportError::Io(e)) if e.to_string().contains("/nonexistent/fcan.log")
        ));
    }
}
