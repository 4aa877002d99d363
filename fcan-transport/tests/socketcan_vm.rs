//! SocketCAN against a real kernel: run inside the VM.
//!
//! ```text
//! cargo test -p fcan-transport --test socketcan_vm --no-run     # prints the binary's path
//! ../shared/tools/run-in-vm.sh --with candump BINARY --ignored --test-threads=1 --nocapture
//! ../shared/tools/run-in-vm.sh --mtu 16 --with candump BINARY --ignored --test-threads=1 --nocapture
//! ```
//!
//! (`.ci/vm-socketcan.sh` does both.) The host kernel has no SocketCAN, so every test is
//! `#[ignore]`d and a plain `cargo test` leaves them out, saying so; forced with
//! `--ignored` where `vcan0` and `vcan1` are missing, each fails. The tests read each
//! interface's MTU and check the behaviour that MTU calls for: FD frames pass on an FD
//! interface (MTU 72) and are refused with a clear error on a classical one (MTU 16).
//! Two need a tool in the VM and fail without it: `our_log_lines_match_real_candump`
//! (can-utils' `candump`) and `enobufs_is_back_pressure` (`tc` and `sch_tbf.ko` in the
//! working directory); the script leaves out by name (`--skip`) the ones whose tool the
//! host cannot provide.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::time::Duration;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_transport::candump::{format_line, parse_line, LogEntry};
use fcan_transport::socketcan::SocketCanTransport;
use fcan_transport::{open, AnyTransport, Transport, TransportError};

/// Fails at once, saying why, where the kernel has no `vcan0` and `vcan1` (rather than
/// at some later unwrap, or not at all in a test that expects an error).
fn needs_vcan() {
    for iface in ["vcan0", "vcan1"] {
        assert!(
            Path::new("/sys/class/net").join(iface).exists(),
            "no {iface}: these tests need SocketCAN with vcan0 and vcan1 up \
             (.ci/vm-socketcan.sh runs them in a VM)"
        );
    }
}

/// The MTU the VM gave the interface, read independently of the transport.
fn sys_mtu(iface: &str) -> Mtu {
    let s = std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu")).unwrap();
    match s.trim() {
        "72" => Mtu::Fd,
        "16" => Mtu::Classic,
        other => panic!("unexpected MTU {other} on {iface}"),
    }
}

async fn recv_within<T: Transport>(t: &mut T, ms: u64) -> Option<Result<Frame, TransportError>> {
    tokio::time::timeout(Duration::from_millis(ms), t.recv())
        .await
        .ok()
        .map(|r| r.map(|r| r.frame))
}

fn test_frames(mtu: Mtu) -> Vec<Frame> {
    let mut v = vec![
        Frame::classic(CanId::Standard(0x123), &[0xDE, 0xAD, 0xBE, 0xEF]).unwrap(),
        Frame::classic(CanId::Standard(0x7FF), &[]).unwrap(),
        Frame::classic(CanId::Extended(0x1ABC_DEF0), &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
    ];
    if mtu == Mtu::Fd {
        let data: Vec<u8> = (0..64).collect();
        v.push(Frame::fd(CanId::Standard(0x100), &data).unwrap());
        v.push(
            Frame::fd(CanId::Standard(0x101), &data[..12])
                .unwrap()
                .without_brs(),
        );
        v.push(Frame::fd(CanId::Extended(0x10), &data[..48]).unwrap());
        v.push(Frame::fd(CanId::Extended(0x11), &[]).unwrap().without_brs());
    }
    v
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn opens_with_the_interface_mtu() {
    needs_vcan();
    for iface in ["vcan0", "vcan1"] {
        let t = SocketCanTransport::open(iface).unwrap();
        assert_eq!(t.mtu(), sys_mtu(iface), "{iface}");
        assert_eq!(t.name(), iface);
    }
    println!("vcan0 MTU: {:?}", sys_mtu("vcan0"));
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn frames_pass_between_two_sockets() {
    needs_vcan();
    let mtu = sys_mtu("vcan0");
    let mut a = SocketCanTransport::open("vcan0").unwrap();
    let mut b = SocketCanTransport::open("vcan0").unwrap();
    let frames = test_frames(mtu);
    for f in &frames {
        a.send(f).await.unwrap();
    }
    for f in &frames {
        let got = recv_within(&mut b, 1000)
            .await
            .expect("frame in time")
            .unwrap();
        assert_eq!(got, *f);
        assert_eq!(got.is_brs(), f.is_brs());
    }
    // no echo of one's own frames
    assert!(recv_within(&mut a, 200).await.is_none());
    // and the other way round
    b.send(&frames[0]).await.unwrap();
    assert_eq!(recv_within(&mut a, 1000).await.unwrap().unwrap(), frames[0]);
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn fd_frames_need_an_fd_interface() {
    needs_vcan();
    let mut a = SocketCanTransport::open("vcan0").unwrap();
    let mut b = SocketCanTransport::open("vcan0").unwrap();
    let fd = Frame::fd(CanId::Standard(0x321), &[0x55; 64]).unwrap();
    match sys_mtu("vcan0") {
        Mtu::Fd => {
            a.send(&fd).await.unwrap();
            assert_eq!(recv_within(&mut b, 1000).await.unwrap().unwrap(), fd);
        }
        Mtu::Classic => {
            let err = a.send(&fd).await.unwrap_err();
            assert!(
                matches!(err, TransportError::FdNotSupported { .. }),
                "{err:?}"
            );
            let msg = err.to_string();
            assert!(
                msg.contains("vcan0") && msg.contains("cannot carry CAN FD"),
                "{msg}"
            );
            assert!(recv_within(&mut b, 200).await.is_none(), "nothing went out");
            println!("refused as expected: {msg}");
        }
    }
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn interfaces_are_separate() {
    needs_vcan();
    let mut a = SocketCanTransport::open("vcan0").unwrap();
    let mut other = SocketCanTransport::open("vcan1").unwrap();
    a.send(&Frame::classic(CanId::Standard(0x42), &[1]).unwrap())
        .await
        .unwrap();
    assert!(recv_within(&mut other, 200).await.is_none());
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn missing_interface_is_named() {
    needs_vcan();
    let err = SocketCanTransport::open("nosuch0").unwrap_err();
    assert!(
        matches!(&err, TransportError::NoSuchInterface(n) if n == "nosuch0"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "no such CAN interface: nosuch0");
    // An interface that exists but is no CAN interface.
    let err = SocketCanTransport::open("lo").unwrap_err();
    assert!(err.to_string().contains("not a CAN interface"), "{err}");
    // Through a spec string too.
    assert!(matches!(
        open("socketcan:nosuch1", None),
        Err(TransportError::NoSuchInterface(n)) if n == "nosuch1"
    ));
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn spec_string_opens_socketcan() {
    needs_vcan();
    let mut a = open("socketcan:vcan1", None).unwrap();
    assert!(matches!(a, AnyTransport::SocketCan(_)));
    assert_eq!(a.mtu(), sys_mtu("vcan1"));
    let mut b = open("socketcan:vcan1", None).unwrap();
    let f = Frame::classic(CanId::Extended(0x1F), &[7; 3]).unwrap();
    a.send(&f).await.unwrap();
    assert_eq!(recv_within(&mut b, 1000).await.unwrap().unwrap(), f);
}

async fn next(t: &mut SocketCanTransport) -> Result<fcan_transport::Received, TransportError> {
    tokio::time::timeout(Duration::from_millis(1000), t.recv())
        .await
        .expect("an event in time")
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn error_frames_come_out_as_bus_events() {
    needs_vcan();
    use socketcan::{CanErrorFrame, CanFrame, Socket};
    let mut t = SocketCanTransport::open("vcan0").unwrap();
    // Play the controller: put error frames on vcan0 from a raw socket. The kernel hands
    // them only to sockets whose error mask accepts them, as the transport's does.
    let raw = socketcan::CanSocket::open("vcan0").unwrap();
    let bus_off = CanErrorFrame::new_error(0x40, &[0; 8]).unwrap();
    let no_ack = CanErrorFrame::new_error(0x20, &[0; 8]).unwrap();
    let lost_arb = CanErrorFrame::new_error(0x02, &[0; 8]).unwrap();
    let restarted = CanErrorFrame::new_error(0x100, &[0; 8]).unwrap();
    for e in [bus_off, lost_arb, no_ack, restarted] {
        raw.write_frame(&CanFrame::Error(e)).unwrap();
    }
    assert!(matches!(next(&mut t).await, Err(TransportError::BusOff)));
    // lost arbitration is no error: skipped
    assert!(matches!(
        next(&mut t).await,
        Err(TransportError::BusError(
            fcan_transport::BusErrorKind::NoAck
        ))
    ));
    assert!(matches!(next(&mut t).await, Err(TransportError::Restarted)));
    // and the transport still works
    let f = Frame::classic(CanId::Standard(1), &[1]).unwrap();
    let Ok(socketcan::CanAnyFrame::Normal(d)) = fcan_transport::socketcan::to_socketcan(&f) else {
        panic!("a classical frame converts to a data frame")
    };
    raw.write_frame(&CanFrame::Data(d)).unwrap();
    assert_eq!(next(&mut t).await.unwrap().frame, f);
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn our_log_lines_match_real_candump() {
    needs_vcan();
    let mut child = std::process::Command::new("candump")
        .args(["-L", "vcan1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("candump: {e} (pass --with candump to run-in-vm.sh)"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mtu = sys_mtu("vcan1");
    let frames = test_frames(mtu);
    let mut t = SocketCanTransport::open("vcan1").unwrap();
    for f in &frames {
        t.send(f).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), frames.len(), "candump printed:\n{text}");
    for (line, f) in lines.iter().zip(&frames) {
        let rec = parse_line(line).unwrap().unwrap();
        assert_eq!(rec.entry, LogEntry::Frame(*f), "{line}");
        assert_eq!(rec.iface, "vcan1");
        // Our writer, given candump's timestamp, writes the very same line.
        assert_eq!(
            format_line(rec.timestamp, "vcan1", &LogEntry::Frame(*f), true),
            *line
        );
    }
    println!(
        "candump -L agrees with our writer on {} lines:\n{text}",
        lines.len()
    );
}

// ---------------------------------------------------------------- batched I/O

/// Frame `i` of a numbered sequence from sender `tag`: the sequence number in the payload,
/// so a receiver can check order and completeness. FD frames on an FD interface.
fn numbered(tag: u16, i: u32, mtu: Mtu) -> Frame {
    let mut data = [0u8; 16];
    data[..4].copy_from_slice(&i.to_le_bytes());
    let id = CanId::Standard(0x100 + tag);
    match mtu {
        Mtu::Fd => Frame::fd(id, &data).unwrap(),
        Mtu::Classic => Frame::classic(id, &data[..8]).unwrap(),
    }
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn socket_buffers_are_enlarged() {
    needs_vcan();
    let t = SocketCanTransport::open("vcan0").unwrap();
    let (rx, tx) = t.buffer_sizes().unwrap();
    println!("granted: SO_RCVBUF {rx} bytes, SO_SNDBUF {tx} bytes (kernel-reported, doubled)");
    // The VM runs as root, so the *FORCE options pass net.core.{r,w}mem_max: the kernel
    // reports twice what was asked.
    assert_eq!(rx, 2 * fcan_transport::socketcan::RX_BUFFER);
    assert_eq!(tx, 2 * fcan_transport::socketcan::TX_BUFFER);

    // What that buys: frames a reader can fall behind by before the kernel drops any. A
    // default-sized buffer (212,992 bytes asked, so 425,984) holds about 550.
    let mtu = sys_mtu("vcan0");
    let mut a = SocketCanTransport::open("vcan0").unwrap();
    let mut b = SocketCanTransport::open("vcan0").unwrap();
    let frames: Vec<Frame> = (0..4000).map(|i| numbered(6, i, mtu)).collect();
    for chunk in frames.chunks(64) {
        assert_eq!(a.send_batch(chunk).await.unwrap(), chunk.len());
        tokio::task::yield_now().await;
    }
    let mut held = 0;
    while let Some(r) = recv_within(&mut b, 300).await {
        assert_eq!(r.unwrap(), frames[held], "in order, from the first");
        held += 1;
    }
    println!("the receive buffer held {held} {mtu:?}-MTU frames unread");
    assert!(held >= 1000, "only {held} frames fit");
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn a_burst_larger_than_a_batch_arrives_in_order() {
    needs_vcan();
    use fcan_transport::socketcan::RX_BATCH;
    let mtu = sys_mtu("vcan0");
    let mut a = SocketCanTransport::open("vcan0").unwrap();
    let mut b = SocketCanTransport::open("vcan0").unwrap();
    // Ten batches' worth, queued in the kernel before b reads any: b's reads are full
    // batches (fewer system calls than frames) and keep the order.
    let n = 10 * RX_BATCH as u32 + 7;
    for i in 0..n {
        a.send(&numbered(0, i, mtu)).await.unwrap();
    }
    for i in 0..n {
        let got = recv_within(&mut b, 1000).await.expect("in time").unwrap();
        assert_eq!(got, numbered(0, i, mtu), "frame {i}");
    }
    assert!(recv_within(&mut b, 200).await.is_none(), "nothing more");
    let s = b.stats();
    println!("{n} frames received in {} recvmmsg calls", s.rx_calls);
    assert_eq!(s.rx_frames, u64::from(n));
    assert!(s.rx_calls < u64::from(n) / 4, "{s:?}");
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn a_dropped_recv_future_loses_no_frame() {
    needs_vcan();
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let mtu = sys_mtu("vcan0");
    let mut a = SocketCanTransport::open("vcan0").unwrap();
    let mut b = SocketCanTransport::open("vcan0").unwrap();
    let n = 300u32;
    let frames: Vec<Frame> = (0..n).map(|i| numbered(1, i, mtu)).collect();
    assert_eq!(a.send_batch(&frames).await.unwrap(), frames.len());
    let mut got = Vec::new();
    let mut cx = Context::from_waker(Waker::noop());
    let mut k = 0u32;
    while got.len() < frames.len() {
        k += 1;
        if k % 3 == 0 {
            // Poll once and drop the future, whatever it did.
            let mut fut = std::pin::pin!(b.recv());
            if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                got.push(r.unwrap().frame);
            }
        } else {
            got.push(recv_within(&mut b, 1000).await.expect("in time").unwrap());
        }
    }
    assert_eq!(got, frames);
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn a_batch_send_is_seen_in_order() {
    needs_vcan();
    use fcan_transport::socketcan::batch::MAX_BATCH;
    let mtu = sys_mtu("vcan0");
    let mut a = SocketCanTransport::open("vcan0").unwrap();
    let mut b = SocketCanTransport::open("vcan0").unwrap();
    // Mixed kinds (all of test_frames) and a numbered run longer than one sendmmsg.
    let mut frames = test_frames(mtu);
    frames.extend((0..3 * MAX_BATCH as u32 + 5).map(|i| numbered(2, i, mtu)));
    assert_eq!(a.send_batch(&frames).await.unwrap(), frames.len());
    let s = a.stats();
    println!(
        "{} frames sent in {} sendmmsg calls",
        frames.len(),
        s.tx_calls
    );
    assert_eq!(s.tx_frames, frames.len() as u64);
    assert_eq!(s.tx_calls, frames.len().div_ceil(MAX_BATCH) as u64);
    for (i, f) in frames.iter().enumerate() {
        let got = recv_within(&mut b, 1000).await.expect("in time").unwrap();
        assert_eq!(got, *f, "frame {i}");
        assert_eq!(got.is_brs(), f.is_brs());
    }
    assert!(recv_within(&mut b, 200).await.is_none(), "nothing more");
}

#[tokio::test]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn a_batch_stops_at_a_frame_the_link_refuses() {
    needs_vcan();
    let mut a = SocketCanTransport::open("vcan0").unwrap();
    let mut b = SocketCanTransport::open("vcan0").unwrap();
    let ok = |i| numbered(3, i, Mtu::Classic);
    // A bad identifier (too wide) on any link; an FD frame on a classic one too.
    let bad = Frame::classic(CanId::Standard(0x800), &[]).unwrap();
    let frames = [ok(0), ok(1), bad, ok(2)];
    assert_eq!(a.send_batch(&frames).await.unwrap(), 2, "a partial send");
    assert!(matches!(
        a.send_batch(&frames[2..]).await,
        Err(TransportError::InvalidFrame(_))
    ));
    assert_eq!(a.send_batch(&frames[3..]).await.unwrap(), 1);
    for i in 0..3 {
        assert_eq!(recv_within(&mut b, 1000).await.unwrap().unwrap(), ok(i));
    }
    if sys_mtu("vcan0") == Mtu::Classic {
        let fd = Frame::fd(CanId::Standard(0x5), &[1; 12]).unwrap();
        assert_eq!(a.send_batch(&[ok(7), fd]).await.unwrap(), 1);
        assert!(matches!(
            a.send_batch(&[fd]).await,
            Err(TransportError::FdNotSupported { .. })
        ));
        assert_eq!(recv_within(&mut b, 1000).await.unwrap().unwrap(), ok(7));
    }
    assert!(recv_within(&mut b, 200).await.is_none(), "nothing more");
}

/// Puts a token-bucket qdisc on `iface`: 300 frames/s of `frame_len` bytes, like a slow
/// real bus, and a queue of about ten frames; a sender faster than that meets `ENOBUFS`.
/// Needs `tc` and `sch_tbf.ko` (in the working directory) in the VM: `.ci/vm-socketcan.sh`
/// passes both, or leaves the test out when it cannot.
fn throttle(iface: &str, frame_len: usize) {
    let have_tc = std::process::Command::new("tc")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have_tc && Path::new("sch_tbf.ko").exists(),
        "no tc or no sch_tbf.ko here (run-in-vm.sh --with tc --file …/sch_tbf.ko)"
    );
    // Already loaded by an earlier test is fine.
    let _ = std::process::Command::new("insmod")
        .arg("sch_tbf.ko")
        .status();
    let limit = (10 * frame_len).to_string();
    let rate = format!("{}bit", 300 * 8 * frame_len);
    // A burst of two frames: a larger bucket would let a whole batch through at once.
    let burst = (2 * frame_len).to_string();
    let st = std::process::Command::new("tc")
        .args(["qdisc", "replace", "dev", iface, "root", "tbf"])
        .args(["rate", &rate, "burst", &burst, "limit", &limit])
        .status()
        .unwrap();
    assert!(st.success(), "tc qdisc replace … tbf");
}

fn unthrottle(iface: &str) {
    let st = std::process::Command::new("tc")
        .args(["qdisc", "del", "dev", iface, "root"])
        .status()
        .unwrap();
    assert!(st.success(), "tc qdisc del");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs SocketCAN: .ci/vm-socketcan.sh runs it in a VM"]
async fn enobufs_is_back_pressure() {
    needs_vcan();
    let mtu = sys_mtu("vcan1");
    let frame_len = if mtu == Mtu::Fd { 72 } else { 16 };
    throttle("vcan1", frame_len);
    let n = 100u32;
    let frames: Vec<Frame> = (0..n).map(|i| numbered(4, i, mtu)).collect();
    let singles: Vec<Frame> = (0..n).map(|i| numbered(5, i, mtu)).collect();
    let mut b = SocketCanTransport::open("vcan1").unwrap();
    let expect = frames.len() + singles.len();
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        while got.len() < expect {
            match recv_within(&mut b, 5000).await {
                Some(r) => got.push(r.unwrap()),
                None => break,
            }
        }
        got
    });
    let mut a = SocketCanTransport::open("vcan1").unwrap();

    // A batch far larger than the queue: send_batch waits the full queue out.
    assert_eq!(a.send_batch(&frames).await.unwrap(), frames.len());
    let batch_stats = a.stats();

    // One by one: `send` reports the full queue at once, and the caller retries.
    let mut queue_full = 0u32;
    for f in &singles {
        loop {
            match a.send(f).await {
                Ok(()) => break,
                Err(TransportError::TxQueueFull) => {
                    queue_full += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    let got = reader.await.unwrap();
    unthrottle("vcan1");

    println!(
        "ENOBUFS back-pressure exercised: send_batch of {n} met ENOBUFS {} times \
         ({} sendmmsg calls); send met TxQueueFull {queue_full} times; {} frames received",
        batch_stats.enobufs,
        batch_stats.tx_calls,
        got.len()
    );
    assert!(
        batch_stats.enobufs > 0,
        "the queue never filled: {batch_stats:?}"
    );
    assert!(queue_full > 0, "send never met a full queue");
    // Each ENOBUFS wait sleeps (at least 1 ms): one or two per frame at this pace, where a
    // busy loop would retry thousands of times.
    assert!(batch_stats.enobufs <= 10 * u64::from(n), "{batch_stats:?}");
    // Nothing lost, nothing reordered.
    let mut want = frames.clone();
    want.extend(&singles);
    assert_eq!(got, want);
}
