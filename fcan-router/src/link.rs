//! Links and sets of links: where a frame came from and where it goes.

/// One link of the router: the uplink (towards the master) or downlink `i` (`0..N`).
///
/// Deliberately exhaustive: a router has one uplink and numbered downlinks, nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Link {
    /// The bus the master is on.
    Up,
    /// Downlink number `i`, `0..N`.
    Down(u8),
}

impl Link {
    /// The bit of this link in a [`LinkSet`] (uplink bit 0, downlink `i` bit `i + 1`), or
    /// `None` for a downlink beyond [`LinkSet::MAX_DOWNLINKS`].
    pub const fn bit(self) -> Option<u32> {
        match self {
            Link::Up => Some(1),
            Link::Down(i) if (i as usize) < LinkSet::MAX_DOWNLINKS => Some(1 << (i as u32 + 1)),
            Link::Down(_) => None,
        }
    }

    /// Index into per-link arrays: 0 for the uplink, `i + 1` for downlink `i`.
    pub const fn index(self) -> usize {
        match self {
            Link::Up => 0,
            Link::Down(i) => i as usize + 1,
        }
    }
}

impl core::fmt::Display for Link {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Link::Up => f.write_str("uplink"),
            Link::Down(i) => write!(f, "downlink {i}"),
        }
    }
}

/// A set of links, as a bit mask: the destinations of one frame. `Copy`, no allocation.
///
/// ```
/// use fcan_router::{Link, LinkSet};
/// let mut s = LinkSet::EMPTY;
/// s.insert(Link::Down(1));
/// s.insert(Link::Up);
/// assert!(s.contains(Link::Up) && !s.contains(Link::Down(0)));
/// assert_eq!(s.iter().collect::<Vec<_>>(), [Link::Up, Link::Down(1)]);
/// assert_eq!(s.len(), 2);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct LinkSet(u32);

impl LinkSet {
    /// Most downlinks a set (and so a router) can name.
    pub const MAX_DOWNLINKS: usize = 31;
    /// No link.
    pub const EMPTY: LinkSet = LinkSet(0);

    /// The set holding only `link` (empty for a downlink beyond the maximum).
    pub const fn one(link: Link) -> LinkSet {
        match link.bit() {
            Some(b) => LinkSet(b),
            None => LinkSet(0),
        }
    }

    /// Downlinks `0..n` (at most [`Self::MAX_DOWNLINKS`]).
    pub const fn downlinks(n: usize) -> LinkSet {
        let n = if n > Self::MAX_DOWNLINKS {
            Self::MAX_DOWNLINKS
        } else {
            n
        };
        // Bits 1..=n.
        LinkSet(((1u64 << (n + 1)) - 2) as u32)
    }

    /// The raw mask: bit 0 uplink, bit `i + 1` downlink `i`.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Adds a link.
    pub fn insert(&mut self, link: Link) {
        self.0 |= link.bit().unwrap_or(0);
    }

    /// Removes a link.
    pub fn remove(&mut self, link: Link) {
        self.0 &= !link.bit().unwrap_or(0);
    }

    /// Whether `link` is in the set.
    pub const fn contains(self, link: Link) -> bool {
        match link.bit() {
            Some(b) => self.0 & b != 0,
            None => false,
        }
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of links in the set.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The links, uplink first, then downlinks in order.
    pub fn iter(self) -> impl Iterator<Item = Link> {
        let bits = self.0;
        (0..32u32).filter(move |b| bits & (1 << b) != 0).map(|b| {
            if b == 0 {
                Link::Up
            } else {
                Link::Down((b - 1) as u8)
            }
        })
    }
}

impl core::fmt::Debug for LinkSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downlink_masks() {
        assert_eq!(LinkSet::downlinks(0), LinkSet::EMPTY);
        assert_eq!(LinkSet::downlinks(2).bits(), 0b110);
        assert_eq!(LinkSet::downlinks(31).len(), 31);
        assert_eq!(LinkSet::downlinks(99).len(), 31);
        assert!(!LinkSet::downlinks(31).contains(Link::Up));
        assert_eq!(LinkSet::one(Link::Down(31)), LinkSet::EMPTY);
        assert_eq!(Link::Down(31).bit(), None);
        let mut s = LinkSet::downlinks(3);
        s.remove(Link::Down(1));
        assert_eq!(
            s.iter().collect::<std::vec::Vec<_>>(),
            [Link::Down(0), Link::Down(2)]
        );
    }
}
