//! The runtime every controller of the project stands on. Nothing here knows a backend or a
//! side: the bucket side (`bucket-provisioner`) and the volume side (`volume-provisioner`) each
//! build their controller from these parts, and neither depends on the other.
//!
//! - [`watch`]: watches that outlive any apiserver failure.
//! - [`list_progress`]: when the caches hold their lists, and when to look at everything again.
//! - [`cache`]: what the watches keep, compacted, and the controller's own newer writes.
//! - [`events`]: Events, published through recorders that do not grow for ever.
//! - [`failure`], [`backoff`]: what a failure says of itself, and how it is retried;
//!   `waiting`: objects waiting on their backend, retried promptly once it answers again;
//!   `unwind`: a panic in the work on one object fails that object, not the process.
//! - [`finalizer`]: the one guarded way finalizers are added and removed.
//! - [`health`], [`telemetry`], [`log_limit`]: `/healthz` from the loops themselves, metrics,
//!   and logs of repeated failures once a minute.
//! - [`leader`], [`runtime`]: leader election and the supervision of every loop of a process.
//! - [`backend_error`]: what a failed backend call says of itself, for both sides.
//! - [`crash_point`]: for tests, the process stopped at a named step.

pub mod backend_error;
pub mod backoff;
pub mod cache;
pub mod crash_point;
pub mod events;
pub mod failure;
pub mod finalizer;
pub mod health;
pub mod leader;
pub mod list_progress;
pub mod log_limit;
#[cfg(test)]
mod mock_api;
pub mod runtime;
pub mod telemetry;
pub mod unwind;
pub mod waiting;
pub mod watch;

pub use backend_error::BackendError;
