//! The v0.2.2 attack on a real control plane: a BucketAccess in namespace B granted a Bucket
//! made for a claim in namespace A (which v0.2.2 allows through `existingBucketName`) is
//! refused by the driver, reading the objects as a ServiceAccount holding only the RBAC the
//! crate documents.

mod common;

use std::sync::Arc;

use common::Harness;
use cosi_driver::KubeLookup;
use cosi_driver::proto::{v1alpha1, v1alpha2};
use cosi_driver::tenancy::{Lookup, LookupError, Version};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use test_support::bench::{AuditedPlane, requests_since};
use test_support::cosi::install_stand_in_crds;
use test_support::{ControlPlane, WAIT, test_namespace, unique_suffix};
use tonic::Code;

/// A client acting as a ServiceAccount bound to exactly the RBAC `tenancy_kube` documents.
async fn driver_identity(admin: &Client, namespace: &str) -> Client {
    let name = format!("cosi-driver-{}", unique_suffix());
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let account = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    accounts.create(&PostParams::default(), &account).await.unwrap();
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [
            {"apiGroups": ["objectstorage.k8s.io"], "resources": ["buckets"], "verbs": ["get"]},
            {"apiGroups": ["objectstorage.k8s.io"], "resources": ["bucketaccesses"], "verbs": ["list", "watch"]},
            {"apiGroups": ["objectstorage.k8s.io"], "resources": ["bucketclaims"], "verbs": ["list", "watch"]}
        ]
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { audiences: Some(Vec::new()), ..Default::default() }),
        ..Default::default()
    };
    let issued =
        accounts.create_token_request(&name, &PostParams::default(), &request).await.unwrap();
    let token = issued.status.unwrap().token.expect("a token");
    let path = ControlPlane::shared().kubeconfig_for_token(&token).unwrap();
    let file = Kubeconfig::read_from(&path).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await.unwrap();
    Client::try_from(config).unwrap()
}

fn api(admin: &Client, version: &str, kind: &str, plural: &str) -> (ApiResource, Client) {
    let gvk = GroupVersionKind::gvk("objectstorage.k8s.io", version, kind);
    (ApiResource::from_gvk_with_plural(&gvk, plural), admin.clone())
}

/// Creates a Bucket object `name` made for the claim `claim_ns/claim` (as `field` names it).
async fn bucket_object(admin: &Client, version: &str, name: &str, field: &str, claim_ns: &str) {
    let (resource, client) = api(admin, version, "Bucket", "buckets");
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("objectstorage.k8s.io/{version}"),
        "kind": "Bucket",
        "metadata": {"name": name},
        "spec": {field: {"namespace": claim_ns, "name": "claim"}}
    }))
    .unwrap();
    Api::<DynamicObject>::all_with(client, &resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// Creates a BucketAccess in `namespace` and answers the account name the sidecar sends for it.
async fn access_object(admin: &Client, version: &str, namespace: &str) -> String {
    let (resource, client) = api(admin, version, "BucketAccess", "bucketaccesses");
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("objectstorage.k8s.io/{version}"),
        "kind": "BucketAccess",
        "metadata": {"name": format!("access-{}", unique_suffix())},
        "spec": {}
    }))
    .unwrap();
    let made = Api::<DynamicObject>::namespaced_with(client, namespace, &resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    format!("ba-{}", made.metadata.uid.unwrap())
}

#[tokio::test]
async fn an_access_in_another_namespace_is_refused_under_both_versions() {
    test_support::init_tracing();
    let admin = ControlPlane::shared().client().await;
    install_stand_in_crds(&admin).await.unwrap();
    let (ns_a, ns_b) =
        (test_namespace(&admin, "cosi-a").await, test_namespace(&admin, "cosi-b").await);
    let lookup = KubeLookup::new(driver_identity(&admin, &ns_a).await);
    let h = Harness::start_with(Some(Arc::new(lookup))).await;

    // v1alpha1: the Bucket object's name is the bucket's.
    let name = format!("bucketclass-{}", unique_suffix());
    let mut v1 = h.v1();
    let created = v1.driver_create_bucket(v1alpha1::DriverCreateBucketRequest {
        name: name.clone(),
        parameters: Default::default(),
    });
    let bucket_id = created.await.unwrap().into_inner().bucket_id;
    bucket_object(&admin, "v1alpha1", &name, "bucketClaim", &ns_a).await;
    let grant = |account: String| v1alpha1::DriverGrantBucketAccessRequest {
        bucket_id: bucket_id.clone(),
        name: account,
        authentication_type: v1alpha1::AuthenticationType::Key.into(),
        parameters: Default::default(),
    };
    let attacker = access_object(&admin, "v1alpha1", &ns_b).await;
    let refused = h.v1().driver_grant_bucket_access(grant(attacker.clone())).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{}", refused.message());
    assert!(
        refused.message().contains(&ns_a) && refused.message().contains(&ns_b),
        "{}",
        refused.message()
    );
    let attacker_id = bucket_provisioner::bucket::standalone::cosi_account_id(&attacker);
    assert_eq!(h.key_count(&attacker_id), 0, "nothing was issued");
    let owner = access_object(&admin, "v1alpha1", &ns_a).await;
    h.v1().driver_grant_bucket_access(grant(owner)).await.unwrap();
    // An access the cluster does not know is refused too.
    let unknown = h.v1().driver_grant_bucket_access(grant("ba-no-such-uid".into())).await;
    assert_eq!(unknown.unwrap_err().code(), Code::PermissionDenied);

    // v1alpha2 keeps the claim under bucketClaimRef.
    let name = format!("bc-{}", unique_suffix());
    let mut v2 = h.v2();
    let created = v2.driver_create_bucket(v1alpha2::DriverCreateBucketRequest {
        name: name.clone(),
        protocols: vec![v1alpha2::ObjectProtocol {
            r#type: v1alpha2::object_protocol::Type::S3.into(),
        }],
        parameters: Default::default(),
    });
    let bucket_id = created.await.unwrap().into_inner().bucket_id;
    bucket_object(&admin, "v1alpha2", &name, "bucketClaimRef", &ns_a).await;
    let grant = |account: String| v1alpha2::DriverGrantBucketAccessRequest {
        account_name: account,
        protocol: Some(v1alpha2::ObjectProtocol {
            r#type: v1alpha2::object_protocol::Type::S3.into(),
        }),
        authentication_type: Some(v1alpha2::AuthenticationType {
            r#type: v1alpha2::authentication_type::Type::Key.into(),
        }),
        service_account_name: String::new(),
        parameters: Default::default(),
        buckets: vec![v1alpha2::driver_grant_bucket_access_request::AccessedBucket {
            bucket_id: bucket_id.clone(),
            access_mode: Some(v1alpha2::AccessMode {
                mode: v1alpha2::access_mode::Mode::ReadWrite.into(),
            }),
        }],
    };
    let attacker = access_object(&admin, "v1alpha2", &ns_b).await;
    let refused = h.v2().driver_grant_bucket_access(grant(attacker)).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{}", refused.message());
    let owner = access_object(&admin, "v1alpha2", &ns_a).await;
    h.v2().driver_grant_bucket_access(grant(owner)).await.unwrap();
}

/// The kubeconfig's client.
async fn client_of(path: &std::path::Path) -> Client {
    let file = Kubeconfig::read_from(path).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await.unwrap();
    Client::try_from(config).unwrap()
}

/// How many times the audit log says `user` listed BucketAccesses since `mark`.
fn access_lists(audit: &std::path::Path, user: &str, mark: u64) -> usize {
    let (requests, _) = requests_since(audit, user, mark);
    requests.iter().filter(|r| r.verb == "list" && r.resource == "bucketaccesses").count()
}

#[tokio::test]
async fn grants_find_their_access_in_a_watched_cache_not_a_list_each() {
    test_support::init_tracing();
    const DRIVER: &str = "cosi-tenancy-driver";
    let AuditedPlane { plane: _plane, client: admin, kubeconfig, audit } =
        AuditedPlane::start(DRIVER).await;
    install_stand_in_crds(&admin).await.unwrap();
    let ns = test_namespace(&admin, "cosi-cache").await;
    let mut accounts = Vec::new();
    for _ in 0..20 {
        accounts.push(access_object(&admin, "v1alpha1", &ns).await);
    }
    let lookup = KubeLookup::new(client_of(&kubeconfig).await);

    // The first grant starts the cache, and lists while it fills; once a grant lists nothing,
    // the cache holds every access made before it started.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, before) = requests_since(&audit, DRIVER, 0);
        let first = lookup.facts(Version::V1alpha1, &accounts[0], &[]).await.unwrap();
        assert_eq!(first.access_namespace, ns);
        if access_lists(&audit, DRIVER, before) == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "every grant listed accesses");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (_, mark) = requests_since(&audit, DRIVER, 0);
    for account in &accounts[1..] {
        let facts = lookup.facts(Version::V1alpha1, account, &[]).await.unwrap();
        assert_eq!(facts.access_namespace, ns, "{account}");
    }
    let lists = access_lists(&audit, DRIVER, mark);
    assert_eq!(lists, 0, "19 grants of accesses already watched listed accesses {lists} times");

    // An access made now is found, and one that never existed is still refused.
    let late = access_object(&admin, "v1alpha1", &ns).await;
    let facts = lookup.facts(Version::V1alpha1, &late, &[]).await.unwrap();
    assert_eq!(facts.access_namespace, ns);
    let missing = lookup.facts(Version::V1alpha1, "ba-no-such-uid", &[]).await.unwrap_err();
    assert!(matches!(missing, LookupError::Missing(_)), "{missing:?}");
}
