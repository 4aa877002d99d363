//! Packed values as the runtime and master read them: a `Reader` driven over arbitrary
//! bytes by an arbitrary list of reads.
//!
//! Checks: nothing panics; a failed read leaves the reader where it was (except `bool`,
//! which consumes its bad byte); the position never passes the end and `rest` is what is
//! left; every value read, written back with a `Writer`, gives exactly the bytes it was
//! read from; `check_range` accepts no NaN.

#![no_main]

use arbitrary::Arbitrary;
use fcan_core::pack::{ReadError, Reader, Writer};
use fcan_core::types::{check_range, RangeError, Scalar, ScalarType};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Read {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
    Bool,
    Bytes(u8),
    Scalar(u8),
    Range(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    reads: Vec<Read>,
    data: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let data = &input.data[..];
    let mut r = Reader::new(data);
    let mut out = vec![0u8; data.len()];
    let mut w = Writer::new(&mut out);
    for read in &input.reads {
        let before = r.position();
        let res: Result<(), ReadError> = (|| {
            match read {
                Read::U8 => w.u8(r.u8()?).unwrap(),
                Read::I8 => w.i8(r.i8()?).unwrap(),
                Read::U16 => w.u16(r.u16()?).unwrap(),
                Read::I16 => w.i16(r.i16()?).unwrap(),
                Read::U32 => w.u32(r.u32()?).unwrap(),
                Read::I32 => w.i32(r.i32()?).unwrap(),
                Read::U64 => w.u64(r.u64()?).unwrap(),
                Read::I64 => w.i64(r.i64()?).unwrap(),
                Read::F32 => w.f32(r.f32()?).unwrap(),
                Read::F64 => w.f64(r.f64()?).unwrap(),
                Read::Bool => w.bool(r.bool()?).unwrap(),
                Read::Bytes(n) => w.bytes(r.bytes(*n as usize)?).unwrap(),
                Read::Scalar(code) | Read::Range(code) => {
                    let ty = ScalarType::from_code(code % 12).unwrap_or(ScalarType::F32);
                    let v = r.scalar(ty)?;
                    assert_eq!(v.ty(), ty);
                    w.scalar(&v).unwrap();
                    if matches!(read, Read::Range(_)) {
                        let got = check_range(ty, &v, Some(v), Some(v));
                        if v.is_finite() {
                            assert_eq!(got, Ok(()));
                        } else {
                            assert_eq!(got, Err(RangeError::NotFinite));
                        }
                        if let Scalar::F32(x) = v {
                            assert_eq!(x.is_nan() || x.is_infinite(), got.is_err());
                        }
                    }
                }
            }
            Ok(())
        })();
        match res {
            Ok(()) => assert_eq!(w.position(), r.position()),
            Err(ReadError::Truncated) => assert_eq!(r.position(), before),
            Err(ReadError::BadBool) => {
                let moved = r.position() - before;
                assert!(moved <= 1);
                assert!(data[before] > 1);
                // Keep the writer in step with a bad bool that was consumed.
                if moved == 1 {
                    w.u8(data[before]).unwrap();
                }
            }
        }
        assert!(r.position() <= data.len());
        assert_eq!(r.rest(), &data[r.position()..]);
    }
    let n = w.position();
    assert_eq!(&out[..n], &data[..n]);
});
