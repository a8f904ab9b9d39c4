//! `a2a registry`: real registry processes (`a2a registry serve` on a free
//! loopback port) driven by the `a2a` command: publishing by URL and by
//! value, search, list with filters, explore, routing, refresh after a
//! card change (ETag), an unreachable agent, withdrawal, publisher
//! isolation, a 0.x card, `-a registry:NAME` references, the registry's
//! own `find-agent` skill, and `a2a demo --registry`.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use common::Env;
use common::registry::Registry;
use http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};
use std::sync::Mutex;

const ALICE: &str = "alice-token-0001";
const BOB: &str = "bob-token-0002";

/// A registry with the publishers alice and bob, that refreshes often and
/// calls an agent unreachable after two failed fetches.
fn start(env: &Env, extra: &[&str]) -> Registry {
    let mut args = vec!["--refresh-min", "200ms", "--unreachable-after", "2"];
    args.extend_from_slice(extra);
    Registry::start(
        env,
        &[("alice", ALICE), ("bob", BOB)],
        &args,
        Duration::from_secs(30),
    )
}

/// An agent card served with an ETag, that the test can change; counts
/// the conditional requests it answered with 304.
#[derive(Clone)]
struct CardHost {
    card: Arc<Mutex<Value>>,
    not_modified: Arc<AtomicUsize>,
    fetches: Arc<AtomicUsize>,
}

async fn card_endpoint(State(h): State<CardHost>, headers: HeaderMap) -> Response {
    h.fetches.fetch_add(1, Ordering::SeqCst);
    let body = serde_json::to_vec(&*h.card.lock().unwrap()).unwrap_or_default();
    let etag = format!(
        "\"{}-{}\"",
        body.len(),
        body.iter().map(|b| u64::from(*b)).sum::<u64>()
    );
    let cache = [
        (header::ETAG, etag.clone()),
        (header::CACHE_CONTROL, "no-cache".to_owned()),
    ];
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        == Some(etag.as_str())
    {
        h.not_modified.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (
        StatusCode::OK,
        cache,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

impl CardHost {
    fn new(card: Value) -> Self {
        Self {
            card: Arc::new(Mutex::new(card)),
            not_modified: Arc::default(),
            fetches: Arc::default(),
        }
    }

    /// Serves on `addr` (`127.0.0.1:0` for a free port).
    async fn serve(&self, addr: &str) -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        let local = listener.local_addr().expect("addr").to_string();
        let app = axum::Router::new()
            .route("/.well-known/agent-card.json", get(card_endpoint))
            .with_state(self.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (local, task)
    }
}

fn weather_card(extra_example: Option<&str>) -> Value {
    let mut examples = vec![
        "What's the weather in Lisbon right now?",
        "Will it rain in Paris on Saturday?",
    ];
    if let Some(e) = extra_example {
        examples.push(e);
    }
    json!({
        "name": "Weather Agent", "description": "Current weather and forecasts for any city.",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://127.0.0.1:9/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": false},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "forecast", "name": "Forecast", "description": "Forecasts for a city: rain, wind, temperature.",
                    "tags": ["weather", "forecast"], "examples": examples}]
    })
}

fn fx_card() -> Value {
    json!({
        "name": "Currency Exchange Agent", "description": "Converts amounts between currencies.",
        "version": "2.0.0",
        "supportedInterfaces": [{"url": "https://fx.example.com/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["application/json"],
        "skills": [{"id": "currency-conversion", "name": "Currency conversion",
                    "description": "Converts an amount between two currencies at today's rate.",
                    "tags": ["currency", "fx"], "examples": ["Convert 1000 USD to GBP", "How much is 250 euros in yen?"]}]
    })
}

fn write_card(env: &Env, name: &str, card: &Value) -> String {
    let p = env.cwd().join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(card).expect("card")).expect("write card");
    p.display().to_string()
}

/// Waits (bounded) until `f` holds.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting until {what}");
}

fn ids(search: &Value) -> Vec<String> {
    search["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["identifier"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_search_list_explore_route_and_withdraw() {
    let env = Env::new();
    let reg = start(&env, &[]);
    let host = CardHost::new(weather_card(None));
    let (addr, _server) = host.serve("127.0.0.1:0").await;

    // By URL (a host: the well-known path is appended), and by value.
    let out = reg.publish(&env, ALICE, &addr, &["-o", "json"]);
    out.expect(0);
    let weather = out.json();
    assert_eq!(weather["created"], true);
    let weather_id = weather["entry"]["identifier"].as_str().unwrap().to_owned();
    assert_eq!(weather_id, "urn:air:agent.localhost:agent:weather-agent");
    assert_eq!(
        weather["entry"]["url"],
        format!("http://{addr}/.well-known/agent-card.json")
    );
    assert_eq!(weather["entry"]["metadata"]["signature"], "unsigned");
    let file = write_card(&env, "fx.json", &fx_card());
    let out = reg.publish(&env, ALICE, &file, &["--tag", "finance", "-o", "json"]);
    out.expect(0);
    let fx = out.json();
    let fx_id = fx["entry"]["identifier"].as_str().unwrap().to_owned();
    assert_eq!(
        fx_id,
        "urn:air:fx.example.com:agent:currency-exchange-agent"
    );
    assert!(fx["entry"]["data"].is_object(), "by value: {fx}");
    // Published again: an update (of the whole entry), not a second entry.
    let again = reg.publish(&env, ALICE, &file, &["--tag", "finance", "-o", "json"]);
    again.expect(0);
    assert_eq!(again.json()["created"], false);

    // Search: BM25 over names, skills, tags and examples; scores 0-100.
    let out = env.run(&[
        "registry",
        "search",
        "--registry",
        &reg.url,
        "will it rain tomorrow in Rome",
        "-o",
        "json",
    ]);
    out.expect(0);
    let s = out.json();
    assert_eq!(ids(&s), [weather_id.as_str()]);
    let score = s["results"][0]["score"].as_u64().unwrap();
    assert!((1..=100).contains(&score), "{s}");
    assert_eq!(s["results"][0]["source"], format!("{}/", reg.url));
    // Filters: streaming, output media type, tags.
    let s = env
        .run(&[
            "registry",
            "search",
            "--registry",
            &reg.url,
            "convert currency",
            "--filter",
            "streaming=true",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(ids(&s), [fx_id.as_str()]);
    let s = env
        .run(&[
            "registry",
            "search",
            "--registry",
            &reg.url,
            "convert currency",
            "--filter",
            "outputMode=text/*",
            "-o",
            "json",
        ])
        .json();
    assert!(ids(&s).is_empty(), "{s}");
    let bad = env.run(&[
        "registry",
        "search",
        "--registry",
        &reg.url,
        "x",
        "--filter",
        "colour=red",
        "-o",
        "json",
    ]);
    bad.expect(2);
    assert!(
        bad.stdout.contains("unsupported filter field"),
        "{}",
        bad.stdout
    );
    // Text output is labelled lines.
    let text = env.run(&[
        "registry",
        "search",
        "--registry",
        &reg.url,
        "weather forecast",
    ]);
    text.expect(0);
    common::assert_text_floor(&text.stdout);
    assert!(
        text.stdout.contains("Name: Weather Agent"),
        "{}",
        text.stdout
    );

    // List with the filter expressions of ARD Appendix A, ordered.
    let l = env
        .run(&[
            "registry",
            "list",
            "--registry",
            &reg.url,
            "--filter",
            "type = 'application/a2a-agent-card+json' AND createdAfter > '2020-01-01'",
            "--order-by",
            "displayName DESC",
            "-o",
            "json",
        ])
        .json();
    let names: Vec<&str> = l["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["displayName"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Weather Agent", "Currency Exchange Agent"]);
    assert_eq!(l["total"], 2);
    let l = env
        .run(&[
            "registry",
            "list",
            "--registry",
            &reg.url,
            "--filter",
            "publisherId = fx.example.com",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(l["items"][0]["identifier"], fx_id.as_str());
    let l = env
        .run(&[
            "registry",
            "list",
            "--registry",
            &reg.url,
            "--filter",
            "displayName : weather AND streaming = false",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(l["items"][0]["identifier"], weather_id.as_str());
    let l = env
        .run(&[
            "registry",
            "list",
            "--registry",
            &reg.url,
            "--filter",
            "updatedAfter > '2999-01-01'",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(l["items"].as_array().unwrap().len(), 0);
    let page = env
        .run(&[
            "registry",
            "list",
            "--registry",
            &reg.url,
            "--page-size",
            "1",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    let token = page["pageToken"].as_str().expect("a next page").to_owned();
    let next = env
        .run(&[
            "registry",
            "list",
            "--registry",
            &reg.url,
            "--page-size",
            "1",
            "--page-token",
            &token,
            "-o",
            "json",
        ])
        .json();
    assert_ne!(
        next["items"][0]["identifier"],
        page["items"][0]["identifier"]
    );
    assert!(next.get("pageToken").is_none(), "{next}");
    let bad = env.run(&[
        "registry",
        "list",
        "--registry",
        &reg.url,
        "--filter",
        "type = a OR type = b",
        "-o",
        "json",
    ]);
    bad.expect(2);

    // Explore: facets over the matched set.
    let e = env
        .run(&[
            "registry",
            "explore",
            "--registry",
            &reg.url,
            "--facet",
            "tags",
            "--facet",
            "binding",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(e["resultType"], "facets");
    let bindings: Vec<(String, u64)> = e["facets"]["binding"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["value"].as_str().unwrap().to_owned(),
                b["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        bindings,
        [("http+json".to_owned(), 1), ("jsonrpc".to_owned(), 1)]
    );
    assert!(
        e["facets"]["tags"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["value"] == "finance")
    );

    // Route: the skill whose examples fit, or "no skill fits".
    let r = env
        .run(&[
            "registry",
            "route",
            "--registry",
            &reg.url,
            "please convert 300 dollars to yen",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(r["noFit"], false, "{r}");
    assert_eq!(r["matches"][0]["identifier"], fx_id.as_str());
    assert_eq!(r["matches"][0]["skillId"], "currency-conversion");
    assert_eq!(r["matches"][0]["agentName"], "Currency Exchange Agent");
    assert!(
        r["matches"][0]["why"].as_str().unwrap().contains("convert"),
        "{r}"
    );
    let r = env
        .run(&[
            "registry",
            "route",
            "--registry",
            &reg.url,
            "order a pepperoni pizza",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(r["noFit"], true, "{r}");

    // Withdraw: gone from search and list; a second withdrawal finds nothing.
    env.run(&[
        "registry",
        "withdraw",
        "--registry",
        &reg.url,
        "--bearer",
        ALICE,
        &fx_id,
    ])
    .expect(0);
    let s = env
        .run(&[
            "registry",
            "search",
            "--registry",
            &reg.url,
            "convert currency",
            "-o",
            "json",
        ])
        .json();
    assert!(ids(&s).is_empty(), "{s}");
    let again = env.run(&[
        "registry",
        "withdraw",
        "--registry",
        &reg.url,
        "--bearer",
        ALICE,
        &fx_id,
        "-o",
        "json",
    ]);
    again.expect(3);
    assert_eq!(again.json()["error"]["code"], "A2ACLI_ERR_CARD_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_publisher_changes_an_entry() {
    let env = Env::new();
    let reg = start(&env, &[]);
    let file = write_card(&env, "fx.json", &fx_card());
    reg.publish(&env, ALICE, &file, &[]).expect(0);
    let id = "urn:air:fx.example.com:agent:currency-exchange-agent";
    // Bob can neither overwrite nor withdraw Alice's entry.
    let out = reg.publish(&env, BOB, &file, &["-o", "json"]);
    out.expect(4);
    assert!(
        out.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another publisher")
    );
    env.run(&[
        "registry",
        "withdraw",
        "--registry",
        &reg.url,
        "--bearer",
        BOB,
        id,
    ])
    .expect(4);
    // Bob publishes the same card under an identifier of his own.
    reg.publish(
        &env,
        BOB,
        &file,
        &["--id", "urn:air:bob.example.org:agent:fx"],
    )
    .expect(0);
    // No token, or a wrong one: refused.
    let anon = env.run(&[
        "registry",
        "publish",
        "--registry",
        &reg.url,
        &file,
        "-o",
        "json",
    ]);
    anon.expect(4);
    assert_eq!(
        anon.json()["error"]["code"],
        "A2ACLI_ERR_CREDENTIALS_MISSING"
    );
    let wrong = reg.publish(&env, "not-a-token", &file, &["-o", "json"]);
    wrong.expect(4);
    assert_eq!(wrong.json()["error"]["code"], "A2ACLI_ERR_AUTH_FAILED");
    // Alice's entry is untouched; both are listed, each with its owner.
    let l = env
        .run(&[
            "registry",
            "list",
            "--registry",
            &reg.url,
            "--filter",
            "owner = alice",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    assert_eq!(l["items"][0]["identifier"], id);
    let l = env
        .run(&["registry", "list", "--registry", &reg.url, "-o", "json"])
        .json();
    assert_eq!(l["total"], 2);
    env.run(&[
        "registry",
        "withdraw",
        "--registry",
        &reg.url,
        "--bearer",
        ALICE,
        id,
    ])
    .expect(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_card_is_refetched_with_its_etag_and_reindexed() {
    let env = Env::new();
    let reg = start(&env, &[]);
    let host = CardHost::new(weather_card(None));
    let (addr, _server) = host.serve("127.0.0.1:0").await;
    reg.publish(&env, ALICE, &addr, &[]).expect(0);
    // Unchanged: revalidated with If-None-Match, answered 304.
    let h = host.clone();
    eventually("the registry revalidates the card", || {
        h.not_modified.load(Ordering::SeqCst) >= 2
    })
    .await;
    let s = env
        .run(&[
            "registry",
            "search",
            "--registry",
            &reg.url,
            "snowfall avalanche",
            "-o",
            "json",
        ])
        .json();
    assert!(ids(&s).is_empty(), "{s}");
    // The agent changes its card: the registry sees it and re-indexes.
    *host.card.lock().unwrap() =
        weather_card(Some("How much snowfall and avalanche risk in Chamonix?"));
    let url = reg.url.clone();
    let e2 = Env::new();
    eventually("the new example is searchable", || {
        let s = e2
            .run(&[
                "registry",
                "search",
                "--registry",
                &url,
                "snowfall avalanche",
                "-o",
                "json",
            ])
            .json();
        ids(&s).len() == 1
    })
    .await;
    let r = env
        .run(&[
            "registry",
            "route",
            "--registry",
            &reg.url,
            "avalanche risk and snowfall in the Alps",
            "-o",
            "json",
        ])
        .json();
    assert!(
        r["matches"][0]["why"]
            .as_str()
            .unwrap()
            .contains("avalanche"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_agent_leaves_search_until_it_returns() {
    let env = Env::new();
    let reg = start(&env, &[]);
    let host = CardHost::new(weather_card(None));
    let (addr, server) = host.serve("127.0.0.1:0").await;
    reg.publish(&env, ALICE, &addr, &[]).expect(0);
    let search = |e: &Env, url: &str| {
        ids(&e
            .run(&[
                "registry",
                "search",
                "--registry",
                url,
                "weather forecast",
                "-o",
                "json",
            ])
            .json())
    };
    assert_eq!(search(&env, &reg.url).len(), 1);
    // The agent stops answering: after two failed fetches it is unreachable.
    server.abort();
    let _ = server.await;
    let url = reg.url.clone();
    let e2 = Env::new();
    eventually("the agent is left out of search", || {
        search(&e2, &url).is_empty()
    })
    .await;
    let l = env
        .run(&[
            "registry",
            "get",
            "--registry",
            &reg.url,
            "Weather Agent",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(l["metadata"]["status"], "unreachable", "{l}");
    assert!(l["metadata"]["lastError"].is_string(), "{l}");
    let l = env
        .run(&[
            "registry",
            "list",
            "--registry",
            &reg.url,
            "--filter",
            "status = unreachable",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    // reqwest is built without a TLS crypto provider of its own.
    agentwire_client::install_crypto_provider();
    let cat = reqwest::get(format!("{}/.well-known/ai-catalog.json", reg.url))
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert!(!cat.to_string().contains("Weather Agent"), "{cat}");
    // It comes back on the same address: searchable again.
    let (_, _server) = host.serve(&addr).await;
    eventually("the agent is back in search", || {
        search(&e2, &url).len() == 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0x_card_is_listed_as_such_and_not_routed() {
    let env = Env::new();
    let reg = start(&env, &[]);
    let old = json!({
        "name": "Legacy Translator", "description": "Translates documents between languages.",
        "version": "0.9.0", "protocolVersion": "0.3.0", "url": "https://legacy.example.com/a2a",
        "preferredTransport": "JSONRPC", "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "translate", "name": "Translate", "description": "Translates text.",
                    "tags": ["translation"], "examples": ["Translate this letter into German"]}]
    });
    let file = write_card(&env, "old.json", &old);
    let out = reg.publish(&env, ALICE, &file, &["-o", "json"]);
    out.expect(0);
    assert!(out.stderr.contains("A2A 0.3.0 card"), "{}", out.stderr);
    let p = out.json();
    assert_eq!(p["entry"]["metadata"]["cardVersion"], "0.x");
    assert_eq!(p["entry"]["metadata"]["protocolVersion"], "0.3.0");
    // Searchable, filterable by protocol version, but not routed to.
    let s = env
        .run(&[
            "registry",
            "search",
            "--registry",
            &reg.url,
            "translate a letter",
            "--filter",
            "protocolVersion=0.3",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(ids(&s).len(), 1, "{s}");
    let r = env
        .run(&[
            "registry",
            "route",
            "--registry",
            &reg.url,
            "translate this letter into German",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(r["noFit"], true, "{r}");
    // A 1.0 card missing required fields is refused, with the problems.
    let mut bad = fx_card();
    bad["defaultInputModes"] = json!([]);
    let file = write_card(&env, "bad.json", &bad);
    let out = reg.publish(&env, ALICE, &file, &["-o", "json"]);
    out.expect(1);
    let err = out.json();
    assert_eq!(err["error"]["code"], "A2ACLI_ERR_CARD_INVALID");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("defaultInputModes"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_references_and_the_find_agent_skill() {
    let env = Env::new();
    let reg = start(&env, &[]);
    let echo = common::serve(agentwire_server::A2aServer::new(
        agentwire_agents::echo::card(),
        agentwire_agents::echo::EchoAgent,
    ))
    .await;
    let echo_addr = common::host(&echo);
    reg.publish(&env, ALICE, &echo_addr, &[]).expect(0);
    // -a registry:NAME resolves to the agent's card before anything else.
    let card = env.run(&[
        "card",
        "get",
        "-a",
        "registry:Echo Agent",
        "--registry",
        &reg.url,
        "-o",
        "json",
    ]);
    card.expect(0);
    assert_eq!(card.json()["name"], "Echo Agent");
    let sent = Env::new().with_env("A2ACLI_REGISTRY", &reg.url).run(&[
        "send",
        "-a",
        "registry:echo-agent",
        "hello through the registry",
        "-o",
        "json",
    ]);
    sent.expect(0);
    assert!(
        sent.stdout.contains("hello through the registry"),
        "{}",
        sent.stdout
    );
    let missing = env.run(&[
        "card",
        "get",
        "-a",
        "registry:nobody",
        "--registry",
        &reg.url,
        "-o",
        "json",
    ]);
    missing.expect(3);
    let no_registry = env.run(&["card", "get", "-a", "registry:Echo Agent", "-o", "json"]);
    no_registry.expect(2);
    // The registry is an A2A agent too: ask it in words.
    let asked = env.run(&[
        "send",
        "-a",
        &reg.url,
        "which agent can echo my text back?",
        "-o",
        "json",
    ]);
    asked.expect(0);
    assert!(asked.stdout.contains("Echo Agent"), "{}", asked.stdout);
    let cat = env
        .run(&["card", "get", "-a", &reg.url, "-o", "json"])
        .json();
    assert_eq!(cat["skills"][0]["id"], "find-agent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_finds_the_compatibility_agent_through_the_registry() {
    let env = Env::new();
    let reg = start(&env, &[]);
    let agent = common::serve(agentwire_server::A2aServer::new(
        agentwire_agents::depcompat::card(),
        agentwire_agents::depcompat::DepCompatAgent,
    ))
    .await;
    // Not yet published: the coordinator says so rather than guess.
    let out = env.run(&["demo", "--registry", &reg.url]);
    out.expect(1);
    assert!(out.stderr.contains("no agent to choose"), "{}", out.stderr);
    reg.publish(&env, ALICE, &common::host(&agent), &[])
        .expect(0);
    let out = env.run(&["demo", "--registry", &reg.url]);
    out.expect(0);
    // The banner says what the demo is in words, not an internal seed
    // number (issue 42).
    assert!(!out.stdout.contains("seed 0"), "{}", out.stdout);
    assert!(
        out.stdout.contains("the agent found through a registry"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("the registry routes it to Dependency Compatibility Agent"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("dependency-compatibility-analysis"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("verdict"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_of_an_ai_catalog_are_ingested() {
    let env = Env::new();
    let reg = start(&env, &[]);
    let host = CardHost::new(weather_card(None));
    let (addr, _server) = host.serve("127.0.0.1:0").await;
    let catalog = json!({
        "specVersion": "1.0",
        "host": {"displayName": "Example Tools"},
        "entries": [
            {"identifier": "urn:air:example.com:weather:forecast", "displayName": "Weather",
             "type": "application/a2a-agent-card+json",
             "url": format!("http://{addr}/.well-known/agent-card.json"), "tags": ["outdoor"]},
            {"identifier": "urn:air:example.com:bundle:finance", "displayName": "Finance bundle",
             "type": "application/ai-catalog+json",
             "data": {"specVersion": "1.0", "entries": [
                 {"identifier": "urn:air:example.com:finance:fx", "displayName": "FX",
                  "type": "application/a2a-agent-card+json", "data": fx_card()}]}},
            {"identifier": "urn:air:example.com:server:weather", "displayName": "Weather MCP",
             "type": "application/mcp-server-card+json", "url": "https://example.com/mcp.json"}
        ]
    });
    let doc = Arc::new(catalog);
    let app = axum::Router::new().route(
        "/.well-known/ai-catalog.json",
        get(move || {
            let doc = Arc::clone(&doc);
            async move { axum::Json((*doc).clone()) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let catalog_host = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let out = env.run(&[
        "registry",
        "ingest",
        "--registry",
        &reg.url,
        "--bearer",
        ALICE,
        &catalog_host,
        "-o",
        "json",
    ]);
    out.expect(0);
    let a = out.json();
    let mut published: Vec<&str> = a["published"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["identifier"].as_str().unwrap())
        .collect();
    published.sort_unstable();
    assert_eq!(
        published,
        [
            "urn:air:example.com:finance:fx",
            "urn:air:example.com:weather:forecast"
        ],
        "{a}"
    );
    assert_eq!(
        a["skipped"][0]["identifier"],
        "urn:air:example.com:server:weather"
    );
    assert!(
        a["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("not indexed"),
        "{a}"
    );
    let e = env
        .run(&[
            "registry",
            "get",
            "--registry",
            &reg.url,
            "urn:air:example.com:weather:forecast",
            "-o",
            "json",
        ])
        .json();
    assert!(
        e["tags"].as_array().unwrap().iter().any(|t| t == "outdoor"),
        "{e}"
    );
    // Not a catalog: refused.
    let bad = env.run(&[
        "registry",
        "ingest",
        "--registry",
        &reg.url,
        "--bearer",
        ALICE,
        &format!("http://{addr}/.well-known/agent-card.json"),
    ]);
    bad.expect(2);
}

/// Two replicas on one PostgreSQL store (`A2A_TEST_POSTGRES_URL`; skipped
/// without it): what one publishes the other finds, what the other
/// withdraws the first forgets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_a_postgres_store() {
    let Ok(url) = std::env::var("A2A_TEST_POSTGRES_URL") else {
        eprintln!("A2A_TEST_POSTGRES_URL not set: registry replicas not tested");
        return;
    };
    let env = Env::new();
    let a = start(&env, &["--store", &url]);
    let b = start(&env, &["--store", &url]);
    let id = format!(
        "urn:air:replica-{}.example.com:agent:fx",
        std::process::id()
    );
    let file = write_card(&env, "fx.json", &fx_card());
    a.publish(&env, ALICE, &file, &["--id", &id]).expect(0);
    let e2 = Env::new();
    let found = |e: &Env, reg: &str| {
        ids(&e
            .run(&[
                "registry",
                "search",
                "--registry",
                reg,
                "convert currency",
                "--filter",
                &format!("identifier={id}"),
                "-o",
                "json",
            ])
            .json())
        .len()
    };
    eventually("the other replica finds it", || found(&e2, &b.url) == 1).await;
    // Only its publisher withdraws it, on any replica.
    env.run(&[
        "registry",
        "withdraw",
        "--registry",
        &b.url,
        "--bearer",
        BOB,
        &id,
    ])
    .expect(4);
    env.run(&[
        "registry",
        "withdraw",
        "--registry",
        &b.url,
        "--bearer",
        ALICE,
        &id,
    ])
    .expect(0);
    eventually("the first replica forgets it", || found(&e2, &a.url) == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ard_v091_manifest_retrieve_and_hints_of_a_real_registry() {
    agentwire_client::install_crypto_provider();
    let env = Env::new();
    let reg = start(&env, &[]);
    assert!(
        reg.banner
            .iter()
            .any(|l| l.contains("/.well-known/ard.json")),
        "{:?}",
        reg.banner
    );
    let echo = common::serve(agentwire_server::A2aServer::new(
        agentwire_agents::echo::card(),
        agentwire_agents::echo::EchoAgent,
    ))
    .await;
    reg.publish(&env, ALICE, &common::host(&echo), &[])
        .expect(0);
    let id = "urn:air:agent.localhost:agent:echo-agent";
    let http = reqwest::Client::new();
    // The manifest, and the hints that point at it.
    let r = http
        .get(format!("{}/.well-known/ard.json", reg.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let hint = format!("<{}/.well-known/ard.json>; rel=\"ard\"", reg.url);
    assert_eq!(r.headers()["link"], hint.as_str());
    let manifest: Value = r.json().await.unwrap();
    let echo_entry = manifest["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["identifier"] == id)
        .cloned()
        .expect("the echo agent in the manifest");
    assert_eq!(
        echo_entry["capabilities"],
        json!(["echo", "long-job", "parts"]),
        "{echo_entry}"
    );
    // From the skills' examples: each skill's first, then the others, 5 at most.
    let queries = echo_entry["representativeQueries"].as_array().unwrap();
    assert_eq!(queries.len(), 5, "{echo_entry}");
    let root = http.get(format!("{}/", reg.url)).send().await.unwrap();
    assert_eq!(root.headers()["link"], hint.as_str());
    let robots = http
        .get(format!("{}/robots.txt", reg.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        robots.contains(&format!("Agentmap: {}/.well-known/ard.json", reg.url)),
        "{robots}"
    );
    // Retrieve, percent-encoded, and its errors.
    let r = http
        .get(format!("{}/agents/{}", reg.url, id.replace(':', "%3A")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers().contains_key("etag"));
    let entry: Value = r.json().await.unwrap();
    assert_eq!(
        entry["@context"],
        "https://agenticresourcediscovery.org/context/v1"
    );
    for (path, status) in [
        ("Echo%20Agent", 400),
        ("urn%3Aair%3Anone.example%3Aagent%3Ax", 404),
    ] {
        let r = http
            .get(format!("{}/agents/{path}", reg.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
    }
    // The command finds an entry by identifier and by name.
    for reference in [id, "Echo Agent", "echo-agent"] {
        let got = env.run(&[
            "registry",
            "get",
            "--registry",
            &reg.url,
            reference,
            "-o",
            "json",
        ]);
        got.expect(0);
        assert_eq!(got.json()["identifier"], id, "{reference}");
    }
    env.run(&[
        "registry",
        "get",
        "--registry",
        &reg.url,
        "nobody",
        "-o",
        "json",
    ])
    .expect(3);
}

/// A host that publishes manifests but is no registry of ours: the answer
/// of each "METHOD /path" (status, `Link` header, JSON body), 404 for the
/// rest; it records what it was asked.
struct ManifestHost {
    url: String,
    asked: Arc<Mutex<Vec<String>>>,
}

type Answers = std::collections::HashMap<String, (u16, Option<String>, Value)>;

async fn manifest_host(make: impl FnOnce(&str) -> Answers) -> ManifestHost {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answers = Arc::new(make(&url));
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&asked);
    let app = axum::Router::new().fallback(move |method: http::Method, uri: http::Uri| {
        let answers = Arc::clone(&answers);
        let log = Arc::clone(&log);
        async move {
            let key = format!("{method} {}", uri.path());
            log.lock().unwrap().push(key.clone());
            match answers.get(&key) {
                Some((status, link, body)) => {
                    let mut r = (
                        StatusCode::from_u16(*status).unwrap_or(StatusCode::OK),
                        axum::Json(body.clone()),
                    )
                        .into_response();
                    if let Some(l) = link {
                        r.headers_mut()
                            .insert(header::LINK, l.parse().expect("link header"));
                    }
                    r
                }
                None => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    ManifestHost { url, asked }
}

fn registry_entry(url: &str) -> Value {
    json!({"identifier": "urn:air:host.example:registry:main", "displayName": "Main registry",
           "type": "application/ai-registry+json", "url": url})
}

fn one_result(identifier: &str) -> Value {
    json!({"results": [{"identifier": identifier, "displayName": identifier,
                        "type": "application/a2a-agent-card+json", "url": "https://host.example/card.json",
                        "score": 90, "source": "https://host.example/"}]})
}

fn answer(status: u16, body: Value) -> (u16, Option<String>, Value) {
    (status, None, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reads_ard_json_then_rel_ard_then_a_v09_catalog() {
    let env = Env::new();
    let echo = common::serve(agentwire_server::A2aServer::new(
        agentwire_agents::echo::card(),
        agentwire_agents::echo::EchoAgent,
    ))
    .await;
    let echo_card = format!("http://{}/.well-known/agent-card.json", common::host(&echo));
    // A registry of ARD v0.9: only ai-catalog.json, its API under /v09/.
    let v09 = manifest_host(|url| {
        Answers::from([
            (
                "GET /.well-known/ai-catalog.json".into(),
                answer(
                    200,
                    json!({"specVersion": "1.0", "host": {"displayName": "Old host"},
                           "entries": [registry_entry(&format!("{url}/v09/")),
                                       {"identifier": "urn:air:agent.localhost:agent:echo-agent",
                                        "displayName": "Echo Agent",
                                        "type": "application/a2a-agent-card+json", "url": echo_card}]}),
                ),
            ),
            ("POST /v09/search".into(), answer(200, one_result("urn:air:host.example:agent:from-v09"))),
        ])
    })
    .await;
    // A host whose root links its manifest (rel="ard"), and whose
    // ai-catalog.json (not read) names another registry.
    let linked = manifest_host(|url| {
        Answers::from([
            (
                "GET /".into(),
                (
                    200,
                    Some("</m/entries.json>; rel=\"ard\"".into()),
                    json!({}),
                ),
            ),
            (
                "GET /m/entries.json".into(),
                answer(
                    200,
                    json!({"entries": [registry_entry(&format!("{url}/api/"))]}),
                ),
            ),
            (
                "GET /.well-known/ai-catalog.json".into(),
                answer(
                    200,
                    json!({"entries": [registry_entry(&format!("{url}/wrong/"))]}),
                ),
            ),
            (
                "POST /api/search".into(),
                answer(200, one_result("urn:air:host.example:agent:from-link")),
            ),
            (
                "POST /wrong/search".into(),
                answer(200, one_result("urn:air:host.example:agent:wrong")),
            ),
        ])
    })
    .await;
    // A host with both well-known manifests: ard.json wins.
    let both = manifest_host(|url| {
        Answers::from([
            (
                "GET /.well-known/ard.json".into(),
                answer(
                    200,
                    json!({"entries": [registry_entry(&format!("{url}/api/"))]}),
                ),
            ),
            (
                "GET /.well-known/ai-catalog.json".into(),
                answer(
                    200,
                    json!({"entries": [registry_entry(&format!("{url}/wrong/"))]}),
                ),
            ),
            (
                "POST /api/search".into(),
                answer(200, one_result("urn:air:host.example:agent:from-ard-json")),
            ),
            (
                "POST /wrong/search".into(),
                answer(200, one_result("urn:air:host.example:agent:wrong")),
            ),
        ])
    })
    .await;
    for (host, expected) in [
        (&v09, "urn:air:host.example:agent:from-v09"),
        (&linked, "urn:air:host.example:agent:from-link"),
        (&both, "urn:air:host.example:agent:from-ard-json"),
    ] {
        let out = env.run(&[
            "registry",
            "search",
            "--registry",
            &host.url,
            "anything",
            "-o",
            "json",
        ]);
        out.expect(0);
        assert_eq!(ids(&out.json()), [expected], "{}", out.stdout);
    }
    let asked = |h: &ManifestHost| h.asked.lock().unwrap().clone();
    let v09_asked = asked(&v09);
    let pos = |k: &str| v09_asked.iter().position(|x| x == k);
    assert!(
        pos("GET /.well-known/ard.json") < pos("GET /.well-known/ai-catalog.json"),
        "{v09_asked:?}"
    );
    assert!(
        pos("GET /") < pos("GET /.well-known/ai-catalog.json"),
        "{v09_asked:?}"
    );
    assert!(
        !asked(&both).contains(&"GET /".to_owned()),
        "{:?}",
        asked(&both)
    );
    assert!(!asked(&linked).contains(&"GET /.well-known/ai-catalog.json".to_owned()));
    // -a registry:NAME through the v0.9 host's catalog.
    let card = env.run(&[
        "card",
        "get",
        "-a",
        "registry:Echo Agent",
        "--registry",
        &v09.url,
        "-o",
        "json",
    ]);
    card.expect(0);
    assert_eq!(card.json()["name"], "Echo Agent");
    env.run(&[
        "card",
        "get",
        "-a",
        "registry:nobody",
        "--registry",
        &v09.url,
        "-o",
        "json",
    ])
    .expect(3);
}
