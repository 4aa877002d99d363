//! Printing reports: text tables for people, or one JSON object per line for scripts.
//!
//! Every string in a view may have come from a node. Text goes through
//! [`Untrusted`] (control and bidi characters written as `\u{…}`), JSON through
//! [`json_safe`] (the same characters as `\uXXXX` escapes: the value read back is
//! unchanged, a terminal shows it inert).

use std::io::Write;

use fcan_master::text::{json_safe, Untrusted};
use fcan_master::value::Value;
use serde::Serialize;

use crate::exec::Sink;
use crate::views::*;
use crate::CliError;

/// How many of the latest events the text monitor keeps on screen.
const RECENT_EVENTS: usize = 5;

/// Prints reports to `out`.
pub(crate) struct Renderer<'a> {
    out: &'a mut dyn Write,
    json: bool,
    /// Text to a terminal: the monitor redraws the screen instead of scrolling.
    tty: bool,
    /// The text monitor's latest event lines.
    recent: Vec<String>,
    /// The last update progress line written (text to a file or pipe prints a report
    /// only when it says something new).
    last_progress: Option<String>,
}

impl<'a> Renderer<'a> {
    /// A renderer writing JSON lines (`json`) or text to `out`; `tty` says `out` is a
    /// terminal (only text to a terminal redraws).
    pub(crate) fn new(out: &'a mut dyn Write, json: bool, tty: bool) -> Self {
        Renderer {
            out,
            json,
            tty: tty && !json,
            recent: Vec::new(),
            last_progress: None,
        }
    }

    fn json_line(&mut self, v: &impl Serialize) -> Result<(), CliError> {
        let text = serde_json::to_string(v).map_err(|e| CliError::Io(e.to_string()))?;
        writeln!(self.out, "{}", json_safe(text))?;
        Ok(())
    }

    fn json_lines<T: Serialize>(&mut self, items: &[T]) -> Result<(), CliError> {
        items.iter().try_for_each(|v| self.json_line(v))
    }

    fn json(&mut self, r: &Report) -> Result<(), CliError> {
        match r {
            Report::Nodes(v) => self.json_lines(v),
            Report::Topics(v) => self.json_lines(v),
            Report::TopicInfo(v) => self.json_line(v),
            Report::Sample(v) => self.json_line(v),
            Report::Published(v) => self.json_line(v),
            Report::Rate(v) => self.json_line(v),
            Report::Services(v) => self.json_lines(v),
            Report::Call(v) => self.json_line(v),
            Report::Params(v) => self.json_lines(v),
            Report::ParamGet(v) | Report::ParamDump(v) => self.json_line(v),
            Report::ParamSet(v) => self.json_line(v),
            Report::ParamLoad(v) => self.json_line(v),
            Report::Schema(v) => self.json_line(v),
            Report::Monitor(v) => self.json_lines(v),
            Report::Plan(v) => self.json_lines(v),
            Report::Dbc(v) => self.json_line(v),
            Report::Recorded(v) => self.json_line(v),
            Report::UpdateProgress(v) => self.json_line(v),
            Report::Updated(v) => self.json_line(v),
        }
    }

    fn text(&mut self, r: Report) -> Result<(), CliError> {
        let out = &mut *self.out;
        match r {
            Report::Nodes(nodes) => nodes_table(out, &nodes)?,
            Report::Topics(topics) => {
                for t in &topics {
                    writeln!(
                        out,
                        "{:<40} {:<4} {:<12} {}",
                        Untrusted(&t.name),
                        direction_name(t.dir),
                        period(t.dir, t.period_us),
                        Untrusted(&t.fields)
                    )?;
                }
            }
            Report::TopicInfo(t) => {
                writeln!(out, "topic:     {}", Untrusted(&t.name))?;
                writeln!(out, "direction: {}", direction_name(t.dir))?;
                writeln!(out, "rate:      {}", period(t.dir, t.period_us))?;
                writeln!(out, "size:      {} bytes", t.size_bytes)?;
                if let Some(r) = &t.ros_type {
                    writeln!(out, "ros type:  {}", Untrusted(r))?;
                }
                writeln!(out, "fields:")?;
                for f in &t.fields {
                    match f.len {
                        Some(n) => writeln!(out, "  {}: [{}; {n}]", Untrusted(&f.name), f.ty)?,
                        None => writeln!(out, "  {}: {}", Untrusted(&f.name), f.ty)?,
                    }
                }
            }
            Report::Sample(s) => writeln!(out, "[{:9.3}] {}", s.t, s.value)?,
            Report::Published(p) => writeln!(
                out,
                "published {} × {} = {}",
                p.published,
                Untrusted(&p.topic),
                p.value
            )?,
            Report::Rate(r) if r.samples < 2 => writeln!(
                out,
                "{}: {} message(s) in {} s — not enough to measure a rate",
                Untrusted(&r.topic),
                r.samples,
                r.window_s
            )?,
            Report::Rate(r) => writeln!(
                out,
                "{}: {:.2} Hz over {} messages (gap min {:.3} ms, max {:.3} ms)",
                Untrusted(&r.topic),
                r.rate_hz,
                r.samples,
                r.min_gap_s * 1e3,
                r.max_gap_s * 1e3
            )?,
            Report::Services(services) => {
                for s in &services {
                    writeln!(
                        out,
                        "{:<40} {} -> {}",
                        Untrusted(&s.name),
                        Untrusted(&s.request),
                        Untrusted(&s.response)
                    )?;
                }
            }
            Report::Call(c) => writeln!(out, "{}", c.response)?,
            Report::Plan(frames) => {
                writeln!(
                    out,
                    "{:<16} {:>3} {:>5} {:<3} {:>3}  topics",
                    "node", "#", "id", "dir", "len"
                )?;
                for f in &frames {
                    let mut kind = String::new();
                    if f.group_parts > 1 {
                        kind = format!(" (part {}/{})", f.group_index + 1, f.group_parts);
                    } else if f.masked {
                        kind = " (masked)".into();
                    }
                    writeln!(
                        out,
                        "{:<16} {:>3} 0x{:03X} {:<3} {:>3}  {}{kind}",
                        Untrusted(&f.node),
                        f.index,
                        f.std_id,
                        f.dir,
                        f.len,
                        Untrusted(&f.topics.join(", "))
                    )?;
                }
            }
            Report::Recorded(r) => writeln!(
                out,
                "wrote {}: {:.1} s, {} messages ({} frames, {} lost) of {} nodes, {} bytes",
                r.file, r.seconds, r.messages, r.frames, r.frames_lost, r.nodes, r.bytes
            )?,
            Report::Dbc(d) => writeln!(
                out,
                "wrote {}: {} messages of {} nodes",
                d.file, d.messages, d.nodes
            )?,
            Report::UpdateProgress(p) => {
                let pct = if p.size > 0 {
                    p.acked as f64 * 100.0 / p.size as f64
                } else {
                    0.0
                };
                let eta = p
                    .eta_s
                    .map_or(String::new(), |s| format!(", {s:.0} s left"));
                let resent = if p.resent > 0 {
                    format!(", {} B resent", p.resent)
                } else {
                    String::new()
                };
                let line = format!(
                    "{} (node {}): {:<9} {:>5.1} % {}/{} B, {:.1} KiB/s{eta}{resent}",
                    Untrusted(&p.name),
                    p.node,
                    p.step,
                    pct,
                    p.acked,
                    p.size,
                    p.rate / 1024.0
                );
                // To a terminal the line redraws in place (a progress bar); to a file or
                // pipe each report is its own line.
                if self.tty {
                    write!(out, "\r\x1b[K{line}")?;
                    out.flush()?;
                } else if self.last_progress.as_deref() != Some(line.as_str()) {
                    writeln!(out, "{line}")?;
                    self.last_progress = Some(line);
                }
            }
            Report::Updated(u) => {
                if self.tty {
                    write!(out, "\r\x1b[K")?;
                }
                let version = u
                    .version
                    .as_deref()
                    .map_or("?".to_string(), |v| Untrusted(v).to_string());
                if u.event == "aborted" {
                    writeln!(
                        out,
                        "{} (node {}): update aborted; it runs the firmware it had ({version})",
                        Untrusted(&u.name),
                        u.node
                    )?;
                } else if u.event == "skipped" {
                    writeln!(
                        out,
                        "{} (node {}): skipped, it runs that schema already (firmware {version})",
                        Untrusted(&u.name),
                        u.node
                    )?;
                } else {
                    let schema = u.schema.as_deref().map_or("?", |s| &s[..16.min(s.len())]);
                    writeln!(
                        out,
                        "{} (node {}): runs firmware {version}, schema {schema}{}",
                        Untrusted(&u.name),
                        u.node,
                        if u.schema_changed {
                            " (new)"
                        } else {
                            " (unchanged)"
                        }
                    )?;
                    let list = |v: &Vec<String>| {
                        if v.is_empty() {
                            "none".to_string()
                        } else {
                            Untrusted(&v.join(", ")).to_string()
                        }
                    };
                    if u.schema_changed || !u.restored.is_empty() {
                        writeln!(out, "  parameters restored: {}", list(&u.restored))?;
                    } else {
                        // The same schema: the master sets every parameter set so far
                        // again, under the same numbers (nothing to carry, none to list).
                        writeln!(
                            out,
                            "  parameters: the schema is the same, every one set so far is set again"
                        )?;
                    }
                    if !u.dropped.is_empty() {
                        writeln!(
                            out,
                            "  not in the new schema, not restored: {}",
                            list(&u.dropped)
                        )?;
                    }
                }
            }
            Report::Params(params) => {
                let show = |v: &Option<Value>| v.as_ref().map_or("-".to_string(), Value::to_string);
                for p in &params {
                    writeln!(
                        out,
                        "{:<44} {:<5} default {:<8} min {:<8} max {}",
                        Untrusted(&p.name),
                        p.ty,
                        p.default.to_string(),
                        show(&p.min),
                        show(&p.max)
                    )?;
                }
            }
            Report::ParamGet(p) => writeln!(out, "{}", p.value)?,
            Report::ParamSet(p) => writeln!(out, "{} = {}", Untrusted(&p.name), p.value)?,
            Report::ParamDump(p) => writeln!(out, "{}: {}", Untrusted(&p.name), p.value)?,
            Report::ParamLoad(p) => match &p.error {
                None => writeln!(out, "{}: ok", Untrusted(&p.name))?,
                Some(e) => writeln!(out, "{}: {}", Untrusted(&p.name), Untrusted(e))?,
            },
            Report::Schema(s) => write!(out, "{}", schema_text(&s))?,
            Report::Monitor(buses) => {
                // A daemon's buses each name their events; one bus needs no prefix.
                for m in &buses {
                    self.recent.extend(m.events.iter().map(|e| match &m.bus {
                        Some(bus) if buses.len() > 1 => format!("[{}] {}", Untrusted(bus), e.text),
                        _ => e.text.clone(),
                    }));
                }
                let excess = self.recent.len().saturating_sub(RECENT_EVENTS);
                self.recent.drain(..excess);
                if self.tty {
                    write!(out, "\x1b[2J\x1b[H")?;
                }
                for m in &buses {
                    monitor_text(out, m)?;
                }
                for line in &self.recent {
                    writeln!(out, "  · {line}")?;
                }
                if !self.tty {
                    writeln!(out)?;
                }
            }
        }
        Ok(())
    }
}

impl Sink for Renderer<'_> {
    fn emit(&mut self, report: Report) -> Result<(), CliError> {
        if self.json {
            self.json(&report)?;
        } else {
            self.text(report)?;
        }
        // Streams show each message as it comes.
        self.out.flush()?;
        Ok(())
    }
}

/// A topic's rate for people.
fn period(dir: fcan_core::msg::DataDirection, us: u32) -> String {
    use fcan_core::msg::DataDirection;
    match (dir, us) {
        (DataDirection::M2s, _) => "on publish".into(),
        (DataDirection::S2m, 0) => "on commit".into(),
        (DataDirection::S2m, us) => format!("{} Hz", 1e6 / us as f64),
    }
}

/// `fcan nodes`: one row per node under a header.
fn nodes_table(out: &mut dyn Write, nodes: &[NodeView]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>3}  {:<20} {:<14} {:<16} {:<8} {:>7} {:>6}  SCHEMA",
        "ID", "NAME", "STATE", "PHASE", "MODE", "PLANNED", "ERRORS"
    )?;
    for n in nodes {
        let mut digest = n
            .digest
            .map_or("-".to_string(), |d| d.to_string()[..16].to_string());
        if let Some(source) = n.schema_source {
            digest.push_str(&format!(" ({})", source.as_str()));
        }
        if let Some(driver) = &n.driver {
            digest.push_str(&format!(" driver: {}", Untrusted(driver)));
            match n.watchdog {
                // Loud: this device keeps its last command when the bus owner dies.
                Some(w @ fcan_master::DeviceWatchdog::Off) => {
                    digest.push_str(&format!(", WATCHDOG {}", w.to_string().to_uppercase()))
                }
                Some(w) => digest.push_str(&format!(", watchdog {w}")),
                None => {}
            }
        }
        if let Some(v) = &n.firmware {
            digest.push_str(&format!(" firmware {}", Untrusted(v)));
        }
        if let Some(boot) = n.collision {
            digest.push_str(&format!(
                " COLLISION: another board (boot {boot:#010x}) answers to this id"
            ));
        }
        writeln!(
            out,
            "{:>3}  {:<20} {:<14} {:<16} {:<8} {:>7} {:>6}  {digest}",
            n.id.get(),
            Untrusted(&n.name),
            node_state_name(n.state),
            Untrusted(&n.phase.to_string()),
            bus_mode_name(n.mode),
            n.frames,
            n.errors
        )?;
    }
    Ok(())
}

/// The joints' status for the monitor's `joints:` line: the status text (`active`,
/// `configuring: …`), a fault with its cause first: `faulted: feedback timeout (host
/// side): …` when the fault's text begins with it, else `faulted (node lost): …`.
fn joints_text(j: &JointsView) -> String {
    match (j.state.as_str(), &j.cause, &j.fault) {
        ("faulted", Some(cause), Some(fault)) => {
            let words = cause.replace('_', " ");
            if fault.starts_with(&words) {
                format!("faulted: {}", Untrusted(fault))
            } else {
                format!("faulted ({}): {}", Untrusted(&words), Untrusted(fault))
            }
        }
        _ => Untrusted(&j.text).to_string(),
    }
}

/// One bus of a `fcan monitor` refresh (the latest events go under every bus).
fn monitor_text(out: &mut dyn Write, m: &MonitorView) -> std::io::Result<()> {
    let bus = m
        .bus
        .as_ref()
        .map_or(String::new(), |b| format!("bus {} — ", Untrusted(b)));
    writeln!(
        out,
        "fcan monitor — {bus}{} node(s), bus load {:.1} % (at 1/5 Mbit/s), rx {} frames ({:.0}/s), \
         tx {} frames ({:.0}/s), retries {}, malformed {}",
        m.nodes.len(),
        m.bus_load * 100.0,
        m.rx_frames,
        m.rx_per_s,
        m.tx_frames,
        m.tx_per_s,
        m.retries,
        m.rx_malformed
    )?;
    if let Some(j) = &m.joints {
        writeln!(out, "joints: {}", joints_text(j))?;
    }
    writeln!(
        out,
        "{:>3}  {:<20} {:<16} {:<8} {:>6}",
        "ID", "NAME", "PHASE", "MODE", "ERRORS"
    )?;
    for node in &m.nodes {
        writeln!(
            out,
            "{:>3}  {:<20} {:<16} {:<8} {:>6}",
            node.id,
            Untrusted(&node.name),
            Untrusted(&node.phase.to_string()),
            bus_mode_name(node.mode),
            node.errors
        )?;
    }
    writeln!(out, "{:<44} {:>10}", "TOPIC", "RATE")?;
    for (k, rate) in &m.rates_hz {
        writeln!(out, "{:<44} {rate:>8.1}/s", Untrusted(k))?;
    }
    Ok(())
}

/// A schema as YAML, the way `fcan schema show` prints it: the schema language
/// `fcan-codegen` reads, so the output compiles back to the same blob (the same
/// SHA-256) as long as no name came with characters the escaping changed.
fn schema_text(s: &SchemaView) -> String {
    use std::fmt::Write as _;
    let opt = |name: &str, v: &Option<Value>| {
        v.as_ref()
            .map_or(String::new(), |v| format!(", {name}: {v}"))
    };
    let ros = |r: &Option<RosView>| {
        r.as_ref().map_or(String::new(), |r| {
            let map: Vec<String> = r
                .map
                .iter()
                .map(|(k, v)| format!("{}: {}", Untrusted(k), Untrusted(v)))
                .collect();
            format!(
                ", ros: {{type: {}, map: {{{}}}}}",
                Untrusted(&r.ty),
                map.join(", ")
            )
        })
    };
    let mut o = String::new();
    let _ = writeln!(o, "# sha256 {}", s.digest);
    let _ = writeln!(o, "node: {}\nprotocol: {}", Untrusted(&s.node), s.protocol);
    let _ = writeln!(o, "options: {{allocation: {}}}", Untrusted(&s.allocation));
    let l = &s.limits;
    let _ = writeln!(
        o,
        "limits: {{max_frames: {}, max_copy_entries: {}, service_buffer: {}, service_reassembly: {}}}",
        l.max_frames, l.max_copy_entries, l.service_buffer, l.service_reassembly
    );
    let _ = writeln!(o, "types:");
    for t in &s.types {
        let _ = writeln!(o, "  {}:", Untrusted(&t.name));
        if !t.params.is_empty() {
            let _ = writeln!(o, "    params:");
            for p in &t.params {
                let len = p.len.map_or(String::new(), |n| format!(", len: {n}"));
                let _ = writeln!(
                    o,
                    "      {}: {{type: {}{len}, default: {}{}{}}}",
                    Untrusted(&p.name),
                    p.ty,
                    p.default,
                    opt("min", &p.min),
                    opt("max", &p.max)
                );
            }
        }
        if !t.topics.is_empty() {
            let _ = writeln!(o, "    topics:");
            for tp in &t.topics {
                // A period is an s2m topic's (0: on commit); an m2s topic has none.
                let period = match tp.dir {
                    fcan_core::msg::DataDirection::S2m => format!(", period_us: {}", tp.period_us),
                    fcan_core::msg::DataDirection::M2s => String::new(),
                };
                let _ = writeln!(
                    o,
                    "      {}: {{dir: {}{period}, fields: {}{}}}",
                    Untrusted(&tp.name),
                    direction_name(tp.dir),
                    yaml_fields(&tp.fields),
                    ros(&tp.ros)
                );
            }
        }
        if !t.services.is_empty() {
            let _ = writeln!(o, "    services:");
            for sv in &t.services {
                let _ = writeln!(
                    o,
                    "      {}: {{request: {}, response: {}{}}}",
                    Untrusted(&sv.name),
                    yaml_fields(&sv.request),
                    yaml_fields(&sv.response),
                    ros(&sv.ros)
                );
            }
        }
    }
    let _ = writeln!(o, "instances:");
    for a in &s.instances {
        let _ = writeln!(
            o,
            "  - {{type: {}, max_count: {}, ns: \"{}\"}}",
            Untrusted(&a.ty),
            a.max_count,
            Untrusted(&a.ns)
        );
    }
    o
}

/// A message's fields in the schema language: `{position: f32, raw: {type: u8, len: 4}}`.
fn yaml_fields(fields: &[FieldView]) -> String {
    let each: Vec<String> = fields
        .iter()
        .map(|f| match f.len {
            Some(n) => format!("{}: {{type: {}, len: {n}}}", Untrusted(&f.name), f.ty),
            None => format!("{}: {}", Untrusted(&f.name), f.ty),
        })
        .collect();
    format!("{{{}}}", each.join(", "))
}

/// One line for people about an engine event, or `None` for the chatty ones: the same
/// text the remote API sends (`fcan_master::json::describe_event`).
pub use fcan_master::json::describe_event;

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::hash::SchemaDigest;
    use fcan_core::msg::{BusMode, DataDirection};
    use fcan_master::Phase;

    const HOSTILE: &str = "\x1b[2J\u{202e}x";

    fn render(json: bool, reports: Vec<Report>) -> String {
        let mut out = Vec::new();
        let mut r = Renderer::new(&mut out, json, false);
        for report in reports {
            r.emit(report).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    fn progress(step: &str, acked: u64) -> Report {
        Report::UpdateProgress(UpdateProgressView {
            event: "progress",
            node: 7,
            name: "io_board7".into(),
            step: step.into(),
            acked,
            size: 100,
            rate: 0.0,
            eta_s: None,
            resent: 0,
        })
    }

    fn updated(schema_changed: bool, restored: &[&str]) -> Report {
        Report::Updated(UpdatedView {
            event: "done",
            node: 7,
            name: "io_board7".into(),
            version: Some("2.0.0".into()),
            schema: Some("ab".repeat(32)),
            schema_changed,
            restored: restored.iter().map(|s| s.to_string()).collect(),
            dropped: Vec::new(),
        })
    }

    /// Issue 38 item 12: to a file or pipe, a progress report that says nothing new is
    /// not printed again (the master repeats `rebooting 100.0 %` while it waits).
    #[test]
    fn update_progress_to_a_pipe_prints_each_line_once() {
        let text = render(
            false,
            vec![
                progress("sending", 50),
                progress("sending", 100),
                progress("rebooting", 100),
                progress("rebooting", 100),
                progress("rebooting", 100),
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(text.matches("rebooting").count(), 1, "{text}");
    }

    /// Issue 38 item 12: an update to the same schema keeps every parameter set (the
    /// master sets them again): not `parameters restored: none`.
    #[test]
    fn an_update_to_the_same_schema_does_not_say_no_parameter_was_restored() {
        let text = render(false, vec![updated(false, &[])]);
        assert!(!text.contains("restored: none"), "{text}");
        assert!(text.contains("every one set so far is set again"), "{text}");
        let text = render(false, vec![updated(true, &[])]);
        assert!(text.contains("parameters restored: none"), "{text}");
        let text = render(false, vec![updated(true, &["io_board7.out0.settle_ms"])]);
        assert!(
            text.contains("parameters restored: io_board7.out0.settle_ms"),
            "{text}"
        );
    }

    fn node(id: u8, name: &str, phase: Phase) -> NodeView {
        // A node as the master lists it (`NodeInfo` is built only by a master, or read
        // from its JSON).
        let mut n: fcan_master::NodeInfo = serde_json::from_value(serde_json::json!({
            "id": id, "name": name, "phase": "running", "state": "running", "boot_id": 7,
            "mode": "fd_brs", "frames": 12, "errors": 0,
            "schema": SchemaDigest::of(b"blob").to_string(), "schema_source": "cache",
        }))
        .unwrap();
        n.phase = phase;
        NodeView(n)
    }

    fn inert(text: &str) -> bool {
        !text
            .chars()
            .any(|c| c != '\n' && fcan_master::text::is_unsafe(c))
    }

    #[test]
    fn nodes_text_is_a_table_of_stable_names_with_node_text_escaped() {
        let text = render(
            false,
            vec![Report::Nodes(vec![
                node(3, "md3", Phase::Running),
                node(4, HOSTILE, Phase::Failed(format!("bad name {HOSTILE}"))),
            ])],
        );
        assert!(inert(&text), "{text:?}");
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            ["ID", "NAME", "STATE", "PHASE", "MODE", "PLANNED", "ERRORS", "SCHEMA"]
        );
        let digest = SchemaDigest::of(b"blob").to_string();
        assert_eq!(
            rows[1],
            [
                "3",
                "md3",
                "running",
                "running",
                "fd_brs",
                "12",
                "0",
                &digest[..16],
                "(cache)"
            ]
        );
        assert!(text.contains("\\u{1b}[2J\\u{202e}x"), "{text}");
    }

    #[test]
    fn nodes_json_is_one_object_per_node_with_the_documented_fields() {
        let text = render(
            true,
            vec![Report::Nodes(vec![
                node(3, "md3", Phase::Running),
                node(4, HOSTILE, Phase::Offline),
            ])],
        );
        assert!(inert(&text), "{text:?}");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        let n = &lines[0];
        let keys: Vec<&str> = n.as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected = [
            "id",
            "name",
            "phase",
            "state",
            "boot_id",
            "mode",
            "frames",
            "errors",
            "schema",
            "schema_source",
            "driver",
            "watchdog",
            "firmware",
            "collision",
        ];
        expected.sort();
        assert_eq!(keys, expected);
        assert_eq!(n["driver"], serde_json::Value::Null, "an fcan board");
        assert_eq!(n["watchdog"], serde_json::Value::Null, "an fcan board");
        assert_eq!(n["id"], 3);
        assert_eq!(n["state"], "running");
        assert_eq!(n["mode"], "fd_brs");
        assert_eq!(n["phase"], "running");
        assert_eq!(n["schema"], SchemaDigest::of(b"blob").to_string());
        assert_eq!(n["schema_source"], "cache");
        // The same string back, once parsed.
        assert_eq!(lines[1]["name"], HOSTILE);
        assert_eq!(lines[1]["phase"], "offline");
    }

    #[test]
    fn values_lines_and_lists() {
        let v = Value::Struct(vec![("on".into(), Value::Bool(true))]);
        let text = render(
            false,
            vec![
                Report::Sample(SampleView {
                    topic: "/a/b/c".into(),
                    t: 1.5,
                    value: v.clone(),
                }),
                Report::ParamSet(ParamSetView {
                    name: "a.b.kp".into(),
                    value: Value::Float(0.5),
                    set: true,
                }),
                Report::ParamDump(ParamValueView {
                    name: "a.b.kp".into(),
                    value: Value::Float(0.5),
                }),
                Report::Topics(vec![TopicView {
                    name: "/a/b/fb".into(),
                    dir: DataDirection::S2m,
                    period_us: 5000,
                    fields: "{position: f32}".into(),
                }]),
                Report::ParamLoad(ParamLoadView {
                    name: "a.b.kp".into(),
                    ok: false,
                    error: Some(format!("above its max 100 {HOSTILE}")),
                }),
            ],
        );
        assert!(inert(&text), "{text:?}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "[    1.500] {\"on\":true}");
        assert_eq!(lines[1], "a.b.kp = 0.5");
        assert_eq!(lines[2], "a.b.kp: 0.5");
        let topic: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(topic, ["/a/b/fb", "s2m", "200", "Hz", "{position:", "f32}"]);
        assert!(
            lines[4].starts_with("a.b.kp: above its max 100"),
            "{}",
            lines[4]
        );

        let json = render(
            true,
            vec![Report::Sample(SampleView {
                topic: "/a/b/c".into(),
                t: 1.5,
                value: v,
            })],
        );
        let j: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"topic": "/a/b/c", "t": 1.5, "value": {"on": true}})
        );
    }

    fn monitor(events: &[&str]) -> Report {
        Report::Monitor(vec![MonitorView {
            bus: None,
            nodes: vec![MonitorNodeView {
                id: 3,
                name: "md3".into(),
                phase: Phase::Running,
                mode: BusMode::Classic,
                errors: 0,
            }],
            rates_hz: [("/md3/m0/fb".to_string(), 200.0)].into(),
            bus_load: 0.25,
            rx_frames: 10,
            tx_frames: 5,
            rx_per_s: 10.0,
            tx_per_s: 5.0,
            retries: 0,
            rx_malformed: 0,
            events: events
                .iter()
                .map(|t| EventView {
                    kind: "online".into(),
                    node: Some(3),
                    text: t.to_string(),
                })
                .collect(),
            joints: None,
        }])
    }

    fn joints(state: &str, cause: Option<&str>, fault: Option<&str>) -> JointsView {
        JointsView {
            state: state.into(),
            cause: cause.map(str::to_string),
            fault: fault.map(str::to_string),
            text: match fault {
                Some(f) => format!("{state}: {f}"),
                None => state.into(),
            },
            since: 1.5,
        }
    }

    /// A bus whose daemon runs joints gets a `joints:` line under its header, the fault
    /// with its cause first (said once), and `joints` in the JSON; a bus without joints
    /// gets neither.
    #[test]
    fn monitor_shows_the_joints_status_only_when_there_are_joints() {
        let with = |j: Option<JointsView>| {
            let Report::Monitor(mut v) = monitor(&[]) else {
                unreachable!()
            };
            v[0].joints = j;
            Report::Monitor(v)
        };
        let text = render(false, vec![with(None)]);
        assert!(!text.contains("joints"), "{text}");
        let json = render(true, vec![with(None)]);
        assert!(!json.contains("joints"), "{json}");

        let stale = "feedback timeout (host side): state right_wheel/position is 250ms old";
        let text = render(
            false,
            vec![
                with(Some(joints("active", None, None))),
                with(Some(joints(
                    "faulted",
                    Some("feedback_timeout"),
                    Some(stale),
                ))),
                with(Some(joints(
                    "faulted",
                    Some("node_lost"),
                    Some("node motor_driver2 went offline"),
                ))),
            ],
        );
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("joints")).collect();
        assert_eq!(
            lines,
            [
                "joints: active".to_string(),
                format!("joints: faulted: {stale}"),
                "joints: faulted (node lost): node motor_driver2 went offline".to_string(),
            ],
            "{text}"
        );
        let first: Vec<&str> = text.lines().skip(1).take(1).collect();
        assert_eq!(first, ["joints: active"], "under the header: {text}");

        let json = render(
            true,
            vec![with(Some(joints(
                "faulted",
                Some("feedback_timeout"),
                Some(stale),
            )))],
        );
        let j: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(
            j["joints"],
            serde_json::json!({"state": "faulted", "cause": "feedback_timeout", "fault": stale,
                "text": format!("faulted: {stale}"), "since": 1.5})
        );
    }

    #[test]
    fn monitor_text_shows_the_latest_five_events_and_json_only_new_ones() {
        let text = render(
            false,
            vec![monitor(&["e1", "e2", "e3", "e4"]), monitor(&["e5", "e6"])],
        );
        let refreshes: Vec<&str> = text.split("fcan monitor — ").skip(1).collect();
        assert_eq!(refreshes.len(), 2, "{text}");
        assert!(refreshes[0].contains("bus load 25.0 %"), "{text}");
        assert!(refreshes[0].contains("md3") && refreshes[0].contains("classic"));
        assert!(refreshes[0].contains("  · e1"), "{text}");
        assert!(!refreshes[1].contains("· e1"), "{text}");
        for e in ["e2", "e3", "e4", "e5", "e6"] {
            assert!(refreshes[1].contains(&format!("  · {e}")), "{text}");
        }
        let json = render(true, vec![monitor(&["e1"]), monitor(&[])]);
        let lines: Vec<serde_json::Value> = json
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["events"][0]["kind"], "online");
        assert_eq!(lines[0]["nodes"][0]["mode"], "classic");
        assert_eq!(lines[0]["rates_hz"]["/md3/m0/fb"], 200.0);
        assert_eq!(lines[1]["events"], serde_json::json!([]));
    }

    #[test]
    fn schema_text_from_its_view() {
        let s = SchemaView {
            digest: "ab".repeat(32),
            node: format!("n{HOSTILE}"),
            protocol: 1,
            allocation: "static".into(),
            limits: LimitsView {
                max_frames: 8,
                max_copy_entries: 32,
                service_buffer: 64,
                service_reassembly: 64,
            },
            types: vec![SchemaTypeView {
                name: "motor".into(),
                params: vec![SchemaParamView {
                    name: "kp".into(),
                    ty: "f32".into(),
                    default: Value::Float(0.5),
                    min: None,
                    max: Some(Value::UInt(100)),
                    len: None,
                }],
                topics: vec![SchemaTopicView {
                    name: "target".into(),
                    dir: DataDirection::M2s,
                    period_us: 0,
                    fields: vec![FieldView {
                        name: "raw".into(),
                        ty: "u8".into(),
                        len: Some(4),
                    }],
                    ros: None,
                }],
                services: vec![],
            }],
            instances: vec![SchemaInstancesView {
                ty: "motor".into(),
                max_count: 8,
                ns: "motor{i}".into(),
            }],
        };
        let text = render(false, vec![Report::Schema(Box::new(s))]);
        assert!(inert(&text), "{text:?}");
        for line in [
            "node: n\\u{1b}[2J\\u{202e}x",
            "      kp: {type: f32, default: 0.5, max: 100}",
            "      target: {dir: m2s, fields: {raw: {type: u8, len: 4}}}",
            "  - {type: motor, max_count: 8, ns: \"motor{i}\"}",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
        }
    }
}
