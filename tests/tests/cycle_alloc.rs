//! After activation, `Cycle::read` and `Cycle::write` allocate nothing: a counting
//! allocator (this test binary's global allocator) counts every allocation the loop's
//! thread makes inside those calls, over a thousand cycles on two real example nodes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_cycle::{Cycle, CycleConfig};
use fcan_e2e::World;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread's allocations are counted (only inside read/write).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    let out = f();
    COUNTING.with(|c| c.set(false));
    (out, ALLOCATIONS.load(Ordering::Relaxed) - before)
}

#[tokio::test(start_paused = true)]
async fn read_and_write_do_not_allocate() {
    // The counter counts: a Vec allocates once.
    let (v, n) = allocations(|| Vec::<u8>::with_capacity(16));
    assert_eq!((v.capacity() >= 16, n), (true, 1));

    // CAN FD: the eight targets share a frame. (On Classical CAN eight 5-byte targets
    // are eight frames a cycle: 8,000 frames/s at 1 kHz saturates a 1 Mbit/s bus and
    // the feedback starves — the loop faults, as it should.)
    let (_w, m) = World::standard(Mtu::Fd).await;
    // Position and velocity of four motors on each driver, and their velocity
    // commands: 16 states, 8 commands in one batch.
    let mut config = CycleConfig::new(1000.0);
    for node in ["motor_driver1", "motor_driver2"] {
        for motor in 0..4 {
            let j = format!("{node}_m{motor}");
            let topic = format!("/{node}/motor{motor}");
            config = config
                .state(
                    &format!("{j}/position"),
                    &format!("{topic}/feedback.position"),
                )
                .state(
                    &format!("{j}/velocity"),
                    &format!("{topic}/feedback.velocity"),
                )
                .command(
                    &format!("{j}/velocity"),
                    &format!("{topic}/target{{type: 1}}.value"),
                    0.0,
                );
        }
    }
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    let mut commands = vec![0.0; cycle.command_names().len()];
    let mut tick = tokio::time::interval(cycle.period());
    let mut total = 0;
    for i in 0..1000 {
        tick.tick().await;
        let (ok, n) = allocations(|| {
            let s = cycle.read()?;
            let v = s.value(0);
            for (k, c) in commands.iter_mut().enumerate() {
                *c = (i as f64 * 1e-3 + k as f64 * 0.01).sin() * 0.5 + v * 0.0;
            }
            cycle.write(&commands)
        });
        ok.unwrap();
        total += n;
    }
    assert_eq!(total, 0, "allocations in read/write over 1000 cycles");
    let stats = cycle.stats();
    assert_eq!(stats.cycles, 1000);
    assert!(stats.batches_sent > 900, "the batches went out: {stats:?}");
}
