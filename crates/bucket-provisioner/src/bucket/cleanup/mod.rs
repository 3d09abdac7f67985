//! What happens when a claim goes, as one pass a reader follows top to bottom: delete or
//! revoke through the backend, then release or delete the ObjectBucket. The same path serves a
//! claim being deleted and an ObjectBucket left behind by a claim that is gone without its
//! finalizer (the sweep), and never needs the StorageClass.
//!
//! 1. [`observe`]: the record to work from: the bound ObjectBucket, or one rebuilt from the
//!    StorageClass when a crash came before it was written; none, and there is nothing to do.
//! 2. [`plan`]: from the record and the backend's answer alone (no I/O), whether the bucket
//!    goes, what becomes of the ObjectBucket, and what the Event says.
//! 3. [`apply`]: the backend asked, the ObjectBucket released or deleted, the Event published.
//!
//! The library asks for a bucket's deletion only when its own record (the ObjectBucket, or the
//! StorageClass when there is none) says the bucket was made for the claim under `Delete`; the
//! backend's own record has the last word (see [`Provisioner::delete`]). Nothing tenant-written
//! on the claim chooses where a credential goes, which Secret is read or what is deleted.

pub(crate) mod apply;
pub(crate) mod observe;
pub(crate) mod plan;

use std::sync::Arc;

use bucket_api::contract::annotations;
use bucket_api::{ObjectBucket, ObjectBucketClaim, ObjectBucketPhase};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use crate::Provisioner;
use crate::bucket::context::Context;
use crate::bucket::error::{ABANDON_HINT, Error, Operation};
use crate::bucket::objects::BucketSource;
use crate::bucket::observe::{bound_bucket_name, bound_uid, observe, source_of};
use apply::{abandon, release, settle};
use observe::cleanup_record;

/// Cleans up after a deleted claim. Never needs the StorageClass.
pub async fn cleanup<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    // The Secret and ConfigMap are the claim's own: the garbage collector removes them with it.
    let observed = observe(&claim, ctx);
    let Some((record, source)) = cleanup_record(&claim, &observed, ctx) else {
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
