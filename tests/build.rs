//! Builds the C I/O board for the tests that run it (tests/src/c_board.rs): the code
//! `fcan-codegen c` generates from the example schema, the C application of
//! examples/c-io-board and a small wrapper (tests/c/board.c), into one static library.
//! The node runtime it calls is fcan-node-c, linked as a Rust dependency.

use std::path::{Path, PathBuf};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let schema = root.join("schema/examples/io_board.yaml");
    let app = root.join("examples/c-io-board/app");
    let include = root.join("fcan-node-c/include");
    for p in [
        schema.clone(),
        app.join("io_board_app.c"),
        app.join("io_board_app.h"),
        include.join("fcan.h"),
        root.join("tests/c/board.c"),
        root.join("tests/c/hostile.c"),
    ] {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("c-io-board");
    let loaded = fcan_codegen::load_files(&[&schema]).unwrap_or_else(|d| panic!("{d}"));
    let generated = fcan_codegen::c::generate(&loaded).unwrap_or_else(|d| panic!("{d}"));
    generated.write_to(&out).expect("generated C written");
    cc::Build::new()
        .std("c99")
        // fcan-node-c is built with its `update` feature here (tests/Cargo.toml): the
        // header's update API is on.
        .define("FCAN_UPDATE", "1")
        // Floats round as Rust's do (no fused multiply-add), as the app requires.
        .flag_if_supported("-ffp-contract=off")
        .warnings(true)
        .include(&out)
        .include(&include)
        .include(&app)
        .file(out.join("fcan_io_board.c"))
        .file(app.join("io_board_app.c"))
        .file(root.join("tests/c/board.c"))
        .file(root.join("tests/c/hostile.c"))
        .compile("c_io_board");
}
