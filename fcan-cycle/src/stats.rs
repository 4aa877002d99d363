//! Cycle statistics: period and jitter, read/write cost, deadline misses. Updated in
//! place by [`super::Cycle::read`] and [`super::Cycle::write`]: fixed-size, no allocation
//! after configuration.

use std::time::Duration;

/// The jitter histogram's resolution and reach: 1 µs buckets up to this, one overflow
/// bucket beyond. 2 ms covers a 500 Hz loop's whole period.
const JITTER_BUCKETS_US: usize = 2000;

/// Minimum, mean and maximum of a duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Spread {
    /// Smallest.
    pub min: Duration,
    /// Mean.
    pub mean: Duration,
    /// Largest.
    pub max: Duration,
}

#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    n: u64,
    sum_ns: u128,
    min: Duration,
    max: Duration,
}

impl Acc {
    fn add(&mut self, d: Duration) {
        if self.n == 0 || d < self.min {
            self.min = d;
        }
        if d > self.max {
            self.max = d;
        }
        self.n += 1;
        self.sum_ns += d.as_nanos();
    }

    fn spread(&self) -> Spread {
        let mean = if self.n == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos((self.sum_ns / self.n as u128) as u64)
        };
        Spread {
            min: self.min,
            mean,
            max: self.max,
        }
    }
}

/// What the loop measured since activation (see [`super::Cycle::stats`]).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct CycleStats {
    /// Cycles (reads) since activation.
    pub cycles: u64,
    /// The nominal period.
    pub nominal: Duration,
    /// Time from one read to the next.
    pub period: Spread,
    /// |period − nominal|, median.
    pub jitter_p50: Duration,
    /// |period − nominal|, 99th percentile; when it lies past the 2 ms the histogram
    /// resolves, the largest jitter seen (an upper bound of it).
    pub jitter_p99: Duration,
    /// |period − nominal|, largest.
    pub jitter_max: Duration,
    /// Periods longer than nominal × (1 + `deadline_tolerance`).
    pub deadline_misses: u64,
    /// Time spent in [`super::Cycle::read`].
    pub read_time: Spread,
    /// Time spent in [`super::Cycle::write`].
    pub write_time: Spread,
    /// Batches written by the loop.
    pub batches_written: u64,
    /// Batches sent to the master.
    pub batches_sent: u64,
    /// Batches the writer merged into a newer one (the master was still busy with the
    /// previous: the newest command wins).
    pub batches_coalesced: u64,
    /// Safe-stop batches sent.
    pub safe_stop_sends: u64,
    /// Deactivation flushes sent (one batch per node).
    pub flush_sends: u64,
}

/// The accumulators behind [`CycleStats`].
pub(crate) struct Recorder {
    nominal: Duration,
    late_after: Duration,
    period: Acc,
    read: Acc,
    write: Acc,
    jitter: Box<[u32]>,
    jitter_max: Duration,
    misses: u64,
}

impl Recorder {
    pub fn new(nominal: Duration, tolerance: f64) -> Recorder {
        Recorder {
            nominal,
            late_after: nominal.mul_f64(1.0 + tolerance),
            period: Acc::default(),
            read: Acc::default(),
            write: Acc::default(),
            jitter: vec![0; JITTER_BUCKETS_US + 1].into_boxed_slice(),
            jitter_max: Duration::ZERO,
            misses: 0,
        }
    }

    /// Starts over (at activation).
    pub fn reset(&mut self) {
        self.period = Acc::default();
        self.read = Acc::default();
        self.write = Acc::default();
        self.jitter.iter_mut().for_each(|b| *b = 0);
        self.jitter_max = Duration::ZERO;
        self.misses = 0;
    }

    pub fn period(&mut self, p: Duration) {
        self.period.add(p);
        let jitter = p.abs_diff(self.nominal);
        self.jitter_max = self.jitter_max.max(jitter);
        let bucket = (jitter.as_micros() as usize).min(JITTER_BUCKETS_US);
        if let Some(b) = self.jitter.get_mut(bucket) {
            *b = b.saturating_add(1);
        }
        if p > self.late_after {
            self.misses += 1;
        }
    }

    pub fn read(&mut self, d: Duration) {
        self.read.add(d);
    }

    pub fn write(&mut self, d: Duration) {
        self.write.add(d);
    }

    /// The `q` quantile of the jitter, to the microsecond; past the histogram's range
    /// the largest jitter seen, which bounds it.
    fn percentile(&self, q: f64) -> Duration {
        let total: u64 = self.jitter.iter().map(|&b| b as u64).sum();
        if total == 0 {
            return Duration::ZERO;
        }
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (us, &n) in self.jitter.iter().enumerate() {
            seen += n as u64;
            if seen >= want {
                return if us == JITTER_BUCKETS_US {
                    self.jitter_max
                } else {
                    Duration::from_micros(us as u64)
                };
            }
        }
        self.jitter_max
    }

    pub fn snapshot(&self, cycles: u64) -> CycleStats {
        CycleStats {
            cycles,
            nominal: self.nominal,
            period: self.period.spread(),
            jitter_p50: self.percentile(0.5),
            jitter_p99: self.percentile(0.99),
            jitter_max: self.jitter_max,
            deadline_misses: self.misses,
            read_time: self.read.spread(),
            write_time: self.write.spread(),
            ..CycleStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_percentiles_and_misses() {
        let mut r = Recorder::new(Duration::from_millis(2), 0.1);
        for i in 0..100u64 {
            // 99 periods 2 ms + i µs (jitter 0..98 µs), one 3 ms (a miss, jitter 1000 µs).
            let p = if i == 99 {
                Duration::from_millis(3)
            } else {
                Duration::from_millis(2) + Duration::from_micros(i)
            };
            r.period(p);
        }
        let s = r.snapshot(100);
        assert_eq!(s.deadline_misses, 1);
        assert_eq!(s.jitter_p50, Duration::from_micros(49));
        assert_eq!(s.jitter_p99, Duration::from_micros(98));
        assert_eq!(s.jitter_max, Duration::from_millis(1));
        assert_eq!(s.period.min, Duration::from_millis(2));
        assert_eq!(s.period.max, Duration::from_millis(3));
    }

    #[test]
    fn a_percentile_past_the_histogram_is_the_largest_jitter() {
        let mut r = Recorder::new(Duration::from_millis(2), 0.1);
        // Half the periods 12 ms late, beyond the 2 ms the buckets resolve.
        for i in 0..100u64 {
            let late = if i % 2 == 0 { 12 } else { 0 };
            r.period(Duration::from_millis(2 + late) + Duration::from_micros(i));
        }
        let s = r.snapshot(100);
        assert_eq!(s.jitter_max, Duration::from_micros(12_098));
        assert_eq!(s.jitter_p99, s.jitter_max, "not Duration::MAX");
        assert!(
            s.jitter_p50 <= Duration::from_micros(99),
            "{:?}",
            s.jitter_p50
        );
    }
}
