//! The `udp-multicast` transport between fcan transports on one host (python-can's side is
//! `tests/peers/udp_multicast_peer.py`, run by `.ci/udp-multicast-peer.sh`).
//!
//! Multicast is never tried on the host's network: each test moves its own thread into a
//! new network namespace (`unshare(CLONE_NEWNET)`, which needs root, as CI and the
//! developers' machines run) holding only `lo`, switched to multicast with a route for
//! both families, and runs a single-threaded tokio runtime on that thread, so every
//! socket it opens lives in that namespace and nothing it sends leaves it.
#![cfg(target_os = "linux")]

use std::future::Future;
use std::process::Command;
use std::time::Duration;

use fcan_core::frame::{CanId, Frame, Mtu};
use fcan_transport::udp_multicast::{encode, DEFAULT_GROUP_V4, DEFAULT_PORT};
use fcan_transport::{open, AnyTransport, Transport, TransportError};

/// Runs `body` on this thread in a fresh network namespace with only `lo`, up and able to
/// multicast.
fn in_loopback_netns<F: Future<Output = ()>>(body: F) {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect(
        "a network namespace of its own (unshare CLONE_NEWNET) needs root; \
         run as root, or skip these tests with `--skip udp_multicast`",
    );
    for args in [
        &["link", "set", "lo", "up"][..],
        &["link", "set", "lo", "multicast", "on"],
        &["route", "add", "224.0.0.0/4", "dev", "lo"],
        // IPv6 multicast on lo is delivered through a `local` route (a `multicast` route,
        // as the kernel sets on other interfaces, delivers nothing on lo).
        &["-6", "route", "add", "local", "ff00::/8", "dev", "lo"],
    ] {
        // Children forked from this thread start in its namespace.
        let status = Command::new("ip").args(args).status().expect("ip(8)");
        assert!(status.success(), "ip {}", args.join(" "));
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(body);
}

fn udp(t: &AnyTransport) -> &fcan_transport::udp_multicast::UdpMulticastTransport {
    match t {
        AnyTransport::UdpMulticast(u) => u,
        other => panic!("not a udp-multicast transport: {other:?}"),
    }
}

async fn recv(t: &mut AnyTransport) -> Frame {
    tokio::time::timeout(Duration::from_secs(2), t.recv())
        .await
        .unwrap_or_else(|_| panic!("a frame within 2 s: {t:?}"))
        .expect("a frame")
        .frame
}

async fn silent(t: &mut AnyTransport) -> bool {
    tokio::time::timeout(Duration::from_millis(200), t.recv())
        .await
        .is_err()
}

/// Classical and FD, standard and extended identifiers, with and without BRS.
fn every_kind() -> Vec<Frame> {
    vec![
        Frame::classic(CanId::Standard(0x123), &[1, 2, 3]).unwrap(),
        Frame::classic(CanId::Standard(0x7FF), &[]).unwrap(),
        Frame::classic(CanId::Extended(0x1FFF_FFFF), &[0xFF; 8]).unwrap(),
        Frame::fd(CanId::Standard(0x100), &[0x5A; 64]).unwrap(),
        Frame::fd(CanId::Extended(0x18DA_F110), &[7; 12])
            .unwrap()
            .without_brs(),
        Frame::fd(CanId::Extended(0x0000_0001), &[0; 20]).unwrap(),
    ]
}

async fn exchange(spec: &str) {
    let mut a = open(spec, None).expect("opens");
    let mut b = open(spec, None).expect("opens");
    assert_eq!(a.mtu(), Mtu::Fd);
    assert_ne!(udp(&a).source(), udp(&b).source());
    for f in every_kind() {
        a.send(&f).await.unwrap();
        let got = recv(&mut b).await;
        assert_eq!(got, f);
        assert_eq!(got.is_brs(), f.is_brs(), "{f:?}");
        b.send(&f).await.unwrap();
        assert_eq!(recv(&mut a).await, f);
    }
    // Neither heard itself: the host looped every datagram back, and each dropped its own.
    assert!(silent(&mut a).await && silent(&mut b).await);
    let n = every_kind().len() as u64;
    for t in [&a, &b] {
        let s = udp(t).stats();
        assert_eq!(
            (s.sent, s.received, s.own, s.malformed),
            (n, n, n, 0),
            "{s:?}"
        );
    }
    // A third on the same group hears both; what it sends reaches both.
    let mut c = open(spec, None).unwrap();
    let f = Frame::classic(CanId::Extended(0x42), &[4, 2]).unwrap();
    a.send(&f).await.unwrap();
    assert_eq!(recv(&mut c).await, f);
    assert_eq!(recv(&mut b).await, f);
    c.send(&f).await.unwrap();
    assert_eq!(recv(&mut a).await, f);
    assert_eq!(recv(&mut b).await, f);
}

#[test]
fn udp_multicast_exchanges_every_kind_ipv6() {
    in_loopback_netns(exchange("udp-multicast"));
}

#[test]
fn udp_multicast_exchanges_every_kind_ipv4() {
    in_loopback_netns(exchange("udp-multicast:ipv4"));
}

#[test]
fn udp_multicast_other_groups_and_ports_are_other_buses() {
    in_loopback_netns(async {
        let mut a = open("udp-multicast:ipv4,port=43114", None).unwrap();
        let mut other_port = open("udp-multicast:ipv4", None).unwrap();
        let mut other_group = open("udp-multicast:group=239.1.2.3,port=43114", None).unwrap();
        let mut same = open(
            "udp-multicast:group=239.74.163.2,port=43114,iface=lo,ttl=0",
            None,
        )
        .unwrap();
        let f = Frame::classic(CanId::Standard(1), &[1]).unwrap();
        a.send(&f).await.unwrap();
        assert_eq!(recv(&mut same).await, f, "TTL 0 still reaches the host");
        assert!(silent(&mut other_port).await);
        assert!(silent(&mut other_group).await);
    });
}

#[test]
fn udp_multicast_classic_link_ignores_fd_frames_and_refuses_to_send_them() {
    in_loopback_netns(async {
        let mut fd = open("udp-multicast", None).unwrap();
        let mut classic = open("udp-multicast:classic", None).unwrap();
        assert_eq!(classic.mtu(), Mtu::Classic);
        let big = Frame::fd(CanId::Standard(5), &[1; 16]).unwrap();
        assert!(matches!(
            classic.send(&big).await,
            Err(TransportError::FdNotSupported { .. })
        ));
        let small = Frame::classic(CanId::Standard(6), &[2]).unwrap();
        fd.send(&big).await.unwrap();
        fd.send(&small).await.unwrap();
        assert_eq!(recv(&mut classic).await, small);
        assert_eq!(udp(&classic).stats().fd_ignored, 1);
    });
}

/// Datagrams that are not frames, sent to the group by a plain UDP socket (as a broken
/// or hostile peer would): counted and dropped, and the frame behind them still arrives.
#[test]
fn udp_multicast_malformed_datagrams_are_counted_and_dropped() {
    in_loopback_netns(async {
        let mut t = open("udp-multicast:ipv4", None).unwrap();
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_multicast_loop_v4(true).unwrap();
        let to = (DEFAULT_GROUP_V4, DEFAULT_PORT);
        let good = Frame::fd(CanId::Extended(0xABCDE), &[9; 48]).unwrap();
        let mut too_long = encode(&Frame::fd(CanId::Standard(1), &[0; 64]).unwrap(), 0.0);
        // The bin8 header of 64 bytes (0xc4 0x40) claims 65 with one more byte after it.
        let at = too_long.windows(2).position(|w| w == [0xc4, 0x40]).unwrap();
        too_long[at + 1] = 65;
        too_long.insert(at + 2, 0);
        let mut rng = fastrand::Rng::with_seed(36);
        let mut bad: Vec<Vec<u8>> = vec![
            b"not msgpack at all".to_vec(),
            vec![],
            vec![0x80],                   // an empty map: id 0 extended, no data — valid!
            b"\x81\xa3dlc\xa1x".to_vec(), // dlc a string
            too_long,
        ];
        bad.extend((0..50).map(|_| (0..rng.usize(1..200)).map(|_| rng.u8(..)).collect()));
        let mut valid = 0u64;
        for b in &bad {
            if fcan_transport::udp_multicast::decode(b).is_ok() {
                valid += 1;
            }
            peer.send_to(b, to).unwrap();
        }
        peer.send_to(&encode(&good, 1.0), to).unwrap();
        for _ in 0..valid {
            recv(&mut t).await;
        }
        assert_eq!(recv(&mut t).await, good);
        let s = udp(&t).stats();
        assert_eq!(s.malformed, bad.len() as u64 - valid, "{s:?}");
        assert_eq!(s.received, valid + 1);
    });
}

/// The fcan side of `tests/peers/udp_multicast_peer.py` (python-can): on the bus
/// `FCAN_UDPMC_SPEC` (`udp-multicast` by default), in the caller's network namespace
/// (`.ci/udp-multicast-peer.sh` runs it inside one), prints `ready`, then answers each of
/// the next `FCAN_UDPMC_COUNT` frames with the same frame (kind, BRS, payload) one
/// identifier higher, and prints each frame it got in candump style.
#[test]
#[ignore = "the fcan side of tests/peers/udp_multicast_peer.py: .ci/udp-multicast-peer.sh runs it in a network namespace"]
fn python_peer_echo() {
    let spec = std::env::var("FCAN_UDPMC_SPEC").unwrap_or_else(|_| "udp-multicast".into());
    let count: usize = std::env::var("FCAN_UDPMC_COUNT")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(1);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut t = open(&spec, None).expect("opens");
            println!("ready");
            for _ in 0..count {
                let got = tokio::time::timeout(Duration::from_secs(20), t.recv())
                    .await
                    .expect("the peer's frame within 20 s")
                    .expect("a frame")
                    .frame;
                println!(
                    "got {got:?}{}",
                    if got.is_fd() && !got.is_brs() {
                        " (no BRS)"
                    } else {
                        ""
                    }
                );
                let id = match got.id() {
                    CanId::Standard(id) => CanId::Standard(id + 1),
                    CanId::Extended(id) => CanId::Extended(id + 1),
                };
                let reply = if got.is_fd() {
                    let f = Frame::fd(id, got.data()).unwrap();
                    if got.is_brs() {
                        f
                    } else {
                        f.without_brs()
                    }
                } else {
                    Frame::classic(id, got.data()).unwrap()
                };
                t.send(&reply).await.expect("sent");
            }
            println!("stats {:?}", udp(&t).stats());
        });
}
