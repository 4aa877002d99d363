//! Shared helpers of the end-to-end tests: a [`World`] (a simulated bus, example
//! firmwares running on it, a master), bounded waits on tokio's clock, a raw peer that
//! puts hand-made configuration frames on the bus, small [`Value`] accessors, and the
//! faces' `tracing` events captured per test ([`capture`]).
//!
//! Every test on the simulated bus runs on tokio's paused clock
//! (`#[tokio::test(start_paused = true)]`): the bus, the node main loops and the master
//! all wait on tokio timers, so virtual time jumps from one event to the next, runs are
//! deterministic for a seed, and a test of several virtual seconds takes a fraction of a
//! second. The exceptions run on the real clock because something real is in the loop:
//! Zenoh over loopback TCP (`remote.rs`, whose header says why a paused clock would
//! break it, and the `remote_bench.rs` measurements), real processes and kernel
//! SocketCAN (the `*_vm.rs` tests).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::{CommandResult, ConfigMessage, NodeState};
use fcan_core::segment::Segmenter;
use fcan_example_io_board::IoBoard;
use fcan_example_motor_driver::MotorDriver;
use fcan_examples::{io_board, motor_driver, run_node_shared, SharedNode};
use fcan_master::cache::MemoryStore;
use fcan_master::transport::sim::{SimBus, SimConfig, SimEndpoint};
use fcan_master::transport::Transport;
use fcan_master::value::Value;
use fcan_master::{Master, MasterOptions, NodeInfo};
use tokio::time::Instant;

pub use fcan_core;
pub use fcan_master;

pub mod c_board;
pub mod capture;
pub mod vm;

/// Runs an `async fn(Mtu)` test once on CAN FD and once on Classical CAN, each on a
/// paused tokio clock: `both_links!(name);` makes `name::fd` and `name::classic`.
#[macro_export]
macro_rules! both_links {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(start_paused = true)]
            async fn fd() {
                super::$name($crate::fcan_core::frame::Mtu::Fd).await
            }
            #[tokio::test(start_paused = true)]
            async fn classic() {
                super::$name($crate::fcan_core::frame::Mtu::Classic).await
            }
        }
    )+};
}

/// Node ids of [`World::standard`].
pub const MD1: u8 = 1;
/// The second motor driver (4 motors wired).
pub const MD2: u8 = 2;
/// The I/O board.
pub const IO3: u8 = 3;

/// A simulated bus with example boards and (usually) a master.
pub struct World {
    /// The bus.
    pub bus: SimBus,
    /// Its frame kind (every endpoint and firmware uses it).
    pub mtu: Mtu,
    /// The blob cache, shared by every master this world starts (warm restarts).
    pub store: Arc<MemoryStore>,
    /// Motor drivers by node id.
    pub motors: BTreeMap<u8, SharedNode<MotorDriver>>,
    /// Motors wired per motor driver.
    motor_counts: BTreeMap<u8, u8>,
    /// I/O boards by node id.
    pub ios: BTreeMap<u8, SharedNode<IoBoard>>,
}

impl World {
    /// An empty bus of the given kind. Seeds the thread's RNG (boot ids, session ids), so
    /// a test run is reproducible.
    pub fn new(mtu: Mtu) -> World {
        fastrand::seed(0x0fca_2024 ^ mtu.payload() as u64);
        World {
            bus: SimBus::new(SimConfig::default()),
            mtu,
            store: Arc::new(MemoryStore::new()),
            motors: BTreeMap::new(),
            motor_counts: BTreeMap::new(),
            ios: BTreeMap::new(),
        }
    }

    /// Whether the link is CAN FD (and so the firmwares are FD-capable).
    pub fn fd(&self) -> bool {
        self.mtu == Mtu::Fd
    }

    /// A new endpoint on the bus.
    pub fn endpoint(&self) -> SimEndpoint {
        self.bus.endpoint(self.mtu)
    }

    /// Boots a motor driver with `motors` motors wired.
    pub fn add_motor(&mut self, id: u8, motors: u8) {
        let ep = self.endpoint();
        self.add_motor_on(ep, id, motors);
    }

    /// Boots a motor driver on a given transport (e.g. behind a fault injector).
    pub fn add_motor_on<T: Transport + 'static>(&mut self, t: T, id: u8, motors: u8) {
        let node = run_node_shared(t, motor_driver(id, motors, self.fd()));
        self.motors.insert(id, node);
        self.motor_counts.insert(id, motors);
    }

    /// Boots an I/O board.
    pub fn add_io(&mut self, id: u8) {
        let ep = self.endpoint();
        self.add_io_on(ep, id);
    }

    /// Boots an I/O board on a given transport.
    pub fn add_io_on<T: Transport + 'static>(&mut self, t: T, id: u8) {
        let node = run_node_shared(t, io_board(id, self.fd()));
        self.ios.insert(id, node);
    }

    /// A motor driver.
    pub fn motor(&self, id: u8) -> &SharedNode<MotorDriver> {
        &self.motors[&id]
    }

    /// An I/O board.
    pub fn io(&self, id: u8) -> &SharedNode<IoBoard> {
        &self.ios[&id]
    }

    /// Power-cycles a motor driver: its task stops (it leaves the bus), and a new
    /// firmware with the same node id and motors, and a new boot id, boots on a new
    /// endpoint. Returns the new boot id.
    pub fn reboot_motor(&mut self, id: u8) -> u32 {
        let old = self.motors.remove(&id).expect("no such motor driver");
        old.stop();
        let old_boot = old.with(|f| f.node.boot_id());
        let motors = self.motor_counts[&id];
        loop {
            self.add_motor(id, motors);
            let new_boot = self.motor(id).with(|f| f.node.boot_id());
            if new_boot != old_boot {
                return new_boot;
            }
        }
    }

    /// Starts a master on a new endpoint, with this world's shared blob cache.
    pub async fn start_master(&self) -> Master {
        self.start_master_on(self.endpoint()).await
    }

    /// Starts a master on a given transport with this world's shared blob cache.
    pub async fn start_master_on<T: Transport + 'static>(&self, t: T) -> Master {
        Master::start(
            t,
            MasterOptions {
                store: Box::new(self.store.clone()),
                ..Default::default()
            },
        )
        .await
        .expect("master starts")
    }

    /// motor_driver1 (8 motors), motor_driver2 (4 motors), io_board3, and a master that
    /// has them all running.
    pub async fn standard(mtu: Mtu) -> (World, Master) {
        let mut w = World::new(mtu);
        w.add_motor(MD1, 8);
        w.add_motor(MD2, 4);
        w.add_io(IO3);
        let m = w.start_master().await;
        wait_running(&m, &[MD1, MD2, IO3], Duration::from_secs(3)).await;
        (w, m)
    }

    /// The node state of a board, whichever kind.
    pub fn node_state(&self, id: u8) -> NodeState {
        if let Some(m) = self.motors.get(&id) {
            return m.with(|f| f.node.state());
        }
        self.io(id).with(|f| f.node.state())
    }
}

/// A transport that stamps each frame with the instant the master's engine took it
/// (not the simulated bus's end of frame, which a waiting receiver sees up to 1 ms late,
/// see `fcan_transport::sim`): the latency then measured is the daemon's own, as on
/// SocketCAN, where the frame is stamped when `recvmmsg` returns it. The latency
/// benchmarks measure from it (`remote_bench`, fcan-ros2-bridge's `bench`).
pub struct TakenAt<T>(pub T);

impl<T: fcan_transport::Transport> fcan_transport::Transport for TakenAt<T> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn mtu(&self) -> Mtu {
        self.0.mtu()
    }
    async fn send(
        &mut self,
        frame: &fcan_core::frame::Frame,
    ) -> Result<(), fcan_transport::TransportError> {
        self.0.send(frame).await
    }
    async fn recv(&mut self) -> Result<fcan_transport::Received, fcan_transport::TransportError> {
        let mut r = self.0.recv().await?;
        r.at = fcan_transport::now();
        Ok(r)
    }
}

/// Polls `check` every millisecond of virtual time until it returns `Some`, for at most
/// `bound`; panics naming `what` otherwise. Returns the value and the time it took.
pub async fn eventually<T, F, Fut>(what: &str, bound: Duration, mut check: F) -> (T, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return (v, start.elapsed());
        }
        if start.elapsed() > bound {
            panic!("{what}: not reached within {bound:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until every node in `ids` is `running` on the master; returns the time taken.
/// On timeout, panics with the master's view of every node.
pub async fn wait_running(m: &Master, ids: &[u8], bound: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let nodes = m.nodes().await.expect("master alive");
        if ids.iter().all(|id| {
            nodes
                .iter()
                .any(|n| n.id.get() == *id && n.phase == fcan_master::Phase::Running)
        }) {
            return start.elapsed();
        }
        if start.elapsed() > bound {
            let view: Vec<String> = nodes
                .iter()
                .map(|n| {
                    format!(
                        "{}: {} ({:?}, boot {:#x})",
                        n.id, n.phase, n.state, n.boot_id
                    )
                })
                .collect();
            panic!("nodes {ids:?} not all running within {bound:?}; master sees {view:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The master's view of one node.
pub async fn node_info(m: &Master, id: u8) -> Option<NodeInfo> {
    m.nodes().await.ok()?.into_iter().find(|n| n.id.get() == id)
}

/// A field of a struct value.
pub fn field<'a>(v: &'a Value, name: &str) -> &'a Value {
    match v {
        Value::Struct(fs) => fs
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no field `{name}` in {v}")),
        other => panic!("not a struct: {other}"),
    }
}

/// A number as f64.
pub fn num(v: &Value) -> f64 {
    match v {
        Value::Float(x) => *x,
        Value::Int(i) => *i as f64,
        Value::UInt(u) => *u as f64,
        Value::Bool(b) => *b as u8 as f64,
        other => panic!("not a number: {other}"),
    }
}

/// Parses a value in the CLI's syntax.
pub fn val(text: &str) -> Value {
    fcan_cli::parse_value(text).unwrap_or_else(|e| panic!("bad test value `{text}`: {e}"))
}

/// A raw participant on the bus: sends hand-made master→node configuration messages
/// (bypassing the master's checks) and reads the nodes' answers.
pub struct RawPeer {
    ep: SimEndpoint,
    mtu: Mtu,
}

impl RawPeer {
    /// Attaches to the world's bus.
    pub fn new(w: &World) -> RawPeer {
        RawPeer {
            ep: w.endpoint(),
            mtu: w.mtu,
        }
    }

    /// Sends `msg` to `node` under `transfer`, segmented for the link (FD frames on an FD
    /// link, so it reaches a node in an FD mode).
    pub async fn send(&mut self, node: u8, transfer: u8, msg: &ConfigMessage<'_>) {
        let mut buf = [0u8; 1024];
        let n = msg.encode(&mut buf).expect("encodes");
        let id = ConfigId::single(
            msg.opcode(),
            Direction::ToNode,
            NodeId::new(node).expect("node id"),
            transfer,
        );
        for f in Segmenter::new(id, self.mtu, &buf[..n], &[]).expect("fits") {
            self.ep.send(&f).await.expect("sent");
        }
    }

    /// Waits (at most `bound`) for the RESULT `node` sends under `transfer`.
    pub async fn result(&mut self, node: u8, transfer: u8, bound: Duration) -> CommandResult {
        let end = Instant::now() + bound;
        loop {
            let rx = tokio::time::timeout_at(end, self.ep.recv())
                .await
                .unwrap_or_else(|_| panic!("no RESULT from node {node} within {bound:?}"));
            let Ok(rx) = rx else { continue };
            if let Some(r) = as_result(&rx.frame, node, transfer) {
                return r;
            }
        }
    }
}

/// The RESULT in `f`, if it is one from `node` under `transfer`.
fn as_result(f: &Frame, node: u8, transfer: u8) -> Option<CommandResult> {
    let CanId::Extended(_) = f.id() else {
        return None;
    };
    let id = ConfigId::from_can_id(f.id()).ok()?;
    if id.opcode != Opcode::Result
        || id.dir != Direction::ToMaster
        || id.node.get() != node
        || id.transfer != transfer
    {
        return None;
    }
    match ConfigMessage::decode(Opcode::Result, Direction::ToMaster, f.data()).ok()? {
        ConfigMessage::Result(r) => Some(r),
        _ => None,
    }
}

/// Frames delivered on the bus so far.
pub fn frames_on_bus(bus: &SimBus) -> u64 {
    bus.totals().frames
}

/// A loopback TCP port free a moment ago (the kernel's choice): for a Zenoh endpoint
/// of a test, which stays on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free loopback port")
        .local_addr()
        .expect("a bound address")
        .port()
}

/// The ancestor's schemas (`shared/compat/fibril`), read in place: `$FCAN_FIBRIL_DIR`,
/// or `../shared/compat/fibril` beside the workspace. `None` when neither exists (a
/// test then says it skipped), unless `FCAN_REQUIRE_FIBRIL` is set (CI): then it panics.
pub fn fibril_dir() -> Option<std::path::PathBuf> {
    let d = std::env::var_os("FCAN_FIBRIL_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/compat/fibril"),
        std::path::PathBuf::from,
    );
    if !d.is_dir() && std::env::var_os("FCAN_REQUIRE_FIBRIL").is_some() {
        // CI sets it: there the ancestor's schemas are beside the workspace, and a check
        // of them that skips would pass having checked nothing.
        panic!(
            "FCAN_REQUIRE_FIBRIL is set but {} is not a directory: the ancestor schemas must be checked, not skipped",
            d.display()
        );
    }
    d.is_dir().then_some(d)
}

/// The three ancestor nodes as `shared/compat/fibril/README.md` lists them: a short
/// name and the files each is built from, in `dir`.
pub fn fibril_nodes(dir: &std::path::Path) -> Vec<(&'static str, Vec<std::path::PathBuf>)> {
    let node = |name, files: &[&str]| (name, files.iter().map(|f| dir.join(f)).collect());
    vec![
        node(
            "md",
            &[
                "md.node.yaml",
                "md.instances.yaml",
                "md_motor.type.yaml",
                "adc_port.type.yaml",
                "robstride_motor.type.yaml",
                "solenoid.type.yaml",
            ],
        ),
        node(
            "robstride",
            &[
                "robstride.node.yaml",
                "robstride.instances.yaml",
                "robstride_motor.type.yaml",
                "solenoid.type.yaml",
            ],
        ),
        node(
            "air",
            &[
                "air.node.yaml",
                "solenoid.type.yaml",
                "md_motor.type.yaml",
                "robstride_motor.type.yaml",
                "adc_port.type.yaml",
            ],
        ),
    ]
}
