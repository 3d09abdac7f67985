//! Credential rotation of a bound claim: a new key written to the same Secret, the previous one
//! kept working for an overlap window and then retired.
//!
//! A rotation is asked for by a new value of the claim's
//! [`objectbucket.io/rotate-credentials`](annotations::ROTATE_CREDENTIALS) annotation (the value
//! is an opaque token: only a change counts), or falls due when the key in the Secret is older
//! than its StorageClass's `rotationPeriod`. It goes through steps, each recorded on the
//! ObjectBucket (which tenants cannot write) before it is taken, so that a crash anywhere is
//! finished by the next reconcile and the claim has at most two valid keys, never none:
//!
//! | step | recorded | then |
//! |---|---|---|
//! | idle | the last request honoured, when the Secret's key was issued | a request or the period starts a rotation |
//! | `Issuing` | the key in the Secret, which is kept, and the request taken up | [`Provisioner::rotate`] removes any other key of the claim and issues one |
//! | `Issued` | the new key's id and digest (never its secret); the request as honoured | the Secret is written; a Secret without the new key after a crash means its secret was lost, and `Issuing` is repeated |
//! | `Overlap` | the new key's digest as the Secret's, when the previous key stops working | at that time [`Provisioner::retire_key`] removes the previous key |
//!
//! Every time the library acts on comes from this record and the controller's clock, never from
//! the claim: its tenant can write anything there.
//!
//! A backend that refuses to rotate (permanently: [`crate::ROTATION_NOT_SUPPORTED`] by default)
//! fails the claim and the request is dropped, not honoured: removing the annotation, or setting
//! it back to the value last honoured, asks nothing and the claim is bound again as it was.
//!
//! Each step has a crash point (see [`crate::kubernetes::crash_point`]): tests stop the process
//! right after every one of them.

use std::collections::BTreeMap;
use std::time::Duration;

use bucket_api::contract::annotations;
use bucket_api::contract::class_rotation::{ROTATION_OVERLAP, ROTATION_PERIOD};
use bucket_api::{CredentialsStatus, ObjectBucket, ObjectBucketClaim};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use serde_json::json;

use crate::bucket::context::Context;
use crate::bucket::duration::{DurationError, format_duration, parse_duration};
use crate::bucket::error::{Error, Operation};
use crate::bucket::objects;
use crate::bucket::observe::{Observed, bound_bucket_name};
use crate::bucket::ownership::{CredentialsCheck, check_credentials, ensure_owned};
use crate::bucket::rotation_record::{RotationRecord, Step, is_taken, recorded_token, requested};
use crate::kubernetes::cache::key;
use crate::kubernetes::cache::summary::Summary;
use crate::kubernetes::crash_point::crash_point;
use crate::{BackendError, Provisioner};

/// How long the previous key works after a rotation when the StorageClass does not say.
pub const DEFAULT_OVERLAP: Duration = Duration::from_secs(3600);

/// The longest `rotationPeriod` or `rotationOverlap` a class may ask for: 100 years of 365
/// days, so that a deadline counted from any time this side of year 9000 can be written.
pub const LONGEST_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
const LONGEST_DURATION_TEXT: &str = "876000h (100 years)";

/// The longest a reconcile waits for a rotation deadline before looking again: a far deadline
/// is recomputed from the record anyway, and a day costs nothing.
const LONGEST_WAIT: Duration = Duration::from_secs(24 * 3600);

/// When a StorageClass has its claims' keys replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RotationPolicy {
    /// How old the Secret's key may grow; `None`: replaced only on demand.
    pub period: Option<Duration>,
    /// How long the previous key keeps working once the new one is in the Secret.
    pub overlap: Duration,
}

impl Default for RotationPolicy {
    fn default() -> Self {
        Self { period: None, overlap: DEFAULT_OVERLAP }
    }
}

impl RotationPolicy {
    /// Reads (and removes) the rotation parameters from a StorageClass's parameters, so that
    /// backends never see them. Each is a [duration](crate::bucket::duration) longer than 0
    /// and at most [`LONGEST_DURATION`].
    pub fn take(parameters: &mut BTreeMap<String, String>) -> Result<Self, String> {
        let mut read = |name: &str| match parameters.remove(name) {
            None => Ok(None),
            Some(value) => match parse_duration(&value) {
                Ok(d) if d.is_zero() => Err(format!("parameter {name} must be longer than 0")),
                Ok(d) if d <= LONGEST_DURATION => Ok(Some(d)),
                Ok(_) | Err(DurationError::TooLong) => Err(format!(
                    "parameter {name} {value:?} is longer than the longest supported, \
                     {LONGEST_DURATION_TEXT}"
                )),
                Err(e) => Err(format!("parameter {name} {value:?} {e}")),
            },
        };
        let period = read(ROTATION_PERIOD)?;
        let overlap = read(ROTATION_OVERLAP)?.unwrap_or(DEFAULT_OVERLAP);
        Ok(Self { period, overlap })
    }
}

/// What is next for a claim's rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing now; look again at this time, if any.
    Wait(Option<Timestamp>),
    /// Begin a rotation, taking up this request as recorded (empty: the schedule's).
    Start(String),
    /// Issue the new key.
    Issue,
    /// See whether the issued key reached the Secret.
    CheckIssued,
    /// Retire the previous key.
    Retire,
}

/// When the Secret's key was issued: recorded, or when the ObjectBucket was written.
fn created_at(record: &RotationRecord, bucket: &ObjectBucket) -> Option<Timestamp> {
    record.created_at.or_else(|| bucket.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Decides the next step from the record, the claim's request, the class's policy and the
/// time: the rules of rotation, without I/O.
pub(crate) fn next(
    record: &RotationRecord,
    bucket: &ObjectBucket,
    requested: Option<&str>,
    period: Option<Duration>,
    now: Timestamp,
) -> Next {
    match record.step {
        Step::Issuing => return Next::Issue,
        Step::Issued => return Next::CheckIssued,
        // A request or a due period during the overlap waits for it to end: a third key
        // would need a key still in use to go early.
        Step::Overlap => {
            return match record.previous_expires_at {
                Some(expires) if now < expires => Next::Wait(Some(expires)),
                _ => Next::Retire,
            };
        }
        Step::Idle => {}
    }
    if let Some(requested) = requested
        && !is_taken(&record.handled, requested)
    {
        return Next::Start(recorded_token(requested));
    }
    let due = period.and_then(|period| {
        let created = created_at(record, bucket)?;
        created.checked_add(SignedDuration::try_from(period).ok()?).ok()
    });
    match due {
        Some(due) if now >= due => Next::Start(record.handled.clone()),
        due => Next::Wait(due),
    }
}

/// What the claim's status says of its keys: for a claim that rotated or whose class rotates.
pub(crate) fn credentials_status(
    bucket: &ObjectBucket,
    policy: &RotationPolicy,
) -> Option<CredentialsStatus> {
    let record = RotationRecord::of(bucket);
    if record.is_none() && policy.period.is_none() {
        return None;
    }
    let record = record.unwrap_or_default();
    let expires = match record.step {
        Step::Overlap => record.previous_expires_at,
        _ => None,
    };
    Some(CredentialsStatus {
        created_at: created_at(&record, bucket).map(Time),
        previous_expires_at: expires.map(Time),
    })
}

/// The StorageClass's policy for the claim; the default when the class is gone (a rotation
/// under way still ends).
pub(crate) fn policy_of<P>(
    claim: &ObjectBucketClaim,
    ctx: &Context<P>,
) -> Result<RotationPolicy, Error> {
    match ctx.caches.class(&claim.spec.storage_class_name) {
        Some(class) => policy_from(&class),
        None => Ok(RotationPolicy::default()),
    }
}

/// The policy a StorageClass sets its claims' keys.
pub(crate) fn policy_from(class: &StorageClass) -> Result<RotationPolicy, Error> {
    let mut parameters = class.parameters.clone().unwrap_or_default();
    RotationPolicy::take(&mut parameters)
        .map_err(|message| Error::InvalidStorageClass { class: class.name_any(), message })
}

/// How long to wait for `deadline`, at most [`LONGEST_WAIT`].
pub(crate) fn wait_for(deadline: Option<Timestamp>, now: Timestamp) -> Option<Duration> {
    let deadline = deadline?;
    let left = now.duration_until(deadline);
    let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
    // A second late rather than early: a wake-up just before the deadline would do nothing.
    Some((left + Duration::from_secs(1)).min(LONGEST_WAIT))
}

/// What the claim's status says of its keys, and when its rotation needs a look next, without
/// acting on it.
pub(crate) fn schedule<P>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<(Option<CredentialsStatus>, Option<Duration>), Error> {
    let policy = policy_of(claim, ctx)?;
    Ok(schedule_under(&policy, claim, bound, Timestamp::now()))
}

/// [`schedule`] under `policy`, at `now`.
pub(crate) fn schedule_under(
    policy: &RotationPolicy,
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    now: Timestamp,
) -> (Option<CredentialsStatus>, Option<Duration>) {
    let record = RotationRecord::of(bound).unwrap_or_default();
    let wait = match next(&record, bound, requested(claim), policy.period, now) {
        Next::Wait(deadline) => wait_for(deadline, now),
        // Something to do that this reconcile did not (its Secret was being repaired): soon.
        _ => Some(Duration::from_secs(1)),
    };
    (credentials_status(bound, policy), wait)
}

/// Takes the claim's rotation as far as it goes now under `policy`, one step at a time, each
/// decided by [`next`] from the record the step before left; answers the ObjectBucket as it
/// leaves it and when to look again.
pub(crate) async fn advance<P: Provisioner>(
    claim: &ObjectBucketClaim,
    mut bound: ObjectBucket,
    (secret, policy): (Option<&Summary>, &RotationPolicy),
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<(ObjectBucket, Option<Duration>), Error> {
    // Carried from one step to the next within this reconcile; after a crash it is lost.
    let mut issued: Option<crate::Credentials> = None;
    loop {
        let record = RotationRecord::of(&bound).unwrap_or_default();
        let now = Timestamp::now();
        match next(&record, &bound, requested(claim), policy.period, now) {
            Next::Wait(deadline) => return Ok((bound, wait_for(deadline, now))),
            Next::Start(request) => {
                // Only a Secret holding what was written may be rotated; anything else is the
                // credentials repair's to fix first.
                let Some(keep) = current_key_id(claim, &bound, secret, observed).await? else {
                    return Ok((bound, None));
                };
                let record = RotationRecord {
                    pending: Some(request),
                    step: Step::Issuing,
                    previous_key_id: Some(keep.clone()),
                    ..record
                };
                bound = record_step(&bound, &record, None, observed, ctx).await?;
                crash_point("rotation:issuing");
                let message = format!(
                    "issuing a new key for bucket {:?}; the current key {keep} keeps working \
                     until the new one is in the Secret and {} more have passed",
                    bound_bucket_name(&bound),
                    format_duration(policy.overlap)
                );
                event(claim, "RotatingCredentials", &message, ctx).await;
            }
            Next::Issue => {
                let keep = record.previous_key_id.clone().unwrap_or_default();
                let credentials = match ctx.provisioner.rotate(&bound, &keep).await {
                    Ok(credentials) => credentials,
                    Err(source) => {
                        return Err(refused(claim, &bound, record, source, observed, ctx).await);
                    }
                };
                crash_point("rotation:key-issued");
                let digest = objects::credentials_digest(&credentials);
                // A record written before requests were kept pending holds it as `handled`.
                let handled = record.pending.clone().unwrap_or_else(|| record.handled.clone());
                let record = RotationRecord {
                    step: Step::Issued,
                    handled,
                    pending: None,
                    new_key_id: Some(credentials.access_key_id.clone()),
                    new_digest: Some(digest),
                    ..record
                };
                bound = record_step(&bound, &record, None, observed, ctx).await?;
                crash_point("rotation:issued");
                let secret = objects::secret(claim, &ctx.name, &credentials);
                ensure_owned(
                    &observed.secrets,
                    &ctx.caches.secrets,
                    secret,
                    &observed.uid,
                    Error::ForeignSecret,
                )
                .await?;
                crash_point("rotation:secret-written");
                issued = Some(credentials);
            }
            Next::CheckIssued => {
                let in_secret = if issued.is_some() {
                    true
                } else {
                    let cached = ctx.caches.secrets.get(&observed.namespace, &claim.name_any());
                    let digest = cached.as_deref().and_then(Summary::credentials).map(hex::encode);
                    digest.is_some() && digest == record.new_digest
                };
                if !in_secret {
                    // Its secret was never delivered: issued again, the stray one removed.
                    let record = RotationRecord { step: Step::Issuing, ..record };
                    bound = record_step(&bound, &record, None, observed, ctx).await?;
                    continue;
                }
                // An overlap that cannot be counted is the class's error, never a shorter one.
                let expires =
                    overlap_end(now, policy.overlap).ok_or_else(|| Error::InvalidStorageClass {
                        class: claim.spec.storage_class_name.clone(),
                        message: format!(
                            "parameter {ROTATION_OVERLAP} {} cannot be counted from {now}",
                            format_duration(policy.overlap)
                        ),
                    })?;
                let digest = record.new_digest.clone();
                let new_key = record.new_key_id.clone().unwrap_or_default();
                let previous = record.previous_key_id.clone().unwrap_or_default();
                let record = RotationRecord {
                    step: Step::Overlap,
                    created_at: Some(now),
                    previous_expires_at: Some(expires),
                    new_key_id: None,
                    new_digest: None,
                    ..record
                };
                bound = record_step(&bound, &record, digest.as_deref(), observed, ctx).await?;
                crash_point("rotation:overlap");
                let message = format!(
                    "the Secret holds the new key {new_key}; the previous key {previous} works \
                     until {expires}"
                );
                tracing::info!(claim = %key(claim), "{message}");
                event(claim, "CredentialsRotated", &message, ctx).await;
            }
            Next::Retire => {
                let previous = record.previous_key_id.clone().unwrap_or_default();
                if !previous.is_empty() {
                    ctx.provisioner
                        .retire_key(&bound, &previous)
                        .await
                        .map_err(|source| backend_error(&bound, source))?;
                }
                crash_point("rotation:key-retired");
                let record = RotationRecord {
                    step: Step::Idle,
                    previous_key_id: None,
                    previous_expires_at: None,
                    ..record
                };
                bound = record_step(&bound, &record, None, observed, ctx).await?;
                let message = format!("the previous key {previous} no longer works");
                tracing::info!(claim = %key(claim), "{message}");
                event(claim, "PreviousKeyRetired", &message, ctx).await;
            }
        }
    }
}

/// The access key id in the claim's Secret, read from the apiserver (the cache keeps only a
/// digest), when the Secret holds what the ObjectBucket records was written; `None` otherwise.
async fn current_key_id(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    secret: Option<&Summary>,
    observed: &Observed,
) -> Result<Option<String>, Error> {
    if check_credentials(secret, bound) != CredentialsCheck::Recorded {
        return Ok(None);
    }
    let Some(secret) = observed.secrets.get_opt(&claim.name_any()).await? else { return Ok(None) };
    let data = secret.data.unwrap_or_default();
    let text = |k: &str| data.get(k).and_then(|v| String::from_utf8(v.0.clone()).ok());
    let (Some(id), Some(secret_key)) = (
        text(bucket_api::contract::SECRET_ACCESS_KEY_ID),
        text(bucket_api::contract::SECRET_SECRET_ACCESS_KEY),
    ) else {
        return Ok(None);
    };
    let read = objects::credentials_digest(&crate::Credentials {
        access_key_id: id.clone(),
        secret_access_key: secret_key,
    });
    let recorded = bound.annotations().get(annotations::CREDENTIALS_DIGEST);
    Ok((recorded == Some(&read)).then_some(id))
}

/// Records `record` (and, with the new key in the Secret, its digest as the Secret's) on the
/// ObjectBucket; the resourceVersion guards against a concurrent writer.
async fn record_step<P>(
    bound: &ObjectBucket,
    record: &RotationRecord,
    digest: Option<&str>,
    observed: &Observed,
    ctx: &Context<P>,
) -> Result<ObjectBucket, Error> {
    let mut annotations = serde_json::Map::new();
    annotations.insert(annotations::ROTATION.into(), json!(record.to_json()));
    if let Some(digest) = digest {
        annotations.insert(annotations::CREDENTIALS_DIGEST.into(), json!(digest));
    }
    let patch = json!({
        "metadata": { "resourceVersion": bound.resource_version(), "annotations": annotations },
    });
    let name = bound.name_any();
    let updated =
        observed.buckets.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok((*ctx.caches.buckets.wrote(updated)).clone())
}

/// A backend that cannot rotate: the request is dropped (the last one honoured stays recorded) and
/// the period starts again, so that nothing is tried again until the claim's request or its
/// class changes; the previous key stays.
async fn refused<P>(
    claim: &ObjectBucketClaim,
    bound: &ObjectBucket,
    record: RotationRecord,
    source: BackendError,
    observed: &Observed,
    ctx: &Context<P>,
) -> Error {
    if source.is_permanent() {
        let record = RotationRecord {
            step: Step::Idle,
            pending: None,
            created_at: Some(Timestamp::now()),
            previous_key_id: None,
            ..record
        };
        if let Err(e) = record_step(bound, &record, None, observed, ctx).await {
            tracing::warn!(claim = %key(claim), error = %e, "could not record a refused rotation");
        }
    }
    backend_error(bound, source)
}

fn backend_error(bound: &ObjectBucket, source: BackendError) -> Error {
    Error::Backend {
        operation: Operation::Rotate,
        bucket: bound_bucket_name(bound).to_owned(),
        source,
        hint: "",
    }
}

async fn event<P>(claim: &ObjectBucketClaim, reason: &str, message: &str, ctx: &Context<P>) {
    ctx.event(claim, EventType::Normal, reason, message, Operation::Rotate).await;
}

/// When an overlap of `overlap` from `now` ends; `None` when that time cannot be written.
fn overlap_end(now: Timestamp, overlap: Duration) -> Option<Timestamp> {
    now.checked_add(SignedDuration::try_from(overlap).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(created: &str, record: Option<&RotationRecord>) -> ObjectBucket {
        let mut bucket = ObjectBucket::new("ob", Default::default());
        bucket.metadata.creation_timestamp = Some(Time(created.parse().unwrap()));
        if let Some(record) = record {
            bucket.metadata.annotations =
                Some([(annotations::ROTATION.to_owned(), record.to_json())].into());
        }
        bucket
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    const HOUR: Duration = Duration::from_secs(3600);

    fn policy(pairs: &[(&str, &str)]) -> Result<RotationPolicy, String> {
        let mut parameters = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        RotationPolicy::take(&mut parameters)
    }

    #[test]
    fn rotation_durations_read_like_kubernetes_ones() {
        let overlap = |value| policy(&[("rotationOverlap", value)]).map(|p| p.overlap);
        assert_eq!(overlap("1.5h"), Ok(HOUR + HOUR / 2));
        assert_eq!(overlap("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(overlap("2h45m30.5s"), Ok(Duration::from_millis(9_930_500)));
        let negative = overlap("-1h").unwrap_err();
        assert!(
            negative.contains("rotationOverlap") && negative.contains("negative"),
            "{negative}"
        );
        assert!(overlap("-0s").unwrap_err().contains("longer than 0"));
    }

    #[test]
    fn rotation_durations_beyond_a_hundred_years_are_refused_naming_the_limit() {
        let longest = policy(&[("rotationPeriod", "876000h"), ("rotationOverlap", "876000h")]);
        let both = RotationPolicy { period: Some(LONGEST_DURATION), overlap: LONGEST_DURATION };
        assert_eq!(longest, Ok(both));
        for name in ["rotationPeriod", "rotationOverlap"] {
            for long in ["876000h0.000000001s", "876001h", "99999999h", "9999999999999999999999h"] {
                let refused = policy(&[(name, long)]).unwrap_err();
                assert!(
                    refused.contains(name) && refused.contains("876000h (100 years)"),
                    "{name} {long}: {refused}"
                );
            }
        }
    }

    #[test]
    fn an_overlap_is_counted_in_full_or_not_at_all() {
        let now = at("2026-01-01T00:00:00Z");
        assert_eq!(overlap_end(now, HOUR), Some(at("2026-01-01T01:00:00Z")));
        let far = overlap_end(now, LONGEST_DURATION).unwrap();
        assert_eq!(now.duration_until(far), SignedDuration::try_from(LONGEST_DURATION).unwrap());
        assert_eq!(overlap_end(Timestamp::MAX, Duration::from_nanos(1)), None);
        assert_eq!(overlap_end(now, Duration::MAX), None);
    }

    #[test]
    fn the_policy_is_taken_out_of_the_parameters_with_a_default_overlap() {
        let mut parameters: BTreeMap<String, String> =
            [("rotationPeriod", "720h"), ("region", "x")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let policy = RotationPolicy::take(&mut parameters).unwrap();
        assert_eq!(policy, RotationPolicy { period: Some(720 * HOUR), overlap: HOUR });
        assert_eq!(parameters.keys().collect::<Vec<_>>(), ["region"]);
        let mut zero = BTreeMap::from([("rotationOverlap".to_string(), "0s".to_string())]);
        assert!(RotationPolicy::take(&mut zero).unwrap_err().contains("rotationOverlap"));
        let mut bad = BTreeMap::from([("rotationPeriod".to_string(), "monthly".to_string())]);
        assert!(RotationPolicy::take(&mut bad).unwrap_err().contains("rotationPeriod"));
    }

    #[test]
    fn a_new_request_value_starts_a_rotation_and_the_same_one_does_not() {
        let record = RotationRecord { handled: "t1".into(), ..Default::default() };
        let ob = bucket("2026-01-01T00:00:00Z", Some(&record));
        let now = at("2026-01-02T00:00:00Z");
        assert_eq!(next(&record, &ob, Some("t1"), None, now), Next::Wait(None));
        assert_eq!(next(&record, &ob, None, None, now), Next::Wait(None));
        assert_eq!(next(&record, &ob, Some("t2"), None, now), Next::Start("t2".into()));
        // Claims without a record: any request counts.
        let fresh = RotationRecord::default();
        assert_eq!(next(&fresh, &ob, Some("x"), None, now), Next::Start("x".into()));
    }

    #[test]
    fn the_period_counts_from_the_last_key_or_the_object_bucket() {
        let ob = bucket("2026-01-01T00:00:00Z", None);
        let none = RotationRecord::default();
        let period = Some(24 * HOUR);
        let due = at("2026-01-02T00:00:00Z");
        assert_eq!(
            next(&none, &ob, None, period, at("2026-01-01T12:00:00Z")),
            Next::Wait(Some(due))
        );
        assert_eq!(next(&none, &ob, None, period, due), Next::Start(String::new()));
        let rotated =
            RotationRecord { created_at: Some(at("2026-01-05T00:00:00Z")), ..Default::default() };
        let later = at("2026-01-06T00:00:00Z");
        assert_eq!(
            next(&rotated, &ob, None, period, at("2026-01-05T01:00:00Z")),
            Next::Wait(Some(later))
        );
    }

    #[test]
    fn steps_under_way_go_on_and_the_overlap_holds_back_every_new_rotation() {
        let ob = bucket("2026-01-01T00:00:00Z", None);
        let now = at("2026-01-03T00:00:00Z");
        let issuing = RotationRecord { step: Step::Issuing, ..Default::default() };
        assert_eq!(next(&issuing, &ob, None, None, now), Next::Issue);
        let issued = RotationRecord { step: Step::Issued, ..Default::default() };
        assert_eq!(next(&issued, &ob, Some("new"), None, now), Next::CheckIssued);
        let expires = at("2026-01-03T01:00:00Z");
        let overlap = RotationRecord {
            step: Step::Overlap,
            handled: "a".into(),
            previous_expires_at: Some(expires),
            ..Default::default()
        };
        // A new request and a due period both wait: a third key never exists.
        assert_eq!(next(&overlap, &ob, Some("b"), Some(HOUR), now), Next::Wait(Some(expires)));
        assert_eq!(next(&overlap, &ob, Some("b"), None, expires), Next::Retire);
    }

    #[test]
    fn the_status_shows_the_key_age_and_the_previous_expiry_only_for_rotating_claims() {
        let plain = bucket("2026-01-01T00:00:00Z", None);
        assert_eq!(credentials_status(&plain, &RotationPolicy::default()), None);
        let scheduled = RotationPolicy { period: Some(HOUR), ..Default::default() };
        let status = credentials_status(&plain, &scheduled).unwrap();
        assert_eq!(status.created_at, Some(Time(at("2026-01-01T00:00:00Z"))));
        assert_eq!(status.previous_expires_at, None);
        let record = RotationRecord {
            step: Step::Overlap,
            created_at: Some(at("2026-01-02T00:00:00Z")),
            previous_expires_at: Some(at("2026-01-02T01:00:00Z")),
            ..Default::default()
        };
        let rotated = bucket("2026-01-01T00:00:00Z", Some(&record));
        let status = credentials_status(&rotated, &RotationPolicy::default()).unwrap();
        assert_eq!(status.created_at, Some(Time(at("2026-01-02T00:00:00Z"))));
        assert_eq!(status.previous_expires_at, Some(Time(at("2026-01-02T01:00:00Z"))));
    }

    #[test]
    fn a_claim_created_with_a_request_has_it_taken_up_already() {
        let mut claim = ObjectBucketClaim::new("c", Default::default());
        assert_eq!(RotationRecord::initial(&claim), None);
        claim.metadata.annotations =
            Some([(annotations::ROTATE_CREDENTIALS.to_owned(), "t0".to_owned())].into());
        let json = RotationRecord::initial(&claim).unwrap();
        let record: RotationRecord = serde_json::from_str(&json).unwrap();
        let ob = bucket("2026-01-01T00:00:00Z", Some(&record));
        assert_eq!(
            next(&record, &ob, Some("t0"), None, at("2026-02-01T00:00:00Z")),
            Next::Wait(None)
        );
    }

    #[test]
    fn waits_end_just_after_the_deadline_and_never_beyond_a_day() {
        let now = at("2026-01-01T00:00:00Z");
        assert_eq!(wait_for(None, now), None);
        assert_eq!(wait_for(Some(at("2026-01-01T00:00:10Z")), now), Some(Duration::from_secs(11)));
        assert_eq!(wait_for(Some(at("2025-12-31T00:00:00Z")), now), Some(Duration::from_secs(1)));
        assert_eq!(wait_for(Some(at("2026-03-01T00:00:00Z")), now), Some(LONGEST_WAIT));
    }

    #[test]
    fn a_request_token_of_any_size_is_recorded_in_a_few_bytes() {
        // JSON writes each of these in six bytes: raw, 60 000 of them overflow the 256 KiB an
        // ObjectBucket's annotations may hold, and the claim could never bind.
        let token = "\u{1}".repeat(60_000);
        let mut claim = ObjectBucketClaim::new("c", Default::default());
        claim.metadata.annotations =
            Some([(annotations::ROTATE_CREDENTIALS.to_owned(), token.clone())].into());
        let json = RotationRecord::initial(&claim).unwrap();
        assert!(json.len() < 200, "{} bytes", json.len());
        let record: RotationRecord = serde_json::from_str(&json).unwrap();
        let ob = bucket("2026-01-01T00:00:00Z", Some(&record));
        let now = at("2026-02-01T00:00:00Z");
        assert_eq!(next(&record, &ob, Some(token.as_str()), None, now), Next::Wait(None));
        let other = format!("{token}x");
        assert_eq!(
            next(&record, &ob, Some(other.as_str()), None, now),
            Next::Start(recorded_token(&other))
        );
    }

    proptest::proptest! {
        /// The request token is opaque: any value but the one taken up (or none) starts a
        /// rotation; what is recorded is small, reads back through the annotation, and counts
        /// as that token taken up.
        #[test]
        fn only_a_new_request_token_starts_a_rotation(
            handled in proptest::prop_oneof![proptest::prelude::any::<String>(), "[ab]{0,2}"],
            asked in proptest::prop_oneof![
                proptest::prelude::any::<String>(),
                "[ab]{0,2}",
                "[ -~]{120,140}",
            ],
        ) {
            let record = RotationRecord { handled: handled.clone(), ..Default::default() };
            let ob = bucket("2026-01-01T00:00:00Z", Some(&record));
            proptest::prop_assert_eq!(RotationRecord::of(&ob), Some(record.clone()));
            let mut claim = ObjectBucketClaim::new("c", Default::default());
            claim.metadata.annotations =
                Some([(annotations::ROTATE_CREDENTIALS.to_owned(), asked.clone())].into());
            let now = at("2026-02-01T00:00:00Z");
            let taken = next(&record, &ob, requested(&claim), None, now);
            if asked.is_empty() || asked == handled {
                proptest::prop_assert_eq!(taken, Next::Wait(None));
                return Ok(());
            }
            let recorded = recorded_token(&asked);
            proptest::prop_assert!(recorded.len() <= 128 || recorded.len() == 71, "{}", recorded);
            proptest::prop_assert_eq!(taken, Next::Start(recorded.clone()));
            let after = RotationRecord { handled: recorded, ..Default::default() };
            let ob = bucket("2026-01-01T00:00:00Z", Some(&after));
            let read_back = RotationRecord::of(&ob).unwrap();
            let again = next(&read_back, &ob, Some(asked.as_str()), None, now);
            proptest::prop_assert_eq!(again, Next::Wait(None));
        }
    }
}
