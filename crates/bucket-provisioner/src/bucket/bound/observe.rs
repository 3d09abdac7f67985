//! Observe: what a bound claim's decisions depend on, read from the caches (and the clock)
//! before anything is written, so that [`super::plan`] can decide from data alone.

use std::sync::Arc;

use bucket_api::{AccessMode, ObjectBucket, ObjectBucketClaim};
use jiff::Timestamp;
use k8s_openapi::api::storage::v1::StorageClass;

use crate::bucket::consent::bound_consent;
use crate::bucket::context::Context;
use crate::bucket::sharing;

/// What exists for a bound claim, as the caches hold it.
#[derive(Clone, Debug)]
pub(crate) struct Facts {
    /// The ObjectBucket bound to the claim.
    pub(crate) bound: ObjectBucket,
    /// The name of that ObjectBucket.
    pub(crate) object_bucket: String,
    /// The StorageClass the claim is bound under, as its ObjectBucket records it; `None` once it
    /// is gone.
    pub(crate) class: Option<Arc<StorageClass>>,
    /// For a claim sharing another's bucket, the most it may get now (see
    /// [`sharing::bound_owner_mode`]); read only while the class is there, as its limits are.
    pub(crate) owner_mode: Option<AccessMode>,
    /// The claim shares across namespaces, and the consent its ObjectBucket records is gone.
    pub(crate) consent_withdrawn: bool,
    /// The controller's clock when it looked: what rotation steps fall due by.
    pub(crate) now: Timestamp,
}

/// Reads the facts of `claim`, bound to `bound` (named `object_bucket`), from the caches.
pub(crate) fn facts<P>(
    claim: &ObjectBucketClaim,
    bound: ObjectBucket,
    object_bucket: &str,
    ctx: &Context<P>,
) -> Facts {
    let class = ctx.caches.class(bound_class(claim, &bound));
    let owner_mode = class.as_ref().and_then(|_| sharing::bound_owner_mode(claim, &bound, ctx));
    let consent_withdrawn = matches!(bound_consent(claim, &bound, ctx), Some(Err(_)));
    let object_bucket = object_bucket.to_owned();
    let now = Timestamp::now();
    Facts { bound, object_bucket, class, owner_mode, consent_withdrawn, now }
}

/// The name of the StorageClass a claim is bound under: the one its ObjectBucket records (the
/// claim's own may have been edited since, and whatever that edit names must not set the limits
/// of its key), or the claim's for an ObjectBucket that records none.
pub(crate) fn bound_class<'a>(claim: &'a ObjectBucketClaim, bound: &'a ObjectBucket) -> &'a str {
    match bound.spec.storage_class_name.as_str() {
        "" => &claim.spec.storage_class_name,
        recorded => recorded,
    }
}
