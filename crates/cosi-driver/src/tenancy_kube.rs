//! The [`Lookup`] of a grant's facts from the cluster's COSI objects, read as dynamic objects of
//! the request's version.
//!
//! The sidecar names an access only by its UID (`ba-<uid>`), and a v1alpha1 Bucket only by its
//! claim's UID, so the namespaces of BucketAccesses and BucketClaims are kept in watched
//! metadata caches, started on the first grant of each version: a grant costs one `get` of each
//! Bucket, not a list of every access in the cluster. A UID the cache has not seen yet (an
//! access made a moment ago) is looked up with one list of names, as a cache cannot say that
//! something does not exist. A UID's namespace never changes, so a cache is never wrong, only
//! late.
//!
//! Static v1alpha1 buckets are checked against the operator's annotation on the Buckets naming
//! them, found with one list of Buckets per grant (grants are rare; the list is not cached, so
//! an annotation removed takes effect at the next grant).
//!
//! RBAC it needs (cluster-wide, group `objectstorage.k8s.io`): `get` and `list` on `buckets`,
//! `list` and `watch` on `bucketaccesses` and `bucketclaims` (v1alpha1, see
//! [`made_for_claim_uid`]), `get` on `bucketaccesses` (the ServiceAccount of a v1alpha1
//! access of `authenticationType: IAM`) and on `bucketclaims` (whether the claim a bucket being
//! deleted was made for still lives).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::tenancy::{
    ALLOWED_NAMESPACES, AccessServiceAccount, BucketFacts, GrantFacts, Lookup, LookupError,
    SharedWith, StillClaimed, Version, allowed_namespaces,
};

/// The COSI API group.
pub const GROUP: &str = "objectstorage.k8s.io";

/// The kinds whose namespaces are found by UID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Indexed {
    Access,
    Claim,
}

impl Indexed {
    fn kind_and_plural(self) -> (&'static str, &'static str) {
        match self {
            Indexed::Access => ("BucketAccess", "bucketaccesses"),
            Indexed::Claim => ("BucketClaim", "bucketclaims"),
        }
    }
}

type MetaStore = Store<PartialObjectMeta<DynamicObject>>;

/// The watched caches, and the tasks that keep them, stopped with the last clone of the lookup.
#[derive(Default)]
struct Caches {
    stores: Mutex<HashMap<(Version, Indexed), MetaStore>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Drop for Caches {
    fn drop(&mut self) {
        let tasks = self.tasks.get_mut().map(std::mem::take).unwrap_or_default();
        for task in tasks {
            task.abort();
        }
    }
}

/// Reads Buckets and BucketAccesses with a Kubernetes client.
#[derive(Clone)]
pub struct KubeLookup {
    client: Client,
    caches: Arc<Caches>,
}

impl KubeLookup {
    /// A lookup through `client`, which needs the RBAC of the [module documentation](self).
    pub fn new(client: Client) -> Self {
        Self { client, caches: Arc::default() }
    }

    fn resource(version: Version, kind: &str, plural: &str) -> ApiResource {
        let version = match version {
            Version::V1alpha1 => "v1alpha1",
            Version::V1alpha2 => "v1alpha2",
        };
        let gvk = GroupVersionKind::gvk(GROUP, version, kind);
        ApiResource::from_gvk_with_plural(&gvk, plural)
    }

    fn api(&self, version: Version, kind: &str, plural: &str) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &Self::resource(version, kind, plural))
    }

    /// The cache of `indexed` objects of `version`, started on first use. Must be called
    /// inside a Tokio runtime.
    fn store(&self, version: Version, indexed: Indexed) -> MetaStore {
        let mut stores = self.caches.stores.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = stores.get(&(version, indexed)) {
            return store.clone();
        }
        let (kind, plural) = indexed.kind_and_plural();
        let resource = Self::resource(version, kind, plural);
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let api = Api::<PartialObjectMeta<DynamicObject>>::all_with(self.client.clone(), &resource);
        // Errors (a CRD not installed, RBAC missing) are retried with backoff; until the cache
        // holds an object, lookups fall back to a list, which reports the error itself.
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .for_each(move |event| {
                if let Err(error) = event {
                    tracing::debug!(%error, kind, "COSI metadata watch");
                }
                std::future::ready(())
            });
        let task = tokio::spawn(stream);
        self.caches.tasks.lock().unwrap_or_else(|e| e.into_inner()).push(task);
        stores.insert((version, indexed), store.clone());
        store
    }

    /// The namespace of the `indexed` object with UID `uid`: from the cache, else from one list
    /// of names; `None` when no such object exists.
    async fn namespace_of(
        &self,
        version: Version,
        indexed: Indexed,
        uid: &str,
    ) -> Result<Option<String>, LookupError> {
        Ok(self.located(version, indexed, uid).await?.map(|(namespace, _)| namespace))
    }

    /// The namespace and name of the `indexed` object with UID `uid`, found as
    /// [`Self::namespace_of`] finds its namespace.
    async fn located(
        &self,
        version: Version,
        indexed: Indexed,
        uid: &str,
    ) -> Result<Option<(String, String)>, LookupError> {
        let store = self.store(version, indexed);
        let found = store.find(|o| o.metadata.uid.as_deref() == Some(uid));
        if let Some(found) = found {
            return Ok(namespace_and_name(&found.metadata));
        }
        let (kind, plural) = indexed.kind_and_plural();
        let listed = self
            .api(version, kind, plural)
            .list_metadata(&ListParams::default())
            .await
            .map_err(|e| LookupError::Api(e.to_string()))?;
        Ok(located_in(&listed.items, uid))
    }

    /// The v1alpha1 BucketAccess `account_name`'s namespace and `spec.serviceAccountName`,
    /// read from the object itself (the UID found as [`Self::located`] finds it).
    async fn access_service_account(
        &self,
        account_name: &str,
    ) -> Result<(String, String), LookupError> {
        let uid = account_name.strip_prefix("ba-").unwrap_or(account_name);
        let missing = || LookupError::Missing(format!("no BucketAccess has UID {uid:?}"));
        let (namespace, name) =
            self.located(Version::V1alpha1, Indexed::Access, uid).await?.ok_or_else(missing)?;
        let resource = Self::resource(Version::V1alpha1, "BucketAccess", "bucketaccesses");
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &namespace, &resource);
        let access = api
            .get_opt(&name)
            .await
            .map_err(|e| LookupError::Api(e.to_string()))?
            .filter(|a| a.metadata.uid.as_deref() == Some(uid))
            .ok_or_else(missing)?;
        let account = access.data.pointer("/spec/serviceAccountName").and_then(|v| v.as_str());
        match account.filter(|a| !a.is_empty()) {
            Some(account) => Ok((namespace, account.to_owned())),
            None => Err(LookupError::Missing(format!(
                "BucketAccess {namespace}/{name} names no serviceAccountName"
            ))),
        }
    }

    /// The claim `bucket` was made for (v1alpha1), read afresh, while it lives.
    async fn claim_alive(
        &self,
        version: Version,
        bucket: &str,
    ) -> Result<Option<String>, LookupError> {
        let Some(uid) = made_for_claim_uid(version, bucket) else { return Ok(None) };
        let Some((namespace, name)) = self.located(version, Indexed::Claim, uid).await? else {
            return Ok(None);
        };
        let resource = Self::resource(version, "BucketClaim", "bucketclaims");
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &namespace, &resource);
        let claim = api.get_opt(&name).await.map_err(|e| LookupError::Api(e.to_string()))?;
        let alive = claim.is_some_and(|c| {
            c.metadata.uid.as_deref() == Some(uid) && c.metadata.deletion_timestamp.is_none()
        });
        Ok(alive.then(|| format!("{namespace}/{name}")))
    }

    async fn lookup(
        &self,
        version: Version,
        account_name: &str,
        buckets: &[String],
    ) -> Result<GrantFacts, LookupError> {
        let api_error = |e: kube::Error| LookupError::Api(e.to_string());
        let uid = account_name.strip_prefix("ba-").unwrap_or(account_name);
        let access_namespace = self
            .namespace_of(version, Indexed::Access, uid)
            .await?
            .ok_or_else(|| LookupError::Missing(format!("no BucketAccess has UID {uid:?}")))?;
        let objects = self.api(version, "Bucket", "buckets");
        let mut facts = Vec::with_capacity(buckets.len());
        for name in buckets {
            let bucket = objects
                .get_opt(name)
                .await
                .map_err(api_error)?
                .ok_or_else(|| LookupError::Missing(format!("no Bucket named {name:?}")))?;
            let claim_namespace = match made_for_claim_uid(version, name) {
                Some(claim_uid) => self.namespace_of(version, Indexed::Claim, claim_uid).await?,
                None => claim_namespace(version, &bucket),
            };
            facts.push(BucketFacts { bucket: name.clone(), claim_namespace, shared_with: None });
        }
        Ok(GrantFacts { access_namespace, buckets: facts })
    }
}

/// Under v1alpha1, the UID of the claim a Bucket was made for, from its name.
///
/// v0.2.2's controller names the Bucket it makes for a claim `bucket-<claim UID>`, and when a
/// claim of any namespace binds that Bucket through `existingBucketName` it rewrites the Bucket's
/// `spec.bucketClaim` to the binding claim. So the claim reference names whoever bound the Bucket
/// last, and only the name tells whose it is. (v1alpha2's controller refuses such a binding, so
/// its `bucketClaimRef` is kept.)
pub fn made_for_claim_uid(version: Version, bucket_name: &str) -> Option<&str> {
    if version != Version::V1alpha1 {
        return None;
    }
    let uid = bucket_name.strip_prefix("bucket-")?;
    let hex_groups: Vec<&str> = uid.split('-').collect();
    let shape = [8, 4, 4, 4, 12];
    let is_uid = hex_groups.len() == shape.len()
        && hex_groups
            .iter()
            .zip(shape)
            .all(|(group, len)| group.len() == len && group.chars().all(|c| c.is_ascii_hexdigit()));
    is_uid.then_some(uid)
}

/// The namespace and name of the object with UID `uid` among `objects`; `None` when it is gone.
fn located_in(objects: &[PartialObjectMeta<DynamicObject>], uid: &str) -> Option<(String, String)> {
    let found = objects.iter().find(|o| o.metadata.uid.as_deref() == Some(uid))?;
    namespace_and_name(&found.metadata)
}

/// An object's namespace and name, when it has both.
fn namespace_and_name(meta: &kube::api::ObjectMeta) -> Option<(String, String)> {
    Some((meta.namespace.clone()?, meta.name.clone()?))
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

    fn service_account<'a>(&'a self, account_name: &'a str) -> AccessServiceAccount<'a> {
        Box::pin(self.access_service_account(account_name))
    }

    fn still_claimed<'a>(&'a self, version: Version, bucket: &'a str) -> StillClaimed<'a> {
        Box::pin(self.claim_alive(version, bucket))
    }

    fn shared_with<'a>(&'a self, version: Version, ids: &'a [String]) -> SharedWith<'a> {
        Box::pin(async move {
            let objects = self.api(version, "Bucket", "buckets");
            let listed = objects
                .list(&ListParams::default())
                .await
                .map_err(|e| LookupError::Api(e.to_string()))?;
            Ok(ids.iter().map(|id| shared_with(&listed.items, id)).collect())
        })
    }
}

/// The namespaces the Buckets naming static bucket `id` (`spec.existingBucketID`) share it with.
fn shared_with(buckets: &[DynamicObject], id: &str) -> Vec<String> {
    let mut allowed = Vec::new();
    for bucket in buckets {
        let names = bucket.data.get("spec").and_then(|s| s.get("existingBucketID"));
        if names.and_then(|v| v.as_str()) != Some(id) {
            continue;
        }
        if let Some(annotation) =
            bucket.metadata.annotations.as_ref().and_then(|a| a.get(ALLOWED_NAMESPACES))
        {
            allowed.extend(allowed_namespaces(annotation));
        }
    }
    allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1alpha1_bucket_belongs_to_the_claim_its_name_carries() {
        let uid = "a02fe553-39e3-425a-a1d2-1f19825ae356";
        let name = format!("bucket-{uid}");
        assert_eq!(made_for_claim_uid(Version::V1alpha1, &name), Some(uid));
        assert_eq!(made_for_claim_uid(Version::V1alpha2, &name), None);
        for other in ["bucket-x", "photos", "bucket-a02fe553-39e3-425a-a1d2-1f19825ae35g", "bc-1"] {
            assert_eq!(made_for_claim_uid(Version::V1alpha1, other), None, "{other}");
        }
        let claim = |ns: &str, uid: &str| {
            let mut object = PartialObjectMeta::<DynamicObject> {
                types: None,
                metadata: Default::default(),
                _phantom: std::marker::PhantomData,
            };
            object.metadata.namespace = Some(ns.into());
            object.metadata.name = Some("c".into());
            object.metadata.uid = Some(uid.into());
            object
        };
        // The claim that bound the Bucket later is not the one it was made for.
        let claims =
            [claim("attacker", "b0000000-0000-0000-0000-000000000000"), claim("victim", uid)];
        assert_eq!(located_in(&claims, uid), Some(("victim".into(), "c".into())));
        assert_eq!(located_in(&claims[..1], uid), None, "a claim that is gone");
    }

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
