//! The CiA 402 driver: one CANopen drive (CiA 301 + CiA 402) as an fcan node of the
//! shipped schema (`fcan-drivers/schemas/cia402.yaml`).
//!
//! **Bring-up** (it never hangs: every step is bounded and named by a [`BootStep`]):
//! wait for the drive's boot-up or heartbeat (an NMT *reset communication* every
//! [`WAIT_US`] while it is silent) → NMT pre-operational → SDO: read 0x608F / 0x6091
//! (unless `counts=` / `gear=` say them), write the heartbeat producer 0x1017, the
//! heartbeat consumer 0x1016 sub 1 (the command watchdog), 0x6007, the mode 0x6060,
//! 0x60C2 (cyclic modes), disable the predefined PDOs that sit on fcan's data plane, map
//! RPDO A / TPDO A / TPDO B ([`super::wire`] names their COB-IDs) → NMT start. Each SDO
//! has [`SDO_TIMEOUT_US`] and [`SDO_TRIES`] tries; a failure stops the bring-up with a
//! warning naming the drive, the object (`index:sub` and its name) and the abort code's
//! name, and the whole bring-up is tried again after [`BOOT_RETRY_US`]. An object the
//! EDS says the drive lacks is skipped when it is optional (0x1016, 0x6007, 0x60C2, the
//! PDOs 3–4) and stops the bring-up when it is not.
//!
//! **Running**: the driver is the SYNC producer (`sync_ms`); after each SYNC it sends
//! RPDO A (controlword and the mode's target); the drive's TPDOs (one per SYNC each)
//! become the `status` topic. Several drives on one bus take one producer: the others
//! get `sync=off` (no SYNC; RPDO A still every `sync_ms`, their TPDOs on the producer's
//! SYNC). Once started (its drive's first bring-up, or the master starting the node), a
//! producer sends SYNC in every phase of its own drive (offline, bring-up, failed,
//! running), since the other drives depend on it. The
//! driver's own heartbeat (on `0x700 + master`) feeds the drive's consumer, which is its
//! command watchdog: when the bus owner dies the drive applies 0x6007 (2 disable voltage,
//! or 3 quick stop). On `MasterLost` the driver stops sending (SYNC, RPDO, heartbeat) so
//! the drive's own watchdog acts.
//!
//! **Presence**: the node runs from NMT start while the drive's heartbeat comes; silent
//! for 3 × `heartbeat_ms` it is gone (its node goes offline), and any heartbeat after
//! that (a boot-up, or a drive that only paused) runs the bring-up again.
//!
//! **Units**: position rad ↔ increments with `counts` (increments per motor revolution,
//! 0x608F) and `gear` (motor revolutions per shaft revolution, 0x6091); velocity rad/s ↔
//! increments per second (CiA 402's default velocity unit; 0x60A9 factors are not read);
//! torque is per-mille of rated torque, as 0x6071 and 0x6077 are.
//!
//! **Faults**: a drive in Fault, or an EMCY with a nonzero code, latches `error_code` of
//! the `status` topic (the cycle API's device fault: a `code` fault field, `ok: [0]`)
//! until a successful `fault_reset`. Every EMCY is published on `emcy` and logged.

use fcan_core::frame::Frame;
use fcan_core::id::NodeId;

use super::eds::Eds;
use super::sdo::{SdoClient, Step};
use super::state::{self, Goal, Next, State};
use super::wire::{self, NmtCommand, NmtState};
use crate::device::{Device, Io, NodeEvent, Served, Watchdog};
use crate::message::{refuse_once, Message, Missing, Slot};
use crate::spec::{DeviceSpec, SpecError};

/// The schema the driver ships, compiled at build time.
pub const BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cia402.bin"));

/// The driver, as [`crate::registry::DRIVERS`] lists it.
pub const DRIVER: crate::registry::Driver = crate::registry::Driver {
    name: "cia402",
    about: "CANopen CiA 402 drives (CiA 301 SDO/PDO/NMT, 11-bit ids; pp, pv, csp, csv, cst)",
    keys: &[
        "id",
        "eds",
        "mode",
        "node",
        "name",
        "sync_ms",
        "sync",
        "heartbeat_ms",
        "master",
        "watchdog_ms",
        "watchdog",
        "counts",
        "gear",
    ],
    from_spec: |spec| Ok(Box::new(Cia402::from_spec(spec)?)),
    simulated: Cia402::simulated,
    blob: BLOB,
    examples: &[
        "cia402:id=5,mode=csp",
        "cia402:id=6,mode=csv,watchdog=off,sync=off,counts=65536,gear=10",
        "cia402:id=7,mode=cst,master=126,sync_ms=5,heartbeat_ms=50,watchdog_ms=100",
    ],
    decode_any: |frame| {
        let _ = wire::decode_nmt(frame);
        let _ = wire::is_sync(frame);
        let _ = wire::decode_heartbeat(frame);
        let _ = wire::decode_emcy(frame);
        let _ = wire::sdo_answer_node(frame);
        let _ = super::sdo::decode_abort(frame.data());
        let _ = wire::decode_tpdo_a(frame.data());
        let _ = wire::decode_tpdo_b(frame.data());
        let mut c = SdoClient::new(1, 1);
        let _ = c.upload(0, 0x6041, 0);
        let _ = c.on_frame(0, frame);
        let mut d = SdoClient::new(1, 1);
        let _ = d.download(0, 0x1600, 1, &[1, 2, 3, 4, 5, 6]);
        let _ = d.on_frame(0, frame);
        let mut od = super::sim::Od::new(&Eds::default_dictionary(), 1);
        let _ = super::sdo::SdoServer::default().on_request(frame.data(), &mut od);
    },
};

/// An SDO request times out after this long.
pub const SDO_TIMEOUT_US: u64 = 100_000;
/// Tries of each SDO before the bring-up fails.
pub const SDO_TRIES: u8 = 3;
/// A silent drive gets an NMT reset communication this often while the driver waits.
pub const WAIT_US: u64 = 1_000_000;
/// A failed bring-up is tried again after this long.
pub const BOOT_RETRY_US: u64 = 2_000_000;
/// A service waits this long for the statusword (below the runtime's 1 s bound).
pub const CONFIRM_US: u64 = 800_000;
/// The largest watchdog 0x1016's 16-bit time holds, ms.
pub const WATCHDOG_MAX_MS: u32 = 65_535;
/// The command watchdog when the spec says nothing, ms (as the other drivers').
pub const WATCHDOG_DEFAULT_MS: u32 = 200;

/// The operation mode (0x6060 values, CiA 402-2 Table "Modes of operation").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Profile position, 1.
    Pp,
    /// Profile velocity, 3.
    Pv,
    /// Cyclic synchronous position, 8.
    Csp,
    /// Cyclic synchronous velocity, 9.
    Csv,
    /// Cyclic synchronous torque, 10.
    Cst,
}

impl Mode {
    /// The 0x6060 value.
    pub fn code(self) -> i8 {
        match self {
            Mode::Pp => 1,
            Mode::Pv => 3,
            Mode::Csp => 8,
            Mode::Csv => 9,
            Mode::Cst => 10,
        }
    }

    /// The mode of a 0x6060 value.
    pub fn of_code(c: i8) -> Option<Mode> {
        Some(match c {
            1 => Mode::Pp,
            3 => Mode::Pv,
            8 => Mode::Csp,
            9 => Mode::Csv,
            10 => Mode::Cst,
            _ => return None,
        })
    }

    /// Whether it is a cyclic synchronous mode (0x60C2 is written for those).
    pub fn cyclic(self) -> bool {
        matches!(self, Mode::Csp | Mode::Csv | Mode::Cst)
    }

    /// The target object RPDO A carries: (index, bits).
    pub fn target(self) -> (u16, u8) {
        match self {
            Mode::Pp | Mode::Csp => (0x607A, 32),
            Mode::Pv | Mode::Csv => (0x60FF, 32),
            Mode::Cst => (0x6071, 16),
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "pp" => Mode::Pp,
            "pv" => Mode::Pv,
            "csp" => Mode::Csp,
            "csv" => Mode::Csv,
            "cst" => Mode::Cst,
            _ => return Err(format!("= {s}: one of pp, pv, csp, csv, cst")),
        })
    }
}

/// A step of the bring-up (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BootStep {
    /// Waiting for the drive's boot-up or heartbeat.
    WaitForDrive,
    /// Reading 0x608F (position encoder resolution).
    EncoderResolution,
    /// Reading 0x6091 (gear ratio).
    GearRatio,
    /// Writing 0x1017.
    HeartbeatProducer,
    /// Writing 0x1016 sub 1.
    HeartbeatConsumer,
    /// Writing 0x6007.
    AbortConnection,
    /// Writing 0x6060.
    Mode,
    /// Writing 0x60C2.
    InterpolationPeriod,
    /// Disabling the predefined PDOs on fcan's data plane.
    DisablePdos,
    /// Mapping RPDO A.
    RpdoA,
    /// Disabling RPDO B.
    RpdoB,
    /// Mapping TPDO A.
    TpdoA,
    /// Mapping TPDO B.
    TpdoB,
    /// NMT start.
    Start,
    /// Brought up: running.
    Running,
}

impl core::fmt::Display for BootStep {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            BootStep::WaitForDrive => "wait for boot-up or heartbeat",
            BootStep::EncoderResolution => "read position encoder resolution (0x608F)",
            BootStep::GearRatio => "read gear ratio (0x6091)",
            BootStep::HeartbeatProducer => "heartbeat producer (0x1017)",
            BootStep::HeartbeatConsumer => "command watchdog: heartbeat consumer (0x1016)",
            BootStep::AbortConnection => "abort connection option code (0x6007)",
            BootStep::Mode => "modes of operation (0x6060)",
            BootStep::InterpolationPeriod => "interpolation time period (0x60C2)",
            BootStep::DisablePdos => "disable the predefined PDOs",
            BootStep::RpdoA => "map RPDO A",
            BootStep::RpdoB => "disable RPDO B",
            BootStep::TpdoA => "map TPDO A",
            BootStep::TpdoB => "map TPDO B",
            BootStep::Start => "NMT start",
            BootStep::Running => "running",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum OpKind {
    Write(Vec<u8>),
    Read,
}

/// One SDO of the bring-up.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Op {
    step: BootStep,
    index: u16,
    sub: u8,
    kind: OpKind,
    /// A failure stops the bring-up (else: skipped with a note).
    required: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the drive; an NMT reset communication went out at `reset_at`.
    Wait {
        since: u64,
    },
    /// SDO `op` of the bring-up in flight, its `tries`-th try.
    Config {
        op: usize,
        tries: u8,
    },
    Running,
    Failed {
        retry_at: u64,
    },
}

#[derive(Clone, Debug)]
struct Msgs {
    status: (u8, Message),
    st: [Slot; 7],
    emcy: (u8, Message),
    em: [Slot; 3],
    command: (u8, Message),
    cmd: [Slot; 3],
    services: [u8; 4],
    response: Message,
    success: Slot,
}

impl Msgs {
    fn of(ty: &fcan_core::ir::BlockType) -> Result<Msgs, Missing> {
        let status = Message::topic(ty, "status")?;
        let st = [
            status.1.slot("statusword")?,
            status.1.slot("state")?,
            status.1.slot("mode")?,
            status.1.slot("position")?,
            status.1.slot("velocity")?,
            status.1.slot("torque")?,
            status.1.slot("error_code")?,
        ];
        let emcy = Message::topic(ty, "emcy")?;
        let em = [
            emcy.1.slot("code")?,
            emcy.1.slot("register")?,
            emcy.1.slot("data")?,
        ];
        let command = Message::topic(ty, "command")?;
        let cmd = [
            command.1.slot("position")?,
            command.1.slot("velocity")?,
            command.1.slot("torque")?,
        ];
        let services = [
            Message::service(ty, "enable")?,
            Message::service(ty, "disable")?,
            Message::service(ty, "quick_stop")?,
            Message::service(ty, "fault_reset")?,
        ];
        let response = Message::new(&ty.services[services[0] as usize].response);
        let success = response.slot("success")?;
        Ok(Msgs {
            status,
            st,
            emcy,
            em,
            command,
            cmd,
            services,
            response,
            success,
        })
    }
}

/// What a spec says (the keys the driver and the simulated drive share).
struct Config {
    id: u8,
    eds: Option<(String, Eds)>,
    mode: Mode,
    sync_ms: u32,
    /// It produces SYNC (`sync=off`: another producer on the bus does).
    producer: bool,
    heartbeat_ms: u32,
    master: u8,
    watchdog: Watchdog,
    counts: Option<f64>,
    gear: Option<f64>,
}

/// One CiA 402 drive. See the module docs.
#[derive(Debug)]
pub struct Cia402 {
    id: u8,
    master: u8,
    mode: Mode,
    node: NodeId,
    blob: Vec<u8>,
    msgs: Msgs,
    eds: Eds,
    eds_given: bool,
    sync_us: u64,
    /// It sends SYNC every `sync_us` (else another producer on the bus does).
    producer: bool,
    /// The producer's SYNC has started (its drive first ran, or the master started the
    /// node): from then on it runs in every phase, until `MasterLost`.
    sync_started: bool,
    heartbeat_ms: u32,
    watchdog: Watchdog,
    counts: Option<f64>,
    gear: Option<f64>,
    /// Increments per revolution read from the drive (or its EDS) at bring-up.
    counts_read: Option<f64>,
    gear_read: Option<f64>,
    sdo: SdoClient,
    ops: Vec<Op>,
    phase: Phase,
    last_failure: Option<String>,
    /// When the drive's heartbeat (or boot-up) was last heard.
    last_hb: Option<u64>,
    /// It fell silent since it was last brought up.
    gone: bool,
    /// The next cycle: SYNC (a producer's, whatever the drive does) and RPDO A (running).
    next_sync: u64,
    next_own_hb: u64,
    master_lost: bool,
    /// The controlword's state-machine bits the driver sends now.
    cw: u16,
    statusword: u16,
    state: Option<State>,
    mode_display: i8,
    position: i32,
    velocity: i32,
    /// Torque actual, `None` when the drive's TPDO B does not carry it (no 0x6077).
    torque: Option<i16>,
    /// The latched fault code (0: none).
    error_code: u16,
    target_position: i32,
    target_velocity: i32,
    target_torque: i16,
    /// A command arrived since the last RPDO (pp: new set-point, bit 4).
    new_setpoint: bool,
    goal: Option<(usize, Goal, u64)>,
    refused: u64,
}

impl Cia402 {
    fn config(spec: &DeviceSpec) -> Result<(Config, crate::spec::Keys<'_>), SpecError> {
        let mut keys = spec.keys();
        let id = keys.uint("id", 127)?.filter(|&n| n >= 1).ok_or_else(|| {
            keys.error("id", "is missing or 0 (the drive's CANopen node id, 1–127)")
        })? as u8;
        let eds = match keys.string("eds")? {
            Some(p) => {
                let e = Eds::read(std::path::Path::new(&p))
                    .map_err(|e| keys.error("eds", &format!("= {p}: {e}")))?;
                Some((p, e))
            }
            None => None,
        };
        let mode = match keys.string("mode")? {
            Some(m) => m.parse::<Mode>().map_err(|e| keys.error("mode", &e))?,
            None => Mode::Csp,
        };
        let sync_ms = keys.uint("sync_ms", 1000)?.unwrap_or(10);
        if sync_ms == 0 {
            return Err(keys.error("sync_ms", "must be 1–1000"));
        }
        // Off only by name, as `watchdog=off`: a device that produces no SYNC leaves its
        // drive's TPDOs to another producer, so that must be meant.
        let producer = match keys.string("sync")? {
            None => true,
            Some(v) if v.eq_ignore_ascii_case("off") => false,
            Some(v) => {
                return Err(keys.error(
                    "sync",
                    &format!(
                        "= {v}: only `sync=off` is taken (no SYNC from this device: another \
                         producer on the bus sends it every `sync_ms`)"
                    ),
                ))
            }
        };
        let heartbeat_ms = keys.uint("heartbeat_ms", 65_535)?.unwrap_or(100);
        if heartbeat_ms == 0 {
            return Err(keys.error(
                "heartbeat_ms",
                "must be 1–65535 (the drive's heartbeat is how the driver knows it is there)",
            ));
        }
        let master = keys.uint("master", 127)?.unwrap_or(127) as u8;
        if master == 0 || master == id {
            return Err(keys.error("master", "must be a CANopen node id 1–127 other than `id`"));
        }
        let watchdog = keys.watchdog(
            WATCHDOG_DEFAULT_MS,
            WATCHDOG_MAX_MS,
            "0x1016 heartbeat consumer time",
        )?;
        let counts = keys.positive("counts")?.map(f64::from);
        let gear = keys.positive("gear")?.map(f64::from);
        Ok((
            Config {
                id,
                eds,
                mode,
                sync_ms,
                producer,
                heartbeat_ms,
                master,
                watchdog,
                counts,
                gear,
            },
            keys,
        ))
    }

    /// From `cia402:id=N[,eds=PATH][,mode=pp|pv|csp|csv|cst][,node=N][,name=NAME]
    /// [,sync_ms=10][,sync=off][,heartbeat_ms=100][,master=127][,watchdog_ms=200|,watchdog=off]
    /// [,counts=N][,gear=R]` (docs/drivers.md).
    pub fn from_spec(spec: &DeviceSpec) -> Result<Cia402, SpecError> {
        let (c, mut keys) = Self::config(spec)?;
        let node = keys.node(u32::from(c.id))?;
        let name = keys.string("name")?;
        keys.finish()?;
        let (schema, blob) = crate::spec::device_schema(
            DRIVER.name,
            BLOB,
            &format!("cia402 node {}", c.id),
            name.as_deref(),
            |_| {},
        )?;
        let msgs = Msgs::of(&schema.types[0])
            .map_err(|e| SpecError(format!("the cia402 driver's schema: {e}")))?;
        let (eds, eds_given) = match c.eds {
            Some((_, e)) => (e, true),
            None => (Eds::default_dictionary(), false),
        };
        Ok(Cia402 {
            id: c.id,
            master: c.master,
            mode: c.mode,
            node,
            blob,
            msgs,
            eds,
            eds_given,
            sync_us: u64::from(c.sync_ms) * 1000,
            producer: c.producer,
            sync_started: false,
            heartbeat_ms: c.heartbeat_ms,
            watchdog: c.watchdog,
            counts: c.counts,
            gear: c.gear,
            counts_read: None,
            gear_read: None,
            sdo: SdoClient::new(c.id, SDO_TIMEOUT_US),
            ops: Vec::new(),
            phase: Phase::Wait { since: 0 },
            last_failure: None,
            last_hb: None,
            gone: false,
            next_sync: 0,
            next_own_hb: 0,
            master_lost: false,
            cw: 0,
            statusword: 0,
            state: None,
            mode_display: 0,
            position: 0,
            velocity: 0,
            torque: None,
            error_code: 0,
            target_position: 0,
            target_velocity: 0,
            target_torque: 0,
            new_setpoint: false,
            goal: None,
            refused: 0,
        })
    }

    /// The simulated drive a spec describes (its EDS, if given, is its dictionary).
    pub fn simulated(spec: &DeviceSpec) -> Result<Box<dyn crate::sim::SimDevice>, SpecError> {
        let (c, mut keys) = Self::config(spec)?;
        let _ = keys.uint("node", 0x7E)?;
        let _ = keys.string("name")?;
        keys.finish()?;
        let eds = c
            .eds
            .map(|(_, e)| e)
            .unwrap_or_else(Eds::default_dictionary);
        Ok(Box::new(super::sim::SimCia402::with_eds(c.id, &eds)))
    }

    /// The bring-up's step now ([`BootStep::Running`] once brought up).
    pub fn boot_step(&self) -> BootStep {
        match &self.phase {
            Phase::Wait { .. } | Phase::Failed { .. } => BootStep::WaitForDrive,
            Phase::Config { op, .. } => self.ops.get(*op).map_or(BootStep::Start, |o| o.step),
            Phase::Running => BootStep::Running,
        }
    }

    /// Why the last bring-up failed (the warning logged), if one did.
    pub fn last_failure(&self) -> Option<&str> {
        self.last_failure.as_deref()
    }

    /// The drive's state as its last statusword said.
    pub fn drive_state(&self) -> Option<State> {
        self.state
    }

    /// The latched fault code (0: none).
    pub fn error_code(&self) -> u16 {
        self.error_code
    }

    /// Increments per radian of the output shaft.
    pub fn increments_per_rad(&self) -> f64 {
        let counts = self.counts.or(self.counts_read).unwrap_or(4096.0);
        let gear = self.gear.or(self.gear_read).unwrap_or(1.0);
        counts * gear / std::f64::consts::TAU
    }

    fn describe_object(&self, index: u16, sub: u8) -> String {
        let name = self.eds.name(index, sub);
        if name.is_empty() {
            format!("{index:04X}:{sub:02X}")
        } else {
            format!("{index:04X}:{sub:02X} ({name})")
        }
    }

    /// The bring-up's SDOs, in order (module docs).
    fn plan(&self) -> Vec<Op> {
        let id = u32::from(self.id);
        let mut ops = Vec::new();
        let w = |step, index, sub, v: u32, len: usize, required| Op {
            step,
            index,
            sub,
            kind: OpKind::Write(v.to_le_bytes()[..len].to_vec()),
            required,
        };
        let r = |step, index, sub| Op {
            step,
            index,
            sub,
            kind: OpKind::Read,
            required: false,
        };
        if self.counts.is_none() {
            ops.push(r(BootStep::EncoderResolution, 0x608F, 1));
            ops.push(r(BootStep::EncoderResolution, 0x608F, 2));
        }
        if self.gear.is_none() {
            ops.push(r(BootStep::GearRatio, 0x6091, 1));
            ops.push(r(BootStep::GearRatio, 0x6091, 2));
        }
        ops.push(w(
            BootStep::HeartbeatProducer,
            0x1017,
            0,
            self.heartbeat_ms,
            2,
            true,
        ));
        let consumer = match self.watchdog {
            Watchdog::Armed { ms } => (u32::from(self.master) << 16) | ms.min(WATCHDOG_MAX_MS),
            _ => 0,
        };
        // A drive with no heartbeat consumer has no command watchdog the driver can arm:
        // required when one is asked for.
        let armed = matches!(self.watchdog, Watchdog::Armed { .. });
        ops.push(w(
            BootStep::HeartbeatConsumer,
            0x1016,
            1,
            consumer,
            4,
            armed,
        ));
        if armed {
            // 0x6007: 2 disable voltage. (3 would be quick stop; 2 is the one every
            // drive has: the power stage off.)
            ops.push(w(BootStep::AbortConnection, 0x6007, 0, 2, 2, false));
        }
        ops.push(w(
            BootStep::Mode,
            0x6060,
            0,
            self.mode.code() as u8 as u32,
            1,
            true,
        ));
        if self.mode.cyclic() {
            let ms = (self.sync_us / 1000).min(255) as u32;
            ops.push(w(BootStep::InterpolationPeriod, 0x60C2, 1, ms, 1, false));
            ops.push(w(
                BootStep::InterpolationPeriod,
                0x60C2,
                2,
                (-3i8) as u8 as u32,
                1,
                false,
            ));
        }
        // The predefined PDOs the driver does not use, disabled (bit 31): RPDO 2–4 and
        // TPDO 3–4 sit on 0x280..0x57F, over fcan's data plane.
        for n in [1u16, 2, 3] {
            let rpdo_default = [0x300, 0x400, 0x500][n as usize - 1] + id;
            ops.push(w(
                BootStep::DisablePdos,
                0x1400 + n,
                1,
                0x8000_0000 | rpdo_default,
                4,
                false,
            ));
        }
        for n in [2u16, 3] {
            let tpdo_default = [0x380, 0x480][n as usize - 2] + id;
            ops.push(w(
                BootStep::DisablePdos,
                0x1800 + n,
                1,
                0x8000_0000 | tpdo_default,
                4,
                false,
            ));
        }
        let (ti, tbits) = self.mode.target();
        let map = |o: &mut Vec<Op>, step, comm: u16, mapping: u16, cob: u32, entries: &[u32]| {
            o.push(w(step, comm, 1, 0x8000_0000 | cob, 4, true));
            o.push(w(step, comm, 2, 1, 1, true));
            o.push(w(step, mapping, 0, 0, 1, true));
            for (i, e) in entries.iter().enumerate() {
                o.push(w(step, mapping, i as u8 + 1, *e, 4, true));
            }
            o.push(w(step, mapping, 0, entries.len() as u32, 1, true));
            o.push(w(step, comm, 1, cob, 4, true));
        };
        map(
            &mut ops,
            BootStep::RpdoA,
            0x1400,
            0x1600,
            u32::from(wire::RPDO_A) + id,
            &[0x6040_0010, (u32::from(ti) << 16) | u32::from(tbits)],
        );
        ops.push(w(
            BootStep::RpdoB,
            0x1401,
            1,
            0x8000_0000 | (u32::from(wire::RPDO_B) + id),
            4,
            true,
        ));
        map(
            &mut ops,
            BootStep::TpdoA,
            0x1800,
            0x1A00,
            u32::from(wire::TPDO_A) + id,
            &[0x6041_0010, 0x6064_0020],
        );
        // Torque actual last, and only where the drive has it mappable: ros2_canopen's
        // cia402_slave.eds, for one, has no 0x6077 (its status then says torque NaN).
        let mut tpdo_b = vec![0x606C_0020, 0x6061_0008];
        if self.torque_mapped() {
            tpdo_b.push(0x6077_0010);
        }
        map(
            &mut ops,
            BootStep::TpdoB,
            0x1801,
            0x1A01,
            u32::from(wire::TPDO_B) + id,
            &tpdo_b,
        );
        ops
    }

    /// Whether TPDO B carries torque actual (0x6077): without an EDS the default
    /// dictionary has it; with one, only where the EDS has it PDO-mappable.
    fn torque_mapped(&self) -> bool {
        !self.eds_given || self.eds.get(0x6077, 0).is_some_and(|e| e.pdo_mappable)
    }

    /// What the EDS says against `op`: `None` when it can go, else why not.
    fn eds_refuses(&self, op: &Op) -> Option<String> {
        if !self.eds_given {
            return None;
        }
        let Some(e) = self.eds.get(op.index, op.sub) else {
            return Some("the EDS has no such object".into());
        };
        if let OpKind::Write(v) = &op.kind {
            if !e.writable() {
                return Some(format!("the EDS says it is `{}`", e.access));
            }
            // A mapping entry names an object: it must be mappable.
            if (0x1600..=0x17FF).contains(&op.index) || (0x1A00..=0x1BFF).contains(&op.index) {
                if let (true, Ok(b)) = (op.sub > 0, <[u8; 4]>::try_from(v.as_slice())) {
                    let m = u32::from_le_bytes(b);
                    let (i, s) = ((m >> 16) as u16, ((m >> 8) & 0xFF) as u8);
                    match self.eds.get(i, s) {
                        Some(x) if x.pdo_mappable => {}
                        Some(_) => {
                            return Some(format!(
                                "{} is not PDO-mappable in the EDS",
                                self.describe_object(i, s)
                            ))
                        }
                        None => {
                            return Some(format!("the EDS has no {}", self.describe_object(i, s)))
                        }
                    }
                }
            }
        }
        None
    }

    fn start_boot(&mut self, now: u64, io: &mut Io) {
        self.ops = self.plan();
        self.goal = None;
        self.state = None;
        // Mapping can only change in pre-operational (CiA 301 §7.3.2.3.3).
        io.send(wire::nmt(NmtCommand::PreOperational, self.id));
        self.run_op(now, 0, 1, io);
    }

    /// Sends op `i` (skipping what the EDS says is not there), or finishes the bring-up.
    fn run_op(&mut self, now: u64, mut i: usize, tries: u8, io: &mut Io) {
        while let Some(op) = self.ops.get(i) {
            match self.eds_refuses(op) {
                None => break,
                Some(why) if !op.required => {
                    io.note(format!(
                        "{}: {} skipped: {} ({why})",
                        self.describe(),
                        op.step,
                        self.describe_object(op.index, op.sub)
                    ));
                    i += 1;
                }
                Some(why) => {
                    let (step, index, sub) = (op.step, op.index, op.sub);
                    self.fail_boot(now, step, index, sub, &why, io);
                    return;
                }
            }
        }
        let Some(op) = self.ops.get(i) else {
            self.finish_boot(now, io);
            return;
        };
        let f = match &op.kind {
            OpKind::Write(v) => self.sdo.download(now, op.index, op.sub, &v.clone()),
            OpKind::Read => self.sdo.upload(now, op.index, op.sub),
        };
        io.send(f);
        self.phase = Phase::Config { op: i, tries };
    }

    fn fail_boot(&mut self, now: u64, step: BootStep, index: u16, sub: u8, why: &str, io: &mut Io) {
        let text = format!(
            "{}: bring-up failed at {step}: {}: {why}; tried again in {} s",
            self.describe(),
            self.describe_object(index, sub),
            BOOT_RETRY_US / 1_000_000
        );
        io.warn(text.clone());
        self.last_failure = Some(text);
        self.phase = Phase::Failed {
            retry_at: now + BOOT_RETRY_US,
        };
    }

    fn finish_boot(&mut self, now: u64, io: &mut Io) {
        io.send(wire::nmt(NmtCommand::Start, self.id));
        self.phase = Phase::Running;
        self.gone = false;
        self.last_hb = Some(now);
        if !(self.producer && self.sync_started) {
            // The cycle's clock starts now; a producer's running SYNC keeps its phase.
            self.next_sync = now;
        }
        self.sync_started = true;
        self.next_own_hb = now;
        self.cw = 0;
        self.last_failure = None;
        io.note(format!(
            "{} answers: brought up ({:?}, {:.1} increments/rad), presented as fcan node {} (watchdog: {})",
            self.describe(),
            self.mode,
            self.increments_per_rad(),
            self.node,
            self.watchdog
        ));
        if self.watchdog == Watchdog::Off {
            io.warn(format!(
                "{}: its command watchdog is off (watchdog=off): if the bus owner stops, the drive keeps its last command",
                self.describe()
            ));
        }
    }

    fn on_sdo(&mut self, now: u64, step: Step, io: &mut Io) {
        let Phase::Config { op: i, tries } = self.phase.clone() else {
            return;
        };
        let Some(op) = self.ops.get(i).cloned() else {
            return;
        };
        match step {
            Step::Ignored => {}
            Step::Send(f) => io.send(f),
            Step::Done(bytes) => {
                if op.kind == OpKind::Read {
                    let v = bytes
                        .iter()
                        .rev()
                        .fold(0u64, |a, &b| (a << 8) | u64::from(b))
                        as f64;
                    match (op.index, op.sub) {
                        (0x608F, 1) if v > 0.0 => self.counts_read = Some(v),
                        (0x608F, 2) if v > 0.0 => {
                            self.counts_read = self.counts_read.map(|c| c / v)
                        }
                        (0x6091, 1) if v > 0.0 => self.gear_read = Some(v),
                        (0x6091, 2) if v > 0.0 => self.gear_read = self.gear_read.map(|g| g / v),
                        _ => {}
                    }
                }
                self.run_op(now, i + 1, 1, io);
            }
            Step::Failed(err, abort) => {
                if let Some(a) = abort {
                    io.send(a);
                }
                if !err.from_server && tries < SDO_TRIES {
                    self.run_op(now, i, tries + 1, io);
                } else if !op.required {
                    if op.kind == OpKind::Read {
                        // The EDS's default (or the default dictionary's) stands in.
                        self.read_default(op.index, op.sub);
                    }
                    io.note(format!(
                        "{}: {} skipped: {}: {err}",
                        self.describe(),
                        op.step,
                        self.describe_object(op.index, op.sub)
                    ));
                    self.run_op(now, i + 1, 1, io);
                } else {
                    self.fail_boot(now, op.step, op.index, op.sub, &err.to_string(), io);
                }
            }
        }
    }

    fn read_default(&mut self, index: u16, sub: u8) {
        let v = self
            .eds
            .get(index, sub)
            .and_then(|e| e.default_value(self.id))
            .filter(|&v| v > 0)
            .map(|v| v as f64);
        match (index, sub, v) {
            (0x608F, 1, Some(v)) => self.counts_read = Some(v),
            (0x608F, 2, Some(v)) => self.counts_read = self.counts_read.map(|c| c / v),
            (0x6091, 1, Some(v)) => self.gear_read = Some(v),
            (0x6091, 2, Some(v)) => self.gear_read = self.gear_read.map(|g| g / v),
            _ => {}
        }
    }

    fn rpdo(&mut self) -> Frame {
        let enabled = self.state == Some(State::OperationEnabled);
        if !enabled {
            // Never a jump on enable: the target is where the drive is until a command.
            self.target_position = self.position;
            self.target_velocity = 0;
            self.target_torque = 0;
        }
        let mut cw = self.cw;
        let mut data = Vec::with_capacity(6);
        match self.mode {
            Mode::Pp => {
                // Bit 5 change set immediately; bit 4 new set-point, for one cycle.
                cw |= 0x20;
                if self.new_setpoint && enabled {
                    cw |= 0x10;
                }
                data.extend_from_slice(&cw.to_le_bytes());
                data.extend_from_slice(&self.target_position.to_le_bytes());
            }
            Mode::Csp => {
                data.extend_from_slice(&cw.to_le_bytes());
                data.extend_from_slice(&self.target_position.to_le_bytes());
            }
            Mode::Pv | Mode::Csv => {
                data.extend_from_slice(&cw.to_le_bytes());
                data.extend_from_slice(&self.target_velocity.to_le_bytes());
            }
            Mode::Cst => {
                data.extend_from_slice(&cw.to_le_bytes());
                data.extend_from_slice(&self.target_torque.to_le_bytes());
            }
        }
        self.new_setpoint = false;
        wire::pdo(wire::RPDO_A + u16::from(self.id), &data)
    }

    fn publish_status(&self, io: &mut Io) {
        let m = &self.msgs;
        let k = self.increments_per_rad();
        let mut b = m.status.1.zeroed();
        let values = [
            f64::from(self.statusword),
            f64::from(self.state.map_or(255, State::code)),
            f64::from(self.mode_display as u8),
            f64::from(self.position) / k,
            f64::from(self.velocity) / k,
            self.torque.map_or(f64::NAN, f64::from),
            f64::from(self.error_code),
        ];
        for (s, v) in m.st.iter().zip(values) {
            s.set(&mut b, v);
        }
        io.publish(m.status.0, b);
    }

    fn complete(&mut self, s: usize, ok: bool, io: &mut Io) {
        let mut r = self.msgs.response.zeroed();
        self.msgs.success.set(&mut r, if ok { 1.0 } else { 0.0 });
        io.complete(self.msgs.services[s], r);
    }

    /// The statusword changed: the goal's next command.
    fn step_goal(&mut self, io: &mut Io) {
        let (Some((s, goal, _)), Some(st)) = (self.goal, self.state) else {
            return;
        };
        match state::next(st, goal) {
            Next::Done => {
                self.goal = None;
                if goal == Goal::FaultReset {
                    self.error_code = 0;
                    self.cw = 0;
                }
                self.complete(s, true, io);
            }
            Next::Send(c) => {
                if c == state::Command::FaultReset && self.cw & 0x80 != 0 {
                    // The edge was sent; the drive has not left Fault yet.
                } else {
                    self.cw = c.controlword();
                }
            }
            Next::Wait => {}
            Next::Stuck => {
                self.goal = None;
                io.warn(format!(
                    "{}: cannot enable: the drive is in {st} (call fault_reset first)",
                    self.describe()
                ));
                self.complete(s, false, io);
            }
        }
    }

    fn went_silent(&mut self, now: u64, io: &mut Io) {
        io.warn(format!(
            "{}: stopped answering (no heartbeat for {} ms)",
            self.describe(),
            3 * self.heartbeat_ms
        ));
        self.gone = true;
        self.phase = Phase::Wait { since: now };
        self.state = None;
        if let Some((s, _, _)) = self.goal.take() {
            self.complete(s, false, io);
        }
    }

    fn silence_at(&self) -> Option<u64> {
        match self.phase {
            Phase::Running => self
                .last_hb
                .map(|h| h + 3 * u64::from(self.heartbeat_ms) * 1000),
            _ => None,
        }
    }

    /// Whether the cycle clock runs: RPDO A while the drive runs, and a producer's SYNC
    /// in every phase once started. Other drives on the bus take their TPDOs from this
    /// SYNC (they were given `sync=off`), so it must not stop because this device's own
    /// drive went offline, failed a bring-up or is rebooting (before this, SYNC went with
    /// the drive's `Running` phase and stopped with it, stalling the other drives); only
    /// `MasterLost` stops it, as it stops everything the driver sends (the drives'
    /// watchdogs then act).
    fn cycling(&self) -> bool {
        !self.master_lost && (self.phase == Phase::Running || (self.producer && self.sync_started))
    }

    fn own_hb_period(&self) -> u64 {
        match self.watchdog {
            Watchdog::Armed { ms } => (u64::from(ms) * 1000 / 4).max(1000),
            _ => 100_000,
        }
    }
}

impl Device for Cia402 {
    fn driver(&self) -> &'static str {
        DRIVER.name
    }

    fn describe(&self) -> String {
        format!("cia402 node {}", self.id)
    }

    fn bus_key(&self) -> String {
        format!("CANopen node {}", self.id)
    }

    fn node_id(&self) -> NodeId {
        self.node
    }

    fn watchdog(&self) -> Watchdog {
        self.watchdog
    }

    fn blob(&self) -> &[u8] {
        &self.blob
    }

    fn claims(&self, frame: &Frame) -> bool {
        let Some(id) = wire::std_id(frame) else {
            return false;
        };
        let me = u16::from(self.id);
        [
            wire::EMCY,
            wire::HEARTBEAT,
            wire::SDO_TX,
            wire::TPDO_A,
            wire::TPDO_B,
        ]
        .iter()
        .any(|b| id == b + me)
    }

    fn owns(&self, frame: &Frame) -> bool {
        if self.claims(frame) {
            return true;
        }
        let Some(id) = wire::std_id(frame) else {
            return false;
        };
        let me = u16::from(self.id);
        wire::is_sync(frame)
            || id == wire::SDO_RX + me
            || id == wire::RPDO_A + me
            || id == wire::RPDO_B + me
            || id == wire::HEARTBEAT + u16::from(self.master)
            || wire::decode_nmt(frame).is_some_and(|(_, n)| n == self.id || n == 0)
    }

    fn on_frame(&mut self, now: u64, frame: &Frame, io: &mut Io) {
        let Some(id) = wire::std_id(frame) else {
            return;
        };
        let me = u16::from(self.id);
        if let Some((_, st)) = wire::decode_heartbeat(frame).filter(|(n, _)| *n == self.id) {
            let was_silent = self.gone || self.last_hb.is_none();
            self.last_hb = Some(now);
            match (&self.phase, st) {
                (Phase::Wait { .. }, _) => self.start_boot(now, io),
                (Phase::Running, NmtState::BootUp | NmtState::PreOperational) => {
                    io.warn(format!(
                        "{}: restarted (heartbeat says {st:?}): brought up again",
                        self.describe()
                    ));
                    self.start_boot(now, io);
                }
                (Phase::Config { .. }, NmtState::BootUp) if !was_silent => {
                    // It rebooted in the middle: what was written is gone.
                    self.start_boot(now, io);
                }
                _ => {}
            }
            return;
        }
        if id == wire::SDO_TX + me {
            let step = self.sdo.on_frame(now, frame);
            self.on_sdo(now, step, io);
            return;
        }
        if let Some((_, e)) = wire::decode_emcy(frame).filter(|(n, _)| *n == self.id) {
            let m = &self.msgs;
            let mut b = m.emcy.1.zeroed();
            let mut d = [0u8; 8];
            d[..5].copy_from_slice(&e.data);
            m.em[0].set(&mut b, f64::from(e.code));
            m.em[1].set(&mut b, f64::from(e.register));
            m.em[2].set(&mut b, u64::from_le_bytes(d) as f64);
            io.publish(m.emcy.0, b);
            if e.code != 0 {
                self.error_code = e.code;
                io.warn(format!(
                    "{}: EMCY {:#06X} ({}), error register {:#04X}, data {:02X?}",
                    self.describe(),
                    e.code,
                    e.class(),
                    e.register,
                    e.data
                ));
            }
            return;
        }
        if id == wire::TPDO_A + me {
            if let Some((sw, pos)) = wire::decode_tpdo_a(frame.data()) {
                self.statusword = sw;
                self.position = pos;
                let st = State::of(sw);
                if st != self.state {
                    self.state = st;
                }
                if st == Some(State::Fault) && self.error_code == 0 {
                    self.error_code = 0x1000;
                }
                self.step_goal(io);
            }
            return;
        }
        if id == wire::TPDO_B + me {
            if let Some((v, m, t)) = wire::decode_tpdo_b(frame.data()) {
                self.velocity = v;
                self.torque = t;
                self.mode_display = m;
                self.publish_status(io);
            }
        }
    }

    fn on_command(&mut self, _now: u64, topic: u8, bytes: &[u8], io: &mut Io) {
        if topic != self.msgs.command.0 {
            return;
        }
        let [p, v, t] = self.msgs.cmd.map(|s| s.get(bytes));
        let used = match self.mode {
            Mode::Pp | Mode::Csp => p,
            Mode::Pv | Mode::Csv => v,
            Mode::Cst => t,
        };
        if !used.is_finite() {
            let who = self.describe();
            refuse_once(
                &mut self.refused,
                &who,
                "a command with a non-finite value",
                io,
            );
            return;
        }
        let k = self.increments_per_rad();
        // `as` saturates: a target beyond i32 is the largest one, never a wrap.
        self.target_position = (p * k).round() as i32;
        self.target_velocity = (v * k).round() as i32;
        self.target_torque = t.round() as i16;
        self.new_setpoint = true;
    }

    // No `on_params`: the schema has no parameters; the drive's are its own (EDS, SDO
    // tools).

    fn on_service(&mut self, now: u64, service: u8, _request: &[u8], io: &mut Io) -> Served {
        let Some(s) = self.msgs.services.iter().position(|&x| x == service) else {
            return Served::Busy;
        };
        if self.goal.is_some_and(|(g, _, _)| g == s) {
            return Served::Busy;
        }
        if self.phase != Phase::Running {
            let mut r = self.msgs.response.zeroed();
            self.msgs.success.set(&mut r, 0.0);
            return Served::Done(r);
        }
        if let Some((old, _, _)) = self.goal.take() {
            // A newer request wins: the older is answered false.
            self.complete(old, false, io);
        }
        let goal = match s {
            0 => Goal::OperationEnabled,
            1 => Goal::SwitchOnDisabled,
            2 => Goal::QuickStop,
            _ => {
                // Bit 7 low first, so the next controlword makes its rising edge.
                self.cw = 0;
                Goal::FaultReset
            }
        };
        self.goal = Some((s, goal, now + CONFIRM_US));
        self.step_goal(io);
        Served::Pending
    }

    fn on_node(&mut self, _now: u64, event: NodeEvent, io: &mut Io) {
        match event {
            NodeEvent::MasterLost => {
                self.master_lost = true;
                io.warn(format!(
                    "{}: master lost: SYNC, PDOs and heartbeat stop; the drive's watchdog ({}) takes it to 0x6007's reaction",
                    self.describe(),
                    self.watchdog
                ));
            }
            NodeEvent::Started => {
                self.master_lost = false;
                self.sync_started = true;
            }
        }
    }

    fn poll_at(&self) -> Option<u64> {
        let mut t: Vec<u64> = Vec::new();
        t.extend(self.sdo.poll_at());
        match self.phase {
            Phase::Wait { since } => t.push(since + WAIT_US),
            Phase::Failed { retry_at } => t.push(retry_at),
            Phase::Running => {
                t.extend(self.silence_at());
                if !self.master_lost {
                    t.push(self.next_own_hb);
                }
            }
            Phase::Config { .. } => {}
        }
        if self.cycling() {
            t.push(self.next_sync);
        }
        t.extend(self.goal.map(|(_, _, d)| d));
        t.into_iter().min()
    }

    fn poll(&mut self, now: u64, io: &mut Io) {
        if self.sdo.poll_at().is_some_and(|d| now >= d) {
            let step = self.sdo.poll(now);
            self.on_sdo(now, step, io);
        }
        match self.phase {
            Phase::Wait { since } if now >= since + WAIT_US => {
                // Silent: a reset communication makes a drive that is there say boot-up.
                io.send(wire::nmt(NmtCommand::ResetCommunication, self.id));
                self.phase = Phase::Wait { since: now };
            }
            Phase::Failed { retry_at } if now >= retry_at => {
                if self
                    .last_hb
                    .is_some_and(|h| now < h + WAIT_US.max(3 * u64::from(self.heartbeat_ms) * 1000))
                {
                    self.start_boot(now, io);
                } else {
                    self.phase = Phase::Wait { since: now };
                    io.send(wire::nmt(NmtCommand::ResetCommunication, self.id));
                }
            }
            Phase::Running => {
                if self.silence_at().is_some_and(|t| now >= t) {
                    self.went_silent(now, io);
                } else if !self.master_lost && now >= self.next_own_hb {
                    io.send(wire::heartbeat(self.master, NmtState::Operational));
                    self.next_own_hb = now + self.own_hb_period();
                }
            }
            _ => {}
        }
        if self.cycling() && now >= self.next_sync {
            if self.producer {
                io.send(wire::sync());
            }
            if self.phase == Phase::Running {
                let f = self.rpdo();
                io.send(f);
            }
            // Never a burst to catch up: the next cycle a period from now.
            self.next_sync += self.sync_us;
            if self.next_sync <= now {
                self.next_sync = now + self.sync_us;
            }
        }
        if let Some((s, goal, d)) = self.goal {
            if now >= d {
                self.goal = None;
                let st = self
                    .state
                    .map_or("an unknown state".to_string(), |s| s.to_string());
                io.warn(format!(
                    "{}: {goal:?} not reached within {} ms: the drive stuck in {st}",
                    self.describe(),
                    CONFIRM_US / 1000
                ));
                self.complete(s, false, io);
            }
        }
    }

    fn present(&self) -> bool {
        self.phase == Phase::Running
    }

    fn on_bus_wedged(&mut self, now: u64) {
        // A wedged bus is not a silent drive: its heartbeat clock restarts.
        if self.last_hb.is_some() {
            self.last_hb = Some(now);
        }
    }
}
