//! The controller: watches claims (and the Secrets, ConfigMaps and StorageClasses they depend on),
//! decides which claims are this provisioner's, and runs one reconcile per claim at a time, with
//! several claims in parallel.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER};
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketPhase};
use std::fmt::Debug;

use futures::{FutureExt, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::Provisioner;
use crate::cache::{Caches, Writes};
use crate::claim::{self, key};
use crate::cleanup;
use crate::compact::{CachedClaim, Packed, slim_meta};
use crate::error::{Error, Operation, Retry};
use crate::finalizer;
use crate::health::{Health, Pulse, Retirement, refusal};
use crate::log_limit::{SharedThrottle, Throttle};
use crate::objects::{annotations, label_value};
use crate::status::{ClaimState, set_claim_status};
use crate::summary::{Summaries, Summarized};
use crate::telemetry::Metrics;
use crate::watch::{ShortBackoff, resilient_watch};

/// How often ObjectBuckets are checked for claims that went without their cleanup.
const SWEEP_INTERVAL: Duration = Duration::from_secs(10);
/// The longest a claim waits to be retried after the Kubernetes API failed it.
const API_RETRY_MAX: Duration = Duration::from_secs(4);
/// How long one step of a background pass (one ObjectBucket swept or reported, a backend call
/// included) may take before the loop counts as stuck.
const STEP_SILENCE: Duration = Duration::from_secs(300);
/// The source reconciles report refusals under on [`Health`].
const RECONCILES: &str = "reconciles";

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// The StorageClass `provisioner` value this controller answers to.
    pub provisioner_name: String,
    /// How many claims are reconciled at once.
    pub workers: u16,
    /// First retry delay after a transient failure; it doubles on each further failure.
    pub backoff_initial: Duration,
    /// Longest retry delay, also used to re-check claims blocked by another object.
    pub backoff_max: Duration,
    /// How often bound buckets' usage is asked of the backend, published as metrics and, when
    /// it changed, recorded on their ObjectBuckets (see [`crate::usage`]).
    pub usage_interval: Duration,
}

impl ControllerConfig {
    /// Defaults for a provisioner name: 4 workers, backoff from 1 s to 5 min, usage every
    /// minute.
    pub fn new(provisioner_name: impl Into<String>) -> Self {
        Self {
            provisioner_name: provisioner_name.into(),
            workers: 4,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            usage_interval: Duration::from_secs(60),
        }
    }
}

/// Shared state of all reconciles.
pub(crate) struct Context<P> {
    pub(crate) client: Client,
    pub(crate) provisioner: P,
    pub(crate) name: String,
    pub(crate) events: Events,
    pub(crate) metrics: Metrics,
    pub(crate) health: Health,
    pub(crate) caches: Caches,
    backoff: Backoff,
    /// Reconciles failing with the Kubernetes API: told once a minute, not once a retry.
    api_failing: SharedThrottle,
    parked: Mutex<HashMap<String, Inputs>>,
    /// Claims whose Secret or ConfigMap name was found taken by an object not theirs.
    blocked: Mutex<std::collections::HashSet<String>>,
}

/// What a permanent failure depended on: the claim's spec and its StorageClass.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Inputs {
    generation: Option<i64>,
    class_version: Option<String>,
}

impl<P> Context<P> {
    fn inputs(&self, claim: &ObjectBucketClaim) -> Inputs {
        let class = self.caches.class(&claim.spec.storage_class_name);
        Inputs {
            generation: claim.metadata.generation,
            class_version: class.and_then(|c| c.resource_version()),
        }
    }

    /// Remembers that the claim failed permanently with these inputs. Our own status writes wake
    /// the claim up again; parking keeps that from calling the backend until something changed.
    /// (After a restart a parked claim is tried once more, which is harmless.)
    fn park(&self, key: &str, claim: &ObjectBucketClaim) {
        let inputs = self.inputs(claim);
        self.parked.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), inputs);
    }

    /// Whether the claim failed permanently and neither it nor its StorageClass changed since.
    fn is_parked(&self, key: &str, claim: &ObjectBucketClaim) -> bool {
        let mut parked = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        let Some(inputs) = parked.get(key) else { return false };
        if claim.meta().deletion_timestamp.is_none() && *inputs == self.inputs(claim) {
            return true;
        }
        parked.remove(key);
        false
    }

    /// Whether the claim was found blocked by a foreign Secret or ConfigMap; `Some(blocked)`
    /// records a new finding.
    pub(crate) fn blocked(&self, key: &str, blocked: Option<bool>) -> bool {
        let mut set = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        match blocked {
            Some(true) => set.insert(key.to_owned()),
            Some(false) => set.remove(key),
            None => set.contains(key),
        }
    }

    /// Publishes an Event on the claim; a failure to publish is logged, never fatal.
    pub(crate) async fn event(
        &self,
        claim: &ObjectBucketClaim,
        type_: EventType,
        reason: &str,
        note: &str,
        operation: Operation,
    ) {
        self.publish(&claim.object_ref(&()), type_, reason, note, operation).await;
    }

    /// Publishes an Event on any object; a failure to publish is logged, never fatal.
    pub(crate) async fn publish(
        &self,
        subject: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: &str,
        operation: Operation,
    ) {
        publish(&self.events, subject, type_, reason, note, &format!("{operation:?}")).await;
    }
}

/// How long one [`Recorder`] serves before a fresh one replaces it.
const RECORDER_LIFETIME: Duration = Duration::from_secs(600);

/// Publishes Events through a [`Recorder`] replaced every [`RECORDER_LIFETIME`]. A recorder keeps
/// each Event it published for six minutes, to count repeats into a series, in a map that never
/// shrinks: kept for good, a burst of thousands of Events (a mass deletion) would hold its memory
/// for good too. A repeat across a replacement starts a new Event instead of counting on.
pub(crate) struct Events {
    client: Client,
    reporter: Reporter,
    current: Mutex<(Instant, Recorder)>,
    /// Publishing fails with the API: told once a minute.
    failing: SharedThrottle,
}

impl Events {
    /// Events reported as `reporter`.
    pub(crate) fn new(client: Client, reporter: Reporter) -> Self {
        let recorder = Recorder::new(client.clone(), reporter.clone());
        let current = Mutex::new((Instant::now(), recorder));
        Self { client, reporter, current, failing: SharedThrottle::default() }
    }

    fn recorder(&self) -> Recorder {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.0.elapsed() > RECORDER_LIFETIME {
            let fresh = Recorder::new(self.client.clone(), self.reporter.clone());
            *current = (Instant::now(), fresh);
        }
        current.1.clone()
    }
}

/// Publishes an Event on `subject`; a failure to publish is logged, never fatal.
pub(crate) async fn publish(
    events: &Events,
    subject: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: &str,
    action: &str,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        // Events are limited to 1 kB of message.
        note: Some(note.chars().take(1000).collect()),
        action: action.into(),
        secondary: None,
    };
    match events.recorder().publish(&event, subject).await {
        Ok(()) => {
            events.failing.reset();
        }
        Err(e) => {
            if let Some(held_back) = events.failing.allow() {
                let name = subject.name.as_deref().unwrap_or("");
                tracing::warn!(object = name, error = %e, repeats_since_last_report = held_back,
                    "could not publish event {reason}");
            }
        }
    }
}

/// Per-object exponential backoff: `initial * 2^failures`, capped.
pub(crate) struct Backoff {
    initial: Duration,
    pub(crate) max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// No failures yet; delays from `initial` doubling up to `max`.
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self { initial, max, failures: Mutex::default() }
    }

    /// The delay before retrying `key` after one more failure.
    pub(crate) fn next(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key.to_string()).or_insert(0);
        let delay = self.initial.saturating_mul(2u32.saturating_pow(*count)).min(self.max);
        *count = count.saturating_add(1);
        delay
    }

    /// `key` succeeded: its next failure starts from `initial` again.
    pub(crate) fn reset(&self, key: &str) {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

/// Which caches hold their first list: told by the events themselves, since a store's own
/// readiness wakes only one of several waiters and the controller waits on the claims'.
pub(crate) struct ListProgress {
    done: Mutex<Vec<bool>>,
    listed: tokio::sync::watch::Sender<bool>,
}

impl ListProgress {
    /// Progress of `caches` caches, none listed yet.
    pub(crate) fn new(caches: usize) -> (Arc<Self>, tokio::sync::watch::Receiver<bool>) {
        let (listed, receiver) = tokio::sync::watch::channel(false);
        (Arc::new(Self { done: Mutex::new(vec![false; caches]), listed }), receiver)
    }

    /// Marks cache `kind` listed when its watch says its first list is complete.
    pub(crate) fn marker<K>(
        self: &Arc<Self>,
        kind: usize,
    ) -> impl Fn(&watcher::Result<watcher::Event<K>>) + Send + Sync + 'static {
        let progress = self.clone();
        move |event| {
            if matches!(event, Ok(watcher::Event::InitDone)) {
                let mut done = progress.done.lock().unwrap_or_else(|e| e.into_inner());
                done[kind] = true;
                progress.listed.send_replace(done.iter().all(|d| *d));
            }
        }
    }
}

/// Watch caches hold what the controller needs of each object and nothing more: the fields
/// servers keep about who wrote what are the bulk of an object and never read here.
fn slim<K: Resource>(object: &mut K) {
    slim_meta(object.meta_mut());
}

/// What every cache may drop: the server's field bookkeeping, the bulk of most objects. Caches
/// whose readers need labels or other programs' annotations (the volume side's) drop only this.
pub(crate) fn drop_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Watches of every object of a kind, and of only the objects that carry `label` naming
/// `provisioner`. Initial lists arrive as a stream of watch events rather than pages of hundreds
/// of objects at once, which would set the process's peak memory at every (re)list.
pub(crate) fn watch_configs(label: &str, provisioner: &str) -> (watcher::Config, watcher::Config) {
    let all = watcher::Config::default().streaming_lists();
    let ours = all.clone().labels(&format!("{label}={}", label_value(provisioner)));
    (all, ours)
}

/// A watch (of what `config` selects, as `name` on `health`) kept in a cache after `trim`: the
/// cache, and the watch's events, which pass through the cache first and mark cache `kind` of
/// `progress` listed once the first list is in.
pub(crate) fn cached_watch<K>(
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
fn compact_watch<K>(
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
fn summarized_watch<K: Summarized>(
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

/// Runs the controller until `shutdown` resolves, then lets running reconciles finish. Watch
/// failures are reported to `health`.
pub async fn run_controller<P: Provisioner>(
    client: Client,
    provisioner: P,
    config: ControllerConfig,
    metrics: Metrics,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let _leading = metrics.leading();
    let (all, ours) = watch_configs(LABEL_PROVISIONER, &config.provisioner_name);
    // Claims, ObjectBuckets, Secrets, ConfigMaps, StorageClasses.
    let (progress, listed) = ListProgress::new(5);

    // Claims arrive packed (`CachedClaim` decodes itself that way): nothing left to trim.
    let (claim_store, claim_events) =
        cached_watch(&client, &all, "claims", &health, |_| {}, &progress, 0);
    let claim_events = claim_events.applied_objects();

    // One watch of our ObjectBuckets feeds both the controller (a bucket deleted or changed by
    // hand wakes its claim, deletions included) and the sweep (a bucket whose claim went without
    // its cleanup), which reads the cache it fills.
    let buckets = Arc::new(Packed::<ObjectBucket>::new());
    let cache = buckets.clone();
    let bucket_watch = compact_watch(
        &client,
        &ours,
        ("objectbuckets", &health),
        slim,
        (&progress, 1),
        move |event| cache.apply(event),
    );
    let bucket_watch = bucket_watch.touched_objects();
    let (touched_tx, touched) = tokio::sync::mpsc::channel::<ObjectBucket>(1024);
    let drive_buckets = tokio::spawn(async move {
        futures::pin_mut!(bucket_watch);
        while let Some(bucket) = bucket_watch.next().await {
            if let Ok(bucket) = bucket
                && touched_tx.send(bucket).await.is_err()
            {
                break;
            }
        }
    });
    let bucket_events = futures::stream::unfold(touched, |mut touched| async move {
        let bucket = touched.recv().await?;
        Some((Ok(bucket), touched))
    });

    // Secrets and ConfigMaps pass on whole to wake their claims, but are kept as summaries.
    let (secrets, secret_events) =
        summarized_watch::<Secret>(&client, &ours, ("secrets", &health), (&progress, 2));
    let (config_maps, config_map_events) =
        summarized_watch::<ConfigMap>(&client, &ours, ("configmaps", &health), (&progress, 3));
    let (classes, class_events) =
        cached_watch(&client, &all, "storageclasses", &health, slim, &progress, 4);

    let reporter = Reporter { controller: config.provisioner_name.clone(), instance: None };
    let context = Arc::new(Context {
        events: Events::new(client.clone(), reporter),
        client: client.clone(),
        provisioner,
        name: config.provisioner_name.clone(),
        metrics,
        health: health.clone(),
        caches: Caches {
            claim_store: claim_store.clone(),
            claims: Writes::default(),
            buckets,
            secrets,
            config_maps,
            classes,
            listed,
        },
        backoff: Backoff::new(config.backoff_initial, config.backoff_max),
        api_failing: SharedThrottle::default(),
        parked: Mutex::default(),
        blocked: Mutex::default(),
    });

    let pulses = [
        health.pulse("claim phases", Duration::from_secs(60)),
        health.pulse("orphan sweep", STEP_SILENCE),
        health.pulse("usage report", config.usage_interval + STEP_SILENCE),
    ];
    let retirements = pulses.each_ref().map(Pulse::retirement);
    let [phases, sweeping, reporting] = pulses;
    let phases = tokio::spawn(count_phases(claim_store.clone(), context.clone(), phases));
    let sweep = tokio::spawn(sweep(context.clone(), sweeping));
    let usage = crate::usage::report_usage(context.clone(), config.usage_interval, reporting);
    let usage = tokio::spawn(usage);
    let by_class = claim_store.clone();
    let controller = Controller::for_stream(claim_events, claim_store)
        .owns_stream(secret_events.touched_objects())
        .owns_stream(config_map_events.touched_objects())
        .watches_stream(class_events.touched_objects(), move |class| {
            claims_of_class(&by_class, &class.name_any())
        })
        .watches_stream(bucket_events, |bucket| claim_of_bucket(&bucket))
        .trigger_backoff(ShortBackoff::default())
        .with_config(controller::Config::default().concurrency(config.workers))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller stream");
            }
        });
    // The loops beside the controller never end; one that does (a panic) ends the controller,
    // and with it the process (see `runtime`).
    let mut side = [("claim phases", phases), ("orphan sweep", sweep), ("usage report", usage)];
    let side_ended = futures::future::select_all(side.iter_mut().map(|(name, task)| {
        let name = *name;
        async move { (name, task.await) }.boxed()
    }));
    tokio::select! {
        () = controller => {
            // Stopped on purpose: so are the loops beside it.
            retirements.iter().for_each(Retirement::retire);
        }
        ((name, outcome), _, _) = side_ended => {
            tracing::error!(loop_name = name, ?outcome, "a loop of the controller ended");
        }
    }
    for (_, task) in &side {
        task.abort();
    }
    drive_buckets.abort();
}

/// Decodes every claim: a StorageClass changes rarely.
fn claims_of_class(store: &Store<CachedClaim>, class: &str) -> Vec<ObjectRef<CachedClaim>> {
    store
        .state()
        .iter()
        .filter(|c| c.claim().is_ok_and(|c| c.spec.storage_class_name == class))
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

fn claim_of_bucket(bucket: &ObjectBucket) -> Option<ObjectRef<CachedClaim>> {
    let claim = bucket.spec.claim_ref.as_ref()?;
    Some(ObjectRef::new(claim.name.as_deref()?).within(claim.namespace.as_deref()?))
}

/// Finishes the cleanup of claims that went without it (their finalizer removed by hand): every
/// ObjectBucket of ours still holding our finalizer whose claim is gone is cleaned up as the
/// claim's deletion would have, after the apiserver itself confirmed the claim is gone.
async fn sweep<P: Provisioner>(ctx: Arc<Context<P>>, pulse: Pulse) {
    // The caches must hold their first list, or every ObjectBucket would look orphaned.
    ctx.caches.until_listed().await;
    let mut interval = tokio::time::interval(SWEEP_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut cleanups_failing, mut checks_failing) = (Throttle::default(), Throttle::default());
    loop {
        pulse.beat();
        interval.tick().await;
        for (_, name) in ctx.caches.buckets.keys() {
            pulse.beat();
            // Corrected by our own writes: a bucket just released or deleted is not an orphan.
            let Some(bucket) = ctx.caches.buckets.get("", &name) else { continue };
            if !awaits_cleanup(&bucket, &ctx.name) {
                continue;
            }
            let Some(claim_ref) = bucket.spec.claim_ref.as_ref() else { continue };
            let (Some(namespace), Some(name)) = (&claim_ref.namespace, &claim_ref.name) else {
                continue;
            };
            let uid = claim_ref.uid.as_deref();
            let cached = ctx.caches.claim_store.get(&ObjectRef::new(name).within(namespace));
            if cached.is_some_and(|c| c.meta().uid.as_deref() == uid) {
                continue;
            }
            // The caches may lag: only the apiserver decides that the claim is gone and the
            // bucket still waits for its cleanup.
            match orphaned(&ctx, &bucket, namespace, name, uid).await {
                Ok(Some(bucket)) => match cleanup::sweep_orphan(&bucket, &ctx).await {
                    Ok(()) => cleanups_failing.reset(),
                    Err(error) => {
                        ctx.metrics.error(error.reason());
                        if let Some(held_back) = cleanups_failing.allow() {
                            tracing::warn!(object_bucket = %bucket.name_any(),
                                reason = error.reason(), repeats_since_last_report = held_back,
                                "cleaning up after a claim that is gone failed; retrying: {error}");
                        }
                    }
                },
                Ok(None) => checks_failing.reset(),
                Err(e) => {
                    if let Some(held_back) = checks_failing.allow() {
                        tracing::warn!(object_bucket = %bucket.name_any(), error = %e,
                            repeats_since_last_report = held_back,
                            "could not check whether an ObjectBucket's claim is gone");
                    }
                }
            }
        }
    }
}

/// The ObjectBucket as the apiserver has it now, if it still awaits cleanup and its claim is gone.
async fn orphaned<P>(
    ctx: &Context<P>,
    bucket: &ObjectBucket,
    namespace: &str,
    name: &str,
    uid: Option<&str>,
) -> Result<Option<ObjectBucket>, kube::Error> {
    let claims: Api<ObjectBucketClaim> = Api::namespaced(ctx.client.clone(), namespace);
    if claims.get_opt(name).await?.is_some_and(|live| live.uid().as_deref() == uid) {
        return Ok(None);
    }
    let buckets: Api<ObjectBucket> = Api::all(ctx.client.clone());
    let current = buckets.get_opt(&bucket.name_any()).await?;
    Ok(current.filter(|b| b.uid() == bucket.uid() && awaits_cleanup(b, &ctx.name)))
}

/// Ours, still holding our finalizer, and not already released.
fn awaits_cleanup(bucket: &ObjectBucket, provisioner: &str) -> bool {
    let ours =
        bucket.annotations().get(annotations::PROVISIONER).map(String::as_str) == Some(provisioner);
    let held = bucket.finalizers().iter().any(|f| f == FINALIZER);
    let phase = bucket.status.as_ref().and_then(|s| s.phase);
    let abandoned =
        bucket.annotations().get(annotations::ABANDONED).map(String::as_str) == Some("true");
    let released = matches!(phase, Some(ObjectBucketPhase::Released | ObjectBucketPhase::Failed));
    ours && held && (abandoned || !released)
}

/// Keeps the claims-by-phase gauge current for the claims this provisioner has taken on.
async fn count_phases<P>(store: Store<CachedClaim>, ctx: Arc<Context<P>>, pulse: Pulse) {
    loop {
        let claims = store.state();
        let ours = claims.iter().filter(|c| c.recorded_by(&ctx.name));
        let mut counts: Vec<(&str, i64)> = ClaimPhase::ALL.map(|p| (p.as_str(), 0)).to_vec();
        for claim in ours {
            let phase = claim.phase().unwrap_or(ClaimPhase::Pending);
            if let Some(i) = ClaimPhase::ALL.iter().position(|p| *p == phase) {
                counts[i].1 += 1;
            }
        }
        ctx.metrics.set_claims_by_phase(&counts);
        pulse.beat();
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}

/// Whether a claim is this provisioner's to handle.
enum Ownership {
    Ours,
    NotOurs,
    /// The StorageClass is missing and the claim records no provisioner.
    Unknown,
}

fn ownership<P>(claim: &ObjectBucketClaim, ctx: &Context<P>) -> Ownership {
    // Once intent is recorded the claim stays with its provisioner, even if the class changes.
    if let Some(recorded) = claim.annotations().get(annotations::PROVISIONER) {
        return if *recorded == ctx.name { Ownership::Ours } else { Ownership::NotOurs };
    }
    match ctx.caches.class(&claim.spec.storage_class_name) {
        Some(class) if class.provisioner == ctx.name => Ownership::Ours,
        Some(_) => Ownership::NotOurs,
        None => Ownership::Unknown,
    }
}

async fn reconcile<P: Provisioner>(
    cached: Arc<CachedClaim>,
    ctx: Arc<Context<P>>,
) -> Result<Action, Error> {
    ctx.metrics.reconcile();
    let cached = match cached.claim() {
        Ok(claim) => claim,
        Err(error) => {
            // One malformed object must not stall the others: report it and wait for a fix.
            tracing::warn!(claim = %key(&*cached), error = %error,
                "ignoring a claim that does not match the ObjectBucketClaim schema");
            ctx.metrics.error("InvalidObject");
            return Ok(Action::await_change());
        }
    };
    // Before every cache holds its first list, a missing StorageClass or ObjectBucket proves
    // nothing.
    ctx.caches.until_listed().await;
    // The cache may lag behind our own writes (a recorded name, a removed finalizer): those win.
    let Some(claim) = ctx.caches.claim(&cached) else { return Ok(Action::await_change()) };
    let key = key(&*claim);
    let result = match ownership(&claim, &ctx) {
        Ownership::NotOurs => return Ok(Action::await_change()),
        // Deleting a claim that never recorded us: it may be another provisioner's to clean up.
        Ownership::Unknown if claim.meta().deletion_timestamp.is_some() => {
            return Ok(Action::await_change());
        }
        Ownership::Unknown => {
            Err(Error::StorageClassNotFound(claim.spec.storage_class_name.clone()))
        }
        Ownership::Ours if ctx.is_parked(&key, &claim) => return Ok(Action::await_change()),
        Ownership::Ours => run_with_finalizer(claim.clone(), &ctx).await,
    };
    match result {
        Ok(action) => {
            ctx.backoff.reset(&key);
            ctx.health.permitted(RECONCILES);
            if ctx.api_failing.reset() {
                tracing::info!("reconciles reach the Kubernetes API again");
            }
            Ok(action)
        }
        Err(error) => report(&claim, error, &ctx, &key).await,
    }
}

/// A live claim is brought to Bound (its finalizer goes on with the first record of intent); a
/// deleted one holding our finalizer is cleaned up, then let go.
async fn run_with_finalizer<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    if claim.meta().deletion_timestamp.is_none() {
        return claim::apply(claim, ctx).await;
    }
    if !claim.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let action = cleanup::cleanup(claim.clone(), ctx).await?;
    let api: Api<ObjectBucketClaim> =
        Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    match finalizer::remove(&api, &*claim, FINALIZER).await {
        Ok(released) if released.finalizers().is_empty() => {
            // Gone with its last finalizer, though the cache may show it for a moment longer.
            ctx.caches.claims.deleted(&released);
            Ok(action)
        }
        Ok(released) => {
            ctx.caches.claims.wrote(released);
            Ok(action)
        }
        Err(e) if finalizer::is_not_found(&e) => Ok(Action::requeue(finalizer::LOOK_AGAIN)),
        Err(e) => Err(e.into()),
    }
}

/// Makes a failure visible (status condition, Event, log line, metric) and picks the retry.
async fn report<P>(
    claim: &ObjectBucketClaim,
    error: Error,
    ctx: &Context<P>,
    key: &str,
) -> Result<Action, Error> {
    let reason = error.reason().to_string();
    let message = error.to_string();
    ctx.metrics.error(&reason);
    if let Error::Kube(e) = &error
        && let Some(what) = refusal(e)
    {
        ctx.health.denied(RECONCILES, &what);
    }
    if matches!(error, Error::ForeignSecret(_) | Error::ForeignConfigMap(_)) {
        ctx.blocked(key, Some(true));
    }
    let deleting = claim.meta().deletion_timestamp.is_some();
    let current = claim.status.as_ref().and_then(|s| s.phase);
    let phase = match (error.is_permanent(), current) {
        (true, _) if !deleting => ClaimPhase::Failed,
        (_, Some(phase)) => phase,
        (_, None) => ClaimPhase::Pending,
    };
    // Claims failing with the API fail together (an outage, missing RBAC): told once a minute.
    let held_back = if matches!(error, Error::Kube(_)) { ctx.api_failing.allow() } else { Some(0) };
    if let Some(held_back) = held_back {
        tracing::warn!(claim = %key, reason = %reason, permanent = error.is_permanent(),
            repeats_since_last_report = held_back, "{message}");
    }
    let operation = if deleting { Operation::Delete } else { Operation::Provision };
    ctx.event(claim, EventType::Warning, &reason, &message, operation).await;

    let api: Api<ObjectBucketClaim> =
        Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    // Status goes on the newest version: earlier phases of this reconcile may have changed it.
    let Some(latest) = ctx.caches.claim(claim) else { return Ok(Action::await_change()) };
    let state = ClaimState { phase, ready: false, reason, message };
    if let Some(written) = set_claim_status(&api, &latest, &state).await? {
        ctx.caches.claims.wrote(written);
    }
    Ok(match error.retry() {
        Retry::Backoff => Action::requeue(ctx.backoff.next(key)),
        Retry::Api => Action::requeue(ctx.backoff.next(key).min(API_RETRY_MAX)),
        Retry::Slowly => Action::requeue(ctx.backoff.max),
        Retry::OnChange => {
            if !deleting {
                ctx.park(key, &latest);
            }
            Action::await_change()
        }
    })
}

/// Reached only when reporting itself failed (the API is unreachable): retry with backoff.
fn error_policy<P>(claim: Arc<CachedClaim>, error: &Error, ctx: Arc<Context<P>>) -> Action {
    let key = key(&*claim);
    if let Some(held_back) = ctx.api_failing.allow() {
        tracing::warn!(claim = %key, error = %error, repeats_since_last_report = held_back,
            "could not report a failed reconcile");
    }
    if let Error::Kube(e) = error
        && let Some(what) = refusal(e)
    {
        ctx.health.denied(RECONCILES, &what);
    }
    Action::requeue(ctx.backoff.next(&key).min(API_RETRY_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let delays: Vec<u128> = (0..5).map(|_| backoff.next("a").as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
        assert_eq!(backoff.next("b").as_millis(), 100, "claims back off independently");
        backoff.reset("a");
        assert_eq!(backoff.next("a").as_millis(), 100);
    }
}
