//! `s3-bucket-provisioner`: answers ObjectBucketClaims whose StorageClass names this provisioner
//! with buckets on AWS S3 (or an S3-compatible service) and an IAM user per claim.

use std::sync::Arc;

use bucket_provisioner::runtime::{self, ControllerArgs, init_logging, shutdown_signal};
use clap::Parser;
use cosi_driver::{CosiArgs, CosiRunError};
use s3_provisioner::{
    DEFAULT_COSI_DRIVER_NAME, DEFAULT_PROVISIONER_NAME, KubeCluster, KubeKeyRecords, S3Provisioner,
};

/// Provisions object buckets on AWS S3 or an S3-compatible service.
#[derive(Parser)]
#[command(name = "s3-bucket-provisioner", version, about)]
struct Args {
    /// The StorageClass `provisioner` value to answer to.
    #[arg(long, env = "PROVISIONER_NAME", default_value = DEFAULT_PROVISIONER_NAME)]
    provisioner_name: String,
    /// How often one S3 or IAM request is attempted (throttling, 5xx and network errors are
    /// retried with backoff) before the claim's reconcile is retried later (1 to 20).
    #[arg(long, env = "AWS_MAX_ATTEMPTS", default_value_t = 4,
        value_parser = clap::value_parser!(u32).range(1..=20))]
    aws_max_attempts: u32,
    #[command(flatten)]
    controller: ControllerArgs,
    #[command(flatten)]
    cosi: CosiArgs,
}

#[tokio::main]
async fn main() -> Result<(), CosiRunError> {
    let args = Args::parse();
    init_logging(args.controller.log_format);
    // The Kubernetes side of owner credentials lives here, not in the backend.
    let client = runtime::client(&args.controller).await?;
    let cluster = Arc::new(KubeCluster::new(client.clone()));
    let mut backend = S3Provisioner::new(cluster.clone())
        .with_class_parameters(cluster)
        .with_max_attempts(args.aws_max_attempts);
    if let Some(parameters) = args.cosi.store_parameters()? {
        backend = backend
            .with_standalone(&parameters)
            .map_err(|e| CosiRunError::Parameters(e.to_string()))?;
        // Access keys are recorded beside the owner's keys, else in the driver's namespace.
        let namespace = parameters.get("secretNamespace").cloned().or_else(|| {
            std::env::var("POD_NAMESPACE").ok().filter(|namespace| !namespace.is_empty())
        });
        match namespace {
            Some(namespace) => {
                let records = KubeKeyRecords::new(client, &namespace);
                backend = backend.with_key_records(Arc::new(records));
            }
            None => tracing::warn!(
                "no secretNamespace parameter and no POD_NAMESPACE: COSI access keys are not \
                 recorded, so a repeated grant replaces the key consumers hold"
            ),
        }
    }
    let shutdown = shutdown_signal();
    let (name, cosi) = (&args.provisioner_name, &args.cosi);
    cosi_driver::run(
        backend,
        name,
        &args.controller,
        cosi,
        DEFAULT_COSI_DRIVER_NAME,
        shutdown,
        Vec::new(),
    )
    .await
}
