//! Object buckets as directories under a host path: the bucket provisioner's backend over the
//! S3 endpoint of the `s3-endpoint` crate, with one access key per claim.
//!
//! - [`backend`]: the [`bucket_provisioner::Provisioner`] creating buckets, keys and quotas in
//!   the endpoint's [`BucketStore`].
//! - [`cosi`]: buckets with no key and a key per access, for the COSI driver.
//! - [`quota`]: the quota keys of a claim's `additionalConfig`, enforced by the endpoint.
//! - [`cors`]: a claim's CORS rules (`additionalConfig` `cors`), where its class allows them.
//! - [`lifecycle`]: a claim's lifecycle rules (`additionalConfig` `bucketLifecycle`), where its
//!   class allows them (`allowLifecycle`), as the endpoint's lifecycle pass applies them.
//! - [`features`]: a claim's `versioning` and `objectLock`, where its class allows them, with
//!   the class's defaults (`defaultVersioning`, `defaultObjectLockRetention`).
//! - [`admin_secret`]: follows the operator credential ([`AdminCredentials`]) from a Secret.
//! - [`prepare`]: handing the root to the provisioner's user, as the init container does.
//! - [`service_accounts`]: ends the sessions of ServiceAccounts that are deleted.
//! - [`token_review`]: web identity tokens checked by the apiserver (`TokenReview`), for the
//!   endpoint's STS `AssumeRoleWithWebIdentity`, which gives a claim's ServiceAccounts
//!   short-lived credentials of its bucket.
//! - [`store_link`]: the store as the controller reaches it, in its own process or the
//!   endpoint's over a Unix socket; [`review_link`]: token reviews the other way.
//! - [`halves`]: the endpoint and the controller put together, in one process or two.
//!
//! A binary opens one [`BucketStore`], optionally gives it an operator credential with
//! [`BucketStore::set_admin`], runs the endpoint ([`s3_endpoint::s3::serve_endpoint`]) on it
//! and hands the same store to [`HostPathProvisioner::new`] for the controller; the endpoint and
//! the Secret's watch run as services of the runtime, supervised with the controller.
//!
//! Split in two, as `deploy/hostpath` runs it: `--serve-store` runs the endpoint alone, with no
//! Kubernetes client, owning the store and answering the controller's calls on a socket
//! ([`store_link::server`]); `--store-socket` runs the controller against that socket
//! ([`store_link::RemoteStore`]) and answers the endpoint's token reviews on another
//! ([`review_link`]), so that the process tenants talk to holds no credential.
//! With `--cosi-endpoint` the binary is also a COSI driver (the `cosi-driver` crate) over the
//! same backend, beside the controller or alone (`--cosi-only`).

pub mod admin_secret;
pub mod backend;
pub mod cors;
pub mod cosi;
pub mod features;
pub mod halves;
pub mod lifecycle;
pub mod prepare;
pub mod quota;
pub mod review_link;
pub mod service_accounts;
pub mod settable;
mod store_error;
pub mod store_link;
pub mod token_review;

pub use backend::{HostPathConfig, HostPathProvisioner};
pub use s3_endpoint::{
    AccessKey, AdminCredentials, AdminCredentialsError, BucketRecord, BucketStore, Creator,
    OPERATOR_OWNER, Quota, StoreError, Usage, Writer,
};
pub use store_link::StoreLink;

/// The COSI driver name the binary answers to unless `--cosi-driver-name` says otherwise.
pub const DEFAULT_COSI_DRIVER_NAME: &str = "hostpath.bucket-provisioner.io";
