//! A tenant cannot make an operator's bucket its own across the takeover from the Go
//! aws-s3-provisioner. The old provisioner runs for real against moto with IAM enforced (as in
//! `takeover.rs`) and grants a tenant's claim an operator's bucket through the operator's
//! StorageClass. Under the claim CRD of the previous release (no transition rules) the tenant
//! edits its claim to name a class that creates buckets and that bucket's name; under this
//! release's CRD the same edit is refused. Either way this provisioner, taking over, decides from
//! what the old provisioner recorded: the bucket stays the operator's, and deleting the claims
//! removes only their access.
//!
//! A test binary of its own: it puts the previous release's CRD on the control plane of its
//! process for a while, which no other test may see.

mod common;

use std::time::Duration;

use bucket_api::contract::{annotations, legacy};
use bucket_api::{
    BUCKET_NAME_IMMUTABLE, ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec,
    STORAGE_CLASS_IMMUTABLE,
};
use common::moto::ALLOW_ALL;
use common::old_provisioner::{self, OldProvisioner};
use common::suffix;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use serde_json::json;
use test_support::{
    ControlPlane, Deployed, Harness, TlsProxy, claim_tenant, create_claim, eventually, install_crds,
};

const REGION: &str = "us-west-1";

/// Drops every CEL rule from `schema` and what it holds.
fn without_rules(schema: &mut JSONSchemaProps) {
    schema.x_kubernetes_validations = None;
    for property in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        without_rules(property);
    }
}

/// The claim CRD as the previous release installed it: the same schema without its transition
/// rules (applied by the same field manager as `install_crds`, so they are removed).
async fn previous_release_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("bucket-provisioner-tests").force();
    for mut file in bucket_api::crd_files() {
        let name = file.crd.name_any();
        if !name.starts_with("objectbucketclaims.") {
            continue;
        }
        for version in &mut file.crd.spec.versions {
            if let Some(schema) =
                version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut())
            {
                without_rules(schema);
            }
        }
        crds.patch(&name, &params, &Patch::Apply(&file.crd)).await.unwrap();
        let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(60), established).await.unwrap().unwrap();
    }
}

/// The apiserver's answer to `patch` of claim `name` as a dry run: `Some(message)` once it
/// refuses it as invalid.
async fn refusal(
    claims: &Api<ObjectBucketClaim>,
    name: &str,
    patch: &serde_json::Value,
) -> Option<String> {
    let dry_run = PatchParams { dry_run: true, ..Default::default() };
    match claims.patch(name, &dry_run, &Patch::Merge(patch)).await {
        Err(kube::Error::Api(status)) if status.code == 422 => Some(status.message),
        _ => None,
    }
}

#[tokio::test]
async fn a_tenant_cannot_make_an_operators_bucket_its_own_across_the_takeover() {
    let s = common::cluster::setup("s3-takeover-shared").await;
    let broad = s.moto.user_with_policy(&format!("old-owner-{}", suffix()), ALLOW_ALL).await;
    s.owner_keys("owner", &broad).await;
    let creating = [("region", REGION), ("createBucketUser", "yes")];
    let class = s.class(old_provisioner::NAME, "owner", &creating, Some("Delete")).await;
    let operators = format!("operator-{}", suffix());
    s.moto.existing_bucket_in(REGION, &operators, &["operator.txt"]).await;
    let granting = [("region", REGION), ("bucketName", operators.as_str())];
    let grant_class = s.class(old_provisioner::NAME, "owner", &granting, Some("Delete")).await;

    // Before this release: the old provisioner grants two claims of a tenant the bucket.
    previous_release_crd(&s.client).await;
    let tenant = claim_tenant(ControlPlane::shared(), &s.ns).await.unwrap();
    let claims: Api<ObjectBucketClaim> = Api::namespaced(tenant, &s.ns);
    let proxy = TlsProxy::start(s.moto.port()).expect("starting the TLS proxy");
    let mut old = OldProvisioner::start(&proxy);
    let granted =
        ObjectBucketClaimSpec { storage_class_name: grant_class.clone(), ..Default::default() };
    for name in ["early", "late"] {
        create_claim(&claims, name, granted.clone()).await;
    }
    let mut old_users = Vec::new();
    for name in ["early", "late"] {
        let what = format!("claim {name} bound by the old provisioner");
        let bound = tokio::time::timeout(Duration::from_secs(120), async {
            loop {
                let phase = s.claims.get(name).await.ok().and_then(|c| c.status?.phase);
                if phase == Some(ClaimPhase::Bound)
                    && s.secrets.get_opt(name).await.unwrap().is_some()
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .await;
        assert!(bound.is_ok(), "{what}; old provisioner:\n{}", old.log_tail());
        let ob = s.buckets.get(&legacy::object_bucket_name(&s.ns, name)).await.unwrap();
        assert_eq!(ob.spec.storage_class_name, grant_class, "the old record names the grant");
        let state = ob.spec.additional_state.unwrap_or_default();
        old_users.push(state.get("UserName").cloned().expect("the old provisioner's user"));
        let keys = s.claim_keys(name).await;
        let s3 = s.moto.s3_in(&keys, REGION);
        s3.get_object().bucket(&operators).key("operator.txt").send().await.expect("reads");
    }

    // The tenant makes its first claim look like one that created the bucket: a class that
    // creates buckets (the old library wrote the bucket's name on the claim already). The
    // previous release's CRD lets it.
    let early = s.claims.get("early").await.unwrap();
    assert_eq!(early.spec.bucket_name.as_deref(), Some(operators.as_str()));
    let disguise = json!({ "spec": { "storageClassName": class, "bucketName": operators } });
    let params = PatchParams::default();
    claims.patch("early", &params, &Patch::Merge(&disguise)).await.expect("allowed before");

    // This release's CRD, installed before the switch, refuses the same edit of the other, and
    // any other bucket name.
    install_crds(&s.client).await.unwrap();
    let message = eventually("the claim CRD's transition rules in force", || async {
        refusal(&claims, "late", &disguise).await
    })
    .await;
    assert!(message.contains(STORAGE_CLASS_IMMUTABLE), "{message}");
    match claims.patch("late", &params, &Patch::Merge(&disguise)).await {
        Err(kube::Error::Api(status)) if status.code == 422 => {}
        other => panic!("the tenant's edit of a claim is refused: {other:?}"),
    }
    let rename = json!({ "spec": { "bucketName": format!("other-{}", suffix()) } });
    let message = refusal(&claims, "late", &rename).await.expect("refused");
    assert!(message.contains(BUCKET_NAME_IMMUTABLE), "{message}");
    // Nor can the disguise of the first be undone or changed further.
    let back = json!({ "spec": { "storageClassName": grant_class } });
    let message = refusal(&claims, "early", &back).await.expect("refused");
    assert!(message.contains(STORAGE_CLASS_IMMUTABLE), "{message}");

    // The switch, as in `takeover.rs`: the owner scoped down to what this provisioner documents.
    old.stop();
    let scoped = s.moto.takeover_owner(&format!("owner-{}", suffix())).await;
    let data = json!({ "stringData": {
        "AWS_ACCESS_KEY_ID": scoped.access_key_id,
        "AWS_SECRET_ACCESS_KEY": scoped.secret_access_key,
    }});
    s.secrets.patch("owner", &params, &Patch::Merge(&data)).await.unwrap();
    let controller = Harness::start_as(s.backend(), old_provisioner::NAME, Deployed::S3);

    // Both are adopted as grants of the operator's bucket: the old records decide, whatever the
    // disguised claim says.
    for name in ["early", "late"] {
        s.wait_event(name, "Adopted").await;
        let claim = s.claims.get(name).await.unwrap();
        let ob = s.buckets.get(&legacy::object_bucket_name(&s.ns, name)).await.unwrap();
        for (what, recorded) in [("claim", claim.annotations()), ("ObjectBucket", ob.annotations())]
        {
            let source = recorded.get(annotations::BUCKET_SOURCE).map(String::as_str);
            assert_eq!(source, Some("existing"), "{name}'s {what}: {recorded:?}");
        }
    }
    s.wait_for("late", ClaimPhase::Bound, "Bound").await;
    // The disguised claim says what is wrong with it, and its key still reads.
    s.wait_for("early", ClaimPhase::Failed, "StorageClassImmutable").await;
    let keys = s.claim_keys("early").await;
    let s3 = s.moto.s3_in(&keys, REGION);
    s3.get_object().bucket(&operators).key("operator.txt").send().await.expect("still reads");

    // Deleting the claims removes their access, and only that.
    for name in ["early", "late"] {
        s.delete_and_wait(name).await;
    }
    assert!(s.moto.bucket_exists(&operators).await, "the operator's bucket stays");
    assert_eq!(s.moto.object_keys(&operators).await, ["operator.txt"], "with its data");
    for user in &old_users {
        assert!(!s.moto.user_exists(user).await, "old user {user} is deleted");
    }
    controller.stop().await;
    drop(proxy);
}
