//! The loops beside the bucket controller that read its caches: the orphan sweep (ObjectBuckets
//! whose claim went without its cleanup) and the claims-by-phase gauge.

use std::sync::Arc;
use std::time::Duration;

use bucket_api::contract::{FINALIZER, annotations};
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketPhase};
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use crate::Provisioner;
use crate::bucket::cleanup;
use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::kubernetes::cache::claims::CachedClaim;
use crate::kubernetes::failure::Failure;
use crate::kubernetes::health::Pulse;
use crate::kubernetes::log_limit::Throttle;
use crate::kubernetes::unwind::caught;

/// How often ObjectBuckets are checked for claims that went without their cleanup.
const SWEEP_INTERVAL: Duration = Duration::from_secs(10);

/// Finishes the cleanup of claims that went without it (their finalizer removed by hand): every
/// ObjectBucket of ours still holding our finalizer whose claim is gone is cleaned up as the
/// claim's deletion would have, after the apiserver itself confirmed the claim is gone.
pub(crate) async fn sweep<P: Provisioner>(ctx: Arc<Context<P>>, pulse: Pulse) {
    // The caches must hold their first list, or every ObjectBucket would look orphaned.
    ctx.caches.until_listed().await;
    let mut interval = tokio::time::interval(SWEEP_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut cleanups_failing, mut checks_failing) = (Throttle::default(), Throttle::default());
    loop {
        pulse.beat();
        interval.tick().await;
        for (_, name) in ctx.caches.buckets.keys() {
            pulse.beat();
            // Corrected by our own writes: a bucket just released or deleted is not an orphan.
            let Some(bucket) = ctx.caches.buckets.get("", &name) else { continue };
            if !awaits_cleanup(&bucket, &ctx.name) {
                continue;
            }
            let Some(claim_ref) = bucket.spec.claim_ref.as_ref() else { continue };
            let (Some(namespace), Some(name)) = (&claim_ref.namespace, &claim_ref.name) else {
                continue;
            };
            let uid = claim_ref.uid.as_deref();
            let cached = ctx.caches.claim_store.get(&ObjectRef::new(name).within(namespace));
            if cached.is_some_and(|c| c.meta().uid.as_deref() == uid) {
                continue;
            }
            // The caches may lag: only the apiserver decides that the claim is gone and the
            // bucket still waits for its cleanup.
            match orphaned(&ctx, &bucket, namespace, name, uid).await {
                // A panic cleaning up one bucket fails that bucket, not the sweep.
                Ok(Some(bucket)) => match caught(cleanup::sweep_orphan(&bucket, &ctx))
                    .await
                    .unwrap_or_else(|panic| Err(Error::Panicked(panic)))
                {
                    Ok(()) => cleanups_failing.reset(),
                    Err(error) => {
                        ctx.metrics.error(error.reason());
                        if let Some(held_back) = cleanups_failing.allow() {
                            tracing::warn!(object_bucket = %bucket.name_any(),
                                reason = error.reason(), repeats_since_last_report = held_back,
                                "cleaning up after a claim that is gone failed; retrying: {error}");
                        }
                    }
                },
                Ok(None) => checks_failing.reset(),
                Err(e) => {
                    if let Some(held_back) = checks_failing.allow() {
                        tracing::warn!(object_bucket = %bucket.name_any(), error = %e,
                            repeats_since_last_report = held_back,
                            "could not check whether an ObjectBucket's claim is gone");
                    }
                }
            }
        }
    }
}

/// The ObjectBucket as the apiserver has it now, if it still awaits cleanup and its claim is gone.
async fn orphaned<P>(
    ctx: &Context<P>,
    bucket: &ObjectBucket,
    namespace: &str,
    name: &str,
    uid: Option<&str>,
) -> Result<Option<ObjectBucket>, kube::Error> {
    let claims: Api<ObjectBucketClaim> = Api::namespaced(ctx.client.clone(), namespace);
    if claims.get_opt(name).await?.is_some_and(|live| live.uid().as_deref() == uid) {
        return Ok(None);
    }
    let buckets: Api<ObjectBucket> = Api::all(ctx.client.clone());
    let current = buckets.get_opt(&bucket.name_any()).await?;
    Ok(current.filter(|b| b.uid() == bucket.uid() && awaits_cleanup(b, &ctx.name)))
}

/// Ours, still holding our finalizer, and not already released.
fn awaits_cleanup(bucket: &ObjectBucket, provisioner: &str) -> bool {
    let ours =
        bucket.annotations().get(annotations::PROVISIONER).map(String::as_str) == Some(provisioner);
    let held = bucket.finalizers().iter().any(|f| f == FINALIZER);
    let phase = bucket.status.as_ref().and_then(|s| s.phase);
    let abandoned =
        bucket.annotations().get(annotations::ABANDONED).map(String::as_str) == Some("true");
    let released = matches!(phase, Some(ObjectBucketPhase::Released | ObjectBucketPhase::Failed));
    ours && held && (abandoned || !released)
}

/// Keeps the claims-by-phase gauge current for the claims this provisioner has taken on.
pub(crate) async fn count_phases<P>(store: Store<CachedClaim>, ctx: Arc<Context<P>>, pulse: Pulse) {
    loop {
        let claims = store.state();
        let ours = claims.iter().filter(|c| c.recorded_by(&ctx.name));
        let mut counts: Vec<(&str, i64)> = ClaimPhase::ALL.map(|p| (p.as_str(), 0)).to_vec();
        for claim in ours {
            let phase = claim.phase().unwrap_or(ClaimPhase::Pending);
            if let Some(i) = ClaimPhase::ALL.iter().position(|p| *p == phase) {
                counts[i].1 += 1;
            }
        }
        ctx.metrics.set_claims_by_phase(&counts);
        pulse.beat();
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}
