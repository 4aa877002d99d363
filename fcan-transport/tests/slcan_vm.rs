//! The `slcan:` transport against a real peer: can-utils' `slcanpty` bridging a pty to
//! the kernel's `vcan0`, with `cansend` and `candump` on the CAN side. Run inside the VM:
//!
//! ```text
//! cargo test -p fcan-transport --test slcan_vm --no-run     # prints the binary's path
//! ../shared/tools/run-in-vm.sh --with slcanpty --with candump --with cansend BINARY \
//!     --ignored --exact slcanpty_bridges_vcan0_both_ways --test-threads=1 --nocapture
//! ```
//!
//! (`.ci/slcan-vm.sh` does that.) `slcanpty /dev/ptmx vcan0` makes a pty and answers the
//! slcan protocol on it; fcan opens `slcan:/dev/pts/N` (the pty's other side, found from
//! slcanpty's descriptors) and must see every frame `cansend vcan0 …` puts on the bus,
//! and every frame it sends must appear in `candump vcan0` — standard and extended
//! identifiers, 0 to 8 bytes. slcanpty is Classical CAN only (it reads `t`/`T`/`r`/`R`
//! and refuses other letters with BEL), so this is the Classical half of the protocol;
//! the FD letters are proven against a scripted adapter (`tests/slcan_pty.rs`). Its BEL
//! to `Y5` is checked too: an FD open with a data bitrate fails, naming the command.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_transport::slcan::SlcanTransport;
use fcan_transport::{open, AnyTransport, Transport};

/// Kills the child when the test ends, however it ends.
struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `/dev/pts/N` of the pty `slcanpty` (pid `pid`) opened through `/dev/ptmx`: its
/// descriptor's `tty-index` in `/proc/PID/fdinfo`.
fn slave_of(pid: u32) -> Option<String> {
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()? {
        let entry = entry.ok()?;
        let target = std::fs::read_link(entry.path()).ok()?;
        if target != Path::new("/dev/ptmx") && target != Path::new("/dev/pts/ptmx") {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            entry.file_name().to_string_lossy()
        ))
        .ok()?;
        let index = info
            .lines()
            .find_map(|l| l.strip_prefix("tty-index:"))?
            .trim()
            .to_string();
        return Some(format!("/dev/pts/{index}"));
    }
    None
}

fn cansend(frame: &str) {
    let st = Command::new("cansend")
        .args(["vcan0", frame])
        .status()
        .expect("cansend (can-utils) on PATH");
    assert!(st.success(), "cansend vcan0 {frame}");
}

/// The frame part of a `candump -L` line: `(1.000) vcan0 123#DEAD` → `123#DEAD`.
fn dumped(line: &str) -> Option<String> {
    line.split_once(" vcan0 ")
        .map(|(_, f)| f.trim().to_string())
}

fn next_dumped(rx: &mpsc::Receiver<String>) -> String {
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("candump printed nothing in 10 s");
    dumped(&line).unwrap_or_else(|| panic!("not a candump -L line: {line}"))
}

async fn recv_within(t: &mut SlcanTransport, ms: u64) -> Option<Frame> {
    match tokio::time::timeout(Duration::from_millis(ms), t.recv()).await {
        Ok(Ok(r)) => Some(r.frame),
        Ok(Err(e)) => panic!("recv: {e}"),
        Err(_) => None,
    }
}

#[tokio::test]
#[ignore = "needs SocketCAN and can-utils: .ci/slcan-vm.sh runs it in a VM"]
async fn slcanpty_bridges_vcan0_both_ways() {
    assert!(
        Path::new("/sys/class/net/vcan0").exists(),
        "no vcan0: this test needs SocketCAN (.ci/slcan-vm.sh runs it in a VM)"
    );
    let bridge = Kill(
        Command::new("slcanpty")
            .args(["/dev/ptmx", "vcan0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("slcanpty (can-utils) on PATH"),
    );
    let started = Instant::now();
    let pts = loop {
        if let Some(p) = slave_of(bridge.0.id()) {
            break p;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "slcanpty opened no pty"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    println!("slcanpty's pty: {pts}");
    // Held open to the end: slcanpty quits when the last descriptor of the pty's other
    // side closes, and the test opens it twice. O_NOCTTY: never our controlling tty.
    use std::os::unix::fs::OpenOptionsExt;
    const O_NOCTTY: i32 = 0o400;
    let _keep = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(O_NOCTTY)
        .open(&pts)
        .expect("opening slcanpty's pty");

    let mut dump = Kill(
        Command::new("candump")
            .args(["-L", "vcan0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("candump (can-utils) on PATH"),
    );
    let (tx, rx) = mpsc::channel();
    let out = dump.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let mut t = match open(&format!("slcan:{pts}"), None).unwrap() {
        AnyTransport::Slcan(t) => t,
        other => panic!("not slcan: {other:?}"),
    };
    assert_eq!(t.mtu(), Mtu::Classic);
    // slcanpty answers `C`, `S8` and `O` with `\r`.
    assert_eq!((t.stats().acks, t.stats().nacks), (3, 0), "{:?}", t.stats());

    // In step: a probe on vcan0 until both candump and fcan have seen it (candump may
    // start after the first one).
    let probe = Frame::classic(CanId::Standard(0x000), &[0x5A]).unwrap();
    let mut synced = false;
    for _ in 0..50 {
        cansend("000#5A");
        let seen = recv_within(&mut t, 200).await;
        let dumped_probe = rx
            .recv_timeout(Duration::from_millis(200))
            .ok()
            .and_then(|l| dumped(&l));
        if seen == Some(probe) && dumped_probe.as_deref() == Some("000#5A") {
            synced = true;
            break;
        }
    }
    assert!(synced, "no probe made it through slcanpty and candump");
    // Drain what the probes left.
    while recv_within(&mut t, 200).await.is_some() {}
    while rx.recv_timeout(Duration::from_millis(200)).is_ok() {}

    // vcan0 → slcanpty → fcan.
    let from_bus = [
        (
            "123#DEADBEEF",
            Frame::classic(CanId::Standard(0x123), &[0xDE, 0xAD, 0xBE, 0xEF]),
        ),
        ("7FF#", Frame::classic(CanId::Standard(0x7FF), &[])),
        (
            "1ABCDEF0#0102030405060708",
            Frame::classic(CanId::Extended(0x1ABC_DEF0), &[1, 2, 3, 4, 5, 6, 7, 8]),
        ),
        ("00000001#FF", Frame::classic(CanId::Extended(1), &[0xFF])),
        (
            "1FFFFFFF#00",
            Frame::classic(CanId::Extended(0x1FFF_FFFF), &[0]),
        ),
    ];
    for (text, want) in &from_bus {
        cansend(text);
        let want = *want.as_ref().unwrap();
        assert_eq!(
            recv_within(&mut t, 5000).await,
            Some(want),
            "cansend vcan0 {text}"
        );
        assert_eq!(next_dumped(&rx), *text);
    }

    // fcan → slcanpty → vcan0.
    let to_bus = [
        (
            Frame::classic(CanId::Standard(0x321), &[1, 2, 3]).unwrap(),
            "321#010203",
        ),
        (Frame::classic(CanId::Standard(0x7FF), &[]).unwrap(), "7FF#"),
        (
            Frame::classic(CanId::Extended(0x1BAD_CAFE), &[8, 7, 6, 5, 4, 3, 2, 1]).unwrap(),
            "1BADCAFE#0807060504030201",
        ),
        (
            Frame::classic(CanId::Extended(5), &[0xAA]).unwrap(),
            "00000005#AA",
        ),
    ];
    t.send(&to_bus[0].0).await.unwrap();
    let batch: Vec<Frame> = to_bus[1..].iter().map(|(f, _)| *f).collect();
    assert_eq!(t.send_batch(&batch).await.unwrap(), batch.len());
    for (_, want) in &to_bus {
        assert_eq!(next_dumped(&rx), *want);
    }
    // Nothing of ours comes back, and slcanpty acknowledged each frame with `\r`.
    assert_eq!(recv_within(&mut t, 300).await, None);
    let st = t.stats();
    assert_eq!((st.sent, st.nacks, st.malformed), (4, 0, 0), "{st:?}");
    assert_eq!(st.acks, 3 + 4, "{st:?}");
    drop(t);

    // slcanpty knows no `Y`: an FD open with a data bitrate fails, naming it.
    let err = open(&format!("slcan:{pts},dbitrate=5000000"), None).unwrap_err();
    assert!(err.to_string().contains("refused `Y5`"), "{err}");
    println!("slcanpty refuses Y5 as it should: {err}");
}
