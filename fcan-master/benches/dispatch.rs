//! Master receive path throughput: decode + dispatch of recorded data frames from a
//! realistic system (12 eight-motor drivers and 4 I/O boards on one CAN FD link, packed
//! frames) to subscribers.
//!
//! `cargo bench -p fcan-master --bench dispatch`

#[path = "../tests/support/mod.rs"]
mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fcan_core::frame::Mtu;
use fcan_master::dispatch::SubscriberSink;
use fcan_master::engine::NoSink;
use fcan_master::registry::Registry;

fn dispatch(c: &mut Criterion) {
    let mut world = common::World::new(Mtu::Fd, 12, 4);
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
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
