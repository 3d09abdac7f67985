//! The volume side's entry for a backend's `main`.

use std::future::Future;

use crate::{VolumeControllerConfig, VolumeProvisioner, run_volume_controller};
use provisioner_runtime::runtime::{ControllerArgs, Lead, RunError, run_driven};
use provisioner_runtime::telemetry::Metrics;

/// Runs the volume backend `provisioner` as the bucket side's `run` runs a bucket backend: `config` says which
/// provisioner name it answers to and which node it serves; `--workers` sets its workers.
pub async fn run_volumes<P: VolumeProvisioner>(
    provisioner: P,
    config: VolumeControllerConfig,
    args: &ControllerArgs,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    let provisioner = std::sync::Arc::new(provisioner);
    let name = config.provisioner_name.clone();
    run_driven(&name, args, Metrics::for_volumes(), shutdown, Vec::new(), move |lead: Lead| {
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
