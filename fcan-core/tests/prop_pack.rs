//! Property tests of scalar values (`fcan_core::types`) and the packing cursors
//! (`fcan_core::pack`).

use std::cmp::Ordering;

use fcan_core::pack::{OutOfSpace, ReadError, Reader, Writer};
use fcan_core::types::*;
use proptest::prelude::*;
use proptest::sample::select;

fn scalar_type() -> impl Strategy<Value = ScalarType> {
    select(ScalarType::ALL.to_vec())
}

/// Any value of `ty`, NaNs and infinities included.
fn scalar_of(ty: ScalarType) -> BoxedStrategy<Scalar> {
    match ty {
        ScalarType::Bool => any::<bool>().prop_map(Scalar::Bool).boxed(),
        ScalarType::U8 => any::<u8>().prop_map(Scalar::U8).boxed(),
        ScalarType::I8 => any::<i8>().prop_map(Scalar::I8).boxed(),
        ScalarType::U16 => any::<u16>().prop_map(Scalar::U16).boxed(),
        ScalarType::I16 => any::<i16>().prop_map(Scalar::I16).boxed(),
        ScalarType::U32 => any::<u32>().prop_map(Scalar::U32).boxed(),
        ScalarType::I32 => any::<i32>().prop_map(Scalar::I32).boxed(),
        ScalarType::U64 => any::<u64>().prop_map(Scalar::U64).boxed(),
        ScalarType::I64 => any::<i64>().prop_map(Scalar::I64).boxed(),
        ScalarType::F32 => prop_oneof![
            any::<f32>(),
            Just(f32::NAN),
            Just(f32::INFINITY),
            Just(f32::NEG_INFINITY),
            any::<u32>().prop_map(f32::from_bits),
        ]
        .prop_map(Scalar::F32)
        .boxed(),
        ScalarType::F64 => prop_oneof![
            any::<f64>(),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            any::<u64>().prop_map(f64::from_bits),
        ]
        .prop_map(Scalar::F64)
        .boxed(),
    }
}

fn scalar() -> impl Strategy<Value = Scalar> {
    scalar_type().prop_flat_map(scalar_of)
}

/// Bit-exact equality (NaN payloads included).
fn same(a: &Scalar, b: &Scalar) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => x.to_bits() == y.to_bits(),
        (Scalar::F64(x), Scalar::F64(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Little-endian bytes of a value, computed independently of `Scalar::write`.
fn le_bytes(v: &Scalar) -> Vec<u8> {
    match *v {
        Scalar::Bool(b) => vec![b as u8],
        Scalar::U8(x) => x.to_le_bytes().to_vec(),
        Scalar::I8(x) => x.to_le_bytes().to_vec(),
        Scalar::U16(x) => x.to_le_bytes().to_vec(),
        Scalar::I16(x) => x.to_le_bytes().to_vec(),
        Scalar::U32(x) => x.to_le_bytes().to_vec(),
        Scalar::I32(x) => x.to_le_bytes().to_vec(),
        Scalar::U64(x) => x.to_le_bytes().to_vec(),
        Scalar::I64(x) => x.to_le_bytes().to_vec(),
        Scalar::F32(x) => x.to_le_bytes().to_vec(),
        Scalar::F64(x) => x.to_le_bytes().to_vec(),
    }
}

/// One typed read or write, for driving the cursors with arbitrary sequences.
#[derive(Clone, Debug)]
enum Item {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Bytes(Vec<u8>),
    Scalar(Scalar),
}

impl Item {
    fn size(&self) -> usize {
        match self {
            Item::U8(_) | Item::I8(_) | Item::Bool(_) => 1,
            Item::U16(_) | Item::I16(_) => 2,
            Item::U32(_) | Item::I32(_) | Item::F32(_) => 4,
            Item::U64(_) | Item::I64(_) | Item::F64(_) => 8,
            Item::Bytes(b) => b.len(),
            Item::Scalar(s) => s.ty().size(),
        }
    }

    fn write(&self, w: &mut Writer) -> Result<(), OutOfSpace> {
        match self {
            Item::U8(v) => w.u8(*v),
            Item::I8(v) => w.i8(*v),
            Item::U16(v) => w.u16(*v),
            Item::I16(v) => w.i16(*v),
            Item::U32(v) => w.u32(*v),
            Item::I32(v) => w.i32(*v),
            Item::U64(v) => w.u64(*v),
            Item::I64(v) => w.i64(*v),
            Item::F32(v) => w.f32(*v),
            Item::F64(v) => w.f64(*v),
            Item::Bool(v) => w.bool(*v),
            Item::Bytes(b) => w.bytes(b),
            Item::Scalar(s) => w.scalar(s),
        }
    }

    /// Reads an item of the same kind; returns it re-wrapped.
    fn read(&self, r: &mut Reader) -> Result<Item, ReadError> {
        Ok(match self {
            Item::U8(_) => Item::U8(r.u8()?),
            Item::I8(_) => Item::I8(r.i8()?),
            Item::U16(_) => Item::U16(r.u16()?),
            Item::I16(_) => Item::I16(r.i16()?),
            Item::U32(_) => Item::U32(r.u32()?),
            Item::I32(_) => Item::I32(r.i32()?),
            Item::U64(_) => Item::U64(r.u64()?),
            Item::I64(_) => Item::I64(r.i64()?),
            Item::F32(_) => Item::F32(r.f32()?),
            Item::F64(_) => Item::F64(r.f64()?),
            Item::Bool(_) => Item::Bool(r.bool()?),
            Item::Bytes(b) => Item::Bytes(r.bytes(b.len())?.to_vec()),
            Item::Scalar(s) => Item::Scalar(r.scalar(s.ty())?),
        })
    }

    /// Equality with floats compared bit for bit.
    fn same(&self, other: &Item) -> bool {
        match (self, other) {
            (Item::F32(a), Item::F32(b)) => a.to_bits() == b.to_bits(),
            (Item::F64(a), Item::F64(b)) => a.to_bits() == b.to_bits(),
            (Item::Scalar(a), Item::Scalar(b)) => same(a, b),
            (Item::U8(a), Item::U8(b)) => a == b,
            (Item::I8(a), Item::I8(b)) => a == b,
            (Item::U16(a), Item::U16(b)) => a == b,
            (Item::I16(a), Item::I16(b)) => a == b,
            (Item::U32(a), Item::U32(b)) => a == b,
            (Item::I32(a), Item::I32(b)) => a == b,
            (Item::U64(a), Item::U64(b)) => a == b,
            (Item::I64(a), Item::I64(b)) => a == b,
            (Item::Bool(a), Item::Bool(b)) => a == b,
            (Item::Bytes(a), Item::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        any::<u8>().prop_map(Item::U8),
        any::<i8>().prop_map(Item::I8),
        any::<u16>().prop_map(Item::U16),
        any::<i16>().prop_map(Item::I16),
        any::<u32>().prop_map(Item::U32),
        any::<i32>().prop_map(Item::I32),
        any::<u64>().prop_map(Item::U64),
        any::<i64>().prop_map(Item::I64),
        any::<u32>().prop_map(|b| Item::F32(f32::from_bits(b))),
        any::<u64>().prop_map(|b| Item::F64(f64::from_bits(b))),
        any::<bool>().prop_map(Item::Bool),
        prop::collection::vec(any::<u8>(), 0..12).prop_map(Item::Bytes),
        scalar().prop_map(Item::Scalar),
    ]
}

proptest! {
    /// Scalar write → read is the identity for every type (bit-exact for floats), the
    /// bytes are little-endian, and the size is the type's.
    #[test]
    fn scalar_roundtrip(v in scalar(), extra in 0usize..4) {
        let ty = v.ty();
        let mut buf = vec![0xEEu8; ty.size() + extra];
        prop_assert_eq!(v.write(&mut buf), Some(ty.size()));
        prop_assert_eq!(&buf[..ty.size()], &le_bytes(&v)[..]);
        prop_assert!(buf[ty.size()..].iter().all(|&b| b == 0xEE), "wrote past its size");
        let back = Scalar::read(ty, &buf).unwrap();
        prop_assert!(same(&back, &v), "{:?} != {:?}", back, v);
    }

    /// Too short a buffer: `write` gives `None` and touches nothing; `read` is `Truncated`.
    #[test]
    fn scalar_short_buffers(v in scalar()) {
        let ty = v.ty();
        for n in 0..ty.size() {
            let mut buf = vec![0xEEu8; n];
            prop_assert_eq!(v.write(&mut buf), None);
            prop_assert!(buf.iter().all(|&b| b == 0xEE));
            prop_assert_eq!(Scalar::read(ty, &buf), Err(ValueError::Truncated));
        }
    }

    /// Reading any bytes as any type never panics; only a bool byte other than 0/1 or a
    /// short input is refused, and what is read writes back to the same bytes.
    #[test]
    fn scalar_read_arbitrary(ty in scalar_type(), bytes in prop::collection::vec(any::<u8>(), 0..10)) {
        match Scalar::read(ty, &bytes) {
            Ok(v) => {
                prop_assert_eq!(v.ty(), ty);
                let mut out = vec![0u8; ty.size()];
                v.write(&mut out).unwrap();
                prop_assert_eq!(&out[..], &bytes[..ty.size()]);
            }
            Err(ValueError::Truncated) => prop_assert!(bytes.len() < ty.size()),
            Err(ValueError::BadBool) => {
                prop_assert_eq!(ty, ScalarType::Bool);
                prop_assert!(bytes[0] > 1);
            }
        }
    }

    /// A sequence written with a `Writer` reads back with a `Reader`, item by item, at
    /// the same positions.
    #[test]
    fn writer_reader_roundtrip(items in prop::collection::vec(item(), 0..20)) {
        let total: usize = items.iter().map(Item::size).sum();
        let mut buf = vec![0u8; total];
        let mut w = Writer::new(&mut buf);
        for it in &items {
            it.write(&mut w).unwrap();
        }
        prop_assert_eq!(w.position(), total);
        prop_assert!(w.u8(0).is_err(), "the buffer is full");
        let mut r = Reader::new(&buf);
        let mut at = 0;
        for it in &items {
            prop_assert_eq!(r.position(), at);
            let back = it.read(&mut r).unwrap();
            prop_assert!(back.same(it), "{:?} != {:?}", back, it);
            at += it.size();
        }
        prop_assert_eq!(r.position(), total);
        prop_assert!(r.rest().is_empty());
        prop_assert_eq!(r.u8(), Err(ReadError::Truncated));
    }

    /// A `Writer` on any buffer never panics; a write that does not fit fails with
    /// nothing written and the position unchanged.
    #[test]
    fn writer_never_overruns(items in prop::collection::vec(item(), 0..20), cap in 0usize..40) {
        let mut buf = vec![0xEEu8; cap];
        let mut w = Writer::new(&mut buf);
        let mut written = 0;
        for it in &items {
            let before = w.position();
            match it.write(&mut w) {
                Ok(()) => {
                    prop_assert_eq!(w.position(), before + it.size());
                    written = w.position();
                }
                Err(OutOfSpace) => {
                    prop_assert!(before + it.size() > cap);
                    prop_assert_eq!(w.position(), before);
                }
            }
            prop_assert!(w.position() <= cap);
        }
        prop_assert!(buf[written..].iter().all(|&b| b == 0xEE));
    }

    /// A `Reader` over arbitrary bytes never panics; a failed read does not move it, and
    /// `rest` is always what is left.
    #[test]
    fn reader_never_panics(items in prop::collection::vec(item(), 0..30), bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut r = Reader::new(&bytes);
        for it in &items {
            let before = r.position();
            match it.read(&mut r) {
                Ok(_) => prop_assert_eq!(r.position(), before + it.size()),
                Err(ReadError::Truncated) => {
                    prop_assert!(before + it.size() > bytes.len());
                    prop_assert_eq!(r.position(), before);
                }
                Err(ReadError::BadBool) => {
                    prop_assert!(bytes[before] > 1);
                    // The bad byte is consumed by `bool`, not by `scalar`.
                    let moved = if matches!(it, Item::Bool(_)) { 1 } else { 0 };
                    prop_assert_eq!(r.position(), before + moved);
                }
            }
            prop_assert!(r.position() <= bytes.len());
            prop_assert_eq!(r.rest(), &bytes[r.position()..]);
        }
        // Huge lengths are refused, not overflowed.
        prop_assert_eq!(r.bytes(usize::MAX), Err(ReadError::Truncated));
    }

    /// `check_range` agrees with a direct comparison for every integer type and for
    /// finite floats; NaN and infinities are `NotFinite`; other types are `WrongType`.
    #[test]
    fn check_range_matches_comparison(
        (v, lo, hi) in scalar_type().prop_flat_map(|t| (scalar_of(t), scalar_of(t), scalar_of(t))),
        use_min in any::<bool>(),
        use_max in any::<bool>(),
        other in scalar(),
    ) {
        let ty = v.ty();
        let min = use_min.then_some(lo);
        let max = use_max.then_some(hi);
        let got = check_range(ty, &v, min, max);
        let bad_bound = |b: Option<Scalar>| b.is_some_and(|b| b.cmp_value(&v).is_none());
        let want = if !v.is_finite() {
            Err(RangeError::NotFinite)
        } else if bad_bound(min) {
            Err(RangeError::WrongType)
        } else if min.is_some_and(|m| v.cmp_value(&m) == Some(Ordering::Less)) {
            Err(RangeError::BelowMin)
        } else if bad_bound(max) {
            Err(RangeError::WrongType)
        } else if max.is_some_and(|m| v.cmp_value(&m) == Some(Ordering::Greater)) {
            Err(RangeError::AboveMax)
        } else {
            Ok(())
        };
        prop_assert_eq!(got, want);
        if other.ty() != ty {
            prop_assert_eq!(check_range(ty, &other, None, None), Err(RangeError::WrongType));
        }
    }

    /// `cmp_value` orders integers exactly (as `i128`) and floats as IEEE does; it
    /// refuses mixed types.
    #[test]
    fn cmp_value_is_exact(
        (a, b) in scalar_type().prop_flat_map(|t| (scalar_of(t), scalar_of(t))),
        c in scalar(),
    ) {
        let exact = |s: &Scalar| -> Option<i128> {
            Some(match *s {
                Scalar::Bool(v) => v as i128,
                Scalar::U8(v) => v as i128,
                Scalar::I8(v) => v as i128,
                Scalar::U16(v) => v as i128,
                Scalar::I16(v) => v as i128,
                Scalar::U32(v) => v as i128,
                Scalar::I32(v) => v as i128,
                Scalar::U64(v) => v as i128,
                Scalar::I64(v) => v as i128,
                Scalar::F32(_) | Scalar::F64(_) => return None,
            })
        };
        match (exact(&a), exact(&b)) {
            (Some(x), Some(y)) => prop_assert_eq!(a.cmp_value(&b), Some(x.cmp(&y))),
            _ => prop_assert_eq!(a.cmp_value(&b), a.as_f64().partial_cmp(&b.as_f64())),
        }
        if c.ty() != a.ty() {
            prop_assert_eq!(a.cmp_value(&c), None);
        }
        prop_assert_eq!(a.is_finite(), a.as_f64().is_finite());
    }

    /// Type codes and names round-trip; nothing else maps to a type.
    #[test]
    fn scalar_type_codes(code in any::<u8>()) {
        match ScalarType::from_code(code) {
            Some(t) => {
                prop_assert_eq!(t.code(), code);
                prop_assert_eq!(ScalarType::from_name(t.name()), Some(t));
                prop_assert_eq!(t.to_string(), t.name());
            }
            None => prop_assert!(!ScalarType::ALL.iter().any(|t| t.code() == code)),
        }
    }
}

/// Sizes and classes of every type.
#[test]
fn scalar_type_table() {
    for t in ScalarType::ALL {
        let bits: usize = t.name()[1..].parse().unwrap_or(8);
        assert_eq!(t.size() * 8, bits, "{t}");
        assert_eq!(t.is_float(), t.name().starts_with('f'), "{t}");
        assert_eq!(t.is_signed_int(), t.name().starts_with('i'), "{t}");
    }
    assert_eq!(ScalarType::from_name("float"), None);
    assert_eq!(ScalarType::from_name(""), None);
}

/// The integer bounds of an integer type, as i128.
fn int_bounds(ty: ScalarType) -> Option<(i128, i128)> {
    Some(match ty {
        ScalarType::U8 => (0, u8::MAX as i128),
        ScalarType::I8 => (i8::MIN as i128, i8::MAX as i128),
        ScalarType::U16 => (0, u16::MAX as i128),
        ScalarType::I16 => (i16::MIN as i128, i16::MAX as i128),
        ScalarType::U32 => (0, u32::MAX as i128),
        ScalarType::I32 => (i32::MIN as i128, i32::MAX as i128),
        ScalarType::U64 => (0, u64::MAX as i128),
        ScalarType::I64 => (i64::MIN as i128, i64::MAX as i128),
        _ => return None,
    })
}

/// An integer scalar as i128.
fn as_int(s: &Scalar) -> Option<i128> {
    Some(match *s {
        Scalar::Bool(v) => v as i128,
        Scalar::U8(v) => v as i128,
        Scalar::I8(v) => v as i128,
        Scalar::U16(v) => v as i128,
        Scalar::I16(v) => v as i128,
        Scalar::U32(v) => v as i128,
        Scalar::I32(v) => v as i128,
        Scalar::U64(v) => v as i128,
        Scalar::I64(v) => v as i128,
        _ => return None,
    })
}

proptest! {
    /// `saturate` gives a value of the asked type; into its own type it changes nothing
    /// (NaN stays NaN); an integer lands on itself when it fits and on the nearer bound
    /// when it does not.
    #[test]
    fn saturate_clamps(v in scalar_type().prop_flat_map(scalar_of), to in scalar_type()) {
        let out = v.saturate(to);
        prop_assert_eq!(out.ty(), to);
        if to == v.ty() {
            match (v, out) {
                (Scalar::F32(a), Scalar::F32(b)) if a.is_nan() => prop_assert!(b.is_nan()),
                (Scalar::F64(a), Scalar::F64(b)) if a.is_nan() => prop_assert!(b.is_nan()),
                _ => prop_assert_eq!(out, v),
            }
        }
        if let (Some(i), Some((lo, hi))) = (as_int(&v), int_bounds(to)) {
            prop_assert_eq!(as_int(&out), Some(i.clamp(lo, hi)));
        }
        if let (Scalar::F32(_) | Scalar::F64(_), Some((lo, hi))) = (v, int_bounds(to)) {
            let f = v.as_f64();
            let got = as_int(&out).unwrap();
            if f.is_nan() {
                prop_assert_eq!(got, 0);
            } else {
                prop_assert!(got >= lo && got <= hi);
                prop_assert!((got as f64 - f.trunc().clamp(lo as f64, hi as f64)).abs() <= (hi as f64).abs() * f64::EPSILON * 2.0);
            }
        }
    }
}
