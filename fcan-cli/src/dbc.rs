//! The frame plan as a DBC file (`fcan plan --dbc`), so cantools, SavvyCAN or a Vector
//! tool decode fcan's data frames.
//!
//! Every ordinary data frame of every planned node becomes a message: its identifier,
//! its length on the wire (FD frames padded as the link pads them, marked with the
//! `VFrameFormat` attribute), the node (s2m) or the master (m2s) as its sender, and one
//! signal per field (array elements one each) that the frame carries whole: little-endian
//! integers, IEEE floats as float signals (`SIG_VALTYPE_`), booleans as one byte. Named
//! `<topic path>_<field>` with `/` as `_`.
//!
//! What DBC cannot say, the file's comment and `docs/recording.md` say instead:
//! * the frames of a split (sequenced) group carry a publication number and a piece of
//!   the value; a DBC decoder cannot reassemble them, so they are listed, not described;
//! * a field cut by a frame boundary belongs to no one frame: listed, not described;
//! * a shared frame's first byte is a presence mask (`presence_mask`): a topic's signals
//!   hold a fresh value only when its bit is set;
//! * the plan is the master's choice and changes when it re-provisions (a node reboots,
//!   another joins): this file describes the plan at the time it was written.

use std::fmt::Write as _;

use fcan_core::frame::Mtu;
use fcan_core::msg::DataDirection;
use fcan_core::numbering::layout;
use fcan_core::types::ScalarType;
use fcan_master::planner::Plan;
use fcan_master::registry::Registry;

/// The master's name as a DBC node.
pub const MASTER: &str = "fcan_master";

/// One planned node.
pub struct PlannedNode<'a> {
    /// Its id.
    pub id: fcan_core::id::NodeId,
    /// Its name (`motor_driver1`).
    pub name: &'a str,
    /// The frame kind of its link.
    pub mtu: Mtu,
    /// Its plan.
    pub plan: &'a Plan,
}

struct Signal {
    name: String,
    start_bit: usize,
    bits: usize,
    signed: bool,
    float: Option<u8>,
    min: f64,
    max: f64,
}

fn ident(s: &str) -> String {
    let mut out: String = s
        .trim_start_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn scalar(ty: ScalarType) -> (bool, Option<u8>, f64, f64) {
    use ScalarType::*;
    match ty {
        Bool => (false, None, 0.0, 1.0),
        U8 => (false, None, 0.0, u8::MAX as f64),
        I8 => (true, None, i8::MIN as f64, i8::MAX as f64),
        U16 => (false, None, 0.0, u16::MAX as f64),
        I16 => (true, None, i16::MIN as f64, i16::MAX as f64),
        U32 => (false, None, 0.0, u32::MAX as f64),
        I32 => (true, None, i32::MIN as f64, i32::MAX as f64),
        U64 => (false, None, 0.0, u64::MAX as f64),
        I64 => (true, None, i64::MIN as f64, i64::MAX as f64),
        // Float signals carry no meaningful range in DBC; 0|0 means "none".
        F32 => (true, Some(1), 0.0, 0.0),
        F64 => (true, Some(2), 0.0, 0.0),
    }
}

/// The DBC text of the plans of `nodes`, with their topics from `registry`.
pub fn write(nodes: &[PlannedNode], registry: &Registry) -> String {
    let mut msgs = String::new();
    let mut valtypes = String::new();
    let mut attrs = String::new();
    let mut comments = String::new();
    let mut not_described: Vec<String> = Vec::new();
    for n in nodes {
        for f in &n.plan.frames {
            let h = &f.header;
            let topics: Vec<_> = f
                .entries
                .iter()
                .filter_map(|e| {
                    registry
                        .topics
                        .iter()
                        .find(|t| t.node == n.id && t.block == e.block && t.topic == e.topic)
                })
                .collect();
            if h.group_parts > 1 {
                let what = topics.first().map_or("?", |t| t.name.as_str());
                not_described.push(format!(
                    "0x{:03X} part {} of {} of {what} (a split group)",
                    h.std_id,
                    h.group_index + 1,
                    h.group_parts
                ));
                continue;
            }
            let wire_len = n.mtu.wire_len(h.len as usize).unwrap_or(h.len as usize);
            let sender = match h.dir {
                DataDirection::S2m => ident(n.name),
                DataDirection::M2s => MASTER.to_string(),
            };
            let receiver = match h.dir {
                DataDirection::S2m => MASTER.to_string(),
                DataDirection::M2s => ident(n.name),
            };
            let msg_name = match topics.as_slice() {
                [t] => ident(&t.name),
                _ => format!("{}_frame{}", ident(n.name), h.index),
            };
            let mut signals = Vec::new();
            if h.masked {
                signals.push(Signal {
                    name: "presence_mask".into(),
                    start_bit: 0,
                    bits: 8,
                    signed: false,
                    float: None,
                    min: 0.0,
                    max: 255.0,
                });
            }
            for (e, t) in f.entries.iter().zip(&topics) {
                let lay = layout(&t.fields);
                let (src, len, dst) =
                    (e.src_offset as usize, e.len as usize, e.dst_offset as usize);
                for (field, fl) in t.fields.iter().zip(&lay.fields) {
                    let elem = field.ty.size();
                    for k in 0..field.count() {
                        let at = fl.offset + k * elem;
                        let name = match field.len {
                            None => format!("{}_{}", ident(&t.name), field.name),
                            Some(_) => format!("{}_{}_{k}", ident(&t.name), field.name),
                        };
                        if at + elem <= src || at >= src + len {
                            continue; // in another frame
                        }
                        if at < src || at + elem > src + len {
                            not_described.push(format!(
                                "{name} (cut by a frame boundary in 0x{:03X})",
                                h.std_id
                            ));
                            continue;
                        }
                        let (signed, float, min, max) = scalar(field.ty);
                        signals.push(Signal {
                            name,
                            start_bit: (dst + at - src) * 8,
                            bits: elem * 8,
                            signed,
                            float,
                            min,
                            max,
                        });
                    }
                }
            }
            let _ = writeln!(msgs, "BO_ {} {msg_name}: {wire_len} {sender}", h.std_id);
            for s in &signals {
                let _ = writeln!(
                    msgs,
                    " SG_ {} : {}|{}@1{} (1,0) [{}|{}] \"\" {receiver}",
                    s.name,
                    s.start_bit,
                    s.bits,
                    if s.signed { '-' } else { '+' },
                    s.min,
                    s.max
                );
                if let Some(v) = s.float {
                    let _ = writeln!(valtypes, "SIG_VALTYPE_ {} {} : {v};", h.std_id, s.name);
                }
            }
            msgs.push('\n');
            let format = if n.mtu == Mtu::Fd { 14 } else { 0 };
            let _ = writeln!(attrs, "BA_ \"VFrameFormat\" BO_ {} {format};", h.std_id);
            let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
            let mut c = format!(
                "{} frame {} of {}: {}",
                fcan_master::json::direction_name(h.dir),
                h.index,
                n.name,
                names.join(", ")
            );
            if h.masked {
                c.push_str("; byte 0 is a presence mask: a topic's signals are fresh only when its bit is set");
            }
            if h.period_us > 0 {
                let _ = write!(c, "; every {} us", h.period_us);
            }
            let _ = writeln!(comments, "CM_ BO_ {} \"{c}\";", h.std_id);
        }
    }
    let mut out = String::new();
    out.push_str("VERSION \"\"\n\nNS_ :\n\tBA_\n\tBA_DEF_\n\tCM_\n\tSIG_VALTYPE_\n\nBS_:\n\n");
    let mut bu: Vec<String> = vec![MASTER.to_string()];
    bu.extend(nodes.iter().map(|n| ident(n.name)));
    let _ = writeln!(out, "BU_: {}\n", bu.join(" "));
    out.push_str(&msgs);
    let mut note = String::from(
        "fcan frame plan, written by fcan plan --dbc. The master chooses the plan and \
         changes it when it re-provisions (a node reboots or joins): this file describes \
         the plan at the time it was written. Shared frames start with a presence mask: a \
         topic's signals hold a fresh value only when its bit is set.",
    );
    if !not_described.is_empty() {
        note.push_str(" Not described (DBC cannot say it): ");
        note.push_str(&not_described.join("; "));
        note.push('.');
    }
    let _ = writeln!(out, "CM_ \"{}\";", note.replace('"', "'"));
    out.push_str(&comments);
    out.push_str(
        "BA_DEF_ BO_ \"VFrameFormat\" ENUM \"StandardCAN\",\"ExtendedCAN\",\"reserved\",\"J1939PG\",\
         \"reserved\",\"reserved\",\"reserved\",\"reserved\",\"reserved\",\"reserved\",\"reserved\",\
         \"reserved\",\"reserved\",\"reserved\",\"StandardCAN_FD\",\"ExtendedCAN_FD\";\n",
    );
    out.push_str("BA_DEF_DEF_ \"VFrameFormat\" \"StandardCAN\";\n");
    out.push_str(&attrs);
    out.push_str(&valtypes);
    out
}
