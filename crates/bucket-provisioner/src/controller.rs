//! The controller: watches claims (and the Secrets, ConfigMaps and StorageClasses they depend on),
//! decides which claims are this provisioner's, and runs one reconcile per claim at a time, with
//! several claims in parallel.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER};
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketPhase};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};

use crate::Provisioner;
use crate::claim::{self, key};
use crate::cleanup;
use crate::error::{Error, Operation, Retry};
use crate::objects::{annotations, label_value};
use crate::status::{ClaimState, set_claim_status};
use crate::telemetry::{Health, Metrics};
use crate::watch::{ShortBackoff, resilient_watch};

/// How often ObjectBuckets are checked for claims that went without their cleanup.
const SWEEP_INTERVAL: Duration = Duration::from_secs(10);

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
}

impl ControllerConfig {
    /// Defaults for a provisioner name: 4 workers, backoff from 1 s to 5 min.
    pub fn new(provisioner_name: impl Into<String>) -> Self {
        Self {
            provisioner_name: provisioner_name.into(),
            workers: 4,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
        }
    }
}

/// Shared state of all reconciles.
pub(crate) struct Context<P> {
    pub(crate) client: Client,
    pub(crate) provisioner: P,
    pub(crate) name: String,
    pub(crate) recorder: Recorder,
    pub(crate) metrics: Metrics,
    backoff: Backoff,
    parked: Mutex<HashMap<String, Inputs>>,
}

/// What a permanent failure depended on: the claim's spec and its StorageClass.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Inputs {
    generation: Option<i64>,
    class_version: Option<String>,
}

impl<P> Context<P> {
    async fn inputs(&self, claim: &ObjectBucketClaim) -> Result<Inputs, Error> {
        let class = Api::<StorageClass>::all(self.client.clone())
            .get_opt(&claim.spec.storage_class_name)
            .await?;
        Ok(Inputs {
            generation: claim.metadata.generation,
            class_version: class.and_then(|c| c.resource_version()),
        })
    }

    /// Remembers that the claim failed permanently with these inputs. Our own status writes wake
    /// the claim up again; parking keeps that from calling the backend until something changed.
    /// (After a restart a parked claim is tried once more, which is harmless.)
    async fn park(&self, key: &str, claim: &ObjectBucketClaim) -> Result<(), Error> {
        let inputs = self.inputs(claim).await?;
        self.parked.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), inputs);
        Ok(())
    }

    /// Whether the claim failed permanently and neither it nor its StorageClass changed since.
    async fn is_parked(&self, key: &str, claim: &ObjectBucketClaim) -> Result<bool, Error> {
        let parked = self.parked.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned();
        let Some(parked) = parked else { return Ok(false) };
        if claim.meta().deletion_timestamp.is_none() && parked == self.inputs(claim).await? {
            return Ok(true);
        }
        self.parked.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
        Ok(false)
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
        let event = Event {
            type_,
            reason: reason.into(),
            // Events are limited to 1 kB of message.
            note: Some(note.chars().take(1000).collect()),
            action: format!("{operation:?}"),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, subject).await {
            let name = subject.name.as_deref().unwrap_or("");
            tracing::warn!(object = name, error = %e, "could not publish event {reason}");
        }
    }
}

/// Per-claim exponential backoff: `initial * 2^failures`, capped.
struct Backoff {
    initial: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    fn next(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key.to_string()).or_insert(0);
        let delay = self.initial.saturating_mul(2u32.saturating_pow(*count)).min(self.max);
        *count = count.saturating_add(1);
        delay
    }

    fn reset(&self, key: &str) {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

type Guarded = DeserializeGuard<ObjectBucketClaim>;

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
    let reporter = Reporter { controller: config.provisioner_name.clone(), instance: None };
    let context = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client: client.clone(),
        provisioner,
        name: config.provisioner_name.clone(),
        metrics,
        backoff: Backoff {
            initial: config.backoff_initial,
            max: config.backoff_max,
            failures: Mutex::default(),
        },
        parked: Mutex::default(),
    });
    let ours = watcher::Config::default()
        .labels(&format!("{LABEL_PROVISIONER}={}", label_value(&config.provisioner_name)));
    let all = watcher::Config::default();

    // Which caches hold their first list (claims, ObjectBuckets). Told by the events themselves:
    // a store's own readiness wakes only one of several waiters, and the controller waits on it.
    let (listed, ready) = tokio::sync::watch::channel((false, false));
    let listed = Arc::new(listed);
    let (claims, claims_writer) = reflector::store();
    let claims_listed = listed.clone();
    let claim_events = reflector::reflector(
        claims_writer,
        resilient_watch(Api::<Guarded>::all(client.clone()), all.clone(), "claims", health.clone()),
    )
    .inspect(move |event| {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            claims_listed.send_modify(|(claims, _)| *claims = true);
        }
    })
    .applied_objects();
    // One watch of our ObjectBuckets feeds both the controller (a bucket deleted or changed by
    // hand wakes its claim) and the sweep (a bucket whose claim went without its cleanup).
    let (buckets, buckets_writer) = reflector::store_shared::<ObjectBucket>(256);
    let bucket_events = buckets_writer.subscribe().expect("a shared store can be subscribed to");
    let bucket_watch = reflector::reflector(
        buckets_writer,
        resilient_watch(Api::all(client.clone()), ours.clone(), "objectbuckets", health.clone()),
    )
    .inspect(move |event| {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            listed.send_modify(|(_, buckets)| *buckets = true);
        }
    });
    let drive_buckets = tokio::spawn(bucket_watch.for_each(|_| std::future::ready(())));
    let secrets = resilient_watch(
        Api::<Secret>::all(client.clone()),
        ours.clone(),
        "secrets",
        health.clone(),
    )
    .touched_objects();
    let config_maps =
        resilient_watch(Api::<ConfigMap>::all(client.clone()), ours, "configmaps", health.clone())
            .touched_objects();
    let classes = resilient_watch(
        Api::<StorageClass>::all(client.clone()),
        all,
        "storageclasses",
        health.clone(),
    )
    .touched_objects();

    let phases = tokio::spawn(count_phases(claims.clone(), context.clone()));
    let sweep = tokio::spawn(sweep(claims.clone(), buckets, ready, context.clone()));
    let by_class = claims.clone();
    Controller::for_stream(claim_events, claims)
        .owns_stream(secrets)
        .owns_stream(config_maps)
        .watches_stream(classes, move |class| claims_of_class(&by_class, &class.name_any()))
        .watches_shared_stream(bucket_events, |bucket| claim_of_bucket(&bucket))
        .trigger_backoff(ShortBackoff::default())
        .with_config(controller::Config::default().concurrency(config.workers))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller stream");
            }
        })
        .await;
    phases.abort();
    sweep.abort();
    drive_buckets.abort();
}

fn claims_of_class(store: &Store<Guarded>, class: &str) -> Vec<ObjectRef<Guarded>> {
    store
        .state()
        .iter()
        .filter(|g| g.0.as_ref().is_ok_and(|c| c.spec.storage_class_name == class))
        .map(|g| ObjectRef::from_obj(&**g))
        .collect()
}

fn claim_of_bucket(bucket: &ObjectBucket) -> Option<ObjectRef<Guarded>> {
    let claim = bucket.spec.claim_ref.as_ref()?;
    Some(ObjectRef::new(claim.name.as_deref()?).within(claim.namespace.as_deref()?))
}

/// Finishes the cleanup of claims that went without it (their finalizer removed by hand): every
/// ObjectBucket of ours still holding our finalizer whose claim is gone is cleaned up as the
/// claim's deletion would have, after the apiserver itself confirmed the claim is gone.
async fn sweep<P: Provisioner>(
    claims: Store<Guarded>,
    buckets: Store<ObjectBucket>,
    mut ready: tokio::sync::watch::Receiver<(bool, bool)>,
    ctx: Arc<Context<P>>,
) {
    // Both caches must hold their first list, or every ObjectBucket would look orphaned.
    if ready.wait_for(|(claims, buckets)| *claims && *buckets).await.is_err() {
        return;
    }
    let mut interval = tokio::time::interval(SWEEP_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        for bucket in buckets.state() {
            if !awaits_cleanup(&bucket, &ctx.name) {
                continue;
            }
            let Some(claim_ref) = bucket.spec.claim_ref.as_ref() else { continue };
            let (Some(namespace), Some(name)) = (&claim_ref.namespace, &claim_ref.name) else {
                continue;
            };
            let uid = claim_ref.uid.as_deref();
            let cached = claims.get(&ObjectRef::new(name).within(namespace));
            if cached.is_some_and(|c| c.meta().uid.as_deref() == uid) {
                continue;
            }
            // The cache may lag behind a claim created just now: only the apiserver decides.
            let api: Api<ObjectBucketClaim> = Api::namespaced(ctx.client.clone(), namespace);
            match api.get_opt(name).await {
                Ok(Some(live)) if live.uid().as_deref() == uid => continue,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(object_bucket = %bucket.name_any(), error = %e,
                        "could not check the claim of an ObjectBucket");
                    continue;
                }
            }
            if let Err(error) = cleanup::sweep_orphan(&bucket, &ctx).await {
                ctx.metrics.error(error.reason());
                tracing::warn!(object_bucket = %bucket.name_any(), reason = error.reason(),
                    "cleaning up after a claim that is gone failed; retrying: {error}");
            }
        }
    }
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
async fn count_phases<P>(store: Store<Guarded>, ctx: Arc<Context<P>>) {
    let phases = [
        (ClaimPhase::Pending, "Pending"),
        (ClaimPhase::Bound, "Bound"),
        (ClaimPhase::Released, "Released"),
        (ClaimPhase::Failed, "Failed"),
    ];
    loop {
        let claims = store.state();
        let ours = claims
            .iter()
            .filter_map(|g| g.0.as_ref().ok())
            .filter(|c| c.annotations().get(annotations::PROVISIONER) == Some(&ctx.name));
        let mut counts: Vec<(&str, i64)> = phases.iter().map(|(_, name)| (*name, 0)).collect();
        for claim in ours {
            let phase = claim.status.as_ref().and_then(|s| s.phase).unwrap_or(ClaimPhase::Pending);
            if let Some(i) = phases.iter().position(|(p, _)| *p == phase) {
                counts[i].1 += 1;
            }
        }
        ctx.metrics.set_claims_by_phase(&counts);
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

async fn ownership<P>(claim: &ObjectBucketClaim, ctx: &Context<P>) -> Result<Ownership, Error> {
    // Once intent is recorded the claim stays with its provisioner, even if the class changes.
    if let Some(recorded) = claim.annotations().get(annotations::PROVISIONER) {
        return Ok(if *recorded == ctx.name { Ownership::Ours } else { Ownership::NotOurs });
    }
    let class = Api::<StorageClass>::all(ctx.client.clone())
        .get_opt(&claim.spec.storage_class_name)
        .await?;
    Ok(match class {
        Some(class) if class.provisioner == ctx.name => Ownership::Ours,
        Some(_) => Ownership::NotOurs,
        None => Ownership::Unknown,
    })
}

async fn reconcile<P: Provisioner>(
    guarded: Arc<Guarded>,
    ctx: Arc<Context<P>>,
) -> Result<Action, Error> {
    ctx.metrics.reconcile();
    let cached = match &guarded.0 {
        Ok(claim) => claim,
        Err(invalid) => {
            // One malformed object must not stall the others: report it and wait for a fix.
            tracing::warn!(
                claim = %format!("{}/{}", invalid.metadata.namespace.as_deref().unwrap_or(""),
                    invalid.metadata.name.as_deref().unwrap_or("")),
                error = %invalid.error,
                "ignoring a claim that does not match the ObjectBucketClaim schema"
            );
            ctx.metrics.error("InvalidObject");
            return Ok(Action::await_change());
        }
    };
    // The cache can lag behind our own writes (a removed finalizer, a recorded name); acting on a
    // stale copy would repeat backend calls, so every reconcile starts from a fresh read.
    let api: Api<ObjectBucketClaim> =
        Api::namespaced(ctx.client.clone(), &cached.namespace().unwrap_or_default());
    let claim = match api.get_opt(&cached.name_any()).await {
        Ok(Some(claim)) => Arc::new(claim),
        Ok(None) => return Ok(Action::await_change()),
        Err(e) => return Err(e.into()),
    };
    let key = key(&*claim);
    let result = match ownership(&claim, &ctx).await {
        Ok(Ownership::NotOurs) => return Ok(Action::await_change()),
        // Deleting a claim that never recorded us: it may be another provisioner's to clean up.
        Ok(Ownership::Unknown) if claim.meta().deletion_timestamp.is_some() => {
            return Ok(Action::await_change());
        }
        Ok(Ownership::Unknown) => {
            Err(Error::StorageClassNotFound(claim.spec.storage_class_name.clone()))
        }
        Ok(Ownership::Ours) if ctx.is_parked(&key, &claim).await? => {
            return Ok(Action::await_change());
        }
        Ok(Ownership::Ours) => run_with_finalizer(claim.clone(), &ctx).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(action) => {
            ctx.backoff.reset(&key);
            Ok(action)
        }
        Err(error) => report(&claim, error, &ctx, &key).await,
    }
}

async fn run_with_finalizer<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    let api: Api<ObjectBucketClaim> =
        Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, claim, |event| async move {
        match event {
            finalizer::Event::Apply(claim) => claim::apply(claim, ctx).await,
            finalizer::Event::Cleanup(claim) => cleanup::cleanup(claim, ctx).await,
        }
    })
    .await
    .map_err(|e| match e {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => Error::Kube(e),
        other => Error::Internal(other.to_string()),
    })
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
    let deleting = claim.meta().deletion_timestamp.is_some();
    let current = claim.status.as_ref().and_then(|s| s.phase);
    let phase = match (error.is_permanent(), current) {
        (true, _) if !deleting => ClaimPhase::Failed,
        (_, Some(phase)) => phase,
        (_, None) => ClaimPhase::Pending,
    };
    tracing::warn!(claim = %key, reason = %reason, permanent = error.is_permanent(), "{message}");
    let operation = if deleting { Operation::Delete } else { Operation::Provision };
    ctx.event(claim, EventType::Warning, &reason, &message, operation).await;

    let api: Api<ObjectBucketClaim> =
        Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    // Status goes on the newest version: earlier phases of this reconcile may have changed it.
    let latest = api.get_opt(&claim.name_any()).await?;
    if let Some(latest) = &latest {
        let state = ClaimState { phase, ready: false, reason, message };
        set_claim_status(&api, latest, &state).await?;
    }
    Ok(match error.retry() {
        Retry::Backoff => Action::requeue(ctx.backoff.next(key)),
        Retry::Slowly => Action::requeue(ctx.backoff.max),
        Retry::OnChange => {
            if let Some(latest) = latest.filter(|_| !deleting) {
                ctx.park(key, &latest).await?;
            }
            Action::await_change()
        }
    })
}

/// Reached only when reporting itself failed (the API is unreachable): retry with backoff.
fn error_policy<P>(claim: Arc<Guarded>, error: &Error, ctx: Arc<Context<P>>) -> Action {
    let key = match &claim.0 {
        Ok(c) => key(c),
        Err(invalid) => invalid.metadata.name.clone().unwrap_or_default(),
    };
    tracing::warn!(claim = %key, error = %error, "could not report a failed reconcile");
    Action::requeue(ctx.backoff.next(&key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let backoff = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(500),
            failures: Mutex::default(),
        };
        let delays: Vec<u128> = (0..5).map(|_| backoff.next("a").as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
        assert_eq!(backoff.next("b").as_millis(), 100, "claims back off independently");
        backoff.reset("a");
        assert_eq!(backoff.next("a").as_millis(), 100);
    }
}
