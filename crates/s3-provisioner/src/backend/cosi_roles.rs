//! COSI accesses of `authenticationType: IAM` on S3 + IAM: instead of a user and a key, an IAM
//! role of the access's own, trusted for exactly its ServiceAccount (and audience) through the
//! cluster's OIDC provider named by the driver's `webIdentityProvider`, with the access's mode on
//! each of its buckets. No key exists, so none is recorded or answered.
//!
//! | call | on IAM |
//! |---|---|
//! | `issue_key` naming ServiceAccounts | the role (named after the owner id, under [`ROLE_PATH`]) with its trust, session length and one inline policy ([`COSI_POLICY_NAME`]); a role of that owner with another policy is `access_conflict` |
//! | `revoke_key` | the role and its policies, with the user an access of keys would have |
//! | `delete_bucket` | every COSI role whose policy reaches the bucket, as every COSI user's |

use bucket_provisioner::bucket::standalone::{COSI_OWNER_PREFIX, IssuedKey, KeyRequest};
use bucket_provisioner::{BackendError, Credentials, WebIdentity, WebIdentityOptions};
use serde_json::Value;

use super::standalone::{COSI_POLICY_NAME, policy_document, policy_json, resources};
use super::{S3Provisioner, Session};
use crate::aws::code;
use crate::iam;
use crate::iam_roles::{RoleSpec, Roles, role_tag};
use crate::params::Settings;
use crate::web_identity::{ROLE_PATH, not_configured};

/// What the owner's credentials need, beyond
/// [`WEB_IDENTITY_OWNER_ACTIONS`](crate::owner::WEB_IDENTITY_OWNER_ACTIONS), for COSI accesses of
/// IAM: reading a role's policy (a retry's record), and finding the roles that reach a bucket
/// being deleted.
pub const COSI_ROLE_OWNER_ACTIONS: [&str; 2] = ["iam:GetRolePolicy", "iam:ListRoles"];

/// The tag naming the COSI access a role was made for.
const ACCESS_TAG: &str = "objectstorage.k8s.io/access";

impl S3Provisioner {
    /// The role of the access `request` (which names ServiceAccounts), made or brought up to
    /// date, and where they assume it.
    pub(super) async fn cosi_role(
        &self,
        settings: &Settings,
        session: &Session,
        request: &KeyRequest,
        asked: &WebIdentityOptions,
    ) -> Result<IssuedKey, BackendError> {
        let Some(class) = &settings.web_identity else {
            return Err(not_configured(
                "this COSI driver's parameters name no webIdentityProvider (the ARN of the \
                 cluster's IAM OIDC provider), so its accesses cannot be of authenticationType \
                 IAM",
            ));
        };
        let role = iam::user_name(&request.owner_id);
        let policy = policy_document(settings.partition(), &request.buckets);
        if let Some(found) = self.cosi_role_policy(session, &role).await?
            && serde_json::from_str::<Value>(&policy).ok() != Some(found)
        {
            return Err(BackendError::access_conflict(&request.owner_id));
        }
        let spec = RoleSpec {
            name: &role,
            tag: role_tag(ACCESS_TAG, &request.owner_id)?,
            trust: &class.provider.trust_policy(&class.audience, &asked.subjects),
            policy_name: COSI_POLICY_NAME,
            policy: &policy,
            max_session_secs: asked.max_session_secs,
        };
        let roles = Roles { iam: &session.clients.iam, owner: &session.owner };
        self.creating.hold(&role, roles.ensure(&spec)).await?;
        Ok(IssuedKey {
            endpoint: settings.consumer_endpoint(),
            // Sessions are the only way in: there is no key to hand anyone.
            credentials: Credentials {
                access_key_id: String::new(),
                secret_access_key: String::new(),
            },
            web_identity: Some(WebIdentity {
                role_arn: class.provider.role_arn(&role),
                sts_endpoint: settings.sts_url(),
            }),
        })
    }

    /// Removes the role of the access `owner_id`, when this driver lets ServiceAccounts in
    /// (otherwise it never made one, and its owner may not be allowed to look).
    pub(super) async fn remove_cosi_role(
        &self,
        settings: &Settings,
        session: &Session,
        owner_id: &str,
    ) -> Result<(), BackendError> {
        if settings.web_identity.is_none() {
            return Ok(());
        }
        let roles = Roles { iam: &session.clients.iam, owner: &session.owner };
        roles.remove(&iam::user_name(owner_id)).await
    }

    /// Removes every COSI role whose policy names `bucket`: a role left reaching the name would
    /// reach a bucket made under it later.
    pub(super) async fn remove_roles_reaching(
        &self,
        settings: &Settings,
        session: &Session,
        bucket: &str,
    ) -> Result<(), BackendError> {
        if settings.web_identity.is_none() {
            return Ok(());
        }
        let iam = &session.clients.iam;
        let mut pages = iam.list_roles().path_prefix(ROLE_PATH).into_paginator().items().send();
        let mut names = Vec::new();
        while let Some(role) = pages.next().await {
            let role = role.map_err(|e| {
                crate::aws::classify(e, "iam:ListRoles (COSI roles)", &session.owner)
            })?;
            // Claims' roles are named after claim ids, never with the COSI prefix.
            if role.role_name().starts_with(COSI_OWNER_PREFIX) {
                names.push(role.role_name().to_owned());
            }
        }
        let arn = format!("arn:{}:s3:::{bucket}", settings.partition());
        let roles = Roles { iam, owner: &session.owner };
        for role in names {
            let Some(policy) = self.cosi_role_policy(session, &role).await? else { continue };
            if resources(&policy).any(|r| r == arn) {
                tracing::info!(role, bucket, "removing a COSI role reaching a deleted bucket");
                roles.remove(&role).await?;
            }
        }
        Ok(())
    }

    /// The COSI policy of `role`, parsed; `None` when the role or the policy does not exist.
    async fn cosi_role_policy(
        &self,
        session: &Session,
        role: &str,
    ) -> Result<Option<Value>, BackendError> {
        let request =
            session.clients.iam.get_role_policy().role_name(role).policy_name(COSI_POLICY_NAME);
        match request.send().await {
            Ok(found) => {
                policy_json(found.policy_document(), &format!("iam:GetRolePolicy {role}")).map(Some)
            }
            Err(e) if code(&e) == Some("NoSuchEntity") => Ok(None),
            Err(e) => {
                Err(crate::aws::classify(e, &format!("iam:GetRolePolicy {role}"), &session.owner))
            }
        }
    }
}
