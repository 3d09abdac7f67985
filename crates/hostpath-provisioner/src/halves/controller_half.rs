//! The controller half (`--store-socket`): it opens no store and serves no S3. It reaches the
//! endpoint's store over its socket and answers the endpoint's token reviews on another.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bucket_provisioner::runtime::{Process, Service};
use futures::FutureExt;

use crate::review_link::serve_reviews;
use crate::store_link::{RemoteStore, StoreLink, bind_socket};
use crate::token_review::TokenReviewer;

/// The endpoint's store behind `store_socket`, once it answers, and the services the controller
/// runs beside it: token reviews on `review_socket` for tokens minted for `audience`, and the
/// usage the library asks for read every `usage_every`. A review socket that cannot be bound is
/// an error naming it.
pub async fn through_socket(
    store_socket: &Path,
    review_socket: &Path,
    audience: String,
    usage_every: Duration,
) -> Result<(StoreLink, Vec<Service>), String> {
    let listener = bind_socket(review_socket)
        .map_err(|e| format!("token review socket {}: {e}", review_socket.display()))?;
    let reviews = Service::new("token reviews", move |process: Process| {
        let reviewer = Arc::new(TokenReviewer::new(process.client, audience));
        serve_reviews(listener, reviewer, process.stop.wait()).map(Ok::<(), Infallible>)
    });
    let remote = RemoteStore::connect(store_socket, Duration::from_secs(1)).await;
    tracing::info!(socket = %store_socket.display(), identity = remote.identity(),
        "reaching the endpoint's store");
    let usage = remote.clone();
    let follow = Service::new("usage", move |process: Process| async move {
        usage.follow_usage(usage_every, process.stop.wait()).await;
        Ok::<(), Infallible>(())
    });
    Ok((StoreLink::Remote(remote), vec![reviews, follow]))
}
