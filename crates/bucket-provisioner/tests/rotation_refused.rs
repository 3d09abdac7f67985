//! A backend that does not implement rotation (the trait's default, as Garage's and the in-memory
//! backend's) on a real control plane: a rotation asked of it fails the claim with
//! `RotationNotSupported` and leaves its key as it was, and taking the request back (the value
//! last honoured, or no annotation) binds the claim again without asking the backend anything.

use std::time::Duration;

use bucket_api::contract::annotations::ROTATE_CREDENTIALS;
use bucket_api::{ClaimPhase, ObjectBucketClaim};
use bucket_provisioner::ROTATION_NOT_SUPPORTED;
mod common;

use common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::{client_with_crds, test_namespace};

/// Sets the claim's rotation request to `token`, or removes it.
async fn ask(claims: &Api<ObjectBucketClaim>, name: &str, token: Option<&str>) {
    let patch = json!({ "metadata": { "annotations": { ROTATE_CREDENTIALS: token } } });
    claims.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// The access key id in the claim's Secret.
async fn key_id(secrets: &Api<Secret>, name: &str) -> Vec<u8> {
    let secret = secrets.get(name).await.unwrap();
    secret.data.unwrap()["AWS_ACCESS_KEY_ID"].0.clone()
}

async fn phase(claims: &Api<ObjectBucketClaim>, name: &str) -> Option<ClaimPhase> {
    claims.get(name).await.unwrap().status.and_then(|s| s.phase)
}

#[tokio::test]
async fn a_refused_rotation_fails_the_claim_until_the_request_is_taken_back() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "rot-refused").await;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let controller = Harness::start(MemoryBackend::default(), Deployed::HostPath);
    let class = storage_class(&client, &controller.provisioner, &[], None).await;
    // Created with a request: its first key honours it.
    let mut claim = ObjectBucketClaim::new("c", named_spec(&class, "refused"));
    claim.metadata.annotations = Some([(ROTATE_CREDENTIALS.to_owned(), "t0".to_owned())].into());
    claims.create(&PostParams::default(), &claim).await.unwrap();
    wait_for(&claims, "c", ClaimPhase::Bound, "Bound").await;
    let key = key_id(&secrets, "c").await;

    ask(&claims, "c", Some("t1")).await;
    let failed = wait_for(&claims, "c", ClaimPhase::Failed, ROTATION_NOT_SUPPORTED).await;
    let message = &ready(&failed).unwrap().message;
    assert!(message.contains("cannot rotate credentials"), "{message}");
    wait_event(&client, &ns, "c", ROTATION_NOT_SUPPORTED).await;
    assert_eq!(key_id(&secrets, "c").await, key, "the key stays as it was");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(phase(&claims, "c").await, Some(ClaimPhase::Failed), "until the request changes");

    // Back to the value last honoured: nothing to rotate, the claim is bound as it was.
    ask(&claims, "c", Some("t0")).await;
    wait_for(&claims, "c", ClaimPhase::Bound, "Bound").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(phase(&claims, "c").await, Some(ClaimPhase::Bound), "not asked again");
    assert_eq!(key_id(&secrets, "c").await, key);

    // A new value is refused again; removing the annotation takes it back too.
    ask(&claims, "c", Some("t2")).await;
    wait_for(&claims, "c", ClaimPhase::Failed, ROTATION_NOT_SUPPORTED).await;
    ask(&claims, "c", None).await;
    wait_for(&claims, "c", ClaimPhase::Bound, "Bound").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(phase(&claims, "c").await, Some(ClaimPhase::Bound), "not asked again");
    assert_eq!(key_id(&secrets, "c").await, key);
}
