//! The I/O board example firmware, running on a PC against a real bus.
//!
//! ```sh
//! io-node --bus socketcan:vcan0 --node-id 2
//! ```

use clap::Parser;
use fcan_examples::{io_board, node_main};

/// Runs the I/O board example node on a CAN bus.
#[derive(Parser)]
#[command(
    version,
    after_help = "Example: io-node --bus socketcan:vcan0 --node-id 2"
)]
struct Args {
    /// The bus: `socketcan:IFACE` (FD when the interface MTU is 72).
    #[arg(long, default_value = "socketcan:vcan0")]
    bus: String,
    /// This node's id (0..=126).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=126))]
    node_id: u8,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    node_main("io-node", &args.bus, |fd| io_board(args.node_id, fd)).await
}
