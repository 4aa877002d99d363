//! The door clients come through: a WebSocket relay in front of the `foxglove` crate's
//! server, which listens on a loopback port of its own.
//!
//! The `foxglove` crate (0.30) answers a hostile client in ways the face must not:
//! a frame over tungstenite's 16 MiB default is dropped with no close frame; every bad
//! entry of a message (a subscription to an unknown channel, a message on a channel the
//! client never advertised) is one ERROR log line and one status, so one 500 kB
//! `subscribe` is 20,000 lines; and a client whose requests raise more than its backlog
//! (1024) of statuses at once is disconnected. None of that is configurable there, so
//! the relay stands in front:
//!
//! * **Size**: a client message or frame over [`FoxgloveOptions::max_client_message`]
//!   closes the connection with a close frame, code 1009 (message too big) and the
//!   reason; other protocol errors close with 1002 and the reason.
//! * **What the crate would refuse entry by entry** is answered here, once per
//!   message: a message that does not parse as a client message of the protocol,
//!   subscriptions to channels not advertised to the client (or already subscribed),
//!   data on or unadvertisements of channels the client did not advertise, channels it
//!   advertises twice. What reaches the crate is what it takes without complaint.
//! * **Statuses** to the client (the crate's and the face's, those without an id) are
//!   paced per kind: the first at once, then at most one a second with the count of
//!   the others; a status with an id (a node's warning) always passes.
//! * **Logs**: the relay's own lines are paced the same way (per kind, per server).
//!
//! Every other message passes unchanged both ways (data, advertisements, parameters,
//! services), so a client sees the protocol the crate speaks.
//!
//! [`FoxgloveOptions::max_client_message`]: crate::FoxgloveOptions::max_client_message

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fcan_master::serving::lock;
use foxglove::websocket::ws_protocol::client::ClientMessage;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value as Json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tracing::Instrument;

use crate::server::TARGET;

/// The subprotocols the crate speaks, the newest first (its own preference).
const SUBPROTOCOLS: [&str; 2] = ["foxglove.sdk.v1", "foxglove.websocket.v1"];

/// How often one kind of status or log line is said at most.
pub(crate) const PACE: Duration = Duration::from_secs(1);

/// Kinds tracked per pacer; beyond it, those quiet for a period are forgotten, and a
/// new kind while all are busy is held back (so at most this many statuses a second).
const MAX_KINDS: usize = 64;

/// How much of a text names its kind (names in it are cut to 64 characters already).
const KIND_CHARS: usize = 200;

/// The first of a kind at once, then at most one a [`PACE`] with the count of the
/// others. Kinds are the text with its digits taken out, cut to [`KIND_CHARS`]
/// characters: long enough that two different refusals of one parameter (a value out of
/// bounds, a read-only bound) are two kinds — cut at 48 they were one, and a client that
/// made both within a second heard only the first.
#[derive(Default)]
pub(crate) struct Pacer {
    kinds: HashMap<String, (Instant, u64)>,
}

impl Pacer {
    /// `Some(suffix)` when `text` is to be said now, the suffix counting the others of
    /// its kind held back since the last (empty if none); `None` when only counted.
    pub(crate) fn due(&mut self, text: &str, now: Instant) -> Option<String> {
        let kind: String = text
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .take(KIND_CHARS)
            .collect();
        if self.kinds.len() >= MAX_KINDS && !self.kinds.contains_key(&kind) {
            self.kinds.retain(|_, (t, _)| now.duration_since(*t) < PACE);
            if self.kinds.len() >= MAX_KINDS {
                return None;
            }
        }
        match self.kinds.get_mut(&kind) {
            Some((t, held)) if now.duration_since(*t) < PACE => {
                *held += 1;
                None
            }
            Some((t, held)) => {
                *t = now;
                let n = std::mem::take(held);
                Some(if n > 0 {
                    format!(" ({n} more like it since the last)")
                } else {
                    String::new()
                })
            }
            None => {
                self.kinds.insert(kind, (now, 0));
                Some(String::new())
            }
        }
    }
}

/// What the relay needs: the crate's port, the limit, the log's pace.
pub(crate) struct Gate {
    pub inner: SocketAddr,
    pub max_message: usize,
    pub span: tracing::Span,
    pub log: Mutex<Pacer>,
}

impl Gate {
    /// A log line, paced per kind.
    fn warn(&self, text: String) {
        let due = lock(&self.log).due(&text, Instant::now());
        if let Some(more) = due {
            tracing::warn!(target: TARGET, parent: &self.span, "{text}{more}");
        }
    }
}

/// Accepts clients on `listener` until aborted; each connection is relayed to the
/// crate's server. Aborting this task aborts every connection's.
pub(crate) async fn serve(listener: TcpListener, gate: Arc<Gate>) {
    let mut conns = JoinSet::new();
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        while conns.try_join_next().is_some() {}
        let g = gate.clone();
        let span = gate.span.clone();
        conns.spawn(async move { relay(tcp, peer, g).await }.instrument(span));
    }
}

/// The close frame a client gets, with its code and reason (at most 123 bytes).
fn close(code: CloseCode, reason: &str) -> Message {
    let mut r = reason.to_string();
    if r.len() > 123 {
        let mut cut = 120;
        while !r.is_char_boundary(cut) {
            cut -= 1;
        }
        r.truncate(cut);
        r.push('…');
    }
    Message::Close(Some(CloseFrame {
        code,
        reason: r.into(),
    }))
}

/// A status message of the protocol, as the crate writes one.
fn status(level: u8, text: &str) -> Message {
    Message::text(serde_json::json!({"op": "status", "level": level, "message": text}).to_string())
}

/// What the relay knows of one connection, to answer what the crate would refuse
/// entry by entry.
#[derive(Default)]
struct Conn {
    /// Channels the server advertised to the client.
    channels: HashSet<u64>,
    /// The client's subscriptions: id → channel.
    subs: HashMap<u64, u64>,
    /// Channels the client advertised.
    client_channels: HashSet<u64>,
    /// Statuses to the client, paced.
    statuses: Pacer,
}

// The handshake callback's error is tungstenite's `Response`, large by its design.
#[allow(clippy::result_large_err)]
async fn relay(tcp: TcpStream, peer: SocketAddr, gate: Arc<Gate>) {
    let mut chosen: Option<&'static str> = None;
    let config = WebSocketConfig::default()
        .max_message_size(Some(gate.max_message))
        .max_frame_size(Some(gate.max_message));
    let accept = tokio_tungstenite::accept_hdr_async_with_config(
        tcp,
        |req: &Request, mut res: Response| {
            let offered: Vec<String> = req
                .headers()
                .get_all("sec-websocket-protocol")
                .iter()
                .flat_map(|h| {
                    h.to_str()
                        .unwrap_or_default()
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .collect::<Vec<_>>()
                })
                .collect();
            let Some(p) = SUBPROTOCOLS
                .iter()
                .find(|p| offered.iter().any(|o| o == *p))
            else {
                return Err(Response::builder()
                    .status(400)
                    .body(Some(
                        "Missing expected sec-websocket-protocol header".into(),
                    ))
                    .unwrap_or_default());
            };
            res.headers_mut()
                .insert("sec-websocket-protocol", HeaderValue::from_static(p));
            chosen = Some(p);
            Ok(res)
        },
        Some(config),
    );
    let Ok(client) = accept.await else {
        return gate.warn(format!("client {peer}: WebSocket handshake failed"));
    };
    let Some(proto) = chosen else { return };
    let inner = async {
        let mut req = format!("ws://{}", gate.inner).into_client_request()?;
        req.headers_mut()
            .insert("sec-websocket-protocol", HeaderValue::from_static(proto));
        let tcp = TcpStream::connect(gate.inner).await?;
        tcp.set_nodelay(true)?;
        // What the crate sends is trusted: no limit towards it.
        let cfg = WebSocketConfig::default()
            .max_message_size(None)
            .max_frame_size(None);
        let (ws, _) = tokio_tungstenite::client_async_with_config(req, tcp, Some(cfg)).await?;
        Ok::<_, WsError>(ws)
    };
    let (mut c_tx, mut c_rx) = client.split();
    let inner = match inner.await {
        Ok(ws) => ws,
        Err(e) => {
            gate.warn(format!("client {peer}: the server behind the relay: {e}"));
            let _ = c_tx
                .send(close(CloseCode::Error, "the server is not available"))
                .await;
            return;
        }
    };
    let (mut i_tx, mut i_rx) = inner.split();
    let mut conn = Conn::default();
    loop {
        tokio::select! {
            m = c_rx.next() => match m {
                None | Some(Ok(Message::Close(_))) => {
                    let _ = i_tx.send(Message::Close(None)).await;
                    let _ = c_tx.close().await;
                    return;
                }
                Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
                    match conn.client_sent(&m) {
                        Ok(Some(fwd)) => {
                            if i_tx.send(fwd).await.is_err() {
                                let _ = c_tx.send(close(CloseCode::Error, "the server went")).await;
                                return;
                            }
                        }
                        Ok(None) => {
                            if i_tx.send(m).await.is_err() {
                                let _ = c_tx.send(close(CloseCode::Error, "the server went")).await;
                                return;
                            }
                        }
                        Err(why) => {
                            if let Some(more) = conn.statuses.due(&why, Instant::now()) {
                                let _ = c_tx.send(status(2, &format!("fcan: {why}{more}"))).await;
                            }
                        }
                    }
                }
                // Pings are answered by tungstenite; flushing sends the pong.
                Some(Ok(_)) => {
                    let _ = c_tx.flush().await;
                }
                Some(Err(e)) => {
                    let (code, why) = match &e {
                        WsError::Capacity(c) => (
                            CloseCode::Size,
                            format!("message too big: {c}; the limit is {} bytes", gate.max_message),
                        ),
                        WsError::Utf8(_) => (CloseCode::Invalid, format!("{e}")),
                        _ => (CloseCode::Protocol, format!("{e}")),
                    };
                    gate.warn(format!("client {peer} closed: {why}"));
                    let _ = c_tx.send(close(code, &why)).await;
                    let _ = c_tx.close().await;
                    let _ = i_tx.send(Message::Close(None)).await;
                    return;
                }
            },
            m = i_rx.next() => match m {
                Some(Ok(Message::Text(t))) => {
                    if let Some(out) = conn.server_sent(t.as_str()) {
                        if c_tx.send(out).await.is_err() {
                            let _ = i_tx.send(Message::Close(None)).await;
                            return;
                        }
                    }
                }
                Some(Ok(m @ Message::Binary(_))) => {
                    if c_tx.send(m).await.is_err() {
                        let _ = i_tx.send(Message::Close(None)).await;
                        return;
                    }
                }
                Some(Ok(Message::Close(f))) => {
                    let _ = c_tx.send(Message::Close(f)).await;
                    let _ = c_tx.close().await;
                    return;
                }
                Some(Ok(_)) => {
                    let _ = i_tx.flush().await;
                }
                None | Some(Err(_)) => {
                    let _ = c_tx.send(close(CloseCode::Away, "the server stopped")).await;
                    return;
                }
            },
        }
    }
}

/// A JSON array field as u64s (empty if absent).
fn ids(v: &Json, key: &str) -> Vec<u64> {
    v.get(key)
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_u64).collect())
        .unwrap_or_default()
}

impl Conn {
    /// A client message: `Ok(None)` forwards it as it is, `Ok(Some(m))` forwards `m`
    /// instead (the entries the crate takes), `Err(why)` answers it here.
    fn client_sent(&mut self, m: &Message) -> Result<Option<Message>, String> {
        match m {
            Message::Binary(b) => match ClientMessage::parse_binary(b) {
                Ok(ClientMessage::MessageData(d)) => {
                    if self.client_channels.contains(&u64::from(d.channel_id)) {
                        Ok(None)
                    } else {
                        Err(format!(
                            "message on channel {} refused: the client has not advertised it",
                            d.channel_id
                        ))
                    }
                }
                Ok(_) => Ok(None),
                Err(e) => Err(format!("invalid binary message refused: {e}")),
            },
            Message::Text(t) => {
                if let Err(e) = ClientMessage::parse_json(t.as_str()) {
                    return Err(format!("invalid message refused: {e}"));
                }
                let Ok(mut v) = serde_json::from_str::<Json>(t.as_str()) else {
                    return Err("invalid message refused: not JSON".into());
                };
                match v.get("op").and_then(Json::as_str).unwrap_or_default() {
                    "subscribe" => self.subscribe(&mut v),
                    "unsubscribe" => {
                        for id in ids(&v, "subscriptionIds") {
                            self.subs.remove(&id);
                        }
                        Ok(None)
                    }
                    "advertise" => self.advertise(&mut v),
                    "unadvertise" => {
                        let all = ids(&v, "channelIds");
                        let known: Vec<u64> = all
                            .iter()
                            .copied()
                            .filter(|id| self.client_channels.remove(id))
                            .collect();
                        if known.len() == all.len() {
                            return Ok(None);
                        }
                        if known.is_empty() {
                            return Err(format!(
                                "unadvertise refused: the client advertises none of its {} channel(s)",
                                all.len()
                            ));
                        }
                        v["channelIds"] = Json::from(known);
                        Ok(Some(Message::text(v.to_string())))
                    }
                    _ => Ok(None),
                }
            }
            _ => Ok(None),
        }
    }

    /// Keeps the subscriptions the crate takes: to an advertised channel not yet
    /// subscribed, under an id not in use.
    fn subscribe(&mut self, v: &mut Json) -> Result<Option<Message>, String> {
        let Some(all) = v.get("subscriptions").and_then(Json::as_array) else {
            return Ok(None);
        };
        let total = all.len();
        let mut kept = Vec::new();
        let mut unknown = 0;
        for s in all {
            let (Some(id), Some(ch)) = (
                s.get("id").and_then(Json::as_u64),
                s.get("channelId").and_then(Json::as_u64),
            ) else {
                continue;
            };
            if !self.channels.contains(&ch) {
                unknown += 1;
            } else if !self.subs.contains_key(&id) && !self.subs.values().any(|c| *c == ch) {
                self.subs.insert(id, ch);
                kept.push(s.clone());
            }
        }
        if kept.len() == total {
            return Ok(None);
        }
        if kept.is_empty() {
            return Err(format!(
                "subscribe refused: none of its {total} subscription(s) is new on an advertised channel ({unknown} unknown channel(s))"
            ));
        }
        v["subscriptions"] = Json::from(kept);
        Ok(Some(Message::text(v.to_string())))
    }

    /// Keeps the client's channels not advertised yet.
    fn advertise(&mut self, v: &mut Json) -> Result<Option<Message>, String> {
        let Some(all) = v.get("channels").and_then(Json::as_array) else {
            return Ok(None);
        };
        let total = all.len();
        let mut kept = Vec::new();
        for c in all {
            if let Some(id) = c.get("id").and_then(Json::as_u64) {
                if self.client_channels.insert(id) {
                    kept.push(c.clone());
                }
            }
        }
        if kept.len() == total {
            return Ok(None);
        }
        if kept.is_empty() {
            return Err(format!(
                "advertise refused: all of its {total} channel(s) are advertised already"
            ));
        }
        v["channels"] = Json::from(kept);
        Ok(Some(Message::text(v.to_string())))
    }

    /// A text message from the server: noted (channels advertised and withdrawn), and
    /// passed on unless it is a status held back by the pace.
    fn server_sent(&mut self, t: &str) -> Option<Message> {
        let op_is = |op: &str| t.contains(&format!("\"op\":\"{op}\""));
        if op_is("advertise") || op_is("unadvertise") || op_is("status") {
            if let Ok(v) = serde_json::from_str::<Json>(t) {
                match v.get("op").and_then(Json::as_str).unwrap_or_default() {
                    "advertise" => {
                        for c in v
                            .get("channels")
                            .and_then(Json::as_array)
                            .map(Vec::as_slice)
                            .unwrap_or_default()
                        {
                            if let Some(id) = c.get("id").and_then(Json::as_u64) {
                                self.channels.insert(id);
                            }
                        }
                    }
                    "unadvertise" => {
                        for id in ids(&v, "channelIds") {
                            self.channels.remove(&id);
                            self.subs.retain(|_, c| *c != id);
                        }
                    }
                    "status" if v.get("id").is_none() => {
                        let text = v.get("message").and_then(Json::as_str).unwrap_or_default();
                        let more = self.statuses.due(text, Instant::now())?;
                        if !more.is_empty() {
                            let mut v = v.clone();
                            v["message"] = Json::from(format!("{text}{more}"));
                            return Some(Message::text(v.to_string()));
                        }
                    }
                    _ => {}
                }
            }
        }
        Some(Message::text(t.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pacer_says_a_kind_once_a_second_with_the_count() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        assert_eq!(p.due("no parameter named a1", t0).as_deref(), Some(""));
        // Another kind is said at once; the same kind with other digits is not.
        assert_eq!(p.due("channel x refused", t0).as_deref(), Some(""));
        for i in 0..99 {
            assert_eq!(p.due(&format!("no parameter named a{i}"), t0), None);
        }
        assert_eq!(
            p.due("no parameter named a7", t0 + PACE).as_deref(),
            Some(" (99 more like it since the last)")
        );
        // Two refusals of one long-named parameter that differ only after 48 characters
        // are two kinds: both are said (the Foxglove peer sets a value out of bounds,
        // then a read-only bound, within a second).
        let name = "motor_driver2.motor1.velocity.kp";
        assert!(p
            .due(
                &format!("setParameters: {name}: 500 is above its max 100"),
                t0
            )
            .is_some());
        assert!(p
            .due(
                &format!("setParameters: {name}/min: read-only (a bound)"),
                t0
            )
            .is_some());
    }
}
