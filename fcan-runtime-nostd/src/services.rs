//! Service calls: reassembly of requests into the configured slots, the slot life cycle
//! (receiving → ready → handled → responding, or deferred → completed → responding),
//! and completion of deferred calls.
//!
//! A slot keeps the request at the front of its buffer and the response right after it,
//! so the handler reads one while writing the other, and the response is sent straight
//! from the slot (never copied) before the slot is freed.

use crate::api::DeferredToken;
use crate::counters::bump;
use crate::desc::NodeDesc;
use crate::error::CompleteError;
use crate::storage::Parts;
use crate::tables::{SlotState, SvcSlot};
use crate::topics::copy;
use crate::wired::Wired;
use fcan_core::frame::{CLASSIC_MAX_LEN, FD_MAX_LEN};
use fcan_core::id::{ConfigId, Opcode};
use fcan_core::msg::{ConfigMessage, Counters, ServiceStatus};
use fcan_core::segment::TRANSFER_TIMEOUT_US;
use fcan_core::timing::{At, Us, DEFERRED_SERVICE_TIMEOUT_US};

/// What the caller must send for a request frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SvcAction {
    /// Nothing (a segment was taken, or dropped and counted).
    None,
    /// A status-only response, echoing the request's transfer id.
    Reply {
        block: u8,
        service: u8,
        status: ServiceStatus,
    },
}

/// Slot `i`'s buffer.
pub(crate) fn slot_buf<'a>(p: &'a mut Parts<'_>, i: usize) -> Option<&'a mut [u8]> {
    let len = p.svc_buf_len;
    let start = i.checked_mul(len)?;
    p.svc_buf.get_mut(start..start.checked_add(len)?)
}

/// Slot `i`'s request and response regions.
pub(crate) fn regions<'a>(p: &'a mut Parts<'_>, i: usize) -> Option<(&'a [u8], &'a mut [u8])> {
    regions_of(p.svc, p.svc_buf, p.svc_buf_len, i)
}

/// [`regions`] from the service buffers alone (the application's [`crate::Context`]
/// holds the others meanwhile).
pub(crate) fn regions_of<'a>(
    svc: &[SvcSlot],
    svc_buf: &'a mut [u8],
    len: usize,
    i: usize,
) -> Option<(&'a [u8], &'a mut [u8])> {
    let s = *svc.get(i)?;
    let start = i.checked_mul(len)?;
    let buf = svc_buf.get_mut(start..start.checked_add(len)?)?;
    let (req, rest) = buf.split_at_mut_checked(s.req_size as usize)?;
    let resp = rest.get_mut(..s.resp_size as usize)?;
    Some((req, resp))
}

/// Slot `i`'s response body as it will go out.
pub(crate) fn response<'a>(p: &'a Parts<'_>, i: usize) -> Option<&'a [u8]> {
    let s = p.svc.get(i)?;
    let start = i
        .checked_mul(p.svc_buf_len)?
        .checked_add(s.req_size as usize)?;
    p.svc_buf
        .get(start..start.checked_add(s.resp_len as usize)?)
}

/// Whether a non-final segment has the length the segmentation rule demands.
fn full(len: usize) -> bool {
    len == CLASSIC_MAX_LEN || len == FD_MAX_LEN
}

/// Copies request body bytes into a slot, keeping only the first `req_size` (the rest
/// is padding).
fn absorb(p: &mut Parts<'_>, i: usize, data: &[u8]) {
    let Some(s) = p.svc.get(i).copied() else {
        return;
    };
    let at = s.received as usize;
    let keep = (s.req_size as usize).saturating_sub(at).min(data.len());
    if let Some(buf) = slot_buf(p, i) {
        copy(buf, at, data, 0, keep);
    }
    if let Some(s) = p.svc.get_mut(i) {
        s.received = s
            .received
            .saturating_add(data.len().min(u16::MAX as usize) as u16);
    }
}

/// The last segment arrived: the call is ready, or too short (BAD_REQUEST).
fn finish(p: &mut Parts<'_>, i: usize) -> SvcAction {
    let Some(s) = p.svc.get_mut(i) else {
        return SvcAction::None;
    };
    if s.received < s.req_size {
        s.state = SlotState::Free;
        return SvcAction::Reply {
            block: s.block,
            service: s.service,
            status: ServiceStatus::BadRequest,
        };
    }
    s.state = SlotState::Ready;
    SvcAction::None
}

/// Everything a request frame needs to know about the node.
pub(crate) struct Ctx<'d> {
    pub desc: &'d NodeDesc,
    pub wired: &'d Wired,
    /// Services are served in the node's current state.
    pub serving: bool,
    /// Slots in use (≤ the storage's).
    pub slots: usize,
    pub now: At,
}

/// Takes one service request frame addressed to this node.
pub(crate) fn on_frame(
    cx: &Ctx<'_>,
    p: &mut Parts<'_>,
    counters: &mut Counters,
    discard: &mut Option<u8>,
    id: ConfigId,
    data: &[u8],
) -> SvcAction {
    let slots = cx.slots.min(p.svc.len());
    if id.segment != 0 {
        let found = p
            .svc
            .iter()
            .take(slots)
            .position(|s| s.state == SlotState::Receiving && s.transfer == id.transfer);
        let Some(i) = found else {
            if *discard == Some(id.transfer) {
                // The rest of a request already answered (BUSY, BAD_INDEX, ...).
                bump(&mut counters.rx_handled);
                if id.eot {
                    *discard = None;
                }
            } else {
                bump(&mut counters.rx_malformed);
            }
            return SvcAction::None;
        };
        let Some(s) = p.svc.get_mut(i) else {
            return SvcAction::None;
        };
        if id.segment != s.next_seg || (!id.eot && data.len() != s.seg_len as usize) {
            s.state = SlotState::Free;
            bump(&mut counters.reassembly_dropped);
            return SvcAction::None;
        }
        s.next_seg = s.next_seg.saturating_add(1);
        s.last = cx.now;
        bump(&mut counters.rx_handled);
        absorb(p, i, data);
        return if id.eot {
            finish(p, i)
        } else {
            SvcAction::None
        };
    }

    // Segment 0: a new request (or a retry of one).
    if !id.eot && !full(data.len()) {
        bump(&mut counters.rx_malformed);
        return SvcAction::None;
    }
    let Ok(ConfigMessage::ServiceRequest(req)) =
        ConfigMessage::decode_to_node(Opcode::Service, data)
    else {
        bump(&mut counters.rx_malformed);
        return SvcAction::None;
    };
    bump(&mut counters.rx_handled);
    *discard = None;
    // A restarted transfer replaces its unfinished predecessor.
    for s in p.svc.iter_mut().take(slots) {
        if s.state == SlotState::Receiving && s.transfer == id.transfer {
            s.state = SlotState::Free;
            bump(&mut counters.reassembly_dropped);
        }
    }
    let same_call =
        |s: &SvcSlot| s.transfer == id.transfer && s.block == req.block && s.service == req.service;
    let mut busy_with_it = None;
    for s in p.svc.iter_mut().take(slots) {
        if same_call(s) && s.state != SlotState::Free {
            busy_with_it = Some(s.state);
            if s.state == SlotState::Deferred {
                // The master is still waiting: so does the slot.
                s.last = cx.now;
            }
        }
    }
    let mut reply = |status| {
        if !id.eot {
            *discard = Some(id.transfer);
        }
        SvcAction::Reply {
            block: req.block,
            service: req.service,
            status,
        }
    };
    match busy_with_it {
        // The master retried a deferred call: remind it, do not run the handler again.
        Some(SlotState::Deferred) => return reply(ServiceStatus::Accepted),
        // Already being handled or answered: the answer is on its way.
        Some(_) => {
            if !id.eot {
                *discard = Some(id.transfer);
            }
            return SvcAction::None;
        }
        None => {}
    }
    if !cx.serving {
        bump(&mut counters.rx_bad_state);
        return reply(ServiceStatus::BadState);
    }
    let Some((_, td)) = cx.desc.block(req.block) else {
        return reply(ServiceStatus::BadIndex);
    };
    let Some(sd) = td.services.get(req.service as usize) else {
        return reply(ServiceStatus::BadIndex);
    };
    if !cx.wired.get(req.block) {
        return reply(ServiceStatus::BadIndex);
    }
    let free = p
        .svc
        .iter()
        .take(slots)
        .position(|s| s.state == SlotState::Free);
    let Some(i) = free else {
        bump(&mut counters.services_busy);
        return reply(ServiceStatus::Busy);
    };
    if let Some(s) = p.svc.get_mut(i) {
        let generation = s.generation.wrapping_add(1);
        *s = SvcSlot {
            generation,
            state: SlotState::Receiving,
            transfer: id.transfer,
            block: req.block,
            service: req.service,
            next_seg: 1,
            seg_len: data.len() as u8,
            received: 0,
            last: cx.now,
            req_size: sd.request_size,
            resp_size: sd.response_size,
            resp_len: 0,
        };
    }
    absorb(p, i, req.body);
    if id.eot {
        finish(p, i)
    } else {
        SvcAction::None
    }
}

/// Frees slots whose request stopped arriving, and gives up deferred calls the
/// application left uncompleted (their EXPIRED answer goes out from `poll`).
pub(crate) fn expire(p: &mut Parts<'_>, counters: &mut Counters, now: At) {
    for s in p.svc.iter_mut() {
        let idle = now.since(s.last);
        if s.state == SlotState::Receiving && idle > Us(TRANSFER_TIMEOUT_US) {
            s.state = SlotState::Free;
            bump(&mut counters.reassembly_dropped);
        } else if s.state == SlotState::Deferred && idle > Us(DEFERRED_SERVICE_TIMEOUT_US) {
            s.state = SlotState::Expired;
        }
    }
}

/// When slot `s` next needs a poll: `Some(None)` now (a handler to run or a reply to
/// send), `Some(Some(t))` at `t` (the first instant [`expire`] times it out), `None`
/// never.
pub(crate) fn due(s: &SvcSlot) -> Option<Option<At>> {
    match s.state {
        SlotState::Ready | SlotState::Completed | SlotState::Expired => Some(None),
        SlotState::Receiving => Some(Some(s.last + Us(TRANSFER_TIMEOUT_US + 1))),
        SlotState::Deferred => Some(Some(s.last + Us(DEFERRED_SERVICE_TIMEOUT_US + 1))),
        SlotState::Free | SlotState::Responding => None,
    }
}

/// The handler deferred slot `i`'s call at `now`.
pub(crate) fn defer(p: &mut Parts<'_>, i: usize, now: At) {
    if let Some(s) = p.svc.get_mut(i) {
        s.state = SlotState::Deferred;
        s.last = now;
    }
}

/// The token of slot `i`.
pub(crate) fn token(s: &SvcSlot, i: usize) -> DeferredToken {
    DeferredToken {
        slot: i as u8,
        transfer: s.transfer,
        block: s.block,
        service: s.service,
        generation: s.generation,
    }
}

/// Delivers the response of a deferred call; it goes out from the next poll.
pub(crate) fn complete(
    p: &mut Parts<'_>,
    tok: DeferredToken,
    fill: impl FnOnce(&mut [u8]) -> Result<usize, CompleteError>,
) -> Result<(), CompleteError> {
    let i = tok.slot as usize;
    let s = p.svc.get(i).copied().ok_or(CompleteError::UnknownToken)?;
    if s.state != SlotState::Deferred || token(&s, i) != tok {
        return Err(CompleteError::UnknownToken);
    }
    let (_, resp) = regions(p, i).ok_or(CompleteError::UnknownToken)?;
    let cap = resp.len();
    let n = fill(resp)?;
    if n > cap {
        return Err(CompleteError::TooLong);
    }
    if let Some(s) = p.svc.get_mut(i) {
        s.resp_len = n as u16;
        s.state = SlotState::Completed;
    }
    Ok(())
}
