//! Master receive path throughput: decode + dispatch of recorded data frames from a
//! realistic system (12 eight-motor drivers and 4 I/O boards on one CAN FD link, packed
//! frames) to subscribers.
//!
//! Also the configuration plane (extended identifiers), which must cost no more than
//! 3× a data frame: the nodes' heartbeats, and a foreign device's random extended frames
//! with bit 28 set (parsed as configuration identifiers, most of them dropped).
//!
//! `cargo bench -p fcan-master --bench dispatch`

#[path = "../tests/support/mod.rs"]
mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_master::dispatch::SubscriberSink;
use fcan_master::engine::NoSink;
use fcan_master::registry::Registry;

fn dispatch(c: &mut Criterion) {
    let mut world = common::EngineWorld::new(Mtu::Fd, 12, 4);
    world.provision();
    let frames = world.record_data(200_000);
    assert!(frames.len() > 1000, "recorded {} frames", frames.len());

    let mut g = c.benchmark_group("master_rx");
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.bench_function("decode_no_subscribers", |b| {
        b.iter(|| {
            for f in &frames {
                world.engine.handle_frame(black_box(f), 0, &mut NoSink);
            }
        })
    });
    // Every topic subscribed: each sample is unpacked into a Value and sent on a channel.
    let registry = Registry::of(&world.engine);
    let mut sink = SubscriberSink::default();
    sink.set_base(tokio::time::Instant::now());
    let mut receivers = Vec::new();
    for t in &registry.topics {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        sink.subscribe((t.node, t.block, t.topic), &t.name, &t.fields, tx);
        receivers.push(rx);
    }
    g.bench_function("decode_all_subscribed", |b| {
        b.iter(|| {
            for f in &frames {
                world.engine.handle_frame(black_box(f), 0, &mut sink);
            }
            for rx in &mut receivers {
                while rx.try_recv().is_ok() {}
            }
        })
    });
    g.finish();

    // Configuration plane. The nodes' own heartbeats (1/s each), recorded from the world.
    let mut heartbeats = Vec::new();
    while heartbeats.len() < 64 {
        heartbeats.extend(
            world
                .step(1000, &mut NoSink)
                .into_iter()
                .filter(|f| matches!(f.id(), CanId::Extended(_))),
        );
    }
    let heartbeats: Vec<Frame> = heartbeats.iter().cycle().take(1000).copied().collect();
    // A foreign device's traffic: random 29-bit identifiers with bit 28 set, random
    // lengths and payloads (what `cangen -e` puts on a shared bus).
    let mut rng = fastrand::Rng::with_seed(7);
    let foreign: Vec<Frame> = (0..1000)
        .map(|_| {
            let id = CanId::Extended(0x1000_0000 | rng.u32(0..0x1000_0000));
            let mut data = [0u8; 8];
            rng.fill(&mut data);
            Frame::classic(id, &data[..rng.usize(0..=8)]).unwrap()
        })
        .collect();
    let mut g = c.benchmark_group("master_rx_config");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("node_heartbeats", |b| {
        b.iter(|| {
            for f in &heartbeats {
                world
                    .engine
                    .handle_frame(black_box(f), world.now_us, &mut NoSink);
            }
        })
    });
    g.bench_function("foreign_extended", |b| {
        b.iter(|| {
            for f in &foreign {
                world
                    .engine
                    .handle_frame(black_box(f), world.now_us, &mut NoSink);
            }
            // What the engine's poll does between frames: bounded work for what the
            // foreign frames started (partial transfers expire, DISCOVERs are limited).
            while world.engine.pop_frame().is_some() {}
            while world.engine.pop_event().is_some() {}
        })
    });
    g.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
