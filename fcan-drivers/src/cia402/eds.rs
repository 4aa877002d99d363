//! An EDS (CiA 306 electronic data sheet): which objects a drive has, their types,
//! access and defaults — enough for the driver never to write an object the drive lacks,
//! and for the simulated drive's object dictionary.
//!
//! The format is INI: a section per object (`[6040]`) and per sub-index (`[1A00sub1]`),
//! keys `ParameterName`, `ObjectType`, `DataType`, `AccessType`, `DefaultValue`,
//! `PDOMapping`, `SubNumber` (case-insensitive, CiA 306 §4.6), numbers in decimal or
//! `0x…` hex, and defaults that may say `$NODEID+0x180`.
//!
//! **A small parser here, not `rust-ini`:** adding a crate changes the workspace's
//! `Cargo.lock`, shared with work outside this driver, and the subset CiA 306 uses (no
//! quoting, no escapes, no multi-line values; `;` comments) is a dozen lines. Every
//! line that is not a section, a `key=value` or a comment is skipped, as CiA 306 tools do.
//!
//! **No EDS** (`eds=` absent): [`Eds::default_dictionary`], the objects a CiA 402 drive
//! in the modes the driver uses has (listed there), with CiA 402's defaults.

use std::collections::BTreeMap;

/// One object or sub-object of an EDS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `ParameterName`.
    pub name: String,
    /// `DataType` (CiA 301 Table 44: 0x0002 INTEGER8 … 0x0007 UNSIGNED32).
    pub data_type: u16,
    /// `AccessType` (`ro`, `wo`, `rw`, `rww`, `rwr`, `const`), lower case.
    pub access: String,
    /// `DefaultValue` as written (may say `$NODEID`).
    pub default: Option<String>,
    /// `PDOMapping`.
    pub pdo_mappable: bool,
}

impl Entry {
    /// The size of the type in bytes (4 for a type this reader does not size).
    pub fn size(&self) -> usize {
        data_type_size(self.data_type).unwrap_or(4)
    }

    /// Whether SDO may write it.
    pub fn writable(&self) -> bool {
        self.access.starts_with("rw") || self.access == "wo"
    }

    /// The default value for node `node`, if the EDS gives one that evaluates.
    pub fn default_value(&self, node: u8) -> Option<i64> {
        eval(self.default.as_deref()?, node)
    }
}

/// The size of a CiA 301 basic data type (Table 44), or `None` for one this reader does
/// not size (strings, domains).
pub fn data_type_size(t: u16) -> Option<usize> {
    Some(match t {
        0x0001 | 0x0002 | 0x0005 => 1,
        0x0003 | 0x0006 => 2,
        0x0010 | 0x0016 => 3,
        0x0004 | 0x0007 | 0x0008 => 4,
        0x0015 | 0x001B | 0x0011 => 8,
        _ => return None,
    })
}

/// A number as an EDS writes it: decimal, `0x` hex, or `$NODEID+…` / `…+$NODEID`.
pub fn eval(text: &str, node: u8) -> Option<i64> {
    let mut total: i64 = 0;
    for term in text.split('+') {
        let t = term.trim();
        let v = if t.eq_ignore_ascii_case("$NODEID") {
            i64::from(node)
        } else if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            i64::from_str_radix(h, 16).ok()?
        } else if t.is_empty() {
            return None;
        } else {
            t.parse().ok()?
        };
        total = total.checked_add(v)?;
    }
    Some(total)
}

/// The objects of a drive, by `(index, sub)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Eds {
    /// Every (sub-)object.
    pub objects: BTreeMap<(u16, u8), Entry>,
}

/// Why an EDS could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EdsError(pub String);

impl Eds {
    /// Parses an EDS's text.
    pub fn parse(text: &str) -> Result<Eds, EdsError> {
        let mut sections: Vec<(String, BTreeMap<String, String>)> = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                sections.push((name.trim().to_ascii_lowercase(), BTreeMap::new()));
            } else if let (Some((k, v)), Some((_, keys))) =
                (line.split_once('='), sections.last_mut())
            {
                let v = v.split(';').next().unwrap_or("").trim();
                keys.insert(k.trim().to_ascii_lowercase(), v.to_string());
            }
        }
        let mut objects = BTreeMap::new();
        for (name, keys) in &sections {
            let (index, sub) = match name.split_once("sub") {
                Some((i, s)) => (i, Some(s)),
                None => (name.as_str(), None),
            };
            if index.len() != 4 {
                continue; // [FileInfo], [DeviceInfo], [MandatoryObjects]…
            }
            let Ok(index) = u16::from_str_radix(index, 16) else {
                continue;
            };
            let sub = match sub {
                Some(s) => u8::from_str_radix(s, 16)
                    .map_err(|_| EdsError(format!("[{name}]: sub-index `{s}` is not hex")))?,
                None => 0,
            };
            // A record or array's own section describes the object, not a value: its
            // subs have their sections.
            if sub == 0 && keys.contains_key("subnumber") {
                continue;
            }
            let num = |k: &str| keys.get(k).and_then(|v| eval(v, 0));
            let entry = Entry {
                name: keys.get("parametername").cloned().unwrap_or_default(),
                data_type: num("datatype")
                    .and_then(|t| u16::try_from(t).ok())
                    .unwrap_or(0x0007),
                access: keys
                    .get("accesstype")
                    .map(|a| a.to_ascii_lowercase())
                    .unwrap_or_else(|| "rw".into()),
                default: keys.get("defaultvalue").cloned().filter(|d| !d.is_empty()),
                pdo_mappable: num("pdomapping").is_some_and(|m| m != 0),
            };
            objects.insert((index, sub), entry);
        }
        if objects.is_empty() {
            return Err(EdsError("no object sections ([1000], [6040]…)".into()));
        }
        Ok(Eds { objects })
    }

    /// Reads and parses the EDS at `path`.
    pub fn read(path: &std::path::Path) -> Result<Eds, EdsError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| EdsError(format!("{}: {e}", path.display())))?;
        Eds::parse(&text).map_err(|e| EdsError(format!("{}: {e}", path.display())))
    }

    /// `index:sub`, if the drive has it.
    pub fn get(&self, index: u16, sub: u8) -> Option<&Entry> {
        self.objects.get(&(index, sub))
    }

    /// Whether the drive has `index:sub`.
    pub fn has(&self, index: u16, sub: u8) -> bool {
        self.objects.contains_key(&(index, sub))
    }

    /// The name of `index:sub` (the EDS's, else the default dictionary's, else empty).
    pub fn name(&self, index: u16, sub: u8) -> String {
        self.get(index, sub)
            .map(|e| e.name.clone())
            .or_else(|| {
                Eds::default_dictionary()
                    .get(index, sub)
                    .map(|e| e.name.clone())
            })
            .unwrap_or_default()
    }

    /// The dictionary the driver assumes when it is given no EDS: the communication
    /// objects it writes (0x1016 sub 1, 0x1017, RPDO 0x1400–0x1403 / 0x1600–0x1601 and
    /// TPDO 0x1800–0x1803 / 0x1A00–0x1A01 with four mapping entries each) and the CiA 402
    /// objects of the modes pp, pv, csp, csv, cst: 0x603F, 0x6007, 0x6040, 0x6041,
    /// 0x6060, 0x6061, 0x6064, 0x606C, 0x6071, 0x6077, 0x607A, 0x608F sub 1–2, 0x6091
    /// sub 1–2, 0x60C2 sub 1–2, 0x60FF; defaults: 0x608F = 4096 increments per motor
    /// revolution, 0x6091 = 1:1, 0x60C2 = 1 × 10⁻³ s.
    pub fn default_dictionary() -> Eds {
        let mut o = BTreeMap::new();
        let mut add = |i: u16, s: u8, name: &str, t: u16, a: &str, d: &str, pdo: bool| {
            o.insert(
                (i, s),
                Entry {
                    name: name.into(),
                    data_type: t,
                    access: a.into(),
                    default: (!d.is_empty()).then(|| d.into()),
                    pdo_mappable: pdo,
                },
            );
        };
        const U8: u16 = 5;
        const U16: u16 = 6;
        const U32: u16 = 7;
        const I8: u16 = 2;
        const I16: u16 = 3;
        const I32: u16 = 4;
        add(0x1000, 0, "Device type", U32, "ro", "0x00020192", false);
        add(0x1001, 0, "Error register", U8, "ro", "0", false);
        add(0x1016, 0, "Consumer heartbeat time", U8, "ro", "1", false);
        add(
            0x1016,
            1,
            "Consumer heartbeat time 1",
            U32,
            "rw",
            "0",
            false,
        );
        add(0x1017, 0, "Producer heartbeat time", U16, "rw", "0", false);
        for n in 0..4u16 {
            let rpdo = ["0x200", "0x300", "0x400", "0x500"][n as usize];
            let tpdo = ["0x180", "0x280", "0x380", "0x480"][n as usize];
            add(
                0x1400 + n,
                1,
                &format!("RPDO {} COB-ID", n + 1),
                U32,
                "rw",
                &format!("$NODEID+{rpdo}"),
                false,
            );
            add(
                0x1400 + n,
                2,
                &format!("RPDO {} transmission type", n + 1),
                U8,
                "rw",
                "255",
                false,
            );
            add(
                0x1800 + n,
                1,
                &format!("TPDO {} COB-ID", n + 1),
                U32,
                "rw",
                &format!("$NODEID+{tpdo}"),
                false,
            );
            add(
                0x1800 + n,
                2,
                &format!("TPDO {} transmission type", n + 1),
                U8,
                "rw",
                "255",
                false,
            );
        }
        for n in 0..2u16 {
            add(
                0x1600 + n,
                0,
                &format!("RPDO {} mapping count", n + 1),
                U8,
                "rw",
                "0",
                false,
            );
            add(
                0x1A00 + n,
                0,
                &format!("TPDO {} mapping count", n + 1),
                U8,
                "rw",
                "0",
                false,
            );
            for s in 1..=4u8 {
                add(
                    0x1600 + n,
                    s,
                    &format!("RPDO {} mapping entry {s}", n + 1),
                    U32,
                    "rw",
                    "0",
                    false,
                );
                add(
                    0x1A00 + n,
                    s,
                    &format!("TPDO {} mapping entry {s}", n + 1),
                    U32,
                    "rw",
                    "0",
                    false,
                );
            }
        }
        add(0x603F, 0, "Error code", U16, "ro", "0", true);
        add(
            0x6007,
            0,
            "Abort connection option code",
            I16,
            "rw",
            "1",
            false,
        );
        add(0x6040, 0, "Controlword", U16, "rww", "0", true);
        add(0x6041, 0, "Statusword", U16, "ro", "0", true);
        add(0x6060, 0, "Modes of operation", I8, "rww", "0", true);
        add(0x6061, 0, "Modes of operation display", I8, "ro", "0", true);
        add(0x6064, 0, "Position actual value", I32, "ro", "0", true);
        add(0x606C, 0, "Velocity actual value", I32, "ro", "0", true);
        add(0x6071, 0, "Target torque", I16, "rww", "0", true);
        add(0x6077, 0, "Torque actual value", I16, "ro", "0", true);
        add(0x607A, 0, "Target position", I32, "rww", "0", true);
        add(
            0x608F,
            1,
            "Position encoder resolution: encoder increments",
            U32,
            "rw",
            "4096",
            false,
        );
        add(
            0x608F,
            2,
            "Position encoder resolution: motor revolutions",
            U32,
            "rw",
            "1",
            false,
        );
        add(
            0x6091,
            1,
            "Gear ratio: motor revolutions",
            U32,
            "rw",
            "1",
            false,
        );
        add(
            0x6091,
            2,
            "Gear ratio: shaft revolutions",
            U32,
            "rw",
            "1",
            false,
        );
        add(
            0x60C2,
            1,
            "Interpolation time period value",
            U8,
            "rw",
            "1",
            false,
        );
        add(0x60C2, 2, "Interpolation time index", I8, "rw", "-3", false);
        add(0x60FF, 0, "Target velocity", I32, "rww", "0", true);
        Eds { objects: o }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
[FileInfo]
FileName=drive.eds
; a comment
[1017]
ParameterName=Producer heartbeat time
ObjectType=0x7
DataType=0x0006
AccessType=rw
DefaultValue=0
PDOMapping=0

[1800]
SubNumber=2
ParameterName=TPDO 1 communication
ObjectType=0x9

[1800sub1]
ParameterName=COB-ID used by TPDO 1
DataType=0x0007
accesstype=RW
DefaultValue=$NODEID+0x180

[6041]
ParameterName=Statusword
DATATYPE=0x0006
AccessType=ro
PDOMapping=1
";

    #[test]
    fn reads_objects_subs_and_node_id_expressions() {
        let e = Eds::parse(SAMPLE).unwrap();
        assert!(e.has(0x1017, 0) && e.has(0x1800, 1) && e.has(0x6041, 0));
        assert!(!e.has(0x1800, 0), "the record's own section is no value");
        let cob = e.get(0x1800, 1).unwrap();
        assert_eq!(cob.default_value(5), Some(0x185));
        assert!(cob.writable());
        assert_eq!(cob.size(), 4);
        let sw = e.get(0x6041, 0).unwrap();
        assert!(sw.pdo_mappable && !sw.writable() && sw.size() == 2);
        assert_eq!(eval("0x7F", 0), Some(127));
        assert_eq!(eval("$NODEID+0x600", 3), Some(0x603));
        assert_eq!(eval("zz", 3), None);
        assert!(Eds::parse("[FileInfo]\nx=1\n").is_err());
    }
}
