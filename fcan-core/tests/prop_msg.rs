//! Property tests of the configuration-plane message codecs (`fcan_core::msg`):
//! encode → decode is the identity for every message, padding is ignored where the
//! layout says so, truncation is always detected, and no byte string makes a decoder
//! panic.

use fcan_core::hash::HashPrefix;
use fcan_core::id::{Direction, Opcode};
use fcan_core::msg::*;
use proptest::prelude::*;
use proptest::sample::select;

// ---------------------------------------------------------------------------------------
// Owned mirrors of the messages, so strategies can generate the borrowed parts.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Owned {
    MasterHeartbeat(MasterHeartbeat),
    NodeHeartbeat(NodeHeartbeat),
    Start(Start),
    ServiceRequest {
        block: u8,
        service: u8,
        body: Vec<u8>,
    },
    ServiceResponse {
        block: u8,
        service: u8,
        status: ServiceStatus,
        body: Vec<u8>,
    },
    ParamSet {
        block: u8,
        param: u8,
        commit: bool,
        value: Vec<u8>,
    },
    ParamGet(ParamGet),
    ParamValue {
        block: u8,
        param: u8,
        value: Vec<u8>,
    },
    Result(CommandResult),
    FrameDefine {
        header: FrameHeader,
        entries: Vec<CopyEntry>,
    },
    AnnounceAck(AnnounceAck),
    Discover(Discover),
    Announce {
        protocol: u8,
        state: NodeState,
        caps: u8,
        boot_id: u32,
        blob_len: u32,
        hash: [u8; 8],
        counts: Vec<u8>,
    },
    StatsRead,
    Stats(Counters),
    SchemaRead(SchemaRead),
    SchemaData {
        offset: u32,
        data: Vec<u8>,
    },
}

impl Owned {
    fn msg(&self) -> ConfigMessage<'_> {
        match self {
            Owned::MasterHeartbeat(m) => ConfigMessage::MasterHeartbeat(*m),
            Owned::NodeHeartbeat(m) => ConfigMessage::NodeHeartbeat(*m),
            Owned::Start(m) => ConfigMessage::Start(*m),
            Owned::ServiceRequest {
                block,
                service,
                body,
            } => ConfigMessage::ServiceRequest(ServiceRequest {
                block: *block,
                service: *service,
                body,
            }),
            Owned::ServiceResponse {
                block,
                service,
                status,
                body,
            } => ConfigMessage::ServiceResponse(ServiceResponse {
                block: *block,
                service: *service,
                status: *status,
                body,
            }),
            Owned::ParamSet {
                block,
                param,
                commit,
                value,
            } => ConfigMessage::ParamSet(ParamSet {
                block: *block,
                param: *param,
                commit: *commit,
                value,
            }),
            Owned::ParamGet(m) => ConfigMessage::ParamGet(*m),
            Owned::ParamValue {
                block,
                param,
                value,
            } => ConfigMessage::ParamValue(ParamValue {
                block: *block,
                param: *param,
                value,
            }),
            Owned::Result(m) => ConfigMessage::Result(*m),
            Owned::FrameDefine { header, entries } => ConfigMessage::FrameDefine(FrameDefine {
                header: *header,
                entries: Entries::List(entries),
            }),
            Owned::AnnounceAck(m) => ConfigMessage::AnnounceAck(*m),
            Owned::Discover(m) => ConfigMessage::Discover(*m),
            Owned::Announce {
                protocol,
                state,
                caps,
                boot_id,
                blob_len,
                hash,
                counts,
            } => ConfigMessage::Announce(Announce {
                protocol: *protocol,
                state: *state,
                caps: *caps,
                boot_id: *boot_id,
                blob_len: *blob_len,
                hash: HashPrefix(*hash),
                counts,
            }),
            Owned::StatsRead => ConfigMessage::StatsRead,
            Owned::Stats(m) => ConfigMessage::Stats(*m),
            Owned::SchemaRead(m) => ConfigMessage::SchemaRead(*m),
            Owned::SchemaData { offset, data } => ConfigMessage::SchemaData(SchemaData {
                offset: *offset,
                data,
            }),
        }
    }

    /// For a message whose last part is "the rest of the payload": that part, and the
    /// size of what precedes it.
    fn rest_part(&mut self) -> Option<(usize, &mut Vec<u8>)> {
        match self {
            Owned::ServiceRequest { body, .. } => Some((ServiceRequest::HEADER_LEN, body)),
            Owned::ServiceResponse { body, .. } => Some((ServiceResponse::HEADER_LEN, body)),
            Owned::ParamSet { value, .. } => Some((2, value)),
            Owned::ParamValue { value, .. } => Some((2, value)),
            _ => None,
        }
    }

    /// The encoded size the layout documents.
    fn documented_len(&self) -> usize {
        match self {
            Owned::MasterHeartbeat(_) => MasterHeartbeat::LEN,
            Owned::NodeHeartbeat(_) => NodeHeartbeat::LEN,
            Owned::Start(_) => Start::LEN,
            Owned::ServiceRequest { body, .. } => ServiceRequest::HEADER_LEN + body.len(),
            Owned::ServiceResponse { body, .. } => ServiceResponse::HEADER_LEN + body.len(),
            Owned::ParamSet { value, .. } | Owned::ParamValue { value, .. } => 2 + value.len(),
            Owned::ParamGet(_) => ParamGet::LEN,
            Owned::Result(_) => CommandResult::LEN,
            Owned::FrameDefine { entries, .. } => {
                FrameDefine::HEADER_LEN + CopyEntry::LEN * entries.len()
            }
            Owned::AnnounceAck(_) => AnnounceAck::LEN,
            Owned::Discover(_) => Discover::LEN,
            Owned::Announce { counts, .. } => Announce::FIXED_LEN + counts.len(),
            Owned::StatsRead => 0,
            Owned::Stats(_) => Counters::LEN,
            Owned::SchemaRead(_) => SchemaRead::LEN,
            Owned::SchemaData { data, .. } => SchemaData::HEADER_LEN + data.len(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Strategies.
// ---------------------------------------------------------------------------------------

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=max)
}

fn node_state() -> impl Strategy<Value = NodeState> {
    select(NodeState::ALL)
}

fn copy_entry() -> impl Strategy<Value = CopyEntry> {
    (
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(|(block, topic, src_offset, len, dst_offset)| CopyEntry {
            block,
            topic,
            src_offset,
            len,
            dst_offset,
        })
}

fn frame_header() -> impl Strategy<Value = FrameHeader> {
    (
        any::<u8>(),
        any::<u16>(),
        prop_oneof![Just(DataDirection::M2s), Just(DataDirection::S2m)],
        any::<bool>(),
        any::<bool>(),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u32>(),
    )
        .prop_map(
            |(index, std_id, dir, sequenced, masked, len, group_parts, group_index, period_us)| {
                FrameHeader {
                    index,
                    std_id,
                    dir,
                    sequenced,
                    masked,
                    len,
                    group_parts,
                    group_index,
                    period_us,
                }
            },
        )
}

fn counters() -> impl Strategy<Value = Counters> {
    prop::array::uniform10(any::<u32>()).prop_map(Counters::from_array)
}

fn owned() -> impl Strategy<Value = Owned> {
    prop_oneof![
        any::<u32>().prop_map(|session| Owned::MasterHeartbeat(MasterHeartbeat { session })),
        (
            node_state(),
            select(FaultCode::ALL),
            any::<u32>(),
            any::<u16>()
        )
            .prop_map(|(state, fault, boot_id, errors)| Owned::NodeHeartbeat(
                NodeHeartbeat {
                    state,
                    fault,
                    boot_id,
                    errors
                }
            )),
        (any::<u8>(), any::<u16>()).prop_map(|(frame_count, master_timeout_ms)| Owned::Start(
            Start {
                frame_count,
                master_timeout_ms
            }
        )),
        (any::<u8>(), any::<u8>(), bytes(200)).prop_map(|(block, service, body)| {
            Owned::ServiceRequest {
                block,
                service,
                body,
            }
        }),
        (
            any::<u8>(),
            any::<u8>(),
            select(ServiceStatus::ALL),
            bytes(200)
        )
            .prop_map(|(block, service, status, body)| Owned::ServiceResponse {
                block,
                service,
                status,
                body
            }),
        (any::<u8>(), 0..=PARAM_INDEX_MASK, any::<bool>(), bytes(64)).prop_map(
            |(block, param, commit, value)| Owned::ParamSet {
                block,
                param,
                commit,
                value
            }
        ),
        (any::<u8>(), any::<u8>())
            .prop_map(|(block, param)| Owned::ParamGet(ParamGet { block, param })),
        (any::<u8>(), any::<u8>(), bytes(64)).prop_map(|(block, param, value)| {
            Owned::ParamValue {
                block,
                param,
                value,
            }
        }),
        (
            select(Opcode::ALL.to_vec()),
            select(ResultCode::ALL),
            any::<u16>()
        )
            .prop_map(|(opcode, code, detail)| Owned::Result(CommandResult {
                opcode,
                code,
                detail
            })),
        (frame_header(), prop::collection::vec(copy_entry(), 0..=20))
            .prop_map(|(header, entries)| Owned::FrameDefine { header, entries }),
        (any::<u32>(), any::<u32>(), select(BusMode::ALL)).prop_map(|(boot_id, session, mode)| {
            Owned::AnnounceAck(AnnounceAck {
                boot_id,
                session,
                mode,
            })
        }),
        any::<u32>().prop_map(|session| Owned::Discover(Discover { session })),
        (
            any::<u8>(),
            node_state(),
            0..=caps::KNOWN,
            any::<u32>(),
            any::<u32>(),
            any::<[u8; 8]>(),
            bytes(255)
        )
            .prop_map(|(protocol, state, caps, boot_id, blob_len, hash, counts)| {
                Owned::Announce {
                    protocol,
                    state,
                    caps,
                    boot_id,
                    blob_len,
                    hash,
                    counts,
                }
            }),
        Just(Owned::StatsRead),
        counters().prop_map(Owned::Stats),
        (any::<u32>(), any::<u16>())
            .prop_map(|(offset, len)| Owned::SchemaRead(SchemaRead { offset, len })),
        (any::<u32>(), bytes(600)).prop_map(|(offset, data)| Owned::SchemaData { offset, data }),
    ]
}

fn any_direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::ToNode), Just(Direction::ToMaster)]
}

fn encode(m: &ConfigMessage<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; 9000];
    let n = m.encode(&mut buf).expect("a valid message encodes");
    buf.truncate(n);
    buf
}

/// The (opcode, direction) pairs no message uses.
fn is_unused_pair(op: Opcode, dir: Direction) -> bool {
    matches!(
        (op, dir),
        (
            Opcode::Start | Opcode::ParamSet | Opcode::FrameDefine | Opcode::AnnounceAck,
            Direction::ToMaster
        ) | (Opcode::Result, Direction::ToNode)
    )
}

// ---------------------------------------------------------------------------------------
// Properties.
// ---------------------------------------------------------------------------------------

proptest! {
    /// encode → decode is the identity, and the encoded size is the documented one.
    #[test]
    fn encode_decode_identity(o in owned()) {
        let m = o.msg();
        let wire = encode(&m);
        prop_assert_eq!(wire.len(), o.documented_len());
        let back = ConfigMessage::decode(m.opcode(), m.direction(), &wire);
        prop_assert_eq!(back, Ok(m));
        // The decoded message re-encodes to the same bytes.
        prop_assert_eq!(encode(&back.unwrap()), wire);
    }

    /// Zero padding after a message (what an FD frame adds) leaves every fixed field as
    /// it was; a "rest of the payload" part grows by exactly the padding.
    #[test]
    fn zero_padding_leaves_fixed_fields(o in owned(), pad in 1usize..64) {
        let m = o.msg();
        let mut wire = encode(&m);
        wire.resize(wire.len() + pad, 0);
        let mut expected = o.clone();
        if let Some((_, rest)) = expected.rest_part() {
            rest.resize(rest.len() + pad, 0);
        }
        prop_assert_eq!(
            ConfigMessage::decode(m.opcode(), m.direction(), &wire),
            Ok(expected.msg())
        );
    }

    /// Every strict prefix of an encoding is reported `Truncated`, except where the
    /// message ends with "the rest of the payload": there a prefix that still holds the
    /// fixed part decodes with a shorter rest.
    #[test]
    fn truncation_is_detected(o in owned()) {
        let m = o.msg();
        let wire = encode(&m);
        for cut in 0..wire.len() {
            let got = ConfigMessage::decode(m.opcode(), m.direction(), &wire[..cut]);
            let mut expected = o.clone();
            match expected.rest_part() {
                Some((head, rest)) if cut >= head => {
                    rest.truncate(cut - head);
                    prop_assert_eq!(got, Ok(expected.msg()), "cut at {}", cut);
                }
                _ => prop_assert_eq!(got, Err(DecodeError::Truncated), "cut at {}", cut),
            }
        }
    }

    /// Encoding into a buffer that is too small fails with `OutOfSpace` and never panics.
    #[test]
    fn encode_into_small_buffer(o in owned(), short in 1usize..=64) {
        let m = o.msg();
        let n = encode(&m).len();
        prop_assume!(n > 0);
        let cap = n.saturating_sub(short);
        let mut buf = vec![0u8; cap];
        prop_assert_eq!(m.encode(&mut buf), Err(EncodeError::OutOfSpace));
    }

    /// `ConfigMessage::decode` on arbitrary bytes never panics; whatever it accepts
    /// belongs to the opcode and direction asked for and re-encodes to a message that
    /// decodes to itself. Except for STATS (whose count byte may differ from ours) the
    /// re-encoding is a prefix of the input.
    #[test]
    fn decode_arbitrary_bytes(
        op in select(Opcode::ALL.to_vec()),
        dir in any_direction(),
        payload in bytes(300),
    ) {
        match ConfigMessage::decode(op, dir, &payload) {
            Ok(m) => {
                prop_assert_eq!(m.opcode(), op);
                prop_assert_eq!(m.direction(), dir);
                let again = encode(&m);
                prop_assert_eq!(ConfigMessage::decode(op, dir, &again), Ok(m));
                let stats_other_count =
                    matches!(m, ConfigMessage::Stats(_)) && payload[0] as usize != Counters::COUNT;
                if !stats_other_count {
                    prop_assert!(payload.starts_with(&again));
                }
            }
            Err(e) => {
                prop_assert_eq!(e == DecodeError::WrongDirection, is_unused_pair(op, dir));
            }
        }
    }

    /// Mutating one byte of a valid message never makes the decoder panic.
    #[test]
    fn decode_mutated_message(o in owned(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let m = o.msg();
        let mut wire = encode(&m);
        prop_assume!(!wire.is_empty());
        let i = at.index(wire.len());
        wire[i] = byte;
        let _ = ConfigMessage::decode(m.opcode(), m.direction(), &wire);
    }

    /// Unknown enumeration bytes are refused with `BadEnum` carrying the byte.
    #[test]
    fn bad_enum_bytes_are_refused(o in owned(), v in any::<u8>()) {
        // (byte offset of an enum field, whether `v` is a valid value for it)
        let field: Option<(usize, bool)> = match &o {
            Owned::NodeHeartbeat(_) => Some((0, NodeState::from_u8(v).is_some())),
            Owned::ServiceResponse { .. } => Some((2, ServiceStatus::from_u8(v).is_some())),
            Owned::Result(_) => Some((1, ResultCode::from_u8(v).is_some())),
            Owned::AnnounceAck(_) => Some((8, BusMode::from_u8(v).is_some())),
            Owned::Announce { .. } => Some((1, NodeState::from_u8(v).is_some())),
            _ => None,
        };
        let Some((at, valid)) = field else { return Ok(()) };
        let m = o.msg();
        let mut wire = encode(&m);
        wire[at] = v;
        let got = ConfigMessage::decode(m.opcode(), m.direction(), &wire);
        if valid {
            prop_assert!(got.is_ok());
        } else {
            prop_assert_eq!(got, Err(DecodeError::BadEnum(v)));
        }
    }

    /// Reserved capability and frame-flag bits are refused.
    #[test]
    fn reserved_bits_are_refused(o in owned(), bits in 1u8..=255) {
        let at = match &o {
            Owned::Announce { .. } => 2,
            Owned::FrameDefine { .. } => 3,
            _ => return Ok(()),
        };
        let known = if at == 2 { caps::KNOWN } else { frame_flags::KNOWN };
        let m = o.msg();
        let mut wire = encode(&m);
        wire[at] |= bits;
        let got = ConfigMessage::decode(m.opcode(), m.direction(), &wire);
        if bits & !known != 0 {
            prop_assert_eq!(got, Err(DecodeError::ReservedBits));
        } else {
            prop_assert!(got.is_ok());
        }
    }

    /// `Announce::clear_caps` on the first Classical CAN frame of an encoded ANNOUNCE
    /// clears exactly the asked capability bits: the message decodes with every other
    /// field unchanged; reserved bits stay set (a malformed ANNOUNCE stays refused).
    #[test]
    fn clear_caps_changes_only_the_cleared_bits(
        o in owned(),
        clear in any::<u8>(),
        reserved in any::<u8>(),
    ) {
        let Owned::Announce { caps: before, .. } = &o else { return Ok(()) };
        let before = *before;
        let m = o.msg();
        let mut wire = encode(&m);
        let first = wire.len().min(8);
        let cleared = Announce::clear_caps(&mut wire[..first], clear);
        prop_assert_eq!(cleared, Some(before & clear & caps::KNOWN));
        let got = ConfigMessage::decode(m.opcode(), m.direction(), &wire);
        let ConfigMessage::Announce(a) = m else { unreachable!() };
        let want = Announce { caps: before & !(clear & caps::KNOWN), ..a };
        prop_assert_eq!(got, Ok(ConfigMessage::Announce(want)));
        // With reserved bits set, clearing never makes it valid.
        let reserved = reserved & !caps::KNOWN;
        let mut bad = encode(&m);
        bad[2] |= reserved;
        Announce::clear_caps(&mut bad[..first], clear);
        let got = ConfigMessage::decode(m.opcode(), m.direction(), &bad);
        if reserved != 0 {
            prop_assert_eq!(got, Err(DecodeError::ReservedBits));
        } else {
            prop_assert_eq!(got, Ok(ConfigMessage::Announce(want)));
        }
    }

    /// A RESULT whose opcode byte is reserved is refused.
    #[test]
    fn result_with_reserved_opcode(code in select(ResultCode::ALL), detail in any::<u16>(), op in any::<u8>()) {
        let payload = [op, code as u8, detail as u8, (detail >> 8) as u8];
        let got = ConfigMessage::decode(Opcode::Result, Direction::ToMaster, &payload);
        match Opcode::from_u8(op) {
            Some(opcode) => prop_assert_eq!(
                got,
                Ok(ConfigMessage::Result(CommandResult { opcode, code, detail }))
            ),
            None => prop_assert_eq!(got, Err(DecodeError::BadEnum(op))),
        }
    }

    /// STATS from a newer node (more counters) keeps the known ones; from an older node
    /// (fewer) the missing ones read 0.
    #[test]
    fn stats_with_other_counter_counts(values in prop::collection::vec(any::<u32>(), 0..=20)) {
        let mut wire = vec![values.len() as u8];
        for v in &values {
            wire.extend_from_slice(&v.to_le_bytes());
        }
        let mut expected = [0u32; Counters::COUNT];
        for (slot, v) in expected.iter_mut().zip(&values) {
            *slot = *v;
        }
        prop_assert_eq!(
            ConfigMessage::decode(Opcode::Stats, Direction::ToMaster, &wire),
            Ok(ConfigMessage::Stats(Counters::from_array(expected)))
        );
    }

    /// A decoded FRAME_DEFINE's zero-copy entries read back as the ones encoded.
    #[test]
    fn frame_define_wire_entries(header in frame_header(), entries in prop::collection::vec(copy_entry(), 0..=40)) {
        let m = ConfigMessage::FrameDefine(FrameDefine { header, entries: Entries::List(&entries) });
        let wire = encode(&m);
        let Ok(ConfigMessage::FrameDefine(fd)) =
            ConfigMessage::decode(Opcode::FrameDefine, Direction::ToNode, &wire)
        else {
            return Err(TestCaseError::fail("FRAME_DEFINE did not decode"));
        };
        prop_assert!(matches!(fd.entries, Entries::Wire(_)));
        prop_assert_eq!(fd.header, header);
        prop_assert_eq!(fd.entries.len(), entries.len());
        prop_assert_eq!(fd.entries.iter().collect::<Vec<_>>(), entries.clone());
        for (i, e) in entries.iter().enumerate() {
            prop_assert_eq!(fd.entries.get(i), Some(*e));
        }
        prop_assert_eq!(fd.entries.get(entries.len()), None);
    }

    /// A zero-copy view whose length is not a multiple of the entry size shows the whole
    /// entries only.
    #[test]
    fn wire_entries_of_any_length(raw in bytes(100)) {
        let e = Entries::Wire(&raw);
        prop_assert_eq!(e.len(), raw.len() / CopyEntry::LEN);
        prop_assert_eq!(e.iter().count(), e.len());
        prop_assert_eq!(e.get(e.len()), None);
    }

    /// The error summary is the wrapping sum of the trouble counters: everything but
    /// rx_handled (0), rx_ignored (2, other nodes' traffic), tx_refused (5, flow control)
    /// and tx_frames (6).
    #[test]
    fn counters_error_summary(c in counters()) {
        let a = c.to_array();
        let sum: u64 = [1, 3, 4, 7, 8, 9].iter().map(|&i| a[i] as u64).sum();
        prop_assert_eq!(c.error_summary(), sum as u16);
        prop_assert_eq!(Counters::from_array(a), c);
    }
}

/// The (opcode, direction) pairs no message uses are refused whatever the payload.
#[test]
fn unused_pairs_are_wrong_direction() {
    for op in Opcode::ALL {
        for dir in [Direction::ToNode, Direction::ToMaster] {
            for payload in [&[][..], &[0u8; 64][..], &[0xFF; 7][..]] {
                let got = ConfigMessage::decode(op, dir, payload);
                if is_unused_pair(op, dir) {
                    assert_eq!(got, Err(DecodeError::WrongDirection), "{op:?} {dir:?}");
                } else {
                    assert_ne!(got, Err(DecodeError::WrongDirection), "{op:?} {dir:?}");
                }
            }
        }
    }
}

/// Variable parts longer than their length fields, and param indices over 7 bits, are
/// refused at encoding.
#[test]
fn encode_refuses_what_the_wire_cannot_say() {
    let mut buf = vec![0u8; 100_000];
    let long = vec![0u8; 256];
    let announce = ConfigMessage::Announce(Announce {
        protocol: 2,
        state: NodeState::Unprovisioned,
        caps: 0,
        boot_id: 1,
        blob_len: 2,
        hash: HashPrefix([0; 8]),
        counts: &long,
    });
    assert_eq!(announce.encode(&mut buf), Err(EncodeError::TooLong));
    let entries = vec![
        CopyEntry {
            block: 0,
            topic: 0,
            src_offset: 0,
            len: 1,
            dst_offset: 0
        };
        256
    ];
    let header = FrameHeader {
        index: 0,
        std_id: 0x100,
        dir: DataDirection::M2s,
        sequenced: false,
        masked: false,
        len: 8,
        group_parts: 1,
        group_index: 0,
        period_us: 0,
    };
    let fd = ConfigMessage::FrameDefine(FrameDefine {
        header,
        entries: Entries::List(&entries),
    });
    assert_eq!(fd.encode(&mut buf), Err(EncodeError::TooLong));
    let fd255 = ConfigMessage::FrameDefine(FrameDefine {
        header,
        entries: Entries::List(&entries[..255]),
    });
    assert_eq!(
        fd255.encode(&mut buf),
        Ok(FrameDefine::HEADER_LEN + 255 * CopyEntry::LEN)
    );
    let big = vec![0u8; u16::MAX as usize + 1];
    let sd = ConfigMessage::SchemaData(SchemaData {
        offset: 0,
        data: &big,
    });
    assert_eq!(sd.encode(&mut buf), Err(EncodeError::TooLong));
    for param in 0..=255u8 {
        let ps = ConfigMessage::ParamSet(ParamSet {
            block: 0,
            param,
            commit: true,
            value: &[],
        });
        let got = ps.encode(&mut buf);
        if param <= PARAM_INDEX_MASK {
            assert_eq!(got, Ok(2));
            assert_eq!(buf[1], param | COMMIT);
        } else {
            assert_eq!(got, Err(EncodeError::BadField));
        }
    }
}

/// Every wire enumeration: `from_u8` accepts exactly the values of `ALL`, which are
/// `0..ALL.len()` in order, and `TryFrom` agrees.
#[test]
fn wire_enums_are_dense_and_consistent() {
    macro_rules! check {
        ($t:ty) => {
            for v in 0..=255u8 {
                let got = <$t>::from_u8(v);
                assert_eq!(
                    got,
                    <$t>::ALL.get(v as usize).copied(),
                    "{} {v}",
                    stringify!($t)
                );
                if let Some(x) = got {
                    assert_eq!(x as u8, v);
                }
                assert_eq!(<$t>::try_from(v).ok(), got);
                if got.is_none() {
                    assert_eq!(<$t>::try_from(v), Err(DecodeError::BadEnum(v)));
                }
            }
        };
    }
    check!(NodeState);
    check!(FaultCode);
    check!(ResultCode);
    check!(ServiceStatus);
    check!(BusMode);
}

/// Bus modes map to the frame kind they transmit.
#[test]
fn bus_mode_mtu() {
    use fcan_core::frame::Mtu;
    for m in BusMode::ALL {
        let expected = if *m == BusMode::Classic {
            Mtu::Classic
        } else {
            Mtu::Fd
        };
        assert_eq!(m.mtu(), expected);
    }
}
