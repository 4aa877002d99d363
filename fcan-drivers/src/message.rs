//! A device's fcan messages by name: where each field of a topic, request or response
//! sits, from the schema the driver ships, laid out by fcan-core's rules.
//!
//! A driver never writes "position is at byte 0": it asks for the field by name once, at
//! start-up, and packs values with [`Scalar::write`] at the offset fcan-core computed
//! ([`fcan_core::numbering::layout`]) — the same offsets the master decodes with.

use fcan_core::ir::{BlockType, Field};
use fcan_core::numbering::{layout, MessageLayout};
use fcan_core::types::{Scalar, ScalarType};

/// Why a driver's schema does not have what its code expects: a bug in the driver (the
/// schema and the code ship together), reported once at start-up, never at run time.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the driver's schema has no {what} `{name}`")]
pub struct Missing {
    /// "topic", "service", "field", "param".
    pub what: &'static str,
    /// The name looked for.
    pub name: String,
}

/// One packed message (a topic, a request or a response): its size and its fields.
#[derive(Clone, Debug)]
pub struct Message {
    fields: Vec<Field>,
    layout: MessageLayout,
}

/// One field of a [`Message`], found by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    offset: usize,
    ty: ScalarType,
}

impl Message {
    /// The message with these fields.
    pub fn new(fields: &[Field]) -> Message {
        Message {
            fields: fields.to_vec(),
            layout: layout(fields),
        }
    }

    /// Topic `name` of block type `ty`: its index and message.
    pub fn topic(ty: &BlockType, name: &str) -> Result<(u8, Message), Missing> {
        let i = ty
            .topics
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| Missing {
                what: "topic",
                name: name.into(),
            })?;
        Ok((i as u8, Message::new(&ty.topics[i].fields)))
    }

    /// The index of service `name` of block type `ty`.
    pub fn service(ty: &BlockType, name: &str) -> Result<u8, Missing> {
        ty.services
            .iter()
            .position(|s| s.name == name)
            .map(|i| i as u8)
            .ok_or_else(|| Missing {
                what: "service",
                name: name.into(),
            })
    }

    /// The index of parameter `name` of block type `ty`.
    pub fn param(ty: &BlockType, name: &str) -> Result<u8, Missing> {
        ty.params
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as u8)
            .ok_or_else(|| Missing {
                what: "param",
                name: name.into(),
            })
    }

    /// Packed size in bytes.
    pub fn size(&self) -> usize {
        self.layout.size
    }

    /// A zeroed buffer of the message's size.
    pub fn zeroed(&self) -> Vec<u8> {
        vec![0; self.layout.size]
    }

    /// The scalar field `name`.
    pub fn slot(&self, name: &str) -> Result<Slot, Missing> {
        self.fields
            .iter()
            .zip(&self.layout.fields)
            .find(|(f, _)| f.name == name && f.len.is_none())
            .map(|(f, l)| Slot {
                offset: l.offset,
                ty: f.ty,
            })
            .ok_or_else(|| Missing {
                what: "field",
                name: name.into(),
            })
    }
}

impl Slot {
    /// Writes `v` (converted to the field's type; saturating, NaN kept for floats) into
    /// `buf`. A buffer too short for the message is left alone.
    pub fn set(&self, buf: &mut [u8], v: f64) {
        let s = match self.ty {
            ScalarType::Bool => Scalar::Bool(v != 0.0),
            ScalarType::F32 => Scalar::F32(v as f32),
            ScalarType::F64 => Scalar::F64(v),
            // Integers: `as` saturates and maps NaN to 0, which is what a driver wants
            // for a counter or a code.
            ScalarType::U8 => Scalar::U8(v as u8),
            ScalarType::I8 => Scalar::I8(v as i8),
            ScalarType::U16 => Scalar::U16(v as u16),
            ScalarType::I16 => Scalar::I16(v as i16),
            ScalarType::U32 => Scalar::U32(v as u32),
            ScalarType::I32 => Scalar::I32(v as i32),
            ScalarType::U64 => Scalar::U64(v as u64),
            ScalarType::I64 => Scalar::I64(v as i64),
        };
        if let Some(out) = buf.get_mut(self.offset..) {
            let _ = s.write(out);
        }
    }

    /// The field's value in `buf` as `f64` (NaN if `buf` is too short).
    pub fn get(&self, buf: &[u8]) -> f64 {
        buf.get(self.offset..)
            .and_then(|b| Scalar::read(self.ty, b).ok())
            .map_or(f64::NAN, |s| s.as_f64())
    }
}

/// The five fields of an MIT command — `position`, `velocity`, `kp`, `kd`, `torque` — as
/// every driver's `mit` topic carries them (RobStride's operation control, the generic
/// MIT frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MitSlots([Slot; 5]);

impl MitSlots {
    /// The fields of `m`, a `mit` topic.
    pub fn of(m: &Message) -> Result<MitSlots, Missing> {
        Ok(MitSlots([
            m.slot("position")?,
            m.slot("velocity")?,
            m.slot("kp")?,
            m.slot("kd")?,
            m.slot("torque")?,
        ]))
    }

    /// The command in `bytes` as `[position, velocity, kp, kd, torque]`, or `None` when
    /// a value is NaN or infinite: such a command must never be quantized into a frame
    /// (a NaN would become whatever the vendor's float-to-integer mapping makes of it).
    pub fn read(&self, bytes: &[u8]) -> Option<[f32; 5]> {
        let v = self.0.map(|s| s.get(bytes) as f32);
        v.iter().all(|x| x.is_finite()).then_some(v)
    }
}

/// Counts a refused command and says so once (`refused` is the driver's counter): a
/// stream of bad commands must not flood the log.
pub fn refuse_once(refused: &mut u64, device: &str, what: &str, io: &mut crate::device::Io) {
    *refused += 1;
    if *refused == 1 {
        io.warn(format!(
            "{device}: {what} was not sent (said once; every refusal is counted)"
        ));
    }
}
