//! The [`Provisioner`] for Garage: buckets, keys and quotas through the admin API v2, buckets
//! emptied through the S3 API before they are deleted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_s3::config::SharedHttpClient;
use bucket_api::{BucketUsage, ObjectBucket, ReclaimPolicy};
use bucket_provisioner::bucket::standalone::{BucketLocation, IssuedKey, KeyRequest, NewBucket};
use bucket_provisioner::{
    BackendError, BucketOptions, Credentials, ProvisionedBucket, Provisioner, Removed,
    access_mode_of, user_id_of,
};

pub mod standalone;
mod target;

use crate::admin::{Admin, AdminHttp};
use crate::api::{BucketInfo, ClusterHealth, Permissions};
use crate::cluster::{AdminToken, ClassParameters};
use crate::empty::{PassLimits, empty_pass, http_client, s3_client};
use crate::endpoints::AdminEndpoints;
use crate::features::{self, BucketFeatures};
use crate::identity::{STATE_CLUSTER_ID, cluster_id};
use crate::names::{SERVICE_KEY_NAME, claim_key_id, ownership_alias, service_key_id};
use crate::params::Settings;
use crate::quota;
use crate::store::{Created, Store, creator};
use crate::usage::UsageCache;

/// `additionalState` key: the claim's access key id.
pub const STATE_ACCESS_KEY_ID: &str = "accessKeyId";
/// In the ObjectBucket's `additionalState` of a bucket the claim created: the bucket's id, by
/// which a deletion that Garage left half done (names and record gone, bucket not) is finished.
pub const STATE_BUCKET_ID: &str = "bucketId";

/// Buckets on a Garage cluster, with an access key per claim.
///
/// The admin token comes from an [`AdminToken`] (see [`crate::cluster`]), so this type never
/// talks to Kubernetes itself.
pub struct GarageProvisioner {
    tokens: Arc<dyn AdminToken>,
    classes: Option<Arc<dyn ClassParameters>>,
    /// StorageClass parameters seen by `validate`, for cleanups without recorded state.
    seen: Mutex<HashMap<String, BTreeMap<String, String>>>,
    http: AdminHttp,
    s3_http: SharedHttpClient,
    /// The provisioner's own key on each Garage cluster (by admin endpoints), once known.
    service_keys: Mutex<HashMap<AdminEndpoints, Credentials>>,
    service_key_lock: tokio::sync::Mutex<()>,
    usage: UsageCache,
    pass: PassLimits,
    /// The cluster the COSI front's buckets and keys are on (see [`standalone`]).
    standalone: Option<Settings>,
}

impl GarageProvisioner {
    /// A provisioner reading admin tokens through `tokens`.
    pub fn new(tokens: Arc<dyn AdminToken>) -> Self {
        Self {
            tokens,
            classes: None,
            seen: Mutex::new(HashMap::new()),
            http: AdminHttp::new(),
            s3_http: http_client(),
            service_keys: Mutex::new(HashMap::new()),
            service_key_lock: tokio::sync::Mutex::new(()),
            usage: UsageCache::default(),
            pass: PassLimits::default(),
            standalone: None,
        }
    }

    /// Also consult StorageClasses when cleaning up after a claim whose ObjectBucket (and so
    /// its recorded state) was never written.
    pub fn with_class_parameters(mut self, classes: Arc<dyn ClassParameters>) -> Self {
        self.classes = Some(classes);
        self
    }

    /// How much one pass of emptying a bucket does before the claim is told how far it got.
    pub fn with_pass_limits(mut self, limits: PassLimits) -> Self {
        self.pass = limits;
        self
    }

    /// Admin API requests sent so far.
    pub fn admin_calls(&self) -> u64 {
        self.http.calls()
    }

    async fn token(&self, settings: &Settings) -> Result<String, BackendError> {
        self.tokens.admin_token(&settings.token_secret).await
    }

    /// The token for a cleanup: a missing or broken Secret makes it wait, never give up, since
    /// giving up would leave a live key behind.
    async fn cleanup_token(&self, settings: &Settings) -> Result<String, BackendError> {
        self.token(settings).await.map_err(|e| match e {
            BackendError::Permanent { message, .. } => {
                BackendError::transient(format!("{message}; cleanup waits for the admin token"))
            }
            transient => transient,
        })
    }

    /// The provisioner's own key on `settings`' cluster, made on first use. One task at a time
    /// makes it (two concurrent imports of one id could both pass Garage's existence check),
    /// and the secret is always read back from Garage, so the one kept is the one it stores.
    async fn service_key(
        &self,
        store: &Store<'_>,
        settings: &Settings,
    ) -> Result<Credentials, BackendError> {
        let _one_at_a_time = self.service_key_lock.lock().await;
        let known = self
            .service_keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&settings.admin)
            .cloned();
        if let Some(keys) = known {
            return Ok(keys);
        }
        store.ensure_key(&service_key_id(), SERVICE_KEY_NAME).await?;
        let keys = store.read_key(&service_key_id(), SERVICE_KEY_NAME).await?;
        self.service_keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(settings.admin.clone(), keys.clone());
        Ok(keys)
    }

    /// Gives the claim its own key, with the permissions of its access mode on `bucket`.
    async fn access(
        &self,
        store: &Store<'_>,
        settings: &Settings,
        options: &BucketOptions,
        bucket: &BucketInfo,
    ) -> Result<ProvisionedBucket, BackendError> {
        let name = format!(
            "{} {}/{}",
            options.user_id,
            options.claim.requested().metadata.namespace.as_deref().unwrap_or_default(),
            options.claim.requested().metadata.name.as_deref().unwrap_or_default()
        );
        let credentials = store.ensure_key(&claim_key_id(&options.user_id), &name).await?;
        let permissions = Permissions::for_mode(options.access_mode)?;
        store.set_permissions(bucket, &credentials.access_key_id, permissions).await?;
        let mut state = settings.to_state();
        state.insert(STATE_ACCESS_KEY_ID.into(), credentials.access_key_id.clone());
        Ok(ProvisionedBucket {
            endpoint: settings.consumer_endpoint(),
            credentials,
            additional_state: state,
        })
    }

    /// Deletes the claim's key (what both `delete` and `revoke` start with).
    async fn remove_key(
        &self,
        store: &Store<'_>,
        bucket: &ObjectBucket,
    ) -> Result<(), BackendError> {
        match user_id_of(bucket) {
            Some(user_id) => store.delete_key(&claim_key_id(&user_id)).await,
            None => Ok(()),
        }
    }

    /// One pass of emptying `info`, then its deletion when nothing is left. A pass that stops
    /// short is a transient error saying how far it got, which the claim shows while it waits.
    async fn empty_and_delete(
        &self,
        store: &Store<'_>,
        settings: &Settings,
        info: &BucketInfo,
        service: &Credentials,
    ) -> Result<(), BackendError> {
        let name = crate::store::name(info).to_string();
        // The key may have lost its permissions by hand: it needs them to list and delete.
        store.allow(info, &service.access_key_id, Permissions::ALL).await?;
        if info.unfinished_multipart_uploads > 0 {
            store.abort_uploads(info).await?;
        }
        if info.objects > 0 {
            let s3 = s3_client(settings, service, &self.s3_http);
            let pass = empty_pass(&s3, &name, self.pass).await?;
            if !pass.empty {
                let left = u64::try_from(info.objects).unwrap_or(0).saturating_sub(pass.deleted);
                return Err(BackendError::transient(format!(
                    "emptying bucket {name:?} before deleting it (Garage deletes only empty \
                     buckets): {} objects deleted in this pass, about {left} left; continuing",
                    pass.deleted
                )));
            }
        }
        if store.delete_bucket(info).await? {
            self.usage.forget(&name);
            return Ok(());
        }
        Err(BackendError::transient(format!(
            "bucket {name:?} still holds objects (written while it was emptied, or uploads in \
             progress); emptying it again"
        )))
    }
}

fn bucket_name(bucket: &ObjectBucket) -> String {
    bucket.spec.endpoint.as_ref().map(|e| e.bucket_name.clone()).unwrap_or_default()
}

fn store<'a>(http: &'a AdminHttp, settings: &'a Settings, token: &'a str) -> Store<'a> {
    let admin = Admin { http, endpoints: &settings.admin, token, secret: &settings.token_secret };
    Store { admin }
}

impl Provisioner for GarageProvisioner {
    /// Which Garage cluster and Secret, so that a claim deleted before its ObjectBucket was
    /// written can be cleaned up after a restart without its StorageClass.
    fn cleanup_state(&self, options: &BucketOptions) -> BTreeMap<String, String> {
        Settings::from_parameters(&options.parameters).map(|s| s.to_state()).unwrap_or_default()
    }

    fn validate(&self, options: &BucketOptions) -> Result<(), BackendError> {
        Settings::from_parameters(&options.parameters)?;
        quota::parse(options.additional_config.requested())?;
        BucketFeatures::parse(options.additional_config.requested(), &options.parameters)?;
        Permissions::for_mode(options.access_mode)?;
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(options.storage_class_name.clone(), options.parameters.clone());
        Ok(())
    }

    async fn provision(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        let settings = Settings::from_parameters(&options.parameters)?;
        let quotas = quota::parse(options.additional_config.requested())?;
        let features =
            BucketFeatures::parse(options.additional_config.requested(), &options.parameters)?;
        let token = self.token(&settings).await?;
        let store = store(&self.http, &settings, &token);
        let service = self.service_key(&store, &settings).await?;
        let name = &options.bucket_name;
        let created = store
            .create_bucket(name, &options.user_id, options.reclaim_policy, &service.access_key_id)
            .await?;
        let Created::Mine(bucket) = created else { return Err(BackendError::name_taken(name)) };
        let bucket = store.set_quotas(&bucket, quotas).await?;
        if !features.is_empty() {
            let s3 = s3_client(&settings, &service, &self.s3_http);
            features.apply(&s3, name, &BTreeMap::new()).await?;
        }
        let mut provisioned = self.access(&store, &settings, options, &bucket).await?;
        provisioned.additional_state.insert(STATE_BUCKET_ID.into(), bucket.id.clone());
        provisioned.additional_state.insert(STATE_CLUSTER_ID.into(), cluster_id(&service));
        self.usage.record(name, &settings, &bucket);
        Ok(provisioned)
    }

    async fn grant(&self, options: &BucketOptions) -> Result<ProvisionedBucket, BackendError> {
        let settings = Settings::from_parameters(&options.parameters)?;
        quota::parse(options.additional_config.requested())?;
        let name = &options.bucket_name;
        if quota::any(options.additional_config.requested()) {
            return Err(quota::shared_bucket(name));
        }
        if !BucketFeatures::parse(options.additional_config.requested(), &options.parameters)?
            .is_empty()
        {
            return Err(features::shared_bucket(name));
        }
        let token = self.token(&settings).await?;
        let store = store(&self.http, &settings, &token);
        let Some(bucket) = store.bucket(name).await? else {
            return Err(BackendError::permanent(
                "BucketNotFound",
                format!(
                    "bucket {name:?} (StorageClass bucketName) does not exist in Garage at {}; \
                     create it, or name an existing one",
                    settings.admin
                ),
            ));
        };
        let service = self.service_key(&store, &settings).await?;
        let mut granted = self.access(&store, &settings, options, &bucket).await?;
        granted.additional_state.insert(STATE_CLUSTER_ID.into(), cluster_id(&service));
        Ok(granted)
    }

    async fn delete(&self, bucket: &ObjectBucket) -> Result<Removed, BackendError> {
        let target = self.cleanup_target(bucket).await?;
        let (settings, token) = (&target.settings, &target.token);
        let store = store(&self.http, settings, token);
        // First the claim's key: its consumers stop writing into what is being emptied.
        self.remove_key(&store, bucket).await?;
        let name = bucket_name(bucket);
        if name.is_empty() {
            return Ok(Removed::Bucket); // no bucket was ever chosen, so none was created
        }
        let Some(user_id) = user_id_of(bucket) else { return Ok(Removed::AccessOnly) };
        let service = match target.service.clone() {
            Some(service) => service,
            None => self.service_key(&store, settings).await?,
        };
        let Some(info) = store.bucket(&name).await? else {
            self.usage.forget(&name);
            // Made but never named (the process stopped between the two steps of creating it):
            // found by its ownership record, empty, and deleted as the claim asked.
            let record = ownership_alias(&user_id, ReclaimPolicy::Delete);
            if let Some(id) = store.recorded_bucket(&service.access_key_id, &record).await?
                && let Some(left) = store.bucket_by_id(&id).await?
                && left.global_aliases.is_empty()
            {
                store.delete_bucket(&left).await?;
            }
            // Garage's own DeleteBucket removes the names and the record before the bucket, and
            // stops where it is when its client goes away: the id recorded on the ObjectBucket
            // (which tenants cannot write) finds what it left. Only a bucket with no name left
            // is touched: nobody can reach it, and it was this claim's.
            let recorded_id =
                bucket.spec.additional_state.as_ref().and_then(|s| s.get(STATE_BUCKET_ID));
            if let Some(id) = recorded_id
                && bucket.spec.reclaim_policy == Some(ReclaimPolicy::Delete)
                && let Some(left) = store.bucket_by_id(id).await?
                && left.global_aliases.is_empty()
                && creator(&left, &service.access_key_id).is_none_or(|(c, _)| c == user_id)
            {
                self.empty_and_delete(&store, settings, &left, &service).await?;
            }
            return Ok(Removed::Bucket);
        };
        // Only Garage's own record decides: this claim created it, under Delete.
        match creator(&info, &service.access_key_id) {
            Some((creator, ReclaimPolicy::Delete)) if creator == user_id => {}
            _ => return Ok(Removed::AccessOnly),
        }
        self.empty_and_delete(&store, settings, &info, &service).await?;
        Ok(Removed::Bucket)
    }

    async fn revoke(&self, bucket: &ObjectBucket) -> Result<(), BackendError> {
        let target = self.cleanup_target(bucket).await?;
        self.usage.forget(&bucket_name(bucket));
        self.remove_key(&store(&self.http, &target.settings, &target.token), bucket).await
    }

    /// Applies a changed access mode to the claim's key, changed `maxObjects` / `maxSize` to
    /// the quotas of the claim's own bucket, and changed `cors` / `bucketLifecycle` to it
    /// (removed when the key goes).
    async fn update(
        &self,
        options: &BucketOptions,
        bucket: &ObjectBucket,
    ) -> Result<(), BackendError> {
        let settings = Settings::from_parameters(&options.parameters)?;
        let config = options.additional_config.requested();
        let quotas = quota::parse(config)?;
        let features = BucketFeatures::parse(config, &options.parameters)?;
        let previous = bucket
            .spec
            .endpoint
            .as_ref()
            .and_then(|e| e.additional_config.clone())
            .unwrap_or_default();
        let mode_changed = access_mode_of(bucket) != options.access_mode;
        let limited = quota::any(config) || quota::any(&previous);
        let configured = features::any(config) || features::any(&previous);
        if !mode_changed && !limited && !configured {
            return Ok(());
        }
        let permissions = Permissions::for_mode(options.access_mode)?;
        let token = self.token(&settings).await?;
        let store = store(&self.http, &settings, &token);
        let name = &options.bucket_name;
        let Some(info) = store.bucket(name).await? else {
            return Err(BackendError::transient(format!(
                "bucket {name:?} is not in Garage (deleted by hand?); its quotas, settings and \
                 key permissions cannot be set"
            )));
        };
        if mode_changed {
            let key = claim_key_id(&options.user_id);
            store.set_permissions(&info, &key, permissions).await?;
            if !limited && !configured {
                return Ok(());
            }
        }
        let service = self.service_key(&store, &settings).await?;
        match creator(&info, &service.access_key_id) {
            Some((creator, _)) if creator == options.user_id => {}
            _ if limited => return Err(quota::shared_bucket(name)),
            _ => return Err(features::shared_bucket(name)),
        }
        if limited {
            let info = store.set_quotas(&info, quotas).await?;
            self.usage.record(name, &settings, &info);
        }
        if configured {
            let s3 = s3_client(&settings, &service, &self.s3_http);
            features.apply(&s3, name, &previous).await?;
        }
        Ok(())
    }

    /// `GetClusterHealth` through the class's admin endpoints: Garage answers, and is not
    /// short of the nodes it needs to serve. A token or Secret that does not allow asking
    /// leaves the library to retry a claim instead.
    async fn probe(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> Option<Result<(), BackendError>> {
        let settings = Settings::from_parameters(parameters).ok()?;
        let token = match self.token(&settings).await {
            Ok(token) => token,
            Err(e) if e.is_permanent() => return None,
            Err(e) => return Some(Err(e)),
        };
        let store = store(&self.http, &settings, &token);
        let health = store.admin.get::<ClusterHealth>("GetClusterHealth", &[]).await;
        match health {
            Ok(health) if health.status != "unavailable" => Some(Ok(())),
            Ok(_) => Some(Err(BackendError::transient("Garage reports its cluster unavailable"))),
            Err(e) => match store.admin.error("GetClusterHealth", e) {
                refused if refused.is_permanent() => None,
                unreachable => Some(Err(unreachable)),
            },
        }
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

    fn usage(&self, bucket: &ObjectBucket) -> Option<BucketUsage> {
        let state = bucket.spec.additional_state.as_ref()?;
        let settings = Settings::from_state(state).ok()?;
        self.usage.get(&bucket_name(bucket), settings)
    }
}

impl GarageProvisioner {
    /// Reads what every bucket asked about within `recent` holds now (the binary calls this
    /// once per usage interval). A bucket that cannot be read keeps its last known figures; the
    /// failures of one round are logged together, with the first one's cause.
    pub async fn refresh_usage(&self, recent: Duration) {
        let (mut failed, mut first) = (0usize, None);
        for (name, settings) in self.usage.watched(recent) {
            let result = match self.token(&settings).await {
                Ok(token) => store(&self.http, &settings, &token).bucket(&name).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(Some(info)) => self.usage.record(&name, &settings, &info),
                Ok(None) => self.usage.forget(&name),
                Err(e) => {
                    failed += 1;
                    first.get_or_insert(format!("bucket {name:?}: {e}"));
                }
            }
        }
        if let Some(first) = first {
            tracing::warn!(failed, "usage of {failed} bucket(s) not refreshed; {first}");
        }
    }
}
