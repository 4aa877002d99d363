//! The schema hash rule: SHA-256 over the exact blob bytes; ANNOUNCE carries the first 8
//! bytes ([`HashPrefix`]), the master verifies the whole digest of what it downloads.

use sha2::{Digest, Sha256};

/// The full SHA-256 of a schema blob.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SchemaDigest(pub [u8; 32]);

/// The first 8 bytes of a [`SchemaDigest`], as carried by ANNOUNCE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HashPrefix(pub [u8; 8]);

impl SchemaDigest {
    /// Hashes a blob.
    ///
    /// ```
    /// use fcan_core::hash::SchemaDigest;
    /// let d = SchemaDigest::of(b"abc");
    /// assert_eq!(
    ///     format!("{d}"),
    ///     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    /// );
    /// assert_eq!(d.prefix().0, [0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea]);
    /// ```
    pub fn of(blob: &[u8]) -> SchemaDigest {
        let out = Sha256::digest(blob);
        let mut d = [0u8; 32];
        d.copy_from_slice(&out);
        SchemaDigest(d)
    }

    /// The part ANNOUNCE carries.
    pub fn prefix(&self) -> HashPrefix {
        let mut p = [0u8; 8];
        p.copy_from_slice(&self.0[..8]);
        HashPrefix(p)
    }

    /// Whether this digest starts with `prefix`: how the master checks a downloaded blob
    /// against the announcement.
    pub fn matches(&self, prefix: HashPrefix) -> bool {
        self.prefix() == prefix
    }

    /// Parses 64 lowercase or uppercase hex digits.
    ///
    /// ```
    /// use fcan_core::hash::SchemaDigest;
    /// let d = SchemaDigest::of(b"");
    /// let text = format!("{d}");
    /// assert_eq!(SchemaDigest::from_hex(&text), Some(d));
    /// assert_eq!(SchemaDigest::from_hex("abc"), None);
    /// ```
    pub fn from_hex(s: &str) -> Option<SchemaDigest> {
        let s = s.trim();
        if s.len() != 64 {
            return None;
        }
        let mut d = [0u8; 32];
        for (i, byte) in d.iter_mut().enumerate() {
            let hi = hex_val(s.as_bytes()[2 * i])?;
            let lo = hex_val(s.as_bytes()[2 * i + 1])?;
            *byte = hi << 4 | lo;
        }
        Some(SchemaDigest(d))
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl core::fmt::Display for SchemaDigest {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl core::fmt::Debug for SchemaDigest {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SchemaDigest({self})")
    }
}

impl core::fmt::Display for HashPrefix {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}
