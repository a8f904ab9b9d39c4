//! Authentication on every binding (spec 7, 13.1): a matrix of schemes
//! (API key, JWT from a JWKS file, JWT from a JWKS URL, OpenID Connect
//! token) x binding (JSON-RPC, HTTP+JSON, gRPC) x operation, with missing,
//! wrong, expired and wrong-audience credentials, each answered with the
//! spec's error and never with data; the challenge of each binding; key
//! rotation and the refresh rate limit; throttling; and two principals
//! (with tenants, and an anonymous caller) who never see each other's
//! tasks on any operation. Mutual TLS joins the matrix with certificates
//! generated here (rcgen): none, one from another authority, an expired
//! one.
//!
//! The JWTs are minted here with keys generated here (ES256); the JWKS URL
//! and the OpenID discovery document are served by a small HTTP server of
//! the test on loopback.

#[macro_use]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentwire_client::{
    Binding, CallOptions, ClientError, ClientResult, GrpcTransport, JsonRpcTransport,
    RestTransport, Transport,
};
use agentwire_server::auth::{
    ApiKeyLocation, ApiKeys, AuthSchemes, JwksSource, JwtAuth, JwtConfig, ThrottleConfig,
};
use agentwire_server::{A2aServer, PushConfig, ServerHandle};
use agentwire_types::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, ErrorKind,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, Message, SubscribeToTaskRequest,
    TaskPushNotificationConfig, TaskState, security_scheme,
};
use base64::Engine as _;
use common::*;
use futures::StreamExt;
use parking_lot::Mutex;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

over_all_bindings!(
    matrix_api_key,
    matrix_jwt_file,
    matrix_jwt_url,
    matrix_oidc,
    matrix_mtls,
    two_principals_never_see_each_other,
);

// ----- keys and tokens ----------------------------------------------------------

/// An ES256 signing key with its key id.
struct SigningKey {
    kid: String,
    pkcs8: Vec<u8>,
    jwk: Value,
}

impl SigningKey {
    fn generate(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap()
            .as_ref()
            .to_vec();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).unwrap();
        // Uncompressed point: 0x04 || x || y.
        let point = pair.public_key().as_ref();
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": b64(&point[1..33]), "y": b64(&point[33..65]),
        });
        Self {
            kid: kid.to_owned(),
            pkcs8,
            jwk,
        }
    }

    /// A token with these claims.
    fn mint(&self, claims: Value) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_ec_der(&self.pkcs8),
        )
        .unwrap()
    }
}

fn jwks(keys: &[&SigningKey]) -> Value {
    json!({ "keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>() })
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

const ISSUER_FILE: &str = "https://issuer.test";
const AUDIENCE: &str = "https://agent.test";

/// Claims of a good token for `sub` from `iss`.
fn claims(iss: &str, sub: &str) -> Value {
    json!({ "iss": iss, "sub": sub, "aud": AUDIENCE, "exp": now() + 600, "iat": now() })
}

// ----- the key server: a JWKS and an OpenID discovery document ---------------------

/// A tiny HTTP server of the test publishing a JWKS at `/jwks.json` and a
/// discovery document at `/.well-known/openid-configuration` (its issuer
/// is its own base URL); the JWKS can be replaced and its fetches counted.
struct KeyServer {
    base: String,
    jwks: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl KeyServer {
    async fn start(keys: Value) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let jwks = Arc::new(Mutex::new(keys));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (j, f, b) = (Arc::clone(&jwks), Arc::clone(&fetches), base.clone());
        let app = axum::Router::new()
            .route(
                "/jwks.json",
                axum::routing::get(move || {
                    let (j, f) = (Arc::clone(&j), Arc::clone(&f));
                    async move {
                        f.fetch_add(1, Ordering::SeqCst);
                        axum::Json(j.lock().clone())
                    }
                }),
            )
            .route(
                "/.well-known/openid-configuration",
                axum::routing::get(move || {
                    let b = b.clone();
                    async move {
                        axum::Json(json!({
                            "issuer": b,
                            "jwks_uri": format!("{b}/jwks.json"),
                            "token_endpoint": format!("{b}/token"),
                        }))
                    }
                }),
            );
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Self {
            base,
            jwks,
            fetches,
            _stop: tx,
        }
    }
}

// ----- servers and transports --------------------------------------------------------

/// The scripted agent with push notifications and an extended card, behind
/// `schemes`.
async fn agent(schemes: AuthSchemes) -> ServerHandle {
    let extended = agents::scripted_card().with_skill(agentwire_types::AgentSkill::new(
        "members",
        "Members only",
        "Shown to authenticated callers",
        ["test"],
    ));
    start_server(
        A2aServer::new(agents::scripted_card(), agents::Scripted::default())
            .push(PushConfig::new().allow_loopback())
            .extended_card(extended)
            .authenticator(Arc::new(schemes)),
    )
    .await
}

/// The card as served (without credentials: it is public).
async fn served_card(server: &ServerHandle) -> agentwire_types::AgentCard {
    let r = raw_send(raw_http().get(format!("{}/.well-known/agent-card.json", server.base_url())))
        .await;
    assert_eq!(r.status, 200);
    serde_json::from_slice(&r.body).expect("an agent card")
}

fn transport(server: &ServerHandle, b: Binding, tenant: &str) -> Box<dyn Transport> {
    let base = server.base_url();
    match b {
        Binding::JsonRpc => Box::new(
            JsonRpcTransport::new(format!("{base}/"))
                .unwrap()
                .with_tenant(tenant),
        ),
        Binding::HttpJson => Box::new(RestTransport::new(base).unwrap().with_tenant(tenant)),
        Binding::Grpc => Box::new(
            GrpcTransport::new(server.local_addr().to_string())
                .unwrap()
                .with_tenant(tenant),
        ),
    }
}

fn bearer(token: &str) -> CallOptions {
    CallOptions::new().with_bearer_token(token)
}

fn api_key(key: &str) -> CallOptions {
    CallOptions::new().with_service_param("x-api-key", key)
}

/// A task of the caller's, left input-required (so it can be canceled,
/// subscribed to and continued), with a push config.
async fn own_task(t: &dyn Transport, opts: &CallOptions, b: Binding) -> (String, String) {
    let res = within(
        format!("[{b}] send"),
        t.send_message(request(msg("tck-input-required")), opts),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] SendMessage with good credentials: {e:?}"));
    let task = res.task().expect("a task").clone();
    assert_eq!(task.state(), TaskState::InputRequired, "[{b}]");
    let config = within(
        format!("[{b}] create push config"),
        t.create_task_push_notification_config(
            TaskPushNotificationConfig {
                task_id: task.id.clone(),
                url: "http://127.0.0.1:9/hook".into(),
                ..Default::default()
            },
            opts,
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] CreateTaskPushNotificationConfig: {e:?}"));
    (task.id, config.id)
}

/// Every operation of spec 3.1 on `task_id` (and its push config
/// `config_id`): each call's outcome, a success shown as text.
async fn every_operation(
    t: &dyn Transport,
    opts: &CallOptions,
    task_id: &str,
    config_id: &str,
) -> Vec<(&'static str, ClientResult<String>)> {
    let show = |r: ClientResult<String>| r;
    let mut out = Vec::new();
    macro_rules! call {
        ($name:literal, $f:expr) => {
            out.push((
                $name,
                show(within($name, $f).await.map(|v| format!("{v:?}"))),
            ));
        };
    }
    call!(
        "SendMessage",
        t.send_message(request(msg("tck-complete-task")), opts)
    );
    call!(
        "SendMessage (continue)",
        t.send_message(
            // Asks for input again: the task stays open for the rest.
            request(msg("tck-input-required").with_task_id(task_id)),
            opts
        )
    );
    call!(
        "SendMessage (reference)",
        t.send_message(
            request(Message {
                reference_task_ids: vec![task_id.to_owned()],
                ..msg("tck-complete-task")
            }),
            opts
        )
    );
    out.push((
        "SendStreamingMessage",
        stream_outcome(
            within(
                "stream",
                t.send_streaming_message(request(msg("tck-complete-task")), opts),
            )
            .await,
        )
        .await,
    ));
    call!(
        "GetTask",
        t.get_task(
            GetTaskRequest {
                id: task_id.to_owned(),
                ..Default::default()
            },
            opts
        )
    );
    out.push((
        "ListTasks",
        within("list", t.list_tasks(ListTasksRequest::default(), opts))
            .await
            .map(|page| format!("{page:?}")),
    ));
    out.push((
        "SubscribeToTask",
        stream_outcome(
            within(
                "subscribe",
                t.subscribe_to_task(
                    SubscribeToTaskRequest {
                        id: task_id.to_owned(),
                        ..Default::default()
                    },
                    opts,
                ),
            )
            .await,
        )
        .await,
    ));
    call!(
        "CreateTaskPushNotificationConfig",
        t.create_task_push_notification_config(
            TaskPushNotificationConfig {
                task_id: task_id.to_owned(),
                url: "http://127.0.0.1:9/other".into(),
                ..Default::default()
            },
            opts
        )
    );
    call!(
        "GetTaskPushNotificationConfig",
        t.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest {
                task_id: task_id.to_owned(),
                id: config_id.to_owned(),
                ..Default::default()
            },
            opts
        )
    );
    call!(
        "ListTaskPushNotificationConfigs",
        t.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest {
                task_id: task_id.to_owned(),
                ..Default::default()
            },
            opts
        )
    );
    call!(
        "DeleteTaskPushNotificationConfig",
        t.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest {
                task_id: task_id.to_owned(),
                id: config_id.to_owned(),
                ..Default::default()
            },
            opts
        )
    );
    call!(
        "GetExtendedAgentCard",
        t.get_extended_agent_card(GetExtendedAgentCardRequest::default(), opts)
    );
    // Last: it ends the task.
    call!(
        "CancelTask",
        t.cancel_task(
            CancelTaskRequest {
                id: task_id.to_owned(),
                ..Default::default()
            },
            opts
        )
    );
    out
}

/// A stream call's outcome: its error, or its first event as data.
async fn stream_outcome(r: ClientResult<agentwire_client::EventStream>) -> ClientResult<String> {
    let mut s = r?;
    match within("first event", s.next()).await {
        Some(Ok(ev)) => Ok(format!("{ev:?}")),
        Some(Err(e)) => Err(e),
        None => Ok("an empty stream".into()),
    }
}

/// Asserts that every operation was refused with `kind`: never data.
fn all_refused(
    outcomes: Vec<(&'static str, ClientResult<String>)>,
    kind: ErrorKind,
    what: &str,
) -> usize {
    let n = outcomes.len();
    for (op, r) in outcomes {
        match r {
            Err(ClientError::A2a(e)) if e.kind == kind => {}
            Err(other) => panic!("{what}: {op}: expected {kind:?}, got {other:?}"),
            Ok(data) => panic!("{what}: {op}: expected {kind:?}, but got data: {data}"),
        }
    }
    n
}

/// The cells one scheme x binding ran: calls with bad credentials (each
/// answered with the expected error, or the test fails first) and calls
/// with good ones (each answered with data).
#[derive(Default)]
struct Cells {
    faults: usize,
    refused: usize,
    served: usize,
}

impl Cells {
    /// Prints the summary line `auth matrix: SCHEME x BINDING: ...` (run
    /// with `--nocapture` to see them).
    fn report(&self, scheme: &str, b: Binding) {
        eprintln!(
            "auth matrix: {scheme} x {b}: {} cells ({} faults), {} answered the expected error, {} served the owner",
            self.refused + self.served,
            self.faults,
            self.refused,
            self.served
        );
    }
}

/// The matrix for one scheme and binding: good credentials work on every
/// operation; each bad credential is refused on every operation with
/// Unauthenticated.
async fn matrix(
    b: Binding,
    server: &ServerHandle,
    good: CallOptions,
    bad: Vec<(&str, CallOptions)>,
) -> Cells {
    let mut cells = Cells::default();
    let t = transport(server, b, "");
    let (task_id, config_id) = own_task(&*t, &good, b).await;
    for (what, opts) in &bad {
        let outcomes = every_operation(&*t, opts, &task_id, &config_id).await;
        let n = all_refused(
            outcomes,
            ErrorKind::Unauthenticated,
            &format!("[{b}] {what}"),
        );
        assert_eq!(n, 13, "[{b}] {what}: every operation tried");
        cells.faults += 1;
        cells.refused += n;
    }
    // The owner still has everything, untouched.
    for (op, r) in every_operation(&*t, &good, &task_id, &config_id).await {
        if let Err(e) = r {
            panic!("[{b}] {op} with good credentials: {e:?}");
        }
        cells.served += 1;
    }
    cells
}

/// Bad bearer credentials: none, not a JWT, a JWT from an unknown key,
/// expired, for another audience, from another issuer, not yet valid.
fn bad_tokens(iss: &str, key: &SigningKey) -> Vec<(&'static str, CallOptions)> {
    let stranger = SigningKey::generate(&key.kid);
    let mut expired = claims(iss, "alice");
    expired["exp"] = json!(now() - 3600);
    let mut other_aud = claims(iss, "alice");
    other_aud["aud"] = json!("https://someone-else.test");
    let mut early = claims(iss, "alice");
    early["nbf"] = json!(now() + 3600);
    vec![
        ("missing credentials", CallOptions::new()),
        ("a wrong token", bearer("not-a-jwt")),
        (
            "a token signed by an unknown key",
            bearer(&stranger.mint(claims(iss, "alice"))),
        ),
        ("an expired token", bearer(&key.mint(expired))),
        ("a token for another audience", bearer(&key.mint(other_aud))),
        (
            "a token from another issuer",
            bearer(&key.mint(claims("https://evil.test", "alice"))),
        ),
        ("a token not valid yet", bearer(&key.mint(early))),
        ("an API key instead", api_key("alice-key-0123456789")),
    ]
}

// ----- mutual TLS ---------------------------------------------------------------

/// A certificate authority of the mutual TLS rows.
struct TestCa {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Self { cert, key }
    }

    /// A certificate and its key (PEM); `expired`: valid in 2020 only.
    fn issue(&self, cn: &str, server: bool, expired: bool) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let sans = if server {
            vec!["localhost".to_owned()]
        } else {
            Vec::new()
        };
        let mut params = rcgen::CertificateParams::new(sans).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 12, 31);
        }
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A transport over TLS to `server` with these client TLS settings.
fn tls_transport(
    server: &ServerHandle,
    b: Binding,
    tls: &agentwire_client::tls::TlsOptions,
) -> (Box<dyn Transport>, String) {
    let base = format!("https://localhost:{}", server.local_addr().port());
    let http = tls.http_client().unwrap();
    let t: Box<dyn Transport> = match b {
        Binding::JsonRpc => Box::new(
            JsonRpcTransport::new(format!("{base}/"))
                .unwrap()
                .with_http_client(http),
        ),
        Binding::HttpJson => Box::new(
            RestTransport::new(base.clone())
                .unwrap()
                .with_http_client(http),
        ),
        Binding::Grpc => Box::new(GrpcTransport::with_tls(base.clone(), tls).unwrap()),
    };
    (t, base)
}

/// The matrix row of mutual TLS: the owner's certificate works on every
/// operation; no certificate is Unauthenticated on every operation; a
/// certificate of another authority and an expired one are refused at
/// the handshake on every operation (the TLS alert named by the client):
/// never data.
async fn matrix_mtls(b: Binding) {
    use agentwire_client::tls::{TlsFailure, TlsOptions, diagnose, tls_failure};
    let dir = tempfile::tempdir().unwrap();
    let server_ca = TestCa::new("server CA");
    let clients = TestCa::new("clients CA");
    let other = TestCa::new("another CA");
    let (cert, key) = server_ca.issue("agent", true, false);
    std::fs::write(dir.path().join("server.crt"), cert).unwrap();
    std::fs::write(dir.path().join("server.key"), key).unwrap();
    std::fs::write(dir.path().join("clients.pem"), clients.cert.pem()).unwrap();
    let extended = agents::scripted_card().with_skill(agentwire_types::AgentSkill::new(
        "members",
        "Members only",
        "Shown to authenticated callers",
        ["test"],
    ));
    let server = start_server(
        A2aServer::new(agents::scripted_card(), agents::Scripted::default())
            .push(PushConfig::new().allow_loopback())
            .extended_card(extended)
            .authenticator(Arc::new(AuthSchemes::new().mutual_tls(true).throttle(None)))
            .tls(
                agentwire_server::TlsConfig::new(
                    dir.path().join("server.crt"),
                    dir.path().join("server.key"),
                )
                .client_ca(dir.path().join("clients.pem")),
            ),
    )
    .await;
    let roots = TlsOptions::new().ca_pem(server_ca.cert.pem()).unwrap();
    let with = |(cert, key): (String, String)| roots.clone().identity_pem(cert, key).unwrap();
    let alice = with(clients.issue("alice", false, false));

    let (t, _) = tls_transport(&server, b, &alice);
    let (task_id, config_id) = own_task(&*t, &CallOptions::new(), b).await;

    // No certificate: the handshake goes through, every call is refused.
    let (anonymous, _) = tls_transport(&server, b, &roots);
    let outcomes = every_operation(&*anonymous, &CallOptions::new(), &task_id, &config_id).await;
    let n = all_refused(
        outcomes,
        ErrorKind::Unauthenticated,
        &format!("[{b}] no client certificate"),
    );
    assert_eq!(n, 13, "[{b}] every operation tried");
    let mut cells = Cells {
        faults: 1,
        refused: n,
        served: 0,
    };

    // Certificates the agent does not trust: refused at the handshake.
    for (what, identity) in [
        (
            "a certificate of another authority",
            with(other.issue("alice", false, false)),
        ),
        (
            "an expired certificate",
            with(clients.issue("alice", false, true)),
        ),
    ] {
        let (t, url) = tls_transport(&server, b, &identity);
        let outcomes = every_operation(&*t, &CallOptions::new(), &task_id, &config_id).await;
        assert_eq!(outcomes.len(), 13, "[{b}] {what}: every operation tried");
        cells.faults += 1;
        for (op, r) in outcomes {
            match r {
                Ok(data) => panic!("[{b}] {what}: {op}: expected a refusal, got data: {data}"),
                Err(e) => {
                    let e = diagnose(e, &url, Some(&identity)).await;
                    assert!(
                        matches!(tls_failure(&e), Some(TlsFailure::ClientCertificate(_))),
                        "[{b}] {what}: {op}: expected the handshake refused, got {e:?}"
                    );
                    cells.refused += 1;
                }
            }
        }
    }

    // The owner still has everything, untouched.
    for (op, r) in every_operation(&*t, &CallOptions::new(), &task_id, &config_id).await {
        if let Err(e) = r {
            panic!("[{b}] {op} with the owner's certificate: {e:?}");
        }
        cells.served += 1;
    }
    cells.report("mTLS", b);
}

async fn matrix_api_key(b: Binding) {
    let keys = ApiKeys::new(ApiKeyLocation::default_header())
        .parse("alice:alice-key-0123456789")
        .unwrap();
    let server = agent(AuthSchemes::new().api_keys(keys).throttle(None)).await;
    let card = served_card(&server).await;
    assert!(matches!(
        card.security_schemes["apiKey"].scheme,
        Some(security_scheme::Scheme::ApiKeySecurityScheme(_))
    ));
    assert_eq!(card.security_requirements.len(), 1);
    matrix(
        b,
        &server,
        api_key("alice-key-0123456789"),
        vec![
            ("missing credentials", CallOptions::new()),
            ("a wrong key", api_key("alice-key-0123456780")),
            ("an empty key", api_key("")),
            ("a bearer token instead", bearer("alice-key-0123456789")),
        ],
    )
    .await
    .report("API key", b);
}

async fn matrix_jwt_file(b: Binding) {
    let key = SigningKey::generate("file-1");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks(&[&key]).to_string()).unwrap();
    let jwt = JwtAuth::new(
        JwtConfig::new(JwksSource::File(path))
            .issuer(ISSUER_FILE)
            .audience(AUDIENCE)
            .leeway(Duration::from_secs(5)),
    )
    .unwrap();
    let server = agent(AuthSchemes::new().jwt(jwt).throttle(None)).await;
    assert!(matches!(
        &served_card(&server).await.security_schemes["bearer"].scheme,
        Some(security_scheme::Scheme::HttpAuthSecurityScheme(h)) if h.scheme == "Bearer" && h.bearer_format == "JWT"
    ));
    let good = bearer(&key.mint(claims(ISSUER_FILE, "alice")));
    matrix(b, &server, good, bad_tokens(ISSUER_FILE, &key))
        .await
        .report("JWT (JWKS file)", b);
}

async fn matrix_jwt_url(b: Binding) {
    let key = SigningKey::generate("url-1");
    let keys = KeyServer::start(jwks(&[&key])).await;
    let jwt = JwtAuth::new(
        JwtConfig::new(JwksSource::Url(format!("{}/jwks.json", keys.base)))
            .issuer(ISSUER_FILE)
            .audience(AUDIENCE)
            .leeway(Duration::from_secs(5)),
    )
    .unwrap();
    let server = agent(AuthSchemes::new().jwt(jwt).throttle(None)).await;
    let good = bearer(&key.mint(claims(ISSUER_FILE, "alice")));
    matrix(b, &server, good, bad_tokens(ISSUER_FILE, &key))
        .await
        .report("JWT (JWKS URL)", b);
    // The keys were fetched once, then taken from the cache (the unknown
    // key ids of the bad tokens may cause one fetch more, not one a call).
    let n = keys.fetches.load(Ordering::SeqCst);
    assert!((1..=2).contains(&n), "[{b}] {n} fetches of the JWKS");
}

async fn matrix_oidc(b: Binding) {
    let key = SigningKey::generate("oidc-1");
    let provider = KeyServer::start(jwks(&[&key])).await;
    let jwt = JwtAuth::new(
        JwtConfig::new(JwksSource::Oidc(provider.base.clone()))
            .audience(AUDIENCE)
            .require_scope("a2a"),
    )
    .unwrap();
    let server = agent(AuthSchemes::new().jwt(jwt).throttle(None)).await;
    let card = served_card(&server).await;
    match &card.security_schemes["oidc"].scheme {
        Some(security_scheme::Scheme::OpenIdConnectSecurityScheme(o)) => assert_eq!(
            o.open_id_connect_url,
            format!("{}/.well-known/openid-configuration", provider.base)
        ),
        other => panic!("[{b}] expected an OpenID Connect scheme, got {other:?}"),
    }
    assert_eq!(
        card.security_requirements[0].schemes["oidc"].list,
        vec!["a2a".to_owned()]
    );
    let mut good = claims(&provider.base, "alice");
    good["scope"] = json!("openid a2a");
    let mut cells = matrix(
        b,
        &server,
        bearer(&key.mint(good)),
        bad_tokens(&provider.base, &key),
    )
    .await;
    // A good token without the scope: 403 / PERMISSION_DENIED, on every
    // operation.
    let t = transport(&server, b, "");
    let no_scope = bearer(&key.mint(claims(&provider.base, "alice")));
    let outcomes = every_operation(&*t, &no_scope, "some-task", "some-config").await;
    let n = all_refused(
        outcomes,
        ErrorKind::PermissionDenied,
        &format!("[{b}] no scope"),
    );
    assert_eq!(n, 13, "[{b}] no scope: every operation tried");
    cells.faults += 1;
    cells.refused += n;
    cells.report("OIDC", b);
}

// ----- the challenge of each binding ----------------------------------------------------

/// HTTP+JSON: 401 with `WWW-Authenticate`, 403 for a missing scope;
/// JSON-RPC: -31401 with the challenge header; gRPC: UNAUTHENTICATED with
/// `www-authenticate` metadata; the card stays public; no credential is
/// echoed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_binding_answers_with_its_challenge() {
    let key = SigningKey::generate("k1");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks(&[&key]).to_string()).unwrap();
    let jwt = JwtAuth::new(
        JwtConfig::new(JwksSource::File(path))
            .issuer(ISSUER_FILE)
            .audience(AUDIENCE)
            .require_scope("a2a"),
    )
    .unwrap();
    let server = agent(AuthSchemes::new().jwt(jwt).throttle(None)).await;
    let base = server.base_url();
    let http = raw_http();
    // The card is public.
    let card = raw_send(http.get(format!("{base}/.well-known/agent-card.json"))).await;
    assert_eq!(card.status, 200);

    let secret = "s3cret-token-value";
    let r = raw_send(
        http.get(format!("{base}/tasks"))
            .header("A2A-Version", "1.0")
            .bearer_auth(secret),
    )
    .await;
    assert_eq!(r.status, 401);
    let challenge = r.headers["www-authenticate"].to_str().unwrap();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    assert!(challenge.contains("invalid_token"), "{challenge}");
    let body = String::from_utf8_lossy(&r.body);
    assert!(
        !body.contains(secret) && !challenge.contains(secret),
        "{body}"
    );
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["error"]["status"], "UNAUTHENTICATED");

    let r = raw_send(
        http.get(format!("{base}/tasks"))
            .header("A2A-Version", "1.0"),
    )
    .await;
    assert_eq!(r.status, 401);
    assert!(r.headers.contains_key("www-authenticate"));

    let no_scope = key.mint(claims(ISSUER_FILE, "alice"));
    let r = raw_send(
        http.get(format!("{base}/tasks"))
            .header("A2A-Version", "1.0")
            .bearer_auth(&no_scope),
    )
    .await;
    assert_eq!(r.status, 403);
    let challenge = r.headers["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains("insufficient_scope"), "{challenge}");
    assert!(challenge.contains(r#"scope="a2a""#), "{challenge}");

    let r = raw_send(
        http.post(format!("{base}/"))
            .header("A2A-Version", "1.0")
            .bearer_auth(secret)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})),
    )
    .await;
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["error"]["code"], -31401, "{v}");
    assert!(v.get("result").is_none());
    assert!(r.headers.contains_key("www-authenticate"));
    assert!(!String::from_utf8_lossy(&r.body).contains(secret));

    let mut grpc = grpc_raw(&server).await;
    let mut req = grpc_v1(ListTasksRequest::default());
    req.metadata_mut()
        .insert("authorization", format!("Bearer {secret}").parse().unwrap());
    let status = grpc.list_tasks(req).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert!(status.metadata().get("www-authenticate").is_some());
    assert!(!status.message().contains(secret));
    let mut req = grpc_v1(ListTasksRequest::default());
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {no_scope}").parse().unwrap(),
    );
    let status = grpc.list_tasks(req).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied);
}

// ----- keys: rotation and the refresh rate limit -----------------------------------------

/// A token signed by a new key is accepted once the JWKS has it (fetched
/// again on the unknown key id); the removed key stops working; with a
/// long refresh interval, unknown key ids do not make the server fetch
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_rotation_and_refresh_rate_limit() {
    let old = SigningKey::generate("2024");
    let new = SigningKey::generate("2025");
    let keys = KeyServer::start(jwks(&[&old])).await;
    let url = format!("{}/jwks.json", keys.base);
    let config = |interval| {
        JwtConfig::new(JwksSource::Url(url.clone()))
            .issuer(ISSUER_FILE)
            .audience(AUDIENCE)
            .refresh_interval(interval)
    };
    let server = agent(
        AuthSchemes::new()
            .jwt(JwtAuth::new(config(Duration::ZERO)).unwrap())
            .throttle(None),
    )
    .await;
    let t = transport(&server, Binding::JsonRpc, "");
    let list = |token: String| {
        let t = &t;
        async move {
            within(
                "list",
                t.list_tasks(ListTasksRequest::default(), &bearer(&token)),
            )
            .await
        }
    };
    // One token, sent twice: the second call is answered from the tokens
    // already verified.
    let before_rotation = old.mint(claims(ISSUER_FILE, "alice"));
    list(before_rotation.clone()).await.unwrap();
    list(before_rotation.clone()).await.unwrap();
    *keys.jwks.lock() = jwks(&[&new]);
    list(new.mint(claims(ISSUER_FILE, "alice")))
        .await
        .expect("the new key, after rotation");
    let e = list(old.mint(claims(ISSUER_FILE, "alice"))).await;
    assert!(
        matches!(&e, Err(ClientError::A2a(e)) if e.kind == ErrorKind::Unauthenticated),
        "the removed key: {e:?}"
    );
    // The token accepted before the rotation is refused too: it was checked
    // under keys no longer in use.
    let e = list(before_rotation).await;
    assert!(
        matches!(&e, Err(ClientError::A2a(e)) if e.kind == ErrorKind::Unauthenticated),
        "a token accepted under the removed key: {e:?}"
    );

    // A long interval: one fetch, however many unknown key ids come.
    let limited = KeyServer::start(jwks(&[&old])).await;
    let url = format!("{}/jwks.json", limited.base);
    let jwt = JwtAuth::new(
        JwtConfig::new(JwksSource::Url(url))
            .issuer(ISSUER_FILE)
            .audience(AUDIENCE)
            .refresh_interval(Duration::from_secs(3600)),
    )
    .unwrap();
    let server = agent(AuthSchemes::new().jwt(jwt).throttle(None)).await;
    let t = transport(&server, Binding::HttpJson, "");
    for i in 0..5 {
        let stranger = SigningKey::generate(&format!("made-up-{i}"));
        let r = within(
            "list",
            t.list_tasks(
                ListTasksRequest::default(),
                &bearer(&stranger.mint(claims(ISSUER_FILE, "alice"))),
            ),
        )
        .await;
        assert!(r.is_err());
    }
    assert_eq!(limited.fetches.load(Ordering::SeqCst), 1);
}

// ----- throttling --------------------------------------------------------------------------

/// After too many failures from one address, even good credentials from
/// it are refused for a while (and the refusal says why).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_failures_are_throttled() {
    let keys = ApiKeys::new(ApiKeyLocation::default_header())
        .parse("alice:alice-key-0123456789")
        .unwrap();
    let server = agent(
        AuthSchemes::new()
            .api_keys(keys)
            .throttle(Some(ThrottleConfig::new(3, Duration::from_secs(600)))),
    )
    .await;
    for b in [Binding::JsonRpc, Binding::HttpJson, Binding::Grpc] {
        let t = transport(&server, b, "");
        let list = |opts: CallOptions| {
            let t = &t;
            async move { within("list", t.list_tasks(ListTasksRequest::default(), &opts)).await }
        };
        if b == Binding::JsonRpc {
            list(api_key("alice-key-0123456789")).await.unwrap();
            for _ in 0..3 {
                assert!(list(api_key("wrong-key-0123456789")).await.is_err());
            }
        }
        match list(api_key("alice-key-0123456789")).await {
            Err(ClientError::A2a(e)) if e.kind == ErrorKind::Unauthenticated => {
                assert!(e.message.contains("too many"), "[{b}] {}", e.message)
            }
            other => panic!("[{b}] expected a throttled refusal, got {other:?}"),
        }
    }
}

// ----- two principals ------------------------------------------------------------------------

/// Alice's task (under a tenant, and without one) is invisible to Bob, to
/// Alice under another tenant and to anonymous callers, on every
/// operation: TaskNotFound; their lists hold only their own; a reference
/// to her task is refused; anonymous callers never see authenticated
/// tasks, nor the reverse.
async fn two_principals_never_see_each_other(b: Binding) {
    let keys = ApiKeys::new(ApiKeyLocation::default_header())
        .parse("alice:alice-key-0123456789\nbob:bob-key-0123456789")
        .unwrap();
    let server = agent(
        AuthSchemes::new()
            .api_keys(keys)
            .allow_anonymous(true)
            .throttle(None),
    )
    .await;
    // Anonymous callers are let in: the card has the scheme but requires
    // nothing.
    assert!(served_card(&server).await.security_requirements.is_empty());
    let alice = api_key("alice-key-0123456789");
    let bob = api_key("bob-key-0123456789");
    let anonymous = CallOptions::new();
    for tenant in ["", "acme"] {
        let t = transport(&server, b, tenant);
        let (task_id, config_id) = own_task(&*t, &alice, b).await;
        let others: Vec<(String, Box<dyn Transport>, &CallOptions)> = vec![
            (
                format!("bob (tenant {tenant:?})"),
                transport(&server, b, tenant),
                &bob,
            ),
            (
                format!("anonymous (tenant {tenant:?})"),
                transport(&server, b, tenant),
                &anonymous,
            ),
            (
                "alice under another tenant".into(),
                transport(&server, b, "other"),
                &alice,
            ),
        ];
        for (who, other, opts) in &others {
            let outcomes = every_operation(&**other, opts, &task_id, &config_id).await;
            for (op, r) in outcomes {
                let expected = match op {
                    // Their own new task, their own (empty) list, the
                    // extended card for the authenticated.
                    "SendMessage" | "SendStreamingMessage" | "ListTasks" => None,
                    "GetExtendedAgentCard" if !std::ptr::eq(*opts, &anonymous) => None,
                    "GetExtendedAgentCard" => Some(ErrorKind::Unauthenticated),
                    _ => Some(ErrorKind::TaskNotFound),
                };
                match (expected, r) {
                    (None, Ok(data)) => {
                        assert!(
                            !data.contains(&task_id),
                            "[{b}] {who}: {op} shows alice's task: {data}"
                        )
                    }
                    (Some(kind), Err(ClientError::A2a(e))) if e.kind == kind => {}
                    (expected, r) => {
                        panic!("[{b}] {who}: {op}: expected {expected:?}, got {r:?}")
                    }
                }
            }
        }
        // Each list holds only its caller's tasks.
        for (who, opts) in [("alice", &alice), ("bob", &bob), ("anonymous", &anonymous)] {
            let page = within("list", t.list_tasks(ListTasksRequest::default(), opts))
                .await
                .unwrap();
            let ids: Vec<&str> = page.tasks.iter().map(|t| t.id.as_str()).collect();
            assert_eq!(
                ids.contains(&task_id.as_str()),
                who == "alice",
                "[{b}] tenant {tenant:?}: {who}'s list: {ids:?}"
            );
        }
        // Alice's task, untouched by the others.
        let task = within(
            "get",
            t.get_task(
                GetTaskRequest {
                    id: task_id.clone(),
                    ..Default::default()
                },
                &alice,
            ),
        )
        .await
        .unwrap();
        assert_eq!(task.state(), TaskState::InputRequired, "[{b}]");
        let configs = within(
            "list configs",
            t.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest {
                    task_id: task_id.clone(),
                    ..Default::default()
                },
                &alice,
            ),
        )
        .await
        .unwrap();
        assert_eq!(configs.configs.len(), 1, "[{b}] only alice's config");
    }
    // An anonymous task is invisible to the authenticated.
    let t = transport(&server, b, "");
    let (anon_task, anon_config) = own_task(&*t, &anonymous, b).await;
    let outcomes = every_operation(&*t, &alice, &anon_task, &anon_config).await;
    for (op, r) in outcomes {
        if matches!(
            op,
            "SendMessage" | "SendStreamingMessage" | "ListTasks" | "GetExtendedAgentCard"
        ) {
            let data = r.unwrap_or_else(|e| panic!("[{b}] alice: {op}: {e:?}"));
            assert!(!data.contains(&anon_task), "[{b}] alice: {op}: {data}");
        } else {
            expect_kind(
                r,
                ErrorKind::TaskNotFound,
                format!("[{b}] alice: {op} on the anonymous task"),
            );
        }
    }
}
