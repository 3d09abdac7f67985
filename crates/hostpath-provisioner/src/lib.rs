//! Object buckets as directories under a host path, served to pods over an embedded S3
//! endpoint with per-claim access keys.
//!
//! - [`store`]: bucket directories, objects and the durable record of owners and keys.
//! - [`s3`]: the S3 endpoint (`s3s`) over the store, authorized per key and bucket.
//! - [`backend`]: the [`bucket_provisioner::Provisioner`] creating buckets and keys in the store.
//!
//! A binary opens one [`BucketStore`], runs [`s3::serve`] on it and hands the same store to
//! [`HostPathProvisioner::new`] for the controller.

pub mod backend;
pub mod s3;
pub mod store;

pub use backend::{HostPathConfig, HostPathProvisioner};
pub use s3::serve;
pub use store::{AccessKey, BucketRecord, BucketStore, StoreError};
