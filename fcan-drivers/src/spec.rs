//! Devices as the user names them: `--device robstride:id=1,model=RS03` on the command
//! line, or a bus file (`--bus-file robot.yaml`) for many:
//!
//! ```yaml
//! # robot.yaml
//! devices:
//!   - { driver: robstride, id: 1, model: RS03, name: left_hip }
//!   - { driver: robstride, id: 2, model: RS03 }
//!   - { driver: mit, id: 3, layout: damiao, vmax: 30, tmax: 10 }
//! ```
//!
//! Both become [`DeviceSpec`]s; each driver takes its keys from one and refuses a key it
//! does not know, naming it. Which keys each driver takes: `docs/drivers.md`.
//!
//! ```
//! use fcan_drivers::spec::DeviceSpec;
//! let s = DeviceSpec::parse("robstride:id=1,model=RS03").unwrap();
//! assert_eq!(s.driver, "robstride");
//! assert_eq!(s.to_string(), "robstride:id=1,model=RS03");
//! assert!(DeviceSpec::parse("robstride").is_err());
//! ```

use std::collections::BTreeMap;

use fcan_core::frame::Mtu;
use fcan_core::id::NodeId;

use crate::device::Device;
use crate::registry::{self, Driver};
use crate::sim::SimDevice;

/// A device spec that does not parse or does not fit its driver: the message names the
/// spec and the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// One device: its driver and its `key=value` settings, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    /// The driver's name, one of [`registry::DRIVERS`] (`robstride`, `mit`).
    pub driver: String,
    /// The settings.
    pub keys: Vec<(String, String)>,
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:", self.driver)?;
        for (i, (k, v)) in self.keys.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { "" } else { "," })?;
        }
        Ok(())
    }
}

impl DeviceSpec {
    /// Parses `DRIVER:KEY=VALUE,KEY=VALUE…`.
    pub fn parse(text: &str) -> Result<DeviceSpec, SpecError> {
        let (driver, rest) = text.split_once(':').ok_or_else(|| {
            SpecError(format!(
                "--device {text}: expected DRIVER:KEY=VALUE,… (e.g. robstride:id=1,model=RS03); drivers: {}",
                registry::names_joined()
            ))
        })?;
        let mut keys = Vec::new();
        for kv in rest.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| SpecError(format!("--device {text}: `{kv}` is not KEY=VALUE")))?;
            keys.push((k.trim().to_string(), v.trim().to_string()));
        }
        let spec = DeviceSpec {
            driver: driver.trim().to_string(),
            keys,
        };
        spec.check_driver()?;
        Ok(spec)
    }

    /// This spec's driver in the registry ([`registry::DRIVERS`]), or an error naming
    /// the drivers there (and the nearest name, for a typo).
    fn check_driver(&self) -> Result<&'static Driver, SpecError> {
        registry::find(&self.driver).ok_or_else(|| {
            let hint = fcan_core::validate::did_you_mean(&self.driver, registry::names())
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            SpecError(format!(
                "device `{self}`: no driver `{}`{hint}; drivers: {}",
                self.driver,
                registry::names_joined()
            ))
        })
    }

    /// The device's driver, configured.
    pub fn device(&self) -> Result<Box<dyn Device>, SpecError> {
        (self.check_driver()?.from_spec)(self)
    }

    /// A simulated device answering as this one would (for tests, the demo and
    /// `fcan fake --device`). Keys only the driver uses (host-side names) are accepted.
    pub fn simulated(&self) -> Result<Box<dyn SimDevice>, SpecError> {
        (self.check_driver()?.simulated)(self)
    }

    /// This spec's keys, to be taken one by one (see [`Keys`]).
    pub fn keys(&self) -> Keys<'_> {
        Keys {
            spec: self,
            taken: Vec::new(),
        }
    }
}

/// The settings of one spec, taken by a driver key by key; [`Keys::finish`] refuses any
/// key nobody took, so a typo is an error that names it rather than a silent default.
#[derive(Debug)]
pub struct Keys<'a> {
    spec: &'a DeviceSpec,
    taken: Vec<&'static str>,
}

impl Keys<'_> {
    fn raw(&mut self, key: &'static str) -> Result<Option<String>, SpecError> {
        self.taken.push(key);
        let mut found = self.spec.keys.iter().filter(|(k, _)| k == key);
        let first = found.next().map(|(_, v)| v.clone());
        if found.next().is_some() {
            return Err(self.error(key, "is given twice"));
        }
        Ok(first)
    }

    /// An error about `key` of this spec.
    pub fn error(&self, key: &str, what: &str) -> SpecError {
        SpecError(format!("device `{}`: `{key}` {what}", self.spec))
    }

    /// A string setting.
    pub fn string(&mut self, key: &'static str) -> Result<Option<String>, SpecError> {
        self.raw(key)
    }

    /// An integer setting in `0..=max` (decimal or `0x` hex).
    pub fn uint(&mut self, key: &'static str, max: u32) -> Result<Option<u32>, SpecError> {
        let Some(v) = self.raw(key)? else {
            return Ok(None);
        };
        let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => v.parse(),
        }
        .map_err(|_| self.error(key, &format!("= {v} is not a whole number")))?;
        if n > max {
            return Err(self.error(key, &format!("= {v} is above its max {max}")));
        }
        Ok(Some(n))
    }

    /// A finite number setting.
    pub fn number(&mut self, key: &'static str) -> Result<Option<f32>, SpecError> {
        let Some(v) = self.raw(key)? else {
            return Ok(None);
        };
        match v.parse::<f32>() {
            Ok(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(self.error(key, &format!("= {v} is not a finite number"))),
        }
    }

    /// A yes/no setting: `true` or `false`, in any case (a bus file's YAML booleans
    /// arrive as these words).
    pub fn flag(&mut self, key: &'static str) -> Result<Option<bool>, SpecError> {
        let Some(v) = self.raw(key)? else {
            return Ok(None);
        };
        if v.eq_ignore_ascii_case("true") {
            Ok(Some(true))
        } else if v.eq_ignore_ascii_case("false") {
            Ok(Some(false))
        } else {
            Err(self.error(key, &format!("= {v} is not `true` or `false`")))
        }
    }

    /// A positive finite number setting.
    pub fn positive(&mut self, key: &'static str) -> Result<Option<f32>, SpecError> {
        match self.number(key)? {
            Some(x) if x <= 0.0 => Err(self.error(key, "must be above 0")),
            x => Ok(x),
        }
    }

    /// The device's command watchdog: `watchdog_ms=N` (whole milliseconds in
    /// `1..=max_ms`, what the device's register can hold; `register` names it in
    /// errors), `watchdog=off` written by name, or `default_ms` when neither is given.
    /// `watchdog_ms=0` is refused: a zero that turns a safety off must not be a typo or
    /// a unit slip, so off is only ever said by name.
    pub fn watchdog(
        &mut self,
        default_ms: u32,
        max_ms: u32,
        register: &str,
    ) -> Result<crate::device::Watchdog, SpecError> {
        use crate::device::Watchdog;
        let ms = self.raw("watchdog_ms")?;
        let named = self.raw("watchdog")?;
        let range = format!("its range is 1–{max_ms} ms ({register})");
        match (ms, named) {
            (Some(_), Some(_)) => Err(self.error(
                "watchdog",
                "and `watchdog_ms` are both given: give the time (`watchdog_ms=`) or `watchdog=off`",
            )),
            (None, Some(w)) if w.eq_ignore_ascii_case("off") => Ok(Watchdog::Off),
            (None, Some(w)) => Err(self.error(
                "watchdog",
                &format!("= {w}: only `watchdog=off` is taken; the time is `watchdog_ms=` ({range})"),
            )),
            (Some(v), None) => {
                let n: u64 = v.parse().map_err(|_| {
                    self.error(
                        "watchdog_ms",
                        &format!("= {v} is not a whole number of milliseconds; {range}"),
                    )
                })?;
                if n == 0 {
                    return Err(self.error(
                        "watchdog_ms",
                        &format!(
                            "= 0 is refused: 0 would turn the device's command watchdog off; \
                             write `watchdog=off` if that is meant ({range})"
                        ),
                    ));
                }
                match u32::try_from(n) {
                    Ok(ms) if ms <= max_ms => Ok(Watchdog::Armed { ms }),
                    _ => Err(self.error("watchdog_ms", &format!("= {v} is outside {range}"))),
                }
            }
            (None, None) => Ok(Watchdog::Armed { ms: default_ms }),
        }
    }

    /// The fcan node id: `node=`, else `default` (the device's own id when it fits).
    pub fn node(&mut self, default: u32) -> Result<NodeId, SpecError> {
        let n = self.uint("node", u32::from(NodeId::MAX))?;
        match n {
            Some(n) => NodeId::new(n as u8).ok_or_else(|| self.error("node", "is not a node id")),
            None => NodeId::new(u8::try_from(default).unwrap_or(0x7F)).ok_or_else(|| {
                self.error(
                    "id",
                    &format!(
                        "= {default} is no fcan node id (0–{}): give the device one with `node=`",
                        NodeId::MAX
                    ),
                )
            }),
        }
    }

    /// Refuses every key no driver code took, naming them and the keys it knows.
    pub fn finish(self) -> Result<(), SpecError> {
        let unknown: Vec<&str> = self
            .spec
            .keys
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !self.taken.contains(k))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let mut known = self.taken.clone();
        known.sort_unstable();
        known.dedup();
        Err(SpecError(format!(
            "device `{}`: unknown key{} {}; {} takes: {}",
            self.spec,
            if unknown.len() == 1 { "" } else { "s" },
            unknown
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
            self.spec.driver,
            known.join(", ")
        )))
    }
}

/// A bus file: the devices on one bus (`--bus-file robot.yaml`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BusFile {
    /// The devices, in file order.
    pub devices: Vec<DeviceSpec>,
}

impl BusFile {
    /// Parses a bus file's text; `name` is for messages (the path).
    pub fn parse(name: &str, text: &str) -> Result<BusFile, SpecError> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            devices: Vec<BTreeMap<String, serde_yaml::Value>>,
        }
        let file: File = serde_yaml::from_str(text).map_err(|e| {
            let at = e
                .location()
                .map(|l| format!(":{}:{}", l.line(), l.column()))
                .unwrap_or_default();
            SpecError(format!("{name}{at}: {e}"))
        })?;
        let mut devices = Vec::new();
        for (i, d) in file.devices.into_iter().enumerate() {
            let mut driver = None;
            let mut keys = Vec::new();
            for (k, v) in d {
                let text = match v {
                    serde_yaml::Value::String(s) => s,
                    serde_yaml::Value::Number(n) => n.to_string(),
                    serde_yaml::Value::Bool(b) => b.to_string(),
                    _ => {
                        return Err(SpecError(format!(
                            "{name}: devices[{i}].{k}: expected a string or a number"
                        )))
                    }
                };
                if k == "driver" {
                    driver = Some(text);
                } else {
                    keys.push((k, text));
                }
            }
            let driver = driver.ok_or_else(|| {
                SpecError(format!(
                    "{name}: devices[{i}] has no `driver` ({})",
                    registry::names_joined()
                ))
            })?;
            let spec = DeviceSpec { driver, keys };
            spec.check_driver()
                .map_err(|e| SpecError(format!("{name}: devices[{i}]: {e}")))?;
            devices.push(spec);
        }
        Ok(BusFile { devices })
    }

    /// Reads and parses a bus file.
    pub fn read(path: &std::path::Path) -> Result<BusFile, SpecError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SpecError(format!("{}: {e}", path.display())))?;
        BusFile::parse(&path.display().to_string(), &text)
    }
}

/// A device's schema: the blob its driver ships, with the node renamed to `name` (when
/// given) and `adjust`ed (model-dependent bounds), validated by fcan-core's rules and
/// encoded again. Returns the schema and its blob. `device` names it in errors.
pub fn device_schema(
    driver: &str,
    shipped: &[u8],
    device: &str,
    name: Option<&str>,
    adjust: impl FnOnce(&mut fcan_core::ir::Schema),
) -> Result<(fcan_core::ir::Schema, Vec<u8>), SpecError> {
    let mut schema = fcan_core::blob::decode(shipped)
        .map_err(|e| SpecError(format!("the {driver} driver's schema: {e:?}")))?;
    if let Some(n) = name {
        schema.node = n.to_string();
    }
    adjust(&mut schema);
    if let Some(e) = fcan_core::validate::validate(&schema).into_iter().next() {
        return Err(SpecError(format!(
            "{device}: name `{}` does not make a valid node: {e:?}",
            schema.node
        )));
    }
    if schema.types.is_empty() {
        return Err(SpecError(format!(
            "the {driver} driver's schema has no type"
        )));
    }
    let blob = fcan_core::blob::encode(&schema);
    Ok((schema, blob))
}

/// Every device of `specs`, configured; refuses a spec a driver refuses and two devices
/// on one fcan node id (the error names both).
pub fn devices(specs: &[DeviceSpec]) -> Result<Vec<Box<dyn Device>>, SpecError> {
    let mut out: Vec<Box<dyn Device>> = Vec::with_capacity(specs.len());
    for s in specs {
        let d = s.device()?;
        if let Some(other) = out.iter().find(|o| o.node_id() == d.node_id()) {
            return Err(SpecError(format!(
                "device `{s}`: fcan node id {} is already {}'s: give one of them `node=`",
                d.node_id(),
                other.describe()
            )));
        }
        if let Some(other) = out.iter().find(|o| o.bus_key() == d.bus_key()) {
            return Err(SpecError(format!(
                "device `{s}`: {} is already configured ({})",
                d.bus_key(),
                other.describe()
            )));
        }
        out.push(d);
    }
    Ok(out)
}

/// The kind of link a device's frames need: [`Mtu::Fd`] for a device set to CAN FD
/// (`mit:…,layout=damiao,fd=true`), else [`Mtu::Classic`]. A spec whose framing keys do
/// not parse is refused as its driver would refuse it.
pub fn link_needed(spec: &DeviceSpec) -> Result<Mtu, SpecError> {
    // The driver answers ([`Device::link_needed`]): no driver is named here.
    Ok(spec.device()?.link_needed())
}

/// Refuses devices a link of `mtu` cannot carry, naming the device and the key: a
/// device set to CAN FD (`fd=true`) on a Classical link, whose every frame the link
/// would refuse. Call it with the link's MTU (`Transport::mtu`) before hosting the
/// devices, as [`devices_on`] does.
pub fn check_link(specs: &[DeviceSpec], mtu: Mtu) -> Result<(), SpecError> {
    if mtu == Mtu::Fd {
        return Ok(());
    }
    for s in specs {
        if link_needed(s)? == Mtu::Fd {
            return Err(SpecError(format!(
                "device `{s}`: `fd=true` sends CAN FD frames, but this bus is Classical CAN \
                 (8-byte frames only): open the bus as CAN FD (SocketCAN: `ip link set can0 \
                 type can bitrate 1000000 dbitrate 5000000 fd on`) with the motors set to \
                 CAN FD, or leave `fd` out for Classical CAN"
            )));
        }
    }
    Ok(())
}

/// [`devices`] for a link of `mtu`: [`check_link`] first, so a device the link cannot
/// carry is refused with its name rather than its frames dropped.
pub fn devices_on(specs: &[DeviceSpec], mtu: Mtu) -> Result<Vec<Box<dyn Device>>, SpecError> {
    check_link(specs, mtu)?;
    devices(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bus_file_lists_devices_and_its_errors_say_where() {
        let f = BusFile::parse(
            "robot.yaml",
            "devices:\n  - { driver: robstride, id: 1, model: RS03, name: left_hip }\n  - { driver: mit, id: 0x10, layout: damiao, vmax: 30 }\n",
        )
        .unwrap();
        assert_eq!(f.devices.len(), 2);
        assert_eq!(f.devices[0].driver, "robstride");
        assert_eq!(
            f.devices[0].to_string(),
            "robstride:id=1,model=RS03,name=left_hip"
        );
        // The same devices as the command line would give them.
        let built = devices(&f.devices).unwrap();
        assert_eq!(built[0].node_id().get(), 1);
        assert_eq!(built[1].node_id().get(), 0x10);
        assert_eq!(built[1].driver(), "mit");

        let e = BusFile::parse("robot.yaml", "devices:\n  - { id: 1 }\n").unwrap_err();
        assert!(e.0.contains("devices[0] has no `driver`"), "{e}");
        let e =
            BusFile::parse("robot.yaml", "devices:\n  - { driver: stepper, id: 1 }\n").unwrap_err();
        assert!(
            e.0.contains("robot.yaml: devices[0]") && e.0.contains("no driver `stepper`"),
            "{e}"
        );
        // The names come from the registry, with the nearest one for a typo.
        let e = DeviceSpec::parse("robstrid:id=1").unwrap_err();
        assert_eq!(
            e.0,
            "device `robstrid:id=1`: no driver `robstrid` (did you mean `robstride`?); \
             drivers: robstride, mit, cia402"
        );
        let e = DeviceSpec::parse("stepper:id=1").unwrap_err();
        assert!(
            e.0.ends_with("no driver `stepper`; drivers: robstride, mit, cia402"),
            "{e}"
        );
        let e = DeviceSpec::parse("robstride").unwrap_err();
        assert!(e.0.ends_with("drivers: robstride, mit, cia402"), "{e}");
        let e = BusFile::parse("robot.yaml", "devices:\n  - [1, 2\n").unwrap_err();
        assert!(e.0.starts_with("robot.yaml:"), "a position: {e}");
        let e = BusFile::parse("robot.yaml", "device:\n  - { driver: mit, id: 1 }\n").unwrap_err();
        assert!(e.0.contains("device"), "an unknown top-level key: {e}");
        // A key the driver does not take is refused when the devices are configured.
        let f = BusFile::parse(
            "robot.yaml",
            "devices:\n  - { driver: mit, id: 3, gain: 2 }\n",
        )
        .unwrap();
        let e = devices(&f.devices).map(|_| ()).unwrap_err();
        assert!(e.0.contains("`gain`") && e.0.contains("mit takes"), "{e}");
    }
}
