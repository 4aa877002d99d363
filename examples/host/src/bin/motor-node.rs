//! The motor driver example firmware, running on a PC against a real bus.
//!
//! ```sh
//! motor-node --bus socketcan:vcan0 --node-id 1 --motors 8
//! ```

use clap::Parser;
use fcan_examples::{motor_driver, run_node};

/// Runs the eight-motor driver example node on a CAN bus.
#[derive(Parser)]
#[command(
    version,
    after_help = "Example: motor-node --bus socketcan:vcan0 --node-id 1"
)]
struct Args {
    /// The bus: `socketcan:IFACE` (FD when the interface MTU is 72).
    #[arg(long, default_value = "socketcan:vcan0")]
    bus: String,
    /// This node's id (0..=126).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=126))]
    node_id: u8,
    /// Motors wired (1..=8).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=8))]
    motors: u8,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let transport = match fcan_master::transport::open(&args.bus, None) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("motor-node: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let fd = fcan_master::transport::Transport::mtu(&transport) == fcan_core::frame::Mtu::Fd;
    eprintln!(
        "motor-node: node {} with {} motors on {} ({})",
        args.node_id,
        args.motors,
        args.bus,
        if fd { "CAN FD" } else { "Classical CAN" }
    );
    let task = run_node(transport, motor_driver(args.node_id, args.motors, fd));
    tokio::select! {
        _ = task => eprintln!("motor-node: bus closed"),
        _ = tokio::signal::ctrl_c() => eprintln!("motor-node: stopped"),
    }
    std::process::ExitCode::SUCCESS
}
