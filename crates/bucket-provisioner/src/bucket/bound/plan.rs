//! Plan: every decision of a bound claim's reconcile, made from [`Facts`] alone (no I/O; the
//! time is one of the facts), in the order [`super::apply`] takes them. A decision that fails is
//! kept as its error, so that what comes before it is still done, as it would be step by step.

use std::collections::BTreeMap;

use bucket_api::contract::{FINALIZER, annotations};
use bucket_api::{AccessMode, ObjectBucket, ObjectBucketClaim};
use kube::{Resource, ResourceExt};

use crate::access_mode_of;
use crate::bucket::bound::observe::Facts;
use crate::bucket::error::Error;
use crate::bucket::limits::{ClassLimits, Limited};
use crate::bucket::objects::BucketSource;
use crate::bucket::observe::{bound_bucket_name, source_of};
use crate::bucket::plan::{Plan, exceeded, limited, plan_for_bound};
use crate::bucket::rotation::{Next, RotationPolicy, next, policy_from};
use crate::bucket::rotation_record::{RotationRecord, requested};
use crate::bucket::sharing;
use crate::bucket::web_identity::recorded_service_accounts;

/// What becomes of a bound claim.
#[derive(Debug)]
pub(crate) enum BoundPlan {
    /// The bucket went with the claim it was shared from: the claim's key is revoked (unless
    /// that is done already) and the claim fails with `BucketLost`.
    Lost,
    /// It shares across namespaces and that consent is gone: its key is revoked, what was
    /// written for it removed, and it fails with `ShareWithdrawn`.
    Withdraw,
    /// It stays bound, repaired where needed.
    Keep(Box<Keep>),
}

/// The decisions for a claim that stays bound, in the order they are applied.
#[derive(Debug)]
pub(crate) struct Keep {
    /// Its ObjectBucket was deleted while the claim lives: written again from the copy.
    pub(crate) recreate: bool,
    /// Its key may do more than its class or the claim it shares from now allow: narrowed
    /// first, before any decision that reads the claim (which its tenant may have broken).
    pub(crate) narrow: Option<Box<Narrowing>>,
    /// The claim still asks for the bucket and StorageClass it is bound to; else the error.
    pub(crate) binding: Result<(), Error>,
    /// The rotation policy its keys are held to and the step of their rotation due now; the
    /// class's error when the policy cannot be read.
    pub(crate) rotation: Result<Rotation, Error>,
    /// The claim lost its finalizer: put back, or its deletion would skip its cleanup.
    pub(crate) restore_finalizer: bool,
    /// The quotas and access mode in force, and whether the backend must be told of them.
    pub(crate) config: Result<Config, Error>,
    /// The ObjectBucket's name, to record on a claim bound before it was recorded.
    pub(crate) record_name: Option<String>,
    /// What the claim's `Ready` condition says while it is bound.
    pub(crate) message: String,
}

/// Where the rotation of a bound claim's keys stands.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Rotation {
    /// The policy its keys are held to: its class's, or the default when its class is gone (so
    /// that a rotation under way still ends).
    pub(crate) policy: RotationPolicy,
    /// The step due now; each step taken decides the next (see [`crate::bucket::rotation`]).
    pub(crate) next: Next,
}

impl Rotation {
    /// Whether a step is due now, rather than only a look at a later time.
    pub(crate) fn due(&self) -> bool {
        !matches!(self.next, Next::Wait(_))
    }
}

/// A narrowing of a bound claim's key that reads nothing its tenant writes: the mode it has,
/// narrowed to its class's `limitAccessMode` and to the mode of the claim it shares from (as
/// consented), with the `additionalConfig` it has left as it is. Never a widening.
#[derive(Debug)]
pub(crate) struct Narrowing {
    /// The plan of the bound claim, from its ObjectBucket and class alone.
    pub(crate) plan: Plan,
    /// The mode its key has now.
    pub(crate) from: AccessMode,
    /// What is in force once narrowed: the recorded `additionalConfig` and the narrowed mode.
    pub(crate) limited: Limited,
}

/// What is in force for a bound claim.
#[derive(Debug)]
pub(crate) struct Config {
    /// The quotas and access mode in force; what the claim asked for beyond its class's limits
    /// in [`Limited::exceeded`].
    pub(crate) limited: Limited,
    /// The ObjectBucket records something else: the backend's `update` gets this plan.
    pub(crate) update: Option<Box<Plan>>,
}

impl Config {
    /// The failure a claim asking for more than its class allows ends with, once what the
    /// class allows is applied.
    pub(crate) fn exceeded(&self, claim: &ObjectBucketClaim) -> Option<Error> {
        self.limited.exceeded.as_deref().map(|message| exceeded(claim, message))
    }
}

/// Decides what becomes of `claim`, bound as `facts` say.
pub(crate) fn plan(claim: &ObjectBucketClaim, facts: &Facts) -> BoundPlan {
    let bound = &facts.bound;
    if sharing::lost(bound).is_some() {
        return BoundPlan::Lost;
    }
    if facts.consent_withdrawn {
        return BoundPlan::Withdraw;
    }
    let source = source_of(bound.annotations()).unwrap_or(BucketSource::Existing);
    BoundPlan::Keep(Box::new(Keep {
        recreate: bound.meta().deletion_timestamp.is_some(),
        narrow: narrowing(facts).map(Box::new),
        binding: unchanged_binding(claim, bound),
        rotation: rotation(claim, facts),
        restore_finalizer: !claim.finalizers().iter().any(|f| f == FINALIZER),
        config: config(claim, facts),
        record_name: (claim.spec.object_bucket_name.as_deref()
            != Some(facts.object_bucket.as_str()))
        .then(|| facts.object_bucket.clone()),
        message: bound_message(source, bound_bucket_name(bound)),
    }))
}

/// What a Bound claim's condition says; the same on every reconcile, so that it is written once.
pub(crate) fn bound_message(source: BucketSource, bucket: &str) -> String {
    match source {
        BucketSource::New => format!("provisioned bucket {bucket:?}"),
        BucketSource::Existing => format!("granted access to bucket {bucket:?}"),
    }
}

/// The rotation policy of the claim's class, and the step of its rotation due at `facts.now`.
fn rotation(claim: &ObjectBucketClaim, facts: &Facts) -> Result<Rotation, Error> {
    let class = facts.class.as_deref();
    let policy = class.map_or_else(|| Ok(RotationPolicy::default()), policy_from)?;
    let record = RotationRecord::of(&facts.bound).unwrap_or_default();
    let next = next(&record, &facts.bound, requested(claim), policy.period, facts.now);
    Ok(Rotation { policy, next })
}

/// The narrowing the claim's key is due, from its ObjectBucket, its class and the mode of the
/// claim it shares from alone; `None` when its key does no more than they allow (or its class
/// is gone or cannot be read: then nothing is known to narrow it to). A key whose mode has
/// nothing in common with the limits (`ReadOnly` under a `WriteOnly` limit) is not narrowed
/// here: no mode is narrower than both; the claim's own decisions change it.
fn narrowing(facts: &Facts) -> Option<Narrowing> {
    let class = facts.class.as_deref()?;
    let mut plan = plan_for_bound(&facts.bound, class).ok()?;
    if let Some(mode) = facts.owner_mode {
        plan.limits = plan.limits.shared_from(mode);
    }
    let from = access_mode_of(&facts.bound);
    let access_mode = plan.limits.narrow(from).filter(|narrowed| *narrowed != from)?;
    let recorded = facts.bound.spec.endpoint.as_ref().and_then(|e| e.additional_config.clone());
    let service_accounts = recorded_service_accounts(&facts.bound);
    let config = recorded.unwrap_or_default();
    let limited = Limited { config, access_mode, exceeded: None, service_accounts };
    Some(Narrowing { plan, from, limited })
}

/// What is in force for a bound claim, and whether the backend must be told. Without its
/// StorageClass no limits can be read: what the claim asks for is in force, and a change of
/// it cannot be applied.
fn config(claim: &ObjectBucketClaim, facts: &Facts) -> Result<Config, Error> {
    let asked = claim.spec.additional_config.as_ref();
    let Some(class) = facts.class.as_deref() else {
        let limited = ClassLimits::default().apply(asked)?;
        if differs(&facts.bound, &limited) {
            return Err(Error::StorageClassNotFound(claim.spec.storage_class_name.clone()));
        }
        return Ok(Config { limited, update: None });
    };
    let mut plan = plan_for_bound(&facts.bound, class)?;
    if let Some(mode) = facts.owner_mode {
        plan.limits = plan.limits.shared_from(mode);
    }
    let limited = limited(claim, &plan, true)?;
    let update = differs(&facts.bound, &limited).then(|| Box::new(plan));
    Ok(Config { limited, update })
}

fn same_config(a: &Option<BTreeMap<String, String>>, b: &Option<BTreeMap<String, String>>) -> bool {
    a.as_ref().filter(|m| !m.is_empty()) == b.as_ref().filter(|m| !m.is_empty())
}

/// Whether the ObjectBucket records something else in force than `limited`. One written before
/// access modes existed records none: its claim's credentials have all access.
pub(crate) fn differs(bound: &ObjectBucket, limited: &Limited) -> bool {
    let recorded_config = bound.spec.endpoint.as_ref().and_then(|e| e.additional_config.clone());
    let recorded_mode = bound.annotations().get(annotations::ACCESS_MODE).map(String::as_str);
    !same_config(&Some(limited.config.clone()), &recorded_config)
        || recorded_service_accounts(bound) != limited.service_accounts
        || recorded_mode.unwrap_or(AccessMode::ReadWrite.as_str()) != limited.access_mode.as_str()
}

/// A bound claim's bucket and StorageClass are fixed: asking for others is an error.
fn unchanged_binding(claim: &ObjectBucketClaim, bound: &ObjectBucket) -> Result<(), Error> {
    let bound_name = bound_bucket_name(bound);
    if let Some(requested) = claim.spec.bucket_name.as_deref().filter(|n| !n.is_empty())
        && requested != bound_name
    {
        return Err(Error::BucketNameImmutable {
            bound: bound_name.into(),
            requested: requested.into(),
        });
    }
    if claim.spec.storage_class_name != bound.spec.storage_class_name {
        return Err(Error::StorageClassImmutable {
            bound: bound.spec.storage_class_name.clone(),
            requested: claim.spec.storage_class_name.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bucket_api::ReclaimPolicy;
    use k8s_openapi::api::storage::v1::StorageClass;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::Credentials;
    use crate::bucket::objects::tests::{claim, endpoint};
    use crate::bucket::objects::{BucketRecord, object_bucket};
    use crate::kubernetes::failure::Failure;

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// `claim()` as bound: its finalizer and ObjectBucket name recorded.
    fn bound_claim() -> ObjectBucketClaim {
        let mut claim = claim();
        claim.metadata.finalizers = Some(vec![FINALIZER.into()]);
        claim.spec.object_bucket_name = Some("obc-team-photos".into());
        claim
    }

    /// The ObjectBucket written for `claim` with `config` and `mode` in force.
    fn bucket(
        claim: &ObjectBucketClaim,
        source: BucketSource,
        config: &[(&str, &str)],
        mode: AccessMode,
    ) -> ObjectBucket {
        let credentials = Credentials { access_key_id: "AK".into(), secret_access_key: "S".into() };
        object_bucket(&BucketRecord {
            name: "obc-team-photos",
            claim,
            provisioner: "p",
            bucket: "photos-1",
            source,
            reclaim_policy: ReclaimPolicy::Delete,
            endpoint: &endpoint("r"),
            credentials: &credentials,
            additional_state: BTreeMap::new(),
            additional_config: &map(config),
            access_mode: mode,
        })
    }

    fn class(parameters: &[(&str, &str)]) -> Arc<StorageClass> {
        Arc::new(StorageClass {
            metadata: ObjectMeta { name: Some("class".into()), ..Default::default() },
            provisioner: "p".into(),
            parameters: Some(map(parameters)),
            ..Default::default()
        })
    }

    fn facts(bound: ObjectBucket, class: Option<Arc<StorageClass>>) -> Facts {
        Facts {
            bound,
            object_bucket: "obc-team-photos".into(),
            class,
            owner_mode: None,
            consent_withdrawn: false,
            now: "2026-01-01T00:00:00Z".parse().unwrap(),
        }
    }

    fn keep(claim: &ObjectBucketClaim, facts: &Facts) -> Keep {
        match plan(claim, facts) {
            BoundPlan::Keep(keep) => *keep,
            other => panic!("expected Keep, got {other:?}"),
        }
    }

    fn reason<T>(result: &Result<T, Error>) -> String {
        result.as_ref().map_or_else(|e| e.reason().to_owned(), |_| "Ok".to_owned())
    }

    fn plain(claim: &ObjectBucketClaim) -> Facts {
        facts(bucket(claim, BucketSource::New, &[], AccessMode::ReadWrite), Some(class(&[])))
    }

    #[test]
    fn a_claim_bound_as_written_is_kept_without_any_write() {
        let claim = bound_claim();
        let keep = keep(&claim, &plain(&claim));
        assert!(!keep.recreate && !keep.restore_finalizer);
        assert_eq!(reason(&keep.binding), "Ok");
        let rotation = keep.rotation.as_ref().unwrap();
        assert_eq!(rotation.policy, RotationPolicy::default());
        assert!(!rotation.due(), "{rotation:?}");
        let config = keep.config.as_ref().unwrap();
        assert!(config.update.is_none() && config.exceeded(&claim).is_none());
        assert_eq!(config.limited.access_mode, AccessMode::ReadWrite);
        assert_eq!(keep.record_name, None);
        assert_eq!(keep.message, "provisioned bucket \"photos-1\"");
    }

    #[test]
    fn a_lost_bucket_comes_before_withdrawn_consent_and_both_before_any_repair() {
        let claim = bound_claim();
        let mut facts = plain(&claim);
        facts.consent_withdrawn = true;
        assert!(matches!(plan(&claim, &facts), BoundPlan::Withdraw));
        let recorded = facts.bound.metadata.annotations.get_or_insert_default();
        recorded.insert(annotations::BUCKET_LOST.into(), "true".into());
        facts.bound.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        assert!(matches!(plan(&claim, &facts), BoundPlan::Lost));
    }

    #[test]
    fn a_deleted_object_bucket_is_written_again() {
        let claim = bound_claim();
        let mut facts = plain(&claim);
        facts.bound.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        assert!(keep(&claim, &facts).recreate);
    }

    #[test]
    fn asking_for_another_bucket_or_class_is_refused_but_the_same_one_is_not() {
        let mut claim = bound_claim();
        let facts = plain(&claim);
        claim.spec.bucket_name = Some("photos-1".into());
        assert_eq!(reason(&keep(&claim, &facts).binding), "Ok");
        claim.spec.bucket_name = Some("other".into());
        assert_eq!(reason(&keep(&claim, &facts).binding), "BucketNameImmutable");
        claim.spec.bucket_name = None;
        claim.spec.storage_class_name = "faster".into();
        assert_eq!(reason(&keep(&claim, &facts).binding), "StorageClassImmutable");
    }

    #[test]
    fn a_lost_finalizer_and_an_unrecorded_object_bucket_name_are_put_back() {
        let mut claim = bound_claim();
        claim.metadata.finalizers = None;
        claim.spec.object_bucket_name = None;
        let keep = keep(&claim, &plain(&claim));
        assert!(keep.restore_finalizer);
        assert_eq!(keep.record_name.as_deref(), Some("obc-team-photos"));
    }

    #[test]
    fn a_changed_additional_config_is_handed_to_the_backend() {
        let mut claim = bound_claim();
        let facts = plain(&claim);
        claim.spec.additional_config = Some(map(&[("maxObjects", "10")]));
        let keep = keep(&claim, &facts);
        let config = keep.config.unwrap();
        assert_eq!(config.limited.config, map(&[("maxObjects", "10")]));
        let update = config.update.expect("an update");
        assert_eq!(update.bucket_name, "photos-1");
        assert_eq!(update.source, BucketSource::New);
    }

    #[test]
    fn a_bucket_recorded_before_access_modes_counts_as_read_write() {
        let claim = bound_claim();
        let mut facts = plain(&claim);
        facts.bound.metadata.annotations.as_mut().unwrap().remove(annotations::ACCESS_MODE);
        assert!(keep(&claim, &facts).config.unwrap().update.is_none());
        facts.class = Some(class(&[("limitAccessMode", "ReadOnly")]));
        let config = keep(&claim, &facts).config.unwrap();
        assert_eq!(config.limited.access_mode, AccessMode::ReadOnly);
        assert!(config.update.is_some());
    }

    #[test]
    fn a_class_narrowed_under_a_bound_claim_is_applied_and_the_excess_reported() {
        let mut claim = bound_claim();
        claim.spec.additional_config = Some(map(&[("maxObjects", "100")]));
        let mut facts = facts(
            bucket(&claim, BucketSource::New, &[("maxObjects", "100")], AccessMode::ReadWrite),
            Some(class(&[("limitMaxObjects", "10")])),
        );
        let config = keep(&claim, &facts).config.unwrap();
        assert_eq!(config.limited.config, map(&[("maxObjects", "10")]));
        assert!(config.update.is_some());
        assert_eq!(
            config.exceeded(&claim).map(|e| e.reason().to_owned()).as_deref(),
            Some("ExceedsClassLimit")
        );
        // Once applied, only the excess is left to report.
        facts.bound =
            bucket(&claim, BucketSource::New, &[("maxObjects", "10")], AccessMode::ReadWrite);
        let config = keep(&claim, &facts).config.unwrap();
        assert!(config.update.is_none() && config.exceeded(&claim).is_some());
    }

    #[test]
    fn a_sharing_claim_is_held_to_the_owners_mode() {
        let claim = bound_claim();
        let mut facts = plain(&claim);
        facts.owner_mode = Some(AccessMode::ReadOnly);
        let config = keep(&claim, &facts).config.unwrap();
        assert_eq!(config.limited.access_mode, AccessMode::ReadOnly);
        assert!(config.update.is_some());
    }

    #[test]
    fn without_its_class_a_claim_stays_bound_unless_it_asks_for_a_change() {
        let mut claim = bound_claim();
        let mut facts = plain(&claim);
        facts.class = None;
        let keep_plan = keep(&claim, &facts);
        assert_eq!(keep_plan.rotation.as_ref().unwrap().policy, RotationPolicy::default());
        assert!(keep_plan.config.unwrap().update.is_none());
        claim.spec.additional_config = Some(map(&[("maxObjects", "10")]));
        assert_eq!(reason(&keep(&claim, &facts).config), "StorageClassNotFound");
    }

    #[test]
    fn a_class_that_cannot_be_read_fails_its_decisions_alone() {
        let claim = bound_claim();
        let mut facts = plain(&claim);
        facts.class = Some(class(&[("limitMaxSize", "lots")]));
        let keep_plan = keep(&claim, &facts);
        assert_eq!(reason(&keep_plan.config), "InvalidStorageClass");
        assert_eq!(reason(&keep_plan.rotation), "Ok");
        facts.class = Some(class(&[("rotationPeriod", "monthly")]));
        let keep_plan = keep(&claim, &facts);
        assert_eq!(reason(&keep_plan.rotation), "InvalidStorageClass");
        facts.class = Some(class(&[("rotationPeriod", "720h")]));
        let period = keep(&claim, &facts).rotation.unwrap().policy.period;
        assert_eq!(period, Some(std::time::Duration::from_secs(720 * 3600)));
    }

    fn rotation_of(claim: &ObjectBucketClaim, facts: &Facts) -> Rotation {
        keep(claim, facts).rotation.unwrap()
    }

    #[test]
    fn a_new_rotation_request_is_due_at_once_and_the_one_honoured_is_not() {
        let mut claim = bound_claim();
        let mut facts = plain(&claim);
        let ask = |claim: &mut ObjectBucketClaim, token: &str| {
            let annotations = claim.metadata.annotations.get_or_insert_default();
            annotations.insert(annotations::ROTATE_CREDENTIALS.into(), token.into());
        };
        ask(&mut claim, "t1");
        assert_eq!(rotation_of(&claim, &facts).next, Next::Start("t1".into()));
        let honoured = RotationRecord { handled: "t1".into(), ..Default::default() };
        let recorded = facts.bound.metadata.annotations.get_or_insert_default();
        recorded.insert(annotations::ROTATION.into(), honoured.to_json());
        assert!(!rotation_of(&claim, &facts).due());
        ask(&mut claim, "t2");
        assert!(rotation_of(&claim, &facts).due());
    }

    #[test]
    fn the_class_period_makes_a_rotation_due_by_the_clock() {
        let claim = bound_claim();
        let mut facts = plain(&claim);
        facts.class = Some(class(&[("rotationPeriod", "24h")]));
        facts.bound.metadata.creation_timestamp =
            Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
        facts.now = "2026-01-01T12:00:00Z".parse().unwrap();
        let waiting = rotation_of(&claim, &facts);
        assert_eq!(waiting.next, Next::Wait(Some("2026-01-02T00:00:00Z".parse().unwrap())));
        facts.now = "2026-01-02T00:00:00Z".parse().unwrap();
        assert_eq!(rotation_of(&claim, &facts).next, Next::Start(String::new()));
    }

    #[test]
    fn a_rotation_under_way_goes_on_even_without_its_class() {
        let claim = bound_claim();
        let mut facts = plain(&claim);
        facts.class = None;
        let issuing = RotationRecord {
            step: crate::bucket::rotation_record::Step::Issuing,
            ..Default::default()
        };
        let recorded = facts.bound.metadata.annotations.get_or_insert_default();
        recorded.insert(annotations::ROTATION.into(), issuing.to_json());
        assert_eq!(rotation_of(&claim, &facts).next, Next::Issue);
    }

    #[test]
    fn a_bad_additional_config_is_a_specific_error() {
        let mut claim = bound_claim();
        let facts = facts(
            bucket(&claim, BucketSource::New, &[], AccessMode::ReadWrite),
            Some(class(&[("limitMaxObjects", "10")])),
        );
        claim.spec.additional_config = Some(map(&[("maxObjects", "many")]));
        assert_eq!(reason(&keep(&claim, &facts).config), "InvalidParameters");
    }

    #[test]
    fn a_narrower_limit_is_planned_from_the_records_even_when_the_claim_is_broken() {
        let mut claim = bound_claim();
        let mut facts = plain(&claim);
        facts.class = Some(class(&[("limitAccessMode", "ReadOnly")]));
        // The tenant breaks what it writes: its mode and its class.
        claim.spec.additional_config = Some(map(&[("accessMode", "bogus")]));
        claim.spec.storage_class_name = "anything".into();
        let keep = keep(&claim, &facts);
        assert_eq!(reason(&keep.binding), "StorageClassImmutable");
        assert_eq!(reason(&keep.config), "InvalidParameters");
        let narrow = keep.narrow.expect("a narrowing");
        assert_eq!(
            (narrow.from, narrow.limited.access_mode),
            (AccessMode::ReadWrite, AccessMode::ReadOnly)
        );
        assert!(narrow.limited.config.is_empty(), "the recorded config, not the claim's");
        assert_eq!(narrow.plan.bucket_name, "photos-1");
    }

    #[test]
    fn the_owners_narrower_mode_is_planned_and_nothing_ever_widens() {
        let claim = bound_claim();
        let mut facts = plain(&claim);
        facts.owner_mode = Some(AccessMode::ReadOnly);
        let narrow = keep(&claim, &facts).narrow.expect("a narrowing");
        assert_eq!(narrow.limited.access_mode, AccessMode::ReadOnly);
        // A read-only key stays as it is under a wider owner or class.
        facts.bound = bucket(&claim, BucketSource::New, &[], AccessMode::ReadOnly);
        facts.owner_mode = Some(AccessMode::ReadWrite);
        assert!(keep(&claim, &facts).narrow.is_none());
        facts.owner_mode = None;
        facts.class = Some(class(&[("limitAccessMode", "ReadWrite")]));
        assert!(keep(&claim, &facts).narrow.is_none());
        facts.class = None;
        assert!(keep(&claim, &facts).narrow.is_none(), "no class: nothing known to narrow to");
    }

    #[test]
    fn the_condition_says_how_the_claim_came_to_its_bucket() {
        let claim = bound_claim();
        let granted = facts(
            bucket(&claim, BucketSource::Existing, &[], AccessMode::ReadWrite),
            Some(class(&[])),
        );
        assert_eq!(keep(&claim, &granted).message, "granted access to bucket \"photos-1\"");
    }
}
