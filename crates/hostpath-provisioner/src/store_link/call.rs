//! The store operations the controller asks of the endpoint's store, as data: one [`Call`] per
//! operation, answered by one [`Reply`]. The same [`Call::run`] answers them in one process and
//! across the local socket, so both ways run the same code.

use std::collections::HashMap;
use std::path::PathBuf;

use s3_endpoint::store::{
    BucketLock, CorsConfig, DefaultRetention, KeyMode, LifecycleConfig, OwnKey, Session, Settable,
    Versioning, WebIdentityAccess,
};
use s3_endpoint::{
    AccessKey, AdminCredentials, BucketRecord, BucketStore, Creator, Quota, RetentionCeiling,
    StoreError, Usage,
};
use serde::{Deserialize, Serialize};

/// One store operation and its arguments. No `Debug`: [`Call::SetAdmin`] carries a secret.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "call")]
pub enum Call {
    /// The store's identity and root.
    Hello,
    BucketExists {
        bucket: String,
    },
    BucketRecord {
        bucket: String,
    },
    CreateBucket {
        bucket: String,
        creator: OwnedCreator,
    },
    ProvisionBucket {
        bucket: String,
        creator: OwnedCreator,
    },
    IssueKey {
        user_id: String,
        bucket: String,
    },
    IssueOwnKey {
        user_id: String,
        bucket: String,
        mode: KeyMode,
        quota: Quota,
        web_identity: Option<WebIdentityAccess>,
    },
    RevokeKeys {
        user_id: String,
    },
    RotateKey {
        user_id: String,
        bucket: String,
        keep: String,
    },
    RetireKey {
        user_id: String,
        access_key_id: String,
    },
    DeleteBucket {
        bucket: String,
        user_id: String,
    },
    SetUserQuota {
        user_id: String,
        bucket: String,
        quota: Quota,
    },
    SetBucketQuota {
        bucket: String,
        user_id: String,
        quota: Quota,
    },
    SetKeyMode {
        user_id: String,
        bucket: String,
        mode: KeyMode,
    },
    SetWebIdentity {
        user_id: String,
        bucket: String,
        access: Option<WebIdentityAccess>,
    },
    SetBucketSettable {
        bucket: String,
        user_id: String,
        settable: Settable,
    },
    SetBucketCors {
        bucket: String,
        config: Option<CorsConfig>,
    },
    SetBucketLifecycle {
        bucket: String,
        config: Option<LifecycleConfig>,
    },
    BucketVersioning {
        bucket: String,
    },
    SetBucketVersioning {
        bucket: String,
        status: Versioning,
    },
    BucketObjectLock {
        bucket: String,
    },
    EnableObjectLock {
        bucket: String,
    },
    SetObjectLockDefault {
        bucket: String,
        default: Option<DefaultRetention>,
    },
    SetRetentionCeiling {
        bucket: String,
        ceiling: Option<RetentionCeiling>,
    },
    /// A bucket's usage, a claim's share of it, and the bucket's quota.
    Usage {
        bucket: String,
        user_id: Option<String>,
    },
    /// The operator credential as a key pair, checked again where it is set.
    SetAdmin {
        admin: Option<(String, String)>,
    },
    IdentityHeard {
        subject: String,
        uid: Option<String>,
    },
    RetainSessions {
        kept: SessionsKept,
    },
}

/// [`Creator`] with its user id owned, to travel.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnedCreator {
    /// See [`Creator::user_id`].
    pub user_id: String,
    /// See [`Creator::delete_with_claim`].
    pub delete_with_claim: bool,
}

impl From<Creator<'_>> for OwnedCreator {
    fn from(creator: Creator<'_>) -> Self {
        Self { user_id: creator.user_id.to_owned(), delete_with_claim: creator.delete_with_claim }
    }
}

impl OwnedCreator {
    fn borrowed(&self) -> Creator<'_> {
        Creator { user_id: &self.user_id, delete_with_claim: self.delete_with_claim }
    }
}

/// Which web identity sessions live on, by what the ServiceAccount watch saw: a rule as data, so
/// that it can cross the socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SessionsKept {
    /// A complete list: sessions of ServiceAccounts it holds (subject to uid), and every session
    /// of another kind of subject.
    Listed(HashMap<String, Option<String>>),
    /// One ServiceAccount is there with this uid: its sessions of another uid end.
    Account {
        /// `system:serviceaccount:<namespace>:<name>`.
        subject: String,
        /// Its uid, if known.
        uid: Option<String>,
    },
    /// One ServiceAccount is gone: all its sessions end.
    Gone {
        /// `system:serviceaccount:<namespace>:<name>`.
        subject: String,
    },
}

impl SessionsKept {
    /// Whether `session` lives on.
    pub fn keeps(&self, session: &Session) -> bool {
        match self {
            Self::Listed(alive) => {
                !session.subject.starts_with("system:serviceaccount:")
                    || alive
                        .get(&session.subject)
                        .is_some_and(|uid| same(uid, &session.subject_uid))
            }
            Self::Account { subject, uid } => {
                &session.subject != subject || same(uid, &session.subject_uid)
            }
            Self::Gone { subject } => &session.subject != subject,
        }
    }
}

/// Whether a session minted for `session_uid` belongs to the ServiceAccount of `uid`; a session
/// or account without a uid is matched by name alone.
fn same(uid: &Option<String>, session_uid: &Option<String>) -> bool {
    match (uid, session_uid) {
        (Some(uid), Some(session_uid)) => uid == session_uid,
        _ => true,
    }
}

/// What a [`Call`] answers. No `Debug`: keys carry secrets.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "reply")]
pub enum Reply {
    Hello { identity: String, root: PathBuf },
    Done,
    Flag { value: bool },
    Count { value: usize },
    Key { key: AccessKey },
    OwnKey { issued: Option<AccessKey> },
    Record { record: Option<BucketRecord> },
    Created { record: BucketRecord },
    Provisioned { record: BucketRecord, key: AccessKey },
    Versioning { status: Option<Versioning> },
    Lock { lock: Option<BucketLock> },
    Usage { usage: Option<(Usage, Usage)>, quota: Option<Quota> },
}

impl Call {
    /// The operation's name, for logs.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Hello => "Hello",
            Self::BucketExists { .. } => "BucketExists",
            Self::BucketRecord { .. } => "BucketRecord",
            Self::CreateBucket { .. } => "CreateBucket",
            Self::ProvisionBucket { .. } => "ProvisionBucket",
            Self::IssueKey { .. } => "IssueKey",
            Self::IssueOwnKey { .. } => "IssueOwnKey",
            Self::RevokeKeys { .. } => "RevokeKeys",
            Self::RotateKey { .. } => "RotateKey",
            Self::RetireKey { .. } => "RetireKey",
            Self::DeleteBucket { .. } => "DeleteBucket",
            Self::SetUserQuota { .. } => "SetUserQuota",
            Self::SetBucketQuota { .. } => "SetBucketQuota",
            Self::SetKeyMode { .. } => "SetKeyMode",
            Self::SetWebIdentity { .. } => "SetWebIdentity",
            Self::SetBucketSettable { .. } => "SetBucketSettable",
            Self::SetBucketCors { .. } => "SetBucketCors",
            Self::SetBucketLifecycle { .. } => "SetBucketLifecycle",
            Self::BucketVersioning { .. } => "BucketVersioning",
            Self::SetBucketVersioning { .. } => "SetBucketVersioning",
            Self::BucketObjectLock { .. } => "BucketObjectLock",
            Self::EnableObjectLock { .. } => "EnableObjectLock",
            Self::SetObjectLockDefault { .. } => "SetObjectLockDefault",
            Self::SetRetentionCeiling { .. } => "SetRetentionCeiling",
            Self::Usage { .. } => "Usage",
            Self::SetAdmin { .. } => "SetAdmin",
            Self::IdentityHeard { .. } => "IdentityHeard",
            Self::RetainSessions { .. } => "RetainSessions",
        }
    }

    /// Answers the call on `store`.
    pub async fn run(self, store: &BucketStore) -> Result<Reply, StoreError> {
        let done = |_| Reply::Done;
        Ok(match self {
            Self::Hello => Reply::Hello {
                identity: store.identity().to_owned(),
                root: store.root().to_owned(),
            },
            Self::BucketExists { bucket } => Reply::Flag { value: store.bucket_exists(&bucket)? },
            Self::BucketRecord { bucket } => Reply::Record { record: store.bucket_record(&bucket) },
            Self::CreateBucket { bucket, creator } => {
                Reply::Created { record: store.create_bucket(&bucket, creator.borrowed()).await? }
            }
            Self::ProvisionBucket { bucket, creator } => {
                let (record, key) = store.provision_bucket(&bucket, creator.borrowed()).await?;
                Reply::Provisioned { record, key }
            }
            Self::IssueKey { user_id, bucket } => {
                Reply::Key { key: store.issue_key(&user_id, &bucket).await? }
            }
            Self::IssueOwnKey { user_id, bucket, mode, quota, web_identity } => {
                let found =
                    store.issue_own_key(&user_id, &bucket, (mode, quota), web_identity).await?;
                let issued = match found {
                    OwnKey::Issued(key) => Some(key),
                    OwnKey::Differs => None,
                };
                Reply::OwnKey { issued }
            }
            Self::RevokeKeys { user_id } => {
                Reply::Count { value: store.revoke_keys(&user_id).await? }
            }
            Self::RotateKey { user_id, bucket, keep } => {
                Reply::Key { key: store.rotate_key(&user_id, &bucket, &keep).await? }
            }
            Self::RetireKey { user_id, access_key_id } => {
                Reply::Flag { value: store.retire_key(&user_id, &access_key_id).await? }
            }
            Self::DeleteBucket { bucket, user_id } => {
                Reply::Flag { value: store.delete_bucket(&bucket, &user_id).await? }
            }
            Self::SetUserQuota { user_id, bucket, quota } => {
                store.set_user_quota(&user_id, &bucket, quota).await.map(done)?
            }
            Self::SetBucketQuota { bucket, user_id, quota } => {
                store.set_bucket_quota(&bucket, &user_id, quota).await.map(done)?
            }
            Self::SetKeyMode { user_id, bucket, mode } => {
                store.set_key_mode(&user_id, &bucket, mode).await.map(done)?
            }
            Self::SetWebIdentity { user_id, bucket, access } => {
                store.set_web_identity(&user_id, &bucket, access).await.map(done)?
            }
            Self::SetBucketSettable { bucket, user_id, settable } => {
                store.set_bucket_settable(&bucket, &user_id, settable).await.map(done)?
            }
            Self::SetBucketCors { bucket, config } => {
                store.set_bucket_cors(&bucket, config).await.map(done)?
            }
            Self::SetBucketLifecycle { bucket, config } => {
                store.set_bucket_lifecycle(&bucket, config).await.map(done)?
            }
            Self::BucketVersioning { bucket } => {
                Reply::Versioning { status: store.bucket_versioning(&bucket).await? }
            }
            Self::SetBucketVersioning { bucket, status } => {
                store.set_bucket_versioning(&bucket, status).await.map(done)?
            }
            Self::BucketObjectLock { bucket } => {
                Reply::Lock { lock: store.bucket_object_lock(&bucket).await? }
            }
            Self::EnableObjectLock { bucket } => {
                store.enable_object_lock(&bucket).await.map(done)?
            }
            Self::SetObjectLockDefault { bucket, default } => {
                store.set_object_lock_default(&bucket, default).await.map(done)?
            }
            Self::SetRetentionCeiling { bucket, ceiling } => {
                store.set_retention_ceiling(&bucket, ceiling).await.map(done)?
            }
            Self::Usage { bucket, user_id } => Reply::Usage {
                usage: store.usage(&bucket, user_id.as_deref()),
                quota: store.bucket_quota(&bucket),
            },
            Self::SetAdmin { admin } => {
                let admin = admin
                    .map(|(id, secret)| AdminCredentials::new(&id, &secret))
                    .transpose()
                    .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
                store.set_admin(admin);
                Reply::Done
            }
            Self::IdentityHeard { subject, uid } => {
                store.identity_heard(&subject, uid);
                Reply::Done
            }
            Self::RetainSessions { kept } => {
                Reply::Count { value: store.retain_sessions(move |s| kept.keeps(s)).await? }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(subject: &str, uid: Option<&str>) -> Session {
        Session {
            access_key_id: "ASIA".into(),
            secret_access_key: "s".into(),
            session_token: "t".into(),
            user_id: "u".into(),
            subject: subject.into(),
            subject_uid: uid.map(str::to_owned),
            expires_unix: 0,
        }
    }

    #[test]
    fn a_session_belongs_to_the_account_of_its_uid() {
        let some = |s: &str| Some(s.to_owned());
        assert!(same(&some("a"), &some("a")));
        assert!(!same(&some("b"), &some("a")));
        assert!(same(&None, &some("a")));
        assert!(same(&some("a"), &None));
    }

    #[test]
    fn each_rule_keeps_what_the_watch_saw_alive() {
        let sa = "system:serviceaccount:t:app";
        let listed = SessionsKept::Listed([(sa.to_owned(), Some("1".to_owned()))].into());
        assert!(listed.keeps(&session(sa, Some("1"))));
        assert!(!listed.keeps(&session(sa, Some("2"))));
        assert!(!listed.keeps(&session("system:serviceaccount:t:gone", None)));
        assert!(listed.keeps(&session("someone-else", None)));
        let account = SessionsKept::Account { subject: sa.into(), uid: Some("2".into()) };
        assert!(account.keeps(&session(sa, Some("2"))));
        assert!(!account.keeps(&session(sa, Some("1"))));
        assert!(account.keeps(&session("system:serviceaccount:t:other", Some("1"))));
        let gone = SessionsKept::Gone { subject: sa.into() };
        assert!(!gone.keeps(&session(sa, Some("2"))));
        assert!(gone.keeps(&session("system:serviceaccount:t:other", None)));
    }
}
