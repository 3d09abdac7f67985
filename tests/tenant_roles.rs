//! The namespace roles Kubernetes ships, as every `deploy/` folder that serves claims extends
//! them: whoever holds `edit` in a namespace writes ObjectBucketClaims there but not their
//! status (the provisioner's), whoever holds `view` reads them, and only `admin` consents to
//! sharing a bucket with a `BucketShareGrant`. Each folder on a control plane of its own, so
//! that one folder's roles never stand in for another's.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use bucket_api::{
    BucketShareGrant, BucketShareGrantSpec, Grantee, ObjectBucketClaim, ObjectBucketClaimSpec,
};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::{
    ControlPlane, Deployed, WAIT, cluster_role_identity, install_crds, install_rbac, test_namespace,
};

fn claim(name: &str) -> ObjectBucketClaim {
    let spec = ObjectBucketClaimSpec {
        storage_class_name: "standard".into(),
        generate_bucket_name: Some(name.into()),
        ..Default::default()
    };
    ObjectBucketClaim::new(name, spec)
}

fn grant(name: &str, claim: &str, to: &str) -> BucketShareGrant {
    let to =
        vec![Grantee { kind: None, namespace: to.into(), claim_name: None, access_mode: None }];
    BucketShareGrant::new(name, BucketShareGrantSpec { claim_name: claim.into(), to })
}

fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 403)
}

/// Makes `call` until it is allowed: the aggregation of a role into `edit`, `view` or `admin`
/// follows a new ClusterRole a moment later. Still refused after [`WAIT`] is a permission
/// missing.
async fn allowed<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = kube::Result<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match call().await {
            Ok(value) => return value,
            Err(e) if is_forbidden(&e) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

fn assert_forbidden<T: Debug>(what: &str, result: kube::Result<T>) {
    match result {
        Err(e) if is_forbidden(&e) => {}
        other => panic!("{what} was not refused by RBAC: {other:?}"),
    }
}

async fn namespace_roles_reach_claims(which: Deployed) {
    let plane = ControlPlane::start().expect("a control plane of this test's own");
    let admin = plane.client().await;
    install_crds(&admin).await.unwrap();
    install_rbac(&admin, which).await.unwrap();
    let ns = test_namespace(&admin, "tenant-roles").await;
    let editor = cluster_role_identity(&plane, &ns, "editor", "edit").await.unwrap();
    let viewer = cluster_role_identity(&plane, &ns, "viewer", "view").await.unwrap();
    let ns_admin = cluster_role_identity(&plane, &ns, "ns-admin", "admin").await.unwrap();
    let post = PostParams::default();

    // An editor writes claims: creates, reads, changes and deletes them.
    let claims: Api<ObjectBucketClaim> = Api::namespaced(editor.clone(), &ns);
    let app = claim("app");
    allowed("an editor creating a claim", || claims.create(&post, &app)).await;
    claims.create(&post, &claim("scratch")).await.unwrap();
    assert_eq!(claims.list(&ListParams::default()).await.unwrap().items.len(), 2);
    let labelled = json!({ "metadata": { "labels": { "team": "data" } } });
    claims.patch("app", &PatchParams::default(), &Patch::Merge(&labelled)).await.unwrap();
    claims.delete("scratch", &DeleteParams::default()).await.unwrap();
    // Its status is the provisioner's word: an editor cannot write it.
    let bound = json!({ "status": { "phase": "Bound" } });
    let status = claims.patch_status("app", &PatchParams::default(), &Patch::Merge(&bound)).await;
    assert_forbidden("an editor writing a claim's status", status);
    // Consent to share its bucket is the namespace admin's.
    let grants: Api<BucketShareGrant> = Api::namespaced(editor.clone(), &ns);
    let consent = grant("share-app", "app", "elsewhere");
    assert_forbidden("an editor granting a bucket", grants.create(&post, &consent).await);

    // A viewer reads claims and writes none.
    let viewed: Api<ObjectBucketClaim> = Api::namespaced(viewer.clone(), &ns);
    let everything = ListParams::default();
    let seen = allowed("a viewer listing claims", || viewed.list(&everything)).await;
    assert_eq!(seen.items.len(), 1);
    assert_eq!(viewed.get("app").await.unwrap().metadata.labels.unwrap()["team"], "data");
    assert_forbidden("a viewer creating a claim", viewed.create(&post, &claim("mine")).await);
    let deleted = viewed.delete("app", &DeleteParams::default()).await;
    assert_forbidden("a viewer deleting a claim", deleted);
    let viewed_grants: Api<BucketShareGrant> = Api::namespaced(viewer.clone(), &ns);
    let listed = viewed_grants.list(&ListParams::default()).await;
    assert_forbidden("a viewer reading grants", listed);

    // The namespace admin writes claims (edit is part of admin) and grants.
    let admins_claims: Api<ObjectBucketClaim> = Api::namespaced(ns_admin.clone(), &ns);
    let more = claim("more");
    allowed("an admin creating a claim", || admins_claims.create(&post, &more)).await;
    let admins_grants: Api<BucketShareGrant> = Api::namespaced(ns_admin.clone(), &ns);
    allowed("an admin granting a bucket", || admins_grants.create(&post, &consent)).await;
}

#[tokio::test]
async fn hostpath_extends_edit_and_view_to_claims() {
    namespace_roles_reach_claims(Deployed::HostPath).await;
}

#[tokio::test]
async fn s3_extends_edit_and_view_to_claims() {
    namespace_roles_reach_claims(Deployed::S3).await;
}

#[tokio::test]
async fn garage_extends_edit_and_view_to_claims() {
    namespace_roles_reach_claims(Deployed::Garage).await;
}
