//! What happens when a claim goes: delete or revoke through the backend, then release or delete
//! the ObjectBucket. The same path serves a claim being deleted and an ObjectBucket left behind
//! by a claim that is gone without its finalizer (the sweep), and never needs the StorageClass.
//!
//! The library asks for a bucket's deletion only when its own record (the ObjectBucket, or what
//! the claim recorded before the backend was first called) says the bucket was made for the
//! claim under `Delete`; the backend's own record has the last word (see
//! [`Provisioner::delete`]).

use std::sync::Arc;
use std::time::Instant;

use bucket_api::contract::FINALIZER;
use bucket_api::{
    BucketEndpoint, ObjectBucket, ObjectBucketClaim, ObjectBucketPhase, ObjectBucketSpec,
    ReclaimPolicy,
};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use bucket_api::contract::annotations;

use crate::bucket::context::Context;
use crate::bucket::error::{ABANDON_HINT, Error, Operation};
use crate::bucket::objects::{self, BucketSource, parse_reclaim_policy};
use crate::bucket::observe::{Observed, bound_bucket_name, bound_uid, observe, source_of};
use crate::bucket::settlement::{Record, Settled, deletes_bucket, settled};
use crate::bucket::status::set_bucket_status;
use crate::kubernetes::cache::reference_key;
use crate::kubernetes::finalizer;
use crate::kubernetes::watch::label_value;
use crate::{BackendError, Provisioner, Removed};

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
        metadata: ObjectMeta {
            name: Some(observed.bucket_name.clone()),
            annotations: Some([(annotations::BUCKET_SOURCE.into(), source.as_str().into())].into()),
            ..Default::default()
        },
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

/// Cleans up after a deleted claim. Never needs the StorageClass.
pub async fn cleanup<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    // The Secret and ConfigMap are the claim's own: the garbage collector removes them with it.
    let observed = observe(&claim, ctx);
    let Some((record, source)) = cleanup_record(&claim, &observed, &ctx.name) else {
        return Ok(Action::await_change());
    };
    let real_record = observed.bound.is_some();
    let subject = claim.object_ref(&());

    if claim.annotations().get(annotations::ABANDON_BUCKET).map(String::as_str) == Some("true") {
        abandon(&observed.buckets, &record, real_record, &subject, ctx).await?;
        return Ok(Action::await_change());
    }

    settle(&observed.buckets, &record, source, real_record, &subject, ctx).await.map_err(|e| {
        match e {
            Error::Backend { operation, bucket, source, .. } => {
                Error::Backend { operation, bucket, source, hint: ABANDON_HINT }
            }
            other => other,
        }
    })?;
    Ok(Action::await_change())
}

/// Abandoning leaves the bucket as it is, but never the claim's access: the key is revoked now,
/// or, while the backend cannot answer, by the sweep from an ObjectBucket marked abandoned.
async fn abandon<P: Provisioner>(
    buckets: &Api<ObjectBucket>,
    record: &ObjectBucket,
    real_record: bool,
    subject: &k8s_openapi::api::core::v1::ObjectReference,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let bucket = bound_bucket_name(record).to_string();
    let started = Instant::now();
    let revoked = ctx.provisioner.revoke(record).await;
    ctx.metrics.observe_provisioning(Operation::Revoke.as_str(), started.elapsed().as_secs_f64());
    let message = match &revoked {
        Ok(()) => format!(
            "bucket {bucket:?} abandoned on request ({}): it was left as it is, and the claim's \
             access was revoked",
            annotations::ABANDON_BUCKET
        ),
        Err(e) => format!(
            "bucket {bucket:?} abandoned on request ({}): it was left as it is; revoking the \
             claim's access failed ({e}) and is retried until it succeeds",
            annotations::ABANDON_BUCKET
        ),
    };
    ctx.publish(subject, EventType::Warning, "Abandoned", &message, Operation::Revoke).await;
    tracing::warn!(claim = %reference_key(subject), "{message}");
    match (revoked, real_record) {
        (Ok(()), true) => {
            release(buckets, record, ObjectBucketPhase::Failed, "Abandoned", &message, ctx).await
        }
        (Ok(()), false) => Ok(()),
        // Hand the revoke over to the sweep, through an ObjectBucket it will find.
        (Err(_), true) => {
            let patch =
                json!({ "metadata": { "annotations": { annotations::ABANDONED: "true" } } });
            let marked = buckets
                .patch(&record.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let marked = ctx.caches.buckets.wrote(marked);
            set_status(buckets, &marked, ObjectBucketPhase::Failed, "Abandoned", &message, ctx)
                .await
        }
        (Err(_), false) => {
            let mut marked = record.clone();
            let meta = &mut marked.metadata;
            meta.annotations
                .get_or_insert_default()
                .insert(annotations::ABANDONED.into(), "true".into());
            meta.annotations
                .get_or_insert_default()
                .insert(annotations::PROVISIONER.into(), ctx.name.clone());
            meta.labels = Some(
                [(bucket_api::contract::LABEL_PROVISIONER.into(), label_value(&ctx.name))].into(),
            );
            meta.finalizers = Some(vec![FINALIZER.into()]);
            match buckets.create(&PostParams::default(), &marked).await {
                Ok(created) => {
                    let created = ctx.caches.buckets.wrote(created);
                    set_status(
                        buckets,
                        &created,
                        ObjectBucketPhase::Failed,
                        "Abandoned",
                        &message,
                        ctx,
                    )
                    .await
                }
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// Asks the backend to delete the bucket (`delete_bucket`) or to revoke the claim's access, timed
/// as the provisioning operation it is.
pub(crate) async fn give_back<P: Provisioner>(
    record: &ObjectBucket,
    delete_bucket: bool,
    ctx: &Context<P>,
) -> (Operation, Result<Removed, BackendError>) {
    let operation = if delete_bucket { Operation::Delete } else { Operation::Revoke };
    let started = Instant::now();
    let outcome = if delete_bucket {
        ctx.provisioner.delete(record).await
    } else {
        ctx.provisioner.revoke(record).await.map(|()| Removed::AccessOnly)
    };
    ctx.metrics.observe_provisioning(operation.as_str(), started.elapsed().as_secs_f64());
    (operation, outcome)
}

/// Deletes or revokes per the record, then releases or deletes the ObjectBucket as the
/// backend's answer decides ([`settled`]) and says what happened on `subject`. A transient
/// backend failure is returned for a retry; a permanent one is reported and leaves the
/// ObjectBucket `Failed` as the record of what was left behind.
async fn settle<P: Provisioner>(
    buckets: &Api<ObjectBucket>,
    record: &ObjectBucket,
    source: BucketSource,
    real_record: bool,
    subject: &k8s_openapi::api::core::v1::ObjectReference,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let bucket = bound_bucket_name(record).to_string();
    let delete_bucket = deletes_bucket(record, source);
    // Claims sharing the bucket lose their keys before it goes: none outlives it.
    if delete_bucket
        && let Some(claim_ref) = record.spec.claim_ref.as_ref()
        && let (Some(namespace), Some(uid)) = (&claim_ref.namespace, &claim_ref.uid)
    {
        crate::bucket::sharing::release_sharers(namespace, uid, ctx).await?;
    }
    let answer = give_back(record, delete_bucket, ctx).await;
    let operation = answer.0;
    let settled = settled(&bucket, answer, (source, delete_bucket, real_record))?;
    match &settled.record {
        Record::Delete => delete_object_bucket(buckets, record, ctx).await?,
        Record::Release(phase, reason, message) => {
            release(buckets, record, *phase, reason, message, ctx).await?;
        }
        Record::Untouched => {}
    }
    let Settled { type_, reason, message, .. } = settled;
    ctx.publish(subject, type_, &reason, &message, operation).await;
    let who = reference_key(subject);
    if type_ == EventType::Warning {
        tracing::warn!(claim = %who, reason = %reason, "{message}");
    } else {
        tracing::info!(claim = %who, "{message}");
    }
    Ok(())
}

/// Finishes what a claim that went without its finalizer left behind: a Bound (or abandoned)
/// ObjectBucket still holding our finalizer. Called by the sweep only after a read from the
/// apiserver confirmed the claim is gone.
pub(crate) async fn sweep_orphan<P: Provisioner>(
    bucket: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let buckets: Api<ObjectBucket> = Api::all(ctx.client.clone());
    let subject = bucket.object_ref(&());
    if bucket.annotations().get(annotations::ABANDONED).map(String::as_str) == Some("true") {
        ctx.provisioner.revoke(bucket).await.map_err(|source| Error::Backend {
            operation: Operation::Revoke,
            bucket: bound_bucket_name(bucket).to_string(),
            source,
            hint: "",
        })?;
        let message = "the abandoned claim's access was revoked; the bucket was left as it is";
        ctx.publish(&subject, EventType::Normal, "Revoked", message, Operation::Revoke).await;
        return release(&buckets, bucket, ObjectBucketPhase::Failed, "Abandoned", message, ctx)
            .await;
    }
    let source = source_of(bucket.annotations()).unwrap_or(BucketSource::Existing);
    tracing::info!(
        object_bucket = %bucket.name_any(),
        claim_uid = bound_uid(bucket).unwrap_or(""),
        "the claim of this ObjectBucket is gone without its cleanup; cleaning up now"
    );
    settle(&buckets, bucket, source, true, &subject, ctx).await
}

async fn set_status<P>(
    buckets: &Api<ObjectBucket>,
    record: &ObjectBucket,
    phase: ObjectBucketPhase,
    reason: &str,
    message: &str,
    ctx: &Context<P>,
) -> Result<(), Error> {
    if let Some(written) = set_bucket_status(buckets, record, phase, reason, message).await? {
        ctx.caches.buckets.wrote(written);
    }
    Ok(())
}

/// Leaves the ObjectBucket in `phase` without our finalizer, so a person can inspect or delete it.
async fn release<P>(
    buckets: &Api<ObjectBucket>,
    record: &ObjectBucket,
    phase: ObjectBucketPhase,
    reason: &str,
    message: &str,
    ctx: &Context<P>,
) -> Result<(), Error> {
    set_status(buckets, record, phase, reason, message, ctx).await?;
    remove_bucket_finalizer(buckets, record, ctx).await
}

/// Lets the ObjectBucket go: our finalizer off, then deleted.
pub(crate) async fn delete_object_bucket<P>(
    buckets: &Api<ObjectBucket>,
    record: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<(), Error> {
    remove_bucket_finalizer(buckets, record, ctx).await?;
    // Gone already (the watch saw it go, or our own delete did): nothing to do.
    if ctx.caches.buckets.get("", &record.name_any()).is_none() {
        return Ok(());
    }
    // A 404 fails the cleanup, which is retried: only the watch proves the bucket gone.
    buckets.delete(&record.name_any(), &Default::default()).await?;
    ctx.caches.buckets.deleted(record);
    Ok(())
}

/// Removes our finalizer from the ObjectBucket, if it still has it, guarded by the
/// resourceVersion of the newest copy known.
pub(crate) async fn remove_bucket_finalizer<P>(
    buckets: &Api<ObjectBucket>,
    record: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<(), Error> {
    let Some(current) = ctx.caches.buckets.get("", &record.name_any()) else { return Ok(()) };
    if !current.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    // A 404 fails the cleanup, which is retried: only the watch proves the bucket gone.
    let released = finalizer::remove(buckets, &*current, FINALIZER).await?;
    ctx.caches.buckets.wrote(released);
    Ok(())
}
