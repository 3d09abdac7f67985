//! Replacing the tags of an object in place (PutObjectTagging, DeleteObjectTagging), or its
//! object lock (`locked_objects`): its bytes stay, its metadata is rewritten where it is kept,
//! durably before the answer.
//!
//! Metadata attached to the data file is attached again and the file synced: setting an
//! attribute leaves the data's modification time, which the metadata records, as it was. When
//! the larger metadata no longer fits the attribute, it goes to a metadata file first (written
//! and synced), and only then is the attribute removed, so that a crash between the two leaves
//! the old tags, never none. Folder markers and objects beside the bucket have only a metadata
//! file, replaced atomically.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::time::SystemTime;

use md5::{Digest, Md5};

use super::attached::{DataFile, attach, attached, detach};
use super::commit::remove_if_exists;
use super::names::validate_key;
use super::object_meta::{MetaFile, ObjectAttrs, Tags, mtime_ns};
use super::version_write::check_version_id;
use super::{BucketStore, ObjectInfo, StoreError, parse_key};

impl BucketStore {
    /// Replaces the tags of `key` (an empty set removes them), keeping its bytes, ETag and
    /// everything else; `NoSuchKey` when there is no such object. Durable once it returns.
    pub async fn set_object_tags(
        &self,
        bucket: &str,
        key: &str,
        tags: Tags,
    ) -> Result<ObjectInfo, StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        self.blocking(move |store| store.set_tags_blocking(&bucket, &key, tags)).await
    }

    /// [`set_object_tags`](Self::set_object_tags) of the version `version_id` of `key`
    /// (`None`: the newest). A noncurrent version's record is replaced durably; a delete marker
    /// has no tags to set ([`StoreError::DeleteMarker`]).
    pub async fn set_version_tags(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        tags: Tags,
    ) -> Result<ObjectInfo, StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        let version_id = version_id.map(str::to_owned);
        self.blocking(move |store| {
            if version_id.is_none() && store.versioning(&bucket)?.is_none() {
                return store.set_tags_blocking(&bucket, &key, tags);
            }
            store.set_version_tags_blocking(&bucket, &key, version_id.as_deref(), tags)
        })
        .await
    }

    fn set_version_tags_blocking(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        tags: Tags,
    ) -> Result<ObjectInfo, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        if let Some(id) = version_id {
            check_version_id(id)?;
        }
        let found = {
            let _guard = self.key_lock(bucket, key);
            let history = self.versions_of(bucket, &dir, key)?;
            let found = match version_id {
                Some(id) => history.into_iter().find(|v| v.stamp().id == id).ok_or_else(|| {
                    StoreError::NoSuchVersion { key: key.to_owned(), version_id: id.to_owned() }
                })?,
                None => history
                    .into_iter()
                    .next()
                    .ok_or_else(|| StoreError::NoSuchKey(key.to_owned()))?,
            };
            if found.is_marker() {
                return Err(StoreError::DeleteMarker {
                    key: key.to_owned(),
                    version_id: found.stamp().id.clone(),
                    by_id: version_id.is_some(),
                });
            }
            if !found.in_place {
                let mut found = found;
                found.meta.attrs.tags = tags;
                self.write_record(&self.versions_dir(bucket, key), &found.meta)?;
                return Ok(found.info());
            }
            found
        };
        // The version in place, retagged as in an unversioned bucket (under the key's lock
        // again).
        let mut info = self.set_tags_blocking(bucket, key, tags)?;
        info.version_id = Some(found.stamp().id.clone());
        Ok(info)
    }

    fn set_tags_blocking(
        &self,
        bucket: &str,
        key: &str,
        tags: Tags,
    ) -> Result<ObjectInfo, StoreError> {
        let mut tags = Some(tags);
        self.update_attrs_blocking(bucket, key, &mut |attrs| {
            attrs.tags = tags.take().unwrap_or_default();
            Ok(())
        })
    }

    /// Rewrites the attributes of `key` in place with `change`, which sees them as they stand
    /// under the key's lock and may refuse (nothing is written then); `NoSuchKey` when there is
    /// no such object. Durable once it returns.
    pub(super) fn update_attrs_blocking(
        &self,
        bucket: &str,
        key: &str,
        change: &mut dyn FnMut(&mut ObjectAttrs) -> Result<(), StoreError>,
    ) -> Result<ObjectInfo, StoreError> {
        validate_key(key)?;
        // No write of the key may come between reading its metadata and replacing it.
        let _guard = self.key_lock(bucket, key);
        self.update_attrs_locked(bucket, key, change)
    }

    /// [`update_attrs_blocking`](Self::update_attrs_blocking) for a caller holding the key's
    /// lock already.
    pub(super) fn update_attrs_locked(
        &self,
        bucket: &str,
        key: &str,
        change: &mut dyn FnMut(&mut ObjectAttrs) -> Result<(), StoreError>,
    ) -> Result<ObjectInfo, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        if let Ok(path) = parse_key(key) {
            match self.resolve_existing(&dir, key, &path) {
                Ok((_, stat)) if path.dir_marker => {
                    if let Some(mut meta) = self.read_meta(bucket, key, None) {
                        change(&mut meta.attrs)?;
                        self.write_meta(bucket, &meta)?;
                        return Ok(meta.info(stat.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
                    }
                }
                Ok((target, _)) => return self.rewrite_plain(bucket, key, &target, change),
                Err(StoreError::NoSuchKey(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let Some(mut meta) = self.side_meta(bucket, key)? else {
            return Err(StoreError::NoSuchKey(key.to_owned()));
        };
        change(&mut meta.attrs)?;
        self.write_side_meta(bucket, &meta)?;
        let (info, _) = self.open_side(bucket, key)?;
        Ok(info)
    }

    /// New attributes for the plain file of `key` at `target`.
    fn rewrite_plain(
        &self,
        bucket: &str,
        key: &str,
        target: &std::path::Path,
        change: &mut dyn FnMut(&mut ObjectAttrs) -> Result<(), StoreError>,
    ) -> Result<ObjectInfo, StoreError> {
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(target)
        {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(StoreError::Symlink(key.to_owned()));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::NoSuchKey(key.to_owned()));
            }
            Err(e) => return Err(e.into()),
        };
        let data = file.metadata()?;
        let at = DataFile::Open(&file);
        let was_attached =
            attached::<MetaFile>(at).is_some_and(|meta| meta.describes(key, Some(&data)));
        // A file written outside the store has no metadata: it gets some, with the ETag it is
        // served with already.
        let mut meta = self.object_meta(bucket, key, at, &data).unwrap_or_else(|| MetaFile {
            key: key.to_owned(),
            size: data.len(),
            mtime_ns: mtime_ns(&data),
            etag: hex::encode(Md5::digest(format!("{}:{}", data.len(), mtime_ns(&data)))),
            attrs: ObjectAttrs::default(),
            parts: None,
            checksum: None,
            part_sizes: Vec::new(),
            part_checksums: Vec::new(),
            upload_id: None,
            writer: None,
            version: None,
        });
        change(&mut meta.attrs)?;
        if attach(&file, &meta)? {
            file.sync_all()?;
            // The attached metadata wins over a metadata file, which is no longer read.
            if !was_attached {
                remove_if_exists(&self.meta_path(bucket, key))?;
            }
        } else {
            self.write_meta(bucket, &meta)?;
            if was_attached {
                detach(&file)?;
                file.sync_all()?;
            }
        }
        let modified = data.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        Ok(meta.info(modified))
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::store::{Creator, PutCheck, Writer};

    async fn put(store: &BucketStore, key: &str, tags: Tags) {
        let body = futures::stream::iter([Ok::<_, io::Error>(bytes::Bytes::from_static(b"data"))]);
        let attrs = ObjectAttrs { tags, ..ObjectAttrs::default() };
        store
            .put_object("b-1", key, attrs, body, PutCheck::default(), &Writer::Operator)
            .await
            .unwrap();
    }

    fn tag(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[tokio::test]
    async fn tags_are_replaced_wherever_the_metadata_is_kept_and_survive_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        // Plain, beside the bucket (`a` is also a prefix of `a/b`), a folder marker, and a file
        // written by hand.
        put(&store, "a/b", vec![tag("k", "1")]).await;
        put(&store, "a", vec![tag("k", "2")]).await;
        let body = futures::stream::iter([Ok::<_, io::Error>(bytes::Bytes::new())]);
        let (attrs, check) = (ObjectAttrs::default(), PutCheck::default());
        store.put_object("b-1", "dir/", attrs, body, check, &Writer::Operator).await.unwrap();
        fs::write(store.bucket_dir("b-1").unwrap().join("by-hand"), b"x").unwrap();
        let before = store.head_object("b-1", "by-hand").await.unwrap();

        for key in ["a/b", "a", "dir/", "by-hand"] {
            let info = store.set_object_tags("b-1", key, vec![tag("new", key)]).await.unwrap();
            assert_eq!(info.attrs.tags, vec![tag("new", key)], "{key}");
        }
        drop(store);
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        for key in ["a/b", "a", "dir/", "by-hand"] {
            let info = store.head_object("b-1", key).await.unwrap();
            assert_eq!(info.attrs.tags, vec![tag("new", key)], "{key}");
        }
        let after = store.head_object("b-1", "by-hand").await.unwrap();
        assert_eq!((after.etag, after.size), (before.etag, before.size), "served as before");
        assert!(matches!(
            store.set_object_tags("b-1", "missing", Vec::new()).await,
            Err(StoreError::NoSuchKey(_))
        ));
    }

    #[tokio::test]
    async fn tags_too_large_to_attach_move_to_a_metadata_file_and_back() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        put(&store, "k", Vec::new()).await;
        let etag = store.head_object("b-1", "k").await.unwrap().etag;
        // Larger than any file system keeps beside an inode (the store's own limits are the
        // S3 front's business).
        let big = vec![tag("big", &"v".repeat(64 * 1024))];
        store.set_object_tags("b-1", "k", big.clone()).await.unwrap();
        assert!(store.meta_path("b-1", "k").exists());
        let info = store.head_object("b-1", "k").await.unwrap();
        assert_eq!((info.attrs.tags, info.etag.clone()), (big, etag.clone()));
        store.set_object_tags("b-1", "k", vec![tag("s", "1")]).await.unwrap();
        let info = store.head_object("b-1", "k").await.unwrap();
        assert_eq!((info.attrs.tags, info.etag), (vec![tag("s", "1")], etag));
    }
}
