//! Claims' versioning, object lock and lifecycle rules end to end: the controller in this
//! process on the real control plane as `deploy/s3/` runs it, moto with IAM enforced and an
//! owner allowed only what the book's S3 chapter lists, and the bucket read back through the S3
//! API.

mod common;

use bucket_api::ClaimPhase;
use common::cluster::setup;
use common::features::{
    as_tenant, asking, change_config, features_owner, lock, refused, versioning_of,
};
use serde_json::json;
use test_support::{Deployed, Harness, eventually, ready};

const ROOK_LIFECYCLE: &str = r#"{"Rules": [
    {"ID": "AbortIncompleteMultipartUploads", "Status": "Enabled", "Prefix": "",
     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
    {"ID": "ExpireAfter30Days", "Status": "Enabled", "Prefix": "",
     "Expiration": {"Days": 30}}]}"#;

#[tokio::test]
async fn claims_get_the_bucket_features_their_class_allows_and_no_more() {
    let mut s = setup("s3-features").await;
    as_tenant(&mut s).await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let owner = features_owner(&s, "features-owner").await;
    s.owner_keys("owner", &owner).await;
    let p = &controller.provisioner;
    let allowing = [
        ("allowVersioning", "true"),
        ("allowObjectLock", "true"),
        ("allowComplianceRetention", "true"),
        ("maxObjectLockRetentionDays", "30"),
    ];
    let open = s.class(p, "owner", &allowing, Some("Delete")).await;
    let plain = s.class(p, "owner", &[("allowLifecycle", "false")], Some("Delete")).await;
    let compliance = lock("COMPLIANCE", 10);
    let too_long = lock("GOVERNANCE", 40);
    s.claim(
        "kept",
        asking(&open, &[("versioning", "Enabled"), ("bucketLifecycle", ROOK_LIFECYCLE)]),
    )
    .await;
    s.claim("locked", asking(&open, &[("objectLock", &compliance)])).await;
    s.claim("capped", asking(&open, &[("objectLock", &too_long)])).await;
    s.claim("unversioned", asking(&plain, &[("versioning", "Enabled")])).await;
    s.claim("unruled", asking(&plain, &[("bucketLifecycle", ROOK_LIFECYCLE)])).await;

    let admin = s.moto.s3(&s.moto.admin);
    let kept = s.wait_for("kept", ClaimPhase::Bound, "Bound").await.spec.bucket_name.unwrap();
    assert_eq!(versioning_of(&admin, &kept).await.as_deref(), Some("Enabled"));
    let rules = admin.get_bucket_lifecycle_configuration().bucket(&kept).send().await.unwrap();
    assert_eq!(rules.rules()[1].expiration().and_then(|e| e.days()), Some(30));
    let locked = s.wait_for("locked", ClaimPhase::Bound, "Bound").await.spec.bucket_name.unwrap();
    let retention = || async {
        let found = admin.get_object_lock_configuration().bucket(&locked).send().await.unwrap();
        let rule = found.object_lock_configuration()?.rule()?.default_retention()?.clone();
        Some((rule.mode()?.as_str().to_string(), rule.days()?))
    };
    assert_eq!(retention().await, Some(("COMPLIANCE".into(), 10)));

    for (name, says) in [
        ("capped", "40 days is longer than the 30 days"),
        ("unversioned", "allowVersioning: \"true\""),
        ("unruled", "allowLifecycle: \"true\""),
    ] {
        let claim = s.wait_for(name, ClaimPhase::Failed, "InvalidParameters").await;
        assert!(ready(&claim).unwrap().message.contains(says), "{name}: {claim:?}");
        refused(&s, name, says, true).await;
    }

    // The bound claim drops versioning and its rules: suspended, removed.
    change_config(&s, "kept", json!({ "versioning": null, "bucketLifecycle": null })).await;
    eventually("versioning suspended and the rules gone", || async {
        let rules = admin.get_bucket_lifecycle_configuration().bucket(&kept).send().await;
        (versioning_of(&admin, &kept).await.as_deref() == Some("Suspended") && rules.is_err())
            .then_some(())
    })
    .await;
    // Object lock asked later: refused, with the reason, and nothing changes.
    change_config(&s, "kept", json!({ "objectLock": "Enabled" })).await;
    refused(&s, "kept", "created without object lock", true).await;
    let none = admin.get_object_lock_configuration().bucket(&kept).send().await;
    assert_eq!(common::error_code(none), "ObjectLockConfigurationNotFoundError");

    // The tenant tries to shorten the COMPLIANCE retention, then to drop it.
    change_config(&s, "locked", json!({ "objectLock": lock("COMPLIANCE", 1) })).await;
    refused(&s, "locked", "COMPLIANCE default retention of 10 days", true).await;
    change_config(&s, "locked", json!({ "objectLock": null })).await;
    refused(&s, "locked", "cannot be turned off", false).await;
    assert_eq!(retention().await, Some(("COMPLIANCE".into(), 10)));
    // Lengthened within the cap: applied, and the claim is Bound again.
    change_config(&s, "locked", json!({ "objectLock": lock("COMPLIANCE", 20) })).await;
    eventually("the longer retention on the bucket", || async {
        (retention().await? == ("COMPLIANCE".into(), 20)).then_some(())
    })
    .await;
    s.wait_for("locked", ClaimPhase::Bound, "Bound").await;

    let buckets = admin.list_buckets().send().await.unwrap();
    assert_eq!(buckets.buckets().len(), 2, "only the claims that could be served have buckets");
    for name in ["kept", "locked", "capped", "unversioned", "unruled"] {
        s.delete_and_wait(name).await;
    }
    assert!(!s.moto.bucket_exists(&kept).await && !s.moto.bucket_exists(&locked).await);
}
