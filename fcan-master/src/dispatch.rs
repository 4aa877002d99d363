//! Topic samples to subscribers: the master's hot path from a decoded data frame to the
//! channels of everyone listening. Only topics with a subscriber are turned into
//! [`Value`]s, so an unwatched bus costs a table lookup per topic.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fcan_core::id::NodeId;
use fcan_core::ir::Field;
use tokio::sync::mpsc;

use crate::engine::SampleSink;
use crate::value::{unpack_message_named, Value};

/// One topic value.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// Topic name.
    pub name: Arc<str>,
    /// The value.
    pub value: Value,
    /// When it arrived (for s2m) or was published (m2s).
    pub at: Instant,
}

impl Sample {
    /// A sample of topic `name` (for a master implementation outside this crate, such as
    /// the remote client).
    pub fn new(name: Arc<str>, value: Value, at: Instant) -> Sample {
        Sample { name, value, at }
    }
}

/// The subscribers of one topic: its name, its fields, and their channels.
struct Subscribers {
    name: Arc<str>,
    fields: Vec<Field>,
    names: Vec<Arc<str>>,
    senders: Vec<mpsc::UnboundedSender<Sample>>,
}

/// Routes samples to subscribers and counts every topic's samples (for rates).
#[derive(Default)]
pub struct SubscriberSink {
    subs: BTreeMap<(NodeId, u8, u8), Subscribers>,
    counts: BTreeMap<(NodeId, u8, u8), u64>,
    base: Option<tokio::time::Instant>,
}

impl SubscriberSink {
    /// Sets the instant engine time 0 corresponds to (samples carry `base + at`).
    pub fn set_base(&mut self, base: tokio::time::Instant) {
        self.base = Some(base);
    }

    /// Adds a subscriber to topic `key` = (node, block, topic) named `name`.
    pub fn subscribe(
        &mut self,
        key: (NodeId, u8, u8),
        name: &str,
        fields: &[Field],
        tx: mpsc::UnboundedSender<Sample>,
    ) {
        self.subs
            .entry(key)
            .or_insert_with(|| Subscribers {
                name: Arc::from(name),
                fields: fields.to_vec(),
                names: fields.iter().map(|f| Arc::from(f.name.as_str())).collect(),
                senders: Vec::new(),
            })
            .senders
            .push(tx);
    }

    /// Samples seen per topic since start.
    pub fn counts(&self) -> &BTreeMap<(NodeId, u8, u8), u64> {
        &self.counts
    }
}

impl SampleSink for SubscriberSink {
    fn sample(&mut self, node: NodeId, block: u8, topic: u8, bytes: &[u8], at: u64) {
        *self.counts.entry((node, block, topic)).or_default() += 1;
        let Some(subs) = self.subs.get_mut(&(node, block, topic)) else {
            return;
        };
        // Every receiver dropped (a remote server unsubscribes while nobody watches):
        // nothing to decode for.
        if subs.senders.is_empty() {
            return;
        }
        let Ok(value) = unpack_message_named(&subs.fields, &subs.names, bytes) else {
            return;
        };
        let at = self
            .base
            .map_or_else(Instant::now, |b| b.into_std() + Duration::from_micros(at));
        // Every subscriber but the last gets a clone; the last takes the value itself.
        let mut value = Some(value);
        let n = subs.senders.len();
        let mut i = 0;
        let name = &subs.name;
        subs.senders.retain(|s| {
            i += 1;
            let v = if i == n { value.take() } else { value.clone() };
            let Some(v) = v else { return false };
            // A dropped receiver unsubscribes.
            s.send(Sample {
                name: name.clone(),
                value: v,
                at,
            })
            .is_ok()
        });
    }
}
