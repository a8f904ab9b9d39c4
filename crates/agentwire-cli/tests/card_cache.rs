//! The agent card cache of the `a2a` command when another agent takes the
//! address of the one whose card is cached: an operation the cached card
//! does not declare is refused only after the card was revalidated (and the
//! new agent's card is then used); `--no-cache` / `A2ACLI_NO_CACHE` fetch
//! the card afresh; and with `Cache-Control: no-cache` (a max-age of 0),
//! the new card is seen at once.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agentwire_server::{A2aServer, ServerHandle};
use agentwire_types::{
    AgentCard, SecurityRequirement, SecurityScheme, StringList, security_scheme,
};
use common::{Env, Lab, Recorder, lab_card};
use serde_json::Value;

/// How long the first agent lets clients keep its card.
const MAX_AGE: Duration = Duration::from_secs(600);

/// The lab card with a bearer scheme (so that an extended card can be
/// asked for with credentials).
fn with_bearer(mut card: AgentCard) -> AgentCard {
    card.security_schemes.insert(
        "bearer".into(),
        SecurityScheme {
            scheme: Some(security_scheme::Scheme::HttpAuthSecurityScheme(
                agentwire_types::HttpAuthSecurityScheme {
                    scheme: "Bearer".into(),
                    ..Default::default()
                },
            )),
        },
    );
    card.security_requirements.push(SecurityRequirement {
        schemes: [("bearer".to_string(), StringList::default())].into(),
    });
    card
}

/// An agent without streaming or an extended card.
async fn plain_agent(addr: &str, max_age: Option<Duration>) -> ServerHandle {
    let mut server = A2aServer::new(with_bearer(lab_card()).with_streaming(false), Lab);
    if let Some(age) = max_age {
        server = server.card_max_age(age);
    }
    server.bind(addr).await.expect("bind").spawn()
}

/// An agent with streaming and an extended card (bearer `tok`).
async fn rich_agent(addr: &str, max_age: Option<Duration>) -> ServerHandle {
    let mut card = with_bearer(lab_card());
    card.capabilities
        .get_or_insert_with(Default::default)
        .extended_agent_card = Some(true);
    let mut extended = card.clone();
    extended.description = "extended view".into();
    let mut server = A2aServer::new(card, Lab)
        .extended_card(extended)
        .authenticator(Arc::new(Recorder {
            bearer: Some("tok".into()),
            ..Default::default()
        }));
    if let Some(age) = max_age {
        server = server.card_max_age(age);
    }
    server.bind(addr).await.expect("bind").spawn()
}

fn streaming(card: &Value) -> bool {
    card["capabilities"]["streaming"].as_bool().unwrap_or(false)
}

/// The card as `a2a card get -o json` shows it.
fn card_of(env: &Env, addr: &str, extra: &[&str]) -> Value {
    let mut args = vec!["card", "get", "-a", addr, "-o", "json"];
    args.extend(extra);
    let out = env.run(&args);
    out.expect(0);
    out.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_card_is_revalidated_before_a_refusal_or_bypassed() {
    let old = plain_agent("127.0.0.1:0", Some(MAX_AGE)).await;
    let addr = old.local_addr().to_string();
    // Six homes, each with the first agent's card cached (fresh for ten
    // minutes).
    let mut envs: Vec<Env> = (0..6).map(|_| Env::new()).collect();
    for env in &envs {
        assert!(!streaming(&card_of(env, &addr, &[])));
    }
    // Another agent, with streaming and an extended card, takes the port.
    old.shutdown().await.expect("stop the first agent");
    let _new = rich_agent(&addr, Some(MAX_AGE)).await;

    // Within its max-age the cached card is what `card get` shows...
    assert!(!streaming(&card_of(&envs[0], &addr, &[])));

    // ... but what it does not declare is not refused on its word: it is
    // revalidated, and the new agent's card is used.
    let out = envs[1].run(&[
        "send", "-a", &addr, "--bearer", "tok", "--stream", "-o", "json", "chunks",
    ]);
    out.expect(0);
    assert!(
        !out.stderr.contains("does not declare streaming"),
        "{}",
        out.stderr
    );
    let lines = out.jsonl();
    assert!(
        lines.iter().any(|l| l.get("artifactUpdate").is_some()) && lines.len() > 2,
        "not streamed:\n{}",
        out.stdout
    );
    assert_eq!(
        lines.last().expect("events")["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // The revalidated card replaced the cached one.
    assert!(streaming(&card_of(&envs[1], &addr, &[])));

    // Subscribing (needs streaming).
    let out = envs[2].run(&[
        "send", "-a", &addr, "--bearer", "tok", "--async", "-o", "json", "ask",
    ]);
    out.expect(0);
    let id = out.json()["task"]["id"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let out = envs[2].run(&[
        "task",
        "subscribe",
        "-a",
        &addr,
        "--bearer",
        "tok",
        &id,
        "--stream",
        "-o",
        "json",
    ]);
    out.expect(0);
    assert_eq!(
        out.jsonl()[0]["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED",
        "{}",
        out.stdout
    );

    // The extended card.
    let out = envs[3].run(&["card", "get", "-a", &addr, "--extended", "--bearer", "tok"]);
    out.expect(0);
    assert_eq!(out.field("Description").as_deref(), Some("extended view"));

    // --no-cache: fetched afresh, and the new card replaces the cached one.
    assert!(streaming(&card_of(&envs[4], &addr, &["--no-cache"])));
    assert!(streaming(&card_of(&envs[4], &addr, &[])));
    let out = envs[4].run(&[
        "send",
        "-a",
        &addr,
        "--no-cache",
        "--bearer",
        "tok",
        "--stream",
        "-o",
        "json",
        "chunks",
    ]);
    out.expect(0);
    assert!(out.jsonl().len() > 2, "{}", out.stdout);

    // A2ACLI_NO_CACHE (its cache holds the first card too), also listed
    // by `config show`.
    let env = envs
        .pop()
        .expect("a home")
        .with_env("A2ACLI_NO_CACHE", "true");
    assert!(streaming(&card_of(&env, &addr, &[])));
    let out = env.run(&["config", "show", "-o", "json"]);
    out.expect(0);
    let setting = &out.json()["settings"]["A2ACLI_NO_CACHE"];
    assert_eq!(setting["value"], "true", "{setting}");
    assert_eq!(setting["source"], "environment", "{setting}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_cache_a_new_agent_is_seen_at_once() {
    let old = plain_agent("127.0.0.1:0", Some(Duration::ZERO)).await;
    let addr = old.local_addr().to_string();
    let env = Env::new();
    assert!(!streaming(&card_of(&env, &addr, &[])));
    // Unchanged: the cached card is confirmed (304), not downloaded again.
    let out = env.run(&["card", "get", "-a", &addr, "--debug"]);
    out.expect(0);
    assert!(
        out.stderr.contains("revalidated (304 Not Modified)"),
        "{}",
        out.stderr
    );
    old.shutdown().await.expect("stop the first agent");
    let _new = rich_agent(&addr, Some(Duration::ZERO)).await;
    assert!(streaming(&card_of(&env, &addr, &[])));
    let out = env.run(&[
        "send", "-a", &addr, "--bearer", "tok", "--stream", "-o", "json", "chunks",
    ]);
    out.expect(0);
    assert!(out.jsonl().len() > 2, "{}", out.stdout);
}

/// `a2a serve` with the given extra options: the child and its card URL.
async fn serve_child(env: &Env, extra: &[&str]) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let bin = assert_cmd::cargo::cargo_bin("a2a");
    let mut args = vec![
        "serve", "--agent", "echo", "--port", "0", "--store", "memory",
    ];
    args.extend(extra);
    let mut child = std::process::Command::new(bin)
        .args(&args)
        .env("HOME", env.home())
        .env_remove("A2A_SERVE_CARD_MAX_AGE")
        .current_dir(env.cwd())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn a2a serve");
    let stdout = child.stdout.take().expect("stdout");
    let found = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.trim().strip_prefix("agent card: ") {
                    return Some(url.to_owned());
                }
            }
            None
        }),
    )
    .await;
    match found {
        Ok(Ok(Some(url))) => (child, url),
        other => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a2a serve did not start: {other:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sends_a_max_age_of_5_minutes_unless_another_is_chosen() {
    let env = Env::new();
    for (extra, want) in [
        (&[][..], "public, max-age=300"),
        (&["--card-max-age", "1h"][..], "public, max-age=3600"),
        (&["--card-max-age", "0s"][..], "no-cache"),
    ] {
        let (mut child, url) = serve_child(&env, extra).await;
        agentwire_client::install_crypto_provider();
        let resp = reqwest::get(&url).await;
        let _ = child.kill();
        let _ = child.wait();
        let resp = resp.expect("card request");
        let headers = resp.headers();
        assert_eq!(headers["cache-control"], want, "{extra:?}");
        assert!(headers.contains_key("etag") && headers.contains_key("last-modified"));
    }
}
