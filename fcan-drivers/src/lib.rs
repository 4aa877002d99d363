//! Device drivers for the fcan bus owner.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod mit;
pub mod robstride;
pub mod sim;
