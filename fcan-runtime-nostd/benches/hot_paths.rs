//! The runtime's hot paths: an m2s data frame in, a periodic s2m frame out, an idle
//! poll, and a multi-frame m2s group in.
//!
//! `cargo bench -p fcan-runtime-nostd --bench hot_paths`

use criterion::{criterion_group, criterion_main, Criterion};
use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::msg::*;
use fcan_runtime_nostd::*;
use std::hint::black_box;

#[path = "../tests/common/mod.rs"]
mod common;
use common::*;

/// A driver that takes everything and keeps nothing.
struct Sink;
impl Transmit for Sink {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        black_box(frame);
        Ok(())
    }
}

/// A node running the standard plan, its clock, and a quiet application.
fn running() -> (TestNode, u32, App) {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    standard_plan(&mut rig);
    // Watchdog off: the benchmark has no master heartbeats.
    assert!(rig.start(5, 0).is_ack());
    // Settle: nothing queued, the periodic frame just sent.
    rig.advance(1_000);
    let now = rig.now;
    (rig.node, now, App::default())
}

fn bench(c: &mut Criterion) {
    let (mut node, mut now, mut app) = running();
    let cmd = Frame::padded(Mtu::Classic, CanId::Standard(0x120), &[1, 2, 3, 4, 5]).unwrap();
    c.bench_function("m2s frame in (5-byte topic)", |b| {
        b.iter(|| {
            node.receive(black_box(&cmd), now);
        })
    });

    let part0 = Frame::padded(
        Mtu::Classic,
        CanId::Standard(0x130),
        &[7, 1, 2, 3, 4, 5, 6, 7],
    )
    .unwrap();
    let part1 =
        Frame::padded(Mtu::Classic, CanId::Standard(0x131), &[7, 8, 9, 10, 11, 12]).unwrap();
    c.bench_function("m2s group in (12-byte topic, 2 frames)", |b| {
        b.iter(|| {
            node.receive(black_box(&part0), now);
            node.receive(black_box(&part1), now);
        })
    });

    c.bench_function("idle poll (running, nothing due)", |b| {
        b.iter(|| {
            node.poll(black_box(now), &mut Sink, &mut app);
        })
    });

    let (mut node, start, mut app) = running();
    let mut k = 0u32;
    c.bench_function("periodic s2m out (poll with one frame due)", |b| {
        b.iter(|| {
            // Each iteration is one period later: exactly one feedback frame is due.
            k = k.wrapping_add(1);
            now = start.wrapping_add(k.wrapping_mul(FEEDBACK_PERIOD));
            node.poll(black_box(now), &mut Sink, &mut app);
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
