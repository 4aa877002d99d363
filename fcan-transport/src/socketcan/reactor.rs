//! Registering a socket with tokio's reactor: the crate's only `unsafe` code.
//!
//! Since tokio 1.54 the constructors of [`AsyncFd`] that take any [`AsRawFd`](std::os::fd::AsRawFd) are either
//! deprecated or `unsafe`, because tokio cannot check that the descriptor stays open and
//! the same for the `AsyncFd`'s life. [`register`] takes the socket by value, which is
//! what makes that true here.

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::Sock;

/// Hands `sock` to tokio's reactor for read and write readiness. Must be called inside a
/// tokio runtime.
pub(super) fn register(sock: Sock) -> std::io::Result<AsyncFd<Sock>> {
    // SAFETY: `Sock` owns its descriptor (a `socketcan` socket, closed only when dropped)
    // and `as_raw_fd` always returns that one descriptor. The `AsyncFd` takes the `Sock` by
    // value and this crate never swaps it out (`get_mut`/`into_inner` are not used), so
    // the descriptor is open and unchanged for as long as tokio has it registered.
    unsafe { AsyncFd::register_with_interest(sock, Interest::READABLE | Interest::WRITABLE) }
        .map_err(|e| e.into())
}

// Exercised by every SocketCAN test in `tests/socketcan_vm.rs` (run in the VM): `open`
// registers through here, and every send and receive waits on the readiness it provides.
