//! SDO (CiA 301 v4.2 §7.2.4): the **client** the driver uses to configure a drive, and
//! the **server** codec the simulated drive answers with. Sans I/O: 8-byte payloads in,
//! frames out; the client's timeout is a deadline its owner polls.
//!
//! Both do expedited and segmented transfers (§7.2.4.3.3–§7.2.4.3.8), check the toggle
//! bit of every segment and answer a protocol error with an abort (§7.2.4.3.17). Block
//! transfers are not done: a drive must offer the normal ones (CiA 301 requires them).
//!
//! Command bytes (byte 0), CiA 301 Figures 21–32:
//!
//! | frame | byte 0 |
//! |---|---|
//! | initiate download request | `001x nnes` (ccs 1): `0x23`/`0x27`/`0x2B`/`0x2F` expedited 4/3/2/1 bytes, `0x21` segmented with size |
//! | initiate download response | `0x60` (scs 3) |
//! | download segment request | `000t nnnc` (ccs 0) |
//! | download segment response | `001t 0000` (scs 1) |
//! | initiate upload request | `0x40` (ccs 2) |
//! | initiate upload response | `010x nnes` (scs 2): expedited `0x43`…`0x4F`, segmented `0x41` with size |
//! | upload segment request | `011t 0000` (ccs 3) |
//! | upload segment response | `000t nnnc` (scs 0) |
//! | abort | `0x80`, index, sub, code (u32 LE) |

use fcan_core::frame::Frame;

use super::wire;

/// An SDO abort code (CiA 301 §7.2.4.3.17, Table 22), named by [`AbortCode::name`];
/// Display shows the name and the code in hex (an unknown code in hex only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AbortCode(pub u32);

impl AbortCode {
    /// Toggle bit not alternated.
    pub const TOGGLE: AbortCode = AbortCode(0x0503_0000);
    /// SDO protocol timed out.
    pub const TIMEOUT: AbortCode = AbortCode(0x0504_0000);
    /// Client/server command specifier not valid or unknown.
    pub const COMMAND: AbortCode = AbortCode(0x0504_0001);
    /// Out of memory.
    pub const MEMORY: AbortCode = AbortCode(0x0504_0005);
    /// Unsupported access to an object.
    pub const UNSUPPORTED: AbortCode = AbortCode(0x0601_0000);
    /// Attempt to read a write only object.
    pub const WRITE_ONLY: AbortCode = AbortCode(0x0601_0001);
    /// Attempt to write a read only object.
    pub const READ_ONLY: AbortCode = AbortCode(0x0601_0002);
    /// Object does not exist in the object dictionary.
    pub const NO_OBJECT: AbortCode = AbortCode(0x0602_0000);
    /// Object cannot be mapped to the PDO.
    pub const NOT_MAPPABLE: AbortCode = AbortCode(0x0604_0041);
    /// The number and length of the objects to be mapped would exceed PDO length.
    pub const PDO_LENGTH: AbortCode = AbortCode(0x0604_0042);
    /// General parameter incompatibility reason.
    pub const INCOMPATIBLE: AbortCode = AbortCode(0x0604_0043);
    /// Data type does not match, length of service parameter does not match.
    pub const LENGTH: AbortCode = AbortCode(0x0607_0010);
    /// Sub-index does not exist.
    pub const NO_SUB: AbortCode = AbortCode(0x0609_0011);
    /// Invalid value for parameter (download only).
    pub const INVALID: AbortCode = AbortCode(0x0609_0030);
    /// General error.
    pub const GENERAL: AbortCode = AbortCode(0x0800_0000);
    /// Data cannot be transferred or stored to the application.
    pub const STORE: AbortCode = AbortCode(0x0800_0020);
    /// … because of local control.
    pub const LOCAL_CONTROL: AbortCode = AbortCode(0x0800_0021);
    /// … because of the present device state.
    pub const DEVICE_STATE: AbortCode = AbortCode(0x0800_0022);

    /// The code's name in CiA 301 Table 22, or `None` for a code not there.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0503_0000 => "toggle bit not alternated",
            0x0504_0000 => "SDO protocol timed out",
            0x0504_0001 => "client/server command specifier not valid or unknown",
            0x0504_0002 => "invalid block size",
            0x0504_0003 => "invalid sequence number",
            0x0504_0004 => "CRC error",
            0x0504_0005 => "out of memory",
            0x0601_0000 => "unsupported access to an object",
            0x0601_0001 => "attempt to read a write only object",
            0x0601_0002 => "attempt to write a read only object",
            0x0602_0000 => "object does not exist in the object dictionary",
            0x0604_0041 => "object cannot be mapped to the PDO",
            0x0604_0042 => "the number and length of the objects to be mapped would exceed PDO length",
            0x0604_0043 => "general parameter incompatibility reason",
            0x0604_0047 => "general internal incompatibility in the device",
            0x0606_0000 => "access failed due to a hardware error",
            0x0607_0010 => "data type does not match, length of service parameter does not match",
            0x0607_0012 => "data type does not match, length of service parameter too high",
            0x0607_0013 => "data type does not match, length of service parameter too low",
            0x0609_0011 => "sub-index does not exist",
            0x0609_0030 => "invalid value for parameter (value range exceeded)",
            0x0609_0031 => "value of parameter written too high",
            0x0609_0032 => "value of parameter written too low",
            0x0609_0036 => "maximum value is less than minimum value",
            0x060A_0023 => "resource not available: SDO connection",
            0x0800_0000 => "general error",
            0x0800_0020 => "data cannot be transferred or stored to the application",
            0x0800_0021 => "data cannot be transferred or stored to the application because of local control",
            0x0800_0022 => "data cannot be transferred or stored to the application because of the present device state",
            0x0800_0023 => "object dictionary dynamic generation fails or no object dictionary is present",
            0x0800_0024 => "no data available",
            _ => return None,
        })
    }
}

impl core::fmt::Display for AbortCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({:#010X})", self.0),
            None => write!(f, "abort code {:#010X}", self.0),
        }
    }
}

/// Why a transfer failed: the abort code, and whether the drive sent it (else the client
/// did: a timeout, a toggle or protocol error, and it sent the abort).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdoError {
    /// The abort code.
    pub code: AbortCode,
    /// The server (drive) aborted.
    pub from_server: bool,
}

impl core::fmt::Display for SdoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.from_server {
            write!(f, "the drive aborted: {}", self.code)
        } else {
            write!(f, "{}", self.code)
        }
    }
}

/// The 8 bytes of an abort of `index:sub` with `code`.
pub fn abort_bytes(index: u16, sub: u8, code: AbortCode) -> [u8; 8] {
    let i = index.to_le_bytes();
    let c = code.0.to_le_bytes();
    [0x80, i[0], i[1], sub, c[0], c[1], c[2], c[3]]
}

/// An abort in `data` (8 bytes, byte 0 `0x80`): index, sub, code.
pub fn decode_abort(data: &[u8]) -> Option<(u16, u8, AbortCode)> {
    match data {
        [0x80, i0, i1, sub, c0, c1, c2, c3] => Some((
            u16::from_le_bytes([*i0, *i1]),
            *sub,
            AbortCode(u32::from_le_bytes([*c0, *c1, *c2, *c3])),
        )),
        _ => None,
    }
}

/// What the client did with an answer, or at a deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Not this transfer's (no transfer running, another node's, not 8 bytes).
    Ignored,
    /// Send this request next (the transfer goes on).
    Send(Frame),
    /// The transfer is done: for an upload, the object's bytes (empty for a download).
    Done(Vec<u8>),
    /// The transfer failed; the client's abort to send, if it is the one aborting.
    Failed(SdoError, Option<Frame>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    /// Download: waiting for the initiate response (`next` = 0) or a segment's.
    Download {
        data: Vec<u8>,
        next: usize,
        toggle: bool,
        initiated: bool,
    },
    /// Upload: waiting for the initiate response or a segment.
    Upload {
        got: Vec<u8>,
        size: Option<usize>,
        toggle: bool,
        initiated: bool,
    },
}

/// The SDO client of one server (node `node`): one transfer at a time. See the [module
/// docs](self).
#[derive(Clone, Debug)]
pub struct SdoClient {
    node: u8,
    index: u16,
    sub: u8,
    phase: Phase,
    deadline: Option<u64>,
    timeout_us: u64,
}

/// The largest object the client uploads (a segmented upload of more is aborted): no
/// drive object the driver reads comes close.
pub const MAX_UPLOAD: usize = 1024;

impl SdoClient {
    /// A client of node `node` whose transfers time out when the drive does not answer a
    /// request within `timeout_us`.
    pub fn new(node: u8, timeout_us: u64) -> SdoClient {
        SdoClient {
            node,
            index: 0,
            sub: 0,
            phase: Phase::Idle,
            deadline: None,
            timeout_us,
        }
    }

    /// Whether a transfer is running.
    pub fn busy(&self) -> bool {
        self.phase != Phase::Idle
    }

    /// When the running transfer times out.
    pub fn poll_at(&self) -> Option<u64> {
        self.deadline
    }

    fn request(&mut self, now: u64, data: [u8; 8]) -> Frame {
        self.deadline = Some(now + self.timeout_us);
        wire::sdo_request(self.node, data)
    }

    fn head(&self, cmd: u8) -> [u8; 8] {
        let i = self.index.to_le_bytes();
        [cmd, i[0], i[1], self.sub, 0, 0, 0, 0]
    }

    /// Starts writing `data` to `index:sub` (expedited up to 4 bytes, else segmented);
    /// a transfer still running is dropped. Returns the first request.
    pub fn download(&mut self, now: u64, index: u16, sub: u8, data: &[u8]) -> Frame {
        self.index = index;
        self.sub = sub;
        let mut b = self.head(0);
        if (1..=4).contains(&data.len()) {
            // e = 1, s = 1, n = 4 − len.
            b[0] = 0x23 | (((4 - data.len()) as u8) << 2);
            b[4..4 + data.len()].copy_from_slice(data);
            self.phase = Phase::Download {
                data: Vec::new(),
                next: 0,
                toggle: false,
                initiated: false,
            };
        } else {
            // Segmented, size indicated.
            b[0] = 0x21;
            b[4..8].copy_from_slice(&(data.len() as u32).to_le_bytes());
            self.phase = Phase::Download {
                data: data.to_vec(),
                next: 0,
                toggle: false,
                initiated: false,
            };
        }
        self.request(now, b)
    }

    /// Starts reading `index:sub`. Returns the request.
    pub fn upload(&mut self, now: u64, index: u16, sub: u8) -> Frame {
        self.index = index;
        self.sub = sub;
        self.phase = Phase::Upload {
            got: Vec::new(),
            size: None,
            toggle: false,
            initiated: false,
        };
        let b = self.head(0x40);
        self.request(now, b)
    }

    fn fail(&mut self, code: AbortCode, from_server: bool) -> Step {
        self.phase = Phase::Idle;
        self.deadline = None;
        let abort = (!from_server)
            .then(|| wire::sdo_request(self.node, abort_bytes(self.index, self.sub, code)));
        Step::Failed(SdoError { code, from_server }, abort)
    }

    fn done(&mut self, bytes: Vec<u8>) -> Step {
        self.phase = Phase::Idle;
        self.deadline = None;
        Step::Done(bytes)
    }

    /// The transfer's deadline passed at `now`: it fails with
    /// [`AbortCode::TIMEOUT`] and the client's abort.
    pub fn poll(&mut self, now: u64) -> Step {
        if self.deadline.is_some_and(|d| now >= d) && self.busy() {
            return self.fail(AbortCode::TIMEOUT, false);
        }
        Step::Ignored
    }

    /// An answer from the bus (any frame: another node's or not an SDO answer is
    /// [`Step::Ignored`]).
    pub fn on_frame(&mut self, now: u64, f: &Frame) -> Step {
        if wire::sdo_answer_node(f) != Some(self.node) || !self.busy() {
            return Step::Ignored;
        }
        let Ok(d) = <[u8; 8]>::try_from(f.data()) else {
            return Step::Ignored;
        };
        if let Some((index, sub, code)) = decode_abort(&d) {
            if index == self.index && sub == self.sub {
                return self.fail(code, true);
            }
            return Step::Ignored;
        }
        let scs = d[0] >> 5;
        let same = u16::from_le_bytes([d[1], d[2]]) == self.index && d[3] == self.sub;
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => Step::Ignored,
            Phase::Download {
                data,
                next,
                toggle,
                initiated,
            } => {
                if !initiated {
                    if scs != 3 || !same {
                        return self.fail(AbortCode::COMMAND, false);
                    }
                } else {
                    if scs != 1 {
                        return self.fail(AbortCode::COMMAND, false);
                    }
                    if (d[0] & 0x10 != 0) != toggle {
                        return self.fail(AbortCode::TOGGLE, false);
                    }
                }
                let toggle = if initiated { !toggle } else { false };
                if next >= data.len() {
                    return self.done(Vec::new());
                }
                let end = (next + 7).min(data.len());
                let chunk = &data[next..end];
                let last = end == data.len();
                let mut b = [0u8; 8];
                // ccs 0, t, n = 7 − len, c.
                b[0] = (u8::from(toggle) << 4) | (((7 - chunk.len()) as u8) << 1) | u8::from(last);
                b[1..1 + chunk.len()].copy_from_slice(chunk);
                self.phase = Phase::Download {
                    data,
                    next: end,
                    toggle,
                    initiated: true,
                };
                Step::Send(self.request(now, b))
            }
            Phase::Upload {
                mut got,
                size,
                toggle,
                initiated,
            } => {
                if !initiated {
                    if scs != 2 || !same {
                        return self.fail(AbortCode::COMMAND, false);
                    }
                    let e = d[0] & 0x02 != 0;
                    let s = d[0] & 0x01 != 0;
                    if e {
                        let n = if s {
                            4 - usize::from((d[0] >> 2) & 3)
                        } else {
                            4
                        };
                        return self.done(d[4..4 + n].to_vec());
                    }
                    let size = s.then(|| u32::from_le_bytes([d[4], d[5], d[6], d[7]]) as usize);
                    if size.is_some_and(|s| s > MAX_UPLOAD) {
                        return self.fail(AbortCode::MEMORY, false);
                    }
                    self.phase = Phase::Upload {
                        got,
                        size,
                        toggle: false,
                        initiated: true,
                    };
                    let b = [0x60, 0, 0, 0, 0, 0, 0, 0];
                    return Step::Send(self.request(now, b));
                }
                if scs != 0 {
                    return self.fail(AbortCode::COMMAND, false);
                }
                if (d[0] & 0x10 != 0) != toggle {
                    return self.fail(AbortCode::TOGGLE, false);
                }
                let n = 7 - usize::from((d[0] >> 1) & 7);
                got.extend_from_slice(&d[1..1 + n]);
                if got.len() > MAX_UPLOAD {
                    return self.fail(AbortCode::MEMORY, false);
                }
                if d[0] & 0x01 != 0 {
                    if size.is_some_and(|s| s != got.len()) {
                        return self.fail(AbortCode::LENGTH, false);
                    }
                    return self.done(got);
                }
                let toggle = !toggle;
                self.phase = Phase::Upload {
                    got,
                    size,
                    toggle,
                    initiated: true,
                };
                let b = [0x60 | (u8::from(toggle) << 4), 0, 0, 0, 0, 0, 0, 0];
                Step::Send(self.request(now, b))
            }
        }
    }
}

/// The object dictionary an [`SdoServer`] serves.
pub trait Dictionary {
    /// The bytes of `index:sub`, or why not.
    fn read(&self, index: u16, sub: u8) -> Result<Vec<u8>, AbortCode>;
    /// Writes `index:sub`, or says why not.
    fn write(&mut self, index: u16, sub: u8, data: &[u8]) -> Result<(), AbortCode>;
}

/// The server side of SDO (expedited and segmented), for the simulated drive: each
/// request's 8 bytes in, the answer's 8 bytes out.
#[derive(Clone, Debug, Default)]
pub struct SdoServer {
    index: u16,
    sub: u8,
    toggle: bool,
    /// A segmented download in progress: the bytes so far and the size announced.
    down: Option<(Vec<u8>, Option<usize>)>,
    /// A segmented upload in progress: the bytes left.
    up: Option<Vec<u8>>,
}

impl SdoServer {
    /// Answers one request (`data`, 8 bytes; anything else is ignored) against `od`.
    pub fn on_request(&mut self, data: &[u8], od: &mut dyn Dictionary) -> Option<[u8; 8]> {
        let d: [u8; 8] = data.try_into().ok()?;
        let index = u16::from_le_bytes([d[1], d[2]]);
        let sub = d[3];
        let abort = |s: &mut SdoServer, i: u16, sb: u8, c: AbortCode| {
            s.down = None;
            s.up = None;
            Some(abort_bytes(i, sb, c))
        };
        if d[0] == 0x80 {
            // The client aborted: nothing is answered.
            self.down = None;
            self.up = None;
            return None;
        }
        let head = |cmd: u8| {
            let i = index.to_le_bytes();
            [cmd, i[0], i[1], sub, 0, 0, 0, 0]
        };
        match d[0] >> 5 {
            // Initiate download.
            1 => {
                self.index = index;
                self.sub = sub;
                self.up = None;
                let e = d[0] & 0x02 != 0;
                let s = d[0] & 0x01 != 0;
                if e {
                    let n = if s {
                        4 - usize::from((d[0] >> 2) & 3)
                    } else {
                        4
                    };
                    return match od.write(index, sub, &d[4..4 + n]) {
                        Ok(()) => Some(head(0x60)),
                        Err(c) => abort(self, index, sub, c),
                    };
                }
                let size = s.then(|| u32::from_le_bytes([d[4], d[5], d[6], d[7]]) as usize);
                if size.is_some_and(|s| s > MAX_UPLOAD) {
                    return abort(self, index, sub, AbortCode::MEMORY);
                }
                self.down = Some((Vec::new(), size));
                self.toggle = false;
                Some(head(0x60))
            }
            // Download segment.
            0 => {
                let (i, sb) = (self.index, self.sub);
                let Some((mut got, size)) = self.down.take() else {
                    return abort(self, i, sb, AbortCode::COMMAND);
                };
                if (d[0] & 0x10 != 0) != self.toggle {
                    return abort(self, i, sb, AbortCode::TOGGLE);
                }
                let n = 7 - usize::from((d[0] >> 1) & 7);
                got.extend_from_slice(&d[1..1 + n]);
                if got.len() > MAX_UPLOAD {
                    return abort(self, i, sb, AbortCode::MEMORY);
                }
                let t = d[0] & 0x10;
                self.toggle = !self.toggle;
                if d[0] & 0x01 != 0 {
                    if size.is_some_and(|s| s != got.len()) {
                        return abort(self, i, sb, AbortCode::LENGTH);
                    }
                    if let Err(c) = od.write(i, sb, &got) {
                        return abort(self, i, sb, c);
                    }
                } else {
                    self.down = Some((got, size));
                }
                Some([0x20 | t, 0, 0, 0, 0, 0, 0, 0])
            }
            // Initiate upload.
            2 => {
                self.index = index;
                self.sub = sub;
                self.down = None;
                let bytes = match od.read(index, sub) {
                    Ok(b) => b,
                    Err(c) => return abort(self, index, sub, c),
                };
                if (1..=4).contains(&bytes.len()) {
                    let mut b = head(0x43 | (((4 - bytes.len()) as u8) << 2));
                    b[4..4 + bytes.len()].copy_from_slice(&bytes);
                    return Some(b);
                }
                let mut b = head(0x41);
                b[4..8].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
                self.up = Some(bytes);
                self.toggle = false;
                Some(b)
            }
            // Upload segment.
            3 => {
                let (i, sb) = (self.index, self.sub);
                let Some(left) = self.up.take() else {
                    return abort(self, i, sb, AbortCode::COMMAND);
                };
                if (d[0] & 0x10 != 0) != self.toggle {
                    return abort(self, i, sb, AbortCode::TOGGLE);
                }
                let n = left.len().min(7);
                let last = n == left.len();
                let mut b = [0u8; 8];
                b[0] = (d[0] & 0x10) | (((7 - n) as u8) << 1) | u8::from(last);
                b[1..1 + n].copy_from_slice(&left[..n]);
                self.toggle = !self.toggle;
                if !last {
                    self.up = Some(left[n..].to_vec());
                }
                Some(b)
            }
            _ => abort(self, index, sub, AbortCode::COMMAND),
        }
    }
}
