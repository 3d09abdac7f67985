//! Prometheus metrics of the controller and the small HTTP server that exposes them together with
//! liveness and readiness probes.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets_range};
use prometheus_client::registry::{Registry, Unit};

use bucket_api::{BucketUsage, ClaimPhase};

use crate::health::Health;
use crate::log_limit::SharedThrottle;

/// Content type of the OpenMetrics text exposition that `encode` produces.
const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Claim phases reported from the start, so dashboards see a 0 rather than a missing series.
const KNOWN_PHASES: [ClaimPhase; 4] = ClaimPhase::ALL;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BucketLabels {
    bucket: String,
}

/// The controller's metrics and the registry they are exposed from. Cloning is cheap and every
/// clone records into the same metrics.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    /// Locked only to register a backend's own metrics and to encode.
    registry: Mutex<Registry>,
    reconciles: Counter,
    errors: Family<ReasonLabels, Counter>,
    provisioning: Family<OperationLabels, Histogram>,
    claims: Family<PhaseLabels, Gauge>,
    /// Every phase ever reported, so that phases missing from a later report drop to 0 instead of
    /// keeping a stale count.
    phases: Mutex<BTreeSet<String>>,
    bucket_objects: Family<BucketLabels, Gauge>,
    bucket_bytes: Family<BucketLabels, Gauge>,
    quota_objects: Family<BucketLabels, Gauge>,
    quota_bytes: Family<BucketLabels, Gauge>,
    /// Buckets with usage series, so that a bucket no longer reported loses them.
    buckets: Mutex<BTreeSet<String>>,
    leading: Gauge,
}

fn provisioning_histogram() -> Histogram {
    // Backend calls range from a quick local mkdir to a slow remote API: 10ms to 2min.
    Histogram::new(exponential_buckets_range(0.01, 120.0, 14))
}

impl Metrics {
    /// Fresh metrics of the bucket side in a registry of their own; every name starts with
    /// `bucket_provisioner_`.
    pub fn new() -> Self {
        Self::registered(true)
    }

    /// Fresh metrics of the volume side: only what it records (reconciles, errors, backend
    /// call durations, leadership); the claim and bucket series are not exported.
    pub fn for_volumes() -> Self {
        Self::registered(false)
    }

    fn registered(buckets: bool) -> Self {
        let mut registry = Registry::with_prefix("bucket_provisioner");
        // What only the bucket side records goes into a registry that is never served.
        let mut unserved = Registry::default();
        let reconciles = Counter::default();
        registry.register(
            "reconciles",
            "Reconciliations of claims (and, on the volume side, of PersistentVolumes)",
            reconciles.clone(),
        );
        let errors = Family::<ReasonLabels, Counter>::default();
        registry.register("reconcile_errors", "Failed reconciliations, by reason", errors.clone());
        let provisioning =
            Family::<OperationLabels, Histogram>::new_with_constructor(provisioning_histogram as _);
        registry.register_with_unit(
            "provisioning_duration",
            "Time spent in backend operations (provision, grant, delete, revoke, update)",
            Unit::Seconds,
            provisioning.clone(),
        );
        let bucket_registry = if buckets { &mut registry } else { &mut unserved };
        let claims = Family::<PhaseLabels, Gauge>::default();
        bucket_registry.register("claims", "ObjectBucketClaims by phase", claims.clone());

        for phase in KNOWN_PHASES {
            claims.get_or_create(&PhaseLabels { phase: phase.as_str().to_owned() }).set(0);
        }
        let phases = Mutex::new(KNOWN_PHASES.iter().map(|p| p.as_str().to_owned()).collect());
        let bucket_objects = Family::<BucketLabels, Gauge>::default();
        bucket_registry.register(
            "bucket_objects",
            "Objects in each bound bucket, as its backend reports them",
            bucket_objects.clone(),
        );
        let bucket_bytes = Family::<BucketLabels, Gauge>::default();
        bucket_registry.register_with_unit(
            "bucket",
            "Bytes each bound bucket takes, as its backend reports them",
            Unit::Bytes,
            bucket_bytes.clone(),
        );
        let quota_objects = Family::<BucketLabels, Gauge>::default();
        bucket_registry.register(
            "bucket_quota_objects",
            "The most objects each bound bucket may hold, where it has such a quota",
            quota_objects.clone(),
        );
        let quota_bytes = Family::<BucketLabels, Gauge>::default();
        bucket_registry.register_with_unit(
            "bucket_quota",
            "The most bytes each bound bucket may hold, where it has such a quota",
            Unit::Bytes,
            quota_bytes.clone(),
        );
        let leading = Gauge::default();
        registry.register(
            "leading",
            "1 while this process runs the controller (it holds the leadership, or runs without \
             election), else 0",
            leading.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry: Mutex::new(registry),
                reconciles,
                errors,
                provisioning,
                claims,
                phases,
                bucket_objects,
                bucket_bytes,
                quota_objects,
                quota_bytes,
                buckets: Mutex::default(),
                leading,
            }),
        }
    }

    /// Counts one reconciliation (`bucket_provisioner_reconciles_total`).
    pub fn reconcile(&self) {
        self.inner.reconciles.inc();
    }

    /// Counts one failed reconciliation (`bucket_provisioner_reconcile_errors_total{reason}`).
    /// `reason` should come from a small fixed set, since every value is a time series.
    pub fn error(&self, reason: &str) {
        self.inner.errors.get_or_create(&ReasonLabels { reason: reason.to_owned() }).inc();
    }

    /// Records how long one backend operation took
    /// (`bucket_provisioner_provisioning_duration_seconds{operation}`).
    pub fn observe_provisioning(&self, operation: &str, seconds: f64) {
        let labels = OperationLabels { operation: operation.to_owned() };
        self.inner.provisioning.get_or_create(&labels).observe(seconds);
    }

    /// Publishes the number of claims in each phase (`bucket_provisioner_claims{phase}`); phases
    /// not listed are set to 0.
    pub fn set_claims_by_phase(&self, counts: &[(&str, i64)]) {
        // One lock around the whole update, so concurrent reports cannot interleave their zeroing.
        let mut phases = self.inner.phases.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for phase in phases.iter() {
            if !counts.iter().any(|(listed, _)| listed == phase) {
                self.inner.claims.get_or_create(&PhaseLabels { phase: phase.clone() }).set(0);
            }
        }
        for (phase, count) in counts {
            self.inner
                .claims
                .get_or_create(&PhaseLabels { phase: (*phase).to_owned() })
                .set(*count);
            phases.insert((*phase).to_owned());
        }
    }

    /// Publishes what `bucket` holds (`bucket_provisioner_bucket_objects{bucket}` and
    /// `bucket_provisioner_bucket_bytes{bucket}`) and its quota, where it has one
    /// (`bucket_provisioner_bucket_quota_objects{bucket}`,
    /// `bucket_provisioner_bucket_quota_bytes{bucket}`).
    pub fn set_bucket_usage(&self, bucket: &str, usage: &BucketUsage) {
        let labels = BucketLabels { bucket: bucket.to_owned() };
        let gauge = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        self.inner.bucket_objects.get_or_create(&labels).set(gauge(usage.objects));
        self.inner.bucket_bytes.get_or_create(&labels).set(gauge(usage.bytes));
        for (quota, family) in [
            (usage.max_objects, &self.inner.quota_objects),
            (usage.max_bytes, &self.inner.quota_bytes),
        ] {
            match quota {
                Some(quota) => {
                    family.get_or_create(&labels).set(gauge(quota));
                }
                None => {
                    family.remove(&labels);
                }
            }
        }
        let mut buckets = self.inner.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.insert(bucket.to_owned());
    }

    /// Lets a backend add metrics of its own (an S3 endpoint's answers) to the ones served:
    /// `register` gets the registry, whose prefix `bucket_provisioner_` its names take too.
    pub fn register<T>(&self, register: impl FnOnce(&mut Registry) -> T) -> T {
        register(&mut self.inner.registry.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Drops the usage series of every bucket not in `current` (gone, or no longer bound).
    pub fn retain_bucket_usage(&self, current: &BTreeSet<String>) {
        let mut buckets = self.inner.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.retain(|bucket| {
            if current.contains(bucket) {
                return true;
            }
            let labels = BucketLabels { bucket: bucket.clone() };
            self.inner.bucket_objects.remove(&labels);
            self.inner.bucket_bytes.remove(&labels);
            self.inner.quota_objects.remove(&labels);
            self.inner.quota_bytes.remove(&labels);
            false
        });
    }

    /// Marks this process as running the controller (`bucket_provisioner_leading` 1) until the
    /// returned guard is dropped, however the controller ends.
    pub fn leading(&self) -> Leading {
        self.inner.leading.set(1);
        Leading { gauge: self.inner.leading.clone() }
    }

    /// The current values in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        let registry = self.inner.registry.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(err) = prometheus_client::encoding::text::encode(&mut text, &registry) {
            tracing::warn!(error = %err, "encoding the metrics failed");
        }
        text
    }
}

/// While alive, `bucket_provisioner_leading` is 1; see [`Metrics::leading`].
#[must_use = "the process counts as leading only while the guard lives"]
pub struct Leading {
    gauge: Gauge,
}

impl Drop for Leading {
    fn drop(&mut self) {
        self.gauge.set(0);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Serves GET /metrics (OpenMetrics text, correct content type), /healthz (200 "ok" while
/// [`Health::check`] passes, 503 with the reason otherwise), /readyz (200 when ready, 503
/// otherwise) until `shutdown` resolves.
///
/// After `shutdown` resolves no new connections are accepted and the call returns once the open
/// ones are done.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(live_handler))
        .route("/readyz", get(ready_handler))
        .with_state((metrics, health));
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

async fn metrics_handler(State((metrics, _)): State<(Metrics, Health)>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], metrics.encode())
}

async fn live_handler(State((_, health)): State<(Metrics, Health)>) -> impl IntoResponse {
    // Probes come every few seconds; what they are told is logged once a minute.
    static UNHEALTHY: LazyLock<SharedThrottle> = LazyLock::new(SharedThrottle::default);
    match health.check() {
        Ok(()) => {
            if UNHEALTHY.reset() {
                tracing::info!("reporting healthy again");
            }
            (StatusCode::OK, "ok".to_owned())
        }
        Err(problem) => {
            if let Some(held_back) = UNHEALTHY.allow() {
                tracing::warn!(%problem, repeats_since_last_report = held_back,
                    "reporting unhealthy");
            }
            (StatusCode::SERVICE_UNAVAILABLE, problem)
        }
    }
}

async fn ready_handler(State((_, health)): State<(Metrics, Health)>) -> impl IntoResponse {
    if health.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A response as read off the wire: status code, lower-cased header lines, body.
    struct Response {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Response {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
        }
    }

    async fn get(addr: std::net::SocketAddr, path: &str) -> Response {
        let mut stream = TcpStream::connect(addr).await.expect("connecting to the server");
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
            .await
            .expect("the server answered in time")
            .unwrap();
        let raw = String::from_utf8(raw).expect("a UTF-8 response");
        let (head, body) = raw.split_once("\r\n\r\n").expect("a complete HTTP response");
        let mut lines = head.lines();
        let status_line = lines.next().unwrap();
        let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let headers = lines
            .map(|line| {
                let (name, value) = line.split_once(':').unwrap();
                (name.trim().to_ascii_lowercase(), value.trim().to_owned())
            })
            .collect();
        Response { status, headers, body: body.to_owned() }
    }

    #[tokio::test]
    async fn serves_probes_and_metrics_over_http() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Metrics::new();
        let health = Health::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, metrics.clone(), health.clone(), async {
            let _ = stopped.await;
        }));

        let healthz = get(addr, "/healthz").await;
        assert_eq!((healthz.status, healthz.body.as_str()), (200, "ok"));

        assert_eq!(get(addr, "/readyz").await.status, 503);
        health.set_ready(true);
        let readyz = get(addr, "/readyz").await;
        assert_eq!((readyz.status, readyz.body.as_str()), (200, "ok"));
        health.set_ready(false);
        assert_eq!(get(addr, "/readyz").await.status, 503);

        let before = get(addr, "/metrics").await;
        assert!(before.body.contains("bucket_provisioner_reconciles_total 0\n"), "{}", before.body);
        metrics.reconcile();
        metrics.reconcile();
        metrics.error("backend");
        metrics.observe_provisioning("provision", 0.2);

        let after = get(addr, "/metrics").await;
        assert_eq!(after.status, 200);
        assert_eq!(after.header("content-type"), Some(OPENMETRICS_CONTENT_TYPE));
        assert!(after.body.contains("bucket_provisioner_reconciles_total 2\n"), "{}", after.body);
        assert!(
            after
                .body
                .contains("bucket_provisioner_reconcile_errors_total{reason=\"backend\"} 1\n"),
            "{}",
            after.body
        );
        assert!(
            after.body.contains(
                "bucket_provisioner_provisioning_duration_seconds_count{operation=\"provision\"} 1\n"
            ),
            "{}",
            after.body
        );
        assert!(after.body.ends_with("# EOF\n"), "{}", after.body);

        assert_eq!(get(addr, "/nothing-here").await.status, 404);

        stop.send(()).unwrap();
        let result = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server stopped after shutdown")
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
        assert!(TcpStream::connect(addr).await.is_err(), "the listener is closed");
    }

    #[test]
    fn names_and_types_are_as_documented() {
        let metrics = Metrics::new();
        metrics.reconcile();
        metrics.error("conflict");
        metrics.observe_provisioning("grant", 0.005);
        metrics.observe_provisioning("grant", 30.0);
        let text = metrics.encode();
        for expected in [
            "# TYPE bucket_provisioner_reconciles counter\n",
            "# TYPE bucket_provisioner_reconcile_errors counter\n",
            "# TYPE bucket_provisioner_provisioning_duration_seconds histogram\n",
            "# UNIT bucket_provisioner_provisioning_duration_seconds seconds\n",
            "# TYPE bucket_provisioner_claims gauge\n",
            "bucket_provisioner_reconciles_total 1\n",
            "bucket_provisioner_reconcile_errors_total{reason=\"conflict\"} 1\n",
            "bucket_provisioner_provisioning_duration_seconds_bucket{le=\"0.01\",operation=\"grant\"} 1\n",
            "bucket_provisioner_provisioning_duration_seconds_bucket{le=\"+Inf\",operation=\"grant\"} 2\n",
            "bucket_provisioner_provisioning_duration_seconds_count{operation=\"grant\"} 2\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        // The widest finite bucket reaches about two minutes.
        assert!(text.contains("le=\"120.0"), "{text}");
    }

    #[test]
    fn the_volume_side_exports_no_bucket_series() {
        let metrics = Metrics::for_volumes();
        metrics.reconcile();
        metrics.observe_provisioning("provision", 0.5);
        metrics.set_claims_by_phase(&[("Bound", 3)]);
        let text = metrics.encode();
        assert!(text.contains("bucket_provisioner_reconciles_total 1"), "{text}");
        assert!(text.contains("bucket_provisioner_provisioning_duration_seconds"), "{text}");
        assert!(text.contains("bucket_provisioner_leading 0"), "{text}");
        for absent in ["_claims{", "_bucket_objects", "_bucket_bytes", "_bucket_quota"] {
            assert!(!text.contains(absent), "{absent} exported by the volume side:\n{text}");
        }
        let buckets = Metrics::new().encode();
        assert!(buckets.contains("bucket_provisioner_claims{"), "{buckets}");
    }

    #[test]
    fn leading_lasts_as_long_as_its_guard() {
        let metrics = Metrics::new();
        assert!(metrics.encode().contains("bucket_provisioner_leading 0\n"));
        let guard = metrics.leading();
        let text = metrics.encode();
        assert!(text.contains("# TYPE bucket_provisioner_leading gauge\n"), "{text}");
        assert!(text.contains("bucket_provisioner_leading 1\n"), "{text}");
        drop(guard);
        assert!(metrics.encode().contains("bucket_provisioner_leading 0\n"));
    }

    #[test]
    fn bucket_usage_series_go_with_their_bucket() {
        let metrics = Metrics::new();
        let usage = |objects, bytes, max_bytes| BucketUsage {
            objects,
            bytes,
            max_bytes,
            ..BucketUsage::default()
        };
        metrics.set_bucket_usage("photos", &usage(3, 4096, Some(8192)));
        metrics.set_bucket_usage("logs", &usage(1, 10, None));
        let text = metrics.encode();
        assert!(text.contains("# TYPE bucket_provisioner_bucket_objects gauge\n"), "{text}");
        assert!(text.contains("# UNIT bucket_provisioner_bucket_bytes bytes\n"), "{text}");
        assert!(
            text.contains("bucket_provisioner_bucket_objects{bucket=\"photos\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("bucket_provisioner_bucket_bytes{bucket=\"photos\"} 4096\n"),
            "{text}"
        );

        let quota = "bucket_provisioner_bucket_quota_bytes{bucket=\"photos\"} 8192\n";
        assert!(text.contains(quota), "{text}");
        assert!(!text.contains("bucket_quota_bytes{bucket=\"logs\"}"), "no quota, no series");

        metrics.retain_bucket_usage(&BTreeSet::from(["logs".to_owned()]));
        let text = metrics.encode();
        assert!(!text.contains("bucket=\"photos\""), "{text}");
        assert!(text.contains("bucket_provisioner_bucket_bytes{bucket=\"logs\"} 10\n"), "{text}");
    }

    #[test]
    fn a_backends_own_metrics_are_served_with_the_prefix() {
        let metrics = Metrics::new();
        let answers = metrics.register(|registry| {
            let answers = Counter::<u64>::default();
            registry.register("backend_answers", "Answers of a backend", answers.clone());
            answers
        });
        answers.inc();
        let text = metrics.clone().encode();
        assert!(text.contains("bucket_provisioner_backend_answers_total 1\n"), "{text}");
        assert!(text.contains("bucket_provisioner_reconciles_total 0\n"), "{text}");
    }

    #[test]
    fn claim_phases_not_listed_drop_to_zero() {
        let metrics = Metrics::new();
        let text = metrics.encode();
        for phase in KNOWN_PHASES.map(ClaimPhase::as_str) {
            assert!(text.contains(&format!("bucket_provisioner_claims{{phase=\"{phase}\"}} 0\n")));
        }

        metrics.set_claims_by_phase(&[("Bound", 3), ("Pending", 1), ("Custom", 2)]);
        let text = metrics.encode();
        assert!(text.contains("bucket_provisioner_claims{phase=\"Bound\"} 3\n"), "{text}");
        assert!(text.contains("bucket_provisioner_claims{phase=\"Pending\"} 1\n"), "{text}");
        assert!(text.contains("bucket_provisioner_claims{phase=\"Custom\"} 2\n"), "{text}");
        assert!(text.contains("bucket_provisioner_claims{phase=\"Failed\"} 0\n"), "{text}");

        metrics.set_claims_by_phase(&[("Bound", 4)]);
        let text = metrics.encode();
        assert!(text.contains("bucket_provisioner_claims{phase=\"Bound\"} 4\n"), "{text}");
        assert!(text.contains("bucket_provisioner_claims{phase=\"Pending\"} 0\n"), "{text}");
        assert!(text.contains("bucket_provisioner_claims{phase=\"Custom\"} 0\n"), "{text}");
    }
}
