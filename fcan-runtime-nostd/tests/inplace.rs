//! Construction in place: `Node::unconfigured` (a `const`, for a `static`) then
//! `Node::configure` behaves exactly like `Node::new`; an unconfigured node is inert.

mod common;
use common::*;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::*;
use fcan_runtime_nostd::codegen::*;
use fcan_runtime_nostd::*;

/// Proves `unconfigured` is usable in a `static` initialiser.
static UNCONFIGURED: TestNode = Node::unconfigured(&DESC, Buffers::new());

fn config(boot_id: u32) -> NodeConfig<'static> {
    NodeConfig {
        node_id: node_id(),
        boot_id,
        counts: &COUNTS,
        controller: Controller::Classic,
    }
}

/// Everything observable through the public read API, for comparing two nodes.
fn snapshot(node: &TestNode) -> String {
    let mut s = format!(
        "configured {} state {:?} fault {:?} counters {:?} overflows {} id {:?} boot {} mode {:?}\n",
        node.is_configured(),
        node.state(),
        node.fault(),
        node.counters(),
        node.rx_overflows(),
        node.node_id(),
        node.boot_id(),
        node.bus_mode(),
    );
    for block in 0..=255u8 {
        s += &format!("block {block} wired {}", node.is_wired(block));
        for param in 0..4 {
            s += &format!(" p{param} {:?}", node.param(block, param));
        }
        for topic in 0..5 {
            s += &format!(" t{topic} {:?}", node.topic(block, topic));
        }
        s += "\n";
    }
    s
}

/// What a master sees from a rig, for comparing two rigs.
fn transcript(rig: &mut Rig) -> Vec<(ConfigId, Vec<u8>, u32, bool)> {
    rig.take()
        .into_iter()
        .map(|m| (m.id, m.payload, m.at, m.fd))
        .collect()
}

fn configured_in_place(fd: bool) -> TestNode {
    let mut node = Node::unconfigured(&DESC, Buffers::new());
    assert!(!node.is_configured());
    node.configure(NodeConfig {
        controller: if fd {
            Controller::Fd
        } else {
            Controller::Classic
        },
        ..config(BOOT_ID)
    })
    .unwrap();
    assert!(node.is_configured());
    node
}

#[test]
fn unconfigured_is_const_and_reports_inert_state() {
    let node = &UNCONFIGURED;
    assert!(!node.is_configured());
    assert_eq!(node.state(), NodeState::Unprovisioned);
    assert_eq!(node.fault(), FaultCode::None);
    assert_eq!(node.counters(), Counters::default());
    assert_eq!(node.node_id(), NodeId::BROADCAST);
    assert!(core::ptr::eq(node.desc(), &DESC));
    for block in 0..5 {
        assert!(!node.is_wired(block));
        assert_eq!(node.param(block, P_GAIN), None);
        assert!(node.topic(block, T_CMD).is_none());
    }
}

#[test]
fn configure_in_place_equals_new() {
    let a = new_node(false);
    let b = configured_in_place(false);
    assert_eq!(snapshot(&a), snapshot(&b));
    // Params at their defaults, as `new` writes them.
    assert_eq!(b.param(0, P_GAIN), Some(&1.0f32.to_le_bytes()[..]));
    assert_eq!(b.param(3, P_ENABLE), Some(&[0u8][..]));
    assert_eq!(b.param(2, P_GAIN), None, "unwired");
}

#[test]
fn configured_in_place_boots_runs_and_talks_exactly_like_new() {
    for fd in [false, true] {
        let mut a = Rig::new(fd);
        let mut b = Rig::with_node(configured_in_place(fd));
        for rig in [&mut a, &mut b] {
            rig.boot_and_ack(if fd { BusMode::Fd } else { BusMode::Classic });
            standard_plan(rig);
            assert!(rig.start(5, 300).is_ack());
            rig.inject(Frame::padded(rig.mtu, CanId::Standard(0x120), &[1, 2, 3, 4, 5]).unwrap());
            rig.advance(50_000);
        }
        assert_eq!(a.node.state(), NodeState::Running);
        assert_eq!(transcript(&mut a), transcript(&mut b));
        assert_eq!(a.data, b.data);
        assert_eq!(a.app.events, b.app.events);
        assert_eq!(snapshot(&a.node), snapshot(&b.node));
    }
}

#[test]
fn unconfigured_node_ignores_frames_and_sends_nothing() {
    let mut rig = Rig::with_node(Node::unconfigured(&DESC, Buffers::new()));
    rig.poll();
    rig.send_broadcast(ConfigMessage::Discover(Discover { session: SESSION }));
    rig.send(ConfigMessage::StatsRead);
    rig.send(ConfigMessage::AnnounceAck(AnnounceAck {
        boot_id: 0,
        session: SESSION,
        mode: BusMode::Classic,
    }));
    // Data, foreign, malformed and non-config extended frames.
    rig.inject(Frame::padded(Mtu::Classic, CanId::Standard(0x120), &[1; 8]).unwrap());
    rig.inject(Frame::padded(Mtu::Classic, CanId::Standard(0x7FF), &[]).unwrap());
    rig.inject(Frame::padded(Mtu::Classic, CanId::Extended(0x1FFF_FFFF), &[0; 8]).unwrap());
    rig.inject(Frame::padded(Mtu::Fd, CanId::Extended(0), &[0xAA; 64]).unwrap());
    let collide = ConfigId::single(Opcode::Discover, Direction::ToMaster, NodeId::BROADCAST, 0);
    rig.inject(Frame::padded(Mtu::Classic, collide.can_id(), &[0; 8]).unwrap());
    for _ in 0..(RX_QUEUE_LEN * 2) {
        rig.node.receive(
            &Frame::padded(Mtu::Classic, collide.can_id(), &[0; 8]).unwrap(),
            rig.now,
        );
    }
    rig.advance(5_000_000);
    assert!(rig.take().is_empty(), "an unconfigured node spoke");
    assert!(rig.data.is_empty());
    assert!(rig.app.events.is_empty());
    assert_eq!(rig.node.counters(), Counters::default(), "counted nothing");
    assert_eq!(rig.node.rx_overflows(), 0);
    assert_eq!(rig.node.state(), NodeState::Unprovisioned);
    assert_eq!(
        rig.node.publish(0, T_FEEDBACK, &[0; 6]),
        Err(PublishError::NotWired)
    );
    assert!(!rig.node.is_configured());

    // Configured later, it boots normally: the listen window opens at the next poll.
    rig.node.configure(config(BOOT_ID)).unwrap();
    rig.boot_and_ack(BusMode::Classic);
    standard_plan(&mut rig);
    assert!(rig.start(5, 300).is_ack());
    assert_eq!(rig.node.state(), NodeState::Running);
}

#[test]
fn configure_again_is_a_fresh_boot() {
    let mut rig = running_rig();
    // Change a param, run a while, so there is state to forget.
    let r = rig.command(ConfigMessage::ParamSet(ParamSet {
        block: 0,
        param: P_GAIN,
        commit: true,
        value: &2.5f32.to_le_bytes(),
    }));
    assert!(r.is_ack());
    rig.node.publish(0, T_FEEDBACK, &[9; 6]).unwrap();
    rig.advance(30_000);
    assert_ne!(rig.node.counters(), Counters::default());

    rig.node.configure(config(BOOT_ID)).unwrap();
    assert_eq!(snapshot(&rig.node), snapshot(&new_node(false)));

    // And the whole flow works again.
    rig.take();
    rig.mtu = Mtu::Classic;
    rig.boot_and_ack(BusMode::Classic);
    standard_plan(&mut rig);
    assert!(rig.start(5, 300).is_ack());
    assert_eq!(rig.node.state(), NodeState::Running);
}

#[test]
fn failed_configure_leaves_the_node_inert() {
    let mut node: TestNode = Node::unconfigured(&DESC, Buffers::new());
    assert_eq!(
        node.configure(NodeConfig {
            counts: &[1],
            ..config(BOOT_ID)
        }),
        Err(ConfigError::CountsLength)
    );
    assert!(!node.is_configured());

    // A running node reconfigured with bad counts: inert, as unconfigured.
    let mut rig = running_rig();
    assert_eq!(
        rig.node.configure(NodeConfig {
            counts: &[9, 1],
            ..config(BOOT_ID)
        }),
        Err(ConfigError::CountTooLarge { array: 0 })
    );
    assert!(!rig.node.is_configured());
    assert_eq!(
        snapshot(&rig.node),
        snapshot(&Node::unconfigured(&DESC, Buffers::new()))
    );
    rig.take();
    rig.data.clear();
    rig.inject(Frame::padded(Mtu::Classic, CanId::Standard(0x120), &[1; 8]).unwrap());
    rig.advance(1_000_000);
    assert!(rig.take().is_empty());
    assert!(rig.data.is_empty());

    // Too-small buffers fail the same way as in `new`.
    let mut small: Node<Buffers<1, 0, 0, 0, 0, 0, 0, 0, 0>> =
        Node::unconfigured(&DESC, Buffers::new());
    assert_eq!(
        small.configure(config(BOOT_ID)),
        Err(ConfigError::TopicBytes)
    );
    assert!(!small.is_configured());
}
