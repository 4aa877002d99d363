//! CiA 301 frames against vectors written by hand from the standard (CiA 301 v4.2.0;
//! the table or section of each is named; `conformance/cia402/README.md` lists them):
//! SDO expedited and segmented transfers and aborts, NMT, SYNC, heartbeat, EMCY.

use fcan_core::frame::{CanId, Frame};
use fcan_drivers::cia402::eds::Eds;
use fcan_drivers::cia402::sdo::{AbortCode, Dictionary, SdoClient, SdoServer, Step};
use fcan_drivers::cia402::sim::Od;
use fcan_drivers::cia402::wire::{self, Emcy, NmtCommand, NmtState};

fn f(id: u16, data: &[u8]) -> Frame {
    Frame::classic(CanId::Standard(id), data).unwrap()
}

fn sent(step: Step) -> Frame {
    match step {
        Step::Send(f) => f,
        other => panic!("expected a request, got {other:?}"),
    }
}

/// §7.2.4.3.3 (initiate SDO download, expedited, size indicated: n = 2 → 0x2B) and the
/// response (scs = 3 → 0x60): controlword 0x6040 = 0x000F to node 5.
#[test]
fn expedited_download_of_the_controlword() {
    let mut c = SdoClient::new(5, 100_000);
    let req = c.download(0, 0x6040, 0, &[0x0F, 0x00]);
    assert_eq!(
        req,
        f(0x605, &[0x2B, 0x40, 0x60, 0x00, 0x0F, 0x00, 0x00, 0x00])
    );
    assert_eq!(c.poll_at(), Some(100_000));
    let step = c.on_frame(10, &f(0x585, &[0x60, 0x40, 0x60, 0x00, 0, 0, 0, 0]));
    assert_eq!(step, Step::Done(Vec::new()));
    assert!(!c.busy());
    // 4 bytes: n = 0 → 0x23; 1 byte: n = 3 → 0x2F.
    let req = c.download(0, 0x1016, 1, &[0xC8, 0x00, 0x7F, 0x00]);
    assert_eq!(
        req.data(),
        &[0x23, 0x16, 0x10, 0x01, 0xC8, 0x00, 0x7F, 0x00]
    );
    let req = c.download(0, 0x6060, 0, &[0x08]);
    assert_eq!(req.data(), &[0x2F, 0x60, 0x60, 0x00, 0x08, 0, 0, 0]);
}

/// §7.2.4.3.6 (initiate upload, ccs = 2 → 0x40) and an expedited answer of 2 bytes
/// (scs = 2, n = 2, e = s = 1 → 0x4B): statusword 0x0237.
#[test]
fn expedited_upload_of_the_statusword() {
    let mut c = SdoClient::new(5, 100_000);
    let req = c.upload(0, 0x6041, 0);
    assert_eq!(req, f(0x605, &[0x40, 0x41, 0x60, 0x00, 0, 0, 0, 0]));
    let step = c.on_frame(
        1,
        &f(0x585, &[0x4B, 0x41, 0x60, 0x00, 0x37, 0x02, 0xEE, 0xEE]),
    );
    assert_eq!(step, Step::Done(vec![0x37, 0x02]));
}

/// §7.2.4.3.6–§7.2.4.3.8: a segmented upload of 0x1008 (manufacturer device name,
/// "CiA402 drive", 12 bytes): initiate answer 0x41 with the size, segments toggled
/// 0x60 / 0x70 by the client, answered 0x00 (t 0, 7 bytes) and 0x15 (t 1, n 2, c).
#[test]
fn segmented_upload_of_a_long_object() {
    let mut c = SdoClient::new(5, 100_000);
    c.upload(0, 0x1008, 0);
    let r = sent(c.on_frame(1, &f(0x585, &[0x41, 0x08, 0x10, 0x00, 0x0C, 0, 0, 0])));
    assert_eq!(r, f(0x605, &[0x60, 0, 0, 0, 0, 0, 0, 0]));
    let r = sent(c.on_frame(
        2,
        &f(0x585, &[0x00, b'C', b'i', b'A', b'4', b'0', b'2', b' ']),
    ));
    assert_eq!(r, f(0x605, &[0x70, 0, 0, 0, 0, 0, 0, 0]));
    let step = c.on_frame(3, &f(0x585, &[0x15, b'd', b'r', b'i', b'v', b'e', 0, 0]));
    assert_eq!(step, Step::Done(b"CiA402 drive".to_vec()));
}

/// A segment with the toggle bit not alternated: the client aborts with 0x05030000
/// (§7.2.4.3.17, Table 22), abort frame `80 index sub code-LE`.
#[test]
fn a_toggle_error_is_aborted() {
    let mut c = SdoClient::new(5, 100_000);
    c.upload(0, 0x1008, 0);
    sent(c.on_frame(1, &f(0x585, &[0x41, 0x08, 0x10, 0x00, 0x0C, 0, 0, 0])));
    sent(c.on_frame(2, &f(0x585, &[0x00, 1, 2, 3, 4, 5, 6, 7])));
    // Second segment must carry t = 1; this one says t = 0.
    match c.on_frame(3, &f(0x585, &[0x05, 1, 2, 3, 4, 5, 0, 0])) {
        Step::Failed(e, Some(abort)) => {
            assert_eq!(e.code, AbortCode(0x0503_0000));
            assert!(!e.from_server);
            assert_eq!(
                abort,
                f(0x605, &[0x80, 0x08, 0x10, 0x00, 0x00, 0x00, 0x03, 0x05])
            );
            assert_eq!(e.code.name(), Some("toggle bit not alternated"));
        }
        other => panic!("{other:?}"),
    }
}

/// §7.2.4.3.3–§7.2.4.3.5: a segmented download of 6 bytes (initiate 0x21 with the
/// size; one segment t 0, n 1, c 1 → 0x03; answered 0x60 then 0x20).
#[test]
fn segmented_download() {
    let mut c = SdoClient::new(5, 100_000);
    let r = c.download(0, 0x2000, 0, &[1, 2, 3, 4, 5, 6]);
    assert_eq!(r.data(), &[0x21, 0x00, 0x20, 0x00, 0x06, 0x00, 0x00, 0x00]);
    let r = sent(c.on_frame(1, &f(0x585, &[0x60, 0x00, 0x20, 0x00, 0, 0, 0, 0])));
    assert_eq!(r.data(), &[0x03, 1, 2, 3, 4, 5, 6, 0]);
    assert_eq!(
        c.on_frame(2, &f(0x585, &[0x20, 0, 0, 0, 0, 0, 0, 0])),
        Step::Done(Vec::new())
    );
}

/// The server's abort (§7.2.4.3.17): 0x06020000 "object does not exist", named; a
/// timeout is the client's 0x05040000 with its own abort frame.
#[test]
fn aborts_and_timeouts() {
    let mut c = SdoClient::new(5, 100_000);
    c.download(0, 0x60C2, 1, &[10]);
    match c.on_frame(
        1,
        &f(0x585, &[0x80, 0xC2, 0x60, 0x01, 0x00, 0x00, 0x02, 0x06]),
    ) {
        Step::Failed(e, None) => {
            assert!(e.from_server);
            assert_eq!(e.code, AbortCode::NO_OBJECT);
            assert_eq!(
                e.code.to_string(),
                "object does not exist in the object dictionary (0x06020000)"
            );
        }
        other => panic!("{other:?}"),
    }
    c.upload(0, 0x6041, 0);
    assert_eq!(c.poll(99_999), Step::Ignored);
    match c.poll(100_000) {
        Step::Failed(e, Some(a)) => {
            assert_eq!(e.code.name(), Some("SDO protocol timed out"));
            assert_eq!(a.data(), &[0x80, 0x41, 0x60, 0x00, 0x00, 0x00, 0x04, 0x05]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(AbortCode(0x1234_5678).to_string(), "abort code 0x12345678");
    for (code, name) in [
        (
            0x0504_0001,
            "client/server command specifier not valid or unknown",
        ),
        (0x0601_0000, "unsupported access to an object"),
        (0x0601_0001, "attempt to read a write only object"),
        (0x0601_0002, "attempt to write a read only object"),
        (0x0604_0041, "object cannot be mapped to the PDO"),
        (
            0x0604_0042,
            "the number and length of the objects to be mapped would exceed PDO length",
        ),
        (0x0604_0043, "general parameter incompatibility reason"),
        (
            0x0607_0010,
            "data type does not match, length of service parameter does not match",
        ),
        (0x0609_0011, "sub-index does not exist"),
        (
            0x0609_0030,
            "invalid value for parameter (value range exceeded)",
        ),
        (0x0800_0000, "general error"),
        (
            0x0800_0020,
            "data cannot be transferred or stored to the application",
        ),
    ] {
        assert_eq!(AbortCode(code).name(), Some(name), "{code:#010X}");
    }
    // Answers of another node, or of the wrong length, are not this transfer's.
    c.upload(0, 0x6041, 0);
    assert_eq!(
        c.on_frame(1, &f(0x586, &[0x4B, 0x41, 0x60, 0, 1, 0, 0, 0])),
        Step::Ignored
    );
    assert_eq!(c.on_frame(1, &f(0x585, &[0x4B])), Step::Ignored);
}

/// The server codec answers the same vectors.
#[test]
fn the_server_answers_the_same_vectors() {
    let mut od = Od::new(&Eds::default_dictionary(), 5);
    let mut s = SdoServer::default();
    let a = s.on_request(&[0x2B, 0x40, 0x60, 0x00, 0x0F, 0x00, 0, 0], &mut od);
    assert_eq!(a, Some([0x60, 0x40, 0x60, 0x00, 0, 0, 0, 0]));
    assert_eq!(od.u64(0x6040, 0), Some(0x000F));
    // Statusword is read-only: 0x06010002.
    let a = s.on_request(&[0x2B, 0x41, 0x60, 0x00, 0x0F, 0x00, 0, 0], &mut od);
    assert_eq!(a, Some([0x80, 0x41, 0x60, 0x00, 0x02, 0x00, 0x01, 0x06]));
    // No such object: 0x06020000; no such sub: 0x06090011.
    let a = s.on_request(&[0x40, 0x00, 0x20, 0x00, 0, 0, 0, 0], &mut od);
    assert_eq!(a, Some([0x80, 0x00, 0x20, 0x00, 0x00, 0x00, 0x02, 0x06]));
    let a = s.on_request(&[0x40, 0x8F, 0x60, 0x07, 0, 0, 0, 0], &mut od);
    assert_eq!(a, Some([0x80, 0x8F, 0x60, 0x07, 0x11, 0x00, 0x09, 0x06]));
    // Upload of 0x1018-less dictionary's 0x1000 device type 0x00020192 (CiA 402
    // profile 0x192 = 402, servo drive): expedited 4 bytes, 0x43.
    let a = s.on_request(&[0x40, 0x00, 0x10, 0x00, 0, 0, 0, 0], &mut od);
    assert_eq!(a, Some([0x43, 0x00, 0x10, 0x00, 0x92, 0x01, 0x02, 0x00]));
    // Wrong length for a u16: 0x06070010.
    let a = s.on_request(&[0x2F, 0x40, 0x60, 0x00, 0x0F, 0, 0, 0], &mut od);
    assert_eq!(a, Some([0x80, 0x40, 0x60, 0x00, 0x10, 0x00, 0x07, 0x06]));
    assert_eq!(od.read(0x6040, 0), Ok(vec![0x0F, 0x00]));
}

/// NMT (§7.2.8.3.1: COB-ID 0, `cs node`), SYNC (§7.2.5: 0x080), heartbeat and boot-up
/// (§7.2.8.3.2, Table 49: 0x00 boot-up, 0x04 stopped, 0x05 operational, 0x7F
/// pre-operational).
#[test]
fn nmt_sync_and_heartbeat() {
    assert_eq!(wire::nmt(NmtCommand::Start, 5), f(0x000, &[0x01, 0x05]));
    assert_eq!(wire::nmt(NmtCommand::Stop, 5), f(0x000, &[0x02, 0x05]));
    assert_eq!(
        wire::nmt(NmtCommand::PreOperational, 5),
        f(0x000, &[0x80, 0x05])
    );
    assert_eq!(wire::nmt(NmtCommand::ResetNode, 0), f(0x000, &[0x81, 0x00]));
    assert_eq!(
        wire::nmt(NmtCommand::ResetCommunication, 5),
        f(0x000, &[0x82, 0x05])
    );
    assert_eq!(
        wire::decode_nmt(&f(0, &[0x82, 0x05])),
        Some((NmtCommand::ResetCommunication, 5))
    );
    assert_eq!(wire::decode_nmt(&f(0, &[0x03, 0x05])), None);
    assert_eq!(wire::sync(), f(0x080, &[]));
    assert!(wire::is_sync(&f(0x080, &[7])));
    assert_eq!(wire::heartbeat(5, NmtState::BootUp), f(0x705, &[0x00]));
    assert_eq!(
        wire::decode_heartbeat(&f(0x705, &[0x05])),
        Some((5, NmtState::Operational))
    );
    assert_eq!(
        wire::decode_heartbeat(&f(0x705, &[0x7F])),
        Some((5, NmtState::PreOperational))
    );
    assert_eq!(
        wire::decode_heartbeat(&f(0x705, &[0x04])),
        Some((5, NmtState::Stopped))
    );
    assert_eq!(wire::decode_heartbeat(&f(0x705, &[0x06])), None);
    assert_eq!(
        wire::decode_heartbeat(&f(0x700, &[0x05])),
        None,
        "node 0 is none"
    );
}

/// EMCY (§7.2.7.3.1, Figure 42: code LE, error register, 5 manufacturer bytes; codes
/// from Table 21 and CiA 402-2).
#[test]
fn emcy_frames() {
    let frame = f(0x085, &[0x10, 0x23, 0x03, 1, 2, 3, 4, 5]);
    let (node, e) = wire::decode_emcy(&frame).unwrap();
    assert_eq!(node, 5);
    assert_eq!(
        e,
        Emcy {
            code: 0x2310,
            register: 0x03,
            data: [1, 2, 3, 4, 5]
        }
    );
    assert_eq!(e.class(), "continuous overcurrent");
    assert_eq!(wire::emcy(5, &e), frame);
    assert_eq!(wire::emcy_class(0x8130), "life guard or heartbeat error");
    assert_eq!(wire::emcy_class(0x8611), "following error");
    assert_eq!(wire::emcy_class(0x3210), "DC link overvoltage");
    assert_eq!(wire::emcy_class(0x4310), "excess temperature drive");
    assert_eq!(wire::emcy_class(0x7300), "sensor");
    assert_eq!(wire::emcy_class(0xFF00), "device specific");
    assert_eq!(wire::emcy_class(0x2399), "current");
    assert_eq!(wire::decode_emcy(&f(0x085, &[0x10, 0x23])), None, "short");
    assert_eq!(wire::decode_emcy(&f(0x080, &[0; 8])), None, "SYNC id");
}
