//! How long a frame occupies the wire: exact bit counts, stuffing included.
//!
//! The model builds the actual bit sequence of each frame (ISO 11898-1:2015 frame formats)
//! and counts the stuff bits that sequence really needs, rather than the worst-case
//! formula:
//!
//! * **Classical CAN** (base and extended format): SOF, identifier, RTR/SRR/IDE, r1/r0,
//!   DLC, data and the 15-bit CRC (computed, so its stuffing is exact) are bit-stuffed: after
//!   five equal bits a complementary bit is inserted, including one after the last CRC bit
//!   when the sequence ends on five equal bits. All bits run at the nominal rate.
//! * **CAN FD** (base and extended): SOF … data are dynamically stuffed the same way. A
//!   stuff condition completed by the last data bit inserts no dynamic stuff bit, because
//!   the fixed stuff bit that opens the CRC field follows anyway. The CRC field is the
//!   4-bit stuff count (3-bit Gray code + parity) and a CRC-17 (payload ≤ 16 bytes) or
//!   CRC-21, with *fixed* stuff bits: one before the stuff count and one after every fourth
//!   bit, i.e. 6 (CRC-17) or 7 (CRC-21). Their values never change the length, so the FD
//!   CRC is not computed.
//! * **Trailer** of every frame, not stuffed: CRC delimiter, ACK slot, ACK delimiter, 7 EOF
//!   bits, 3 intermission bits = 13 bits at the nominal rate.
//! * **Bit-rate switching**: with BRS, the bits after the BRS bit up to the last CRC bit
//!   (ESI, DLC, data, stuff count, CRC, fixed and dynamic stuff bits there) run at the data
//!   rate. The real switch happens at the sample points of BRS and the CRC delimiter; the
//!   model puts it on the bit boundaries, an error below one bit time of each rate.
//!
//! Remote frames do not exist in fcan and are not modelled.

use core::time::Duration;

use fcan_core::frame::{fd_dlc, CanId, Frame};

/// Bits of the unstuffed trailer: CRC delimiter, ACK slot, ACK delimiter, EOF (7), IFS (3).
pub const TRAILER_BITS: u32 = 13;

/// Bits an error frame adds after the point of error: a 6-bit error flag, the 8-bit error
/// delimiter and the 3-bit intermission (the superposition of other nodes' flags is not
/// modelled).
pub const ERROR_FRAME_BITS: u32 = 6 + 8 + 3;

/// The two bit rates of a bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitRates {
    /// Arbitration (nominal) bit rate in bit/s; also the whole frame for Classical CAN and
    /// for FD frames without BRS.
    pub nominal: u32,
    /// Data-phase bit rate in bit/s for CAN FD frames with BRS.
    pub data: u32,
}

impl Default for BitRates {
    /// 1 Mbit/s arbitration, 5 Mbit/s data (the ancestor's buses).
    fn default() -> Self {
        BitRates {
            nominal: 1_000_000,
            data: 5_000_000,
        }
    }
}

impl BitRates {
    /// Time on the wire of `bits`, rounded up to the nanosecond.
    ///
    /// ```
    /// use fcan_transport::sim::{BitRates, FrameBits};
    /// let r = BitRates::default();
    /// let b = FrameBits { nominal: 30, data: 549, stuff: 0 };
    /// assert_eq!(r.duration(b).as_nanos(), 30_000 + 109_800);
    /// ```
    pub fn duration(&self, bits: FrameBits) -> Duration {
        let (n, d) = (self.nominal.max(1) as u128, self.data.max(1) as u128);
        let num = bits.nominal as u128 * 1_000_000_000 * d + bits.data as u128 * 1_000_000_000 * n;
        let den = n * d;
        Duration::from_nanos(num.div_ceil(den) as u64)
    }

    /// Time `frame` occupies the wire, from SOF to the end of intermission.
    pub fn frame_time(&self, frame: &Frame) -> Duration {
        self.duration(frame_bits(frame))
    }
}

/// The bits of one frame on the wire, split by the rate they run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FrameBits {
    /// Bits at the nominal rate (stuff bits included).
    pub nominal: u32,
    /// Bits at the data rate (stuff bits included); 0 without BRS.
    pub data: u32,
    /// How many of all these bits are stuff bits (dynamic and fixed).
    pub stuff: u32,
}

impl FrameBits {
    /// All bits, SOF to the end of intermission.
    pub const fn total(&self) -> u32 {
        self.nominal + self.data
    }
}

/// Longest stuffed region: an extended FD frame up to its last data bit is 553 bits.
const MAX_BITS: usize = 600;

/// The unstuffed bits of a frame region, most significant bit first.
struct Bits {
    bits: [bool; MAX_BITS],
    len: usize,
}

impl Bits {
    fn new() -> Self {
        Bits {
            bits: [false; MAX_BITS],
            len: 0,
        }
    }
    fn push(&mut self, value: u64, width: u32) {
        for i in (0..width).rev() {
            self.bits[self.len] = (value >> i) & 1 == 1;
            self.len += 1;
        }
    }
    fn as_slice(&self) -> &[bool] {
        &self.bits[..self.len]
    }
}

/// CRC-15/CAN (polynomial 0x4599, initial value 0) over a bit sequence.
///
/// ```
/// use fcan_transport::sim::crc15;
/// // The CRC catalogue's check value: CRC-15/CAN of ASCII "123456789".
/// let bits: Vec<bool> = b"123456789".iter()
///     .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1 == 1)).collect();
/// assert_eq!(crc15(&bits), 0x059E);
/// ```
pub fn crc15(bits: &[bool]) -> u16 {
    let mut crc: u16 = 0;
    for &bit in bits {
        let next = bit ^ ((crc >> 14) & 1 == 1);
        crc = (crc << 1) & 0x7FFF;
        if next {
            crc ^= 0x4599;
        }
    }
    crc
}

/// Stuff bits the sequence needs, and how many of them sit after raw bit `split` (i.e.
/// are transmitted after it). `stuff_at_end`: whether five equal bits ending the sequence
/// still get a stuff bit.
fn count_stuff(bits: &[bool], split: usize, stuff_at_end: bool) -> (u32, u32) {
    let (mut total, mut after) = (0, 0);
    let mut last = None;
    let mut run = 0;
    for (i, &b) in bits.iter().enumerate() {
        if Some(b) == last {
            run += 1;
        } else {
            last = Some(b);
            run = 1;
        }
        if run == 5 && (stuff_at_end || i + 1 < bits.len()) {
            total += 1;
            if i >= split {
                after += 1;
            }
            // The stuff bit has the opposite value and starts a new run.
            last = Some(!b);
            run = 1;
        }
    }
    (total, after)
}

/// Counts the bits of `frame` on the wire. See the [module docs](self) for the model.
///
/// ```
/// use fcan_core::frame::{CanId, Frame};
/// use fcan_transport::sim::frame_bits;
/// // Classical, standard ID 0, 8 zero bytes: 98 raw bits + 16 stuff bits + 13 trailer.
/// let f = Frame::classic(CanId::Standard(0), &[0; 8]).unwrap();
/// assert_eq!(frame_bits(&f).total(), 127);
/// ```
pub fn frame_bits(frame: &Frame) -> FrameBits {
    let mut b = Bits::new();
    b.push(0, 1); // SOF
    match frame.id() {
        CanId::Standard(id) => b.push(id as u64 & 0x7FF, 11),
        CanId::Extended(id) => {
            b.push((id as u64 >> 18) & 0x7FF, 11);
            b.push(0b11, 2); // SRR, IDE (recessive)
            b.push(id as u64 & 0x3_FFFF, 18);
        }
    }
    let ext = matches!(frame.id(), CanId::Extended(_));
    if frame.is_fd() {
        if !ext {
            b.push(0, 2); // RRS, IDE
        } else {
            b.push(0, 1); // RRS
        }
        b.push(0b10, 2); // FDF (recessive), res
        let brs_index = b.len;
        b.push(frame.is_brs() as u64, 1);
        b.push(0, 1); // ESI: error active
        let dlc = fd_dlc(frame.len()).unwrap_or(15);
        b.push(dlc as u64, 4);
        for &byte in frame.data() {
            b.push(byte as u64, 8);
        }
        let (dyn_stuff, dyn_after) = count_stuff(b.as_slice(), brs_index, false);
        let crc_len = if frame.len() <= 16 { 17 } else { 21 };
        let crc_field = 4 + crc_len; // stuff count + CRC
        let fixed_stuff = 1 + (crc_field - 1) / 4;
        let raw_nominal = brs_index as u32 + 1; // SOF ..= BRS
        let stuff = dyn_stuff + fixed_stuff;
        if frame.is_brs() {
            let data_bits = (b.len as u32 - raw_nominal) + dyn_after + crc_field + fixed_stuff;
            FrameBits {
                nominal: raw_nominal + (dyn_stuff - dyn_after) + TRAILER_BITS,
                data: data_bits,
                stuff,
            }
        } else {
            FrameBits {
                nominal: b.len as u32 + crc_field + stuff + TRAILER_BITS,
                data: 0,
                stuff,
            }
        }
    } else {
        if !ext {
            b.push(0, 3); // RTR, IDE, r0
        } else {
            b.push(0, 3); // RTR, r1, r0
        }
        b.push(frame.len() as u64, 4);
        for &byte in frame.data() {
            b.push(byte as u64, 8);
        }
        let crc = crc15(b.as_slice());
        b.push(crc as u64, 15);
        let (stuff, _) = count_stuff(b.as_slice(), usize::MAX, true);
        FrameBits {
            nominal: b.len as u32 + stuff + TRAILER_BITS,
            data: 0,
            stuff,
        }
    }
}

/// Bits a CAN FD frame occupies when a Classical-CAN-only node destroys it: everything up
/// to and including the FDF bit (stuffed, nominal rate), then an error frame
/// ([`ERROR_FRAME_BITS`]).
///
/// Where a real classical controller flags the error depends on the frame (it may accept
/// the recessive FDF bit as a reserved bit and only fail on a stuff, form or CRC error
/// later); the model takes the earliest point, so a rejected FD frame costs about 30 bit
/// times.
pub fn fd_rejected_bits(frame: &Frame) -> FrameBits {
    let mut b = Bits::new();
    b.push(0, 1);
    match frame.id() {
        CanId::Standard(id) => {
            b.push(id as u64 & 0x7FF, 11);
            b.push(0, 2);
        }
        CanId::Extended(id) => {
            b.push((id as u64 >> 18) & 0x7FF, 11);
            b.push(0b11, 2);
            b.push(id as u64 & 0x3_FFFF, 18);
            b.push(0, 1);
        }
    }
    b.push(1, 1); // FDF
    let (stuff, _) = count_stuff(b.as_slice(), usize::MAX, false);
    FrameBits {
        nominal: b.len as u32 + stuff + ERROR_FRAME_BITS,
        data: 0,
        stuff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stuffing_counts_stuff_bits_in_runs() {
        // 5 zeros -> one stuff bit; with the stuff bit (1) the next 5 zeros stuff again.
        let zeros = [false; 10];
        assert_eq!(count_stuff(&zeros, usize::MAX, true), (2, 0));
        assert_eq!(count_stuff(&zeros, usize::MAX, false), (1, 0));
        // 1 0 0 0 0 0 : the stuff bit ends a run of 5
        let s = [true, false, false, false, false, false, true];
        assert_eq!(count_stuff(&s, usize::MAX, true), (1, 0));
        // alternating: never
        let alt: Vec<bool> = (0..100).map(|i| i % 2 == 0).collect();
        assert_eq!(count_stuff(&alt, 0, true), (0, 0));
        // the inserted stuff bit counts in the next run: 00000 [1] 1111 -> 5 ones -> stuff
        let s = [
            false, false, false, false, false, true, true, true, true, false,
        ];
        assert_eq!(count_stuff(&s, 3, true), (2, 2));
    }

    #[test]
    fn extended_classic_all_zero() {
        // Extended ID 0, no data. Raw SOF..CRC: SOF 1 + base 11 + SRR/IDE 2 + extension 18
        // + RTR/r1/r0 3 + DLC 4 + CRC 15 = 54 bits:
        //   0 x12 (SOF, base ID) | 11 (SRR, IDE) | 0 x25 (extension, RTR, r1, r0, DLC)
        //   | CRC 0x4610 = 100011000010000
        // Stuffing: 12 zeros -> 2; 25 zeros -> 5 (the last before the CRC's leading 1);
        // the CRC has no run of five. 7 stuff bits, 54 + 7 + 13 = 74 bits.
        let f = Frame::classic(CanId::Extended(0), &[]).unwrap();
        let mut b = Bits::new();
        b.push(0, 12);
        b.push(0b11, 2);
        b.push(0, 25);
        assert_eq!(crc15(b.as_slice()), 0x4610);
        let bits = frame_bits(&f);
        assert_eq!((bits.total(), bits.stuff, bits.data), (74, 7, 0));
    }
}
