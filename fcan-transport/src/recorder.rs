//! A wrapper that logs every frame a transport sends or receives, in candump format
//! (smoltcp's `PcapWriter` idea).
//!
//! Frames are stamped with the wall clock ([`std::time::SystemTime`]) when they pass,
//! which is what candump logs hold; bus events are logged as the error frames SocketCAN
//! would have delivered. Like `candump` on the same interface, the log holds both
//! directions. A write failure fails the `send`/`recv` that caused it, as an
//! [`Io`](TransportError::Io) error.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fcan_core::frame::{Frame, Mtu};

use super::candump::CandumpWriter;
use super::{Received, Transport, TransportError};

/// Logs all traffic of the wrapped transport. See the [module docs](self).
#[derive(Debug)]
pub struct Recorder<T, W> {
    inner: T,
    log: CandumpWriter<W>,
    iface: String,
}

fn wall_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

impl<T: Transport, W: Write + Send> Recorder<T, W> {
    /// Wraps `inner`, logging to `log` under the transport's name.
    pub fn new(inner: T, log: CandumpWriter<W>) -> Self {
        let iface = inner.name().to_string();
        Recorder { inner, log, iface }
    }

    /// Logs under `iface` instead of the transport's name.
    pub fn with_iface(mut self, iface: &str) -> Self {
        self.iface = iface.to_string();
        self
    }

    /// The wrapped transport.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Flushes and returns the transport and the log.
    pub fn into_parts(mut self) -> (T, CandumpWriter<W>) {
        let _ = self.log.flush();
        (self.inner, self.log)
    }
}

impl<T: Transport, W: Write + Send> Transport for Recorder<T, W> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn mtu(&self) -> Mtu {
        self.inner.mtu()
    }

    fn node_origin(&self, node: fcan_core::id::NodeId) -> Option<crate::NodeOrigin> {
        self.inner.node_origin(node)
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        self.inner.send(frame).await?;
        self.log.write_frame(wall_now(), &self.iface, frame)?;
        Ok(())
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        match self.inner.recv().await {
            Ok(rx) => {
                self.log.write_frame(wall_now(), &self.iface, &rx.frame)?;
                Ok(rx)
            }
            Err(e) => {
                self.log.write_error(wall_now(), &self.iface, &e)?;
                Err(e)
            }
        }
    }
}
