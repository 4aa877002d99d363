//! The drivers this crate has: **the one place a driver is registered**.
//!
//! Each driver module describes itself with a [`Driver`] (its `--device` name, a line of
//! description, its keys, how a spec becomes a device or a simulated one, the schema it
//! ships, example specs, its codecs) and [`DRIVERS`] lists them. Everything that knows
//! drivers by name goes through this table: [`DeviceSpec::device`] and
//! [`DeviceSpec::simulated`], the driver check of [`DeviceSpec::parse`] and of bus files
//! (with its list of names and its "did you mean"), the fuzz target's devices and
//! codecs, and the tests that keep `docs/drivers.md` and the module tree in step.
//!
//! Adding a driver `foo` (docs/drivers.md, "Adding a driver"):
//! 1. the module `src/foo/` with `pub const DRIVER: Driver` (by convention the driver's
//!    name is its module's), declared in `lib.rs` (`pub mod foo;`, which Rust needs for
//!    any module);
//! 2. its schema `schemas/foo.yaml`: `build.rs` compiles every `schemas/*.yaml` into
//!    `OUT_DIR/<name>.bin`, so it needs no edit;
//! 3. **one line in [`DRIVERS`]**: `crate::foo::DRIVER,`.
//!
//! A driver module left out of [`DRIVERS`] fails `tests/tests/architecture.rs`
//! (`every_driver_module_is_registered`); a schema with no driver, a driver with no
//! section in `docs/drivers.md`, or example specs that collide fail the tests below.
//!
//! [`DeviceSpec::device`]: crate::spec::DeviceSpec::device
//! [`DeviceSpec::simulated`]: crate::spec::DeviceSpec::simulated
//! [`DeviceSpec::parse`]: crate::spec::DeviceSpec::parse

use fcan_core::frame::Frame;

use crate::device::Device;
use crate::sim::SimDevice;
use crate::spec::{DeviceSpec, SpecError};

/// One driver, as the rest of the crate (and the tools) see it.
#[derive(Clone, Copy)]
pub struct Driver {
    /// The name `--device` and bus files use (`robstride`), and [`Device::driver`]'s; by
    /// convention also the name of the driver's module.
    pub name: &'static str,
    /// The driver in one line (`RobStride RS00–RS06 …`), for help and docs.
    pub about: &'static str,
    /// Every key its specs take, for help (the driver refuses any other, naming the
    /// keys it took).
    pub keys: &'static [&'static str],
    /// The device a spec names, configured ([`DeviceSpec::device`]).
    ///
    /// [`DeviceSpec::device`]: crate::spec::DeviceSpec::device
    pub from_spec: fn(&DeviceSpec) -> Result<Box<dyn Device>, SpecError>,
    /// A simulated device answering as the spec's would ([`DeviceSpec::simulated`]).
    ///
    /// [`DeviceSpec::simulated`]: crate::spec::DeviceSpec::simulated
    pub simulated: fn(&DeviceSpec) -> Result<Box<dyn SimDevice>, SpecError>,
    /// The schema blob the driver ships, compiled by `build.rs` from
    /// `schemas/<name>.yaml` (`include_bytes!(concat!(env!("OUT_DIR"), "/<name>.bin"))`).
    pub blob: &'static [u8],
    /// Specs (`--device` syntax) covering the driver's variants: what the fuzz target
    /// hosts and the tests build. Those of all drivers together must be valid devices on
    /// one CAN FD bus (no two on one node id or bus identity).
    pub examples: &'static [&'static str],
    /// Runs every decoder of the driver's wire format on `frame`, results dropped: the
    /// fuzz target's direct pass over the codecs (nothing may panic).
    pub decode_any: fn(&Frame),
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("name", &self.name)
            .field("about", &self.about)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// Every driver, in the order help lists them. **Register a driver here** (one line).
pub const DRIVERS: &[Driver] = &[
    crate::robstride::DRIVER,
    crate::mit::DRIVER,
    crate::cia402::DRIVER,
];

/// The driver called `name`.
pub fn find(name: &str) -> Option<&'static Driver> {
    DRIVERS.iter().find(|d| d.name == name)
}

/// The drivers' names, in table order.
pub fn names() -> impl Iterator<Item = &'static str> {
    DRIVERS.iter().map(|d| d.name)
}

/// The drivers' names joined with `, ` (`robstride, mit`), for messages.
pub fn names_joined() -> String {
    names().collect::<Vec<_>>().join(", ")
}

/// One line per driver, `NAME — ABOUT (keys: …)`, for a tool's help.
pub fn help() -> String {
    DRIVERS
        .iter()
        .map(|d| format!("{} — {} (keys: {})", d.name, d.about, d.keys.join(", ")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn crate_dir() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn names_are_unique_and_each_driver_is_found_by_its_name() {
        let names: BTreeSet<&str> = names().collect();
        assert_eq!(names.len(), DRIVERS.len(), "a name twice: {DRIVERS:?}");
        for d in DRIVERS {
            assert_eq!(find(d.name).map(|f| f.name), Some(d.name));
            assert!(!d.about.is_empty() && !d.about.contains('\n'), "{d:?}");
        }
        assert!(find("stepper").is_none());
    }

    /// Every example spec builds through the table (as a device and as a simulated
    /// one), each device reports its driver's name and ships its driver's schema, and
    /// all of them together are valid on one CAN FD bus (the fuzz target hosts them so).
    #[test]
    fn every_driver_builds_its_examples_through_the_table() {
        let mut all = Vec::new();
        for d in DRIVERS {
            assert!(!d.examples.is_empty(), "{} has no example spec", d.name);
            for e in d.examples {
                let spec = DeviceSpec::parse(e).unwrap_or_else(|err| panic!("{e}: {err}"));
                assert_eq!(spec.driver, d.name, "{e}");
                let dev = spec.device().unwrap_or_else(|err| panic!("{e}: {err}"));
                assert_eq!(dev.driver(), d.name, "{e}");
                let shipped = fcan_core::blob::decode(d.blob).expect("the shipped blob");
                let built = fcan_core::blob::decode(dev.blob()).expect("the device's blob");
                // The shipped schema, bounds adjusted to the device (a model's ranges).
                let shape = |s: &fcan_core::ir::Schema| -> Vec<(String, Vec<String>)> {
                    s.types
                        .iter()
                        .map(|t| {
                            (
                                t.name.clone(),
                                t.topics.iter().map(|p| p.name.clone()).collect(),
                            )
                        })
                        .collect()
                };
                assert_eq!(shape(&built), shape(&shipped), "{e}: the schema shipped");
                spec.simulated().unwrap_or_else(|err| panic!("{e}: {err}"));
                (d.decode_any)(&Frame::classic(fcan_core::frame::CanId::Standard(1), &[]).unwrap());
                all.push(spec);
            }
        }
        let devices = crate::spec::devices_on(&all, fcan_core::frame::Mtu::Fd)
            .unwrap_or_else(|e| panic!("the examples together: {e}"));
        crate::DeviceHost::new(fcan_core::frame::Mtu::Fd, devices)
            .unwrap_or_else(|e| panic!("the examples hosted together: {e}"));
    }

    /// A driver's `keys` are the keys it takes: an unknown key in each example is refused
    /// naming the keys the driver took, and those (over all examples) are its `keys`.
    #[test]
    fn every_driver_lists_the_keys_it_takes() {
        for d in DRIVERS {
            let mut taken = BTreeSet::new();
            for e in d.examples {
                let spec = DeviceSpec::parse(&format!("{e},zz_unknown=1")).unwrap();
                let err = spec.device().map(|_| ()).unwrap_err().0;
                let list = err
                    .split_once(&format!("{} takes: ", d.name))
                    .unwrap_or_else(|| panic!("{e}: {err}"))
                    .1;
                taken.extend(list.split(", ").map(str::to_owned));
            }
            let keys: BTreeSet<String> = d.keys.iter().map(|k| k.to_string()).collect();
            assert_eq!(
                taken, keys,
                "{}: the keys its examples take vs `keys`",
                d.name
            );
        }
    }

    /// `build.rs` compiles every `schemas/*.yaml`: each must be a registered driver's.
    #[test]
    fn every_schema_file_is_a_registered_drivers() {
        let mut stems = BTreeSet::new();
        for e in std::fs::read_dir(crate_dir().join("schemas")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                stems.insert(p.file_stem().unwrap().to_str().unwrap().to_owned());
            }
        }
        let names: BTreeSet<String> = names().map(str::to_owned).collect();
        assert_eq!(stems, names, "schemas/*.yaml vs the registered drivers");
    }

    /// `docs/drivers.md` has a section per driver (`### \`NAME\` — …`) and names this
    /// table in its recipe for adding one.
    #[test]
    fn the_guide_has_a_section_per_driver() {
        let guide = std::fs::read_to_string(crate_dir().join("../docs/drivers.md")).unwrap();
        let sections: BTreeSet<String> = guide
            .lines()
            .filter_map(|l| l.strip_prefix("### `"))
            .filter_map(|l| l.split_once("` — "))
            .map(|(name, _)| name.to_owned())
            .collect();
        let names: BTreeSet<String> = names().map(str::to_owned).collect();
        assert_eq!(sections, names, "docs/drivers.md's driver sections");
        assert!(
            guide.contains("## Adding a driver") && guide.contains("fcan-drivers/src/registry.rs")
        );
    }

    #[test]
    fn help_has_a_line_per_driver() {
        let help = help();
        assert_eq!(help.lines().count(), DRIVERS.len());
        assert!(help.starts_with("robstride — "), "{help}");
    }
}
