//! The volume controller: watches claims, our PersistentVolumes and the StorageClasses, makes a
//! PV for every claim the binder hands to us, and removes the assets of the PVs that are done.
//! Like the bucket side it reads only from its caches, corrected by its own writes, so that a
//! reconcile with nothing to do makes no request.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{EventType, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;

use super::objects::{
    FINALIZER, Fate, LABEL_PROVISIONER, awaits_volume, fate, is_ours, options, pv_name_for_claim,
    selected_node, volume, waits_for_consumer,
};
use super::{VolumeProvisioner, expansion};
use crate::error::{VolumeError, backend};
use provisioner_runtime::backoff::Backoff;
use provisioner_runtime::cache::{Recent, key};
use provisioner_runtime::events::{Events, publish};
use provisioner_runtime::failure::{self, Failure, Operation};
use provisioner_runtime::finalizer;
use provisioner_runtime::health::Health;
use provisioner_runtime::list_progress::{ListProgress, applied_since_list, touched_since_list};
use provisioner_runtime::telemetry::Metrics;
use provisioner_runtime::unwind::caught;
use provisioner_runtime::watch::ShortBackoff;
use provisioner_runtime::watch::{cached_watch, drop_managed_fields, watch_configs};

/// The source reconciles report refusals under on [`Health`].
const RECONCILES: &str = "reconciles";

/// How the volume controller runs.
#[derive(Clone, Debug)]
pub struct VolumeControllerConfig {
    /// The StorageClass `provisioner` value this controller answers to.
    pub provisioner_name: String,
    /// How many claims and volumes are reconciled at once.
    pub workers: u16,
    /// The node this instance serves, for storage that lives on one node: only claims the
    /// scheduler placed there (`volume.kubernetes.io/selected-node`) are provisioned, and only
    /// PVs made here are deleted. `None` serves the whole cluster.
    pub node: Option<String>,
    /// With `node` set: provision claims that name no node too (classes with `Immediate`
    /// binding), on this node. Only for a single instance, never one per node.
    pub serve_unscheduled: bool,
    /// First retry delay after a transient failure; it doubles on each further failure.
    pub backoff_initial: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
}

impl VolumeControllerConfig {
    /// Defaults for a provisioner name: the whole cluster, 4 workers, backoff from 1 s to 5 min.
    pub fn new(provisioner_name: impl Into<String>) -> Self {
        Self {
            provisioner_name: provisioner_name.into(),
            workers: 4,
            node: None,
            serve_unscheduled: false,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
        }
    }
}

/// Shared state of all reconciles.
struct Context<P> {
    client: Client,
    provisioner: P,
    config: VolumeControllerConfig,
    events: Events,
    metrics: Metrics,
    health: Health,
    volumes: Recent<PersistentVolume>,
    classes: Store<StorageClass>,
    listed: watch::Receiver<bool>,
    backoff: Backoff,
}

impl<P> Context<P> {
    /// Waits until every cache holds its first list: before that, a missing PV proves nothing.
    async fn until_listed(&self) {
        let mut listed = self.listed.clone();
        let _ = listed.wait_for(|l| *l).await;
    }

    fn node(&self) -> Option<&str> {
        self.config.node.as_deref()
    }

    fn resizer(&self) -> expansion::Resizer<'_, P> {
        expansion::Resizer {
            client: &self.client,
            provisioner: &self.provisioner,
            events: &self.events,
            metrics: &self.metrics,
            volumes: &self.volumes,
            backoff: &self.backoff,
        }
    }

    /// Makes a failure visible (Event on `subject`, log line, metric) and picks the retry.
    async fn report(&self, subject: &ObjectReference, key: &str, error: VolumeError) -> Action {
        failure::count(&error, &self.metrics, &self.health, RECONCILES);
        let reason = error.reason().to_owned();
        let permanent = error.is_permanent();
        tracing::warn!(object = %key, reason = %reason, permanent, "{error}");
        let action = if matches!(error, VolumeError::Backend { operation: Operation::Delete, .. }) {
            "Delete"
        } else {
            "Provision"
        };
        publish(&self.events, subject, EventType::Warning, &reason, &error.to_string(), action)
            .await;
        self.backoff.after(error.retry(), key)
    }
}

/// Runs the volume controller until `shutdown` resolves, then lets running reconciles finish.
/// Watch failures are reported to `health`.
pub async fn run_volume_controller<P: VolumeProvisioner>(
    client: Client,
    provisioner: P,
    config: VolumeControllerConfig,
    metrics: Metrics,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let _leading = metrics.leading();
    let (all, ours) = watch_configs(LABEL_PROVISIONER, &config.provisioner_name);
    // Claims, volumes, classes.
    let (progress, listed) = ListProgress::new(3);

    let (claims, claim_events) =
        cached_watch(&client, &all, "claims", &health, drop_managed_fields, &progress, 0);
    let (volumes, volume_events) = cached_watch(
        &client,
        &ours,
        "persistentvolumes",
        &health,
        drop_managed_fields,
        &progress,
        1,
    );
    let (classes, class_events) =
        cached_watch(&client, &all, "storageclasses", &health, drop_managed_fields, &progress, 2);
    // A list's objects are looked at once every cache holds the list (see `list_progress`).
    let (claim_events, volume_events, class_events) = (
        applied_since_list(claim_events),
        applied_since_list(volume_events),
        touched_since_list(class_events),
    );

    let reporter = Reporter { controller: config.provisioner_name.clone(), instance: None };
    let workers = config.workers.max(1);
    let context = Arc::new(Context {
        events: Events::new(client.clone(), reporter),
        client,
        provisioner,
        backoff: Backoff::new(config.backoff_initial, config.backoff_max),
        config,
        metrics,
        health,
        volumes: Recent::new(volumes.clone()),
        classes,
        listed,
    });

    let shutdown = shutdown.shared();
    let by_class = claims.clone();
    let claims_done = Controller::for_stream(claim_events, claims)
        .watches_stream(class_events, move |class| claims_of_class(&by_class, &class.name_any()))
        .reconcile_all_on(progress.look_again())
        .trigger_backoff(ShortBackoff::default())
        .with_config(controller::Config::default().concurrency(workers))
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_claim, never_fails, context.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "claim controller stream");
            }
        });
    let volumes_done = Controller::for_stream(volume_events, volumes)
        .reconcile_all_on(progress.look_again())
        .trigger_backoff(ShortBackoff::default())
        .with_config(controller::Config::default().concurrency(workers))
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_volume, never_fails, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "volume controller stream");
            }
        });
    // Both end together on shutdown; one that ends alone ends the controller, and with it the
    // process (see `runtime`), rather than leaving half of it dead.
    let (_, other) =
        futures::future::select(claims_done.boxed(), volumes_done.boxed()).await.factor_first();
    if shutdown.clone().now_or_never().is_some() {
        other.await;
    } else {
        tracing::error!("one of the volume controllers ended by itself");
    }
}

fn claims_of_class(
    store: &Store<PersistentVolumeClaim>,
    class: &str,
) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    store
        .state()
        .iter()
        .filter(|c| c.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()) == Some(class))
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

/// One claim's reconcile; a panic inside it fails this claim alone (Event, log line, metric).
async fn reconcile_claim<P: VolumeProvisioner>(
    claim: Arc<PersistentVolumeClaim>,
    ctx: Arc<Context<P>>,
) -> Result<Action, Infallible> {
    let (subject, key) = (claim.object_ref(&()), key(&*claim));
    match caught(claim_step(claim, ctx.clone())).await {
        Ok(action) => Ok(action),
        Err(panic) => Ok(ctx.report(&subject, &key, VolumeError::Panicked(panic)).await),
    }
}

async fn claim_step<P: VolumeProvisioner>(
    claim: Arc<PersistentVolumeClaim>,
    ctx: Arc<Context<P>>,
) -> Action {
    ctx.metrics.reconcile();
    if !awaits_volume(&claim, &ctx.config.provisioner_name) {
        // Before the caches hold their first list, a missing PV proves nothing.
        ctx.until_listed().await;
        let name = &ctx.config.provisioner_name;
        if let Some(wanted) = expansion::wanted(&claim, &ctx.volumes, name, ctx.node()) {
            return ctx.resizer().expand(&claim, wanted).await;
        }
        return Action::await_change();
    }
    ctx.until_listed().await;
    let key = key(&*claim);
    match provision(&claim, &ctx).await {
        Ok(action) => {
            ctx.backoff.reset(&key);
            ctx.health.permitted(RECONCILES);
            action
        }
        Err(error) => ctx.report(&claim.object_ref(&()), &key, error).await,
    }
}

/// Makes the claim's PV, unless it exists or the claim is not this instance's to serve.
async fn provision<P: VolumeProvisioner>(
    claim: &PersistentVolumeClaim,
    ctx: &Context<P>,
) -> Result<Action, VolumeError> {
    let node = selected_node(claim);
    match (ctx.node(), node) {
        // Another node's claim, or one no node was chosen for while we serve only our own.
        (Some(ours), Some(node)) if ours != node => return Ok(Action::await_change()),
        (Some(_), None) if !ctx.config.serve_unscheduled => return Ok(Action::await_change()),
        _ => {}
    }
    let Some(uid) = claim.uid() else { return Ok(Action::await_change()) };
    let pv_name = pv_name_for_claim(&uid);
    if ctx.volumes.get("", &pv_name).is_some() {
        // Made already; the binder binds it.
        return Ok(Action::await_change());
    }
    let class_name =
        claim.spec.as_ref().and_then(|s| s.storage_class_name.clone()).unwrap_or_default();
    let class = ctx
        .classes
        .get(&ObjectRef::new(&class_name))
        .ok_or_else(|| VolumeError::StorageClassNotFound(class_name.clone()))?;
    // The annotation is the tenant's to edit; the class is the administrator's word.
    if class.provisioner != ctx.config.provisioner_name
        || (waits_for_consumer(&class) && node.is_none())
    {
        return Ok(Action::await_change());
    }
    let options = options(claim, &class);
    ctx.provisioner.validate(&options).map_err(backend(Operation::Provision, &pv_name))?;
    let started = Instant::now();
    let provisioned = ctx.provisioner.provision(&options).await;
    ctx.metrics.observe_provisioning("provision", started.elapsed().as_secs_f64());
    let provisioned = provisioned.map_err(backend(Operation::Provision, &pv_name))?;
    let note = provisioned.note.clone();
    let pv = volume(&options, &class, provisioned, &ctx.config.provisioner_name, ctx.node());
    // Made even if the claim went meanwhile: the binder then releases the PV, and its asset goes
    // the way of its reclaim policy instead of being forgotten.
    match Api::<PersistentVolume>::all(ctx.client.clone()).create(&PostParams::default(), &pv).await
    {
        Ok(created) => {
            ctx.volumes.wrote(created);
        }
        // An earlier attempt made it and the cache has not seen it yet.
        Err(kube::Error::Api(status)) if status.code == 409 => return Ok(Action::await_change()),
        Err(e) => {
            // No PV records the asset: undone now, or a claim deleted before the next attempt
            // would leave it (and its path) behind for good. The next attempt makes it again.
            if let Err(undo) = ctx.provisioner.delete(&pv).await {
                tracing::warn!(claim = %key(claim), volume = %pv_name, error = %undo,
                    "could not remove a volume whose PersistentVolume was not created");
            }
            return Err(e.into());
        }
    }
    tracing::info!(claim = %key(claim), volume = %pv_name, "provisioned");
    let mut message = format!("volume {pv_name} provisioned");
    if let Some(note) = note {
        message.push_str("; ");
        message.push_str(&note);
    }
    let subject = claim.object_ref(&());
    publish(
        &ctx.events,
        &subject,
        EventType::Normal,
        "ProvisioningSucceeded",
        &message,
        "Provision",
    )
    .await;
    Ok(Action::await_change())
}

/// One volume's reconcile; a panic inside it fails this volume alone (Event, log line, metric).
async fn reconcile_volume<P: VolumeProvisioner>(
    cached: Arc<PersistentVolume>,
    ctx: Arc<Context<P>>,
) -> Result<Action, Infallible> {
    let (subject, name) = (cached.object_ref(&()), cached.name_any());
    match caught(volume_step(cached, ctx.clone())).await {
        Ok(action) => Ok(action),
        Err(panic) => Ok(ctx.report(&subject, &name, VolumeError::Panicked(panic)).await),
    }
}

async fn volume_step<P: VolumeProvisioner>(
    cached: Arc<PersistentVolume>,
    ctx: Arc<Context<P>>,
) -> Action {
    ctx.metrics.reconcile();
    let name = cached.name_any();
    // Our own writes win over a cache that has not seen them yet.
    let Some(pv) = ctx.volumes.get("", &name) else { return Action::await_change() };
    if !is_ours(&pv, &ctx.config.provisioner_name, ctx.node()) {
        return Action::await_change();
    }
    let fate = fate(&pv);
    if fate == Fate::Keep {
        return Action::await_change();
    }
    ctx.until_listed().await;
    match retire(&pv, fate, &ctx).await {
        Ok(action) => {
            ctx.backoff.reset(&name);
            ctx.health.permitted(RECONCILES);
            action
        }
        Err(error) => ctx.report(&pv.object_ref(&()), &name, error).await,
    }
}

/// Removes the asset where the fate says so, then the finalizer, then (when released) the PV.
async fn retire<P: VolumeProvisioner>(
    pv: &PersistentVolume,
    fate: Fate,
    ctx: &Context<P>,
) -> Result<Action, VolumeError> {
    let name = pv.name_any();
    if matches!(fate, Fate::Delete | Fate::DeleteAsset) {
        let started = Instant::now();
        let deleted = ctx.provisioner.delete(pv).await;
        ctx.metrics.observe_provisioning("delete", started.elapsed().as_secs_f64());
        match deleted {
            Ok(()) => tracing::info!(volume = %name, "asset deleted"),
            // Deleted by hand and refused for good: the PV goes, the asset stays as it is.
            Err(source) if source.is_permanent() && fate == Fate::DeleteAsset => {
                let error = backend(Operation::Delete, &name)(source);
                ctx.metrics.error(error.reason());
                tracing::warn!(volume = %name, reason = error.reason(), "{error}; the PV goes");
                let note = format!("{error}; the PV is let go and the asset left as it is");
                publish(
                    &ctx.events,
                    &pv.object_ref(&()),
                    EventType::Warning,
                    "AssetKept",
                    &note,
                    "Delete",
                )
                .await;
            }
            Err(source) => return Err(backend(Operation::Delete, &name)(source)),
        }
    }
    let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
    if pv.finalizers().iter().any(|f| f == FINALIZER) {
        match finalizer::remove(&api, pv, FINALIZER).await {
            Ok(written)
                if pv.meta().deletion_timestamp.is_some() && written.finalizers().is_empty() =>
            {
                ctx.volumes.deleted(&written);
            }
            Ok(written) => {
                ctx.volumes.wrote(written);
            }
            Err(e) if finalizer::is_not_found(&e) => {
                return Ok(Action::requeue(finalizer::LOOK_AGAIN));
            }
            Err(e) => return Err(e.into()),
        }
    }
    if fate == Fate::Delete {
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: pv.uid(), resource_version: None }),
            ..Default::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => ctx.volumes.deleted(pv),
            Err(e) if finalizer::is_not_found(&e) => {
                return Ok(Action::requeue(finalizer::LOOK_AGAIN));
            }
            Err(e) => return Err(e.into()),
        }
        tracing::info!(volume = %name, "volume deleted");
    }
    Ok(Action::await_change())
}

/// The error policy of reconciles that report every failure themselves and so never fail.
fn never_fails<K, P>(_: Arc<K>, never: &Infallible, _: Arc<Context<P>>) -> Action {
    match *never {}
}
