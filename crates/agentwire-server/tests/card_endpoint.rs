//! The agent card endpoint: its HTTP caching (spec 8.6: `ETag`,
//! `Last-Modified` and `Cache-Control` with a max-age, 5 minutes unless the
//! deployment chooses, and `304 Not Modified` answers to conditional
//! requests, on a served agent and on the router mounted in an application
//! of one's own); the form served by version (the 1.0 card, valid against
//! the specification's JSON schema, to 1.0 clients; with the 0.3 members to
//! requests without a version, with `Vary: A2A-Version`); and signed cards,
//! each form checked by a JCS (RFC 8785) verifier written here.

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
async fn default_is_a_max_age_with_validators_and_304s() {
    let server = serve(A2aServer::new(card(), Idle)).await;
    let first = get(&server, &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header(header::CACHE_CONTROL), "public, max-age=300");
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
        assert_eq!(again.header(header::CACHE_CONTROL), "public, max-age=300");
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
    // Zero: clients revalidate before each use.
    let server = serve(A2aServer::new(card(), Idle).card_max_age(Duration::ZERO)).await;
    let first = get(&server, &[]).await;
    assert_eq!(first.header(header::CACHE_CONTROL), "no-cache");
    let again = get(
        &server,
        &[(header::IF_NONE_MATCH, &first.header(header::ETAG))],
    )
    .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
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
    assert_eq!(
        first.headers()[header::CACHE_CONTROL],
        "public, max-age=300"
    );
    assert_eq!(first.headers()[header::VARY], "A2A-Version");
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
        .header("A2A-Version", "1.0")
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

// --- The form served by version ----------------------------------------------

/// The specification's JSON schema of the agent card (tests/schemas, see
/// its README): the bundle's references, which name each message as a file
/// of its own, pointed at the bundle's definitions.
fn card_schema() -> jsonschema::Validator {
    use serde_json::{Map, Value, json};
    fn rewrite(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.remove("$schema");
                if let Some(Value::String(r)) = o.get_mut("$ref") {
                    let name = r
                        .trim_end_matches(".jsonschema.json")
                        .rsplit('.')
                        .next()
                        .unwrap_or_default();
                    *r = format!("#/definitions/{name}");
                }
                o.values_mut().for_each(rewrite);
            }
            Value::Array(a) => a.iter_mut().for_each(rewrite),
            _ => {}
        }
    }
    let bundle: Value =
        serde_json::from_str(include_str!("schemas/a2a.schema.json")).expect("the schema");
    let mut definitions = Map::new();
    for (name, def) in bundle["definitions"].as_object().expect("definitions") {
        let mut def = def.clone();
        rewrite(&mut def);
        definitions.insert(name.replace(' ', ""), def);
    }
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": "#/definitions/AgentCard",
        "definitions": definitions,
    });
    jsonschema::options().build(&root).expect("the card schema")
}

fn schema_errors(schema: &jsonschema::Validator, card: &serde_json::Value) -> Vec<String> {
    schema
        .iter_errors(card)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// A card with what a card may carry: security schemes and requirements,
/// a skill with its own, an extension whose parameters hold null and empty
/// values, non-ASCII text.
fn rich_card() -> AgentCard {
    use agentwire_types::{
        AgentExtension, AgentSkill, ApiKeySecurityScheme, SecurityRequirement, SecurityScheme,
        StringList, security_scheme,
    };
    let mut card = AgentCard::new("Karten — カード 🃏", "serves its card", "1.0.0")
        .with_streaming(true)
        .with_skill(AgentSkill::new("echo", "Écho", "Répète", ["echo"]).with_example("salut"));
    card.security_schemes.insert(
        "key".into(),
        SecurityScheme {
            scheme: Some(security_scheme::Scheme::ApiKeySecurityScheme(
                ApiKeySecurityScheme {
                    location: "header".into(),
                    name: "X-Key".into(),
                    ..Default::default()
                },
            )),
        },
    );
    let requirement = SecurityRequirement {
        schemes: [("key".to_string(), StringList::default())].into(),
    };
    card.security_requirements.push(requirement.clone());
    card.skills[0].security_requirements.push(requirement);
    card.capabilities
        .get_or_insert_with(Default::default)
        .extensions
        .push(AgentExtension {
            uri: "https://example.com/ext/v1".into(),
            params: Some(
                serde_json::from_value(serde_json::json!({
                    "none": null, "empty": "", "list": [], "object": {},
                    "kept": {"n": 1e21, "tenth": 0.1, "big": 12345678901234567890u64},
                }))
                .expect("params"),
            ),
            ..Default::default()
        });
    card
}

#[tokio::test]
async fn a_1_0_client_gets_the_1_0_card_and_a_0_3_client_the_one_with_0_3_members() {
    let schema = card_schema();
    let server = serve(A2aServer::new(rich_card(), Idle)).await;
    let v1 = get(
        &server,
        &[(header::HeaderName::from_static("a2a-version"), "1.0")],
    )
    .await;
    assert_eq!(v1.status, StatusCode::OK);
    assert_eq!(v1.header(header::VARY), "A2A-Version");
    assert_eq!(v1.header(header::CACHE_CONTROL), "public, max-age=300");
    let doc: serde_json::Value = serde_json::from_slice(&v1.body).expect("JSON");
    let errors = schema_errors(&schema, &doc);
    assert!(errors.is_empty(), "{errors:#?}\n{doc:#}");
    for member in [
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "protocolVersion",
    ] {
        assert!(doc.get(member).is_none(), "{member} in the 1.0 card");
    }
    // The same through the query parameter (spec 3.6.1), and for a later
    // version.
    let url = format!("{}{AGENT_CARD_PATH}?A2A-Version=1.0", server.base_url());
    let by_query = http()
        .get(&url)
        .send()
        .await
        .expect("GET")
        .bytes()
        .await
        .expect("body");
    assert_eq!(by_query.as_ref(), v1.body.as_slice());
    let later = get(
        &server,
        &[(header::HeaderName::from_static("a2a-version"), "1.1")],
    )
    .await;
    assert_eq!(later.body, v1.body);

    // No version (the official 0.3 clients send none; spec 3.6.2: none
    // means 0.3), an empty one or 0.3: the 0.3 members beside the 1.0 card.
    let v03 = get(&server, &[]).await;
    assert_eq!(v03.header(header::VARY), "A2A-Version");
    let doc03: serde_json::Value = serde_json::from_slice(&v03.body).expect("JSON");
    assert_eq!(doc03["protocolVersion"], "0.3.0");
    assert_eq!(doc03["preferredTransport"], "JSONRPC");
    assert!(
        doc03["url"]
            .as_str()
            .expect("url")
            .starts_with(&server.base_url()),
        "{doc03:#}"
    );
    assert!(
        doc03["additionalInterfaces"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
    assert_eq!(doc03["supportedInterfaces"], doc["supportedInterfaces"]);
    // A strict 1.0 reader refuses it: the reason it is not the 1.0 card.
    assert!(!schema_errors(&schema, &doc03).is_empty());
    for version in ["", "0.3", "0.3.0"] {
        let again = get(
            &server,
            &[(header::HeaderName::from_static("a2a-version"), version)],
        )
        .await;
        assert_eq!(again.body, v03.body, "A2A-Version: {version:?}");
    }
    // Each form has its ETag: one form's is no validator for the other.
    let etag_v1 = v1.header(header::ETAG);
    assert_ne!(etag_v1, v03.header(header::ETAG));
    let other = get(&server, &[(header::IF_NONE_MATCH, &etag_v1)]).await;
    assert_eq!(other.status, StatusCode::OK);
    assert_eq!(other.body, v03.body);
    let same = get(
        &server,
        &[
            (header::IF_NONE_MATCH, &etag_v1),
            (header::HeaderName::from_static("a2a-version"), "1.0"),
        ],
    )
    .await;
    assert_eq!(same.status, StatusCode::NOT_MODIFIED);
    assert_eq!(same.header(header::VARY), "A2A-Version");
    let _ = server.shutdown().await;

    // 0.3 turned off: the 1.0 card for everyone, nothing varies.
    let config = agentwire_server::HandlerConfig {
        serve_v03: false,
        ..Default::default()
    };
    let server = serve(A2aServer::new(rich_card(), Idle).config(config)).await;
    let plain = get(&server, &[]).await;
    assert!(!plain.headers.contains_key(header::VARY));
    let doc: serde_json::Value = serde_json::from_slice(&plain.body).expect("JSON");
    let errors = schema_errors(&schema, &doc);
    assert!(errors.is_empty(), "{errors:#?}");
    let _ = server.shutdown().await;
}

// --- A verifier of its own: RFC 8785 and the JWS check ------------------------

/// RFC 8785 (JCS): members sorted by their UTF-16 code units, strings with
/// only the required escapes, numbers as ECMAScript writes doubles.
fn jcs(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&es_number(n.as_f64().expect("a number"))),
        Value::String(s) => jcs_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                jcs(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            let mut members: Vec<_> = o.iter().collect();
            members.sort_by_key(|(k, _)| k.encode_utf16().collect::<Vec<u16>>());
            out.push('{');
            for (i, (k, x)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                jcs_string(k, out);
                out.push(':');
                jcs(x, out);
            }
            out.push('}');
        }
    }
}

fn jcs_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// ECMAScript's Number::toString of a double: the shortest digits that
/// read back as it (Rust's `{:e}` gives them), placed as ECMA-262 7.1.12.1
/// says.
fn es_number(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if x < 0.0 {
        return format!("-{}", es_number(-x));
    }
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = digits.len() as i32;
    let n = exp.parse::<i32>().expect("exponent") + 1;
    if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let sign = if n - 1 < 0 { '-' } else { '+' };
        let rest = if k > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        format!("{}{rest}e{sign}{}", &digits[..1], (n - 1).abs())
    }
}

#[test]
fn the_verifier_s_jcs_is_rfc_8785() {
    // RFC 8785's examples of numbers (appendix B) and of member order.
    for (x, s) in [
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (123456789012345680000.0, "123456789012345680000"),
        (-0.0, "0"),
        (1.0, "1"),
        (0.1, "0.1"),
        (4.50, "4.5"),
        (2e-3, "0.002"),
        (333333333.3333332, "333333333.3333332"),
        (9007199254740992.0, "9007199254740992"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
    ] {
        assert_eq!(es_number(x), s, "{x}");
    }
    let mut out = String::new();
    jcs(
        &serde_json::json!({"\u{20ac}": 1, "\r": 2, "\u{1f600}": 3, "1": 4, "\u{fb33}": 5,
                            "\u{80}": 6, "\u{f6}": [null, true, "\u{1}\"/"]}),
        &mut out,
    );
    assert_eq!(
        out,
        "{\"\\r\":2,\"1\":4,\"\u{80}\":6,\"\u{f6}\":[null,true,\"\\u0001\\\"/\"],\
         \"\u{20ac}\":1,\"\u{1f600}\":3,\"\u{fb33}\":5}"
    );
}

/// Whether `sig` (an entry of a card's `signatures`) verifies over
/// `payload` with a key of `jwks` (Ed25519 or P-256), checked with *ring*
/// directly.
fn signature_verifies(sig: &serde_json::Value, payload: &[u8], jwks: &serde_json::Value) -> bool {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    let protected = sig["protected"].as_str().expect("protected");
    let header: serde_json::Value =
        serde_json::from_slice(&B64.decode(protected).expect("base64url")).expect("header");
    assert_eq!(header["typ"], "JOSE");
    let kid = header["kid"].as_str().expect("kid");
    let Some(jwk) = jwks["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|k| k["kid"] == kid)
    else {
        return false;
    };
    let b = |name: &str| {
        B64.decode(jwk[name].as_str().expect(name))
            .expect("base64url")
    };
    let input = format!("{protected}.{}", B64.encode(payload));
    let signature = B64
        .decode(sig["signature"].as_str().expect("signature"))
        .expect("base64url");
    let (alg, key): (&dyn ring::signature::VerificationAlgorithm, Vec<u8>) =
        match header["alg"].as_str() {
            Some("EdDSA") => (&ring::signature::ED25519, b("x")),
            Some("ES256") => (
                &ring::signature::ECDSA_P256_SHA256_FIXED,
                [vec![4], b("x"), b("y")].concat(),
            ),
            other => panic!("unexpected alg {other:?}"),
        };
    ring::signature::UnparsedPublicKey::new(alg, key)
        .verify(input.as_bytes(), &signature)
        .is_ok()
}

/// The RFC 8785 bytes of a card document without its `signatures`.
fn jcs_payload(doc: &serde_json::Value) -> Vec<u8> {
    let mut doc = doc.clone();
    doc.as_object_mut().expect("an object").remove("signatures");
    let mut out = String::new();
    jcs(&doc, &mut out);
    out.into_bytes()
}

#[tokio::test]
async fn every_served_form_of_a_signed_card_verifies_as_served() {
    use agentwire_server::CardSigning;
    use agentwire_types::jws::SigningKey;

    let ed = SigningKey::from_pkcs8_der(&SigningKey::generate_ed25519_pkcs8().unwrap()).unwrap();
    let ec = SigningKey::from_pkcs8_der(&SigningKey::generate_p256_pkcs8().unwrap()).unwrap();
    let server = serve(
        A2aServer::new(rich_card(), Idle).sign_card(CardSigning::new(ed.clone()).key(ec.clone())),
    )
    .await;
    let base = server.base_url();
    let jwks: serde_json::Value = http()
        .get(format!("{base}{}", agentwire_types::jws::CARD_JWKS_PATH))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let v1 = get(
        &server,
        &[(header::HeaderName::from_static("a2a-version"), "1.0")],
    )
    .await;
    let v1: serde_json::Value = serde_json::from_slice(&v1.body).unwrap();
    let v03 = get(&server, &[]).await;
    let v03: serde_json::Value = serde_json::from_slice(&v03.body).unwrap();
    assert!(v03.get("url").is_some());
    let errors = schema_errors(&card_schema(), &v1);
    assert!(errors.is_empty(), "{errors:#?}");
    for (name, doc) in [("1.0", &v1), ("0.3", &v03)] {
        let sigs = doc["signatures"].as_array().expect("signatures");
        let payload = jcs_payload(doc);
        // Each key signs the card as served.
        for key in [&ed, &ec] {
            assert!(
                sigs.iter()
                    .any(|s| jws_kid(s) == key.kid() && signature_verifies(s, &payload, &jwks)),
                "the {name} form: no signature of {} over it as served",
                key.kid()
            );
        }
    }
    // The 1.0 form: the RFC 8785 signatures first, then, since its
    // extension's parameters hold null and empty values, the SDKs' form
    // (checked by the SDKs themselves in interop/).
    let v1_sigs = v1["signatures"].as_array().unwrap();
    assert_eq!(v1_sigs.len(), 4);
    // The 0.3 form carries its own signatures, then the 1.0 form's, which
    // verify over the 1.0 card it contains (what a verifier that leaves
    // the 0.3 members out checks).
    let v03_sigs = v03["signatures"].as_array().unwrap();
    assert_eq!(v03_sigs.len(), 2 + v1_sigs.len());
    assert_eq!(&v03_sigs[2..], v1_sigs.as_slice());
    let v1_payload = jcs_payload(&v1);
    assert!(
        v03_sigs[2..4]
            .iter()
            .all(|s| signature_verifies(s, &v1_payload, &jwks))
    );
    // A changed card verifies no more.
    for doc in [&v1, &v03] {
        let mut changed = doc.clone();
        changed["name"] = "Someone else".into();
        let payload = jcs_payload(&changed);
        assert!(
            !changed["signatures"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| signature_verifies(s, &payload, &jwks))
        );
    }
    let _ = server.shutdown().await;
}

fn jws_kid(sig: &serde_json::Value) -> String {
    use base64::Engine;
    let protected = sig["protected"].as_str().expect("protected");
    let header: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(protected)
            .expect("base64url"),
    )
    .expect("header");
    header["kid"].as_str().unwrap_or_default().to_owned()
}
