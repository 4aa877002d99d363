//! What each command outputs, as data: one serde view struct per shape. `--json` prints
//! each view as one JSON object per line (its fields are the JSON fields, documented in
//! `docs/cli.md`); the text renderer prints the same views for people.
//!
//! Enumerations reach JSON only through explicit mappings ([`node_state_name`],
//! [`bus_mode_name`], [`direction_name`], the `fcan_master::json::with` modules):
//! lowercase, stable names that do not change when a Rust variant is renamed, never
//! `Debug` output. A node and an event are the master's own serde shapes
//! (`fcan_master::NodeInfo`, `fcan_master::MasterEvent`, shared with the remote API):
//! [`NodeView`] is a node as it serializes, [`EventView`] and [`MonitorNodeView`] take
//! their fields from those shapes.

use std::collections::BTreeMap;

use fcan_core::hash::SchemaDigest;
use fcan_core::ir::Field;
use fcan_core::msg::{BusMode, DataDirection};
use fcan_master::value::Value;
use fcan_master::MasterEvent;
use fcan_master::NodeInfo;
use fcan_master::Phase;
use serde::{Deserialize, Serialize, Serializer};

// The names of node states and bus modes are shared with the remote API: one mapping,
// in `fcan_master::json`.
pub use fcan_master::json::{bus_mode_name, direction_name, node_state_name};

fn ser_dir<S: Serializer>(d: &DataDirection, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(direction_name(*d))
}

/// One node (`fcan nodes`): the node as the master serializes it, the line docs/cli.md
/// lists (`id`, `name`, `phase`, `state`, `boot_id`, `mode`, `frames`, `errors`,
/// `schema`, `schema_source`, `driver`, `watchdog`, `firmware`, `collision`), which is
/// also the remote API's node info. Its fields are the [`NodeInfo`]'s (`Deref`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct NodeView(pub NodeInfo);

impl From<&NodeInfo> for NodeView {
    fn from(n: &NodeInfo) -> Self {
        NodeView(n.clone())
    }
}

impl std::ops::Deref for NodeView {
    type Target = NodeInfo;

    fn deref(&self) -> &NodeInfo {
        &self.0
    }
}

/// One field of a message: `{"name": "position", "type": "f32", "len": null}`.
#[derive(Clone, Debug, Serialize)]
pub struct FieldView {
    /// Field name.
    pub name: String,
    /// Element type (`f32`, `u8`, `bool`…).
    #[serde(rename = "type")]
    pub ty: String,
    /// `null` for a scalar, the element count for a fixed array.
    pub len: Option<u32>,
}

impl FieldView {
    /// Every field of a message.
    pub fn all(fields: &[Field]) -> Vec<FieldView> {
        fields
            .iter()
            .map(|f| FieldView {
                name: f.name.clone(),
                ty: f.ty.to_string(),
                len: f.len,
            })
            .collect()
    }

    /// Fields on one line, `{position: f32, raw: [u8; 4]}`: the `fields`, `request` and
    /// `response` strings of the list views.
    pub fn line(fields: &[FieldView]) -> String {
        let parts: Vec<String> = fields
            .iter()
            .map(|f| match f.len {
                Some(n) => format!("{}: [{}; {n}]", f.name, f.ty),
                None => format!("{}: {}", f.name, f.ty),
            })
            .collect();
        format!("{{{}}}", parts.join(", "))
    }
}

/// One topic (`fcan topic list`).
#[derive(Clone, Debug, Serialize)]
pub struct TopicView {
    /// `/<node>/<ns>/<topic>`.
    pub name: String,
    /// [`direction_name`].
    #[serde(serialize_with = "ser_dir")]
    pub dir: DataDirection,
    /// Publication period in microseconds; 0 for "on commit" (s2m) or "on publish" (m2s).
    pub period_us: u32,
    /// The fields as one line, `{position: f32, raw: [u8; 4]}`.
    pub fields: String,
}

/// One topic in detail (`fcan topic info`).
#[derive(Clone, Debug, Serialize)]
pub struct TopicInfoView {
    /// `/<node>/<ns>/<topic>`.
    pub name: String,
    /// [`direction_name`].
    #[serde(serialize_with = "ser_dir")]
    pub dir: DataDirection,
    /// Publication period in microseconds (0: on commit / on publish).
    pub period_us: u32,
    /// Packed size in bytes.
    pub size_bytes: usize,
    /// The ROS message type the schema maps it to, if any (free text from the bus).
    pub ros_type: Option<String>,
    /// The fields.
    pub fields: Vec<FieldView>,
}

/// One message received (`fcan topic echo`).
#[derive(Clone, Debug, Serialize)]
pub struct SampleView {
    /// Topic name.
    pub topic: String,
    /// Seconds since the command started.
    pub t: f64,
    /// The value, as JSON.
    pub value: Value,
}

/// `fcan topic pub`'s result.
#[derive(Clone, Debug, Serialize)]
pub struct PublishedView {
    /// Topic name.
    pub topic: String,
    /// How many times the value was published.
    pub published: u64,
    /// The value published.
    pub value: Value,
}

/// `fcan topic hz`'s measurement.
#[derive(Clone, Debug, Serialize)]
pub struct RateView {
    /// Topic name.
    pub topic: String,
    /// Messages received in the window.
    pub samples: usize,
    /// Messages per second (0 with fewer than two messages).
    pub rate_hz: f64,
    /// The shortest gap between two messages, in seconds (0 without a gap).
    pub min_gap_s: f64,
    /// The longest gap, in seconds.
    pub max_gap_s: f64,
    /// The measuring window, in seconds.
    pub window_s: f64,
}

/// One service (`fcan service list`).
#[derive(Clone, Debug, Serialize)]
pub struct ServiceView {
    /// `/<node>/<ns>/<service>`.
    pub name: String,
    /// The request's fields as one line, `{on: bool}`.
    pub request: String,
    /// The response's fields as one line.
    pub response: String,
}

/// `fcan service call`'s response.
#[derive(Clone, Debug, Serialize)]
pub struct CallView {
    /// Service name.
    pub service: String,
    /// The response, as JSON.
    pub response: Value,
}

/// One parameter's declaration (`fcan param list`).
#[derive(Clone, Debug, Serialize)]
pub struct ParamView {
    /// `<node>.<ns>.<param>`.
    pub name: String,
    /// Its type (`f32`, `u16`…).
    #[serde(rename = "type")]
    pub ty: &'static str,
    /// Default value.
    pub default: Value,
    /// Lower bound, `null` when none.
    pub min: Option<Value>,
    /// Upper bound, `null` when none.
    pub max: Option<Value>,
}

/// A parameter's value (`fcan param get`, each line of `fcan param dump`).
#[derive(Clone, Debug, Serialize)]
pub struct ParamValueView {
    /// Parameter name.
    pub name: String,
    /// Its value, as read from the node.
    pub value: Value,
}

/// `fcan param set`'s result.
#[derive(Clone, Debug, Serialize)]
pub struct ParamSetView {
    /// Parameter name.
    pub name: String,
    /// The value written.
    pub value: Value,
    /// Always `true`: a failed write is an error, not a line.
    pub set: bool,
}

/// One line of `fcan param load`.
#[derive(Clone, Debug, Serialize)]
pub struct ParamLoadView {
    /// Parameter name, as the file has it.
    pub name: String,
    /// Whether the node took the value.
    pub ok: bool,
    /// Why not, `null` when it did.
    pub error: Option<String>,
}

/// A parameter in a schema (`fcan schema show`).
#[derive(Clone, Debug, Serialize)]
pub struct SchemaParamView {
    /// Name within its block type.
    pub name: String,
    /// Type (`f32`…).
    #[serde(rename = "type")]
    pub ty: String,
    /// Default value.
    pub default: Value,
    /// Lower bound, `null` when none.
    pub min: Option<Value>,
    /// Upper bound, `null` when none.
    pub max: Option<Value>,
    /// `null` for a scalar, the element count of an array parameter.
    pub len: Option<u32>,
}

/// A topic's or service's ROS 2 type (`ros:` in the schema).
#[derive(Clone, Debug, Serialize)]
pub struct RosView {
    /// The ROS type (`std_msgs/msg/Bool`).
    #[serde(rename = "type")]
    pub ty: String,
    /// Field renames, schema field → ROS field, in the schema's order.
    #[serde(serialize_with = "ser_pairs")]
    pub map: Vec<(String, String)>,
}

impl RosView {
    fn of(r: &Option<fcan_core::ir::Ros>) -> Option<RosView> {
        r.as_ref().map(|r| RosView {
            ty: r.ty.clone(),
            map: r.map.clone(),
        })
    }
}

fn ser_pairs<S: Serializer>(pairs: &[(String, String)], ser: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = ser.serialize_map(Some(pairs.len()))?;
    for (k, v) in pairs {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

/// A topic in a schema.
#[derive(Clone, Debug, Serialize)]
pub struct SchemaTopicView {
    /// Name within its block type.
    pub name: String,
    /// [`direction_name`].
    #[serde(serialize_with = "ser_dir")]
    pub dir: DataDirection,
    /// Period in microseconds (0: on commit / on publish).
    pub period_us: u32,
    /// The fields.
    pub fields: Vec<FieldView>,
    /// Its ROS 2 type, `null` when the schema gives none.
    pub ros: Option<RosView>,
}

/// A service in a schema.
#[derive(Clone, Debug, Serialize)]
pub struct SchemaServiceView {
    /// Name within its block type.
    pub name: String,
    /// Request fields.
    pub request: Vec<FieldView>,
    /// Response fields.
    pub response: Vec<FieldView>,
    /// Its ROS 2 type, `null` when the schema gives none.
    pub ros: Option<RosView>,
}

/// A block type in a schema.
#[derive(Clone, Debug, Serialize)]
pub struct SchemaTypeView {
    /// Type name (`motor`).
    pub name: String,
    /// Its parameters.
    pub params: Vec<SchemaParamView>,
    /// Its topics.
    pub topics: Vec<SchemaTopicView>,
    /// Its services.
    pub services: Vec<SchemaServiceView>,
}

/// An instance array in a schema.
#[derive(Clone, Debug, Serialize)]
pub struct SchemaInstancesView {
    /// The block type.
    #[serde(rename = "type")]
    pub ty: String,
    /// How many instances the schema allows.
    pub max_count: u32,
    /// Namespace pattern (`motor{i}`).
    pub ns: String,
}

/// The node's limits as its schema declares them.
#[derive(Clone, Debug, Serialize)]
pub struct LimitsView {
    /// Data frames the node can hold.
    pub max_frames: u32,
    /// Copy entries the node can hold.
    pub max_copy_entries: u32,
    /// Service buffer, bytes.
    pub service_buffer: u32,
    /// Service reassembly buffer, bytes.
    pub service_reassembly: u32,
}

/// A node's schema as the master decoded it (`fcan schema show`).
#[derive(Clone, Debug, Serialize)]
pub struct SchemaView {
    /// The blob's SHA-256, 64 hex digits.
    pub digest: String,
    /// Node name pattern (`motor_driver{i}`).
    pub node: String,
    /// Protocol version.
    pub protocol: u32,
    /// `options.allocation` (`static`).
    pub allocation: String,
    /// Limits.
    pub limits: LimitsView,
    /// Block types.
    pub types: Vec<SchemaTypeView>,
    /// Instance arrays.
    pub instances: Vec<SchemaInstancesView>,
}

impl SchemaView {
    /// The view of a decoded schema and its digest.
    pub fn new(s: &fcan_core::ir::Schema, digest: &SchemaDigest) -> SchemaView {
        let opt = |v: Option<fcan_core::types::Scalar>| v.map(Value::from_scalar);
        SchemaView {
            digest: digest.to_string(),
            node: s.node.clone(),
            protocol: s.protocol,
            allocation: s.allocation.clone(),
            limits: LimitsView {
                max_frames: s.limits.max_frames,
                max_copy_entries: s.limits.max_copy_entries,
                service_buffer: s.limits.service_buffer,
                service_reassembly: s.limits.service_reassembly,
            },
            types: s
                .types
                .iter()
                .map(|t| SchemaTypeView {
                    name: t.name.clone(),
                    params: t
                        .params
                        .iter()
                        .map(|p| SchemaParamView {
                            name: p.name.clone(),
                            ty: p.ty.to_string(),
                            default: Value::from_scalar(p.default),
                            min: opt(p.min),
                            max: opt(p.max),
                            len: p.len,
                        })
                        .collect(),
                    topics: t
                        .topics
                        .iter()
                        .map(|tp| SchemaTopicView {
                            name: tp.name.clone(),
                            dir: tp.dir,
                            period_us: tp.period_us,
                            fields: FieldView::all(&tp.fields),
                            ros: RosView::of(&tp.ros),
                        })
                        .collect(),
                    services: t
                        .services
                        .iter()
                        .map(|sv| SchemaServiceView {
                            name: sv.name.clone(),
                            request: FieldView::all(&sv.request),
                            response: FieldView::all(&sv.response),
                            ros: RosView::of(&sv.ros),
                        })
                        .collect(),
                })
                .collect(),
            instances: s
                .instances
                .iter()
                .map(|a| SchemaInstancesView {
                    ty: a.ty.clone(),
                    max_count: a.max_count,
                    ns: a.ns.clone(),
                })
                .collect(),
        }
    }
}

/// One node in a monitor refresh.
#[derive(Clone, Debug, Serialize)]
pub struct MonitorNodeView {
    /// Node id.
    pub id: u8,
    /// Node name.
    pub name: String,
    /// As a node's `phase` (`NodeInfo::phase`).
    #[serde(with = "fcan_master::json::with::phase")]
    pub phase: Phase,
    /// [`bus_mode_name`].
    #[serde(with = "fcan_master::json::with::bus_mode")]
    pub mode: BusMode,
    /// The error summary of its last heartbeat.
    pub errors: u16,
}

/// An engine event the monitor saw: the first three fields of the event's JSON
/// (`fcan_master::MasterEvent`'s serde shape, the remote API's events).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EventView {
    /// `announced`, `schema_ready`, `online`, `rebooted`, `offline`, `failed`,
    /// `collision`, `other_master`, `classic_node_on_fd_link`, `params_carried`,
    /// `param_changed` or `update_progress` (docs/cli.md).
    pub kind: String,
    /// The node it is about, `null` for bus-wide events.
    pub node: Option<u8>,
    /// One line for people (`crate::describe_event`).
    pub text: String,
}

impl EventView {
    /// The view of an engine event, or `None` for those that have no JSON (an update's
    /// end, which answers the request that began it).
    pub fn of(e: &MasterEvent) -> Option<EventView> {
        // The event as the remote API writes it, cut to `kind`, `node` and `text`.
        serde_json::from_value(serde_json::to_value(e).ok()?).ok()
    }
}

/// One `fcan monitor` refresh of one bus. Rates are over the refresh interval.
#[derive(Clone, Debug, Serialize)]
pub struct MonitorView {
    /// The bus's name in the daemon, attached to one (`fcan monitor` then shows every
    /// bus the daemon serves, one line per bus per refresh); absent for a one-shot master.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    /// The nodes.
    pub nodes: Vec<MonitorNodeView>,
    /// Messages per second of each topic that has had any.
    pub rates_hz: BTreeMap<String, f64>,
    /// The fraction of the interval the bus was busy (0–1) at the master's nominal bit
    /// rates.
    pub bus_load: f64,
    /// Frames received since the master started.
    pub rx_frames: u64,
    /// Frames sent since the master started.
    pub tx_frames: u64,
    /// Frames received per second.
    pub rx_per_s: f64,
    /// Frames sent per second.
    pub tx_per_s: f64,
    /// Commands retried since the master started.
    pub retries: u64,
    /// Frames dropped as malformed since the master started.
    pub rx_malformed: u64,
    /// Events since the previous refresh.
    pub events: Vec<EventView>,
    /// The status of the daemon's joints on this bus (`fcan serve --ros2 --joints`);
    /// absent when the daemon runs none (or for a one-shot master).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joints: Option<JointsView>,
}

/// The status of a daemon's joints (`fcan serve --ros2 --joints`): the JSON of
/// `fcan/<bus>/joints/status` (`docs/remote.md`) and of `fcan monitor --json`'s
/// `joints`.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct JointsView {
    /// `configuring`, `activating`, `active`, `inactive`, `faulted` or `stopped`.
    pub state: String,
    /// While faulted: the cause as one word (`feedback_timeout`, `device_watchdog`,
    /// `ack_timeout`, `device_fault`, `node_lost`, `write_refused`, `master_gone`),
    /// else `null`.
    pub cause: Option<String>,
    /// While faulted: the fault for people, else `null`.
    pub fault: Option<String>,
    /// The status text of `/fcan_joints/status` (`faulted: <fault>`, `configuring: <why>` …).
    pub text: String,
    /// When the joints entered `state`: wall time, seconds since the Unix epoch.
    pub since: f64,
}

impl JointsView {
    /// The view of the joints' status.
    pub fn of(s: &fcan_ros2_bridge::joints::JointsStatus) -> JointsView {
        JointsView {
            state: s.state.as_str().into(),
            cause: s.cause.map(str::to_string),
            fault: s.fault.clone(),
            text: s.text.clone(),
            since: s
                .since
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }
}

/// An error, as `fcan --json` writes it to stderr.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorView {
    /// `master` (the master or a node refused), `io` (a file or the output) or `usage`.
    pub kind: &'static str,
    /// The message for people.
    pub error: String,
}

/// One data frame of a node's plan (`fcan plan`).
#[derive(Clone, Debug, Serialize)]
pub struct PlanFrameView {
    /// The node's name.
    pub node: String,
    /// Position in the plan.
    pub index: u8,
    /// Standard identifier.
    pub std_id: u16,
    /// `m2s` or `s2m`.
    pub dir: &'static str,
    /// Payload bytes.
    pub len: u8,
    /// Byte 0 is a presence mask.
    pub masked: bool,
    /// Part `group_index` of a split group of `group_parts` frames (1: an ordinary frame).
    pub group_parts: u8,
    /// Position in the group.
    pub group_index: u8,
    /// s2m period (µs; 0: on commit).
    pub period_us: u32,
    /// The topics it carries.
    pub topics: Vec<String>,
}

/// `fcan plan --dbc`'s result.
#[derive(Clone, Debug, Serialize)]
pub struct DbcView {
    /// The file written.
    pub file: String,
    /// Frames (messages) described.
    pub messages: usize,
    /// Nodes.
    pub nodes: usize,
}

/// `fcan update`'s progress: `{"event": "progress", "node", "name", "step", "acked",
/// "size", "rate" (bytes/s), "eta_s", "resent"}`.
#[derive(Clone, Debug, Serialize)]
pub struct UpdateProgressView {
    /// `progress`.
    pub event: &'static str,
    /// Node id.
    pub node: u8,
    /// Node name.
    pub name: String,
    /// `offering`, `sending`, `verifying`, `rebooting`.
    pub step: String,
    /// Bytes the node stored.
    pub acked: u64,
    /// Image size.
    pub size: u64,
    /// Bytes per second.
    pub rate: f64,
    /// Seconds left, `null` while unknown.
    pub eta_s: Option<f64>,
    /// Bytes sent again after losses.
    pub resent: u64,
}

/// `fcan update`'s result per node: `{"event": "done" | "skipped" | "aborted", "node", "name",
/// "version", "schema", "schema_changed", "restored", "dropped"}`.
#[derive(Clone, Debug, Serialize)]
pub struct UpdatedView {
    /// `done`, `skipped` (it runs the image's schema already) or `aborted`.
    pub event: &'static str,
    /// Node id.
    pub node: u8,
    /// Node name.
    pub name: String,
    /// The version it runs now (for `skipped`: what it reports).
    pub version: Option<String>,
    /// Its schema's SHA-256 now (hex).
    pub schema: Option<String>,
    /// Whether the schema changed.
    pub schema_changed: bool,
    /// Parameters restored (`node.block.param`).
    pub restored: Vec<String>,
    /// Parameters the new schema lacks: not restored.
    pub dropped: Vec<String>,
}

impl UpdatedView {
    /// A node left on the firmware it runs (`skipped`, `aborted`): its version and schema
    /// as the master lists them.
    pub fn unchanged(event: &'static str, n: &NodeInfo) -> UpdatedView {
        UpdatedView {
            event,
            node: n.id.get(),
            name: n.name.clone(),
            version: n.firmware.clone(),
            schema: n.digest.map(|d| d.to_string()),
            schema_changed: false,
            restored: Vec::new(),
            dropped: Vec::new(),
        }
    }
}

/// `fcan record`'s summary.
#[derive(Clone, Debug, Serialize)]
pub struct RecordedView {
    /// The file written.
    pub file: String,
    /// How long it recorded.
    pub seconds: f64,
    /// Messages written (topic values and frames).
    pub messages: u64,
    /// Raw frames among them.
    pub frames: u64,
    /// Frames lost because the recorder fell behind.
    pub frames_lost: u64,
    /// Nodes recorded.
    pub nodes: usize,
    /// File size.
    pub bytes: u64,
}

/// Everything a command can report, in the order it happens. The executor produces
/// these, the renderer prints them: a list is one report (a table in text, one JSON line
/// per item), a stream one report per message.
#[derive(Clone, Debug)]
pub(crate) enum Report {
    Nodes(Vec<NodeView>),
    Topics(Vec<TopicView>),
    TopicInfo(TopicInfoView),
    Sample(SampleView),
    Published(PublishedView),
    Rate(RateView),
    Services(Vec<ServiceView>),
    Call(CallView),
    Params(Vec<ParamView>),
    ParamGet(ParamValueView),
    ParamSet(ParamSetView),
    ParamDump(ParamValueView),
    ParamLoad(ParamLoadView),
    Schema(Box<SchemaView>),
    /// One refresh: one view per bus.
    Monitor(Vec<MonitorView>),
    Plan(Vec<PlanFrameView>),
    Recorded(RecordedView),
    Dbc(DbcView),
    /// How far a firmware update is.
    UpdateProgress(UpdateProgressView),
    /// A firmware update done (or skipped: the node runs the image's schema already).
    Updated(UpdatedView),
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_core::msg::NodeState;

    /// The names are what docs/cli.md promises: lowercase identifiers, one per variant.
    #[test]
    fn enum_names_are_stable_lowercase_and_distinct() {
        let check = |names: Vec<&'static str>, expected: &[&str]| {
            assert_eq!(names, expected);
        };
        check(
            NodeState::ALL.iter().map(|s| node_state_name(*s)).collect(),
            &[
                "unprovisioned",
                "provisioned",
                "running",
                "suspended",
                "fault",
            ],
        );
        check(
            BusMode::ALL.iter().map(|m| bus_mode_name(*m)).collect(),
            &["classic", "fd", "fd_brs"],
        );
        check(
            [DataDirection::M2s, DataDirection::S2m]
                .into_iter()
                .map(direction_name)
                .collect(),
            &["m2s", "s2m"],
        );
    }
}
