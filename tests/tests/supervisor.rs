//! The rules every face follows, through `fcan_master::serving::Supervisor` with a face
//! that only records what it is asked: the running nodes are served; a node that
//! reboots is stopped as `rebooted` and served again under its new boot; a node that
//! leaves the bus is stopped with its phase; a failed serve is tried again; the served
//! set is announced after each change; events reach the face with the node's name while
//! it is served; `stop` stops every node as `the face stopped`. The face's handle for a
//! node is the one it returned when serving it, given back on unserve and dropped then.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_e2e::{eventually, World, IO3, MD1, MD2};
use fcan_master::engine::Phase;
use fcan_master::registry::Registry;
use fcan_master::serving::{Face, ServedNode, ServedSet, Supervisor, Unserved};
use fcan_master::MasterEvent;
use fcan_master::NodeInfo;

#[derive(Clone, Debug, PartialEq)]
enum Call {
    Serve(u8, u32, usize),
    /// Node id and boot of the handle given back, and why.
    Unserve(u8, u32, Unserved),
    /// A handle dropped (node id, boot).
    Dropped(u8, u32),
    Changed(Vec<u8>),
    Event(Option<u8>, Option<String>),
}

/// Records every call; refuses to serve io_board3 while `refuse_io` is set.
#[derive(Default)]
struct Recorder {
    calls: Arc<Mutex<Vec<Call>>>,
    refuse_io: AtomicBool,
}

/// The recorder's handle for a node: its id and boot; says when it is dropped.
struct Handle {
    id: u8,
    boot: u32,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.calls
            .lock()
            .unwrap()
            .push(Call::Dropped(self.id, self.boot));
    }
}

impl Recorder {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

impl Face for Recorder {
    type Node = Handle;

    async fn serve(&self, node: &NodeInfo, registry: &Registry) -> Option<Handle> {
        if node.id.get() == IO3 && self.refuse_io.load(Ordering::SeqCst) {
            return None;
        }
        let topics = registry.topics.iter().filter(|t| t.node == node.id).count();
        self.calls
            .lock()
            .unwrap()
            .push(Call::Serve(node.id.get(), node.boot_id, topics));
        Some(Handle {
            id: node.id.get(),
            boot: node.boot_id,
            calls: self.calls.clone(),
        })
    }

    fn unserve(&self, node: &ServedNode, handle: Handle, why: &Unserved) {
        assert_eq!(
            (handle.id, handle.boot),
            (node.key.id.get(), node.key.boot_id),
            "the handle given back is the node's"
        );
        self.calls
            .lock()
            .unwrap()
            .push(Call::Unserve(handle.id, handle.boot, why.clone()));
    }

    async fn on_event(&self, e: &MasterEvent, name: Option<&str>) {
        if matches!(
            e,
            MasterEvent::Offline { .. } | MasterEvent::Rebooted { .. }
        ) {
            self.calls.lock().unwrap().push(Call::Event(
                e.node().map(|n| n.get()),
                name.map(str::to_string),
            ));
        }
    }

    async fn served_changed(&self, served: &ServedSet<Handle>) {
        // Read through the handles the set holds: they are the nodes served.
        let ids = served.flat_map(|s| [s.handle.id]);
        assert_eq!(
            ids,
            served
                .nodes()
                .iter()
                .map(|n| n.key.id.get())
                .collect::<Vec<_>>()
        );
        self.calls.lock().unwrap().push(Call::Changed(ids));
    }
}

/// Waits (5 s at most) until `f` holds.
async fn settle<F: Fn() -> bool>(what: &str, f: F) {
    eventually(what, Duration::from_secs(5), || {
        let ok = f();
        async move { ok.then_some(()) }
    })
    .await;
}

async fn boot_of(m: &fcan_master::Master, id: u8) -> u32 {
    m.nodes()
        .await
        .unwrap()
        .iter()
        .find(|n| n.id.get() == id)
        .unwrap()
        .boot_id
}

#[tokio::test(start_paused = true)]
async fn the_served_set_follows_the_running_set_and_says_why_a_node_stopped() {
    let (mut w, m) = World::standard(Mtu::Fd).await;
    let face = Arc::new(Recorder::default());
    face.refuse_io.store(true, Ordering::SeqCst);
    // A long backstop: what happens below is driven by events, except the retry.
    let sup = Supervisor::new(m.clone(), face.clone(), Duration::from_millis(200));
    sup.resync().await;
    let (b1, b2) = (boot_of(&m, MD1).await, boot_of(&m, MD2).await);
    let registry = m.registry().await.unwrap();
    let topics = |id: u8| {
        registry
            .topics
            .iter()
            .filter(|t| t.node.get() == id)
            .count()
    };
    assert_eq!(
        face.calls(),
        vec![
            Call::Serve(MD1, b1, topics(MD1)),
            Call::Serve(MD2, b2, topics(MD2)),
            Call::Changed(vec![MD1, MD2]),
        ],
        "the running nodes served, io_board3 refused by the face"
    );
    assert_eq!(
        sup.served()
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>(),
        ["motor_driver1", "motor_driver2"]
    );
    let task = sup.spawn();
    // A refused serve is tried again (here by the backstop tick).
    face.refuse_io.store(false, Ordering::SeqCst);
    settle("io_board3 served on a later resync", || {
        sup.served().iter().any(|n| n.key.id.get() == IO3)
    })
    .await;
    face.calls.lock().unwrap().clear();
    // motor_driver1 reboots: stopped as rebooted (under its old boot), served again
    // under the new one; the face heard the event with the node's name.
    let new = w.reboot_motor(MD1);
    settle("motor_driver1 served under its new boot", || {
        face.calls()
            .iter()
            .any(|c| matches!(c, Call::Serve(MD1, b, _) if *b == new))
    })
    .await;
    let calls = face.calls();
    let stop = calls
        .iter()
        .position(|c| *c == Call::Unserve(MD1, b1, Unserved::Rebooted))
        .unwrap_or_else(|| panic!("no rebooted stop: {calls:?}"));
    let serve = calls
        .iter()
        .position(|c| matches!(c, Call::Serve(MD1, b, _) if *b == new))
        .unwrap();
    assert!(stop < serve, "stopped before served again: {calls:?}");
    assert_eq!(
        calls.get(stop + 1),
        Some(&Call::Dropped(MD1, b1)),
        "the old boot's handle dropped once unserved: {calls:?}"
    );
    assert!(
        calls.contains(&Call::Event(Some(MD1), Some("motor_driver1".into()))),
        "the event named the node: {calls:?}"
    );
    face.calls.lock().unwrap().clear();
    // motor_driver2 leaves the bus: stopped with its phase, not served again.
    w.motors.remove(&MD2).unwrap().stop();
    settle("motor_driver2 stopped", || {
        face.calls()
            .contains(&Call::Unserve(MD2, b2, Unserved::Phase(Phase::Offline)))
    })
    .await;
    settle("the change announced", || {
        face.calls().contains(&Call::Changed(vec![MD1, IO3]))
    })
    .await;
    assert!(
        face.calls()
            .contains(&Call::Event(Some(MD2), Some("motor_driver2".into()))),
        "the offline event came while motor_driver2 was still served: {:?}",
        face.calls()
    );
    // Stopping: every node stopped as such, once.
    task.abort();
    face.calls.lock().unwrap().clear();
    sup.stop();
    let mut stopped: Vec<(u8, Unserved)> = face
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Unserve(id, _, why) => Some((id, why)),
            _ => None,
        })
        .collect();
    stopped.sort_by_key(|s| s.0);
    assert_eq!(
        stopped,
        vec![(MD1, Unserved::Stopped), (IO3, Unserved::Stopped)]
    );
    let mut dropped: Vec<u8> = face
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Dropped(id, _) => Some(id),
            _ => None,
        })
        .collect();
    dropped.sort();
    assert_eq!(dropped, vec![MD1, IO3], "every handle dropped on stop");
    assert!(sup.served().is_empty());
    assert!(sup.set().is_empty());
}
