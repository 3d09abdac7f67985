//! Both versions' services on one unix socket.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use bucket_provisioner::Provisioner;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Server;
use tracing::info;

use crate::calls::Driver;
use crate::proto::{v1alpha1, v1alpha2};
use crate::v1alpha1::V1alpha1;
use crate::v1alpha2::V1alpha2;

/// Why the driver could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The endpoint is not `unix:///absolute/path.sock`.
    #[error("COSI endpoint {0:?} must be unix:// and an absolute path ending in .sock")]
    Endpoint(String),
    /// The socket could not be made.
    #[error("COSI socket {path}: {source}")]
    Socket {
        /// The socket's path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("COSI gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The socket path of a `unix:///path/x.sock` endpoint (the form both sidecars dial).
pub fn socket_path(endpoint: &str) -> Result<PathBuf, ServeError> {
    let path = endpoint.strip_prefix("unix://").map(PathBuf::from);
    match path {
        Some(path) if path.is_absolute() && path.extension().is_some_and(|e| e == "sock") => {
            Ok(path)
        }
        _ => Err(ServeError::Endpoint(endpoint.to_owned())),
    }
}

/// Binds the socket of `endpoint`: its directory made, a stale socket file (left by a process
/// that ended) removed.
pub fn bind(endpoint: &str) -> Result<UnixListener, ServeError> {
    let path = socket_path(endpoint)?;
    let socket_error = |source| ServeError::Socket { path: path.clone(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(socket_error)?;
    }
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(socket_error(e)),
        _ => {}
    }
    UnixListener::bind(&path).map_err(socket_error)
}

/// Serves both versions of the driver on `listener` until `shutdown` completes.
pub async fn serve_on<P: Provisioner>(
    driver: Driver<P>,
    listener: UnixListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let driver = Arc::new(driver);
    info!(driver = driver.name(), "serving COSI v1alpha1 and v1alpha2");
    Server::builder()
        .add_service(v1alpha1::identity_server::IdentityServer::new(V1alpha1(driver.clone())))
        .add_service(v1alpha1::provisioner_server::ProvisionerServer::new(V1alpha1(driver.clone())))
        .add_service(v1alpha2::identity_server::IdentityServer::new(V1alpha2(driver.clone())))
        .add_service(v1alpha2::provisioner_server::ProvisionerServer::new(V1alpha2(driver)))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await?;
    Ok(())
}

/// [`bind`]s `endpoint` and [`serve_on`] it.
pub async fn serve<P: Provisioner>(
    driver: Driver<P>,
    endpoint: &str,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_on(driver, bind(endpoint)?, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_unix_sockets() {
        assert_eq!(
            socket_path("unix:///run/cosi/cosi.sock").unwrap(),
            PathBuf::from("/run/cosi/cosi.sock")
        );
        for bad in ["/run/cosi.sock", "unix://cosi.sock", "unix:///run/cosi", "tcp://x:1"] {
            assert!(socket_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_stale_socket_is_replaced_and_its_directory_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/dir/cosi.sock");
        let endpoint = format!("unix://{}", path.display());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            drop(bind(&endpoint).unwrap());
            assert!(path.exists(), "the first listener leaves its file");
            drop(bind(&endpoint).unwrap());
        });
    }
}
