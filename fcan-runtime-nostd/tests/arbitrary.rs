//! Property tests: arbitrary frame sequences never panic and never move a counter
//! backwards, in any state the scripted prefix leaves the node in.

mod common;
use common::*;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_core::msg::BusMode;
use proptest::prelude::*;

fn frame() -> impl Strategy<Value = Frame> {
    (
        any::<bool>(),
        any::<u32>(),
        prop::collection::vec(any::<u8>(), 0..=64),
    )
        .prop_map(|(ext, raw, data)| {
            let id = if ext {
                // Mostly configuration-plane identifiers for our node, some anything.
                if raw & 1 == 0 {
                    CanId::Extended(0x1000_0000 | (raw & 0x0F80_FFFF) | (NODE as u32) << 16)
                } else {
                    CanId::Extended(raw & 0x1FFF_FFFF)
                }
            } else {
                CanId::Standard(0x100 + (raw % 0x300) as u16)
            };
            if data.len() <= 8 {
                Frame::classic(id, &data).unwrap()
            } else {
                Frame::padded(Mtu::Fd, id, &data).unwrap()
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_frames_when_running(frames in prop::collection::vec((frame(), 0u32..50_000), 0..64)) {
        let mut rig = running_rig();
        let mut prev = rig.node.counters().to_array();
        for (f, dt) in frames {
            rig.now = rig.now.wrapping_add(dt);
            rig.node.receive(&f, rig.now);
            rig.node.poll(rig.now, &mut rig.bus, &mut rig.app);
            let c = rig.node.counters().to_array();
            prop_assert!(prev.iter().zip(c.iter()).all(|(a, b)| b >= a));
            prev = c;
        }
        rig.bus.sent.clear();
    }

    #[test]
    fn arbitrary_frames_from_boot(frames in prop::collection::vec((frame(), 0u32..200_000), 0..64), fd in any::<bool>()) {
        let mut rig = Rig::new(fd);
        if fd {
            rig.boot_and_ack(BusMode::FdBrs);
        }
        for (f, dt) in frames {
            rig.now = rig.now.wrapping_add(dt);
            rig.node.receive(&f, rig.now);
            rig.node.poll(rig.now, &mut rig.bus, &mut rig.app);
            if !fd {
                prop_assert!(rig.bus.sent.iter().all(|f| !f.is_fd()));
            }
        }
    }
}
