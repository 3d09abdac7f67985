//! What every provisioner binary shares: common flags, the Kubernetes client, the metrics and
//! health endpoints, leader election and graceful shutdown. A backend's `main` parses its own
//! flags (flattening [`ControllerArgs`]) and calls [`run`] (buckets) or [`run_volumes`]
//! (volumes); both are [`run_driven`] around their controller.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::watch;

use crate::Provisioner;
use crate::controller::{ControllerConfig, run_controller};
use crate::leader::{LeaderElector, LeaderGuard, LeaseConfig};
use crate::telemetry::{Health, Metrics, serve};
use crate::volume::{VolumeControllerConfig, VolumeProvisioner, run_volume_controller};

/// Flags shared by every provisioner binary.
#[derive(clap::Args, Clone, Debug)]
pub struct ControllerArgs {
    /// kubeconfig file to use; without it the in-cluster configuration (or $KUBECONFIG's
    /// default) is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Address of the /metrics, /healthz and /readyz endpoints.
    #[arg(long, env = "METRICS_ADDRESS", default_value = "0.0.0.0:8080")]
    pub metrics_address: SocketAddr,
    /// How many claims are reconciled concurrently.
    #[arg(long, env = "WORKERS", default_value_t = 4)]
    pub workers: u16,
    /// Elect a leader through a Lease so that only one replica acts.
    #[arg(long, env = "LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease (default: $POD_NAMESPACE, else `default`).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader-election Lease (default: derived from the provisioner name).
    #[arg(long, env = "LEADER_ELECTION_NAME")]
    pub leader_election_name: Option<String>,
    /// This replica's identity in the election (default: $POD_NAME, else the host name).
    #[arg(long, env = "POD_NAME")]
    pub leader_identity: Option<String>,
    /// Seconds a leader's lease stays valid without renewal.
    #[arg(long, env = "LEADER_LEASE_SECONDS", default_value_t = 15)]
    pub leader_lease_seconds: u64,
    /// Seconds between reports of bound buckets' usage (metrics, and ObjectBucket status where
    /// it changed), for backends that report it.
    #[arg(long, env = "USAGE_INTERVAL_SECONDS", default_value_t = 60)]
    pub usage_interval_seconds: u64,
}

/// Why a provisioner process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No Kubernetes client could be built.
    #[error("Kubernetes configuration: {0}")]
    Config(String),
    /// The Kubernetes API failed in a way retrying does not fix.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The metrics address could not be bound.
    #[error("metrics endpoint on {address}: {source}")]
    Metrics {
        /// The address.
        address: SocketAddr,
        /// What failed.
        source: std::io::Error,
    },
}

/// Sets up logging from `RUST_LOG` (default `info`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).try_init();
}

/// A client from `--kubeconfig`, or the inferred configuration.
pub async fn client(kubeconfig: Option<&PathBuf>) -> Result<Client, RunError> {
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|e| RunError::Config(e.to_string()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| RunError::Config(e.to_string()))?
        }
        None => kube::Config::infer().await.map_err(|e| RunError::Config(e.to_string()))?,
    };
    Client::try_from(config).map_err(RunError::Kube)
}

/// A future that resolves on SIGTERM or Ctrl-C.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + Sync + 'static {
    let (tx, mut rx) = watch::channel(false);
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("installing the SIGTERM handler");
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down");
        let _ = tx.send(true);
    });
    async move {
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// How long reconciles still running when leadership is lost may take to finish before they are
/// dropped (every step is crash-safe, so dropping one is like a crash at that point).
const DRAIN_AFTER_LOSS: Duration = Duration::from_secs(10);
/// The name the controller loop beats under on [`Health`], and how often it does.
const CONTROLLER_LOOP: &str = "controller";
const CONTROLLER_BEAT: Duration = Duration::from_secs(5);

/// Everything a controller gets from the runtime for one term of leadership.
#[derive(Clone)]
pub struct Lead {
    /// The Kubernetes client.
    pub client: Client,
    /// The process's metrics.
    pub metrics: Metrics,
    /// The process's liveness, to report watches to.
    pub health: Health,
    /// How many objects may be reconciled at once (`--workers`).
    pub workers: u16,
    /// Resolves when the controller must stop: shutdown, or leadership lost.
    pub stop: Stop,
}

/// Resolves when the controller must stop; clones resolve together.
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// A future resolving once the stop is given.
    pub fn wait(&self) -> impl Future<Output = ()> + Send + Sync + use<> {
        let mut stop = self.0.clone();
        async move {
            let _ = stop.wait_for(|stop| *stop).await;
        }
    }
}

/// Runs `provisioner` as `provisioner_name` until `shutdown` resolves: serves metrics and health,
/// waits for leadership when enabled, and drives the controller. Leadership lost (another replica
/// took over, or the lease could not be renewed through an outage) stops the controller at once
/// and the process campaigns again, keeping everything else it serves up.
pub async fn run<P: Provisioner>(
    provisioner: P,
    provisioner_name: &str,
    args: &ControllerArgs,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    let provisioner = std::sync::Arc::new(provisioner);
    let name = provisioner_name.to_owned();
    let usage_interval = Duration::from_secs(args.usage_interval_seconds.max(1));
    run_driven(provisioner_name, args, shutdown, move |lead: Lead| {
        let mut config = ControllerConfig::new(name.clone());
        config.workers = lead.workers;
        config.usage_interval = usage_interval;
        let stop = lead.stop.wait();
        run_controller(lead.client, provisioner.clone(), config, lead.metrics, lead.health, stop)
    })
    .await
}

/// Runs the volume backend `provisioner` as [`run`] runs a bucket backend: `config` says which
/// provisioner name it answers to and which node it serves; `--workers` sets its workers.
pub async fn run_volumes<P: VolumeProvisioner>(
    provisioner: P,
    config: VolumeControllerConfig,
    args: &ControllerArgs,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    let provisioner = std::sync::Arc::new(provisioner);
    let name = config.provisioner_name.clone();
    run_driven(&name, args, shutdown, move |lead: Lead| {
        let mut config = config.clone();
        config.workers = lead.workers;
        let stop = lead.stop.wait();
        run_volume_controller(
            lead.client,
            provisioner.clone(),
            config,
            lead.metrics,
            lead.health,
            stop,
        )
    })
    .await
}

/// The runtime around any controller: serves metrics and health, waits for leadership when
/// enabled (a Lease named after `provisioner_name`), and calls `drive` for each term of
/// leadership; the future it returns must end soon after [`Lead::stop`] resolves. Leadership
/// lost stops the controller at once and the process campaigns again.
pub async fn run_driven<D, F>(
    provisioner_name: &str,
    args: &ControllerArgs,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    drive: D,
) -> Result<(), RunError>
where
    D: Fn(Lead) -> F,
    F: Future<Output = ()> + Send,
{
    let client = client(args.kubeconfig.as_ref()).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = Stop(stop_rx);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });

    let metrics = Metrics::new();
    let health = Health::default();
    let listener = tokio::net::TcpListener::bind(args.metrics_address)
        .await
        .map_err(|source| RunError::Metrics { address: args.metrics_address, source })?;
    tracing::info!(address = %listener.local_addr().map_err(|source| RunError::Metrics {
        address: args.metrics_address, source })?, "serving /metrics, /healthz and /readyz");
    let server = tokio::spawn(serve(listener, metrics.clone(), health.clone(), stopped.wait()));

    client.apiserver_version().await?;
    health.set_ready(true);

    let elector = args.leader_elect.then(|| {
        LeaderElector::new(client.clone(), lease_config(provisioner_name, args))
            .reporting_to(health.clone())
    });
    let workers = args.workers.max(1);
    let result = loop {
        let guard = match &elector {
            Some(elector) => {
                tracing::info!("waiting for leadership");
                tokio::select! {
                    guard = elector.acquire() => match guard {
                        Ok(guard) => Some(guard),
                        Err(e) => break Err(e.into()),
                    },
                    _ = stopped.wait() => break Ok(()),
                }
            }
            None => None,
        };
        tracing::info!(provisioner = provisioner_name, workers, "controller starting");
        let (halt_tx, halt_rx) = watch::channel(false);
        let lead_ = Lead {
            client: client.clone(),
            metrics: metrics.clone(),
            health: health.clone(),
            workers,
            stop: Stop(halt_rx),
        };
        let lost = lead(drive(lead_), halt_tx, &health, guard.as_ref(), stopped.wait()).await;
        health.forget(CONTROLLER_LOOP);
        match (guard, lost) {
            (Some(_), true) => {
                // Not ours to release any more; campaign again.
                tracing::warn!("leadership lost; the controller stopped and campaigns again");
            }
            (Some(guard), false) => {
                guard.release().await;
                break Ok(());
            }
            (None, _) => break Ok(()),
        }
    };
    health.forget(crate::leader::ELECTION_LOOP);
    let _ = server.await;
    result
}

/// Drives `controller` until `stopped` resolves (false) or leadership is lost (true); `halt`
/// tells the controller to stop.
async fn lead(
    controller: impl Future<Output = ()> + Send,
    halt: watch::Sender<bool>,
    health: &Health,
    guard: Option<&LeaderGuard>,
    stopped: impl Future<Output = ()> + Send + Sync + 'static,
) -> bool {
    tokio::pin!(controller);
    tokio::pin!(stopped);
    let lost = async {
        match guard {
            Some(guard) => guard.lost().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(lost);
    let mut beat = tokio::time::interval(CONTROLLER_BEAT);
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = &mut controller => return false,
            _ = &mut stopped, if !stopping => {
                // A graceful stop: running reconciles finish, then the controller returns.
                stopping = true;
                let _ = halt.send(true);
            }
            _ = &mut lost => break,
            _ = beat.tick() => health.beat(CONTROLLER_LOOP, CONTROLLER_BEAT * 6),
        }
    }
    // Stop acting at once: no new reconciles start, running ones get a moment to finish.
    let _ = halt.send(true);
    if tokio::time::timeout(DRAIN_AFTER_LOSS, controller).await.is_err() {
        tracing::warn!("reconciles still running after leadership was lost were dropped");
    }
    true
}

fn lease_config(provisioner_name: &str, args: &ControllerArgs) -> LeaseConfig {
    let namespace = args
        .leader_election_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "default".into());
    let name = args.leader_election_name.clone().unwrap_or_else(|| lease_name(provisioner_name));
    let identity = args.leader_identity.clone().unwrap_or_else(hostname);
    let lease = Duration::from_secs(args.leader_lease_seconds.max(2));
    LeaseConfig {
        namespace,
        name,
        identity,
        lease_duration: lease,
        renew_interval: lease / 3,
        retry_interval: lease / 5,
    }
}

/// A valid Lease name from a provisioner name such as `example.com/hostpath-bucket`.
pub fn lease_name(provisioner_name: &str) -> String {
    let cleaned: String = provisioner_name
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' })
        .collect();
    let trimmed: String =
        cleaned.trim_matches(|c: char| !c.is_ascii_alphanumeric()).chars().take(240).collect();
    format!("{trimmed}-leader")
}

/// This machine's name: `$HOSTNAME`, else `/etc/hostname`, else one made from the process id.
pub fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("pid-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_valid_object_names() {
        assert_eq!(lease_name("Example.com/HostPath_Bucket"), "example.com-hostpath-bucket-leader");
    }
}
