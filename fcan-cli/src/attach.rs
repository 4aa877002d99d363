//! Finding the bus owner: whether a command attaches to an fcan daemon (`fcan serve`)
//! over Zenoh or runs a one-shot master of its own.
//!
//! - `--connect EP` (or `FCAN_CONNECT`): that daemon or a clear error, never a fallback
//!   (the user asked for that daemon; a master of our own would fight it for the bus).
//! - `--no-daemon`: a one-shot master, as before daemons existed.
//! - neither: the local daemon at [`LOCAL_DAEMON`] if it answers within a short bound and
//!   serves the bus; otherwise a one-shot master, with a note on stderr saying so.
//!
//! Sessions are Zenoh *clients* with scouting off: they reach exactly the endpoint named,
//! never the network at large.

use std::time::Duration;

use fcan_master::MasterError;
use zenoh::Session;

use crate::CliError;

/// Where `fcan` looks for a daemon when not told: the daemon's default listening
/// endpoint (Zenoh's usual port, loopback only).
pub const LOCAL_DAEMON: &str = "tcp/127.0.0.1:7447";

/// The bus a command runs on when `--bus` is not given and no daemon serves exactly one.
pub const DEFAULT_BUS: &str = "socketcan:can0";

/// How long the default probe of [`LOCAL_DAEMON`] may take to connect. On loopback a
/// refused connection returns at once; the bound is for a port held by something that
/// accepts and never speaks.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// How long an explicit `--connect` may take to connect: a remote machine may be a few
/// round trips away.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a daemon that accepted the connection has to say which buses it serves. A
/// healthy one answers in about a millisecond (the query ends when every daemon has
/// replied, not at this bound); a slow machine (a debug build in an emulated VM took
/// more than half a second) must not be mistaken for no daemon at all: a one-shot
/// master would then start beside the daemon and be refused the bus.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// The bus a `--bus` argument names, as `fcan serve` names it (`docs/remote.md`), and
/// the transport spec a one-shot master opens: `socketcan:can0` → `can0`, `sim` /
/// `sim:classic` → `sim`, `arm=socketcan:can1` → `arm` (the daemon's own name for it);
/// a bare key-safe name (`can0`) names a daemon's bus (only a daemon can serve it: a
/// one-shot master then rejects it as a spec).
///
/// ```
/// use fcan_cli::attach::bus_name;
/// assert_eq!(bus_name("socketcan:vcan0").unwrap().0, "vcan0");
/// assert_eq!(bus_name("sim:classic").unwrap().0, "sim");
/// assert_eq!(bus_name("arm=socketcan:can1").unwrap(), ("arm".into(), "socketcan:can1".into()));
/// assert_eq!(bus_name("can0").unwrap().0, "can0");
/// assert!(bus_name("socketcan").is_err());
/// ```
pub fn bus_name(arg: &str) -> Result<(String, String), CliError> {
    let spec = crate::serve::split_name(arg).1;
    if matches!(spec, "socketcan" | "socketcan:" | "replay" | "replay:" | "") {
        // The transport's own words for a spec that names no bus.
        return Err(match fcan_master::transport::open(spec, None) {
            Err(e) => MasterError::from(e).into(),
            Ok(_) => CliError::Usage(format!("`{spec}` names no bus")),
        });
    }
    crate::serve::bus_name(arg)
}

/// A daemon reached: its session and the buses it serves.
pub(crate) struct Daemon {
    pub session: Session,
    pub endpoint: String,
    pub buses: Vec<String>,
}

/// Opens a Zenoh client session to `endpoint` within `bound`, then asks which buses are
/// served there (within [`ASK_TIMEOUT`]). The error says why, for people.
pub(crate) async fn reach(endpoint: &str, bound: Duration) -> Result<Daemon, String> {
    let session = match tokio::time::timeout(bound, open(endpoint)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(format!("no answer within {} ms", bound.as_millis())),
    };
    let buses = fcan_remote::client::buses(&session, ASK_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Daemon {
        session,
        endpoint: endpoint.to_string(),
        buses,
    })
}

/// A client session to exactly `endpoint`: no scouting of any kind, one connection
/// attempt (Zenoh's client default), failing if it does not connect.
async fn open(endpoint: &str) -> Result<Session, String> {
    let mut c = zenoh::Config::default();
    let set = |c: &mut zenoh::Config, k: &str, v: &str| {
        c.insert_json5(k, v)
            .map_err(|e| format!("zenoh config {k}: {e}"))
    };
    set(&mut c, "mode", "\"client\"")?;
    let ep = serde_json::to_string(&[endpoint]).map_err(|e| e.to_string())?;
    set(&mut c, "connect/endpoints", &ep)?;
    set(&mut c, "scouting/multicast/enabled", "false")?;
    set(&mut c, "scouting/gossip/enabled", "false")?;
    // No admin space, no timestamps to sync: a CLI session is short-lived.
    zenoh::open(c).await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_names_as_the_daemon_gives_them() {
        let name = |a: &str| bus_name(a).map(|(n, _)| n);
        assert_eq!(name("socketcan:can0").unwrap(), "can0");
        assert_eq!(name("sim").unwrap(), "sim");
        assert_eq!(name("sim:fd").unwrap(), "sim");
        assert_eq!(name("replay:/tmp/run-1.log").unwrap(), "run-1");
        assert_eq!(name("vcan0").unwrap(), "vcan0");
        for bad in ["socketcan", "socketcan:", "x=socketcan"] {
            let e = name(bad).unwrap_err().to_string();
            assert!(e.contains("interface name"), "{bad}: {e}");
        }
        let e = name("socketcan:a.b").unwrap_err().to_string();
        assert!(e.contains("not key-safe"), "{e}");
        assert!(name("a*").is_err());
    }
}
