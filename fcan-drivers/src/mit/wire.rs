//! MIT-mode frames: the 8-byte command every MIT-style actuator takes, the special
//! frames that switch it on and off, and the reply it sends back.
//!
//! The format comes from the MIT Mini Cheetah motor controller firmware
//! (`bgkatz/motorcontrol`, `Core/Src/can.c`: `unpack_cmd`, `pack_reply`) and was taken
//! over by CubeMars AK (manual V1.0.8 §5.3 "MIT power mode"), Damiao DM-J (MIT mode)
//! and MyActuator RMD V3 ("motion mode"). `conformance/mit/README.md` names the
//! source of every fact and every vector.
//!
//! # Command (master → motor)
//!
//! Standard 11-bit identifier = the motor's CAN id, Classical CAN (or CAN FD, see
//! below), 8 bytes. Five values are mapped linearly onto unsigned integers and packed
//! big-endian, most significant bits first:
//!
//! | byte | bits |
//! |---|---|
//! | 0 | position\[15:8] |
//! | 1 | position\[7:0] |
//! | 2 | velocity\[11:4] |
//! | 3 | velocity\[3:0], kp\[11:8] |
//! | 4 | kp\[7:0] |
//! | 5 | kd\[11:4] |
//! | 6 | kd\[3:0], torque\[11:8] |
//! | 7 | torque\[7:0] |
//!
//! The motor applies `torque = kp·(position − p) + kd·(velocity − v) + torque_ff`.
//!
//! # Special frames
//!
//! `FF FF FF FF FF FF FF xx` to the motor's id: `FC` enter motor mode, `FD` exit,
//! `FE` set the current position as zero, and (Damiao only) `FB` clear an error. The
//! firmware checks these before unpacking a command, so the one command whose bytes
//! equal a special frame (every value at its top code, torque code `0xFFC`..`0xFFE`)
//! cannot be sent; [`decode_request`] reads those bytes as the special frame, as
//! the motors do.
//!
//! # Reply (motor → master)
//!
//! On the master's id (CubeMars `set_master_id`, Mini Cheetah `CAN_MASTER`, Damiao
//! `MST_ID`), one reply per frame received. Position 16 bits, velocity 12 bits and torque
//! 12 bits in bytes 1..=5, with the same mapping; byte 0 and bytes 6..=7 depend on the
//! [`Layout`].
//!
//! # CAN FD (Damiao)
//!
//! Damiao motors also run on CAN FD (the DM-J/DM-H manuals: "supports CAN FD, up to
//! 5 Mbit/s"; OpenArm runs them at 1 Mbit/s nominal, 5 Mbit/s data). The frames do not
//! change: the same 8 bytes on the same identifiers (command on the motor's id, reply
//! on its master id, register frames on `0x7FF`), sent as FD frames of DLC 8 with bit-rate
//! switching (`enactic/openarm_can`, `src/openarm/damiao_motor/dm_motor_device.cpp`:
//! `create_canfd_frame` puts the unchanged payload in a `canfd_frame` of `len` 8 with
//! `CANFD_BRS`, and its FD callback parses the reply with the same decoder as a
//! Classical one). [`Framing`] says which kind a frame goes as; every builder here makes
//! the Classical frame and [`Framing::apply`] turns it into the FD one. The decoders take
//! either kind, by payload.
//!
//! MyActuator RMD "motion mode" takes the same command on identifier `0x400 + id` (pass
//! that as `id` to [`command`]) and answers on `0x500 + id` with the motor id in byte 0
//! and the same 5 bytes after it, so [`Layout::CubeMars`] reads its position, velocity
//! and torque; what its bytes 6..=7 carry is not verified.

use core::fmt;
use core::str::FromStr;

use fcan_core::frame::{CanId, Frame, Mtu};

/// The ranges the integers of a frame are mapped onto: each value `x` in `[min, max]`
/// becomes `(x − min)·(2^bits − 1)/(max − min)`. Motor and master must agree on them
/// (they are motor configuration: CubeMars and Damiao store P/V/T maxima in the motor,
/// the Mini Cheetah firmware in flash); nothing on the wire says which were used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ranges {
    /// Lowest position, rad.
    pub p_min: f32,
    /// Highest position, rad.
    pub p_max: f32,
    /// Lowest velocity, rad/s.
    pub v_min: f32,
    /// Highest velocity, rad/s.
    pub v_max: f32,
    /// Lowest position gain, N·m/rad.
    pub kp_min: f32,
    /// Highest position gain, N·m/rad.
    pub kp_max: f32,
    /// Lowest velocity gain, N·m·s/rad.
    pub kd_min: f32,
    /// Highest velocity gain, N·m·s/rad.
    pub kd_max: f32,
    /// Lowest torque, N·m.
    pub t_min: f32,
    /// Highest torque, N·m.
    pub t_max: f32,
}

impl Ranges {
    /// CubeMars AK80-9: P ±12.5 rad, V ±50 rad/s, T ±18 N·m, KP 0..500, KD 0..5 (AK
    /// Series Actuator Driver Manual V1.0.8, p. 50, the table of MIT-mode ranges per
    /// model). Other AK models differ only in V and T (AK60-6 ±45/±15, AK70-10 ±50/±25,
    /// AK80-6 ±76/±12, AK10-9 ±50/±65 in the same table).
    pub const AK80_9: Ranges = Ranges::symmetric(12.5, 50.0, 500.0, 5.0, 18.0);
    /// Damiao DM-J4310: P ±12.5 rad, V ±30 rad/s, T ±10 N·m, KP 0..500, KD 0..5 (the
    /// DM-J4310 limits of `cmjang/DM_Control_Python`'s `DM_CAN.py` and of Damiao's
    /// example headers; kp and kd ranges are fixed in Damiao firmware). Damiao lets the
    /// user change P/V/T maxima in the motor; set these to what the motor holds.
    pub const DM_J4310: Ranges = Ranges::symmetric(12.5, 30.0, 500.0, 5.0, 10.0);
    /// The MIT Mini Cheetah actuator as its example masters use it: P ±12.5 rad,
    /// V ±65 rad/s, T ±18 N·m, KP 0..500, KD 0..5 (the `P_MIN`..`T_MAX` defines every
    /// Mini Cheetah master example carries; the firmware itself keeps them in flash).
    pub const MINI_CHEETAH: Ranges = Ranges::symmetric(12.5, 65.0, 500.0, 5.0, 18.0);

    /// Ranges symmetric about zero for position, velocity and torque, and starting at
    /// zero for the gains (the shape every vendor uses).
    pub const fn symmetric(p: f32, v: f32, kp: f32, kd: f32, t: f32) -> Ranges {
        Ranges {
            p_min: -p,
            p_max: p,
            v_min: -v,
            v_max: v,
            kp_min: 0.0,
            kp_max: kp,
            kd_min: 0.0,
            kd_max: kd,
            t_min: -t,
            t_max: t,
        }
    }
}

impl Default for Ranges {
    /// [`Ranges::AK80_9`]: CubeMars is the default [`Layout`], and the AK80-9 is the
    /// model the Mini Cheetah's ranges were made for (same P, T, KP and KD), so a master
    /// configured with nothing else talks sensibly to the most common MIT motor.
    fn default() -> Ranges {
        Ranges::AK80_9
    }
}

/// One MIT command: the motor applies
/// `torque = kp·(position − p) + kd·(velocity − v) + torque`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Command {
    /// Target position, rad.
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

/// How a motor lays out its reply; the command is the same for all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Layout {
    /// CubeMars AK and the Mini Cheetah firmware: byte 0 = motor id (8 bits); CubeMars
    /// adds byte 6 = motor temperature + 40 °C and byte 7 = error code (0 = none). The
    /// Mini Cheetah firmware sends only the first 6 bytes (DLC 6); both are accepted.
    #[default]
    CubeMars,
    /// Damiao DM-J: byte 0 = state (high nibble) | motor id (low nibble); byte 6 = MOS
    /// temperature, byte 7 = rotor temperature, °C. The state is 0 disabled, 1 enabled,
    /// 8 over-voltage, 9 under-voltage, 0xA over-current, 0xB MOS over-temperature,
    /// 0xC rotor over-temperature, 0xD communication lost, 0xE overload.
    Damiao,
}

impl Layout {
    /// Every layout, in the order [`FromStr`] lists them.
    pub const ALL: [Layout; 2] = [Layout::CubeMars, Layout::Damiao];

    /// The name [`FromStr`] takes.
    pub const fn name(self) -> &'static str {
        match self {
            Layout::CubeMars => "cubemars",
            Layout::Damiao => "damiao",
        }
    }

    /// Whether [`Feedback::error`] as this layout reports it means a fault. CubeMars:
    /// any nonzero code. Damiao: the state nibble is also nonzero while healthy (1 =
    /// enabled), so 0 and 1 are not faults.
    pub const fn is_fault(self, error: u8) -> bool {
        match self {
            Layout::CubeMars => error != 0,
            Layout::Damiao => error > 1,
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Layout {
    type Err = String;

    /// `cubemars` or `damiao`, in any case; the error lists the names.
    fn from_str(s: &str) -> Result<Layout, String> {
        Layout::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Layout::ALL.iter().map(|l| l.name()).collect();
                format!(
                    "unknown MIT reply layout `{s}`; expected one of: {}",
                    names.join(", ")
                )
            })
    }
}

/// How a motor's frames go on the bus: Classical CAN, or CAN FD with the same 8-byte
/// payloads (Damiao on an FD bus; see the [module docs](self#can-fd-damiao)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Framing {
    /// Classical CAN frames (every MIT motor).
    #[default]
    Classic,
    /// CAN FD frames, DLC 8; `brs`: the data phase at the data bit rate (bit-rate
    /// switching, as OpenArm sends them) or at the nominal rate throughout.
    Fd {
        /// Bit-rate switching.
        brs: bool,
    },
}

impl Framing {
    /// `frame` (a Classical frame of 8 bytes or fewer, as every builder here makes) as
    /// this framing sends it: unchanged for [`Framing::Classic`], else the same identifier
    /// and payload in an FD frame (with BRS when `brs`).
    pub fn apply(self, frame: Frame) -> Frame {
        match self {
            Framing::Classic => frame,
            // 0..=8 bytes are all legal FD lengths: this cannot fail for our frames, and
            // a frame that could not be an FD frame is left as it was.
            Framing::Fd { brs } => match Frame::fd(frame.id(), frame.data()) {
                Ok(fd) if brs => fd,
                Ok(fd) => fd.without_brs(),
                Err(_) => frame,
            },
        }
    }

    /// Whether these are CAN FD frames.
    pub const fn is_fd(self) -> bool {
        matches!(self, Framing::Fd { .. })
    }

    /// The kind of link these frames need.
    pub const fn mtu(self) -> Mtu {
        match self {
            Framing::Classic => Mtu::Classic,
            Framing::Fd { .. } => Mtu::Fd,
        }
    }
}

impl fmt::Display for Framing {
    /// `classic`, `fd`, `fd without brs`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Framing::Classic => "classic",
            Framing::Fd { brs: true } => "fd",
            Framing::Fd { brs: false } => "fd without brs",
        })
    }
}

/// The largest integer of a `bits`-wide field; `bits` is taken as 1..=32 so that no
/// input can overflow a shift.
fn top(bits: u32) -> u64 {
    (1u64 << bits.clamp(1, 32)) - 1
}

/// Maps `x` from `[min, max]` onto `0..=2^bits − 1`: `(x − min)·(2^bits − 1)/(max − min)`,
/// truncated toward zero like the C `(int)` cast of the firmware and every vendor
/// example. `x` is clamped into the range first (CubeMars and Damiao examples clamp;
/// unclamped, a value out of range would wrap into another field's bits). NaN maps to 0
/// (`min`), and so does everything when `max <= min`: a defined, harmless code rather
/// than a panic. `bits` is taken as 1..=32. Computed in `f64`, so the result does not
/// depend on `f32` rounding of the intermediate product.
pub fn float_to_uint(x: f32, min: f32, max: f32, bits: u32) -> u32 {
    let top = top(bits);
    let (x, min, max) = (f64::from(x), f64::from(min), f64::from(max));
    // Not `max > min` (an empty or reversed range, or a NaN bound).
    if x.is_nan() || max.partial_cmp(&min) != Some(core::cmp::Ordering::Greater) {
        return 0;
    }
    let x = x.clamp(min, max);
    let scaled = ((x - min) * top as f64 / (max - min)).trunc();
    // The clamp above keeps `scaled` in 0..=top except for rounding at the very top
    // (and infinite bounds, where it is NaN); `as` saturates and maps NaN to 0.
    (scaled as u64).min(top) as u32
}

/// Maps `v` from `0..=2^bits − 1` back onto `[min, max]`: `v·(max − min)/(2^bits − 1) + min`.
/// A `v` above the top code counts as the top code. The inverse of [`float_to_uint`]
/// to within one step, `(max − min)/(2^bits − 1)`.
pub fn uint_to_float(v: u32, min: f32, max: f32, bits: u32) -> f32 {
    let top = top(bits);
    let v = u64::from(v).min(top) as f64;
    let (min, max) = (f64::from(min), f64::from(max));
    (v * (max - min) / top as f64 + min) as f32
}

/// A standard identifier from the low 11 bits of `id` (callers pass motor ids, which
/// configuration keeps within 0..=0x7FF).
fn standard(id: u16) -> CanId {
    CanId::Standard(id & CanId::STANDARD_MAX)
}

fn classic(id: u16, data: &[u8]) -> Frame {
    // 8 bytes or fewer by construction.
    Frame::classic(standard(id), data).expect("MIT frames are at most 8 bytes")
}

/// The MIT command for motor `id` (its CAN id; MyActuator RMD: `0x400 + id`), each value
/// clamped into `ranges` (see [`float_to_uint`]).
pub fn command(id: u16, ranges: &Ranges, cmd: &Command) -> Frame {
    let p = float_to_uint(cmd.position, ranges.p_min, ranges.p_max, 16);
    let v = float_to_uint(cmd.velocity, ranges.v_min, ranges.v_max, 12);
    let kp = float_to_uint(cmd.kp, ranges.kp_min, ranges.kp_max, 12);
    let kd = float_to_uint(cmd.kd, ranges.kd_min, ranges.kd_max, 12);
    let t = float_to_uint(cmd.torque, ranges.t_min, ranges.t_max, 12);
    let data = [
        (p >> 8) as u8,
        p as u8,
        (v >> 4) as u8,
        (((v & 0xF) << 4) | (kp >> 8)) as u8,
        kp as u8,
        (kd >> 4) as u8,
        (((kd & 0xF) << 4) | (t >> 8)) as u8,
        t as u8,
    ];
    classic(id, &data)
}

/// Last byte of the special frame that enters motor mode.
pub const ENTER: u8 = 0xFC;
/// Last byte of the special frame that exits motor mode.
pub const EXIT: u8 = 0xFD;
/// Last byte of the special frame that sets the current position as zero.
pub const SET_ZERO: u8 = 0xFE;
/// Last byte of the special frame that clears an error (Damiao).
pub const CLEAR_ERROR: u8 = 0xFB;

fn special(id: u16, code: u8) -> Frame {
    classic(id, &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, code])
}

/// Enter motor mode (`…FC`): the motor starts obeying commands. CubeMars also answers it
/// with a reply when only the state is wanted.
pub fn enter(id: u16) -> Frame {
    special(id, ENTER)
}

/// Exit motor mode (`…FD`): the motor stops applying torque.
pub fn exit(id: u16) -> Frame {
    special(id, EXIT)
}

/// Set the current position as zero (`…FE`).
pub fn set_zero(id: u16) -> Frame {
    special(id, SET_ZERO)
}

/// Clear an error (`…FB`). Damiao only: CubeMars and the Mini Cheetah firmware know no
/// such frame and would take these bytes as a command with every value near its top, so
/// send it only to a Damiao.
pub fn clear_error(id: u16) -> Frame {
    special(id, CLEAR_ERROR)
}

/// A motor's state, decoded from its reply.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Feedback {
    /// The motor id the reply carries: 8 bits (CubeMars), the low 4 bits of the CAN id
    /// (Damiao).
    pub motor: u8,
    /// Position, rad.
    pub position: f32,
    /// Velocity, rad/s.
    pub velocity: f32,
    /// Torque, N·m (the motor's estimate from its current).
    pub torque: f32,
    /// Motor temperature, °C: CubeMars byte 6 − 40; Damiao the rotor temperature
    /// (byte 7; [`damiao_temperatures`] has the MOS one too); `None` from a 6-byte
    /// Mini Cheetah reply.
    pub temperature: Option<f32>,
    /// CubeMars: the error code (0 none, 1 over-temperature, 2 over-current,
    /// 3 over-voltage, 4 under-voltage, 5 encoder, 6 MOSFET over-temperature, 7 stall;
    /// 0 from a 6-byte Mini Cheetah reply). Damiao: the state nibble (see
    /// [`Layout::Damiao`]). [`Layout::is_fault`] says which values are faults.
    pub error: u8,
}

/// The 16+12+12 bits of bytes 1..=5 of a reply.
fn unpack_pvt(d: &[u8], ranges: &Ranges) -> (f32, f32, f32) {
    let p = (u32::from(d[1]) << 8) | u32::from(d[2]);
    let v = (u32::from(d[3]) << 4) | (u32::from(d[4]) >> 4);
    let t = ((u32::from(d[4]) & 0xF) << 8) | u32::from(d[5]);
    (
        uint_to_float(p, ranges.p_min, ranges.p_max, 16),
        uint_to_float(v, ranges.v_min, ranges.v_max, 12),
        uint_to_float(t, ranges.t_min, ranges.t_max, 12),
    )
}

/// A standard-id frame's payload, or `None` for an extended one. FD frames are taken
/// too, with or without BRS: Damiao motors on an FD bus send the same payload in an FD
/// frame of DLC 8 ([`Framing`]).
fn standard_payload(frame: &Frame) -> Option<(u16, &[u8])> {
    match frame.id() {
        CanId::Standard(id) => Some((id, frame.data())),
        CanId::Extended(_) => None,
    }
}

/// Decodes a motor's reply laid out as `layout`, or `None` for a frame that cannot be
/// one: an extended identifier, or a length other than 8 (CubeMars also 6, the Mini
/// Cheetah firmware's). The identifier is not checked (it is the master's, shared by
/// every motor answering it); [`Feedback::motor`] says which motor spoke. Never panics.
pub fn decode_reply(frame: &Frame, layout: Layout, ranges: &Ranges) -> Option<Feedback> {
    let (_, d) = standard_payload(frame)?;
    match (layout, d.len()) {
        (Layout::CubeMars, 6) | (Layout::CubeMars, 8) | (Layout::Damiao, 8) => {}
        _ => return None,
    }
    let (position, velocity, torque) = unpack_pvt(d, ranges);
    let (motor, temperature, error) = match layout {
        Layout::CubeMars if d.len() == 6 => (d[0], None, 0),
        Layout::CubeMars => (d[0], Some(f32::from(d[6]) - 40.0), d[7]),
        Layout::Damiao => (d[0] & 0xF, Some(f32::from(d[7])), d[0] >> 4),
    };
    Some(Feedback {
        motor,
        position,
        velocity,
        torque,
        temperature,
        error,
    })
}

/// A Damiao reply's two temperatures, (MOS, rotor) in °C, read as unsigned bytes (as
/// `enactic/openarm_can` reads them; a sign would turn a hot rotor into a cold one), or
/// `None` for a frame [`decode_reply`] would refuse.
pub fn damiao_temperatures(frame: &Frame) -> Option<(f32, f32)> {
    let (_, d) = standard_payload(frame)?;
    (d.len() == 8).then(|| (f32::from(d[6]), f32::from(d[7])))
}

/// What a master asked of a motor: one frame it sent, decoded.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Request {
    /// An MIT command (values as quantized on the wire).
    Command(Command),
    /// Enter motor mode (`…FC`).
    Enter,
    /// Exit motor mode (`…FD`).
    Exit,
    /// Set the current position as zero (`…FE`).
    SetZero,
    /// Clear an error (`…FB`, Damiao).
    ClearError,
}

/// Decodes a frame a master sent to a motor: `(motor id, request)`, or `None` for a
/// frame that is not one (extended identifier, length other than 8). Special frames are
/// recognized first, as the firmware does; every other 8-byte frame is a command. For
/// the simulated motor; never panics.
pub fn decode_request(frame: &Frame, ranges: &Ranges) -> Option<(u16, Request)> {
    let (id, d) = standard_payload(frame)?;
    if d.len() != 8 {
        return None;
    }
    if d[..7].iter().all(|&b| b == 0xFF) {
        let special = match d[7] {
            ENTER => Some(Request::Enter),
            EXIT => Some(Request::Exit),
            SET_ZERO => Some(Request::SetZero),
            CLEAR_ERROR => Some(Request::ClearError),
            _ => None,
        };
        if let Some(r) = special {
            return Some((id, r));
        }
    }
    let p = (u32::from(d[0]) << 8) | u32::from(d[1]);
    let v = (u32::from(d[2]) << 4) | (u32::from(d[3]) >> 4);
    let kp = ((u32::from(d[3]) & 0xF) << 8) | u32::from(d[4]);
    let kd = (u32::from(d[5]) << 4) | (u32::from(d[6]) >> 4);
    let t = ((u32::from(d[6]) & 0xF) << 8) | u32::from(d[7]);
    let cmd = Command {
        position: uint_to_float(p, ranges.p_min, ranges.p_max, 16),
        velocity: uint_to_float(v, ranges.v_min, ranges.v_max, 12),
        kp: uint_to_float(kp, ranges.kp_min, ranges.kp_max, 12),
        kd: uint_to_float(kd, ranges.kd_min, ranges.kd_max, 12),
        torque: uint_to_float(t, ranges.t_min, ranges.t_max, 12),
    };
    Some((id, Request::Command(cmd)))
}

/// A temperature as one byte: `°C + offset`, rounded and clamped to 0..=255 (NaN → 0).
fn temperature_byte(celsius: f32, offset: f32) -> u8 {
    // `as` saturates and maps NaN to 0.
    (celsius + offset).round() as u8
}

/// The reply a motor sends to `master_id` (what the simulated motor sends).
///
/// CubeMars: byte 0 = `fb.motor`, byte 6 = temperature + 40, byte 7 = `fb.error`; with
/// no temperature and no error, the 6-byte reply of the Mini Cheetah firmware instead
/// (so that it decodes back to the same [`Feedback`]); with an error but no
/// temperature, byte 6 says 0 °C. Damiao: byte 0 = (`fb.error` << 4) | (`fb.motor` &
/// 0xF), and the temperature (no temperature: 0 °C) in both byte 6 (MOS) and byte 7
/// (rotor), as a motor with one temperature would.
pub fn reply(master_id: u16, layout: Layout, ranges: &Ranges, fb: &Feedback) -> Frame {
    let p = float_to_uint(fb.position, ranges.p_min, ranges.p_max, 16);
    let v = float_to_uint(fb.velocity, ranges.v_min, ranges.v_max, 12);
    let t = float_to_uint(fb.torque, ranges.t_min, ranges.t_max, 12);
    let mut data = [
        0,
        (p >> 8) as u8,
        p as u8,
        (v >> 4) as u8,
        (((v & 0xF) << 4) | (t >> 8)) as u8,
        t as u8,
        0,
        0,
    ];
    match layout {
        Layout::CubeMars => {
            data[0] = fb.motor;
            if fb.temperature.is_none() && fb.error == 0 {
                return classic(master_id, &data[..6]);
            }
            data[6] = temperature_byte(fb.temperature.unwrap_or(0.0), 40.0);
            data[7] = fb.error;
        }
        Layout::Damiao => {
            data[0] = (fb.error << 4) | (fb.motor & 0xF);
            let temp = temperature_byte(fb.temperature.unwrap_or(0.0), 0.0);
            data[6] = temp;
            data[7] = temp;
        }
    }
    classic(master_id, &data)
}

// ---------------------------------------------------------------------------------------
// Damiao registers
// ---------------------------------------------------------------------------------------

/// The standard identifier every Damiao register frame goes to, whichever the motor
/// (`enactic/openarm_can`, `include/openarm/damiao_motor/dm_motor_control.hpp`, the
/// tables above `pack_query_param_data` and `pack_write_param_data`; `cmjang/DM_Control_Python`,
/// `DM_CAN.py`, `__read_RID_param` and `__write_motor_param`). fcan never uses standard
/// identifiers from `0x400` up (docs/protocol.md §2: data identifiers are
/// `0x100..=0x3FF`), so it is free.
pub const REGISTER_ID: u16 = 0x7FF;
/// Byte 2 of a register read (and of the motor's answer to one).
pub const REGISTER_READ: u8 = 0x33;
/// Byte 2 of a register write (and of the motor's answer to one).
pub const REGISTER_WRITE: u8 = 0x55;
/// Damiao register 9, `TIMEOUT`: the motor's command timeout, a `u32` count, 0 = off
/// (`DM_variable.TIMEOUT = 9` of `DM_CAN.py`, `RID::TIMEOUT = 9` of openarm_can's
/// `dm_motor_constants.hpp`; "Timeout Alarm Time, RW, [0, 2^32-1], uint32" in
/// DM_Control_Python's register table). A motor that times out reports state `0xD`,
/// lost communication. The unit of a count is not settled by a Damiao document we
/// could read: see [`TIMEOUT_COUNTS_PER_MS`].
pub const RID_TIMEOUT: u8 = 9;
/// How many `TIMEOUT` counts make a millisecond, as the driver writes them: 20, a count
/// of 50 µs (`jia-xie/python-damiao-driver`, `damiao_motor/core/motor.py`: "1 unit = 50
/// microseconds", `set_can_timeout` writes `timeout_ms × 20`; a summary of Synria's
/// Gloria-M documentation says the same), whereas another Damiao register table gives
/// milliseconds. Written as 50 µs counts, a firmware that counts milliseconds times
/// out 20 times **later** than asked — still armed, never sooner: a watchdog that fired
/// too soon would stop a healthy motor between two commands.
pub const TIMEOUT_COUNTS_PER_MS: u32 = 20;

/// The Damiao state a motor reports once its command timeout expired: `0xD`, lost
/// communication (see [`Layout::Damiao`]). It stays until a clear-error frame
/// ([`clear_error`]).
pub const LOST_COMMUNICATION: u8 = 0xD;

/// A Damiao register frame, as the master sends it or the motor answers it:
/// `[id lo, id hi, op, RID, value (4 bytes, little-endian)]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Register {
    /// The motor's CAN id (bytes 0–1, little-endian).
    pub motor: u16,
    /// [`REGISTER_READ`] or [`REGISTER_WRITE`].
    pub op: u8,
    /// The register id.
    pub rid: u8,
    /// Bytes 4–7: the value (a `u32` or an `f32`, little-endian; zero in a read).
    pub value: [u8; 4],
}

impl Register {
    /// The value as the `u32` registers hold it (`TIMEOUT`, `MST_ID` …).
    pub fn value_u32(&self) -> u32 {
        u32::from_le_bytes(self.value)
    }

    fn bytes(&self) -> [u8; 8] {
        let [lo, hi] = self.motor.to_le_bytes();
        let [a, b, c, d] = self.value;
        [lo, hi, self.op, self.rid, a, b, c, d]
    }
}

/// Writes `value` into register `rid` of motor `id` (its CAN id): `0x7FF`,
/// `[id lo, id hi, 0x55, rid, value LE]`. The motor answers on its master id with the
/// same layout (`0x55`).
pub fn register_write(id: u16, rid: u8, value: u32) -> Frame {
    let r = Register {
        motor: id,
        op: REGISTER_WRITE,
        rid,
        value: value.to_le_bytes(),
    };
    classic(REGISTER_ID, &r.bytes())
}

/// Reads register `rid` of motor `id`: `0x7FF`, `[id lo, id hi, 0x33, rid, 0, 0, 0, 0]`.
/// The motor answers on its master id with `[id lo, id hi, 0x33, rid, value LE]`.
pub fn register_read(id: u16, rid: u8) -> Frame {
    let r = Register {
        motor: id,
        op: REGISTER_READ,
        rid,
        value: [0; 4],
    };
    classic(REGISTER_ID, &r.bytes())
}

fn register_of(d: &[u8]) -> Option<Register> {
    if d.len() != 8 || !matches!(d[2], REGISTER_READ | REGISTER_WRITE) {
        return None;
    }
    Some(Register {
        motor: u16::from_le_bytes([d[0], d[1]]),
        op: d[2],
        rid: d[3],
        value: [d[4], d[5], d[6], d[7]],
    })
}

/// Decodes a register request a master sent (for the simulated motor): a standard
/// frame to [`REGISTER_ID`] of 8 bytes with byte 2 `0x33` or `0x55`, or `None`. Never
/// panics.
pub fn decode_register_request(frame: &Frame) -> Option<Register> {
    match standard_payload(frame)? {
        (REGISTER_ID, d) => register_of(d),
        _ => None,
    }
}

/// Decodes `frame` as a motor's answer to a register frame: 8 bytes, byte 2 `0x33` or
/// `0x55` (openarm_can's `parse_motor_param_data` checks exactly this). The identifier is
/// not checked (it is the master id, shared with the MIT replies).
///
/// **The layout alone cannot tell a register answer from an MIT reply**: a reply whose
/// position bits put `0x33` or `0x55` in byte 2 decodes here too. openarm_can tells them
/// apart by what it asked (its device's callback mode, `STATE` or `PARAM`); so does the
/// driver: it takes a frame as a register answer only while it waits for one, from its
/// own motor (bytes 0–1), for the register it asked. Never panics.
pub fn decode_register_reply(frame: &Frame) -> Option<Register> {
    let (_, d) = standard_payload(frame)?;
    register_of(d)
}

/// The answer a Damiao motor whose master id is `master_id` sends to register frame `r`
/// (what the simulated motor sends): `r`'s layout, with `value`.
pub fn register_reply(master_id: u16, r: &Register, value: u32) -> Frame {
    let r = Register {
        value: value.to_le_bytes(),
        ..*r
    };
    classic(master_id, &r.bytes())
}
