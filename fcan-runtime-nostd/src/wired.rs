//! Which blocks are wired on this board: one bit per block number, built at boot from
//! the instance counts.

use crate::desc::NodeDesc;

/// A bitmap over the 256 possible block numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Wired([u32; 8]);

impl Wired {
    /// Nothing wired (an unconfigured node).
    pub(crate) const EMPTY: Wired = Wired([0; 8]);

    /// Wires instance `i` of array `a` when `i < counts[a]`. The caller has checked
    /// `counts` against the descriptor.
    pub(crate) fn from_counts(desc: &NodeDesc, counts: &[u8]) -> Wired {
        let mut w = Wired::EMPTY;
        for (number, b) in desc.blocks.iter().enumerate().take(256) {
            let count = counts.get(b.array as usize).copied().unwrap_or(0);
            if b.index < count {
                if let Some(word) = w.0.get_mut(number / 32) {
                    *word |= 1 << (number % 32);
                }
            }
        }
        w
    }

    /// Whether block `block` is wired.
    pub(crate) fn get(&self, block: u8) -> bool {
        let b = block as usize;
        self.0.get(b / 32).is_some_and(|w| w & (1 << (b % 32)) != 0)
    }

    /// The instance count of each array, recovered from the bitmap (what ANNOUNCE says).
    pub(crate) fn count(&self, desc: &NodeDesc, array: u8) -> u8 {
        let mut n = 0u8;
        for (number, b) in desc.blocks.iter().enumerate().take(256) {
            if b.array == array && self.get(number as u8) {
                n = n.saturating_add(1);
            }
        }
        n
    }
}
