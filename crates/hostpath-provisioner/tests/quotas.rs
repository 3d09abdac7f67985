//! Quotas from claims' `additionalConfig` with the real binary on the real control plane:
//! claims written for Rook and NooBaa bind and are held to their quotas, changes to a bound
//! claim take effect, usage is on the ObjectBucket and survives a crash, and bad keys fail.

mod harness;

use std::path::Path;

use bucket_api::{BucketUsage, ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use harness::*;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::eventually;

/// The usual flags, with usage reported every second.
const FLAGS: [&str; 2] = ["--leader-elect=false", "--usage-interval-seconds=1"];

/// The claim of `tests/manifests/<file>`, created on a new class and Bound; the S3 client made
/// from its Secret and ConfigMap, and its bucket.
async fn bound_from_manifest(env: &Env, file: &str) -> (aws_sdk_s3::Client, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/manifests").join(file);
    let text = std::fs::read_to_string(path).unwrap();
    let mut claim: ObjectBucketClaim = serde_yaml::from_str(&text).unwrap();
    claim.spec.storage_class_name = env.class(&[], "Delete").await;
    let name = claim.metadata.name.clone().unwrap();
    env.claims.create(&PostParams::default(), &claim).await.unwrap();
    env.wait(&name, ClaimPhase::Bound, "Bound").await;
    env.s3_for(&name).await
}

fn object_bucket_name(env: &Env, claim: &str) -> String {
    format!("obc-{}-{claim}", env.ns)
}

/// Merges `config` into the claim's `additionalConfig` (null removes a key) and waits until
/// the ObjectBucket records the result, which happens once the backend applied it.
async fn change_config(env: &Env, claim: &str, config: serde_json::Value) {
    let patch = json!({ "spec": { "additionalConfig": config } });
    let patched =
        env.claims.patch(claim, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let wanted = patched.spec.additional_config.filter(|c| !c.is_empty());
    let buckets: Api<ObjectBucket> = Api::all(env.client.clone());
    let name = object_bucket_name(env, claim);
    eventually("the ObjectBucket to record the new additionalConfig", || async {
        let recorded = buckets.get(&name).await.ok()?.spec.endpoint?.additional_config;
        (recorded.filter(|c| !c.is_empty()) == wanted).then_some(())
    })
    .await;
}

async fn usage_of(env: &Env, claim: &str, expected: &BucketUsage) {
    let buckets: Api<ObjectBucket> = Api::all(env.client.clone());
    let name = object_bucket_name(env, claim);
    eventually(&format!("usage {expected:?} on the ObjectBucket"), || async {
        let usage = buckets.get(&name).await.ok()?.status?.usage?;
        // What it holds; the quota it may hold is checked where a test sets it.
        let held = BucketUsage { max_objects: None, max_bytes: None, ..usage };
        (held == *expected).then_some(())
    })
    .await;
}

async fn metrics(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

fn usage(objects: u64, bytes: u64) -> BucketUsage {
    BucketUsage {
        objects,
        bytes,
        claim_objects: Some(objects),
        claim_bytes: Some(bytes),
        ..BucketUsage::default()
    }
}

#[tokio::test]
async fn a_rook_claim_binds_and_its_quotas_follow_the_claim() {
    let env = Env::new("hp-rook").await;
    let provisioner = env.start_with("node-a", &FLAGS);
    let (s3, bucket) = bound_from_manifest(&env, "rook-claim.yaml").await;
    put(&s3, &bucket, "a", b"first").await.unwrap();
    put(&s3, &bucket, "b", b"second").await.unwrap();

    // Lowered below what is stored: writes stop, nothing is deleted.
    change_config(&env, "ceph-bucket", json!({ "maxObjects": "1" })).await;
    assert_eq!(put(&s3, &bucket, "c", b"third").await, Err("QuotaExceeded".into()));
    assert_eq!(get(&s3, &bucket, "a").await.unwrap(), b"first");
    assert_eq!(get(&s3, &bucket, "b").await.unwrap(), b"second");

    // Raised: room for exactly one more.
    change_config(&env, "ceph-bucket", json!({ "maxObjects": "3" })).await;
    put(&s3, &bucket, "c", b"third").await.unwrap();
    assert_eq!(put(&s3, &bucket, "d", b"fourth").await, Err("QuotaExceeded".into()));

    // The bucket's own quota holds too, and removing both lifts the limit.
    change_config(&env, "ceph-bucket", json!({ "maxObjects": null, "bucketMaxObjects": "3" }))
        .await;
    assert_eq!(put(&s3, &bucket, "d", b"fourth").await, Err("QuotaExceeded".into()));
    change_config(&env, "ceph-bucket", json!({ "bucketMaxObjects": null })).await;
    put(&s3, &bucket, "d", b"fourth").await.unwrap();

    usage_of(&env, "ceph-bucket", &usage(4, 5 + 6 + 5 + 6)).await;
    let text = metrics(provisioner.metrics_port).await;
    let line = format!("bucket_provisioner_bucket_objects{{bucket=\"{bucket}\"}} 4\n");
    assert!(text.contains(&line), "{text}");
    // The bucket's byte quota (bucketMaxSize) stays: the near-quota alert's denominator.
    let quota = format!("bucket_provisioner_bucket_quota_bytes{{bucket=\"{bucket}\"}} ");
    assert!(text.contains(&quota), "{text}");
    assert!(!text.contains("bucket_quota_objects{"), "no object quota is left: {text}");
    // Every answer of the endpoint is counted: the refused writes among the 4xx.
    let counted = |class: &str| {
        let prefix = format!("bucket_provisioner_s3_responses_total{{code=\"{class}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)?.parse::<f64>().ok()).unwrap_or(0.0)
    };
    assert!(counted("4xx") >= 3.0 && counted("2xx") >= 6.0, "{text}");
}

#[tokio::test]
async fn a_noobaa_claim_binds_with_its_quota() {
    let env = Env::new("hp-noobaa").await;
    let _provisioner = env.start_with("node-a", &FLAGS);
    let (s3, bucket) = bound_from_manifest(&env, "noobaa-claim.yaml").await;
    put(&s3, &bucket, "report.csv", b"a,b\n1,2\n").await.unwrap();
    assert_eq!(get(&s3, &bucket, "report.csv").await.unwrap(), b"a,b\n1,2\n");

    // Lowered to exactly what is stored (8 bytes), one byte more is refused; at 1Gi it fits.
    change_config(&env, "my-bucket-claim", json!({ "maxSize": "8" })).await;
    assert_eq!(put(&s3, &bucket, "more", b"x").await, Err("QuotaExceeded".into()));
    change_config(&env, "my-bucket-claim", json!({ "maxSize": "1Gi" })).await;
    put(&s3, &bucket, "more", b"x").await.unwrap();
    usage_of(&env, "my-bucket-claim", &usage(2, 9)).await;
}

#[tokio::test]
async fn multipart_uploads_and_copies_meet_the_claims_quota_too() {
    let env = Env::new("hp-quota-ways").await;
    let _provisioner = env.start_with("node-a", &FLAGS);
    let class = env.class(&[], "Delete").await;
    let spec = ObjectBucketClaimSpec {
        storage_class_name: class,
        generate_bucket_name: Some("ways".into()),
        additional_config: Some([("maxSize".to_string(), "8Mi".to_string())].into()),
        ..Default::default()
    };
    env.home().create("ways", spec).await;
    env.wait("ways", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = env.s3_for("ways").await;

    let upload = s3.create_multipart_upload().bucket(&bucket).key("big").send().await.unwrap();
    let part = |number: i32| {
        s3.upload_part()
            .bucket(&bucket)
            .key("big")
            .upload_id(upload.upload_id().unwrap())
            .part_number(number)
            .body(vec![number as u8; 5 << 20].into())
            .send()
    };
    part(1).await.unwrap();
    assert_eq!(code(part(2).await), "QuotaExceeded", "10 MiB of parts would pass 8Mi");
    let uploads = s3.list_multipart_uploads().bucket(&bucket).send().await.unwrap();
    assert_eq!(uploads.uploads().len(), 1);
    s3.abort_multipart_upload()
        .bucket(&bucket)
        .key("big")
        .upload_id(upload.upload_id().unwrap())
        .send()
        .await
        .unwrap();

    put(&s3, &bucket, "half", &vec![7; 5 << 20]).await.unwrap();
    let copy = s3.copy_object().bucket(&bucket).key("twice").copy_source(format!("{bucket}/half"));
    assert_eq!(code(copy.send().await), "QuotaExceeded");
    let listed = s3.list_objects_v2().bucket(&bucket).send().await.unwrap();
    let keys: Vec<_> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["half"], "nothing of the refused writes was stored");
    usage_of(&env, "ways", &usage(1, 5 << 20)).await;
}

#[tokio::test]
async fn usage_and_quotas_survive_a_crash_of_the_provisioner() {
    let env = Env::new("hp-quota-crash").await;
    let first = env.start_with("node-a", &FLAGS);
    let class = env.class(&[], "Delete").await;
    let config = [("maxObjects".to_string(), "3".to_string())].into();
    let spec = ObjectBucketClaimSpec {
        storage_class_name: class,
        generate_bucket_name: Some("durable".into()),
        additional_config: Some(config),
        ..Default::default()
    };
    env.home().create("durable", spec).await;
    env.wait("durable", ClaimPhase::Bound, "Bound").await;
    let (s3, bucket) = env.s3_for("durable").await;
    for key in ["a", "b", "c"] {
        put(&s3, &bucket, key, b"12345").await.unwrap();
    }
    // Killed at once, most likely before the usage was saved as settled.
    first.kill().await;

    let _second = env.start_with("node-a", &FLAGS);
    eventually("the endpoint to answer again", || async { get(&s3, &bucket, "a").await.ok() })
        .await;
    assert_eq!(put(&s3, &bucket, "d", b"12345").await, Err("QuotaExceeded".into()));
    usage_of(&env, "durable", &usage(3, 15)).await;
    s3.delete_object().bucket(&bucket).key("a").send().await.unwrap();
    put(&s3, &bucket, "d", b"12345").await.unwrap();
}

#[tokio::test]
async fn claims_sharing_a_bucket_have_quotas_of_their_own() {
    let env = Env::new("hp-quota-shared").await;
    let _provisioner = env.start_with("node-a", &FLAGS);
    std::fs::create_dir_all(env.bucket_dir("team-share")).unwrap();
    let class = env.class(&[("bucketName", "team-share")], "Delete").await;
    let limited = |config: &[(&str, &str)]| ObjectBucketClaimSpec {
        storage_class_name: class.clone(),
        additional_config: Some(
            config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ),
        ..Default::default()
    };
    let home = env.home();
    home.create("small", limited(&[("maxObjects", "1")])).await;
    home.create("free", limited(&[])).await;
    // The bucket is not theirs to limit: others share it.
    home.create("bossy", limited(&[("bucketMaxObjects", "1")])).await;
    env.wait("small", ClaimPhase::Bound, "Bound").await;
    env.wait("free", ClaimPhase::Bound, "Bound").await;
    let bossy = env.wait("bossy", ClaimPhase::Failed, "InvalidParameters").await;
    let message = &bossy.status.unwrap().conditions[0].message;
    assert!(message.contains("only the claim that created a bucket sets them"), "{message}");

    let (small, bucket) = env.s3_for("small").await;
    let (free, _) = env.s3_for("free").await;
    put(&small, &bucket, "small/1", b"s").await.unwrap();
    assert_eq!(put(&small, &bucket, "small/2", b"s").await, Err("QuotaExceeded".into()));
    for i in 0..3 {
        put(&free, &bucket, &format!("free/{i}"), b"f").await.unwrap();
    }
    // Deleting another claim's object frees room for the one that stored it, not the deleter.
    free.delete_object().bucket(&bucket).key("small/1").send().await.unwrap();
    put(&small, &bucket, "small/2", b"s").await.unwrap();
    let expected = BucketUsage {
        objects: 4,
        bytes: 4,
        claim_objects: Some(1),
        claim_bytes: Some(1),
        ..BucketUsage::default()
    };
    usage_of(&env, "small", &expected).await;
}

#[tokio::test]
async fn unknown_keys_and_bad_values_fail_the_claim_saying_what_is_accepted() {
    let env = Env::new("hp-quota-bad").await;
    let _provisioner = env.start_with("node-a", &FLAGS);
    let class = env.class(&[], "Delete").await;
    let home = env.home();
    for (name, key, value) in [
        ("policy", "bucketPolicy", "{\"Version\":\"2012-10-17\"}"),
        ("typo", "maxObject", "10"),
        ("units", "maxSize", "2GB"),
        ("versioned", "versioning", "Enabled"),
        ("locked", "objectLock", "{\"ObjectLockEnabled\":\"Enabled\"}"),
        ("expiring", "bucketLifecycle", "{\"Rules\":[]}"),
    ] {
        let spec = ObjectBucketClaimSpec {
            storage_class_name: class.clone(),
            generate_bucket_name: Some(name.into()),
            additional_config: Some([(key.to_string(), value.to_string())].into()),
            ..Default::default()
        };
        home.create(name, spec).await;
    }
    for (name, says) in [
        ("policy", "bucketPolicy (not supported: its S3 endpoint has no bucket policies)"),
        ("typo", "accepts maxObjects, maxSize, bucketMaxObjects, bucketMaxSize"),
        ("units", "maxSize \"2GB\" has an unknown unit"),
        ("versioned", "versioning is not allowed by the StorageClass"),
        ("locked", "objectLock is not allowed by the StorageClass"),
        ("expiring", "additionalConfig bucketLifecycle: Rules holds 0 rules"),
    ] {
        let claim = env.wait(name, ClaimPhase::Failed, "InvalidParameters").await;
        let message = &claim.status.unwrap().conditions[0].message;
        assert!(message.contains(says), "{name}: {message}");
    }
    let buckets = std::fs::read_dir(env.root.path().join("buckets")).unwrap().count();
    assert_eq!(buckets, 0, "nothing was created for a refused claim");
}
