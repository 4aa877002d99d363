//! What a hostile or broken Foxglove client gets (issue 33, "faces report what is
//! true"), measured with a real WebSocket client (tokio-tungstenite) against the server
//! on the simulated bus with the example nodes:
//!
//! * a frame of 16 MiB and more: the connection is closed with a close frame, code 1009
//!   (message too big) and the reason, and the server serves the next client;
//! * a 1 MiB topic name: echoed back cut to 64 characters and `…`;
//! * 5,000 bad requests (subscriptions to channels that do not exist, parameters that
//!   do not exist, messages on channels never advertised, garbage), and one
//!   `subscribe` of 20,000 unknown channels: a bounded number of statuses, the client
//!   still connected and served (a subscription made after it delivers), and the
//!   server's log bounded.

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_e2e::capture::Capture;
use fcan_e2e::World;
use fcan_foxglove::{FoxgloveOptions, FoxgloveServer};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value as Json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tracing::Instrument;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

const FB: &str = "/motor_driver2/motor0/feedback";

async fn start() -> (World, FoxgloveServer, Capture) {
    let (w, m) = World::standard(Mtu::Fd).await;
    let log = Capture::new();
    let server = FoxgloveServer::start(
        m,
        "127.0.0.1:0".parse().unwrap(),
        FoxgloveOptions::default(),
    )
    .instrument(log.span().clone())
    .await
    .expect("server starts");
    (w, server, log)
}

async fn connect(server: &FoxgloveServer) -> Ws {
    let mut req = server.url().into_client_request().unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", "foxglove.sdk.v1".parse().unwrap());
    // The client may send what it likes: no limit of its own.
    let cfg = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let (ws, resp) = tokio_tungstenite::connect_async_with_config(req, Some(cfg), true)
        .await
        .expect("connects");
    assert_eq!(
        resp.headers()
            .get("sec-websocket-protocol")
            .map(|v| v.to_str().unwrap()),
        Some("foxglove.sdk.v1")
    );
    ws
}

#[derive(Default)]
struct Heard {
    channels: Vec<(String, u64)>,
    statuses: Vec<String>,
    messages: usize,
    closed: Option<(CloseCode, String)>,
}

impl Heard {
    fn take(&mut self, m: Message) {
        match m {
            Message::Text(t) => {
                let j: Json = serde_json::from_str(&t).expect("server text is JSON");
                match j["op"].as_str() {
                    Some("advertise") => {
                        for c in j["channels"].as_array().unwrap() {
                            self.channels.push((
                                c["topic"].as_str().unwrap().to_string(),
                                c["id"].as_u64().unwrap(),
                            ));
                        }
                    }
                    Some("status") => self
                        .statuses
                        .push(j["message"].as_str().unwrap().to_string()),
                    _ => {}
                }
            }
            Message::Binary(b) if b.first() == Some(&1) => self.messages += 1,
            Message::Close(f) => {
                self.closed = Some(
                    f.map(|f| (f.code, f.reason.to_string()))
                        .unwrap_or((CloseCode::Status, String::new())),
                )
            }
            _ => {}
        }
    }
    fn channel(&self, topic: &str) -> Option<u64> {
        self.channels
            .iter()
            .find(|(t, _)| t == topic)
            .map(|(_, id)| *id)
    }
}

/// Reads until `done` holds, the connection ends, or `secs` pass (then panics).
async fn until(
    ws: &mut Ws,
    heard: &mut Heard,
    secs: u64,
    what: &str,
    done: impl Fn(&Heard) -> bool,
) {
    let end = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done(heard) {
        match tokio::time::timeout_at(end, ws.next()).await {
            Err(_) => panic!("{what}: not within {secs} s"),
            Ok(None) | Ok(Some(Err(_))) => return,
            Ok(Some(Ok(m))) => heard.take(m),
        }
    }
}

/// Reads what comes for `ms`.
async fn drain(ws: &mut Ws, heard: &mut Heard, ms: u64) {
    let end = tokio::time::Instant::now() + Duration::from_millis(ms);
    while let Ok(Some(Ok(m))) = tokio::time::timeout_at(end, ws.next()).await {
        heard.take(m);
    }
}

async fn send(ws: &mut Ws, j: Json) {
    ws.send(Message::Text(j.to_string().into())).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_of_16_mib_is_closed_with_1009_and_the_reason() {
    let (_w, server, log) = start().await;
    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 5, "advertise", |h| {
        h.channel(FB).is_some()
    })
    .await;
    // The frame's header is enough for the server to refuse it; the rest may never be
    // read, so the send may fail once the server has closed.
    let big = vec![b'x'; 16 << 20];
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        ws.send(Message::Binary(big.into())),
    )
    .await;
    until(&mut ws, &mut heard, 10, "the close frame", |h| {
        h.closed.is_some()
    })
    .await;
    let (code, reason) = heard.closed.clone().expect("a close frame");
    assert_eq!(code, CloseCode::Size, "{reason}");
    assert!(reason.contains("message too big"), "{reason}");
    assert!(
        log.text().contains("closed: message too big"),
        "{}",
        log.text()
    );
    // The server serves the next client.
    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 5, "advertise again", |h| {
        h.channel(FB).is_some()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_mib_topic_name_is_echoed_cut_to_64_characters() {
    let (_w, server, log) = start().await;
    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 5, "advertise", |h| {
        h.channel(FB).is_some()
    })
    .await;
    let topic = format!("/{}", "n".repeat(1 << 20));
    send(
        &mut ws,
        json!({"op": "advertise", "channels": [{"id": 1, "topic": topic, "encoding": "json", "schemaName": "x"}]}),
    )
    .await;
    until(&mut ws, &mut heard, 5, "the warning", |h| {
        !h.statuses.is_empty()
    })
    .await;
    let s = &heard.statuses[0];
    assert!(s.len() < 300, "a status of {} bytes", s.len());
    assert!(
        s.contains(&format!("{}…", &topic[..64])),
        "{}",
        &s[..s.len().min(300)]
    );
    // Published on, the refusal echoes it cut too, and so does the log.
    let mut data = vec![1u8];
    data.extend(1u32.to_le_bytes());
    data.extend(br#"{"type": 0, "setpoint": 0.1}"#);
    ws.send(Message::Binary(data.into())).await.unwrap();
    until(&mut ws, &mut heard, 5, "the refusal", |h| {
        h.statuses.len() >= 2
    })
    .await;
    assert!(heard.statuses[1].len() < 400, "{}", heard.statuses[1].len());
    assert!(log.lines().iter().all(|l| l.len() < 1000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_bad_requests_get_a_few_statuses_and_the_client_stays_served() {
    let (_w, server, log) = start().await;
    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 5, "advertise", |h| {
        h.channel(FB).is_some()
    })
    .await;
    let before = log.lines().len();

    // One subscribe of 20,000 unknown channels (about 500 kB).
    let subs: Vec<Json> = (0..20_000)
        .map(|i| json!({"id": 100_000 + i, "channelId": 900_000 + i}))
        .collect();
    send(&mut ws, json!({"op": "subscribe", "subscriptions": subs})).await;
    // 5,000 bad requests of five kinds.
    for i in 0..1000u32 {
        send(
            &mut ws,
            json!({"op": "subscribe", "subscriptions": [{"id": i, "channelId": 800_000 + i}]}),
        )
        .await;
        send(
            &mut ws,
            json!({"op": "setParameters", "parameters": [{"name": format!("no.such.param{i}"), "value": 1.0}]}),
        )
        .await;
        send(&mut ws, json!({"op": "noSuchOp", "n": i})).await;
        ws.send(Message::Text(format!("{{not json {i}").into()))
            .await
            .unwrap();
        let mut data = vec![1u8];
        data.extend((5000 + i).to_le_bytes());
        data.extend(b"{}");
        ws.send(Message::Binary(data.into())).await.unwrap();
    }
    // Still connected and served: a subscription made now delivers.
    let id = heard.channel(FB).unwrap();
    send(
        &mut ws,
        json!({"op": "subscribe", "subscriptions": [{"id": 7, "channelId": id}]}),
    )
    .await;
    until(&mut ws, &mut heard, 10, "feedback after the flood", |h| {
        h.messages >= 3 || h.closed.is_some()
    })
    .await;
    drain(&mut ws, &mut heard, 1500).await;
    assert_eq!(heard.closed, None, "disconnected");
    assert!(heard.messages >= 3, "not served after the flood");
    let n = heard.statuses.len();
    println!("{n} statuses for 5,001 bad requests: {:#?}", heard.statuses);
    assert!((5..=40).contains(&n), "{n} statuses: {:?}", heard.statuses);
    // A request after all that is still answered: one of the flood's kind (a status's
    // kind is its text, digits aside), so its answer also says how many were held back.
    send(
        &mut ws,
        json!({"op": "setParameters", "parameters": [{"name": "no.such.param5000", "value": 1.0}]}),
    )
    .await;
    until(&mut ws, &mut heard, 5, "the answer", |h| {
        h.statuses.iter().any(|s| s.contains("no.such.param5000"))
    })
    .await;
    // It says how many of its kind were held back.
    let last = heard.statuses.last().unwrap();
    assert!(last.contains("more like it since the last"), "{last}");
    // The log: a few lines, not one per bad entry.
    let logged = log.lines().len() - before;
    assert!(logged <= 20, "{logged} log lines: {:?}", log.lines());
}
