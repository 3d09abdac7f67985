//! One claim's reconcile, in phases: read → decide → persist intent → call the backend → write
//! results → status. Each phase is idempotent, so a crash anywhere is healed by the next run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bucket_api::contract::{FINALIZER, STORAGE_CLASS_BUCKET_NAME};
use bucket_api::{
    BucketEndpoint, ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketPhase,
    ObjectBucketSpec, ReclaimPolicy,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::controller::Context;
use crate::error::{ABANDON_HINT, Error, Operation};
use crate::objects::{
    self, BucketRecord, BucketSource, annotations, check_not_foreign, delete_if_owned,
    ensure_owned, parse_reclaim_policy, reclaim_policy_str,
};
use crate::plan::{Plan, plan};
use crate::status::{ClaimState, set_bucket_status, set_claim_status};
use crate::{BackendError, BucketOptions, ProvisionedBucket, Provisioner, naming};

/// The objects a claim's reconcile reads first.
struct Observed {
    claims: Api<ObjectBucketClaim>,
    buckets: Api<ObjectBucket>,
    secrets: Api<Secret>,
    config_maps: Api<ConfigMap>,
    bucket_name: String,
    uid: String,
    /// The ObjectBucket bound to this claim, if any.
    bound: Option<ObjectBucket>,
}

async fn observe(claim: &ObjectBucketClaim, client: &kube::Client) -> Result<Observed, Error> {
    let namespace = claim.namespace().unwrap_or_default();
    let uid = claim.uid().unwrap_or_default();
    let bucket_name = naming::object_bucket_name(&namespace, &claim.name_any())
        .map_err(Error::ObjectBucketNameTooLong)?;
    let buckets: Api<ObjectBucket> = Api::all(client.clone());
    let bound = match buckets.get_opt(&bucket_name).await? {
        Some(bucket) if bound_uid(&bucket) == Some(uid.as_str()) => Some(bucket),
        Some(bucket) => {
            return Err(Error::ObjectBucketConflict {
                name: bucket_name,
                other_uid: bound_uid(&bucket).unwrap_or("unknown").to_string(),
            });
        }
        None => None,
    };
    Ok(Observed {
        claims: Api::namespaced(client.clone(), &namespace),
        buckets,
        secrets: Api::namespaced(client.clone(), &namespace),
        config_maps: Api::namespaced(client.clone(), &namespace),
        bucket_name,
        uid,
        bound,
    })
}

fn bound_uid(bucket: &ObjectBucket) -> Option<&str> {
    bucket.spec.claim_ref.as_ref()?.uid.as_deref()
}

fn bound_bucket_name(bucket: &ObjectBucket) -> &str {
    bucket.spec.endpoint.as_ref().map(|e| e.bucket_name.as_str()).unwrap_or_default()
}

fn same_config(a: &Option<BTreeMap<String, String>>, b: &Option<BTreeMap<String, String>>) -> bool {
    a.as_ref().filter(|m| !m.is_empty()) == b.as_ref().filter(|m| !m.is_empty())
}

/// Brings a live claim (finalizer already in place) to Bound.
pub async fn apply<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    let observed = observe(&claim, &ctx.client).await?;
    let claim = record_provisioner(&observed.claims, claim, &ctx.name).await?;
    let secret = check_not_foreign(
        &observed.secrets,
        &claim.name_any(),
        &observed.uid,
        Error::ForeignSecret,
    )
    .await?;
    check_not_foreign(
        &observed.config_maps,
        &claim.name_any(),
        &observed.uid,
        Error::ForeignConfigMap,
    )
    .await?;

    if let Some(bound) = &observed.bound {
        check_unchanged_binding(&claim, bound)?;
        // Credentials are never stored outside the Secret: without it the backend must mint new ones.
        if secret.is_some() {
            return keep_bound(claim, bound, &observed, ctx).await;
        }
    }

    let class = storage_class(&ctx.client, &claim.spec.storage_class_name).await?;
    let plan = plan(&claim, &class)?;
    let options = bucket_options(&claim, &plan, &observed.uid);
    let operation = match plan.source {
        BucketSource::New => Operation::Provision,
        BucketSource::Existing => Operation::Grant,
    };
    let backend_error = |source: BackendError| Error::Backend {
        operation,
        bucket: plan.bucket_name.clone(),
        source,
        hint: "",
    };
    ctx.provisioner.validate(&options).map_err(backend_error)?;

    let cleanup_state = ctx.provisioner.cleanup_state(&options);
    let claim = persist_intent(&observed.claims, &claim, &plan, &ctx.name, &cleanup_state).await?;
    let options = BucketOptions { claim: (*claim).clone(), ..options };
    let started = Instant::now();
    let provisioned = match plan.source {
        BucketSource::New => ctx.provisioner.provision(&options).await,
        BucketSource::Existing => ctx.provisioner.grant(&options).await,
    }
    .map_err(backend_error)?;
    ctx.metrics.observe_provisioning(operation.as_str(), started.elapsed().as_secs_f64());

    write_results(&claim, &observed, &plan, &provisioned, ctx).await?;
    let (reason, verb) = match plan.source {
        BucketSource::New => ("Provisioned", "provisioned"),
        BucketSource::Existing => ("Granted", "granted access to"),
    };
    let message = format!("{verb} bucket {:?}", plan.bucket_name);
    ctx.event(&claim, EventType::Normal, reason, &message, operation).await;
    tracing::info!(claim = %key(&*claim), bucket = %plan.bucket_name, "{message}");
    set_claim_status(&observed.claims, &claim, &bound_state(&message)).await?;
    Ok(Action::await_change())
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

/// A bound claim with its Secret: repair the ConfigMap if needed, pass on an `additionalConfig`
/// change, and report Bound, all without asking the backend for anything else.
async fn keep_bound<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    bound: &ObjectBucket,
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    let bucket_name = bound_bucket_name(bound).to_string();
    let recorded_config = bound.spec.endpoint.as_ref().and_then(|e| e.additional_config.clone());
    if !same_config(&claim.spec.additional_config, &recorded_config) {
        update_config(&claim, bound, &bucket_name, observed, ctx).await?;
    }
    if let Some(endpoint) = objects::endpoint_of(bound) {
        let desired = objects::config_map(&claim, &ctx.name, &endpoint, &bucket_name);
        ensure_owned(
            &observed.config_maps,
            desired,
            &observed.uid,
            Error::ForeignConfigMap,
            |a, b| a.data == b.data,
        )
        .await?;
    }
    let claim = set_object_bucket_name(&observed.claims, claim, &observed.bucket_name).await?;
    set_bucket_status(
        &observed.buckets,
        bound,
        ObjectBucketPhase::Bound,
        "Bound",
        "bound to its claim",
    )
    .await?;
    let message = format!("bound to bucket {bucket_name:?}");
    set_claim_status(&observed.claims, &claim, &bound_state(&message)).await?;
    Ok(Action::await_change())
}

async fn update_config<P: Provisioner>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    bucket_name: &str,
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let class = storage_class(&ctx.client, &claim.spec.storage_class_name).await?;
    let source = source_of(bound.annotations()).unwrap_or(BucketSource::Existing);
    let mut parameters = class.parameters.clone().unwrap_or_default();
    parameters.remove(STORAGE_CLASS_BUCKET_NAME);
    let plan = Plan {
        bucket_name: bucket_name.to_string(),
        source,
        reclaim_policy: bound.spec.reclaim_policy.unwrap_or_default(),
        parameters,
    };
    let options = bucket_options(claim, &plan, &observed.uid);
    let backend_error = |source| Error::Backend {
        operation: Operation::Update,
        bucket: bucket_name.to_string(),
        source,
        hint: "",
    };
    ctx.provisioner.validate(&options).map_err(backend_error)?;
    let started = Instant::now();
    ctx.provisioner.update(&options, bound).await.map_err(backend_error)?;
    ctx.metrics.observe_provisioning(Operation::Update.as_str(), started.elapsed().as_secs_f64());

    let patch =
        json!({ "spec": { "endpoint": { "additionalConfig": claim.spec.additional_config } } });
    // Replace, not merge, the recorded map so that removed keys disappear too.
    let clear = json!({ "spec": { "endpoint": { "additionalConfig": null } } });
    let params = PatchParams::default();
    observed.buckets.patch(&observed.bucket_name, &params, &Patch::Merge(&clear)).await?;
    observed.buckets.patch(&observed.bucket_name, &params, &Patch::Merge(&patch)).await?;
    let message = format!("applied additionalConfig to bucket {bucket_name:?}");
    ctx.event(claim, EventType::Normal, "Updated", &message, Operation::Update).await;
    Ok(())
}

async fn storage_class(client: &kube::Client, name: &str) -> Result<StorageClass, Error> {
    Api::<StorageClass>::all(client.clone())
        .get_opt(name)
        .await?
        .ok_or_else(|| Error::StorageClassNotFound(name.to_string()))
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

/// Records the bucket name and what cleanup will need on the claim itself, before the backend is
/// called, so neither a crash nor a deleted StorageClass can lose track of the bucket. The claim's
/// resourceVersion guards the write: a concurrent change fails it, and the retry starts over.
async fn persist_intent(
    api: &Api<ObjectBucketClaim>,
    claim: &ObjectBucketClaim,
    plan: &Plan,
    provisioner: &str,
    cleanup_state: &BTreeMap<String, String>,
) -> Result<Arc<ObjectBucketClaim>, Error> {
    let state = serde_json::to_string(cleanup_state).unwrap_or_default();
    let mut wanted = BTreeMap::from([
        (annotations::PROVISIONER, provisioner),
        (annotations::BUCKET_SOURCE, plan.source.as_str()),
        (annotations::RECLAIM_POLICY, reclaim_policy_str(plan.reclaim_policy)),
    ]);
    if !cleanup_state.is_empty() {
        wanted.insert(annotations::CLEANUP_STATE, &state);
    }
    let current = claim.annotations();
    let annotations_match =
        wanted.iter().all(|(k, v)| current.get(*k).map(String::as_str) == Some(*v));
    if annotations_match && claim.spec.bucket_name.as_deref() == Some(plan.bucket_name.as_str()) {
        return Ok(Arc::new(claim.clone()));
    }
    let patch = json!({
        "metadata": { "resourceVersion": claim.resource_version(), "annotations": wanted },
        "spec": { "bucketName": plan.bucket_name },
    });
    let updated =
        api.patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Arc::new(updated))
}

/// Marks the claim as this provisioner's right after the finalizer is added, so its cleanup is
/// found again even if the StorageClass disappears before a bucket is chosen.
async fn record_provisioner(
    api: &Api<ObjectBucketClaim>,
    claim: Arc<ObjectBucketClaim>,
    provisioner: &str,
) -> Result<Arc<ObjectBucketClaim>, Error> {
    if claim.annotations().contains_key(annotations::PROVISIONER) {
        return Ok(claim);
    }
    let patch = json!({ "metadata": { "annotations": { annotations::PROVISIONER: provisioner } } });
    let updated =
        api.patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Arc::new(updated))
}

async fn set_object_bucket_name(
    api: &Api<ObjectBucketClaim>,
    claim: Arc<ObjectBucketClaim>,
    bucket: &str,
) -> Result<Arc<ObjectBucketClaim>, Error> {
    if claim.spec.object_bucket_name.as_deref() == Some(bucket) {
        return Ok(claim);
    }
    let patch = json!({ "spec": { "objectBucketName": bucket } });
    let updated =
        api.patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Arc::new(updated))
}

async fn write_results<P: Provisioner>(
    claim: &ObjectBucketClaim,
    observed: &Observed,
    plan: &Plan,
    provisioned: &ProvisionedBucket,
    ctx: &Context<P>,
) -> Result<(), Error> {
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
        additional_state: provisioned.additional_state.clone(),
    });
    let bucket = match &observed.bound {
        None => observed.buckets.create(&PostParams::default(), &desired).await?,
        Some(existing) => {
            let mut replacement = desired;
            replacement.metadata.resource_version = existing.resource_version();
            observed
                .buckets
                .replace(&observed.bucket_name, &PostParams::default(), &replacement)
                .await?
        }
    };
    let secret = objects::secret(claim, &ctx.name, &provisioned.credentials);
    ensure_owned(&observed.secrets, secret, &observed.uid, Error::ForeignSecret, |a, b| {
        a.data == b.data
    })
    .await?;
    let config_map =
        objects::config_map(claim, &ctx.name, &provisioned.endpoint, &plan.bucket_name);
    ensure_owned(
        &observed.config_maps,
        config_map,
        &observed.uid,
        Error::ForeignConfigMap,
        |a, b| a.data == b.data,
    )
    .await?;

    set_bucket_status(
        &observed.buckets,
        &bucket,
        ObjectBucketPhase::Bound,
        "Bound",
        "bound to its claim",
    )
    .await?;
    set_object_bucket_name(&observed.claims, Arc::new(claim.clone()), &observed.bucket_name)
        .await?;
    Ok(())
}

fn source_of(annotations: &BTreeMap<String, String>) -> Option<BucketSource> {
    annotations.get(annotations::BUCKET_SOURCE).and_then(|s| BucketSource::parse(s))
}

/// The record cleanup works from: the bound ObjectBucket, or, when a crash came between the
/// backend call and writing it, what the claim recorded before the call. `None` when the backend
/// was never called for this claim.
fn cleanup_record(
    claim: &ObjectBucketClaim,
    observed: &Observed,
    provisioner: &str,
) -> Option<(ObjectBucket, BucketSource)> {
    if let Some(bound) = &observed.bound {
        // Unknown origin: assume the bucket is not ours to delete.
        let source = source_of(bound.annotations()).unwrap_or(BucketSource::Existing);
        return Some((bound.clone(), source));
    }
    let recorded = claim.annotations();
    if recorded.get(annotations::PROVISIONER).map(String::as_str) != Some(provisioner) {
        return None;
    }
    let source = source_of(recorded)?;
    let bucket = claim.spec.bucket_name.clone().filter(|b| !b.is_empty())?;
    let reclaim_policy = recorded
        .get(annotations::RECLAIM_POLICY)
        .and_then(|p| parse_reclaim_policy(p))
        .unwrap_or(ReclaimPolicy::Retain);
    let synthesized = ObjectBucket {
        metadata: ObjectMeta { name: Some(observed.bucket_name.clone()), ..Default::default() },
        spec: ObjectBucketSpec {
            storage_class_name: claim.spec.storage_class_name.clone(),
            reclaim_policy: Some(reclaim_policy),
            claim_ref: Some(objects::claim_ref(claim)),
            endpoint: Some(BucketEndpoint { bucket_name: bucket, ..Default::default() }),
            additional_state: recorded
                .get(annotations::CLEANUP_STATE)
                .and_then(|state| serde_json::from_str(state).ok()),
        },
        status: None,
    };
    Some((synthesized, source))
}

/// Cleans up after a deleted claim: delete or revoke through the backend, then release or delete
/// the ObjectBucket. Never needs the StorageClass.
pub async fn cleanup<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    let observed = match observe(&claim, &ctx.client).await {
        // An ObjectBucket of another claim is not ours to touch; nothing of this claim's exists.
        Err(Error::ObjectBucketConflict { .. } | Error::ObjectBucketNameTooLong(_)) => {
            return Ok(Action::await_change());
        }
        other => other?,
    };
    let claim_name = claim.name_any();
    let Some((record, source)) = cleanup_record(&claim, &observed, &ctx.name) else {
        delete_owned_outputs(&observed, &claim_name).await?;
        return Ok(Action::await_change());
    };
    let bucket = bound_bucket_name(&record).to_string();
    let real_record = observed.bound.is_some();

    if claim.annotations().get(annotations::ABANDON_BUCKET).map(String::as_str) == Some("true") {
        let message = format!(
            "bucket {bucket:?} abandoned on request ({}); it and any access keys were left as they are",
            annotations::ABANDON_BUCKET
        );
        ctx.event(&claim, EventType::Warning, "Abandoned", &message, Operation::Revoke).await;
        tracing::warn!(claim = %key(&*claim), "{message}");
        if real_record {
            release(&observed, &record, ObjectBucketPhase::Failed, "Abandoned", &message).await?;
        }
        delete_owned_outputs(&observed, &claim_name).await?;
        return Ok(Action::await_change());
    }

    let delete_bucket =
        source == BucketSource::New && record.spec.reclaim_policy == Some(ReclaimPolicy::Delete);
    let operation = if delete_bucket { Operation::Delete } else { Operation::Revoke };
    let started = Instant::now();
    let outcome = if delete_bucket {
        ctx.provisioner.delete(&record).await
    } else {
        ctx.provisioner.revoke(&record).await
    };
    ctx.metrics.observe_provisioning(operation.as_str(), started.elapsed().as_secs_f64());

    match outcome {
        Ok(()) => {
            // A retained bucket stays on record as Released; anything else has nothing left to
            // describe (a deleted bucket, or access to a bucket that was never ours).
            let retained = source == BucketSource::New && !delete_bucket;
            if real_record && retained {
                let message = "claim deleted; the bucket was retained";
                release(&observed, &record, ObjectBucketPhase::Released, "Released", message)
                    .await?;
            } else if real_record {
                remove_bucket_finalizer(&observed, &record).await?;
                match observed.buckets.delete(&observed.bucket_name, &Default::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            let message = if delete_bucket {
                format!("deleted bucket {bucket:?}")
            } else {
                format!("revoked the claim's access to bucket {bucket:?}; the bucket was kept")
            };
            let reason = if delete_bucket { "Deleted" } else { "Revoked" };
            ctx.event(&claim, EventType::Normal, reason, &message, operation).await;
            tracing::info!(claim = %key(&*claim), "{message}");
        }
        // Retrying cannot help: say so everywhere and let the claim go, keeping the ObjectBucket
        // as the record of what was left behind.
        Err(error @ BackendError::Permanent { .. }) => {
            let failure =
                Error::Backend { operation, bucket: bucket.clone(), source: error, hint: "" };
            let message = format!("{failure}; the bucket was left behind for manual cleanup");
            ctx.event(&claim, EventType::Warning, failure.reason(), &message, operation).await;
            tracing::warn!(claim = %key(&*claim), reason = failure.reason(), "{message}");
            if real_record {
                release(&observed, &record, ObjectBucketPhase::Failed, failure.reason(), &message)
                    .await?;
            }
        }
        Err(source) => {
            return Err(Error::Backend { operation, bucket, source, hint: ABANDON_HINT });
        }
    }
    delete_owned_outputs(&observed, &claim_name).await?;
    Ok(Action::await_change())
}

/// Leaves the ObjectBucket in `phase` without our finalizer, so a person can inspect or delete it.
async fn release(
    observed: &Observed,
    record: &ObjectBucket,
    phase: ObjectBucketPhase,
    reason: &str,
    message: &str,
) -> Result<(), Error> {
    set_bucket_status(&observed.buckets, record, phase, reason, message).await?;
    remove_bucket_finalizer(observed, record).await
}

async fn remove_bucket_finalizer(observed: &Observed, record: &ObjectBucket) -> Result<(), Error> {
    // Read again: a status write just now changed the resourceVersion the patch is guarded by.
    let Some(current) = observed.buckets.get_opt(&record.name_any()).await? else { return Ok(()) };
    if !current.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let remaining: Vec<&String> = current.finalizers().iter().filter(|f| *f != FINALIZER).collect();
    let patch = json!({
        "metadata": { "resourceVersion": current.resource_version(), "finalizers": remaining }
    });
    observed
        .buckets
        .patch(&observed.bucket_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The garbage collector removes these too; deleting them now revokes nothing but tidies at once.
async fn delete_owned_outputs(observed: &Observed, claim_name: &str) -> Result<(), Error> {
    delete_if_owned(&observed.secrets, claim_name, &observed.uid).await?;
    delete_if_owned(&observed.config_maps, claim_name, &observed.uid).await
}

/// `namespace/name`, for logs.
pub fn key(claim: &impl Resource) -> String {
    format!(
        "{}/{}",
        claim.meta().namespace.as_deref().unwrap_or(""),
        claim.meta().name.as_deref().unwrap_or("")
    )
}
