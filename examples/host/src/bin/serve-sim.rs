//! `fcan serve` with the example nodes on its simulated bus: the daemon's own argument
//! parser and its own function (`fcan_cli::serve::serve`), handed a simulated bus on which
//! motor_driver1 (8 motors), motor_driver2 (4 motors) and io_board3 already run.
//!
//! `fcan serve --bus sim` alone owns an empty simulated bus (nothing outside its process
//! can attach to it); this binary is that same daemon with the example firmwares on the
//! bus, the way `fcan fake` runs fake nodes under it. Nobody commands the motors: unlike
//! the demo, what the bus carries is what its clients ask for. `.ci/foxglove-peer.sh` runs
//! the Foxglove peer test against its `--foxglove`.
//!
//! ```sh
//! cargo run -p fcan-examples --bin serve-sim -- --bus sim --listen tcp/127.0.0.1:7447 \
//!     --foxglove 127.0.0.1:8765
//! ```
//!
//! Every argument is `fcan serve`'s (`serve-sim --help`). The nodes run on CAN FD, or on
//! Classical CAN when the first bus is `sim:classic`.
//!
//! For tests of what a lost board does to the faces: `SIGUSR1` pulls motor_driver2 (its
//! firmware stops, as when its power is cut) and `SIGUSR2` plugs a new one in (a fresh
//! boot). `tests/peers/ros2_rclpy_peer.py` pulls it under a ros2_control joint.

use clap::Parser;
use fcan_cli::serve::{bus_name, serve, ServeCli};
use fcan_core::frame::Mtu;
use fcan_examples::{io_board, motor_driver, run_node};
use fcan_master::text::Untrusted;
use fcan_master::transport::sim::{SimBus, SimConfig};

// Zenoh's blocking paths (closing a session) need the multi-thread runtime.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    let args = std::iter::once("fcan serve".into()).chain(std::env::args_os().skip(1));
    let cli = ServeCli::parse_from(args);
    // The daemon's diagnostics as `fcan serve` prints them (the CI peers grep them).
    fcan_cli::diagnostics::init("fcan serve");
    let classic = cli
        .buses
        .first()
        .and_then(|b| bus_name(b).ok())
        .is_some_and(|(_, spec)| spec == "sim:classic");
    let (mtu, fd) = if classic {
        (Mtu::Classic, false)
    } else {
        (Mtu::Fd, true)
    };
    let bus = SimBus::new(SimConfig::default());
    let _md1 = run_node(bus.endpoint(mtu), motor_driver(1, 8, fd));
    let _io = run_node(bus.endpoint(mtu), io_board(3, fd));
    pull_and_plug(bus.clone(), mtu, fd);
    eprintln!("serve-sim: motor_driver1 (8 motors), motor_driver2 (4 motors), io_board3 on the simulated bus");
    match serve(cli, Some(&bus)).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("serve-sim: error: {}", Untrusted(&e.to_string()));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs motor_driver2; `SIGUSR1` stops it (pulled), `SIGUSR2` starts a new one (plugged
/// in again), each said on stderr.
fn pull_and_plug(bus: SimBus, mtu: Mtu, fd: bool) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut pull), Ok(mut plug)) = (
        signal(SignalKind::user_defined1()),
        signal(SignalKind::user_defined2()),
    ) else {
        eprintln!("serve-sim: no SIGUSR1/SIGUSR2 handlers; motor_driver2 cannot be pulled");
        return;
    };
    let mut node = Some(run_node(bus.endpoint(mtu), motor_driver(2, 4, fd)));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                Some(()) = pull.recv() => {
                    if let Some(n) = node.take() {
                        n.abort();
                        eprintln!("serve-sim: motor_driver2 pulled (SIGUSR1)");
                    }
                }
                Some(()) = plug.recv() => {
                    if node.is_none() {
                        node = Some(run_node(bus.endpoint(mtu), motor_driver(2, 4, fd)));
                        eprintln!("serve-sim: motor_driver2 plugged in again (SIGUSR2)");
                    }
                }
                else => return,
            }
        }
    });
}
