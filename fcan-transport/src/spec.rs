//! Opening a transport from a spec string, as a command line gives it.
//!
//! | spec | transport |
//! |---|---|
//! | `socketcan:IFACE` | [`SocketCanTransport`] on `IFACE` (Linux) |
//! | `sim` | an FD endpoint on the [`SimBus`] the caller passes |
//! | `sim:classic`, `sim:fd` | a Classical-CAN-only / FD endpoint on that bus |
//! | `sim:OPTION,…` | the same with faults: `sim:classic,drop=1%,bus_off=100ms/60s` ([`SimSpec`]) |
//! | `replay:FILE` | [`ReplayTransport`] of the candump log `FILE`, as fast as asked |
//! | `udp-multicast`, `udp-multicast:OPTION,…` | a bus shared with python-can's `udp_multicast` interface (Linux; options in [`UdpMulticastSpec`]) |
//! | `slcan:PATH`, `slcan:PATH,OPTION,…` | a serial-line CAN adapter (slcan / Lawicel ASCII) on the serial device or pty `PATH` (Unix; options in [`slcan`](super::slcan#spec)) |
//!
//! # Faults on the simulated bus
//!
//! After `sim:` come options, comma-separated, in any order, each at most once:
//!
//! | option | meaning |
//! |---|---|
//! | `fd`, `classic` | the endpoint's frame kind (default `fd`) |
//! | `drop=P%` | a received frame is lost with probability P |
//! | `corrupt=P%` | a received frame has a bit flipped: the CRC catches it, a CRC bus error arrives instead of the frame |
//! | `corrupt_mode=detected\|undetected` | `undetected`: the frame arrives with its bit flipped (the CRC missed it) |
//! | `duplicate=P%` | a received frame arrives twice |
//! | `delay=P%` | a received frame is held back by `delay_by` (frames behind it overtake it) |
//! | `delay_by=DURATION` | how long (needed with `delay`) |
//! | `bus_off=DURATION/DURATION` | off the bus for the first duration once every second (`100ms/60s`): sends fail, nothing arrives, then a restart |
//! | `seed=N` | the draws' seed (a u64): the same seed draws the same faults |
//!
//! A probability is a percentage, always with its `%` sign (`1%`, `0.1%`, `100%`): a bare
//! `0.01` is refused rather than read as 1 % or as 0.01 %. A duration has its unit: `us`,
//! `ms` or `s` (`500us`, `2ms`, `1.5s`), at most a day.
//!
//! **Where they apply**: at *every* endpoint opened with the spec, each behind its own
//! [`FaultInjector`] on what it receives (see [`fault`](super::fault) for the draws). On a
//! bus the master and the nodes all open with one spec (`fcan fake --bus sim:drop=1%`, the
//! demo's `--bus`), a frame is lost, corrupted, duplicated or delayed for each receiver
//! independently, and each endpoint goes bus-off on its own timetable (the first bus-off
//! at a point of the first period drawn from its seed). With `seed=N` endpoint `k` of the
//! bus draws from `N` and `k`, so a run is reproducible as far as its timing is (fully
//! under a paused tokio clock); without it each endpoint draws a seed of its own
//! ([`pin_seed`] draws one for a whole command line, so it can be printed).

use std::time::Duration;

use fcan_core::frame::{Frame, Mtu};

use super::fault::{BusOffSchedule, CorruptMode, FaultConfig, FaultInjector};
use super::replay::{ReplayOptions, ReplayTransport};
use super::sim::{SimBus, SimEndpoint};
#[cfg(unix)]
use super::slcan::SlcanTransport;
#[cfg(target_os = "linux")]
use super::socketcan::SocketCanTransport;
#[cfg(target_os = "linux")]
use super::udp_multicast::{UdpMulticastSpec, UdpMulticastTransport};
use super::{Received, Transport, TransportError};

/// Any transport [`open`] can build.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyTransport {
    /// `socketcan:IFACE`.
    #[cfg(target_os = "linux")]
    SocketCan(SocketCanTransport),
    /// `sim`, `sim:classic`, `sim:fd`.
    Sim(SimEndpoint),
    /// `sim:` with faults (`sim:drop=1%`): an endpoint behind a [`FaultInjector`].
    SimFaults(FaultInjector<SimEndpoint>),
    /// `replay:FILE`.
    Replay(ReplayTransport),
    /// `udp-multicast`, `udp-multicast:OPTION,…`.
    #[cfg(target_os = "linux")]
    UdpMulticast(UdpMulticastTransport),
    /// `slcan:PATH[,OPTION,…]`.
    #[cfg(unix)]
    Slcan(SlcanTransport),
}

/// Opens the transport `spec` names (see the [table](self)); `sim` is the bus `sim` specs
/// attach to. Call inside a tokio runtime.
///
/// ```
/// use fcan_transport::{open, TransportError};
/// let err = open("can0", None).unwrap_err();
/// assert!(matches!(err, TransportError::InvalidSpec { .. }));
/// assert!(err.to_string().contains("socketcan:IFACE"));
/// ```
pub fn open(spec: &str, sim: Option<&SimBus>) -> Result<AnyTransport, TransportError> {
    let bad = |reason: &str| invalid(spec, reason);
    let (kind, arg) = match spec.split_once(':') {
        Some((k, a)) => (k, Some(a)),
        None => (spec, None),
    };
    match (kind, arg) {
        ("socketcan", Some(iface)) if !iface.is_empty() => {
            #[cfg(target_os = "linux")]
            {
                SocketCanTransport::open(iface).map(AnyTransport::SocketCan)
            }
            #[cfg(not(target_os = "linux"))]
            {
                Err(bad("SocketCAN exists on Linux only"))
            }
        }
        ("socketcan", _) => Err(bad(
            "`socketcan` needs an interface name, e.g. `socketcan:can0`",
        )),
        ("sim", _) => {
            let parsed = SimSpec::parse(spec)?;
            let bus = sim.ok_or_else(|| bad("`sim` needs a simulated bus, and none was given"))?;
            Ok(parsed.open(bus))
        }
        ("replay", Some(path)) if !path.is_empty() => {
            ReplayTransport::open(path, ReplayOptions::default()).map(AnyTransport::Replay)
        }
        ("replay", _) => Err(bad("`replay` needs a file, e.g. `replay:bus.log`")),
        ("udp-multicast", _) => {
            #[cfg(target_os = "linux")]
            {
                UdpMulticastSpec::parse(spec)?
                    .open()
                    .map(AnyTransport::UdpMulticast)
            }
            #[cfg(not(target_os = "linux"))]
            {
                Err(bad("`udp-multicast` is built on Linux only"))
            }
        }
        ("slcan", Some(rest)) if !rest.trim().is_empty() => {
            let parsed = super::slcan::SlcanSpec::parse(spec)?;
            #[cfg(unix)]
            {
                SlcanTransport::open(&parsed).map(AnyTransport::Slcan)
            }
            #[cfg(not(unix))]
            {
                let _ = parsed;
                Err(bad("`slcan` is built on Unix only"))
            }
        }
        ("slcan", _) => Err(bad(
            "`slcan` needs the adapter's serial device, e.g. `slcan:/dev/ttyACM0` or `slcan:/dev/ttyACM0,bitrate=500000`",
        )),
        ("lawicel" | "serial" | "canable" | "slcan0", _) => Err(bad(&format!(
            "unknown transport kind `{kind}`; did you mean `slcan:PATH` (a serial-line CAN adapter)?"
        ))),
        ("udp_multicast" | "udpmulticast" | "multicast" | "udp", _) => Err(bad(&format!(
            "unknown transport kind `{kind}`; did you mean `udp-multicast` (python-can's `udp_multicast` bus)?"
        ))),
        ("", _) => Err(bad("empty spec")),
        (other, _) => Err(bad(&format!("unknown transport kind `{other}`"))),
    }
}

fn invalid(spec: &str, reason: &str) -> TransportError {
    TransportError::InvalidSpec {
        spec: spec.to_string(),
        reason: reason.to_string(),
    }
}

/// The options of `sim:` a spec error lists.
const SIM_OPTIONS: &str = "sim options: `classic`, `fd`, `drop=P%`, `corrupt=P%`, \
`corrupt_mode=detected|undetected`, `duplicate=P%`, `delay=P%`, `delay_by=DURATION`, \
`bus_off=DURATION/DURATION`, `seed=N` (P a percentage from 0% to 100%, DURATION as \
`500us`, `2ms`, `1.5s`)";

/// Every option name, for "did you mean".
const SIM_KEYS: [&str; 10] = [
    "classic",
    "fd",
    "drop",
    "corrupt",
    "corrupt_mode",
    "duplicate",
    "delay",
    "delay_by",
    "bus_off",
    "seed",
];

/// Words people write for an option, and the option.
const SIM_SYNONYMS: [(&str, &str); 6] = [
    ("loss", "drop"),
    ("lose", "drop"),
    ("dup", "duplicate"),
    ("dupe", "duplicate"),
    ("busoff", "bus_off"),
    ("corruption", "corrupt"),
];

/// The longest duration an option takes.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// A simulated bus endpoint as a `sim[:OPTION,…]` spec describes it: its frame kind
/// and the faults it receives through (see the [module docs](self#faults-on-the-simulated-bus)).
///
/// ```
/// use std::time::Duration;
/// use fcan_transport::spec::SimSpec;
/// let s = SimSpec::parse("sim:classic,drop=1%,delay=5%,delay_by=2ms,seed=7").unwrap();
/// assert_eq!(s.faults.drop, 0.01);
/// assert_eq!(s.faults.delay_by, Duration::from_millis(2));
/// assert_eq!(s.seed, Some(7));
/// assert!(s.has_faults());
/// let e = SimSpec::parse("sim:drop=0.01").unwrap_err().to_string();
/// assert!(e.contains("did you mean `drop=1%`?"), "{e}");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct SimSpec {
    /// `fd` (the default) or `classic`.
    pub mtu: Mtu,
    /// The fault probabilities and parameters (none by default).
    pub faults: FaultConfig,
    /// `bus_off=LASTING/EVERY`.
    pub bus_off: Option<BusOffSchedule>,
    /// `seed=N`.
    pub seed: Option<u64>,
}

impl Default for SimSpec {
    /// `sim`: an FD endpoint without faults.
    fn default() -> Self {
        SimSpec {
            mtu: Mtu::Fd,
            faults: FaultConfig::default(),
            bus_off: None,
            seed: None,
        }
    }
}

impl SimSpec {
    /// Parses a whole spec, `sim` or `sim:OPTION,…`; every error is
    /// [`TransportError::InvalidSpec`] naming the option, its value and what is accepted.
    pub fn parse(spec: &str) -> Result<SimSpec, TransportError> {
        let opts = match spec.split_once(':') {
            None if spec == "sim" => return Ok(SimSpec::default()),
            Some(("sim", opts)) => opts,
            _ => {
                return Err(invalid(
                    spec,
                    "not a simulated bus (`sim` or `sim:OPTION,…`)",
                ))
            }
        };
        parse_options(opts).map_err(|reason| invalid(spec, &reason))
    }

    /// Whether any fault is asked for (a probability above zero, or a bus-off timetable).
    pub fn has_faults(&self) -> bool {
        let f = &self.faults;
        f.drop > 0.0
            || f.corrupt > 0.0
            || f.duplicate > 0.0
            || f.delay > 0.0
            || self.bus_off.is_some()
    }

    /// Attaches one endpoint to `bus`: a plain [`AnyTransport::Sim`] without faults, else
    /// an [`AnyTransport::SimFaults`] with its own injector (seeded from `seed` and the
    /// endpoint's number, or at random) and bus-off timetable. Call inside a tokio runtime.
    pub fn open(&self, bus: &SimBus) -> AnyTransport {
        let ep = bus.endpoint(self.mtu);
        if !self.has_faults() {
            return AnyTransport::Sim(ep);
        }
        let seed = match self.seed {
            Some(s) => endpoint_seed(s, ep.id().0),
            None => fastrand::u64(..),
        };
        let mut injector = FaultInjector::new(ep, self.faults, seed);
        if let Some(b) = self.bus_off {
            // The task ends with the injector.
            drop(injector.schedule_bus_off(b));
        }
        AnyTransport::SimFaults(injector)
    }
}

/// `spec` with a `seed` appended, drawn now, when it is a simulated bus with faults that
/// names none; any other spec unchanged. A command line opens every endpoint of its bus
/// with the result, so its log can show the seed and a later run can draw the same faults.
///
/// ```
/// use fcan_transport::spec::pin_seed;
/// assert!(pin_seed("sim:drop=1%").starts_with("sim:drop=1%,seed="));
/// assert_eq!(pin_seed("sim:drop=1%,seed=3"), "sim:drop=1%,seed=3");
/// assert_eq!(pin_seed("sim:classic"), "sim:classic");
/// assert_eq!(pin_seed("socketcan:can0"), "socketcan:can0");
/// ```
pub fn pin_seed(spec: &str) -> String {
    match SimSpec::parse(spec) {
        Ok(s) if s.has_faults() && s.seed.is_none() => {
            format!("{spec},seed={}", fastrand::u32(..))
        }
        _ => spec.to_string(),
    }
}

/// The seed of endpoint `k` of a bus whose spec says `seed`: distinct per endpoint
/// (splitmix64 of both), so two endpoints never draw the same sequence.
fn endpoint_seed(seed: u64, k: usize) -> u64 {
    let mut z = seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The options after `sim:`; `Err` is the reason.
fn parse_options(opts: &str) -> Result<SimSpec, String> {
    let mut s = SimSpec::default();
    let mut seen: Vec<&str> = Vec::new();
    let (mut delay_by, mut corrupt_mode) = (None, None);
    for item in opts.split(',') {
        let item = item.trim();
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (item, None),
        };
        if item.is_empty() {
            return Err(format!(
                "an empty option (a comma too many?); {SIM_OPTIONS}"
            ));
        }
        let canonical = SIM_KEYS.iter().find(|k| **k == key);
        let Some(&key) = canonical else {
            return Err(format!(
                "unknown sim option `{item}`{}; {SIM_OPTIONS}",
                hint(key)
            ));
        };
        let group = if matches!(key, "fd" | "classic") {
            "fd"
        } else {
            key
        };
        if seen.contains(&group) {
            return Err(if group == "fd" {
                format!("`{item}`: the frame kind is given twice (`fd` or `classic`, once)")
            } else {
                format!("`{key}` is given twice")
            });
        }
        seen.push(group);
        let value = match (key, value) {
            ("fd" | "classic", None) => "",
            ("fd" | "classic", Some(v)) => {
                return Err(format!("`{key}={v}`: `{key}` takes no value"))
            }
            (_, None) => return Err(format!("`{key}` needs a value: {}", usage(key))),
            (_, Some(v)) => v,
        };
        match key {
            "fd" => s.mtu = Mtu::Fd,
            "classic" => s.mtu = Mtu::Classic,
            "drop" => s.faults.drop = percent(key, value)?,
            "corrupt" => s.faults.corrupt = percent(key, value)?,
            "duplicate" => s.faults.duplicate = percent(key, value)?,
            "delay" => s.faults.delay = percent(key, value)?,
            "corrupt_mode" => {
                corrupt_mode = Some(value);
                s.faults.corrupt_mode = match value {
                    "detected" => CorruptMode::Detected,
                    "undetected" => CorruptMode::Undetected,
                    _ => return Err(format!("`{key}={value}`: {}", usage(key))),
                }
            }
            "delay_by" => {
                delay_by = Some(value);
                s.faults.delay_by = duration(key, value, value)?;
            }
            "bus_off" => {
                let Some((lasting, every)) = value.split_once('/') else {
                    return Err(format!("`{key}={value}`: {}", usage(key)));
                };
                let lasting = duration(key, value, lasting.trim())?;
                let every = duration(key, value, every.trim())?;
                if lasting >= every {
                    return Err(format!(
                        "`{key}={value}`: each bus-off must be shorter than its period; {}",
                        usage(key)
                    ));
                }
                s.bus_off = Some(BusOffSchedule { lasting, every });
            }
            "seed" => {
                s.seed = Some(
                    value
                        .parse()
                        .map_err(|_| format!("`{key}={value}`: {}", usage(key)))?,
                );
            }
            _ => unreachable!("every key of SIM_KEYS is handled"),
        }
    }
    let delay_given = seen.contains(&"delay");
    match (delay_given, delay_by) {
        (true, None) => {
            return Err(
                "`delay` needs `delay_by=DURATION`, how long a delayed frame is held back (e.g. `delay=1%,delay_by=2ms`)"
                    .into(),
            )
        }
        (false, Some(v)) => {
            return Err(format!(
                "`delay_by={v}` without `delay=P%`: no frame would be delayed (e.g. `delay=1%,delay_by={v}`)"
            ))
        }
        _ => {}
    }
    if let (false, Some(v)) = (seen.contains(&"corrupt"), corrupt_mode) {
        return Err(format!(
            "`corrupt_mode={v}` without `corrupt=P%`: no frame would be corrupted (e.g. `corrupt=0.1%,corrupt_mode={v}`)"
        ));
    }
    Ok(s)
}

/// What `key` takes, for its errors.
fn usage(key: &str) -> String {
    match key {
        "corrupt_mode" => "`corrupt_mode` is `detected` (the CRC catches the flipped bit: a CRC error arrives, the default) or `undetected` (the frame arrives with the bit flipped)".into(),
        "delay_by" => "`delay_by` is a duration with its unit, `500us`, `2ms` or `1.5s`, above zero, at most a day".into(),
        "bus_off" => "`bus_off=LASTING/EVERY`, two durations with their units: off the bus for LASTING once every EVERY, e.g. `bus_off=100ms/60s`".into(),
        "seed" => "`seed` is a whole number from 0 to 18446744073709551615".into(),
        _ => format!("`{key}` is a probability, a percentage from 0% to 100% with its `%` sign, e.g. `{key}=1%`"),
    }
}

/// "Did you mean" for an unknown option name, or nothing.
fn hint(word: &str) -> String {
    let lower = word.to_ascii_lowercase().replace('-', "_");
    let found = SIM_KEYS
        .iter()
        .copied()
        .find(|k| *k == lower)
        .or_else(|| {
            SIM_SYNONYMS
                .iter()
                .find(|(w, _)| *w == lower)
                .map(|(_, k)| *k)
        })
        .or_else(|| {
            SIM_KEYS
                .iter()
                .map(|k| (typos(&lower, k), *k))
                .filter(|(d, k)| *d <= (k.len() / 3).max(1))
                .min_by_key(|(d, _)| *d)
                .map(|(_, k)| k)
        })
        .or_else(|| {
            (lower.len() >= 2)
                .then(|| SIM_KEYS.iter().copied().find(|k| k.starts_with(&lower)))
                .flatten()
        });
    found.map_or_else(String::new, |k| format!(" (did you mean `{k}`?)"))
}

/// Typing mistakes from `a` to `b`: letters left out, added, changed or two swapped
/// (the optimal string alignment distance). Option names are short.
fn typos(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().take(32).collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, v) in d[0].iter_mut().enumerate() {
        *v = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// `P%` as a probability.
fn percent(key: &str, value: &str) -> Result<f64, String> {
    let bad = |extra: String| Err(format!("`{key}={value}`: {}{extra}", usage(key)));
    match value.strip_suffix('%') {
        Some(p) => match p.trim().parse::<f64>() {
            Ok(p) if p.is_finite() && (0.0..=100.0).contains(&p) => Ok(p / 100.0),
            _ => bad(String::new()),
        },
        None => match value.parse::<f64>() {
            // A bare fraction: say which percentage it would be.
            Ok(f) if f > 0.0 && f <= 1.0 => bad(format!(" (did you mean `{key}={}%`?)", f * 100.0)),
            _ if key == "delay" && duration(key, value, value).is_ok() => bad(format!(
                "; how long a delayed frame is held back is `delay_by={value}` (e.g. `delay=1%,delay_by={value}`)"
            )),
            _ => bad(String::new()),
        },
    }
}

/// One duration of `key=value` (`part`, all of it or one side of `bus_off`'s `/`).
fn duration(key: &str, value: &str, part: &str) -> Result<Duration, String> {
    let bad = || format!("`{key}={value}`: {}", usage(key));
    let (number, unit) = if let Some(n) = part.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = part.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = part.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(bad());
    };
    match number.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Duration::try_from_secs_f64(n * unit)
            .ok()
            .filter(|d| !d.is_zero() && *d <= MAX_DURATION)
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}

impl Transport for AnyTransport {
    fn name(&self) -> &str {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.name(),
            AnyTransport::Sim(t) => t.name(),
            AnyTransport::SimFaults(t) => t.name(),
            AnyTransport::Replay(t) => t.name(),
            #[cfg(target_os = "linux")]
            AnyTransport::UdpMulticast(t) => t.name(),
            #[cfg(unix)]
            AnyTransport::Slcan(t) => t.name(),
        }
    }

    fn mtu(&self) -> Mtu {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.mtu(),
            AnyTransport::Sim(t) => t.mtu(),
            AnyTransport::SimFaults(t) => t.mtu(),
            AnyTransport::Replay(t) => t.mtu(),
            #[cfg(target_os = "linux")]
            AnyTransport::UdpMulticast(t) => t.mtu(),
            #[cfg(unix)]
            AnyTransport::Slcan(t) => t.mtu(),
        }
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.send(frame).await,
            AnyTransport::Sim(t) => t.send(frame).await,
            AnyTransport::SimFaults(t) => t.send(frame).await,
            AnyTransport::Replay(t) => t.send(frame).await,
            #[cfg(target_os = "linux")]
            AnyTransport::UdpMulticast(t) => t.send(frame).await,
            #[cfg(unix)]
            AnyTransport::Slcan(t) => t.send(frame).await,
        }
    }

    async fn send_batch(&mut self, frames: &[Frame]) -> Result<usize, TransportError> {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.send_batch(frames).await,
            AnyTransport::Sim(t) => t.send_batch(frames).await,
            AnyTransport::SimFaults(t) => t.send_batch(frames).await,
            AnyTransport::Replay(t) => t.send_batch(frames).await,
            #[cfg(target_os = "linux")]
            AnyTransport::UdpMulticast(t) => t.send_batch(frames).await,
            #[cfg(unix)]
            AnyTransport::Slcan(t) => t.send_batch(frames).await,
        }
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        match self {
            #[cfg(target_os = "linux")]
            AnyTransport::SocketCan(t) => t.recv().await,
            AnyTransport::Sim(t) => t.recv().await,
            AnyTransport::SimFaults(t) => t.recv().await,
            AnyTransport::Replay(t) => t.recv().await,
            #[cfg(target_os = "linux")]
            AnyTransport::UdpMulticast(t) => t.recv().await,
            #[cfg(unix)]
            AnyTransport::Slcan(t) => t.recv().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::CorruptMode;

    fn reason(spec: &str, bus: Option<&SimBus>) -> String {
        match open(spec, bus) {
            Err(e @ TransportError::InvalidSpec { .. }) => e.to_string(),
            other => panic!("{spec}: {other:?}"),
        }
    }

    fn sim(spec: &str) -> SimSpec {
        SimSpec::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e}"))
    }

    fn sim_err(spec: &str) -> String {
        match SimSpec::parse(spec) {
            Err(e @ TransportError::InvalidSpec { .. }) => e.to_string(),
            other => panic!("{spec}: {other:?}"),
        }
    }

    #[tokio::test]
    async fn specs() {
        let bus = SimBus::new(Default::default());
        assert!(matches!(open("sim", Some(&bus)), Ok(AnyTransport::Sim(t)) if t.mtu() == Mtu::Fd));
        assert!(
            matches!(open("sim:classic", Some(&bus)), Ok(AnyTransport::Sim(t)) if t.mtu() == Mtu::Classic)
        );
        assert!(reason("sim", None).contains("needs a simulated bus"));
        assert!(reason("sim:xl", Some(&bus)).contains("unknown sim option `xl`"));
        assert!(reason("socketcan", None).contains("needs an interface name"));
        assert!(reason("socketcan:", None).contains("needs an interface name"));
        assert!(reason("can0", None).contains("unknown transport kind `can0`"));
        assert!(reason("udp_multicast", None).contains("did you mean `udp-multicast`"));
        assert!(reason("udp-multicast:ttl=300", None).contains("0 to 255"));
        assert!(reason("", None).contains("empty spec"));
        assert!(reason("replay:", None).contains("needs a file"));
        // every spec error lists what is accepted
        assert!(reason("x", None).contains("accepted: `socketcan:IFACE`, `sim`"));
        #[cfg(target_os = "linux")]
        assert!(matches!(
            open("socketcan:fcan-nosuch0", None),
            Err(TransportError::NoSuchInterface(n)) if n == "fcan-nosuch0"
        ));
        assert!(matches!(
            open("replay:/nonexistent/fcan.log", None),
            Err(TransportError::Io(e)) if e.to_string().contains("/nonexistent/fcan.log")
        ));
    }

    #[test]
    fn fault_specs_parse() {
        assert_eq!(sim("sim"), SimSpec::default());
        assert_eq!(sim("sim:fd"), SimSpec::default());
        assert!(!sim("sim:classic").has_faults());
        let s = sim("sim:drop=1%,corrupt=0.1%,duplicate=0.5%,delay=2%,delay_by=2ms,bus_off=100ms/60s,seed=42");
        assert_eq!(s.mtu, Mtu::Fd);
        assert_eq!(s.faults.drop, 0.01);
        assert_eq!(s.faults.corrupt, 0.001);
        assert_eq!(s.faults.duplicate, 0.005);
        assert_eq!(s.faults.delay, 0.02);
        assert_eq!(s.faults.delay_by, Duration::from_millis(2));
        assert_eq!(s.faults.corrupt_mode, CorruptMode::Detected);
        assert_eq!(
            s.bus_off,
            Some(BusOffSchedule {
                lasting: Duration::from_millis(100),
                every: Duration::from_secs(60)
            })
        );
        assert_eq!(s.seed, Some(42));
        assert!(s.has_faults());
        // Any order, spaces around the parts, the frame kind anywhere.
        let s = sim("sim: seed=1 , classic, corrupt_mode=undetected,corrupt=100%");
        assert_eq!(s.mtu, Mtu::Classic);
        assert_eq!(s.faults.corrupt, 1.0);
        assert_eq!(s.faults.corrupt_mode, CorruptMode::Undetected);
        // Zero is no fault; a seed alone is none either.
        assert!(!sim("sim:drop=0%").has_faults());
        assert!(!sim("sim:seed=9").has_faults());
        assert!(sim("sim:bus_off=1ms/2ms").has_faults());
        // Durations in every unit, fractions too.
        assert_eq!(
            sim("sim:delay=1%,delay_by=500us").faults.delay_by,
            Duration::from_micros(500)
        );
        assert_eq!(
            sim("sim:delay=1%,delay_by=1.5s").faults.delay_by,
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn fault_spec_errors_name_the_option_the_value_and_what_is_accepted() {
        let cases: &[(&str, &[&str])] = &[
            // A bare number: refused, with the percentage it would be.
            (
                "sim:drop=0.01",
                &[
                    "`drop=0.01`",
                    "percentage from 0% to 100%",
                    "did you mean `drop=1%`?",
                ],
            ),
            ("sim:drop=1", &["`drop=1`", "did you mean `drop=100%`?"]),
            ("sim:drop=5", &["`drop=5`", "with its `%` sign"]),
            ("sim:drop=120%", &["`drop=120%`", "from 0% to 100%"]),
            ("sim:drop=-1%", &["`drop=-1%`"]),
            ("sim:drop=nan%", &["`drop=nan%`"]),
            ("sim:drop=", &["`drop=`"]),
            ("sim:drop", &["`drop` needs a value", "`drop=1%`"]),
            // Unknown options: did you mean, then the whole list.
            (
                "sim:dorp=1%",
                &[
                    "unknown sim option `dorp=1%`",
                    "did you mean `drop`?",
                    "sim options: `classic`, `fd`, `drop=P%`",
                ],
            ),
            ("sim:loss=1%", &["did you mean `drop`?"]),
            ("sim:dup=0.5%", &["did you mean `duplicate`?"]),
            ("sim:busoff=1s/10s", &["did you mean `bus_off`?"]),
            ("sim:Drop=1%", &["did you mean `drop`?"]),
            ("sim:bus-off=1s/10s", &["did you mean `bus_off`?"]),
            ("sim:xl", &["unknown sim option `xl`", "`seed=N`"]),
            ("sim:", &["an empty option"]),
            ("sim:drop=1%,", &["an empty option"]),
            // Repeats and conflicts.
            ("sim:drop=1%,drop=2%", &["`drop` is given twice"]),
            (
                "sim:fd,classic",
                &["`classic`: the frame kind is given twice"],
            ),
            ("sim:classic=1", &["`classic` takes no value"]),
            // delay is a probability; how long is delay_by.
            ("sim:delay=2ms", &["`delay=2ms`", "`delay_by=2ms`"]),
            ("sim:delay=1%", &["`delay` needs `delay_by=DURATION`"]),
            ("sim:delay_by=2ms", &["`delay_by=2ms` without `delay=P%`"]),
            (
                "sim:delay=1%,delay_by=2",
                &["`delay_by=2`", "`500us`, `2ms` or `1.5s`"],
            ),
            (
                "sim:delay=1%,delay_by=0ms",
                &["`delay_by=0ms`", "above zero"],
            ),
            ("sim:delay=1%,delay_by=2h", &["`delay_by=2h`"]),
            ("sim:delay=1%,delay_by=100000s", &["at most a day"]),
            ("sim:corrupt_mode=undetected", &["without `corrupt=P%`"]),
            (
                "sim:corrupt=1%,corrupt_mode=maybe",
                &["`corrupt_mode=maybe`", "`detected`", "`undetected`"],
            ),
            (
                "sim:bus_off=100ms",
                &[
                    "`bus_off=100ms`",
                    "`bus_off=LASTING/EVERY`",
                    "`bus_off=100ms/60s`",
                ],
            ),
            (
                "sim:bus_off=10s/1s",
                &["`bus_off=10s/1s`", "shorter than its period"],
            ),
            ("sim:bus_off=1s/1s", &["shorter than its period"]),
            ("sim:bus_off=1x/10s", &["`bus_off=1x/10s`"]),
            ("sim:seed=-1", &["`seed=-1`", "whole number"]),
        ];
        for (spec, wanted) in cases {
            let e = sim_err(spec);
            // The spec as given, and the list of transports, always.
            assert!(e.contains(&format!("bad transport spec `{spec}`")), "{e}");
            assert!(e.contains("accepted: `socketcan:IFACE`"), "{e}");
            for w in *wanted {
                assert!(e.contains(w), "{spec}: wanted {w:?} in: {e}");
            }
        }
        // open() says the same.
        let bus_less = reason("sim:dorp=1%", None);
        assert!(bus_less.contains("did you mean `drop`?"), "{bus_less}");
        // No hint for a word like no option.
        assert!(!sim_err("sim:zzzz=1").contains("did you mean"));
    }

    #[test]
    fn endpoint_seeds_differ() {
        let s: Vec<u64> = (0..4).map(|k| endpoint_seed(7, k)).collect();
        assert!(s
            .iter()
            .enumerate()
            .all(|(i, a)| s[i + 1..].iter().all(|b| a != b)));
        assert_eq!(endpoint_seed(7, 2), endpoint_seed(7, 2));
        assert_ne!(endpoint_seed(7, 2), endpoint_seed(8, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn faults_apply_at_every_endpoint_opened_with_the_spec() {
        use fcan_core::frame::CanId;
        let bus = SimBus::new(Default::default());
        let spec = "sim:drop=50%,seed=1";
        let mut a = open(spec, Some(&bus)).unwrap();
        let mut b = open(spec, Some(&bus)).unwrap();
        let mut plain = open("sim", Some(&bus)).unwrap();
        assert!(matches!(a, AnyTransport::SimFaults(_)));
        assert!(matches!(plain, AnyTransport::Sim(_)));
        let mut tx = bus.endpoint_with(crate::sim::EndpointConfig {
            tx_queue_len: 1000,
            ..Default::default()
        });
        for i in 0..200u8 {
            tx.send(&Frame::fd(CanId::Standard(0x100), &[i]).unwrap())
                .await
                .unwrap();
        }
        let (na, nb, np) = (
            count(&mut a).await,
            count(&mut b).await,
            count(&mut plain).await,
        );
        assert_eq!(np, 200);
        // Each lost about half, each by its own draws.
        assert!(
            (60..140).contains(&na) && (60..140).contains(&nb),
            "{na} {nb}"
        );
    }

    /// Frames `t` receives until the bus has been quiet for a second.
    async fn count(t: &mut AnyTransport) -> usize {
        let mut n = 0;
        while let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), t.recv()).await {
            n += 1;
        }
        n
    }
}
