//! Validation time against blob size, for the blobs a hostile node could send and for
//! large valid ones: what the master spends on a downloaded blob (hash, decode, checks,
//! numbering). A bench binary that prints a table (`docs/performance.md`):
//!
//! ```sh
//! cargo bench -p fcan-core --bench validate
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use fcan_core::blob;
use fcan_core::hash::SchemaDigest;
use fcan_core::numbering::Numbering;
use fcan_core::validate::{validate, validate_untrusted};

#[path = "../tests/support/hostile.rs"]
mod hostile;

/// The median of `runs` timings of `f` (at least one run, at most ~1 s in all).
fn time(mut f: impl FnMut()) -> Duration {
    let mut v = Vec::new();
    let start = Instant::now();
    while v.len() < 101 && (v.len() < 3 || start.elapsed() < Duration::from_secs(1)) {
        let t = Instant::now();
        f();
        v.push(t.elapsed());
    }
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: run once, small.
    let sizes: &[usize] = if std::env::args().any(|a| a == "--bench") {
        &[1024, 4096, 16384, 65536]
    } else {
        &[1024]
    };
    println!(
        "{:<22} {:>8} {:>12} {:>12} {:>12}",
        "blob", "bytes", "validate", "untrusted", "master total"
    );
    type Make = fn(usize) -> fcan_core::ir::Schema;
    let kinds: [(&str, Make); 4] = [
        ("valid (wide)", hostile::wide_valid),
        ("long near names", hostile::long_names),
        ("duplicate fields", hostile::duplicate_fields),
        ("near-identical params", hostile::near_identical_params),
    ];
    for (name, make) in kinds {
        for &size in sizes {
            let bytes = blob::encode(&make(size));
            let schema = blob::decode(&bytes).expect("decodes");
            let full = time(|| {
                black_box(validate(black_box(&schema)));
            });
            let untrusted = time(|| {
                black_box(validate_untrusted(black_box(&schema)));
            });
            // What the master does with a downloaded blob, end to end.
            let total = time(|| {
                let d = SchemaDigest::of(black_box(&bytes));
                let s = blob::decode(&bytes).expect("decodes");
                if validate_untrusted(&s).is_none() {
                    black_box(Numbering::of(&s).ok());
                }
                black_box(d);
            });
            println!(
                "{name:<22} {:>8} {:>12.1?} {:>12.1?} {:>12.1?}",
                bytes.len(),
                full,
                untrusted,
                total
            );
        }
    }
}
