//! The user's requests: service calls and parameter reads and writes, checked here
//! before anything is sent.

use super::*;

impl Engine {
    pub(super) fn running(&self, node_id: NodeId) -> Result<&NodeRecord, CallError> {
        let node = node_id.get();
        match self.nodes.get(&node) {
            Some(n) if n.phase == Phase::Running || n.phase == Phase::Provisioning => {
                if n.outstanding() >= MAX_OUTSTANDING_REQUESTS {
                    return Err(CallError::TooManyRequests {
                        node: node_id,
                        limit: MAX_OUTSTANDING_REQUESTS,
                    });
                }
                Ok(n)
            }
            _ => Err(CallError::NodeNotOnline(node_id)),
        }
    }

    /// Calls a service. The answer comes as [`Event::CallDone`] with the returned id.
    pub fn call_service(
        &mut self,
        node_id: NodeId,
        block: u8,
        service: u8,
        request: &[u8],
        now: u64,
    ) -> Result<u64, CallError> {
        let node = node_id.get();
        let rec = self.running(node_id)?;
        let schema = rec
            .schema
            .clone()
            .ok_or(CallError::NodeNotOnline(node_id))?;
        let layout = schema
            .numbering
            .layout_of(block)
            .ok_or_else(|| CallError::BadTarget(format!("node {node} has no block {block}")))?;
        let req = layout.requests.get(service as usize).ok_or_else(|| {
            CallError::BadTarget(format!("block {block} has no service {service}"))
        })?;
        if request.len() != req.size {
            return Err(CallError::BadValue(format!(
                "request is {} bytes, the service takes {}",
                request.len(),
                req.size
            )));
        }
        let mtu = rec.mode.mtu();
        let id = self.new_request(node);
        let Some(rec) = self.nodes.get_mut(&node) else {
            return Err(CallError::NodeNotOnline(node_id));
        };
        let transfer = rec.transfer();
        rec.calls.insert(
            transfer,
            PendingCall {
                id,
                block,
                service,
                deadline: now + self.cfg.service_timeout_us,
                accepted: false,
            },
        );
        let msg = ConfigMessage::ServiceRequest(ServiceRequest {
            block,
            service,
            body: request,
        });
        self.send(node_id, transfer, &msg, mtu);
        Ok(id)
    }

    /// Writes a parameter (checked against its type and range here first). The answer
    /// comes as [`Event::ParamDone`]. The value is restored after every reboot.
    pub fn set_param(
        &mut self,
        node_id: NodeId,
        block: u8,
        param: u8,
        value: &[u8],
        now: u64,
    ) -> Result<u64, CallError> {
        let node = node_id.get();
        let rec = self.running(node_id)?;
        check_param_bytes(rec, block, param, value)?;
        let id = self.new_request(node);
        if let Some(rec) = self.nodes.get_mut(&node) {
            rec.steps.push_back(Step::ParamSet {
                block,
                param,
                value: value.to_vec(),
                commit: true,
                req: Some(id),
            });
        }
        self.next_step(node, now);
        Ok(id)
    }

    /// Reads a parameter. The answer comes as [`Event::ParamDone`].
    pub fn get_param(
        &mut self,
        node_id: NodeId,
        block: u8,
        param: u8,
        now: u64,
    ) -> Result<u64, CallError> {
        let node = node_id.get();
        let rec = self.running(node_id)?;
        param_size(rec, block, param)
            .ok_or_else(|| CallError::BadTarget(format!("block {block} has no param {param}")))?;
        let id = self.new_request(node);
        if let Some(rec) = self.nodes.get_mut(&node) {
            rec.steps.push_back(Step::ParamGet {
                block,
                param,
                req: id,
            });
        }
        self.next_step(node, now);
        Ok(id)
    }
}

pub(super) fn param_size(rec: &NodeRecord, block: u8, param: u8) -> Option<usize> {
    let s = rec.schema.as_ref()?;
    s.numbering
        .layout_of(block)?
        .param_sizes
        .get(param as usize)
        .copied()
}

pub(super) fn response_size(rec: &NodeRecord, block: u8, service: u8) -> Option<usize> {
    let s = rec.schema.as_ref()?;
    Some(
        s.numbering
            .layout_of(block)?
            .responses
            .get(service as usize)?
            .size,
    )
}

/// The master's own check of a parameter write: the same rule the node applies.
pub(super) fn check_param_bytes(
    rec: &NodeRecord,
    block: u8,
    param: u8,
    value: &[u8],
) -> Result<(), CallError> {
    let s = rec
        .schema
        .as_ref()
        .ok_or(CallError::NodeNotOnline(rec.id))?;
    let b = s
        .numbering
        .block(block)
        .ok_or_else(|| CallError::BadTarget(format!("no block {block}")))?;
    let p = s.schema.types[b.type_index]
        .params
        .get(param as usize)
        .ok_or_else(|| CallError::BadTarget(format!("block {block} has no param {param}")))?;
    check_param_value(p, value)
}

/// Whether `value` (packed) is a value parameter `p` takes: its size, and each element's
/// type and range, the rule the node applies too ([`check_range`]). Public so a face that
/// sets several parameters together can check them all before it writes any.
///
/// ```
/// use fcan_core::ir::Param;
/// use fcan_core::types::{Scalar, ScalarType};
/// use fcan_master::engine::check_param_value;
/// let p = Param { name: "kp".into(), ty: ScalarType::U8, len: None, default: Scalar::U8(0),
///                 min: None, max: Some(Scalar::U8(10)) };
/// assert!(check_param_value(&p, &[3]).is_ok());
/// assert!(check_param_value(&p, &[11]).unwrap_err().to_string().contains("above its max"));
/// ```
pub fn check_param_value(p: &fcan_core::ir::Param, value: &[u8]) -> Result<(), CallError> {
    if value.len() != p.size() {
        return Err(CallError::BadValue(format!(
            "{} takes {} bytes, got {}",
            p.name,
            p.size(),
            value.len()
        )));
    }
    for chunk in value.chunks(p.ty.size()) {
        let v = Scalar::read(p.ty, chunk)
            .map_err(|e| CallError::BadValue(format!("{}: {e}", p.name)))?;
        check_range(p.ty, &v, p.min, p.max).map_err(|e| {
            CallError::BadValue(match e {
                fcan_core::types::RangeError::NotFinite => format!("{} must be finite", p.name),
                fcan_core::types::RangeError::BelowMin => {
                    format!(
                        "{} = {} is below its min {}",
                        p.name,
                        shown(&v),
                        p.min.as_ref().map_or("?".into(), shown)
                    )
                }
                fcan_core::types::RangeError::AboveMax => {
                    format!(
                        "{} = {} is above its max {}",
                        p.name,
                        shown(&v),
                        p.max.as_ref().map_or("?".into(), shown)
                    )
                }
                fcan_core::types::RangeError::WrongType => format!("{} is not a {}", p.name, p.ty),
            })
        })?;
    }
    Ok(())
}

/// A parameter's element as its type holds it, for messages: an `f32` as the `f32` it is
/// (`100.7`, not `100.69999694824219`), every integer in full.
fn shown(s: &Scalar) -> String {
    match crate::value::Value::from_scalar(*s) {
        crate::value::Value::Float(f) => f.to_string(),
        v => v.to_string(),
    }
}
