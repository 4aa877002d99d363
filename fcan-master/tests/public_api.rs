//! The master's public API as a user sees it (issue 11, item 4): every error is a
//! `std::error::Error + Send + Sync + 'static` (so `?` into `Box<dyn Error + Send + Sync>`
//! and `anyhow` work across tasks), node ids are `fcan_core`'s `NodeId` from the events to
//! the registry, and the errors name what failed and why.

#[path = "support/mod.rs"]
mod support;

use fcan_core::frame::Mtu;
use fcan_core::id::NodeId;
use fcan_master::engine::{CallError, Event, SampleSink};
use fcan_master::registry::Registry;
use support::EngineWorld;

/// Compiles only for types a thread-crossing error box takes.
fn is_error<E: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn every_public_error_is_a_send_sync_std_error() {
    is_error::<fcan_master::MasterError>();
    is_error::<fcan_master::engine::CallError>();
    is_error::<fcan_master::value::ValueError>();
    is_error::<fcan_master::registry::UnknownName>();
    is_error::<fcan_master::planner::PlanError>();
    is_error::<fcan_master::transport::TransportError>();
    is_error::<fcan_master::transport::candump::ParseError>();
    // And they box: what a program's `main` returns.
    let boxed: Box<dyn std::error::Error + Send + Sync> =
        Box::new(CallError::NodeNotOnline(NodeId::new(5).unwrap()));
    assert_eq!(boxed.to_string(), "node 5 is not online");
}

#[test]
fn errors_say_what_and_why() {
    let id = NodeId::new(9).unwrap();
    let busy = CallError::TooManyRequests {
        node: id,
        limit: 32,
    }
    .to_string();
    assert!(busy.contains("node 9") && busy.contains("32"), "{busy}");
    let gone = fcan_master::MasterError::from(CallError::NodeLost(id)).to_string();
    assert!(
        gone.contains("node 9") && gone.contains("went away"),
        "{gone}"
    );
    // A NAK and a service status: the code and what it means, not only a Debug name.
    let nak = CallError::Refused(fcan_core::msg::ResultCode::AboveMax).to_string();
    assert_eq!(
        nak,
        "node refused (AboveMax): the value is above the parameter's maximum"
    );
    let status = CallError::Status(fcan_core::msg::ServiceStatus::AppError).to_string();
    assert_eq!(
        status,
        "service answered AppError: the handler ran and reported a failure"
    );
    // A schema that does not number says which type it lacks.
    let e = fcan_master::planner::PlanError::Numbering(
        fcan_core::numbering::NumberingError::UnknownType("Motor".into()),
    );
    assert_eq!(
        e.to_string(),
        "schema cannot be numbered: an instance array names type `Motor`, which the schema does not define"
    );
}

/// Records the node ids samples arrive with.
#[derive(Default)]
struct Nodes(Vec<NodeId>);

impl SampleSink for Nodes {
    fn sample(&mut self, node: NodeId, _: u8, _: u8, _: &[u8], _: u64) {
        self.0.push(node);
    }
}

#[test]
fn node_ids_are_typed_from_events_to_the_registry() {
    let mut w = EngineWorld::new(Mtu::Fd, 1, 1);
    w.engine.discover();
    let mut online = Vec::new();
    let mut samples = Nodes::default();
    while online.len() < 2 {
        w.step(100, &mut samples);
        while let Some(e) = w.engine.pop_event() {
            if let Event::Online { node } = e {
                online.push(node);
            }
        }
        assert!(w.now_us < 5_000_000, "provisioning did not finish");
    }
    online.sort();
    let (md, io) = (NodeId::new(1).unwrap(), NodeId::new(2).unwrap());
    assert_eq!(online, [md, io]);
    // The engine's records answer to the ids the events carry.
    for id in [md, io] {
        assert_eq!(w.engine.node(id).map(|n| n.id), Some(id));
    }
    // The identifier gauge counts what the plans use: one identifier per planned frame.
    let planned: usize = w
        .engine
        .nodes()
        .filter_map(|n| n.plan.as_ref())
        .map(|p| p.frames.len())
        .sum();
    assert!(planned > 0);
    assert_eq!(w.engine.stats().data_ids_in_use, planned as u64);
    // Registry entries name their node by the same type, and requests take it.
    let reg = Registry::of(&w.engine);
    let svc = reg
        .services
        .iter()
        .find(|s| s.node == io)
        .expect("io services");
    let call = w
        .engine
        .call_service(svc.node, svc.block, svc.service, &[1], w.now_us);
    assert!(call.is_ok(), "{call:?}");
    // A node that does not exist is named in the error.
    let ghost = NodeId::new(77).unwrap();
    assert_eq!(
        w.engine.get_param(ghost, 0, 0, w.now_us),
        Err(CallError::NodeNotOnline(ghost))
    );
    // Samples carry the typed id too.
    let mut samples = Nodes::default();
    for _ in 0..200 {
        w.step(100, &mut samples);
    }
    assert!(samples.0.contains(&md), "{:?}", samples.0.len());
    assert!(samples.0.iter().all(|n| *n == md || *n == io));
}
