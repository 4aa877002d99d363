//! The routing core driven by tokio over `fcan_transport` links.
//!
//! One task per link owns its [`Transport`]: it reads frames and hands them to the router
//! task, and sends what the router task queues for it. The router task owns the
//! [`Router`] (behind a mutex only so [`Bridge`] can read counters and tables), so the
//! frames of one link leave in the order they came.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use fcan_transport::open;
//! use fcan_router::bridge::{Bridge, BridgeOptions};
//! let up = open("socketcan:can0", None)?;
//! let downs = vec![open("socketcan:can1", None)?, open("socketcan:can2", None)?];
//! let bridge: Bridge<8> = Bridge::start(up, downs, BridgeOptions::default())?;
//! tokio::signal::ctrl_c().await?;
//! let counters = bridge.stop().await;
//! print!("{}", fcan_router::bridge::format_counters(&counters, bridge_names()));
//! # Ok(()) }
//! # fn bridge_names() -> &'static [String] { &[] }
//! ```

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fcan_core::frame::Frame;
use fcan_transport::{Transport, TransportError};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::{Counters, Event, Link, Router, RouterConfig};

/// How a bridge runs.
#[derive(Clone, Copy, Debug)]
pub struct BridgeOptions {
    /// Send m2s frames with unlearned identifiers everywhere
    /// ([`RouterConfig::flood_unknown_m2s`]).
    pub flood_unknown_m2s: bool,
    /// Pass non-fcan frames ([`RouterConfig::forward_foreign`]).
    pub forward_foreign: bool,
    /// How often [`Router::poll`] runs.
    pub poll_interval: Duration,
    /// Frames queued per link before further frames for it count as
    /// [`DropReason::SendFailed`](crate::DropReason::SendFailed).
    pub queue_len: usize,
    /// How long a link retries a frame its driver refuses (transmit queue full) before
    /// giving up on it.
    pub send_retry: Duration,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        BridgeOptions {
            flood_unknown_m2s: false,
            forward_foreign: true,
            poll_interval: Duration::from_millis(100),
            queue_len: 256,
            send_retry: Duration::from_millis(20),
        }
    }
}

/// Why a bridge could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum BridgeError {
    /// More downlinks than the router type has room for.
    TooManyDownlinks {
        /// Given.
        given: usize,
        /// Room.
        max: usize,
    },
    /// No downlink at all.
    NoDownlink,
}

impl std::fmt::Display for BridgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BridgeError::TooManyDownlinks { given, max } => {
                write!(
                    f,
                    "{given} downlinks given, this router takes at most {max}"
                )
            }
            BridgeError::NoDownlink => f.write_str("a router needs at least one downlink"),
        }
    }
}

impl std::error::Error for BridgeError {}

/// Something that happened on a link, for logs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum LinkEvent {
    /// A routing [`Event`] of the core.
    Router(Event),
    /// A bus event (error frame, bus-off …) or a failed send on a link.
    Trouble {
        /// The link.
        link: Link,
        /// What happened.
        error: String,
    },
    /// A link's transport failed for good; the link stopped.
    LinkDown {
        /// The link.
        link: Link,
        /// Why.
        error: String,
    },
}

enum Input {
    Frame(Link, Frame),
    SendFailed(Link, TransportError),
    Down(Link, TransportError),
    Bus(Link, TransportError),
}

/// A running router between tokio transports.
pub struct Bridge<const N: usize> {
    core: Arc<Mutex<Router<N>>>,
    events: broadcast::Sender<LinkEvent>,
    names: Vec<String>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    start: Instant,
}

impl<const N: usize> Bridge<N> {
    /// Starts routing between `uplink` and `downlinks` (at most `N`). Call inside a tokio
    /// runtime.
    pub fn start<T: Transport + 'static>(
        uplink: T,
        downlinks: Vec<T>,
        options: BridgeOptions,
    ) -> Result<Bridge<N>, BridgeError> {
        if downlinks.is_empty() {
            return Err(BridgeError::NoDownlink);
        }
        if downlinks.len() > N {
            return Err(BridgeError::TooManyDownlinks {
                given: downlinks.len(),
                max: N,
            });
        }
        let mut downlink_mtu = [None; N];
        for (slot, t) in downlink_mtu.iter_mut().zip(&downlinks) {
            *slot = Some(t.mtu());
        }
        let config = RouterConfig {
            uplink_mtu: uplink.mtu(),
            downlink_mtu,
            flood_unknown_m2s: options.flood_unknown_m2s,
            forward_foreign: options.forward_foreign,
        };
        let core = Arc::new(Mutex::new(Router::new(config)));
        let (events, _) = broadcast::channel(1024);
        let (in_tx, in_rx) = mpsc::channel::<Input>(options.queue_len.max(1) * (N + 1));
        let mut names = vec![uplink.name().to_string()];
        let mut outs = Vec::new();
        let mut link_tasks = Vec::new();
        let links = std::iter::once((Link::Up, uplink)).chain(
            downlinks
                .into_iter()
                .enumerate()
                .map(|(i, t)| (Link::Down(i as u8), t)),
        );
        for (link, t) in links {
            if link != Link::Up {
                names.push(t.name().to_string());
            }
            let (out_tx, out_rx) = mpsc::channel::<Frame>(options.queue_len.max(1));
            outs.push(out_tx);
            link_tasks.push(tokio::spawn(link_task(
                link,
                t,
                in_tx.clone(),
                out_rx,
                options.send_retry,
            )));
        }
        drop(in_tx);
        let (stop_tx, stop_rx) = oneshot::channel();
        let start = Instant::now();
        let task = tokio::spawn(router_task(RouterTask {
            core: core.clone(),
            events: events.clone(),
            outs,
            link_tasks,
            start,
            poll: options.poll_interval,
            in_rx,
            stop_rx,
        }));
        Ok(Bridge {
            core,
            events,
            names,
            stop: Some(stop_tx),
            task: Some(task),
            start,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Router<N>> {
        lock(&self.core)
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> Counters<N> {
        *self.lock().counters()
    }

    /// Runs `f` on the routing core (to look at its tables).
    pub fn with_router<R>(&self, f: impl FnOnce(&Router<N>) -> R) -> R {
        f(&self.lock())
    }

    /// The router's clock now (µs, wrapping), as [`Router`] methods that take `now_us`
    /// expect.
    pub fn now_us(&self) -> u32 {
        self.start.elapsed().as_micros() as u32
    }

    /// Routing events and link trouble from now on.
    pub fn events(&self) -> broadcast::Receiver<LinkEvent> {
        self.events.subscribe()
    }

    /// Link names: the uplink first, then the downlinks in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Stops every task (the transports are closed) and returns the final counters.
    pub async fn stop(mut self) -> Counters<N> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        self.counters()
    }
}

impl<const N: usize> Drop for Bridge<N> {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

fn lock<const N: usize>(core: &Mutex<Router<N>>) -> MutexGuard<'_, Router<N>> {
    // The router is never left half-updated by a panic (it does not panic).
    core.lock().unwrap_or_else(|p| p.into_inner())
}

async fn link_task<T: Transport>(
    link: Link,
    mut t: T,
    to_router: mpsc::Sender<Input>,
    mut out: mpsc::Receiver<Frame>,
    retry: Duration,
) {
    loop {
        tokio::select! {
            r = t.recv() => {
                let input = match r {
                    Ok(rx) => Input::Frame(link, rx.frame),
                    Err(e) if e.is_bus_event() => Input::Bus(link, e),
                    Err(e) => {
                        let _ = to_router.send(Input::Down(link, e)).await;
                        return;
                    }
                };
                if to_router.send(input).await.is_err() {
                    return;
                }
            }
            f = out.recv() => {
                let Some(f) = f else { return };
                // Frames already waiting go in the same batch (one `sendmmsg` on SocketCAN).
                let mut batch = vec![f];
                while batch.len() < 64 {
                    match out.try_recv() {
                        Ok(f) => batch.push(f),
                        Err(_) => break,
                    }
                }
                let mut rest: &[Frame] = &batch;
                let mut deadline = Instant::now() + retry;
                while !rest.is_empty() {
                    match t.send_batch(rest).await {
                        // n ≥ 1 by the trait's contract; `max` keeps a transport that
                        // breaks it from stalling the link.
                        Ok(n) => {
                            rest = rest.get(n.max(1)..).unwrap_or_default();
                            deadline = Instant::now() + retry;
                        }
                        Err(TransportError::TxQueueFull) if Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_micros(200)).await;
                        }
                        Err(e) => {
                            if to_router.send(Input::SendFailed(link, e)).await.is_err() {
                                return;
                            }
                            rest = rest.get(1..).unwrap_or_default();
                            deadline = Instant::now() + retry;
                        }
                    }
                }
            }
        }
    }
}

struct RouterTask<const N: usize> {
    core: Arc<Mutex<Router<N>>>,
    events: broadcast::Sender<LinkEvent>,
    outs: Vec<mpsc::Sender<Frame>>,
    link_tasks: Vec<JoinHandle<()>>,
    start: Instant,
    poll: Duration,
    in_rx: mpsc::Receiver<Input>,
    stop_rx: oneshot::Receiver<()>,
}

async fn router_task<const N: usize>(mut rt: RouterTask<N>) {
    let mut tick = tokio::time::interval(rt.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            input = rt.in_rx.recv() => {
                let Some(input) = input else { break };
                rt.handle(input);
            }
            _ = tick.tick() => {
                let now = rt.now_us();
                lock(&rt.core).poll(now);
                rt.drain_events();
            }
            _ = &mut rt.stop_rx => break,
        }
    }
    for t in &rt.link_tasks {
        t.abort();
    }
    for t in rt.link_tasks.drain(..) {
        let _ = t.await;
    }
}

impl<const N: usize> RouterTask<N> {
    fn now_us(&self) -> u32 {
        self.start.elapsed().as_micros() as u32
    }

    fn handle(&mut self, input: Input) {
        match input {
            Input::Frame(from, mut frame) => {
                let now = self.now_us();
                let mut core = lock(&self.core);
                // `route` may rewrite the frame (FD capabilities of an ANNOUNCE from a
                // classic downlink): send it as it leaves the call.
                let route = core.route(from, &mut frame, now);
                for to in route.to.iter() {
                    let sent = self
                        .outs
                        .get(to.index())
                        .is_some_and(|q| q.try_send(frame).is_ok());
                    if !sent {
                        core.send_failed(to);
                    }
                }
                drop(core);
                self.drain_events();
            }
            Input::SendFailed(link, e) => {
                lock(&self.core).send_failed(link);
                let _ = self.events.send(LinkEvent::Trouble {
                    link,
                    error: e.to_string(),
                });
            }
            Input::Bus(link, e) => {
                let _ = self.events.send(LinkEvent::Trouble {
                    link,
                    error: e.to_string(),
                });
            }
            Input::Down(link, e) => {
                let _ = self.events.send(LinkEvent::LinkDown {
                    link,
                    error: e.to_string(),
                });
            }
        }
    }

    fn drain_events(&mut self) {
        let mut core = lock(&self.core);
        while let Some(e) = core.pop_event() {
            let _ = self.events.send(LinkEvent::Router(e));
        }
    }
}

/// A human-readable report of the counters; `names` are the link names (uplink first).
pub fn format_counters<const N: usize>(c: &Counters<N>, names: &[String]) -> String {
    let name = |i: usize| names.get(i).map_or("?", |s| s.as_str()).to_string();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<24} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "link", "received", "forwarded", "sent", "mtu_dropped", "fd_masked"
    );
    let mut row = |label: String, l: &crate::LinkCounters| {
        let _ = writeln!(
            s,
            "{:<24} {:>12} {:>12} {:>12} {:>12} {:>12}",
            label, l.received, l.forwarded, l.sent, l.mtu_dropped, l.fd_masked
        );
    };
    row(format!("up    {}", name(0)), &c.up);
    for (i, d) in c.down.iter().enumerate() {
        if i + 1 >= names.len() && d.received == 0 && d.sent == 0 {
            continue;
        }
        row(format!("down{i} {}", name(i + 1)), d);
    }
    let _ = write!(s, "dropped {}:", c.dropped.total());
    for (r, n) in c.dropped.iter() {
        let _ = write!(s, " {}={n}", r.name());
    }
    let l = &c.learned;
    let _ = writeln!(
        s,
        "\nlearned: nodes={} moved={} rebooted={} forgotten={} std_ids={} std_ids_forgotten={}",
        l.nodes, l.nodes_moved, l.nodes_rebooted, l.nodes_forgotten, l.std_ids, l.std_ids_forgotten
    );
    let _ = writeln!(
        s,
        "collisions={} flooded_unknown_node={} flooded_unknown_std_id={} up_unlearned_std_id={} foreign={} capture_missed={} events_lost={}",
        c.collisions,
        c.flooded_unknown_node,
        c.flooded_unknown_std_id,
        c.up_unlearned_std_id,
        c.foreign,
        c.capture_missed,
        c.events_lost
    );
    s
}

/// A one-line description of a routing event for logs, with link names.
pub fn describe(e: &LinkEvent, names: &[String]) -> String {
    let link = |l: &Link| -> String {
        let n = names.get(l.index()).map_or("?", |s| s.as_str());
        format!("{l} ({n})")
    };
    match e {
        LinkEvent::Router(ev) => match ev {
            Event::NodeLearned { node, link: l } => format!("node {node} on {}", link(l)),
            Event::NodeMoved { node, from, to } => {
                format!("node {node} moved from {} to {}", link(from), link(to))
            }
            Event::NodeRebooted {
                node,
                link: l,
                boot_id,
            } => format!(
                "node {node} on {} rebooted (boot_id {boot_id:#010x}): its frame plan is forgotten",
                link(l)
            ),
            Event::NodeForgotten { node, link: l } => {
                format!("node {node} on {} silent: forgotten", link(l))
            }
            Event::Collision {
                node,
                owner,
                other,
                boot_id,
            } => format!(
                "COLLISION: node id {node} is on {} and also claimed on {}{}; frames for it keep going to {}",
                link(owner),
                link(other),
                boot_id.map_or(String::new(), |b| format!(" (boot_id {b:#010x})")),
                link(owner)
            ),
            Event::TableFull { node, std_id } => format!(
                "identifier table full: {std_id:#05x} of node {node} not learned; its frames will be dropped"
            ),
        },
        LinkEvent::Trouble { link: l, error } => format!("{}: {error}", link(l)),
        LinkEvent::LinkDown { link: l, error } => format!("{} stopped: {error}", link(l)),
    }
}
