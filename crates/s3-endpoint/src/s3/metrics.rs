//! The endpoint's own metrics, registered by the binary into the registry it serves.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: String,
}

/// The endpoint's answers by status class, for its error-rate alert. Clones count into the
/// same series.
#[derive(Clone, Debug, Default)]
pub struct EndpointMetrics {
    responses: Family<CodeLabels, Counter>,
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
        metrics
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
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "bucket_provisioner_s3_responses_total{code=\"2xx\"} 2\n",
            "bucket_provisioner_s3_responses_total{code=\"4xx\"} 1\n",
            "bucket_provisioner_s3_responses_total{code=\"5xx\"} 1\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
