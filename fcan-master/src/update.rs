//! Firmware update over the bus, the master's side of one node (`docs/protocol.md`
//! §3.14): a sans-I/O session. The shell gives it the time and the node's UPDATE replies
//! and sends what [`UpdateSession::poll`] returns; the session offers the image, keeps a
//! window of DATA chunks in flight paced to a share of the bus, goes back to the node's
//! `next` after a loss or a silence, commits and waits for the verdict.
//!
//! ```
//! use fcan_master::update::{UpdateConfig, UpdateImage, UpdateSession, Outgoing};
//! let image = UpdateImage::new(vec![7u8; 1000], [0; 32], "io_board", "2.0.0");
//! let mut s = UpdateSession::new(image, UpdateConfig::default(), fcan_core::frame::Mtu::Fd);
//! // First thing out: the offer.
//! assert!(matches!(s.poll(0).as_slice(), [Outgoing::Offer]));
//! ```

use std::collections::VecDeque;

use fcan_core::frame::Mtu;
use fcan_core::msg::update::{Sha256, DATA_HEADER_LEN};
use fcan_core::msg::{UpdateOffer, UpdatePhase, UpdateReason, UpdateReply, UpdateRequest};
use fcan_transport::sim::BitRates;

/// Bus time a session may catch up on after polling late (see `poll`).
const PACING_CREDIT_US: u64 = 1_000;

/// An image to write: its bytes and what it declares.
#[derive(Clone, Debug)]
pub struct UpdateImage {
    bytes: Vec<u8>,
    sha256: Sha256,
    schema: Sha256,
    node: String,
    version: String,
}

impl UpdateImage {
    /// An image for nodes whose schema is named `node`; `schema` is the SHA-256 of the
    /// schema blob the new firmware announces.
    pub fn new(bytes: Vec<u8>, schema: Sha256, node: &str, version: &str) -> UpdateImage {
        UpdateImage {
            // The schema hash rule is SHA-256 of the bytes; an image's is the same.
            sha256: fcan_core::hash::SchemaDigest::of(&bytes).0,
            bytes,
            schema,
            node: node.to_owned(),
            version: version.to_owned(),
        }
    }

    /// The image's SHA-256.
    pub fn sha256(&self) -> Sha256 {
        self.sha256
    }

    /// The schema name of the nodes it is for.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Its version string.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The SHA-256 of the schema blob the new firmware announces.
    pub fn schema(&self) -> Sha256 {
        self.schema
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it has no bytes (an offer of it is refused).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The OFFER that proposes it.
    pub fn offer(&self) -> UpdateOffer<'_> {
        UpdateOffer {
            size: self.bytes.len() as u32,
            image: self.sha256,
            schema: self.schema,
            node: &self.node,
            version: &self.version,
        }
    }
}

/// The first bytes of an image file ([`UpdateImage::to_file`]).
pub const IMAGE_MAGIC: &[u8; 8] = b"FCANIMG1";

/// The largest image the master takes (`docs/protocol.md` §3.14: it holds the image in
/// memory).
pub const MAX_IMAGE_LEN: usize = 16 << 20;

impl UpdateImage {
    /// The image as one file: [`IMAGE_MAGIC`], a `u32` little-endian length, a JSON
    /// manifest of that length (`node`, `version`, `schema` and `sha256` in hex, `size`),
    /// then the image's bytes. What `fcan update` reads and what a firmware build writes
    /// beside its binary; the remote API carries it too.
    ///
    /// ```
    /// use fcan_master::update::UpdateImage;
    /// let image = UpdateImage::new(b"firmware".to_vec(), [7; 32], "io_board{i}", "2.0.0");
    /// let back = UpdateImage::from_file(&image.to_file()).unwrap();
    /// assert_eq!((back.node(), back.version(), back.bytes()), ("io_board{i}", "2.0.0", &b"firmware"[..]));
    /// assert!(UpdateImage::from_file(b"FCANIMG1garbage").is_err());
    /// ```
    pub fn to_file(&self) -> Vec<u8> {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let manifest = serde_json::json!({
            "node": self.node,
            "version": self.version,
            "schema": hex(&self.schema),
            "sha256": hex(&self.sha256),
            "size": self.bytes.len(),
        })
        .to_string();
        let mut out = Vec::with_capacity(12 + manifest.len() + self.bytes.len());
        out.extend_from_slice(IMAGE_MAGIC);
        out.extend_from_slice(&(manifest.len() as u32).to_le_bytes());
        out.extend_from_slice(manifest.as_bytes());
        out.extend_from_slice(&self.bytes);
        out
    }

    /// Reads [`to_file`](Self::to_file)'s layout back (untrusted input: every field
    /// checked, the size and SHA-256 against the bytes).
    pub fn from_file(file: &[u8]) -> Result<UpdateImage, String> {
        let rest = file
            .strip_prefix(IMAGE_MAGIC.as_slice())
            .ok_or("not an fcan image file (it does not start with FCANIMG1)")?;
        let (len, rest) = rest
            .split_first_chunk::<4>()
            .ok_or("the image file ends before its manifest")?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err("the image file ends inside its manifest".into());
        }
        let (manifest, bytes) = rest.split_at(len);
        let m: serde_json::Value = serde_json::from_slice(manifest)
            .map_err(|e| format!("the image's manifest is not JSON: {e}"))?;
        let text = |k: &str| {
            m.get(k)
                .and_then(|v| v.as_str())
                .ok_or_else(|| format!("the image's manifest has no `{k}` string"))
        };
        let digest = |k: &str| -> Result<Sha256, String> {
            fcan_core::hash::SchemaDigest::from_hex(text(k)?)
                .map(|d| d.0)
                .ok_or_else(|| format!("the manifest's `{k}` is not a SHA-256 in hex"))
        };
        let (node, version) = (text("node")?, text("version")?);
        if node.is_empty() || node.len() > fcan_core::msg::update::NAME_MAX {
            return Err(format!(
                "the manifest's `node` must have 1 to {} bytes",
                fcan_core::msg::update::NAME_MAX
            ));
        }
        if version.len() > fcan_core::msg::update::VERSION_MAX {
            return Err(format!(
                "the manifest's `version` has more than {} bytes",
                fcan_core::msg::update::VERSION_MAX
            ));
        }
        let size = m.get("size").and_then(|v| v.as_u64());
        if size != Some(bytes.len() as u64) {
            return Err(format!(
                "the manifest says {size:?} bytes, the file holds {}",
                bytes.len()
            ));
        }
        if bytes.is_empty() || bytes.len() > MAX_IMAGE_LEN {
            return Err(format!(
                "an image has 1 to {MAX_IMAGE_LEN} bytes, this one {}",
                bytes.len()
            ));
        }
        let image = UpdateImage::new(bytes.to_vec(), digest("schema")?, node, version);
        if image.sha256 != digest("sha256")? {
            return Err("the image's bytes do not match the manifest's SHA-256".into());
        }
        Ok(image)
    }
}

/// How a session uses the bus.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateConfig {
    /// Share of the bus time DATA may take, in (0, 1]. Other nodes' data frames win
    /// arbitration anyway; the share leaves room for their configuration traffic.
    pub share: f64,
    /// The bus's bit rates, to know how long a chunk occupies it.
    pub rates: BitRates,
    /// Chunks in flight without a PROGRESS.
    pub window: usize,
    /// Silence after which the session goes back to the last acknowledged byte.
    pub retry_us: u64,
    /// Silences in a row before the session gives up (the node keeps what it stored).
    pub max_retries: u32,
    /// QUERY period while the node verifies.
    pub query_us: u64,
}

impl Default for UpdateConfig {
    /// 25 % of a 1 Mbit/s / 5 Mbit/s bus, 4 chunks in flight, 200 ms retry, 20 retries,
    /// QUERY every 100 ms (`docs/protocol.md` §3.14).
    fn default() -> Self {
        UpdateConfig {
            share: 0.25,
            rates: BitRates::default(),
            window: 4,
            retry_us: 200_000,
            max_retries: 20,
            query_us: 100_000,
        }
    }
}

/// What the shell must send to the node next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outgoing {
    /// [`UpdateImage::offer`].
    Offer,
    /// DATA of `len` bytes from `offset` ([`UpdateSession::data`] gives the request).
    Data {
        /// First byte.
        offset: u32,
        /// Bytes.
        len: u16,
    },
    /// COMMIT of the image.
    Commit,
    /// QUERY.
    Query,
}

impl Outgoing {
    /// The request to encode, borrowing the image from `s`.
    pub fn request<'a>(&self, s: &'a UpdateSession) -> UpdateRequest<'a> {
        match *self {
            Outgoing::Offer => UpdateRequest::Offer(s.image.offer()),
            Outgoing::Data { offset, len } => UpdateRequest::Data {
                offset,
                data: s
                    .image
                    .bytes
                    .get(offset as usize..offset as usize + len as usize)
                    .unwrap_or(&[]),
            },
            Outgoing::Commit => UpdateRequest::Commit {
                image: s.image.sha256,
            },
            Outgoing::Query => UpdateRequest::Query,
        }
    }
}

/// Where a session stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionState {
    /// The offer is out; no answer yet.
    Offering,
    /// Sending DATA.
    Sending,
    /// COMMIT is out; waiting for Verifying.
    Committing,
    /// The node reads the image back.
    Verifying,
    /// The node verified and marked the image; it reboots into it.
    Done,
    /// The update ended without a new firmware: the node's reason, or silence.
    Failed(Failure),
}

/// Why a session failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The node refused or ended it, with this reason.
    Node(UpdateReason),
    /// The node stopped answering (`max_retries` silences in a row).
    Silent,
    /// The node kept saying it verifies for longer than [`verify_budget_us`] allows.
    NotVerified,
}

/// How long a node may verify an image of `size` bytes (read it back and hash it) before
/// the session gives up: 30 s, plus the image read back at 16 KiB/s (the runtime reads a
/// few hundred bytes per poll, so a node polled at 1 kHz reads ten times faster; a slow
/// external flash still fits). Without a bound a node answering "verifying" for ever
/// would hold its update, and whoever waits for it, for ever.
pub fn verify_budget_us(size: usize) -> u64 {
    30_000_000 + size as u64 * 1_000_000 / (16 * 1024)
}

/// How far the transfer is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Bytes the node acknowledged.
    pub acked: u64,
    /// Image size.
    pub size: u64,
    /// Bytes per second since the first DATA.
    pub rate: f64,
    /// Seconds left at that rate (`None` before any rate is known).
    pub eta_s: Option<f64>,
    /// Bytes sent again after a loss or a silence.
    pub resent: u64,
}

/// The master's side of one node's update. Sans I/O: see the module doc.
#[derive(Debug)]
pub struct UpdateSession {
    image: UpdateImage,
    cfg: UpdateConfig,
    mtu: Mtu,
    state: SessionState,
    chunk: u16,
    /// Acknowledged by the node (its `next`).
    acked: u32,
    /// Next byte to send.
    send_at: u32,
    /// Offsets of chunks in flight, oldest first.
    in_flight: VecDeque<u32>,
    /// When the next chunk may go out (bus share).
    next_slot_us: u64,
    /// When the last request needing an answer went out or the last answer came.
    last_heard_us: u64,
    waiting: bool,
    /// Silences, and rounds answered without progress, since the node last acknowledged
    /// a new byte.
    retries: u32,
    /// Where the last rewind after a gap went: answers to chunks sent before it report
    /// the same gap and must not send the window again.
    rewound_to: Option<u32>,
    /// When verifying must have ended ([`verify_budget_us`] after the first Verifying).
    verify_deadline_us: Option<u64>,
    started_us: Option<u64>,
    first_acked: u32,
    now_us: u64,
    resent: u64,
    high_water: u32,
}

impl UpdateSession {
    /// A session that will offer `image` over a link with `mtu`-byte frames.
    pub fn new(image: UpdateImage, cfg: UpdateConfig, mtu: Mtu) -> UpdateSession {
        UpdateSession {
            image,
            cfg,
            mtu,
            state: SessionState::Offering,
            chunk: 0,
            acked: 0,
            send_at: 0,
            in_flight: VecDeque::new(),
            next_slot_us: 0,
            last_heard_us: 0,
            waiting: false,
            retries: 0,
            rewound_to: None,
            verify_deadline_us: None,
            started_us: None,
            first_acked: 0,
            now_us: 0,
            resent: 0,
            high_water: 0,
        }
    }

    /// Where the session stands.
    pub fn state(&self) -> SessionState {
        self.state
    }

    /// The image.
    pub fn image(&self) -> &UpdateImage {
        &self.image
    }

    /// How far the transfer is.
    pub fn progress(&self) -> Progress {
        let size = self.image.len() as u64;
        let acked = u64::from(self.acked);
        let rate = match self.started_us {
            Some(t0) if self.now_us > t0 => {
                (acked - u64::from(self.first_acked)) as f64 * 1e6 / (self.now_us - t0) as f64
            }
            _ => 0.0,
        };
        Progress {
            acked,
            size,
            rate,
            eta_s: (rate > 0.0).then(|| (size - acked) as f64 / rate),
            resent: self.resent,
        }
    }

    fn size(&self) -> u32 {
        self.image.len() as u32
    }

    /// Bus time of one DATA transfer of `len` bytes, in µs (CAN FD frames with bit-rate
    /// switching on an FD link).
    fn wire_us(&self, len: usize) -> f64 {
        use fcan_core::frame::{CanId, Frame};
        let payload = DATA_HEADER_LEN + len;
        let per = self.mtu.payload();
        let full = payload / per;
        let rest = payload % per;
        let id = CanId::Extended(0x1F00_0000);
        let frame = |n: usize| {
            Frame::padded(self.mtu, id, &vec![0x55u8; n])
                .map(|f| self.cfg.rates.frame_time(&f).as_secs_f64() * 1e6)
                .unwrap_or(0.0)
        };
        let mut t = full as f64 * frame(per);
        if rest > 0 {
            t += frame(rest);
        }
        t
    }

    /// What to send at `now_us` (microseconds on any monotonic clock). Call it often:
    /// after each reply, and at least every few milliseconds while DATA flows.
    pub fn poll(&mut self, now_us: u64) -> Vec<Outgoing> {
        self.now_us = now_us;
        let mut out = Vec::new();
        let silent = self.waiting && now_us.saturating_sub(self.last_heard_us) >= self.cfg.retry_us;
        match self.state {
            SessionState::Offering => {
                if !self.waiting || silent {
                    if !self.count_retry(silent) {
                        return out;
                    }
                    out.push(Outgoing::Offer);
                    self.expect(now_us);
                }
            }
            SessionState::Sending => {
                if silent {
                    if !self.count_retry(true) {
                        return out;
                    }
                    // Go back to what the node has.
                    self.rewind(self.acked);
                    self.rewound_to = Some(self.acked);
                }
                while self.in_flight.len() < self.cfg.window.max(1)
                    && self.send_at < self.size()
                    && now_us >= self.next_slot_us
                {
                    let len = (self.size() - self.send_at).min(u32::from(self.chunk)) as u16;
                    let offset = self.send_at;
                    if offset < self.high_water {
                        self.resent += u64::from(len);
                    }
                    out.push(Outgoing::Data { offset, len });
                    self.in_flight.push_back(offset);
                    self.send_at += u32::from(len);
                    self.high_water = self.high_water.max(self.send_at);
                    let wire = self.wire_us(len as usize) / self.cfg.share.clamp(0.01, 1.0);
                    // Credit unused bus time of up to one millisecond: a shell that polls
                    // every millisecond still reaches its share when a chunk takes less.
                    let base = self
                        .next_slot_us
                        .max(now_us.saturating_sub(PACING_CREDIT_US));
                    self.next_slot_us = base + wire.ceil() as u64;
                    if !self.waiting {
                        self.expect(now_us);
                    }
                }
                if self.acked >= self.size() && self.in_flight.is_empty() {
                    self.state = SessionState::Committing;
                    self.waiting = false;
                    self.retries = 0;
                    return self.poll(now_us);
                }
            }
            SessionState::Committing => {
                if !self.waiting || silent {
                    if !self.count_retry(silent) {
                        return out;
                    }
                    out.push(Outgoing::Commit);
                    self.expect(now_us);
                }
            }
            SessionState::Verifying => {
                if self.verify_deadline_us.is_some_and(|d| now_us >= d) {
                    self.state = SessionState::Failed(Failure::NotVerified);
                    return out;
                }
                if now_us.saturating_sub(self.last_heard_us) >= self.cfg.query_us {
                    // The last QUERY went unanswered: a silence (the period is shorter
                    // than `retry_us`, so `silent` would never say so).
                    if self.waiting && !self.count_retry(true) {
                        return out;
                    }
                    out.push(Outgoing::Query);
                    self.last_heard_us = now_us;
                    self.waiting = true;
                }
            }
            SessionState::Done | SessionState::Failed(_) => {}
        }
        out
    }

    /// The next time [`UpdateSession::poll`] has something to do, if any.
    pub fn poll_at(&self) -> Option<u64> {
        match self.state {
            SessionState::Done | SessionState::Failed(_) => None,
            SessionState::Sending if !self.in_flight.is_empty() || self.send_at < self.size() => {
                let retry = self.last_heard_us + self.cfg.retry_us;
                if self.in_flight.len() < self.cfg.window.max(1) && self.send_at < self.size() {
                    Some(self.next_slot_us.min(retry))
                } else {
                    Some(retry)
                }
            }
            SessionState::Verifying => Some(self.last_heard_us + self.cfg.query_us),
            _ => Some(self.last_heard_us + self.cfg.retry_us),
        }
    }

    fn expect(&mut self, now_us: u64) {
        self.waiting = true;
        self.last_heard_us = now_us;
    }

    /// Counts a silence; false (and Failed) once there were too many in a row.
    fn count_retry(&mut self, silent: bool) -> bool {
        if silent {
            self.retries += 1;
            if self.retries > self.cfg.max_retries {
                self.state = SessionState::Failed(Failure::Silent);
                return false;
            }
        }
        true
    }

    fn rewind(&mut self, to: u32) {
        self.in_flight.clear();
        self.send_at = to;
        self.waiting = false;
    }

    /// A reply from the node. `offset` is the offset of the DATA chunk a PROGRESS
    /// answers (the shell knows it from the transfer id), `None` for other replies.
    pub fn on_reply(&mut self, reply: &UpdateReply<'_>, answered: Option<u32>, now_us: u64) {
        self.now_us = now_us;
        match (*reply, self.state) {
            (UpdateReply::Status(s), SessionState::Offering) => {
                if s.reason != UpdateReason::None {
                    self.state = SessionState::Failed(Failure::Node(s.reason));
                    return;
                }
                if s.phase != UpdatePhase::Receiving {
                    return;
                }
                let fits = self.mtu.payload() * fcan_core::id::MAX_SEGMENTS - DATA_HEADER_LEN;
                self.chunk = s.max_chunk.min(fits as u16);
                if self.chunk == 0 {
                    self.state = SessionState::Failed(Failure::Node(UpdateReason::Unsupported));
                    return;
                }
                self.acked = s.offset.min(self.size());
                self.first_acked = self.acked;
                self.high_water = self.acked;
                self.rewind(self.acked);
                self.started_us = Some(now_us);
                self.retries = 0;
                self.state = SessionState::Sending;
            }
            (UpdateReply::Progress { next }, SessionState::Sending) => {
                self.last_heard_us = now_us;
                if next > self.acked {
                    self.acked = next.min(self.size());
                    // Progress: only rounds without any count against the retries (a
                    // node that answers every chunk and stores none would otherwise
                    // keep the transfer going for ever).
                    self.retries = 0;
                }
                if let Some(o) = answered {
                    if let Some(i) = self.in_flight.iter().position(|&x| x == o) {
                        self.in_flight.remove(i);
                    }
                    if o > next && self.rewound_to != Some(self.acked) {
                        // That chunk was not stored: something before it was lost. Once
                        // per gap: the answers to the chunks after it say the same.
                        self.rewind(self.acked);
                        self.rewound_to = Some(self.acked);
                    }
                }
                // Chunks the node has already are no longer in flight.
                let acked = self.acked;
                self.in_flight.retain(|&x| x >= acked);
                // Sent and not acknowledged: a silence from here on is a lost round.
                self.waiting = self.send_at > self.acked;
            }
            // DATA without an offer (the node dropped the transfer: a flash error).
            (UpdateReply::Status(s), SessionState::Sending) if s.reason != UpdateReason::None => {
                self.state = SessionState::Failed(Failure::Node(s.reason));
            }
            (UpdateReply::Status(s), SessionState::Committing | SessionState::Verifying) => {
                match (s.phase, s.reason) {
                    (UpdatePhase::Verified, _) => self.state = SessionState::Done,
                    (UpdatePhase::Verifying, _) => {
                        self.retries = 0;
                        self.last_heard_us = now_us;
                        self.waiting = false;
                        self.state = SessionState::Verifying;
                        self.verify_deadline_us
                            .get_or_insert(now_us + verify_budget_us(self.image.len()));
                    }
                    // Says nothing of the COMMIT (not a phase it answers with): no
                    // progress, so the retry timer goes on. Answering it as progress let
                    // a node that says so to every COMMIT draw one after another for ever.
                    (_, UpdateReason::None) => {}
                    (_, r) => self.state = SessionState::Failed(Failure::Node(r)),
                }
            }
            _ => {}
        }
    }

    /// The node rebooted (a new boot id), announcing a schema whose hash starts with
    /// `schema_prefix`. After COMMIT, the new firmware's schema means it runs (the
    /// Verified STATUS may have been lost on the way); anything else means the node
    /// restarted without it (a power cut while verifying boots the old image, which the
    /// protocol guarantees), and so does any reboot before COMMIT: the node's transfer
    /// state is gone, and the session offers again from the start.
    pub fn node_rebooted(&mut self, schema_prefix: [u8; 8]) {
        let new = self.image.schema.get(..8) == Some(&schema_prefix[..]);
        match self.state {
            SessionState::Committing | SessionState::Verifying if new => {
                self.state = SessionState::Done
            }
            SessionState::Offering
            | SessionState::Sending
            | SessionState::Committing
            | SessionState::Verifying => {
                self.state = SessionState::Offering;
                self.waiting = false;
                self.retries = 0;
                self.in_flight.clear();
            }
            SessionState::Done | SessionState::Failed(_) => {}
        }
    }
}
