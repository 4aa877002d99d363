//! The I/O board example firmware, running on a PC against a real bus.
//!
//! ```sh
//! io-node --bus socketcan:vcan0 --node-id 2
//! ```

use clap::Parser;
use fcan_examples::{io_board, run_node};

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
    let transport = match fcan_master::transport::open(&args.bus, None) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("io-node: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let fd = fcan_master::transport::Transport::mtu(&transport) == fcan_core::frame::Mtu::Fd;
    eprintln!(
        "io-node: node {} on {} ({})",
        args.node_id,
        args.bus,
        if fd { "CAN FD" } else { "Classical CAN" }
    );
    let task = run_node(transport, io_board(args.node_id, fd));
    tokio::select! {
        _ = task => eprintln!("io-node: bus closed"),
        _ = tokio::signal::ctrl_c() => eprintln!("io-node: stopped"),
    }
    std::process::ExitCode::SUCCESS
}
