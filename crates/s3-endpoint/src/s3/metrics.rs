//! The endpoint's own metrics, registered by the binary into the registry it serves.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::store::LifecyclePassReport;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: String,
}

/// The endpoint's answers by status class, for its error-rate alert, and how its lifecycle
/// passes keep up. Clones count into the same series.
#[derive(Clone, Debug, Default)]
pub struct EndpointMetrics {
    responses: Family<CodeLabels, Counter>,
    sessions: Family<CodeLabels, Counter>,
    lifecycle_examined: Counter,
    lifecycle_lag: Gauge,
    lifecycle_unfinished: Gauge,
}

impl EndpointMetrics {
    /// Fresh metrics registered into `registry` as `s3_responses`, under the registry's prefix:
    /// `bucket_provisioner_s3_responses_total{code="2xx"}` in the provisioner's.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "s3_responses",
            "Answers of a backend's own S3 endpoint (hostPath), by status class",
            metrics.responses.clone(),
        );
        registry.register(
            "s3_web_identity_sessions",
            "AssumeRoleWithWebIdentity answers: code \"granted\", or the STS error code",
            metrics.sessions.clone(),
        );
        registry.register(
            "s3_lifecycle_objects_examined",
            "Objects, versions and uploads the lifecycle passes examined (what their budget counts)",
            metrics.lifecycle_examined.clone(),
        );
        registry.register(
            "s3_lifecycle_lag_seconds",
            "How far behind lifecycle expiry runs: of the buckets with rules, the longest time \
             since the start of a bucket's last complete walk, at the end of the last pass",
            metrics.lifecycle_lag.clone(),
        );
        registry.register(
            "s3_lifecycle_unfinished_buckets",
            "Buckets whose lifecycle walk the last pass's budget left unfinished",
            metrics.lifecycle_unfinished.clone(),
        );
        metrics
    }

    /// Records what a lifecycle pass did and where it left expiry.
    pub fn lifecycle_pass(&self, report: &LifecyclePassReport) {
        self.lifecycle_examined.inc_by(report.examined);
        let lag = i64::try_from(report.lag.as_secs()).unwrap_or(i64::MAX);
        self.lifecycle_lag.set(lag);
        self.lifecycle_unfinished.set(i64::try_from(report.unfinished).unwrap_or(i64::MAX));
    }

    /// Counts one `AssumeRoleWithWebIdentity` answer: `granted`, or STS's error code.
    pub fn web_identity(&self, code: &str) {
        self.sessions.get_or_create(&CodeLabels { code: code.to_owned() }).inc();
    }

    /// Counts one answer of HTTP status `status` under its class (`2xx`, `4xx`, ...).
    pub fn answered(&self, status: u16) {
        let code = format!("{}xx", status / 100);
        self.responses.get_or_create(&CodeLabels { code }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_counted_by_status_class_under_the_registry_prefix() {
        let mut registry = Registry::with_prefix("bucket_provisioner");
        let metrics = EndpointMetrics::register(&mut registry);
        for status in [200, 204, 404, 503] {
            metrics.clone().answered(status);
        }
        for code in ["granted", "granted", "AccessDenied"] {
            metrics.web_identity(code);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "bucket_provisioner_s3_responses_total{code=\"2xx\"} 2\n",
            "bucket_provisioner_s3_responses_total{code=\"4xx\"} 1\n",
            "bucket_provisioner_s3_responses_total{code=\"5xx\"} 1\n",
            "bucket_provisioner_s3_web_identity_sessions_total{code=\"granted\"} 2\n",
            "bucket_provisioner_s3_web_identity_sessions_total{code=\"AccessDenied\"} 1\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn lifecycle_passes_report_their_work_and_lag() {
        let mut registry = Registry::with_prefix("bucket_provisioner");
        let metrics = EndpointMetrics::register(&mut registry);
        let report = LifecyclePassReport {
            examined: 7,
            unfinished: 1,
            lag: std::time::Duration::from_secs(3600),
            ..LifecyclePassReport::default()
        };
        metrics.lifecycle_pass(&report);
        metrics.lifecycle_pass(&LifecyclePassReport { examined: 3, ..report });
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "bucket_provisioner_s3_lifecycle_objects_examined_total 10\n",
            "bucket_provisioner_s3_lifecycle_lag_seconds 3600\n",
            "bucket_provisioner_s3_lifecycle_unfinished_buckets 1\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
