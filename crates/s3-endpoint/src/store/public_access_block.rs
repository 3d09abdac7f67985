//! A bucket's public access block (PutPublicAccessBlock, GetPublicAccessBlock,
//! DeletePublicAccessBlock): one file, `.provisioner/meta/<bucket>/public-access-block.json`,
//! replaced atomically and synced before the answer, and removed with the bucket's other
//! metadata when the bucket goes.
//!
//! It is kept and read back for the tools that set it, and decides nothing: no bucket or object
//! here is ever public (anonymous requests are refused, ACLs are private only, there are no
//! bucket policies), so every access it could block is refused already.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::config_file::{read_config, replace_config};
use super::{BucketStore, StoreError};

/// The file's name in the bucket's metadata directory.
const PUBLIC_ACCESS_BLOCK_FILE: &str = "public-access-block.json";

/// A bucket's public access block, as PutPublicAccessBlock sets it (a setting left out is
/// `false`, as in S3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicAccessBlock {
    /// `BlockPublicAcls`.
    pub block_public_acls: bool,
    /// `IgnorePublicAcls`.
    pub ignore_public_acls: bool,
    /// `BlockPublicPolicy`.
    pub block_public_policy: bool,
    /// `RestrictPublicBuckets`.
    pub restrict_public_buckets: bool,
}

impl BucketStore {
    fn public_access_block_path(&self, bucket: &str) -> PathBuf {
        self.inner.state_dir().join("meta").join(bucket).join(PUBLIC_ACCESS_BLOCK_FILE)
    }

    /// The public access block of `bucket`, if it has one (`NoSuchBucket` if it does not
    /// exist).
    pub async fn public_access_block(
        &self,
        bucket: &str,
    ) -> Result<Option<PublicAccessBlock>, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            read_config(store.public_access_block_path(&bucket))
        })
        .await
    }

    /// Sets (`Some`) or removes (`None`) the public access block of `bucket`, which must exist;
    /// durable once it returns.
    pub async fn set_public_access_block(
        &self,
        bucket: &str,
        block: Option<PublicAccessBlock>,
    ) -> Result<(), StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            replace_config(&store.public_access_block_path(&bucket), block.as_ref())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Creator;

    #[tokio::test]
    async fn the_block_survives_a_reopen_and_goes_with_the_bucket() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.public_access_block("b-1").await.unwrap(), None);
        let block = PublicAccessBlock {
            block_public_acls: true,
            restrict_public_buckets: true,
            ..PublicAccessBlock::default()
        };
        store.set_public_access_block("b-1", Some(block)).await.unwrap();
        drop(store);
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        assert_eq!(store.public_access_block("b-1").await.unwrap(), Some(block));
        store.set_public_access_block("b-1", None).await.unwrap();
        store.set_public_access_block("b-1", None).await.unwrap();
        assert_eq!(store.public_access_block("b-1").await.unwrap(), None);

        store.set_public_access_block("b-1", Some(block)).await.unwrap();
        assert!(store.delete_bucket("b-1", "obc-1").await.unwrap());
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.public_access_block("b-1").await.unwrap(), None, "a new bucket");
        let missing = store.public_access_block("missing").await;
        assert!(matches!(missing, Err(StoreError::NoSuchBucket(_))));
    }
}
