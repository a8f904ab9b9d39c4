//! The limits applied while a request is read (`agentwire_types::limits`,
//! docs/operations.md), against `a2a serve --agent echo --store memory`
//! on loopback, on every binding and both protocol versions: metadata and
//! data nested past the limit are refused with the binding's
//! invalid-params error naming the field (content at the limit is
//! accepted and read back), and requests of hundreds of thousands of parts
//! are refused without the server's memory growing.

mod common;

use std::time::Duration;

use agentwire_types::proto::a2a_service_client::A2aServiceClient;
use agentwire_types::{Message, Part, SendMessageRequest};
use common::{Env, Serving};
use prost::Message as _;
use serde_json::{Value, json};

fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!({ "a": v });
    }
    v
}

fn client() -> reqwest::Client {
    agentwire_client::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("a client")
}

async fn post(base: &str, path: &str, v1: bool, body: String) -> (u16, Value) {
    let mut req = client()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body);
    if v1 {
        req = req.header("A2A-Version", "1.0");
    }
    let res = req.send().await.expect("an answer");
    let status = res.status().as_u16();
    let text = res.text().await.expect("a body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn get_rest(base: &str, path: &str) -> Value {
    let res = client()
        .get(format!("{base}{path}"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .expect("an answer");
    res.json().await.expect("JSON")
}

fn rpc_body(method: &str, params: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

/// A 1.0 message (as JSON) with `depth`-deep content at `place`.
fn message_v1(place: &str, depth: usize, id: &str) -> Value {
    let mut m = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    match place {
        "metadata" => m["metadata"] = nested(depth),
        "part metadata" => m["parts"][0]["metadata"] = nested(depth),
        _ => m["parts"] = json!([{"text": "hi"}, {"data": nested(depth)}]),
    }
    m
}

fn message_v03(place: &str, depth: usize, id: &str) -> Value {
    let mut m = json!({"kind": "message", "messageId": id, "role": "user",
        "parts": [{"kind": "text", "text": "hi"}]});
    match place {
        "metadata" => m["metadata"] = nested(depth),
        "part metadata" => m["parts"][0]["metadata"] = nested(depth),
        _ => {
            m["parts"] =
                json!([{"kind": "text", "text": "hi"}, {"kind": "data", "data": nested(depth)}])
        }
    }
    m
}

fn grpc_request(place: &str, depth: usize, id: &str) -> SendMessageRequest {
    let m: Message =
        serde_json::from_value(message_v1(place, depth.min(30), id)).expect("a message");
    let mut m = m;
    // Built past the JSON reader's limit by hand.
    let deep =
        agentwire_types::json::to_struct(nested(depth).as_object().cloned().unwrap_or_default());
    match place {
        "metadata" => m.metadata = Some(deep),
        "part metadata" => m.parts[0].metadata = Some(deep),
        _ => {
            m.parts[1] = Part::data(nested(depth));
        }
    }
    SendMessageRequest {
        message: Some(m),
        ..Default::default()
    }
}

async fn grpc(base: &str) -> A2aServiceClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(base.to_owned())
        .expect("an endpoint")
        .connect()
        .await
        .expect("a gRPC connection");
    A2aServiceClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

fn v1<T>(message: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut()
        .insert("a2a-version", "1.0".parse().expect("a value"));
    r
}

const PLACES: [&str; 3] = ["metadata", "part metadata", "data part"];

fn field_of(place: &str) -> &'static str {
    match place {
        "metadata" => "message.metadata",
        "part metadata" => "message.parts[0].metadata",
        _ => "message.parts[1].data",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_nested_past_the_limit_is_refused_on_every_binding() {
    let env = Env::new();
    let server = Serving::start(&env, &["--agent", "echo"]);
    let base = server.base();
    let mut g = grpc(&base).await;
    for place in PLACES {
        // 120 levels: under serde_json's own limit (128), over ours (30).
        let (_, v) = post(
            &base,
            "/",
            true,
            rpc_body(
                "SendMessage",
                &json!({"message": message_v1(place, 120, "m")}),
            ),
        )
        .await;
        assert_eq!(v["error"]["code"], -32602, "JSON-RPC {place}: {v}");
        let text = v["error"]["message"].as_str().unwrap_or_default();
        assert!(text.contains("30 levels"), "JSON-RPC {place}: {v}");
        // The field is named, in the message and in the field violation.
        let named = format!("Invalid parameters: {}", field_of(place));
        assert!(text.starts_with(&named), "JSON-RPC {place}: {v}");
        let violation = v["error"]["data"][1]["fieldViolations"][0]["field"]
            .as_str()
            .unwrap_or_default();
        assert!(
            violation.starts_with(field_of(place)),
            "JSON-RPC {place}: {v}"
        );

        let (status, v) = post(
            &base,
            "/message:send",
            true,
            json!({"message": message_v1(place, 120, "m")}).to_string(),
        )
        .await;
        assert_eq!(status, 400, "REST {place}: {v}");
        assert_eq!(
            v["error"]["status"], "INVALID_ARGUMENT",
            "REST {place}: {v}"
        );
        let text = v["error"]["message"].as_str().unwrap_or_default();
        assert!(text.starts_with(&named), "REST {place}: {v}");

        // 0.3: past serde_json's own limit too (its 0.3 parts were read
        // through a buffer that stopped there with another error), the
        // nesting limit's error, naming the field.
        for depth in [120, 200] {
            let (_, v) = post(
                &base,
                "/",
                false,
                rpc_body(
                    "message/send",
                    &json!({"message": message_v03(place, depth, "m")}),
                ),
            )
            .await;
            assert_eq!(v["error"]["code"], -32602, "0.3 JSON-RPC {place}: {v}");
            let text = v["error"]["message"].as_str().unwrap_or_default();
            assert!(
                text.starts_with(&named) && text.contains("30 levels"),
                "0.3 JSON-RPC {place} {depth}: {v}"
            );
        }

        let (status, v) = post(
            &base,
            "/v1/message:send",
            false,
            json!({"message": {
            "messageId": "m", "role": "ROLE_USER", "content": [{"text": "hi"}],
            "metadata": nested(120)}})
            .to_string(),
        )
        .await;
        // (0.3's HTTP+JSON status for invalid parameters.)
        assert_eq!(status, 422, "0.3 REST: {v}");
        let text = v["message"].as_str().unwrap_or_default();
        assert!(
            text.starts_with("Invalid parameters: message.metadata"),
            "0.3 REST: {v}"
        );

        let e = g
            .send_message(v1(grpc_request(place, 40, "m")))
            .await
            .expect_err("refused");
        assert_eq!(
            e.code(),
            tonic::Code::InvalidArgument,
            "gRPC {place}: {e:?}"
        );
        assert!(e.message().contains(field_of(place)), "gRPC {place}: {e:?}");
        assert!(e.message().contains("30 levels"), "gRPC {place}: {e:?}");
    }
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_at_the_limit_is_accepted_and_read_back() {
    let env = Env::new();
    let server = Serving::start(&env, &["--agent", "echo"]);
    let base = server.base();
    let mut g = grpc(&base).await;
    for (i, place) in PLACES.iter().enumerate() {
        let sent = message_v1(place, 30, &format!("m{i}"));
        let (_, v) = post(
            &base,
            "/",
            true,
            rpc_body("SendMessage", &json!({"message": sent})),
        )
        .await;
        let id = v["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{place}: {v}"));
        for (_, get) in [
            post(&base, "/", true, rpc_body("GetTask", &json!({"id": id}))).await,
            (0, get_rest(&base, &format!("/tasks/{id}")).await),
        ] {
            let task = if get.get("result").is_some() {
                &get["result"]
            } else {
                &get
            };
            let history = task["history"]
                .as_array()
                .unwrap_or_else(|| panic!("{get}"));
            let mut got = history[0].clone();
            got.as_object_mut()
                .map(|o| o.remove("contextId").and(o.remove("taskId")));
            if let Some(o) = got.as_object_mut() {
                o.remove("contextId");
                o.remove("taskId");
            }
            assert_eq!(got, sent, "{place}");
        }
        let task = g
            .get_task(v1(agentwire_types::GetTaskRequest {
                id: id.to_owned(),
                ..Default::default()
            }))
            .await
            .expect("read back over gRPC")
            .into_inner();
        assert!(task.history[0].encoded_len() > 0);
        let (_, v) = post(&base, "/", false, rpc_body("tasks/get", &json!({"id": id}))).await;
        assert!(v["result"]["id"].is_string(), "0.3 {place}: {v}");
    }
    drop(server);
}

fn rss_mb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_thousands_of_parts_are_refused_without_memory() {
    if !std::path::Path::new("/proc/self/status").exists() {
        return; // RSS is read from /proc
    }
    let env = Env::new();
    let server = Serving::start(&env, &["--agent", "echo"]);
    let base = server.base();
    let pid = server.child.id();
    let parts = vec![r#"{"text":"x"}"#; 700_000].join(",");
    let message = format!(r#"{{"messageId":"m","role":"ROLE_USER","parts":[{parts}]}}"#);
    let rpc = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{message}}}}}"#
    );
    let rest = format!(r#"{{"message":{message}}}"#);
    let parts03 = vec![r#"{"kind":"text","text":"x"}"#; 350_000].join(",");
    let rpc03 = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"message":{{"kind":"message","messageId":"m","role":"user","parts":[{parts03}]}}}}}}"#
    );
    let grpc_req = SendMessageRequest {
        message: Some(Message::new(
            agentwire_types::Role::User,
            vec![Part::text("x"); 700_000],
        )),
        ..Default::default()
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_mb(pid);
    for _ in 0..4 {
        let (_, v) = post(&base, "/", true, rpc.clone()).await;
        assert_eq!(
            v["error"]["code"],
            -32602,
            "{}",
            &v.to_string()[..200.min(v.to_string().len())]
        );
        let (status, _) = post(&base, "/message:send", true, rest.clone()).await;
        assert_eq!(status, 400);
        let (_, v) = post(&base, "/", false, rpc03.clone()).await;
        assert_eq!(v["error"]["code"], -32602);
        // (A fresh connection: the server closes one idle for long.)
        let e = grpc(&base)
            .await
            .send_message(v1(grpc_req.clone()))
            .await
            .expect_err("refused");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("at most 1000 parts"), "{e:?}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_mb(pid);
    assert!(
        after < before + 50,
        "the server's RSS grew from {before} MB to {after} MB over 16 refused requests"
    );
    drop(server);
}
