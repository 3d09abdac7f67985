//! A tenant of an ObjectBucketClaim cluster: an identity whose rights end at its own namespace,
//! where it writes claims, Secrets and ConfigMaps and nothing else.

use anyhow::Result;
use kube::Client;

use crate::ControlPlane;
use crate::scoped_identity::{ALL_VERBS, namespaced_identity, rule};

/// A client of `plane` acting as a ServiceAccount of `namespace` (which exists) allowed to write
/// ObjectBucketClaims, Secrets and ConfigMaps there, and nothing anywhere else.
pub async fn claim_tenant(plane: &ControlPlane, namespace: &str) -> Result<Client> {
    let rules = vec![
        rule("objectbucket.io", &["objectbucketclaims"], &ALL_VERBS),
        rule("", &["secrets", "configmaps"], &ALL_VERBS),
    ];
    namespaced_identity(plane, namespace, "claim-tenant", rules).await
}
