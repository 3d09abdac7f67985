//! A bucket's CORS rules: one file, `.provisioner/meta/<bucket>/cors.json`, replaced atomically
//! and synced before PutBucketCors answers, and removed with the bucket's other metadata when
//! the bucket goes. What the rules mean is the S3 front's business; the store only keeps them.

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::durable::{create_dir_all_durably, fsync_dir, write_atomic};
use super::{BucketStore, StoreError};

/// The file's name in the bucket's metadata directory, beside the two-hex-digit directories of
/// object metadata and `side`, which it can never be mistaken for.
const CORS_FILE: &str = "cors.json";

/// A bucket's CORS configuration, as PutBucketCors sets it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorsConfig {
    /// The rules, in the order they are evaluated: the first that matches a request applies.
    pub rules: Vec<CorsRule>,
}

/// One CORS rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorsRule {
    /// Its `ID`, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Origins it applies to; one `*` in each may stand for any text.
    pub allowed_origins: Vec<String>,
    /// Methods it allows (`GET`, `PUT`, `POST`, `DELETE`, `HEAD`).
    pub allowed_methods: Vec<String>,
    /// Headers a preflight may ask for; one `*` in each may stand for any text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_headers: Vec<String>,
    /// Response headers browsers may show the page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// How long browsers may keep a preflight's answer, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_seconds: Option<i32>,
}

impl BucketStore {
    fn cors_path(&self, bucket: &str) -> PathBuf {
        self.inner.state_dir().join("meta").join(bucket).join(CORS_FILE)
    }

    /// The CORS configuration of `bucket`, if it has one (`NoSuchBucket` if it does not exist).
    pub async fn bucket_cors(&self, bucket: &str) -> Result<Option<CorsConfig>, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| store.bucket_cors_blocking(&bucket)).await
    }

    /// [`BucketStore::bucket_cors`], for callers already off the async threads.
    pub fn bucket_cors_blocking(&self, bucket: &str) -> Result<Option<CorsConfig>, StoreError> {
        self.bucket_dir(bucket)?;
        let path = self.cors_path(bucket);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| StoreError::Corrupt { path, message: e.to_string() }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Sets (`Some`) or removes (`None`) the CORS configuration of `bucket`, which must exist;
    /// durable once it returns.
    pub async fn set_bucket_cors(
        &self,
        bucket: &str,
        config: Option<CorsConfig>,
    ) -> Result<(), StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            let path = store.cors_path(&bucket);
            let dir = path.parent().unwrap_or(&path).to_owned();
            match config {
                Some(config) => {
                    create_dir_all_durably(&dir)?;
                    let bytes = serde_json::to_vec(&config).map_err(io::Error::other)?;
                    write_atomic(&path, &bytes, 0o600)?;
                }
                None => match std::fs::remove_file(&path) {
                    Ok(()) => fsync_dir(&dir)?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                },
            }
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Creator;

    #[tokio::test]
    async fn rules_survive_a_reopen_and_go_with_the_bucket() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.bucket_cors("b-1").await.unwrap(), None);
        let config = CorsConfig {
            rules: vec![CorsRule {
                allowed_origins: vec!["https://*.example.com".into()],
                allowed_methods: vec!["GET".into()],
                max_age_seconds: Some(60),
                ..CorsRule::default()
            }],
        };
        store.set_bucket_cors("b-1", Some(config.clone())).await.unwrap();
        drop(store);
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        assert_eq!(store.bucket_cors("b-1").await.unwrap(), Some(config.clone()));
        store.set_bucket_cors("b-1", None).await.unwrap();
        store.set_bucket_cors("b-1", None).await.unwrap();
        assert_eq!(store.bucket_cors("b-1").await.unwrap(), None);

        store.set_bucket_cors("b-1", Some(config)).await.unwrap();
        assert!(store.delete_bucket("b-1", "obc-1").await.unwrap());
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.bucket_cors("b-1").await.unwrap(), None, "a new bucket of the name");
        assert!(matches!(store.bucket_cors("missing").await, Err(StoreError::NoSuchBucket(_))));
    }
}
