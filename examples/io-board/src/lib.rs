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
use fcan_runtime_nostd::fcan_core::id::NodeId;
use fcan_runtime_nostd::fcan_core::timing::reached;
use fcan_runtime_nostd::{ConfigError, Event, Reply, Transmit};
use gen::analog_sensor::{
    self, CalibrateRequest, CalibrateResponse, ConfigureRequest, ConfigureResponse,
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
    now_us: u32,
    outputs: [bool; OUTPUTS],
    pending: [Option<PendingSet>; OUTPUTS],
    settle_ms: [u16; OUTPUTS],
    /// Times `calibrate` ran.
    pub calibrations: u32,
    /// Last accepted `configure` channel mask.
    pub channel_mask: u16,
    master_present: bool,
    params_dirty: bool,
}

impl digital_out::Handler for IoApp {
    fn set(
        &mut self,
        instance: u8,
        request: SetRequest,
        token: Deferred<SetResponse>,
    ) -> Reply<SetResponse> {
        let i = instance as usize;
        let Some(slot) = self.pending.get_mut(i) else {
            return Reply::Failed;
        };
        if slot.is_some() {
            // One switch in flight per output; the master may retry.
            return Reply::Busy;
        }
        let settle_ms = self.settle_ms.get(i).copied().unwrap_or(SETTLE_MS);
        *slot = Some(PendingSet {
            token,
            on: request.on,
            settle_ms,
            due_us: self.now_us.wrapping_add(settle_ms as u32 * 1000),
        });
        Reply::Accepted
    }

    fn on_params_changed(&mut self, _instance: u8, _changed: u32) {
        self.params_dirty = true;
    }
}

impl digital_in::Handler for IoApp {}

impl analog_sensor::Handler for IoApp {
    fn configure(
        &mut self,
        _instance: u8,
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
        _instance: u8,
        _request: CalibrateRequest,
        _token: Deferred<CalibrateResponse>,
    ) -> Reply<CalibrateResponse> {
        self.calibrations += 1;
        Reply::Ok(CalibrateResponse {})
    }

    fn on_params_changed(&mut self, _instance: u8, _changed: u32) {
        self.params_dirty = true;
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
    sample_period_us: u32,
    sequence: u16,
    gain: [f32; 16],
    offset: [f32; 16],
    wired: (u8, u8, u8),
}

impl IoBoard {
    /// Boots the firmware with the given numbers of outputs, inputs and analog sensors
    /// wired.
    pub fn new(
        node_id: NodeId,
        boot_id: u32,
        outputs: u8,
        inputs: u8,
        analog: u8,
        fd_capable: bool,
    ) -> Result<Self, ConfigError> {
        let node = gen::Node::new(node_id, boot_id, &[outputs, inputs, analog], fd_capable)?;
        let mut board = IoBoard {
            node,
            app: IoApp {
                now_us: 0,
                outputs: [false; OUTPUTS],
                pending: [None; OUTPUTS],
                settle_ms: [SETTLE_MS; OUTPUTS],
                calibrations: 0,
                channel_mask: 0xFFFF,
                master_present: false,
                params_dirty: true,
            },
            inputs: [false; INPUTS],
            edges: [0; INPUTS],
            published_outputs: [None; OUTPUTS],
            next_sample_us: 0,
            sample_period_us: 10_000,
            sequence: 0,
            gain: [1.0; 16],
            offset: [0.0; 16],
            wired: (outputs, inputs, analog),
        };
        board.load_params();
        Ok(board)
    }

    /// A frame from the bus.
    pub fn receive(&mut self, frame: &Frame, now_us: u32) {
        self.node.receive(frame, now_us);
    }

    /// Runs the board's logic, then the node.
    pub fn poll(&mut self, now_us: u32, tx: &mut impl Transmit) {
        self.app.now_us = now_us;
        if self.app.params_dirty {
            self.load_params();
        }
        self.outputs(now_us);
        self.inputs(now_us);
        self.analog(now_us);
        self.node.poll(now_us, tx, &mut self.app);
    }

    /// The level an output drives (after `active_low`), for tests and displays.
    pub fn output(&self, i: usize) -> Option<bool> {
        self.app.outputs.get(i).copied()
    }

    fn load_params(&mut self) {
        for i in 0..self.wired.0 {
            if let Some(p) = self.node.out(i).and_then(|h| h.params()) {
                if let Some(s) = self.app.settle_ms.get_mut(i as usize) {
                    *s = if p.min_on_ms == 0 {
                        SETTLE_MS
                    } else {
                        p.min_on_ms
                    };
                }
            }
        }
        if let Some(p) = self.node.analog(0).and_then(|h| h.params()) {
            self.gain = p.gain;
            self.offset = p.offset;
            self.sample_period_us = 1_000_000 / p.rate_hz.max(1) as u32;
        }
        self.app.params_dirty = false;
    }

    fn outputs(&mut self, now_us: u32) {
        for i in 0..(self.wired.0 as usize).min(OUTPUTS) {
            // Master lost: every output off (the application's safe state).
            if !self.app.master_present && self.app.outputs[i] {
                self.app.outputs[i] = false;
            }
            if let Some(p) = self.app.pending[i] {
                if reached(now_us, p.due_us) {
                    self.app.pending[i] = None;
                    let ok = self.app.master_present;
                    if ok {
                        self.app.outputs[i] = p.on;
                    }
                    if let Some(mut h) = self.node.out(i as u8) {
                        let _ = h.complete_set(
                            p.token,
                            &SetResponse {
                                success: ok,
                                settle_ms: p.settle_ms,
                            },
                        );
                    }
                }
            }
            let level = self.app.outputs[i];
            if self.published_outputs[i] != Some(level) {
                if let Some(mut h) = self.node.out(i as u8) {
                    // Commit-triggered: one frame per change.
                    if h.publish_state(&digital_out::State {
                        on: level,
                        fault: false,
                    })
                    .is_ok()
                    {
                        self.published_outputs[i] = Some(level);
                    }
                }
            }
        }
    }

    fn inputs(&mut self, now_us: u32) {
        for k in 0..(self.wired.1 as usize).min(INPUTS) {
            let period = (k as u32 + 1) * 250_000;
            let level = (now_us / period) % 2 == 1;
            if level != self.inputs[k] {
                self.inputs[k] = level;
                self.edges[k] = self.edges[k].wrapping_add(1);
                if let Some(mut h) = self.node.r#in(k as u8) {
                    let _ = h.publish_edge(&digital_in::Edge {
                        level,
                        count: self.edges[k],
                    });
                }
            }
        }
    }

    fn analog(&mut self, now_us: u32) {
        if self.wired.2 == 0 || !reached(now_us, self.next_sample_us) {
            return;
        }
        self.next_sample_us = now_us.wrapping_add(self.sample_period_us);
        self.sequence = self.sequence.wrapping_add(1);
        let mut raw = [0i16; 16];
        for (ch, r) in raw.iter_mut().enumerate() {
            if self.app.channel_mask & (1 << ch) == 0 {
                continue;
            }
            // A triangle wave per channel, different phase each: visibly changing data.
            let phase = (now_us / 1000 + ch as u32 * 97) % 2000;
            let tri = if phase < 1000 {
                phase as f32
            } else {
                (2000 - phase) as f32
            };
            let v = (tri - 500.0) * self.gain[ch] + self.offset[ch];
            *r = if v > i16::MAX as f32 {
                i16::MAX
            } else if v < i16::MIN as f32 {
                i16::MIN
            } else {
                v as i16
            };
        }
        if let Some(mut h) = self.node.analog(0) {
            let _ = h.publish_samples(&analog_sensor::Samples {
                raw,
                sequence: self.sequence,
            });
        }
    }
}
