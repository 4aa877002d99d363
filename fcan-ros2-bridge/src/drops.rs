//! Commands from DDS that did not reach the bus, counted per writer, sans I/O.
//!
//! Each m2s route (a command topic the bridge reads) keeps, per DDS writer (its GUID, as
//! the sample says), what became of its samples that were not sent: refused by the
//! master because commands already wait for the bus (`busy`: the writer outran the bus,
//! docs/protocol.md §5.5), refused for another reason (the sample does not fit the
//! topic's fields, the master refused the value), or never seen by the bridge (a gap in
//! the writer's sequence numbers: overwritten in the reader's history while the bridge
//! was behind, or lost on the way, commands being read best effort). And it says when a
//! report is due: the first drop of a writer, then at most one a second per writer,
//! with what happened since the last one; so a flood is one log line a second per
//! writer, naming it and the reason, not one per sample.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::dds::Gid;

/// Reports of one writer's drops are at most this often.
pub const REPORT_PERIOD: Duration = Duration::from_secs(1);

/// Writers tracked per route; beyond it the one quiet for longest is forgotten (its
/// drops stay in the bridge's totals, [`crate::Ros2Stats`]).
pub const MAX_WRITERS_PER_ROUTE: usize = 64;

/// What one writer's samples of one command topic came to, besides those sent
/// ([`crate::Ros2Bridge::drops`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterDrops {
    /// The fcan topic (`/motor_driver1/motor0/target`).
    pub topic: String,
    /// The DDS writer's GUID; `None` for samples whose writer the DDS did not name.
    pub writer: Option<Gid>,
    /// Samples refused by the master because more commands already waited for the bus
    /// than it admits (its `busy`): the writer outran the bus.
    pub busy: u64,
    /// Samples refused otherwise: not fitting the topic's fields, or refused by the
    /// master (the node not running, a value out of range).
    pub refused: u64,
    /// Samples of the writer the bridge never saw (gaps in its sequence numbers).
    pub missed: u64,
    /// The reason of the last refusal (empty if none).
    pub last_reason: String,
}

/// Why a sample was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped<'a> {
    /// The master said `busy`, with its reason.
    Busy(&'a str),
    /// Refused for this reason.
    Refused(&'a str),
}

/// One writer's record.
#[derive(Debug)]
struct Entry {
    busy: u64,
    refused: u64,
    missed: u64,
    last_reason: String,
    /// The highest sequence number seen.
    last_seq: Option<i64>,
    /// When the last report was due; what happened since.
    reported: Option<Instant>,
    unreported_refused: u64,
    unreported_missed: u64,
    /// The last sample seen, to forget the writer quiet for longest.
    active: Instant,
}

impl Entry {
    fn new(now: Instant) -> Entry {
        Entry {
            busy: 0,
            refused: 0,
            missed: 0,
            last_reason: String::new(),
            last_seq: None,
            reported: None,
            unreported_refused: 0,
            unreported_missed: 0,
            active: now,
        }
    }

    /// Whether a report is due now; if not, the drop is left for the next one.
    fn due(&mut self, now: Instant) -> bool {
        match self.reported {
            Some(at) if now.duration_since(at) < REPORT_PERIOD => false,
            _ => {
                self.reported = Some(now);
                true
            }
        }
    }

    /// `; N more refused and M missed since the last report`, or the first report's
    /// promise; taken from the unreported counts.
    fn since(&mut self, first: bool) -> String {
        let (r, m) = (self.unreported_refused, self.unreported_missed);
        self.unreported_refused = 0;
        self.unreported_missed = 0;
        let mut s = String::new();
        if first {
            s.push_str("; further drops of this writer are reported at most once a second");
        } else if r > 0 || m > 0 {
            let mut parts = Vec::new();
            if r > 0 {
                parts.push(format!("{r} more refused"));
            }
            if m > 0 {
                parts.push(format!("{m} more missed"));
            }
            let _ = write!(s, "; {} since the last report", parts.join(" and "));
        }
        s
    }
}

/// `writer`'s record, made if new (forgetting the writer quiet for longest if there are
/// [`MAX_WRITERS_PER_ROUTE`] already).
fn entry(
    writers: &mut HashMap<Option<Gid>, Entry>,
    writer: Option<Gid>,
    now: Instant,
) -> &mut Entry {
    if !writers.contains_key(&writer) && writers.len() >= MAX_WRITERS_PER_ROUTE {
        let quiet = writers
            .iter()
            .min_by_key(|(_, e)| e.active)
            .map(|(k, _)| *k);
        if let Some(k) = quiet {
            writers.remove(&k);
        }
    }
    let e = writers.entry(writer).or_insert_with(|| Entry::new(now));
    e.active = now;
    e
}

/// The drops of one command topic, by writer.
#[derive(Debug)]
pub struct RouteDrops {
    topic: String,
    writers: HashMap<Option<Gid>, Entry>,
}

impl RouteDrops {
    /// Nothing dropped yet on `topic`.
    pub fn new(topic: &str) -> RouteDrops {
        RouteDrops {
            topic: topic.to_string(),
            writers: HashMap::new(),
        }
    }

    /// A sample of `writer` with sequence number `seq` arrived at `now`: how many of the
    /// writer's samples before it the bridge never saw, and the report to log if one
    /// is due.
    pub fn seen(&mut self, writer: Gid, seq: i64, now: Instant) -> (u64, Option<String>) {
        let e = entry(&mut self.writers, Some(writer), now);
        let missed = match e.last_seq {
            Some(last) if seq > last => (seq - last - 1) as u64,
            _ => 0,
        };
        e.last_seq = Some(e.last_seq.map_or(seq, |l| l.max(seq)));
        if missed == 0 {
            return (0, None);
        }
        e.missed += missed;
        let first = e.reported.is_none();
        if !e.due(now) {
            e.unreported_missed += missed;
            return (missed, None);
        }
        let since = e.since(first);
        (
            missed,
            Some(format!(
                "{}: {missed} sample(s) of writer {} never reached the bridge \
                 (skipped sequence numbers: lost on the way, or overwritten in the reader's \
                 history while the bridge was behind){since}",
                self.topic,
                gid_text(Some(writer))
            )),
        )
    }

    /// A sample of `writer` was not sent: counted, and the report to log if one is due.
    pub fn dropped(&mut self, writer: Option<Gid>, why: Dropped, now: Instant) -> Option<String> {
        let e = entry(&mut self.writers, writer, now);
        let reason = match why {
            Dropped::Busy(r) => {
                e.busy += 1;
                r
            }
            Dropped::Refused(r) => {
                e.refused += 1;
                r
            }
        };
        if e.last_reason != reason {
            e.last_reason = reason.to_string();
        }
        let first = e.reported.is_none();
        if !e.due(now) {
            e.unreported_refused += 1;
            return None;
        }
        let since = e.since(first);
        Some(format!(
            "{}: refused: {reason} (writer {}{since})",
            self.topic,
            gid_text(writer)
        ))
    }

    /// The writers with drops, GUID order.
    pub fn writers(&self) -> Vec<WriterDrops> {
        let mut v: Vec<WriterDrops> = self
            .writers
            .iter()
            .filter(|(_, e)| e.busy + e.refused + e.missed > 0)
            .map(|(w, e)| WriterDrops {
                topic: self.topic.clone(),
                writer: *w,
                busy: e.busy,
                refused: e.refused,
                missed: e.missed,
                last_reason: e.last_reason.clone(),
            })
            .collect();
        v.sort_by_key(|d| d.writer);
        v
    }
}

/// The pace of a report that is not per writer (malformed service requests, a route's
/// refusals): the first occurrence is said at once, then at most one a
/// [`REPORT_PERIOD`], with the count of those held back since.
#[derive(Debug, Default)]
pub struct Pace {
    /// When the last report was said.
    said: Option<Instant>,
    /// Occurrences since, not said.
    held: u64,
}

impl Pace {
    /// One more occurrence at `now`: `Some(suffix)` when it is to be said, the suffix
    /// saying what the reader should know of the others (` (further ones reported at
    /// most once a second)` the first time, then ` (N more since the last report)`);
    /// `None` when it is only counted.
    pub fn due(&mut self, now: Instant) -> Option<String> {
        match self.said {
            Some(at) if now.duration_since(at) < REPORT_PERIOD => {
                self.held += 1;
                None
            }
            before => {
                self.said = Some(now);
                let n = std::mem::take(&mut self.held);
                Some(if before.is_none() {
                    " (further ones reported at most once a second)".to_string()
                } else if n > 0 {
                    format!(" ({n} more since the last report)")
                } else {
                    String::new()
                })
            }
        }
    }
}

/// A GUID as ROS 2 prints one (`ros2 topic info -v`): its 16 bytes in hex, dotted;
/// `unknown` when the DDS did not name the writer.
pub fn gid_text(g: Option<Gid>) -> String {
    match g {
        None => "unknown".into(),
        Some(g) => {
            let mut s = String::with_capacity(47);
            for (i, b) in g.iter().enumerate() {
                if i > 0 {
                    s.push('.');
                }
                let _ = write!(s, "{b:02x}");
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Gid = [1; 16];
    const B: Gid = [2; 16];
    const BUSY: Dropped = Dropped::Busy("the bus is busy");

    #[test]
    fn a_flood_is_one_report_a_second_per_writer_with_the_count() {
        let mut d = RouteDrops::new("/m/target");
        let t0 = Instant::now();
        let first = d.dropped(Some(A), BUSY, t0).unwrap();
        assert_eq!(
            first,
            "/m/target: refused: the bus is busy (writer 01.01.01.01.01.01.01.01.01.01.01.01.01.01.01.01; \
             further drops of this writer are reported at most once a second)"
        );
        // Another writer is reported on its own.
        assert!(d.dropped(Some(B), BUSY, t0).is_some());
        for i in 1..1000u32 {
            let at = t0 + Duration::from_micros(u64::from(i) * 500);
            assert_eq!(d.dropped(Some(A), BUSY, at), None, "{i}");
        }
        let next = d
            .dropped(
                Some(A),
                Dropped::Refused("not a Target"),
                t0 + REPORT_PERIOD,
            )
            .unwrap();
        assert!(
            next.ends_with("; 999 more refused since the last report)"),
            "{next}"
        );
        assert!(next.starts_with("/m/target: refused: not a Target (writer 01.01."));
        let w = d.writers();
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].writer, w[0].busy, w[0].refused), (Some(A), 1000, 1));
        assert_eq!(w[0].last_reason, "not a Target");
        assert_eq!((w[1].writer, w[1].busy), (Some(B), 1));
    }

    #[test]
    fn gaps_in_a_writers_sequence_numbers_are_missed_samples() {
        let mut d = RouteDrops::new("/m/target");
        let t0 = Instant::now();
        assert_eq!(d.seen(A, 5, t0), (0, None));
        assert_eq!(d.seen(A, 6, t0), (0, None));
        let (n, report) = d.seen(A, 10, t0);
        assert_eq!(n, 3);
        assert!(report.unwrap().contains("3 sample(s) of writer 01.01"));
        // Out of order or repeated: nothing missed, nothing counted twice.
        assert_eq!(d.seen(A, 8, t0), (0, None));
        assert_eq!(d.seen(A, 12, t0), (1, None));
        assert_eq!(d.seen(B, 100, t0), (0, None));
        let w = d.writers();
        assert_eq!(w.len(), 1, "B dropped nothing");
        assert_eq!(w[0].missed, 4);
        let later = d.dropped(Some(A), BUSY, t0 + REPORT_PERIOD).unwrap();
        assert!(
            later.ends_with("; 1 more missed since the last report)"),
            "{later}"
        );
    }

    #[test]
    fn writers_are_bounded_per_route() {
        let mut d = RouteDrops::new("/m/target");
        let t0 = Instant::now();
        for i in 0..(MAX_WRITERS_PER_ROUTE as u32 + 10) {
            let mut g = [0u8; 16];
            g[..4].copy_from_slice(&i.to_be_bytes());
            d.dropped(Some(g), BUSY, t0 + Duration::from_millis(u64::from(i)));
        }
        let w = d.writers();
        assert_eq!(w.len(), MAX_WRITERS_PER_ROUTE);
        // The ten quiet for longest went.
        assert_eq!(w[0].writer.unwrap()[3], 10);
        assert_eq!(
            d.dropped(None, BUSY, t0)
                .map(|s| s.contains("writer unknown")),
            Some(true)
        );
    }

    #[test]
    fn a_pace_says_the_first_then_once_a_second_with_the_count() {
        let t0 = Instant::now();
        let mut p = Pace::default();
        let first = p.due(t0).unwrap();
        assert!(first.contains("at most once a second"), "{first}");
        for ms in 1..=999 {
            assert_eq!(p.due(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(
            p.due(t0 + Duration::from_millis(1000)).as_deref(),
            Some(" (999 more since the last report)")
        );
        assert_eq!(p.due(t0 + Duration::from_millis(3000)).as_deref(), Some(""));
    }
}
