//! The motor driver example firmware, running on a PC against a real bus.
//!
//! ```sh
//! motor-node --bus socketcan:vcan0 --node-id 1 --motors 8
//! ```

use clap::Parser;
use fcan_examples::{motor_driver, node_main};

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
    node_main("motor-node", &args.bus, |fd| {
        motor_driver(args.node_id, args.motors, fd)
    })
    .await
}
