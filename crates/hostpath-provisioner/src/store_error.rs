//! Store failures as the library understands them.

use bucket_provisioner::BackendError;
use s3_endpoint::StoreError;

/// Store failures as the library understands them: file system trouble may pass, and so does
/// object lock holding a bucket's data (the claim waits until the last protection ends);
/// everything else needs a change to the claim or StorageClass.
pub(crate) fn backend_error(e: StoreError) -> BackendError {
    let reason = match &e {
        StoreError::Io(_) | StoreError::Corrupt { .. } => {
            return BackendError::transient(e.to_string());
        }
        StoreError::ObjectLocked(refusal) => {
            return BackendError::transient(format!(
                "the bucket holds data under object lock ({refusal}), which nobody may delete \
                 before its retention ends; its keys are revoked and its deletion is retried \
                 until nothing in it is protected"
            ));
        }
        StoreError::InvalidBucketName(_) => "InvalidBucketName",
        StoreError::NoSuchBucket(_) => "BucketNotFound",
        StoreError::BucketAlreadyExists(name) => {
            return BackendError::name_taken(name);
        }
        StoreError::NotOurs { .. } => "NotOurs",
        StoreError::NotCreator(_) => "InvalidParameters",
        StoreError::Symlink(_) => "Symlink",
        _ => "InvalidArgument",
    };
    BackendError::permanent(reason, e.to_string())
}
