//! A tenant's claim annotations once steered cleanup: a `cleanup-state` naming another claim's
//! IAM user deleted that user and its keys, and one naming the tenant's own server as the
//! endpoint sent the owner's signed requests there. Here a tenant of its own namespace only
//! forges every record it can write on a claim, with the controller acting as `deploy/s3/`
//! deploys it and moto enforcing IAM: no user of another claim goes, and nothing reaches the
//! tenant's address.

mod common;

use std::collections::BTreeMap;

use bucket_api::contract::FINALIZER;
use bucket_api::{ClaimPhase, ObjectBucketClaim};
use common::cluster::{setup, spec};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use s3_provisioner::iam;
use test_support::{
    ControlPlane, Deployed, Harness, Tripwire, claim_tenant, test_namespace, unique_suffix,
    wait_claim_gone,
};

#[tokio::test]
async fn forged_cleanup_records_delete_no_other_user_and_send_nothing_to_the_tenant() {
    let s = setup("s3-forged").await;
    let controller = Harness::start(s.backend(), Deployed::S3);
    s.owner_keys("owner", &s.moto.admin).await;
    let class = s.class(&controller.provisioner, "owner", &[], Some("Delete")).await;
    let bucket = format!("victim-{}", unique_suffix());
    s.claim("victim", spec(&class, &bucket)).await;
    let victim = s.wait_for("victim", ClaimPhase::Bound, "Bound").await;
    let victim_user =
        iam::user_name(&bucket_provisioner::user_id_for_claim(&victim.uid().unwrap()));
    assert!(s.moto.user_exists(&victim_user).await);
    let victim_s3 = s.moto.s3(&s.claim_keys("victim").await);
    let put = |key: &'static str| {
        victim_s3.put_object().bucket(&bucket).key(key).body(b"data".to_vec().into()).send()
    };
    put("before").await.expect("the victim writes");

    let tripwire = Tripwire::start().await;
    let tenant_ns = test_namespace(&s.client, "s3-forger").await;
    let tenant = claim_tenant(ControlPlane::shared(), &tenant_ns).await.unwrap();
    let claims: Api<ObjectBucketClaim> = Api::namespaced(tenant, &tenant_ns);
    let missing = format!("no-such-class-{}", unique_suffix());
    // One state points every endpoint at the tenant; the other at moto, naming the victim's user.
    let states = [
        serde_json::json!({
            "endpoint": tripwire.url, "iamEndpoint": tripwire.url, "forcePathStyle": "true",
            "region": "us-east-1", "createBucketUser": "true",
            "secretName": "owner", "secretNamespace": s.ns,
        }),
        serde_json::json!({
            "endpoint": s.moto.endpoint, "forcePathStyle": "true", "region": "us-east-1",
            "createBucketUser": "true", "secretName": "owner", "secretNamespace": s.ns,
            "userName": victim_user,
        }),
    ];
    let mut names = Vec::new();
    for (i, state) in states.iter().enumerate() {
        for (j, claim_class) in [missing.as_str(), class.as_str()].iter().enumerate() {
            let name = format!("forger-{i}-{j}");
            let annotations = BTreeMap::from([
                ("objectbucket.io/provisioner".to_string(), controller.provisioner.clone()),
                ("objectbucket.io/bucket-source".to_string(), "new".to_string()),
                ("objectbucket.io/reclaim-policy".to_string(), "Delete".to_string()),
                ("objectbucket.io/cleanup-state".to_string(), state.to_string()),
            ]);
            let claim = ObjectBucketClaim {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    annotations: Some(annotations),
                    finalizers: Some(vec![FINALIZER.into()]),
                    ..Default::default()
                },
                spec: spec(claim_class, &bucket),
                status: None,
            };
            claims.create(&PostParams::default(), &claim).await.expect("a tenant creates claims");
            names.push(name);
        }
    }
    // Time for the controller to look at the live claims before they go.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    for name in &names {
        claims.delete(name, &DeleteParams::default()).await.expect("a tenant deletes claims");
    }
    for name in &names {
        wait_claim_gone(&claims, name).await;
    }

    tripwire.assert_untouched("the forged claims' cleanup");
    assert!(s.moto.user_exists(&victim_user).await, "the victim's IAM user is still there");
    put("after").await.expect("the victim's key still works");
    assert!(s.moto.bucket_exists(&bucket).await);
    s.wait_for("victim", ClaimPhase::Bound, "Bound").await;
}
