//! Sharing a bucket inside a namespace on S3: a controller in this process on the real control
//! plane, moto with IAM enforced, each claim used through its own Secret.

mod common;

use bucket_api::{AccessMode, ClaimPhase, ObjectBucketClaimSpec};
use common::cluster::setup;
use kube::ResourceExt;
use s3_provisioner::iam;
use test_support::{Deployed, Harness};

fn user_of(claim: &bucket_api::ObjectBucketClaim) -> String {
    iam::user_name(&bucket_provisioner::user_id_for_claim(&claim.uid().unwrap()))
}

#[tokio::test]
async fn a_shared_bucket_gives_each_claim_its_own_user_and_none_outlives_the_owner() {
    let s = setup("s3-share").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    // A grant looks the bucket up first (HeadBucket, s3:ListBucket), as for an operator's bucket.
    s.owner_keys("owner", &s.moto.admin).await;
    let class = s.class(&controller.provisioner, "owner", &[], Some("Delete")).await;
    let app_spec = ObjectBucketClaimSpec {
        storage_class_name: class.clone(),
        generate_bucket_name: Some("shared".into()),
        ..Default::default()
    };
    s.claim("app", app_spec).await;
    let app = s.wait_for("app", ClaimPhase::Bound, "Bound").await;
    let bucket = app.spec.bucket_name.clone().unwrap();
    let app_keys = s.claim_keys("app").await;
    let body = || b"from the app".to_vec().into();
    s.moto
        .s3(&app_keys)
        .put_object()
        .bucket(&bucket)
        .key("data")
        .body(body())
        .send()
        .await
        .unwrap();

    let reader_spec = ObjectBucketClaimSpec {
        storage_class_name: class,
        additional_config: Some(
            [("shareFrom", "app"), ("accessMode", "ReadOnly")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    };
    s.claim("reader", reader_spec).await;
    let reader = s.wait_for("reader", ClaimPhase::Bound, "Bound").await;
    assert_eq!(reader.status.as_ref().unwrap().access_mode, Some(AccessMode::ReadOnly));
    let reader_keys = s.claim_keys("reader").await;
    let reader_s3 = s.moto.s3(&reader_keys);
    let got = reader_s3.get_object().bucket(&bucket).key("data").send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"from the app");
    let refused = reader_s3.put_object().bucket(&bucket).key("x").body(body()).send().await;
    assert_eq!(common::error_code(refused), "AccessDenied");
    assert!(s.moto.user_exists(&user_of(&reader)).await, "an IAM user of its own");

    s.delete_and_wait("app").await;
    assert!(!s.moto.bucket_exists(&bucket).await);
    s.wait_for("reader", ClaimPhase::Failed, "BucketLost").await;
    assert!(!s.moto.user_exists(&user_of(&reader)).await, "the sharing claim's user went too");
    s.delete_and_wait("reader").await;
}
