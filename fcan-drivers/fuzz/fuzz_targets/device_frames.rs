//! What devices (or anything on the bus) send the device host: arbitrary frames from the
//! bus and from the master, at arbitrary times, into a host with every registered
//! driver's example devices (`fcan_drivers::registry::DRIVERS`: a RobStride motor and MIT
//! motors — Classical, and Damiao on CAN FD with and without BRS; the Damiao ones arm
//! their command watchdog, so register answers are awaited and taken). Nothing may panic,
//! and the host's queues stay bounded whatever comes. A driver registered in the table is
//! fuzzed here with no edit to this file.
//!
//! Input: records of `kind u8, id u32 LE, len u8, data[len], dt u16 LE` (µs to advance).
//! kind bit 0: from the bus (else from the master); bit 1: extended id; bit 2: FD.
//! Each driver's codecs also decode every frame directly (`Driver::decode_any`).
#![no_main]

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_drivers::registry::DRIVERS;
use fcan_drivers::spec::{devices, DeviceSpec};
use fcan_drivers::DeviceHost;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let specs: Vec<DeviceSpec> = DRIVERS
        .iter()
        .flat_map(|d| d.examples)
        .map(|e| DeviceSpec::parse(e).unwrap())
        .collect();
    let mut host = DeviceHost::new(Mtu::Fd, devices(&specs).unwrap()).unwrap();
    let mut now: u64 = 0;
    let mut rest = data;
    while rest.len() >= 6 {
        let kind = rest[0];
        let raw = u32::from_le_bytes([rest[1], rest[2], rest[3], rest[4]]);
        let len = (rest[5] as usize).min(64);
        rest = &rest[6..];
        let take = len.min(rest.len());
        let payload = &rest[..take];
        rest = &rest[take..];
        let dt = match rest {
            [a, b, tail @ ..] => {
                rest = tail;
                u64::from(u16::from_le_bytes([*a, *b]))
            }
            _ => 0,
        };
        now += dt * 16;
        let id = if kind & 2 != 0 {
            CanId::Extended(raw & CanId::EXTENDED_MAX)
        } else {
            CanId::Standard((raw & u32::from(CanId::STANDARD_MAX)) as u16)
        };
        let frame = if kind & 4 != 0 {
            Frame::padded(Mtu::Fd, id, payload)
        } else {
            Frame::classic(id, &payload[..payload.len().min(8)])
        };
        let Ok(frame) = frame else { continue };
        for d in DRIVERS {
            (d.decode_any)(&frame);
        }
        if kind & 1 != 0 {
            host.from_bus(now, &frame);
        } else {
            host.from_master(now, &frame);
        }
        if host.poll_at(now).is_some_and(|t| t <= now) {
            host.poll(now);
        }
        // Drain like the link does, but only sometimes: full queues must stay bounded.
        if kind & 8 != 0 {
            while host.pop_to_master().is_some() {}
            while host.peek_to_bus().is_some() {
                host.sent_to_bus();
            }
        }
        let _ = host.take_notes();
        let (to_bus, to_master) = host.queued();
        assert!(
            to_bus <= fcan_drivers::host::QUEUE_LIMIT
                && to_master <= fcan_drivers::host::QUEUE_LIMIT
        );
    }
    host.poll(now + 2_000_000);
});
