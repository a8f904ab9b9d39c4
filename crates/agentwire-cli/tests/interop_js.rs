//! Interop: our client (the `a2a` command, hence `agentwire-client`) against
//! the official JavaScript SDK's servers (npm `@a2a-js/sdk`):
//!
//! - the 1.x server (`interop/js/v1/reference_server.mjs`, protocol 1.0),
//!   named by `A2A_INTEROP_JS_URL`, over JSON-RPC, HTTP+JSON and gRPC;
//! - the 0.3 server (`interop/js/v03/reference_server.mjs`, protocol 0.3),
//!   named by `A2A_INTEROP_JS_V03_URL`, with `--allow-v03`, over JSON-RPC,
//!   HTTP+JSON and gRPC.
//!
//! Both servers implement the conformance behaviour keyed on the messageId
//! prefix. `bash interop/js/client_interop.sh` starts them and runs these
//! tests (CI does). Without the variables each test says it is skipped and
//! passes, so `cargo test` stays green on a machine without node.

mod common;

use common::Env;
use common::interop::{card, every_flow, id};

const V1_BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];
const V03_BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];

/// The server's URL from `var`, or `None` after saying the test is skipped.
fn target(var: &str, test: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            eprintln!(
                "skipped {test}: it needs the JavaScript SDK's server; set {var} to its URL, \
                 or run `bash interop/js/client_interop.sh`, which starts the servers and runs these tests"
            );
            None
        }
    }
}

// ------------------------------------------------------------ 1.x server

#[test]
fn js_v1_server_card() {
    let Some(url) = target("A2A_INTEROP_JS_URL", "js_v1_server_card") else {
        return;
    };
    card(&Env::new(), &url, false, &V1_BINDINGS);
}

#[test]
fn js_v1_server_over_jsonrpc() {
    let Some(url) = target("A2A_INTEROP_JS_URL", "js_v1_server_over_jsonrpc") else {
        return;
    };
    every_flow(&Env::new(), &url, "JSONRPC", false);
}

#[test]
fn js_v1_server_over_http_json() {
    let Some(url) = target("A2A_INTEROP_JS_URL", "js_v1_server_over_http_json") else {
        return;
    };
    every_flow(&Env::new(), &url, "HTTP+JSON", false);
}

#[test]
fn js_v1_server_over_grpc() {
    let Some(url) = target("A2A_INTEROP_JS_URL", "js_v1_server_over_grpc") else {
        return;
    };
    every_flow(&Env::new(), &url, "GRPC", false);
}

// ------------------------------------------------------------ 0.3 server

#[test]
fn js_v03_server_card() {
    let Some(url) = target("A2A_INTEROP_JS_V03_URL", "js_v03_server_card") else {
        return;
    };
    card(&Env::new(), &url, true, &V1_BINDINGS);
}

#[test]
fn js_v03_server_is_refused_without_allow_v03() {
    let Some(url) = target(
        "A2A_INTEROP_JS_V03_URL",
        "js_v03_server_is_refused_without_allow_v03",
    ) else {
        return;
    };
    let env = Env::new();
    let out = env.run(&[
        "send",
        "-a",
        &url,
        "-o",
        "json",
        "--message-id",
        &id("tck-complete-task"),
        "x",
    ]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        format!("{}{}", out.stdout, out.stderr).contains("--allow-v03"),
        "the refusal names --allow-v03: {} {}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn js_v03_server_over_jsonrpc() {
    let Some(url) = target("A2A_INTEROP_JS_V03_URL", "js_v03_server_over_jsonrpc") else {
        return;
    };
    every_flow(&Env::new(), &url, V03_BINDINGS[0], true);
}

#[test]
fn js_v03_server_over_http_json() {
    let Some(url) = target("A2A_INTEROP_JS_V03_URL", "js_v03_server_over_http_json") else {
        return;
    };
    every_flow(&Env::new(), &url, V03_BINDINGS[1], true);
}

#[test]
fn js_v03_server_over_grpc() {
    let Some(url) = target("A2A_INTEROP_JS_V03_URL", "js_v03_server_over_grpc") else {
        return;
    };
    every_flow(&Env::new(), &url, V03_BINDINGS[2], true);
}
