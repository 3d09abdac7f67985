//! Sharing a bucket across namespaces on Garage: a controller in this process on the real
//! control plane, a real three-node cluster; the reader's key comes with the owner's grant,
//! narrows with it and goes with it (and, Garage never reusing a key id, a claim recreated
//! after the grant comes back gets a new one).

mod common;

use bucket_api::{BucketShareGrant, BucketShareGrantSpec, ClaimPhase, Grantee, ObjectBucketClaim};
use bucket_provisioner::Credentials;
use common::{Harness, error_code, setup, spec};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::{
    Deployed, create_claim, delete_claim_and_wait, eventually, test_namespace, wait_for_claim,
};

#[tokio::test]
async fn a_reader_namespace_shares_through_a_grant_and_loses_its_key_with_it() {
    let s = setup("garage-xns").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let allow = [("allowCrossNamespaceSharing", "true")];
    let class = s.class(&controller.provisioner, &allow, "Delete").await;
    s.claim("app", spec(&class, "", &[])).await;
    s.wait_for("app", ClaimPhase::Bound, "Bound").await;
    let (app, bucket) = s.consumer("app").await;
    app.put_object()
        .bucket(&bucket)
        .key("data")
        .body(b"shared".to_vec().into())
        .send()
        .await
        .unwrap();

    let reader_ns = test_namespace(&s.client, "garage-xns-reader").await;
    let readers: Api<ObjectBucketClaim> = Api::namespaced(s.client.clone(), &reader_ns);
    let secrets: Api<Secret> = Api::namespaced(s.client.clone(), &reader_ns);
    let keys = || async {
        let data = secrets.get("reader").await.expect("the reader's Secret").data.unwrap();
        let read = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
        Credentials {
            access_key_id: read("AWS_ACCESS_KEY_ID"),
            secret_access_key: read("AWS_SECRET_ACCESS_KEY"),
        }
    };
    let grants: Api<BucketShareGrant> = Api::namespaced(s.client.clone(), &s.ns);
    let to = vec![Grantee { namespace: reader_ns.clone(), ..Default::default() }];
    let grant =
        BucketShareGrant::new("share-app", BucketShareGrantSpec { claim_name: "app".into(), to });
    grants.create(&PostParams::default(), &grant).await.unwrap();
    let from = format!("{}/app", s.ns);
    create_claim(&readers, "reader", spec(&class, "", &[("shareFrom", &from)])).await;
    let wait = |phase, reason| wait_for_claim(&readers, "reader", phase, reason);
    wait(ClaimPhase::Bound, "Bound").await;
    let first = keys().await;
    let reader = s.s3(0, &first);
    let got = reader.get_object().bucket(&bucket).key("data").send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"shared");
    let put = reader.put_object().bucket(&bucket).key("x").body(b"x".to_vec().into()).send().await;
    assert_eq!(error_code(put), "AccessDenied", "the grant's ReadOnly");

    // Widened by the grant, then narrowed: the key's permissions follow.
    let permissions = |info: &garage_provisioner::api::BucketInfo| {
        info.keys.iter().find(|k| k.access_key_id == first.access_key_id).map(|k| k.permissions)
    };
    let mode = |m: &str| json!({ "spec": { "to": [{ "namespace": reader_ns, "accessMode": m }] } });
    grants
        .patch("share-app", &PatchParams::default(), &Patch::Merge(mode("ReadWrite")))
        .await
        .unwrap();
    eventually("the reader's key to get write", || async {
        permissions(&s.bucket_info(&bucket).await?)?.write.then_some(())
    })
    .await;
    grants
        .patch("share-app", &PatchParams::default(), &Patch::Merge(mode("ReadOnly")))
        .await
        .unwrap();
    eventually("the reader's key to lose write", || async {
        (!permissions(&s.bucket_info(&bucket).await?)?.write).then_some(())
    })
    .await;

    grants.delete("share-app", &DeleteParams::default()).await.unwrap();
    wait(ClaimPhase::Failed, "ShareWithdrawn").await;
    let info = s.bucket_info(&bucket).await.unwrap();
    assert_eq!(permissions(&info), None, "the reader's key is off the bucket");
    assert!(secrets.get_opt("reader").await.unwrap().is_none());
    let got = app.get_object().bucket(&bucket).key("data").send().await;
    assert!(got.is_ok(), "the owner's data stays");

    // Garage never lets a deleted key id be used again: granted again, the claim says to be
    // recreated, and a new claim binds with a new key.
    grants.create(&PostParams::default(), &grant).await.unwrap();
    let refused = wait(ClaimPhase::Failed, "GarageKeyDeleted").await;
    let message = &test_support::ready(&refused).unwrap().message;
    assert!(message.contains("delete and recreate the claim"), "{message}");
    delete_claim_and_wait(&readers, "reader").await;
    create_claim(&readers, "reader", spec(&class, "", &[("shareFrom", &from)])).await;
    wait(ClaimPhase::Bound, "Bound").await;
    let second = keys().await;
    assert_ne!(second.access_key_id, first.access_key_id, "a new key");
    let got = s.s3(0, &second).get_object().bucket(&bucket).key("data").send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"shared");
    delete_claim_and_wait(&readers, "reader").await;
    s.delete_and_wait("app").await;
}
