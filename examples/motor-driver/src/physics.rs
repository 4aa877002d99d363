//! A simulated brushed motor with an encoder, and a PID controller: the plant and the loop
//! a real driver board would run, with no hardware needed.

/// First-order motor: velocity follows `duty × MAX_SPEED` with time constant `TAU_S`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SimMotor {
    /// Output shaft position (revolutions).
    pub position: f32,
    /// Velocity (revolutions per second).
    pub velocity: f32,
    /// Duty applied in the last step (−1..=1).
    pub duty: f32,
}

/// Speed at full duty (rev/s).
pub const MAX_SPEED: f32 = 50.0;
/// Mechanical time constant (s).
pub const TAU_S: f32 = 0.05;

impl SimMotor {
    /// At rest at position 0 (`Default`, usable in a `const`).
    pub const REST: SimMotor = SimMotor {
        position: 0.0,
        velocity: 0.0,
        duty: 0.0,
    };

    /// Advances the motor by `dt_s` seconds with `duty` applied.
    pub fn step(&mut self, duty: f32, dt_s: f32) {
        let duty = clamp(duty, -1.0, 1.0);
        self.duty = duty;
        let target = duty * MAX_SPEED;
        // Exact discretisation of dv/dt = (target − v) / τ for a constant input.
        let k = 1.0 - exp_neg(dt_s / TAU_S);
        self.velocity += (target - self.velocity) * k;
        self.position += self.velocity * dt_s;
    }

    /// The current the motor draws: proportional to duty minus back-EMF (amps).
    pub fn current(&self) -> f32 {
        (self.duty - self.velocity / MAX_SPEED) * 10.0
    }
}

/// A PID controller with output limit and integral clamp.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pid {
    /// Proportional gain.
    pub kp: f32,
    /// Integral gain (per second).
    pub ki: f32,
    /// Derivative gain (seconds).
    pub kd: f32,
    /// Output limit (symmetric).
    pub limit: f32,
    integral: f32,
    last_error: f32,
}

impl Pid {
    /// All gains and state zero (`Default`, usable in a `const`).
    pub const ZERO: Pid = Pid {
        kp: 0.0,
        ki: 0.0,
        kd: 0.0,
        limit: 0.0,
        integral: 0.0,
        last_error: 0.0,
    };

    /// Sets the gains, keeping the controller's state.
    pub fn tune(&mut self, kp: f32, ki: f32, kd: f32, limit: f32) {
        self.kp = kp;
        self.ki = ki;
        self.kd = kd;
        self.limit = limit;
    }

    /// Clears integral and derivative history (after a stop, so nothing winds up).
    pub fn reset(&mut self) {
        self.integral = 0.0;
        self.last_error = 0.0;
    }

    /// One controller step.
    pub fn update(&mut self, error: f32, dt_s: f32) -> f32 {
        if self.ki > 0.0 {
            let bound = self.limit / self.ki;
            self.integral = clamp(self.integral + error * dt_s, -bound, bound);
        }
        let derivative = if dt_s > 0.0 {
            (error - self.last_error) / dt_s
        } else {
            0.0
        };
        self.last_error = error;
        clamp(
            self.kp * error + self.ki * self.integral + self.kd * derivative,
            -self.limit,
            self.limit,
        )
    }
}

/// `f32::clamp` without its panic on NaN bounds: a NaN input gives `lo`, never NaN.
pub fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    if x >= lo {
        if x <= hi {
            x
        } else {
            hi
        }
    } else {
        lo
    }
}

/// e^(−x) for small non-negative x, without libm (no_std): a 6-term series is exact to
/// f32 precision for the step sizes used here (x ≤ 0.1).
fn exp_neg(x: f32) -> f32 {
    let mut term = 1.0;
    let mut sum = 1.0;
    for n in 1..7 {
        term *= -x / n as f32;
        sum += term;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_duty_reaches_max_speed() {
        let mut m = SimMotor::default();
        for _ in 0..1000 {
            m.step(1.0, 0.001);
        }
        assert!((m.velocity - MAX_SPEED).abs() < 0.01, "{}", m.velocity);
        assert!(m.position > 40.0);
    }

    #[test]
    fn velocity_loop_tracks_a_setpoint() {
        let mut m = SimMotor::default();
        let mut pid = Pid::default();
        pid.tune(0.05, 1.0, 0.0, 1.0);
        for _ in 0..2000 {
            let duty = pid.update(10.0 - m.velocity, 0.001);
            m.step(duty, 0.001);
        }
        assert!((m.velocity - 10.0).abs() < 0.1, "{}", m.velocity);
    }

    #[test]
    fn nan_never_reaches_the_motor() {
        let mut m = SimMotor::default();
        m.step(f32::NAN, 0.001);
        assert!(m.duty.is_finite() && m.velocity.is_finite());
    }
}
