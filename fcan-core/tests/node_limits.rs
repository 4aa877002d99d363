//! Limits a node enforces, checked by `validate` on the schema a master downloads (issue
//! 10, items 9 and 15): the master validates every blob before it plans anything, so a
//! period or a parameter the node cannot take never reaches a FRAME_DEFINE or PARAM_SET.

use fcan_core::blob;
use fcan_core::ir::{BlockType, Field, InstanceArray, Limits, Param, Schema, Topic};
use fcan_core::limits::MAX_PARAM_BYTES;
use fcan_core::msg::DataDirection;
use fcan_core::timing::MAX_PERIOD_US;
use fcan_core::types::{Scalar, ScalarType};
use fcan_core::validate::{validate, PathSeg};

fn schema(period_us: u32, param_len: u32) -> Schema {
    Schema {
        protocol: fcan_core::ir::PROTOCOL_VERSION,
        node: "n".into(),
        allocation: "static".into(),
        limits: Limits::default(),
        types: vec![BlockType {
            name: "T".into(),
            params: vec![Param {
                name: "table".into(),
                ty: ScalarType::U8,
                len: Some(param_len),
                default: Scalar::U8(0),
                min: None,
                max: None,
            }],
            topics: vec![Topic {
                name: "slow".into(),
                dir: DataDirection::S2m,
                period_us,
                fields: vec![Field {
                    name: "x".into(),
                    ty: ScalarType::U8,
                    len: None,
                }],
                ros: None,
            }],
            services: vec![],
        }],
        instances: vec![InstanceArray {
            ty: "T".into(),
            max_count: 1,
            ns: "t".into(),
        }],
    }
}

/// The last key of every error of the schema as the master sees it (through its blob).
fn errors_at(s: &Schema) -> Vec<String> {
    let decoded = blob::decode(&blob::encode(s)).expect("the blob decodes");
    validate(&decoded)
        .into_iter()
        .map(|e| match e.path.last() {
            Some(PathSeg::Key(k)) => k.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn period_boundary() {
    assert!(errors_at(&schema(MAX_PERIOD_US, 1)).is_empty());
    assert!(errors_at(&schema(0, 1)).is_empty());
    for p in [MAX_PERIOD_US + 1, u32::MAX] {
        assert_eq!(errors_at(&schema(p, 1)), ["period_us"], "{p}");
    }
}

#[test]
fn param_size_boundary() {
    assert!(errors_at(&schema(1000, MAX_PARAM_BYTES as u32)).is_empty());
    for len in [MAX_PARAM_BYTES as u32 + 1, 500] {
        assert_eq!(errors_at(&schema(1000, len)), ["len"], "{len}");
    }
    // No overflow into a small size; the node's param arena is over its u16 limit too.
    assert_eq!(
        errors_at(&schema(1000, u32::MAX)),
        ["instances", "len"],
        "u32::MAX"
    );
}
