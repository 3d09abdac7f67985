//! The endpoint's side: answers the controller's store calls on a Unix socket.

use std::sync::Arc;

use futures::FutureExt;
use s3_endpoint::BucketStore;
use tokio::net::{UnixListener, UnixStream};

use super::call::{Call, Reply};
use super::wire::{Failure, accept_each, receive, send};

/// Answers store calls on `listener` until `stop` completes; a call that panics fails alone.
pub async fn serve_store(
    listener: UnixListener,
    store: Arc<BucketStore>,
    stop: impl std::future::Future<Output = ()>,
) {
    accept_each(listener, "store", stop, move |stream| answer(stream, store.clone())).await;
}

async fn answer(mut stream: UnixStream, store: Arc<BucketStore>) {
    let call: Call = match receive(&mut stream).await {
        Ok(call) => call,
        Err(e) => {
            tracing::warn!(error = %e, "a store call that could not be read");
            return;
        }
    };
    let name = call.name();
    let ran = std::panic::AssertUnwindSafe(call.run(&store)).catch_unwind().await;
    let answer: Result<Reply, Failure> = match ran {
        Ok(answered) => answered.map_err(Failure::from),
        Err(_) => {
            tracing::error!(call = name, "a store call panicked");
            Err(Failure::Io {
                message: format!("the store call {name} failed inside the endpoint"),
            })
        }
    };
    if let Err(e) = send(&mut stream, &answer).await {
        tracing::warn!(call = name, error = %e, "the answer to a store call was not delivered");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use s3_endpoint::store::{KeyMode, OwnKey};
    use s3_endpoint::{Creator, Quota, StoreError};

    use super::*;
    use crate::store_link::{RemoteStore, StoreLink, bind_socket};

    /// A store served on a socket in `dir`, and the link to it.
    async fn served(dir: &std::path::Path) -> (StoreLink, tokio::sync::oneshot::Sender<()>) {
        let store = Arc::new(BucketStore::open(dir.join("root"), "node-a").unwrap());
        let socket = dir.join("store.sock");
        let listener = bind_socket(&socket).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve_store(listener, store, async {
            let _ = stopped.await;
        }));
        let remote = RemoteStore::connect(&socket, Duration::from_millis(10)).await;
        (StoreLink::Remote(remote), stop)
    }

    #[tokio::test]
    async fn the_store_answers_across_the_socket_as_it_does_in_process() {
        let dir = tempfile::tempdir().unwrap();
        let (link, stop) = served(dir.path()).await;
        assert_eq!(link.identity(), "node-a");
        assert_eq!(link.root(), dir.path().join("root"));

        let creator = Creator { user_id: "claim-1", delete_with_claim: true };
        let (record, key) = link.provision_bucket("photos", creator).await.unwrap();
        assert_eq!(record.creator.as_deref(), Some("claim-1"));
        assert!(link.bucket_exists("photos").await.unwrap());
        assert_eq!(link.bucket_record("photos").await.unwrap(), Some(record));
        link.set_key_mode("claim-1", "photos", KeyMode::ReadOnly).await.unwrap();
        let rotated = link.rotate_key("claim-1", "photos", &key.access_key_id).await.unwrap();
        assert_ne!(rotated.access_key_id, key.access_key_id);
        assert!(link.retire_key("claim-1", &key.access_key_id).await.unwrap());

        // A refusal keeps its kind, which the backend tells apart.
        let other = Creator { user_id: "claim-2", delete_with_claim: true };
        let taken = link.provision_bucket("photos", other).await.unwrap_err();
        assert!(
            matches!(taken, StoreError::BucketAlreadyExists(ref b) if b == "photos"),
            "{taken}"
        );
        let missing = link.issue_key("claim-3", "nowhere").await.unwrap_err();
        assert!(matches!(missing, StoreError::NoSuchBucket(_)), "{missing}");
        let quota = Quota { max_objects: Some(1), max_bytes: None };
        let issued = link.issue_own_key("owner", "photos", (KeyMode::ReadWrite, quota), None);
        assert!(matches!(issued.await.unwrap(), OwnKey::Issued(_)));

        assert!(link.delete_bucket("photos", "claim-1").await.unwrap());
        assert_eq!(link.revoke_keys("claim-1").await.unwrap(), 0);

        // The endpoint gone: a failure worth retrying, never a panic.
        stop.send(()).unwrap();
        std::fs::remove_file(dir.path().join("store.sock")).unwrap();
        let gone = link.bucket_exists("photos").await.unwrap_err();
        assert!(matches!(gone, StoreError::Io(_)), "{gone}");
    }

    #[tokio::test]
    async fn usage_is_answered_from_memory_and_read_at_the_next_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let (link, _stop) = served(dir.path()).await;
        let creator = Creator { user_id: "claim-1", delete_with_claim: true };
        link.provision_bucket("photos", creator).await.unwrap();
        let StoreLink::Remote(remote) = &link else { unreachable!() };
        assert_eq!(link.usage_now("photos", Some("claim-1")), None, "not read yet");
        remote.refresh_usage(Duration::from_secs(60)).await;
        let (total, claim, quota) = link.usage_now("photos", Some("claim-1")).unwrap();
        assert_eq!((total.objects, claim.objects), (0, 0));
        assert!(quota.is_unlimited());
        // A pair not asked for within the window is forgotten.
        remote.refresh_usage(Duration::ZERO).await;
        assert_eq!(link.usage_now("photos", Some("claim-1")), None);
    }
}
