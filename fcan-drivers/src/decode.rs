//! Devices' frames decoded offline (`fcan decode --device`): the drivers' own decoding, as
//! the bus owner runs it live, with no master and no node — each claimed frame becomes
//! the topic values the device's node would publish.
//!
//! A topic value comes out as the fcan topic's name and its packed bytes with the
//! schema's fields, for the caller to unpack (the CLI does it with the master's value
//! rules, as it does for boards' data).

use fcan_core::frame::Frame;
use fcan_core::ir::Field;

use crate::device::{Device, Io};

/// One topic value a device's frame carried.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedSample {
    /// `/<node>/<ns>/<topic>`.
    pub topic: String,
    /// The topic's fields (to unpack `bytes`).
    pub fields: Vec<Field>,
    /// The value, packed.
    pub bytes: Vec<u8>,
}

struct Named {
    dev: Box<dyn Device>,
    /// Per topic of the device's node: its name and fields.
    topics: Vec<(String, Vec<Field>)>,
}

/// The devices of a capture. See the [module docs](self).
pub struct Decoder {
    devices: Vec<Named>,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("devices", &self.devices.len())
            .finish()
    }
}

impl Decoder {
    /// A decoder for `devices` (each with the topics of the schema it ships).
    pub fn new(devices: Vec<Box<dyn Device>>) -> Decoder {
        let devices = devices
            .into_iter()
            .map(|dev| {
                let topics = fcan_core::blob::decode(dev.blob())
                    .ok()
                    .and_then(|s| {
                        let array = s.instances.first()?.clone();
                        let ty = s.types.iter().find(|t| t.name == array.ty)?.clone();
                        let node = s.node.replace("{i}", &dev.node_id().get().to_string());
                        let ns = array.ns.replace("{i}", "0");
                        Some(
                            ty.topics
                                .iter()
                                .map(|t| {
                                    (
                                        fcan_core::numbering::topic_path(&node, &ns, &t.name),
                                        t.fields.clone(),
                                    )
                                })
                                .collect(),
                        )
                    })
                    .unwrap_or_default();
                Named { dev, topics }
            })
            .collect();
        Decoder { devices }
    }

    /// A frame of the capture at `at_us`: `None` when it is no device's (an fcan frame, or
    /// foreign traffic), else the values it carried (possibly none: a request to the
    /// device, a reply that carries no topic value).
    pub fn push(&mut self, at_us: u64, frame: &Frame) -> Option<Vec<DecodedSample>> {
        let Some(d) = self.devices.iter_mut().find(|d| d.dev.claims(frame)) else {
            // A request to a device (the bus owner's, or another tool's): its traffic,
            // carrying no value of its node.
            return self
                .devices
                .iter()
                .any(|d| d.dev.owns(frame))
                .then(Vec::new);
        };
        let mut io = Io::default();
        d.dev.on_frame(at_us, frame, &mut io);
        Some(
            io.published()
                .iter()
                .filter_map(|(t, bytes)| {
                    let (topic, fields) = d.topics.get(*t as usize)?;
                    Some(DecodedSample {
                        topic: topic.clone(),
                        fields: fields.clone(),
                        bytes: bytes.clone(),
                    })
                })
                .collect(),
        )
    }
}
