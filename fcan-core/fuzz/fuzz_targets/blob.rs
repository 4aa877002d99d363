//! A schema blob as the master downloads it from a node: arbitrary bytes.
//!
//! Checks: nothing panics in `blob::decode`, `validate::validate` or `Numbering::of` on
//! whatever decodes; a decoded schema re-encodes to a blob that decodes to the same
//! encoding; errors display.

#![no_main]

use fcan_core::blob;
use fcan_core::numbering::Numbering;
use fcan_core::validate::validate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let schema = match blob::decode(data) {
        Ok(s) => s,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let again = blob::encode(&schema);
    let back = blob::decode(&again).expect("a re-encoded blob decodes");
    assert_eq!(blob::encode(&back), again);

    let errors = validate(&schema);
    for e in &errors {
        assert!(!e.to_string().is_empty());
    }
    match Numbering::of(&schema) {
        Ok(n) => {
            for (i, b) in n.blocks.iter().enumerate() {
                assert_eq!(b.number as usize, i);
                assert_eq!(n.block_number(b.array, b.index), Some(b.number));
                assert!(n.layout_of(b.number).is_some());
            }
        }
        Err(_) => assert!(!errors.is_empty(), "a valid schema must number"),
    }
});
