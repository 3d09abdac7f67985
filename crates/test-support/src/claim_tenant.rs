//! A tenant of an ObjectBucketClaim cluster: an identity whose rights end at its own namespace,
//! where it writes claims, Secrets and ConfigMaps and nothing else.

use anyhow::Result;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::ControlPlane;
use crate::cosi_identity::{ensure_service_account, service_account_token};

const ACCOUNT: &str = "claim-tenant";

fn rule(group: &str, resources: &[&str]) -> PolicyRule {
    let verbs = ["get", "list", "watch", "create", "update", "patch", "delete"];
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

/// A client of `plane` acting as a ServiceAccount of `namespace` (which exists) allowed to write
/// ObjectBucketClaims, Secrets and ConfigMaps there, and nothing anywhere else.
pub async fn claim_tenant(plane: &ControlPlane, namespace: &str) -> Result<Client> {
    let admin = plane.client().await;
    ensure_service_account(&admin, namespace, ACCOUNT).await?;
    let meta = || ObjectMeta { name: Some(ACCOUNT.into()), ..Default::default() };
    let role = Role {
        metadata: meta(),
        rules: Some(vec![
            rule("objectbucket.io", &["objectbucketclaims"]),
            rule("", &["secrets", "configmaps"]),
        ]),
    };
    let params = PatchParams::apply("bucket-provisioner-tests").force();
    Api::<Role>::namespaced(admin.clone(), namespace)
        .patch(ACCOUNT, &params, &Patch::Apply(&role))
        .await?;
    let binding = RoleBinding {
        metadata: meta(),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: ACCOUNT.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: ACCOUNT.into(),
            namespace: Some(namespace.into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .patch(ACCOUNT, &params, &Patch::Apply(&binding))
        .await?;
    let token = service_account_token(&admin, namespace, ACCOUNT).await?;
    let file = Kubeconfig::read_from(plane.kubeconfig_for_token(&token)?)?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}
