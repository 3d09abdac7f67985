//! The building blocks of every cache: our own writes, kept until the watch delivers them, and
//! the newest known state of one kind (cache or write, whichever is newer).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::api::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

/// How long a write is remembered at most: far longer than any watch lags.
const REMEMBER: Duration = Duration::from_secs(600);

/// `namespace/name` (namespace empty for cluster-scoped kinds).
pub type Key = (String, String);

/// Our own writes of one kind that the cache may not hold yet, with when they were made.
pub struct Writes<K> {
    written: Mutex<HashMap<Key, (Instant, Written<K>)>>,
    /// When old writes were last dropped.
    purged: Mutex<Option<Instant>>,
}

enum Written<K> {
    Object(Arc<K>),
    /// Deleted by us; the cache may still show the object with this UID.
    Deleted(Option<String>),
}

impl<K> Default for Writes<K> {
    fn default() -> Self {
        Self { written: Mutex::default(), purged: Mutex::default() }
    }
}

/// What the caches compare of a cached copy and our own write of one object.
pub trait Versioned {
    /// The resourceVersion, as the etcd revision it is; `None` if it does not parse.
    fn version(&self) -> Option<u64>;
    /// The UID.
    fn object_uid(&self) -> Option<&str>;
}

/// Whether `cached` is at least as new as `ours`. resourceVersions are etcd revisions, so they
/// compare as numbers; should one not parse, the cache is taken as newer.
fn caught_up(cached: &impl Versioned, ours: &impl Versioned) -> bool {
    match (cached.version(), ours.version()) {
        (Some(cached), Some(ours)) => cached >= ours,
        _ => true,
    }
}

/// The (namespace, name) an object is kept under.
pub fn key_of(meta: &ObjectMeta) -> Key {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

impl<V: Versioned> Writes<V> {
    /// The newer of `cached` (what the cache holds of `namespace/name`) and our last write of it.
    pub fn newest(&self, namespace: &str, name: &str, cached: Option<Arc<V>>) -> Option<Arc<V>> {
        let key = (namespace.to_owned(), name.to_owned());
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, ours)) = written.get(&key) else { return cached };
        let (pick, forget) = match (ours, cached) {
            (Written::Object(ours), Some(cached)) if caught_up(&*cached, &**ours) => {
                (Some(cached), true)
            }
            (Written::Object(ours), _) => (Some(ours.clone()), false),
            (Written::Deleted(uid), Some(cached)) if cached.object_uid() == uid.as_deref() => {
                (None, false)
            }
            (Written::Deleted(_), cached) => (cached, true),
        };
        if forget {
            written.remove(&key);
        }
        pick
    }

    /// Remembers `value` as just written under `key`.
    pub fn wrote_as(&self, key: Key, value: V) -> Arc<V> {
        let value = Arc::new(value);
        self.remember(key, Written::Object(value.clone()));
        value
    }

    /// Remembers that the object under `key` was just deleted, for kinds whose cached copies
    /// keep no UID: until the watch drops it, any copy under `key` is the deleted one.
    pub fn deleted_as(&self, key: Key) {
        self.remember(key, Written::Deleted(None));
    }

    fn remember(&self, key: Key, what: Written<V>) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // Writes of objects nobody reads again (a claim that went) are dropped once old, in a
        // sweep at most once a minute so that a burst of writes does not scan them all each time.
        let mut purged = self.purged.lock().unwrap_or_else(|e| e.into_inner());
        if purged.is_none_or(|at| now.duration_since(at) > Duration::from_secs(60)) {
            written.retain(|_, (at, _)| now.duration_since(*at) < REMEMBER);
            *purged = Some(now);
        }
        written.insert(key, (now, what));
    }
}

impl<K: Resource> Writes<K> {
    /// Remembers `object` as just written.
    pub fn wrote(&self, object: K) -> Arc<K> {
        self.wrote_as(key_of(object.meta()), object)
    }

    /// Remembers that `object` was just deleted.
    pub fn deleted(&self, object: &K) {
        self.remember(key_of(object.meta()), Written::Deleted(object.meta().uid.clone()));
    }
}

/// `namespace/name` of an object (`name` when cluster-scoped), for logs and per-object backoff.
pub fn key(object: &impl Resource) -> String {
    match object.meta().namespace.as_deref() {
        Some(namespace) => format!("{namespace}/{}", object.meta().name.as_deref().unwrap_or("")),
        None => object.meta().name.clone().unwrap_or_default(),
    }
}

/// [`key`] of the object `reference` names.
pub fn reference_key(reference: &ObjectReference) -> String {
    match reference.namespace.as_deref() {
        Some(namespace) => format!("{namespace}/{}", reference.name.as_deref().unwrap_or("")),
        None => reference.name.clone().unwrap_or_default(),
    }
}

/// The newest known state of one kind: the cache, unless our own write is newer.
pub struct Recent<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    writes: Writes<K>,
}

impl<K: Resource> Versioned for K {
    fn version(&self) -> Option<u64> {
        self.meta().resource_version.as_deref()?.parse().ok()
    }

    fn object_uid(&self) -> Option<&str> {
        self.meta().uid.as_deref()
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Recent<K> {
    /// The watch's `store`, with no writes of our own yet.
    pub fn new(store: Store<K>) -> Self {
        Self { store, writes: Writes::default() }
    }

    /// The newest known `namespace/name` (`namespace` empty for cluster-scoped kinds).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let mut reference = ObjectRef::new(name);
        if !namespace.is_empty() {
            reference = reference.within(namespace);
        }
        self.writes.newest(namespace, name, self.store.get(&reference))
    }

    /// Remembers `object` as just written.
    pub fn wrote(&self, object: K) -> Arc<K> {
        self.writes.wrote(object)
    }

    /// Remembers that `object` was just deleted.
    pub fn deleted(&self, object: &K) {
        self.writes.deleted(object)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::ResourceExt;
    use kube::runtime::reflector::store;
    use kube::runtime::watcher;

    use super::*;

    fn config_map(version: &str, uid: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                resource_version: Some(version.into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn version(object: Option<Arc<ConfigMap>>) -> Option<String> {
        object.and_then(|o| o.resource_version())
    }

    #[test]
    fn our_writes_win_until_the_cache_catches_up() {
        let (reader, mut writer) = store::<ConfigMap>();
        let recent = Recent::new(reader);
        writer.apply_watcher_event(&watcher::Event::Apply(config_map("5", "u1")));
        assert_eq!(version(recent.get("ns", "c")), Some("5".into()));

        recent.wrote(config_map("7", "u1"));
        assert_eq!(version(recent.get("ns", "c")), Some("7".into()), "ours is newer");
        writer.apply_watcher_event(&watcher::Event::Apply(config_map("9", "u1")));
        assert_eq!(version(recent.get("ns", "c")), Some("9".into()), "someone wrote after us");
        assert!(recent.writes.written.lock().unwrap().is_empty(), "caught up: forgotten");

        recent.deleted(&config_map("9", "u1"));
        assert_eq!(recent.get("ns", "c"), None, "deleted, though the cache still shows it");
        writer.apply_watcher_event(&watcher::Event::Apply(config_map("12", "u2")));
        assert_eq!(version(recent.get("ns", "c")), Some("12".into()), "a new object of that name");
    }
}
