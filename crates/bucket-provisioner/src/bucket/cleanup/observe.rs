//! Observe: the record a claim's going works from, read before anything is asked of the
//! backend: its ObjectBucket, or what the claim recorded before the backend was first called.

use bucket_api::contract::annotations;
use bucket_api::{
    BucketEndpoint, ObjectBucket, ObjectBucketClaim, ObjectBucketSpec, ReclaimPolicy,
};
use kube::ResourceExt;
use kube::api::ObjectMeta;

use crate::bucket::objects::{self, BucketSource, parse_reclaim_policy};
use crate::bucket::observe::{Observed, source_of};

/// The record cleanup works from: the bound ObjectBucket, or, when a crash came between the
/// backend call and writing it, what the claim recorded before the call. `None` when the backend
/// was never called for this claim.
pub(crate) fn cleanup_record(
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
