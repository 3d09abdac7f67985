//! The controller: watches claims (and the Secrets, ConfigMaps, StorageClasses,
//! BucketShareGrants and Namespaces they depend on),
//! decides which claims are this provisioner's, and runs one reconcile per claim at a time, with
//! several claims in parallel.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER};
use bucket_api::{ClaimPhase, ObjectBucket, ObjectBucketClaim};
use std::fmt::Debug;

use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{EventType, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};

use bucket_api::contract::annotations;

use crate::Provisioner;
use crate::bucket::context::{Context, Inputs};
use crate::bucket::error::Error;
use crate::bucket::observe::observe;
use crate::bucket::probe::probe_backends;
use crate::bucket::sharing_index::SharingIndex;
use crate::bucket::status::{ClaimState, set_claim_status};
use crate::bucket::sweep::{count_phases, sweep};
use crate::bucket::{cleanup, cross_namespace, provision};
use crate::kubernetes::backoff::Backoff;
use crate::kubernetes::cache::claims::{CachedClaim, slim_meta};
use crate::kubernetes::cache::compact::Packed;
use crate::kubernetes::cache::{Caches, Writes, key};
use crate::kubernetes::events::Events;
use crate::kubernetes::failure::{self, Failure, Operation, Retry};
use crate::kubernetes::finalizer;
use crate::kubernetes::health::{Health, Pulse, Retirement, refusal};
use crate::kubernetes::list_progress::{ListProgress, applied_since_list, touched_since_list};
use crate::kubernetes::log_limit::SharedThrottle;
use crate::kubernetes::telemetry::Metrics;
use crate::kubernetes::unwind::caught;
use crate::kubernetes::waiting::{Waiting, probe_interval, retries};
use crate::kubernetes::watch::{
    ShortBackoff, cached_watch, compact_watch, summarized_watch, watch_configs,
};

/// How long one step of a background pass (one ObjectBucket swept or reported, a backend call
/// included) may take before the loop counts as stuck.
const STEP_SILENCE: Duration = Duration::from_secs(300);
/// The longest usage interval the report loop keeps to; a longer one is taken as this.
pub const LONGEST_USAGE_INTERVAL: Duration = Duration::from_secs(24 * 3600);
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
    /// it changed, recorded on their ObjectBuckets (see [`crate::bucket::usage`]); kept between
    /// a second and [`LONGEST_USAGE_INTERVAL`].
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

/// The usage interval the report loop keeps to: `config`'s, between a second (a zero period
/// would be a panic of the timer) and [`LONGEST_USAGE_INTERVAL`] (so that no deadline counted
/// from it overflows).
fn usage_interval(config: &ControllerConfig) -> Duration {
    config.usage_interval.clamp(Duration::from_secs(1), LONGEST_USAGE_INTERVAL)
}

/// Watch caches hold what the controller needs of each object and nothing more: the fields
/// servers keep about who wrote what are the bulk of an object and never read here.
fn slim<K: Resource>(object: &mut K) {
    slim_meta(object.meta_mut());
}

/// Of a Namespace only its name and labels are read (a class's namespace selector).
fn labels_only(namespace: &mut Namespace) {
    let meta = &mut namespace.metadata;
    meta.managed_fields = None;
    meta.annotations = None;
    namespace.spec = None;
    namespace.status = None;
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
    // Claims, ObjectBuckets, Secrets, ConfigMaps, StorageClasses, BucketShareGrants, Namespaces.
    let (progress, listed) = ListProgress::new(7);

    // Claims arrive packed (`CachedClaim` decodes itself that way): nothing left to trim.
    let (claim_store, claim_events) =
        cached_watch(&client, &all, "claims", &health, |_| {}, &progress, 0);
    let sharing = Arc::new(SharingIndex::default());
    let index = sharing.clone();
    let claim_events = claim_events.inspect_ok(move |event| index.claim_event(event));
    // A list's claims are looked at once every cache holds the list (see `list_progress`).
    let claim_events = applied_since_list(claim_events);

    // One watch of our ObjectBuckets feeds both the controller (a bucket deleted or changed by
    // hand wakes its claim, deletions included) and the sweep (a bucket whose claim went without
    // its cleanup), which reads the cache it fills.
    let buckets = Arc::new(Packed::<ObjectBucket>::new());
    let (cache, index) = (buckets.clone(), sharing.clone());
    let bucket_watch = compact_watch(
        &client,
        &ours,
        ("objectbuckets", &health),
        slim,
        (&progress, 1),
        move |event| {
            cache.apply(event);
            index.bucket_event(event);
        },
    );
    let bucket_watch = touched_since_list(bucket_watch);
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
    let (grants, grant_events) =
        cached_watch(&client, &all, "bucketsharegrants", &health, slim, &progress, 5);
    let (namespaces, namespace_events) =
        cached_watch(&client, &all, "namespaces", &health, labels_only, &progress, 6);

    let probe = probe_interval(config.backoff_initial, config.backoff_max);
    let (waiting, woken) = Waiting::new(probe, config.backoff_max.saturating_mul(2));
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
            grants,
            namespaces,
            listed,
        },
        backoff: Backoff::new(config.backoff_initial, config.backoff_max),
        api_failing: SharedThrottle::default(),
        parked: Mutex::default(),
        blocked: Mutex::default(),
        waiting,
    });

    let pulses = [
        health.pulse("claim phases", Duration::from_secs(60)),
        health.pulse("orphan sweep", STEP_SILENCE),
        health.pulse("usage report", usage_interval(&config).saturating_add(STEP_SILENCE)),
    ];
    let retirements = pulses.each_ref().map(Pulse::retirement);
    let [phases, sweeping, reporting] = pulses;
    let phases = tokio::spawn(count_phases(claim_store.clone(), context.clone(), phases));
    let sweep = tokio::spawn(sweep(context.clone(), sweeping));
    let usage =
        crate::bucket::usage::report_usage(context.clone(), usage_interval(&config), reporting);
    let usage = tokio::spawn(usage);
    let probes = tokio::spawn(probe_backends(context.clone()));
    let by_class = claim_store.clone();
    let (class_sharing, grant_sharing, namespace_sharing) =
        (sharing.clone(), sharing.clone(), sharing);
    let grant_events = touched_since_list(cross_namespace::reported(grant_events, context.clone()));
    let controller = Controller::for_stream(claim_events, claim_store)
        .owns_stream(touched_since_list(secret_events))
        .owns_stream(touched_since_list(config_map_events))
        .watches_stream(touched_since_list(class_events), move |class| {
            // A class's consent to share across namespaces concerns claims of other classes.
            let mut claims = claims_of_class(&by_class, &class.name_any());
            claims.extend(class_sharing.sharing_from(None));
            claims
        })
        .watches_stream(grant_events, move |grant| {
            grant_sharing.sharing_from(grant.namespace().as_deref())
        })
        .watches_stream(touched_since_list(namespace_events), move |namespace| {
            // Its labels may let its claims share across namespaces, or withdraw them.
            namespace_sharing.sharing_in(&namespace.name_any())
        })
        .watches_stream(bucket_events, |bucket| claim_of_bucket(&bucket))
        .reconcile_all_on(progress.look_again())
        .reconcile_on(retries(woken))
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
    let mut side = [
        ("claim phases", phases),
        ("orphan sweep", sweep),
        ("usage report", usage),
        ("backend probes", probes),
    ];
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

/// Whether a claim is this provisioner's to handle.
enum Ownership {
    Ours,
    NotOurs,
    /// The StorageClass is missing and the claim records no provisioner.
    Unknown,
}

/// Decided by what tenants cannot write: an ObjectBucket of ours bound to the claim, then its
/// StorageClass. What the claim itself records counts only once its class is gone.
fn ownership<P>(claim: &ObjectBucketClaim, ctx: &Context<P>) -> Ownership {
    if observe(claim, ctx).bound.is_some() {
        return Ownership::Ours;
    }
    match ctx.caches.class(&claim.spec.storage_class_name) {
        Some(class) if class.provisioner == ctx.name => Ownership::Ours,
        Some(_) => Ownership::NotOurs,
        None => match claim.annotations().get(annotations::PROVISIONER) {
            Some(recorded) if *recorded == ctx.name => Ownership::Ours,
            Some(_) => Ownership::NotOurs,
            None => Ownership::Unknown,
        },
    }
}

/// One claim's reconcile; a panic that escapes even its report comes back as
/// [`Error::Panicked`] for [`error_policy`], so the controller goes on with the others.
async fn reconcile<P: Provisioner>(
    cached: Arc<CachedClaim>,
    ctx: Arc<Context<P>>,
) -> Result<Action, Error> {
    caught(reconcile_claim(cached, ctx)).await.unwrap_or_else(|panic| Err(Error::Panicked(panic)))
}

async fn reconcile_claim<P: Provisioner>(
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
    // What a permanent failure depends on, read before anything looks (see `Context::park`).
    let inputs = ctx.inputs(&claim);
    let result = match ownership(&claim, &ctx) {
        Ownership::NotOurs => return Ok(Action::await_change()),
        // Deleting a claim that never recorded us: it may be another provisioner's to clean up.
        Ownership::Unknown if claim.meta().deletion_timestamp.is_some() => {
            return Ok(Action::await_change());
        }
        Ownership::Unknown => {
            Err(Error::StorageClassNotFound(claim.spec.storage_class_name.clone()))
        }
        Ownership::Ours if ctx.is_parked(&key, &claim, &inputs) => {
            return Ok(Action::await_change());
        }
        Ownership::Ours => run_guarded(claim.clone(), &ctx).await,
    };
    match result {
        Ok(action) => {
            ctx.backoff.reset(&key);
            ctx.backend_answered(&key);
            ctx.health.permitted(RECONCILES);
            if ctx.api_failing.reset() {
                tracing::info!("reconciles reach the Kubernetes API again");
            }
            Ok(action)
        }
        Err(error) => report(&claim, error, &ctx, (&key, inputs)).await,
    }
}

/// [`run_with_finalizer`], with a panic inside it failing this claim alone: reported like any
/// other permanent failure (`Failed`, condition, Event, log line, metric).
async fn run_guarded<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    let key = key(&*claim);
    caught(run_with_finalizer(claim, ctx)).await.unwrap_or_else(|panic| {
        tracing::error!(claim = %key, panic = %panic, "the reconcile of a claim panicked");
        Err(Error::Panicked(panic))
    })
}

/// A live claim is brought to Bound (its finalizer goes on with the first record of intent); a
/// deleted one holding our finalizer is cleaned up, then let go.
async fn run_with_finalizer<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: &Context<P>,
) -> Result<Action, Error> {
    if claim.meta().deletion_timestamp.is_none() {
        return provision::apply(claim, ctx).await;
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
    (key, inputs): (&str, Inputs),
) -> Result<Action, Error> {
    failure::count(&error, &ctx.metrics, &ctx.health, RECONCILES);
    let reason = error.reason().to_string();
    let message = error.to_string();
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
    // The mode in force is the one the claim's key has, as its ObjectBucket records it: a class
    // narrowed under a bound claim is applied before the claim fails for asking more.
    let access_mode = match observe(&latest, ctx).bound {
        Some(bound) => Some(crate::access_mode_of(&bound)),
        None => latest.status.as_ref().and_then(|s| s.access_mode),
    };
    let credentials = latest.status.as_ref().and_then(|s| s.credentials.clone());
    let state = ClaimState { phase, ready: false, reason, message, access_mode, credentials };
    if let Some(written) = set_claim_status(&api, &latest, &state).await? {
        ctx.caches.claims.wrote(written);
    }
    if error.retry() == Retry::OnChange && !deleting {
        // The claim as our own writes left it, with what other objects said when the reconcile
        // looked: a class replaced meanwhile is a change still to see, our own writes are not.
        let now = ctx.inputs(&latest);
        let seen = Inputs { class_version: inputs.class_version, sharing: inputs.sharing, ..now };
        ctx.park(key, seen);
    }
    Ok(ctx.retry_after(&latest, &error, key))
}

/// Reached only when reporting itself failed (the API is unreachable): retry with backoff.
fn error_policy<P>(claim: Arc<CachedClaim>, error: &Error, ctx: Arc<Context<P>>) -> Action {
    let key = key(&*claim);
    if let Error::Panicked(panic) = error {
        ctx.metrics.error(error.reason());
        tracing::error!(claim = %key, panic = %panic, "reporting a failed reconcile panicked");
        return ctx.backoff.after(Retry::Slowly, &key);
    }
    if let Some(held_back) = ctx.api_failing.allow() {
        tracing::warn!(claim = %key, error = %error, repeats_since_last_report = held_back,
            "could not report a failed reconcile");
    }
    if let Error::Kube(e) = error
        && let Some(what) = refusal(e)
    {
        ctx.health.denied(RECONCILES, &what);
    }
    ctx.backoff.after(Retry::Api, &key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_usage_interval_is_kept_between_a_second_and_a_day() {
        let with =
            |usage_interval| ControllerConfig { usage_interval, ..ControllerConfig::new("p") };
        assert_eq!(usage_interval(&with(Duration::from_secs(60))), Duration::from_secs(60));
        assert_eq!(usage_interval(&with(Duration::ZERO)), Duration::from_secs(1));
        assert_eq!(usage_interval(&with(Duration::MAX)), LONGEST_USAGE_INTERVAL);
    }
}
