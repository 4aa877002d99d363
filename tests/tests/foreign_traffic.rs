//! A bus shared with other CAN devices: while a foreign device fills about half the bus
//! with random standard and extended frames (random identifiers, many with bit 28 set so
//! they parse as configuration-plane identifiers, random lengths and payloads), the master
//! still discovers, downloads, provisions and starts the example nodes, and topics,
//! services and parameters work (issue 10, item 7).

use std::time::Duration;

use fcan_core::frame::{CanId, Frame, Mtu, FD_MAX_LEN};
use fcan_e2e::*;
use fcan_master::transport::sim::{frame_bits, SimEndpoint};
use fcan_master::transport::Transport;
use fcan_master::value::Value;
use tokio::task::JoinHandle;

/// A random frame like `cangen -I r -L r -D r -e` makes: half standard, half extended
/// (any 29-bit identifier, so half of them have bit 28 set), random length and payload;
/// on a CAN FD link half of them are FD frames of a random legal length.
fn random_frame(rng: &mut fastrand::Rng, mtu: Mtu) -> Frame {
    let id = if rng.bool() {
        CanId::Extended(rng.u32(0..=CanId::EXTENDED_MAX))
    } else {
        CanId::Standard(rng.u16(0..=0x7FF))
    };
    let mut data = [0u8; FD_MAX_LEN];
    rng.fill(&mut data);
    if mtu == Mtu::Fd && rng.bool() {
        const LENS: [usize; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64];
        let len = LENS[rng.usize(..LENS.len())];
        let f = Frame::fd(id, &data[..len]).expect("legal FD length");
        if rng.bool() {
            f
        } else {
            f.without_brs()
        }
    } else {
        Frame::classic(id, &data[..rng.usize(0..=8)]).expect("legal length")
    }
}

/// Puts random frames on the bus for ever at about `load` of its nominal bit rate
/// (bits counted as the bus model counts them), and throws away what it receives.
fn foreign_device(mut ep: SimEndpoint, mtu: Mtu, load: f64, seed: u64) -> JoinHandle<()> {
    let bits_per_ms = ep.bus().rates().nominal as f64 / 1000.0 * load;
    tokio::spawn(async move {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut credit = 0.0;
        loop {
            tokio::time::sleep(Duration::from_millis(1)).await;
            while ep.try_recv().is_some() {}
            credit += bits_per_ms;
            while credit > 0.0 {
                let f = random_frame(&mut rng, mtu);
                // FD data-phase bits are faster; counting them at the nominal rate
                // only errs towards less load.
                credit -= frame_bits(&f).total() as f64;
                let _ = ep.send(&f).await;
            }
        }
    })
}

async fn provisioning_and_traffic_under_foreign_load(mtu: Mtu) {
    let mut w = World::new(mtu);
    let t0 = w.bus.now();
    let foreign = foreign_device(w.endpoint(), mtu, 0.5, 0xf0_2e16);
    w.add_motor(MD1, 8);
    w.add_motor(MD2, 4);
    w.add_io(IO3);
    let m = w.start_master().await;
    // Without foreign traffic this takes well under a second.
    wait_running(&m, &[MD1, MD2, IO3], Duration::from_secs(10)).await;

    // s2m topics flow.
    let mut fb = m.subscribe("/motor_driver1/motor3/feedback").await.unwrap();
    eventually("motor3 feedback", Duration::from_millis(200), || {
        let s = fb.try_recv().ok();
        async move { s.map(|_| ()) }
    })
    .await;
    // m2s: a command reaches the firmware.
    m.publish(
        "/motor_driver2/motor1/target",
        val("{type: 0, value: 0.25}"),
    )
    .await
    .unwrap();
    eventually("motor1 duty 0.25", Duration::from_millis(200), || async {
        let d = w.motor(MD2).with(|f| f.axis(1).unwrap().duty);
        ((d - 0.25).abs() < 1e-6).then_some(())
    })
    .await;
    // Services and parameters.
    let r = m
        .call("/io_board3/out0/set", val("{on: true}"))
        .await
        .unwrap();
    assert_eq!(r, val("{success: true, settle_ms: 20}"));
    m.param_set("motor_driver1.motor0.velocity.kp", Value::Float(0.75))
        .await
        .unwrap();
    assert_eq!(
        m.param_get("motor_driver1.motor0.velocity.kp")
            .await
            .unwrap(),
        Value::Float(0.75)
    );
    // A few more seconds: nobody drops out.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for id in [MD1, MD2, IO3] {
        assert_eq!(
            node_info(&m, id).await.unwrap().phase,
            fcan_master::Phase::Running,
            "node {id}"
        );
    }
    // The foreign device really filled about half of the bus.
    // (Over the last 3 s: the bus model keeps a bounded history.)
    let now = w.bus.now();
    let load = w.bus.load(now - Duration::from_secs(3)..now);
    println!(
        "{mtu:?}: bus load {:.0} %, {} frames in {:?}",
        load * 100.0,
        w.bus.totals().frames,
        now - t0
    );
    assert!(load >= 0.4, "bus load only {:.0} %", load * 100.0);
    foreign.abort();
}

both_links!(provisioning_and_traffic_under_foreign_load);
