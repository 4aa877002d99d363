//! CiA 301 identifiers and frames: NMT, SYNC, EMCY, heartbeat / boot-up, the SDO
//! channels, and the PDO identifiers this driver writes (CiA 301 v4.2, §7.2 and §7.3,
//! the predefined connection set of §7.3.5, Table 73).
//!
//! **Identifiers.** fcan's data plane uses the standard identifiers `0x100..=0x3FF`
//! (docs/protocol.md §2.1, §10.6), where CiA 301's predefined connection set puts the
//! PDOs (`0x180+id` … `0x580+id`). So the driver moves the PDOs it uses **outside** that
//! range by writing their COB-IDs (0x1400/0x1800 sub 1): [`TPDO_A`] `0x480+id`,
//! [`TPDO_B`] `0x680+id`, [`RPDO_A`] `0x500+id`, [`RPDO_B`] `0x400+id`, and disables
//! every other PDO. A drive's own frames — EMCY `0x80+id`, SDO `0x580+id`, heartbeat
//! `0x700+id` — are already outside it.
//!
//! Every decoder takes any frame and answers `None` for one that is not what it decodes:
//! nothing here panics on bus input.

use fcan_core::frame::{CanId, Frame};

/// NMT module control (CiA 301 §7.2.8.3.1): COB-ID 0.
pub const NMT: u16 = 0x000;
/// SYNC (CiA 301 §7.2.5): COB-ID 0x080, no data here (the counter is optional).
pub const SYNC: u16 = 0x080;
/// EMCY of node `id`: `0x080 + id` (CiA 301 Table 73).
pub const EMCY: u16 = 0x080;
/// Server → client SDO (the drive's answers): `0x580 + id`.
pub const SDO_TX: u16 = 0x580;
/// Client → server SDO (requests to the drive): `0x600 + id`.
pub const SDO_RX: u16 = 0x600;
/// Heartbeat and boot-up of node `id`: `0x700 + id` (CiA 301 §7.2.8.3.2).
pub const HEARTBEAT: u16 = 0x700;
/// The driver's TPDO A (statusword, position actual): `0x480 + id`.
pub const TPDO_A: u16 = 0x480;
/// The driver's TPDO B (velocity actual, torque actual, mode display): `0x680 + id`.
pub const TPDO_B: u16 = 0x680;
/// The driver's RPDO A (controlword, target): `0x500 + id`.
pub const RPDO_A: u16 = 0x500;
/// The driver's RPDO B (kept disabled, on `0x400 + id`).
pub const RPDO_B: u16 = 0x400;

/// An NMT command (CiA 301 §7.2.8.3.1, Figure 45 command specifiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NmtCommand {
    /// Start remote node: 0x01.
    Start,
    /// Stop remote node: 0x02.
    Stop,
    /// Enter pre-operational: 0x80.
    PreOperational,
    /// Reset node: 0x81.
    ResetNode,
    /// Reset communication: 0x82.
    ResetCommunication,
}

impl NmtCommand {
    /// The command specifier.
    pub fn cs(self) -> u8 {
        match self {
            NmtCommand::Start => 0x01,
            NmtCommand::Stop => 0x02,
            NmtCommand::PreOperational => 0x80,
            NmtCommand::ResetNode => 0x81,
            NmtCommand::ResetCommunication => 0x82,
        }
    }

    /// The command of specifier `cs`.
    pub fn from_cs(cs: u8) -> Option<NmtCommand> {
        Some(match cs {
            0x01 => NmtCommand::Start,
            0x02 => NmtCommand::Stop,
            0x80 => NmtCommand::PreOperational,
            0x81 => NmtCommand::ResetNode,
            0x82 => NmtCommand::ResetCommunication,
            _ => return None,
        })
    }
}

/// A node's NMT state as its heartbeat says it (CiA 301 §7.2.8.3.2.1, Table 49).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NmtState {
    /// 0x00: the boot-up message.
    BootUp,
    /// 0x04.
    Stopped,
    /// 0x05.
    Operational,
    /// 0x7F.
    PreOperational,
}

impl NmtState {
    /// The heartbeat byte.
    pub fn byte(self) -> u8 {
        match self {
            NmtState::BootUp => 0x00,
            NmtState::Stopped => 0x04,
            NmtState::Operational => 0x05,
            NmtState::PreOperational => 0x7F,
        }
    }

    /// The state of heartbeat byte `b` (bit 7, the toggle of node guarding, ignored).
    pub fn from_byte(b: u8) -> Option<NmtState> {
        Some(match b & 0x7F {
            0x00 => NmtState::BootUp,
            0x04 => NmtState::Stopped,
            0x05 => NmtState::Operational,
            0x7F => NmtState::PreOperational,
            _ => return None,
        })
    }
}

/// The 11-bit identifier of a Classical or FD frame with a standard id.
pub fn std_id(frame: &Frame) -> Option<u16> {
    match frame.id() {
        CanId::Standard(id) => Some(id),
        CanId::Extended(_) => None,
    }
}

fn frame(id: u16, data: &[u8]) -> Frame {
    // Every caller passes at most 8 bytes (never bus input), and the id is masked:
    // Frame::classic refuses nothing else.
    Frame::classic(CanId::Standard(id & CanId::STANDARD_MAX), data)
        .expect("at most 8 bytes on a standard id")
}

/// An NMT command to `node` (0: all nodes): `000 | cs node`.
pub fn nmt(cmd: NmtCommand, node: u8) -> Frame {
    frame(NMT, &[cmd.cs(), node])
}

/// An NMT frame: its command and the node it addresses (0 = all).
pub fn decode_nmt(f: &Frame) -> Option<(NmtCommand, u8)> {
    if std_id(f)? != NMT {
        return None;
    }
    match f.data() {
        [cs, node] => Some((NmtCommand::from_cs(*cs)?, *node)),
        _ => None,
    }
}

/// A SYNC frame (no counter).
pub fn sync() -> Frame {
    frame(SYNC, &[])
}

/// Whether `f` is a SYNC (with or without the 1-byte counter).
pub fn is_sync(f: &Frame) -> bool {
    std_id(f) == Some(SYNC) && f.data().len() <= 1
}

/// A heartbeat (or, with [`NmtState::BootUp`], the boot-up message) of `node`.
pub fn heartbeat(node: u8, state: NmtState) -> Frame {
    frame(HEARTBEAT + u16::from(node & 0x7F), &[state.byte()])
}

/// A heartbeat frame: the node and its state.
pub fn decode_heartbeat(f: &Frame) -> Option<(u8, NmtState)> {
    let id = std_id(f)?;
    let node = id
        .checked_sub(HEARTBEAT)
        .filter(|n| (1..=127).contains(n))?;
    match f.data() {
        [b] => Some((node as u8, NmtState::from_byte(*b)?)),
        _ => None,
    }
}

/// An emergency message (CiA 301 §7.2.7.3.1, Figure 42): error code, error register
/// (0x1001) and five manufacturer-specific bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emcy {
    /// The error code (CiA 301 Table 21; CiA 402-2 adds the drive codes).
    pub code: u16,
    /// The error register, object 0x1001.
    pub register: u8,
    /// Manufacturer-specific error field.
    pub data: [u8; 5],
}

impl Emcy {
    /// The error code's class in words ([`emcy_class`]).
    pub fn class(&self) -> &'static str {
        emcy_class(self.code)
    }
}

/// The EMCY frame of `node`.
pub fn emcy(node: u8, e: &Emcy) -> Frame {
    let c = e.code.to_le_bytes();
    let d = e.data;
    frame(
        EMCY + u16::from(node & 0x7F),
        &[c[0], c[1], e.register, d[0], d[1], d[2], d[3], d[4]],
    )
}

/// An EMCY frame: the node and the message. A frame of fewer than 8 bytes is not one.
pub fn decode_emcy(f: &Frame) -> Option<(u8, Emcy)> {
    let id = std_id(f)?;
    let node = id.checked_sub(EMCY).filter(|n| (1..=127).contains(n))?;
    match f.data() {
        [c0, c1, reg, d0, d1, d2, d3, d4] => Some((
            node as u8,
            Emcy {
                code: u16::from_le_bytes([*c0, *c1]),
                register: *reg,
                data: [*d0, *d1, *d2, *d3, *d4],
            },
        )),
        _ => None,
    }
}

/// The class of an EMCY error code, from CiA 301 Table 21 and the drive codes of CiA
/// 402-2 (IEC 61800-7-201, Annex "error codes"); the exact codes named where a drive
/// commonly sends them, else the class of the code's high byte.
pub fn emcy_class(code: u16) -> &'static str {
    match code {
        0x0000 => "error reset or no error",
        0x2310 => "continuous overcurrent",
        0x3210 => "DC link overvoltage",
        0x3220 => "DC link undervoltage",
        0x4210 => "excess temperature device",
        0x4310 => "excess temperature drive",
        0x5441 => "enable input (safe torque off) inactive",
        0x7300 => "sensor",
        0x8110 => "CAN overrun",
        0x8120 => "CAN error passive",
        0x8130 => "life guard or heartbeat error",
        0x8140 => "recovered from bus-off",
        0x8611 => "following error",
        0xFF00 => "device specific",
        _ => match code >> 12 {
            0x1 => "generic error",
            0x2 => "current",
            0x3 => "voltage",
            0x4 => "temperature",
            0x5 => "device hardware",
            0x6 => "device software",
            0x7 => "additional modules",
            0x8 => "monitoring",
            0x9 => "external error",
            0xF => match code >> 8 {
                0xF0 => "additional functions",
                _ => "device specific",
            },
            _ => "unknown error class",
        },
    }
}

/// The node id an SDO answer (`0x580 + id`) comes from.
pub fn sdo_answer_node(f: &Frame) -> Option<u8> {
    let id = std_id(f)?;
    id.checked_sub(SDO_TX)
        .filter(|n| (1..=127).contains(n))
        .map(|n| n as u8)
}

/// An SDO request (`0x600 + node`) with its 8 bytes.
pub fn sdo_request(node: u8, data: [u8; 8]) -> Frame {
    frame(SDO_RX + u16::from(node & 0x7F), &data)
}

/// An SDO answer (`0x580 + node`) with its 8 bytes.
pub fn sdo_answer(node: u8, data: [u8; 8]) -> Frame {
    frame(SDO_TX + u16::from(node & 0x7F), &data)
}

/// A PDO of `len ≤ 8` bytes on `cob`.
pub fn pdo(cob: u16, data: &[u8]) -> Frame {
    frame(cob, data.get(..data.len().min(8)).unwrap_or_default())
}

/// The driver's TPDO A (statusword u16, position actual i32), decoded.
pub fn decode_tpdo_a(data: &[u8]) -> Option<(u16, i32)> {
    match data {
        [s0, s1, p0, p1, p2, p3, ..] => Some((
            u16::from_le_bytes([*s0, *s1]),
            i32::from_le_bytes([*p0, *p1, *p2, *p3]),
        )),
        _ => None,
    }
}

/// The driver's TPDO B (velocity actual i32, mode display i8, then torque actual i16 when
/// the drive has 0x6077: the driver maps it last, so a drive without it sends 5 bytes).
pub fn decode_tpdo_b(data: &[u8]) -> Option<(i32, i8, Option<i16>)> {
    match data {
        [v0, v1, v2, v3, m, rest @ ..] => Some((
            i32::from_le_bytes([*v0, *v1, *v2, *v3]),
            *m as i8,
            match rest {
                [t0, t1, ..] => Some(i16::from_le_bytes([*t0, *t1])),
                _ => None,
            },
        )),
        _ => None,
    }
}
