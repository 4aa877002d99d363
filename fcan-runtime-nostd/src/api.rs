//! What the runtime and the application (through generated code) exchange: service calls
//! and their outcomes, deferred-reply tokens, events, and the transmit interface. Plain
//! data and one driver trait: every other module may use it (the application's trait,
//! which needs the node's `Context`, is in `dispatch`).

use fcan_core::frame::Frame;

/// The driver would not take a frame now (mailboxes or queue full). The runtime keeps the
/// frame and offers it again on a later `poll`, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxRefused;

/// How the runtime hands frames to the CAN controller.
///
/// Implement it for your driver, or use [`crate::ClassicCan`] to wrap an
/// [`embedded_can::nb::Can`] driver (Classical CAN only; embedded-can has no FD trait).
pub trait Transmit {
    /// Queues one frame for transmission. Must not block.
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused>;
}

/// Identifies a service call whose reply was deferred (`Reply::Accepted`). Hand it back
/// to the node with the response to complete the call from a later `poll`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeferredToken {
    /// Service slot holding the call.
    pub slot: u8,
    /// Transfer id of the request (guards against completing a recycled slot).
    pub transfer: u8,
    /// Block the call is for.
    pub block: u8,
    /// Service index.
    pub service: u8,
    /// How many calls the slot had taken when it took this one: a token kept past its
    /// call (completed, expired) never completes a later call in the same slot, even one
    /// with the same transfer id, block and service.
    pub generation: u32,
}

/// One service request, handed to [`crate::codegen::Dispatch::service`] from `poll`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServiceCall<'a> {
    /// Block number (always a wired instance).
    pub block: u8,
    /// Service index within the block's type (always valid).
    pub service: u8,
    /// Packed request, exactly the service's request size.
    pub request: &'a [u8],
    /// The token to keep if the reply is deferred.
    pub token: DeferredToken,
}

/// What a typed handler answers. Generated code turns it into a [`ServiceOutcome`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Reply<T> {
    /// Done now; here is the response.
    Ok(T),
    /// Taken; the response follows later through the node's `complete`. The master is
    /// told ACCEPTED and restarts its timeout.
    Accepted,
    /// Cannot take it now; the master may retry.
    Busy,
    /// The handler failed (APP_ERROR to the master).
    Failed,
}

/// What [`crate::codegen::Dispatch::service`] did with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ServiceOutcome {
    /// The response (this many bytes) was written to the response buffer.
    Done(usize),
    /// Deferred: answer ACCEPTED now and keep the slot until `complete`.
    Accepted,
    /// BUSY.
    Busy,
    /// APP_ERROR.
    Failed,
    /// The request bytes did not decode (BAD_REQUEST).
    BadRequest,
}

/// What the CAN controller (with its driver) can send and receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Controller {
    /// Classical CAN only: the node never sends an FD frame and refuses (NAK
    /// `Unsupported`) an ANNOUNCE_ACK that asks for an FD bus mode.
    Classic,
    /// CAN FD (and Classical CAN): the node offers FD and bit-rate switching.
    Fd,
}

/// Things the application must know about, delivered through [`crate::codegen::Dispatch::event`] from
/// `poll`. Safety-relevant: the application decides its safe state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event {
    /// A master acknowledged the node.
    Acknowledged,
    /// START: data frames flow from now on.
    Started,
    /// No master heartbeat for the master-lost timeout while running: outputs must be
    /// brought to their safe state; the node is SUSPENDED and announces again.
    MasterLost,
    /// Another node answers to this node id: the node is in FAULT and silent.
    IdCollision,
    /// The master cleared the plan (re-provisioning): data frames stop until START.
    PlanReset,
}
