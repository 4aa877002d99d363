//! The run loop driving a real node (the io-board example's generated node and
//! application) over fakes of each driver trait: boot → ANNOUNCE, the frame kinds the
//! node chose reaching the port unchanged, a full transmit FIFO (frames refused, offered
//! again, in order, none lost), received frames with and without a driver's timestamp,
//! receive errors, bus-off counted and recovered.
//!
//! Time is virtual: the fake clock jumps to each deadline, and while the loop sleeps the
//! fake bus carries what the controller queued (as many frames as the test lets it).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::Poll;

use embassy_futures::block_on;
use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{caps, AnnounceAck, BusMode, ConfigMessage, SchemaRead};
use fcan_core::segment::Segmenter;
use fcan_embassy::convert::ClassicFrame;
use fcan_embassy::{
    BusState, CanPort, Classic, ClassicPort, Clock, Fd, FdCanPort, Firmware, Next, Received,
    Refused, RunConfig, Runner, RxError, Wake,
};
use fcan_example_io_board::{gen, IoBoard};
use fcan_runtime_nostd::Transmit;

const NODE: u8 = 5;
const BOOT_ID: u32 = 0x0BAD_CAFE;
const SESSION: u32 = 0x5E55_1011;

/// The controller and the wire, shared by the fake port, the fake clock and the test.
#[derive(Default)]
struct Bus {
    now: u32,
    /// Where a sleep ends at the latest: `drive`'s end, so a test's next frames come in
    /// at the time it means.
    horizon: u32,
    /// Frames the controller received, for the port's `read`.
    rx: VecDeque<Result<Received, RxError>>,
    /// The controller's transmit FIFO.
    fifo: VecDeque<Frame>,
    capacity: usize,
    /// Frames the bus carries out of the FIFO per sleep of the loop (`usize::MAX`: all).
    per_sleep: usize,
    /// Frames that went out on the wire, in order.
    wire: Vec<Frame>,
    state: Option<BusState>,
    /// `recover` calls; recovery completes at the next sleep.
    recover_calls: u32,
    recovering: bool,
    /// Every frame any `try_write` was offered, refused or not.
    offered: Vec<Frame>,
}

type Shared = Rc<RefCell<Bus>>;

fn bus(capacity: usize) -> Shared {
    Rc::new(RefCell::new(Bus {
        capacity,
        per_sleep: usize::MAX,
        state: Some(BusState::ErrorActive),
        ..Bus::default()
    }))
}

impl Bus {
    fn write(&mut self, frame: Frame) -> Result<(), Refused> {
        self.offered.push(frame);
        if self.state == Some(BusState::BusOff) || self.fifo.len() >= self.capacity {
            return Err(Refused::Full);
        }
        self.fifo.push_back(frame);
        Ok(())
    }

    async fn read(bus: &Shared) -> Result<Received, RxError> {
        poll_fn(|_| match bus.borrow_mut().rx.pop_front() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        })
        .await
    }

    /// Frames the node sent with this opcode (to master), in wire order.
    fn sent(&self, op: Opcode) -> Vec<Frame> {
        self.wire
            .iter()
            .filter(|f| config_id(f).is_some_and(|id| id.opcode == op))
            .copied()
            .collect()
    }
}

fn config_id(f: &Frame) -> Option<ConfigId> {
    match f.id() {
        CanId::Extended(raw) => ConfigId::from_raw(raw).ok(),
        CanId::Standard(_) => None,
    }
}

struct FakeFd(Shared);

impl FdCanPort for FakeFd {
    fn try_write(&mut self, frame: &Frame) -> Result<(), Refused> {
        self.0.borrow_mut().write(*frame)
    }
    async fn read(&mut self) -> Result<Received, RxError> {
        Bus::read(&self.0).await
    }
    fn bus_state(&mut self) -> Option<BusState> {
        self.0.borrow().state
    }
    fn recover(&mut self) {
        let mut b = self.0.borrow_mut();
        b.recover_calls += 1;
        b.recovering = true;
    }
}

struct FakeClassic(Shared);

impl ClassicPort for FakeClassic {
    fn try_write(&mut self, frame: &ClassicFrame) -> Result<(), Refused> {
        assert!(!frame.frame().is_fd());
        self.0.borrow_mut().write(*frame.frame())
    }
    async fn read(&mut self) -> Result<Received, RxError> {
        Bus::read(&self.0).await
    }
    fn bus_state(&mut self) -> Option<BusState> {
        self.0.borrow().state
    }
    fn recover(&mut self) {
        let mut b = self.0.borrow_mut();
        b.recover_calls += 1;
        b.recovering = true;
    }
}

struct FakeClock(Shared);

impl Clock for FakeClock {
    fn now_us(&mut self) -> u32 {
        self.0.borrow().now
    }
    async fn sleep_until(&mut self, at_us: u32) {
        let mut b = self.0.borrow_mut();
        if (at_us.wrapping_sub(b.now) as i32) > 0 {
            b.now = at_us.min(b.horizon);
        }
        // While the loop slept, the bus carried frames and recovery ran its course.
        if b.recovering {
            b.recovering = false;
            b.state = Some(BusState::ErrorActive);
        }
        if b.state != Some(BusState::BusOff) {
            for _ in 0..b.per_sleep {
                let Some(f) = b.fifo.pop_front() else { break };
                b.wire.push(f);
            }
        }
    }
}

/// The io-board firmware, as the loop drives it.
struct Board(IoBoard);

impl Firmware for Board {
    fn receive(&mut self, frame: &Frame, now_us: u32) {
        self.0.receive(frame, now_us)
    }
    fn poll(&mut self, now_us: u32, tx: &mut impl Transmit) {
        self.0.poll(now_us, tx)
    }
    fn poll_at(&self, now_us: u32) -> Option<u32> {
        self.0.node.poll_at(now_us)
    }
}

fn board<P: CanPort>() -> Board {
    let config = gen::Config {
        node_id: NodeId::new(NODE).unwrap(),
        boot_id: BOOT_ID,
        counts: gen::Counts::MAX,
        controller: P::CONTROLLER,
    };
    Board(IoBoard::new(config).unwrap())
}

/// Turns and waits until the clock reaches `until` (virtual µs).
fn drive<P: CanPort>(r: &mut Runner<P, FakeClock>, fw: &mut Board, bus: &Shared, until: u32) {
    bus.borrow_mut().horizon = until;
    for _ in 0..1_000_000 {
        if bus.borrow().now >= until {
            return;
        }
        let next = r.turn(fw);
        block_on(r.wait(fw, next));
    }
    panic!("the loop did not reach {until} µs");
}

/// A master's message to the node, as Classical frames.
fn to_node(bus: &Shared, op: Opcode, msg: ConfigMessage<'_>, at_us: Option<u32>) {
    let mut buf = [0u8; 64];
    let n = msg.encode_to_node(&mut buf).unwrap();
    let id = ConfigId::single(op, Direction::ToNode, NodeId::new(NODE).unwrap(), 1);
    for frame in Segmenter::new(id, Mtu::Classic, &buf[..n], &[]).unwrap() {
        bus.borrow_mut().rx.push_back(Ok(Received { frame, at_us }));
    }
}

fn ack(bus: &Shared, mode: BusMode) {
    let m = ConfigMessage::AnnounceAck(AnnounceAck {
        boot_id: BOOT_ID,
        session: SESSION,
        mode,
    });
    to_node(bus, Opcode::AnnounceAck, m, None);
}

fn schema_read(bus: &Shared, len: u16) {
    let m = ConfigMessage::SchemaRead(SchemaRead { offset: 0, len });
    to_node(bus, Opcode::Schema, m, None);
}

/// The first ANNOUNCE's payload, its segments put back together.
fn first_announce(b: &Bus) -> Vec<u8> {
    let mut bytes = Vec::new();
    for f in b.sent(Opcode::Discover) {
        let id = config_id(&f).unwrap();
        assert_eq!((id.dir, id.node.get()), (Direction::ToMaster, NODE));
        bytes.extend_from_slice(f.data());
        if id.eot {
            return bytes;
        }
    }
    panic!("no whole ANNOUNCE on the wire");
}

fn announce_caps(b: &Bus) -> u8 {
    let bytes = first_announce(b);
    match ConfigMessage::decode_to_master(Opcode::Discover, &bytes).unwrap() {
        ConfigMessage::Announce(a) => {
            assert_eq!(a.boot_id, BOOT_ID);
            a.caps
        }
        other => panic!("not an ANNOUNCE: {other:?}"),
    }
}

/// Every transfer on the wire has its segments in order: 0, 1, 2, ... with EOT on the
/// last only.
fn assert_segments_in_order(frames: &[Frame]) {
    let mut expect = 0u8;
    for f in frames {
        let id = config_id(f).unwrap();
        assert_eq!(id.segment, expect, "segment order: {frames:?}");
        expect = if id.eot { 0 } else { expect + 1 };
    }
    assert_eq!(expect, 0, "a transfer left unfinished");
}

#[test]
fn fd_node_boots_announces_and_sends_the_frame_kinds_the_master_chose() {
    let bus = bus(3);
    let mut r = Runner::new(
        Fd(FakeFd(bus.clone())),
        FakeClock(bus.clone()),
        RunConfig::default(),
    );
    let mut fw = board::<Fd<FakeFd>>();

    // Boot: silent through the listen window (300 ms + jitter), then ANNOUNCE.
    drive(&mut r, &mut fw, &bus, 250_000);
    assert!(bus.borrow().wire.is_empty(), "silent in the listen window");
    drive(&mut r, &mut fw, &bus, 600_000);
    let c = announce_caps(&bus.borrow());
    assert_eq!(
        c & (caps::FD | caps::BRS),
        caps::FD | caps::BRS,
        "an FD port announces FD + BRS"
    );
    // Not yet acknowledged: everything Classical.
    assert!(bus.borrow().wire.iter().all(|f| !f.is_fd()));

    // The master acknowledges with FD + BRS and reads the schema: FD frames with BRS,
    // whatever their length.
    ack(&bus, BusMode::FdBrs);
    drive(&mut r, &mut fw, &bus, 650_000);
    let before = bus.borrow().wire.len();
    schema_read(&bus, 400);
    drive(&mut r, &mut fw, &bus, 700_000);
    let b = bus.borrow();
    let data = b.sent(Opcode::Schema);
    assert!(data.len() > 3, "{data:?}");
    assert!(data.iter().all(|f| f.is_fd() && f.is_brs()), "{data:?}");
    assert!(
        data.iter().any(|f| f.len() > 8) && data.iter().any(|f| f.len() <= 8) || data.len() > 1
    );
    assert_segments_in_order(&data);
    assert!(b.wire[before..].iter().all(|f| f.is_fd() && f.is_brs()));
    let s = r.stats();
    assert_eq!(s.tx_frames as usize, b.wire.len() + b.fifo.len());
    // A FIFO of three: a burst of SCHEMA_DATA is refused in part and offered again.
    assert_eq!((s.tx_unsupported, s.bus_off), (0, 0));
    assert!(s.rx_frames >= 2 && s.polls > 5, "{s:?}");
}

#[test]
fn fd_without_brs_keeps_frames_fd_at_the_arbitration_rate() {
    let bus = bus(3);
    let mut r = Runner::new(
        Fd(FakeFd(bus.clone())),
        FakeClock(bus.clone()),
        RunConfig::default(),
    );
    let mut fw = board::<Fd<FakeFd>>();
    drive(&mut r, &mut fw, &bus, 600_000);
    ack(&bus, BusMode::Fd);
    schema_read(&bus, 100);
    drive(&mut r, &mut fw, &bus, 700_000);
    let data = bus.borrow().sent(Opcode::Schema);
    assert!(!data.is_empty());
    assert!(data.iter().all(|f| f.is_fd() && !f.is_brs()), "{data:?}");
}

#[test]
fn classic_node_announces_without_fd_and_never_hands_the_port_an_fd_frame() {
    let bus = bus(3);
    let mut r = Runner::new(
        Classic(FakeClassic(bus.clone())),
        FakeClock(bus.clone()),
        RunConfig::default(),
    );
    let mut fw = board::<Classic<FakeClassic>>();
    drive(&mut r, &mut fw, &bus, 600_000);
    assert_eq!(announce_caps(&bus.borrow()) & (caps::FD | caps::BRS), 0);
    // A master that asks for FD anyway: the node refuses, and stays Classical.
    ack(&bus, BusMode::FdBrs);
    schema_read(&bus, 100);
    drive(&mut r, &mut fw, &bus, 800_000);
    let b = bus.borrow();
    assert!(b.offered.iter().all(|f| !f.is_fd()));
    assert_eq!(r.stats().tx_unsupported, 0);
    let data = b.sent(Opcode::Schema);
    assert!(
        data.len() > 3,
        "schema served in Classical frames: {data:?}"
    );
    assert_segments_in_order(&data);
}

#[test]
fn a_classic_port_refuses_fd_frames_and_skips_fd_frames_a_driver_hands_over() {
    let bus = bus(3);
    let mut port = Classic(FakeClassic(bus.clone()));
    let fd = Frame::fd(CanId::Standard(0x123), &[1; 8]).unwrap();
    assert_eq!(port.send(&fd), Err(Refused::Unsupported));
    assert!(bus.borrow().offered.is_empty(), "never reached the driver");
    let classic = Frame::classic(CanId::Standard(0x123), &[1; 8]).unwrap();
    assert_eq!(port.send(&classic), Ok(()));
    bus.borrow_mut().rx.push_back(Ok(Received {
        frame: fd,
        at_us: None,
    }));
    assert_eq!(block_on(port.read()), Err(RxError::Skipped));
}

/// The frames of one scenario: boot, ack (FD + BRS), a long schema read, until 1.5 s.
fn scenario(
    capacity: usize,
    per_sleep: usize,
    stall_until: u32,
) -> (Vec<Frame>, fcan_embassy::Stats) {
    let bus = bus(capacity);
    let mut r = Runner::new(
        Fd(FakeFd(bus.clone())),
        FakeClock(bus.clone()),
        RunConfig::default(),
    );
    let mut fw = board::<Fd<FakeFd>>();
    drive(&mut r, &mut fw, &bus, 600_000);
    ack(&bus, BusMode::FdBrs);
    schema_read(&bus, 1000);
    // The bus stalls (FIFO full, nothing leaves), then carries `per_sleep` frames a sleep.
    bus.borrow_mut().per_sleep = 0;
    drive(&mut r, &mut fw, &bus, stall_until);
    bus.borrow_mut().per_sleep = per_sleep;
    drive(&mut r, &mut fw, &bus, 1_500_000);
    let b = bus.borrow();
    assert!(b.fifo.is_empty() || per_sleep == 0);
    (b.wire.clone(), r.stats())
}

#[test]
fn refused_frames_are_offered_again_in_order_and_none_is_lost() {
    let (free, s_free) = scenario(64, usize::MAX, 600_000);
    assert_eq!(s_free.tx_full, 0);
    // A FIFO of one, stalled for 50 ms, then one frame per sleep of the loop.
    let (tight, s_tight) = scenario(1, 1, 650_000);
    assert!(s_tight.tx_full > 10, "{s_tight:?}");
    let schema = |w: &[Frame]| -> Vec<Frame> {
        w.iter()
            .filter(|f| config_id(f).is_some_and(|id| id.opcode == Opcode::Schema))
            .copied()
            .collect()
    };
    let (a, b) = (schema(&free), schema(&tight));
    assert!(a.len() > 10, "{a:?}");
    assert_eq!(a, b, "the same SCHEMA_DATA frames, in the same order");
    assert_segments_in_order(&b);
    // Every frame the node had for the master went out (the heartbeats' times differ).
    let config = |w: &[Frame]| w.iter().filter(|f| config_id(f).is_some()).count();
    assert!(
        config(&tight) + 2 >= config(&free),
        "{} vs {}",
        config(&tight),
        config(&free)
    );
    assert_eq!(s_tight.tx_frames as usize, tight.len());
}

#[test]
fn a_refusal_retries_after_tx_retry_us_not_at_once() {
    let bus = bus(0);
    let config = RunConfig {
        tx_retry_us: 250,
        ..RunConfig::default()
    };
    let mut r = Runner::new(Fd(FakeFd(bus.clone())), FakeClock(bus.clone()), config);
    let mut fw = board::<Fd<FakeFd>>();
    drive(&mut r, &mut fw, &bus, 500_000);
    // The ANNOUNCE is refused: the next turn is 250 µs on, not "again".
    bus.borrow_mut().horizon = u32::MAX;
    let now = bus.borrow().now;
    let next = r.turn(&mut fw);
    assert_eq!(next, Next::Sleep(now + 250));
    assert!(r.stats().tx_full > 0);
    assert_eq!(block_on(r.wait(&mut fw, next)), Wake::Timer);
    assert_eq!(bus.borrow().now, now + 250);
}

#[test]
fn received_frames_reach_the_node_with_their_time_and_errors_are_counted() {
    let bus = bus(3);
    let mut r = Runner::new(
        Fd(FakeFd(bus.clone())),
        FakeClock(bus.clone()),
        RunConfig::default(),
    );
    let mut fw = board::<Fd<FakeFd>>();
    drive(&mut r, &mut fw, &bus, 600_000);
    {
        let mut b = bus.borrow_mut();
        b.rx.push_back(Err(RxError::Bus));
        b.rx.push_back(Err(RxError::Overrun));
        b.rx.push_back(Err(RxError::Skipped));
    }
    // Stamped by the driver (in the past) and by the loop.
    let m = ConfigMessage::SchemaRead(SchemaRead { offset: 0, len: 4 });
    to_node(&bus, Opcode::Schema, m, Some(599_000));
    schema_read(&bus, 4);
    let next = r.turn(&mut fw);
    assert_eq!(block_on(r.wait(&mut fw, next)), Wake::Frame);
    let s = r.stats();
    assert_eq!(
        (s.rx_bus_errors, s.rx_overruns, s.rx_skipped, s.rx_frames),
        (1, 1, 1, 2)
    );
    drive(&mut r, &mut fw, &bus, 610_000);
    let answers = bus.borrow().sent(Opcode::Schema);
    assert_eq!(
        answers.iter().filter(|f| config_id(f).unwrap().eot).count(),
        2,
        "both reads answered"
    );
    assert_eq!(fw.0.node.counters().rx_handled, 2);
}

#[test]
fn a_burst_is_drained_up_to_rx_burst_frames_per_wake() {
    let bus = bus(3);
    let config = RunConfig {
        rx_burst: 4,
        ..RunConfig::default()
    };
    let mut r = Runner::new(Fd(FakeFd(bus.clone())), FakeClock(bus.clone()), config);
    let mut fw = board::<Fd<FakeFd>>();
    for i in 0..10u16 {
        let frame = Frame::classic(CanId::Standard(0x200 + i), &[0; 8]).unwrap();
        bus.borrow_mut()
            .rx
            .push_back(Ok(Received { frame, at_us: None }));
    }
    let next = r.turn(&mut fw);
    block_on(r.wait(&mut fw, next));
    assert_eq!(r.stats().rx_frames, 5, "the frame that woke it and 4 more");
    assert_eq!(bus.borrow().rx.len(), 5);
}

#[test]
fn bus_off_is_counted_recovery_started_once_and_the_frames_go_out_after() {
    let bus = bus(3);
    let mut r = Runner::new(
        Fd(FakeFd(bus.clone())),
        FakeClock(bus.clone()),
        RunConfig::default(),
    );
    let mut fw = board::<Fd<FakeFd>>();
    // Bus-off during boot: the ANNOUNCE is refused, recovery starts once, and when the
    // controller is back the ANNOUNCE goes out.
    bus.borrow_mut().state = Some(BusState::BusOff);
    drive(&mut r, &mut fw, &bus, 200_000);
    let s = r.stats();
    assert_eq!((s.bus_off, bus.borrow().recover_calls), (1, 1));
    // The fake completed recovery at the next sleep; the next turn sees it.
    drive(&mut r, &mut fw, &bus, 600_000);
    let s = r.stats();
    assert_eq!((s.bus_off, s.recovered), (1, 1), "{s:?}");
    assert!(!bus.borrow().sent(Opcode::Discover).is_empty());

    // Bus-off again, with frames waiting: counted a second time; a receive error saying
    // bus-off at the same time is not counted twice.
    bus.borrow_mut().state = Some(BusState::BusOff);
    bus.borrow_mut().rx.push_back(Err(RxError::BusOff));
    let next = r.turn(&mut fw);
    block_on(r.wait(&mut fw, next));
    let s = r.stats();
    assert_eq!((s.bus_off, bus.borrow().recover_calls), (2, 2), "{s:?}");
    drive(&mut r, &mut fw, &bus, 2_000_000);
    let s = r.stats();
    assert_eq!((s.bus_off, s.recovered), (2, 2), "{s:?}");
    assert_segments_in_order(&bus.borrow().sent(Opcode::Discover));
}

#[test]
fn a_port_that_cannot_tell_its_bus_state_counts_no_bus_off() {
    let bus = bus(3);
    bus.borrow_mut().state = None;
    let mut r = Runner::new(
        Fd(FakeFd(bus.clone())),
        FakeClock(bus.clone()),
        RunConfig::default(),
    );
    let mut fw = board::<Fd<FakeFd>>();
    drive(&mut r, &mut fw, &bus, 600_000);
    assert_eq!((r.stats().bus_off, bus.borrow().recover_calls), (0, 0));
    assert!(!bus.borrow().wire.is_empty());
}
