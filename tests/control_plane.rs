//! The test control plane itself: the garbage collector runs, and a stopped control plane leaves
//! no process or file behind.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use test_support::{ControlPlane, eventually, init_tracing, test_namespace};

fn config_map(name: &str, owner: Option<&ConfigMap>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: owner.map(|o| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    name: o.metadata.name.clone().unwrap(),
                    uid: o.metadata.uid.clone().unwrap(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn garbage_collector_removes_dependents_of_a_deleted_owner() {
    init_tracing();
    let client = ControlPlane::shared().client().await;
    let ns = test_namespace(&client, "cp-gc").await;
    let maps: Api<ConfigMap> = Api::namespaced(client, &ns);
    let owner = maps.create(&PostParams::default(), &config_map("owner", None)).await.unwrap();
    maps.create(&PostParams::default(), &config_map("dependent", Some(&owner))).await.unwrap();

    maps.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually("the garbage collector to delete the dependent", || async {
        maps.get_opt("dependent").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_stopped_control_plane_leaves_nothing_behind() {
    init_tracing();
    let plane = ControlPlane::start().expect("a second control plane starts");
    let kubeconfig = plane.kubeconfig_path().to_owned();
    let dir = kubeconfig.parent().unwrap().to_owned();
    let client = plane.client().await;
    client.apiserver_version().await.expect("the apiserver answers");
    drop(plane);

    assert!(!dir.exists(), "{} was not removed", dir.display());
    let leftovers = std::process::Command::new("pgrep")
        .args(["-f", &dir.display().to_string()])
        .output()
        .expect("pgrep runs");
    assert!(
        leftovers.stdout.is_empty(),
        "processes still running: {}",
        String::from_utf8_lossy(&leftovers.stdout)
    );
}
