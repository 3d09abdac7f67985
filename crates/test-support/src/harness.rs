//! A bucket controller run inside the test process as the deployed one runs: under the
//! ServiceAccount and RBAC of its `deploy/` folder, never as an administrator, with short
//! backoff so that tests do not wait minutes. It can be stopped gracefully or crashed.

use std::time::Duration;

use bucket_provisioner::kubernetes::health::Health;
use bucket_provisioner::kubernetes::telemetry::Metrics;
use bucket_provisioner::{ControllerConfig, Provisioner, run_controller};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::{ControlPlane, Deployed, deployed_identity, unique_suffix};

/// A controller running in this process.
pub struct Harness {
    /// The provisioner name it answers to.
    pub provisioner: String,
    /// Its metrics.
    pub metrics: Metrics,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Harness {
    /// Starts a controller for `backend` under a fresh provisioner name, acting as `deployed`.
    pub fn start<P: Provisioner>(backend: P, deployed: Deployed) -> Harness {
        let name = format!("{}.test.objectbucket.io/{}", deployed.folder(), unique_suffix());
        Self::start_as(backend, &name, deployed)
    }

    /// Starts a controller for `backend` answering to `provisioner`, acting as `deployed`:
    /// backoff from 100 ms to 2 s, usage reported every 300 ms.
    pub fn start_as<P: Provisioner>(backend: P, provisioner: &str, deployed: Deployed) -> Harness {
        let mut config = ControllerConfig::new(provisioner);
        config.backoff_initial = Duration::from_millis(100);
        config.backoff_max = Duration::from_secs(2);
        config.usage_interval = Duration::from_millis(300);
        Self::start_with(backend, config, deployed)
    }

    /// Starts a controller for `backend` configured as `config` says (the deployed defaults of
    /// [`ControllerConfig::new`], say), acting as `deployed`.
    pub fn start_with<P: Provisioner>(
        backend: P,
        config: ControllerConfig,
        deployed: Deployed,
    ) -> Harness {
        let provisioner = config.provisioner_name.clone();
        let metrics = Metrics::new();
        let (stop, stopped) = oneshot::channel::<()>();
        let controller_metrics = metrics.clone();
        let task = tokio::spawn(async move {
            let identity = deployed_identity(ControlPlane::shared(), deployed)
                .await
                .expect("the deployed identity");
            let client = identity.client().await;
            let stop = async move {
                let _ = stopped.await;
            };
            run_controller(client, backend, config, controller_metrics, Health::default(), stop)
                .await;
        });
        Harness { provisioner, metrics, stop: Some(stop), task }
    }

    /// Kills the controller wherever it is, as a crash would.
    pub fn crash(mut self) {
        self.stop.take();
        self.task.abort();
    }

    /// Stops the controller gracefully and waits for it.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// How many reconciles have started.
    pub fn reconciles(&self) -> u64 {
        self.metrics
            .encode()
            .lines()
            .find(|l| l.starts_with("bucket_provisioner_reconciles_total"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.task.abort();
    }
}
