//! Simulated devices: models of off-the-shelf devices that answer on a bus as the real
//! ones do, for tests, the demo and `fcan fake --device`. Sans I/O, like the drivers:
//! frames and time in, frames out.

use fcan_core::frame::Frame;

/// A simulated device on a bus. Time is microseconds on a monotonic clock that starts
/// wherever the caller likes (it never wraps in practice: `u64`).
pub trait SimDevice: Send {
    /// A short description for logs (`robstride RS03 id 1`).
    fn describe(&self) -> String;
    /// A frame from the bus at `now_us`. Frames this device does not answer to are
    /// ignored; replies go to `out`, in the order the device sends them.
    fn receive(&mut self, now_us: u64, frame: &Frame, out: &mut Vec<Frame>);
    /// When [`poll`](Self::poll) next has work (active reporting, a moving model), or
    /// `None` while idle.
    fn poll_at(&self) -> Option<u64>;
    /// The device's own work due at `now_us` (periodic reports); frames go to `out`.
    fn poll(&mut self, now_us: u64, out: &mut Vec<Frame>);
}
