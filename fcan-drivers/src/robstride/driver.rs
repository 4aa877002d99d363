//! The RobStride driver: one motor as an fcan node of the shipped schema
//! (`fcan-drivers/schemas/robstride.yaml`).
//!
//! What it does, as RobStride's own SDK does:
//! - **presence**: a motor says nothing unless asked, so while it is silent the driver
//!   asks for its id (type 0) every [`PROBE_US`]; once it answers, it reads VBUS and the
//!   mechanical position (type 17) every [`STATUS_US`], and a motor silent for
//!   [`LOST_US`] is gone (its node goes silent; the master calls it offline). A wedged
//!   bus (sends refused, bus-off) is not silence: nobody is declared gone until the bus
//!   has carried frames again for [`LOST_US`].
//! - **position unwrapped** across the ±4π wrap of the frame, reset after a gap of more
//!   than 1 s and by a set-zero;
//! - **temperature** taken only from a complete (8-byte) feedback frame;
//! - **parameters** the master sets are written (type 18) at once and again whenever the
//!   motor comes back: `run_mode` and the limits live in its RAM. The master does that
//!   part: a motor that comes back is a node that rebooted, re-provisioned with the
//!   parameters the master set. A motor power-cycled faster than [`LOST_US`] is caught
//!   another way: every parameter written is read back in turn with the status reads,
//!   and a motor that no longer holds one has restarted — its node reboots the same way.
//! - **services** answered when the motor's feedback confirms them (enable: mode 2;
//!   stop: mode 0; clear_fault: no fault bits; set_zero: the next feedback), or with
//!   `success: false` after [`CONFIRM_US`].
//! - **the command watchdog** (`canTimeout`, 0x7028: the motor drops to reset mode when
//!   it hears nothing for that long; factory value 0 = off) is armed before **every**
//!   enable, so also before the first one after a reboot, whatever noticed the reboot:
//!   a type-18 write of the configured value (`watchdog_ms=`, default
//!   [`WATCHDOG_DEFAULT_MS`]; `watchdog=off` writes 0), then a type-17 read of it. A
//!   type-18 write is answered only by a type-2 feedback, which does not say whether
//!   the write took (EN manual §4.1, communication type 18: "answer frame: motor
//!   feedback frame"); the type-17 answer does (§4.1, type 17: the value, and bits
//!   23..16 = 0 for "read successfully"). So the enable (type 3) goes out only once the
//!   read-back returns the value written: that is the acknowledgement. A read refused
//!   (status 1: a firmware without the register) refuses the enable at once; a motor
//!   that never confirms the value refuses it after [`CONFIRM_US`]; either way with a
//!   warning naming why, and no enable frame is sent. While the motor runs, the driver
//!   reads `canTimeout` back whenever nothing else went to it for half the timeout, so
//!   the bus owner's own silence (between status reads) never trips it; the read also
//!   tells a motor that restarted (it holds 0 again). The manuals do not say which
//!   frames reset the motor's timer; the simulated motor counts every frame addressed
//!   to it.

use fcan_core::frame::Frame;
use fcan_core::id::NodeId;
use fcan_core::types::Scalar;

use super::model::{self, Model, ParamType, CAN_TIMEOUT, IQ_REF, LOC_REF, MECH_POS, SPD_REF, VBUS};
use super::unwrap::Unwrap;
use super::wire::{self, Feedback, MotionCommand, Ranges, Reply, RsId};
use crate::device::{Device, Io, NodeEvent, Served, Watchdog};
use crate::message::{refuse_once, Message, Missing, MitSlots, Slot};
use crate::spec::{DeviceSpec, SpecError};

/// The schema the driver ships, compiled at build time.
pub const BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/robstride.bin"));

/// The driver, as [`crate::registry::DRIVERS`] lists it.
pub const DRIVER: crate::registry::Driver = crate::registry::Driver {
    name: "robstride",
    about: "RobStride RS00–RS06 (private protocol, 29-bit ids, Classical CAN)",
    keys: &[
        "id",
        "model",
        "host",
        "node",
        "name",
        "pmax",
        "vmax",
        "tmax",
        "kpmax",
        "kdmax",
        "watchdog_ms",
        "watchdog",
        "report_ms",
    ],
    from_spec: |spec| Ok(Box::new(RobStride::from_spec(spec)?)),
    simulated: RobStride::simulated,
    blob: BLOB,
    examples: &["robstride:id=1,model=RS03"],
    decode_any: |frame| {
        let ranges = Model::Rs03.ranges();
        let _ = wire::decode(frame, &ranges);
        let _ = wire::decode_request(frame, &ranges);
    },
};

/// While the motor is silent: how often it is asked for its id.
pub const PROBE_US: u64 = 500_000;
/// While it answers: how often VBUS and the mechanical position are read.
pub const STATUS_US: u64 = 200_000;
/// Silent this long (on a bus that carries frames): gone.
pub const LOST_US: u64 = 1_000_000;
/// A service waits this long for the motor's feedback to confirm it. Below the node
/// runtime's deferred-reply bound (1 s), so the answer is always a response.
pub const CONFIRM_US: u64 = 800_000;
/// The gap after which the position unwrap starts again from the frame's value.
pub const UNWRAP_GAP_US: u64 = 1_000_000;
/// Active reporting (`report_ms=`): the shortest period, its step and the longest
/// (`EPScan_time` is a u16: 10 ms + (65535 − 1) × 5 ms).
const REPORT_MIN_MS: u32 = 10;
const REPORT_STEP_MS: u32 = 5;
const REPORT_MAX_MS: u32 = REPORT_MIN_MS + (u16::MAX as u32 - 1) * REPORT_STEP_MS;

/// The command watchdog armed when the spec says nothing (`watchdog_ms=`), ms.
pub const WATCHDOG_DEFAULT_MS: u32 = 200;
/// `canTimeout` counts 50 µs (parameter table, EN manual §4.1.13: 20000 = 1 s).
const TICKS_PER_MS: u32 = 20;
/// The longest watchdog `canTimeout` (a u32 of 50 µs) holds, ms: 214 748 364.
pub const WATCHDOG_MAX_MS: u32 = u32::MAX / TICKS_PER_MS;
/// The driver keeps a running motor fed at most this often (a watchdog under twice this
/// is fed by the commands alone).
pub const KEEPALIVE_MIN_US: u64 = 5_000;

/// What a pending service waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Await {
    /// Enable, first step: the read-back of `canTimeout` returning the value written.
    Armed,
    Mode(u8),
    NoFault,
    AnyFeedback,
}

#[derive(Clone, Debug)]
struct Layout {
    feedback: (u8, Message),
    fb: [Slot; 6],
    faults: (u8, Message),
    fault_slots: [Slot; 2],
    status: (u8, Message),
    status_slots: [Slot; 2],
    mit: u8,
    mit_slots: MitSlots,
    refs: [(u8, Slot, u16); 3],
    services: [u8; 4],
    response: Message,
    success: Slot,
    /// Per schema parameter: its motor index and type.
    params: Vec<Option<(u16, ParamType)>>,
}

/// One RobStride motor. See the module docs.
#[derive(Debug)]
pub struct RobStride {
    motor: u8,
    host: u8,
    model: Model,
    ranges: Ranges,
    node: NodeId,
    blob: Vec<u8>,
    layout: Layout,
    present: bool,
    last_heard: Option<u64>,
    next_probe: u64,
    next_status: u64,
    /// Parameters written to the motor's RAM, by index, as written: read back in turn
    /// to notice a motor that restarted between two status reads.
    written: std::collections::BTreeMap<u16, [u8; 4]>,
    /// The next of `written` to read back.
    readback: usize,
    unwrap: Unwrap,
    temperature: f32,
    vbus: f32,
    /// Per service: what it waits for, until when.
    pending: [Option<(Await, u64)>; 4],
    refused: u64,
    watchdog: Watchdog,
    /// Active reporting (type 24) asked with `report_ms=`: the `EPScan_time` value that
    /// gives its period (`10 ms + (n − 1) × 5 ms`), `None` when off (the default: the
    /// motor then reports only in reply to a command).
    report: Option<u16>,
    /// When the driver last sent the motor anything.
    last_tx: u64,
    /// The mode of its last feedback (0 reset, 2 run).
    mode: u8,
    /// While arming: what the read-back answered instead of the value written.
    arm_seen: Option<[u8; 4]>,
}

fn missing(e: Missing) -> SpecError {
    SpecError(format!("the robstride driver's schema: {e}"))
}

impl RobStride {
    /// A motor with CAN id `motor` of `model`, the host id [`wire::DEFAULT_HOST_ID`],
    /// presented as fcan node `node` named `name` (default `robstride<node id>`), with the
    /// model's ranges.
    pub fn new(
        motor: u8,
        model: Model,
        node: NodeId,
        name: Option<&str>,
    ) -> Result<RobStride, SpecError> {
        RobStride::with(
            motor,
            wire::DEFAULT_HOST_ID,
            model,
            model.ranges(),
            node,
            name,
        )
    }

    fn with(
        motor: u8,
        host: u8,
        model: Model,
        ranges: Ranges,
        node: NodeId,
        name: Option<&str>,
    ) -> Result<RobStride, SpecError> {
        let who = format!("robstride id {motor}");
        // The model's ranges bound what the motor takes.
        let bound = |schema: &mut fcan_core::ir::Schema| {
            for p in schema.types.iter_mut().flat_map(|t| &mut t.params) {
                let max = match p.name.as_str() {
                    "limit_torque" => ranges.torque,
                    "limit_spd" => ranges.velocity,
                    _ => continue,
                };
                p.max = Some(Scalar::F32(max));
                if p.default.as_f64() > f64::from(max) {
                    p.default = Scalar::F32(max);
                }
            }
        };
        let (schema, blob) = crate::spec::device_schema(DRIVER.name, BLOB, &who, name, bound)?;
        let layout = Layout::of(&schema.types[0]).map_err(missing)?;
        Ok(RobStride {
            watchdog: Watchdog::Armed {
                ms: WATCHDOG_DEFAULT_MS,
            },
            last_tx: 0,
            mode: wire::MODE_RESET,
            arm_seen: None,
            motor,
            host,
            model,
            ranges,
            node,
            blob,
            layout,
            present: false,
            last_heard: None,
            next_probe: 0,
            next_status: 0,
            written: Default::default(),
            readback: 0,
            unwrap: Unwrap::new(2.0 * ranges.position, UNWRAP_GAP_US),
            temperature: f32::NAN,
            vbus: f32::NAN,
            pending: [None; 4],
            refused: 0,
            report: None,
        })
    }

    /// From `robstride:id=N[,model=RS03][,host=0xFD][,node=N][,name=NAME][,vmax=…]
    /// [,tmax=…][,kpmax=…][,kdmax=…][,pmax=…][,watchdog_ms=200|,watchdog=off]`
    /// (docs/drivers.md).
    pub fn from_spec(spec: &DeviceSpec) -> Result<RobStride, SpecError> {
        let (motor, host, model, ranges, mut keys) = Self::bus_keys(spec)?;
        let node = keys.node(u32::from(motor))?;
        let name = keys.string("name")?;
        let watchdog = Self::watchdog_key(&mut keys)?;
        let report = Self::report_key(&mut keys)?;
        keys.finish()?;
        let mut motor = RobStride::with(motor, host, model, ranges, node, name.as_deref())?
            .with_watchdog(watchdog);
        motor.report = report;
        Ok(motor)
    }

    /// `report_ms=N`: the motor reports its feedback every N ms by itself (type 24
    /// active reporting, period `EPScan_time`: 10 ms + 5 ms steps, EN manual §4.1 type 24
    /// and parameter 0x7026), so `topic echo` of its feedback shows samples with no
    /// command sent. Off by default, as the motor ships.
    fn report_key(keys: &mut crate::spec::Keys<'_>) -> Result<Option<u16>, SpecError> {
        let Some(ms) = keys.uint("report_ms", REPORT_MAX_MS)? else {
            return Ok(None);
        };
        if ms < REPORT_MIN_MS || (ms - REPORT_MIN_MS) % REPORT_STEP_MS != 0 {
            return Err(keys.error(
                "report_ms",
                &format!(
                    "= {ms}: the motor reports every 10 ms + a multiple of 5 ms (10, 15, 20, …, {REPORT_MAX_MS})"
                ),
            ));
        }
        // ≤ REPORT_MAX_MS, so n fits a u16.
        Ok(Some(((ms - REPORT_MIN_MS) / REPORT_STEP_MS + 1) as u16))
    }

    /// The active-reporting period asked with `report_ms=`, if any.
    pub fn report_ms(&self) -> Option<u32> {
        self.report
            .map(|n| REPORT_MIN_MS + (u32::from(n) - 1) * REPORT_STEP_MS)
    }

    fn watchdog_key(keys: &mut crate::spec::Keys<'_>) -> Result<Watchdog, SpecError> {
        keys.watchdog(
            WATCHDOG_DEFAULT_MS,
            WATCHDOG_MAX_MS,
            "canTimeout, 0x7028: a u32 of 50 µs",
        )
    }

    /// This motor with its command watchdog `watchdog` (default: armed,
    /// [`WATCHDOG_DEFAULT_MS`]). [`Watchdog::None`] is taken as [`Watchdog::Off`]: the
    /// motor has the register, so the driver always says what it holds.
    pub fn with_watchdog(mut self, watchdog: Watchdog) -> RobStride {
        self.watchdog = match watchdog {
            Watchdog::Armed { ms } => Watchdog::Armed {
                ms: ms.clamp(1, WATCHDOG_MAX_MS),
            },
            _ => Watchdog::Off,
        };
        self
    }

    /// What `canTimeout` is set to before each enable: 50 µs units, 0 = off.
    fn can_timeout(&self) -> u32 {
        match self.watchdog {
            Watchdog::Armed { ms } => ms.saturating_mul(TICKS_PER_MS),
            _ => 0,
        }
    }

    /// How long the motor may go without hearing the driver before the driver reads
    /// `canTimeout` back to feed it: half the timeout, not under [`KEEPALIVE_MIN_US`].
    fn keepalive_us(&self) -> Option<u64> {
        match self.watchdog {
            Watchdog::Armed { ms } => Some((u64::from(ms) * 500).max(KEEPALIVE_MIN_US)),
            _ => None,
        }
    }

    /// When the next keepalive read is due: only while the motor runs (its last
    /// feedback said mode 2); a motor in reset mode has nothing for the watchdog to stop.
    fn keepalive_at(&self) -> Option<u64> {
        let k = self.keepalive_us()?;
        (self.present && self.mode == wire::MODE_RUN).then(|| self.last_tx.saturating_add(k))
    }

    /// Queues `frame` for the motor, noting when it last heard the driver.
    fn tx(&mut self, now: u64, io: &mut Io, frame: Frame) {
        self.last_tx = self.last_tx.max(now);
        io.send(frame);
    }

    /// The motor restarted or went silent: what the driver knew of its state is void,
    /// and a call waiting on it cannot be answered (its node is gone from the master's
    /// view; the host drops the call). Nothing waits to be sent after it either: an
    /// enable still arming is dropped with it.
    fn forget(&mut self, now: u64) {
        self.present = false;
        self.next_probe = now;
        self.mode = wire::MODE_RESET;
        self.pending = [None; 4];
        self.arm_seen = None;
    }

    /// Ends the enable call that waits for `canTimeout`, if one does: `success: false`,
    /// and a warning saying `why`.
    fn refuse_enable(&mut self, why: &str, io: &mut Io) {
        if matches!(self.pending[0], Some((Await::Armed, _))) {
            self.pending[0] = None;
            self.arm_seen = None;
            io.warn(format!("{}: enable refused: {why}", self.describe()));
            io.complete(self.layout.services[0], self.layout.response.zeroed());
        }
    }

    /// The answer to a read of `canTimeout` while an enable waits for it.
    fn on_arming(&mut self, now: u64, value: [u8; 4], ok: bool, io: &mut Io) {
        let want = self.can_timeout();
        if !ok {
            self.refuse_enable(
                "the motor refused to read back its command watchdog (canTimeout, 0x7028): \
                 its firmware may not have one; `watchdog=off` enables it without",
                io,
            );
            return;
        }
        if value != wire::value_u32(want) {
            // Perhaps an answer to a read sent before the write: the deadline decides.
            self.arm_seen = Some(value);
            return;
        }
        let Some((_, deadline)) = self.pending[0] else {
            return;
        };
        self.arm_seen = None;
        if want == 0 {
            io.warn(format!(
                "{}: enabled with its command watchdog off (watchdog=off): if the bus owner \
                 stops, the motor keeps its last command",
                self.describe()
            ));
        }
        let (host, motor) = (self.host, self.motor);
        self.tx(now, io, wire::enable(host, motor));
        self.pending[0] = Some((Await::Mode(2), deadline));
    }

    /// The keys a motor on the bus is known by (what the simulated one needs too).
    fn bus_keys(
        spec: &DeviceSpec,
    ) -> Result<(u8, u8, Model, Ranges, crate::spec::Keys<'_>), SpecError> {
        let mut keys = spec.keys();
        let motor = keys
            .uint("id", 0xFF)?
            .ok_or_else(|| keys.error("id", "is missing (the motor's CAN id)"))?
            as u8;
        let host = keys
            .uint("host", 0xFF)?
            .map_or(wire::DEFAULT_HOST_ID, |h| h as u8);
        let model = match keys.string("model")? {
            Some(m) => m.parse::<Model>().map_err(|e| keys.error("model", &e))?,
            None => Model::Rs03,
        };
        let mut ranges = model.ranges();
        if let Some(v) = keys.positive("pmax")? {
            ranges.position = v;
        }
        if let Some(v) = keys.positive("vmax")? {
            ranges.velocity = v;
        }
        if let Some(v) = keys.positive("tmax")? {
            ranges.torque = v;
        }
        if let Some(v) = keys.positive("kpmax")? {
            ranges.kp = v;
        }
        if let Some(v) = keys.positive("kdmax")? {
            ranges.kd = v;
        }
        Ok((motor, host, model, ranges, keys))
    }

    /// The simulated motor a spec describes (`fcan fake --device robstride:id=1`).
    pub fn simulated(spec: &DeviceSpec) -> Result<Box<dyn crate::sim::SimDevice>, SpecError> {
        let (motor, host, model, _ranges, mut keys) = Self::bus_keys(spec)?;
        // Host-side keys mean nothing to the motor; accepted so one spec serves both.
        let _ = keys.uint("node", 0x7E)?;
        let _ = keys.string("name")?;
        let _ = Self::watchdog_key(&mut keys)?;
        let _ = Self::report_key(&mut keys)?;
        keys.finish()?;
        Ok(Box::new(
            super::sim::SimMotor::new(motor, model).with_host(host),
        ))
    }

    /// The quantization ranges in use.
    pub fn ranges(&self) -> Ranges {
        self.ranges
    }

    /// Commands refused before they reached the motor (a NaN or infinite value).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    fn heard(&mut self, now: u64) {
        self.last_heard = Some(now);
        if !self.present {
            self.present = true;
            self.next_status = now;
        }
    }

    fn on_feedback(&mut self, now: u64, fb: &Feedback, io: &mut Io) {
        self.mode = fb.mode;
        let position = self.unwrap.update(fb.position, now);
        if let Some(t) = fb.temperature {
            self.temperature = t;
        }
        let l = &self.layout;
        let mut buf = l.feedback.1.zeroed();
        let values = [
            position,
            f64::from(fb.velocity),
            f64::from(fb.torque),
            f64::from(self.temperature),
            f64::from(fb.mode),
            f64::from(fb.faults),
        ];
        for (slot, v) in l.fb.iter().zip(values) {
            slot.set(&mut buf, v);
        }
        io.publish(l.feedback.0, buf);
        // Services waiting for this feedback.
        for (s, p) in self.pending.iter_mut().enumerate() {
            let Some((what, _)) = *p else { continue };
            let done = match what {
                Await::Armed => false,
                Await::Mode(m) => fb.mode == m,
                Await::NoFault => fb.faults == 0,
                Await::AnyFeedback => true,
            };
            if done {
                *p = None;
                let mut r = self.layout.response.zeroed();
                self.layout.success.set(&mut r, 1.0);
                io.complete(self.layout.services[s], r);
            }
        }
    }

    fn value_bytes(ty: ParamType, packed: &[u8]) -> Option<[u8; 4]> {
        let mut v = [0u8; 4];
        let n = match ty {
            ParamType::U8 => 1,
            ParamType::U16 => 2,
            ParamType::U32 | ParamType::F32 => 4,
        };
        v.get_mut(..n)?.copy_from_slice(packed.get(..n)?);
        Some(v)
    }
}

impl Layout {
    fn of(ty: &fcan_core::ir::BlockType) -> Result<Layout, Missing> {
        let feedback = Message::topic(ty, "feedback")?;
        let fb = [
            feedback.1.slot("position")?,
            feedback.1.slot("velocity")?,
            feedback.1.slot("torque")?,
            feedback.1.slot("temperature")?,
            feedback.1.slot("mode")?,
            feedback.1.slot("faults")?,
        ];
        let faults = Message::topic(ty, "faults")?;
        let fault_slots = [faults.1.slot("fault")?, faults.1.slot("warning")?];
        let status = Message::topic(ty, "status")?;
        let status_slots = [status.1.slot("vbus")?, status.1.slot("mech_pos")?];
        let mit = Message::topic(ty, "mit")?;
        let mit_slots = MitSlots::of(&mit.1)?;
        let reference =
            |topic: &str, field: &str, index: u16| -> Result<(u8, Slot, u16), Missing> {
                let (t, m) = Message::topic(ty, topic)?;
                Ok((t, m.slot(field)?, index))
            };
        let refs = [
            reference("current", "iq_ref", IQ_REF)?,
            reference("velocity", "spd_ref", SPD_REF)?,
            reference("position", "loc_ref", LOC_REF)?,
        ];
        let services = [
            Message::service(ty, "enable")?,
            Message::service(ty, "stop")?,
            Message::service(ty, "clear_fault")?,
            Message::service(ty, "set_zero")?,
        ];
        let response = Message::new(&ty.services[services[0] as usize].response);
        let success = response.slot("success")?;
        let params = ty
            .params
            .iter()
            .map(|p| model::param_named(&p.name).map(|i| (i.index, i.ty)))
            .collect();
        Ok(Layout {
            feedback,
            fb,
            faults,
            fault_slots,
            status,
            status_slots,
            mit: mit.0,
            mit_slots,
            refs,
            services,
            response,
            success,
            params,
        })
    }
}

impl Device for RobStride {
    fn driver(&self) -> &'static str {
        DRIVER.name
    }

    fn describe(&self) -> String {
        format!("robstride {} id {}", self.model.name(), self.motor)
    }

    fn bus_key(&self) -> String {
        format!("robstride motor {} (host {:#04X})", self.motor, self.host)
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
        let Some(id) = RsId::of(frame) else {
            return false;
        };
        // What a motor sends: its id in the low byte of the data area, addressed to the
        // host (type 0's answer goes to 0xFE).
        let from_motor = (id.data & 0xFF) as u8 == self.motor;
        match id.comm {
            wire::COMM_GET_ID => from_motor && id.dest == 0xFE,
            wire::COMM_FEEDBACK | wire::COMM_PARAM_READ | wire::COMM_FAULT => {
                from_motor && id.dest == self.host
            }
            _ => false,
        }
    }

    fn owns(&self, frame: &Frame) -> bool {
        if self.claims(frame) {
            return true;
        }
        // A request to this motor: addressed to it. Type 1 carries the torque where the
        // others carry the sender's id, so only the destination tells. Types 16 and up
        // set bit 28, as fcan's configuration plane does: they must also have bits 23–16
        // clear (a request's), or fcan frames to and from nodes other than 0 whose
        // segment index happens to equal the motor's id would be taken.
        RsId::of(frame).is_some_and(|id| {
            id.dest == self.motor
                && (id.comm < 16 || id.data >> 8 == 0)
                && matches!(
                    id.comm,
                    wire::COMM_GET_ID
                        | wire::COMM_MOTION
                        | wire::COMM_ENABLE
                        | wire::COMM_STOP
                        | wire::COMM_SET_ZERO
                        | wire::COMM_SET_ID
                        | wire::COMM_PARAM_READ
                        | wire::COMM_PARAM_WRITE
                        | wire::COMM_SAVE
                        | wire::COMM_ACTIVE_REPORT
                )
        })
    }

    fn on_frame(&mut self, now: u64, frame: &Frame, io: &mut Io) {
        let Some(reply) = wire::decode(frame, &self.ranges) else {
            return;
        };
        let appeared = !self.present;
        self.heard(now);
        if appeared {
            // A motor that answers after silence may have restarted with its factory
            // `canTimeout`: written again at once (enables arm it anyway, module docs).
            // What it held before says nothing now, so it is not read back as a
            // restart sign until it is confirmed again.
            self.written.remove(&CAN_TIMEOUT);
            let (host, motor) = (self.host, self.motor);
            let value = wire::value_u32(self.can_timeout());
            self.tx(now, io, wire::param_write(host, motor, CAN_TIMEOUT, value));
            self.tx(now, io, wire::param_read(host, motor, CAN_TIMEOUT));
            if let Some(n) = self.report {
                // Active reporting lives in the motor's RAM too: its period, then on.
                self.tx(
                    now,
                    io,
                    wire::param_write(host, motor, model::EPSCAN_TIME, wire::value_u16(n)),
                );
                self.tx(now, io, wire::active_report(host, motor, true));
            }
        }
        if let Reply::Param {
            index: CAN_TIMEOUT,
            value,
            ok,
            ..
        } = reply
        {
            if matches!(self.pending[0], Some((Await::Armed, _))) {
                self.on_arming(now, value, ok, io);
            }
        }
        match reply {
            Reply::Feedback(fb) => self.on_feedback(now, &fb, io),
            Reply::Faults { fault, warning, .. } => {
                let l = &self.layout;
                let mut buf = l.faults.1.zeroed();
                l.fault_slots[0].set(&mut buf, f64::from(fault));
                l.fault_slots[1].set(&mut buf, f64::from(warning));
                io.publish(l.faults.0, buf);
            }
            Reply::Param {
                index, value, ok, ..
            } if ok => {
                let v = f32::from_le_bytes(value);
                match index {
                    VBUS => self.vbus = v,
                    i if self.written.get(&i).is_some_and(|w| *w != value) => {
                        // The motor no longer holds what was written: it restarted.
                        // Its node reboots (the next answer boots it anew) and the
                        // master writes the parameters again.
                        io.warn(format!(
                            "{}: parameter {i:#06X} no longer holds what was written: the motor restarted",
                            self.describe()
                        ));
                        self.written.clear();
                        self.forget(now);
                        self.unwrap.reset();
                    }
                    // It holds the watchdog: read back with the status reads (and the
                    // keepalive) from now on, so a motor that no longer does has
                    // restarted. Off (0) is the factory value: no sign of anything.
                    CAN_TIMEOUT
                        if self.can_timeout() != 0
                            && value == wire::value_u32(self.can_timeout()) =>
                    {
                        self.written.insert(CAN_TIMEOUT, value);
                    }
                    MECH_POS => {
                        let l = &self.layout;
                        let mut buf = l.status.1.zeroed();
                        l.status_slots[0].set(&mut buf, f64::from(self.vbus));
                        l.status_slots[1].set(&mut buf, f64::from(v));
                        io.publish(l.status.0, buf);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn on_command(&mut self, now: u64, topic: u8, bytes: &[u8], io: &mut Io) {
        let l = &self.layout;
        if topic == l.mit {
            let Some([position, velocity, kp, kd, torque]) = l.mit_slots.read(bytes) else {
                let who = self.describe();
                refuse_once(
                    &mut self.refused,
                    &who,
                    "a mit command with a non-finite value",
                    io,
                );
                return;
            };
            let cmd = MotionCommand {
                position,
                velocity,
                kp,
                kd,
                torque,
            };
            let frame = wire::motion(self.motor, &self.ranges, &cmd);
            self.tx(now, io, frame);
            return;
        }
        if let Some((_, slot, index)) = l.refs.iter().find(|(t, _, _)| *t == topic) {
            let v = slot.get(bytes) as f32;
            if !v.is_finite() {
                let who = self.describe();
                refuse_once(
                    &mut self.refused,
                    &who,
                    "a reference with a non-finite value",
                    io,
                );
                return;
            }
            let frame = wire::param_write(self.host, self.motor, *index, v.to_le_bytes());
            self.tx(now, io, frame);
        }
    }

    fn on_params(
        &mut self,
        now: u64,
        changed: u32,
        value: &dyn Fn(u8) -> Option<Vec<u8>>,
        io: &mut Io,
    ) {
        for i in 0..self.layout.params.len() {
            if changed & (1 << i) == 0 {
                continue;
            }
            let (Some((index, ty)), Some(packed)) = (self.layout.params[i], value(i as u8)) else {
                continue;
            };
            if let Some(v) = Self::value_bytes(ty, &packed) {
                let frame = wire::param_write(self.host, self.motor, index, v);
                self.tx(now, io, frame);
                self.written.insert(index, v);
            }
        }
    }

    fn on_service(&mut self, now: u64, service: u8, _request: &[u8], io: &mut Io) -> Served {
        let Some(s) = self.layout.services.iter().position(|&x| x == service) else {
            return Served::Busy;
        };
        if self.pending[s].is_some() {
            return Served::Busy;
        }
        let (host, motor) = (self.host, self.motor);
        if s == 0 {
            // The command watchdog first, on every enable (module docs): the enable
            // itself goes out when the read-back confirms the value ([`on_arming`]).
            let value = wire::value_u32(self.can_timeout());
            self.tx(now, io, wire::param_write(host, motor, CAN_TIMEOUT, value));
            self.tx(now, io, wire::param_read(host, motor, CAN_TIMEOUT));
            self.arm_seen = None;
            self.pending[0] = Some((Await::Armed, now + CONFIRM_US));
            return Served::Pending;
        }
        if s == 1 || s == 2 {
            // A stop (or one that clears faults) after an enable still arming: that
            // enable must not follow it.
            self.refuse_enable(
                "a stop was asked before the motor confirmed its watchdog",
                io,
            );
        }
        let (frame, what) = match s {
            1 => (wire::stop(host, motor, false), Await::Mode(0)),
            2 => (wire::stop(host, motor, true), Await::NoFault),
            _ => {
                self.unwrap.reset();
                (wire::set_zero(host, motor), Await::AnyFeedback)
            }
        };
        self.tx(now, io, frame);
        self.pending[s] = Some((what, now + CONFIRM_US));
        Served::Pending
    }

    fn poll_at(&self) -> Option<u64> {
        let mut at = if self.present {
            self.next_status
        } else {
            self.next_probe
        };
        for (_, deadline) in self.pending.iter().flatten() {
            at = at.min(*deadline);
        }
        if let (true, Some(h)) = (self.present, self.last_heard) {
            at = at.min(h + LOST_US);
        }
        if let Some(k) = self.keepalive_at() {
            at = at.min(k);
        }
        Some(at)
    }

    fn poll(&mut self, now: u64, io: &mut Io) {
        for s in 0..self.pending.len() {
            if let Some((what, deadline)) = self.pending[s] {
                if now >= deadline {
                    if what == Await::Armed {
                        let ms = CONFIRM_US / 1000;
                        let seen = match self.arm_seen {
                            Some(v) => format!(" (it answered {})", u32::from_le_bytes(v)),
                            None => String::new(),
                        };
                        let why = format!(
                            "the motor did not confirm its command watchdog (canTimeout, \
                             0x7028 = {}, {}) within {ms} ms{seen}",
                            self.can_timeout(),
                            self.watchdog
                        );
                        self.refuse_enable(&why, io);
                        continue;
                    }
                    self.pending[s] = None;
                    // success: false, the default of a zeroed response.
                    io.complete(self.layout.services[s], self.layout.response.zeroed());
                }
            }
        }
        if self.present {
            let silent = self
                .last_heard
                .is_none_or(|h| now.saturating_sub(h) >= LOST_US);
            if silent {
                self.forget(now);
                io.warn(format!(
                    "{}: no answer for {} ms",
                    self.describe(),
                    LOST_US / 1000
                ));
                return;
            }
            let (host, motor) = (self.host, self.motor);
            if now >= self.next_status {
                self.tx(now, io, wire::param_read(host, motor, VBUS));
                self.tx(now, io, wire::param_read(host, motor, MECH_POS));
                if !self.written.is_empty() {
                    self.readback = (self.readback + 1) % self.written.len();
                    if let Some(index) = self.written.keys().nth(self.readback).copied() {
                        self.tx(now, io, wire::param_read(host, motor, index));
                    }
                }
                self.next_status = now + STATUS_US;
            }
            if self.keepalive_at().is_some_and(|t| now >= t) {
                // Feeds the watchdog while the bus owner lives, and tells a motor that
                // restarted (it answers 0: see `on_frame`).
                self.tx(now, io, wire::param_read(host, motor, CAN_TIMEOUT));
            }
        } else if now >= self.next_probe {
            io.send(wire::get_id(self.host, self.motor));
            self.next_probe = now + PROBE_US;
        }
    }

    fn present(&self) -> bool {
        self.present
    }

    fn on_node(&mut self, _now: u64, event: NodeEvent, io: &mut Io) {
        if event == NodeEvent::MasterLost {
            // Nobody to drive the motor after it: an enable still arming is not sent.
            self.refuse_enable(
                "the master was lost before the motor confirmed its watchdog",
                io,
            );
        }
    }

    fn on_bus_wedged(&mut self, now: u64) {
        // Silence while frames cannot go out proves nothing: the count starts again.
        if self.present {
            self.last_heard = Some(now);
        }
    }
}
