//! `a2a mcp` driven by a real MCP client, rmcp's (the official Rust SDK):
//! the Dependency Compatibility story through the tools over stdio with a
//! client that keeps no A2A state (every id it passes comes from the
//! previous result), the work continued after the host restarts (a new
//! `a2a mcp` process per step, the ledger file kept), streamable HTTP,
//! artifacts as resources, progress notifications, an agent that does not
//! stream, the wait bound, and the errors a model reads.
//!
//! The same story with the official Python SDK is in tests/mcp_interop.rs
//! (ignored here; run by .ci/run).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire_server::A2aServer;
use common::{Env, Lab, lab_card, serve};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, NumberOrString, ProgressNotificationParam,
    ProgressToken, ReadResourceRequestParams, RequestMetaObject,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// Bound on each test's MCP calls.
const CALL_LIMIT: Duration = Duration::from_secs(90);

fn a2a() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_a2a"))
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../agentwire-agents/fixtures/npm/payment-service")
        .join(name)
}

/// `a2a serve` of one bundled agent on a free port, killed on drop.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(agent: &str, env: &Env) -> Self {
        Self::start_args(&["--agent", agent], env)
    }

    fn start_args(args: &[&str], env: &Env) -> Self {
        let mut child = Command::new(a2a())
            .arg("serve")
            .args(args)
            .args(["--port", "0", "--store", "memory"])
            .env("HOME", env.home())
            .current_dir(env.cwd())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a2a serve");
        let url = first_url(&mut child, "http://127.0.0.1:");
        Self { child, url }
    }
}

/// The first `http://...` word of a child's first line; the rest of its
/// output is drained.
fn first_url(child: &mut Child, prefix: &str) -> String {
    let stdout = child.stdout.take().expect("its stdout");
    let mut reader = BufReader::new(stdout);
    let mut first = String::new();
    reader.read_line(&mut first).expect("read the first line");
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    first
        .split_whitespace()
        .find(|w| w.starts_with(prefix))
        .unwrap_or_else(|| panic!("no URL in {first:?}"))
        .to_owned()
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The MCP host's side: records the progress notifications received.
#[derive(Clone, Default)]
struct Host {
    progress: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Host {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress
            .lock()
            .unwrap()
            .push(params.message.unwrap_or_default());
    }
}

type Session = RunningService<RoleClient, Host>;

/// Starts `a2a mcp ARGS` as a stdio MCP server (the host's way) and opens a
/// session to it.
async fn stdio_session(env: &Env, args: &[String], host: Host) -> Session {
    let home = env.home().to_owned();
    let cwd = env.cwd();
    let cmd = tokio::process::Command::new(a2a()).configure(|c| {
        c.arg("mcp")
            .args(args)
            .env("HOME", &home)
            .env_remove("A2ACLI_LEDGER")
            .env_remove("XDG_DATA_HOME")
            .current_dir(&cwd);
    });
    let transport = TokioChildProcess::builder(cmd)
        .stderr(Stdio::inherit())
        .spawn()
        .map(|(t, _)| t)
        .expect("start a2a mcp");
    tokio::time::timeout(CALL_LIMIT, host.serve(transport))
        .await
        .expect("initialize in time")
        .expect("an MCP session")
}

fn mcp_args(agent: &str, ledger: &Path) -> Vec<String> {
    vec![
        "-a".into(),
        format!("depcompat={agent}"),
        "--ledger".into(),
        ledger.display().to_string(),
    ]
}

/// Calls a tool (with a progress token) and returns the result.
async fn call_raw(s: &Session, name: &str, args: Value) -> CallToolResult {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(map);
    let mut meta = RequestMetaObject::default();
    meta.set_progress_token(ProgressToken(NumberOrString::Number(7)));
    params.meta = Some(meta);
    tokio::time::timeout(CALL_LIMIT, s.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{name} answers in time"))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// Calls a tool that must succeed; its structured content and text.
async fn call(s: &Session, name: &str, args: Value) -> (Value, String) {
    let r = call_raw(s, name, args).await;
    let text = text_of(&r);
    assert_ne!(r.is_error, Some(true), "{name} failed:\n{text}");
    let json = r.structured_content.clone().expect("structured content");
    (json, text)
}

fn copy_fixtures(env: &Env) {
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(fixture(f), env.cwd().join(f)).expect("copy the fixture");
    }
}

/// `send_message` of the analysis with the project's files: the agent asks
/// which Node.js version (input-required); its result.
async fn ask_for_the_analysis(s: &Session) -> Value {
    let (first, _) = call(
        s,
        "send_message",
        json!({
            "agent": "depcompat",
            "text": "Check payment-service",
            "files": ["package.json", "package-lock.json"],
        }),
    )
    .await;
    assert_eq!(first["state"], "input-required", "{first:#}");
    first
}

/// `continue_task` with the answer: the task completes; its result.
async fn answer_the_question(s: &Session, first: &Value) -> Value {
    let (report, _) = call(
        s,
        "continue_task",
        json!({"task_id": first["taskId"], "text": "Node.js 24"}),
    )
    .await;
    assert_eq!(report["state"], "completed", "{report:#}");
    report
}

fn md_artifact(result: &Value) -> Value {
    let md: Vec<&Value> = result["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter(|a| a["name"].as_str().is_some_and(|n| n.ends_with(".md")))
        .collect();
    assert_eq!(md.len(), 1, "{result:#}");
    md[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dependency_story_through_the_tools_over_stdio() {
    let env = Env::new();
    copy_fixtures(&env);
    let agent = Served::start("depcompat", &env);
    let ledger = env.home().join("ledger.db");
    let host = Host::default();
    let s = stdio_session(&env, &mcp_args(&agent.url, &ledger), host.clone()).await;

    // The tools, with schemas and descriptions.
    let tools = s.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for t in [
        "list_agents",
        "describe_agent",
        "send_message",
        "continue_task",
        "get_task",
        "cancel_task",
        "list_versions",
        "accept_version",
        "refine",
    ] {
        assert!(names.contains(&t), "{t} missing from {names:?}");
    }
    let send = tools.iter().find(|t| t.name == "send_message").unwrap();
    let required = send.input_schema["required"].as_array().unwrap();
    assert!(required.contains(&json!("agent")) && required.contains(&json!("text")));
    assert!(send.input_schema["properties"]["files"].is_object());
    assert!(
        send.description
            .as_deref()
            .unwrap()
            .contains("continue_task")
    );

    let (agents, text) = call(&s, "list_agents", json!({})).await;
    assert_eq!(agents["agents"][0]["name"], "depcompat", "{agents:#}");
    assert!(text.contains("skill "), "{text}");
    let (card, _) = call(&s, "describe_agent", json!({"agent": "depcompat"})).await;
    assert_eq!(card["title"], "Dependency Compatibility Agent");
    assert_eq!(card["streaming"], true);

    // The project's files; the agent asks for the target runtime.
    let (first, text) = call(
        &s,
        "send_message",
        json!({
            "agent": "depcompat",
            "text": "Check whether payment-service can move to the new runtime",
            "files": ["package.json", "package-lock.json"],
        }),
    )
    .await;
    assert_eq!(first["state"], "input-required", "{first:#}");
    let task_id = first["taskId"].as_str().unwrap().to_owned();
    let context_id = first["contextId"].as_str().unwrap().to_owned();
    assert!(
        first["question"].as_str().unwrap().contains("Node.js"),
        "{first:#}"
    );
    assert!(
        text.contains("the agent asks: ")
            && text.contains(&format!("continue_task(task_id=\"{task_id}\"")),
        "{text}"
    );

    // The answer; the report comes back, with progress on the way.
    let (report, text) = call(
        &s,
        "continue_task",
        json!({"task_id": first["taskId"], "text": "Node.js 24"}),
    )
    .await;
    assert_eq!(report["state"], "completed", "{report:#}");
    assert_eq!(report["taskId"], task_id.as_str());
    let md = md_artifact(&report);
    assert!(
        md["text"]
            .as_str()
            .unwrap()
            .contains("Dependency compatibility report: payment-service@3.4.1"),
        "{md:#}"
    );
    assert_eq!(md["version"], 1);
    assert!(text.contains("refine(artifact_id="), "{text}");
    {
        let progress = host.progress.lock().unwrap();
        assert!(
            progress.iter().any(|p| p.starts_with("working")),
            "progress notifications: {progress:?}"
        );
    }

    // A refinement: a new task in the same context, version 2.
    let (refined, _) = call(
        &s,
        "refine",
        json!({"artifact_id": md["artifactId"], "text": "sort the fixes by risk"}),
    )
    .await;
    assert_eq!(refined["state"], "completed", "{refined:#}");
    assert_eq!(refined["contextId"], context_id.as_str());
    assert_ne!(refined["taskId"], task_id.as_str());
    let md2 = md_artifact(&refined);
    assert_eq!(md2["version"], 2, "{refined:#}");
    assert!(
        md2["text"]
            .as_str()
            .unwrap()
            .contains("Fixes (sorted by risk, highest first)")
    );

    // Two versions; accept the second.
    let (versions, _) = call(&s, "list_versions", json!({"context_id": context_id})).await;
    let reports: Vec<&Value> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["name"] == md["name"])
        .collect();
    assert_eq!(reports.len(), 2, "{versions:#}");
    assert_eq!(reports[1]["previousArtifactId"], md["artifactId"]);
    let (accepted, _) = call(
        &s,
        "accept_version",
        json!({"artifact_id": reports[1]["artifactId"]}),
    )
    .await;
    assert_eq!(accepted["accepted"], true);
    assert_eq!(accepted["version"], 2);
    let (versions, text) = call(&s, "list_versions", json!({})).await;
    let flags: Vec<bool> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["name"] == md["name"])
        .map(|v| v["accepted"].as_bool().unwrap())
        .collect();
    assert_eq!(flags, [false, true], "{text}");

    // The artifacts are resources too.
    let resources = s.list_all_resources().await.expect("resources/list");
    let uri = md2["uri"].as_str().unwrap();
    assert!(resources.iter().any(|r| r.uri == uri), "{resources:?}");
    let read = s
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .expect("resources/read");
    let body = serde_json::to_value(&read.contents).unwrap();
    assert!(
        body[0]["text"].as_str().unwrap().contains("sorted by risk"),
        "{body}"
    );
    assert_eq!(body[0]["mimeType"], "text/markdown");
    let _ = s.cancel().await;
}

/// The host restarts between calls (a new `a2a mcp` process each time, on
/// the same ledger): the question is answered, the report refined and a
/// version accepted from what the ledger kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_continues_after_the_host_restarts() {
    let env = Env::new();
    copy_fixtures(&env);
    let agent = Served::start("depcompat", &env);
    let ledger = env.home().join("ledger.db");
    let args = mcp_args(&agent.url, &ledger);
    let step = |name: &'static str, a: Value| {
        let env = &env;
        let args = args.clone();
        async move {
            let s = stdio_session(env, &args, Host::default()).await;
            let out = call(&s, name, a).await;
            let _ = s.cancel().await;
            out
        }
    };
    let (first, _) = step(
        "send_message",
        json!({
            "agent": "depcompat",
            "text": "Check payment-service",
            "files": ["package.json", "package-lock.json"],
        }),
    )
    .await;
    assert_eq!(first["state"], "input-required", "{first:#}");
    // A new host: the task is still known, and still waits.
    let (again, text) = step("get_task", json!({"task_id": first["taskId"]})).await;
    assert_eq!(again["state"], "input-required", "{text}");
    let (report, _) = step(
        "continue_task",
        json!({"task_id": first["taskId"], "text": "Node.js 24"}),
    )
    .await;
    assert_eq!(report["state"], "completed", "{report:#}");
    let md = md_artifact(&report);
    let (refined, _) = step(
        "refine",
        json!({"artifact_id": md["artifactId"], "text": "sort the fixes by risk"}),
    )
    .await;
    let md2 = md_artifact(&refined);
    assert_eq!(md2["version"], 2, "{refined:#}");
    let (versions, _) = step("list_versions", json!({"context_id": first["contextId"]})).await;
    let ids: Vec<&Value> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["name"] == md["name"])
        .map(|v| &v["artifactId"])
        .collect();
    assert_eq!(ids, [&md["artifactId"], &md2["artifactId"]]);
    let (accepted, _) = step("accept_version", json!({"artifact_id": md2["artifactId"]})).await;
    assert_eq!(accepted["version"], 2);
    // A task that ended cannot be continued: the result says what to do.
    let s = stdio_session(&env, &args, Host::default()).await;
    let r = call_raw(
        &s,
        "continue_task",
        json!({"task_id": first["taskId"], "text": "again"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    let text = text_of(&r);
    assert!(
        text.contains("cannot be continued") && text.contains("refine(artifact_id="),
        "{text}"
    );
    let _ = s.cancel().await;

    // The bridge's state is the `a2a` ledger's: the context with its
    // agent, both tasks, read by `a2a ledger` (and `a2a send --context`).
    let out = env.run(&[
        "ledger",
        "tasks",
        "--ledger",
        ledger.to_str().expect("a UTF-8 path"),
        first["contextId"].as_str().expect("a context id"),
        "-o",
        "json",
    ]);
    out.expect(0);
    let doc = out.json();
    assert_eq!(doc["agent"], agent.url.as_str(), "{doc}");
    let tasks: Vec<&Value> = doc["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| &t["taskId"])
        .collect();
    assert_eq!(tasks, [&first["taskId"], &refined["taskId"]], "{doc}");
}

/// A ledger from before the bridge kept each context's agent in the
/// ledger itself (a table of its own, `mcp_context_agents`): the agents
/// are moved into the ledger and the table dropped, and the work goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_with_the_former_agent_table_is_adopted() {
    let env = Env::new();
    copy_fixtures(&env);
    let agent = Served::start("depcompat", &env);
    let ledger = env.home().join("ledger.db");
    let args = mcp_args(&agent.url, &ledger);
    let s = stdio_session(&env, &args, Host::default()).await;
    let first = ask_for_the_analysis(&s).await;
    let _ = s.cancel().await;
    let ctx = first["contextId"].as_str().expect("a context id");
    {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", ledger.display()))
            .await
            .expect("open the ledger");
        for q in [
            "UPDATE contexts SET agent = NULL",
            "CREATE TABLE mcp_context_agents (context_id TEXT PRIMARY KEY, agent TEXT NOT NULL, updated_at TEXT NOT NULL)",
        ] {
            sqlx::query(q).execute(&pool).await.expect(q);
        }
        sqlx::query("INSERT INTO mcp_context_agents VALUES (?, ?, '0')")
            .bind(ctx)
            .bind(&agent.url)
            .execute(&pool)
            .await
            .expect("the former row");
        pool.close().await;
    }
    let s = stdio_session(&env, &args, Host::default()).await;
    answer_the_question(&s, &first).await;
    let _ = s.cancel().await;
    let l = ledger.to_str().expect("a UTF-8 path");
    let out = env.run(&["ledger", "contexts", "--ledger", l, "-o", "json"]);
    out.expect(0);
    assert_eq!(out.json()["contexts"][0]["agent"], agent.url.as_str());
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", ledger.display()))
        .await
        .expect("open the ledger");
    let left: Option<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE name = 'mcp_context_agents'")
            .fetch_optional(&pool)
            .await
            .expect("the schema");
    assert_eq!(left, None, "the former table is dropped");
}

/// `a2a mcp --no-ledger`: the bridge keeps its state in memory (a task
/// is continued in the same session) and writes no file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ledger_keeps_the_state_in_memory() {
    let env = Env::new();
    copy_fixtures(&env);
    let agent = Served::start("depcompat", &env);
    let ledger = env.home().join("off").join("ledger.db");
    let mut args = mcp_args(&agent.url, &ledger);
    args.push("--no-ledger".into());
    let s = stdio_session(&env, &args, Host::default()).await;
    let first = ask_for_the_analysis(&s).await;
    answer_the_question(&s, &first).await;
    let _ = s.cancel().await;
    assert!(
        std::fs::metadata(&ledger).is_err(),
        "the ledger was written"
    );
    assert!(
        std::fs::metadata(env.home().join(".local/share/a2a-cli")).is_err(),
        "the default ledger was written"
    );
}

/// `a2a mcp --http`: the same tools over streamable HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_serves_the_tools() {
    agentwire_client::install_crypto_provider();
    let env = Env::new();
    copy_fixtures(&env);
    let agent = Served::start("depcompat", &env);
    let ledger = env.home().join("ledger.db");
    let mut child = Command::new(a2a())
        .arg("mcp")
        .args(mcp_args(&agent.url, &ledger))
        .args(["--http", "127.0.0.1:0"])
        .env("HOME", env.home())
        .current_dir(env.cwd())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a2a mcp --http");
    let url = first_url(&mut child, "http://127.0.0.1:");
    assert!(url.ends_with("/mcp"), "{url}");
    let guard = Killed(child);
    let transport = StreamableHttpClientTransport::from_uri(url.as_str());
    let host = Host::default();
    let s = tokio::time::timeout(CALL_LIMIT, host.clone().serve(transport))
        .await
        .expect("initialize in time")
        .expect("an MCP session over HTTP");
    let tools = s.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 9);
    let first = ask_for_the_analysis(&s).await;
    answer_the_question(&s, &first).await;
    assert!(
        !host.progress.lock().unwrap().is_empty(),
        "progress notifications over HTTP"
    );
    let _ = s.cancel().await;
    drop(guard);
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An agent that does not stream is polled; work longer than the bound
/// returns the task to check later with get_task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_does_not_stream_and_the_wait_bound() {
    let env = Env::new();
    let server = serve(A2aServer::new(lab_card().with_streaming(false), Lab)).await;
    let url = format!("http://{}", server.local_addr());
    let ledger = env.home().join("ledger.db");
    let mut args = vec![
        "-a".to_owned(),
        format!("lab={url}"),
        "--ledger".into(),
        ledger.display().to_string(),
        "--max-wait".into(),
        "1s".into(),
    ];
    let s = stdio_session(&env, &args, Host::default()).await;
    let (asked, _) = call(&s, "send_message", json!({"agent": "lab", "text": "ask"})).await;
    assert_eq!(asked["state"], "input-required", "{asked:#}");
    assert_eq!(asked["question"], "What size?");
    let (answered, _) = call(
        &s,
        "continue_task",
        json!({"task_id": asked["taskId"], "text": "large"}),
    )
    .await;
    assert_eq!(answered["state"], "completed", "{answered:#}");
    assert_eq!(answered["artifacts"][0]["text"], "you said: large");

    // Longer than the bound: the task id to check later.
    let (slow, text) = call(
        &s,
        "send_message",
        json!({"agent": "lab", "text": "slow 2500"}),
    )
    .await;
    assert_eq!(slow["state"], "working", "{slow:#}");
    assert!(
        text.contains(&format!(
            "get_task(task_id=\"{}\")",
            slow["taskId"].as_str().unwrap()
        )),
        "{text}"
    );
    let _ = s.cancel().await;
    // Later, from another host session, it is done.
    args[5] = "30s".into();
    let s = stdio_session(&env, &args, Host::default()).await;
    let mut state = String::new();
    for _ in 0..40 {
        let (t, _) = call(&s, "get_task", json!({"task_id": slow["taskId"]})).await;
        state = t["state"].as_str().unwrap().to_owned();
        if state == "completed" {
            assert_eq!(t["artifacts"][0]["text"], "done");
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(state, "completed");
    // A direct message (no task).
    let (m, _) = call(
        &s,
        "send_message",
        json!({"agent": "lab", "text": "message"}),
    )
    .await;
    assert_eq!(m["message"], "just a message", "{m:#}");
    let _ = s.cancel().await;
}

/// Mistakes come back as results the model can read, saying what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_say_what_to_do() {
    let env = Env::new();
    let ledger = env.home().join("ledger.db");
    let args = mcp_args("127.0.0.1:9", &ledger);
    let s = stdio_session(&env, &args, Host::default()).await;
    let r = call_raw(&s, "continue_task", json!({"task_id": "nope", "text": "x"})).await;
    assert_eq!(r.is_error, Some(true));
    let text = text_of(&r);
    assert!(text.contains("the ledger has no task nope"), "{text}");
    let r = call_raw(&s, "send_message", json!({"agent": "nobody", "text": "x"})).await;
    assert_eq!(r.is_error, Some(true));
    let text = text_of(&r);
    assert!(
        text.contains("no agent named \"nobody\"") && text.contains("depcompat"),
        "{text}"
    );
    let r = call_raw(&s, "send_message", json!({"agent": "depcompat"})).await;
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("invalid arguments"), "{}", text_of(&r));
    // An unreachable agent is a result too, and list_agents says so.
    let r = call_raw(
        &s,
        "send_message",
        json!({"agent": "depcompat", "text": "x"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    let (agents, _) = call(&s, "list_agents", json!({})).await;
    assert!(agents["agents"][0]["error"].is_string(), "{agents:#}");
    let r = call_raw(&s, "refine", json!({"artifact_id": "nope", "text": "x"})).await;
    assert!(text_of(&r).contains("list_versions"), "{}", text_of(&r));
    let _ = s.cancel().await;
}
