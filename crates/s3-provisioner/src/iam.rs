//! The claim's IAM user: created once (its name comes from the claim's stable user id), given an
//! inline policy for one bucket, and one access key (two while a rotation overlaps them); removed
//! with everything it holds.

use aws_sdk_iam::Client;
use aws_sdk_iam::types::Tag;
use bucket_provisioner::{AccessMode, BackendError, Credentials};
use serde_json::json;

use crate::aws::{classify, code};

/// IAM path of every user this provisioner creates, so that they are easy to list.
pub const USER_PATH: &str = "/bucket-provisioner/";

/// IAM's limit on user names.
const MAX_USER_NAME: usize = 64;

/// The IAM user name for a claim's user id (already unique and stable per claim).
pub fn user_name(user_id: &str) -> String {
    user_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "+=,.@_-".contains(c) { c } else { '-' })
        .take(MAX_USER_NAME)
        .collect()
}

/// The inline policy's name for `bucket`.
pub fn policy_name(bucket: &str) -> String {
    format!("bucket-{bucket}")
}

/// What a claim's user may do with its bucket: list it and read its settings that clients need.
/// s3:HeadBucket is no IAM action on AWS (which checks s3:ListBucket), but some S3-compatible
/// services authorize it by that name.
pub const GRANTED_BUCKET_ACTIONS: [&str; 6] = [
    "s3:ListBucket",
    "s3:ListBucketVersions",
    "s3:ListBucketMultipartUploads",
    "s3:GetBucketLocation",
    "s3:GetBucketVersioning",
    "s3:HeadBucket",
];

/// What a claim's user may do with the objects of its bucket.
pub const GRANTED_OBJECT_ACTIONS: [&str; 6] = [
    "s3:GetObject*",
    "s3:PutObject*",
    "s3:DeleteObject*",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
    "s3:RestoreObject",
];

/// What a `ReadOnly` claim's user may do with its bucket: list it and read its settings.
pub const READ_ONLY_BUCKET_ACTIONS: [&str; 6] = GRANTED_BUCKET_ACTIONS;
/// What a `ReadOnly` claim's user may do with the objects: read them and the parts of uploads.
pub const READ_ONLY_OBJECT_ACTIONS: [&str; 2] = ["s3:GetObject*", "s3:ListMultipartUploadParts"];
/// What a `WriteOnly` claim's user may do with its bucket: find where it is, never list it.
/// (AWS authorizes HeadBucket as s3:ListBucket, so HeadBucket is refused there.)
pub const WRITE_ONLY_BUCKET_ACTIONS: [&str; 2] = ["s3:GetBucketLocation", "s3:HeadBucket"];
/// What a `WriteOnly` claim's user may do with the objects: write them, in one request or in a
/// multipart upload it may list the parts of and abort; never read or delete them.
pub const WRITE_ONLY_OBJECT_ACTIONS: [&str; 3] =
    ["s3:PutObject*", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"];

/// The actions of `mode` on the bucket and on its objects.
fn actions(mode: AccessMode) -> (&'static [&'static str], &'static [&'static str]) {
    match mode {
        AccessMode::ReadWrite => (&GRANTED_BUCKET_ACTIONS, &GRANTED_OBJECT_ACTIONS),
        AccessMode::ReadOnly => (&READ_ONLY_BUCKET_ACTIONS, &READ_ONLY_OBJECT_ACTIONS),
        AccessMode::WriteOnly => (&WRITE_ONLY_BUCKET_ACTIONS, &WRITE_ONLY_OBJECT_ACTIONS),
    }
}

/// A policy that allows `mode`'s work with the objects of `bucket` (and, unless `WriteOnly`,
/// listing it), and nothing else: no other bucket, no bucket configuration (policy, tags, ACLs),
/// no IAM. Where it may write, it may not set an object's own retention
/// (`s3:PutObjectRetention`, which `s3:PutObject*` would include): on a bucket with object lock
/// that would pass the StorageClass's limits (`allowComplianceRetention`,
/// `maxObjectLockRetentionDays`), which hold only for the bucket's default retention.
pub fn policy_document(partition: &str, bucket: &str, mode: AccessMode) -> String {
    let bucket_arn = format!("arn:{partition}:s3:::{bucket}");
    let (bucket_actions, object_actions) = actions(mode);
    let mut statements = vec![
        json!({
            "Sid": "ListTheBucket",
            "Effect": "Allow",
            "Action": bucket_actions,
            "Resource": bucket_arn,
        }),
        json!({
            "Sid": "UseTheObjects",
            "Effect": "Allow",
            "Action": object_actions,
            "Resource": format!("{bucket_arn}/*"),
        }),
    ];
    if object_actions.contains(&"s3:PutObject*") {
        statements.push(json!({
            "Sid": "NoRetentionOfItsOwn",
            "Effect": "Deny",
            "Action": RETENTION_ACTION,
            "Resource": format!("{bucket_arn}/*"),
        }));
    }
    json!({ "Version": "2012-10-17", "Statement": statements }).to_string()
}

/// Setting an object's own retention, denied to claims' users (see [`policy_document`]).
pub const RETENTION_ACTION: &str = "s3:PutObjectRetention";

/// IAM calls for one claim's user.
pub(crate) struct Users<'a> {
    pub(crate) iam: &'a Client,
    /// How the owner's credentials were found, for messages.
    pub(crate) owner: &'a str,
}

impl Users<'_> {
    fn fail<E>(
        &self,
        action: &str,
        user: &str,
    ) -> impl Fn(aws_sdk_iam::error::SdkError<E>) -> BackendError
    where
        E: aws_sdk_iam::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let action = format!("iam:{action} {user}");
        let owner = self.owner.to_string();
        move |e| classify(e, &action, &owner)
    }

    /// Makes sure `user` exists with `policy` (named `policy_name`) and hands back its one access
    /// key. Keys from earlier attempts are deleted first: their secrets were never delivered, and
    /// AWS shows a secret only when the key is created.
    pub(crate) async fn ensure(
        &self,
        user: &str,
        bucket: &str,
        policy_name: &str,
        policy: &str,
    ) -> Result<Credentials, BackendError> {
        let tag = Tag::builder()
            .key("objectbucket.io/bucket")
            .value(bucket)
            .build()
            .map_err(|e| BackendError::transient(format!("building an IAM tag failed: {e}")))?;
        match self.iam.create_user().user_name(user).path(USER_PATH).tags(tag).send().await {
            Ok(_) => tracing::info!(user, bucket, "created IAM user"),
            // The name is the claim's own: an earlier attempt made it.
            Err(e) if code(&e) == Some("EntityAlreadyExists") => {}
            Err(e) => return Err(self.fail("CreateUser", user)(e)),
        }
        self.iam
            .put_user_policy()
            .user_name(user)
            .policy_name(policy_name)
            .policy_document(policy)
            .send()
            .await
            .map_err(self.fail("PutUserPolicy", user))?;
        for key in self.access_keys(user).await?.unwrap_or_default() {
            self.delete_key(user, &key).await?;
        }
        self.create_only_key(user).await
    }

    /// A new access key for `user`, which then holds no other: a `CreateAccessKey` whose answer
    /// was lost (and that the SDK retried) made a key no one will ever hold the secret of.
    pub(crate) async fn create_only_key(&self, user: &str) -> Result<Credentials, BackendError> {
        let created = self.create_key(user).await?;
        for key in self.access_keys(user).await?.unwrap_or_default() {
            if key != created.access_key_id {
                self.delete_key(user, &key).await?;
            }
        }
        Ok(created)
    }

    /// A second access key for `user` beside `keep`, after deleting any other (an earlier
    /// attempt's, whose secret was never delivered): IAM's two keys per user are the current
    /// and the previous one. Fails when `keep` is not `user`'s, so the user never ends up with
    /// no key its claim knows.
    pub(crate) async fn rotate(&self, user: &str, keep: &str) -> Result<Credentials, BackendError> {
        let keys = self.access_keys(user).await?.unwrap_or_default();
        if !keys.iter().any(|k| k == keep) {
            return Err(BackendError::permanent(
                "UnknownAccessKey",
                format!("access key {keep} is not a key of IAM user {user}; nothing was rotated"),
            ));
        }
        self.delete_all_but(user, keep, &keys).await?;
        match self.create_key(user).await {
            // The answer of this very CreateAccessKey was lost and the SDK sent it again: the
            // first made a key no one holds the secret of, which leaves no room for a second.
            Err(BackendError::Permanent { reason, .. }) if reason == "LimitExceeded" => {
                let keys = self.access_keys(user).await?.unwrap_or_default();
                tracing::info!(user, "a key whose answer was lost is deleted, and made again");
                self.delete_all_but(user, keep, &keys).await?;
                self.create_key(user).await
            }
            created => created,
        }
    }

    /// Deletes every key of `keys` but `keep`.
    async fn delete_all_but(
        &self,
        user: &str,
        keep: &str,
        keys: &[String],
    ) -> Result<(), BackendError> {
        for key in keys.iter().filter(|k| *k != keep) {
            self.delete_key(user, key).await?;
        }
        Ok(())
    }

    /// Deletes `user`'s access key `key`; gone already (or never `user`'s) counts as done.
    pub(crate) async fn retire(&self, user: &str, key: &str) -> Result<(), BackendError> {
        self.delete_key(user, key).await
    }

    pub(crate) async fn create_key(&self, user: &str) -> Result<Credentials, BackendError> {
        let created = self
            .iam
            .create_access_key()
            .user_name(user)
            .send()
            .await
            .map_err(self.fail("CreateAccessKey", user))?;
        let key = created.access_key().ok_or_else(|| {
            BackendError::transient(format!("iam:CreateAccessKey {user}: the answer held no key"))
        })?;
        tracing::info!(user, access_key_id = key.access_key_id(), "created access key");
        Ok(Credentials {
            access_key_id: key.access_key_id().to_string(),
            secret_access_key: key.secret_access_key().to_string(),
        })
    }

    /// Replaces `user`'s inline policy `policy_name` with `policy` (a changed access mode).
    pub(crate) async fn set_policy(
        &self,
        user: &str,
        policy_name: &str,
        policy: &str,
    ) -> Result<(), BackendError> {
        self.iam
            .put_user_policy()
            .user_name(user)
            .policy_name(policy_name)
            .policy_document(policy)
            .send()
            .await
            .map_err(self.fail("PutUserPolicy", user))?;
        Ok(())
    }

    /// The ARN of `user`, which bucket policies name it by.
    pub(crate) async fn arn(&self, user: &str) -> Result<String, BackendError> {
        let output =
            self.iam.get_user().user_name(user).send().await.map_err(self.fail("GetUser", user))?;
        Ok(output.user().map(|u| u.arn().to_owned()).unwrap_or_default())
    }

    /// Deletes `user` with its keys and policies. A user (or part) already gone counts as done.
    pub(crate) async fn remove(&self, user: &str) -> Result<(), BackendError> {
        let Some(keys) = self.access_keys(user).await? else { return Ok(()) };
        for key in keys {
            self.delete_key(user, &key).await?;
        }
        let mut policies =
            self.iam.list_user_policies().user_name(user).into_paginator().items().send();
        let mut names = Vec::new();
        while let Some(name) = policies.next().await {
            match name {
                Ok(name) => names.push(name),
                Err(e) if code(&e) == Some("NoSuchEntity") => return Ok(()),
                Err(e) => return Err(self.fail("ListUserPolicies", user)(e)),
            }
        }
        for name in names {
            match self.iam.delete_user_policy().user_name(user).policy_name(&name).send().await {
                Ok(_) => {}
                Err(e) if code(&e) == Some("NoSuchEntity") => {}
                Err(e) => return Err(self.fail("DeleteUserPolicy", user)(e)),
            }
        }
        // Attached managed policies block DeleteUser too; none are ours, but detaching is safe.
        let attached = match self.iam.list_attached_user_policies().user_name(user).send().await {
            Ok(output) => output.attached_policies().to_vec(),
            Err(e) if code(&e) == Some("NoSuchEntity") => return Ok(()),
            Err(e) => return Err(self.fail("ListAttachedUserPolicies", user)(e)),
        };
        for arn in attached.iter().filter_map(|p| p.policy_arn()) {
            match self.iam.detach_user_policy().user_name(user).policy_arn(arn).send().await {
                Ok(_) => {}
                Err(e) if code(&e) == Some("NoSuchEntity") => {}
                Err(e) => return Err(self.fail("DetachUserPolicy", user)(e)),
            }
        }
        match self.iam.delete_user().user_name(user).send().await {
            Ok(_) => {
                tracing::info!(user, "deleted IAM user");
                Ok(())
            }
            Err(e) if code(&e) == Some("NoSuchEntity") => Ok(()),
            // Something was added meanwhile (a key, a group): the retry removes it too.
            Err(e) if code(&e) == Some("DeleteConflict") => Err(BackendError::transient(format!(
                "iam:DeleteUser {user}: the user still holds something; retrying"
            ))),
            Err(e) => Err(self.fail("DeleteUser", user)(e)),
        }
    }

    /// The user's access key ids; `None` when the user does not exist.
    pub(crate) async fn access_keys(
        &self,
        user: &str,
    ) -> Result<Option<Vec<String>>, BackendError> {
        let mut pages = self.iam.list_access_keys().user_name(user).into_paginator().items().send();
        let mut keys = Vec::new();
        while let Some(key) = pages.next().await {
            match key {
                Ok(key) => keys.extend(key.access_key_id().map(String::from)),
                Err(e) if code(&e) == Some("NoSuchEntity") => return Ok(None),
                Err(e) => return Err(self.fail("ListAccessKeys", user)(e)),
            }
        }
        Ok(Some(keys))
    }

    pub(crate) async fn delete_key(&self, user: &str, key: &str) -> Result<(), BackendError> {
        match self.iam.delete_access_key().user_name(user).access_key_id(key).send().await {
            Ok(_) => {
                tracing::info!(user, access_key_id = key, "deleted access key");
                Ok(())
            }
            Err(e) if code(&e) == Some("NoSuchEntity") => Ok(()),
            Err(e) => Err(self.fail("DeleteAccessKey", user)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_are_valid_and_stable() {
        let id = "obc-0b6f5a3e-1c1d-4a57-9e0f-1b2c3d4e5f60";
        assert_eq!(user_name(id), id);
        assert_eq!(user_name("a/b c"), "a-b-c");
        assert_eq!(user_name(&"x".repeat(100)).len(), 64);
    }

    #[test]
    fn the_policy_names_only_its_bucket() {
        let document: serde_json::Value =
            serde_json::from_str(&policy_document("aws", "photos", AccessMode::ReadWrite)).unwrap();
        let resources: Vec<&str> = document["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["Resource"].as_str().unwrap())
            .collect();
        assert_eq!(
            resources,
            ["arn:aws:s3:::photos", "arn:aws:s3:::photos/*", "arn:aws:s3:::photos/*"]
        );
        let text = document.to_string();
        assert!(!text.contains("iam:") && !text.contains("\"s3:*\""));
        assert!(!text.contains("PutBucketPolicy") && !text.contains("DeleteBucket\""));
    }

    #[test]
    fn narrowed_policies_grant_only_their_mode() {
        let read = policy_document("aws", "b", AccessMode::ReadOnly);
        assert!(read.contains("s3:GetObject*") && read.contains("s3:ListBucket\""));
        assert!(!read.contains("Put") && !read.contains("Delete") && !read.contains("Abort"));
        let write = policy_document("aws", "b", AccessMode::WriteOnly);
        assert!(write.contains("s3:PutObject*") && write.contains("s3:AbortMultipartUpload"));
        assert!(!write.contains("GetObject"));
        assert!(!write.contains("s3:ListBucket") && !write.contains("Delete"));
    }

    #[test]
    fn whoever_may_write_may_not_set_an_objects_own_retention() {
        for mode in [AccessMode::ReadWrite, AccessMode::WriteOnly] {
            let document: serde_json::Value =
                serde_json::from_str(&policy_document("aws", "b", mode)).unwrap();
            let denied = document["Statement"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["Effect"] == "Deny")
                .unwrap_or_else(|| panic!("{mode}: {document}"));
            assert_eq!(denied["Action"], RETENTION_ACTION);
            assert_eq!(denied["Resource"], "arn:aws:s3:::b/*");
        }
    }
}
