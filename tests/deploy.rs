//! Every manifest under `deploy/` and `examples/manifests/` is accepted by the real apiserver
//! (server-side dry-run), as it would be by `kubectl apply --dry-run=server`.

use std::path::Path;

use test_support::{Apply, apply_manifests, client_with_crds};

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
