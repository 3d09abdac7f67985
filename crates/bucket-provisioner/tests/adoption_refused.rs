//! A backend that cannot adopt (the trait's default, as the in-memory backend's) on a real
//! control plane: a claim that a lib-bucket-provisioner provisioner of the same name bound fails
//! with `AdoptionUnsupported` (or `LegacyBucketMismatch` while the claim names another bucket
//! than that provisioner's ObjectBucket) and is never provisioned a second time beside it.

use std::collections::BTreeMap;

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER, legacy};
use bucket_api::{BucketEndpoint, ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketSpec};
mod common;

use common::*;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::{client_with_crds, test_namespace, unique_suffix};

#[tokio::test]
async fn a_backend_that_cannot_adopt_fails_the_claim_and_provisions_nothing() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "adopt-refused").await;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);
    let buckets: Api<ObjectBucket> = Api::all(client.clone());
    let backend = MemoryBackend::default();
    let controller = Harness::start(backend.clone(), Deployed::HostPath);
    // The class comes last, so that the claim is looked at only once the old records exist.
    let class = format!("legacy-class-{}", unique_suffix());
    let mut claim = ObjectBucketClaim::new("c", named_spec(&class, "legacy-bucket"));
    claim.finalizers_mut().push(FINALIZER.into());
    let claim = claims.create(&PostParams::default(), &claim).await.unwrap();
    let left = ObjectBucket {
        metadata: ObjectMeta {
            name: Some(legacy::object_bucket_name(&ns, "c")),
            labels: Some(BTreeMap::from([(
                legacy::LABEL_PROVISIONER.into(),
                legacy::label_value(&controller.provisioner),
            )])),
            ..Default::default()
        },
        spec: ObjectBucketSpec {
            storage_class_name: class.clone(),
            claim_ref: Some(ObjectReference {
                namespace: Some(ns.clone()),
                name: Some("c".into()),
                uid: claim.uid(),
                ..Default::default()
            }),
            endpoint: Some(BucketEndpoint {
                bucket_name: "another-bucket".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        status: None,
    };
    buckets.create(&PostParams::default(), &left).await.unwrap();
    let storage_class = StorageClass {
        metadata: ObjectMeta { name: Some(class.clone()), ..Default::default() },
        provisioner: controller.provisioner.clone(),
        ..Default::default()
    };
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &storage_class)
        .await
        .unwrap();

    let failed = wait_for(&claims, "c", ClaimPhase::Failed, "LegacyBucketMismatch").await;
    let message = &ready(&failed).unwrap().message;
    assert!(message.contains("\"another-bucket\", not the claim's \"legacy-bucket\""), "{message}");
    // The records agree once the ObjectBucket names the claim's bucket; a change to the claim
    // retries it.
    let agree = json!({ "spec": { "endpoint": { "bucketName": "legacy-bucket" } } });
    buckets.patch(&left.name_any(), &PatchParams::default(), &Patch::Merge(&agree)).await.unwrap();
    let touch = json!({ "spec": { "additionalConfig": { "retry": "1" } } });
    claims.patch("c", &PatchParams::default(), &Patch::Merge(&touch)).await.unwrap();
    let failed = wait_for(&claims, "c", ClaimPhase::Failed, "AdoptionUnsupported").await;
    let message = &ready(&failed).unwrap().message;
    assert!(message.contains("cannot take it over"), "{message}");
    wait_event(&client, &ns, "c", "AdoptionUnsupported").await;
    assert_eq!(backend.calls(Op::Provision) + backend.calls(Op::Grant), 0, "nothing provisioned");
    let kept = buckets.get(&left.name_any()).await.unwrap();
    assert!(!kept.labels().contains_key(LABEL_PROVISIONER), "the old ObjectBucket is untouched");
    let all = buckets.list(&Default::default()).await.unwrap();
    let bound: Vec<String> = all
        .iter()
        .filter(|b| b.spec.claim_ref.as_ref().and_then(|c| c.uid.clone()) == claim.uid())
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(bound, [left.name_any()], "no second ObjectBucket for the claim");
    assert_eq!(failed.spec.object_bucket_name, None, "none recorded on the claim either");

    buckets.delete(&left.name_any(), &Default::default()).await.unwrap();
    let release = json!({ "metadata": { "finalizers": null } });
    claims.patch("c", &PatchParams::default(), &Patch::Merge(&release)).await.unwrap();
    claims.delete("c", &Default::default()).await.unwrap();
    controller.stop().await;
}
