//! A fake node's firmware, for firmware updates over the bus (`docs/protocol.md` §3.14):
//! the runtime's [`Update`] over two images on the heap, as a board's A/B slots.
//!
//! A fake node's firmware *is* its schema blob: an image written into a fake node is the
//! blob of the schema the "new build" announces. After the node verifies and marks it,
//! [`crate::FakeNode::poll`] boots the fake again from that blob, with a new boot id and
//! the offered version, as a board reboots into its new firmware. An image that is not
//! a valid schema blob does not boot: the fake comes back with the firmware it had, as a
//! bootloader that refuses an image would.

use fcan_core::msg::{NodeState, UpdateOffer, UpdateReason};
use fcan_runtime_nostd::update::{FlashError, Update};

/// The largest image a fake node takes (its "staging area").
pub const FAKE_IMAGE_CAPACITY: u32 = 1 << 20;

/// The two slots and the boot record of a fake node.
#[derive(Debug)]
pub(crate) struct FakeFirmware {
    /// The version the running firmware reports.
    version: String,
    /// The staging slot.
    staged: Vec<u8>,
    /// The version of the image offered last (what it reports once it boots).
    offered_version: String,
    /// The image marked bootable, waiting for the reboot.
    marked: Option<(Vec<u8>, String)>,
    /// `Update::reboot` was called.
    reboot: bool,
}

impl FakeFirmware {
    pub(crate) fn new(version: &str) -> FakeFirmware {
        FakeFirmware {
            version: version.to_owned(),
            staged: Vec::new(),
            offered_version: String::new(),
            marked: None,
            reboot: false,
        }
    }

    pub(crate) fn version(&self) -> &str {
        &self.version
    }

    /// The image to boot and its version, once the node asked to reboot into it.
    pub(crate) fn take_reboot(&mut self) -> Option<(Vec<u8>, String)> {
        if !std::mem::take(&mut self.reboot) {
            return None;
        }
        self.marked.take()
    }
}

impl Update for FakeFirmware {
    fn capacity(&self) -> u32 {
        FAKE_IMAGE_CAPACITY
    }

    fn version(&self) -> &str {
        &self.version
    }

    /// A fake node drives nothing: it accepts in every state.
    fn offered(&mut self, offer: &UpdateOffer<'_>, _state: NodeState) -> Result<(), UpdateReason> {
        self.offered_version = offer.version.to_owned();
        Ok(())
    }

    fn begin(&mut self, size: u32) -> Result<(), FlashError> {
        if size > FAKE_IMAGE_CAPACITY {
            return Err(FlashError);
        }
        self.staged.clear();
        self.staged.resize(size as usize, 0xFF);
        Ok(())
    }

    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), FlashError> {
        let at = offset as usize;
        self.staged
            .get_mut(at..at + data.len())
            .ok_or(FlashError)?
            .copy_from_slice(data);
        Ok(())
    }

    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), FlashError> {
        let at = offset as usize;
        buf.copy_from_slice(self.staged.get(at..at + buf.len()).ok_or(FlashError)?);
        Ok(())
    }

    fn mark_bootable(&mut self, size: u32, _sha256: &[u8; 32]) -> Result<(), FlashError> {
        let image = self.staged.get(..size as usize).ok_or(FlashError)?.to_vec();
        self.marked = Some((image, self.offered_version.clone()));
        Ok(())
    }

    fn reboot(&mut self) {
        self.reboot = true;
    }
}
