//! Puts from other sessions: a value on an m2s topic's key, or a batch on
//! `fcan/<bus>/publish`, queued in arrival order and published on the bus by one worker;
//! a refused put is counted and logged, never sent.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::time::Instant;

use fcan_core::msg::DataDirection;
use fcan_master::value::{pack_message, Shape, Value};
use fcan_master::{MasterApi, MasterError};
use serde_json::Value as Json;

use super::Shared;
use crate::keys::{self, Entity};
use crate::wire::batch_from_json_as;
use fcan_master::ErrorKind;

/// A put waiting to be published. Single puts and batches share one queue, so they are
/// published in the order they arrived.
pub(super) enum Put {
    /// A value for the m2s topic named (the payload of a put on its key), and when it
    /// arrived.
    Topic(String, Vec<u8>, Instant),
    /// The payload of a put on `fcan/<bus>/publish`, and when it arrived.
    Batch(Vec<u8>, Instant),
}

impl<M: MasterApi> Shared<M> {
    /// A put refused: counted, logged (the first 20, then one in 1000, so a flood of
    /// bad puts cannot flood the log).
    pub(super) fn reject_put(&self, topic: &str, reason: &str) {
        let n = self.counters.rejected_puts.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= 20 || n.is_multiple_of(1000) {
            tracing::warn!(
                target: super::TARGET,
                parent: &self.span,
                bus = %self.bus,
                "refused put #{n} on {}: {}",
                fcan_master::text::Untrusted(topic),
                fcan_master::text::Untrusted(reason)
            );
        }
    }

    pub(super) fn on_put(&self, s: zenoh::sample::Sample, queue: &tokio::sync::mpsc::Sender<Put>) {
        if s.kind() != zenoh::sample::SampleKind::Put {
            return;
        }
        self.counters.puts.fetch_add(1, Ordering::Relaxed);
        let key = s.key_expr().as_str();
        if s.payload().len() > self.opts.max_payload {
            return self.reject_put(
                key,
                &format!(
                    "payload of {} bytes exceeds the limit of {}",
                    s.payload().len(),
                    self.opts.max_payload
                ),
            );
        }
        let bytes = s.payload().to_bytes().into_owned();
        let put = match keys::parse(key) {
            Some((_, Entity::Topic(name))) => Put::Topic(name, bytes, Instant::now()),
            Some((_, Entity::Publish)) => Put::Batch(bytes, Instant::now()),
            _ => return self.reject_put(key, "not a topic or batch key"),
        };
        if queue.try_send(put).is_err() {
            // The client outran the daemon: as busy as a command the bus cannot take.
            self.counters.busy_puts.fetch_add(1, Ordering::Relaxed);
            self.reject_put(key, "too many puts waiting (queue full)");
        }
    }

    /// Publishes the queued puts in order.
    pub(super) async fn put_worker(self: Arc<Self>, mut rx: tokio::sync::mpsc::Receiver<Put>) {
        while let Some(put) = rx.recv().await {
            let (Put::Topic(_, _, at) | Put::Batch(_, at)) = &put;
            let waited = at.elapsed();
            if waited > self.opts.put_wait {
                // Bounded in time, not only in count: what waited this long would reach
                // the bus stale, behind commands the bus could not take either.
                self.counters.busy_puts.fetch_add(1, Ordering::Relaxed);
                let key = match &put {
                    Put::Topic(name, ..) => name.clone(),
                    Put::Batch(..) => keys::publish(&self.bus).expect("bus name checked"),
                };
                self.reject_put(
                    &key,
                    &format!(
                        "the daemon is busy: the put waited {} ms for the bus (the limit is {} ms)",
                        waited.as_millis(),
                        self.opts.put_wait.as_millis()
                    ),
                );
                continue;
            }
            let (name, bytes) = match put {
                Put::Topic(name, bytes, _) => (name, bytes),
                Put::Batch(bytes, _) => {
                    if let Err(why) = self.publish_batch(&bytes).await {
                        let key = keys::publish(&self.bus).expect("bus name checked");
                        self.reject_put(&key, &why);
                    }
                    continue;
                }
            };
            if let Err(why) = self.not_running(&name).await {
                self.reject_put(&name, &why.message);
                continue;
            }
            let value = match serde_json::from_slice::<Json>(&bytes) {
                Err(e) => {
                    self.reject_put(&name, &format!("not JSON: {e}"));
                    continue;
                }
                Ok(j) => match Value::from_json(&j) {
                    Ok(v) => v,
                    Err(e) => {
                        // No value (a string, null): say what the field there takes.
                        let e = match self.registry(false).await {
                            Ok(r) => match r.topic(&name) {
                                Ok(t) => Value::from_json_as(&j, Shape::Message(&t.fields))
                                    .err()
                                    .unwrap_or(e),
                                Err(_) => e,
                            },
                            Err(_) => e,
                        };
                        self.reject_put(&name, &e.within(&name).to_string());
                        continue;
                    }
                },
            };
            if let Err(e) = self.master.publish(&name, value).await {
                self.count_busy(&e);
                self.reject_put(&name, &e.to_string());
            }
        }
    }

    /// Publishes a batch (the payload of a put on `fcan/<bus>/publish`) with one
    /// [`Master::publish_many`], after checking every item as a put on its own key is
    /// checked (an m2s topic, its node RUNNING, the value packs): one bad item refuses
    /// the whole batch, nothing is sent, and the reason names the item.
    pub(super) async fn publish_batch(&self, bytes: &[u8]) -> Result<(), String> {
        let mut registry = self.registry(false).await?;
        let items = batch_from_json_as(bytes, |t| {
            registry.topic(t).ok().map(|t| Shape::Message(&t.fields))
        })?;
        for (name, value) in &items {
            // As for a put on a topic key: a node that is not RUNNING is named as such
            // (its topics are not in the registry).
            self.not_running(name).await.map_err(|e| e.message)?;
            if registry.topic(name).is_err() {
                // A node may have come since the registry was taken.
                registry = self.registry(true).await?;
            }
            let t = registry.topic(name).map_err(|e| e.to_string())?;
            if t.dir != DataDirection::M2s {
                return Err(format!(
                    "topic {name} is published by the node (s2m), not by a master"
                ));
            }
            pack_message(&t.fields, value).map_err(|e| e.within(name).to_string())?;
        }
        self.master.publish_many(items).await.map_err(|e| {
            self.count_busy(&e);
            e.to_string()
        })
    }

    /// Counts a put refused because commands already wait for the bus: the client
    /// outran it (`busy_puts`; docs/remote.md).
    fn count_busy(&self, e: &MasterError) {
        if e.kind() == ErrorKind::Busy {
            self.counters.busy_puts.fetch_add(1, Ordering::Relaxed);
        }
    }
}
