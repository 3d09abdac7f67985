//! The [`Provisioner`] for hostPath buckets: directories in a [`BucketStore`], reached through
//! the S3 endpoint of [`s3_endpoint::s3`] with one access key per claim.

use std::collections::BTreeMap;

use bucket_api::{AccessMode, BucketUsage, ObjectBucket, ReclaimPolicy};
use bucket_provisioner::bucket::features::object_lock::OBJECT_LOCK;
use bucket_provisioner::bucket::features::versioning::VERSIONING;
use bucket_provisioner::bucket::standalone::{BucketLocation, IssuedKey, KeyRequest, NewBucket};
use bucket_provisioner::{
    BackendError, BucketOptions, Credentials, Endpoint, ProvisionedBucket, Provisioner, Removed,
    WebIdentity, user_id_of,
};
use s3_endpoint::store::{CorsConfig, KeyMode, LifecycleConfig, Settable, WebIdentityAccess};
use s3_endpoint::{AccessKey, Creator, StoreError};

use crate::features::Features;
use crate::quota::{BUCKET_MAX_OBJECTS, BUCKET_MAX_SIZE, ClaimQuotas, MAX_OBJECTS, MAX_SIZE};
pub(crate) use crate::store_error::backend_error;
use crate::store_link::StoreLink;
use crate::{cors, lifecycle, settable};

/// The account in the ARNs of the roles claims' ServiceAccounts assume: the endpoint has one.
pub const ROLE_ACCOUNT: &str = "000000000000";

/// Key in an ObjectBucket's `additionalState` holding the identity that provisioned it.
pub const STATE_IDENTITY: &str = "identity";
/// Key in an ObjectBucket's `additionalState` holding the claim's user id, used by revoke when
/// the claim reference is gone.
pub const STATE_USER_ID: &str = "userId";

/// Where pods reach the S3 endpoint that [`s3_endpoint::s3::serve`] runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPathConfig {
    /// Host name (or address) pods connect to, e.g. the endpoint Service's DNS name.
    pub host: String,
    /// Port pods connect to.
    pub port: u16,
    /// Region handed to clients; SigV4 signatures name it. `us-east-1` when in doubt.
    pub region: String,
}

/// Provisions buckets as directories of a [`BucketStore`](s3_endpoint::BucketStore), in this
/// process or the endpoint's ([`StoreLink`]).
#[derive(Clone, Debug)]
pub struct HostPathProvisioner {
    store: StoreLink,
    config: HostPathConfig,
}

impl HostPathProvisioner {
    /// The role of the key holder `user_id` on the endpoint (named by the user id), assumed
    /// where pods reach the buckets: the endpoint answers STS on the same address.
    pub(crate) fn role_of(&self, user_id: &str) -> WebIdentity {
        WebIdentity {
            role_arn: format!("arn:aws:iam::{ROLE_ACCOUNT}:role/{user_id}"),
            sts_endpoint: self.endpoint().url(),
        }
    }

    /// A provisioner creating buckets in `store` (a [`BucketStore`](s3_endpoint::BucketStore)
    /// of this process, or a [`StoreLink`]) and pointing claims at `config`'s endpoint.
    pub fn new(store: impl Into<StoreLink>, config: HostPathConfig) -> Self {
        Self { store: store.into(), config }
    }

    /// The store buckets live in.
    pub fn store(&self) -> &StoreLink {
        &self.store
    }

    /// Where pods reach the buckets.
    pub(crate) fn endpoint(&self) -> Endpoint {
        Endpoint {
            scheme: "http".to_owned(),
            host: self.config.host.clone(),
            port: self.config.port,
            region: self.config.region.clone(),
            sub_region: String::new(),
        }
    }

    fn answer(&self, key: AccessKey, user_id: &str) -> ProvisionedBucket {
        ProvisionedBucket {
            endpoint: self.endpoint(),
            credentials: Credentials {
                access_key_id: key.access_key_id,
                secret_access_key: key.secret_access_key,
            },
            additional_state: BTreeMap::from([
                (STATE_IDENTITY.to_owned(), self.store.identity().to_owned()),
                (STATE_USER_ID.to_owned(), user_id.to_owned()),
            ]),
        }
    }

    /// Issues (or finds again) the claim's key, after the bucket is known to exist, with the
    /// claim's quota on what it stores.
    async fn issue(
        &self,
        options: &BucketOptions,
        quotas: &ClaimQuotas,
    ) -> Result<ProvisionedBucket, BackendError> {
        let (user, bucket) = (&options.user_id, &options.bucket_name);
        // Deleted between the check and the key: the next attempt sorts it out.
        let gone = |e: StoreError| match e {
            StoreError::NoSuchBucket(_) => BackendError::transient(e.to_string()),
            e => backend_error(e),
        };
        let key = self.store.issue_key(user, bucket).await.map_err(gone)?;
        self.store.set_user_quota(user, bucket, quotas.claim).await.map_err(gone)?;
        self.store.set_key_mode(user, bucket, key_mode(options.access_mode)).await.map_err(gone)?;
        self.set_web_identity(options).await?;
        Ok(self.answer(key, user))
    }

    /// Lets in exactly the subjects the claim names now (none when it names none), with the
    /// class's longest session; a claim that gets sessions only has its key's secret refused.
    async fn set_web_identity(&self, options: &BucketOptions) -> Result<(), BackendError> {
        let access = options.web_identity.as_ref().map(|told| WebIdentityAccess {
            subjects: told.subjects.clone(),
            max_session_secs: told.max_session_secs,
            sessions_only: told.sessions_only,
        });
        self.store
            .set_web_identity(&options.user_id, &options.bucket_name, access)
            .await
            .map_err(backend_error)
    }

    /// Sets the bucket-wide quota where the claim created the bucket; a claim sharing a bucket
    /// it did not create may not limit the others.
    async fn set_bucket_quota(
        &self,
        options: &BucketOptions,
        quotas: &ClaimQuotas,
    ) -> Result<(), BackendError> {
        let (user, bucket) = (&options.user_id, &options.bucket_name);
        let record = self.store.bucket_record(bucket).await.map_err(backend_error)?;
        let created = record.is_some_and(|r| {
            r.created_by_provisioner && r.creator.as_deref() == Some(user.as_str())
        });
        if created {
            return self
                .store
                .set_bucket_quota(bucket, user, quotas.bucket)
                .await
                .map_err(backend_error);
        }
        if quotas.bucket.is_unlimited() {
            return Ok(());
        }
        Err(BackendError::invalid_parameter(format!(
            "additionalConfig {BUCKET_MAX_OBJECTS} and {BUCKET_MAX_SIZE} limit the whole bucket \
             {bucket:?}, which this claim did not create and may share with other claims; only \
             the claim that created a bucket sets them. Use {MAX_OBJECTS} and {MAX_SIZE} to \
             limit what this claim stores"
        )))
    }
}

impl HostPathProvisioner {
    /// Whether the claim created its bucket, and so may set what configures the whole bucket.
    /// Records which bucket-wide settings the creating claim's keys may change (see
    /// [`crate::settable`]).
    async fn set_bucket_settable(
        &self,
        options: &BucketOptions,
        settable: Settable,
    ) -> Result<(), BackendError> {
        let (bucket, user) = (&options.bucket_name, &options.user_id);
        self.store.set_bucket_settable(bucket, user, settable).await.map_err(backend_error)
    }

    async fn created_by_claim(&self, options: &BucketOptions) -> Result<bool, BackendError> {
        let record = self.store.bucket_record(&options.bucket_name).await.map_err(backend_error)?;
        Ok(record.is_some_and(|r| {
            r.created_by_provisioner && r.creator.as_deref() == Some(options.user_id.as_str())
        }))
    }

    /// Sets (or with `None` removes) the bucket's CORS rules where the claim created the
    /// bucket; rules for a bucket it only shares are refused, as its bucket-wide quotas are.
    async fn set_bucket_cors(
        &self,
        options: &BucketOptions,
        rules: Option<CorsConfig>,
    ) -> Result<(), BackendError> {
        let bucket = &options.bucket_name;
        if self.created_by_claim(options).await? {
            return self.store.set_bucket_cors(bucket, rules).await.map_err(backend_error);
        }
        if rules.is_none() {
            return Ok(());
        }
        Err(shared_bucket(cors::CORS, "CORS", bucket))
    }

    /// Sets (or with `None` removes) the bucket's lifecycle rules where the claim created the
    /// bucket; rules for a bucket it only shares are refused: they delete others' objects too.
    async fn set_bucket_lifecycle(
        &self,
        options: &BucketOptions,
        rules: Option<LifecycleConfig>,
    ) -> Result<(), BackendError> {
        let bucket = &options.bucket_name;
        if self.created_by_claim(options).await? {
            return self.store.set_bucket_lifecycle(bucket, rules).await.map_err(backend_error);
        }
        if rules.is_none() {
            return Ok(());
        }
        Err(shared_bucket(lifecycle::BUCKET_LIFECYCLE, "lifecycle", bucket))
    }
}

/// The refusal of bucket-wide rules asked by a claim that did not create the bucket.
fn shared_bucket(key: &str, what: &str, bucket: &str) -> BackendError {
    BackendError::invalid_parameter(format!(
        "additionalConfig {key} sets the {what} rules of the whole bucket {bucket:?}, which this \
         claim did not create and may share with other claims; only the claim that created a \
         bucket sets them"
    ))
}

/// The refusal of versioning or object lock asked by a claim that did not create the bucket.
fn versions_of_shared_bucket(bucket: &str) -> BackendError {
    BackendError::invalid_parameter(format!(
        "additionalConfig {VERSIONING} and {OBJECT_LOCK} configure the whole bucket {bucket:?}, \
         which this claim did not create and may share with other claims; only the claim that \
         created a bucket sets them"
    ))
}

/// The endpoint's key mode granting what the claim's access mode allows.
pub(crate) fn key_mode(mode: AccessMode) -> KeyMode {
    match mode {
        AccessMode::ReadWrite => KeyMode::ReadWrite,
        AccessMode::ReadOnly => KeyMode::ReadOnly,
        AccessMode::WriteOnly => KeyMode::WriteOnly,
    }
}

/// What a claim asks of its bucket beyond its key: quotas, CORS and lifecycle rules,
/// versioning and object lock.
struct ClaimConfig {
    quotas: ClaimQuotas,
    cors: Option<CorsConfig>,
    lifecycle: Option<LifecycleConfig>,
    features: Features,
    settable: Settable,
}

/// The claim's quotas, CORS and lifecycle rules, versioning and object lock, checked against
/// the StorageClass's parameters (those of [`cors::PARAMETERS`]).
fn checked_config(options: &BucketOptions) -> Result<ClaimConfig, BackendError> {
    let (config, parameters) = (options.additional_config.requested(), &options.parameters);
    let cors = cors::claim_rules(config, parameters)?;
    let quotas = ClaimQuotas::parse(config)?;
    let lifecycle = lifecycle::claim_rules(config, parameters)?;
    let features = Features::parse(config, parameters)?;
    let settable = settable::settable(parameters)?;
    Ok(ClaimConfig { quotas, cors, lifecycle, features, settable })
}

impl Provisioner for HostPathProvisioner {
    fn validate(&self, options: &BucketOptions) -> Result<(), BackendError> {
        checked_config(options).map(drop)
    }

    async fn provision(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        let ClaimConfig { quotas, cors, lifecycle, features, settable } = checked_config(options)?;
        let creator = Creator {
            user_id: &options.user_id,
            delete_with_claim: options.reclaim_policy == ReclaimPolicy::Delete,
        };
        let (_, key) = self.store.provision_bucket(&options.bucket_name, creator).await.map_err(
            |e| match e {
                // Another node's bucket is as unavailable as another claim's, and says no more.
                StoreError::NotOurs { bucket, .. } => BackendError::name_taken(&bucket),
                e => backend_error(e),
            },
        )?;
        // Quotas change nothing on disk unless set, so the common claim stays one transaction.
        self.set_bucket_quota(options, &quotas).await?;
        if cors.is_some() {
            self.set_bucket_cors(options, cors).await?;
        }
        if lifecycle.is_some() {
            self.set_bucket_lifecycle(options, lifecycle).await?;
        }
        // Before the key is handed out: object lock is turned on only while the bucket is empty,
        // and the key's leave to change bucket-wide settings is recorded.
        if self.created_by_claim(options).await? {
            features.apply(&self.store, &options.bucket_name, None).await?;
            self.set_bucket_settable(options, settable).await?;
        }
        let (user, bucket) = (&options.user_id, &options.bucket_name);
        self.store.set_user_quota(user, bucket, quotas.claim).await.map_err(backend_error)?;
        // Narrowed before the key is handed to anyone: the Secret is written after this answer.
        self.store
            .set_key_mode(user, bucket, key_mode(options.access_mode))
            .await
            .map_err(backend_error)?;
        self.set_web_identity(options).await?;
        Ok(self.answer(key, user))
    }

    async fn grant(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        let ClaimConfig { quotas, cors, lifecycle, features, .. } = checked_config(options)?;
        if features.asked() {
            return Err(versions_of_shared_bucket(&options.bucket_name));
        }
        let exists = self.store.bucket_exists(&options.bucket_name).await.map_err(backend_error)?;
        if !exists {
            return Err(BackendError::permanent(
                "BucketNotFound",
                format!(
                    "bucket {:?} does not exist under {}; create it first (CreateBucket with the \
                     operator credential, or a directory made by hand)",
                    options.bucket_name,
                    self.store.root().join("buckets").display()
                ),
            ));
        }
        self.set_bucket_quota(options, &quotas).await?;
        if cors.is_some() {
            self.set_bucket_cors(options, cors).await?;
        }
        if lifecycle.is_some() {
            self.set_bucket_lifecycle(options, lifecycle).await?;
        }
        self.issue(options, &quotas).await
    }

    async fn delete(&self, bucket: &ObjectBucket) -> Result<Removed, BackendError> {
        let name = bucket_name_of(bucket)?;
        let ours = self.store.identity();
        let state = bucket.spec.additional_state.as_ref();
        if let Some(recorded) = state.and_then(|s| s.get(STATE_IDENTITY))
            && recorded != ours
        {
            return Err(BackendError::permanent(
                "NotOurs",
                format!(
                    "bucket {name:?} was provisioned by {recorded:?}, not by this provisioner \
                     ({ours:?}); it was left alone"
                ),
            ));
        }
        // The claim UID of the ObjectBucket, never a recorded user id: only the store's own
        // record of the creator may let a bucket go.
        let Some(user_id) = user_id_of(bucket) else {
            self.revoke(bucket).await?;
            return Ok(Removed::AccessOnly);
        };
        let deleted = self.store.delete_bucket(&name, &user_id).await.map_err(backend_error)?;
        // The bucket's keys went with it; a key of this claim elsewhere would be a leftover.
        self.store.revoke_keys(&user_id).await.map_err(backend_error)?;
        Ok(if deleted { Removed::Bucket } else { Removed::AccessOnly })
    }

    async fn revoke(&self, bucket: &ObjectBucket) -> Result<(), BackendError> {
        let user_id = claim_user_id(bucket).ok_or_else(missing_user_id)?;
        self.store.revoke_keys(&user_id).await.map_err(backend_error)?;
        Ok(())
    }

    /// Applies changed quotas, CORS and lifecycle rules and access mode to the bound bucket: the
    /// claim's own quota and mode always, the bucket's quota and rules where the claim created
    /// it. A quota lowered below what is stored blocks further writes and deletes nothing; a key
    /// removed lifts its limit, and `cors` or `bucketLifecycle` removed takes the rules it set
    /// away. Rules of a claim that never carried the key (as its ObjectBucket, which only the
    /// provisioner writes, records) are left as they are. A mode holds from the next request on.
    async fn update(
        &self,
        options: &BucketOptions,
        bucket: &ObjectBucket,
    ) -> Result<(), BackendError> {
        let ClaimConfig { quotas, cors, lifecycle, features, settable } = checked_config(options)?;
        self.set_bucket_quota(options, &quotas).await?;
        if self.created_by_claim(options).await? {
            self.set_bucket_settable(options, settable).await?;
        }
        let previous = bucket.spec.endpoint.as_ref().and_then(|e| e.additional_config.as_ref());
        let had = |key| previous.is_some_and(|c| c.contains_key(key));
        // As for rules: a claim that never carried the keys leaves the bucket's versions alone.
        if features.asked() || had(VERSIONING) || had(OBJECT_LOCK) {
            if !self.created_by_claim(options).await? {
                return Err(versions_of_shared_bucket(&options.bucket_name));
            }
            let previous = previous.cloned().unwrap_or_default();
            features.apply(&self.store, &options.bucket_name, Some(&previous)).await?;
        }
        if cors.is_some() || had(cors::CORS) {
            self.set_bucket_cors(options, cors).await?;
        }
        if lifecycle.is_some() || had(lifecycle::BUCKET_LIFECYCLE) {
            self.set_bucket_lifecycle(options, lifecycle).await?;
        }
        let (user, bucket) = (&options.user_id, &options.bucket_name);
        self.store.set_user_quota(user, bucket, quotas.claim).await.map_err(backend_error)?;
        self.store
            .set_key_mode(user, bucket, key_mode(options.access_mode))
            .await
            .map_err(backend_error)?;
        self.set_web_identity(options).await
    }

    /// The claim's role on the endpoint (named by its user id), assumed where pods reach the
    /// bucket: the endpoint answers STS on the same address.
    fn web_identity(&self, options: &BucketOptions) -> Result<WebIdentity, BackendError> {
        Ok(self.role_of(&options.user_id))
    }

    /// A new key beside the claim's key `keep`, with its access and quota; the store keeps
    /// both until the library retires `keep`.
    async fn rotate(&self, bucket: &ObjectBucket, keep: &str) -> Result<Credentials, BackendError> {
        let name = bucket_name_of(bucket)?;
        let user_id = claim_user_id(bucket).ok_or_else(missing_user_id)?;
        let key = self.store.rotate_key(&user_id, &name, keep).await.map_err(backend_error)?;
        Ok(Credentials {
            access_key_id: key.access_key_id,
            secret_access_key: key.secret_access_key,
        })
    }

    /// Removes the claim's key `access_key_id`; a key of anyone else is left alone.
    async fn retire_key(
        &self,
        bucket: &ObjectBucket,
        access_key_id: &str,
    ) -> Result<(), BackendError> {
        let user_id = claim_user_id(bucket).ok_or_else(missing_user_id)?;
        self.store.retire_key(&user_id, access_key_id).await.map_err(backend_error)?;
        Ok(())
    }

    async fn create_bucket(&self, bucket: &NewBucket) -> Result<BucketLocation, BackendError> {
        self.create_own_bucket(bucket).await
    }

    async fn delete_bucket(&self, bucket: &str, owner_id: &str) -> Result<Removed, BackendError> {
        self.delete_own_bucket(bucket, owner_id).await
    }

    async fn existing_bucket(
        &self,
        bucket: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<BucketLocation, BackendError> {
        self.find_bucket(bucket, parameters).await
    }

    async fn issue_key(&self, request: &KeyRequest) -> Result<IssuedKey, BackendError> {
        self.issue_own_key(request).await
    }

    async fn revoke_key(&self, owner_id: &str) -> Result<(), BackendError> {
        self.revoke_own_key(owner_id).await
    }

    /// What the bucket holds and what the claim's key stored in it, from the store's meters.
    fn usage(&self, bucket: &ObjectBucket) -> Option<BucketUsage> {
        let name = bucket_name_of(bucket).ok()?;
        let user = claim_user_id(bucket);
        let (total, claim, quota) = self.store.usage_now(&name, user.as_deref())?;
        Some(BucketUsage {
            objects: total.objects,
            bytes: total.bytes,
            claim_objects: Some(claim.objects),
            claim_bytes: Some(claim.bytes),
            max_objects: quota.max_objects,
            max_bytes: quota.max_bytes,
        })
    }
}

fn missing_user_id() -> BackendError {
    BackendError::permanent(
        "MissingUserId",
        "the ObjectBucket names no claim UID and records no userId, so its key cannot be found",
    )
}

fn claim_user_id(bucket: &ObjectBucket) -> Option<String> {
    user_id_of(bucket).or_else(|| {
        bucket.spec.additional_state.as_ref().and_then(|s| s.get(STATE_USER_ID)).cloned()
    })
}

fn bucket_name_of(bucket: &ObjectBucket) -> Result<String, BackendError> {
    bucket
        .spec
        .endpoint
        .as_ref()
        .map(|e| e.bucket_name.clone())
        .filter(|name| !name.is_empty())
        .ok_or_else(|| {
            BackendError::permanent("MissingBucketName", "the ObjectBucket names no bucket")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_access_mode_is_the_key_mode_of_the_same_name() {
        for mode in AccessMode::ALL {
            assert_eq!(key_mode(mode).as_str(), mode.as_str());
        }
    }
}
