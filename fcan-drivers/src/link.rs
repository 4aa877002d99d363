//! The I/O shell around a [`DeviceHost`]: a [`Transport`] that wraps the real link, so a
//! master started on it (`Master::start(DeviceLink::new(link, host), …)`) serves fcan
//! boards and driven devices on one bus with no change of its own.
//!
//! The master's engine keeps its `recv` pending in its `select!` loop, so the host's
//! timers run inside [`Transport::recv`]: it returns the device nodes' frames, polls the
//! host when it is due, sends the drivers' frames, and passes on every bus frame no device
//! claims.

use std::time::Instant;

use fcan_core::frame::{Frame, Mtu};
use fcan_core::id::NodeId;
use fcan_transport::{Received, Transport, TransportError};

use crate::device::Severity;
use crate::host::{DeviceHost, Route};

/// How long to wait before trying again to send a driver's frame the link refused for
/// want of room (a wedged or overloaded bus).
const RETRY_US: u64 = 2_000;

/// The target of the host's notes (devices that came and went) as `tracing` events.
const TARGET: &str = "fcan::drivers";

/// A link with devices on it. See the [module docs](self).
pub struct DeviceLink<T> {
    inner: T,
    host: DeviceHost,
    base: Instant,
    /// No sending to the bus before this (the link refused for want of room).
    hold_until: u64,
    /// The span current when the link was made: the parent of its notes, which are
    /// emitted inside the master's task where no span of the caller's is current.
    span: tracing::Span,
}

impl<T: Transport> DeviceLink<T> {
    /// `inner` with `host`'s devices on it. The host's notes (devices that came and
    /// went) are `tracing` events with the target `fcan::drivers`, children of the span
    /// current now (a program with several buses makes each link in a span naming its
    /// bus).
    pub fn new(inner: T, host: DeviceHost) -> DeviceLink<T> {
        DeviceLink {
            inner,
            host,
            base: fcan_transport::now(),
            hold_until: 0,
            span: tracing::Span::current(),
        }
    }

    /// The host (counters, which node is whose).
    pub fn host(&self) -> &DeviceHost {
        &self.host
    }

    fn now(&self) -> u64 {
        self.at(fcan_transport::now())
    }

    fn at(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_micros() as u64
    }

    fn instant(&self, us: u64) -> tokio::time::Instant {
        (self.base + std::time::Duration::from_micros(us)).into()
    }

    fn flush_notes(&mut self) {
        for n in self.host.take_notes() {
            match n.severity {
                Severity::Info => tracing::info!(target: TARGET, parent: &self.span, "{n}"),
                Severity::Warn => tracing::warn!(target: TARGET, parent: &self.span, "{n}"),
                Severity::Error => tracing::error!(target: TARGET, parent: &self.span, "{n}"),
            }
        }
    }

    /// Sends what the drivers queued, until the link refuses for want of room (then the
    /// devices hear the bus is wedged and sending waits [`RETRY_US`]).
    async fn flush_to_bus(&mut self) -> Result<(), TransportError> {
        let now = self.now();
        if now < self.hold_until {
            return Ok(());
        }
        while let Some(f) = self.host.peek_to_bus().copied() {
            match self.inner.send(&f).await {
                Ok(()) => self.host.sent_to_bus(),
                Err(TransportError::TxQueueFull) | Err(TransportError::BusOff) => {
                    let now = self.now();
                    self.host.bus_wedged(now);
                    self.hold_until = now + RETRY_US;
                    return Ok(());
                }
                Err(e) if e.is_fatal() => return Err(e),
                // A frame the link will never take (none of ours should be): drop it.
                Err(_) => self.host.sent_to_bus(),
            }
        }
        Ok(())
    }
}

impl<T: Transport> Transport for DeviceLink<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn mtu(&self) -> Mtu {
        self.inner.mtu()
    }

    fn node_origin(&self, node: NodeId) -> Option<fcan_transport::NodeOrigin> {
        self.host.origin(node)
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        let now = self.now();
        match self.host.from_master(now, frame) {
            Route::Devices => Ok(()),
            Route::Bus | Route::Both => self.inner.send(frame).await,
        }
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        loop {
            self.flush_notes();
            if let Some(frame) = self.host.pop_to_master() {
                return Ok(Received {
                    frame,
                    at: fcan_transport::now(),
                });
            }
            self.flush_to_bus().await?;
            let now = self.now();
            let mut wake = self.host.poll_at(now);
            if self.host.peek_to_bus().is_some() {
                wake = Some(wake.map_or(self.hold_until, |w| w.min(self.hold_until)));
            }
            let deadline = wake.map(|t| self.instant(t));
            let sleep = async move {
                match deadline {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = self.inner.recv() => match r {
                    Ok(rx) => {
                        let at = self.at(rx.at);
                        if !self.host.from_bus(at, &rx.frame) {
                            return Ok(rx);
                        }
                        // The device's node publishes what this frame said before the
                        // next frame is taken: one sample per device frame, none merged.
                        let now = self.now();
                        self.host.poll(now);
                    }
                    Err(e) => {
                        if e.is_bus_event() {
                            let now = self.now();
                            self.host.bus_wedged(now);
                        }
                        return Err(e);
                    }
                },
                _ = sleep => {
                    let now = self.now();
                    self.host.poll(now);
                }
            }
        }
    }
}
