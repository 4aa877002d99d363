//! The C I/O board in the tests: `examples/c-io-board`'s application and the C code
//! `fcan-codegen c` generates (built by `build.rs` into a static library), running on
//! `fcan-node-c`, the C API over the node runtime, as a [`Firmware`] the host loop drives
//! like the Rust boards.

use std::ffi::c_void;

use fcan_core::frame::Frame;
use fcan_core::msg::NodeState;
use fcan_examples::{Firmware, TxQueue};
use fcan_node::abi::*;
use fcan_runtime_nostd::Transmit;

// The C runtime's symbols come from fcan-node-c; naming the crate links it.
use fcan_node as _;

#[allow(improper_ctypes)]
extern "C" {
    fn c_board_size() -> u32;
    fn c_board_boot(
        b: *mut c_void,
        node_id: u8,
        controller: u8,
        boot_id: u32,
        counts: *const u8,
        transmit: fcan_transmit_fn,
        user: *mut c_void,
    ) -> i32;
    fn c_board_receive(b: *mut c_void, f: *const fcan_frame_t, now_us: u32) -> i32;
    fn c_board_poll(b: *mut c_void, now_us: u32) -> i32;
    fn c_board_node(b: *mut c_void) -> *mut fcan_node_t;
    fn c_board_output(b: *const c_void, i: u32) -> i32;
    fn c_board_calibrations(b: *const c_void) -> u32;
    fn c_hostile_run(seed: u32, frames: u32, out: *mut HostileReport) -> i32;
    fn c_board_enable_update(
        b: *mut c_void,
        version: *const std::ffi::c_char,
        while_running: i32,
    ) -> i32;
    fn c_board_reboot_requested(b: *const c_void) -> i32;
    fn c_board_staged(
        b: *const c_void,
        image: *mut *const u8,
        size: *mut u32,
        sha256: *mut *const u8,
    ) -> i32;
}

/// What a C board held when it rebooted into an update: the image its staging area held
/// and the SHA-256 it was marked bootable with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    /// The staged image.
    pub image: Vec<u8>,
    /// The hash `mark_bootable` got.
    pub sha256: [u8; 32],
}

/// What `tests/c/hostile.c` reports after feeding a C node hostile frames from C.
#[repr(C)]
#[derive(Debug)]
pub struct HostileReport {
    /// Frames `fcan_node_ingest` took.
    pub legal: u32,
    /// Frames refused as illegal (`FCAN_ERR_FRAME`).
    pub illegal: u32,
    /// Calls that returned anything else.
    pub bad_returns: u32,
    /// The node's counters at the end.
    pub counters: fcan_counters_t,
    /// The node's state at the end.
    pub state: i32,
}

/// Runs `tests/c/hostile.c`: `frames` frames from a PRNG seeded with `seed` into the C
/// I/O board, from C. One run at a time (the C side keeps its board in a `static`).
pub fn hostile_run(seed: u32, frames: u32) -> HostileReport {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut r = std::mem::MaybeUninit::<HostileReport>::zeroed();
    let rc = unsafe { c_hostile_run(seed, frames, r.as_mut_ptr()) };
    assert_eq!(rc, FCAN_OK, "the C board boots");
    // SAFETY: zeroed is a valid report (integers only), and the C side filled it.
    unsafe { r.assume_init() }
}

/// Where the transmit callback puts frames: the queue of the poll running.
struct Outbox {
    tx: Option<*mut (dyn Transmit + 'static)>,
}

unsafe extern "C" fn transmit(user: *mut c_void, frame: *const fcan_frame_t) -> i32 {
    // SAFETY: `user` is the board's boxed `Outbox`; `tx` is set for the whole of
    // `c_board_poll`, the only call that transmits.
    let out = unsafe { &mut *user.cast::<Outbox>() };
    let Some(tx) = out.tx.and_then(|t| unsafe { t.as_mut() }) else {
        return 1;
    };
    let Some(f) = (unsafe { &*frame }).to_frame() else {
        panic!("the C node sent an illegal frame");
    };
    match tx.transmit(&f) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// The C I/O board: its RAM (node and application) and where its frames go.
pub struct CIoBoard {
    mem: Box<[u64]>,
    outbox: Box<Outbox>,
    boot: (u8, u32, [u8; 3], bool),
    /// Takes updates: the version it runs, and the one it runs after its next reboot.
    versions: Option<(String, String)>,
    /// Takes offers while RUNNING (otherwise the runtime's default refuses them).
    while_running: bool,
    /// The image staged when it last rebooted into an update.
    pub last_update: Option<Staged>,
    /// Reboots into an update so far.
    pub reboots: u32,
}

// The board's memory is owned by this value alone; the C code keeps no pointer to it
// beyond the call it is in (the app's "current app" pointer is thread-local and only set
// during a poll).
unsafe impl Send for CIoBoard {}

impl CIoBoard {
    /// Boots the board: `counts` outputs, inputs and analog sensors wired; an FD
    /// controller when `fd`.
    pub fn new(node_id: u8, boot_id: u32, counts: [u8; 3], fd: bool) -> Result<CIoBoard, i32> {
        let words = (unsafe { c_board_size() } as usize).div_ceil(8);
        let mut b = CIoBoard {
            mem: vec![0u64; words].into_boxed_slice(),
            outbox: Box::new(Outbox { tx: None }),
            boot: (node_id, boot_id, counts, fd),
            versions: None,
            while_running: false,
            last_update: None,
            reboots: 0,
        };
        b.boot()?;
        Ok(b)
    }

    /// Boots (or reboots) the node in its memory.
    fn boot(&mut self) -> Result<(), i32> {
        let (node_id, boot_id, counts, fd) = self.boot;
        let controller = if fd {
            FCAN_CONTROLLER_FD
        } else {
            FCAN_CONTROLLER_CLASSIC
        };
        let user: *mut Outbox = &mut *self.outbox;
        let rc = unsafe {
            c_board_boot(
                self.ptr(),
                node_id,
                controller,
                boot_id,
                counts.as_ptr(),
                Some(transmit),
                user.cast(),
            )
        };
        if rc != FCAN_OK {
            return Err(rc);
        }
        if let Some((now, _)) = &self.versions {
            let v = std::ffi::CString::new(now.as_str()).unwrap();
            let rc =
                unsafe { c_board_enable_update(self.ptr(), v.as_ptr(), self.while_running as i32) };
            assert_eq!(rc, FCAN_OK, "fcan_node_set_update");
        }
        Ok(())
    }

    /// Takes firmware updates into an 8 KiB RAM staging area, running `version`; after
    /// the reboot an update asks for, it boots again (a new boot id) running `next`.
    /// `while_running`: its `offered` callback takes offers while RUNNING; otherwise it
    /// has none and the runtime's default refuses them then.
    pub fn take_updates(&mut self, version: &str, next: &str, while_running: bool) {
        self.versions = Some((version.into(), next.into()));
        self.while_running = while_running;
        let v = std::ffi::CString::new(version).unwrap();
        let rc = unsafe { c_board_enable_update(self.ptr(), v.as_ptr(), while_running as i32) };
        assert_eq!(rc, FCAN_OK, "fcan_node_set_update");
    }

    /// After a poll: the reboot an update asked for, as a board would do it.
    fn reboot_if_asked(&mut self) {
        if unsafe { c_board_reboot_requested(self.mem.as_ptr().cast()) } == 0 {
            return;
        }
        let (mut image, mut size, mut sha) = (std::ptr::null(), 0u32, std::ptr::null());
        let marked =
            unsafe { c_board_staged(self.mem.as_ptr().cast(), &mut image, &mut size, &mut sha) };
        if marked != 0 {
            self.last_update = Some(Staged {
                image: unsafe { std::slice::from_raw_parts(image, size as usize) }.to_vec(),
                sha256: unsafe { *sha.cast::<[u8; 32]>() },
            });
        }
        self.reboots += 1;
        self.boot.1 = self.boot.1.wrapping_add(0x1000);
        if let Some((now, next)) = self.versions.take() {
            let _ = now;
            self.versions = Some((next.clone(), next));
        }
        self.boot().expect("the board reboots");
    }

    fn ptr(&mut self) -> *mut c_void {
        self.mem.as_mut_ptr().cast()
    }

    /// The C node (for the C API's reads).
    pub fn node(&mut self) -> *mut fcan_node_t {
        unsafe { c_board_node(self.ptr()) }
    }

    /// A topic's current value and generation, through the C API.
    pub fn topic(&mut self, block: u8, topic: u8) -> Option<(Vec<u8>, u32)> {
        let mut buf = [0u8; 64];
        let mut info = fcan_topic_info_t {
            generation: 0,
            received_at_us: 0,
        };
        let n = unsafe {
            fcan_node::fcan_node_topic(self.node(), block, topic, buf.as_mut_ptr(), 64, &mut info)
        };
        (n >= 0).then(|| (buf[..n as usize].to_vec(), info.generation))
    }

    /// The level output `i` drives.
    pub fn output(&self, i: u32) -> Option<bool> {
        match unsafe { c_board_output(self.mem.as_ptr().cast(), i) } {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    /// Times `calibrate` ran.
    pub fn calibrations(&self) -> u32 {
        unsafe { c_board_calibrations(self.mem.as_ptr().cast()) }
    }

    /// `poll`, with the frames it sends handed to `tx`.
    pub fn poll_into(&mut self, now_us: u32, tx: &mut dyn Transmit) {
        let tx: *mut (dyn Transmit + '_) = tx;
        // SAFETY: only the lifetime changes; the pointer is cleared before `tx` is
        // given back to the caller.
        self.outbox.tx = Some(unsafe {
            std::mem::transmute::<*mut (dyn Transmit + '_), *mut (dyn Transmit + 'static)>(tx)
        });
        let rc = unsafe { c_board_poll(self.ptr(), now_us) };
        self.outbox.tx = None;
        assert_eq!(rc, FCAN_OK, "io_board_app_poll");
        self.reboot_if_asked();
    }
}

impl Firmware for CIoBoard {
    fn receive(&mut self, frame: &Frame, now_us: u32) {
        let f = fcan_frame_t::from_frame(frame);
        let rc = unsafe { c_board_receive(self.ptr(), &f, now_us) };
        assert_eq!(rc, FCAN_OK, "io_board_app_receive");
    }
    fn poll(&mut self, now_us: u32, tx: &mut TxQueue) {
        self.poll_into(now_us, tx);
    }
    fn state(&self) -> NodeState {
        let n = unsafe { c_board_node(self.mem.as_ptr() as *mut c_void) };
        let s = unsafe { fcan_node::fcan_node_state(n) };
        NodeState::try_from(s as u8).expect("a node state")
    }
}
