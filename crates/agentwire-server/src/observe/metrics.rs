//! Metrics in the Prometheus text format (OpenMetrics), with the official
//! Rust client (`prometheus-client`): no global registry, so each server
//! has its own. Label sets are bounded: binding, operation and outcome
//! take a few dozen values at most (the operations of the specification,
//! the error reasons and gRPC codes); no task id is ever a label.
//!
//! - `a2a_requests_total{binding,operation,outcome}`: requests answered.
//! - `a2a_request_duration_seconds{binding,operation}`: time to the
//!   response's head (a stream goes on after it), a histogram.
//!
//! - `a2a_store_operation_duration_seconds{store,operation}`: time of each
//!   task store operation (`create`, `update`, `get`, `list`, the push
//!   config operations...), a histogram; see `store_timing`.
//!
//! Read from the server's live state when scraped (nothing is counted on
//! the request path for them):
//!
//! - `a2a_active_streams`: event streams open (`SendStreamingMessage`,
//!   `SubscribeToTask`), and `a2a_waiting_calls`: blocking calls waiting
//!   for their answer (the tasks' other subscribers).
//! - `a2a_executor_turns_in_flight`: agent turns running.
//! - `a2a_live_tasks{state}`: the tasks this process holds live state for
//!   (being worked on or followed), by state; the store's tasks are not
//!   counted.
//! - `a2a_push_enqueued_total`, `a2a_push_delivered_total`,
//!   `a2a_push_failed_attempts_total`, `a2a_push_dropped_total`,
//!   `a2a_push_refused_total`, `a2a_push_streams_given_up_total`: push
//!   notifications (when push is on), and `a2a_push_outbox_pending`: those
//!   enqueued by this process not yet delivered or dropped.
//! - `a2a_admission_refused_total{reason}`: new work refused before it
//!   could hold anything: `caller_open_tasks` (a task refused because its
//!   caller holds as many open tasks as it may), `caller_running_bytes` (a
//!   send refused because its caller has as many bytes of messages being
//!   worked on as it may), `running_bytes` (a send refused because all
//!   callers together have as many bytes being worked on as may be),
//!   `caller_streams` (a stream refused because its
//!   caller has as many event streams open as it may), `incoming_bytes` (a
//!   request body refused because as many bytes are being received from
//!   its caller, or from all, as may be), `store_full` (a task or a
//!   message refused because the store is full), `in_flight` (a request
//!   refused because the server handles as many as it may at once).
//! - `a2a_tasks_purged_total{reason}`: tasks removed from the store without
//!   being asked by a client: `retention` (terminal tasks older than the
//!   retention, on any store), and, in the memory store, `finished_ttl`
//!   (finished tasks past their time to live), `open_task_ttl` (open tasks
//!   unchanged for their time to live) and `evicted` (finished tasks
//!   removed early to make room).
//! - `a2a_stream_queued_bytes`: bytes of events queued for all streams
//!   (bounded by `max_queued_bytes`), and `a2a_streams_cut_total{bound}`:
//!   streams closed because their reader fell behind, by the bound passed
//!   (`stream`: the stream's own `queue_bytes`; `server`: the total).
//! - `a2a_incoming_body_bytes`: bytes of request bodies being received and
//!   counted against `max_incoming_bytes` (bodies past 64 KiB, by their
//!   declared length), while the server is started with such a bound.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// The task states, as `a2a_live_tasks` labels them.
const STATES: [(agentwire_types::TaskState, &str); 8] = {
    use agentwire_types::TaskState as S;
    [
        (S::Submitted, "submitted"),
        (S::Working, "working"),
        (S::InputRequired, "input_required"),
        (S::AuthRequired, "auth_required"),
        (S::Completed, "completed"),
        (S::Canceled, "canceled"),
        (S::Failed, "failed"),
        (S::Rejected, "rejected"),
    ]
};

/// What a server's live tasks are doing, read when the metrics are
/// scraped.
#[derive(Debug, Default, Clone)]
pub(crate) struct LiveStats {
    pub(crate) streams: u64,
    pub(crate) waiting: u64,
    pub(crate) turns_in_flight: u64,
    pub(crate) states: [u64; STATES.len()],
    pub(crate) push: Option<crate::push::PushStats>,
    /// Unreadable task rows the store has met (`TaskStore::unreadable_rows`).
    pub(crate) unreadable_rows: u64,
    pub(crate) admission: crate::handler::AdmissionStats,
    /// Bytes queued for all streams now.
    pub(crate) queued_bytes: u64,
    /// Streams cut by their own bound, and by the server's, so far.
    pub(crate) streams_cut: [u64; 2],
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BoundLabels {
    bound: &'static str,
}

/// The `a2a_streams_cut_total` labels, in the order of
/// [`LiveStats::streams_cut`].
const BOUNDS: [&str; 2] = ["stream", "server"];

impl LiveStats {
    pub(crate) fn count_state(&mut self, state: agentwire_types::TaskState) {
        if let Some(i) = STATES.iter().position(|(s, _)| *s == state) {
            self.states[i] += 1;
        }
    }
}

type Probe = Box<dyn Fn() -> LiveStats + Send + Sync>;

/// The gauges and counters read from the live state at each scrape.
#[derive(Default)]
struct Live {
    streams: Gauge,
    waiting: Gauge,
    turns: Gauge,
    tasks: Family<StateLabels, Gauge>,
    push_enqueued: Counter,
    push_delivered: Counter,
    push_failed: Counter,
    push_dropped: Counter,
    push_refused: Counter,
    push_given_up: Counter,
    push_pending: Gauge,
    unreadable_rows: Counter,
    refused: Family<ReasonLabels, Counter>,
    purged: Family<ReasonLabels, Counter>,
    queued_bytes: Gauge,
    streams_cut: Family<BoundLabels, Counter>,
    incoming_bytes: Gauge,
}

/// A server's metrics (see the [module documentation](self)).
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
    store_ops: Family<super::store_timing::StoreOpLabels, super::store_timing::OpHistogram>,
    live: Live,
    probe: std::sync::OnceLock<Probe>,
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
        let store_ops = Family::default();
        registry.register_with_unit(
            "store_operation_duration",
            "Time of task store operations, by kind of store and operation",
            prometheus_client::registry::Unit::Seconds,
            store_ops.clone(),
        );
        let live = Live::default();
        registry.register(
            "active_streams",
            "Event streams open (SendStreamingMessage, SubscribeToTask)",
            live.streams.clone(),
        );
        registry.register(
            "waiting_calls",
            "Blocking calls waiting for their answer",
            live.waiting.clone(),
        );
        registry.register(
            "executor_turns_in_flight",
            "Agent turns running",
            live.turns.clone(),
        );
        registry.register(
            "live_tasks",
            "Tasks this process holds live state for (worked on or followed), by state",
            live.tasks.clone(),
        );
        for (name, help, c) in [
            (
                "push_enqueued",
                "Push notifications enqueued (one per event and config)",
                &live.push_enqueued,
            ),
            (
                "push_delivered",
                "Push notifications delivered (the webhook answered 2xx)",
                &live.push_delivered,
            ),
            (
                "push_failed_attempts",
                "Push delivery attempts that failed (error, timeout, non-2xx)",
                &live.push_failed,
            ),
            (
                "push_dropped",
                "Push notifications dropped (config failing, deleted or refused)",
                &live.push_dropped,
            ),
            (
                "push_refused",
                "Push deliveries refused by the URL policy at delivery time",
                &live.push_refused,
            ),
            (
                "push_streams_given_up",
                "Push streams given up after too many attempts",
                &live.push_given_up,
            ),
        ] {
            registry.register(name, help, c.clone());
        }
        registry.register(
            "store_unreadable_rows",
            "Task rows the store could not read (set aside at start-up, skipped in listings, \
             refused to a read): see docs/operations.md",
            live.unreadable_rows.clone(),
        );
        registry.register(
            "admission_refused",
            "New work refused before it could hold anything, by reason (caller_open_tasks, caller_running_bytes, running_bytes, caller_streams, incoming_bytes, store_full, in_flight)",
            live.refused.clone(),
        );
        registry.register(
            "tasks_purged",
            "Tasks removed from the store without a client asking, by reason (retention, finished_ttl, open_task_ttl, evicted)",
            live.purged.clone(),
        );
        registry.register(
            "push_outbox_pending",
            "Push notifications enqueued by this process not yet delivered or dropped",
            live.push_pending.clone(),
        );
        registry.register(
            "stream_queued_bytes",
            "Bytes of events queued for all event streams",
            live.queued_bytes.clone(),
        );
        registry.register(
            "streams_cut",
            "Event streams closed because their reader fell behind, by the bound passed \
             (stream: its own queue; server: all streams together)",
            live.streams_cut.clone(),
        );
        registry.register(
            "incoming_body_bytes",
            "Bytes of request bodies being received and counted against max_incoming_bytes \
             (bodies past 64 KiB, by their declared length)",
            live.incoming_bytes.clone(),
        );
        for bound in BOUNDS {
            drop(live.streams_cut.get_or_create(&BoundLabels { bound }));
        }
        Self {
            registry,
            requests,
            latency,
            store_ops,
            live,
            probe: std::sync::OnceLock::new(),
        }
    }

    /// Reads the live gauges from `probe` at each scrape (the first probe
    /// set stays).
    pub(crate) fn set_probe(&self, probe: impl Fn() -> LiveStats + Send + Sync + 'static) {
        let _ = self.probe.set(Box::new(probe));
    }

    /// Brings the live gauges up to date.
    fn refresh(&self) {
        let Some(probe) = self.probe.get() else {
            return;
        };
        let s = probe();
        let g = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
        self.live.streams.set(g(s.streams));
        self.live.waiting.set(g(s.waiting));
        self.live.turns.set(g(s.turns_in_flight));
        for ((_, name), n) in STATES.iter().zip(s.states) {
            self.live
                .tasks
                .get_or_create(&StateLabels { state: name })
                .set(g(n));
        }
        // Counters only go up: each takes what it lacks.
        let to = |c: &Counter, v: u64| {
            let now = c.get();
            if v > now {
                c.inc_by(v - now);
            }
        };
        to(&self.live.unreadable_rows, s.unreadable_rows);
        let a = &s.admission;
        for (reason, n) in [
            ("caller_open_tasks", a.refused_caller_bound),
            ("caller_running_bytes", a.refused_running_bytes),
            ("running_bytes", a.refused_running_total),
            ("caller_streams", a.refused_streams),
            ("incoming_bytes", a.refused_incoming),
            ("store_full", a.refused_store_full),
            ("in_flight", a.refused_in_flight),
        ] {
            to(
                &self.live.refused.get_or_create(&ReasonLabels { reason }),
                n,
            );
        }
        for (reason, n) in [
            ("retention", a.purged_retention),
            ("finished_ttl", a.expired.finished_ttl),
            ("open_task_ttl", a.expired.open_ttl),
            ("evicted", a.expired.evicted),
        ] {
            to(&self.live.purged.get_or_create(&ReasonLabels { reason }), n);
        }
        self.live.queued_bytes.set(g(s.queued_bytes));
        self.live.incoming_bytes.set(g(a.incoming_bytes));
        for (bound, n) in BOUNDS.into_iter().zip(s.streams_cut) {
            to(
                &self.live.streams_cut.get_or_create(&BoundLabels { bound }),
                n,
            );
        }
        if let Some(p) = s.push {
            to(&self.live.push_enqueued, p.enqueued);
            to(&self.live.push_delivered, p.delivered);
            to(&self.live.push_failed, p.failed_attempts);
            to(&self.live.push_dropped, p.dropped);
            to(&self.live.push_refused, p.refused);
            to(&self.live.push_given_up, p.configs_failed);
            self.live
                .push_pending
                .set(g(p.enqueued.saturating_sub(p.delivered + p.dropped)));
        }
    }

    /// The histogram of a store operation (created at zero on first use).
    pub(crate) fn store_histogram(
        &self,
        store: &'static str,
        operation: &'static str,
    ) -> super::store_timing::OpHistogram {
        self.store_ops
            .get_or_create(&super::store_timing::StoreOpLabels { store, operation })
            .clone()
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
        self.refresh();
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
