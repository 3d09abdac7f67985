//! PutBucketVersioning and GetBucketVersioning.

use aws_sdk_s3::types::{BucketVersioningStatus, MfaDelete, VersioningConfiguration};

use super::common::{Server, code, status};
use super::set_versioning;

#[tokio::test]
async fn versioning_is_empty_until_set_then_enabled_or_suspended_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("conf", "obc-1").await;
    let s3 = server.client(&key);
    let never = s3.get_bucket_versioning().bucket("conf").send().await.unwrap();
    assert_eq!(never.status(), None, "never set: no status");
    set_versioning(&s3, "conf", BucketVersioningStatus::Enabled).await;
    let got = s3.get_bucket_versioning().bucket("conf").send().await.unwrap();
    assert_eq!(got.status(), Some(&BucketVersioningStatus::Enabled));
    server.stop().await;

    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&key);
    let got = s3.get_bucket_versioning().bucket("conf").send().await.unwrap();
    assert_eq!(got.status(), Some(&BucketVersioningStatus::Enabled), "survives a restart");
    set_versioning(&s3, "conf", BucketVersioningStatus::Suspended).await;
    let got = s3.get_bucket_versioning().bucket("conf").send().await.unwrap();
    assert_eq!(got.status(), Some(&BucketVersioningStatus::Suspended));
}

#[tokio::test]
async fn mfa_delete_and_bad_states_are_refused_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("conf", "obc-1").await;
    let s3 = server.client(&key);
    let mfa = VersioningConfiguration::builder()
        .status(BucketVersioningStatus::Enabled)
        .mfa_delete(MfaDelete::Enabled)
        .build();
    let err = s3
        .put_bucket_versioning()
        .bucket("conf")
        .versioning_configuration(mfa)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "NotImplemented");
    let message = err.as_service_error().and_then(|e| e.meta().message()).unwrap_or_default();
    assert!(message.contains("MFA delete"), "{message}");
    let bad = VersioningConfiguration::builder().status("On".into()).build();
    let err = s3
        .put_bucket_versioning()
        .bucket("conf")
        .versioning_configuration(bad)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "IllegalVersioningConfigurationException");
    assert_eq!(status(&err), Some(400));
    let got = s3.get_bucket_versioning().bucket("conf").send().await.unwrap();
    assert_eq!(got.status(), None, "nothing was set");
    let missing = server.bucket_with_key("other", "obc-2").await;
    let err = server.client(&missing).get_bucket_versioning().bucket("gone").send().await;
    assert!(err.is_err(), "another bucket's key reaches nothing");
}
