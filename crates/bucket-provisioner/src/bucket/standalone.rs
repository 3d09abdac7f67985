//! Buckets and keys on their own, for a front that needs no ObjectBucketClaim: a bucket created
//! with no key, a key issued on one or more buckets with a mode each, each removed on its own.
//! This is what a COSI driver asks of a backend (see "COSI" in the
//! [backend guide](crate::bucket::provisioner)).
//!
//! Everything is named after owner ids the front derives from what the caller sends
//! ([`cosi_bucket_owner`], [`cosi_account_id`]), so a repeated call finds what an earlier one
//! made and the front keeps no state of its own. Those ids start with [`COSI_OWNER_PREFIX`];
//! an objectbucket.io claim's user id starts with `obc-` ([`crate::user_id_for_claim`]), so a
//! bucket recorded for one front never passes the other's ownership check.

use std::collections::BTreeMap;

use bucket_api::AccessMode;
use sha2::{Digest, Sha256};

use crate::bucket::location::{Credentials, Endpoint};
use crate::bucket::web_identity::{WebIdentity, WebIdentityOptions};
use provisioner_runtime::BackendError;
pub use provisioner_runtime::backend_error::{
    ACCESS_CONFLICT, MULTI_BUCKET_UNSUPPORTED, NOT_FOUND,
};

/// How every owner id of the COSI front starts; no claim's user id does.
pub const COSI_OWNER_PREFIX: &str = "cosi-";

/// The reason of the trait's default for every operation of this module.
pub const STANDALONE_NOT_SUPPORTED: &str = "StandaloneBucketsNotSupported";

/// Limits on what a bucket or a key stores; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quotas {
    /// Most objects.
    pub max_objects: Option<u64>,
    /// Most bytes.
    pub max_bytes: Option<u64>,
}

/// A bucket to create with no key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewBucket {
    /// The bucket's name, valid as an S3 bucket name and the same on every retry.
    pub bucket_name: String,
    /// Who creates it: record this with the bucket. A bucket of this name recorded for the same
    /// owner is a retry (succeed); for anyone else, or unrecorded, it is
    /// [`BackendError::name_taken`]. Starts with [`COSI_OWNER_PREFIX`], and also says which
    /// parameters the bucket was asked with, so "same name, other parameters" is a different
    /// owner.
    pub owner_id: String,
    /// Backend parameters (the class's, without those the front interprets); refuse unknown
    /// ones with [`BackendError::invalid_parameter`].
    pub parameters: BTreeMap<String, String>,
    /// Limits on everything the bucket holds.
    pub quotas: Quotas,
}

/// Where a bucket is, for a front that hands it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketLocation {
    /// The bucket's name.
    pub bucket_name: String,
    /// Where consumers reach it.
    pub endpoint: Endpoint,
}

/// One bucket a key reaches, and what it may do there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyBucket {
    /// The bucket.
    pub bucket_name: String,
    /// What the key may do in it (see "Access modes" in the
    /// [backend guide](crate::bucket::provisioner)).
    pub access_mode: AccessMode,
}

/// A key to issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRequest {
    /// Who holds the key ([`cosi_account_id`]): name users and keys after it. A retry with the
    /// same buckets and modes answers the same key; a key of this owner with other buckets or
    /// modes is [`BackendError::access_conflict`].
    pub owner_id: String,
    /// The buckets, at least one. A backend whose keys reach one bucket answers
    /// [`BackendError::multi_bucket_unsupported`] for more.
    pub buckets: Vec<KeyBucket>,
    /// Backend parameters of the access class; refuse unknown ones.
    pub parameters: BTreeMap<String, String>,
    /// Limits on what this key stores, in each bucket.
    pub quotas: Quotas,
    /// ServiceAccounts that get short-lived credentials of this key's buckets instead of its
    /// secret (a COSI v1alpha1 access of `authenticationType: IAM`); always
    /// [`WebIdentityOptions::sessions_only`]. A backend that cannot refuses with reason
    /// [`WEB_IDENTITY_NOT_SUPPORTED`](crate::WEB_IDENTITY_NOT_SUPPORTED), never issuing a key
    /// in its place.
    pub web_identity: Option<WebIdentityOptions>,
}

/// A key issued by [`crate::Provisioner::issue_key`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedKey {
    /// Where the buckets are reached.
    pub endpoint: Endpoint,
    /// The key (its `Debug` hides the secret); empty when sessions are the only way in.
    pub credentials: Credentials,
    /// The role the request's ServiceAccounts assume, and where, when it named any.
    pub web_identity: Option<WebIdentity>,
}

/// The owner id of a bucket the COSI front creates for the request `name` with `parameters`:
/// the same for the same request, different when any parameter differs.
pub fn cosi_bucket_owner(name: &str, parameters: &BTreeMap<String, String>) -> String {
    let mut hash = Sha256::new();
    hash.update(name.as_bytes());
    for (key, value) in parameters {
        // Lengths first, so no two different maps hash the same text.
        hash.update((key.len() as u64).to_be_bytes());
        hash.update(key.as_bytes());
        hash.update((value.len() as u64).to_be_bytes());
        hash.update(value.as_bytes());
    }
    format!("{COSI_OWNER_PREFIX}b-{}", &hex::encode(hash.finalize())[..24])
}

/// The owner id (and the COSI account id) of the key the COSI front issues for the access
/// `name`: short enough for any backend's user names, the same on every retry.
pub fn cosi_account_id(name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    format!("{COSI_OWNER_PREFIX}a-{}", &hex::encode(digest)[..24])
}

/// Refuses an owner id that is not the COSI front's: another could name a claim's user, key or
/// bucket record. Every backend checks it before acting on a COSI call.
pub fn cosi_owner(owner_id: &str) -> Result<(), BackendError> {
    match owner_id.starts_with(COSI_OWNER_PREFIX) {
        true => Ok(()),
        false => Err(BackendError::invalid_parameter(format!(
            "owner id {owner_id:?} is not a COSI owner id (they start with {COSI_OWNER_PREFIX:?})"
        ))),
    }
}

/// The reason of [`not_configured`].
pub const STANDALONE_NOT_CONFIGURED: &str = "StandaloneNotConfigured";

/// A backend serving several stores was started without one for the COSI front; `what` says
/// which backend and what store, e.g. "this S3 provisioner was started without a store".
pub fn not_configured(what: &str) -> BackendError {
    BackendError::permanent(STANDALONE_NOT_CONFIGURED, format!("{what} for COSI buckets and keys"))
}

/// Whether a bucket whose record names `creator` may be reached through the COSI front: one a
/// COSI owner created, or one nobody's record claims (made by an operator). A claim's bucket
/// never is.
pub fn cosi_may_use(creator: Option<&str>) -> bool {
    creator.is_none_or(|c| c.starts_with(COSI_OWNER_PREFIX))
}

/// The default of every operation of this module: a permanent refusal.
pub(crate) fn standalone_not_supported() -> BackendError {
    BackendError::permanent(
        STANDALONE_NOT_SUPPORTED,
        "this backend serves objectbucket.io claims only: it cannot create buckets or keys on \
         their own (COSI)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_ids_follow_their_inputs_and_never_look_like_a_claim() {
        let p = |pairs: &[(&str, &str)]| {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let a = cosi_bucket_owner("b1", &p(&[("maxSize", "1Gi")]));
        assert_eq!(a, cosi_bucket_owner("b1", &p(&[("maxSize", "1Gi")])));
        assert_ne!(a, cosi_bucket_owner("b1", &p(&[("maxSize", "2Gi")])));
        assert_ne!(a, cosi_bucket_owner("b2", &p(&[("maxSize", "1Gi")])));
        assert_ne!(
            cosi_bucket_owner("b", &p(&[("ab", "c")])),
            cosi_bucket_owner("b", &p(&[("a", "bc")]))
        );
        assert!(a.starts_with(COSI_OWNER_PREFIX) && cosi_account_id("ba-1").starts_with("cosi-a-"));
        assert!(!crate::user_id_for_claim("x").starts_with(COSI_OWNER_PREFIX));
        assert!(cosi_may_use(None) && cosi_may_use(Some(&a)));
        assert!(!cosi_may_use(Some(&crate::user_id_for_claim("u"))));
    }

    #[test]
    fn errors_are_told_apart() {
        assert!(BackendError::access_conflict("a").is_access_conflict());
        assert!(BackendError::multi_bucket_unsupported().is_multi_bucket_unsupported());
        assert!(BackendError::not_found("bucket \"x\"").is_not_found());
        assert!(!BackendError::not_found("x").is_access_conflict());
    }
}
