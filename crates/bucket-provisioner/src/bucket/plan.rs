//! Deciding what a claim asks for, from the claim and its StorageClass alone (no I/O): the parts
//! the plans of a claim to bind ([`crate::bucket::provision::plan`]), of a bound claim
//! ([`crate::bucket::bound::plan`]) and of one taken over ([`crate::bucket::adoption`]) share.

use std::collections::BTreeMap;

use bucket_api::contract::STORAGE_CLASS_BUCKET_NAME;
use bucket_api::{ObjectBucketClaim, ReclaimPolicy};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;

use std::sync::Arc;

use bucket_api::ObjectBucket;
use bucket_api::contract::annotations;

use crate::BucketOptions;
use crate::bucket::context::Context;
use crate::bucket::error::Error;
use crate::bucket::limits::{ClassLimits, Limited};
use crate::bucket::namespace_selector::take_selector;
use crate::bucket::naming;
use crate::bucket::objects::{BucketSource, parse_reclaim_policy};
use crate::bucket::observe::{bound_bucket_name, source_of};
use crate::bucket::rotation::RotationPolicy;
use crate::bucket::sharing::Owner;
use crate::bucket::tenant_written::TenantWritten;
use crate::bucket::web_identity::WebIdentityGate;

/// What the controller will do for a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The bucket: chosen, generated, or named by the StorageClass.
    pub bucket_name: String,
    /// Whether the bucket is created for the claim or already exists.
    pub source: BucketSource,
    /// The StorageClass's reclaim policy.
    pub reclaim_policy: ReclaimPolicy,
    /// StorageClass parameters for the backend (without `bucketName`, the class's limits and
    /// its rotation policy).
    pub parameters: BTreeMap<String, String>,
    /// What the StorageClass lets its claims ask for.
    pub limits: ClassLimits,
    /// Whether its claims may (or must) name ServiceAccounts that get short-lived credentials.
    pub web_identity: WebIdentityGate,
    /// The name was generated from `generateBucketName`, so another may replace it if the
    /// backend finds it taken.
    pub generated: bool,
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// Decides the bucket for a claim. `spec.bucketName` wins over `generateBucketName`; a StorageClass
/// `bucketName` makes the claim a grant of that existing bucket.
pub fn plan(claim: &ObjectBucketClaim, class: &StorageClass) -> Result<Plan, Error> {
    let class_name = class.name_any();
    let invalid_class =
        |message: String| Error::InvalidStorageClass { class: class_name.clone(), message };
    let reclaim_policy = match class.reclaim_policy.as_deref() {
        None => ReclaimPolicy::Delete,
        Some(policy) => parse_reclaim_policy(policy).ok_or_else(|| {
            invalid_class(format!(
                "reclaimPolicy {policy:?} is not supported for buckets; use Delete or Retain"
            ))
        })?,
    };
    let mut parameters = class.parameters.clone().unwrap_or_default();
    let existing = parameters.remove(STORAGE_CLASS_BUCKET_NAME);
    let limits = ClassLimits::take(&mut parameters).map_err(&invalid_class)?;
    RotationPolicy::take(&mut parameters).map_err(&invalid_class)?;
    crate::bucket::consent::take_consent(&mut parameters).map_err(&invalid_class)?;
    take_selector(&mut parameters).map_err(&invalid_class)?;
    let web_identity = WebIdentityGate::take(&mut parameters).map_err(&invalid_class)?;

    let generated_before = claim.annotations().get(annotations::GENERATED_BUCKET_NAME);
    let (bucket_name, source, generated) = if let Some(existing) = existing {
        naming::validate_bucket_name(&existing)
            .map_err(|e| invalid_class(format!("parameter {STORAGE_CLASS_BUCKET_NAME}: {e}")))?;
        if let Some(requested) = non_empty(&claim.spec.bucket_name)
            && requested != existing
        {
            return Err(Error::BucketNameConflict { claim: requested.into(), class: existing });
        }
        (existing, BucketSource::Existing, false)
    } else if let Some(name) = non_empty(&claim.spec.bucket_name) {
        naming::validate_bucket_name(name).map_err(Error::InvalidBucketName)?;
        // Tenant-written like everything on the claim, but it only lets us rename this claim's
        // own bucket-to-be.
        let generated = generated_before.is_some_and(|g| g == name)
            && non_empty(&claim.spec.generate_bucket_name).is_some();
        (name.to_string(), BucketSource::New, generated)
    } else if let Some(prefix) = non_empty(&claim.spec.generate_bucket_name) {
        naming::validate_generate_prefix(prefix).map_err(Error::InvalidGenerateBucketName)?;
        (naming::generate_bucket_name(prefix), BucketSource::New, true)
    } else {
        return Err(Error::BucketNameMissing);
    };
    Ok(Plan { bucket_name, source, reclaim_policy, parameters, limits, web_identity, generated })
}

/// The plan of a claim sharing `owner`'s bucket: a grant of it, with the owner's mode as the most
/// the claim may get. A class naming a bucket of its own, or a claim naming another bucket,
/// cannot share.
pub(crate) fn plan_shared(
    claim: &ObjectBucketClaim,
    class: &StorageClass,
    owner: &Owner,
) -> Result<Plan, Error> {
    if class.parameters.as_ref().is_some_and(|p| p.contains_key(STORAGE_CLASS_BUCKET_NAME)) {
        return Err(Error::InvalidAdditionalConfig(format!(
            "shareFrom cannot be used with StorageClass {:?}, which names a bucket of its own \
             ({STORAGE_CLASS_BUCKET_NAME}); use a class without it",
            class.name_any()
        )));
    }
    if let Some(requested) = non_empty(&claim.spec.bucket_name)
        && requested != owner.bucket
    {
        return Err(Error::InvalidAdditionalConfig(format!(
            "shareFrom grants the bucket of the claim it names; remove spec.bucketName \
             {requested:?}"
        )));
    }
    let mut plan = plan_for_class(class)?;
    plan.bucket_name = owner.bucket.clone();
    plan.limits = plan.limits.shared_from(owner.mode);
    Ok(plan)
}

/// The parts of a plan that come from the class alone, for a grant of an existing bucket.
fn plan_for_class(class: &StorageClass) -> Result<Plan, Error> {
    let mut parameters = class.parameters.clone().unwrap_or_default();
    parameters.remove(STORAGE_CLASS_BUCKET_NAME);
    let invalid_class = |message| Error::InvalidStorageClass { class: class.name_any(), message };
    let limits = ClassLimits::take(&mut parameters).map_err(invalid_class)?;
    RotationPolicy::take(&mut parameters).map_err(&invalid_class)?;
    crate::bucket::consent::take_consent(&mut parameters).map_err(&invalid_class)?;
    take_selector(&mut parameters).map_err(&invalid_class)?;
    let web_identity = WebIdentityGate::take(&mut parameters).map_err(invalid_class)?;
    Ok(Plan {
        bucket_name: String::new(),
        source: BucketSource::Existing,
        reclaim_policy: ReclaimPolicy::Retain,
        parameters,
        limits,
        web_identity,
        generated: false,
    })
}

/// The plan of a bound claim: its bucket and how it came to be are what the ObjectBucket says,
/// whatever the claim or the StorageClass say now; the class's limits are as it says now.
pub(crate) fn plan_for_bound(bound: &ObjectBucket, class: &StorageClass) -> Result<Plan, Error> {
    Ok(Plan {
        bucket_name: bound_bucket_name(bound).to_string(),
        source: source_of(bound.annotations()).unwrap_or(BucketSource::Existing),
        reclaim_policy: bound.spec.reclaim_policy.unwrap_or_default(),
        ..plan_for_class(class)?
    })
}

/// The plan of a claim a lib-bucket-provisioner provisioner bound, from what it recorded alone
/// (its ObjectBucket, cluster-scoped, and the operator's StorageClass that ObjectBucket names),
/// never from the claim, whose tenant may have edited it since: the bucket is the one recorded,
/// and it was created for the claim exactly when that class names no bucket (as the library
/// itself decides when the claim is deleted). An ObjectBucket that records no reclaim policy
/// is one the library would never delete: `Retain`.
pub(crate) fn plan_for_legacy(legacy: &ObjectBucket, class: &StorageClass) -> Result<Plan, Error> {
    let names_bucket =
        class.parameters.as_ref().is_some_and(|p| p.contains_key(STORAGE_CLASS_BUCKET_NAME));
    Ok(Plan {
        bucket_name: bound_bucket_name(legacy).to_string(),
        source: if names_bucket { BucketSource::Existing } else { BucketSource::New },
        reclaim_policy: legacy.spec.reclaim_policy.unwrap_or(ReclaimPolicy::Retain),
        ..plan_for_class(class)?
    })
}

/// What is in force for the claim under its class's limits. `Err` when the claim asks for more
/// than the class allows, unless `bound`: a bound claim keeps working, held to the class's
/// limits, and the caller reports [`Limited::exceeded`] once that is applied.
pub(crate) fn limited(
    claim: &ObjectBucketClaim,
    plan: &Plan,
    bound: bool,
) -> Result<Limited, Error> {
    let limited = plan.limits.apply(claim.spec.additional_config.as_ref())?;
    plan.web_identity.check(&limited.service_accounts)?;
    match &limited.exceeded {
        Some(message) if !bound => Err(exceeded(claim, message)),
        _ => Ok(limited),
    }
}

/// The failure of a claim asking for more than its class allows.
pub(crate) fn exceeded(claim: &ObjectBucketClaim, message: &str) -> Error {
    Error::ExceedsClassLimit {
        class: claim.spec.storage_class_name.clone(),
        message: message.to_owned(),
    }
}

pub(crate) fn storage_class<P>(ctx: &Context<P>, name: &str) -> Result<Arc<StorageClass>, Error> {
    ctx.caches.class(name).ok_or_else(|| Error::StorageClassNotFound(name.to_string()))
}

pub(crate) fn bucket_options(
    claim: &ObjectBucketClaim,
    plan: &Plan,
    uid: &str,
    limited: &Limited,
) -> BucketOptions {
    BucketOptions {
        bucket_name: plan.bucket_name.clone(),
        user_id: crate::user_id_for_claim(uid),
        reclaim_policy: plan.reclaim_policy,
        parameters: plan.parameters.clone(),
        additional_config: TenantWritten::new(limited.config.clone()),
        access_mode: limited.access_mode,
        storage_class_name: claim.spec.storage_class_name.clone(),
        web_identity: plan
            .web_identity
            .options(&limited.service_accounts, &claim.namespace().unwrap_or_default()),
        claim: TenantWritten::new(claim.clone()),
    }
}

/// A claim and a class, for the tests of this module and of the passes planned with it.
#[cfg(test)]
pub(crate) mod test_objects {
    use bucket_api::{ObjectBucketClaim, ObjectBucketClaimSpec};
    use k8s_openapi::api::storage::v1::StorageClass;
    use kube::api::ObjectMeta;

    /// Claim `c` of class `class`, naming `bucket` or generating from `generate`.
    pub(crate) fn claim(bucket: Option<&str>, generate: Option<&str>) -> ObjectBucketClaim {
        ObjectBucketClaim::new(
            "c",
            ObjectBucketClaimSpec {
                storage_class_name: "class".into(),
                bucket_name: bucket.map(Into::into),
                generate_bucket_name: generate.map(Into::into),
                ..Default::default()
            },
        )
    }

    /// StorageClass `class` with `params` and `reclaim` as its reclaim policy.
    pub(crate) fn class(params: &[(&str, &str)], reclaim: Option<&str>) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta { name: Some("class".into()), ..Default::default() },
            provisioner: "p".into(),
            reclaim_policy: reclaim.map(Into::into),
            parameters: Some(params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_objects::{claim, class};
    use super::*;
    use crate::kubernetes::failure::Failure;

    #[test]
    fn bucket_name_wins_over_generate() {
        let plan = plan(&claim(Some("named"), Some("gen")), &class(&[("a", "1")], None)).unwrap();
        assert_eq!(plan.bucket_name, "named");
        assert_eq!(plan.source, BucketSource::New);
        assert_eq!(plan.reclaim_policy, ReclaimPolicy::Delete);
        assert_eq!(plan.parameters, BTreeMap::from([("a".into(), "1".into())]));
    }

    #[test]
    fn generated_names_start_with_the_prefix() {
        let plan = plan(&claim(Some(""), Some("photos")), &class(&[], Some("Retain"))).unwrap();
        assert!(plan.bucket_name.starts_with("photos-"), "{}", plan.bucket_name);
        assert_eq!(plan.reclaim_policy, ReclaimPolicy::Retain);
    }

    #[test]
    fn class_bucket_name_makes_a_grant() {
        let class = class(&[("bucketName", "shared"), ("x", "y")], None);
        let plan = plan(&claim(None, Some("ignored")), &class).unwrap();
        assert_eq!((plan.bucket_name.as_str(), plan.source), ("shared", BucketSource::Existing));
        assert!(!plan.parameters.contains_key("bucketName"));
        let same = super::plan(&claim(Some("shared"), None), &class).unwrap();
        assert_eq!(same.bucket_name, "shared");
    }

    #[test]
    fn a_legacy_binding_is_planned_from_its_records_whatever_the_claim_says() {
        let legacy = ObjectBucket::new(
            "obc-team-c",
            bucket_api::ObjectBucketSpec {
                storage_class_name: "class".into(),
                reclaim_policy: Some(ReclaimPolicy::Delete),
                endpoint: Some(bucket_api::BucketEndpoint {
                    bucket_name: "shared".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        // The operator's class named the bucket: a grant, kept whatever the claim says now.
        let grant = plan_for_legacy(&legacy, &class(&[("bucketName", "shared")], None)).unwrap();
        assert_eq!((grant.bucket_name.as_str(), grant.source), ("shared", BucketSource::Existing));
        assert_eq!(grant.reclaim_policy, ReclaimPolicy::Delete);
        assert!(!grant.parameters.contains_key("bucketName"));
        let created = plan_for_legacy(&legacy, &class(&[], None)).unwrap();
        assert_eq!(created.source, BucketSource::New);
        let mut unrecorded = legacy;
        unrecorded.spec.reclaim_policy = None;
        let kept = plan_for_legacy(&unrecorded, &class(&[], Some("Delete"))).unwrap();
        assert_eq!(kept.reclaim_policy, ReclaimPolicy::Retain);
    }

    #[test]
    fn bad_input_is_a_specific_error() {
        let cases: Vec<(ObjectBucketClaim, StorageClass, &str)> = vec![
            (claim(None, None), class(&[], None), "BucketNameMissing"),
            (claim(Some("Bad_Name"), None), class(&[], None), "InvalidBucketName"),
            (claim(None, Some("UPPER")), class(&[], None), "InvalidGenerateBucketName"),
            (claim(None, None), class(&[("bucketName", "a")], None), "InvalidStorageClass"),
            (
                claim(Some("other"), None),
                class(&[("bucketName", "abc")], None),
                "BucketNameConflict",
            ),
            (claim(Some("ok-name"), None), class(&[], Some("Recycle")), "InvalidStorageClass"),
        ];
        for (claim, class, reason) in cases {
            let error = plan(&claim, &class).expect_err(reason);
            assert_eq!(error.reason(), reason, "{error}");
        }
    }
}
