//! Every request the engine accepts ends with exactly one answer, even when its node goes
//! away while the request is in flight or queued (found by the `engine_frames` fuzz
//! target: the in-flight one was dropped with its id still pending, the queued ones
//! silently).

#[path = "support/mod.rs"]
mod support;

use fcan_core::frame::Mtu;
use fcan_master::engine::{CallError, Event};
use support::EngineWorld;

#[test]
fn requests_pending_when_a_node_goes_offline_all_end() {
    for mtu in [Mtu::Fd, Mtu::Classic] {
        let mut w = EngineWorld::new(mtu, 1, 0);
        w.provision();
        let node = fcan_core::id::NodeId::new(1).unwrap();
        // A block with a parameter, from the node's own schema.
        let (block, param) = {
            let rec = w.engine.node(node).unwrap();
            let s = rec.schema.as_ref().unwrap();
            let b = (0..=255u8)
                .find(|&b| {
                    s.numbering
                        .layout_of(b)
                        .is_some_and(|l| !l.param_sizes.is_empty())
                })
                .expect("the motor driver has parameters");
            (b, 0u8)
        };
        while w.engine.pop_event().is_some() {}
        let now = w.now_us;
        // The first goes out at once (in flight); the other two wait in the queue.
        let ids: Vec<u64> = (0..3)
            .map(|_| w.engine.get_param(node, block, param, now).unwrap())
            .collect();
        assert_eq!(w.engine.stats().pending_requests, 3);
        // The node falls silent: nothing is delivered, time passes the offline timeout.
        let later = now + 60_000_000;
        w.engine.poll(later);
        let mut ended = Vec::new();
        while let Some(e) = w.engine.pop_event() {
            if let Event::ParamDone { id, result } = e {
                assert_eq!(result, Err(CallError::NodeLost(node)), "{mtu:?}");
                ended.push(id);
            }
        }
        ended.sort();
        assert_eq!(ended, ids, "{mtu:?}: every request ends exactly once");
        assert_eq!(w.engine.stats().pending_requests, 0, "{mtu:?}");
    }
}
