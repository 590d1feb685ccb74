//! A durable [`ObjectStore`] on a local filesystem.
//!
//! Sluice acknowledges a write only once the object store says it is durable,
//! so this backend must give the guarantee S3 gives on a successful PUT: after
//! `Created` returns, the bytes *and* the directory entries naming them
//! survive a power loss. Hence the sequence for `put_if_absent`:
//!
//! 1. write the body to a unique temp file under `<root>/.tmp/` and fsync it;
//! 2. make sure every parent directory of the key exists and that its entry in
//!    its own parent is durable (fsync the parent once per directory);
//! 3. `link(2)` the temp file to the final path. `link` fails with `EEXIST`
//!    instead of replacing, which is exactly create-if-absent, and the object
//!    appears complete or not at all;
//! 4. remove the temp name and fsync the key's directory so the new entry is
//!    durable.
//!
//! Failures before the link cannot have created the object and are
//! determinate; a failure of the final directory fsync leaves an object that
//! is visible but maybe not durable, so it is indeterminate.
//!
//! Limitations, compared with a real bucket: a key cannot be both an object
//! and a prefix of another key's directory (`a` and `a/b`), and the top-level
//! name `.tmp` is reserved. Empty directories are left behind after deletes
//! (removing them would race with concurrent puts into them).

use super::{
    check_key, check_prefix, resolve_range, validate_key, ObjectMeta, ObjectStore, PutOutcome, StoreError, StoreResult,
};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Name of the directory (directly under the root) holding in-flight writes.
const TMP_DIR: &str = ".tmp";

/// Age after which a temp file can only belong to an interrupted write.
const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(600);

/// A durable object store rooted at a local directory.
///
/// Clones share the root and the cache of directories known to be durable.
/// One process should own a root at a time: [`LocalStore::open`] deletes
/// every temp file it finds, which would fail (determinately) the puts of
/// another process writing at that moment.
#[derive(Debug, Clone)]
pub struct LocalStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    tmp: PathBuf,
    /// Directories whose entry in their parent has been fsynced by this
    /// process. Starts empty on every open because a directory that merely
    /// exists may still be only in the page cache (a crashed predecessor may
    /// have created it without syncing); each is synced once, then cached.
    durable_dirs: Mutex<HashSet<PathBuf>>,
    /// Distinguishes temp files of concurrent puts within this process.
    next_tmp: AtomicU64,
}

impl LocalStore {
    /// Open (creating if needed) a store rooted at `root`, and delete the
    /// temp files of writes that were interrupted by a crash: they were
    /// never linked, so no object refers to them. Several processes may
    /// share a root (several nodes on one `--data-dir`), so only temp files
    /// older than [`STALE_TEMP`] are removed: a live write holds its temp
    /// file for milliseconds.
    pub fn open(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref().to_path_buf();
        if !root.is_dir() {
            fs::create_dir_all(&root)?;
            if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
                fsync_dir(parent)?;
            }
        }
        let tmp = root.join(TMP_DIR);
        match fs::create_dir(&tmp) {
            Ok(()) => fsync_dir(&root)?,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let mut removed = false;
        for entry in fs::read_dir(&tmp)? {
            let entry = entry?;
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                // Another process's put linked its temp file and removed it
                // since we listed the directory.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let stale = meta
                .modified()
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age >= STALE_TEMP);
            if meta.is_file() && stale {
                match fs::remove_file(entry.path()) {
                    Ok(()) => removed = true,
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if removed {
            fsync_dir(&tmp)?;
        }
        let mut durable_dirs = HashSet::new();
        durable_dirs.insert(root.clone());
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                tmp,
                durable_dirs: Mutex::new(durable_dirs),
                next_tmp: AtomicU64::new(0),
            }),
        })
    }

    /// The directory this store lives in.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Run blocking filesystem work off the async workers. A panic or
    /// cancelled task means we do not know how far the work got, so it is
    /// reported as indeterminate.
    async fn blocking<T: Send + 'static>(
        &self,
        op: &'static str,
        key: &str,
        work: impl FnOnce(&Inner) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || work(&inner))
            .await
            .unwrap_or_else(|join| {
                Err(StoreError::indeterminate(
                    op,
                    key,
                    format!("blocking task failed: {join}"),
                ))
            })
    }
}

impl Inner {
    /// The filesystem path of a valid key. The reserved `.tmp` top-level
    /// name is refused so an object can never alias a temp file.
    fn path_of(&self, op: &'static str, key: &str) -> StoreResult<PathBuf> {
        check_key(op, key)?;
        if key == TMP_DIR || key.starts_with(".tmp/") {
            return Err(StoreError::determinate(
                op,
                key,
                false,
                "keys under .tmp/ are reserved by the local store",
            ));
        }
        Ok(self.root.join(key))
    }

    fn put(&self, key: &str, body: &[u8]) -> StoreResult<PutOutcome> {
        let path = self.path_of("put", key)?;
        let io_err = |e: io::Error| StoreError::from_io("put", key, &e);
        let tmp_path = self.write_temp(body).map_err(io_err)?;
        let result = self.link_into_place(key, &tmp_path, &path);
        // The temp name is only a second link to the same inode (or an
        // orphan on failure); a leftover is harmless and removed on open.
        let _ = fs::remove_file(&tmp_path);
        result
    }

    /// Write `body` to a fresh temp file and fsync it, so that the inode is
    /// complete on disk before any durable name points at it.
    fn write_temp(&self, body: &[u8]) -> io::Result<PathBuf> {
        let name = format!(
            "{}-{}-{:016x}",
            std::process::id(),
            self.next_tmp.fetch_add(1, Ordering::Relaxed),
            rand::random::<u64>()
        );
        let tmp_path = self.tmp.join(name);
        let written = (|| {
            let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp_path)?;
            file.write_all(body)?;
            file.sync_all()
        })();
        match written {
            Ok(()) => Ok(tmp_path),
            Err(e) => {
                let _ = fs::remove_file(&tmp_path);
                Err(e)
            }
        }
    }

    fn link_into_place(&self, key: &str, tmp_path: &Path, path: &Path) -> StoreResult<PutOutcome> {
        let io_err = |e: io::Error| StoreError::from_io("put", key, &e);
        let dir = path.parent().expect("a key path lies under the root");
        self.ensure_durable_dir(dir).map_err(io_err)?;
        match fs::hard_link(tmp_path, path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                if fs::symlink_metadata(path).map(|m| m.is_dir()).unwrap_or(false) {
                    return Err(StoreError::determinate(
                        "put",
                        key,
                        false,
                        "the key names a directory of other objects in the local store",
                    ));
                }
                // The existing object may have been linked a moment ago by a
                // concurrent put that has not yet synced the directory. Sync
                // it here so that what we report as existing is durable.
                fsync_dir(dir).map_err(io_err)?;
                return Ok(PutOutcome::AlreadyExists);
            }
            Err(e) => return Err(io_err(e)),
        }
        // The object is now visible; only its durability is in question.
        fsync_dir(dir).map_err(|e| {
            StoreError::indeterminate("put", key, format!("object linked but directory fsync failed: {e}"))
        })?;
        Ok(PutOutcome::Created)
    }

    /// Create `dir` and its missing ancestors, making each one's entry in its
    /// parent durable. Every directory is synced once per process (see
    /// [`Inner::durable_dirs`]); concurrent callers may both sync, which is
    /// harmless, and the cache is filled only after a sync succeeded.
    fn ensure_durable_dir(&self, dir: &Path) -> io::Result<()> {
        if self.is_durable(dir) {
            return Ok(());
        }
        let parent = dir.parent().expect("a key directory lies under the root");
        self.ensure_durable_dir(parent)?;
        match fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => return Err(e),
        }
        fsync_dir(parent)?;
        self.durable_dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(dir.to_path_buf());
        Ok(())
    }

    fn is_durable(&self, dir: &Path) -> bool {
        self.durable_dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(dir)
    }

    fn get(&self, key: &str, range: Option<Range<u64>>) -> StoreResult<Option<Bytes>> {
        let path = self.path_of("get", key)?;
        let io_err = |e: io::Error| StoreError::from_io("get", key, &e);
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if is_missing(&e) => return Ok(None),
            Err(e) => return Err(io_err(e)),
        };
        let meta = file.metadata().map_err(io_err)?;
        if !meta.is_file() {
            // A directory holding other objects; no object has this key.
            return Ok(None);
        }
        let range =
            resolve_range(meta.len(), range).map_err(|reason| StoreError::determinate("get", key, false, reason))?;
        let len = usize::try_from(range.end - range.start)
            .map_err(|_| StoreError::determinate("get", key, false, "range does not fit in memory"))?;
        let mut buf = vec![0; len];
        file.seek(SeekFrom::Start(range.start)).map_err(io_err)?;
        // Objects are immutable, so a short read means the file was damaged
        // under us; read_exact reports that as UnexpectedEof.
        file.read_exact(&mut buf).map_err(io_err)?;
        Ok(Some(Bytes::from(buf)))
    }

    fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        check_prefix(prefix)?;
        // Only the directory named by the prefix's complete segments can
        // hold matches; its entries are then filtered by the partial segment.
        let (dir_key, partial) = match prefix.rsplit_once('/') {
            Some((dir_key, partial)) => (dir_key, partial),
            None => ("", prefix),
        };
        let dir = if dir_key.is_empty() {
            self.root.clone()
        } else {
            self.root.join(dir_key)
        };
        let mut out = Vec::new();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if is_missing(&e) => return Ok(out),
            Err(e) => return Err(StoreError::from_io("list", prefix, &e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::from_io("list", prefix, &e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !name.starts_with(partial) || (dir_key.is_empty() && name == TMP_DIR) {
                continue;
            }
            let key = if dir_key.is_empty() {
                name
            } else {
                format!("{dir_key}/{name}")
            };
            collect(&entry.path(), key, &mut out).map_err(|e| StoreError::from_io("list", prefix, &e))?;
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> StoreResult<()> {
        let path = self.path_of("delete", key)?;
        let dir = path.parent().expect("a key path lies under the root");
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => return Ok(()),
            _ => {}
        }
        match fs::remove_file(&path) {
            Ok(()) => {}
            // Missing is success. Still sync the directory below: an earlier
            // delete may have removed the file and then failed to sync.
            Err(e) if is_missing(&e) => {}
            Err(e) => return Err(StoreError::from_io("delete", key, &e)),
        }
        match fsync_dir(dir) {
            Ok(()) => Ok(()),
            Err(e) if is_missing(&e) => Ok(()),
            Err(e) => Err(StoreError::indeterminate(
                "delete",
                key,
                format!("directory fsync failed: {e}"),
            )),
        }
    }
}

/// Add `path` (known by `key`) to `out`: a file is an object, a directory is
/// walked. Entries vanishing mid-walk (concurrent deletes) are skipped, as
/// are names that are not valid keys (foreign files dropped into the root).
fn collect(path: &Path, key: String, out: &mut Vec<ObjectMeta>) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if is_missing(&e) => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta.is_file() {
        if validate_key(&key).is_ok() {
            out.push(ObjectMeta { key, size: meta.len() });
        }
    } else if meta.is_dir() {
        let entries = match fs::read_dir(path) {
            Ok(entries) => entries,
            Err(e) if is_missing(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str() {
                collect(&entry.path(), format!("{key}/{name}"), out)?;
            }
        }
    }
    Ok(())
}

/// The key does not exist: the file is missing, or a path component is a
/// file rather than a directory.
fn is_missing(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

/// Make the entries of `dir` (creations, links, removals) durable.
fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[async_trait]
impl ObjectStore for LocalStore {
    async fn put_if_absent(&self, key: &str, body: Bytes) -> StoreResult<PutOutcome> {
        let owned = key.to_string();
        self.blocking("put", key, move |inner| inner.put(&owned, &body)).await
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> StoreResult<Option<Bytes>> {
        let owned = key.to_string();
        self.blocking("get", key, move |inner| inner.get(&owned, range)).await
    }

    async fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        let owned = prefix.to_string();
        self.blocking("list", prefix, move |inner| inner.list(&owned)).await
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        let owned = key.to_string();
        self.blocking("delete", key, move |inner| inner.delete(&owned)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn objects_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = LocalStore::open(dir.path()).unwrap();
            let put = store
                .put_if_absent("wal/n1/3/00000000000000000001", Bytes::from_static(b"hello"))
                .await;
            assert_eq!(put.unwrap(), PutOutcome::Created);
            store
                .put_if_absent("meta/log/0001", Bytes::from_static(b"m"))
                .await
                .unwrap();
        }
        let store = LocalStore::open(dir.path()).unwrap();
        let got = store.get("wal/n1/3/00000000000000000001", None).await.unwrap();
        assert_eq!(got.as_deref(), Some(&b"hello"[..]));
        let listed = store.list("").await.unwrap();
        let keys: Vec<_> = listed.iter().map(|m| (m.key.as_str(), m.size)).collect();
        assert_eq!(keys, [("meta/log/0001", 1), ("wal/n1/3/00000000000000000001", 5)]);
        let again = store
            .put_if_absent("meta/log/0001", Bytes::from_static(b"other"))
            .await
            .unwrap();
        assert_eq!(again, PutOutcome::AlreadyExists);
    }

    #[tokio::test]
    async fn stale_temp_files_are_cleaned_on_open() {
        let dir = tempfile::tempdir().unwrap();
        LocalStore::open(dir.path()).unwrap();
        let stale = dir.path().join(TMP_DIR).join("12345-0-deadbeef");
        fs::write(&stale, b"half a write").unwrap();
        // Long before any run of this test: older than STALE_TEMP for sure.
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400);
        fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        // Another live process's write in progress is left alone.
        let live = dir.path().join(TMP_DIR).join("999-0-cafe");
        fs::write(&live, b"being written").unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        assert!(!stale.exists(), "stale temp file survived open");
        assert!(live.exists(), "a fresh temp file of another process was removed");
        assert!(store.list("").await.unwrap().is_empty(), "temp files are never listed");
    }

    /// Regression (found by tests/chaos.rs): a node starting on a data dir
    /// shared with running nodes failed with "No such file or directory"
    /// when a temp file it listed was linked and removed by another
    /// process's put before `open` looked at it.
    #[test]
    fn opening_a_root_while_others_write_to_it_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let writer = LocalStore::open(dir.path()).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let (writer, stop) = (writer.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        writer.inner.put(&format!("wal/w{w}/{i:020}"), b"segment").unwrap();
                        i += 1;
                    }
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut opened = 0;
        let mut failed = Vec::new();
        while std::time::Instant::now() < deadline {
            match LocalStore::open(dir.path()) {
                Ok(_) => opened += 1,
                Err(e) => failed.push(e.to_string()),
            }
        }
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        assert!(
            failed.is_empty(),
            "{} of {} opens failed: {:?}",
            failed.len(),
            opened + failed.len(),
            &failed[..1]
        );
    }

    #[tokio::test]
    async fn successful_puts_leave_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        store.put_if_absent("a/b", Bytes::from_static(b"x")).await.unwrap();
        store.put_if_absent("a/b", Bytes::from_static(b"y")).await.unwrap();
        assert_eq!(fs::read_dir(dir.path().join(TMP_DIR)).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn reserved_and_conflicting_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let err = store.put_if_absent(".tmp/x", Bytes::new()).await.unwrap_err();
        assert!(!err.is_indeterminate() && !err.retryable);
        store.put_if_absent("d/child", Bytes::from_static(b"c")).await.unwrap();
        // `d` is a directory here, not an object: it is absent, not "already existing".
        assert_eq!(store.get("d", None).await.unwrap(), None);
        let err = store.put_if_absent("d", Bytes::new()).await.unwrap_err();
        assert!(!err.is_indeterminate());
        store.delete("d").await.unwrap();
        assert_eq!(store.list("d").await.unwrap().len(), 1);
    }
}
