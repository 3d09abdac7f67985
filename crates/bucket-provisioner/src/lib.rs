//! The library a bucket backend depends on: implement [`Provisioner`] and run the controller;
//! a volume backend implements [`volume::VolumeProvisioner`] instead.
//!
//! - [`provisioner`]: the backend contract, with a guide for writing one.
//! - [`controller`]: the controller that drives a backend for every claim of its StorageClasses.
//! - [`usage`]: what bound buckets hold, as metrics and on their ObjectBuckets.
//! - [`volume`]: the volume side: [`volume::VolumeProvisioner`] and the controller that makes
//!   PersistentVolumes for PersistentVolumeClaims with it.
//! - [`runtime`]: flags, client, metrics, leader election, the supervision of every loop and
//!   shutdown for a backend's `main`, shared by both sides.
//! - [`health`]: `/healthz` derived from the loops themselves.

mod cache;
mod claim;
mod cleanup;
mod compact;
pub mod controller;
pub mod error;
mod finalizer;
pub mod health;
pub mod leader;
pub mod log_limit;
#[cfg(test)]
mod mock_api;
pub mod naming;
pub mod objects;
mod plan;
pub mod provisioner;
pub mod runtime;
pub mod status;
mod summary;
pub mod telemetry;
pub mod usage;
pub mod volume;
pub mod watch;

pub use bucket_api::BucketUsage;
pub use controller::{ControllerConfig, run_controller};
pub use error::Error;
pub use provisioner::{
    BUCKET_NAME_TAKEN, BackendError, BucketOptions, Credentials, Endpoint, ProvisionedBucket,
    Provisioner, Removed, user_id_for_claim, user_id_of,
};
