//! Plan: a claim's going decided from its record and the backend's answer alone (no I/O): whether
//! the bucket goes, what becomes of the ObjectBucket, and what the Event says. [`super::apply`]
//! asks the backend, applies this, and publishes the Event.

use bucket_api::{ObjectBucket, ObjectBucketPhase, ReclaimPolicy};
use kube::runtime::events::EventType;

use crate::bucket::error::{Error, Failure, Operation};
use crate::bucket::objects::BucketSource;
use crate::{BackendError, Removed};

/// Whether a claim's going takes its bucket with it: made for the claim, under `Delete`.
pub(crate) fn deletes_bucket(record: &ObjectBucket, source: BucketSource) -> bool {
    source == BucketSource::New && record.spec.reclaim_policy == Some(ReclaimPolicy::Delete)
}

/// What becomes of the ObjectBucket once the backend answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    /// Let go and deleted: nothing is left to describe.
    Delete,
    /// Left in this phase, with this reason and message, without our finalizer.
    Release(ObjectBucketPhase, String, String),
    /// Left alone (there is none: the claim's own record stood in for it).
    Untouched,
}

/// What a claim's going ends with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settled {
    /// What becomes of the ObjectBucket.
    pub(crate) record: Record,
    /// The Event's type.
    pub(crate) type_: EventType,
    /// The Event's reason.
    pub(crate) reason: String,
    /// The Event's message, also logged.
    pub(crate) message: String,
}

/// How a claim's going went, from the backend's `outcome` for `bucket`: asked to delete it
/// (`delete_bucket`) or to revoke access, with a `real_record` ObjectBucket or the claim's own.
/// A transient failure is the error to retry on.
pub(crate) fn settled(
    bucket: &str,
    (operation, outcome): (Operation, Result<Removed, BackendError>),
    (source, delete_bucket, real_record): (BucketSource, bool, bool),
) -> Result<Settled, Error> {
    let on_record = |record: Record| if real_record { record } else { Record::Untouched };
    let (record, type_, reason, message) = match outcome {
        Ok(Removed::Bucket) => (
            Record::Delete,
            EventType::Normal,
            "Deleted".into(),
            format!("deleted bucket {bucket:?}"),
        ),
        Ok(Removed::AccessOnly) if delete_bucket => {
            let message = format!(
                "the backend's records do not show this claim creating bucket {bucket:?} under \
                 the Delete policy, so only the claim's access was revoked and the bucket was kept"
            );
            let release =
                Record::Release(ObjectBucketPhase::Failed, "BucketKept".into(), message.clone());
            (release, EventType::Warning, "BucketKept".into(), message)
        }
        Ok(Removed::AccessOnly) => {
            // A retained bucket stays on record as Released; access to a bucket that was never
            // the claim's leaves nothing to describe.
            let record = match source {
                BucketSource::New => Record::Release(
                    ObjectBucketPhase::Released,
                    "Released".into(),
                    "claim deleted; the bucket was retained".into(),
                ),
                BucketSource::Existing => Record::Delete,
            };
            let message =
                format!("revoked the claim's access to bucket {bucket:?}; the bucket was kept");
            (record, EventType::Normal, "Revoked".into(), message)
        }
        Err(error @ BackendError::Permanent { .. }) => {
            let bucket = bucket.to_owned();
            let failure = Error::Backend { operation, bucket, source: error, hint: "" };
            let message = format!("{failure}; the bucket was left behind for manual cleanup");
            let reason = failure.reason().to_string();
            let release =
                Record::Release(ObjectBucketPhase::Failed, reason.clone(), message.clone());
            (release, EventType::Warning, reason, message)
        }
        Err(source) => {
            return Err(Error::Backend { operation, bucket: bucket.into(), source, hint: "" });
        }
    };
    Ok(Settled { record: on_record(record), type_, reason, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: BucketSource = BucketSource::New;
    const EXISTING: BucketSource = BucketSource::Existing;

    fn record(policy: ReclaimPolicy) -> ObjectBucket {
        let mut bucket = ObjectBucket::new("ob", Default::default());
        bucket.spec.reclaim_policy = Some(policy);
        bucket
    }

    fn permanent() -> BackendError {
        BackendError::Permanent { reason: "AccessDenied".into(), message: "no".into() }
    }

    #[test]
    fn only_a_bucket_made_for_the_claim_under_delete_goes_with_it() {
        assert!(deletes_bucket(&record(ReclaimPolicy::Delete), NEW));
        assert!(!deletes_bucket(&record(ReclaimPolicy::Retain), NEW));
        assert!(!deletes_bucket(&record(ReclaimPolicy::Delete), EXISTING));
        assert!(!deletes_bucket(&ObjectBucket::new("ob", Default::default()), NEW));
    }

    #[test]
    fn a_deleted_bucket_takes_its_object_bucket_along() {
        let done = settled("b", (Operation::Delete, Ok(Removed::Bucket)), (NEW, true, true));
        let done = done.unwrap();
        assert_eq!((done.record, done.type_), (Record::Delete, EventType::Normal));
        assert_eq!(
            (done.reason.as_str(), done.message.as_str()),
            ("Deleted", "deleted bucket \"b\"")
        );
    }

    #[test]
    fn a_bucket_the_backend_keeps_is_a_warning_and_a_failed_record() {
        let outcome = (Operation::Delete, Ok(Removed::AccessOnly));
        let done = settled("b", outcome, (NEW, true, true)).unwrap();
        assert_eq!((done.type_, done.reason.as_str()), (EventType::Warning, "BucketKept"));
        let Record::Release(phase, reason, message) = done.record else { panic!("released") };
        assert_eq!((phase, reason.as_str()), (ObjectBucketPhase::Failed, "BucketKept"));
        assert_eq!(message, done.message);
    }

    #[test]
    fn a_retained_bucket_stays_on_record_and_a_granted_one_leaves_nothing() {
        let outcome = || (Operation::Revoke, Ok(Removed::AccessOnly));
        let retained = settled("b", outcome(), (NEW, false, true)).unwrap();
        assert_eq!(
            retained.record,
            Record::Release(
                ObjectBucketPhase::Released,
                "Released".into(),
                "claim deleted; the bucket was retained".into()
            )
        );
        assert_eq!((retained.type_, retained.reason.as_str()), (EventType::Normal, "Revoked"));
        let granted = settled("b", outcome(), (EXISTING, false, true)).unwrap();
        assert_eq!(granted.record, Record::Delete);
    }

    #[test]
    fn without_an_object_bucket_nothing_is_written_but_the_event() {
        let done = settled("b", (Operation::Delete, Ok(Removed::Bucket)), (NEW, true, false));
        assert_eq!(done.unwrap().record, Record::Untouched);
        let failed = settled("b", (Operation::Delete, Err(permanent())), (NEW, true, false));
        assert_eq!(failed.unwrap().record, Record::Untouched);
    }

    #[test]
    fn a_permanent_failure_leaves_a_failed_record_and_a_transient_one_is_retried() {
        let failed =
            settled("b", (Operation::Delete, Err(permanent())), (NEW, true, true)).unwrap();
        assert_eq!(failed.type_, EventType::Warning);
        assert!(failed.message.ends_with("left behind for manual cleanup"), "{}", failed.message);
        assert!(matches!(&failed.record, Record::Release(ObjectBucketPhase::Failed, reason, _)
                if *reason == failed.reason));
        let transient = BackendError::Transient { message: "timeout".into() };
        let retried = settled("b", (Operation::Delete, Err(transient)), (NEW, true, true));
        assert!(matches!(retried, Err(Error::Backend { operation: Operation::Delete, .. })));
    }
}
