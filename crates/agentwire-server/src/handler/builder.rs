//! Building a [`RequestHandler`]: the agent card, the executor, the store,
//! authentication, push notifications, the bus, and the tunables.

use std::sync::Arc;
use std::time::Duration;

use agentwire_types::AgentCard;

use super::*;
use crate::bus::EventBus;
use crate::push::{PushConfig, PushSender};
use crate::store::{MemoryStore, StoreRetry};

/// Tunables of the request handler.
#[derive(Debug, Clone)]
pub struct HandlerConfig {
    /// Protocol versions served (`Major.Minor`).
    pub versions: Vec<String>,
    /// Events queued per subscriber before it is resynchronised from a
    /// snapshot.
    pub queue_capacity: usize,
    /// Bytes of events (their encoded size) queued per stream before the
    /// stream is closed with an error: a reader that does not keep up
    /// cannot make the server hold more than this for it.
    pub queue_bytes: usize,
    /// Bytes of events (their encoded size) queued for all streams of the
    /// server together (every subscriber of every task): when the total is
    /// reached, the stream furthest behind is closed with the same error
    /// as one over [`Self::queue_bytes`], its queued events dropped.
    /// Default: 64 MiB.
    pub max_queued_bytes: usize,
    /// Events kept per task for streams that reconnect with
    /// `Last-Event-ID` (at most this many, and at most
    /// [`Self::resume_bytes`] bytes).
    pub resume_events: usize,
    /// Bytes of events kept per task for reconnecting streams.
    pub resume_bytes: usize,
    /// Tasks whose recent events are kept once nobody works on or follows
    /// them (so a stream can still be resumed after the agent finished).
    pub resume_tasks: usize,
    /// How long a cancellation waits for the agent's `cancel` hook.
    pub cancel_grace: Duration,
    /// Treat a repeated `messageId` (same caller) that started a task as a
    /// duplicate and answer with that task (`Some(n)`: remember the last
    /// `n` message ids). Off by default: conformance runs and many clients
    /// reuse message ids.
    pub idempotency: Option<usize>,
    /// The most bytes of tasks (by their protobuf size) one `ListTasks`
    /// page carries: a page stops early, with a `nextPageToken`, before it
    /// would pass this (a page always has at least one task). Default:
    /// 4 MiB.
    pub max_list_bytes: usize,
    /// The most parts a message sent to the agent may have; more is
    /// refused (`InvalidParams`). Default: 1,000.
    pub max_parts: usize,
    /// The most bytes (protobuf size) one artifact may grow to, appended
    /// chunks included: the agent's update that would pass it is refused
    /// with an error. Default: 16 MiB.
    pub max_artifact_bytes: usize,
    /// How many requests are handled at once at most: one more is refused
    /// at once (`Unavailable`: JSON-RPC -32603, HTTP 503, gRPC
    /// UNAVAILABLE) instead of waiting. A request counts until its answer
    /// (or the start of its event stream). Default: 10,000.
    pub max_in_flight: usize,
    /// How an update the store fails to take (the database locked by
    /// another process, the disk full, an I/O error) is retried before the
    /// task is failed, every request waiting for it getting the storage
    /// error. Default: retried for 30 s (see [`StoreRetry`]).
    pub store_retry: StoreRetry,
    /// Serve clients of protocol version 0.3 beside 1.0, on the same
    /// endpoints: their requests (those without `A2A-Version`, or with
    /// 0.3) are converted into 1.0 requests and the answers back. Default:
    /// on. Off, a 0.3 request is answered `VersionNotSupportedError`, and
    /// the agent card carries no 0.3 fields.
    pub serve_v03: bool,
    /// How many open tasks (submitted, working, input-required,
    /// auth-required) one caller may hold at once: an authenticated
    /// principal, or an anonymous caller's address (see
    /// `handler/open_tasks.rs`). The agent's write that would create one
    /// more is refused (`Unavailable`: JSON-RPC -32603, HTTP 503, gRPC
    /// UNAVAILABLE), and the caller gets that error; a reply with a
    /// message creates no task and is never refused. `None`: no bound.
    /// Default: 1,000.
    pub max_open_tasks_per_caller: Option<usize>,
    /// How many bytes of messages one caller (as for
    /// `max_open_tasks_per_caller`) may have being worked on at once: a
    /// send counts its message's and metadata's protobuf size from when it
    /// is admitted until the agent's run it starts has ended (sends under
    /// 16 KiB do not count). One that would take its caller over the bound
    /// is refused before the agent starts (`Unavailable`: JSON-RPC -32603,
    /// HTTP 503, gRPC UNAVAILABLE), unless the caller has nothing running.
    /// `None`: no bound. Default: 32 MiB.
    pub max_running_bytes_per_caller: Option<usize>,
    /// The same for all callers together: a send that would take the
    /// server over is refused the same way, unless nothing is running.
    /// `None`: no bound. Default: 512 MiB.
    pub max_running_bytes: Option<usize>,
    /// How many event streams (`SendStreamingMessage`, `SubscribeToTask`,
    /// on every binding) one caller (as for `max_open_tasks_per_caller`)
    /// may have open at once: a stream counts until it ends or its reader
    /// goes away. One more is refused before anything starts
    /// (`Unavailable`: JSON-RPC -32603, HTTP 503, gRPC UNAVAILABLE).
    /// `None`: no bound. Default: 1,000.
    pub max_streams_per_caller: Option<usize>,
    /// How many bytes of request bodies the server may be receiving from
    /// one caller at once (an address, an IPv6 one by its /64 prefix:
    /// credentials are looked at once a request is read), counted as they
    /// arrive from the first 64 KiB of a body (or at once, by its
    /// `Content-Length`) until it is read whole. A body that would take
    /// its caller over is refused (`Unavailable`: JSON-RPC -32603, HTTP
    /// 503, gRPC UNAVAILABLE) unless nothing else is being received from
    /// it. Counted by [`crate::A2aServer`]'s connections only. `None`: no
    /// bound. Default: 64 MiB.
    pub max_incoming_bytes_per_caller: Option<usize>,
    /// The same for all callers together. Default: 512 MiB.
    pub max_incoming_bytes: Option<usize>,
    /// How many push notification configs one task may have: creating one
    /// more (with a new id) is refused as invalid parameters; replacing
    /// one by its id is not. Every config of a task is sent each update of
    /// it. Default: 16.
    pub max_push_configs_per_task: usize,
    /// The longest a `GetTask` with `currentGeneration` (A2A v1.1 draft: a
    /// long-poll) waits for the task to move past that generation before
    /// it answers with the task as it is. Zero: it answers at once.
    /// Default: 30 s. See `docs/generation.md`.
    pub long_poll_max: Duration,
}

impl Default for HandlerConfig {
    fn default() -> Self {
        Self {
            versions: vec![
                agentwire_types::PROTOCOL_VERSION.to_owned(),
                super::generation::GENERATION_VERSION.to_owned(),
            ],
            queue_capacity: 1024,
            queue_bytes: 8 << 20,
            max_queued_bytes: 64 << 20,
            resume_events: 256,
            resume_bytes: 1 << 20,
            resume_tasks: 128,
            cancel_grace: Duration::from_secs(5),
            idempotency: None,
            max_list_bytes: 4 * 1024 * 1024,
            max_parts: 1000,
            max_artifact_bytes: 16 * 1024 * 1024,
            max_in_flight: 10_000,
            store_retry: StoreRetry::default(),
            serve_v03: true,
            max_open_tasks_per_caller: Some(1000),
            max_running_bytes_per_caller: Some(32 << 20),
            max_running_bytes: Some(512 << 20),
            max_streams_per_caller: Some(1000),
            max_incoming_bytes_per_caller: Some(64 << 20),
            max_incoming_bytes: Some(512 << 20),
            max_push_configs_per_task: 16,
            long_poll_max: Duration::from_secs(30),
        }
    }
}

/// How many locks push config writes are spread over (by task).
const PUSH_CONFIG_WRITE_LOCKS: usize = 64;

/// Builds a [`RequestHandler`].
pub struct HandlerBuilder {
    card: AgentCard,
    executor: Arc<dyn DynExecutor>,
    store: Option<Arc<dyn TaskStore>>,
    extended_card: Option<AgentCard>,
    auth: Arc<dyn Authenticator>,
    config: HandlerConfig,
    push: Option<PushConfig>,
    /// Several replicas: the event bus.
    bus: Option<Arc<dyn EventBus>>,
    signing: Option<crate::CardSigning>,
}

impl HandlerBuilder {
    /// Sends push notifications with this configuration (and declares
    /// `capabilities.pushNotifications`, which is otherwise false).
    pub fn push(mut self, push: PushConfig) -> Self {
        self.push = Some(push);
        self
    }

    /// Follows the tasks of the other replicas sharing the store through
    /// this bus (see [`crate::bus`]): subscriptions here receive the events
    /// applied there, and cancellations reach the replica running the
    /// agent. Without one (the default), the handler is on its own. Each
    /// handler needs a bus (a replica id) of its own.
    pub fn bus(mut self, bus: Arc<dyn EventBus>) -> Self {
        self.bus = Some(bus);
        self
    }

    /// Signs the public and the extended card (spec 8.4) when the handler
    /// is built, and publishes the keys (see [`crate::card_signing`]).
    pub fn sign_card(mut self, signing: crate::CardSigning) -> Self {
        self.signing = Some(signing);
        self
    }

    pub(crate) fn card_mut(&mut self) -> &mut AgentCard {
        &mut self.card
    }

    /// Uses this task store (default: a [`MemoryStore`]).
    pub fn store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Times every operation of the store (the one given, or the default)
    /// into `metrics` (see `observe::store_timing`).
    pub(crate) fn time_store(mut self, metrics: &crate::observe::Metrics) -> Self {
        let store = self.store.take().unwrap_or_else(default_store);
        self.store = Some(crate::observe::store_timing::TimedStore::wrap(
            store, metrics,
        ));
        self
    }

    /// Serves an extended card to authenticated callers (and declares
    /// `capabilities.extendedAgentCard`).
    pub fn extended_card(mut self, card: AgentCard) -> Self {
        self.extended_card = Some(card);
        self
    }

    /// Authenticates callers (default: everyone is anonymous).
    pub fn authenticator(mut self, auth: Arc<dyn Authenticator>) -> Self {
        self.auth = auth;
        self
    }

    /// Whether to serve clients of protocol version 0.3 beside 1.0
    /// (default yes; see [`HandlerConfig::serve_v03`]).
    pub fn serve_v03(mut self, on: bool) -> Self {
        self.config.serve_v03 = on;
        self
    }

    /// Sets the tunables.
    pub fn config(mut self, config: HandlerConfig) -> Self {
        self.config = config;
        self
    }

    /// The handler. The card's capabilities are made to match what this
    /// handler really does (push notifications on exactly when a push
    /// sender is configured; the extended card flag set when one is
    /// configured).
    pub fn build(self) -> RequestHandler {
        let mut card = self.card;
        // The card says what the authenticator checks.
        self.auth.declare(&mut card);
        let push = match self.push {
            Some(config) => match PushSender::new(config) {
                Ok(sender) => Some(sender),
                Err(e) => {
                    tracing::error!(error = %e, "push notifications disabled");
                    None
                }
            },
            None => None,
        };
        let caps = card.capabilities.get_or_insert_with(Default::default);
        if caps.push_notifications == Some(true) && push.is_none() {
            tracing::warn!(
                "the card declares push notifications but no push sender is configured \
                 (A2aServer::push); declaring false"
            );
        }
        caps.push_notifications = Some(push.is_some());
        caps.extended_agent_card = Some(self.extended_card.is_some());
        let mut extended_card = self.extended_card.map(|ext| complete_extended(ext, &card));
        // Signed last: the signatures cover the cards as served.
        let mut card_signer = None;
        let card_jwks = self.signing.map(|signing| {
            let jku = signing.jku_for(&card);
            let signed = signing.sign(&mut card, jku.as_deref()).and_then(|()| {
                extended_card
                    .as_mut()
                    .map_or(Ok(()), |ext| signing.sign(ext, jku.as_deref()))
            });
            let jwks = signing.jwks_json();
            match signed {
                Ok(()) => card_signer = Some((signing, jku)),
                Err(e) => {
                    tracing::error!(error = %e, "the agent card cannot be signed; it is served unsigned")
                }
            }
            jwks
        });
        let card_json = Bytes::from(serde_json::to_vec(&card).unwrap_or_default());
        let open_tasks = Arc::new(super::open_tasks::OpenTasks::new(
            super::open_tasks::CallerBounds {
                open_tasks: self.config.max_open_tasks_per_caller,
                running_bytes: self.config.max_running_bytes_per_caller,
                running_total: self.config.max_running_bytes,
                streams: self.config.max_streams_per_caller,
                incoming: self.config.max_incoming_bytes_per_caller,
                incoming_total: self.config.max_incoming_bytes,
            },
        ));
        let store = super::open_tasks::Admitting::wrap(
            self.store.unwrap_or_else(default_store),
            Arc::clone(&open_tasks),
        );
        RequestHandler {
            inner: Arc::new(Inner {
                card,
                card_json,
                card_jwks,
                card_signer,
                extended_card,
                executor: self.executor,
                manager: TaskManager::share(
                    TaskManager::new(
                        store,
                        self.config.queue_capacity,
                        self.config.queue_bytes,
                        crate::manager::events::LogLimits {
                            events: self.config.resume_events,
                            bytes: self.config.resume_bytes,
                            retired: self.config.resume_tasks,
                        },
                        push,
                    )
                    .with_max_artifact_bytes(self.config.max_artifact_bytes)
                    .with_max_queued_bytes(self.config.max_queued_bytes)
                    .with_store_retry(self.config.store_retry)
                    .with_bus(self.bus),
                ),
                in_flight: std::sync::atomic::AtomicUsize::new(0),
                open_tasks,
                push_config_writes: (0..PUSH_CONFIG_WRITE_LOCKS)
                    .map(|_| tokio::sync::Mutex::new(()))
                    .collect(),
                auth: self.auth,
                idempotency: self.config.idempotency.map(Idempotency::new),
                config: self.config,
            }),
        }
    }
}

/// The extended card as served: what it leaves out of how to reach the
/// agent and what the agent can do is the public card's (an extended card
/// usually adds skills, and a client calls it through the interfaces it
/// lists); the flags this handler decides are the public card's.
fn complete_extended(mut ext: AgentCard, public: &AgentCard) -> AgentCard {
    if ext.supported_interfaces.is_empty() {
        ext.supported_interfaces = public.supported_interfaces.clone();
    }
    if ext.default_input_modes.is_empty() {
        ext.default_input_modes = public.default_input_modes.clone();
    }
    if ext.default_output_modes.is_empty() {
        ext.default_output_modes = public.default_output_modes.clone();
    }
    let public_caps = public.capabilities.clone().unwrap_or_default();
    let caps = ext.capabilities.get_or_insert_with(Default::default);
    caps.streaming = caps.streaming.or(public_caps.streaming);
    if caps.extensions.is_empty() {
        caps.extensions = public_caps.extensions;
    }
    caps.push_notifications = public_caps.push_notifications;
    caps.extended_agent_card = Some(true);
    ext
}

impl RequestHandler {
    /// Starts building a handler for an agent described by `card`.
    pub fn builder<E: crate::AgentExecutor>(card: AgentCard, executor: E) -> HandlerBuilder {
        HandlerBuilder {
            card,
            executor: Arc::new(executor),
            store: None,
            extended_card: None,
            auth: Arc::new(NoAuth),
            config: HandlerConfig::default(),
            push: None,
            bus: None,
            signing: None,
        }
    }
}

/// The store of a handler given none.
fn default_store() -> Arc<dyn TaskStore> {
    Arc::new(MemoryStore::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{AgentCapabilities, binding};

    #[test]
    fn an_extended_card_gets_what_it_leaves_out_from_the_public_card() {
        let public = AgentCard::new("Echo", "Echoes", "1.0.0")
            .with_interface("http://127.0.0.1:1/", binding::JSONRPC);
        let mut public = public;
        public.capabilities = Some(AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extended_agent_card: Some(true),
            ..Default::default()
        });
        let ext = complete_extended(AgentCard::new("Echo+", "More", "1.0.0"), &public);
        assert_eq!(ext.supported_interfaces, public.supported_interfaces);
        let caps = ext.capabilities.unwrap_or_default();
        assert_eq!(caps.streaming, Some(true));
        assert_eq!(caps.extended_agent_card, Some(true));
        // Its own interfaces are kept.
        let own = AgentCard::new("Echo+", "More", "1.0.0")
            .with_interface("http://127.0.0.1:2/", binding::JSONRPC);
        let ext = complete_extended(own, &public);
        assert_eq!(ext.supported_interfaces[0].url, "http://127.0.0.1:2/");
    }

    #[test]
    fn both_cards_are_signed_after_the_handler_sets_them() {
        use agentwire_types::jws::{self, KeySet, SigningKey};
        let key =
            SigningKey::from_pkcs8_der(&SigningKey::generate_ed25519_pkcs8().unwrap()).unwrap();
        let public = AgentCard::new("Echo", "Echoes", "1.0.0")
            .with_interface("https://agent.example:8443/a2a/", binding::JSONRPC);
        let h = RequestHandler::builder(public, crate::executor::tests::Nop)
            .extended_card(AgentCard::new("Echo+", "More", "1.0.0"))
            .sign_card(crate::CardSigning::new(key.clone()))
            .build();
        let mut keys = KeySet::new();
        keys.push(key.verifying_key().clone());
        let served: serde_json::Value = serde_json::from_slice(&h.agent_card_json()).unwrap();
        assert!(jws::verify_card(&served, &keys).is_verified());
        // The flags the handler set (extendedAgentCard) are covered.
        assert_eq!(served["capabilities"]["extendedAgentCard"], true);
        let hint = &jws::card_signature_hints(&served)[0];
        assert_eq!(
            hint.jku.as_deref(),
            Some("https://agent.example:8443/.well-known/jwks.json")
        );
        let ext = serde_json::to_value(h.inner.extended_card.as_ref().unwrap()).unwrap();
        assert!(jws::verify_card(&ext, &keys).is_verified());
        let jwks: serde_json::Value = serde_json::from_slice(&h.card_jwks_json().unwrap()).unwrap();
        assert_eq!(jwks["keys"][0]["kid"], key.kid());
    }
}
