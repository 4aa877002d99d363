//! Opening Zenoh sessions with the safe defaults of the key space (`docs/remote.md`):
//! TCP on loopback only, multicast and gossip scouting off.
//!
//! * A daemon ([`SessionConfig::daemon`]) is a Zenoh *router* listening on
//!   `tcp/127.0.0.1:7447`. If that port is already taken (a Zenoh router such as
//!   rmw_zenoh's, or another fcan daemon), it connects to whoever holds it instead of
//!   failing, and says so ([`Opened::joined`]): routers route between each other, so one
//!   client sees every daemon of the machine.
//! * A client ([`SessionConfig::client`]) is a Zenoh *peer* that listens nowhere and
//!   connects to `tcp/127.0.0.1:7447` (or the endpoints given): it can connect to several
//!   daemons at once.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fcan_remote::RemoteError> {
//! let opened = fcan_remote::session::SessionConfig::client().open().await?;
//! let session = opened.session;
//! # Ok(()) }
//! ```

use std::path::PathBuf;

use crate::RemoteError;

/// The endpoint a daemon listens on and a client connects to by default.
pub const DEFAULT_ENDPOINT: &str = "tcp/127.0.0.1:7447";

/// How to open a session.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct SessionConfig {
    /// Listen on these endpoints (`tcp/HOST:PORT`). Empty for a daemon: the default one,
    /// with the fallback to connecting when it is taken.
    pub listen: Vec<String>,
    /// Connect to these endpoints. Empty for a client: the default one.
    pub connect: Vec<String>,
    /// A Zenoh JSON5 configuration file (TLS, access control…) to start from; the
    /// options above and the scouting defaults are applied on top of it, unless the
    /// file sets scouting itself.
    pub zenoh_config: Option<PathBuf>,
    /// Daemon (router) or client (peer).
    pub daemon: bool,
}

/// A session's configuration, as [`SessionConfig::build`] makes it.
#[non_exhaustive]
pub struct Built {
    /// The Zenoh configuration.
    pub config: zenoh::Config,
    /// Where it will listen.
    pub listen: Vec<String>,
    /// Where it will connect.
    pub connect: Vec<String>,
    /// For a daemon: the default endpoint was taken, so it joins it.
    pub joined: Option<String>,
}

/// An open session and how it was opened.
#[non_exhaustive]
pub struct Opened {
    /// The session.
    pub session: zenoh::Session,
    /// Where it listens.
    pub listening: Vec<String>,
    /// Where it connected.
    pub connected: Vec<String>,
    /// For a daemon: the default port was taken, so it joined whoever holds it.
    pub joined: Option<String>,
}

fn zerr(e: impl std::fmt::Display) -> RemoteError {
    RemoteError::Zenoh(e.to_string())
}

fn json_list(v: &[String]) -> String {
    serde_json::to_string(v).expect("strings serialize")
}

/// Whether `tcp/HOST:PORT` can be bound now (a listener on it would succeed).
fn port_free(endpoint: &str) -> bool {
    match endpoint.strip_prefix("tcp/") {
        Some(addr) => std::net::TcpListener::bind(addr).is_ok(),
        None => true,
    }
}

impl SessionConfig {
    /// A daemon's defaults: listen on `tcp/127.0.0.1:7447`, or join its holder.
    pub fn daemon() -> SessionConfig {
        SessionConfig {
            daemon: true,
            ..Default::default()
        }
    }

    /// A client's defaults: connect to `tcp/127.0.0.1:7447`.
    pub fn client() -> SessionConfig {
        SessionConfig::default()
    }

    /// Sets the endpoints to listen on.
    pub fn listen(mut self, endpoints: impl IntoIterator<Item = String>) -> SessionConfig {
        self.listen = endpoints.into_iter().collect();
        self
    }

    /// Sets the endpoints to connect to.
    pub fn connect(mut self, endpoints: impl IntoIterator<Item = String>) -> SessionConfig {
        self.connect = endpoints.into_iter().collect();
        self
    }

    /// Sets a Zenoh configuration file to start from.
    pub fn zenoh_config(mut self, file: Option<PathBuf>) -> SessionConfig {
        self.zenoh_config = file;
        self
    }

    /// The Zenoh configuration this opens with (and what it listens on / connects to,
    /// and the endpoint joined if the default one was taken).
    pub fn build(&self) -> Result<Built, RemoteError> {
        let mut c = match &self.zenoh_config {
            Some(f) => zenoh::Config::from_file(f)
                .map_err(|e| RemoteError::Config(format!("{}: {e}", f.display())))?,
            None => zenoh::Config::default(),
        };
        let mut listen = self.listen.clone();
        let mut connect = self.connect.clone();
        let mut joined = None;
        if self.daemon {
            if listen.is_empty() && self.zenoh_config.is_none() {
                if port_free(DEFAULT_ENDPOINT) {
                    listen.push(DEFAULT_ENDPOINT.to_string());
                } else {
                    connect.push(DEFAULT_ENDPOINT.to_string());
                    joined = Some(DEFAULT_ENDPOINT.to_string());
                }
            }
        } else if connect.is_empty() && self.zenoh_config.is_none() {
            connect.push(DEFAULT_ENDPOINT.to_string());
        }
        let set = |c: &mut zenoh::Config, k: &str, v: &str| {
            c.insert_json5(k, v)
                .map_err(|e| RemoteError::Config(format!("{k}: {e}")))
        };
        if self.zenoh_config.is_none() {
            set(
                &mut c,
                "mode",
                if self.daemon {
                    "\"router\""
                } else {
                    "\"peer\""
                },
            )?;
            // Safe by default: nothing but the endpoints named; no discovery traffic.
            set(&mut c, "scouting/multicast/enabled", "false")?;
            set(&mut c, "scouting/gossip/enabled", "false")?;
            set(&mut c, "listen/endpoints", &json_list(&listen))?;
            set(&mut c, "connect/endpoints", &json_list(&connect))?;
        } else {
            if !listen.is_empty() {
                set(&mut c, "listen/endpoints", &json_list(&listen))?;
            }
            if !connect.is_empty() {
                set(&mut c, "connect/endpoints", &json_list(&connect))?;
            }
        }
        Ok(Built {
            config: c,
            listen,
            connect,
            joined,
        })
    }

    /// Opens the session.
    pub async fn open(&self) -> Result<Opened, RemoteError> {
        let b = self.build()?;
        let session = zenoh::open(b.config).await.map_err(zerr)?;
        Ok(Opened {
            session,
            listening: b.listen,
            connected: b.connect,
            joined: b.joined,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_listens_on_loopback_or_joins_the_holder() {
        let b = SessionConfig::daemon().build().unwrap();
        if b.joined.is_some() {
            assert_eq!(b.connect, vec![DEFAULT_ENDPOINT.to_string()]);
            assert!(b.listen.is_empty());
        } else {
            assert_eq!(b.listen, vec![DEFAULT_ENDPOINT.to_string()]);
        }
    }

    #[test]
    fn taken_port_means_join() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ep = format!("tcp/{}", l.local_addr().unwrap());
        assert!(!port_free(&ep));
        drop(l);
    }

    #[test]
    fn scouting_is_off() {
        let c = SessionConfig::client().build().unwrap().config;
        let text = format!("{c}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["scouting"]["multicast"]["enabled"], false);
        assert_eq!(v["scouting"]["gossip"]["enabled"], false);
        assert_eq!(v["mode"], "peer");
        assert_eq!(v["connect"]["endpoints"][0], DEFAULT_ENDPOINT);
    }
}
