//! The endpoint's HTTP server: the service with authentication, authorization and request ids,
//! served on a listener until shutdown.

use std::future::Future;

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::lifecycle;
use super::zero_copy::{FileSends, SendfileStream};
use super::{BucketAccess, Endpoint, HostPathS3, KeyAuth};
use crate::store::BucketStore;

/// How long in-flight requests may finish after shutdown is asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the S3 API for `store` on `listener` until `shutdown` completes, then lets requests in
/// flight finish (for at most 30 seconds). Meanwhile runs the lifecycle pass, at start and then
/// hourly.
pub async fn serve(
    listener: TcpListener,
    store: Arc<BucketStore>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    serve_endpoint(listener, service(store), shutdown).await
}

/// [`serve`] for an endpoint made with [`service`] (counting its answers, say), running the
/// lifecycle pass on the endpoint's [`LifecycleSchedule`](super::LifecycleSchedule).
pub async fn serve_endpoint(
    listener: TcpListener,
    service: Endpoint,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Slow clients must not hold connections open by dribbling headers.
    builder.http1().timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
    let graceful = GracefulShutdown::new();
    let (store, schedule, metrics) = service.lifecycle_worker();
    let stop_lifecycle = CancellationToken::new();
    let lifecycle = tokio::spawn(lifecycle::run(store, schedule, metrics, stop_lifecycle.clone()));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accepting an S3 connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Responses go out as headers then body; with Nagle's algorithm the body waits
                // for the client's delayed ACK (~40 ms a small GET, as the benchmark showed).
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, error = %e, "could not disable Nagle's algorithm");
                }
                let sends = Arc::new(FileSends::default());
                let stream = SendfileStream::new(stream, sends.clone());
                let service = service.on_connection(sends);
                let conn = builder.serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn.into_owned());
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "S3 connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    stop_lifecycle.cancel();
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("S3 connections still open after the drain timeout; closing them");
    }
    if let Err(e) = lifecycle.await {
        tracing::error!(error = %e, "the lifecycle worker failed");
    }
}

/// The endpoint's service for `store`, with authentication, per-bucket authorization and
/// request ids, for callers that run their own HTTP server.
pub fn service(store: Arc<BucketStore>) -> Endpoint {
    let mut builder = S3ServiceBuilder::new(HostPathS3::new(store.clone()));
    builder.set_auth(KeyAuth { store: store.clone() });
    builder.set_access(BucketAccess { store: store.clone() });
    Endpoint::new(builder.build(), store)
}
