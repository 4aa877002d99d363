//! The on-disk blob cache: schema blobs keyed by their full SHA-256, so a master that has
//! seen a schema once never downloads it again (`docs/protocol.md` §6).
//!
//! Layout: one file per blob, `<64 hex digits>.bin`, in the cache directory
//! (`$FCAN_CACHE_DIR`, else `$XDG_CACHE_HOME/fcan/blobs`, else `~/.cache/fcan/blobs`).
//! Files are written to a temporary name and renamed, so a crash never leaves a torn blob;
//! a lookup re-hashes what it reads, so a corrupted file is ignored, never trusted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fcan_core::hash::{HashPrefix, SchemaDigest};

/// Where schema blobs are kept between runs.
pub trait BlobStore: Send {
    /// A blob whose SHA-256 starts with `prefix` and whose length is `len`, if stored.
    fn find(&self, prefix: HashPrefix, len: u32) -> Option<(SchemaDigest, Vec<u8>)>;
    /// Stores a verified blob.
    fn store(&self, digest: SchemaDigest, blob: &[u8]) -> std::io::Result<()>;
}

/// A cache that lives only as long as the master (the default for tests and the demo's
/// `--no-cache`).
#[derive(Default)]
pub struct MemoryStore {
    blobs: Mutex<HashMap<SchemaDigest, Vec<u8>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of blobs held.
    pub fn len(&self) -> usize {
        self.blobs.lock().map(|b| b.len()).unwrap_or(0)
    }

    /// Whether no blob is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl BlobStore for MemoryStore {
    fn find(&self, prefix: HashPrefix, len: u32) -> Option<(SchemaDigest, Vec<u8>)> {
        let blobs = self.blobs.lock().ok()?;
        blobs
            .iter()
            .find(|(d, b)| d.matches(prefix) && b.len() as u64 == len as u64)
            .map(|(d, b)| (*d, b.clone()))
    }

    fn store(&self, digest: SchemaDigest, blob: &[u8]) -> std::io::Result<()> {
        if let Ok(mut blobs) = self.blobs.lock() {
            blobs.insert(digest, blob.to_vec());
        }
        Ok(())
    }
}

impl<T: BlobStore + Sync> BlobStore for std::sync::Arc<T> {
    fn find(&self, prefix: HashPrefix, len: u32) -> Option<(SchemaDigest, Vec<u8>)> {
        (**self).find(prefix, len)
    }
    fn store(&self, digest: SchemaDigest, blob: &[u8]) -> std::io::Result<()> {
        (**self).store(digest, blob)
    }
}

/// Blobs in a directory, one file each.
#[derive(Clone, Debug)]
pub struct DiskStore {
    dir: PathBuf,
}

impl DiskStore {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DiskStore { dir: dir.into() }
    }

    /// The default directory: `$FCAN_CACHE_DIR`, else `$XDG_CACHE_HOME/fcan/blobs`, else
    /// `$HOME/.cache/fcan/blobs`, else `.fcan-cache` in the working directory.
    pub fn default_dir() -> PathBuf {
        if let Some(d) = std::env::var_os("FCAN_CACHE_DIR") {
            return PathBuf::from(d);
        }
        if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
            return Path::new(&d).join("fcan/blobs");
        }
        if let Some(h) = std::env::var_os("HOME") {
            return Path::new(&h).join(".cache/fcan/blobs");
        }
        PathBuf::from(".fcan-cache")
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, digest: SchemaDigest) -> PathBuf {
        self.dir.join(format!("{digest}.bin"))
    }
}

impl BlobStore for DiskStore {
    fn find(&self, prefix: HashPrefix, len: u32) -> Option<(SchemaDigest, Vec<u8>)> {
        let want = prefix.to_string();
        let entries = std::fs::read_dir(&self.dir).ok()?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(hex) = name.strip_suffix(".bin") else {
                continue;
            };
            if !hex.starts_with(&want) {
                continue;
            }
            let Some(named) = SchemaDigest::from_hex(hex) else {
                continue;
            };
            let Ok(bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            // Never trust the file name: the content must hash to it.
            if SchemaDigest::of(&bytes) == named && bytes.len() as u64 == len as u64 {
                return Some((named, bytes));
            }
        }
        None
    }

    fn store(&self, digest: SchemaDigest, blob: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self
            .dir
            .join(format!(".{digest}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, blob)?;
        std::fs::rename(&tmp, self.path_of(digest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fcan-cache-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn disk_store_finds_by_prefix_and_length() {
        let store = DiskStore::new(tempdir("find"));
        let blob = b"schema bytes".to_vec();
        let d = SchemaDigest::of(&blob);
        assert!(store.find(d.prefix(), blob.len() as u32).is_none());
        store.store(d, &blob).unwrap();
        assert_eq!(
            store.find(d.prefix(), blob.len() as u32),
            Some((d, blob.clone()))
        );
        assert!(store.find(d.prefix(), blob.len() as u32 + 1).is_none());
        let other = SchemaDigest::of(b"other");
        assert!(store.find(other.prefix(), blob.len() as u32).is_none());
    }

    #[test]
    fn a_corrupted_cache_file_is_not_trusted() {
        let store = DiskStore::new(tempdir("corrupt"));
        let blob = b"the real schema".to_vec();
        let d = SchemaDigest::of(&blob);
        store.store(d, &blob).unwrap();
        let mut bad = blob.clone();
        bad[0] ^= 1;
        std::fs::write(store.path_of(d), &bad).unwrap();
        assert!(store.find(d.prefix(), blob.len() as u32).is_none());
    }

    #[test]
    fn memory_store_roundtrip() {
        let store = MemoryStore::new();
        let d = SchemaDigest::of(b"x");
        store.store(d, b"x").unwrap();
        assert_eq!(store.len(), 1);
        assert_eq!(store.find(d.prefix(), 1).unwrap().1, b"x");
    }
}
