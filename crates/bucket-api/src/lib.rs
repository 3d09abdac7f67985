//! The `objectbucket.io/v1alpha1` API: [`ObjectBucketClaim`] (namespaced), [`ObjectBucket`]
//! (cluster-scoped) and the constants of the consumer contract.
//!
//! The types are wire-compatible with the ObjectBucketClaim/ObjectBucket CRDs used across the
//! ecosystem, so manifests written for other provisioners apply unchanged, and the Secret and
//! ConfigMap keys that consuming pods read are exactly the established ones.

mod access;
pub mod contract;
mod crd;
mod object_bucket;
mod object_bucket_claim;
pub mod quantity;
mod share_grant;

pub use access::AccessMode;
pub use crd::{BUCKET_NAME_IMMUTABLE, CrdFile, STORAGE_CLASS_IMMUTABLE, crd_files};
pub use object_bucket::{
    BucketEndpoint, BucketUsage, ObjectBucket, ObjectBucketPhase, ObjectBucketSpec,
    ObjectBucketStatus, ReclaimPolicy,
};
pub use object_bucket_claim::{
    ClaimPhase, CredentialsStatus, ObjectBucketClaim, ObjectBucketClaimSpec,
    ObjectBucketClaimStatus,
};
pub use share_grant::{
    BucketShareGrant, BucketShareGrantSpec, BucketShareGrantStatus, GRANTEE_KIND, Grantee,
    MAX_GRANTEES, SHARING_GROUP,
};

/// The API group of both kinds.
pub const GROUP: &str = "objectbucket.io";
/// The API version of both kinds.
pub const VERSION: &str = "v1alpha1";
