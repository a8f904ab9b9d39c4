//! Metrics in the Prometheus text format (OpenMetrics), with the official
//! Rust client (`prometheus-client`): no global registry, so each server
//! has its own. Label sets are bounded: binding, operation and outcome
//! take a few dozen values at most (the operations of the specification,
//! the error reasons and gRPC codes); no task id is ever a label.
//!
//! - `a2a_requests_total{binding,operation,outcome}`: requests answered.
//! - `a2a_request_duration_seconds{binding,operation}`: time to the
//!   response's head (a stream goes on after it), a histogram.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The media type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The path metrics are served on.
pub const METRICS_PATH: &str = "/metrics";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    binding: &'static str,
    operation: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    binding: &'static str,
    operation: &'static str,
}

/// The latency buckets, in seconds: 0.5 ms to 10 s.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A server's metrics (see the [module documentation](self)).
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// The metrics of a new server, all at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("a2a");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by binding, operation and outcome (ok, or the error's reason)",
            requests.clone(),
        );
        let latency = Family::<LatencyLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            histogram as fn() -> Histogram,
        );
        registry.register_with_unit(
            "request_duration",
            "Time from a request to its response's head, by binding and operation",
            prometheus_client::registry::Unit::Seconds,
            latency.clone(),
        );
        Self {
            registry,
            requests,
            latency,
        }
    }

    /// A request was answered.
    pub(crate) fn request_answered(
        &self,
        binding: &'static str,
        operation: &'static str,
        outcome: &'static str,
        latency: Duration,
    ) {
        let operation = if operation.is_empty() {
            "other"
        } else {
            operation
        };
        self.requests
            .get_or_create(&RequestLabels {
                binding,
                operation,
                outcome,
            })
            .inc();
        self.latency
            .get_or_create(&LatencyLabels { binding, operation })
            .observe(latency.as_secs_f64());
    }

    /// The metrics in the OpenMetrics text format ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            // Writing to a String does not fail.
            out.clear();
        }
        out
    }
}

/// A router serving `metrics` as `/metrics` alone (for a port of its own).
pub fn router(metrics: Arc<Metrics>) -> axum::Router {
    route(axum::Router::new(), metrics)
}

/// The `/metrics` route of a server's metrics.
pub(crate) fn route<S>(router: axum::Router<S>, metrics: Arc<Metrics>) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router.route(
        METRICS_PATH,
        axum::routing::get(move || {
            let metrics = Arc::clone(&metrics);
            async move {
                (
                    [(http::header::CONTENT_TYPE, CONTENT_TYPE)],
                    metrics.render(),
                )
            }
        }),
    )
}
