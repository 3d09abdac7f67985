//! An apiserver stand-in for unit tests of the loops: a [`kube::Client`] whose every request is
//! answered by a function of the test, which counts the requests it saw.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::{Request, Response};
use kube::client::Body;

/// What the test's function answers: a status and a body (JSON, or JSON lines for a watch).
pub type Answer = (u16, String);

/// A client whose `n`-th request (from 0) with `method` and `path?query` is answered by
/// `answer(n, method, uri)`; the counter tells how many requests were made.
pub fn client<F>(answer: F) -> (kube::Client, Arc<AtomicUsize>)
where
    F: Fn(usize, &str, &str) -> Answer + Send + Sync + 'static,
{
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    let answer = Arc::new(answer);
    let service = tower::service_fn(move |request: Request<Body>| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        let (status, body) = answer(n, request.method().as_str(), &request.uri().to_string());
        async move {
            let response = Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(body.into_bytes()))
                .expect("a valid response");
            Ok::<_, Infallible>(response)
        }
    });
    (kube::Client::new(service, "default"), count)
}

/// A Kubernetes `Status` answer (a 404 with the reason the apiserver gives it).
pub fn status(code: u16, message: &str) -> Answer {
    let reason = if code == 404 { "NotFound" } else { "Injected" };
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    (code, body.to_string())
}

/// How many requests were made so far.
pub fn seen(count: &AtomicUsize) -> usize {
    count.load(Ordering::SeqCst)
}
