//! Building a data frame's payload from its copy entries (protocol §4): the one builder
//! of the node (s2m frames) and the master (m2s frames). Byte 0 of a masked frame is its
//! presence mask and of a sequenced one its sequence number; both are the caller's, the
//! builder returns the mask of the topics it delivered.

use crate::presence::PresenceBits;

/// One copy entry of a data frame: its topic (any key that names one topic to the
/// caller) and where its bytes are in the topic's value and in the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece<K> {
    /// The topic.
    pub topic: K,
    /// Offset in the topic's packed value.
    pub src: u16,
    /// Offset in the frame's payload.
    pub dst: u8,
    /// Bytes.
    pub len: u8,
}

/// Fills `buf` (the frame's payload, zeroed first): every piece whose topic is
/// delivered (`delivered(topic, bit)`, `bit` being the topic's presence bit in this
/// frame, `None` past the eighth topic) gets its bytes from the topic's value
/// (`value(topic)`; `None` or too short: left zero). The bytes of other topics stay
/// zero. Returns the mask of the delivered topics' presence bits.
///
/// ```
/// use fcan_core::dataframe::{build, Piece};
/// // A frame shared by topics 'a' (2 bytes) and 'b' (1 byte), after a mask byte.
/// let pieces = [
///     Piece { topic: 'a', src: 0, dst: 1, len: 2 },
///     Piece { topic: 'b', src: 0, dst: 3, len: 1 },
/// ];
/// let mut buf = [0xEE; 4];
/// let mask = build(&mut buf, pieces, |t, _| t == 'b', |t| match t {
///     'a' => Some(&[1, 2][..]),
///     _ => Some(&[3][..]),
/// });
/// buf[0] = mask;
/// assert_eq!(buf, [0b10, 0, 0, 3]);
/// ```
pub fn build<'v, K: Copy + PartialEq + Default>(
    buf: &mut [u8],
    pieces: impl IntoIterator<Item = Piece<K>>,
    mut delivered: impl FnMut(K, Option<u8>) -> bool,
    mut value: impl FnMut(K) -> Option<&'v [u8]>,
) -> u8 {
    buf.fill(0);
    let mut bits = PresenceBits::new();
    let mut mask = 0u8;
    for p in pieces {
        let bit = bits.bit(p.topic);
        if !delivered(p.topic, bit) {
            continue;
        }
        if let Some(b) = bit {
            mask |= 1 << b;
        }
        let (s, d, l) = (p.src as usize, p.dst as usize, p.len as usize);
        if let (Some(from), Some(to)) = (
            value(p.topic).and_then(|v| v.get(s..s + l)),
            buf.get_mut(d..d + l),
        ) {
            to.copy_from_slice(from);
        }
    }
    mask
}
