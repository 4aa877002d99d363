//! Property tests of the schema blob (`fcan_core::blob`), numbering
//! (`fcan_core::numbering`), validation (`fcan_core::validate`) and the hash rule
//! (`fcan_core::hash`).

use fcan_core::blob::{self, pb, BlobError};
use fcan_core::hash::SchemaDigest;
use fcan_core::ir::*;
use fcan_core::msg::DataDirection;
use fcan_core::numbering::{layout, Numbering, NumberingError, TypeLayout, MAX_BLOCKS};
use fcan_core::types::{Scalar, ScalarType};
use fcan_core::validate::{validate, PathSeg};
use proptest::prelude::*;
use proptest::sample::select;
use prost::Message;

// ---------------------------------------------------------------------------------------
// Strategies: arbitrary IR (anything the types can hold, for the blob and for "never
// panics"), and valid IR (for numbering and validation).
// ---------------------------------------------------------------------------------------

fn scalar_type() -> impl Strategy<Value = ScalarType> {
    select(ScalarType::ALL.to_vec())
}

/// A finite value of `ty` (NaN is not `==` itself, so a roundtrip could not be checked).
fn finite_scalar(ty: ScalarType) -> BoxedStrategy<Scalar> {
    match ty {
        ScalarType::Bool => any::<bool>().prop_map(Scalar::Bool).boxed(),
        ScalarType::U8 => any::<u8>().prop_map(Scalar::U8).boxed(),
        ScalarType::I8 => any::<i8>().prop_map(Scalar::I8).boxed(),
        ScalarType::U16 => any::<u16>().prop_map(Scalar::U16).boxed(),
        ScalarType::I16 => any::<i16>().prop_map(Scalar::I16).boxed(),
        ScalarType::U32 => any::<u32>().prop_map(Scalar::U32).boxed(),
        ScalarType::I32 => any::<i32>().prop_map(Scalar::I32).boxed(),
        ScalarType::U64 => any::<u64>().prop_map(Scalar::U64).boxed(),
        ScalarType::I64 => any::<i64>().prop_map(Scalar::I64).boxed(),
        ScalarType::F32 => prop_oneof![
            prop::num::f32::NORMAL | prop::num::f32::SUBNORMAL | prop::num::f32::ZERO,
            Just(f32::MAX),
            Just(f32::MIN),
            Just(f32::MIN_POSITIVE),
        ]
        .prop_map(Scalar::F32)
        .boxed(),
        ScalarType::F64 => prop_oneof![
            prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
            Just(f64::MAX),
            Just(f64::MIN),
        ]
        .prop_map(Scalar::F64)
        .boxed(),
    }
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z_][a-z0-9_/]{0,8}",
        1 => any::<String>(),
        1 => Just(String::new()),
    ]
}

fn array_len() -> impl Strategy<Value = Option<u32>> {
    // `Some(0)` is not representable: the blob says "scalar" with 0.
    prop_oneof![3 => Just(None), 2 => (1u32..=8).prop_map(Some), 1 => (1u32..=u32::MAX).prop_map(Some)]
}

fn any_field() -> impl Strategy<Value = Field> {
    (any_text(), scalar_type(), array_len()).prop_map(|(name, ty, len)| Field { name, ty, len })
}

fn any_ros() -> impl Strategy<Value = Option<Ros>> {
    prop::option::of(
        (
            any_text(),
            prop::collection::vec((any_text(), any_text()), 0..3),
        )
            .prop_map(|(ty, map)| Ros { ty, map }),
    )
}

fn any_param() -> impl Strategy<Value = Param> {
    (any_text(), scalar_type(), array_len()).prop_flat_map(|(name, ty, len)| {
        (
            finite_scalar(ty),
            prop::option::of(finite_scalar(ty)),
            prop::option::of(finite_scalar(ty)),
        )
            .prop_map(move |(default, min, max)| Param {
                name: name.clone(),
                ty,
                len,
                default,
                min,
                max,
            })
    })
}

fn direction() -> impl Strategy<Value = DataDirection> {
    prop_oneof![Just(DataDirection::M2s), Just(DataDirection::S2m)]
}

fn any_topic() -> impl Strategy<Value = Topic> {
    (
        any_text(),
        direction(),
        any::<u32>(),
        prop::collection::vec(any_field(), 0..4),
        any_ros(),
    )
        .prop_map(|(name, dir, period_us, fields, ros)| Topic {
            name,
            dir,
            period_us,
            fields,
            ros,
        })
}

fn any_service() -> impl Strategy<Value = Service> {
    (
        any_text(),
        prop::collection::vec(any_field(), 0..3),
        prop::collection::vec(any_field(), 0..3),
        any_ros(),
    )
        .prop_map(|(name, request, response, ros)| Service {
            name,
            request,
            response,
            ros,
        })
}

fn any_block_type() -> impl Strategy<Value = BlockType> {
    (
        any_text(),
        prop::collection::vec(any_param(), 0..4),
        prop::collection::vec(any_topic(), 0..3),
        prop::collection::vec(any_service(), 0..3),
    )
        .prop_map(|(name, params, topics, services)| BlockType {
            name,
            params,
            topics,
            services,
        })
}

fn any_limits() -> impl Strategy<Value = Limits> {
    (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(a, b, c, d)| Limits {
        max_frames: a,
        max_copy_entries: b,
        service_buffer: c,
        service_reassembly: d,
    })
}

/// Any schema the IR can hold (with finite floats): instances name one of the types or
/// something else, counts may be far too large.
fn any_schema() -> impl Strategy<Value = Schema> {
    (
        prop_oneof![Just(PROTOCOL_VERSION), any::<u32>()],
        any_text(),
        any_text(),
        any_limits(),
        prop::collection::vec(any_block_type(), 0..4),
    )
        .prop_flat_map(|(protocol, node, allocation, limits, types)| {
            let names: Vec<String> = types.iter().map(|t| t.name.clone()).collect();
            let ty = if names.is_empty() {
                any_text().boxed()
            } else {
                prop_oneof![4 => select(names), 1 => any_text()].boxed()
            };
            let count = prop_oneof![4 => 0u32..=10, 1 => 0u32..=300, 1 => any::<u32>()];
            let arrays = prop::collection::vec(
                (ty, count, prop_oneof!["[a-z]{1,3}(\\{i\\})?", any_text()])
                    .prop_map(|(ty, max_count, ns)| InstanceArray { ty, max_count, ns }),
                0..5,
            );
            (Just((protocol, node, allocation, limits, types)), arrays)
        })
        .prop_map(
            |((protocol, node, allocation, limits, types), instances)| Schema {
                protocol,
                node,
                allocation,
                limits,
                types,
                instances,
            },
        )
}

/// A name unique by construction: letters, then the index as digits, optionally under
/// a group (`grp/abc3`), which flattens to something no other name here flattens to.
fn unique_name(i: usize) -> impl Strategy<Value = String> {
    ("[a-z]{1,4}", prop::option::of("[a-z]{1,3}")).prop_map(move |(base, group)| match group {
        Some(g) => format!("{g}/{base}{i}"),
        None => format!("{base}{i}"),
    })
}

fn ident(i: usize) -> impl Strategy<Value = String> {
    "[a-z]{1,4}".prop_map(move |base| format!("{base}{i}"))
}

fn valid_fields(min: usize, max: usize) -> impl Strategy<Value = Vec<Field>> {
    prop::collection::vec(
        (
            scalar_type(),
            prop_oneof![Just(None), (1u32..=4).prop_map(Some)],
        ),
        min..=max,
    )
    .prop_flat_map(|specs| {
        let names: Vec<_> = (0..specs.len()).map(ident).collect();
        (Just(specs), names)
    })
    .prop_map(|(specs, names)| {
        specs
            .into_iter()
            .zip(names)
            .map(|((ty, len), name)| Field { name, ty, len })
            .collect()
    })
}

fn valid_ros(fields: Vec<String>) -> impl Strategy<Value = Option<Ros>> {
    let keys = if fields.is_empty() {
        Just(Vec::new()).boxed()
    } else {
        prop::collection::vec(select(fields), 0..3).boxed()
    };
    prop::option::of(
        ("[a-z]{1,6}/msg/[A-Z][a-z]{1,6}", keys).prop_map(|(ty, keys)| Ros {
            ty,
            map: keys
                .into_iter()
                .map(|k| (k.clone(), format!("ros_{k}")))
                .collect(),
        }),
    )
}

fn valid_param(i: usize) -> impl Strategy<Value = Param> {
    (
        unique_name(i),
        scalar_type(),
        prop_oneof![Just(None), (1u32..=4).prop_map(Some)],
    )
        .prop_flat_map(|(name, ty, len)| {
            let bounds = if ty == ScalarType::Bool {
                (finite_scalar(ty), Just(None), Just(None)).boxed()
            } else {
                (
                    finite_scalar(ty),
                    prop::option::of(finite_scalar(ty)),
                    prop::option::of(finite_scalar(ty)),
                )
                    .boxed()
            };
            (Just((name, ty, len)), bounds)
        })
        .prop_map(|((name, ty, len), (a, b, c))| {
            // Sort the values so that min <= default <= max.
            let mut present: Vec<Scalar> = [Some(a), b, c].into_iter().flatten().collect();
            present.sort_by(|x, y| x.cmp_value(y).unwrap());
            let (min, default, max) = match (b.is_some(), c.is_some()) {
                (true, true) => (Some(present[0]), present[1], Some(present[2])),
                (true, false) => (Some(present[0]), present[1], None),
                (false, true) => (None, present[0], Some(present[1])),
                (false, false) => (None, present[0], None),
            };
            Param {
                name,
                ty,
                len,
                default,
                min,
                max,
            }
        })
}

fn valid_topic(i: usize) -> impl Strategy<Value = Topic> {
    (
        unique_name(i),
        direction(),
        // Periods a node can schedule (longer ones are refused: node limits).
        0..=fcan_core::timing::MAX_PERIOD_US,
        valid_fields(1, 4),
    )
        .prop_flat_map(|(name, dir, period, fields)| {
            let names = fields.iter().map(|f| f.name.clone()).collect();
            (Just((name, dir, period, fields)), valid_ros(names))
        })
        .prop_map(|((name, dir, period, fields), ros)| Topic {
            name,
            dir,
            period_us: if dir == DataDirection::M2s { 0 } else { period },
            fields,
            ros,
        })
}

fn valid_service(i: usize) -> impl Strategy<Value = Service> {
    (unique_name(i), valid_fields(0, 3), valid_fields(0, 3))
        .prop_flat_map(|(name, request, mut response)| {
            // Field names are unique within a message; keep them apart across the two so a
            // ros.map key names one field.
            for f in &mut response {
                f.name = format!("r_{}", f.name);
            }
            let names = request
                .iter()
                .chain(&response)
                .map(|f| f.name.clone())
                .collect();
            (Just((name, request, response)), valid_ros(names))
        })
        .prop_map(|((name, request, response), ros)| Service {
            name,
            request,
            response,
            ros,
        })
}

fn indexed<S: Strategy>(
    n: std::ops::Range<usize>,
    f: fn(usize) -> S,
) -> impl Strategy<Value = Vec<S::Value>>
where
    S::Value: Clone + std::fmt::Debug,
{
    n.prop_flat_map(move |k| (0..k).map(f).collect::<Vec<_>>())
}

fn valid_block_type(i: usize) -> impl Strategy<Value = BlockType> {
    (
        "[A-Z][a-z]{0,5}".prop_map(move |b| format!("{b}{i}")),
        indexed(0..4, valid_param),
        indexed(0..3, valid_topic),
        indexed(0..3, valid_service),
    )
        .prop_map(|(name, params, topics, services)| BlockType {
            name,
            params,
            topics,
            services,
        })
}

/// A schema `validate` must accept: identifier names, unique within their kind, params
/// with min <= default <= max, small messages, instances of existing types with
/// distinct namespaces and at most 255 blocks.
fn valid_schema() -> impl Strategy<Value = Schema> {
    (
        prop_oneof!["[a-z][a-z0-9_]{0,6}", "[a-z]{1,4}\\{i\\}"],
        indexed(1..4, valid_block_type),
        1u32..=u16::MAX as u32,
        1u32..=255,
    )
        .prop_flat_map(|(node, types, max_copy_entries, service_reassembly)| {
            let names: Vec<String> = types.iter().map(|t| t.name.clone()).collect();
            let arrays = prop::collection::vec(
                (
                    select(names),
                    prop_oneof![Just(1u32), 1u32..=8, 1u32..=60],
                    "[a-z]{1,4}",
                    any::<bool>(),
                ),
                0..5,
            );
            (
                Just((node, types, max_copy_entries, service_reassembly)),
                arrays,
            )
        })
        .prop_map(
            |((node, types, max_copy_entries, service_reassembly), arrays)| {
                let instances = arrays
                    .into_iter()
                    .enumerate()
                    .map(|(a, (ty, max_count, base, plain))| InstanceArray {
                        ty,
                        max_count,
                        ns: if max_count == 1 && plain {
                            format!("{base}{a}")
                        } else {
                            format!("{base}{a}_{{i}}")
                        },
                    })
                    .collect();
                Schema {
                    protocol: PROTOCOL_VERSION,
                    node,
                    allocation: "static".into(),
                    limits: Limits {
                        max_frames: 255,
                        max_copy_entries,
                        service_buffer: 1024,
                        service_reassembly,
                    },
                    types,
                    instances,
                }
            },
        )
}

fn has_error_at(schema: &Schema, path: &[&str]) -> bool {
    validate(schema).iter().any(|e| {
        e.path.len() >= path.len()
            && e.path.iter().zip(path).all(|(seg, want)| match seg {
                PathSeg::Key(k) => k == want,
                PathSeg::Index(i) => i.to_string() == *want,
            })
    })
}

// ---------------------------------------------------------------------------------------
// Blob.
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// decode(encode(s)) == s, encoding is deterministic and canonical, and the digest is
    /// the SHA-256 of the encoding.
    #[test]
    fn blob_roundtrip(s in any_schema()) {
        let bytes = blob::encode(&s);
        prop_assert_eq!(blob::decode(&bytes), Ok(s.clone()));
        prop_assert_eq!(&blob::encode(&s.clone()), &bytes);
        prop_assert_eq!(blob::encode(&blob::decode(&bytes).unwrap()), bytes.clone());
        prop_assert_eq!(blob::digest(&s), SchemaDigest::of(&bytes));
    }

    /// Arbitrary bytes never make the decoder panic; whatever decodes re-encodes to a
    /// blob that decodes to the same encoding again.
    #[test]
    fn blob_decode_arbitrary(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check_decoded(&bytes)?;
    }

    /// Damaged valid blobs (bytes changed, cut short, or spliced) never make the decoder
    /// panic.
    #[test]
    fn blob_decode_damaged(
        s in any_schema(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let mut bytes = blob::encode(&s);
        for (at, byte, kind) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match kind {
                0 => bytes[i] = byte,
                1 => bytes.truncate(i),
                _ => bytes.insert(i, byte),
            }
        }
        check_decoded(&bytes)?;
    }

    /// Non-finite param values survive the blob as what they are.
    #[test]
    fn non_finite_params_roundtrip(
        v32 in select(vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY]),
        v64 in select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY]),
    ) {
        let param = |name: &str, default: Scalar| Param {
            name: name.into(),
            ty: default.ty(),
            len: None,
            default,
            min: None,
            max: None,
        };
        let s = Schema {
            protocol: PROTOCOL_VERSION,
            node: "n".into(),
            allocation: "static".into(),
            limits: Limits::default(),
            types: vec![BlockType {
                name: "T".into(),
                params: vec![param("a", Scalar::F32(v32)), param("b", Scalar::F64(v64))],
                topics: vec![],
                services: vec![],
            }],
            instances: vec![],
        };
        let back = blob::decode(&blob::encode(&s)).unwrap();
        let (Scalar::F32(a), Scalar::F64(b)) = (back.types[0].params[0].default, back.types[0].params[1].default) else {
            return Err(TestCaseError::fail("param types changed"));
        };
        prop_assert_eq!(a.is_nan(), v32.is_nan());
        prop_assert_eq!(b.is_nan(), v64.is_nan());
        if !v32.is_nan() {
            prop_assert_eq!(a, v32);
        }
        if !v64.is_nan() {
            prop_assert_eq!(b, v64);
        }
    }

    /// An f32 param value stored as a double that no f32 equals is refused; one that an
    /// f32 equals is accepted exactly.
    #[test]
    fn f32_values_must_be_exact(x in any::<f64>().prop_filter("not NaN", |x| !x.is_nan())) {
        let got = blob::decode(&one_param_blob(pb::ScalarType::F32, pb::value::Kind::F(x)));
        if (x as f32) as f64 == x {
            let s = got.unwrap();
            prop_assert_eq!(s.types[0].params[0].default, Scalar::F32(x as f32));
        } else {
            prop_assert!(matches!(got, Err(BlobError::Invalid(_))));
        }
    }

    /// Integer param values out of their type's range are refused.
    #[test]
    fn integer_values_must_fit(u in any::<u64>(), i in any::<i64>()) {
        use pb::value::Kind;
        let cases: [(pb::ScalarType, Kind, bool); 6] = [
            (pb::ScalarType::U8, Kind::U(u), u <= u8::MAX as u64),
            (pb::ScalarType::U16, Kind::U(u), u <= u16::MAX as u64),
            (pb::ScalarType::U32, Kind::U(u), u <= u32::MAX as u64),
            (pb::ScalarType::I8, Kind::I(i), i8::try_from(i).is_ok()),
            (pb::ScalarType::I16, Kind::I(i), i16::try_from(i).is_ok()),
            (pb::ScalarType::I32, Kind::I(i), i32::try_from(i).is_ok()),
        ];
        for (ty, kind, fits) in cases {
            let got = blob::decode(&one_param_blob(ty, kind));
            prop_assert_eq!(got.is_ok(), fits, "{:?} {:?}", ty, kind);
        }
    }
}

fn check_decoded(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(s) = blob::decode(bytes) {
        let again = blob::encode(&s);
        let s2 = blob::decode(&again).expect("a re-encoded blob decodes");
        prop_assert_eq!(blob::encode(&s2), again);
        // Whatever decodes can be validated and numbered without panicking.
        let errors = validate(&s);
        for e in &errors {
            prop_assert!(!e.to_string().is_empty());
        }
        let _ = Numbering::of(&s);
    }
    Ok(())
}

fn one_param_blob(ty: pb::ScalarType, kind: pb::value::Kind) -> Vec<u8> {
    pb::Schema {
        protocol: PROTOCOL_VERSION,
        node: "n".into(),
        allocation: "static".into(),
        limits: Some(pb::Limits::default()),
        types: vec![pb::BlockType {
            name: "T".into(),
            params: vec![pb::Param {
                name: "p".into(),
                r#type: ty as i32,
                len: 0,
                default: Some(pb::Value { kind: Some(kind) }),
                min: None,
                max: None,
            }],
            topics: vec![],
            services: vec![],
        }],
        instances: vec![],
    }
    .encode_to_vec()
}

/// Structurally broken blobs are refused with a reason.
#[test]
fn blob_structural_errors() {
    use pb::value::Kind;
    let good = pb::Schema::decode(&one_param_blob(pb::ScalarType::U8, Kind::U(1))[..]).unwrap();
    assert!(blob::decode(&good.encode_to_vec()).is_ok());

    let mut no_limits = good.clone();
    no_limits.limits = None;
    let mut no_default = good.clone();
    no_default.types[0].params[0].default = None;
    let mut empty_value = good.clone();
    empty_value.types[0].params[0].default = Some(pb::Value { kind: None });
    let mut wrong_kind = good.clone();
    wrong_kind.types[0].params[0].default = Some(pb::Value {
        kind: Some(Kind::I(1)),
    });
    let mut wrong_min = good.clone();
    wrong_min.types[0].params[0].min = Some(pb::Value {
        kind: Some(Kind::B(true)),
    });
    let mut unknown_type = good.clone();
    unknown_type.types[0].params[0].r#type = 12;
    let mut unspecified_type = good.clone();
    unspecified_type.types[0].params[0].r#type = 0;
    let mut bad_field = good.clone();
    bad_field.types[0].topics.push(pb::Topic {
        name: "t".into(),
        dir: 0,
        period_us: 0,
        fields: vec![pb::Field {
            name: "f".into(),
            r#type: -3,
            len: 0,
        }],
        ros: None,
    });
    let mut bad_dir = good.clone();
    bad_dir.types[0].topics.push(pb::Topic {
        name: "t".into(),
        dir: 2,
        period_us: 0,
        fields: vec![],
        ros: None,
    });
    let mut bad_service = good.clone();
    bad_service.types[0].services.push(pb::Service {
        name: "s".into(),
        request: vec![],
        response: vec![pb::Field {
            name: "f".into(),
            r#type: 99,
            len: 0,
        }],
        ros: None,
    });
    for (what, s) in [
        ("no limits", no_limits),
        ("no default", no_default),
        ("empty value", empty_value),
        ("wrong kind", wrong_kind),
        ("wrong min", wrong_min),
        ("unknown type", unknown_type),
        ("unspecified type", unspecified_type),
        ("bad field type", bad_field),
        ("bad direction", bad_dir),
        ("bad service field", bad_service),
    ] {
        match blob::decode(&s.encode_to_vec()) {
            Err(BlobError::Invalid(msg)) => assert!(!msg.is_empty(), "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Not protobuf at all.
    assert!(matches!(
        blob::decode(&[0xFF, 0xFF, 0xFF]),
        Err(BlobError::Protobuf(_))
    ));
}

// ---------------------------------------------------------------------------------------
// Numbering.
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Block numbers are array-major and contiguous: array `a`'s instances are
    /// `array_base[a] .. array_base[a] + max_count`, in index order, right after the
    /// previous array's.
    #[test]
    fn numbering_is_array_major(s in valid_schema()) {
        let n = Numbering::of(&s).unwrap();
        let total: usize = s.instances.iter().map(|a| a.max_count as usize).sum();
        prop_assert_eq!(n.blocks.len(), total);
        prop_assert_eq!(n.array_base.len(), s.instances.len());
        let mut next = 0usize;
        for (a, arr) in s.instances.iter().enumerate() {
            prop_assert_eq!(n.array_base[a] as usize, next);
            for i in 0..arr.max_count {
                let b = &n.blocks[next];
                prop_assert_eq!(b.number as usize, next);
                prop_assert_eq!(b.array, a);
                prop_assert_eq!(b.index, i);
                prop_assert_eq!(&s.types[b.type_index].name, &arr.ty);
                prop_assert_eq!(&b.ns, &arr.ns_of(i));
                prop_assert_eq!(n.block_number(a, i), Some(b.number));
                prop_assert_eq!(n.block(b.number), Some(b));
                prop_assert_eq!(n.layout_of(b.number), Some(&n.layouts[b.type_index]));
                next += 1;
            }
            prop_assert_eq!(n.block_number(a, arr.max_count), None);
        }
        prop_assert_eq!(n.block_number(s.instances.len(), 0), None);
        prop_assert!(total < MAX_BLOCKS);
        prop_assert_eq!(n.block(total as u8), None);
        prop_assert_eq!(n.layouts.len(), s.types.len());
        for (t, l) in s.types.iter().zip(&n.layouts) {
            prop_assert_eq!(l, &TypeLayout::of(t));
        }
    }

    /// Appending an instance array keeps every existing block number.
    #[test]
    fn appending_keeps_numbers(s in valid_schema(), count in 1u32..=5) {
        let before = Numbering::of(&s).unwrap();
        let mut more = s.clone();
        more.instances.push(InstanceArray { ty: s.types[0].name.clone(), max_count: count, ns: "zz{i}".into() });
        let after = Numbering::of(&more).unwrap();
        prop_assert_eq!(&after.blocks[..before.blocks.len()], &before.blocks[..]);
        prop_assert_eq!(&after.array_base[..before.array_base.len()], &before.array_base[..]);
        prop_assert_eq!(after.blocks.len(), before.blocks.len() + count as usize);
    }

    /// Fields are packed back to back, in declaration order.
    #[test]
    fn layout_is_contiguous(fields in prop::collection::vec(any_field().prop_map(|mut f| { f.len = f.len.map(|l| l % 1000 + 1); f }), 0..10)) {
        let l = layout(&fields);
        prop_assert_eq!(l.fields.len(), fields.len());
        let mut at = 0;
        for (f, slot) in fields.iter().zip(&l.fields) {
            prop_assert_eq!(slot.offset, at);
            prop_assert_eq!(slot.size, f.ty.size() * f.len.unwrap_or(1) as usize);
            at += slot.size;
        }
        prop_assert_eq!(l.size, at);
    }

    /// On any schema, numbering fails exactly on the first array whose type is unknown
    /// or that takes the count past `MAX_BLOCKS`.
    #[test]
    fn numbering_errors(s in any_schema()) {
        let mut total = 0usize;
        let mut want = Ok(());
        for a in &s.instances {
            if !s.types.iter().any(|t| t.name == a.ty) {
                want = Err(NumberingError::UnknownType(a.ty.clone()));
                break;
            }
            total += a.max_count as usize;
            if total > MAX_BLOCKS {
                want = Err(NumberingError::TooManyBlocks(total));
                break;
            }
        }
        match Numbering::of(&s) {
            Ok(n) => {
                prop_assert_eq!(want, Ok(()));
                prop_assert_eq!(n.blocks.len(), total);
                prop_assert!(n.blocks.iter().enumerate().all(|(i, b)| b.number as usize == i));
            }
            Err(e) => prop_assert_eq!(Err(e), want),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Validation.
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Validation never panics; every error names a path that starts at a top-level key
    /// and displays; a schema that validates can be numbered.
    #[test]
    fn validate_never_panics(s in any_schema()) {
        let errors = validate(&s);
        for e in &errors {
            let root = match e.path.first() {
                Some(PathSeg::Key(k)) => k.as_str(),
                other => return Err(TestCaseError::fail(format!("bad path root {other:?}"))),
            };
            prop_assert!(["protocol", "node", "limits", "types", "instances"].contains(&root));
            prop_assert!(!e.message.is_empty());
            prop_assert!(e.to_string().contains(&e.message));
        }
        if errors.is_empty() {
            prop_assert!(Numbering::of(&s).is_ok());
        }
    }

    /// The valid-schema generator makes schemas validation accepts (so the defect tests
    /// below start from a clean slate), and they survive the blob.
    #[test]
    fn valid_schemas_validate(s in valid_schema()) {
        prop_assert_eq!(validate(&s), vec![]);
        let back = blob::decode(&blob::encode(&s)).unwrap();
        prop_assert_eq!(validate(&back), vec![]);
        prop_assert_eq!(Numbering::of(&back), Numbering::of(&s));
    }

    /// One defect gives an error at the right key.
    #[test]
    fn defects_are_reported_where_they_are(s in valid_schema(), protocol in any::<u32>(), which in 0u8..10) {
        let mut bad = s.clone();
        let t0 = bad.types[0].name.clone();
        let expected: Vec<String> = match which {
            0 => {
                prop_assume!(protocol != PROTOCOL_VERSION);
                bad.protocol = protocol;
                vec!["protocol".into()]
            }
            1 => {
                bad.node = "1node".into();
                vec!["node".into()]
            }
            2 => {
                bad.limits.max_frames = 0;
                vec!["limits".into(), "max_frames".into()]
            }
            3 => {
                bad.instances.push(InstanceArray { ty: format!("{t0}x"), max_count: 1, ns: "qq".into() });
                vec!["instances".into(), (bad.instances.len() - 1).to_string(), "type".into()]
            }
            4 => {
                bad.instances.push(InstanceArray { ty: t0.clone(), max_count: 0, ns: "qq{i}".into() });
                vec!["instances".into(), (bad.instances.len() - 1).to_string(), "max_count".into()]
            }
            5 => {
                bad.instances.push(InstanceArray { ty: t0.clone(), max_count: 3, ns: "qq".into() });
                vec!["instances".into(), (bad.instances.len() - 1).to_string(), "ns".into()]
            }
            6 => {
                let p = Param { name: "x/y".into(), ty: ScalarType::F32, len: None, default: Scalar::F32(f32::NAN), min: None, max: None };
                bad.types[0].params.push(p);
                vec!["types".into(), t0.clone(), "params".into(), "x/y".into(), "default".into()]
            }
            7 => {
                let p = Param { name: "lim".into(), ty: ScalarType::I16, len: None, default: Scalar::I16(0), min: Some(Scalar::I16(5)), max: Some(Scalar::I16(4)) };
                bad.types[0].params.push(p);
                vec!["types".into(), t0.clone(), "params".into(), "lim".into(), "min".into()]
            }
            8 => {
                let f = Field { name: "v".into(), ty: ScalarType::U8, len: None };
                bad.types[0].topics.push(Topic { name: "cmd".into(), dir: DataDirection::M2s, period_us: 10, fields: vec![f], ros: None });
                vec!["types".into(), t0.clone(), "topics".into(), "cmd".into(), "period_us".into()]
            }
            _ => {
                if bad.types[0].params.is_empty() {
                    bad.types[0].params.push(Param { name: "k".into(), ty: ScalarType::U8, len: None, default: Scalar::U8(0), min: None, max: None });
                }
                let dup = bad.types[0].params[0].clone();
                bad.types[0].params.push(dup.clone());
                vec!["types".into(), t0.clone(), "params".into(), dup.name]
            }
        };
        let want: Vec<&str> = expected.iter().map(String::as_str).collect();
        prop_assert!(has_error_at(&bad, &want), "{:?} not in {:?}", want, validate(&bad));
    }
}

/// Too many blocks in all is reported on `instances`.
#[test]
fn too_many_blocks() {
    let mut s = Schema {
        protocol: PROTOCOL_VERSION,
        node: "n".into(),
        allocation: "static".into(),
        limits: Limits::default(),
        types: vec![BlockType {
            name: "T".into(),
            params: vec![],
            topics: vec![],
            services: vec![],
        }],
        instances: vec![
            InstanceArray {
                ty: "T".into(),
                max_count: 200,
                ns: "a{i}".into(),
            },
            InstanceArray {
                ty: "T".into(),
                max_count: 55,
                ns: "b{i}".into(),
            },
        ],
    };
    assert_eq!(validate(&s), vec![]);
    assert_eq!(Numbering::of(&s).unwrap().blocks.len(), MAX_BLOCKS);
    s.instances[1].max_count = 56;
    assert!(has_error_at(&s, &["instances"]));
    assert_eq!(
        Numbering::of(&s),
        Err(NumberingError::TooManyBlocks(MAX_BLOCKS + 1))
    );
}

// ---------------------------------------------------------------------------------------
// Hash.
// ---------------------------------------------------------------------------------------

proptest! {
    /// A digest prints as 64 hex digits and parses back (either case); its prefix is its
    /// first 8 bytes; anything else does not parse and never panics.
    #[test]
    fn digest_hex_roundtrip(data in prop::collection::vec(any::<u8>(), 0..100), junk in any::<String>()) {
        let d = SchemaDigest::of(&data);
        let text = d.to_string();
        prop_assert_eq!(text.len(), 64);
        prop_assert_eq!(SchemaDigest::from_hex(&text), Some(d));
        prop_assert_eq!(SchemaDigest::from_hex(&text.to_uppercase()), Some(d));
        prop_assert_eq!(&d.prefix().0[..], &d.0[..8]);
        prop_assert!(d.matches(d.prefix()));
        prop_assert_eq!(d.prefix().to_string(), &text[..16]);
        let parsed = SchemaDigest::from_hex(&junk);
        if let Some(p) = parsed {
            prop_assert_eq!(p.to_string(), junk.trim().to_lowercase());
        }
        // 64 bytes that are not all hex digits (multi-byte characters included).
        let mut bad = text.clone();
        bad.replace_range(0..2, "é");
        prop_assert_eq!(bad.len(), 64);
        prop_assert_eq!(SchemaDigest::from_hex(&bad), None);
    }
}

/// A namespace produced twice is reported on the later array and names the earlier one;
/// an array of several instances whose `ns` has no `{i}` is reported on its `ns`.
#[test]
fn duplicate_namespaces_name_the_first_producer() {
    let ty = BlockType {
        name: "T".into(),
        params: vec![],
        topics: vec![],
        services: vec![],
    };
    let arr = |max_count: u32, ns: &str| InstanceArray {
        ty: "T".into(),
        max_count,
        ns: ns.into(),
    };
    let s = Schema {
        protocol: PROTOCOL_VERSION,
        node: "n".into(),
        allocation: "static".into(),
        limits: Limits::default(),
        types: vec![ty],
        instances: vec![arr(3, "m{i}"), arr(1, "x"), arr(2, "m{i}"), arr(2, "y")],
    };
    let errors: Vec<String> = validate(&s).iter().map(|e| e.to_string()).collect();
    assert!(
        errors.iter().any(|e| e.starts_with("instances[2].ns")
            && e.contains("`m0`")
            && e.contains("instances[0]")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("instances[3].ns: ") && e.contains("`y`")),
        "{errors:?}"
    );
    assert!(
        !errors.iter().any(|e| e.starts_with("instances[1]")),
        "{errors:?}"
    );
}

/// Validation stays linear in the number of namespaces: a blob of a thousand arrays of
/// 255 instances each (255,000 namespaces, an 18 KB blob a node could send) is checked
/// quickly. The namespace check used to compare every namespace with every earlier one,
/// which took about a minute on this input in a release build (see docs/fuzzing.md).
#[test]
fn validation_of_many_instance_arrays() {
    let s = Schema {
        protocol: PROTOCOL_VERSION,
        node: "n".into(),
        allocation: "static".into(),
        limits: Limits::default(),
        types: vec![BlockType {
            name: "T".into(),
            params: vec![],
            topics: vec![],
            services: vec![],
        }],
        instances: (0..1000)
            .map(|a| InstanceArray {
                ty: "T".into(),
                max_count: 255,
                ns: format!("a{a}x{{i}}"),
            })
            .collect(),
    };
    let s = blob::decode(&blob::encode(&s)).unwrap();
    let errors = validate(&s);
    // Only the total is wrong: every namespace is distinct.
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, vec![PathSeg::Key("instances".into())]);
    assert_eq!(
        Numbering::of(&s),
        Err(NumberingError::TooManyBlocks(2 * 255))
    );
}
