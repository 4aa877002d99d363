//! The router's public API as a user sees it (issue 11, item 4): its error is a
//! `std::error::Error + Send + Sync + 'static` that says what is wrong, and the events
//! and counters it hands out carry `fcan_core`'s `NodeId`.

#![cfg(feature = "std")]

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{ConfigMessage, FaultCode, NodeHeartbeat, NodeState};
use fcan_router::bridge::{Bridge, BridgeError, BridgeOptions};
use fcan_router::{DropReason, Event, Link, Router, RouterConfig};
use fcan_transport::sim::SimBus;

/// Compiles only for types a thread-crossing error box takes.
fn is_error<E: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn the_bridge_error_is_a_send_sync_std_error() {
    is_error::<BridgeError>();
}

#[tokio::test]
async fn bridge_errors_say_what_and_why() {
    let bus = SimBus::new(Default::default());
    let none = Bridge::<2>::start(bus.endpoint(Mtu::Fd), Vec::new(), BridgeOptions::default());
    let e = none.err().expect("no downlink refused");
    assert_eq!(e.to_string(), "a router needs at least one downlink");
    let three = (0..3).map(|_| bus.endpoint(Mtu::Fd)).collect();
    let e = Bridge::<2>::start(bus.endpoint(Mtu::Fd), three, BridgeOptions::default())
        .err()
        .expect("too many downlinks refused");
    assert_eq!(
        e.to_string(),
        "3 downlinks given, this router takes at most 2"
    );
}

#[test]
fn events_name_nodes_by_node_id() {
    let mut r: Router<2> = Router::new(RouterConfig::uniform(Mtu::Classic));
    let hb = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
        state: NodeState::Running,
        fault: FaultCode::None,
        boot_id: 42,
        errors: 0,
    });
    let mut buf = [0u8; 8];
    let len = hb.encode(&mut buf).unwrap();
    let node = NodeId::new(5).unwrap();
    let id = ConfigId::single(Opcode::Heartbeat, Direction::ToMaster, node, 0);
    let route = r.route(
        Link::Down(1),
        &mut Frame::classic(id.can_id(), &buf[..len]).unwrap(),
        0,
    );
    assert_eq!(route.dropped, None::<DropReason>);
    let learned = std::iter::from_fn(|| r.pop_event()).find_map(|e| match e {
        Event::NodeLearned { node, link } => Some((node, link)),
        _ => None,
    });
    assert_eq!(learned, Some((node, Link::Down(1))));
}
