//! The fcan node runtime for C firmware.
//!
//! One C API (`include/fcan.h`, generated from this crate by cbindgen) over the one node
//! runtime, [`fcan_runtime_nostd`]: a C node runs the same code a Rust node runs, so the
//! wire rules stay in Rust. Shaped like libcanard: the application owns the RAM, the
//! clock and the CAN controller; it calls `fcan_node_ingest(node, &frame, now)` for each
//! received frame and `fcan_node_poll(node, now)` in its loop, and gets frames to send
//! through a transmit callback.
//!
//! The library knows no schema: `fcan-codegen c` emits the schema's tables
//! (`fcan_node_desc_t`, `const`, in flash), typed accessors and the handler glue, so one
//! build of `libfcan_node.a` per target serves every node (`scripts/build-lib.sh`).
//!
//! What a C team must know about this being Rust:
//! - No allocation: the node lives in the one RAM area given to `fcan_node_init`.
//! - No panic reaches C: the runtime does not panic on bus input (its tests and fuzzers
//!   check it); were a bug to panic anyway, the staticlib's panic handler (feature
//!   `panic-handler`) stops in a tight loop with interrupts untouched, so the board's
//!   watchdog resets it. Nothing unwinds across the ABI (`panic = "abort"`).
//! - One Rust archive per image: two Rust staticlibs in one link clash on their runtime
//!   symbols (rust-lang/rust#44322). Link only `libfcan_node.a`.
//! - The archive carries Rust's compiler builtins (`__aeabi_*`, `memcpy`, …): most are
//!   weak; 37 (compiler-rt's division and comparison helpers) are strong but live in
//!   archive members that define nothing libgcc's members lack, so linking libgcc beside
//!   it never clashes, in any link order (checked against GCC 12's libgcc for Cortex-M4F;
//!   examples/c-io-board/firmware links both). Read the archive with `readelf`, not
//!   binutils `nm`, which lists no symbols for the LLVM-bitcode builtins objects.

#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

pub mod abi;
mod arena;
mod desc;
mod layout;
mod node;
#[cfg(feature = "update")]
mod update;

pub use node::*;

#[cfg(feature = "panic-handler")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // Unreachable by design (see the crate documentation): stay here so the board's
    // watchdog resets it, rather than run on with the node half-updated.
    loop {
        core::hint::spin_loop();
    }
}
