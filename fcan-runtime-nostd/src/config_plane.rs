//! The configuration plane on the node: what a queued configuration frame does
//! (reassembly, the collision check, dispatch by opcode), the handlers of each master
//! message (ANNOUNCE_ACK, FRAME_DEFINE, START, PARAM_SET/GET, SCHEMA_READ, STATS) and
//! running the application's service handlers from `poll`. `Node` (in `node`) is the
//! application's side; this is the master's.

use crate::api::{Event, ServiceCall, ServiceOutcome};
use crate::context::Context;
use crate::counters::bump;
use crate::desc::NodeDesc;
use crate::dispatch::Dispatch;
use crate::outq::{Body, OutMsg, OutQueue};
use crate::plan::{self, PlanCounts};
use crate::services::{self, Ctx, SvcAction};
use crate::state::Core;
use crate::storage::Parts;
use crate::tables::SlotState;
use crate::{params, sched};
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::{
    AnnounceAck, BusMode, ConfigMessage, FaultCode, FrameDefine, NodeState, ParamValue, ResultCode,
    SchemaData, SchemaRead, ServiceResponse, ServiceStatus, Start,
};
use fcan_core::segment::ReassemblyPool;
use fcan_core::timing::{At, Us};

/// One configuration-plane frame from the receive queue.
#[allow(clippy::too_many_arguments)]
pub(crate) fn handle_frame<const S: usize, const N: usize>(
    desc: &'static NodeDesc,
    core: &mut Core,
    p: &mut Parts<'_>,
    pool: &mut ReassemblyPool<S, N>,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    raw: u32,
    data: &[u8],
    now: At,
) {
    let Ok(id) = ConfigId::from_raw(raw) else {
        bump(&mut core.counters.rx_malformed);
        return;
    };
    if id.dir == Direction::ToMaster {
        collision(core, outq, app, &id, data);
        return;
    }
    if core.listening {
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
            serving: matches!(core.state, NodeState::Provisioned | NodeState::Running),
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
            on_message(desc, core, p, outq, app, &id, m, now);
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
fn collision(
    core: &mut Core,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    id: &ConfigId,
    data: &[u8],
) {
    let boot = fcan_core::msg::peek_boot_id(id, data);
    if boot.is_none_or(|b| b == core.boot_id) {
        // No boot named (a foreign frame, a later segment, our own echo): proof of nothing.
        bump(&mut core.counters.rx_ignored);
        return;
    }
    bump(&mut core.counters.rx_handled);
    if core.state == NodeState::Unprovisioned {
        // We were never acknowledged: the other node has the better claim.
        core.enter_fault(FaultCode::IdCollision, outq, app);
    } else {
        // We hold the id: assert it so the master sees two boot_ids and the newcomer,
        // unacknowledged, hears us and faults.
        core.heartbeat(outq);
    }
}

/// Whether `id` is a segment before the last of a master→node transfer for this node
/// that the node takes now (not listening; services have their own reassembly): one that
/// needs neither a reply nor the application, only [`reassemble`].
pub(crate) fn inner_segment(core: &Core, id: &ConfigId) -> bool {
    id.dir == Direction::ToNode
        && !id.eot
        && id.opcode != Opcode::Service
        && !id.node.is_broadcast()
        && !core.listening
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
    app: &mut impl Dispatch,
    id: &ConfigId,
    msg: ConfigMessage<'_>,
    now: At,
) {
    match msg {
        ConfigMessage::MasterHeartbeat(hb) => {
            if !core.acknowledged {
                return;
            }
            if hb.session == core.session {
                core.last_master = now;
            } else {
                // Another master took over: it must acknowledge us before it may command.
                core.acknowledged = false;
                core.start_announcing(now);
            }
        }
        ConfigMessage::Discover(_) => {
            core.announce(outq);
        }
        ConfigMessage::AnnounceAck(a) => on_ack(core, p, outq, app, id, a, now),
        ConfigMessage::Start(s) => on_start(core, p, outq, app, id, s, now),
        ConfigMessage::FrameDefine(d) => on_define(desc, core, p, outq, app, id, &d),
        ConfigMessage::ParamSet(m) => {
            if !core.acknowledged {
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
            if !core.acknowledged {
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
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    id: &ConfigId,
    a: AnnounceAck,
    now: At,
) {
    if a.boot_id != core.boot_id {
        return;
    }
    if a.mode != BusMode::Classic && !core.fd_capable {
        core.result(outq, id, ResultCode::Unsupported, 0);
        return;
    }
    let mode_changed = a.mode != core.mode;
    core.acknowledged = true;
    core.session = a.session;
    core.mode = a.mode;
    core.announcing = false;
    match core.state {
        NodeState::Running if !mode_changed => {}
        NodeState::Running => {
            // The plan's frame lengths were for the other mode.
            reset_plan(core, p);
            core.state = NodeState::Provisioned;
            app.event(Event::PlanReset);
        }
        _ => {
            if mode_changed {
                reset_plan(core, p);
            }
            core.state = NodeState::Provisioned;
        }
    }
    core.last_master = now;
    // The first heartbeat tells the master the acknowledgement arrived.
    core.heartbeat_due = now;
    app.event(Event::Acknowledged);
}

fn reset_plan(core: &mut Core, p: &mut Parts<'_>) {
    core.plan = PlanCounts::EMPTY;
    core.resume.clear();
    for t in p.topics.iter_mut() {
        t.stop_staging();
    }
}

fn on_start(
    core: &mut Core,
    p: &mut Parts<'_>,
    outq: &mut OutQueue,
    app: &mut impl Dispatch,
    id: &ConfigId,
    s: Start,
    now: At,
) {
    if !core.acknowledged {
        core.result(outq, id, ResultCode::BadState, 0);
        return;
    }
    match core.state {
        NodeState::Running => {
            // A retried START (our ACK was lost): same plan, same answer.
            if s.frame_count as u16 == core.plan.frames {
                core.watchdog = Us::from_ms(s.master_timeout_ms);
                core.last_master = now;
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
            core.watchdog = Us::from_ms(s.master_timeout_ms);
            core.last_master = now;
            core.state = NodeState::Running;
            core.announcing = false;
            core.result(outq, id, ResultCode::Ok, 0);
            app.event(Event::Started);
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
    app: &mut impl Dispatch,
    id: &ConfigId,
    d: &FrameDefine<'_>,
) {
    let index = d.header.index;
    let allowed = core.acknowledged
        && match core.state {
            NodeState::Provisioned => true,
            NodeState::Running | NodeState::Suspended => index == 0,
            NodeState::Unprovisioned | NodeState::Fault => false,
        };
    if !allowed {
        core.result(outq, id, ResultCode::BadState, 0);
        return;
    }
    let mtu = core.mode.mtu().payload();
    match plan::define(desc, &core.wired, p, &mut core.plan, mtu, d) {
        Ok(()) => {
            if index == 0 && core.state != NodeState::Provisioned {
                core.state = NodeState::Provisioned;
                core.resume.clear();
                for t in p.topics.iter_mut() {
                    t.stop_staging();
                }
                app.event(Event::PlanReset);
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
