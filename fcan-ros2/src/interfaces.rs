//! The interface store: every message and service type the bridge can name, with one
//! definition per name. It starts with the bundled standard interfaces
//! ([`Interfaces::bundled`]); the schema mapping adds the custom and generated types it
//! builds ([`Interfaces::add_message`], [`Interfaces::add_service`]) and is refused
//! when a name would get a second, different definition.

use std::collections::{BTreeMap, BTreeSet};

use crate::bundled::{BUNDLED, OWN};
use crate::idl::{parse_msg, parse_srv, BaseType, Message, Primitive, RosField, Service, Shape};

/// Messages and services by full name.
#[derive(Clone, Debug, Default)]
pub struct Interfaces {
    messages: BTreeMap<String, Message>,
    services: BTreeMap<String, Service>,
    bundled: BTreeSet<String>,
}

/// The package of fcan's own interfaces.
pub const OWN_PACKAGE: &str = "fcan_msgs";

/// The package of `service_msgs/msg/ServiceEventInfo`, which every service's event
/// message holds.
pub const SERVICE_EVENT_INFO: &str = "service_msgs/msg/ServiceEventInfo";

impl Interfaces {
    /// A store holding the bundled standard interfaces (std_msgs, std_srvs,
    /// geometry_msgs, sensor_msgs, trajectory_msgs, builtin_interfaces, service_msgs:
    /// the files under `fcan-ros2/interfaces/`).
    ///
    /// ```
    /// let i = fcan_ros2::Interfaces::bundled();
    /// assert!(i.message("std_msgs/msg/Bool").is_some());
    /// assert!(i.service("std_srvs/srv/SetBool").is_some());
    /// assert!(i.is_bundled("trajectory_msgs/msg/JointTrajectoryPoint"));
    /// ```
    pub fn bundled() -> Interfaces {
        let mut store = Interfaces::default();
        // The bundled files are ours and tested (`every_bundled_definition_reads…`);
        // nothing from a bus or a user reaches these panics. Messages first, in any
        // order (they reference each other), then the services that use them.
        for (name, text) in BUNDLED.iter().filter(|(n, _)| n.contains("/msg/")) {
            let m = parse_msg(name, text).unwrap_or_else(|e| panic!("bundled {name}: {e}"));
            store.messages.insert(m.name.clone(), m);
            store.bundled.insert(name.to_string());
        }
        for (name, text) in BUNDLED.iter().filter(|(n, _)| n.contains("/srv/")) {
            let s = parse_srv(name, text).unwrap_or_else(|e| panic!("bundled {name}: {e}"));
            store
                .add_service(s)
                .unwrap_or_else(|e| panic!("bundled {name}: {e}"));
            store.bundled.insert(name.to_string());
        }
        for (name, text) in OWN {
            let s = parse_srv(name, text).unwrap_or_else(|e| panic!("fcan_msgs {name}: {e}"));
            store
                .add_service(s)
                .unwrap_or_else(|e| panic!("fcan_msgs {name}: {e}"));
        }
        for m in store.messages.values() {
            for f in &m.fields {
                if let BaseType::Nested(n) = &f.base {
                    assert!(
                        store.messages.contains_key(n),
                        "bundled {}: {n} is missing",
                        m.name
                    );
                }
            }
        }
        store
    }

    /// A message (a service's halves included: `pkg/srv/Name_Request`).
    pub fn message(&self, name: &str) -> Option<&Message> {
        self.messages.get(name)
    }

    /// A service.
    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.get(name)
    }

    /// Whether `name` is one of the bundled standard interfaces.
    pub fn is_bundled(&self, name: &str) -> bool {
        self.bundled.contains(name)
    }

    /// fcan's own services (`fcan_msgs/srv/NodeInfo`), which the bridge serves on every
    /// node and a ROS program needs the `fcan_msgs` package for.
    pub fn own_services(&self) -> impl Iterator<Item = &Service> {
        OWN.iter().filter_map(|(n, _)| self.services.get(*n))
    }

    /// Whether `package` holds a bundled interface (a schema may not add types to it).
    pub fn is_bundled_package(&self, package: &str) -> bool {
        package == OWN_PACKAGE
            || self
                .bundled
                .iter()
                .any(|n| n.split('/').next() == Some(package))
    }

    /// Every message, by name (services' halves and the synthesized service types
    /// included).
    pub fn messages(&self) -> impl Iterator<Item = &Message> {
        self.messages.values()
    }

    /// Every service, by name.
    pub fn services(&self) -> impl Iterator<Item = &Service> {
        self.services.values()
    }

    /// Adds a message. The same definition twice is fine; a different one under a name
    /// already taken is a [`Conflict`]. Nested types must already be here.
    pub fn add_message(&mut self, m: Message) -> Result<(), Conflict> {
        if let Some(have) = self.messages.get(&m.name) {
            return if *have == m {
                Ok(())
            } else {
                Err(Conflict {
                    name: m.name.clone(),
                    have: have.to_msg_text(),
                    new: m.to_msg_text(),
                })
            };
        }
        for f in &m.fields {
            if let BaseType::Nested(n) = &f.base {
                if !self.messages.contains_key(n) {
                    return Err(Conflict {
                        name: m.name.clone(),
                        have: String::new(),
                        new: format!("field `{}` names `{n}`, which is not known", f.name),
                    });
                }
            }
        }
        self.messages.insert(m.name.clone(), m);
        Ok(())
    }

    /// Adds a service: its request and response messages, and the two messages ROS
    /// hashes a service by (`pkg/srv/Name_Event` and `pkg/srv/Name` itself, see
    /// [`crate::rihs`]).
    pub fn add_service(&mut self, s: Service) -> Result<(), Conflict> {
        if let Some(have) = self.services.get(&s.name) {
            return if *have == s {
                Ok(())
            } else {
                Err(Conflict {
                    name: s.name.clone(),
                    have: have.to_srv_text(),
                    new: s.to_srv_text(),
                })
            };
        }
        // Check both halves before adding either: a refused service leaves no trace.
        for m in [&s.request, &s.response] {
            if let Some(have) = self.messages.get(&m.name) {
                if have != m {
                    return Err(Conflict {
                        name: m.name.clone(),
                        have: have.to_msg_text(),
                        new: m.to_msg_text(),
                    });
                }
            }
        }
        let nested = |name: &str, field: &str, shape| RosField {
            name: field.to_string(),
            base: BaseType::Nested(name.to_string()),
            shape,
        };
        let event = Message {
            name: format!("{}_Event", s.name),
            fields: vec![
                nested(SERVICE_EVENT_INFO, "info", Shape::Single),
                nested(&s.request.name, "request", Shape::BoundedSequence(1)),
                nested(&s.response.name, "response", Shape::BoundedSequence(1)),
            ],
        };
        let whole = Message {
            name: s.name.clone(),
            fields: vec![
                nested(&s.request.name, "request_message", Shape::Single),
                nested(&s.response.name, "response_message", Shape::Single),
                nested(&event.name, "event_message", Shape::Single),
            ],
        };
        for m in [&s.request, &s.response] {
            for f in &m.fields {
                if let BaseType::Nested(n) = &f.base {
                    if !self.messages.contains_key(n) {
                        return Err(Conflict {
                            name: m.name.clone(),
                            have: String::new(),
                            new: format!("field `{}` names `{n}`, which is not known", f.name),
                        });
                    }
                }
            }
        }
        for m in [s.request.clone(), s.response.clone(), event, whole] {
            self.messages.insert(m.name.clone(), m);
        }
        self.services.insert(s.name.clone(), s);
        Ok(())
    }
}

/// A name that would get a second, different definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The type name.
    pub name: String,
    /// The definition it has (`.msg` text).
    pub have: String,
    /// The one refused.
    pub new: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.have.is_empty() {
            write!(f, "{}: {}", self.name, self.new)
        } else {
            write!(
                f,
                "{} is already defined as [{}], not [{}]",
                self.name,
                one_line(&self.have),
                one_line(&self.new)
            )
        }
    }
}

fn one_line(text: &str) -> String {
    text.trim_end().replace('\n', "; ")
}

impl std::error::Error for Conflict {}

/// The primitive an fcan scalar type is carried as when the bridge builds a type from
/// a schema's fields (a custom or generated type).
pub fn primitive_of(ty: fcan_core::types::ScalarType) -> Primitive {
    use fcan_core::types::ScalarType as S;
    match ty {
        S::Bool => Primitive::Bool,
        S::U8 => Primitive::UInt8,
        S::I8 => Primitive::Int8,
        S::U16 => Primitive::UInt16,
        S::I16 => Primitive::Int16,
        S::U32 => Primitive::UInt32,
        S::I32 => Primitive::Int32,
        S::U64 => Primitive::UInt64,
        S::I64 => Primitive::Int64,
        S::F32 => Primitive::Float32,
        S::F64 => Primitive::Float64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_definition_reads_and_the_list_matches_the_folder() {
        let store = Interfaces::bundled();
        let mut on_disk = Vec::new();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("interfaces");
        for pkg in std::fs::read_dir(&root).unwrap() {
            let pkg = pkg.unwrap().path();
            for kind in std::fs::read_dir(&pkg).unwrap() {
                let kind = kind.unwrap().path();
                for f in std::fs::read_dir(&kind).unwrap() {
                    let f = f.unwrap().path();
                    on_disk.push(format!(
                        "{}/{}/{}",
                        pkg.file_name().unwrap().to_str().unwrap(),
                        kind.file_name().unwrap().to_str().unwrap(),
                        f.file_stem().unwrap().to_str().unwrap()
                    ));
                }
            }
        }
        on_disk.sort();
        let listed: Vec<_> = BUNDLED.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(
            listed, on_disk,
            "src/bundled.rs must list every file under interfaces/"
        );
        for n in &listed {
            assert!(store.is_bundled(n));
            assert!(
                store.message(n).is_some() || store.service(n).is_some(),
                "{n}"
            );
        }
    }

    #[test]
    fn a_second_different_definition_is_refused_and_the_same_one_accepted() {
        let mut store = Interfaces::bundled();
        let m = parse_msg("p/msg/M", "float32 x\n").unwrap();
        store.add_message(m.clone()).unwrap();
        store.add_message(m).unwrap();
        let e = store
            .add_message(parse_msg("p/msg/M", "float64 x\n").unwrap())
            .unwrap_err();
        assert!(
            e.to_string().contains("already defined as [float32 x]"),
            "{e}"
        );
        let e = store
            .add_message(parse_msg("p/msg/N", "q/Unknown u\n").unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("not known"), "{e}");
        let s = parse_srv("std_srvs/srv/SetBool", "bool data\n---\nbool success\n").unwrap();
        assert!(store.add_service(s).is_err());
    }
}
