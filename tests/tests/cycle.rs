//! The cycle API (`fcan_cycle`) against the example firmwares on the simulated
//! bus: configuration errors name the field, activation names what is missing, the
//! loop drives real motors, a dropped node latches a fault within the feedback timeout
//! and a bounded safe stop follows (its frames counted on the bus), then silence.

use std::time::Duration;

use fcan_core::frame::{CanId, Mtu};
use fcan_cycle::{Cycle, CycleConfig, CycleError, Fault, Lifecycle};
use fcan_e2e::{both_links, val, wait_running, World, MD1, MD2};
use fcan_master::Master;

const FB: &str = "/motor_driver1/motor0/feedback";
const TARGET: &str = "/motor_driver1/motor0/target";

/// Both wheels: velocity state and command, on motor 0 of each driver.
fn two_wheels(rate: f64) -> CycleConfig {
    CycleConfig::new(rate)
        .feedback_timeout(Duration::from_millis(50))
        .state("left/velocity", "/motor_driver1/motor0/feedback.velocity")
        .state("left/position", "/motor_driver1/motor0/feedback.position")
        .state("right/velocity", "/motor_driver2/motor0/feedback.velocity")
        .command(
            "left/velocity",
            "/motor_driver1/motor0/target{type: 1}.value",
            0.0,
        )
        .command(
            "right/velocity",
            "/motor_driver2/motor0/target{type: 1}.value",
            0.0,
        )
}

/// Gains so the example motors follow a velocity command.
async fn tune(m: &Master, node: &str) {
    m.param_set(&format!("{node}.motor0.velocity.kp"), val("0.05"))
        .await
        .unwrap();
    m.param_set(&format!("{node}.motor0.velocity.ki"), val("1.0"))
        .await
        .unwrap();
}

async fn config_error(m: &Master, config: CycleConfig) -> String {
    match Cycle::configure(m.clone(), config, Duration::from_millis(100)).await {
        Ok(_) => panic!("configuration accepted"),
        Err(e) => e.to_string(),
    }
}

async fn configuration_errors_name_the_field(mtu: Mtu) {
    let (_w, m) = World::standard(mtu).await;
    let base = || CycleConfig::new(100.0);

    let e = config_error(&m, base().state("a/p", &format!("{FB}.postion"))).await;
    assert!(
        e.contains("state `a/p`") && e.contains("no field `postion`"),
        "{e}"
    );
    assert!(e.contains("position, velocity"), "lists the fields: {e}");

    let e = config_error(
        &m,
        base().state("a/p", "/motor_driver1/motor0/feedbak.position"),
    )
    .await;
    assert!(
        e.contains("feedbak") && e.contains("feedback"),
        "unknown topic, nearest name: {e}"
    );

    let e = config_error(&m, base().state("a/v", &format!("{TARGET}.value"))).await;
    assert!(e.contains("command topic (m2s)"), "{e}");

    let e = config_error(&m, base().command("a/v", &format!("{FB}.velocity"), 0.0)).await;
    assert!(e.contains("feedback topic (s2m)"), "{e}");

    // `type` neither driven nor constant: the loop would send a mode nobody chose.
    let e = config_error(&m, base().command("a/v", &format!("{TARGET}.value"), 0.0)).await;
    assert!(
        e.contains("field `type`") && e.contains("neither driven"),
        "{e}"
    );

    // A constant that does not fit its field (u8).
    let e = config_error(
        &m,
        base().command("a/v", &format!("{TARGET}{{type: 300}}.value"), 0.0),
    )
    .await;
    assert!(e.contains("command `a/v`") && e.contains("300"), "{e}");

    // Two commands on one field.
    let e = config_error(
        &m,
        base()
            .command("a/v", &format!("{TARGET}{{type: 1}}.value"), 0.0)
            .command("b/v", &format!("{TARGET}{{type: 1}}.value"), 0.0),
    )
    .await;
    assert!(
        e.contains("command `b/v`") && e.contains("already set by command `a/v`"),
        "{e}"
    );

    // Two commands with different constants for one field.
    let e = config_error(
        &m,
        base()
            .command("a/v", "/motor_driver1/motor0/trajectory.position", 0.0)
            .command("a/w", "/motor_driver1/motor0/trajectory.velocity", 0.0)
            .command("a/x", "/motor_driver1/motor0/trajectory.acceleration", 0.0)
            .command("b/v", &format!("{TARGET}{{type: 1}}.value"), 0.0)
            .command("c/t", &format!("{TARGET}{{value: 2.0}}.type"), 0.0),
    )
    .await;
    assert!(
        e.contains("command `c/t`") && e.contains("already driven by command `b/v`"),
        "{e}"
    );

    // A motor that is not wired on this board (motor_driver2 has 4).
    let e = config_error(
        &m,
        base().state("a/p", "/motor_driver2/motor7/feedback.position"),
    )
    .await;
    assert!(e.contains("motor7"), "{e}");

    // A node that never comes: named, after the wait.
    let e = config_error(
        &m,
        base().state("a/p", "/motor_driver9/motor0/feedback.position"),
    )
    .await;
    assert!(
        e.contains("motor_driver9") && e.contains("not running"),
        "{e}"
    );

    // The whole example configuration resolves.
    Cycle::configure(m.clone(), two_wheels(500.0), Duration::from_secs(1))
        .await
        .unwrap();
}

async fn activation_names_what_is_missing(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let mut cycle = Cycle::configure(m.clone(), two_wheels(500.0), Duration::from_secs(1))
        .await
        .unwrap();
    // motor_driver2 leaves the bus before activation.
    w.motor(MD2).stop();
    let e = cycle.activate(Duration::from_secs(3)).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, CycleError::ActivationTimeout { .. }), "{text}");
    assert!(text.contains("motor_driver2"), "names the node: {text}");
    assert!(
        !text.contains("motor_driver1"),
        "names only what is missing: {text}"
    );
    assert_eq!(cycle.lifecycle(), &Lifecycle::Inactive);
    assert!(matches!(
        cycle.write(&[0.0, 0.0]),
        Err(CycleError::NotActive)
    ));

    // An enable service whose answer is not the expected one fails activation, named.
    let (_w2, m2) = World::standard(mtu).await;
    let config = two_wheels(500.0).enable(
        "/motor_driver1/motor0/clear_fault",
        serde_json::json!({}),
        Some(serde_json::json!({"success": false})),
    );
    let mut cycle = Cycle::configure(m2.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    let e = cycle
        .activate(Duration::from_secs(3))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/motor_driver1/motor0/clear_fault") && e.contains("expected success = false"),
        "{e}"
    );
}

/// Runs the loop for `cycles` at the cycle's period, commanding `command(i)`.
async fn run(
    cycle: &mut Cycle<Master>,
    cycles: usize,
    command: impl Fn(usize) -> [f64; 2],
) -> Result<(), CycleError> {
    let mut tick = tokio::time::interval(cycle.period());
    for i in 0..cycles {
        tick.tick().await;
        cycle.read()?;
        cycle.write(&command(i))?;
    }
    Ok(())
}

async fn the_loop_drives_the_motors(mtu: Mtu) {
    let (_w, m) = World::standard(mtu).await;
    tune(&m, "motor_driver1").await;
    tune(&m, "motor_driver2").await;
    let mut cycle = Cycle::configure(m.clone(), two_wheels(500.0), Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    assert_eq!(cycle.lifecycle(), &Lifecycle::Active);
    let left = cycle.state_index("left/velocity").unwrap();
    let right = cycle.state_index("right/velocity").unwrap();
    // 2 s at 500 Hz: left at 2 rev/s, right at -1 rev/s.
    run(&mut cycle, 1000, |_| [2.0, -1.0]).await.unwrap();
    let s = cycle.read().unwrap();
    assert!(
        (s.value(left) - 2.0).abs() < 0.2,
        "left follows: {}",
        s.value(left)
    );
    assert!(
        (s.value(right) + 1.0).abs() < 0.2,
        "right follows: {}",
        s.value(right)
    );
    assert!(s.age(left) < Duration::from_millis(50));

    let stats = cycle.stats();
    assert_eq!(stats.cycles, 1001);
    assert_eq!(stats.batches_written, 1000);
    assert!(
        stats.batches_sent + stats.batches_coalesced >= 999,
        "{stats:?}"
    );
    assert!(
        stats.period.mean >= Duration::from_micros(1900),
        "{stats:?}"
    );

    // A command its field cannot carry is refused whole, named.
    let e = cycle.write(&[f64::NAN, 0.0]).unwrap_err().to_string();
    assert!(e.contains("left/velocity"), "{e}");
    assert!(matches!(
        cycle.write(&[0.0]),
        Err(CycleError::CommandCount {
            expected: 2,
            got: 1
        })
    ));

    // Deactivation flushes the commands in force once (one batch per node) and sends no
    // safe stop; `safe_stop` is the one that stops the joints.
    cycle.deactivate().await.unwrap();
    assert_eq!(cycle.lifecycle(), &Lifecycle::Inactive);
    let stats = cycle.stats();
    assert!(stats.flush_sends >= 1, "{stats:?}");
    assert_eq!(stats.safe_stop_sends, 0, "{stats:?}");
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    cycle.safe_stop().await.unwrap();
    assert_eq!(cycle.lifecycle(), &Lifecycle::Inactive);
    assert!(cycle.stats().safe_stop_sends >= 3, "{:?}", cycle.stats());
}

async fn a_dropped_node_latches_a_fault_and_a_bounded_safe_stop(mtu: Mtu) {
    let (w, m) = World::standard(mtu).await;
    let repeats = 4;
    let config = two_wheels(500.0).safe_stop(repeats, Duration::from_millis(10));
    let mut cycle = Cycle::configure(m.clone(), config, Duration::from_secs(1))
        .await
        .unwrap();
    cycle.activate(Duration::from_secs(2)).await.unwrap();

    // Data frames (standard ids) the master sends for one batch, in steady state.
    let mut frames = m.frames();
    run(&mut cycle, 200, |_| [0.5, 0.5]).await.unwrap();
    let mut per_batch = 0;
    let mut batches = 0;
    while let Ok(f) = frames.try_recv() {
        if f.sent && matches!(f.frame.id(), CanId::Standard(_)) {
            per_batch += 1;
        }
        batches = cycle.stats().batches_sent;
    }
    assert!(batches > 150, "{batches}");
    let per_batch = (per_batch as f64 / batches as f64).ceil() as u64;
    assert!(
        per_batch >= 2,
        "two nodes' targets: {per_batch} frames a batch"
    );

    // motor_driver2 is pulled.
    w.motor(MD2).stop();
    let pulled = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(cycle.period());
    let fault = loop {
        tick.tick().await;
        match cycle
            .read()
            .map(|_| ())
            .and_then(|()| cycle.write(&[0.5, 0.5]))
        {
            Ok(()) => assert!(
                pulled.elapsed() < Duration::from_millis(200),
                "no fault yet"
            ),
            Err(CycleError::Faulted(f)) => break f,
            Err(e) => panic!("{e}"),
        }
    };
    let latency = pulled.elapsed();
    // From the latch on (the safe stop's task has not run yet: no await since).
    let mut frames = m.frames();
    match &fault {
        Fault::Stale { state, timeout, .. } => {
            assert_eq!(&**state, "right/velocity");
            // Within the feedback timeout plus the feedback period (5 ms) and a cycle.
            assert!(
                latency <= *timeout + Duration::from_millis(8),
                "{latency:?}"
            );
        }
        other => panic!("expected a stale state, got {other}"),
    }
    // Latched: read and write refuse; the states stay readable.
    assert!(matches!(cycle.read(), Err(CycleError::Faulted(_))));
    assert!(matches!(
        cycle.write(&[0.5, 0.5]),
        Err(CycleError::Faulted(_))
    ));
    assert_eq!(cycle.states().values().len(), 3);

    // The safe stop: at most `repeats` batches, then silence for good.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut after = 0u64;
    while let Ok(f) = frames.try_recv() {
        if f.sent && matches!(f.frame.id(), CanId::Standard(_)) {
            after += 1;
        }
    }
    eprintln!("safe stop: {after} frames, {per_batch} a batch, fault after {latency:?}");
    assert!(
        after >= repeats as u64,
        "the safe commands went out: {after}"
    );
    assert!(
        after <= repeats as u64 * per_batch,
        "bounded: {after} frames > {repeats} × {per_batch}"
    );
    assert!(cycle.stats().safe_stop_sends >= repeats as u64);
    let mut later = m.frames();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut silent = 0;
    while let Ok(f) = later.try_recv() {
        if f.sent && matches!(f.frame.id(), CanId::Standard(_)) {
            silent += 1;
        }
    }
    assert_eq!(silent, 0, "nothing after the safe stop");
    // motor_driver1 got the safe command: its target is 0.
    let target = w
        .motor(MD1)
        .with(|f| f.node.raw().topic(0, 0).map(|t| t.bytes.to_vec()));
    assert_eq!(
        target.map(|b| b[1..5].to_vec()),
        Some(0f32.to_le_bytes().to_vec())
    );

    // Activation refuses while the fault is latched; cleared, it waits for the node.
    assert!(matches!(
        cycle.activate(Duration::from_millis(10)).await,
        Err(CycleError::Faulted(_))
    ));
    assert!(cycle.clear_fault().is_some());
    assert!(cycle.activate(Duration::from_millis(200)).await.is_err());
    let mut w = w;
    w.add_motor(MD2, 4);
    wait_running(&m, &[MD2], Duration::from_secs(3)).await;
    cycle.activate(Duration::from_secs(2)).await.unwrap();
    run(&mut cycle, 100, |_| [0.0, 0.0]).await.unwrap();
}

both_links!(
    configuration_errors_name_the_field,
    activation_names_what_is_missing,
    the_loop_drives_the_motors,
    a_dropped_node_latches_a_fault_and_a_bounded_safe_stop,
);
