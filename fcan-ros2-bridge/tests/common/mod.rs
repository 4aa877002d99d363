//! The in-memory DDS the bridge's and the joints' tests run on: every sample written is
//! kept by DDS topic, readers are fed by the test, live writers are counted.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use fcan_ros2_bridge::dds::{Dds, DdsError, DdsWriter, Endpoint, Gid, Reader, Received};
use fcan_ros2_bridge::rpc::SampleId;
use futures_util::stream::BoxStream;
use tokio::sync::mpsc;

/// A sample written and its related sample identity.
pub type Written = (Vec<u8>, Option<SampleId>);

/// Every sample written, by DDS topic; readers fed by the test; live writers counted.
#[derive(Clone, Default)]
pub struct MemDds {
    pub written: Arc<Mutex<BTreeMap<String, Vec<Written>>>>,
    pub feeds: Arc<Mutex<BTreeMap<String, mpsc::UnboundedSender<Received>>>>,
    pub made: Arc<AtomicUsize>,
    pub live_writers: Arc<AtomicUsize>,
}

pub struct MemWriter {
    topic: String,
    dds: MemDds,
    gid: Gid,
}

/// A fresh GUID per endpoint: the participant's prefix and a counter.
pub fn next_gid(dds: &MemDds) -> Gid {
    let n = dds.made.fetch_add(1, Ordering::SeqCst) as u32;
    let mut g = [7u8; 16];
    g[12..].copy_from_slice(&n.to_be_bytes());
    g
}

impl Drop for MemWriter {
    fn drop(&mut self) {
        self.dds.live_writers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl DdsWriter for MemWriter {
    fn write(
        &self,
        cdr: &[u8],
        related: Option<SampleId>,
        _source_time: Option<std::time::SystemTime>,
    ) -> Result<(), DdsError> {
        let mut w = self.dds.written.lock().unwrap();
        w.entry(self.topic.clone())
            .or_default()
            .push((cdr.to_vec(), related));
        Ok(())
    }
    fn gid(&self) -> Gid {
        self.gid
    }
}

impl Dds for MemDds {
    type Writer = MemWriter;
    fn writer(&self, e: &Endpoint) -> Result<MemWriter, DdsError> {
        let gid = next_gid(self);
        self.live_writers.fetch_add(1, Ordering::SeqCst);
        Ok(MemWriter {
            topic: e.topic.clone(),
            dds: self.clone(),
            gid,
        })
    }
    fn gid(&self) -> Gid {
        [7; 16]
    }
    fn reader(&self, e: &Endpoint) -> Result<Reader, DdsError> {
        let gid = next_gid(self);
        let (tx, rx) = mpsc::unbounded_channel();
        self.feeds.lock().unwrap().insert(e.topic.clone(), tx);
        let samples: BoxStream<'static, Received> =
            Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|v| (v, rx))
            }));
        Ok(Reader { samples, gid })
    }
}
