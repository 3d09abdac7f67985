//! The IAM calls for a claim's role (see [`crate::web_identity`]): made or brought up to date
//! with its trust, policy and session length; deleted with its inline policies.

use aws_sdk_iam::Client;
use aws_sdk_iam::types::Tag;
use bucket_provisioner::BackendError;

use crate::aws::{classify, code};
use crate::web_identity::{ROLE_PATH, role_max_session};

/// IAM calls for one claim's role.
pub(crate) struct Roles<'a> {
    pub(crate) iam: &'a Client,
    /// How the owner's credentials were found, for messages.
    pub(crate) owner: &'a str,
}

/// What a claim's role is made of.
pub(crate) struct RoleSpec<'a> {
    pub(crate) name: &'a str,
    /// What the role is for: the claim's bucket, or the COSI access.
    pub(crate) tag: Tag,
    pub(crate) trust: &'a str,
    pub(crate) policy_name: &'a str,
    pub(crate) policy: &'a str,
    pub(crate) max_session_secs: u32,
}

/// The tag naming what a role is for (`key`: its kind, `value`: the claim's bucket or the COSI
/// access).
pub(crate) fn role_tag(key: &str, value: &str) -> Result<Tag, BackendError> {
    Tag::builder()
        .key(key)
        .value(value)
        .build()
        .map_err(|e| BackendError::transient(format!("building an IAM tag failed: {e}")))
}

impl Roles<'_> {
    fn fail<E>(
        &self,
        action: &str,
        role: &str,
    ) -> impl Fn(aws_sdk_iam::error::SdkError<E>) -> BackendError
    where
        E: aws_sdk_iam::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let action = format!("iam:{action} {role}");
        let owner = self.owner.to_string();
        move |e| classify(e, &action, &owner)
    }

    /// Makes sure the role exists with exactly `spec`'s trust, policy and session length.
    pub(crate) async fn ensure(&self, spec: &RoleSpec<'_>) -> Result<(), BackendError> {
        let name = spec.name;
        let created = self
            .iam
            .create_role()
            .role_name(name)
            .path(ROLE_PATH)
            .assume_role_policy_document(spec.trust)
            .max_session_duration(role_max_session(spec.max_session_secs) as i32)
            .tags(spec.tag.clone())
            .send()
            .await;
        match created {
            Ok(_) => tracing::info!(role = name, for = spec.tag.value(), "created IAM role"),
            // The name is the claim's own: an earlier attempt made it; its trust may be older.
            Err(e) if code(&e) == Some("EntityAlreadyExists") => {
                self.iam
                    .update_assume_role_policy()
                    .role_name(name)
                    .policy_document(spec.trust)
                    .send()
                    .await
                    .map_err(self.fail("UpdateAssumeRolePolicy", name))?;
                self.iam
                    .update_role()
                    .role_name(name)
                    .max_session_duration(role_max_session(spec.max_session_secs) as i32)
                    .send()
                    .await
                    .map_err(self.fail("UpdateRole", name))?;
            }
            Err(e) => return Err(self.fail("CreateRole", name)(e)),
        }
        self.iam
            .put_role_policy()
            .role_name(name)
            .policy_name(spec.policy_name)
            .policy_document(spec.policy)
            .send()
            .await
            .map_err(self.fail("PutRolePolicy", name))?;
        Ok(())
    }

    /// Deletes the role with its inline policies; gone already counts as done. Its sessions are
    /// worth nothing from then on: AWS judges them by the role's policies at each request.
    pub(crate) async fn remove(&self, name: &str) -> Result<(), BackendError> {
        let mut policies =
            self.iam.list_role_policies().role_name(name).into_paginator().items().send();
        let mut names = Vec::new();
        while let Some(policy) = policies.next().await {
            match policy {
                Ok(policy) => names.push(policy),
                Err(e) if code(&e) == Some("NoSuchEntity") => return Ok(()),
                Err(e) => return Err(self.fail("ListRolePolicies", name)(e)),
            }
        }
        for policy in names {
            match self.iam.delete_role_policy().role_name(name).policy_name(&policy).send().await {
                Ok(_) => {}
                Err(e) if code(&e) == Some("NoSuchEntity") => {}
                Err(e) => return Err(self.fail("DeleteRolePolicy", name)(e)),
            }
        }
        match self.iam.delete_role().role_name(name).send().await {
            Ok(_) => {
                tracing::info!(role = name, "deleted IAM role");
                Ok(())
            }
            Err(e) if code(&e) == Some("NoSuchEntity") => Ok(()),
            Err(e) if code(&e) == Some("DeleteConflict") => Err(BackendError::transient(format!(
                "iam:DeleteRole {name}: the role still holds something; retrying"
            ))),
            Err(e) => Err(self.fail("DeleteRole", name)(e)),
        }
    }
}
