//! The endpoint alone (`--serve-store`): S3 and STS for tenants, the store's calls for the
//! controller on a socket, `/metrics` and `/healthz`; no Kubernetes client is ever made.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bucket_provisioner::kubernetes::health::Health;
use bucket_provisioner::kubernetes::telemetry::{self, Metrics};
use s3_endpoint::BucketStore;
use s3_endpoint::s3::{EndpointMetrics, LifecycleSchedule, serve_endpoint, service};
use s3_endpoint::sts::RememberingVerifier;

use crate::review_link::ReviewLink;
use crate::store_link::bind_socket;
use crate::store_link::server::serve_store;

/// Where the endpoint alone listens, and what it runs.
#[derive(Debug, Clone)]
pub struct EndpointAlone {
    /// Tenants' S3 and STS.
    pub s3_listen: SocketAddr,
    /// The controller's store calls.
    pub store_socket: PathBuf,
    /// Where token reviews are asked (the controller answers).
    pub review_socket: PathBuf,
    /// `/metrics`, `/healthz` and `/readyz`.
    pub metrics_address: SocketAddr,
    /// The buckets' lifecycle passes.
    pub lifecycle: LifecycleSchedule,
}

impl EndpointAlone {
    /// Serves `store` until `stop` completes; a socket or port that cannot be bound is an error
    /// naming it.
    pub async fn serve(
        self,
        store: Arc<BucketStore>,
        stop: impl Future<Output = ()> + Clone + Send + 'static,
    ) -> Result<(), String> {
        let Self { s3_listen, store_socket, review_socket, metrics_address, lifecycle } = self;
        let calls = bind_socket(&store_socket)
            .map_err(|e| format!("store socket {}: {e}", store_socket.display()))?;
        let listener = tokio::net::TcpListener::bind(s3_listen)
            .await
            .map_err(|e| format!("S3 endpoint on {s3_listen}: {e}"))?;
        let telemetry = tokio::net::TcpListener::bind(metrics_address)
            .await
            .map_err(|e| format!("metrics on {metrics_address}: {e}"))?;
        let s3 = listener.local_addr().map_err(|e| e.to_string())?;
        tracing::info!(%s3, store = %store_socket.display(), review = %review_socket.display(),
            "serving S3 and the store's calls");
        let (metrics, health) = (Metrics::new(), Health::default());
        health.set_ready(true);
        let answers = metrics.register(EndpointMetrics::register);
        let endpoint = service(store.clone())
            .counting_answers(answers)
            .lifecycle(lifecycle)
            .web_identity(Arc::new(RememberingVerifier::new(ReviewLink::new(review_socket))));
        let telemetry = telemetry::serve(telemetry, metrics, health, stop.clone());
        tokio::join!(
            serve_endpoint(listener, endpoint, stop.clone()),
            serve_store(calls, store, stop),
            async {
                if let Err(e) = telemetry.await {
                    tracing::error!(error = %e, "serving /metrics and /healthz");
                }
            },
        );
        Ok(())
    }
}
