//! The MIT-mode driver: one actuator speaking the 8-byte MIT frame on an 11-bit id, as
//! an fcan node of the shipped schema (`fcan-drivers/schemas/mit.yaml`).
//!
//! These motors answer only when commanded, and the only commands are motion and mode
//! changes: there is no harmless question to ask. So the device is taken as present
//! from the start (its node runs at once) and its feedback topic carries each reply it
//! sends. Services are answered when the motor replies to the frame they sent, or with
//! `success: false` after [`CONFIRM_US`].
//!
//! Identifiers: the motor's id and the id it replies on (`master=`) must be below
//! `0x100`, where fcan's data plane starts, so the master never plans a data frame on
//! them.
//!
//! **CAN FD** (`fd=true`, Damiao only): every frame to the motor goes as an FD frame of
//! DLC 8, with bit-rate switching unless `brs=false` ([`wire::Framing`]); replies are taken
//! in either kind. Such a device needs an FD link ([`Device::link_needed`]):
//! [`crate::DeviceHost::new`] and [`crate::spec::check_link`] refuse it on a Classical one.
//!
//! **The device watchdog** — Damiao only (`layout=damiao`): a Damiao has a command
//! timeout, register 9 `TIMEOUT` ([`wire::RID_TIMEOUT`]; a motor that times out leaves
//! motor mode and reports state `0xD`, lost communication). The driver arms it as the
//! RobStride driver arms `canTimeout`: **before every enable** it writes the register
//! (`0x7FF`, `[id lo, id hi, 0x55, 9, value LE]`) and reads it back (`0x33`), and sends
//! the enable (`…FC`) only once the read-back answers the value written. The answer to
//! the write (`0x55`) does not count: the read-back is the acknowledgement. A motor that
//! never confirms within [`CONFIRM_US`] gets no enable: the call answers
//! `success: false` and a warning names why. A motor that answers after silence (the
//! first answer, one after [`SILENCE_US`]) is written again at once; while it runs, the
//! driver reads the register back whenever nothing else went to it for half the timeout
//! (at most every [`KEEPALIVE_MIN_US`]), which keeps it fed while the bus owner lives and
//! tells a motor that no longer holds the value (restarted, or set by another tool): a
//! warning, and it is written again.
//!
//! The unit of a `TIMEOUT` count is not settled by a Damiao document we could read
//! (50 µs or 1 ms, as sources disagree): the driver writes `watchdog_ms × 20`, the 50 µs
//! reading ([`wire::TIMEOUT_COUNTS_PER_MS`]), so that a firmware counting milliseconds
//! times out 20 times later than asked — still armed, never sooner. It says so in the
//! log when it first writes the register.
//!
//! Register answers share the master id with the MIT replies, and their layout (byte 2
//! `0x33`/`0x55`) could be a reply's by chance: a frame is taken as a register answer only
//! while one is awaited (a register frame sent less than [`CONFIRM_US`] ago), from this
//! motor (bytes 0–1), for register 9 ([`wire::decode_register_reply`]).
//!
//! The other layouts (CubeMars, Mini Cheetah, MyActuator) document no timeout reachable
//! through the MIT frame set: [`Watchdog::None`], and no `watchdog` keys. Such a motor
//! keeps its last command when the bus owner dies unless its own configuration (a vendor
//! tool) set a timeout.

use fcan_core::frame::{CanId, Frame};
use fcan_core::id::NodeId;

use super::wire::{self, Command, Framing, Layout, Ranges};
use crate::device::{Device, Io, Served, Watchdog};
use crate::message::{refuse_once, Message, Missing, MitSlots, Slot};
use crate::spec::{DeviceSpec, SpecError};

/// The schema the driver ships, compiled at build time.
pub const BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/mit.bin"));

/// The driver, as [`crate::registry::DRIVERS`] lists it.
pub const DRIVER: crate::registry::Driver = crate::registry::Driver {
    name: "mit",
    about: "MIT-mode actuators (CubeMars, Damiao, MyActuator; 11-bit ids, Damiao also on CAN FD)",
    keys: &[
        "id",
        "master",
        "layout",
        "node",
        "name",
        "pmax",
        "vmax",
        "tmax",
        "kpmax",
        "kdmax",
        "fd",
        "brs",
        "watchdog_ms",
        "watchdog",
    ],
    from_spec: |spec| Ok(Box::new(Mit::from_spec(spec)?)),
    simulated: Mit::simulated,
    blob: BLOB,
    // Classical and CAN FD, with and without BRS; the Damiao ones arm their watchdog.
    examples: &[
        "mit:id=0x20,layout=damiao",
        "mit:id=0x21,master=1",
        "mit:id=0x22,master=2,layout=damiao,fd=true",
        "mit:id=0x23,master=3,layout=damiao,fd=true,brs=false",
    ],
    decode_any: |frame| {
        let ranges = Ranges::default();
        for layout in Layout::ALL {
            let _ = wire::decode_reply(frame, layout, &ranges);
        }
        let _ = wire::decode_request(frame, &ranges);
        // Damiao's register frames (its command watchdog, TIMEOUT): requests on 0x7FF
        // and answers on a master id.
        let _ = wire::decode_register_request(frame);
        let _ = wire::decode_register_reply(frame);
    },
};

/// A service waits this long for the motor's reply (below the runtime's 1 s bound on a
/// deferred reply).
pub const CONFIRM_US: u64 = 800_000;

/// fcan's data plane starts here: device identifiers stay below.
const FIRST_DATA_ID: u32 = 0x100;

/// A Damiao's command watchdog when the spec says nothing (`watchdog_ms=`), ms (as the
/// RobStride driver's).
pub const WATCHDOG_DEFAULT_MS: u32 = 200;
/// The longest watchdog `TIMEOUT` (a `u32` of 50 µs counts) holds, ms: 214 748 364.
pub const WATCHDOG_MAX_MS: u32 = u32::MAX / wire::TIMEOUT_COUNTS_PER_MS;
/// The driver keeps a running Damiao fed at most this often (a watchdog under twice this
/// is fed by the commands alone).
pub const KEEPALIVE_MIN_US: u64 = 5_000;
/// A Damiao that answers after this long without an answer is written again.
pub const SILENCE_US: u64 = 1_000_000;

#[derive(Clone, Debug)]
struct Msgs {
    feedback: (u8, Message),
    fb: [Slot; 5],
    mit: u8,
    cmd: MitSlots,
    services: [u8; 3],
    response: Message,
    success: Slot,
}

/// One MIT-mode actuator. See the module docs.
#[derive(Debug)]
pub struct Mit {
    id: u16,
    master: u16,
    layout: Layout,
    ranges: Ranges,
    framing: Framing,
    node: NodeId,
    blob: Vec<u8>,
    msgs: Msgs,
    pending: [Option<u64>; 3],
    refused: u64,
    /// `Armed`/`Off` for a Damiao, `None` for the layouts without a timeout register.
    watchdog: Watchdog,
    /// The enable (`pending[0]`) waits for the read-back of `TIMEOUT`.
    arming: bool,
    /// While arming: what the read-back answered instead of the value written.
    arm_seen: Option<u32>,
    /// Register answers are awaited until then (a register frame went out).
    reg_until: Option<u64>,
    /// When `TIMEOUT` was last written.
    last_write: Option<u64>,
    /// When it was last written because the motor no longer held it.
    last_rewrite: Option<u64>,
    /// When the driver last sent the motor anything.
    last_tx: u64,
    /// When the motor last answered.
    last_heard: Option<u64>,
    /// The state nibble of its last reply (Damiao: 1 enabled, 0xD lost communication).
    state: u8,
    /// Whether the unit of `TIMEOUT` was said in the log.
    said_unit: bool,
}

/// What a spec says about the motor on the bus (the keys the driver and the simulated
/// motor share).
struct Bus {
    id: u16,
    master: u16,
    layout: Layout,
    ranges: Ranges,
    framing: Framing,
}

fn missing(e: Missing) -> SpecError {
    SpecError(format!("the mit driver's schema: {e}"))
}

impl Mit {
    /// A motor with CAN id `id` replying on `master`, its replies laid out as `layout`,
    /// quantized over `ranges`, presented as fcan node `node` (named `name`, default
    /// `mit<node id>`).
    pub fn new(
        id: u16,
        master: u16,
        layout: Layout,
        ranges: Ranges,
        node: NodeId,
        name: Option<&str>,
    ) -> Result<Mit, SpecError> {
        let (schema, blob) =
            crate::spec::device_schema(DRIVER.name, BLOB, &format!("mit id {id}"), name, |_| {})?;
        let msgs = Msgs::of(&schema.types[0]).map_err(missing)?;
        Ok(Mit {
            id,
            master,
            layout,
            ranges,
            framing: Framing::Classic,
            node,
            blob,
            msgs,
            pending: [None; 3],
            refused: 0,
            watchdog: match layout {
                Layout::Damiao => Watchdog::Armed {
                    ms: WATCHDOG_DEFAULT_MS,
                },
                _ => Watchdog::None,
            },
            arming: false,
            arm_seen: None,
            reg_until: None,
            last_write: None,
            last_rewrite: None,
            last_tx: 0,
            last_heard: None,
            state: 0,
            said_unit: false,
        })
    }

    /// This motor with its command watchdog `watchdog` (a Damiao's default: armed,
    /// [`WATCHDOG_DEFAULT_MS`]). A layout without a timeout register stays
    /// [`Watchdog::None`]; for a Damiao, [`Watchdog::None`] is taken as [`Watchdog::Off`]:
    /// the motor has the register, so the driver always says what it holds.
    pub fn with_watchdog(mut self, watchdog: Watchdog) -> Mit {
        if self.layout == Layout::Damiao {
            self.watchdog = match watchdog {
                Watchdog::Armed { ms } => Watchdog::Armed {
                    ms: ms.clamp(1, WATCHDOG_MAX_MS),
                },
                _ => Watchdog::Off,
            };
        }
        self
    }

    /// `watchdog_ms=` / `watchdog=off` of a Damiao's spec (other layouts take neither).
    fn watchdog_key(
        keys: &mut crate::spec::Keys<'_>,
        layout: Layout,
    ) -> Result<Watchdog, SpecError> {
        if layout != Layout::Damiao {
            return Ok(Watchdog::None);
        }
        keys.watchdog(
            WATCHDOG_DEFAULT_MS,
            WATCHDOG_MAX_MS,
            "Damiao TIMEOUT, register 9: a u32 count, written as 50 µs counts",
        )
    }

    /// What `TIMEOUT` is set to before each enable: counts of 50 µs, 0 = off.
    pub fn timeout_count(&self) -> u32 {
        match self.watchdog {
            Watchdog::Armed { ms } => ms.saturating_mul(wire::TIMEOUT_COUNTS_PER_MS),
            _ => 0,
        }
    }

    fn has_register(&self) -> bool {
        self.watchdog != Watchdog::None
    }

    /// Queues `frame` for the motor in its framing, noting when it last heard the driver.
    fn tx(&mut self, now: u64, io: &mut Io, frame: Frame) {
        self.last_tx = self.last_tx.max(now);
        io.send(self.framing.apply(frame));
    }

    /// Writes `TIMEOUT` and reads it back.
    fn write_timeout(&mut self, now: u64, io: &mut Io) {
        let count = self.timeout_count();
        if !self.said_unit {
            self.said_unit = true;
            io.note(match self.watchdog {
                Watchdog::Armed { ms } => format!(
                    "{}: command watchdog {ms} ms written as TIMEOUT (register 9) = {count} \
                     counts of 50 µs; Damiao's documents do not settle the unit: if this \
                     firmware counts 1 ms, the motor times out after {} ms, 20 times later \
                     than asked (still armed, never sooner)",
                    self.describe(),
                    u64::from(count)
                ),
                _ => format!(
                    "{}: command watchdog off (watchdog=off): TIMEOUT (register 9) written as 0",
                    self.describe()
                ),
            });
        }
        let id = self.id;
        self.tx(now, io, wire::register_write(id, wire::RID_TIMEOUT, count));
        self.tx(now, io, wire::register_read(id, wire::RID_TIMEOUT));
        self.last_write = Some(now);
        self.reg_until = Some(now + CONFIRM_US);
    }

    /// Reads `TIMEOUT` back (the keepalive).
    fn read_timeout(&mut self, now: u64, io: &mut Io) {
        let id = self.id;
        self.tx(now, io, wire::register_read(id, wire::RID_TIMEOUT));
        self.reg_until = Some(now + CONFIRM_US);
    }

    /// How long the motor may go without hearing the driver before the driver reads
    /// `TIMEOUT` back to feed it: half the timeout, not under [`KEEPALIVE_MIN_US`].
    fn keepalive_at(&self) -> Option<u64> {
        let Watchdog::Armed { ms } = self.watchdog else {
            return None;
        };
        let k = (u64::from(ms) * 500).max(KEEPALIVE_MIN_US);
        (self.state == 1).then(|| self.last_tx.saturating_add(k))
    }

    /// Ends the enable call that waits for `TIMEOUT`, if one does: `success: false`,
    /// and a warning saying `why`.
    fn refuse_enable(&mut self, why: &str, io: &mut Io) {
        if self.arming && self.pending[0].is_some() {
            self.pending[0] = None;
            self.arming = false;
            self.arm_seen = None;
            io.warn(format!("{}: enable refused: {why}", self.describe()));
            io.complete(self.msgs.services[0], self.msgs.response.zeroed());
        }
    }

    /// The motor's answer to a read of `TIMEOUT`.
    fn on_timeout_read(&mut self, now: u64, value: u32, io: &mut Io) {
        let want = self.timeout_count();
        if self.arming {
            if value != want {
                // Perhaps the answer to a read sent before the write: the deadline decides.
                self.arm_seen = Some(value);
                return;
            }
            self.arming = false;
            self.arm_seen = None;
            if want == 0 {
                io.warn(format!(
                    "{}: enabled with its command watchdog off (watchdog=off): if the bus \
                     owner stops, the motor keeps its last command",
                    self.describe()
                ));
            }
            let id = self.id;
            if self.state == wire::LOST_COMMUNICATION {
                // Stopped by its own timeout: the error is cleared first, or the motor
                // would stay out of motor mode.
                self.tx(now, io, wire::clear_error(id));
            }
            self.tx(now, io, wire::enter(id));
            // `pending[0]` keeps its deadline: the reply to the enable answers it.
            return;
        }
        // At most one such rewrite per CONFIRM_US: a motor that does not take the write
        // must not be flooded.
        if value != want && self.last_rewrite.is_none_or(|t| now >= t + CONFIRM_US) {
            self.last_rewrite = Some(now);
            io.warn(format!(
                "{}: TIMEOUT (register 9) holds {value}, not the {want} written: the motor \
                 restarted or another tool set it; written again",
                self.describe()
            ));
            self.write_timeout(now, io);
        }
    }

    /// The same motor, its frames sent as `framing` says (Classical by default).
    pub fn with_framing(mut self, framing: Framing) -> Mit {
        self.framing = framing;
        self
    }

    /// How its frames go on the bus.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// `fd=true|false` and `brs=true|false` of a spec: [`Framing::Fd`] (BRS unless
    /// `brs=false`) only with `fd=true` and `layout=damiao` (Damiao's are the MIT motors
    /// documented on CAN FD); `brs` without `fd=true` is refused.
    fn framing_keys(
        keys: &mut crate::spec::Keys<'_>,
        layout: Layout,
    ) -> Result<Framing, SpecError> {
        let fd = keys.flag("fd")?;
        let brs = keys.flag("brs")?;
        match (fd, brs) {
            (Some(true), brs) if layout == Layout::Damiao => Ok(Framing::Fd {
                brs: brs.unwrap_or(true),
            }),
            (Some(true), _) => Err(keys.error(
                "fd",
                &format!(
                    "= true needs `layout=damiao`: Damiao's are the MIT motors documented on CAN FD \
                     (this one is `{layout}`)"
                ),
            )),
            (_, Some(_)) => Err(keys.error(
                "brs",
                "needs `fd=true` (bit-rate switching is a CAN FD feature)",
            )),
            _ => Ok(Framing::Classic),
        }
    }

    fn bus_keys(spec: &DeviceSpec) -> Result<(Bus, crate::spec::Keys<'_>), SpecError> {
        let mut keys = spec.keys();
        let below = FIRST_DATA_ID - 1;
        let id = keys
            .uint("id", below)?
            .ok_or_else(|| keys.error("id", "is missing (the motor's CAN id, below 0x100)"))?
            as u16;
        let master = keys.uint("master", below)?.unwrap_or(0) as u16;
        if master == id {
            return Err(keys.error("master", "must differ from `id`"));
        }
        let layout = match keys.string("layout")? {
            Some(l) => l.parse::<Layout>().map_err(|e| keys.error("layout", &e))?,
            None => Layout::default(),
        };
        let mut r = Ranges::default();
        // Symmetric shorthands first, then the explicit bounds.
        if let Some(p) = keys.positive("pmax")? {
            (r.p_min, r.p_max) = (-p, p);
        }
        if let Some(v) = keys.positive("vmax")? {
            (r.v_min, r.v_max) = (-v, v);
        }
        if let Some(t) = keys.positive("tmax")? {
            (r.t_min, r.t_max) = (-t, t);
        }
        if let Some(k) = keys.positive("kpmax")? {
            r.kp_max = k;
        }
        if let Some(k) = keys.positive("kdmax")? {
            r.kd_max = k;
        }
        let framing = Self::framing_keys(&mut keys, layout)?;
        let bus = Bus {
            id,
            master,
            layout,
            ranges: r,
            framing,
        };
        Ok((bus, keys))
    }

    /// From `mit:id=N[,master=0][,layout=cubemars|damiao][,node=N][,name=NAME][,pmax=…]
    /// [,vmax=…][,tmax=…][,kpmax=…][,kdmax=…][,fd=true[,brs=false]]`, and for
    /// `layout=damiao` `[,watchdog_ms=200|,watchdog=off]` (docs/drivers.md).
    pub fn from_spec(spec: &DeviceSpec) -> Result<Mit, SpecError> {
        let (b, mut keys) = Self::bus_keys(spec)?;
        let node = keys.node(u32::from(b.id))?;
        let name = keys.string("name")?;
        let watchdog = Self::watchdog_key(&mut keys, b.layout)?;
        keys.finish()?;
        Ok(
            Mit::new(b.id, b.master, b.layout, b.ranges, node, name.as_deref())?
                .with_framing(b.framing)
                .with_watchdog(watchdog),
        )
    }

    /// The simulated motor a spec describes.
    pub fn simulated(spec: &DeviceSpec) -> Result<Box<dyn crate::sim::SimDevice>, SpecError> {
        let (b, mut keys) = Self::bus_keys(spec)?;
        let _ = keys.uint("node", 0x7E)?;
        let _ = keys.string("name")?;
        let _ = Self::watchdog_key(&mut keys, b.layout)?;
        keys.finish()?;
        Ok(Box::new(
            super::sim::SimMit::new(b.id, b.master, b.layout, b.ranges).with_framing(b.framing),
        ))
    }

    /// Commands refused before they reached the motor (a non-finite value).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The motor field of a reply that is this motor's: Damiao's replies carry only the
    /// id's low four bits.
    fn mine(&self, motor: u8) -> bool {
        match self.layout {
            Layout::Damiao => u16::from(motor & 0x0F) == self.id & 0x0F,
            _ => u16::from(motor) == self.id,
        }
    }
}

impl Msgs {
    fn of(ty: &fcan_core::ir::BlockType) -> Result<Msgs, Missing> {
        let feedback = Message::topic(ty, "feedback")?;
        let fb = [
            feedback.1.slot("position")?,
            feedback.1.slot("velocity")?,
            feedback.1.slot("torque")?,
            feedback.1.slot("temperature")?,
            feedback.1.slot("error")?,
        ];
        let (mit, m) = Message::topic(ty, "mit")?;
        let cmd = MitSlots::of(&m)?;
        let services = [
            Message::service(ty, "enable")?,
            Message::service(ty, "disable")?,
            Message::service(ty, "set_zero")?,
        ];
        let response = Message::new(&ty.services[services[0] as usize].response);
        let success = response.slot("success")?;
        Ok(Msgs {
            feedback,
            fb,
            mit,
            cmd,
            services,
            response,
            success,
        })
    }
}

impl Device for Mit {
    fn driver(&self) -> &'static str {
        DRIVER.name
    }

    fn describe(&self) -> String {
        match self.framing {
            Framing::Classic => format!("mit id {:#05X}", self.id),
            f => format!("mit id {:#05X} ({f})", self.id),
        }
    }

    fn bus_key(&self) -> String {
        format!(
            "MIT motor {:#05X} (replies on {:#05X})",
            self.id, self.master
        )
    }

    fn node_id(&self) -> NodeId {
        self.node
    }

    fn link_needed(&self) -> fcan_core::frame::Mtu {
        self.framing.mtu()
    }

    fn watchdog(&self) -> Watchdog {
        self.watchdog
    }

    fn blob(&self) -> &[u8] {
        &self.blob
    }

    fn claims(&self, frame: &Frame) -> bool {
        if frame.id() != CanId::Standard(self.master) {
            return false;
        }
        wire::decode_reply(frame, self.layout, &self.ranges).is_some_and(|fb| self.mine(fb.motor))
    }

    fn owns(&self, frame: &Frame) -> bool {
        // Its replies, every frame sent to its id (commands and mode changes), and a
        // Damiao's register frames naming it.
        self.claims(frame)
            || frame.id() == CanId::Standard(self.id)
            || (self.has_register()
                && wire::decode_register_request(frame).is_some_and(|r| r.motor == self.id))
    }

    fn on_frame(&mut self, now: u64, frame: &Frame, io: &mut Io) {
        if self.has_register() {
            let silent = self
                .last_heard
                .is_none_or(|h| now.saturating_sub(h) >= SILENCE_US);
            self.last_heard = Some(now);
            if self.reg_until.is_some_and(|t| now <= t) {
                if let Some(r) = wire::decode_register_reply(frame)
                    .filter(|r| r.motor == self.id && r.rid == wire::RID_TIMEOUT)
                {
                    // The write's echo (0x55) says nothing the read-back does not.
                    if r.op == wire::REGISTER_READ {
                        self.on_timeout_read(now, r.value_u32(), io);
                    }
                    return;
                }
            }
            if silent && self.last_write.is_none_or(|t| now >= t + CONFIRM_US) {
                // A motor that answers after silence may have restarted with another
                // TIMEOUT: written again at once (enables arm it anyway).
                self.write_timeout(now, io);
            }
        }
        let Some(fb) = wire::decode_reply(frame, self.layout, &self.ranges) else {
            return;
        };
        if self.layout == Layout::Damiao {
            self.state = fb.error;
        }
        let m = &self.msgs;
        let mut buf = m.feedback.1.zeroed();
        let values = [
            f64::from(fb.position),
            f64::from(fb.velocity),
            f64::from(fb.torque),
            fb.temperature.map_or(f64::NAN, f64::from),
            f64::from(fb.error),
        ];
        for (slot, v) in m.fb.iter().zip(values) {
            slot.set(&mut buf, v);
        }
        io.publish(m.feedback.0, buf);
        // Every reply answers the frame before it: whatever service waits is done (but
        // an enable still waiting for its watchdog's read-back has sent nothing yet).
        let arming = self.arming;
        for (s, p) in self.pending.iter_mut().enumerate() {
            if s == 0 && arming {
                continue;
            }
            if p.take().is_some() {
                let mut r = m.response.zeroed();
                m.success.set(&mut r, 1.0);
                io.complete(m.services[s], r);
            }
        }
    }

    fn on_command(&mut self, now: u64, topic: u8, bytes: &[u8], io: &mut Io) {
        if topic != self.msgs.mit {
            return;
        }
        let Some([position, velocity, kp, kd, torque]) = self.msgs.cmd.read(bytes) else {
            let who = self.describe();
            refuse_once(
                &mut self.refused,
                &who,
                "a mit command with a non-finite value",
                io,
            );
            return;
        };
        let cmd = Command {
            position,
            velocity,
            kp,
            kd,
            torque,
        };
        let frame = wire::command(self.id, &self.ranges, &cmd);
        self.tx(now, io, frame);
    }

    // No `on_params`: the schema has no parameters; the ranges are the driver's
    // configuration.

    fn on_service(&mut self, now: u64, service: u8, _request: &[u8], io: &mut Io) -> Served {
        let Some(s) = self.msgs.services.iter().position(|&x| x == service) else {
            return Served::Busy;
        };
        if self.pending[s].is_some() {
            return Served::Busy;
        }
        if s == 0 && self.has_register() {
            // The command watchdog first, on every enable (module docs): the enable
            // itself goes out when the read-back confirms the value.
            self.write_timeout(now, io);
            self.arming = true;
            self.arm_seen = None;
            self.pending[0] = Some(now + CONFIRM_US);
            return Served::Pending;
        }
        if s == 1 {
            // A disable after an enable still arming: that enable must not follow it.
            self.refuse_enable(
                "a disable was asked before the motor confirmed its watchdog",
                io,
            );
        }
        let id = self.id;
        let frame = match s {
            0 => wire::enter(id),
            1 => wire::exit(id),
            _ => wire::set_zero(id),
        };
        self.tx(now, io, frame);
        self.pending[s] = Some(now + CONFIRM_US);
        Served::Pending
    }

    fn poll_at(&self) -> Option<u64> {
        let first = (self.has_register() && self.last_write.is_none()).then_some(0);
        self.pending
            .iter()
            .flatten()
            .copied()
            .chain(self.keepalive_at())
            .chain(first)
            .min()
    }

    fn poll(&mut self, now: u64, io: &mut Io) {
        if self.has_register() && self.last_write.is_none() {
            // Armed from the start, before anyone enables it: a motor left enabled by a
            // previous bus owner is guarded too.
            self.write_timeout(now, io);
        }
        for s in 0..self.pending.len() {
            if self.pending[s].is_some_and(|d| now >= d) {
                if s == 0 && self.arming {
                    let seen = match self.arm_seen {
                        Some(v) => format!(" (it answered {v})"),
                        None => String::new(),
                    };
                    let why = format!(
                        "the motor did not confirm its command watchdog (TIMEOUT, register 9 \
                         = {}, {}) within {} ms{seen}",
                        self.timeout_count(),
                        self.watchdog,
                        CONFIRM_US / 1000
                    );
                    self.refuse_enable(&why, io);
                    continue;
                }
                self.pending[s] = None;
                io.complete(self.msgs.services[s], self.msgs.response.zeroed());
            }
        }
        if self.keepalive_at().is_some_and(|t| now >= t) {
            // Feeds the watchdog while the bus owner lives, and tells a motor that no
            // longer holds the value (see `on_timeout_read`).
            self.read_timeout(now, io);
        }
    }

    fn present(&self) -> bool {
        true
    }

    fn on_node(&mut self, _now: u64, event: crate::device::NodeEvent, io: &mut Io) {
        if event == crate::device::NodeEvent::MasterLost {
            // Nobody to drive the motor after it: an enable still arming is not sent.
            self.refuse_enable(
                "the master was lost before the motor confirmed its watchdog",
                io,
            );
        }
    }
}
