//! Figures for docs/performance.md (ignored by default: it measures, it asserts no
//! timing): a frame received by the master → its sample delivered by DDS to a RustDDS
//! reader in **another process**, p50/p99, with the example nodes on the simulated bus;
//! and the same span for RustDDS alone (`dds_baseline_figures`), which the bridge adds to.
//! The latency is the reader's wall clock minus the sample's source timestamp, which the
//! bridge sets to the time the frame reached the master (the Zenoh figures in
//! `tests/tests/remote_bench.rs` measure the same span for the daemon's Zenoh path).
//!
//! DDS discovers by multicast: run it in a network namespace of its own, with only `lo`
//! (`unshare -n` makes one), as docs/performance.md shows:
//!
//! ```sh
//! unshare -n sh -c 'ip link set lo up && ip link set lo multicast on && \
//!   ip route add 224.0.0.0/4 dev lo && \
//!   cargo test --release -p fcan-ros2-bridge --test bench -- --ignored --nocapture --exact dds_figures && \
//!   cargo test --release -p fcan-ros2-bridge --test bench -- --ignored --nocapture --exact dds_baseline_figures'
//! ```

use std::time::{Duration, SystemTime};

use fcan_core::frame::Mtu;
use fcan_e2e::{wait_running, TakenAt, World, IO3, MD1, MD2};
use fcan_ros2_bridge::dds::{Dds, DdsWriter, Endpoint};
use fcan_ros2_bridge::routes::WRITER_QOS;
use fcan_ros2_bridge::rustdds_backend::{Range, RustDds};
use fcan_ros2_bridge::{Ros2Bridge, Ros2Options};
use futures_util::StreamExt;

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture in a network namespace"]
async fn dds_figures() {
    // As World::standard, with the master's frames stamped when it takes them (as on
    // SocketCAN), not at the simulated bus's end of frame, which a waiting receiver sees
    // up to 1 ms late: the span measured is then the one the Zenoh figures measure.
    let mut w = World::new(Mtu::Fd);
    w.add_motor(MD1, 8);
    w.add_motor(MD2, 4);
    w.add_io(IO3);
    let master = w.start_master_on(TakenAt(w.endpoint())).await;
    wait_running(&master, &[MD1, MD2, IO3], Duration::from_secs(3)).await;
    let dds = RustDds::new(0, Range::Localhost).unwrap();
    let bridge = Ros2Bridge::start(master.clone(), dds, Ros2Options::default()).await;
    let text = run_child().await;
    let s = bridge.stats();
    println!(
        "bridge: {} samples written to DDS, {} failed",
        s.written, s.failed
    );
    for l in text.lines().filter(|l| l.starts_with("child")) {
        println!("{l}");
    }
}

/// The baseline of [`dds_figures`]: RustDDS alone, no master and no bridge. Writers of
/// the same thirteen topics write samples stamped with the time of writing at the
/// example nodes' rate (200 Hz each, ~2,600 samples/s) to the same reader process. What
/// [`dds_figures`] measures beyond this is the bridge's (and the master's) share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture in a network namespace"]
async fn dds_baseline_figures() {
    let dds = RustDds::new(0, Range::Localhost).unwrap();
    let writers: Vec<_> = bench_topics()
        .iter()
        .map(|(topic, ty)| {
            dds.writer(&Endpoint {
                topic: topic.clone(),
                type_name: ty.to_string(),
                qos: WRITER_QOS,
                type_hash: None,
            })
            .unwrap()
        })
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writing = {
        let stop = stop.clone();
        tokio::spawn(async move {
            // Any CDR will do: the reader only reads the source timestamp.
            let cdr = [0u8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
            let mut tick = tokio::time::interval(Duration::from_millis(5));
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                tick.tick().await;
                for w in &writers {
                    w.write(&cdr, None, Some(SystemTime::now())).unwrap();
                    n += 1;
                }
            }
            n
        })
    };
    let text = run_child().await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    println!(
        "baseline: {} samples written to DDS",
        writing.await.unwrap()
    );
    for l in text.lines().filter(|l| l.starts_with("child")) {
        println!("{l}");
    }
}

/// Runs [`dds_child`] as another process and returns its output.
async fn run_child() -> String {
    let secs: u64 = std::env::var("FCAN_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let out = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "dds_child", "--nocapture"])
        .env("FCAN_BENCH_CHILD", "1")
        .env("FCAN_BENCH_SECS", secs.to_string())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "child: {text}");
    text
}

/// The topics the reader takes: every motor feedback and the analog samples of the
/// example nodes.
fn bench_topics() -> Vec<(String, &'static str)> {
    let mut topics: Vec<(String, &str)> = Vec::new();
    for (node, motors) in [("motor_driver1", 8), ("motor_driver2", 4)] {
        for m in 0..motors {
            topics.push((
                format!("rt/{node}/motor{m}/feedback"),
                "example_msgs::msg::dds_::Feedback_",
            ));
        }
    }
    topics.push((
        "rt/io_board3/analog/samples".into(),
        "fcan_io_board_msgs::msg::dds_::AnalogSensorSamples_",
    ));
    topics
}

/// The reader process of [`dds_figures`] (does nothing when run on its own): every
/// motor feedback and the analog samples, for `FCAN_BENCH_SECS` after a 1 s warm-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "the child process of dds_figures"]
async fn dds_child() {
    if std::env::var("FCAN_BENCH_CHILD").is_err() {
        return;
    }
    let secs: u64 = std::env::var("FCAN_BENCH_SECS").unwrap().parse().unwrap();
    let dds = RustDds::new(0, Range::Localhost).unwrap();
    let mut streams = Vec::new();
    for (topic, ty) in &bench_topics() {
        let r = dds
            .reader(&Endpoint {
                topic: topic.clone(),
                type_name: ty.to_string(),
                qos: WRITER_QOS,
                type_hash: None,
            })
            .unwrap();
        streams.push(r.samples);
    }
    let mut all = futures_util::stream::select_all(streams);
    // Warm-up: discovery, matching, the first samples.
    let warm = tokio::time::Instant::now() + Duration::from_secs(1);
    while tokio::time::Instant::now() < warm {
        let _ = tokio::time::timeout(Duration::from_millis(50), all.next()).await;
    }
    let end = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut lat = Vec::new();
    while let Ok(Some(s)) = tokio::time::timeout_at(end, all.next()).await {
        if let Some(t) = s.source_time {
            lat.push(SystemTime::now().duration_since(t).unwrap_or_default());
        }
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let n = lat.len();
    assert!(n > 0, "no samples with a source timestamp");
    println!(
        "child: frame received → DDS sample in another process: n={n} ({:.0}/s) p50={:.0} µs p99={:.0} µs max={:.0} µs",
        n as f64 / secs as f64,
        us(pct(&mut lat, 0.5)),
        us(pct(&mut lat, 0.99)),
        us(pct(&mut lat, 1.0)),
    );
}
