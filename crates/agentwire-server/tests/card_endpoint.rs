//! The agent card endpoint's HTTP caching (spec 8.6): `ETag`,
//! `Last-Modified` and `Cache-Control` (`no-cache` by default, a max-age
//! when the deployment chooses one), and `304 Not Modified` answers to
//! conditional requests, on a served agent and on the router mounted in an
//! application of one's own.

use std::time::{Duration, SystemTime};

use agentwire_server::{
    A2aResult, A2aServer, AgentExecutor, RequestContext, RequestHandler, RouterOptions,
    ServerHandle, TaskUpdater, router,
};
use agentwire_types::{AGENT_CARD_PATH, AgentCard};
use http::{HeaderMap, StatusCode, header};
use tower::ServiceExt;

/// A plain HTTP client. reqwest is built without a TLS crypto provider of
/// its own (the project uses ring's): one is installed first.
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

struct Idle;

impl AgentExecutor for Idle {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.complete().await
    }
}

fn card() -> AgentCard {
    AgentCard::new("Cards", "serves its card", "1.0.0")
}

async fn serve(server: A2aServer) -> ServerHandle {
    server
        .bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0")
        .spawn()
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: header::HeaderName) -> String {
        self.headers
            .get(&name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", self.headers))
            .to_str()
            .expect("ASCII")
            .to_owned()
    }
}

async fn get(server: &ServerHandle, headers: &[(header::HeaderName, &str)]) -> Answer {
    let mut rb = http()
        .get(format!("{}{AGENT_CARD_PATH}", server.base_url()))
        .timeout(Duration::from_secs(10));
    for (k, v) in headers {
        rb = rb.header(k, *v);
    }
    let resp = rb.send().await.expect("GET the card");
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp.bytes().await.expect("body").to_vec();
    Answer {
        status,
        headers,
        body,
    }
}

#[tokio::test]
async fn default_is_no_cache_with_validators_and_304s() {
    let server = serve(A2aServer::new(card(), Idle)).await;
    let first = get(&server, &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header(header::CACHE_CONTROL), "no-cache");
    let etag = first.header(header::ETAG);
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    let last_modified = first.header(header::LAST_MODIFIED);
    let modified = httpdate::parse_http_date(&last_modified).expect("an HTTP date");
    assert!(modified <= SystemTime::now());
    let served: AgentCard = serde_json::from_slice(&first.body).expect("the card");
    assert_eq!(served.name, "Cards");

    // If-None-Match with the ETag (strong, weak, in a list, or `*`).
    for inm in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".to_owned(),
    ] {
        let again = get(&server, &[(header::IF_NONE_MATCH, &inm)]).await;
        assert_eq!(
            again.status,
            StatusCode::NOT_MODIFIED,
            "If-None-Match: {inm}"
        );
        assert!(again.body.is_empty());
        assert_eq!(again.header(header::ETAG), etag);
        assert_eq!(again.header(header::CACHE_CONTROL), "no-cache");
        assert_eq!(again.header(header::LAST_MODIFIED), last_modified);
    }
    let other = get(&server, &[(header::IF_NONE_MATCH, "\"other\"")]).await;
    assert_eq!(other.status, StatusCode::OK);
    assert_eq!(other.body, first.body);

    // If-Modified-Since: not modified since Last-Modified (or later).
    let later = httpdate::fmt_http_date(modified + Duration::from_secs(60));
    for ims in [last_modified.as_str(), later.as_str()] {
        let again = get(&server, &[(header::IF_MODIFIED_SINCE, ims)]).await;
        assert_eq!(
            again.status,
            StatusCode::NOT_MODIFIED,
            "If-Modified-Since: {ims}"
        );
    }
    let earlier = httpdate::fmt_http_date(modified - Duration::from_secs(3600));
    let again = get(&server, &[(header::IF_MODIFIED_SINCE, &earlier)]).await;
    assert_eq!(again.status, StatusCode::OK);
    let garbled = get(&server, &[(header::IF_MODIFIED_SINCE, "yesterday")]).await;
    assert_eq!(garbled.status, StatusCode::OK);
    // If-None-Match decides when both are sent (RFC 9110 13.2.2).
    let both = get(
        &server,
        &[
            (header::IF_NONE_MATCH, "\"other\""),
            (header::IF_MODIFIED_SINCE, &later),
        ],
    )
    .await;
    assert_eq!(both.status, StatusCode::OK);
}

#[tokio::test]
async fn a_chosen_max_age_is_sent() {
    let server = serve(A2aServer::new(card(), Idle).card_max_age(Duration::from_secs(600))).await;
    let first = get(&server, &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header(header::CACHE_CONTROL), "public, max-age=600");
    let etag = first.header(header::ETAG);
    let again = get(&server, &[(header::IF_NONE_MATCH, &etag)]).await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert_eq!(again.header(header::CACHE_CONTROL), "public, max-age=600");
}

#[tokio::test]
async fn another_card_has_another_etag() {
    let a = serve(A2aServer::new(card(), Idle)).await;
    let b = serve(A2aServer::new(card().with_streaming(false), Idle)).await;
    let etag_a = get(&a, &[]).await.header(header::ETAG);
    let etag_b = get(&b, &[]).await.header(header::ETAG);
    assert_ne!(etag_a, etag_b);
    let stale = get(&b, &[(header::IF_NONE_MATCH, &etag_a)]).await;
    assert_eq!(stale.status, StatusCode::OK);
}

#[tokio::test]
async fn the_router_serves_the_card_the_same_way() {
    let handler = RequestHandler::builder(card(), Idle).build();
    let request = |inm: Option<&str>| {
        let mut rb = http::Request::get(AGENT_CARD_PATH);
        if let Some(v) = inm {
            rb = rb.header(header::IF_NONE_MATCH, v);
        }
        rb.body(axum::body::Body::empty()).expect("request")
    };
    let app = router(handler.clone(), &RouterOptions::default());
    let first = app.clone().oneshot(request(None)).await.expect("answer");
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()[header::CACHE_CONTROL], "no-cache");
    assert!(first.headers().contains_key(header::LAST_MODIFIED));
    let etag = first.headers()[header::ETAG]
        .to_str()
        .expect("ASCII")
        .to_owned();
    let again = app.oneshot(request(Some(&etag))).await.expect("answer");
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);

    let options = RouterOptions {
        card_max_age: Some(Duration::from_secs(120)),
        ..Default::default()
    };
    let app = router(handler, &options);
    let first = app.oneshot(request(None)).await.expect("answer");
    assert_eq!(
        first.headers()[header::CACHE_CONTROL],
        "public, max-age=120"
    );
}

/// A signed card (spec 8.4): the served card carries one signature per key,
/// whose `jku` names the JWKS the server publishes, and verifies with the
/// keys of that JWKS; the ETag follows the signed bytes.
#[tokio::test]
async fn a_signed_card_verifies_with_the_published_jwks() {
    use agentwire_server::CardSigning;
    use agentwire_types::jws::{self, CardSignatureStatus, KeySet, SigningKey};

    let ed = SigningKey::from_pkcs8_der(&SigningKey::generate_ed25519_pkcs8().unwrap()).unwrap();
    let ec = SigningKey::from_pkcs8_der(&SigningKey::generate_p256_pkcs8().unwrap()).unwrap();
    let server =
        serve(A2aServer::new(card(), Idle).sign_card(CardSigning::new(ed.clone()).key(ec.clone())))
            .await;
    let base = server.base_url();
    let http = http();
    let card: serde_json::Value = http
        .get(format!("{base}{AGENT_CARD_PATH}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sigs = card["signatures"].as_array().expect("signatures");
    assert_eq!(sigs.len(), 2);
    let hints = jws::card_signature_hints(&card);
    let jku = hints[0].jku.clone().expect("jku");
    assert_eq!(jku, format!("{base}{}", jws::CARD_JWKS_PATH));
    assert_eq!(hints[0].kid.as_deref(), Some(ed.kid()));
    assert_eq!(hints[1].kid.as_deref(), Some(ec.kid()));
    let res = http.get(&jku).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()[header::CONTENT_TYPE],
        "application/jwk-set+json"
    );
    let jwks: serde_json::Value = res.json().await.unwrap();
    let keys = KeySet::from_jwks(&jwks).unwrap();
    assert_eq!(keys.len(), 2);
    assert!(matches!(
        jws::verify_card(&card, &keys),
        CardSignatureStatus::Verified { .. }
    ));
    // The card as served says what the server does (interfaces, flags):
    // all of it is covered.
    assert!(
        card["supportedInterfaces"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with(&base)
    );
    let mut changed = card.clone();
    changed["capabilities"]["streaming"] = false.into();
    assert!(matches!(
        jws::verify_card(&changed, &keys),
        CardSignatureStatus::Unverified { .. }
    ));
    let _ = server.shutdown().await;
}

/// Unsigned, the card has no signatures and no JWKS is served.
#[tokio::test]
async fn an_unsigned_card_has_no_jwks() {
    let server = serve(A2aServer::new(card(), Idle)).await;
    let base = server.base_url();
    let res = http()
        .get(format!("{base}{}", agentwire_types::jws::CARD_JWKS_PATH))
        .send()
        .await
        .unwrap();
    assert_ne!(res.status(), StatusCode::OK);
    let _ = server.shutdown().await;
}
