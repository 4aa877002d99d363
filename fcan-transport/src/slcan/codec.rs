//! The slcan (Lawicel) ASCII protocol, sans I/O: bytes from the adapter in, [`Event`]s
//! out ([`Decoder`]); frames and commands in, bytes for the adapter out ([`encode`],
//! [`command`]).
//!
//! Nothing here touches a device, so it is tested with vectors and random bytes, and no
//! byte sequence makes it panic or grow without bound (a line longer than any the
//! protocol has is dropped whole, [`Refused::TooLong`]).
//!
//! # The lines (see the [module docs](super#the-protocol) for the sources)
//!
//! | line | what | fcan |
//! |---|---|---|
//! | `tIIILDD…` | Classical data frame, 11-bit id (3 hex digits), `L` = length 0–8 | both ways |
//! | `TIIIIIIIILDD…` | Classical data frame, 29-bit id (8 hex digits) | both ways |
//! | `rIIIL`, `RIIIIIIIIL` | remote frames | in: counted and dropped (fcan has none) |
//! | `dIIILDD…`, `DIIIIIIIILDD…` | CAN FD frame without BRS, `L` a DLC code `0`–`F` (`9` = 12 … `F` = 64 bytes) | both ways |
//! | `bIIILDD…`, `BIIIIIIIILDD…` | CAN FD frame with BRS | both ways |
//! | `Fxx` | status flags (reply to `F`) | in: a bus event per flag |
//! | `z`, `Z` | Lawicel's acknowledgement of a transmitted `t` / `T` | in: counted |
//! | (empty) | `\r` alone: a command acknowledged | in: counted |
//! | `\x07` (BEL) | a command refused | in: counted |
//!
//! Each line ends with `\r` (a `\n` is taken as an end too, and one on its own is
//! skipped); hex digits are read in either case and written in upper case. After a
//! frame's data an adapter may add a timestamp (`Z1`: 4 hex digits, milliseconds; some
//! firmwares 8 digits, microseconds): tolerated and ignored.

use fcan_core::frame::{fd_dlc, CanId, Frame, FD_LENGTHS};

/// The longest line the protocol has: `B`, 8 id digits, the DLC code, 128 data digits,
/// an 8-digit timestamp.
pub const MAX_LINE: usize = 1 + 8 + 1 + 128 + 8;

/// What a line from the adapter was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A data frame from the bus.
    Frame(Frame),
    /// `\r`: the last command was accepted.
    Ack,
    /// BEL: the last command was refused.
    Nack,
    /// `z` / `Z`: a transmitted frame acknowledged (Lawicel adapters).
    TxAck,
    /// `Fxx`: the status flags ([`status`] names the bits).
    Status(u8),
    /// A remote frame (`r`, `R`), which fcan does not carry.
    Remote(CanId),
    /// Any other well-formed reply (`V1013`, `N4242`, a firmware's version string).
    Other,
    /// A line that is none of these.
    Refused(Refused),
}

/// Why a line is not a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// Longer than any line of the protocol ([`MAX_LINE`]).
    TooLong,
    /// Shorter than its kind needs (identifier, DLC or data missing).
    Short,
    /// A character that is not a hex digit where one belongs.
    NotHex,
    /// An identifier wider than its format (standard above `7FF`, extended above
    /// `1FFFFFFF`).
    BadId,
    /// A DLC code the frame kind has not (above `8` for Classical).
    BadDlc,
    /// Characters after the data that are no timestamp (4 or 8 hex digits).
    Trailing,
    /// A byte outside printable ASCII.
    NotAscii,
}

/// The bits of an `Fxx` status reply (Lawicel's "Read Status Flags").
pub mod status {
    /// The adapter's receive FIFO is full.
    pub const RX_FIFO_FULL: u8 = 1 << 0;
    /// The adapter's transmit FIFO is full.
    pub const TX_FIFO_FULL: u8 = 1 << 1;
    /// Error warning (an error counter passed 96).
    pub const ERROR_WARNING: u8 = 1 << 2;
    /// Data overrun: frames were lost.
    pub const DATA_OVERRUN: u8 = 1 << 3;
    /// Error passive.
    pub const ERROR_PASSIVE: u8 = 1 << 5;
    /// Arbitration lost.
    pub const ARBITRATION_LOST: u8 = 1 << 6;
    /// Bus error.
    pub const BUS_ERROR: u8 = 1 << 7;
}

/// Splits what the adapter sends into lines and reads each; keeps no more than one line.
///
/// ```
/// use fcan_core::frame::{CanId, Frame};
/// use fcan_transport::slcan::codec::{Decoder, Event};
/// let mut d = Decoder::new();
/// let events: Vec<Event> = b"t1230\r\x07\rb7FF9000102030405060708090A0B\r"
///     .iter()
///     .filter_map(|b| d.push(*b))
///     .collect();
/// assert_eq!(events[0], Event::Frame(Frame::classic(CanId::Standard(0x123), &[]).unwrap()));
/// assert_eq!(events[1..3], [Event::Nack, Event::Ack]);
/// let data: Vec<u8> = (0..12).collect();
/// assert_eq!(events[3], Event::Frame(Frame::fd(CanId::Standard(0x7FF), &data).unwrap()));
/// ```
#[derive(Clone, Debug)]
pub struct Decoder {
    line: [u8; MAX_LINE],
    len: usize,
    /// The line under way is longer than [`MAX_LINE`]: dropped at its end.
    overlong: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder at the start of a line.
    pub const fn new() -> Decoder {
        Decoder {
            line: [0; MAX_LINE],
            len: 0,
            overlong: false,
        }
    }

    /// Takes one byte; returns what a line (or a BEL) it ends was.
    pub fn push(&mut self, byte: u8) -> Option<Event> {
        match byte {
            b'\r' | b'\n' => {
                if self.overlong {
                    self.reset();
                    return Some(Event::Refused(Refused::TooLong));
                }
                if self.len == 0 {
                    // `\r` alone acknowledges; a `\n` alone (after a `\r`) is nothing.
                    return (byte == b'\r').then_some(Event::Ack);
                }
                let ev = parse_line(&self.line[..self.len]);
                self.reset();
                Some(ev)
            }
            0x07 => {
                // A refusal is a reply of its own; a line cut short by it is lost.
                self.reset();
                Some(Event::Nack)
            }
            _ if self.overlong => None,
            _ if self.len == MAX_LINE => {
                self.overlong = true;
                None
            }
            _ => {
                self.line[self.len] = byte;
                self.len += 1;
                None
            }
        }
    }

    /// Forgets the line under way (after a reopen, say).
    pub fn reset(&mut self) {
        self.len = 0;
        self.overlong = false;
    }
}

/// The value of one hex digit, either case.
fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The number `digits` spell in hex (at most 8 digits).
fn hex_number(digits: &[u8]) -> Result<u32, Refused> {
    digits.iter().try_fold(0u32, |acc, &c| {
        hex(c)
            .map(|v| (acc << 4) | u32::from(v))
            .ok_or(Refused::NotHex)
    })
}

/// Reads one line (without its terminator).
pub fn parse_line(line: &[u8]) -> Event {
    if line.iter().any(|b| !(0x20..0x7F).contains(b)) {
        return Event::Refused(Refused::NotAscii);
    }
    let (kind, rest) = match line.split_first() {
        Some(split) => split,
        None => return Event::Ack,
    };
    match kind {
        b't' | b'T' | b'r' | b'R' | b'd' | b'D' | b'b' | b'B' => match parse_frame(*kind, rest) {
            Ok(ev) => ev,
            Err(r) => Event::Refused(r),
        },
        b'z' | b'Z' if rest.is_empty() => Event::TxAck,
        b'F' if rest.len() == 2 => match hex_number(rest) {
            // Two hex digits fit a byte.
            Ok(flags) => Event::Status(flags as u8),
            Err(r) => Event::Refused(r),
        },
        _ => Event::Other,
    }
}

/// The frame of a `t`/`T`/`r`/`R`/`d`/`D`/`b`/`B` line, `rest` after the kind letter.
fn parse_frame(kind: u8, rest: &[u8]) -> Result<Event, Refused> {
    let extended = kind.is_ascii_uppercase();
    let id_len = if extended { 8 } else { 3 };
    if rest.len() < id_len + 1 {
        return Err(Refused::Short);
    }
    let raw = hex_number(&rest[..id_len])?;
    let id = if extended {
        CanId::extended(raw)
    } else {
        u16::try_from(raw).ok().and_then(CanId::standard)
    }
    .ok_or(Refused::BadId)?;
    let code = hex(rest[id_len]).ok_or(Refused::NotHex)?;
    let fd = matches!(kind, b'd' | b'D' | b'b' | b'B');
    if !fd && code > 8 {
        return Err(Refused::BadDlc);
    }
    let len = usize::from(FD_LENGTHS[usize::from(code)]);
    let after_dlc = &rest[id_len + 1..];
    let remote = matches!(kind, b'r' | b'R');
    let digits = if remote { 0 } else { 2 * len };
    if after_dlc.len() < digits {
        return Err(Refused::Short);
    }
    let (data_hex, tail) = after_dlc.split_at(digits);
    if !matches!(tail.len(), 0 | 4 | 8) {
        return Err(Refused::Trailing);
    }
    hex_number(tail).map_err(|_| Refused::Trailing)?;
    if remote {
        return Ok(Event::Remote(id));
    }
    let mut data = [0u8; 64];
    for (i, pair) in data_hex.chunks_exact(2).enumerate() {
        let hi = hex(pair[0]).ok_or(Refused::NotHex)?;
        let lo = hex(pair[1]).ok_or(Refused::NotHex)?;
        data[i] = (hi << 4) | lo;
    }
    let data = &data[..len];
    // Lengths come from the DLC table, so both constructors accept them.
    let frame = if fd {
        let f = Frame::fd(id, data).map_err(|_| Refused::BadDlc)?;
        if matches!(kind, b'b' | b'B') {
            f
        } else {
            f.without_brs()
        }
    } else {
        Frame::classic(id, data).map_err(|_| Refused::BadDlc)?
    };
    Ok(Event::Frame(frame))
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Appends the line that transmits `frame`, with its `\r`: `t`/`T` for Classical, `b`/`B`
/// for CAN FD with BRS, `d`/`D` without; identifiers and data in upper-case hex.
///
/// ```
/// use fcan_core::frame::{CanId, Frame};
/// use fcan_transport::slcan::codec::encode;
/// let mut out = Vec::new();
/// encode(&Frame::classic(CanId::Extended(0x1ABCDEF0), &[0xDE, 0xAD]).unwrap(), &mut out);
/// encode(&Frame::fd(CanId::Standard(0x12), &[0; 12]).unwrap().without_brs(), &mut out);
/// assert_eq!(out, b"T1ABCDEF02DEAD\rd0129000000000000000000000000\r".to_vec());
/// ```
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    let (kind, raw, digits) = match (frame.id(), frame.is_fd(), frame.is_brs()) {
        (CanId::Standard(id), false, _) => (b't', u32::from(id), 3),
        (CanId::Extended(id), false, _) => (b'T', id, 8),
        (CanId::Standard(id), true, true) => (b'b', u32::from(id), 3),
        (CanId::Extended(id), true, true) => (b'B', id, 8),
        (CanId::Standard(id), true, false) => (b'd', u32::from(id), 3),
        (CanId::Extended(id), true, false) => (b'D', id, 8),
    };
    out.push(kind);
    for shift in (0..digits).rev() {
        out.push(HEX_UPPER[((raw >> (4 * shift)) & 0xF) as usize]);
    }
    // A frame's length is always one of the DLC table's (Classical 0–8 included).
    let code = fd_dlc(frame.len()).unwrap_or(0);
    out.push(HEX_UPPER[usize::from(code)]);
    for b in frame.data() {
        out.push(HEX_UPPER[usize::from(b >> 4)]);
        out.push(HEX_UPPER[usize::from(b & 0xF)]);
    }
    out.push(b'\r');
}

/// The line of a command (`C`, `S8`, `Y5`, `O`, `F` …), with its `\r`.
pub fn command(cmd: &str) -> Vec<u8> {
    let mut v = cmd.as_bytes().to_vec();
    v.push(b'\r');
    v
}

/// The `Sn` command of a nominal bitrate (Lawicel's S0–S8, CANable's S9 for 83.3 kbit/s).
///
/// ```
/// use fcan_transport::slcan::codec::bitrate_command;
/// assert_eq!(bitrate_command(1_000_000), Some("S8"));
/// assert_eq!(bitrate_command(125_000), Some("S4"));
/// assert_eq!(bitrate_command(123), None);
/// ```
pub fn bitrate_command(bitrate: u32) -> Option<&'static str> {
    BITRATES
        .iter()
        .find(|(b, _)| *b == bitrate)
        .map(|(_, c)| *c)
}

/// The `Yn` command of a CAN FD data bitrate (the CANable 2.0 firmware's `Y2`, `Y5`).
pub fn data_bitrate_command(bitrate: u32) -> Option<&'static str> {
    DATA_BITRATES
        .iter()
        .find(|(b, _)| *b == bitrate)
        .map(|(_, c)| *c)
}

/// Nominal bitrates and their commands.
pub const BITRATES: [(u32, &str); 11] = [
    (10_000, "S0"),
    (20_000, "S1"),
    (50_000, "S2"),
    (100_000, "S3"),
    (125_000, "S4"),
    (250_000, "S5"),
    (500_000, "S6"),
    (750_000, "S7"),
    (1_000_000, "S8"),
    (83_300, "S9"),
    (83_333, "S9"),
];

/// CAN FD data bitrates and their commands.
pub const DATA_BITRATES: [(u32, &str); 2] = [(2_000_000, "Y2"), (5_000_000, "Y5")];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(bytes: &[u8]) -> Vec<Event> {
        let mut d = Decoder::new();
        bytes.iter().filter_map(|b| d.push(*b)).collect()
    }

    fn frame(bytes: &[u8]) -> Frame {
        match decode_all(bytes).as_slice() {
            [Event::Frame(f)] => *f,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bytes)),
        }
    }

    fn encoded(f: &Frame) -> Vec<u8> {
        let mut v = Vec::new();
        encode(f, &mut v);
        v
    }

    /// The examples of Lawicel's CANUSB manual ("t" and "T" commands: `t10021133`,
    /// `T0000010021133`, `r1000`; "r"/"R"), of can-utils' slcanpty.c (its `can2pty`
    /// prints `%c%03X%d` / `%c%08X%d` and the data `%02X`, with `%04X` milliseconds
    /// after Z1), of the Linux kernel's drivers/net/can/slcan (the same layout, upper-case
    /// hex), and of the CANable 2.0 firmware's README (`d`/`D`/`b`/`B`, DLC `9` = 12 …
    /// `F` = 64 bytes).
    #[test]
    fn vectors_from_the_protocol_documents() {
        let s = |id| CanId::Standard(id);
        let e = |id| CanId::Extended(id);
        // Lawicel: "t10021133" = id 0x100, 2 bytes 0x11 0x33.
        let f = Frame::classic(s(0x100), &[0x11, 0x33]).unwrap();
        assert_eq!(frame(b"t10021133\r"), f);
        assert_eq!(encoded(&f), b"t10021133\r");
        // Lawicel: "T0000010021133" = extended id 0x100, 2 bytes.
        let f = Frame::classic(e(0x100), &[0x11, 0x33]).unwrap();
        assert_eq!(frame(b"T0000010021133\r"), f);
        assert_eq!(encoded(&f), b"T0000010021133\r");
        // Lawicel: "t0200" = id 0x20, no data; "T1FFFFFFF0" the highest extended id.
        assert_eq!(frame(b"t0200\r"), Frame::classic(s(0x20), &[]).unwrap());
        assert_eq!(
            encoded(&Frame::classic(e(0x1FFF_FFFF), &[]).unwrap()),
            b"T1FFFFFFF0\r"
        );
        // 8 bytes, lower-case hex in (some adapters), upper-case out (kernel, slcanpty).
        let f = Frame::classic(s(0x7FF), &[0xDE, 0xAD, 0xBE, 0xEF, 0, 1, 2, 0xFF]).unwrap();
        assert_eq!(frame(b"t7ff8deadbeef000102ff\r"), f);
        assert_eq!(encoded(&f), b"t7FF8DEADBEEF000102FF\r");
        // slcanpty after `Z1`: a 4-digit millisecond timestamp (at most EA5F) follows.
        assert_eq!(
            frame(b"t12320102EA5F\r"),
            Frame::classic(s(0x123), &[1, 2]).unwrap()
        );
        assert_eq!(
            frame(b"T000001230EA5F\r"),
            Frame::classic(e(0x123), &[]).unwrap()
        );
        // 8-digit (microsecond) timestamps of other firmwares.
        assert_eq!(
            frame(b"t1231AA0001E240\r"),
            Frame::classic(s(0x123), &[0xAA]).unwrap()
        );
        // Remote frames: Lawicel "r1000" (id 0x100, DLC 0), "R123456784".
        assert_eq!(decode_all(b"r1000\r"), [Event::Remote(s(0x100))]);
        assert_eq!(decode_all(b"R123456784\r"), [Event::Remote(e(0x1234_5678))]);
        // CANable 2.0: d/D without BRS, b/B with; DLC codes 9..F.
        let data: Vec<u8> = (0..64).collect();
        for (code, len) in [
            (b'9', 12),
            (b'A', 16),
            (b'B', 20),
            (b'C', 24),
            (b'D', 32),
            (b'E', 48),
            (b'F', 64),
        ] {
            let mut line = b"b123".to_vec();
            line.push(code);
            for b in &data[..len] {
                line.extend(format!("{b:02X}").bytes());
            }
            line.push(b'\r');
            let f = Frame::fd(s(0x123), &data[..len]).unwrap();
            assert_eq!(frame(&line), f);
            assert!(frame(&line).is_brs());
            assert_eq!(encoded(&f), line);
            line[0] = b'd';
            let f = f.without_brs();
            assert_eq!(frame(&line), f);
            assert!(!frame(&line).is_brs());
            assert_eq!(encoded(&f), line);
        }
        let f = Frame::fd(e(0x18DA_F110), &[0xA5; 8]).unwrap();
        assert_eq!(encoded(&f), b"B18DAF1108A5A5A5A5A5A5A5A5\r");
        assert_eq!(frame(b"B18DAF1108A5A5A5A5A5A5A5A5\r"), f);
        let f = f.without_brs();
        assert_eq!(encoded(&f), b"D18DAF1108A5A5A5A5A5A5A5A5\r");
        assert_eq!(frame(b"D18DAF1108A5A5A5A5A5A5A5A5\r"), f);
        // An FD frame of 0 bytes.
        assert_eq!(
            frame(b"D000000050\r"),
            Frame::fd(e(5), &[]).unwrap().without_brs()
        );
    }

    #[test]
    fn replies() {
        // slcanpty answers `\r` (ack) or BEL (`\a`); Lawicel acks `t`/`T` with `z`/`Z`;
        // `F` is answered `Fxx`; `V` `V1013`.
        assert_eq!(
            decode_all(b"\r\x07z\rZ\rF88\rV1013\rN4242\r"),
            [
                Event::Ack,
                Event::Nack,
                Event::TxAck,
                Event::TxAck,
                Event::Status(status::BUS_ERROR | status::DATA_OVERRUN),
                Event::Other,
                Event::Other,
            ]
        );
        // `\r\n` endings: the `\n` adds nothing.
        assert_eq!(decode_all(b"t0000\r\n\r\n").len(), 2);
        // A line cut by BEL is lost, the BEL counts.
        assert_eq!(decode_all(b"t12\x07t0000\r").len(), 2);
        assert_eq!(decode_all(b"t12\x07")[0], Event::Nack);
    }

    #[test]
    fn malformed_lines_are_refused() {
        let r = |b: &[u8]| decode_all(b);
        let one = |b: &[u8], why| {
            assert_eq!(
                r(b),
                [Event::Refused(why)],
                "{:?}",
                String::from_utf8_lossy(b)
            )
        };
        one(b"t12\r", Refused::Short);
        one(b"t1232AA\r", Refused::Short);
        one(b"t8000\r", Refused::BadId);
        one(b"T200000000\r", Refused::BadId);
        one(b"t1239\r", Refused::BadDlc);
        one(b"t123G\r", Refused::NotHex);
        one(b"t1231GG\r", Refused::NotHex);
        one(b"tx230\r", Refused::NotHex);
        one(b"t1230AB\r", Refused::Trailing);
        one(b"t1230ABCDX\r", Refused::Trailing);
        one(b"t12\xff0\r", Refused::NotAscii);
        one(b"FZZ\r", Refused::NotHex);
        let long = [b'7'; MAX_LINE + 10];
        let mut b = long.to_vec();
        b.push(b'\r');
        b.extend(b"t0000\r");
        assert_eq!(
            r(&b),
            [
                Event::Refused(Refused::TooLong),
                Event::Frame(Frame::classic(CanId::Standard(0), &[]).unwrap())
            ]
        );
    }

    #[test]
    fn commands() {
        assert_eq!(command("S8"), b"S8\r");
        assert_eq!(bitrate_command(83_333), Some("S9"));
        assert_eq!(data_bitrate_command(5_000_000), Some("Y5"));
        assert_eq!(data_bitrate_command(2_000_000), Some("Y2"));
        assert_eq!(data_bitrate_command(8_000_000), None);
    }

    fn arb_frame() -> impl Strategy<Value = Frame> {
        (
            any::<bool>(),
            any::<u32>(),
            0usize..16,
            any::<bool>(),
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 64),
        )
            .prop_map(|(ext, raw, code, fd, brs, data)| {
                let id = if ext {
                    CanId::Extended(raw & 0x1FFF_FFFF)
                } else {
                    CanId::Standard((raw & 0x7FF) as u16)
                };
                if fd {
                    let f = Frame::fd(id, &data[..usize::from(FD_LENGTHS[code])]).unwrap();
                    if brs {
                        f
                    } else {
                        f.without_brs()
                    }
                } else {
                    Frame::classic(id, &data[..code.min(8)]).unwrap()
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// encode → decode is the identity, BRS included.
        #[test]
        fn round_trip(f in arb_frame()) {
            let back = frame(&encoded(&f));
            prop_assert_eq!(back, f);
            prop_assert_eq!(back.is_brs(), f.is_brs());
        }

        /// Any bytes: no panic, and whatever is taken for a frame re-encodes to a frame
        /// that decodes the same.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            for ev in decode_all(&bytes) {
                if let Event::Frame(f) = ev {
                    prop_assert_eq!(frame(&encoded(&f)), f);
                }
            }
        }

        /// Valid lines with bytes changed, dropped, inserted or the line cut: no panic,
        /// the decoder back in step at the next line, frames it accepts re-encodable.
        #[test]
        fn corrupted_lines_never_panic(
            f in arb_frame(),
            edits in proptest::collection::vec((any::<u8>(), any::<usize>(), 0u8..4), 1..6),
        ) {
            let mut line = encoded(&f);
            for (byte, at, op) in edits {
                let at = at % (line.len() + 1);
                match op {
                    0 if at < line.len() => line[at] = byte,
                    1 if at < line.len() => { line.remove(at); }
                    2 => line.insert(at, byte),
                    _ => line.truncate(at),
                }
            }
            let mut d = Decoder::new();
            for ev in line.iter().filter_map(|b| d.push(*b)) {
                if let Event::Frame(g) = ev {
                    prop_assert_eq!(frame(&encoded(&g)), g);
                }
            }
            // Back in step: an end of line, then a good line, decodes to the frame.
            d.push(b'\r');
            let good = encoded(&f);
            let evs: Vec<Event> = good.iter().filter_map(|b| d.push(*b)).collect();
            prop_assert_eq!(evs, vec![Event::Frame(f)]);
        }
    }
}
