//! Report: a claim to bind marked Bound once what it was given is written, or refused when it
//! asked for more than its class allows. A success is not also an Event: the status says it,
//! one write fewer per claim.

use std::sync::Arc;

use bucket_api::{ObjectBucket, ObjectBucketClaim};
use kube::runtime::controller::Action;

use crate::Provisioner;
use crate::bucket::bound::plan::bound_message;
use crate::bucket::bound::report::set_bound;
use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::bucket::observe::Observed;
use crate::bucket::plan::exceeded;
use crate::bucket::provision::plan::Binding;
use crate::bucket::rotation;
use crate::kubernetes::cache::key;

/// Marks `claim` Bound to `bucket`, as `binding` decided, and answers when to look again (a
/// scheduled rotation), unless the claim asked for more than its class allows.
pub(crate) async fn report<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    observed: &Observed,
    bucket: &ObjectBucket,
    binding: &Binding,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    if let Some(message) = &binding.limited.exceeded {
        return Err(exceeded(&claim, message));
    }
    let plan = &binding.plan;
    let message = bound_message(plan.source, &plan.bucket_name);
    tracing::info!(claim = %key(&*claim), bucket = %plan.bucket_name, "{message}");
    let claim = ctx.caches.claim(&claim).unwrap_or(claim);
    let (credentials, wait) = rotation::schedule(&claim, bucket, ctx)?;
    let mode = binding.limited.access_mode;
    set_bound(observed, bucket, &claim, &message, (mode, credentials), ctx).await?;
    Ok(wait.map_or_else(Action::await_change, Action::requeue))
}
