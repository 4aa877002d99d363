//! SocketCAN throughput, one frame per system call against batches: frames/s sent and
//! received on one core, on one `vcan` at full rate, classic and FD frames.
//!
//! ```text
//! cargo build --release -p fcan-transport --example socketcan_bench
//! ../shared/tools/run-in-vm.sh --timeout 600 target/release/examples/socketcan_bench [FRAMES]
//! ```
//!
//! Needs `vcan0` (CAN FD, MTU 72) and `vcan1` (any MTU); `run-in-vm.sh` sets both up.
//! Every measurement runs on a current-thread tokio runtime, so the process side of each
//! direction uses one core (the kernel's vcan work runs inside the same system calls).
//!
//! * **send**: one transport writes `FRAMES` frames as fast as it can; batch 1 is
//!   [`Transport::send`] (one `sendmmsg` of one frame per call), larger ones
//!   [`Transport::send_batch`] in chunks of that size.
//! * **receive under flood**: another thread floods `vcan0` with `sendmmsg` batches of 64 while the
//!   measured transport drains it with `recvmmsg` batches of the given size (1 = one
//!   frame per system call). It reports what it received per second and what the kernel
//!   dropped because the reader fell behind (sent − received), and how many frames one
//!   `recvmmsg` returned on average.
//! * **drain**: the receive buffer is filled first (nothing timed), then drained: the pure
//!   cost of reading, without a competing writer.
//!
//! Rates are frames per CPU-second of the measuring thread (`/proc/thread-self/schedstat`,
//! user + kernel time), best of three interleaved rounds; dropped frames are summed over
//! the three. Figures and their reading: `docs/performance.md`.

use std::time::Duration;

use fcan_core::frame::{CanId, Frame};
use fcan_transport::socketcan::SocketCanTransport;
use fcan_transport::Transport;

const BATCHES: [usize; 4] = [1, 8, 32, 64];

/// Nanoseconds this thread has spent on a CPU (user and kernel, so the vcan work done
/// inside our system calls counts), from the scheduler's own accounting: frames per CPU
/// second is "per core", and time the VM's vCPU spends waiting for its busy host does not
/// count against the code measured.
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace().next().unwrap().parse().unwrap()
}

fn per_cpu_second(frames: u64, from_ns: u64) -> f64 {
    frames as f64 / ((cpu_ns() - from_ns) as f64 / 1e9)
}

// One identifier per measurement: the kernel may still deliver a previous measurement's
// loopback frames (its softirq backlog lags a flooding writer), and those must not count.
const SEND_ID: u16 = 0x100;
const FLOOD_ID: u16 = 0x200;
const DRAIN_ID: u16 = 0x300;

/// Frame `i` (numbered in its first four bytes) with identifier `id`.
fn frame(fd: bool, id: u16, i: u32) -> Frame {
    let mut data = [0u8; 64];
    data[..4].copy_from_slice(&i.to_le_bytes());
    if fd {
        Frame::fd(CanId::Standard(id), &data).unwrap()
    } else {
        Frame::classic(CanId::Standard(id), &data[..8]).unwrap()
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Frames/s written by one transport, `batch` frames per call.
fn send_rate(fd: bool, batch: usize, total: u32) -> f64 {
    rt().block_on(async {
        let mut a = SocketCanTransport::open("vcan0").unwrap();
        let frames: Vec<Frame> = (0..total).map(|i| frame(fd, SEND_ID, i)).collect();
        let start = cpu_ns();
        if batch == 1 {
            for f in &frames {
                a.send(f).await.unwrap();
            }
        } else {
            for chunk in frames.chunks(batch) {
                let n = a.send_batch(chunk).await.unwrap();
                assert_eq!(n, chunk.len());
            }
        }
        per_cpu_second(u64::from(total), start)
    })
}

/// (received frames/s, frames the kernel dropped, frames per `recvmmsg`) while another
/// thread floods `vcan0`.
fn recv_rate(fd: bool, batch: usize, total: u32) -> (f64, u64, f64) {
    rt().block_on(async {
        let mut b = SocketCanTransport::open("vcan0").unwrap();
        b.set_rx_batch(batch);
        let writer = std::thread::spawn(move || {
            rt().block_on(async {
                let mut a = SocketCanTransport::open("vcan0").unwrap();
                let frames: Vec<Frame> = (0..total).map(|i| frame(fd, FLOOD_ID, i)).collect();
                for chunk in frames.chunks(64) {
                    a.send_batch(chunk).await.unwrap();
                }
            })
        });
        let mut got = 0u64;
        // Waiting (for the writer to start, and the final 300 ms of silence) is spent in
        // epoll and costs no CPU time, so one reading either side suffices.
        let start = cpu_ns();
        let mut patience = Duration::from_secs(20); // until the writer's first frame
        while let Ok(r) = tokio::time::timeout(patience, b.recv()).await {
            if r.unwrap().frame.id() == CanId::Standard(FLOOD_ID) {
                got += 1;
                patience = Duration::from_millis(300);
            }
        }
        let rate = per_cpu_second(got, start);
        writer.join().unwrap();
        let st = b.stats();
        let per_call = st.rx_frames as f64 / st.rx_calls.max(1) as f64;
        (rate, u64::from(total) - got, per_call)
    })
}

/// Frames the kernel dropped from its per-CPU receive backlogs so far (the second column
/// of `/proc/net/softnet_stat`, summed over CPUs): where vcan loses frames when its
/// softirq work falls behind a sender.
fn backlog_drops() -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .sum()
}

/// (frames/s read from a filled receive buffer, frames lost), `batch` frames per call.
fn drain_rate(fd: bool, batch: usize, rounds: u32) -> (f64, u64) {
    rt().block_on(async {
        let mut a = SocketCanTransport::open("vcan0").unwrap();
        let mut b = SocketCanTransport::open("vcan0").unwrap();
        b.set_rx_batch(batch);
        // Below what the enlarged receive buffer holds (2,731 frames in the VM).
        let fill = 1000u32;
        let frames: Vec<Frame> = (0..fill).map(|i| frame(fd, DRAIN_ID, i)).collect();
        let mut busy = 0;
        let mut got = 0u64;
        let mut lost = 0u64;
        for _ in 0..rounds {
            assert_eq!(a.send_batch(&frames).await.unwrap(), frames.len());
            let start = cpu_ns();
            let mut next = 0;
            while let Ok(r) = tokio::time::timeout(Duration::from_millis(300), b.recv()).await {
                let f = r.unwrap().frame;
                if f.id() != CanId::Standard(DRAIN_ID) {
                    continue;
                }
                let seq = u32::from_le_bytes(f.data()[..4].try_into().unwrap());
                assert!(seq >= next, "reordered: {seq} after {next}");
                lost += u64::from(seq - next);
                next = seq + 1;
                got += 1;
                if next == fill {
                    break;
                }
            }
            lost += u64::from(fill - next);
            busy += cpu_ns() - start;
        }
        (got as f64 / (busy as f64 / 1e9), lost)
    })
}

fn main() {
    let total: u32 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("FRAMES: a number"))
        .unwrap_or(200_000);
    let probe = rt().block_on(async { SocketCanTransport::open("vcan0").unwrap() });
    let (rcv, snd) = probe.buffer_sizes().unwrap();
    println!(
        "socket buffers granted: SO_RCVBUF {rcv} B, SO_SNDBUF {snd} B; {total} frames per run"
    );
    println!();
    let drops_before = backlog_drops();
    println!(
        "| frames | batch | send | receive under flood (dropped) | frames per recvmmsg | drain (dropped) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for fd in [false, true] {
        let kind = if fd { "FD 64 B" } else { "classic 8 B" };
        // Three rounds over all batch sizes, best of each: the VM shares a busy host, and
        // interleaving spreads any interference over every batch size alike.
        let mut best = [(0.0f64, 0.0f64, 0u64, 0.0f64, 0u64, 0.0f64); BATCHES.len()];
        for _ in 0..3 {
            for (b, batch) in BATCHES.into_iter().enumerate() {
                let s = send_rate(fd, batch, total);
                let (r, lost, per_call) = recv_rate(fd, batch, total);
                let (d, dlost) = drain_rate(fd, batch, (total / 1000).max(1));
                let e = &mut best[b];
                *e = (
                    e.0.max(s),
                    e.1.max(r),
                    e.2 + lost,
                    e.3.max(d),
                    e.4 + dlost,
                    per_call,
                );
            }
        }
        let (s1, r1, _, d1, _, _) = best[0];
        for (batch, (s, r, lost, d, dlost, per_call)) in BATCHES.into_iter().zip(best) {
            println!(
                "| {kind} | {batch} | {s:.0} ({:.2}x) | {r:.0} ({:.2}x) ({lost}) | {per_call:.1} | {d:.0} ({:.2}x) ({dlost}) |",
                s / s1,
                r / r1,
                d / d1
            );
        }
    }
    println!();
    println!("frames per CPU-second of the measuring thread; (n.nnx) = against batch 1");
    println!(
        "frames the kernel dropped from its receive backlogs during the run: {}",
        backlog_drops() - drops_before
    );
}
