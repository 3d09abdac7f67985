//! Watches that come back promptly after an apiserver outage and report how they are doing.
//!
//! Two things keep a plain watcher away for minutes after an outage: its backoff grows towards
//! half a minute (with jitter, more) while the apiserver is down, and a watch that fails to
//! *start* with 410 Gone (its resourceVersion is older than a freshly started apiserver's cache)
//! is retried with the same stale version for ever. Here the backoff stays short and a stale
//! version starts the watch over with a fresh list.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt, stream};
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event, watcher};
use kube::runtime::{WatchStreamExt, reflector};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::cache::summary::{Summaries, Summarized};
use crate::health::{Health, refusal};
use crate::list_progress::ListProgress;
use crate::log_limit::SharedThrottle;

/// Doubling from half a second to two: one client watching a handful of kinds can afford to
/// come back quickly, and claims created right after an outage should not wait.
#[derive(Clone, Debug)]
pub struct ShortBackoff {
    next: Duration,
}

impl ShortBackoff {
    const FIRST: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(2);
}

impl Default for ShortBackoff {
    fn default() -> Self {
        Self { next: Self::FIRST }
    }
}

impl Iterator for ShortBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        Some(delay)
    }
}

impl Backoff for ShortBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

/// Whether the error means the watcher's resourceVersion is gone and only a new list helps.
fn is_stale(error: &watcher::Error) -> bool {
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(status) if status.code == 410);
    match error {
        watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => gone(e),
        _ => false,
    }
}

/// What a watch error says is refused (401/403), if that is what it is.
fn refused(error: &watcher::Error) -> Option<String> {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => refusal(e),
        watcher::Error::WatchError(status) => refusal(&kube::Error::Api(status.clone())),
        watcher::Error::NoResourceVersion => None,
    }
}

/// Watches `api` with `config`, restarting from a fresh list when the resourceVersion went stale
/// or the apiserver refused the watch, backing off briefly after errors, and reporting each
/// outcome to `health` under `name`. Errors are reported (a refusal that lasts fails `/healthz`)
/// and logged once a minute while they repeat, then dropped: the stream never ends and only
/// ever yields events.
pub fn resilient_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    name: &'static str,
    health: Health,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let start = move || watcher(api.clone(), config.clone()).boxed();
    let restarting = stream::unfold(start(), move |mut inner| {
        let start = start.clone();
        async move {
            let item = inner.next().await?;
            if let Err(error) = &item {
                if is_stale(error) {
                    tracing::info!(watch = name, "resourceVersion is gone; listing again");
                    inner = start();
                } else if refused(error).is_some() {
                    // Listed again rather than resumed: a resumed watch says nothing until an
                    // object changes, so the end of the refusal would not be seen (a restarted
                    // apiserver refuses for a moment, until its authorizer has loaded the
                    // bindings).
                    inner = start();
                }
            }
            Some((item, inner))
        }
    });
    let failures = Arc::new(SharedThrottle::default());
    restarting.backoff(ShortBackoff::default()).filter_map(move |item| {
        let (health, failures) = (health.clone(), failures.clone());
        async move {
            match item {
                Ok(event) => {
                    if failures.reset() {
                        tracing::info!(watch = name, "watch works again");
                    }
                    health.watch_succeeded(name);
                    Some(Ok(event))
                }
                Err(error) => {
                    health.watch_failed(name, refused(&error).as_deref());
                    if let Some(held_back) = failures.allow() {
                        tracing::warn!(watch = name, %error, repeats_since_last_report = held_back,
                            "watch failed; retrying");
                    }
                    None
                }
            }
        }
    })
}

/// What every cache may drop: the server's field bookkeeping, the bulk of most objects. Caches
/// whose readers need labels or other programs' annotations (the volume side's) drop only this.
pub fn drop_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Watches of every object of a kind, and of only the objects that carry `label` naming
/// `provisioner`. Initial lists arrive as a stream of watch events rather than pages of hundreds
/// of objects at once, which would set the process's peak memory at every (re)list.
pub fn watch_configs(label: &str, provisioner: &str) -> (watcher::Config, watcher::Config) {
    let all = watcher::Config::default().streaming_lists();
    let ours = all.clone().labels(&format!("{label}={}", label_value(provisioner)));
    (all, ours)
}

/// A watch (of what `config` selects, as `name` on `health`) kept in a cache after `trim`: the
/// cache, and the watch's events, which pass through the cache first and mark cache `kind` of
/// `progress` listed once the first list is in.
pub fn cached_watch<K>(
    client: &Client,
    config: &watcher::Config,
    name: &'static str,
    health: &Health,
    trim: fn(&mut K),
    progress: &Arc<ListProgress>,
    kind: usize,
) -> (Store<K>, impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let watch = resilient_watch(Api::all(client.clone()), config.clone(), name, health.clone());
    let events = reflector::reflector(writer, watch.modify(trim)).inspect(progress.marker(kind));
    (store, events)
}

/// A watch of what `config` selects (as `name` on `health`), each event after `trim` handed to
/// `cache` first, then marking cache `kind` of `progress` listed once the first list is in.
pub fn compact_watch<K>(
    client: &Client,
    config: &watcher::Config,
    (name, health): (&'static str, &Health),
    trim: fn(&mut K),
    (progress, kind): (&Arc<ListProgress>, usize),
    cache: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let watch = resilient_watch(Api::all(client.clone()), config.clone(), name, health.clone());
    watch.modify(trim).inspect_ok(move |event| cache(event)).inspect(progress.marker(kind))
}

/// A [`compact_watch`] kept as [`Summaries`].
pub fn summarized_watch<K: Summarized>(
    client: &Client,
    config: &watcher::Config,
    name: (&'static str, &Health),
    progress: (&Arc<ListProgress>, usize),
) -> (Arc<Summaries<K>>, impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static) {
    let summaries = Arc::new(Summaries::default());
    let cache = summaries.clone();
    let events = compact_watch(client, config, name, |_| {}, progress, move |e| cache.apply(e));
    (summaries, events)
}

/// A provisioner name made fit for a label value (63 characters of `[A-Za-z0-9._-]`).
pub fn label_value(provisioner: &str) -> String {
    let cleaned: String = provisioner
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .take(63)
        .collect();
    cleaned.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::health::ACCESS_GRACE;

    /// A resilient watch of every ConfigMap through `client`, and the health it reports to.
    fn watch_configmaps(
        client: Client,
    ) -> (Health, impl Stream<Item = watcher::Result<Event<ConfigMap>>>) {
        let health = Health::default();
        let config = watcher::Config::default().streaming_lists();
        let watch = resilient_watch(Api::all(client), config, "configmaps", health.clone());
        (health, watch)
    }

    /// A streaming list's answer: one ConfigMap, then the bookmark that ends the initial events.
    fn initial_events() -> String {
        let events = [
            serde_json::json!({"type": "ADDED", "object": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "ns", "resourceVersion": "5"}}}),
            serde_json::json!({"type": "BOOKMARK", "object": {"apiVersion": "v1",
                "kind": "ConfigMap", "metadata": {"resourceVersion": "6",
                "annotations": {"k8s.io/initial-events-end": "true"}}}}),
        ];
        events.iter().map(|e| format!("{e}\n")).collect()
    }

    #[test]
    fn backoff_doubles_to_two_seconds_and_resets() {
        let mut backoff = ShortBackoff::default();
        let delays: Vec<u64> = backoff.by_ref().take(4).map(|d| d.as_millis() as u64).collect();
        assert_eq!(delays, [500, 1000, 2000, 2000]);
        backoff.reset();
        assert_eq!(backoff.next(), Some(Duration::from_millis(500)));
    }

    #[tokio::test]
    async fn a_watch_outlives_refusals_errors_and_ends_and_reports_them() {
        // 403 and 500 to the first two starts, then the initial events, then a stream that ends
        // at once, again and again.
        let lines = initial_events();
        let (client, seen) = crate::mock_api::client(move |n, _, _| match n {
            0 => crate::mock_api::status(403, "User \"me\" cannot watch resource \"configmaps\""),
            1 => crate::mock_api::status(500, "etcd is away"),
            2 => (200, lines.clone()),
            _ => (200, String::new()),
        });
        let (health, watch) = watch_configmaps(client);
        let mut watch = std::pin::pin!(watch);
        let mut received = Vec::new();
        while received.len() < 3 {
            let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
                .await
                .expect("events after the errors")
                .expect("the stream never ends");
            received.push(event.expect("errors are not passed on"));
        }
        assert!(matches!(received[0], Event::Init));
        assert!(
            matches!(&received[1], Event::InitApply(c) if c.metadata.name.as_deref() == Some("c"))
        );
        assert!(matches!(received[2], Event::InitDone));
        assert_eq!(health.check(), Ok(()), "the refusal ended with the first event");
        // The stream that ends at once is watched again, without end.
        let before = crate::mock_api::seen(&seen);
        let _ = tokio::time::timeout(Duration::from_secs(3), watch.next()).await;
        assert!(crate::mock_api::seen(&seen) > before, "an ended stream is watched again");
    }

    /// An apiserver just restarted refuses for a moment (its authorizer has not loaded the
    /// bindings yet). A watch that then resumes quietly delivers nothing until an object
    /// changes, so the refusal must not stay on `/healthz` until one does.
    #[tokio::test]
    async fn a_refusal_is_forgotten_once_the_watch_runs_again_even_with_nothing_new() {
        let lines = initial_events();
        // The first list, then a refused resumption, then: a list when one is asked for, and
        // a resumed watch that has nothing to say and ends.
        let (client, seen) = crate::mock_api::client(move |n, _, uri| match n {
            0 => (200, lines.clone()),
            1 => crate::mock_api::status(403, "RBAC: not yet loaded"),
            _ if uri.contains("sendInitialEvents=true") => (200, lines.clone()),
            _ => (200, String::new()),
        });
        let (health, watch) = watch_configmaps(client);
        let mut watch = std::pin::pin!(watch);
        // Until the watch has run well past the refusal: nothing new may come at all.
        while crate::mock_api::seen(&seen) < 4 {
            let _ = tokio::time::timeout(Duration::from_millis(200), watch.next()).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), watch.next()).await;
        let later = Instant::now() + ACCESS_GRACE + Duration::from_secs(1);
        assert_eq!(health.check_at(later), Ok(()), "the refusal is over");
    }

    #[test]
    fn refusals_are_told_from_other_watch_errors() {
        let status =
            |code| kube::Error::Api(kube::core::Status::failure("x", "y").with_code(code).boxed());
        assert!(refused(&watcher::Error::WatchStartFailed(status(403))).is_some());
        assert!(refused(&watcher::Error::InitialListFailed(status(401))).is_some());
        let in_stream = kube::core::Status::failure("x", "y").with_code(403).boxed();
        assert!(refused(&watcher::Error::WatchError(in_stream)).is_some());
        assert!(refused(&watcher::Error::WatchFailed(status(500))).is_none());
        assert!(refused(&watcher::Error::NoResourceVersion).is_none());
    }

    #[test]
    fn a_gone_resource_version_is_told_from_other_errors() {
        let status =
            |code| kube::Error::Api(kube::core::Status::failure("x", "y").with_code(code).boxed());
        assert!(is_stale(&watcher::Error::WatchStartFailed(status(410))));
        assert!(is_stale(&watcher::Error::WatchFailed(status(410))));
        assert!(!is_stale(&watcher::Error::WatchStartFailed(status(500))));
        assert!(!is_stale(&watcher::Error::NoResourceVersion));
    }
}
