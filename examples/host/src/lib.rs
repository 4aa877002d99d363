//! Runs the example firmwares on a PC: each node is the same `no_std` code that runs on a
//! microcontroller, fed frames and time by [`run_node`] over any
//! [`fcan_master::transport::Transport`] (the simulated bus or SocketCAN).
#![warn(missing_docs)]

use std::time::Duration;

use fcan_core::frame::Frame;
use fcan_core::id::NodeId;
use fcan_core::msg::NodeState;
use fcan_example_io_board::IoBoard;
use fcan_example_motor_driver::MotorDriver;
use fcan_master::transport::{Transport, TransportError};
use fcan_runtime_nostd::{Transmit, TxRefused};
use tokio::task::JoinHandle;

/// A firmware the host can run: the hooks a microcontroller's main loop would call.
pub trait Firmware: Send + 'static {
    /// A frame arrived.
    fn receive(&mut self, frame: &Frame, now_us: u32);
    /// Run application and node; frames to send go to `tx`.
    fn poll(&mut self, now_us: u32, tx: &mut TxQueue);
    /// The node's state.
    fn state(&self) -> NodeState;
}

impl Firmware for MotorDriver {
    fn receive(&mut self, frame: &Frame, now_us: u32) {
        MotorDriver::receive(self, frame, now_us)
    }
    fn poll(&mut self, now_us: u32, tx: &mut TxQueue) {
        MotorDriver::poll(self, now_us, tx)
    }
    fn state(&self) -> NodeState {
        self.node.state()
    }
}

impl Firmware for IoBoard {
    fn receive(&mut self, frame: &Frame, now_us: u32) {
        IoBoard::receive(self, frame, now_us)
    }
    fn poll(&mut self, now_us: u32, tx: &mut TxQueue) {
        IoBoard::poll(self, now_us, tx)
    }
    fn state(&self) -> NodeState {
        self.node.state()
    }
}

/// The controller's transmit mailboxes as the runtime sees them: a bounded queue that
/// refuses when full, like real hardware (the runtime retries later, in order).
#[derive(Debug)]
pub struct TxQueue {
    frames: Vec<Frame>,
    capacity: usize,
}

impl TxQueue {
    /// A queue of `capacity` frames.
    pub fn new(capacity: usize) -> Self {
        TxQueue {
            frames: Vec::with_capacity(capacity),
            capacity,
        }
    }
}

impl Transmit for TxQueue {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        if self.frames.len() >= self.capacity {
            return Err(TxRefused);
        }
        self.frames.push(*frame);
        Ok(())
    }
}

/// How often the host main loop polls a node when the bus is quiet.
pub const POLL_PERIOD: Duration = Duration::from_micros(500);

/// Runs a firmware on a transport until the task is aborted (or the transport closes).
/// The node's clock is microseconds since the task started (as a board's timer would
/// be since boot), wrapping.
pub fn run_node<T: Transport + 'static, F: Firmware>(mut transport: T, mut fw: F) -> JoinHandle<F> {
    tokio::spawn(async move {
        let base = tokio::time::Instant::now();
        let now_us = move || base.elapsed().as_micros() as u32;
        let mut tx = TxQueue::new(8);
        loop {
            fw.poll(now_us(), &mut tx);
            for f in tx.frames.drain(..) {
                match transport.send(&f).await {
                    Ok(()) => {}
                    Err(TransportError::Closed) => return fw,
                    // Bus off, queue full: the frame is lost as on real hardware; the
                    // protocol's retries recover.
                    Err(_) => {}
                }
            }
            tokio::select! {
                r = transport.recv() => match r {
                    Ok(rx) => {
                        let at = rx.at.saturating_duration_since(base.into_std()).as_micros() as u32;
                        fw.receive(&rx.frame, at);
                    }
                    Err(e) if e.is_fatal() => return fw,
                    Err(_) => {}
                },
                _ = tokio::time::sleep(POLL_PERIOD) => {}
            }
        }
    })
}

/// A random boot id, as a board draws one from its RNG or ADC noise at boot.
pub fn boot_id() -> u32 {
    loop {
        let b = fastrand::u32(..);
        if b != 0 {
            return b;
        }
    }
}

/// Builds a motor driver firmware.
pub fn motor_driver(node_id: u8, motors: u8, fd: bool) -> MotorDriver {
    let id = NodeId::new(node_id).expect("node id 0..=126");
    MotorDriver::new(id, boot_id(), motors, fd).expect("motor counts fit the schema")
}

/// Builds an I/O board firmware.
pub fn io_board(node_id: u8, fd: bool) -> IoBoard {
    let id = NodeId::new(node_id).expect("node id 0..=126");
    IoBoard::new(id, boot_id(), 8, 8, 1, fd).expect("counts fit the schema")
}
