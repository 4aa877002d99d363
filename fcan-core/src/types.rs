//! Field and parameter types, their sizes, and single values of them.
//!
//! Every value on the wire is little-endian and byte-packed: no alignment, no padding
//! between fields. A fixed array of `len` elements is `len` values back to back.

/// A scalar type a field or parameter can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ScalarType {
    /// One byte, 0 = false, 1 = true; any other byte is invalid.
    Bool = 1,
    /// Unsigned 8-bit integer.
    U8 = 2,
    /// Signed 8-bit integer.
    I8 = 3,
    /// Unsigned 16-bit integer.
    U16 = 4,
    /// Signed 16-bit integer.
    I16 = 5,
    /// Unsigned 32-bit integer.
    U32 = 6,
    /// Signed 32-bit integer.
    I32 = 7,
    /// Unsigned 64-bit integer.
    U64 = 8,
    /// Signed 64-bit integer.
    I64 = 9,
    /// IEEE 754 binary32.
    F32 = 10,
    /// IEEE 754 binary64.
    F64 = 11,
}

impl ScalarType {
    /// Every type, in wire-code order.
    pub const ALL: [ScalarType; 11] = [
        ScalarType::Bool,
        ScalarType::U8,
        ScalarType::I8,
        ScalarType::U16,
        ScalarType::I16,
        ScalarType::U32,
        ScalarType::I32,
        ScalarType::U64,
        ScalarType::I64,
        ScalarType::F32,
        ScalarType::F64,
    ];

    /// Packed size in bytes.
    pub const fn size(self) -> usize {
        match self {
            ScalarType::Bool | ScalarType::U8 | ScalarType::I8 => 1,
            ScalarType::U16 | ScalarType::I16 => 2,
            ScalarType::U32 | ScalarType::I32 | ScalarType::F32 => 4,
            ScalarType::U64 | ScalarType::I64 | ScalarType::F64 => 8,
        }
    }

    /// The schema-language name (`"f32"`, `"bool"`, …).
    pub const fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::U8 => "u8",
            ScalarType::I8 => "i8",
            ScalarType::U16 => "u16",
            ScalarType::I16 => "i16",
            ScalarType::U32 => "u32",
            ScalarType::I32 => "i32",
            ScalarType::U64 => "u64",
            ScalarType::I64 => "i64",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
        }
    }

    /// Parses a schema-language name.
    ///
    /// ```
    /// use fcan_core::types::ScalarType;
    /// assert_eq!(ScalarType::from_name("u16"), Some(ScalarType::U16));
    /// assert_eq!(ScalarType::from_name("float"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<ScalarType> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The wire/blob code of this type.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The type for a wire/blob code.
    pub const fn from_code(code: u8) -> Option<ScalarType> {
        if code >= 1 && code <= 11 {
            Some(Self::ALL[code as usize - 1])
        } else {
            None
        }
    }

    /// Whether the type is `f32` or `f64`.
    pub const fn is_float(self) -> bool {
        matches!(self, ScalarType::F32 | ScalarType::F64)
    }

    /// Whether the type is a signed integer.
    pub const fn is_signed_int(self) -> bool {
        matches!(
            self,
            ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64
        )
    }
}

impl core::fmt::Display for ScalarType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// One scalar value, tagged with its type.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Scalar {
    /// `bool`
    Bool(bool),
    /// `u8`
    U8(u8),
    /// `i8`
    I8(i8),
    /// `u16`
    U16(u16),
    /// `i16`
    I16(i16),
    /// `u32`
    U32(u32),
    /// `i32`
    I32(i32),
    /// `u64`
    U64(u64),
    /// `i64`
    I64(i64),
    /// `f32`
    F32(f32),
    /// `f64`
    F64(f64),
}

/// Why bytes are not a valid value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ValueError {
    /// Fewer bytes than the type needs.
    Truncated,
    /// A `bool` byte other than 0 or 1.
    BadBool,
}

impl core::fmt::Display for ValueError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ValueError::Truncated => f.write_str("value truncated"),
            ValueError::BadBool => f.write_str("bool byte is neither 0 nor 1"),
        }
    }
}

impl Scalar {
    /// The type of this value.
    pub const fn ty(&self) -> ScalarType {
        match self {
            Scalar::Bool(_) => ScalarType::Bool,
            Scalar::U8(_) => ScalarType::U8,
            Scalar::I8(_) => ScalarType::I8,
            Scalar::U16(_) => ScalarType::U16,
            Scalar::I16(_) => ScalarType::I16,
            Scalar::U32(_) => ScalarType::U32,
            Scalar::I32(_) => ScalarType::I32,
            Scalar::U64(_) => ScalarType::U64,
            Scalar::I64(_) => ScalarType::I64,
            Scalar::F32(_) => ScalarType::F32,
            Scalar::F64(_) => ScalarType::F64,
        }
    }

    /// Writes the value little-endian into the front of `out`; returns the bytes written,
    /// or `None` when `out` is too short.
    ///
    /// ```
    /// use fcan_core::types::Scalar;
    /// let mut buf = [0u8; 8];
    /// assert_eq!(Scalar::U16(0x1234).write(&mut buf), Some(2));
    /// assert_eq!(&buf[..2], &[0x34, 0x12]);
    /// ```
    pub fn write(&self, out: &mut [u8]) -> Option<usize> {
        let n = self.ty().size();
        let dst = out.get_mut(..n)?;
        match *self {
            Scalar::Bool(v) => dst[0] = v as u8,
            Scalar::U8(v) => dst[0] = v,
            Scalar::I8(v) => dst[0] = v as u8,
            Scalar::U16(v) => dst.copy_from_slice(&v.to_le_bytes()),
            Scalar::I16(v) => dst.copy_from_slice(&v.to_le_bytes()),
            Scalar::U32(v) => dst.copy_from_slice(&v.to_le_bytes()),
            Scalar::I32(v) => dst.copy_from_slice(&v.to_le_bytes()),
            Scalar::U64(v) => dst.copy_from_slice(&v.to_le_bytes()),
            Scalar::I64(v) => dst.copy_from_slice(&v.to_le_bytes()),
            Scalar::F32(v) => dst.copy_from_slice(&v.to_le_bytes()),
            Scalar::F64(v) => dst.copy_from_slice(&v.to_le_bytes()),
        }
        Some(n)
    }

    /// Reads a value of type `ty` from the front of `bytes`.
    ///
    /// ```
    /// use fcan_core::types::{Scalar, ScalarType, ValueError};
    /// assert_eq!(Scalar::read(ScalarType::I16, &[0xFF, 0xFF]), Ok(Scalar::I16(-1)));
    /// assert_eq!(Scalar::read(ScalarType::Bool, &[2]), Err(ValueError::BadBool));
    /// assert_eq!(Scalar::read(ScalarType::F32, &[0; 3]), Err(ValueError::Truncated));
    /// ```
    #[inline]
    pub fn read(ty: ScalarType, bytes: &[u8]) -> Result<Scalar, ValueError> {
        // `first_chunk` checks the length once per value and needs no indexing.
        macro_rules! le {
            ($t:ty) => {
                <$t>::from_le_bytes(*bytes.first_chunk().ok_or(ValueError::Truncated)?)
            };
        }
        Ok(match ty {
            ScalarType::Bool => match bytes.first() {
                Some(0) => Scalar::Bool(false),
                Some(1) => Scalar::Bool(true),
                Some(_) => return Err(ValueError::BadBool),
                None => return Err(ValueError::Truncated),
            },
            ScalarType::U8 => Scalar::U8(le!(u8)),
            ScalarType::I8 => Scalar::I8(le!(i8)),
            ScalarType::U16 => Scalar::U16(le!(u16)),
            ScalarType::I16 => Scalar::I16(le!(i16)),
            ScalarType::U32 => Scalar::U32(le!(u32)),
            ScalarType::I32 => Scalar::I32(le!(i32)),
            ScalarType::U64 => Scalar::U64(le!(u64)),
            ScalarType::I64 => Scalar::I64(le!(i64)),
            ScalarType::F32 => Scalar::F32(le!(f32)),
            ScalarType::F64 => Scalar::F64(le!(f64)),
        })
    }

    /// The value's packed little-endian bytes in the low bytes of a `u64` (the rest
    /// zero): how descriptor tables hold a default or a bound in flash, for Rust and C
    /// alike. `const`, so generated tables compute it at compile time.
    ///
    /// ```
    /// use fcan_core::types::{Scalar, ScalarType};
    /// assert_eq!(Scalar::F32(1.5).to_bits(), 0x3FC0_0000);
    /// assert_eq!(Scalar::I16(-1).to_bits(), 0xFFFF);
    /// assert_eq!(Scalar::from_bits(ScalarType::I16, 0xFFFF), Ok(Scalar::I16(-1)));
    /// ```
    pub const fn to_bits(self) -> u64 {
        match self {
            Scalar::Bool(v) => v as u64,
            Scalar::U8(v) => v as u64,
            Scalar::I8(v) => v as u8 as u64,
            Scalar::U16(v) => v as u64,
            Scalar::I16(v) => v as u16 as u64,
            Scalar::U32(v) => v as u64,
            Scalar::I32(v) => v as u32 as u64,
            Scalar::U64(v) => v,
            Scalar::I64(v) => v as u64,
            Scalar::F32(v) => v.to_bits() as u64,
            Scalar::F64(v) => v.to_bits(),
        }
    }

    /// The value of type `ty` whose packed bytes are the low bytes of `bits`
    /// ([`Scalar::to_bits`] back); a `bool` other than 0 or 1 is an error.
    pub fn from_bits(ty: ScalarType, bits: u64) -> Result<Scalar, ValueError> {
        let bytes = bits.to_le_bytes();
        Scalar::read(ty, bytes.get(..ty.size()).ok_or(ValueError::Truncated)?)
    }

    /// Whether the value is usable as a number: not NaN and not infinite. Integers and
    /// bools always are.
    pub fn is_finite(&self) -> bool {
        match *self {
            Scalar::F32(v) => v.is_finite(),
            Scalar::F64(v) => v.is_finite(),
            _ => true,
        }
    }

    /// The value widened to `f64` (exact for every type but the 64-bit integers beyond
    /// 2^53, which callers comparing ranges handle through [`Scalar::cmp_value`]).
    pub fn as_f64(&self) -> f64 {
        match *self {
            Scalar::Bool(v) => v as u8 as f64,
            Scalar::U8(v) => v as f64,
            Scalar::I8(v) => v as f64,
            Scalar::U16(v) => v as f64,
            Scalar::I16(v) => v as f64,
            Scalar::U32(v) => v as f64,
            Scalar::I32(v) => v as f64,
            Scalar::U64(v) => v as f64,
            Scalar::I64(v) => v as f64,
            Scalar::F32(v) => v as f64,
            Scalar::F64(v) => v,
        }
    }

    /// Orders two values of the same type exactly (integers compare as integers).
    /// `None` when the types differ or a float is NaN.
    ///
    /// ```
    /// use core::cmp::Ordering;
    /// use fcan_core::types::Scalar;
    /// assert_eq!(Scalar::U64(u64::MAX).cmp_value(&Scalar::U64(u64::MAX - 1)), Some(Ordering::Greater));
    /// assert_eq!(Scalar::F32(f32::NAN).cmp_value(&Scalar::F32(0.0)), None);
    /// ```
    pub fn cmp_value(&self, other: &Scalar) -> Option<core::cmp::Ordering> {
        use Scalar::*;
        match (*self, *other) {
            (Bool(a), Bool(b)) => a.partial_cmp(&b),
            (U8(a), U8(b)) => a.partial_cmp(&b),
            (I8(a), I8(b)) => a.partial_cmp(&b),
            (U16(a), U16(b)) => a.partial_cmp(&b),
            (I16(a), I16(b)) => a.partial_cmp(&b),
            (U32(a), U32(b)) => a.partial_cmp(&b),
            (I32(a), I32(b)) => a.partial_cmp(&b),
            (U64(a), U64(b)) => a.partial_cmp(&b),
            (I64(a), I64(b)) => a.partial_cmp(&b),
            (F32(a), F32(b)) => a.partial_cmp(&b),
            (F64(a), F64(b)) => a.partial_cmp(&b),
            _ => None,
        }
    }

    /// The value as type `ty`, saturating: a number too large or too small for `ty`
    /// becomes its largest or smallest value, a fraction is truncated toward zero, NaN
    /// becomes 0 for an integer (and stays NaN for a float), a bool is 0 or 1 and
    /// becomes `true` from anything but zero (or NaN). Never fails: what a mirror of
    /// commands to feedback needs, where the two fields may be of different types.
    ///
    /// ```
    /// use fcan_core::types::{Scalar, ScalarType};
    /// assert_eq!(Scalar::I32(-5).saturate(ScalarType::U8), Scalar::U8(0));
    /// assert_eq!(Scalar::F32(300.7).saturate(ScalarType::U8), Scalar::U8(255));
    /// assert_eq!(Scalar::F32(-2.9).saturate(ScalarType::I16), Scalar::I16(-2));
    /// assert_eq!(Scalar::F64(1e300).saturate(ScalarType::F32), Scalar::F32(f32::MAX));
    /// assert_eq!(Scalar::U64(u64::MAX).saturate(ScalarType::I64), Scalar::I64(i64::MAX));
    /// assert_eq!(Scalar::U8(3).saturate(ScalarType::Bool), Scalar::Bool(true));
    /// assert_eq!(Scalar::Bool(true).saturate(ScalarType::F32), Scalar::F32(1.0));
    /// ```
    pub fn saturate(&self, ty: ScalarType) -> Scalar {
        // Integers go through i128, which holds every u64 and i64 exactly; floats through
        // f64, whose `as` casts to integers saturate (and send NaN to 0).
        let int: Option<i128> = match *self {
            Scalar::Bool(v) => Some(v as i128),
            Scalar::U8(v) => Some(v as i128),
            Scalar::I8(v) => Some(v as i128),
            Scalar::U16(v) => Some(v as i128),
            Scalar::I16(v) => Some(v as i128),
            Scalar::U32(v) => Some(v as i128),
            Scalar::I32(v) => Some(v as i128),
            Scalar::U64(v) => Some(v as i128),
            Scalar::I64(v) => Some(v as i128),
            Scalar::F32(_) | Scalar::F64(_) => None,
        };
        let f = self.as_f64();
        macro_rules! to_int {
            ($t:ty, $v:ident) => {
                Scalar::$v(match int {
                    Some(i) => i.clamp(<$t>::MIN as i128, <$t>::MAX as i128) as $t,
                    None => f as $t,
                })
            };
        }
        match ty {
            ScalarType::Bool => Scalar::Bool(match int {
                Some(i) => i != 0,
                None => f != 0.0 && !f.is_nan(),
            }),
            ScalarType::U8 => to_int!(u8, U8),
            ScalarType::I8 => to_int!(i8, I8),
            ScalarType::U16 => to_int!(u16, U16),
            ScalarType::I16 => to_int!(i16, I16),
            ScalarType::U32 => to_int!(u32, U32),
            ScalarType::I32 => to_int!(i32, I32),
            ScalarType::U64 => to_int!(u64, U64),
            ScalarType::I64 => to_int!(i64, I64),
            ScalarType::F32 => Scalar::F32(if f.is_finite() {
                f.clamp(f32::MIN as f64, f32::MAX as f64) as f32
            } else {
                f as f32
            }),
            ScalarType::F64 => Scalar::F64(f),
        }
    }
}

/// Why a parameter value is refused. Also the detail of a PARAM_SET NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RangeError {
    /// NaN or ±inf.
    NotFinite,
    /// Below the schema's `min`.
    BelowMin,
    /// Above the schema's `max`.
    AboveMax,
    /// Not the parameter's type.
    WrongType,
}

/// Checks a value against a parameter's type and optional bounds: the rule both the node
/// and the master apply to every parameter write.
///
/// ```
/// use fcan_core::types::{check_range, RangeError, Scalar};
/// let (min, max) = (Some(Scalar::F32(0.0)), Some(Scalar::F32(1.0)));
/// use fcan_core::types::ScalarType::F32;
/// assert_eq!(check_range(F32, &Scalar::F32(0.5), min, max), Ok(()));
/// assert_eq!(check_range(F32, &Scalar::F32(f32::NAN), min, max), Err(RangeError::NotFinite));
/// assert_eq!(check_range(F32, &Scalar::F32(2.0), min, max), Err(RangeError::AboveMax));
/// assert_eq!(check_range(F32, &Scalar::U8(1), None, None), Err(RangeError::WrongType));
/// ```
pub fn check_range(
    ty: ScalarType,
    value: &Scalar,
    min: Option<Scalar>,
    max: Option<Scalar>,
) -> Result<(), RangeError> {
    if value.ty() != ty {
        return Err(RangeError::WrongType);
    }
    if !value.is_finite() {
        return Err(RangeError::NotFinite);
    }
    if let Some(min) = min {
        match value.cmp_value(&min) {
            None => return Err(RangeError::WrongType),
            Some(core::cmp::Ordering::Less) => return Err(RangeError::BelowMin),
            Some(_) => {}
        }
    }
    if let Some(max) = max {
        match value.cmp_value(&max) {
            None => return Err(RangeError::WrongType),
            Some(core::cmp::Ordering::Greater) => return Err(RangeError::AboveMax),
            Some(_) => {}
        }
    }
    Ok(())
}
