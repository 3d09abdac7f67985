//! A backend that cannot give ServiceAccounts short-lived credentials (the trait's default, as
//! Garage's, S3's and the in-memory backend's) on a real control plane: a claim naming
//! ServiceAccounts fails with `WebIdentityNotSupported` before anything is made for it, and never
//! gets a key in their place; a bound claim that starts naming them fails the same way, keeping
//! its key as it was, and binds again when it stops.

use bucket_api::contract::CLAIM_SERVICE_ACCOUNT_NAME;
use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use bucket_provisioner::WEB_IDENTITY_NOT_SUPPORTED;
mod common;

use common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::{client_with_crds, test_namespace};

fn asking(class: &str, bucket: &str) -> ObjectBucketClaimSpec {
    let config = [(CLAIM_SERVICE_ACCOUNT_NAME.to_owned(), "app".to_owned())].into();
    ObjectBucketClaimSpec { additional_config: Some(config), ..named_spec(class, bucket) }
}

#[tokio::test]
async fn a_backend_without_web_identity_refuses_it_by_name_and_hands_out_no_key() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "wi-refused").await;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let backend = MemoryBackend::default();
    let controller = Harness::start(backend.clone(), Deployed::HostPath);
    let pairs = [("webIdentity", "allowed")];
    let class = storage_class(&client, &controller.provisioner, &pairs, None).await;

    let post = PostParams::default();
    claims.create(&post, &ObjectBucketClaim::new("new", asking(&class, "wi-new"))).await.unwrap();
    let failed = wait_for(&claims, "new", ClaimPhase::Failed, WEB_IDENTITY_NOT_SUPPORTED).await;
    let message = &ready(&failed).unwrap().message;
    assert!(message.contains("serviceAccountName"), "{message}");
    wait_event(&client, &ns, "new", WEB_IDENTITY_NOT_SUPPORTED).await;
    assert!(secrets.get_opt("new").await.unwrap().is_none(), "no key in its place");
    assert!(!backend.buckets().contains("wi-new"), "nothing made for it");
    assert_eq!(backend.calls(Op::Provision), 0);

    // Bound with a key, then asking: refused, the key as it was; asking no more binds again.
    claims
        .create(&post, &ObjectBucketClaim::new("bound", named_spec(&class, "wi-bound")))
        .await
        .unwrap();
    wait_for(&claims, "bound", ClaimPhase::Bound, "Bound").await;
    let key = secrets.get("bound").await.unwrap().data;
    let ask = |value: Option<&str>| json!({ "spec": { "additionalConfig": { CLAIM_SERVICE_ACCOUNT_NAME: value } } });
    let params = PatchParams::default();
    claims.patch("bound", &params, &Patch::Merge(&ask(Some("app")))).await.unwrap();
    wait_for(&claims, "bound", ClaimPhase::Failed, WEB_IDENTITY_NOT_SUPPORTED).await;
    assert_eq!(secrets.get("bound").await.unwrap().data, key);
    claims.patch("bound", &params, &Patch::Merge(&ask(None))).await.unwrap();
    wait_for(&claims, "bound", ClaimPhase::Bound, "Bound").await;
    assert_eq!(secrets.get("bound").await.unwrap().data, key);
}
