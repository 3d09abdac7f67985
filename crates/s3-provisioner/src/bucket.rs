//! Buckets: create one for a claim (and recognise it again on a retry), check that a named bucket
//! exists, and empty and delete a claim's bucket.
//!
//! S3 reports a bucket of the same account as "already owned by you" (or, in us-east-1, simply
//! succeeds), whoever in that account made it. So a bucket made for a claim carries tags with the
//! claim's user id and the reclaim policy it was made under: a retry recognises it, no other
//! claim can take it over, and only the creating claim's deletion under `Delete` removes it. The
//! tags are the record; a service that keeps none cannot hold claims' buckets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_s3::Client;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketLocationConstraint, CorsConfiguration,
    CreateBucketConfiguration, Delete, ObjectIdentifier, Tag, Tagging,
};
use bucket_api::ReclaimPolicy;
use bucket_provisioner::{BackendError, Removed};

use crate::aws::{classify, code};

/// The tag naming the claim (its user id) a bucket was created for.
pub const CLAIM_TAG: &str = "objectbucket.io/claim-user";
/// The tag naming the reclaim policy the bucket was created under.
pub const POLICY_TAG: &str = "objectbucket.io/reclaim-policy";

/// One lock per bucket name being created, so that two claims of this process racing for one
/// name cannot both find it untagged and both tag it.
#[derive(Default)]
pub(crate) struct NameLocks(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl NameLocks {
    pub(crate) async fn hold<T>(&self, name: &str, work: impl Future<Output = T>) -> T {
        let lock = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.to_owned())
            .or_default()
            .clone();
        let result = {
            let _held = lock.lock().await;
            work.await
        };
        let mut locks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Ours and the map's: nobody else waits, so the entry can go.
        if Arc::strong_count(&lock) == 2 {
            locks.remove(name);
        }
        result
    }
}

/// A bucket's relation to claims, as its tags tell.
#[derive(Debug, PartialEq, Eq)]
enum Ownership {
    /// Tagged for the claim with this user id, with the reclaim policy if recorded (buckets
    /// tagged before policies were have none).
    Claim(String, Option<ReclaimPolicy>),
    /// No tags at all.
    Untagged,
    /// Tags, none of them ours: made by someone else.
    Foreign,
    /// The service keeps no tags; only the record can tell.
    Unknown,
    /// There is no such bucket.
    Missing,
}

/// A bucket operation with what messages need.
pub(crate) struct Buckets<'a> {
    pub(crate) s3: &'a Client,
    /// How the owner's credentials were found, for messages.
    pub(crate) owner: &'a str,
    pub(crate) locks: &'a NameLocks,
}

fn invalid(what: &str, error: impl std::fmt::Display) -> BackendError {
    BackendError::transient(format!("building the {what} request failed: {error}"))
}

impl Buckets<'_> {
    /// Creates `bucket` for the claim with `user_id` under `policy`, with object lock when
    /// `locked` (which S3 turns on only here), or finds the one an earlier attempt made; any
    /// other bucket of that name is [`BackendError::name_taken`].
    pub(crate) async fn create(
        &self,
        bucket: &str,
        region: &str,
        (user_id, policy): (&str, ReclaimPolicy),
        locked: bool,
    ) -> Result<(), BackendError> {
        self.locks.hold(bucket, self.create_unlocked(bucket, region, user_id, policy, locked)).await
    }

    async fn create_unlocked(
        &self,
        bucket: &str,
        region: &str,
        user_id: &str,
        policy: ReclaimPolicy,
        locked: bool,
    ) -> Result<(), BackendError> {
        let mut request = self
            .s3
            .create_bucket()
            .bucket(bucket)
            .set_object_lock_enabled_for_bucket(locked.then_some(true));
        // us-east-1 is the one region that takes no location constraint.
        if region != crate::params::DEFAULT_REGION {
            let configuration = CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(region))
                .build();
            request = request.create_bucket_configuration(configuration);
        }
        match request.send().await {
            Ok(_) => tracing::info!(bucket, region, "created bucket (or found it ours)"),
            Err(e) if code(&e) == Some("BucketAlreadyOwnedByYou") => {}
            // Another account's: bucket names are global.
            Err(e) if code(&e) == Some("BucketAlreadyExists") => {
                return Err(BackendError::name_taken(bucket));
            }
            Err(e) => return Err(classify(e, &format!("s3:CreateBucket {bucket}"), self.owner)),
        }
        match self.ownership(bucket).await? {
            Ownership::Claim(owner, _) if owner == user_id => Ok(()),
            Ownership::Claim(..) | Ownership::Foreign => Err(BackendError::name_taken(bucket)),
            Ownership::Unknown => Err(untaggable(bucket)),
            // Made by an attempt that stopped before tagging it, or by someone just now: only an
            // empty bucket is taken, so no one's data ever becomes this claim's.
            Ownership::Untagged if self.is_empty(bucket).await? => {
                self.tag(bucket, user_id, policy).await?;
                // Read back: another process tagging at the same moment wins or loses here.
                match self.ownership(bucket).await? {
                    Ownership::Claim(owner, _) if owner == user_id => Ok(()),
                    Ownership::Unknown => Err(untaggable(bucket)),
                    _ => Err(BackendError::name_taken(bucket)),
                }
            }
            Ownership::Untagged => Err(BackendError::name_taken(bucket)),
            Ownership::Missing => Err(BackendError::transient(format!(
                "bucket {bucket:?} was gone right after it was created"
            ))),
        }
    }

    /// Records `bucket` as created by the claim with `user_id` under `policy`, when it carries
    /// no tags at all (or already says so); answers whether it now does. Used only for a bucket
    /// a previous provisioner's records prove the claim's, so its data may be there.
    pub(crate) async fn claim_untagged(
        &self,
        bucket: &str,
        user_id: &str,
        policy: ReclaimPolicy,
    ) -> Result<bool, BackendError> {
        self.locks
            .hold(bucket, async {
                match self.ownership(bucket).await? {
                    Ownership::Claim(owner, _) => Ok(owner == user_id),
                    Ownership::Untagged => {
                        self.tag(bucket, user_id, policy).await?;
                        Ok(matches!(self.ownership(bucket).await?,
                        Ownership::Claim(owner, _) if owner == user_id))
                    }
                    _ => Ok(false),
                }
            })
            .await
    }

    /// Checks that the existing `bucket` can be reached.
    pub(crate) async fn head(&self, bucket: &str) -> Result<(), BackendError> {
        match self.s3.head_bucket().bucket(bucket).send().await {
            Ok(_) => Ok(()),
            Err(e) if crate::aws::status(&e) == Some(404) => Err(BackendError::permanent(
                "BucketNotFound",
                format!(
                    "bucket {bucket:?} named by the StorageClass parameter bucketName does not \
                     exist; create it or fix the StorageClass"
                ),
            )),
            Err(e) => Err(classify(e, &format!("s3:HeadBucket {bucket}"), self.owner)),
        }
    }

    /// Deletes every object version, delete marker and unfinished upload of `bucket`, then the
    /// bucket, when its tags say the claim with `user_id` created it under `Delete` (or under no
    /// recorded policy, as before policies were tagged). A bucket that is gone counts as
    /// deleted; any other is left alone and answers [`Removed::AccessOnly`].
    pub(crate) async fn empty_and_delete(
        &self,
        bucket: &str,
        user_id: &str,
    ) -> Result<Removed, BackendError> {
        match self.ownership(bucket).await? {
            Ownership::Missing => return Ok(Removed::Bucket),
            Ownership::Claim(owner, policy)
                if owner == user_id && policy != Some(ReclaimPolicy::Retain) => {}
            _ => {
                tracing::info!(bucket, user_id, "not this claim's bucket to delete; left alone");
                return Ok(Removed::AccessOnly);
            }
        }
        self.abort_uploads(bucket).await?;
        let deleted = self.delete_versions(bucket).await?;
        tracing::info!(bucket, objects = deleted, "emptied bucket");
        match self.s3.delete_bucket().bucket(bucket).send().await {
            Ok(_) => Ok(Removed::Bucket),
            Err(e) if code(&e) == Some("NoSuchBucket") => Ok(Removed::Bucket),
            // Someone wrote while we emptied it: the retry empties it again.
            Err(e) if code(&e) == Some("BucketNotEmpty") => Err(BackendError::transient(format!(
                "bucket {bucket:?} received new objects while it was emptied"
            ))),
            Err(e) => Err(classify(e, &format!("s3:DeleteBucket {bucket}"), self.owner)),
        }
    }

    /// Whether the tags of `bucket` say the claim with `user_id` created it.
    pub(crate) async fn created_by(
        &self,
        bucket: &str,
        user_id: &str,
    ) -> Result<bool, BackendError> {
        Ok(matches!(self.ownership(bucket).await?, Ownership::Claim(owner, _) if owner == user_id))
    }

    /// Who the tags of `bucket` say created it (a claim's or a COSI owner's id): `None` when
    /// there is no such bucket, `Some(None)` when it exists and no creator is recorded.
    pub(crate) async fn creator(
        &self,
        bucket: &str,
    ) -> Result<Option<Option<String>>, BackendError> {
        Ok(match self.ownership(bucket).await? {
            Ownership::Missing => None,
            Ownership::Claim(owner, _) => Some(Some(owner)),
            Ownership::Untagged | Ownership::Foreign | Ownership::Unknown => Some(None),
        })
    }

    /// Applies `policy` (JSON) to `bucket`, or removes its policy for `None`.
    pub(crate) async fn set_policy(
        &self,
        bucket: &str,
        policy: Option<&str>,
    ) -> Result<(), BackendError> {
        match policy {
            Some(policy) => {
                let request = self.s3.put_bucket_policy().bucket(bucket).policy(policy);
                request.send().await.map_err(|e| {
                    classify(e, &format!("s3:PutBucketPolicy {bucket}"), self.owner)
                })?;
            }
            None => match self.s3.delete_bucket_policy().bucket(bucket).send().await {
                Ok(_) => {}
                Err(e) if code(&e) == Some("NoSuchBucketPolicy") => {}
                Err(e) => {
                    return Err(classify(
                        e,
                        &format!("s3:DeleteBucketPolicy {bucket}"),
                        self.owner,
                    ));
                }
            },
        }
        Ok(())
    }

    /// Applies `lifecycle` to `bucket`, or removes its lifecycle configuration for `None`.
    pub(crate) async fn set_lifecycle(
        &self,
        bucket: &str,
        lifecycle: Option<&BucketLifecycleConfiguration>,
    ) -> Result<(), BackendError> {
        let action = |verb: &str| format!("s3:{verb} {bucket}");
        match lifecycle {
            Some(lifecycle) => {
                let request = self.s3.put_bucket_lifecycle_configuration().bucket(bucket);
                request
                    .lifecycle_configuration(lifecycle.clone())
                    .send()
                    .await
                    .map_err(|e| classify(e, &action("PutLifecycleConfiguration"), self.owner))?;
            }
            None => {
                let request = self.s3.delete_bucket_lifecycle().bucket(bucket);
                request.send().await.map_err(|e| {
                    classify(
                        e,
                        &action("PutLifecycleConfiguration (DeleteBucketLifecycle)"),
                        self.owner,
                    )
                })?;
            }
        }
        Ok(())
    }

    /// Applies `cors` to `bucket` (PutBucketCors), or removes its CORS rules for `None`.
    pub(crate) async fn set_cors(
        &self,
        bucket: &str,
        cors: Option<&CorsConfiguration>,
    ) -> Result<(), BackendError> {
        let action = format!("s3:PutBucketCORS {bucket}");
        match cors {
            Some(cors) => {
                let request = self.s3.put_bucket_cors().bucket(bucket);
                request
                    .cors_configuration(cors.clone())
                    .send()
                    .await
                    .map_err(|e| classify(e, &action, self.owner))?;
            }
            None => match self.s3.delete_bucket_cors().bucket(bucket).send().await {
                Ok(_) => {}
                Err(e) if code(&e) == Some("NoSuchCORSConfiguration") => {}
                Err(e) => return Err(classify(e, &action, self.owner)),
            },
        }
        Ok(())
    }

    async fn ownership(&self, bucket: &str) -> Result<Ownership, BackendError> {
        match self.s3.get_bucket_tagging().bucket(bucket).send().await {
            Ok(output) => {
                let tags = output.tag_set();
                // Anything but Delete keeps the bucket: deleting is the one thing to be sure of.
                let policy = tags.iter().find(|t| t.key() == POLICY_TAG).map(|t| match t.value() {
                    "Delete" => ReclaimPolicy::Delete,
                    _ => ReclaimPolicy::Retain,
                });
                Ok(match tags.iter().find(|t| t.key() == CLAIM_TAG) {
                    Some(tag) => Ownership::Claim(tag.value().to_string(), policy),
                    None if tags.is_empty() => Ownership::Untagged,
                    None => Ownership::Foreign,
                })
            }
            Err(e) => match code(&e) {
                Some("NoSuchTagSet" | "NoSuchTagSetError") => Ok(Ownership::Untagged),
                Some("NoSuchBucket") => Ok(Ownership::Missing),
                Some("NotImplemented" | "MethodNotAllowed") => Ok(Ownership::Unknown),
                _ => Err(classify(e, &format!("s3:GetBucketTagging {bucket}"), self.owner)),
            },
        }
    }

    async fn tag(
        &self,
        bucket: &str,
        user_id: &str,
        policy: ReclaimPolicy,
    ) -> Result<(), BackendError> {
        let policy = match policy {
            ReclaimPolicy::Delete => "Delete",
            ReclaimPolicy::Retain => "Retain",
        };
        let tag = |key: &str, value: &str| {
            Tag::builder().key(key).value(value).build().map_err(|e| invalid("tag", e))
        };
        let tagging = Tagging::builder()
            .tag_set(tag(CLAIM_TAG, user_id)?)
            .tag_set(tag(POLICY_TAG, policy)?)
            .build()
            .map_err(|e| invalid("tagging", e))?;
        match self.s3.put_bucket_tagging().bucket(bucket).tagging(tagging).send().await {
            Ok(_) => Ok(()),
            Err(e) if matches!(code(&e), Some("NotImplemented" | "MethodNotAllowed")) => {
                Err(untaggable(bucket))
            }
            Err(e) => Err(classify(e, &format!("s3:PutBucketTagging {bucket}"), self.owner)),
        }
    }

    async fn is_empty(&self, bucket: &str) -> Result<bool, BackendError> {
        match self.s3.list_object_versions().bucket(bucket).max_keys(1).send().await {
            Ok(page) => Ok(page.versions().is_empty() && page.delete_markers().is_empty()),
            Err(e) if code(&e) == Some("NotImplemented") => {
                let page = self
                    .s3
                    .list_objects_v2()
                    .bucket(bucket)
                    .max_keys(1)
                    .send()
                    .await
                    .map_err(|e| classify(e, &format!("s3:ListBucket {bucket}"), self.owner))?;
                Ok(page.contents().is_empty())
            }
            Err(e) => Err(classify(e, &format!("s3:ListBucketVersions {bucket}"), self.owner)),
        }
    }

    async fn abort_uploads(&self, bucket: &str) -> Result<(), BackendError> {
        let mut previous = None;
        for _ in 0..MAX_PAGES {
            let page = match self.s3.list_multipart_uploads().bucket(bucket).send().await {
                Ok(page) => page,
                Err(e) if code(&e) == Some("NotImplemented") => return Ok(()),
                Err(e) => {
                    let action = format!("s3:ListBucketMultipartUploads {bucket}");
                    return Err(classify(e, &action, self.owner));
                }
            };
            let uploads: Vec<(String, String)> = page
                .uploads()
                .iter()
                .filter_map(|u| Some((u.key()?.to_string(), u.upload_id()?.to_string())))
                .collect();
            let Some(first) = uploads.first().cloned() else { return Ok(()) };
            if previous.replace(first.clone()) == Some(first) {
                return Err(stuck(bucket, "an unfinished upload"));
            }
            for (key, id) in uploads {
                let abort = self.s3.abort_multipart_upload().bucket(bucket).key(&key).upload_id(id);
                match abort.send().await {
                    Ok(_) => {}
                    Err(e) if code(&e) == Some("NoSuchUpload") => {}
                    Err(e) => {
                        let action = format!("s3:AbortMultipartUpload {bucket}");
                        return Err(classify(e, &action, self.owner));
                    }
                }
            }
        }
        Err(unfinished(bucket, "unfinished uploads"))
    }

    /// Deletes every version and delete marker, a listing page (up to 1000) at a time. Each
    /// round lists the first page again: what was deleted has left the listing, so no markers
    /// are carried between calls (which also spares services that mishandle them).
    async fn delete_versions(&self, bucket: &str) -> Result<usize, BackendError> {
        let mut deleted = 0;
        let mut previous = None;
        for _ in 0..MAX_PAGES {
            let page = match self.s3.list_object_versions().bucket(bucket).send().await {
                Ok(page) => page,
                // A service without versioning: plain objects are all there is.
                Err(e) if code(&e) == Some("NotImplemented") => {
                    return Ok(deleted + self.delete_objects(bucket).await?);
                }
                Err(e) => {
                    let action = format!("s3:ListBucketVersions {bucket}");
                    return Err(classify(e, &action, self.owner));
                }
            };
            let versions = page.versions().iter().map(|v| (v.key(), v.version_id()));
            let markers = page.delete_markers().iter().map(|m| (m.key(), m.version_id()));
            let batch: Vec<(String, Option<String>)> = versions
                .chain(markers)
                .filter_map(|(key, version)| Some((key?.to_string(), version.map(Into::into))))
                .collect();
            let Some(first) = batch.first().cloned() else { return Ok(deleted) };
            if previous.replace(first.clone()) == Some(first) {
                return Err(stuck(bucket, "an object version"));
            }
            deleted += self.delete_batch(bucket, batch).await?;
        }
        Err(unfinished(bucket, &format!("{deleted} objects deleted so far")))
    }

    async fn delete_objects(&self, bucket: &str) -> Result<usize, BackendError> {
        let mut deleted = 0;
        let mut previous = None;
        for _ in 0..MAX_PAGES {
            let page = self
                .s3
                .list_objects_v2()
                .bucket(bucket)
                .send()
                .await
                .map_err(|e| classify(e, &format!("s3:ListBucket {bucket}"), self.owner))?;
            let batch: Vec<(String, Option<String>)> =
                page.contents().iter().filter_map(|o| Some((o.key()?.to_string(), None))).collect();
            let Some(first) = batch.first().cloned() else { return Ok(deleted) };
            if previous.replace(first.clone()) == Some(first) {
                return Err(stuck(bucket, "an object"));
            }
            deleted += self.delete_batch(bucket, batch).await?;
        }
        Err(unfinished(bucket, &format!("{deleted} objects deleted so far")))
    }

    async fn delete_batch(
        &self,
        bucket: &str,
        batch: Vec<(String, Option<String>)>,
    ) -> Result<usize, BackendError> {
        if batch.is_empty() {
            return Ok(0);
        }
        let count = batch.len();
        let objects = batch
            .into_iter()
            .map(|(key, version)| {
                ObjectIdentifier::builder().key(key).set_version_id(version).build()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid("object identifier", e))?;
        let delete = Delete::builder()
            .set_objects(Some(objects))
            .quiet(true)
            .build()
            .map_err(|e| invalid("delete", e))?;
        let output = self
            .s3
            .delete_objects()
            .bucket(bucket)
            .delete(delete)
            .send()
            .await
            .map_err(|e| classify(e, &format!("s3:DeleteObjects {bucket}"), self.owner))?;
        if let Some(failed) = output.errors().first() {
            return Err(BackendError::transient(format!(
                "s3:DeleteObjects {bucket}: {} of {count} objects were not deleted, e.g. {:?}: {} {}",
                output.errors().len(),
                failed.key().unwrap_or_default(),
                failed.code().unwrap_or_default(),
                failed.message().unwrap_or_default()
            )));
        }
        Ok(count)
    }
}

/// Listing pages one attempt works through (a million objects); the next attempt goes on.
const MAX_PAGES: usize = 1000;

fn stuck(bucket: &str, what: &str) -> BackendError {
    BackendError::transient(format!(
        "emptying bucket {bucket:?}: {what} is still there after deleting it; retrying"
    ))
}

fn unfinished(bucket: &str, progress: &str) -> BackendError {
    BackendError::transient(format!(
        "emptying bucket {bucket:?} takes more than one attempt ({progress}); the next goes on"
    ))
}

fn untaggable(bucket: &str) -> BackendError {
    BackendError::permanent(
        "BucketTaggingUnsupported",
        format!(
            "the service keeps no bucket tags, so bucket {bucket:?} cannot record which claim \
             created it and claims cannot be given new buckets there; share existing buckets \
             through a StorageClass with bucketName instead"
        ),
    )
}
