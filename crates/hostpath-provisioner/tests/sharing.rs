//! Sharing a bucket inside a namespace end to end: `hostpath-bucket-provisioner` as a real
//! process against the real control plane, each claim used through its own Secret.

mod harness;

use bucket_api::{AccessMode, ClaimPhase, ObjectBucketClaimSpec};
use harness::*;

fn sharing(class: &str, from: &str, mode: Option<&str>) -> ObjectBucketClaimSpec {
    let mut config = vec![("shareFrom".to_string(), from.to_string())];
    if let Some(mode) = mode {
        config.push(("accessMode".to_string(), mode.to_string()));
    }
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        additional_config: Some(config.into_iter().collect()),
        ..Default::default()
    }
}

fn ready_message(claim: &bucket_api::ObjectBucketClaim) -> String {
    let status = claim.status.as_ref().unwrap();
    status.conditions.iter().find(|c| c.type_ == "Ready").unwrap().message.clone()
}

#[tokio::test]
async fn claims_of_a_namespace_share_a_bucket_and_lose_it_with_its_owner() {
    let env = Env::new("hp-share").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let home = env.home();
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let (app, bucket) = env.s3_for("app").await;
    put(&app, &bucket, "report.csv", b"from the app").await.unwrap();

    home.create("reader", sharing(&class, "app", Some("ReadOnly"))).await;
    home.create("writer", sharing(&class, "app", None)).await;
    let reader_claim = env.wait("reader", ClaimPhase::Bound, "Bound").await;
    let writer_claim = env.wait("writer", ClaimPhase::Bound, "Bound").await;
    assert_eq!(reader_claim.status.unwrap().access_mode, Some(AccessMode::ReadOnly));
    assert_eq!(writer_claim.status.unwrap().access_mode, Some(AccessMode::ReadWrite));
    let (reader, reader_bucket) = env.s3_for("reader").await;
    let (writer, _) = env.s3_for("writer").await;
    assert_eq!(reader_bucket, bucket, "the sharing claim's ConfigMap names the owner's bucket");
    let keys: std::collections::BTreeSet<String> = [
        env.env_of("app").await["AWS_ACCESS_KEY_ID"].clone(),
        env.env_of("reader").await["AWS_ACCESS_KEY_ID"].clone(),
        env.env_of("writer").await["AWS_ACCESS_KEY_ID"].clone(),
    ]
    .into();
    assert_eq!(keys.len(), 3, "a key of its own for each claim");
    assert_eq!(get(&reader, &bucket, "report.csv").await.unwrap(), b"from the app");
    assert_eq!(put(&reader, &bucket, "x", b"x").await, Err("AccessDenied".into()));
    put(&writer, &bucket, "from-writer", b"w").await.unwrap();
    assert_eq!(get(&app, &bucket, "from-writer").await.unwrap(), b"w");

    // Deleting a sharing claim revokes its key only; the bucket and the others stay.
    env.delete("reader").await;
    assert_eq!(get(&reader, &bucket, "report.csv").await, Err("InvalidAccessKeyId".into()));
    assert!(env.bucket_dir(&bucket).is_dir());
    assert_eq!(get(&writer, &bucket, "report.csv").await.unwrap(), b"from the app");

    // The owner's deletion under Delete takes the bucket and every sharing key with it.
    env.delete("app").await;
    assert!(!env.bucket_dir(&bucket).exists());
    let lost = env.wait("writer", ClaimPhase::Failed, "BucketLost").await;
    assert!(ready_message(&lost).contains("Delete this claim"), "{}", ready_message(&lost));
    assert_eq!(get(&writer, &bucket, "report.csv").await, Err("InvalidAccessKeyId".into()));
    let keys = std::fs::read_dir(env.root.path().join(".provisioner/keys")).unwrap().count();
    assert_eq!(keys, 0, "no key outlives the bucket");
    env.delete("writer").await;
}

#[tokio::test]
async fn sharing_never_crosses_a_namespace_nor_reveals_what_exists() {
    let env = Env::new("hp-share-ns").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    let (app, bucket) = env.s3_for("app").await;
    put(&app, &bucket, "secret.txt", b"team a only").await.unwrap();

    let other = env.tenant("hp-share-other").await;
    let refused = |name: &str| {
        let name = name.to_owned();
        let other = &other;
        async move { ready_message(&other.wait(&name, ClaimPhase::Failed, "ShareSourceNotFound").await) }
    };
    // By name (the same name exists in the other namespace), by a path, and a name that exists
    // nowhere: the same answer, but for the name quoted.
    other.create("by-name", sharing(&class, "app", None)).await;
    other.create("by-path", sharing(&class, &format!("{}/app", env.ns), None)).await;
    other.create("nothing", sharing(&class, "no-such-claim", None)).await;
    let by_name = refused("by-name").await;
    let by_path = refused("by-path").await;
    let nothing = refused("nothing").await;
    assert_eq!(by_name.replace("\"app\"", "N"), nothing.replace("\"no-such-claim\"", "N"));
    assert_eq!(
        by_path.replace(&format!("\"{}/app\"", env.ns), "N"),
        nothing.replace("\"no-such-claim\"", "N")
    );
    for claim in ["by-name", "by-path", "nothing"] {
        assert!(other.secret(claim).await.is_none(), "{claim} got no key");
    }

    // Inside its namespace, a claim that did not create its bucket (an operator's) is not
    // shareable either, and answers the same way.
    std::fs::create_dir_all(env.bucket_dir("operator-data")).unwrap();
    let operator = env.class(&[("bucketName", "operator-data")], "Delete").await;
    env.claim("granted", &operator, None).await;
    env.wait("granted", ClaimPhase::Bound, "Bound").await;
    env.home().create("second-hand", sharing(&class, "granted", None)).await;
    let claim = env.wait("second-hand", ClaimPhase::Failed, "ShareSourceNotFound").await;
    assert_eq!(
        ready_message(&claim).replace("\"granted\"", "N"),
        nothing.replace("\"no-such-claim\"", "N")
    );
}

/// SIGKILL as soon as the owner's deletion marks the sharing claim lost (before or just after
/// its key is revoked): the restarted process finishes the deletion, the sharing claim ends
/// `BucketLost` without a key, and nothing is left behind.
#[tokio::test]
async fn a_crash_during_the_owners_deletion_leaves_no_key_and_no_stuck_claim() {
    use bucket_api::ObjectBucket;
    use kube::api::{Api, DeleteParams};
    use test_support::eventually;

    let env = Env::new("hp-share-crash").await;
    let mut provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    env.claim("app", &class, None).await;
    env.wait("app", ClaimPhase::Bound, "Bound").await;
    env.home().create("writer", sharing(&class, "app", None)).await;
    let writer = env.wait("writer", ClaimPhase::Bound, "Bound").await;
    let (writer_s3, bucket) = env.s3_for("writer").await;
    put(&writer_s3, &bucket, "w", b"w").await.unwrap();
    let buckets: Api<ObjectBucket> = Api::all(env.client.clone());
    let writer_ob = writer.spec.object_bucket_name.unwrap();

    env.claims.delete("app", &DeleteParams::default()).await.unwrap();
    eventually("the sharing claim to be marked lost", || async {
        let ob = buckets.get(&writer_ob).await.ok()?;
        ob.metadata.annotations?.contains_key("objectbucket.io/bucket-lost").then_some(())
    })
    .await;
    provisioner.kill().await;
    provisioner = env.start("node-a");

    env.wait("writer", ClaimPhase::Failed, "BucketLost").await;
    eventually("the owner to be gone", || async {
        env.claims.get_opt("app").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(!env.bucket_dir(&bucket).exists());
    let refused = eventually("the endpoint to answer again", || async {
        let answer = get(&writer_s3, &bucket, "w").await;
        (answer != Err("unknown".into())).then_some(answer)
    })
    .await;
    assert_eq!(refused, Err("InvalidAccessKeyId".into()));
    env.delete("writer").await;
    let keys = std::fs::read_dir(env.root.path().join(".provisioner/keys")).unwrap().count();
    assert_eq!(keys, 0, "no key left behind");
    drop(provisioner);
}

/// What `s3` gets asking to change each bucket-wide setting of `bucket`: the error code, or
/// `"ok"`.
async fn setting_answers(s3: &aws_sdk_s3::Client, bucket: &str) -> Vec<(&'static str, String)> {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, BucketVersioningStatus, CorsConfiguration, CorsRule,
        ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter,
        VersioningConfiguration,
    };
    // Expire everything, at once: what a hostile sharer would leave behind.
    let expire = LifecycleExpiration::builder().days(1).build();
    let rule = LifecycleRule::builder().id("all").status(ExpirationStatus::Enabled);
    let rule = rule.filter(LifecycleRuleFilter::builder().prefix("").build());
    let lifecycle = BucketLifecycleConfiguration::builder()
        .rules(rule.expiration(expire).build().unwrap())
        .build()
        .unwrap();
    let cors = CorsRule::builder()
        .allowed_origins("https://attacker.example")
        .allowed_methods("GET")
        .allowed_methods("PUT")
        .allowed_methods("DELETE")
        .build()
        .unwrap();
    let cors = CorsConfiguration::builder().cors_rules(cors).build().unwrap();
    let versioning =
        VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled).build();
    vec![
        (
            "lifecycle",
            code(
                s3.put_bucket_lifecycle_configuration()
                    .bucket(bucket)
                    .lifecycle_configuration(lifecycle)
                    .send()
                    .await,
            ),
        ),
        ("cors", code(s3.put_bucket_cors().bucket(bucket).cors_configuration(cors).send().await)),
        (
            "versioning",
            code(
                s3.put_bucket_versioning()
                    .bucket(bucket)
                    .versioning_configuration(versioning)
                    .send()
                    .await,
            ),
        ),
    ]
}

#[tokio::test]
async fn a_sharer_changes_no_bucket_wide_setting_and_the_owner_only_what_its_class_allows() {
    let env = Env::new("hp-share-settings").await;
    let _provisioner = env.start("node-a");
    // Lifecycle rules forbidden; CORS and versioning off by default.
    let class = env.class(&[("allowLifecycle", "false")], "Delete").await;
    let home = env.home();
    env.claim("owner", &class, None).await;
    env.wait("owner", ClaimPhase::Bound, "Bound").await;
    let (owner, bucket) = env.s3_for("owner").await;
    for i in 0..5 {
        put(&owner, &bucket, &format!("precious-{i}"), b"the owner's").await.unwrap();
    }
    home.create("sharer", sharing(&class, "owner", None)).await;
    env.wait("sharer", ClaimPhase::Bound, "Bound").await;
    let (sharer, _) = env.s3_for("sharer").await;
    put(&sharer, &bucket, "from-sharer", b"s").await.expect("the sharer writes objects");

    let denied = |answers: Vec<(&'static str, String)>| {
        answers.into_iter().filter(|(_, a)| a != "AccessDenied").collect::<Vec<_>>()
    };
    assert_eq!(denied(setting_answers(&sharer, &bucket).await), [], "the sharer sets nothing");
    assert_eq!(denied(setting_answers(&owner, &bucket).await), [], "nor the owner, past its class");

    env.delete("sharer").await;
    let lifecycle = owner.get_bucket_lifecycle_configuration().bucket(&bucket).send().await;
    assert_eq!(code(lifecycle), "NoSuchLifecycleConfiguration", "no rule was left behind");
    for i in 0..5 {
        assert_eq!(get(&owner, &bucket, &format!("precious-{i}")).await.unwrap(), b"the owner's");
    }

    // A class allowing CORS rules lets the creator's key set them, and only them.
    let open = env.class(&[("allowLifecycle", "false"), ("allowCors", "true")], "Delete").await;
    env.claim("open", &open, None).await;
    env.wait("open", ClaimPhase::Bound, "Bound").await;
    let (open_s3, open_bucket) = env.s3_for("open").await;
    let answers = setting_answers(&open_s3, &open_bucket).await;
    let allowed: Vec<_> = answers.iter().filter(|(_, a)| a == "ok").map(|(s, _)| *s).collect();
    assert_eq!(allowed, ["cors"], "{answers:?}");
}
