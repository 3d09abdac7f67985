//! A claim already bound: kept as it is, repaired where someone changed what it depends on, and
//! its `additionalConfig` passed on to the backend.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER, annotations};
use bucket_api::{
    AccessMode, ClaimPhase, CredentialsStatus, ObjectBucket, ObjectBucketClaim, ObjectBucketPhase,
};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::Provisioner;
use crate::bucket::context::Context;
use crate::bucket::error::{Error, Operation};
use crate::bucket::limits::{ClassLimits, Limited};
use crate::bucket::objects::{self, BucketSource};
use crate::bucket::observe::{Observed, bound_bucket_name, source_of};
use crate::bucket::ownership::{CredentialsCheck, check_credentials, ensure_owned};
use crate::bucket::plan::{Plan, bucket_options, exceeded, limited, plan_for_bound};
use crate::bucket::rotation;
use crate::bucket::status::{ClaimState, set_bucket_status, set_claim_status};
use crate::kubernetes::cache::key;
use crate::kubernetes::cache::summary::Summary;
use crate::kubernetes::finalizer;
use crate::kubernetes::watch::label_value;

fn same_config(a: &Option<BTreeMap<String, String>>, b: &Option<BTreeMap<String, String>>) -> bool {
    a.as_ref().filter(|m| !m.is_empty()) == b.as_ref().filter(|m| !m.is_empty())
}

/// What [`repair`] left to do.
pub(crate) enum Repair {
    /// The claim is Bound and everything it depends on is as written.
    Done(Action),
    /// The claim's Secret lost or changed its credentials: the backend must issue them again for
    /// this ObjectBucket, which the provisioning path does.
    IssueCredentials(Box<ObjectBucket>),
}

/// Brings a bound claim back to what was written for it: an ObjectBucket deleted by hand written
/// again, the finalizer, the ConfigMap and `additionalConfig` restored or passed on, and the
/// credentials checked against the ObjectBucket's record of them.
pub(crate) async fn repair<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    bound: ObjectBucket,
    secret: Option<&Summary>,
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<Repair, Error> {
    let bound = if bound.meta().deletion_timestamp.is_some() {
        recreate_object_bucket(observed, &bound, &claim, ctx).await?
    } else {
        bound
    };
    check_unchanged_binding(&claim, &bound)?;
    // Before the credentials check: a rotation interrupted between writing the Secret and
    // recording it is finished here, not mistaken for an edited Secret.
    let (bound, _) = rotation::advance(&claim, bound, secret, observed, ctx).await?;
    let secret = ctx.caches.secrets.get(&observed.namespace, &claim.name_any());
    if check_credentials(secret.as_deref(), &bound) == CredentialsCheck::Recorded {
        return Ok(Repair::Done(keep_bound(claim, &bound, observed, ctx).await?));
    }
    // Credentials are never stored outside the Secret: the backend issues them again.
    let message = "the claim's Secret lost or changed its credentials; issuing them again";
    tracing::info!(claim = %key(&*claim), "{message}");
    ctx.event(&claim, EventType::Normal, "RestoringCredentials", message, Operation::Provision)
        .await;
    Ok(Repair::IssueCredentials(Box::new(bound)))
}

/// What a Bound claim's condition says; the same on every reconcile, so that it is written once.
pub(crate) fn bound_message(source: BucketSource, bucket: &str) -> String {
    match source {
        BucketSource::New => format!("provisioned bucket {bucket:?}"),
        BucketSource::Existing => format!("granted access to bucket {bucket:?}"),
    }
}

fn bound_state(
    message: &str,
    access_mode: AccessMode,
    credentials: Option<CredentialsStatus>,
) -> ClaimState {
    ClaimState {
        phase: ClaimPhase::Bound,
        ready: true,
        reason: "Bound".into(),
        message: message.into(),
        access_mode: Some(access_mode),
        credentials,
    }
}

/// What is in force for a bound claim now, with the plan to apply it by; no plan when its
/// StorageClass is gone (so no limits can be read, and nothing can be applied).
fn in_force<P>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<(Option<Plan>, Limited), Error> {
    match ctx.caches.class(&claim.spec.storage_class_name) {
        Some(class) => {
            let mut plan = plan_for_bound(bound, &class)?;
            if let Some(mode) = crate::bucket::sharing::bound_owner_mode(claim, bound, ctx) {
                plan.limits = plan.limits.shared_from(mode);
            }
            let limited = limited(claim, &plan, true)?;
            Ok((Some(plan), limited))
        }
        None => Ok((None, ClassLimits::default().apply(claim.spec.additional_config.as_ref())?)),
    }
}

/// Whether the ObjectBucket records something else in force than `limited`. One written before
/// access modes existed records none: its claim's credentials have all access.
fn differs(bound: &ObjectBucket, limited: &Limited) -> bool {
    let recorded_config = bound.spec.endpoint.as_ref().and_then(|e| e.additional_config.clone());
    let recorded_mode = bound.annotations().get(annotations::ACCESS_MODE).map(String::as_str);
    !same_config(&Some(limited.config.clone()), &recorded_config)
        || recorded_mode.unwrap_or(AccessMode::ReadWrite.as_str()) != limited.access_mode.as_str()
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
    let label = (LABEL_PROVISIONER.to_owned(), label_value(&ctx.name));
    copy.metadata = ObjectMeta {
        name: terminating.metadata.name.clone(),
        labels: Some([label].into()),
        annotations: terminating.metadata.annotations.clone(),
        finalizers: Some(vec![FINALIZER.into()]),
        ..Default::default()
    };
    copy.status = None;
    crate::bucket::cleanup::remove_bucket_finalizer(&observed.buckets, terminating, ctx).await?;
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
    let (plan, limited) = in_force(&claim, bound, ctx)?;
    if differs(bound, &limited) {
        let Some(plan) = plan else {
            return Err(Error::StorageClassNotFound(claim.spec.storage_class_name.clone()));
        };
        update_config(&claim, bound, observed, ctx, (&plan, &limited)).await?;
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
    // Held to the class's limits above; the claim says what it asked for that is refused.
    if let Some(message) = &limited.exceeded {
        return Err(exceeded(&claim, message));
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
    let (credentials, wait) = rotation::schedule(&claim, &bound, ctx)?;
    set_bound(observed, &bound, &claim, &message, (limited.access_mode, credentials), ctx).await?;
    Ok(wait.map_or_else(Action::await_change, Action::requeue))
}

/// Hands what is in force to the backend's `update`, then records it on the ObjectBucket.
async fn update_config<P: Provisioner>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    observed: &Observed,
    ctx: &Context<P>,
    (plan, limited): (&Plan, &Limited),
) -> Result<(), Error> {
    let options = bucket_options(claim, plan, &observed.uid, limited);
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
    let mut patch = config_patch(recorded, Some(&limited.config));
    let mode = limited.access_mode.as_str();
    patch["metadata"] = json!({ "annotations": { annotations::ACCESS_MODE: mode } });
    let params = PatchParams::default();
    let updated =
        observed.buckets.patch(&observed.bucket_name, &params, &Patch::Merge(&patch)).await?;
    ctx.caches.buckets.wrote(updated);
    let message =
        format!("applied additionalConfig and access mode {mode} to bucket {:?}", plan.bucket_name);
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

/// Marks the ObjectBucket Bound, then the claim.
pub(crate) async fn set_bound<P>(
    observed: &Observed,
    bucket: &ObjectBucket,
    claim: &ObjectBucketClaim,
    message: &str,
    (access_mode, credentials): (AccessMode, Option<CredentialsStatus>),
    ctx: &Context<P>,
) -> Result<(), Error> {
    let state = bound_state(message, access_mode, credentials);
    // One after the other, the ObjectBucket first: whoever sees the claim Bound (the condition
    // users wait on) then finds its ObjectBucket Bound too.
    let bucket = set_bucket_status(
        &observed.buckets,
        bucket,
        ObjectBucketPhase::Bound,
        "Bound",
        "bound to its claim",
    )
    .await?;
    if let Some(written) = bucket {
        ctx.caches.buckets.wrote(written);
    }
    if let Some(written) = set_claim_status(&observed.claims, claim, &state).await? {
        ctx.caches.claims.wrote(written);
    }
    Ok(())
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
