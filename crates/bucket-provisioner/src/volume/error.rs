//! Everything that can go wrong with one volume claim or PersistentVolume.

use crate::BackendError;
use crate::kubernetes::failure::{Failure, Operation, Retry};

/// A failed reconcile of one claim or volume.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VolumeError {
    /// The claim's StorageClass is gone.
    #[error("StorageClass {0:?} not found; the claim waits until it exists")]
    StorageClassNotFound(String),
    /// The backend refused or failed.
    #[error("{operation} of volume {volume:?} failed: {source}")]
    Backend {
        /// What was attempted.
        operation: Operation,
        /// The PV's name.
        volume: String,
        /// What the backend said.
        source: BackendError,
    },
    /// The Kubernetes API failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl Failure for VolumeError {
    fn reason(&self) -> &str {
        match self {
            Self::StorageClassNotFound(_) => "StorageClassNotFound",
            Self::Backend { source: BackendError::Permanent { reason, .. }, .. } => reason,
            Self::Backend { operation, .. } => operation.failed_reason(),
            Self::Kube(_) => "KubernetesApiError",
        }
    }

    fn retry(&self) -> Retry {
        match self {
            Self::Backend { source, .. } if source.is_permanent() => Retry::OnChange,
            Self::Kube(_) => Retry::Api,
            _ => Retry::Backoff,
        }
    }

    fn api_error(&self) -> Option<&kube::Error> {
        match self {
            Self::Kube(e) => Some(e),
            _ => None,
        }
    }
}

/// Wraps a backend's answer to `operation` on `volume`.
pub(crate) fn backend(
    operation: Operation,
    volume: &str,
) -> impl FnOnce(BackendError) -> VolumeError + '_ {
    move |source| VolumeError::Backend { operation, volume: volume.to_owned(), source }
}
