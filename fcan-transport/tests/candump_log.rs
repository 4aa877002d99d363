//! candump logs: writer → reader roundtrip (property test), malformed lines with line
//! numbers, replay, recording.

use std::time::Duration;

use fcan_core::frame::{CanId, Frame, Mtu, FD_LENGTHS};
use fcan_transport::candump::{
    format_line, parse_line, parse_log, CandumpReader, CandumpWriter, LogEntry, LogRecord,
};
use fcan_transport::recorder::Recorder;
use fcan_transport::replay::{Pacing, ReplayOptions, ReplayTransport};
use fcan_transport::sim::{SimBus, SimConfig};
use fcan_transport::{BusErrorKind, Transport, TransportError};
use proptest::prelude::*;

fn arb_id() -> impl Strategy<Value = CanId> {
    prop_oneof![
        (0u16..=0x7FF).prop_map(CanId::Standard),
        (0u32..=0x1FFF_FFFF).prop_map(CanId::Extended),
    ]
}

fn arb_frame() -> impl Strategy<Value = Frame> {
    let classic = (arb_id(), prop::collection::vec(any::<u8>(), 0..=8))
        .prop_map(|(id, d)| Frame::classic(id, &d).unwrap());
    let fd = (
        arb_id(),
        prop::sample::select(FD_LENGTHS.to_vec()),
        prop::collection::vec(any::<u8>(), 64),
        any::<bool>(),
    )
        .prop_map(|(id, len, d, brs)| {
            let f = Frame::fd(id, &d[..len as usize]).unwrap();
            if brs {
                f
            } else {
                f.without_brs()
            }
        });
    prop_oneof![classic, fd]
}

fn arb_entry() -> impl Strategy<Value = LogEntry> {
    prop_oneof![
        8 => arb_frame().prop_map(LogEntry::Frame),
        1 => (arb_id(), 0u8..=8).prop_map(|(id, len)| LogEntry::Remote { id, len }),
        1 => (0u32..=0x1FFF_FFFF, any::<[u8; 8]>())
            .prop_map(|(class, data)| LogEntry::ErrorFrame { class, data }),
    ]
}

fn arb_record() -> impl Strategy<Value = LogRecord> {
    (
        0u64..=9_999_999_999,
        0u32..1_000_000,
        "[a-z][a-z0-9_-]{0,14}",
        arb_entry(),
    )
        .prop_map(|(s, us, iface, entry)| LogRecord {
            timestamp: Duration::new(s, us * 1000),
            iface,
            entry,
        })
}

proptest! {
    #[test]
    fn writer_then_reader_is_identity(
        records in prop::collection::vec(arb_record(), 0..40),
        fdf in any::<bool>(),
    ) {
        let mut w = CandumpWriter::new(Vec::new()).fdf_flag(fdf);
        for r in &records {
            w.write_record(r).unwrap();
        }
        let text = String::from_utf8(w.into_inner()).unwrap();
        prop_assert_eq!(text.lines().count(), records.len());
        let back: Vec<LogRecord> = CandumpReader::new(text.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        prop_assert_eq!(back, records);
    }

    #[test]
    fn reader_never_panics(line in "\\PC{0,80}") {
        let _ = parse_line(&line);
    }

    #[test]
    fn reader_never_panics_on_near_misses(
        ts in "\\(?[0-9]{0,12}\\.?[0-9]{0,10}\\)?",
        id in "[0-9A-Fa-fxR_#.]{0,12}",
        data in "[0-9A-Fa-f#._R]{0,140}",
    ) {
        let _ = parse_line(&format!("{ts} can0 {id}#{data}"));
    }
}

#[test]
fn line_format_matches_candump() {
    let t = Duration::new(1_700_000_000, 123_456_000);
    let std = Frame::classic(CanId::Standard(0x123), &[0xDE, 0xAD, 0xBE, 0xEF]).unwrap();
    let ext = Frame::classic(CanId::Extended(0x123), &[]).unwrap();
    let fd = Frame::fd(CanId::Standard(0x123), &[0xDE, 0xAD, 0xBE, 0xEF]).unwrap();
    let line = |f: &Frame, fdf| format_line(t, "vcan0", &LogEntry::Frame(*f), fdf);
    assert_eq!(line(&std, true), "(1700000000.123456) vcan0 123#DEADBEEF");
    assert_eq!(line(&ext, true), "(1700000000.123456) vcan0 00000123#");
    assert_eq!(line(&fd, false), "(1700000000.123456) vcan0 123##1DEADBEEF");
    assert_eq!(line(&fd, true), "(1700000000.123456) vcan0 123##5DEADBEEF");
    assert_eq!(
        line(&fd.without_brs(), true),
        "(1700000000.123456) vcan0 123##4DEADBEEF"
    );
    // seconds are zero-padded to 10 digits, microseconds to 6
    assert_eq!(
        format_line(Duration::new(5, 7_000), "c", &LogEntry::Frame(std), true),
        "(0000000005.000007) c 123#DEADBEEF"
    );
}

#[test]
fn malformed_lines_name_their_line() {
    let log = "\
(1700000000.000001) vcan0 123#00
(1700000000.000002) vcan0 123#0
";
    let err = parse_log(log).unwrap_err();
    assert_eq!(err.line, 2);
    assert!(err.message.contains("odd number of hex digits"), "{err}");

    let cases = [
        (
            "(1.0) can0 123#00\n\n\n(x) can0 123#00\n",
            4,
            "should look like",
        ),
        (
            "(1.0) can0 123#00\n(1.0) can0 1234#00\n",
            2,
            "3 (standard) or 8 (extended)",
        ),
        (
            "(1.0) can0 123##1001122334455667788\n",
            1,
            "not a valid FD length",
        ),
        ("(1.0) can0\n", 1, "missing frame"),
        ("garbage\n", 1, "should look like"),
        (
            "(1.0) can0 123#00\n(1.0) can0 123#00\n(1.0) can0 800#00\n",
            3,
            "above 7FF",
        ),
    ];
    for (log, line, needle) in cases {
        let err = parse_log(log).unwrap_err();
        assert_eq!(err.line, line, "{log:?}: {err}");
        assert!(err.to_string().starts_with(&format!("line {line}: ")));
        assert!(err.message.contains(needle), "{log:?}: {err}");
    }
    // The iterator reports each bad line and goes on.
    let mixed = "(1.0) a 123#00\nbad\n(2.0) a 124#00\n(3.0) a 12#\n";
    let results: Vec<_> = CandumpReader::new(mixed.as_bytes()).collect();
    assert_eq!(results.len(), 4);
    assert!(results[0].is_ok() && results[2].is_ok());
    assert_eq!(results[1].as_ref().unwrap_err().line, 2);
    assert_eq!(results[3].as_ref().unwrap_err().line, 4);
}

const LOG: &str = "\
(1700000000.000000) can0 100#01
(1700000000.010000) can1 200#02
(1700000000.010000) can0 20000040#0000000000000000
(1700000000.020000) can0 101#R
(1700000000.250000) can0 102##5AABBCCDD
";

#[tokio::test(start_paused = true)]
async fn replay_paced_by_timestamps() {
    let mut r = ReplayTransport::from_reader(
        "test.log",
        LOG.as_bytes(),
        ReplayOptions {
            pacing: Pacing::Timestamps { speed: 1.0 },
            iface: Some("can0".into()),
            mtu: None,
        },
    )
    .unwrap();
    assert_eq!(r.mtu(), Mtu::Fd, "the log holds an FD frame");
    let t0 = tokio::time::Instant::now();
    let a = r.recv().await.unwrap();
    assert_eq!(a.frame.id(), CanId::Standard(0x100));
    assert_eq!(t0.elapsed(), Duration::ZERO);
    // the error frame at +10 ms is a bus-off event; the remote frame is skipped
    assert!(matches!(r.recv().await, Err(TransportError::BusOff)));
    assert_eq!(t0.elapsed(), Duration::from_millis(10));
    let b = r.recv().await.unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(250));
    assert_eq!(b.at - a.at, Duration::from_millis(250));
    assert!(b.frame.is_fd() && b.frame.is_brs());
    assert!(matches!(r.recv().await, Err(TransportError::Closed)));

    // Sending goes nowhere but is kept.
    let f = Frame::classic(CanId::Standard(1), &[1]).unwrap();
    r.send(&f).await.unwrap();
    assert_eq!(r.sent(), &[f]);
}

#[tokio::test(start_paused = true)]
async fn replay_as_fast_as_possible_and_at_speed() {
    let mut r =
        ReplayTransport::from_reader("t", LOG.as_bytes(), ReplayOptions::default()).unwrap();
    let t0 = tokio::time::Instant::now();
    let mut frames = 0;
    loop {
        match r.recv().await {
            Ok(_) => frames += 1,
            Err(TransportError::Closed) => break,
            Err(e) => assert!(e.is_bus_event()),
        }
    }
    assert_eq!(frames, 3);
    assert_eq!(t0.elapsed(), Duration::ZERO);

    let mut r = ReplayTransport::from_reader(
        "t",
        LOG.as_bytes(),
        ReplayOptions {
            pacing: Pacing::Timestamps { speed: 2.0 },
            ..Default::default()
        },
    )
    .unwrap();
    while !matches!(r.recv().await, Err(TransportError::Closed)) {}
    assert_eq!(t0.elapsed(), Duration::from_millis(125));
}

#[test]
fn replay_refuses_a_bad_log_with_the_line() {
    let err = ReplayTransport::from_reader(
        "bad.log",
        "(1.0) can0 100#01\n(1.0) can0 100#0\n".as_bytes(),
        ReplayOptions::default(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("bad.log") && msg.contains("line 2"), "{msg}");
}

#[tokio::test(start_paused = true)]
async fn replay_classic_log_refuses_fd_sends() {
    let mut r = ReplayTransport::from_reader(
        "c.log",
        "(1.0) can0 100#01\n".as_bytes(),
        ReplayOptions::default(),
    )
    .unwrap();
    assert_eq!(r.mtu(), Mtu::Classic);
    let fd = Frame::fd(CanId::Standard(1), &[0; 12]).unwrap();
    assert!(matches!(
        r.send(&fd).await,
        Err(TransportError::FdNotSupported { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn recorder_logs_both_directions_and_errors() {
    let bus = SimBus::new(SimConfig::default());
    let mut peer = bus.endpoint(Mtu::Fd);
    let classic_node = bus.endpoint(Mtu::Classic);
    let mut rec =
        Recorder::new(bus.endpoint(Mtu::Fd), CandumpWriter::new(Vec::new())).with_iface("vcan0");
    let out = Frame::classic(CanId::Extended(0x1234), &[1, 2]).unwrap();
    rec.send(&out).await.unwrap();
    let inc = Frame::classic(CanId::Standard(0x7FF), &[0xFF; 8]).unwrap();
    peer.send(&inc).await.unwrap();
    assert_eq!(rec.recv().await.unwrap().frame, inc);
    // an FD frame from the peer is destroyed by the classic node: the recorder logs the
    // error frame
    peer.send(&Frame::fd(CanId::Standard(1), &[0; 12]).unwrap())
        .await
        .unwrap();
    assert!(matches!(
        rec.recv().await,
        Err(TransportError::BusError(BusErrorKind::Form))
    ));
    drop(classic_node);
    let (_, log) = rec.into_parts();
    let text = String::from_utf8(log.into_inner()).unwrap();
    let records = parse_log(&text).unwrap();
    let entries: Vec<LogEntry> = records.iter().map(|r| r.entry).collect();
    assert_eq!(entries.len(), 3, "{text}");
    assert_eq!(entries[0], LogEntry::Frame(out));
    assert_eq!(entries[1], LogEntry::Frame(inc));
    assert!(
        matches!(entries[2], LogEntry::ErrorFrame { class: 0x8, .. }),
        "{text}"
    );
    assert!(records.iter().all(|r| r.iface == "vcan0"));
    assert!(text.contains(" vcan0 00001234#0102\n"), "{text}");
}
