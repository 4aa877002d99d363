//! The simulated bus: arbitration, the bit-time model against hand-computed figures, bus
//! load, latency, Classical-CAN-only endpoints. All on tokio's paused clock, so every
//! figure is exact and the tests take no real time.

use std::time::Duration;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_transport::sim::{frame_bits, BitRates, EndpointConfig, Outcome, SimBus, SimConfig};
use fcan_transport::{BusErrorKind, Transport, TransportError};

fn classic(id: CanId, data: &[u8]) -> Frame {
    Frame::classic(id, data).unwrap()
}

fn us(n: f64) -> Duration {
    Duration::from_nanos((n * 1000.0).round() as u64)
}

#[tokio::test(start_paused = true)]
async fn simultaneous_frames_go_in_arbitration_order() {
    let bus = SimBus::new(SimConfig::default());
    let mut observer = bus.endpoint(Mtu::Fd);
    // One sender per frame, all queued at the same instant, in an order unrelated to
    // priority.
    let ids = [
        CanId::Extended(0x400 << 18),             // base 0x400, extended
        CanId::Standard(0x400),                   // same base, standard: beats the extended
        CanId::Extended((0x123 << 18) | 1),       // base 0x123, extended
        CanId::Standard(0x123),                   // beats the extended 0x123 frame
        CanId::Extended((0x122 << 18) | 0x3FFFF), // base 0x122 < 0x123: beats both
    ];
    let mut senders: Vec<_> = ids.iter().map(|_| bus.endpoint(Mtu::Fd)).collect();
    for (s, id) in senders.iter_mut().zip(ids) {
        s.send(&classic(id, &[0xA5; 4])).await.unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..ids.len() {
        got.push(observer.recv().await.unwrap().frame.id());
    }
    assert_eq!(
        got,
        vec![
            CanId::Extended((0x122 << 18) | 0x3FFFF),
            CanId::Standard(0x123),
            CanId::Extended((0x123 << 18) | 1),
            CanId::Standard(0x400),
            CanId::Extended(0x400 << 18),
        ]
    );
    // Back to back on the wire, each waiting for all the winners before it.
    let h = bus.history();
    assert_eq!(h.len(), 5);
    assert_eq!(h[0].start, Duration::ZERO);
    for w in h.windows(2) {
        assert_eq!(w[1].start, w[0].end);
        assert_eq!(w[1].queueing_latency(), w[0].end);
    }
    // Each sender gets nothing back (no own-message echo) but everyone else's frames.
    for s in &mut senders {
        let mut n = 0;
        while let Some(r) = s.try_recv() {
            r.unwrap();
            n += 1;
        }
        assert_eq!(n, 4);
    }
}

#[tokio::test(start_paused = true)]
async fn a_later_high_priority_frame_overtakes_waiting_ones() {
    let bus = SimBus::new(SimConfig::default());
    let mut rx = bus.endpoint(Mtu::Fd);
    let mut a = bus.endpoint(Mtu::Fd);
    let mut b = bus.endpoint(Mtu::Fd);
    a.send(&classic(CanId::Standard(0x700), &[0; 8]))
        .await
        .unwrap();
    a.send(&classic(CanId::Standard(0x600), &[0; 8]))
        .await
        .unwrap();
    // 0x600 wins at t=0 and is on the wire for >100 µs; 0x010 arrives 10 µs in.
    tokio::time::advance(Duration::from_micros(10)).await;
    b.send(&classic(CanId::Standard(0x010), &[0; 8]))
        .await
        .unwrap();
    let order: Vec<u32> = [
        rx.recv().await.unwrap(),
        rx.recv().await.unwrap(),
        rx.recv().await.unwrap(),
    ]
    .iter()
    .map(|r| r.frame.id().raw())
    .collect();
    assert_eq!(order, vec![0x600, 0x010, 0x700]);
    let h = bus.history();
    assert_eq!(h[1].queued, Duration::from_micros(10));
    assert_eq!(h[1].start, h[0].end, "waits for the frame on the wire");
}

#[test]
fn classical_frame_bits_match_hand_count() {
    // Standard ID 0, DLC 8, eight 0x00 bytes.
    // Unstuffed SOF..CRC: SOF 1 + ID 11 + RTR/IDE/r0 3 + DLC 4 + data 64 + CRC 15 = 98 bits.
    // CRC-15 of the 83 bits SOF..data is 0x145B = 001010001011011 (crc15() is pinned to
    // the catalogue check value 0x059E for "123456789" in its doc test).
    // Stuffing: SOF+ID+RTR+IDE+r0 are 15 zeros -> stuff bits after the 5th, 10th and 15th
    // (3). DLC = 1000. Then 3 + 64 zeros and the CRC's two leading zeros: a run of 69 zeros
    // -> 13 stuff bits. The rest of the CRC (1010001011011) has no run of five. 16 in all.
    // Trailer: CRC delimiter, ACK, ACK delimiter, 7 EOF, 3 IFS = 13.
    // Total 98 + 16 + 13 = 127 bits = 127 µs at 1 Mbit/s.
    let f = classic(CanId::Standard(0), &[0; 8]);
    let b = frame_bits(&f);
    assert_eq!((b.total(), b.stuff, b.data), (127, 16, 0));
    assert_eq!(BitRates::default().frame_time(&f), us(127.0));

    // Standard ID 0x7FF, eight 0xFF bytes. CRC = 0x4C89 = 100110010001001.
    // SOF 0, then 11 ones -> stuff after the 5th and 10th one (2). RTR/IDE/r0 000, DLC 1000
    // -> no run of five. 64 ones -> 12 stuff bits, leaving a run of 4 ones that the CRC's
    // leading 1 makes five -> 1 more. Rest of the CRC: no run of five. 15 in all.
    // 98 + 15 + 13 = 126.
    let f = classic(CanId::Standard(0x7FF), &[0xFF; 8]);
    assert_eq!(frame_bits(&f).total(), 126);
    assert_eq!(frame_bits(&f).stuff, 15);

    // The worst-case formula bounds the exact count: 8 bytes standard <= 135 bits,
    // extended <= 160 bits (stuff <= (raw - 1) / 4).
    for data in [[0u8; 8], [0xFF; 8], [0x0F; 8], [0x55; 8]] {
        assert!(frame_bits(&classic(CanId::Standard(0x555), &data)).total() <= 135);
        assert!(frame_bits(&classic(CanId::Extended(0x1555_5555), &data)).total() <= 160);
    }
}

#[test]
fn fd_frame_bits_match_hand_count() {
    // FD, standard ID 0x123, BRS, 64 bytes of 0x55 (01010101: no run of five anywhere).
    // SOF..BRS: SOF 0 | ID 00100100011 | RRS 0 IDE 0 FDF 1 res 0 | BRS 1 = 17 bits; the
    // longest run is three zeros, so no stuff bits. These run at 1 Mbit/s.
    // ESI 0, DLC 1111, then the data 0101...: no dynamic stuff bits either.
    // Data phase at 5 Mbit/s: ESI 1 + DLC 4 + data 512 + stuff count 4 + CRC-21 21
    //   + fixed stuff bits 7 (one before the stuff count, one after every 4th of the
    //   25 stuff-count + CRC bits: after bits 4, 8, 12, 16, 20, 24) = 549 bits.
    // Trailer at 1 Mbit/s: 13 bits.
    // Time = (17 + 13) bits / 1 Mbit/s + 549 bits / 5 Mbit/s = 30 µs + 109.8 µs = 139.8 µs.
    let f = Frame::fd(CanId::Standard(0x123), &[0x55; 64]).unwrap();
    let b = frame_bits(&f);
    assert_eq!((b.nominal, b.data, b.stuff), (30, 549, 7));
    assert_eq!(BitRates::default().frame_time(&f), us(139.8));

    // Same frame without BRS: all 579 bits at 1 Mbit/s.
    let nb = f.without_brs();
    assert_eq!(frame_bits(&nb).total(), 579);
    assert_eq!(BitRates::default().frame_time(&nb), us(579.0));

    // 8 bytes (CRC-17: 4 + 17 = 21 bits, fixed stuff bits before and after bits 4, 8, 12,
    // 16, 20 = 6): data phase 1 + 4 + 64 + 4 + 17 + 6 = 96 bits = 19.2 µs; + 30 µs.
    let f8 = Frame::fd(CanId::Standard(0x123), &[0x55; 8]).unwrap();
    assert_eq!(frame_bits(&f8).data, 96);
    assert_eq!(BitRates::default().frame_time(&f8), us(49.2));

    // Zeros in the data phase: 0x00 bytes after DLC 1111 give runs of zeros, each five
    // followed by a stuff bit, all of them in the data phase.
    let z = Frame::fd(CanId::Standard(0x123), &[0; 64]).unwrap();
    let bz = frame_bits(&z);
    assert_eq!(bz.nominal, 30);
    // ESI 0 + 512 zero bits = run starting at ESI (1 bit), broken by DLC 1111, then 512
    // zeros: stuff after every 5th except a stuff condition completed by the last data
    // bit (512 is not a multiple of 5: 102 stuff bits).
    assert_eq!(bz.data, 549 + 102);
    // Faster data rate, shorter frame; other rates scale exactly.
    let fast = BitRates {
        nominal: 500_000,
        data: 2_000_000,
    };
    assert_eq!(fast.frame_time(&f), us(30.0 * 2.0 + 549.0 * 0.5));
}

#[tokio::test(start_paused = true)]
async fn delivery_time_is_the_frame_time() {
    let bus = SimBus::new(SimConfig::default());
    let mut a = bus.endpoint(Mtu::Fd);
    let mut b = bus.endpoint(Mtu::Fd);
    tokio::time::advance(Duration::from_millis(3)).await;
    let t0 = fcan_transport::now();
    let f = Frame::fd(CanId::Standard(0x123), &[0x55; 64]).unwrap();
    a.send(&f).await.unwrap();
    let r = b.recv().await.unwrap();
    assert_eq!(r.frame, f);
    assert_eq!(r.at - t0, us(139.8));
    // The receiver wakes on tokio's timer (millisecond resolution): not before the frame
    // ended, while `at` carries the exact end.
    assert!(fcan_transport::now() - t0 >= us(139.8));
}

#[tokio::test(start_paused = true)]
async fn bus_load_over_windows() {
    let bus = SimBus::new(SimConfig::default());
    let mut a = bus.endpoint(Mtu::Fd);
    let mut b = bus.endpoint(Mtu::Fd);
    // A 127-bit frame (127 µs) every millisecond for 10 ms: 12.7 % load.
    let f = classic(CanId::Standard(0), &[0; 8]);
    for _ in 0..10 {
        a.send(&f).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for _ in 0..10 {
        b.recv().await.unwrap();
    }
    let load = bus.load(Duration::ZERO..Duration::from_millis(10));
    assert!((load - 0.127).abs() < 1e-9, "{load}");
    // A window covering only the first frame and half the idle time after it.
    let load = bus.load(Duration::ZERO..us(254.0));
    assert!((load - 0.5).abs() < 1e-9, "{load}");
    // Partial overlap: the window starts in the middle of the 2nd frame.
    let load = bus.load(us(1063.5)..us(2063.5));
    assert!((load - 0.127).abs() < 1e-9, "{load}");
    let t = bus.totals();
    assert_eq!((t.frames, t.errors, t.bits), (10, 0, 1270));
    assert_eq!(t.busy, us(1270.0));

    // A burst queued at once saturates the bus: load 1.0 while it lasts.
    let start = bus.now();
    for _ in 0..5 {
        a.send(&f).await.unwrap();
    }
    for _ in 0..5 {
        b.recv().await.unwrap();
    }
    // (bus.now() has moved on to the receiver's millisecond timer tick; the history has
    // the exact end.)
    let end = bus.history().last().unwrap().end;
    assert_eq!(end - start, us(5.0 * 127.0));
    assert!((bus.load(start..end) - 1.0).abs() < 1e-9);
    let h = bus.history();
    let lat: Vec<Duration> = h[10..].iter().map(|r| r.queueing_latency()).collect();
    assert_eq!(
        lat,
        (0..5).map(|i| us(127.0 * i as f64)).collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn classic_only_endpoint_destroys_fd_frames() {
    let bus = SimBus::new(SimConfig::default());
    let mut a = bus.endpoint(Mtu::Fd);
    let mut b = bus.endpoint(Mtu::Fd);
    let mut c = bus.endpoint(Mtu::Classic);
    assert_eq!(c.mtu(), Mtu::Classic);

    let fd = Frame::fd(CanId::Standard(0x100), &[1; 16]).unwrap();
    a.send(&fd).await.unwrap();
    for ep in [&mut b, &mut c, &mut a] {
        match ep.recv().await {
            Err(TransportError::BusError(BusErrorKind::Form)) => {}
            other => panic!("{}: {other:?}", ep.name()),
        }
    }
    let h = bus.history();
    assert_eq!(h[0].outcome, Outcome::FdRejected);
    assert_eq!(bus.totals().errors, 1);
    assert_eq!(bus.totals().frames, 0);

    // Classical frames still get through to everyone.
    let cl = classic(CanId::Standard(0x101), &[2; 8]);
    a.send(&cl).await.unwrap();
    assert_eq!(b.recv().await.unwrap().frame, cl);
    assert_eq!(c.recv().await.unwrap().frame, cl);
    assert!(a.try_recv().is_none(), "no echo, no leftover error");

    // A classic endpoint cannot even queue an FD frame.
    match c.send(&fd).await {
        Err(e @ TransportError::FdNotSupported { .. }) => {
            assert!(e.to_string().contains("cannot carry CAN FD"), "{e}")
        }
        other => panic!("{other:?}"),
    }

    // Once the classic node leaves, FD frames flow.
    drop(c);
    a.send(&fd).await.unwrap();
    assert_eq!(b.recv().await.unwrap().frame, fd);
}

#[tokio::test(start_paused = true)]
async fn tx_queue_full_and_silence() {
    let bus = SimBus::new(SimConfig::default());
    let mut a = bus.endpoint_with(EndpointConfig {
        name: Some("node7".into()),
        tx_queue_len: 3,
        ..Default::default()
    });
    let mut b = bus.endpoint(Mtu::Fd);
    assert_eq!(a.name(), "node7");
    let f = classic(CanId::Standard(5), &[]);
    for _ in 0..3 {
        a.send(&f).await.unwrap();
    }
    assert!(matches!(a.send(&f).await, Err(TransportError::TxQueueFull)));
    // Draining the bus makes room again.
    for _ in 0..3 {
        b.recv().await.unwrap();
    }
    a.send(&f).await.unwrap();
    b.recv().await.unwrap();
    // Silence is no error: recv just waits (here until the virtual timeout).
    let r = tokio::time::timeout(Duration::from_secs(5), b.recv()).await;
    assert!(r.is_err(), "timed out waiting, as it should");
}

#[tokio::test(start_paused = true)]
async fn invalid_identifiers_are_refused() {
    let bus = SimBus::new(SimConfig::default());
    let mut a = bus.endpoint(Mtu::Fd);
    let f = classic(CanId::Standard(0x800), &[]);
    assert!(matches!(
        a.send(&f).await,
        Err(TransportError::InvalidFrame(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_time_pacing() {
    // In a normal runtime the bus runs on the wall clock: a frame is received no earlier
    // than its end on the wire.
    let bus = SimBus::new(SimConfig {
        rates: BitRates {
            nominal: 10_000, // 10 kbit/s: a 127-bit frame takes 12.7 ms
            data: 10_000,
        },
        ..Default::default()
    });
    let mut a = bus.endpoint(Mtu::Fd);
    let mut b = bus.endpoint(Mtu::Fd);
    let t0 = std::time::Instant::now();
    let rx = tokio::spawn(async move { b.recv().await.map(|r| (r, std::time::Instant::now())) });
    a.send(&classic(CanId::Standard(0), &[0; 8])).await.unwrap();
    let (r, when) = rx.await.unwrap().unwrap();
    assert!(when - t0 >= Duration::from_micros(12_700));
    assert!(r.at - t0 >= Duration::from_micros(12_700));
}
