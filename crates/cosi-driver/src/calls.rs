//! What each call does, the same under both versions: each version's service only translates
//! its messages to and from these.

use std::collections::BTreeMap;
use std::sync::Arc;

use bucket_api::AccessMode;
use bucket_provisioner::Provisioner;
use bucket_provisioner::WebIdentityOptions;
use bucket_provisioner::bucket::naming::validate_bucket_name;
use bucket_provisioner::bucket::standalone::{
    BucketLocation, IssuedKey, KeyBucket, KeyRequest, NewBucket, cosi_account_id, cosi_bucket_owner,
};
use bucket_provisioner::bucket::web_identity::subject;
use tracing::info;

/// The longest session of an access's ServiceAccount: an hour, as AWS's STS gives by default.
const DEFAULT_MAX_SESSION_SECS: u32 = 3600;

use crate::ids::{BucketId, created_bucket_id, parse_account_id, parse_bucket_id};
use crate::params::{access_params, bucket_params};
use crate::status::CallError;
use crate::tenancy::{self, Lookup, LookupError, Version, check};

/// A bucket the driver created or found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketAnswer {
    /// The id the sidecar hands back later.
    pub bucket_id: String,
    /// Where the bucket is.
    pub location: BucketLocation,
}

/// A key issued for an access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantAnswer {
    /// The id the sidecar hands back to revoke.
    pub account_id: String,
    /// The request's bucket ids with each bucket's name, in the order asked.
    pub buckets: Vec<(String, String)>,
    /// The key (its `Debug` hides the secret).
    pub key: IssuedKey,
}

/// How the access authenticates, as the request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// A key: what every backend issues.
    Key,
    /// An identity of the pod (IAM or a ServiceAccount): not served.
    Identity,
    /// Not said.
    Unknown,
}

/// The driver: a backend, its COSI name and (optionally) the tenancy lookup.
pub struct Driver<P> {
    backend: Arc<P>,
    name: String,
    lookup: Option<Arc<dyn Lookup>>,
}

/// Checks a driver name as COSI wants it: at most 63 characters of letters, digits, `-` and
/// `.`, starting and ending with a letter or digit.
pub fn validate_driver_name(name: &str) -> Result<(), String> {
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let body_ok = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if name.len() <= 63 && body_ok && edge_ok(name.chars().next()) && edge_ok(name.chars().last()) {
        return Ok(());
    }
    Err(format!(
        "driver name {name:?} must be at most 63 letters, digits, '-' or '.', starting and \
         ending with a letter or digit"
    ))
}

impl<P: Provisioner> Driver<P> {
    /// A driver named `name` (see [`validate_driver_name`]) in front of `backend`, with no
    /// tenancy lookup.
    pub fn new(backend: Arc<P>, name: impl Into<String>) -> Result<Self, String> {
        let name = name.into();
        validate_driver_name(&name)?;
        Ok(Self { backend, name, lookup: None })
    }

    /// The same driver checking every grant against the cluster's objects.
    pub fn with_lookup(self, lookup: Arc<dyn Lookup>) -> Self {
        Self { lookup: Some(lookup), ..self }
    }

    /// The driver's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Creates the bucket `name` (the Bucket object's name) with the class's parameters.
    pub async fn create_bucket(
        &self,
        name: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<BucketAnswer, CallError> {
        validate_bucket_name(name).map_err(|why| {
            CallError::InvalidArgument(format!(
                "name {name:?}: the bucket is named after it, and {why}"
            ))
        })?;
        let params = bucket_params(parameters)?;
        let owner_id = cosi_bucket_owner(name, parameters);
        let request = NewBucket {
            bucket_name: name.to_owned(),
            owner_id: owner_id.clone(),
            parameters: params.backend,
            quotas: params.quotas,
        };
        let location = self.backend.create_bucket(&request).await?;
        info!(bucket = name, "bucket created (or found created by an earlier call)");
        Ok(BucketAnswer { bucket_id: created_bucket_id(name, &owner_id), location })
    }

    /// Finds the operator's existing bucket `id` (its name) for static use.
    pub async fn existing_bucket(
        &self,
        id: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<BucketAnswer, CallError> {
        let parsed = parse_bucket_id("existing_bucket_id", id)?;
        // A static Bucket holding a created bucket's id would delete that bucket when it goes.
        if !parsed.is_static() {
            return Err(CallError::InvalidArgument(format!(
                "existing_bucket_id {id:?} is the id of a bucket this driver created; name a \
                 static bucket by its bucket name ({:?}), so that deleting the Bucket object \
                 never deletes the bucket",
                parsed.bucket()
            )));
        }
        let params = bucket_params(parameters)?;
        if params.quotas != Default::default() {
            return Err(CallError::InvalidArgument(
                "quota parameters are set when a bucket is created, not on an existing one"
                    .to_owned(),
            ));
        }
        let location = self.backend.existing_bucket(parsed.bucket(), &params.backend).await?;
        Ok(BucketAnswer { bucket_id: id.to_owned(), location })
    }

    /// Deletes a bucket this driver created, unless the claim it was made for still lives (see
    /// [`tenancy::check_deletion`]); a static bucket is never deleted.
    pub async fn delete_bucket(&self, version: Version, id: &str) -> Result<(), CallError> {
        match parse_bucket_id("bucket_id", id)? {
            BucketId::Created { bucket, owner } => {
                tenancy::check_deletion(self.lookup.as_deref(), version, &bucket).await?;
                let removed = self.backend.delete_bucket(&bucket, &owner).await?;
                info!(bucket, ?removed, "bucket deletion answered");
            }
            BucketId::Existing { bucket } => {
                info!(bucket, "static bucket left as it is");
            }
        }
        Ok(())
    }

    /// Issues the key of the access `account_name` on `buckets` (each id with the mode asked,
    /// `None` under v1alpha1, which asks none).
    pub async fn grant(
        &self,
        version: Version,
        account_name: &str,
        auth: Auth,
        buckets: &[(String, Option<AccessMode>)],
        parameters: &BTreeMap<String, String>,
    ) -> Result<GrantAnswer, CallError> {
        if account_name.is_empty() {
            return Err(CallError::InvalidArgument("the access's name is empty".to_owned()));
        }
        match (auth, version) {
            (Auth::Key, _) | (Auth::Identity, Version::V1alpha1) => {}
            (Auth::Identity, Version::V1alpha2) => {
                return Err(CallError::InvalidArgument(
                    "authenticationType IAM: v1alpha2 names no ServiceAccount for the access, so \
                     it gets a key (Key); v1alpha1 accesses of IAM name theirs"
                        .to_owned(),
                ));
            }
            (Auth::Unknown, _) => {
                return Err(CallError::InvalidArgument(
                    "authenticationType is not set; use Key".to_owned(),
                ));
            }
        }
        if buckets.is_empty() {
            return Err(CallError::InvalidArgument("the request names no bucket".to_owned()));
        }
        let params = access_params(parameters, version == Version::V1alpha2)?;
        let mut ids = Vec::with_capacity(buckets.len());
        let mut wanted = Vec::with_capacity(buckets.len());
        for (id, asked) in buckets {
            let parsed = parse_bucket_id("bucket_id", id)?;
            let access_mode = match asked {
                Some(mode) => params.mode_for(*mode)?,
                None => params.mode,
            };
            wanted.push(KeyBucket { bucket_name: parsed.bucket().to_owned(), access_mode });
            ids.push(parsed);
        }
        // The sidecar lists buckets in any order: the same set must make the same request.
        wanted.sort_by(|a, b| a.bucket_name.cmp(&b.bucket_name));
        if wanted.windows(2).any(|pair| pair[0].bucket_name == pair[1].bucket_name) {
            return Err(CallError::InvalidArgument("a bucket is named twice".to_owned()));
        }
        check(self.lookup.as_deref(), version, account_name, &ids).await?;
        let web_identity = match auth {
            Auth::Identity => Some(self.service_account_of(account_name).await?),
            Auth::Key | Auth::Unknown => None,
        };
        let owner_id = cosi_account_id(account_name);
        let request = KeyRequest {
            owner_id: owner_id.clone(),
            buckets: wanted,
            parameters: params.backend,
            quotas: params.quotas,
            web_identity,
        };
        let key = self.backend.issue_key(&request).await?;
        info!(account = account_name, account_id = owner_id, "access granted");
        let buckets = buckets
            .iter()
            .zip(&ids)
            .map(|((id, _), parsed)| (id.clone(), parsed.bucket().to_owned()))
            .collect();
        Ok(GrantAnswer { account_id: owner_id, buckets, key })
    }

    /// Revokes the key of `account_id` (an owner id, or the role ARN an access of
    /// `authenticationType: IAM` was answered with, whose role is named by the owner id).
    pub async fn revoke(&self, account_id: &str) -> Result<(), CallError> {
        let owner_id = account_id
            .rsplit_once(":role/")
            .map_or(account_id, |(_, role)| role.rsplit('/').next().unwrap_or(role));
        parse_account_id("account_id", owner_id)?;
        self.backend.revoke_key(owner_id).await?;
        info!(account_id, "access revoked");
        Ok(())
    }

    /// What a v1alpha1 access of `authenticationType: IAM` lets in: the ServiceAccount its
    /// BucketAccess names, in the access's own namespace, read from the object (tenants write
    /// the name, never the namespace), with sessions as the only way in.
    async fn service_account_of(
        &self,
        account_name: &str,
    ) -> Result<WebIdentityOptions, CallError> {
        let Some(lookup) = self.lookup.as_deref() else {
            return Err(CallError::Unimplemented(
                "authenticationType IAM needs the driver's Kubernetes lookup to read the \
                 access's ServiceAccount; it has none"
                    .to_owned(),
            ));
        };
        let (namespace, account) =
            lookup.service_account(account_name).await.map_err(|e| match e {
                LookupError::Missing(what) => CallError::PermissionDenied(what),
                LookupError::Api(why) => CallError::Unavailable(format!("Kubernetes API: {why}")),
            })?;
        Ok(WebIdentityOptions {
            subjects: vec![subject(&namespace, &account)],
            max_session_secs: DEFAULT_MAX_SESSION_SECS,
            sessions_only: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names_follow_the_spec() {
        for good in ["hostpath.bucket-provisioner.io", "a", "a-1.b"] {
            assert!(validate_driver_name(good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "a.", "a_b", &"a".repeat(64)] {
            assert!(validate_driver_name(bad).is_err(), "{bad}");
        }
    }
}
