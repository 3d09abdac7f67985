//! Recognising what a provisioner built on lib-bucket-provisioner (the Go library of the same
//! API) left for a claim, so that this controller, started under the same provisioner name,
//! takes it over instead of provisioning the claim a second time (see `adoption`).
//!
//! Such a provisioner names a claim's ObjectBucket `obc-<namespace>-<claim>`, labels it
//! `bucket-provisioner=<its name, / as ->`, records the claim in `spec.claimRef` (with its UID)
//! and its own bookkeeping in `additionalState`, and puts the same finalizer as ours on the claim.
//!
//! Only records a tenant cannot write decide: the ObjectBucket is cluster-scoped, and the claim
//! UID in its `claimRef` is one the apiserver assigned, so an ObjectBucket bound to this claim's
//! UID was written for this claim by whoever may write ObjectBuckets. Labels, names and
//! `additionalState`-like text on the tenant's own claim, Secret or ConfigMap prove nothing and
//! are never read for that; a claim whose name makes the same `obc-` name as another
//! namespace's claim (`a-b/c` and `a/b-c`) does not have its UID.

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER, annotations, legacy};
use bucket_api::{ObjectBucket, ObjectBucketClaim};
use kube::ResourceExt;

/// Whether the claim may hold a binding left by such a provisioner, worth one read of the
/// apiserver to find out: this controller never recorded its intent on it, and it carries what
/// that library puts on every claim it binds (its finalizer, or its label). A claim it never saw
/// has neither, so new claims cost nothing.
pub fn may_be_legacy(claim: &ObjectBucketClaim) -> bool {
    !claim.annotations().contains_key(annotations::PROVISIONER)
        && (claim.finalizers().iter().any(|f| f == FINALIZER)
            || claim.labels().contains_key(legacy::LABEL_PROVISIONER))
}

/// Whether `bucket` is what a lib-bucket-provisioner provisioner named `provisioner` left bound
/// to this very claim: its name, its label for that provisioner, and a `claimRef` naming the
/// claim with its UID; not yet this controller's (no label of ours) and not being deleted.
pub fn is_legacy_binding(
    bucket: &ObjectBucket,
    claim: &ObjectBucketClaim,
    provisioner: &str,
) -> bool {
    let Some(uid) = claim.uid() else { return false };
    let namespace = claim.namespace().unwrap_or_default();
    let name = legacy::object_bucket_name(&namespace, &claim.name_any());
    let labels = bucket.labels();
    let Some(claim_ref) = bucket.spec.claim_ref.as_ref() else { return false };
    bucket.name_any() == name
        && labels.get(legacy::LABEL_PROVISIONER) == Some(&legacy::label_value(provisioner))
        && !labels.contains_key(LABEL_PROVISIONER)
        && bucket.metadata.deletion_timestamp.is_none()
        && claim_ref.uid.as_deref() == Some(uid.as_str())
        && claim_ref.namespace.as_deref() == Some(namespace.as_str())
        && claim_ref.name.as_deref() == Some(claim.name_any().as_str())
}

/// Whether `bucket` is one this controller adopted for the claim, with the claim's own record
/// of the adoption still to be written (the process stopped in between).
pub fn adoption_unfinished(bucket: &ObjectBucket, claim: &ObjectBucketClaim) -> bool {
    bucket.annotations().contains_key(annotations::ADOPTED_FROM)
        && !claim.annotations().contains_key(annotations::PROVISIONER)
        && bucket.spec.claim_ref.as_ref().and_then(|c| c.uid.as_deref()) == claim.uid().as_deref()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bucket_api::{ObjectBucketClaimSpec, ObjectBucketSpec};
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::api::ObjectMeta;

    use super::*;

    const NAME: &str = "aws-s3.io/bucket";

    fn claim(namespace: &str, name: &str, uid: &str) -> ObjectBucketClaim {
        let mut claim = ObjectBucketClaim::new(name, ObjectBucketClaimSpec::default());
        claim.metadata.namespace = Some(namespace.into());
        claim.metadata.uid = Some(uid.into());
        claim
    }

    fn left_by_the_library(claim: &ObjectBucketClaim) -> ObjectBucket {
        let namespace = claim.namespace().unwrap();
        ObjectBucket {
            metadata: ObjectMeta {
                name: Some(legacy::object_bucket_name(&namespace, &claim.name_any())),
                labels: Some(BTreeMap::from([(
                    legacy::LABEL_PROVISIONER.into(),
                    "aws-s3.io-bucket".into(),
                )])),
                ..Default::default()
            },
            spec: ObjectBucketSpec {
                claim_ref: Some(ObjectReference {
                    namespace: Some(namespace),
                    name: Some(claim.name_any()),
                    uid: claim.uid(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            status: None,
        }
    }

    #[test]
    fn only_the_claim_with_the_recorded_uid_is_recognised() {
        let owner = claim("a", "b-c", "uid-1");
        let bucket = left_by_the_library(&owner);
        assert!(is_legacy_binding(&bucket, &owner, NAME));
        // Same ObjectBucket name from another namespace, or the same claim name with another UID.
        assert!(!is_legacy_binding(&bucket, &claim("a-b", "c", "uid-2"), NAME));
        assert!(!is_legacy_binding(&bucket, &claim("a", "b-c", "uid-2"), NAME));
        assert!(!is_legacy_binding(&bucket, &owner, "other.io/bucket"));
        let mut ours = bucket.clone();
        ours.labels_mut().insert(LABEL_PROVISIONER.into(), "x".into());
        assert!(!is_legacy_binding(&ours, &owner, NAME));
        let mut unlabelled = bucket;
        unlabelled.labels_mut().clear();
        assert!(!is_legacy_binding(&unlabelled, &owner, NAME));
    }

    #[test]
    fn only_claims_the_library_bound_are_looked_up() {
        let mut claim = claim("a", "b", "uid-1");
        assert!(!may_be_legacy(&claim));
        claim.finalizers_mut().push(FINALIZER.into());
        assert!(may_be_legacy(&claim));
        claim.annotations_mut().insert(annotations::PROVISIONER.into(), NAME.into());
        assert!(!may_be_legacy(&claim));
    }
}
