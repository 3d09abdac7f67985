//! Object buckets as directories under a host path, served to pods over an embedded S3
//! endpoint with per-claim access keys.
//!
//! - [`store`]: bucket directories, objects and the durable record of owners and keys.
//! - [`s3`]: the S3 endpoint (`s3s`) over the store, authorized per key and bucket.
//! - [`backend`]: the [`bucket_provisioner::Provisioner`] creating buckets and keys in the store.
//! - [`quota`]: the quota keys of a claim's `additionalConfig`, enforced by the endpoint.
//! - [`admin`]: the optional operator credential that administers every bucket, and
//!   [`admin_secret`], which follows it from a Secret.
//! - [`prepare`]: handing the root to the provisioner's user, as the init container does.
//!
//! A binary opens one [`BucketStore`], optionally gives it an operator credential with
//! [`BucketStore::set_admin`], runs [`s3::serve`] on it and hands the same store to
//! [`HostPathProvisioner::new`] for the controller; the endpoint and the Secret's watch run as
//! services of the runtime, supervised with the controller.

pub mod admin;
pub mod admin_secret;
pub mod backend;
pub mod prepare;
pub mod quota;
pub mod s3;
pub mod store;

pub use admin::{AdminCredentials, AdminCredentialsError};
pub use backend::{HostPathConfig, HostPathProvisioner};
pub use s3::serve;
pub use store::{
    AccessKey, BucketRecord, BucketStore, Creator, OPERATOR_OWNER, Quota, StoreError, Usage, Writer,
};
