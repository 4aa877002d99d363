//! The driver contract: one off-the-shelf device, sans I/O.
//!
//! A [`Device`] is a protocol adapter in the engine's style: it claims the bus frames that
//! are its device's ([`Device::claims`]), keeps that device's state, says what to send and
//! when ([`Device::poll_at`]), and is presented to the master as an fcan node of the
//! schema it ships ([`Device::blob`]). The [`crate::host::DeviceHost`] runs that node with
//! the firmware's own runtime, so the master and every face see an ordinary fcan node;
//! the device hears about the node's side (commands, parameters, service calls) through
//! the `on_*` methods and answers through [`Io`].
//!
//! Time is microseconds on the host's monotonic clock ([`crate::host`]).

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::NodeId;

/// What a device hands back to the host while it handles something: frames for the bus,
/// values for its node's topics, completions of deferred service calls.
#[derive(Debug, Default)]
pub struct Io {
    pub(crate) to_bus: Vec<Frame>,
    pub(crate) publish: Vec<(u8, Vec<u8>)>,
    pub(crate) complete: Vec<(u8, Vec<u8>)>,
    pub(crate) notes: Vec<Note>,
}

/// Something worth a line in the bus owner's log: a device came or went, a fault, a
/// command it could not take. The I/O shell ([`crate::link`]) logs it at its severity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// How much it matters.
    pub severity: Severity,
    /// What happened, naming the device.
    pub text: String,
}

impl Note {
    /// A note of `severity` saying `text`.
    pub fn new(severity: Severity, text: String) -> Note {
        Note { severity, text }
    }
}

impl core::fmt::Display for Note {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.text)
    }
}

/// How much a [`Note`] matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Severity {
    /// The expected course: a device answered and is presented as a node.
    Info,
    /// Something a robot's operator should see, though the host goes on: a device fell
    /// silent or restarted, a command was refused.
    Warn,
    /// The host could not do its part: a device's node did not start.
    Error,
}

impl Io {
    /// Queues `frame` for the bus.
    pub fn send(&mut self, frame: Frame) {
        self.to_bus.push(frame);
    }

    /// Publishes `bytes` (packed as the schema lays the topic out) on topic `topic` of
    /// the device's node.
    pub fn publish(&mut self, topic: u8, bytes: Vec<u8>) {
        self.publish.push((topic, bytes));
    }

    /// Completes the call of service `service` that [`Device::on_service`] answered
    /// [`Served::Pending`].
    pub fn complete(&mut self, service: u8, response: Vec<u8>) {
        self.complete.push((service, response));
    }

    /// Something worth a line in the bus owner's log, in the expected course (a device
    /// answered).
    pub fn note(&mut self, text: String) {
        self.notes.push(Note::new(Severity::Info, text));
    }

    /// Something the operator should see (a device fell silent or restarted, a command
    /// it could not take): logged as a warning.
    pub fn warn(&mut self, text: String) {
        self.notes.push(Note::new(Severity::Warn, text));
    }

    /// The frames queued for the bus so far (for tests and decoders).
    pub fn frames(&self) -> &[Frame] {
        &self.to_bus
    }

    /// The notes for the log so far.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The topic values published so far, as `(topic, bytes)`.
    pub fn published(&self) -> &[(u8, Vec<u8>)] {
        &self.publish
    }

    /// The deferred service calls completed so far, as `(service, response bytes)`.
    pub fn completed(&self) -> &[(u8, Vec<u8>)] {
        &self.complete
    }
}

/// A device's own command watchdog, as its driver arms it: what stops the device when
/// the bus owner (`fcan serve`, a `Master`) dies or the bus is cut. Shown beside the
/// driver in node info (through [`fcan_transport::NodeOrigin`]) and in the log line of a
/// device that answers (docs/drivers.md). One type with the link's: defined there.
pub use fcan_transport::DeviceWatchdog as Watchdog;

/// How a service call was taken.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Served {
    /// Answered now with this response (packed).
    Done(Vec<u8>),
    /// The answer follows through [`Io::complete`] (the master is told ACCEPTED).
    Pending,
    /// Cannot take it now (another call of this service is pending).
    Busy,
}

/// What happened on the node's side that a device may need to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeEvent {
    /// The master started the node: commands flow from now on.
    Started,
    /// The master was lost (no heartbeat for the node's timeout): the device decides its
    /// safe state. No driver here sends anything on its own at that point: a motor holds
    /// what its own protocol says it holds (docs/drivers.md).
    MasterLost,
}

/// One device on the bus, as its driver sees it. See the [module docs](self).
pub trait Device: Send {
    /// The driver's name (`robstride`), shown in node info.
    fn driver(&self) -> &'static str;
    /// The device in words (`robstride RS03 id 1`), for logs and errors.
    fn describe(&self) -> String;
    /// What the device answers to on the bus (`robstride motor 1 (host 0xFD)`): two
    /// devices with one key would claim each other's frames, so that is refused.
    fn bus_key(&self) -> String;
    /// The fcan node id it is presented under.
    fn node_id(&self) -> NodeId;
    /// The device's own command watchdog, as this driver arms it. Default: none.
    fn watchdog(&self) -> Watchdog {
        Watchdog::None
    }
    /// The link its frames need: [`Mtu::Fd`] for a device set to CAN FD, whose frames a
    /// Classical link refuses ([`DeviceHost::new`](crate::DeviceHost::new) refuses such a
    /// device on a Classical link, naming it). Default: Classical, which every link carries.
    fn link_needed(&self) -> Mtu {
        Mtu::Classic
    }
    /// The schema blob of its node.
    fn blob(&self) -> &[u8];
    /// Whether `frame`, received from the bus, is this device's (it is then given to
    /// [`on_frame`](Self::on_frame) and to nobody else).
    fn claims(&self, frame: &Frame) -> bool;
    /// Whether `frame` is this device's traffic at all: what it answers ([`claims`]) and
    /// what is sent to it (by this host or another tool on the bus). Such frames never
    /// reach the master — vendor identifiers can look like fcan ones — and `fcan decode`
    /// does not take them for fcan traffic. Default: what it claims.
    ///
    /// [`claims`]: Self::claims
    fn owns(&self, frame: &Frame) -> bool {
        self.claims(frame)
    }
    /// A frame this device claimed.
    fn on_frame(&mut self, now: u64, frame: &Frame, io: &mut Io);
    /// A command topic of its node received a value (`bytes`, packed).
    fn on_command(&mut self, now: u64, topic: u8, bytes: &[u8], io: &mut Io);
    /// The master committed parameter writes: bit `i` of `changed` is parameter `i`;
    /// `value(i)` is its packed value now. By default nothing: a device whose schema
    /// has no parameters (its settings are its own, or the driver's configuration).
    fn on_params(
        &mut self,
        now: u64,
        changed: u32,
        value: &dyn Fn(u8) -> Option<Vec<u8>>,
        io: &mut Io,
    ) {
        let _ = (now, changed, value, io);
    }
    /// A service call with its packed request.
    fn on_service(&mut self, now: u64, service: u8, request: &[u8], io: &mut Io) -> Served;
    /// Something happened on the node's side.
    fn on_node(&mut self, now: u64, event: NodeEvent, io: &mut Io) {
        let _ = (now, event, io);
    }
    /// When [`poll`](Self::poll) next has work.
    fn poll_at(&self) -> Option<u64>;
    /// Work due at `now`: probes, periodic reads, timeouts.
    fn poll(&mut self, now: u64, io: &mut Io);
    /// Whether the device answers now. Its node is on the bus only while it does, so the
    /// master sees a device that goes silent as a node that went offline, and one that
    /// comes back as a node that rebooted (and re-provisions it: parameters it set are
    /// written again).
    fn present(&self) -> bool;
    /// Frames to this device cannot be sent (the bus is wedged: a full transmit queue,
    /// bus-off) since `since`. A device must not take the silence that follows for its
    /// own absence.
    fn on_bus_wedged(&mut self, now: u64) {
        let _ = now;
    }
}
