//! A StorageClass's `defaultVersioning` and `defaultObjectLockRetention` end to end: the
//! controller in this process on the real control plane as `deploy/s3/` runs it, tenants
//! writing claims in their own namespace only, moto with IAM enforced and an owner allowed only
//! what the book's S3 chapter lists, and each bucket read back through the S3 API.

mod common;

use bucket_api::ClaimPhase;
use common::cluster::setup;
use common::features::{
    as_tenant, asking, change_config, features_owner, lock, lock_of, refused, versioning_of,
};
use serde_json::json;
use test_support::{Deployed, Harness, eventually, ready};

/// A class allowing versioning and object lock (COMPLIANCE too, up to 30 days) and giving
/// both by default, with `extra`.
fn allowing<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut parameters = vec![
        ("allowVersioning", "true"),
        ("allowObjectLock", "true"),
        ("allowComplianceRetention", "true"),
        ("maxObjectLockRetentionDays", "30"),
    ];
    parameters.extend_from_slice(extra);
    parameters
}

fn compliance(days: i32) -> Option<Option<(String, i32)>> {
    Some(Some(("COMPLIANCE".into(), days)))
}

#[tokio::test]
async fn claims_get_their_class_defaults_unless_they_ask_otherwise() {
    let mut s = setup("s3-defaults").await;
    as_tenant(&mut s).await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let owner = features_owner(&s, "defaults-owner").await;
    s.owner_keys("owner", &owner).await;
    let p = &controller.provisioner;
    let defaults = allowing(&[
        ("defaultVersioning", "Enabled"),
        ("defaultObjectLockRetention", "COMPLIANCE:20d"),
    ]);
    let versioned = s.class(p, "owner", &defaults, Some("Delete")).await;
    let suspending = allowing(&[("defaultVersioning", "Suspended")]);
    let suspending = s.class(p, "owner", &suspending, Some("Delete")).await;
    let governed = lock("GOVERNANCE", 5);
    s.claim("plain", asking(&versioned, &[])).await;
    s.claim("own", asking(&versioned, &[("versioning", "Suspended")])).await;
    s.claim("locked", asking(&versioned, &[("objectLock", "Enabled")])).await;
    s.claim("governed", asking(&versioned, &[("objectLock", &governed)])).await;
    s.claim("held", asking(&suspending, &[("objectLock", "Enabled")])).await;

    let admin = s.moto.s3(&s.moto.admin);
    let mut buckets = Vec::new();
    for name in ["plain", "own", "locked", "governed", "held"] {
        let claim = s.wait_for(name, ClaimPhase::Bound, "Bound").await;
        buckets.push(claim.spec.bucket_name.unwrap());
    }
    let [plain, own, locked, governed, held] = &buckets[..] else { unreachable!() };
    // The class's versioning, and never object lock unasked.
    assert_eq!(versioning_of(&admin, plain).await.as_deref(), Some("Enabled"));
    assert_eq!(lock_of(&admin, plain).await, None, "a default never turns object lock on");
    // The claim's own value wins.
    assert_eq!(versioning_of(&admin, own).await.as_deref(), Some("Suspended"));
    assert_eq!(lock_of(&admin, own).await, None);
    // Object lock asked without a retention gets the class's; one the claim names wins.
    assert_eq!(lock_of(&admin, locked).await, compliance(20));
    assert_eq!(versioning_of(&admin, locked).await.as_deref(), Some("Enabled"));
    assert_eq!(lock_of(&admin, governed).await, Some(Some(("GOVERNANCE".into(), 5))));
    // A default of Suspended is not given to a locked bucket, which stays versioned.
    assert_eq!(versioning_of(&admin, held).await.as_deref(), Some("Enabled"));
    assert_eq!(lock_of(&admin, held).await, Some(None));

    // The bound claim drops its own versioning: back to the class's, not to Suspended.
    change_config(&s, "own", json!({ "versioning": null })).await;
    eventually("the class's versioning on the bucket", || async {
        (versioning_of(&admin, own).await.as_deref() == Some("Enabled")).then_some(())
    })
    .await;
    s.wait_for("own", ClaimPhase::Bound, "Bound").await;

    for name in ["plain", "own", "locked", "governed", "held"] {
        s.delete_and_wait(name).await;
    }
    for bucket in &buckets {
        assert!(!s.moto.bucket_exists(bucket).await, "{bucket} outlived its claim");
    }
}

#[tokio::test]
async fn defaults_beyond_the_class_and_edits_beyond_it_are_refused_with_the_reason() {
    let mut s = setup("s3-defaults-refused").await;
    as_tenant(&mut s).await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    let owner = features_owner(&s, "refused-owner").await;
    s.owner_keys("owner", &owner).await;
    let p = &controller.provisioner;
    let over_cap = allowing(&[("defaultObjectLockRetention", "GOVERNANCE:1y")]);
    let over_cap = s.class(p, "owner", &over_cap, Some("Delete")).await;
    let unallowed = [("defaultVersioning", "Enabled")];
    let unallowed = s.class(p, "owner", &unallowed, Some("Delete")).await;
    let unsure = [("allowObjectLock", "true"), ("defaultObjectLockRetention", "COMPLIANCE:1d")];
    let unsure = s.class(p, "owner", &unsure, Some("Delete")).await;
    let defaults = allowing(&[("defaultObjectLockRetention", "COMPLIANCE:20d")]);
    let locking = s.class(p, "owner", &defaults, Some("Delete")).await;
    s.claim("capped", asking(&over_cap, &[("objectLock", "Enabled")])).await;
    s.claim("unversioned", asking(&unallowed, &[])).await;
    s.claim("uncompliant", asking(&unsure, &[])).await;
    s.claim("kept", asking(&locking, &[("objectLock", "Enabled")])).await;

    // A class whose default it does not allow fails its claims, naming both parameters.
    for (name, says) in [
        (
            "capped",
            "parameter defaultObjectLockRetention is not allowed by the StorageClass itself: \
             its 365 days are longer than the 30 days of maxObjectLockRetentionDays",
        ),
        (
            "unversioned",
            "parameter defaultVersioning is not allowed by the StorageClass itself: it needs \
             allowVersioning: \"true\"",
        ),
        (
            "uncompliant",
            "parameter defaultObjectLockRetention is not allowed by the StorageClass itself: a \
             COMPLIANCE retention needs allowComplianceRetention: \"true\"",
        ),
    ] {
        let claim = s.wait_for(name, ClaimPhase::Failed, "InvalidParameters").await;
        assert!(ready(&claim).unwrap().message.contains(says), "{name}: {claim:?}");
        refused(&s, name, says, true).await;
    }

    let admin = s.moto.s3(&s.moto.admin);
    let kept = s.wait_for("kept", ClaimPhase::Bound, "Bound").await.spec.bucket_name.unwrap();
    assert_eq!(lock_of(&admin, &kept).await, compliance(20));
    // The tenant tries past the cap, then to weaken the class's COMPLIANCE retention: refused
    // with the reason, the bucket as it was.
    change_config(&s, "kept", json!({ "objectLock": lock("COMPLIANCE", 40) })).await;
    refused(&s, "kept", "40 days is longer than the 30 days", true).await;
    assert_eq!(lock_of(&admin, &kept).await, compliance(20));
    change_config(&s, "kept", json!({ "objectLock": lock("GOVERNANCE", 25) })).await;
    refused(&s, "kept", "COMPLIANCE default retention of 20 days", false).await;
    assert_eq!(lock_of(&admin, &kept).await, compliance(20));
    change_config(&s, "kept", json!({ "objectLock": lock("COMPLIANCE", 5) })).await;
    refused(&s, "kept", "may keep or lengthen but not shorten", false).await;
    assert_eq!(lock_of(&admin, &kept).await, compliance(20));
    // Lengthened within the cap: applied. Back to the class's shorter default: refused.
    change_config(&s, "kept", json!({ "objectLock": lock("COMPLIANCE", 25) })).await;
    eventually("the longer retention on the bucket", || async {
        (lock_of(&admin, &kept).await == compliance(25)).then_some(())
    })
    .await;
    s.wait_for("kept", ClaimPhase::Bound, "Bound").await;
    change_config(&s, "kept", json!({ "objectLock": "Enabled" })).await;
    refused(&s, "kept", "COMPLIANCE default retention of 25 days", false).await;
    assert_eq!(lock_of(&admin, &kept).await, compliance(25));

    let buckets = admin.list_buckets().send().await.unwrap();
    assert_eq!(buckets.buckets().len(), 1, "only the claim that could be served has a bucket");
    for name in ["capped", "unversioned", "uncompliant", "kept"] {
        s.delete_and_wait(name).await;
    }
    assert!(!s.moto.bucket_exists(&kept).await);
}
