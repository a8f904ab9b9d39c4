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
