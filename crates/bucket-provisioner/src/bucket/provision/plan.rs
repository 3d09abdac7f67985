//! Plan: what a claim to bind is given, decided from the claim, its StorageClass and where its
//! bucket comes from alone (no I/O), before anything is recorded or the backend called.

use bucket_api::{AccessMode, ObjectBucket, ObjectBucketClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::bucket::error::{Error, Operation};
use crate::bucket::limits::Limited;
use crate::bucket::objects::BucketSource;
use crate::bucket::plan::{Plan, limited, plan, plan_for_bound, plan_shared};
use crate::bucket::sharing::Owner;
use crate::bucket::web_identity::{WebIdentity, WebIdentityOptions};

/// Where the bucket of a claim to bind comes from, as observed.
#[derive(Clone, Debug)]
pub(crate) enum Origin<'a> {
    /// The claim is bound already, and its credentials are issued again: what its ObjectBucket
    /// records, held to the mode of the claim it shares from, if any.
    Bound(&'a ObjectBucket, Option<AccessMode>),
    /// Its `shareFrom` names this owner, which may share.
    Shared(Owner),
    /// A bucket of its own, or the one its class names.
    Own,
}

/// Everything decided for a claim to bind, before anything is recorded or the backend called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Binding {
    /// The bucket and how it comes to be.
    pub(crate) plan: Plan,
    /// The quotas and access mode in force.
    pub(crate) limited: Limited,
    /// What the backend is asked: a bucket made, or access to one granted.
    pub(crate) operation: Operation,
    /// The owner whose bucket a sharing claim is granted, recorded on its ObjectBucket.
    pub(crate) shared_from: Option<Owner>,
    /// For a claim naming ServiceAccounts: what the backend was told, and the role it answered
    /// (set when the backend is called).
    pub(crate) web_identity: Option<(WebIdentityOptions, WebIdentity)>,
}

/// Decides, from the claim, its class and where its bucket comes from alone, what it is given.
/// A claim asking for more than its class allows is refused here, before anything is recorded
/// or created, unless it is bound already (then it is held to the class's limits, and
/// [`Limited::exceeded`] reported once that is applied).
pub(crate) fn decide(
    claim: &ObjectBucketClaim,
    class: &StorageClass,
    origin: Origin<'_>,
) -> Result<Binding, Error> {
    let bound = matches!(origin, Origin::Bound(..));
    let (plan, shared_from) = match origin {
        Origin::Bound(record, owner_mode) => {
            let mut plan = plan_for_bound(record, class)?;
            if let Some(mode) = owner_mode {
                plan.limits = plan.limits.shared_from(mode);
            }
            (plan, None)
        }
        Origin::Shared(owner) => (plan_shared(claim, class, &owner)?, Some(owner)),
        Origin::Own => (plan(claim, class)?, None),
    };
    let limited = limited(claim, &plan, bound)?;
    let operation = match plan.source {
        BucketSource::New => Operation::Provision,
        BucketSource::Existing => Operation::Grant,
    };
    Ok(Binding { plan, limited, operation, shared_from, web_identity: None })
}

#[cfg(test)]
mod tests {
    use bucket_api::ReclaimPolicy;
    use bucket_api::contract::annotations;

    use super::*;
    use crate::bucket::plan::test_objects::{claim, class};
    use crate::kubernetes::failure::Failure;

    fn owner(mode: AccessMode) -> Owner {
        Owner { uid: "owner-uid".into(), bucket: "photos".into(), mode, claim: "team/app".into() }
    }

    fn with_config(mut claim: ObjectBucketClaim, config: &[(&str, &str)]) -> ObjectBucketClaim {
        let config = config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        claim.spec.additional_config = Some(config);
        claim
    }

    #[test]
    fn a_new_bucket_is_provisioned_and_a_class_bucket_granted() {
        let own = decide(&claim(Some("mine"), None), &class(&[], None), Origin::Own).unwrap();
        assert_eq!((own.operation, own.shared_from), (Operation::Provision, None));
        assert_eq!(own.plan.bucket_name, "mine");
        let class = class(&[("bucketName", "shared")], None);
        let granted = decide(&claim(None, None), &class, Origin::Own).unwrap();
        assert_eq!(granted.operation, Operation::Grant);
        assert_eq!(granted.plan.source, BucketSource::Existing);
    }

    #[test]
    fn a_new_claim_asking_more_than_its_class_allows_is_refused_before_anything_is_made() {
        let class = class(&[("limitMaxObjects", "10")], None);
        let claim = with_config(claim(Some("mine"), None), &[("maxObjects", "11")]);
        let refused = decide(&claim, &class, Origin::Own).unwrap_err();
        assert_eq!(refused.reason(), "ExceedsClassLimit", "{refused}");
        let within = with_config(claim.clone(), &[("maxObjects", "10")]);
        let binding = decide(&within, &class, Origin::Own).unwrap();
        assert_eq!(binding.limited.config.get("maxObjects").map(String::as_str), Some("10"));
    }

    #[test]
    fn a_sharing_claim_is_granted_the_owners_bucket_at_most_in_the_owners_mode() {
        let sharer = with_config(claim(None, None), &[("shareFrom", "app")]);
        let shared =
            decide(&sharer, &class(&[], None), Origin::Shared(owner(AccessMode::ReadOnly)));
        let shared = shared.unwrap();
        assert_eq!(shared.plan.bucket_name, "photos");
        assert_eq!(
            (shared.operation, shared.limited.access_mode),
            (Operation::Grant, AccessMode::ReadOnly)
        );
        assert_eq!(shared.shared_from, Some(owner(AccessMode::ReadOnly)));
        // A class naming a bucket of its own, or a claim naming another bucket, cannot share.
        let own_bucket = class(&[("bucketName", "other")], None);
        let origin = Origin::Shared(owner(AccessMode::ReadWrite));
        assert_eq!(
            decide(&sharer, &own_bucket, origin.clone()).unwrap_err().reason(),
            "InvalidParameters"
        );
        let named = with_config(claim(Some("other"), None), &[("shareFrom", "app")]);
        assert_eq!(
            decide(&named, &class(&[], None), origin).unwrap_err().reason(),
            "InvalidParameters"
        );
    }

    #[test]
    fn a_bound_claim_keeps_its_recorded_bucket_and_is_held_to_its_class() {
        let mut record = ObjectBucket::new("obc-team-c", Default::default());
        record.spec.endpoint = Some(bucket_api::BucketEndpoint {
            bucket_name: "photos-1".into(),
            ..Default::default()
        });
        record.spec.reclaim_policy = Some(ReclaimPolicy::Retain);
        record.metadata.annotations =
            Some([(annotations::BUCKET_SOURCE.to_owned(), "new".to_owned())].into());
        let class = class(&[("limitMaxObjects", "10"), ("bucketName", "ignored")], None);
        let claim = with_config(claim(Some("photos-1"), None), &[("maxObjects", "11")]);
        let kept = decide(&claim, &class, Origin::Bound(&record, Some(AccessMode::ReadOnly)));
        let kept = kept.unwrap();
        assert_eq!(kept.plan.bucket_name, "photos-1");
        assert_eq!(
            (kept.plan.source, kept.plan.reclaim_policy),
            (BucketSource::New, ReclaimPolicy::Retain)
        );
        assert_eq!(
            (kept.operation, kept.limited.access_mode),
            (Operation::Provision, AccessMode::ReadOnly)
        );
        assert!(kept.limited.exceeded.is_some());
        assert_eq!(kept.shared_from, None);
    }
}
