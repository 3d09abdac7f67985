//! Object buckets on AWS S3 or an S3-compatible service, with an IAM user per claim.
//!
//! [`S3Provisioner`] implements the library's [`Provisioner`](bucket_provisioner::Provisioner):
//!
//! | claim | what happens |
//! |---|---|
//! | new bucket | `CreateBucket` in the region, tagged for the claim (a retry finds it again; a bucket of another account or claim is a permanent error), then the claim's IAM user |
//! | StorageClass `bucketName` | `HeadBucket` (missing is a permanent error), then the claim's IAM user |
//! | deleted, bucket kept | the claim's access keys, policies and user are deleted |
//! | deleted, `Delete` policy | the same, then every object version, delete marker and unfinished upload, then the bucket |
//!
//! The claim's IAM user is named after its stable user id, holds one inline policy that allows
//! only its bucket and the bucket's objects, and exactly one access key: a retry deletes keys of
//! earlier attempts (whose secrets were never delivered) and creates a fresh one, never a second
//! user. When any IAM step fails the claim is not bound; the owner's keys are handed to a claim
//! only when the StorageClass says `createBucketUser: "false"`.
//!
//! # COSI
//!
//! Buckets with no key and keys of their own, for a COSI front, on the one store
//! [`S3Provisioner::with_standalone`] names: see [`backend::standalone`]. A key is an IAM user
//! whose policy gives each of its buckets its own mode, and its secret is recorded
//! ([`key_records`], set with [`S3Provisioner::with_key_records`]) so that a repeated grant
//! answers the key in use instead of replacing it.
//!
//! # StorageClass parameters
//!
//! | parameter | meaning |
//! |---|---|
//! | `region` | region of the buckets (default `us-east-1`) |
//! | `secretName`, `secretNamespace` | Secret with the owner's `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`; without them the default AWS credential chain is used |
//! | `endpoint` | URL of an S3-compatible service instead of AWS |
//! | `iamEndpoint` | URL of its IAM API (default: `endpoint`, else AWS IAM) |
//! | `forcePathStyle` | `"true"` for `host/bucket` addressing |
//! | `createBucketUser` | `"true"` (default); `"false"` hands the owner's keys to claims (`"yes"`/`"no"` as well) |
//! | `bucketName` | an existing bucket to share (read by the library) |
//! | `bucketPolicyPrincipals` | principals a claim's `bucketPolicy` may name besides its own user |
//! | `webIdentityProvider`, `webIdentityAudience`, `stsEndpoint` | the cluster's IAM OIDC provider ARN, the audience of the ServiceAccounts' tokens (default `sts.amazonaws.com`) and the STS URL: claims may name ServiceAccounts that assume a role of the claim's own (see [`web_identity`]) |
//! | `allowCors` | `"true"`: claims may set their bucket's CORS rules (`cors`, see [`cors`]); default `"false"` |
//! | `allowVersioning`, `allowObjectLock`, `allowComplianceRetention`, `maxObjectLockRetentionDays`, `allowLifecycle` | what claims may ask of versioning, object lock and lifecycle rules (see [`bucket_provisioner::bucket::features::class`]) |
//! | `defaultVersioning`, `defaultObjectLockRetention` | what a claim of a bucket it creates gets when it leaves `versioning` out, or asks for `objectLock` without a retention (e.g. `GOVERNANCE:30d`, `COMPLIANCE:1y`), within what the class allows (see [`bucket_provisioner::bucket::features::defaults`]) |
//!
//! Anything else is refused (`InvalidParameters`). A claim's `additionalConfig` may hold a
//! `bucketPolicy` and, where the class allows them, `bucketLifecycle` (see [`lifecycle`]),
//! `cors`, `versioning` and `objectLock` (applied by the crate's `features` module; object lock
//! only when the bucket is created) for a bucket it created (see [`config`]); quota keys are
//! refused, since S3 has none, and so is any other key, by name.
//!
//! The ObjectBucket's `additionalState` keeps these settings (the Secret's name, never its keys)
//! with the IAM user and policy names, so cleanup works after the StorageClass is gone.
//!
//! # Running
//!
//! The binary `s3-bucket-provisioner` answers to StorageClasses whose `provisioner` is
//! [`DEFAULT_PROVISIONER_NAME`] (`objectbucket.io/s3-bucket`) unless `--provisioner-name` says
//! otherwise; see the book's S3 chapter (`docs/src/running/s3.md`) for flags and the owner's
//! permissions.
//!
//! # Owner credentials
//!
//! The backend never holds a Kubernetes client: it asks an [`OwnerCredentials`] for the keys in
//! the Secret a StorageClass names. The binary passes [`KubeCluster`], which reads the Secret with
//! its client; tests may pass anything.

mod aws;
pub mod backend;
pub mod bucket;
pub mod cluster;
pub mod config;
pub mod cors;
mod features;
pub mod iam;
mod iam_roles;
pub mod key_records;
pub mod legacy;
pub mod lifecycle;
pub mod owner;
pub mod params;
pub mod web_identity;

pub use backend::S3Provisioner;
pub use cluster::KubeCluster;
pub use key_records::{KeyRecords, KubeKeyRecords};
pub use owner::{ClassParameters, OwnerCredentials};
pub use params::{SecretRef, Settings};

/// The StorageClass `provisioner` value the binary answers to unless told otherwise.
pub const DEFAULT_PROVISIONER_NAME: &str = "objectbucket.io/s3-bucket";

/// The COSI driver name the binary answers to unless `--cosi-driver-name` says otherwise.
pub const DEFAULT_COSI_DRIVER_NAME: &str = "s3.bucket-provisioner.io";
