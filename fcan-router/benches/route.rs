//! The per-frame routing decision of the core (`Router::route`), for the frames a router
//! sees most: data frames both ways, node heartbeats, master broadcasts, and the
//! FRAME_DEFINEs it learns from.
//!
//! `cargo bench -p fcan-router --bench route`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::{ConfigId, NodeId};
use fcan_core::msg::*;
use fcan_core::segment::Segmenter;
use fcan_router::{Link, Router, RouterConfig};

fn frames(msg: &ConfigMessage, node: NodeId, mtu: Mtu) -> Vec<Frame> {
    let mut buf = [0u8; 2048];
    let len = msg.encode(&mut buf).unwrap();
    let id = ConfigId::single(msg.opcode(), msg.direction(), node, 1);
    Segmenter::new(id, mtu, &buf[..len], &[]).unwrap().collect()
}

fn heartbeat(node: u8) -> Frame {
    let msg = ConfigMessage::NodeHeartbeat(NodeHeartbeat {
        state: NodeState::Running,
        fault: FaultCode::None,
        boot_id: 7,
        errors: 0,
    });
    frames(&msg, NodeId::new(node).unwrap(), Mtu::Classic)[0]
}

fn frame_define(node: u8, index: u8, std_id: u16, dir: DataDirection, mtu: Mtu) -> Vec<Frame> {
    let entries = [CopyEntry {
        block: 0,
        topic: 0,
        src_offset: 0,
        len: 4,
        dst_offset: 0,
    }; 4];
    let msg = ConfigMessage::FrameDefine(FrameDefine {
        header: FrameHeader {
            index,
            std_id,
            dir,
            sequenced: false,
            masked: false,
            len: 16,
            group_parts: 1,
            group_index: 0,
            period_us: 0,
        },
        entries: Entries::List(&entries),
    });
    frames(&msg, NodeId::new(node).unwrap(), mtu)
}

/// A router with `nodes` nodes spread over its downlinks, each with 6 m2s and 6 s2m
/// identifiers learned (up to the whole data range).
fn populated<const N: usize>(nodes: u8) -> Router<N> {
    let mut r: Router<N> = Router::new(RouterConfig::uniform(Mtu::Fd));
    let mut id = 0x100u16;
    for n in 0..nodes {
        r.route(Link::Down(n % N as u8), &mut heartbeat(n), 0);
        for k in 0..12u8 {
            if id >= 0x400 {
                break;
            }
            let dir = if k % 2 == 0 {
                DataDirection::M2s
            } else {
                DataDirection::S2m
            };
            for mut f in frame_define(n, k, id, dir, Mtu::Fd) {
                r.route(Link::Up, &mut f, 0);
            }
            id += 1;
        }
    }
    while r.pop_event().is_some() {}
    r
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("route");

    let mut r2 = populated::<2>(20);
    let mut m2s = Frame::fd(CanId::Standard(0x100 + 12 * 7), &[1; 16]).unwrap();
    let mut s2m = Frame::fd(CanId::Standard(0x101 + 12 * 7), &[1; 16]).unwrap();
    let mut hb = heartbeat(7);
    let mut master_hb = frames(
        &ConfigMessage::MasterHeartbeat(MasterHeartbeat { session: 1 }),
        NodeId::BROADCAST,
        Mtu::Classic,
    )[0];
    let mut unicast = frames(
        &ConfigMessage::Start(Start {
            frame_count: 1,
            master_timeout_ms: 300,
        }),
        NodeId::new(7).unwrap(),
        Mtu::Classic,
    )[0];
    let mut define_fd = frame_define(7, 0, 0x100 + 12 * 7, DataDirection::M2s, Mtu::Fd)[0];
    let mut define_classic = frame_define(7, 0, 0x100 + 12 * 7, DataDirection::M2s, Mtu::Classic);

    g.bench_function("m2s data, uplink → 1 of 2 downlinks", |b| {
        b.iter(|| r2.route(Link::Up, black_box(&mut m2s), black_box(1000)))
    });
    g.bench_function("s2m data, downlink → uplink", |b| {
        b.iter(|| r2.route(Link::Down(1), black_box(&mut s2m), black_box(1000)))
    });
    g.bench_function(
        "node heartbeat (decode + learn), downlink → uplink",
        |b| b.iter(|| r2.route(Link::Down(1), black_box(&mut hb), black_box(1000))),
    );
    g.bench_function("master heartbeat broadcast, uplink → all", |b| {
        b.iter(|| r2.route(Link::Up, black_box(&mut master_hb), black_box(1000)))
    });
    g.bench_function("unicast config, uplink → node's downlink", |b| {
        b.iter(|| r2.route(Link::Up, black_box(&mut unicast), black_box(1000)))
    });
    g.bench_function(
        "FRAME_DEFINE, one FD frame (capture + decode + learn; a retry)",
        |b| b.iter(|| r2.route(Link::Up, black_box(&mut define_fd), black_box(1000))),
    );
    g.bench_function("FRAME_DEFINE, classic transfer (3 frames)", |b| {
        b.iter(|| {
            for f in &mut define_classic {
                r2.route(Link::Up, black_box(f), black_box(1000));
            }
        })
    });

    // The whole data range learned, 8 downlinks.
    let mut r8 = populated::<8>(64);
    let mut last = Frame::fd(CanId::Standard(0x3FE), &[1; 64]).unwrap();
    g.bench_function("m2s data, 768 identifiers, 8 downlinks", |b| {
        b.iter(|| r8.route(Link::Up, black_box(&mut last), black_box(1000)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
