//! `a2a inspect`: a web inspector for any A2A agent.
//!
//! A local web server on 127.0.0.1 serves a single page (plain HTML, CSS
//! and an ES module, embedded in the binary: no build step, no external
//! requests) and a small JSON API under `/api/`. The page talks only to
//! this server; the server talks A2A to the agent with the project's own
//! client, so every binding (JSON-RPC, HTTP+JSON, gRPC) works from the
//! browser. Live updates (stream events, the wire log, push deliveries)
//! reach the page as Server-Sent Events on `/api/events`.
//!
//! The Wire view shows what the client's transports really sent and
//! received (the client's wire tap, `agentwire_client::tap`): request and
//! response headers and exact bodies, each Server-Sent Event frame as
//! received, gRPC messages decoded to JSON; credentials are redacted by the
//! tap before the inspector sees them.
//!
//! The API can reach agents on the user's behalf, with the user's
//! credentials, so it only answers requests addressed to the inspector
//! itself: a `Host` other than `127.0.0.1:PORT` / `localhost:PORT` (DNS
//! rebinding) or an `Origin` other than the page's own (another site's
//! page) is refused with 403.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentwire_client::card::{CardVerifier, KeySource, SignatureReport, validate_card};
use agentwire_client::ledger::Ledger;
use agentwire_client::tap::{self, Exchange, Tap, WireLog};
use agentwire_client::webhook::{RunningWebhook, WebhookReceiver};
use agentwire_client::{Binding, CallOptions, Transport};
use agentwire_types::{
    CancelTaskRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest, ListTasksRequest,
    Message, Part, SendMessageConfiguration, SendMessageRequest, StreamResponse,
    SubscribeToTaskRequest, TaskPushNotificationConfig, TaskState,
};
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use clap::Args;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::agent::{Agent, Settings};
use crate::error::{CliError, exit};
use crate::{ConnOpts, Globals};

/// Options of `a2a inspect`.
#[derive(Args, Debug)]
#[command(after_help = "\
The page talks only to this local server, which talks A2A to the agent with this tool's
client (JSON-RPC, HTTP+JSON or gRPC). It answers only its own page: requests for another
host name or from another site are refused. Stop it with Ctrl-C.

Examples:
  a2a inspect -a localhost:8080 --open
  a2a inspect --port 9000 -a localhost:8080 --transport GRPC
  a2a inspect -a https://agent.example --trust-key publisher.pub.pem")]
pub struct InspectArgs {
    /// Port to listen on, on 127.0.0.1 only (0 picks a free one; the URL is the first line printed).
    #[arg(long, short, default_value_t = 0)]
    pub port: u16,
    /// Open the inspector in the default web browser.
    #[arg(long)]
    pub open: bool,
    /// Trust this public key (a PEM file; a private key file gives its public part) to verify agent cards' signatures. Repeatable.
    #[arg(long = "trust-key", value_name = "FILE")]
    pub trust_key: Vec<std::path::PathBuf>,
    /// Trust the keys of the JWKS at this URL to verify agent cards' signatures. Repeatable.
    #[arg(long = "trust-jwks", value_name = "URL")]
    pub trust_jwks: Vec<String>,
    #[command(flatten)]
    pub conn: ConnOpts,
    #[command(flatten)]
    pub ledger: crate::ledger::LedgerOpts,
}

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// How many wire records and deliveries are kept (the oldest go first).
const KEEP: usize = 500;

/// How many exchanges the wire tap keeps (a call may make several).
const KEEP_EXCHANGES: usize = 2 * KEEP;

/// The agent the page is connected to.
struct Conn {
    agent: Agent,
    reference: String,
}

struct Inner {
    port: u16,
    globals: Globals,
    conn: tokio::sync::RwLock<Option<Arc<Conn>>>,
    /// The connect result shown to the page (card, problems, signature).
    connected: Mutex<Value>,
    /// The session's records (its views read them), copied into the
    /// `a2a` ledger file like every command's.
    ledger: Ledger,
    /// The agent the ledger file records new contexts with: the one
    /// connected.
    ledger_agent: crate::ledger::SessionAgent,
    wire: Mutex<Vec<Value>>,
    timelines: Mutex<HashMap<String, Vec<Value>>>,
    deliveries: Arc<Mutex<Vec<Value>>>,
    webhook: tokio::sync::Mutex<Option<RunningWebhook>>,
    bus: broadcast::Sender<String>,
    next_id: std::sync::atomic::AtomicU64,
    /// The exchanges the client's transports made, as the tap saw them.
    exchanges: Arc<WireLog>,
    /// The tap feeding `exchanges` (each connection's client gets a clone,
    /// so exchange ids stay unique).
    tap: Tap,
    /// The keys `--trust-key` / `--trust-jwks` gave, to check card signatures.
    verifier: CardVerifier,
}

type Shared = Arc<Inner>;

/// An API failure: a status and a JSON body `{error: {code, message, hint}}`.
struct ApiError(StatusCode, Value);

impl ApiError {
    fn bad(message: impl Into<String>) -> Self {
        Self(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": "BAD_REQUEST", "message": message.into()}}),
        )
    }
}

impl From<CliError> for ApiError {
    fn from(e: CliError) -> Self {
        Self(
            StatusCode::BAD_GATEWAY,
            json!({"error": {"code": e.code, "message": e.message, "hint": e.hint}, "legacy": is_legacy(&e)}),
        )
    }
}

/// Whether an error says the agent speaks only an A2A version before 1.0.
fn is_legacy(e: &CliError) -> bool {
    e.message.contains("0.x")
        || e.message.contains("supportedInterfaces")
        || e.message.contains("speaks only A2A 0.")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(self.1)).into_response()
    }
}

type ApiResult = Result<axum::Json<Value>, ApiError>;

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

fn push_bounded(list: &Mutex<Vec<Value>>, v: Value) {
    let mut l = list.lock().unwrap_or_else(|p| p.into_inner());
    if l.len() >= KEEP {
        l.remove(0);
    }
    l.push(v);
}

impl Inner {
    fn publish(&self, kind: &str, data: Value) {
        let _ = self
            .bus
            .send(json!({"kind": kind, "data": data}).to_string());
    }

    fn id(&self) -> u64 {
        self.next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    async fn conn(&self) -> Result<Arc<Conn>, ApiError> {
        self.conn.read().await.clone().ok_or_else(|| {
            ApiError(
                StatusCode::CONFLICT,
                json!({"error": {"code": "NOT_CONNECTED", "message": "no agent connected: connect to one first"}}),
            )
        })
    }

    /// Starts a wire record of one call; the exchanges it makes are
    /// those the tap labels with [`WireCall::label`].
    fn wire_start(&self, conn: &Conn, op: &str, request: Value) -> WireCall {
        let iface = conn.agent.client.inner.interface();
        let binding = iface
            .map(|i| i.protocol_binding.clone())
            .unwrap_or_default();
        let url = iface.map(|i| i.url.clone()).unwrap_or_default();
        let a2a = a2a_command(&conn.reference, &binding, op, &request);
        let id = self.id();
        WireCall {
            id,
            label: format!("call-{id}"),
            started: Instant::now(),
            record: json!({
                "op": op, "binding": binding, "url": url, "at": now(),
                "request": request, "a2a": a2a,
            }),
        }
    }

    /// Ends a wire record: the exchanges as the tap saw them (the last
    /// one's request, headers and frames also at the top, for a quick look).
    fn wire_end(&self, mut call: WireCall, outcome: Result<Value, String>) {
        let ms = call.started.elapsed().as_millis() as u64;
        call.record["id"] = json!(call.id);
        call.record["durationMs"] = json!(ms);
        match outcome {
            Ok(v) => call.record["response"] = v,
            Err(e) => call.record["error"] = json!(e),
        }
        let exchanges = self.exchanges.with_label(&call.label);
        if let Some(last) = exchanges.last() {
            call.record["headers"] = json!(last.request_headers);
            call.record["wire"] = json!({
                "method": last.method, "target": last.url, "status": last.status,
                "body": last.request_body.as_ref().map(|b| json_or_text(&b.text())),
            });
            call.record["frames"] = Value::Array(
                last.frames
                    .iter()
                    .map(|f| {
                        json!({"offsetMs": f.elapsed.as_millis() as u64, "id": f.id,
                               "event": f.event, "data": f.data.text()})
                    })
                    .collect(),
            );
            call.record["curl"] = json!(curl_of(last));
            call.record["grpcurl"] = json!(grpcurl_of(last));
        }
        call.record["exchanges"] = Value::Array(exchanges.iter().map(to_json).collect());
        push_bounded(&self.wire, call.record.clone());
        self.publish("wire", call.record);
    }

    /// Adds a stream event to its task's timeline and tells the page.
    fn timeline(&self, started: Instant, ev: &StreamResponse) -> Value {
        let v = to_json(ev);
        let (task_id, kind, state) = describe_event(&v);
        let at = now();
        let entry = json!({
            "at": at, "offsetMs": started.elapsed().as_millis() as u64,
            "kind": kind, "state": state,
            "final": state.as_deref().and_then(TaskState::parse).is_some_and(TaskState::is_terminal),
            "interrupted": state.as_deref().and_then(TaskState::parse).is_some_and(TaskState::is_interrupted),
            "event": v,
        });
        if let Some(t) = &task_id {
            let mut tl = self.timelines.lock().unwrap_or_else(|p| p.into_inner());
            let list = tl.entry(t.clone()).or_default();
            if list.len() < KEEP * 4 {
                list.push(entry.clone());
            }
        }
        self.publish("event", json!({"taskId": task_id, "entry": entry}));
        entry
    }
}

struct WireCall {
    id: u64,
    /// The tap label of the call's exchanges.
    label: String,
    started: Instant,
    record: Value,
}

/// A body as JSON when it is JSON, else as its text.
fn json_or_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// The `curl` command repeating an HTTP exchange's request as it was sent
/// (redacted credentials stay redacted: put yours back).
fn curl_of(x: &Exchange) -> Option<String> {
    if x.binding == Binding::Grpc {
        return None;
    }
    let mut c = format!("curl -sS -N -X {} {}", x.method, shell_quote(&x.url));
    for (k, v) in &x.request_headers {
        c.push_str(" -H ");
        c.push_str(&shell_quote(&format!("{k}: {v}")));
    }
    if let Some(b) = &x.request_body {
        c.push_str(" --data-binary ");
        c.push_str(&shell_quote(&b.text()));
    }
    Some(c)
}

/// The `grpcurl` command repeating a gRPC exchange (the agent must offer
/// gRPC reflection, as `a2a serve` does).
fn grpcurl_of(x: &Exchange) -> Option<String> {
    if x.binding != Binding::Grpc {
        return None;
    }
    let (tls, authority) = match x.url.split_once("://") {
        Some((scheme, rest)) => (
            matches!(scheme.to_ascii_lowercase().as_str(), "https" | "grpcs"),
            rest,
        ),
        None => (false, x.url.as_str()),
    };
    let authority = authority.split('/').next().unwrap_or_default();
    let mut c = String::from("grpcurl");
    if !tls {
        c.push_str(" -plaintext");
    }
    for (k, v) in &x.request_headers {
        if k != "grpc-timeout" {
            c.push_str(" -H ");
            c.push_str(&shell_quote(&format!("{k}: {v}")));
        }
    }
    if let Some(b) = &x.request_body {
        c.push_str(" -d ");
        c.push_str(&shell_quote(&b.text()));
    }
    c.push(' ');
    c.push_str(&shell_quote(authority));
    c.push(' ');
    c.push_str(x.method.trim_start_matches('/'));
    Some(c)
}

/// What the page shows of a card's signature: a status (`trusted`,
/// `agent-key`, `unsigned`, `invalid` or `unverified`) and a sentence.
fn signature_view(report: &SignatureReport, insecure: bool) -> Value {
    use agentwire_types::jws::CardSignatureStatus as S;
    let (status, text) = match &report.status {
        S::Absent => (
            "unsigned",
            "unsigned: the card carries no signature".to_owned(),
        ),
        S::Verified { .. } => match &report.key_source {
            Some(KeySource::AgentJwks(url)) => (
                "agent-key",
                format!(
                    "signed with the agent's own published key ({url}): the card is as the agent's HTTPS origin serves it{}; to know who publishes it, give a key you trust with --trust-key FILE or --trust-jwks URL",
                    if insecure {
                        ", but --insecure means that origin's certificate was not checked"
                    } else {
                        ""
                    }
                ),
            ),
            _ => (
                "trusted",
                format!("verified with a trusted key: {}", report.describe()),
            ),
        },
        // A trusted key was found and the signature does not match: the
        // card changed after signing (the messages of agentwire_types::jws).
        S::Unverified { reason }
            if reason.contains("does not match the card") || reason.contains("does not verify") =>
        {
            ("invalid", format!("invalid: {reason}"))
        }
        S::Unverified { reason } => ("unverified", format!("signed, not verified: {reason}")),
    };
    json!({"status": status, "text": text})
}

/// The task id, kind and state of an event (as JSON).
fn describe_event(v: &Value) -> (Option<String>, &'static str, Option<String>) {
    let s = |x: &Value| x.as_str().map(str::to_owned);
    if let Some(t) = v.get("task") {
        let state = t.pointer("/status/state").and_then(s);
        return (t.get("id").and_then(s), "task", state);
    }
    if let Some(u) = v.get("statusUpdate") {
        let state = u.pointer("/status/state").and_then(s);
        return (u.get("taskId").and_then(s), "status", state);
    }
    if let Some(u) = v.get("artifactUpdate") {
        return (u.get("taskId").and_then(s), "artifact", None);
    }
    if let Some(m) = v.get("message") {
        return (m.get("taskId").and_then(s), "message", None);
    }
    (None, "unknown", None)
}

/// The `a2a` command doing the same call.
fn a2a_command(reference: &str, binding: &str, op: &str, request: &Value) -> Value {
    let a = format!("-a {} --transport {binding}", shell_quote(reference));
    let str_at = |p: &str| request.pointer(p).and_then(Value::as_str).unwrap_or("");
    let cmd = match op {
        "SendMessage" | "SendStreamingMessage" => {
            let text: Vec<&str> = request
                .pointer("/message/parts")
                .and_then(Value::as_array)
                .map(|ps| {
                    ps.iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            let mut c = format!("a2a send {a}");
            if op == "SendStreamingMessage" {
                c.push_str(" --stream");
            }
            for (flag, p) in [
                ("--task-id", "/message/taskId"),
                ("--context-id", "/message/contextId"),
            ] {
                if !str_at(p).is_empty() {
                    c.push_str(&format!(" {flag} {}", shell_quote(str_at(p))));
                }
            }
            c.push_str(&format!(" {}", shell_quote(&text.join("\n"))));
            c
        }
        "GetTask" => format!("a2a task get {a} {}", shell_quote(str_at("/id"))),
        "CancelTask" => format!("a2a task cancel {a} {}", shell_quote(str_at("/id"))),
        "SubscribeToTask" => format!("a2a task subscribe {a} {}", shell_quote(str_at("/id"))),
        "ListTasks" => format!("a2a task list {a}"),
        _ => return Value::Null,
    };
    json!(cmd)
}

/// Quotes a word for a POSIX shell (single quotes).
fn shell_quote(s: &str) -> String {
    shlex::try_quote(s)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| format!("'{}'", s.replace('\'', "'\\''").replace('\0', "")))
}

/// `a2a inspect`: serves the inspector until interrupted.
pub async fn run(g: &Globals, args: InspectArgs) -> Result<u8, CliError> {
    let mut verifier = CardVerifier::new();
    for f in &args.trust_key {
        verifier = verifier.trust_key_file(f).map_err(|e| {
            CliError::usage(format!("--trust-key: {e}"))
                .with_hint("give a PEM public key (or private key) file: Ed25519, P-256 or RSA")
        })?;
    }
    for url in &args.trust_jwks {
        verifier = verifier.trust_jwks_url(url);
    }
    // Keys given: only they are trusted.
    let has_keys = verifier.has_trusted_keys();
    verifier = verifier.follow_jku(!has_keys);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|e| {
            CliError::internal(format!("cannot listen on 127.0.0.1:{}: {e}", args.port))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| CliError::internal(format!("cannot read the listening address: {e}")))?
        .port();
    let (bus, _) = broadcast::channel(1024);
    let exchanges = Arc::new(WireLog::new(KEEP_EXCHANGES));
    let (ledger, ledger_agent) =
        crate::ledger::session_with_agent(g, g.agent_card.as_deref().unwrap_or("")).await;
    let inner = Arc::new(Inner {
        port,
        globals: g.clone(),
        conn: tokio::sync::RwLock::new(None),
        connected: Mutex::new(Value::Null),
        ledger,
        ledger_agent,
        wire: Mutex::new(Vec::new()),
        timelines: Mutex::new(HashMap::new()),
        deliveries: Arc::new(Mutex::new(Vec::new())),
        webhook: tokio::sync::Mutex::new(None),
        bus,
        next_id: std::sync::atomic::AtomicU64::new(1),
        exchanges: exchanges.clone(),
        tap: Tap::new(exchanges),
        verifier,
    });
    let url = format!("http://127.0.0.1:{port}/");
    println!("Inspector: {url}");
    if let Some(reference) = g.agent_card.clone() {
        let req = ConnectRequest {
            agent: reference,
            binding: g.transport.first().cloned(),
            bearer: None,
            api_key: None,
        };
        if let Err(ApiError(_, body)) = connect_to(&inner, req).await {
            let msg = body
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("cannot connect");
            eprintln!("warning: {msg} (the page shows the problem; connect again from it)");
        }
    }
    if args.open {
        open_browser(&url);
    }
    let app = router(inner);
    axum::serve(listener, app)
        .with_graceful_shutdown(agentwire_server::shutdown_signal())
        .await
        .map_err(|e| CliError::internal(format!("the inspector stopped: {e}")))?;
    Ok(exit::OK)
}

/// Opens `url` with the desktop's opener; a failure is only a warning.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(opener)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        eprintln!("warning: cannot open a browser ({opener}: {e}); open {url} yourself");
    }
}

fn router(inner: Shared) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { page(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/app.js",
            get(|| async { page(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/app.css",
            get(|| async { page(APP_CSS, "text/css; charset=utf-8") }),
        )
        .route("/api/session", get(session))
        .route("/api/connect", post(connect))
        .route("/api/send", post(send))
        .route("/api/tasks", get(list_tasks))
        .route("/api/tasks/{id}", get(get_task))
        .route("/api/tasks/{id}/cancel", post(cancel_task))
        .route("/api/tasks/{id}/subscribe", post(subscribe))
        .route("/api/tasks/{id}/push-configs", get(push_configs))
        .route("/api/timeline/{id}", get(timeline))
        .route("/api/wire", get(wire))
        .route("/api/versions", get(versions))
        .route("/api/versions/{id}/accept", post(accept))
        .route("/api/versions/{id}/refine", post(refine))
        .route("/api/webhook", get(deliveries).post(start_webhook))
        .route("/api/events", get(events))
        .layer(middleware::from_fn_with_state(inner.clone(), guard))
        .with_state(inner)
}

/// A static asset, with a policy that forbids anything but this server's
/// own scripts and styles (no inline script: an agent's text that slipped
/// into the page as markup could not run).
fn page(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// Refuses requests not addressed to the inspector itself: a foreign
/// `Host` (DNS rebinding) or a foreign `Origin` (another site's page).
async fn guard(State(s): State<Shared>, req: Request, next: Next) -> Response {
    if let Err(why) = allowed(s.port, req.headers()) {
        return (
            StatusCode::FORBIDDEN,
            axum::Json(json!({"error": {"code": "FORBIDDEN", "message": why}})),
        )
            .into_response();
    }
    next.run(req).await
}

fn allowed(port: u16, headers: &HeaderMap) -> Result<(), String> {
    let own = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !own.iter().any(|o| o.eq_ignore_ascii_case(host)) {
        return Err(format!(
            "the inspector only answers requests for {} (this one was for {host:?})",
            own[0]
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !own
            .iter()
            .any(|o| origin.eq_ignore_ascii_case(&format!("http://{o}")))
        {
            return Err(format!(
                "the inspector only answers its own page (this request came from {origin:?})"
            ));
        }
    }
    Ok(())
}

async fn session(State(s): State<Shared>) -> ApiResult {
    let webhook = s.webhook.lock().await.as_ref().map(|w| w.url());
    let connected = s
        .connected
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(axum::Json(json!({
        "connected": connected,
        "initialAgent": s.globals.agent_card,
        "webhook": webhook,
        "version": env!("CARGO_PKG_VERSION"),
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConnectRequest {
    agent: String,
    #[serde(default)]
    binding: Option<String>,
    #[serde(default)]
    bearer: Option<String>,
    #[serde(default)]
    api_key: Option<String>,
}

async fn connect(
    State(s): State<Shared>,
    axum::Json(req): axum::Json<ConnectRequest>,
) -> ApiResult {
    connect_to(&s, req).await.map(axum::Json)
}

/// Resolves the card, validates it, checks its signature and connects on
/// the chosen (or negotiated) binding.
async fn connect_to(s: &Inner, req: ConnectRequest) -> Result<Value, ApiError> {
    let mut g = s.globals.clone();
    let reference = req.agent.trim().to_owned();
    if reference.is_empty() {
        return Err(ApiError::bad(
            "give an agent: a host:port, a URL or a card file",
        ));
    }
    g.agent_card = Some(reference.clone());
    g.transport = req
        .binding
        .filter(|b| !b.trim().is_empty())
        .into_iter()
        .collect();
    if let Some(b) = req.bearer.filter(|b| !b.is_empty()) {
        g.bearer = Some(b);
    }
    if let Some(k) = req.api_key.filter(|k| !k.is_empty()) {
        g.api_key = Some(k);
    }
    let settings = Settings::from_globals(&g)?;
    let http = settings.http_client()?;
    let resolved = match settings.resolve_card(&http).await {
        Ok(r) => r,
        Err(e) => {
            let legacy = is_legacy(&e);
            return Err(ApiError(
                StatusCode::BAD_GATEWAY,
                json!({"error": {"code": e.code, "message": e.message, "hint": e.hint}, "legacy": legacy}),
            ));
        }
    };
    let problems = validate_card(&resolved.card);
    let verifier = s.verifier.clone().with_http_client(http.clone());
    let location = resolved.location.clone();
    let url = (location.starts_with("http://") || location.starts_with("https://"))
        .then_some(location.as_str());
    let signature = verifier.verify(&resolved.card, url).await;
    let signature_view = signature_view(&signature, settings.insecure);
    let card_json = to_json(&resolved.card);
    // The user's own service parameters may carry secrets too.
    let mut tap = s.tap.clone();
    for (k, _) in &settings.service_params {
        if !k.eq_ignore_ascii_case("a2a-version") && !k.eq_ignore_ascii_case("a2a-extensions") {
            tap = tap.redact_header(k);
        }
    }
    let agent = Agent::with_card_tapped(settings, http, resolved.card, Some(tap))?;
    let selected = agent.client.inner.interface().map(|i| {
        json!({"binding": i.protocol_binding, "url": i.url, "protocolVersion": i.protocol_version})
    });
    let info = json!({
        "reference": reference,
        "location": location,
        "card": card_json,
        "problems": problems,
        "valid": problems.is_empty(),
        "signature": signature_view["text"],
        "signatureStatus": signature_view["status"],
        "signatureDetail": signature.describe(),
        "signatureVerified": signature.status.is_verified(),
        "selected": selected,
        "available": Binding::ALL.iter().filter(|b| b.is_available()).map(|b| b.as_str()).collect::<Vec<_>>(),
    });
    s.ledger_agent.set(&reference);
    *s.conn.write().await = Some(Arc::new(Conn { agent, reference }));
    *s.connected.lock().unwrap_or_else(|p| p.into_inner()) = info.clone();
    s.publish("connected", info.clone());
    Ok(info)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct FileIn {
    name: String,
    #[serde(default)]
    media_type: String,
    /// The bytes, base64.
    base64: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SendIn {
    #[serde(default)]
    text: String,
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    files: Vec<FileIn>,
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    context_id: Option<String>,
    #[serde(default)]
    message_id: Option<String>,
    #[serde(default)]
    stream: bool,
    /// Ask the agent to push this task's updates to the embedded webhook.
    #[serde(default)]
    push: bool,
}

fn message_of(req: &SendIn) -> Result<Message, ApiError> {
    let mut parts = Vec::new();
    if !req.text.is_empty() {
        parts.push(Part::text(req.text.clone()));
    }
    if let Some(d) = &req.data {
        parts.push(Part::data(d.clone()));
    }
    for f in &req.files {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(f.base64.trim())
            .map_err(|e| ApiError::bad(format!("file {}: not base64 ({e})", f.name)))?;
        let mt = if f.media_type.is_empty() {
            "application/octet-stream"
        } else {
            &f.media_type
        };
        parts.push(Part::file(bytes, f.name.clone(), mt));
    }
    if parts.is_empty() {
        return Err(ApiError::bad(
            "the message is empty: give text, data or a file",
        ));
    }
    let mut m = Message::new(agentwire_types::Role::User, parts);
    if let Some(id) = req.message_id.as_ref().filter(|s| !s.is_empty()) {
        m = m.with_message_id(format!("{id}-{}", agentwire_types::new_id()));
    }
    if let Some(t) = req.task_id.as_ref().filter(|s| !s.is_empty()) {
        m = m.with_task_id(t);
    }
    if let Some(c) = req.context_id.as_ref().filter(|s| !s.is_empty()) {
        m = m.with_context_id(c);
    }
    Ok(m)
}

async fn send(State(s): State<Shared>, axum::Json(req): axum::Json<SendIn>) -> ApiResult {
    let conn = s.conn().await?;
    let message = message_of(&req)?;
    let push = if req.push {
        let url = ensure_webhook(&s).await?;
        Some(TaskPushNotificationConfig {
            url,
            token: String::new(),
            ..Default::default()
        })
    } else {
        None
    };
    send_message(&s, &conn, message, push, req.stream).await
}

async fn send_message(
    s: &Inner,
    conn: &Conn,
    message: Message,
    push: Option<TaskPushNotificationConfig>,
    stream: bool,
) -> ApiResult {
    let request = SendMessageRequest {
        message: Some(message.clone()),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: push,
            ..Default::default()
        }),
        ..Default::default()
    };
    let started = Instant::now();
    if !stream {
        let call = s.wire_start(conn, "SendMessage", to_json(&request));
        let res = tap::scope(
            call.label.clone(),
            Transport::send_message(&conn.agent.client, request, &CallOptions::new()),
        )
        .await;
        return match res {
            Ok(r) => {
                let v = to_json(&r);
                s.wire_end(call, Ok(v.clone()));
                if let Some(t) = r.task() {
                    let ev = StreamResponse::from(t.clone());
                    s.timeline(started, &ev);
                }
                let _ = s.ledger.record_exchange(&message, &r).await;
                Ok(axum::Json(json!({"result": v})))
            }
            Err(e) => {
                let err = conn.agent.err(&e);
                s.wire_end(call, Err(e.to_string()));
                Err(err.into())
            }
        };
    }
    let call = s.wire_start(conn, "SendStreamingMessage", to_json(&request));
    let res = tap::scope(
        call.label.clone(),
        Transport::send_streaming_message(&conn.agent.client, request, &CallOptions::new()),
    )
    .await;
    match res {
        Ok(events) => {
            let events = s.ledger.recording(events, Some(message));
            Ok(axum::Json(drain(s, conn, call, started, events).await))
        }
        Err(e) => {
            let err = conn.agent.err(&e);
            s.wire_end(call, Err(e.to_string()));
            Err(err.into())
        }
    }
}

/// Reads a stream to its end: each event on the timeline and the page,
/// each frame in the wire record.
async fn drain(
    s: &Inner,
    conn: &Conn,
    mut call: WireCall,
    started: Instant,
    mut events: agentwire_client::EventStream,
) -> Value {
    let mut out = Vec::new();
    let mut error = None;
    while let Some(ev) = events.next().await {
        match ev {
            Ok(ev) => {
                let v = to_json(&ev);
                s.timeline(started, &ev);
                if let Some(frames) = call.record["frames"].as_array_mut() {
                    frames.push(json!({
                        "offsetMs": started.elapsed().as_millis() as u64,
                        "id": events.last_event_id(),
                        "data": v,
                    }));
                }
                out.push(v);
            }
            Err(e) => {
                error = Some(conn.agent.err(&e));
                break;
            }
        }
    }
    // The stream is closed before the record is written: its exchange
    // has ended by then.
    drop(events);
    let result = match &error {
        None => json!({"events": out}),
        Some(e) => {
            json!({"events": out, "error": {"code": e.code, "message": e.message, "hint": e.hint}})
        }
    };
    s.wire_end(
        call,
        match &error {
            None => Ok(json!({"streamEnded": true, "events": out.len()})),
            Some(e) => Err(e.message.clone()),
        },
    );
    result
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    #[serde(default)]
    context_id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    page_size: Option<i32>,
    #[serde(default)]
    page_token: Option<String>,
}

async fn list_tasks(State(s): State<Shared>, Query(q): Query<ListQuery>) -> ApiResult {
    let conn = s.conn().await?;
    let status = match q.status.as_deref().filter(|x| !x.is_empty()) {
        Some(x) => TaskState::parse(x)
            .ok_or_else(|| ApiError::bad(format!("unknown task state {x:?}")))?
            as i32,
        None => 0,
    };
    let request = ListTasksRequest {
        context_id: q.context_id.unwrap_or_default(),
        status,
        page_size: q.page_size,
        page_token: q.page_token.unwrap_or_default(),
        ..Default::default()
    };
    let call = s.wire_start(&conn, "ListTasks", to_json(&request));
    let res = tap::scope(
        call.label.clone(),
        Transport::list_tasks(&conn.agent.client, request, &CallOptions::new()),
    )
    .await;
    unary(&s, &conn, call, res)
}

fn unary<T: serde::Serialize>(
    s: &Inner,
    conn: &Conn,
    call: WireCall,
    res: agentwire_client::ClientResult<T>,
) -> ApiResult {
    match res {
        Ok(r) => {
            let v = to_json(&r);
            s.wire_end(call, Ok(v.clone()));
            Ok(axum::Json(v))
        }
        Err(e) => {
            let err = conn.agent.err(&e);
            s.wire_end(call, Err(e.to_string()));
            Err(err.into())
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct GetQuery {
    #[serde(default)]
    history_length: Option<i32>,
}

async fn get_task(
    State(s): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<GetQuery>,
) -> ApiResult {
    let conn = s.conn().await?;
    let request = GetTaskRequest {
        id,
        history_length: q.history_length,
        ..Default::default()
    };
    let call = s.wire_start(&conn, "GetTask", to_json(&request));
    let res = tap::scope(
        call.label.clone(),
        Transport::get_task(&conn.agent.client, request, &CallOptions::new()),
    )
    .await;
    if let Ok(t) = &res {
        let _ = s.ledger.record_task(t).await;
    }
    unary(&s, &conn, call, res)
}

async fn cancel_task(State(s): State<Shared>, Path(id): Path<String>) -> ApiResult {
    let conn = s.conn().await?;
    let request = CancelTaskRequest {
        id,
        ..Default::default()
    };
    let call = s.wire_start(&conn, "CancelTask", to_json(&request));
    let started = Instant::now();
    let res = tap::scope(
        call.label.clone(),
        Transport::cancel_task(&conn.agent.client, request, &CallOptions::new()),
    )
    .await;
    if let Ok(t) = &res {
        let _ = s.ledger.record_task(t).await;
        s.timeline(started, &StreamResponse::from(t.clone()));
    }
    unary(&s, &conn, call, res)
}

async fn subscribe(State(s): State<Shared>, Path(id): Path<String>) -> ApiResult {
    let conn = s.conn().await?;
    let request = SubscribeToTaskRequest {
        id,
        ..Default::default()
    };
    let call = s.wire_start(&conn, "SubscribeToTask", to_json(&request));
    let started = Instant::now();
    let res = tap::scope(
        call.label.clone(),
        Transport::subscribe_to_task(&conn.agent.client, request, &CallOptions::new()),
    )
    .await;
    match res {
        Ok(events) => {
            let events = s.ledger.recording(events, None);
            Ok(axum::Json(drain(&s, &conn, call, started, events).await))
        }
        Err(e) => {
            let err = conn.agent.err(&e);
            s.wire_end(call, Err(e.to_string()));
            Err(err.into())
        }
    }
}

async fn push_configs(State(s): State<Shared>, Path(id): Path<String>) -> ApiResult {
    let conn = s.conn().await?;
    let request = ListTaskPushNotificationConfigsRequest {
        task_id: id,
        ..Default::default()
    };
    let call = s.wire_start(&conn, "ListTaskPushNotificationConfigs", to_json(&request));
    let res = tap::scope(
        call.label.clone(),
        Transport::list_task_push_notification_configs(
            &conn.agent.client,
            request,
            &CallOptions::new(),
        ),
    )
    .await;
    unary(&s, &conn, call, res)
}

async fn timeline(State(s): State<Shared>, Path(id): Path<String>) -> ApiResult {
    let tl = s.timelines.lock().unwrap_or_else(|p| p.into_inner());
    Ok(axum::Json(json!({
        "taskId": id,
        "entries": tl.get(&id).cloned().unwrap_or_default(),
    })))
}

async fn wire(State(s): State<Shared>) -> ApiResult {
    let w = s.wire.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(axum::Json(json!({"calls": w})))
}

async fn versions(State(s): State<Shared>) -> ApiResult {
    let ledger_err = |e: agentwire_client::ledger::LedgerError| {
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"code": "LEDGER", "message": e.to_string()}}),
        )
    };
    let mut out = Vec::new();
    for c in s.ledger.contexts().await.map_err(ledger_err)? {
        let Some(view) = s.ledger.context(&c.id).await.map_err(ledger_err)? else {
            continue;
        };
        let versions: Vec<Value> = view
            .versions
            .iter()
            .map(|v| {
                json!({
                    "artifactId": v.artifact_id, "name": v.artifact_name,
                    "taskId": v.task_id, "previous": v.previous_artifact_id,
                    "accepted": v.accepted_by_user, "at": v.created_at.to_rfc3339(),
                    "artifact": to_json(&v.artifact),
                })
            })
            .collect();
        out.push(json!({"contextId": c.id, "versions": versions}));
    }
    Ok(axum::Json(json!({"contexts": out})))
}

async fn accept(State(s): State<Shared>, Path(id): Path<String>) -> ApiResult {
    let v = s.ledger.accept(&id).await.map_err(|e| {
        ApiError(
            StatusCode::NOT_FOUND,
            json!({"error": {"code": "LEDGER", "message": e.to_string()}}),
        )
    })?;
    Ok(axum::Json(
        json!({"artifactId": v.artifact_id, "name": v.artifact_name, "accepted": v.accepted_by_user}),
    ))
}

async fn refine(
    State(s): State<Shared>,
    Path(id): Path<String>,
    axum::Json(req): axum::Json<SendIn>,
) -> ApiResult {
    let conn = s.conn().await?;
    let message = message_of(&req)?;
    let not_found = |e: agentwire_client::ledger::LedgerError| {
        ApiError(
            StatusCode::NOT_FOUND,
            json!({"error": {"code": "LEDGER", "message": e.to_string()}}),
        )
    };
    let sent = s
        .ledger
        .refinement_message(&id, message.clone())
        .await
        .map_err(not_found)?;
    let request = SendMessageRequest {
        message: Some(sent),
        ..Default::default()
    };
    let call = s.wire_start(&conn, "SendMessage", to_json(&request));
    let started = Instant::now();
    let res = tap::scope(
        call.label.clone(),
        s.ledger.refine(&conn.agent.client, &id, message),
    )
    .await;
    match res {
        Ok(r) => {
            let v = to_json(&r);
            s.wire_end(call, Ok(v.clone()));
            if let Some(t) = r.task() {
                s.timeline(started, &StreamResponse::from(t.clone()));
            }
            Ok(axum::Json(json!({"result": v})))
        }
        Err(e) => {
            s.wire_end(call, Err(e.to_string()));
            Err(ApiError(
                StatusCode::BAD_GATEWAY,
                json!({"error": {"code": "REFINE", "message": e.to_string()}}),
            ))
        }
    }
}

/// The embedded push receiver's URL, started on first use (on loopback).
/// Signatures are checked against the connected agent's keys when it
/// publishes them; unsigned deliveries are accepted and shown as such.
async fn ensure_webhook(s: &Inner) -> Result<String, ApiError> {
    let mut w = s.webhook.lock().await;
    if let Some(r) = w.as_ref() {
        return Ok(r.url());
    }
    let internal = |e: std::io::Error| {
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"code": "WEBHOOK", "message": format!("cannot start the push receiver: {e}")}}),
        )
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(internal)?;
    let mut builder = WebhookReceiver::builder()
        .accept_any_task(true)
        .require_signature(false);
    let base = s.conn.read().await.as_ref().and_then(|c| {
        c.agent
            .card
            .supported_interfaces
            .iter()
            .find(|i| i.url.starts_with("http"))
            .map(|i| i.url.clone())
    });
    if let Some(base) = base {
        builder = builder.agent_url(&base);
    }
    let (receiver, mut notifications) = builder.build();
    let running = receiver.serve(listener).map_err(internal)?;
    let url = running.url();
    *w = Some(running);
    let bus = s.bus.clone();
    let sink = s.deliveries.clone();
    let ledger = s.ledger.clone();
    tokio::spawn(async move {
        while let Some(n) = notifications.next().await {
            // What a delivery says of a task goes into the ledger too.
            let _ = ledger.record_event(&n.event).await;
            let v = json!({
                "at": now(), "taskId": n.task_id, "id": n.id, "sequence": n.sequence,
                "signedBy": n.signed_by, "authenticated": n.authenticated,
                "signature": match &n.signed_by {
                    Some(k) => format!("verified (key {k})"),
                    None => "unsigned".into(),
                },
                "event": to_json(&n.event),
            });
            push_bounded(&sink, v.clone());
            let _ = bus.send(json!({"kind": "delivery", "data": v}).to_string());
        }
    });
    Ok(url)
}

async fn start_webhook(State(s): State<Shared>) -> ApiResult {
    let url = ensure_webhook(&s).await?;
    Ok(axum::Json(json!({"url": url})))
}

async fn deliveries(State(s): State<Shared>) -> ApiResult {
    let url = s.webhook.lock().await.as_ref().map(|w| w.url());
    let list = s
        .deliveries
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(axum::Json(json!({"url": url, "deliveries": list})))
}

/// Live updates for the page, as Server-Sent Events.
async fn events(State(s): State<Shared>) -> impl IntoResponse {
    let rx = s.bus.subscribe();
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        // A page too slow to keep up is told how many updates it missed.
        let msg = match rx.recv().await {
            Ok(msg) => msg,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                json!({"kind": "lagged", "data": n}).to_string()
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((
            Ok::<_, std::convert::Infallible>(Event::default().data(msg)),
            rx,
        ))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().expect("header value"));
        }
        h
    }

    #[test]
    fn only_the_inspectors_own_host_and_origin_pass() {
        assert!(allowed(8080, &headers(&[("host", "127.0.0.1:8080")])).is_ok());
        assert!(allowed(8080, &headers(&[("host", "localhost:8080")])).is_ok());
        assert!(
            allowed(
                8080,
                &headers(&[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://127.0.0.1:8080")
                ])
            )
            .is_ok()
        );
        assert!(allowed(8080, &headers(&[("host", "evil.example:8080")])).is_err());
        assert!(allowed(8080, &headers(&[("host", "127.0.0.1:9999")])).is_err());
        assert!(allowed(8080, &headers(&[])).is_err());
        assert!(
            allowed(
                8080,
                &headers(&[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://evil.example")
                ])
            )
            .is_err()
        );
    }
}
