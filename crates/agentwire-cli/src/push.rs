//! Push notifications in the `a2a` command: the inline push config of
//! `send` (`--push-url` ...) and `a2a webhook`, the Tier 3 webhook receiver
//! that prints verified notifications as they arrive (CLI SPEC 9.2,
//! `A2ACLI_PUSH_002`). `task push-config` (the config operations) lives in
//! `task.rs`.

use std::time::Duration;

use agentwire_client::webhook::WebhookReceiver;
use agentwire_types::{AuthenticationInfo, ErrorKind, TaskPushNotificationConfig, TaskState};
use clap::Args;
use futures::StreamExt;

use crate::agent::Agent;
use crate::error::{CliError, a2a_error_name, exit};
use crate::ledger::Recorder;
use crate::render::{self, Text};
use crate::{Globals, OutputFormat};

/// Options of `send` that ask the agent to push the task's updates to a
/// webhook (the config travels with the message; its task id is the new
/// task's).
#[derive(Args, Debug, Clone, Default)]
pub struct InlinePushArgs {
    /// Push the task's updates to this webhook URL (e.g. one `a2a webhook` listens on).
    #[arg(long = "push-url", value_name = "URL")]
    pub push_url: Option<String>,
    /// Token the agent sends back with each notification (X-A2A-Notification-Token).
    #[arg(long = "push-token", value_name = "TOKEN", requires = "push_url")]
    pub push_token: Option<String>,
    /// Authentication scheme the agent uses to call the webhook (e.g. Bearer).
    #[arg(
        long = "push-auth-scheme",
        value_name = "SCHEME",
        requires = "push_url"
    )]
    pub push_auth_scheme: Option<String>,
    /// Credentials for that scheme.
    #[arg(
        long = "push-auth-credentials",
        value_name = "CREDENTIALS",
        requires = "push_auth_scheme"
    )]
    pub push_auth_credentials: Option<String>,
}

impl InlinePushArgs {
    /// The config to send with the message, if one was asked for.
    pub fn config(&self) -> Option<TaskPushNotificationConfig> {
        let url = self.push_url.clone()?;
        Some(TaskPushNotificationConfig {
            url,
            token: self.push_token.clone().unwrap_or_default(),
            authentication: self
                .push_auth_scheme
                .as_ref()
                .map(|scheme| AuthenticationInfo {
                    scheme: scheme.clone(),
                    credentials: self.push_auth_credentials.clone().unwrap_or_default(),
                }),
            ..Default::default()
        })
    }

    /// Refuses an inline config for an agent whose card does not declare
    /// push notifications (CLI SPEC 13.3).
    pub fn check(&self, agent: &Agent) -> Result<(), CliError> {
        if self.push_url.is_some() && !agent.card.supports_push_notifications() {
            return Err(CliError::new(
                &a2a_error_name(ErrorKind::PushNotificationNotSupported),
                exit::FAILURE,
                "the agent card does not declare capabilities.pushNotifications",
            )
            .with_hint(format!(
                "drop --push-url, and follow the task with --stream or `{}`",
                crate::error::paste("task get", "--wait <taskId>")
            )));
        }
        Ok(())
    }
}

/// Options of `a2a webhook`.
#[derive(Args, Debug)]
pub struct WebhookArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1", env = "A2ACLI_WEBHOOK_HOST")]
    pub host: String,
    /// Port to listen on (0 picks a free one; the URL is printed on stderr).
    #[arg(long, short, default_value_t = 0, env = "A2ACLI_WEBHOOK_PORT")]
    pub port: u16,
    /// Require this X-A2A-Notification-Token (the --push-token given to the agent).
    #[arg(
        long = "push-token",
        alias = "token",
        env = "A2ACLI_WEBHOOK_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Require this exact Authorization header (e.g. "Bearer s3cret").
    #[arg(
        long,
        env = "A2ACLI_WEBHOOK_AUTHORIZATION",
        hide_env_values = true,
        value_name = "VALUE"
    )]
    pub authorization: Option<String>,
    /// Verify signatures with this JWKS URL (default with --agent-card: the agent's /.well-known/a2a-push-jwks.json).
    #[arg(long, value_name = "URL")]
    pub jwks: Option<String>,
    /// Do not require signed notifications (even with --agent-card or --jwks).
    #[arg(long)]
    pub no_signature: bool,
    /// Only accept notifications about this task (repeatable; default: any task, once authenticated).
    #[arg(long = "task-id", alias = "task", value_name = "ID")]
    pub tasks: Vec<String>,
    /// Exit after this many notifications.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Exit when a task reaches a terminal state (with --task-id: when all of them have).
    #[arg(long)]
    pub until_final: bool,
    /// Answer 429 beyond this many requests a second (bursts of as many);
    /// the sending agent retries later. Default: no limit.
    #[arg(long, value_name = "PER_SECOND")]
    pub rate_limit: Option<u32>,
    #[command(flatten)]
    pub timeout: crate::TimeoutOpt,
    #[command(flatten)]
    pub agent: crate::AgentOpts,
    #[command(flatten)]
    pub ledger: crate::ledger::LedgerOpts,
}

impl crate::Apply for WebhookArgs {
    fn apply(&self, g: &mut Globals) {
        self.agent.apply(g);
        self.timeout.apply(g);
        self.ledger.apply(g);
    }
}

/// `a2a webhook`: receives, verifies and prints push notifications.
pub async fn webhook(g: &Globals, args: WebhookArgs) -> Result<u8, CliError> {
    // Listening first: a notification sent while the agent's card is being
    // fetched (`a2a webhook ... &` then `a2a send` at once) waits in the
    // backlog instead of being refused and retried later.
    let addr = format!("{}:{}", args.host, args.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| CliError::internal(format!("cannot listen on {addr}: {e}")))?;
    let mut builder = WebhookReceiver::builder();
    if let Some(n) = args.rate_limit {
        builder = builder.rate_limit(n, n.max(1));
    }
    let mut proofs = Vec::new();
    if let Some(t) = &args.token {
        builder = builder.token(t);
        proofs.push("token");
    }
    if let Some(a) = &args.authorization {
        builder = builder.authorization(a);
        proofs.push("authorization");
    }
    let jwks = match (&args.jwks, &g.agent_card) {
        (Some(url), _) => Some(url.clone()),
        (None, Some(_)) if !args.no_signature => {
            let agent = Agent::connect(g).await?;
            let base = agent
                .card
                .supported_interfaces
                .iter()
                .find(|i| i.url.starts_with("http"))
                .map(|i| i.url.clone())
                .ok_or_else(|| {
                    CliError::usage("the agent card lists no http(s) interface to find its JWKS")
                        .with_hint("give the JWKS URL with --jwks, or --no-signature")
                })?;
            let origin = reqwest::Url::parse(&base)
                .map(|u| u.origin().ascii_serialization())
                .map_err(|e| CliError::usage(format!("bad interface URL {base}: {e}")))?;
            Some(format!("{origin}{}", agentwire_client::webhook::JWKS_PATH))
        }
        _ => None,
    };
    if let Some(url) = &jwks {
        builder = builder.jwks_url(url);
        proofs.push("signature");
    }
    builder = builder.require_signature(jwks.is_some() && !args.no_signature);
    builder = builder.accept_any_task(args.tasks.is_empty());
    // A refused notification is always reported (stderr; stdout keeps the
    // accepted ones), whatever --debug says: a sender with the wrong token
    // must not look like a silent agent.
    builder = builder.on_refused(std::sync::Arc::new(
        |r: &agentwire_client::webhook::Refused| {
            eprintln!(
                "warning: refused a notification (HTTP {}): {}",
                r.status,
                render::sanitize(&r.reason)
            );
        },
    ));
    let (receiver, mut notifications) = builder.build();
    for t in &args.tasks {
        receiver.expect_task(t);
    }
    let running = receiver
        .serve(listener)
        .map_err(|e| CliError::internal(format!("cannot listen on {addr}: {e}")))?;
    eprintln!("webhook URL: {}", running.url());
    if proofs.is_empty() {
        eprintln!(
            "warning: no --push-token, --authorization or signature check: any caller's notifications are accepted"
        );
    } else {
        eprintln!("verifying: {}", proofs.join(", "));
    }

    // What the accepted notifications say (tasks, states, artifacts) goes
    // into the ledger like any other command's findings; their contexts
    // are recorded with the agent of `--agent-card`, when given.
    let rec = Recorder::open(g, g.agent_card.as_deref().unwrap_or("")).await;
    let json = g.output == OutputFormat::Json;
    let mut received = 0u64;
    let mut pending: std::collections::HashSet<String> = args.tasks.iter().cloned().collect();
    let deadline = g.timeout.map(|t| tokio::time::Instant::now() + t);
    let outcome = loop {
        let next = async {
            match deadline {
                Some(d) => tokio::time::timeout_at(d, notifications.next()).await.ok(),
                None => Some(notifications.next().await),
            }
        };
        let n = tokio::select! {
            n = next => n,
            () = agentwire_server::shutdown_signal() => break Ok(exit::OK),
        };
        let n = match n {
            None => {
                break Err(CliError::new(
                    crate::error::code::TIMEOUT,
                    exit::TIMEOUT,
                    format!("--timeout expired after {received} notification(s)"),
                ));
            }
            Some(None) => break Ok(exit::OK),
            Some(Some(n)) => n,
        };
        received += 1;
        rec.event(&n.event).await;
        if json {
            render::print_json(&n.event)?;
        } else {
            let mut t = Text::new();
            t.field("Notification", n.id.as_deref().unwrap_or("-"));
            if let Some(seq) = n.sequence {
                t.field("Sequence", seq.to_string());
            }
            t.field(
                "Verified",
                match (&n.signed_by, n.authenticated) {
                    (Some(kid), true) => format!("signature (key {kid}) and credentials"),
                    (Some(kid), false) => format!("signature (key {kid})"),
                    (None, true) => "credentials".to_owned(),
                    (None, false) => "no (nothing to check)".to_owned(),
                },
            );
            render::event(&mut t, &n.event, g.verbose);
            t.print();
        }
        if args.count.is_some_and(|c| received >= c) {
            break Ok(exit::OK);
        }
        if args.until_final && n.event.state().is_some_and(TaskState::is_terminal) {
            pending.remove(&n.task_id);
            if pending.is_empty() {
                break Ok(exit::OK);
            }
        }
    };
    // Let the agent's last request get its answer before exiting.
    let _ = tokio::time::timeout(Duration::from_secs(2), running.shutdown()).await;
    outcome
}
