//! Push notifications (spec 3.1.7-3.1.10, 4.3, 13.2): webhook configs,
//! reliable ordered delivery through an outbox, signed notifications and
//! SSRF protection.
//!
//! Turn it on with [`crate::A2aServer::push`] (or
//! [`crate::HandlerBuilder::push`]): the card then declares
//! `capabilities.pushNotifications`, the four config operations and the
//! inline config of `SendMessage` work, and every task update (the task at
//! creation, then each status and artifact event) is POSTed to each of the
//! task's webhooks as a `StreamResponse` (ProtoJSON,
//! `Content-Type: application/a2a+json`). A config registered by an A2A
//! 0.3 client (through the compatibility layer; the store keeps its
//! [`PushFormat`](crate::store::PushFormat)) gets what 0.3 servers post
//! instead: the whole task after each event, in its 0.3 JSON form.
//!
//! # Delivery
//!
//! The task manager hands each applied event to the [`PushOutbox`] while it
//! holds the task's order lock (so the outbox order is the event order),
//! and returns: no webhook is ever called on the agent's path. A background
//! worker leases the heads of the (task, config) streams and POSTs them,
//! one at a time per stream, in order, with
//!
//! - `Authorization: {scheme} {credentials}` from the config's
//!   `authentication`;
//! - `X-A2A-Notification-Token`: the config's `token`;
//! - `X-A2A-Notification-Id`: a unique id, the same on every retry (receivers
//!   dedupe on it);
//! - `X-A2A-Notification-Sequence`: the position in the stream (1, 2, ...);
//! - `X-A2A-Notification-Signature`: a JWT signed with the server's Ed25519
//!   key (see [`PushSigner`]; public keys at [`JWKS_PATH`]).
//!
//! A 2xx answer acknowledges it; anything else (or no answer within the
//! attempt timeout, 10 s by default) is retried with exponential backoff
//! and jitter. After [`RetryPolicy::max_attempts`] failed attempts the
//! config is marked failing: a `tracing` warning, the
//! [`PushMetrics::configs_failed`] counter, and its pending notifications
//! are dropped (counted in [`PushMetrics::dropped`]) until the config is
//! created again.
//!
//! With a durable outbox ([`SqliteOutbox`]) nothing enqueued is lost by a
//! restart: the new process resumes the streams (a stream leased by the dead
//! process waits for its lease to expire). A notification whose 2xx arrived
//! just before a crash may be sent again, with the same id.

mod outbox;
mod sign;
mod ssrf;
mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use agentwire_types::{A2aError, A2aResult, StreamResponse, TaskPushNotificationConfig};
use bytes::Bytes;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[cfg(feature = "postgres")]
pub use outbox::PostgresOutbox;
#[cfg(feature = "sqlite")]
pub use outbox::SqliteOutbox;
pub use outbox::{Leased, MemoryOutbox, Notification, PushOutbox};
pub use sign::{PushSigner, body_sha256_hex};
pub use ssrf::{Refused, UrlPolicy, is_loopback_host, refusal_in, special_purpose};

/// Where the server publishes the public keys of its push signatures.
pub const JWKS_PATH: &str = "/.well-known/a2a-push-jwks.json";
/// Header carrying the config's `token`.
pub const TOKEN_HEADER: &str = "X-A2A-Notification-Token";
/// Header carrying the notification's unique id.
pub const ID_HEADER: &str = "X-A2A-Notification-Id";
/// Header carrying the notification's position in its stream.
pub const SEQUENCE_HEADER: &str = "X-A2A-Notification-Sequence";
/// Header carrying the signed JWT.
pub const SIGNATURE_HEADER: &str = "X-A2A-Notification-Signature";

/// Retries and timeouts of webhook calls.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts of one notification before the config is marked failing.
    pub max_attempts: u32,
    /// Wait after the first failure; doubled after each one.
    pub initial_backoff: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
    /// Bound on one attempt (connect, send, answer).
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The wait after `failures` failed attempts: `initial * 2^(failures-1)`
    /// capped at `max_backoff`, with jitter (between half and all of it).
    pub fn backoff(&self, failures: u32, jitter: f64) -> Duration {
        let exp = failures.saturating_sub(1).min(30);
        let base = self
            .initial_backoff
            .saturating_mul(1u32 << exp)
            .min(self.max_backoff);
        base.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

/// How the server sends push notifications.
#[derive(Clone)]
pub struct PushConfig {
    pub(crate) policy: UrlPolicy,
    pub(crate) retry: RetryPolicy,
    pub(crate) signer: Option<PushSigner>,
    pub(crate) outbox: Option<Arc<dyn PushOutbox>>,
    pub(crate) concurrency: usize,
    pub(crate) lease: Option<Duration>,
    pub(crate) poll_interval: Duration,
}

impl std::fmt::Debug for PushConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConfig")
            .field("policy", &self.policy)
            .field("retry", &self.retry)
            .field("signer", &self.signer)
            .field("durable_outbox", &self.outbox.is_some())
            .field("concurrency", &self.concurrency)
            .finish()
    }
}

impl Default for PushConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl PushConfig {
    /// Push with the defaults: public webhooks only, 10 attempts from 0.5 s
    /// to 60 s apart, 10 s per attempt, notifications signed with a key
    /// generated at start, an in-memory outbox, 64 webhooks called at once.
    pub fn new() -> Self {
        Self {
            policy: UrlPolicy::new(),
            retry: RetryPolicy::default(),
            signer: None,
            outbox: None,
            concurrency: 64,
            lease: None,
            poll_interval: Duration::from_secs(1),
        }
    }

    /// The webhook URL policy.
    pub fn url_policy(mut self, policy: UrlPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Allows loopback webhooks (development, tests).
    pub fn allow_loopback(mut self) -> Self {
        self.policy = self.policy.allow_loopback();
        self
    }

    /// Retries and timeouts.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Signs notifications with this key (default: a key generated at
    /// start).
    pub fn signer(mut self, signer: PushSigner) -> Self {
        self.signer = Some(signer);
        self
    }

    /// Where notifications wait (default: in memory). Use a
    /// [`SqliteOutbox`] so that a restart loses none.
    pub fn outbox(mut self, outbox: Arc<dyn PushOutbox>) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// How many webhooks are called at once (default 64).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// How long a worker owns a stream it is delivering (default: twice the
    /// attempt timeout plus a second). A stream leased by a worker that
    /// died is resumed after this.
    pub fn lease(mut self, d: Duration) -> Self {
        self.lease = Some(d);
        self
    }

    /// How often the worker looks at the outbox besides being woken (other
    /// processes sharing a durable outbox, expired leases); default 1 s.
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.poll_interval = d.max(Duration::from_millis(10));
        self
    }
}

/// Counters of the push sender (monotonic).
#[derive(Debug, Default)]
pub struct PushMetrics {
    /// Notifications enqueued (one per event and config).
    pub enqueued: AtomicU64,
    /// Notifications delivered (2xx).
    pub delivered: AtomicU64,
    /// Attempts that failed (error, timeout, non-2xx).
    pub failed_attempts: AtomicU64,
    /// Streams given up after too many attempts: their config is marked
    /// failing.
    pub configs_failed: AtomicU64,
    /// Notifications dropped because their config was failing, deleted or
    /// refused.
    pub dropped: AtomicU64,
    /// Deliveries refused by the URL policy at delivery time (address
    /// resolved to a forbidden range).
    pub refused: AtomicU64,
    /// Events that could not be enqueued (outbox errors).
    pub enqueue_errors: AtomicU64,
}

/// A copy of the counters at one time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushStats {
    /// See [`PushMetrics::enqueued`].
    pub enqueued: u64,
    /// See [`PushMetrics::delivered`].
    pub delivered: u64,
    /// See [`PushMetrics::failed_attempts`].
    pub failed_attempts: u64,
    /// See [`PushMetrics::configs_failed`].
    pub configs_failed: u64,
    /// See [`PushMetrics::dropped`].
    pub dropped: u64,
    /// See [`PushMetrics::refused`].
    pub refused: u64,
    /// See [`PushMetrics::enqueue_errors`].
    pub enqueue_errors: u64,
}

impl PushMetrics {
    /// The counters now.
    pub fn snapshot(&self) -> PushStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PushStats {
            enqueued: g(&self.enqueued),
            delivered: g(&self.delivered),
            failed_attempts: g(&self.failed_attempts),
            configs_failed: g(&self.configs_failed),
            dropped: g(&self.dropped),
            refused: g(&self.refused),
            enqueue_errors: g(&self.enqueue_errors),
        }
    }
}

pub(crate) fn bump(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

struct SenderInner {
    outbox: Arc<dyn PushOutbox>,
    policy: Arc<UrlPolicy>,
    signer: Option<PushSigner>,
    metrics: Arc<PushMetrics>,
    wake: Arc<Notify>,
    stop: CancellationToken,
    started: AtomicBool,
    worker: worker::WorkerSettings,
}

impl Drop for SenderInner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The push sender of a handler: enqueues notifications and runs the
/// delivery worker. Cheap to clone; the worker stops when the last clone is
/// dropped or [`PushSender::stop`] is called.
#[derive(Clone)]
pub struct PushSender {
    inner: Arc<SenderInner>,
}

impl std::fmt::Debug for PushSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushSender")
            .field("metrics", &self.inner.metrics.snapshot())
            .finish()
    }
}

impl PushSender {
    /// A sender for `config`. The worker starts with the first use inside a
    /// tokio runtime (or at once when built inside one).
    pub fn new(config: PushConfig) -> A2aResult<Self> {
        let signer = match config.signer {
            Some(s) => Some(s),
            None => Some(PushSigner::generate()?),
        };
        let policy = Arc::new(config.policy);
        let lease = config
            .lease
            .unwrap_or(config.retry.attempt_timeout * 2 + Duration::from_secs(1));
        let sender = Self {
            inner: Arc::new(SenderInner {
                outbox: config
                    .outbox
                    .unwrap_or_else(|| Arc::new(MemoryOutbox::new())),
                policy: Arc::clone(&policy),
                signer,
                metrics: Arc::new(PushMetrics::default()),
                wake: Arc::new(Notify::new()),
                stop: CancellationToken::new(),
                started: AtomicBool::new(false),
                worker: worker::WorkerSettings {
                    retry: config.retry,
                    concurrency: config.concurrency,
                    lease,
                    poll_interval: config.poll_interval,
                    policy,
                },
            }),
        };
        sender.ensure_started();
        Ok(sender)
    }

    /// Starts the worker if it is not running and a runtime is available.
    pub(crate) fn ensure_started(&self) {
        let i = &self.inner;
        if i.started.load(Ordering::Acquire) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if i.started.swap(true, Ordering::AcqRel) {
            return;
        }
        match worker::Worker::new(
            i.worker.clone(),
            Arc::clone(&i.outbox),
            i.signer.clone(),
            Arc::clone(&i.metrics),
            Arc::clone(&i.wake),
            i.stop.clone(),
        ) {
            Ok(w) => {
                rt.spawn(w.run());
            }
            Err(e) => {
                i.started.store(false, Ordering::Release);
                tracing::error!(error = %e, "push: cannot start the delivery worker");
            }
        }
    }

    /// The counters.
    pub fn metrics(&self) -> &PushMetrics {
        &self.inner.metrics
    }

    /// The outbox.
    pub fn outbox(&self) -> &Arc<dyn PushOutbox> {
        &self.inner.outbox
    }

    /// The signer, when notifications are signed.
    pub fn signer(&self) -> Option<&PushSigner> {
        self.inner.signer.as_ref()
    }

    /// The JWKS document of the signer.
    pub fn jwks_json(&self) -> Option<Bytes> {
        self.inner.signer.as_ref().map(PushSigner::jwks_json)
    }

    /// Stops the delivery worker at once, as a crash would: attempts in
    /// flight are abandoned and their leases left to expire. Notifications
    /// still enqueued stay in the outbox.
    pub fn stop(&self) {
        self.inner.stop.cancel();
    }

    /// Checks a webhook URL against the policy (scheme, host, addresses).
    pub(crate) async fn check_url(&self, url: &str, field: &str) -> A2aResult<()> {
        if url.is_empty() {
            return Err(A2aError::invalid_params(field, "a webhook URL is required"));
        }
        self.inner.policy.check_webhook(url).await.map_err(|r| {
            A2aError::invalid_params(
                field,
                format!(
                    "webhook URL refused: {}; push notifications are only sent to public http(s) \
                     endpoints (SSRF protection, A2A spec 13.2) unless the server operator \
                     allow-lists the address",
                    r.0
                ),
            )
        })
    }

    /// Hands one event of a task to the outbox for each config, then wakes
    /// the worker. Never calls a webhook.
    pub(crate) async fn enqueue(
        &self,
        task_id: &str,
        configs: &[TaskPushNotificationConfig],
        event: &StreamResponse,
    ) {
        if configs.is_empty() {
            return;
        }
        let is_final = event.state().is_some_and(|s| s.is_terminal());
        match serde_json::to_vec(event) {
            Ok(b) => self.enqueue_body(task_id, configs, b, is_final).await,
            Err(e) => {
                tracing::error!(task = %task_id, error = %e, "push: cannot serialize an event");
            }
        }
    }

    /// Hands the task as one of its events left it to the outbox for each
    /// config registered by a 0.3 client: the 0.3 notification is the task
    /// in its 0.3 JSON form (converted by the one conversion layer,
    /// `agentwire_types::v0_3`). `is_final`: the event ended the task.
    pub(crate) async fn enqueue_v03(
        &self,
        task_id: &str,
        configs: &[TaskPushNotificationConfig],
        task: agentwire_types::Task,
        is_final: bool,
    ) {
        if configs.is_empty() {
            return;
        }
        let task = agentwire_types::v0_3::convert::task_to_v03(task);
        match serde_json::to_vec(&task) {
            Ok(b) => self.enqueue_body(task_id, configs, b, is_final).await,
            Err(e) => {
                tracing::error!(task = %task_id, error = %e, "push: cannot serialize a 0.3 task");
            }
        }
    }

    async fn enqueue_body(
        &self,
        task_id: &str,
        configs: &[TaskPushNotificationConfig],
        body: Vec<u8>,
        is_final: bool,
    ) {
        self.ensure_started();
        let body = Bytes::from(body);
        match self
            .inner
            .outbox
            .enqueue(task_id, configs, body, is_final)
            .await
        {
            Ok(()) => {
                bump(&self.inner.metrics.enqueued, configs.len() as u64);
                self.inner.wake.notify_one();
            }
            Err(e) => {
                bump(&self.inner.metrics.enqueue_errors, 1);
                tracing::error!(task = %task_id, error = %e, "push: cannot enqueue a notification");
            }
        }
    }

    /// A config was created or replaced.
    pub(crate) async fn config_saved(&self, config: &TaskPushNotificationConfig) -> A2aResult<()> {
        self.ensure_started();
        self.inner.outbox.reset(config).await
    }

    /// A config was deleted: nothing more is sent to it.
    pub(crate) async fn config_deleted(&self, task_id: &str, config_id: &str) -> A2aResult<()> {
        let dropped = self.inner.outbox.remove(task_id, config_id).await?;
        bump(&self.inner.metrics.dropped, dropped);
        Ok(())
    }
}
