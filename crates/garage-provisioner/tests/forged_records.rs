//! A tenant's claim annotations once steered cleanup: a `cleanup-state` naming the tenant's own
//! server and the deployed admin-token Secret made the provisioner read the token and send it
//! there. Here a tenant of its own namespace only (a namespace-scoped identity) forges every
//! record it can write on a claim, with the controller acting as `deploy/garage/` deploys it,
//! and nothing reaches the tenant's address, nothing of another namespace is touched.

mod common;

use std::collections::BTreeMap;

use bucket_api::contract::FINALIZER;
use bucket_api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use common::{Harness, Setup, TOKEN_SECRET, setup, spec, write_read_list};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use test_support::{
    ControlPlane, Deployed, Tripwire, claim_tenant, test_namespace, unique_suffix, wait_claim_gone,
};

/// The annotations a tenant forges: ours as the provisioner, a new bucket under `Delete`, and
/// backend state naming `tripwire` as every endpoint and the operator's token Secret.
fn forged(provisioner: &str, tripwire: &Tripwire, s: &Setup) -> BTreeMap<String, String> {
    let state = serde_json::json!({
        "adminEndpoint": tripwire.url,
        "endpoint": tripwire.url,
        "region": "garage",
        "secretName": TOKEN_SECRET,
        "secretNamespace": s.ns,
    });
    BTreeMap::from([
        ("objectbucket.io/provisioner".into(), provisioner.into()),
        ("objectbucket.io/bucket-source".into(), "new".into()),
        ("objectbucket.io/reclaim-policy".into(), "Delete".into()),
        ("objectbucket.io/cleanup-state".into(), state.to_string()),
    ])
}

/// Creates, as the tenant, claim `name` carrying the forged annotations and our finalizer, then
/// deletes it and waits until it is gone.
async fn forge_and_delete(
    tenant: &Client,
    ns: &str,
    name: &str,
    spec: ObjectBucketClaimSpec,
    annotations: BTreeMap<String, String>,
) {
    let claims: Api<ObjectBucketClaim> = Api::namespaced(tenant.clone(), ns);
    let claim = ObjectBucketClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some(annotations),
            finalizers: Some(vec![FINALIZER.into()]),
            ..Default::default()
        },
        spec,
        status: None,
    };
    claims.create(&PostParams::default(), &claim).await.expect("the tenant may create claims");
    // Time for the controller to look at the live claim before it goes.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    claims.delete(name, &DeleteParams::default()).await.expect("the tenant may delete claims");
    wait_claim_gone(&claims, name).await;
}

#[tokio::test]
async fn forged_cleanup_records_send_the_admin_token_nowhere_and_delete_nothing() {
    let s = setup("garage-forged").await;
    let controller = Harness::start(s.backend(), Deployed::Garage);
    let class = s.class(&controller.provisioner, &[], "Delete").await;
    // The victim: a bound claim of the operator's class, holding data.
    s.claim("victim", spec(&class, "", &[])).await;
    s.wait_for("victim", ClaimPhase::Bound, "Bound").await;
    let (victim_s3, victim_bucket) = s.consumer("victim").await;
    write_read_list(&victim_s3, &victim_bucket, "precious", b"the victim's data").await;

    let tripwire = Tripwire::start().await;
    let tenant_ns = test_namespace(&s.client, "garage-forger").await;
    let tenant = claim_tenant(ControlPlane::shared(), &tenant_ns).await.unwrap();
    let annotations = forged(&controller.provisioner, &tripwire, &s);
    // A class that does not exist, so that nothing of the claim's own is ever recorded.
    let missing = format!("no-such-class-{}", unique_suffix());
    forge_and_delete(
        &tenant,
        &tenant_ns,
        "ghost",
        spec(&missing, &victim_bucket, &[]),
        annotations.clone(),
    )
    .await;
    // The operator's class, naming the victim's bucket.
    forge_and_delete(&tenant, &tenant_ns, "thief", spec(&class, &victim_bucket, &[]), annotations)
        .await;

    tripwire.assert_untouched("the forged claims' cleanup");
    let got = victim_s3.get_object().bucket(&victim_bucket).key("precious").send().await;
    let body = got.expect("the victim's object is still there").body.collect().await.unwrap();
    assert_eq!(body.into_bytes().as_ref(), b"the victim's data");
    s.wait_for("victim", ClaimPhase::Bound, "Bound").await;
}
