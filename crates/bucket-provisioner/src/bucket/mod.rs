//! The bucket side: ObjectBucketClaims in, buckets, ObjectBuckets, Secrets and ConfigMaps out.
//!
//! - [`provisioner`]: the backend contract, with a guide for writing one; [`location`]: where a
//!   bucket is and the key to it, as backends answer.
//! - [`controller`]: the controller that drives a backend for every claim of its StorageClasses.
//!   Each of a claim's passes reads top to bottom as observe (what exists) → plan (every
//!   decision as data, no I/O) → apply (the backend calls and writes, in one place) → report
//!   (Events, and status from the outcome; [`status`], [`error`]):
//!   - a claim to bind, `provision`'s phases: the claim and nothing foreign under its names →
//!     the bucket, quotas and access mode it is given (`decide`) → intent recorded, the backend
//!     called, the ObjectBucket, Secret and ConfigMap written → Bound;
//!   - a bound claim, `bound`'s phases: its ObjectBucket and class → a lost bucket, withdrawn
//!     consent, repairs, the quotas and mode in force, the rotation policy → the backend calls
//!     and writes → Events and Bound (or back to `provision` to issue credentials again);
//!   - a claim going, `cleanup`'s phases: its record (the ObjectBucket, or what the claim
//!     recorded before the backend was called) → what becomes of the bucket and the
//!     ObjectBucket, from the backend's answer → the bucket deleted or access revoked, the
//!     ObjectBucket released or deleted → an Event.
//! - `sweep`, [`usage`], `probe`: the loops beside the controller: orphaned ObjectBuckets,
//!   what bound buckets hold, and whether backends claims wait on answer again.
//! - [`objects`], [`naming`], `ownership`: what is written, under which names, and the
//!   checks that keep the controller off what is not its claim's; `withdraw`: what a claim
//!   refused for a Secret or ConfigMap not its own gives back.
//! - [`features`]: bucket features claims ask for (versioning, object lock, lifecycle rules)
//!   and what their StorageClass allows of them, read alike for every backend.
//! - [`limits`]: what a StorageClass lets its claims ask for (quotas, access modes); quota
//!   values read as [`bucket_api::quantity`] says.
//! - [`rotation`]: a bound claim's key replaced by a new one, on demand or on a schedule
//!   after [`duration`]s written as Kubernetes writes them;
//!   [`sharing`]: a claim granted a key on the bucket of another claim of its namespace, and
//!   `cross_namespace`: of another namespace, when a `BucketShareGrant` there and its
//!   StorageClass consent (`consent` decides who may share what; `grant_rules` reads the grant
//!   as hostile input; `namespace_selector` the class's limit to namespaces of given labels).
//! - [`tenant_written`]: what a tenant wrote, a request the backend interprets and checks,
//!   never an address, a Secret's name or something to delete.
//! - [`standalone`]: buckets and keys on their own, for the COSI front.
//! - [`legacy`], `adoption`: a claim bound by a lib-bucket-provisioner provisioner of the same
//!   name, recognised and taken over in place.

pub(crate) mod adoption;
pub(crate) mod bound;
pub(crate) mod cleanup;
pub(crate) mod consent;
pub(crate) mod context;
pub mod controller;
pub(crate) mod cross_namespace;
pub mod duration;
pub mod error;
pub mod features;
pub(crate) mod grant_rules;
pub mod legacy;
pub mod limits;
pub mod location;
pub(crate) mod namespace_selector;
pub mod naming;
pub mod objects;
pub(crate) mod observe;
pub(crate) mod ownership;
pub(crate) mod parked;
pub(crate) mod plan;
pub(crate) mod probe;
pub(crate) mod provision;
pub mod provisioner;
pub mod remote;
pub mod rotation;
pub(crate) mod rotation_record;
pub mod run;
pub mod sharing;
pub(crate) mod sharing_index;
pub mod standalone;
pub mod status;
pub(crate) mod sweep;
pub mod tenant_written;
pub mod usage;
pub mod web_identity;
pub(crate) mod withdraw;
