//! An S3 endpoint over buckets kept as plain directories under one root, with one access key per
//! user, access modes and quotas. It knows nothing of Kubernetes: the hostPath bucket provisioner
//! (`crates/hostpath-provisioner`) creates the buckets and keys here for its claims, and a
//! binary serves the endpoint beside its controller.
//!
//! - [`store`]: bucket directories, objects (with their metadata and tags), multipart uploads,
//!   buckets' CORS and lifecycle rules, the lifecycle pass that applies the latter, object lock
//!   (retention and legal holds, refusing the removal of protected objects by any key), usage
//!   meters and the durable record of owners and keys.
//! - [`s3`]: the S3 endpoint (`s3s`) over the store, authorized per key and bucket; object
//!   tagging, bucket CORS with the browser's preflight answered in front of `s3s`, bucket
//!   lifecycle, applied by a worker the server runs ([`s3::LifecycleSchedule`]), and object
//!   lock (buckets created with it, their default retention, objects' retention and legal
//!   holds).
//! - [`admin`]: the optional operator credential that administers every bucket.
//! - [`sts`]: `AssumeRoleWithWebIdentity`, trading a web identity token (a pod's ServiceAccount
//!   token, checked by an [`sts::IdentityVerifier`] the binary gives) for a short-lived session
//!   key of a claim's role.
//!
//! A binary opens one [`BucketStore`], optionally gives it an operator credential with
//! [`BucketStore::set_admin`], and runs [`s3::serve`] (or [`s3::serve_endpoint`] on a
//! [`s3::service`]) on it; whoever provisions buckets holds the same store, and may set a
//! bucket's rules itself ([`BucketStore::set_bucket_cors`], [`BucketStore::set_bucket_lifecycle`],
//! [`BucketStore::enable_object_lock`] right after creating it,
//! [`BucketStore::set_object_lock_default`], and the [`RetentionCeiling`] its claims' keys are
//! held to, [`BucketStore::set_retention_ceiling`]).
//!
//! Its S3 answers are tested through two real clients, the AWS SDK for Rust and boto3
//! (`tests/boto3_client.rs`, with the scripts of `tests/boto3/`).

pub mod admin;
pub mod s3;
pub mod store;
pub mod sts;

pub use admin::{AdminCredentials, AdminCredentialsError};
pub use s3::serve;
pub use store::{
    AccessKey, BucketRecord, BucketStore, Creator, OPERATOR_OWNER, Quota, RetentionCeiling,
    StoreError, Usage, Writer,
};
