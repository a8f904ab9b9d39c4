//! The binding-agnostic request handler: the 11 operations of spec 3.1 with
//! every protocol rule (version, capabilities, validation, multi-turn
//! rules, history length, listing, owner scoping). Bindings only decode
//! requests into calls of this handler and encode what it returns.
//!
//! One job a file:
//!
//! - `builder`: [`HandlerBuilder`] and [`HandlerConfig`];
//! - `admission`: the preamble of every call (version, caller,
//!   extensions) and the [`CallContext`] it reads them from;
//! - `open_tasks`: the bound on each caller's open tasks (a wrapper of
//!   the store that counts them) and the admission counters;
//! - `validation`: checks of a request's contents that need no store;
//! - `send`: `SendMessage`, and the start of every agent run;
//! - `streams`: `SendStreamingMessage`, `SubscribeToTask`, and the event
//!   stream a subscription becomes;
//! - `tasks`: `GetTask`, `ListTasks`, `CancelTask`, crash recovery;
//! - `push_configs`: the push notification config operations;
//! - `idempotency`: repeated message ids answered with the task they
//!   started (off by default).
//!
//! The agent card operations are here, below.

mod admission;
mod builder;
pub(crate) mod generation;
mod idempotency;
mod incoming;
mod open_tasks;
mod push_configs;
mod send;
mod streams;
mod tasks;
mod validation;

use std::pin::Pin;
use std::sync::Arc;

use agentwire_types::{
    A2aError, A2aResult, AgentCard, ErrorKind, GetExtendedAgentCardRequest, StreamResponse,
};
use bytes::Bytes;
use futures::Stream;

use crate::auth::{Authenticator, NoAuth};
use crate::executor::DynExecutor;
use crate::manager::TaskManager;
use crate::push::PushSender;
use crate::store::TaskStore;
use admission::Admitted;
pub use admission::CallContext;
pub(crate) use admission::{A2A_VERSION, requested_version};
pub use builder::{HandlerBuilder, HandlerConfig};
use idempotency::Idempotency;
pub(crate) use incoming::{BodyCount, IncomingGate, IncomingRefused};
pub(crate) use open_tasks::{AdmissionStats, address_of, give_back};
pub(crate) use send::SendAnswer;
use send::{Detached, Started};
pub(crate) use streams::IdEventStream;
use validation::{history_length, task_query};

/// A stream of protocol events for one streaming call.
pub type EventStream = Pin<Box<dyn Stream<Item = A2aResult<StreamResponse>> + Send>>;

struct Inner {
    card: AgentCard,
    card_json: Bytes,
    /// The JWKS of the card signatures, when the card is signed.
    card_jwks: Option<Bytes>,
    /// The card's signing keys and `jku`, when the card is signed (for the
    /// other forms of the card that are served, `compat::v0_3::card`).
    card_signer: Option<(crate::CardSigning, Option<String>)>,
    extended_card: Option<AgentCard>,
    executor: Arc<dyn DynExecutor>,
    manager: Arc<TaskManager>,
    auth: Arc<dyn Authenticator>,
    idempotency: Option<Idempotency>,
    config: HandlerConfig,
    /// Requests being handled (see [`HandlerConfig::max_in_flight`]).
    in_flight: std::sync::atomic::AtomicUsize,
    /// The open tasks of each caller (see
    /// [`HandlerConfig::max_open_tasks_per_caller`]).
    open_tasks: Arc<open_tasks::OpenTasks>,
    /// Push config writes, one at a time per task (by a hash of its id):
    /// the bound on a task's configs is checked and kept under it.
    push_config_writes: Box<[tokio::sync::Mutex<()>]>,
}

/// Serves the A2A operations for one agent. Cheap to clone.
#[derive(Clone)]
pub struct RequestHandler {
    inner: Arc<Inner>,
}

impl RequestHandler {
    /// The gate the request bodies of a connection from `peer` are counted
    /// against (`handler/incoming.rs`); `None` without bounds.
    pub(crate) fn incoming_gate(
        &self,
        peer: Option<std::net::SocketAddr>,
    ) -> Option<Arc<IncomingGate>> {
        self.inner
            .open_tasks
            .incoming
            .as_ref()
            .map(|bytes| Arc::new(bytes.gate(peer)))
    }

    /// The public agent card.
    pub fn agent_card(&self) -> &AgentCard {
        &self.inner.card
    }

    /// The public agent card, serialized once.
    pub fn agent_card_json(&self) -> Bytes {
        self.inner.card_json.clone()
    }

    /// The JWKS publishing the keys of the card signatures, when the card
    /// is signed (served at [`crate::card_signing::CARD_JWKS_PATH`]).
    pub fn card_jwks_json(&self) -> Option<Bytes> {
        self.inner.card_jwks.clone()
    }

    /// How the cards are signed, and the `jku` of their signatures.
    pub(crate) fn card_signer(&self) -> Option<(&crate::CardSigning, Option<&str>)> {
        self.inner
            .card_signer
            .as_ref()
            .map(|(s, jku)| (s, jku.as_deref()))
    }

    /// The task store.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.inner.manager.store
    }

    fn caps_streaming(&self) -> bool {
        self.inner.card.supports_streaming()
    }

    /// The push sender, when push notifications are on.
    pub fn push_sender(&self) -> Option<&PushSender> {
        self.inner.manager.push.as_ref()
    }

    /// The JWKS document of the push signatures, when push notifications
    /// are on and signed.
    pub fn push_jwks_json(&self) -> Option<Bytes> {
        self.push_sender().and_then(PushSender::jwks_json)
    }

    /// `GetExtendedAgentCard`.
    pub async fn get_extended_agent_card(
        &self,
        ctx: &CallContext,
        req: GetExtendedAgentCardRequest,
    ) -> A2aResult<AgentCard> {
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant).await?;
        let Some(card) = &self.inner.extended_card else {
            return Err(A2aError::unsupported(
                "this agent has no extended agent card (capabilities.extendedAgentCard is false)",
            ));
        };
        if owner.principal.is_empty() {
            return Err(A2aError::new(
                ErrorKind::Unauthenticated,
                "the extended agent card requires authentication with one of the card's security schemes",
            ));
        }
        Ok(card.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_futures_are_send() {
        fn is_send<T: Send>(_: &T) {}
        let h = RequestHandler::builder(AgentCard::default(), crate::executor::tests::Nop).build();
        let ctx = CallContext::v1();
        is_send(&h.send_message(&ctx, Default::default()));
        is_send(&h.send_streaming_message(&ctx, Default::default()));
        is_send(&h.cancel_task(&ctx, Default::default()));
        is_send(&h.subscribe_to_task(&ctx, Default::default()));
        is_send(&h.list_tasks(&ctx, Default::default()));
    }
}
