//! Property tests of the identifier layouts (`fcan_core::id`) and of frames
//! (`fcan_core::frame`).

use fcan_core::frame::{fd_dlc, fd_padded_len, CanId, Frame, FrameError, Mtu, FD_LENGTHS};
use fcan_core::id::*;
use proptest::prelude::*;
use proptest::sample::select;

fn opcode() -> impl Strategy<Value = Opcode> {
    select(Opcode::ALL.to_vec())
}

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::ToNode), Just(Direction::ToMaster)]
}

fn unicast() -> impl Strategy<Value = NodeId> {
    (0..=NodeId::MAX).prop_map(|n| NodeId::new(n).unwrap())
}

/// Every valid identifier: any opcode, direction, transfer, segment `0..128` and EOT;
/// any unicast node, or broadcast when the master sends.
fn config_id() -> impl Strategy<Value = ConfigId> {
    (
        opcode(),
        direction(),
        prop_oneof![4 => unicast(), 1 => Just(NodeId::BROADCAST)],
        any::<u8>(),
        0..MAX_SEGMENTS as u8,
        any::<bool>(),
    )
        .prop_map(|(opcode, dir, node, transfer, segment, eot)| {
            let dir = if node.is_broadcast() {
                Direction::ToNode
            } else {
                dir
            };
            ConfigId {
                opcode,
                dir,
                node,
                transfer,
                segment,
                eot,
            }
        })
}

proptest! {
    /// to_raw → from_raw is the identity for every valid field set, and the raw value
    /// is a 29-bit identifier with the configuration-plane marker.
    #[test]
    fn config_id_roundtrip(id in config_id()) {
        let raw = id.to_raw();
        prop_assert!(raw <= CanId::EXTENDED_MAX);
        prop_assert!(raw & (1 << 28) != 0);
        prop_assert_eq!(ConfigId::from_raw(raw), Ok(id));
        prop_assert_eq!(id.can_id(), CanId::Extended(raw));
        prop_assert_eq!(ConfigId::from_can_id(id.can_id()), Ok(id));
    }

    /// The fields land where the layout says.
    #[test]
    fn config_id_field_positions(id in config_id()) {
        let raw = id.to_raw();
        prop_assert_eq!((raw >> 24) & 0xF, id.opcode as u32);
        prop_assert_eq!((raw >> 23) & 1, id.dir as u32);
        prop_assert_eq!((raw >> 16) & 0x7F, id.node.get() as u32);
        prop_assert_eq!((raw >> 8) & 0xFF, id.transfer as u32);
        prop_assert_eq!((raw >> 7) & 1, id.eot as u32);
        prop_assert_eq!(raw & 0x7F, id.segment as u32);
    }

    /// `with_segment` changes the segment fields only.
    #[test]
    fn with_segment_changes_segment_fields_only(id in config_id(), seg in 0..MAX_SEGMENTS as u8, eot in any::<bool>()) {
        let s = id.with_segment(seg, eot);
        prop_assert_eq!(s.segment, seg);
        prop_assert_eq!(s.eot, eot);
        prop_assert_eq!(s.with_segment(id.segment, id.eot), id);
        prop_assert_eq!(ConfigId::from_raw(s.to_raw()), Ok(s));
    }

    /// A segment index wider than 7 bits is cut to its low 7 bits (it never spills into
    /// the EOT bit).
    #[test]
    fn wide_segment_is_masked(id in config_id(), seg in MAX_SEGMENTS as u8..=255) {
        let s = id.with_segment(seg, id.eot);
        let back = ConfigId::from_raw(s.to_raw()).unwrap();
        prop_assert_eq!(back.segment, seg & 0x7F);
        prop_assert_eq!(back.eot, id.eot);
    }

    /// A node never sends from the broadcast address.
    #[test]
    fn broadcast_source_is_refused(op in opcode(), transfer in any::<u8>(), seg in 0..MAX_SEGMENTS as u8, eot in any::<bool>()) {
        let id = ConfigId { opcode: op, dir: Direction::ToMaster, node: NodeId::BROADCAST, transfer, segment: seg, eot };
        prop_assert_eq!(ConfigId::from_raw(id.to_raw()), Err(IdError::BroadcastSource));
    }

    /// from_raw on any u32 never panics; it refuses everything outside 29 bits or without
    /// the marker, names a reserved opcode, and whatever it accepts re-encodes to the
    /// same raw value.
    #[test]
    fn from_raw_arbitrary(raw in any::<u32>()) {
        let got = ConfigId::from_raw(raw);
        if raw > CanId::EXTENDED_MAX || raw & (1 << 28) == 0 {
            prop_assert_eq!(got, Err(IdError::NotConfigPlane));
            return Ok(());
        }
        let op = ((raw >> 24) & 0xF) as u8;
        match got {
            Ok(id) => {
                prop_assert_eq!(id.to_raw(), raw);
                prop_assert_eq!(id.opcode as u8, op);
            }
            Err(IdError::UnknownOpcode(o)) => {
                prop_assert_eq!(o, op);
                prop_assert!(Opcode::from_u8(op).is_none());
            }
            Err(IdError::BroadcastSource) => {
                prop_assert!(raw & (1 << 23) != 0 && (raw >> 16) & 0x7F == 0x7F);
            }
            Err(IdError::NotConfigPlane) => prop_assert!(false, "marker set, 29 bits"),
        }
    }

    /// Standard identifiers are never configuration-plane.
    #[test]
    fn standard_ids_are_data_plane(raw in 0..=CanId::STANDARD_MAX) {
        prop_assert_eq!(ConfigId::from_can_id(CanId::Standard(raw)), Err(IdError::NotConfigPlane));
    }

    /// Every data-plane ID wins arbitration against every configuration-plane ID, and
    /// among configuration frames a lower opcode wins.
    #[test]
    fn data_ids_win_arbitration(d in DATA_ID_RANGE, a in config_id(), b in config_id()) {
        let data = CanId::Standard(d).arbitration_key();
        prop_assert!(data < a.can_id().arbitration_key());
        if (a.opcode as u8) < (b.opcode as u8) {
            prop_assert!(a.can_id().arbitration_key() < b.can_id().arbitration_key());
        }
    }

    /// The arbitration key orders extended IDs like their raw values, and standard IDs
    /// like theirs.
    #[test]
    fn arbitration_key_is_monotone(a in 0..=CanId::EXTENDED_MAX, b in 0..=CanId::EXTENDED_MAX, x in 0..=CanId::STANDARD_MAX, y in 0..=CanId::STANDARD_MAX) {
        let (ka, kb) = (CanId::Extended(a).arbitration_key(), CanId::Extended(b).arbitration_key());
        prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        let (kx, ky) = (CanId::Standard(x).arbitration_key(), CanId::Standard(y).arbitration_key());
        prop_assert_eq!(x.cmp(&y), kx.cmp(&ky));
        // A standard frame beats an extended one with the same top 11 bits.
        let ext = CanId::Extended(((x as u32) << 18) | (a & 0x3_FFFF));
        prop_assert!(CanId::Standard(x).arbitration_key() < ext.arbitration_key());
    }

    /// `CanId::standard`/`extended` accept exactly the in-range values.
    #[test]
    fn can_id_constructors(raw16 in any::<u16>(), raw32 in any::<u32>()) {
        prop_assert_eq!(CanId::standard(raw16).is_some(), raw16 <= CanId::STANDARD_MAX);
        prop_assert_eq!(CanId::extended(raw32).is_some(), raw32 <= CanId::EXTENDED_MAX);
        if let Some(id) = CanId::extended(raw32) {
            prop_assert_eq!(id.raw(), raw32);
        }
    }

    /// Node ids: `0..=0x7E` are unicast, `0x7F` is broadcast and not a node, the rest do
    /// not exist.
    #[test]
    fn node_ids(raw in any::<u8>()) {
        match NodeId::new(raw) {
            Some(n) => {
                prop_assert!(raw <= NodeId::MAX);
                prop_assert_eq!(n.get(), raw);
                prop_assert!(!n.is_broadcast());
            }
            None => prop_assert!(raw > NodeId::MAX),
        }
    }

    /// A padded frame carries the data, then zeros up to the link's legal length.
    #[test]
    fn padded_frames(data in prop::collection::vec(any::<u8>(), 0..=70), fd in any::<bool>(), id in config_id()) {
        let mtu = if fd { Mtu::Fd } else { Mtu::Classic };
        match Frame::padded(mtu, id.can_id(), &data) {
            Ok(f) => {
                prop_assert!(data.len() <= mtu.payload());
                prop_assert_eq!(Some(f.len()), mtu.wire_len(data.len()));
                prop_assert_eq!(&f.data()[..data.len()], &data[..]);
                prop_assert!(f.data()[data.len()..].iter().all(|&b| b == 0));
                prop_assert_eq!(f.is_fd(), fd);
                prop_assert_eq!(f.is_brs(), fd);
                prop_assert_eq!(f.mtu(), mtu);
                prop_assert_eq!(f.id(), id.can_id());
                if fd {
                    prop_assert!(fd_dlc(f.len()).is_some());
                }
            }
            Err(e) => {
                prop_assert_eq!(e, FrameError::BadLength);
                prop_assert!(data.len() > mtu.payload());
            }
        }
    }

    /// Classic frames take 0..=8 bytes; FD frames exactly the DLC lengths.
    #[test]
    fn frame_constructors(data in prop::collection::vec(any::<u8>(), 0..=70)) {
        let id = CanId::Standard(0x123);
        match Frame::classic(id, &data) {
            Ok(f) => {
                prop_assert!(data.len() <= 8);
                prop_assert_eq!(f.data(), &data[..]);
                prop_assert!(!f.is_fd() && !f.is_brs());
            }
            Err(_) => prop_assert!(data.len() > 8),
        }
        match Frame::fd(id, &data) {
            Ok(f) => {
                prop_assert!(FD_LENGTHS.contains(&(data.len() as u8)));
                prop_assert_eq!(f.data(), &data[..]);
                prop_assert!(f.is_fd() && f.is_brs());
                prop_assert!(!f.without_brs().is_brs());
                prop_assert!(f.without_brs() != f);
            }
            Err(_) => prop_assert!(!FD_LENGTHS.iter().any(|&l| l as usize == data.len())),
        }
    }
}

/// `fd_padded_len` is the smallest legal FD length that holds `len`, and `fd_dlc`
/// inverts the DLC table.
#[test]
fn fd_lengths() {
    for len in 0..=100usize {
        let want = FD_LENGTHS.iter().map(|&l| l as usize).find(|&l| l >= len);
        assert_eq!(fd_padded_len(len), want, "len {len}");
        let dlc = FD_LENGTHS.iter().position(|&l| l as usize == len);
        assert_eq!(fd_dlc(len), dlc.map(|d| d as u8), "len {len}");
    }
}

/// `Opcode::from_u8` accepts exactly the values of `Opcode::ALL`.
#[test]
fn opcodes() {
    for v in 0..=255u8 {
        let found = Opcode::ALL.iter().copied().find(|o| *o as u8 == v);
        assert_eq!(Opcode::from_u8(v), found, "{v}");
    }
    assert!(Opcode::ALL.windows(2).all(|w| w[0] < w[1]));
}

/// `is_data_id` is membership in `DATA_ID_RANGE`, whose IDs sit below every
/// configuration-plane identifier's top 11 bits.
#[test]
fn data_id_range() {
    for id in 0..=0x7FFu16 {
        assert_eq!(is_data_id(id), DATA_ID_RANGE.contains(&id));
    }
    let lowest_config = ConfigId {
        opcode: Opcode::ALL[0],
        dir: Direction::ToNode,
        node: NodeId::new(0).unwrap(),
        transfer: 0,
        segment: 0,
        eot: false,
    };
    assert!((DATA_ID_RANGE.end as u32) <= lowest_config.to_raw() >> 18);
}
