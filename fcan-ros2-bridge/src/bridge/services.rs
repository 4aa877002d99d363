//! Services: each node service (a schema service, called on the bus) and each of the
//! node's own services (`node_info`, `reprovision`, the parameter services of
//! `parameters`) on a DDS request reader and reply writer, requests and
//! replies framed as [`Ros2Options::framing`](super::Ros2Options::framing) says. A
//! request that is not one of the framing's is counted and said, never answered; one
//! that does not decode or fails on the bus is answered with the reason where the
//! response type has a place for one.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use fcan_core::id::NodeId;
use fcan_master::api::MasterApi;
use fcan_master::serving::lock;
use fcan_master::NodeInfo;
use fcan_ros2::dynamic::{self, RosValue};
use fcan_ros2::{cdr, rihs, Interfaces};
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use super::{now, NodeGids, Shared, MAX_CALLS_IN_FLIGHT, TARGET};
use crate::dds::{Dds, DdsWriter, Endpoint};
use crate::drops::Pace;
use crate::names::dds_type;
use crate::params::{set_result, NodeParams};
use crate::routes::{ServiceRoute, SERVICE_QOS};
use crate::rpc::{reply, split_request, Framing};

/// The answer of node service `svc` to a request that does not decode: the response
/// type with every field zero, and the reason where it has a place for one
/// (`reprovision`'s `message`, `set_parameters_atomically`'s `reason`).
fn refused_response(store: &Interfaces, svc: &str, response_ty: &str, why: &str) -> RosValue {
    let why = why.replace('\0', "\u{fffd}");
    match svc {
        "reprovision" => RosValue::Msg(vec![RosValue::Bool(false), RosValue::Str(why)]),
        "set_parameters_atomically" => RosValue::Msg(vec![set_result(Err(why))]),
        _ => dynamic::zero(store, response_ty).unwrap_or(RosValue::Msg(vec![])),
    }
}

/// What is said of a request on `name` that cannot be answered for `why` (not a
/// request of `framing`): the framing the bridge reads, and how to change it; `more`
/// is the pace's count since the last time it was said.
fn unanswerable_text(name: &str, why: &str, framing: Framing, more: &str) -> String {
    let framing = match framing {
        Framing::Cyclone => "rmw_cyclonedds's (a 16-byte header before the fields)",
        _ => "Fast DDS's (the request named by its sample identity)",
    };
    format!(
        "{name}: a request that cannot be answered: {why}; this bridge reads requests in {framing} framing (--ros2-rmw){more}"
    )
}

/// What is said of a call on `name` refused for `why`: whether its client got the
/// reason (`answered`: the response type has a `message` to say it).
fn refusal_text(name: &str, why: &str, answered: bool, more: &str) -> String {
    let answered = if answered {
        "answered with the reason"
    } else {
        "not answered: its response type has no `message` to say why"
    };
    format!("{name}: refused: {why}; {answered}{more}")
}

/// `fcan_msgs/srv/NodeInfo`'s response: node `n` as the master sees it.
fn node_info_response(n: &NodeInfo) -> RosValue {
    let j = n.to_json();
    let text = |k: &str| RosValue::Str(j[k].as_str().unwrap_or("").to_string());
    RosValue::Msg(vec![
        RosValue::UInt(u64::from(n.id.get())),
        RosValue::Str(n.name.clone()),
        RosValue::Str(n.phase.to_string()),
        text("state"),
        RosValue::UInt(u64::from(n.boot_id)),
        text("schema"),
        text("schema_source"),
        RosValue::UInt(u64::from(n.errors)),
        text("mode"),
        RosValue::UInt(n.frames as u64),
    ])
}

/// `std_srvs/srv/Trigger`'s response to `reprovision`: success, or why not.
fn reprovision_response(r: Result<(), String>) -> RosValue {
    let (ok, why) = match r {
        Ok(()) => (true, String::new()),
        Err(e) => (false, e),
    };
    RosValue::Msg(vec![RosValue::Bool(ok), RosValue::Str(why)])
}

impl<M: MasterApi, D: Dds> Shared<M, D> {
    /// Starts serving one service: the task owns its request reader and reply writer.
    /// Calls run concurrently, at most [`MAX_CALLS_IN_FLIGHT`] per service (a node
    /// holds few calls at once anyway and answers BUSY beyond them); a request beyond
    /// that waits for one to finish.
    pub(super) fn serve_calls(
        self: &Arc<Self>,
        r: &ServiceRoute,
        gids: &mut NodeGids,
    ) -> Result<JoinHandle<()>, String> {
        let writer = Arc::new(
            self.dds
                .writer(&r.reply_endpoint)
                .map_err(|e| e.to_string())?,
        );
        let reader = self
            .dds
            .reader(&r.request_endpoint)
            .map_err(|e| e.to_string())?;
        gids.readers.push(reader.gid);
        gids.writers.push(writer.gid());
        let mut requests = reader.samples;
        let me = self.clone();
        let route = Arc::new(r.clone());
        Ok(tokio::spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CALLS_IN_FLIGHT));
            let warned = Arc::new(Mutex::new(Pace::default()));
            let mut unanswerable = Pace::default();
            let mut calls = tokio::task::JoinSet::new();
            while let Some(req) = requests.next().await {
                // Finished calls are reaped as new ones come.
                while calls.try_join_next().is_some() {}
                let (id, body) = match split_request(me.opts.framing, &req.cdr, req.id) {
                    Ok(split) => split,
                    Err(e) => {
                        // Not a request in this framing: a client of the other framing,
                        // or garbage. No client to answer: counted and said.
                        me.unanswerable(&route.name, &mut unanswerable, &e.0);
                        continue;
                    }
                };
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (me, route, writer, warned) =
                    (me.clone(), route.clone(), writer.clone(), warned.clone());
                calls.spawn(async move {
                    let _permit = permit;
                    let sample = me.answer(&route, &body, &warned).await;
                    if let Some(b) = sample {
                        let (bytes, related) = reply(&id, &b);
                        if let Err(e) = writer.write(&bytes, related, None) {
                            tracing::warn!(target: TARGET, parent: &me.span, "{}: reply not written: {e}", route.name);
                        }
                    }
                });
            }
        }))
    }

    /// One call: the request decoded, called on the bus, the response encoded; or the
    /// refusal with its reason where the response type can say it.
    async fn answer(
        &self,
        route: &ServiceRoute,
        body: &[u8],
        warned: &Mutex<Pace>,
    ) -> Option<Vec<u8>> {
        let decoded = {
            let store = lock(&self.store);
            cdr::decode(&store, &route.request.0, &route.request.1, body)
        };
        let outcome = match decoded {
            Ok(v) => {
                match tokio::time::timeout(self.opts.call_timeout, self.master.call(&route.name, v))
                    .await
                {
                    Ok(Ok(resp)) => {
                        let store = lock(&self.store);
                        cdr::encode(&store, &route.response.0, &route.response.1, &resp)
                            .map_err(|e| e.to_string())
                    }
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!("no answer within {:?}", self.opts.call_timeout)),
                }
            }
            Err(e) => Err(format!(
                "a {} request that does not fit: {e}",
                route.ros_type
            )),
        };
        match outcome {
            Ok(b) => {
                self.counters.calls.fetch_add(1, Ordering::Relaxed);
                Some(b)
            }
            Err(why) => {
                self.counters.calls_refused.fetch_add(1, Ordering::Relaxed);
                let store = lock(&self.store);
                let reply = cdr::encode_refusal(&store, &route.response.0, &why);
                drop(store);
                let due = lock(warned).due(now());
                if let Some(more) = due {
                    self.warn(
                        &route.name,
                        refusal_text(&route.name, &why, reply.is_some(), &more),
                    );
                }
                reply
            }
        }
    }

    /// Serves one of a node's own services (`/<node>/get_parameters`, `node_info`, …):
    /// requests answered one at a time, from the registry or through the master.
    pub(super) fn serve_node_service(
        self: &Arc<Self>,
        node: &str,
        node_id: NodeId,
        svc: &'static str,
        ty: &'static str,
        params: Arc<NodeParams>,
        gids: &mut NodeGids,
    ) -> Result<JoinHandle<()>, String> {
        // rmw announces the service's hash on both of its endpoints.
        let hash = rihs::type_hash(&lock(&self.store), ty).ok();
        let ep = |topic: String, ty: String| Endpoint {
            topic,
            type_name: dds_type(&ty),
            qos: SERVICE_QOS,
            type_hash: hash,
        };
        let request_ty = format!("{ty}_Request");
        let response_ty = format!("{ty}_Response");
        let writer = self
            .dds
            .writer(&ep(format!("rr/{node}/{svc}Reply"), response_ty.clone()))
            .map_err(|e| e.to_string())?;
        let reader = self
            .dds
            .reader(&ep(format!("rq/{node}/{svc}Request"), request_ty.clone()))
            .map_err(|e| e.to_string())?;
        gids.readers.push(reader.gid);
        gids.writers.push(writer.gid());
        let mut requests = reader.samples;
        let me = self.clone();
        let name = format!("/{node}/{svc}");
        let node = node.to_string();
        Ok(tokio::spawn(async move {
            let mut unanswerable = Pace::default();
            let mut malformed = Pace::default();
            while let Some(req) = requests.next().await {
                let (id, body) = match split_request(me.opts.framing, &req.cdr, req.id) {
                    Ok(split) => split,
                    Err(e) => {
                        me.unanswerable(&name, &mut unanswerable, &e.0);
                        continue;
                    }
                };
                let decoded = dynamic::decode(&lock(&me.store), &request_ty, &body);
                let (response, answered) = match decoded {
                    Ok(request) => (
                        me.node_call(svc, &node, node_id, &params, &request).await,
                        true,
                    ),
                    Err(e) => {
                        // The request names its client: answered, with the reason where
                        // the response has a place for one.
                        me.counters.calls_refused.fetch_add(1, Ordering::Relaxed);
                        let why = format!("a {request_ty} that does not decode: {e}");
                        if let Some(more) = malformed.due(now()) {
                            me.warn(&name, format!("{name}: refused: {why}; answered{more}"));
                        }
                        let refusal = refused_response(&lock(&me.store), svc, &response_ty, &why);
                        (refusal, false)
                    }
                };
                let encoded = dynamic::encode(&lock(&me.store), &response_ty, &response);
                match encoded {
                    Ok(b) => {
                        if answered {
                            me.counters.calls.fetch_add(1, Ordering::Relaxed);
                        }
                        let (bytes, related) = reply(&id, &b);
                        if let Err(e) = writer.write(&bytes, related, None) {
                            tracing::warn!(target: TARGET, parent: &me.span, "{name}: reply not written: {e}");
                        }
                    }
                    Err(e) => tracing::warn!(target: TARGET, parent: &me.span, "{name}: {e}"),
                }
            }
        }))
    }

    /// A service request that cannot be answered (not a request of this framing: no
    /// Cyclone header, no sample identity): counted, and said at `pace`.
    fn unanswerable(&self, name: &str, pace: &mut Pace, why: &str) {
        self.counters.calls_refused.fetch_add(1, Ordering::Relaxed);
        self.counters
            .calls_unanswerable
            .fetch_add(1, Ordering::Relaxed);
        if let Some(more) = pace.due(now()) {
            self.warn(name, unanswerable_text(name, why, self.opts.framing, &more));
        }
    }

    /// The response of node service `svc` (a parameter service, `node_info`,
    /// `reprovision`) of node `id` to `request`.
    async fn node_call(
        &self,
        svc: &str,
        node: &str,
        id: NodeId,
        params: &NodeParams,
        request: &RosValue,
    ) -> RosValue {
        let RosValue::Msg(req) = request else {
            return RosValue::Msg(vec![]);
        };
        match svc {
            "node_info" => {
                let nodes = self.master.nodes().await.unwrap_or_default();
                match nodes.iter().find(|n| n.id == id) {
                    Some(n) => node_info_response(n),
                    None => RosValue::Msg(vec![]),
                }
            }
            "reprovision" => {
                reprovision_response(self.master.reprovision(id).await.map_err(|e| e.to_string()))
            }
            _ => self.param_call(svc, node, params, req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_node_call_says_why_where_its_response_has_a_place() {
        let store = Interfaces::bundled();
        assert_eq!(
            refused_response(
                &store,
                "reprovision",
                "std_srvs/srv/Trigger_Response",
                "bad\0"
            ),
            RosValue::Msg(vec![
                RosValue::Bool(false),
                RosValue::Str("bad\u{fffd}".into())
            ])
        );
        assert_eq!(
            refused_response(
                &store,
                "set_parameters_atomically",
                "rcl_interfaces/srv/SetParametersAtomically_Response",
                "no"
            ),
            RosValue::Msg(vec![set_result(Err("no".into()))])
        );
        // No place for a reason: the response with every field zero (an empty list).
        let zero = refused_response(
            &store,
            "get_parameters",
            "rcl_interfaces/srv/GetParameters_Response",
            "no",
        );
        assert_eq!(zero, RosValue::Msg(vec![RosValue::Seq(vec![])]));
        // A type the store does not know: an empty message.
        assert_eq!(
            refused_response(&store, "node_info", "no_pkg/srv/Nothing_Response", "no"),
            RosValue::Msg(vec![])
        );
    }

    #[test]
    fn an_unanswerable_request_names_the_framing_the_bridge_reads() {
        let t = unanswerable_text("/n/s", "3 bytes", Framing::Cyclone, "");
        assert_eq!(
            t,
            "/n/s: a request that cannot be answered: 3 bytes; this bridge reads requests in rmw_cyclonedds's (a 16-byte header before the fields) framing (--ros2-rmw)"
        );
        let t = unanswerable_text("/n/s", "no id", Framing::FastDds, " (4 more)");
        assert!(
            t.contains("Fast DDS's (the request named by its sample identity)"),
            "{t}"
        );
        assert!(t.ends_with("(--ros2-rmw) (4 more)"), "{t}");
    }

    #[test]
    fn a_refused_call_says_whether_its_client_got_the_reason() {
        assert_eq!(
            refusal_text("/n/s", "busy", true, ""),
            "/n/s: refused: busy; answered with the reason"
        );
        assert_eq!(
            refusal_text("/n/s", "busy", false, " (+2)"),
            "/n/s: refused: busy; not answered: its response type has no `message` to say why (+2)"
        );
    }

    #[test]
    fn reprovision_answers_success_or_the_masters_reason() {
        assert_eq!(
            reprovision_response(Ok(())),
            RosValue::Msg(vec![RosValue::Bool(true), RosValue::Str(String::new())])
        );
        assert_eq!(
            reprovision_response(Err("node 5 is offline".into())),
            RosValue::Msg(vec![
                RosValue::Bool(false),
                RosValue::Str("node 5 is offline".into())
            ])
        );
    }
}
