//! The receive mailbox: another thread (standing in for an interrupt handler) pushes
//! frames with their arrival time while the node's loop takes them with
//! `Node::receive_from` and polls; nothing is lost, order is kept, and the arrival
//! time (not the time of the poll) is what the node records.

mod common;
use common::*;

use fcan_core::id::Opcode;
use fcan_core::msg::*;
use fcan_runtime_nostd::*;

#[test]
fn an_interrupt_handler_feeds_the_node_without_touching_it() {
    let mut rig = running_rig();
    let base = rig.now;
    // 200 commands, each in one frame, each with a value of its own, and a PARAM_GET
    // every 50: more than the mailbox holds at once, so the two sides must interleave.
    let mut frames = Vec::new();
    for i in 0..200u32 {
        let mut cmd = [0u8; 5];
        cmd[..4].copy_from_slice(&i.to_le_bytes());
        frames.push((rig.data_frame(0x120, &cmd), base + 10 * i));
        if i % 50 == 49 {
            let t = rig.next_transfer();
            let get = ConfigMessage::ParamGet(ParamGet {
                block: 0,
                param: P_GAIN,
            });
            frames.extend(
                rig.frames_for(node_id(), &get, t)
                    .into_iter()
                    .map(|f| (f, base + 10 * i)),
            );
        }
    }
    assert!(frames.len() > 16 * 10);

    let mut mailbox: Mailbox<16> = Mailbox::new();
    let (mut isr, mut inbox) = mailbox.split();
    let mut last_seen = 0u32;
    let mut generation = rig.node.topic(0, T_CMD).unwrap().generation;
    std::thread::scope(|s| {
        s.spawn(move || {
            // A real controller drops on overflow; this handler waits for room, so
            // every frame goes through a mailbox far smaller than the burst.
            for (f, at) in frames {
                while !isr.push(f, at) {
                    std::thread::yield_now();
                }
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while last_seen < 199 {
            assert!(std::time::Instant::now() < deadline, "stuck at {last_seen}");
            rig.node.receive_from(&mut inbox);
            rig.poll();
            let t = rig.node.topic(0, T_CMD).unwrap();
            if t.generation != generation {
                generation = t.generation;
                let v = u32::from_le_bytes(t.bytes[..4].try_into().unwrap());
                // In order, and stamped with the time it arrived, not the poll's.
                assert!(v >= last_seen);
                assert_eq!(t.received_at_us, base + 10 * v);
                last_seen = v;
            }
        }
    });
    // The handler thread has pushed everything now (the scope joined it), but the last
    // PARAM_GET comes after command 199, so the loop above may have stopped before it
    // was pushed: take what is left before counting the answers.
    rig.node.receive_from(&mut inbox);
    for _ in 0..5 {
        rig.advance(1_000);
    }
    let values = rig
        .take()
        .iter()
        .filter(|m| m.id.opcode == Opcode::ParamGet)
        .count();
    assert_eq!(values, 4);
    assert_eq!(rig.node.rx_overflows(), 0);
}

#[test]
fn a_full_mailbox_refuses_and_counts() {
    let rig = running_rig();
    let mut mailbox: Mailbox<4> = Mailbox::new();
    let (mut isr, mut inbox) = mailbox.split();
    let f = rig.data_frame(0x120, &[1, 2, 3, 4, 5]);
    // N - 1 places.
    for i in 0..3 {
        assert!(isr.push(f, i));
    }
    assert!(!isr.push(f, 3));
    assert!(!isr.push(f, 4));
    assert_eq!(isr.dropped(), 2);
    for i in 0..3 {
        assert_eq!(inbox.pop(), Some(Stamped { frame: f, at_us: i }));
    }
    assert_eq!(inbox.pop(), None);
}
