//! What the application reads and writes of a running node: topic values, publishing
//! and parameters, through one [`Context`].
//!
//! The node hands a context to service handlers and to the parameter hook from `poll`
//! (where the node itself is borrowed), and [`crate::Node::context`] makes one between
//! polls, so handlers and the main loop use the same calls. Generated code wraps it
//! into typed per-instance handles.

use crate::desc::NodeDesc;
use crate::error::PublishError;
use crate::state::{Core, ResumeSlot};
use crate::storage::Parts;
use crate::tables::{PlanEntry, PlanFrame, SvcSlot, TopicState};
use crate::topics::{self, TopicRead};
use crate::typed::{Message, Param, ParamType, Received};
use crate::wired::Wired;
use crate::{params, sched};
use fcan_core::msg::DataDirection;
use fcan_core::pack::Reader;
use fcan_core::timing::At;

/// The node's topics and parameters, for the application: read an m2s value, publish an
/// s2m one, read a parameter. Every call checks the block is wired and the index exists.
///
/// ```
/// # use fcan_runtime_nostd::*;
/// # use fcan_runtime_nostd::codegen::*;
/// # fn f<B: Storage, D: Descriptor>(node: &mut Node<B, D>) {
/// let mut cx = node.context();
/// let seen = cx.topic(0, 0).map_or(0, |cmd| cmd.generation);
/// let _ = cx.publish(0, 1, &seen.to_le_bytes());
/// # }
/// ```
pub struct Context<'a> {
    desc: &'static NodeDesc,
    wired: &'a Wired,
    running: bool,
    now: At,
    plan_frames: u16,
    resume: &'a mut ResumeSlot,
    topic: &'a mut [u8],
    params: &'a [u8],
    topics: &'a mut [TopicState],
    frames: &'a mut [PlanFrame],
    entries: &'a [PlanEntry],
}

/// The buffers a [`Context`] does not take: service slots and changed-parameter marks.
pub(crate) struct Rest<'a> {
    pub param_changed: &'a mut [u32],
    pub svc: &'a mut [SvcSlot],
    pub svc_buf: &'a mut [u8],
    pub svc_buf_len: usize,
}

impl<'a> Context<'a> {
    /// Splits a node's state into the application's context and the rest.
    pub(crate) fn split(
        desc: &'static NodeDesc,
        core: &'a mut Core,
        p: Parts<'a>,
    ) -> (Context<'a>, Rest<'a>) {
        let cx = Context {
            desc,
            wired: &core.wired,
            running: core.life.is_running(),
            now: core.now,
            plan_frames: core.plan.frames,
            resume: &mut core.resume,
            topic: p.topic,
            params: p.params,
            topics: p.topics,
            frames: p.frames,
            entries: p.entries,
        };
        let rest = Rest {
            param_changed: p.param_changed,
            svc: p.svc,
            svc_buf: p.svc_buf,
            svc_buf_len: p.svc_buf_len,
        };
        (cx, rest)
    }

    /// The same context for a shorter borrow (to hand to a typed handle and keep this
    /// one).
    pub fn reborrow(&mut self) -> Context<'_> {
        Context {
            desc: self.desc,
            wired: self.wired,
            running: self.running,
            now: self.now,
            plan_frames: self.plan_frames,
            resume: &mut *self.resume,
            topic: &mut *self.topic,
            params: self.params,
            topics: &mut *self.topics,
            frames: &mut *self.frames,
            entries: self.entries,
        }
    }

    /// Whether block `block` is wired on this board.
    pub fn is_wired(&self, block: u8) -> bool {
        self.wired.get(block)
    }

    /// The latest time the application gave the node (µs, wrapping).
    pub fn now_us(&self) -> u32 {
        self.now.0
    }

    /// The current value of a topic of a wired block (m2s: as last received, whole;
    /// s2m: as last published).
    pub fn topic(&self, block: u8, topic: u8) -> Option<TopicRead<'_>> {
        topics::read(self.desc, self.wired, self.topic, self.topics, block, topic)
    }

    /// A topic's value decoded as `T`, with when it arrived; `None` before the first
    /// complete update or when the bytes do not decode.
    pub fn received<T: Message>(&self, block: u8, topic: u8) -> Option<Received<T>> {
        let t = self.topic(block, topic)?;
        if t.generation == 0 {
            return None;
        }
        Some(Received {
            value: T::decode(t.bytes).ok()?,
            generation: t.generation,
            received_at_us: t.received_at_us,
        })
    }

    /// Sets an s2m topic's value. Periodic frames carry it at their next period;
    /// on-commit (`period_us: 0`) frames carrying it go out at the next poll while
    /// running, or at the first chance after START.
    pub fn publish(&mut self, block: u8, topic: u8, bytes: &[u8]) -> Result<(), PublishError> {
        let dest = self.publish_slot(block, topic, bytes.len())?;
        dest.copy_from_slice(bytes);
        self.published(block, topic);
        Ok(())
    }

    /// [`Context::publish`] of a typed value, packed straight into the topic's place.
    pub fn publish_msg<T: Message>(
        &mut self,
        block: u8,
        topic: u8,
        value: &T,
    ) -> Result<(), PublishError> {
        let dest = self.publish_slot(block, topic, T::SIZE)?;
        value.encode(dest).map_err(|_| PublishError::BadLength)?;
        self.published(block, topic);
        Ok(())
    }

    /// A parameter's packed value (`None` for an unknown param or an unwired block).
    pub fn param(&self, block: u8, param: u8) -> Option<&[u8]> {
        params::read(self.desc, self.wired, self.params, block, param)
    }

    /// A parameter's value, typed (`None` for an unwired block or a parameter the block's
    /// type does not have).
    pub fn param_value<T: ParamType, B>(&self, block: u8, param: Param<T, B>) -> Option<T> {
        T::read(&mut Reader::new(self.param(block, param.index())?)).ok()
    }

    /// Where a publish of `len` bytes to `topic` of `block` goes, once every rule allows
    /// it.
    fn publish_slot(
        &mut self,
        block: u8,
        topic: u8,
        len: usize,
    ) -> Result<&mut [u8], PublishError> {
        let (bd, td) = self.desc.block(block).ok_or(PublishError::BadIndex)?;
        let t = td
            .topics
            .get(topic as usize)
            .ok_or(PublishError::BadIndex)?;
        if !self.wired.get(block) {
            return Err(PublishError::NotWired);
        }
        if t.dir != DataDirection::S2m {
            return Err(PublishError::WrongDirection);
        }
        if len != t.size as usize {
            return Err(PublishError::BadLength);
        }
        let start = bd.topic_offset as usize + t.offset as usize;
        self.topic
            .get_mut(start..start + len)
            .ok_or(PublishError::BadIndex)
    }

    /// A new value of `topic` of `block` is in place: count it and schedule its frames.
    fn published(&mut self, block: u8, topic: u8) {
        let Some((bd, _)) = self.desc.block(block) else {
            return;
        };
        let slot = bd.topic_slot.saturating_add(topic as u16);
        if let Some(st) = self.topics.get_mut(slot as usize) {
            st.generation = st.generation.wrapping_add(1).max(1);
            st.received_at = self.now;
            if !self.running {
                st.unsent = true;
            }
        }
        if self.running {
            sched::published(
                self.frames,
                self.entries,
                self.plan_frames,
                self.resume,
                slot,
            );
        }
    }
}
