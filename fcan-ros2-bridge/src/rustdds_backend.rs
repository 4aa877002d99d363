//! [`Dds`] on RustDDS: raw CDR in and out, so types exist only at run time.
//!
//! RustDDS writes the encapsulation header itself from the adapter's encoding and hands
//! a reader the payload after it; the adapters here move the header between the two.

use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;
use futures_util::stream::StreamExt;
use rustdds::no_key::{DataReader, DataWriter};
use rustdds::policy::{Durability, History, Reliability};
use rustdds::{
    DomainParticipant, DomainParticipantBuilder, Publisher, QosPolicies, QosPolicyBuilder,
    RTPSEntity, RepresentationIdentifier, Subscriber, TopicKind,
};

use crate::dds::{Dds, DdsError, DdsWriter, Endpoint, Gid, Qos, Reader, Received};
use crate::rpc::SampleId;

/// One sample's CDR, encapsulation header included.
#[derive(Clone, Debug)]
pub struct RawCdr(pub Vec<u8>);

/// Passes [`RawCdr`] through, splitting off or restoring the header.
pub struct RawAdapter;

impl rustdds::no_key::SerializerAdapter<RawCdr> for RawAdapter {
    type Error = DdsError;

    fn output_encoding() -> RepresentationIdentifier {
        RepresentationIdentifier::CDR_LE
    }

    fn to_bytes(value: &RawCdr) -> Result<Bytes, DdsError> {
        match value.0.get(..2) {
            Some([0x00, 0x01]) => Ok(Bytes::copy_from_slice(&value.0[4..])),
            _ => Err(DdsError("only little-endian plain CDR is written".into())),
        }
    }
}

impl rustdds::no_key::DeserializerAdapter<RawCdr> for RawAdapter {
    type Error = DdsError;
    type Decoded = RawCdr;

    fn supported_encodings() -> &'static [RepresentationIdentifier] {
        &[
            RepresentationIdentifier::CDR_LE,
            RepresentationIdentifier::CDR_BE,
        ]
    }

    fn transform_decoded(decoded: RawCdr) -> RawCdr {
        decoded
    }
}

impl rustdds::no_key::DefaultDecoder<RawCdr> for RawAdapter {
    type Decoder = RawDecoder;
    const DECODER: RawDecoder = RawDecoder;
}

/// Restores the header in front of a received payload.
#[derive(Clone)]
pub struct RawDecoder;

impl<'de> rustdds::no_key::Decode<'de, RawCdr> for RawDecoder {
    type Error = DdsError;

    fn decode_bytes(
        self,
        input: &'de [u8],
        encoding: RepresentationIdentifier,
    ) -> Result<RawCdr, DdsError> {
        let second = if encoding == RepresentationIdentifier::CDR_LE {
            1
        } else {
            0
        };
        let mut v = Vec::with_capacity(4 + input.len());
        v.extend_from_slice(&[0, second, 0, 0]);
        v.extend_from_slice(input);
        Ok(RawCdr(v))
    }
}

/// How far DDS discovery and traffic reach: ROS 2's `ROS_AUTOMATIC_DISCOVERY_RANGE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Range {
    /// This machine only (the loopback interface): fcan's default, closed until opened.
    Localhost,
    /// Every network interface, as stock ROS 2 does.
    Subnet,
}

impl std::str::FromStr for Range {
    type Err = String;
    fn from_str(s: &str) -> Result<Range, String> {
        match s.to_ascii_lowercase().as_str() {
            "localhost" => Ok(Range::Localhost),
            "subnet" => Ok(Range::Subnet),
            _ => Err(format!("`{s}`: expected localhost or subnet")),
        }
    }
}

/// A RustDDS participant.
pub struct RustDds {
    participant: DomainParticipant,
    publisher: Publisher,
    subscriber: Subscriber,
}

impl RustDds {
    /// Joins DDS domain `domain` (ROS 2's `ROS_DOMAIN_ID`), reaching as far as `range`.
    pub fn new(domain: u16, range: Range) -> Result<RustDds, DdsError> {
        let mut b = DomainParticipantBuilder::new(domain);
        if range == Range::Localhost {
            b = b.with_only_networks([std::net::IpAddr::from([127, 0, 0, 1])]);
        }
        let participant = b
            .build()
            .map_err(|e| DdsError(format!("participant: {e}")))?;
        let qos = QosPolicyBuilder::new().build();
        let publisher = participant
            .create_publisher(&qos)
            .map_err(|e| DdsError(format!("publisher: {e}")))?;
        let subscriber = participant
            .create_subscriber(&qos)
            .map_err(|e| DdsError(format!("subscriber: {e}")))?;
        Ok(RustDds {
            participant,
            publisher,
            subscriber,
        })
    }

    fn qos(q: Qos) -> QosPolicies {
        let b = QosPolicyBuilder::new()
            .history(History::KeepLast {
                depth: i32::from(q.depth),
            })
            .durability(if q.transient_local {
                Durability::TransientLocal
            } else {
                Durability::Volatile
            });
        if q.reliable {
            b.reliability(Reliability::Reliable {
                max_blocking_time: rustdds::Duration::from_millis(100),
            })
            .build()
        } else {
            b.reliability(Reliability::BestEffort).build()
        }
    }

    /// An endpoint's QoS: [`Self::qos`] and, where its type hash is known, the USER_DATA
    /// that announces it.
    fn endpoint_qos(e: &Endpoint) -> QosPolicies {
        let q = Self::qos(e.qos);
        match &e.type_hash {
            Some(h) => q.with_user_data(crate::names::user_data(h)),
            None => q,
        }
    }

    fn topic(&self, e: &Endpoint) -> Result<rustdds::Topic, DdsError> {
        self.participant
            .create_topic(
                e.topic.clone(),
                e.type_name.clone(),
                &Self::qos(e.qos),
                TopicKind::NoKey,
            )
            .map_err(|err| DdsError(format!("topic {}: {err}", e.topic)))
    }
}

/// RTPS time (`Time_t`: seconds since 1970 and a binary fraction, as one `u64`).
fn ticks(t: SystemTime) -> Option<u64> {
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    let secs = u32::try_from(d.as_secs()).ok()?;
    let frac = (u64::from(d.subsec_nanos()) << 32) / 1_000_000_000;
    Some((u64::from(secs) << 32) | frac)
}

/// The inverse of [`ticks`].
fn time_of(ticks: u64) -> Option<SystemTime> {
    let secs = ticks >> 32;
    let nanos = ((ticks & 0xffff_ffff) * 1_000_000_000) >> 32;
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos as u32))
}

/// A RustDDS writer of raw CDR.
pub struct RustDdsWriter(Mutex<DataWriter<RawCdr, RawAdapter>>, Gid);

impl DdsWriter for RustDdsWriter {
    fn write(
        &self,
        cdr: &[u8],
        related: Option<SampleId>,
        source_time: Option<SystemTime>,
    ) -> Result<(), DdsError> {
        let w = self
            .0
            .lock()
            .map_err(|_| DdsError("writer poisoned".into()))?;
        let mut opts = rustdds::with_key::WriteOptionsBuilder::new();
        if let Some(t) = source_time.and_then(ticks) {
            opts = opts.source_timestamp(rustdds::Timestamp::from_ticks(t));
        }
        if let Some(r) = related {
            opts = opts.related_sample_identity(rustdds::rpc::SampleIdentity {
                writer_guid: rustdds::GUID::from_bytes(r.writer_guid),
                sequence_number: rustdds::SequenceNumber::from(r.seq),
            });
        }
        w.write_with_options(RawCdr(cdr.to_vec()), opts.build())
            .map(|_| ())
            .map_err(|e| DdsError(format!("write: {e}")))
    }

    fn gid(&self) -> Gid {
        self.1
    }
}

impl Dds for RustDds {
    type Writer = RustDdsWriter;

    fn writer(&self, e: &Endpoint) -> Result<RustDdsWriter, DdsError> {
        let topic = self.topic(e)?;
        let w = self
            .publisher
            .create_datawriter_no_key::<RawCdr, RawAdapter>(&topic, Some(Self::endpoint_qos(e)))
            .map_err(|err| DdsError(format!("writer {}: {err}", e.topic)))?;
        let gid = w.guid().to_bytes();
        Ok(RustDdsWriter(Mutex::new(w), gid))
    }

    fn gid(&self) -> Gid {
        self.participant.guid().to_bytes()
    }

    fn reader(&self, e: &Endpoint) -> Result<Reader, DdsError> {
        let topic = self.topic(e)?;
        let r: DataReader<RawCdr, RawAdapter> = self
            .subscriber
            .create_datareader_no_key::<RawCdr, RawAdapter>(&topic, Some(Self::endpoint_qos(e)))
            .map_err(|err| DdsError(format!("reader {}: {err}", e.topic)))?;
        let gid = r.guid().to_bytes();
        let samples = r
            .async_sample_stream()
            .filter_map(|s| async move {
                let s = s.ok()?;
                let id = s.sample_info().sample_identity();
                let id = SampleId {
                    writer_guid: id.writer_guid.to_bytes(),
                    seq: i64::from(id.sequence_number),
                };
                let source_time = s
                    .sample_info()
                    .source_timestamp()
                    .and_then(|t| time_of(t.to_ticks()));
                Some(Received {
                    cdr: s.into_value().0,
                    id: Some(id),
                    source_time,
                })
            })
            .boxed();
        Ok(Reader { samples, gid })
    }
}
