//! Usage and quotas: what each bucket holds, in total and by the claim that stored it, and the
//! limits every write is checked against.
//!
//! # Counting
//!
//! Each bucket has a meter in memory: objects and bytes in the bucket, the same per claim user
//! (the *writer* recorded in each object's metadata), and what writes in flight have reserved.
//! Bytes include the parts of multipart uploads in progress, counted for the claim that started
//! the upload, so that unfinished uploads cannot take more than the quota either. A write first
//! reserves what it adds, checked against the quotas under the meter's lock, and is counted once
//! its rename is done: concurrent writers can never pass a limit together, and the lock is held
//! for arithmetic only, never for a file system call (but see below).
//!
//! Who a write counts for: a claim's key stores for its claim's user; the operator credential
//! stores for nobody (its objects count for the bucket only) and is never refused by a quota. An
//! object replaced or deleted stops counting for whoever stored it, whoever replaces or deletes
//! it. A multipart upload's parts and the object they make count for the claim that started it.
//!
//! # Crash safety
//!
//! The meters are saved as `.provisioner/usage/<bucket>.json`, marked *settled* when they match
//! the disk exactly. Before the first write after a save, the file is marked unsettled (one small
//! write, at most once per [`SETTLE_INTERVAL`] and bucket); a background thread settles it again
//! once no write of that bucket is in flight, and dropping the store settles every bucket. A
//! crash therefore leaves unsettled exactly the buckets written since their last save, and
//! opening the store counts those again from the disk, as it does buckets whose file is missing
//! (lost, or made by an older version). A write that failed in a way that leaves its effect
//! unknown marks its bucket to be counted again at the next start. Files changed by hand inside
//! a bucket directory are noticed when the bucket is counted again: remove its usage file to ask
//! for that.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::attached::DataFile;
use super::durable::{entries_of, write_atomic};
use super::usage_change::{Change, Quota, Usage, Writer};
use super::{BucketStore, Inner, StoreError, parse_key};

/// Directory of the usage files under the state directory.
pub(super) const USAGE_DIR: &str = "usage";
/// How often meters are settled (saved as matching the disk) when writes paused.
pub const SETTLE_INTERVAL: Duration = Duration::from_secs(2);

/// Whether the usage file still describes the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disk {
    /// It says settled and nothing changed since.
    Settled,
    /// It says unsettled: writes happened since the last save.
    Unsettled,
    /// A write's effect is unknown: left unsettled until the next start counts again.
    Tainted,
}

/// Objects and bytes of a bucket, in total and by writer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub total: Usage,
    pub by_writer: HashMap<String, Usage>,
}

impl Counts {
    fn apply(&mut self, change: &Change) {
        self.total.apply(change.total());
        for (writer, delta) in change.by_writer() {
            let Some(writer) = writer else { continue };
            let usage = self.by_writer.entry(writer.to_owned()).or_default();
            usage.apply(delta);
            if usage.is_zero() {
                self.by_writer.remove(writer);
            }
        }
    }

    /// Adds objects (or, with `objects: 0`, bytes of parts) found on disk.
    pub(super) fn count(&mut self, writer: Option<&str>, objects: u64, bytes: u64) {
        let found = Usage { objects, bytes };
        self.total = plus(self.total, found);
        if let Some(writer) = writer {
            let usage = self.by_writer.entry(writer.to_owned()).or_default();
            *usage = plus(*usage, found);
        }
    }
}

/// The usage file of a bucket.
#[derive(Debug, Serialize, Deserialize)]
struct UsageFile {
    settled: bool,
    objects: u64,
    bytes: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    writers: BTreeMap<String, Usage>,
}

/// One bucket's meter.
pub(super) struct Meter {
    bucket: String,
    /// The directory of the usage files, shared: a path per bucket would cost more than the
    /// rest of the meter.
    dir: Arc<Path>,
    state: Mutex<MeterState>,
}

struct MeterState {
    used: Counts,
    /// Growth reserved by writes in flight, in total and by writer.
    reserved: Counts,
    in_flight: u32,
    bucket_quota: Quota,
    user_quotas: HashMap<String, Quota>,
    disk: Disk,
}

impl Meter {
    fn lock(&self) -> MutexGuard<'_, MeterState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the bucket holds, and what `user` stored in it.
    pub(super) fn usage(&self, user: Option<&str>) -> (Usage, Usage) {
        let state = self.lock();
        let of_user = user.and_then(|u| state.used.by_writer.get(u)).copied().unwrap_or_default();
        (state.used.total, of_user)
    }

    /// The bucket's own quota.
    pub(super) fn bucket_quota(&self) -> Quota {
        self.lock().bucket_quota
    }

    pub(super) fn set_bucket_quota(&self, quota: Quota) {
        self.lock().bucket_quota = quota;
    }

    pub(super) fn set_user_quota(&self, user: &str, quota: Quota) {
        let mut state = self.lock();
        if quota.is_unlimited() {
            state.user_quotas.remove(user);
        } else {
            state.user_quotas.insert(user.to_owned(), quota);
        }
    }

    /// Whether any quota could refuse a write asked for by `actor`, so that a check ahead of
    /// the body is worth its file system calls.
    pub(super) fn limits(&self, actor: &Writer) -> bool {
        let state = self.lock();
        *actor != Writer::Operator
            && (!state.bucket_quota.is_unlimited() || !state.user_quotas.is_empty())
    }

    /// Fails with [`StoreError::QuotaExceeded`] if `change`, asked for by `actor`, would pass a
    /// quota given what is stored and reserved now; reserves nothing.
    pub(super) fn check(&self, change: &Change, actor: &Writer) -> Result<(), StoreError> {
        check(&self.lock(), change, actor)
    }

    /// Reserves `change` for a write about to happen, after checking it against the quotas
    /// (unless `actor` is the operator). Marks the usage file unsettled first, so that a crash
    /// from here on has the bucket counted again.
    pub(super) fn begin(
        self: &Arc<Self>,
        change: Change,
        actor: &Writer,
    ) -> Result<Ticket, StoreError> {
        let mut state = self.lock();
        if state.disk == Disk::Settled {
            // Rare (once per settle interval) and short: other writers of this bucket wait.
            self.save(&state.used, false)?;
            state.disk = Disk::Unsettled;
        }
        check(&state, &change, actor)?;
        let growth = change.growth();
        state.reserved.apply(&growth);
        state.in_flight += 1;
        drop(state);
        Ok(Ticket { meter: self.clone(), change, growth, open: true })
    }

    /// Leaves the usage file unsettled for good: the next start counts the bucket again.
    pub(super) fn taint(&self) {
        let mut state = self.lock();
        if state.disk != Disk::Tainted {
            tracing::warn!(bucket = %self.bucket,
                "a write failed midway; the bucket's usage is counted again at the next start");
            state.disk = Disk::Tainted;
        }
    }

    /// Saves the meter as settled if it changed and no write is in flight.
    fn settle(&self) {
        let mut state = self.lock();
        if state.disk != Disk::Unsettled || state.in_flight > 0 {
            return;
        }
        match self.save(&state.used, true) {
            Ok(()) => state.disk = Disk::Settled,
            Err(e) => tracing::warn!(bucket = %self.bucket, error = %e, "saving usage failed"),
        }
    }

    fn save(&self, used: &Counts, settled: bool) -> Result<(), StoreError> {
        let file = UsageFile {
            settled,
            objects: used.total.objects,
            bytes: used.total.bytes,
            writers: used.by_writer.iter().map(|(w, u)| (w.clone(), *u)).collect(),
        };
        let bytes = serde_json::to_vec(&file).map_err(io::Error::other)?;
        write_atomic(&self.dir.join(format!("{}.json", self.bucket)), &bytes, 0o600)?;
        Ok(())
    }
}

fn check(state: &MeterState, change: &Change, actor: &Writer) -> Result<(), StoreError> {
    if *actor == Writer::Operator {
        return Ok(());
    }
    let total = change.total().growth();
    let held = |counts: &Counts, writer: Option<&str>| match writer {
        None => counts.total,
        Some(w) => counts.by_writer.get(w).copied().unwrap_or_default(),
    };
    let bucket_holds = plus(held(&state.used, None), held(&state.reserved, None));
    over(&state.bucket_quota, bucket_holds, total, Scope::Bucket)?;
    for (writer, delta) in change.by_writer() {
        let Some(writer) = writer else { continue };
        let Some(quota) = state.user_quotas.get(writer) else { continue };
        let holds = plus(held(&state.used, Some(writer)), held(&state.reserved, Some(writer)));
        over(quota, holds, delta.growth(), Scope::Claim)?;
    }
    Ok(())
}

fn plus(a: Usage, b: Usage) -> Usage {
    Usage { objects: a.objects.saturating_add(b.objects), bytes: a.bytes.saturating_add(b.bytes) }
}

/// Whose quota a check is about, for the message.
#[derive(Clone, Copy)]
enum Scope {
    Bucket,
    Claim,
}

fn over(quota: &Quota, holds: Usage, adds: Usage, scope: Scope) -> Result<(), StoreError> {
    let (whose, objects_key, bytes_key, holds_what) = match scope {
        Scope::Bucket => ("the bucket's", "bucketMaxObjects", "bucketMaxSize", "the bucket holds"),
        Scope::Claim => ("this claim's", "maxObjects", "maxSize", "this claim has stored"),
    };
    if let Some(max) = quota.max_objects
        && adds.objects > 0
        && holds.objects.saturating_add(adds.objects) > max
    {
        return Err(StoreError::QuotaExceeded(format!(
            "{whose} quota of {max} objects ({objects_key}) is reached: {holds_what} {} \
             (writes in progress included); delete objects or raise the quota",
            holds.objects
        )));
    }
    if let Some(max) = quota.max_bytes
        && adds.bytes > 0
        && holds.bytes.saturating_add(adds.bytes) > max
    {
        return Err(StoreError::QuotaExceeded(format!(
            "{whose} quota of {max} bytes ({bytes_key}) would be passed: {holds_what} {} bytes \
             (writes in progress included) and this write adds {}; delete objects or raise the \
             quota",
            holds.bytes, adds.bytes
        )));
    }
    Ok(())
}

/// A write's reservation: counted by [`Ticket::applied`] once the write is done, released when
/// dropped without it (the write did not happen).
pub(super) struct Ticket {
    meter: Arc<Meter>,
    change: Change,
    growth: Change,
    open: bool,
}

impl Ticket {
    /// The write happened: its change now counts.
    pub(super) fn applied(mut self) {
        self.close(true);
    }

    /// Whether the write happened is unknown: released, and the bucket is counted again at the
    /// next start.
    pub(super) fn uncertain(mut self) {
        self.close(false);
        self.meter.taint();
    }

    fn close(&mut self, applied: bool) {
        if !self.open {
            return;
        }
        self.open = false;
        let mut state = self.meter.lock();
        state.reserved.apply(&self.growth.reversed());
        state.in_flight = state.in_flight.saturating_sub(1);
        if applied {
            state.used.apply(&self.change);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.close(false);
    }
}

impl BucketStore {
    /// The meter of `bucket`, counting the bucket from the disk the first time it is asked for
    /// (a directory made by hand after the store opened).
    pub(super) fn meter(&self, bucket: &str) -> Result<Arc<Meter>, StoreError> {
        if let Some(meter) = self.inner.read_meters().get(bucket) {
            return Ok(meter.clone());
        }
        let counts = self.count_bucket(bucket)?;
        let meter = self.new_meter(bucket, counts, Disk::Unsettled);
        let mut meters = self.inner.meters.write().unwrap_or_else(PoisonError::into_inner);
        Ok(meters.entry(bucket.to_owned()).or_insert(meter).clone())
    }

    fn new_meter(&self, bucket: &str, used: Counts, disk: Disk) -> Arc<Meter> {
        let state = self.inner.read();
        let bucket_quota = state.buckets.get(bucket).map(|r| r.quota).unwrap_or_default();
        let user_quotas = state
            .keys_of_bucket(bucket)
            .filter(|k| !k.quota.is_unlimited())
            .map(|k| (k.user_id.clone(), k.quota))
            .collect();
        Arc::new(Meter {
            bucket: bucket.to_owned(),
            dir: self.inner.usage_dir.clone(),
            state: Mutex::new(MeterState {
                used,
                reserved: Counts::default(),
                in_flight: 0,
                bucket_quota,
                user_quotas,
                disk,
            }),
        })
    }

    /// Forgets the meter of a bucket that is gone, with its file.
    pub(super) fn drop_meter(&self, bucket: &str) -> Result<(), StoreError> {
        self.inner.meters.write().unwrap_or_else(PoisonError::into_inner).remove(bucket);
        match fs::remove_file(usage_file(&self.inner.state_dir(), bucket)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// What `bucket` holds, and what `user` stored in it, from memory: `None` for a bucket that
    /// does not exist, or that was made by hand since the store opened and not written since
    /// (counting it would read the disk).
    pub fn usage(&self, bucket: &str, user: Option<&str>) -> Option<(Usage, Usage)> {
        if !self.bucket_exists(bucket).unwrap_or(false) {
            return None;
        }
        let meter = self.inner.read_meters().get(bucket).cloned()?;
        Some(meter.usage(user))
    }

    /// The quota of `bucket` as a whole (not its keys'), if the bucket exists.
    pub fn bucket_quota(&self, bucket: &str) -> Option<Quota> {
        Some(self.inner.read_meters().get(bucket)?.bucket_quota())
    }

    /// Saves every meter that changed as settled, where no write is in flight. Runs every
    /// [`SETTLE_INTERVAL`] in the background and when the store is dropped.
    pub fn settle_usage(&self) {
        self.inner.settle_usage();
    }

    /// Loads every bucket's meter when the store opens, counting from the disk the buckets
    /// whose usage file is missing or unsettled, and removes the files of buckets that went.
    pub(super) fn load_meters(&self) -> Result<(), StoreError> {
        let dir = self.inner.state_dir().join(USAGE_DIR);
        let mut meters = HashMap::new();
        for bucket in self.bucket_names_blocking()? {
            let saved = read_usage_file(&usage_file(&self.inner.state_dir(), &bucket));
            let meter = match saved {
                Some(file) if file.settled => {
                    let used = Counts {
                        total: Usage { objects: file.objects, bytes: file.bytes },
                        by_writer: file.writers.into_iter().collect(),
                    };
                    self.new_meter(&bucket, used, Disk::Settled)
                }
                _ => {
                    tracing::info!(bucket, "counting the bucket's usage from the disk");
                    let counts = self.count_bucket(&bucket)?;
                    let meter = self.new_meter(&bucket, counts, Disk::Unsettled);
                    meter.settle();
                    meter
                }
            };
            meters.insert(bucket, meter);
        }
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            let Some(bucket) = path.file_stem().and_then(|s| s.to_str()) else { continue };
            if !meters.contains_key(bucket) {
                let _ = fs::remove_file(&path);
            }
        }
        *self.inner.meters.write().unwrap_or_else(PoisonError::into_inner) = meters;
        Ok(())
    }

    /// Counts `bucket` from the disk: every object (plain files, folder markers, objects kept
    /// beside the bucket) for whoever its metadata says stored it, and the parts of its
    /// multipart uploads for whoever started each.
    pub(super) fn count_bucket(&self, bucket: &str) -> Result<Counts, StoreError> {
        let mut counts = Counts::default();
        let dir = self.bucket_dir(bucket)?;
        self.count_dir(bucket, &dir, "", &mut counts)?;
        for (key, size, writer) in self.side_entries(bucket)? {
            // Shadowed by a plain copy (a crash between writing one and removing the other).
            let shadowed = parse_key(&key).is_ok_and(|path| {
                !matches!(self.resolve_existing(&dir, &key, &path), Err(StoreError::NoSuchKey(_)))
            });
            if !shadowed {
                counts.count(writer.as_deref(), 1, size);
            }
        }
        for (writer, bytes) in self.upload_parts(bucket)? {
            counts.count(writer.as_deref(), 0, bytes);
        }
        for (writer, size) in self.archived_usage(bucket, &dir)? {
            counts.count(writer.as_deref(), 1, size);
        }
        Ok(counts)
    }

    fn count_dir(
        &self,
        bucket: &str,
        dir: &Path,
        prefix: &str,
        counts: &mut Counts,
    ) -> Result<(), StoreError> {
        for entry in entries_of(dir)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            // Never follows a symlink: it is not an object.
            let stat = entry.metadata()?;
            let key = format!("{prefix}{name}");
            if stat.is_file() {
                let path = entry.path();
                let at = DataFile::Path(&path);
                let writer = self.object_meta(bucket, &key, at, &stat).and_then(|m| m.writer);
                counts.count(writer.as_deref(), 1, stat.len());
            } else if stat.is_dir() {
                let marker = format!("{key}/");
                if let Some(meta) = self.read_meta(bucket, &marker, None) {
                    counts.count(meta.writer.as_deref(), 1, 0);
                }
                self.count_dir(bucket, &entry.path(), &marker, counts)?;
            }
        }
        Ok(())
    }
}

fn usage_file(state_dir: &Path, bucket: &str) -> PathBuf {
    usage_dir(state_dir).join(format!("{bucket}.json"))
}

/// The directory of the usage files under `state_dir`.
pub(super) fn usage_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(USAGE_DIR)
}

fn read_usage_file(path: &Path) -> Option<UsageFile> {
    serde_json::from_slice(&fs::read(path).ok()?).ok()
}

impl Inner {
    fn read_meters(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Meter>>> {
        self.meters.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn settle_usage(&self) {
        let meters: Vec<Arc<Meter>> = self.read_meters().values().cloned().collect();
        for meter in meters {
            meter.settle();
        }
    }
}

/// Settles the meters of the store every [`SETTLE_INTERVAL`] until the store is dropped.
pub(super) fn spawn_settler(inner: Weak<Inner>) {
    let spawned = std::thread::Builder::new().name("usage-settler".into()).spawn(move || {
        loop {
            std::thread::sleep(SETTLE_INTERVAL);
            let Some(inner) = inner.upgrade() else { break };
            inner.settle_usage();
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no usage settler thread; usage is settled when the store closes");
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::store::{
        CompleteRequest, CompletedPartSpec, CopySourceCheck, Creator, ObjectAttrs, PutCheck,
    };

    const ALICE: &str = "obc-alice";
    const BOB: &str = "obc-bob";

    fn alice() -> Writer {
        Writer::Claim(ALICE.into())
    }

    fn bob() -> Writer {
        Writer::Claim(BOB.into())
    }

    async fn store_with_bucket(root: &Path) -> BucketStore {
        let store = BucketStore::open(root.to_owned(), "node").unwrap();
        let creator = Creator { user_id: ALICE, delete_with_claim: true };
        store.create_bucket("bkt", creator).await.unwrap();
        store.issue_key(ALICE, "bkt").await.unwrap();
        store.issue_key(BOB, "bkt").await.unwrap();
        store
    }

    async fn put(
        store: &BucketStore,
        key: &str,
        len: usize,
        writer: &Writer,
    ) -> Result<(), StoreError> {
        let body = futures::stream::iter([Ok::<_, io::Error>(Bytes::from(vec![b'x'; len]))]);
        let check = PutCheck { length: Some(len as u64), ..PutCheck::default() };
        store.put_object("bkt", key, ObjectAttrs::default(), body, check, writer).await.map(drop)
    }

    fn usage(store: &BucketStore, user: &str) -> (Usage, Usage) {
        store.usage("bkt", Some(user)).unwrap()
    }

    fn counted(objects: u64, bytes: u64) -> Usage {
        Usage { objects, bytes }
    }

    #[tokio::test]
    async fn usage_follows_every_kind_of_write_and_agrees_with_a_count_from_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store_with_bucket(tmp.path()).await;
        put(&store, "a", 10, &alice()).await.unwrap();
        put(&store, "dir/b", 5, &alice()).await.unwrap();
        put(&store, "folder/", 0, &alice()).await.unwrap();
        put(&store, "odd//key", 3, &alice()).await.unwrap(); // kept beside the bucket
        put(&store, "a", 4, &bob()).await.unwrap(); // replaced: counts for bob now
        let source = CopySourceCheck::default();
        store
            .copy_object("bkt", "a", "bkt", "c", Default::default(), source, &Writer::Operator)
            .await
            .unwrap();
        store.delete_object("bkt", "dir/b").await.unwrap();
        store.delete_object("bkt", "never-there").await.unwrap();
        // a (4, bob), folder/ (0, alice), odd//key (3, alice), c (4, the operator's)
        assert_eq!(usage(&store, ALICE), (counted(4, 11), counted(2, 3)));
        assert_eq!(usage(&store, BOB).1, counted(1, 4));

        // Parts count for whoever started the upload, until the object they make replaces them.
        let id =
            store.create_upload("bkt", "big", ObjectAttrs::default(), None, &bob()).await.unwrap();
        for number in [1, 1, 2] {
            let body = futures::stream::iter([Ok::<_, io::Error>(Bytes::from(vec![1u8; 6 << 20]))]);
            store
                .upload_part("bkt", "big", &id, number, body, PutCheck::default(), &alice())
                .await
                .unwrap();
        }
        assert_eq!(
            usage(&store, BOB).1,
            counted(1, 4 + (12 << 20)),
            "a part sent again counts once"
        );
        assert_eq!(store.count_bucket("bkt").unwrap(), store.meter("bkt").unwrap().lock().used);
        let parts = store.list_parts("bkt", "big", &id).await.unwrap().1;
        let request = CompleteRequest {
            parts: parts
                .iter()
                .map(|p| CompletedPartSpec {
                    number: p.part_number,
                    etag: p.etag.clone(),
                    checksum: None,
                })
                .collect(),
            ..CompleteRequest::default()
        };
        store.complete_upload("bkt", "big", &id, request, &alice()).await.unwrap();
        assert_eq!(usage(&store, BOB).1, counted(2, 4 + (12 << 20)));
        let aborted =
            store.create_upload("bkt", "gone", ObjectAttrs::default(), None, &bob()).await.unwrap();
        let body = futures::stream::iter([Ok::<_, io::Error>(Bytes::from_static(b"part"))]);
        store
            .upload_part("bkt", "gone", &aborted, 1, body, PutCheck::default(), &bob())
            .await
            .unwrap();
        store.abort_upload("bkt", "gone", &aborted).await.unwrap();
        assert_eq!(usage(&store, ALICE).0, counted(5, 11 + (12 << 20)));
        assert_eq!(store.count_bucket("bkt").unwrap(), store.meter("bkt").unwrap().lock().used);
    }

    #[tokio::test]
    async fn a_bucket_written_since_its_last_save_is_counted_again_at_the_next_start() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store_with_bucket(tmp.path()).await;
        put(&store, "a", 10, &alice()).await.unwrap();
        let file = usage_file(&tmp.path().join(".provisioner"), "bkt");
        store.settle_usage();
        assert!(read_usage_file(&file).unwrap().settled);
        // A write in flight keeps the file unsettled, whatever the settler does meanwhile.
        let meter = store.meter("bkt").unwrap();
        let ticket = meter.begin(Change::store(Some(ALICE), 1, None), &alice()).unwrap();
        assert!(!read_usage_file(&file).unwrap().settled, "marked before the write could land");
        drop(ticket);
        drop(meter);
        drop(store);
        let saved = read_usage_file(&file).unwrap();
        assert!(saved.settled && saved.objects == 1 && saved.bytes == 10, "{saved:?}");

        // What a crash right after a write leaves: an unsettled file that lags behind.
        let stale = UsageFile { settled: false, objects: 0, bytes: 0, writers: BTreeMap::new() };
        std::fs::write(&file, serde_json::to_vec(&stale).unwrap()).unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "node").unwrap();
        assert_eq!(usage(&store, ALICE), (counted(1, 10), counted(1, 10)));
        drop(store);

        // The file lost altogether: counted from the disk too, and saved again.
        std::fs::remove_file(&file).unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "node").unwrap();
        assert_eq!(usage(&store, ALICE), (counted(1, 10), counted(1, 10)));
        assert!(read_usage_file(&file).unwrap().settled);
    }

    #[tokio::test]
    async fn a_bucket_made_by_hand_is_counted_from_the_disk_when_first_written() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store_with_bucket(tmp.path()).await;
        assert_eq!(usage(&store, ALICE), (Usage::default(), Usage::default()), "metered at once");
        let dir = tmp.path().join("buckets/handmade");
        std::fs::create_dir_all(dir.join("old")).unwrap();
        std::fs::write(dir.join("old/file"), b"1234567").unwrap();
        assert_eq!(store.usage("handmade", None), None, "not read from the disk on a report");
        let body = futures::stream::iter([Ok::<_, io::Error>(Bytes::from_static(b"new"))]);
        let (attrs, check) = (ObjectAttrs::default(), PutCheck::default());
        store.put_object("handmade", "new", attrs, body, check, &alice()).await.unwrap();
        let (bucket, of_alice) = store.usage("handmade", Some(ALICE)).unwrap();
        assert_eq!((bucket, of_alice), (counted(2, 10), counted(1, 3)));
    }

    #[tokio::test]
    async fn quotas_refuse_what_would_pass_them_and_store_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store_with_bucket(tmp.path()).await;
        let bucket_quota = Quota { max_objects: Some(2), max_bytes: None };
        store.set_bucket_quota("bkt", ALICE, bucket_quota).await.unwrap();
        put(&store, "one", 1, &alice()).await.unwrap();
        put(&store, "two", 1, &bob()).await.unwrap();
        let error = put(&store, "three", 1, &alice()).await.unwrap_err();
        assert!(
            matches!(&error, StoreError::QuotaExceeded(m) if m.contains("bucketMaxObjects")),
            "{error}"
        );
        assert!(matches!(store.head_object("bkt", "three").await, Err(StoreError::NoSuchKey(_))));
        // Temporary files live one directory down, in the store's temporary directories.
        let shards = std::fs::read_dir(tmp.path().join(".provisioner/tmp")).unwrap();
        let tmp_files: usize =
            shards.map(|shard| std::fs::read_dir(shard.unwrap().path()).unwrap().count()).sum();
        assert_eq!(tmp_files, 0, "the refused body left nothing behind");
        put(&store, "one", 1, &alice()).await.unwrap(); // a replacement adds no object
        put(&store, "three", 1, &Writer::Operator).await.unwrap(); // the operator is exempt

        // Lowered below what is stored: writes stop, data stays, deletes free room.
        let claim_quota = Quota { max_objects: None, max_bytes: Some(101) };
        store.set_bucket_quota("bkt", ALICE, Quota::default()).await.unwrap();
        store.set_user_quota(ALICE, "bkt", claim_quota).await.unwrap();
        put(&store, "big", 100, &alice()).await.unwrap();
        store
            .set_user_quota(ALICE, "bkt", Quota { max_bytes: Some(50), ..claim_quota })
            .await
            .unwrap();
        let error = put(&store, "more", 1, &alice()).await.unwrap_err();
        assert!(error.to_string().contains("maxSize"), "{error}");
        put(&store, "more", 1, &bob()).await.unwrap(); // bob has no quota of his own
        put(&store, "big", 40, &alice()).await.unwrap(); // shrinking is always allowed
        put(&store, "more", 9, &alice()).await.unwrap(); // bob's object, now alice's 9 bytes
        assert_eq!(usage(&store, ALICE).1, counted(3, 1 + 40 + 9));
        assert!(store.bucket_record("bkt").unwrap().quota.is_unlimited());

        // Only the creator sets the bucket's quota; removing a claim quota lifts it.
        assert!(matches!(
            store.set_bucket_quota("bkt", BOB, bucket_quota).await,
            Err(StoreError::NotCreator(_))
        ));
        store.set_user_quota(ALICE, "bkt", Quota::default()).await.unwrap();
        put(&store, "huge", 1000, &alice()).await.unwrap();
        drop(store);
        let store = BucketStore::open(tmp.path().to_owned(), "node").unwrap();
        assert!(store.keys_for_user(ALICE)[0].quota.is_unlimited(), "quotas are kept");
    }

    #[tokio::test]
    async fn concurrent_writers_never_pass_a_quota_together() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store_with_bucket(tmp.path()).await;
        store
            .set_user_quota(ALICE, "bkt", Quota { max_objects: Some(5), max_bytes: Some(5 * 64) })
            .await
            .unwrap();
        let writes: Vec<_> = (0..24)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move { put(&store, &format!("k{i}"), 64, &alice()).await })
            })
            .collect();
        let mut stored = 0;
        for write in writes {
            match write.await.unwrap() {
                Ok(()) => stored += 1,
                Err(StoreError::QuotaExceeded(_)) => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(stored, 5);
        assert_eq!(usage(&store, ALICE).1, counted(5, 5 * 64));
        assert_eq!(store.count_bucket("bkt").unwrap().total, counted(5, 5 * 64));
    }
}
