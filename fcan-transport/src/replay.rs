//! A transport that plays back a candump log.
//!
//! `recv` yields the log's frames in order; error frames in the log come back as the bus
//! events they stand for ([`classify`]); remote frames are
//! skipped; at the end of the log `recv` fails with [`TransportError::Closed`]. Frames the
//! engine sends are kept (see [`ReplayTransport::sent`]) and go nowhere.
//!
//! With [`Pacing::Timestamps`], each frame is delivered when as much time (on tokio's
//! clock, scaled by `speed`) has passed since the first `recv` as passed in the log since
//! its first record; otherwise frames come as fast as they are asked for, each stamped
//! with the log's relative time.

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

use fcan_core::frame::{Frame, Mtu};
use tokio::time::Instant;

use super::candump::{CandumpReader, LogEntry, LogRecord};
use super::error_frame::classify;
use super::{Received, Transport, TransportError};

/// How a replay is timed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum Pacing {
    /// Every frame as soon as it is asked for.
    #[default]
    AsFastAsPossible,
    /// Frames spaced as in the log; `speed` 2.0 plays twice as fast.
    Timestamps {
        /// Playback speed factor (> 0).
        speed: f64,
    },
}

/// Options of a replay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayOptions {
    /// Timing.
    pub pacing: Pacing,
    /// Only records of this interface; `None`: all.
    pub iface: Option<String>,
    /// The MTU to report; `None`: FD if the log holds an FD frame, else Classic.
    pub mtu: Option<Mtu>,
}

/// Plays a candump log. See the [module docs](self).
#[derive(Debug)]
pub struct ReplayTransport {
    name: String,
    mtu: Mtu,
    pacing: Pacing,
    records: VecDeque<LogRecord>,
    first: Option<Duration>,
    start: Option<Instant>,
    sent: Vec<Frame>,
}

impl ReplayTransport {
    /// A replay of already parsed records.
    pub fn from_records(name: &str, records: Vec<LogRecord>, options: ReplayOptions) -> Self {
        let records: VecDeque<LogRecord> = records
            .into_iter()
            .filter(|r| options.iface.as_ref().is_none_or(|i| *i == r.iface))
            .collect();
        let has_fd = records
            .iter()
            .any(|r| matches!(r.entry, LogEntry::Frame(f) if f.is_fd()));
        ReplayTransport {
            name: name.to_string(),
            mtu: options
                .mtu
                .unwrap_or(if has_fd { Mtu::Fd } else { Mtu::Classic }),
            pacing: options.pacing,
            first: records.front().map(|r| r.timestamp),
            records,
            start: None,
            sent: Vec::new(),
        }
    }

    /// Parses a whole log from `input`; a malformed line fails the open with
    /// an [`Io`](TransportError::Io) error of kind `InvalidData` naming the line.
    pub fn from_reader<R: BufRead>(
        name: &str,
        input: R,
        options: ReplayOptions,
    ) -> Result<Self, TransportError> {
        let records = CandumpReader::new(input)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                TransportError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{name}: {e}"),
                ))
            })?;
        Ok(Self::from_records(name, records, options))
    }

    /// Opens and parses the log file at `path`.
    pub fn open(path: impl AsRef<Path>, options: ReplayOptions) -> Result<Self, TransportError> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| {
            TransportError::Io(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", path.display()),
            ))
        })?;
        Self::from_reader(
            &path.display().to_string(),
            std::io::BufReader::new(file),
            options,
        )
    }

    /// The frames sent to this transport so far.
    pub fn sent(&self) -> &[Frame] {
        &self.sent
    }

    /// Records not yet played.
    pub fn remaining(&self) -> usize {
        self.records.len()
    }

    /// When the record at `ts` is due.
    fn due(&self, start: Instant, ts: Duration) -> Instant {
        let rel = ts.saturating_sub(self.first.unwrap_or_default());
        match self.pacing {
            Pacing::Timestamps { speed } if speed > 0.0 && speed.is_finite() => {
                start + rel.div_f64(speed)
            }
            _ => start + rel,
        }
    }
}

impl Transport for ReplayTransport {
    fn name(&self) -> &str {
        &self.name
    }

    fn mtu(&self) -> Mtu {
        self.mtu
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        super::check_id(frame)?;
        super::check_mtu(&self.name, self.mtu, frame)?;
        self.sent.push(*frame);
        Ok(())
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        let start = *self.start.get_or_insert_with(Instant::now);
        loop {
            let Some(next) = self.records.front() else {
                return Err(TransportError::Closed);
            };
            let due = self.due(start, next.timestamp);
            if matches!(self.pacing, Pacing::Timestamps { .. }) {
                // Sleep before taking the record, so a cancelled recv loses nothing.
                tokio::time::sleep_until(due).await;
            }
            let record = self.records.pop_front().expect("peeked");
            match record.entry {
                LogEntry::Frame(frame) => {
                    return Ok(Received {
                        frame,
                        at: due.into_std(),
                    })
                }
                LogEntry::ErrorFrame { class, data } => {
                    if let Some(e) = classify(class, &data) {
                        return Err(e);
                    }
                }
                LogEntry::Remote { .. } => {}
            }
        }
    }
}
