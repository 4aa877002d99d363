//! Presence masks: how a receiver tells which topics of a shared data frame are fresh
//! (`docs/protocol.md` §4.2).
//!
//! A data frame sent once per publication — every m2s frame, and s2m frames with period
//! 0 (on commit) — that carries more than one topic is **masked**: FRAME_DEFINE sets
//! [`crate::msg::frame_flags::MASKED`], byte 0 of every such frame is a bitmap of the
//! topics the frame delivers, and no copy entry uses byte 0. Bit *i* stands for the
//! *i*-th distinct (block, topic) among the frame's copy entries, in entry order, so a
//! masked frame carries at most [`MAX_MASKED_TOPICS`] topics. A receiver applies only the
//! topics whose bit is set; the bytes of the others are zero and mean nothing.
//!
//! Periodic s2m frames are never masked (every period samples all their topics), nor are
//! sequenced groups (they carry one topic).
//!
//! ```
//! use fcan_core::presence::PresenceBits;
//! // Entries name (block, topic): a topic split over two entries keeps one bit.
//! let entries = [(0, 0), (5, 1), (0, 0), (1, 0)];
//! let mut bits = PresenceBits::new();
//! let got: Vec<_> = entries.iter().map(|&k| bits.bit(k)).collect();
//! assert_eq!(got, [Some(0), Some(1), Some(0), Some(2)]);
//! assert_eq!(bits.all(), 0b111);
//! ```

use crate::msg::DataDirection;

/// Most topics one masked frame may carry: one bit each in the mask byte.
pub const MAX_MASKED_TOPICS: usize = 8;

/// Payload bytes the mask takes (byte 0).
pub const MASK_LEN: usize = 1;

/// Whether a frame of this direction and period carrying `topics` distinct topics must
/// be masked (and must not be otherwise): it is sent once per publication and shared.
pub fn needs_mask(dir: DataDirection, period_us: u32, topics: usize) -> bool {
    topics > 1 && (dir == DataDirection::M2s || period_us == 0)
}

/// Assigns presence bits to a frame's copy entries, in entry order: feed it the topic of
/// every entry, first to last. `K` is whatever names a topic to the caller ((block,
/// topic), a slot number); equal keys get the same bit. No allocation: it holds at most
/// [`MAX_MASKED_TOPICS`] keys.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PresenceBits<K> {
    /// The distinct keys seen, `seen[..count]`, in bit order.
    seen: [K; MAX_MASKED_TOPICS],
    count: u8,
}

impl<K: Copy + PartialEq + Default> PresenceBits<K> {
    /// No entry seen yet.
    pub fn new() -> Self {
        PresenceBits {
            seen: [K::default(); MAX_MASKED_TOPICS],
            count: 0,
        }
    }

    /// The bit of the next entry, whose topic is `key`; `None` when `key` would be a
    /// topic beyond [`MAX_MASKED_TOPICS`] (such a frame cannot be masked).
    pub fn bit(&mut self, key: K) -> Option<u8> {
        let n = self.count as usize;
        if let Some(i) = self.seen.get(..n)?.iter().position(|k| *k == key) {
            return Some(i as u8);
        }
        *self.seen.get_mut(n)? = key;
        self.count += 1;
        Some(n as u8)
    }

    /// Distinct topics seen so far.
    pub fn topics(&self) -> usize {
        self.count as usize
    }

    /// The mask with the bit of every topic seen so far set.
    pub fn all(&self) -> u8 {
        ((1u16 << self.count) - 1) as u8
    }
}

impl<K: Copy + PartialEq + Default> Default for PresenceBits<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// The bit of topic `key` in a frame whose entries name the topics `keys`, in entry
/// order; `None` when the frame does not carry it within its first
/// [`MAX_MASKED_TOPICS`] topics.
pub fn bit_of<K: Copy + PartialEq + Default>(
    keys: impl IntoIterator<Item = K>,
    key: K,
) -> Option<u8> {
    let mut bits = PresenceBits::new();
    for k in keys {
        let b = bits.bit(k)?;
        if k == key {
            return Some(b);
        }
    }
    None
}

/// The mask of every topic of a frame whose entries name `keys`; `None` when they are
/// more than [`MAX_MASKED_TOPICS`] topics.
pub fn all_of<K: Copy + PartialEq + Default>(keys: impl IntoIterator<Item = K>) -> Option<u8> {
    let mut bits = PresenceBits::new();
    for k in keys {
        bits.bit(k)?;
    }
    Some(bits.all())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_follow_first_appearance_and_stop_at_eight() {
        let mut bits = PresenceBits::new();
        for k in 0..8u8 {
            assert_eq!(bits.bit(k * 3), Some(k));
        }
        assert_eq!(bits.all(), 0xFF);
        assert_eq!(bits.bit(3), Some(1), "a known topic keeps its bit");
        assert_eq!(bits.bit(100), None, "a ninth topic has no bit");
        assert_eq!(bits.topics(), 8);
        assert_eq!(PresenceBits::<u8>::new().all(), 0);
    }

    #[test]
    fn helpers_agree_with_the_streaming_form() {
        let keys = [(1u8, 0u8), (1, 1), (1, 0), (2, 0)];
        assert_eq!(bit_of(keys, (2, 0)), Some(2));
        assert_eq!(bit_of(keys, (1, 0)), Some(0));
        assert_eq!(bit_of(keys, (9, 9)), None);
        assert_eq!(all_of(keys), Some(0b111));
        assert_eq!(all_of(0..9u8), None);
        assert_eq!(all_of(0..8u8), Some(0xFF));
    }

    #[test]
    fn which_frames_are_masked() {
        use DataDirection::*;
        assert!(!needs_mask(M2s, 0, 1));
        assert!(needs_mask(M2s, 0, 2));
        assert!(needs_mask(S2m, 0, 2));
        assert!(
            !needs_mask(S2m, 10_000, 2),
            "periodic frames sample every topic"
        );
        assert!(!needs_mask(S2m, 0, 1));
    }
}
