//! CANopen CiA 402 drives: a servo or stepper drive speaking CiA 301 (NMT, SYNC, EMCY,
//! heartbeat, SDO, PDO) with the CiA 402 device profile, presented as an fcan node.
//!
//! Sources: CiA 301 v4.2.0 (application layer and communication profile: §7.2 the
//! services and their frames, Table 22 SDO abort codes, Table 21 EMCY error codes, §7.3.5
//! the predefined connection set, §7.5.2 the communication objects); CiA 402-2 / IEC
//! 61800-7-201 (device control: the state machine, its statusword table and command
//! coding; the modes of operation) ; CiA 306 (the EDS format). Vectors written by hand
//! from them: `conformance/cia402/`, `fcan-drivers/tests/cia402_*.rs`, and the unit
//! tests of [`state`].
//!
//! - [`wire`]: CiA 301 identifiers and frames, and the PDO COB-IDs the driver moves off
//!   fcan's data plane.
//! - [`sdo`]: the SDO client (the driver's) and server (the simulated drive's).
//! - [`state`]: the CiA 402 state machine as data.
//! - [`eds`]: what a drive's EDS says, or the default dictionary.
//! - the driver ([`Cia402`], [`DRIVER`]): bring-up, SYNC, PDOs, services.
//! - [`sim`]: a simulated drive.
//!
//! **Not done**: SDO block transfer; LSS (node ids are configured, not assigned); the
//! SI unit factors 0x60A8/0x60A9 (velocity is increments/s); homing and interpolated
//! position modes; more than one SYNC per TPDO (transmission types 2–240 are written as
//! 1); the drive's own 0x603F read over SDO (the error code comes from EMCY); reading the
//! drive's parameters into fcan params (the schema has none); choosing the bus's SYNC
//! producer by itself: with several drives on one bus the user gives `sync=off` to all
//! but one (a producer starts its SYNC with its drive's first bring-up, so one whose drive
//! never comes up sends none; a `sync=off` device does not check that another producer is
//! there, nor notice that its SYNC stopped: its drive then holds its last applied target
//! until its own watchdog acts).
mod driver;
pub mod eds;
pub mod sdo;
pub mod sim;
pub mod state;
pub mod wire;
pub use driver::{
    BootStep, Cia402, Mode, BLOB, BOOT_RETRY_US, CONFIRM_US, DRIVER, SDO_TIMEOUT_US, SDO_TRIES,
    WAIT_US, WATCHDOG_DEFAULT_MS, WATCHDOG_MAX_MS,
};
