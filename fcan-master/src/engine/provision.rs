//! Provisioning: the frame plan, FRAME_DEFINE / PARAM_SET / START steps one at a time
//! with retries, their RESULTs, and failing a node or its pending requests.

use super::*;

impl Engine {
    /// Provisions a running (or failed) node again from scratch: a new frame plan, its
    /// FRAME_DEFINEs, the parameters set so far, START. Service calls in flight fail
    /// (`NodeLost`); parameter requests queued wait for the new provisioning. What a
    /// user asks for after changing something the plan depends on, or to recover a
    /// node that a fault left half-configured; the node keeps its boot id, so the
    /// faces keep serving it.
    pub fn reprovision(&mut self, id: NodeId, now: u64) -> Result<(), CallError> {
        let node = id.get();
        let Some(rec) = self.nodes.get_mut(&node) else {
            return Err(CallError::NodeNotOnline(nid(node)));
        };
        if rec.schema.is_none() || !matches!(rec.phase, Phase::Running | Phase::Failed(_)) {
            return Err(CallError::WrongPhase(format!(
                "node {} is {}; only a running or failed node can be provisioned again",
                rec.id, rec.phase
            )));
        }
        requeue_in_flight(rec);
        let plan = rec.plan.take();
        if let Some(plan) = plan {
            self.release_plan(node, &plan);
        }
        self.fail_calls(node, CallError::NodeLost(nid(node)));
        self.begin_provisioning(node, now);
        Ok(())
    }

    pub(super) fn begin_provisioning(&mut self, node: u8, now: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let Some(schema) = rec.schema.clone() else {
            return;
        };
        if rec.plan.is_none() {
            match plan_node(
                &schema.schema,
                &rec.announce.counts,
                rec.mode.mtu(),
                &mut self.ids,
            ) {
                Ok(plan) => {
                    let Some(rec) = self.nodes.get_mut(&node) else {
                        return;
                    };
                    rec.plan = Some(plan);
                }
                Err(e) => {
                    self.fail_node(node, e.to_string());
                    return;
                }
            }
        }
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let Some(plan) = rec.plan.clone() else { return };
        // Topic buffers, zeroed, for every planned topic.
        for f in &plan.frames {
            for e in &f.entries {
                let size = schema
                    .numbering
                    .layout_of(e.block)
                    .and_then(|l| l.topics.get(e.topic as usize))
                    .map_or(0, |l| l.size);
                rec.topics
                    .entry((e.block, e.topic))
                    .or_insert_with(|| vec![0; size]);
            }
        }
        rec.phase = Phase::Provisioning;
        let user: Vec<Step> = rec.steps.drain(..).collect();
        for k in 0..plan.frames.len() {
            rec.steps.push_back(Step::FrameDefine(k));
        }
        let restore: Vec<_> = rec
            .user_params
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        let last = restore.len();
        for (i, ((block, param), value)) in restore.into_iter().enumerate() {
            rec.steps.push_back(Step::ParamSet {
                block,
                param,
                value,
                commit: i + 1 == last,
                req: None,
            });
        }
        rec.steps.push_back(Step::Start);
        rec.steps.extend(user);
        for (fi, f) in plan.frames.iter().enumerate() {
            if let Some(slot) = self.routes.get_mut(f.header.std_id as usize) {
                *slot = Some(Route {
                    node,
                    frame: fi as u16,
                });
            }
        }
        self.next_step(node, now);
    }

    pub(super) fn release_plan(&mut self, node: u8, plan: &Plan) {
        for f in &plan.frames {
            self.ids.release(f.header.std_id);
            if let Some(slot) = self.routes.get_mut(f.header.std_id as usize) {
                if matches!(slot, Some(r) if r.node == node) {
                    *slot = None;
                }
            }
        }
    }

    pub(super) fn next_step(&mut self, node: u8, now: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        if rec.in_flight.is_some() {
            return;
        }
        let Some(step) = rec.steps.pop_front() else {
            return;
        };
        let transfer = rec.transfer();
        rec.in_flight = Some(InFlight {
            step: step.clone(),
            transfer,
            deadline: now + self.cfg.command_timeout_us,
            tries: 0,
        });
        self.send_step(node, &step, transfer);
    }

    pub(super) fn send_step(&mut self, node: u8, step: &Step, transfer: u8) {
        let Some(rec) = self.nodes.get(&node) else {
            return;
        };
        let mtu = rec.mode.mtu();
        let dest = NodeId::new(node).unwrap_or(NodeId::BROADCAST);
        match step {
            Step::FrameDefine(_) | Step::Leave => {
                let k = match step {
                    Step::FrameDefine(k) => *k,
                    _ => 0,
                };
                let Some(f) = rec.plan.as_ref().and_then(|p| p.frames.get(k)).cloned() else {
                    return;
                };
                let msg = ConfigMessage::FrameDefine(FrameDefine {
                    header: f.header,
                    entries: Entries::List(&f.entries),
                });
                self.send(dest, transfer, &msg, mtu);
            }
            Step::ParamSet {
                block,
                param,
                value,
                commit,
                ..
            } => {
                let msg = ConfigMessage::ParamSet(ParamSet {
                    block: *block,
                    param: *param,
                    commit: *commit,
                    value,
                });
                self.send(dest, transfer, &msg, mtu);
            }
            Step::ParamGet { block, param, .. } => {
                let msg = ConfigMessage::ParamGet(ParamGet {
                    block: *block,
                    param: *param,
                });
                self.send(dest, transfer, &msg, mtu);
            }
            Step::Start => {
                let frame_count = rec.plan.as_ref().map_or(0, |p| p.frames.len()) as u8;
                let msg = ConfigMessage::Start(Start {
                    frame_count,
                    master_timeout_ms: self.cfg.master_timeout_ms,
                });
                self.send(dest, transfer, &msg, mtu);
            }
        }
    }

    pub(super) fn on_result(&mut self, node: u8, transfer: u8, r: &CommandResult, at: u64) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        rec.last_seen = at;
        let Some(f) = &rec.in_flight else { return };
        if f.transfer != transfer || step_opcode(&f.step) != r.opcode {
            return;
        }
        let Some(InFlight { step, .. }) = rec.in_flight.take() else {
            return;
        };
        match (step, r.code) {
            // Answered either way: the node stopped (ACK) or will stop by its watchdog.
            (Step::Leave, _) => return,
            (Step::Start, ResultCode::Ok) => {
                rec.reacks = 0;
                rec.phase = Phase::Running;
                // A new run: data frames queued for an earlier one are withdrawn.
                self.run_seq += 1;
                rec.run = self.run_seq;
                rec.state = NodeState::Running;
                self.events.push_back(Event::Online { node: nid(node) });
                self.update_on_online(node, at);
            }
            (
                Step::ParamSet {
                    block,
                    param,
                    value,
                    req,
                    ..
                },
                ResultCode::Ok,
            ) => {
                let changed = req.and(param_changed(node, rec, block, param, &value));
                rec.user_params.insert((block, param), value);
                if let Some(req) = req {
                    self.pending_user.remove(&req);
                    self.events.extend(changed);
                    self.events.push_back(Event::ParamDone {
                        id: req,
                        result: Ok(None),
                    });
                }
            }
            (Step::ParamSet { req: Some(req), .. } | Step::ParamGet { req, .. }, code) => {
                self.pending_user.remove(&req);
                self.events.push_back(Event::ParamDone {
                    id: req,
                    result: Err(CallError::Refused(code)),
                });
            }
            (Step::FrameDefine(_), ResultCode::Ok) => {}
            (
                step @ (Step::FrameDefine(_) | Step::Start | Step::ParamSet { req: None, .. }),
                ResultCode::BadState,
            ) if rec.reacks < 3 => {
                // The node is not acknowledged: our ANNOUNCE_ACK was lost. Ack again
                // and start provisioning over.
                let _ = step;
                rec.reacks += 1;
                let ack = AnnounceAck {
                    boot_id: rec.announce.boot_id,
                    session: self.cfg.session,
                    mode: rec.mode,
                };
                let t = rec.transfer();
                self.send(
                    NodeId::new(node).unwrap_or(NodeId::BROADCAST),
                    t,
                    &ConfigMessage::AnnounceAck(ack),
                    Mtu::Classic,
                );
                self.begin_provisioning(node, at);
                return;
            }
            (step, code) => {
                self.fail_node(node, format!("{step}: {}", CallError::Refused(code)));
                return;
            }
        }
        self.next_step(node, at);
    }

    pub(super) fn fail_node(&mut self, node: u8, reason: String) {
        if let Some(rec) = self.nodes.get_mut(&node) {
            rec.phase = Phase::Failed(reason.clone());
            requeue_in_flight(rec);
        }
        self.fail_user_requests(node, CallError::NodeNotOnline(nid(node)));
        self.update_on_failed(node, &reason);
        self.events.push_back(Event::Failed {
            node: nid(node),
            reason,
        });
    }

    pub(super) fn fail_calls(&mut self, node: u8, err: CallError) {
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let calls = std::mem::take(&mut rec.calls);
        for (_, c) in calls {
            self.pending_user.remove(&c.id);
            self.events.push_back(Event::CallDone {
                id: c.id,
                result: Err(err.clone()),
            });
        }
    }

    pub(super) fn fail_user_requests(&mut self, node: u8, err: CallError) {
        self.fail_calls(node, err.clone());
        let Some(rec) = self.nodes.get_mut(&node) else {
            return;
        };
        let mut failed = Vec::new();
        rec.steps.retain(|s| match user_request(s) {
            Some(req) => {
                failed.push(req);
                false
            }
            None => true,
        });
        for req in failed {
            self.pending_user.remove(&req);
            self.events.push_back(Event::ParamDone {
                id: req,
                result: Err(err.clone()),
            });
        }
    }
}

pub(super) fn step_opcode(step: &Step) -> Opcode {
    match step {
        Step::FrameDefine(_) | Step::Leave => Opcode::FrameDefine,
        Step::ParamSet { .. } => Opcode::ParamSet,
        Step::ParamGet { .. } => Opcode::ParamGet,
        Step::Start => Opcode::Start,
    }
}

/// Clears the step in flight. A user's request goes back to the front of the queue, so
/// it still ends with its `ParamDone` (re-sent after re-provisioning, or failed with the
/// queue) instead of being dropped with its id still pending.
pub(super) fn requeue_in_flight(rec: &mut NodeRecord) {
    if let Some(f) = rec.in_flight.take() {
        if user_request(&f.step).is_some() {
            rec.steps.push_front(f.step);
        }
    }
}

/// The event for a write of `value` to `block`'s param `param` that `node` acknowledged
/// (`None` if its schema does not name it, or the bytes do not decode: neither happens
/// for a write the engine checked).
fn param_changed(node: u8, rec: &NodeRecord, block: u8, param: u8, value: &[u8]) -> Option<Event> {
    let schema = rec.schema.as_ref()?;
    let b = schema.numbering.block(block)?;
    let p = schema
        .schema
        .types
        .get(b.type_index)?
        .params
        .get(param as usize)?;
    let name = fcan_core::numbering::param_path(&schema.schema.node_name(node), &b.ns, &p.name);
    let value = crate::value::unpack_param(p.ty, p.len, value).ok()?;
    Some(Event::ParamChanged {
        node: nid(node),
        name,
        value,
    })
}

pub(super) fn user_request(step: &Step) -> Option<u64> {
    match step {
        Step::ParamSet { req: Some(r), .. } | Step::ParamGet { req: r, .. } => Some(*r),
        _ => None,
    }
}
