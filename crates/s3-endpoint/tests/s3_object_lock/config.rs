//! Buckets created with object lock (and only those) have a lock configuration: enabled at
//! CreateBucket by the operator, refused on a bucket created without it, with a default
//! retention every new object gets (plain, copied or uploaded in parts) unless its write names
//! its own; lock headers on a bucket without lock, and malformed rules, refused as S3 does.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketVersioningStatus, CompletedMultipartUpload, CompletedPart, DefaultRetention,
    ObjectLockConfiguration, ObjectLockEnabled, ObjectLockLegalHoldStatus, ObjectLockMode,
    ObjectLockRetentionMode, ObjectLockRule, VersioningConfiguration,
};

use s3_endpoint::store::KeyMode;

use super::{ADMIN_ID, ADMIN_SECRET, DAY, in_days, lock_bucket, put};
use crate::common::{Server, code, status};

fn config(
    mode: ObjectLockRetentionMode,
    days: Option<i32>,
    years: Option<i32>,
) -> ObjectLockConfiguration {
    let default = DefaultRetention::builder().mode(mode).set_days(days).set_years(years).build();
    ObjectLockConfiguration::builder()
        .object_lock_enabled(ObjectLockEnabled::Enabled)
        .rule(ObjectLockRule::builder().default_retention(default).build())
        .build()
}

/// Seconds from now until `date`.
fn secs_until(date: &aws_sdk_s3::primitives::DateTime) -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    date.secs() - now.as_secs() as i64
}

#[tokio::test]
async fn the_operator_creates_a_lock_bucket_whose_default_new_objects_get() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, admin) = Server::start_with_admin(tmp.path(), ADMIN_ID, ADMIN_SECRET).await;
    admin
        .create_bucket()
        .bucket("locked")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();
    let got = admin.get_object_lock_configuration().bucket("locked").send().await.unwrap();
    let got = got.object_lock_configuration().unwrap();
    assert_eq!(got.object_lock_enabled(), Some(&ObjectLockEnabled::Enabled));
    assert!(got.rule().is_none(), "no default until one is set");
    // It is versioned, for good.
    let versioning = admin.get_bucket_versioning().bucket("locked").send().await.unwrap();
    assert_eq!(versioning.status(), Some(&BucketVersioningStatus::Enabled));
    let suspend = VersioningConfiguration::builder().status(BucketVersioningStatus::Suspended);
    let refused = admin.put_bucket_versioning().bucket("locked");
    let refused = refused.versioning_configuration(suspend.build()).send().await.unwrap_err();
    assert_eq!((code(&refused).as_str(), status(&refused)), ("InvalidBucketState", Some(409)));
    // Creating it again (a retry) keeps it.
    admin
        .create_bucket()
        .bucket("locked")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();

    let put_config = admin.put_object_lock_configuration().bucket("locked");
    let governance = config(ObjectLockRetentionMode::Governance, Some(1), None);
    put_config.object_lock_configuration(governance.clone()).send().await.unwrap();
    let got = admin.get_object_lock_configuration().bucket("locked").send().await.unwrap();
    assert_eq!(got.object_lock_configuration(), Some(&governance));

    put(&admin, "locked", "defaulted", None).await.unwrap();
    let head = admin.head_object().bucket("locked").key("defaulted").send().await.unwrap();
    assert_eq!(head.object_lock_mode(), Some(&ObjectLockMode::Governance));
    let left = secs_until(head.object_lock_retain_until_date().unwrap());
    assert!((DAY.as_secs() as i64 - 60..=DAY.as_secs() as i64).contains(&left), "{left}");
    assert_eq!(head.object_lock_legal_hold_status(), None);
    let got = admin.get_object_retention().bucket("locked").key("defaulted").send().await.unwrap();
    assert_eq!(got.retention().unwrap().mode(), Some(&ObjectLockRetentionMode::Governance));

    // Its own retention and hold win over the default, on a PUT, a copy and an upload.
    let own = (ObjectLockMode::Compliance, in_days(3));
    put(&admin, "locked", "own", Some(own.clone())).await.unwrap();
    let copy = admin.copy_object().bucket("locked").key("copied").copy_source("locked/own");
    let copy = copy.object_lock_legal_hold_status(ObjectLockLegalHoldStatus::On);
    copy.send().await.unwrap();
    let upload = admin.create_multipart_upload().bucket("locked").key("parts");
    let upload = upload.object_lock_mode(own.0.clone()).object_lock_retain_until_date(own.1);
    let id = upload.send().await.unwrap().upload_id().unwrap().to_owned();
    let part = admin.upload_part().bucket("locked").key("parts").upload_id(&id).part_number(1);
    let etag = part.body(ByteStream::from_static(b"part")).send().await.unwrap().e_tag.unwrap();
    let done = CompletedMultipartUpload::builder()
        .parts(CompletedPart::builder().part_number(1).e_tag(etag).build())
        .build();
    let complete = admin.complete_multipart_upload().bucket("locked").key("parts");
    complete.upload_id(id).multipart_upload(done).send().await.unwrap();
    for (key, mode, hold) in [
        ("own", ObjectLockMode::Compliance, None),
        ("copied", ObjectLockMode::Governance, Some(ObjectLockLegalHoldStatus::On)),
        ("parts", ObjectLockMode::Compliance, None),
    ] {
        let head = admin.head_object().bucket("locked").key(key).send().await.unwrap();
        assert_eq!(head.object_lock_mode(), Some(&mode), "{key}");
        assert_eq!(head.object_lock_legal_hold_status(), hold.as_ref(), "{key}");
        let get = admin.get_object().bucket("locked").key(key).send().await.unwrap();
        assert_eq!(get.object_lock_mode(), Some(&mode), "{key}");
    }
    let head = admin.head_object().bucket("locked").key("own").send().await.unwrap();
    assert_eq!(head.object_lock_retain_until_date(), Some(&own.1));
}

#[tokio::test]
async fn a_bucket_created_without_lock_never_gets_it_and_refuses_lock_headers() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = Server::start_with_admin(tmp.path(), ADMIN_ID, ADMIN_SECRET).await;
    admin.create_bucket().bucket("plain").send().await.unwrap();
    let none = admin.get_object_lock_configuration().bucket("plain").send().await.unwrap_err();
    assert_eq!(
        (code(&none).as_str(), status(&none)),
        ("ObjectLockConfigurationNotFoundError", Some(404))
    );
    let put_config = admin.put_object_lock_configuration().bucket("plain");
    let config = config(ObjectLockRetentionMode::Compliance, Some(1), None);
    let refused = put_config.object_lock_configuration(config).send().await.unwrap_err();
    assert_eq!((code(&refused).as_str(), status(&refused)), ("InvalidBucketState", Some(409)));
    let again = admin.create_bucket().bucket("plain").object_lock_enabled_for_bucket(true);
    let refused = again.send().await.unwrap_err();
    assert_eq!(code(&refused), "InvalidBucketState");
    assert_eq!(
        put(&admin, "plain", "k", Some((ObjectLockMode::Governance, super::in_days(1)))).await,
        Err("InvalidRequest".to_owned())
    );
    let hold = admin.put_object().bucket("plain").key("k").body(ByteStream::from_static(b"x"));
    let refused = hold.object_lock_legal_hold_status(ObjectLockLegalHoldStatus::On).send().await;
    assert_eq!(code(&refused.unwrap_err()), "InvalidRequest");
    put(&admin, "plain", "k", None).await.unwrap();
    let refused = admin.get_object_retention().bucket("plain").key("k").send().await.unwrap_err();
    assert_eq!(code(&refused), "InvalidRequest");
    let err = admin.head_object().bucket("plain").key("k").send().await.unwrap();
    assert_eq!(err.object_lock_mode(), None);
    assert_eq!(server.store.bucket_object_lock("plain").await.unwrap(), None);
}

#[tokio::test]
async fn bad_rules_and_dates_are_refused_as_s3_refuses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let (owner, _) = lock_bucket(&server, "rules").await;
    let s3 = server.client(&owner);
    for (days, years, expected) in [
        (Some(1), Some(1), "MalformedXML"),
        (None, None, "MalformedXML"),
        (Some(0), None, "InvalidRetentionPeriod"),
        (None, Some(101), "InvalidArgument"),
    ] {
        let config = config(ObjectLockRetentionMode::Governance, days, years);
        let put_config = s3.put_object_lock_configuration().bucket("rules");
        let err = put_config.object_lock_configuration(config).send().await.unwrap_err();
        assert_eq!(code(&err), expected, "{days:?} {years:?}");
    }
    let got = s3.get_object_lock_configuration().bucket("rules").send().await.unwrap();
    assert!(got.object_lock_configuration().unwrap().rule().is_none(), "nothing was set");

    let past = aws_sdk_s3::primitives::DateTime::from_secs(1_000_000);
    let refused = put(&s3, "rules", "k", Some((ObjectLockMode::Governance, past))).await;
    assert_eq!(refused, Err("InvalidArgument".to_owned()));
    let half =
        s3.put_object().bucket("rules").key("k").object_lock_mode(ObjectLockMode::Governance);
    let refused = half.body(ByteStream::from_static(b"x")).send().await.unwrap_err();
    assert_eq!(code(&refused), "InvalidArgument");
    let missing = s3.get_object_retention().bucket("rules").key("k").send().await.unwrap_err();
    assert_eq!(code(&missing), "NoSuchKey");
    put(&s3, "rules", "k", None).await.unwrap();
    let none = s3.get_object_retention().bucket("rules").key("k").send().await.unwrap_err();
    assert_eq!(code(&none), "NoSuchObjectLockConfiguration");
}

#[tokio::test]
async fn only_full_access_keys_change_lock_settings_and_read_only_keys_read_them() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let (owner, _) = lock_bucket(&server, "modes").await;
    let owner = server.client(&owner);
    let until = in_days(1);
    put(&owner, "modes", "k", Some((ObjectLockMode::Governance, until))).await.unwrap();
    let governance = config(ObjectLockRetentionMode::Governance, Some(1), None);
    for (user, mode) in [("reader", KeyMode::ReadOnly), ("writer", KeyMode::WriteOnly)] {
        let key = server.store.issue_key(user, "modes").await.unwrap();
        server.store.set_key_mode(user, "modes", mode).await.unwrap();
        let s3 = server.client(&key);
        let put_config = s3.put_object_lock_configuration().bucket("modes");
        let err = put_config.object_lock_configuration(governance.clone()).send().await;
        assert_eq!(code(&err.unwrap_err()), "AccessDenied", "{mode} configuration");
        let longer = super::retention(ObjectLockRetentionMode::Governance, in_days(2));
        let err = s3.put_object_retention().bucket("modes").key("k").retention(longer).send().await;
        assert_eq!(code(&err.unwrap_err()), "AccessDenied", "{mode} retention");
        let hold = aws_sdk_s3::types::ObjectLockLegalHold::builder()
            .status(ObjectLockLegalHoldStatus::On)
            .build();
        let err = s3.put_object_legal_hold().bucket("modes").key("k").legal_hold(hold).send().await;
        assert_eq!(code(&err.unwrap_err()), "AccessDenied", "{mode} legal hold");
        let reads = [
            s3.get_object_lock_configuration().bucket("modes").send().await.is_ok(),
            s3.get_object_retention().bucket("modes").key("k").send().await.is_ok(),
            // Never held: read, and answered that there is no hold to show.
            s3.get_object_legal_hold()
                .bucket("modes")
                .key("k")
                .send()
                .await
                .map_or_else(|e| code(&e) == "NoSuchObjectLockConfiguration", |_| true),
        ];
        assert_eq!(reads, [mode == KeyMode::ReadOnly; 3], "{mode} reads");
        // A write-only key writes, and may ask for a lock on what it writes.
        let wrote = put(&s3, "modes", "w", Some((ObjectLockMode::Governance, until))).await;
        assert_eq!(wrote.is_ok(), mode == KeyMode::WriteOnly, "{mode} write");
    }
}

#[tokio::test]
async fn an_upload_asking_for_a_lock_in_a_bucket_without_it_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&server.bucket_with_key("plain", "obc-plain").await);
    let upload = s3.create_multipart_upload().bucket("plain").key("k");
    let upload = upload.object_lock_mode(ObjectLockMode::Compliance);
    let refused = upload.object_lock_retain_until_date(in_days(1)).send().await.unwrap_err();
    assert_eq!(code(&refused), "InvalidRequest");
    let uploads = s3.list_multipart_uploads().bucket("plain").send().await.unwrap();
    assert!(uploads.uploads().is_empty(), "nothing was started");
}
