//! Linux CAN error frames ↔ [`TransportError`].
//!
//! SocketCAN reports bus trouble as *error frames*: a frame whose identifier carries the
//! `CAN_ERR_FLAG` and an error class bit mask (`linux/can/error.h`), with details in the
//! eight data bytes. The same frames appear in candump logs (`20000040#…`). This module is
//! the one place that classifies them, so the SocketCAN transport and the log replay agree.

use super::error::{BusErrorKind, TransportError};

/// `CAN_ERR_FLAG`: the identifier bit that marks an error frame.
pub const CAN_ERR_FLAG: u32 = 0x2000_0000;
/// `CAN_ERR_MASK`: the error-class bits of an error frame's identifier.
pub const CAN_ERR_MASK: u32 = 0x1FFF_FFFF;

/// Error classes (identifier bits of an error frame).
pub mod class {
    /// TX timeout (by netdevice driver).
    pub const TX_TIMEOUT: u32 = 0x0001;
    /// Lost arbitration (not an error for us).
    pub const LOSTARB: u32 = 0x0002;
    /// Controller problems, details in `data[1]`.
    pub const CRTL: u32 = 0x0004;
    /// Protocol violations, details in `data[2]` (type) and `data[3]` (location).
    pub const PROT: u32 = 0x0008;
    /// Transceiver status, details in `data[4]`.
    pub const TRX: u32 = 0x0010;
    /// No acknowledgement on transmission.
    pub const ACK: u32 = 0x0020;
    /// Bus-off.
    pub const BUSOFF: u32 = 0x0040;
    /// Bus error (may flood).
    pub const BUSERROR: u32 = 0x0080;
    /// Controller restarted.
    pub const RESTARTED: u32 = 0x0100;
}

// data[1]: controller problems.
const CRTL_RX_OVERFLOW: u8 = 0x01;
const CRTL_TX_OVERFLOW: u8 = 0x02;
const CRTL_WARNING_OR_PASSIVE: u8 = 0x04 | 0x08 | 0x10 | 0x20;
// data[2]: protocol violation type.
const PROT_BIT: u8 = 0x01 | 0x08 | 0x10;
const PROT_FORM: u8 = 0x02;
const PROT_STUFF: u8 = 0x04;
// data[3]: protocol violation location.
const LOC_CRC_SEQ: u8 = 0x08;
const LOC_CRC_DEL: u8 = 0x18;

/// Classifies an error frame (`class` = its identifier without `CAN_ERR_FLAG`).
///
/// An error frame may set several class bits; the most severe wins: bus-off, restart,
/// protocol violation, missing ACK, transceiver, TX timeout, controller problem. Returns
/// `None` for frames that are no error for fcan (lost arbitration, "back to error-active",
/// bare counter reports).
///
/// ```
/// use fcan_transport::error_frame::{class, classify};
/// use fcan_transport::TransportError;
/// assert!(matches!(classify(class::BUSOFF | class::CRTL, &[0; 8]), Some(TransportError::BusOff)));
/// assert!(classify(class::LOSTARB, &[0; 8]).is_none());
/// ```
pub fn classify(class: u32, data: &[u8]) -> Option<TransportError> {
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let class = class & CAN_ERR_MASK;
    if class & class::BUSOFF != 0 {
        return Some(TransportError::BusOff);
    }
    if class & class::RESTARTED != 0 {
        return Some(TransportError::Restarted);
    }
    let bus = |k| Some(TransportError::BusError(k));
    if class & class::PROT != 0 {
        let (kind, loc) = (byte(2), byte(3));
        return if loc == LOC_CRC_SEQ || loc == LOC_CRC_DEL {
            bus(BusErrorKind::Crc)
        } else if kind & PROT_BIT != 0 {
            bus(BusErrorKind::Bit)
        } else if kind & PROT_FORM != 0 {
            bus(BusErrorKind::Form)
        } else if kind & PROT_STUFF != 0 {
            bus(BusErrorKind::Stuff)
        } else {
            bus(BusErrorKind::Other)
        };
    }
    if class & class::ACK != 0 {
        return bus(BusErrorKind::NoAck);
    }
    if class & class::TRX != 0 {
        return bus(BusErrorKind::Transceiver);
    }
    if class & class::TX_TIMEOUT != 0 {
        return bus(BusErrorKind::TxTimeout);
    }
    if class & class::CRTL != 0 {
        let d = byte(1);
        if d & (CRTL_RX_OVERFLOW | CRTL_TX_OVERFLOW) != 0 {
            return bus(BusErrorKind::RxOverflow);
        }
        if d & CRTL_WARNING_OR_PASSIVE != 0 {
            return Some(TransportError::ErrorPassive);
        }
        return None;
    }
    if class & class::BUSERROR != 0 {
        return bus(BusErrorKind::Other);
    }
    None
}

/// The error frame (class bits, data) that SocketCAN would deliver for a bus event, so a
/// recorder can log bus events in candump format. `None` for errors that are no bus event.
///
/// ```
/// use fcan_transport::error_frame::{class, classify, to_error_frame};
/// use fcan_transport::{BusErrorKind, TransportError};
/// let (c, d) = to_error_frame(&TransportError::BusError(BusErrorKind::Crc)).unwrap();
/// assert_eq!(c, class::PROT);
/// assert!(matches!(classify(c, &d), Some(TransportError::BusError(BusErrorKind::Crc))));
/// ```
pub fn to_error_frame(err: &TransportError) -> Option<(u32, [u8; 8])> {
    let mut d = [0u8; 8];
    let class = match err {
        TransportError::BusOff => class::BUSOFF,
        TransportError::Restarted => class::RESTARTED,
        TransportError::ErrorPassive => {
            d[1] = 0x10 | 0x20;
            class::CRTL
        }
        TransportError::BusError(kind) => match kind {
            BusErrorKind::Bit => {
                d[2] = 0x01;
                class::PROT
            }
            BusErrorKind::Form => {
                d[2] = PROT_FORM;
                class::PROT
            }
            BusErrorKind::Stuff => {
                d[2] = PROT_STUFF;
                class::PROT
            }
            BusErrorKind::Crc => {
                d[3] = LOC_CRC_SEQ;
                class::PROT
            }
            BusErrorKind::NoAck => class::ACK,
            BusErrorKind::TxTimeout => class::TX_TIMEOUT,
            BusErrorKind::RxOverflow => {
                d[1] = CRTL_RX_OVERFLOW;
                class::CRTL
            }
            BusErrorKind::Transceiver => class::TRX,
            BusErrorKind::Other => class::BUSERROR,
        },
        _ => return None,
    };
    Some((class, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(c: u32, d: [u8; 8]) -> Option<BusErrorKind> {
        match classify(c, &d) {
            Some(TransportError::BusError(k)) => Some(k),
            _ => None,
        }
    }

    #[test]
    fn severity_order_and_details() {
        assert!(matches!(
            classify(class::BUSOFF | class::PROT | class::ACK, &[0; 8]),
            Some(TransportError::BusOff)
        ));
        assert!(matches!(
            classify(class::RESTARTED, &[0; 8]),
            Some(TransportError::Restarted)
        ));
        assert_eq!(
            kind(class::PROT, [0, 0, 0x04, 0x0A, 0, 0, 0, 0]),
            Some(BusErrorKind::Stuff)
        );
        assert_eq!(
            kind(class::PROT, [0, 0, 0x04, 0x08, 0, 0, 0, 0]),
            Some(BusErrorKind::Crc)
        );
        assert_eq!(
            kind(class::PROT, [0, 0, 0x02, 0, 0, 0, 0, 0]),
            Some(BusErrorKind::Form)
        );
        assert_eq!(
            kind(class::PROT, [0, 0, 0x10, 0, 0, 0, 0, 0]),
            Some(BusErrorKind::Bit)
        );
        assert_eq!(kind(class::ACK, [0; 8]), Some(BusErrorKind::NoAck));
        assert_eq!(
            kind(class::CRTL, [0, 0x01, 0, 0, 0, 0, 0, 0]),
            Some(BusErrorKind::RxOverflow)
        );
        assert!(matches!(
            classify(class::CRTL, &[0, 0x20, 0, 0, 0, 0, 0, 0]),
            Some(TransportError::ErrorPassive)
        ));
        // back to error-active, lost arbitration: no error for us
        assert!(classify(class::CRTL, &[0, 0x40, 0, 0, 0, 0, 0, 0]).is_none());
        assert!(classify(class::LOSTARB, &[3, 0, 0, 0, 0, 0, 0, 0]).is_none());
        // short data never panics
        assert!(classify(class::PROT, &[]).is_some());
    }

    #[test]
    fn every_bus_event_roundtrips() {
        use BusErrorKind::*;
        let mut all = vec![
            TransportError::BusOff,
            TransportError::Restarted,
            TransportError::ErrorPassive,
        ];
        for k in [
            Bit,
            Stuff,
            Form,
            Crc,
            NoAck,
            TxTimeout,
            RxOverflow,
            Transceiver,
            Other,
        ] {
            all.push(TransportError::BusError(k));
        }
        for e in all {
            let (c, d) = to_error_frame(&e).unwrap();
            let back = classify(c, &d).unwrap();
            assert_eq!(format!("{back:?}"), format!("{e:?}"));
        }
        assert!(to_error_frame(&TransportError::Closed).is_none());
    }
}
