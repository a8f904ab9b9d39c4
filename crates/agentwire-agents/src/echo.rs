//! The echo agent: the smallest useful agent, and the one the `a2a`
//! command's examples talk to.
//!
//! What it does depends on the message:
//!
//! - **Text** (the usual case, and what the benchmark sends): a task whose
//!   one artifact, `echo`, repeats the text; streamed word by word as
//!   chunks (`append`, `lastChunk`) when the client streams. With
//!   `metadata: {"chunkIntervalMs": N}` in the message, a stream pauses N
//!   milliseconds (at most 1000) before each chunk after the first: a
//!   stream slow enough to watch, or to interrupt half-way.
//! - **`slow [SECONDS]` or `long job [SECONDS]`** (the first words of the
//!   text, any case): a long job. It works for SECONDS seconds (10 by
//!   default, at most 600), sends a progress status every second, stops at
//!   once when the task is canceled, and otherwise completes with a
//!   `result` artifact. Something for `a2a send --async`, `task get
//!   --wait`, `task list --status working`, `task subscribe` and `task
//!   cancel` to act on.
//! - **File and data parts** (a file inline or by URL, JSON data): the text
//!   is echoed as usual, a `parts` artifact describes every part received
//!   (kind, file name, media type, size; a URL is not fetched), and the
//!   data parts come back unchanged in a `data` artifact.

use std::time::Duration;

use agentwire_server::{A2aResult, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{AgentCard, AgentSkill, Artifact, Message, Part, new_id};
use futures::FutureExt as _;
use futures::future::{BoxFuture, Either};
use serde_json::{Value, json};

/// The echo agent (see the [module documentation](self) for what it does
/// with each kind of message).
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoAgent;

/// How long a long job works when the message does not say.
pub const LONG_JOB: Duration = Duration::from_secs(10);

/// The longest long job.
pub const LONGEST_JOB: Duration = Duration::from_secs(600);

/// The words that start a long job (compared ignoring ASCII case).
const LONG_JOB_WORDS: [&str; 2] = ["slow", "long job"];

/// What a message asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Request {
    /// Text only: echo it.
    Echo,
    /// A long job of this duration.
    LongJob(Duration),
    /// Files or data among the parts.
    Parts,
}

impl Request {
    /// Looks at the first part's first words and at the kinds of the parts;
    /// a plain text message costs a prefix comparison and one pass over its
    /// (usually one) parts.
    fn of(message: &Message) -> Self {
        let first = message.parts.first().and_then(Part::as_text);
        if let Some(rest) = first.and_then(long_job_rest) {
            return Request::LongJob(long_job_duration(rest));
        }
        if message.parts.iter().all(|p| p.as_text().is_some()) {
            Request::Echo
        } else {
            Request::Parts
        }
    }
}

/// The text after a long job's keyword, if `text` starts with one (as a
/// whole word).
fn long_job_rest(text: &str) -> Option<&str> {
    let text = text.trim_start();
    LONG_JOB_WORDS.iter().find_map(|word| {
        let head = text.get(..word.len())?;
        let rest = &text[word.len()..];
        let whole_word = rest.chars().next().is_none_or(|c| !c.is_alphanumeric());
        (head.eq_ignore_ascii_case(word) && whole_word).then_some(rest)
    })
}

/// The duration a long job asks for: the number of seconds after the
/// keyword (`slow 30`, `long job 2.5`), [`LONG_JOB`] without one, at most
/// [`LONGEST_JOB`].
fn long_job_duration(rest: &str) -> Duration {
    rest.split_whitespace()
        .next()
        .and_then(|n| n.parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .map_or(LONG_JOB, |d| d.min(LONGEST_JOB))
}

impl AgentExecutor for EchoAgent {
    // Not an `async fn`, and the rare requests boxed: keeps the common
    // echo future small (docs/performance.md, "The agent's future").
    fn execute(
        &self,
        ctx: RequestContext,
        task: TaskUpdater,
    ) -> impl Future<Output = A2aResult<()>> + Send {
        match Request::of(&ctx.message) {
            Request::Echo => {
                let pace = if ctx.streaming {
                    chunk_interval(&ctx.message)
                } else {
                    None
                };
                Either::Left(echo(ctx.text(), ctx.streaming, pace, task))
            }
            Request::LongJob(duration) => Either::Right(long_job(ctx, task, duration).boxed()),
            Request::Parts => Either::Right(parts(ctx, task).boxed()),
        }
    }
}

/// The longest pause between two chunks (`chunkIntervalMs`).
const LONGEST_CHUNK_INTERVAL: Duration = Duration::from_secs(1);

/// The pause between chunks a message asks for (`chunkIntervalMs` in its
/// metadata), at most [`LONGEST_CHUNK_INTERVAL`]; `None` without one.
fn chunk_interval(message: &Message) -> Option<Duration> {
    // Most messages have no metadata: no lookup.
    message.metadata.as_ref()?;
    let ms = message.metadata_value("chunkIntervalMs")?.as_u64()?;
    Some(Duration::from_millis(ms).min(LONGEST_CHUNK_INTERVAL))
}

/// The text back as one artifact (word chunks when streaming, `pace`
/// apart).
#[allow(clippy::manual_async_fn)]
fn echo(
    text: String,
    streaming: bool,
    pace: Option<Duration>,
    task: TaskUpdater,
) -> impl Future<Output = A2aResult<()>> + Send {
    async move {
        task.start_work().await?;
        let words: Vec<&str> = text.split_inclusive(' ').collect();
        if streaming && words.len() > 1 {
            let id = new_id();
            for (i, word) in words.iter().enumerate() {
                if let Some(pace) = pace.filter(|_| i > 0) {
                    tokio::time::sleep(pace).await;
                }
                let chunk = Artifact::text("echo", *word).with_id(&id);
                task.artifact_chunk(chunk, i > 0, i + 1 == words.len())
                    .await?;
            }
        } else {
            task.add_artifact(Artifact::text("echo", text)).await?;
        }
        task.complete().await
    }
}

/// Works for `duration` in steps of a second, a progress status at the
/// start of each; returns as soon as the task is canceled (the runtime
/// records the cancellation).
fn long_job(
    ctx: RequestContext,
    task: TaskUpdater,
    duration: Duration,
) -> BoxFuture<'static, A2aResult<()>> {
    async move {
        let steps = duration.as_secs().max(1);
        let step = duration.div_f64(steps as f64);
        task.start_work().await?;
        for i in 1..=steps {
            if ctx.is_canceled() {
                return Ok(());
            }
            task.progress(format!("step {i} of {steps}")).await?;
            tokio::select! {
                () = tokio::time::sleep(step) => {}
                () = ctx.canceled() => return Ok(()),
            }
        }
        let summary = format!(
            "done after {} in {steps} step{}: {}",
            seconds(duration),
            if steps == 1 { "" } else { "s" },
            ctx.text()
        );
        task.add_artifact(Artifact::text("result", summary)).await?;
        task.complete().await
    }
    .boxed()
}

/// `2.5 s`, `10 s`.
fn seconds(d: Duration) -> String {
    format!("{} s", (d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// Echoes the text, describes every part, and returns the data parts.
fn parts(ctx: RequestContext, task: TaskUpdater) -> BoxFuture<'static, A2aResult<()>> {
    async move {
        task.start_work().await?;
        let text = ctx.text();
        if !text.is_empty() {
            task.add_artifact(Artifact::text("echo", text)).await?;
        }
        let parts = &ctx.message.parts;
        let described: Vec<Value> = parts.iter().map(describe).collect();
        let received = Artifact::new("parts", vec![Part::data(Value::Array(described))])
            .with_description("Each part of the message: kind, file name, media type, size");
        task.add_artifact(received).await?;
        let data: Vec<Part> = parts
            .iter()
            .filter(|p| p.as_data().is_some())
            .cloned()
            .collect();
        if !data.is_empty() {
            let echoed = Artifact::new("data", data)
                .with_description("The data parts of the message, unchanged");
            task.add_artifact(echoed).await?;
        }
        task.complete().await
    }
    .boxed()
}

/// One part as JSON: `kind` (`text`, `file` or `data`), the file name and
/// media type when given, `size` in bytes (of the text, the inline file or
/// the data's JSON), `url` for a file sent by reference (not fetched).
fn describe(part: &Part) -> Value {
    let mut d = serde_json::Map::new();
    let (kind, size) = if let Some(text) = part.as_text() {
        ("text", Some(text.len()))
    } else if let Some(bytes) = part.as_raw() {
        ("file", Some(bytes.len()))
    } else if let Some(url) = part.as_url() {
        d.insert("url".into(), json!(url));
        ("file", None)
    } else if let Some(data) = part.as_data() {
        ("data", Some(data.to_string().len()))
    } else {
        ("empty", None)
    };
    d.insert("kind".into(), json!(kind));
    if !part.filename.is_empty() {
        d.insert("filename".into(), json!(part.filename));
    }
    if let Some(media_type) = part.effective_media_type() {
        d.insert("mediaType".into(), json!(media_type));
    }
    if let Some(size) = size {
        d.insert("size".into(), json!(size));
    }
    Value::Object(d)
}

/// The echo agent's card: streaming, any input media type (files are
/// described, not read), and its three skills.
pub fn card() -> AgentCard {
    AgentCard::new(
        "Echo Agent",
        "Repeats the text it is sent as an artifact; also runs cancelable long jobs and describes the files and data it receives.",
        env!("CARGO_PKG_VERSION"),
    )
    .with_streaming(true)
    .with_input_modes(["text/plain", "application/json", "*/*"])
    .with_output_modes(["text/plain", "application/json"])
    .with_skill(
        AgentSkill::new(
            "echo",
            "Echo",
            "Returns the text of the message as an artifact (word by word when streaming)",
            ["echo", "test"],
        )
        .with_example("hello world")
        .with_example("stream these words"),
    )
    .with_skill(
        AgentSkill::new(
            "long-job",
            "Long job",
            "A message starting with `slow` or `long job` works for a while (10 seconds, or the number of seconds after the keyword, at most 600), reporting progress every second; it can be canceled, followed and listed while it works",
            ["long-running", "progress", "cancel", "test"],
        )
        .with_example("long job")
        .with_example("slow 30"),
    )
    .with_skill(
        AgentSkill::new(
            "parts",
            "Describe parts",
            "Files (inline or by URL) and data parts are acknowledged: an artifact describes each part (kind, file name, media type, size; URLs are not fetched) and the data parts are returned unchanged",
            ["files", "data", "test"],
        )
        .with_input_modes(["*/*"])
        .with_output_modes(["application/json"])
        .with_example("summarise (with a file and JSON data attached)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_server::{CallContext, RequestHandler};
    use agentwire_types::{
        CancelTaskRequest, GetTaskRequest, SendMessageConfiguration, SendMessageRequest, TaskState,
    };
    use futures::StreamExt;

    fn send(text: &str) -> SendMessageRequest {
        send_message(Message::user_text(text))
    }

    fn send_message(message: Message) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(message),
            ..Default::default()
        }
    }

    #[test]
    fn requests_are_told_apart() {
        let of = |text: &str| Request::of(&Message::user_text(text));
        assert_eq!(of("hello there"), Request::Echo);
        assert_eq!(of("slowly does it"), Request::Echo);
        assert_eq!(of("long jobs"), Request::Echo);
        assert_eq!(of(""), Request::Echo);
        assert_eq!(of("slow"), Request::LongJob(LONG_JOB));
        assert_eq!(of("Long Job"), Request::LongJob(LONG_JOB));
        assert_eq!(of("long job: the report"), Request::LongJob(LONG_JOB));
        assert_eq!(
            of("slow 2.5"),
            Request::LongJob(Duration::from_millis(2500))
        );
        assert_eq!(of("slow -3"), Request::LongJob(LONG_JOB));
        assert_eq!(of("slow 99999"), Request::LongJob(LONGEST_JOB));
        // A multi-byte first character is not a keyword, and no panic.
        assert_eq!(of("éslow"), Request::Echo);
        let with_file =
            Message::user_text("look").with_part(Part::file(&b"abc"[..], "a.bin", "x/y"));
        assert_eq!(Request::of(&with_file), Request::Parts);
        let data_only = Message::new(
            agentwire_types::Role::User,
            vec![Part::data(json!({"k": 1}))],
        );
        assert_eq!(Request::of(&data_only), Request::Parts);
    }

    #[tokio::test]
    async fn echoes_as_one_artifact() {
        let h = RequestHandler::builder(card(), EchoAgent).build();
        let r = h
            .send_message(&CallContext::v1(), send("hello there"))
            .await
            .unwrap();
        let task = r.task().unwrap();
        assert_eq!(task.state(), TaskState::Completed);
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].text_content(), "hello there");
    }

    #[tokio::test]
    async fn streams_word_chunks_that_merge() {
        let h = RequestHandler::builder(card(), EchoAgent).build();
        let words: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
        let text = words.join(" ");
        let events: Vec<_> = h
            .send_streaming_message(&CallContext::v1(), send(&text))
            .await
            .unwrap()
            .collect()
            .await;
        // Task, working, 100 chunks, completed.
        assert_eq!(events.len(), 103);
        let id = events[0].as_ref().unwrap().task_id().unwrap().to_owned();
        let task = h
            .get_task(
                &CallContext::v1(),
                GetTaskRequest {
                    id,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].text_content(), text);
    }

    #[tokio::test]
    async fn describes_files_and_returns_data() {
        let h = RequestHandler::builder(card(), EchoAgent).build();
        let message = Message::user_text("summarise")
            .with_part(Part::file(vec![7u8; 3000], "report.pdf", "application/pdf"))
            .with_part(
                Part::url("https://example.com/big.csv")
                    .with_filename("big.csv")
                    .with_media_type("text/csv"),
            )
            .with_part(Part::data(json!({"pages": 3})));
        let r = h
            .send_message(&CallContext::v1(), send_message(message))
            .await
            .unwrap();
        let task = r.task().unwrap();
        assert_eq!(task.state(), TaskState::Completed);
        let names: Vec<&str> = task.artifacts.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["echo", "parts", "data"]);
        assert_eq!(task.artifacts[0].text_content(), "summarise");
        let described = task.artifacts[1].parts[0].as_data().unwrap();
        assert_eq!(
            described,
            json!([
                {"kind": "text", "mediaType": "text/plain", "size": 9},
                {"kind": "file", "filename": "report.pdf", "mediaType": "application/pdf", "size": 3000},
                {"kind": "file", "filename": "big.csv", "mediaType": "text/csv", "url": "https://example.com/big.csv"},
                {"kind": "data", "mediaType": "application/json", "size": 11},
            ])
        );
        assert_eq!(
            task.artifacts[2].parts[0].as_data().unwrap(),
            json!({"pages": 3})
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_job_reports_progress_then_completes() {
        let h = RequestHandler::builder(card(), EchoAgent).build();
        let events: Vec<_> = h
            .send_streaming_message(&CallContext::v1(), send("slow 3 the report"))
            .await
            .unwrap()
            .map(|e| e.unwrap())
            .collect()
            .await;
        let progress = events
            .iter()
            .filter_map(|e| match &e.payload {
                Some(agentwire_types::stream_response::Payload::StatusUpdate(u)) => {
                    u.status.as_ref()?.message.as_ref().map(|m| m.text())
                }
                _ => None,
            })
            .filter(|t| t.starts_with("step "))
            .count();
        assert_eq!(progress, 3);
        let id = events[0].task_id().unwrap().to_owned();
        let task = h
            .get_task(
                &CallContext::v1(),
                GetTaskRequest {
                    id,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(task.state(), TaskState::Completed);
        assert_eq!(
            task.artifacts[0].text_content(),
            "done after 3 s in 3 steps: slow 3 the report"
        );
    }

    #[tokio::test]
    async fn a_long_job_stops_when_canceled() {
        let h = RequestHandler::builder(card(), EchoAgent).build();
        let r = h
            .send_message(
                &CallContext::v1(),
                SendMessageRequest {
                    configuration: Some(SendMessageConfiguration {
                        return_immediately: true,
                        ..Default::default()
                    }),
                    ..send("long job 600")
                },
            )
            .await
            .unwrap();
        let id = r.task().unwrap().id.clone();
        let canceled = h
            .cancel_task(
                &CallContext::v1(),
                CancelTaskRequest {
                    id: id.clone(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(canceled.state(), TaskState::Canceled);
        assert!(canceled.artifacts.is_empty());
    }
}
