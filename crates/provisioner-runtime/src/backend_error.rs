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

/// The reason of [`BackendError::access_conflict`].
pub const ACCESS_CONFLICT: &str = "AccessConflict";

/// The reason of [`BackendError::multi_bucket_unsupported`].
pub const MULTI_BUCKET_UNSUPPORTED: &str = "MultiBucketAccessUnsupported";

/// The reason of [`BackendError::not_found`].
pub const NOT_FOUND: &str = "NotFound";

/// Refusals of the calls a COSI front makes (see the bucket side's `standalone` module).
impl BackendError {
    /// A key of this owner exists with other buckets, modes or limits.
    pub fn access_conflict(owner_id: &str) -> Self {
        Self::permanent(
            ACCESS_CONFLICT,
            format!("access {owner_id:?} exists with other buckets, access modes or limits"),
        )
    }

    /// Whether this is [`BackendError::access_conflict`].
    pub fn is_access_conflict(&self) -> bool {
        self.has_reason(ACCESS_CONFLICT)
    }

    /// This backend's keys reach one bucket each.
    pub fn multi_bucket_unsupported() -> Self {
        Self::permanent(
            MULTI_BUCKET_UNSUPPORTED,
            "this backend's keys reach one bucket each; request access to one bucket per access",
        )
    }

    /// Whether this is [`BackendError::multi_bucket_unsupported`].
    pub fn is_multi_bucket_unsupported(&self) -> bool {
        self.has_reason(MULTI_BUCKET_UNSUPPORTED)
    }

    /// Nothing of that name exists (or nothing this front may reach: the message says no more).
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::permanent(NOT_FOUND, format!("{} not found", what.into()))
    }

    /// Whether this is [`BackendError::not_found`].
    pub fn is_not_found(&self) -> bool {
        self.has_reason(NOT_FOUND)
    }

    fn has_reason(&self, wanted: &str) -> bool {
        matches!(self, Self::Permanent { reason, .. } if reason == wanted)
    }
}
