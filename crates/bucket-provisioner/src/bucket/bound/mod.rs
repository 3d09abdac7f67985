//! A claim already bound, reconciled as one pass a reader follows top to bottom:
//!
//! 1. [`observe`]: what exists, read from the caches: its ObjectBucket, its StorageClass, the
//!    mode of the claim it shares from, whether consent to share across namespaces holds.
//! 2. [`plan`]: every decision, as data, without I/O: a lost bucket to settle, consent
//!    withdrawn, or the claim kept; and for a kept claim the ObjectBucket to write again, the
//!    binding it may not change, the rotation policy, the finalizer, the quotas and access mode
//!    in force (and whether the backend must be told), the name to record, the condition.
//!    A narrowing of its key (its class's limit lowered, its grant or owner narrowed) is decided
//!    from the ObjectBucket and class alone and applied first: nothing the claim's tenant
//!    writes, and can break, stands before it.
//! 3. [`apply`]: the backend calls and writes those decisions call for, in their order; a
//!    rotation under way goes as far as it can, one step at a time (see
//!    [`crate::bucket::rotation`]).
//! 4. [`report`]: what was done told as Events, and the claim and its ObjectBucket marked
//!    Bound; or the claim handed back to the provisioning path to have its credentials issued
//!    again.
//!
//! A new decision (a condition of sharing, a feature of claims) is a field of the plan, decided
//! from what is observed, and a step of apply.

pub(crate) mod apply;
pub(crate) mod observe;
pub(crate) mod plan;
pub(crate) mod report;

use std::sync::Arc;

use bucket_api::{ObjectBucket, ObjectBucketClaim};

use crate::Provisioner;
use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::bucket::observe::Observed;
use crate::kubernetes::cache::summary::Summary;

pub(crate) use report::Repair;

/// Reconciles `claim`, bound to `bound`, whose Secret the cache holds as `secret`.
pub(crate) async fn reconcile<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    bound: ObjectBucket,
    secret: Option<&Summary>,
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<Repair, Error> {
    let facts = observe::facts(&claim, bound, &observed.bucket_name, ctx);
    let plan = plan::plan(&claim, &facts);
    let mut done = apply::Done::default();
    let work = (facts.bound, plan);
    let applied = apply::apply(claim.clone(), work, secret, observed, (ctx, &mut done)).await;
    report::report(&claim, &done, applied, observed, ctx).await
}
