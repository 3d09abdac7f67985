//! The bucket store as the controller reaches it: in this process, or the S3 endpoint's own
//! process across a Unix socket, so that the process tenants talk to holds no Kubernetes
//! credential and the one that holds it serves no tenant.
//!
//! - [`StoreLink`]: every store operation the controller and the COSI driver use.
//! - [`server`]: the endpoint's side, answering them on a socket.
//! - [`remote`]: the controller's side, asking them on a socket.
//! - `call`: each operation as data, answered by the same code either way.

pub(crate) mod call;
pub mod remote;
pub mod server;
pub(crate) mod wire;

use std::path::Path;
use std::sync::Arc;

use s3_endpoint::store::{
    BucketLock, CorsConfig, DefaultRetention, KeyMode, LifecycleConfig, OwnKey, Settable,
    Versioning, WebIdentityAccess,
};
use s3_endpoint::{
    AccessKey, AdminCredentials, BucketRecord, BucketStore, Creator, Quota, RetentionCeiling,
    StoreError,
};

pub use call::SessionsKept;
use call::{Call, Reply};
pub use remote::{RemoteStore, UsageFigures};
pub use wire::bind_socket;

/// The store the controller acts on.
#[derive(Clone)]
pub enum StoreLink {
    /// Opened by this process, which also serves the endpoint.
    Local(Arc<BucketStore>),
    /// Opened by the endpoint's process, reached over its socket.
    Remote(RemoteStore),
}

impl std::fmt::Debug for StoreLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local(store) => f.debug_tuple("Local").field(&store.root()).finish(),
            Self::Remote(remote) => f.debug_tuple("Remote").field(remote).finish(),
        }
    }
}

impl From<Arc<BucketStore>> for StoreLink {
    fn from(store: Arc<BucketStore>) -> Self {
        Self::Local(store)
    }
}

/// An answer of another kind than the call asks: both ends are one binary, so only a bug.
fn odd(call: &str) -> StoreError {
    StoreError::Io(std::io::Error::other(format!("the store answered {call} with another kind")))
}

macro_rules! expect {
    ($self:ident, $call:expr, $pattern:pat => $value:expr) => {{
        let call = $call;
        let name = call.name();
        match $self.call(call).await? {
            $pattern => Ok($value),
            _ => Err(odd(name)),
        }
    }};
}

impl StoreLink {
    async fn call(&self, call: Call) -> Result<Reply, StoreError> {
        match self {
            Self::Local(store) => call.run(store).await,
            Self::Remote(remote) => remote.call(call).await,
        }
    }

    /// Who owns the buckets created here.
    pub fn identity(&self) -> &str {
        match self {
            Self::Local(store) => store.identity(),
            Self::Remote(remote) => remote.identity(),
        }
    }

    /// The directory holding the buckets, as the store's process sees it.
    pub fn root(&self) -> &Path {
        match self {
            Self::Local(store) => store.root(),
            Self::Remote(remote) => remote.root(),
        }
    }

    /// See [`BucketStore::bucket_exists`].
    pub async fn bucket_exists(&self, bucket: &str) -> Result<bool, StoreError> {
        expect!(self, Call::BucketExists { bucket: bucket.into() }, Reply::Flag { value } => value)
    }

    /// See [`BucketStore::bucket_record`].
    pub async fn bucket_record(&self, bucket: &str) -> Result<Option<BucketRecord>, StoreError> {
        expect!(self, Call::BucketRecord { bucket: bucket.into() }, Reply::Record { record } => record)
    }

    /// See [`BucketStore::create_bucket`].
    pub async fn create_bucket(
        &self,
        bucket: &str,
        creator: Creator<'_>,
    ) -> Result<BucketRecord, StoreError> {
        let call = Call::CreateBucket { bucket: bucket.into(), creator: creator.into() };
        expect!(self, call, Reply::Created { record } => record)
    }

    /// See [`BucketStore::provision_bucket`].
    pub async fn provision_bucket(
        &self,
        bucket: &str,
        creator: Creator<'_>,
    ) -> Result<(BucketRecord, AccessKey), StoreError> {
        let call = Call::ProvisionBucket { bucket: bucket.into(), creator: creator.into() };
        expect!(self, call, Reply::Provisioned { record, key } => (record, key))
    }

    /// See [`BucketStore::issue_key`].
    pub async fn issue_key(&self, user_id: &str, bucket: &str) -> Result<AccessKey, StoreError> {
        let call = Call::IssueKey { user_id: user_id.into(), bucket: bucket.into() };
        expect!(self, call, Reply::Key { key } => key)
    }

    /// See [`BucketStore::issue_own_key`].
    pub async fn issue_own_key(
        &self,
        user_id: &str,
        bucket: &str,
        (mode, quota): (KeyMode, Quota),
        web_identity: Option<WebIdentityAccess>,
    ) -> Result<OwnKey, StoreError> {
        let call = Call::IssueOwnKey {
            user_id: user_id.into(),
            bucket: bucket.into(),
            mode,
            quota,
            web_identity,
        };
        expect!(self, call, Reply::OwnKey { issued } => issued.map_or(OwnKey::Differs, OwnKey::Issued))
    }

    /// See [`BucketStore::revoke_keys`].
    pub async fn revoke_keys(&self, user_id: &str) -> Result<usize, StoreError> {
        expect!(self, Call::RevokeKeys { user_id: user_id.into() }, Reply::Count { value } => value)
    }

    /// See [`BucketStore::rotate_key`].
    pub async fn rotate_key(
        &self,
        user_id: &str,
        bucket: &str,
        keep: &str,
    ) -> Result<AccessKey, StoreError> {
        let call =
            Call::RotateKey { user_id: user_id.into(), bucket: bucket.into(), keep: keep.into() };
        expect!(self, call, Reply::Key { key } => key)
    }

    /// See [`BucketStore::retire_key`].
    pub async fn retire_key(&self, user_id: &str, access_key_id: &str) -> Result<bool, StoreError> {
        let call = Call::RetireKey { user_id: user_id.into(), access_key_id: access_key_id.into() };
        expect!(self, call, Reply::Flag { value } => value)
    }

    /// See [`BucketStore::delete_bucket`].
    pub async fn delete_bucket(&self, bucket: &str, user_id: &str) -> Result<bool, StoreError> {
        let call = Call::DeleteBucket { bucket: bucket.into(), user_id: user_id.into() };
        expect!(self, call, Reply::Flag { value } => value)
    }

    /// See [`BucketStore::set_user_quota`].
    pub async fn set_user_quota(
        &self,
        user_id: &str,
        bucket: &str,
        quota: Quota,
    ) -> Result<(), StoreError> {
        let call = Call::SetUserQuota { user_id: user_id.into(), bucket: bucket.into(), quota };
        expect!(self, call, Reply::Done => ())
    }

    /// See [`BucketStore::set_bucket_quota`].
    pub async fn set_bucket_quota(
        &self,
        bucket: &str,
        user_id: &str,
        quota: Quota,
    ) -> Result<(), StoreError> {
        let call = Call::SetBucketQuota { bucket: bucket.into(), user_id: user_id.into(), quota };
        expect!(self, call, Reply::Done => ())
    }

    /// See [`BucketStore::set_key_mode`].
    pub async fn set_key_mode(
        &self,
        user_id: &str,
        bucket: &str,
        mode: KeyMode,
    ) -> Result<(), StoreError> {
        let call = Call::SetKeyMode { user_id: user_id.into(), bucket: bucket.into(), mode };
        expect!(self, call, Reply::Done => ())
    }

    /// See [`BucketStore::set_web_identity`].
    pub async fn set_web_identity(
        &self,
        user_id: &str,
        bucket: &str,
        access: Option<WebIdentityAccess>,
    ) -> Result<(), StoreError> {
        let call = Call::SetWebIdentity { user_id: user_id.into(), bucket: bucket.into(), access };
        expect!(self, call, Reply::Done => ())
    }

    /// See [`BucketStore::set_bucket_settable`].
    pub async fn set_bucket_settable(
        &self,
        bucket: &str,
        user_id: &str,
        settable: Settable,
    ) -> Result<(), StoreError> {
        let call =
            Call::SetBucketSettable { bucket: bucket.into(), user_id: user_id.into(), settable };
        expect!(self, call, Reply::Done => ())
    }

    /// See [`BucketStore::set_bucket_cors`].
    pub async fn set_bucket_cors(
        &self,
        bucket: &str,
        config: Option<CorsConfig>,
    ) -> Result<(), StoreError> {
        expect!(self, Call::SetBucketCors { bucket: bucket.into(), config }, Reply::Done => ())
    }

    /// See [`BucketStore::set_bucket_lifecycle`].
    pub async fn set_bucket_lifecycle(
        &self,
        bucket: &str,
        config: Option<LifecycleConfig>,
    ) -> Result<(), StoreError> {
        expect!(self, Call::SetBucketLifecycle { bucket: bucket.into(), config }, Reply::Done => ())
    }

    /// See [`BucketStore::bucket_versioning`].
    pub async fn bucket_versioning(&self, bucket: &str) -> Result<Option<Versioning>, StoreError> {
        let call = Call::BucketVersioning { bucket: bucket.into() };
        expect!(self, call, Reply::Versioning { status } => status)
    }

    /// See [`BucketStore::set_bucket_versioning`].
    pub async fn set_bucket_versioning(
        &self,
        bucket: &str,
        status: Versioning,
    ) -> Result<(), StoreError> {
        let call = Call::SetBucketVersioning { bucket: bucket.into(), status };
        expect!(self, call, Reply::Done => ())
    }

    /// See [`BucketStore::bucket_object_lock`].
    pub async fn bucket_object_lock(&self, bucket: &str) -> Result<Option<BucketLock>, StoreError> {
        expect!(self, Call::BucketObjectLock { bucket: bucket.into() }, Reply::Lock { lock } => lock)
    }

    /// See [`BucketStore::enable_object_lock`].
    pub async fn enable_object_lock(&self, bucket: &str) -> Result<(), StoreError> {
        expect!(self, Call::EnableObjectLock { bucket: bucket.into() }, Reply::Done => ())
    }

    /// See [`BucketStore::set_object_lock_default`].
    pub async fn set_object_lock_default(
        &self,
        bucket: &str,
        default: Option<DefaultRetention>,
    ) -> Result<(), StoreError> {
        let call = Call::SetObjectLockDefault { bucket: bucket.into(), default };
        expect!(self, call, Reply::Done => ())
    }

    /// See [`BucketStore::set_retention_ceiling`].
    pub async fn set_retention_ceiling(
        &self,
        bucket: &str,
        ceiling: Option<RetentionCeiling>,
    ) -> Result<(), StoreError> {
        let call = Call::SetRetentionCeiling { bucket: bucket.into(), ceiling };
        expect!(self, call, Reply::Done => ())
    }

    /// What `bucket` holds, what `user_id`'s key stored in it, and its quota, from memory
    /// (see [`BucketStore::usage`]; a remote store answers what it read last).
    pub fn usage_now(&self, bucket: &str, user_id: Option<&str>) -> Option<UsageFigures> {
        match self {
            Self::Local(store) => {
                let (total, claim) = store.usage(bucket, user_id)?;
                Some((total, claim, store.bucket_quota(bucket).unwrap_or_default()))
            }
            Self::Remote(remote) => remote.usage_now(bucket, user_id),
        }
    }

    /// See [`BucketStore::set_admin`].
    pub async fn set_admin(&self, admin: Option<AdminCredentials>) -> Result<(), StoreError> {
        let admin = admin.map(|a| (a.access_key_id().to_owned(), a.secret_access_key().to_owned()));
        expect!(self, Call::SetAdmin { admin }, Reply::Done => ())
    }

    /// See [`BucketStore::identity_heard`].
    pub async fn identity_heard(
        &self,
        subject: &str,
        uid: Option<String>,
    ) -> Result<(), StoreError> {
        expect!(self, Call::IdentityHeard { subject: subject.into(), uid }, Reply::Done => ())
    }

    /// Ends every web identity session `kept` does not keep (see
    /// [`BucketStore::retain_sessions`]); answers how many ended.
    pub async fn retain_sessions(&self, kept: SessionsKept) -> Result<usize, StoreError> {
        expect!(self, Call::RetainSessions { kept }, Reply::Count { value } => value)
    }
}
