//! Sharing across namespaces as its parties do it: the claim asking, the owner's namespace
//! admin consenting with a `BucketShareGrant`, and the operator's StorageClass.

use bucket_api::{BucketShareGrant, BucketShareGrantSpec, Grantee, ObjectBucketClaimSpec};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use test_support::{ControlPlane, eventually};

/// The operator's consent on a class.
pub const ALLOW: (&str, &str) = ("allowCrossNamespaceSharing", "true");

/// A claim of `class` asking to share the bucket of claim `from`.
pub fn sharing(class: &str, from: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        additional_config: Some([("shareFrom".to_string(), from.to_string())].into()),
        ..Default::default()
    }
}

/// The message of the claim's `Ready` condition.
pub fn ready_message(claim: &bucket_api::ObjectBucketClaim) -> String {
    let status = claim.status.as_ref().unwrap();
    status.conditions.iter().find(|c| c.type_ == "Ready").unwrap().message.clone()
}

/// A grant of claim `claim`'s bucket to `(namespace, claim, mode)` entries.
pub fn grant(
    name: &str,
    claim: &str,
    to: &[(&str, Option<&str>, Option<&str>)],
) -> BucketShareGrant {
    let to = to
        .iter()
        .map(|(namespace, claim, mode)| Grantee {
            kind: None,
            namespace: namespace.to_string(),
            claim_name: claim.map(Into::into),
            access_mode: mode.map(Into::into),
        })
        .collect();
    BucketShareGrant::new(name, BucketShareGrantSpec { claim_name: claim.into(), to })
}

/// A client acting as a new ServiceAccount of `ns` bound there to ClusterRole `role`
/// (`admin` or `edit`, with what is aggregated into them).
pub async fn namespace_role(admin: &Client, ns: &str, role: &str) -> Client {
    role_on(ControlPlane::shared(), admin, ns, role).await
}

/// [`namespace_role`] on `plane`.
pub async fn role_on(plane: &ControlPlane, admin: &Client, ns: &str, role: &str) -> Client {
    let name = format!("{role}-of-ns");
    let meta = || ObjectMeta { name: Some(name.clone()), ..Default::default() };
    let post = PostParams::default();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    accounts
        .create(&post, &ServiceAccount { metadata: meta(), ..Default::default() })
        .await
        .unwrap();
    let binding = RoleBinding {
        metadata: meta(),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.clone(),
            namespace: Some(ns.into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), ns).create(&post, &binding).await.unwrap();
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { audiences: Some(Vec::new()), ..Default::default() }),
        ..Default::default()
    };
    let issued = accounts.create_token_request(&name, &post, &request).await.unwrap();
    let token = issued.status.and_then(|s| s.token).expect("a token");
    let path = plane.kubeconfig_for_token(&token).unwrap();
    let file = Kubeconfig::read_from(&path).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await.unwrap();
    Client::try_from(config).unwrap()
}

/// Grants written by `client` (an identity of the namespace) in `ns`; retried while the
/// aggregation of the `admin` role catches up with a new binding.
pub async fn create_grant(client: &Client, ns: &str, grant: &BucketShareGrant) {
    let api: Api<BucketShareGrant> = Api::namespaced(client.clone(), ns);
    eventually("the namespace admin to create the grant", || async {
        api.create(&PostParams::default(), grant).await.ok()
    })
    .await;
}
