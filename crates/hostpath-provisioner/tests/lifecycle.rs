//! A claim's lifecycle rules (`additionalConfig` `bucketLifecycle`) with the real binary on the
//! real control plane: set on its bucket where the StorageClass allows them (`allowLifecycle`,
//! allowed unless `"false"`), read back over S3 with the claim's own Secret, acted on by the
//! endpoint's lifecycle pass, changed and removed with the claim, left alone for a claim that
//! never set them, and refused by name where they cannot be applied.

mod harness;

use std::collections::BTreeMap;

use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
    LifecycleRuleFilter,
};
use bucket_api::{ClaimPhase, ObjectBucketClaimSpec};
use harness::*;
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use serde_json::json;
use test_support::eventually;

/// 2020-01-01, long past: objects the rule applies to are due at the next pass.
const PAST: &str = "2020-01-01T00:00:00Z";
const PAST_SECS: i64 = 1_577_836_800;

fn expire_tmp() -> String {
    json!({ "Rules": [
        { "ID": "expire-tmp", "Status": "Enabled", "Filter": { "Prefix": "tmp/" },
          "Expiration": { "Date": PAST } },
        { "ID": "abort-uploads", "Status": "Enabled", "Filter": {},
          "AbortIncompleteMultipartUpload": { "DaysAfterInitiation": 7 } },
    ] })
    .to_string()
}

fn expire_logs(days: i32) -> String {
    json!({ "Rules": [{ "ID": "expire-logs", "Status": "Enabled", "Prefix": "logs/",
                        "Expiration": { "Days": days } }] })
    .to_string()
}

fn spec(class: &str, name: &str, lifecycle: Option<String>) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.to_owned(),
        generate_bucket_name: Some(name.into()),
        additional_config: lifecycle.map(|l| BTreeMap::from([("bucketLifecycle".to_owned(), l)])),
        ..Default::default()
    }
}

/// The bucket's rules as GetBucketLifecycleConfiguration answers them: ID, prefix, expiration
/// days and date (seconds), abort days.
type Answered = (String, Option<String>, Option<i32>, Option<i64>, Option<i32>);

async fn rules_of(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<Vec<Answered>, String> {
    let got = s3.get_bucket_lifecycle_configuration().bucket(bucket).send().await;
    let got = got.map_err(|e| code::<(), _>(Err(e)))?;
    Ok(got
        .rules()
        .iter()
        .map(|r| {
            let expiration = r.expiration();
            (
                r.id().unwrap_or_default().to_owned(),
                r.filter().and_then(|f| f.prefix()).map(str::to_owned),
                expiration.and_then(|e| e.days()),
                expiration.and_then(|e| e.date()).map(|d| d.secs()),
                r.abort_incomplete_multipart_upload().and_then(|a| a.days_after_initiation()),
            )
        })
        .collect())
}

#[tokio::test]
async fn a_claims_lifecycle_rules_are_applied_changed_and_removed_with_it() {
    let env = Env::new("hp-life").await;
    let provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    env.home().create("logs", spec(&class, "logs", Some(expire_tmp()))).await;
    env.wait("logs", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = env.s3_for("logs").await;

    let expected = vec![
        ("expire-tmp".to_owned(), Some("tmp/".to_owned()), None, Some(PAST_SECS), None),
        ("abort-uploads".to_owned(), None, None, None, Some(7)),
    ];
    assert_eq!(rules_of(&s3, &bucket).await.unwrap(), expected);

    // The endpoint acts on them: its pass at start expires what is under tmp/ only.
    put(&s3, &bucket, "tmp/scratch", b"old").await.unwrap();
    put(&s3, &bucket, "keep/data", b"kept").await.unwrap();
    provisioner.kill().await;
    let _provisioner = env.start("node-a");
    eventually("the lifecycle pass to expire tmp/scratch", || async {
        let gone = get(&s3, &bucket, "tmp/scratch").await.is_err_and(|e| e.contains("NoSuchKey"));
        gone.then_some(())
    })
    .await;
    assert_eq!(get(&s3, &bucket, "keep/data").await.unwrap(), b"kept");

    // Changed on the bound claim: the new rules replace the old.
    env.change_config("logs", json!({ "bucketLifecycle": expire_logs(30) })).await;
    let changed = vec![("expire-logs".to_owned(), Some("logs/".to_owned()), Some(30), None, None)];
    assert_eq!(rules_of(&s3, &bucket).await.unwrap(), changed);

    // Removed from the claim: the bucket has no rules any more.
    env.change_config("logs", json!({ "bucketLifecycle": null })).await;
    let none = rules_of(&s3, &bucket).await.unwrap_err();
    assert_eq!(none, "NoSuchLifecycleConfiguration");
}

#[tokio::test]
async fn rules_set_over_s3_stand_until_the_claim_itself_sets_some() {
    let env = Env::new("hp-life-own").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    env.home().create("plain", spec(&class, "plain", None)).await;
    env.wait("plain", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = env.s3_for("plain").await;

    let expiration = LifecycleExpiration::builder().days(3).build();
    let filter = LifecycleRuleFilter::builder().prefix("scratch/").build();
    let rule = LifecycleRule::builder().id("tenant").status(ExpirationStatus::Enabled);
    let rule = rule.filter(filter).expiration(expiration).build().unwrap();
    let config = BucketLifecycleConfiguration::builder().rules(rule).build().unwrap();
    let put_rules = s3.put_bucket_lifecycle_configuration().bucket(&bucket);
    put_rules.lifecycle_configuration(config).send().await.unwrap();
    let tenants = vec![("tenant".to_owned(), Some("scratch/".to_owned()), Some(3), None, None)];

    // A change of a claim that never carried the key leaves the tenant's rules alone.
    env.change_config("plain", json!({ "maxObjects": "100" })).await;
    assert_eq!(rules_of(&s3, &bucket).await.unwrap(), tenants);

    // The claim's key, once set, is what the bucket gets; dropped, it takes its rules away.
    env.change_config("plain", json!({ "bucketLifecycle": expire_logs(9) })).await;
    let claims = vec![("expire-logs".to_owned(), Some("logs/".to_owned()), Some(9), None, None)];
    assert_eq!(rules_of(&s3, &bucket).await.unwrap(), claims);
    env.change_config("plain", json!({ "bucketLifecycle": null })).await;
    assert_eq!(rules_of(&s3, &bucket).await.unwrap_err(), "NoSuchLifecycleConfiguration");
}

#[tokio::test]
async fn lifecycle_rules_are_refused_by_name_where_they_cannot_be_applied() {
    let env = Env::new("hp-life-bad").await;
    let _provisioner = env.start("node-a");
    let closed = env.class(&[("allowLifecycle", "false")], "Delete").await;
    let open = env.class(&[], "Delete").await;
    // An operator's bucket, which a claim is granted and may share with others.
    std::fs::create_dir_all(env.bucket_dir("operator-data")).unwrap();
    let granting = env.class(&[("bucketName", "operator-data")], "Delete").await;
    let home = env.home();
    let transitions = json!({ "Rules": [{ "ID": "cold", "Status": "Enabled", "Filter": {},
        "Transitions": [{ "Days": 30, "StorageClass": "GLACIER" }] }] });
    let typo = json!({ "Rules": [{ "Status": "Enabled", "Expiration": { "Dayz": 3 } }] });
    for (name, class, value) in [
        ("not-allowed", &closed, expire_logs(30)),
        ("moving", &open, transitions.to_string()),
        ("typo", &open, typo.to_string()),
        ("not-json", &open, "Rules: expire after 30 days".to_owned()),
        ("granted", &granting, expire_logs(30)),
    ] {
        home.create(name, spec(class, name, Some(value))).await;
    }
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    for (name, says) in [
        ("not-allowed", "allowLifecycle: \"true\""),
        ("moving", "rule 1: Transitions not supported"),
        ("typo", "unknown field `Dayz`"),
        ("not-json", "not the JSON of put-bucket-lifecycle-configuration"),
        ("granted", "only the claim that created a bucket sets them"),
    ] {
        let claim = env.wait(name, ClaimPhase::Failed, "InvalidParameters").await;
        let message = &claim.status.unwrap().conditions[0].message;
        assert!(message.contains("additionalConfig bucketLifecycle"), "{name}: {message}");
        assert!(message.contains(says), "{name}: {message}");
        eventually("an Event saying why", || async {
            let listed = events.list(&Default::default()).await.ok()?;
            listed.items.into_iter().find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                    && e.reason.as_deref() == Some("InvalidParameters")
                    && e.note.as_deref().is_some_and(|n| n.contains(says))
            })
        })
        .await;
    }
    let buckets = std::fs::read_dir(env.root.path().join("buckets")).unwrap().count();
    assert_eq!(buckets, 1, "nothing but the operator's bucket: none for a refused claim");
    assert!(env.home().secret("granted").await.is_none(), "a refused claim gets no key");
}
