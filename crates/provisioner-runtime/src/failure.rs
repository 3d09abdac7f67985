//! What every failure of a reconcile says about itself, on either side: its reason, whether
//! (and how soon) retrying can help, and the backend operation it came from.

use std::fmt;

use crate::health::{Health, refusal};
use crate::telemetry::Metrics;

/// A backend operation, for messages, Events and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `provision`, of either side's backend.
    Provision,
    /// `Provisioner::grant`.
    Grant,
    /// `Provisioner::update`.
    Update,
    /// `delete`, of either side's backend.
    Delete,
    /// `Provisioner::revoke`.
    Revoke,
    /// `Provisioner::rotate` and
    /// `Provisioner::retire_key`.
    Rotate,
}

impl Operation {
    /// Lower-case name, as used in metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provision => "provision",
            Self::Grant => "grant",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Revoke => "revoke",
            Self::Rotate => "rotate",
        }
    }

    /// The reason of an Event or condition saying this operation failed.
    pub fn failed_reason(self) -> &'static str {
        match self {
            Self::Provision => "ProvisionFailed",
            Self::Grant => "GrantFailed",
            Self::Update => "UpdateFailed",
            Self::Delete => "DeleteFailed",
            Self::Revoke => "RevokeFailed",
            Self::Rotate => "RotationFailed",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a failed reconcile is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Soon, with exponential backoff: the cause may pass by itself.
    Backoff,
    /// Soon, with exponential backoff capped at a few seconds: the Kubernetes API failed, and a
    /// restarted or overloaded apiserver answers again within seconds; claims must not wait
    /// minutes after it does.
    Api,
    /// At the backoff cap: another object is in the way, and its removal is not watched.
    Slowly,
    /// Not until the claim changes: only the user can fix it.
    OnChange,
}

/// A failed reconcile, as both controllers report it.
pub trait Failure: fmt::Display {
    /// The CamelCase reason used on conditions, Events and metrics.
    fn reason(&self) -> &str;
    /// How the object is retried after this failure.
    fn retry(&self) -> Retry;
    /// The Kubernetes API error behind it, if that is what failed.
    fn api_error(&self) -> Option<&kube::Error>;
    /// Whether only a change by a person can fix this.
    fn is_permanent(&self) -> bool {
        !matches!(self.retry(), Retry::Backoff | Retry::Api)
    }
}

/// Counts `failure` by its reason, and tells `health` when the API refused `source` (the loop
/// reporting it) rather than failed it.
pub fn count(failure: &impl Failure, metrics: &Metrics, health: &Health, source: &str) {
    metrics.error(failure.reason());
    if let Some(what) = failure.api_error().and_then(refusal) {
        health.denied(source, &what);
    }
}
