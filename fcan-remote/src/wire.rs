//! The JSON shapes of the remote API (`docs/remote.md`). A node and an event are the
//! serde shapes of `fcan_master::NodeInfo` and `fcan_master::MasterEvent` (shared with
//! the CLI's `--json` output), the status is `fcan_master::Status::to_json`; this module
//! adds the ones only the remote API has: the sample attachment, the error reply, the
//! parameter reply, the registry and the batch of commands.

use fcan_core::ir::Field;
use fcan_core::msg::DataDirection;
use fcan_master::registry::Registry;
use fcan_master::update::UpdateImage;
use fcan_master::value::{Shape, Value};
use fcan_master::{ErrorKind, MasterError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

/// The attachment of every sample the daemon puts:
/// `{"t_us": …, "boot_id": …, "digest": "…"}`.
///
/// ```
/// let a = fcan_remote::wire::Attachment { t_us: 5, boot_id: 7, digest: "ab".into() };
/// let text = serde_json::to_string(&a).unwrap();
/// assert_eq!(text, r#"{"t_us":5,"boot_id":7,"digest":"ab"}"#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// Receive time: µs on the daemon's monotonic clock since it started.
    pub t_us: u64,
    /// The boot id of the node that sent it.
    pub boot_id: u32,
    /// The SHA-256 (hex) of the node's schema.
    pub digest: String,
}

/// The payload of an error reply: `{"error": KIND, "message": TEXT}`, `KIND` an
/// [`ErrorKind`] as [`ErrorKind::as_str`] spells it. The kinds are classified in
/// `fcan_master` ([`MasterError::kind`]), once for in-process and remote code; this
/// module only spells them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// The kind as the wire spells it (kept as text: a newer daemon may spell a kind
    /// this version does not know).
    pub error: String,
    /// For people.
    pub message: String,
}

impl ErrorReply {
    /// An error reply.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            error: kind.as_str().to_string(),
            message: message.into(),
        }
    }

    /// The reply for a master error: its [`kind`](MasterError::kind), and its message
    /// (a remote error relayed keeps the daemon's words).
    pub fn of(e: &MasterError) -> ErrorReply {
        let message = match e {
            MasterError::Remote { message, .. } => message.clone(),
            e => e.to_string(),
        };
        ErrorReply::new(e.kind(), message)
    }

    /// The kind the reply names ([`ErrorKind::Unrecognized`] for a spelling this
    /// version does not know).
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_wire(&self.error)
    }

    /// The error a client returns for this reply. A kind this version does not know
    /// keeps its spelling in the message, so nothing the daemon said is lost.
    pub fn into_error(self) -> MasterError {
        let kind = self.kind();
        let message = if kind == ErrorKind::Unrecognized {
            format!("{}: {}", self.error, self.message)
        } else {
            self.message
        };
        MasterError::Remote { kind, message }
    }

    /// The JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("serializes")
    }
}

/// The reply of a parameter get or set: `{"value": V}`.
pub fn param_reply(v: &Value) -> Json {
    json!({ "value": v.to_json() })
}

/// The payload of a put on `fcan/<bus>/publish`: one member per m2s topic, named by the
/// topic (`/<node>/<ns>/<name>`), its value shaped as a put on that topic's own key.
/// A topic named twice keeps its last value, as publishing it twice in one batch would.
///
/// ```
/// use fcan_master::value::Value;
/// let items = vec![("/md1/motor0/target".to_string(), Value::Float(0.5))];
/// let j = fcan_remote::wire::batch_json(&items);
/// assert_eq!(j.to_string(), r#"{"/md1/motor0/target":0.5}"#);
/// assert_eq!(fcan_remote::wire::batch_from_json(j.to_string().as_bytes()).unwrap(), items);
/// ```
pub fn batch_json(items: &[(String, Value)]) -> Json {
    Json::Object(
        items
            .iter()
            .map(|(t, v)| (t.clone(), v.to_json()))
            .collect(),
    )
}

/// The items of a batch payload ([`batch_json`]), or why it is not one: not JSON, not
/// an object, an empty object (publishing nothing is certainly a client's mistake, and
/// refusing it lets the client see it in `rejected_puts`), a value that is no value.
pub fn batch_from_json(bytes: &[u8]) -> Result<Vec<(String, Value)>, String> {
    batch_from_json_as(bytes, |_| None)
}

/// [`batch_from_json`], saying what a field takes where an item holds no value (a
/// string, `null`): `shape_of` gives a topic's fields, when known.
pub(crate) fn batch_from_json_as<'a>(
    bytes: &[u8],
    shape_of: impl Fn(&str) -> Option<Shape<'a>>,
) -> Result<Vec<(String, Value)>, String> {
    let j: Json = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let Json::Object(m) = j else {
        return Err("a batch is a JSON object {\"/<node>/<ns>/<topic>\": value, …}".into());
    };
    if m.is_empty() {
        return Err("an empty batch publishes nothing".into());
    }
    m.into_iter()
        .map(|(t, v)| match Value::from_json(&v) {
            Ok(v) => Ok((t, v)),
            Err(e) => {
                let e = shape_of(&t)
                    .and_then(|shape| Value::from_json_as(&v, shape).err())
                    .unwrap_or(e);
                Err(e.within(&t).to_string())
            }
        })
        .collect()
}

fn dir_name(d: DataDirection) -> &'static str {
    match d {
        DataDirection::M2s => "m2s",
        DataDirection::S2m => "s2m",
    }
}

fn fields(f: &[Field]) -> Json {
    Json::Array(
        f.iter()
            .map(|f| json!({"name": f.name, "type": f.ty.to_string(), "len": f.len}))
            .collect(),
    )
}

/// The registry as JSON: `{"topics": [...], "services": [...], "params": [...]}`. Each
/// entry has its `name`, `node` (id) and `block` (number); a topic its `dir`
/// (`m2s`/`s2m`), `period_us`, `fields` (`[{"name","type","len"}]`) and `ros_type`; a
/// service its `request` and `response` fields; a parameter its `type`, `len`,
/// `default`, `min` and `max` (`null` when unbounded).
pub fn registry_json(r: &Registry) -> Json {
    let scalar = |s: Option<fcan_core::types::Scalar>| s.map(|s| Value::from_scalar(s).to_json());
    json!({
        "topics": r.topics.iter().map(|t| json!({
            "name": t.name,
            "node": t.node.get(),
            "block": t.block,
            "dir": dir_name(t.dir),
            "period_us": t.period_us,
            "fields": fields(&t.fields),
            "ros_type": t.ros_type,
        })).collect::<Vec<_>>(),
        "services": r.services.iter().map(|s| json!({
            "name": s.name,
            "node": s.node.get(),
            "block": s.block,
            "request": fields(&s.request),
            "response": fields(&s.response),
        })).collect::<Vec<_>>(),
        "params": r.params.iter().map(|p| json!({
            "name": p.name,
            "node": p.node.get(),
            "block": p.block,
            "type": p.decl.ty.to_string(),
            "len": p.decl.len,
            "default": Value::from_scalar(p.decl.default).to_json(),
            "min": scalar(p.decl.min),
            "max": scalar(p.decl.max),
        })).collect::<Vec<_>>(),
    })
}

/// The (node id, block number) pairs a registry JSON names: the blocks each node has
/// wired, which a client needs to rebuild the registry from the schemas.
pub fn registry_blocks(j: &Json) -> Vec<(u8, u8)> {
    let mut out = Vec::new();
    for kind in ["topics", "services", "params"] {
        for e in j.get(kind).and_then(Json::as_array).into_iter().flatten() {
            let n = e.get("node").and_then(Json::as_u64);
            let b = e.get("block").and_then(Json::as_u64);
            if let (Some(n), Some(b)) = (n, b) {
                if let (Ok(n), Ok(b)) = (u8::try_from(n), u8::try_from(b)) {
                    out.push((n, b));
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The payload of an update query (`fcan/<bus>/update/<node>`): a `u32` little-endian
/// length, that many bytes of JSON options (`{"share": 0.25}`: the bus share), then the
/// image file ([`UpdateImage::to_file`]).
///
/// ```
/// use fcan_master::update::UpdateImage;
/// use fcan_remote::wire::{parse_update_payload, update_payload};
/// let image = UpdateImage::new(vec![1, 2, 3], [0; 32], "io_board{i}", "2.0.0");
/// let (back, share) = parse_update_payload(&update_payload(&image, 0.5)).unwrap();
/// assert_eq!((back.bytes(), share), (&[1u8, 2, 3][..], 0.5));
/// ```
pub fn update_payload(image: &UpdateImage, share: f64) -> Vec<u8> {
    let opts = serde_json::json!({ "share": share }).to_string();
    let mut out = (opts.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(opts.as_bytes());
    out.extend_from_slice(&image.to_file());
    out
}

/// What an update query asks: write an image at a bus share, or drop the node's transfer.
#[derive(Debug)]
#[non_exhaustive]
pub enum UpdateAsk {
    /// Write this image, DATA paced to this share of the bus.
    Start(Box<UpdateImage>, f64),
    /// Drop the node's transfer (ABORT) and end the update of it.
    Abort,
}

/// The payload of an abort on `fcan/<bus>/update/<node>`: the options
/// `{"abort": true}` and no image.
pub fn abort_payload() -> Vec<u8> {
    let opts = serde_json::json!({ "abort": true }).to_string();
    let mut out = (opts.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(opts.as_bytes());
    out
}

/// Reads [`update_payload`] or [`abort_payload`] back (untrusted input).
pub fn parse_update_ask(p: &[u8]) -> Result<UpdateAsk, ErrorReply> {
    let (len, rest) = p.split_first_chunk::<4>().ok_or_else(|| {
        ErrorReply::new(
            ErrorKind::BadValue,
            "an update needs the image as its payload",
        )
    })?;
    let len = u32::from_le_bytes(*len) as usize;
    let opts: Option<Json> = rest.get(..len).and_then(|o| serde_json::from_slice(o).ok());
    if opts
        .as_ref()
        .and_then(|o| o.get("abort"))
        .and_then(Json::as_bool)
        == Some(true)
    {
        if rest.len() != len {
            return Err(ErrorReply::new(
                ErrorKind::BadValue,
                "an abort carries no image",
            ));
        }
        return Ok(UpdateAsk::Abort);
    }
    let (image, share) = parse_update_payload(p)?;
    Ok(UpdateAsk::Start(Box::new(image), share))
}

/// Reads [`update_payload`] back (untrusted input): the image and the bus share, in
/// (0, 1].
pub fn parse_update_payload(p: &[u8]) -> Result<(UpdateImage, f64), ErrorReply> {
    let bad = |m: String| ErrorReply::new(ErrorKind::BadValue, m);
    let (len, rest) = p
        .split_first_chunk::<4>()
        .ok_or_else(|| bad("an update needs the image as its payload".into()))?;
    let len = u32::from_le_bytes(*len) as usize;
    if rest.len() < len {
        return Err(bad("the update's options are cut short".into()));
    }
    let (opts, file) = rest.split_at(len);
    let opts: Json = serde_json::from_slice(opts)
        .map_err(|e| bad(format!("the update's options are not JSON: {e}")))?;
    let share = opts.get("share").and_then(Json::as_f64).unwrap_or(0.25);
    if !(share > 0.0 && share <= 1.0) {
        return Err(bad(format!("bus share {share} is not in (0, 1]")));
    }
    let image = UpdateImage::from_file(file).map_err(bad)?;
    Ok((image, share))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_refused_for_the_backlog_is_busy() {
        let e = MasterError::Call(fcan_master::engine::CallError::Busy {
            node: fcan_core::id::NodeId::new(3).unwrap(),
            waiting_us: 21_000,
            limit_us: 20_000,
        });
        let r = ErrorReply::of(&e);
        assert_eq!(r.kind(), ErrorKind::Busy);
        assert_eq!(r.error, "busy");
        assert!(r.message.contains("node 3"), "{}", r.message);
    }

    #[test]
    fn error_reply_shape() {
        let e = ErrorReply::new(ErrorKind::Busy, "too many");
        let j: Json = serde_json::from_slice(&e.to_bytes()).unwrap();
        assert_eq!(j, json!({"error": "busy", "message": "too many"}));
        let m = e.into_error();
        assert!(
            matches!(
                &m,
                MasterError::Remote {
                    kind: ErrorKind::Busy,
                    ..
                }
            ),
            "{m}"
        );
        assert_eq!(ErrorReply::of(&m).error, "busy");
    }

    #[test]
    fn a_kind_from_a_newer_daemon_is_kept_not_lost() {
        let r: ErrorReply =
            serde_json::from_str(r#"{"error":"on_fire","message":"the bus is hot"}"#).unwrap();
        assert_eq!(r.kind(), ErrorKind::Unrecognized);
        let m = r.into_error();
        assert_eq!(m.kind(), ErrorKind::Unrecognized);
        assert!(m.to_string().contains("on_fire: the bus is hot"), "{m}");
    }

    #[test]
    fn batch_payloads() {
        let items = vec![
            ("/md1/motor0/target".to_string(), Value::Float(0.5)),
            ("/md1/motor1/target".to_string(), Value::Bool(true)),
        ];
        let j = batch_json(&items);
        assert_eq!(
            j,
            json!({"/md1/motor0/target": 0.5, "/md1/motor1/target": true})
        );
        assert_eq!(batch_from_json(j.to_string().as_bytes()).unwrap(), items);
        for (bad, why) in [
            ("not json", "not JSON"),
            ("[1, 2]", "JSON object"),
            ("5", "JSON object"),
            ("{}", "empty batch"),
        ] {
            let e = batch_from_json(bad.as_bytes()).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn blocks_of_a_registry_json() {
        let j = json!({"topics": [{"node": 1, "block": 2}, {"node": 1, "block": 2}],
                       "params": [{"node": 3, "block": 0}, {"node": 300, "block": 0}]});
        assert_eq!(registry_blocks(&j), vec![(1, 2), (3, 0)]);
    }
}
