//! What the Go aws-s3-provisioner made for a claim, taken over (see
//! [`bucket_provisioner::Provisioner::adopt`]) and removed when the claim goes.
//!
//! That provisioner made, per claim: an IAM user `<bucket[:57]>-<5 random>` at path `/`, a
//! customer-managed policy of the same name attached to it, one access key (in the claim's
//! Secret), and the bucket, untagged; its ObjectBucket's `additionalState` names the user
//! (`UserName`) and the policy (`ARN`). The ObjectBucket is cluster-scoped and proven the
//! claim's by the library, so what it names is what that provisioner made for the claim; the
//! names are still checked against that provisioner's naming, so that no other user or policy
//! (an AWS-managed one, another claim's) is ever deleted for it.
//!
//! A rotation of such a claim's key (see [`bucket_provisioner::bucket::rotation`]) moves it to least
//! privilege without an outage: the new key is one of the claim's own scoped user (as for a
//! claim provisioned here), the old key keeps working through the overlap, and retiring it
//! deletes the old user and its policy. Deleting the claim removes whichever of the two exist.
//!
//! The bucket becomes the claim's (tagged as if this backend had created it, so that deleting
//! the claim under `Delete` deletes it) only when all of this holds: the claim did not name an
//! existing bucket through its StorageClass, the user named exists and has the named policy
//! attached (what that provisioner did after creating the bucket for the claim), and the bucket
//! carries no tags (nobody else recorded it). Otherwise only the claim's access is ever removed.

use std::collections::BTreeMap;

use aws_sdk_iam::Client;
use bucket_api::ObjectBucket;
use bucket_provisioner::{
    Adoption, BackendError, BucketOptions, Credentials, Endpoint, access_mode_of, user_id_of,
};

use crate::aws::{classify, code};
use crate::bucket::Buckets;
use crate::iam::{self, Users};
use crate::params::{STATE_USER_NAME, Settings};

/// Key of the old provisioner's `additionalState`: the ARN of the user's managed policy.
pub const LEGACY_POLICY_ARN: &str = "ARN";
/// Key of the old provisioner's `additionalState`: the IAM user's name.
pub const LEGACY_USER_NAME: &str = "UserName";
/// `additionalState` key of an adopted claim: the customer-managed policy to delete with its
/// user.
pub const STATE_LEGACY_POLICY_ARN: &str = "legacyPolicyArn";

/// What the owner credential needs, beyond [`crate::owner::OWNER_ACTIONS`], to delete what the
/// Go aws-s3-provisioner made for a claim taken over from it: its customer-managed policy.
pub const LEGACY_OWNER_ACTIONS: [&str; 3] =
    ["iam:ListPolicyVersions", "iam:DeletePolicyVersion", "iam:DeletePolicy"];

/// Characters of the bucket name the old provisioner keeps in a user name.
const USER_PREFIX: usize = 57;
/// Random characters it appends (after a `-`).
const USER_SUFFIX: usize = 5;

/// Whether `user` is a name the old provisioner gives a user for `bucket`.
pub fn user_name_fits(bucket: &str, user: &str) -> bool {
    let prefix: String = bucket.chars().take(USER_PREFIX).collect();
    user.strip_prefix(&prefix).and_then(|rest| rest.strip_prefix('-')).is_some_and(|suffix| {
        suffix.len() == USER_SUFFIX && suffix.chars().all(|c| c.is_ascii_alphanumeric())
    })
}

/// Whether `arn` names a customer-managed policy called `user` (as the old provisioner names
/// them): `arn:<partition>:iam::<account>:policy/<user>`.
pub fn policy_arn_fits(arn: &str, user: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", partition, "iam", "", account, resource]
        if partition.starts_with("aws")
            && account.len() == 12
            && account.chars().all(|c| c.is_ascii_digit())
            && *resource == format!("policy/{user}"))
}

/// The old records of `legacy`, as far as they fit the old provisioner's naming.
fn recorded(legacy: &ObjectBucket, bucket: &str) -> (Option<String>, Option<String>) {
    let state = legacy.spec.additional_state.clone().unwrap_or_default();
    let user = state.get(LEGACY_USER_NAME).filter(|u| user_name_fits(bucket, u)).cloned();
    let arn = match (&user, state.get(LEGACY_POLICY_ARN)) {
        (Some(user), Some(arn)) if policy_arn_fits(arn, user) => Some(arn.clone()),
        _ => None,
    };
    (user, arn)
}

/// What the adopted ObjectBucket records, and whether the bucket is now the claim's.
pub(crate) async fn adopt(
    (iam, buckets): (&Client, &Buckets<'_>),
    settings: &Settings,
    options: &BucketOptions,
    legacy: &ObjectBucket,
    created_by_claim: bool,
) -> Result<Adoption, BackendError> {
    let bucket = &options.bucket_name;
    let (user, arn) = recorded(legacy, bucket);
    let mut state: BTreeMap<String, String> = settings.to_state();
    let mut proven = created_by_claim;
    match (&user, &arn) {
        (Some(user), Some(arn)) => {
            proven &= user_has_policy(iam, buckets.owner, user, arn).await?;
            state.insert(STATE_USER_NAME.into(), user.clone());
            state.insert(STATE_LEGACY_POLICY_ARN.into(), arn.clone());
        }
        (Some(user), None) => {
            proven = false;
            state.insert(STATE_USER_NAME.into(), user.clone());
        }
        (None, _) => proven = false,
    }
    let bucket_created_by_claim =
        proven && buckets.claim_untagged(bucket, &options.user_id, options.reclaim_policy).await?;
    let endpoint = match legacy.spec.endpoint.as_ref() {
        Some(recorded) if !recorded.bucket_host.is_empty() => Endpoint {
            // That provisioner knew AWS alone, and AWS only over HTTPS.
            scheme: "https".into(),
            host: recorded.bucket_host.clone(),
            port: u16::try_from(recorded.bucket_port).unwrap_or(443),
            region: recorded.region.clone(),
            sub_region: recorded.sub_region.clone(),
        },
        _ => settings.consumer_endpoint(),
    };
    tracing::info!(bucket = %bucket, user = ?user, bucket_created_by_claim,
        "adopting what the previous provisioner made for a claim");
    Ok(Adoption { endpoint, additional_state: state, bucket_created_by_claim })
}

/// What an adopted claim's ObjectBucket records of the old provisioner: its user and policy.
pub(crate) struct Adopted {
    /// The old provisioner's user, until a rotation retires its key.
    pub(crate) old_user: String,
    /// That user's customer-managed policy.
    pub(crate) policy_arn: String,
    /// The claim's own scoped user, which a rotation moves the claim to.
    pub(crate) own_user: String,
}

impl Adopted {
    /// The records of an ObjectBucket adopted from the old provisioner; `None` for any other.
    pub(crate) fn of(bucket: &ObjectBucket) -> Option<Adopted> {
        let state = bucket.spec.additional_state.as_ref()?;
        Some(Adopted {
            old_user: state.get(STATE_USER_NAME)?.clone(),
            policy_arn: state.get(STATE_LEGACY_POLICY_ARN)?.clone(),
            own_user: iam::user_name(&user_id_of(bucket)?),
        })
    }

    async fn old_user_holds(&self, users: &Users<'_>, key: &str) -> Result<bool, BackendError> {
        let keys = users.access_keys(&self.old_user).await?.unwrap_or_default();
        Ok(keys.iter().any(|k| k == key))
    }

    /// A new key beside `keep`: while `keep` is the old user's, the first key of the claim's own
    /// user (made with its scoped policy); afterwards an ordinary rotation of that user.
    pub(crate) async fn rotate(
        &self,
        users: &Users<'_>,
        settings: &Settings,
        bucket: &ObjectBucket,
        keep: &str,
    ) -> Result<Credentials, BackendError> {
        if !self.old_user_holds(users, keep).await? {
            return users.rotate(&self.own_user, keep).await;
        }
        let name = bucket.spec.endpoint.as_ref().map(|e| e.bucket_name.clone()).unwrap_or_default();
        let policy = iam::policy_document(settings.partition(), &name, access_mode_of(bucket));
        tracing::info!(user = %self.own_user, old_user = %self.old_user,
            "moving an adopted claim to a user of its own");
        users.ensure(&self.own_user, &name, &iam::policy_name(&name), &policy).await
    }

    /// Retires `key`: the old user's key takes the old user and its policy with it.
    pub(crate) async fn retire(&self, users: &Users<'_>, key: &str) -> Result<(), BackendError> {
        if self.old_user_holds(users, key).await? {
            return self.remove_old(users).await;
        }
        users.retire(&self.own_user, key).await
    }

    /// The old user (keys, policies detached) and its customer-managed policy.
    pub(crate) async fn remove_old(&self, users: &Users<'_>) -> Result<(), BackendError> {
        users.remove(&self.old_user).await?;
        delete_policy(users.iam, users.owner, &self.policy_arn).await
    }
}

/// Whether `user` exists with the managed policy `arn` attached.
async fn user_has_policy(
    iam: &Client,
    owner: &str,
    user: &str,
    arn: &str,
) -> Result<bool, BackendError> {
    let request = iam.list_attached_user_policies().user_name(user);
    match request.into_paginator().items().send().collect::<Result<Vec<_>, _>>().await {
        Ok(attached) => Ok(attached.iter().any(|p| p.policy_arn() == Some(arn))),
        Err(e) if code(&e) == Some("NoSuchEntity") => Ok(false),
        Err(e) => Err(classify(e, &format!("iam:ListAttachedUserPolicies {user}"), owner)),
    }
}

/// Deletes the customer-managed policy `arn` (detached from the claim's user already): its
/// versions other than the default, then the policy. One already gone counts as done.
pub(crate) async fn delete_policy(
    iam: &Client,
    owner: &str,
    arn: &str,
) -> Result<(), BackendError> {
    let fail = |action: &str| format!("iam:{action} {arn}");
    let versions = match iam.list_policy_versions().policy_arn(arn).send().await {
        Ok(output) => output.versions().to_vec(),
        Err(e) if code(&e) == Some("NoSuchEntity") => return Ok(()),
        Err(e) => return Err(classify(e, &fail("ListPolicyVersions"), owner)),
    };
    for version in versions.iter().filter(|v| !v.is_default_version()) {
        let id = version.version_id().unwrap_or_default();
        match iam.delete_policy_version().policy_arn(arn).version_id(id).send().await {
            Ok(_) => {}
            Err(e) if code(&e) == Some("NoSuchEntity") => {}
            Err(e) => return Err(classify(e, &fail("DeletePolicyVersion"), owner)),
        }
    }
    match iam.delete_policy().policy_arn(arn).send().await {
        Ok(_) => {
            tracing::info!(policy = arn, "deleted the previous provisioner's IAM policy");
            Ok(())
        }
        Err(e) if code(&e) == Some("NoSuchEntity") => Ok(()),
        // Attached to something else meanwhile: the retry detaches nothing of others, so say so.
        Err(e) if code(&e) == Some("DeleteConflict") => Err(BackendError::transient(format!(
            "iam:DeletePolicy {arn}: the policy is still attached to another user, group or role"
        ))),
        Err(e) => Err(classify(e, &fail("DeletePolicy"), owner)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_old_naming_fits() {
        assert!(user_name_fits("photos", "photos-aB3x9"));
        assert!(!user_name_fits("photos", "photos-aB3x"));
        assert!(!user_name_fits("photos", "photo-aB3x9"));
        assert!(!user_name_fits("photos", "admin"));
        let long = "b".repeat(63);
        assert!(user_name_fits(&long, &format!("{}-zzzzz", "b".repeat(57))));
        assert!(policy_arn_fits("arn:aws:iam::123456789012:policy/photos-aB3x9", "photos-aB3x9"));
        assert!(!policy_arn_fits("arn:aws:iam::aws:policy/AdministratorAccess", "photos-aB3x9"));
        assert!(!policy_arn_fits("arn:aws:iam::123456789012:policy/other", "photos-aB3x9"));
        assert!(!policy_arn_fits("arn:aws:iam::123456789012:user/photos-aB3x9", "photos-aB3x9"));
    }
}
