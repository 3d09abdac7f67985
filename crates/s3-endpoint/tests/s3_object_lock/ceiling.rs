//! The retention ceiling the provisioner records from a bucket's StorageClass: every retention
//! a claim's key sets (lock headers of PutObject, CopyObject and CreateMultipartUpload,
//! PutObjectRetention, the default of PutObjectLockConfiguration) stays within it, COMPLIANCE
//! only where allowed; refused with AccessDenied naming the limit, nothing changed; the
//! operator credential is not bound.

use aws_sdk_s3::types::{
    DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockMode,
    ObjectLockRetentionMode, ObjectLockRule,
};
use s3_endpoint::RetentionCeiling;

use super::{ADMIN_ID, ADMIN_SECRET, in_days, lock_bucket, put, retention};
use crate::common::{Server, code, status};

fn default_config(mode: ObjectLockRetentionMode, days: i32) -> ObjectLockConfiguration {
    let retention = DefaultRetention::builder().mode(mode).days(days).build();
    ObjectLockConfiguration::builder()
        .object_lock_enabled(ObjectLockEnabled::Enabled)
        .rule(ObjectLockRule::builder().default_retention(retention).build())
        .build()
}

#[tokio::test]
async fn claim_keys_set_no_retention_past_the_class_ceiling_and_the_operator_is_not_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = Server::start_with_admin(tmp.path(), ADMIN_ID, ADMIN_SECRET).await;
    let (owner, other) = lock_bucket(&server, "capped").await;
    let ceiling = RetentionCeiling { compliance: false, max_days: Some(30) };
    server.store.set_retention_ceiling("capped", Some(ceiling)).await.unwrap();
    let (owner, other) = (server.client(&owner), server.client(&other));
    let (gov, comp) = (ObjectLockMode::Governance, ObjectLockMode::Compliance);

    for s3 in [&owner, &other] {
        // Past the cap, or COMPLIANCE at all: refused, and nothing is written.
        for lock in [(gov.clone(), in_days(40)), (comp.clone(), in_days(2))] {
            let refused = put(s3, "capped", "k", Some(lock)).await;
            assert_eq!(refused, Err("AccessDenied".into()));
        }
        let listed = s3.list_object_versions().bucket("capped").send().await.unwrap();
        assert!(listed.versions().is_empty(), "a refused write leaves nothing");
        let upload = s3.create_multipart_upload().bucket("capped").key("parts");
        let upload =
            upload.object_lock_mode(gov.clone()).object_lock_retain_until_date(in_days(31));
        assert_eq!(code(&upload.send().await.unwrap_err()), "AccessDenied");
    }
    // Within: accepted; then lengthened past the cap, or turned COMPLIANCE: refused.
    let v = put(&owner, "capped", "k", Some((gov.clone(), in_days(10)))).await.unwrap().unwrap();
    for s3 in [&owner, &other] {
        for asked in [
            retention(ObjectLockRetentionMode::Governance, in_days(45)),
            retention(ObjectLockRetentionMode::Compliance, in_days(20)),
        ] {
            let set = s3.put_object_retention().bucket("capped").key("k").version_id(&v);
            let refused = set.retention(asked).send().await.unwrap_err();
            assert_eq!((code(&refused).as_str(), status(&refused)), ("AccessDenied", Some(403)));
        }
        let copy = s3.copy_object().bucket("capped").key("copy").copy_source("capped/k");
        let copy = copy.object_lock_mode(gov.clone()).object_lock_retain_until_date(in_days(99));
        assert_eq!(code(&copy.send().await.unwrap_err()), "AccessDenied");
        // The bucket's default too.
        for config in [
            default_config(ObjectLockRetentionMode::Governance, 365),
            default_config(ObjectLockRetentionMode::Compliance, 1),
        ] {
            let set = s3.put_object_lock_configuration().bucket("capped");
            let refused = set.object_lock_configuration(config).send().await.unwrap_err();
            assert_eq!(code(&refused), "AccessDenied");
        }
    }
    let got = owner.get_object_retention().bucket("capped").key("k").version_id(&v);
    let got = got.send().await.unwrap();
    let got = got.retention().unwrap();
    assert_eq!(got.mode(), Some(&ObjectLockRetentionMode::Governance), "unchanged");
    let lock = server.store.bucket_object_lock("capped").await.unwrap().unwrap();
    assert_eq!(lock.default_retention, None, "no default was set");
    // Within the cap a key lengthens, and sets a default; the ceiling survives that.
    let longer = retention(ObjectLockRetentionMode::Governance, in_days(29));
    let set = other.put_object_retention().bucket("capped").key("k").version_id(&v);
    set.retention(longer).send().await.unwrap();
    let set = owner.put_object_lock_configuration().bucket("capped");
    let config = default_config(ObjectLockRetentionMode::Governance, 30);
    set.object_lock_configuration(config).send().await.unwrap();
    let lock = server.store.bucket_object_lock("capped").await.unwrap().unwrap();
    assert_eq!(lock.ceiling, Some(ceiling), "no S3 request changes the ceiling");
    // The operator sets what it decides.
    put(&admin, "capped", "held", Some((comp.clone(), in_days(1)))).await.unwrap();
    put(&admin, "capped", "long", Some((gov, in_days(400)))).await.unwrap();
}
