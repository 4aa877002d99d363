//! Figures for docs/performance.md (ignored by default: it measures, it asserts no
//! timing). Run:
//!
//! ```sh
//! cargo test --release -p fcan-e2e --test remote_bench -- --ignored --nocapture
//! ```
//!
//! * `param get` through the daemon (`RemoteMaster` over loopback) vs the in-process
//!   master vs a one-shot master (start, discover, get — what every `fcan` command did);
//! * frame received by the daemon's master → JSON sample delivered to a Zenoh subscriber
//!   in another task over loopback: the attachment's `t_us` (the daemon's receive time)
//!   against the subscriber's clock (one process, so one clock).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fcan_core::frame::Mtu;
use fcan_e2e::*;
use fcan_master::{MasterApi, Phase};
use fcan_remote::server::{Server, ServerOptions};
use fcan_remote::session::SessionConfig;
use fcan_remote::wire::Attachment;
use fcan_remote::{ClientOptions, RemoteMaster};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

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
#[ignore = "a measurement: run with --ignored --nocapture"]
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
    let mut opts = ServerOptions::default();
    // FCAN_BENCH_EXPRESS=0: samples batched by Zenoh (the CPU/latency trade-off).
    opts.express = std::env::var("FCAN_BENCH_EXPRESS").map_or(true, |v| v != "0");
    println!("express samples: {}", opts.express);
    let clock = opts.clock;
    let _server = Server::start(master.clone(), &dz, "sim", opts)
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

    // Frame received → sample delivered to a subscriber task over loopback.
    let lat: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let l2 = lat.clone();
    let sub = cz
        .declare_subscriber("fcan/sim/topic/motor_driver1/*/feedback")
        .callback(move |s| {
            let now = Instant::now();
            if let Some(a) = s
                .attachment()
                .and_then(|a| serde_json::from_slice::<Attachment>(&a.to_bytes()).ok())
            {
                let at = clock + Duration::from_micros(a.t_us);
                l2.lock().unwrap().push(now.saturating_duration_since(at));
            }
        })
        .await
        .unwrap();
    // The same in process: the master's own subscriber (what the daemon starts from).
    let local: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let mut rx = master
        .subscribe("/motor_driver1/motor0/feedback")
        .await
        .unwrap();
    let l3 = local.clone();
    let in_process = tokio::spawn(async move {
        while let Some(s) = rx.recv().await {
            l3.lock()
                .unwrap()
                .push(Instant::now().saturating_duration_since(s.at));
        }
    });
    // Eight motors' feedback every 5 ms: 1,600 samples/s.
    tokio::time::sleep(Duration::from_secs(1)).await;
    lat.lock().unwrap().clear();
    local.lock().unwrap().clear();
    tokio::time::sleep(Duration::from_secs(5)).await;
    drop(sub);
    in_process.abort();
    let mut v = std::mem::take(&mut *local.lock().unwrap());
    line(
        "frame received -> sample at an in-process subscriber task (no network)",
        &mut v,
    );
    let mut v = std::mem::take(&mut *lat.lock().unwrap());
    line(
        "frame received -> JSON sample at a subscriber task (loopback)",
        &mut v,
    );

    // CPU: the whole process (simulated nodes, master, daemon, client) for 5 s without a
    // topic subscriber, then 5 s with one on every topic; the difference is what serving
    // the samples costs (the daemon and this client's receiving together: an upper bound).
    fn cpu() -> Duration {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let f: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10) // USER_HZ = 100
    }
    let window = Duration::from_secs(5);
    let c0 = cpu();
    tokio::time::sleep(window).await;
    let idle = cpu() - c0;
    let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let n2 = n.clone();
    let all = cz
        .declare_subscriber("fcan/sim/topic/**")
        .callback(move |_| {
            n2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (c1, n1) = (cpu(), n.load(std::sync::atomic::Ordering::Relaxed));
    tokio::time::sleep(window).await;
    let busy = cpu() - c1;
    let served = n.load(std::sync::atomic::Ordering::Relaxed) - n1;
    drop(all);
    let extra = busy.saturating_sub(idle);
    println!(
        "CPU: {:.1} % of a core without subscribers, {:.1} % serving {:.0} samples/s to one subscriber: +{:.1} % ({:.1} µs per sample)",
        idle.as_secs_f64() / window.as_secs_f64() * 100.0,
        busy.as_secs_f64() / window.as_secs_f64() * 100.0,
        served as f64 / window.as_secs_f64(),
        extra.as_secs_f64() / window.as_secs_f64() * 100.0,
        extra.as_secs_f64() * 1e6 / served.max(1) as f64,
    );
    let st = master.status().await.unwrap();
    println!(
        "rx_frames={} samples={}",
        st.stats.rx_frames,
        st.samples.values().sum::<u64>()
    );
    drop(w);
}
