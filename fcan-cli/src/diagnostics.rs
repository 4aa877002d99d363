//! Diagnostics on stderr: the one `tracing` subscriber of the `fcan` command (and of the
//! example binaries that run its daemon).
//!
//! The PC-side faces say what they do (a node served, a put refused, a device that came)
//! as `tracing` events under `fcan::…` targets: `fcan::remote`, `fcan::foxglove`,
//! `fcan::ros2`, `fcan::joints`, `fcan::drivers`. Each message is a whole sentence;
//! fields such as `node` repeat parts of it for machines. A face's events are children
//! of the span current when it was started, so the command starts each bus's faces in a
//! [`bus_span`] and the bus shows in every line:
//!
//! ```text
//! fcan serve [robot]: node motor_driver1 (id 1) running: serving 18 topic(s)
//! fcan serve [robot] foxglove: serving on ws://127.0.0.1:8765
//! fcan serve [robot] joints: warning: /robot_joint_commands: refused: `velocity` has 1 values for 2 names
//! ```
//!
//! `program [bus] face: ` as the lines read before the faces used `tracing`; warnings and
//! errors say so after the prefix, and no time stamps (the daemon's supervisor, journald
//! say, adds its own). Events of other crates (Zenoh, the `foxglove` crate) are printed
//! the usual `tracing` way. `RUST_LOG` chooses what is printed ([`DEFAULT_FILTER`]
//! otherwise: fcan's diagnostics, only warnings and errors of everything else, and
//! nothing of Zenoh's).

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// What is printed when `RUST_LOG` is not set: fcan's diagnostics from `info` up, only
/// warnings and errors of the other crates, and nothing of Zenoh's: it warns of every
/// refused connection, and a refused probe of the local daemon is how a plain `fcan`
/// command learns there is none (what matters reaches us as Zenoh's errors anyway).
pub const DEFAULT_FILTER: &str = "warn,zenoh=off,fcan=info";

/// Installs the subscriber for the whole process: events print on stderr, each line
/// starting with `program` (`fcan serve`, `fcan`, `demo`). A second call, or a
/// subscriber installed before, leaves the first in place.
pub fn init(program: &str) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            eprintln!("{program}: RUST_LOG={spec:?} ignored ({e}); using {DEFAULT_FILTER:?}");
            EnvFilter::new(DEFAULT_FILTER)
        }),
        _ => EnvFilter::new(DEFAULT_FILTER),
    };
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(filter)
        .event_format(Lines::new(program))
        .finish();
    // Not `init()`: that would also route the `log` crate's records (RustDDS's) into
    // `tracing`, which were never printed and would be noise.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// A span naming a bus: the faces and device links started inside it tag their events
/// with `bus` (printed `[bus]`). At `info`, like the diagnostics it labels.
pub fn bus_span(bus: &str) -> tracing::Span {
    tracing::info_span!(target: "fcan::cli", "bus", bus = %bus)
}

/// The event format: `program [bus] face: message` for fcan's targets, the `tracing`
/// default without time stamps for the others.
pub struct Lines {
    program: String,
    other: format::Format<format::Full, ()>,
}

impl Lines {
    /// Lines starting with `program`.
    pub fn new(program: &str) -> Lines {
        Lines {
            program: program.to_string(),
            other: format::format().without_time().with_ansi(false),
        }
    }
}

/// A face's word after the bus: none for the daemon's own (the remote API), `devices`
/// for the device links.
fn face_word(face: &str) -> Option<&str> {
    match face {
        "remote" => None,
        "drivers" => Some("devices"),
        other => Some(other),
    }
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let Some(face) = meta.target().strip_prefix("fcan::") else {
            return self.other.format_event(ctx, w, event);
        };
        let mut fields = MessageAndBus::default();
        event.record(&mut fields);
        // The event's own `bus` (the remote server knows its bus), else the innermost
        // span that names one.
        let bus = fields.bus.or_else(|| {
            ctx.event_scope()?.find_map(|span| {
                let ext = span.extensions();
                let text = &ext.get::<FormattedFields<N>>()?.fields;
                bus_of(text).map(str::to_string)
            })
        });
        write!(w, "{}", self.program)?;
        if let Some(bus) = bus {
            write!(w, " [{bus}]")?;
        }
        if let Some(word) = face_word(face) {
            write!(w, " {word}")?;
        }
        let level = match *meta.level() {
            Level::ERROR => "error: ",
            Level::WARN => "warning: ",
            Level::INFO => "",
            Level::DEBUG => "debug: ",
            Level::TRACE => "trace: ",
        };
        writeln!(w, ": {level}{}", fields.message)
    }
}

/// `bus=<name>` in a span's formatted fields (names hold no spaces: bus names are
/// key-safe, transport specs have none).
fn bus_of(fields: &str) -> Option<&str> {
    fields
        .split_whitespace()
        .find_map(|f| f.strip_prefix("bus="))
}

/// An event's message and its `bus` field; the other fields are for machines (the
/// message says what they say).
#[derive(Default)]
struct MessageAndBus {
    message: String,
    bus: Option<String>,
}

impl Visit for MessageAndBus {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "bus" => self.bus = Some(value.to_string()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%x` fields and the formatted message arrive here, as `Debug` of a `Display`.
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "bus" => self.bus = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Stderr for the test: what the subscriber wrote.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What `emit` printed under the command's format and filter (`filter`).
    fn printed(filter: &str, emit: impl FnOnce()) -> String {
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || out.clone())
            .with_ansi(false)
            .with_env_filter(EnvFilter::new(filter))
            .event_format(Lines::new("fcan serve"))
            .finish();
        // The events are emitted on this thread: a thread-local default sees them all.
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = buf.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn fcan_lines_read_as_before() {
        let text = printed(DEFAULT_FILTER, || {
            let span = bus_span("robot");
            // As a face does: the span captured at start is the parent.
            tracing::info!(target: "fcan::foxglove", parent: &span, "serving on ws://x");
            tracing::warn!(
                target: "fcan::joints",
                parent: &span,
                "/cmd: refused: too short"
            );
            tracing::info!(target: "fcan::remote", bus = %"own", node = %"md1", "node md1 running");
            {
                let _in = span.enter();
                let inner = bus_span("sim");
                tracing::info!(target: "fcan::drivers", parent: &inner, "a device answers");
            }
            tracing::info!(target: "fcan::ros2", "no span: no bus");
        });
        assert_eq!(
            text,
            "fcan serve [robot] foxglove: serving on ws://x\n\
             fcan serve [robot] joints: warning: /cmd: refused: too short\n\
             fcan serve [own]: node md1 running\n\
             fcan serve [sim] devices: a device answers\n\
             fcan serve ros2: no span: no bus\n"
        );
    }

    #[test]
    fn others_quiet_below_warn_and_rust_log_widens() {
        let emit = || {
            tracing::info!(target: "foxglove::websocket", "chatter");
            tracing::warn!(target: "foxglove::websocket", "something off");
            // What every `fcan` command without a daemon makes Zenoh say.
            tracing::warn!(target: "zenoh::net::runtime", "Unable to connect");
            tracing::debug!(target: "fcan::remote", "detail");
        };
        let quiet = printed(DEFAULT_FILTER, emit);
        assert!(!quiet.contains("chatter"), "{quiet}");
        assert!(!quiet.contains("Unable to connect"), "{quiet}");
        assert!(!quiet.contains("detail"), "{quiet}");
        assert!(
            quiet.contains("WARN foxglove::websocket: something off"),
            "{quiet}"
        );
        let loud = printed("debug", emit);
        assert!(loud.contains("chatter"), "{loud}");
        assert!(loud.contains("Unable to connect"), "{loud}");
        assert!(loud.contains("fcan serve: debug: detail"), "{loud}");
    }
}
