//! Running a command against a master: asks it, builds the views, hands each [`Report`]
//! to a [`Sink`] as soon as it is known (streams report message by message). Knows
//! nothing of text or JSON, nor where the master runs: every function takes any
//! [`MasterApi`], the in-process `Master` or a daemon's remote client alike.

use std::collections::BTreeMap;
use std::time::Duration;

use fcan_master::text::Untrusted;
use fcan_master::value::{Shape, Value};
use fcan_master::MasterError;
use fcan_master::{MasterApi, Phase};

use crate::args::{Command, MonitorArgs, ParamCmd, SchemaCmd, ServiceCmd, StreamArgs, TopicCmd};
use crate::views::*;
use crate::{parse_value, parse_value_as, CliError};

/// Where reports go (the renderer, or a test's list).
pub(crate) trait Sink {
    /// Takes one report.
    fn emit(&mut self, report: Report) -> Result<(), CliError>;
    /// Says something to the person waiting, beside the output: why a stream is quiet.
    /// Not part of the output: a plain line on stderr, as the one-shot master's note.
    fn note(&mut self, text: &str) {
        eprintln!("fcan: {text}");
    }
}

impl Sink for Vec<Report> {
    fn emit(&mut self, report: Report) -> Result<(), CliError> {
        self.push(report);
        Ok(())
    }

    fn note(&mut self, _text: &str) {}
}

/// Runs `cmd`, reporting to `sink`. A name no running node offers becomes an error that
/// says which nodes have not finished provisioning (the name may be theirs).
pub(crate) async fn run<M: MasterApi>(
    master: &M,
    cmd: &Command,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    match command(master, cmd, sink).await {
        Err(CliError::Master(MasterError::Unknown(u))) => Err(not_found(master, u).await),
        r => r,
    }
}

/// A name that is not among the running nodes' topics, services or parameters. While a
/// node has announced but is not running, the name may well be one of its own: say what
/// did not happen instead of claiming the name does not exist.
async fn not_found<M: MasterApi>(
    master: &M,
    unknown: fcan_master::registry::UnknownName,
) -> CliError {
    let Ok(nodes) = master.nodes().await else {
        return MasterError::Unknown(unknown).into();
    };
    let unfinished: Vec<String> = nodes
        .iter()
        .filter(|n| n.phase != Phase::Running)
        .map(|n| {
            format!(
                "node {} (`{}`) announced but provisioning did not finish: {} (node state {})",
                n.id,
                n.name,
                n.phase,
                node_state_name(n.state)
            )
        })
        .collect();
    if unfinished.is_empty() {
        return MasterError::Unknown(unknown).into();
    }
    CliError::Usage(format!(
        "{} `{}` is not among the running nodes', and {}; it may be one of theirs. \
         Try again, or give discovery more time (--discover-ms)",
        unknown.kind,
        unknown.name,
        unfinished.join("; ")
    ))
}

async fn command<M: MasterApi>(
    master: &M,
    cmd: &Command,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    match cmd {
        Command::Nodes => {
            let nodes = master.nodes().await?;
            sink.emit(Report::Nodes(nodes.iter().map(NodeView::from).collect()))
        }
        Command::Topic(t) => topic(master, t, sink).await,
        Command::Service(s) => service(master, s, sink).await,
        Command::Param(p) => param(master, p, sink).await,
        Command::Schema(s) => {
            // `fcan schema NODE` is `fcan schema show NODE`.
            let node = match s {
                SchemaCmd::Show { node } => node,
                SchemaCmd::Node(words) if words.len() == 1 => &words[0],
                SchemaCmd::Node(words) => {
                    return Err(CliError::Usage(format!(
                        "`fcan schema {}`: give one node: `fcan schema show NODE` (or `fcan schema NODE`)",
                        Untrusted(&words.join(" "))
                    )))
                }
            };
            let nodes = master.nodes().await?;
            let n = nodes
                .iter()
                .find(|n| n.name == *node || node.parse::<u8>().ok() == Some(n.id.get()))
                .ok_or_else(|| {
                    let names: Vec<String> = nodes
                        .iter()
                        .map(|n| format!("{} ({})", Untrusted(&n.name), n.id))
                        .collect();
                    CliError::Usage(format!(
                        "no node `{}`; known: {}",
                        Untrusted(node),
                        names.join(", ")
                    ))
                })?;
            let schema = master.schema(n.id).await?.ok_or_else(|| {
                CliError::Usage(format!("node {} has no schema yet", Untrusted(&n.name)))
            })?;
            sink.emit(Report::Schema(Box::new(SchemaView::new(
                &schema.schema,
                &schema.digest,
            ))))
        }
        Command::Monitor(m) => monitor(master, m, sink).await,
        Command::Plan(p) => plan(master, p, sink).await,
        Command::Update(u) => crate::update::update(master, u, sink).await,
        Command::Record(r) => {
            let summary = crate::record::record(master, r).await?;
            sink.emit(Report::Recorded(summary))
        }
        // Programs of their own, which own a bus: the binary runs them before any
        // master exists (here: the demo's prompt, whose bus the demo owns).
        Command::Serve(_) | Command::Fake(_) => {
            let name = if matches!(cmd, Command::Serve(_)) {
                "serve"
            } else {
                "fake"
            };
            Err(CliError::Usage(format!(
                "`fcan {name}` is a program of its own that owns a bus: run it in a shell (`fcan {name} --help`), not against a running master"
            )))
        }
        // Offline: `crate::run_with` runs it before any master exists.
        Command::Decode(_) => Err(CliError::Usage(
            "fcan decode runs offline, not against a master".into(),
        )),
    }
}

/// `fcan plan`: every planned node's frames, printed or as a DBC file.
async fn plan<M: MasterApi>(
    master: &M,
    args: &crate::args::PlanArgs,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    let nodes = master.nodes().await?;
    let registry = master.registry().await?;
    let mut planned = Vec::new();
    for n in &nodes {
        if let Some(want) = &args.node {
            if *want != n.name && want.parse::<u8>().ok() != Some(n.id.get()) {
                continue;
            }
        }
        if let Some(p) = master.plan(n.id).await? {
            planned.push((n, p));
        }
    }
    if planned.is_empty() {
        return Err(CliError::Usage(match &args.node {
            Some(n) => format!(
                "node `{}` has no plan (not running, or not on this bus)",
                Untrusted(n)
            ),
            None => "no node has a plan yet (none running)".into(),
        }));
    }
    if let Some(path) = &args.dbc {
        let nodes: Vec<crate::dbc::PlannedNode> = planned
            .iter()
            .map(|(n, p)| crate::dbc::PlannedNode {
                id: n.id,
                name: &n.name,
                mtu: n.mode.mtu(),
                plan: p,
            })
            .collect();
        let text = crate::dbc::write(&nodes, &registry);
        std::fs::write(path, &text)
            .map_err(|e| CliError::Io(format!("cannot write {}: {e}", path.display())))?;
        return sink.emit(Report::Dbc(DbcView {
            file: path.display().to_string(),
            messages: text.lines().filter(|l| l.starts_with("BO_ ")).count(),
            nodes: planned.len(),
        }));
    }
    let mut frames = Vec::new();
    for (n, p) in &planned {
        for f in &p.frames {
            let h = &f.header;
            let topics = f
                .entries
                .iter()
                .filter_map(|e| registry.topic_at(n.id, e.block, e.topic))
                .map(|t| t.name.clone())
                .collect();
            frames.push(PlanFrameView {
                node: n.name.clone(),
                index: h.index,
                std_id: h.std_id,
                dir: fcan_master::json::direction_name(h.dir),
                len: h.len,
                masked: h.masked,
                group_parts: h.group_parts,
                group_index: h.group_index,
                period_us: h.period_us,
                topics,
            });
        }
    }
    sink.emit(Report::Plan(frames))
}

/// A message's fields on one line: `{position: f32, raw: [u8; 4]}`.
fn fields_summary(fields: &[fcan_core::ir::Field]) -> String {
    FieldView::line(&FieldView::all(fields))
}

fn deadline(stream: &StreamArgs) -> Option<tokio::time::Instant> {
    stream
        .timeout
        .map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)))
}

async fn topic<M: MasterApi>(
    master: &M,
    cmd: &TopicCmd,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    match cmd {
        TopicCmd::List => {
            let topics = master.registry().await?.topics;
            sink.emit(Report::Topics(
                topics
                    .into_iter()
                    .map(|t| TopicView {
                        fields: fields_summary(&t.fields),
                        name: t.name,
                        dir: t.dir,
                        period_us: t.period_us,
                    })
                    .collect(),
            ))?;
        }
        TopicCmd::Info { name } => {
            let reg = master.registry().await?;
            let t = reg.topic(name).map_err(MasterError::from)?;
            sink.emit(Report::TopicInfo(TopicInfoView {
                name: t.name.clone(),
                dir: t.dir,
                period_us: t.period_us,
                size_bytes: fcan_core::numbering::layout(&t.fields).size,
                ros_type: t.ros_type.clone(),
                fields: FieldView::all(&t.fields),
            }))?;
        }
        TopicCmd::Echo { name, stream } => {
            // Times count from the request: samples can arrive before `subscribe` returns.
            let start = fcan_master::transport::now();
            let mut sub = master.subscribe(name).await?;
            let end = deadline(stream);
            // A quiet topic is never a silent wait: after `quiet` with no sample, say
            // once what the topic is and when its node sends it.
            let quiet = quiet_after(master, name).await;
            let mut silence = Some(tokio::time::Instant::now() + quiet);
            let mut warned = false;
            let mut n = 0u64;
            while stream.count.is_none_or(|c| n < c) {
                let wake = match (end, silence) {
                    (Some(e), Some(s)) => Some(e.min(s)),
                    (e, s) => e.or(s),
                };
                let next = match wake {
                    Some(w) => match tokio::time::timeout_at(w, sub.recv()).await {
                        Ok(s) => s,
                        Err(_) if end.is_some_and(|e| e <= w) => break,
                        Err(_) => {
                            (silence, warned) = (None, true);
                            let note = quiet_note(master, name, quiet, n).await;
                            sink.note(&note);
                            continue;
                        }
                    },
                    None => sub.recv().await,
                };
                let Some(s) = next else { break };
                n += 1;
                if !warned {
                    silence = Some(tokio::time::Instant::now() + quiet);
                }
                sink.emit(Report::Sample(SampleView {
                    topic: s.name.to_string(),
                    t: s.at.saturating_duration_since(start).as_secs_f64(),
                    value: s.value,
                }))?;
            }
            if let Some(c) = stream.count {
                if n < c {
                    return Err(CliError::Usage(format!(
                        "received {n} of {c} messages on {name} before the timeout"
                    )));
                }
            }
        }
        TopicCmd::Pub {
            name,
            value,
            count,
            rate,
        } => {
            let v = value_for(master, value, For::Topic(name)).await?;
            let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
            let mut tick = tokio::time::interval(period);
            for _ in 0..*count {
                tick.tick().await;
                master.publish(name, v.clone()).await?;
            }
            sink.emit(Report::Published(PublishedView {
                topic: name.clone(),
                published: *count,
                value: v,
            }))?;
        }
        TopicCmd::Hz {
            name,
            window,
            count,
        } => {
            let mut sub = master.subscribe(name).await?;
            let begun = tokio::time::Instant::now();
            let end = begun + Duration::from_secs_f64(window.max(0.0));
            let mut times = Vec::new();
            while count.is_none_or(|c| (times.len() as u64) < c) {
                let Ok(Some(s)) = tokio::time::timeout_at(end, sub.recv()).await else {
                    break;
                };
                times.push(s.at);
            }
            // With -n, the window is the time it took (as long as it was not all of it).
            let window = &if times.len() as u64 == count.unwrap_or(u64::MAX) {
                begun.elapsed().as_secs_f64()
            } else {
                *window
            };
            let gaps: Vec<f64> = times
                .windows(2)
                .map(|w| w[1].duration_since(w[0]).as_secs_f64())
                .collect();
            let rate = if gaps.is_empty() {
                0.0
            } else {
                gaps.len() as f64 / gaps.iter().sum::<f64>()
            };
            let (min, max) = gaps
                .iter()
                .fold((f64::MAX, 0.0f64), |(a, b), g| (a.min(*g), b.max(*g)));
            sink.emit(Report::Rate(RateView {
                topic: name.clone(),
                samples: times.len(),
                rate_hz: rate,
                min_gap_s: if gaps.is_empty() { 0.0 } else { min },
                max_gap_s: max,
                window_s: *window,
            }))?;
            if times.is_empty() {
                return Err(CliError::Usage(format!(
                    "no message on {name} in {window} s"
                )));
            }
        }
    }
    Ok(())
}

/// How long `topic echo` waits for a sample before it says why none comes: 2 s, or five
/// periods of a periodic topic slower than 2.5 Hz.
async fn quiet_after<M: MasterApi>(master: &M, name: &str) -> Duration {
    let period_us = match master.registry().await {
        Ok(r) => r.topic(name).map_or(0, |t| t.period_us),
        Err(_) => 0,
    };
    QUIET.max(Duration::from_micros(u64::from(period_us)) * 5)
}

/// [`quiet_after`]'s floor.
const QUIET: Duration = Duration::from_secs(2);

/// What `topic echo` says after `quiet` without a sample on `name` (`seen` samples so
/// far): what the topic is, when its node sends it, and how the node is.
async fn quiet_note<M: MasterApi>(master: &M, name: &str, quiet: Duration, seen: u64) -> String {
    use fcan_core::msg::DataDirection;
    let what = if seen == 0 {
        "no sample"
    } else {
        "no further sample"
    };
    let head = format!(
        "{what} on {} for {} s",
        Untrusted(name),
        quiet.as_secs_f64()
    );
    let tail = "still waiting (Ctrl-C, or --timeout SECONDS to stop)";
    let Ok(reg) = master.registry().await else {
        return format!("{head}; {tail}");
    };
    let Ok(t) = reg.topic(name) else {
        return format!("{head}; {tail}");
    };
    let nodes = master.nodes().await.unwrap_or_default();
    let node = nodes.iter().find(|n| n.id == t.node);
    let node_name = node.map_or_else(
        || t.node.to_string(),
        |n| format!("`{}`", Untrusted(&n.name)),
    );
    let how = match node {
        Some(n) if n.phase != Phase::Running => format!(
            "node {node_name} is not running ({}, node state {})",
            n.phase,
            node_state_name(n.state)
        ),
        _ => String::new(),
    };
    let why = match (t.dir, t.period_us) {
        (DataDirection::M2s, _) => format!(
            "it is a command (m2s): it carries only what is published to it (`fcan topic pub {} …`)",
            Untrusted(name)
        ),
        (DataDirection::S2m, 0) => {
            // Who can make the node speak: its commands.
            let commands: Vec<String> = reg
                .topics
                .iter()
                .filter(|c| c.node == t.node && c.dir == DataDirection::M2s)
                .take(4)
                .map(|c| Untrusted(&c.name).to_string())
                .collect();
            let mut why = format!(
                "it is sent on commit, not periodically: node {node_name} sends it when it has something new"
            );
            if let Some(d) = node.and_then(|n| n.driver.as_deref()) {
                why.push_str(&format!(
                    "; a device driven by the `{}` driver reports in reply to a command",
                    Untrusted(d)
                ));
                if !commands.is_empty() {
                    why.push_str(&format!(" (publish to {})", commands.join(", ")));
                }
            }
            why
        }
        (DataDirection::S2m, us) => format!(
            "node {node_name} sends it every {} ms, so it is not arriving",
            f64::from(us) / 1000.0
        ),
    };
    let mut parts = vec![head, why];
    if !how.is_empty() {
        parts.push(how);
    }
    format!("{}; {tail}", parts.join(": "))
}

async fn service<M: MasterApi>(
    master: &M,
    cmd: &ServiceCmd,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    match cmd {
        ServiceCmd::List => {
            let services = master.registry().await?.services;
            sink.emit(Report::Services(
                services
                    .into_iter()
                    .map(|s| ServiceView {
                        request: fields_summary(&s.request),
                        response: fields_summary(&s.response),
                        name: s.name,
                    })
                    .collect(),
            ))
        }
        ServiceCmd::Call { name, value } => {
            let v = value_for(master, value, For::Service(name)).await?;
            let response = master.call(name, v).await?;
            sink.emit(Report::Call(CallView {
                service: name.clone(),
                response,
            }))
        }
    }
}

async fn param<M: MasterApi>(
    master: &M,
    cmd: &ParamCmd,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    match cmd {
        ParamCmd::List => {
            let params = master.registry().await?.params;
            sink.emit(Report::Params(
                params
                    .into_iter()
                    .map(|p| ParamView {
                        ty: p.decl.ty.name(),
                        default: Value::from_scalar(p.decl.default),
                        min: p.decl.min.map(Value::from_scalar),
                        max: p.decl.max.map(Value::from_scalar),
                        name: p.name,
                    })
                    .collect(),
            ))
        }
        ParamCmd::Get { name } => {
            let value = master.param_get(name).await?;
            sink.emit(Report::ParamGet(ParamValueView {
                name: name.clone(),
                value,
            }))
        }
        ParamCmd::Set { name, value } => {
            let v = value_for(master, value, For::Param(name)).await?;
            // What the node holds now, read back: what every face shows after a write.
            let value = master.param_set_read_back(name, v).await?;
            sink.emit(Report::ParamSet(ParamSetView {
                name: name.clone(),
                value,
                set: true,
            }))
        }
        ParamCmd::Dump { prefix } => {
            let reg = master.registry().await?;
            for p in reg.params.iter().filter(|p| {
                prefix
                    .as_ref()
                    .is_none_or(|x| p.name.starts_with(x.as_str()))
            }) {
                let value = master.param_get(&p.name).await?;
                sink.emit(Report::ParamDump(ParamValueView {
                    name: p.name.clone(),
                    value,
                }))?;
            }
            Ok(())
        }
        ParamCmd::Load { file } => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| CliError::Io(format!("{}: {e}", file.display())))?;
            let map: BTreeMap<String, serde_yaml_ng::Value> = serde_yaml_ng::from_str(&text)
                .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
            let mut failed = 0;
            for (name, v) in map {
                let text = serde_yaml_ng::to_string(&v).unwrap_or_default();
                let r = match value_for(master, text.trim(), For::Param(&name)).await {
                    Ok(v) => master.param_set(&name, v).await.map_err(CliError::from),
                    Err(e) => Err(e),
                };
                let error = r.err().map(|e| e.to_string());
                failed += usize::from(error.is_some());
                sink.emit(Report::ParamLoad(ParamLoadView {
                    name,
                    ok: error.is_none(),
                    error,
                }))?;
            }
            if failed > 0 {
                return Err(CliError::Usage(format!("{failed} parameter(s) not set")));
            }
            Ok(())
        }
    }
}

/// What a value typed on the command line is for.
#[derive(Clone, Copy)]
enum For<'a> {
    Topic(&'a str),
    Service(&'a str),
    Param(&'a str),
}

/// The value the user typed for a topic, a service's request or a parameter; where it
/// holds no value (a string, `null`), an error naming the topic, service or parameter,
/// the field, and what the field takes (from the registry: asked only then).
async fn value_for<M: MasterApi>(master: &M, text: &str, what: For<'_>) -> Result<Value, CliError> {
    let e = match parse_value(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let r = master.registry().await?;
    // An unknown name is the error to fix first (`run` says whose it may be).
    let unknown = |u| CliError::Master(MasterError::Unknown(u));
    let (name, typed) = match what {
        For::Topic(n) => {
            let t = r.topic(n).map_err(unknown)?;
            (n, parse_value_as(text, Shape::Message(&t.fields)))
        }
        For::Service(n) => {
            let s = r.service(n).map_err(unknown)?;
            (n, parse_value_as(text, Shape::Message(&s.request)))
        }
        For::Param(n) => {
            let p = r.param(n).map_err(unknown)?;
            (n, parse_value_as(text, Shape::Param(p.decl.ty, p.decl.len)))
        }
    };
    Err(MasterError::Value(typed.err().unwrap_or(e).within(name)).into())
}

/// `fcan monitor` on one master.
async fn monitor<M: MasterApi>(
    master: &M,
    m: &MonitorArgs,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    monitor_buses(std::slice::from_ref(&(None, master.clone())), None, m, sink).await
}

/// One bus the monitor follows: the previous status, for rates over the interval.
struct Watched<'a, M> {
    bus: Option<&'a str>,
    master: &'a M,
    events: tokio::sync::broadcast::Receiver<fcan_master::MasterEvent>,
    last: fcan_master::Status,
    last_t: tokio::time::Instant,
    /// The daemon's session, where a named bus's joints status is asked for.
    daemon: Option<&'a zenoh::Session>,
}

/// `fcan monitor` on several buses (a daemon's, each named), one view per bus per
/// refresh; with the daemon's session, each bus's joints status too (when it runs
/// joints).
pub(crate) async fn monitor_buses<M: MasterApi>(
    buses: &[(Option<String>, M)],
    daemon: Option<&zenoh::Session>,
    m: &MonitorArgs,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    let mut watched = Vec::with_capacity(buses.len());
    for (bus, master) in buses {
        watched.push(Watched {
            bus: bus.as_deref(),
            master,
            events: master.events(),
            last: master.status().await?,
            last_t: tokio::time::Instant::now(),
            daemon,
        });
    }
    let mut n = 0u64;
    loop {
        tokio::time::sleep(Duration::from_millis(m.interval_ms)).await;
        let mut views = Vec::with_capacity(watched.len());
        for w in &mut watched {
            views.push(refresh(w).await?);
        }
        sink.emit(Report::Monitor(views))?;
        n += 1;
        if m.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
    }
}

/// One bus's view since its previous refresh.
async fn refresh<M: MasterApi>(w: &mut Watched<'_, M>) -> Result<MonitorView, CliError> {
    let mut seen = Vec::new();
    while let Ok(e) = w.events.try_recv() {
        seen.extend(EventView::of(&e));
    }
    let now = w.master.status().await?;
    let dt = w.last_t.elapsed().as_secs_f64().max(1e-6);
    w.last_t = tokio::time::Instant::now();
    let last = &w.last;
    let per_s = |now: u64, then: u64| now.saturating_sub(then) as f64 / dt;
    let view = MonitorView {
        bus: w.bus.map(str::to_string),
        nodes: now
            .nodes
            .iter()
            .map(|n| MonitorNodeView {
                id: n.id.get(),
                name: n.name.clone(),
                phase: n.phase.clone(),
                mode: n.mode,
                errors: n.errors,
            })
            .collect(),
        rates_hz: now
            .samples
            .iter()
            .map(|(k, v)| {
                let then = last.samples.get(k).copied().unwrap_or(0);
                (k.clone(), per_s(*v, then))
            })
            .collect(),
        bus_load: now.bus_busy.saturating_sub(last.bus_busy).as_secs_f64() / dt,
        rx_frames: now.stats.rx_frames,
        tx_frames: now.stats.tx_frames,
        rx_per_s: per_s(now.stats.rx_frames, last.stats.rx_frames),
        tx_per_s: per_s(now.stats.tx_frames, last.stats.tx_frames),
        retries: now.stats.retries,
        rx_malformed: now.stats.rx_malformed,
        events: seen,
        joints: match (w.daemon, w.bus) {
            (Some(session), Some(bus)) => joints_status(session, bus).await,
            _ => None,
        },
    };
    w.last = now;
    Ok(view)
}

/// The status of the joints the daemon runs on `bus` (`fcan serve --ros2 --joints`:
/// `fcan/<bus>/joints/status`), or `None` when it runs none (nothing answers).
async fn joints_status(session: &zenoh::Session, bus: &str) -> Option<JointsView> {
    let replies = session
        .get(fcan_remote::keys::joints_status(bus)?)
        .timeout(Duration::from_secs(1))
        .await
        .ok()?;
    while let Ok(r) = replies.recv_async().await {
        if let Ok(s) = r.result() {
            if let Ok(v) = serde_json::from_slice(&s.payload().to_bytes()) {
                return Some(v);
            }
        }
    }
    None
}
