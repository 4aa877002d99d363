//! Queries from other sessions: services, parameters, node info, plans, reprovisioning,
//! schema blobs, status and registry, each answered within
//! [`ServerOptions::request_timeout`](super::ServerOptions::request_timeout), at most
//! [`ServerOptions::max_in_flight`](super::ServerOptions::max_in_flight) at once.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use fcan_core::hash::SchemaDigest;
use fcan_master::serving::lock;
use fcan_master::value::Value;
use fcan_master::MasterApi;
use serde_json::Value as Json;
use zenoh::key_expr::KeyExpr;
use zenoh::query::Query;

use crate::keys::{self, Entity};
use crate::wire::{kind, param_reply, registry_json, ErrorReply};

use super::forward::is_wild;
use super::Shared;

/// Which queryable a query arrived on.
#[derive(Clone, Copy, Debug)]
pub(super) enum QKind {
    Service,
    Param,
    Node,
    Plan,
    Reprovision,
    Schema,
    Status,
    Registry,
}

impl<M: MasterApi> Shared<M> {
    /// `Err` unless the node of `name` is RUNNING (and served).
    pub(super) async fn not_running(&self, name: &str) -> Result<(), ErrorReply> {
        let node = keys::node_of(name);
        let served = lock(&self.served).values().any(|n| n.name == node);
        if served {
            return Ok(());
        }
        let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
        Err(match nodes.iter().find(|n| n.name == node) {
            Some(n) => ErrorReply::new(
                kind::NOT_RUNNING,
                format!("node {} is not running ({})", n.name, n.phase),
            ),
            None => ErrorReply::new(
                kind::UNKNOWN_NAME,
                format!(
                    "no node named `{}` on bus {}",
                    fcan_master::text::Untrusted(node),
                    self.bus
                ),
            ),
        })
    }

    pub(super) fn on_query(this: &Arc<Self>, k: QKind, q: Query) {
        this.counters.queries.fetch_add(1, Ordering::Relaxed);
        let Ok(permit) = this.inflight.clone().try_acquire_owned() else {
            this.counters.busy.fetch_add(1, Ordering::Relaxed);
            let e = ErrorReply::new(kind::BUSY, "too many requests in flight; retry later");
            this.rt.spawn(async move {
                let _ = q.reply_err(e.to_bytes()).await;
            });
            return;
        };
        let sh = this.clone();
        this.rt.spawn(async move {
            let _permit = permit;
            let answer = match tokio::time::timeout(sh.opts.request_timeout, sh.answer(k, &q)).await
            {
                Ok(a) => a,
                Err(_) => Err(ErrorReply::new(
                    kind::TIMEOUT,
                    format!("no answer within {:?}", sh.opts.request_timeout),
                )),
            };
            match answer {
                Ok(replies) => {
                    for (key, bytes) in replies {
                        let _ = q.reply(key, bytes).await;
                    }
                }
                Err(e) => {
                    let _ = q.reply_err(e.to_bytes()).await;
                }
            }
        });
    }

    /// The replies to one query: (key, payload) pairs, or one error.
    pub(super) async fn answer(
        &self,
        k: QKind,
        q: &Query,
    ) -> Result<Vec<(String, Vec<u8>)>, ErrorReply> {
        let payload = q
            .payload()
            .map(|p| p.to_bytes().into_owned())
            .unwrap_or_default();
        if payload.len() > self.opts.max_payload {
            return Err(ErrorReply::new(
                kind::BAD_VALUE,
                format!(
                    "payload of {} bytes exceeds the limit of {}",
                    payload.len(),
                    self.opts.max_payload
                ),
            ));
        }
        let qkey: &KeyExpr<'static> = q.key_expr();
        let own = |key: Option<String>| key.expect("bus name checked");
        match k {
            QKind::Status => {
                let s = self.status_json().await.map_err(|e| ErrorReply::of(&e))?;
                Ok(vec![(
                    own(keys::status(&self.bus)),
                    s.to_string().into_bytes(),
                )])
            }
            QKind::Registry => {
                let r = self
                    .master
                    .registry()
                    .await
                    .map_err(|e| ErrorReply::of(&e))?;
                Ok(vec![(
                    own(keys::registry(&self.bus)),
                    registry_json(&r).to_string().into_bytes(),
                )])
            }
            QKind::Node => {
                // A wildcard (`fcan/<bus>/node/*`) lists every node that matches.
                let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
                let mut out = Vec::new();
                for n in nodes {
                    let Some(key) = keys::node(&self.bus, &n.name) else {
                        continue;
                    };
                    let Ok(ke) = KeyExpr::try_from(key.clone()) else {
                        continue;
                    };
                    if qkey.intersects(&ke) {
                        out.push((key, n.to_json().to_string().into_bytes()));
                    }
                }
                if out.is_empty() && !is_wild(qkey) {
                    return Err(ErrorReply::new(
                        kind::UNKNOWN_NAME,
                        format!("no node at {qkey}"),
                    ));
                }
                Ok(out)
            }
            QKind::Plan => {
                if is_wild(qkey) {
                    return Ok(Vec::new());
                }
                let Some((_, Entity::Plan(name))) = keys::parse(qkey.as_str()) else {
                    return Err(ErrorReply::new(kind::UNKNOWN_NAME, "not a plan key"));
                };
                let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
                let Some(n) = nodes.iter().find(|n| n.name == name) else {
                    return Err(ErrorReply::new(
                        kind::UNKNOWN_NAME,
                        format!("no node {name} on this bus"),
                    ));
                };
                let plan = self
                    .master
                    .plan(n.id)
                    .await
                    .map_err(|e| ErrorReply::of(&e))?;
                let j = plan.map_or(Json::Null, |p| p.to_json());
                Ok(vec![(qkey.to_string(), j.to_string().into_bytes())])
            }
            QKind::Reprovision => {
                if is_wild(qkey) {
                    // Never on a wildcard: reprovisioning is one node at a time.
                    return Ok(Vec::new());
                }
                let Some((_, Entity::Reprovision(name))) = keys::parse(qkey.as_str()) else {
                    return Err(ErrorReply::new(kind::UNKNOWN_NAME, "not a reprovision key"));
                };
                let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
                let Some(n) = nodes.iter().find(|n| n.name == name) else {
                    return Err(ErrorReply::new(
                        kind::UNKNOWN_NAME,
                        format!("no node {name} on this bus"),
                    ));
                };
                self.master
                    .reprovision(n.id)
                    .await
                    .map_err(|e| ErrorReply::of(&e))?;
                Ok(vec![(qkey.to_string(), b"null".to_vec())])
            }
            QKind::Schema => {
                if is_wild(qkey) {
                    return Ok(Vec::new());
                }
                let Some((_, Entity::Schema(hex))) = keys::parse(qkey.as_str()) else {
                    return Err(ErrorReply::new(kind::UNKNOWN_NAME, "not a schema key"));
                };
                let digest = SchemaDigest::from_hex(&hex)
                    .ok_or_else(|| ErrorReply::new(kind::UNKNOWN_NAME, "not a SHA-256 in hex"))?;
                let nodes = self.master.nodes().await.map_err(|e| ErrorReply::of(&e))?;
                for n in nodes.iter().filter(|n| n.digest == Some(digest)) {
                    if let Some(s) = self
                        .master
                        .schema(n.id)
                        .await
                        .map_err(|e| ErrorReply::of(&e))?
                    {
                        return Ok(vec![(qkey.to_string(), s.blob.clone())]);
                    }
                }
                Err(ErrorReply::new(
                    kind::UNKNOWN_NAME,
                    format!("no schema {hex} on this bus"),
                ))
            }
            QKind::Service | QKind::Param => {
                if is_wild(qkey) {
                    return Ok(Vec::new());
                }
                let entity = keys::parse(qkey.as_str()).map(|(_, e)| e);
                let (name, is_param) = match entity {
                    Some(Entity::Service(n)) => (n, false),
                    Some(Entity::Param(n)) => (n, true),
                    _ => {
                        return Err(ErrorReply::new(
                            kind::UNKNOWN_NAME,
                            format!("not a service or param key: {qkey}"),
                        ))
                    }
                };
                self.not_running(&name).await?;
                let value = if payload.is_empty() {
                    None
                } else {
                    let j: Json = serde_json::from_slice(&payload).map_err(|e| {
                        ErrorReply::new(kind::BAD_VALUE, format!("payload is not JSON: {e}"))
                    })?;
                    Some(
                        Value::from_json(&j)
                            .map_err(|e| ErrorReply::new(kind::BAD_VALUE, e.to_string()))?,
                    )
                };
                let reply = match (is_param, value) {
                    (false, None) => {
                        return Err(ErrorReply::new(
                            kind::BAD_VALUE,
                            "a service call needs a JSON request payload",
                        ))
                    }
                    (false, Some(v)) => self.master.call(&name, v).await.map(|r| r.to_json()),
                    (true, None) => self.master.param_get(&name).await.map(|v| param_reply(&v)),
                    (true, Some(v)) => self
                        .master
                        .param_set(&name, v.clone())
                        .await
                        .map(|()| param_reply(&v)),
                };
                let reply = reply.map_err(|e| ErrorReply::of(&e))?;
                Ok(vec![(qkey.to_string(), reply.to_string().into_bytes())])
            }
        }
    }
}
