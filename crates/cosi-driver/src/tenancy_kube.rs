//! The [`Lookup`] of a grant's facts from the cluster's COSI objects, read as dynamic objects of
//! the request's version.
//!
//! RBAC it needs (cluster-wide, group `objectstorage.k8s.io`): `get` on `buckets`, `list` on
//! `bucketaccesses` (the sidecar names an access only by its UID, so it is found in the list).

use std::future::Future;
use std::pin::Pin;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use crate::tenancy::{BucketFacts, GrantFacts, Lookup, LookupError, Version};

/// The COSI API group.
pub const GROUP: &str = "objectstorage.k8s.io";

/// Reads Buckets and BucketAccesses with a Kubernetes client.
#[derive(Clone)]
pub struct KubeLookup {
    client: Client,
}

impl KubeLookup {
    /// A lookup through `client`, which needs the RBAC of the [module documentation](self).
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn api(&self, version: Version, kind: &str, plural: &str) -> Api<DynamicObject> {
        let version = match version {
            Version::V1alpha1 => "v1alpha1",
            Version::V1alpha2 => "v1alpha2",
        };
        let gvk = GroupVersionKind::gvk(GROUP, version, kind);
        Api::all_with(self.client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural))
    }

    async fn lookup(
        &self,
        version: Version,
        account_name: &str,
        buckets: &[String],
    ) -> Result<GrantFacts, LookupError> {
        let api_error = |e: kube::Error| LookupError::Api(e.to_string());
        let uid = account_name.strip_prefix("ba-").unwrap_or(account_name);
        let accesses = self.api(version, "BucketAccess", "bucketaccesses");
        let listed = accesses.list(&ListParams::default()).await.map_err(api_error)?;
        let access_namespace = listed
            .items
            .iter()
            .find(|a| a.metadata.uid.as_deref() == Some(uid))
            .and_then(|a| a.metadata.namespace.clone())
            .ok_or_else(|| LookupError::Missing(format!("no BucketAccess has UID {uid:?}")))?;
        let objects = self.api(version, "Bucket", "buckets");
        let mut facts = Vec::with_capacity(buckets.len());
        for name in buckets {
            let bucket = objects
                .get_opt(name)
                .await
                .map_err(api_error)?
                .ok_or_else(|| LookupError::Missing(format!("no Bucket named {name:?}")))?;
            facts.push(BucketFacts {
                bucket: name.clone(),
                claim_namespace: claim_namespace(version, &bucket),
            });
        }
        Ok(GrantFacts { access_namespace, buckets: facts })
    }
}

/// The namespace of the claim a Bucket object was made for.
fn claim_namespace(version: Version, bucket: &DynamicObject) -> Option<String> {
    let field = match version {
        Version::V1alpha1 => "bucketClaim",
        Version::V1alpha2 => "bucketClaimRef",
    };
    bucket
        .data
        .get("spec")?
        .get(field)?
        .get("namespace")?
        .as_str()
        .filter(|ns| !ns.is_empty())
        .map(str::to_owned)
}

impl Lookup for KubeLookup {
    fn facts<'a>(
        &'a self,
        version: Version,
        account_name: &'a str,
        buckets: &'a [String],
    ) -> Pin<Box<dyn Future<Output = Result<GrantFacts, LookupError>> + Send + 'a>> {
        Box::pin(self.lookup(version, account_name, buckets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_namespace_is_read_where_each_version_keeps_it() {
        let object = |spec: serde_json::Value| DynamicObject {
            types: None,
            metadata: Default::default(),
            data: serde_json::json!({ "spec": spec }),
        };
        let v1 = object(serde_json::json!({"bucketClaim": {"namespace": "a", "name": "c"}}));
        assert_eq!(claim_namespace(Version::V1alpha1, &v1).as_deref(), Some("a"));
        assert_eq!(claim_namespace(Version::V1alpha2, &v1), None);
        let v2 = object(serde_json::json!({"bucketClaimRef": {"namespace": "b"}}));
        assert_eq!(claim_namespace(Version::V1alpha2, &v2).as_deref(), Some("b"));
        let empty = object(serde_json::json!({"bucketClaim": {"namespace": ""}}));
        assert_eq!(claim_namespace(Version::V1alpha1, &empty), None);
    }
}
