//! The lock-free meeting point of the loop and the I/O side.
//!
//! * States: one [`TopicCell`] per s2m topic, written by that topic's receive task and
//!   read by [`super::Cycle::read`], as a sequence lock over atomics: a writer never
//!   waits, a reader retries a bounded number of times and otherwise keeps the values of
//!   its previous read (a sample being written *now* is the only thing it can miss).
//!   Safe Rust: every shared word is an atomic, so a torn read is detected, never
//!   undefined.
//! * Commands: one `AtomicU64` (the `f64`'s bits) per command and a batch counter;
//!   [`super::Cycle::write`] stores and wakes the writer task, which sends whatever the
//!   newest values are (a batch the writer had no time for is merged into the next,
//!   counted as coalesced: a control loop wants the newest command, not a backlog).
//! * Faults raised off the loop (a node lost, a batch refused): a flag the loop checks
//!   with one atomic load per cycle, the details behind a mutex taken only when set.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::Fault;

/// How many times a read retries a cell being written before it keeps its old values.
/// A write is a handful of stores: a retry is needed only when the writer thread was
/// preempted between two of them.
const READ_RETRIES: u32 = 64;

/// The newest sample of one s2m topic: the values the loop picks from it.
pub(crate) struct TopicCell {
    /// Even: stable; odd: a write is under way.
    seq: AtomicU32,
    /// When the sample arrived, in ns after [`Shared::epoch`]; 0: none yet.
    at_ns: AtomicU64,
    values: Box<[AtomicU64]>,
}

impl TopicCell {
    fn new(n: usize) -> TopicCell {
        TopicCell {
            seq: AtomicU32::new(0),
            at_ns: AtomicU64::new(0),
            values: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Stores a sample. One writer per cell (its topic's receive task).
    pub fn write(&self, at_ns: u64, values: impl Iterator<Item = (usize, f64)>) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (i, v) in values {
            if let Some(slot) = self.values.get(i) {
                slot.store(v.to_bits(), Ordering::Relaxed);
            }
        }
        self.at_ns.store(at_ns.max(1), Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Copies the values into `out` and returns the sample's time, or `None` when the
    /// cell was being written on every try (then `out` holds garbage: read into scratch
    /// space and keep it only on `Some`).
    pub fn read(&self, out: &mut [f64]) -> Option<u64> {
        for _ in 0..READ_RETRIES {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let at = self.at_ns.load(Ordering::Relaxed);
            for (o, v) in out.iter_mut().zip(self.values.iter()) {
                *o = f64::from_bits(v.load(Ordering::Relaxed));
            }
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return Some(at);
            }
        }
        None
    }

    /// How many values the cell holds.
    pub fn len(&self) -> usize {
        self.values.len()
    }
}

/// What the writer task should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum WriteMode {
    /// Nothing goes out (inactive, or after a safe stop).
    Silent = 0,
    /// The loop's commands go out.
    Normal = 1,
    /// The safe commands go out, a bounded number of times, then silence.
    SafeStop = 2,
    /// The current commands go out once (deactivation), then silence.
    Flush = 3,
}

/// Shared between the loop ([`super::Cycle`]) and its I/O tasks.
pub(crate) struct Shared {
    /// The time origin of [`TopicCell`] stamps.
    pub epoch: Instant,
    pub cells: Box<[TopicCell]>,
    /// Command values (`f64` bits), by command index.
    pub commands: Box<[AtomicU64]>,
    /// Batches written by the loop.
    pub written: AtomicU64,
    /// Batches the writer merged into a later one.
    pub coalesced: AtomicU64,
    /// Batches sent.
    pub sent: AtomicU64,
    /// Safe-stop sends made.
    pub safe_sends: AtomicU64,
    /// Deactivation flushes sent (one per node).
    pub flush_sends: AtomicU64,
    mode: AtomicU8,
    /// Wakes the writer task (a batch written, the mode changed).
    pub wake: Notify,
    /// Wakes whoever waits for a safe stop to end.
    pub stopped: Notify,
    /// Set when [`Shared::fault`] holds a fault raised off the loop.
    fault_flag: AtomicU8,
    fault: Mutex<Option<Fault>>,
}

impl Shared {
    pub fn new(cell_sizes: impl Iterator<Item = usize>, commands: usize) -> Shared {
        Shared {
            epoch: Instant::now(),
            cells: cell_sizes.map(TopicCell::new).collect(),
            commands: (0..commands).map(|_| AtomicU64::new(0)).collect(),
            written: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            safe_sends: AtomicU64::new(0),
            flush_sends: AtomicU64::new(0),
            mode: AtomicU8::new(WriteMode::Silent as u8),
            wake: Notify::new(),
            stopped: Notify::new(),
            fault_flag: AtomicU8::new(0),
            fault: Mutex::new(None),
        }
    }

    /// `at` as ns after the epoch (≥ 1: 0 means "never").
    pub fn stamp(&self, at: Instant) -> u64 {
        (at.saturating_duration_since(self.epoch).as_nanos() as u64).max(1)
    }

    /// The age of a stamp at `now`.
    pub fn age(&self, stamp: u64, now: Instant) -> Duration {
        now.saturating_duration_since(self.epoch + Duration::from_nanos(stamp))
    }

    pub fn mode(&self) -> WriteMode {
        match self.mode.load(Ordering::Acquire) {
            1 => WriteMode::Normal,
            2 => WriteMode::SafeStop,
            3 => WriteMode::Flush,
            _ => WriteMode::Silent,
        }
    }

    pub fn set_mode(&self, mode: WriteMode) {
        self.mode.store(mode as u8, Ordering::Release);
        self.wake.notify_one();
    }

    /// Raises a fault from an I/O task (the first one stays) and starts the safe stop
    /// at once: a loop that stalled must not keep the motors on its last command.
    pub fn raise(&self, fault: Fault) {
        if let Ok(mut slot) = self.fault.lock() {
            if slot.is_none() {
                *slot = Some(fault);
            }
        }
        self.fault_flag.store(1, Ordering::Release);
        if self.mode() == WriteMode::Normal {
            self.set_mode(WriteMode::SafeStop);
        }
    }

    /// A fault raised off the loop, taken (one atomic load when there is none).
    pub fn take_fault(&self) -> Option<Fault> {
        if self.fault_flag.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.fault_flag.store(0, Ordering::Release);
        self.fault.lock().ok().and_then(|mut f| f.take())
    }

    /// Forgets a pending fault (on clearing).
    pub fn clear_fault(&self) {
        self.fault_flag.store(0, Ordering::Release);
        if let Ok(mut f) = self.fault.lock() {
            *f = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A reader never sees values from two different writes, however the threads
    /// interleave: the writer writes (k, k, k) and the reader checks they agree.
    #[test]
    fn reads_are_never_torn() {
        let cell = Arc::new(TopicCell::new(3));
        let writer = {
            let cell = cell.clone();
            std::thread::spawn(move || {
                for k in 1..200_000u64 {
                    cell.write(k, (0..3).map(|i| (i, k as f64)));
                }
            })
        };
        let mut out = [0.0; 3];
        let mut consistent = 0;
        while !writer.is_finished() {
            if let Some(at) = cell.read(&mut out) {
                assert!(out[0] == out[1] && out[1] == out[2], "torn: {out:?}");
                assert_eq!(out[0], at as f64, "values and stamp from one write");
                consistent += 1;
            }
        }
        writer.join().unwrap();
        assert!(consistent > 0);
        assert_eq!(cell.read(&mut out), Some(199_999));
        assert_eq!(out, [199_999.0; 3]);
    }
}
