//! The transport crate's public errors as a user sees them (issue 11, item 4): each is a
//! `std::error::Error + Send + Sync + 'static`, and says what failed and why.

use fcan_core::frame::Mtu;
use fcan_transport::{BusErrorKind, TransportError};

/// Compiles only for types a thread-crossing error box takes.
fn is_error<E: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn every_public_error_is_a_send_sync_std_error() {
    is_error::<TransportError>();
    is_error::<fcan_transport::candump::ParseError>();
}

#[test]
fn errors_say_what_and_why() {
    let fd = TransportError::FdNotSupported {
        iface: "can0".into(),
        mtu: Mtu::Classic,
    };
    assert_eq!(
        fd.to_string(),
        "can0 is a Classical CAN link: it cannot carry CAN FD frames"
    );
    assert_eq!(
        TransportError::BusError(BusErrorKind::Crc).to_string(),
        "bus error: CRC error"
    );
    // A spec that is not understood lists what is.
    let e = fcan_transport::open("carrier-pigeon", None).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("carrier-pigeon") && text.contains("socketcan:IFACE"),
        "{text}"
    );
    // A malformed log line names its line.
    let e = fcan_transport::candump::parse_log("(1.0) can0 123#00\nnot a line\n").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    assert!(e.to_string().starts_with("line 2: "), "{e}");
}
