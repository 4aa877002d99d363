//! Little-endian, byte-packed cursors over byte slices: the one implementation of packing
//! that message codecs and generated topic/service/param code share.
//!
//! Both cursors are bounds-checked and never panic: running off the end is an error.

use crate::types::{Scalar, ScalarType, ValueError};

/// Ran off the end of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OutOfSpace;

/// Writes values back to back into a byte slice.
///
/// ```
/// use fcan_core::pack::Writer;
/// let mut buf = [0u8; 7];
/// let mut w = Writer::new(&mut buf);
/// w.u8(1).unwrap();
/// w.u16(0x0302).unwrap();
/// w.f32(0.0).unwrap();
/// assert_eq!(w.position(), 7);
/// assert!(w.u8(9).is_err());
/// assert_eq!(buf, [1, 2, 3, 0, 0, 0, 0]);
/// ```
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

macro_rules! put {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Appends a `", stringify!($t), "`.")]
        pub fn $name(&mut self, v: $t) -> Result<(), OutOfSpace> {
            self.bytes(&v.to_le_bytes())
        }
    )*};
}

impl<'a> Writer<'a> {
    /// A writer at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }

    /// Bytes written so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> Result<(), OutOfSpace> {
        let end = self.pos.checked_add(b.len()).ok_or(OutOfSpace)?;
        self.buf
            .get_mut(self.pos..end)
            .ok_or(OutOfSpace)?
            .copy_from_slice(b);
        self.pos = end;
        Ok(())
    }

    /// Appends a `bool` as 0 or 1.
    pub fn bool(&mut self, v: bool) -> Result<(), OutOfSpace> {
        self.u8(v as u8)
    }

    /// Appends a tagged scalar.
    pub fn scalar(&mut self, v: &Scalar) -> Result<(), OutOfSpace> {
        let rest = self.buf.get_mut(self.pos..).ok_or(OutOfSpace)?;
        let n = v.write(rest).ok_or(OutOfSpace)?;
        self.pos += n;
        Ok(())
    }

    put!(u8: u8, i8: i8, u16: u16, i16: i16, u32: u32, i32: i32, u64: u64, i64: i64, f32: f32, f64: f64);
}

/// Why a [`Reader`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReadError {
    /// Ran off the end.
    Truncated,
    /// A `bool` byte other than 0 or 1.
    BadBool,
}

impl From<ValueError> for ReadError {
    fn from(e: ValueError) -> Self {
        match e {
            ValueError::Truncated => ReadError::Truncated,
            ValueError::BadBool => ReadError::BadBool,
        }
    }
}

impl core::fmt::Display for ReadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReadError::Truncated => f.write_str("truncated"),
            ReadError::BadBool => f.write_str("bool byte is neither 0 nor 1"),
        }
    }
}

/// Reads values back to back from a byte slice.
///
/// ```
/// use fcan_core::pack::{Reader, ReadError};
/// let mut r = Reader::new(&[1, 0x34, 0x12, 2]);
/// assert_eq!(r.bool(), Ok(true));
/// assert_eq!(r.u16(), Ok(0x1234));
/// assert_eq!(r.bool(), Err(ReadError::BadBool));
/// ```
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

macro_rules! get {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Reads a `", stringify!($t), "`.")]
        pub fn $name(&mut self) -> Result<$t, ReadError> {
            Ok(<$t>::from_le_bytes(self.array()?))
        }
    )*};
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        let end = self.pos.checked_add(n).ok_or(ReadError::Truncated)?;
        let b = self.buf.get(self.pos..end).ok_or(ReadError::Truncated)?;
        self.pos = end;
        Ok(b)
    }

    /// Takes the next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], ReadError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    /// Reads a `bool` (0 or 1; anything else is an error).
    pub fn bool(&mut self) -> Result<bool, ReadError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ReadError::BadBool),
        }
    }

    /// Reads a scalar of type `ty`.
    pub fn scalar(&mut self, ty: ScalarType) -> Result<Scalar, ReadError> {
        let v = Scalar::read(ty, self.rest())?;
        self.pos += ty.size();
        Ok(v)
    }

    get!(u8: u8, i8: i8, u16: u16, i16: i16, u32: u32, i32: i32, u64: u64, i64: i64, f32: f32, f64: f64);
}
