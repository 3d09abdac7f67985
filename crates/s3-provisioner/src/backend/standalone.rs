//! The COSI front's buckets and keys on S3 + IAM (see "COSI" in the library's backend guide).
//!
//! | call | on S3 and IAM |
//! |---|---|
//! | `create_bucket` | `CreateBucket`, tagged with the COSI owner id as a claim's bucket is with the claim's user id (a retry finds it, anyone else gets `name_taken`) |
//! | `existing_bucket` | the bucket's tags: one made by a COSI owner or tagged by no claim is found; a claim's is `not_found` |
//! | `issue_key` | an IAM user named after the owner id under [`COSI_USER_PATH`], with one inline policy ([`COSI_POLICY_NAME`]) granting each bucket its mode, and one access key, recorded with its secret ([`crate::key_records`]) |
//! | `issue_key` naming ServiceAccounts | an IAM role instead of a user (see [`super::cosi_roles`]) |
//! | `revoke_key` | the user's keys, policies and the user, then its record (and the role) |
//! | `delete_bucket` | when the tags name this owner: every COSI user (and role) whose policy reaches the bucket, then the bucket emptied and deleted; anything else is left alone (`AccessOnly`) |
//!
//! The store is the driver's, set once with [`S3Provisioner::with_standalone`] (the parameters
//! a StorageClass would take), since deleting a bucket or revoking a key is handed no
//! parameters to find it by. Requests carry no backend parameters, and no quotas: S3 has none.
//!
//! The user's policy is the record of what a key reaches: a retry asking the same buckets and
//! modes finds the same policy; any other is [`BackendError::access_conflict`]. IAM shows a
//! secret only when the key is made, so the key is recorded, secret included, before it is
//! answered ([`S3Provisioner::with_key_records`]): a repeated grant (upstream main's sidecar
//! grants every access again whenever it starts) answers the user's one key when the record
//! holds it. Otherwise (no record, or one IAM no longer matches) the retry deletes the user's
//! keys and answers a new one, so the user keeps one: a key made by a `CreateAccessKey` whose
//! answer was lost (and that the SDK retried) goes too.

use std::collections::{BTreeMap, BTreeSet};

use bucket_api::ReclaimPolicy;
use bucket_provisioner::bucket::standalone::{
    BucketLocation, IssuedKey, KeyBucket, KeyRequest, NewBucket, Quotas, cosi_may_use, cosi_owner,
    not_configured,
};
use bucket_provisioner::{BackendError, Removed};
use serde_json::Value;

use super::{S3Provisioner, Session};
use crate::aws::code;
use crate::bucket::Buckets;
use crate::iam::{self, Users};
use crate::params::Settings;

/// IAM path of the COSI front's users (under the provisioner's own, so the owner's permissions
/// on `user/bucket-provisioner/*` cover them), apart from claims' users.
pub const COSI_USER_PATH: &str = "/bucket-provisioner/cosi/";

/// The inline policy of a COSI user: every bucket its key reaches, with the mode of each.
pub const COSI_POLICY_NAME: &str = "cosi-access";

/// What the owner's credentials need for the COSI front beyond
/// [`OWNER_ACTIONS`](crate::owner::OWNER_ACTIONS): reading a COSI user's policy (a retry's
/// record), and finding the users whose keys reach a bucket being deleted.
pub const COSI_OWNER_ACTIONS: [&str; 2] = ["iam:GetUserPolicy", "iam:ListUsers"];

impl S3Provisioner {
    /// Serves the COSI front's buckets and keys on the store `parameters` name (as a
    /// StorageClass's would: `endpoint`, `region`, `secretName`, ...). An access always gets an
    /// IAM user of its own, so `createBucketUser: "false"` is refused.
    pub fn with_standalone(
        mut self,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Self, BackendError> {
        let settings = Settings::from_parameters(parameters)?;
        if !settings.create_bucket_user {
            return Err(BackendError::invalid_parameter(
                "createBucketUser=false hands out the owner's keys; a COSI access always gets an \
                 IAM user of its own, so leave it out of the COSI driver's parameters",
            ));
        }
        self.standalone = Some(settings);
        Ok(self)
    }

    async fn standalone_session(&self) -> Result<(Settings, Session), BackendError> {
        let settings = self
            .standalone
            .clone()
            .ok_or_else(|| not_configured("this S3 provisioner was started without a store"))?;
        let session = self.session(&settings).await?;
        Ok((settings, session))
    }

    fn buckets<'a>(&'a self, session: &'a Session) -> Buckets<'a> {
        Buckets { s3: &session.clients.s3, owner: &session.owner, locks: &self.creating }
    }

    pub(super) async fn standalone_create(
        &self,
        bucket: &NewBucket,
    ) -> Result<BucketLocation, BackendError> {
        cosi_owner(&bucket.owner_id)?;
        no_parameters(&bucket.parameters)?;
        no_quotas(bucket.quotas)?;
        let (settings, session) = self.standalone_session().await?;
        let name = &bucket.bucket_name;
        self.buckets(&session)
            .create(name, &settings.region, (&bucket.owner_id, ReclaimPolicy::Delete), false)
            .await?;
        Ok(BucketLocation { bucket_name: name.clone(), endpoint: settings.consumer_endpoint() })
    }

    pub(super) async fn standalone_existing(
        &self,
        name: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<BucketLocation, BackendError> {
        no_parameters(parameters)?;
        let (settings, session) = self.standalone_session().await?;
        match self.buckets(&session).creator(name).await? {
            Some(creator) if cosi_may_use(creator.as_deref()) => Ok(BucketLocation {
                bucket_name: name.to_owned(),
                endpoint: settings.consumer_endpoint(),
            }),
            _ => Err(BackendError::not_found(format!("bucket {name:?}"))),
        }
    }

    pub(super) async fn standalone_delete(
        &self,
        name: &str,
        owner_id: &str,
    ) -> Result<Removed, BackendError> {
        cosi_owner(owner_id)?;
        let (settings, session) = self.standalone_session().await?;
        let buckets = self.buckets(&session);
        match buckets.creator(name).await? {
            None => return Ok(Removed::Bucket),
            Some(Some(creator)) if creator == owner_id => {}
            Some(_) => {
                tracing::info!(bucket = name, owner_id, "not this owner's bucket; left alone");
                return Ok(Removed::AccessOnly);
            }
        }
        // A key left reaching the name would reach a bucket made under it later.
        self.remove_keys_reaching(&session, &settings, name).await?;
        self.remove_roles_reaching(&settings, &session, name).await?;
        buckets.empty_and_delete(name, owner_id).await
    }

    pub(super) async fn standalone_issue(
        &self,
        request: &KeyRequest,
    ) -> Result<IssuedKey, BackendError> {
        cosi_owner(&request.owner_id)?;
        no_parameters(&request.parameters)?;
        no_quotas(request.quotas)?;
        let names: BTreeSet<&str> =
            request.buckets.iter().map(|b| b.bucket_name.as_str()).collect();
        if names.is_empty() || names.len() != request.buckets.len() {
            return Err(BackendError::invalid_parameter(
                "an access names one or more buckets, each once",
            ));
        }
        let (settings, session) = self.standalone_session().await?;
        let buckets = self.buckets(&session);
        for name in names {
            if !buckets.creator(name).await?.is_some_and(|c| cosi_may_use(c.as_deref())) {
                return Err(BackendError::not_found(format!("bucket {name:?}")));
            }
        }
        if let Some(asked) = &request.web_identity {
            return self.cosi_role(&settings, &session, request, asked).await;
        }
        let user = iam::user_name(&request.owner_id);
        let policy = policy_document(settings.partition(), &request.buckets);
        let users = Users { iam: &session.clients.iam, owner: &session.owner };
        let credentials = self
            .creating
            .hold(&user, async {
                self.ensure_cosi_user(&session, &user, &policy, &request.owner_id).await?;
                let keys = users.access_keys(&user).await?.unwrap_or_default();
                // The key in use, when it is the user's only one and its secret was recorded.
                if let Some(records) = &self.key_records
                    && let [only] = keys.as_slice()
                    && let Some(recorded) = records.read(&user).await?
                    && recorded.access_key_id == *only
                {
                    return Ok(recorded);
                }
                for key in keys {
                    users.delete_key(&user, &key).await?;
                }
                let made = users.create_only_key(&user).await?;
                // Recorded before it is answered: a retry after a lost answer finds it.
                if let Some(records) = &self.key_records {
                    records.write(&user, &made).await?;
                }
                Ok(made)
            })
            .await?;
        Ok(IssuedKey { endpoint: settings.consumer_endpoint(), credentials, web_identity: None })
    }

    pub(super) async fn standalone_revoke(&self, owner_id: &str) -> Result<(), BackendError> {
        cosi_owner(owner_id)?;
        let (settings, session) = self.standalone_session().await?;
        self.remove_cosi_role(&settings, &session, owner_id).await?;
        let user = iam::user_name(owner_id);
        Users { iam: &session.clients.iam, owner: &session.owner }.remove(&user).await?;
        self.forget_key(&user).await
    }

    /// Removes the record of `user`'s key, once the user is gone.
    async fn forget_key(&self, user: &str) -> Result<(), BackendError> {
        match &self.key_records {
            Some(records) => records.remove(user).await,
            None => Ok(()),
        }
    }

    /// Makes sure `user` exists with `policy`: a user with another policy is another request
    /// for the same access, refused.
    async fn ensure_cosi_user(
        &self,
        session: &Session,
        user: &str,
        policy: &str,
        owner_id: &str,
    ) -> Result<(), BackendError> {
        let iam = &session.clients.iam;
        if let Some(found) = self.cosi_policy(session, user).await? {
            return match serde_json::from_str::<Value>(policy).ok() == Some(found) {
                true => Ok(()),
                false => Err(BackendError::access_conflict(owner_id)),
            };
        }
        let fail = |action: &str| format!("iam:{action} {user}");
        match iam.create_user().user_name(user).path(COSI_USER_PATH).send().await {
            Ok(_) => tracing::info!(user, "created IAM user for a COSI access"),
            // Named after the owner id: an earlier attempt made it.
            Err(e) if code(&e) == Some("EntityAlreadyExists") => {}
            Err(e) => return Err(crate::aws::classify(e, &fail("CreateUser"), &session.owner)),
        }
        Users { iam, owner: &session.owner }.set_policy(user, COSI_POLICY_NAME, policy).await
    }

    /// The COSI policy of `user`, parsed; `None` when the user or the policy does not exist.
    async fn cosi_policy(
        &self,
        session: &Session,
        user: &str,
    ) -> Result<Option<Value>, BackendError> {
        let request =
            session.clients.iam.get_user_policy().user_name(user).policy_name(COSI_POLICY_NAME);
        match request.send().await {
            Ok(found) => {
                policy_json(found.policy_document(), &format!("iam:GetUserPolicy {user}")).map(Some)
            }
            Err(e) if code(&e) == Some("NoSuchEntity") => Ok(None),
            Err(e) => {
                Err(crate::aws::classify(e, &format!("iam:GetUserPolicy {user}"), &session.owner))
            }
        }
    }

    /// Removes every COSI user whose policy names `bucket`.
    async fn remove_keys_reaching(
        &self,
        session: &Session,
        settings: &Settings,
        bucket: &str,
    ) -> Result<(), BackendError> {
        let iam = &session.clients.iam;
        let mut pages =
            iam.list_users().path_prefix(COSI_USER_PATH).into_paginator().items().send();
        let mut names = Vec::new();
        while let Some(user) = pages.next().await {
            let user = user.map_err(|e| {
                crate::aws::classify(e, "iam:ListUsers (COSI users)", &session.owner)
            })?;
            names.push(user.user_name().to_owned());
        }
        let arn = format!("arn:{}:s3:::{bucket}", settings.partition());
        let users = Users { iam, owner: &session.owner };
        for user in names {
            let Some(policy) = self.cosi_policy(session, &user).await? else { continue };
            if resources(&policy).any(|r| r == arn) {
                tracing::info!(user, bucket, "removing a COSI key reaching a deleted bucket");
                users.remove(&user).await?;
                self.forget_key(&user).await?;
            }
        }
        Ok(())
    }
}

/// One policy granting each bucket its mode: the claim's policy for each, side by side.
pub fn policy_document(partition: &str, buckets: &[KeyBucket]) -> String {
    let mut statements = Vec::new();
    for (index, bucket) in buckets.iter().enumerate() {
        let one = iam::policy_document(partition, &bucket.bucket_name, bucket.access_mode);
        let one: Value = serde_json::from_str(&one).unwrap_or_default();
        for mut statement in one["Statement"].as_array().cloned().unwrap_or_default() {
            // Sids are unique within a policy.
            let sid = format!("{}{index}", statement["Sid"].as_str().unwrap_or_default());
            statement["Sid"] = Value::String(sid);
            statements.push(statement);
        }
    }
    serde_json::json!({ "Version": "2012-10-17", "Statement": statements }).to_string()
}

pub(super) fn resources(policy: &Value) -> impl Iterator<Item = &str> {
    let statements = policy["Statement"].as_array().map(Vec::as_slice).unwrap_or_default();
    statements.iter().filter_map(|s| s["Resource"].as_str())
}

/// A policy document as `action` answered it, parsed.
pub(super) fn policy_json(text: &str, action: &str) -> Result<Value, BackendError> {
    serde_json::from_str(&percent_decoded(text))
        .map_err(|e| BackendError::transient(format!("{action}: the policy is not JSON ({e})")))
}

/// IAM answers policies URL-encoded (RFC 3986, so a `+` is a plus, as in user names); some
/// services send them as they are.
fn percent_decoded(text: &str) -> String {
    if serde_json::from_str::<Value>(text).is_ok() {
        return text.to_owned();
    }
    percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned()
}

fn no_parameters(parameters: &BTreeMap<String, String>) -> Result<(), BackendError> {
    match parameters.keys().next() {
        None => Ok(()),
        Some(key) => Err(BackendError::invalid_parameter(format!(
            "unknown parameter {key:?}: the S3 provisioner's COSI buckets and keys take no \
             parameters; the store they are on is the driver's"
        ))),
    }
}

/// S3 has no quotas, so asking for one is refused as a claim's quota keys are.
fn no_quotas(quotas: Quotas) -> Result<(), BackendError> {
    if quotas == Quotas::default() {
        return Ok(());
    }
    Err(BackendError::invalid_parameter(
        "quotas (maxObjects, maxSize) cannot be honoured: AWS S3 has no bucket or user quotas, so \
         the S3 provisioner could not enforce them; remove them, or use a driver whose store \
         enforces quotas",
    ))
}

#[cfg(test)]
mod tests {
    use bucket_provisioner::AccessMode;

    use super::*;

    #[test]
    fn one_policy_grants_each_bucket_its_mode() {
        let buckets = [
            KeyBucket { bucket_name: "a".into(), access_mode: AccessMode::ReadWrite },
            KeyBucket { bucket_name: "b".into(), access_mode: AccessMode::ReadOnly },
        ];
        let policy: Value = serde_json::from_str(&policy_document("aws", &buckets)).unwrap();
        let found: Vec<&str> = resources(&policy).collect();
        // a's objects twice: allowed, and denied their own retention (see iam).
        assert_eq!(
            found,
            [
                "arn:aws:s3:::a",
                "arn:aws:s3:::a/*",
                "arn:aws:s3:::a/*",
                "arn:aws:s3:::b",
                "arn:aws:s3:::b/*"
            ]
        );
        let sids: BTreeSet<&str> = policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["Sid"].as_str().unwrap())
            .collect();
        assert_eq!(sids.len(), 5, "Sids are unique: {sids:?}");
        let b_objects = &policy["Statement"][4]["Action"];
        assert!(!b_objects.to_string().contains("Put"), "b is read-only: {b_objects}");
    }

    #[test]
    fn encoded_policies_read_back() {
        let text = r#"{"Statement":[{"Resource":"arn:aws:s3:::a b"}]}"#;
        let encoded = "%7B%22Statement%22%3A%5B%7B%22Resource%22%3A%22arn%3Aaws%3As3%3A%3A%3Aa%20b%22%7D%5D%7D";
        assert_eq!(percent_decoded(encoded), text);
        assert_eq!(percent_decoded(text), text);
        // IAM names may hold `+`: it stays one.
        let plus = r#"{"Statement":[{"Resource":"arn:aws:iam::1:user/a+b"}]}"#;
        let encoded = "%7B%22Statement%22%3A%5B%7B%22Resource%22%3A%22arn%3Aaws%3Aiam%3A%3A1%3Auser%2Fa+b%22%7D%5D%7D";
        assert_eq!(percent_decoded(encoded), plus);
    }

    #[test]
    fn refusals_say_why() {
        assert!(cosi_owner("obc-1").unwrap_err().to_string().contains("not a COSI owner id"));
        assert!(cosi_owner("cosi-a-1").is_ok());
        let quota = Quotas { max_objects: Some(1), max_bytes: None };
        assert!(no_quotas(quota).unwrap_err().to_string().contains("no bucket or user quotas"));
        let params = BTreeMap::from([("region".to_string(), "x".to_string())]);
        assert!(no_parameters(&params).unwrap_err().to_string().contains("\"region\""));
    }
}
