//! The upstream COSI pieces as the drivers' tests run them: each version's CRDs and controller
//! on a control plane of their own, the controller under the upstream RBAC only, tenants as
//! namespace-scoped identities; and `deploy/cosi/` granting its sidecars what they call.

use kube::ResourceExt;
use serde_json::json;
use test_support::cosi::{Cosi, CosiVersion, create};
use test_support::{CosiTenant, Deployed, deployed_identity, eventually, unique_suffix};

/// A tenant's claim becomes a Bucket object for the class's driver, made by the upstream
/// controller with nothing but its own RBAC; the Bucket names the claim it was made for.
async fn controller_makes_a_bucket_for_a_claim(version: CosiVersion) {
    let cosi = Cosi::start(version).await.unwrap();
    let admin = cosi.client().await;
    let driver = format!("test.cosi.bucket-provisioner.io-{}", unique_suffix());
    let class = format!("class-{}", unique_suffix());
    let classes = version.api(&admin, "BucketClass", None);
    create(&classes, &version.bucket_class(&class, &driver, "Delete", json!({}))).await.unwrap();

    let tenant = CosiTenant::new(cosi.plane(), "tenant").await.unwrap();
    let claims = version.api(&tenant.client, "BucketClaim", Some(&tenant.namespace));
    create(&claims, &version.claim(&tenant.namespace, "data", &class)).await.unwrap();

    let buckets = version.api(&admin, "Bucket", None);
    let bucket = eventually("the controller to make a Bucket", || async {
        let list = buckets.list(&Default::default()).await.ok()?;
        list.items.into_iter().next()
    })
    .await;
    let spec = &bucket.data["spec"];
    assert_eq!(spec["driverName"], driver.as_str(), "{}", cosi.controller_log(20));
    let claim_ref = match version {
        CosiVersion::V1Alpha1 => &spec["bucketClaim"],
        CosiVersion::V1Alpha2 => &spec["bucketClaimRef"],
    };
    assert_eq!(claim_ref["namespace"], tenant.namespace.as_str());
    assert_eq!(claim_ref["name"], "data");
    // The claim points back at it (v1alpha2's controller binds it at once; v1alpha1's only
    // once the sidecar marks the Bucket ready, which needs a driver).
    if version == CosiVersion::V1Alpha2 {
        let claim = eventually("the claim to name its Bucket", || async {
            let claim = claims.get("data").await.ok()?;
            version.claim_bucket(&claim).map(|_| claim)
        })
        .await;
        assert_eq!(version.claim_bucket(&claim), Some(bucket.name_any()));
    }
    // Its upstream RBAC covers what it did.
    let log = cosi.controller_log(usize::MAX);
    assert!(!log.contains("forbidden"), "{log}");
}

#[tokio::test]
async fn v1alpha1_controller_makes_a_bucket_for_a_claim() {
    controller_makes_a_bucket_for_a_claim(CosiVersion::V1Alpha1).await;
}

#[tokio::test]
async fn v1alpha2_controller_makes_a_bucket_for_a_claim() {
    controller_makes_a_bucket_for_a_claim(CosiVersion::V1Alpha2).await;
}

/// The RBAC of `deploy/cosi/` lets its ServiceAccounts do what the sidecar and the driver do,
/// and not what they never need: real requests as that identity.
#[tokio::test]
async fn cosi_sidecar_identity_is_least_privilege() {
    let cosi = Cosi::start(CosiVersion::V1Alpha2).await.unwrap();
    for deployed in [Deployed::CosiHostPath, Deployed::CosiS3, Deployed::CosiGarage] {
        let identity = deployed_identity(cosi.plane(), deployed).await.unwrap();
        let client = identity.client().await;
        let version = cosi.version;
        // What it needs: Buckets and accesses everywhere, Secrets in tenant namespaces.
        version.api(&client, "Bucket", None).list(&Default::default()).await.unwrap();
        version.api(&client, "BucketAccess", None).list(&Default::default()).await.unwrap();
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::all(client.clone());
        secrets.list(&Default::default()).await.unwrap();
        // What it never needs: to make Buckets or claims, or to touch classes.
        let bucket = version.object(
            "Bucket",
            "forged",
            None,
            json!({ "spec": { "driverName": "x", "bucketClassName": "x", "deletionPolicy": "Delete",
                "protocols": ["S3"], "bucketClaimRef": { "name": "x", "namespace": "x" } } }),
        );
        let error = create(&version.api(&client, "Bucket", None), &bucket).await.unwrap_err();
        assert!(format!("{error:#}").contains("forbidden"), "{deployed:?}: {error:#}");
        let class = version.bucket_class("forged", "x", "Delete", json!({}));
        let error = create(&version.api(&client, "BucketClass", None), &class).await.unwrap_err();
        assert!(format!("{error:#}").contains("forbidden"), "{deployed:?}: {error:#}");
    }
}
