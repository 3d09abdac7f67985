//! A bucket's tags (PutBucketTagging, GetBucketTagging, DeleteBucketTagging): one file,
//! `.provisioner/meta/<bucket>/tagging.json`, replaced atomically and synced before the answer,
//! and removed with the bucket's other metadata when the bucket goes. What tags may say is the
//! S3 front's to check; the store keeps them as given.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::config_file::{read_config, replace_config};
use super::object_meta::Tags;
use super::{BucketStore, StoreError};

/// The file's name in the bucket's metadata directory.
const TAGGING_FILE: &str = "tagging.json";

#[derive(Serialize, Deserialize)]
struct TaggingFile {
    tags: Tags,
}

impl BucketStore {
    fn bucket_tags_path(&self, bucket: &str) -> PathBuf {
        self.inner.state_dir().join("meta").join(bucket).join(TAGGING_FILE)
    }

    /// The tags of `bucket`, if it has a tag set (`NoSuchBucket` if it does not exist).
    pub async fn bucket_tags(&self, bucket: &str) -> Result<Option<Tags>, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            let file: Option<TaggingFile> = read_config(store.bucket_tags_path(&bucket))?;
            Ok(file.map(|f| f.tags))
        })
        .await
    }

    /// Sets (`Some`) or removes (`None`) the tag set of `bucket`, which must exist; durable
    /// once it returns.
    pub async fn set_bucket_tags(
        &self,
        bucket: &str,
        tags: Option<Tags>,
    ) -> Result<(), StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            let file = tags.map(|tags| TaggingFile { tags });
            replace_config(&store.bucket_tags_path(&bucket), file.as_ref())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Creator;

    #[tokio::test]
    async fn tags_survive_a_reopen_and_go_with_the_bucket() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.bucket_tags("b-1").await.unwrap(), None);
        let tags: Tags = vec![("cost-centre".into(), "42".into()), ("team".into(), String::new())];
        store.set_bucket_tags("b-1", Some(tags.clone())).await.unwrap();
        drop(store);
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        assert_eq!(store.bucket_tags("b-1").await.unwrap(), Some(tags.clone()));
        store.set_bucket_tags("b-1", None).await.unwrap();
        store.set_bucket_tags("b-1", None).await.unwrap();
        assert_eq!(store.bucket_tags("b-1").await.unwrap(), None);

        store.set_bucket_tags("b-1", Some(tags)).await.unwrap();
        assert!(store.delete_bucket("b-1", "obc-1").await.unwrap());
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.bucket_tags("b-1").await.unwrap(), None, "a new bucket of the name");
        assert!(matches!(store.bucket_tags("missing").await, Err(StoreError::NoSuchBucket(_))));
        let refused = store.set_bucket_tags("missing", Some(Vec::new())).await;
        assert!(matches!(refused, Err(StoreError::NoSuchBucket(_))));
    }
}
