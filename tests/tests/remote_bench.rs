//! Figures for docs/performance.md (ignored by default: it measures, it asserts no
//! timing). Run:
//!
//! ```sh
//! cargo test --release -p fcan-e2e --test remote_bench -- --ignored --nocapture
//! ```
//!
//! * `param get` through the daemon (`RemoteMaster` over loopback) vs the in-process
//!   master vs a one-shot master (start, discover, get — what every `fcan` command did);
//! * serving samples ([`serving_figures`]): frame received by the daemon's master → JSON
//!   sample delivered to a Zenoh subscriber in **another process** over loopback, and the
//!   daemon's CPU per sample served, express and batched, side by side.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fcan_core::frame::Mtu;
use fcan_e2e::*;
use fcan_master::{MasterApi, Phase};
use fcan_remote::server::{Delivery, Server, ServerOptions};
use fcan_remote::session::SessionConfig;
use fcan_remote::wire::Attachment;
use fcan_remote::{ClientOptions, RemoteMaster};

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn line(what: &str, v: &mut [Duration]) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{what}: n={} p50={:.0} µs p99={:.0} µs max={:.0} µs",
        v.len(),
        us(pct(v, 0.5)),
        us(pct(v, 0.99)),
        us(pct(v, 1.0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for docs/performance.md: run by hand, --release -- --ignored --nocapture"]
async fn remote_figures() {
    let (w, master) = World::standard(Mtu::Fd).await;
    let port = free_port();
    let ep = format!("tcp/127.0.0.1:{port}");
    let dz = SessionConfig::daemon()
        .listen([ep.clone()])
        .open()
        .await
        .unwrap()
        .session;
    let _server = Server::start(master.clone(), &dz, "sim", ServerOptions::default())
        .await
        .unwrap();
    let cz = SessionConfig::client()
        .connect([ep])
        .open()
        .await
        .unwrap()
        .session;
    let remote = RemoteMaster::connect(&cz, "sim", ClientOptions::default())
        .await
        .unwrap();
    loop {
        if let Ok(n) = remote.nodes().await {
            if n.iter().filter(|x| x.phase == Phase::Running).count() == 3 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kp = "motor_driver1.motor0.velocity.kp";

    // param get: in-process, through the daemon.
    for (name, n) in [
        ("param get, in-process master", 0),
        ("param get, through the daemon", 1),
    ] {
        let mut v = Vec::new();
        for _ in 0..300 {
            let t = Instant::now();
            if n == 0 {
                master.param_get(kp).await.unwrap();
            } else {
                remote.param_get(kp).await.unwrap();
            }
            v.push(t.elapsed());
        }
        line(name, &mut v);
    }
    // A one-shot master on the same bus (the daemon's master steps aside: each one-shot
    // master would see it as another master otherwise) — on a second world.
    let mut v = Vec::new();
    let mut w2 = World::new(Mtu::Fd);
    w2.add_motor(MD1, 8);
    for _ in 0..5 {
        let t = Instant::now();
        let m = w2.start_master().await;
        MasterApi::wait_for_nodes(&m, 1, Duration::from_secs(10))
            .await
            .unwrap();
        m.param_get(kp).await.unwrap();
        v.push(t.elapsed());
        drop(m);
        // Let the nodes notice the master is gone before the next one starts.
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    line(
        "param get, one-shot master (start, discover, get; sim bus, warm cache)",
        &mut v,
    );

    drop(w);
}

/// The monotonic clock in nanoseconds: on Linux `std::time::Instant` reads
/// `CLOCK_MONOTONIC`, which every process shares, so a time taken in the daemon's process
/// can be compared with one taken in the subscriber's.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This process's CPU time (user + system, µs resolution), its system time, and its
/// context switches (voluntary + involuntary: the thread hand-offs).
#[derive(Clone, Copy)]
struct Usage {
    cpu: Duration,
    sys: Duration,
    switches: u64,
}

impl std::ops::Sub for Usage {
    type Output = Usage;
    fn sub(self, o: Usage) -> Usage {
        Usage {
            cpu: self.cpu.saturating_sub(o.cpu),
            sys: self.sys.saturating_sub(o.sys),
            switches: self.switches.saturating_sub(o.switches),
        }
    }
}

fn usage() -> Usage {
    // SAFETY: getrusage writes one rusage through a valid pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Usage {
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        sys: tv(ru.ru_stime),
        switches: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
    }
}

/// Serving samples, side by side in one run: a daemon (`Server`, simulated bus with the
/// example firmwares: motor_driver1 with 8 motors, motor_driver2 with 4, io_board3) and a
/// subscriber to `fcan/sim/topic/**` in a child process (this test binary again, running
/// [`serving_child`]) over TCP on loopback. Reports, for express and for batched sample
/// publishers:
///
/// * frame taken by the daemon's master → JSON sample in the child's callback, on the
///   shared monotonic clock (the attachment's `t_us` + the daemon's clock origin);
/// * the daemon process's CPU over the window minus its CPU with no subscriber over an
///   equal window before: the cost of serving, per sample and per frame;
/// * the child's own CPU (the subscriber side).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for docs/performance.md: run by hand, --release -- --ignored --nocapture"]
async fn serving_figures() {
    // FCAN_BENCH_DRIVERS=N: N eight-motor drivers instead of the standard pair (17 put
    // about 7,000 frames/s on the bus: saturated CAN FD).
    let drivers: Option<u8> = std::env::var("FCAN_BENCH_DRIVERS")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut w = World::new(Mtu::Fd);
    let mut ids = vec![IO3];
    match drivers {
        None => {
            w.add_motor(MD1, 8);
            w.add_motor(MD2, 4);
            ids.extend([MD1, MD2]);
        }
        Some(n) => {
            for id in (1..=n + 1).filter(|id| *id != IO3) {
                w.add_motor(id, 8);
                ids.push(id);
            }
        }
    }
    w.add_io(IO3);
    let master = w.start_master_on(TakenAt(w.endpoint())).await;
    wait_running(&master, &ids, Duration::from_secs(10)).await;
    let port = free_port();
    let ep = format!("tcp/127.0.0.1:{port}");
    // FCAN_BENCH_ZENOH_CONFIG=FILE: the daemon's Zenoh configuration from a file (to
    // compare transport settings).
    let dz = SessionConfig::daemon()
        .zenoh_config(std::env::var_os("FCAN_BENCH_ZENOH_CONFIG").map(Into::into))
        .listen([ep.clone()])
        .open()
        .await
        .unwrap()
        .session;
    let secs: u64 = std::env::var("FCAN_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let window = Duration::from_secs(secs);
    // The master alone, no server: what owning the bus costs before anything is served.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let a0 = usage();
    tokio::time::sleep(window).await;
    let alone = usage() - a0;
    println!(
        "master alone (and the simulated nodes): {:.1} % of a core",
        alone.cpu.as_secs_f64() / window.as_secs_f64() * 100.0
    );
    // FCAN_BENCH_MODES=express|topics|grouped: one row only.
    let modes = std::env::var("FCAN_BENCH_MODES").unwrap_or_default();
    // FCAN_BENCH_DELIVERY=prompt|batched: how the topics and grouped rows deliver
    // (the express row is always express).
    let delivery: Delivery = std::env::var("FCAN_BENCH_DELIVERY")
        .map(|d| d.parse().unwrap())
        .unwrap_or_default();
    println!("delivery of the topics and grouped rows: {delivery:?}");
    for (mode, d, key) in [
        ("express", Delivery::Express, "fcan/sim/topic/**"),
        ("topics", delivery, "fcan/sim/topic/**"),
        ("grouped", delivery, "fcan/sim/samples/*"),
    ]
    .into_iter()
    .filter(|(m, _, _)| modes.is_empty() || modes == *m)
    {
        let mut opts = ServerOptions::default();
        opts.delivery = d;
        // The daemon's clock origin, read on both clocks back to back.
        let origin = Instant::now();
        let origin_ns = mono_ns();
        opts.clock = origin;
        let server = Server::start(master.clone(), &dz, "sim", opts)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Idle: served, nobody subscribed.
        let (c0, f0) = (usage(), master.status().await.unwrap().stats.rx_frames);
        tokio::time::sleep(window).await;
        let (idle, idle_frames) = (
            usage() - c0,
            master.status().await.unwrap().stats.rx_frames - f0,
        );
        let c = server.counters();
        println!(
            "{mode}, nobody subscribed: {} samples and {} groups put",
            c.samples, c.sample_groups
        );
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "serving_child", "--nocapture"])
            .env("FCAN_BENCH_CHILD", &ep)
            .env("FCAN_BENCH_ORIGIN_NS", origin_ns.to_string())
            .env("FCAN_BENCH_SECS", secs.to_string())
            .env("FCAN_BENCH_KEY", key)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
        let mut out = Vec::new();
        // The child says READY when subscribed, then warms up 500 ms and measures.
        while let Some(l) = lines.next_line().await.unwrap() {
            if l == "READY" {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (c1, f1, s1) = (
            usage(),
            master.status().await.unwrap().stats.rx_frames,
            decoded(&master).await,
        );
        tokio::time::sleep(window).await;
        let (busy, frames, samples) = (
            usage() - c1,
            master.status().await.unwrap().stats.rx_frames - f1,
            decoded(&master).await - s1,
        );
        while let Some(l) = lines.next_line().await.unwrap() {
            out.push(l);
        }
        assert!(child.wait().await.unwrap().success(), "child: {out:?}");
        drop(server);
        let pct = |d: Duration| d.as_secs_f64() / window.as_secs_f64() * 100.0;
        let extra = busy.cpu.saturating_sub(idle.cpu);
        let per = |d: Duration, n: u64| d.as_secs_f64() * 1e6 / n.max(1) as f64;
        println!(
            "{}: daemon CPU {:.1} % idle ({:.0} frames/s), {:.1} % serving {:.0} samples/s \
             from {:.0} frames/s: +{:.1} % = {:.1} µs per sample, {:.1} µs per frame \
             (system time +{:.1} µs per sample; context switches {:.2} per sample over idle)",
            mode,
            pct(idle.cpu),
            idle_frames as f64 / window.as_secs_f64(),
            pct(busy.cpu),
            samples as f64 / window.as_secs_f64(),
            frames as f64 / window.as_secs_f64(),
            pct(extra),
            per(extra, samples),
            per(extra, frames),
            per(busy.sys.saturating_sub(idle.sys), samples),
            busy.switches.saturating_sub(idle.switches) as f64 / samples.max(1) as f64,
        );
        let total = busy.cpu.saturating_sub(alone.cpu);
        println!(
            "  over the master alone: +{:.1} % unwatched, +{:.1} % watched = {:.1} µs per frame",
            pct(idle.cpu.saturating_sub(alone.cpu)),
            pct(total),
            per(total, frames),
        );
        for l in out.iter().filter(|l| l.starts_with("child")) {
            println!("  {l}");
        }
    }
    // The master alone again, every server gone: how far the baseline drifted.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let a1 = usage();
    tokio::time::sleep(window).await;
    println!(
        "master alone again: {:.1} % of a core",
        (usage() - a1).cpu.as_secs_f64() / window.as_secs_f64() * 100.0
    );
    drop(w);
}

/// Samples the master has decoded so far (all are subscribed, so all are served).
async fn decoded(master: &fcan_master::Master) -> u64 {
    master.status().await.unwrap().samples.values().sum()
}

/// The subscriber process of [`serving_figures`] (does nothing when run on its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "not a test: serving_figures runs it as its subscriber process"]
async fn serving_child() {
    let Ok(ep) = std::env::var("FCAN_BENCH_CHILD") else {
        return;
    };
    let origin_ns: u64 = std::env::var("FCAN_BENCH_ORIGIN_NS")
        .unwrap()
        .parse()
        .unwrap();
    let secs: u64 = std::env::var("FCAN_BENCH_SECS").unwrap().parse().unwrap();
    let z = SessionConfig::client()
        .connect([ep])
        .open()
        .await
        .unwrap()
        .session;
    let lat: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let on = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (l2, on2) = (lat.clone(), on.clone());
    let _sub = z
        .declare_subscriber(std::env::var("FCAN_BENCH_KEY").unwrap())
        .callback(move |s| {
            let now = mono_ns();
            if !on2.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            // What any client does with a sample: parse it.
            let v: serde_json::Value = serde_json::from_slice(&s.payload().to_bytes()).unwrap();
            std::hint::black_box(v);
            if let Some(a) = s
                .attachment()
                .and_then(|a| serde_json::from_slice::<Attachment>(&a.to_bytes()).ok())
            {
                let at = origin_ns + a.t_us * 1000;
                l2.lock()
                    .unwrap()
                    .push(Duration::from_nanos(now.saturating_sub(at)));
            }
        })
        .await
        .unwrap();
    println!("READY");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c0 = usage();
    on.store(true, std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    on.store(false, std::sync::atomic::Ordering::Relaxed);
    let used = usage() - c0;
    let mut v = std::mem::take(&mut *lat.lock().unwrap());
    let n = v.len();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "child: frame taken by the daemon -> JSON put parsed in this process: n={n} p50={:.0} µs p99={:.0} µs p99.9={:.0} µs max={:.0} µs",
        us(pct(&mut v, 0.5)),
        us(pct(&mut v, 0.99)),
        us(pct(&mut v, 0.999)),
        us(pct(&mut v, 1.0)),
    );
    println!(
        "child: subscriber CPU {:.1} % of a core ({:.1} µs per put, {:.2} context switches per put)",
        used.cpu.as_secs_f64() / secs as f64 * 100.0,
        used.cpu.as_secs_f64() * 1e6 / n.max(1) as f64,
        used.switches as f64 / n.max(1) as f64,
    );
}
