//! The two tables the router learns: node id → downlink, and data identifier → node.
//!
//! Both are fixed arrays: one entry per possible node id (127), and `IDS` identifier
//! entries kept sorted for a binary search. An identifier resolves to its *node*, not to
//! a link, so a node that moves takes all its identifiers along and a node that is
//! forgotten makes them unroutable at once, without touching the identifier table.

use fcan_core::id::{NodeId, DATA_ID_RANGE};
use fcan_core::msg::DataDirection;

/// Node ids the table holds (`0..=NodeId::MAX`).
pub const NODE_SLOTS: usize = NodeId::MAX as usize + 1;

/// Standard identifiers fcan's data plane can use: the default identifier-table size,
/// which can never be full.
pub const DATA_IDS: usize = (DATA_ID_RANGE.end - DATA_ID_RANGE.start) as usize;

/// What the router knows of one node id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeEntry {
    /// The downlink it was last heard on.
    pub link: u8,
    /// Its boot_id, once an ANNOUNCE or HEARTBEAT told it.
    pub boot_id: Option<u32>,
    /// When it was last heard (µs, wrapping clock).
    pub last_seen_us: u32,
    /// `false` once forgotten (silent too long): frames for it are dropped, but its
    /// identifiers are kept in case it comes back with the same boot_id and plan.
    pub live: bool,
}

/// One learned data identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdEntry {
    /// The identifier.
    pub std_id: u16,
    /// The node whose plan uses it.
    pub node: NodeId,
    /// Its index in that plan (a FRAME_DEFINE with a lower index truncates it away).
    pub index: u8,
    /// Which way its frames flow.
    pub dir: DataDirection,
}

const NO_NODE: Option<NodeEntry> = None;

/// node id → [`NodeEntry`].
#[derive(Clone, Debug)]
pub(crate) struct NodeTable {
    slots: [Option<NodeEntry>; NODE_SLOTS],
}

impl NodeTable {
    pub(crate) const fn new() -> Self {
        NodeTable {
            slots: [NO_NODE; NODE_SLOTS],
        }
    }

    pub(crate) fn get(&self, node: NodeId) -> Option<&NodeEntry> {
        self.slots.get(node.get() as usize)?.as_ref()
    }

    pub(crate) fn slot_mut(&mut self, node: NodeId) -> Option<&mut Option<NodeEntry>> {
        self.slots.get_mut(node.get() as usize)
    }

    pub(crate) fn by_index_mut(&mut self, i: usize) -> Option<&mut Option<NodeEntry>> {
        self.slots.get_mut(i)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (NodeId, &NodeEntry)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((NodeId::new(i as u8)?, s.as_ref()?)))
    }
}

const NO_STD: StdEntry = StdEntry {
    std_id: 0,
    node: NodeId::BROADCAST,
    index: 0,
    dir: DataDirection::M2s,
};

/// std_id → [`StdEntry`], sorted by identifier, at most `IDS` entries.
#[derive(Clone, Debug)]
pub(crate) struct StdTable<const IDS: usize> {
    entries: [StdEntry; IDS],
    len: usize,
}

/// Why an identifier was not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Full;

impl<const IDS: usize> StdTable<IDS> {
    pub(crate) const fn new() -> Self {
        StdTable {
            entries: [NO_STD; IDS],
            len: 0,
        }
    }

    fn live(&self) -> &[StdEntry] {
        self.entries.get(..self.len).unwrap_or(&[])
    }

    fn find(&self, std_id: u16) -> Result<usize, usize> {
        self.live().binary_search_by_key(&std_id, |e| e.std_id)
    }

    pub(crate) fn get(&self, std_id: u16) -> Option<&StdEntry> {
        let i = self.find(std_id).ok()?;
        self.entries.get(i)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &StdEntry> {
        self.live().iter()
    }

    /// Removes every entry `drop` selects; returns how many.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&StdEntry) -> bool) -> usize {
        let mut w = 0;
        for r in 0..self.len {
            let Some(e) = self.entries.get(r).copied() else {
                break;
            };
            if keep(&e) {
                if let Some(slot) = self.entries.get_mut(w) {
                    *slot = e;
                }
                w += 1;
            }
        }
        let removed = self.len - w;
        self.len = w;
        removed
    }

    /// Stores `e`, replacing an entry with the same identifier. When the table is full,
    /// an entry `evictable` selects makes room; otherwise [`Full`].
    /// Returns whether an entry was evicted.
    pub(crate) fn insert(
        &mut self,
        e: StdEntry,
        evictable: impl Fn(&StdEntry) -> bool,
    ) -> Result<bool, Full> {
        match self.find(e.std_id) {
            Ok(i) => {
                if let Some(slot) = self.entries.get_mut(i) {
                    *slot = e;
                }
                Ok(false)
            }
            Err(mut at) => {
                let mut evicted = false;
                if self.len >= IDS {
                    let victim = self.live().iter().position(&evictable).ok_or(Full)?;
                    self.remove_at(victim);
                    if victim < at {
                        at -= 1;
                    }
                    evicted = true;
                }
                // Shift the tail right by one and put `e` at `at`.
                let len = self.len;
                if let Some(tail) = self.entries.get_mut(at..=len) {
                    tail.rotate_right(1);
                    if let Some(first) = tail.first_mut() {
                        *first = e;
                    }
                    self.len += 1;
                    Ok(evicted)
                } else {
                    Err(Full)
                }
            }
        }
    }

    fn remove_at(&mut self, i: usize) {
        let len = self.len;
        if let Some(tail) = self.entries.get_mut(i..len) {
            tail.rotate_left(1);
            self.len -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn e(std_id: u16, node: u8) -> StdEntry {
        StdEntry {
            std_id,
            node: NodeId::new(node).unwrap(),
            index: 0,
            dir: DataDirection::M2s,
        }
    }

    #[test]
    fn sorted_insert_replace_remove_and_evict() {
        let mut t: StdTable<3> = StdTable::new();
        assert_eq!(t.insert(e(0x300, 1), |_| false), Ok(false));
        assert_eq!(t.insert(e(0x100, 1), |_| false), Ok(false));
        assert_eq!(t.insert(e(0x200, 2), |_| false), Ok(false));
        assert_eq!(
            t.iter().map(|e| e.std_id).collect::<Vec<_>>(),
            [0x100, 0x200, 0x300]
        );
        // replace
        assert_eq!(t.insert(e(0x200, 3), |_| false), Ok(false));
        assert_eq!(t.get(0x200).unwrap().node.get(), 3);
        // full
        assert_eq!(t.insert(e(0x150, 1), |_| false), Err(Full));
        // evict node 3's entry
        assert_eq!(t.insert(e(0x150, 1), |x| x.node.get() == 3), Ok(true));
        assert_eq!(
            t.iter().map(|e| e.std_id).collect::<Vec<_>>(),
            [0x100, 0x150, 0x300]
        );
        assert_eq!(t.retain(|x| x.std_id != 0x150), 1);
        assert_eq!(t.len(), 2);
        assert!(t.get(0x150).is_none());
        assert!(t.get(0x300).is_some());
        // a zero-capacity table is always full and never panics
        let mut z: StdTable<0> = StdTable::new();
        assert_eq!(z.insert(e(0x100, 1), |_| true), Err(Full));
        assert!(z.get(0x100).is_none());
    }
}
