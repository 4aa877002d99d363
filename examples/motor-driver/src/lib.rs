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
use fcan_runtime_nostd::fcan_core::id::NodeId;
use fcan_runtime_nostd::{ConfigError, Event, Reply, Transmit};
use gen::motor::{
    self, ClearFaultRequest, ClearFaultResponse, ResetEncoderRequest, ResetEncoderResponse,
};
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

/// One motor's controller state.
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
    /// Generation of the last command acted on; a new one re-arms the timeout.
    stopped: bool,
}

impl Axis {
    /// `Default`, usable in a `const`.
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
    };
}

/// The application: motors and what the handlers need. Separate from the node, because
/// the node calls it from `poll`.
pub struct MotorApp {
    axes: [Axis; MOTORS],
    master_present: bool,
    params_dirty: u32,
    /// Events seen, for diagnostics and tests.
    pub events: EventLog,
}

impl MotorApp {
    /// At boot: motors at rest, no master, every motor's params to be loaded.
    const BOOT: MotorApp = MotorApp {
        axes: [Axis::IDLE; MOTORS],
        master_present: false,
        params_dirty: u32::MAX,
        events: EventLog {
            started: 0,
            master_lost: 0,
            collisions: 0,
        },
    };
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
        instance: u8,
        request: ResetEncoderRequest,
        _token: Deferred<ResetEncoderResponse>,
    ) -> Reply<ResetEncoderResponse> {
        let Some(axis) = self.axes.get_mut(instance as usize) else {
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
        instance: u8,
        _request: ClearFaultRequest,
        _token: Deferred<ClearFaultResponse>,
    ) -> Reply<ClearFaultResponse> {
        let Some(axis) = self.axes.get_mut(instance as usize) else {
            return Reply::Failed;
        };
        axis.velocity_pid.reset();
        axis.position_pid.reset();
        Reply::Ok(ClearFaultResponse { success: true })
    }

    fn on_params_changed(&mut self, instance: u8, _changed: u32) {
        // Re-read this motor's params at the next control step.
        if (instance as usize) < MOTORS {
            self.params_dirty |= 1 << instance;
        }
    }
}

impl gen::App for MotorApp {
    fn on_event(&mut self, event: Event) {
        match event {
            Event::Started => {
                self.master_present = true;
                self.events.started += 1;
            }
            // Safety: no master, no motion. The control loop sees this on its next step.
            Event::MasterLost | Event::PlanReset => self.master_present = false,
            Event::IdCollision => self.events.collisions += 1,
            Event::Acknowledged => {}
        }
        if event == Event::MasterLost {
            self.events.master_lost += 1;
        }
    }
}

/// The whole firmware: the generated node plus the application.
pub struct MotorDriver {
    /// The fcan node (generated wrapper around the runtime).
    pub node: gen::Node,
    /// The application.
    pub app: MotorApp,
    wired: u8,
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
    /// Boots the firmware: `motors` wired (≤ 8), node id, a random boot id, and whether
    /// the CAN controller does FD. Returns the whole firmware by value (several KB): a
    /// board with a small stack puts [`MotorDriver::unconfigured`] in a `static` and
    /// calls [`MotorDriver::configure`] instead.
    pub fn new(
        node_id: NodeId,
        boot_id: u32,
        motors: u8,
        fd_capable: bool,
    ) -> Result<Self, ConfigError> {
        let mut fw = Self::unconfigured();
        fw.configure(node_id, boot_id, motors, fd_capable)?;
        Ok(fw)
    }

    /// The firmware before boot: `const`, so it can initialise a `static` (no copy on
    /// the stack). Inert, with no motor wired, until [`MotorDriver::configure`] succeeds.
    pub const fn unconfigured() -> Self {
        MotorDriver {
            node: gen::Node::unconfigured(),
            app: MotorApp::BOOT,
            wired: 0,
            next_control_us: 0,
        }
    }

    /// Boots the firmware in place, as [`MotorDriver::new`] does (same arguments): the
    /// node is configured afresh, the motors reset and their params loaded. On error
    /// nothing is wired and the node stays inert.
    pub fn configure(
        &mut self,
        node_id: NodeId,
        boot_id: u32,
        motors: u8,
        fd_capable: bool,
    ) -> Result<(), ConfigError> {
        // Field by field: no MotorApp-sized temporary on the stack.
        for a in self.app.axes.iter_mut() {
            *a = Axis::IDLE;
        }
        self.app.master_present = false;
        self.app.params_dirty = u32::MAX;
        self.app.events = EventLog::default();
        self.wired = 0;
        self.next_control_us = 0;
        self.node
            .configure(node_id, boot_id, &[motors], fd_capable)?;
        self.wired = motors.min(MOTORS as u8);
        self.load_params();
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
    /// `tx`). Call often (every 100 µs–1 ms).
    pub fn poll(&mut self, now_us: u32, tx: &mut impl Transmit) {
        if fcan_runtime_nostd::fcan_core::timing::reached(now_us, self.next_control_us) {
            self.next_control_us = now_us.wrapping_add(CONTROL_PERIOD_US);
            self.control(now_us, CONTROL_PERIOD_US as f32 * 1e-6);
        }
        self.node.poll(now_us, tx, &mut self.app);
    }

    /// A motor's state.
    pub fn axis(&self, i: usize) -> Option<AxisView> {
        let a = self.app.axes.get(i)?;
        let sign = if a.invert { -1.0 } else { 1.0 };
        Some(AxisView {
            position: sign * (a.motor.position - a.encoder_offset),
            velocity: sign * a.motor.velocity,
            duty: a.motor.duty,
        })
    }

    fn load_params(&mut self) {
        for i in 0..self.wired {
            if self.app.params_dirty & (1 << i) == 0 {
                continue;
            }
            let Some(p) = self.node.motor(i).and_then(|h| h.params()) else {
                continue;
            };
            let Some(a) = self.app.axes.get_mut(i as usize) else {
                continue;
            };
            a.velocity_pid.tune(
                p.velocity_kp,
                p.velocity_ki,
                p.velocity_kd,
                p.velocity_limit,
            );
            a.position_pid.tune(
                p.position_kp,
                p.position_ki,
                p.position_kd,
                p.position_limit,
            );
            a.invert = p.invert;
            a.alpha = p.filter_alpha;
            a.command_timeout_us = p.command_timeout_ms as u32 * 1000;
        }
        self.app.params_dirty = 0;
    }

    fn control(&mut self, now_us: u32, dt: f32) {
        if self.app.params_dirty != 0 {
            self.load_params();
        }
        let running = self.app.master_present;
        for i in 0..self.wired {
            let Some(mut h) = self.node.motor(i) else {
                continue;
            };
            let target = h.target();
            let trajectory = h.trajectory();
            let Some(a) = self.app.axes.get_mut(i as usize) else {
                continue;
            };
            let sign = if a.invert { -1.0 } else { 1.0 };
            let position = sign * (a.motor.position - a.encoder_offset);
            a.filtered_velocity += a.alpha * (sign * a.motor.velocity - a.filtered_velocity);
            let fresh = |at: u32| {
                a.command_timeout_us == 0 || now_us.wrapping_sub(at) <= a.command_timeout_us
            };
            // The newer of the two commands wins; either must be fresh.
            let command = match (target, trajectory) {
                (Some(t), Some(j))
                    if now_us.wrapping_sub(j.received_at_us)
                        < now_us.wrapping_sub(t.received_at_us) =>
                {
                    Some((
                        mode::POSITION,
                        j.value.position,
                        j.value.velocity,
                        j.received_at_us,
                    ))
                }
                (Some(t), _) => Some((t.value.r#type, t.value.value, 0.0, t.received_at_us)),
                (None, Some(j)) => Some((
                    mode::POSITION,
                    j.value.position,
                    j.value.velocity,
                    j.received_at_us,
                )),
                (None, None) => None,
            };
            let duty = match command {
                Some((m, value, feed_forward, at)) if running && fresh(at) && value.is_finite() => {
                    a.stopped = false;
                    match m {
                        mode::DUTY => clamp(value, -1.0, 1.0),
                        mode::VELOCITY => a.velocity_pid.update(value - a.filtered_velocity, dt),
                        mode::POSITION => {
                            let v = a.position_pid.update(value - position, dt) + feed_forward;
                            a.velocity_pid.update(v - a.filtered_velocity, dt)
                        }
                        _ => 0.0,
                    }
                }
                _ => {
                    // Stale command, no command, or no master: stop, and forget loop
                    // history so the motor does not jump when commands resume.
                    if !a.stopped {
                        a.velocity_pid.reset();
                        a.position_pid.reset();
                        a.stopped = true;
                    }
                    0.0
                }
            };
            a.motor.step(sign * duty, dt);
            let feedback = motor::Feedback {
                ready: running && !a.stopped,
                position: sign * (a.motor.position - a.encoder_offset),
                velocity: a.filtered_velocity,
                current: a.motor.current(),
            };
            // A periodic topic: this updates the value the runtime sends every 5 ms.
            let _ = h.publish_feedback(&feedback);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `unconfigured` + `configure` must leave, compared with `new`.
    fn view(fw: &MotorDriver) -> (bool, u8, u32, EventLog, [Option<AxisView>; MOTORS], u32) {
        let mut axes = [None; MOTORS];
        for (i, a) in axes.iter_mut().enumerate() {
            *a = fw.axis(i);
        }
        (
            fw.node.is_configured(),
            fw.wired,
            fw.app.params_dirty,
            fw.app.events,
            axes,
            fw.app.axes[0].command_timeout_us,
        )
    }

    #[test]
    fn configure_in_place_equals_new() {
        static UNCONFIGURED: MotorDriver = MotorDriver::unconfigured();
        assert!(!UNCONFIGURED.node.is_configured());
        let id = NodeId::new(5).unwrap();
        let a = MotorDriver::new(id, 7, 6, true).unwrap();
        let mut b = MotorDriver::unconfigured();
        b.configure(id, 7, 6, true).unwrap();
        assert_eq!(view(&a), view(&b));
        assert_eq!(a.node.state(), b.node.state());
        assert_eq!(a.node.counters(), b.node.counters());
        assert_eq!(a.app.axes[0].alpha, b.app.axes[0].alpha);
        assert!(b.configure(id, 7, 9, true).is_err());
        assert!(!b.node.is_configured());
        assert_eq!(b.wired, 0);
    }
}
