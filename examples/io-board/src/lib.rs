//! Example firmware: a general I/O board.
//!
//! - eight digital outputs switched by the `set` service, whose reply is **deferred**
//!   until the (simulated) relay has settled; each output's `state` topic is
//!   **commit-triggered**: sent once each time it changes;
//! - eight digital inputs (simulated: input *k* toggles every `(k + 1) × 250 ms`) with a
//!   commit-triggered `edge` topic;
//! - a 16-channel analog sensor whose `samples` topic (34 bytes) spans five Classical CAN
//!   frames and is delivered whole or not at all, scaled by the `gain`/`offset` array
//!   params; `thresholds` from the master (33 bytes) are staged until complete, so the
//!   application reads them whole or not at all.
#![no_std]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The code `fcan-codegen` generated from `schema/examples/io_board.yaml`.
#[allow(missing_docs)]
pub mod gen {
    include!(concat!(env!("OUT_DIR"), "/fcan_gen.rs"));
}

use fcan_runtime_nostd::fcan_core::frame::Frame;
use fcan_runtime_nostd::fcan_core::timing::reached;
use fcan_runtime_nostd::{ConfigError, Event, Reply, Transmit};
use gen::analog_sensor::{self as analog, AnalogSensorParams};
use gen::analog_sensor::{
    CalibrateRequest, CalibrateResponse, ConfigureRequest, ConfigureResponse,
};
use gen::digital_in;
use gen::digital_out::{self, SetRequest, SetResponse};
use gen::Deferred;

/// Digital outputs on this board type.
pub const OUTPUTS: usize = gen::OUT_MAX_COUNT as usize;
/// Digital inputs on this board type.
pub const INPUTS: usize = gen::IN_MAX_COUNT as usize;
/// Relay settling time when `min_on_ms` is 0.
pub const SETTLE_MS: u16 = 20;

/// An output switch waiting for its relay to settle before the reply goes out.
#[derive(Clone, Copy, Debug)]
struct PendingSet {
    token: Deferred<SetResponse>,
    on: bool,
    settle_ms: u16,
    due_us: u32,
}

/// The application state the handlers touch.
pub struct IoApp {
    outputs: [bool; OUTPUTS],
    pending: [Option<PendingSet>; OUTPUTS],
    /// The analog sensor's params (gain, offset, rate), as last committed.
    analog: AnalogSensorParams,
    /// Times `calibrate` ran.
    pub calibrations: u32,
    /// Last accepted `configure` channel mask.
    pub channel_mask: u16,
    master_present: bool,
}

impl digital_out::Handler for IoApp {
    fn set(
        &mut self,
        out: digital_out::Handle<'_>,
        request: SetRequest,
        token: Deferred<SetResponse>,
    ) -> Reply<SetResponse> {
        let Some(slot) = self.pending.get_mut(out.instance() as usize) else {
            return Reply::Failed;
        };
        if slot.is_some() {
            // One switch in flight per output; the master may retry.
            return Reply::Busy;
        }
        // The relay's settling time is the output's `min_on_ms` param, read when needed.
        let settle_ms = match out.param(digital_out::PARAM_MIN_ON_MS) {
            Some(0) | None => SETTLE_MS,
            Some(ms) => ms,
        };
        *slot = Some(PendingSet {
            token,
            on: request.on,
            settle_ms,
            due_us: out.now_us().wrapping_add(settle_ms as u32 * 1000),
        });
        // The reply goes out when the relay has settled (`IoBoard::outputs`).
        Reply::Accepted
    }
}

impl digital_in::Handler for IoApp {}

impl analog::Handler for IoApp {
    fn configure(
        &mut self,
        _sensor: analog::Handle<'_>,
        request: ConfigureRequest,
        _token: Deferred<ConfigureResponse>,
    ) -> Reply<ConfigureResponse> {
        let accepted = request.channel_mask != 0 && request.averaging <= 64;
        if accepted {
            self.channel_mask = request.channel_mask;
        }
        Reply::Ok(ConfigureResponse { accepted })
    }

    fn calibrate(
        &mut self,
        _sensor: analog::Handle<'_>,
        _request: CalibrateRequest,
        _token: Deferred<CalibrateResponse>,
    ) -> Reply<CalibrateResponse> {
        self.calibrations += 1;
        Reply::Ok(CalibrateResponse {})
    }

    fn on_params_changed(&mut self, sensor: analog::Handle<'_>, _changed: u32) {
        if let Some(p) = sensor.params() {
            self.analog = p;
        }
    }
}

impl gen::App for IoApp {
    fn on_event(&mut self, event: Event) {
        match event {
            Event::Started => self.master_present = true,
            // Safety: outputs go off when the master is lost.
            Event::MasterLost | Event::PlanReset => self.master_present = false,
            Event::Acknowledged | Event::IdCollision => {}
        }
    }
}

/// The whole firmware.
pub struct IoBoard {
    /// The fcan node.
    pub node: gen::Node,
    /// The application.
    pub app: IoApp,
    inputs: [bool; INPUTS],
    edges: [u32; INPUTS],
    published_outputs: [Option<bool>; OUTPUTS],
    next_sample_us: u32,
    sequence: u16,
}

impl IoBoard {
    /// Boots the firmware with `config.counts` outputs, inputs and analog sensors wired.
    pub fn new(config: gen::Config) -> Result<Self, ConfigError> {
        let mut node = gen::Node::new(config)?;
        let analog = node.analog(0).and_then(|a| a.params()).unwrap_or_default();
        Ok(IoBoard {
            node,
            app: IoApp {
                outputs: [false; OUTPUTS],
                pending: [None; OUTPUTS],
                analog,
                calibrations: 0,
                channel_mask: 0xFFFF,
                master_present: false,
            },
            inputs: [false; INPUTS],
            edges: [0; INPUTS],
            published_outputs: [None; OUTPUTS],
            next_sample_us: 0,
            sequence: 0,
        })
    }

    /// A frame from the bus.
    pub fn receive(&mut self, frame: &Frame, now_us: u32) {
        self.node.receive(frame, now_us);
    }

    /// Runs the board's logic, then the node.
    pub fn poll(&mut self, now_us: u32, tx: &mut impl Transmit) {
        self.outputs(now_us);
        self.inputs(now_us);
        self.analog(now_us);
        self.node.poll(now_us, tx, &mut self.app);
    }

    /// The level an output drives (after `active_low`), for tests and displays.
    pub fn output(&self, i: usize) -> Option<bool> {
        self.app.outputs.get(i).copied()
    }

    fn outputs(&mut self, now_us: u32) {
        let app = &mut self.app;
        for i in 0..OUTPUTS {
            // Master lost: every output off (the application's safe state).
            if !app.master_present {
                app.outputs[i] = false;
            }
            if let Some(p) = app.pending[i].filter(|p| reached(now_us, p.due_us)) {
                app.pending[i] = None;
                let success = app.master_present;
                if success {
                    app.outputs[i] = p.on;
                }
                let settle_ms = p.settle_ms;
                let _ = self
                    .node
                    .complete(p.token, &SetResponse { success, settle_ms });
            }
            let level = app.outputs[i];
            let Some(mut out) = self.node.out(i as u8).filter(|o| o.is_wired()) else {
                continue;
            };
            // Commit-triggered: one frame per change.
            if self.published_outputs[i] != Some(level)
                && out
                    .publish_state(&digital_out::State {
                        on: level,
                        fault: false,
                    })
                    .is_ok()
            {
                self.published_outputs[i] = Some(level);
            }
        }
    }

    fn inputs(&mut self, now_us: u32) {
        for k in 0..INPUTS {
            let Some(mut input) = self.node.r#in(k as u8).filter(|h| h.is_wired()) else {
                continue;
            };
            let period = (k as u32 + 1) * 250_000;
            let level = (now_us / period) % 2 == 1;
            if level != self.inputs[k] {
                self.inputs[k] = level;
                self.edges[k] = self.edges[k].wrapping_add(1);
                let count = self.edges[k];
                let _ = input.publish_edge(&digital_in::Edge { level, count });
            }
        }
    }

    fn analog(&mut self, now_us: u32) {
        if !reached(now_us, self.next_sample_us) {
            return;
        }
        let Some(mut sensor) = self.node.analog(0).filter(|h| h.is_wired()) else {
            return;
        };
        let p = &self.app.analog;
        self.next_sample_us = now_us.wrapping_add(1_000_000 / p.rate_hz.max(1) as u32);
        self.sequence = self.sequence.wrapping_add(1);
        let mut raw = [0i16; 16];
        for (ch, r) in raw.iter_mut().enumerate() {
            if self.app.channel_mask & (1 << ch) == 0 {
                continue;
            }
            // A triangle wave per channel, different phase each: visibly changing data.
            let phase = (now_us / 1000 + ch as u32 * 97) % 2000;
            let tri = if phase < 1000 { phase } else { 2000 - phase } as f32;
            // `as` saturates at the i16 range.
            *r = ((tri - 500.0) * p.gain[ch] + p.offset[ch]) as i16;
        }
        let sequence = self.sequence;
        let _ = sensor.publish_samples(&analog::Samples { raw, sequence });
    }
}
