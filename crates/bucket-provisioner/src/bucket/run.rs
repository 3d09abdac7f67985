//! The bucket side's entry for a backend's `main`.

use std::future::Future;
use std::time::Duration;

use crate::Provisioner;
use crate::bucket::controller::{ControllerConfig, run_controller};
use crate::kubernetes::runtime::{ControllerArgs, Lead, RunError, Service, run_driven};
use crate::kubernetes::telemetry::Metrics;

/// Runs `provisioner` as `provisioner_name` until `shutdown` resolves: serves metrics and health,
/// runs `services`, waits for leadership when enabled, and drives the controller. Leadership
/// lost (another replica took over, or the lease could not be renewed through an outage) stops
/// the controller at once and the process campaigns again, keeping everything else it serves up.
pub async fn run<P: Provisioner>(
    provisioner: P,
    provisioner_name: &str,
    args: &ControllerArgs,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    services: Vec<Service>,
) -> Result<(), RunError> {
    let provisioner = std::sync::Arc::new(provisioner);
    let name = provisioner_name.to_owned();
    let usage_interval = Duration::from_secs(args.usage_interval_seconds.max(1));
    run_driven(provisioner_name, args, Metrics::new(), shutdown, services, move |lead: Lead| {
        let mut config = ControllerConfig::new(name.clone());
        config.workers = lead.workers;
        config.usage_interval = usage_interval;
        let stop = lead.stop.wait();
        run_controller(lead.client, provisioner.clone(), config, lead.metrics, lead.health, stop)
    })
    .await
}

/// Runs only metrics, health and `services` (a COSI driver, an S3 endpoint) until `shutdown`
/// resolves, with no objectbucket.io controller: for a backend serving another front alone.
/// Leadership is still campaigned for when enabled, so that switching the controller back on
/// needs no other change, but nothing waits on it.
pub async fn serve_only(
    provisioner_name: &str,
    args: &ControllerArgs,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    services: Vec<Service>,
) -> Result<(), RunError> {
    run_driven(provisioner_name, args, Metrics::new(), shutdown, services, |lead: Lead| {
        lead.stop.wait()
    })
    .await
}
