//! Taking a configuration-plane frame allocates nothing per frame (issue 10, item 2: the
//! engine once replaced its 256 KiB reassembly pool with a fresh one on every extended
//! frame). Counted with a global allocator that tallies bytes requested.

#[path = "support/mod.rs"]
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_master::engine::NoSink;
use support::EngineWorld;

struct Counting;

static BYTES: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn extended_frames_allocate_nothing_per_frame() {
    let mut w = EngineWorld::new(Mtu::Fd, 1, 1);
    w.provision();
    // The nodes' heartbeats (configuration plane, node → master), as recorded.
    let mut hb: Vec<Frame> = Vec::new();
    while hb.len() < 4 {
        hb.extend(
            w.step(1000, &mut NoSink)
                .into_iter()
                .filter(|f| matches!(f.id(), CanId::Extended(_))),
        );
    }
    let before = BYTES.load(Ordering::Relaxed);
    for i in 0..1000 {
        let f = &hb[i % hb.len()];
        w.engine.handle_frame(f, w.now_us, &mut NoSink);
    }
    let per_frame = (BYTES.load(Ordering::Relaxed) - before) / 1000;
    // Before the fix: 262,144+ bytes per frame.
    assert!(per_frame < 64, "{per_frame} bytes allocated per heartbeat");
}
