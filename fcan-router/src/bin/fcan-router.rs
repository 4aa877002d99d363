//! `fcan-router`: one uplink (the master's bus) and N downlink buses.
//!
//! ```text
//! fcan-router --uplink socketcan:can0 --downlink socketcan:can1 --downlink socketcan:can2
//! ```
//!
//! Prints routing events (nodes learned, moved, forgotten, collisions) on stderr, the
//! counters on stdout every `--stats-interval` seconds, on SIGUSR1, and once more when it
//! stops on Ctrl-C (SIGINT) or SIGTERM, after which it exits 0.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use fcan_core::frame::Mtu;
use fcan_router::bridge::{describe, format_counters, Bridge, BridgeOptions};
use fcan_router::Link;
use fcan_transport::sim::SimBus;
use fcan_transport::{open, AnyTransport};

/// Most downlinks the binary routes.
const MAX_DOWNLINKS: usize = 16;

/// Route fcan traffic between one uplink (the master's bus) and several downlink buses.
///
/// Links are transport specs as the `fcan` CLI takes them: `socketcan:IFACE`, or `sim`,
/// `sim:classic`, `sim:fd` (each `sim` link gets its own, otherwise empty, simulated bus:
/// for trying the binary out only).
///
/// Counters go to stdout every --stats-interval seconds, on SIGUSR1 and at exit; routing
/// events go to stderr. Ctrl-C or SIGTERM stops the router (exit 0).
#[derive(Parser, Debug)]
#[command(name = "fcan-router", version)]
struct Args {
    /// The master's bus.
    #[arg(long, value_name = "SPEC")]
    uplink: String,
    /// A downlink bus (repeat for each, in order: downlink 0, 1, …).
    #[arg(long = "downlink", value_name = "SPEC", required = true)]
    downlinks: Vec<String>,
    /// Print the counters every SECS seconds (0 = only on SIGUSR1 and at exit).
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    stats_interval: f64,
    /// Send m2s data frames whose identifier the router has not learned to every
    /// downlink instead of dropping them (use when the router starts after the master
    /// provisioned the nodes).
    #[arg(long)]
    flood_unknown_m2s: bool,
    /// Drop frames that are not fcan's (standard IDs outside 0x100..0x400, extended IDs
    /// without the configuration marker) instead of passing them through.
    #[arg(long)]
    no_foreign: bool,
    /// Do not print routing events.
    #[arg(long, short)]
    quiet: bool,
}

fn open_link(spec: &str) -> Result<AnyTransport, String> {
    let bus = spec
        .starts_with("sim")
        .then(|| SimBus::new(Default::default()));
    open(spec, bus.as_ref()).map_err(|e| format!("{spec}: {e}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fcan-router: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    if args.downlinks.len() > MAX_DOWNLINKS {
        return Err(format!("at most {MAX_DOWNLINKS} downlinks"));
    }
    if !(args.stats_interval >= 0.0 && args.stats_interval.is_finite()) {
        return Err("--stats-interval must be a number of seconds ≥ 0".into());
    }
    let up = open_link(&args.uplink)?;
    let downs = args
        .downlinks
        .iter()
        .map(|s| open_link(s))
        .collect::<Result<Vec<_>, _>>()?;
    let options = BridgeOptions {
        flood_unknown_m2s: args.flood_unknown_m2s,
        forward_foreign: !args.no_foreign,
        ..Default::default()
    };
    let bridge: Bridge<MAX_DOWNLINKS> =
        Bridge::start(up, downs, options).map_err(|e| e.to_string())?;
    let names = bridge.names().to_vec();
    let kinds: Vec<String> = std::iter::once(Link::Up)
        .chain((0..names.len().saturating_sub(1)).map(|i| Link::Down(i as u8)))
        .zip(&names)
        .map(|(l, n)| {
            let mtu = bridge.with_router(|r| r.mtu(l));
            format!(
                "{l} {n} ({})",
                if mtu == Some(Mtu::Fd) {
                    "FD"
                } else {
                    "classic"
                }
            )
        })
        .collect();
    eprintln!("fcan-router: routing {}", kinds.join(", "));
    let mut events = bridge.events();
    let mut stats = (args.stats_interval > 0.0).then(|| {
        let every = Duration::from_secs_f64(args.stats_interval);
        tokio::time::interval_at(tokio::time::Instant::now() + every, every)
    });
    let mut term = Sig::term()?;
    let mut usr1 = Sig::usr1()?;
    let print = |b: &Bridge<MAX_DOWNLINKS>| {
        println!("{}", format_counters(&b.counters(), &names));
    };
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            _ = usr1.recv() => print(&bridge),
            _ = tick(stats.as_mut()) => print(&bridge),
            e = events.recv() => match e {
                Ok(e) => {
                    if !args.quiet {
                        eprintln!("fcan-router: {}", describe(&e, &names));
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    eprintln!("fcan-router: {n} events not shown (too many at once)");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            },
        }
    }
    let counters = bridge.stop().await;
    eprintln!("fcan-router: stopping; final counters:");
    println!("{}", format_counters(&counters, &names));
    Ok(())
}

/// One Unix signal as a future (elsewhere: never fires).
struct Sig {
    #[cfg(unix)]
    inner: tokio::signal::unix::Signal,
}

impl Sig {
    #[cfg(unix)]
    fn term() -> Result<Sig, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let inner = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?;
        Ok(Sig { inner })
    }

    #[cfg(unix)]
    fn usr1() -> Result<Sig, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let inner = signal(SignalKind::user_defined1()).map_err(|e| format!("SIGUSR1: {e}"))?;
        Ok(Sig { inner })
    }

    #[cfg(not(unix))]
    fn term() -> Result<Sig, String> {
        Ok(Sig {})
    }

    #[cfg(not(unix))]
    fn usr1() -> Result<Sig, String> {
        Ok(Sig {})
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        if self.inner.recv().await.is_some() {
            return;
        }
        std::future::pending::<()>().await;
    }
}

async fn tick(i: Option<&mut tokio::time::Interval>) {
    match i {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}
