//! What every provisioner binary shares: common flags, the Kubernetes client, the metrics and
//! health endpoints, leader election, the supervision of every loop, and graceful shutdown. A
//! backend's `main` parses its own flags (flattening [`ControllerArgs`]) and calls `bucket_provisioner::runtime::run`
//! (buckets) or `volume_provisioner::runtime::run_volumes` (volumes); both are [`run_driven`] around their controller.
//!
//! Every loop of the process (the metrics endpoint, the term-after-term of leadership and its
//! controller, and the backend's own [`Service`]s) runs under one supervisor. None of them stops
//! on an error it can outlive: they retry with capped backoff and report on `/healthz` what
//! lasts. A loop that ends anyway (it returned, failed or panicked) ends the process with a
//! non-zero exit and a last log line naming it, so the kubelet restarts it: never a live
//! process with a dead loop.

use std::fmt::Display;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use clap::value_parser;
use futures::FutureExt;
use kube::Client;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::health::{Health, Pulse};
use crate::leader::{LeaderElector, LeaderGuard, LeaseConfig};
use crate::log_limit::Throttle;
use crate::telemetry::{Metrics, serve};
use crate::unwind::caught;

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
    /// How many claims are reconciled concurrently (1 to 256).
    #[arg(long, env = "WORKERS", default_value_t = 4,
        value_parser = value_parser!(u16).range(1..=256))]
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
    /// Seconds a leader's lease stays valid without renewal (2 to 3600).
    #[arg(long, env = "LEADER_LEASE_SECONDS", default_value_t = 15,
        value_parser = seconds(2, 3600))]
    pub leader_lease_seconds: u64,
    /// Seconds between reports of bound buckets' usage (metrics, and ObjectBucket status where
    /// it changed), for backends that report it (1 to 86400).
    #[arg(long, env = "USAGE_INTERVAL_SECONDS", default_value_t = 60,
        value_parser = seconds(1, 86400))]
    pub usage_interval_seconds: u64,
    /// How log lines are written: `text`, or `json` (one object per line).
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Seconds the apiserver has to start answering a request (a watch: to start streaming)
    /// before it is abandoned and retried: a request the apiserver never answers must not
    /// hold a loop for ever (1 to 3600).
    #[arg(long, env = "API_TIMEOUT_SECONDS", default_value_t = 5,
        value_parser = seconds(1, 3600))]
    pub api_timeout_seconds: u64,
}

/// A flag of whole seconds from `least` to `most`: clap refuses anything else, naming the range,
/// so that no sum or product of them overflows a [`Duration`].
fn seconds(least: u64, most: u64) -> clap::builder::RangedU64ValueParser {
    value_parser!(u64).range(least..=most)
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
    /// A loop that must run for the life of the process ended.
    #[error("the {name} loop ended: {reason}")]
    LoopEnded {
        /// The loop.
        name: &'static str,
        /// How it ended.
        reason: String,
    },
}

/// How log lines are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, the event's fields (`claim` as
    /// `namespace/name`, `reason`, …) and `message`, and the reconcile's span (`object.ref`).
    Json,
}

/// Sets up logging in `format`, filtered by `RUST_LOG` (default `info`).
pub fn init_logging(format: LogFormat) {
    // The watcher logs every 403 it meets, and the client every failed request, on every retry;
    // our loops report failures themselves, once a minute (see `log_limit`).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "info,kube_runtime::watcher=error,kube_client::client::builder=off",
        )
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_span_list(false).try_init(),
    };
}

/// A client from `--kubeconfig`, or the inferred configuration, whose requests give up when the
/// apiserver has not started answering within `--api-timeout-seconds`.
pub async fn client(args: &ControllerArgs) -> Result<Client, RunError> {
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|e| RunError::Config(e.to_string()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| RunError::Config(e.to_string()))?
        }
        None => kube::Config::infer().await.map_err(|e| RunError::Config(e.to_string()))?,
    };
    // kube's own retry layer resends 429/503/504 answers up to 15 times, waiting up to 1000 s
    // in between, and says nothing: a freshly started apiserver answering 503 kept a watch away
    // for minutes. Every loop here retries with its own capped backoff and reports what fails.
    config.default_retry = false;
    let timeout = Duration::from_secs(args.api_timeout_seconds.max(1));
    // The timeout covers the call up to the response's head: a watch's stream may run for long.
    let builder = ClientBuilder::try_from(config)?;
    Ok(builder.with_layer(&tower::timeout::TimeoutLayer::new(timeout)).build())
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
/// How long the loops get to finish after the process is told to stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// The name the controller loop beats under on [`Health`], and how often it does.
const CONTROLLER_LOOP: &str = "controller";
const CONTROLLER_BEAT: Duration = Duration::from_secs(5);
/// How often the apiserver is tried at start-up until it answers.
const STARTUP_RETRY: Duration = Duration::from_secs(1);

/// Resolves when the process (or one term of leadership) must stop; clones resolve together.
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

    /// Whether the stop was given.
    pub fn is_given(&self) -> bool {
        *self.0.borrow()
    }
}

/// What every loop of one process shares.
#[derive(Clone)]
pub struct Process {
    /// The Kubernetes client.
    pub client: Client,
    /// The process's metrics.
    pub metrics: Metrics,
    /// The process's liveness.
    pub health: Health,
    /// Resolves when the process shuts down.
    pub stop: Stop,
}

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

type LoopFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// A loop a backend runs for the life of the process beside the controller, leader or not (an
/// S3 endpoint, the watch of a credential Secret). It gets the [`Process`] and must end only
/// after [`Process::stop`] resolved: if it ends before, the process exits.
pub struct Service {
    name: &'static str,
    start: Box<dyn FnOnce(Process) -> LoopFuture + Send>,
}

impl Service {
    /// The loop `name`, started with the process's [`Process`].
    pub fn new<F, Fut, E>(name: &'static str, start: F) -> Self
    where
        F: FnOnce(Process) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        let start = move |process| start(process).map(|r| r.map_err(|e| e.to_string())).boxed();
        Service { name, start: Box::new(start) }
    }
}

/// The runtime around any controller: serves metrics and health, runs `services`, waits for
/// leadership when enabled (a Lease named after `provisioner_name`), and calls `drive` for each
/// term of leadership; the future it returns must end soon after [`Lead::stop`] resolves, and
/// never before. `metrics` are served as they are: [`Metrics::new`] for buckets,
/// [`Metrics::for_volumes`] for volumes. Returns `Ok` after `shutdown`, or the first loop that
/// ended on its own.
pub async fn run_driven<D, F>(
    provisioner_name: &str,
    args: &ControllerArgs,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    services: Vec<Service>,
    drive: D,
) -> Result<(), RunError>
where
    D: Fn(Lead) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let client = client(args).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let stop = Stop(stop_rx);
    let health = Health::default();
    let listener = tokio::net::TcpListener::bind(args.metrics_address)
        .await
        .map_err(|source| RunError::Metrics { address: args.metrics_address, source })?;
    let address = listener
        .local_addr()
        .map_err(|source| RunError::Metrics { address: args.metrics_address, source })?;
    tracing::info!(%address, "serving /metrics, /healthz and /readyz");

    let process = Process { client, metrics, health, stop: stop.clone() };
    let mut loops = JoinSet::new();
    let server = serve(listener, process.metrics.clone(), process.health.clone(), stop.wait());
    supervise(&mut loops, "metrics endpoint", server.map(|r| r.map_err(|e| e.to_string())));
    for service in services {
        supervise(&mut loops, service.name, (service.start)(process.clone()));
    }
    let elector = args.leader_elect.then(|| {
        LeaderElector::new(process.client.clone(), lease_config(provisioner_name, args))
            .reporting_to(process.health.clone())
    });
    let terms = lead_terms(process.clone(), elector, args.workers.max(1), drive);
    supervise(&mut loops, CONTROLLER_LOOP, terms);

    let shutdown = shutdown.shared();
    let ended = tokio::select! {
        () = shutdown.clone() => None,
        ended = loops.join_next() => ended,
    };
    let _ = stop_tx.send(true);
    let ended = ended.map(|ended| match ended {
        Ok((name, Ok(()))) => (name, "it returned although nothing asked it to stop".to_owned()),
        Ok((name, Err(reason))) => (name, reason),
        Err(error) => ("unknown", error.to_string()),
    });
    if let Some((name, reason)) = &ended {
        tracing::error!(loop_name = name, %reason,
            "a loop that must run for the life of the process ended; stopping the process so \
             that it is restarted");
    }
    // Everything else winds down as on shutdown: reconciles finish, the Lease is released.
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while let Some(done) = loops.join_next().await {
            if let Ok((name, Err(reason))) = done {
                tracing::warn!(loop_name = name, %reason, "loop failed while stopping");
            }
        }
    });
    if drained.await.is_err() {
        tracing::warn!("loops still running {SHUTDOWN_GRACE:?} after the stop were dropped");
    }
    match ended {
        Some((name, reason)) => Err(RunError::LoopEnded { name, reason }),
        None => Ok(()),
    }
}

/// Runs `task` in `loops` as `name`; a panic comes back as the loop's error.
fn supervise(
    loops: &mut JoinSet<(&'static str, Result<(), String>)>,
    name: &'static str,
    task: impl Future<Output = Result<(), String>> + Send + 'static,
) {
    loops.spawn(async move {
        let outcome = caught(task).await;
        (name, outcome.unwrap_or_else(|panic| Err(format!("panicked: {panic}"))))
    });
}

/// Term after term of leadership (or one term without election) until the process stops.
async fn lead_terms<D, F>(
    process: Process,
    elector: Option<LeaderElector>,
    workers: u16,
    drive: D,
) -> Result<(), String>
where
    D: Fn(Lead) -> F,
    F: Future<Output = ()> + Send,
{
    let stop = &process.stop;
    if !wait_for_api(&process).await {
        return Ok(());
    }
    loop {
        let guard = match &elector {
            Some(elector) => {
                tracing::info!("waiting for leadership");
                tokio::select! {
                    guard = elector.acquire() => Some(guard),
                    () = stop.wait() => return Ok(()),
                }
            }
            None => None,
        };
        tracing::info!(workers, "controller starting");
        let (halt_tx, halt_rx) = watch::channel(false);
        let lead = Lead {
            client: process.client.clone(),
            metrics: process.metrics.clone(),
            health: process.health.clone(),
            workers,
            stop: Stop(halt_rx),
        };
        let pulse = process.health.pulse(CONTROLLER_LOOP, CONTROLLER_BEAT * 6);
        match term(drive(lead), halt_tx, &pulse, guard.as_ref(), stop.wait()).await {
            TermEnd::Stopped => {
                pulse.retire();
                if let Some(guard) = guard {
                    guard.release().await;
                }
                return Ok(());
            }
            TermEnd::Lost => {
                pulse.retire();
                // Not ours to release any more; campaign again.
                tracing::warn!("leadership lost; the controller stopped and campaigns again");
            }
            // The pulse is dropped unretired: /healthz says the controller loop ended.
            TermEnd::Ended => return Err("the controller stopped by itself".to_owned()),
        }
    }
}

/// Waits until the apiserver answers (ready from then on), retrying whatever fails; `false` if
/// the process was told to stop first.
async fn wait_for_api(process: &Process) -> bool {
    let pulse = process.health.pulse("start-up", STARTUP_RETRY * 30);
    let mut failures = Throttle::default();
    loop {
        pulse.beat();
        match process.client.apiserver_version().await {
            Ok(_) => {
                process.health.set_ready(true);
                process.health.api_succeeded();
                pulse.retire();
                return true;
            }
            Err(error) => {
                if let Some(held_back) = failures.allow() {
                    tracing::warn!(%error, repeats_since_last_report = held_back,
                        "the apiserver does not answer yet; retrying");
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(STARTUP_RETRY) => {}
            () = process.stop.wait() => {
                pulse.retire();
                return false;
            }
        }
    }
}

/// How one term of leadership ended.
#[derive(Debug, PartialEq, Eq)]
enum TermEnd {
    /// The process was told to stop and the controller finished.
    Stopped,
    /// Leadership was lost; the controller was halted.
    Lost,
    /// The controller returned although nothing asked it to.
    Ended,
}

/// Drives `controller` until `stopped` resolves or leadership is lost; `halt` tells the
/// controller to stop.
async fn term(
    controller: impl Future<Output = ()> + Send,
    halt: watch::Sender<bool>,
    pulse: &Pulse,
    guard: Option<&LeaderGuard>,
    stopped: impl Future<Output = ()> + Send,
) -> TermEnd {
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
            () = &mut controller => return if stopping { TermEnd::Stopped } else { TermEnd::Ended },
            () = &mut stopped, if !stopping => {
                // A graceful stop: running reconciles finish, then the controller returns.
                stopping = true;
                let _ = halt.send(true);
            }
            () = &mut lost, if !stopping => break,
            _ = beat.tick() => pulse.beat(),
        }
    }
    // Stop acting at once: no new reconciles start, running ones get a moment to finish.
    let _ = halt.send(true);
    if tokio::time::timeout(DRAIN_AFTER_LOSS, controller).await.is_err() {
        tracing::warn!("reconciles still running after leadership was lost were dropped");
    }
    TermEnd::Lost
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

    #[tokio::test]
    async fn a_controller_that_returns_by_itself_ends_its_term_as_ended() {
        let health = Health::default();
        let pulse = health.pulse(CONTROLLER_LOOP, Duration::from_secs(60));
        let (halt, _) = watch::channel(false);
        let ended = term(async {}, halt, &pulse, None, std::future::pending()).await;
        assert_eq!(ended, TermEnd::Ended);
        drop(pulse);
        assert_eq!(health.check().unwrap_err(), "the controller loop has ended");
    }

    #[tokio::test]
    async fn a_controller_asked_to_stop_ends_its_term_as_stopped() {
        let pulse = Health::default().pulse(CONTROLLER_LOOP, Duration::from_secs(60));
        let (halt, halted) = watch::channel(false);
        let controller = async move {
            let _ = Stop(halted).wait().await;
        };
        let ended = term(controller, halt, &pulse, None, async {}).await;
        assert_eq!(ended, TermEnd::Stopped);
    }

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        controller: ControllerArgs,
    }

    fn parse(flags: &[&str]) -> Result<ControllerArgs, String> {
        use clap::Parser;
        let argv = std::iter::once("provisioner").chain(flags.iter().copied());
        Flags::try_parse_from(argv).map(|f| f.controller).map_err(|e| e.to_string())
    }

    #[test]
    fn flags_out_of_their_range_are_refused_naming_it() {
        let refused = parse(&["--leader-lease-seconds", "18446744073709551615"]).unwrap_err();
        assert!(
            refused.contains("--leader-lease-seconds") && refused.contains("2..=3600"),
            "{refused}"
        );
        for (flag, value, range) in [
            ("--leader-lease-seconds", "1", "2..=3600"),
            ("--leader-lease-seconds", "3601", "2..=3600"),
            ("--usage-interval-seconds", "0", "1..=86400"),
            ("--usage-interval-seconds", "86401", "1..=86400"),
            ("--api-timeout-seconds", "0", "1..=3600"),
            ("--api-timeout-seconds", "18446744073709551615", "1..=3600"),
            ("--workers", "0", "1..=256"),
            ("--workers", "257", "1..=256"),
        ] {
            let refused = parse(&[flag, value]).unwrap_err();
            assert!(refused.contains(flag) && refused.contains(range), "{flag} {value}: {refused}");
        }
        let longest = parse(&[
            "--leader-lease-seconds=3600",
            "--usage-interval-seconds=86400",
            "--api-timeout-seconds=3600",
            "--workers=256",
        ])
        .unwrap();
        assert_eq!(
            (longest.leader_lease_seconds, longest.usage_interval_seconds, longest.workers),
            (3600, 86400, 256)
        );
    }

    /// Flags for a process whose apiserver never answers (nothing listens on port 1).
    fn args_without_an_apiserver() -> ControllerArgs {
        let kubeconfig = std::env::temp_dir().join(format!("kubeconfig-{}", std::process::id()));
        let yaml = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: \
                    https://127.0.0.1:1\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: c\n  \
                    context:\n    cluster: c\n    user: u\ncurrent-context: c\n";
        std::fs::write(&kubeconfig, yaml).unwrap();
        ControllerArgs {
            kubeconfig: Some(kubeconfig),
            metrics_address: "127.0.0.1:0".parse().unwrap(),
            workers: 1,
            leader_elect: true,
            leader_election_namespace: None,
            leader_election_name: None,
            leader_identity: None,
            leader_lease_seconds: 15,
            usage_interval_seconds: 60,
            log_format: LogFormat::Text,
            api_timeout_seconds: 1,
        }
    }

    /// An apiserver stand-in on loopback that answers every request with `answer` (or never,
    /// for `None`) and counts the requests; answers flags whose kubeconfig reaches it.
    async fn apiserver_answering(
        answer: Option<&'static str>,
    ) -> (ControllerArgs, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { continue };
                let counted = counted.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    while stream.read(&mut request).await.is_ok_and(|n| n > 0) {
                        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        match answer {
                            Some(answer) => stream.write_all(answer.as_bytes()).await.unwrap(),
                            None => std::future::pending().await,
                        }
                    }
                });
            }
        });
        let mut args = args_without_an_apiserver();
        let kubeconfig = std::env::temp_dir().join(format!("kubeconfig-{port}"));
        let yaml = std::fs::read_to_string(args.kubeconfig.as_ref().unwrap()).unwrap();
        std::fs::write(
            &kubeconfig,
            yaml.replace("https://127.0.0.1:1", &format!("http://127.0.0.1:{port}")),
        )
        .unwrap();
        args.kubeconfig = Some(kubeconfig);
        (args, seen)
    }

    #[tokio::test]
    async fn the_client_passes_a_503_on_at_once_instead_of_retrying_it_silently() {
        let unavailable = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
                           content-length: 2\r\n\r\n{}";
        let (args, seen) = apiserver_answering(Some(unavailable)).await;
        let client = client(&args).await.unwrap();
        let started = std::time::Instant::now();
        assert!(client.apiserver_version().await.is_err());
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "answered after {:?}",
            started.elapsed()
        );
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1, "asked once, not retried");
    }

    #[tokio::test]
    async fn the_client_gives_up_on_a_request_never_answered() {
        let (args, seen) = apiserver_answering(None).await;
        let client = client(&args).await.unwrap();
        let started = std::time::Instant::now();
        let answered = tokio::time::timeout(Duration::from_secs(10), client.apiserver_version());
        assert!(answered.await.expect("gave up by itself").is_err());
        let waited = started.elapsed();
        assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(3), "{waited:?}");
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_service_that_ends_ends_the_process_naming_it() {
        let args = args_without_an_apiserver();
        let services = vec![
            Service::new("endpoint", |process: Process| async move {
                process.stop.wait().await;
                Ok::<(), String>(())
            }),
            Service::new("quitter", |_| async { Err::<(), _>("its socket broke") }),
        ];
        let ended =
            run_driven("p", &args, Metrics::new(), std::future::pending(), services, |_| async {})
                .await;
        match ended {
            Err(RunError::LoopEnded { name: "quitter", reason }) => {
                assert_eq!(reason, "its socket broke");
            }
            other => panic!("the process went on or ended otherwise: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_shutdown_while_the_apiserver_is_away_ends_the_process_cleanly() {
        let args = args_without_an_apiserver();
        let shutdown = tokio::time::sleep(Duration::from_millis(300));
        let ended =
            run_driven("p", &args, Metrics::new(), shutdown, Vec::new(), |_| async {}).await;
        assert!(ended.is_ok(), "{ended:?}");
    }

    #[tokio::test]
    async fn a_supervised_loop_that_panics_reports_its_name_and_message() {
        let mut loops = JoinSet::new();
        supervise(&mut loops, "sweep", async { panic!("a bug") });
        supervise(&mut loops, "usage", async { Err("gave up".to_owned()) });
        let mut ended = Vec::new();
        while let Some(done) = loops.join_next().await {
            ended.push(done.unwrap());
        }
        ended.sort();
        assert_eq!(
            ended,
            [("sweep", Err("panicked: a bug".to_owned())), ("usage", Err("gave up".to_owned()))]
        );
    }
}
