//! A simulated MIT-mode motor.
