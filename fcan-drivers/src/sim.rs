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

/// Runs simulated devices on a link until it closes: every frame from the bus goes to
/// each device, their replies and reports go out in order. The host loop of
/// `fcan fake --device`, the demo's devices and the tests' (on the simulated bus).
pub async fn run<T: fcan_transport::Transport>(mut link: T, mut devices: Vec<Box<dyn SimDevice>>) {
    use fcan_transport::TransportError;
    let base = tokio::time::Instant::now();
    let now_us = move || base.elapsed().as_micros() as u64;
    let mut out: Vec<Frame> = Vec::new();
    loop {
        let now = now_us();
        for d in &mut devices {
            if d.poll_at().is_some_and(|t| t <= now) {
                d.poll(now, &mut out);
            }
        }
        for f in out.drain(..) {
            // Any other failure loses the frame, as a real device's controller would.
            if let Err(TransportError::Closed) = link.send(&f).await {
                return;
            }
        }
        let wake = devices.iter().filter_map(|d| d.poll_at()).min();
        let sleep = async move {
            match wake {
                Some(t) => {
                    tokio::time::sleep_until(base + std::time::Duration::from_micros(t)).await
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = link.recv() => match r {
                Ok(rx) => {
                    let at = rx.at.saturating_duration_since(base.into_std()).as_micros() as u64;
                    for d in &mut devices {
                        d.receive(at, &rx.frame, &mut out);
                    }
                }
                Err(e) if e.is_fatal() => return,
                Err(_) => {}
            },
            _ = sleep => {}
        }
    }
}

/// A simulated device shared with the code that runs it, so a test or the demo can look
/// at it (and fault, move or reboot it) while it answers on the bus.
impl<D: SimDevice> SimDevice for std::sync::Arc<std::sync::Mutex<D>> {
    fn describe(&self) -> String {
        self.lock().unwrap_or_else(|p| p.into_inner()).describe()
    }
    fn receive(&mut self, now_us: u64, frame: &Frame, out: &mut Vec<Frame>) {
        self.lock()
            .unwrap_or_else(|p| p.into_inner())
            .receive(now_us, frame, out)
    }
    fn poll_at(&self) -> Option<u64> {
        self.lock().unwrap_or_else(|p| p.into_inner()).poll_at()
    }
    fn poll(&mut self, now_us: u64, out: &mut Vec<Frame>) {
        self.lock()
            .unwrap_or_else(|p| p.into_inner())
            .poll(now_us, out)
    }
}
