//! Runs the example firmwares on a PC: each node is the same `no_std` code that runs on a
//! microcontroller, fed frames and time by [`run_node`] over any
//! [`fcan_master::transport::Transport`] (the simulated bus or SocketCAN).
#![warn(missing_docs)]

use std::sync::{Arc, Mutex};

use fcan_core::frame::Frame;
use fcan_core::id::NodeId;
use fcan_core::msg::NodeState;
use fcan_example_io_board::IoBoard;
use fcan_example_motor_driver::MotorDriver;
use fcan_fake::run::{drive, Step};
use fcan_master::transport::Transport;
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

/// The host loop's transmit queue and poll period: one host loop for every node runtime
/// on a PC, shared with the fake nodes (`fcan_fake::run`).
pub use fcan_fake::run::{TxQueue, POLL_PERIOD};

/// Runs a firmware on a transport until the task is aborted (or the transport closes).
/// The node's clock is microseconds since the task started (as a board's timer would
/// be since boot), wrapping.
pub fn run_node<T: Transport + 'static, F: Firmware>(transport: T, mut fw: F) -> JoinHandle<F> {
    tokio::spawn(async move {
        drive(transport, |step, tx| match step {
            Step::Receive(frame, at) => fw.receive(frame, at),
            Step::Poll(now) => fw.poll(now, tx),
        })
        .await;
        fw
    })
}

/// A firmware run by [`run_node_shared`]: the task drives it while tests (or displays)
/// look at it through [`SharedNode::with`]. Dropping the handle does not stop the node;
/// [`SharedNode::stop`] does (like pulling the board's power).
#[derive(Debug)]
pub struct SharedNode<F> {
    fw: Arc<Mutex<F>>,
    task: JoinHandle<()>,
}

impl<F> SharedNode<F> {
    /// Runs `f` on the firmware (between two steps of the node's main loop).
    pub fn with<R>(&self, f: impl FnOnce(&mut F) -> R) -> R {
        let mut fw = self.fw.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut fw)
    }

    /// The shared firmware.
    pub fn firmware(&self) -> Arc<Mutex<F>> {
        self.fw.clone()
    }

    /// Stops the node at once: its task ends and its transport is dropped (detached
    /// from the bus). The firmware stays readable.
    pub fn stop(&self) {
        self.task.abort();
    }

    /// Whether the node's task has ended (stopped, or its transport closed).
    pub fn is_stopped(&self) -> bool {
        self.task.is_finished()
    }
}

impl<F> Drop for SharedNode<F> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Like [`run_node`], but the firmware stays reachable from the returned handle, so a
/// test can read its state (motor duty, outputs, node state and counters) while it runs.
/// To reboot a node, [`SharedNode::stop`] it and run a new firmware (same node id, new
/// boot id) on a new transport.
pub fn run_node_shared<T: Transport + 'static, F: Firmware>(transport: T, fw: F) -> SharedNode<F> {
    let fw = Arc::new(Mutex::new(fw));
    let shared = fw.clone();
    let task = tokio::spawn(async move {
        drive(transport, |step, tx| {
            let mut fw = shared.lock().unwrap_or_else(|p| p.into_inner());
            match step {
                Step::Receive(frame, at) => fw.receive(frame, at),
                Step::Poll(now) => fw.poll(now, tx),
            }
        })
        .await;
    });
    SharedNode { fw, task }
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
    MotorDriver::new(fcan_example_motor_driver::gen::Config {
        node_id: id,
        boot_id: boot_id(),
        counts: fcan_example_motor_driver::gen::Counts { motor: motors },
        controller: controller(fd),
    })
    .expect("motor counts fit the schema")
}

/// Builds an I/O board firmware.
pub fn io_board(node_id: u8, fd: bool) -> IoBoard {
    let id = NodeId::new(node_id).expect("node id 0..=126");
    IoBoard::new(fcan_example_io_board::gen::Config {
        node_id: id,
        boot_id: boot_id(),
        counts: fcan_example_io_board::gen::Counts::MAX,
        controller: controller(fd),
    })
    .expect("counts fit the schema")
}

/// What a node's CAN controller can do: FD on an FD bus.
pub fn controller(fd: bool) -> fcan_runtime_nostd::Controller {
    if fd {
        fcan_runtime_nostd::Controller::Fd
    } else {
        fcan_runtime_nostd::Controller::Classic
    }
}

/// The main of a node binary: opens `bus` (`socketcan:IFACE`, FD when the interface MTU
/// is 72), builds the firmware for that frame kind with `build(fd)`, and runs it until the
/// bus closes or Ctrl-C. `name` prefixes its messages.
pub async fn node_main<F: Firmware>(
    name: &str,
    bus: &str,
    build: impl FnOnce(bool) -> F,
) -> std::process::ExitCode {
    let transport = match fcan_master::transport::open(bus, None) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{name}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let fd = transport.mtu() == fcan_core::frame::Mtu::Fd;
    eprintln!(
        "{name}: on {bus} ({})",
        if fd { "CAN FD" } else { "Classical CAN" }
    );
    let task = run_node(transport, build(fd));
    tokio::select! {
        _ = task => eprintln!("{name}: bus closed"),
        _ = tokio::signal::ctrl_c() => eprintln!("{name}: stopped"),
    }
    std::process::ExitCode::SUCCESS
}
