//! Everything that can go wrong with one claim, each with the reason shown on its condition and
//! Event and whether (and how soon) retrying can help.

use crate::BackendError;
pub use crate::kubernetes::failure::{Failure, Operation, Retry};

/// A failed reconcile of one claim.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The claim's StorageClass does not exist (yet).
    #[error("StorageClass {0:?} not found; the claim waits until it exists")]
    StorageClassNotFound(String),
    /// The StorageClass cannot be used.
    #[error("StorageClass {class:?}: {message}")]
    InvalidStorageClass {
        /// The StorageClass.
        class: String,
        /// What is wrong with it.
        message: String,
    },
    /// Neither `bucketName` nor `generateBucketName` is set.
    #[error(
        "the claim sets neither spec.bucketName nor spec.generateBucketName, and its StorageClass \
         names no existing bucket; set one of them"
    )]
    BucketNameMissing,
    /// `spec.bucketName` is not a valid S3 bucket name.
    #[error("spec.bucketName: {0}")]
    InvalidBucketName(String),
    /// `spec.generateBucketName` cannot make a valid S3 bucket name.
    #[error("spec.generateBucketName: {0}")]
    InvalidGenerateBucketName(String),
    /// The claim names a bucket other than the one its StorageClass grants.
    #[error(
        "spec.bucketName {claim:?} differs from bucket {class:?} named by the StorageClass; \
         remove spec.bucketName or use a StorageClass without bucketName"
    )]
    BucketNameConflict {
        /// The claim's bucket name.
        claim: String,
        /// The StorageClass's bucket name.
        class: String,
    },
    /// The claim asks for more than its StorageClass allows (a quota or an access mode).
    #[error(
        "the claim asks for more than StorageClass {class:?} allows: {message}; ask for less \
         (or drop the key to get the class's default), or use another StorageClass"
    )]
    ExceedsClassLimit {
        /// The StorageClass.
        class: String,
        /// Which limits, by parameter name and value.
        message: String,
    },
    /// `shareFrom` names no claim whose bucket this claim may share. The same words whatever
    /// the reason, so that nothing is learnt about other claims or namespaces.
    #[error(
        "additionalConfig shareFrom {0:?}: no claim of that name has a bucket of its own that \
         this claim may share (it must exist, be Bound and have created its bucket; in another \
         namespace, that namespace must grant this claim access and its StorageClass allow it)"
    )]
    ShareSourceNotFound(String),
    /// The consent this claim shared a bucket of another namespace under was withdrawn (the
    /// grant deleted or narrowed, or the operator's class no longer allowing it).
    #[error(
        "additionalConfig shareFrom {0:?}: access was withdrawn by the bucket's namespace or \
         its StorageClass; this claim's key is revoked. It binds again, with a new key, once \
         access is granted again"
    )]
    ShareWithdrawn(String),
    /// The StorageClass of the claim `shareFrom` names in another namespace, which lets this
    /// claim in otherwise, limits sharing to namespaces of given labels with a selector that
    /// cannot be read: nothing is shared until its operator corrects it. Told only to a claim
    /// the owner's grant lets in, so that it teaches nobody else anything.
    #[error(
        "additionalConfig shareFrom {share_from:?}: StorageClass {class:?} of that claim cannot          be read: {message}; nothing of it is shared across namespaces until its operator          corrects it"
    )]
    ShareClassInvalid {
        /// The claim's `shareFrom`.
        share_from: String,
        /// The owning claim's StorageClass.
        class: String,
        /// What is wrong with it.
        message: String,
    },
    /// The bucket this claim shared went with the claim it was shared from.
    #[error(
        "bucket {0:?} was deleted with the claim it was shared from; this claim's key is revoked. \
         Delete this claim"
    )]
    BucketLost(String),
    /// A value of the claim's `additionalConfig` that the library reads is malformed.
    #[error("additionalConfig {0}")]
    InvalidAdditionalConfig(String),
    /// The bucket name of a bound claim was changed.
    #[error(
        "the claim is bound to bucket {bound:?}; spec.bucketName cannot change to {requested:?}"
    )]
    BucketNameImmutable {
        /// The bound bucket.
        bound: String,
        /// The requested name.
        requested: String,
    },
    /// The StorageClass of a bound claim was changed.
    #[error(
        "the claim is bound through StorageClass {bound:?}; spec.storageClassName cannot change \
         to {requested:?}"
    )]
    StorageClassImmutable {
        /// The StorageClass the claim was bound through.
        bound: String,
        /// The requested StorageClass.
        requested: String,
    },
    /// Both names the claim's ObjectBucket may have are bound to other claims.
    #[error(
        "ObjectBucket {name:?} already exists for another claim (uid {other_uid}), and so does \
         the conventional name; delete it or give this claim another name"
    )]
    ObjectBucketConflict {
        /// The ObjectBucket.
        name: String,
        /// UID of the claim it belongs to.
        other_uid: String,
    },
    /// A Secret with the claim's name exists and is not this claim's.
    #[error("Secret {0:?} exists and does not belong to this claim; it is left untouched")]
    ForeignSecret(String),
    /// A ConfigMap with the claim's name exists and is not this claim's.
    #[error("ConfigMap {0:?} exists and does not belong to this claim; it is left untouched")]
    ForeignConfigMap(String),
    /// The backend refused or failed an operation.
    #[error("{operation} of bucket {bucket:?} failed: {source}{hint}")]
    Backend {
        /// What was attempted.
        operation: Operation,
        /// The bucket.
        bucket: String,
        /// What the backend said.
        source: BackendError,
        /// How to get out, where there is a way.
        hint: &'static str,
    },
    /// The Kubernetes API failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The work on this claim hit a defect of the provisioner (it panicked); only this claim
    /// failed, and it is tried again when it changes.
    #[error(
        "the provisioner failed on this claim with an internal error ({0}); other claims are \
         not affected. Change the claim to try again, and report the error"
    )]
    Panicked(String),
}

/// Shown after a cleanup failure, so nobody is left with a claim stuck for ever.
pub(crate) const ABANDON_HINT: &str = "; retrying with backoff. To finish deleting the claim and \
    leave the bucket as it is, annotate the claim with objectbucket.io/abandon-bucket=true";

impl Failure for Error {
    fn reason(&self) -> &str {
        match self {
            Self::StorageClassNotFound(_) => "StorageClassNotFound",
            Self::InvalidStorageClass { .. } => "InvalidStorageClass",
            Self::BucketNameMissing => "BucketNameMissing",
            Self::InvalidBucketName(_) => "InvalidBucketName",
            Self::InvalidGenerateBucketName(_) => "InvalidGenerateBucketName",
            Self::BucketNameConflict { .. } => "BucketNameConflict",
            Self::ExceedsClassLimit { .. } => "ExceedsClassLimit",
            Self::InvalidAdditionalConfig(_) => "InvalidParameters",
            Self::ShareSourceNotFound(_) => "ShareSourceNotFound",
            Self::ShareWithdrawn(_) => "ShareWithdrawn",
            Self::ShareClassInvalid { .. } => "InvalidStorageClass",
            Self::BucketLost(_) => "BucketLost",
            Self::BucketNameImmutable { .. } => "BucketNameImmutable",
            Self::StorageClassImmutable { .. } => "StorageClassImmutable",
            Self::ObjectBucketConflict { .. } => "ObjectBucketConflict",
            Self::ForeignSecret(_) => "ForeignSecret",
            Self::ForeignConfigMap(_) => "ForeignConfigMap",
            Self::Backend { source: BackendError::Permanent { reason, .. }, .. } => reason,
            Self::Backend { operation, .. } => operation.failed_reason(),
            Self::Kube(_) => "KubernetesApiError",
            Self::Panicked(_) => "InternalError",
        }
    }

    fn retry(&self) -> Retry {
        match self {
            Self::Kube(_) => Retry::Api,
            Self::StorageClassNotFound(_) => Retry::Backoff,
            Self::Backend { source, .. } if !source.is_permanent() => Retry::Backoff,
            // The claim it names may become shareable without this claim changing.
            Self::ObjectBucketConflict { .. }
            | Self::ShareSourceNotFound(_)
            | Self::ShareWithdrawn(_)
            | Self::ShareClassInvalid { .. }
            | Self::ForeignSecret(_)
            | Self::ForeignConfigMap(_) => Retry::Slowly,
            _ => Retry::OnChange,
        }
    }

    fn api_error(&self) -> Option<&kube::Error> {
        match self {
            Self::Kube(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_reasons_and_retries() {
        let permanent = Error::Backend {
            operation: Operation::Provision,
            bucket: "b".into(),
            source: BackendError::invalid_parameter("unknown parameter \"colour\""),
            hint: "",
        };
        assert_eq!(permanent.reason(), "InvalidParameters");
        assert_eq!(permanent.retry(), Retry::OnChange);
        assert!(permanent.to_string().contains("unknown parameter"));

        let transient = Error::Backend {
            operation: Operation::Delete,
            bucket: "b".into(),
            source: BackendError::transient("connection refused"),
            hint: ABANDON_HINT,
        };
        assert_eq!(transient.reason(), "DeleteFailed");
        assert_eq!(transient.retry(), Retry::Backoff);
        assert!(transient.to_string().contains("abandon-bucket=true"));
    }
}
