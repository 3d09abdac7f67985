//! What the backend needs from the cluster, as two small traits. The backend's S3 and IAM logic
//! only sees these; [`crate::cluster::KubeCluster`] implements them with a Kubernetes client, and
//! tests can implement them with anything.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bucket_api::contract::{SECRET_ACCESS_KEY_ID, SECRET_SECRET_ACCESS_KEY};
use bucket_provisioner::{BackendError, Credentials};

use crate::params::SecretRef;

/// What the owner's credentials must be allowed for claims without `additionalConfig`, as the
/// book's S3 chapter (`docs/src/running/s3.md`) lists them (on the buckets, and on the users
/// under the provisioner's IAM path).
pub const OWNER_ACTIONS: [&str; 21] = [
    "s3:CreateBucket",
    "s3:DeleteBucket",
    "s3:ListBucket",
    "s3:ListBucketVersions",
    "s3:ListBucketMultipartUploads",
    "s3:GetBucketTagging",
    "s3:PutBucketTagging",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:AbortMultipartUpload",
    "iam:CreateUser",
    "iam:TagUser",
    "iam:DeleteUser",
    "iam:PutUserPolicy",
    "iam:DeleteUserPolicy",
    "iam:ListUserPolicies",
    "iam:ListAttachedUserPolicies",
    "iam:DetachUserPolicy",
    "iam:CreateAccessKey",
    "iam:DeleteAccessKey",
    "iam:ListAccessKeys",
];

/// What the owner may also need where a StorageClass names a `webIdentityProvider`: the
/// claims' roles (see [`crate::web_identity`]).
pub const WEB_IDENTITY_OWNER_ACTIONS: [&str; 8] = [
    "iam:CreateRole",
    "iam:TagRole",
    "iam:UpdateRole",
    "iam:UpdateAssumeRolePolicy",
    "iam:PutRolePolicy",
    "iam:ListRolePolicies",
    "iam:DeleteRolePolicy",
    "iam:DeleteRole",
];

/// Resolves the bucket owner's access keys from the Secret a StorageClass names.
#[async_trait]
pub trait OwnerCredentials: Send + Sync {
    /// The keys in `secret`. A missing Secret or key is a permanent error naming the Secret; a
    /// cluster that cannot be asked right now is a transient one.
    async fn owner_credentials(&self, secret: &SecretRef) -> Result<Credentials, BackendError>;
}

/// Looks up a StorageClass's parameters. Only needed to clean up after a claim whose
/// ObjectBucket was never written (a crash, or a failure, between creating the bucket and
/// recording it), when nothing else says where the bucket lives.
#[async_trait]
pub trait ClassParameters: Send + Sync {
    /// The parameters of StorageClass `name`, or `None` when it no longer exists.
    async fn class_parameters(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, BackendError>;
}

/// Credentials from a Secret's decoded data, with errors that name the Secret and the missing
/// keys (never a value).
pub fn credentials_from_data(
    secret: &SecretRef,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<Credentials, BackendError> {
    let read = |key: &str| {
        data.get(key)
            .map(|v| String::from_utf8_lossy(v).trim().to_string())
            .filter(|v| !v.is_empty())
    };
    match (read(SECRET_ACCESS_KEY_ID), read(SECRET_SECRET_ACCESS_KEY)) {
        (Some(access_key_id), Some(secret_access_key)) => {
            Ok(Credentials { access_key_id, secret_access_key })
        }
        (id, key) => {
            let missing: Vec<&str> = [
                id.is_none().then_some(SECRET_ACCESS_KEY_ID),
                key.is_none().then_some(SECRET_SECRET_ACCESS_KEY),
            ]
            .into_iter()
            .flatten()
            .collect();
            Err(BackendError::permanent(
                "OwnerSecretInvalid",
                format!(
                    "owner credentials Secret {secret} lacks {}; add the owner's keys to it",
                    missing.join(" and ")
                ),
            ))
        }
    }
}

/// The error for an owner Secret that does not exist.
pub fn secret_not_found(secret: &SecretRef) -> BackendError {
    BackendError::permanent(
        "OwnerSecretNotFound",
        format!(
            "owner credentials Secret {secret} (StorageClass parameters secretName/secretNamespace) \
             does not exist; create it with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> SecretRef {
        SecretRef { namespace: "infra".into(), name: "owner".into() }
    }

    #[test]
    fn both_keys_are_read() {
        let data = BTreeMap::from([
            (SECRET_ACCESS_KEY_ID.to_string(), b"AKIAEXAMPLE\n".to_vec()),
            (SECRET_SECRET_ACCESS_KEY.to_string(), b"very-secret".to_vec()),
        ]);
        let credentials = credentials_from_data(&secret(), &data).unwrap();
        assert_eq!(credentials.access_key_id, "AKIAEXAMPLE");
        assert!(!format!("{credentials:?}").contains("very-secret"));
    }

    #[test]
    fn missing_keys_are_named_without_values() {
        let data = BTreeMap::from([(SECRET_ACCESS_KEY_ID.to_string(), b"AKIAEXAMPLE".to_vec())]);
        let error = credentials_from_data(&secret(), &data).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("infra/owner") && message.contains(SECRET_SECRET_ACCESS_KEY));
        assert!(!message.contains("AKIAEXAMPLE"));
        assert!(error.is_permanent());
    }
}
