//! `EngineWorld`, a synchronous world for engine tests and benchmarks: the master's
//! engine (sans I/O) and real example firmwares (the no_std node code) exchanging frames
//! in one thread, with a stepped clock and no bus timing. Used to provision a realistic
//! system and record its traffic.
//!
//! Not `fcan_e2e::World`, which runs the async `Master` and the firmwares on the
//! simulated bus with its timing: that one is for behaviour through the public API; this
//! one for what the engine does frame by frame, deterministically, without a runtime
//! (and fcan-master's own tests cannot use fcan-e2e, which depends on fcan-master).

#![allow(dead_code)]

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::NodeId;
use fcan_example_io_board::IoBoard;
use fcan_example_motor_driver::MotorDriver;
use fcan_master::cache::MemoryStore;
use fcan_master::engine::{Engine, EngineConfig, NoSink, Phase, SampleSink};
use fcan_master::transport::sim::BitRates;
use fcan_runtime_nostd::{Transmit, TxRefused};

/// Collects what a node transmits.
#[derive(Default)]
pub struct Collect(pub Vec<Frame>);

impl Transmit for Collect {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        self.0.push(*frame);
        Ok(())
    }
}

/// A node firmware of either example kind.
pub enum Fw {
    Motor(Box<MotorDriver>),
    Io(Box<IoBoard>),
}

impl Fw {
    pub fn receive(&mut self, f: &Frame, now: u32) {
        match self {
            Fw::Motor(m) => m.receive(f, now),
            Fw::Io(b) => b.receive(f, now),
        }
    }
    pub fn poll(&mut self, now: u32, tx: &mut Collect) {
        match self {
            Fw::Motor(m) => m.poll(now, tx),
            Fw::Io(b) => b.poll(now, tx),
        }
    }
}

/// The engine and its nodes.
pub struct EngineWorld {
    pub engine: Engine,
    pub nodes: Vec<Fw>,
    pub now_us: u64,
    /// Every frame the master sent, in order.
    pub master_sent: Vec<Frame>,
}

impl EngineWorld {
    /// `motors` motor drivers (8 motors each) and `boards` I/O boards on a link of `mtu`.
    pub fn new(mtu: Mtu, motors: u8, boards: u8) -> EngineWorld {
        let controller = if mtu == Mtu::Fd {
            fcan_runtime_nostd::Controller::Fd
        } else {
            fcan_runtime_nostd::Controller::Classic
        };
        let mut nodes = Vec::new();
        for i in 0..motors {
            let id = NodeId::new(1 + i).unwrap();
            nodes.push(Fw::Motor(Box::new(
                MotorDriver::new(fcan_example_motor_driver::gen::Config {
                    node_id: id,
                    boot_id: 0x1000 + i as u32,
                    counts: fcan_example_motor_driver::gen::Counts::MAX,
                    controller,
                })
                .unwrap(),
            )));
        }
        for i in 0..boards {
            let id = NodeId::new(1 + motors + i).unwrap();
            nodes.push(Fw::Io(Box::new(
                IoBoard::new(fcan_example_io_board::gen::Config {
                    node_id: id,
                    boot_id: 0x2000 + i as u32,
                    counts: fcan_example_io_board::gen::Counts::MAX,
                    controller,
                })
                .unwrap(),
            )));
        }
        let mut cfg = EngineConfig::new(0xBEEF, mtu);
        // This world delivers every frame at once: a bus so fast that whatever the
        // engine hands over is on the wire a microsecond later (see `step`).
        cfg.rates = BitRates {
            nominal: 1_000_000_000,
            data: 1_000_000_000,
        };
        let engine = Engine::new(cfg, Box::new(MemoryStore::new()));
        EngineWorld {
            engine,
            nodes,
            now_us: 0,
            master_sent: Vec::new(),
        }
    }

    /// Advances the world by `step_us`, delivering every frame to everyone else at once.
    /// Returns the frames nodes sent.
    pub fn step(&mut self, step_us: u64, sink: &mut impl SampleSink) -> Vec<Frame> {
        self.now_us += step_us;
        let now = self.now_us;
        self.engine.poll(now);
        let mut from_master = Vec::new();
        while let Some(f) = self.engine.pop_frame() {
            from_master.push(f);
        }
        // Data waits while a configuration frame is in the link (the engine's
        // admission.rs); on this world's bus that is over a microsecond later.
        self.now_us += 1;
        self.engine.poll(self.now_us);
        while let Some(f) = self.engine.pop_frame() {
            from_master.push(f);
        }
        let now = self.now_us;
        for n in &mut self.nodes {
            for f in &from_master {
                n.receive(f, now as u32);
            }
        }
        self.master_sent.extend(from_master);
        let mut sent = Vec::new();
        for i in 0..self.nodes.len() {
            let mut tx = Collect::default();
            self.nodes[i].poll(now as u32, &mut tx);
            for f in &tx.0 {
                for (j, other) in self.nodes.iter_mut().enumerate() {
                    if j != i {
                        other.receive(f, now as u32);
                    }
                }
                self.engine.handle_frame(f, now, sink);
            }
            sent.extend(tx.0);
        }
        sent
    }

    /// Runs until every node is running (or panics after 5 s of world time).
    pub fn provision(&mut self) {
        self.engine.discover();
        while self
            .engine
            .nodes()
            .filter(|n| n.phase == Phase::Running)
            .count()
            < self.nodes.len()
        {
            self.step(100, &mut NoSink);
            assert!(self.now_us < 5_000_000, "provisioning did not finish");
        }
    }

    /// Runs for `us` and returns the data frames (standard IDs) nodes sent.
    pub fn record_data(&mut self, us: u64) -> Vec<Frame> {
        let end = self.now_us + us;
        let mut out = Vec::new();
        while self.now_us < end {
            out.extend(
                self.step(100, &mut NoSink)
                    .into_iter()
                    .filter(|f| matches!(f.id(), fcan_core::frame::CanId::Standard(_))),
            );
        }
        out
    }
}
