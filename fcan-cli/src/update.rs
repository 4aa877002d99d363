//! `fcan update`: which image, which nodes, and one update after the other with its
//! progress. The transfer itself is the master's ([`MasterApi::update`]); this module
//! builds the image from the files given and reports.

use fcan_core::hash::SchemaDigest;
use fcan_master::engine::UpdateReport;
use fcan_master::text::Untrusted;
use fcan_master::update::{UpdateConfig, UpdateImage, IMAGE_MAGIC};
use fcan_master::MasterEvent;
use fcan_master::{MasterApi, NodeInfo};

use crate::args::UpdateArgs;
use crate::exec::Sink;
use crate::views::{Report, UpdateProgressView, UpdatedView};
use crate::CliError;

/// Runs `fcan update`.
pub(crate) async fn update<M: MasterApi>(
    master: &M,
    args: &UpdateArgs,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    if args.abort {
        return abort(master, args, sink).await;
    }
    let (node, file) = match (&args.all_of, args.targets.as_slice()) {
        (Some(_), []) => (None, None),
        (Some(_), [image]) => (None, Some(image.as_str())),
        (Some(_), _) => {
            return Err(usage("with --all-of give only the image (no node)"));
        }
        (None, [node]) => (Some(node.as_str()), None),
        (None, [node, image]) => (Some(node.as_str()), Some(image.as_str())),
        (None, _) => return Err(usage("give the node and the image: fcan update NODE IMAGE")),
    };
    let image = load_image(file, args)?;
    if !(args.bus_share > 0.0 && args.bus_share <= 100.0) {
        return Err(usage(&format!(
            "--bus-share {} is not a percentage in (0, 100]",
            args.bus_share
        )));
    }
    let cfg = UpdateConfig {
        share: args.bus_share / 100.0,
        ..UpdateConfig::default()
    };
    let nodes = master.nodes().await?;
    let targets = match (node, &args.all_of) {
        (Some(n), _) => vec![find_node(&nodes, n)?.clone()],
        (None, Some(schema)) => of_schema(master, &nodes, schema).await?,
        (None, None) => Vec::new(),
    };
    let new_schema = SchemaDigest(image.schema());
    for n in &targets {
        if args.all_of.is_some() && n.digest == Some(new_schema) {
            sink.emit(Report::Updated(UpdatedView::unchanged("skipped", n)))?;
            continue;
        }
        let report = one(master, n, &image, cfg, sink).await.map_err(|e| {
            let left: Vec<String> = targets
                .iter()
                .skip_while(|t| t.id != n.id)
                .skip(1)
                .map(|t| t.name.clone())
                .collect();
            if left.is_empty() {
                e
            } else {
                CliError::Usage(format!(
                    "{e}; not updated (stopped at the first failure): {}",
                    Untrusted(&left.join(", "))
                ))
            }
        })?;
        sink.emit(Report::Updated(UpdatedView {
            event: "done",
            node: n.id.get(),
            name: n.name.clone(),
            version: Some(report.version.clone()),
            schema: Some(report.schema.to_string()),
            schema_changed: report.schema_changed,
            restored: report.restored,
            dropped: report.dropped,
        }))?;
    }
    Ok(())
}

/// `fcan update NODE --abort`.
async fn abort<M: MasterApi>(
    master: &M,
    args: &UpdateArgs,
    sink: &mut dyn Sink,
) -> Result<(), CliError> {
    let [node] = args.targets.as_slice() else {
        return Err(usage(
            "--abort takes the node only: fcan update NODE --abort",
        ));
    };
    if args.all_of.is_some() || !args.schema.is_empty() || args.version.is_some() {
        return Err(usage(
            "--abort takes the node only (no image, --all-of, --schema or --version)",
        ));
    }
    let nodes = master.nodes().await?;
    let n = find_node(&nodes, node)?;
    master.abort_update(n.id).await?;
    sink.emit(Report::Updated(UpdatedView::unchanged("aborted", n)))
}

/// One node's update, reporting its progress events as they come.
async fn one<M: MasterApi>(
    master: &M,
    n: &NodeInfo,
    image: &UpdateImage,
    cfg: UpdateConfig,
    sink: &mut dyn Sink,
) -> Result<UpdateReport, CliError> {
    let mut events = master.events();
    let done = master.update(n.id, image.clone(), cfg);
    tokio::pin!(done);
    loop {
        tokio::select! {
            r = &mut done => return r.map_err(|e| CliError::Usage(format!("{} (node {}): {e}", Untrusted(&n.name), n.id))),
            e = events.recv() => {
                if let Ok(MasterEvent::UpdateProgress { node, step, progress: p, .. }) = e {
                    if node == n.id {
                        sink.emit(Report::UpdateProgress(UpdateProgressView {
                            event: "progress",
                            node: node.get(),
                            name: n.name.clone(),
                            step: step.to_string(),
                            acked: p.acked,
                            size: p.size,
                            rate: p.rate,
                            eta_s: p.eta_s,
                            resent: p.resent,
                        }))?;
                    }
                }
            }
        }
    }
}

/// `fcan update --write-image FILE`: the image file of a raw binary (or of the schema
/// blob alone), written and described; nothing is sent.
pub(crate) fn write_image(
    args: &UpdateArgs,
    path: &std::path::Path,
    json: bool,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    if args.all_of.is_some() || args.targets.len() > 1 {
        return Err(usage(
            "--write-image takes the firmware binary only (no node, no --all-of)",
        ));
    }
    let file = args.targets.first().map(String::as_str);
    if file.is_some_and(|f| std::fs::read(f).is_ok_and(|b| b.starts_with(IMAGE_MAGIC))) {
        return Err(usage("--write-image: that file is an image file already"));
    }
    let image = load_image(file, args)?;
    std::fs::write(path, image.to_file())
        .map_err(|e| CliError::Io(format!("{}: {e}", path.display())))?;
    let schema = SchemaDigest(image.schema()).to_string();
    let sha = SchemaDigest(image.sha256()).to_string();
    if json {
        let line = serde_json::json!({
            "file": path.display().to_string(),
            "size": image.len(),
            "node": image.node(),
            "version": image.version(),
            "schema": schema,
            "sha256": sha,
        });
        writeln!(out, "{}", fcan_master::text::json_safe(line.to_string()))?;
    } else {
        writeln!(
            out,
            "wrote {}: {} B image for `{}` boards, version {}, schema {}, SHA-256 {}",
            path.display(),
            image.len(),
            Untrusted(image.node()),
            Untrusted(image.version()),
            &schema[..16],
            &sha[..16]
        )?;
    }
    Ok(())
}

fn usage(m: &str) -> CliError {
    CliError::Usage(format!("fcan update: {m} (fcan update --help)"))
}

/// The image: an image file as it is, or one made of a raw binary (or, with no file,
/// of the schema blob itself) with `--schema` and `--version`.
fn load_image(file: Option<&str>, args: &UpdateArgs) -> Result<UpdateImage, CliError> {
    let bytes = match file {
        Some(f) => Some(std::fs::read(f).map_err(|e| CliError::Io(format!("{f}: {e}")))?),
        None => None,
    };
    if let Some(b) = bytes.as_deref().filter(|b| b.starts_with(IMAGE_MAGIC)) {
        if !args.schema.is_empty() || args.version.is_some() {
            return Err(usage(
                "an image file names its schema and version already: leave out --schema and --version",
            ));
        }
        return UpdateImage::from_file(b)
            .map_err(|e| CliError::Usage(format!("{}: {e}", file.unwrap_or(""))));
    }
    if args.schema.is_empty() {
        return Err(usage(match file {
            Some(_) => {
                "a raw firmware binary needs --schema (the schema it announces) and --version"
            }
            None => {
                "give the image, or --schema for a fake node (whose firmware is its schema blob)"
            }
        }));
    }
    let Some(version) = &args.version else {
        return Err(usage(
            "a raw firmware binary needs --version: the version string the new firmware reports (e.g. --version 2.1.0)",
        ));
    };
    if version.len() > fcan_core::msg::update::VERSION_MAX {
        return Err(usage(&format!(
            "--version has more than {} bytes",
            fcan_core::msg::update::VERSION_MAX
        )));
    }
    let blob = crate::fake::load_blob(&args.schema)?;
    let node = fcan_core::msg::update::schema_node_name(&blob)
        .ok_or_else(|| usage("the schema names no node"))?
        .to_owned();
    let bytes = bytes.unwrap_or_else(|| blob.clone());
    if bytes.is_empty() || bytes.len() > fcan_master::update::MAX_IMAGE_LEN {
        return Err(usage(&format!(
            "an image has 1 to {} bytes, this one {}",
            fcan_master::update::MAX_IMAGE_LEN,
            bytes.len()
        )));
    }
    Ok(UpdateImage::new(
        bytes,
        SchemaDigest::of(&blob).0,
        &node,
        version,
    ))
}

fn find_node<'a>(nodes: &'a [NodeInfo], name: &str) -> Result<&'a NodeInfo, CliError> {
    nodes
        .iter()
        .find(|n| n.name == name || name.parse::<u8>().ok() == Some(n.id.get()))
        .ok_or_else(|| {
            let known: Vec<String> = nodes
                .iter()
                .map(|n| format!("{} ({})", Untrusted(&n.name), n.id))
                .collect();
            CliError::Usage(format!(
                "no node `{}`; known: {}",
                Untrusted(name),
                known.join(", ")
            ))
        })
}

/// The nodes whose schema is named `schema` (as written, `io_board{i}`) or whose digest
/// starts with it (8 hex digits at least), by id.
async fn of_schema<M: MasterApi>(
    master: &M,
    nodes: &[NodeInfo],
    schema: &str,
) -> Result<Vec<NodeInfo>, CliError> {
    let hex = schema.len() >= 8 && schema.chars().all(|c| c.is_ascii_hexdigit());
    let mut out = Vec::new();
    for n in nodes {
        let by_digest = hex
            && n.digest
                .is_some_and(|d| d.to_string().starts_with(&schema.to_ascii_lowercase()));
        let by_name = match master.schema(n.id).await? {
            Some(s) => s.schema.node == schema,
            None => false,
        };
        if by_digest || by_name {
            out.push(n.clone());
        }
    }
    if out.is_empty() {
        return Err(CliError::Usage(format!(
            "--all-of {}: no node runs that schema (name as written, e.g. `io_board{{i}}`, or 8+ hex digits of its SHA-256; fcan nodes lists them)",
            Untrusted(schema)
        )));
    }
    out.sort_by_key(|n| n.id);
    Ok(out)
}
