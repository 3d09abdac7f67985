//! Who acts in the COSI tests: the upstream controller with the upstream RBAC, and tenants whose
//! rights end at their own namespace. Never an administrator.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kube::Client;

use crate::manifests::{Apply, apply_objects, read_manifest_files};
use crate::scoped_identity::{ALL_VERBS, namespaced_identity, rule};
use crate::service_account::{ensure_service_account, service_account_token};
use crate::{ControlPlane, create_namespace, unique_suffix};

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

/// A tenant of a COSI cluster: a namespace of its own and a client acting as a ServiceAccount
/// there that may write BucketClaims and BucketAccesses and read Secrets, and nothing else.
pub struct CosiTenant {
    /// Its namespace.
    pub namespace: String,
    /// A client acting as the tenant.
    pub client: Client,
}

impl CosiTenant {
    /// A new namespace (named after `prefix`) on `plane` and its tenant.
    pub async fn new(plane: &ControlPlane, prefix: &str) -> Result<CosiTenant> {
        let admin = plane.client().await;
        let namespace = format!("{prefix}-{}", unique_suffix());
        create_namespace(&admin, &namespace).await;
        let rules = vec![
            rule(GROUP, &["bucketclaims", "bucketaccesses"], &ALL_VERBS),
            rule("", &["secrets"], &["get", "list", "watch"]),
        ];
        let client = namespaced_identity(plane, &namespace, "tenant", rules).await?;
        Ok(CosiTenant { namespace, client })
    }
}

/// The API group of every COSI kind.
pub const GROUP: &str = "objectstorage.k8s.io";
