//! Claims as the bucket controller's cache keeps them: identity in the clear, the rest packed.

use std::borrow::Cow;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, LazyLock};

use bucket_api::contract::annotations;
use bucket_api::{ClaimPhase, ObjectBucketClaim};
use kube::api::ObjectMeta;
use kube::core::{DeserializeGuard, NamespaceResourceScope};
use kube::{Resource, ResourceExt};
use serde::{Deserialize, Deserializer};

use crate::cache::compact::Dictionary;

/// The dictionary of claims: they are packed as they are decoded, before any cache sees them.
static CLAIMS: Dictionary = Dictionary::new();

/// A claim as the controller's cache keeps it: what queueing, the sweep and the watch need (name,
/// namespace, UID and resourceVersion), what the phase gauge counts, and the rest packed, decoded
/// when its reconcile runs. A claim that does not match the schema is kept with why, so that one bad
/// object cannot stall the watch.
#[derive(Clone, Debug)]
pub struct CachedClaim {
    metadata: ObjectMeta,
    body: Result<Arc<[u8]>, Arc<str>>,
    phase: Option<ClaimPhase>,
    /// A hash of the provisioner it records (see [`CachedClaim::recorded_by`]).
    provisioner: Option<u64>,
}

/// Hashes recorded provisioners under a key of this process, so that no claim can be made to
/// hash like another provisioner's name. Only the phase gauge counts by it.
static PROVISIONER_HASH: LazyLock<RandomState> = LazyLock::new(RandomState::new);

impl CachedClaim {
    /// Keeps what the controller reads of `claim` (see [`slim_meta`]).
    pub fn pack(mut claim: ObjectBucketClaim) -> Self {
        slim_meta(&mut claim.metadata);
        let metadata = take_identity(&mut claim.metadata);
        let phase = claim.status.as_ref().and_then(|s| s.phase);
        let provisioner =
            claim.annotations().get(annotations::PROVISIONER).map(|p| PROVISIONER_HASH.hash_one(p));
        let body = CLAIMS.pack(&claim).map_err(|e| Arc::from(e.to_string()));
        Self { metadata, body, phase, provisioner }
    }

    /// The claim, or why it does not match the schema.
    pub fn claim(&self) -> Result<ObjectBucketClaim, String> {
        let body = self.body.as_deref().map_err(|error| error.to_string())?;
        let mut claim: ObjectBucketClaim = CLAIMS.unpack(body)?;
        let meta = &mut claim.metadata;
        meta.name.clone_from(&self.metadata.name);
        meta.namespace.clone_from(&self.metadata.namespace);
        meta.uid.clone_from(&self.metadata.uid);
        meta.resource_version.clone_from(&self.metadata.resource_version);
        Ok(claim)
    }

    /// The phase its status records.
    pub fn phase(&self) -> Option<ClaimPhase> {
        self.phase
    }

    /// Whether it records `provisioner` as having taken it on.
    pub fn recorded_by(&self, provisioner: &str) -> bool {
        self.provisioner == Some(PROVISIONER_HASH.hash_one(provisioner))
    }
}

impl Resource for CachedClaim {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        ObjectBucketClaim::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        ObjectBucketClaim::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        ObjectBucketClaim::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        ObjectBucketClaim::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What a cached claim keeps outside its packed body, taken from `meta`: what the store and the
/// sweep look claims up by, and the version the watch resumes from.
fn take_identity(meta: &mut ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        ..Default::default()
    }
}

/// What of an object's metadata the controller never reads: the server's field bookkeeping,
/// labels (the watches filter by them already) and annotations but its own (a tenant's can be
/// kilobytes, such as a last-applied configuration).
pub fn slim_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    meta.labels = None;
    if let Some(annotations) = &mut meta.annotations {
        annotations.retain(|key, _| key.starts_with(OUR_ANNOTATIONS));
    }
}

/// The prefix of every annotation the library reads.
const OUR_ANNOTATIONS: &str = "objectbucket.io/";

impl<'de> Deserialize<'de> for CachedClaim {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let DeserializeGuard(guarded) = DeserializeGuard::deserialize(deserializer)?;
        Ok(match guarded {
            Ok(claim) => Self::pack(claim),
            Err(mut invalid) => Self {
                metadata: take_identity(&mut invalid.metadata),
                body: Err(invalid.error.into()),
                phase: None,
                provisioner: None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_kept_slim_and_decode_whole_and_bad_ones_keep_their_error() {
        let json = serde_json::json!({
            "apiVersion": "objectbucket.io/v1alpha1",
            "kind": "ObjectBucketClaim",
            "metadata": {
                "name": "photos", "namespace": "team", "uid": "u-1", "resourceVersion": "42",
                "labels": { "app": "x" },
                "annotations": {
                    "objectbucket.io/provisioner": "p",
                    "kubectl.kubernetes.io/last-applied-configuration": "{...}"
                },
                "finalizers": ["objectbucket.io/finalizer"],
                "managedFields": [{ "manager": "kubectl", "operation": "Update" }]
            },
            "spec": { "storageClassName": "class", "generateBucketName": "photos" },
            "status": { "phase": "Bound" }
        });
        let cached: CachedClaim = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(cached.name_any(), "photos");
        // The watch fails and lists everything again after every event it cannot resume from.
        assert_eq!(cached.resource_version().as_deref(), Some("42"));
        assert_eq!(cached.phase(), Some(ClaimPhase::Bound));
        assert!(cached.recorded_by("p") && !cached.recorded_by("q"));
        let claim = cached.claim().unwrap();
        assert_eq!(claim.namespace().as_deref(), Some("team"));
        assert_eq!(claim.uid().as_deref(), Some("u-1"));
        assert_eq!(claim.resource_version().as_deref(), Some("42"));
        assert_eq!(claim.finalizers(), ["objectbucket.io/finalizer"]);
        assert_eq!(claim.annotations().keys().collect::<Vec<_>>(), ["objectbucket.io/provisioner"]);
        assert!(claim.metadata.managed_fields.is_none() && claim.metadata.labels.is_none());
        assert_eq!(claim.spec.generate_bucket_name.as_deref(), Some("photos"));

        let mut bad = json;
        bad["spec"]["storageClassName"] = serde_json::json!(7);
        let cached: CachedClaim = serde_json::from_value(bad).unwrap();
        assert_eq!((cached.name_any().as_str(), cached.phase()), ("photos", None));
        let error = cached.claim().unwrap_err();
        assert!(error.contains("Expected a string"), "{error}");
    }
}
