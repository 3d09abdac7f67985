//! What removes objects wholesale leaves protected versions in place: a lifecycle pass makes
//! delete markers and removes the unprotected noncurrent versions, keeps the protected ones and
//! carries on; deleting a claim's bucket (the provisioner's path under `Delete`) is refused
//! with `StoreError::ObjectLocked` while one protected version remains, its data all kept, then
//! succeeds once nothing protects it.

use std::time::SystemTime;

use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
    LifecycleRuleFilter, NoncurrentVersionExpiration, ObjectLockLegalHold,
    ObjectLockLegalHoldStatus, ObjectLockMode,
};
use s3_endpoint::StoreError;
use s3_endpoint::store::{Bypass, LockMode, Retention, unix_ms};

use super::{DAY, in_days, lock_bucket, put};
use crate::common::Server;

#[tokio::test]
async fn a_lifecycle_pass_expires_only_unprotected_objects_and_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let (owner, _) = lock_bucket(&server, "aging").await;
    let s3 = server.client(&owner);
    let rule = LifecycleRule::builder()
        .id("all")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("").build())
        .expiration(LifecycleExpiration::builder().days(1).build())
        .noncurrent_version_expiration(
            NoncurrentVersionExpiration::builder().noncurrent_days(1).build(),
        )
        .build()
        .unwrap();
    let rules = BucketLifecycleConfiguration::builder().rules(rule).build().unwrap();
    let put_rules = s3.put_bucket_lifecycle_configuration().bucket("aging");
    put_rules.lifecycle_configuration(rules).send().await.unwrap();
    put(&s3, "aging", "a-free", None).await.unwrap();
    put(&s3, "aging", "b-governed", Some((ObjectLockMode::Governance, in_days(30)))).await.unwrap();
    put(&s3, "aging", "c-complied", Some((ObjectLockMode::Compliance, in_days(30)))).await.unwrap();
    put(&s3, "aging", "d-free", None).await.unwrap();

    let (mut locked, mut failed) = (0, 0);
    for _ in 0..2 {
        let pass = server.store.run_lifecycle_pass(SystemTime::now() + 3 * DAY).await.unwrap();
        (locked, failed) = (locked + pass.locked, failed + pass.failed);
    }
    assert!(locked >= 2 && failed == 0, "{locked} {failed}");
    let listed = s3.list_objects_v2().bucket("aging").send().await.unwrap();
    assert!(listed.contents().is_empty(), "every key reads as deleted");
    let versions = s3.list_object_versions().bucket("aging").send().await.unwrap();
    let mut kept: Vec<_> = versions.versions().iter().filter_map(|v| v.key()).collect();
    kept.sort_unstable();
    assert_eq!(kept, ["b-governed", "c-complied"], "only the protected versions stay");
}

#[tokio::test]
async fn deleting_a_claims_bucket_waits_for_its_protected_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let (owner, _) = lock_bucket(&server, "kept").await;
    let s3 = server.client(&owner);
    put(&s3, "kept", "plain", None).await.unwrap();
    put(&s3, "kept", "held", None).await.unwrap();
    let on = ObjectLockLegalHold::builder().status(ObjectLockLegalHoldStatus::On).build();
    s3.put_object_legal_hold().bucket("kept").key("held").legal_hold(on).send().await.unwrap();

    let err = server.store.delete_bucket("kept", "obc-owner").await.unwrap_err();
    let StoreError::ObjectLocked(refusal) = &err else { panic!("{err}") };
    assert_eq!((refusal.key.as_str(), refusal.until()), ("held", None), "{err}");
    assert!(err.to_string().contains("legal hold"), "{err}");
    // Nothing was removed but the keys: no claim writes to a bucket being deleted.
    let dir = server.store.bucket_path("kept").unwrap();
    assert!(dir.join("plain").is_file() && dir.join("held").is_file());
    let first = server.store.head_object("kept", "held").await.unwrap().version_id;
    assert!(first.is_some(), "a lock bucket is versioned");
    assert!(server.store.lookup_key(&owner.access_key_id).is_none());
    assert!(server.store.bucket_record("kept").is_some(), "a retry knows the bucket is ours");

    // Governance too holds: a bucket deletion never bypasses anything.
    server.store.set_object_legal_hold("kept", "held", None, false).await.unwrap();
    let until = unix_ms(SystemTime::now() + DAY);
    let governance = Retention { mode: LockMode::Governance, until_ms: until };
    let bypass = Bypass::Permitted;
    server
        .store
        .set_object_retention("kept", "held", None, Some(governance), bypass)
        .await
        .unwrap();
    let err = server.store.delete_bucket("kept", "obc-owner").await.unwrap_err();
    assert!(matches!(&err, StoreError::ObjectLocked(r) if r.until().is_some()), "{err}");
    server.store.set_object_retention("kept", "held", None, None, bypass).await.unwrap();
    assert!(server.store.delete_bucket("kept", "obc-owner").await.unwrap());
    assert!(!dir.exists());
}
