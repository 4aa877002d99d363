//! Transmit refusals: configuration messages are never lost or reordered, a full
//! outgoing queue holds requests back, groups never go out torn, data goes before
//! configuration.

mod common;
use common::*;

use fcan_core::frame::CanId;
use fcan_core::hash::SchemaDigest;
use fcan_core::id::Opcode;
use fcan_core::msg::*;
use fcan_runtime_nostd::RX_QUEUE_LEN;

#[test]
fn refusing_every_other_frame_loses_and_reorders_nothing() {
    let mut rig = Rig::new(false);
    rig.bus.refuse_alternate = true;
    rig.boot_and_ack(BusMode::Classic);
    // Whole-blob download through a driver that refuses half the time. The rig's
    // reassembly panics on any gap, so completing proves every segment came in order.
    let mut blob = Vec::new();
    for _ in 0..100 {
        let t = rig.send(ConfigMessage::SchemaRead(SchemaRead {
            offset: blob.len() as u32,
            len: 500,
        }));
        // Keep polling until the chunk is out.
        let mut got = None;
        for _ in 0..2_000 {
            if let Some(m) = rig
                .take()
                .into_iter()
                .find(|m| m.id.opcode == Opcode::Schema)
            {
                got = Some(m);
                break;
            }
            rig.poll();
        }
        let m = got.expect("schema chunk never completed");
        assert_eq!(m.id.transfer, t);
        let ConfigMessage::SchemaData(d) = m.decode() else {
            panic!()
        };
        if d.data.is_empty() {
            break;
        }
        blob.extend_from_slice(d.data);
    }
    assert!(SchemaDigest::of(&blob).matches(DESC.hash));
    assert!(rig.bus.refused > 100);
    assert_eq!(rig.node.counters().tx_refused as u64, rig.bus.refused);
}

#[test]
fn queued_messages_keep_their_order_under_refusal() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    rig.bus.refuse_alternate = true;
    // A burst of requests whose answers are multi-frame and single-frame mixed, as many
    // as the receive queue holds between two polls.
    let mut expect = Vec::new();
    for i in 0..(RX_QUEUE_LEN / 2) as u8 {
        let t = rig.next_transfer();
        for f in rig.frames_for(
            node_id(),
            &ConfigMessage::SchemaRead(SchemaRead {
                offset: i as u32 * 10,
                len: 20,
            }),
            t,
        ) {
            rig.node.receive(&f, rig.now);
        }
        expect.push((Opcode::Schema, t));
        let t = rig.next_transfer();
        for f in rig.frames_for(
            node_id(),
            &ConfigMessage::ParamGet(ParamGet {
                block: 0,
                param: P_GAIN,
            }),
            t,
        ) {
            rig.node.receive(&f, rig.now);
        }
        expect.push((Opcode::ParamGet, t));
    }
    for _ in 0..200 {
        rig.poll();
    }
    let got: Vec<_> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.opcode != Opcode::Heartbeat)
        .map(|m| (m.id.opcode, m.id.transfer))
        .collect();
    assert_eq!(got, expect);
}

#[test]
fn full_outgoing_queue_holds_requests_back() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    rig.bus.refuse_all = true;
    let mut expect = Vec::new();
    for _ in 0..14 {
        let t = rig.next_transfer();
        for f in rig.frames_for(node_id(), &ConfigMessage::StatsRead, t) {
            rig.node.receive(&f, rig.now);
        }
        expect.push(t);
        rig.poll();
    }
    assert!(rig.take().is_empty());
    assert_eq!(rig.node.rx_overflows(), 0);
    rig.bus.refuse_all = false;
    for _ in 0..5 {
        rig.poll();
    }
    let got: Vec<u8> = rig
        .take()
        .into_iter()
        .filter(|m| m.id.opcode == Opcode::Stats)
        .map(|m| m.id.transfer)
        .collect();
    assert_eq!(got, expect);
}

#[test]
fn s2m_group_is_never_torn_under_refusal() {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    let g = |index, id, gi| FrameHeader {
        index,
        std_id: id,
        dir: DataDirection::S2m,
        sequenced: true,
        masked: false,
        len: 4,
        group_parts: 2,
        group_index: gi,
        period_us: 0,
    };
    assert!(rig
        .define(g(0, 0x220, 0), &[entry(0, T_FEEDBACK, 0, 3, 1)])
        .is_ack());
    assert!(rig
        .define(g(1, 0x221, 1), &[entry(0, T_FEEDBACK, 3, 3, 1)])
        .is_ack());
    assert!(rig.start(2, 0).is_ack());
    rig.bus.refuse_alternate = true;
    for i in 0..40u8 {
        rig.node.publish(0, T_FEEDBACK, &[i; 6]).unwrap();
        rig.poll();
        if i % 3 == 0 {
            rig.poll();
        }
    }
    for _ in 0..5 {
        rig.poll();
    }
    // Pair parts by sequence: every complete pair carries one value.
    let frames: Vec<_> = rig.data.iter().map(|(_, f)| *f).collect();
    let mut complete = 0;
    for w in frames.windows(2) {
        if w[0].id() == CanId::Standard(0x220)
            && w[1].id() == CanId::Standard(0x221)
            && w[0].data()[0] == w[1].data()[0]
        {
            assert_eq!(
                w[0].data()[1],
                w[1].data()[1],
                "torn group: {:?} {:?}",
                w[0],
                w[1]
            );
            complete += 1;
        }
    }
    assert!(complete >= 10, "{complete} complete groups");
    // The last value got out whole.
    let n = frames.len();
    assert_eq!(frames[n - 2].data()[1..], [39; 3]);
    assert_eq!(frames[n - 1].data()[1..], [39; 3]);
}

#[test]
fn data_frames_go_before_configuration() {
    let mut rig = running_rig();
    rig.node.publish(0, T_EVENT, &[1, 2, 3, 4]).unwrap();
    let t = rig.next_transfer();
    for f in rig.frames_for(node_id(), &ConfigMessage::StatsRead, t) {
        rig.node.receive(&f, rig.now);
    }
    rig.node.poll(rig.now, &mut rig.bus, &mut rig.app);
    let first = rig.bus.sent[0];
    assert_eq!(first.id(), CanId::Standard(0x210));
    assert!(matches!(
        rig.bus.sent.last().unwrap().id(),
        CanId::Extended(_)
    ));
}
