//! RobStride private protocol frames, sans I/O.
//!
//! Every frame is a Classical CAN data frame with a 29-bit identifier and 8 data bytes,
//! at 1 Mbit/s. The identifier is split in three (RobStride user manuals, §4 "Driver
//! protocol and instructions"):
//!
//! | bits 28..24        | bits 23..8    | bits 7..0           |
//! |--------------------|---------------|---------------------|
//! | communication type | data area 2   | destination address |
//!
//! Requests (host → motor) carry the host id in bits 15..8 and the motor id as the
//! destination; replies (motor → host) carry the motor id in bits 15..8 and the host id
//! as the destination, with status (mode, faults, read result) in bits 23..16.
//!
//! Choices where the public documents disagree or are silent (each is also listed, with
//! its source, in `conformance/robstride/README.md`):
//!
//! - Host id: [`DEFAULT_HOST_ID`] is `0xFD`, the id in the manuals' examples and in the
//!   official STM32 sample program; other SDKs use 0x00 or 0x1F and it is only
//!   configuration (the motor answers whichever host id a request names).
//! - Quantization: the manuals' and the sample program's `float_to_uint`, which clamps
//!   and **truncates** `(x - min) * 65535 / (max - min)`; [`to_u16`] reproduces it in
//!   `f32` so our frames match theirs bit for bit.
//! - Active reports: the manuals' §4.2.1 and firmware up to 0.3.1.2 send type 2
//!   frames; the newest Chinese manual (260428) shows type 24 frames with the type-2
//!   layout. [`decode`] accepts both as [`Reply::Feedback`].
//! - Type 21 fault word and warning word: little-endian u32 (the manuals give the byte
//!   ranges but no byte order for this frame; the same fault word is parameter 0x3022,
//!   which type 17 reads low byte first like every parameter). Decoders must not swap.
//! - Type 21 identifier: the manuals' description (motor id in bits 15..8, host id as
//!   destination), not the Chinese manual's example `15 00 FD 7F`, which has them the
//!   other way round and contradicts its own table.

use fcan_core::frame::{CanId, Frame};

/// The host (master) id this crate uses unless configured otherwise: `0xFD`, as in the
/// RobStride manuals' examples (`0x11 0x00FD 0x7F …`) and the official sample program
/// (`Master_CAN_ID = 0xFD`).
pub const DEFAULT_HOST_ID: u8 = 0xFD;

/// The destination a motor puts on its type 0 (device id) answer instead of a host id.
pub const DEVICE_ID_REPLY_DEST: u8 = 0xFE;

/// Type 0: get device id (answer: the 64-bit MCU unique id).
pub const COMM_GET_ID: u8 = 0;
/// Type 1: operation control ("motion control", MIT-style) command.
pub const COMM_MOTION: u8 = 1;
/// Type 2: motor feedback (angle, velocity, torque, temperature).
pub const COMM_FEEDBACK: u8 = 2;
/// Type 3: enable (enter run mode).
pub const COMM_ENABLE: u8 = 3;
/// Type 4: stop (reset mode); `data[0] = 1` also clears faults.
pub const COMM_STOP: u8 = 4;
/// Type 6: set the mechanical zero to the present angle.
pub const COMM_SET_ZERO: u8 = 6;
/// Type 7: change the motor's CAN id (effective immediately).
pub const COMM_SET_ID: u8 = 7;
/// Type 17 (0x11): read one parameter.
pub const COMM_PARAM_READ: u8 = 17;
/// Type 18 (0x12): write one parameter (RAM; lost at power-off).
pub const COMM_PARAM_WRITE: u8 = 18;
/// Type 21 (0x15): fault feedback (fault word and warning word).
pub const COMM_FAULT: u8 = 21;
/// Type 22 (0x16): save parameters.
pub const COMM_SAVE: u8 = 22;
/// Type 24 (0x18): switch active (periodic) reporting on or off.
pub const COMM_ACTIVE_REPORT: u8 = 24;

/// Bytes 0..6 of type 22, 23, 24 and 25 requests; the manuals write them out literally
/// (`01 02 03 04 05 06 F_CMD`), presumably so a stray frame cannot trigger them.
pub const MAGIC: [u8; 6] = [1, 2, 3, 4, 5, 6];

/// A RobStride extended identifier, split into its three fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RsId {
    /// Communication type (bits 28..24; 5 bits).
    pub comm: u8,
    /// Data area 2 (bits 23..8).
    pub data: u16,
    /// Destination address (bits 7..0).
    pub dest: u8,
}

impl RsId {
    /// Splits a raw 29-bit identifier; bits above 28 are ignored.
    pub fn from_raw(raw: u32) -> RsId {
        RsId {
            comm: ((raw >> 24) & 0x1F) as u8,
            data: ((raw >> 8) & 0xFFFF) as u16,
            dest: (raw & 0xFF) as u8,
        }
    }

    /// The raw 29-bit identifier; a `comm` above 31 keeps its low 5 bits so the result
    /// is always a legal extended id.
    pub fn raw(self) -> u32 {
        (u32::from(self.comm & 0x1F) << 24) | (u32::from(self.data) << 8) | u32::from(self.dest)
    }

    /// The identifier of `frame`, or `None` unless it has an extended id (RobStride's
    /// private protocol only uses extended ids).
    pub fn of(frame: &Frame) -> Option<RsId> {
        match frame.id() {
            CanId::Extended(raw) => Some(RsId::from_raw(raw)),
            CanId::Standard(_) => None,
        }
    }

    /// The high byte of data area 2 (bits 23..16): status in replies, zero (or the new
    /// id for type 7) in requests.
    pub fn status(self) -> u8 {
        (self.data >> 8) as u8
    }

    /// The low byte of data area 2 (bits 15..8): the host id in requests, the motor id in
    /// replies.
    pub fn source(self) -> u8 {
        (self.data & 0xFF) as u8
    }
}

/// The quantization ranges of one model's motion command and feedback. Position,
/// velocity and torque are symmetric (`-position..=position` …); the gains run from 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ranges {
    /// Position range, rad (±).
    pub position: f32,
    /// Velocity range, rad/s (±).
    pub velocity: f32,
    /// Torque range, N·m (±).
    pub torque: f32,
    /// Largest Kp, N·m/rad (from 0).
    pub kp: f32,
    /// Largest Kd, N·m·s/rad (from 0).
    pub kd: f32,
}

/// An operation control (type 1) command: `t = kp·(position − p) + kd·(velocity − v) +
/// torque`, computed by the motor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MotionCommand {
    /// Target angle, rad.
    pub position: f32,
    /// Target velocity, rad/s.
    pub velocity: f32,
    /// Position gain, N·m/rad.
    pub kp: f32,
    /// Velocity gain, N·m·s/rad.
    pub kd: f32,
    /// Feed-forward torque, N·m.
    pub torque: f32,
}

/// `x` quantized onto 0..=65535 over `min..=max`, as the manuals' `float_to_uint`:
/// clamped, then `(x - min) * 65535 / (max - min)` truncated toward zero, in `f32`.
///
/// NaN is treated as 0.0 (then clamped), so a NaN gain or target never commands an
/// extreme: 0 for a gain, the middle of a symmetric range for a target. A degenerate
/// range (`max <= min`) gives 0.
pub fn to_u16(x: f32, min: f32, max: f32) -> u16 {
    // `partial_cmp` so that a NaN bound also lands here.
    if max.partial_cmp(&min) != Some(core::cmp::Ordering::Greater) {
        return 0;
    }
    let x = if x.is_nan() { 0.0 } else { x };
    let x = x.clamp(min, max);
    let span = max - min;
    // Same operation order as the C: multiply by 65535, then divide by the span.
    let v = (x - min) * 65535.0 / span;
    // `as` saturates, and v is within 0..=65535 up to rounding anyway.
    v as u16
}

/// The value a quantized `v` stands for over `min..=max` (the manuals'
/// `uint16_to_float`: `(max - min) * v / 65535 + min`).
pub fn from_u16(v: u16, min: f32, max: f32) -> f32 {
    (max - min) * f32::from(v) / 65535.0 + min
}

fn frame(id: RsId, data: [u8; 8]) -> Frame {
    // An RsId's raw value has at most 29 bits and 8 bytes fit a classic frame.
    Frame::classic(CanId::Extended(id.raw()), &data).expect("8 bytes fit a classic frame")
}

fn request(comm: u8, host: u8, motor: u8, data: [u8; 8]) -> Frame {
    frame(
        RsId {
            comm,
            data: u16::from(host),
            dest: motor,
        },
        data,
    )
}

/// Type 0 request: asks `motor` for its 64-bit unique id.
pub fn get_id(host: u8, motor: u8) -> Frame {
    request(COMM_GET_ID, host, motor, [0; 8])
}

/// Type 1: an operation control command, quantized with `ranges` (the target model's).
/// The torque goes in data area 2; angle, velocity, Kp, Kd as big-endian u16 in bytes
/// 0-1, 2-3, 4-5, 6-7 ("high byte first").
pub fn motion(motor: u8, ranges: &Ranges, cmd: &MotionCommand) -> Frame {
    let t = to_u16(cmd.torque, -ranges.torque, ranges.torque);
    let p = to_u16(cmd.position, -ranges.position, ranges.position);
    let v = to_u16(cmd.velocity, -ranges.velocity, ranges.velocity);
    let kp = to_u16(cmd.kp, 0.0, ranges.kp);
    let kd = to_u16(cmd.kd, 0.0, ranges.kd);
    let mut data = [0u8; 8];
    data[0..2].copy_from_slice(&p.to_be_bytes());
    data[2..4].copy_from_slice(&v.to_be_bytes());
    data[4..6].copy_from_slice(&kp.to_be_bytes());
    data[6..8].copy_from_slice(&kd.to_be_bytes());
    frame(
        RsId {
            comm: COMM_MOTION,
            data: t,
            dest: motor,
        },
        data,
    )
}

/// Type 3: enable (the motor enters run mode and answers with a feedback).
pub fn enable(host: u8, motor: u8) -> Frame {
    request(COMM_ENABLE, host, motor, [0; 8])
}

/// Type 4: stop (reset mode); `clear_fault` sets `data[0] = 1`, which also clears the
/// motor's faults. The manuals ask for all-zero data otherwise.
pub fn stop(host: u8, motor: u8, clear_fault: bool) -> Frame {
    request(
        COMM_STOP,
        host,
        motor,
        [u8::from(clear_fault), 0, 0, 0, 0, 0, 0, 0],
    )
}

/// Type 6: the present angle becomes the mechanical zero (`data[0] = 1`).
pub fn set_zero(host: u8, motor: u8) -> Frame {
    request(COMM_SET_ZERO, host, motor, [1, 0, 0, 0, 0, 0, 0, 0])
}

/// Type 7: `motor` takes `new_id` as its CAN id at once (new id in bits 23..16); it
/// answers with a type 0 device id frame from the new id.
pub fn set_can_id(host: u8, motor: u8, new_id: u8) -> Frame {
    frame(
        RsId {
            comm: COMM_SET_ID,
            data: (u16::from(new_id) << 8) | u16::from(host),
            dest: motor,
        },
        [0; 8],
    )
}

/// Type 17: read parameter `index` (little-endian in bytes 0-1, the rest zero).
pub fn param_read(host: u8, motor: u8, index: u16) -> Frame {
    let i = index.to_le_bytes();
    request(COMM_PARAM_READ, host, motor, [i[0], i[1], 0, 0, 0, 0, 0, 0])
}

/// Type 18: write parameter `index` in RAM; `value` is what goes in bytes 4..8
/// (little-endian; a u8 parameter in byte 4). See [`value_f32`] and friends.
pub fn param_write(host: u8, motor: u8, index: u16, value: [u8; 4]) -> Frame {
    let i = index.to_le_bytes();
    request(
        COMM_PARAM_WRITE,
        host,
        motor,
        [i[0], i[1], 0, 0, value[0], value[1], value[2], value[3]],
    )
}

/// Type 22: save the savable parameters to flash (`01 02 … 08`, as the manuals' example).
pub fn save(host: u8, motor: u8) -> Frame {
    request(COMM_SAVE, host, motor, [1, 2, 3, 4, 5, 6, 7, 8])
}

/// Type 24: active reporting on or off (`01 02 03 04 05 06 F_CMD 00`; F_CMD 1 = on).
/// Reports come every 10 ms by default (parameter `EPScan_time`).
pub fn active_report(host: u8, motor: u8, on: bool) -> Frame {
    let mut data = [0u8; 8];
    data[..6].copy_from_slice(&MAGIC);
    data[6] = u8::from(on);
    request(COMM_ACTIVE_REPORT, host, motor, data)
}

/// A parameter value as it goes in bytes 4..8: an `f32`, little-endian.
pub fn value_f32(x: f32) -> [u8; 4] {
    x.to_le_bytes()
}

/// A parameter value as it goes in bytes 4..8: a `u8` in byte 4, the rest zero.
pub fn value_u8(x: u8) -> [u8; 4] {
    [x, 0, 0, 0]
}

/// A parameter value as it goes in bytes 4..8: a `u16`, little-endian, then zeros.
pub fn value_u16(x: u16) -> [u8; 4] {
    let b = x.to_le_bytes();
    [b[0], b[1], 0, 0]
}

/// A parameter value as it goes in bytes 4..8: a `u32`, little-endian.
pub fn value_u32(x: u32) -> [u8; 4] {
    x.to_le_bytes()
}

/// A type 2 feedback (or type 24 report, newer firmware) as decoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Feedback {
    /// The motor that sent it (id bits 15..8).
    pub motor: u8,
    /// The host it is addressed to (id bits 7..0).
    pub host: u8,
    /// Mode (id bits 23..22): 0 reset, 1 calibration, 2 run.
    pub mode: u8,
    /// The six fault bits (id bits 21..16, here bits 5..0); see [`fault_bits_names`].
    pub faults: u8,
    /// Angle, rad, within the quantization range (the motor wraps it within ±4π).
    pub position: f32,
    /// Velocity, rad/s.
    pub velocity: f32,
    /// Torque, N·m.
    pub torque: f32,
    /// Temperature, °C (the wire carries °C × 10, big-endian); `None` when the frame has
    /// fewer than 8 data bytes.
    pub temperature: Option<f32>,
}

/// Mode value in [`Feedback::mode`]: reset (disabled).
pub const MODE_RESET: u8 = 0;
/// Mode value in [`Feedback::mode`]: calibration.
pub const MODE_CALIBRATION: u8 = 1;
/// Mode value in [`Feedback::mode`]: run (enabled).
pub const MODE_RUN: u8 = 2;

/// A frame from a motor, decoded.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// Type 0 answer: the motor's id and its 64-bit MCU unique id (bytes 0..8,
    /// little-endian as the sample program's `memcpy` reads it).
    DeviceId {
        /// Motor id.
        motor: u8,
        /// The MCU unique id.
        uid: u64,
    },
    /// Type 2 feedback, or a type 24 report from newer firmware.
    Feedback(Feedback),
    /// Type 17 answer.
    Param {
        /// Motor id.
        motor: u8,
        /// Host id (the destination).
        host: u8,
        /// Parameter index.
        index: u16,
        /// Bytes 4..8 as sent (little-endian value; a u8 in the first byte).
        value: [u8; 4],
        /// Bits 23..16 were 0 ("read successfully"); 1 means the read failed.
        ok: bool,
    },
    /// Type 21 fault feedback.
    Faults {
        /// Motor id.
        motor: u8,
        /// Host id (the destination).
        host: u8,
        /// Fault word (bytes 0..4, little-endian); see [`fault_word_names`].
        fault: u32,
        /// Warning word (bytes 4..8, little-endian); bit 0 over-temperature warning.
        warning: u32,
    },
}

fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

fn word(d: &[u8], at: usize) -> [u8; 4] {
    [d[at], d[at + 1], d[at + 2], d[at + 3]]
}

/// Decodes a motor → host frame with the motor's `ranges`.
///
/// `None` for anything that is not one: standard ids, CAN FD frames (the protocol is
/// Classical CAN only), unknown types, frames too short for their fields (a feedback
/// needs 6 bytes, and reports its temperature only with 8; the others need 8), type 0
/// frames not addressed to 0xFE, and type 24 frames that are the host's switch
/// request (bytes 0..6 `01 02 03 04 05 06`). Requests of types 17 and 2 look like
/// replies on the wire; the caller knows which side of the bus it is on. Never panics.
pub fn decode(frame: &Frame, ranges: &Ranges) -> Option<Reply> {
    if frame.is_fd() {
        return None;
    }
    let id = RsId::of(frame)?;
    let d = frame.data();
    match id.comm {
        COMM_GET_ID if id.dest == DEVICE_ID_REPLY_DEST && d.len() >= 8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&d[..8]);
            Some(Reply::DeviceId {
                motor: id.source(),
                uid: u64::from_le_bytes(b),
            })
        }
        COMM_FEEDBACK | COMM_ACTIVE_REPORT if d.len() >= 6 => {
            if id.comm == COMM_ACTIVE_REPORT && d.len() >= 6 && d[..6] == MAGIC {
                return None;
            }
            let status = id.status();
            Some(Reply::Feedback(Feedback {
                motor: id.source(),
                host: id.dest,
                mode: status >> 6,
                faults: status & 0x3F,
                position: from_u16(be16(d, 0), -ranges.position, ranges.position),
                velocity: from_u16(be16(d, 2), -ranges.velocity, ranges.velocity),
                torque: from_u16(be16(d, 4), -ranges.torque, ranges.torque),
                temperature: (d.len() >= 8).then(|| f32::from(be16(d, 6)) / 10.0),
            }))
        }
        COMM_PARAM_READ if d.len() >= 8 => Some(Reply::Param {
            motor: id.source(),
            host: id.dest,
            index: u16::from_le_bytes([d[0], d[1]]),
            value: word(d, 4),
            ok: id.status() == 0,
        }),
        COMM_FAULT if d.len() >= 8 => Some(Reply::Faults {
            motor: id.source(),
            host: id.dest,
            fault: u32::from_le_bytes(word(d, 0)),
            warning: u32::from_le_bytes(word(d, 4)),
        }),
        _ => None,
    }
}

/// A frame from the host, decoded (what a motor, or the simulated one, acts on).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Request {
    /// Type 0.
    GetId {
        /// Host id.
        host: u8,
        /// Motor id.
        motor: u8,
    },
    /// Type 1 (no host id on the wire: data area 2 carries the torque).
    Motion {
        /// Motor id.
        motor: u8,
        /// The command, dequantized.
        cmd: MotionCommand,
    },
    /// Type 3.
    Enable {
        /// Host id.
        host: u8,
        /// Motor id.
        motor: u8,
    },
    /// Type 4.
    Stop {
        /// Host id.
        host: u8,
        /// Motor id.
        motor: u8,
        /// `data[0] == 1`.
        clear_fault: bool,
    },
    /// Type 6.
    SetZero {
        /// Host id.
        host: u8,
        /// Motor id.
        motor: u8,
    },
    /// Type 17.
    ParamRead {
        /// Host id.
        host: u8,
        /// Motor id.
        motor: u8,
        /// Parameter index.
        index: u16,
    },
    /// Type 18.
    ParamWrite {
        /// Host id.
        host: u8,
        /// Motor id.
        motor: u8,
        /// Parameter index.
        index: u16,
        /// Bytes 4..8 as sent.
        value: [u8; 4],
    },
    /// Type 24.
    ActiveReport {
        /// Host id.
        host: u8,
        /// Motor id.
        motor: u8,
        /// F_CMD = 1.
        on: bool,
    },
    /// Type 7 (an addition to the first API).
    SetId {
        /// Host id.
        host: u8,
        /// Motor id (before the change).
        motor: u8,
        /// The id the motor takes.
        new_id: u8,
    },
    /// Type 22 (an addition to the first API).
    Save {
        /// Host id.
        host: u8,
        /// Motor id.
        motor: u8,
    },
}

/// Decodes a host → motor frame, dequantizing a motion command with `ranges`.
///
/// `None` for standard ids, FD frames, unknown types and malformed requests: type 1 or
/// 18 with fewer than 8 bytes, type 17 with fewer than 2, type 6 without `data[0] = 1`,
/// type 4 with `data[0..2] = 00 C4` (that is the version read, not a stop), type 22 or
/// 24 without the `01 02 03 04 05 06` bytes, type 24 with an F_CMD other than 0 or 1,
/// and type 0 addressed to 0xFE (a motor's answer). Never panics.
pub fn decode_request(frame: &Frame, ranges: &Ranges) -> Option<Request> {
    if frame.is_fd() {
        return None;
    }
    let id = RsId::of(frame)?;
    let d = frame.data();
    let host = id.source();
    let motor = id.dest;
    match id.comm {
        COMM_GET_ID if motor != DEVICE_ID_REPLY_DEST => Some(Request::GetId { host, motor }),
        COMM_MOTION if d.len() >= 8 => Some(Request::Motion {
            motor,
            cmd: MotionCommand {
                position: from_u16(be16(d, 0), -ranges.position, ranges.position),
                velocity: from_u16(be16(d, 2), -ranges.velocity, ranges.velocity),
                kp: from_u16(be16(d, 4), 0.0, ranges.kp),
                kd: from_u16(be16(d, 6), 0.0, ranges.kd),
                torque: from_u16(id.data, -ranges.torque, ranges.torque),
            },
        }),
        COMM_ENABLE => Some(Request::Enable { host, motor }),
        COMM_STOP if d.len() >= 2 && d[0] == 0 && d[1] == 0xC4 => None,
        COMM_STOP => Some(Request::Stop {
            host,
            motor,
            clear_fault: d.first() == Some(&1),
        }),
        COMM_SET_ZERO if d.first() == Some(&1) => Some(Request::SetZero { host, motor }),
        COMM_SET_ID => Some(Request::SetId {
            host,
            motor,
            new_id: id.status(),
        }),
        COMM_PARAM_READ if d.len() >= 2 => Some(Request::ParamRead {
            host,
            motor,
            index: u16::from_le_bytes([d[0], d[1]]),
        }),
        COMM_PARAM_WRITE if d.len() >= 8 => Some(Request::ParamWrite {
            host,
            motor,
            index: u16::from_le_bytes([d[0], d[1]]),
            value: word(d, 4),
        }),
        COMM_SAVE if d.len() >= 6 && d[..6] == MAGIC => Some(Request::Save { host, motor }),
        COMM_ACTIVE_REPORT if d.len() >= 7 && d[..6] == MAGIC && d[6] <= 1 => {
            Some(Request::ActiveReport {
                host,
                motor,
                on: d[6] == 1,
            })
        }
        _ => None,
    }
}

/// Encodes a feedback as the motor sends it (for simulated motors): type
/// [`COMM_FEEDBACK`], or [`COMM_ACTIVE_REPORT`] for a newer firmware's report. Values
/// outside `ranges` are clamped; a `None` temperature is sent as 0.
pub fn feedback(comm: u8, fb: &Feedback, ranges: &Ranges) -> Frame {
    let status = ((fb.mode & 0x3) << 6) | (fb.faults & 0x3F);
    let p = to_u16(fb.position, -ranges.position, ranges.position);
    let v = to_u16(fb.velocity, -ranges.velocity, ranges.velocity);
    let t = to_u16(fb.torque, -ranges.torque, ranges.torque);
    // °C × 10; the `as` cast saturates (and maps NaN to 0), which is what we want.
    let temp = (fb.temperature.unwrap_or(0.0) * 10.0).round() as u16;
    let mut data = [0u8; 8];
    data[0..2].copy_from_slice(&p.to_be_bytes());
    data[2..4].copy_from_slice(&v.to_be_bytes());
    data[4..6].copy_from_slice(&t.to_be_bytes());
    data[6..8].copy_from_slice(&temp.to_be_bytes());
    frame(
        RsId {
            comm,
            data: (u16::from(status) << 8) | u16::from(fb.motor),
            dest: fb.host,
        },
        data,
    )
}

/// Encodes a type 0 answer (for simulated motors): `(motor << 8) | 0xFE`, the unique id
/// little-endian.
pub fn device_id_reply(motor: u8, uid: u64) -> Frame {
    frame(
        RsId {
            comm: COMM_GET_ID,
            data: u16::from(motor),
            dest: DEVICE_ID_REPLY_DEST,
        },
        uid.to_le_bytes(),
    )
}

/// Encodes a type 17 answer (for simulated motors); `ok = false` sets status 1 in bits
/// 23..16 ("read failed").
pub fn param_reply(motor: u8, host: u8, index: u16, value: [u8; 4], ok: bool) -> Frame {
    let i = index.to_le_bytes();
    frame(
        RsId {
            comm: COMM_PARAM_READ,
            data: (u16::from(!ok) << 8) | u16::from(motor),
            dest: host,
        },
        [i[0], i[1], 0, 0, value[0], value[1], value[2], value[3]],
    )
}

/// Encodes a type 21 fault frame (for simulated motors): both words little-endian.
pub fn fault_frame(motor: u8, host: u8, fault: u32, warning: u32) -> Frame {
    let f = fault.to_le_bytes();
    let w = warning.to_le_bytes();
    frame(
        RsId {
            comm: COMM_FAULT,
            data: u16::from(motor),
            dest: host,
        },
        [f[0], f[1], f[2], f[3], w[0], w[1], w[2], w[3]],
    )
}

/// Names of the six feedback fault bits (bit 0 = id bit 16), in the manuals' words.
pub const FAULT_BIT_NAMES: [&str; 6] = [
    "undervoltage",
    "overcurrent",
    "overtemperature",
    "magnetic encoder fault",
    "stall overload",
    "uncalibrated",
];

/// The names of the fault bits set in `bits` (a [`Feedback::faults`]), lowest first.
pub fn fault_bits_names(bits: u8) -> impl Iterator<Item = &'static str> {
    FAULT_BIT_NAMES
        .iter()
        .enumerate()
        .filter(move |(i, _)| bits & (1 << i) != 0)
        .map(|(_, n)| *n)
}

/// The documented bits of the type 21 fault word (parameter 0x3022), with names.
pub const FAULT_WORD_BITS: [(u8, &str); 11] = [
    (0, "motor overtemperature"),
    (1, "driver chip fault"),
    (2, "undervoltage"),
    (3, "overvoltage"),
    (4, "phase B current sampling overcurrent"),
    (5, "phase C current sampling overcurrent"),
    (7, "encoder uncalibrated"),
    (8, "hardware identification fault"),
    (9, "position initialization fault"),
    (14, "stall overload protection"),
    (16, "phase A current sampling overcurrent"),
];

/// The names of the documented bits set in a type 21 fault word, lowest first;
/// undocumented bits are named `"bit N"` so none is hidden.
pub fn fault_word_names(word: u32) -> impl Iterator<Item = String> {
    (0..32u8).filter(move |b| word & (1 << b) != 0).map(|b| {
        FAULT_WORD_BITS
            .iter()
            .find(|(bit, _)| *bit == b)
            .map(|(_, n)| (*n).to_string())
            .unwrap_or_else(|| format!("bit {b}"))
    })
}
