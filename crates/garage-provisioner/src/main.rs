//! `garage-bucket-provisioner`: answers ObjectBucketClaims whose StorageClass names this
//! provisioner with buckets on a Garage cluster and an access key per claim.

use std::sync::Arc;
use std::time::Duration;

use bucket_provisioner::runtime::{self, ControllerArgs, Service, init_logging, shutdown_signal};
use clap::Parser;
use cosi_driver::{CosiArgs, CosiRunError};
use garage_provisioner::{
    DEFAULT_COSI_DRIVER_NAME, DEFAULT_PROVISIONER_NAME, GarageProvisioner, KubeCluster,
};

/// Provisions object buckets on a Garage cluster.
#[derive(Parser)]
#[command(name = "garage-bucket-provisioner", version, about)]
struct Args {
    /// The StorageClass `provisioner` value to answer to.
    #[arg(long, env = "PROVISIONER_NAME", default_value = DEFAULT_PROVISIONER_NAME)]
    provisioner_name: String,
    #[command(flatten)]
    controller: ControllerArgs,
    #[command(flatten)]
    cosi: CosiArgs,
}

#[tokio::main]
async fn main() -> Result<(), CosiRunError> {
    let args = Args::parse();
    init_logging(args.controller.log_format);
    let cluster = Arc::new(KubeCluster::new(runtime::client(&args.controller).await?));
    let backend = Arc::new(GarageProvisioner::new(cluster.clone()).with_class_parameters(cluster));
    let interval = Duration::from_secs(args.controller.usage_interval_seconds.max(1));
    let usage = usage_loop(backend.clone(), interval);
    let shutdown = shutdown_signal();
    let (name, cosi) = (&args.provisioner_name, &args.cosi);
    cosi_driver::run(
        backend,
        name,
        &args.controller,
        cosi,
        DEFAULT_COSI_DRIVER_NAME,
        shutdown,
        vec![usage],
    )
    .await
}

/// Refreshes what bound buckets hold once per usage interval, so that the library's usage
/// reports (asked from memory) follow Garage's counts.
fn usage_loop(backend: Arc<GarageProvisioner>, interval: Duration) -> Service {
    Service::new("garage-usage", move |process| async move {
        let stop = process.stop.wait();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return Ok::<(), String>(()),
                () = tokio::time::sleep(interval) => backend.refresh_usage(interval * 3).await,
            }
        }
    })
}
