//! Putting our finalizer on and removing it from an object, the same way for every kind this library puts one on
//! (claims, ObjectBuckets, PersistentVolumes).

use std::fmt::Debug;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// How soon an object whose write answered 404 is looked at again. A 404 is not trusted: a
/// restarting apiserver answers 404 for custom resources until it serves their kind again, and
/// an object really gone leaves the watch cache, so looking again costs nothing then.
pub const LOOK_AGAIN: Duration = Duration::from_secs(2);

/// Removes `finalizer` from `object`, guarded by its resourceVersion so that a concurrent change
/// of the list fails the write (and is retried) rather than being undone. Answers the object as
/// written (when it was the last finalizer of a deleted object, as it was just before it went).
pub async fn remove<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let remaining = object.finalizers().iter().filter(|f| *f != finalizer).cloned().collect();
    write(api, object, remaining).await
}

/// Puts `finalizer` back on `object`, guarded by its resourceVersion like [`remove`].
pub async fn add<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut finalizers = object.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    write(api, object, finalizers).await
}

/// Writes `finalizers` as the object's whole list, if its resourceVersion is still the one read.
async fn write<K>(api: &Api<K>, object: &K, finalizers: Vec<String>) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": object.resource_version(), "finalizers": finalizers }
    });
    api.patch(&object.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await
}

/// Whether the apiserver answered 404 (see [`LOOK_AGAIN`] for what that proves).
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}
