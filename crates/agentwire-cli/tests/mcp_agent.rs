//! The other direction: `a2a serve --agent mcp --mcp-server ...` serves an
//! MCP server's tools as A2A skills. Real MCP servers behind it:
//!
//! - one written with rmcp (the official Rust SDK) in this test, reached
//!   over streamable HTTP (`--mcp-server URL`);
//! - `a2a mcp` itself, started over stdio (`--mcp-server 'a2a mcp ...'`);
//! - one written with the MCP Python SDK (`interop/mcp/tools_server.py`,
//!   ignored here: it needs `A2A_MCP_PYTHON`; run by interop/mcp/run.sh).
//!
//! Each is called over the three A2A bindings with the `a2a` command: a
//! tool named in a data part, a tool asked for in words, a tool missing
//! arguments (input-required, then answered), a tool error.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use common::Env;
use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{Value, json};

const BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];

fn a2a() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_a2a"))
}

/// The test's MCP server (rmcp): reverse, add, and a tool that fails.
#[derive(Clone)]
struct Toolbox;

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ReverseArgs {
    /// The text to reverse.
    text: String,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct AddArgs {
    /// The first number.
    a: f64,
    /// The second number.
    b: f64,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct Empty {}

fn toolbox_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "reverse",
            "Reverses the text, letter by letter.",
            schema_for_type::<ReverseArgs>(),
        ),
        Tool::new(
            "add",
            "Adds two numbers a and b.",
            schema_for_type::<AddArgs>(),
        ),
        Tool::new(
            "explode",
            "Always fails, for the tests of failures.",
            schema_for_type::<Empty>(),
        ),
    ]
}

impl ServerHandler for Toolbox {
    fn get_info(&self) -> ServerConfig {
        let mut info = rmcp::model::Implementation::new("toolbox", "1.0.0");
        info.title = Some("Rust toolbox".into());
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(info)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(toolbox_tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let bad = |e: serde_json::Error| ErrorData::invalid_params(e.to_string(), None);
        let result = match request.name.as_ref() {
            "reverse" => {
                let a: ReverseArgs = serde_json::from_value(args).map_err(bad)?;
                CallToolResult::success(vec![ContentBlock::text(
                    a.text.chars().rev().collect::<String>(),
                )])
            }
            "add" => {
                let a: AddArgs = serde_json::from_value(args).map_err(bad)?;
                let mut r =
                    CallToolResult::success(vec![ContentBlock::text(format!("{}", a.a + a.b))]);
                r.structured_content = Some(json!({"sum": a.a + a.b}));
                r
            }
            "explode" => CallToolResult::error(vec![ContentBlock::text("kaboom")]),
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// Serves the toolbox over streamable HTTP on a loopback port; its URL.
async fn serve_toolbox() -> (String, tokio::task::JoinHandle<()>) {
    let service = StreamableHttpService::new(
        || Ok(Toolbox),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (format!("http://{addr}/mcp"), task)
}

/// `a2a serve --agent mcp --mcp-server SPEC` on a free port, killed on drop.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn mcp(spec: &str, env: &Env) -> Self {
        let mut child = Command::new(a2a())
            .args(["serve", "--agent", "mcp", "--mcp-server", spec])
            .args(["--port", "0", "--store", "memory"])
            .env("HOME", env.home())
            .current_dir(env.cwd())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a2a serve --agent mcp");
        let stdout = child.stdout.take().expect("its stdout");
        let mut reader = BufReader::new(stdout);
        let mut first = String::new();
        reader.read_line(&mut first).expect("read its first line");
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("no URL in {first:?}"))
            .to_owned();
        Self { child, url }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `a2a send -o json --transport BINDING ...`; the task.
fn send(env: &Env, url: &str, binding: &str, args: &[&str]) -> Value {
    let mut a = vec!["send", "-a", url, "--transport", binding, "-o", "json"];
    a.extend(args);
    let out = env.run(&a);
    out.expect(0);
    out.json()["task"].clone()
}

fn data_file(env: &Env, name: &str, v: Value) -> String {
    let p = env.cwd().join(name);
    std::fs::write(&p, v.to_string()).expect("write the data file");
    p.display().to_string()
}

fn state(t: &Value) -> &str {
    t["status"]["state"].as_str().unwrap_or_default()
}

fn artifact_text(t: &Value) -> String {
    t["artifacts"][0]["parts"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<String>()
        })
        .unwrap_or_default()
}

/// The checks over one MCP server with reverse / add tools.
fn tools_over_each_binding(env: &Env, url: &str, fails: Option<&str>) {
    // The card: a skill per tool, examples from the descriptions.
    let card = env.run(&["card", "get", "-a", url, "-o", "json"]).json();
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(
        skills.contains(&"reverse") && skills.contains(&"add"),
        "{skills:?}"
    );
    let reverse = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "reverse")
        .unwrap();
    assert_eq!(
        reverse["examples"][0],
        "Reverses the text, letter by letter"
    );
    let named = data_file(
        env,
        "named.json",
        json!({"tool": "reverse", "arguments": {"text": "hello"}}),
    );
    let partial = data_file(env, "numbers.json", json!({"a": 2, "b": 3}));
    for b in BINDINGS {
        // A tool named in a data part.
        let t = send(env, url, b, &["--data", &named]);
        assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{b}: {t:#}");
        assert_eq!(t["artifacts"][0]["name"], "reverse-result", "{b}");
        assert_eq!(artifact_text(&t), "olleh", "{b}: {t:#}");
        // In words: the tool whose description fits; its one text argument.
        let t = send(env, url, b, &["letter by letter, reverse: abc"]);
        assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{b}: {t:#}");
        assert_eq!(artifact_text(&t), "cba :esrever ,rettel yb rettel", "{b}");
        // Missing arguments: input-required, then answered.
        let t = send(env, url, b, &["add two numbers"]);
        assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED", "{b}: {t:#}");
        let question = t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            question.contains("add needs more input") && question.contains("- a"),
            "{question}"
        );
        let id = t["id"].as_str().unwrap().to_owned();
        let t = send(env, url, b, &["--task-id", &id, "--data", &partial]);
        assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{b}: {t:#}");
        assert_eq!(artifact_text(&t), "5", "{b}: {t:#}");
        // A tool error fails the task with its text.
        if let Some(tool) = fails {
            let f = data_file(env, "fail.json", json!({"tool": tool, "arguments": {}}));
            let t = send(env, url, b, &["--data", &f]);
            assert_eq!(state(&t), "TASK_STATE_FAILED", "{b}: {t:#}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_server_over_streamable_http_on_the_three_bindings() {
    let (mcp_url, task) = serve_toolbox().await;
    let env = Env::new();
    let served = Served::mcp(&mcp_url, &env);
    // The checks run the a2a binary: off the async workers.
    tokio::task::block_in_place(|| {
        tools_over_each_binding(&env, &served.url, Some("explode"));
        // A tool that does not exist is refused.
        let f = data_file(&env, "none.json", json!({"tool": "nope"}));
        let t = send(&env, &served.url, "JSONRPC", &["--data", &f]);
        assert_eq!(state(&t), "TASK_STATE_REJECTED", "{t:#}");
    });
    drop(served);
    task.abort();
}

/// `a2a mcp` is an MCP server too: behind the MCP agent, over stdio, its
/// tools (list_agents...) become skills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_mcp_over_stdio_behind_the_mcp_agent() {
    let env = Env::new();
    let echo = common::serve(agentwire_server::A2aServer::new(
        agentwire_agents::echo::card(),
        agentwire_agents::echo::EchoAgent,
    ))
    .await;
    let ledger = env.home().join("bridge.db");
    let spec = format!(
        "{} mcp -a echo=http://{} --ledger {}",
        a2a().display(),
        echo.local_addr(),
        ledger.display()
    );
    let served = Served::mcp(&spec, &env);
    let list = data_file(&env, "list.json", json!({"tool": "list_agents"}));
    let send_echo = data_file(
        &env,
        "send.json",
        json!({"tool": "send_message", "arguments": {"agent": "echo", "text": "hello through two bridges"}}),
    );
    tokio::task::block_in_place(|| {
        for b in BINDINGS {
            let t = send(&env, &served.url, b, &["--data", &list]);
            assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{b}: {t:#}");
            assert!(artifact_text(&t).contains("Echo Agent"), "{b}: {t:#}");
            let t = send(&env, &served.url, b, &["--data", &send_echo]);
            assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{b}: {t:#}");
            assert!(
                artifact_text(&t).contains("hello through two bridges"),
                "{b}: {t:#}"
            );
        }
    });
    drop(served);
}

#[test]
#[ignore = "needs the MCP Python SDK: set A2A_MCP_PYTHON (bash interop/mcp/run.sh)"]
fn a_python_sdk_server_over_stdio_on_the_three_bindings() {
    let py = match std::env::var("A2A_MCP_PYTHON") {
        Ok(v) if !v.trim().is_empty() => v,
        _ => panic!(
            "this test needs a Python with the MCP SDK (PyPI mcp): set A2A_MCP_PYTHON, or run `bash interop/mcp/run.sh`"
        ),
    };
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop/mcp/tools_server.py");
    let env = Env::new();
    let served = Served::mcp(&format!("{py} {}", script.display()), &env);
    tools_over_each_binding(&env, &served.url, None);
    // Two missing arguments: the question names both; a data part answers.
    let t = send(
        &env,
        &served.url,
        "JSONRPC",
        &["what is the weather in a city"],
    );
    assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED", "{t:#}");
    let id = t["id"].as_str().unwrap().to_owned();
    let f = data_file(&env, "w.json", json!({"city": "Lyon", "unit": "celsius"}));
    let t = send(&env, &served.url, "GRPC", &["--task-id", &id, "--data", &f]);
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{t:#}");
    assert!(artifact_text(&t).contains("Sunny in Lyon"), "{t:#}");
}
