//! The library a bucket backend depends on: implement [`Provisioner`] and run the controller;
//! a volume backend implements [`volume::VolumeProvisioner`] instead.
//!
//! Two peers stand on one core, and neither imports the other:
//!
//! - [`kubernetes`]: the core both sides stand on: resilient watches and their caches, Events,
//!   backoff and retry policy, the guarded finalizer write, health, metrics, leader election and
//!   the runtime that supervises every loop of a backend's `main`.
//! - [`bucket`]: the bucket side: the [`Provisioner`] contract (with a guide for writing one) and
//!   the controller that drives a backend for every claim of its StorageClasses.
//! - [`volume`]: the volume side: [`volume::VolumeProvisioner`] and the controller that makes
//!   PersistentVolumes for PersistentVolumeClaims with it.
//! - [`runtime`]: what a backend's `main` calls, for either side.

pub mod bucket;
pub mod kubernetes;
pub mod volume;

/// Flags, client, logging and the supervised run of either side, for a backend's `main`.
pub mod runtime {
    pub use crate::bucket::run::{run, serve_only};
    pub use crate::kubernetes::runtime::*;
    pub use crate::volume::run::run_volumes;
}

pub use bucket::controller::{ControllerConfig, run_controller};
pub use bucket::error::Error;
pub use bucket::provisioner::{
    BUCKET_NAME_TAKEN, BackendError, BucketOptions, Credentials, Endpoint, ProvisionedBucket,
    Provisioner, ROTATION_NOT_SUPPORTED, Removed, access_mode_of, user_id_for_claim, user_id_of,
};
pub use bucket_api::{AccessMode, BucketUsage};
