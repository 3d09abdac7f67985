//! A COSI driver (Container Object Storage Interface, `objectstorage.k8s.io`) in front of any
//! bucket [`Provisioner`](bucket_provisioner::Provisioner): v1alpha1 (as released in v0.2.2,
//! package `cosi.v1alpha1`) and v1alpha2 (package `sigs.k8s.io.cosi.v1alpha2`) served on one
//! unix socket, so one deployment works under whichever sidecar a cluster runs.
//!
//! # The calls
//!
//! | call | what it does |
//! |---|---|
//! | `DriverGetInfo` | the driver's name (v1alpha2: and S3 as its protocol) |
//! | `DriverCreateBucket` | a bucket named after the request's `name` (the Bucket object's), with no key; its id `<bucket>..<owner>` carries the owner recorded with it, derived from the name and the class's parameters |
//! | `DriverGetExistingBucket` (v1alpha2) | the operator's existing bucket, for static use; changes nothing |
//! | `DriverDeleteBucket` | the bucket, its data and keys, when the backend's record says this request's owner created it; a static bucket is never deleted |
//! | `DriverGrantBucketAccess` | a key of the access's own, with a mode per bucket (v1alpha1: the access class's `accessMode`); account id `cosi-a-…` from the access's name |
//! | `DriverRevokeBucketAccess` | that key, and only keys this driver issued |
//!
//! Every call may be repeated and answers the same without making anything new. The driver
//! keeps no state: what it needs later is in the ids it hands out or in the backend's records.
//! Class parameters are read as in [`params`]; secrets are never logged.
//!
//! # Status codes
//!
//! | code | when |
//! |---|---|
//! | `OK` | done, or done already |
//! | `INVALID_ARGUMENT` | a malformed name or id, a parameter refused (named), an authentication type other than Key, a protocol other than S3, a mode wider than the class allows |
//! | `ALREADY_EXISTS` | a bucket of that name exists with other parameters (or not of this driver); an access of that name exists with other buckets or modes |
//! | `NOT_FOUND` | a static bucket that does not exist, or that COSI may not reach (an objectbucket.io claim's) |
//! | `OUT_OF_RANGE` | several buckets for one access, where the backend's keys reach one bucket each |
//! | `PERMISSION_DENIED` | an access reaching a bucket made for a claim of another namespace ([`tenancy`]) |
//! | `UNAVAILABLE` | the backend or the Kubernetes API did not answer; retrying may succeed |
//! | `UNIMPLEMENTED` | the backend serves objectbucket.io claims only |
//!
//! # Files
//!
//! `proto/` holds the project's protocol definitions; [`proto`] their generated code;
//! [`v1alpha1`] and [`v1alpha2`] the services; [`calls`] what each call does; [`ids`] the ids
//! handed out; [`params`] class parameters; [`status`] errors and their codes; [`tenancy`] and
//! [`tenancy_kube`] who may reach which bucket; [`ready_repair`] the repair of v1alpha1 claims
//! whose readiness the upstream controller overwrote; [`server`] the socket; [`mod@run`] the
//! flags and run of a provisioner binary serving COSI.

pub mod calls;
pub mod ids;
pub mod params;
pub mod proto;
pub mod ready_repair;
pub mod run;
pub mod server;
pub mod status;
pub mod store_flags;
pub mod tenancy;
pub mod tenancy_kube;
pub mod v1alpha1;
pub mod v1alpha2;

pub use calls::{Driver, validate_driver_name};
pub use run::{CosiArgs, CosiRunError, run};
pub use server::{ServeError, bind, serve, serve_on, socket_path};
pub use status::CallError;
pub use tenancy::{Lookup, Version};
pub use tenancy_kube::KubeLookup;
