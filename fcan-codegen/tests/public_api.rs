//! The codegen library's errors as a `build.rs` sees them (issue 11, item 4): each is a
//! `std::error::Error + Send + Sync + 'static` and says what is wrong and where.

use fcan_codegen::{BuildError, Builder, Diagnostics};

/// Compiles only for types a thread-crossing error box takes.
fn is_error<E: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn every_public_error_is_a_send_sync_std_error() {
    is_error::<BuildError>();
    is_error::<Diagnostics>();
    is_error::<fcan_codegen::yaml::SyntaxError>();
}

#[test]
fn errors_say_what_and_where() {
    let e = Builder::new().compile().unwrap_err();
    assert_eq!(e.to_string(), "fcan-codegen: no schema files given");
    let e = fcan_codegen::yaml::parse("a: [1, 2\n").unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:{}: YAML syntax error: ",
            e.pos.line, e.pos.col
        )),
        "{text}"
    );
    assert!(e.pos.line >= 1 && !e.message.is_empty(), "{text}");
}
