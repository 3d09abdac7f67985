//! Both halves in one process (neither `--serve-store` nor `--store-socket`): the endpoint is a
//! service of the runtime beside the controller, on the store the controller acts on.

use std::convert::Infallible;
use std::sync::Arc;

use bucket_provisioner::runtime::{Process, Service};
use futures::FutureExt;
use s3_endpoint::BucketStore;
use s3_endpoint::s3::{EndpointMetrics, LifecycleSchedule, serve_endpoint, service};
use s3_endpoint::sts::RememberingVerifier;
use tokio::net::TcpListener;

use crate::token_review::TokenReviewer;

/// The endpoint serving `store` on `listener`, its STS checking tokens minted for `audience`
/// with the process's own client; it counts its answers on the process's `/metrics`.
pub fn endpoint_service(
    store: Arc<BucketStore>,
    listener: TcpListener,
    lifecycle: LifecycleSchedule,
    audience: String,
) -> Service {
    Service::new("S3 endpoint", move |process: Process| {
        let answers = process.metrics.register(EndpointMetrics::register);
        let reviewer = TokenReviewer::new(process.client, audience);
        let endpoint = service(store)
            .counting_answers(answers)
            .lifecycle(lifecycle)
            .web_identity(Arc::new(RememberingVerifier::new(reviewer)));
        // The endpoint never fails: it keeps accepting through errors until told to stop.
        serve_endpoint(listener, endpoint, process.stop.wait()).map(Ok::<(), Infallible>)
    })
}
