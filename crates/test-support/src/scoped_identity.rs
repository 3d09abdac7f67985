//! An identity whose rights end at one namespace: a ServiceAccount there, bound there to a Role
//! with the rules given or to a ClusterRole (`edit`, `view`), and a client acting with the
//! token the apiserver issues for it. The tenants of the tests (claim writers, COSI tenants,
//! a namespace's editors) are such identities.

use anyhow::Result;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::ControlPlane;
use crate::service_account::{ensure_service_account, service_account_token};

/// Every verb a tenant may use on what it owns.
pub(crate) const ALL_VERBS: [&str; 7] =
    ["get", "list", "watch", "create", "update", "patch", "delete"];

/// A rule granting `verbs` on `resources` of API group `group`.
pub(crate) fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

/// A client of `plane` acting as ServiceAccount `account` of `namespace` (which exists), bound
/// to a Role of `rules` there and to nothing anywhere else. Applied, so asking twice is fine.
pub(crate) async fn namespaced_identity(
    plane: &ControlPlane,
    namespace: &str,
    account: &str,
    rules: Vec<PolicyRule>,
) -> Result<Client> {
    let admin = plane.client().await;
    let role = Role {
        metadata: ObjectMeta { name: Some(account.into()), ..Default::default() },
        rules: Some(rules),
    };
    Api::<Role>::namespaced(admin.clone(), namespace)
        .patch(account, &apply_params(), &Patch::Apply(&role))
        .await?;
    bound_identity(plane, namespace, account, "Role", account).await
}

/// A client of `plane` acting as ServiceAccount `account` of `namespace` (which exists), bound
/// there (a RoleBinding) to ClusterRole `cluster_role` (`edit`, `view`, ...), with whatever is
/// aggregated into it, and to nothing anywhere else. Applied, so asking twice is fine.
pub async fn cluster_role_identity(
    plane: &ControlPlane,
    namespace: &str,
    account: &str,
    cluster_role: &str,
) -> Result<Client> {
    bound_identity(plane, namespace, account, "ClusterRole", cluster_role).await
}

fn apply_params() -> PatchParams {
    PatchParams::apply("bucket-provisioner-tests").force()
}

/// Binds ServiceAccount `account` of `namespace` there to role `name` of kind `kind` and
/// answers a client acting with a token the apiserver issues for it.
async fn bound_identity(
    plane: &ControlPlane,
    namespace: &str,
    account: &str,
    kind: &str,
    name: &str,
) -> Result<Client> {
    let admin = plane.client().await;
    ensure_service_account(&admin, namespace, account).await?;
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some(account.into()), ..Default::default() },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: kind.into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(namespace.into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .patch(account, &apply_params(), &Patch::Apply(&binding))
        .await?;
    let token = service_account_token(&admin, namespace, account).await?;
    let file = Kubeconfig::read_from(plane.kubeconfig_for_token(&token)?)?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}
