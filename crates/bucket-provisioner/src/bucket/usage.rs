//! The usage report: what each bound bucket holds, asked of the backend
//! ([`Provisioner::usage`]) once per interval, published as metrics and recorded on the
//! ObjectBucket's `status.usage`.
//!
//! The backend answers from memory, and everything else comes from the watch caches, so a report
//! reads nothing from the apiserver. It writes only the ObjectBuckets whose usage changed (no
//! usage recorded counts as empty, so a new, empty bucket costs no write), one at a time and at
//! most [`WRITES_PER_SECOND`], so a busy cluster never turns the report into a flood of writes.
//! The write wakes the bucket's claim, whose reconcile finds nothing to do and makes no request.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bucket_api::{ObjectBucket, ObjectBucketPhase};
use kube::ResourceExt;
use kube::api::Api;

use bucket_api::contract::annotations;

use crate::Provisioner;
use crate::bucket::context::Context;
use crate::bucket::observe::bound_bucket_name;
use crate::bucket::status::set_bucket_usage;
use crate::kubernetes::health::Pulse;
use crate::kubernetes::log_limit::Throttle;
use crate::kubernetes::unwind::caught_now;

/// Most `status.usage` writes per second, whatever the number of buckets.
pub const WRITES_PER_SECOND: u32 = 10;

/// Reports usage every `interval` until the task is aborted.
pub(crate) async fn report_usage<P: Provisioner>(
    ctx: Arc<Context<P>>,
    interval: Duration,
    pulse: Pulse,
) {
    // Before the first list every cache looks empty, and every series would be dropped.
    ctx.caches.until_listed().await;
    let api: Api<ObjectBucket> = Api::all(ctx.client.clone());
    let pace = Duration::from_secs(1) / WRITES_PER_SECOND;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = Throttle::default();
    loop {
        pulse.beat();
        ticks.tick().await;
        let mut reported = BTreeSet::new();
        for (_, name) in ctx.caches.buckets.keys() {
            pulse.beat();
            // Corrected by our own writes: a usage just written is not written again.
            let Some(bucket) = ctx.caches.buckets.get("", &name) else { continue };
            if !is_bound_here(&bucket, &ctx.name) {
                continue;
            }
            // A backend that panics on one bucket leaves the others reported.
            let usage = match caught_now(|| ctx.provisioner.usage(&bucket)) {
                Ok(Some(usage)) => usage,
                Ok(None) => continue,
                Err(panic) => {
                    ctx.metrics.error("InternalError");
                    tracing::error!(object_bucket = %bucket.name_any(), panic = %panic,
                        "reading a bucket's usage panicked; the other buckets are still read");
                    continue;
                }
            };
            let name = bound_bucket_name(&bucket).to_owned();
            ctx.metrics.set_bucket_usage(&name, &usage);
            reported.insert(name);
            match set_bucket_usage(&api, &bucket, &usage).await {
                Ok(Some(written)) => {
                    failing.reset();
                    ctx.caches.buckets.wrote(written);
                    tokio::time::sleep(pace).await;
                }
                Ok(None) => {}
                Err(e) => {
                    if let Some(held_back) = failing.allow() {
                        tracing::warn!(object_bucket = %bucket.name_any(), error = %e,
                            repeats_since_last_report = held_back,
                            "could not record the bucket's usage; trying again at the next report");
                    }
                }
            }
        }
        ctx.metrics.retain_bucket_usage(&reported);
    }
}

/// Ours, bound to a live claim and not being deleted.
fn is_bound_here(bucket: &ObjectBucket, provisioner: &str) -> bool {
    let ours =
        bucket.annotations().get(annotations::PROVISIONER).map(String::as_str) == Some(provisioner);
    let bound = bucket.status.as_ref().and_then(|s| s.phase) == Some(ObjectBucketPhase::Bound);
    ours && bound && bucket.metadata.deletion_timestamp.is_none()
}
