//! The model-backed example (`examples/llm_chat.rs`) against a local
//! OpenAI-compatible server replaying recorded streams: no model server
//! could be installed here (see `docs/llm-agent.md`), so the upstream is a
//! small HTTP/1.1 server on 127.0.0.1 written below, answering
//! `POST /v1/chat/completions` with chunks in the wire format of the chat
//! completions API (`data: {...}` events with `choices[0].delta.content`,
//! then `data: [DONE]`), sent with chunked transfer encoding.
//!
//! Covered: a normal stream (assembled into one artifact; the request's
//! model, messages, `stream: true` and bearer key), a conversation
//! continued with `referenceTaskIds`, a cancel mid-stream (the upstream
//! connection is closed), HTTP 401 and 500 with their error bodies, a
//! malformed chunk, a server that goes away mid-stream, and one that does
//! not listen at all.

#[allow(unused_macros)]
mod common;

#[allow(dead_code)]
#[path = "../examples/llm_chat.rs"]
mod llm_chat;

use std::time::Duration;

use agentwire_client::Client;
use agentwire_server::ServerHandle;
use agentwire_types::stream_response::Payload;
use agentwire_types::{Message, Task, TaskState};
use common::{WAIT, within};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

// ----- the recorded upstream -------------------------------------------------

/// One recorded chunk of a chat completions stream.
fn delta(content: &str) -> String {
    json!({
        "id": "chatcmpl-rec1",
        "object": "chat.completion.chunk",
        "created": 1_760_000_000,
        "model": "tiny",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]
    })
    .to_string()
}

/// The recorded answer: a role chunk, five content chunks, the finishing
/// chunk, `[DONE]`.
fn recorded() -> Vec<String> {
    let mut out = vec![
        json!({
            "id": "chatcmpl-rec1", "object": "chat.completion.chunk", "created": 1_760_000_000,
            "model": "tiny",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                         "finish_reason": null}]
        })
        .to_string(),
    ];
    for piece in [
        "The sky",
        " is blue",
        " because",
        " of Rayleigh",
        " scattering.",
    ] {
        out.push(delta(piece));
    }
    out.push(
        json!({
            "id": "chatcmpl-rec1", "object": "chat.completion.chunk", "created": 1_760_000_000,
            "model": "tiny",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]
        })
        .to_string(),
    );
    out.push("[DONE]".to_owned());
    out
}

const ANSWER: &str = "The sky is blue because of Rayleigh scattering.";

/// What the upstream does with a request.
#[derive(Clone)]
enum Script {
    /// 200 and these `data:` payloads, then the end of the body.
    Stream(Vec<String>),
    /// 200 and these payloads, then nothing: it waits for the client to
    /// close the connection and reports whether it did (on `closed`).
    Hang(Vec<String>),
    /// 200 and these payloads, then the connection is dropped without the
    /// end of the chunked body.
    Vanish(Vec<String>),
    /// This status and JSON body.
    Status(u16, &'static str),
}

struct Upstream {
    base_url: String,
    /// Each request: its head (lowercase) and its JSON body.
    requests: mpsc::UnboundedReceiver<(String, Value)>,
    /// For `Script::Hang`: whether the client closed the connection.
    closed: mpsc::UnboundedReceiver<bool>,
}

async fn upstream(script: Script) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (req_tx, requests) = mpsc::unbounded_channel();
    let (closed_tx, closed) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        // A bounded number of connections: the tests make one or two.
        for _ in 0..8 {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let script = script.clone();
            let req_tx = req_tx.clone();
            let closed_tx = closed_tx.clone();
            tokio::spawn(async move {
                let _ = serve_one(socket, script, req_tx, closed_tx).await;
            });
        }
    });
    Upstream {
        base_url: format!("http://{addr}/v1"),
        requests,
        closed,
    }
}

async fn serve_one(
    mut socket: TcpStream,
    script: Script,
    req_tx: mpsc::UnboundedSender<(String, Value)>,
    closed_tx: mpsc::UnboundedSender<bool>,
) -> std::io::Result<()> {
    // The request: head, then a Content-Length body.
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        assert!(buf.len() < 1 << 20, "a request head over 1 MiB");
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: Value =
        serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null);
    assert!(
        head.starts_with("post /v1/chat/completions "),
        "unexpected request: {head}"
    );
    let _ = req_tx.send((head, body));

    let (events, end) = match script {
        Script::Status(status, body) => {
            let reason = if status == 401 {
                "Unauthorized"
            } else {
                "Error"
            };
            let response = format!(
                "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(response.as_bytes()).await?;
            return socket.shutdown().await;
        }
        Script::Stream(e) => (e, 0),
        Script::Hang(e) => (e, 1),
        Script::Vanish(e) => (e, 2),
    };
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
              transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n",
        )
        .await?;
    for data in events {
        let event = format!("data: {data}\n\n");
        socket
            .write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())
            .await?;
        socket.flush().await?;
        // As a model writes: a little at a time.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    match end {
        0 => {
            socket.write_all(b"0\r\n\r\n").await?;
            socket.shutdown().await
        }
        1 => {
            // Wait (boundedly) for the client to close the connection.
            let mut rest = [0u8; 1024];
            let closed = tokio::time::timeout(WAIT, async {
                loop {
                    match socket.read(&mut rest).await {
                        Ok(0) | Err(_) => return true,
                        Ok(_) => {}
                    }
                }
            })
            .await
            .unwrap_or(false);
            let _ = closed_tx.send(closed);
            Ok(())
        }
        _ => Ok(()),
    }
}

// ----- the agent and its client --------------------------------------------

fn config(base_url: &str, key: Option<&str>) -> llm_chat::ModelConfig {
    llm_chat::ModelConfig {
        base_url: base_url.to_owned(),
        model: "tiny".to_owned(),
        api_key: key.map(str::to_owned),
    }
}

async fn agent(base_url: &str, key: Option<&str>) -> (ServerHandle, Client) {
    let server = llm_chat::server(config(base_url, key)).expect("the agent");
    let handle = common::start_server(server).await;
    let client = within("connect", Client::connect(&handle.base_url()))
        .await
        .expect("connect");
    (handle, client)
}

/// Streams `message`: the task id, the text of the artifact chunks, and
/// the task as `GetTask` shows it once the stream ended.
async fn ask(client: &Client, message: Message) -> (String, String, Task) {
    let stream = within("stream", client.stream(message))
        .await
        .expect("stream");
    let events: Vec<_> = within("the stream's end", stream.collect::<Vec<_>>()).await;
    let mut id = None;
    let mut text = String::new();
    for ev in events {
        match ev.expect("an event").payload {
            Some(Payload::Task(t)) => id = Some(t.id),
            Some(Payload::ArtifactUpdate(u)) => {
                text.push_str(&u.artifact.expect("artifact").text_content());
            }
            _ => {}
        }
    }
    let id = id.expect("the stream opened with the task");
    let task = within("get", client.get_task(&id)).await.expect("get");
    (id, text, task)
}

fn status_text(task: &Task) -> String {
    task.status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .map(Message::text)
        .unwrap_or_default()
}

fn failed_with(task: &Task, pieces: &[&str]) {
    assert_eq!(task.state(), TaskState::Failed, "{task:?}");
    let why = status_text(task);
    eprintln!("failed: {why}");
    for piece in pieces {
        assert!(why.contains(piece), "{piece:?} not in {why:?}");
    }
}

// ----- the tests -------------------------------------------------------------

#[tokio::test]
async fn the_answer_streams_into_one_artifact() {
    let mut up = upstream(Script::Stream(recorded())).await;
    let (_agent, client) = agent(&up.base_url, Some("sk-test")).await;
    let (_, streamed, task) = ask(&client, Message::user_text("Why is the sky blue?")).await;
    assert_eq!(streamed, ANSWER);
    assert_eq!(task.state(), TaskState::Completed, "{task:?}");
    assert_eq!(task.artifacts.len(), 1);
    assert_eq!(task.artifacts[0].name, "answer");
    assert_eq!(task.artifacts[0].text_content(), ANSWER);

    let (head, body) = up.requests.recv().await.expect("a request");
    assert!(head.contains("authorization: bearer sk-test"), "{head}");
    assert_eq!(body["model"], "tiny");
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Why is the sky blue?"}])
    );
}

#[tokio::test]
async fn a_referenced_task_is_the_conversation_so_far() {
    let mut up = upstream(Script::Stream(recorded())).await;
    let (_agent, client) = agent(&up.base_url, None).await;
    let (first, _, task) = ask(&client, Message::user_text("Why is the sky blue?")).await;
    let _ = up.requests.recv().await.expect("the first request");
    let mut follow_up = Message::user_text("And at sunset?").with_context_id(&task.context_id);
    follow_up.reference_task_ids = vec![first];
    let (_, _, again) = ask(&client, follow_up).await;
    assert_eq!(again.state(), TaskState::Completed);
    let (head, body) = up.requests.recv().await.expect("the second request");
    assert!(
        !head.contains("authorization:"),
        "no key, no header: {head}"
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "Why is the sky blue?"},
            {"role": "assistant", "content": ANSWER},
            {"role": "user", "content": "And at sunset?"},
        ])
    );
}

#[tokio::test]
async fn a_cancel_closes_the_upstream_connection() {
    // Two chunks, then the upstream "thinks" until the client goes.
    let events = vec![delta("Once upon"), delta(" a time")];
    let mut up = upstream(Script::Hang(events)).await;
    let (_agent, client) = agent(&up.base_url, None).await;
    let mut stream = within("stream", client.stream(Message::user_text("a long story")))
        .await
        .expect("stream");
    let mut id = None;
    let mut text = String::new();
    while text != "Once upon a time" {
        let ev = within("an event", stream.next())
            .await
            .expect("more events")
            .expect("an event");
        match ev.payload {
            Some(Payload::Task(t)) => id = Some(t.id),
            Some(Payload::ArtifactUpdate(u)) => text.push_str(&u.artifact.unwrap().text_content()),
            _ => {}
        }
    }
    let id = id.expect("a task");
    let canceled = within("cancel", client.cancel_task(&id))
        .await
        .expect("cancel");
    assert_eq!(canceled.state(), TaskState::Canceled);
    let closed = within("the upstream's report", up.closed.recv())
        .await
        .expect("a report");
    assert!(
        closed,
        "the upstream connection stayed open after the cancel"
    );
    let task = within("get", client.get_task(&id)).await.expect("get");
    assert_eq!(task.state(), TaskState::Canceled);
    assert_eq!(task.artifacts[0].text_content(), "Once upon a time");
}

#[tokio::test]
async fn an_unauthorized_upstream_fails_the_task_with_its_message() {
    let body = r#"{"error":{"message":"Incorrect API key provided: sk-wrong.","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    let up = upstream(Script::Status(401, body)).await;
    let (_agent, client) = agent(&up.base_url, Some("sk-wrong")).await;
    let (_, text, task) = ask(&client, Message::user_text("hi")).await;
    assert_eq!(text, "");
    failed_with(&task, &["401", "Incorrect API key provided: sk-wrong."]);
    assert!(task.artifacts.is_empty());
}

#[tokio::test]
async fn an_upstream_error_fails_the_task_with_its_message() {
    // Ollama's form: the error is a string.
    let up = upstream(Script::Status(
        500,
        r#"{"error":"model \"tiny\" not found"}"#,
    ))
    .await;
    let (_agent, client) = agent(&up.base_url, None).await;
    let (_, _, task) = ask(&client, Message::user_text("hi")).await;
    failed_with(&task, &["500", "model \"tiny\" not found"]);
}

#[tokio::test]
async fn a_malformed_chunk_fails_the_task_keeping_what_came_before() {
    let events = vec![delta("Half an"), r#"{"choices": [{"delta": "#.to_owned()];
    let up = upstream(Script::Stream(events)).await;
    let (_agent, client) = agent(&up.base_url, None).await;
    let (_, text, task) = ask(&client, Message::user_text("hi")).await;
    assert_eq!(text, "Half an");
    failed_with(&task, &["malformed chunk", r#"{"choices": [{"delta":"#]);
    assert_eq!(task.artifacts[0].text_content(), "Half an");
}

#[tokio::test]
async fn an_upstream_gone_mid_stream_fails_the_task() {
    let up = upstream(Script::Vanish(vec![delta("Half an")])).await;
    let (_agent, client) = agent(&up.base_url, None).await;
    let (_, text, task) = ask(&client, Message::user_text("hi")).await;
    assert_eq!(text, "Half an");
    failed_with(&task, &["lost during the answer"]);
}

#[tokio::test]
async fn an_upstream_not_listening_fails_the_task() {
    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let (_agent, client) = agent(&base, None).await;
    let (_, _, task) = ask(&client, Message::user_text("hi")).await;
    failed_with(
        &task,
        &[
            &format!("the model server at {base}/chat/completions could not be reached"),
            "refused",
        ],
    );
}

#[test]
fn the_configuration_comes_from_the_environment_names() {
    let c = config("http://127.0.0.1:11434/v1/", None);
    assert_eq!(c.endpoint(), "http://127.0.0.1:11434/v1/chat/completions");
    assert_eq!(llm_chat::DEFAULT_BASE_URL, "http://127.0.0.1:11434/v1");
}
