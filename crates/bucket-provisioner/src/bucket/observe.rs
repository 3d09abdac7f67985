//! Observe: what a claim's reconcile reads first, from the caches alone.

use std::collections::BTreeMap;

use bucket_api::contract::annotations;
use bucket_api::{ObjectBucket, ObjectBucketClaim};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::Api;

use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::bucket::naming;
use crate::bucket::objects::BucketSource;

/// The objects a claim's reconcile reads first.
pub(crate) struct Observed {
    pub(crate) claims: Api<ObjectBucketClaim>,
    pub(crate) buckets: Api<ObjectBucket>,
    pub(crate) secrets: Api<Secret>,
    pub(crate) config_maps: Api<ConfigMap>,
    pub(crate) namespace: String,
    /// The ObjectBucket's name: the one bound to this claim, or the one to create.
    pub(crate) bucket_name: String,
    pub(crate) uid: String,
    /// The ObjectBucket bound to this claim, if any.
    pub(crate) bound: Option<ObjectBucket>,
    /// Both names this claim's ObjectBucket may have are taken by other claims' ObjectBuckets.
    pub(crate) names_taken: Option<Error>,
}

/// Finds the claim's ObjectBucket under the names it may have (see
/// [`naming::object_bucket_names`]), or picks the name to create it under, from the caches. The
/// claim's `spec.objectBucketName` is tenant-written, so it only hints which of the two to look at.
pub(crate) fn observe<P>(claim: &ObjectBucketClaim, ctx: &Context<P>) -> Observed {
    let client = &ctx.client;
    let namespace = claim.namespace().unwrap_or_default();
    let uid = claim.uid().unwrap_or_default();
    let names = naming::object_bucket_names(&namespace, &claim.name_any(), &uid);
    let hinted_unique = claim.spec.object_bucket_name.as_deref() == Some(names.unique.as_str());
    let mut free = None;
    let mut bound = None;
    let mut taken_by = None;
    for name in names.conventional.iter().chain([&names.unique]) {
        match ctx.caches.buckets.get("", name) {
            Some(bucket) if bound_uid(&bucket) == Some(uid.as_str()) => {
                bound = Some((name.clone(), (*bucket).clone()));
                break;
            }
            Some(bucket) => taken_by = Some((name.clone(), bound_uid(&bucket).map(String::from))),
            // The unique name is only worth a look when the claim says it may be there.
            None if free.is_none() => {
                free = Some(name.clone());
                if !hinted_unique {
                    break;
                }
            }
            None => {}
        }
    }
    let (bucket_name, bound, names_taken) = match (bound, free) {
        (Some((name, bucket)), _) => (name, Some(bucket), None),
        (None, Some(name)) => (name, None, None),
        (None, None) => {
            let (name, other) = taken_by.unwrap_or_else(|| (names.unique.clone(), None));
            let other_uid = other.unwrap_or_else(|| "unknown".into());
            (name.clone(), None, Some(Error::ObjectBucketConflict { name, other_uid }))
        }
    };
    Observed {
        claims: Api::namespaced(client.clone(), &namespace),
        buckets: Api::all(client.clone()),
        secrets: Api::namespaced(client.clone(), &namespace),
        config_maps: Api::namespaced(client.clone(), &namespace),
        namespace,
        bucket_name,
        uid,
        bound,
        names_taken,
    }
}

pub(crate) fn bound_uid(bucket: &ObjectBucket) -> Option<&str> {
    bucket.spec.claim_ref.as_ref()?.uid.as_deref()
}

pub(crate) fn bound_bucket_name(bucket: &ObjectBucket) -> &str {
    bucket.spec.endpoint.as_ref().map(|e| e.bucket_name.as_str()).unwrap_or_default()
}

pub(crate) fn source_of(annotations: &BTreeMap<String, String>) -> Option<BucketSource> {
    annotations.get(annotations::BUCKET_SOURCE).and_then(|s| BucketSource::parse(s))
}
