//! Apply: a bound claim's [`BoundPlan`] carried out. Every backend call and every write of its
//! reconcile is made here (or in the step it hands to: a rotation's, a lost bucket's, a
//! withdrawn consent's), in the order the plan's decisions come; what was done is noted in
//! [`Done`] for [`super::report`] to tell.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER, annotations};
use bucket_api::{AccessMode, ObjectBucket, ObjectBucketClaim};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::bucket::bound::observe::bound_class;
use crate::bucket::bound::plan::{BoundPlan, Keep, Narrowing, differs};
use crate::bucket::context::Context;
use crate::bucket::error::{Error, Operation};
use crate::bucket::limits::Limited;
use crate::bucket::objects;
use crate::bucket::observe::Observed;
use crate::bucket::ownership::{CredentialsCheck, check_credentials, ensure_owned};
use crate::bucket::plan::{Plan, bucket_options};
use crate::bucket::rotation::{self, RotationPolicy};
use crate::bucket::{cross_namespace, sharing, web_identity};
use crate::kubernetes::cache::summary::Summary;
use crate::kubernetes::finalizer;
use crate::kubernetes::watch::label_value;
use crate::{BucketOptions, Provisioner};

/// What a bound claim's reconcile did on its way, whatever its outcome.
#[derive(Debug, Default)]
pub(crate) struct Done {
    /// Its ObjectBucket, deleted by hand, was written again.
    pub(crate) recreated: bool,
    /// Its finalizer, removed by hand, was put back.
    pub(crate) finalizer_restored: bool,
    /// The backend was given this access mode and the claim's `additionalConfig` for the bucket.
    pub(crate) updated: Option<(AccessMode, String)>,
    /// The key's access mode was narrowed (from, to) on the bucket, before anything the claim
    /// asks for was read.
    pub(crate) narrowed: Option<(AccessMode, AccessMode, String)>,
}

/// Where applying the plan left the claim.
pub(crate) enum Applied {
    /// Everything it depends on is as written: it is reported Bound.
    Bound(Box<Kept>),
    /// Its Secret lost or changed its credentials: the backend issues them again for this
    /// ObjectBucket, which the provisioning path does.
    IssueCredentials(Box<ObjectBucket>),
    /// Consent to share came back between the look and the act: the claim is looked at again.
    LookAgain,
}

/// A claim kept Bound, with what its status says.
pub(crate) struct Kept {
    /// The claim, as last written.
    pub(crate) claim: Arc<ObjectBucketClaim>,
    /// Its ObjectBucket, as last written.
    pub(crate) bound: ObjectBucket,
    /// The quotas and access mode in force.
    pub(crate) limited: Limited,
    /// The rotation policy its keys are held to.
    pub(crate) policy: RotationPolicy,
    /// Its `Ready` condition's message.
    pub(crate) message: String,
}

/// Carries out `plan` for `claim`, bound to `bound`, whose Secret the cache held as `secret`.
pub(crate) async fn apply<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    (bound, plan): (ObjectBucket, BoundPlan),
    secret: Option<&Summary>,
    observed: &Observed,
    (ctx, done): (&Context<P>, &mut Done),
) -> Result<Applied, Error> {
    match plan {
        BoundPlan::Lost => Err(sharing::settle_lost(&bound, ctx).await?),
        BoundPlan::Withdraw => {
            match cross_namespace::withdraw_if_refused(&claim, &bound, ctx).await? {
                Some(withdrawn) => Err(withdrawn),
                None => Ok(Applied::LookAgain),
            }
        }
        BoundPlan::Keep(keep) => {
            keep_bound(claim, bound, *keep, secret, observed, (ctx, done)).await
        }
    }
}

/// Brings a bound claim back to what was written for it, then applies what is in force, all
/// without asking the backend for anything it holds already.
async fn keep_bound<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    mut bound: ObjectBucket,
    keep: Keep,
    secret: Option<&Summary>,
    observed: &Observed,
    (ctx, done): (&Context<P>, &mut Done),
) -> Result<Applied, Error> {
    if keep.recreate {
        bound = recreate_object_bucket(observed, &bound, ctx).await?;
        done.recreated = true;
    }
    // Before any check its tenant can make fail: a narrowed grant or class reaches the key even
    // while the claim itself is broken (it still reports its own error below).
    if let Some(narrowing) = &keep.narrow {
        let Narrowing { plan, from, limited } = &**narrowing;
        bound = update_config(&claim, &bound, observed, ctx, (plan, limited)).await?;
        done.narrowed = Some((*from, limited.access_mode, plan.bucket_name.clone()));
    }
    keep.binding?;
    let rotation = keep.rotation?;
    let policy = rotation.policy;
    // Before the credentials check: a rotation interrupted between writing the Secret and
    // recording it is finished here, not mistaken for an edited Secret.
    // A claim that gets sessions only holds no key to replace: its sessions are short already.
    if rotation.due() && !web_identity::sessions_only(&bound) {
        (bound, _) = rotation::advance(&claim, bound, (secret, &policy), observed, ctx).await?;
    }
    let secret = ctx.caches.secrets.get(&observed.namespace, &claim.name_any());
    // A claim that gets sessions only has no Secret to check.
    if !web_identity::sessions_only(&bound)
        && check_credentials(secret.as_deref(), &bound) != CredentialsCheck::Recorded
    {
        // Credentials are never stored outside the Secret: the backend issues them again.
        return Ok(Applied::IssueCredentials(Box::new(bound)));
    }
    let claim = if keep.restore_finalizer {
        let written = finalizer::add(&observed.claims, &*claim, FINALIZER).await?;
        done.finalizer_restored = true;
        ctx.caches.claims.wrote(written)
    } else {
        claim
    };
    let config = keep.config?;
    // Unless the narrowing above already brought the ObjectBucket to it.
    if let Some(plan) = config.update.as_ref().filter(|_| differs(&bound, &config.limited)) {
        bound = update_config(&claim, &bound, observed, ctx, (plan, &config.limited)).await?;
        done.updated = Some((config.limited.access_mode, plan.bucket_name.clone()));
    }
    if let Some(endpoint) = objects::endpoint_of(&bound) {
        let bucket = crate::bucket::observe::bound_bucket_name(&bound);
        let desired = objects::config_map(&claim, &ctx.name, &endpoint, bucket);
        let desired = objects::with_web_identity(desired, &bound);
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
    if let Some(exceeded) = config.exceeded(&claim) {
        return Err(exceeded);
    }
    let claim = match &keep.record_name {
        Some(name) => set_object_bucket_name(&observed.claims, &claim, name, ctx).await?,
        None => claim,
    };
    let limited = config.limited;
    let kept = Kept { claim, bound, limited, policy, message: keep.message };
    Ok(Applied::Bound(Box::new(kept)))
}

/// A live claim's ObjectBucket was deleted (it waits on our finalizer): let it go and write it
/// again from the copy, which keeps everything the backend answered.
async fn recreate_object_bucket<P: Provisioner>(
    observed: &Observed,
    terminating: &ObjectBucket,
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
    crate::bucket::cleanup::apply::remove_bucket_finalizer(&observed.buckets, terminating, ctx)
        .await?;
    let created =
        ctx.caches.buckets.wrote(observed.buckets.create(&PostParams::default(), &copy).await?);
    Ok((*created).clone())
}

/// Hands what is in force to the backend's `update`, then records it on the ObjectBucket;
/// answers the ObjectBucket as written.
async fn update_config<P: Provisioner>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    observed: &Observed,
    ctx: &Context<P>,
    (plan, limited): (&Plan, &Limited),
) -> Result<ObjectBucket, Error> {
    let options = bucket_options(claim, plan, &observed.uid, limited);
    // The class it is bound under, not one the claim may have been edited to name.
    let storage_class_name = bound_class(claim, bound).to_owned();
    let options = BucketOptions { storage_class_name, ..options };
    let backend_error = |source| Error::Backend {
        operation: Operation::Update,
        bucket: plan.bucket_name.clone(),
        source,
        hint: "",
    };
    ctx.provisioner.validate(&options).map_err(backend_error)?;
    let answered = match &options.web_identity {
        None => None,
        Some(_) => Some(ctx.provisioner.web_identity(&options).map_err(backend_error)?),
    };
    let started = Instant::now();
    ctx.provisioner.update(&options, bound).await.map_err(backend_error)?;
    ctx.metrics.observe_provisioning(Operation::Update.as_str(), started.elapsed().as_secs_f64());

    let recorded = bound.spec.endpoint.as_ref().and_then(|e| e.additional_config.as_ref());
    let mut patch = config_patch(recorded, Some(&limited.config));
    let mode = limited.access_mode.as_str();
    let mut recorded = bound.clone();
    web_identity::record(&mut recorded, options.web_identity.as_ref(), answered.as_ref());
    let mut written = serde_json::Map::new();
    for key in web_identity::ANNOTATIONS {
        let value = recorded.annotations().get(key).map_or(serde_json::Value::Null, |v| json!(v));
        written.insert(key.to_owned(), value);
    }
    written.insert(annotations::ACCESS_MODE.to_owned(), json!(mode));
    patch["metadata"] = json!({ "annotations": written });
    let params = PatchParams::default();
    let updated =
        observed.buckets.patch(&observed.bucket_name, &params, &Patch::Merge(&patch)).await?;
    Ok((*ctx.caches.buckets.wrote(updated)).clone())
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
    claim: &ObjectBucketClaim,
    bucket: &str,
    ctx: &Context<P>,
) -> Result<Arc<ObjectBucketClaim>, Error> {
    let patch = json!({ "spec": { "objectBucketName": bucket } });
    let updated =
        api.patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(ctx.caches.claims.wrote(updated))
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
