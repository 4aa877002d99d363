//! A simulated MIT-mode motor: answers every frame addressed to it with one reply, as
//! CubeMars, Damiao and the Mini Cheetah firmware do, and moves a simple rigid-body
//! model with the MIT law while in motor mode.
//!
//! As a Damiao ([`Layout::Damiao`]) it also has register 9, `TIMEOUT`
//! ([`wire::RID_TIMEOUT`]): written and read through `0x7FF` as the motors are
//! ([`wire::register_write`], [`wire::register_read`]), answered on its master id, and
//! honoured: an enabled motor that hears no frame addressed to it (on its id, or a
//! register frame naming it) for `TIMEOUT` × 50 µs ([`wire::TIMEOUT_COUNTS_PER_MS`]: the
//! unit the driver writes) drops out of motor mode and reports state `0xD`, lost
//! communication, until a clear-error frame. It starts with `TIMEOUT` 0 (off).
//!
//! On CAN FD ([`SimMit::with_framing`]) it answers as a Damiao motor set to CAN FD: every
//! reply an FD frame of DLC 8 (with BRS unless told otherwise), and it takes commands in
//! either kind, as an FD controller receives both. Set to Classical CAN it ignores FD
//! frames: a Classical controller cannot receive them (it error-frames them on a real
//! bus).

use fcan_core::frame::Frame;

use super::wire::{self, Command, Feedback, Framing, Layout, Ranges, Request, LOST_COMMUNICATION};
use crate::sim::SimDevice;

/// Rotor inertia seen at the output, kg·m². Small enough that gains in the usual ranges
/// settle in well under a second of simulated time.
const INERTIA: f64 = 0.01;
/// Viscous friction, N·m·s/rad: with zero gains the motor coasts to a stop instead of
/// spinning forever.
const FRICTION: f64 = 0.05;
/// Integration step, µs.
const STEP_US: u64 = 1_000;
/// At most this many steps per advance (100 s): after a long silence the model has long
/// settled, and a caller jumping hours ahead must not stall.
const MAX_STEPS: u64 = 100_000;
/// The temperature the simulated motor reports, °C.
const TEMPERATURE: f32 = 25.0;

/// A simulated MIT-mode motor (see the module docs).
///
/// The model: `J·dv/dt = τ − b·v`, with `τ = kp·(p_ref − p) + kd·(v_ref − v) + τ_ff`
/// clamped to the torque range, while in motor mode and without an error; `τ = 0`
/// otherwise. It is integrated with the spring and damper taken implicitly (backward
/// Euler), so it is stable for any gains and step; only when the torque saturates is
/// the clamped torque applied explicitly.
#[derive(Clone, Debug)]
pub struct SimMit {
    id: u16,
    master_id: u16,
    layout: Layout,
    ranges: Ranges,
    framing: Framing,
    enabled: bool,
    error: u8,
    command: Option<Command>,
    position: f64,
    velocity: f64,
    torque: f64,
    /// The time the model was last advanced to; `None` before the first frame.
    now_us: Option<u64>,
    /// Damiao register 9, `TIMEOUT`, in counts of 50 µs (0: off).
    timeout: u32,
    /// When it last heard a frame addressed to it.
    last_rx: Option<u64>,
}

impl SimMit {
    /// A motor answering to CAN id `id` and replying to `master_id` in `layout`, using
    /// `ranges` both ways. It starts out of motor mode, at rest at position 0.
    pub fn new(id: u16, master_id: u16, layout: Layout, ranges: Ranges) -> SimMit {
        SimMit {
            id,
            master_id,
            layout,
            ranges,
            framing: Framing::Classic,
            enabled: false,
            error: 0,
            command: None,
            position: 0.0,
            velocity: 0.0,
            torque: 0.0,
            now_us: None,
            timeout: 0,
            last_rx: None,
        }
    }

    /// What its `TIMEOUT` register holds (Damiao; counts of 50 µs, 0 = off).
    pub fn timeout_register(&self) -> u32 {
        self.timeout
    }

    /// A power cycle: out of motor mode, no error, `TIMEOUT` back to 0 (what a motor
    /// whose flash was never written holds), at rest where it is.
    pub fn reboot(&mut self) {
        self.enabled = false;
        self.error = 0;
        self.command = None;
        self.torque = 0.0;
        self.velocity = 0.0;
        self.timeout = 0;
        self.last_rx = None;
    }

    /// When its command timeout expires: only a Damiao, enabled, with `TIMEOUT` set.
    fn timeout_at(&self) -> Option<u64> {
        let armed = self.layout == Layout::Damiao && self.enabled && self.timeout > 0;
        let last = self.last_rx?;
        armed.then(|| last.saturating_add(u64::from(self.timeout) * 50))
    }

    /// Cuts the motor off if its timeout expired by `now_us`: the model runs to the
    /// moment it expired, then the motor leaves motor mode and reports `0xD`.
    fn expire(&mut self, now_us: u64) {
        if let Some(at) = self.timeout_at().filter(|&t| t <= now_us) {
            self.advance(at);
            self.enabled = false;
            self.command = None;
            self.torque = 0.0;
            self.error = LOST_COMMUNICATION;
        }
    }

    /// A register frame naming this motor: written or read, and answered.
    fn register(&mut self, r: &wire::Register, out: &mut Vec<Frame>) {
        if r.rid != wire::RID_TIMEOUT {
            // The simulated motor has no other register: no answer, as for a frame it
            // does not understand.
            return;
        }
        if r.op == wire::REGISTER_WRITE {
            self.timeout = r.value_u32();
        }
        out.push(
            self.framing
                .apply(wire::register_reply(self.master_id, r, self.timeout)),
        );
    }

    /// The same motor on a bus of `framing`: its replies go as that framing says, and
    /// set to [`Framing::Classic`] it ignores FD frames (see the module docs).
    pub fn with_framing(mut self, framing: Framing) -> SimMit {
        self.framing = framing;
        self
    }

    /// Whether the motor is in motor mode (entered and not exited).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Position, rad (not limited to the position range: the reply clamps it).
    pub fn position(&self) -> f32 {
        self.position as f32
    }

    /// Velocity, rad/s.
    pub fn velocity(&self) -> f32 {
        self.velocity as f32
    }

    /// The torque applied in the last step, N·m.
    pub fn torque(&self) -> f32 {
        self.torque as f32
    }

    /// The error the motor reports (0: none).
    pub fn error(&self) -> u8 {
        self.error
    }

    /// Puts the motor at `rad`, at rest (a test placing the shaft by hand).
    pub fn set_position(&mut self, rad: f32) {
        self.position = f64::from(rad);
        self.velocity = 0.0;
    }

    /// Raises an error (0 clears it). While it is set the motor applies no torque and
    /// reports the code: CubeMars in byte 7, Damiao as the state nibble (keep Damiao
    /// codes to 8..=0xE, the fault states). A clear-error frame clears it.
    pub fn set_error(&mut self, code: u8) {
        self.error = code;
    }

    /// Advances the model to `now_us` in whole steps; the remainder carries over to the
    /// next advance, so many short intervals add up. A clock going backwards counts as
    /// no time.
    fn advance(&mut self, now_us: u64) {
        let Some(last) = self.now_us else {
            self.now_us = Some(now_us);
            return;
        };
        let steps = now_us.saturating_sub(last) / STEP_US;
        self.now_us = Some(last + steps * STEP_US);
        for _ in 0..steps.min(MAX_STEPS) {
            self.step(STEP_US as f64 * 1e-6);
        }
    }

    fn step(&mut self, h: f64) {
        let (t_min, t_max) = (f64::from(self.ranges.t_min), f64::from(self.ranges.t_max));
        let active = self.enabled && self.error == 0;
        let (kp, kd, p_ref, v_ref, t_ff) = match (active, self.command) {
            (true, Some(c)) => (
                f64::from(c.kp),
                f64::from(c.kd),
                f64::from(c.position),
                f64::from(c.velocity),
                f64::from(c.torque),
            ),
            _ => (0.0, 0.0, 0.0, 0.0, 0.0),
        };
        // Backward Euler on the spring-damper: solve for the next velocity with the
        // torque evaluated at the next state.
        let denom = INERTIA + h * (FRICTION + kd) + h * h * kp;
        let v1 = (INERTIA * self.velocity + h * (kp * (p_ref - self.position) + kd * v_ref + t_ff))
            / denom;
        let tau = kp * (p_ref - self.position - h * v1) + kd * (v_ref - v1) + t_ff;
        let (v1, tau) = if (t_min..=t_max).contains(&tau) {
            (v1, tau)
        } else {
            let tau = tau.clamp(t_min.min(t_max), t_max.max(t_min));
            (
                (INERTIA * self.velocity + h * tau) / (INERTIA + h * FRICTION),
                tau,
            )
        };
        self.velocity = v1;
        self.torque = tau;
        self.position += h * v1;
    }

    fn feedback(&self) -> Feedback {
        let error = match self.layout {
            Layout::Damiao if self.error != 0 => self.error,
            Layout::Damiao => u8::from(self.enabled),
            _ => self.error,
        };
        Feedback {
            motor: self.id as u8,
            position: self.position as f32,
            velocity: self.velocity as f32,
            torque: self.torque as f32,
            temperature: Some(TEMPERATURE),
            error,
        }
    }
}

impl SimDevice for SimMit {
    fn describe(&self) -> String {
        match self.framing {
            Framing::Classic => format!("mit {} id {}", self.layout, self.id),
            f => format!("mit {} id {} ({f})", self.layout, self.id),
        }
    }

    fn receive(&mut self, now_us: u64, frame: &Frame, out: &mut Vec<Frame>) {
        if frame.is_fd() && !self.framing.is_fd() {
            return;
        }
        self.expire(now_us);
        if self.layout == Layout::Damiao {
            if let Some(r) = wire::decode_register_request(frame) {
                if r.motor == self.id {
                    self.advance(now_us);
                    self.last_rx = Some(now_us);
                    self.register(&r, out);
                }
                return;
            }
        }
        let Some((id, request)) = wire::decode_request(frame, &self.ranges) else {
            return;
        };
        if id != self.id {
            return;
        }
        self.advance(now_us);
        self.last_rx = Some(now_us);
        match request {
            Request::Enter => self.enabled = true,
            Request::Exit => {
                // Out of motor mode the motor forgets its command: entering again must
                // not resume an old target.
                self.enabled = false;
                self.command = None;
                self.torque = 0.0;
            }
            Request::SetZero => self.position = 0.0,
            Request::ClearError => self.error = 0,
            // Commands outside motor mode are answered but not obeyed, as the firmware
            // does.
            Request::Command(c) if self.enabled => self.command = Some(c),
            Request::Command(_) => {}
        }
        out.push(self.framing.apply(wire::reply(
            self.master_id,
            self.layout,
            &self.ranges,
            &self.feedback(),
        )));
    }

    fn poll_at(&self) -> Option<u64> {
        // These motors speak only when spoken to; the model advances on each frame.
        // A Damiao's command timeout is the one thing that happens by itself.
        self.timeout_at()
    }

    fn poll(&mut self, now_us: u64, _out: &mut Vec<Frame>) {
        // Silent, as the motor is: the next reply says 0xD.
        self.expire(now_us);
        self.advance(now_us);
    }
}
