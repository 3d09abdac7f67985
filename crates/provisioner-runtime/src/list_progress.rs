//! What the (re)lists of a controller's watches tell it: when every cache holds its first list,
//! and when to look at every object again.
//!
//! A watch that lists (at start, after a refusal or a stale resourceVersion) delivers its objects
//! one by one, but its cache takes them in only at the list's end, whole. An object of the list
//! that woke its reconcile at once would be read from the cache as it was before the list (a
//! claim deleted while the watch was away would look alive), and nothing would wake it again.
//! So a list's objects wake nothing on their own: once every cache holds its list, and at the
//! end of every list after that, every object of the controller is looked at again. That also
//! catches what a list cannot tell: an object deleted while its watch was away.

use std::sync::{Arc, Mutex};

use futures::{Stream, TryStreamExt};
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

/// Which caches hold their first list, told by the events themselves (a store's own readiness
/// wakes only one of several waiters and the controller waits on the claims'), and how many
/// lists ended since all did.
pub struct ListProgress {
    done: Mutex<Vec<bool>>,
    listed: watch::Sender<bool>,
    lists_ended: watch::Sender<u64>,
}

impl ListProgress {
    /// Progress of `caches` caches, none listed yet, and whether all are.
    pub fn new(caches: usize) -> (Arc<Self>, watch::Receiver<bool>) {
        let (listed, receiver) = watch::channel(false);
        let (lists_ended, _) = watch::channel(0);
        (Arc::new(Self { done: Mutex::new(vec![false; caches]), listed, lists_ended }), receiver)
    }

    /// Marks cache `kind` listed when its watch says a list is complete; placed after the
    /// cache took the event in.
    pub fn marker<K>(
        self: &Arc<Self>,
        kind: usize,
    ) -> impl Fn(&watcher::Result<Event<K>>) + Send + Sync + 'static {
        let progress = self.clone();
        move |event| {
            if matches!(event, Ok(Event::InitDone)) {
                let mut done = progress.done.lock().unwrap_or_else(|e| e.into_inner());
                done[kind] = true;
                let all = done.iter().all(|d| *d);
                progress.listed.send_replace(all);
                if all {
                    progress.lists_ended.send_modify(|ended| *ended += 1);
                }
            }
        }
    }

    /// Yields once every cache holds its first list, then after each list that ends later;
    /// lists that end while a yield waits to be taken count once.
    pub fn look_again(&self) -> impl Stream<Item = ()> + Send + 'static {
        futures::stream::unfold(self.lists_ended.subscribe(), |mut ended| async move {
            ended.changed().await.ok()?;
            Some(((), ended))
        })
    }
}

/// The objects of `events` applied after a list; a list's own wait for
/// [`ListProgress::look_again`].
pub fn applied_since_list<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>>,
) -> impl Stream<Item = watcher::Result<K>> {
    events.try_filter_map(|event| async move {
        Ok(match event {
            Event::Apply(object) => Some(object),
            _ => None,
        })
    })
}

/// The objects of `events` applied or deleted after a list; a list's own wait for
/// [`ListProgress::look_again`].
pub fn touched_since_list<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>>,
) -> impl Stream<Item = watcher::Result<K>> {
    events.try_filter_map(|event| async move {
        Ok(match event {
            Event::Apply(object) | Event::Delete(object) => Some(object),
            _ => None,
        })
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::{FutureExt, StreamExt};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        }
    }

    async fn names(events: Vec<Event<ConfigMap>>, touched: bool) -> Vec<String> {
        let events = futures::stream::iter(events.into_iter().map(Ok));
        let objects = if touched {
            touched_since_list(events).boxed()
        } else {
            applied_since_list(events).boxed()
        };
        objects.map(|o| o.unwrap().metadata.name.unwrap()).collect().await
    }

    #[tokio::test]
    async fn a_lists_objects_wake_nothing_on_their_own() {
        let events = || {
            vec![
                Event::Init,
                Event::InitApply(config_map("listed")),
                Event::InitDone,
                Event::Apply(config_map("changed")),
                Event::Delete(config_map("deleted")),
            ]
        };
        assert_eq!(names(events(), false).await, ["changed"]);
        assert_eq!(names(events(), true).await, ["changed", "deleted"]);
    }

    /// Whether `stream` has an item ready.
    fn yields_now(stream: &mut (impl Stream<Item = ()> + Unpin)) -> bool {
        stream.next().now_or_never().flatten().is_some()
    }

    #[tokio::test]
    async fn every_object_is_looked_at_again_once_all_caches_listed_and_after_each_list() {
        let (progress, listed) = ListProgress::new(2);
        let mut look_again = std::pin::pin!(progress.look_again());
        let (first, second) = (progress.marker::<ConfigMap>(0), progress.marker::<ConfigMap>(1));

        first(&Ok(Event::Init));
        first(&Ok(Event::InitDone));
        assert!(!*listed.borrow(), "one cache of two");
        assert!(!yields_now(&mut look_again), "nothing is looked at before every cache listed");
        second(&Ok(Event::InitDone));
        assert!(*listed.borrow());
        assert!(yields_now(&mut look_again), "all caches listed");
        assert!(!yields_now(&mut look_again), "once");

        // A later list of either cache, however often, while the last yield was not taken.
        first(&Ok(Event::InitDone));
        second(&Ok(Event::InitDone));
        assert!(yields_now(&mut look_again));
        assert!(!yields_now(&mut look_again), "lists ended while waiting count once");
        first(&Ok(Event::Apply(config_map("changed"))));
        let later = tokio::time::timeout(Duration::from_millis(50), look_again.next()).await;
        assert!(later.is_err(), "a change is not a list");
    }
}
