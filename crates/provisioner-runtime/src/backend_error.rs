//! What a failed backend call says of itself: whether only a change to the object can fix it, or
//! retrying later may. Both sides' backends answer with it, and both controllers read it the same
//! way (see [`crate::failure`]).

/// The reason of [`BackendError::name_taken`].
pub const BUCKET_NAME_TAKEN: &str = "BucketNameTaken";

/// A failed backend call, saying whether retrying can help.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// Only a change to the claim or StorageClass can fix this; the claim becomes `Failed`.
    #[error("{message}")]
    Permanent {
        /// CamelCase reason shown on the claim's condition and Event, e.g. `InvalidParameters`.
        reason: String,
        /// What is wrong and how to fix it, for a person.
        message: String,
    },
    /// Retrying later may succeed; the library backs off exponentially.
    #[error("{message}")]
    Transient {
        /// What failed, for a person.
        message: String,
    },
}

impl BackendError {
    /// An error that only a change to the claim or StorageClass can fix.
    pub fn permanent(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Permanent { reason: reason.into(), message: message.into() }
    }

    /// A permanent error for a StorageClass parameter or `additionalConfig` entry the backend
    /// cannot accept.
    pub fn invalid_parameter(message: impl Into<String>) -> Self {
        Self::permanent("InvalidParameters", message)
    }

    /// The bucket exists and was not created by this claim (or nothing records who created it).
    /// The message names nobody: the claim's tenant learns only that the name is not available.
    pub fn name_taken(bucket: &str) -> Self {
        Self::permanent(
            BUCKET_NAME_TAKEN,
            format!(
                "bucket name {bucket:?} is not available: a bucket of that name exists and was \
                 not created by this claim; choose another name"
            ),
        )
    }

    /// Whether this is [`BackendError::name_taken`].
    pub fn is_name_taken(&self) -> bool {
        matches!(self, Self::Permanent { reason, .. } if reason == BUCKET_NAME_TAKEN)
    }

    /// An error that retrying may fix.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::Transient { message: message.into() }
    }

    /// Whether retrying can help.
    pub fn is_permanent(&self) -> bool {
        matches!(self, Self::Permanent { .. })
    }
}
