//! Firmware updates through C callbacks: the runtime's `Update` (the staging flash and
//! the application's say) over an `fcan_update_t` the application keeps.

use core::ffi::CStr;

use fcan_runtime_nostd::fcan_core::msg::{NodeState, UpdateOffer, UpdateReason};
use fcan_runtime_nostd::{FlashError, Update};

use crate::abi::*;

/// The application's update callbacks, every required one present.
pub(crate) struct CUpdate {
    t: &'static fcan_update_t,
}

impl CUpdate {
    /// `None` for NULL or a table missing a required callback.
    pub(crate) fn of(t: *const fcan_update_t) -> Option<CUpdate> {
        // SAFETY: NULL or a table that outlives the node (`fcan_node_set_update`).
        let t: &'static fcan_update_t = unsafe { t.as_ref() }?;
        let complete = t.begin.is_some()
            && t.write.is_some()
            && t.read.is_some()
            && t.mark_bootable.is_some()
            && t.reboot.is_some();
        complete.then_some(CUpdate { t })
    }
}

fn done(rc: Option<i32>) -> Result<(), FlashError> {
    match rc {
        Some(0) => Ok(()),
        _ => Err(FlashError),
    }
}

impl Update for CUpdate {
    fn capacity(&self) -> u32 {
        self.t.capacity
    }

    fn chunk(&self) -> u16 {
        match self.t.chunk {
            0 => 256,
            n => n,
        }
    }

    fn version(&self) -> &str {
        if self.t.version.is_null() {
            return "";
        }
        // SAFETY: a NUL-terminated string the table keeps (the caller's contract).
        unsafe { CStr::from_ptr(self.t.version) }
            .to_str()
            .unwrap_or("")
    }

    fn offered(&mut self, offer: &UpdateOffer<'_>, state: NodeState) -> Result<(), UpdateReason> {
        let Some(cb) = self.t.offered else {
            return if state == NodeState::Running {
                Err(UpdateReason::NotSafe)
            } else {
                Ok(())
            };
        };
        let c = fcan_update_offer_t {
            size: offer.size,
            node_len: offer.node.len() as u32,
            version_len: offer.version.len() as u32,
            reserved: 0,
            image_sha256: offer.image,
            schema_sha256: offer.schema,
            node: offer.node.as_ptr(),
            version: offer.version.as_ptr(),
        };
        // SAFETY: the application's callback; `c` and the strings live through the call.
        match unsafe { cb(self.t.user, &c, state as u8 as i32) } {
            FCAN_UPDATE_ACCEPT => Ok(()),
            code => Err(u8::try_from(code)
                .ok()
                .and_then(UpdateReason::from_u8)
                .filter(|r| *r != UpdateReason::None)
                .unwrap_or(UpdateReason::Refused)),
        }
    }

    fn begin(&mut self, size: u32) -> Result<(), FlashError> {
        // SAFETY: the application's callback (checked present in `of`).
        done(self.t.begin.map(|f| unsafe { f(self.t.user, size) }))
    }

    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), FlashError> {
        // SAFETY: as `begin`; `data` holds `len` bytes through the call.
        done(
            self.t
                .write
                .map(|f| unsafe { f(self.t.user, offset, data.as_ptr(), data.len() as u32) }),
        )
    }

    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), FlashError> {
        // SAFETY: as `begin`; `buf` holds `len` writable bytes through the call.
        done(
            self.t
                .read
                .map(|f| unsafe { f(self.t.user, offset, buf.as_mut_ptr(), buf.len() as u32) }),
        )
    }

    fn mark_bootable(&mut self, size: u32, sha256: &[u8; 32]) -> Result<(), FlashError> {
        // SAFETY: as `begin`; the hash lives through the call.
        done(
            self.t
                .mark_bootable
                .map(|f| unsafe { f(self.t.user, size, sha256.as_ptr()) }),
        )
    }

    fn reboot(&mut self) {
        if let Some(f) = self.t.reboot {
            // SAFETY: as `begin`.
            unsafe { f(self.t.user) }
        }
    }
}
