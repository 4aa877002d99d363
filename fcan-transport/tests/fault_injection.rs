//! Fault injectors on the simulated bus, seeded: outcome counts, reproducibility, and the
//! effect of each fault on what the node receives.

use std::time::Duration;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_transport::fault::{BusOffSchedule, CorruptMode, FaultConfig, FaultInjector, FaultStats};
use fcan_transport::sim::{EndpointConfig, SimBus, SimConfig, SimEndpoint};
use fcan_transport::{BusErrorKind, Received, Transport, TransportError};

const N: usize = 1000;

fn frame(i: usize) -> Frame {
    let b = (i as u32).to_le_bytes();
    Frame::classic(
        CanId::Standard(0x200),
        &[b[0], b[1], b[2], b[3], 0, 0, 0, 0],
    )
    .unwrap()
}

fn seq(f: &Frame) -> usize {
    u32::from_le_bytes(f.data()[..4].try_into().unwrap()) as usize
}

fn sender(bus: &SimBus) -> SimEndpoint {
    bus.endpoint_with(EndpointConfig {
        tx_queue_len: N + 1,
        ..Default::default()
    })
}

/// Sends N numbered frames through the bus to a node behind a fault injector and collects
/// everything the node gets until the bus has been quiet for a second.
async fn run(
    config: FaultConfig,
    seed: u64,
) -> (Vec<Result<Received, TransportError>>, FaultStats) {
    let bus = SimBus::new(SimConfig::default());
    let mut tx = sender(&bus);
    let mut node = FaultInjector::new(bus.endpoint(Mtu::Fd), config, seed);
    for i in 0..N {
        tx.send(&frame(i)).await.unwrap();
    }
    let mut got = Vec::new();
    while let Ok(r) = tokio::time::timeout(Duration::from_secs(1), node.recv()).await {
        got.push(r);
    }
    (got, node.stats())
}

fn frames(got: &[Result<Received, TransportError>]) -> Vec<Frame> {
    got.iter()
        .filter_map(|r| r.as_ref().ok().map(|r| r.frame))
        .collect()
}

/// Binomial(N, p) lies within 5 standard deviations of its mean.
fn plausible(count: u64, p: f64) -> bool {
    let mean = N as f64 * p;
    let sd = (N as f64 * p * (1.0 - p)).sqrt();
    (count as f64 - mean).abs() <= 5.0 * sd
}

#[tokio::test(start_paused = true)]
async fn no_faults_passes_everything_in_order() {
    let (got, stats) = run(FaultConfig::default(), 1).await;
    let f = frames(&got);
    assert_eq!(f.len(), N);
    assert!(f.iter().enumerate().all(|(i, f)| seq(f) == i));
    assert_eq!(stats.seen, N as u64);
    assert_eq!(
        stats.dropped + stats.corrupted + stats.duplicated + stats.delayed,
        0
    );
}

#[tokio::test(start_paused = true)]
async fn drop_is_seeded_and_counted() {
    let cfg = FaultConfig {
        drop: 0.3,
        ..Default::default()
    };
    let (got, stats) = run(cfg, 42).await;
    assert_eq!(stats.seen, N as u64);
    assert!(plausible(stats.dropped, 0.3), "{stats:?}");
    let f = frames(&got);
    assert_eq!(f.len() as u64, N as u64 - stats.dropped);
    assert!(got.iter().all(|r| r.is_ok()));
    // survivors keep their order
    assert!(f.windows(2).all(|w| seq(&w[0]) < seq(&w[1])));
    // same seed, same frames lost; another seed, others
    let (again, stats2) = run(cfg, 42).await;
    assert_eq!(stats2, stats);
    assert_eq!(frames(&again), f);
    let (other, _) = run(cfg, 43).await;
    assert_ne!(frames(&other), f);
}

#[tokio::test(start_paused = true)]
async fn corruption_detected_becomes_crc_errors() {
    let cfg = FaultConfig {
        corrupt: 0.2,
        corrupt_mode: CorruptMode::Detected,
        ..Default::default()
    };
    let (got, stats) = run(cfg, 7).await;
    assert!(plausible(stats.corrupted, 0.2), "{stats:?}");
    let errors = got
        .iter()
        .filter(|r| matches!(r, Err(TransportError::BusError(BusErrorKind::Crc))))
        .count() as u64;
    assert_eq!(errors, stats.corrupted);
    let f = frames(&got);
    assert_eq!(f.len() as u64 + errors, N as u64);
    // what does arrive is intact
    assert!(f.iter().all(|f| *f == frame(seq(f))));
}

#[tokio::test(start_paused = true)]
async fn corruption_undetected_flips_one_bit() {
    let cfg = FaultConfig {
        corrupt: 0.2,
        corrupt_mode: CorruptMode::Undetected,
        ..Default::default()
    };
    let (got, stats) = run(cfg, 9).await;
    assert!(plausible(stats.corrupted, 0.2), "{stats:?}");
    let f = frames(&got);
    assert_eq!(f.len(), N, "nothing lost");
    // Frame i was the i-th sent; compare bit by bit with the original.
    let mut damaged = 0;
    for (i, g) in f.iter().enumerate() {
        let orig = frame(i);
        let flipped: u32 = orig
            .data()
            .iter()
            .zip(g.data())
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert!(flipped <= 1, "frame {i}: {flipped} bits flipped");
        assert_eq!(
            (g.id(), g.len(), g.is_fd()),
            (orig.id(), orig.len(), orig.is_fd())
        );
        damaged += flipped as u64;
    }
    assert_eq!(damaged, stats.corrupted);
}

#[tokio::test(start_paused = true)]
async fn duplicates_arrive_twice_in_a_row() {
    let cfg = FaultConfig {
        duplicate: 0.1,
        ..Default::default()
    };
    let (got, stats) = run(cfg, 5).await;
    assert!(plausible(stats.duplicated, 0.1), "{stats:?}");
    let f = frames(&got);
    assert_eq!(f.len() as u64, N as u64 + stats.duplicated);
    let twins = f.windows(2).filter(|w| w[0] == w[1]).count() as u64;
    assert_eq!(twins, stats.duplicated);
}

#[tokio::test(start_paused = true)]
async fn delayed_frames_are_overtaken() {
    let bus = SimBus::new(SimConfig::default());
    let mut tx = sender(&bus);
    let cfg = FaultConfig {
        delay: 0.25,
        delay_by: Duration::from_millis(20),
        ..Default::default()
    };
    let mut node = FaultInjector::new(bus.endpoint(Mtu::Fd), cfg, 11);
    let t0 = fcan_transport::now();
    // one frame per millisecond
    let sending = async {
        for i in 0..100 {
            tx.send(&frame(i)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    let receiving = async {
        let mut got = Vec::new();
        while let Ok(r) = tokio::time::timeout(Duration::from_secs(1), node.recv()).await {
            got.push(r.unwrap());
        }
        got
    };
    let ((), got) = tokio::join!(sending, receiving);
    let stats = node.stats();
    assert!(stats.delayed > 5 && stats.delayed < 50, "{stats:?}");
    assert_eq!(got.len(), 100, "delay loses nothing");
    let out_of_order = got
        .windows(2)
        .filter(|w| seq(&w[0].frame) > seq(&w[1].frame))
        .count();
    assert!(out_of_order > 0);
    // A delayed frame arrives >= 20 ms after it was sent (frame i is sent at i ms).
    let late = got
        .iter()
        .filter(|r| r.at - t0 >= Duration::from_millis(seq(&r.frame) as u64 + 20))
        .count() as u64;
    assert_eq!(late, stats.delayed);
}

#[tokio::test(start_paused = true)]
async fn bus_off_until_recovered() {
    let bus = SimBus::new(SimConfig::default());
    let mut other = bus.endpoint(Mtu::Fd);
    let mut node = FaultInjector::new(bus.endpoint(Mtu::Fd), FaultConfig::default(), 1);
    let switch = node.bus_off_switch();

    other.send(&frame(0)).await.unwrap();
    assert_eq!(seq(&node.recv().await.unwrap().frame), 0);

    switch.trip();
    assert!(switch.is_bus_off());
    assert!(matches!(
        node.send(&frame(99)).await,
        Err(TransportError::BusOff)
    ));
    assert!(matches!(node.recv().await, Err(TransportError::BusOff)));
    // While off, frames on the bus never reach the node, and sending keeps failing.
    other.send(&frame(1)).await.unwrap();
    other.send(&frame(2)).await.unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(50), node.recv()).await;
    assert!(waited.is_err(), "silent while bus-off");
    assert!(matches!(
        node.send(&frame(99)).await,
        Err(TransportError::BusOff)
    ));
    // Nothing the node tried to send reached the bus.
    assert!(other.try_recv().is_none());

    // Recovery wakes a waiting recv with `Restarted`; then traffic flows again.
    let recover = async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        switch.recover();
    };
    let (_, r) = tokio::join!(recover, node.recv());
    assert!(matches!(r, Err(TransportError::Restarted)), "{r:?}");
    other.send(&frame(3)).await.unwrap();
    assert_eq!(seq(&node.recv().await.unwrap().frame), 3);
    node.send(&frame(4)).await.unwrap();
    assert_eq!(seq(&other.recv().await.unwrap().frame), 4);
    assert_eq!(node.stats().lost_bus_off, 2);
}

/// The bus-off timetable: off for `lasting` once every `every`, the first one somewhere
/// in the first period (drawn from the seed), the same draws for the same seed; the
/// timetable's task ends with the injector.
#[tokio::test(start_paused = true)]
async fn bus_off_on_a_timetable() {
    let schedule = BusOffSchedule {
        lasting: Duration::from_millis(100),
        every: Duration::from_secs(1),
    };
    // Samples the switch every millisecond for 5 s: the (start, end) of each bus-off.
    async fn windows(seed: u64, schedule: BusOffSchedule) -> Vec<(u64, u64)> {
        let bus = SimBus::new(SimConfig::default());
        let mut node = FaultInjector::new(bus.endpoint(Mtu::Fd), FaultConfig::default(), seed);
        let task = node.schedule_bus_off(schedule);
        let switch = node.bus_off_switch();
        let t0 = tokio::time::Instant::now();
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut was = false;
        for _ in 0..5000 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let ms = t0.elapsed().as_millis() as u64;
            let off = switch.is_bus_off();
            match (was, off) {
                (false, true) => out.push((ms, 0)),
                (true, false) => out.last_mut().unwrap().1 = ms,
                _ => {}
            }
            was = off;
        }
        drop(node);
        // The timetable's task notices and ends.
        tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .expect("the task ends with the injector")
            .unwrap();
        out
    }
    let w = windows(3, schedule).await;
    assert!(w.len() >= 4 && w.len() <= 5, "{w:?}");
    assert!(
        w[0].0 <= 1001,
        "first bus-off within the first period: {w:?}"
    );
    for (start, end) in &w[..w.len() - 1] {
        assert!((99..=102).contains(&(end - start)), "{w:?}");
    }
    for p in w.windows(2) {
        assert!((999..=1001).contains(&(p[1].0 - p[0].0)), "{w:?}");
    }
    assert_eq!(windows(3, schedule).await, w, "same seed, same timetable");
    let other = windows(4, schedule).await;
    assert_ne!(other[0].0, w[0].0, "another seed, another phase");
}

/// While the timetable holds it off the bus, the injector behaves as when tripped by hand:
/// sends fail, `recv` says BusOff then Restarted, frames sent meanwhile never arrive.
#[tokio::test(start_paused = true)]
async fn scheduled_bus_off_is_a_bus_off() {
    let bus = SimBus::new(SimConfig::default());
    let mut other = sender(&bus);
    let mut node = FaultInjector::new(bus.endpoint(Mtu::Fd), FaultConfig::default(), 1);
    let _task = node.schedule_bus_off(BusOffSchedule {
        lasting: Duration::from_millis(200),
        every: Duration::from_millis(1000),
    });
    let switch = node.bus_off_switch();
    // One frame every 10 ms for 3 s.
    let sending = async {
        for i in 0..300 {
            other.send(&frame(i)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let receiving = async {
        let mut events = Vec::new();
        while let Ok(r) = tokio::time::timeout(Duration::from_millis(500), node.recv()).await {
            if matches!(r, Err(TransportError::BusOff)) {
                // Off the bus: a send is refused too.
                assert!(switch.is_bus_off());
                assert!(matches!(
                    node.send(&frame(999)).await,
                    Err(TransportError::BusOff)
                ));
            }
            events.push(r);
        }
        events
    };
    let ((), events) = tokio::join!(sending, receiving);
    let offs = events
        .iter()
        .filter(|r| matches!(r, Err(TransportError::BusOff)))
        .count();
    let restarts = events
        .iter()
        .filter(|r| matches!(r, Err(TransportError::Restarted)))
        .count();
    assert!((2..=3).contains(&offs), "{offs}");
    assert_eq!(offs, restarts);
    let got = frames(&events).len() as u64;
    // About 20 frames lost per bus-off.
    assert_eq!(got + node.stats().lost_bus_off, 300, "{:?}", node.stats());
    assert!(node.stats().lost_bus_off >= 30, "{:?}", node.stats());
    // Nothing the node tried to send while off reached the bus.
    assert!(other.try_recv().is_none());
}
