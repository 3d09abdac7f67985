//! Provisioning a live claim, as one pass a reader follows top to bottom; a bound claim goes
//! through the phases of [`crate::bucket::bound`] instead, and comes back here only to have its
//! credentials issued again.
//!
//! 1. [`observe`]: the claim (taken over in place if a lib-bucket-provisioner provisioner bound
//!    it), its objects as the caches hold them, and nothing under its names that is not its own.
//! 2. [`plan`]: what it is given, decided from the claim, its StorageClass and where its bucket
//!    comes from (its own, another claim's it shares, or what its ObjectBucket records), without
//!    I/O; a claim asking for more than its class allows is refused here.
//! 3. [`apply`]: the intent recorded on the claim, the backend called, what it answered written.
//! 4. [`report`]: the claim and its ObjectBucket marked Bound.
//!
//! Each phase is idempotent, so a crash anywhere is healed by the next run. What happens when a
//! claim goes is in [`crate::bucket::cleanup`].

pub(crate) mod apply;
pub(crate) mod observe;
pub(crate) mod plan;
pub(crate) mod report;

use std::sync::Arc;

use bucket_api::ObjectBucketClaim;
use kube::runtime::controller::Action;

use crate::Provisioner;
use crate::bucket::bound::{self, Repair};
use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::bucket::plan::storage_class;
use crate::bucket::sharing;
use crate::bucket::withdraw::withdraw;
use plan::{Origin, decide};

/// Brings a live claim (finalizer already in place) to Bound. One refused because a Secret or
/// ConfigMap of its name is not its own holds nothing issued for it (see
/// [`crate::bucket::withdraw`]).
pub async fn apply<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    match bind(claim.clone(), ctx).await {
        Err(refused @ (Error::ForeignSecret(_) | Error::ForeignConfigMap(_))) => {
            withdraw(&claim, ctx).await?;
            Err(refused)
        }
        other => other,
    }
}

async fn bind<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    // Observe: the claim's objects, and nothing under its names that is not its own.
    let (claim, mut observed, secret) = observe::claim(claim, ctx).await?;
    if let Some(bound) = observed.bound.take() {
        match bound::reconcile(claim.clone(), bound, secret.as_deref(), &observed, ctx).await? {
            Repair::Done(action) => return Ok(action),
            Repair::IssueCredentials(bound) => observed.bound = Some(*bound),
        }
    }
    if let Some(error) = observed.names_taken.take() {
        return Err(error);
    }
    observe::still_blocked(&claim, &observed, ctx).await?;

    // Plan: what the claim is given, decided from what was observed.
    let class = storage_class(ctx, &claim.spec.storage_class_name)?;
    let origin = match &observed.bound {
        Some(bound) => Origin::Bound(bound, sharing::bound_owner_mode(&claim, bound, ctx)),
        None => sharing::resolve(&claim, ctx)?.map_or(Origin::Own, Origin::Shared),
    };
    let mut binding = decide(&claim, &class, origin)?;

    // Apply: intent recorded, the backend called, what it answered written.
    let (claim, provisioned) = apply::call_backend(claim, &observed, &mut binding, ctx).await?;
    let plan = &binding.plan;
    let written = (plan, &binding.limited, binding.shared_from.as_ref());
    let answered = (&provisioned, binding.web_identity.as_ref());
    let bucket = apply::write_results(&claim, &mut observed, written, answered, ctx).await?;

    // Report: Bound, unless the claim asked for more than its class allows.
    report::report(claim, &observed, &bucket, &binding, ctx).await
}
