//! Every manifest under `deploy/`, `examples/manifests/` and `examples/hostpath-volumes/` is
//! accepted by the real apiserver (server-side dry-run), as it would be by
//! `kubectl apply --dry-run=server`.

use std::path::Path;

use test_support::{Apply, apply_manifests, client_with_crds, read_manifests};

async fn dry_run(relative: &str) -> usize {
    let client = client_with_crds().await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative);
    apply_manifests(&client, &dir, Apply::DryRun).await.unwrap_or_else(|e| panic!("{e:#}"))
}

#[tokio::test]
async fn hostpath_manifests_are_accepted() {
    // Namespace; ServiceAccount, ClusterRole and binding, Role and binding; Deployment; Service;
    // two StorageClasses.
    assert_eq!(dry_run("deploy/hostpath").await, 10);
}

#[tokio::test]
async fn example_manifests_are_accepted() {
    assert_eq!(dry_run("examples/manifests").await, 4);
}

#[tokio::test]
async fn hostpath_volume_manifests_are_accepted() {
    // Namespace; ServiceAccount, ClusterRole and binding, Role and binding; DaemonSet;
    // StorageClass. Then the claim and the pod of the example.
    assert_eq!(dry_run("deploy/hostpath-volumes").await, 8);
    assert_eq!(dry_run("examples/hostpath-volumes").await, 2);
}

#[tokio::test]
async fn s3_manifests_are_accepted() {
    // Namespace; ServiceAccount, ClusterRole and binding, Role and binding; Deployment; the
    // example owner Secret; two StorageClasses.
    assert_eq!(dry_run("deploy/s3").await, 10);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/s3");
    let objects = read_manifests(&dir).unwrap();
    let class =
        objects.iter().find(|(_, o)| o.types.as_ref().is_some_and(|t| t.kind == "StorageClass"));
    let provisioner = class.expect("deploy/s3 has a StorageClass").1.data["provisioner"].clone();
    assert_eq!(provisioner, s3_provisioner::DEFAULT_PROVISIONER_NAME, "it names the default");
}
