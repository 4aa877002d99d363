//! Frame arrival → subscriber latency in process, as percentiles, and the planner's
//! quality on the eight-motor node. A bench binary (prints a report), not a test.
//!
//! `cargo bench -p fcan-master --bench latency`

#[path = "../tests/support/mod.rs"]
mod common;

use std::time::Instant;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::ir::Schema;
use fcan_core::msg::DataDirection;
use fcan_core::numbering::{layout, Numbering};
use fcan_master::dispatch::SubscriberSink;
use fcan_master::planner::{plan_node, IdAllocator};
use fcan_master::registry::Registry;
use fcan_master::transport::sim::{frame_bits, BitRates};

fn main() {
    latency();
    for mtu in [Mtu::Fd, Mtu::Classic] {
        planner_quality(mtu);
    }
}

fn latency() {
    let mut world = common::EngineWorld::new(Mtu::Fd, 12, 4);
    world.provision();
    let frames = world.record_data(500_000);
    let registry = Registry::of(&world.engine);
    let mut sink = SubscriberSink::default();
    sink.set_base(tokio::time::Instant::now());
    let mut receivers = Vec::new();
    for t in &registry.topics {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        sink.subscribe((t.node, t.block, t.topic), &t.name, &t.fields, tx);
        receivers.push(rx);
    }
    // Warm up, then time each frame from hand-over to the engine until every sample it
    // carries is in its subscriber's channel.
    for f in &frames {
        world.engine.handle_frame(f, 0, &mut sink);
    }
    for rx in &mut receivers {
        while rx.try_recv().is_ok() {}
    }
    let mut ns: Vec<u64> = Vec::with_capacity(frames.len() * 5);
    for _ in 0..5 {
        for f in &frames {
            let t0 = Instant::now();
            world.engine.handle_frame(f, 0, &mut sink);
            ns.push(t0.elapsed().as_nanos() as u64);
        }
        for rx in &mut receivers {
            while rx.try_recv().is_ok() {}
        }
    }
    ns.sort_unstable();
    let pct = |p: f64| ns[((ns.len() as f64 * p) as usize).min(ns.len() - 1)];
    println!(
        "frame arrival -> subscriber channel, {} frames, every topic subscribed:",
        ns.len()
    );
    println!(
        "  p50 {:.2} µs  p99 {:.2} µs  p99.9 {:.2} µs  max {:.2} µs",
        pct(0.5) as f64 / 1e3,
        pct(0.99) as f64 / 1e3,
        pct(0.999) as f64 / 1e3,
        *ns.last().unwrap() as f64 / 1e3
    );
}

/// Frames and bus load of the planner's plan for the eight-motor node against one frame per
/// topic, assuming every s2m topic at its period and m2s topics at 1 kHz.
fn planner_quality(mtu: Mtu) {
    let loaded = fcan_codegen_free_schema();
    let schema: &Schema = &loaded;
    let counts = [8u8];
    let plan = plan_node(schema, &counts, mtu, &mut IdAllocator::new()).expect("plans");
    let numbering = Numbering::of(schema).unwrap();
    let rates = BitRates::default();
    let ty = &schema.types[0];
    let frame_time = |len: usize| {
        let f = Frame::padded(mtu, CanId::Standard(0x100), &vec![0x55; len]).unwrap();
        rates.frame_time(&f).as_secs_f64()
    };
    let hz = |dir: DataDirection, period: u32| {
        if dir == DataDirection::M2s || period == 0 {
            1000.0
        } else {
            1e6 / period as f64
        }
    };
    let mut planned = 0.0;
    for f in &plan.frames {
        planned += frame_time(f.header.len as usize) * hz(f.header.dir, f.header.period_us);
    }
    let mut naive = 0.0;
    let mut naive_frames = 0;
    for _block in &numbering.blocks {
        for t in &ty.topics {
            let size = layout(&t.fields).size;
            let parts = fcan_core::numbering::topic_frames(mtu, size);
            naive_frames += parts;
            let per = if parts == 1 { size } else { mtu.payload() };
            naive += frame_time(per) * parts as f64 * hz(t.dir, t.period_us);
        }
    }
    let _ = frame_bits;
    println!(
        "planner, eight-motor node on {:?} ({} kbit/s{}): {} frames, bus load {:.1} % — one frame per topic: {} frames, {:.1} %",
        mtu,
        rates.nominal / 1000,
        if mtu == Mtu::Fd { format!("/{} kbit/s", rates.data / 1000) } else { String::new() },
        plan.frames.len(),
        planned * 100.0,
        naive_frames,
        naive * 100.0
    );
}

/// The eight-motor example schema, as the master would decode it from the node's blob.
fn fcan_codegen_free_schema() -> Schema {
    fcan_core::blob::decode(&fcan_example_motor_driver::gen::BLOB).expect("blob decodes")
}
