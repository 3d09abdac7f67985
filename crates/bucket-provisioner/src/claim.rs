//! One live claim's reconcile, in phases: read → decide → persist intent → call the backend →
//! write results → status. Each phase is idempotent, so a crash anywhere is healed by the next run.
//! What happens when a claim goes is in [`crate::cleanup`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER, STORAGE_CLASS_BUCKET_NAME};
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketPhase};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::controller::Context;
use crate::error::{Error, Operation};
use crate::finalizer;
use crate::objects::{
    self, BucketRecord, BucketSource, annotations, check_not_foreign, ensure_owned,
    reclaim_policy_str,
};
use crate::plan::{Plan, plan};
use crate::status::{ClaimState, set_bucket_status, set_claim_status};
use crate::{BackendError, BucketOptions, ProvisionedBucket, Provisioner, naming};

/// How often one reconcile generates a new name after the backend says a generated one is taken.
const NAME_ATTEMPTS: usize = 3;

/// The objects a claim's reconcile reads first.
pub(crate) struct Observed {
    pub(crate) claims: Api<ObjectBucketClaim>,
    pub(crate) buckets: Api<ObjectBucket>,
    pub(crate) secrets: Api<Secret>,
    pub(crate) config_maps: Api<ConfigMap>,
    pub(crate) namespace: String,
    /// The ObjectBucket's name: the one bound to this claim, or the one to create.
    pub(crate) bucket_name: String,
    pub(crate) uid: String,
    /// The ObjectBucket bound to this claim, if any.
    pub(crate) bound: Option<ObjectBucket>,
    /// Both names this claim's ObjectBucket may have are taken by other claims' ObjectBuckets.
    pub(crate) names_taken: Option<Error>,
}

/// Finds the claim's ObjectBucket under the names it may have (see
/// [`naming::object_bucket_names`]), or picks the name to create it under, from the caches. The
/// claim's `spec.objectBucketName` is tenant-written, so it only hints which of the two to look at.
pub(crate) fn observe<P>(claim: &ObjectBucketClaim, ctx: &Context<P>) -> Observed {
    let client = &ctx.client;
    let namespace = claim.namespace().unwrap_or_default();
    let uid = claim.uid().unwrap_or_default();
    let names = naming::object_bucket_names(&namespace, &claim.name_any(), &uid);
    let hinted_unique = claim.spec.object_bucket_name.as_deref() == Some(names.unique.as_str());
    let mut free = None;
    let mut bound = None;
    let mut taken_by = None;
    for name in names.conventional.iter().chain([&names.unique]) {
        match ctx.caches.buckets.get("", name) {
            Some(bucket) if bound_uid(&bucket) == Some(uid.as_str()) => {
                bound = Some((name.clone(), (*bucket).clone()));
                break;
            }
            Some(bucket) => taken_by = Some((name.clone(), bound_uid(&bucket).map(String::from))),
            // The unique name is only worth a look when the claim says it may be there.
            None if free.is_none() => {
                free = Some(name.clone());
                if !hinted_unique {
                    break;
                }
            }
            None => {}
        }
    }
    let (bucket_name, bound, names_taken) = match (bound, free) {
        (Some((name, bucket)), _) => (name, Some(bucket), None),
        (None, Some(name)) => (name, None, None),
        (None, None) => {
            let (name, other) = taken_by.unwrap_or_else(|| (names.unique.clone(), None));
            let other_uid = other.unwrap_or_else(|| "unknown".into());
            (name.clone(), None, Some(Error::ObjectBucketConflict { name, other_uid }))
        }
    };
    Observed {
        claims: Api::namespaced(client.clone(), &namespace),
        buckets: Api::all(client.clone()),
        secrets: Api::namespaced(client.clone(), &namespace),
        config_maps: Api::namespaced(client.clone(), &namespace),
        namespace,
        bucket_name,
        uid,
        bound,
        names_taken,
    }
}

pub(crate) fn bound_uid(bucket: &ObjectBucket) -> Option<&str> {
    bucket.spec.claim_ref.as_ref()?.uid.as_deref()
}

pub(crate) fn bound_bucket_name(bucket: &ObjectBucket) -> &str {
    bucket.spec.endpoint.as_ref().map(|e| e.bucket_name.as_str()).unwrap_or_default()
}

pub(crate) fn source_of(annotations: &BTreeMap<String, String>) -> Option<BucketSource> {
    annotations.get(annotations::BUCKET_SOURCE).and_then(|s| BucketSource::parse(s))
}

fn same_config(a: &Option<BTreeMap<String, String>>, b: &Option<BTreeMap<String, String>>) -> bool {
    a.as_ref().filter(|m| !m.is_empty()) == b.as_ref().filter(|m| !m.is_empty())
}

/// Brings a live claim (finalizer already in place) to Bound.
pub async fn apply<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    let mut observed = observe(&claim, ctx);
    let name = claim.name_any();
    let secret = check_not_foreign(
        &ctx.caches.secrets,
        &observed.namespace,
        &name,
        &observed.uid,
        Error::ForeignSecret,
    )?;
    check_not_foreign(
        &ctx.caches.config_maps,
        &observed.namespace,
        &name,
        &observed.uid,
        Error::ForeignConfigMap,
    )?;

    if let Some(bound) = observed.bound.take() {
        let bound = if bound.meta().deletion_timestamp.is_some() {
            recreate_object_bucket(&observed, &bound, &claim, ctx).await?
        } else {
            bound
        };
        check_unchanged_binding(&claim, &bound)?;
        match objects::check_credentials(secret.as_deref(), &bound) {
            objects::CredentialsCheck::Recorded => {
                return keep_bound(claim, &bound, &observed, ctx).await;
            }
            objects::CredentialsCheck::Unrecorded(digest) => {
                // Bound before digests were recorded: the Secret as it is becomes the record.
                let patch = json!({
                    "metadata": { "annotations": { annotations::CREDENTIALS_DIGEST: digest } }
                });
                let params = PatchParams::default();
                let bound = observed
                    .buckets
                    .patch(&observed.bucket_name, &params, &Patch::Merge(&patch))
                    .await?;
                let bound = ctx.caches.buckets.wrote(bound);
                return keep_bound(claim, &bound, &observed, ctx).await;
            }
            // Credentials are never stored outside the Secret: the backend issues them again.
            objects::CredentialsCheck::Missing | objects::CredentialsCheck::Changed => {
                let message =
                    "the claim's Secret lost or changed its credentials; issuing them again";
                tracing::info!(claim = %key(&*claim), "{message}");
                ctx.event(
                    &claim,
                    EventType::Normal,
                    "RestoringCredentials",
                    message,
                    Operation::Provision,
                )
                .await;
            }
        }
        observed.bound = Some(bound);
    }
    if let Some(error) = observed.names_taken.take() {
        return Err(error);
    }

    // Found blocked before: only the apiserver can tell whether the foreign object is still
    // there (it is not ours, so not cached), and the backend is not asked again until it is gone.
    let claim_key = key(&*claim);
    if ctx.blocked(&claim_key, None) {
        for (found, foreign) in [
            (
                observed.secrets.get_opt(&name).await?.map(|s| s.metadata),
                Error::ForeignSecret as fn(String) -> Error,
            ),
            (
                observed.config_maps.get_opt(&name).await?.map(|c| c.metadata),
                Error::ForeignConfigMap,
            ),
        ] {
            if found.is_some_and(|meta| !objects::meta_controlled_by(&meta, &observed.uid)) {
                return Err(foreign(name));
            }
        }
        ctx.blocked(&claim_key, Some(false));
    }

    let class = storage_class(ctx, &claim.spec.storage_class_name)?;
    let mut plan = match &observed.bound {
        Some(bound) => plan_for_bound(bound, &class),
        None => plan(&claim, &class)?,
    };
    let operation = match plan.source {
        BucketSource::New => Operation::Provision,
        BucketSource::Existing => Operation::Grant,
    };
    let mut claim = claim;
    let mut attempts = 0;
    let provisioned = loop {
        attempts += 1;
        let options = bucket_options(&claim, &plan, &observed.uid);
        let backend_error = |source: BackendError| Error::Backend {
            operation,
            bucket: plan.bucket_name.clone(),
            source,
            hint: "",
        };
        ctx.provisioner.validate(&options).map_err(backend_error)?;
        let cleanup_state = ctx.provisioner.cleanup_state(&options);
        claim = persist_intent(&observed, &claim, &plan, ctx, &cleanup_state).await?;
        let options = BucketOptions { claim: (*claim).clone(), ..options };
        let started = Instant::now();
        let answer = match plan.source {
            BucketSource::New => ctx.provisioner.provision(&options).await,
            BucketSource::Existing => ctx.provisioner.grant(&options).await,
        };
        ctx.metrics.observe_provisioning(operation.as_str(), started.elapsed().as_secs_f64());
        match answer {
            Ok(provisioned) => break provisioned,
            // A generated name is ours to change: pick another and record it before trying it.
            Err(error)
                if error.is_name_taken()
                    && plan.generated
                    && observed.bound.is_none()
                    && attempts < NAME_ATTEMPTS =>
            {
                let taken = std::mem::take(&mut plan.bucket_name);
                plan.bucket_name = naming::generate_bucket_name(
                    claim.spec.generate_bucket_name.as_deref().unwrap_or_default(),
                );
                tracing::info!(claim = %key(&*claim), taken = %taken, bucket = %plan.bucket_name,
                    "generated bucket name is taken; generated another");
            }
            Err(error) => return Err(backend_error(error)),
        }
    };

    let bucket = write_results(&claim, &mut observed, &plan, &provisioned, ctx).await?;
    // The status says it, so a success is not also an Event: one write fewer per claim.
    let message = bound_message(plan.source, &plan.bucket_name);
    tracing::info!(claim = %key(&*claim), bucket = %plan.bucket_name, "{message}");
    let claim = ctx.caches.claim(&claim).unwrap_or(claim);
    set_bound(&observed, &bucket, &claim, &message, ctx).await?;
    Ok(Action::await_change())
}

/// What a Bound claim's condition says; the same on every reconcile, so that it is written once.
fn bound_message(source: BucketSource, bucket: &str) -> String {
    match source {
        BucketSource::New => format!("provisioned bucket {bucket:?}"),
        BucketSource::Existing => format!("granted access to bucket {bucket:?}"),
    }
}

fn bound_state(message: &str) -> ClaimState {
    ClaimState {
        phase: ClaimPhase::Bound,
        ready: true,
        reason: "Bound".into(),
        message: message.into(),
    }
}

fn check_unchanged_binding(claim: &ObjectBucketClaim, bound: &ObjectBucket) -> Result<(), Error> {
    let bound_name = bound_bucket_name(bound);
    if let Some(requested) = claim.spec.bucket_name.as_deref().filter(|n| !n.is_empty())
        && requested != bound_name
    {
        return Err(Error::BucketNameImmutable {
            bound: bound_name.into(),
            requested: requested.into(),
        });
    }
    if claim.spec.storage_class_name != bound.spec.storage_class_name {
        return Err(Error::StorageClassImmutable {
            bound: bound.spec.storage_class_name.clone(),
            requested: claim.spec.storage_class_name.clone(),
        });
    }
    Ok(())
}

/// A live claim's ObjectBucket was deleted (it waits on our finalizer): let it go and write it
/// again from the copy, which keeps everything the backend answered.
async fn recreate_object_bucket<P: Provisioner>(
    observed: &Observed,
    terminating: &ObjectBucket,
    claim: &ObjectBucketClaim,
    ctx: &Context<P>,
) -> Result<ObjectBucket, Error> {
    let mut copy = terminating.clone();
    // The cache keeps no labels: ours goes back on, or the watch would never see the copy.
    let label = (LABEL_PROVISIONER.to_owned(), objects::label_value(&ctx.name));
    copy.metadata = ObjectMeta {
        name: terminating.metadata.name.clone(),
        labels: Some([label].into()),
        annotations: terminating.metadata.annotations.clone(),
        finalizers: Some(vec![FINALIZER.into()]),
        ..Default::default()
    };
    copy.status = None;
    crate::cleanup::remove_bucket_finalizer(&observed.buckets, terminating, ctx).await?;
    let created =
        ctx.caches.buckets.wrote(observed.buckets.create(&PostParams::default(), &copy).await?);
    let message = format!(
        "ObjectBucket {:?} was deleted while its claim lives; it was written again",
        observed.bucket_name
    );
    tracing::info!(claim = %key(claim), "{message}");
    ctx.event(claim, EventType::Normal, "ObjectBucketRecreated", &message, Operation::Provision)
        .await;
    Ok((*created).clone())
}

/// A bound claim with its Secret: repair the ConfigMap if needed, pass on an `additionalConfig`
/// change, and report Bound, all without asking the backend for anything else.
async fn keep_bound<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    bound: &ObjectBucket,
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    // Removed by hand while Bound: given back, or deleting the claim would skip its cleanup.
    let claim = if claim.finalizers().iter().any(|f| f == FINALIZER) {
        claim
    } else {
        tracing::info!(claim = %key(&*claim), "the claim lost its finalizer; putting it back");
        ctx.caches.claims.wrote(finalizer::add(&observed.claims, &*claim, FINALIZER).await?)
    };
    let bucket_name = bound_bucket_name(bound).to_string();
    let recorded_config = bound.spec.endpoint.as_ref().and_then(|e| e.additional_config.clone());
    if !same_config(&claim.spec.additional_config, &recorded_config) {
        update_config(&claim, bound, observed, ctx).await?;
    }
    if let Some(endpoint) = objects::endpoint_of(bound) {
        let desired = objects::config_map(&claim, &ctx.name, &endpoint, &bucket_name);
        ensure_owned(
            &observed.config_maps,
            &ctx.caches.config_maps,
            desired,
            &observed.uid,
            Error::ForeignConfigMap,
        )
        .await?;
    }
    let claim = set_object_bucket_name(&observed.claims, claim, &observed.bucket_name, ctx).await?;
    let bound = ctx
        .caches
        .buckets
        .get("", &observed.bucket_name)
        .unwrap_or_else(|| Arc::new(bound.clone()));
    let source = source_of(bound.annotations()).unwrap_or(BucketSource::Existing);
    let message = bound_message(source, &bucket_name);
    let claim = ctx.caches.claim(&claim).unwrap_or(claim);
    set_bound(observed, &bound, &claim, &message, ctx).await?;
    Ok(Action::await_change())
}

/// The plan of a bound claim: its bucket and how it came to be are what the ObjectBucket says,
/// whatever the claim or the StorageClass say now.
fn plan_for_bound(bound: &ObjectBucket, class: &StorageClass) -> Plan {
    let mut parameters = class.parameters.clone().unwrap_or_default();
    parameters.remove(STORAGE_CLASS_BUCKET_NAME);
    Plan {
        bucket_name: bound_bucket_name(bound).to_string(),
        source: source_of(bound.annotations()).unwrap_or(BucketSource::Existing),
        reclaim_policy: bound.spec.reclaim_policy.unwrap_or_default(),
        parameters,
        generated: false,
    }
}

async fn update_config<P: Provisioner>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let class = storage_class(ctx, &claim.spec.storage_class_name)?;
    let plan = plan_for_bound(bound, &class);
    let options = bucket_options(claim, &plan, &observed.uid);
    let backend_error = |source| Error::Backend {
        operation: Operation::Update,
        bucket: plan.bucket_name.clone(),
        source,
        hint: "",
    };
    ctx.provisioner.validate(&options).map_err(backend_error)?;
    let started = Instant::now();
    ctx.provisioner.update(&options, bound).await.map_err(backend_error)?;
    ctx.metrics.observe_provisioning(Operation::Update.as_str(), started.elapsed().as_secs_f64());

    let recorded = bound.spec.endpoint.as_ref().and_then(|e| e.additional_config.as_ref());
    let patch = config_patch(recorded, claim.spec.additional_config.as_ref());
    let params = PatchParams::default();
    let updated =
        observed.buckets.patch(&observed.bucket_name, &params, &Patch::Merge(&patch)).await?;
    ctx.caches.buckets.wrote(updated);
    let message = format!("applied additionalConfig to bucket {:?}", plan.bucket_name);
    ctx.event(claim, EventType::Normal, "Updated", &message, Operation::Update).await;
    Ok(())
}

/// One merge patch that makes the recorded `additionalConfig` exactly `wanted`: every key set,
/// every key no longer wanted removed (a merge patch merges maps, so a removal must be named).
fn config_patch(
    recorded: Option<&BTreeMap<String, String>>,
    wanted: Option<&BTreeMap<String, String>>,
) -> serde_json::Value {
    let wanted = wanted.filter(|w| !w.is_empty());
    let Some(wanted) = wanted else {
        return json!({ "spec": { "endpoint": { "additionalConfig": null } } });
    };
    let mut config: serde_json::Map<String, serde_json::Value> =
        wanted.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    for removed in recorded.into_iter().flatten().filter(|(k, _)| !wanted.contains_key(*k)) {
        config.insert(removed.0.clone(), serde_json::Value::Null);
    }
    json!({ "spec": { "endpoint": { "additionalConfig": config } } })
}

fn storage_class<P>(ctx: &Context<P>, name: &str) -> Result<Arc<StorageClass>, Error> {
    ctx.caches.class(name).ok_or_else(|| Error::StorageClassNotFound(name.to_string()))
}

fn bucket_options(claim: &ObjectBucketClaim, plan: &Plan, uid: &str) -> BucketOptions {
    BucketOptions {
        bucket_name: plan.bucket_name.clone(),
        user_id: crate::user_id_for_claim(uid),
        reclaim_policy: plan.reclaim_policy,
        parameters: plan.parameters.clone(),
        additional_config: claim.spec.additional_config.clone().unwrap_or_default(),
        storage_class_name: claim.spec.storage_class_name.clone(),
        claim: claim.clone(),
    }
}

/// Records the bucket name, the ObjectBucket's name and what cleanup will need on the claim
/// itself, in one write before the backend is called, so neither a crash nor a deleted
/// StorageClass can lose track of the bucket. The claim's resourceVersion guards the write: a
/// concurrent change fails it, and the retry starts over.
async fn persist_intent<P>(
    observed: &Observed,
    claim: &ObjectBucketClaim,
    plan: &Plan,
    ctx: &Context<P>,
    cleanup_state: &BTreeMap<String, String>,
) -> Result<Arc<ObjectBucketClaim>, Error> {
    let provisioner = ctx.name.as_str();
    let state = serde_json::to_string(cleanup_state).unwrap_or_default();
    let mut wanted = BTreeMap::from([
        (annotations::PROVISIONER, provisioner),
        (annotations::BUCKET_SOURCE, plan.source.as_str()),
        (annotations::RECLAIM_POLICY, reclaim_policy_str(plan.reclaim_policy)),
    ]);
    if !cleanup_state.is_empty() {
        wanted.insert(annotations::CLEANUP_STATE, &state);
    }
    if plan.generated {
        wanted.insert(annotations::GENERATED_BUCKET_NAME, &plan.bucket_name);
    }
    let current = claim.annotations();
    let annotations_match =
        wanted.iter().all(|(k, v)| current.get(*k).map(String::as_str) == Some(*v));
    let finalized = claim.finalizers().iter().any(|f| f == FINALIZER);
    if finalized
        && annotations_match
        && claim.spec.bucket_name.as_deref() == Some(plan.bucket_name.as_str())
        && claim.spec.object_bucket_name.as_deref() == Some(observed.bucket_name.as_str())
    {
        return Ok(Arc::new(claim.clone()));
    }
    // The finalizer goes on in the same write: from here on the claim cannot go unseen.
    let mut finalizers = claim.finalizers().to_vec();
    if !finalized {
        finalizers.push(FINALIZER.to_owned());
    }
    let patch = json!({
        "metadata": {
            "resourceVersion": claim.resource_version(),
            "finalizers": finalizers,
            "annotations": wanted,
        },
        "spec": { "bucketName": plan.bucket_name, "objectBucketName": observed.bucket_name },
    });
    let updated = observed
        .claims
        .patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(ctx.caches.claims.wrote(updated))
}

/// Records the ObjectBucket's name on a claim bound before it was recorded with the intent.
async fn set_object_bucket_name<P>(
    api: &Api<ObjectBucketClaim>,
    claim: Arc<ObjectBucketClaim>,
    bucket: &str,
    ctx: &Context<P>,
) -> Result<Arc<ObjectBucketClaim>, Error> {
    if claim.spec.object_bucket_name.as_deref() == Some(bucket) {
        return Ok(claim);
    }
    let patch = json!({ "spec": { "objectBucketName": bucket } });
    let updated =
        api.patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(ctx.caches.claims.wrote(updated))
}

/// Writes the ObjectBucket, then the Secret and ConfigMap; answers the ObjectBucket as written.
async fn write_results<P: Provisioner>(
    claim: &ObjectBucketClaim,
    observed: &mut Observed,
    plan: &Plan,
    provisioned: &ProvisionedBucket,
    ctx: &Context<P>,
) -> Result<Arc<ObjectBucket>, Error> {
    // The ObjectBucket first: it is the record of what the backend made (with its state), so a
    // crash from here on still leaves cleanup everything it needs.
    let desired = objects::object_bucket(&BucketRecord {
        name: &observed.bucket_name,
        claim,
        provisioner: &ctx.name,
        bucket: &plan.bucket_name,
        source: plan.source,
        reclaim_policy: plan.reclaim_policy,
        endpoint: &provisioned.endpoint,
        credentials: &provisioned.credentials,
        additional_state: provisioned.additional_state.clone(),
    });
    let bucket = match &observed.bound {
        None => match observed.buckets.create(&PostParams::default(), &desired).await {
            Err(kube::Error::Api(status)) if status.is_already_exists() => {
                take_unique_name(claim, observed, desired, ctx).await?
            }
            created => created?,
        },
        Some(existing) => {
            let mut replacement = desired;
            replacement.metadata.resource_version = existing.resource_version();
            observed
                .buckets
                .replace(&observed.bucket_name, &PostParams::default(), &replacement)
                .await?
        }
    };
    let bucket = ctx.caches.buckets.wrote(bucket);
    // The rest depends on the record only, not on each other: written side by side.
    let secret = objects::secret(claim, &ctx.name, &provisioned.credentials);
    let config_map =
        objects::config_map(claim, &ctx.name, &provisioned.endpoint, &plan.bucket_name);
    tokio::try_join!(
        ensure_owned(
            &observed.secrets,
            &ctx.caches.secrets,
            secret,
            &observed.uid,
            Error::ForeignSecret,
        ),
        ensure_owned(
            &observed.config_maps,
            &ctx.caches.config_maps,
            config_map,
            &observed.uid,
            Error::ForeignConfigMap,
        ),
    )?;
    Ok(bucket)
}

/// The ObjectBucket's name was taken by one that is not ours (ours are all in the cache): made by
/// hand, or by another program. The claim's unique name is its alone: recorded on the claim
/// first, so that every later reconcile looks there, then used.
async fn take_unique_name<P>(
    claim: &ObjectBucketClaim,
    observed: &mut Observed,
    mut desired: ObjectBucket,
    ctx: &Context<P>,
) -> Result<ObjectBucket, Error> {
    let names = naming::object_bucket_names(&observed.namespace, &claim.name_any(), &observed.uid);
    if observed.bucket_name == names.unique {
        let other_uid = "unknown".to_owned();
        return Err(Error::ObjectBucketConflict { name: names.unique, other_uid });
    }
    tracing::info!(claim = %key(claim), taken = %observed.bucket_name, object_bucket = %names.unique,
        "the ObjectBucket name is taken by one that is not ours; using the claim's unique name");
    let latest = ctx.caches.claim(claim).unwrap_or_else(|| Arc::new(claim.clone()));
    let patch = json!({
        "metadata": { "resourceVersion": latest.resource_version() },
        "spec": { "objectBucketName": names.unique },
    });
    let params = PatchParams::default();
    let recorded = observed.claims.patch(&claim.name_any(), &params, &Patch::Merge(&patch)).await?;
    ctx.caches.claims.wrote(recorded);
    observed.bucket_name = names.unique;
    desired.metadata.name = Some(observed.bucket_name.clone());
    Ok(observed.buckets.create(&PostParams::default(), &desired).await?)
}

/// Marks the ObjectBucket and the claim Bound, side by side.
async fn set_bound<P>(
    observed: &Observed,
    bucket: &ObjectBucket,
    claim: &ObjectBucketClaim,
    message: &str,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let state = bound_state(message);
    let (bucket, claim) = tokio::try_join!(
        set_bucket_status(
            &observed.buckets,
            bucket,
            ObjectBucketPhase::Bound,
            "Bound",
            "bound to its claim"
        ),
        set_claim_status(&observed.claims, claim, &state),
    )?;
    if let Some(written) = bucket {
        ctx.caches.buckets.wrote(written);
    }
    if let Some(written) = claim {
        ctx.caches.claims.wrote(written);
    }
    Ok(())
}

/// `namespace/name`, for logs.
pub fn key(claim: &impl Resource) -> String {
    format!(
        "{}/{}",
        claim.meta().namespace.as_deref().unwrap_or(""),
        claim.meta().name.as_deref().unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn one_config_patch_sets_new_keys_and_removes_dropped_ones() {
        let recorded = map(&[("maxObjects", "10"), ("maxSize", "1G")]);
        let wanted = map(&[("maxSize", "2G"), ("tier", "cold")]);
        let patch = config_patch(Some(&recorded), Some(&wanted));
        assert_eq!(
            patch,
            json!({ "spec": { "endpoint": { "additionalConfig": {
                "maxObjects": null, "maxSize": "2G", "tier": "cold" } } } })
        );
    }

    #[test]
    fn no_config_wanted_removes_the_whole_map() {
        let recorded = map(&[("maxObjects", "10")]);
        let expected = json!({ "spec": { "endpoint": { "additionalConfig": null } } });
        assert_eq!(config_patch(Some(&recorded), None), expected);
        assert_eq!(config_patch(Some(&recorded), Some(&BTreeMap::new())), expected);
    }
}
