//! How deep the receive queue must be, with frames arriving at the bus's line rate: the
//! segments of a long configuration transfer take no queue slot (only its last segment
//! waits for `poll`), so the queue holds messages, not frames, and
//! [`RX_QUEUE_LEN`] messages fit between two polls.

mod common;
use common::*;

use fcan_core::frame::Frame;
use fcan_core::id::Opcode;
use fcan_core::msg::*;
use fcan_runtime_nostd::*;

/// The shortest time an 8-byte extended Classical CAN frame occupies a 1 Mbit/s bus:
/// 131 bits (SOF, 29-bit identifier with SRR/IDE/RTR, r0/r1, DLC, 64 data bits, 15-bit
/// CRC and delimiter, ACK slot and delimiter, 7-bit EOF, 3-bit intermission), before
/// any stuff bit. Frames can arrive no closer together than this.
const CLASSIC_FRAME_US: u32 = 131;

/// Delivers `frames` back to back at line rate while the application polls every
/// `poll_every_us` (as a main loop does), then polls a last time.
fn deliver_at_line_rate(rig: &mut Rig, frames: &[Frame], poll_every_us: u32) {
    let mut next_poll = rig.now.wrapping_add(poll_every_us);
    let mut t = rig.now;
    for f in frames {
        t = t.wrapping_add(CLASSIC_FRAME_US);
        while next_poll.wrapping_sub(t) as i32 <= 0 {
            rig.now = next_poll;
            rig.poll();
            next_poll = next_poll.wrapping_add(poll_every_us);
        }
        rig.now = t;
        rig.node.receive(f, t);
    }
    rig.now = next_poll;
    rig.poll();
}

/// The longest FRAME_DEFINE (12 + 6 × 64 bytes: 50 Classical segments) back to back,
/// against a main loop that polls only every 20 ms: nothing overflows and the node
/// answers it.
#[test]
fn a_long_transfer_takes_one_queue_slot() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    let entries: Vec<CopyEntry> = (0..64).map(|i| entry(0, T_CMD, 0, 1, i)).collect();
    let msg = ConfigMessage::FrameDefine(FrameDefine {
        header: header(0, 0x120, DataDirection::M2s, 64),
        entries: Entries::List(&entries),
    });
    let t = rig.next_transfer();
    let frames = rig.frames_for(node_id(), &msg, t);
    assert_eq!(frames.len(), 50);
    assert!(frames.len() > RX_QUEUE_LEN * 6);

    let before = rig.node.rx_overflows();
    deliver_at_line_rate(&mut rig, &frames, 20_000);
    assert_eq!(rig.node.rx_overflows(), before);
    let m = rig.one();
    assert_eq!(m.id.opcode, Opcode::Result);
    assert_eq!(m.id.transfer, t);
    // Answered on its merits (64 one-byte entries on a Classical bus exceed its 8 bytes).
    assert_eq!(m.result().opcode, Opcode::FrameDefine);
}

/// Single-frame requests each take a slot: [`RX_QUEUE_LEN`] of them between two polls
/// are all answered; one more is dropped and counted (the master asks again after its
/// timeout). At 1 Mbit/s at most eight frames end within one millisecond, so a main
/// loop that polls every millisecond never loses one.
#[test]
fn the_queue_holds_rx_queue_len_messages_between_polls() {
    for (burst, lost) in [(RX_QUEUE_LEN, 0u32), (RX_QUEUE_LEN + 1, 1)] {
        let mut rig = Rig::new(false);
        rig.boot_and_ack(BusMode::Classic);
        let mut frames = Vec::new();
        let mut transfers = Vec::new();
        for i in 0..burst {
            let t = rig.next_transfer();
            transfers.push(t);
            let get = ConfigMessage::ParamGet(ParamGet {
                block: 0,
                param: (i % 2) as u8,
            });
            frames.extend(rig.frames_for(node_id(), &get, t));
        }
        assert_eq!(frames.len(), burst);
        let before = rig.node.rx_overflows();
        for f in &frames {
            rig.node.receive(f, rig.now);
        }
        // The node answers within a few polls (the outgoing queue drains as it goes).
        for _ in 0..4 {
            rig.advance(1_000);
        }
        assert_eq!(rig.node.rx_overflows() - before, lost, "burst of {burst}");
        let answered = rig
            .take()
            .iter()
            .filter(|m| m.id.opcode == Opcode::ParamGet)
            .count();
        assert_eq!(answered, burst - lost as usize, "burst of {burst}");
    }
    let per_ms = 1_000 / CLASSIC_FRAME_US + 1;
    assert!(
        per_ms as usize <= RX_QUEUE_LEN,
        "{per_ms} frames can end in 1 ms"
    );
}
