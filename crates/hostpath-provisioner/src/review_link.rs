//! Token reviews across a Unix socket: the S3 endpoint's process, which holds no Kubernetes
//! credential, asks the controller's process (whose [`TokenReviewer`](crate::token_review)
//! holds one) whose a web identity token is.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use s3_endpoint::sts::{IdentityVerifier, MAX_TOKEN_LEN, Unverified, VerifiedIdentity};
use serde::{Deserialize, Serialize};
use tokio::net::{UnixListener, UnixStream};

use crate::store_link::wire::{accept_each, receive, send};

#[derive(Serialize, Deserialize)]
struct Review {
    token: String,
}

type Reviewed = Result<VerifiedIdentity, Unverified>;

/// Answers reviews on `listener` with `verifier` until `stop` completes.
pub async fn serve_reviews(
    listener: UnixListener,
    verifier: Arc<dyn IdentityVerifier>,
    stop: impl std::future::Future<Output = ()>,
) {
    accept_each(listener, "review", stop, move |stream| answer(stream, verifier.clone())).await;
}

async fn answer(mut stream: UnixStream, verifier: Arc<dyn IdentityVerifier>) {
    let review: Review = match receive(&mut stream).await {
        Ok(review) => review,
        Err(e) => {
            tracing::warn!(error = %e, "a token review that could not be read");
            return;
        }
    };
    let reviewed: Reviewed = if review.token.len() > MAX_TOKEN_LEN {
        Err(Unverified::Invalid("the token is too long".into()))
    } else {
        verifier.verify(&review.token).await
    };
    if let Err(e) = send(&mut stream, &reviewed).await {
        tracing::warn!(error = %e, "the answer to a token review was not delivered");
    }
}

/// A verifier asking the process behind a review socket.
#[derive(Debug, Clone)]
pub struct ReviewLink {
    socket: PathBuf,
}

impl ReviewLink {
    /// Asks the reviews of `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self { socket: socket.into() }
    }

    async fn ask(socket: &Path, token: &str) -> std::io::Result<Reviewed> {
        let mut stream = UnixStream::connect(socket).await?;
        send(&mut stream, &Review { token: token.to_owned() }).await?;
        receive(&mut stream).await
    }
}

#[async_trait::async_trait]
impl IdentityVerifier for ReviewLink {
    async fn verify(&self, token: &str) -> Result<VerifiedIdentity, Unverified> {
        match Self::ask(&self.socket, token).await {
            Ok(reviewed) => reviewed,
            Err(e) => Err(Unverified::Unreachable(format!(
                "the controller's token review at {}: {e}",
                self.socket.display()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;

    #[async_trait::async_trait]
    impl IdentityVerifier for Fixed {
        async fn verify(&self, token: &str) -> Result<VerifiedIdentity, Unverified> {
            match token {
                "good" => Ok(VerifiedIdentity {
                    subject: "system:serviceaccount:t:app".into(),
                    audience: "a".into(),
                    expires_unix: 7,
                    uid: Some("u".into()),
                }),
                "old" => Err(Unverified::Expired),
                _ => Err(Unverified::Invalid("no".into())),
            }
        }
    }

    #[tokio::test]
    async fn each_answer_crosses_the_socket_and_a_silent_one_is_unreachable() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("review.sock");
        let listener = crate::store_link::bind_socket(&socket).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(serve_reviews(listener, Arc::new(Fixed), async {
            let _ = stopped.await;
        }));
        let link = ReviewLink::new(&socket);
        assert_eq!(link.verify("good").await.unwrap().uid.as_deref(), Some("u"));
        assert_eq!(link.verify("old").await, Err(Unverified::Expired));
        assert_eq!(link.verify("x").await, Err(Unverified::Invalid("no".into())));
        let huge = "a".repeat(MAX_TOKEN_LEN + 1);
        assert!(matches!(link.verify(&huge).await, Err(Unverified::Invalid(_))));
        stop.send(()).unwrap();
        served.await.unwrap();
        drop(dir);
        assert!(matches!(link.verify("good").await, Err(Unverified::Unreachable(_))));
    }
}
