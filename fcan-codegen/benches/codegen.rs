//! Parsing + validating + generating (blob, hash, Rust) the largest example schema: the
//! eight-motor driver in `schema/examples/motor_driver.yaml`. Target: under 20 ms.
//!
//! `cargo bench -p fcan-codegen --bench codegen`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use fcan_codegen::{generate, load_sources, Source};

fn source(path: &str) -> Source {
    let full = concat!(env!("CARGO_MANIFEST_DIR"), "/../").to_string() + path;
    Source {
        name: path.to_string(),
        text: std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}")),
    }
}

fn bench(c: &mut Criterion) {
    let motor = [source("schema/examples/motor_driver.yaml")];
    let io = [source("schema/examples/io_board.yaml")];
    c.bench_function(
        "motor_driver (8 motors): parse + validate + generate",
        |b| {
            b.iter(|| {
                let loaded = load_sources(black_box(&motor)).expect("valid");
                generate(&loaded).expect("generates")
            })
        },
    );
    c.bench_function("motor_driver: parse + validate only", |b| {
        b.iter(|| load_sources(black_box(&motor)).expect("valid"))
    });
    c.bench_function("io_board: parse + validate + generate", |b| {
        b.iter(|| {
            let loaded = load_sources(black_box(&io)).expect("valid");
            generate(&loaded).expect("generates")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
