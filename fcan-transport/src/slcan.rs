//! Serial-line CAN adapters speaking the slcan (Lawicel) ASCII protocol: CANable,
//! CANable 2.0, USBtin, Lawicel CANUSB and the many clones, any `/dev/ttyACM*` /
//! `/dev/ttyUSB*` that takes `O`, `C`, `S8`, `t1230`; and anything at the other end of a
//! pty that does (can-utils' `slcanpty`, a test's scripted adapter).
//!
//! # The protocol
//!
//! Read from (never copied): Lawicel's CANUSB manual (the command set), can-utils'
//! `slcanpty.c` (a bridge from a pty to SocketCAN: which commands it answers `\r`, which
//! BEL, its frame and timestamp formats), the Linux kernel's `drivers/net/can/slcan`
//! (the same frame layout), python-can's `can/interfaces/slcan.py` (a host side: `S`,
//! `Y`, `O`, `C`, the FD letters), and the CANable 2.0 firmware (normaldotcom/canable2-fw,
//! `src/slcan.c` and its README: the FD extension). The lines themselves, and what fcan
//! does with each, are in [`codec`].
//!
//! Opening: `C` (close, in case the adapter was left open; its reply, `\r` or BEL, is
//! ignored, and whatever it had queued is dropped), `Sn` (the nominal bitrate: `S0` 10k,
//! `S1` 20k, `S2` 50k, `S3` 100k, `S4` 125k, `S5` 250k, `S6` 500k, `S7` 750k, `S8` 1M, and
//! CANable's `S9` 83.3k), with `fd` and a `dbitrate=` the CANable 2.0 firmware's data
//! bitrate (`Y2` 2M, `Y5` 5M — python-can offers the same two), then `O`. Each command's
//! reply is awaited up to [`REPLY_WAIT`]: a BEL to `S`, `Y` or `O` fails the open, naming
//! the command; no reply at all is accepted, since the CANable 2.0 firmware answers none.
//! The open blocks for that long (the handshake runs before the port goes to tokio): a
//! few milliseconds with an adapter that answers, up to four times [`REPLY_WAIT`] with
//! one that does not.
//!
//! Afterwards `\r` (acknowledged), BEL (refused: a frame the adapter would not send,
//! say — slcanpty refuses `d`/`b` lines, it is Classical only) and `z`/`Z` (Lawicel's
//! transmit acknowledgement) are counted ([`SlcanStats`]); an `Fxx` status reply (to
//! [`SlcanTransport::request_status`]) becomes bus events: data overrun or a full receive
//! FIFO [`BusError(RxOverflow)`](crate::BusErrorKind::RxOverflow), a bus error
//! [`BusError(Other)`](crate::BusErrorKind::Other), error warning or passive
//! [`ErrorPassive`](TransportError::ErrorPassive). Remote frames are counted and dropped
//! (fcan has none), and so are lines that are no frame. A Classical link (no `fd`)
//! ignores FD frames from the adapter and refuses to send them.
//!
//! # Spec
//!
//! `slcan:PATH[,OPTION…]`, options comma-separated, each once:
//!
//! | option | meaning |
//! |---|---|
//! | `bitrate=N` | the nominal bitrate in bit/s (`1000000` by default); `500k`, `1M` also read |
//! | `fd` | CAN FD: the link's MTU is FD, `d`/`b` lines both ways (the adapter must have FD firmware) |
//! | `dbitrate=N` | the FD data bitrate, `2000000` or `5000000` (`Y2`, `Y5`); implies `fd`; without it no `Y` is sent and the adapter keeps its own (CANable 2.0: 2M) |
//! | `classic` | Classical CAN (the default) |
//! | `baud=N` | the serial line's speed (`115200` by default; USB adapters ignore it) |

pub mod codec;

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use fcan_core::frame::{Frame, Mtu};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use self::codec::{encode, status, Decoder, Event};
use super::{check_id, check_mtu, Received, Transport, TransportError};

/// How long the open waits for the reply to each command.
pub const REPLY_WAIT: Duration = Duration::from_millis(100);
/// The default nominal bitrate.
pub const DEFAULT_BITRATE: u32 = 1_000_000;
/// The default serial line speed.
pub const DEFAULT_BAUD: u32 = 115_200;

/// A `slcan:PATH[,OPTION…]` spec.
///
/// ```
/// use fcan_core::frame::Mtu;
/// use fcan_transport::slcan::SlcanSpec;
/// let s = SlcanSpec::parse("slcan:/dev/ttyACM0").unwrap();
/// assert_eq!((s.path.as_str(), s.bitrate, s.data_bitrate, s.mtu), ("/dev/ttyACM0", 1_000_000, None, Mtu::Classic));
/// let s = SlcanSpec::parse("slcan:/dev/ttyACM0,bitrate=500k,dbitrate=5000000").unwrap();
/// assert_eq!((s.bitrate, s.data_bitrate, s.mtu), (500_000, Some(5_000_000), Mtu::Fd));
/// assert_eq!(s.commands(), ["C", "S6", "Y5", "O"]);
/// assert!(SlcanSpec::parse("slcan:/dev/ttyACM0,bitrate=300000").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlcanSpec {
    /// The serial device (or pty).
    pub path: String,
    /// The nominal bitrate (`bitrate=`).
    pub bitrate: u32,
    /// The FD data bitrate (`dbitrate=`), when one is set.
    pub data_bitrate: Option<u32>,
    /// `Classic` (the default) or `Fd` (`fd`, `dbitrate=`).
    pub mtu: Mtu,
    /// The serial line's speed (`baud=`).
    pub baud: u32,
}

const OPTIONS: &str = "slcan options: `bitrate=N` (10000, 20000, 50000, 83333, 100000, \
125000, 250000, 500000, 750000 or 1000000, the default), `fd`, `dbitrate=N` (2000000 or \
5000000, CANable 2.0's `Y2`/`Y5`; implies `fd`), `classic` (the default), `baud=N` (the \
serial line, 115200 by default)";

/// `1000000`, `1M`, `500k`, `83.3k` as bit/s.
fn rate(v: &str) -> Option<u32> {
    let v = v.trim();
    let (num, mult) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 1e3),
        (i, 'M' | 'm') => (&v[..i], 1e6),
        _ => (v, 1.0),
    };
    if let Ok(n) = num.parse::<u32>() {
        return n.checked_mul(mult as u32);
    }
    let x: f64 = num.parse().ok()?;
    let r = (x * mult).round();
    (r.is_finite() && (1.0..=f64::from(u32::MAX)).contains(&r)).then_some(r as u32)
}

impl SlcanSpec {
    /// Parses `slcan:PATH[,OPTION…]`; every error is [`TransportError::InvalidSpec`]
    /// naming the option and what is accepted.
    pub fn parse(spec: &str) -> Result<SlcanSpec, TransportError> {
        let bad = |reason: String| TransportError::InvalidSpec {
            spec: spec.to_string(),
            reason,
        };
        let Some(("slcan", rest)) = spec.split_once(':') else {
            return Err(bad(
                "not a serial-line CAN adapter (`slcan:PATH[,OPTION…]`)".into(),
            ));
        };
        let mut parts = rest.split(',');
        let path = parts.next().unwrap_or("").trim();
        if path.is_empty() {
            return Err(bad(
                "`slcan` needs the adapter's serial device, e.g. `slcan:/dev/ttyACM0`".into(),
            ));
        }
        let mut s = SlcanSpec {
            path: path.to_string(),
            bitrate: DEFAULT_BITRATE,
            data_bitrate: None,
            mtu: Mtu::Classic,
            baud: DEFAULT_BAUD,
        };
        let mut seen: Vec<&str> = Vec::new();
        let mut kind: Option<&str> = None;
        for item in parts {
            let item = item.trim();
            if item.is_empty() {
                return Err(bad(format!(
                    "an empty option (a comma too many?); {OPTIONS}"
                )));
            }
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            let slot = match key {
                "fd" | "classic" => "kind",
                "bitrate" | "dbitrate" | "baud" => key,
                "data_bitrate" | "data-bitrate" | "dbit" | "fd_bitrate" => {
                    return Err(bad(format!(
                        "unknown option `{item}`; did you mean `dbitrate`?; {OPTIONS}"
                    )))
                }
                _ => return Err(bad(format!("unknown option `{item}`; {OPTIONS}"))),
            };
            if seen.contains(&slot) {
                return Err(bad(format!(
                    "`{item}`: {} is given twice",
                    if slot == "kind" {
                        "the frame kind (`fd` or `classic`)"
                    } else {
                        slot
                    }
                )));
            }
            seen.push(slot);
            match (key, value) {
                ("fd" | "classic", Some(v)) => {
                    return Err(bad(format!("`{key}={v}`: `{key}` takes no value")))
                }
                ("fd" | "classic", None) => kind = Some(key),
                (_, None) => return Err(bad(format!("`{key}` needs a value; {OPTIONS}"))),
                ("bitrate", Some(v)) => {
                    s.bitrate = rate(v)
                        .filter(|r| codec::bitrate_command(*r).is_some())
                        .ok_or_else(|| {
                            bad(format!(
                                "`bitrate={v}`: not a bitrate slcan can set; {OPTIONS}"
                            ))
                        })?;
                }
                ("dbitrate", Some(v)) => {
                    s.data_bitrate = Some(
                        rate(v)
                            .filter(|r| codec::data_bitrate_command(*r).is_some())
                            .ok_or_else(|| {
                                bad(format!(
                                    "`dbitrate={v}`: slcan adapters set 2000000 or 5000000 \
                                     (the CANable 2.0 firmware's `Y2`, `Y5`)"
                                ))
                            })?,
                    );
                }
                ("baud", Some(v)) => {
                    s.baud = v.parse().ok().filter(|b| *b > 0).ok_or_else(|| {
                        bad(format!(
                            "`baud={v}`: a serial line speed, e.g. `baud=115200`"
                        ))
                    })?;
                }
                _ => unreachable!("every option is handled"),
            }
        }
        s.mtu = match (kind, s.data_bitrate) {
            (Some("classic"), Some(d)) => {
                return Err(bad(format!(
                    "`classic` with `dbitrate={d}`: a data bitrate is for CAN FD (drop `classic`)"
                )))
            }
            (Some("fd"), _) | (None, Some(_)) => Mtu::Fd,
            _ => Mtu::Classic,
        };
        Ok(s)
    }

    /// The commands the open sends, in order (without their `\r`).
    pub fn commands(&self) -> Vec<&'static str> {
        let mut v = vec![
            "C",
            codec::bitrate_command(self.bitrate).expect("checked by parse"),
        ];
        if let Some(d) = self.data_bitrate {
            v.push(codec::data_bitrate_command(d).expect("checked by parse"));
        }
        v.push("O");
        v
    }

    /// Opens the adapter (see the [module docs](self)). Call inside a tokio runtime.
    #[cfg(unix)]
    pub fn open(&self) -> Result<SlcanTransport, TransportError> {
        SlcanTransport::open(self)
    }
}

/// What a [`SlcanTransport`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlcanStats {
    /// Frames delivered by `recv`.
    pub received: u64,
    /// Frames sent.
    pub sent: u64,
    /// `\r` replies (a command or frame accepted), the open's included.
    pub acks: u64,
    /// BEL replies (a command or frame refused), the open's `C` excepted.
    pub nacks: u64,
    /// `z`/`Z` replies (a transmitted frame acknowledged).
    pub tx_acks: u64,
    /// Lines that are no frame nor reply ([`codec::Refused`]).
    pub malformed: u64,
    /// Remote frames, dropped.
    pub remote: u64,
    /// FD frames a Classical link ignored.
    pub fd_ignored: u64,
    /// Other replies (`V…`, `N…`).
    pub other: u64,
    /// The last `Fxx` status reply.
    pub last_status: Option<u8>,
}

/// A link through a slcan adapter (see the [module docs](self)).
#[cfg(unix)]
pub struct SlcanTransport {
    name: String,
    mtu: Mtu,
    port: tokio_serial::SerialStream,
    decoder: Decoder,
    /// What arrived and is not yet handed out: frames and bus events, in order.
    pending: VecDeque<Result<Received, TransportError>>,
    buf: Vec<u8>,
    out: Vec<u8>,
    stats: SlcanStats,
}

#[cfg(unix)]
impl core::fmt::Debug for SlcanTransport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SlcanTransport")
            .field("name", &self.name)
            .field("mtu", &self.mtu)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

#[cfg(unix)]
fn io_error(path: &str, what: &str, e: impl core::fmt::Display) -> TransportError {
    TransportError::Io(io::Error::other(format!("slcan {path}: {what}: {e}")))
}

#[cfg(unix)]
impl SlcanTransport {
    /// Opens the adapter `spec` names and runs the open handshake. Call inside a tokio
    /// runtime.
    pub fn open(spec: &SlcanSpec) -> Result<SlcanTransport, TransportError> {
        let path = spec.path.as_str();
        let mut port = serialport::new(path, spec.baud)
            .timeout(REPLY_WAIT)
            .open_native()
            .map_err(|e| match e.kind {
                serialport::ErrorKind::NoDevice => {
                    TransportError::NoSuchInterface(format!("{path} (no such serial device)"))
                }
                serialport::ErrorKind::Io(io::ErrorKind::NotFound) => {
                    TransportError::NoSuchInterface(format!("{path} (no such serial device)"))
                }
                serialport::ErrorKind::Io(io::ErrorKind::PermissionDenied) => {
                    TransportError::PermissionDenied(format!(
                        "{path} (a serial device: is the user in the `dialout` group?)"
                    ))
                }
                _ => io_error(path, "opening", e),
            })?;
        use serialport::SerialPort;
        // Stale input from before (a previous session's frames) is no reply to us.
        let _ = port.clear(serialport::ClearBuffer::Input);
        let mut t = Handshake {
            port: &mut port,
            decoder: Decoder::new(),
            stats: SlcanStats::default(),
            frames: Vec::new(),
        };
        for cmd in spec.commands() {
            io::Write::write_all(t.port, &codec::command(cmd))
                .map_err(|e| io_error(path, &format!("writing `{cmd}`"), e))?;
            let reply = t.reply(path)?;
            match (cmd, reply) {
                ("C", _) => {
                    // Whatever the adapter had queued before it closed is dropped.
                    t.frames.clear();
                }
                (_, Some(Event::Nack)) => {
                    let hint = match cmd.as_bytes()[0] {
                        b'Y' => " (no CAN FD firmware? the CANable 2.0 firmware takes Y2 and Y5; drop `dbitrate=` to keep the adapter's own)",
                        b'S' => " (a bitrate this adapter does not support?)",
                        _ => "",
                    };
                    return Err(io_error(
                        path,
                        "open",
                        format!("the adapter refused `{cmd}` (BEL){hint}"),
                    ));
                }
                _ => {}
            }
        }
        let (decoder, stats, frames) = (t.decoder, t.stats, t.frames);
        let port = tokio_serial::SerialStream::try_from(port)
            .map_err(|e| io_error(path, "registering with tokio", e))?;
        let mut link = SlcanTransport {
            name: path.to_string(),
            mtu: spec.mtu,
            port,
            decoder,
            pending: VecDeque::new(),
            buf: vec![0; 4096],
            out: Vec::with_capacity(4096),
            stats,
        };
        let at = super::now();
        for f in frames {
            link.take(Event::Frame(f), at);
        }
        Ok(link)
    }

    /// What it has counted so far.
    pub fn stats(&self) -> SlcanStats {
        self.stats
    }

    /// Asks the adapter for its status flags (`F`); the reply arrives through
    /// [`recv`](Transport::recv) as bus events (see the [module docs](self)).
    pub async fn request_status(&mut self) -> Result<(), TransportError> {
        AsyncWriteExt::write_all(&mut self.port, b"F\r").await?;
        Ok(())
    }

    /// Handles one event from the decoder.
    fn take(&mut self, ev: Event, at: Instant) {
        let s = &mut self.stats;
        match ev {
            Event::Frame(f) if f.is_fd() && self.mtu == Mtu::Classic => s.fd_ignored += 1,
            Event::Frame(frame) => {
                s.received += 1;
                self.pending.push_back(Ok(Received { frame, at }));
            }
            Event::Ack => s.acks += 1,
            Event::Nack => s.nacks += 1,
            Event::TxAck => s.tx_acks += 1,
            Event::Remote(_) => s.remote += 1,
            Event::Other => s.other += 1,
            Event::Refused(_) => s.malformed += 1,
            Event::Status(flags) => {
                s.last_status = Some(flags);
                use crate::BusErrorKind as K;
                if flags & (status::DATA_OVERRUN | status::RX_FIFO_FULL) != 0 {
                    self.pending
                        .push_back(Err(TransportError::BusError(K::RxOverflow)));
                }
                if flags & status::BUS_ERROR != 0 {
                    self.pending
                        .push_back(Err(TransportError::BusError(K::Other)));
                }
                if flags & (status::ERROR_PASSIVE | status::ERROR_WARNING) != 0 {
                    self.pending.push_back(Err(TransportError::ErrorPassive));
                }
            }
        }
    }

    fn check(&self, frame: &Frame) -> Result<(), TransportError> {
        check_id(frame)?;
        check_mtu(&self.name, self.mtu, frame)
    }

    async fn write_out(&mut self) -> Result<(), TransportError> {
        let r = AsyncWriteExt::write_all(&mut self.port, &self.out).await;
        self.out.clear();
        r.map_err(TransportError::Io)
    }
}

/// The open's state while the port is still blocking.
#[cfg(unix)]
struct Handshake<'a> {
    port: &'a mut serialport::TTYPort,
    decoder: Decoder,
    stats: SlcanStats,
    frames: Vec<Frame>,
}

#[cfg(unix)]
impl Handshake<'_> {
    /// Reads until a reply (`\r` or BEL) or [`REPLY_WAIT`] without one; frames on the
    /// way are kept, anything else counted.
    fn reply(&mut self, path: &str) -> Result<Option<Event>, TransportError> {
        let deadline = Instant::now() + REPLY_WAIT;
        let mut byte = [0u8; 1];
        while Instant::now() < deadline {
            // Byte by byte: what follows the reply stays for the async side.
            match io::Read::read(self.port, &mut byte) {
                Ok(0) => return Ok(None),
                Ok(_) => match self.decoder.push(byte[0]) {
                    Some(ev @ Event::Ack) => {
                        self.stats.acks += 1;
                        return Ok(Some(ev));
                    }
                    Some(ev @ Event::Nack) => return Ok(Some(ev)),
                    Some(Event::Frame(f)) => self.frames.push(f),
                    Some(Event::Refused(_)) => self.stats.malformed += 1,
                    Some(_) => self.stats.other += 1,
                    None => {}
                },
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(path, "reading the reply", e)),
            }
        }
        Ok(None)
    }
}

#[cfg(unix)]
impl Transport for SlcanTransport {
    fn name(&self) -> &str {
        &self.name
    }

    fn mtu(&self) -> Mtu {
        self.mtu
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        self.check(frame)?;
        encode(frame, &mut self.out);
        self.write_out().await?;
        self.stats.sent += 1;
        Ok(())
    }

    /// All the frames that pass the checks, as one write.
    async fn send_batch(&mut self, frames: &[Frame]) -> Result<usize, TransportError> {
        let mut n = 0;
        let mut first_err = None;
        for f in frames {
            if let Err(e) = self.check(f) {
                first_err = Some(e);
                break;
            }
            encode(f, &mut self.out);
            n += 1;
        }
        if n == 0 {
            return match first_err {
                Some(e) => Err(e),
                None => Ok(0),
            };
        }
        self.write_out().await?;
        self.stats.sent += n as u64;
        Ok(n)
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        loop {
            if let Some(r) = self.pending.pop_front() {
                return r;
            }
            // Cancel-safe: bytes are taken whole into the decoder, and what they made is
            // queued before the next await.
            let n = match AsyncReadExt::read(&mut self.port, &mut self.buf).await {
                Ok(0) => return Err(TransportError::Closed),
                // A pty whose other side closed, a USB adapter unplugged.
                Err(e) if e.raw_os_error() == Some(5) => return Err(TransportError::Closed),
                Err(e) => return Err(TransportError::Io(e)),
                Ok(n) => n,
            };
            let at = super::now();
            for i in 0..n {
                if let Some(ev) = self.decoder.push(self.buf[i]) {
                    self.take(ev, at);
                }
            }
        }
    }
}
