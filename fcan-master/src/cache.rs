//! The blob cache: schema blobs keyed by their full SHA-256, so a master that has seen a
//! schema once never downloads it again (`docs/protocol.md` §6).
//!
//! Bounded: each store holds at most [`CacheLimits`] (bytes and blobs) and evicts the
//! least recently used blob beyond them, never one that a node of this master uses now
//! ([`BlobStore::in_use`]). A node that reboots with a new schema every time cannot fill
//! the memory or the disk.
//!
//! On disk ([`DiskStore`]): one file per blob, `<64 hex digits>.bin`, in the cache
//! directory (`$FCAN_CACHE_DIR`, else `$XDG_CACHE_HOME/fcan/blobs`, else
//! `~/.cache/fcan/blobs`). A blob is written to a temporary file unique to its writer
//! (`tempfile`, created exclusively) and renamed into place, so a crash never leaves a torn
//! blob and two processes storing one digest never clobber each other. Symbolic links are
//! never followed: an entry that is not a regular file is ignored, and files are opened
//! with `O_NOFOLLOW`. A lookup re-hashes what it reads, so a corrupted file is ignored,
//! never trusted. A file's modification time is its last use (the LRU order, shared by
//! every process using the directory).
//!
//! The engine never waits for the disk: the [`crate::Master`] runs a store that does I/O
//! ([`BlobStore::blocks`]) on a thread of its own (a private `Offloaded`), and the engine asks
//! with [`BlobStore::lookup`], which answers [`Lookup::Pending`] until the thread is done.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, SystemTime};

use fcan_core::blob::MAX_BLOB_LEN;
use fcan_core::hash::{HashPrefix, SchemaDigest};

/// What a non-blocking cache lookup gave.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lookup {
    /// The blob, verified against its digest.
    Found(SchemaDigest, Vec<u8>),
    /// Not held.
    Missing,
    /// Being looked up: ask again later (the store wakes its owner when done).
    Pending,
}

/// Where schema blobs are kept between runs.
pub trait BlobStore: Send {
    /// A blob whose SHA-256 starts with `prefix` and whose length is `len`, if stored.
    /// May block on I/O.
    fn find(&self, prefix: HashPrefix, len: u32) -> Option<(SchemaDigest, Vec<u8>)>;
    /// Stores a verified blob. May block on I/O.
    fn store(&self, digest: SchemaDigest, blob: &[u8]) -> std::io::Result<()>;
    /// [`BlobStore::find`] for the engine, which must not wait: a store doing I/O on
    /// another thread answers [`Lookup::Pending`] until it knows.
    fn lookup(&self, prefix: HashPrefix, len: u32) -> Lookup {
        match self.find(prefix, len) {
            Some((d, b)) => Lookup::Found(d, b),
            None => Lookup::Missing,
        }
    }
    /// The blobs the nodes of this master use now: never evicted while they are.
    fn in_use(&self, _digests: &[SchemaDigest]) {}
    /// Whether [`BlobStore::find`] and [`BlobStore::store`] do I/O (so the master runs
    /// them off its task).
    fn blocks(&self) -> bool {
        true
    }
}

/// How much a store keeps before it evicts the least recently used blobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLimits {
    /// Total bytes of blobs.
    pub max_bytes: u64,
    /// Number of blobs.
    pub max_blobs: usize,
}

impl Default for CacheLimits {
    /// 16 MiB and 512 blobs: hundreds of real schemas (about 1 KB each), and at least 256
    /// of the largest the protocol allows.
    fn default() -> Self {
        CacheLimits {
            max_bytes: 16 << 20,
            max_blobs: 512,
        }
    }
}

/// Which of `entries` (digest, bytes, last use) to evict, oldest use first, so that what
/// remains fits `limits`; never a digest in `keep`.
fn victims(
    mut entries: Vec<(SchemaDigest, u64, u128)>,
    limits: CacheLimits,
    keep: &BTreeSet<SchemaDigest>,
) -> Vec<SchemaDigest> {
    let mut bytes: u64 = entries.iter().map(|e| e.1).sum();
    let mut count = entries.len();
    entries.sort_by_key(|e| e.2);
    let mut out = Vec::new();
    for (d, len, _) in entries {
        if bytes <= limits.max_bytes && count <= limits.max_blobs {
            break;
        }
        if keep.contains(&d) {
            continue;
        }
        bytes -= len;
        count -= 1;
        out.push(d);
    }
    out
}

/// A cache that lives only as long as the master (the default for tests and the demo's
/// `--no-cache`).
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<MemoryInner>,
}

#[derive(Default)]
struct MemoryInner {
    blobs: HashMap<SchemaDigest, (Vec<u8>, u128)>,
    tick: u128,
    limits: CacheLimits,
    in_use: BTreeSet<SchemaDigest>,
}

impl MemoryStore {
    /// An empty store with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store keeping at most `limits`.
    pub fn with_limits(limits: CacheLimits) -> Self {
        let s = Self::default();
        if let Ok(mut i) = s.inner.lock() {
            i.limits = limits;
        }
        s
    }

    /// Number of blobs held.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|b| b.blobs.len()).unwrap_or(0)
    }

    /// Whether no blob is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the blob of `digest` is held.
    pub fn contains(&self, digest: SchemaDigest) -> bool {
        self.inner
            .lock()
            .is_ok_and(|i| i.blobs.contains_key(&digest))
    }
}

impl BlobStore for MemoryStore {
    fn find(&self, prefix: HashPrefix, len: u32) -> Option<(SchemaDigest, Vec<u8>)> {
        let mut inner = self.inner.lock().ok()?;
        inner.tick += 1;
        let tick = inner.tick;
        let (d, (b, used)) = inner
            .blobs
            .iter_mut()
            .find(|(d, (b, _))| d.matches(prefix) && b.len() as u64 == len as u64)?;
        *used = tick;
        Some((*d, b.clone()))
    }

    fn store(&self, digest: SchemaDigest, blob: &[u8]) -> std::io::Result<()> {
        let Ok(mut inner) = self.inner.lock() else {
            return Ok(());
        };
        inner.tick += 1;
        let tick = inner.tick;
        inner.blobs.insert(digest, (blob.to_vec(), tick));
        let entries = inner
            .blobs
            .iter()
            .map(|(d, (b, t))| (*d, b.len() as u64, *t))
            .collect();
        let mut keep = inner.in_use.clone();
        keep.insert(digest);
        for d in victims(entries, inner.limits, &keep) {
            inner.blobs.remove(&d);
        }
        Ok(())
    }

    fn in_use(&self, digests: &[SchemaDigest]) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.in_use = digests.iter().copied().collect();
        }
    }

    fn blocks(&self) -> bool {
        false
    }
}

impl<T: BlobStore + Sync> BlobStore for Arc<T> {
    fn find(&self, prefix: HashPrefix, len: u32) -> Option<(SchemaDigest, Vec<u8>)> {
        (**self).find(prefix, len)
    }
    fn store(&self, digest: SchemaDigest, blob: &[u8]) -> std::io::Result<()> {
        (**self).store(digest, blob)
    }
    fn lookup(&self, prefix: HashPrefix, len: u32) -> Lookup {
        (**self).lookup(prefix, len)
    }
    fn in_use(&self, digests: &[SchemaDigest]) {
        (**self).in_use(digests)
    }
    fn blocks(&self) -> bool {
        (**self).blocks()
    }
}

/// Blobs in a directory, one file each.
#[derive(Clone, Debug)]
pub struct DiskStore {
    dir: PathBuf,
    limits: CacheLimits,
    in_use: Arc<Mutex<BTreeSet<SchemaDigest>>>,
}

/// Temporary files older than this are a crashed writer's and are removed.
const STALE_TMP: Duration = Duration::from_secs(3600);

impl DiskStore {
    /// A store in `dir` (created on first write) with the default limits.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self::with_limits(dir, CacheLimits::default())
    }

    /// A store in `dir` keeping at most `limits`.
    pub fn with_limits(dir: impl Into<PathBuf>, limits: CacheLimits) -> Self {
        DiskStore {
            dir: dir.into(),
            limits,
            in_use: Default::default(),
        }
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

    /// The blob files: (digest, bytes, last use), regular files only.
    fn entries(&self) -> Vec<(SchemaDigest, u64, u128)> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            // `DirEntry::metadata` does not follow symbolic links.
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with('.') && name.ends_with(".tmp") {
                if used.elapsed().is_ok_and(|age| age > STALE_TMP) {
                    let _ = std::fs::remove_file(entry.path());
                }
                continue;
            }
            let Some(d) = name.strip_suffix(".bin").and_then(SchemaDigest::from_hex) else {
                continue;
            };
            let at = used
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            out.push((d, meta.len(), at));
        }
        out
    }
}

/// Opens a file for reading, never through a symbolic link.
fn open_nofollow(path: &Path) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW);
    }
    let f = opts.open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

impl BlobStore for DiskStore {
    fn find(&self, prefix: HashPrefix, len: u32) -> Option<(SchemaDigest, Vec<u8>)> {
        if len > MAX_BLOB_LEN {
            return None;
        }
        let want = prefix.to_string();
        for (named, size, _) in self.entries() {
            if size != len as u64 || !named.to_string().starts_with(&want) {
                continue;
            }
            let Ok(file) = open_nofollow(&self.path_of(named)) else {
                continue;
            };
            let mut bytes = Vec::with_capacity(len as usize);
            if file.take(len as u64 + 1).read_to_end(&mut bytes).is_err() {
                continue;
            }
            // Never trust the file name: the content must hash to it.
            if bytes.len() as u64 == len as u64 && SchemaDigest::of(&bytes) == named {
                // Used now: last in the eviction order.
                if let Ok(f) = open_nofollow(&self.path_of(named)) {
                    let _ = f.set_modified(SystemTime::now());
                }
                return Some((named, bytes));
            }
        }
        None
    }

    fn store(&self, digest: SchemaDigest, blob: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        // Unique to this writer and created exclusively (never through a link); the
        // rename replaces whatever is at the name, a planted link included, atomically.
        let mut tmp = tempfile::Builder::new()
            .prefix(".")
            .suffix(".tmp")
            .tempfile_in(&self.dir)?;
        tmp.write_all(blob)?;
        tmp.as_file().sync_all()?;
        tmp.persist(self.path_of(digest)).map_err(|e| e.error)?;
        let mut keep = self.in_use.lock().map(|k| k.clone()).unwrap_or_default();
        keep.insert(digest);
        for d in victims(self.entries(), self.limits, &keep) {
            let _ = std::fs::remove_file(self.path_of(d));
        }
        Ok(())
    }

    fn in_use(&self, digests: &[SchemaDigest]) {
        if let Ok(mut k) = self.in_use.lock() {
            *k = digests.iter().copied().collect();
        }
    }
}

/// A store whose I/O runs on a thread of its own, so its owner never waits for a disk:
/// [`BlobStore::lookup`] answers [`Lookup::Pending`] and the thread wakes the owner
/// (through the [`tokio::sync::Notify`] [`Offloaded::new`] returns) when the answer is
/// there; stores are queued. The thread ends when the `Offloaded` is dropped.
///
/// Crate-private: [`crate::Master`] wraps every store that [blocks](BlobStore::blocks)
/// in one; a user only chooses the store.
pub(crate) struct Offloaded {
    jobs: Mutex<mpsc::Sender<Job>>,
    answers: Arc<Mutex<Answers>>,
}

enum Job {
    Find(HashPrefix, u32),
    Store(SchemaDigest, Vec<u8>),
    InUse(Vec<SchemaDigest>),
}

/// What a lookup asked: (hash prefix, blob length).
type Key = (HashPrefix, u32);

/// Answers waiting to be taken, and the lookups asked and not answered yet.
#[derive(Default)]
struct Answers {
    done: HashMap<Key, Option<(SchemaDigest, Vec<u8>)>>,
    asked: BTreeSet<Key>,
}

/// Answers left untaken (their nodes went away) are dropped past this many.
const MAX_ANSWERS: usize = 256;

impl Offloaded {
    /// Moves `inner` to a new thread; returns the store and the notifier it wakes when a
    /// lookup is answered.
    pub(crate) fn new(inner: Box<dyn BlobStore>) -> (Offloaded, Arc<tokio::sync::Notify>) {
        let (tx, rx) = mpsc::channel::<Job>();
        let answers: Arc<Mutex<Answers>> = Default::default();
        let wake = Arc::new(tokio::sync::Notify::new());
        let (a, w) = (answers.clone(), wake.clone());
        let spawned = std::thread::Builder::new()
            .name("fcan-blob-cache".into())
            .spawn(move || {
                for job in rx {
                    match job {
                        Job::Find(prefix, len) => {
                            let found = inner.find(prefix, len);
                            if let Ok(mut a) = a.lock() {
                                a.asked.remove(&(prefix, len));
                                if a.done.len() >= MAX_ANSWERS {
                                    a.done.clear();
                                }
                                a.done.insert((prefix, len), found);
                            }
                            w.notify_one();
                        }
                        Job::Store(d, blob) => {
                            let _ = inner.store(d, &blob);
                        }
                        Job::InUse(ds) => inner.in_use(&ds),
                    }
                }
            });
        // Without a thread the receiver is gone: every send fails and lookups answer
        // Missing (the master downloads instead).
        drop(spawned);
        (
            Offloaded {
                jobs: Mutex::new(tx),
                answers,
            },
            wake,
        )
    }

    fn send(&self, job: Job) -> bool {
        self.jobs.lock().is_ok_and(|j| j.send(job).is_ok())
    }
}

impl BlobStore for Offloaded {
    fn find(&self, prefix: HashPrefix, len: u32) -> Option<(SchemaDigest, Vec<u8>)> {
        match self.lookup(prefix, len) {
            Lookup::Found(d, b) => Some((d, b)),
            _ => None,
        }
    }

    fn store(&self, digest: SchemaDigest, blob: &[u8]) -> std::io::Result<()> {
        self.send(Job::Store(digest, blob.to_vec()));
        Ok(())
    }

    fn lookup(&self, prefix: HashPrefix, len: u32) -> Lookup {
        let Ok(mut a) = self.answers.lock() else {
            return Lookup::Missing;
        };
        if let Some(found) = a.done.remove(&(prefix, len)) {
            return match found {
                Some((d, b)) => Lookup::Found(d, b),
                None => Lookup::Missing,
            };
        }
        if a.asked.contains(&(prefix, len)) {
            return Lookup::Pending;
        }
        drop(a);
        if !self.send(Job::Find(prefix, len)) {
            return Lookup::Missing;
        }
        if let Ok(mut a) = self.answers.lock() {
            // The thread may have answered already; then this mark is stale but harmless
            // only if removed: keep it only while no answer is there.
            if !a.done.contains_key(&(prefix, len)) {
                a.asked.insert((prefix, len));
            }
        }
        Lookup::Pending
    }

    fn in_use(&self, digests: &[SchemaDigest]) {
        self.send(Job::InUse(digests.to_vec()));
    }

    fn blocks(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(i: u32, len: usize) -> (SchemaDigest, Vec<u8>) {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(&i.to_le_bytes());
        (SchemaDigest::of(&b), b)
    }

    /// Sets a file's last use to `secs` after the epoch (the LRU order on disk).
    fn used_at(store: &DiskStore, d: SchemaDigest, secs: u64) {
        let f = std::fs::File::options()
            .write(true)
            .open(store.path_of(d))
            .unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap();
    }

    #[test]
    fn disk_store_finds_by_prefix_and_length() {
        let tmp = tempfile::tempdir().unwrap();
        let store = DiskStore::new(tmp.path().join("blobs"));
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
        let tmp = tempfile::tempdir().unwrap();
        let store = DiskStore::new(tmp.path());
        let blob = b"the real schema".to_vec();
        let d = SchemaDigest::of(&blob);
        store.store(d, &blob).unwrap();
        let mut bad = blob.clone();
        bad[0] ^= 1;
        std::fs::write(store.path_of(d), &bad).unwrap();
        assert!(store.find(d.prefix(), blob.len() as u32).is_none());
    }

    /// Item 4: the disk cache is bounded in bytes and blobs; the least recently used go
    /// first, a blob a node uses now never, and a lookup counts as a use.
    #[test]
    fn disk_store_evicts_least_recently_used_but_keeps_blobs_in_use() {
        let tmp = tempfile::tempdir().unwrap();
        let limits = CacheLimits {
            max_bytes: 3 * 1000,
            max_blobs: 100,
        };
        let store = DiskStore::with_limits(tmp.path(), limits);
        let blobs: Vec<_> = (0..6).map(|i| blob(i, 1000)).collect();
        for (i, (d, b)) in blobs.iter().enumerate().take(3) {
            store.store(*d, b).unwrap();
            used_at(&store, *d, 1000 + i as u64);
        }
        // Blob 0 is the oldest but in use; blob 1 was just looked up.
        store.in_use(&[blobs[0].0]);
        assert!(store.find(blobs[1].0.prefix(), 1000).is_some());
        store.store(blobs[3].0, &blobs[3].1).unwrap();
        let held: BTreeSet<_> = store.entries().iter().map(|e| e.0).collect();
        assert_eq!(
            held,
            [blobs[0].0, blobs[1].0, blobs[3].0].into_iter().collect(),
            "blob 2 (least recently used, not in use) goes"
        );
        // A node rebooting with a new blob every time never grows the directory.
        for (d, b) in &blobs[4..] {
            store.store(*d, b).unwrap();
        }
        let total: u64 = store.entries().iter().map(|e| e.1).sum();
        assert!(total <= limits.max_bytes, "{total}");
        assert!(store.entries().iter().any(|e| e.0 == blobs[0].0));
        let count = CacheLimits {
            max_bytes: u64::MAX,
            max_blobs: 2,
        };
        let store = DiskStore::with_limits(tmp.path(), count);
        store.in_use(&[]);
        store.store(blobs[1].0, &blobs[1].1).unwrap();
        assert_eq!(store.entries().len(), 2);
    }

    #[test]
    fn memory_store_is_bounded_and_lru() {
        let store = MemoryStore::with_limits(CacheLimits {
            max_bytes: 2 * 100,
            max_blobs: 10,
        });
        let blobs: Vec<_> = (0..4).map(|i| blob(i, 100)).collect();
        store.store(blobs[0].0, &blobs[0].1).unwrap();
        store.store(blobs[1].0, &blobs[1].1).unwrap();
        assert!(store.find(blobs[0].0.prefix(), 100).is_some());
        store.store(blobs[2].0, &blobs[2].1).unwrap();
        assert!(store.contains(blobs[0].0) && store.contains(blobs[2].0));
        assert!(!store.contains(blobs[1].0));
        store.in_use(&[blobs[0].0]);
        store.store(blobs[3].0, &blobs[3].1).unwrap();
        assert!(store.contains(blobs[0].0) && store.contains(blobs[3].0));
        assert_eq!(store.len(), 2);
    }

    /// Item 4: a symbolic link planted in the cache directory is neither read nor written
    /// through.
    #[cfg(unix)]
    #[test]
    fn symlinks_in_the_cache_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("blobs");
        std::fs::create_dir(&dir).unwrap();
        let store = DiskStore::new(&dir);
        let (d, b) = blob(7, 64);
        // Reading: a link named like the blob, to a file holding the right bytes.
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, &b).unwrap();
        std::os::unix::fs::symlink(&outside, store.path_of(d)).unwrap();
        assert_eq!(store.find(d.prefix(), 64), None);
        // Writing: the link is replaced, the file it pointed to untouched.
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::fs::remove_file(store.path_of(d)).unwrap();
        std::os::unix::fs::symlink(&victim, store.path_of(d)).unwrap();
        store.store(d, &b).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let meta = std::fs::symlink_metadata(store.path_of(d)).unwrap();
        assert!(meta.is_file());
        assert_eq!(store.find(d.prefix(), 64), Some((d, b)));
    }

    /// Item 4: writers of one digest (threads of one process here: they share a process
    /// id, which the temporary name used to be made of) never clobber each other.
    #[test]
    fn concurrent_writers_of_one_digest_do_not_clobber() {
        let tmp = tempfile::tempdir().unwrap();
        let (d, b) = blob(9, 60_000);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let store = DiskStore::new(tmp.path());
                let b = b.clone();
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        store.store(d, &b).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let store = DiskStore::new(tmp.path());
        assert_eq!(store.find(d.prefix(), b.len() as u32), Some((d, b)));
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
    }

    /// Item 4: an offloaded store answers `Pending` at once and wakes its owner when the
    /// thread has the answer; stores are done by the thread.
    #[test]
    fn offloaded_lookups_do_not_wait() {
        let tmp = tempfile::tempdir().unwrap();
        let disk = DiskStore::new(tmp.path());
        let (d, b) = blob(3, 500);
        disk.store(d, &b).unwrap();
        let (store, wake) = Offloaded::new(Box::new(disk));
        assert!(!store.blocks());
        assert_eq!(store.lookup(d.prefix(), 500), Lookup::Pending);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(wake.notified());
        assert_eq!(store.lookup(d.prefix(), 500), Lookup::Found(d, b));
        let (d2, b2) = blob(4, 500);
        assert_eq!(store.lookup(d2.prefix(), 500), Lookup::Pending);
        rt.block_on(wake.notified());
        assert_eq!(store.lookup(d2.prefix(), 500), Lookup::Missing);
        store.store(d2, &b2).unwrap();
        drop(store); // the thread finishes its queue, then ends
        let disk = DiskStore::new(tmp.path());
        for _ in 0..200 {
            if disk.find(d2.prefix(), 500).is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the offloaded store never wrote");
    }
}
