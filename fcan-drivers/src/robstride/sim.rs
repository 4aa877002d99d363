//! A simulated RobStride motor: answers the private protocol as the manuals describe,
//! over a deliberately simple rigid-rotor model.
//!
//! What it does, and the choices where the manuals say nothing (tests rely on these):
//!
//! - It answers only requests whose destination is its id. Replies go to the host id
//!   the request names; type 1 carries none, so its feedback, active reports and fault
//!   frames go to the last host that addressed it ([`SimMotor::with_host`] at first).
//! - Type 0 → device id answer; 3 → run mode and a feedback (refused while a fault is
//!   set: the feedback then still shows mode 0); 4 → reset mode, faults cleared when
//!   `data[0] = 1`, feedback; 6 → the present angle becomes 0 (and a held motion or CSP
//!   target too, as new firmware does; ignored in PP mode, as the manuals say), feedback;
//!   7 → new id, device id answer from it; 17 → parameter answer (status 1 for an
//!   unknown index); 18 → stores a writable parameter, silently ignores read-only and
//!   unknown ones, feedback either way; 22 → feedback (saving is not modelled); 24 →
//!   reporting on/off, one feedback at once, then one every `EPScan_time` period
//!   (10 ms by default) from [`poll`](crate::sim::SimDevice::poll).
//! - Type 1 commands act only when enabled in `run_mode` 0; a feedback answers each.
//! - Dynamics: a rotor of inertia 0.01 kg·m² with viscous friction 0.01 N·m·s/rad.
//!   Operation control applies `kp·(p_ref − p) + kd·(v_ref − v) + t_ff`, clamped to the
//!   model's torque and `limit_torque`, integrated with implicit Euler in steps of at most
//!   1 ms so any gain is stable. Velocity mode ramps toward `spd_ref` at `acc_rad`; CSP
//!   and PP move toward `loc_ref` at `limit_spd` / `vel_max` (no acceleration profile);
//!   current mode applies `iq_ref` times a torque constant of torque range / current
//!   range. Disabled, the rotor coasts against the friction. Velocity never exceeds the
//!   model's range.
//! - Feedback reports the angle wrapped into −4π..4π, as the manuals' §4.2.3 describes;
//!   [`SimMotor::position`] and `mechPos` (0x7019, "load-end multi-turn mechanical
//!   angle" in the sample program) are the continuous angle. Temperature is 30.0 °C,
//!   `VBUS` 24.0 V.
//! - [`SimMotor::inject_fault`] sets the type 21 fault word and the feedback fault bits,
//!   drops the motor to reset mode and sends one type 21 frame at the next poll.
//! - `canTimeout` (0x7028, in 50 µs units) is honoured: an enabled motor that hears
//!   nothing for that long drops to reset mode.
//! - [`SimMotor::reboot`]: parameters back to their defaults, disabled, reporting off,
//!   the angle brought into 0..2π (`zero_sta` 0: the power-on range); injected faults
//!   stay (they stand for a physical condition).

use std::collections::BTreeMap;
use std::f64::consts::PI;

use fcan_core::frame::Frame;

use super::model::{self, Model, ParamType};
use super::wire::{self, Feedback, MotionCommand, Ranges, Request};

const INERTIA: f64 = 0.01;
const FRICTION: f64 = 0.01;
const MAX_STEP_S: f64 = 1e-3;
const MAX_STEPS: u64 = 100_000;
const TEMPERATURE: f32 = 30.0;
const VBUS: f32 = 24.0;

/// A simulated RobStride motor (see the module docs for what it models).
#[derive(Clone, Debug)]
pub struct SimMotor {
    motor: u8,
    motor_created: u8,
    host: u8,
    model: Model,
    ranges: Ranges,
    enabled: bool,
    pos: f64,
    vel: f64,
    torque: f64,
    cmd: Option<MotionCommand>,
    params: BTreeMap<u16, [u8; 4]>,
    fault_word: u32,
    warning_word: u32,
    fault_bits: u8,
    fault_pending: bool,
    report: bool,
    report_comm: u8,
    next_report: u64,
    now: Option<u64>,
    last_rx: u64,
}

fn default_params(model: Model) -> BTreeMap<u16, [u8; 4]> {
    let r = model.ranges();
    let f = wire::value_f32;
    // Power-on values: the manuals' documented defaults where they give one (cur_kp …
    // dcc_set), otherwise a sensible choice (limits at the model's maxima).
    let mut m = BTreeMap::new();
    m.insert(model::RUN_MODE, wire::value_u8(model::RUN_MODE_MOTION));
    m.insert(model::IQ_REF, f(0.0));
    m.insert(model::SPD_REF, f(0.0));
    m.insert(model::LIMIT_TORQUE, f(r.torque));
    m.insert(0x7010, f(0.17));
    m.insert(0x7011, f(0.012));
    m.insert(0x7014, f(0.1));
    m.insert(model::LOC_REF, f(0.0));
    m.insert(model::LIMIT_SPD, f(10.0));
    m.insert(model::LIMIT_CUR, f(model.current_limit()));
    // 30, the value the manuals' read example returns.
    m.insert(0x701E, f(30.0));
    m.insert(0x701F, f(6.0));
    m.insert(0x7020, f(0.02));
    m.insert(0x7021, f(0.1));
    m.insert(model::ACC_RAD, f(20.0));
    m.insert(model::VEL_MAX, f(10.0));
    m.insert(0x7025, f(10.0));
    m.insert(model::EPSCAN_TIME, wire::value_u16(1));
    m.insert(model::CAN_TIMEOUT, wire::value_u32(0));
    m.insert(model::ZERO_STA, wire::value_u8(0));
    m.insert(0x702A, wire::value_u8(0));
    m.insert(0x702B, f(0.0));
    m.insert(0x702C, wire::value_u8(0));
    m.insert(0x702D, wire::value_u8(0));
    m.insert(0x702E, f(10.0));
    m
}

/// `x` wrapped into −4π..4π, as the motor reports its angle.
pub fn wrap_feedback_angle(x: f64) -> f64 {
    let span = 8.0 * PI;
    x - span * ((x + 4.0 * PI) / span).floor()
}

impl SimMotor {
    /// A motor with CAN id `motor`, host [`wire::DEFAULT_HOST_ID`], disabled, at angle 0.
    pub fn new(motor: u8, model: Model) -> SimMotor {
        SimMotor {
            motor,
            motor_created: motor,
            host: wire::DEFAULT_HOST_ID,
            model,
            ranges: model.ranges(),
            enabled: false,
            pos: 0.0,
            vel: 0.0,
            torque: 0.0,
            cmd: None,
            params: default_params(model),
            fault_word: 0,
            warning_word: 0,
            fault_bits: 0,
            fault_pending: false,
            report: false,
            report_comm: wire::COMM_FEEDBACK,
            next_report: 0,
            now: None,
            last_rx: 0,
        }
    }

    /// The host its unsolicited frames go to until a request names another.
    pub fn with_host(mut self, host: u8) -> SimMotor {
        self.host = host;
        self
    }

    /// The communication type of active reports: [`wire::COMM_FEEDBACK`] (the default,
    /// firmware up to 0.3.1.2) or [`wire::COMM_ACTIVE_REPORT`] (newer firmware).
    pub fn with_report_comm(mut self, comm: u8) -> SimMotor {
        self.report_comm = comm;
        self
    }

    /// Its CAN id (type 7 changes it).
    pub fn id(&self) -> u8 {
        self.motor
    }

    /// Its 64-bit unique id (made up: "RS", the model number and the CAN id it was
    /// created with, so that two simulated motors differ).
    pub fn uid(&self) -> u64 {
        let n = Model::ALL
            .iter()
            .position(|m| *m == self.model)
            .unwrap_or(0) as u64;
        0x5253_0000_0000_0000 | (n << 16) | 0x1000 | u64::from(self.motor_created)
    }

    /// Sets the fault state: `fault_word` as type 21 reports it, `feedback_bits` (6 bits)
    /// as the feedback's id bits 21..16 show it. Non-zero faults drop the motor to reset
    /// mode; a type 21 frame goes out at the next poll.
    pub fn inject_fault(&mut self, fault_word: u32, feedback_bits: u8) {
        self.fault_word = fault_word;
        self.fault_bits = feedback_bits & 0x3F;
        if self.faulted() {
            self.disable();
        }
        self.fault_pending = true;
    }

    /// Clears the fault state (what a type 4 with `data[0] = 1` does).
    pub fn clear_faults(&mut self) {
        self.fault_word = 0;
        self.warning_word = 0;
        self.fault_bits = 0;
        self.fault_pending = false;
    }

    /// A power cycle: parameters to defaults, disabled, reporting off, the angle brought
    /// into the power-on range 0..2π.
    pub fn reboot(&mut self) {
        self.params = default_params(self.model);
        self.disable();
        self.report = false;
        self.vel = 0.0;
        self.pos = self.pos.rem_euclid(2.0 * PI);
    }

    /// Sets the true (continuous) angle, rad.
    pub fn set_position(&mut self, rad: f64) {
        self.pos = rad;
    }

    /// The true (continuous) angle, rad.
    pub fn position(&self) -> f64 {
        self.pos
    }

    /// The true velocity, rad/s.
    pub fn velocity(&self) -> f64 {
        self.vel
    }

    /// Whether it is in run mode.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// What a type 17 read of `index` returns now (bytes 4..8), or `None` for an index
    /// not in the parameter table.
    pub fn param_value(&self, index: u16) -> Option<[u8; 4]> {
        let kt = f64::from(self.ranges.torque) / f64::from(self.model.current_limit());
        match index {
            model::MECH_POS => Some(wire::value_f32(self.pos as f32)),
            model::MECH_VEL => Some(wire::value_f32(self.vel as f32)),
            model::IQF => Some(wire::value_f32((self.torque / kt) as f32)),
            model::VBUS => Some(wire::value_f32(VBUS)),
            _ => self.params.get(&index).copied(),
        }
    }

    fn param_f32(&self, index: u16) -> f64 {
        self.params
            .get(&index)
            .map(|v| f64::from(f32::from_le_bytes(*v)))
            .filter(|x| x.is_finite())
            .unwrap_or(0.0)
    }

    fn run_mode(&self) -> u8 {
        self.params.get(&model::RUN_MODE).map_or(0, |v| v[0])
    }

    fn faulted(&self) -> bool {
        self.fault_word != 0 || self.fault_bits != 0
    }

    fn disable(&mut self) {
        self.enabled = false;
        self.cmd = None;
        self.torque = 0.0;
    }

    fn report_period_us(&self) -> u64 {
        let n = self
            .params
            .get(&model::EPSCAN_TIME)
            .map_or(1, |v| u16::from_le_bytes([v[0], v[1]]))
            .max(1);
        10_000 + u64::from(n - 1) * 5_000
    }

    fn can_timeout_deadline(&self) -> Option<u64> {
        let t = self
            .params
            .get(&model::CAN_TIMEOUT)
            .map_or(0, |v| u32::from_le_bytes(*v));
        (self.enabled && t != 0).then(|| self.last_rx.saturating_add(u64::from(t) * 50))
    }

    fn feedback(&self, comm: u8) -> Frame {
        let fb = Feedback {
            motor: self.motor,
            host: self.host,
            mode: if self.enabled {
                wire::MODE_RUN
            } else {
                wire::MODE_RESET
            },
            faults: self.fault_bits,
            position: wrap_feedback_angle(self.pos) as f32,
            velocity: self.vel as f32,
            torque: self.torque as f32,
            temperature: Some(TEMPERATURE),
        };
        wire::feedback(comm, &fb, &self.ranges)
    }

    /// Moves the model on to `now`, cutting the motor off at a CAN timeout on the way.
    fn advance(&mut self, now: u64) {
        let Some(t0) = self.now else {
            self.now = Some(now);
            return;
        };
        if now <= t0 {
            return;
        }
        match self.can_timeout_deadline() {
            Some(d) if d < now => {
                let d = d.max(t0);
                self.integrate(d - t0);
                self.disable();
                self.integrate(now - d);
            }
            _ => self.integrate(now - t0),
        }
        self.now = Some(now);
    }

    fn integrate(&mut self, us: u64) {
        if us == 0 {
            return;
        }
        let total = us as f64 * 1e-6;
        let n = ((total / MAX_STEP_S).ceil() as u64).clamp(1, MAX_STEPS);
        let dt = total / n as f64;
        for _ in 0..n {
            self.step(dt);
        }
    }

    /// Velocity after `dt` under a constant torque `tau` (implicit in the friction).
    fn coast(&self, tau: f64, dt: f64) -> f64 {
        (INERTIA * self.vel / dt + tau) / (INERTIA / dt + FRICTION)
    }

    fn step(&mut self, dt: f64) {
        let vmax = f64::from(self.ranges.velocity);
        let tmax = f64::from(self.ranges.torque).min(self.param_f32(model::LIMIT_TORQUE).abs());
        if !self.enabled {
            self.torque = 0.0;
            self.vel = self.coast(0.0, dt);
        } else {
            match self.run_mode() {
                model::RUN_MODE_MOTION => self.step_motion(dt, tmax),
                model::RUN_MODE_VELOCITY => {
                    let target = self.param_f32(model::SPD_REF).clamp(-vmax, vmax);
                    let dv = self.param_f32(model::ACC_RAD).abs() * dt;
                    self.vel += (target - self.vel).clamp(-dv, dv);
                    self.torque = FRICTION * self.vel;
                }
                mode @ (model::RUN_MODE_CSP | model::RUN_MODE_PP) => {
                    let limit = if mode == model::RUN_MODE_CSP {
                        self.param_f32(model::LIMIT_SPD)
                    } else {
                        self.param_f32(model::VEL_MAX)
                    }
                    .abs();
                    let target = self.param_f32(model::LOC_REF);
                    self.vel = ((target - self.pos) / dt).clamp(-limit, limit);
                    self.torque = FRICTION * self.vel;
                }
                model::RUN_MODE_CURRENT => {
                    let kt = f64::from(self.ranges.torque) / f64::from(self.model.current_limit());
                    let tau = (self.param_f32(model::IQ_REF) * kt).clamp(-tmax, tmax);
                    self.torque = tau;
                    self.vel = self.coast(tau, dt);
                }
                _ => {
                    self.torque = 0.0;
                    self.vel = self.coast(0.0, dt);
                }
            }
        }
        self.vel = self.vel.clamp(-vmax, vmax);
        self.pos += self.vel * dt;
    }

    fn step_motion(&mut self, dt: f64, tmax: f64) {
        let Some(c) = self.cmd else {
            self.torque = 0.0;
            self.vel = self.coast(0.0, dt);
            return;
        };
        let (kp, kd) = (f64::from(c.kp), f64::from(c.kd));
        let (pr, vr, tff) = (
            f64::from(c.position),
            f64::from(c.velocity),
            f64::from(c.torque),
        );
        // Implicit Euler: J(v' − v)/dt = kp(pr − p − dt·v') + kd(vr − v') + tff − b·v'.
        let v_new = (INERTIA * self.vel / dt + kp * (pr - self.pos) + kd * vr + tff)
            / (INERTIA / dt + kp * dt + kd + FRICTION);
        let tau = kp * (pr - (self.pos + dt * v_new)) + kd * (vr - v_new) + tff;
        if tau.abs() <= tmax {
            self.torque = tau;
            self.vel = v_new;
        } else {
            let tau = tau.clamp(-tmax, tmax);
            self.torque = tau;
            self.vel = self.coast(tau, dt);
        }
    }

    fn request_target(req: &Request) -> Option<u8> {
        Some(match *req {
            Request::GetId { motor, .. }
            | Request::Motion { motor, .. }
            | Request::Enable { motor, .. }
            | Request::Stop { motor, .. }
            | Request::SetZero { motor, .. }
            | Request::ParamRead { motor, .. }
            | Request::ParamWrite { motor, .. }
            | Request::ActiveReport { motor, .. }
            | Request::SetId { motor, .. }
            | Request::Save { motor, .. } => motor,
            #[allow(unreachable_patterns)]
            _ => return None,
        })
    }

    fn request_host(req: &Request) -> Option<u8> {
        match *req {
            Request::GetId { host, .. }
            | Request::Enable { host, .. }
            | Request::Stop { host, .. }
            | Request::SetZero { host, .. }
            | Request::ParamRead { host, .. }
            | Request::ParamWrite { host, .. }
            | Request::ActiveReport { host, .. }
            | Request::SetId { host, .. }
            | Request::Save { host, .. } => Some(host),
            _ => None,
        }
    }
}

impl crate::sim::SimDevice for SimMotor {
    fn describe(&self) -> String {
        format!("robstride {} id {}", self.model.name(), self.motor)
    }

    fn receive(&mut self, now_us: u64, frame: &Frame, out: &mut Vec<Frame>) {
        self.advance(now_us);
        let Some(req) = wire::decode_request(frame, &self.ranges) else {
            return;
        };
        if Self::request_target(&req) != Some(self.motor) {
            return;
        }
        self.last_rx = now_us;
        if let Some(h) = Self::request_host(&req) {
            self.host = h;
        }
        match req {
            Request::GetId { .. } => out.push(wire::device_id_reply(self.motor, self.uid())),
            Request::Motion { cmd, .. } => {
                if self.enabled && self.run_mode() == model::RUN_MODE_MOTION {
                    self.cmd = Some(cmd);
                }
                out.push(self.feedback(wire::COMM_FEEDBACK));
            }
            Request::Enable { .. } => {
                if !self.faulted() && !self.enabled {
                    self.enabled = true;
                    self.cmd = None;
                }
                out.push(self.feedback(wire::COMM_FEEDBACK));
            }
            Request::Stop { clear_fault, .. } => {
                self.disable();
                if clear_fault {
                    self.clear_faults();
                }
                out.push(self.feedback(wire::COMM_FEEDBACK));
            }
            Request::SetZero { .. } => {
                if self.run_mode() != model::RUN_MODE_PP {
                    self.pos = 0.0;
                    if let Some(c) = self.cmd.as_mut() {
                        c.position = 0.0;
                    }
                    self.params.insert(model::LOC_REF, wire::value_f32(0.0));
                }
                out.push(self.feedback(wire::COMM_FEEDBACK));
            }
            Request::SetId { new_id, .. } => {
                self.motor = new_id;
                out.push(wire::device_id_reply(self.motor, self.uid()));
            }
            Request::ParamRead { index, .. } => {
                let v = self.param_value(index);
                out.push(wire::param_reply(
                    self.motor,
                    self.host,
                    index,
                    v.unwrap_or([0; 4]),
                    v.is_some(),
                ));
            }
            Request::ParamWrite { index, value, .. } => {
                if let Some(p) = model::param(index).filter(|p| p.writable) {
                    // Keep only the bytes the type carries, as a real u8 register would.
                    let value = match p.ty {
                        ParamType::U8 => [value[0], 0, 0, 0],
                        ParamType::U16 => [value[0], value[1], 0, 0],
                        ParamType::U32 | ParamType::F32 => value,
                    };
                    if index == model::RUN_MODE {
                        self.cmd = None;
                    }
                    self.params.insert(index, value);
                }
                out.push(self.feedback(wire::COMM_FEEDBACK));
            }
            Request::Save { .. } => out.push(self.feedback(wire::COMM_FEEDBACK)),
            Request::ActiveReport { on, .. } => {
                self.report = on;
                self.next_report = now_us + self.report_period_us();
                out.push(self.feedback(self.report_comm));
            }
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    fn poll_at(&self) -> Option<u64> {
        let due_now = self.fault_pending.then(|| self.now.unwrap_or(0));
        let report = self.report.then_some(self.next_report);
        let timeout = self.can_timeout_deadline();
        [due_now, report, timeout].into_iter().flatten().min()
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<Frame>) {
        self.advance(now_us);
        if self.fault_pending {
            self.fault_pending = false;
            out.push(wire::fault_frame(
                self.motor,
                self.host,
                self.fault_word,
                self.warning_word,
            ));
        }
        if self.report && now_us >= self.next_report {
            out.push(self.feedback(self.report_comm));
            let period = self.report_period_us();
            self.next_report += period;
            if self.next_report <= now_us {
                // Missed periods (a late poll) are skipped, not sent in a burst.
                self.next_report = now_us + period;
            }
        }
    }
}
