//! `NodeDesc::check`: the consistency of a descriptor, checked where it is made (the
//! code generator's tests, a PC-side builder) rather than in every firmware's
//! `configure`.

mod common;
use common::*;

use fcan_runtime_nostd::codegen::*;
use fcan_runtime_nostd::*;

fn leak<T>(v: Vec<T>) -> &'static [T] {
    Box::leak(v.into_boxed_slice())
}

#[test]
fn a_consistent_descriptor_passes() {
    assert_eq!(DESC.check(), Ok(()));
}

#[test]
fn each_inconsistency_is_found() {
    let with_blocks = |f: &dyn Fn(&mut BlockDesc)| {
        let mut blocks = DESC.blocks.to_vec();
        f(&mut blocks[1]);
        NodeDesc {
            blocks: leak(blocks),
            ..DESC
        }
    };
    let cases: Vec<(&str, NodeDesc, ConfigError)> = vec![
        (
            "type index out of range",
            with_blocks(&|b| b.type_index = 9),
            ConfigError::BadDesc,
        ),
        (
            "array out of range",
            with_blocks(&|b| b.array = 7),
            ConfigError::BadDesc,
        ),
        (
            "index past the array's max_count",
            with_blocks(&|b| b.index = 3),
            ConfigError::BadDesc,
        ),
        (
            "topic area past the arena",
            with_blocks(&|b| b.topic_offset = 130),
            ConfigError::BadDesc,
        ),
        (
            "staging area past the arena",
            with_blocks(&|b| b.stage_offset = 55),
            ConfigError::BadDesc,
        ),
        (
            "topic slots past the table",
            with_blocks(&|b| b.topic_slot = 18),
            ConfigError::BadDesc,
        ),
        (
            "params past the arena",
            with_blocks(&|b| b.param_offset = 24),
            ConfigError::BadDesc,
        ),
        (
            "more than 256 topic slots",
            NodeDesc {
                topic_slots: 257,
                ..DESC
            },
            ConfigError::BadDesc,
        ),
    ];
    for (what, desc, err) in cases {
        assert_eq!(desc.check(), Err(err), "{what}");
    }
}

#[test]
fn a_parameter_too_large_for_param_set_is_found() {
    let mut types = DESC.types.to_vec();
    let mut params = types[0].params.to_vec();
    params[0].ty = fcan_core::types::ScalarType::U8;
    params[0].count = (CONFIG_REASSEMBLY_BYTES + 1) as u16;
    types[0].params = leak(params);
    let desc = NodeDesc {
        types: leak(types),
        param_bytes: 100_000,
        ..DESC
    };
    assert_eq!(desc.check(), Err(ConfigError::ParamTooLarge));
}
