//! The Foxglove server against the example firmwares on a simulated bus, through a
//! WebSocket client speaking the protocol by hand (tokio-tungstenite): subscriptions at
//! the master only while watched, nodes that reboot or go offline, client input that is
//! garbage, a parameter the master lets through and the node refuses (NAK).
//! (The peer test, tests/foxglove/test.mjs, checks the rest with Foxglove's own client.)

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicU32, Ordering};

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::{CommandResult, ConfigMessage, ResultCode};
use fcan_core::segment::Segmenter;
use fcan_e2e::capture::Capture;
use fcan_e2e::{wait_running, World, IO3, MD1, MD2};
use fcan_foxglove::{FoxgloveOptions, FoxgloveServer};
use fcan_master::transport::{Received, Transport, TransportError};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value as Json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tracing::Instrument;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A server started in a capture's span: its diagnostics are the capture's lines.
async fn start(max_payload: usize) -> (World, FoxgloveServer, Capture) {
    let (w, m) = World::standard(Mtu::Fd).await;
    let log = Capture::new();
    let mut opts = FoxgloveOptions::default();
    opts.max_payload = max_payload;
    let server = FoxgloveServer::start(m, "127.0.0.1:0".parse().unwrap(), opts)
        .instrument(log.span().clone())
        .await
        .expect("server starts");
    (w, server, log)
}

async fn connect(server: &FoxgloveServer) -> Ws {
    let mut req = server.url().into_client_request().unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", "foxglove.sdk.v1".parse().unwrap());
    let (ws, resp) = tokio_tungstenite::connect_async(req)
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

/// What the client heard that the tests look at.
#[derive(Default)]
struct Heard {
    /// topic → channel id, as advertised now.
    channels: Vec<(String, u64)>,
    statuses: Vec<Json>,
    parameters: Vec<Json>,
    /// Binary messages: (subscription id, JSON payload).
    messages: Vec<(u32, Json)>,
}

impl Heard {
    fn channel(&self, topic: &str) -> Option<u64> {
        self.channels
            .iter()
            .find(|(t, _)| t == topic)
            .map(|(_, id)| *id)
    }

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
                    Some("unadvertise") => {
                        let gone: Vec<u64> = j["channelIds"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|v| v.as_u64().unwrap())
                            .collect();
                        self.channels.retain(|(_, id)| !gone.contains(id));
                    }
                    Some("status") => self.statuses.push(j),
                    Some("parameterValues") => self.parameters.push(j),
                    _ => {}
                }
            }
            Message::Binary(b) if b.first() == Some(&1) && b.len() >= 13 => {
                let sub = u32::from_le_bytes(b[1..5].try_into().unwrap());
                let v = serde_json::from_slice(&b[13..]).expect("message is JSON");
                self.messages.push((sub, v));
            }
            _ => {}
        }
    }
}

/// Reads until `done` holds (panics after `secs`).
async fn until(
    ws: &mut Ws,
    heard: &mut Heard,
    secs: u64,
    what: &str,
    done: impl Fn(&Heard) -> bool,
) {
    let end = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done(heard) {
        let m = tokio::time::timeout_at(end, ws.next())
            .await
            .unwrap_or_else(|_| panic!("{what}: not within {secs} s"))
            .expect("connection open")
            .expect("a message");
        heard.take(m);
    }
}

async fn send(ws: &mut Ws, j: Json) {
    ws.send(Message::Text(j.to_string().into())).await.unwrap();
}

async fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..300 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not within 3 s");
}

const FB: &str = "/motor_driver2/motor0/feedback";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_is_subscribed_at_the_master_only_while_watched() {
    let (_w, server, _log) = start(64 * 1024).await;
    assert!(server.channels().contains(&FB.to_string()));
    // 54 channels (topics of both directions), none watched.
    assert_eq!(server.channels().len(), 54);
    assert!(server.watched().is_empty());

    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 5, "advertise", |h| {
        h.channel(FB).is_some()
    })
    .await;
    let id = heard.channel(FB).unwrap();
    send(
        &mut ws,
        json!({"op": "subscribe", "subscriptions": [{"id": 7, "channelId": id}]}),
    )
    .await;
    until(&mut ws, &mut heard, 5, "feedback", |h| {
        h.messages.len() >= 3
    })
    .await;
    assert_eq!(server.watched(), [FB]);
    for (sub, v) in &heard.messages {
        assert_eq!(*sub, 7);
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 4);
        assert!(v["ready"].is_boolean() && v["position"].is_number(), "{v}");
    }

    send(
        &mut ws,
        json!({"op": "unsubscribe", "subscriptionIds": [7]}),
    )
    .await;
    eventually("unwatched after unsubscribe", || {
        server.watched().is_empty()
    })
    .await;

    // A client that leaves without unsubscribing releases its subscriptions too.
    send(
        &mut ws,
        json!({"op": "subscribe", "subscriptions": [{"id": 8, "channelId": id}]}),
    )
    .await;
    eventually("watched again", || server.watched() == [FB]).await;
    drop(ws);
    eventually("unwatched after the client left", || {
        server.watched().is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebooted_node_is_unadvertised_and_advertised_again() {
    let (mut w, server, log) = start(64 * 1024).await;
    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 5, "advertise", |h| {
        h.channel(FB).is_some()
    })
    .await;
    let before = heard.channel(FB).unwrap();
    send(
        &mut ws,
        json!({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": before}]}),
    )
    .await;
    until(&mut ws, &mut heard, 5, "feedback", |h| {
        !h.messages.is_empty()
    })
    .await;

    w.reboot_motor(MD2);
    // The old channel goes, a new one of the same topic comes with the new boot.
    until(&mut ws, &mut heard, 10, "re-advertised", |h| {
        h.channel(FB).is_some_and(|id| id != before)
    })
    .await;
    assert!(heard.channels.iter().all(|(_, id)| *id != before));
    eventually("the old channel's forwarding stopped", || {
        !server.watched().contains(&FB.to_string())
    })
    .await;
    let lines = log.text();
    assert!(
        lines.contains("INFO fcan::foxglove: node motor_driver2 no longer served (rebooted)"),
        "{lines}"
    );
    eventually("all 54 channels again", || server.channels().len() == 54).await;

    // The new channel streams once subscribed.
    let after = heard.channel(FB).unwrap();
    heard.messages.clear();
    send(
        &mut ws,
        json!({"op": "subscribe", "subscriptions": [{"id": 2, "channelId": after}]}),
    )
    .await;
    until(&mut ws, &mut heard, 5, "feedback after reboot", |h| {
        h.messages.iter().any(|(s, _)| *s == 2)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_a_client_is_refused_and_the_server_goes_on() {
    let (_w, server, _log) = start(256).await;
    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 5, "advertise", |h| {
        h.channel(FB).is_some()
    })
    .await;

    // Not the protocol at all.
    ws.send(Message::Text("not json".into())).await.unwrap();
    send(&mut ws, json!({"op": "nope"})).await;
    ws.send(Message::Binary(vec![0xff, 1, 2].into()))
        .await
        .unwrap();
    ws.send(Message::Binary(vec![1, 9, 9, 9, 9].into()))
        .await
        .unwrap();
    send(
        &mut ws,
        json!({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": 999999}]}),
    )
    .await;
    send(
        &mut ws,
        json!({"op": "getParameters", "parameterNames": ["no.such/param"], "id": "x"}),
    )
    .await;
    send(&mut ws, json!({"op": "setParameters", "parameters": [{"name": "motor_driver2.motor0.invert", "value": {"a": 1}}], "id": "y"})).await;

    // A command channel, then messages that are no command.
    let target = "/motor_driver2/motor0/target";
    send(&mut ws, json!({"op": "advertise", "channels": [{"id": 5, "topic": target, "encoding": "json", "schemaName": "x"}]})).await;
    let msg = |payload: &[u8]| {
        let mut b = vec![1, 5, 0, 0, 0];
        b.extend_from_slice(payload);
        Message::Binary(b.into())
    };
    let errors = |h: &Heard| {
        h.statuses
            .iter()
            .filter(|s| s["level"] == 2)
            .map(|s| s["message"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    ws.send(msg(b"{not json")).await.unwrap();
    until(&mut ws, &mut heard, 5, "refusals", |h| {
        let e = errors(h);
        e.contains("publish on /motor_driver2/motor0/target refused: not JSON")
            && e.contains("no parameter named no.such/param")
            && e.contains("not set: a parameter is a scalar or a fixed array")
    })
    .await;
    // More within the second: refused and counted, not each reported.
    for bad in [
        &br#"{"type": 1}"#[..],
        br#"{"type": 300, "value": 1.0}"#,
        br#"{"type": null, "value": 1.0}"#,
        &[b'x'; 1000][..],
    ] {
        ws.send(msg(bad)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    ws.send(msg(br#"{"type": 1, "value": "fast"}"#))
        .await
        .unwrap();
    until(&mut ws, &mut heard, 5, "the next report", |h| {
        errors(h).contains("more refused since the last report")
    })
    .await;
    let e = errors(&heard);
    assert_eq!(
        e.matches("publish on /motor_driver2/motor0/target refused")
            .count(),
        2,
        "{e}"
    );
    assert!(e.contains("(4 more refused since the last report)"), "{e}");

    // The server still serves: a parameter read, a subscription.
    send(&mut ws, json!({"op": "getParameters", "parameterNames": ["motor_driver2.motor0.command_timeout_ms"], "id": "ok"})).await;
    until(&mut ws, &mut heard, 5, "parameter", |h| {
        h.parameters.iter().any(|p| p["id"] == "ok")
    })
    .await;
    let p = heard.parameters.iter().find(|p| p["id"] == "ok").unwrap();
    assert_eq!(p["parameters"][0]["value"], 100, "{p}");
    let id = heard.channel(FB).unwrap();
    send(
        &mut ws,
        json!({"op": "subscribe", "subscriptions": [{"id": 3, "channelId": id}]}),
    )
    .await;
    until(&mut ws, &mut heard, 5, "feedback", |h| {
        !h.messages.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_server_disconnects_and_frees_the_port() {
    let (_w, server, _log) = start(64 * 1024).await;
    let addr = server.local_addr();
    assert_eq!(server.url(), format!("ws://{addr}"));
    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 5, "advertise", |h| {
        h.channel(FB).is_some()
    })
    .await;
    let id = heard.channel(FB).unwrap();
    send(
        &mut ws,
        json!({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": id}]}),
    )
    .await;
    until(&mut ws, &mut heard, 5, "feedback", |h| {
        !h.messages.is_empty()
    })
    .await;

    server.stop();
    // The client's connection ends (after what was queued), and the port is free.
    let closed = tokio::time::timeout(Duration::from_secs(3), async {
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
    assert!(closed.is_ok(), "the connection stays open");
    eventually("the port is free", || {
        std::net::TcpListener::bind(addr).is_ok()
    })
    .await;
}

/// A firmware interlock in front of one node: every PARAM_SET carrying `value` is refused
/// with a NAK `BadState` ("not allowed in the node's current state"), as a firmware that
/// refuses to change a gain while its motor runs would; everything else reaches the node.
/// The master's own check cannot know this: the value is within the schema's bounds.
struct Interlock<T> {
    inner: T,
    value: Vec<u8>,
    refused: Arc<AtomicU32>,
}

impl<T: Transport> Transport for Interlock<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn mtu(&self) -> Mtu {
        self.inner.mtu()
    }
    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        self.inner.send(frame).await
    }
    async fn recv(&mut self) -> Result<Received, TransportError> {
        loop {
            let r = self.inner.recv().await?;
            let Some(id) = ConfigId::from_can_id(r.frame.id())
                .ok()
                .filter(|id| id.opcode == Opcode::ParamSet && id.dir == Direction::ToNode)
            else {
                return Ok(r);
            };
            let refuse = matches!(
                ConfigMessage::decode(Opcode::ParamSet, Direction::ToNode, r.frame.data()),
                Ok(ConfigMessage::ParamSet(m)) if m.value.starts_with(&self.value)
            );
            if !refuse {
                return Ok(r);
            }
            let nak = ConfigMessage::Result(CommandResult {
                opcode: Opcode::ParamSet,
                code: ResultCode::BadState,
                detail: 0,
            });
            let mut buf = [0u8; 16];
            let n = nak.encode(&mut buf).expect("encodes");
            let reply = ConfigId::single(Opcode::Result, Direction::ToMaster, id.node, id.transfer);
            for f in Segmenter::new(reply, self.inner.mtu(), &buf[..n], &[]).expect("fits") {
                self.inner.send(&f).await?;
            }
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn errors(h: &Heard) -> Vec<String> {
    h.statuses
        .iter()
        .filter(|s| s["level"] == 2)
        .map(|s| s["message"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parameter_the_node_refuses_is_an_error_with_the_nodes_reason() {
    const KP: &str = "motor_driver2.motor0.velocity.kp";
    let mut w = World::new(Mtu::Fd);
    w.add_motor(MD1, 8);
    let refused = Arc::new(AtomicU32::new(0));
    let interlock = Interlock {
        inner: w.endpoint(),
        value: 0.07f32.to_le_bytes().to_vec(),
        refused: refused.clone(),
    };
    w.add_motor_on(interlock, MD2, 4);
    w.add_io(IO3);
    let m = w.start_master().await;
    wait_running(&m, &[MD1, MD2, IO3], Duration::from_secs(3)).await;
    let server = FoxgloveServer::start(
        m,
        "127.0.0.1:0".parse().unwrap(),
        FoxgloveOptions::default(),
    )
    .await
    .expect("server starts");
    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 5, "advertise", |h| {
        h.channel(FB).is_some()
    })
    .await;

    // A value the node takes: acknowledged, read back.
    send(&mut ws, json!({"op": "setParameters", "parameters": [{"name": KP, "value": 0.08, "type": "float64"}], "id": "ok"})).await;
    until(&mut ws, &mut heard, 5, "the accepted set", |h| {
        h.parameters.iter().any(|p| p["id"] == "ok")
    })
    .await;
    let ok = heard.parameters.iter().find(|p| p["id"] == "ok").unwrap();
    let kp = ok["parameters"][0]["value"].as_f64().unwrap();
    assert!((kp - 0.08).abs() < 1e-6, "{ok}");
    assert!(errors(&heard).is_empty(), "{:?}", errors(&heard));

    // 0.07 is within the schema's bounds (0..=100): the master sends it, the node NAKs it.
    send(&mut ws, json!({"op": "setParameters", "parameters": [{"name": KP, "value": 0.07, "type": "float64"}], "id": "nak"})).await;
    until(&mut ws, &mut heard, 5, "the refused set", |h| {
        h.parameters.iter().any(|p| p["id"] == "nak") && !errors(h).is_empty()
    })
    .await;
    assert!(
        refused.load(Ordering::Relaxed) >= 1,
        "the node never saw the set"
    );
    let e = errors(&heard).join("\n");
    assert!(
        e.contains(&format!("fcan: parameter {KP} not set: node refused (BadState): not allowed in the node's current state")),
        "{e}"
    );
    // The answer is what the node holds: the value before, unchanged.
    let nak = heard.parameters.iter().find(|p| p["id"] == "nak").unwrap();
    let kp = nak["parameters"][0]["value"].as_f64().unwrap();
    assert!((kp - 0.08).abs() < 1e-6, "{nak}");

    // A node that goes offline leaves a warning and its channels go.
    w.io(IO3).stop();
    until(&mut ws, &mut heard, 5, "the offline warning", |h| {
        h.statuses
            .iter()
            .any(|s| s["level"] == 1 && s["message"] == "fcan: node io_board3 is offline")
            && h.channels
                .iter()
                .all(|(t, _)| !t.starts_with("/io_board3/"))
    })
    .await;
    assert!(heard.channel(FB).is_some());
}

/// Two boards answering to one node id (docs/protocol.md §5.3): the app shows an error
/// status naming the node and both boot ids, as `fcan nodes`, `/rosout` and the remote
/// events do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_id_collision_is_an_error_status() {
    use fcan_core::id::NodeId;
    use fcan_core::msg::{FaultCode, NodeHeartbeat, NodeState};
    let (w, server, _log) = start(1 << 20).await;
    let mut ws = connect(&server).await;
    let mut heard = Heard::default();
    until(&mut ws, &mut heard, 10, "advertised", |h| {
        h.channel(FB).is_some()
    })
    .await;
    // A second, acknowledged board with id 2 heartbeats.
    let known = w.motor(MD2).with(|f| f.node.boot_id());
    let foreign = known ^ 0x0123_4567;
    let msg = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
        state: NodeState::Running,
        fault: FaultCode::None,
        boot_id: foreign,
        errors: 0,
    });
    let mut buf = [0u8; 16];
    let n = msg.encode(&mut buf).unwrap();
    let id = ConfigId::single(
        Opcode::Heartbeat,
        Direction::ToMaster,
        NodeId::new(MD2).unwrap(),
        0,
    );
    let mut other = w.endpoint();
    other
        .send(&Frame::classic(id.can_id(), &buf[..n]).unwrap())
        .await
        .unwrap();
    let hex = format!("{foreign:#010x}");
    let both = move |e: &String| e.contains(&hex) && e.contains(&format!("{known:#010x}"));
    until(&mut ws, &mut heard, 10, "the collision status", |h| {
        errors(h).iter().any(&both)
    })
    .await;
}
