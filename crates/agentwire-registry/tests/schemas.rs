//! The registry's answers against the specification's own schemas: the
//! catalog against `ai-catalog.schema.json`, and every API answer (search
//! in each federation mode, list, explore, errors) against the schemas of
//! `ard.openapi.yaml` for its path and status. A registry served on a
//! loopback port, called over HTTP.

use std::sync::Arc;

use agentwire_registry::store::MemoryRegistryStore;
use agentwire_registry::{Registry, RegistryConfig, RegistryServer};
use agentwire_server::BearerTokens;
use serde_json::{Value, json};

const CATALOG_SCHEMA: &str = include_str!("schemas/ai-catalog.schema.json");
const OPENAPI: &str = include_str!("schemas/ard.openapi.yaml");
const CARDS: &str = include_str!("data/routing-cards.json");
const BASE: &str = "https://ard.test/";

struct Schemas {
    catalog: jsonschema::Validator,
    openapi: Value,
    registry: jsonschema::Registry<'static>,
}

impl Schemas {
    fn load() -> Self {
        let mut catalog: Value = serde_json::from_str(CATALOG_SCHEMA).expect("catalog schema");
        // Under our base, so that the OpenAPI document's relative
        // `./ai-catalog.schema.json` references resolve to it offline.
        catalog["$id"] = json!(format!("{BASE}ai-catalog.schema.json"));
        let openapi: Value = serde_yaml_ng::from_str(OPENAPI).expect("openapi yaml");
        let registry = jsonschema::Registry::new()
            .add(
                format!("{BASE}ai-catalog.schema.json"),
                jsonschema::Resource::from_contents(catalog.clone()),
            )
            .expect("resource")
            .prepare()
            .expect("registry");
        let catalog = jsonschema::options()
            .should_validate_formats(true)
            .build(&catalog)
            .expect("catalog validator");
        Self {
            catalog,
            openapi,
            registry,
        }
    }

    /// Validates `value` against `#/components/schemas/{name}`.
    fn check(&self, name: &str, value: &Value) {
        let errors = self.errors(name, value);
        assert!(errors.is_empty(), "{name}: {errors:#?}\n{value:#}");
    }

    fn errors(&self, name: &str, value: &Value) -> Vec<String> {
        let root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": format!("{BASE}ard.openapi.json"),
            "$ref": format!("#/components/schemas/{name}"),
            "components": self.openapi["components"],
        });
        let v = jsonschema::options()
            .with_registry(&self.registry)
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("schema {name}: {e}"));
        v.iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    /// The schema name of a response of the OpenAPI document.
    fn response_schema(&self, path: &str, method: &str, status: u16) -> String {
        let op = &self.openapi["paths"][path][method]["responses"][status.to_string()];
        let reference = op["$ref"]
            .as_str()
            .map(|r| {
                let name = r.rsplit('/').next().unwrap_or_default();
                self.openapi["components"]["responses"][name]["content"]["application/json"]["schema"]["$ref"].clone()
            })
            .unwrap_or_else(|| op["content"]["application/json"]["schema"]["$ref"].clone());
        reference
            .as_str()
            .and_then(|r| r.rsplit('/').next())
            .unwrap_or_else(|| panic!("no schema for {method} {path} {status}"))
            .to_owned()
    }
}

async fn post(url: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .expect("post");
    let status = r.status().as_u16();
    (status, r.json().await.expect("json"))
}

async fn get(url: &str) -> (u16, Value, reqwest::header::HeaderMap) {
    let r = reqwest::get(url).await.expect("get");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, r.json().await.expect("json"), headers)
}

#[tokio::test]
async fn the_catalog_and_the_api_match_the_spec_schemas() {
    let schemas = Schemas::load();
    // The checks do check: a score above 100, an identifier that is no URN,
    // an entry with both url and data are refused.
    for bad in [
        json!({"results": [{"identifier": "urn:air:a.example:agent:x", "displayName": "x", "type": "t", "url": "http://x/", "score": 150, "source": "http://r/"}]}),
        json!({"results": [{"identifier": "agent-x", "displayName": "x", "type": "t", "url": "http://x/", "score": 50, "source": "http://r/"}]}),
        json!({"results": [{"identifier": "urn:air:a.example:agent:x", "displayName": "x", "type": "t", "url": "http://x/", "data": {}, "score": 50, "source": "http://r/"}]}),
    ] {
        assert!(!schemas.errors("SearchResponse", &bad).is_empty(), "{bad}");
    }
    let upstream = RegistryServer::new(
        Registry::builder(Arc::new(MemoryRegistryStore::new()))
            .build()
            .await
            .unwrap(),
    )
    .bind("127.0.0.1:0")
    .await
    .unwrap()
    .spawn();
    let config = RegistryConfig {
        upstreams: vec![upstream.base_url()],
        // The agent published by reference listens on loopback.
        url_policy: agentwire_registry::UrlPolicy::new().allow_loopback(),
        ..RegistryConfig::default()
    };
    let registry = Registry::builder(Arc::new(MemoryRegistryStore::new()))
        .config(config)
        .build()
        .await
        .unwrap();
    let server = RegistryServer::new(registry.clone())
        .authenticator(Arc::new(
            BearerTokens::new().with_token("alice-secret", "alice"),
        ))
        .bind("127.0.0.1:0")
        .await
        .unwrap()
        .spawn();
    let base = server.base_url();

    // Entries by value (the labelled cards), one by reference (an agent on
    // loopback), one with a trust manifest and representative queries.
    let cards: Vec<Value> = serde_json::from_str(CARDS).unwrap();
    for c in cards.iter().take(8) {
        registry
            .publish(
                "alice",
                agentwire_client::registry::PublishRequest {
                    card: Some(c.clone()),
                    ..Default::default()
                },
                None,
            )
            .await
            .unwrap();
    }
    let echo = agentwire_server::A2aServer::new(
        agentwire_agents::echo::card(),
        agentwire_agents::echo::EchoAgent,
    )
    .bind("127.0.0.1:0")
    .await
    .unwrap()
    .spawn();
    let client = reqwest::Client::new();
    let published = client
        .post(format!("{base}/agents"))
        .bearer_auth("alice-secret")
        .json(&json!({
            "url": echo.base_url(),
            "identifier": "urn:air:agent.localhost:test:echo",
            "representativeQueries": ["repeat what I say", "echo this text"],
            "trustManifest": {"identity": "spiffe://agent.localhost/echo", "identityType": "spiffe",
                              "attestations": [{"type": "SOC2-Type2", "uri": "https://example.com/soc2.pdf", "mediaType": "application/pdf"}]}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(published.status().as_u16(), 201);

    // The catalog.
    let (status, catalog, headers) = get(&format!("{base}/.well-known/ai-catalog.json")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/ai-catalog+json");
    assert!(headers.contains_key("etag"));
    let errors: Vec<String> = schemas
        .catalog
        .iter_errors(&catalog)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "catalog: {errors:#?}");
    let types: Vec<&str> = catalog["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types[0], "application/ai-registry+json");
    assert_eq!(
        types
            .iter()
            .filter(|t| **t == "application/a2a-agent-card+json")
            .count(),
        10
    );
    let etag = headers["etag"].to_str().unwrap().to_owned();
    let again = client
        .get(format!("{base}/.well-known/ai-catalog.json"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 304);

    // Search, in the three federation modes, with pages.
    for federation in ["auto", "referrals", "none"] {
        let (status, body) = post(
            &format!("{base}/search"),
            &json!({"query": {"text": "check dependencies and vulnerabilities", "filter": {"type": "application/a2a-agent-card+json"}},
                    "federation": federation, "pageSize": 2}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        schemas.check(&schemas.response_schema("/search", "post", 200), &body);
        assert_eq!(body["results"].as_array().unwrap().len(), 2, "{body}");
        assert_eq!(
            body.get("referrals").is_some(),
            federation == "referrals",
            "{body}"
        );
        let token = body["pageToken"].as_str().expect("a next page").to_owned();
        let (status, next) = post(
            &format!("{base}/search"),
            &json!({"query": {"text": "check dependencies and vulnerabilities", "filter": {"type": "application/a2a-agent-card+json"}},
                    "federation": federation, "pageSize": 2, "pageToken": token}),
        )
        .await;
        assert_eq!(status, 200);
        schemas.check("SearchResponse", &next);
        assert_ne!(
            next["results"][0]["identifier"],
            body["results"][0]["identifier"]
        );
    }
    // A filter on a nested trust manifest path.
    let (_, body) = post(
        &format!("{base}/search"),
        &json!({"query": {"text": "echo", "filter": {"trustManifest.attestations.type": ["SOC2-Type2"]}}}),
    )
    .await;
    schemas.check("SearchResponse", &body);
    assert_eq!(
        body["results"][0]["identifier"],
        "urn:air:agent.localhost:test:echo"
    );

    // List and explore.
    let (status, list, headers) = get(&format!("{base}/agents?filter=type%20%3D%20%27application%2Fa2a-agent-card%2Bjson%27&orderBy=displayName&pageSize=3")).await;
    assert_eq!(status, 200);
    assert!(headers.contains_key("etag"));
    schemas.check(&schemas.response_schema("/agents", "get", 200), &list);
    assert_eq!(list["total"], 9);
    let (status, explore) = post(
        &format!("{base}/explore"),
        &json!({"query": {"filter": {"streaming": "true"}},
                "resultType": {"facets": [{"field": "type"}, {"field": "publisher", "limit": 2}, {"field": "tags", "limit": 3, "minCount": 2}]}}),
    )
    .await;
    assert_eq!(status, 200, "{explore}");
    schemas.check(&schemas.response_schema("/explore", "post", 200), &explore);
    assert!(
        explore["facets"]["publisher"]["otherCount"]
            .as_u64()
            .is_some(),
        "{explore}"
    );

    // Errors: their schema, and the spec's codes.
    for (path, body, status, code) in [
        (
            "/search",
            json!({"query": {"filter": {"type": "x"}}}),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            "/search",
            json!({"query": {"text": "x"}, "pageSize": 500}),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            "/search",
            json!({"query": {"text": "x"}, "pageToken": "bogus"}),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            "/search",
            json!({"query": {"text": "x", "filter": {"colour": "red"}}}),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            "/explore",
            json!({"resultType": {"facets": [{"field": "colour"}]}}),
            400,
            "INVALID_ARGUMENT",
        ),
        (
            "/explore",
            json!({"query": {"text": "x"}}),
            400,
            "INVALID_ARGUMENT",
        ),
        ("/agents", json!({"card": {}}), 401, "UNAUTHENTICATED"),
    ] {
        let (got, answer) = post(&format!("{base}{path}"), &body).await;
        assert_eq!(
            (got, answer["errorCode"].as_str()),
            (status, Some(code)),
            "{path} {body}: {answer}"
        );
        schemas.check("Error", &answer);
    }
    let (status, answer, _) = get(&format!("{base}/agents?filter=colour%20%3D%20red")).await;
    assert_eq!(
        (status, answer["errorCode"].as_str()),
        (400, Some("INVALID_ARGUMENT"))
    );
    schemas.check(&schemas.response_schema("/agents", "get", 400), &answer);
    let (status, answer, _) =
        get(&format!("{base}/agents/urn:air:nowhere.example:agent:none")).await;
    assert_eq!(
        (status, answer["errorCode"].as_str()),
        (404, Some("NOT_FOUND"))
    );
    schemas.check("Error", &answer);
}

// ----- ARD v0.91 -------------------------------------------------------------

const OPENAPI_091: &str = include_str!("schemas/ard-v0.91.openapi.yaml");

/// The identifier syntax of ARD v0.91 (the Retrieve path parameter's
/// pattern in `ard.openapi.yaml`, Appendix C).
const URN_PATTERN: &str = "^urn:air:[a-zA-Z0-9.-]+(:[a-zA-Z0-9._-]+)+$";

/// A stand-in for `ard-entry.schema.json` (not available), written from the
/// rules of `ard.cddl`: `EntryFields` (the terms a result may carry),
/// `ArdEntry` (the required terms and exactly one of `url` / `data`), and
/// `ArdManifest` (an object with `entries`; other members allowed).
fn entry_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("{BASE}ard-entry.schema.json"),
        "$defs": {
            "EntryFields": {
                "type": "object",
                "properties": {
                    "@id": {"type": "string"},
                    "identifier": {"type": "string", "pattern": URN_PATTERN},
                    "displayName": {"type": "string"},
                    "type": {"type": "string"},
                    "url": {"type": "string"},
                    "data": {"type": "object"},
                    "description": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "capabilities": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "representativeQueries": {"type": "array", "items": {"type": "string"}},
                    "version": {"type": "string"},
                    "updatedAt": {"type": "string"},
                    "metadata": {"type": "object", "additionalProperties": {
                        "type": ["string", "number", "boolean", "null"]}},
                    "trustManifest": {"type": "object", "required": ["identity"],
                                      "properties": {"identity": {"type": "string"}}}
                },
                "not": {"required": ["url", "data"]}
            },
            "ArdEntry": {
                "allOf": [{"$ref": "#/$defs/EntryFields"}],
                "required": ["identifier", "displayName", "type"],
                "oneOf": [{"required": ["url"]}, {"required": ["data"]}]
            },
            "ArdManifest": {
                "type": "object",
                "required": ["entries"],
                "properties": {"entries": {"type": "array", "items": {"$ref": "#/$defs/ArdEntry"}}}
            }
        }
    })
}

struct Schemas091 {
    openapi: Value,
    registry: jsonschema::Registry<'static>,
}

impl Schemas091 {
    fn load() -> Self {
        let openapi: Value = serde_yaml_ng::from_str(OPENAPI_091).expect("openapi yaml");
        let registry = jsonschema::Registry::new()
            .add(
                format!("{BASE}ard-entry.schema.json"),
                jsonschema::Resource::from_contents(entry_schema()),
            )
            .expect("resource")
            .prepare()
            .expect("registry");
        Self { openapi, registry }
    }

    fn errors_at(&self, reference: &str, value: &Value) -> Vec<String> {
        let root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": format!("{BASE}ard.openapi.json"),
            "$ref": reference,
            "components": self.openapi["components"],
        });
        let v = jsonschema::options()
            .with_registry(&self.registry)
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("schema {reference}: {e}"));
        v.iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    fn check(&self, name: &str, value: &Value) {
        let errors = self.errors_at(&format!("#/components/schemas/{name}"), value);
        assert!(errors.is_empty(), "{name}: {errors:#?}\n{value:#}");
    }

    fn manifest_errors(&self, value: &Value) -> Vec<String> {
        self.errors_at("./ard-entry.schema.json#/$defs/ArdManifest", value)
    }
}

/// The discovery rules of ARD v0.91 (D.2, the CDDL's comments) on one
/// entry: errors (the URN syntax, exactly one of url / data, the required
/// terms) and warnings (`representativeQueries` missing or not 2 to 5).
fn cddl_rules(entry: &Value) -> (Vec<String>, Vec<String>) {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let id = entry["identifier"].as_str().unwrap_or_default();
    let urn = id
        .strip_prefix("urn:air:")
        .map(|rest| {
            let mut parts = rest.split(':');
            let publisher = parts.next().unwrap_or_default();
            let others: Vec<&str> = parts.collect();
            !publisher.is_empty()
                && publisher
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                && !others.is_empty()
                && others.iter().all(|s| {
                    !s.is_empty()
                        && s.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                })
        })
        .unwrap_or(false);
    if !urn {
        errors.push(format!("identifier {id:?} is not urn:air:<publisher>:..."));
    }
    for term in ["displayName", "type"] {
        if !entry[term].is_string() {
            errors.push(format!("{id}: no {term}"));
        }
    }
    if entry.get("url").is_some() == entry.get("data").is_some() {
        errors.push(format!("{id}: not exactly one of url and data"));
    }
    match entry["representativeQueries"].as_array() {
        Some(q) if (2..=5).contains(&q.len()) => {}
        Some(q) => warnings.push(format!("{id}: {} representative queries", q.len())),
        None => warnings.push(format!("{id}: no representative queries")),
    }
    (errors, warnings)
}

#[tokio::test]
async fn the_ard_v091_manifest_and_api_match_the_schemas() {
    let schemas = Schemas091::load();
    // The stand-in and the rules do refuse what they should.
    for bad in [
        json!({"entries": [{"identifier": "agent-x", "displayName": "x", "type": "t", "url": "u"}]}),
        json!({"entries": [{"identifier": "urn:air:a.example:x", "displayName": "x", "type": "t", "url": "u", "data": {}}]}),
        json!({"entries": [{"identifier": "urn:air:a.example:x", "type": "t", "url": "u"}]}),
        json!({"items": []}),
    ] {
        assert!(!schemas.manifest_errors(&bad).is_empty(), "{bad}");
    }
    let (errors, warnings) = cddl_rules(
        &json!({"identifier": "urn:air:a.example:x", "displayName": "x", "type": "t", "url": "u", "data": {}}),
    );
    assert_eq!((errors.len(), warnings.len()), (1, 1));

    let registry = Registry::builder(Arc::new(MemoryRegistryStore::new()))
        .config(RegistryConfig {
            url_policy: agentwire_registry::UrlPolicy::new().allow_loopback(),
            ..RegistryConfig::default()
        })
        .build()
        .await
        .unwrap();
    let server = RegistryServer::new(registry.clone())
        .bind("127.0.0.1:0")
        .await
        .unwrap()
        .spawn();
    let base = server.base_url();
    let cards: Vec<Value> = serde_json::from_str(CARDS).unwrap();
    for c in cards.iter().take(6) {
        registry
            .publish(
                "alice",
                agentwire_client::registry::PublishRequest {
                    card: Some(c.clone()),
                    ..Default::default()
                },
                None,
            )
            .await
            .unwrap();
    }
    registry
        .publish(
            "alice",
            agentwire_client::registry::PublishRequest {
                card: Some(cards[6].clone()),
                identifier: Some("urn:air:trusted.example:agent:audited".into()),
                representative_queries: Some(vec!["audit this".into(), "check compliance".into()]),
                trust_manifest: Some(json!({"identity": "spiffe://trusted.example/a",
                    "attestations": [{"type": "SOC2-Type2", "uri": "https://trusted.example/soc2.pdf"}]})),
                ..Default::default()
            },
            None,
        )
        .await
        .unwrap();
    let client = reqwest::Client::new();

    // The manifest: the ArdManifest shape, the CDDL's rules, the same
    // entries as ai-catalog.json, an ETag, and the link to itself.
    let r = client
        .get(format!("{base}/.well-known/ard.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let link = r.headers()["link"].to_str().unwrap().to_owned();
    assert_eq!(link, format!("<{base}/.well-known/ard.json>; rel=\"ard\""));
    let etag = r.headers()["etag"].to_str().unwrap().to_owned();
    let manifest: Value = r.json().await.unwrap();
    let errors = schemas.manifest_errors(&manifest);
    assert!(errors.is_empty(), "{errors:#?}");
    let entries = manifest["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2 + 7);
    let mut warnings = Vec::new();
    for e in entries {
        let (errs, warns) = cddl_rules(e);
        assert!(errs.is_empty(), "{errs:?}");
        warnings.extend(warns);
        assert!(e.get("@context").is_none(), "{e}");
    }
    // The registry's own entries and the published ones carry 2 to 5
    // queries (from the skills' examples), except the cards with fewer
    // than two examples.
    for w in &warnings {
        assert!(!w.contains("registry:") && !w.contains("audited"), "{w}");
    }
    let (_, catalog, _) = get(&format!("{base}/.well-known/ai-catalog.json")).await;
    assert_eq!(&catalog["entries"], &manifest["entries"]);
    let again = client
        .get(format!("{base}/.well-known/ard.json"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 304);
    let robots = client
        .get(format!("{base}/robots.txt"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        robots
            .lines()
            .any(|l| l == format!("Agentmap: {base}/.well-known/ard.json")),
        "{robots}"
    );

    // Search: the v0.91 request (a query @context binding prefixes),
    // results without representative queries.
    let search = |query: Value| {
        let url = format!("{base}/search");
        async move { post(&url, &json!({"query": query, "pageSize": 3})).await }
    };
    let ctx = json!(["https://agenticresourcediscovery.org/context/v1",
                     {"ard": "https://agenticresourcediscovery.org/ns#", "okf": "https://openknowledgeformat.org/ns#"}]);
    let (status, plain) = search(
        json!({"text": "audit compliance", "filter": {"type": "application/a2a-agent-card+json"}}),
    )
    .await;
    assert_eq!(status, 200, "{plain}");
    schemas.check("SearchResponse", &plain);
    assert!(!plain["results"].as_array().unwrap().is_empty(), "{plain}");
    for r in plain["results"].as_array().unwrap() {
        assert!(r.get("representativeQueries").is_none(), "{r}");
    }
    let (status, prefixed) = search(json!({"@context": ctx, "text": "audit compliance",
        "filter": {"ard:type": "application/a2a-agent-card+json",
                   "https://agenticresourcediscovery.org/ns#trustManifest.attestations.type": ["SOC2-Type2"]}})).await;
    assert_eq!(status, 200, "{prefixed}");
    schemas.check("SearchResponse", &prefixed);
    assert_eq!(
        prefixed["results"][0]["identifier"],
        "urn:air:trusted.example:agent:audited"
    );
    assert_eq!(prefixed["results"].as_array().unwrap().len(), 1);
    let (status, other_ns) = search(json!({"@context": ctx, "text": "audit compliance",
        "filter": {"okf:taxonomy": "us-gaap"}}))
    .await;
    assert_eq!(status, 200);
    assert!(
        other_ns["results"].as_array().unwrap().is_empty(),
        "{other_ns}"
    );
    for (query, why) in [
        (
            json!({"text": "x", "filter": {"acme:tier": "gold"}}),
            "an unbound prefix",
        ),
        (
            json!({"@context": "https://elsewhere.example/ctx", "text": "x"}),
            "a remote context",
        ),
        (json!({"filter": {"type": "x"}}), "no text"),
    ] {
        let (status, e) = search(query).await;
        assert_eq!(
            (status, e["errorCode"].as_str()),
            (400, Some("INVALID_ARGUMENT")),
            "{why}: {e}"
        );
        schemas.check("Error", &e);
    }

    // Explore: facets (otherCount), a prefixed field; 501 for another shape.
    let (status, explore) = post(
        &format!("{base}/explore"),
        &json!({"query": {"@context": ctx},
                "resultType": {"facets": [{"field": "ard:type"}, {"field": "tags", "limit": 2}, {"field": "okf:taxonomy"}]}}),
    )
    .await;
    assert_eq!(status, 200, "{explore}");
    schemas.check("ExploreResponse", &explore);
    assert!(
        explore["facets"]["ard:type"]["buckets"][0]["count"].as_u64() >= Some(7),
        "{explore}"
    );
    assert!(
        explore["facets"]["tags"]["otherCount"].as_u64().is_some(),
        "{explore}"
    );
    assert!(explore["facets"].get("okf:taxonomy").is_none(), "{explore}");
    let (status, e) = post(
        &format!("{base}/explore"),
        &json!({"resultType": {"counts": {}}}),
    )
    .await;
    assert_eq!(
        (status, e["errorCode"].as_str()),
        (501, Some("NOT_IMPLEMENTED")),
        "{e}"
    );
    schemas.check("Error", &e);

    // List.
    let (status, list, _) = get(&format!("{base}/agents?pageSize=4")).await;
    assert_eq!(status, 200);
    schemas.check("ListResponse", &list);

    // Retrieve: percent-encoded once, exact, cached; 400 and 404.
    let id = "urn:air:trusted.example:agent:audited";
    let encoded = "urn%3Aair%3Atrusted.example%3Aagent%3Aaudited";
    let r = client
        .get(format!("{base}/agents/{encoded}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["cache-control"], "max-age=60");
    let etag = r.headers()["etag"].to_str().unwrap().to_owned();
    let entry: Value = r.json().await.unwrap();
    let errors = schemas.errors_at("./ard-entry.schema.json#/$defs/ArdEntry", &entry);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(entry["identifier"], id);
    assert_eq!(
        entry["@context"],
        "https://agenticresourcediscovery.org/context/v1"
    );
    assert!(entry.get("score").is_none() && entry.get("source").is_none());
    let (status, raw, _) = get(&format!("{base}/agents/{id}")).await;
    assert_eq!((status, &raw["identifier"]), (200, &json!(id)));
    let cached = client
        .get(format!("{base}/agents/{encoded}"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status().as_u16(), 304);
    for (path, status, code) in [
        (
            "urn%3Aair%3Atrusted.example%3Aagent%3AAUDITED",
            404,
            "NOT_FOUND",
        ),
        (
            "urn%3Aair%3Anowhere.example%3Aagent%3Anone",
            404,
            "NOT_FOUND",
        ),
        // Decoded once: %253A is "%3A", not ":".
        (
            "urn%253Aair%253Atrusted.example%253Aagent%253Aaudited",
            400,
            "INVALID_ARGUMENT",
        ),
        ("urn%3Aair%3", 400, "INVALID_ARGUMENT"),
        (
            "urn%3Aair%3Atrusted.example%3Aagent%3A%C3%A9",
            400,
            "INVALID_ARGUMENT",
        ),
        ("Audited%20Agent", 400, "INVALID_ARGUMENT"),
        ("%FF", 400, "INVALID_ARGUMENT"),
    ] {
        let r = client
            .get(format!("{base}/agents/{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        if status == 404 {
            assert_eq!(r.headers()["cache-control"], "max-age=5", "{path}");
        }
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["errorCode"], code, "{path}: {body}");
        schemas.check("Error", &body);
    }
    // Names are this registry's extension of List, not of Retrieve.
    let (status, named, _) = get(&format!("{base}/agents?name=audited")).await;
    assert_eq!(status, 200);
    assert_eq!(named["items"][0]["identifier"], id, "{named}");
}
