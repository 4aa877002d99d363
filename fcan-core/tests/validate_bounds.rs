//! Validation of hostile schemas is bounded: the hard caps refuse them before any costly
//! check, the blob-size limit is a schema error, and hints are bounded and absent for
//! blobs from the bus. (Time is measured by `benches/validate.rs`, not asserted here.)

#[path = "support/hostile.rs"]
mod hostile;

use fcan_core::blob::{self, MAX_BLOB_LEN};
use fcan_core::validate::{
    did_you_mean, validate, validate_untrusted, PathSeg, MAX_FIELDS, MAX_NAME_LEN,
};

fn key(k: &str) -> PathSeg {
    PathSeg::Key(k.into())
}

/// Every hostile schema of a blob the protocol carries gets exactly one error, a cap,
/// and the cap's message, not the checks behind it (each of which would report hundreds).
#[test]
fn hostile_schemas_stop_at_a_cap() {
    let s = hostile::long_names(MAX_BLOB_LEN as usize);
    let errors = validate(&s);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .message
            .contains(&format!("names are at most {MAX_NAME_LEN}")),
        "{}",
        errors[0]
    );
    // Shown cut short: an error message is not a copy of a 32 KB name.
    assert!(errors[0].to_string().len() < 300, "{}", errors[0]);

    let s = hostile::duplicate_fields(MAX_BLOB_LEN as usize);
    assert!(blob::encode(&s).len() <= MAX_BLOB_LEN as usize);
    let errors = validate(&s);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0].path,
        vec![key("types"), key("T"), key("topics"), key("t")]
    );
    assert!(errors[0].message.contains(&format!("at most {MAX_FIELDS}")));
}

/// Under the caps, the checks still find what they found: duplicates (now by set), near
/// names, with the same paths.
#[test]
fn duplicates_are_still_found_under_the_caps() {
    let s = hostile::near_identical_params(6000);
    let errors = validate(&s);
    assert!(
        errors
            .iter()
            .any(|e| e.message.starts_with("duplicate name")),
        "{errors:?}"
    );
    assert!(errors.iter().any(|e| e.message.contains("changed mask")));
    let s = hostile::duplicate_fields(2000);
    let dups = validate(&s)
        .iter()
        .filter(|e| e.message == "duplicate field `f`")
        .count();
    assert_eq!(dups, (2000 - 64) / 7 - 1);
}

/// A schema whose blob would exceed the protocol limit is an error (the codegen refuses
/// to produce it); one just under is valid.
#[test]
fn blob_size_limit_is_a_schema_error() {
    let small = hostile::wide_valid(MAX_BLOB_LEN as usize);
    assert!(blob::encode(&small).len() <= MAX_BLOB_LEN as usize);
    assert_eq!(validate(&small), vec![]);
    let big = hostile::wide_valid(2 * MAX_BLOB_LEN as usize);
    let len = blob::encode(&big).len();
    assert!(len > MAX_BLOB_LEN as usize);
    assert_eq!(blob::encoded_len(&big), len);
    let errors = validate(&big);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].message.contains(&format!("{len} bytes"))
            && errors[0].message.contains("MAX_BLOB_LEN"),
        "{}",
        errors[0]
    );
}

/// Hints: bounded in length for every caller, and never computed for a blob from the bus.
#[test]
fn hints_are_bounded_and_absent_for_untrusted_blobs() {
    let long = "a".repeat(MAX_NAME_LEN + 1);
    let longer = format!("{long}b");
    assert_eq!(did_you_mean(&long, [longer.as_str()]), None);
    assert_eq!(did_you_mean("motr", ["motor"]), Some("motor"));

    let mut s = hostile::wide_valid(4000);
    s.instances[0].ty = "Type00".into(); // one letter from Type000
    let full = validate(&s);
    assert!(
        full[0].message.contains("did you mean `Type000`"),
        "{full:?}"
    );
    let first = validate_untrusted(&s).expect("an error");
    assert_eq!(first.path, full[0].path);
    assert!(!first.message.contains("did you mean"), "{first}");
}
