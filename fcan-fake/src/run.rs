//! The host loop of a node runtime on a PC: a board's main loop over any
//! [`fcan_transport::Transport`] (the simulated bus, SocketCAN). Poll, send what the node
//! queued, wait for a frame or the next poll. Fake nodes run on it ([`run_fake`]), and
//! so do the example firmwares (`fcan_examples::run_node`) through [`drive`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::Frame;
use fcan_runtime_nostd::{Transmit, TxRefused};
use fcan_transport::{Transport, TransportError};
use tokio::task::JoinHandle;

use crate::FakeNode;

/// How often the loop polls the node when the bus is quiet.
pub const POLL_PERIOD: Duration = Duration::from_micros(500);

/// Frames a node may queue between two hand-overs to the transport in [`drive`].
const TX_QUEUE: usize = 8;

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

/// One step of a board's main loop, handed to the closure of [`drive`].
#[derive(Debug)]
pub enum Step<'a> {
    /// A frame arrived at this time (µs on the node's clock).
    Receive(&'a Frame, u32),
    /// Run the node at this time.
    Poll(u32),
}

/// The main loop of one board: poll, send what the node queued, wait for a frame or the
/// next poll; `step` runs the node. The node's clock is microseconds since the loop
/// started, wrapping, as a board's timer since boot. Returns when the transport closes.
pub async fn drive<T: Transport>(mut transport: T, mut step: impl FnMut(Step<'_>, &mut TxQueue)) {
    let base = tokio::time::Instant::now();
    let now_us = move || base.elapsed().as_micros() as u32;
    let mut tx = TxQueue::new(TX_QUEUE);
    loop {
        step(Step::Poll(now_us()), &mut tx);
        if !flush(&mut transport, &mut tx).await {
            return;
        }
        tokio::select! {
            r = transport.recv() => match r {
                Ok(rx) => {
                    let at = rx.at.saturating_duration_since(base.into_std()).as_micros() as u32;
                    step(Step::Receive(&rx.frame, at), &mut tx);
                }
                Err(e) if e.is_fatal() => return,
                Err(_) => {}
            },
            _ = tokio::time::sleep(POLL_PERIOD) => {}
        }
    }
}

/// Runs `node` on `transport` until the task is aborted or the transport closes; the
/// node stays reachable (and its state readable) through the returned handle between
/// two steps of its loop. The node's clock is microseconds since the task started,
/// wrapping, as a board's timer since boot.
pub fn run_fake<T: Transport + 'static>(transport: T, node: FakeNode) -> Running {
    let node = Arc::new(Mutex::new(node));
    let shared = node.clone();
    let task = tokio::spawn(async move {
        drive(transport, |step, tx| {
            let mut n = shared.lock().unwrap_or_else(|p| p.into_inner());
            match step {
                Step::Receive(frame, at) => n.receive(frame, at),
                Step::Poll(now) => n.poll(now, tx),
            }
        })
        .await
    });
    Running { node, task }
}

/// A fake node running on a transport ([`run_fake`]). Dropping it stops the node, as
/// pulling a board's power would.
#[derive(Debug)]
pub struct Running {
    node: Arc<Mutex<FakeNode>>,
    task: JoinHandle<()>,
}

impl Running {
    /// Runs `f` on the node, between two steps of its loop.
    pub fn with<R>(&self, f: impl FnOnce(&mut FakeNode) -> R) -> R {
        let mut n = self.node.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut n)
    }

    /// Whether the loop has ended (the transport closed, or [`Running::stop`]).
    pub fn is_stopped(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the node at once; its transport is dropped (detached from the bus).
    pub fn stop(&self) {
        self.task.abort();
    }

    /// Waits until the loop ends on its own (its transport closed).
    pub async fn closed(&mut self) {
        let _ = (&mut self.task).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Hands the queued frames to the transport, in order. A full transmit queue keeps them
/// (so the runtime's next frames are refused and retried, as with a controller's
/// mailboxes); a frame refused otherwise (bus off) is lost, as on real hardware, and the
/// protocol's retries recover. `false` once the transport is closed.
async fn flush<T: Transport>(transport: &mut T, tx: &mut TxQueue) -> bool {
    let mut sent = 0;
    for f in &tx.frames {
        match transport.send(f).await {
            Ok(()) => sent += 1,
            Err(TransportError::TxQueueFull) => break,
            Err(TransportError::Closed) => return false,
            Err(_) => sent += 1,
        }
    }
    tx.frames.drain(..sent);
    true
}
