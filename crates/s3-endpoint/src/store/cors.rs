//! A bucket's CORS rules: one file, `.provisioner/meta/<bucket>/cors.json`, replaced atomically
//! and synced before PutBucketCors answers, and removed with the bucket's other metadata when
//! the bucket goes; and what they may say, as S3 decides it ([`CorsConfig::check`]), for the
//! endpoint's PutBucketCors and for whoever else sets them (a claim's provisioner). What the
//! rules mean for a request is the S3 front's business.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::config_file::{read_config, replace_config};
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

/// Most rules one bucket may have.
pub const MAX_CORS_RULES: usize = 100;
/// Largest configuration, counted as the text of its rules: S3's 64 KB.
pub const MAX_CORS_BYTES: usize = 64 * 1024;
/// Longest rule `ID`, in characters.
pub const MAX_CORS_ID_CHARS: usize = 255;
/// The methods a rule may allow.
pub const CORS_METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];

/// Which of S3's errors a refused configuration is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorsRefusal {
    /// `MalformedXML`: a rule or list missing, too many rules.
    MalformedXml,
    /// `InvalidRequest`: a method S3 does not allow, a second wildcard, too large.
    InvalidRequest,
    /// `InvalidArgument`: an `ID` too long, a negative `MaxAgeSeconds`.
    InvalidArgument,
}

/// Why a CORS configuration is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidCors {
    /// The S3 error it is.
    pub code: CorsRefusal,
    /// What is wrong, as S3 words it.
    pub message: String,
}

impl CorsConfig {
    /// Checks the configuration as S3 checks PutBucketCors: 1 to [`MAX_CORS_RULES`] rules,
    /// each with at least one `AllowedOrigin` and one `AllowedMethod`, methods only among
    /// [`CORS_METHODS`] (exact spelling), at most one `*` in each `AllowedOrigin` and
    /// `AllowedHeader`, an `ID` of at most [`MAX_CORS_ID_CHARS`] characters, a non-negative
    /// `MaxAgeSeconds`, and the whole within [`MAX_CORS_BYTES`] of text.
    pub fn check(&self) -> Result<(), InvalidCors> {
        let refuse = |code, message: String| Err(InvalidCors { code, message });
        let schema = "The XML you provided was not well-formed or did not validate against our \
                      published schema";
        if self.rules.is_empty() {
            return refuse(
                CorsRefusal::MalformedXml,
                format!("{schema}: a CORSConfiguration needs at least one CORSRule"),
            );
        }
        if self.rules.len() > MAX_CORS_RULES {
            return refuse(
                CorsRefusal::MalformedXml,
                format!(
                    "The number of CORS rules should not exceed allowed limit of \
                     {MAX_CORS_RULES} rules."
                ),
            );
        }
        for rule in &self.rules {
            if rule.allowed_origins.is_empty() || rule.allowed_methods.is_empty() {
                return refuse(
                    CorsRefusal::MalformedXml,
                    format!("{schema}: every CORSRule needs an AllowedOrigin and an AllowedMethod"),
                );
            }
            if let Some(method) =
                rule.allowed_methods.iter().find(|m| !CORS_METHODS.contains(&m.as_str()))
            {
                return refuse(
                    CorsRefusal::InvalidRequest,
                    format!(
                        "Found unsupported HTTP method in CORS config. Unsupported method is \
                         {method}"
                    ),
                );
            }
            let wildcards = [
                ("AllowedOrigin", &rule.allowed_origins),
                ("AllowedHeader", &rule.allowed_headers),
            ];
            for (what, list) in wildcards {
                if let Some(item) = list.iter().find(|item| item.matches('*').count() > 1) {
                    return refuse(
                        CorsRefusal::InvalidRequest,
                        format!("{what} \"{item}\" can not have more than one wildcard."),
                    );
                }
            }
            if rule.id.as_ref().is_some_and(|id| id.chars().count() > MAX_CORS_ID_CHARS) {
                return refuse(
                    CorsRefusal::InvalidArgument,
                    format!(
                        "The ID of a CORSRule cannot be longer than {MAX_CORS_ID_CHARS} characters"
                    ),
                );
            }
            if rule.max_age_seconds.is_some_and(|age| age < 0) {
                return refuse(
                    CorsRefusal::InvalidArgument,
                    "MaxAgeSeconds must not be negative".to_owned(),
                );
            }
        }
        let size: usize = self.rules.iter().map(CorsRule::text_size).sum();
        if size > MAX_CORS_BYTES {
            return refuse(
                CorsRefusal::InvalidRequest,
                format!(
                    "The CORS configuration size must be less than 64 KB (it is {size} bytes of \
                     text)"
                ),
            );
        }
        Ok(())
    }
}

impl CorsRule {
    fn text_size(&self) -> usize {
        let lists = [
            &self.allowed_origins,
            &self.allowed_methods,
            &self.allowed_headers,
            &self.expose_headers,
        ];
        let listed: usize = lists.iter().flat_map(|l| l.iter()).map(String::len).sum();
        listed + self.id.as_ref().map_or(0, String::len)
    }
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
        read_config(self.cors_path(bucket))
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
            replace_config(&store.cors_path(&bucket), config.as_ref())
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
