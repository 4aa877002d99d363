//! An MCAP recording that describes itself: what `fcan record` and `fcan decode --mcap`
//! write (`docs/recording.md`).
//!
//! * one channel per topic (`/<node>/<ns>/<topic>`), JSON messages with a JSON Schema
//!   made from the node's blob (`fcan_master::json_schema`), which Foxglove and
//!   Lichtblick plot; 64-bit integers beyond 2^53 as decimal strings, losslessly;
//! * the raw frames on their own channel [`FRAMES_TOPIC`];
//! * every node's schema blob as an attachment (`schema/<sha256>.fcanblob`), its node
//!   info and frame plan as metadata records (`fcan.node.<id>`, `fcan.plan.<id>`), and
//!   what made the file as `fcan.recording`;
//!
//! so a reader needs nothing else to decode or re-decode the file.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Seek, Write};
use std::sync::Arc;

use fcan_core::frame::{CanId, Frame};
use fcan_core::hash::SchemaDigest;
use fcan_master::json_schema::{message_schema_text, ViewerJson};
use fcan_master::planner::Plan;
use fcan_master::registry::TopicInfo;
use fcan_master::value::Value;
use serde_json::json;

/// The channel of the raw frames.
pub const FRAMES_TOPIC: &str = "/fcan/frames";

/// Media type of a schema blob attachment.
pub const BLOB_MEDIA_TYPE: &str = "application/x-fcan-schema-blob";

/// An MCAP file being written.
pub struct Recording<W: Write + Seek> {
    w: mcap::Writer<W>,
    channels: HashMap<Arc<str>, (u16, u32)>,
    frames: Option<(u16, u32)>,
    blobs: HashSet<SchemaDigest>,
    messages: u64,
}

/// What went wrong writing a recording.
pub type Error = mcap::McapError;

impl<W: Write + Seek> Recording<W> {
    /// Starts a file on `out`; `source` says what is recorded (`bus sim`, `capture
    /// can.log`), kept in the `fcan.recording` metadata.
    pub fn create(out: W, source: &str) -> Result<Self, Error> {
        // Chunked (so readers can index it) and uncompressed (no codec needed to read).
        let opts = mcap::WriteOptions::new()
            .compression(None)
            .profile("")
            .library(concat!("fcan ", env!("CARGO_PKG_VERSION")));
        let mut w = mcap::Writer::with_options(out, opts)?;
        w.write_metadata(&mcap::records::Metadata {
            name: "fcan.recording".into(),
            metadata: BTreeMap::from([
                ("source".into(), source.to_string()),
                ("fcan_version".into(), env!("CARGO_PKG_VERSION").into()),
                ("frames_topic".into(), FRAMES_TOPIC.into()),
            ]),
        })?;
        Ok(Recording {
            w,
            channels: HashMap::new(),
            frames: None,
            blobs: HashSet::new(),
            messages: 0,
        })
    }

    /// Messages written so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Adds the channel of a topic (once; later calls do nothing).
    pub fn add_topic(&mut self, t: &TopicInfo) -> Result<(), Error> {
        if self.channels.contains_key(t.name.as_str()) {
            return Ok(());
        }
        // Named as the Foxglove server names it (one name per topic path, not its ROS
        // type: see `fcan_foxglove::mapping::schema_name`), so a recording and a live
        // view share their schemas.
        let schema_name = fcan_foxglove::mapping::schema_name(&t.name);
        let schema = message_schema_text(&schema_name, &t.fields);
        let sid = self
            .w
            .add_schema(&schema_name, "jsonschema", schema.as_bytes())?;
        let mut meta = BTreeMap::from([
            ("fcan.node".into(), t.node.get().to_string()),
            (
                "fcan.dir".into(),
                fcan_master::json::direction_name(t.dir).into(),
            ),
            ("fcan.period_us".into(), t.period_us.to_string()),
        ]);
        if let Some(ros) = &t.ros_type {
            meta.insert("fcan.ros_type".into(), ros.clone());
        }
        let cid = self.w.add_channel(sid, &t.name, "json", &meta)?;
        self.channels.insert(Arc::from(t.name.as_str()), (cid, 0));
        Ok(())
    }

    /// Writes a value of a topic whose channel was added; `false` (nothing written) for
    /// a topic without one. Times in nanoseconds.
    pub fn sample(&mut self, topic: &str, value: &Value, at_ns: u64) -> Result<bool, Error> {
        let Some((cid, seq)) = self.channels.get_mut(topic) else {
            return Ok(false);
        };
        *seq = seq.wrapping_add(1);
        let header = mcap::records::MessageHeader {
            channel_id: *cid,
            sequence: *seq,
            log_time: at_ns,
            publish_time: at_ns,
        };
        let data = serde_json::to_vec(&ViewerJson(value)).map_err(std::io::Error::from)?;
        self.w.write_to_known_channel(&header, &data)?;
        self.messages += 1;
        Ok(true)
    }

    /// Writes a raw frame to [`FRAMES_TOPIC`].
    pub fn frame(&mut self, frame: &Frame, at_ns: u64) -> Result<(), Error> {
        let (cid, seq) = match &mut self.frames {
            Some(c) => c,
            None => {
                let schema = json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "title": "fcan.Frame",
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer", "minimum": 0, "maximum": 0x1FFF_FFFF},
                        "extended": {"type": "boolean"},
                        "fd": {"type": "boolean"},
                        "brs": {"type": "boolean"},
                        "data": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 255}, "maxItems": 64},
                    },
                    "required": ["id", "extended", "fd", "brs", "data"],
                });
                let sid =
                    self.w
                        .add_schema("fcan.Frame", "jsonschema", schema.to_string().as_bytes())?;
                let cid = self
                    .w
                    .add_channel(sid, FRAMES_TOPIC, "json", &BTreeMap::new())?;
                self.frames.insert((cid, 0))
            }
        };
        *seq = seq.wrapping_add(1);
        let (id, extended) = match frame.id() {
            CanId::Standard(i) => (i as u32, false),
            CanId::Extended(i) => (i, true),
        };
        let data = json!({
            "id": id, "extended": extended, "fd": frame.is_fd(), "brs": frame.is_brs(),
            "data": frame.data(),
        });
        let header = mcap::records::MessageHeader {
            channel_id: *cid,
            sequence: *seq,
            log_time: at_ns,
            publish_time: at_ns,
        };
        self.w
            .write_to_known_channel(&header, data.to_string().as_bytes())?;
        self.messages += 1;
        Ok(())
    }

    /// Stores a node's blob (once per digest) as an attachment.
    pub fn blob(&mut self, digest: SchemaDigest, blob: &[u8], at_ns: u64) -> Result<(), Error> {
        if !self.blobs.insert(digest) {
            return Ok(());
        }
        self.w.attach(&mcap::Attachment {
            log_time: at_ns,
            create_time: at_ns,
            name: format!("schema/{digest}.fcanblob"),
            media_type: BLOB_MEDIA_TYPE.into(),
            data: std::borrow::Cow::Borrowed(blob),
        })
    }

    /// A node's info (`fcan.node.<id>`) and plan (`fcan.plan.<id>`) as metadata.
    pub fn node(
        &mut self,
        node: u8,
        info: BTreeMap<String, String>,
        plan: Option<&Plan>,
    ) -> Result<(), Error> {
        self.w.write_metadata(&mcap::records::Metadata {
            name: format!("fcan.node.{node}"),
            metadata: info,
        })?;
        if let Some(plan) = plan {
            self.w.write_metadata(&mcap::records::Metadata {
                name: format!("fcan.plan.{node}"),
                metadata: BTreeMap::from([("json".to_string(), plan.to_json().to_string())]),
            })?;
        }
        Ok(())
    }

    /// Finishes the file (summary, index, footer) and returns the output.
    pub fn finish(mut self) -> Result<W, Error> {
        self.w.finish()?;
        Ok(self.w.into_inner())
    }
}
