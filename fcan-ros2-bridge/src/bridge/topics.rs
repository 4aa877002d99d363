//! Topics: each s2m topic's samples from a master subscription written on its DDS
//! writer, and each m2s topic's DDS samples published on the bus through
//! [`MasterApi::publish`] (the same checks as any publish); a command that cannot be
//! mapped, holds NaN or an infinity, or is refused by the master is counted and logged,
//! never sent.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use fcan_core::msg::DataDirection;
use fcan_master::api::MasterApi;
use fcan_master::serving::lock;
use fcan_master::value::Value;
use fcan_master::{ErrorKind, MasterError};
use fcan_ros2::cdr;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use super::{now, NodeGids, Shared, TARGET};
use crate::dds::{Dds, DdsWriter};
use crate::drops::{Dropped, RouteDrops};
use crate::routes::Route;

/// Why a command holding NaN or an infinity is refused.
const NON_FINITE: &str =
    "a command carries finite numbers only (no field of a command topic may hold NaN or an infinity)";

/// Whether the master refused because commands already wait for the bus (or too many
/// requests are in flight): the kind [`ErrorKind::Busy`], the same from an in-process
/// master and a remote one.
fn is_busy(e: &MasterError) -> bool {
    e.kind() == ErrorKind::Busy
}

/// The first field of `v` that holds NaN or an infinity (`setpoint`, `positions[2]`),
/// with its value. No schema field says it may carry one, so a command holding one is
/// refused: a non-finite number reaching a control loop is the ancestor's known weak
/// point (docs/ros2.md, "Commands").
fn non_finite(v: &Value) -> Option<(String, f64)> {
    match v {
        Value::Float(f) if !f.is_finite() => Some((String::new(), *f)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, x)| non_finite(x).map(|(p, f)| (format!("[{i}]{p}"), f))),
        Value::Struct(fields) => fields.iter().find_map(|(name, x)| {
            non_finite(x).map(|(p, f)| {
                let sep = if p.is_empty() || p.starts_with('[') {
                    ""
                } else {
                    "."
                };
                (format!("{name}{sep}{p}"), f)
            })
        }),
        _ => None,
    }
}

/// The text of a non-finite value as every face prints it.
fn float_text(f: f64) -> &'static str {
    if f.is_nan() {
        "NaN"
    } else if f > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// What becomes of a command sample of ROS type `ros_type` read from DDS, `decoded`
/// into its fcan fields (or not): the value to publish on the bus, or why it is refused
/// before the master sees it (it does not fit the fields; a field holds NaN or an
/// infinity).
fn command<E: std::fmt::Display>(
    decoded: Result<Value, E>,
    ros_type: &str,
) -> Result<Value, String> {
    match decoded {
        Ok(v) => match non_finite(&v) {
            Some((field, f)) => Err(format!("{field} is {}: {NON_FINITE}", float_text(f))),
            None => Ok(v),
        },
        Err(e) => Err(format!("a {ros_type} that does not fit: {e}")),
    }
}

/// A command that did not reach the bus, as it is counted: every one is `refused`; the
/// master's refusal because the bus is behind is also `busy`; one holding NaN or an
/// infinity is also `non_finite`.
#[derive(Debug, PartialEq, Eq)]
struct Refused {
    busy: bool,
    non_finite: bool,
}

impl Refused {
    /// The counts of a command refused for `why` (`busy`: the master's busy refusal).
    fn of(busy: bool, why: &str) -> Refused {
        Refused {
            busy,
            non_finite: why.contains(NON_FINITE),
        }
    }
}

/// The wall-clock time of a monotonic instant (a sample's arrival), for the DDS
/// source timestamp.
fn wall(at: std::time::Instant) -> std::time::SystemTime {
    let ago = at.elapsed();
    std::time::SystemTime::now()
        .checked_sub(ago)
        .unwrap_or_else(std::time::SystemTime::now)
}

impl<M: MasterApi, D: Dds> Shared<M, D> {
    /// Starts carrying one topic: the task owns its DDS endpoint.
    pub(super) async fn carry(
        self: &Arc<Self>,
        r: &Route,
        gids: &mut NodeGids,
    ) -> Result<JoinHandle<()>, String> {
        match r.dir {
            DataDirection::S2m => self.carry_s2m(r, gids).await,
            DataDirection::M2s => self.carry_m2s(r, gids),
        }
    }

    /// An s2m topic: the master's samples written on a DDS writer.
    async fn carry_s2m(
        self: &Arc<Self>,
        r: &Route,
        gids: &mut NodeGids,
    ) -> Result<JoinHandle<()>, String> {
        let me = self.clone();
        let route = r.clone();
        let writer = self.dds.writer(&r.endpoint).map_err(|e| e.to_string())?;
        gids.writers.push(writer.gid());
        let mut rx = self
            .master
            .subscribe(&r.name)
            .await
            .map_err(|e| e.to_string())?;
        Ok(tokio::spawn(async move {
            let mut warned = false;
            while let Some(sample) = rx.recv().await {
                let store = lock(&me.store);
                let bytes = cdr::encode(&store, &route.binding, &route.fields, &sample.value);
                drop(store);
                match bytes.map_err(|e| e.to_string()).and_then(|b| {
                    writer
                        .write(&b, None, Some(wall(sample.at)))
                        .map_err(|e| e.to_string())
                }) {
                    Ok(()) => {
                        me.counters.written.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        me.counters.failed.fetch_add(1, Ordering::Relaxed);
                        if !warned {
                            tracing::warn!(target: TARGET, parent: &me.span, "{}: not written: {e} (further failures counted only)",
                                route.name);
                            warned = true;
                        }
                    }
                }
            }
        }))
    }

    /// An m2s topic: a DDS reader's samples published on the bus.
    fn carry_m2s(
        self: &Arc<Self>,
        r: &Route,
        gids: &mut NodeGids,
    ) -> Result<JoinHandle<()>, String> {
        let me = self.clone();
        let route = r.clone();
        let reader = self.dds.reader(&r.endpoint).map_err(|e| e.to_string())?;
        gids.readers.push(reader.gid);
        let mut samples = reader.samples;
        let drops = lock(&self.drops)
            .entry(r.name.clone())
            .or_insert_with(|| Arc::new(Mutex::new(RouteDrops::new(&r.name))))
            .clone();
        Ok(tokio::spawn(async move {
            while let Some(sample) = samples.next().await {
                let writer = sample.id.map(|i| i.writer_guid);
                if let Some(id) = sample.id {
                    let (missed, report) = lock(&drops).seen(id.writer_guid, id.seq, now());
                    if missed > 0 {
                        me.counters.missed.fetch_add(missed, Ordering::Relaxed);
                    }
                    if let Some(text) = report {
                        me.warn(&route.name, text);
                    }
                }
                let decoded = {
                    let store = lock(&me.store);
                    cdr::decode(&store, &route.binding, &route.fields, &sample.cdr)
                };
                let result = match command(decoded, &route.ros_type) {
                    Ok(v) => me
                        .master
                        .publish(&route.name, v)
                        .await
                        .map_err(|e| (is_busy(&e), e.to_string())),
                    Err(why) => Err((false, why)),
                };
                match result {
                    Ok(()) => {
                        me.counters.forwarded.fetch_add(1, Ordering::Relaxed);
                    }
                    Err((busy, why)) => {
                        let counted = Refused::of(busy, &why);
                        me.counters.refused.fetch_add(1, Ordering::Relaxed);
                        if counted.non_finite {
                            me.counters.non_finite.fetch_add(1, Ordering::Relaxed);
                        }
                        let why = if counted.busy {
                            me.counters.busy.fetch_add(1, Ordering::Relaxed);
                            Dropped::Busy(&why)
                        } else {
                            Dropped::Refused(&why)
                        };
                        let report = lock(&drops).dropped(writer, why, now());
                        if let Some(text) = report {
                            me.warn(&route.name, text);
                        }
                    }
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(f: &[(&str, Value)]) -> Value {
        Value::Struct(
            f.iter()
                .map(|(n, v)| (Arc::<str>::from(*n), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn a_command_holding_nan_or_an_infinity_is_refused_naming_the_field() {
        let v = fields(&[
            ("mode", Value::UInt(1)),
            ("setpoint", Value::Float(f64::NAN)),
        ]);
        let why = command::<String>(Ok(v), "std_msgs/msg/Float32").unwrap_err();
        assert!(why.starts_with("setpoint is NaN: "), "{why}");
        assert!(why.contains(NON_FINITE));
        let v = fields(&[(
            "positions",
            Value::Array(vec![
                Value::Float(0.0),
                Value::Float(1.0),
                Value::Float(f64::INFINITY),
            ]),
        )]);
        let why = command::<String>(Ok(v), "t").unwrap_err();
        assert!(why.starts_with("positions[2] is inf: "), "{why}");
        let v = fields(&[("pid", fields(&[("kp", Value::Float(f64::NEG_INFINITY))]))]);
        let why = command::<String>(Ok(v), "t").unwrap_err();
        assert!(why.starts_with("pid.kp is -inf: "), "{why}");
        let nested = Value::Array(vec![fields(&[("x", Value::Float(f64::NAN))])]);
        assert_eq!(non_finite(&nested).unwrap().0, "[0]x");
    }

    #[test]
    fn a_command_of_finite_numbers_is_published_as_decoded() {
        let v = fields(&[
            ("setpoint", Value::Float(1.5)),
            (
                "limits",
                Value::Array(vec![Value::Float(-1.0), Value::Float(f64::MAX)]),
            ),
            ("enable", Value::Bool(true)),
        ]);
        assert_eq!(command::<String>(Ok(v.clone()), "t"), Ok(v));
    }

    #[test]
    fn a_command_that_does_not_decode_is_refused_with_its_ros_type() {
        let why = command::<&str>(Err("3 bytes short"), "fcan_msgs/msg/Target").unwrap_err();
        assert_eq!(
            why,
            "a fcan_msgs/msg/Target that does not fit: 3 bytes short"
        );
        assert!(!Refused::of(false, &why).non_finite);
    }

    #[test]
    fn a_refusal_counts_busy_and_non_finite_apart() {
        let nan = command::<String>(Ok(Value::Float(f64::NAN)), "t").unwrap_err();
        assert_eq!(nan, format!(" is NaN: {NON_FINITE}"));
        assert_eq!(
            Refused::of(false, &nan),
            Refused {
                busy: false,
                non_finite: true
            }
        );
        assert_eq!(
            Refused::of(true, "busy: 64 commands wait for the bus"),
            Refused {
                busy: true,
                non_finite: false
            }
        );
    }

    #[test]
    fn a_sample_is_stamped_with_the_wall_time_it_arrived() {
        let at = std::time::Instant::now() - std::time::Duration::from_secs(2);
        let ago = std::time::SystemTime::now()
            .duration_since(wall(at))
            .unwrap();
        assert!(ago >= std::time::Duration::from_secs(2), "{ago:?}");
        assert!(ago < std::time::Duration::from_secs(3), "{ago:?}");
    }
}
