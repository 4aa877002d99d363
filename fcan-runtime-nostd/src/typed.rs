//! The typed layer generated code builds on, written once here rather than emitted for
//! every schema: the packed-message trait, typed deferred replies, received m2s values,
//! typed parameter handles, and turning a handler's [`Reply`] into a [`ServiceOutcome`].
//!
//! A firmware author meets these through the generated module (`motor::Target` is a
//! [`Message`], `motor::PARAM_VELOCITY_KP` a [`Param<f32>`], a handler gets a
//! [`Deferred`]); nothing here depends on a schema.

use core::marker::PhantomData;

use crate::api::{DeferredToken, Reply, ServiceOutcome};
use fcan_core::pack::{OutOfSpace, ReadError, Reader};

/// A packed message: a topic's value, a service request or response. Generated code
/// implements it for every message of the schema.
pub trait Message: Sized {
    /// Packed size in bytes.
    const SIZE: usize;
    /// Packs into the front of `out` (little-endian, back to back); returns the bytes
    /// written.
    fn encode(&self, out: &mut [u8]) -> Result<usize, OutOfSpace>;
    /// Unpacks from the front of `bytes`.
    fn decode(bytes: &[u8]) -> Result<Self, ReadError>;
}

/// A service call whose reply was deferred (the handler returned [`Reply::Accepted`]).
/// Keep it and answer later with the generated node's `complete`; the type parameter
/// makes that answer typed.
pub struct Deferred<T> {
    token: DeferredToken,
    _response: PhantomData<fn() -> T>,
}

impl<T> Deferred<T> {
    /// Wraps the runtime's token (generated dispatch code does this).
    #[doc(hidden)]
    pub fn new(token: DeferredToken) -> Self {
        Deferred {
            token,
            _response: PhantomData,
        }
    }

    /// The runtime's untyped token.
    pub fn token(&self) -> DeferredToken {
        self.token
    }
}

impl<T> Clone for Deferred<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Deferred<T> {}

impl<T> core::fmt::Debug for Deferred<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Deferred").field(&self.token).finish()
    }
}

/// By hand, not derived: a derive would ask `T: defmt::Format` of the response type,
/// which the token never holds.
#[cfg(feature = "defmt")]
impl<T> defmt::Format for Deferred<T> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Deferred({})", self.token)
    }
}

impl<T> PartialEq for Deferred<T> {
    fn eq(&self, other: &Self) -> bool {
        self.token == other.token
    }
}

/// An m2s topic's value with when it arrived.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Received<T> {
    /// The value.
    pub value: T,
    /// How many complete updates the topic has seen (compare with an earlier read to
    /// know whether a command is new).
    pub generation: u32,
    /// The node clock (µs) when it arrived.
    pub received_at_us: u32,
}

impl<T> Received<T> {
    /// Microseconds since it arrived, on the wrapping clock.
    pub fn age_us(&self, now_us: u32) -> u32 {
        now_us.wrapping_sub(self.received_at_us)
    }
}

/// One parameter of a block type, typed: generated code names each one
/// (`motor::PARAM_VELOCITY_KP: Param<f32, motor::MotorParams>`), and a handle of that
/// type reads it with `handle.param(motor::PARAM_VELOCITY_KP)` without decoding the
/// others. `B` names the block type (generated code uses its params struct), so a
/// parameter of another type does not compile there (`()` for raw block numbers).
pub struct Param<T, B = ()> {
    index: u8,
    _value: PhantomData<fn() -> (T, B)>,
}

impl<T, B> Param<T, B> {
    /// The parameter with this index in its type (generated code makes these).
    #[doc(hidden)]
    pub const fn new(index: u8) -> Self {
        Param {
            index,
            _value: PhantomData,
        }
    }

    /// Its index in the type.
    pub const fn index(&self) -> u8 {
        self.index
    }

    /// Its bit in the changed mask a params-changed hook gets.
    pub const fn bit(&self) -> u32 {
        1 << (self.index & 31)
    }
}

impl<T, B> Clone for Param<T, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, B> Copy for Param<T, B> {}

impl<T, B> core::fmt::Debug for Param<T, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Param").field(&self.index).finish()
    }
}

/// By hand, not derived: a derive would ask `T: defmt::Format` and `B: defmt::Format` of
/// the marker types, which the parameter never holds.
#[cfg(feature = "defmt")]
impl<T, B> defmt::Format for Param<T, B> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Param({=u8})", self.index)
    }
}

/// A value a parameter can hold: the schema's scalar types and fixed arrays of them.
pub trait ParamType: Sized + Copy {
    /// Unpacks one value from the front of the reader.
    fn read(r: &mut Reader<'_>) -> Result<Self, ReadError>;
}

macro_rules! param_value {
    ($($t:ident)*) => {$(
        impl ParamType for $t {
            fn read(r: &mut Reader<'_>) -> Result<Self, ReadError> {
                r.$t()
            }
        }
    )*};
}

param_value!(u8 u16 u32 u64 i8 i16 i32 i64 f32 f64 bool);

impl<T: ParamType + Default, const N: usize> ParamType for [T; N] {
    fn read(r: &mut Reader<'_>) -> Result<Self, ReadError> {
        let mut a = [T::default(); N];
        for v in a.iter_mut() {
            *v = T::read(r)?;
        }
        Ok(a)
    }
}

/// Turns a typed handler's reply into what the runtime sends, packing an `Ok` response
/// into `response` (generated dispatch code calls it).
#[doc(hidden)]
pub fn finish<T: Message>(reply: Reply<T>, response: &mut [u8]) -> ServiceOutcome {
    match reply {
        Reply::Ok(v) => match v.encode(response) {
            Ok(n) => ServiceOutcome::Done(n),
            Err(_) => ServiceOutcome::Failed,
        },
        Reply::Accepted => ServiceOutcome::Accepted,
        Reply::Busy => ServiceOutcome::Busy,
        Reply::Failed => ServiceOutcome::Failed,
    }
}
