//! A StorageClass's limits on its claims (quotas and access modes) on a real control plane,
//! driving the in-memory backend: what the backend is handed, what is recorded, and what a
//! claim asking for more than its class allows is told.

use std::collections::BTreeMap;

use bucket_api::{AccessMode, ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
mod common;

use common::*;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use test_support::{client_with_crds, eventually, test_namespace};

fn config(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn spec(class: &str, bucket: &str, entries: &[(&str, &str)]) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec { additional_config: Some(config(entries)), ..named_spec(class, bucket) }
}

async fn patch_config(claims: &Api<ObjectBucketClaim>, name: &str, config: serde_json::Value) {
    let patch = json!({ "spec": { "additionalConfig": config } });
    claims.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

async fn setup(prefix: &str) -> (Client, String, Api<ObjectBucketClaim>) {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, prefix).await;
    let claims = Api::namespaced(client.clone(), &ns);
    (client, ns, claims)
}

#[tokio::test]
async fn a_claim_asking_for_more_than_its_class_allows_fails_naming_the_limit() {
    let (client, ns, claims) = setup("lim-more").await;
    let backend = MemoryBackend::default();
    let controller = Harness::start(backend.clone(), Deployed::HostPath);
    let limits = [("defaultMaxSize", "1G"), ("limitMaxSize", "2G"), ("tier", "gold")];
    let class = storage_class(&client, &controller.provisioner, &limits, None).await;
    create_claim(&claims, "c", spec(&class, "greedy", &[("maxSize", "3G")])).await;

    let claim = wait_for(&claims, "c", ClaimPhase::Failed, "ExceedsClassLimit").await;
    let message = &ready(&claim).unwrap().message;
    assert!(message.contains("limitMaxSize \"2G\""), "{message}");
    assert!(message.contains(&class), "{message}");
    wait_event(&client, &ns, "c", "ExceedsClassLimit").await;
    assert!(backend.handed().is_empty(), "the backend never saw the claim");

    // Dropping the key gets the class's default, never unlimited; the backend sees the
    // outcome and none of the limit parameters.
    patch_config(&claims, "c", json!({ "maxSize": null })).await;
    let claim = wait_for(&claims, "c", ClaimPhase::Bound, "Bound").await;
    assert_eq!(claim.status.unwrap().access_mode, Some(AccessMode::ReadWrite));
    assert_eq!(
        backend.handed(),
        [(Op::Provision, config(&[("maxSize", "1G")]), AccessMode::ReadWrite)]
    );
}

#[tokio::test]
async fn modes_and_limits_reach_a_bound_claim_through_update() {
    let (client, ns, claims) = setup("lim-bound").await;
    let backend = MemoryBackend::default();
    let controller = Harness::start(backend.clone(), Deployed::HostPath);
    let limits = [("limitMaxObjects", "100")];
    let class = storage_class(&client, &controller.provisioner, &limits, None).await;
    create_claim(&claims, "c", spec(&class, "tuned", &[("maxObjects", "50")])).await;
    wait_for(&claims, "c", ClaimPhase::Bound, "Bound").await;
    let buckets: Api<ObjectBucket> = Api::all(client.clone());
    let ob = buckets.get(&object_bucket_name(&ns, "c")).await.unwrap();
    assert_eq!(bucket_provisioner::access_mode_of(&ob), AccessMode::ReadWrite);

    // Narrowing the mode is the tenant's to do, and takes effect through update.
    patch_config(&claims, "c", json!({ "accessMode": "ReadOnly" })).await;
    eventually("the claim's status to show ReadOnly", || async {
        let claim = claims.get("c").await.ok()?;
        (claim.status?.access_mode == Some(AccessMode::ReadOnly)).then_some(())
    })
    .await;
    let ob = buckets.get(&ob.metadata.name.clone().unwrap()).await.unwrap();
    assert_eq!(bucket_provisioner::access_mode_of(&ob), AccessMode::ReadOnly);
    let readonly = (Op::Update, config(&[("maxObjects", "50")]), AccessMode::ReadOnly);
    assert_eq!(backend.handed().last(), Some(&readonly));

    // The operator narrows the class under a bound claim: held to it, and told.
    let classes: Api<StorageClass> = Api::all(client.clone());
    let patch = json!({ "parameters": { "limitMaxObjects": "10", "limitAccessMode": "ReadOnly" } });
    // Parameters are immutable: the class is replaced under the same name.
    let mut replaced = classes.get(&class).await.unwrap();
    classes.delete(&class, &Default::default()).await.unwrap();
    eventually("the class to be gone", || async {
        classes.get_opt(&class).await.ok()?.is_none().then_some(())
    })
    .await;
    replaced.metadata = kube::api::ObjectMeta { name: Some(class.clone()), ..Default::default() };
    replaced.parameters = serde_json::from_value(patch["parameters"].clone()).unwrap();
    classes.create(&Default::default(), &replaced).await.unwrap();
    let claim = wait_for(&claims, "c", ClaimPhase::Failed, "ExceedsClassLimit").await;
    assert!(ready(&claim).unwrap().message.contains("limitMaxObjects \"10\""));
    let held = (Op::Update, config(&[("maxObjects", "10")]), AccessMode::ReadOnly);
    assert_eq!(backend.handed().last(), Some(&held));

    // Asking for what is allowed binds it again; asking for a wider mode is refused.
    patch_config(&claims, "c", json!({ "maxObjects": "5" })).await;
    wait_for(&claims, "c", ClaimPhase::Bound, "Bound").await;
    patch_config(&claims, "c", json!({ "accessMode": "ReadWrite" })).await;
    let claim = wait_for(&claims, "c", ClaimPhase::Failed, "ExceedsClassLimit").await;
    assert!(ready(&claim).unwrap().message.contains("limitAccessMode ReadOnly"));
    assert_eq!(claim.status.unwrap().access_mode, Some(AccessMode::ReadOnly));
    assert_eq!(backend.calls(Op::Provision), 1, "nothing was provisioned again");
}
