//! Where Garage is reached: several admin endpoints, of which any that answers serves; deletion
//! through the StorageClass's endpoints as they are now, only in the cluster holding the bucket.

mod common;

use std::collections::BTreeMap;

use bucket_api::{ClaimPhase, ReclaimPolicy};
use bucket_provisioner::user_id_for_claim;
use common::{Harness, Setup, setup, spec, write_read_list};
use garage_provisioner::Settings;
use garage_provisioner::admin::Admin;
use garage_provisioner::names::{SERVICE_KEY_NAME, claim_key_id, service_key_id};
use garage_provisioner::store::{Created, Store};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use test_support::garage::{GARAGE_REGION, GarageCluster};
use test_support::{Deployed, eventually, ready, unique_suffix};

/// The admin endpoints of every node, the first first.
fn all_admin_endpoints(s: &Setup) -> String {
    let urls: Vec<String> = s.garage.nodes.iter().map(|n| n.admin_url()).collect();
    urls.join(",")
}

/// Whether key `id` exists where `store` reaches.
async fn key_exists(store: &Store<'_>, id: &str) -> bool {
    match store.admin.get::<serde_json::Value>("GetKeyInfo", &[("id", id)]).await {
        Ok(_) => true,
        Err(e) if e.code() == Some("NoSuchAccessKey") => false,
        Err(e) => panic!("GetKeyInfo {id}: {e:?}"),
    }
}

/// Replaces StorageClass `name` (parameters cannot be edited) with one of `parameters`.
async fn replace_class(
    s: &Setup,
    name: &str,
    provisioner: &str,
    parameters: BTreeMap<String, String>,
) {
    let api: Api<StorageClass> = Api::all(s.client.clone());
    api.delete(name, &DeleteParams::default()).await.expect("deleting the StorageClass");
    eventually("the StorageClass to be gone", || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        provisioner: provisioner.into(),
        reclaim_policy: Some("Delete".into()),
        parameters: Some(parameters),
        ..Default::default()
    };
    api.create(&PostParams::default(), &class).await.expect("creating the StorageClass again");
}

/// Claims bind while the node whose admin endpoint a class names first is down: the others
/// answer, and the one that did is asked first from then on.
#[tokio::test]
async fn new_claims_bind_while_the_first_admin_endpoint_named_is_down() {
    let mut s = setup("garage-endpoints").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let admin = all_admin_endpoints(&s);
    let s3 = s.garage.nodes[1].s3_url();
    let extra = [("adminEndpoint", admin.as_str()), ("endpoint", s3.as_str())];
    let class = s.class(&controller.provisioner, &extra, "Delete").await;
    s.claim("before", spec(&class, "", &[])).await;
    s.wait_for("before", ClaimPhase::Bound, "Bound").await;

    s.garage.kill(0).await;
    for i in 0..3 {
        s.claim(&format!("after-{i}"), spec(&class, "", &[])).await;
    }
    for i in 0..3 {
        let name = format!("after-{i}");
        s.wait_for(&name, ClaimPhase::Bound, "Bound").await;
        let (s3, bucket) = s.consumer(&name).await;
        write_read_list(&s3, &bucket, "hello", b"with the first node down").await;
    }
    s.delete_and_wait("after-0").await;
}

/// A claim's bucket is deleted through the node its StorageClass names now, the node it was
/// created through being gone for good.
#[tokio::test]
async fn deletion_reaches_the_bucket_through_the_node_its_class_names_now() {
    let mut s = setup("garage-moved").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let class = s.class(&controller.provisioner, &[], "Delete").await;
    let bucket = format!("moved-{}", unique_suffix());
    s.claim("moved", spec(&class, &bucket, &[])).await;
    let claim = s.wait_for("moved", ClaimPhase::Bound, "Bound").await;
    let user = user_id_for_claim(&claim.uid().unwrap());
    let (s3, _) = s.consumer("moved").await;
    write_read_list(&s3, &bucket, "a.txt", b"emptied through the node named now").await;

    s.garage.kill(0).await;
    replace_class(&s, &class, &controller.provisioner, s.parameters(1)).await;
    s.delete_and_wait("moved").await;
    let node1 = s.settings(1);
    let store = Store { admin: s.admin(&node1.admin, &node1.token_secret) };
    assert!(store.bucket(&bucket).await.unwrap().is_none(), "the bucket is deleted");
    assert!(!key_exists(&store, &claim_key_id(&user)).await, "and the claim's key");
}

/// An ObjectBucket recorded before the cluster's identity was (the admin endpoint alone), whose
/// node is gone for good: its bucket is deleted through the class's node once that cluster
/// shows the claim's key.
#[tokio::test]
async fn an_object_bucket_without_a_cluster_identity_is_cleaned_up_through_the_class() {
    let mut s = setup("garage-legacy").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let class = s.class(&controller.provisioner, &[], "Delete").await;
    let bucket = format!("legacy-{}", unique_suffix());
    s.claim("legacy", spec(&class, &bucket, &[])).await;
    let claim = s.wait_for("legacy", ClaimPhase::Bound, "Bound").await;
    let object_bucket = claim.spec.object_bucket_name.clone().unwrap();
    let state = |ob: &bucket_api::ObjectBucket| ob.spec.additional_state.clone().unwrap();
    let recorded = state(&s.buckets.get(&object_bucket).await.unwrap());
    assert!(recorded.contains_key("clusterId"), "the identity is recorded: {recorded:?}");
    let remove = serde_json::json!({"spec": {"additionalState": {"clusterId": null}}});
    s.buckets.patch(&object_bucket, &PatchParams::default(), &Patch::Merge(&remove)).await.unwrap();
    let legacy = state(&s.buckets.get(&object_bucket).await.unwrap());
    assert!(!legacy.contains_key("clusterId") && legacy.contains_key("adminEndpoint"));

    s.garage.kill(0).await;
    replace_class(&s, &class, &controller.provisioner, s.parameters(1)).await;
    s.delete_and_wait("legacy").await;
    let node1 = s.settings(1);
    let store = Store { admin: s.admin(&node1.admin, &node1.token_secret) };
    assert!(store.bucket(&bucket).await.unwrap().is_none(), "the bucket is deleted");
}

/// A class naming another Garage cluster, which knows the provisioner and holds a bucket of the
/// same name recorded as made by the same claim, deletes nothing there: the claim waits, saying
/// so, until the class names a node of the bucket's own cluster.
#[tokio::test]
async fn a_class_naming_another_cluster_deletes_nothing_there() {
    let mut s = setup("garage-elsewhere").await;
    let other = GarageCluster::start(1).await.expect("a second Garage cluster");
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let class = s.class(&controller.provisioner, &[], "Delete").await;
    let bucket = format!("mine-{}", unique_suffix());
    s.claim("mine", spec(&class, &bucket, &[])).await;
    let claim = s.wait_for("mine", ClaimPhase::Bound, "Bound").await;
    let user = user_id_for_claim(&claim.uid().unwrap());

    s.token_secret("other-admin", &other.admin_token).await;
    let elsewhere = BTreeMap::from([
        ("adminEndpoint".to_string(), other.nodes[0].admin_url()),
        ("endpoint".to_string(), other.nodes[0].s3_url()),
        ("region".to_string(), GARAGE_REGION.to_string()),
        ("secretName".to_string(), "other-admin".to_string()),
        ("secretNamespace".to_string(), s.ns.clone()),
    ]);
    let other_settings = Settings::from_parameters(&elsewhere).unwrap();
    let admin = Admin {
        http: &s.http,
        endpoints: &other_settings.admin,
        token: &other.admin_token,
        secret: &other_settings.token_secret,
    };
    let other_store = Store { admin };
    let service = other_store.ensure_key(&service_key_id(), SERVICE_KEY_NAME).await.unwrap();
    let made = other_store
        .create_bucket(&bucket, &user, ReclaimPolicy::Delete, &service.access_key_id)
        .await
        .unwrap();
    assert!(matches!(made, Created::Mine(_)), "{made:?}");

    // The node the claim was made through is gone; the class names the other cluster.
    s.garage.kill(0).await;
    replace_class(&s, &class, &controller.provisioner, elsewhere).await;
    s.claims.delete("mine", &DeleteParams::default()).await.unwrap();
    let message = eventually("the claim to say its cluster is not reached", || async {
        let claim = s.claims.get_opt("mine").await.ok()??;
        let message = ready(&claim)?.message.clone();
        message.contains("is not reached").then_some(message)
    })
    .await;
    assert!(message.contains("reach Garage cluster"), "{message}");
    assert!(other_store.bucket(&bucket).await.unwrap().is_some(), "nothing deleted elsewhere");
    assert!(key_exists(&other_store, &service.access_key_id).await);

    // The class names a surviving node of the bucket's own cluster: the deletion completes.
    replace_class(&s, &class, &controller.provisioner, s.parameters(1)).await;
    s.wait_gone("mine").await;
    let node1 = s.settings(1);
    let store = Store { admin: s.admin(&node1.admin, &node1.token_secret) };
    assert!(store.bucket(&bucket).await.unwrap().is_none(), "the bucket is deleted");
    assert!(other_store.bucket(&bucket).await.unwrap().is_some(), "still nothing elsewhere");
}
