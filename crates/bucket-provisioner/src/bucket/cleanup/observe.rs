//! Observe: the record a claim's going works from, read before anything is asked of the
//! backend: its ObjectBucket or, when a crash came between the backend call and writing it, one
//! rebuilt from the claim's StorageClass.
//!
//! Everything on a claim is tenant-written, annotations and finalizers included, so none of it
//! may choose where a credential is sent, which Secret is read or what is deleted. Without an
//! ObjectBucket, the operator's StorageClass says where the bucket lives (the backend's
//! `cleanup_state` is computed from it again), the claim's UID says whose access goes, and the
//! backend's own records decide whether the bucket goes with it. What the claim recorded may only
//! narrow that: an `existing` source or a `Retain` policy is believed, the opposite never.

use std::collections::BTreeMap;

use bucket_api::contract::annotations;
use bucket_api::{
    AccessMode, BucketEndpoint, ObjectBucket, ObjectBucketClaim, ObjectBucketSpec, ReclaimPolicy,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::ObjectMeta;

use crate::bucket::context::Context;
use crate::bucket::objects::{self, BucketSource, parse_reclaim_policy};
use crate::bucket::observe::{Observed, source_of};
use crate::bucket::plan::plan;
use crate::bucket::tenant_written::TenantWritten;
use crate::{BucketOptions, Provisioner};

/// The record cleanup works from: the bound ObjectBucket, or, when a crash came between the
/// backend call and writing it, one rebuilt from the StorageClass (see the module
/// documentation). `None` when there is nothing of ours to clean up.
pub(crate) fn cleanup_record<P: Provisioner>(
    claim: &ObjectBucketClaim,
    observed: &Observed,
    ctx: &Context<P>,
) -> Option<(ObjectBucket, BucketSource)> {
    if let Some(bound) = &observed.bound {
        // Unknown origin: assume the bucket is not ours to delete.
        let source = source_of(bound.annotations()).unwrap_or(BucketSource::Existing);
        return Some((bound.clone(), source));
    }
    let class = ctx.caches.class(&claim.spec.storage_class_name);
    let rebuilt = rebuild(claim, class.as_deref(), &ctx.name)?;
    let state = rebuilt.options.as_ref().map(|o| ctx.provisioner.cleanup_state(o));
    let source = rebuilt.source;
    Some((rebuilt.object_bucket(claim, &observed.bucket_name, state), source))
}

/// What a claim without an ObjectBucket is cleaned up as, decided without I/O.
#[derive(Debug)]
pub(crate) struct Rebuilt {
    /// The bucket the backend is asked about.
    pub(crate) bucket: String,
    /// Whether the bucket may have been made for the claim.
    pub(crate) source: BucketSource,
    /// The policy the bucket may have been made under.
    pub(crate) reclaim_policy: ReclaimPolicy,
    /// What the backend's `cleanup_state` is computed from: the class as it is now; `None`
    /// when the class is gone.
    pub(crate) options: Option<BucketOptions>,
}

/// The record of a claim that has no ObjectBucket, from its StorageClass (`None` when gone) and
/// what the claim recorded, which may only narrow what the class says. `None` when the claim
/// never recorded `provisioner` or its class is another provisioner's.
pub(crate) fn rebuild(
    claim: &ObjectBucketClaim,
    class: Option<&StorageClass>,
    provisioner: &str,
) -> Option<Rebuilt> {
    let recorded = claim.annotations();
    if recorded.get(annotations::PROVISIONER).map(String::as_str) != Some(provisioner) {
        return None;
    }
    let recorded_source = source_of(recorded)?;
    let recorded_policy =
        recorded.get(annotations::RECLAIM_POLICY).and_then(|p| parse_reclaim_policy(p));
    let narrowed_source = |source| match recorded_source {
        BucketSource::Existing => BucketSource::Existing,
        BucketSource::New => source,
    };
    let narrowed_policy = |policy| match recorded_policy {
        Some(ReclaimPolicy::Retain) | None => ReclaimPolicy::Retain,
        Some(ReclaimPolicy::Delete) => policy,
    };
    let Some(class) = class else {
        // The class is gone: the backend's records alone decide, and it gets no settings.
        let bucket = claim.spec.bucket_name.clone().filter(|b| !b.is_empty())?;
        let reclaim_policy = narrowed_policy(ReclaimPolicy::Delete);
        return Some(Rebuilt { bucket, source: recorded_source, reclaim_policy, options: None });
    };
    if class.provisioner != provisioner {
        return None;
    }
    // A claim the class refuses now (a bucket name it conflicts with, say) was never given one.
    let plan = plan(claim, class).ok()?;
    let options = BucketOptions {
        bucket_name: plan.bucket_name.clone(),
        user_id: crate::user_id_for_claim(&claim.uid().unwrap_or_default()),
        reclaim_policy: plan.reclaim_policy,
        parameters: plan.parameters,
        additional_config: TenantWritten::default(),
        access_mode: AccessMode::default(),
        storage_class_name: claim.spec.storage_class_name.clone(),
        web_identity: None,
        claim: TenantWritten::new(claim.clone()),
    };
    Some(Rebuilt {
        bucket: plan.bucket_name,
        source: narrowed_source(plan.source),
        reclaim_policy: narrowed_policy(plan.reclaim_policy),
        options: Some(options),
    })
}

impl Rebuilt {
    /// The ObjectBucket cleanup is handed in place of one never written.
    fn object_bucket(
        self,
        claim: &ObjectBucketClaim,
        name: &str,
        state: Option<BTreeMap<String, String>>,
    ) -> ObjectBucket {
        ObjectBucket {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                annotations: Some(
                    [(annotations::BUCKET_SOURCE.into(), self.source.as_str().into())].into(),
                ),
                ..Default::default()
            },
            spec: ObjectBucketSpec {
                storage_class_name: claim.spec.storage_class_name.clone(),
                reclaim_policy: Some(self.reclaim_policy),
                claim_ref: Some(objects::claim_ref(claim)),
                endpoint: Some(BucketEndpoint { bucket_name: self.bucket, ..Default::default() }),
                additional_state: state.filter(|s| !s.is_empty()),
            },
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::plan::test_objects;

    const OURS: &str = "p";

    fn claim(recorded: &[(&str, &str)], bucket: Option<&str>) -> ObjectBucketClaim {
        let mut claim = test_objects::claim(bucket, None);
        claim.metadata.uid = Some("uid-1".into());
        claim.metadata.annotations =
            Some(recorded.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        claim
    }

    fn forged(source: &str, policy: &str) -> Vec<(&'static str, String)> {
        vec![
            (annotations::PROVISIONER, OURS.into()),
            (annotations::BUCKET_SOURCE, source.into()),
            (annotations::RECLAIM_POLICY, policy.into()),
            // What a tenant once used to send the admin token to its own server.
            (
                "objectbucket.io/cleanup-state",
                r#"{"adminEndpoint":"http://tenant.example:3903","secretName":"admin-token"}"#
                    .into(),
            ),
        ]
    }

    fn rebuilt(
        recorded: &[(&'static str, String)],
        bucket: Option<&str>,
        class: Option<&StorageClass>,
    ) -> Option<Rebuilt> {
        let recorded: Vec<(&str, &str)> = recorded.iter().map(|(k, v)| (*k, v.as_str())).collect();
        rebuild(&claim(&recorded, bucket), class, OURS)
    }

    #[test]
    fn a_claim_that_never_recorded_us_or_names_another_provisioners_class_is_not_ours() {
        let class = test_objects::class(&[], Some("Delete"));
        assert!(rebuilt(&[], Some("bkt"), Some(&class)).is_none());
        let mut theirs = class.clone();
        theirs.provisioner = "someone-else".into();
        assert!(rebuilt(&forged("new", "Delete"), Some("bkt"), Some(&theirs)).is_none());
    }

    #[test]
    fn the_backends_settings_come_from_the_class_never_from_the_claim() {
        let class = test_objects::class(&[("adminEndpoint", "http://garage:3903")], Some("Delete"));
        let record = rebuilt(&forged("new", "Delete"), Some("bkt"), Some(&class)).unwrap();
        let options = record.options.as_ref().unwrap();
        assert_eq!(options.parameters.get("adminEndpoint").unwrap(), "http://garage:3903");
        assert_eq!(options.user_id, "obc-uid-1");
        let bucket = record.object_bucket(&claim(&[], Some("bkt")), "obc-ns-c", None);
        assert_eq!(bucket.spec.additional_state, None, "nothing of the claim's state is read");
    }

    #[test]
    fn what_the_claim_recorded_narrows_the_class_but_never_widens_it() {
        let delete = test_objects::class(&[], Some("Delete"));
        let retain = test_objects::class(&[], Some("Retain"));
        let r = rebuilt(&forged("new", "Delete"), Some("bkt"), Some(&retain)).unwrap();
        assert_eq!((r.source, r.reclaim_policy), (BucketSource::New, ReclaimPolicy::Retain));
        let r = rebuilt(&forged("new", "Retain"), Some("bkt"), Some(&delete)).unwrap();
        assert_eq!(r.reclaim_policy, ReclaimPolicy::Retain);
        let r = rebuilt(&forged("existing", "Delete"), Some("bkt"), Some(&delete)).unwrap();
        assert_eq!(r.source, BucketSource::Existing);
        let named = test_objects::class(&[("bucketName", "operators")], Some("Delete"));
        let r = rebuilt(&forged("new", "Delete"), None, Some(&named)).unwrap();
        assert_eq!((r.bucket.as_str(), r.source), ("operators", BucketSource::Existing));
    }

    #[test]
    fn with_the_class_gone_the_backend_gets_no_settings_at_all() {
        let r = rebuilt(&forged("new", "Delete"), Some("bkt"), None).unwrap();
        assert!(r.options.is_none());
        assert_eq!((r.bucket.as_str(), r.source), ("bkt", BucketSource::New));
        let r = rebuilt(&forged("new", "nonsense"), Some("bkt"), None).unwrap();
        assert_eq!(r.reclaim_policy, ReclaimPolicy::Retain);
    }
}
