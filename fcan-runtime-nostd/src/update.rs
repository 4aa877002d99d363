//! Firmware update over the bus, the node's side (`docs/protocol.md` §3.14): the
//! [`Update`] trait a firmware implements over its staging flash, and (with the `update`
//! cargo feature) the state machine that answers the master's OFFER, DATA, COMMIT, ABORT
//! and QUERY.
//!
//! The node never buffers the image: each DATA chunk is written from the configuration
//! reassembly buffer before the next transfer can start. COMMIT reads the staged image
//! back in steps of [`VERIFY_STEP`] bytes per `poll`, so a control loop keeps its rate
//! while a megabyte is hashed, and only an image whose SHA-256 matches is marked bootable.
//!
//! Only with the `update` feature: without it the node announces no update capability,
//! does not decode UPDATE (counted as malformed, answered with nothing), and a firmware
//! that does not take updates links none of this.

use fcan_core::msg::{NodeState, UpdateOffer, UpdateReason};

/// The flash (or file) a node stages a new image in, and the application's say on when
/// an update may start. Give it to the node from
/// [`Dispatch::update`](crate::codegen::Dispatch::update) (generated code forwards the
/// `App`'s `update`).
///
/// The staging area must not hold the running image: writing it never breaks what boots
/// now. [`Update::mark_bootable`] is the one step that changes what boots, and must be
/// atomic (see `docs/protocol.md` §3.14 for A/B slots and bootloader layouts).
pub trait Update {
    /// Bytes the staging area holds: the largest image accepted.
    fn capacity(&self) -> u32;

    /// The largest chunk the master may send at once: a multiple of the flash's write
    /// unit, at most [`MAX_CHUNK`] (larger values are cut to it). 256 by default.
    fn chunk(&self) -> u16 {
        256
    }

    /// The version string of the firmware that runs now (at most 32 bytes are sent).
    fn version(&self) -> &str;

    /// Whether to accept `offer` now, the node being in `state`. By default a node
    /// refuses while RUNNING (its outputs may be live: motors enabled) and accepts in
    /// every other state; a firmware that can make itself safe, or checks its supply,
    /// decides here.
    fn offered(&mut self, offer: &UpdateOffer<'_>, state: NodeState) -> Result<(), UpdateReason> {
        let _ = offer;
        if state == NodeState::Running {
            Err(UpdateReason::NotSafe)
        } else {
            Ok(())
        }
    }

    /// Prepares the staging area for a new image of `size` bytes (erasing what it must;
    /// an implementation may also erase each sector as the first write enters it).
    fn begin(&mut self, size: u32) -> Result<(), FlashError>;

    /// Writes `data` at `offset` of the staging area. Offsets are multiples of
    /// [`Update::chunk`]; the last chunk may be shorter.
    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), FlashError>;

    /// Reads the staging area back from `offset` into `buf`.
    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), FlashError>;

    /// Marks the staged image (`size` bytes with this SHA-256, already checked) as the
    /// one to boot: atomically, so a power cut leaves either the old or the new firmware
    /// bootable.
    fn mark_bootable(&mut self, size: u32, sha256: &[u8; 32]) -> Result<(), FlashError>;

    /// Reboots into the marked image. Called from `poll` once the node's last answer
    /// (STATUS Verified) is on the bus. On a board it does not return; a PC-side node
    /// returns and is replaced by its host.
    fn reboot(&mut self);
}

/// The staging flash failed an erase, write, read or mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FlashError;

/// The largest DATA chunk a node takes: what its configuration reassembly buffer holds
/// after the DATA header.
pub const MAX_CHUNK: u16 =
    (crate::CONFIG_REASSEMBLY_BYTES - fcan_core::msg::update::DATA_HEADER_LEN) as u16;

/// Bytes of the staged image read back and hashed per `poll` while verifying.
pub const VERIFY_STEP: usize = 256;

pub(crate) use machine::*;

mod machine {
    use super::{Update, MAX_CHUNK, VERIFY_STEP};
    use crate::counters::bump;
    use crate::outq::OutQueue;
    use crate::state::Core;
    use crate::update_transfer::UpdateState;
    use fcan_core::id::{ConfigId, Direction, Opcode};
    use fcan_core::msg::update::{schema_node_name, Sha256, VERSION_MAX};
    use fcan_core::msg::{
        ConfigMessage, UpdatePhase, UpdateReason, UpdateReply, UpdateRequest, UpdateStatus,
    };
    use sha2::Digest;

    fn max_chunk(u: &dyn Update) -> u16 {
        u.chunk().min(MAX_CHUNK)
    }

    fn version(u: &dyn Update) -> &str {
        let v = u.version();
        // Cut at a character boundary at most VERSION_MAX bytes in.
        let mut n = v.len().min(VERSION_MAX);
        while !v.is_char_boundary(n) {
            n -= 1;
        }
        v.get(..n).unwrap_or("")
    }

    fn status(core: &mut Core, outq: &mut OutQueue, transfer: u8, u: Option<&dyn Update>) {
        let st = &core.update;
        let msg = ConfigMessage::UpdateReply(UpdateReply::Status(UpdateStatus {
            phase: st.phase,
            reason: if u.is_some() {
                st.reason
            } else {
                UpdateReason::Unsupported
            },
            offset: st.next,
            max_chunk: u.map_or(0, max_chunk),
            version: u.map_or("", version),
        }));
        let id = ConfigId::single(Opcode::Update, Direction::ToMaster, core.node_id, transfer);
        core.reply(outq, id, &msg);
    }

    /// A decoded UPDATE request for this node (not broadcast, not while listening).
    pub(crate) fn on_request(
        blob: &'static [u8],
        core: &mut Core,
        outq: &mut OutQueue,
        id: &ConfigId,
        req: UpdateRequest<'_>,
        target: Option<&mut dyn Update>,
    ) {
        let Some(u) = target else {
            status(core, outq, id.transfer, None);
            return;
        };
        let state = core.life.state();
        let st = &mut core.update;
        match req {
            UpdateRequest::Offer(o) => {
                let busy = matches!(st.phase, UpdatePhase::Verifying | UpdatePhase::Verified);
                let refusal = if busy {
                    Some(UpdateReason::Busy)
                } else if o.size == 0 {
                    Some(UpdateReason::BadOffer)
                } else if o.size > u.capacity() {
                    Some(UpdateReason::TooLarge)
                } else if schema_node_name(blob) != Some(o.node) {
                    Some(UpdateReason::WrongBoard)
                } else {
                    u.offered(&o, state).err()
                };
                if let Some(r) = refusal {
                    // A refusal changes nothing but the reason reported: a transfer in
                    // progress stays, with its phase and offset.
                    st.reason = r;
                    status(core, outq, id.transfer, Some(&*u));
                    return;
                }
                let resume =
                    st.phase == UpdatePhase::Receiving && st.size == o.size && st.image == o.image;
                if !resume {
                    if u.begin(o.size).is_err() {
                        st.fail(UpdateReason::FlashError);
                        status(core, outq, id.transfer, Some(&*u));
                        return;
                    }
                    *st = UpdateState {
                        phase: UpdatePhase::Receiving,
                        size: o.size,
                        image: o.image,
                        ..UpdateState::IDLE
                    };
                }
                st.reason = UpdateReason::None;
                status(core, outq, id.transfer, Some(&*u));
            }
            UpdateRequest::Data { offset, data } => {
                if st.phase != UpdatePhase::Receiving {
                    // Late DATA while verifying (a master's retry) says nothing new.
                    if st.phase == UpdatePhase::Idle {
                        st.reason = UpdateReason::NoOffer;
                    }
                    status(core, outq, id.transfer, Some(&*u));
                    return;
                }
                let end = u64::from(offset) + data.len() as u64;
                if data.len() > usize::from(max_chunk(u)) || end > u64::from(st.size) {
                    bump(&mut core.counters.rx_malformed);
                } else if offset == st.next && !data.is_empty() {
                    if u.write(offset, data).is_err() {
                        st.fail(UpdateReason::FlashError);
                        status(core, outq, id.transfer, Some(&*u));
                        return;
                    }
                    st.next = end as u32;
                }
                // A repeat or a gap is not stored; `next` tells the master where to go on.
                let next = core.update.next;
                let msg = ConfigMessage::UpdateReply(UpdateReply::Progress { next });
                let rid = core.reply_id(Opcode::Update, id);
                core.reply(outq, rid, &msg);
            }
            UpdateRequest::Commit { image } => {
                if st.phase != UpdatePhase::Receiving || image != st.image {
                    if st.phase == UpdatePhase::Idle || image != st.image {
                        st.reason = UpdateReason::NoOffer;
                    }
                } else if st.next < st.size {
                    st.reason = UpdateReason::Incomplete;
                } else {
                    st.phase = UpdatePhase::Verifying;
                    st.reason = UpdateReason::None;
                    st.commit_transfer = id.transfer;
                    st.hasher = Some(sha2::Sha256::new());
                    // `next` now counts the bytes hashed.
                    st.next = 0;
                }
                status(core, outq, id.transfer, Some(&*u));
            }
            UpdateRequest::Abort => {
                if st.phase != UpdatePhase::Verified {
                    st.fail(UpdateReason::Aborted);
                }
                status(core, outq, id.transfer, Some(&*u));
            }
            UpdateRequest::Query => status(core, outq, id.transfer, Some(u)),
            _ => bump(&mut core.counters.rx_malformed),
        }
    }

    /// The update's share of `poll`: one verification step, the Verified answer, and the
    /// reboot once that answer is on the bus.
    pub(crate) fn poll(core: &mut Core, outq: &mut OutQueue, target: Option<&mut dyn Update>) {
        let Some(u) = target else {
            return;
        };
        let st = &mut core.update;
        match st.phase {
            UpdatePhase::Verifying => {
                let mut buf = [0u8; 64];
                let mut done = 0;
                while done < VERIFY_STEP && st.next < st.size {
                    let n = (st.size - st.next).min(buf.len() as u32) as usize;
                    let Some(b) = buf.get_mut(..n) else { break };
                    if u.read(st.next, b).is_err() {
                        st.fail(UpdateReason::FlashError);
                        let t = st.commit_transfer;
                        status(core, outq, t, Some(&*u));
                        return;
                    }
                    if let Some(h) = st.hasher.as_mut() {
                        h.update(&*b);
                    }
                    st.next += n as u32;
                    done += n;
                }
                if st.next < st.size {
                    return;
                }
                let digest: Sha256 = st
                    .hasher
                    .take()
                    .map(|h| h.finalize().into())
                    .unwrap_or([0; 32]);
                let t = st.commit_transfer;
                if digest != st.image {
                    st.fail(UpdateReason::HashMismatch);
                } else if u.mark_bootable(st.size, &st.image).is_err() {
                    st.fail(UpdateReason::FlashError);
                } else {
                    st.phase = UpdatePhase::Verified;
                    st.reason = UpdateReason::None;
                    st.tell_verified = true;
                }
                if outq.free() > 0 {
                    core.update.tell_verified = false;
                    status(core, outq, t, Some(&*u));
                }
            }
            UpdatePhase::Verified => {
                if st.tell_verified {
                    if outq.free() > 0 {
                        st.tell_verified = false;
                        let t = st.commit_transfer;
                        status(core, outq, t, Some(&*u));
                    }
                } else if !st.rebooted && outq.free() == crate::OUT_QUEUE_LEN {
                    // Everything queued (the Verified STATUS last) is on the bus.
                    st.rebooted = true;
                    u.reboot();
                }
            }
            _ => {}
        }
    }

    /// Whether the update has work for the next `poll` now (a verification step, an
    /// answer or the reboot).
    pub(crate) fn busy(core: &Core) -> bool {
        let st = &core.update;
        st.phase == UpdatePhase::Verifying || (st.phase == UpdatePhase::Verified && !st.rebooted)
    }
}

pub use sim::SimFlash;

/// The reference [`Update`]: A/B slots in RAM, for PC-side nodes, tests and the QEMU
/// board (a spare region of its RAM).
mod sim {
    use super::{FlashError, Update};
    use fcan_core::msg::{NodeState, UpdateOffer, UpdateReason};
    use sha2::Digest;

    /// What the boot code reads to choose a slot: written last, in one step.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct BootRecord {
        slot: usize,
        size: u32,
        sha256: [u8; 32],
    }

    /// Two slots of `N` bytes and a boot record, as on a board with A/B flash banks: the
    /// image runs from the slot the record names, updates are staged in the other, and
    /// [`Update::mark_bootable`] rewrites the record in one assignment (the atomic step
    /// a real layout does with one flash word or a record with its own checksum).
    ///
    /// Everything here is what survives a power cut; drop the node and keep the
    /// `SimFlash` to cut power at any moment, then [`SimFlash::boot`] says what boots.
    ///
    /// ```
    /// use fcan_runtime_nostd::update::SimFlash;
    /// use fcan_runtime_nostd::Update;
    /// let mut flash = SimFlash::<64>::new(b"old firmware", "1.0.0");
    /// assert_eq!(flash.boot(), Some(&b"old firmware"[..]));
    /// flash.begin(12).unwrap();
    /// flash.write(0, b"new firmware").unwrap();
    /// assert_eq!(flash.boot(), Some(&b"old firmware"[..])); // staged, not marked
    /// ```
    #[derive(Clone, Debug)]
    pub struct SimFlash<const N: usize> {
        slots: [[u8; N]; 2],
        record: BootRecord,
        version: &'static str,
        /// What the application answers to an offer: `None` keeps the default rule
        /// (refuse while RUNNING).
        pub answer: Option<Result<(), UpdateReason>>,
        /// Writes fail from this offset on (a worn or locked sector).
        pub fail_writes_from: Option<u32>,
        /// Times [`Update::reboot`] was called.
        pub reboots: u32,
        /// Bytes written since the last `begin`.
        pub written: u64,
    }

    impl<const N: usize> SimFlash<N> {
        /// A board running `image` (in slot A) that reports `version`.
        ///
        /// # Panics
        /// If `image` is longer than a slot (a test's mistake, not bus input).
        pub fn new(image: &[u8], version: &'static str) -> Self {
            let mut slots = [[0xFF; N]; 2];
            slots[0][..image.len()].copy_from_slice(image);
            SimFlash {
                slots,
                record: BootRecord {
                    slot: 0,
                    size: image.len() as u32,
                    sha256: sha2::Sha256::digest(image).into(),
                },
                version,
                answer: None,
                fail_writes_from: None,
                reboots: 0,
                written: 0,
            }
        }

        /// What the boot code starts: the image of the slot the boot record names, if its
        /// SHA-256 matches the record (a bootloader's check); `None` would be a brick.
        pub fn boot(&self) -> Option<&[u8]> {
            let r = self.record;
            let image = self.slots.get(r.slot)?.get(..r.size as usize)?;
            let sha: [u8; 32] = sha2::Sha256::digest(image).into();
            (sha == r.sha256).then_some(image)
        }

        /// The version string the next boot reports (a PC-side host reads it after
        /// [`Update::reboot`]).
        pub fn set_version(&mut self, version: &'static str) {
            self.version = version;
        }

        /// The slot the boot record does not name.
        fn staging(&mut self) -> &mut [u8; N] {
            let [a, b] = &mut self.slots;
            if self.record.slot == 0 {
                b
            } else {
                a
            }
        }
    }

    impl<const N: usize> Update for SimFlash<N> {
        fn capacity(&self) -> u32 {
            N as u32
        }

        fn version(&self) -> &str {
            self.version
        }

        fn offered(
            &mut self,
            offer: &UpdateOffer<'_>,
            state: NodeState,
        ) -> Result<(), UpdateReason> {
            let _ = offer;
            match self.answer {
                Some(a) => a,
                None if state == NodeState::Running => Err(UpdateReason::NotSafe),
                None => Ok(()),
            }
        }

        fn begin(&mut self, size: u32) -> Result<(), FlashError> {
            if size as usize > N {
                return Err(FlashError);
            }
            self.written = 0;
            self.staging().fill(0xFF);
            Ok(())
        }

        fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), FlashError> {
            if self
                .fail_writes_from
                .is_some_and(|f| offset + data.len() as u32 > f)
            {
                return Err(FlashError);
            }
            let at = offset as usize;
            let dst = self
                .staging()
                .get_mut(at..at + data.len())
                .ok_or(FlashError)?;
            dst.copy_from_slice(data);
            self.written += data.len() as u64;
            Ok(())
        }

        fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), FlashError> {
            let at = offset as usize;
            let src = self.staging().get(at..at + buf.len()).ok_or(FlashError)?;
            buf.copy_from_slice(src);
            Ok(())
        }

        fn mark_bootable(&mut self, size: u32, sha256: &[u8; 32]) -> Result<(), FlashError> {
            self.record = BootRecord {
                slot: 1 - self.record.slot,
                size,
                sha256: *sha256,
            };
            Ok(())
        }

        fn reboot(&mut self) {
            self.reboots += 1;
        }
    }
}
