//! Report: what a bound claim's reconcile did, told as Events and log lines, and the claim and
//! its ObjectBucket marked Bound once it is kept.

use std::time::Duration;

use bucket_api::ObjectBucketPhase;
use bucket_api::{AccessMode, ClaimPhase, CredentialsStatus, ObjectBucket, ObjectBucketClaim};
use jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use crate::bucket::bound::apply::{Applied, Done};
use crate::bucket::context::Context;
use crate::bucket::error::{Error, Operation};
use crate::bucket::observe::Observed;
use crate::bucket::rotation::schedule_under;
use crate::bucket::status::{ClaimState, set_bucket_status, set_claim_status};
use crate::kubernetes::cache::key;

/// Where a bound claim's reconcile leaves it.
pub(crate) enum Repair {
    /// The claim is Bound and everything it depends on is as written.
    Done(Action),
    /// The claim's Secret lost or changed its credentials: the backend must issue them again for
    /// this ObjectBucket, which the provisioning path does.
    IssueCredentials(Box<ObjectBucket>),
}

/// How soon a claim whose consent to share came back between the look and the act is looked
/// at again.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// Tells what was `done`, then reports the outcome: a kept claim is marked Bound.
pub(crate) async fn report<P>(
    claim: &ObjectBucketClaim,
    done: &Done,
    applied: Result<Applied, Error>,
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<Repair, Error> {
    tell(claim, done, observed, ctx).await;
    match applied? {
        Applied::LookAgain => Ok(Repair::Done(Action::requeue(LOOK_AGAIN))),
        Applied::IssueCredentials(bound) => {
            let message = "the claim's Secret lost or changed its credentials; issuing them again";
            tracing::info!(claim = %key(claim), "{message}");
            let reason = "RestoringCredentials";
            ctx.event(claim, EventType::Normal, reason, message, Operation::Provision).await;
            Ok(Repair::IssueCredentials(bound))
        }
        Applied::Bound(kept) => {
            let bound = ctx.caches.buckets.get("", &observed.bucket_name);
            let bound = bound.map_or(kept.bound, |b| (*b).clone());
            let claim = ctx.caches.claim(&kept.claim).unwrap_or(kept.claim);
            let (credentials, wait) =
                schedule_under(&kept.policy, &claim, &bound, Timestamp::now());
            let mode = kept.limited.access_mode;
            set_bound(observed, &bound, &claim, &kept.message, (mode, credentials), ctx).await?;
            Ok(Repair::Done(wait.map_or_else(Action::await_change, Action::requeue)))
        }
    }
}

/// An Event (and a log line) for each repair and change made, in the order they were made.
async fn tell<P>(claim: &ObjectBucketClaim, done: &Done, observed: &Observed, ctx: &Context<P>) {
    if done.recreated {
        let message = format!(
            "ObjectBucket {:?} was deleted while its claim lives; it was written again",
            observed.bucket_name
        );
        tracing::info!(claim = %key(claim), "{message}");
        let reason = "ObjectBucketRecreated";
        ctx.event(claim, EventType::Normal, reason, &message, Operation::Provision).await;
    }
    if let Some((from, to, bucket)) = &done.narrowed {
        let message = format!(
            "narrowed the claim's access to bucket {bucket:?} from {from} to {to}, as its \
             StorageClass or the claim it shares from now allows"
        );
        tracing::info!(claim = %key(claim), "{message}");
        ctx.event(claim, EventType::Normal, "AccessNarrowed", &message, Operation::Update).await;
    }
    if done.finalizer_restored {
        tracing::info!(claim = %key(claim), "the claim lost its finalizer; it was put back");
    }
    if let Some((mode, bucket)) = &done.updated {
        let message =
            format!("applied additionalConfig and access mode {mode} to bucket {bucket:?}");
        ctx.event(claim, EventType::Normal, "Updated", &message, Operation::Update).await;
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
