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
//! **No device watchdog is armed** ([`Watchdog::None`]): the MIT frame set (command,
//! enter, exit, zero) has no timeout setting, and Mini Cheetah, CubeMars and MyActuator
//! document none reachable through it. Damiao motors have one (register `TIMEOUT`,
//! RID 9; a timeout reported as status `0xD`, lost communication), but its
//! register frames go to identifier `0x7FF`, inside fcan's data plane, and reply in a
//! layout this driver does not decode yet: arming it is left for a `damiao` driver
//! (docs/drivers.md). A motor driven here keeps its last command when the bus owner
//! dies unless its own configuration (a vendor tool) set a timeout.

use fcan_core::frame::{CanId, Frame};
use fcan_core::id::NodeId;

use super::wire::{self, Command, Layout, Ranges};
use crate::device::{Device, Io, Served, Watchdog};
use crate::message::{refuse_once, Message, Missing, MitSlots, Slot};
use crate::spec::{DeviceSpec, SpecError};

/// The schema the driver ships, compiled at build time.
pub const BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/mit.bin"));

/// A service waits this long for the motor's reply (below the runtime's 1 s bound on a
/// deferred reply).
pub const CONFIRM_US: u64 = 800_000;

/// fcan's data plane starts here: device identifiers stay below.
const FIRST_DATA_ID: u32 = 0x100;

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

/// One MIT-mode actuator. See the [module docs](self).
#[derive(Debug)]
pub struct Mit {
    id: u16,
    master: u16,
    layout: Layout,
    ranges: Ranges,
    node: NodeId,
    blob: Vec<u8>,
    msgs: Msgs,
    pending: [Option<u64>; 3],
    refused: u64,
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
            crate::spec::device_schema("mit", BLOB, &format!("mit id {id}"), name, |_| {})?;
        let msgs = Msgs::of(&schema.types[0]).map_err(missing)?;
        Ok(Mit {
            id,
            master,
            layout,
            ranges,
            node,
            blob,
            msgs,
            pending: [None; 3],
            refused: 0,
        })
    }

    fn bus_keys(
        spec: &DeviceSpec,
    ) -> Result<(u16, u16, Layout, Ranges, crate::spec::Keys<'_>), SpecError> {
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
        Ok((id, master, layout, r, keys))
    }

    /// From `mit:id=N[,master=0][,layout=cubemars|damiao][,node=N][,name=NAME][,pmax=…]
    /// [,vmax=…][,tmax=…][,kpmax=…][,kdmax=…]` (docs/drivers.md).
    pub fn from_spec(spec: &DeviceSpec) -> Result<Mit, SpecError> {
        let (id, master, layout, ranges, mut keys) = Self::bus_keys(spec)?;
        let node = keys.node(u32::from(id))?;
        let name = keys.string("name")?;
        keys.finish()?;
        Mit::new(id, master, layout, ranges, node, name.as_deref())
    }

    /// The simulated motor a spec describes.
    pub fn simulated(spec: &DeviceSpec) -> Result<Box<dyn crate::sim::SimDevice>, SpecError> {
        let (id, master, layout, ranges, mut keys) = Self::bus_keys(spec)?;
        let _ = keys.uint("node", 0x7E)?;
        let _ = keys.string("name")?;
        keys.finish()?;
        Ok(Box::new(super::sim::SimMit::new(
            id, master, layout, ranges,
        )))
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
        "mit"
    }

    fn describe(&self) -> String {
        format!("mit id {:#05X}", self.id)
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

    fn watchdog(&self) -> Watchdog {
        Watchdog::None
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
        // Its replies, and every frame sent to its id (commands and mode changes).
        self.claims(frame) || frame.id() == CanId::Standard(self.id)
    }

    fn on_frame(&mut self, _now: u64, frame: &Frame, io: &mut Io) {
        let Some(fb) = wire::decode_reply(frame, self.layout, &self.ranges) else {
            return;
        };
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
        // Every reply answers the frame before it: whatever service waits is done.
        for (s, p) in self.pending.iter_mut().enumerate() {
            if p.take().is_some() {
                let mut r = m.response.zeroed();
                m.success.set(&mut r, 1.0);
                io.complete(m.services[s], r);
            }
        }
    }

    fn on_command(&mut self, _now: u64, topic: u8, bytes: &[u8], io: &mut Io) {
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
        io.send(wire::command(self.id, &self.ranges, &cmd));
    }

    fn on_params(
        &mut self,
        _now: u64,
        _changed: u32,
        _value: &dyn Fn(u8) -> Option<Vec<u8>>,
        _io: &mut Io,
    ) {
        // The schema has no parameters: the ranges are the driver's configuration.
    }

    fn on_service(&mut self, now: u64, service: u8, _request: &[u8], io: &mut Io) -> Served {
        let Some(s) = self.msgs.services.iter().position(|&x| x == service) else {
            return Served::Busy;
        };
        if self.pending[s].is_some() {
            return Served::Busy;
        }
        io.send(match s {
            0 => wire::enter(self.id),
            1 => wire::exit(self.id),
            _ => wire::set_zero(self.id),
        });
        self.pending[s] = Some(now + CONFIRM_US);
        Served::Pending
    }

    fn poll_at(&self) -> Option<u64> {
        self.pending.iter().flatten().min().copied()
    }

    fn poll(&mut self, now: u64, io: &mut Io) {
        for s in 0..self.pending.len() {
            if self.pending[s].is_some_and(|d| now >= d) {
                self.pending[s] = None;
                io.complete(self.msgs.services[s], self.msgs.response.zeroed());
            }
        }
    }

    fn present(&self) -> bool {
        true
    }
}
