//! RobStride models and their parameters.
//!
//! Ranges come from each model's English user manual (RobStride/Product_Information,
//! "Product Literature/RSxx/RSxxUser Manual260428.pdf", §4.1.2 and the §4.4 sample
//! `#define`s, which agree with each other in every manual). Where other documents
//! differ we keep the manual and say so here and in `conformance/robstride/README.md`:
//!
//! - Position: ±12.57 rad (the manuals' `P_MAX 12.57f`, the "-4π..4π" of their tables
//!   rounded up). The official STM32 sample program still has ±12.5, which the RS00
//!   manual says was the range before firmware 0.0.2.6.
//! - RS02: ±44 rad/s and ±17 N·m as its manual's type 1/type 2 tables and `#define`s say
//!   (and its 410 rpm no-load speed); the same manual's parameter table gives RS00's
//!   ±33 rad/s, 0..14 N·m and ±16 A, apparently copied. We keep its ±16 A current since
//!   no other figure is documented.

use core::str::FromStr;

use super::wire::Ranges;

/// A RobStride actuator model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Model {
    /// RS00: ±33 rad/s, ±14 N·m.
    Rs00,
    /// RS01: ±44 rad/s, ±17 N·m.
    Rs01,
    /// RS02: ±44 rad/s, ±17 N·m.
    Rs02,
    /// RS03: ±20 rad/s, ±60 N·m.
    Rs03,
    /// RS04: ±15 rad/s, ±120 N·m.
    Rs04,
    /// RS05: ±50 rad/s, ±5.5 N·m.
    Rs05,
    /// RS06: ±50 rad/s, ±36 N·m.
    Rs06,
}

/// The position range every model quantizes over, rad (the manuals' `P_MAX`).
pub const POSITION_RANGE: f32 = 12.57;

impl Model {
    /// Every model, in order.
    pub const ALL: [Model; 7] = [
        Model::Rs00,
        Model::Rs01,
        Model::Rs02,
        Model::Rs03,
        Model::Rs04,
        Model::Rs05,
        Model::Rs06,
    ];

    /// The model's name as RobStride writes it (`"RS03"`).
    pub fn name(self) -> &'static str {
        match self {
            Model::Rs00 => "RS00",
            Model::Rs01 => "RS01",
            Model::Rs02 => "RS02",
            Model::Rs03 => "RS03",
            Model::Rs04 => "RS04",
            Model::Rs05 => "RS05",
            Model::Rs06 => "RS06",
        }
    }

    /// The model's quantization ranges for type 1 commands and type 2 feedback.
    pub fn ranges(self) -> Ranges {
        // (velocity rad/s, torque N·m, Kp max, Kd max), from each model's manual.
        let (velocity, torque, kp, kd) = match self {
            Model::Rs00 => (33.0, 14.0, 500.0, 5.0),
            Model::Rs01 => (44.0, 17.0, 500.0, 5.0),
            Model::Rs02 => (44.0, 17.0, 500.0, 5.0),
            Model::Rs03 => (20.0, 60.0, 5000.0, 100.0),
            Model::Rs04 => (15.0, 120.0, 5000.0, 100.0),
            Model::Rs05 => (50.0, 5.5, 500.0, 5.0),
            Model::Rs06 => (50.0, 36.0, 5000.0, 100.0),
        };
        Ranges {
            position: POSITION_RANGE,
            velocity,
            torque,
            kp,
            kd,
        }
    }

    /// The largest q-axis current, A (the `iq_ref` range in each manual's parameter
    /// table); with [`Ranges::torque`] it gives the simulated motor's torque constant.
    pub fn current_limit(self) -> f32 {
        match self {
            Model::Rs00 => 16.0,
            Model::Rs01 => 23.0,
            Model::Rs02 => 16.0,
            Model::Rs03 => 43.0,
            Model::Rs04 => 90.0,
            Model::Rs05 => 11.0,
            Model::Rs06 => 57.0,
        }
    }

    /// The documented range of parameter `p` on this model: [`ParamInfo::min`] and
    /// [`ParamInfo::max`], with the model-dependent bounds (velocity, torque, current)
    /// filled in from this model's ranges.
    pub fn param_range(self, p: &ParamInfo) -> (f32, f32) {
        let r = self.ranges();
        let i = self.current_limit();
        match p.index {
            IQ_REF | IQF => (-i, i),
            LIMIT_CUR => (0.0, i),
            SPD_REF | MECH_VEL => (-r.velocity, r.velocity),
            LIMIT_SPD => (0.0, r.velocity),
            LIMIT_TORQUE => (0.0, r.torque),
            _ => (p.min, p.max),
        }
    }
}

impl core::fmt::Display for Model {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Model {
    type Err = String;

    /// `"RS03"` or `"rs03"`; the error lists the models.
    fn from_str(s: &str) -> Result<Model, String> {
        Model::ALL
            .iter()
            .copied()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Model::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown RobStride model {s:?}; known models: {}",
                    names.join(", ")
                )
            })
    }
}

/// How a parameter's value sits in bytes 4..8 of types 17 and 18 (little-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// One byte, in byte 4.
    U8,
    /// Two bytes, in bytes 4-5.
    U16,
    /// Four bytes.
    U32,
    /// IEEE-754 single precision.
    F32,
}

/// One entry of the manuals' "read and write a single parameter list" (§4.1.13).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamInfo {
    /// Index (bytes 0-1 of types 17 and 18).
    pub index: u16,
    /// The manuals' name.
    pub name: &'static str,
    /// Value type.
    pub ty: ParamType,
    /// Whether type 18 may write it (the table's "W/R"; "R" is read-only).
    pub writable: bool,
    /// Documented lower bound; `-inf` when none is documented, or when it depends on the
    /// model (then see [`Model::param_range`]).
    pub min: f32,
    /// Documented upper bound; `inf` likewise.
    pub max: f32,
    /// Unit (empty for plain numbers and codes).
    pub unit: &'static str,
}

/// `run_mode` (0x7005).
pub const RUN_MODE: u16 = 0x7005;
/// `iq_ref` (0x7006).
pub const IQ_REF: u16 = 0x7006;
/// `spd_ref` (0x700A).
pub const SPD_REF: u16 = 0x700A;
/// `limit_torque` (0x700B).
pub const LIMIT_TORQUE: u16 = 0x700B;
/// `loc_ref` (0x7016).
pub const LOC_REF: u16 = 0x7016;
/// `limit_spd` (0x7017).
pub const LIMIT_SPD: u16 = 0x7017;
/// `limit_cur` (0x7018).
pub const LIMIT_CUR: u16 = 0x7018;
/// `mechPos` (0x7019).
pub const MECH_POS: u16 = 0x7019;
/// `iqf` (0x701A).
pub const IQF: u16 = 0x701A;
/// `mechVel` (0x701B).
pub const MECH_VEL: u16 = 0x701B;
/// `VBUS` (0x701C).
pub const VBUS: u16 = 0x701C;
/// `acc_rad` (0x7022).
pub const ACC_RAD: u16 = 0x7022;
/// `vel_max` (0x7024).
pub const VEL_MAX: u16 = 0x7024;
/// `EPScan_time` (0x7026).
pub const EPSCAN_TIME: u16 = 0x7026;
/// `canTimeout` (0x7028).
pub const CAN_TIMEOUT: u16 = 0x7028;
/// `zero_sta` (0x7029).
pub const ZERO_STA: u16 = 0x7029;

/// `run_mode` value: operation control (MIT-style type 1 commands; the power-on mode).
pub const RUN_MODE_MOTION: u8 = 0;
/// `run_mode` value: position mode PP (profile position: `vel_max`, `acc_set`).
pub const RUN_MODE_PP: u8 = 1;
/// `run_mode` value: velocity mode.
pub const RUN_MODE_VELOCITY: u8 = 2;
/// `run_mode` value: current mode.
pub const RUN_MODE_CURRENT: u8 = 3;
/// `run_mode` value: position mode CSP (cyclic synchronous position: `limit_spd`).
pub const RUN_MODE_CSP: u8 = 5;

const INF: f32 = f32::INFINITY;
const NINF: f32 = f32::NEG_INFINITY;

const fn p(
    index: u16,
    name: &'static str,
    ty: ParamType,
    writable: bool,
    min: f32,
    max: f32,
    unit: &'static str,
) -> ParamInfo {
    ParamInfo {
        index,
        name,
        ty,
        writable,
        min,
        max,
        unit,
    }
}

use ParamType::{F32, U16, U32, U8};

/// The parameter table of the manuals (§4.1.13, identical across RS00–RS06 apart from
/// the model-dependent ranges), in index order. `run_mode`'s values are
/// [`RUN_MODE_MOTION`] and the other `RUN_MODE_*` (4 is not a run mode: the sample
/// program uses it for zeroing); `EPScan_time` 1 is 10 ms and each step adds 5 ms;
/// `canTimeout` counts 50 µs (20000 = 1 s, 0 = off); `zero_sta` 0 puts the power-on
/// angle in 0..2π, 1 in −π..π.
pub const PARAMS: &[ParamInfo] = &[
    p(RUN_MODE, "run_mode", U8, true, 0.0, 5.0, ""),
    p(IQ_REF, "iq_ref", F32, true, NINF, INF, "A"),
    p(SPD_REF, "spd_ref", F32, true, NINF, INF, "rad/s"),
    p(LIMIT_TORQUE, "limit_torque", F32, true, 0.0, INF, "Nm"),
    p(0x7010, "cur_kp", F32, true, 0.0, INF, ""),
    p(0x7011, "cur_ki", F32, true, 0.0, INF, ""),
    p(0x7014, "cur_filt_gain", F32, true, 0.0, 1.0, ""),
    p(LOC_REF, "loc_ref", F32, true, NINF, INF, "rad"),
    p(LIMIT_SPD, "limit_spd", F32, true, 0.0, INF, "rad/s"),
    p(LIMIT_CUR, "limit_cur", F32, true, 0.0, INF, "A"),
    p(MECH_POS, "mechPos", F32, false, NINF, INF, "rad"),
    p(IQF, "iqf", F32, false, NINF, INF, "A"),
    p(MECH_VEL, "mechVel", F32, false, NINF, INF, "rad/s"),
    p(VBUS, "VBUS", F32, false, NINF, INF, "V"),
    p(0x701E, "loc_kp", F32, true, 0.0, INF, ""),
    p(0x701F, "spd_kp", F32, true, 0.0, INF, ""),
    p(0x7020, "spd_ki", F32, true, 0.0, INF, ""),
    p(0x7021, "spd_filt_gain", F32, true, 0.0, 1.0, ""),
    p(ACC_RAD, "acc_rad", F32, true, 0.0, INF, "rad/s^2"),
    p(VEL_MAX, "vel_max", F32, true, 0.0, INF, "rad/s"),
    p(0x7025, "acc_set", F32, true, 0.0, INF, "rad/s^2"),
    p(EPSCAN_TIME, "EPScan_time", U16, true, 1.0, 65535.0, ""),
    p(
        CAN_TIMEOUT,
        "canTimeout",
        U32,
        true,
        0.0,
        4_294_967_295.0,
        "",
    ),
    p(ZERO_STA, "zero_sta", U8, true, 0.0, 1.0, ""),
    p(0x702A, "damper", U8, true, 0.0, 1.0, ""),
    p(0x702B, "add_offset", F32, true, NINF, INF, "rad"),
    p(0x702C, "alveolous_open", U8, true, 0.0, 1.0, ""),
    p(0x702D, "iq_test", U8, true, 0.0, 1.0, ""),
    p(0x702E, "dcc_set", F32, true, 0.0, INF, "rad/s^2"),
];

/// The table entry for `index`.
pub fn param(index: u16) -> Option<&'static ParamInfo> {
    PARAMS.iter().find(|p| p.index == index)
}

/// The table entry named `name` (exact spelling, e.g. `"mechPos"`, or any case).
pub fn param_named(name: &str) -> Option<&'static ParamInfo> {
    PARAMS
        .iter()
        .find(|p| p.name == name)
        .or_else(|| PARAMS.iter().find(|p| p.name.eq_ignore_ascii_case(name)))
}

impl ParamInfo {
    /// `value` (bytes 4..8 of a type 17 answer) as a number, by this parameter's type.
    pub fn decode_value(&self, value: [u8; 4]) -> f64 {
        match self.ty {
            ParamType::U8 => f64::from(value[0]),
            ParamType::U16 => f64::from(u16::from_le_bytes([value[0], value[1]])),
            ParamType::U32 => f64::from(u32::from_le_bytes(value)),
            ParamType::F32 => f64::from(f32::from_le_bytes(value)),
        }
    }

    /// `x` as bytes 4..8 of a type 18 write, by this parameter's type; integers are
    /// rounded and saturated (NaN gives 0).
    pub fn encode_value(&self, x: f64) -> [u8; 4] {
        match self.ty {
            ParamType::U8 => super::wire::value_u8(x.round() as u8),
            ParamType::U16 => super::wire::value_u16(x.round() as u16),
            ParamType::U32 => super::wire::value_u32(x.round() as u32),
            ParamType::F32 => super::wire::value_f32(x as f32),
        }
    }
}
