//! ROS 2 services on DDS, sans I/O: how a request names its caller, in the two framings
//! stock ROS 2 uses, and how a reply names the request it answers.
//!
//! Both put a request on `rq/<service>Request` and a reply on `rr/<service>Reply`. They
//! differ in where the request's identity travels:
//!
//! | framing | request | reply |
//! |---|---|---|
//! | [`Framing::Cyclone`] (rmw_cyclonedds) | 16 bytes before the request fields: the client's id (`uint64`) and a sequence number (`int64`), in the sample's byte order | the same 16 bytes, then the response fields |
//! | [`Framing::FastDds`] (rmw_fastrtps, rmw_connextdds) | the request fields only; the identity is the request sample's own (writer GUID, RTPS sequence number) | the response fields only, written with that identity as its *related sample identity* (an RTPS inline QoS) |
//!
//! A server speaks one framing (a client of the other framing ignores its replies), so
//! the bridge takes it from `RMW_IMPLEMENTATION` or its configuration ([`Framing::from_rmw`]).
//! The 16-byte header starts 8-aligned, so the fields after it align exactly as in a
//! sample without it: the body is a CDR stream of its own once the header is cut out.

/// The identity of a DDS sample: the writer's GUID and the sample's sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SampleId {
    /// The writer's GUID (prefix and entity id), 16 bytes.
    pub writer_guid: [u8; 16],
    /// The sample's RTPS sequence number.
    pub seq: i64,
}

/// How requests and replies carry their identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Framing {
    /// rmw_cyclonedds: a 16-byte header in the payload.
    Cyclone,
    /// rmw_fastrtps (and rmw_connextdds): the sample identity and related sample identity.
    FastDds,
}

impl Framing {
    /// The framing of an `RMW_IMPLEMENTATION` value: `rmw_cyclonedds_cpp` → Cyclone;
    /// any other, or none, → Fast DDS (stock ROS 2's default RMW).
    ///
    /// ```
    /// use fcan_ros2_bridge::rpc::Framing;
    /// assert_eq!(Framing::from_rmw(Some("rmw_cyclonedds_cpp")), Framing::Cyclone);
    /// assert_eq!(Framing::from_rmw(Some("rmw_fastrtps_cpp")), Framing::FastDds);
    /// assert_eq!(Framing::from_rmw(None), Framing::FastDds);
    /// ```
    pub fn from_rmw(rmw: Option<&str>) -> Framing {
        match rmw.map(str::trim) {
            Some(r) if r.starts_with("rmw_cyclonedds") => Framing::Cyclone,
            _ => Framing::FastDds,
        }
    }
}

impl std::str::FromStr for Framing {
    type Err = String;
    fn from_str(s: &str) -> Result<Framing, String> {
        match s.to_ascii_lowercase().as_str() {
            "cyclonedds" | "cyclone" => Ok(Framing::Cyclone),
            "fastdds" | "fastrtps" => Ok(Framing::FastDds),
            _ => Err(format!("`{s}`: expected cyclonedds or fastdds")),
        }
    }
}

/// Which request a reply answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestId {
    /// Cyclone's header, echoed in the reply.
    Cyclone {
        /// The client's id.
        client: u64,
        /// Its sequence number.
        seq: i64,
    },
    /// The request sample's identity, the reply's related sample identity.
    FastDds(SampleId),
}

/// A request that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("request: {0}")]
pub struct RpcError(pub String);

/// Splits a received request into its identity and its body (the request fields as a
/// CDR sample of their own, encapsulation header included).
///
/// ```
/// use fcan_ros2_bridge::rpc::{split_request, Framing, RequestId, SampleId};
/// // Cyclone: client 7, sequence 2, then `bool data = true`.
/// let mut s = vec![0, 1, 0, 0];
/// s.extend(7u64.to_le_bytes());
/// s.extend(2i64.to_le_bytes());
/// s.push(1);
/// let (id, body) = split_request(Framing::Cyclone, &s, None).unwrap();
/// assert_eq!(id, RequestId::Cyclone { client: 7, seq: 2 });
/// assert_eq!(body, [0, 1, 0, 0, 1]);
/// ```
pub fn split_request(
    framing: Framing,
    cdr: &[u8],
    sample: Option<SampleId>,
) -> Result<(RequestId, Vec<u8>), RpcError> {
    match framing {
        Framing::Cyclone => {
            let little = match cdr.get(..2) {
                Some([0, 1]) => true,
                Some([0, 0]) => false,
                _ => return Err(RpcError("not plain CDR".into())),
            };
            let header = cdr.get(4..20).ok_or_else(|| {
                RpcError(format!(
                    "{} bytes, shorter than the Cyclone request header",
                    cdr.len()
                ))
            })?;
            let word = |b: &[u8]| -> [u8; 8] {
                let mut w = [0u8; 8];
                w.copy_from_slice(b);
                if !little {
                    w.reverse();
                }
                w
            };
            // Both words in the sample's byte order, each read whole: a 64-bit number,
            // not two 32-bit halves.
            let client = u64::from_le_bytes(word(&header[..8]));
            let seq = i64::from_le_bytes(word(&header[8..]));
            let mut body = cdr[..4].to_vec();
            body.extend_from_slice(&cdr[20..]);
            Ok((RequestId::Cyclone { client, seq }, body))
        }
        Framing::FastDds => {
            let id = sample.ok_or_else(|| RpcError("no sample identity".into()))?;
            Ok((RequestId::FastDds(id), cdr.to_vec()))
        }
    }
}

/// The reply to request `id` with `body` (the response fields as CDR, little-endian,
/// encapsulation header included): the sample to write and the related sample
/// identity to write it with.
///
/// ```
/// use fcan_ros2_bridge::rpc::{reply, RequestId};
/// let (sample, related) = reply(&RequestId::Cyclone { client: 7, seq: 2 }, &[0, 1, 0, 0, 1]);
/// assert_eq!(&sample[4..12], &7u64.to_le_bytes());
/// assert_eq!(&sample[12..20], &2i64.to_le_bytes());
/// assert_eq!((sample[20], related), (1, None));
/// ```
pub fn reply(id: &RequestId, body: &[u8]) -> (Vec<u8>, Option<SampleId>) {
    match id {
        RequestId::Cyclone { client, seq } => {
            let mut s = Vec::with_capacity(body.len() + 16);
            s.extend_from_slice(&[0, 1, 0, 0]);
            s.extend_from_slice(&client.to_le_bytes());
            s.extend_from_slice(&seq.to_le_bytes());
            s.extend_from_slice(body.get(4..).unwrap_or(&[]));
            (s, None)
        }
        RequestId::FastDds(sample) => (body.to_vec(), Some(*sample)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_endian_cyclone_header_is_read_whole() {
        let mut s = vec![0, 0, 0, 0];
        s.extend(0x0102_0304_0506_0708u64.to_be_bytes());
        s.extend((-3i64).to_be_bytes());
        s.extend([0, 0, 0, 5]);
        let (id, body) = split_request(Framing::Cyclone, &s, None).unwrap();
        assert_eq!(
            id,
            RequestId::Cyclone {
                client: 0x0102_0304_0506_0708,
                seq: -3
            }
        );
        assert_eq!(body, [0, 0, 0, 0, 0, 0, 0, 5]);
        // A sequence number above 2^32 keeps its high word where it belongs.
        let mut s = vec![0, 1, 0, 0];
        s.extend(9u64.to_le_bytes());
        s.extend((5i64 << 32 | 1).to_le_bytes());
        let (id, _) = split_request(Framing::Cyclone, &s, None).unwrap();
        assert_eq!(
            id,
            RequestId::Cyclone {
                client: 9,
                seq: (5 << 32) | 1
            }
        );
    }

    #[test]
    fn short_or_foreign_requests_are_refused() {
        assert!(split_request(Framing::Cyclone, &[0, 1, 0, 0, 1, 2, 3], None).is_err());
        assert!(split_request(Framing::Cyclone, &[0, 7, 0, 0], None).is_err());
        assert!(split_request(Framing::FastDds, &[0, 1, 0, 0], None).is_err());
    }

    #[test]
    fn fast_dds_replies_carry_the_request_identity_and_nothing_else() {
        let id = SampleId {
            writer_guid: [3; 16],
            seq: 42,
        };
        let (rid, body) = split_request(Framing::FastDds, &[0, 1, 0, 0, 1], Some(id)).unwrap();
        assert_eq!(body, [0, 1, 0, 0, 1]);
        let (sample, related) = reply(&rid, &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!((sample, related), (vec![0, 1, 0, 0, 0, 0, 0, 0], Some(id)));
    }
}
