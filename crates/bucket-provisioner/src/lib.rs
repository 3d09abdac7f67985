//! The bucket side: the library a bucket backend depends on. Implement [`Provisioner`] and run
//! the controller. (A volume backend depends on the `volume-provisioner` crate instead; both
//! sides stand on the `provisioner-runtime` crate, and neither depends on the other.)
//!
//! - [`bucket`]: the [`Provisioner`] contract (with a guide for writing one) and the controller
//!   that drives a backend for every claim of its StorageClasses.
//! - [`kubernetes`]: the runtime this side stands on (the `provisioner-runtime` crate): watches
//!   and their caches, Events, backoff and retry policy, the guarded finalizer write, health,
//!   metrics, leader election and the supervisor.
//! - [`runtime`]: what a backend's `main` calls.

pub mod bucket;
pub use provisioner_runtime as kubernetes;

/// Flags, client, logging and the supervised run of the bucket side, for a backend's `main`.
pub mod runtime {
    pub use crate::bucket::run::{run, serve_only};
    pub use crate::kubernetes::runtime::*;
}

pub use bucket::controller::{ControllerConfig, run_controller};
pub use bucket::error::Error;
pub use bucket::provisioner::{
    Adoption, BUCKET_NAME_TAKEN, BackendError, BucketOptions, Credentials, Endpoint,
    ProvisionedBucket, Provisioner, ROTATION_NOT_SUPPORTED, Removed, access_mode_of,
    user_id_for_claim, user_id_of,
};
pub use bucket::tenant_written::TenantWritten;
pub use bucket::web_identity::{WEB_IDENTITY_NOT_SUPPORTED, WebIdentity, WebIdentityOptions};
pub use bucket_api::{AccessMode, BucketUsage};
