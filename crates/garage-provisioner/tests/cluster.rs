//! The Garage provisioner end to end: a controller in this process on the real control plane,
//! a real three-node Garage cluster, and the claim's keys used as a consumer would use them.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bucket_api::ClaimPhase;
use bucket_provisioner::{Provisioner, user_id_for_claim};
use common::{Harness, Setup, error_code, setup, spec, write_read_list};
use garage_provisioner::empty::PassLimits;
use garage_provisioner::names::{claim_key_id, service_key_id};
use garage_provisioner::store::creator;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use test_support::{Deployed, eventually, ready};

async fn uid_of(s: &Setup, claim: &str) -> String {
    user_id_for_claim(&s.claims.get(claim).await.unwrap().uid().unwrap())
}

#[tokio::test]
async fn greenfield_claim_lifecycle_with_quotas_usage_and_confined_keys() {
    let s = setup("garage-green").await;
    let backend = Arc::new(s.backend());
    let controller = Harness::start(backend.clone(), Deployed::Garage);
    let class = s.class(&controller.provisioner, &[], "Delete").await;
    s.claim("photos", spec(&class, "", &[("maxSize", "1000"), ("maxObjects", "10")])).await;
    let mut generated = spec(&class, "", &[]);
    generated.generate_bucket_name = Some("photos".into());
    s.claim("other", generated).await;

    let claim = s.wait_for("photos", ClaimPhase::Bound, "Bound").await;
    s.wait_for("other", ClaimPhase::Bound, "Bound").await;
    let bucket = claim.spec.bucket_name.clone().unwrap();
    let config = s.config_maps.get("photos").await.unwrap().data.unwrap();
    assert_eq!(config["BUCKET_HOST"], "127.0.0.1");
    assert_eq!(config["BUCKET_PORT"], s.garage.nodes[0].s3_port.to_string());
    assert_eq!(config["BUCKET_REGION"], "garage");

    // Garage records the claim as the bucket's creator, in the provisioner key's namespace.
    let user = uid_of(&s, "photos").await;
    let info = s.bucket_info(&bucket).await.expect("the bucket exists in Garage");
    assert_eq!(
        creator(&info, &service_key_id()),
        Some((user.clone(), bucket_api::ReclaimPolicy::Delete))
    );
    let keys = s.claim_keys("photos").await;
    assert_eq!(keys.access_key_id, claim_key_id(&user));
    let claim_key = info.keys.iter().find(|k| k.access_key_id == keys.access_key_id).unwrap();
    assert!(
        claim_key.permissions.read && claim_key.permissions.write && !claim_key.permissions.owner
    );

    // A consumer with only the Secret and ConfigMap writes, reads and lists.
    let (s3, name) = s.consumer("photos").await;
    assert_eq!(name, bucket);
    write_read_list(&s3, &bucket, "a.bin", &[7u8; 500]).await;
    // Garage enforces maxSize: 500 + 800 bytes is past 1000. (Its counters, which quotas are
    // checked against, follow writes asynchronously: wait until they hold the first 500.)
    eventually("Garage to count the first 500 bytes", || async {
        (s.bucket_info(&bucket).await?.bytes == 500).then_some(())
    })
    .await;
    let refused =
        s3.put_object().bucket(&bucket).key("b.bin").body(vec![8u8; 800].into()).send().await;
    assert!(refused.is_err(), "a PUT past maxSize is refused by Garage");
    // The quota is updated on the bound claim, and Garage lets the same PUT through.
    let patch = json!({"spec": {"additionalConfig": {"maxSize": "1Ki", "maxObjects": "10"}}});
    s.claims.patch("photos", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    eventually("the bucket's quota to be 1Ki", || async {
        (s.bucket_info(&bucket).await?.quotas.max_size == Some(1024)).then_some(())
    })
    .await;
    s3.put_object().bucket(&bucket).key("b.bin").body(vec![8u8; 500].into()).send().await.unwrap();

    // The other claim's key is refused on this bucket, and this one's on the other bucket.
    let (other_s3, other_bucket) = s.consumer("other").await;
    assert_ne!(other_bucket, bucket);
    let put =
        other_s3.put_object().bucket(&bucket).key("x").body(b"x".to_vec().into()).send().await;
    assert_eq!(error_code(put), "AccessDenied");
    let get = other_s3.get_object().bucket(&bucket).key("a.bin").send().await;
    assert_eq!(error_code(get), "AccessDenied");
    let put =
        s3.put_object().bucket(&other_bucket).key("x").body(b"x".to_vec().into()).send().await;
    assert_eq!(error_code(put), "AccessDenied");

    // Usage as Garage counts it, through the optional hook.
    let ob = s.buckets.get(claim.spec.object_bucket_name.as_deref().unwrap()).await.unwrap();
    backend.usage(&ob);
    let usage = eventually("usage of two objects, 1000 bytes", || async {
        backend.refresh_usage(Duration::from_secs(60)).await;
        backend.usage(&ob).filter(|u| (u.objects, u.bytes) == (2, 1000))
    })
    .await;
    assert_eq!((usage.max_bytes, usage.max_objects), (Some(1024), Some(10)));

    // A tenant cannot put a quota key Garage cannot honour.
    let patch = json!({"spec": {"additionalConfig": {"bucketMaxSize": "1G"}}});
    s.claims.patch("other", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let failed = s.wait_for("other", ClaimPhase::Failed, "InvalidParameters").await;
    assert!(ready(&failed).unwrap().message.contains("Garage has one quota per bucket"));

    s.delete_and_wait("photos").await;
    assert!(s.bucket_info(&bucket).await.is_none(), "the bucket is deleted under Delete");
    let keys_left: Vec<String> = s.all_keys().await.into_iter().map(|k| k.id).collect();
    assert!(!keys_left.contains(&keys.access_key_id), "the claim's key is deleted");
    assert!(s.bucket_info(&other_bucket).await.is_some(), "other buckets are untouched");
}

#[tokio::test]
async fn access_modes_become_key_permissions_and_write_only_is_refused() {
    let s = setup("garage-modes").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let class = s.class(&controller.provisioner, &[], "Delete").await;
    s.claim("reader", spec(&class, "", &[("accessMode", "ReadOnly")])).await;
    s.claim("shipper", spec(&class, "", &[("accessMode", "WriteOnly")])).await;

    let claim = s.wait_for("reader", ClaimPhase::Bound, "Bound").await;
    let bucket = claim.spec.bucket_name.clone().unwrap();
    let (s3, _) = s.consumer("reader").await;
    let keys = s.claim_keys("reader").await;
    let permissions = |info: &garage_provisioner::api::BucketInfo| {
        info.keys.iter().find(|k| k.access_key_id == keys.access_key_id).unwrap().permissions
    };
    let info = s.bucket_info(&bucket).await.unwrap();
    assert!(permissions(&info).read && !permissions(&info).write);
    s3.list_objects_v2().bucket(&bucket).send().await.expect("a ReadOnly key lists");
    let put = s3.put_object().bucket(&bucket).key("x").body(b"x".to_vec().into()).send().await;
    assert_eq!(error_code(put), "AccessDenied");

    // Garage cannot make a key that writes without deleting: refused, with the reason.
    let failed = s.wait_for("shipper", ClaimPhase::Failed, "AccessModeNotSupported").await;
    assert!(ready(&failed).unwrap().message.contains("WriteOnly"), "{failed:?}");

    // Widened through update: the same key may write.
    let patch = json!({"spec": {"additionalConfig": {"accessMode": "ReadWrite"}}});
    s.claims.patch("reader", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    eventually("the reader's key to get write", || async {
        permissions(&s.bucket_info(&bucket).await?).write.then_some(())
    })
    .await;
    write_read_list(&s3, &bucket, "a.bin", b"written after widening").await;
    // And narrowed again: write is taken away.
    let patch = json!({"spec": {"additionalConfig": {"accessMode": "ReadOnly"}}});
    s.claims.patch("reader", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    eventually("the reader's key to lose write", || async {
        (!permissions(&s.bucket_info(&bucket).await?).write).then_some(())
    })
    .await;
}

#[tokio::test]
async fn retain_keeps_data_brownfield_grants_share_it_and_nobody_takes_it_over() {
    let s = setup("garage-retain").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let retain = s.class(&controller.provisioner, &[], "Retain").await;
    let bucket = format!("kept-{}", test_support::unique_suffix());
    s.claim("keeper", spec(&retain, &bucket, &[])).await;
    s.wait_for("keeper", ClaimPhase::Bound, "Bound").await;
    let keeper_keys = s.claim_keys("keeper").await;
    let (s3, _) = s.consumer("keeper").await;
    write_read_list(&s3, &bucket, "keep.txt", b"kept").await;
    s.delete_and_wait("keeper").await;
    let info = s.bucket_info(&bucket).await.expect("Retain keeps the bucket");
    assert_eq!(info.objects, 1, "and its data");
    let refused = s3.list_objects_v2().bucket(&bucket).send().await;
    assert!(refused.is_err(), "the deleted claim's key no longer works");
    assert!(!s.all_keys().await.iter().any(|k| k.id == keeper_keys.access_key_id));

    // A new claim asking for the kept bucket by name is refused: it did not create it.
    s.claim("squatter", spec(&retain, &bucket, &[])).await;
    s.wait_for("squatter", ClaimPhase::Failed, "BucketNameTaken").await;

    // An operator's StorageClass naming it grants access; Delete there never deletes it.
    let shared = s.class(&controller.provisioner, &[("bucketName", &bucket)], "Delete").await;
    s.claim("reader", spec(&shared, "", &[])).await;
    s.wait_for("reader", ClaimPhase::Bound, "Bound").await;
    let (reader, name) = s.consumer("reader").await;
    assert_eq!(name, bucket);
    let kept = reader.get_object().bucket(&bucket).key("keep.txt").send().await.unwrap();
    assert_eq!(kept.body.collect().await.unwrap().into_bytes().as_ref(), b"kept");
    write_read_list(&reader, &bucket, "new.txt", b"new").await;
    // Quotas would limit every claim sharing the bucket: refused.
    s.claim("limited", spec(&shared, "", &[("maxSize", "1G")])).await;
    let failed = s.wait_for("limited", ClaimPhase::Failed, "InvalidParameters").await;
    assert!(ready(&failed).unwrap().message.contains("did not create"), "{failed:?}");

    // Bucket features the class does not allow, or Garage lacks, are refused by name, nothing
    // created.
    let rules = r#"{"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PUT"]}]}"#;
    let features = [
        ("web", "cors", rules, "allowCors: \"true\""),
        ("versioned", "versioning", "Enabled", "key(s) versioning (not supported: "),
    ];
    for (name, key, value, says) in features {
        let wanted = format!("{name}-{}", test_support::unique_suffix());
        s.claim(name, spec(&retain, &wanted, &[(key, value)])).await;
        let failed = s.wait_for(name, ClaimPhase::Failed, "InvalidParameters").await;
        let message = &ready(&failed).unwrap().message;
        assert!(message.contains(says), "{message}");
        assert!(s.bucket_info(&wanted).await.is_none(), "no bucket for a refused claim");
    }

    s.delete_and_wait("reader").await;
    assert_eq!(s.bucket_info(&bucket).await.expect("still there").objects, 2);

    // A granted bucket that does not exist is a permanent error.
    let missing =
        s.class(&controller.provisioner, &[("bucketName", "no-such-bucket")], "Delete").await;
    s.claim("lost", spec(&missing, "", &[])).await;
    s.wait_for("lost", ClaimPhase::Failed, "BucketNotFound").await;
}

#[tokio::test]
async fn a_big_bucket_is_emptied_in_passes_the_claim_says_so_and_nothing_remains() {
    let s = setup("garage-empty").await;
    let backend =
        s.backend().with_pass_limits(PassLimits { objects: 100, time: Duration::from_secs(20) });
    let controller = Harness::start(backend, Deployed::Garage);
    let class = s.class(&controller.provisioner, &[], "Delete").await;
    let bucket = format!("big-{}", test_support::unique_suffix());
    s.claim("big", spec(&class, &bucket, &[])).await;
    s.wait_for("big", ClaimPhase::Bound, "Bound").await;
    let (s3, _) = s.consumer("big").await;
    let puts = (0..450).map(|i| {
        let (s3, bucket) = (s3.clone(), bucket.clone());
        async move {
            s3.put_object()
                .bucket(&bucket)
                .key(format!("o/{i:04}"))
                .body(b"x".to_vec().into())
                .send()
                .await
                .unwrap();
        }
    });
    futures::future::join_all(puts).await;
    let upload =
        s3.create_multipart_upload().bucket(&bucket).key("unfinished").send().await.unwrap();
    assert!(upload.upload_id().is_some());

    s.claims.delete("big", &Default::default()).await.unwrap();
    let message = eventually("the claim to say the bucket is being emptied", || async {
        let claim = s.claims.get_opt("big").await.ok()??;
        let message = ready(&claim)?.message.clone();
        message.contains("emptying bucket").then_some(message)
    })
    .await;
    assert!(message.contains("objects deleted in this pass"), "{message}");
    s.wait_gone("big").await;
    assert!(s.bucket_info(&bucket).await.is_none(), "the bucket is gone");
}

#[tokio::test]
async fn a_refused_token_and_an_unreachable_garage_say_what_is_wrong() {
    let s = setup("garage-errors").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    s.token_secret("wrong-token", "not-the-admin-token").await;
    let wrong = s.class(&controller.provisioner, &[("secretName", "wrong-token")], "Delete").await;
    s.claim("refused", spec(&wrong, "", &[])).await;
    let failed = s.wait_for("refused", ClaimPhase::Failed, "GarageTokenRefused").await;
    let message = &ready(&failed).unwrap().message;
    assert!(message.contains(&format!("{}/wrong-token", s.ns)), "names the Secret: {message}");
    assert!(!message.contains("not-the-admin-token"), "never the token: {message}");

    let port = test_support::free_port().unwrap();
    let nowhere = format!("http://127.0.0.1:{port}");
    let down = s.class(&controller.provisioner, &[("adminEndpoint", &nowhere)], "Delete").await;
    s.claim("waiting", spec(&down, "", &[])).await;
    let pending = eventually("the claim to say Garage is unreachable", || async {
        let claim = s.claims.get_opt("waiting").await.ok()??;
        let condition = ready(&claim)?;
        condition.message.contains("unreachable").then_some(claim)
    })
    .await;
    assert_eq!(pending.status.unwrap().phase, Some(ClaimPhase::Pending), "transient, not failed");

    let absent = s.class(&controller.provisioner, &[("secretName", "absent")], "Delete").await;
    s.claim("no-secret", spec(&absent, "", &[])).await;
    s.wait_for("no-secret", ClaimPhase::Failed, "AdminSecretNotFound").await;
}
