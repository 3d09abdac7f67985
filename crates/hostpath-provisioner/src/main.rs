//! `hostpath-bucket-provisioner`: buckets as directories under `--root`, served over the S3
//! endpoint on `--s3-listen`, provisioned for every claim whose StorageClass names this provisioner.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bucket_provisioner::runtime::{
    ControllerArgs, Service, hostname, init_logging, shutdown_signal,
};
use clap::Parser;
use cosi_driver::CosiArgs;
use futures::FutureExt;
use hostpath_provisioner::admin_secret::{ADMIN_SECRET_WATCH, follow_admin_secret};
use hostpath_provisioner::halves::controller_half::through_socket;
use hostpath_provisioner::halves::endpoint_alone::EndpointAlone;
use hostpath_provisioner::halves::one_process::endpoint_service;
use hostpath_provisioner::service_accounts::{SERVICE_ACCOUNT_WATCH, follow_service_accounts};
use hostpath_provisioner::token_review::DEFAULT_AUDIENCE;
use hostpath_provisioner::{
    AdminCredentials, BucketStore, DEFAULT_COSI_DRIVER_NAME, HostPathConfig, HostPathProvisioner,
    StoreLink,
};
use s3_endpoint::s3::{DEFAULT_LIFECYCLE_BUDGET, LifecycleSchedule};

/// Object buckets as directories on this node, with an S3 endpoint and per-claim keys.
#[derive(Parser, Debug)]
#[command(name = "hostpath-bucket-provisioner", version)]
struct Args {
    /// Directory holding the buckets and the provisioner's records.
    #[arg(long, env = "BUCKET_ROOT", default_value = "/var/lib/bucket-provisioner")]
    root: PathBuf,
    /// The StorageClass `provisioner` value to answer to.
    #[arg(long, env = "PROVISIONER_NAME", default_value = "hostpath.objectbucket.io/bucket")]
    provisioner_name: String,
    /// Who owns the buckets created here; only this identity deletes them
    /// (default: $NODE_NAME, else the host name).
    #[arg(long, env = "NODE_NAME")]
    identity: Option<String>,
    /// Address the S3 endpoint listens on.
    #[arg(long, env = "S3_LISTEN", default_value = "0.0.0.0:9000")]
    s3_listen: SocketAddr,
    /// Host name consumers use for the endpoint (`BUCKET_HOST`), e.g. the Service's DNS name.
    #[arg(long, env = "ENDPOINT_HOST", default_value = "localhost")]
    endpoint_host: String,
    /// Port consumers use for the endpoint (`BUCKET_PORT`; default: the `--s3-listen` port).
    #[arg(long, env = "ENDPOINT_PORT")]
    endpoint_port: Option<u16>,
    /// Seconds between two passes applying the buckets' lifecycle rules (one also runs at
    /// start), 60 to 86400.
    #[arg(long, env = "LIFECYCLE_INTERVAL_SECONDS", default_value_t = 3600,
        value_parser = clap::value_parser!(u64).range(60..=86400))]
    lifecycle_interval_seconds: u64,
    /// Objects (versions and uploads count too) one lifecycle pass examines at most; a bucket
    /// left unfinished goes on at the next pass. At least 1000.
    #[arg(long, env = "LIFECYCLE_BUDGET", default_value_t = DEFAULT_LIFECYCLE_BUDGET,
        value_parser = clap::value_parser!(u64).range(1000..))]
    lifecycle_budget: u64,
    /// Region reported to consumers.
    #[arg(long, env = "REGION", default_value = "us-east-1")]
    region: String,
    /// Secret (`namespace/name`, keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) holding the
    /// operator credential, which may create and delete buckets and use every bucket. Changes to
    /// the Secret take effect without a restart.
    #[arg(long, env = "ADMIN_SECRET", conflicts_with = "admin_credentials_file")]
    admin_secret: Option<String>,
    /// File with `AWS_ACCESS_KEY_ID=...` and `AWS_SECRET_ACCESS_KEY=...` lines holding the
    /// operator credential. Without this or --admin-secret there is no operator credential.
    #[arg(long, env = "ADMIN_CREDENTIALS_FILE")]
    admin_credentials_file: Option<PathBuf>,
    /// Audience a pod's projected ServiceAccount token must be minted for to be traded, on the
    /// endpoint's STS, for short-lived credentials of its claim's bucket.
    #[arg(long, env = "WEB_IDENTITY_AUDIENCE", default_value = DEFAULT_AUDIENCE)]
    web_identity_audience: String,
    /// Run only the S3 endpoint, owning the store under `--root`, with no Kubernetes client:
    /// the controller (`--store-socket`, another container of the pod) makes buckets and keys
    /// through this Unix socket. Token reviews for its STS go to `--review-socket`. The
    /// controller's flags (what consumers are told, the audience) are refused here.
    #[arg(long, env = "SERVE_STORE", value_name = "SOCKET", requires = "review_socket",
        conflicts_with_all = ["store_socket", "admin_secret", "endpoint_host", "endpoint_port",
            "region", "web_identity_audience"])]
    serve_store: Option<PathBuf>,
    /// Run only the controller, acting on the store of the endpoint behind this Unix socket
    /// (see `--serve-store`); it opens no store and serves no S3, so the endpoint's flags
    /// (`--root`, `--s3-listen`, lifecycle) are refused here. It answers the endpoint's token
    /// reviews on `--review-socket`.
    #[arg(
        long,
        env = "STORE_SOCKET",
        value_name = "SOCKET",
        requires = "review_socket",
        conflicts_with_all = ["admin_credentials_file", "root", "s3_listen",
            "lifecycle_interval_seconds", "lifecycle_budget"]
    )]
    store_socket: Option<PathBuf>,
    /// Unix socket of token reviews between the two halves (`--serve-store`, `--store-socket`):
    /// the controller answers on it, the endpoint asks.
    #[arg(long, env = "REVIEW_SOCKET", value_name = "SOCKET")]
    review_socket: Option<PathBuf>,
    /// Only hand `--root` to this user (`UID:GID`, mode 0700) and exit: the init container's job,
    /// run as root with CHOWN and FOWNER.
    #[arg(long, value_name = "UID:GID")]
    prepare_root_for: Option<hostpath_provisioner::prepare::Owner>,
    #[command(flatten)]
    controller: ControllerArgs,
    #[command(flatten)]
    cosi: CosiArgs,
}

#[tokio::main]
async fn main() -> MainResult {
    let args = Args::parse();
    init_logging(args.controller.log_format);
    if let Some(owner) = args.prepare_root_for {
        hostpath_provisioner::prepare::prepare_root(&args.root, owner)
            .map_err(|e| format!("preparing the bucket root {}: {e}", args.root.display()))?;
        tracing::info!(root = %args.root.display(), %owner, "bucket root prepared");
        return Ok(());
    }
    if let Some(socket) = args.serve_store.clone() {
        return serve_store_alone(&args, &socket).await;
    }
    let (store, s3_port, mut services) = match &args.store_socket {
        Some(socket) => {
            let review = args.review_socket.clone().unwrap_or_default();
            let audience = args.web_identity_audience.clone();
            let every = Duration::from_secs(args.controller.usage_interval_seconds);
            let (store, services) = through_socket(socket, &review, audience, every).await?;
            (store, args.endpoint_port.unwrap_or(DEFAULT_S3_PORT), services)
        }
        None => {
            let store = open_store(&args).await?;
            let listener = tokio::net::TcpListener::bind(args.s3_listen)
                .await
                .map_err(|e| format!("S3 endpoint on {}: {e}", args.s3_listen))?;
            let s3_address = listener.local_addr()?;
            tracing::info!(address = %s3_address, "serving S3");
            let audience = args.web_identity_audience.clone();
            let endpoint =
                endpoint_service(store.clone(), listener, lifecycle_schedule(&args), audience);
            let port = args.endpoint_port.unwrap_or(s3_address.port());
            (StoreLink::Local(store), port, vec![endpoint])
        }
    };
    if let Some(reference) = &args.admin_secret {
        let (namespace, name) = reference
            .split_once('/')
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
            .ok_or_else(|| format!("--admin-secret {reference:?} is not namespace/name"))?;
        let (namespace, name, store) = (namespace.to_owned(), name.to_owned(), store.clone());
        services.push(Service::new(ADMIN_SECRET_WATCH, move |process| {
            follow_admin_secret(process, namespace, name, store)
        }));
    }

    // Short-lived credentials, for claims and for COSI v1alpha1 accesses of IAM: sessions of a
    // deleted (or re-made) ServiceAccount end with it.
    let accounts_store = store.clone();
    services.push(Service::new(SERVICE_ACCOUNT_WATCH, move |process| {
        follow_service_accounts(process, accounts_store)
    }));

    let config = HostPathConfig {
        host: args.endpoint_host.clone(),
        port: s3_port,
        region: args.region.clone(),
    };
    let provisioner = HostPathProvisioner::new(store, config);
    let (name, cosi) = (&args.provisioner_name, &args.cosi);
    let shutdown = shutdown_signal();
    cosi_driver::run(
        provisioner,
        name,
        &args.controller,
        cosi,
        DEFAULT_COSI_DRIVER_NAME,
        shutdown,
        services,
    )
    .await?;
    Ok(())
}

/// The port consumers use when the endpoint runs apart and `--endpoint-port` says nothing.
const DEFAULT_S3_PORT: u16 = 9000;

type MainResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

async fn open_store(
    args: &Args,
) -> Result<Arc<BucketStore>, Box<dyn std::error::Error + Send + Sync>> {
    let identity = args.identity.clone().unwrap_or_else(hostname);
    let root = args.root.clone();
    let store = tokio::task::spawn_blocking(move || BucketStore::open(root, identity))
        .await?
        .map_err(|e| format!("opening the bucket root {}: {e}", args.root.display()))?;
    let store = Arc::new(store);
    tracing::info!(root = %args.root.display(), identity = store.identity(), "bucket store open");
    if let Some(path) = &args.admin_credentials_file {
        store.set_admin(Some(AdminCredentials::from_file(path)?));
        tracing::info!(file = %path.display(), "operator credential loaded");
    }
    Ok(store)
}

fn lifecycle_schedule(args: &Args) -> LifecycleSchedule {
    LifecycleSchedule::every(Duration::from_secs(args.lifecycle_interval_seconds))
        .with_budget(args.lifecycle_budget)
}

/// The endpoint alone (`--serve-store`): no Kubernetes client is ever made.
async fn serve_store_alone(args: &Args, socket: &std::path::Path) -> MainResult {
    let store = open_store(args).await?;
    let alone = EndpointAlone {
        s3_listen: args.s3_listen,
        store_socket: socket.to_owned(),
        review_socket: args.review_socket.clone().unwrap_or_default(),
        metrics_address: args.controller.metrics_address,
        lifecycle: lifecycle_schedule(args),
    };
    alone.serve(store, shutdown_signal().shared()).await?;
    Ok(())
}
