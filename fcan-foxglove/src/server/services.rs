//! Services: each node's services advertised while it is served, a client's call
//! handed to the master (`MasterApi::call`). What a request comes to ([`request`]) and
//! what the client is answered ([`reply`]) are plain functions, tested below.

use std::sync::Weak;

use fcan_master::registry::ServiceInfo;
use fcan_master::text::Untrusted;
use fcan_master::value::Value;
use fcan_master::{MasterApi, MasterError};
use foxglove::websocket::service::{Handler, Request, Responder, Service, ServiceSchema};
use foxglove::Schema;

use super::{Shared, TARGET};
use crate::mapping::{self, MESSAGE_ENCODING, SCHEMA_ENCODING};

/// A client's request: what the master is called with, or why not (over `limit`
/// bytes, not JSON).
fn request(payload: &[u8], limit: usize) -> Result<Value, String> {
    if payload.len() > limit {
        return Err(format!(
            "request of {} bytes exceeds the limit of {limit}",
            payload.len()
        ));
    }
    mapping::decode_message(payload)
}

/// What the client is answered: the response as JSON, or the master's error (escaped:
/// it may carry text from the bus).
fn reply(answer: Result<Value, MasterError>) -> Result<Vec<u8>, String> {
    match answer {
        Ok(v) => {
            let mut buf = Vec::new();
            mapping::encode_message(&v, &mut buf);
            Ok(buf)
        }
        Err(e) => Err(Untrusted(&e.to_string()).to_string()),
    }
}

impl<M: MasterApi> Shared<M> {
    /// Advertises `services` of node `node`; their names, to remove them when the node
    /// is no longer served.
    pub(super) fn add_services<'a>(
        &self,
        node: &str,
        services: impl Iterator<Item = &'a ServiceInfo>,
    ) -> Vec<String> {
        let mut names = Vec::new();
        let services: Vec<Service> = services
            .map(|s| {
                let spec = mapping::service_spec(s);
                names.push(spec.name.clone());
                let schema = ServiceSchema::new(spec.schema_name)
                    .with_request(
                        MESSAGE_ENCODING,
                        Schema::new(spec.request.0, SCHEMA_ENCODING, spec.request.1),
                    )
                    .with_response(
                        MESSAGE_ENCODING,
                        Schema::new(spec.response.0, SCHEMA_ENCODING, spec.response.1),
                    );
                Service::builder(spec.name.clone(), schema).handler(Call {
                    shared: self.weak(),
                    name: spec.name,
                })
            })
            .collect();
        self.with_server(|h| {
            if let Err(e) = h.add_services(services) {
                tracing::warn!(
                    target: TARGET,
                    parent: &self.span,
                    node = %Untrusted(node),
                    "services of node {}: {e}",
                    Untrusted(node)
                );
            }
        });
        names
    }
}

/// One service: a call is `MasterApi::call`.
struct Call<M> {
    shared: Weak<Shared<M>>,
    name: String,
}

impl<M: MasterApi> Handler for Call<M> {
    fn call(&self, req: Request, responder: Responder) {
        let Some(s) = self.shared.upgrade() else {
            return responder.respond_err("the server is stopping".into());
        };
        let name = self.name.clone();
        let rt = s.rt.clone();
        rt.spawn(async move {
            let value = match request(req.payload(), s.opts.max_payload) {
                Ok(v) => v,
                Err(why) => return responder.respond_err(why),
            };
            match reply(s.master.call(&name, value).await) {
                Ok(buf) => responder.respond_ok(buf),
                Err(why) => responder.respond_err(why),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fcan_master::ErrorKind;

    #[test]
    fn a_request_is_json_within_the_limit() {
        assert_eq!(
            request(br#"{"x":1}"#, 64).unwrap(),
            mapping::decode_message(br#"{"x":1}"#).unwrap()
        );
        assert_eq!(
            request(br#"{"x":1}"#, 3).unwrap_err(),
            "request of 7 bytes exceeds the limit of 3"
        );
        // Too large is said before the JSON is read.
        assert!(request(&[b'{'; 10], 3).unwrap_err().contains("exceeds"));
        assert!(request(b"{not json", 64).is_err());
    }

    #[test]
    fn a_reply_is_the_response_as_json_or_the_error_escaped() {
        let v = mapping::decode_message(br#"{"ok":true}"#).unwrap();
        let buf = reply(Ok(v.clone())).unwrap();
        assert_eq!(mapping::decode_message(&buf).unwrap(), v);
        let e = MasterError::Remote {
            kind: ErrorKind::Timeout,
            message: "node said \u{1b}[2J".into(),
        };
        let why = reply(Err(e)).unwrap_err();
        assert!(!why.contains('\u{1b}'), "{why}");
        assert!(why.contains("node said"), "{why}");
    }
}
