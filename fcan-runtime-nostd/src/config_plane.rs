//! The configuration plane on the node: what a queued configuration frame does
//! (reassembly, the collision check, dispatch by opcode), the handlers of each master
//! message (ANNOUNCE_ACK, FRAME_DEFINE, START, PARAM_SET/GET, SCHEMA_READ, STATS) and
//! running the application's service handlers from `poll`. `Node` (in `node`) is the
//! application's side; this is the master's.

use crate::api::{ServiceCall, ServiceOutcome};
use crate::context::Context;
use crate::counters::bump;
use crate::desc::NodeDesc;
use crate::dispatch::Dispatch;
use crate::lifecycle::Input;
use crate::outq::{Body, OutMsg, OutQueue};
use crate::plan;
use crate::services::{self, Ctx, SvcAction};
use crate::state::Core;
use crate::storage::Parts;
use crate::tables::SlotState;
use crate::{params, sched};
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::{
    AnnounceAck, BusMode, ConfigMessage, FrameDefine, NodeState, ParamValue, ResultCode,
    SchemaData, SchemaRead, ServiceResponse, ServiceStatus, Start,
};
use fcan_core::segment::ReassemblyPool;
use fcan_core::timing::{At, Us};

/// One configuration-plane frame from the receive queue. A message that moves the life
/// cycle (ANNOUNCE_ACK, a master HEARTBEAT, START, FRAME_DEFINE index 0, an id collision)
/// sets `then` to its [`Input`]; the caller steps it (`Core::step`) and delivers the
/// events, so this module holds no application for them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn handle_frame<const S: usize, const N: usize>(
    desc: &'static NodeDesc,
    core: &mut Core,
    p: &mut Parts<'_>,
    pool: &mut ReassemblyPool<S, N>,
    outq: &mut OutQueue,
    then: &mut Option<Input>,
    raw: u32,
    data: &[u8],
    now: At,
    app: &mut impl Dispatch,
) {
    let Ok(id) = ConfigId::from_raw(raw) else {
        bump(&mut core.counters.rx_malformed);
        return;
    };
    if id.dir == Direction::ToMaster {
        collision(core, then, &id, data);
        return;
    }
    if core.life.is_listening() {
        // Silent while listening. A broadcast (the master's HEARTBEAT, DISCOVER) is
        // normal traffic; a frame for our id means a master still talks to our previous
        // boot, and what it said is lost.
        if id.node.is_broadcast() {
            bump(&mut core.counters.rx_ignored);
        } else {
            bump(&mut core.counters.rx_bad_state);
        }
        return;
    }
    if id.opcode == Opcode::Service {
        if id.node.is_broadcast() {
            bump(&mut core.counters.rx_ignored);
            return;
        }
        let cx = Ctx {
            desc,
            wired: &core.wired,
            serving: matches!(
                core.life.state(),
                NodeState::Provisioned | NodeState::Running
            ),
            slots: core.svc_slots,
            now,
        };
        let action =
            services::on_frame(&cx, p, &mut core.counters, &mut core.svc_discard, id, data);
        if let SvcAction::Reply {
            block,
            service,
            status,
        } = action
        {
            let msg = ConfigMessage::ServiceResponse(ServiceResponse {
                block,
                service,
                status,
                body: &[],
            });
            let rid = core.reply_id(Opcode::Service, &id);
            core.reply(outq, rid, &msg);
        }
        return;
    }
    // Only DISCOVER and the master HEARTBEAT are meant for everyone, and both are single
    // frames: checked before reassembly, so a broadcast transfer (from nothing that
    // conforms) never holds the node's one reassembly buffer.
    if id.node.is_broadcast() && !matches!(id.opcode, Opcode::Discover | Opcode::Heartbeat) {
        bump(&mut core.counters.rx_ignored);
        return;
    }
    let Some(msg) = reassemble(core, pool, id, data, now) else {
        return;
    };
    match ConfigMessage::decode_to_node(id.opcode, msg) {
        Ok(m) => {
            bump(&mut core.counters.rx_handled);
            on_message(desc, core, p, outq, then, &id, m, now, app);
        }
        Err(_) => {
            bump(&mut core.counters.rx_malformed);
            if matches!(
                id.opcode,
                Opcode::Start
                    | Opcode::FrameDefine
                    | Opcode::ParamSet
                    | Opcode::ParamGet
                    | Opcode::Schema
                    | Opcode::Stats
            ) {
                core.result(outq, &id, ResultCode::BadLength, 0);
            }
        }
    }
}

/// A node→master frame under our own id. Only the first segment of an ANNOUNCE or a
/// HEARTBEAT with another boot_id proves that another node holds the id; everything
/// else (our own RESULT, SCHEMA_DATA, STATS, ... echoed by the controller, or heard from
/// a second controller on the bus) cannot be told from an echo and is ignored.
fn collision(core: &mut Core, then: &mut Option<Input>, id: &ConfigId, data: &[u8]) {
    let boot = fcan_core::msg::peek_boot_id(id, data);
    // A node holding the id answers an ANNOUNCE (a newcomer, which hears the answer and
    // faults) but never a HEARTBEAT: only an acknowledged node sends one, and two
    // acknowledged nodes answering each other's would never stop (§5.3 rule 2). The
    // master tells them apart by their boot ids and serves neither.
    let answered_elsewhere = id.opcode == Opcode::Heartbeat && core.life.holds_id();
    if boot.is_none_or(|b| b == core.boot_id) || answered_elsewhere {
        // No boot named (a foreign frame, a later segment, our own echo): proof of
        // nothing; or a foreign HEARTBEAT, the master's to judge.
        bump(&mut core.counters.rx_ignored);
        return;
    }
    bump(&mut core.counters.rx_handled);
    // Never acknowledged: FAULT; holding the id: a HEARTBEAT asserts it.
    *then = Some(Input::IdCollision);
}

/// Whether `id` is a segment before the last of a master→node transfer for this node
/// that the node takes now (not listening; services have their own reassembly): one that
/// needs neither a reply nor the application, only [`reassemble`].
pub(crate) fn inner_segment(core: &Core, id: &ConfigId) -> bool {
    id.dir == Direction::ToNode
        && !id.eot
        && id.opcode != Opcode::Service
        && !id.node.is_broadcast()
        && !core.life.is_listening()
}

/// One frame of a configuration transfer into the reassembly buffer: the whole message
/// once its last segment is in. Every failure is counted.
pub(crate) fn reassemble<'p, const S: usize, const N: usize>(
    core: &mut Core,
    pool: &'p mut ReassemblyPool<S, N>,
    id: ConfigId,
    data: &'p [u8],
    now: At,
) -> Option<&'p [u8]> {
    match pool.push(id, data, now.0) {
        Ok(Some(m)) => Some(m),
        Ok(None) => {
            bump(&mut core.counters.rx_handled);
            None
        }
        Err(fcan_core::segment::ReassemblyError::NoSlot) => {
            bump(&mut core.counters.reassembly_dropped);
            None
        }
        Err(_) => {
            // Gaps, overflows and short segments are counted by the pool.
            bump(&mut core.counters.rx_malformed);
            None
        }
    }
}

/// A complete, decoded master→node message.
#[allow(clippy::too_many_arguments)]
fn on_message(
    desc: &'static NodeDesc,
    core: &mut Core,
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    then: &mut Option<Input>,
    id: &ConfigId,
    msg: ConfigMessage<'_>,
    now: At,
    app: &mut impl Dispatch,
) {
    // Only UPDATE needs the application here (its staging flash).
    let _ = &app;
    match msg {
        ConfigMessage::MasterHeartbeat(hb) => {
            let session = hb.session;
            *then = Some(Input::MasterHeartbeat { session });
        }
        ConfigMessage::Discover(_) => {
            core.announce(outq);
        }
        ConfigMessage::AnnounceAck(a) => on_ack(core, outq, then, id, a),
        ConfigMessage::Start(s) => on_start(core, p, outq, then, id, s, now),
        ConfigMessage::FrameDefine(d) => on_define(desc, core, p, outq, then, id, &d),
        ConfigMessage::ParamSet(m) => {
            if !core.life.acknowledged() {
                core.result(outq, id, ResultCode::BadState, 0);
                return;
            }
            let r = params::set(desc, &core.wired, p, &m);
            if m.commit {
                core.commit_pending = true;
            }
            match r {
                Ok(()) => core.result(outq, id, ResultCode::Ok, 0),
                Err((code, detail)) => core.result(outq, id, code, detail),
            }
        }
        ConfigMessage::ParamGet(g) => {
            if !core.life.acknowledged() {
                core.result(outq, id, ResultCode::BadState, 0);
                return;
            }
            match params::get_range(desc, &core.wired, g.block, g.param) {
                Ok(r) => {
                    let (mtu, brs) = core.tx_mode();
                    let rid = core.reply_id(Opcode::ParamGet, id);
                    let value = p.params.get(r.clone()).unwrap_or(&[]);
                    let msg = ConfigMessage::ParamValue(ParamValue {
                        block: g.block,
                        param: g.param,
                        value,
                    });
                    // Too big to keep encoded: read it from the arena when sent.
                    let m = OutMsg::inline(rid, mtu, brs, &msg).unwrap_or(OutMsg::new(
                        rid,
                        mtu,
                        brs,
                        Body::Param {
                            block: g.block,
                            param: g.param,
                            start: r.start as u32,
                            len: r.len() as u16,
                        },
                    ));
                    outq.push(m);
                }
                Err((code, detail)) => core.result(outq, id, code, detail),
            }
        }
        ConfigMessage::StatsRead => {
            let rid = core.reply_id(Opcode::Stats, id);
            let counters = core.counters;
            core.reply(outq, rid, &ConfigMessage::Stats(counters));
        }
        ConfigMessage::SchemaRead(r) => on_schema_read(desc, core, outq, id, r),
        #[cfg(feature = "update")]
        ConfigMessage::UpdateRequest(r) => {
            crate::update::on_request(desc.blob, core, outq, id, r, app.update());
        }
        // Node→master messages never decode from a master→node frame.
        _ => {}
    }
}

fn on_schema_read(
    desc: &'static NodeDesc,
    core: &mut Core,
    outq: &mut OutQueue,
    id: &ConfigId,
    r: SchemaRead,
) {
    let blob_len = desc.blob.len();
    let offset = (r.offset as usize).min(blob_len);
    let (mtu, brs) = core.tx_mode();
    let n = (r.len as usize)
        .min(blob_len - offset)
        .min(SchemaData::max_chunk(mtu.payload()));
    let rid = core.reply_id(Opcode::Schema, id);
    // Past the end: an empty chunk at the offset asked for.
    let at = if n == 0 { r.offset } else { offset as u32 };
    outq.push(OutMsg::new(
        rid,
        mtu,
        brs,
        Body::Schema {
            offset: at,
            len: n as u16,
        },
    ));
}

fn on_ack(
    core: &mut Core,
    outq: &mut OutQueue,
    then: &mut Option<Input>,
    id: &ConfigId,
    a: AnnounceAck,
) {
    if a.boot_id != core.boot_id {
        return;
    }
    if a.mode != BusMode::Classic && !core.fd_capable {
        core.result(outq, id, ResultCode::Unsupported, 0);
        return;
    }
    // PROVISIONED (RUNNING stays so in the same mode); a plan for the other mode is void.
    let input = Input::Acked {
        session: a.session,
        mode: a.mode,
    };
    *then = Some(input);
}

fn on_start(
    core: &mut Core,
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    then: &mut Option<Input>,
    id: &ConfigId,
    s: Start,
    now: At,
) {
    if !core.life.acknowledged() {
        core.result(outq, id, ResultCode::BadState, 0);
        return;
    }
    let start = Input::Start {
        timeout: Us::from_ms(s.master_timeout_ms),
    };
    match core.life.state() {
        NodeState::Running => {
            // A retried START (our ACK was lost): same plan, same answer.
            if s.frame_count as u16 == core.plan.frames {
                *then = Some(start);
                core.result(outq, id, ResultCode::Ok, 0);
            } else {
                core.result(outq, id, ResultCode::BadState, 0);
            }
        }
        NodeState::Provisioned | NodeState::Suspended => {
            if let Err((code, detail)) = plan::check_start(p, &core.plan, s.frame_count) {
                core.result(outq, id, code, detail);
                return;
            }
            core.plan.m2s = plan::build_index(p, &core.plan);
            for t in p.topics.iter_mut() {
                t.stop_staging();
            }
            sched::start(core, p, now);
            core.result(outq, id, ResultCode::Ok, 0);
            *then = Some(start);
        }
        NodeState::Unprovisioned | NodeState::Fault => {
            core.result(outq, id, ResultCode::BadState, 0)
        }
    }
}

fn on_define(
    desc: &'static NodeDesc,
    core: &mut Core,
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    then: &mut Option<Input>,
    id: &ConfigId,
    d: &FrameDefine<'_>,
) {
    let index = d.header.index;
    let allowed = core.life.acknowledged()
        && match core.life.state() {
            NodeState::Provisioned => true,
            NodeState::Running | NodeState::Suspended => index == 0,
            NodeState::Unprovisioned | NodeState::Fault => false,
        };
    if !allowed {
        core.result(outq, id, ResultCode::BadState, 0);
        return;
    }
    let mtu = core.life.mode().mtu().payload();
    match plan::define(desc, &core.wired, p, &mut core.plan, mtu, d) {
        Ok(()) => {
            if index == 0 {
                // A new plan: PROVISIONED again if running or suspended.
                *then = Some(Input::PlanRedefined);
            }
            core.result(outq, id, ResultCode::Ok, 0);
        }
        Err((code, detail)) => core.result(outq, id, code, detail),
    }
}

/// Runs handlers of complete requests and queues the responses of completed deferred
/// calls, one per free place in the outgoing queue.
pub(crate) fn run_services(
    desc: &'static NodeDesc,
    core: &mut Core,
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
) {
    for i in 0..core.svc_slots {
        if outq.free() == 0 {
            return;
        }
        let Some(s) = p.svc.get(i).copied() else {
            return;
        };
        let rid = ConfigId::single(
            Opcode::Service,
            Direction::ToMaster,
            core.node_id,
            s.transfer,
        );
        let (mtu, brs) = core.tx_mode();
        let ok_body = Body::Service {
            slot: i as u8,
            block: s.block,
            service: s.service,
        };
        match s.state {
            SlotState::Ready => {
                let token = services::token(&s, i);
                let (mut cx, rest) = Context::split(desc, core, p.reborrow());
                let Some((req, resp)) =
                    services::regions_of(rest.svc, rest.svc_buf, rest.svc_buf_len, i)
                else {
                    if let Some(s) = rest.svc.get_mut(i) {
                        s.state = SlotState::Free;
                    }
                    continue;
                };
                let call = ServiceCall {
                    block: s.block,
                    service: s.service,
                    request: req,
                    token,
                };
                let resp_cap = resp.len();
                let outcome = app.service(&mut cx, call, resp);
                let status = match outcome {
                    ServiceOutcome::Done(n) if n <= resp_cap => {
                        if let Some(slot) = p.svc.get_mut(i) {
                            slot.resp_len = n as u16;
                            slot.state = SlotState::Responding;
                        }
                        outq.push(OutMsg::new(rid, mtu, brs, ok_body));
                        continue;
                    }
                    ServiceOutcome::Done(_) | ServiceOutcome::Failed => ServiceStatus::AppError,
                    ServiceOutcome::Accepted => ServiceStatus::Accepted,
                    ServiceOutcome::Busy => {
                        bump(&mut core.counters.services_busy);
                        ServiceStatus::Busy
                    }
                    ServiceOutcome::BadRequest => ServiceStatus::BadRequest,
                };
                if status == ServiceStatus::Accepted {
                    services::defer(p, i, core.now);
                } else if let Some(slot) = p.svc.get_mut(i) {
                    slot.state = SlotState::Free;
                }
                let msg = ConfigMessage::ServiceResponse(ServiceResponse {
                    block: s.block,
                    service: s.service,
                    status,
                    body: &[],
                });
                core.reply(outq, rid, &msg);
            }
            SlotState::Completed => {
                if let Some(slot) = p.svc.get_mut(i) {
                    slot.state = SlotState::Responding;
                }
                outq.push(OutMsg::new(rid, mtu, brs, ok_body));
            }
            SlotState::Expired => {
                // The application never completed the call: tell the master, free the
                // slot (a late `complete` finds no call for its token).
                if let Some(slot) = p.svc.get_mut(i) {
                    slot.state = SlotState::Free;
                }
                let msg = ConfigMessage::ServiceResponse(ServiceResponse {
                    block: s.block,
                    service: s.service,
                    status: ServiceStatus::Expired,
                    body: &[],
                });
                core.reply(outq, rid, &msg);
            }
            _ => {}
        }
    }
}
