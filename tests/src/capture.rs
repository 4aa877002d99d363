//! The `tracing` events of a face, captured per test.
//!
//! The faces (the remote server, Foxglove, the ROS 2 bridge and joints, the device link)
//! emit their diagnostics as `tracing` events whose parent is the span current when the
//! face was started. Their tasks run on tokio's worker threads, and a test binary runs
//! its tests on threads of their own, at once: a thread-local subscriber
//! (`with_default`) would miss the workers' events, and one global list would mix the
//! tests'. So one global subscriber (installed by the first [`Capture::new`]) files each
//! event under the capture span it descends from, and a test starts its face inside its
//! own capture's [`span`](Capture::span):
//!
//! ```ignore
//! let cap = Capture::new();
//! let server = FoxgloveServer::start(m, addr, opts).instrument(cap.span().clone()).await?;
//! // …
//! assert!(cap.text().contains("INFO fcan::foxglove: serving on ws://"));
//! ```

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Span, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

type Lines = Arc<Mutex<Vec<String>>>;

/// The open captures' lines, by capture id.
fn sinks() -> MutexGuard<'static, HashMap<u64, Lines>> {
    static SINKS: OnceLock<Mutex<HashMap<u64, Lines>>> = OnceLock::new();
    SINKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The events emitted under one span, one line each: `LEVEL target: message field=value…`.
pub struct Capture {
    id: u64,
    span: Span,
    lines: Lines,
}

impl Capture {
    /// A new capture (and, the first time in the process, the global subscriber).
    ///
    /// Panics if another global subscriber was installed first: it would get the events
    /// and every assertion on a capture would fail for the wrong reason.
    #[allow(clippy::new_without_default)] // each one is a fresh, distinct capture
    pub fn new() -> Capture {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Filing))
                .expect("no other global tracing subscriber in this test binary");
        });
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let lines = Lines::default();
        sinks().insert(id, lines.clone());
        let span = tracing::info_span!("capture", capture = id);
        Capture { id, span, lines }
    }

    /// The span to start the face in (`Instrument::instrument`, `Span::in_scope`).
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The lines so far, one per line.
    pub fn text(&self) -> String {
        self.lines().join("\n")
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        sinks().remove(&self.id);
    }
}

/// The layer that files events by capture.
struct Filing;

/// A capture span's id, kept in the span's extensions.
struct CaptureId(u64);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Filing {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut v = IdField(None);
        attrs.record(&mut v);
        if let (Some(c), Some(span)) = (v.0, ctx.span(id)) {
            span.extensions_mut().insert(CaptureId(c));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let Some(id) = scope
            .into_iter()
            .find_map(|s| s.extensions().get::<CaptureId>().map(|c| c.0))
        else {
            return;
        };
        let Some(lines) = sinks().get(&id).cloned() else {
            return;
        };
        let meta = event.metadata();
        let mut text = Text::default();
        event.record(&mut text);
        let line = format!(
            "{} {}: {}{}",
            meta.level(),
            meta.target(),
            text.message,
            text.fields
        );
        lines.lock().unwrap().push(line);
    }
}

struct IdField(Option<u64>);

impl Visit for IdField {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "capture" {
            self.0 = Some(value);
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn fmt::Debug) {}
}

/// An event's message and its other fields (` name=value` each).
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events reach the capture whose span they descend from, from any thread, and no
    /// other capture.
    #[test]
    fn files_by_span_across_threads() {
        let a = Capture::new();
        let b = Capture::new();
        let span = a.span().clone();
        std::thread::spawn(move || {
            tracing::warn!(target: "fcan::test", parent: &span, node = %"md1", "from a thread");
        })
        .join()
        .unwrap();
        b.span()
            .in_scope(|| tracing::info!(target: "fcan::test", "in scope"));
        tracing::info!(target: "fcan::test", "no capture");
        assert_eq!(a.lines(), ["WARN fcan::test: from a thread node=md1"]);
        assert_eq!(b.lines(), ["INFO fcan::test: in scope"]);
    }
}
