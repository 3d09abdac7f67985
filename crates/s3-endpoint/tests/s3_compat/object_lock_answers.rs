//! The errors PutObjectLockConfiguration answers a bad document with, as S3 names them: a
//! period of zero or less is `InvalidRetentionPeriod`; a document off the schema (both periods,
//! neither, a mode or status S3 does not know) is `MalformedXML`.

use aws_sdk_s3::types::{
    DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockRetentionMode,
    ObjectLockRule,
};
use s3_endpoint::Creator;

use crate::common::{Server, code, status};

fn config(
    enabled: &str,
    mode: &str,
    days: Option<i32>,
    years: Option<i32>,
) -> ObjectLockConfiguration {
    let default = DefaultRetention::builder()
        .mode(ObjectLockRetentionMode::from(mode))
        .set_days(days)
        .set_years(years)
        .build();
    ObjectLockConfiguration::builder()
        .object_lock_enabled(ObjectLockEnabled::from(enabled))
        .rule(ObjectLockRule::builder().default_retention(default).build())
        .build()
}

#[tokio::test]
async fn bad_default_retentions_are_named_as_s3_names_them() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let creator = Creator { user_id: "obc-lock", delete_with_claim: true };
    let (_, key) = server.store.provision_bucket("locked", creator).await.unwrap();
    server.store.enable_object_lock("locked").await.unwrap();
    let s3 = server.client(&key);
    for (enabled, mode, days, years, expected) in [
        ("Enabled", "GOVERNANCE", Some(0), None, "InvalidRetentionPeriod"),
        ("Enabled", "GOVERNANCE", Some(-5), None, "InvalidRetentionPeriod"),
        ("Enabled", "GOVERNANCE", None, Some(-1), "InvalidRetentionPeriod"),
        ("Enabled", "GOVERNANCE", Some(1), Some(1), "MalformedXML"),
        ("Enabled", "GOVERNANCE", None, None, "MalformedXML"),
        ("Enabled", "abc", None, Some(1), "MalformedXML"),
        ("Enabled", "governance", None, Some(1), "MalformedXML"),
        ("Disabled", "GOVERNANCE", None, Some(1), "MalformedXML"),
    ] {
        let err = s3
            .put_object_lock_configuration()
            .bucket("locked")
            .object_lock_configuration(config(enabled, mode, days, years))
            .send()
            .await
            .unwrap_err();
        let what = format!("{enabled} {mode} {days:?} {years:?}");
        assert_eq!(code(&err), expected, "{what}");
        assert_eq!(status(&err), Some(400), "{what}");
    }
    let got = s3.get_object_lock_configuration().bucket("locked").send().await.unwrap();
    assert!(got.object_lock_configuration().unwrap().rule().is_none(), "nothing was set");
    server.stop().await;
}
