//! Object metadata kept in an extended attribute of the object's own data file.
//!
//! A small PUT then writes one file: its bytes and its metadata are synced together by one
//! `fsync`, one rename puts both in place, and one sync of the directory makes the name last.
//! The metadata file under `.provisioner/meta` (see `object_meta`) with its own sync, rename and
//! directory sync is needed only where the file system cannot hold the attribute: one larger
//! than it allows (ext4 keeps about 4 KiB per inode, so an object of thousands of parts), or no
//! user attributes at all. An attribute found on the data file is the object's metadata: it came
//! with the bytes it describes, whatever metadata file may be left beside it.

use std::fs::File;
use std::io;
use std::path::Path;

use rustix::io::Errno;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The attribute's name: in the `user` namespace, which the file's owner may write.
const NAME: &str = "user.bucket-provisioner.meta";

/// Most attributes fit this first read; a larger one is read again at its size.
const FIRST_READ: usize = 4096;

/// Where the data file of an object is read from: its path (never following a symlink) or an
/// open handle.
#[derive(Clone, Copy)]
pub(super) enum DataFile<'a> {
    /// The file's path.
    Path(&'a Path),
    /// The open file.
    Open(&'a File),
}

/// Attaches `meta` to the (unsynced) data file `file`. `Ok(false)` when the file system cannot
/// hold it, so that it goes to a metadata file instead.
pub(super) fn attach(file: &File, meta: &impl Serialize) -> io::Result<bool> {
    let bytes = serde_json::to_vec(meta).map_err(io::Error::other)?;
    match rustix::fs::fsetxattr(file, NAME, &bytes, rustix::fs::XattrFlags::empty()) {
        Ok(()) => Ok(true),
        // Too large for the file system (ext4 answers ENOSPC, others E2BIG or ERANGE), or no
        // user attributes at all.
        Err(Errno::NOSPC | Errno::TOOBIG | Errno::RANGE | Errno::NOTSUP | Errno::PERM) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Takes the attached metadata off `file` (not synced), for metadata that has moved to a
/// metadata file; none attached counts as done.
pub(super) fn detach(file: &File) -> io::Result<()> {
    match rustix::fs::fremovexattr(file, NAME) {
        Ok(()) | Err(Errno::NODATA | Errno::NOTSUP) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The metadata attached to a data file, if it has some that reads as `T`. Whether it still
/// describes the file (not rewritten by hand, nor renamed to another key) is for the caller
/// to tell.
pub(super) fn attached<T: DeserializeOwned>(at: DataFile<'_>) -> Option<T> {
    serde_json::from_slice(&read(at)?).ok()
}

fn read(at: DataFile<'_>) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(FIRST_READ);
    let first = match at {
        DataFile::Path(path) => {
            rustix::fs::lgetxattr(path, NAME, rustix::buffer::spare_capacity(&mut buf))
        }
        DataFile::Open(file) => {
            rustix::fs::fgetxattr(file, NAME, rustix::buffer::spare_capacity(&mut buf))
        }
    };
    match first {
        Ok(_) => Some(buf),
        Err(Errno::RANGE) => {
            let size = match at {
                DataFile::Path(path) => rustix::fs::lgetxattr_query(path, NAME),
                DataFile::Open(file) => rustix::fs::fgetxattr_query(file, NAME),
            }
            .ok()?;
            let mut buf = Vec::with_capacity(size);
            match at {
                DataFile::Path(path) => {
                    rustix::fs::lgetxattr(path, NAME, rustix::buffer::spare_capacity(&mut buf))
                }
                DataFile::Open(file) => {
                    rustix::fs::fgetxattr(file, NAME, rustix::buffer::spare_capacity(&mut buf))
                }
            }
            .ok()?;
            Some(buf)
        }
        // No attribute (ENODATA), none supported, or the file gone: no attached metadata.
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fs;

    use super::*;
    use crate::store::{BucketStore, Creator, ObjectAttrs, PutCheck, Writer};

    async fn put(store: &BucketStore, key: &str, attrs: ObjectAttrs, body: &'static [u8]) {
        let body = futures::stream::iter([Ok::<_, io::Error>(bytes::Bytes::from_static(body))]);
        let check = PutCheck::default();
        store.put_object("b-1", key, attrs, body, check, &Writer::Operator).await.unwrap();
    }

    fn store(dir: &Path) -> BucketStore {
        BucketStore::open(dir.to_owned(), "id").unwrap()
    }

    /// Whether the file system under `dir` takes user attributes at all.
    fn has_user_attributes(dir: &Path) -> bool {
        let file = File::create(dir.join("probe")).unwrap();
        rustix::fs::fsetxattr(&file, NAME, b"1", rustix::fs::XattrFlags::empty()).is_ok()
    }

    fn attrs(value_len: usize) -> ObjectAttrs {
        let metadata = BTreeMap::from([("big".to_owned(), "v".repeat(value_len))]);
        ObjectAttrs { content_type: Some("text/plain".to_owned()), metadata, ..Default::default() }
    }

    #[tokio::test]
    async fn metadata_too_large_to_attach_goes_to_a_file_and_back() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path());
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        let data = store.bucket_dir("b-1").unwrap().join("k");
        let attached_here = has_user_attributes(tmp.path());

        // 64 KiB: more than any file system keeps beside an inode (ext4: ~4 KiB), and more than
        // an attribute may be at all.
        put(&store, "k", attrs(64 * 1024), b"large metadata").await;
        assert!(store.meta_path("b-1", "k").exists(), "a metadata file for the large one");
        assert!(read(DataFile::Path(&data)).is_none(), "nothing attached");
        let info = store.head_object("b-1", "k").await.unwrap();
        assert_eq!(info.attrs, attrs(64 * 1024));

        // Replaced by a small one: attached, and the old metadata file gone.
        put(&store, "k", attrs(10), b"small").await;
        let info = store.head_object("b-1", "k").await.unwrap();
        assert_eq!(info.attrs, attrs(10));
        assert_eq!(info.size, 5);
        if attached_here {
            assert!(read(DataFile::Path(&data)).is_some());
            assert!(!store.meta_path("b-1", "k").exists(), "the replaced metadata file");
        }

        // And back to a large one: the file again, which the data (nothing attached) goes by.
        put(&store, "k", attrs(64 * 1024), b"large again").await;
        let listed = store.head_object("b-1", "k").await.unwrap();
        assert_eq!((listed.attrs, listed.size), (attrs(64 * 1024), 11));
    }

    #[tokio::test]
    async fn attached_metadata_wins_over_a_metadata_file_left_beside_it() {
        let tmp = tempfile::tempdir().unwrap();
        if !has_user_attributes(tmp.path()) {
            return;
        }
        let store = store(tmp.path());
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        put(&store, "k", attrs(10), b"body").await;
        let good = store.head_object("b-1", "k").await.unwrap();
        // What a crash after the rename, before the old metadata file's removal reached the
        // disk, could leave: a file that describes the same size and time but another object.
        let path = store.bucket_dir("b-1").unwrap().join("k");
        let data = fs::symlink_metadata(&path).unwrap();
        let mut stale = store.object_meta("b-1", "k", DataFile::Path(&path), &data).unwrap();
        stale.etag = "0".repeat(32);
        stale.attrs = ObjectAttrs::default();
        store.write_meta("b-1", &stale).unwrap();
        assert_eq!(store.head_object("b-1", "k").await.unwrap(), good);
        let query = crate::store::ListQuery { max_keys: 10, ..Default::default() };
        let page = store.list_objects("b-1", query).await.unwrap();
        assert_eq!(page.objects, std::slice::from_ref(&good), "listed as served");

        // Rewritten in place by hand: the attached metadata no longer describes it.
        fs::write(&path, b"by hand, longer").unwrap();
        let info = store.head_object("b-1", "k").await.unwrap();
        assert_ne!(info.etag, good.etag);
        assert_eq!(info.size, 15);
    }
}
