//! The async master: one task owns the bus and the [`Engine`]; [`Master`] is a cheap
//! handle to it for discovery, topics, services and parameters by name.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use fcan_master::{value::Value, Master, MasterOptions};
//! let bus = fcan_master::transport::open("socketcan:can0", None)?;
//! let master = Master::start(bus, MasterOptions::default()).await?;
//! master.wait_for_nodes(1, std::time::Duration::from_secs(3)).await?;
//! let mut sub = master.subscribe("/md3/motor0/feedback").await?;
//! if let Some(sample) = sub.recv().await {
//!     println!("{} = {}", sample.name, sample.value);
//! }
//! master.param_set("md3.motor0.velocity.kp", Value::Float(0.5)).await?;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fcan_core::frame::Frame;
use fcan_core::id::NodeId;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::api::{
    BusFrame, MasterApi, MasterError, MasterEvent, NodeInfo, Sample, SchemaSource, Status,
    FRAMES_BACKLOG,
};
use crate::cache::{BlobStore, MemoryStore, Offloaded};
use crate::dispatch::SubscriberSink;
use crate::engine::{CallError, Engine, EngineConfig, Event, NodeSchema, Phase};
use crate::planner::Plan;
use crate::registry::{ParamInfo, Registry, ServiceInfo, TopicInfo};
use crate::transport::sim::BitRates;
use crate::transport::{Transport, TransportError};
use crate::value::{pack_message, pack_param, unpack_message, unpack_param, Value};

/// A change to the engine settings, applied before the master starts.
pub type Tune = Box<dyn FnOnce(&mut EngineConfig) + Send>;

/// How to run a master.
pub struct MasterOptions {
    /// Blob cache (default: in memory; the CLI uses the disk cache).
    pub store: Box<dyn BlobStore>,
    /// How long to listen for another master before transmitting.
    pub listen_for_other_master: Duration,
    /// The bus's bit rates, for the bus load the master reports and the pace at which
    /// it hands data frames to the link (SocketCAN does not tell; default 1 Mbit/s
    /// arbitration, 5 Mbit/s data).
    pub rates: BitRates,
    /// Override engine settings (the session id and MTU are filled in by `start`).
    pub tune: Option<Tune>,
}

impl Default for MasterOptions {
    fn default() -> Self {
        MasterOptions {
            store: Box::new(MemoryStore::new()),
            listen_for_other_master: Duration::from_millis(300),
            tune: None,
            rates: BitRates::default(),
        }
    }
}

enum Command {
    Registry(oneshot::Sender<Registry>),
    Status(oneshot::Sender<Status>),
    Schema(
        NodeId,
        oneshot::Sender<Option<Arc<crate::engine::NodeSchema>>>,
    ),
    Plan(NodeId, oneshot::Sender<Option<crate::planner::Plan>>),
    Subscribe(
        String,
        mpsc::UnboundedSender<Sample>,
        oneshot::Sender<Result<(), MasterError>>,
    ),
    Publish(
        Vec<(String, Value)>,
        oneshot::Sender<Result<(), MasterError>>,
    ),
    Call(String, Value, oneshot::Sender<Result<Value, MasterError>>),
    ParamGet(String, oneshot::Sender<Result<Value, MasterError>>),
    /// A parameter write; `true`: answered with the value read back from the node.
    ParamSet(
        String,
        Value,
        bool,
        oneshot::Sender<Result<Value, MasterError>>,
    ),
    Reprovision(NodeId, oneshot::Sender<Result<(), MasterError>>),
    AbortUpdate(NodeId, oneshot::Sender<Result<(), MasterError>>),
    Update(
        NodeId,
        Box<crate::update::UpdateImage>,
        crate::update::UpdateConfig,
        oneshot::Sender<Result<crate::engine::UpdateReport, MasterError>>,
    ),
    Discover,
    Leave(oneshot::Sender<usize>),
}

/// A handle to a running master. Clone it freely; the master stops when the last handle
/// is dropped.
#[derive(Clone)]
pub struct Master {
    cmd: mpsc::Sender<Command>,
    events: broadcast::Sender<MasterEvent>,
    frames: broadcast::Sender<BusFrame>,
}

impl Master {
    /// Starts a master on `transport`: listens for another master first (and refuses to
    /// start if one is heard), then discovers the nodes.
    pub async fn start<T: Transport + 'static>(
        mut transport: T,
        opts: MasterOptions,
    ) -> Result<Master, MasterError> {
        let deadline = tokio::time::Instant::now() + opts.listen_for_other_master;
        let session = loop {
            let s = fastrand::u32(..);
            if s != 0 {
                break s;
            }
        };
        let mut cfg = EngineConfig::new(session, transport.mtu());
        // Data is paced by the bus time these rates give (engine `admission.rs`).
        cfg.rates = opts.rates;
        if let Some(tune) = opts.tune {
            tune(&mut cfg);
        }
        // A store that does I/O (the disk cache) runs on a thread of its own: the engine
        // only asks and is woken when the answer is there, so no disk stalls the bus.
        let (store, cache_wake) = if opts.store.blocks() {
            let (store, wake) = Offloaded::new(opts.store);
            (Box::new(store) as Box<dyn BlobStore>, Some(wake))
        } else {
            (opts.store, None)
        };
        let mut engine = Engine::new(cfg, store);
        let base = tokio::time::Instant::now();
        // One master per bus: listen before saying anything.
        loop {
            tokio::select! {
                r = transport.recv() => {
                    // Only another master's heartbeat matters while listening. The engine
                    // must not act on anything else yet (a node announcing now would be
                    // acked before we know the bus is ours, and the events lost): the
                    // DISCOVER sent at start makes every node announce again.
                    if let Some(rx) = r.ok().filter(|rx| crate::engine::is_master_heartbeat(&rx.frame)) {
                        engine.handle_frame(&rx.frame, micros(base, rx.at), &mut crate::engine::NoSink);
                        while let Some(e) = engine.pop_event() {
                            if let Event::OtherMaster { session } = e {
                                return Err(MasterError::OtherMaster { session });
                            }
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        let (cmd, cmd_rx) = mpsc::channel(64);
        let (events, _) = broadcast::channel(1024);
        let (frames, _) = broadcast::channel(FRAMES_BACKLOG);
        let task = Task {
            engine,
            transport,
            base,
            cmd_rx,
            events: events.clone(),
            frames: frames.clone(),
            sink: SubscriberSink::default(),
            waiting: BTreeMap::new(),
            registry: Registry::default(),
            registry_dirty: true,
            cache_wake,
            leaving: None,
        };
        tokio::spawn(task.run());
        let m = Master {
            cmd,
            events,
            frames,
        };
        m.send(Command::Discover).await?;
        Ok(m)
    }

    async fn send(&self, c: Command) -> Result<(), MasterError> {
        self.cmd.send(c).await.map_err(|_| MasterError::Stopped)
    }

    async fn ask<R>(
        &self,
        make: impl FnOnce(oneshot::Sender<R>) -> Command,
    ) -> Result<R, MasterError> {
        let (tx, rx) = oneshot::channel();
        self.send(make(tx)).await?;
        rx.await.map_err(|_| MasterError::Stopped)
    }

    /// Master events (node online/offline/rebooted, collisions, updates, parameter
    /// changes …) from now on; the engine's request completions are not among them.
    pub fn events(&self) -> broadcast::Receiver<MasterEvent> {
        self.events.subscribe()
    }

    /// Every frame on the bus from now on, received and sent, for recorders. Costs the
    /// master nothing while no receiver exists; a receiver more than
    /// [`FRAMES_BACKLOG`] frames behind loses the oldest and is told how many.
    pub fn frames(&self) -> broadcast::Receiver<BusFrame> {
        self.frames.subscribe()
    }

    /// Leaves the bus on purpose, and stops this master: every running node is told
    /// (FRAME_DEFINE index 0 takes it back to PROVISIONED, its data stopped at once and
    /// its master-lost watchdog off), so the nodes' error summaries count no lost master
    /// — what a one-shot `fcan` command and a daemon shutting down do (docs/protocol.md
    /// §5.4). Returns, once each node answered or its retries ran out (a few hundred ms at
    /// most), how many nodes were asked; every handle of this master fails from then on.
    /// A master that dies without leaving is noticed by the nodes' watchdogs, as before.
    pub async fn leave(&self) -> Result<usize, MasterError> {
        self.ask(Command::Leave).await
    }

    /// Asks every node to announce again.
    pub async fn discover(&self) -> Result<(), MasterError> {
        self.send(Command::Discover).await
    }

    /// What the master offers now.
    pub async fn registry(&self) -> Result<Registry, MasterError> {
        self.ask(Command::Registry).await
    }

    /// Nodes, counters and rates.
    pub async fn status(&self) -> Result<Status, MasterError> {
        self.ask(Command::Status).await
    }

    /// The nodes known.
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, MasterError> {
        Ok(self.status().await?.nodes)
    }

    /// A node's decoded schema.
    pub async fn schema(
        &self,
        node: NodeId,
    ) -> Result<Option<Arc<crate::engine::NodeSchema>>, MasterError> {
        self.ask(|tx| Command::Schema(node, tx)).await
    }

    /// A node's frame plan, once planned ([`MasterApi::plan`]).
    pub async fn plan(&self, node: NodeId) -> Result<Option<crate::planner::Plan>, MasterError> {
        self.ask(|tx| Command::Plan(node, tx)).await
    }

    /// Waits until at least `n` nodes are running ([`MasterApi::wait_for_nodes`]).
    pub async fn wait_for_nodes(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<NodeInfo>, MasterError> {
        <Self as MasterApi>::wait_for_nodes(self, n, timeout).await
    }

    /// Subscribes to a topic: a stream of its values with arrival times.
    pub async fn subscribe(
        &self,
        topic: &str,
    ) -> Result<mpsc::UnboundedReceiver<Sample>, MasterError> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribe_into(topic, tx).await?;
        Ok(rx)
    }

    /// Subscribes to a topic into a channel of the caller's: several topics can share
    /// one channel ([`Sample::name`] tells them apart), so one receiving task wakes once
    /// for all the samples of a frame, not once per topic (the remote server forwards a
    /// node's topics this way). The subscription ends when the receiver is dropped.
    ///
    /// ```no_run
    /// # async fn demo(master: fcan_master::Master) -> Result<(), fcan_master::MasterError> {
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// master.subscribe_into("/motor_driver1/motor0/feedback", tx.clone()).await?;
    /// master.subscribe_into("/motor_driver1/motor1/feedback", tx).await?;
    /// while let Some(s) = rx.recv().await {
    ///     println!("{} {:?}", s.name, s.value);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn subscribe_into(
        &self,
        topic: &str,
        tx: mpsc::UnboundedSender<Sample>,
    ) -> Result<(), MasterError> {
        self.ask(|r| Command::Subscribe(topic.to_string(), tx, r))
            .await?
    }

    /// Publishes an m2s topic.
    pub async fn publish(&self, topic: &str, value: Value) -> Result<(), MasterError> {
        self.ask(|r| Command::Publish(vec![(topic.to_string(), value)], r))
            .await?
    }

    /// Publishes several m2s topics at once: all are checked before any is sent, and a
    /// frame that carries several of them (the targets of eight motors packed into one
    /// CAN FD frame) goes out once, not once per topic.
    pub async fn publish_many(&self, items: Vec<(String, Value)>) -> Result<(), MasterError> {
        self.ask(|r| Command::Publish(items, r)).await?
    }

    /// Calls a service and waits for its response (ACCEPTED restarts the timeout).
    pub async fn call(&self, service: &str, request: Value) -> Result<Value, MasterError> {
        self.ask(|r| Command::Call(service.to_string(), request, r))
            .await?
    }

    /// Reads a parameter from the node.
    pub async fn param_get(&self, param: &str) -> Result<Value, MasterError> {
        self.ask(|r| Command::ParamGet(param.to_string(), r))
            .await?
    }

    /// Provisions a running (or failed) node again: a new plan, its FRAME_DEFINEs, the
    /// parameters set so far, START (the ancestor's `ReprovisionNode`). Returns once it
    /// has begun; the node's phase is `provisioning` until it runs again (an
    /// [`MasterEvent::Online`] follows).
    pub async fn reprovision(&self, node: NodeId) -> Result<(), MasterError> {
        self.ask(|r| Command::Reprovision(node, r)).await?
    }

    /// Writes a firmware image into `node` over the bus (`docs/protocol.md` §3.14) and
    /// returns once the node runs it and is provisioned again: the report says which of
    /// the parameters set so far the new schema still has (restored) and which it does
    /// not (dropped). [`MasterEvent::UpdateProgress`] on [`Master::events`] tells how far it
    /// is. Checked before anything is sent: the node takes updates, the image is for its
    /// schema name, no other update of it runs.
    pub async fn update(
        &self,
        node: NodeId,
        image: crate::update::UpdateImage,
        cfg: crate::update::UpdateConfig,
    ) -> Result<crate::engine::UpdateReport, MasterError> {
        self.ask(|r| Command::Update(node, Box::new(image), cfg, r))
            .await?
    }

    /// Tells `node` to drop the update transfer it holds (ABORT) and ends this master's
    /// update of it, if one runs ([`crate::engine::UpdateError::Aborted`] to whoever
    /// waits for it). The node keeps running the firmware it has.
    pub async fn abort_update(&self, node: NodeId) -> Result<(), MasterError> {
        self.ask(|r| Command::AbortUpdate(node, r)).await?
    }

    /// Writes a parameter (checked here first; the node checks again). The master
    /// restores it after every reboot of the node. Returns once the node acknowledged
    /// the write; [`param_set_read_back`](Master::param_set_read_back) also says what
    /// the node holds then.
    pub async fn param_set(&self, param: &str, value: Value) -> Result<(), MasterError> {
        self.ask(|r| Command::ParamSet(param.to_string(), value, false, r))
            .await?
            .map(drop)
    }

    /// Writes a parameter as [`param_set`](Master::param_set) does, then reads it back
    /// from the node (PARAM_GET, one more round trip on the configuration plane, sent as
    /// soon as the write is acknowledged) and returns the value the node holds: what was
    /// given as its type stores it (`1e-50` for an `f32` is `0`), or what the node made
    /// of it. An error after an acknowledged write (the node went away before answering
    /// the read) says the value is not known, not that the write failed.
    pub async fn param_set_read_back(
        &self,
        param: &str,
        value: Value,
    ) -> Result<Value, MasterError> {
        self.ask(|r| Command::ParamSet(param.to_string(), value, true, r))
            .await?
    }
}

fn micros(base: tokio::time::Instant, at: Instant) -> u64 {
    at.saturating_duration_since(base.into_std()).as_micros() as u64
}

enum Waiting {
    Call(
        Vec<fcan_core::ir::Field>,
        oneshot::Sender<Result<Value, MasterError>>,
    ),
    ParamGet(
        fcan_core::types::ScalarType,
        Option<u32>,
        oneshot::Sender<Result<Value, MasterError>>,
    ),
    /// A parameter write waiting for the node's acknowledgement.
    ParamSet {
        /// Who waits.
        tx: oneshot::Sender<Result<Value, MasterError>>,
        /// The value written, as its type holds it: the answer without read-back.
        written: Value,
        /// With read-back, the parameter to read once the write is acknowledged.
        read_back: Option<ParamInfo>,
    },
    /// Everyone waiting for one update (the same image asked again joins it).
    Update(Vec<oneshot::Sender<Result<crate::engine::UpdateReport, MasterError>>>),
}

struct Task<T> {
    engine: Engine,
    transport: T,
    base: tokio::time::Instant,
    cmd_rx: mpsc::Receiver<Command>,
    events: broadcast::Sender<MasterEvent>,
    frames: broadcast::Sender<BusFrame>,
    sink: SubscriberSink,
    waiting: BTreeMap<u64, Waiting>,
    registry: Registry,
    registry_dirty: bool,
    /// Woken by the cache thread when a lookup is answered.
    cache_wake: Option<Arc<tokio::sync::Notify>>,
    /// [`Master::leave`]: who waits, and how many nodes were asked.
    leaving: Option<(oneshot::Sender<usize>, usize)>,
}

impl<T: Transport> Task<T> {
    fn now(&self) -> u64 {
        self.base.elapsed().as_micros() as u64
    }

    async fn run(mut self) {
        self.sink.set_base(self.base);
        loop {
            let now = self.now();
            self.engine.poll(now);
            self.flush().await;
            self.dispatch_events();
            // What answering an event queued (a parameter's read-back once its write
            // is acknowledged) goes out now, not at the next wake.
            self.flush().await;
            if self.leaving.is_some() && !self.engine.leaving() {
                // Every node asked has answered (or its retries ran out): the master
                // is gone.
                if let Some((tx, asked)) = self.leaving.take() {
                    let _ = tx.send(asked);
                }
                return;
            }
            let deadline =
                self.base + Duration::from_micros(self.engine.next_deadline().max(now + 100));
            tokio::select! {
                r = self.transport.recv() => match r {
                    Ok(rx) => {
                        let at = micros(self.base, rx.at);
                        if self.frames.receiver_count() > 0 {
                            let _ = self.frames.send(BusFrame::new(rx.frame, rx.at, false));
                        }
                        self.engine.handle_frame(&rx.frame, at, &mut self.sink);
                    }
                    Err(e) if e.is_bus_event() => {}
                    Err(_) => {
                        // A transport that fails for good (closed, interface gone): stop.
                        return;
                    }
                },
                c = self.cmd_rx.recv() => match c {
                    Some(c) => {
                        self.command(c);
                        // Take what else is waiting too, so publications from several
                        // callers share their frames (flushed by the next poll).
                        for _ in 0..64 {
                            match self.cmd_rx.try_recv() {
                                Ok(c) => self.command(c),
                                Err(_) => break,
                            }
                        }
                    }
                    None => return,
                },
                _ = tokio::time::sleep_until(deadline) => {}
                _ = async {
                    match &self.cache_wake {
                        Some(w) => w.notified().await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
    }

    async fn flush(&mut self) {
        // Everything the engine queued goes out as one batch (one `sendmmsg` per 64 frames
        // on SocketCAN). As frame by frame before: a full queue is retried for about 50 ms
        // without progress, a frame the link refuses is skipped.
        let batch: Vec<Frame> = std::iter::from_fn(|| self.engine.pop_frame()).collect();
        let mut sent = 0;
        let mut tries = 0;
        while sent < batch.len() {
            match self.transport.send_batch(&batch[sent..]).await {
                Ok(n) => {
                    // n ≥ 1 by the trait's contract; `max` keeps a transport that breaks it
                    // from stalling the master.
                    let n = n.max(1);
                    let tapped = self.frames.receiver_count() > 0;
                    let now = Instant::now();
                    for f in &batch[sent..sent + n] {
                        if tapped {
                            let _ = self.frames.send(BusFrame::new(*f, now, true));
                        }
                    }
                    sent += n;
                    tries = 0;
                }
                Err(TransportError::TxQueueFull) if tries < 50 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(_) => {
                    sent += 1;
                    tries = 0;
                }
            }
        }
    }

    fn dispatch_events(&mut self) {
        while let Some(e) = self.engine.pop_event() {
            match &e {
                Event::CallDone { id, result } => {
                    if let Some(Waiting::Call(fields, tx)) = self.waiting.remove(id) {
                        let r = match result {
                            Ok(bytes) => unpack_message(&fields, bytes).map_err(MasterError::from),
                            Err(e) => Err(MasterError::Call(e.clone())),
                        };
                        let _ = tx.send(r);
                    }
                }
                Event::ParamDone { id, result } => match self.waiting.remove(id) {
                    Some(Waiting::ParamGet(ty, len, tx)) => {
                        let r = match result {
                            Ok(Some(bytes)) => {
                                unpack_param(ty, len, bytes).map_err(MasterError::from)
                            }
                            Ok(None) => {
                                Err(MasterError::Call(CallError::BadTarget("no value".into())))
                            }
                            Err(e) => Err(MasterError::Call(e.clone())),
                        };
                        let _ = tx.send(r);
                    }
                    Some(Waiting::ParamSet {
                        tx,
                        written,
                        read_back,
                    }) => match (result, read_back) {
                        (Err(e), _) => {
                            let _ = tx.send(Err(MasterError::Call(e.clone())));
                        }
                        (Ok(_), None) => {
                            let _ = tx.send(Ok(written));
                        }
                        // Acknowledged: read what the node holds now.
                        (Ok(_), Some(p)) => {
                            let now = self.now();
                            match self.engine.get_param(p.node, p.block, p.param, now) {
                                Ok(id) => {
                                    self.waiting
                                        .insert(id, Waiting::ParamGet(p.decl.ty, p.decl.len, tx));
                                }
                                Err(e) => {
                                    let _ = tx.send(Err(e.into()));
                                }
                            }
                        }
                    },
                    _ => {}
                },
                Event::UpdateDone { id, result, .. } => {
                    if let Some(Waiting::Update(txs)) = self.waiting.remove(id) {
                        for tx in txs {
                            let _ = tx.send(result.clone().map_err(MasterError::Update));
                        }
                    }
                    self.registry_dirty = true;
                }
                Event::Online { .. }
                | Event::Offline { .. }
                | Event::Rebooted { .. }
                | Event::Failed { .. } => {
                    self.registry_dirty = true;
                }
                _ => {}
            }
            // Users see every event but the request completions, which went to the
            // request that asked, above.
            if let Some(e) = MasterEvent::from_engine(e) {
                let _ = self.events.send(e);
            }
        }
    }

    /// An unknown name whose node the master knows but is not running is kind
    /// `NotRunning`, not "no such name" (asked again once the node runs, it may
    /// succeed): [`CallError::NodeNotOnline`] for an offline node, else
    /// [`CallError::WrongPhase`] naming the phase (failed, provisioning, in collision),
    /// as the remote API words it. The registry holds only the running nodes' names.
    /// Other errors pass unchanged.
    fn name_error(&self, e: MasterError) -> MasterError {
        let MasterError::Unknown(u) = &e else {
            return e;
        };
        // `/node/ns/topic` or `node.block.param`: the node's name comes first.
        let path = u.name.strip_prefix('/').unwrap_or(&u.name);
        let node = path.split(['/', '.']).next().unwrap_or("");
        match self
            .engine
            .nodes()
            .find(|n| n.phase != Phase::Running && !node.is_empty() && n.name() == node)
        {
            Some(n) if n.phase == Phase::Offline => {
                MasterError::Call(CallError::NodeNotOnline(n.id))
            }
            Some(n) => MasterError::Call(CallError::WrongPhase(format!(
                "node {} is not running ({})",
                n.name(),
                n.phase
            ))),
            None => e,
        }
    }

    fn registry(&mut self) -> &Registry {
        if self.registry_dirty {
            self.registry = Registry::of(&self.engine);
            self.registry_dirty = false;
        }
        &self.registry
    }

    fn command(&mut self, c: Command) {
        let now = self.now();
        match c {
            Command::Discover => self.engine.discover(),
            Command::Leave(tx) => {
                let asked = self.engine.leave(now);
                self.leaving = Some((tx, asked));
            }
            Command::Reprovision(node, tx) => {
                let r = self
                    .engine
                    .reprovision(node, now)
                    .map_err(MasterError::from);
                let _ = tx.send(r);
            }
            Command::AbortUpdate(node, tx) => {
                let r = self.engine.abort_update(node).map_err(MasterError::from);
                let _ = tx.send(r);
            }
            Command::Update(node, image, cfg, tx) => {
                match self.engine.start_update(node, *image, cfg, now) {
                    Ok(id) => match self.waiting.get_mut(&id) {
                        Some(Waiting::Update(txs)) => txs.push(tx),
                        _ => {
                            self.waiting.insert(id, Waiting::Update(vec![tx]));
                        }
                    },
                    Err(e) => {
                        let _ = tx.send(Err(e.into()));
                    }
                }
            }
            Command::Registry(tx) => {
                let _ = tx.send(self.registry().clone());
            }
            Command::Status(tx) => {
                let registry = self.registry().clone();
                let samples = self
                    .sink
                    .counts()
                    .iter()
                    .filter_map(|((n, b, t), c)| {
                        Some((registry.topic_name(*n, *b, *t)?.name.clone(), *c))
                    })
                    .collect();
                let transport = &self.transport;
                let nodes = self
                    .engine
                    .nodes()
                    .map(|n| node_info(n, transport.node_origin(n.id)))
                    .collect();
                let _ = tx.send(Status {
                    nodes,
                    samples,
                    stats: self.engine.stats(),
                    bus_busy: self.engine.bus_busy(),
                });
            }
            Command::Schema(node, tx) => {
                let _ = tx.send(self.engine.node(node).and_then(|n| n.schema.clone()));
            }
            Command::Plan(node, tx) => {
                let _ = tx.send(self.engine.node(node).and_then(|n| n.plan.clone()));
            }
            Command::Subscribe(name, sub, tx) => {
                let r = self.registry().topic(&name).cloned().map(|t| {
                    self.sink
                        .subscribe((t.node, t.block, t.topic), &t.name, &t.fields, sub);
                });
                let _ = tx.send(r.map_err(|e| self.name_error(e.into())));
            }
            Command::Publish(items, tx) => {
                // Check everything first, so a batch is published whole or not at all.
                let r = (|| -> Result<(), MasterError> {
                    let mut staged = Vec::with_capacity(items.len());
                    for (name, value) in &items {
                        let t: TopicInfo = self.registry().topic(name)?.clone();
                        let bytes = pack_message(&t.fields, value).map_err(|e| e.within(name))?;
                        // Every rule `stage_publish` applies, before anything is staged.
                        self.engine
                            .admit_publish(t.node, t.block, t.topic, bytes.len())?;
                        staged.push((bytes, t));
                    }
                    for (bytes, t) in staged {
                        // Staged, not sent: the frames go out once the commands waiting
                        // now are handled, so topics sharing a frame send it once.
                        self.engine.stage_publish(
                            t.node,
                            t.block,
                            t.topic,
                            &bytes,
                            now,
                            &mut self.sink,
                        )?;
                    }
                    Ok(())
                })();
                let _ = tx.send(r.map_err(|e| self.name_error(e)));
            }
            Command::Call(name, value, tx) => {
                let r = (|| -> Result<(u64, Vec<fcan_core::ir::Field>), MasterError> {
                    let s: ServiceInfo = self.registry().service(&name)?.clone();
                    let bytes = pack_message(&s.request, &value).map_err(|e| e.within(&name))?;
                    Ok((
                        self.engine
                            .call_service(s.node, s.block, s.service, &bytes, now)?,
                        s.response,
                    ))
                })();
                match r {
                    Ok((id, fields)) => {
                        self.waiting.insert(id, Waiting::Call(fields, tx));
                    }
                    Err(e) => {
                        let _ = tx.send(Err(self.name_error(e)));
                    }
                }
            }
            Command::ParamGet(name, tx) => {
                let r = (|| -> Result<(u64, ParamInfo), MasterError> {
                    let p: ParamInfo = self.registry().param(&name)?.clone();
                    Ok((self.engine.get_param(p.node, p.block, p.param, now)?, p))
                })();
                match r {
                    Ok((id, p)) => {
                        self.waiting
                            .insert(id, Waiting::ParamGet(p.decl.ty, p.decl.len, tx));
                    }
                    Err(e) => {
                        let _ = tx.send(Err(self.name_error(e)));
                    }
                }
            }
            Command::ParamSet(name, value, read_back, tx) => {
                let r = (|| -> Result<(u64, Value, ParamInfo), MasterError> {
                    let p: ParamInfo = self.registry().param(&name)?.clone();
                    let bytes =
                        pack_param(p.decl.ty, p.decl.len, &value).map_err(|e| e.within(&name))?;
                    // Name the parameter as the user did, not as the schema does.
                    let id = self
                        .engine
                        .set_param(p.node, p.block, p.param, &bytes, now)
                        .map_err(|e| match e {
                            CallError::BadValue(m) => CallError::BadValue(format!("{name}: {m}")),
                            e => e,
                        })?;
                    let written = unpack_param(p.decl.ty, p.decl.len, &bytes)?;
                    Ok((id, written, p))
                })();
                match r {
                    Ok((id, written, p)) => {
                        self.waiting.insert(
                            id,
                            Waiting::ParamSet {
                                tx,
                                written,
                                read_back: read_back.then_some(p),
                            },
                        );
                    }
                    Err(e) => {
                        let _ = tx.send(Err(self.name_error(e)));
                    }
                }
            }
        }
    }
}

fn node_info(
    n: &crate::engine::NodeRecord,
    origin: Option<fcan_transport::NodeOrigin>,
) -> NodeInfo {
    NodeInfo {
        id: n.id,
        name: n.name(),
        phase: n.phase.clone(),
        state: n.state,
        boot_id: n.announce.boot_id,
        digest: n.schema.as_ref().map(|s| s.digest),
        schema_source: n.schema_cached.map(|c| {
            if c {
                SchemaSource::Cache
            } else {
                SchemaSource::Downloaded
            }
        }),
        errors: n.errors,
        mode: n.mode,
        frames: n.plan.as_ref().map_or(0, |p| p.frames.len()),
        driver: origin.map(|o| o.driver.to_string()),
        watchdog: origin.map(|o| o.watchdog),
        firmware: n.firmware_version.clone(),
        collision: n.collision(),
    }
}

impl MasterApi for Master {
    fn nodes(&self) -> impl Future<Output = Result<Vec<NodeInfo>, MasterError>> + Send {
        Master::nodes(self)
    }
    fn registry(&self) -> impl Future<Output = Result<Registry, MasterError>> + Send {
        Master::registry(self)
    }
    fn status(&self) -> impl Future<Output = Result<Status, MasterError>> + Send {
        Master::status(self)
    }
    fn schema(
        &self,
        node: NodeId,
    ) -> impl Future<Output = Result<Option<Arc<NodeSchema>>, MasterError>> + Send {
        Master::schema(self, node)
    }
    fn plan(&self, node: NodeId) -> impl Future<Output = Result<Option<Plan>, MasterError>> + Send {
        Master::plan(self, node)
    }
    fn reprovision(&self, node: NodeId) -> impl Future<Output = Result<(), MasterError>> + Send {
        Master::reprovision(self, node)
    }
    fn update(
        &self,
        node: NodeId,
        image: crate::update::UpdateImage,
        cfg: crate::update::UpdateConfig,
    ) -> impl Future<Output = Result<crate::engine::UpdateReport, MasterError>> + Send {
        Master::update(self, node, image, cfg)
    }
    fn abort_update(&self, node: NodeId) -> impl Future<Output = Result<(), MasterError>> + Send {
        Master::abort_update(self, node)
    }
    fn events(&self) -> broadcast::Receiver<MasterEvent> {
        Master::events(self)
    }
    fn frames(
        &self,
    ) -> impl Future<Output = Result<broadcast::Receiver<BusFrame>, MasterError>> + Send {
        std::future::ready(Ok(Master::frames(self)))
    }
    fn subscribe(
        &self,
        topic: &str,
    ) -> impl Future<Output = Result<mpsc::UnboundedReceiver<Sample>, MasterError>> + Send {
        Master::subscribe(self, topic)
    }
    fn subscribe_into(
        &self,
        topic: &str,
        tx: mpsc::UnboundedSender<Sample>,
    ) -> impl Future<Output = Result<(), MasterError>> + Send {
        Master::subscribe_into(self, topic, tx)
    }
    fn publish(
        &self,
        topic: &str,
        value: Value,
    ) -> impl Future<Output = Result<(), MasterError>> + Send {
        Master::publish(self, topic, value)
    }
    fn publish_many(
        &self,
        items: Vec<(String, Value)>,
    ) -> impl Future<Output = Result<(), MasterError>> + Send {
        Master::publish_many(self, items)
    }
    fn call(
        &self,
        service: &str,
        request: Value,
    ) -> impl Future<Output = Result<Value, MasterError>> + Send {
        Master::call(self, service, request)
    }
    fn param_get(&self, param: &str) -> impl Future<Output = Result<Value, MasterError>> + Send {
        Master::param_get(self, param)
    }
    fn param_set(
        &self,
        param: &str,
        value: Value,
    ) -> impl Future<Output = Result<(), MasterError>> + Send {
        Master::param_set(self, param, value)
    }
    fn param_set_read_back(
        &self,
        param: &str,
        value: Value,
    ) -> impl Future<Output = Result<Value, MasterError>> + Send {
        Master::param_set_read_back(self, param, value)
    }
}
