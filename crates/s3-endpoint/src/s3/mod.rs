//! The S3 endpoint pods use to reach their buckets.
//!
//! Requests are parsed and SigV4-verified by `s3s`; secrets come from the store's key records
//! and its operator credential ([`KeyAuth`]), and every request is authorized before any handler
//! runs ([`BucketAccess`]): a claim key only on the bucket(s) it was issued for, never for
//! CreateBucket or DeleteBucket; the operator key (see [`crate::admin`]) on everything. Bodies
//! are streamed between the socket and the files in both directions; no object is ever held
//! whole in memory (a PUT sent without a length is first written to an unnamed scratch file,
//! see `spool`). A large GET's body goes from its file to the socket in the kernel (`sendfile`,
//! see `zero_copy`).
//!
//! The jobs, a file each: `server` (the HTTP server and the service it runs), `auth` (keys and
//! who may do what), `convert` (between `s3s`'s types and the store's), `handlers` (the
//! operations, a file per family: buckets, ACLs, listings, objects, multipart uploads, object
//! tagging, bucket tagging, bucket CORS, bucket lifecycle, object lock, the public access
//! block), `object_lock_rules` (object lock headers and documents between the wire and the
//! store), `tags` (S3's rules for object and bucket tags, which tenants write),
//! `lifecycle_rules` (lifecycle documents between the wire and the store), `lifecycle` (the
//! worker running the store's lifecycle pass while the server runs), `cors_rules` (what CORS
//! rules may say, and which one a request matches), `cors` (the browser's preflight and the CORS
//! headers of cross-origin answers), `metrics` (answers by status class, registered by the
//! binary into the registry it serves).
//!
//! In front of `s3s`, [`Endpoint`] adds request ids and the request-time rules `s3s` leaves
//! out (SigV2 clock skew, the one-week limit of presigned URLs, SigV2 bucket-level resources),
//! answers CORS preflights (unsigned `OPTIONS`, which `s3s` does not route) and adds CORS
//! headers to cross-origin answers (`cors`), and unquotes GetObjectAttributes' ETag
//! (`attributes_etag`);
//! the `rules` module holds what sits between the wire and the store: checksums the client
//! sent, preconditions, the private-only ACLs and the refusal of server-side encryption.

mod attributes_etag;
mod auth;
mod body;
mod convert;
mod cors;
mod cors_rules;
mod front;
mod handlers;
mod lifecycle;
mod lifecycle_rules;
mod metrics;
mod object_lock_rules;
mod rules;
mod server;
mod spool;
mod tags;
mod zero_copy;

pub use auth::{BucketAccess, KeyAuth};
pub use front::{Endpoint, MAX_CLOCK_SKEW, MAX_PRESIGNED_EXPIRY_SECS, RequestId};
pub use handlers::HostPathS3;
pub use lifecycle::{DEFAULT_LIFECYCLE_BUDGET, DEFAULT_LIFECYCLE_INTERVAL, LifecycleSchedule};
pub use metrics::EndpointMetrics;
pub use server::{serve, serve_endpoint, service};

/// The error code of a write refused by a quota.
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";
