//! Services: immediate, deferred (ACCEPTED now, OK from a later poll), BUSY when the
//! slots are full, BAD_INDEX, BAD_REQUEST, BAD_STATE, empty requests and responses,
//! multi-frame reassembly and its failures.

mod common;
use common::*;

use fcan_core::frame::Frame;
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::*;
use fcan_runtime_nostd::*;

fn req<'a>(block: u8, service: u8, body: &'a [u8]) -> ConfigMessage<'a> {
    ConfigMessage::ServiceRequest(ServiceRequest {
        block,
        service,
        body,
    })
}

fn provisioned() -> Rig {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    rig
}

/// Sends a request and returns the response(s) with the transfer id.
fn call(rig: &mut Rig, block: u8, service: u8, body: &[u8]) -> (u8, Vec<Msg>) {
    let t = rig.send(req(block, service, body));
    let out: Vec<_> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.opcode == Opcode::Service)
        .collect();
    for m in &out {
        assert_eq!(m.id.transfer, t);
    }
    (t, out)
}

#[test]
fn immediate_reply_multi_frame_request() {
    let mut rig = provisioned();
    // 2 + 7 bytes: two classic frames.
    let (_, out) = call(&mut rig, 1, S_MOVE, &[1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(out.len(), 1);
    let (status, body) = out[0].service();
    assert_eq!(status, ServiceStatus::Ok);
    assert_eq!(body, vec![2, 3, 4, 5]);
    assert_eq!(rig.app.calls.len(), 1);
    assert_eq!(rig.app.calls[0].0, 1);
    assert_eq!(rig.app.calls[0].2, vec![1, 2, 3, 4, 5, 6, 7]);
    // Padding after the request is dropped before the handler sees it.
    let (_, out) = call(
        &mut rig,
        1,
        S_MOVE,
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    );
    assert_eq!(out[0].service().0, ServiceStatus::Ok);
    assert_eq!(rig.app.calls[1].2.len(), 7);
}

#[test]
fn empty_request_and_response() {
    let mut rig = provisioned();
    let (_, out) = call(&mut rig, 3, S_PING, &[]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].service(), (ServiceStatus::Ok, vec![]));
    assert_eq!(rig.app.calls[0].2, Vec::<u8>::new());
}

#[test]
fn short_request_is_bad_request() {
    let mut rig = provisioned();
    let (_, out) = call(&mut rig, 0, S_MOVE, &[1, 2, 3]);
    assert_eq!(out[0].service().0, ServiceStatus::BadRequest);
    assert!(rig.app.calls.is_empty());
}

#[test]
fn bad_index_for_unknown_and_unwired() {
    let mut rig = provisioned();
    for (b, s) in [(2, S_PING), (4, S_PING), (9, S_PING), (0, 5)] {
        let (_, out) = call(&mut rig, b, s, &[]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].service().0, ServiceStatus::BadIndex, "{b}/{s}");
    }
    // A multi-frame request for an unwired block: one answer, the rest consumed quietly.
    let malformed = rig.node.counters().rx_malformed;
    let (_, out) = call(&mut rig, 2, S_MOVE, &[0; 7]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].service().0, ServiceStatus::BadIndex);
    assert_eq!(rig.node.counters().rx_malformed, malformed);
    assert!(rig.app.calls.is_empty());
}

#[test]
fn bad_state_before_ack() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    rig.take();
    let (_, out) = call(&mut rig, 0, S_PING, &[]);
    assert_eq!(out[0].service().0, ServiceStatus::BadState);
}

#[test]
fn deferred_reply_from_a_later_poll() {
    let mut rig = provisioned();
    rig.app.handler = Handler::Defer;
    let (t, out) = call(&mut rig, 0, S_MOVE, &[9, 8, 7, 6, 5, 4, 3]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].service().0, ServiceStatus::Accepted);
    let token = rig.app.calls[0].3;
    assert_eq!(token.transfer, t);
    // The master retries the same transfer: ACCEPTED again, handler not re-run.
    rig.send_as(req(0, S_MOVE, &[9, 8, 7, 6, 5, 4, 3]), t);
    let again: Vec<_> = rig.take();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].service().0, ServiceStatus::Accepted);
    assert_eq!(rig.app.calls.len(), 1);
    // Complete: nothing leaves until poll; then OK with the same transfer id.
    assert_eq!(
        rig.node.complete(token, &[1, 2, 3, 4, 5]),
        Err(CompleteError::TooLong)
    );
    rig.node.complete(token, &[1, 2, 3, 4]).unwrap();
    rig.collect();
    assert!(rig.take().is_empty());
    rig.poll();
    let m = rig.one();
    assert_eq!(m.id.transfer, t);
    assert_eq!(m.service(), (ServiceStatus::Ok, vec![1, 2, 3, 4]));
    // The token is spent.
    assert_eq!(
        rig.node.complete(token, &[1, 2, 3, 4]),
        Err(CompleteError::UnknownToken)
    );
    let bogus = DeferredToken { slot: 9, ..token };
    assert_eq!(
        rig.node.complete(bogus, &[]),
        Err(CompleteError::UnknownToken)
    );
}

#[test]
fn busy_when_slots_are_full() {
    let mut rig = provisioned();
    rig.app.handler = Handler::Defer;
    // Two slots: both held by deferred calls.
    for _ in 0..2 {
        let (_, out) = call(&mut rig, 0, S_PING, &[]);
        assert_eq!(out[0].service().0, ServiceStatus::Accepted);
    }
    let (_, out) = call(&mut rig, 1, S_PING, &[]);
    assert_eq!(out[0].service().0, ServiceStatus::Busy);
    assert_eq!(rig.node.counters().services_busy, 1);
    // Completing one frees its slot once the response is out.
    let token = rig.app.calls[0].3;
    rig.node.complete(token, &[]).unwrap();
    rig.poll();
    assert_eq!(rig.one().service().0, ServiceStatus::Ok);
    rig.app.handler = Handler::Echo;
    let (_, out) = call(&mut rig, 1, S_PING, &[]);
    assert_eq!(out[0].service().0, ServiceStatus::Ok);
}

#[test]
fn handler_outcomes_busy_and_failed() {
    let mut rig = provisioned();
    rig.app.handler = Handler::Busy;
    let (_, out) = call(&mut rig, 0, S_PING, &[]);
    assert_eq!(out[0].service().0, ServiceStatus::Busy);
    rig.app.handler = Handler::Fail;
    let (_, out) = call(&mut rig, 0, S_PING, &[]);
    assert_eq!(out[0].service().0, ServiceStatus::AppError);
}

#[test]
fn segments_out_of_order_or_never_finished() {
    let mut rig = provisioned();
    let t = rig.next_transfer();
    let frames = rig.frames_for(node_id(), &req(0, S_MOVE, &[1, 2, 3, 4, 5, 6, 7]), t);
    assert_eq!(frames.len(), 2);
    // Only the last segment: nothing.
    rig.inject(frames[1]);
    assert!(rig.take().is_empty());
    // First segment and never the rest: the slot times out and is reused.
    rig.inject(frames[0]);
    assert!(rig.take().is_empty());
    let drops = rig.node.counters().reassembly_dropped;
    rig.advance(150_000);
    assert_eq!(rig.node.counters().reassembly_dropped, drops + 1);
    // Duplicate of segment 0 then the last: the restart completes normally.
    rig.inject(frames[0]);
    rig.inject(frames[0]);
    rig.inject(frames[1]);
    let out: Vec<_> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.opcode == Opcode::Service)
        .collect();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].service().0, ServiceStatus::Ok);
    assert!(rig.app.calls.len() == 1);
    // A non-final segment that is too short is dropped.
    let id = ConfigId {
        opcode: Opcode::Service,
        dir: Direction::ToNode,
        node: node_id(),
        transfer: 200,
        segment: 0,
        eot: false,
    };
    rig.inject(Frame::classic(id.can_id(), &[0, 0, 1]).unwrap());
    assert!(rig.take().is_empty());
    assert_eq!(rig.app.calls.len(), 1);
}

#[test]
fn services_in_fd_mode() {
    let mut rig = Rig::new(true);
    rig.boot_and_ack(BusMode::FdBrs);
    let (_, out) = call(&mut rig, 0, S_MOVE, &[1, 1, 1, 1, 1, 1, 1]);
    assert!(out[0].fd);
    assert_eq!(out[0].service(), (ServiceStatus::Ok, vec![2, 2, 2, 2]));
}

#[test]
fn a_deferred_call_never_completed_expires() {
    use fcan_core::timing::DEFERRED_SERVICE_TIMEOUT_US;
    let mut rig = provisioned();
    rig.app.handler = Handler::Defer;
    // Both slots deferred; the application forgets them.
    let (t0, out) = call(&mut rig, 0, S_PING, &[]);
    assert_eq!(out[0].service().0, ServiceStatus::Accepted);
    let (t1, out) = call(&mut rig, 1, S_PING, &[]);
    assert_eq!(out[0].service().0, ServiceStatus::Accepted);
    let stale = rig.app.calls[0].3;
    // Just before the timeout: still deferred, new calls are BUSY.
    rig.advance(DEFERRED_SERVICE_TIMEOUT_US - 10_000);
    assert!(rig.take().iter().all(|m| m.id.opcode != Opcode::Service));
    let (_, out) = call(&mut rig, 0, S_MOVE, &[0; 7]);
    assert_eq!(out[0].service().0, ServiceStatus::Busy);
    // Past it: EXPIRED for each, under its own transfer id, and the slots are free.
    rig.advance(20_000);
    let expired: Vec<(u8, ServiceStatus)> = rig
        .take()
        .iter()
        .filter(|m| m.id.opcode == Opcode::Service)
        .map(|m| (m.id.transfer, m.service().0))
        .collect();
    assert_eq!(
        expired,
        vec![(t0, ServiceStatus::Expired), (t1, ServiceStatus::Expired)]
    );
    rig.app.handler = Handler::Echo;
    let (_, out) = call(&mut rig, 0, S_MOVE, &[1; 7]);
    assert_eq!(out[0].service(), (ServiceStatus::Ok, vec![2, 2, 2, 2]));
    // The forgotten token completes nothing now.
    assert_eq!(
        rig.node.complete(stale, &[]),
        Err(CompleteError::UnknownToken)
    );
}

#[test]
fn a_repeated_request_keeps_a_deferred_call_alive() {
    use fcan_core::timing::DEFERRED_SERVICE_TIMEOUT_US;
    let mut rig = provisioned();
    rig.app.handler = Handler::Defer;
    let (t, _) = call(&mut rig, 0, S_PING, &[]);
    let token = rig.app.calls[0].3;
    for _ in 0..3 {
        rig.advance(DEFERRED_SERVICE_TIMEOUT_US - 100_000);
        // The master asks again: ACCEPTED again, and the slot waits anew.
        rig.send_as(req(0, S_PING, &[]), t);
        let again: Vec<Msg> = rig
            .take()
            .into_iter()
            .filter(|m| m.id.opcode == Opcode::Service)
            .collect();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].service().0, ServiceStatus::Accepted);
    }
    rig.node.complete(token, &[]).unwrap();
    rig.poll();
    let ok: Vec<Msg> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.opcode == Opcode::Service)
        .collect();
    assert_eq!(ok[0].service().0, ServiceStatus::Ok);
}

#[test]
fn a_stale_token_cannot_complete_a_reused_slot() {
    let mut rig = provisioned();
    rig.app.handler = Handler::Defer;
    // A call with transfer id 42 is deferred, completed and answered.
    rig.send_as(req(0, S_PING, &[]), 42);
    assert_eq!(rig.one().service().0, ServiceStatus::Accepted);
    let first = rig.app.calls[0].3;
    rig.node.complete(first, &[]).unwrap();
    rig.poll();
    assert_eq!(rig.one().service().0, ServiceStatus::Ok);
    // 256 calls later the transfer id comes round again: same slot, same transfer id,
    // block and service.
    rig.send_as(req(0, S_PING, &[]), 42);
    assert_eq!(rig.one().service().0, ServiceStatus::Accepted);
    let second = rig.app.calls[1].3;
    assert_eq!(
        (second.slot, second.transfer, second.block, second.service),
        (first.slot, first.transfer, first.block, first.service)
    );
    assert_ne!(second.generation, first.generation);
    // The first call's token (kept by a buggy application) is refused...
    assert_eq!(
        rig.node.complete(first, &[]),
        Err(CompleteError::UnknownToken)
    );
    rig.poll();
    assert!(rig.take().is_empty(), "no response for the second call yet");
    // ... and the right one completes the second call.
    rig.node.complete(second, &[]).unwrap();
    rig.poll();
    assert_eq!(rig.one().service().0, ServiceStatus::Ok);
}

/// A handler reads its block's parameter and command and publishes through the
/// `Context` `poll` hands it, as the main loop would between polls.
#[test]
fn a_handler_reads_and_publishes_through_its_context() {
    let mut rig = running_rig();
    rig.app.handler = Handler::Context;
    // gain = 2.5 on block 0, committed.
    let set = rig.command(ConfigMessage::ParamSet(ParamSet {
        block: 0,
        param: P_GAIN,
        commit: true,
        value: &2.5f32.to_le_bytes(),
    }));
    assert!(set.is_ack());
    // Two commands: generation 2.
    for v in [1u8, 2] {
        let f = rig.data_frame(0x120, &[v; 5]);
        rig.inject(f);
    }
    let (_, out) = call(&mut rig, 0, S_MOVE, &[0; 7]);
    let (status, body) = out[0].service();
    assert_eq!(status, ServiceStatus::Ok);
    assert_eq!(body, 2u32.to_le_bytes().to_vec());
    // The publish is an on-commit topic: its frame goes out at the next poll.
    rig.poll();
    let sent = rig.data_with_id(0x210);
    let last = sent.last().expect("the event frame went out");
    assert_eq!(last.1.data(), &2.5f32.to_le_bytes());
    // The same context from the main loop sees what the handler published.
    let mut cx = rig.node.context();
    assert_eq!(cx.topic(0, T_EVENT).unwrap().bytes, &2.5f32.to_le_bytes());
    assert_eq!(cx.param_value(0, Param::<f32>::new(P_GAIN)), Some(2.5));
    // A command (m2s) cannot be published; a block the node does not have reads nothing.
    assert_eq!(
        cx.publish(0, T_CMD, &[0; 5]),
        Err(PublishError::WrongDirection)
    );
    assert_eq!(cx.param_value(9, Param::<f32>::new(P_GAIN)), None);
}
