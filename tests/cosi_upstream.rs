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

/// Why a driver cannot trust a Bucket's claim reference under v1alpha1: when a claim in
/// namespace B names A's Bucket through `existingBucketName`, v0.2.2's controller rewrites the
/// Bucket's `spec.bucketClaim` to B's claim and marks B's claim ready. v1alpha2's controller
/// refuses the binding (the reference names another namespace).
async fn existing_bucket_name_across_namespaces(version: CosiVersion) {
    let cosi = Cosi::start(version).await.unwrap();
    let admin = cosi.client().await;
    let class = format!("class-{}", unique_suffix());
    let classes = version.api(&admin, "BucketClass", None);
    create(&classes, &version.bucket_class(&class, "test.cosi.example", "Delete", json!({})))
        .await
        .unwrap();
    let victim = CosiTenant::new(cosi.plane(), "victim").await.unwrap();
    let claims = version.api(&victim.client, "BucketClaim", Some(&victim.namespace));
    create(&claims, &version.claim(&victim.namespace, "data", &class)).await.unwrap();
    let buckets = version.api(&admin, "Bucket", None);
    let bucket = eventually("the victim's Bucket", || async {
        buckets.list(&Default::default()).await.ok()?.items.into_iter().next()
    })
    .await
    .name_any();

    let attacker = CosiTenant::new(cosi.plane(), "attacker").await.unwrap();
    let stolen = version.api(&attacker.client, "BucketClaim", Some(&attacker.namespace));
    create(&stolen, &version.claim_of_existing(&attacker.namespace, "stolen", &bucket))
        .await
        .unwrap();
    let claim_namespace = |b: &kube::api::DynamicObject| {
        let field = if version == CosiVersion::V1Alpha1 { "bucketClaim" } else { "bucketClaimRef" };
        b.data["spec"][field]["namespace"].as_str().unwrap_or_default().to_owned()
    };
    match version {
        CosiVersion::V1Alpha1 => {
            let rebound = eventually("the Bucket to be rebound to the attacker's claim", || {
                let (buckets, bucket, attacker) = (&buckets, &bucket, &attacker.namespace);
                async move {
                    let object = buckets.get(bucket).await.ok()?;
                    (claim_namespace(&object) == *attacker).then_some(object)
                }
            })
            .await;
            assert_eq!(rebound.data["spec"]["bucketClaim"]["name"], "stolen");
            // The controller writes the claim's status after rebinding the Bucket: wait for it.
            eventually("the attacker's claim to be marked ready", || {
                let stolen = &stolen;
                async move { stolen.get("stolen").await.ok().filter(|c| version.claim_ready(c)) }
            })
            .await;
        }
        CosiVersion::V1Alpha2 => {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            let object = buckets.get(&bucket).await.unwrap();
            assert_eq!(claim_namespace(&object), victim.namespace);
            let claim = stolen.get("stolen").await.unwrap();
            assert!(!version.claim_ready(&claim), "{}", claim.data["status"]);
            assert_eq!(version.claim_bucket(&claim), None);
        }
    }
}

#[tokio::test]
async fn v1alpha1_controller_rebinds_a_bucket_to_another_namespace() {
    existing_bucket_name_across_namespaces(CosiVersion::V1Alpha1).await;
}

#[tokio::test]
async fn v1alpha2_controller_refuses_a_bucket_of_another_namespace() {
    existing_bucket_name_across_namespaces(CosiVersion::V1Alpha2).await;
}
