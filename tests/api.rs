//! The generated CRDs on a real apiserver: installation, CRUD through kube-rs, acceptance of
//! manifests written for other objectbucket.io provisioners, and schema rejections.

use std::collections::BTreeMap;

use bucket_api::{
    BucketEndpoint, ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec,
    ObjectBucketClaimStatus, ObjectBucketPhase, ObjectBucketSpec, ObjectBucketStatus,
    ReclaimPolicy,
};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::core::Status;
use kube::{Client, Resource};
use serde_json::json;
use test_support::{client_with_crds, eventually, test_namespace, unique_suffix};

fn dry_run() -> PostParams {
    PostParams { dry_run: true, ..Default::default() }
}

async fn dry_run_yaml<K: Resource<DynamicType = ()>>(
    client: &Client,
    namespace: Option<&str>,
    yaml: &str,
) -> Result<DynamicObject, kube::Error> {
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let object: DynamicObject = serde_yaml::from_str(yaml).expect("test manifest is YAML");
    api.create(&dry_run(), &object).await
}

fn rejection(result: Result<DynamicObject, kube::Error>) -> Status {
    match result {
        Err(kube::Error::Api(response)) => *response,
        other => panic!("expected the apiserver to reject the object, got {other:?}"),
    }
}

#[tokio::test]
async fn claim_create_read_update_status_delete() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "api-obc").await;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);

    let claim = ObjectBucketClaim::new(
        "photos",
        ObjectBucketClaimSpec {
            storage_class_name: "bucket-class".into(),
            generate_bucket_name: Some("photos".into()),
            additional_config: Some(BTreeMap::from([("maxObjects".into(), "1000".into())])),
            ..Default::default()
        },
    );
    claims.create(&PostParams::default(), &claim).await.unwrap();

    let read = claims.get("photos").await.unwrap();
    assert_eq!(read.spec, claim.spec);
    assert_eq!(read.status, None);

    let status = json!({ "status": ObjectBucketClaimStatus {
        phase: Some(ClaimPhase::Bound),
        observed_generation: read.metadata.generation,
        ..Default::default()
    }});
    claims.patch_status("photos", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let read = claims.get("photos").await.unwrap();
    assert_eq!(read.status.and_then(|s| s.phase), Some(ClaimPhase::Bound));
    assert_eq!(read.spec, claim.spec, "a status update leaves the spec alone");

    claims.delete("photos", &DeleteParams::default()).await.unwrap();
    eventually("the claim to be gone", || async {
        claims.get_opt("photos").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn object_bucket_create_read_update_status_delete() {
    let client = client_with_crds().await;
    let buckets: Api<ObjectBucket> = Api::all(client.clone());
    let name = format!("obc-api-{}", unique_suffix());

    let bucket = ObjectBucket::new(
        &name,
        ObjectBucketSpec {
            storage_class_name: "bucket-class".into(),
            reclaim_policy: Some(ReclaimPolicy::Retain),
            claim_ref: Some(ObjectReference {
                api_version: Some("objectbucket.io/v1alpha1".into()),
                kind: Some("ObjectBucketClaim".into()),
                namespace: Some("team-a".into()),
                name: Some("photos".into()),
                uid: Some("0b5e2c1e-0000-4000-8000-000000000001".into()),
                ..Default::default()
            }),
            endpoint: Some(BucketEndpoint {
                bucket_host: "s3.example.svc".into(),
                bucket_port: 443,
                bucket_name: "photos-abc12".into(),
                region: "us-east-1".into(),
                ..Default::default()
            }),
            additional_state: Some(BTreeMap::from([("owner".into(), "node-1".into())])),
        },
    );
    buckets.create(&PostParams::default(), &bucket).await.unwrap();
    assert_eq!(buckets.get(&name).await.unwrap().spec, bucket.spec);

    let status = json!({ "status": ObjectBucketStatus {
        phase: Some(ObjectBucketPhase::Released),
        ..Default::default()
    }});
    buckets.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let read = buckets.get(&name).await.unwrap();
    assert_eq!(read.status.and_then(|s| s.phase), Some(ObjectBucketPhase::Released));

    buckets.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually("the ObjectBucket to be gone", || async {
        buckets.get_opt(&name).await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn rook_style_generated_name_claim_is_accepted() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "api-rook").await;
    let accepted = dry_run_yaml::<ObjectBucketClaim>(
        &client,
        Some(&ns),
        r#"
apiVersion: objectbucket.io/v1alpha1
kind: ObjectBucketClaim
metadata:
  name: ceph-bucket
spec:
  generateBucketName: ceph-bkt
  storageClassName: rook-ceph-bucket
"#,
    )
    .await
    .expect("a generated-name claim is accepted");
    assert_eq!(accepted.data["spec"]["generateBucketName"], "ceph-bkt");
    assert_eq!(accepted.data["spec"]["storageClassName"], "rook-ceph-bucket");
}

#[tokio::test]
async fn claim_with_bucket_name_and_quotas_is_accepted_unchanged() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "api-quota").await;
    let accepted = dry_run_yaml::<ObjectBucketClaim>(
        &client,
        Some(&ns),
        r#"
apiVersion: objectbucket.io/v1alpha1
kind: ObjectBucketClaim
metadata:
  name: my-bucket-claim
spec:
  bucketName: my-bucket
  storageClassName: noobaa-default-bucket-class
  additionalConfig:
    maxObjects: "1000"
    maxSize: "2G"
"#,
    )
    .await
    .expect("a named claim with additionalConfig is accepted");
    let spec = &accepted.data["spec"];
    assert_eq!(spec["bucketName"], "my-bucket");
    // Nothing is pruned: the backend-specific settings reach the controller as written.
    assert_eq!(spec["additionalConfig"], json!({"maxObjects": "1000", "maxSize": "2G"}));
}

#[tokio::test]
async fn bucket_storage_class_with_parameters_is_accepted() {
    let client = client_with_crds().await;
    let accepted = dry_run_yaml::<StorageClass>(
        &client,
        None,
        &format!(
            r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: rook-ceph-bucket-{}
provisioner: rook-ceph.ceph.rook.io/bucket
reclaimPolicy: Delete
parameters:
  objectStoreName: my-store
  objectStoreNamespace: rook-ceph
  bucketName: existing-bucket
"#,
            unique_suffix()
        ),
    )
    .await
    .expect("a bucket StorageClass is accepted");
    assert_eq!(accepted.data["parameters"]["bucketName"], "existing-bucket");
    assert_eq!(accepted.data["reclaimPolicy"], "Delete");
}

#[tokio::test]
async fn claim_without_storage_class_is_rejected_by_the_schema() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "api-reject").await;
    let error = rejection(
        dry_run_yaml::<ObjectBucketClaim>(
            &client,
            Some(&ns),
            r#"
apiVersion: objectbucket.io/v1alpha1
kind: ObjectBucketClaim
metadata:
  name: no-class
spec:
  generateBucketName: orphan
"#,
        )
        .await,
    );
    assert_eq!(error.code, 422, "{error:?}");
    assert!(
        error.message.contains("spec.storageClassName: Required value"),
        "unclear message: {}",
        error.message
    );
}

#[tokio::test]
async fn claim_with_empty_storage_class_is_rejected_by_the_schema() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "api-empty").await;
    let error = rejection(
        dry_run_yaml::<ObjectBucketClaim>(
            &client,
            Some(&ns),
            r#"
apiVersion: objectbucket.io/v1alpha1
kind: ObjectBucketClaim
metadata:
  name: empty-class
spec:
  storageClassName: ""
"#,
        )
        .await,
    );
    assert_eq!(error.code, 422, "{error:?}");
    assert!(error.message.contains("spec.storageClassName"), "unclear message: {}", error.message);
}

#[tokio::test]
async fn unknown_phase_is_rejected_by_the_schema() {
    let client = client_with_crds().await;
    let ns = test_namespace(&client, "api-phase").await;
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), &ns);
    let claim = ObjectBucketClaim::new(
        "phase",
        ObjectBucketClaimSpec { storage_class_name: "bucket-class".into(), ..Default::default() },
    );
    claims.create(&PostParams::default(), &claim).await.unwrap();
    let status = json!({ "status": { "phase": "Lost" } });
    let error = claims
        .patch_status("phase", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect_err("an unknown phase is refused");
    let kube::Error::Api(response) = error else { panic!("unexpected error {error:?}") };
    assert!(response.message.contains("status.phase"), "unclear message: {}", response.message);
}

#[tokio::test]
async fn object_bucket_names_are_cluster_scoped() {
    let client = client_with_crds().await;
    let name = format!("obc-scope-{}", unique_suffix());
    let buckets: Api<ObjectBucket> = Api::all(client.clone());
    let bucket = ObjectBucket {
        metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
        spec: ObjectBucketSpec { storage_class_name: "c".into(), ..Default::default() },
        status: None,
    };
    let created = buckets.create(&dry_run(), &bucket).await.unwrap();
    assert_eq!(created.metadata.namespace, None);
    assert_eq!(created.metadata.name.as_deref(), Some(name.as_str()));
}
