//! Apply: a claim's going made so: the backend asked to delete the bucket or revoke the claim's
//! access, the ObjectBucket released or deleted as [`super::plan`] decides from the answer, and
//! what happened told on the claim as an Event (after the writes it reports).

use std::time::Instant;

use bucket_api::contract::FINALIZER;
use bucket_api::contract::annotations;
use bucket_api::{ObjectBucket, ObjectBucketPhase};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use serde_json::json;

use crate::bucket::cleanup::plan::{Record, Settled, deletes_bucket, settled};
use crate::bucket::context::Context;
use crate::bucket::error::{Error, Operation};
use crate::bucket::objects::BucketSource;
use crate::bucket::observe::bound_bucket_name;
use crate::bucket::status::set_bucket_status;
use crate::kubernetes::cache::reference_key;
use crate::kubernetes::finalizer;
use crate::kubernetes::watch::label_value;
use crate::{BackendError, Provisioner, Removed};

/// Abandoning leaves the bucket as it is, but never the claim's access: the key is revoked now,
/// or, while the backend cannot answer, by the sweep from an ObjectBucket marked abandoned.
pub(crate) async fn abandon<P: Provisioner>(
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
pub(crate) async fn settle<P: Provisioner>(
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

pub(crate) async fn set_status<P>(
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
pub(crate) async fn release<P>(
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
