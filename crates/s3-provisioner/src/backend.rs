//! The [`Provisioner`] for S3: buckets through the S3 API, per-claim access through IAM.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{BehaviorVersion, Region, SharedCredentialsProvider, SharedHttpClient};
use bucket_api::ObjectBucket;
use bucket_provisioner::bucket::features::object_lock::{OBJECT_LOCK, change_refusal};
use bucket_provisioner::bucket::features::versioning::{VERSIONING, Versioning};
use bucket_provisioner::bucket::standalone::{BucketLocation, IssuedKey, KeyRequest, NewBucket};
use bucket_provisioner::{
    AccessMode, Adoption, BackendError, BucketOptions, Credentials, ProvisionedBucket, Provisioner,
    Removed, WebIdentity, access_mode_of, user_id_of,
};
use tokio::sync::OnceCell;

use crate::aws::{Clients, clients, http_client, retry_config};
use crate::bucket::{Buckets, NameLocks};

use crate::config::{ACCEPTED, BUCKET_LIFECYCLE, BUCKET_POLICY, CORS, ClaimConfig, names_user};
use crate::iam::{self, Users};
use crate::iam_roles::{RoleSpec, Roles, role_tag};
use crate::key_records::KeyRecords;
use crate::legacy::{self, Adopted};
use crate::owner::{ClassParameters, OwnerCredentials};
use crate::params::{
    CREATE_BUCKET_USER, DEFAULT_REGION, STATE_POLICY_NAME, STATE_ROLE_NAME, STATE_USER_NAME,
    Settings, WEB_IDENTITY_PROVIDER,
};
use crate::web_identity;

pub mod cosi_roles;
pub mod standalone;

/// Buckets on AWS S3 or an S3-compatible service, with an IAM user per claim.
///
/// The owner's keys come from an [`OwnerCredentials`] resolver (see [`crate::cluster`]), so this
/// type never talks to Kubernetes itself.
pub struct S3Provisioner {
    owner: Arc<dyn OwnerCredentials>,
    classes: Option<Arc<dyn ClassParameters>>,
    /// StorageClass parameters seen by `validate`, for cleanups without recorded state.
    seen: Mutex<HashMap<String, BTreeMap<String, String>>>,
    http: SharedHttpClient,
    retry: RetryConfig,
    default_chain: OnceCell<Option<SharedCredentialsProvider>>,
    creating: NameLocks,
    /// The store the COSI front's buckets and keys are on (see [`standalone`]).
    standalone: Option<Settings>,
    /// Where the COSI front's keys are recorded, secrets included.
    key_records: Option<Arc<dyn KeyRecords>>,
}

/// Clients for one call, with what messages say about the owner.
struct Session {
    clients: Clients,
    owner: String,
    /// The owner's keys when they came from a Secret (only those can be handed to a claim).
    owner_keys: Option<Credentials>,
}

impl S3Provisioner {
    /// A provisioner reading owner keys through `owner`.
    pub fn new(owner: Arc<dyn OwnerCredentials>) -> Self {
        Self {
            owner,
            classes: None,
            seen: Mutex::new(HashMap::new()),
            http: http_client(),
            retry: retry_config(4),
            default_chain: OnceCell::new(),
            creating: NameLocks::default(),
            standalone: None,
            key_records: None,
        }
    }

    /// Records each COSI access's key in `records`, so that a repeated grant answers the key
    /// in use; without records it can only replace it (IAM shows a secret once).
    pub fn with_key_records(mut self, records: Arc<dyn KeyRecords>) -> Self {
        self.key_records = Some(records);
        self
    }

    /// Also consult StorageClasses when cleaning up after a claim whose ObjectBucket (and so
    /// its recorded state) was never written.
    pub fn with_class_parameters(mut self, classes: Arc<dyn ClassParameters>) -> Self {
        self.classes = Some(classes);
        self
    }

    /// How often one S3 or IAM request is attempted before its failure is reported (default 4).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.retry = retry_config(attempts);
        self
    }

    async fn session(&self, settings: &Settings) -> Result<Session, BackendError> {
        let owner = settings.owner_description();
        let (provider, owner_keys) = match &settings.owner_secret {
            Some(secret) => {
                let keys = self.owner.owner_credentials(secret).await?;
                let provider =
                    SharedCredentialsProvider::new(aws_sdk_s3::config::Credentials::new(
                        keys.access_key_id.clone(),
                        keys.secret_access_key.clone(),
                        None,
                        None,
                        "owner-secret",
                    ));
                (provider, Some(keys))
            }
            None => (self.default_credentials().await?, None),
        };
        let clients = clients(settings, provider, &self.http, &self.retry);
        Ok(Session { clients, owner, owner_keys })
    }

    /// The default AWS credential chain (environment, web identity, container and instance
    /// metadata), built once and only when a StorageClass names no Secret.
    async fn default_credentials(&self) -> Result<SharedCredentialsProvider, BackendError> {
        let provider = self
            .default_chain
            .get_or_init(|| async {
                aws_config::defaults(BehaviorVersion::latest())
                    .http_client(self.http.clone())
                    .region(Region::new(DEFAULT_REGION))
                    .load()
                    .await
                    .credentials_provider()
            })
            .await;
        provider.clone().ok_or_else(|| {
            BackendError::transient("the default AWS credential chain found no credentials")
        })
    }

    /// Gives the claim its own IAM user for `bucket`, or the owner's keys when the StorageClass
    /// asks for that explicitly. Never falls back from one to the other.
    async fn access(
        &self,
        session: &Session,
        settings: &Settings,
        options: &BucketOptions,
    ) -> Result<ProvisionedBucket, BackendError> {
        let mut state = settings.to_state();
        let sessions_only = options.web_identity.as_ref().is_some_and(|w| w.sessions_only);
        let credentials = if settings.create_bucket_user && sessions_only {
            // No key anywhere: the claim's ServiceAccounts assume its role, and nothing else.
            Credentials { access_key_id: String::new(), secret_access_key: String::new() }
        } else if settings.create_bucket_user {
            let user = iam::user_name(&options.user_id);
            let policy_name = iam::policy_name(&options.bucket_name);
            let policy = iam::policy_document(
                settings.partition(),
                &options.bucket_name,
                options.access_mode,
            );
            let users = Users { iam: &session.clients.iam, owner: &session.owner };
            let credentials =
                users.ensure(&user, &options.bucket_name, &policy_name, &policy).await?;
            state.insert(STATE_USER_NAME.into(), user);
            state.insert(STATE_POLICY_NAME.into(), policy_name);
            credentials
        } else {
            session.owner_keys.clone().ok_or_else(|| {
                BackendError::invalid_parameter("createBucketUser=false needs secretName")
            })?
        };
        self.let_in(session, settings, options, &mut state).await?;
        Ok(ProvisionedBucket {
            endpoint: settings.consumer_endpoint(),
            credentials,
            additional_state: state,
        })
    }

    /// Gives the claim's ServiceAccounts its role, with the claim's mode on its bucket, or
    /// deletes the role when the claim names none (any it let in before are let in no more).
    async fn let_in(
        &self,
        session: &Session,
        settings: &Settings,
        options: &BucketOptions,
        state: &mut BTreeMap<String, String>,
    ) -> Result<(), BackendError> {
        let Some(class) = &settings.web_identity else {
            return match options.web_identity {
                Some(_) => Err(web_identity::not_configured(&format!(
                    "the StorageClass names no {WEB_IDENTITY_PROVIDER}"
                ))),
                None => Ok(()),
            };
        };
        let roles = Roles { iam: &session.clients.iam, owner: &session.owner };
        let role = iam::user_name(&options.user_id);
        let Some(asked) = &options.web_identity else { return roles.remove(&role).await };
        let policy =
            iam::policy_document(settings.partition(), &options.bucket_name, options.access_mode);
        let spec = RoleSpec {
            name: &role,
            tag: role_tag("objectbucket.io/bucket", &options.bucket_name)?,
            trust: &class.provider.trust_policy(&class.audience, &asked.subjects),
            policy_name: &iam::policy_name(&options.bucket_name),
            policy: &policy,
            max_session_secs: asked.max_session_secs,
        };
        roles.ensure(&spec).await?;
        state.insert(STATE_ROLE_NAME.into(), role);
        Ok(())
    }

    /// Applies the claim's object lock retention, versioning, bucket policy, lifecycle and CORS
    /// rules to its bucket, removing those `previous` (the `additionalConfig` the ObjectBucket
    /// recorded) had and the claim no longer asks for (versioning is suspended). An object lock
    /// change S3 cannot make, or one weakening a COMPLIANCE retention, is refused before anything
    /// changes. The policy's principals are checked again against the claim's user as IAM
    /// names it.
    async fn configure(
        &self,
        session: &Session,
        settings: &Settings,
        options: &BucketOptions,
        config: &ClaimConfig,
        previous: &BTreeMap<String, String>,
    ) -> Result<(), BackendError> {
        let buckets =
            Buckets { s3: &session.clients.s3, owner: &session.owner, locks: &self.creating };
        let bucket = &options.bucket_name;
        if config.object_lock.is_some() || previous.contains_key(OBJECT_LOCK) {
            let on_bucket = buckets.object_lock(bucket).await?;
            if let Some(refusal) = change_refusal(bucket, on_bucket, config.object_lock.as_ref()) {
                return Err(refusal);
            }
            if let Some(lock) = &config.object_lock
                && on_bucket != Some(lock.retention)
            {
                buckets.set_object_lock(bucket, lock).await?;
            }
        }
        match config.versioning {
            Some(state) => buckets.set_versioning(bucket, state).await?,
            // Never unversioned again; a locked bucket stays versioned.
            None if previous.contains_key(VERSIONING) && config.object_lock.is_none() => {
                buckets.set_versioning(bucket, Versioning::Suspended).await?;
            }
            None => {}
        }
        match &config.policy {
            Some(policy) => {
                let own = match settings.create_bucket_user {
                    true => {
                        let users = Users { iam: &session.clients.iam, owner: &session.owner };
                        Some(users.arn(&iam::user_name(&options.user_id)).await?)
                    }
                    false => None,
                };
                policy
                    .check_principals(|p| own.as_deref() == Some(p), &settings.policy_principals)?;
                buckets.set_policy(bucket, Some(&policy.document)).await?;
            }
            None if previous.contains_key(BUCKET_POLICY) => {
                buckets.set_policy(bucket, None).await?
            }
            None => {}
        }
        match &config.lifecycle {
            Some(lifecycle) => buckets.set_lifecycle(bucket, Some(lifecycle)).await?,
            None if previous.contains_key(BUCKET_LIFECYCLE) => {
                buckets.set_lifecycle(bucket, None).await?;
            }
            None => {}
        }
        match &config.cors {
            Some(cors) => buckets.set_cors(bucket, Some(cors)).await?,
            None if previous.contains_key(CORS) => buckets.set_cors(bucket, None).await?,
            None => {}
        }
        Ok(())
    }

    /// The settings a cleanup works with: the ObjectBucket's recorded state; failing that (the
    /// backend succeeded or failed before the ObjectBucket was written) the parameters of its
    /// StorageClass as last seen, or as it is now.
    async fn cleanup_settings(&self, bucket: &ObjectBucket) -> Result<Settings, BackendError> {
        let state = bucket.spec.additional_state.clone().unwrap_or_default();
        if !state.is_empty() {
            return Settings::from_state(&state);
        }
        let class = &bucket.spec.storage_class_name;
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner()).get(class).cloned();
        let parameters = match (seen, &self.classes) {
            (Some(parameters), _) => Some(parameters),
            (None, Some(classes)) => classes.class_parameters(class).await?,
            (None, None) => None,
        };
        match parameters {
            Some(parameters) => Settings::from_parameters(&parameters),
            None => Err(BackendError::permanent(
                "BucketSettingsUnknown",
                format!(
                    "nothing records where bucket {:?} lives (its StorageClass {class:?} is gone); \
                     remove the bucket and IAM user {:?} by hand if they exist",
                    bucket_name(bucket),
                    user_id_of(bucket).map(|u| iam::user_name(&u)).unwrap_or_default()
                ),
            )),
        }
    }

    async fn cleanup_session(&self, settings: &Settings) -> Result<Session, BackendError> {
        self.session(settings).await.map_err(|e| match e {
            // Giving up would leave a user with live keys behind: wait for the Secret instead
            // (the library tells how to abandon the bucket if it never comes back).
            BackendError::Permanent { message, .. } => BackendError::transient(format!(
                "{message}; cleanup waits for the owner credentials"
            )),
            transient => transient,
        })
    }

    /// The claim's IAM user for a rotation, with a session to reach it.
    async fn rotation_user(
        &self,
        bucket: &ObjectBucket,
    ) -> Result<(Session, String), BackendError> {
        let settings = self.cleanup_settings(bucket).await?;
        if !settings.create_bucket_user {
            return Err(BackendError::permanent(
                bucket_provisioner::ROTATION_NOT_SUPPORTED,
                "the claim holds the StorageClass owner's keys (createBucketUser=false): they are \
                 the operator's to rotate, not the claim's",
            ));
        }
        let recorded = bucket.spec.additional_state.as_ref().and_then(|s| s.get(STATE_USER_NAME));
        let user = match (recorded, user_id_of(bucket)) {
            (Some(user), _) => user.clone(),
            (None, Some(user_id)) => iam::user_name(&user_id),
            (None, None) => {
                return Err(BackendError::permanent(
                    "MissingUserId",
                    "the ObjectBucket names no claim UID and records no IAM user",
                ));
            }
        };
        Ok((self.session(&settings).await?, user))
    }

    async fn remove_user(
        &self,
        session: &Session,
        settings: &Settings,
        bucket: &ObjectBucket,
    ) -> Result<(), BackendError> {
        // The role first: its sessions end with it.
        let recorded = bucket.spec.additional_state.as_ref().and_then(|s| s.get(STATE_ROLE_NAME));
        let role = recorded.cloned().or_else(|| user_id_of(bucket).map(|u| iam::user_name(&u)));
        if let (Some(_), Some(role)) = (&settings.web_identity, role) {
            Roles { iam: &session.clients.iam, owner: &session.owner }.remove(&role).await?;
        }
        if !settings.create_bucket_user {
            return Ok(()); // the claim held the owner's keys; there is nothing of its own
        }
        let recorded = bucket.spec.additional_state.as_ref().and_then(|s| s.get(STATE_USER_NAME));
        let user = match (recorded, user_id_of(bucket)) {
            (Some(user), _) => user.clone(),
            (None, Some(user_id)) => iam::user_name(&user_id),
            (None, None) => return Ok(()),
        };
        let users = Users { iam: &session.clients.iam, owner: &session.owner };
        // A claim adopted from the Go aws-s3-provisioner: its old user and policy, and the user
        // of its own a rotation may have moved it to.
        if let Some(adopted) = Adopted::of(bucket) {
            adopted.remove_old(&users).await?;
            return users.remove(&adopted.own_user).await;
        }
        users.remove(&user).await
    }
}

fn bucket_name(bucket: &ObjectBucket) -> String {
    bucket.spec.endpoint.as_ref().map(|e| e.bucket_name.clone()).unwrap_or_default()
}

impl Provisioner for S3Provisioner {
    /// Where the bucket lives and whose keys manage it, so a claim deleted before its
    /// ObjectBucket was written can still be cleaned up after a restart without its StorageClass.
    fn cleanup_state(&self, options: &BucketOptions) -> BTreeMap<String, String> {
        Settings::from_parameters(&options.parameters).map(|s| s.to_state()).unwrap_or_default()
    }

    fn validate(&self, options: &BucketOptions) -> Result<(), BackendError> {
        let settings = Settings::from_parameters(&options.parameters)?;
        claim_config(&settings, options)?;
        if !settings.create_bucket_user && options.access_mode != AccessMode::ReadWrite {
            return Err(BackendError::invalid_parameter(format!(
                "access mode {} needs a user of the claim's own, and this StorageClass hands \
                 claims the owner's keys (createBucketUser=false); use ReadWrite or another \
                 StorageClass",
                options.access_mode
            )));
        }
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(options.storage_class_name.clone(), options.parameters.clone());
        Ok(())
    }

    async fn provision(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        let settings = Settings::from_parameters(&options.parameters)?;
        let config = with_class_defaults(&settings, claim_config(&settings, options)?);
        let session = self.session(&settings).await?;
        let buckets =
            Buckets { s3: &session.clients.s3, owner: &session.owner, locks: &self.creating };
        buckets
            .create(
                &options.bucket_name,
                &settings.region,
                (&options.user_id, options.reclaim_policy),
                config.object_lock.is_some(),
            )
            .await?;
        let provisioned = self.access(&session, &settings, options).await?;
        self.configure(&session, &settings, options, &config, &BTreeMap::new()).await?;
        Ok(provisioned)
    }

    async fn grant(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        let settings = Settings::from_parameters(&options.parameters)?;
        if !claim_config(&settings, options)?.is_empty() {
            return Err(shared_bucket(&options.bucket_name));
        }
        let session = self.session(&settings).await?;
        Buckets { s3: &session.clients.s3, owner: &session.owner, locks: &self.creating }
            .head(&options.bucket_name)
            .await?;
        self.access(&session, &settings, options).await
    }

    async fn delete(&self, bucket: &ObjectBucket) -> Result<Removed, BackendError> {
        let settings = self.cleanup_settings(bucket).await?;
        let session = self.cleanup_session(&settings).await?;
        self.remove_user(&session, &settings, bucket).await?;
        let name = bucket_name(bucket);
        if name.is_empty() {
            return Ok(Removed::Bucket); // no bucket was ever chosen, so none was created
        }
        // Only the claim UID identifies the claim; the bucket's tags decide.
        let Some(user_id) = user_id_of(bucket) else { return Ok(Removed::AccessOnly) };
        Buckets { s3: &session.clients.s3, owner: &session.owner, locks: &self.creating }
            .empty_and_delete(&name, &user_id)
            .await
    }

    /// Takes over what the Go aws-s3-provisioner made for the claim (see [`crate::legacy`]).
    async fn adopt(
        &self,
        options: &BucketOptions,
        legacy: &ObjectBucket,
        created_by_claim: bool,
    ) -> Result<Option<Adoption>, BackendError> {
        let settings = Settings::from_parameters(&options.parameters)?;
        let session = self.session(&settings).await?;
        let buckets =
            Buckets { s3: &session.clients.s3, owner: &session.owner, locks: &self.creating };
        let clients = (&session.clients.iam, &buckets);
        legacy::adopt(clients, &settings, options, legacy, created_by_claim).await.map(Some)
    }

    async fn revoke(&self, bucket: &ObjectBucket) -> Result<(), BackendError> {
        let settings = self.cleanup_settings(bucket).await?;
        let session = self.cleanup_session(&settings).await?;
        self.remove_user(&session, &settings, bucket).await
    }

    /// A second access key for the claim's IAM user (CreateAccessKey), the one in the Secret
    /// kept.
    async fn rotate(&self, bucket: &ObjectBucket, keep: &str) -> Result<Credentials, BackendError> {
        let (session, user) = self.rotation_user(bucket).await?;
        let users = Users { iam: &session.clients.iam, owner: &session.owner };
        match Adopted::of(bucket) {
            Some(adopted) => {
                let settings = self.cleanup_settings(bucket).await?;
                adopted.rotate(&users, &settings, bucket, keep).await
            }
            None => users.rotate(&user, keep).await,
        }
    }

    /// Deletes the claim's previous access key (DeleteAccessKey).
    async fn retire_key(
        &self,
        bucket: &ObjectBucket,
        access_key_id: &str,
    ) -> Result<(), BackendError> {
        let (session, user) = self.rotation_user(bucket).await?;
        let users = Users { iam: &session.clients.iam, owner: &session.owner };
        match Adopted::of(bucket) {
            Some(adopted) => adopted.retire(&users, access_key_id).await,
            None => users.retire(&user, access_key_id).await,
        }
    }

    /// Applies a changed access mode to the claim's user, and a changed `bucketPolicy`,
    /// `bucketLifecycle`, `cors`, `versioning` or `objectLock` retention to the claim's own
    /// bucket, removing what the claim no longer asks for (object lock itself can be neither
    /// added nor removed: refused).
    async fn update(
        &self,
        options: &BucketOptions,
        bucket: &ObjectBucket,
    ) -> Result<(), BackendError> {
        let settings = Settings::from_parameters(&options.parameters)?;
        let config = claim_config(&settings, options)?;
        // The owner's keys are read once, by the first step that needs them.
        let session = OnceCell::new();
        let session = || session.get_or_try_init(|| self.session(&settings));
        if settings.web_identity.is_some() || options.web_identity.is_some() {
            self.let_in(session().await?, &settings, options, &mut BTreeMap::new()).await?;
        }
        let sessions_only = options.web_identity.as_ref().is_some_and(|w| w.sessions_only);
        if settings.create_bucket_user
            && !sessions_only
            && access_mode_of(bucket) != options.access_mode
        {
            let session = session().await?;
            let users = Users { iam: &session.clients.iam, owner: &session.owner };
            let name = &options.bucket_name;
            let policy = iam::policy_document(settings.partition(), name, options.access_mode);
            let user = iam::user_name(&options.user_id);
            users.set_policy(&user, &iam::policy_name(name), &policy).await?;
        }
        let previous = bucket
            .spec
            .endpoint
            .as_ref()
            .and_then(|e| e.additional_config.clone())
            .unwrap_or_default();
        if config.is_empty() && !ACCEPTED.iter().any(|key| previous.contains_key(*key)) {
            return Ok(());
        }
        let session = session().await?;
        let buckets =
            Buckets { s3: &session.clients.s3, owner: &session.owner, locks: &self.creating };
        if !config.is_empty() && !buckets.created_by(&options.bucket_name, &options.user_id).await?
        {
            return Err(shared_bucket(&options.bucket_name));
        }
        let config = with_class_defaults(&settings, config);
        self.configure(session, &settings, options, &config, &previous).await
    }

    /// The claim's role (see [`crate::web_identity`]) and where its ServiceAccounts assume it.
    fn web_identity(&self, options: &BucketOptions) -> Result<WebIdentity, BackendError> {
        let settings = Settings::from_parameters(&options.parameters)?;
        let Some(class) = &settings.web_identity else {
            return Err(web_identity::not_configured(&format!(
                "the StorageClass names no {WEB_IDENTITY_PROVIDER} (the ARN of the cluster's IAM \
                 OIDC provider), so its claims cannot name ServiceAccounts"
            )));
        };
        if !settings.create_bucket_user {
            return Err(web_identity::not_configured(&format!(
                "the StorageClass hands claims the owner's keys ({CREATE_BUCKET_USER}=false); \
                 ServiceAccounts need a role of the claim's own"
            )));
        }
        Ok(WebIdentity {
            role_arn: class.provider.role_arn(&iam::user_name(&options.user_id)),
            sts_endpoint: settings.sts_url(),
        })
    }

    async fn create_bucket(&self, bucket: &NewBucket) -> Result<BucketLocation, BackendError> {
        self.standalone_create(bucket).await
    }

    async fn delete_bucket(&self, name: &str, owner_id: &str) -> Result<Removed, BackendError> {
        self.standalone_delete(name, owner_id).await
    }

    async fn existing_bucket(
        &self,
        name: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<BucketLocation, BackendError> {
        self.standalone_existing(name, parameters).await
    }

    async fn issue_key(&self, request: &KeyRequest) -> Result<IssuedKey, BackendError> {
        self.standalone_issue(request).await
    }

    async fn revoke_key(&self, owner_id: &str) -> Result<(), BackendError> {
        self.standalone_revoke(owner_id).await
    }
}

/// The claim's `additionalConfig`, checked as far as it can be before its user exists: a
/// policy may name the claim's own user only where claims get users of their own.
fn claim_config(settings: &Settings, options: &BucketOptions) -> Result<ClaimConfig, BackendError> {
    let partition = settings.partition();
    let config =
        ClaimConfig::parse(options.additional_config.requested(), &options.bucket_name, partition)?;
    if config.cors.is_some() && !settings.allow_cors {
        return Err(crate::cors::not_allowed());
    }
    let features = &settings.features;
    if config.lifecycle.is_some() {
        features.check_lifecycle()?;
    }
    if config.versioning.is_some() {
        features.check_versioning()?;
    }
    if let Some(lock) = &config.object_lock {
        features.check_object_lock(lock)?;
        if config.versioning == Some(Versioning::Suspended) {
            return Err(BackendError::invalid_parameter(format!(
                "additionalConfig {VERSIONING}: Suspended cannot go with {OBJECT_LOCK}: a bucket \
                 with object lock keeps versioning Enabled"
            )));
        }
    }
    if let Some(policy) = &config.policy {
        let user = iam::user_name(&options.user_id);
        let own = |p: &str| settings.create_bucket_user && names_user(p, partition, &user);
        policy.check_principals(own, &settings.policy_principals)?;
    }
    Ok(config)
}

/// The claim's checked `config` with what its class gives by default and the claim left out
/// (see [`bucket_provisioner::bucket::features::defaults`]): only for a bucket the claim
/// created, since a default, like the key, configures the whole bucket. The class's defaults
/// were checked against what it allows when its parameters were read.
fn with_class_defaults(settings: &Settings, config: ClaimConfig) -> ClaimConfig {
    let defaults = &settings.features.defaults;
    let object_lock = defaults.object_lock(config.object_lock);
    let versioning = defaults.versioning(config.versioning, object_lock.is_some());
    ClaimConfig { object_lock, versioning, ..config }
}

/// Bucket-wide settings asked for by a claim of a bucket it did not create.
fn shared_bucket(bucket: &str) -> BackendError {
    BackendError::invalid_parameter(format!(
        "additionalConfig {BUCKET_POLICY}, {BUCKET_LIFECYCLE}, {CORS}, {VERSIONING} and \
         {OBJECT_LOCK} configure the whole bucket {bucket:?}, which this claim did not create and may share with other claims \
         (StorageClass bucketName); only the claim that created a bucket sets them"
    ))
}
