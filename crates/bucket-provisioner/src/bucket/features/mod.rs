//! Bucket features a claim asks for in its `additionalConfig`, read the same way by every
//! backend that offers them, with what its StorageClass allows:
//!
//! - [`versioning`]: `versioning: Enabled | Suspended`;
//! - [`object_lock`]: `objectLock`, enabled when the bucket is created, with an optional default
//!   retention (GOVERNANCE or COMPLIANCE, days or years);
//! - [`cors`]: `cors`, the JSON of S3's `put-bucket-cors`;
//! - [`lifecycle`]: `bucketLifecycle`, the JSON of S3's `PutBucketLifecycleConfiguration` as
//!   Rook's claims carry it, read into backend-neutral rules;
//! - [`class`]: the StorageClass parameters that allow or cap each (`allowVersioning`,
//!   `allowObjectLock`, `allowComplianceRetention`, `maxObjectLockRetentionDays`,
//!   `allowLifecycle`; `allowCors` is [`cors`]'s);
//! - [`defaults`]: the StorageClass parameters that give claims versioning
//!   (`defaultVersioning`) or an object lock retention (`defaultObjectLockRetention`) they do
//!   not ask for, within what the class allows. [`defaults::ClassDefaults::versioning`] and
//!   [`defaults::ClassDefaults::object_lock`] merge them with the claim's own values, so a
//!   backend applies one effective value; a backend without the feature refuses the parameter
//!   by name as it refuses the key.
//!
//! Parsing is strict: an unknown field or value is an `InvalidParameters` error naming the key
//! and what is wrong. Applying what was read is each backend's job; a backend that cannot apply
//! a feature refuses its key by name.

pub mod class;
pub mod cors;
pub mod defaults;
pub mod lifecycle;
pub mod object_lock;
pub mod versioning;
