//! The controller: watches claims (and the Secrets, ConfigMaps and StorageClasses they depend on),
//! decides which claims are this provisioner's, and runs one reconcile per claim at a time, with
//! several claims in parallel.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER};
use bucket_api::{ClaimPhase, ObjectBucketClaim};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use crate::Provisioner;
use crate::claim::{self, key};
use crate::error::{Error, Operation, Retry};
use crate::objects::{annotations, label_value};
use crate::status::{ClaimState, set_claim_status};
use crate::telemetry::Metrics;

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
        let event = Event {
            type_,
            reason: reason.into(),
            // Events are limited to 1 kB of message.
            note: Some(note.chars().take(1000).collect()),
            action: format!("{operation:?}"),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &claim.object_ref(&())).await {
            tracing::warn!(claim = %key(claim), error = %e, "could not publish event {reason}");
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

/// Runs the controller until `shutdown` resolves, then lets running reconciles finish.
pub async fn run_controller<P: Provisioner>(
    client: Client,
    provisioner: P,
    config: ControllerConfig,
    metrics: Metrics,
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
    let controller =
        Controller::new(Api::<Guarded>::all(client.clone()), watcher::Config::default())
            .owns(Api::<Secret>::all(client.clone()), ours.clone())
            .owns(Api::<ConfigMap>::all(client.clone()), ours);
    let store = controller.store();
    let phases = tokio::spawn(count_phases(store.clone(), context.clone()));
    controller
        .watches(Api::<StorageClass>::all(client), watcher::Config::default(), move |class| {
            claims_of_class(&store, &class.name_any())
        })
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
}

fn claims_of_class(store: &Store<Guarded>, class: &str) -> Vec<ObjectRef<Guarded>> {
    store
        .state()
        .iter()
        .filter(|g| g.0.as_ref().is_ok_and(|c| c.spec.storage_class_name == class))
        .map(|g| ObjectRef::from_obj(&**g))
        .collect()
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
            finalizer::Event::Cleanup(claim) => claim::cleanup(claim, ctx).await,
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
