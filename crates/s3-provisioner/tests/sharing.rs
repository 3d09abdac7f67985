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

/// Across namespaces on S3: the reader's IAM user of its own comes with the owner's namespace's
/// grant and goes with it, and comes back new when the grant does.
#[tokio::test]
async fn a_grant_of_another_namespace_gives_a_user_of_its_own_and_withdrawing_it_removes_it() {
    use bucket_api::{BucketShareGrant, BucketShareGrantSpec, Grantee};
    use kube::api::{Api, DeleteParams, PostParams};

    let s = setup("s3-xns").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    s.owner_keys("owner", &s.moto.admin).await;
    let allow = [("allowCrossNamespaceSharing", "true")];
    let class = s.class(&controller.provisioner, "owner", &allow, Some("Delete")).await;
    let app_spec = ObjectBucketClaimSpec {
        storage_class_name: class.clone(),
        generate_bucket_name: Some("xns".into()),
        ..Default::default()
    };
    s.claim("app", app_spec).await;
    let app = s.wait_for("app", ClaimPhase::Bound, "Bound").await;
    let bucket = app.spec.bucket_name.clone().unwrap();
    let app_s3 = s.moto.s3(&s.claim_keys("app").await);
    let body = || b"shared".to_vec().into();
    app_s3.put_object().bucket(&bucket).key("data").body(body()).send().await.unwrap();

    let reader_ns = test_support::test_namespace(&s.client, "s3-xns-reader").await;
    let readers: Api<bucket_api::ObjectBucketClaim> = Api::namespaced(s.client.clone(), &reader_ns);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(s.client.clone(), &reader_ns);
    let keys_of = |secret: k8s_openapi::api::core::v1::Secret| {
        let data = secret.data.unwrap();
        let read = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
        bucket_provisioner::Credentials {
            access_key_id: read("AWS_ACCESS_KEY_ID"),
            secret_access_key: read("AWS_SECRET_ACCESS_KEY"),
        }
    };
    let grants: Api<BucketShareGrant> = Api::namespaced(s.client.clone(), &s.ns);
    let to = vec![Grantee { namespace: reader_ns.clone(), ..Default::default() }];
    let grant =
        BucketShareGrant::new("share-app", BucketShareGrantSpec { claim_name: "app".into(), to });
    grants.create(&PostParams::default(), &grant).await.unwrap();
    let reader_spec = ObjectBucketClaimSpec {
        storage_class_name: class,
        additional_config: Some([("shareFrom".to_string(), format!("{}/app", s.ns))].into()),
        ..Default::default()
    };
    test_support::create_claim(&readers, "reader", reader_spec).await;
    let wait = |phase, reason| test_support::wait_for_claim(&readers, "reader", phase, reason);
    let reader = wait(ClaimPhase::Bound, "Bound").await;
    assert_eq!(reader.status.as_ref().unwrap().access_mode, Some(AccessMode::ReadOnly));
    let first = keys_of(secrets.get("reader").await.unwrap());
    let reader_s3 = s.moto.s3(&first);
    let got = reader_s3.get_object().bucket(&bucket).key("data").send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"shared");
    let refused = reader_s3.put_object().bucket(&bucket).key("x").body(body()).send().await;
    assert_eq!(common::error_code(refused), "AccessDenied");
    assert!(s.moto.user_exists(&user_of(&reader)).await, "an IAM user of its own");

    grants.delete("share-app", &DeleteParams::default()).await.unwrap();
    wait(ClaimPhase::Failed, "ShareWithdrawn").await;
    assert!(!s.moto.user_exists(&user_of(&reader)).await, "its user went with the grant");
    assert!(secrets.get_opt("reader").await.unwrap().is_none());
    assert!(s.moto.bucket_exists(&bucket).await, "the owner's bucket stays");

    grants.create(&PostParams::default(), &grant).await.unwrap();
    wait(ClaimPhase::Bound, "Bound").await;
    let second = keys_of(secrets.get("reader").await.unwrap());
    assert_ne!(second.access_key_id, first.access_key_id, "a new key");
    let got = s.moto.s3(&second).get_object().bucket(&bucket).key("data").send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"shared");
    test_support::delete_claim_and_wait(&readers, "reader").await;
    s.delete_and_wait("app").await;
}
