//! `fcan record FILE.mcap`: a live bus recorded into a self-describing MCAP file
//! ([`crate::mcap_file`]) through any [`MasterApi`]: the daemon, the demo or a one-shot
//! master. Every topic of every running node (nodes that come up later included), the
//! raw frames, the blobs, plans and node info; progress and size on stderr; Ctrl-C (or
//! `--duration`) finishes the file cleanly.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::BufWriter;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fcan_core::id::NodeId;
use fcan_master::MasterEvent;
use fcan_master::{MasterApi, Phase, Sample};
use tokio::sync::{broadcast, mpsc};

use crate::args::RecordArgs;
use crate::mcap_file::Recording;
use crate::views::RecordedView;
use crate::CliError;

/// A local instant as nanoseconds since the Unix epoch, anchored once.
struct WallClock {
    instant: Instant,
    wall_ns: u64,
}

impl WallClock {
    fn now() -> WallClock {
        WallClock {
            instant: Instant::now(),
            wall_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        }
    }

    fn ns(&self, at: Instant) -> u64 {
        match at.checked_duration_since(self.instant) {
            Some(d) => self.wall_ns.saturating_add(d.as_nanos() as u64),
            None => self
                .wall_ns
                .saturating_sub(self.instant.duration_since(at).as_nanos() as u64),
        }
    }
}

fn mcap_err(e: crate::mcap_file::Error) -> CliError {
    CliError::Io(format!("writing MCAP: {e}"))
}

/// Records until Ctrl-C or `args.duration`; the summary is returned for the renderer.
pub(crate) async fn record<M: MasterApi>(
    master: &M,
    args: &RecordArgs,
) -> Result<RecordedView, CliError> {
    let path = &args.file;
    let file = File::create(path)
        .map_err(|e| CliError::Io(format!("cannot create {}: {e}", path.display())))?;
    let mut rec = Recording::create(BufWriter::new(file), "fcan record").map_err(mcap_err)?;
    let clock = WallClock::now();
    let started = Instant::now();
    let (tx, mut samples) = mpsc::unbounded_channel::<Sample>();
    let mut events = master.events();
    let mut frames = if args.no_frames {
        None
    } else {
        Some(master.frames().await?)
    };
    // Nodes recorded, by id, with the boot id their channels were made for.
    let mut recorded: BTreeMap<NodeId, u32> = BTreeMap::new();
    let mut subscribed: BTreeSet<String> = BTreeSet::new();
    add_nodes(
        master,
        &mut rec,
        &clock,
        &mut recorded,
        &mut subscribed,
        &tx,
    )
    .await?;
    let deadline = args
        .duration
        .map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let mut progress = tokio::time::interval(Duration::from_secs(1));
    progress.tick().await;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let (mut frames_n, mut lost) = (0u64, 0u64);
    let mut stopped: Option<CliError> = None;
    loop {
        tokio::select! {
            s = samples.recv() => {
                if let Some(s) = s {
                    rec.sample(&s.name, &s.value, clock.ns(s.at)).map_err(mcap_err)?;
                }
            }
            f = async {
                match &mut frames {
                    Some(r) => r.recv().await,
                    None => std::future::pending().await,
                }
            } => match f {
                Ok(f) => {
                    rec.frame(&f.frame, clock.ns(f.at)).map_err(mcap_err)?;
                    frames_n += 1;
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    lost += n;
                    eprintln!("fcan record: {n} frames lost (the recorder fell behind)");
                }
                Err(broadcast::error::RecvError::Closed) => frames = None,
            },
            e = events.recv() => match e {
                Ok(MasterEvent::Online { .. } | MasterEvent::Rebooted { .. })
                | Err(broadcast::error::RecvError::Lagged(_)) => {
                    let added =
                        add_nodes(master, &mut rec, &clock, &mut recorded, &mut subscribed, &tx).await;
                    if let Err(e) = added {
                        // The master went away: what was recorded is kept, whole.
                        stopped = Some(e);
                        break;
                    }
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Closed) => {
                    stopped = Some(CliError::Usage("the master stopped".into()));
                    break;
                }
            },
            _ = progress.tick() => {
                let size = std::fs::metadata(path).map_or(0, |m| m.len());
                eprintln!(
                    "fcan record: {:.0} s, {} messages ({} frames), {}",
                    started.elapsed().as_secs_f64(),
                    rec.messages(),
                    frames_n,
                    human_size(size)
                );
            }
            _ = &mut ctrl_c => break,
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => break,
        }
    }
    // What is already queued belongs to the recording too.
    while let Ok(s) = samples.try_recv() {
        rec.sample(&s.name, &s.value, clock.ns(s.at))
            .map_err(mcap_err)?;
    }
    let messages = rec.messages();
    rec.finish().map_err(mcap_err)?;
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    if let Some(e) = stopped {
        eprintln!(
            "fcan record: stopped early; {} holds {messages} messages ({})",
            path.display(),
            human_size(bytes)
        );
        return Err(e);
    }
    Ok(RecordedView {
        file: path.display().to_string(),
        seconds: started.elapsed().as_secs_f64(),
        messages,
        frames: frames_n,
        frames_lost: lost,
        nodes: recorded.len(),
        bytes,
    })
}

/// Adds every running node not recorded yet (or rebooted since): its blob, info and
/// plan, a channel per topic, and a subscription to each topic not subscribed yet.
async fn add_nodes<M: MasterApi, W: std::io::Write + std::io::Seek>(
    master: &M,
    rec: &mut Recording<W>,
    clock: &WallClock,
    recorded: &mut BTreeMap<NodeId, u32>,
    subscribed: &mut BTreeSet<String>,
    tx: &mpsc::UnboundedSender<Sample>,
) -> Result<(), CliError> {
    let nodes = master.nodes().await?;
    let registry = master.registry().await?;
    let now = clock.ns(Instant::now());
    for n in nodes.iter().filter(|n| n.phase == Phase::Running) {
        if recorded.get(&n.id) == Some(&n.boot_id) {
            continue;
        }
        if let Some(s) = master.schema(n.id).await? {
            rec.blob(s.digest, &s.blob, now).map_err(mcap_err)?;
        }
        let plan = master.plan(n.id).await?;
        let mut info = BTreeMap::new();
        info.insert("id".to_string(), n.id.get().to_string());
        info.insert("name".into(), n.name.clone());
        info.insert("boot_id".into(), n.boot_id.to_string());
        info.insert(
            "mode".into(),
            fcan_master::json::bus_mode_name(n.mode).into(),
        );
        if let Some(d) = n.digest {
            info.insert("schema".into(), d.to_string());
        }
        rec.node(n.id.get(), info, plan.as_ref())
            .map_err(mcap_err)?;
        for t in registry.topics.iter().filter(|t| t.node == n.id) {
            rec.add_topic(t).map_err(mcap_err)?;
            if subscribed.insert(t.name.clone()) {
                let mut sub = master.subscribe(&t.name).await?;
                let tx = tx.clone();
                // The subscription outlives a reboot (the name stays); it ends with the
                // recording, when `tx`'s receiver is dropped.
                tokio::spawn(async move {
                    while let Some(s) = sub.recv().await {
                        if tx.send(s).is_err() {
                            return;
                        }
                    }
                });
            }
        }
        eprintln!(
            "fcan record: recording {} ({} topics)",
            fcan_master::text::Untrusted(&n.name),
            registry.topics.iter().filter(|t| t.node == n.id).count()
        );
        recorded.insert(n.id, n.boot_id);
    }
    Ok(())
}

/// `1.2 MB`.
fn human_size(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}
