//! Sequenced multi-frame groups (protocol §4.3): how the parts of one publication of a
//! topic too large for one frame are put back together, whole or not at all. The one
//! assembler of the node (m2s groups) and the master (s2m groups, and a capture's
//! decoder in both directions), so both take and refuse the same parts.
//!
//! The receiver keeps a [`GroupProgress`] per topic and a staging copy of the topic's
//! packed value. Each part goes through [`GroupProgress::part`], which says whether to
//! start from the live value, to copy the part in ([`stage_part`], by each copy entry's
//! source offset), to drop what was staged, or to take the staged value as whole.
//!
//! ```
//! use fcan_core::group::{stage_part, GroupProgress, PartOutcome};
//! // A 12-byte topic in two parts on Classical CAN: bytes 0..7 then 7..12, byte 0 of
//! // each frame the publication's sequence number.
//! let value = *b"hello world!";
//! let mut live = [0u8; 12];
//! let mut stage = [0u8; 12];
//! let mut g = GroupProgress::IDLE;
//! let part0 = [&[9][..], &value[..7]].concat();
//! let part1 = [&[9][..], &value[7..]].concat();
//!
//! assert_eq!(g.part(4, 0, 2, 9), PartOutcome::Started { overtaken: false });
//! stage.copy_from_slice(&live); // start from the live value
//! assert!(stage_part(&mut stage, &part0, [(0, 1, 7)]));
//! assert_eq!(g.part(4, 1, 2, 9), PartOutcome::Complete);
//! assert!(stage_part(&mut stage, &part1, [(7, 1, 5)]));
//! live = stage;
//! assert_eq!(&live, b"hello world!");
//!
//! // A part of another publication (sequence 10) breaks the group: nothing delivered.
//! assert_eq!(g.part(4, 0, 2, 11), PartOutcome::Started { overtaken: false });
//! assert_eq!(g.part(4, 1, 2, 10), PartOutcome::Broken { was_staging: true });
//! assert!(!g.is_staging());
//! ```

/// Where the assembly of one topic's group stands: idle, or which publication (sequence
/// byte) of which group (its first frame's index in the plan) is being staged and which
/// part comes next. Three bytes, all zero when idle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GroupProgress {
    /// Sequence byte of the publication being staged.
    seq: u8,
    /// The part expected next.
    next: u8,
    /// 1 + the plan index of the group's first frame; 0 when idle. A plan has at most
    /// 256 frames (FRAME_DEFINE's index is a byte) and a group's first frame has a part
    /// after it, so it is at most 254.
    head: u8,
}

/// What one part does to a group's assembly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PartOutcome {
    /// The first part: staging starts from the topic's live value (bytes the group does
    /// not carry stay as they are), then this part is copied in. `overtaken`: an
    /// unfinished publication was being staged and is dropped.
    Started {
        /// A publication was dropped unfinished.
        overtaken: bool,
    },
    /// A later part in order: copy it in.
    Continued,
    /// The last part in order: copy it in, and the staged value is whole.
    Complete,
    /// Out of order, after a lost part, or a part of another publication or another
    /// group: what was staged is dropped and this part is not used. `was_staging`: a
    /// publication was being staged.
    Broken {
        /// A publication was being staged (and is dropped now).
        was_staging: bool,
    },
}

impl GroupProgress {
    /// Nothing staged.
    pub const IDLE: GroupProgress = GroupProgress {
        seq: 0,
        next: 0,
        head: 0,
    };

    /// Whether a publication is being staged.
    pub fn is_staging(&self) -> bool {
        self.head != 0
    }

    /// Drops what is being staged (a new plan, a START). One byte written: a node clears
    /// every topic's progress in a loop.
    pub fn stop(&mut self) {
        self.head = 0;
    }

    /// Takes part `index` of `parts` of the group whose first frame is plan frame
    /// `head`, carrying publication `seq`; says what to do with it.
    pub fn part(&mut self, head: u16, index: u8, parts: u8, seq: u8) -> PartOutcome {
        // 1 + head, or 0 for a plan no node accepts (then nothing assembles).
        let head = u8::try_from(head.saturating_add(1)).unwrap_or(0);
        if index == 0 {
            let overtaken = self.is_staging();
            *self = GroupProgress {
                seq,
                next: 1,
                // A group of one part has nothing to wait for.
                head: if parts > 1 { head } else { 0 },
            };
            return PartOutcome::Started { overtaken };
        }
        let in_order = self.is_staging()
            && self.head == head
            && self.seq == seq
            && self.next == index
            && index < parts;
        if !in_order {
            let was_staging = self.is_staging();
            self.stop();
            return PartOutcome::Broken { was_staging };
        }
        if index + 1 >= parts {
            self.stop();
            PartOutcome::Complete
        } else {
            self.next = index + 1;
            PartOutcome::Continued
        }
    }
}

/// Copies one part's bytes into the staging copy of the topic: for each copy entry
/// `(source offset in the topic, offset in the frame, length)`, `len` bytes from the
/// frame to the topic. `false` (nothing more copied) when an entry falls outside either,
/// which a checked plan never has.
pub fn stage_part(
    stage: &mut [u8],
    data: &[u8],
    entries: impl IntoIterator<Item = (u16, u8, u8)>,
) -> bool {
    for (src, dst, len) in entries {
        let (s, d, l) = (src as usize, dst as usize, len as usize);
        let (Some(to), Some(from)) = (stage.get_mut(s..s + l), data.get(d..d + l)) else {
            return false;
        };
        to.copy_from_slice(from);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_part_group_never_stages() {
        let mut g = GroupProgress::IDLE;
        assert_eq!(
            g.part(0, 0, 1, 3),
            PartOutcome::Started { overtaken: false }
        );
        assert!(!g.is_staging());
    }

    #[test]
    fn a_part_of_another_group_breaks_it() {
        let mut g = GroupProgress::IDLE;
        g.part(2, 0, 3, 7);
        assert_eq!(
            g.part(5, 1, 3, 7),
            PartOutcome::Broken { was_staging: true }
        );
        assert_eq!(
            g.part(2, 1, 3, 7),
            PartOutcome::Broken { was_staging: false }
        );
    }

    #[test]
    fn idle_is_all_zero() {
        assert_eq!(GroupProgress::default(), GroupProgress::IDLE);
        assert_eq!(core::mem::size_of::<GroupProgress>(), 3);
        let mut g = GroupProgress::IDLE;
        g.part(1, 0, 2, 5);
        g.stop();
        assert!(!g.is_staging());
    }
}
