//! `fcan decode`: a `candump -L` capture decoded offline, by
//! [`fcan_master::observer::Observer`], into JSON lines or an MCAP file.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

use fcan_master::cache::BlobStore;
use fcan_master::observer::{Observation, Observer, ObserverStats};
use fcan_master::transport::candump::{CandumpReader, LogEntry};

use crate::args::DecodeArgs;
use crate::mcap_file::Recording;
use crate::views::SampleView;
use crate::CliError;

/// How often progress is printed on a long capture.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Decodes the capture `args` names, blobs the capture lacks from `store`; JSON lines to
/// `out`, progress and the summary to `notes`.
pub fn decode(
    args: &DecodeArgs,
    devices: &[fcan_drivers::spec::DeviceSpec],
    store: Option<Box<dyn BlobStore>>,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<(), CliError> {
    let stdin = args.capture.as_os_str() == "-";
    let (input, total): (Box<dyn BufRead>, Option<u64>) = if stdin {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let f = File::open(&args.capture)
            .map_err(|e| CliError::Io(format!("cannot open {}: {e}", args.capture.display())))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(BufReader::new(f)), len)
    };
    let mut mcap = match &args.mcap {
        Some(path) => {
            let f = File::create(path)
                .map_err(|e| CliError::Io(format!("cannot create {}: {e}", path.display())))?;
            let source = format!("capture {}", args.capture.display());
            Some(Recording::create(BufWriter::new(f), &source).map_err(mcap_err)?)
        }
        None => None,
    };
    // One write per line would be one system call per value: buffer.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    let mut devices = device_decoder(devices)?;
    if devices.is_some() && args.mcap.is_some() {
        return Err(CliError::Usage(
            "--device with --mcap is not supported yet: decode devices to JSON lines".into(),
        ));
    }
    let mut device_samples = 0u64;
    let mut observer = Observer::new(store);
    let mut seen = Vec::new();
    let bytes_read = Rc::new(Cell::new(0u64));
    let mut bad_lines = 0u64;
    let mut other_entries = 0u64;
    let mut last_progress = Instant::now();
    for record in CandumpReader::new(CountingRead::new(input, bytes_read.clone())) {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                // A damaged line does not end the decoding: the rest may be fine.
                if bad_lines == 0 {
                    writeln!(notes, "fcan decode: skipping unreadable lines ({e})")?;
                }
                bad_lines += 1;
                continue;
            }
        };
        let LogEntry::Frame(frame) = record.entry else {
            other_entries += 1; // remote and error frames carry no fcan data
            continue;
        };
        let at_us = record.timestamp.as_micros() as u64;
        let at_ns = record.timestamp.as_nanos() as u64;
        if let Some(samples) = devices.as_mut().and_then(|d| d.push(at_us, &frame)) {
            // A device's frame: its driver's values, never the fcan observer's guess.
            for s in samples {
                let Ok(value) = fcan_master::value::unpack_message(&s.fields, &s.bytes) else {
                    continue;
                };
                device_samples += 1;
                if args.topic.is_empty() || args.topic.contains(&s.topic) {
                    let line = SampleView {
                        topic: s.topic,
                        t: record.timestamp.as_secs_f64(),
                        value,
                    };
                    serde_json::to_writer(&mut out, &line)?;
                    out.write_all(b"\n")?;
                }
            }
            continue;
        }
        observer.push(&frame, at_us, &mut |o| seen.push(o));
        if let Some(rec) = &mut mcap {
            rec.frame(&frame, at_ns).map_err(mcap_err)?;
        }
        for o in seen.drain(..) {
            match o {
                Observation::Schema { node, schema, .. } => {
                    if let Some(rec) = &mut mcap {
                        rec.blob(schema.digest, &schema.blob, at_ns)
                            .map_err(mcap_err)?;
                        for t in observer.registry().topics.iter().filter(|t| t.node == node) {
                            rec.add_topic(t).map_err(mcap_err)?;
                        }
                    }
                }
                Observation::Sample(s) => {
                    if let Some(rec) = &mut mcap {
                        rec.sample(&s.topic, &s.value, at_ns).map_err(mcap_err)?;
                    } else if args.topic.is_empty() || args.topic.iter().any(|t| **t == *s.topic) {
                        let line = SampleView {
                            topic: s.topic.to_string(),
                            t: record.timestamp.as_secs_f64(),
                            value: s.value,
                        };
                        serde_json::to_writer(&mut out, &line)?;
                        out.write_all(b"\n")?;
                    }
                }
                _ => {}
            }
        }
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            let st = observer.stats();
            let pct = total
                .filter(|t| *t > 0)
                .map(|t| format!("{:.0}%, ", 100.0 * bytes_read.get() as f64 / t as f64))
                .unwrap_or_default();
            writeln!(
                notes,
                "fcan decode: {pct}{} frames, {} values",
                st.frames, st.samples
            )?;
        }
    }
    out.flush()?;
    if let Some(mut rec) = mcap {
        for n in observer.nodes() {
            let mut info = BTreeMap::new();
            info.insert("id".to_string(), n.node.get().to_string());
            if let Some(name) = &n.name {
                info.insert("name".into(), name.clone());
            }
            if let Some(b) = n.boot_id {
                info.insert("boot_id".into(), b.to_string());
            }
            if let Some(s) = &n.schema {
                info.insert("schema".into(), s.digest.to_string());
            }
            info.insert("plan_complete".into(), n.plan_complete.to_string());
            rec.node(n.node.get(), info, Some(&n.plan))
                .map_err(mcap_err)?;
        }
        let messages = rec.messages();
        rec.finish().map_err(mcap_err)?;
        if let Some(p) = &args.mcap {
            writeln!(
                notes,
                "fcan decode: wrote {messages} messages to {}",
                p.display()
            )?;
        }
    }
    let st = observer.stats();
    summary(&st, bad_lines, other_entries, notes)?;
    if devices.is_some() {
        writeln!(
            notes,
            "fcan decode: {device_samples} values from devices' frames"
        )?;
    }
    if st.samples == 0 && st.data_frames > 0 && device_samples == 0 {
        return Err(CliError::Usage(
            "no value could be decoded from this capture (see above)".into(),
        ));
    }
    Ok(())
}

/// The drivers of `--device` and `--bus-file`, or `None` without either.
fn device_decoder(
    specs: &[fcan_drivers::spec::DeviceSpec],
) -> Result<Option<fcan_drivers::decode::Decoder>, CliError> {
    if specs.is_empty() {
        return Ok(None);
    }
    let devices = fcan_drivers::spec::devices(specs).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(Some(fcan_drivers::decode::Decoder::new(devices)))
}

fn mcap_err(e: crate::mcap_file::Error) -> CliError {
    CliError::Io(format!("writing MCAP: {e}"))
}

/// The closing report: what was decoded and, for what was not, why.
fn summary(
    st: &ObserverStats,
    bad_lines: u64,
    other_entries: u64,
    notes: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        notes,
        "fcan decode: {} frames ({} data), {} values decoded; schemas: {} from the capture, {} from the cache",
        st.frames, st.data_frames, st.samples, st.schemas_from_capture, st.schemas_from_store
    )?;
    if st.undecoded_no_plan > 0 {
        writeln!(
            notes,
            "fcan decode: {} data frames not decoded: no FRAME_DEFINE for their identifier in the capture (it began after the nodes were provisioned, or they are not fcan frames)",
            st.undecoded_no_plan
        )?;
    }
    if st.undecoded_no_schema > 0 {
        writeln!(
            notes,
            "fcan decode: {} data frames not decoded: their node's schema blob is neither in the capture nor in the cache (--cache-dir)",
            st.undecoded_no_schema
        )?;
    }
    for (n, what) in [
        (st.malformed, "malformed frames or messages"),
        (
            st.broken_transfers,
            "broken multi-frame transfers or groups",
        ),
        (st.schemas_invalid, "schema blobs that did not verify"),
        (bad_lines, "unreadable lines"),
        (other_entries, "remote or error frames (skipped)"),
    ] {
        if n > 0 {
            writeln!(notes, "fcan decode: {n} {what}")?;
        }
    }
    Ok(())
}

/// A reader that counts the bytes read, for progress.
struct CountingRead<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R> CountingRead<R> {
    fn new(inner: R, count: Rc<Cell<u64>>) -> Self {
        CountingRead { inner, count }
    }
}

impl<R: std::io::Read> std::io::Read for CountingRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for CountingRead<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.count.set(self.count.get() + amt as u64);
        self.inner.consume(amt);
    }
}
