//! A bus shared with python-can's `udp_multicast` interface: CAN and CAN FD frames as UDP
//! datagrams to one IP multicast group, so every python-can program on the machine that
//! opens `can.Bus(interface="udp_multicast")` is on the same bus as the fcan processes.
//!
//! # The wire (python-can's, `can/interfaces/udp_multicast/utils.py`)
//!
//! One datagram per frame, to the group and port, holding one MessagePack map with the
//! fields of a `can.Message`:
//!
//! | key | type | fcan sends | fcan accepts |
//! |---|---|---|---|
//! | `timestamp` | float | wall-clock seconds since 1970 | anything (python-can replaces it with its receive time too) |
//! | `arbitration_id` | int | the identifier | below 2¹¹ (standard) or 2²⁹ (extended) |
//! | `is_extended_id` | bool | `true` for a 29-bit identifier | bool (missing: `true`, python-can's default) |
//! | `is_remote_frame` | bool | `false` | `false` (fcan has no remote frames: dropped) |
//! | `is_error_frame` | bool | `false` | `false` (an error frame: dropped) |
//! | `channel` | any | nil | anything |
//! | `dlc` | int | the payload's length in bytes (python-can's `dlc` is a length, 64 for a full FD frame) | nil or the length of `data` |
//! | `data` | bin | the payload | bin or an array of bytes, at most 8 (Classical) or 64 (FD) |
//! | `is_fd` | bool | the frame kind | bool |
//! | `bitrate_switch` | bool | BRS | bool, only with `is_fd` |
//! | `error_state_indicator` | bool | `false` (fcan has no ESI) | bool, only with `is_fd`; ignored |
//!
//! Missing keys take python-can's `Message` defaults; keys python-can does not write are
//! ignored. An FD payload of a length no FD frame has (python-can lets a program send
//! 13 bytes) is zero-padded to the next FD length (16), as a controller puts it on a real
//! bus. Anything else — not MessagePack, not a map, a wrong type, a too-wide identifier,
//! a payload over 64 bytes, a `dlc` that does not match — is counted
//! ([`UdpMulticastStats::malformed`]) and dropped; nothing from the network panics.
//!
//! # Groups, port, reach
//!
//! python-can's defaults: group `ff15:7079:7468:6f6e:6465:6d6f:6d63:6173` (IPv6, its
//! default channel) or `239.74.163.2` (IPv4), port 43113, hop limit 1. fcan takes the
//! same group and port, but **joins and sends on `lo` only** unless `iface=` says
//! otherwise: nothing leaves the machine until asked (invariant 12, like the Zenoh face).
//! `lo` needs multicast switched on and a route for the group (what `.ci/lib.sh`'s
//! `loopback_netns` does): `ip link set lo multicast on`, `ip route add 224.0.0.0/4 dev
//! lo`, and for IPv6 `ip -6 route add local ff00::/8 dev lo`.
//!
//! # Not hearing itself, hearing the others
//!
//! python-can binds its one socket to the port and sends from it, so every sender on a
//! host has the same source address (its IP, port 43113) — and multicast loops a sent
//! datagram back to the sender's own socket. fcan sends from a second socket of its own,
//! connected to the group, so its datagrams carry a source port no other process has;
//! the receiving socket drops exactly the datagrams from that address. Two fcan
//! processes (or an fcan process and python-can) on one host hear each other; a
//! transport never hears itself, as [`Transport::recv`] promises.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::time::{SystemTime, UNIX_EPOCH};

use fcan_core::frame::{fd_padded_len, CanId, Frame, Mtu, CLASSIC_MAX_LEN, FD_MAX_LEN};
use rmpv::Value;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;

use super::{check_id, check_mtu, Received, Transport, TransportError};

/// python-can's default group, IPv6 (`UdpMulticastBus.DEFAULT_GROUP_IPv6`).
pub const DEFAULT_GROUP_V6: Ipv6Addr = Ipv6Addr::new(
    0xff15, 0x7079, 0x7468, 0x6f6e, 0x6465, 0x6d6f, 0x6d63, 0x6173,
);
/// python-can's IPv4 group (`UdpMulticastBus.DEFAULT_GROUP_IPv4`).
pub const DEFAULT_GROUP_V4: Ipv4Addr = Ipv4Addr::new(239, 74, 163, 2);
/// python-can's default port.
pub const DEFAULT_PORT: u16 = 43113;
/// The interface fcan joins and sends on unless told otherwise.
pub const DEFAULT_IFACE: &str = "lo";
/// The multicast TTL / hop limit unless told otherwise (python-can's default).
pub const DEFAULT_TTL: u32 = 1;
/// The largest datagram read, as python-can's `max_buffer`; a frame's map is under 200
/// bytes.
pub const MAX_DATAGRAM: usize = 4096;
/// How deep a received MessagePack value may nest, in rmpv's count (a map of byte
/// strings takes 5 levels; a frame's map nests no deeper).
const MAX_DEPTH: usize = 16;

/// A `udp-multicast[:OPTION,…]` spec: where the bus is and which frames it carries.
///
/// ```
/// use fcan_transport::udp_multicast::{UdpMulticastSpec, DEFAULT_GROUP_V4, DEFAULT_PORT};
/// use fcan_core::frame::Mtu;
/// let s = UdpMulticastSpec::parse("udp-multicast").unwrap();
/// assert_eq!((s.mtu, s.port, s.iface.as_str(), s.ttl), (Mtu::Fd, DEFAULT_PORT, "lo", 1));
/// let s = UdpMulticastSpec::parse("udp-multicast:ipv4,classic,port=5000").unwrap();
/// assert_eq!((s.group, s.port, s.mtu), (DEFAULT_GROUP_V4.into(), 5000, Mtu::Classic));
/// assert!(UdpMulticastSpec::parse("udp-multicast:group=10.0.0.1").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdpMulticastSpec {
    /// The multicast group (`group=ADDR`, `ipv4`, `ipv6`; python-can's IPv6 group by default).
    pub group: IpAddr,
    /// The UDP port (`port=N`, 43113 by default).
    pub port: u16,
    /// The interface joined and sent on (`iface=NAME`, `lo` by default).
    pub iface: String,
    /// The multicast TTL / hop limit (`ttl=N`, 1 by default).
    pub ttl: u32,
    /// `fd` (the default) or `classic`: a Classical link ignores FD frames from the bus,
    /// as python-can's `fd=False` does, and refuses to send them.
    pub mtu: Mtu,
}

impl Default for UdpMulticastSpec {
    fn default() -> Self {
        UdpMulticastSpec {
            group: IpAddr::V6(DEFAULT_GROUP_V6),
            port: DEFAULT_PORT,
            iface: DEFAULT_IFACE.to_string(),
            ttl: DEFAULT_TTL,
            mtu: Mtu::Fd,
        }
    }
}

/// What the options of `udp-multicast:` are, for errors.
const OPTIONS: &str = "udp-multicast options: `fd`, `classic`, `ipv4`, `ipv6` (python-can's \
groups), `group=ADDR` (a multicast address), `port=N`, `iface=NAME` (`lo` by default), \
`ttl=N` (0 to 255, 1 by default)";

impl UdpMulticastSpec {
    /// Parses `udp-multicast` or `udp-multicast:OPTION,…`; every error is
    /// [`TransportError::InvalidSpec`] naming the option and what is accepted.
    pub fn parse(spec: &str) -> Result<UdpMulticastSpec, TransportError> {
        let bad = |reason: String| TransportError::InvalidSpec {
            spec: spec.to_string(),
            reason,
        };
        let opts = match spec.split_once(':') {
            None if spec == "udp-multicast" => return Ok(UdpMulticastSpec::default()),
            Some(("udp-multicast", opts)) => opts,
            _ => {
                return Err(bad(
                    "not a UDP multicast bus (`udp-multicast` or `udp-multicast:OPTION,…`)".into(),
                ))
            }
        };
        let mut s = UdpMulticastSpec::default();
        let mut seen: Vec<&str> = Vec::new();
        for item in opts.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(bad(format!(
                    "an empty option (a comma too many?); {OPTIONS}"
                )));
            }
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            let slot = match key {
                "fd" | "classic" => "fd",
                "ipv4" | "ipv6" | "group" => "group",
                "port" | "iface" | "ttl" => key,
                _ => return Err(bad(format!("unknown option `{item}`; {OPTIONS}"))),
            };
            if seen.contains(&slot) {
                return Err(bad(format!(
                    "`{item}`: {} is given twice",
                    match slot {
                        "fd" => "the frame kind (`fd` or `classic`)",
                        "group" => "the group (`ipv4`, `ipv6` or `group=ADDR`)",
                        other => other,
                    }
                )));
            }
            seen.push(slot);
            match (key, value) {
                ("fd", None) => s.mtu = Mtu::Fd,
                ("classic", None) => s.mtu = Mtu::Classic,
                ("ipv4", None) => s.group = IpAddr::V4(DEFAULT_GROUP_V4),
                ("ipv6", None) => s.group = IpAddr::V6(DEFAULT_GROUP_V6),
                ("fd" | "classic" | "ipv4" | "ipv6", Some(v)) => {
                    return Err(bad(format!("`{key}={v}`: `{key}` takes no value")))
                }
                (_, None) => return Err(bad(format!("`{key}` needs a value; {OPTIONS}"))),
                ("group", Some(v)) => {
                    let addr: IpAddr = v
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .parse()
                        .map_err(|_| bad(format!("`group={v}`: not an IP address")))?;
                    if !addr.is_multicast() {
                        return Err(bad(format!(
                            "`group={v}`: not a multicast address (IPv4 224.0.0.0/4, IPv6 ff00::/8)"
                        )));
                    }
                    s.group = addr;
                }
                ("port", Some(v)) => {
                    s.port = v
                        .parse()
                        .ok()
                        .filter(|p| *p != 0)
                        .ok_or_else(|| bad(format!("`port={v}`: a port from 1 to 65535")))?;
                }
                ("iface", Some(v)) => {
                    if v.is_empty() {
                        return Err(bad(
                            "`iface=` needs an interface name, e.g. `iface=eth0`".into()
                        ));
                    }
                    s.iface = v.to_string();
                }
                ("ttl", Some(v)) => {
                    s.ttl =
                        v.parse().ok().filter(|t| *t <= 255).ok_or_else(|| {
                            bad(format!("`ttl={v}`: a whole number from 0 to 255"))
                        })?;
                }
                _ => unreachable!("every option is handled"),
            }
        }
        Ok(s)
    }

    /// Opens the link: joins the group on the interface and makes the sending socket.
    /// Call inside a tokio runtime.
    pub fn open(&self) -> Result<UdpMulticastTransport, TransportError> {
        UdpMulticastTransport::open(self)
    }
}

/// What a [`UdpMulticastTransport`] counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdpMulticastStats {
    /// Frames delivered by `recv`.
    pub received: u64,
    /// Frames sent.
    pub sent: u64,
    /// Datagrams dropped as not a frame fcan can carry (see the [module docs](self)).
    pub malformed: u64,
    /// FD frames a Classical link ignored.
    pub fd_ignored: u64,
    /// Our own datagrams, looped back by the host and dropped.
    pub own: u64,
}

/// A link to a python-can `udp_multicast` bus (see the [module docs](self)).
pub struct UdpMulticastTransport {
    name: String,
    mtu: Mtu,
    rx: UdpSocket,
    tx: UdpSocket,
    /// The sending socket's address: datagrams from it are our own.
    own: SocketAddr,
    buf: Vec<u8>,
    stats: UdpMulticastStats,
}

impl core::fmt::Debug for UdpMulticastTransport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UdpMulticastTransport")
            .field("name", &self.name)
            .field("mtu", &self.mtu)
            .field("own", &self.own)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// An open-time error with what to do about it.
fn open_error(spec: &UdpMulticastSpec, what: &str, e: io::Error) -> TransportError {
    let hint = if spec.iface == DEFAULT_IFACE {
        match spec.group {
            IpAddr::V4(_) => " (multicast on lo needs `ip link set lo multicast on` and `ip route add 224.0.0.0/4 dev lo`)",
            IpAddr::V6(_) => " (multicast on lo needs `ip link set lo multicast on` and `ip -6 route add local ff00::/8 dev lo`)",
        }
    } else {
        ""
    };
    TransportError::Io(io::Error::new(
        e.kind(),
        format!(
            "udp-multicast {} port {} on {}: {what}: {e}{hint}",
            spec.group, spec.port, spec.iface
        ),
    ))
}

/// The interface's index, or `NoSuchInterface`.
fn iface_index(iface: &str) -> Result<u32, TransportError> {
    nix::net::if_::if_nametoindex(iface)
        .map_err(|_| TransportError::NoSuchInterface(iface.to_string()))
}

/// The interface's first IPv4 address (IPv4 multicast names an interface by one).
fn iface_v4(iface: &str) -> Result<Ipv4Addr, TransportError> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(|e| TransportError::Io(e.into()))?;
    for a in addrs {
        if a.interface_name != iface {
            continue;
        }
        if let Some(sin) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()) {
            return Ok(sin.ip());
        }
    }
    Err(TransportError::NoSuchInterface(format!(
        "{iface} (no interface of that name with an IPv4 address)"
    )))
}

impl UdpMulticastTransport {
    /// Opens the link `spec` describes. Call inside a tokio runtime.
    pub fn open(spec: &UdpMulticastSpec) -> Result<UdpMulticastTransport, TransportError> {
        let err = |what: &str| {
            let spec = spec.clone();
            let what = what.to_string();
            move |e: io::Error| open_error(&spec, &what, e)
        };
        let domain = match spec.group {
            IpAddr::V4(_) => Domain::IPV4,
            IpAddr::V6(_) => Domain::IPV6,
        };
        let group = SocketAddr::new(spec.group, spec.port);

        // Receiving: bound to the group and port, shared with every other member on the
        // host (python-can sets both reuse options too).
        let rx = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP)).map_err(err("socket"))?;
        rx.set_reuse_address(true).map_err(err("SO_REUSEADDR"))?;
        rx.set_reuse_port(true).map_err(err("SO_REUSEPORT"))?;
        // Bound to the group address (not the wildcard): only this group's datagrams
        // arrive. An IPv6 group of link-local scope (ff02::…) needs the interface too.
        let bind_to = match spec.group {
            IpAddr::V6(g) => SocketAddr::V6(SocketAddrV6::new(
                g,
                spec.port,
                0,
                iface_index(&spec.iface)?,
            )),
            IpAddr::V4(_) => group,
        };
        rx.bind(&bind_to.into()).map_err(err("bind"))?;
        // Sending: its own port, so our datagrams are told from everyone else's.
        let tx = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP)).map_err(err("socket"))?;
        match spec.group {
            IpAddr::V4(g) => {
                let addr = iface_v4(&spec.iface)?;
                rx.set_multicast_all_v4(false)
                    .map_err(err("IP_MULTICAST_ALL"))?;
                rx.join_multicast_v4(&g, &addr)
                    .map_err(err("joining the group"))?;
                tx.set_multicast_if_v4(&addr)
                    .map_err(err("IP_MULTICAST_IF"))?;
                tx.set_multicast_ttl_v4(spec.ttl)
                    .map_err(err("IP_MULTICAST_TTL"))?;
                tx.set_multicast_loop_v4(true)
                    .map_err(err("IP_MULTICAST_LOOP"))?;
                tx.bind(&SocketAddr::new(addr.into(), 0).into())
                    .map_err(err("bind"))?;
            }
            IpAddr::V6(g) => {
                let index = iface_index(&spec.iface)?;
                rx.set_multicast_all_v6(false)
                    .map_err(err("IPV6_MULTICAST_ALL"))?;
                rx.join_multicast_v6(&g, index)
                    .map_err(err("joining the group"))?;
                tx.set_multicast_if_v6(index)
                    .map_err(err("IPV6_MULTICAST_IF"))?;
                tx.set_multicast_hops_v6(spec.ttl)
                    .map_err(err("IPV6_MULTICAST_HOPS"))?;
                tx.set_multicast_loop_v6(true)
                    .map_err(err("IPV6_MULTICAST_LOOP"))?;
            }
        }
        // Connecting picks the source address the datagrams will carry (by the multicast
        // interface), which is the address to drop on receipt.
        tx.connect(&group.into()).map_err(err("connect"))?;
        let own = tx
            .local_addr()
            .map_err(err("local address"))?
            .as_socket()
            .ok_or_else(|| open_error(spec, "local address", io::ErrorKind::Other.into()))?;
        rx.set_nonblocking(true).map_err(err("O_NONBLOCK"))?;
        tx.set_nonblocking(true).map_err(err("O_NONBLOCK"))?;
        let rx = UdpSocket::from_std(rx.into()).map_err(err("tokio"))?;
        let tx = UdpSocket::from_std(tx.into()).map_err(err("tokio"))?;
        Ok(UdpMulticastTransport {
            name: "udp-multicast".to_string(),
            mtu: spec.mtu,
            rx,
            tx,
            own,
            buf: vec![0; MAX_DATAGRAM],
            stats: UdpMulticastStats::default(),
        })
    }

    /// What it has counted so far.
    pub fn stats(&self) -> UdpMulticastStats {
        self.stats
    }

    /// The address its datagrams come from (the ones it drops as its own).
    pub fn source(&self) -> SocketAddr {
        self.own
    }
}

impl Transport for UdpMulticastTransport {
    fn name(&self) -> &str {
        &self.name
    }

    fn mtu(&self) -> Mtu {
        self.mtu
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        check_id(frame)?;
        check_mtu(&self.name, self.mtu, frame)?;
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let bytes = encode(frame, timestamp);
        match self.tx.send(&bytes).await {
            Ok(_) => {
                self.stats.sent += 1;
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOBUFS) => {
                Err(TransportError::TxQueueFull)
            }
            Err(e) => Err(TransportError::Io(e)),
        }
    }

    async fn recv(&mut self) -> Result<Received, TransportError> {
        loop {
            // Cancel-safe: a datagram is either taken whole here or left in the socket.
            let (n, from) = self.rx.recv_from(&mut self.buf).await?;
            let at = super::now();
            if from == self.own {
                self.stats.own += 1;
                continue;
            }
            match decode(&self.buf[..n]) {
                Ok(frame) if frame.is_fd() && self.mtu == Mtu::Classic => {
                    self.stats.fd_ignored += 1;
                }
                Ok(frame) => {
                    self.stats.received += 1;
                    return Ok(Received { frame, at });
                }
                Err(_) => self.stats.malformed += 1,
            }
        }
    }
}

/// Why a datagram is not a frame fcan takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// Not one MessagePack value (or nested too deep).
    NotMsgpack,
    /// Not a map with string keys.
    NotAMap,
    /// A key held a value of the wrong type.
    WrongType(&'static str),
    /// The identifier does not fit its format.
    BadId,
    /// More data than the frame kind carries.
    TooLong,
    /// `dlc` is not the length of `data`.
    BadDlc,
    /// BRS or ESI set on a Classical frame.
    FdFlagWithoutFd,
    /// A remote frame (fcan has none).
    Remote,
    /// An error frame.
    ErrorFrame,
}

/// The datagram python-can's `pack_message` makes of `frame`, with `timestamp` (seconds).
///
/// ```
/// use fcan_core::frame::{CanId, Frame};
/// use fcan_transport::udp_multicast::{decode, encode};
/// let f = Frame::fd(CanId::Extended(0x1234567), &[9; 12]).unwrap();
/// assert_eq!(decode(&encode(&f, 1.5)), Ok(f));
/// ```
pub fn encode(frame: &Frame, timestamp: f64) -> Vec<u8> {
    let (id, extended) = match frame.id() {
        CanId::Standard(id) => (u32::from(id), false),
        CanId::Extended(id) => (id, true),
    };
    let s = |k: &str| Value::from(k);
    let map = Value::Map(vec![
        (s("timestamp"), Value::F64(timestamp)),
        (s("arbitration_id"), Value::from(id)),
        (s("is_extended_id"), Value::Boolean(extended)),
        (s("is_remote_frame"), Value::Boolean(false)),
        (s("is_error_frame"), Value::Boolean(false)),
        (s("channel"), Value::Nil),
        (s("dlc"), Value::from(frame.len())),
        (s("data"), Value::Binary(frame.data().to_vec())),
        (s("is_fd"), Value::Boolean(frame.is_fd())),
        (
            s("bitrate_switch"),
            Value::Boolean(frame.is_fd() && frame.is_brs()),
        ),
        (s("error_state_indicator"), Value::Boolean(false)),
    ]);
    let mut out = Vec::with_capacity(160);
    rmpv::encode::write_value(&mut out, &map).expect("writing to a Vec cannot fail");
    out
}

/// The frame a datagram of python-can's format carries (see the [module docs](self) for
/// what is accepted); never panics.
pub fn decode(bytes: &[u8]) -> Result<Frame, Refused> {
    let mut rd = bytes;
    let value = rmpv::decode::read_value_with_max_depth(&mut rd, MAX_DEPTH)
        .map_err(|_| Refused::NotMsgpack)?;
    if !rd.is_empty() {
        return Err(Refused::NotMsgpack);
    }
    let Value::Map(entries) = value else {
        return Err(Refused::NotAMap);
    };
    // python-can's `Message` defaults.
    let mut id: u64 = 0;
    let mut extended = true;
    let (mut remote, mut error, mut fd, mut brs, mut esi) = (false, false, false, false, false);
    let mut dlc: Option<u64> = None;
    let mut data: Vec<u8> = Vec::new();
    for (k, v) in entries {
        let key = k.as_str().ok_or(Refused::NotAMap)?;
        let flag = |name: &'static str| v.as_bool().ok_or(Refused::WrongType(name));
        match key {
            "arbitration_id" => id = v.as_u64().ok_or(Refused::WrongType("arbitration_id"))?,
            "is_extended_id" => extended = flag("is_extended_id")?,
            "is_remote_frame" => remote = flag("is_remote_frame")?,
            "is_error_frame" => error = flag("is_error_frame")?,
            "is_fd" => fd = flag("is_fd")?,
            "bitrate_switch" => brs = flag("bitrate_switch")?,
            "error_state_indicator" => esi = flag("error_state_indicator")?,
            "dlc" => {
                dlc = match v {
                    Value::Nil => None,
                    _ => Some(v.as_u64().ok_or(Refused::WrongType("dlc"))?),
                }
            }
            "data" => {
                data = match v {
                    Value::Nil => Vec::new(),
                    Value::Binary(b) => b,
                    Value::Array(items) => items
                        .iter()
                        .map(|i| i.as_u64().and_then(|b| u8::try_from(b).ok()))
                        .collect::<Option<Vec<u8>>>()
                        .ok_or(Refused::WrongType("data"))?,
                    _ => return Err(Refused::WrongType("data")),
                }
            }
            // `timestamp` (python-can replaces it on receipt), `channel`, anything newer.
            _ => {}
        }
    }
    if error {
        return Err(Refused::ErrorFrame);
    }
    if remote {
        return Err(Refused::Remote);
    }
    if !fd && (brs || esi) {
        return Err(Refused::FdFlagWithoutFd);
    }
    if dlc.is_some_and(|d| d != data.len() as u64) {
        return Err(Refused::BadDlc);
    }
    let can_id = if extended {
        u32::try_from(id).ok().and_then(CanId::extended)
    } else {
        u16::try_from(id).ok().and_then(CanId::standard)
    }
    .ok_or(Refused::BadId)?;
    if fd {
        let padded = fd_padded_len(data.len()).filter(|l| *l <= FD_MAX_LEN);
        let len = padded.ok_or(Refused::TooLong)?;
        data.resize(len, 0);
        let f = Frame::fd(can_id, &data).map_err(|_| Refused::TooLong)?;
        Ok(if brs { f } else { f.without_brs() })
    } else {
        if data.len() > CLASSIC_MAX_LEN {
            return Err(Refused::TooLong);
        }
        Frame::classic(can_id, &data).map_err(|_| Refused::TooLong)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: Vec<(&str, Value)>) -> Vec<u8> {
        let v = Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect(),
        );
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, &v).unwrap();
        out
    }

    /// python-can 4.6.1's `pack_message(can.Message(arbitration_id=0x123, data=[1, 2, 3],
    /// is_extended_id=False, timestamp=1.5))`, byte for byte (msgpack 1.1.2).
    const PYTHON_CLASSIC: &[u8] = b"\x8b\xa9timestamp\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00\
\xaearbitration_id\xcd\x01\x23\xaeis_extended_id\xc2\xafis_remote_frame\xc2\
\xaeis_error_frame\xc2\xa7channel\xc0\xa3dlc\x03\xa4data\xc4\x03\x01\x02\x03\
\xa5is_fd\xc2\xaebitrate_switch\xc2\xb5error_state_indicator\xc2";

    #[test]
    fn python_cans_bytes_both_ways() {
        let f = Frame::classic(CanId::Standard(0x123), &[1, 2, 3]).unwrap();
        assert_eq!(decode(PYTHON_CLASSIC), Ok(f));
        assert_eq!(encode(&f, 1.5), PYTHON_CLASSIC);
    }

    #[test]
    fn round_trips_every_kind() {
        let frames = [
            Frame::classic(CanId::Standard(0), &[]).unwrap(),
            Frame::classic(CanId::Standard(0x7FF), &[0xAA; 8]).unwrap(),
            Frame::classic(CanId::Extended(0x1FFF_FFFF), &[1]).unwrap(),
            Frame::fd(CanId::Standard(0x100), &[7; 64]).unwrap(),
            Frame::fd(CanId::Extended(0x18DA_F110), &[3; 12])
                .unwrap()
                .without_brs(),
            Frame::fd(CanId::Extended(5), &[]).unwrap(),
        ];
        for f in frames {
            let back = decode(&encode(&f, 0.0)).unwrap();
            assert_eq!(back, f);
            assert_eq!(back.is_brs(), f.is_brs(), "{f:?}");
        }
    }

    #[test]
    fn what_python_can_allows_and_fcan_pads_or_refuses() {
        // 13 bytes FD: padded to 16, as a controller does.
        let b = map(vec![
            ("arbitration_id", Value::from(1)),
            ("is_fd", Value::Boolean(true)),
            ("data", Value::Binary(vec![1; 13])),
        ]);
        let f = decode(&b).unwrap();
        assert_eq!(
            (f.len(), f.id(), f.is_brs()),
            (16, CanId::Extended(1), false)
        );
        assert_eq!(&f.data()[13..], &[0, 0, 0]);
        // data as a list of ints, dlc nil, ESI carried on FD (ignored).
        let b = map(vec![
            ("arbitration_id", Value::from(0x7FF)),
            ("is_extended_id", Value::Boolean(false)),
            ("is_fd", Value::Boolean(true)),
            ("bitrate_switch", Value::Boolean(true)),
            ("error_state_indicator", Value::Boolean(true)),
            ("dlc", Value::Nil),
            ("data", Value::Array(vec![Value::from(1), Value::from(255)])),
            ("future_key", Value::from("x")),
        ]);
        assert_eq!(
            decode(&b),
            Ok(Frame::fd(CanId::Standard(0x7FF), &[1, 255]).unwrap())
        );
        let refused = |pairs: Vec<(&str, Value)>| decode(&map(pairs)).unwrap_err();
        let id = |n: u64, ext: bool| {
            vec![
                ("arbitration_id", Value::from(n)),
                ("is_extended_id", Value::Boolean(ext)),
            ]
        };
        assert_eq!(refused(id(0x800, false)), Refused::BadId);
        assert_eq!(refused(id(0x2000_0000, true)), Refused::BadId);
        let with = |mut v: Vec<(&'static str, Value)>, more: Vec<(&'static str, Value)>| {
            v.extend(more);
            v
        };
        assert_eq!(
            refused(with(
                id(1, false),
                vec![("data", Value::Binary(vec![0; 9]))]
            )),
            Refused::TooLong
        );
        assert_eq!(
            refused(with(
                id(1, false),
                vec![
                    ("is_fd", Value::Boolean(true)),
                    ("data", Value::Binary(vec![0; 65]))
                ]
            )),
            Refused::TooLong
        );
        assert_eq!(
            refused(with(
                id(1, false),
                vec![("dlc", Value::from(4)), ("data", Value::Binary(vec![0; 3]))]
            )),
            Refused::BadDlc
        );
        assert_eq!(
            refused(with(
                id(1, false),
                vec![("bitrate_switch", Value::Boolean(true))]
            )),
            Refused::FdFlagWithoutFd
        );
        assert_eq!(
            refused(with(
                id(1, false),
                vec![("is_remote_frame", Value::Boolean(true))]
            )),
            Refused::Remote
        );
        assert_eq!(
            refused(with(
                id(1, false),
                vec![("is_error_frame", Value::Boolean(true))]
            )),
            Refused::ErrorFrame
        );
        assert_eq!(
            refused(with(id(1, false), vec![("is_fd", Value::from(1))])),
            Refused::WrongType("is_fd")
        );
        assert_eq!(
            refused(vec![("arbitration_id", Value::from(-1))]),
            Refused::WrongType("arbitration_id")
        );
        assert_eq!(
            refused(vec![("data", Value::Array(vec![Value::from(256)]))]),
            Refused::WrongType("data")
        );
        assert_eq!(decode(b"\x93\x01\x02\x03"), Err(Refused::NotAMap));
        assert_eq!(decode(b""), Err(Refused::NotMsgpack));
        assert!(decode(b"\xc1").is_err(), "the reserved marker");
        // A valid map followed by garbage.
        let mut b = map(vec![("arbitration_id", Value::from(1))]);
        b.push(0);
        assert_eq!(decode(&b), Err(Refused::NotMsgpack));
        // Deep nesting is refused without recursion to the bottom.
        assert_eq!(decode(&[0x91; 4000]), Err(Refused::NotMsgpack));
    }

    /// Random bytes, and valid datagrams with bytes flipped, cut or appended: never a
    /// panic, and whatever is accepted is a frame fcan can send.
    #[test]
    fn random_bytes_never_panic() {
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        let good = [
            encode(&Frame::fd(CanId::Extended(0x1234), &[5; 64]).unwrap(), 3.0),
            PYTHON_CLASSIC.to_vec(),
        ];
        let mut accepted = 0;
        for i in 0..200_000 {
            let bytes: Vec<u8> = match i % 3 {
                0 => (0..rng.usize(0..300)).map(|_| rng.u8(..)).collect(),
                1 => {
                    let mut b = good[i % 2].clone();
                    for _ in 0..rng.usize(1..4) {
                        let at = rng.usize(..b.len());
                        b[at] = rng.u8(..);
                    }
                    b
                }
                _ => {
                    let mut b = good[i % 2].clone();
                    b.truncate(rng.usize(..=b.len()));
                    b.extend((0..rng.usize(0..3)).map(|_| rng.u8(..)));
                    b
                }
            };
            if let Ok(f) = decode(&bytes) {
                accepted += 1;
                assert!(f.len() <= FD_MAX_LEN);
                assert_eq!(decode(&encode(&f, 0.0)), Ok(f));
            }
        }
        assert!(accepted > 0, "some mutated datagrams are still frames");
    }

    #[test]
    fn spec_options() {
        let p = |s: &str| UdpMulticastSpec::parse(s);
        let s = p("udp-multicast:group=[ff02::1234],port=5000,iface=eth0,ttl=0,classic").unwrap();
        assert_eq!(s.group, "ff02::1234".parse::<IpAddr>().unwrap());
        assert_eq!(
            (s.port, s.iface.as_str(), s.ttl, s.mtu),
            (5000, "eth0", 0, Mtu::Classic)
        );
        assert_eq!(
            p("udp-multicast:ipv6").unwrap(),
            UdpMulticastSpec::default()
        );
        let err = |s: &str| p(s).unwrap_err().to_string();
        assert!(err("udp-multicast:ttl=256").contains("0 to 255"));
        assert!(err("udp-multicast:port=0").contains("1 to 65535"));
        assert!(err("udp-multicast:group=127.0.0.1").contains("not a multicast"));
        assert!(err("udp-multicast:ipv4,group=239.1.1.1").contains("given twice"));
        assert!(err("udp-multicast:fd,classic").contains("given twice"));
        assert!(err("udp-multicast:hops=2").contains("unknown option"));
        assert!(err("udp-multicast:iface=").contains("interface name"));
        assert!(err("udp-multicast:").contains("empty option"));
        assert!(err("udp-multicast:classic=1").contains("takes no value"));
    }
}
