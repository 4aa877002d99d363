//! Things the router's user should know about, in a fixed-size queue.

use fcan_core::id::NodeId;

use crate::link::Link;

/// Something that changed in the router's tables, or went wrong.
///
/// Non-exhaustive (the router learns more over time): a match outside this crate keeps a
/// catch-all arm. One that lists every variant does not compile:
///
/// ```compile_fail,E0004
/// use fcan_router::Event;
/// fn node(e: &Event) -> fcan_core::id::NodeId {
///     match *e {
///         Event::NodeLearned { node, .. } | Event::NodeMoved { node, .. } => node,
///         Event::NodeRebooted { node, .. } | Event::NodeForgotten { node, .. } => node,
///         Event::Collision { node, .. } | Event::TableFull { node, .. } => node,
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A node was heard on a downlink for the first time (or again after being
    /// forgotten, on the same downlink).
    NodeLearned {
        /// The node.
        node: NodeId,
        /// Where.
        link: Link,
    },
    /// A forgotten node came back on another downlink; its entry moved there.
    NodeMoved {
        /// The node.
        node: NodeId,
        /// The downlink it was on.
        from: Link,
        /// The downlink it is on now.
        to: Link,
    },
    /// A node announced or heartbeat with a new boot_id: its data identifiers were
    /// forgotten (its plan is gone; the master re-provisions it).
    NodeRebooted {
        /// The node.
        node: NodeId,
        /// Where.
        link: Link,
        /// Its new boot_id.
        boot_id: u32,
    },
    /// A node was silent for `NODE_OFFLINE_TIMEOUT_US`: frames for it are dropped until
    /// it is heard again.
    NodeForgotten {
        /// The node.
        node: NodeId,
        /// The downlink it was on.
        link: Link,
    },
    /// An ANNOUNCE or HEARTBEAT for a node id that is live on another downlink. The
    /// entry stays where it is; the frame still goes up (the master sees both boot ids).
    Collision {
        /// The node id both claim.
        node: NodeId,
        /// The downlink the router routes this id to.
        owner: Link,
        /// The downlink the other claim came from.
        other: Link,
        /// The other claimant's boot_id, once known (HEARTBEAT; ANNOUNCE: `None`, its
        /// boot_id follows in a later segment on Classical CAN).
        boot_id: Option<u32>,
    },
    /// A FRAME_DEFINE's identifier could not be learned: the table is full.
    TableFull {
        /// The node the frame was defined for.
        node: NodeId,
        /// The identifier.
        std_id: u16,
    },
}

/// A ring of at most `CAP` events; a full queue drops the newest and counts it.
#[derive(Clone, Debug)]
pub(crate) struct EventQueue<const CAP: usize> {
    items: [Option<Event>; CAP],
    head: usize,
    len: usize,
}

impl<const CAP: usize> EventQueue<CAP> {
    pub(crate) const fn new() -> Self {
        EventQueue {
            items: [None; CAP],
            head: 0,
            len: 0,
        }
    }

    /// Queues `e`; `false` when full.
    pub(crate) fn push(&mut self, e: Event) -> bool {
        if self.len >= CAP {
            return false;
        }
        let at = (self.head + self.len) % CAP;
        match self.items.get_mut(at) {
            Some(slot) => {
                *slot = Some(e);
                self.len += 1;
                true
            }
            None => false,
        }
    }

    pub(crate) fn pop(&mut self) -> Option<Event> {
        if self.len == 0 {
            return None;
        }
        let e = self.items.get_mut(self.head).and_then(Option::take);
        self.head = (self.head + 1) % CAP;
        self.len -= 1;
        e
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_order_and_refuses_when_full() {
        let mut q: EventQueue<2> = EventQueue::new();
        let e = |n| Event::NodeForgotten {
            node: NodeId::new(n).unwrap(),
            link: Link::Down(0),
        };
        assert!(q.push(e(1)) && q.push(e(2)));
        assert!(!q.push(e(3)));
        assert_eq!(q.pop(), Some(e(1)));
        assert!(q.push(e(4)));
        assert_eq!(q.pop(), Some(e(2)));
        assert_eq!(q.pop(), Some(e(4)));
        assert_eq!(q.pop(), None);
        assert_eq!(q.len(), 0);
    }
}
