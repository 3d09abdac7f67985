//! Who acts in the COSI tests: the upstream controller with the upstream RBAC, and tenants whose
//! rights end at their own namespace. Never an administrator.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::manifests::{Apply, apply_objects, read_manifest_files};
use crate::{ControlPlane, create_namespace, unique_suffix};

/// How long the issued tokens stay valid: longer than any suite runs.
const TOKEN_SECONDS: i64 = 48 * 3600;

/// Applies the upstream controller's RBAC from `file` (its ClusterRole, Role and bindings, which
/// name a ServiceAccount of namespace `default`) and makes that ServiceAccount.
pub(crate) async fn upstream_controller_rbac(admin: &Client, file: &Path) -> Result<()> {
    let objects = read_manifest_files(&[file.to_owned()])?;
    apply_objects(admin, &objects, Apply::ForReal).await?;
    for (_, object) in &objects {
        for subject in object.data["subjects"].as_array().into_iter().flatten() {
            if subject["kind"] == "ServiceAccount" {
                let namespace = subject["namespace"].as_str().unwrap_or("default");
                let name = subject["name"].as_str().context("a subject without a name")?;
                ensure_service_account(admin, namespace, name).await?;
            }
        }
    }
    Ok(())
}

/// A kubeconfig holding a token the apiserver issued for ServiceAccount `name` of `namespace`.
pub(crate) async fn service_account_kubeconfig(
    plane: &ControlPlane,
    namespace: &str,
    name: &str,
) -> Result<PathBuf> {
    let admin = plane.client().await;
    let token = service_account_token(&admin, namespace, name).await?;
    plane.kubeconfig_for_token(&token)
}

pub(crate) async fn service_account_token(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(Vec::new()),
            expiration_seconds: Some(TOKEN_SECONDS),
            ..Default::default()
        }),
        ..Default::default()
    };
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("issuing a token for ServiceAccount {namespace}/{name}"))?;
    issued.status.and_then(|s| s.token).context("the TokenRequest answered no token")
}

/// A tenant of a COSI cluster: a namespace of its own and a client acting as a ServiceAccount
/// there that may write BucketClaims and BucketAccesses and read Secrets, and nothing else.
pub struct CosiTenant {
    /// Its namespace.
    pub namespace: String,
    /// A client acting as the tenant.
    pub client: Client,
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

impl CosiTenant {
    /// A new namespace (named after `prefix`) on `plane` and its tenant.
    pub async fn new(plane: &ControlPlane, prefix: &str) -> Result<CosiTenant> {
        const ACCOUNT: &str = "tenant";
        let admin = plane.client().await;
        let namespace = format!("{prefix}-{}", unique_suffix());
        create_namespace(&admin, &namespace).await;
        ensure_service_account(&admin, &namespace, ACCOUNT).await?;
        let meta = || ObjectMeta { name: Some(ACCOUNT.into()), ..Default::default() };
        let all = ["get", "list", "watch", "create", "update", "patch", "delete"];
        let role = Role {
            metadata: meta(),
            rules: Some(vec![
                rule(GROUP, &["bucketclaims", "bucketaccesses"], &all),
                rule("", &["secrets"], &["get", "list", "watch"]),
            ]),
        };
        let params = PatchParams::apply("bucket-provisioner-tests").force();
        Api::<Role>::namespaced(admin.clone(), &namespace)
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
                namespace: Some(namespace.clone()),
                ..Default::default()
            }]),
        };
        Api::<RoleBinding>::namespaced(admin.clone(), &namespace)
            .patch(ACCOUNT, &params, &Patch::Apply(&binding))
            .await?;
        let token = service_account_token(&admin, &namespace, ACCOUNT).await?;
        let path = plane.kubeconfig_for_token(&token)?;
        let file = Kubeconfig::read_from(&path)?;
        let config =
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?;
        Ok(CosiTenant { namespace, client: Client::try_from(config)? })
    }
}

/// The API group of every COSI kind.
pub const GROUP: &str = "objectstorage.k8s.io";

/// Makes ServiceAccount `name` in `namespace` (if missing).
pub(crate) async fn ensure_service_account(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> Result<()> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    if accounts.get_opt(name).await?.is_none() {
        let account = ServiceAccount {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        };
        accounts.create(&PostParams::default(), &account).await?;
    }
    Ok(())
}
