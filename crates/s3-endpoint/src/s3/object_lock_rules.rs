//! Object lock between the wire and the store: the `x-amz-object-lock-*` headers of a write,
//! the retention, legal hold and configuration documents, and their answers, checked the way S3
//! checks them (the store decides what they may change).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use s3s::dto::{
    DefaultRetention as WireDefault, ObjectLockConfiguration, ObjectLockEnabled,
    ObjectLockLegalHold, ObjectLockLegalHoldStatus, ObjectLockMode, ObjectLockRetention,
    ObjectLockRetentionMode, ObjectLockRule, Timestamp,
};
use s3s::{S3Error, S3ErrorCode, S3Result, s3_error};

use crate::store::{
    BucketLock, DefaultRetention, LockMode, ObjectLock, Retention, RetentionPeriod,
    check_new_retention, unix_ms,
};

/// S3's error for a default retention period that is not a positive number of days or years
/// (`s3s` has no code of its own for it).
const INVALID_RETENTION_PERIOD: &str = "InvalidRetentionPeriod";

/// Milliseconds since the Unix epoch of a wire date (0 before it).
fn ms_of(date: &Timestamp) -> u64 {
    let time = time::OffsetDateTime::from(date.clone());
    u64::try_from(time.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

/// The wire date of `ms` milliseconds since the Unix epoch.
pub(super) fn date_of(ms: u64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(ms))
}

fn mode_of(name: &str) -> S3Result<LockMode> {
    LockMode::parse(name).ok_or_else(|| s3_error!(InvalidArgument, "Unknown wormMode directive."))
}

/// The lock a write's `x-amz-object-lock-mode`, `-retain-until-date` and `-legal-hold`
/// headers ask for: mode and date come together, the date is in the future, the hold is `ON`
/// or `OFF`.
pub(super) fn lock_of_headers(
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    legal_hold: Option<&ObjectLockLegalHoldStatus>,
) -> S3Result<ObjectLock> {
    let retention = match (mode, until) {
        (None, None) => None,
        (Some(mode), Some(until)) => {
            let retention = Retention { mode: mode_of(mode.as_str())?, until_ms: ms_of(until) };
            check_new_retention(&retention, unix_ms(SystemTime::now()))
                .map_err(|m| s3_error!(InvalidArgument, "{m}"))?;
            Some(retention)
        }
        _ => {
            return Err(s3_error!(
                InvalidArgument,
                "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be \
                 supplied"
            ));
        }
    };
    let legal_hold_set = legal_hold.is_some();
    let legal_hold = match legal_hold.map(ObjectLockLegalHoldStatus::as_str) {
        None | Some(ObjectLockLegalHoldStatus::OFF) => false,
        Some(ObjectLockLegalHoldStatus::ON) => true,
        Some(_) => {
            return Err(s3_error!(InvalidArgument, "Legal Hold must be either of 'ON' or 'OFF'"));
        }
    };
    Ok(ObjectLock { retention, legal_hold, legal_hold_set })
}

/// The retention a PutObjectRetention document sets: `None` (both fields absent) removes it.
/// The date's future is the store's to check, with the change.
pub(super) fn retention_of(doc: Option<ObjectLockRetention>) -> S3Result<Option<Retention>> {
    let doc = doc.unwrap_or_default();
    match (doc.mode, doc.retain_until_date) {
        (None, None) => Ok(None),
        (Some(mode), Some(until)) => {
            Ok(Some(Retention { mode: mode_of(mode.as_str())?, until_ms: ms_of(&until) }))
        }
        _ => Err(s3_error!(
            MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published \
             schema: a retention needs both Mode and RetainUntilDate"
        )),
    }
}

/// The wire form of a retention.
pub(super) fn retention_doc(retention: &Retention) -> ObjectLockRetention {
    ObjectLockRetention {
        mode: Some(ObjectLockRetentionMode::from(retention.mode.as_str().to_owned())),
        retain_until_date: Some(date_of(retention.until_ms)),
    }
}

/// Whether a PutObjectLegalHold document puts the hold on.
pub(super) fn legal_hold_of(doc: Option<ObjectLockLegalHold>) -> S3Result<bool> {
    match doc.and_then(|d| d.status).as_ref().map(ObjectLockLegalHoldStatus::as_str) {
        Some(ObjectLockLegalHoldStatus::ON) => Ok(true),
        Some(ObjectLockLegalHoldStatus::OFF) => Ok(false),
        _ => Err(s3_error!(
            MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published \
             schema: Status must be ON or OFF"
        )),
    }
}

/// The wire form of a legal hold.
pub(super) fn legal_hold_status(on: bool) -> ObjectLockLegalHoldStatus {
    let status = if on { ObjectLockLegalHoldStatus::ON } else { ObjectLockLegalHoldStatus::OFF };
    ObjectLockLegalHoldStatus::from_static(status)
}

/// The default retention a PutObjectLockConfiguration document sets: `ObjectLockEnabled` must
/// say `Enabled`; a rule has a mode and exactly one of days and years, positive. As S3 answers:
/// a document breaking the schema (another status or mode, both or neither period) is
/// `MalformedXML`, a period of zero or less `InvalidRetentionPeriod`.
pub(super) fn default_of(
    doc: Option<ObjectLockConfiguration>,
) -> S3Result<Option<DefaultRetention>> {
    let malformed = |why: &str| {
        s3_error!(
            MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published \
             schema: {why}"
        )
    };
    let doc = doc.ok_or_else(|| malformed("an ObjectLockConfiguration is required"))?;
    if doc.object_lock_enabled.as_ref().map(ObjectLockEnabled::as_str)
        != Some(ObjectLockEnabled::ENABLED)
    {
        return Err(malformed("ObjectLockEnabled must be Enabled"));
    }
    let Some(rule) = doc.rule else { return Ok(None) };
    let Some(wire) = rule.default_retention else {
        return Err(malformed("a Rule needs a DefaultRetention"));
    };
    // In the document the mode is a schema value: anything else is not well-formed XML.
    let mode = wire.mode.as_ref().ok_or_else(|| malformed("DefaultRetention needs a Mode"))?;
    let mode = LockMode::parse(mode.as_str())
        .ok_or_else(|| malformed("Mode must be GOVERNANCE or COMPLIANCE"))?;
    let positive = |n: i32| {
        u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
            let mut error = S3Error::with_message(
                S3ErrorCode::Custom(INVALID_RETENTION_PERIOD.into()),
                "Default retention period must be a positive integer value",
            );
            error.set_status_code(http::StatusCode::BAD_REQUEST);
            error
        })
    };
    let period = match (wire.days, wire.years) {
        (Some(days), None) => RetentionPeriod::Days(positive(days)?),
        (None, Some(years)) => RetentionPeriod::Years(positive(years)?),
        _ => return Err(malformed("DefaultRetention needs exactly one of Days and Years")),
    };
    let default = DefaultRetention { mode, period };
    default.check().map_err(|m| s3_error!(InvalidArgument, "{m}"))?;
    Ok(Some(default))
}

/// The wire form of a bucket's object lock configuration.
pub(super) fn config_doc(config: &BucketLock) -> ObjectLockConfiguration {
    let rule = config.default_retention.map(|d| {
        let (days, years) = match d.period {
            RetentionPeriod::Days(n) => (i32::try_from(n).ok(), None),
            RetentionPeriod::Years(n) => (None, i32::try_from(n).ok()),
        };
        ObjectLockRule {
            default_retention: Some(WireDefault {
                days,
                years,
                mode: Some(ObjectLockRetentionMode::from(d.mode.as_str().to_owned())),
            }),
        }
    });
    ObjectLockConfiguration {
        object_lock_enabled: Some(ObjectLockEnabled::from_static(ObjectLockEnabled::ENABLED)),
        rule,
    }
}

/// The `x-amz-object-lock-*` answer fields of an object's lock: mode, date, hold status.
pub(super) fn lock_fields(
    lock: &ObjectLock,
) -> (Option<ObjectLockMode>, Option<Timestamp>, Option<ObjectLockLegalHoldStatus>) {
    let mode = lock.retention.map(|r| ObjectLockMode::from(r.mode.as_str().to_owned()));
    let until = lock.retention.map(|r| date_of(r.until_ms));
    let hold = (lock.legal_hold || lock.legal_hold_set).then(|| legal_hold_status(lock.legal_hold));
    (mode, until, hold)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn future_ms() -> u64 {
        unix_ms(SystemTime::now()) + 86_400_000
    }

    #[test]
    fn headers_need_mode_and_date_together_a_future_date_and_a_known_hold() {
        let mode = ObjectLockMode::from_static(ObjectLockMode::GOVERNANCE);
        let until = date_of(future_ms());
        let lock = lock_of_headers(Some(&mode), Some(&until), None).unwrap();
        assert_eq!(lock.retention.map(|r| r.mode), Some(LockMode::Governance));
        assert!(lock_of_headers(Some(&mode), None, None).is_err());
        assert!(lock_of_headers(None, Some(&until), None).is_err());
        let past = date_of(1000);
        let err = lock_of_headers(Some(&mode), Some(&past), None).unwrap_err();
        assert!(err.message().unwrap_or_default().contains("future"), "{err:?}");
        let odd = ObjectLockMode::from("governance".to_owned());
        assert!(lock_of_headers(Some(&odd), Some(&until), None).is_err());
        let on = ObjectLockLegalHoldStatus::from_static(ObjectLockLegalHoldStatus::ON);
        assert!(lock_of_headers(None, None, Some(&on)).unwrap().legal_hold);
        let bad = ObjectLockLegalHoldStatus::from("on".to_owned());
        assert!(lock_of_headers(None, None, Some(&bad)).is_err());
        assert!(lock_of_headers(None, None, None).unwrap().is_none());
    }

    #[test]
    fn configuration_documents_round_trip_and_bad_ones_are_refused() {
        let default =
            DefaultRetention { mode: LockMode::Compliance, period: RetentionPeriod::Years(3) };
        let doc = config_doc(&BucketLock { default_retention: Some(default), ceiling: None });
        assert_eq!(default_of(Some(doc)).unwrap(), Some(default));
        let enabled_only = config_doc(&BucketLock::default());
        assert_eq!(default_of(Some(enabled_only.clone())).unwrap(), None);
        assert!(default_of(None).is_err());
        let disabled = ObjectLockConfiguration { object_lock_enabled: None, ..enabled_only };
        assert!(default_of(Some(disabled)).is_err());
        let with = |days, years, mode: Option<&'static str>| ObjectLockConfiguration {
            object_lock_enabled: Some(ObjectLockEnabled::from_static(ObjectLockEnabled::ENABLED)),
            rule: Some(ObjectLockRule {
                default_retention: Some(WireDefault {
                    days,
                    years,
                    mode: mode.map(ObjectLockRetentionMode::from_static),
                }),
            }),
        };
        for (days, years, mode, code) in [
            (Some(1), Some(1), Some("GOVERNANCE"), "MalformedXML"),
            (None, None, Some("GOVERNANCE"), "MalformedXML"),
            (Some(0), None, Some("GOVERNANCE"), "InvalidRetentionPeriod"),
            (Some(-3), None, Some("GOVERNANCE"), "InvalidRetentionPeriod"),
            (None, Some(-1), Some("GOVERNANCE"), "InvalidRetentionPeriod"),
            (None, Some(101), Some("GOVERNANCE"), "InvalidArgument"),
            (Some(1), None, None, "MalformedXML"),
            (Some(1), None, Some("NONE"), "MalformedXML"),
            (None, Some(1), Some("governance"), "MalformedXML"),
        ] {
            let err = default_of(Some(with(days, years, mode))).unwrap_err();
            assert_eq!(err.code().as_str(), code, "{days:?} {years:?} {mode:?}");
            assert_eq!(err.status_code(), Some(http::StatusCode::BAD_REQUEST), "{code}");
        }
    }

    proptest! {
        /// Whatever a tenant writes in a configuration, it is refused with an error or read
        /// back exactly as the bucket then shows it; never a panic.
        #[test]
        fn any_configuration_is_refused_or_round_trips(
            days in proptest::option::of(any::<i32>()),
            years in proptest::option::of(any::<i32>()),
            mode in proptest::option::of("\\PC{0,12}|GOVERNANCE|COMPLIANCE"),
        ) {
            let doc = ObjectLockConfiguration {
                object_lock_enabled: Some(ObjectLockEnabled::from_static(ObjectLockEnabled::ENABLED)),
                rule: Some(ObjectLockRule {
                    default_retention: Some(WireDefault {
                        days,
                        years,
                        mode: mode.map(ObjectLockRetentionMode::from),
                    }),
                }),
            };
            if let Ok(Some(default)) = default_of(Some(doc)) {
                let shown = config_doc(&BucketLock { default_retention: Some(default), ceiling: None });
                prop_assert_eq!(default_of(Some(shown)).unwrap(), Some(default));
            }
        }

        /// Any retention document is refused or keeps its mode and date to the millisecond.
        #[test]
        fn any_retention_document_is_refused_or_kept(
            mode in proptest::option::of("\\PC{0,12}|GOVERNANCE|COMPLIANCE"),
            until in proptest::option::of(0u64..8_000_000_000_000),
        ) {
            let doc = ObjectLockRetention {
                mode: mode.map(ObjectLockRetentionMode::from),
                retain_until_date: until.map(date_of),
            };
            if let Ok(Some(retention)) = retention_of(Some(doc)) {
                prop_assert_eq!(Some(retention.until_ms), until);
                prop_assert_eq!(retention_of(Some(retention_doc(&retention))).unwrap(), Some(retention));
            }
        }
    }
}
