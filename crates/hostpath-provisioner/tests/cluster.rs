//! `hostpath-bucket-provisioner` as a real process against the real control plane, used through
//! the credentials it writes, with the AWS SDK as the client.

mod harness;

use std::collections::BTreeSet;
use std::time::Duration;

use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaimSpec, ObjectBucketPhase};
use harness::*;
use kube::api::{Api, DeleteParams};
use test_support::eventually;

#[tokio::test]
async fn claim_lifecycle_with_real_objects() {
    let env = Env::new("hp-life").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    env.claim("photos", &class, None).await;
    env.wait("photos", ClaimPhase::Bound, "Bound").await;

    let (s3, bucket) = env.s3_for("photos").await;
    assert!(env.bucket_dir(&bucket).is_dir(), "the bucket is a directory under the root");
    put(&s3, &bucket, "albums/2026/cat.jpg", b"meow").await.unwrap();
    put(&s3, &bucket, "albums/2026/dog.jpg", b"woof").await.unwrap();
    assert_eq!(get(&s3, &bucket, "albums/2026/cat.jpg").await.unwrap(), b"meow");
    let listed = s3.list_objects_v2().bucket(&bucket).prefix("albums/").send().await.unwrap();
    let keys: Vec<_> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["albums/2026/cat.jpg", "albums/2026/dog.jpg"]);
    let buckets = s3.list_buckets().send().await.unwrap();
    let names: Vec<_> = buckets.buckets().iter().filter_map(|b| b.name()).collect();
    assert_eq!(names, [bucket.as_str()]);

    env.delete("photos").await;
    assert!(!env.bucket_dir(&bucket).exists(), "the Delete policy removes the directory");
}

#[tokio::test]
async fn keys_are_isolated_between_claims() {
    let env = Env::new("hp-iso").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    env.claim("alice", &class, None).await;
    env.claim("bob", &class, None).await;
    env.wait("alice", ClaimPhase::Bound, "Bound").await;
    env.wait("bob", ClaimPhase::Bound, "Bound").await;
    let (alice, alice_bucket) = env.s3_for("alice").await;
    let (bob, bob_bucket) = env.s3_for("bob").await;
    put(&alice, &alice_bucket, "diary", b"private").await.unwrap();

    assert_eq!(get(&bob, &alice_bucket, "diary").await, Err("AccessDenied".into()));
    assert_eq!(put(&bob, &alice_bucket, "graffiti", b"x").await, Err("AccessDenied".into()));
    assert_eq!(put(&alice, &bob_bucket, "graffiti", b"x").await, Err("AccessDenied".into()));
    let listed = bob.list_objects_v2().bucket(&alice_bucket).send().await;
    assert_eq!(listed.unwrap_err().into_service_error().code(), Some("AccessDenied"));
}

#[tokio::test]
async fn static_bucket_grant_and_revoke_keep_the_data() {
    let env = Env::new("hp-static").await;
    let _provisioner = env.start("node-a");
    // The operator's bucket: a directory made by hand under the root.
    std::fs::create_dir_all(env.bucket_dir("team-share")).unwrap();
    std::fs::write(env.bucket_dir("team-share").join("readme.txt"), b"hello team").unwrap();
    let class = env.class(&[("bucketName", "team-share")], "Delete").await;
    env.claim("member", &class, None).await;
    env.wait("member", ClaimPhase::Bound, "Bound").await;

    let (s3, bucket) = env.s3_for("member").await;
    assert_eq!(bucket, "team-share");
    assert_eq!(get(&s3, &bucket, "readme.txt").await.unwrap(), b"hello team");
    put(&s3, &bucket, "notes.txt", b"from the claim").await.unwrap();

    env.delete("member").await;
    assert_eq!(get(&s3, &bucket, "readme.txt").await, Err("InvalidAccessKeyId".into()));
    assert_eq!(
        std::fs::read(env.bucket_dir("team-share").join("notes.txt")).unwrap(),
        b"from the claim"
    );
}

#[tokio::test]
async fn retain_keeps_the_data() {
    let env = Env::new("hp-retain").await;
    let _provisioner = env.start("node-a");
    let (s3, bucket) = env.bound("archive", "Retain").await;
    put(&s3, &bucket, "2025.tar", b"old data").await.unwrap();

    env.delete("archive").await;
    assert_eq!(std::fs::read(env.bucket_dir(&bucket).join("2025.tar")).unwrap(), b"old data");
    let ob: ObjectBucket =
        Api::all(env.client.clone()).get(&format!("obc-{}-archive", env.ns)).await.unwrap();
    assert_eq!(ob.status.and_then(|s| s.phase), Some(ObjectBucketPhase::Released));
}

#[tokio::test]
async fn another_identity_never_deletes_the_bucket() {
    let env = Env::new("hp-foreign").await;
    let first = env.start("node-a");
    let (s3, bucket) = env.bound("owned", "Delete").await;
    put(&s3, &bucket, "keep", b"mine").await.unwrap();
    first.kill().await;

    // The same root served by a process with another identity.
    let _second = env.start("node-b");
    env.delete("owned").await;
    assert_eq!(std::fs::read(env.bucket_dir(&bucket).join("keep")).unwrap(), b"mine");
    let ob: ObjectBucket =
        Api::all(env.client.clone()).get(&format!("obc-{}-owned", env.ns)).await.unwrap();
    let status = ob.status.unwrap();
    assert_eq!(status.phase, Some(ObjectBucketPhase::Failed));
    let message = &status.conditions[0].message;
    assert!(message.contains("left alone"), "{message}");
}

#[tokio::test]
async fn path_escapes_in_names_are_rejected() {
    let env = Env::new("hp-escape").await;
    let _provisioner = env.start("node-a");
    let class = env.class(&[], "Delete").await;
    let escaping_class = env.class(&[("bucketName", "../outside")], "Delete").await;
    env.claim("dots", &class, Some("../../etc")).await;
    env.claim("absolute", &class, Some("/etc/passwd")).await;
    env.claim("via-class", &escaping_class, None).await;
    env.wait("dots", ClaimPhase::Failed, "InvalidBucketName").await;
    env.wait("absolute", ClaimPhase::Failed, "InvalidBucketName").await;
    env.wait("via-class", ClaimPhase::Failed, "InvalidStorageClass").await;
    let parent = env.root.path().parent().unwrap();
    assert!(!parent.join("outside").exists() && !parent.join("etc").exists());
    let buckets =
        std::fs::read_dir(env.root.path().join("buckets")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(buckets, 0, "nothing was created");
}

#[tokio::test]
async fn keys_keep_working_after_a_restart() {
    let env = Env::new("hp-restart").await;
    let first = env.start("node-a");
    let (s3, bucket) = env.bound("durable", "Delete").await;
    put(&s3, &bucket, "before", b"restart").await.unwrap();
    first.kill().await;

    let _second = env.start("node-a");
    let body = eventually("the endpoint to answer again", || async {
        get(&s3, &bucket, "before").await.ok()
    })
    .await;
    assert_eq!(body, b"restart");
    put(&s3, &bucket, "after", b"still mine").await.unwrap();
}

#[tokio::test]
async fn multipart_upload_of_a_large_object_keeps_memory_flat() {
    let env = Env::new("hp-large").await;
    let provisioner = env.start("node-a");
    let (s3, bucket) = env.bound("large", "Delete").await;
    let baseline = provisioner.peak_rss_kib();

    // 24 MiB in three 8 MiB parts, each part distinct so misplaced parts would show.
    let parts: Vec<Vec<u8>> = (0..3u8)
        .map(|i| (0..8 << 20).map(|j: u32| (j as u8) ^ i.wrapping_mul(37)).collect())
        .collect();
    let upload = s3.create_multipart_upload().bucket(&bucket).key("big.bin").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let mut completed = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let number = i as i32 + 1;
        let out = s3
            .upload_part()
            .bucket(&bucket)
            .key("big.bin")
            .upload_id(id)
            .part_number(number)
            .body(ByteStream::from(part.clone()))
            .send()
            .await
            .unwrap();
        completed
            .push(CompletedPart::builder().part_number(number).e_tag(out.e_tag().unwrap()).build());
    }
    s3.complete_multipart_upload()
        .bucket(&bucket)
        .key("big.bin")
        .upload_id(id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(completed)).build())
        .send()
        .await
        .unwrap();
    let body = get(&s3, &bucket, "big.bin").await.unwrap();
    assert_eq!(body.len(), 24 << 20);
    assert!(body == parts.concat(), "the object reads back byte for byte");

    let grown_mib = provisioner.peak_rss_kib().saturating_sub(baseline) / 1024;
    assert!(grown_mib < 16, "the provisioner's peak memory grew by {grown_mib} MiB for 24 MiB");

    // A 64 MiB single PUT: buffering it whole would show up as at least that much memory.
    let single: Vec<u8> = (0..64u32 << 20).map(|j| (j % 251) as u8).collect();
    put(&s3, &bucket, "single.bin", &single).await.unwrap();
    assert!(get(&s3, &bucket, "single.bin").await.unwrap() == single);
    let grown_mib = provisioner.peak_rss_kib().saturating_sub(baseline) / 1024;
    assert!(grown_mib < 32, "the provisioner's peak memory grew by {grown_mib} MiB for 64 MiB");
}

#[tokio::test]
async fn the_deployed_rbac_is_enough_for_a_whole_lifecycle() {
    let env = Env::new("hp-rbac").await;
    // Every Env runs the provisioner as its ServiceAccount with the deployed RBAC; this one also
    // elects a leader in the deployed namespace, as the Deployment does.
    let _provisioner = env.start_with(
        "node-a",
        &["--leader-elect=true", "--leader-election-namespace=bucket-provisioner"],
    );

    let (s3, bucket) = env.bound("least", "Delete").await;
    put(&s3, &bucket, "object", b"with least privilege").await.unwrap();
    env.delete("least").await;
    assert!(!env.bucket_dir(&bucket).exists());
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.client.clone(), &env.ns);
    let recorded = events.list(&Default::default()).await.unwrap();
    assert!(recorded.items.iter().any(|e| e.reason.as_deref() == Some("Deleted")));
}

#[tokio::test]
async fn operator_bucket_is_granted_to_a_claim_and_outlives_it() {
    let env = Env::new("hp-admin").await;
    let admin_secret = env.admin_secret("s3-admin", ("OPERATOR01", "operator-secret-0123")).await;
    let _provisioner = env.start_with("node-a", &["--leader-elect=false", &admin_secret]);
    let admin = s3_with(env.port, "OPERATOR01", "operator-secret-0123");
    eventually("the operator to create a bucket", || async {
        admin.create_bucket().bucket("team-share").send().await.ok()
    })
    .await;
    put(&admin, "team-share", "seed.txt", b"from the operator").await.unwrap();

    let class = env.class(&[("bucketName", "team-share")], "Delete").await;
    env.claim("member", &class, None).await;
    env.wait("member", ClaimPhase::Bound, "Bound").await;
    let (claim, bucket) = env.s3_for("member").await;
    assert_eq!(bucket, "team-share");
    assert_eq!(get(&claim, &bucket, "seed.txt").await.unwrap(), b"from the operator");
    put(&claim, &bucket, "from-claim.txt", b"written by the claim").await.unwrap();

    // Claim keys keep exactly their powers; a bound bucket cannot be deleted.
    assert_eq!(code(claim.create_bucket().bucket("claims-cannot").send().await), "AccessDenied");
    assert_eq!(code(claim.delete_bucket().bucket(&bucket).send().await), "AccessDenied");
    assert_eq!(code(admin.delete_bucket().bucket(&bucket).send().await), "InvalidBucketState");

    env.delete("member").await;
    assert_eq!(get(&admin, &bucket, "from-claim.txt").await.unwrap(), b"written by the claim");
    assert_eq!(code(admin.delete_bucket().bucket(&bucket).send().await), "BucketNotEmpty");
    for key in ["seed.txt", "from-claim.txt"] {
        admin.delete_object().bucket(&bucket).key(key).send().await.unwrap();
    }
    admin.delete_bucket().bucket(&bucket).send().await.unwrap();
    assert!(!env.bucket_dir(&bucket).exists());
}

/// The process killed (SIGKILL) at arbitrary moments while a burst of claims is provisioned,
/// then while they are deleted: every claim ends Bound to a bucket of its own whose key works
/// there and nowhere else, nothing is made twice or left behind, and deletion removes it all.
#[tokio::test]
async fn a_burst_of_claims_survives_repeated_crashes() {
    const CLAIMS: usize = 60;
    let env = Env::new("hp-crash").await;
    let class = env.class(&[], "Delete").await;
    let home = env.home();
    let names: Vec<String> = (0..CLAIMS).map(|i| format!("burst-{i}")).collect();
    let mut provisioner = env.start("node-a");
    for name in &names {
        // One prefix for all, so generated names are as likely to meet as they can be.
        let spec = ObjectBucketClaimSpec {
            storage_class_name: class.clone(),
            generate_bucket_name: Some("burst".into()),
            ..Default::default()
        };
        home.create(name, spec).await;
    }
    for pause in [100, 250, 150, 300, 200, 400, 250, 600] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        provisioner.kill().await;
        provisioner = env.start("node-a");
    }

    let mut buckets = BTreeSet::new();
    let mut clients = Vec::new();
    for name in &names {
        home.wait(name, ClaimPhase::Bound, "Bound").await;
        let (s3, bucket) = home.s3_for(name).await;
        put(&s3, &bucket, "owner", name.as_bytes()).await.unwrap();
        assert!(buckets.insert(bucket.clone()), "{bucket} is bound to two claims");
        clients.push((s3, bucket));
    }
    let listed = |dir: &str| -> BTreeSet<String> {
        std::fs::read_dir(env.root.path().join(dir))
            .map(|entries| {
                entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(listed("buckets"), buckets, "one directory per claim, none left by a crash");
    let keys = listed(".provisioner/keys");
    assert_eq!(keys.len(), CLAIMS, "one key per claim, none left by a crash: {keys:?}");
    for (i, (s3, bucket)) in clients.iter().enumerate() {
        assert_eq!(get(s3, bucket, "owner").await.unwrap(), names[i].as_bytes());
        let (_, next) = &clients[(i + 1) % CLAIMS];
        let denied = s3.get_object().bucket(next).key("owner").send().await;
        assert_eq!(code(denied), "AccessDenied", "{bucket}'s key reached {next}");
    }

    for name in &names {
        env.claims.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for pause in [30, 120, 60, 200, 100] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        provisioner.kill().await;
        provisioner = env.start("node-a");
    }
    for name in &names {
        eventually(&format!("claim {name} to be gone"), || async {
            env.claims.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await;
    }
    assert_eq!(listed("buckets"), BTreeSet::new(), "every bucket went with its claim");
    assert_eq!(listed(".provisioner/keys"), BTreeSet::new(), "every key went with its claim");
    drop(provisioner);
}

/// `--log-format json` at every level: each line one JSON object, the claim's lines carrying its
/// `namespace/name`, and the claim's secret key nowhere, in plain or in base64.
#[tokio::test]
async fn json_logs_carry_the_claim_and_never_its_secret_at_any_level() {
    use base64::Engine;
    let env = Env::new("hp-json").await;
    let log_dir = tempfile::tempdir().unwrap();
    let log_path = log_dir.path().join("provisioner.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let flags = ["--leader-elect=false", "--log-format=json"];
    let provisioner = Provisioner::start_logging(
        env.root.path(),
        &env.name,
        "node-a",
        env.port,
        &env.kubeconfig,
        &flags,
        ("trace", log.into()),
    );
    let (s3, bucket) = env.bound("logged", "Delete").await;
    put(&s3, &bucket, "object", b"logged").await.unwrap();
    let secret = env.env_of("logged").await["AWS_SECRET_ACCESS_KEY"].clone();
    env.delete("logged").await;
    provisioner.kill().await;

    let text = std::fs::read_to_string(&log_path).unwrap();
    let claim = format!("{}/logged", env.ns);
    let mut claim_lines = 0;
    for line in text.lines() {
        let entry: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        assert!(entry["timestamp"].is_string() && entry["level"].is_string(), "{line}");
        if entry["claim"] == claim.as_str() {
            claim_lines += 1;
        }
    }
    assert!(claim_lines >= 2, "the claim's provisioning and deletion are logged as {claim}");
    let encoded = base64::engine::general_purpose::STANDARD.encode(&secret);
    assert!(!text.contains(&secret), "the secret key is in the log");
    assert!(!text.contains(&encoded), "the secret key is in the log, in base64");
    eprintln!("{} JSON lines at trace level, {claim_lines} about the claim", text.lines().count());
}
