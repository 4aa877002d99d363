//! The board's staging area for firmware updates over the bus (feature `update`): the
//! reference A/B layout (`docs/protocol.md` §3.14) on a spare region. The MPS2 board's
//! "flash" is RAM under QEMU, so the spare slot is a static buffer here; on a real board
//! it is the inactive flash bank, erased a sector at a time, and [`BootRecord`] a flash
//! word pair the boot code reads.
//!
//! The running image is not kept here (it is the ELF QEMU loaded); the slot takes the
//! new one, and the boot record names it only after the node read it back and its
//! SHA-256 matched. What the self-test checks after the update: the record, the slot's
//! bytes hashing to it, and that the node asked to reboot.

use core::cell::RefCell;

use cortex_m::interrupt::Mutex;
use fcan_runtime_nostd::{FlashError, Update};

/// Bytes the spare slot holds: the largest image taken.
pub const SLOT: usize = 4096;

/// The version the running firmware reports.
pub const VERSION: &str = "1.0.0";

/// What boots next: the image in the spare slot with this size and SHA-256, once marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootRecord {
    /// Bytes of the image.
    pub size: u32,
    /// Its SHA-256, checked by the node before marking.
    pub sha256: [u8; 32],
}

struct State {
    slot: [u8; SLOT],
    record: Option<BootRecord>,
    reboots: u32,
}

/// Shared with the self-test through a critical section (single core: interrupts masked).
/// All zero, so it is in `.bss` (no flash image); `begin` "erases" the slot to 0xFF.
static STATE: Mutex<RefCell<State>> = Mutex::new(RefCell::new(State {
    slot: [0; SLOT],
    record: None,
    reboots: 0,
}));

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    cortex_m::interrupt::free(|cs| f(&mut STATE.borrow(cs).borrow_mut()))
}

/// The node's handle on the staging area (the state is in [`STATE`]).
pub struct Staging;

impl Staging {
    /// The one handle, for `MotorDriver::take_updates`; `None` the second time.
    pub fn take() -> Option<&'static mut Staging> {
        cortex_m::singleton!(: Staging = Staging)
    }
}

/// The boot record, if an image was marked.
pub fn record() -> Option<BootRecord> {
    with(|s| s.record)
}

/// Times the node asked to reboot into a marked image.
pub fn reboots() -> u32 {
    with(|s| s.reboots)
}

/// Copies `len` bytes of the slot from `offset` into `out` (for the self-test's check).
pub fn read_slot(offset: usize, out: &mut [u8]) -> bool {
    with(|s| match s.slot.get(offset..offset + out.len()) {
        Some(src) => {
            out.copy_from_slice(src);
            true
        }
        None => false,
    })
}

impl Update for Staging {
    fn capacity(&self) -> u32 {
        SLOT as u32
    }

    fn version(&self) -> &str {
        VERSION
    }

    fn begin(&mut self, size: u32) -> Result<(), FlashError> {
        if size as usize > SLOT {
            return Err(FlashError);
        }
        // "Erase": a flash bank reads 0xFF after it.
        with(|s| s.slot.fill(0xFF));
        Ok(())
    }

    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), FlashError> {
        let at = offset as usize;
        with(|s| {
            s.slot
                .get_mut(at..at + data.len())
                .map(|d| d.copy_from_slice(data))
                .ok_or(FlashError)
        })
    }

    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), FlashError> {
        read_slot(offset as usize, buf)
            .then_some(())
            .ok_or(FlashError)
    }

    fn mark_bootable(&mut self, size: u32, sha256: &[u8; 32]) -> Result<(), FlashError> {
        // The one step that changes what boots: one record, written last.
        with(|s| {
            s.record = Some(BootRecord {
                size,
                sha256: *sha256,
            })
        });
        Ok(())
    }

    fn reboot(&mut self) {
        // A board resets here (SCB::sys_reset) and its boot code starts the marked slot;
        // the self-test stays running to check what was written.
        with(|s| s.reboots += 1);
    }
}
