//! The delivery worker: leases stream heads from the outbox and POSTs them.

use std::sync::Arc;
use std::time::Duration;

use agentwire_types::{A2aError, A2aResult, MEDIA_TYPE};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use super::outbox::{Notification, PushOutbox, now_ms};
use super::ssrf::{UrlPolicy, refusal_in};
use super::{
    ID_HEADER, PushMetrics, PushSigner, RetryPolicy, SEQUENCE_HEADER, SIGNATURE_HEADER,
    TOKEN_HEADER, bump,
};

#[derive(Debug, Clone)]
pub(crate) struct WorkerSettings {
    pub(crate) retry: RetryPolicy,
    pub(crate) concurrency: usize,
    pub(crate) lease: Duration,
    pub(crate) poll_interval: Duration,
    pub(crate) policy: Arc<UrlPolicy>,
}

/// Everything a delivery needs (shared by the worker's tasks).
struct Shared {
    settings: WorkerSettings,
    owner: String,
    outbox: Arc<dyn PushOutbox>,
    signer: Option<PushSigner>,
    metrics: Arc<PushMetrics>,
    wake: Arc<Notify>,
    stop: CancellationToken,
    http: reqwest::Client,
}

pub(crate) struct Worker {
    shared: Arc<Shared>,
}

/// How one attempt ended.
enum Outcome {
    Delivered,
    /// Worth retrying.
    Failed(String),
    /// The URL policy refused the address: no retry.
    Refused(String),
}

/// A number in [0, 1) from the system's random source.
fn jitter() -> f64 {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 8];
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

impl Worker {
    pub(crate) fn new(
        settings: WorkerSettings,
        outbox: Arc<dyn PushOutbox>,
        signer: Option<PushSigner>,
        metrics: Arc<PushMetrics>,
        wake: Arc<Notify>,
        stop: CancellationToken,
    ) -> A2aResult<Self> {
        // reqwest is built without a crypto provider of its own (see the
        // workspace's Cargo.toml): *ring*, unless the application chose one.
        crate::serving::tls::crypto_provider();
        // Every address connected to is checked; redirects are not followed
        // (a webhook answers, it does not send the notification elsewhere);
        // no proxy (the checked address would be the proxy's).
        let http = settings
            .policy
            .guard(reqwest::Client::builder(), 0)
            .connect_timeout(settings.retry.attempt_timeout)
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(concat!("agentwire-push/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| A2aError::internal(format!("push: building the HTTP client: {e}")))?;
        Ok(Self {
            shared: Arc::new(Shared {
                settings,
                owner: agentwire_types::new_id(),
                outbox,
                signer,
                metrics,
                wake,
                stop,
                http,
            }),
        })
    }

    pub(crate) async fn run(self) {
        let s = &self.shared;
        let permits = Arc::new(Semaphore::new(s.settings.concurrency));
        let lease_ms = s.settings.lease.as_millis() as i64;
        loop {
            if s.stop.is_cancelled() {
                break;
            }
            let mut wait = s.settings.poll_interval;
            let free = permits.available_permits();
            if free > 0 {
                let now = now_ms();
                match s.outbox.lease(&s.owner, now, lease_ms, free).await {
                    Ok(leased) => {
                        if let Some(due) = leased.next_due_ms {
                            let until = Duration::from_millis((due - now).max(0) as u64);
                            wait = wait.min(until.max(Duration::from_millis(1)));
                        }
                        for n in leased.items {
                            let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                                break;
                            };
                            let shared = Arc::clone(&self.shared);
                            tokio::spawn(async move {
                                shared.deliver_stream(n).await;
                                drop(permit);
                                shared.wake.notify_one();
                            });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "push: cannot lease notifications"),
                }
            }
            tokio::select! {
                () = s.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
                () = s.stop.cancelled() => break,
            }
        }
        tracing::debug!("push: delivery worker stopped");
    }
}

impl Shared {
    /// Delivers a stream head and, while they keep succeeding, the
    /// notifications after it.
    async fn deliver_stream(&self, mut n: Notification) {
        let lease_ms = self.settings.lease.as_millis() as i64;
        loop {
            let outcome = tokio::select! {
                o = self.attempt(&n) => o,
                () = self.stop.cancelled() => return,
            };
            match outcome {
                Outcome::Delivered => {
                    bump(&self.metrics.delivered, 1);
                    match self.outbox.ack(&self.owner, &n, now_ms(), lease_ms).await {
                        Ok(Some(next)) if !self.stop.is_cancelled() => n = next,
                        Ok(_) => return,
                        Err(e) => {
                            tracing::warn!(task = %n.task_id, error = %e, "push: cannot record a delivery");
                            return;
                        }
                    }
                }
                Outcome::Refused(why) => {
                    bump(&self.metrics.refused, 1);
                    tracing::warn!(
                        task = %n.task_id,
                        config = %n.config.id,
                        reason = %why,
                        "push: webhook address refused by the URL policy; config marked failing"
                    );
                    self.give_up(&n).await;
                    return;
                }
                Outcome::Failed(why) => {
                    bump(&self.metrics.failed_attempts, 1);
                    let failures = n.attempts + 1;
                    if failures >= self.settings.retry.max_attempts {
                        tracing::warn!(
                            task = %n.task_id,
                            config = %n.config.id,
                            attempts = failures,
                            last_error = %why,
                            "push: webhook keeps failing; config marked failing"
                        );
                        self.give_up(&n).await;
                    } else {
                        let wait = self.settings.retry.backoff(failures, jitter());
                        tracing::debug!(
                            task = %n.task_id,
                            config = %n.config.id,
                            attempt = failures,
                            retry_in_ms = wait.as_millis() as u64,
                            error = %why,
                            "push: delivery failed; will retry"
                        );
                        let due = now_ms() + wait.as_millis() as i64;
                        if let Err(e) = self.outbox.retry(&self.owner, &n, due).await {
                            tracing::warn!(task = %n.task_id, error = %e, "push: cannot schedule a retry");
                        }
                    }
                    return;
                }
            }
        }
    }

    async fn give_up(&self, n: &Notification) {
        bump(&self.metrics.configs_failed, 1);
        match self.outbox.fail(&n.task_id, &n.config.id).await {
            Ok(dropped) => bump(&self.metrics.dropped, dropped),
            Err(e) => {
                tracing::warn!(task = %n.task_id, error = %e, "push: cannot mark a config failing")
            }
        }
    }

    /// One POST of one notification (in a span of its own, whose trace
    /// context the request carries, when traces are on).
    async fn attempt(&self, n: &Notification) -> Outcome {
        #[cfg(feature = "otel")]
        if crate::observe::otel::enabled() {
            use tracing::Instrument as _;
            let span = crate::observe::otel::push_span(&n.task_id);
            return self.attempt_now(n).instrument(span).await;
        }
        self.attempt_now(n).await
    }

    async fn attempt_now(&self, n: &Notification) -> Outcome {
        let url = match self.settings.policy.check_url(&n.config.url) {
            Ok(u) => u,
            Err(r) => return Outcome::Refused(r.0),
        };
        let mut req = self
            .http
            .post(url)
            .timeout(self.settings.retry.attempt_timeout)
            .header(http::header::CONTENT_TYPE, MEDIA_TYPE)
            .header(ID_HEADER, &n.id)
            .header(SEQUENCE_HEADER, n.seq.to_string());
        if let Some(auth) = &n.config.authentication {
            if !auth.scheme.is_empty() {
                let value = if auth.credentials.is_empty() {
                    auth.scheme.clone()
                } else {
                    format!("{} {}", auth.scheme, auth.credentials)
                };
                match http::HeaderValue::from_str(&value) {
                    Ok(mut v) => {
                        v.set_sensitive(true);
                        req = req.header(http::header::AUTHORIZATION, v);
                    }
                    Err(_) => {
                        return Outcome::Refused(
                            "the config's authentication is not a valid header value".to_owned(),
                        );
                    }
                }
            }
        }
        if !n.config.token.is_empty() {
            match http::HeaderValue::from_str(&n.config.token) {
                Ok(mut v) => {
                    v.set_sensitive(true);
                    req = req.header(TOKEN_HEADER, v);
                }
                Err(_) => {
                    return Outcome::Refused(
                        "the config's token is not a valid header value".to_owned(),
                    );
                }
            }
        }
        if let Some(signer) = &self.signer {
            let jwt = signer.sign(&n.config.url, &n.id, &n.task_id, n.seq, &n.body);
            req = req.header(SIGNATURE_HEADER, jwt);
        }
        #[cfg(feature = "otel")]
        if crate::observe::otel::enabled() {
            req = crate::observe::otel::inject_http(req);
        }
        match req.body(n.body.clone()).send().await {
            Ok(resp) if resp.status().is_success() => Outcome::Delivered,
            Ok(resp) => Outcome::Failed(format!("the webhook answered {}", resp.status())),
            Err(e) => match refusal_in(&e) {
                Some(r) => Outcome::Refused(r.0),
                // The URL (which may carry secrets in its query) stays out
                // of the logs.
                None => Outcome::Failed(describe(&e.without_url())),
            },
        }
    }
}

fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_a_cap() {
        let r = RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            attempt_timeout: Duration::from_secs(1),
        };
        assert_eq!(r.backoff(1, 1.0), Duration::from_millis(100));
        assert_eq!(r.backoff(2, 1.0), Duration::from_millis(200));
        assert_eq!(r.backoff(3, 0.0), Duration::from_millis(200));
        assert_eq!(r.backoff(10, 1.0), Duration::from_millis(1000));
        assert_eq!(r.backoff(40, 1.0), Duration::from_millis(1000));
        let j = jitter();
        assert!((0.0..1.0).contains(&j));
    }
}
