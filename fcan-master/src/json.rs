//! The JSON shapes of the master's data that more than one program writes or reads: a
//! node (one line of `fcan nodes --json`, also the remote API's node info), an engine
//! event (the `fcan monitor --json` event, also the remote API's events) and the bus
//! status of the remote API. One place, so the CLI and the remote server print the same
//! JSON and the remote client parses it back.
//!
//! Enumerations reach JSON only through the explicit names here (lowercase, stable when
//! a Rust variant is renamed, never `Debug` output).
//!
//! Every shape is one serde declaration for both ways. A node and an event are declared
//! on [`NodeInfo`] and [`MasterEvent`] themselves (their `Serialize` and `Deserialize`:
//! `serde_json::to_value(&node)` is the `fcan nodes --json` line), their enumerations
//! and identifiers written through the [`with`] modules here, whose text is part of the
//! interface; [`NodeInfo::to_json`], [`event_to_json`] and their inverses are thin
//! wrappers over them. Plain data (the engine's counters, a plan) is declared here.
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
use fcan_core::msg::{BusMode, NodeState};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use crate::api::MasterEvent;
use crate::api::{NodeInfo, Status};
use crate::engine::{EngineStats, Phase};
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

/// serde `with` modules for the identifiers and enumerations of node info and events:
/// each writes the stable text above (a node id as its number, a state as
/// [`node_state_name`], a phase as its `Display`, a digest as 64 hex digits) and reads
/// it back checked (the text may come from a remote daemon: untrusted).
///
/// [`NodeInfo`] and [`MasterEvent`] name them in their serde attributes; a view of
/// one field (the CLI's monitor lines) can name them too, and then spells it the same.
///
/// ```
/// use fcan_core::id::NodeId;
/// use fcan_master::Phase;
/// #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
/// struct Line {
///     #[serde(with = "fcan_master::json::with::node_id")]
///     id: NodeId,
///     #[serde(with = "fcan_master::json::with::phase")]
///     phase: Phase,
/// }
/// let l = Line { id: NodeId::new(3).unwrap(), phase: Phase::Failed("no room".into()) };
/// let j = serde_json::to_string(&l).unwrap();
/// assert_eq!(j, r#"{"id":3,"phase":"failed: no room"}"#);
/// assert_eq!(serde_json::from_str::<Line>(&j).unwrap(), l);
/// assert!(serde_json::from_str::<Line>(r#"{"id":200,"phase":"running"}"#).is_err());
/// ```
pub mod with {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::text::Untrusted;

    fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        String::deserialize(d)
    }

    /// A [`NodeId`](fcan_core::id::NodeId) as its number (a unicast id, `0..=126`).
    pub mod node_id {
        use super::*;
        use fcan_core::id::NodeId;

        /// Writes the number.
        pub fn serialize<S: Serializer>(n: &NodeId, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_u8(n.get())
        }

        /// Reads a number that is a node id.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NodeId, D::Error> {
            let v = u64::deserialize(d)?;
            u8::try_from(v)
                .ok()
                .and_then(NodeId::new)
                .ok_or_else(|| D::Error::custom(format!("{v} is not a node id")))
        }
    }

    /// A [`NodeState`](fcan_core::msg::NodeState) as [`node_state_name`](crate::json::node_state_name).
    pub mod node_state {
        use super::*;
        use fcan_core::msg::NodeState;

        /// Writes the name.
        pub fn serialize<S: Serializer>(v: &NodeState, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(super::super::node_state_name(*v))
        }

        /// Reads a name back.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NodeState, D::Error> {
            let t = text(d)?;
            super::super::node_state_from_name(&t)
                .ok_or_else(|| D::Error::custom(format!("unknown state `{}`", Untrusted(&t))))
        }
    }

    /// A [`BusMode`](fcan_core::msg::BusMode) as [`bus_mode_name`](crate::json::bus_mode_name).
    pub mod bus_mode {
        use super::*;
        use fcan_core::msg::BusMode;

        /// Writes the name.
        pub fn serialize<S: Serializer>(v: &BusMode, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(super::super::bus_mode_name(*v))
        }

        /// Reads a name back.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BusMode, D::Error> {
            let t = text(d)?;
            super::super::bus_mode_from_name(&t)
                .ok_or_else(|| D::Error::custom(format!("unknown mode `{}`", Untrusted(&t))))
        }
    }

    /// A [`Phase`](crate::Phase) as its `Display` (`running`, `reading schema`,
    /// `failed: <reason>`…).
    pub mod phase {
        use super::*;
        use crate::Phase;

        /// Writes the text.
        pub fn serialize<S: Serializer>(v: &Phase, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(v)
        }

        /// Reads the text back ([`phase_from_str`](crate::json::phase_from_str)).
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Phase, D::Error> {
            let t = text(d)?;
            super::super::phase_from_str(&t)
                .ok_or_else(|| D::Error::custom(format!("unknown phase `{}`", Untrusted(&t))))
        }
    }

    /// A [`SchemaDigest`](fcan_core::hash::SchemaDigest) as 64 hex digits.
    pub mod digest {
        use super::*;
        use fcan_core::hash::SchemaDigest;

        /// Writes the hex.
        pub fn serialize<S: Serializer>(v: &SchemaDigest, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(v)
        }

        /// Reads 64 hex digits.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SchemaDigest, D::Error> {
            let t = text(d)?;
            SchemaDigest::from_hex(&t)
                .ok_or_else(|| D::Error::custom("not a SHA-256 in 64 hex digits"))
        }
    }

    /// An optional [`SchemaDigest`](fcan_core::hash::SchemaDigest): 64 hex digits or
    /// `null`.
    pub mod opt_digest {
        use super::*;
        use fcan_core::hash::SchemaDigest;

        /// Writes the hex, or `null`.
        pub fn serialize<S: Serializer>(v: &Option<SchemaDigest>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(d) => s.collect_str(d),
                None => s.serialize_none(),
            }
        }

        /// Reads 64 hex digits or `null`.
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<SchemaDigest>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|t| {
                    SchemaDigest::from_hex(&t)
                        .ok_or_else(|| D::Error::custom("not a SHA-256 in 64 hex digits"))
                })
                .transpose()
        }
    }

    /// An optional value written as its `Display` text and read back with `FromStr`
    /// (a [`DeviceWatchdog`](crate::DeviceWatchdog): `200 ms`, `off`, `none`), or
    /// `null`.
    pub mod opt_text {
        use super::*;
        use std::fmt::Display;
        use std::str::FromStr;

        /// Writes the text, or `null`.
        pub fn serialize<T: Display, S: Serializer>(
            v: &Option<T>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match v {
                Some(v) => s.collect_str(v),
                None => s.serialize_none(),
            }
        }

        /// Reads the text back, or `null`.
        pub fn deserialize<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
        where
            T: FromStr,
            T::Err: Display,
            D: Deserializer<'de>,
        {
            Option::<String>::deserialize(d)?
                .map(|t| t.parse().map_err(D::Error::custom))
                .transpose()
        }
    }

    /// An [`UpdateStep`](crate::engine::UpdateStep) as its `Display`: `offering`,
    /// `sending`, `verifying`, `rebooting`.
    pub mod update_step {
        use super::*;
        use crate::engine::UpdateStep;

        /// Writes the name.
        pub fn serialize<S: Serializer>(v: &UpdateStep, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(v)
        }

        /// Reads a name back.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<UpdateStep, D::Error> {
            let t = text(d)?;
            [
                UpdateStep::Offering,
                UpdateStep::Sending,
                UpdateStep::Verifying,
                UpdateStep::Rebooting,
            ]
            .into_iter()
            .find(|s| s.to_string() == t)
            .ok_or_else(|| D::Error::custom(format!("unknown update step `{}`", Untrusted(&t))))
        }
    }

    /// A [`Value`](crate::value::Value) read as any JSON value is
    /// ([`Value::from_json`](crate::value::Value::from_json): JSON has no types, so a
    /// float with no fraction comes back as an integer); written by its own `Serialize`.
    pub mod value {
        use super::*;
        use crate::value::Value;

        /// Writes the value (NaN and the infinities as `null`).
        pub fn serialize<S: Serializer>(v: &Value, s: S) -> Result<S::Ok, S::Error> {
            serde::Serialize::serialize(v, s)
        }

        /// Reads a JSON value.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
            let j = serde_json::Value::deserialize(d)?;
            Value::from_json(&j).map_err(D::Error::custom)
        }
    }
}

/// A firmware update's progress as the fields of an `update_progress` event (flattened
/// into it): `acked`, `size`, `rate`, `eta_s` (`null` while unknown), `resent`.
#[derive(Serialize, Deserialize)]
#[serde(remote = "crate::update::Progress")]
pub(crate) struct ProgressDef {
    acked: u64,
    size: u64,
    rate: f64,
    eta_s: Option<f64>,
    resent: u64,
}

impl NodeInfo {
    /// The node as JSON: one line of `fcan nodes --json` (`id`, `name`, `phase`, `state`,
    /// `boot_id`, `mode`, `frames`, `errors`, `schema`, `schema_source`, `driver`,
    /// `watchdog`, `firmware`, `collision`). Its `Serialize` (declared on [`NodeInfo`])
    /// as a JSON tree.
    ///
    /// ```
    /// # use fcan_master::NodeInfo;
    /// # fn show(n: &NodeInfo) {
    /// let line = n.to_json().to_string();
    /// # }
    /// ```
    pub fn to_json(&self) -> Json {
        serde_json::to_value(self).expect("node info serializes")
    }

    /// Parses [`to_json`](Self::to_json)'s shape back (for a remote client: the text is
    /// untrusted, every field is checked): its `Deserialize`.
    pub fn from_json(v: &Json) -> Result<NodeInfo, String> {
        NodeInfo::deserialize(v).map_err(|e| e.to_string())
    }
}

/// One line for people about an engine event, or `None` for the chatty ones (request
/// completions). Text from nodes in it is escaped. The `text` of an event's JSON.
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

/// An event as JSON: the `fcan monitor --json` event (`kind`, `node`, `text`) plus the
/// event's own fields (`boot_id`; `digest`, `cached`; `old`, `new`; `reason`;
/// `boot_ids`; `session`; `restored`, `dropped`; `name`, `value`; `id`, `step`, `acked`,
/// `size`, `rate`, `eta_s`, `resent`), so a reader can rebuild it ([`event_from_json`]):
/// [`MasterEvent`]'s `Serialize` as a JSON tree. `None` for the events that have no JSON
/// (an update's end, which answers the request that began it).
pub fn event_to_json(e: &MasterEvent) -> Option<Json> {
    serde_json::to_value(e).ok()
}

/// Parses [`event_to_json`]'s shape back into the event (untrusted input: checked):
/// [`MasterEvent`]'s `Deserialize`.
pub fn event_from_json(v: &Json) -> Result<MasterEvent, String> {
    MasterEvent::deserialize(v).map_err(|e| e.to_string())
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
    use fcan_core::id::NodeId;

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
