//! A proxy between a program under test and the apiserver that can turn dishonest: for one kind
//! of request at a time (a Lease request, a list, a watch, a get, a patch, a create…) it answers
//! an error status of its choosing, resets the connection, or never answers at all; open watch
//! streams are cut when watches are targeted, so that they meet the fault when they come back.
//! It can also hold back the end of the streaming lists of one resource for a while, as a busy
//! apiserver may, so that what a program does between a list's objects and its end is seen.
//!
//! The program talks plain HTTP to the proxy (its kubeconfig names `http://127.0.0.1:PORT`) and
//! its own credentials pass through unchanged, so RBAC still sees the program's identity.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::Client;
use kube::client::{Body, ClientBuilder};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::control_plane::{ControlPlane, kubeconfig_yaml};

/// What a request is, as the faults target it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestKind {
    /// Anything on a Lease.
    Lease,
    /// GET of a collection, not a watch.
    List,
    /// GET with `watch=true`.
    Watch,
    /// GET of one object.
    Get,
    /// PATCH.
    Patch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// DELETE.
    Delete,
}

impl RequestKind {
    /// Every kind.
    pub const ALL: [RequestKind; 8] = [
        Self::Lease,
        Self::List,
        Self::Watch,
        Self::Get,
        Self::Patch,
        Self::Create,
        Self::Update,
        Self::Delete,
    ];

    /// The kind of a request to `path?query` with `method`.
    pub fn of(method: &Method, path: &str, query: &str) -> RequestKind {
        if path.contains("/leases") {
            return Self::Lease;
        }
        match *method {
            Method::POST => Self::Create,
            Method::PATCH => Self::Patch,
            Method::PUT => Self::Update,
            Method::DELETE => Self::Delete,
            _ if query.split('&').any(|p| p == "watch=true" || p == "watch=1") => Self::Watch,
            _ if names_one_object(path) => Self::Get,
            _ => Self::List,
        }
    }
}

/// Whether an API path names one object rather than a collection; a path outside the resource
/// APIs (`/version`, `/healthz`) names one thing too.
fn names_one_object(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // `api/v1/...` or `apis/GROUP/VERSION/...`
    let rest = match segments.first() {
        Some(&"api") => segments.get(2..),
        Some(&"apis") => segments.get(3..),
        _ => return true,
    };
    match rest.unwrap_or_default() {
        ["namespaces", _] => true,
        ["namespaces", _, _resource, ..] => rest.is_some_and(|r| r.len() >= 4),
        [_resource, _name, ..] => true,
        _ => false,
    }
}

/// What the proxy does to the requests a fault targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answers this status with a Kubernetes `Status` body.
    Status(u16),
    /// Closes the connection without an answer.
    Reset,
    /// Never answers (the connection stays open).
    Stall,
}

impl Fault {
    /// Every fault the liveness tests inject.
    pub const ALL: [Fault; 10] = [
        Self::Status(401),
        Self::Status(403),
        Self::Status(404),
        Self::Status(409),
        Self::Status(429),
        Self::Status(500),
        Self::Status(503),
        Self::Status(504),
        Self::Reset,
        Self::Stall,
    ];
}

#[derive(Default)]
struct Faults {
    by_kind: BTreeMap<RequestKind, Fault>,
    /// How many requests each kind had, faulty or not.
    seen: BTreeMap<RequestKind, u64>,
    /// The resource whose streaming lists end late, and how late.
    late_list_end: Option<(String, Duration)>,
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    address: SocketAddr,
    faults: Arc<Mutex<Faults>>,
    cut_watches: watch::Sender<u64>,
    server: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy to `plane`'s apiserver, honest until told otherwise.
    pub async fn start(plane: &ControlPlane) -> Result<FaultProxy> {
        let upstream = upstream_client(plane).await?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let faults = Arc::new(Mutex::new(Faults::default()));
        let (cut_watches, _) = watch::channel(0);
        let state = Proxy { upstream, faults: faults.clone(), cut: cut_watches.clone() };
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let state = state.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let state = state.clone();
                        async move { state.handle(request).await }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(FaultProxy { address, faults, cut_watches, server })
    }

    /// Makes requests of `kind` meet `fault` (`None`: honest again). Targeting watches cuts the
    /// open ones, so that they meet it when they come back.
    pub fn inject(&self, kind: RequestKind, fault: Option<Fault>) {
        let mut faults = self.faults.lock().unwrap();
        match fault {
            Some(fault) => faults.by_kind.insert(kind, fault),
            None => faults.by_kind.remove(&kind),
        };
        drop(faults);
        if kind == RequestKind::Watch && fault.is_some() {
            self.cut_watches.send_modify(|generation| *generation += 1);
        }
    }

    /// Holds back the bookmark that ends each streaming list (`k8s.io/initial-events-end`) of
    /// `resource` (its plural name) by `delay` from now on; the list's objects pass at once.
    pub fn delay_list_ends(&self, resource: &str, delay: Duration) {
        self.faults.lock().unwrap().late_list_end = Some((resource.to_owned(), delay));
    }

    /// Honest for every kind of request (a list end's delay stays).
    pub fn honest(&self) {
        self.faults.lock().unwrap().by_kind.clear();
    }

    /// How many requests of `kind` came through so far.
    pub fn seen(&self, kind: RequestKind) -> u64 {
        self.faults.lock().unwrap().seen.get(&kind).copied().unwrap_or(0)
    }

    /// Writes a kubeconfig that reaches the apiserver through this proxy with `token`.
    pub fn kubeconfig(&self, plane: &ControlPlane, token: &str) -> Result<PathBuf> {
        let path = plane.file_path(&format!("kubeconfig-proxy-{}", self.address.port()));
        std::fs::write(&path, kubeconfig_yaml(&format!("http://{}", self.address), token))?;
        Ok(path)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

#[derive(Clone)]
struct Proxy {
    upstream: Client,
    faults: Arc<Mutex<Faults>>,
    cut: watch::Sender<u64>,
}

type ProxyBody = StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

impl Proxy {
    async fn handle(&self, request: Request<Incoming>) -> Result<Response<ProxyBody>, String> {
        let (parts, body) = request.into_parts();
        let kind =
            RequestKind::of(&parts.method, parts.uri.path(), parts.uri.query().unwrap_or(""));
        let (fault, list_end_delay) = {
            let mut faults = self.faults.lock().unwrap();
            *faults.seen.entry(kind).or_default() += 1;
            let late = faults.late_list_end.as_ref().filter(|(resource, _)| {
                kind == RequestKind::Watch && parts.uri.path().split('/').any(|s| s == resource)
            });
            (faults.by_kind.get(&kind).copied(), late.map(|(_, delay)| *delay))
        };
        match fault {
            Some(Fault::Status(code)) => return Ok(status(code)),
            // An error from the service makes the server drop the connection unanswered.
            Some(Fault::Reset) => return Err("injected reset".to_owned()),
            Some(Fault::Stall) => std::future::pending::<()>().await,
            None => {}
        }
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        let request = Request::from_parts(parts, Body::from(body));
        let response = self.upstream.send(request).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let cut = (kind == RequestKind::Watch).then(|| self.cut.subscribe());
        let chunks = body.into_data_stream();
        let chunks = match list_end_delay {
            Some(delay) => late_list_ends(chunks, delay).boxed(),
            None => chunks.boxed(),
        };
        Ok(Response::from_parts(parts, StreamBody::new(frames(chunks, cut))))
    }
}

type Chunks = futures::stream::BoxStream<'static, Result<Bytes, kube::Error>>;

/// `chunks`, the one that completes a list's end bookmark passed on only after `delay`.
fn late_list_ends(
    chunks: impl futures::Stream<Item = Result<Bytes, kube::Error>> + Send + 'static,
    delay: Duration,
) -> impl futures::Stream<Item = Result<Bytes, kube::Error>> + Send + 'static {
    const END: &[u8] = b"k8s.io/initial-events-end";
    // The end of the previous chunk, too short to hold the whole marker: it may be split.
    let mut tail = Vec::new();
    chunks.then(move |chunk| {
        let ends_list = chunk.as_ref().is_ok_and(|bytes| {
            tail.extend_from_slice(bytes);
            let found = tail.windows(END.len()).any(|w| w == END);
            tail.drain(..tail.len().saturating_sub(END.len() - 1));
            found
        });
        async move {
            if ends_list {
                tokio::time::sleep(delay).await;
            }
            chunk
        }
    })
}

/// The frames of `chunks` until they end or fail, or (given `cut`) the watches are cut.
fn frames(
    chunks: Chunks,
    cut: Option<watch::Receiver<u64>>,
) -> futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>> {
    futures::stream::unfold((chunks, cut), |(mut chunks, mut cut)| async move {
        let cut_now = async {
            match &mut cut {
                Some(cut) => {
                    let _ = cut.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            chunk = chunks.next() => match chunk {
                Some(Ok(bytes)) => Some((Ok(Frame::data(bytes)), (chunks, cut))),
                _ => None,
            },
            () = cut_now => None,
        }
    })
    .boxed()
}

/// A Kubernetes `Status` answer with `code`.
fn status(code: u16) -> Response<ProxyBody> {
    let reason = StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Injected")
        .replace(' ', "");
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("injected by the test proxy: {code}"), "reason": reason, "code": code,
    });
    let bytes = Bytes::from(body.to_string());
    Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(StreamBody::new(futures::stream::once(async { Ok(Frame::data(bytes)) }).boxed()))
        .expect("a valid response")
}

/// A client of `plane`'s apiserver without credentials of its own, so that the program's pass
/// through, and without retries, so that every answer passes through as it came.
async fn upstream_client(plane: &ControlPlane) -> Result<Client> {
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    \
         insecure-skip-tls-verify: true\nusers:\n- name: none\n  user: {{}}\ncontexts:\n- name: \
         test\n  context:\n    cluster: test\n    user: none\ncurrent-context: test\n",
        plane.server()
    );
    let kubeconfig: Kubeconfig = serde_yaml::from_str(&yaml)?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    config.default_retry = false;
    Ok(ClientBuilder::try_from(config)?.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_told_apart_by_method_path_and_query() {
        let kind = |method: Method, path: &str, query: &str| RequestKind::of(&method, path, query);
        let lease = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x";
        assert_eq!(kind(Method::PUT, lease, ""), RequestKind::Lease);
        let claims = "/apis/objectbucket.io/v1alpha1/objectbucketclaims";
        assert_eq!(
            kind(Method::GET, claims, "watch=true&sendInitialEvents=true"),
            RequestKind::Watch
        );
        assert_eq!(kind(Method::GET, claims, "limit=500"), RequestKind::List);
        let claim = "/apis/objectbucket.io/v1alpha1/namespaces/ns/objectbucketclaims/c";
        assert_eq!(kind(Method::GET, claim, ""), RequestKind::Get);
        assert_eq!(kind(Method::PATCH, &format!("{claim}/status"), ""), RequestKind::Patch);
        assert_eq!(kind(Method::GET, "/api/v1/namespaces/ns/secrets", ""), RequestKind::List);
        assert_eq!(kind(Method::GET, "/api/v1/namespaces/ns", ""), RequestKind::Get);
        assert_eq!(kind(Method::GET, "/version", ""), RequestKind::Get);
        assert_eq!(kind(Method::POST, "/api/v1/namespaces/ns/secrets", ""), RequestKind::Create);
        assert_eq!(
            kind(Method::GET, "/apis/objectbucket.io/v1alpha1/objectbuckets/b", ""),
            RequestKind::Get
        );
    }
}
