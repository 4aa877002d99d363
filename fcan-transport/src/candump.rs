//! The `candump -L` log format: one frame per line.
//!
//! ```text
//! (1700000000.123456) vcan0 123#DEADBEEF        classical, standard ID (3 hex digits)
//! (1700000000.123789) vcan0 12345678#11         classical, extended ID (8 hex digits)
//! (1700000000.124000) vcan0 123##5DEADBEEF      CAN FD: `##`, a flags nibble, the data
//! (1700000000.124100) vcan0 123#R               remote frame
//! (1700000000.124200) can0 20000040#0000000000000000   error frame (CAN_ERR_FLAG set)
//! ```
//!
//! The FD flags nibble holds `CANFD_BRS` (1), `CANFD_ESI` (2) and `CANFD_FDF` (4). Linux
//! (since 5.14 or so) sets FDF on every FD frame it delivers and candump prints the nibble
//! as is: a real `candump -L` on a 6.1 kernel writes `123##5…` for an FD frame with BRS and
//! `123##4…` without. [`CandumpWriter`] writes the same by default
//! ([`CandumpWriter::fdf_flag`] turns the FDF bit off for the older `##1` / `##0` style);
//! the reader accepts both and ignores ESI.
//!
//! The reader ([`CandumpReader`], [`parse_line`]) never panics: a malformed line is a
//! [`ParseError`] naming the line number and what is wrong. It also accepts `.` between data
//! bytes and the `_D` length-code suffix of classical 8-byte frames (both as `cansend`
//! does), and ignores a trailing `R`/`T` direction token. Blank lines are skipped.

use std::io::{self, BufRead, Write};
use std::time::Duration;

use fcan_core::frame::{fd_dlc, CanId, Frame, CLASSIC_MAX_LEN, FD_MAX_LEN};

use super::error_frame::{to_error_frame, CAN_ERR_FLAG};
use super::TransportError;

const CANFD_BRS: u8 = 0x1;
const CANFD_FDF: u8 = 0x4;

/// What one log line carries. Non-exhaustive: the candump format has grown before
/// (CAN FD) and may again (CAN XL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogEntry {
    /// A data frame, classical or FD.
    Frame(Frame),
    /// A remote (RTR) frame; fcan never sends these, a log of a shared bus may hold them.
    Remote {
        /// Its identifier.
        id: CanId,
        /// Its requested length (0..=8).
        len: u8,
    },
    /// A Linux error frame: the error class bits (identifier without `CAN_ERR_FLAG`) and
    /// its data; [`classify`](super::error_frame::classify) turns it into a
    /// [`TransportError`].
    ErrorFrame {
        /// Error class bits.
        class: u32,
        /// Error details.
        data: [u8; 8],
    },
}

/// One log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// Time since the Unix epoch (microsecond resolution in the log).
    pub timestamp: Duration,
    /// Interface name.
    pub iface: String,
    /// What the line carries.
    pub entry: LogEntry,
}

/// A malformed line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The frame column of a log line, e.g. `123#DEADBEEF` or `12345678##5AA`.
///
/// ```
/// use fcan_core::frame::{CanId, Frame};
/// use fcan_transport::candump::format_frame;
/// let f = Frame::classic(CanId::Extended(0x1234_5678), &[0xDE, 0xAD]).unwrap();
/// assert_eq!(format_frame(&f, true), "12345678#DEAD");
/// let f = Frame::fd(CanId::Standard(0x123), &[0xBE, 0xEF]).unwrap();
/// assert_eq!(format_frame(&f, true), "123##5BEEF");
/// assert_eq!(format_frame(&f, false), "123##1BEEF");
/// ```
pub fn format_frame(frame: &Frame, fdf_flag: bool) -> String {
    let mut s = format_id(frame.id());
    if frame.is_fd() {
        let mut flags = if frame.is_brs() { CANFD_BRS } else { 0 };
        if fdf_flag {
            flags |= CANFD_FDF;
        }
        s.push_str(&format!("##{flags:X}"));
    } else {
        s.push('#');
    }
    push_hex(&mut s, frame.data());
    s
}

fn format_id(id: CanId) -> String {
    match id {
        CanId::Standard(id) => format!("{id:03X}"),
        CanId::Extended(id) => format!("{id:08X}"),
    }
}

fn push_hex(s: &mut String, data: &[u8]) {
    for b in data {
        s.push_str(&format!("{b:02X}"));
    }
}

/// A whole log line without the newline.
///
/// ```
/// use std::time::Duration;
/// use fcan_core::frame::{CanId, Frame};
/// use fcan_transport::candump::{format_line, LogEntry};
/// let f = Frame::classic(CanId::Standard(0x123), &[0xDE, 0xAD, 0xBE, 0xEF]).unwrap();
/// let t = Duration::new(1_700_000_000, 123_456_789);
/// assert_eq!(format_line(t, "vcan0", &LogEntry::Frame(f), true),
///            "(1700000000.123456) vcan0 123#DEADBEEF");
/// ```
pub fn format_line(timestamp: Duration, iface: &str, entry: &LogEntry, fdf_flag: bool) -> String {
    let body = match entry {
        LogEntry::Frame(f) => format_frame(f, fdf_flag),
        LogEntry::Remote { id, len } => {
            let mut s = format_id(*id);
            s.push_str("#R");
            if *len > 0 {
                s.push_str(&len.to_string());
            }
            s
        }
        LogEntry::ErrorFrame { class, data } => {
            let mut s = format!(
                "{:08X}#",
                (class & super::error_frame::CAN_ERR_MASK) | CAN_ERR_FLAG
            );
            push_hex(&mut s, data);
            s
        }
    };
    format!(
        "({:010}.{:06}) {iface} {body}",
        timestamp.as_secs(),
        timestamp.subsec_micros()
    )
}

/// Writes a candump log.
#[derive(Debug)]
pub struct CandumpWriter<W> {
    out: W,
    fdf_flag: bool,
}

impl<W: Write> CandumpWriter<W> {
    /// A writer in today's candump style (FD flags include FDF: `##5` for BRS).
    pub fn new(out: W) -> Self {
        CandumpWriter {
            out,
            fdf_flag: true,
        }
    }

    /// Whether FD frames carry the FDF bit (4) in their flags nibble (default `true`, as
    /// candump prints on current kernels; `false` gives the older `##1` style).
    pub fn fdf_flag(mut self, on: bool) -> Self {
        self.fdf_flag = on;
        self
    }

    /// Logs one frame received or sent at `timestamp` (since the Unix epoch) on `iface`.
    pub fn write_frame(
        &mut self,
        timestamp: Duration,
        iface: &str,
        frame: &Frame,
    ) -> io::Result<()> {
        self.write_entry(timestamp, iface, &LogEntry::Frame(*frame))
    }

    /// Logs a bus event as the error frame SocketCAN would have delivered; errors that are
    /// no bus event are not logged.
    pub fn write_error(
        &mut self,
        timestamp: Duration,
        iface: &str,
        error: &TransportError,
    ) -> io::Result<()> {
        match to_error_frame(error) {
            Some((class, data)) => {
                self.write_entry(timestamp, iface, &LogEntry::ErrorFrame { class, data })
            }
            None => Ok(()),
        }
    }

    /// Logs any entry.
    pub fn write_entry(
        &mut self,
        timestamp: Duration,
        iface: &str,
        entry: &LogEntry,
    ) -> io::Result<()> {
        let line = format_line(timestamp, iface, entry, self.fdf_flag);
        writeln!(self.out, "{line}")
    }

    /// Logs a parsed record again.
    pub fn write_record(&mut self, record: &LogRecord) -> io::Result<()> {
        self.write_entry(record.timestamp, &record.iface, &record.entry)
    }

    /// Flushes the output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The output back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Reads a candump log line by line; an iterator of records or [`ParseError`]s.
#[derive(Debug)]
pub struct CandumpReader<R> {
    input: R,
    line: usize,
    buf: String,
}

impl<R: BufRead> CandumpReader<R> {
    /// A reader over `input`.
    pub fn new(input: R) -> Self {
        CandumpReader {
            input,
            line: 0,
            buf: String::new(),
        }
    }
}

impl<R: BufRead> Iterator for CandumpReader<R> {
    type Item = Result<LogRecord, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buf.clear();
            self.line += 1;
            match self.input.read_line(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    return Some(Err(ParseError {
                        line: self.line,
                        message: format!("cannot read: {e}"),
                    }))
                }
            }
            match parse_line(&self.buf) {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => continue,
                Err(message) => {
                    return Some(Err(ParseError {
                        line: self.line,
                        message,
                    }))
                }
            }
        }
    }
}

/// Parses a whole log; the first malformed line is the error.
///
/// ```
/// use fcan_transport::candump::parse_log;
/// let log = "(1.000001) vcan0 123#01\n\n(1.000002) vcan0 123#XYZ\n";
/// let err = parse_log(log).unwrap_err();
/// assert_eq!(err.line, 3);
/// assert!(err.to_string().starts_with("line 3: "));
/// ```
pub fn parse_log(text: &str) -> Result<Vec<LogRecord>, ParseError> {
    CandumpReader::new(text.as_bytes()).collect()
}

/// Parses one line; `Ok(None)` for a blank line.
pub fn parse_line(line: &str) -> Result<Option<LogRecord>, String> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(None);
    }
    let mut tokens = line.split_whitespace();
    let ts = tokens.next().unwrap_or_default();
    let timestamp = parse_timestamp(ts)?;
    let iface = tokens
        .next()
        .ok_or_else(|| "missing interface name after the timestamp".to_string())?;
    let frame = tokens
        .next()
        .ok_or_else(|| format!("missing frame after interface `{iface}`"))?;
    match tokens.next() {
        None | Some("R") | Some("T") => {}
        Some(extra) => return Err(format!("unexpected text `{extra}` after the frame")),
    }
    if tokens.next().is_some() {
        return Err("unexpected text after the frame".into());
    }
    let entry = parse_frame(frame)?;
    Ok(Some(LogRecord {
        timestamp,
        iface: iface.to_string(),
        entry,
    }))
}

fn parse_timestamp(s: &str) -> Result<Duration, String> {
    let bad = || format!("timestamp `{s}` should look like (1700000000.123456)");
    let inner = s
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(bad)?;
    let (secs, frac) = inner.split_once('.').ok_or_else(bad)?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(secs) || !digits(frac) || frac.len() > 9 || secs.len() > 19 {
        return Err(bad());
    }
    let secs: u64 = secs.parse().map_err(|_| bad())?;
    let nanos: u32 = format!("{frac:0<9}").parse().map_err(|_| bad())?;
    Ok(Duration::new(secs, nanos))
}

/// Parses the frame column (`123#DEADBEEF`, `123##5DEADBEEF`, `123#R`, error frames).
pub fn parse_frame(s: &str) -> Result<LogEntry, String> {
    let (id_str, rest) = s
        .split_once('#')
        .ok_or_else(|| format!("frame `{s}` has no `#` between identifier and data"))?;
    if id_str.is_empty() || !id_str.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("identifier `{id_str}` is not hexadecimal"));
    }
    let raw =
        u32::from_str_radix(id_str, 16).map_err(|_| format!("identifier `{id_str}` too long"))?;
    let id = match id_str.len() {
        3 => CanId::standard(raw as u16)
            .ok_or_else(|| format!("standard identifier {id_str} is above 7FF"))?,
        8 if raw & CAN_ERR_FLAG != 0 => {
            let data = parse_hex(rest, 8, "error frame")?;
            let mut d = [0u8; 8];
            d[..data.len()].copy_from_slice(&data);
            return Ok(LogEntry::ErrorFrame {
                class: raw & !CAN_ERR_FLAG,
                data: d,
            });
        }
        8 => CanId::extended(raw)
            .ok_or_else(|| format!("extended identifier {id_str} is above 1FFFFFFF"))?,
        n => {
            return Err(format!(
                "identifier `{id_str}` has {n} hex digits; expected 3 (standard) or 8 (extended)"
            ))
        }
    };
    if let Some(fd) = rest.strip_prefix('#') {
        let mut chars = fd.chars();
        let flags = chars
            .next()
            .and_then(|c| c.to_digit(16))
            .ok_or_else(|| format!("CAN FD frame `{s}` needs a flags digit after `##`"))?
            as u8;
        let data = parse_hex(chars.as_str(), FD_MAX_LEN, "CAN FD frame")?;
        if fd_dlc(data.len()).is_none() {
            return Err(format!(
                "CAN FD payload of {} bytes is not a valid FD length (0-8, 12, 16, 20, 24, 32, 48, 64)",
                data.len()
            ));
        }
        let f = Frame::fd(id, &data).map_err(|e| e.to_string())?;
        return Ok(LogEntry::Frame(if flags & CANFD_BRS != 0 {
            f
        } else {
            f.without_brs()
        }));
    }
    if let Some(r) = rest.strip_prefix(['R', 'r']) {
        let len = match r {
            "" => 0,
            d if d.len() == 1 && d.as_bytes()[0].is_ascii_digit() && d != "9" => {
                d.parse().unwrap_or(0)
            }
            _ => return Err(format!("remote frame length `{r}` should be one digit 0-8")),
        };
        return Ok(LogEntry::Remote { id, len });
    }
    let (data_str, dlc) = match rest.split_once('_') {
        Some((d, dlc)) => (d, Some(dlc)),
        None => (rest, None),
    };
    let data = parse_hex(data_str, CLASSIC_MAX_LEN, "classical frame")?;
    if let Some(dlc) = dlc {
        let ok = dlc.len() == 1
            && u8::from_str_radix(dlc, 16).is_ok_and(|d| d > 8)
            && data.len() == CLASSIC_MAX_LEN;
        if !ok {
            return Err(format!(
                "length code `_{dlc}` is only allowed after 8 data bytes and must be 9-F"
            ));
        }
    }
    Ok(LogEntry::Frame(
        Frame::classic(id, &data).map_err(|e| e.to_string())?,
    ))
}

fn parse_hex(s: &str, max: usize, what: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut pending: Option<u8> = None;
    for c in s.chars() {
        if c == '.' && pending.is_none() {
            continue;
        }
        let v = c
            .to_digit(16)
            .ok_or_else(|| format!("`{c}` in data `{s}` is not a hex digit"))?
            as u8;
        match pending.take() {
            None => pending = Some(v),
            Some(hi) => out.push(hi << 4 | v),
        }
    }
    if pending.is_some() {
        return Err(format!("data `{s}` has an odd number of hex digits"));
    }
    if out.len() > max {
        return Err(format!(
            "{what} carries at most {max} bytes, not {}",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(s: &str) -> Frame {
        match parse_frame(s).unwrap() {
            LogEntry::Frame(f) => f,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn candump_lines_as_a_real_candump_prints_them() {
        // Lines as candump -L (can-utils 2020.11, kernel 6.1) printed them in the VM.
        let log = "(1795978871.226008) vcan0 123#DEADBEEF\n\
                   (1795978871.264633) vcan0 12345678#11\n\
                   (1795978871.295367) vcan0 123##5DEADBEEF\n\
                   (1795978871.331116) vcan0 123##4DEADBEEF00112233\n\
                   (1795978871.367732) vcan0 7FF##7\n\
                   (1795978871.396548) vcan0 123#R\n\
                   (1795978871.423387) vcan0 123#\n\
                   (1795978871.443607) vcan0 00000001#\n";
        let recs = parse_log(log).unwrap();
        assert_eq!(recs.len(), 8);
        assert_eq!(recs[0].timestamp, Duration::new(1_795_978_871, 226_008_000));
        assert_eq!(recs[0].iface, "vcan0");
        let f = |i: usize| match recs[i].entry {
            LogEntry::Frame(f) => f,
            _ => panic!(),
        };
        assert_eq!(
            f(0),
            Frame::classic(CanId::Standard(0x123), &[0xDE, 0xAD, 0xBE, 0xEF]).unwrap()
        );
        assert_eq!(
            f(1),
            Frame::classic(CanId::Extended(0x1234_5678), &[0x11]).unwrap()
        );
        assert!(f(2).is_fd() && f(2).is_brs());
        assert!(f(3).is_fd() && !f(3).is_brs() && f(3).len() == 8);
        assert!(f(4).is_fd() && f(4).is_brs() && f(4).len() == 0);
        assert_eq!(
            recs[5].entry,
            LogEntry::Remote {
                id: CanId::Standard(0x123),
                len: 0
            }
        );
        assert_eq!(f(6).len(), 0);
        assert_eq!(f(7).id(), CanId::Extended(1));
        // and the writer gives back the same text (except the ESI flag, which fcan drops:
        // `##7` comes back as `##5`)
        let mut w = CandumpWriter::new(Vec::new());
        for r in &recs {
            w.write_record(r).unwrap();
        }
        let expected = log
            .replace("                   ", "")
            .replace("7FF##7", "7FF##5");
        assert_eq!(String::from_utf8(w.into_inner()).unwrap(), expected);
    }

    #[test]
    fn accepted_variants() {
        assert_eq!(frame("123#DE.AD.BE.EF"), frame("123#DEADBEEF"));
        assert_eq!(frame("123#1122334455667788_9").len(), 8);
        assert_eq!(frame("123##1AA"), frame("123##5AA"));
        assert_eq!(frame("123##3AA"), frame("123##1AA")); // ESI ignored
        assert_eq!(frame("123#deadbeef"), frame("123#DEADBEEF"));
        let r = parse_line("(1.5) can0 123#01 R\r\n").unwrap().unwrap();
        assert_eq!(r.timestamp, Duration::from_millis(1500));
        assert_eq!(parse_line("   \n").unwrap(), None);
        assert_eq!(
            parse_frame("20000040#0000000000000000").unwrap(),
            LogEntry::ErrorFrame {
                class: 0x40,
                data: [0; 8]
            }
        );
    }

    #[test]
    fn malformed_frames_say_why() {
        for (bad, needle) in [
            ("123DEAD", "no `#`"),
            ("12#00", "3 (standard) or 8 (extended)"),
            ("800#00", "above 7FF"),
            ("40000000#00", "above 1FFFFFFF"),
            ("12G#00", "not hexadecimal"),
            ("123#ABC", "odd number"),
            ("123#0011223344556677889", "odd number"),
            ("123#001122334455667788", "at most 8 bytes"),
            ("123#00_9", "only allowed after 8 data bytes"),
            ("123#0011223344556677_5", "9-F"),
            ("123##", "flags digit"),
            ("123##X00", "flags digit"),
            ("123##1001122334455667788", "not a valid FD length"),
            ("123#R99", "one digit"),
            ("123#zz", "not a hex digit"),
        ] {
            let err = parse_frame(bad).unwrap_err();
            assert!(err.contains(needle), "{bad}: {err}");
        }
        for (bad, needle) in [
            ("1700000000.1 vcan0 123#00", "should look like"),
            ("(1700000000) vcan0 123#00", "should look like"),
            ("(17x.1) vcan0 123#00", "should look like"),
            ("(1.1234567890) vcan0 123#00", "should look like"),
            ("(1.1)", "missing interface"),
            ("(1.1) vcan0", "missing frame"),
            ("(1.1) vcan0 123#00 extra", "unexpected text"),
        ] {
            let err = parse_line(bad).unwrap_err();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }
}
