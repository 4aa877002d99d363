//! Carving the application's one RAM area into the node's parts.
//!
//! `fcan_node_init` takes a single 8-byte-aligned area; the node, its descriptor copy and
//! every buffer are placed in it one after another. The same walk without writing
//! (`Arena::measure`) is what `fcan_node_ram_needed` returns, so the two cannot disagree.
//! Written here rather than taken from a crate: a bump allocator over a caller's bytes
//! that never frees is twenty lines, and the allocator crates assume a global heap.

use core::mem::{align_of, size_of};

/// Alignment the application's RAM area must have (`uint64_t`).
pub const RAM_ALIGN: usize = 8;

pub struct Arena {
    base: *mut u8,
    len: usize,
    used: usize,
    /// Measuring: compute offsets only, write nothing (`base` is null).
    dry: bool,
}

impl Arena {
    /// An arena over `len` bytes at `base` (aligned to [`RAM_ALIGN`], checked by the caller).
    ///
    /// # Safety
    /// `base` is valid for writes of `len` bytes for `'static` (until the application
    /// reuses the area for another node), and nothing else uses it.
    pub unsafe fn new(base: *mut u8, len: usize) -> Arena {
        Arena {
            base,
            len,
            used: 0,
            dry: false,
        }
    }

    /// An arena that only counts: [`Arena::used`] after the same takes is the bytes a
    /// real one needs.
    pub fn measure() -> Arena {
        Arena {
            base: core::ptr::null_mut(),
            len: usize::MAX,
            used: 0,
            dry: true,
        }
    }

    /// Bytes taken so far (with alignment padding).
    pub fn used(&self) -> usize {
        self.used
    }

    fn reserve<T>(&mut self, n: usize) -> Option<usize> {
        let start = self.used.checked_next_multiple_of(align_of::<T>())?;
        let end = start.checked_add(n.checked_mul(size_of::<T>())?)?;
        if end > self.len {
            return None;
        }
        self.used = end;
        Some(start)
    }

    /// `n` elements, each `init`, as a slice living as long as the area. `None` when the
    /// area is too small; `Some(&mut [])` from a measuring arena (nothing may use it).
    pub fn slice<T: Copy>(&mut self, n: usize, init: T) -> Option<&'static mut [T]> {
        let start = self.reserve::<T>(n)?;
        if self.dry {
            return Some(&mut []);
        }
        // SAFETY: `start..start + n * size_of::<T>()` is inside the area (`reserve`),
        // aligned for `T` (the base is 8-aligned and `start` a multiple of `T`'s
        // alignment, which is at most 8 for every type placed here), and taken by no
        // other slice (`used` only grows). Each element is written before the slice is
        // made.
        unsafe {
            let p = self.base.add(start).cast::<T>();
            for i in 0..n {
                p.add(i).write(init);
            }
            Some(core::slice::from_raw_parts_mut(p, n))
        }
    }

    /// Room for one `T` (not written): the caller writes it. `None` when measuring or
    /// when the area is too small.
    pub fn place<T>(&mut self) -> Option<*mut T> {
        let start = self.reserve::<T>(1)?;
        if self.dry {
            return None;
        }
        // SAFETY: in bounds and aligned, as in `slice`.
        Some(unsafe { self.base.add(start).cast::<T>() })
    }
}

impl Arena {
    /// Whether this arena only measures.
    pub fn is_dry(&self) -> bool {
        self.dry
    }
}
