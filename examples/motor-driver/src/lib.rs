//! Example firmware: an eight-motor driver board.
//!
//! The same code runs on the host (attached to the simulated bus or SocketCAN by
//! `fcan-examples`) and on a Cortex-M4F (`examples/firmware`). Per motor:
//!
//! - a simulated motor ([`physics::SimMotor`]) with a velocity loop and a cascaded
//!   position loop whose gains are schema parameters;
//! - `target` (duty / velocity / position, selected by its `type` field) and
//!   `trajectory` (position with velocity feed-forward) commands from the master;
//! - `feedback` published for the runtime to send every 5 ms;
//! - `reset_encoder` and `clear_fault` services;
//! - **safety**: a command older than `command_timeout_ms`, or the master lost, stops the
//!   motor — the application decides, the runtime only tells it.
#![no_std]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod physics;

/// The code `fcan-codegen` generated from `schema/examples/motor_driver.yaml`.
#[allow(missing_docs)]
pub mod gen {
    include!(concat!(env!("OUT_DIR"), "/fcan_gen.rs"));
}

use fcan_runtime_nostd::fcan_core::frame::Frame;
use fcan_runtime_nostd::fcan_core::timing::reached;
use fcan_runtime_nostd::{ConfigError, Event, Reply, Transmit};
use gen::motor::{self, ClearFaultRequest, ClearFaultResponse, MotorParams};
use gen::motor::{ResetEncoderRequest, ResetEncoderResponse};
use gen::Deferred;
use physics::{clamp, Pid, SimMotor};

/// Motors on this board type (the schema's `max_count`).
pub const MOTORS: usize = gen::MOTOR_MAX_COUNT as usize;

/// `target.type` values.
pub mod mode {
    /// `value` is a duty cycle, −1..=1.
    pub const DUTY: u8 = 0;
    /// `value` is a velocity (rev/s).
    pub const VELOCITY: u8 = 1;
    /// `value` is a position (rev).
    pub const POSITION: u8 = 2;
}

/// Control period.
pub const CONTROL_PERIOD_US: u32 = 1_000;

/// One motor's controller state. All zero at boot, so the firmware's `static` is in
/// `.bss`; its gains come from the motor's params when the node is configured.
#[derive(Clone, Copy, Debug, Default)]
struct Axis {
    motor: SimMotor,
    velocity_pid: Pid,
    position_pid: Pid,
    encoder_offset: f32,
    invert: bool,
    alpha: f32,
    filtered_velocity: f32,
    command_timeout_us: u32,
    /// The motor was stopped (no fresh command, or no master): loop history cleared.
    stopped: bool,
    /// A fresh command drove it at the last control step (an update is refused then).
    #[cfg(feature = "update")]
    driven: bool,
}

/// A command the loop acts on: mode, value, velocity feed-forward, when it arrived.
type Command = (u8, f32, f32, u32);

impl Axis {
    const IDLE: Axis = Axis {
        motor: SimMotor::REST,
        velocity_pid: Pid::ZERO,
        position_pid: Pid::ZERO,
        encoder_offset: 0.0,
        invert: false,
        alpha: 0.0,
        filtered_velocity: 0.0,
        command_timeout_us: 0,
        stopped: false,
        #[cfg(feature = "update")]
        driven: false,
    };

    fn tune(&mut self, p: &MotorParams) {
        let v = (
            p.velocity_kp,
            p.velocity_ki,
            p.velocity_kd,
            p.velocity_limit,
        );
        self.velocity_pid.tune(v.0, v.1, v.2, v.3);
        let q = (
            p.position_kp,
            p.position_ki,
            p.position_kd,
            p.position_limit,
        );
        self.position_pid.tune(q.0, q.1, q.2, q.3);
        self.invert = p.invert;
        self.alpha = p.filter_alpha;
        self.command_timeout_us = p.command_timeout_ms as u32 * 1000;
    }

    fn sign(&self) -> f32 {
        if self.invert {
            -1.0
        } else {
            1.0
        }
    }

    /// Position as reported: after the encoder offset and the inversion.
    fn position(&self) -> f32 {
        self.sign() * (self.motor.position - self.encoder_offset)
    }

    /// One control step: the duty the command asks for (0 and a cleared loop when it is
    /// stale, missing or the master is gone), applied to the motor; returns the feedback.
    fn step(
        &mut self,
        command: Option<Command>,
        running: bool,
        now: u32,
        dt: f32,
    ) -> motor::Feedback {
        let sign = self.sign();
        let position = self.position();
        self.filtered_velocity +=
            self.alpha * (sign * self.motor.velocity - self.filtered_velocity);
        let timeout = self.command_timeout_us;
        let fresh = |at: u32| timeout == 0 || now.wrapping_sub(at) <= timeout;
        let duty = match command {
            Some((m, value, feed_forward, at)) if running && fresh(at) && value.is_finite() => {
                self.stopped = false;
                #[cfg(feature = "update")]
                {
                    self.driven = true;
                }
                match m {
                    mode::DUTY => clamp(value, -1.0, 1.0),
                    mode::VELOCITY => self.velocity_pid.update(value - self.filtered_velocity, dt),
                    mode::POSITION => {
                        let v = self.position_pid.update(value - position, dt) + feed_forward;
                        self.velocity_pid.update(v - self.filtered_velocity, dt)
                    }
                    _ => 0.0,
                }
            }
            _ => {
                // Stale command, no command, or no master: stop, and forget loop history
                // so the motor does not jump when commands resume.
                if !self.stopped {
                    self.velocity_pid.reset();
                    self.position_pid.reset();
                    self.stopped = true;
                }
                #[cfg(feature = "update")]
                {
                    self.driven = false;
                }
                0.0
            }
        };
        self.motor.step(sign * duty, dt);
        motor::Feedback {
            ready: running && !self.stopped,
            position: self.position(),
            velocity: self.filtered_velocity,
            current: self.motor.current(),
        }
    }
}

/// The application: motors and what the handlers need. Separate from the node, because
/// the node calls it from `poll`.
pub struct MotorApp {
    axes: [Axis; MOTORS],
    master_present: bool,
    /// Events seen, for diagnostics and tests.
    pub events: EventLog,
    /// Where firmware updates are staged (the board's spare flash), once the firmware
    /// gave one ([`MotorDriver::take_updates`]).
    #[cfg(feature = "update")]
    staging: Option<&'static mut dyn fcan_runtime_nostd::Update>,
}

/// Counts of the events the runtime reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventLog {
    /// `Event::Started`.
    pub started: u32,
    /// `Event::MasterLost`.
    pub master_lost: u32,
    /// `Event::IdCollision`.
    pub collisions: u32,
}

impl motor::Handler for MotorApp {
    fn reset_encoder(
        &mut self,
        motor: motor::Handle<'_>,
        request: ResetEncoderRequest,
        _token: Deferred<ResetEncoderResponse>,
    ) -> Reply<ResetEncoderResponse> {
        let Some(axis) = self.axes.get_mut(motor.instance() as usize) else {
            return Reply::Failed;
        };
        // `offset: true` shifts zero down by `value`; `false` makes the current
        // position read as `value`.
        let raw = axis.motor.position;
        axis.encoder_offset = if request.offset {
            axis.encoder_offset + request.value
        } else {
            raw - request.value
        };
        axis.position_pid.reset();
        Reply::Ok(ResetEncoderResponse { success: true })
    }

    fn clear_fault(
        &mut self,
        motor: motor::Handle<'_>,
        _request: ClearFaultRequest,
        _token: Deferred<ClearFaultResponse>,
    ) -> Reply<ClearFaultResponse> {
        let Some(axis) = self.axes.get_mut(motor.instance() as usize) else {
            return Reply::Failed;
        };
        axis.velocity_pid.reset();
        axis.position_pid.reset();
        Reply::Ok(ClearFaultResponse { success: true })
    }

    fn on_params_changed(&mut self, motor: motor::Handle<'_>, _changed: u32) {
        // The handle reads the new values: retune this motor now.
        if let (Some(a), Some(p)) = (self.axes.get_mut(motor.instance() as usize), motor.params()) {
            a.tune(&p);
        }
    }
}

impl gen::App for MotorApp {
    #[cfg(feature = "update")]
    fn update(&mut self) -> Option<&mut dyn fcan_runtime_nostd::Update> {
        match self.staging {
            Some(_) => Some(self),
            None => None,
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Started => {
                self.master_present = true;
                self.events.started += 1;
            }
            // Safety: no master, no motion. The control loop sees this on its next step.
            Event::MasterLost => {
                self.master_present = false;
                self.events.master_lost += 1;
            }
            Event::PlanReset => self.master_present = false,
            Event::IdCollision => self.events.collisions += 1,
            Event::Acknowledged => {}
        }
    }
}

/// Firmware updates: the staging area the firmware gave, with the application's say on
/// when an update may start: never while a motor is driven by a fresh command (its
/// output is live), in any node state otherwise (a node the master lost has stopped its
/// motors, and takes an update).
#[cfg(feature = "update")]
impl fcan_runtime_nostd::Update for MotorApp {
    fn capacity(&self) -> u32 {
        self.staging.as_ref().map_or(0, |s| s.capacity())
    }

    fn chunk(&self) -> u16 {
        self.staging.as_ref().map_or(256, |s| s.chunk())
    }

    fn version(&self) -> &str {
        self.staging.as_ref().map_or("", |s| s.version())
    }

    fn offered(
        &mut self,
        offer: &fcan_runtime_nostd::fcan_core::msg::UpdateOffer<'_>,
        state: fcan_runtime_nostd::fcan_core::msg::NodeState,
    ) -> Result<(), fcan_runtime_nostd::fcan_core::msg::UpdateReason> {
        let _ = (offer, state);
        if self.axes.iter().any(|a| a.driven) {
            return Err(fcan_runtime_nostd::fcan_core::msg::UpdateReason::NotSafe);
        }
        Ok(())
    }

    fn begin(&mut self, size: u32) -> Result<(), fcan_runtime_nostd::FlashError> {
        self.staging
            .as_mut()
            .ok_or(fcan_runtime_nostd::FlashError)?
            .begin(size)
    }

    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), fcan_runtime_nostd::FlashError> {
        self.staging
            .as_mut()
            .ok_or(fcan_runtime_nostd::FlashError)?
            .write(offset, data)
    }

    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), fcan_runtime_nostd::FlashError> {
        self.staging
            .as_mut()
            .ok_or(fcan_runtime_nostd::FlashError)?
            .read(offset, buf)
    }

    fn mark_bootable(
        &mut self,
        size: u32,
        sha256: &[u8; 32],
    ) -> Result<(), fcan_runtime_nostd::FlashError> {
        self.staging
            .as_mut()
            .ok_or(fcan_runtime_nostd::FlashError)?
            .mark_bootable(size, sha256)
    }

    fn reboot(&mut self) {
        if let Some(s) = self.staging.as_mut() {
            s.reboot();
        }
    }
}

/// The whole firmware: the generated node plus the application.
pub struct MotorDriver {
    /// The fcan node (generated wrapper around the runtime).
    pub node: gen::Node,
    /// The application.
    pub app: MotorApp,
    next_control_us: u32,
}

/// What one motor is doing, for tests and displays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AxisView {
    /// Position as reported (after encoder offset and inversion).
    pub position: f32,
    /// Velocity (rev/s).
    pub velocity: f32,
    /// Duty applied.
    pub duty: f32,
}

impl MotorDriver {
    /// Boots the firmware (see [`MotorDriver::configure`]). Returns it by value (several
    /// KB): a board with a small stack puts [`MotorDriver::unconfigured`] in a `static`
    /// and calls [`MotorDriver::configure`] instead.
    pub fn new(config: gen::Config) -> Result<Self, ConfigError> {
        let mut fw = Self::unconfigured();
        fw.configure(config)?;
        Ok(fw)
    }

    /// The firmware before boot: `const` and all zero, so a `static` of it is in `.bss`.
    /// Inert, with no motor wired, until [`MotorDriver::configure`] succeeds.
    pub const fn unconfigured() -> Self {
        MotorDriver {
            node: gen::Node::unconfigured(),
            app: MotorApp {
                axes: [Axis::IDLE; MOTORS],
                master_present: false,
                events: EventLog {
                    started: 0,
                    master_lost: 0,
                    collisions: 0,
                },
                #[cfg(feature = "update")]
                staging: None,
            },
            next_control_us: 0,
        }
    }

    /// Takes firmware updates over the bus into `staging` (the board's spare flash; the
    /// node announces the capability from its next poll). Only with the `update` feature.
    #[cfg(feature = "update")]
    pub fn take_updates(&mut self, staging: &'static mut dyn fcan_runtime_nostd::Update) {
        self.app.staging = Some(staging);
    }

    /// Boots the firmware in place: the node configured afresh (`config.counts.motor`
    /// motors wired), the motors at rest and tuned from their params. On error nothing
    /// is wired and the node stays inert.
    pub fn configure(&mut self, config: gen::Config) -> Result<(), ConfigError> {
        // Field by field: no MotorApp-sized temporary on the stack.
        self.app.axes.iter_mut().for_each(|a| *a = Axis::IDLE);
        self.app.master_present = false;
        self.app.events = EventLog::default();
        self.next_control_us = 0;
        self.node.configure(config)?;
        for (i, a) in self.app.axes.iter_mut().enumerate() {
            if let Some(p) = self.node.motor(i as u8).and_then(|m| m.params()) {
                a.tune(&p);
            }
        }
        Ok(())
    }

    /// A frame from the bus.
    pub fn receive(&mut self, frame: &Frame, now_us: u32) {
        self.node.receive(frame, now_us);
    }

    /// Every frame an interrupt handler left in the receive mailbox.
    pub fn receive_from<const N: usize>(
        &mut self,
        mailbox: &mut fcan_runtime_nostd::MailboxConsumer<'_, N>,
    ) {
        self.node.receive_from(mailbox);
    }

    /// Runs the control loop when due, then the node (which sends what is due through
    /// `tx`). Call often (every 100 µs–1 ms), or when [`MotorDriver::poll_at`] says.
    pub fn poll(&mut self, now_us: u32, tx: &mut impl Transmit) {
        if reached(now_us, self.next_control_us) {
            self.next_control_us = now_us.wrapping_add(CONTROL_PERIOD_US);
            self.control(now_us, CONTROL_PERIOD_US as f32 * 1e-6);
        }
        self.node.poll(now_us, tx, &mut self.app);
    }

    /// When [`MotorDriver::poll`] is next due: the next control step or the node's next
    /// deadline, whichever is first (a received frame may make it sooner).
    pub fn poll_at(&self, now_us: u32) -> u32 {
        let control = self.next_control_us;
        match self.node.poll_at(now_us) {
            Some(t) if t.wrapping_sub(now_us) < control.wrapping_sub(now_us) => t,
            _ => control,
        }
    }

    /// A motor's state.
    pub fn axis(&self, i: usize) -> Option<AxisView> {
        let a = self.app.axes.get(i)?;
        Some(AxisView {
            position: a.position(),
            velocity: a.sign() * a.motor.velocity,
            duty: a.motor.duty,
        })
    }

    fn control(&mut self, now_us: u32, dt: f32) {
        let running = self.app.master_present;
        for (i, a) in self.app.axes.iter_mut().enumerate() {
            let Some(mut m) = self.node.motor(i as u8).filter(|m| m.is_wired()) else {
                continue;
            };
            // The newer of the two commands wins.
            let target = m
                .target()
                .map(|t| (t.value.r#type, t.value.value, 0.0, t.received_at_us));
            let trajectory = m.trajectory().map(|j| {
                (
                    mode::POSITION,
                    j.value.position,
                    j.value.velocity,
                    j.received_at_us,
                )
            });
            let command = match (target, trajectory) {
                (Some(t), Some(j)) if now_us.wrapping_sub(j.3) < now_us.wrapping_sub(t.3) => {
                    Some(j)
                }
                (t, j) => t.or(j),
            };
            // A periodic topic: this updates the value the runtime sends every 5 ms.
            let _ = m.publish_feedback(&a.step(command, running, now_us, dt));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_runtime_nostd::fcan_core::id::NodeId;
    use fcan_runtime_nostd::Controller;

    fn config(motors: u8) -> gen::Config {
        gen::Config {
            node_id: NodeId::new(5).unwrap(),
            boot_id: 7,
            counts: gen::Counts { motor: motors },
            controller: Controller::Fd,
        }
    }

    /// What `unconfigured` + `configure` must leave, compared with `new`.
    fn view(fw: &MotorDriver) -> (bool, EventLog, [Option<AxisView>; MOTORS], u32, f32) {
        let mut axes = [None; MOTORS];
        for (i, a) in axes.iter_mut().enumerate() {
            *a = fw.axis(i);
        }
        let a0 = &fw.app.axes[0];
        (
            fw.node.is_configured(),
            fw.app.events,
            axes,
            a0.command_timeout_us,
            a0.alpha,
        )
    }

    #[test]
    fn configure_in_place_equals_new() {
        static UNCONFIGURED: MotorDriver = MotorDriver::unconfigured();
        assert!(!UNCONFIGURED.node.is_configured());
        let a = MotorDriver::new(config(6)).unwrap();
        let mut b = MotorDriver::unconfigured();
        b.configure(config(6)).unwrap();
        assert_eq!(view(&a), view(&b));
        assert_eq!(a.node.state(), b.node.state());
        assert_eq!(a.node.counters(), b.node.counters());
        // Tuned from the schema defaults at boot.
        assert_ne!(a.app.axes[0].alpha, 0.0);
        assert!(b.configure(config(9)).is_err());
        assert!(!b.node.is_configured());
        assert!(b.node.motor(0).is_some_and(|m| !m.is_wired()));
    }
}
