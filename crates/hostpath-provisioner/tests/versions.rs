//! A claim's `versioning` and `objectLock` with the real binary on the real control plane, a
//! tenant scoped to its namespace writing the claims: applied to the claim's bucket within what
//! its StorageClass allows, with the class's defaults for what the claim leaves out, read back
//! over S3 with the claim's own Secret; changes the bucket cannot take refused with the reason,
//! and a bucket holding data under object lock kept, its claim waiting, under `Delete`.

mod harness;

use std::collections::BTreeMap;

use aws_sdk_s3::Client as S3;
use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use harness::*;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use test_support::{eventually, ready};

fn lock(mode: &str, days: u32) -> String {
    json!({ "ObjectLockEnabled": "Enabled",
            "Rule": { "DefaultRetention": { "Mode": mode, "Days": days } } })
    .to_string()
}

fn spec(class: &str, name: &str, config: &[(&str, &str)]) -> ObjectBucketClaimSpec {
    let config = config.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    ObjectBucketClaimSpec {
        storage_class_name: class.to_owned(),
        generate_bucket_name: Some(name.into()),
        additional_config: Some(config.collect::<BTreeMap<_, _>>()),
        ..Default::default()
    }
}

async fn versioning_of(s3: &S3, bucket: &str) -> Option<String> {
    let got = s3.get_bucket_versioning().bucket(bucket).send().await.unwrap();
    got.status().map(|s| s.as_str().to_owned())
}

/// The bucket's object lock: `None` without one, else its default retention's mode and days.
async fn lock_of(s3: &S3, bucket: &str) -> Option<Option<(String, i32)>> {
    let got = s3.get_object_lock_configuration().bucket(bucket).send().await;
    let got = match got {
        Ok(got) => got,
        Err(e) => {
            assert_eq!(code::<(), _>(Err(e)), "ObjectLockConfigurationNotFoundError");
            return None;
        }
    };
    let rule = got.object_lock_configuration().and_then(|c| c.rule());
    let retention = rule.and_then(|r| r.default_retention());
    Some(retention.and_then(|r| Some((r.mode()?.as_str().to_owned(), r.days()?))))
}

fn compliance(days: i32) -> Option<Option<(String, i32)>> {
    Some(Some(("COMPLIANCE".to_owned(), days)))
}

/// Merges `config` into the tenant's claim `name`.
async fn change(tenant: &Tenant, name: &str, config: serde_json::Value) {
    let patch = json!({ "spec": { "additionalConfig": config } });
    tenant.claims.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// Waits for an Event of `reason` on claim `name` whose note holds `says` (any note if
/// `None`: repeats of one reason count into the first Event's series).
async fn event(env: &Env, tenant: &Tenant, name: &str, reason: &str, says: Option<&str>) {
    let events: Api<Event> = Api::namespaced(env.client.clone(), &tenant.ns);
    eventually(&format!("an Event {reason} on {name}"), || async {
        let listed = events.list(&Default::default()).await.ok()?;
        listed.items.into_iter().find(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
                && says.is_none_or(|says| e.note.as_deref().is_some_and(|n| n.contains(says)))
        })
    })
    .await;
}

/// Waits for claim `name`'s Ready condition of its current generation to have `reason` and
/// say `says`.
async fn condition(tenant: &Tenant, name: &str, reason: &str, says: &str) -> ObjectBucketClaim {
    eventually(&format!("claim {name}: {reason}, {says}"), || async {
        let claim = tenant.claims.get(name).await.ok()?;
        let condition = ready(&claim)?;
        (condition.observed_generation == claim.metadata.generation
            && condition.reason == reason
            && condition.message.contains(says))
        .then_some(claim.clone())
    })
    .await
}

#[tokio::test]
async fn claims_get_the_versioning_and_object_lock_their_class_allows_and_no_more() {
    let env = Env::new("hp-versions").await;
    let _provisioner = env.start("node-a");
    let tenant = env.scoped_tenant("hp-versions-t").await;
    let open = env
        .class(
            &[
                ("allowVersioning", "true"),
                ("allowObjectLock", "true"),
                ("allowComplianceRetention", "true"),
                ("maxObjectLockRetentionDays", "30"),
                ("defaultVersioning", "Enabled"),
                ("defaultObjectLockRetention", "GOVERNANCE:2d"),
            ],
            "Delete",
        )
        .await;
    let closed = env.class(&[], "Delete").await;
    let unfit = env.class(&[("defaultVersioning", "Enabled")], "Delete").await;
    let compliant = lock("COMPLIANCE", 10);
    for (name, class, config) in [
        ("plain", &open, &[][..]),
        ("own", &open, &[("versioning", "Suspended")][..]),
        ("governed", &open, &[("objectLock", "Enabled")][..]),
        ("locked", &open, &[("objectLock", compliant.as_str())][..]),
        ("closed", &closed, &[("versioning", "Enabled")][..]),
        ("unfit", &unfit, &[][..]),
    ] {
        tenant.create(name, spec(class, name, config)).await;
    }
    let mut s3 = BTreeMap::new();
    for name in ["plain", "own", "governed", "locked"] {
        tenant.wait(name, ClaimPhase::Bound, "Bound").await;
        s3.insert(name, tenant.s3_for(name).await);
    }
    // The class's versioning, and never object lock unasked.
    let (plain, plain_bucket) = &s3["plain"];
    assert_eq!(versioning_of(plain, plain_bucket).await.as_deref(), Some("Enabled"));
    assert_eq!(lock_of(plain, plain_bucket).await, None, "a default never turns object lock on");
    // The claim's own value wins.
    let (own, own_bucket) = &s3["own"];
    assert_eq!(versioning_of(own, own_bucket).await.as_deref(), Some("Suspended"));
    // Object lock asked without a retention gets the class's; one the claim names wins.
    let (governed, governed_bucket) = &s3["governed"];
    assert_eq!(lock_of(governed, governed_bucket).await, Some(Some(("GOVERNANCE".into(), 2))));
    let (locked, locked_bucket) = &s3["locked"];
    assert_eq!(lock_of(locked, locked_bucket).await, compliance(10));
    assert_eq!(versioning_of(locked, locked_bucket).await.as_deref(), Some("Enabled"));

    // Refused with the reason: a key the class does not allow, a default it does not allow.
    for (name, says) in [
        ("closed", "allowVersioning: \"true\""),
        (
            "unfit",
            "parameter defaultVersioning is not allowed by the StorageClass itself: it needs \
             allowVersioning: \"true\"",
        ),
    ] {
        let claim = tenant.wait(name, ClaimPhase::Failed, "InvalidParameters").await;
        assert!(ready(&claim).unwrap().message.contains(says), "{name}: {claim:?}");
        event(&env, &tenant, name, "InvalidParameters", Some(says)).await;
        assert!(tenant.secret(name).await.is_none(), "a refused claim gets no key");
    }

    // The bound claim drops its own versioning: back to the class's.
    change(&tenant, "own", json!({ "versioning": null })).await;
    eventually("the class's versioning on the bucket", || async {
        (versioning_of(own, own_bucket).await.as_deref() == Some("Enabled")).then_some(())
    })
    .await;
    // Object lock asked later: refused, nothing changes.
    change(&tenant, "plain", json!({ "objectLock": "Enabled" })).await;
    condition(&tenant, "plain", "InvalidParameters", "created without object lock").await;
    assert_eq!(lock_of(plain, plain_bucket).await, None);
    // The tenant tries past the cap, then to weaken the COMPLIANCE retention.
    change(&tenant, "locked", json!({ "objectLock": lock("COMPLIANCE", 40) })).await;
    let cap = "40 days is longer than the 30 days";
    condition(&tenant, "locked", "InvalidParameters", cap).await;
    event(&env, &tenant, "locked", "InvalidParameters", Some(cap)).await;
    change(&tenant, "locked", json!({ "objectLock": lock("GOVERNANCE", 20) })).await;
    let weaker = "COMPLIANCE default retention of 10 days";
    condition(&tenant, "locked", "InvalidParameters", weaker).await;
    change(&tenant, "locked", json!({ "objectLock": null })).await;
    condition(&tenant, "locked", "InvalidParameters", "cannot be turned off").await;
    assert_eq!(lock_of(locked, locked_bucket).await, compliance(10));
    // Lengthened within the cap: applied, and the claim is Bound again.
    change(&tenant, "locked", json!({ "objectLock": lock("COMPLIANCE", 15) })).await;
    condition(&tenant, "locked", "Bound", "").await;
    assert_eq!(lock_of(locked, locked_bucket).await, compliance(15));

    // Versions go with their bucket; a bucket holding a protected version stays, its claim
    // waiting with the reason.
    put(own, own_bucket, "k", b"one").await.unwrap();
    put(own, own_bucket, "k", b"two").await.unwrap();
    put(locked, locked_bucket, "held", b"kept").await.unwrap();
    for name in ["plain", "own", "governed", "closed", "unfit"] {
        tenant.delete(name).await;
    }
    for bucket in [plain_bucket, own_bucket, governed_bucket] {
        assert!(!env.bucket_dir(bucket).exists(), "{bucket} outlived its claim");
    }
    tenant.claims.delete("locked", &Default::default()).await.unwrap();
    let protected = "under object lock";
    condition(&tenant, "locked", "DeleteFailed", protected).await;
    event(&env, &tenant, "locked", "DeleteFailed", Some(protected)).await;
    let claim = tenant.claims.get("locked").await.unwrap();
    assert!(claim.metadata.deletion_timestamp.is_some(), "the claim waits for its bucket");
    let kept = env.bucket_dir(locked_bucket).join("held");
    assert_eq!(std::fs::read(&kept).unwrap(), b"kept", "protected data outlives its claim");
    assert_eq!(
        code(locked.list_objects_v2().bucket(locked_bucket).send().await),
        "InvalidAccessKeyId"
    );

    // Let the claim go without the provisioner: its retention would outlast the test.
    let admin: Api<ObjectBucketClaim> = Api::namespaced(env.client.clone(), &tenant.ns);
    let release = json!({ "metadata": { "finalizers": null } });
    admin.patch("locked", &PatchParams::default(), &Patch::Merge(&release)).await.unwrap();
}

#[tokio::test]
async fn a_claim_granted_a_bucket_it_did_not_create_leaves_its_versions_alone() {
    let env = Env::new("hp-versions-shared").await;
    let _provisioner = env.start("node-a");
    let tenant = env.scoped_tenant("hp-versions-shared-t").await;
    // An operator's bucket, which claims are granted and may share with others.
    std::fs::create_dir_all(env.bucket_dir("operator-versions")).unwrap();
    let granting = [
        ("bucketName", "operator-versions"),
        ("allowVersioning", "true"),
        ("defaultVersioning", "Enabled"),
    ];
    let granting = env.class(&granting, "Delete").await;
    tenant.create("asking", spec(&granting, "asking", &[("versioning", "Enabled")])).await;
    tenant.create("quiet", spec(&granting, "quiet", &[])).await;
    let says = "only the claim that created a bucket sets them";
    let claim = tenant.wait("asking", ClaimPhase::Failed, "InvalidParameters").await;
    assert!(ready(&claim).unwrap().message.contains(says), "{claim:?}");
    event(&env, &tenant, "asking", "InvalidParameters", Some(says)).await;
    // The class's default is for buckets its claims create: the operator's stays unversioned.
    tenant.wait("quiet", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = tenant.s3_for("quiet").await;
    assert_eq!(versioning_of(&s3, &bucket).await, None);
    change(&tenant, "quiet", json!({ "versioning": "Enabled" })).await;
    condition(&tenant, "quiet", "InvalidParameters", says).await;
    assert_eq!(versioning_of(&s3, &bucket).await, None);
    for name in ["asking", "quiet"] {
        tenant.delete(name).await;
    }
    assert!(env.bucket_dir("operator-versions").exists(), "the operator's bucket stays");
}
