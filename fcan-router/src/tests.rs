//! Unit tests of the routing core with frames built by fcan-core's codecs.

use std::vec::Vec;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::hash::HashPrefix;
use fcan_core::id::{ConfigId, NodeId};
use fcan_core::msg::*;
use fcan_core::segment::Segmenter;
use fcan_core::timing::NODE_OFFLINE_TIMEOUT_US;

use crate::*;

const UP: Link = Link::Up;
const A: Link = Link::Down(0);
const B: Link = Link::Down(1);

fn n(id: u8) -> NodeId {
    NodeId::new(id).unwrap()
}

/// Every frame of one configuration message.
fn frames(msg: &ConfigMessage, node: NodeId, transfer: u8, mtu: Mtu) -> Vec<Frame> {
    let mut buf = [0u8; 2048];
    let len = msg.encode(&mut buf).unwrap();
    let id = ConfigId::single(msg.opcode(), msg.direction(), node, transfer);
    Segmenter::new(id, mtu, &buf[..len], &[]).unwrap().collect()
}

fn heartbeat(node: u8, boot_id: u32) -> Frame {
    let msg = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
        state: NodeState::Running,
        fault: FaultCode::None,
        boot_id,
        errors: 0,
    });
    frames(&msg, n(node), 0, Mtu::Classic)[0]
}

fn announce(node: u8, boot_id: u32, mtu: Mtu) -> Vec<Frame> {
    let msg = ConfigMessage::Announce(Announce {
        protocol: 2,
        state: NodeState::Unprovisioned,
        caps: 0,
        boot_id,
        blob_len: 1234,
        hash: HashPrefix([7; 8]),
        counts: &[1, 2, 3],
    });
    frames(&msg, n(node), 1, mtu)
}

/// Every frame of an ANNOUNCE with these capabilities, in Classical CAN frames as nodes
/// send it (§3.3), or FD frames.
fn announce_caps(node: u8, caps: u8, mtu: Mtu) -> (Vec<Frame>, Announce<'static>) {
    let a = Announce {
        protocol: 2,
        state: NodeState::Unprovisioned,
        caps,
        boot_id: 0xB007,
        blob_len: 1234,
        hash: HashPrefix([7; 8]),
        counts: &[1, 2, 3, 4, 5, 6, 7, 8, 9],
    };
    (frames(&ConfigMessage::Announce(a), n(node), 4, mtu), a)
}

/// Routes every frame of a transfer from `from`; decodes what went up, reassembled.
fn announce_upstream<const N: usize, const I: usize>(
    r: &mut Router<N, I>,
    from: Link,
    fs: &[Frame],
) -> Option<ConfigMessage<'static>> {
    let mut up = Vec::new();
    for f in fs {
        let mut f = *f;
        if r.route(from, &mut f, 0).to.contains(UP) {
            up.extend_from_slice(f.data());
        }
    }
    let up: &'static [u8] = std::boxed::Box::leak(up.into_boxed_slice());
    ConfigMessage::decode(
        fcan_core::id::Opcode::Discover,
        fcan_core::id::Direction::ToMaster,
        up,
    )
    .ok()
}

fn mixed() -> Router<2> {
    Router::new(RouterConfig {
        uplink_mtu: Mtu::Fd,
        downlink_mtu: [Some(Mtu::Classic), Some(Mtu::Fd)],
        flood_unknown_m2s: false,
        forward_foreign: true,
    })
}

#[test]
fn fd_capabilities_are_masked_in_announces_from_a_classic_downlink() {
    let all = caps::FD | caps::BRS;
    let mut r = mixed();
    // From the classic downlink A: FD and BRS cleared, every other field as sent.
    let (fs, a) = announce_caps(1, all, Mtu::Classic);
    assert!(fs.len() > 2, "a classic ANNOUNCE spans several frames");
    let got = announce_upstream(&mut r, A, &fs);
    assert_eq!(
        got,
        Some(ConfigMessage::Announce(Announce { caps: 0, ..a }))
    );
    assert_eq!(r.counters().down[0].fd_masked, 1);
    assert_eq!(r.node_link(n(1), 0), Some(A), "still learned from it");
    // Only the capability byte of the first frame changed.
    let mut first = fs[0];
    r.route(A, &mut first, 0);
    assert_eq!(first.data()[..2], fs[0].data()[..2]);
    assert_eq!(first.data()[3..], fs[0].data()[3..]);
    assert_ne!(first, fs[0]);
    // BRS alone is cleared too (it means nothing without FD on this path).
    let (fs, a) = announce_caps(2, caps::BRS, Mtu::Classic);
    let got = announce_upstream(&mut r, A, &fs);
    assert_eq!(
        got,
        Some(ConfigMessage::Announce(Announce { caps: 0, ..a }))
    );
    assert_eq!(r.counters().down[0].fd_masked, 3);
    // A classic node's ANNOUNCE passes unchanged and is not counted.
    let (fs, a) = announce_caps(3, 0, Mtu::Classic);
    assert_eq!(
        announce_upstream(&mut r, A, &fs),
        Some(ConfigMessage::Announce(a))
    );
    assert_eq!(r.counters().down[0].fd_masked, 3);
    // From the FD downlink B (FD uplink): untouched.
    let (fs, a) = announce_caps(4, all, Mtu::Classic);
    let mut sent = fs.clone();
    for f in &mut sent {
        r.route(B, f, 0);
    }
    assert_eq!(sent, fs, "frames from an FD path are never changed");
    assert_eq!(
        announce_upstream(&mut r, B, &fs),
        Some(ConfigMessage::Announce(a))
    );
    assert_eq!(r.counters().down[1].fd_masked, 0);
    // Other node → master frames from A are never changed, even with the same bytes.
    let mut hb = heartbeat(1, 0xFFFF_FFFF);
    let before = hb;
    r.route(A, &mut hb, 0);
    assert_eq!(hb, before);
    assert_eq!(r.counters().down[0].fd_masked, 3);
}

#[test]
fn a_classic_uplink_masks_fd_capabilities_from_every_downlink() {
    let mut r: Router<2> = Router::new(RouterConfig {
        uplink_mtu: Mtu::Classic,
        downlink_mtu: [Some(Mtu::Fd), Some(Mtu::Fd)],
        flood_unknown_m2s: false,
        forward_foreign: true,
    });
    let (fs, a) = announce_caps(1, caps::FD | caps::BRS, Mtu::Classic);
    let got = announce_upstream(&mut r, B, &fs);
    assert_eq!(
        got,
        Some(ConfigMessage::Announce(Announce { caps: 0, ..a }))
    );
    assert_eq!(r.counters().down[1].fd_masked, 1);
}

#[test]
fn a_malformed_announce_stays_malformed() {
    let mut r = mixed();
    // Reserved capability bits: clearing FD must not make it valid for the master.
    let (mut fs, _) = announce_caps(1, caps::FD, Mtu::Classic);
    let mut d = [0u8; 8];
    d.copy_from_slice(fs[0].data());
    d[2] |= 0x80;
    fs[0] = Frame::classic(fs[0].id(), &d).unwrap();
    assert_eq!(announce_upstream(&mut r, A, &fs), None);
    // Too short to hold the capabilities: forwarded as it came.
    let id = ConfigId::single(
        fcan_core::id::Opcode::Discover,
        fcan_core::id::Direction::ToMaster,
        n(2),
        0,
    );
    let short = Frame::classic(id.can_id(), &[2, 0]).unwrap();
    let mut f = short;
    assert_eq!(links(&r.route(A, &mut f, 0)), [UP]);
    assert_eq!(f, short);
}

fn frame_define(node: u8, index: u8, std_id: u16, dir: DataDirection, mtu: Mtu) -> Vec<Frame> {
    let entries = [CopyEntry {
        block: 0,
        topic: 0,
        src_offset: 0,
        len: 4,
        dst_offset: 0,
    }; 5];
    let msg = ConfigMessage::FrameDefine(FrameDefine {
        header: FrameHeader {
            index,
            std_id,
            dir,
            sequenced: false,
            masked: false,
            len: 8,
            group_parts: 1,
            group_index: 0,
            period_us: if dir == DataDirection::S2m { 10_000 } else { 0 },
        },
        entries: Entries::List(&entries),
    });
    frames(&msg, n(node), index, mtu)
}

fn to_node(op_msg: ConfigMessage, node: NodeId) -> Frame {
    frames(&op_msg, node, 3, Mtu::Classic)[0]
}

fn discover(node: NodeId) -> Frame {
    to_node(ConfigMessage::Discover(Discover { session: 9 }), node)
}

fn start(node: u8) -> Frame {
    to_node(
        ConfigMessage::Start(Start {
            frame_count: 1,
            master_timeout_ms: 300,
        }),
        n(node),
    )
}

fn data(std_id: u16) -> Frame {
    Frame::classic(CanId::Standard(std_id), &[1, 2, 3, 4]).unwrap()
}

fn links(r: &Route) -> Vec<Link> {
    r.to.iter().collect()
}

fn router() -> Router<2> {
    Router::new(RouterConfig::uniform(Mtu::Classic))
}

/// Routes every frame; returns the last route.
fn feed<const N: usize, const I: usize>(
    r: &mut Router<N, I>,
    from: Link,
    fs: &[Frame],
    now: u32,
) -> Route {
    let mut last = Route::default();
    for f in fs {
        last = r.route(from, &mut f.clone(), now);
    }
    last
}

fn events<const N: usize, const I: usize>(r: &mut Router<N, I>) -> Vec<Event> {
    core::iter::from_fn(|| r.pop_event()).collect()
}

#[test]
fn broadcasts_reach_every_downlink() {
    let mut r = router();
    let d = r.route(UP, &mut discover(NodeId::BROADCAST), 0);
    assert_eq!(links(&d), [A, B]);
    let mut hb = to_node(
        ConfigMessage::MasterHeartbeat(MasterHeartbeat { session: 1 }),
        NodeId::BROADCAST,
    );
    assert_eq!(links(&r.route(UP, &mut hb, 0)), [A, B]);
    let c = r.counters();
    assert_eq!(c.up.received, 2);
    assert_eq!(c.up.forwarded, 2);
    assert_eq!(c.down[0].sent, 2);
    assert_eq!(c.down[1].sent, 2);
}

#[test]
fn nodes_are_learned_from_their_traffic_and_unicasts_follow() {
    let mut r = router();
    // Unknown node: a unicast is dropped, a unicast DISCOVER floods.
    assert_eq!(
        r.route(UP, &mut start(5), 0).dropped,
        Some(DropReason::UnknownNode)
    );
    assert_eq!(links(&r.route(UP, &mut discover(n(5)), 0)), [A, B]);
    assert_eq!(r.counters().flooded_unknown_node, 1);
    // Node 5 heartbeats on B: up only, and learned.
    assert_eq!(links(&r.route(B, &mut heartbeat(5, 1), 10)), [UP]);
    assert_eq!(
        events(&mut r),
        [Event::NodeLearned {
            node: n(5),
            link: B
        }]
    );
    assert_eq!(links(&r.route(UP, &mut start(5), 20)), [B]);
    assert_eq!(links(&r.route(UP, &mut discover(n(5)), 20)), [B]);
    // ANNOUNCE (multi-frame on classic) from another node on A.
    let last = feed(&mut r, A, &announce(7, 0xAB, Mtu::Classic), 30);
    assert_eq!(links(&last), [UP]);
    assert_eq!(r.node_link(n(7), 30), Some(A));
    assert_eq!(
        r.nodes().find(|(id, _)| *id == n(7)).unwrap().1.boot_id,
        Some(0xAB)
    );
    let c = r.counters();
    assert_eq!(c.learned.nodes, 2);
    assert_eq!(c.dropped.get(DropReason::UnknownNode), 1);
    assert_eq!(c.down[1].received, 1);
    assert_eq!(c.down[1].forwarded, 1);
    assert_eq!(c.up.sent, 1 + announce(7, 0, Mtu::Classic).len() as u64);
}

#[test]
fn data_identifiers_are_learned_from_frame_define() {
    for mtu in [Mtu::Classic, Mtu::Fd] {
        let mut r: Router<2> = Router::new(RouterConfig::uniform(mtu));
        r.route(A, &mut heartbeat(1, 1), 0);
        r.route(B, &mut heartbeat(2, 2), 0);
        // Master plans: node 1 gets m2s 0x120 and s2m 0x200; node 2 m2s 0x121.
        let fd = frame_define(1, 0, 0x120, DataDirection::M2s, mtu);
        if mtu == Mtu::Classic {
            assert!(fd.len() > 2, "the header spans two classic frames");
        }
        for f in &fd {
            assert_eq!(links(&r.route(UP, &mut f.clone(), 1)), [A]);
        }
        feed(
            &mut r,
            UP,
            &frame_define(1, 1, 0x200, DataDirection::S2m, mtu),
            2,
        );
        feed(
            &mut r,
            UP,
            &frame_define(2, 0, 0x121, DataDirection::M2s, mtu),
            3,
        );
        assert_eq!(r.std_id_count(), 3);
        assert_eq!(r.counters().learned.std_ids, 3);
        // m2s data goes only to the owner's downlink.
        assert_eq!(links(&r.route(UP, &mut data(0x120), 4)), [A]);
        assert_eq!(links(&r.route(UP, &mut data(0x121), 4)), [B]);
        // Unknown identifier from the uplink: dropped, counted.
        let u = r.route(UP, &mut data(0x300), 4);
        assert_eq!(
            (u.to, u.dropped),
            (LinkSet::EMPTY, Some(DropReason::UnknownStdId))
        );
        // An s2m identifier sent from the uplink goes nowhere.
        assert_eq!(
            r.route(UP, &mut data(0x200), 4).dropped,
            Some(DropReason::WrongWay)
        );
        // s2m data only goes up, learned or not.
        assert_eq!(links(&r.route(A, &mut data(0x200), 4)), [UP]);
        assert_eq!(links(&r.route(B, &mut data(0x3AA), 4)), [UP]);
        let c = r.counters();
        assert_eq!(c.up_unlearned_std_id, 1);
        assert_eq!(c.dropped.get(DropReason::UnknownStdId), 1);
        assert_eq!(c.dropped.get(DropReason::WrongWay), 1);
        assert_eq!(r.std_id_link(0x120, 4), Some(A));
        assert_eq!(r.std_id_link(0x200, 4), None);
    }
}

#[test]
fn frame_define_index_truncates_and_index_zero_clears() {
    let mut r = router();
    r.route(A, &mut heartbeat(1, 1), 0);
    for (k, id) in [0x100u16, 0x101, 0x102].iter().enumerate() {
        feed(
            &mut r,
            UP,
            &frame_define(1, k as u8, *id, DataDirection::M2s, Mtu::Classic),
            1,
        );
    }
    assert_eq!(r.std_id_count(), 3);
    // A retried definition changes nothing.
    feed(
        &mut r,
        UP,
        &frame_define(1, 2, 0x102, DataDirection::M2s, Mtu::Classic),
        1,
    );
    assert_eq!(r.counters().learned.std_ids, 3);
    assert_eq!(r.counters().learned.std_ids_forgotten, 0);
    // Redefine frame 1: frames 1 and 2 go, the new frame 1 comes.
    feed(
        &mut r,
        UP,
        &frame_define(1, 1, 0x150, DataDirection::M2s, Mtu::Classic),
        2,
    );
    let ids: Vec<u16> = r.std_ids().map(|e| e.std_id).collect();
    assert_eq!(ids, [0x100, 0x150]);
    assert_eq!(
        r.route(UP, &mut data(0x101), 3).dropped,
        Some(DropReason::UnknownStdId)
    );
    // Index 0 clears the plan.
    feed(
        &mut r,
        UP,
        &frame_define(1, 0, 0x160, DataDirection::M2s, Mtu::Classic),
        4,
    );
    let ids: Vec<u16> = r.std_ids().map(|e| e.std_id).collect();
    assert_eq!(ids, [0x160]);
    assert_eq!(r.counters().learned.std_ids_forgotten, 4);
    // An identifier moved to another node leaves the first.
    r.route(B, &mut heartbeat(2, 2), 5);
    feed(
        &mut r,
        UP,
        &frame_define(2, 0, 0x160, DataDirection::M2s, Mtu::Classic),
        5,
    );
    assert_eq!(r.std_id_link(0x160, 5), Some(B));
    // An identifier outside the data range is not learned (the node NAKs it).
    feed(
        &mut r,
        UP,
        &frame_define(2, 1, 0x050, DataDirection::M2s, Mtu::Classic),
        6,
    );
    assert_eq!(r.std_id_count(), 1);
}

#[test]
fn a_reboot_forgets_the_plan() {
    let mut r = router();
    r.route(A, &mut heartbeat(1, 10), 0);
    feed(
        &mut r,
        UP,
        &frame_define(1, 0, 0x100, DataDirection::M2s, Mtu::Classic),
        1,
    );
    // Same boot: nothing changes.
    r.route(A, &mut heartbeat(1, 10), 2);
    assert_eq!(r.std_id_count(), 1);
    // New boot in an ANNOUNCE (boot_id in a later classic segment).
    feed(&mut r, A, &announce(1, 11, Mtu::Classic), 3);
    assert_eq!(r.std_id_count(), 0);
    let ev = events(&mut r);
    assert!(ev.contains(&Event::NodeRebooted {
        node: n(1),
        link: A,
        boot_id: 11
    }));
    // New boot in a HEARTBEAT.
    feed(
        &mut r,
        UP,
        &frame_define(1, 0, 0x100, DataDirection::M2s, Mtu::Classic),
        4,
    );
    r.route(A, &mut heartbeat(1, 12), 5);
    assert_eq!(r.std_id_count(), 0);
    assert_eq!(r.counters().learned.nodes_rebooted, 2);
}

#[test]
fn a_node_id_on_two_downlinks_is_a_collision() {
    let mut r = router();
    r.route(A, &mut heartbeat(4, 1), 0);
    feed(
        &mut r,
        UP,
        &frame_define(4, 0, 0x100, DataDirection::M2s, Mtu::Classic),
        0,
    );
    events(&mut r);
    // Another node 4 on B: reported, still forwarded up, entry stays on A.
    assert_eq!(links(&r.route(B, &mut heartbeat(4, 2), 100)), [UP]);
    let last = feed(&mut r, B, &announce(4, 2, Mtu::Classic), 200);
    assert_eq!(links(&last), [UP]);
    assert_eq!(
        events(&mut r),
        [
            Event::Collision {
                node: n(4),
                owner: A,
                other: B,
                boot_id: Some(2)
            },
            Event::Collision {
                node: n(4),
                owner: A,
                other: B,
                boot_id: None
            }
        ]
    );
    assert_eq!(r.counters().collisions, 2);
    assert_eq!(r.node_link(n(4), 300), Some(A));
    assert_eq!(links(&r.route(UP, &mut start(4), 300)), [A]);
    assert_eq!(links(&r.route(UP, &mut data(0x100), 300)), [A]);
    assert_eq!(r.std_id_count(), 1);
}

#[test]
fn silent_nodes_are_forgotten_and_can_move() {
    let mut r = router();
    r.route(A, &mut heartbeat(3, 1), 0);
    feed(
        &mut r,
        UP,
        &frame_define(3, 0, 0x100, DataDirection::M2s, Mtu::Classic),
        0,
    );
    events(&mut r);
    let later = NODE_OFFLINE_TIMEOUT_US + 1;
    r.poll(later);
    assert_eq!(
        events(&mut r),
        [Event::NodeForgotten {
            node: n(3),
            link: A
        }]
    );
    assert_eq!(
        r.route(UP, &mut start(3), later).dropped,
        Some(DropReason::UnknownNode)
    );
    assert_eq!(
        r.route(UP, &mut data(0x100), later).dropped,
        Some(DropReason::UnknownNode)
    );
    // Back on B with the same boot (hot-plugged): its plan still routes, to B now.
    r.route(B, &mut heartbeat(3, 1), later + 10);
    assert_eq!(
        events(&mut r),
        [Event::NodeMoved {
            node: n(3),
            from: A,
            to: B
        }]
    );
    assert_eq!(links(&r.route(UP, &mut data(0x100), later + 20)), [B]);
    // Gone again, back on A with a new boot: moved, and the plan is forgotten.
    let later2 = later + 10 + NODE_OFFLINE_TIMEOUT_US;
    feed(&mut r, A, &announce(3, 2, Mtu::Classic), later2);
    assert_eq!(r.node_link(n(3), later2), Some(A));
    assert_eq!(r.std_id_count(), 0);
    let c = r.counters();
    assert_eq!(c.learned.nodes_moved, 2);
    assert_eq!(c.learned.nodes_forgotten, 1);
    // A node that is merely late is not forgotten.
    r.route(A, &mut heartbeat(9, 1), 0);
    r.poll(NODE_OFFLINE_TIMEOUT_US - 1);
    assert_eq!(r.node_link(n(9), NODE_OFFLINE_TIMEOUT_US - 1), Some(A));
}

#[test]
fn amortised_sweep_forgets_without_poll() {
    let mut r = router();
    r.route(A, &mut heartbeat(3, 1), 0);
    events(&mut r);
    let later = NODE_OFFLINE_TIMEOUT_US * 2;
    for _ in 0..NODE_SLOTS {
        r.route(UP, &mut data(0x3FF), later);
    }
    assert_eq!(
        events(&mut r),
        [Event::NodeForgotten {
            node: n(3),
            link: A
        }]
    );
}

#[test]
fn fd_frames_never_reach_classic_downlinks() {
    let cfg = RouterConfig {
        uplink_mtu: Mtu::Fd,
        downlink_mtu: [Some(Mtu::Classic), Some(Mtu::Fd)],
        flood_unknown_m2s: false,
        forward_foreign: true,
    };
    let mut r: Router<2> = Router::new(cfg);
    // An FD broadcast reaches only the FD downlink.
    let mut fd_disc = frames(
        &ConfigMessage::Discover(Discover { session: 1 }),
        NodeId::BROADCAST,
        0,
        Mtu::Fd,
    )[0];
    let route = r.route(UP, &mut fd_disc, 0);
    assert_eq!(links(&route), [B]);
    assert_eq!(route.dropped, Some(DropReason::Mtu));
    // An FD unicast to a node on the classic downlink: dropped, not truncated.
    r.route(A, &mut heartbeat(1, 1), 0);
    let mut fd_start = frames(
        &ConfigMessage::Start(Start {
            frame_count: 0,
            master_timeout_ms: 0,
        }),
        n(1),
        0,
        Mtu::Fd,
    )[0];
    let route = r.route(UP, &mut fd_start, 0);
    assert!(route.to.is_empty());
    assert_eq!(route.dropped, Some(DropReason::Mtu));
    // Classic frames go everywhere.
    assert_eq!(
        links(&r.route(UP, &mut discover(NodeId::BROADCAST), 0)),
        [A, B]
    );
    assert_eq!(r.counters().dropped.get(DropReason::Mtu), 2);
    assert_eq!(r.counters().dropped.total(), 2);
    assert_eq!(r.counters().down[0].mtu_dropped, 2, "per link");
    assert_eq!(r.counters().down[1].mtu_dropped, 0);
    assert_eq!(r.mtu(A), Some(Mtu::Classic));
}

#[test]
fn wrong_way_malformed_foreign_and_invalid_links() {
    let mut r = router();
    // node → master on the uplink, master → node on a downlink
    assert_eq!(
        r.route(UP, &mut heartbeat(1, 1), 0).dropped,
        Some(DropReason::WrongWay)
    );
    assert_eq!(
        r.route(A, &mut start(1), 0).dropped,
        Some(DropReason::WrongWay)
    );
    assert_eq!(r.node_link(n(1), 0), None);
    // reserved opcode
    let mut bad = Frame::classic(CanId::Extended(0x1000_0000 | 0xC << 24), &[]).unwrap();
    assert_eq!(
        r.route(UP, &mut bad, 0).dropped,
        Some(DropReason::Malformed)
    );
    // not fcan's: passed through
    let mut estop = Frame::classic(CanId::Standard(0x010), &[1]).unwrap();
    assert_eq!(links(&r.route(UP, &mut estop, 0)), [A, B]);
    assert_eq!(links(&r.route(B, &mut estop, 0)), [UP]);
    let mut other = Frame::classic(CanId::Extended(0x0123_4567), &[1]).unwrap();
    assert_eq!(links(&r.route(A, &mut other, 0)), [UP]);
    assert_eq!(r.counters().foreign, 3);
    // links the router does not have
    assert_eq!(
        r.route(Link::Down(2), &mut estop, 0).dropped,
        Some(DropReason::InvalidLink)
    );
    let mut one: Router<2> = Router::new(RouterConfig {
        downlink_mtu: [Some(Mtu::Classic), None],
        forward_foreign: false,
        ..RouterConfig::uniform(Mtu::Classic)
    });
    assert_eq!(
        one.route(B, &mut estop, 0).dropped,
        Some(DropReason::InvalidLink)
    );
    assert_eq!(
        links(&one.route(UP, &mut discover(NodeId::BROADCAST), 0)),
        [A]
    );
    assert!(one.route(UP, &mut estop, 0).to.is_empty());
    assert_eq!(r.counters().dropped.get(DropReason::InvalidLink), 1);
    r.send_failed(A);
    assert_eq!(r.counters().dropped.get(DropReason::SendFailed), 1);
}

#[test]
fn flood_unknown_m2s_when_asked() {
    let mut r: Router<2> = Router::new(RouterConfig {
        flood_unknown_m2s: true,
        ..RouterConfig::uniform(Mtu::Classic)
    });
    assert_eq!(links(&r.route(UP, &mut data(0x123), 0)), [A, B]);
    assert_eq!(r.counters().flooded_unknown_std_id, 1);
}

#[test]
fn a_full_table_counts_and_evicts_only_forgotten_nodes() {
    let mut r: Router<2, 2> = Router::new(RouterConfig::uniform(Mtu::Classic));
    r.route(A, &mut heartbeat(1, 1), 0);
    r.route(B, &mut heartbeat(2, 1), 0);
    feed(
        &mut r,
        UP,
        &frame_define(1, 0, 0x100, DataDirection::M2s, Mtu::Classic),
        0,
    );
    feed(
        &mut r,
        UP,
        &frame_define(1, 1, 0x101, DataDirection::M2s, Mtu::Classic),
        0,
    );
    events(&mut r);
    feed(
        &mut r,
        UP,
        &frame_define(2, 0, 0x102, DataDirection::M2s, Mtu::Classic),
        0,
    );
    assert_eq!(r.counters().dropped.get(DropReason::TableFull), 1);
    assert_eq!(
        events(&mut r),
        [Event::TableFull {
            node: n(2),
            std_id: 0x102
        }]
    );
    assert_eq!(
        r.route(UP, &mut data(0x102), 0).dropped,
        Some(DropReason::UnknownStdId)
    );
    // Node 1 goes silent: its identifiers may be evicted, node 2's frame is learned.
    let later = NODE_OFFLINE_TIMEOUT_US + 5;
    r.route(B, &mut heartbeat(2, 1), later);
    r.poll(later);
    feed(
        &mut r,
        UP,
        &frame_define(2, 0, 0x102, DataDirection::M2s, Mtu::Classic),
        later,
    );
    assert_eq!(links(&r.route(UP, &mut data(0x102), later)), [B]);
    assert_eq!(r.std_id_count(), 2);
}

#[test]
fn full_event_queue_counts_lost_events() {
    let mut r = router();
    for id in 0..(EVENT_QUEUE as u8 + 3) {
        r.route(A, &mut heartbeat(id, 1), 0);
    }
    assert_eq!(r.pending_events(), EVENT_QUEUE);
    assert_eq!(r.counters().events_lost, 3);
}

#[test]
fn counters_per_link_and_direction() {
    let mut r = router();
    r.route(A, &mut heartbeat(1, 1), 0);
    r.route(B, &mut heartbeat(2, 1), 0);
    r.route(B, &mut heartbeat(2, 1), 0);
    r.route(UP, &mut start(1), 0);
    r.route(UP, &mut discover(NodeId::BROADCAST), 0);
    let c = r.counters();
    assert_eq!(
        (c.down[0].received, c.down[0].forwarded, c.down[0].sent),
        (1, 1, 2)
    );
    assert_eq!(
        (c.down[1].received, c.down[1].forwarded, c.down[1].sent),
        (2, 2, 1)
    );
    assert_eq!((c.up.received, c.up.forwarded, c.up.sent), (2, 2, 3));
    assert_eq!(c.link(Link::Down(7)), None);
}

mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn arb_frame() -> impl Strategy<Value = Frame> {
        let id = prop_oneof![
            (0u16..=0x7FF).prop_map(CanId::Standard),
            (0u32..=0x1FFF_FFFF).prop_map(CanId::Extended),
            // mostly fcan configuration identifiers
            (0u32..0x1000_0000).prop_map(|x| CanId::Extended(0x1000_0000 | x)),
        ];
        (
            id,
            prop::collection::vec(any::<u8>(), 0..=64),
            any::<bool>(),
        )
            .prop_map(|(id, data, fd)| {
                if fd {
                    let len = fcan_core::frame::fd_padded_len(data.len()).unwrap();
                    let mut d = data.clone();
                    d.resize(len, 0);
                    Frame::fd(id, &d).unwrap()
                } else {
                    Frame::classic(id, &data[..data.len().min(8)]).unwrap()
                }
            })
    }

    proptest! {
        #[test]
        fn any_input_is_routed_sanely(
            input in prop::collection::vec((0u8..4, arb_frame(), any::<u32>()), 1..200)
        ) {
            let cfg = RouterConfig {
                uplink_mtu: Mtu::Fd,
                downlink_mtu: [Some(Mtu::Classic), Some(Mtu::Fd)],
                flood_unknown_m2s: false,
                forward_foreign: true,
            };
            let mut r: Router<2, 4> = Router::new(cfg);
            for (link, mut frame, now) in input {
                let from = if link == 0 { Link::Up } else { Link::Down(link - 1) };
                let before = frame;
                let route = r.route(from, &mut frame, now);
                if frame != before {
                    // Only the first segment of an ANNOUNCE from the classic downlink.
                    let cid = ConfigId::from_can_id(frame.id());
                    prop_assert_eq!(from, Link::Down(0));
                    prop_assert!(cid.is_ok_and(|c| c.opcode == fcan_core::id::Opcode::Discover
                        && c.dir == fcan_core::id::Direction::ToMaster
                        && c.segment == 0));
                    prop_assert_eq!(frame.len(), before.len());
                    prop_assert_eq!(frame.id(), before.id());
                }
                prop_assert!(!route.to.contains(from));
                prop_assert!(!route.to.contains(Link::Down(2)));
                if frame.is_fd() {
                    prop_assert!(!route.to.contains(Link::Down(0)));
                }
                if from != Link::Up {
                    // nothing ever crosses between downlinks
                    prop_assert!(route.to.is_empty() || route.to == LinkSet::one(Link::Up));
                }
                r.poll(now);
                while r.pop_event().is_some() {}
            }
            prop_assert!(r.std_id_count() <= 4);
        }

        /// An ANNOUNCE forwarded up stays decodable with every field as sent, except the
        /// capabilities the path cannot carry: on either frame kind, for every pairing
        /// of uplink and downlink kinds.
        #[test]
        fn a_forwarded_announce_keeps_every_field_but_the_masked_bits(
            protocol in any::<u8>(),
            state in prop::sample::select(&[
                NodeState::Unprovisioned,
                NodeState::Provisioned,
                NodeState::Running,
                NodeState::Suspended,
                NodeState::Fault,
            ][..]),
            caps_in in 0..=caps::KNOWN,
            boot_id in any::<u32>(),
            blob_len in any::<u32>(),
            hash in any::<[u8; 8]>(),
            counts in prop::collection::vec(any::<u8>(), 0..=255),
            up_fd in any::<bool>(),
            down_fd in any::<bool>(),
            frames_fd in any::<bool>(),
        ) {
            let kind = |fd| if fd { Mtu::Fd } else { Mtu::Classic };
            let (up, down) = (kind(up_fd), kind(down_fd));
            // FD frames cannot go up a classic uplink at all; nodes send ANNOUNCE in
            // Classical CAN frames anyway (§3.3).
            let mtu = kind(frames_fd && up_fd);
            let mut r: Router<1> = Router::new(RouterConfig {
                uplink_mtu: up,
                downlink_mtu: [Some(down)],
                flood_unknown_m2s: false,
                forward_foreign: true,
            });
            let a = Announce {
                protocol, state, caps: caps_in, boot_id, blob_len,
                hash: HashPrefix(hash), counts: &counts,
            };
            let fs = frames(&ConfigMessage::Announce(a), n(9), 0, mtu);
            let mut up_bytes = Vec::new();
            for sent in &fs {
                let mut f = *sent;
                let route = r.route(A, &mut f, 0);
                prop_assert_eq!(links(&route), [UP]);
                prop_assert_eq!((f.id(), f.len(), f.is_fd()), (sent.id(), sent.len(), sent.is_fd()));
                up_bytes.extend_from_slice(f.data());
            }
            let masked = caps::unusable_on(up.min(down));
            let got = ConfigMessage::decode(
                fcan_core::id::Opcode::Discover,
                fcan_core::id::Direction::ToMaster,
                &up_bytes,
            );
            prop_assert_eq!(
                got,
                Ok(ConfigMessage::Announce(Announce { caps: caps_in & !masked, ..a }))
            );
            prop_assert_eq!(
                r.counters().down[0].fd_masked,
                u64::from(caps_in & masked != 0)
            );
        }
    }
}

#[test]
fn ram_footprint_is_bounded() {
    let two = core::mem::size_of::<Router<2>>();
    let eight = core::mem::size_of::<Router<8>>();
    let small = core::mem::size_of::<Router<4, 64>>();
    std::println!("Router<2>: {two} B, Router<8>: {eight} B, Router<4, 64>: {small} B");
    assert!(two < 12 * 1024 && eight < 12 * 1024 && small < 6 * 1024);
}
