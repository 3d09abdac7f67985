//! Buckets and keys on their own, for the COSI driver: a bucket recorded for its COSI owner with
//! no key, and one key per access, on one bucket, with its mode and quota written with it.
//!
//! The endpoint's keys carry one mode each, so a key reaching several buckets (with a mode per
//! bucket) is not served: such a request is `multi_bucket_unsupported`.

use std::collections::BTreeMap;

use bucket_provisioner::bucket::standalone::{
    BucketLocation, IssuedKey, KeyRequest, NewBucket, Quotas, cosi_may_use,
};
use bucket_provisioner::kubernetes::crash_point::crash_point;
use bucket_provisioner::{BackendError, Credentials, Removed};
use s3_endpoint::store::{OwnKey, WebIdentityAccess};
use s3_endpoint::{Creator, Quota, StoreError};

use crate::HostPathProvisioner;
use crate::backend::{backend_error, key_mode};

fn quota(quotas: Quotas) -> Quota {
    Quota { max_objects: quotas.max_objects, max_bytes: quotas.max_bytes }
}

/// The hostPath backend reads no class parameters of its own.
fn no_parameters(parameters: &BTreeMap<String, String>) -> Result<(), BackendError> {
    match parameters.keys().next() {
        None => Ok(()),
        Some(key) => Err(BackendError::invalid_parameter(format!(
            "unknown parameter {key:?}: the hostPath provisioner reads only the quota and access \
             mode parameters every class has"
        ))),
    }
}

impl HostPathProvisioner {
    /// Whether COSI may reach `bucket`: it exists, and its record (if any) is a COSI owner's or
    /// the operator's.
    async fn reachable(&self, bucket: &str) -> Result<(), BackendError> {
        let exists = self.store().bucket_exists(bucket).await.map_err(backend_error)?;
        let record = self.store().bucket_record(bucket).await.map_err(backend_error)?;
        if exists && cosi_may_use(record.as_ref().and_then(|r| r.creator.as_deref())) {
            return Ok(());
        }
        Err(BackendError::not_found(format!("bucket {bucket:?}")))
    }

    fn location(&self, bucket: &str) -> BucketLocation {
        BucketLocation { bucket_name: bucket.to_owned(), endpoint: self.endpoint() }
    }

    pub(crate) async fn create_own_bucket(
        &self,
        bucket: &NewBucket,
    ) -> Result<BucketLocation, BackendError> {
        no_parameters(&bucket.parameters)?;
        let (name, owner) = (&bucket.bucket_name, &bucket.owner_id);
        let creator = Creator { user_id: owner, delete_with_claim: true };
        self.store().create_bucket(name, creator).await.map_err(|e| match e {
            StoreError::NotOurs { bucket, .. } => BackendError::name_taken(&bucket),
            e => backend_error(e),
        })?;
        // Set again on a retry: the same value, no write.
        self.store()
            .set_bucket_quota(name, owner, quota(bucket.quotas))
            .await
            .map_err(backend_error)?;
        crash_point("cosi:bucket-created");
        Ok(self.location(name))
    }

    pub(crate) async fn delete_own_bucket(
        &self,
        bucket: &str,
        owner_id: &str,
    ) -> Result<Removed, BackendError> {
        let deleted = self.store().delete_bucket(bucket, owner_id).await.map_err(backend_error)?;
        crash_point("cosi:bucket-deleted");
        Ok(if deleted { Removed::Bucket } else { Removed::AccessOnly })
    }

    pub(crate) async fn revoke_own_key(&self, owner_id: &str) -> Result<(), BackendError> {
        self.store().revoke_keys(owner_id).await.map_err(backend_error)?;
        crash_point("cosi:key-revoked");
        Ok(())
    }

    pub(crate) async fn find_bucket(
        &self,
        bucket: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<BucketLocation, BackendError> {
        no_parameters(parameters)?;
        self.reachable(bucket).await?;
        Ok(self.location(bucket))
    }

    pub(crate) async fn issue_own_key(
        &self,
        request: &KeyRequest,
    ) -> Result<IssuedKey, BackendError> {
        no_parameters(&request.parameters)?;
        let [wanted] = request.buckets.as_slice() else {
            return Err(if request.buckets.is_empty() {
                BackendError::invalid_parameter("no bucket to issue a key for")
            } else {
                BackendError::multi_bucket_unsupported()
            });
        };
        let bucket = &wanted.bucket_name;
        self.reachable(bucket).await?;
        let mode = key_mode(wanted.access_mode);
        let web_identity = request.web_identity.as_ref().map(|told| WebIdentityAccess {
            subjects: told.subjects.clone(),
            max_session_secs: told.max_session_secs,
            sessions_only: told.sessions_only,
        });
        let issued = self
            .store()
            .issue_own_key(&request.owner_id, bucket, (mode, quota(request.quotas)), web_identity)
            .await
            .map_err(|e| match e {
                StoreError::NoSuchBucket(b) => BackendError::not_found(format!("bucket {b:?}")),
                e => backend_error(e),
            })?;
        crash_point("cosi:key-issued");
        match issued {
            // Sessions only: the key's secret is refused, so it is handed to no one.
            OwnKey::Issued(_) if request.web_identity.is_some() => Ok(IssuedKey {
                endpoint: self.endpoint(),
                credentials: Credentials {
                    access_key_id: String::new(),
                    secret_access_key: String::new(),
                },
                web_identity: Some(self.role_of(&request.owner_id)),
            }),
            OwnKey::Issued(key) => Ok(IssuedKey {
                endpoint: self.endpoint(),
                credentials: Credentials {
                    access_key_id: key.access_key_id,
                    secret_access_key: key.secret_access_key,
                },
                web_identity: None,
            }),
            OwnKey::Differs => Err(BackendError::access_conflict(&request.owner_id)),
        }
    }
}
