//! One request and one answer per connection of a local Unix socket, each a JSON document: the
//! writer shuts its side down after the document, the reader reads to the end (bounded).
//!
//! Both ends are the same binary in one pod, so the documents are the Rust types themselves
//! (serde), not a schema of their own.

use std::io;
use std::path::Path;

use s3_endpoint::StoreError;
use s3_endpoint::store::LockRefusal;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The largest document either end reads: far above any call (a thousand lifecycle rules), far
/// below what could strain the reader.
pub(crate) const MAX_DOCUMENT: u64 = 8 << 20;

/// Writes `value` and ends this side of the stream.
pub(crate) async fn send<W, T>(stream: &mut W, value: &T) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    stream.write_all(&bytes).await?;
    stream.shutdown().await
}

/// Reads one document to the end of the stream.
pub(crate) async fn receive<R, T>(stream: &mut R) -> io::Result<T>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut bytes = Vec::new();
    stream.take(MAX_DOCUMENT + 1).read_to_end(&mut bytes).await?;
    if bytes.len() as u64 > MAX_DOCUMENT {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "document too large"));
    }
    if bytes.is_empty() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the other end closed"));
    }
    serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Binds `path` for a server of this module's documents, replacing a socket left by an earlier run; only this
/// user may connect (mode 0600).
pub fn bind_socket(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(found) = std::fs::symlink_metadata(path) {
        if !found.file_type().is_socket() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Hands each connection of `listener` (the `what` socket, for logs) to `answer`, in a task of
/// its own, until `stop` completes.
pub(crate) async fn accept_each<A, F>(
    listener: UnixListener,
    what: &str,
    stop: impl std::future::Future<Output = ()>,
    answer: A,
) where
    A: Fn(UnixStream) -> F,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => return,
        };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(answer(stream));
            }
            Err(e) => {
                tracing::warn!(error = %e, socket = what, "accepting on a local socket");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// A [`StoreError`] as it crosses the socket: the kinds the controller tells apart, and the
/// text of every other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "failure")]
pub(crate) enum Failure {
    /// File system trouble: worth retrying.
    Io {
        message: String,
    },
    Corrupt {
        path: std::path::PathBuf,
        message: String,
    },
    ObjectLocked {
        refusal: LockRefusal,
    },
    InvalidBucketName {
        message: String,
    },
    NoSuchBucket {
        bucket: String,
    },
    BucketAlreadyExists {
        bucket: String,
    },
    NotOurs {
        bucket: String,
        owner: String,
        ours: String,
    },
    NotCreator {
        bucket: String,
    },
    Symlink {
        path: String,
    },
    InvalidArgument {
        message: String,
    },
    /// Any other refusal, by its text.
    Refused {
        message: String,
    },
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Io(e) => Self::Io { message: e.to_string() },
            StoreError::Corrupt { path, message } => Self::Corrupt { path, message },
            StoreError::ObjectLocked(refusal) => Self::ObjectLocked { refusal },
            StoreError::InvalidBucketName(message) => Self::InvalidBucketName { message },
            StoreError::NoSuchBucket(bucket) => Self::NoSuchBucket { bucket },
            StoreError::BucketAlreadyExists(bucket) => Self::BucketAlreadyExists { bucket },
            StoreError::NotOurs { bucket, owner, ours } => Self::NotOurs { bucket, owner, ours },
            StoreError::NotCreator(bucket) => Self::NotCreator { bucket },
            StoreError::Symlink(path) => Self::Symlink { path },
            StoreError::InvalidArgument(message) => Self::InvalidArgument { message },
            other => Self::Refused { message: other.to_string() },
        }
    }
}

impl From<Failure> for StoreError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Io { message } => StoreError::Io(io::Error::other(message)),
            Failure::Corrupt { path, message } => StoreError::Corrupt { path, message },
            Failure::ObjectLocked { refusal } => StoreError::ObjectLocked(refusal),
            Failure::InvalidBucketName { message } => StoreError::InvalidBucketName(message),
            Failure::NoSuchBucket { bucket } => StoreError::NoSuchBucket(bucket),
            Failure::BucketAlreadyExists { bucket } => StoreError::BucketAlreadyExists(bucket),
            Failure::NotOurs { bucket, owner, ours } => StoreError::NotOurs { bucket, owner, ours },
            Failure::NotCreator { bucket } => StoreError::NotCreator(bucket),
            Failure::Symlink { path } => StoreError::Symlink(path),
            Failure::InvalidArgument { message } => StoreError::InvalidArgument(message),
            Failure::Refused { message } => StoreError::InvalidRequest(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_the_controller_tells_apart_crosses_unchanged() {
        let errors = [
            StoreError::Io(io::Error::other("disk gone")),
            StoreError::InvalidBucketName("bad".into()),
            StoreError::NoSuchBucket("b".into()),
            StoreError::BucketAlreadyExists("b".into()),
            StoreError::NotOurs { bucket: "b".into(), owner: "o".into(), ours: "us".into() },
            StoreError::NotCreator("b".into()),
            StoreError::Symlink("p".into()),
            StoreError::InvalidArgument("why".into()),
            StoreError::BucketNotEmpty("b".into()),
        ];
        for e in errors {
            let text = e.to_string();
            let failure = Failure::from(e);
            let json = serde_json::to_string(&failure).unwrap();
            let back: Failure = serde_json::from_str(&json).unwrap();
            assert_eq!(back, failure);
            assert_eq!(StoreError::from(back).to_string(), text);
        }
    }

    #[tokio::test]
    async fn a_document_past_the_bound_is_refused() {
        let big = vec![b' '; (MAX_DOCUMENT + 2) as usize];
        let got: io::Result<serde_json::Value> = receive(&mut big.as_slice()).await;
        assert_eq!(got.unwrap_err().kind(), io::ErrorKind::InvalidData);
        let empty: io::Result<serde_json::Value> = receive(&mut &b""[..]).await;
        assert_eq!(empty.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
