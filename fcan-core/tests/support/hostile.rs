//! Schemas a hostile node could send, sized to a target blob length, and a large valid
//! one: shared by the validation tests, the master's engine test and the validation
//! benchmark (included with `#[path]`).

#![allow(dead_code)]

use fcan_core::blob;
use fcan_core::ir::*;
use fcan_core::msg::DataDirection;
use fcan_core::types::{Scalar, ScalarType};

fn base(types: Vec<BlockType>, instances: Vec<InstanceArray>) -> Schema {
    Schema {
        protocol: PROTOCOL_VERSION,
        node: "n".into(),
        allocation: "static".into(),
        limits: Limits::default(),
        types,
        instances,
    }
}

fn ty(name: String) -> BlockType {
    BlockType {
        name,
        params: vec![],
        topics: vec![],
        services: vec![],
    }
}

fn one(ty: &str) -> InstanceArray {
    InstanceArray {
        ty: ty.into(),
        max_count: 1,
        ns: "a".into(),
    }
}

/// A type with a name of about half the blob, and an instance array naming a type one
/// letter away: a "did you mean" over them is an edit distance of (size/2)².
pub fn long_names(size: usize) -> Schema {
    let name = format!("T{}", "a".repeat(size / 2 - 16));
    let typo = format!("{name}b");
    base(vec![ty(name)], vec![one(&typo)])
}

/// One topic whose every field is named `f`: duplicates, found by comparing each field
/// with every earlier one in a scan.
pub fn duplicate_fields(size: usize) -> Schema {
    let n = (size - 64) / 7;
    let fields = (0..n)
        .map(|_| Field {
            name: "f".into(),
            ty: ScalarType::U8,
            len: None,
        })
        .collect();
    let mut t = ty("T".into());
    t.topics.push(Topic {
        name: "t".into(),
        dir: DataDirection::M2s,
        period_us: 0,
        fields,
        ros: None,
    });
    base(vec![t], vec![one("T")])
}

/// Thousands of params with long names that differ only at the end, and repeats.
pub fn near_identical_params(size: usize) -> Schema {
    let stem = "p".repeat(100);
    let n = size / 120;
    let params = (0..n)
        .map(|i| Param {
            name: format!("{stem}{}", i % (n / 2).max(1)),
            ty: ScalarType::U8,
            len: None,
            default: Scalar::U8(0),
            min: None,
            max: None,
        })
        .collect();
    let mut t = ty("T".into());
    t.params = params;
    base(vec![t], vec![one("T")])
}

/// A valid schema of at most `size` bytes (as many types as fit): types of ten m2s topics
/// of ten fields, one instance each. Past [`fcan_core::blob::MAX_BLOB_LEN`] it is valid
/// but for its size.
pub fn wide_valid(size: usize) -> Schema {
    let mut s = base(vec![], vec![]);
    for k in 0..200 {
        let name = format!("Type{k:03}");
        let mut t = ty(name.clone());
        for j in 0..10 {
            t.topics.push(Topic {
                name: format!("topic_{j}"),
                dir: DataDirection::M2s,
                period_us: 0,
                fields: (0..10)
                    .map(|f| Field {
                        name: format!("field_number_{f}"),
                        ty: ScalarType::U8,
                        len: None,
                    })
                    .collect(),
                ros: None,
            });
        }
        s.types.push(t);
        s.instances.push(InstanceArray {
            ty: name,
            max_count: 1,
            ns: format!("b{k}"),
        });
        if blob::encoded_len(&s) > size {
            s.types.pop();
            s.instances.pop();
            break;
        }
    }
    s
}
