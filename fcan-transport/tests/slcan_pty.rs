//! The `slcan:` transport against a scripted adapter on the other side of a pty pair:
//! the open sequence, replies, frames of every kind both ways, byte for byte.
//!
//! The adapter is a thread holding the pty's master side: it reads the lines fcan
//! writes (checking each against the one the protocol calls for, written out here by
//! hand) and writes lines as an adapter would (CANable 2.0 FD letters, slcanpty's
//! timestamps and replies, Lawicel's `z`, an `F` status). fcan opens the slave side by
//! its path, `slcan:/dev/pts/N`, exactly as it opens `/dev/ttyACM0`.
#![cfg(target_os = "linux")]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_transport::slcan::SlcanTransport;
use fcan_transport::{open, AnyTransport, BusErrorKind, Transport, TransportError};
use nix::pty::openpty;
use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};

/// A pty pair: the adapter's side (master) and the path fcan opens (slave). The slave's
/// descriptor is kept open so the pty stays up between fcan's opens.
struct Pty {
    master: File,
    path: String,
    _slave: std::os::fd::OwnedFd,
}

fn pty() -> Pty {
    let p = openpty(None, None).expect("openpty");
    let mut t = tcgetattr(&p.slave).unwrap();
    cfmakeraw(&mut t);
    tcsetattr(&p.slave, SetArg::TCSANOW, &t).unwrap();
    let path = std::fs::read_link(format!("/proc/self/fd/{}", p.slave.as_raw_fd()))
        .unwrap()
        .to_string_lossy()
        .into_owned();
    Pty {
        master: File::from(p.master),
        path,
        _slave: p.slave,
    }
}

/// One line fcan wrote (without its `\r`).
fn read_line(master: &mut File) -> String {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        master.read_exact(&mut b).expect("reading what fcan sent");
        if b[0] == b'\r' {
            return String::from_utf8(line).unwrap();
        }
        line.push(b[0]);
    }
}

/// The adapter's half of the open: checks each command in order and answers `reply`.
fn expect_open(master: &mut File, commands: &[&str], reply: impl Fn(&str) -> &'static [u8]) {
    for want in commands {
        let got = read_line(master);
        assert_eq!(&got, want, "the open sequence");
        master.write_all(reply(want)).unwrap();
    }
}

fn unwrap_slcan(t: AnyTransport) -> SlcanTransport {
    match t {
        AnyTransport::Slcan(t) => t,
        other => panic!("not slcan: {other:?}"),
    }
}

async fn next(t: &mut SlcanTransport) -> Result<Frame, TransportError> {
    tokio::time::timeout(Duration::from_secs(5), t.recv())
        .await
        .expect("nothing arrived in 5 s")
        .map(|r| r.frame)
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02X}")).collect()
}

fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    std::thread::spawn(f)
}

/// CAN FD link: `C`, `S8`, `O` answered `\r`; every frame kind in, every kind out.
#[tokio::test]
async fn scripted_adapter_every_kind_both_ways_byte_exact() {
    let Pty {
        mut master,
        path,
        _slave,
    } = pty();
    let data: Vec<u8> = (0..64).collect();
    let d = data.clone();
    // What the adapter writes once open, as the CANable 2.0 firmware and slcanpty write
    // them (upper-case hex; a `Z1` timestamp on one line, lower case on another).
    let script: String = [
        "t1230\r".to_string(),
        "t7ff8deadbeef000102ff\r".into(),
        "T1ABCDEF0301020\r".into(), // 3 bytes promised, 2½ given: malformed
        "T1ABCDEF03010203\r".into(),
        "r1230\r".into(),      // remote: dropped
        "R000001234\r".into(), // remote: dropped
        format!("d1009{}\r", hex(&d[..12])),
        format!("b100F{}\r", hex(&d)),
        format!("D00000011A{}\r", hex(&d[..16])),
        format!("B1FFFFFFFE{}\r", hex(&d[..48])),
        "t12320102EA5F\r".into(), // slcanpty's millisecond timestamp after Z1
        "\x07".into(),            // a refusal
        "z\r".into(),             // Lawicel's transmit acknowledgement
        "t12X\r".into(),          // malformed
        "F88\r".into(),           // data overrun + bus error
        "t0000\r".into(),
    ]
    .concat();
    let adapter = spawn(move || {
        expect_open(&mut master, &["C", "S8", "O"], |_| b"\r");
        master.write_all(script.as_bytes()).unwrap();
        // What fcan sends, each answered `\r` as slcanpty does.
        let mut got = Vec::new();
        for _ in 0..8 {
            let l = read_line(&mut master);
            master.write_all(b"\r").unwrap();
            got.push(l);
        }
        // The status request.
        assert_eq!(read_line(&mut master), "F");
        master.write_all(b"F20\r").unwrap();
        (master, got)
    });

    let started = Instant::now();
    let mut t = unwrap_slcan(open(&format!("slcan:{path},fd"), None).unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "an adapter that answers opens at once: {:?}",
        started.elapsed()
    );
    assert_eq!(t.mtu(), Mtu::Fd);
    assert_eq!(t.name(), path);

    let s = |id| CanId::Standard(id);
    let e = |id| CanId::Extended(id);
    let want_in = [
        Frame::classic(s(0x123), &[]).unwrap(),
        Frame::classic(s(0x7FF), &[0xDE, 0xAD, 0xBE, 0xEF, 0, 1, 2, 0xFF]).unwrap(),
        Frame::classic(e(0x1ABC_DEF0), &[1, 2, 3]).unwrap(),
        Frame::fd(s(0x100), &data[..12]).unwrap().without_brs(),
        Frame::fd(s(0x100), &data).unwrap(),
        Frame::fd(e(0x11), &data[..16]).unwrap().without_brs(),
        Frame::fd(e(0x1FFF_FFFF), &data[..48]).unwrap(),
        Frame::classic(s(0x123), &[1, 2]).unwrap(),
    ];
    for want in want_in {
        let got = next(&mut t).await.unwrap();
        assert_eq!(got, want);
        assert_eq!(got.is_brs(), want.is_brs(), "{want:?}");
    }
    // F88: the overrun, then the bus error, then the frame after them.
    assert!(matches!(
        next(&mut t).await,
        Err(TransportError::BusError(BusErrorKind::RxOverflow))
    ));
    assert!(matches!(
        next(&mut t).await,
        Err(TransportError::BusError(BusErrorKind::Other))
    ));
    assert_eq!(
        next(&mut t).await.unwrap(),
        Frame::classic(s(0), &[]).unwrap()
    );
    let st = t.stats();
    assert_eq!(
        (st.received, st.remote, st.malformed, st.nacks, st.tx_acks),
        (9, 2, 2, 1, 1),
        "{st:?}"
    );
    assert_eq!(st.acks, 3, "the open's three replies");
    assert_eq!(st.last_status, Some(0x88));

    // Out: every kind, one alone and the rest as a batch (one write).
    let out = [
        Frame::classic(s(0x123), &[0xDE, 0xAD, 0xBE, 0xEF]).unwrap(),
        Frame::classic(s(0x7FF), &[]).unwrap(),
        Frame::classic(e(0x1ABC_DEF0), &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
        Frame::classic(e(0), &[0xFF]).unwrap(),
        Frame::fd(s(0x100), &data).unwrap(),
        Frame::fd(s(0x101), &data[..12]).unwrap().without_brs(),
        Frame::fd(e(0x10), &data[..20]).unwrap(),
        Frame::fd(e(0x11), &[]).unwrap().without_brs(),
    ];
    t.send(&out[0]).await.unwrap();
    assert_eq!(t.send_batch(&out[1..]).await.unwrap(), 7);
    t.request_status().await.unwrap();
    let (_master, got) = adapter.join().unwrap();
    let want_out = [
        "t1234DEADBEEF".to_string(),
        "t7FF0".into(),
        "T1ABCDEF080102030405060708".into(),
        "T000000001FF".into(),
        format!("b100F{}", hex(&data)),
        format!("d1019{}", hex(&data[..12])),
        format!("B00000010B{}", hex(&data[..20])),
        "D000000110".into(),
    ];
    assert_eq!(got, want_out);
    // The replies to them, and the status: error passive.
    assert!(matches!(
        next(&mut t).await,
        Err(TransportError::ErrorPassive)
    ));
    let st = t.stats();
    assert_eq!((st.sent, st.acks, st.last_status), (8, 11, Some(0x20)));
}

/// Classical link (no `fd`): FD frames from the adapter are ignored, FD frames refused;
/// `bitrate=500k` is `S6`.
#[tokio::test]
async fn classical_link_ignores_and_refuses_fd() {
    let Pty {
        mut master,
        path,
        _slave,
    } = pty();
    let adapter = spawn(move || {
        expect_open(&mut master, &["C", "S6", "O"], |_| b"\r");
        master.write_all(b"b1231AA\rd1230\rt1231BB\r").unwrap();
        let l = read_line(&mut master);
        (master, l)
    });
    let mut t = unwrap_slcan(open(&format!("slcan:{path},bitrate=500k"), None).unwrap());
    assert_eq!(t.mtu(), Mtu::Classic);
    assert_eq!(
        next(&mut t).await.unwrap(),
        Frame::classic(CanId::Standard(0x123), &[0xBB]).unwrap()
    );
    assert_eq!(t.stats().fd_ignored, 2);
    let fd = Frame::fd(CanId::Standard(1), &[0; 12]).unwrap();
    assert!(matches!(
        t.send(&fd).await,
        Err(TransportError::FdNotSupported { .. })
    ));
    // A batch stops at the FD frame.
    let c = Frame::classic(CanId::Standard(2), &[9]).unwrap();
    assert_eq!(t.send_batch(&[c, fd, c]).await.unwrap(), 1);
    let (_m, line) = adapter.join().unwrap();
    assert_eq!(line, "t002109");
}

/// `dbitrate=5000000` sends `Y5` between `S` and `O`; an adapter that refuses it (BEL,
/// as slcanpty and every Classical-only firmware do) fails the open, naming `Y5`.
#[tokio::test]
async fn data_bitrate_refused_fails_the_open() {
    let Pty {
        mut master,
        path,
        _slave,
    } = pty();
    let adapter = spawn(move || {
        expect_open(&mut master, &["C", "S8", "Y5"], |c| {
            if c == "Y5" {
                b"\x07"
            } else {
                b"\r"
            }
        });
        master
    });
    let err = open(&format!("slcan:{path},dbitrate=5M"), None).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("refused `Y5`"), "{msg}");
    assert!(msg.contains(&path), "{msg}");
    drop(adapter.join().unwrap());

    // Accepted, the open goes on to `O`: FD with BRS at 5 Mbit/s.
    let Pty {
        mut master,
        path,
        _slave,
    } = pty();
    let adapter = spawn(move || {
        expect_open(&mut master, &["C", "S6", "Y5", "O"], |_| b"\r");
        master
    });
    let t = unwrap_slcan(
        open(
            &format!("slcan:{path},bitrate=500000,dbitrate=5000000"),
            None,
        )
        .unwrap(),
    );
    assert_eq!(t.mtu(), Mtu::Fd);
    drop(adapter.join().unwrap());
}

/// The CANable 2.0 firmware answers no command: the open waits out each reply and goes
/// on; a `C` refused (an adapter that was not open) is no failure; what the adapter had
/// queued before `C` is dropped.
#[tokio::test]
async fn silent_adapter_opens_after_the_reply_waits() {
    let Pty {
        mut master,
        path,
        _slave,
    } = pty();
    // Left over from a previous session, before our `C`.
    master.write_all(b"t1110\r").unwrap();
    let adapter = spawn(move || {
        expect_open(&mut master, &["C"], |_| b"t2220\r\x07");
        expect_open(&mut master, &["S8", "O"], |_| b"");
        master.write_all(b"t3330\r").unwrap();
        master
    });
    let started = Instant::now();
    let mut t = unwrap_slcan(open(&format!("slcan:{path}"), None).unwrap());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(190) && took < Duration::from_secs(2),
        "two unanswered commands wait about 200 ms: {took:?}"
    );
    assert_eq!(
        next(&mut t).await.unwrap(),
        Frame::classic(CanId::Standard(0x333), &[]).unwrap()
    );
    assert_eq!(t.stats().nacks, 0, "the refused `C` is not counted");
    let _m = adapter.join().unwrap();
}

/// Closing the adapter's side ends the link: `recv` says `Closed`.
#[tokio::test]
async fn adapter_gone_is_closed() {
    let Pty {
        mut master,
        path,
        _slave,
    } = pty();
    let adapter = spawn(move || {
        expect_open(&mut master, &["C", "S8", "O"], |_| b"\r");
        master
    });
    let mut t = unwrap_slcan(open(&format!("slcan:{path}"), None).unwrap());
    drop(adapter.join().unwrap());
    drop(_slave);
    assert!(matches!(next(&mut t).await, Err(TransportError::Closed)));
}

#[test]
fn spec_errors() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _g = rt.enter();
    let err = |s: &str| open(s, None).unwrap_err().to_string();
    assert!(err("slcan").contains("serial device"));
    assert!(err("slcan:").contains("serial device"));
    assert!(err("slcan:/dev/x,bitrate=300000").contains("`bitrate=300000`"));
    assert!(err("slcan:/dev/x,dbitrate=8000000").contains("2000000 or 5000000"));
    assert!(err("slcan:/dev/x,classic,dbitrate=2M").contains("`classic` with `dbitrate"));
    assert!(err("slcan:/dev/x,fd,fd").contains("given twice"));
    assert!(err("slcan:/dev/x,speed=1").contains("unknown option"));
    assert!(err("slcan:/dev/x,data_bitrate=5M").contains("did you mean `dbitrate`"));
    assert!(err("lawicel:/dev/x").contains("did you mean `slcan:PATH`"));
    // No such device: a clear error, no panic.
    let e = open("slcan:/nonexistent/ttyACM9", None).unwrap_err();
    assert!(
        matches!(
            e,
            TransportError::NoSuchInterface(_) | TransportError::Io(_)
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("/nonexistent/ttyACM9"), "{e}");
    // The accepted list names slcan.
    assert!(err("bogus").contains("`slcan:PATH[,OPTION,…]`"));
}
