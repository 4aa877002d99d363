//! The cycle's I/O side: tasks that move samples into the state cells, watch the
//! mapped nodes, and send the loop's batches and the safe stop. The loop itself
//! ([`super::Cycle`]) only touches the lock-free [`Shared`].

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};

use super::config::Safe;
use super::resolve::{command_range, command_value, field_value, set_field, state_number, Layout};
use super::store::{Shared, WriteMode};
use super::Fault;
use fcan_master::api::MasterApi;
use fcan_master::value::Value;
use fcan_master::MasterEvent;
use fcan_master::Sample;

/// Moves every sample of state topic `t` into its cell.
pub(crate) async fn receive(
    mut rx: mpsc::UnboundedReceiver<Sample>,
    shared: Arc<Shared>,
    layout: Arc<Layout>,
    t: usize,
) {
    let topic = &layout.state_topics[t];
    let Some(cell) = shared.cells.get(t) else {
        return;
    };
    while let Some(sample) = rx.recv().await {
        let at = shared.stamp(sample.at);
        // A value the schema says is a number always is; a sample that is not (none
        // reach here from a master) leaves its slot as it was, and the age still
        // moves on only when every pick is good.
        let picks = topic
            .picks
            .iter()
            .enumerate()
            .filter_map(|(pos, &(f, e, _))| {
                field_value(&sample.value, f, e)
                    .and_then(state_number)
                    .map(|v| (pos, v))
            });
        cell.write(at, picks);
    }
    shared.raise(Fault::MasterGone {
        topic: topic.name.as_str().into(),
    });
}

/// Raises [`Fault::NodeLost`] when a mapped node goes offline, reboots or fails while
/// the loop is active.
pub(crate) async fn watch_nodes(
    mut events: broadcast::Receiver<MasterEvent>,
    shared: Arc<Shared>,
    layout: Arc<Layout>,
) {
    loop {
        let event = match events.recv().await {
            Ok(e) => e,
            // Events were lost while this task was not scheduled: whatever they said,
            // the states' ages still catch a node that stopped.
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let (node, what): (_, Arc<str>) = match &event {
            MasterEvent::Offline { node } => (*node, "went offline".into()),
            MasterEvent::Rebooted { node, .. } => (*node, "rebooted".into()),
            MasterEvent::Failed { node, reason } => (*node, format!("failed: {reason}").into()),
            _ => continue,
        };
        if shared.mode() != WriteMode::Normal {
            continue;
        }
        if let Some(n) = layout.nodes.iter().find(|n| n.id == node) {
            shared.raise(Fault::NodeLost {
                node: n.name.clone(),
                what,
            });
        }
    }
}

/// Sends the loop's batches (newest values; batches the master had no time for are
/// merged) and, on a safe stop, the safe commands `repeats` times `interval` apart,
/// then falls silent.
pub(crate) async fn writer<M: MasterApi>(
    master: M,
    shared: Arc<Shared>,
    layout: Arc<Layout>,
    repeats: u32,
    interval: Duration,
) {
    let mut seen = 0u64;
    // The messages, built once and updated in place: only the driven fields change.
    let mut messages: Vec<Value> = layout
        .command_topics
        .iter()
        .map(|t| t.template.clone())
        .collect();
    loop {
        shared.wake.notified().await;
        match shared.mode() {
            WriteMode::Silent => {}
            WriteMode::Normal => {
                let written = shared.written.load(Ordering::Acquire);
                if written <= seen {
                    continue;
                }
                if written > seen + 1 {
                    shared
                        .coalesced
                        .fetch_add(written - seen - 1, Ordering::Relaxed);
                }
                seen = written;
                fill(&layout, &mut messages, |c| {
                    f64::from_bits(shared.commands[c].load(Ordering::Relaxed))
                });
                let batch = batch(&layout, &messages, None);
                match master.publish_many(batch).await {
                    Ok(()) => {
                        shared.sent.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => shared.raise(Fault::WriteRefused {
                        reason: e.to_string().into(),
                    }),
                }
            }
            WriteMode::Flush => {
                // Deactivation: the commands in force, once, per node; no disable.
                fill(&layout, &mut messages, |c| {
                    f64::from_bits(shared.commands[c].load(Ordering::Relaxed))
                });
                for node in &layout.nodes {
                    let batch = batch(&layout, &messages, Some(node.id));
                    if !batch.is_empty() && master.publish_many(batch).await.is_ok() {
                        shared.flush_sends.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if shared.mode() == WriteMode::Flush {
                    shared.set_mode(WriteMode::Silent);
                }
                shared.stopped.notify_waiters();
            }
            WriteMode::SafeStop => {
                // `hold` commands: the measured value of their state, taken once, now
                // (a snapshot, not a moving target).
                let holds = hold_values(&shared, &layout);
                fill(&layout, &mut messages, |c| match layout.commands[c].safe {
                    Safe::Value(v) => v,
                    Safe::Hold => holds[c],
                });
                for i in 0..repeats {
                    // One batch per node: a node that is gone (the usual reason for a
                    // safe stop) must not keep the others from stopping.
                    for node in &layout.nodes {
                        let batch = batch(&layout, &messages, Some(node.id));
                        if !batch.is_empty() && master.publish_many(batch).await.is_ok() {
                            shared.safe_sends.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if i + 1 < repeats {
                        tokio::time::sleep(interval).await;
                    }
                }
                // Silent unless the mode changed meanwhile (it cannot: activation waits
                // for the stop to end).
                if shared.mode() == WriteMode::SafeStop {
                    shared.set_mode(WriteMode::Silent);
                }
                shared.stopped.notify_waiters();
            }
        }
    }
}

/// Per command: the last measured value of its state for a `hold`, else (and when that
/// state cannot be read) the command in force.
fn hold_values(shared: &Shared, layout: &Layout) -> Vec<f64> {
    let mut scratch = vec![0.0; shared.cells.iter().map(|c| c.len()).max().unwrap_or(0)];
    layout
        .commands
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let current = f64::from_bits(shared.commands[i].load(Ordering::Relaxed));
            let Some((cell, pos)) = c.cell.filter(|_| c.safe == Safe::Hold) else {
                return current;
            };
            let Some(cell_ref) = shared.cells.get(cell) else {
                return current;
            };
            let n = cell_ref.len();
            match cell_ref.read(&mut scratch[..n]) {
                Some(at) if at != 0 && scratch[pos].is_finite() => {
                    let (lo, hi) = command_range(c.ty);
                    scratch[pos].clamp(lo, hi)
                }
                _ => current,
            }
        })
        .collect()
}

/// Sets every driven field of every message from `value(command index)`.
fn fill(layout: &Layout, messages: &mut [Value], value: impl Fn(usize) -> f64) {
    for (t, topic) in layout.command_topics.iter().enumerate() {
        for &(f, e, c) in &topic.drives {
            let ty = layout.commands[c].ty;
            set_field(&mut messages[t], f, e, command_value(ty, value(c)));
        }
    }
}

/// The messages as a `publish_many` batch, of one node or all.
fn batch(
    layout: &Layout,
    messages: &[Value],
    node: Option<fcan_core::id::NodeId>,
) -> Vec<(String, Value)> {
    layout
        .command_topics
        .iter()
        .zip(messages)
        .filter(|(t, _)| node.is_none_or(|n| t.node == n))
        .map(|(t, m)| (t.name.clone(), m.clone()))
        .collect()
}

/// A safe stop or a flush under way.
fn stopping(mode: WriteMode) -> bool {
    matches!(mode, WriteMode::SafeStop | WriteMode::Flush)
}

/// Waits until no safe stop (or flush) runs, until `deadline`. `false`: still running.
pub(crate) async fn wait_stopped(shared: &Shared, deadline: tokio::time::Instant) -> bool {
    loop {
        let notified = shared.stopped.notified();
        tokio::pin!(notified);
        // Registered before the check: a stop ending in between is not missed.
        notified.as_mut().enable();
        if !stopping(shared.mode()) {
            return true;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return !stopping(shared.mode());
        }
    }
}

/// Whether `answer` holds every field of `expect` with that value (numbers compared as
/// numbers: `1` matches `1.0`).
pub(crate) fn check_expected(answer: &Value, expect: &serde_json::Value) -> Result<(), String> {
    let got = answer.to_json();
    let matches = |want: &serde_json::Value, got: &serde_json::Value| match (want, got) {
        (serde_json::Value::Number(a), serde_json::Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    };
    let Some(want) = expect.as_object() else {
        return if matches(expect, &got) {
            Ok(())
        } else {
            Err(format!("answered {got}, expected {expect}"))
        };
    };
    for (k, v) in want {
        match got.get(k) {
            Some(g) if matches(v, g) => {}
            _ => return Err(format!("answered {got}, expected {k} = {v}")),
        }
    }
    Ok(())
}
