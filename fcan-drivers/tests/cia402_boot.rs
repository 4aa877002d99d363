//! The cia402 driver against the simulated drive, sans I/O: frames handed between them
//! at once, time stepped by their `poll_at`. The bring-up (its steps, the PDO mapping it
//! writes, a dictionary lacking an object), the state machine through the services, a
//! CSP command, a fault, a silence.

use fcan_core::frame::Frame;
use fcan_drivers::cia402::sim::SimCia402;
use fcan_drivers::cia402::state::State;
use fcan_drivers::cia402::wire::NmtState;
use fcan_drivers::cia402::{BootStep, Cia402, BOOT_RETRY_US};
use fcan_drivers::sim::SimDevice;
use fcan_drivers::spec::DeviceSpec;
use fcan_drivers::{Device, Io, Served};

struct Loop {
    drv: Cia402,
    sim: SimCia402,
    now: u64,
    io: Io,
    wire: Vec<(u64, Frame)>,
    /// The driver's frames handed to the drive so far.
    delivered: usize,
}

impl Loop {
    fn new(spec: &str, sim: SimCia402) -> Loop {
        let drv = Cia402::from_spec(&DeviceSpec::parse(spec).unwrap()).unwrap();
        Loop {
            drv,
            sim,
            now: 0,
            io: Io::default(),
            wire: Vec::new(),
            delivered: 0,
        }
    }

    /// Hands the driver's new frames to the drive and its answers back, until quiet.
    fn exchange(&mut self, mut from_sim: Vec<Frame>) {
        for _ in 0..10_000 {
            for f in from_sim.drain(..) {
                self.wire.push((self.now, f));
                if self.drv.claims(&f) {
                    self.drv.on_frame(self.now, &f, &mut self.io);
                }
            }
            let new: Vec<Frame> = self.io.frames()[self.delivered..].to_vec();
            self.delivered = self.io.frames().len();
            if new.is_empty() {
                return;
            }
            for f in new {
                self.wire.push((self.now, f));
                self.sim.receive(self.now, &f, &mut from_sim);
            }
        }
        panic!("no end to the exchange");
    }

    fn run_until(&mut self, end: u64) {
        loop {
            let next = [self.drv.poll_at(), self.sim.poll_at()]
                .into_iter()
                .flatten()
                .map(|t| t.max(self.now))
                .min();
            let Some(t) = next.filter(|&t| t <= end) else {
                self.now = end;
                return;
            };
            self.now = t;
            let mut out = Vec::new();
            if self.sim.poll_at().is_some_and(|p| p <= t) {
                self.sim.poll(t, &mut out);
            }
            self.exchange(out);
            if self.drv.poll_at().is_some_and(|p| p <= t) {
                self.drv.poll(t, &mut self.io);
            }
            self.exchange(Vec::new());
        }
    }

    fn call(&mut self, service: u8) -> Served {
        let s = self.drv.on_service(self.now, service, &[], &mut self.io);
        self.exchange(Vec::new());
        s
    }

    fn completed(&self, service: u8) -> Vec<bool> {
        self.io
            .completed()
            .iter()
            .filter(|(s, _)| *s == service)
            .map(|(_, r)| r.first() == Some(&1))
            .collect()
    }

    fn warnings(&self) -> Vec<String> {
        self.io.notes().iter().map(|n| n.text.clone()).collect()
    }
}

#[test]
fn bring_up_maps_the_pdos_and_starts_the_drive() {
    let mut l = Loop::new("cia402:id=5,mode=csp,counts=1000", SimCia402::new(5));
    assert_eq!(l.drv.boot_step(), BootStep::WaitForDrive);
    assert!(!l.drv.present());
    l.run_until(200_000);
    assert_eq!(l.drv.boot_step(), BootStep::Running, "{:?}", l.warnings());
    assert!(l.drv.present());
    assert_eq!(l.sim.nmt(), NmtState::Operational);
    let od = l.sim.od();
    // RPDO A on 0x505: controlword + target position; TPDO A on 0x485, B on 0x685.
    assert_eq!(od.u64(0x1400, 1), Some(0x505));
    assert_eq!(od.u64(0x1600, 0), Some(2));
    assert_eq!(od.u64(0x1600, 1), Some(0x6040_0010));
    assert_eq!(od.u64(0x1600, 2), Some(0x607A_0020));
    assert_eq!(od.u64(0x1800, 1), Some(0x485));
    assert_eq!(od.u64(0x1800, 2), Some(1));
    assert_eq!(od.u64(0x1A00, 0), Some(2));
    assert_eq!(od.u64(0x1A00, 2), Some(0x6064_0020));
    assert_eq!(od.u64(0x1801, 1), Some(0x685));
    assert_eq!(od.u64(0x1A01, 0), Some(3));
    assert_eq!(od.u64(0x1A01, 2), Some(0x6061_0008));
    // Torque actual last: a drive without 0x6077 gets the two before it.
    assert_eq!(od.u64(0x1A01, 3), Some(0x6077_0010));
    // The predefined PDOs on fcan's data plane are disabled (bit 31).
    assert_eq!(od.u64(0x1401, 1), Some(0x8000_0405));
    assert_eq!(od.u64(0x1402, 1).map(|v| v >> 31), Some(1));
    assert_eq!(od.u64(0x1802, 1).map(|v| v >> 31), Some(1));
    // Heartbeat producer, watchdog (consumer of node 127, 200 ms), 0x6007 = 2, csp, 10 ms.
    assert_eq!(od.u64(0x1017, 0), Some(100));
    assert_eq!(od.u64(0x1016, 1), Some((127 << 16) | 200));
    assert_eq!(od.u64(0x6007, 0), Some(2));
    assert_eq!(od.u64(0x6060, 0), Some(8));
    assert_eq!(od.u64(0x60C2, 1), Some(10));
    // No frame of the driver's or the drive's on fcan's data plane (0x100..=0x3FF).
    for (_, f) in &l.wire {
        let id = fcan_drivers::cia402::wire::std_id(f).unwrap();
        assert!(!(0x100..=0x3FF).contains(&id), "{f:?}");
    }
    assert!(l.sim.syncs() > 5, "SYNC runs");
}

#[test]
fn enable_command_fault_and_silence() {
    let mut l = Loop::new("cia402:id=5,mode=csp,counts=1000", SimCia402::new(5));
    l.run_until(200_000);
    let enable = 0;
    assert_eq!(l.call(enable), Served::Pending);
    l.run_until(300_000);
    assert_eq!(l.completed(enable), vec![true]);
    assert_eq!(l.sim.state(), State::OperationEnabled);
    // 1 rad at 1000 counts/rev: 159 increments.
    let cmd = {
        let mut b = vec![0u8; 16];
        b[..8].copy_from_slice(&1.0f64.to_le_bytes());
        b
    };
    l.drv.on_command(l.now, 1, &cmd, &mut l.io);
    l.run_until(400_000);
    assert_eq!(l.sim.position().round(), 159.0);
    // A fault: EMCY published, error code latched, enable refused.
    l.sim.inject_fault(0x2310);
    l.run_until(450_000);
    assert_eq!(l.drv.error_code(), 0x2310);
    assert_eq!(l.drv.drive_state(), Some(State::Fault));
    assert!(l
        .warnings()
        .iter()
        .any(|w| w.contains("EMCY 0x2310 (continuous overcurrent)")));
    assert_eq!(l.call(enable), Served::Pending);
    assert_eq!(l.completed(enable), vec![true, false]);
    // Fault reset: out of Fault, the code cleared.
    let reset = 3;
    assert_eq!(l.call(reset), Served::Pending);
    l.run_until(600_000);
    assert_eq!(l.completed(reset), vec![true]);
    assert_eq!(l.drv.error_code(), 0);
    assert_eq!(l.sim.state(), State::SwitchOnDisabled);
    // Silence: gone after 3 × 100 ms; back, brought up again.
    l.sim.silence(true);
    l.run_until(1_000_000);
    assert!(!l.drv.present());
    assert!(l.warnings().iter().any(|w| w.contains("stopped answering")));
    l.sim.silence(false);
    l.sim.reboot();
    l.run_until(1_300_000);
    assert!(l.drv.present(), "{:?}", l.warnings());
}

#[test]
fn a_drive_lacking_an_object_fails_the_bring_up_by_name_and_retries() {
    let mut l = Loop::new(
        "cia402:id=5,mode=csp,counts=1000",
        SimCia402::new(5).without(0x6060),
    );
    l.run_until(500_000);
    assert!(!l.drv.present());
    let why = l.drv.last_failure().expect("a failure").to_string();
    assert!(why.contains("modes of operation (0x6060)"), "{why}");
    assert!(why.contains("6060:00 (Modes of operation)"), "{why}");
    assert!(
        why.contains("object does not exist in the object dictionary (0x06020000)"),
        "{why}"
    );
    // Tried again later, not in a loop: a bounded number of SDO requests.
    let sdo = |l: &Loop| {
        l.wire
            .iter()
            .filter(|(_, f)| fcan_drivers::cia402::wire::std_id(f) == Some(0x605))
            .count()
    };
    let first = sdo(&l);
    l.run_until(500_000 + BOOT_RETRY_US + 100_000);
    let second = sdo(&l);
    assert!(
        second > first && second <= 2 * first + 2,
        "{first} then {second}"
    );
    assert!(!l.drv.present());
}

#[test]
fn the_watchdog_stops_the_drive_when_the_master_is_lost() {
    let mut l = Loop::new("cia402:id=5,mode=csv,counts=1000", SimCia402::new(5));
    l.run_until(200_000);
    l.call(0);
    l.run_until(300_000);
    assert_eq!(l.sim.state(), State::OperationEnabled);
    l.drv
        .on_node(l.now, fcan_drivers::NodeEvent::MasterLost, &mut l.io);
    l.run_until(700_000);
    // 0x6007 = 2: disable voltage; and the EMCY 0x8130 the driver heard.
    assert_eq!(l.sim.state(), State::SwitchOnDisabled);
    assert_eq!(l.drv.error_code(), 0x8130);
}

/// A drive that booted before the driver listened (its boot-up missed) and produces no
/// heartbeat: after a second of silence the driver sends NMT reset communication
/// (`000 82 05`), the drive says boot-up, and the bring-up runs.
#[test]
fn a_silent_drive_is_reset_and_brought_up() {
    let mut sim = SimCia402::new(5);
    let mut missed = Vec::new();
    sim.poll(0, &mut missed);
    assert_eq!(missed.len(), 1, "the boot-up nobody heard");
    let mut l = Loop::new("cia402:id=5,counts=1000", sim);
    l.run_until(900_000);
    assert_eq!(l.drv.boot_step(), BootStep::WaitForDrive);
    assert!(
        l.wire.is_empty(),
        "nothing sent before a second: {:?}",
        l.wire
    );
    l.run_until(1_100_000);
    assert!(l.wire.iter().any(|(t, f)| *t == 1_000_000
        && f.id() == fcan_core::frame::CanId::Standard(0)
        && f.data() == [0x82, 0x05]));
    assert!(l.drv.present(), "{:?}", l.warnings());
}

/// With an EDS, an optional object the drive lacks (0x60C2 here) is never written: the
/// step is skipped with a note, and the bring-up goes on.
#[test]
fn an_eds_without_an_optional_object_skips_it() {
    let mut eds = fcan_drivers::cia402::eds::Eds::default_dictionary();
    eds.objects.retain(|(i, _), _| *i != 0x60C2);
    let mut text = String::new();
    for ((i, s), e) in &eds.objects {
        text += &format!(
            "[{i:04X}sub{s:X}]\nParameterName={}\nDataType=0x{:04X}\nAccessType={}\nDefaultValue={}\nPDOMapping={}\n\n",
            e.name,
            e.data_type,
            e.access,
            e.default.clone().unwrap_or_default(),
            u8::from(e.pdo_mappable)
        );
    }
    let path = std::env::temp_dir().join(format!("cia402-{}.eds", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let sim = SimCia402::with_eds(5, &eds);
    let mut l = Loop::new(
        &format!("cia402:id=5,counts=1000,eds={}", path.display()),
        sim,
    );
    l.run_until(200_000);
    let _ = std::fs::remove_file(&path);
    assert!(l.drv.present(), "{:?}", l.warnings());
    assert!(
        l.warnings()
            .iter()
            .any(|w| w.contains("interpolation time period (0x60C2) skipped")),
        "{:?}",
        l.warnings()
    );
    // Not one SDO to 0x60C2 on the wire.
    assert!(!l
        .wire
        .iter()
        .any(|(_, f)| f.id() == fcan_core::frame::CanId::Standard(0x605)
            && f.data().get(1..3) == Some(&[0xC2, 0x60][..])));
}
