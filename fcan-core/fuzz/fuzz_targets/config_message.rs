//! Configuration-plane input as a node or the master receives it: a 29-bit identifier
//! and a reassembled payload.
//!
//! Input: 4 bytes of raw identifier (little-endian), then the payload. The payload is
//! decoded under the identifier's own opcode and direction (when the identifier is
//! valid) and under the opcode/direction its bits select even when it is not, so both
//! the identifier parser and every message decoder see every input.
//!
//! Checks: nothing panics; a valid identifier re-encodes to its raw value; a decoded
//! message belongs to the opcode and direction asked for, re-encodes, and decodes from
//! its re-encoding to itself.

#![no_main]

use fcan_core::frame::CanId;
use fcan_core::id::{ConfigId, Direction, Opcode};
use fcan_core::msg::{ConfigMessage, Counters, Entries};
use libfuzzer_sys::fuzz_target;

fn check(op: Opcode, dir: Direction, payload: &[u8]) {
    let Ok(m) = ConfigMessage::decode(op, dir, payload) else {
        return;
    };
    assert_eq!(m.opcode(), op);
    assert_eq!(m.direction(), dir);
    if let ConfigMessage::FrameDefine(fd) = &m {
        assert!(matches!(fd.entries, Entries::Wire(_)));
        assert_eq!(fd.entries.iter().count(), fd.entries.len());
    }
    // Re-encoding is never longer than the input, except STATS, whose count byte we
    // rewrite (a short STATS decodes with zeros and re-encodes in full).
    let mut buf = vec![0u8; payload.len().max(Counters::LEN)];
    let n = m.encode(&mut buf).expect("a decoded message re-encodes");
    assert!(n <= payload.len() || matches!(m, ConfigMessage::Stats(_)));
    let again = ConfigMessage::decode(op, dir, &buf[..n]).expect("re-encoding decodes");
    assert_eq!(again, m);
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let raw = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let payload = &data[4..];

    match ConfigId::from_raw(raw) {
        Ok(id) => {
            assert_eq!(id.to_raw(), raw);
            assert_eq!(ConfigId::from_can_id(CanId::Extended(raw)), Ok(id));
            check(id.opcode, id.dir, payload);
        }
        Err(_) => {
            // Still exercise the decoders with the opcode/direction the bits select.
            let op = Opcode::ALL[((raw >> 24) & 0xF) as usize % Opcode::ALL.len()];
            let dir = if raw & (1 << 23) != 0 {
                Direction::ToMaster
            } else {
                Direction::ToNode
            };
            check(op, dir, payload);
        }
    }
});
