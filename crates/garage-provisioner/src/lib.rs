//! Object buckets on a [Garage](https://garagehq.deuxfleurs.fr) cluster, with an access key per
//! claim and the Rook/NooBaa quota keys as bucket quotas.
//!
//! [`GarageProvisioner`] implements the library's [`Provisioner`](bucket_provisioner::Provisioner)
//! over Garage's admin API v2:
//!
//! | claim | what happens |
//! |---|---|
//! | new bucket | `CreateBucket` with the ownership record (below), then `AddBucketAlias` with the bucket's name; `UpdateBucket` for quotas; the claim's key (`ImportKey`) with read and write (`AllowBucketKey`) |
//! | StorageClass `bucketName` | `GetBucketInfo` (missing is a permanent error), then the claim's key |
//! | `maxObjects` / `maxSize` changed | `UpdateBucket` quotas of the claim's own bucket |
//! | `cors` / `bucketLifecycle` set or changed | `PutBucketCors` / `PutBucketLifecycleConfiguration` through S3 with the provisioner's key (deleted when the key goes) |
//! | deleted, bucket kept | `DeleteKey` of the claim's key |
//! | deleted, `Delete` policy, bucket created by the claim | the same, then the bucket emptied through S3 in passes, then `DeleteBucket` |
//!
//! # COSI
//!
//! Buckets with no key and keys of their own, for a COSI front, on the one cluster
//! [`GarageProvisioner::with_standalone`] names: see [`backend::standalone`]. A key may reach
//! several buckets, each in its own mode; a retry answers the same key.
//!
//! # Ownership
//!
//! See [`names`]: the claim that created a bucket, and its reclaim policy, are a local alias
//! of the bucket in the namespace of the provisioner's own key, which only the admin API writes
//! and no tenant ever holds. A bucket without that record for a claim is never deleted for it,
//! never has its quotas changed by it, and is never handed to a claim as its own.
//!
//! # Which cluster
//!
//! Each ObjectBucket records the identity of the Garage cluster holding its bucket (see
//! [`identity`]); deletion reaches that cluster through the StorageClass's endpoints as they are
//! then, and acts only where the identity matches.
//!
//! # StorageClass parameters
//!
//! | parameter | meaning |
//! |---|---|
//! | `adminEndpoint` | URL of Garage's admin API, or the URLs of several nodes' separated by commas, tried in turn (required; see [`endpoints`]) |
//! | `endpoint` | URL of Garage's S3 API as pods reach it (required): the claim's ConfigMap |
//! | `region` | Garage's `s3_region` (default `garage`) |
//! | `secretName`, `secretNamespace` | Secret with the admin token under `GARAGE_ADMIN_TOKEN` (required) |
//! | `bucketName` | an existing bucket to share (read by the library) |
//! | `allowCors` | `"true"`: claims may set their bucket's CORS rules (`cors`); default `"false"` |
//! | `allowLifecycle` | `"false"`: claims may not set lifecycle rules (`bucketLifecycle`); allowed by default |
//!
//! A claim's `additionalConfig` may hold the quota keys (see [`quota`]) and, for a bucket it
//! created, `cors` and `bucketLifecycle` (expiration and aborted uploads only; see
//! [`features`]). `versioning` and `objectLock`, which Garage lacks, are refused by name, and
//! so are the class parameters `defaultVersioning` and `defaultObjectLockRetention`.
//!
//! # Running
//!
//! The binary `garage-bucket-provisioner` answers to StorageClasses whose `provisioner` is
//! [`DEFAULT_PROVISIONER_NAME`] unless `--provisioner-name` says otherwise.

pub mod admin;
pub mod api;
pub mod backend;
pub mod cluster;
pub mod empty;
pub mod endpoints;
pub mod features;
pub mod identity;
pub mod names;
pub mod params;
pub mod quota;
pub mod store;
pub mod usage;

pub use backend::GarageProvisioner;
pub use cluster::{AdminToken, ClassParameters, KubeCluster};
pub use params::{SecretRef, Settings};

/// The StorageClass `provisioner` value the binary answers to unless told otherwise.
pub const DEFAULT_PROVISIONER_NAME: &str = "objectbucket.io/garage-bucket";

/// The COSI driver name the binary answers to unless `--cosi-driver-name` says otherwise.
pub const DEFAULT_COSI_DRIVER_NAME: &str = "garage.bucket-provisioner.io";
