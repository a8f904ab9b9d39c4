//! An agent backed by a language model: each message is sent to an
//! OpenAI-compatible chat completions endpoint (Ollama, llama.cpp's
//! `llama-server`, vLLM, hosted services) with `"stream": true`, and the
//! answer is streamed to the client as the chunks of one artifact
//! (`TaskUpdater::artifact_writer`) as the model writes it.
//!
//! - Configuration from the environment: `OPENAI_BASE_URL` (the API's base,
//!   `http://127.0.0.1:11434/v1` by default: Ollama's), `OPENAI_MODEL`
//!   (required), `OPENAI_API_KEY` (sent as a bearer token when set).
//! - Conversation: the messages of the task being continued and of the
//!   tasks named in `referenceTaskIds` (their artifacts as the model's
//!   answers) come before the new message.
//! - `CancelTask` stops the answer: the upstream request is dropped, which
//!   closes its connection, so the model server stops generating.
//! - Upstream failures fail the task with a status message saying what
//!   happened: the server cannot be reached, it answered an HTTP error
//!   (with the message of its error body), it sent a malformed chunk, or
//!   the connection was lost before the end of the answer.
//!
//! ```sh
//! OPENAI_MODEL=llama3.2:1b cargo run -p agentwire-server --example llm_chat -- 9000
//! a2a send -a 127.0.0.1:9000 --stream "Why is the sky blue?"
//! ```
//!
//! See "An agent backed by a language model" in `docs/llm-agent.md`.

use std::collections::VecDeque;
use std::time::Duration;

use agentwire_client::sse::SseParser;
use agentwire_server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{A2aResult, AgentCard, AgentSkill, Message, Role, Task};
use serde_json::{Value, json};

/// Ollama's OpenAI-compatible API on this machine.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434/v1";

/// How long the model server may stay silent (before its first chunk, or
/// between two) before the answer is given up.
pub const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// The largest event accepted from the model server, and the most bytes
/// of an error body read.
const MAX_EVENT_BYTES: usize = 1 << 20;
const MAX_ERROR_BODY: usize = 64 << 10;

/// Where the model is, and which one.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The API's base URL, without `/chat/completions`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
}

impl ModelConfig {
    /// From `OPENAI_BASE_URL`, `OPENAI_MODEL` and `OPENAI_API_KEY`.
    pub fn from_env() -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let model = var("OPENAI_MODEL").ok_or(
            "set OPENAI_MODEL to the model to use (e.g. OPENAI_MODEL=llama3.2:1b for Ollama)",
        )?;
        Ok(Self {
            base_url: var("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
            model,
            api_key: var("OPENAI_API_KEY"),
        })
    }

    /// The chat completions endpoint.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// The agent: one streamed answer per message.
pub struct ModelAgent {
    config: ModelConfig,
    http: reqwest::Client,
}

impl ModelAgent {
    pub fn new(config: ModelConfig) -> Result<Self, String> {
        // reqwest is built without a TLS provider of its own (for https
        // endpoints): the project uses ring's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(READ_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self { config, http })
    }
}

/// What became of one answer.
enum Outcome {
    Done,
    Canceled,
    Failed(String),
}

impl AgentExecutor for ModelAgent {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        let mut answer = task
            .artifact_writer("answer")
            .with_metadata("model", Value::String(self.config.model.clone()));
        let outcome = tokio::select! {
            outcome = self.answer(&ctx, &mut answer) => outcome?,
            // Canceled: the request (and its connection) is dropped with
            // the `answer` future; the runtime records the cancellation.
            () = ctx.canceled() => Outcome::Canceled,
        };
        match outcome {
            Outcome::Done => {
                answer.close().await?;
                task.complete().await
            }
            Outcome::Canceled => Ok(()),
            Outcome::Failed(why) => {
                if answer.chunks() > 0 {
                    answer.close().await?;
                }
                task.fail(why).await
            }
        }
    }
}

impl ModelAgent {
    /// Streams the model's answer into `answer`.
    async fn answer(
        &self,
        ctx: &RequestContext,
        answer: &mut agentwire_server::ArtifactWriter,
    ) -> A2aResult<Outcome> {
        let endpoint = self.config.endpoint();
        let body = json!({
            "model": self.config.model,
            "messages": chat_messages(ctx),
            "stream": true,
        });
        let mut request = self
            .http
            .post(&endpoint)
            .header("accept", "text/event-stream")
            .json(&body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                return Ok(Outcome::Failed(format!(
                    "the model server at {endpoint} could not be reached: {}",
                    error_chain(&e)
                )));
            }
        };
        let status = response.status();
        if !status.is_success() {
            let message = error_body_message(&mut response).await;
            return Ok(Outcome::Failed(format!(
                "the model server answered {status}: {message}"
            )));
        }
        let mut parser = SseParser::new(MAX_EVENT_BYTES);
        let mut events = VecDeque::new();
        let mut finished = false;
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => {
                    return Ok(Outcome::Failed(format!(
                        "the connection to the model server was lost during the answer: {}",
                        error_chain(&e)
                    )));
                }
            };
            if let Err(e) = parser.push(&chunk, &mut events) {
                return Ok(Outcome::Failed(format!(
                    "the model server sent a malformed stream: {e}"
                )));
            }
            while let Some(event) = events.pop_front() {
                match read_event(&event.data) {
                    Ok(Event::Done) => return Ok(Outcome::Done),
                    Ok(Event::Delta { text, last }) => {
                        finished |= last;
                        answer.write_text(text).await?;
                    }
                    Err(why) => return Ok(Outcome::Failed(why)),
                }
            }
        }
        // Some servers end the stream after the last choice without
        // `[DONE]`: an answer that said it finished is complete.
        Ok(if finished {
            Outcome::Done
        } else {
            Outcome::Failed(
                "the model server closed the stream before the end of the answer (no [DONE])"
                    .to_owned(),
            )
        })
    }
}

/// One event of the stream.
enum Event {
    /// More of the answer (maybe empty), and whether the model said it
    /// finished (`finish_reason`).
    Delta { text: String, last: bool },
    /// `[DONE]`: the end of the stream.
    Done,
}

/// Reads a `data:` payload: `[DONE]`, a chunk
/// `{"choices": [{"delta": {"content": "..."}, "finish_reason": ...}]}`,
/// or an error reported in the stream (`{"error": {"message": ...}}`).
fn read_event(data: &str) -> Result<Event, String> {
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(Event::Done);
    }
    let chunk: Value = serde_json::from_str(data).map_err(|e| {
        format!(
            "the model server sent a malformed chunk ({e}): {}",
            shorten(data)
        )
    })?;
    if let Some(error) = chunk.get("error") {
        return Err(format!(
            "the model server reported an error during the answer: {}",
            error_message(error).unwrap_or_else(|| shorten(&error.to_string()))
        ));
    }
    let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
        return Err(format!(
            "the model server sent a chunk without choices: {}",
            shorten(data)
        ));
    };
    // A chunk without choices is allowed (usage statistics at the end).
    let Some(choice) = choices.first() else {
        return Ok(Event::Delta {
            text: String::new(),
            last: false,
        });
    };
    let text = match choice.pointer("/delta/content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(format!(
                "the model server sent a chunk whose delta.content is not text: {}",
                shorten(&other.to_string())
            ));
        }
    };
    let last = choice.get("finish_reason").is_some_and(|r| !r.is_null());
    Ok(Event::Delta { text, last })
}

/// The conversation as chat messages: the tasks referenced by the message
/// (each one's messages, then its artifacts as the model's answer), the
/// task it continues (the same), then the message itself.
pub fn chat_messages(ctx: &RequestContext) -> Vec<Value> {
    let mut out = Vec::new();
    for task in ctx.reference_tasks.iter().chain(ctx.task.as_deref()) {
        add_task(&mut out, task);
    }
    add_message(&mut out, &ctx.message);
    out
}

fn add_task(out: &mut Vec<Value>, task: &Task) {
    for m in &task.history {
        add_message(out, m);
    }
    let answer: String = task.artifacts.iter().map(|a| a.text_content()).collect();
    if !answer.is_empty() {
        out.push(json!({"role": "assistant", "content": answer}));
    }
}

fn add_message(out: &mut Vec<Value>, m: &Message) {
    let text = m.text();
    if text.is_empty() {
        return;
    }
    let role = if m.role == Role::Agent as i32 {
        "assistant"
    } else {
        "user"
    };
    out.push(json!({"role": role, "content": text}));
}

/// What an error body says: `{"error": {"message": ...}}` (OpenAI, vLLM,
/// llama.cpp), `{"error": "..."}` (Ollama), `{"message": ...}`, else the
/// body's first bytes.
async fn error_body_message(response: &mut reqwest::Response) -> String {
    let mut body = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), response.chunk()).await {
            Ok(Ok(Some(chunk))) if body.len() < MAX_ERROR_BODY => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    let text = String::from_utf8_lossy(&body);
    let parsed: Option<Value> = serde_json::from_str(&text).ok();
    parsed
        .as_ref()
        .and_then(|v| {
            v.get("error")
                .and_then(error_message)
                .or_else(|| error_message(v))
        })
        .unwrap_or_else(|| {
            let text = text.trim();
            if text.is_empty() {
                "(no error message)".to_owned()
            } else {
                shorten(text)
            }
        })
}

/// The message of an error value: a string, or an object's `message`.
fn error_message(error: &Value) -> Option<String> {
    match error {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("message")?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// An error with its causes ("error sending request: ...: Connection
/// refused").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        source = s.source();
    }
    out
}

/// At most 200 characters of `s`.
fn shorten(s: &str) -> String {
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

/// The agent with its card (streaming declared), ready to bind.
pub fn server(config: ModelConfig) -> Result<A2aServer, String> {
    let card = AgentCard::new(
        "Model",
        format!("Answers with the language model {}", config.model),
        "1.0.0",
    )
    .with_output_modes(["text/plain"])
    .with_skill(
        AgentSkill::new(
            "chat",
            "Chat",
            "Answers a message; continue a conversation with referenceTaskIds",
            ["chat", "llm"],
        )
        .with_example("Why is the sky blue?"),
    );
    Ok(A2aServer::new(card, ModelAgent::new(config)?))
}

#[tokio::main]
async fn main() -> Result<(), agentwire_server::StartError> {
    let config = ModelConfig::from_env().map_err(std::io::Error::other)?;
    let endpoint = config.endpoint();
    // The port first (the first argument, 8080 without one), then the
    // address: it is printed only once it is ours.
    let bound = server(config)
        .map_err(std::io::Error::other)?
        .bind_local(8080)
        .await?;
    println!(
        "Model agent on {} (model server: {endpoint}; Ctrl-C stops it)",
        bound.base_url()
    );
    Ok(bound.run_until(agentwire_server::shutdown_signal()).await?)
}
