//! Everything that can go wrong with one volume claim or PersistentVolume.

use provisioner_runtime::BackendError;
use provisioner_runtime::failure::{Failure, Operation, Retry};

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
    /// The work on this object hit a defect of the provisioner (it panicked); only this object
    /// failed, and it is tried again when it changes.
    #[error(
        "the provisioner failed on this object with an internal error ({0}); other objects are \
         not affected. Change it to try again, and report the error"
    )]
    Panicked(String),
}

impl Failure for VolumeError {
    fn reason(&self) -> &str {
        match self {
            Self::StorageClassNotFound(_) => "StorageClassNotFound",
            Self::Backend { source: BackendError::Permanent { reason, .. }, .. } => reason,
            Self::Backend { operation, .. } => operation.failed_reason(),
            Self::Kube(_) => "KubernetesApiError",
            Self::Panicked(_) => "InternalError",
        }
    }

    fn retry(&self) -> Retry {
        match self {
            Self::Backend { source, .. } if source.is_permanent() => Retry::OnChange,
            Self::Kube(_) => Retry::Api,
            Self::Panicked(_) => Retry::OnChange,
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
