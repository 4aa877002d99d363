//! The JSON shapes of the master's data that more than one program writes or reads: a
//! node (one line of `fcan nodes --json`, also the remote API's node info), an engine
//! event (the `fcan monitor --json` event, also the remote API's events) and the bus
//! status of the remote API. One place, so the CLI and the remote server print the same
//! JSON and the remote client parses it back.
//!
//! Enumerations reach JSON only through the explicit names here (lowercase, stable when
//! a Rust variant is renamed, never `Debug` output).
//!
//! Where a shape is plain data (the engine's counters, a plan) it is one serde
//! declaration for both ways; a node and an event are written by hand because their
//! fields are names of enumerations (`phase`, `state`, `mode`, an event's `kind`) whose
//! text is part of the interface.
//!
//! ```
//! use fcan_master::json::{node_state_name, node_state_from_name};
//! use fcan_core::msg::NodeState;
//! assert_eq!(node_state_name(NodeState::Running), "running");
//! assert_eq!(node_state_from_name("running"), Some(NodeState::Running));
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use fcan_core::hash::SchemaDigest;
use fcan_core::id::NodeId;
use fcan_core::msg::{BusMode, NodeState};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value as Json};

use crate::api::MasterEvent;
use crate::api::{NodeInfo, SchemaSource, Status};
use crate::engine::{EngineStats, Phase, UpdateStep};
use crate::text::Untrusted;

/// A node's reported state as `fcan` prints it: `unprovisioned`, `provisioned`,
/// `running`, `suspended` or `fault`.
pub fn node_state_name(s: NodeState) -> &'static str {
    match s {
        NodeState::Unprovisioned => "unprovisioned",
        NodeState::Provisioned => "provisioned",
        NodeState::Running => "running",
        NodeState::Suspended => "suspended",
        NodeState::Fault => "fault",
    }
}

/// The inverse of [`node_state_name`].
pub fn node_state_from_name(s: &str) -> Option<NodeState> {
    NodeState::ALL
        .iter()
        .copied()
        .find(|x| node_state_name(*x) == s)
}

/// A bus mode as `fcan` prints it: `classic`, `fd` or `fd_brs`.
pub fn bus_mode_name(m: BusMode) -> &'static str {
    match m {
        BusMode::Classic => "classic",
        BusMode::Fd => "fd",
        BusMode::FdBrs => "fd_brs",
    }
}

/// The inverse of [`bus_mode_name`].
pub fn bus_mode_from_name(s: &str) -> Option<BusMode> {
    BusMode::ALL
        .iter()
        .copied()
        .find(|x| bus_mode_name(*x) == s)
}

/// The inverse of `Phase`'s `Display` (`running`, `reading schema`, `failed: <reason>`…).
pub fn phase_from_str(s: &str) -> Option<Phase> {
    Some(match s {
        "reading schema" => Phase::Reading,
        "provisioning" => Phase::Provisioning,
        "running" => Phase::Running,
        "offline" => Phase::Offline,
        _ => Phase::Failed(s.strip_prefix("failed: ")?.to_string()),
    })
}

fn field<'a>(v: &'a Json, name: &str) -> Result<&'a Json, String> {
    v.get(name).ok_or_else(|| format!("missing field `{name}`"))
}

fn uint(v: &Json, name: &str) -> Result<u64, String> {
    field(v, name)?
        .as_u64()
        .ok_or_else(|| format!("field `{name}` is not an unsigned integer"))
}

fn string<'a>(v: &'a Json, name: &str) -> Result<&'a str, String> {
    field(v, name)?
        .as_str()
        .ok_or_else(|| format!("field `{name}` is not a string"))
}

fn node_id(v: u64) -> Result<NodeId, String> {
    u8::try_from(v)
        .ok()
        .and_then(NodeId::new)
        .ok_or_else(|| format!("{v} is not a node id"))
}

impl NodeInfo {
    /// The node as JSON: one line of `fcan nodes --json` (`id`, `name`, `phase`, `state`,
    /// `boot_id`, `mode`, `frames`, `errors`, `schema`, `schema_source`, `driver`,
    /// `watchdog`, `firmware`, `collision`).
    ///
    /// ```
    /// # use fcan_master::NodeInfo;
    /// # fn show(n: &NodeInfo) {
    /// let line = n.to_json().to_string();
    /// # }
    /// ```
    pub fn to_json(&self) -> Json {
        json!({
            "id": self.id.get(),
            "name": self.name,
            "phase": self.phase.to_string(),
            "state": node_state_name(self.state),
            "boot_id": self.boot_id,
            "mode": bus_mode_name(self.mode),
            "frames": self.frames,
            "errors": self.errors,
            "schema": self.digest.map(|d| d.to_string()),
            "schema_source": self.schema_source.map(SchemaSource::as_str),
            "driver": self.driver,
            "watchdog": self.watchdog.map(|w| w.to_string()),
            "firmware": self.firmware,
            "collision": self.collision,
        })
    }

    /// Parses [`to_json`](Self::to_json)'s shape back (for a remote client: the text is
    /// untrusted, every field is checked).
    pub fn from_json(v: &Json) -> Result<NodeInfo, String> {
        let digest = match field(v, "schema")? {
            Json::Null => None,
            Json::String(s) => {
                Some(SchemaDigest::from_hex(s).ok_or("field `schema` is not a SHA-256 hex")?)
            }
            _ => return Err("field `schema` is not a string".into()),
        };
        let schema_source = match field(v, "schema_source")? {
            Json::Null => None,
            Json::String(s) if s == "downloaded" => Some(SchemaSource::Downloaded),
            Json::String(s) if s == "cache" => Some(SchemaSource::Cache),
            _ => return Err("field `schema_source` is not `downloaded`, `cache` or null".into()),
        };
        Ok(NodeInfo {
            id: node_id(uint(v, "id")?)?,
            name: string(v, "name")?.to_string(),
            phase: phase_from_str(string(v, "phase")?).ok_or("unknown `phase`")?,
            state: node_state_from_name(string(v, "state")?).ok_or("unknown `state`")?,
            boot_id: u32::try_from(uint(v, "boot_id")?).map_err(|e| e.to_string())?,
            digest,
            schema_source,
            errors: u16::try_from(uint(v, "errors")?).map_err(|e| e.to_string())?,
            mode: bus_mode_from_name(string(v, "mode")?).ok_or("unknown `mode`")?,
            frames: uint(v, "frames")? as usize,
            // Absent from daemons that predate device drivers.
            driver: match v.get("driver") {
                None | Some(Json::Null) => None,
                Some(Json::String(s)) => Some(s.clone()),
                Some(_) => return Err("field `driver` is not a string".into()),
            },
            // Absent from daemons that predate device watchdogs in node info.
            watchdog: match v.get("watchdog") {
                None | Some(Json::Null) => None,
                Some(Json::String(s)) => {
                    Some(s.parse().map_err(|e| format!("field `watchdog`: {e}"))?)
                }
                Some(_) => return Err("field `watchdog` is not a string".into()),
            },
            // Absent from daemons that predate firmware updates.
            firmware: match v.get("firmware") {
                None | Some(Json::Null) => None,
                Some(Json::String(s)) => Some(s.clone()),
                Some(_) => return Err("field `firmware` is not a string".into()),
            },
            // Absent from daemons that predate collision reports.
            collision: match v.get("collision") {
                None | Some(Json::Null) => None,
                Some(Json::Number(n)) => Some(
                    n.as_u64()
                        .and_then(|b| u32::try_from(b).ok())
                        .ok_or("field `collision` is not a boot id")?,
                ),
                Some(_) => return Err("field `collision` is not a boot id".into()),
            },
        })
    }
}

/// One line for people about an engine event, or `None` for the chatty ones (request
/// completions). Text from nodes in it is escaped.
pub fn describe_event(e: &MasterEvent) -> Option<String> {
    Some(match e {
        MasterEvent::Announced { node, boot_id } => {
            format!("node {node} announced (boot {boot_id:#010x})")
        }
        MasterEvent::SchemaReady {
            node,
            digest,
            cached,
        } => {
            format!(
                "node {node}: schema {} {}",
                &digest.to_string()[..16],
                if *cached {
                    "from cache"
                } else {
                    "downloaded and verified"
                }
            )
        }
        MasterEvent::Online { node } => format!("node {node} running"),
        MasterEvent::Rebooted { node, .. } => {
            format!("node {node} rebooted: re-provisioning, restoring parameters")
        }
        MasterEvent::Offline { node } => format!("node {node} offline"),
        MasterEvent::Failed { node, reason } => {
            format!("node {node} failed: {}", Untrusted(reason))
        }
        MasterEvent::Collision { node, boot_ids } => format!(
            "node id {node} is used by two nodes (boot ids {:#010x}, {:#010x})",
            boot_ids.0, boot_ids.1
        ),
        MasterEvent::OtherMaster { session } => {
            format!("another master (session {session:#010x}) is on this bus")
        }
        MasterEvent::ClassicNodeOnFdLink { node } => {
            format!("node {node} cannot do CAN FD: using Classical CAN frames with it")
        }
        MasterEvent::ParamsCarried {
            node,
            restored,
            dropped,
        } => {
            let list = |v: &Vec<String>| {
                if v.is_empty() {
                    "none".to_string()
                } else {
                    Untrusted(&v.join(", ")).to_string()
                }
            };
            format!(
                "node {node} has another schema: parameters restored: {}; not in it (dropped): {}",
                list(restored),
                list(dropped)
            )
        }
        MasterEvent::ParamChanged { node, name, value } => format!(
            "node {node}: {} = {}",
            Untrusted(name),
            Untrusted(&value.to_string())
        ),
        MasterEvent::UpdateProgress {
            node,
            step,
            progress: p,
            ..
        } => {
            let eta = p
                .eta_s
                .map_or(String::new(), |s| format!(", {s:.0} s left"));
            format!(
                "node {node} update {step}: {} of {} bytes, {:.1} KiB/s{eta}",
                p.acked,
                p.size,
                p.rate / 1024.0
            )
        }
        // Request completions are chatty; newer event kinds get no line until they have one.
        _ => return None,
    })
}

/// The stable name of an event kind (`announced`, `schema_ready`, `online`, `rebooted`,
/// `offline`, `failed`, `collision`, `other_master`, `classic_node_on_fd_link`,
/// `params_carried`, `param_changed`, `update_progress`) and the
/// node it is about; `None` for request completions.
pub fn event_kind(e: &MasterEvent) -> Option<(&'static str, Option<u8>)> {
    Some(match e {
        MasterEvent::Announced { node, .. } => ("announced", Some(node.get())),
        MasterEvent::SchemaReady { node, .. } => ("schema_ready", Some(node.get())),
        MasterEvent::Online { node } => ("online", Some(node.get())),
        MasterEvent::Rebooted { node, .. } => ("rebooted", Some(node.get())),
        MasterEvent::Offline { node } => ("offline", Some(node.get())),
        MasterEvent::Failed { node, .. } => ("failed", Some(node.get())),
        MasterEvent::Collision { node, .. } => ("collision", Some(node.get())),
        MasterEvent::OtherMaster { .. } => ("other_master", None),
        MasterEvent::ClassicNodeOnFdLink { node } => ("classic_node_on_fd_link", Some(node.get())),
        MasterEvent::ParamsCarried { node, .. } => ("params_carried", Some(node.get())),
        MasterEvent::ParamChanged { node, .. } => ("param_changed", Some(node.get())),
        MasterEvent::UpdateProgress { node, .. } => ("update_progress", Some(node.get())),
        _ => return None,
    })
}

/// An event as JSON: the `fcan monitor --json` event (`kind`, `node`, `text`) plus the
/// event's own fields (`boot_id`; `digest`, `cached`; `old`, `new`; `reason`;
/// `boot_ids`; `session`; `restored`, `dropped`; `name`, `value`; `id`, `step`, `acked`,
/// `size`, `rate`, `eta_s`, `resent`), so a reader can rebuild it ([`event_from_json`]). `None` for
/// request completions.
pub fn event_to_json(e: &MasterEvent) -> Option<Json> {
    let (kind, node) = event_kind(e)?;
    let mut m = Map::new();
    m.insert("kind".into(), kind.into());
    m.insert("node".into(), node.into());
    m.insert("text".into(), describe_event(e)?.into());
    match e {
        MasterEvent::Announced { boot_id, .. } => {
            m.insert("boot_id".into(), (*boot_id).into());
        }
        MasterEvent::SchemaReady { digest, cached, .. } => {
            m.insert("digest".into(), digest.to_string().into());
            m.insert("cached".into(), (*cached).into());
        }
        MasterEvent::Rebooted { old, new, .. } => {
            m.insert("old".into(), (*old).into());
            m.insert("new".into(), (*new).into());
        }
        MasterEvent::Failed { reason, .. } => {
            m.insert("reason".into(), reason.clone().into());
        }
        MasterEvent::Collision { boot_ids, .. } => {
            m.insert("boot_ids".into(), json!([boot_ids.0, boot_ids.1]));
        }
        MasterEvent::OtherMaster { session } => {
            m.insert("session".into(), (*session).into());
        }
        MasterEvent::ParamsCarried {
            restored, dropped, ..
        } => {
            m.insert("restored".into(), json!(restored));
            m.insert("dropped".into(), json!(dropped));
        }
        MasterEvent::ParamChanged { name, value, .. } => {
            m.insert("name".into(), name.clone().into());
            m.insert("value".into(), value.to_json());
        }
        MasterEvent::UpdateProgress {
            id, step, progress, ..
        } => {
            m.insert("id".into(), (*id).into());
            m.insert("step".into(), step.to_string().into());
            m.insert("acked".into(), progress.acked.into());
            m.insert("size".into(), progress.size.into());
            m.insert("rate".into(), progress.rate.into());
            m.insert("eta_s".into(), progress.eta_s.into());
            m.insert("resent".into(), progress.resent.into());
        }
        _ => {}
    }
    Some(Json::Object(m))
}

/// Parses [`event_to_json`]'s shape back into the event (untrusted input: checked).
pub fn event_from_json(v: &Json) -> Result<MasterEvent, String> {
    let kind = string(v, "kind")?;
    let node = || node_id(uint(v, "node")?);
    let u32_of = |name: &str| u32::try_from(uint(v, name)?).map_err(|e| e.to_string());
    Ok(match kind {
        "announced" => MasterEvent::Announced {
            node: node()?,
            boot_id: u32_of("boot_id")?,
        },
        "schema_ready" => MasterEvent::SchemaReady {
            node: node()?,
            digest: SchemaDigest::from_hex(string(v, "digest")?).ok_or("bad `digest`")?,
            cached: field(v, "cached")?.as_bool().ok_or("bad `cached`")?,
        },
        "online" => MasterEvent::Online { node: node()? },
        "rebooted" => MasterEvent::Rebooted {
            node: node()?,
            old: u32_of("old")?,
            new: u32_of("new")?,
        },
        "offline" => MasterEvent::Offline { node: node()? },
        "failed" => MasterEvent::Failed {
            node: node()?,
            reason: string(v, "reason")?.to_string(),
        },
        "collision" => {
            let ids = field(v, "boot_ids")?
                .as_array()
                .filter(|a| a.len() == 2)
                .ok_or("bad `boot_ids`")?;
            let id = |j: &Json| {
                j.as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or("bad `boot_ids`")
            };
            MasterEvent::Collision {
                node: node()?,
                boot_ids: (id(&ids[0])?, id(&ids[1])?),
            }
        }
        "other_master" => MasterEvent::OtherMaster {
            session: u32_of("session")?,
        },
        "classic_node_on_fd_link" => MasterEvent::ClassicNodeOnFdLink { node: node()? },
        "param_changed" => MasterEvent::ParamChanged {
            node: node()?,
            name: string(v, "name")?.to_string(),
            // JSON has no types: a float with no fraction comes back as an integer, as
            // every value read from JSON does (`Value::from_json`).
            value: crate::value::Value::from_json(field(v, "value")?)
                .map_err(|e| format!("bad `value`: {e}"))?,
        },
        "update_progress" => MasterEvent::UpdateProgress {
            id: uint(v, "id")?,
            node: node()?,
            step: match string(v, "step")? {
                "offering" => UpdateStep::Offering,
                "sending" => UpdateStep::Sending,
                "verifying" => UpdateStep::Verifying,
                "rebooting" => UpdateStep::Rebooting,
                other => return Err(format!("unknown update step `{}`", Untrusted(other))),
            },
            progress: crate::update::Progress {
                acked: uint(v, "acked")?,
                size: uint(v, "size")?,
                rate: field(v, "rate")?.as_f64().ok_or("bad `rate`")?,
                eta_s: field(v, "eta_s")?.as_f64(),
                resent: uint(v, "resent")?,
            },
        },
        "params_carried" => {
            let list = |name: &str| -> Result<Vec<String>, String> {
                field(v, name)?
                    .as_array()
                    .and_then(|a| a.iter().map(|j| j.as_str().map(str::to_owned)).collect())
                    .ok_or_else(|| format!("bad `{name}`"))
            };
            MasterEvent::ParamsCarried {
                node: node()?,
                restored: list("restored")?,
                dropped: list("dropped")?,
            }
        }
        other => return Err(format!("unknown event kind `{}`", Untrusted(other))),
    })
}

fn stats_to_json(s: &EngineStats) -> Json {
    serde_json::to_value(StatsJson(*s)).unwrap_or(Json::Null)
}

fn stats_from_json(v: &Json) -> Result<EngineStats, String> {
    StatsJson::deserialize(v)
        .map(|s| s.0)
        .map_err(|e| format!("field `stats`: {e}"))
}

/// The engine's counters by name: the shape is this declaration, written once for both
/// ways (serde's remote derive fills [`EngineStats`] from it).
#[derive(Serialize, Deserialize)]
#[serde(remote = "EngineStats")]
struct EngineStatsDef {
    rx_frames: u64,
    rx_malformed: u64,
    rx_unrouted: u64,
    rx_ignored: u64,
    rx_reassembly_dropped: u64,
    tx_frames: u64,
    retries: u64,
    schema_bytes_read: u64,
    pending_requests: u64,
    discovers_limited: u64,
    data_ids_in_use: u64,
    // Newer counters: absent from an older daemon's status.
    #[serde(default)]
    publish_busy: u64,
    #[serde(default)]
    tx_withdrawn: u64,
    #[serde(default)]
    data_waiting_us: u64,
}

#[derive(Serialize, Deserialize)]
struct StatsJson(#[serde(with = "EngineStatsDef")] EngineStats);

impl Status {
    /// The status as JSON: `nodes` (each as [`NodeInfo::to_json`]), `samples` (per topic
    /// name), `stats` (the engine counters by name) and `bus_busy_us`.
    pub fn to_json(&self) -> Json {
        json!({
            "nodes": self.nodes.iter().map(NodeInfo::to_json).collect::<Vec<_>>(),
            "samples": self.samples,
            "stats": stats_to_json(&self.stats),
            "bus_busy_us": self.bus_busy.as_micros() as u64,
        })
    }

    /// Parses [`to_json`](Self::to_json)'s shape back (fields it does not know are
    /// ignored, so a newer daemon's additions do not break an older reader).
    pub fn from_json(v: &Json) -> Result<Status, String> {
        let nodes = field(v, "nodes")?
            .as_array()
            .ok_or("field `nodes` is not an array")?
            .iter()
            .map(NodeInfo::from_json)
            .collect::<Result<Vec<_>, _>>()?;
        let samples = field(v, "samples")?
            .as_object()
            .ok_or("field `samples` is not an object")?
            .iter()
            .map(|(k, n)| Ok((k.clone(), n.as_u64().ok_or("bad sample count")?)))
            .collect::<Result<BTreeMap<_, _>, String>>()?;
        Ok(Status {
            nodes,
            samples,
            stats: stats_from_json(field(v, "stats")?)?,
            bus_busy: Duration::from_micros(uint(v, "bus_busy_us")?),
        })
    }
}

/// The JSON of a data direction: `m2s` or `s2m`.
pub fn direction_name(d: fcan_core::msg::DataDirection) -> &'static str {
    match d {
        fcan_core::msg::DataDirection::M2s => "m2s",
        fcan_core::msg::DataDirection::S2m => "s2m",
    }
}

impl crate::planner::Plan {
    /// The plan as JSON: `{"frames": [{index, std_id, dir, len, masked, sequenced,
    /// group_parts, group_index, period_us, entries: [{block, topic, src_offset, len,
    /// dst_offset}]}]}`: what a FRAME_DEFINE carries, for recordings and the remote API.
    ///
    /// ```
    /// use fcan_master::planner::Plan;
    /// let p = Plan::from_json(&serde_json::json!({"frames": []})).unwrap();
    /// assert_eq!(Plan::from_json(&p.to_json()).unwrap(), p);
    /// assert!(Plan::from_json(&serde_json::json!({"frames": [{"index": 0}]})).is_err());
    /// ```
    pub fn to_json(&self) -> Json {
        serde_json::to_value(PlanJson::from(self)).unwrap_or(Json::Null)
    }

    /// Parses [`Plan::to_json`](crate::planner::Plan::to_json)'s JSON.
    pub fn from_json(v: &Json) -> Result<crate::planner::Plan, String> {
        let p = PlanJson::deserialize(v).map_err(|e| format!("plan: {e}"))?;
        Ok(crate::planner::Plan {
            frames: p
                .frames
                .into_iter()
                .map(|f| crate::planner::PlannedFrame {
                    header: f.header,
                    entries: f.entries.into_iter().map(|e| e.0).collect(),
                })
                .collect(),
        })
    }
}

/// A plan's JSON shape, declared once for both ways: what a FRAME_DEFINE carries, the
/// header's fields beside the frame's copy entries.
#[derive(Serialize, Deserialize)]
struct PlanJson {
    frames: Vec<FrameJson>,
}

#[derive(Serialize, Deserialize)]
struct FrameJson {
    #[serde(flatten, with = "FrameHeaderDef")]
    header: fcan_core::msg::FrameHeader,
    entries: Vec<EntryJson>,
}

#[derive(Serialize, Deserialize)]
struct EntryJson(#[serde(with = "CopyEntryDef")] fcan_core::msg::CopyEntry);

impl From<&crate::planner::Plan> for PlanJson {
    fn from(p: &crate::planner::Plan) -> PlanJson {
        PlanJson {
            frames: p
                .frames
                .iter()
                .map(|f| FrameJson {
                    header: f.header,
                    entries: f.entries.iter().copied().map(EntryJson).collect(),
                })
                .collect(),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "fcan_core::msg::FrameHeader")]
struct FrameHeaderDef {
    index: u8,
    std_id: u16,
    #[serde(with = "DataDirectionDef")]
    dir: fcan_core::msg::DataDirection,
    sequenced: bool,
    masked: bool,
    len: u8,
    group_parts: u8,
    group_index: u8,
    period_us: u32,
}

/// `m2s` or `s2m`, as [`direction_name`] writes it.
#[derive(Serialize, Deserialize)]
#[serde(remote = "fcan_core::msg::DataDirection", rename_all = "lowercase")]
enum DataDirectionDef {
    M2s,
    S2m,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "fcan_core::msg::CopyEntry")]
struct CopyEntryDef {
    block: u8,
    topic: u8,
    src_offset: u16,
    len: u8,
    dst_offset: u8,
}

impl crate::engine::UpdateReport {
    /// `{"version", "schema" (hex), "schema_changed", "restored": [..], "dropped": [..]}`:
    /// what `fcan update --json` prints and the remote API replies.
    pub fn to_json(&self) -> Json {
        json!({
            "version": self.version,
            "schema": self.schema.to_string(),
            "schema_changed": self.schema_changed,
            "restored": self.restored,
            "dropped": self.dropped,
        })
    }

    /// Parses [`to_json`](Self::to_json)'s shape back (untrusted input: checked).
    pub fn from_json(v: &Json) -> Result<Self, String> {
        let list = |name: &str| -> Result<Vec<String>, String> {
            field(v, name)?
                .as_array()
                .and_then(|a| a.iter().map(|j| j.as_str().map(str::to_owned)).collect())
                .ok_or_else(|| format!("bad `{name}`"))
        };
        Ok(crate::engine::UpdateReport {
            version: string(v, "version")?.to_string(),
            schema: SchemaDigest::from_hex(string(v, "schema")?).ok_or("bad `schema`")?,
            schema_changed: field(v, "schema_changed")?
                .as_bool()
                .ok_or("bad `schema_changed`")?,
            restored: list("restored")?,
            dropped: list("dropped")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &s in NodeState::ALL {
            assert_eq!(node_state_from_name(node_state_name(s)), Some(s));
        }
        for &m in BusMode::ALL {
            assert_eq!(bus_mode_from_name(bus_mode_name(m)), Some(m));
        }
        for p in [
            Phase::Reading,
            Phase::Provisioning,
            Phase::Running,
            Phase::Offline,
            Phase::Failed("no: room".into()),
        ] {
            assert_eq!(phase_from_str(&p.to_string()), Some(p));
        }
        assert_eq!(phase_from_str("sleeping"), None);
    }

    #[test]
    fn a_plan_has_the_documented_shape_and_bad_numbers_are_refused() {
        use fcan_core::msg::{CopyEntry, DataDirection, FrameHeader};
        let plan = crate::planner::Plan {
            frames: vec![crate::planner::PlannedFrame {
                header: FrameHeader {
                    index: 0,
                    std_id: 0x123,
                    dir: DataDirection::S2m,
                    sequenced: false,
                    masked: true,
                    len: 12,
                    group_parts: 1,
                    group_index: 0,
                    period_us: 1000,
                },
                entries: vec![CopyEntry {
                    block: 2,
                    topic: 1,
                    src_offset: 4,
                    len: 8,
                    dst_offset: 1,
                }],
            }],
        };
        // Written out by hand from the doc comment of `Plan::to_json`.
        let want = json!({"frames": [{
            "index": 0, "std_id": 0x123, "dir": "s2m", "len": 12, "masked": true,
            "sequenced": false, "group_parts": 1, "group_index": 0, "period_us": 1000,
            "entries": [{"block": 2, "topic": 1, "src_offset": 4, "len": 8, "dst_offset": 1}],
        }]});
        assert_eq!(plan.to_json(), want);
        assert_eq!(crate::planner::Plan::from_json(&want).unwrap(), plan);
        let mut wide = want.clone();
        wide["frames"][0]["entries"][0]["block"] = json!(256);
        assert!(
            crate::planner::Plan::from_json(&wide).is_err(),
            "a block is a u8"
        );
        let mut sideways = want;
        sideways["frames"][0]["dir"] = json!("up");
        assert!(crate::planner::Plan::from_json(&sideways).is_err());
    }

    #[test]
    fn events_round_trip() {
        let n = NodeId::new(3).unwrap();
        let events = [
            MasterEvent::Announced {
                node: n,
                boot_id: 7,
            },
            MasterEvent::SchemaReady {
                node: n,
                digest: SchemaDigest::of(b"x"),
                cached: true,
            },
            MasterEvent::Online { node: n },
            MasterEvent::Rebooted {
                node: n,
                old: 1,
                new: 2,
            },
            MasterEvent::Offline { node: n },
            MasterEvent::Failed {
                node: n,
                reason: "why\u{1b}".into(),
            },
            MasterEvent::Collision {
                node: n,
                boot_ids: (4, 5),
            },
            MasterEvent::OtherMaster { session: 9 },
            MasterEvent::ClassicNodeOnFdLink { node: n },
            MasterEvent::ParamChanged {
                node: n,
                name: "io_board3.out1.min_on_ms".into(),
                value: crate::value::Value::UInt(250),
            },
            MasterEvent::ParamChanged {
                node: n,
                name: "motor_driver2.motor1.velocity.kp".into(),
                value: crate::value::Value::Float(2.5),
            },
        ];
        for e in events {
            let j = event_to_json(&e).unwrap();
            assert_eq!(event_from_json(&j).unwrap(), e, "{j}");
        }
        assert!(event_from_json(&json!({"kind": "online", "node": 200})).is_err());
    }

    #[test]
    fn status_round_trips() {
        let mut s = Status::default();
        s.samples.insert("/a/b/c".into(), 5);
        s.stats.rx_frames = 11;
        s.bus_busy = Duration::from_micros(1234);
        let back = Status::from_json(&s.to_json()).unwrap();
        assert_eq!(back.samples, s.samples);
        assert_eq!(back.stats, s.stats);
        assert_eq!(back.bus_busy, s.bus_busy);
    }
}
