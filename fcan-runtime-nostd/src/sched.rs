//! The s2m scheduler: periodic frames when due, on-commit frames after a publish, and
//! multi-frame groups sent whole under one fresh sequence number.
//!
//! A refused frame stops data transmission for this poll. A group cut short by a refusal
//! resumes with its next part and the same sequence number, unless one of its topics was
//! published in between: then it restarts from part 0 with a new sequence number, so
//! the master never assembles parts of two different values.

use crate::api::{Transmit, TxRefused};
use crate::counters::bump;
use crate::desc::NodeDesc;
use crate::state::{Core, Resume, ResumeSlot};
use crate::storage::Parts;
use crate::tables::{PlanEntry, PlanFrame};
use crate::topics::{bit_of_slot, build_s2m};
use fcan_core::frame::{CanId, Frame};
use fcan_core::msg::BusMode;
use fcan_core::presence::PresenceBits;
use fcan_core::timing::{At, Us};

/// Sends one plan frame.
fn send(
    desc: &'static NodeDesc,
    core: &mut Core,
    p: &Parts<'_>,
    fi: u16,
    seq: u8,
    tx: &mut impl Transmit,
) -> Result<(), TxRefused> {
    let mut buf = [0u8; 64];
    let (Some(len), Some(f)) = (
        build_s2m(desc, p, fi, seq, &mut buf),
        p.frames.get(fi as usize),
    ) else {
        return Ok(());
    };
    let Some(data) = buf.get(..len) else {
        return Ok(());
    };
    let mode = core.life.mode();
    let Ok(frame) = Frame::padded(mode.mtu(), CanId::Standard(f.std_id), data) else {
        return Ok(());
    };
    let frame = if mode == BusMode::FdBrs {
        frame
    } else {
        frame.without_brs()
    };
    if tx.transmit(&frame).is_err() {
        bump(&mut core.counters.tx_refused);
        return Err(TxRefused);
    }
    bump(&mut core.counters.tx_frames);
    Ok(())
}

/// Sends parts `from..` of the group starting at `head`.
fn send_group(
    desc: &'static NodeDesc,
    core: &mut Core,
    p: &Parts<'_>,
    head: u16,
    from: u8,
    seq: u8,
    tx: &mut impl Transmit,
) -> Result<(), TxRefused> {
    let parts = p
        .frames
        .get(head as usize)
        .map_or(1, |f| f.group_parts.max(1));
    for k in from..parts {
        if let Err(e) = send(desc, core, p, head.saturating_add(k as u16), seq, tx) {
            core.resume.set(Resume {
                head,
                part: k,
                seq,
                valid: true,
            });
            return Err(e);
        }
    }
    Ok(())
}

/// The group at `head` went out: plan its next time.
fn reschedule(p: &mut Parts<'_>, head: u16, now: At) {
    let Some(f) = p.frames.get_mut(head as usize) else {
        return;
    };
    f.pending = 0;
    if f.period > Us(0) {
        let next = f.next_due + f.period;
        // Keep the period's grid, unless polling fell a whole period behind.
        f.next_due = if now.reached(next) {
            now + f.period
        } else {
            next
        };
    }
}

fn due(f: &PlanFrame, now: At) -> bool {
    f.s2m
        && f.group_index == 0
        && if f.period > Us(0) {
            now.reached(f.next_due)
        } else {
            f.pending != 0
        }
}

fn next_seq(core: &mut Core) -> u8 {
    let s = core.tx_seq;
    core.tx_seq = s.wrapping_add(1);
    s
}

/// Sends every s2m frame that is due. `Err` when the driver refused a frame.
pub(crate) fn transmit_due(
    desc: &'static NodeDesc,
    core: &mut Core,
    p: &mut Parts<'_>,
    now: At,
    tx: &mut impl Transmit,
) -> Result<(), TxRefused> {
    if let Some(r) = core.resume.take() {
        if r.valid {
            send_group(desc, core, p, r.head, r.part, r.seq, tx)?;
        } else {
            let seq = next_seq(core);
            send_group(desc, core, p, r.head, 0, seq, tx)?;
        }
        reschedule(p, r.head, now);
    }
    let mut fi = 0u16;
    // Each iteration moves past at least one frame.
    while fi < core.plan.frames {
        let Some(f) = p.frames.get(fi as usize).copied() else {
            break;
        };
        if due(&f, now) {
            let seq = if f.sequenced { next_seq(core) } else { 0 };
            send_group(desc, core, p, fi, 0, seq, tx)?;
            reschedule(p, fi, now);
        }
        fi = fi.saturating_add(f.group_parts.max(1) as u16);
    }
    Ok(())
}

/// START: every periodic frame is due now, every on-commit frame whose topic was
/// published before START goes out at the first chance.
pub(crate) fn start(core: &mut Core, p: &mut Parts<'_>, now: At) {
    core.resume.clear();
    for fi in 0..core.plan.frames as usize {
        let Some(f) = p.frames.get(fi).copied() else {
            break;
        };
        // A masked frame delivers only the topics published before START.
        let mut unsent = false;
        let mut pending = 0u8;
        let mut bits = PresenceBits::new();
        for e in p.entries.get(f.entries()).unwrap_or(&[]) {
            let bit = bits.bit(e.slot()).map_or(0, |b| 1u8 << b);
            if p.topics.get(e.slot as usize).is_some_and(|t| t.unsent) {
                unsent = true;
                pending |= bit;
            }
        }
        if let Some(fm) = p.frames.get_mut(fi) {
            fm.next_due = now;
            fm.pending = if fm.s2m && fm.period == Us(0) && unsent {
                pending.max(1)
            } else {
                0
            };
        }
    }
    // A group head is due when any of its parts is.
    for fi in 0..core.plan.frames as usize {
        let Some(f) = p.frames.get(fi).copied() else {
            break;
        };
        if f.pending != 0 && f.group_index > 0 {
            if let Some(h) = p.frames.get_mut(fi.saturating_sub(f.group_index as usize)) {
                h.pending |= f.pending;
            }
        }
    }
    for fi in 0..core.plan.frames as usize {
        let Some(f) = p.frames.get(fi).copied() else {
            break;
        };
        if !f.s2m {
            continue;
        }
        if let Some(es) = p.entries.get(f.entries()) {
            for e in es.iter() {
                if let Some(t) = p.topics.get_mut(e.slot as usize) {
                    t.unsent = false;
                }
            }
        }
    }
}

/// A topic was published while running: its on-commit frames become due and a group
/// carrying it that is half sent must restart.
pub(crate) fn published(
    frames: &mut [PlanFrame],
    entries: &[PlanEntry],
    plan_frames: u16,
    resume: &mut ResumeSlot,
    slot: u16,
) {
    for fi in 0..plan_frames as usize {
        let Some(f) = frames.get(fi).copied() else {
            break;
        };
        if !f.s2m {
            continue;
        }
        let es = entries.get(f.entries()).unwrap_or(&[]);
        if !es.iter().any(|e| e.slot() == slot) {
            continue;
        }
        let bit = bit_of_slot(es, slot);
        let head = fi.saturating_sub(f.group_index as usize);
        if let Some(h) = frames.get_mut(head) {
            if h.period == Us(0) {
                // A masked frame delivers just the topics committed since it last went out.
                h.pending |= bit.max(1);
            }
        }
        if let Some(r) = resume.get_mut() {
            if r.head as usize == head {
                r.valid = false;
            }
        }
    }
}
