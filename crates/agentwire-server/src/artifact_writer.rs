//! Writing one artifact in chunks ([`ArtifactWriter`]): open it, write
//! its parts as they come, close it with the last chunk.
//!
//! Each chunk is a `TaskArtifactUpdateEvent` (spec: "Streaming" and the
//! event's `append` / `lastChunk` fields,
//! https://a2a-protocol.org/latest/specification/): the first one carries
//! the artifact's id, name, description and metadata with `append: false`
//! (it starts, or replaces, the artifact with that id); the next ones carry
//! the same id and name with `append: true` (their parts are added to the
//! artifact); the one written by [`ArtifactWriter::finish`] or
//! [`ArtifactWriter::close`] has `lastChunk: true`. The stored task holds
//! one artifact whose parts are every chunk's parts, in order.
//!
//! Backpressure: before each chunk the writer waits while a stream
//! following the task on this server has half of its queue unread (see
//! `docs/streaming.md`), so a slow reader slows the writer instead of
//! falling behind; one that reads nothing for
//! [`ArtifactWriter::with_max_wait`] (10 s by default) is no longer waited
//! for. On a store that queues chunks (SQLite), the writer also waits for
//! the store.

use std::time::Duration;

use agentwire_types::{A2aError, A2aResult, Artifact, Part, new_id};

use crate::executor::TaskUpdater;
use crate::store::TaskUpdate;

/// How long a write waits for a stream's reader that takes nothing, by
/// default.
pub const DEFAULT_WRITER_MAX_WAIT: Duration = Duration::from_secs(10);

/// Writes one artifact of a task chunk by chunk (see
/// [`TaskUpdater::artifact_writer`]).
///
/// ```
/// use agentwire_server::{AgentExecutor, RequestContext, TaskUpdater};
/// use agentwire_types::A2aResult;
///
/// struct Words;
///
/// impl AgentExecutor for Words {
///     async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
///         task.start_work().await?;
///         let mut answer = task.artifact_writer("answer");
///         for word in ctx.text().split_inclusive(' ') {
///             answer.write_text(word).await?;
///         }
///         answer.close().await?;
///         task.complete().await
///     }
/// }
/// ```
///
/// Each write first waits while a stream following the task on this
/// server has half of its queue unread (a slow reader slows the writer
/// down); a reader that takes nothing for
/// [`with_max_wait`](Self::with_max_wait) is no longer waited for.
///
/// A writer dropped without [`close`](Self::close) or
/// [`finish`](Self::finish) (an error, a canceled task) cannot send its
/// last chunk (that needs an `await`): what it wrote stays in the task,
/// the streams never see `lastChunk: true` for it (they end with the
/// task's final status), and a warning is logged when the task was still
/// open.
#[derive(Debug)]
pub struct ArtifactWriter {
    updater: TaskUpdater,
    /// The artifact's id, name, description, metadata and extensions
    /// (no parts): sent whole with the first chunk.
    head: Artifact,
    /// Chunks written so far.
    chunks: u64,
    closed: bool,
    max_wait: Duration,
}

impl TaskUpdater {
    /// A writer for a new artifact named `name` (with a fresh id), written
    /// chunk by chunk: see [`ArtifactWriter`]. Nothing is sent until the
    /// first write.
    pub fn artifact_writer(&self, name: impl Into<String>) -> ArtifactWriter {
        ArtifactWriter {
            updater: self.clone(),
            head: Artifact {
                artifact_id: new_id(),
                name: name.into(),
                ..Default::default()
            },
            chunks: 0,
            closed: false,
            max_wait: DEFAULT_WRITER_MAX_WAIT,
        }
    }
}

impl ArtifactWriter {
    /// Sets the artifact's id (before the first write; an existing
    /// artifact with this id is replaced by the first chunk).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.head.artifact_id = id.into();
        self
    }

    /// Sets the artifact's description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.head.description = description.into();
        self
    }

    /// Adds one metadata entry to the artifact (sent with the first chunk).
    pub fn with_metadata(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.head = std::mem::take(&mut self.head).with_metadata(key, value);
        self
    }

    /// Names an extension the artifact carries content of.
    pub fn with_extension(mut self, uri: impl Into<String>) -> Self {
        self.head.extensions.push(uri.into());
        self
    }

    /// How long one write waits for a stream's reader that takes nothing
    /// before going on without it ([`DEFAULT_WRITER_MAX_WAIT`] by default).
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The artifact's id.
    pub fn artifact_id(&self) -> &str {
        &self.head.artifact_id
    }

    /// How many chunks were written.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// Writes one chunk of `parts` (at least one). Resolves once the chunk
    /// is stored and published, after waiting for slow readers (see
    /// [`ArtifactWriter`]).
    pub async fn write(&mut self, parts: Vec<Part>) -> A2aResult<()> {
        self.send(parts, false).await
    }

    /// Writes a chunk of one text part; an empty `text` writes nothing.
    pub async fn write_text(&mut self, text: impl Into<String>) -> A2aResult<()> {
        let text = text.into();
        if text.is_empty() {
            return Ok(());
        }
        self.send(vec![Part::text(text)], false).await
    }

    /// Writes a chunk of one data part (a JSON value).
    pub async fn write_data(&mut self, value: serde_json::Value) -> A2aResult<()> {
        self.send(vec![Part::data(value)], false).await
    }

    /// Writes the last chunk, `parts` (at least one), with `lastChunk:
    /// true`.
    pub async fn finish(mut self, parts: Vec<Part>) -> A2aResult<()> {
        self.send(parts, true).await
    }

    /// Closes the artifact after the chunks written: a last chunk of one
    /// empty text part with `lastChunk: true` (an artifact chunk needs a
    /// part; an empty text adds nothing to the artifact's text). Use
    /// [`finish`](Self::finish) when the last content is at hand.
    pub async fn close(mut self) -> A2aResult<()> {
        self.send(vec![Part::text("")], true).await
    }

    async fn send(&mut self, parts: Vec<Part>, last_chunk: bool) -> A2aResult<()> {
        if self.closed {
            return Err(A2aError::internal(format!(
                "artifact {} was closed",
                self.head.artifact_id
            )));
        }
        if parts.is_empty() {
            return Err(A2aError::internal(
                "an artifact chunk needs at least one part",
            ));
        }
        if last_chunk {
            // Whatever happens to it, nothing more is written.
            self.closed = true;
        }
        let updater = &self.updater;
        updater
            .manager
            .room_for_chunk(&updater.live, self.max_wait)
            .await;
        let append = self.chunks > 0;
        let artifact = if append {
            Artifact {
                artifact_id: self.head.artifact_id.clone(),
                name: self.head.name.clone(),
                parts,
                ..Default::default()
            }
        } else {
            Artifact {
                parts,
                ..self.head.clone()
            }
        };
        let update = TaskUpdate::Artifact {
            artifact,
            append,
            last_chunk,
            metadata: None,
        };
        updater.update(update).await?;
        self.chunks += 1;
        Ok(())
    }
}

impl Drop for ArtifactWriter {
    fn drop(&mut self) {
        if self.closed || self.chunks == 0 {
            return;
        }
        if self.updater.is_canceled() {
            tracing::debug!(
                task = %self.updater.task_id(),
                artifact = %self.head.artifact_id,
                "an artifact writer of a canceled task was dropped before its last chunk"
            );
        } else {
            tracing::warn!(
                task = %self.updater.task_id(),
                artifact = %self.head.artifact_id,
                chunks = self.chunks,
                "an artifact writer was dropped without close(): the artifact keeps what was \
                 written, without a last chunk"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use agentwire_types::{
        AgentCard, Message, SendMessageRequest, StreamResponse, SubscribeToTaskRequest, TaskState,
        stream_response::Payload,
    };
    use futures::StreamExt;

    use super::*;
    use crate::executor::RequestContext;
    use crate::handler::{CallContext, HandlerConfig, RequestHandler};

    /// Writes `chunks` chunks ("0 ", "1 "...), counting them as they are
    /// written, then closes the artifact and completes. With
    /// `wait_for_go`, it first waits for input (so a subscriber can join
    /// before it writes).
    struct Counter {
        chunks: u64,
        written: Arc<AtomicU64>,
        max_wait: Duration,
    }

    impl crate::AgentExecutor for Counter {
        async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
            if ctx.task.is_none() {
                return task.require_input("go?").await;
            }
            task.start_work().await?;
            let mut w = task
                .artifact_writer("count")
                .with_description("numbers")
                .with_metadata("unit", serde_json::json!("none"))
                .with_max_wait(self.max_wait);
            for i in 0..self.chunks {
                w.write_text(format!("{i} ")).await?;
                self.written.store(i + 1, Ordering::SeqCst);
            }
            w.close().await?;
            task.complete().await
        }
    }

    fn handler(chunks: u64, max_wait: Duration) -> (RequestHandler, Arc<AtomicU64>) {
        let written = Arc::new(AtomicU64::new(0));
        let h = RequestHandler::builder(
            AgentCard::default().with_streaming(true),
            Counter {
                chunks,
                written: Arc::clone(&written),
                max_wait,
            },
        )
        .config(HandlerConfig {
            queue_capacity: 8,
            ..Default::default()
        })
        .build();
        (h, written)
    }

    fn send(text: &str, task_id: &str) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(Message::user_text(text).with_task_id(task_id)),
            ..Default::default()
        }
    }

    fn expected(chunks: u64) -> String {
        (0..chunks).map(|i| format!("{i} ")).collect()
    }

    /// Starts a task waiting for input, subscribes to it (the snapshot
    /// read), and tells it to go, without waiting for it.
    async fn started(
        h: &RequestHandler,
    ) -> (
        String,
        crate::handler::IdEventStream,
        tokio::task::JoinHandle<()>,
    ) {
        let ctx = CallContext::v1();
        let first = h.send_message(&ctx, send("start", "")).await.unwrap();
        let id = first.task().unwrap().id.clone();
        let sub = SubscribeToTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        let mut stream = h.subscribe_to_task_with_ids(&ctx, sub).await.unwrap();
        assert!(stream.next().await.unwrap().1.is_ok());
        let h2 = h.clone();
        let id2 = id.clone();
        let go = tokio::spawn(async move {
            h2.send_message(&CallContext::v1(), send("go", &id2))
                .await
                .unwrap();
        });
        (id, stream, go)
    }

    #[tokio::test]
    async fn a_slow_reader_holds_the_writer_back_and_gets_every_chunk() {
        let (h, written) = handler(40, Duration::from_secs(30));
        let (id, mut stream, go) = started(&h).await;
        // Nobody reads: the writer stops once half the queue (4 of 8
        // events) is unread.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let stalled_at = written.load(Ordering::SeqCst);
        assert!(stalled_at < 8, "the writer went on: {stalled_at} chunks");
        // Reading lets it go on; every chunk arrives, in order, with no
        // snapshot in between (the reader never fell behind).
        let mut text = String::new();
        let mut firsts = 0;
        let mut lasts = 0;
        let mut ended = false;
        while let Ok(Some((_, ev))) =
            tokio::time::timeout(Duration::from_secs(10), stream.next()).await
        {
            match ev.unwrap() {
                StreamResponse {
                    payload: Some(Payload::ArtifactUpdate(u)),
                } => {
                    let a = u.artifact.unwrap();
                    assert_eq!(a.name, "count");
                    if !u.append {
                        firsts += 1;
                        assert_eq!(a.description, "numbers");
                        assert!(a.metadata.is_some());
                    }
                    lasts += usize::from(u.last_chunk);
                    text.push_str(&a.text_content());
                }
                StreamResponse {
                    payload: Some(Payload::StatusUpdate(s)),
                } => {
                    if s.status.unwrap().state().is_terminal() {
                        ended = true;
                        break;
                    }
                }
                other => panic!("unexpected event (a resynchronisation?): {other:?}"),
            }
        }
        assert!(ended);
        assert_eq!((firsts, lasts), (1, 1));
        assert_eq!(text, expected(40));
        go.await.unwrap();
        let task = h
            .get_task(
                &CallContext::v1(),
                agentwire_types::GetTaskRequest {
                    id,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(task.state(), TaskState::Completed);
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].text_content(), expected(40));
        // 40 chunks and the closing one.
        assert_eq!(task.artifacts[0].parts.len(), 41);
    }

    #[tokio::test]
    async fn a_reader_that_reads_nothing_is_given_up_on() {
        let (h, written) = handler(40, Duration::from_millis(200));
        let (_id, stream, go) = started(&h).await;
        // Nobody reads: the writer waits 200 ms, then goes on without
        // the reader (which falls behind and is resynchronised).
        tokio::time::timeout(Duration::from_secs(10), go)
            .await
            .expect("the writer finished")
            .unwrap();
        assert_eq!(written.load(Ordering::SeqCst), 40);
        drop(stream);
    }

    #[tokio::test]
    async fn writes_after_close_and_empty_chunks_are_refused() {
        struct Misuse;
        impl crate::AgentExecutor for Misuse {
            async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
                let mut w = task.artifact_writer("a");
                assert!(w.write(Vec::new()).await.is_err());
                assert_eq!(w.chunks(), 0);
                // Empty text is skipped.
                w.write_text("").await?;
                assert_eq!(w.chunks(), 0);
                w.write_data(serde_json::json!({"n": 1})).await?;
                w.finish(vec![Part::text("end")]).await?;
                task.complete().await
            }
        }
        let h = RequestHandler::builder(AgentCard::default(), Misuse).build();
        let res = h
            .send_message(&CallContext::v1(), send("x", ""))
            .await
            .unwrap();
        let task = res.task().unwrap();
        assert_eq!(task.state(), TaskState::Completed, "{task:?}");
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].parts.len(), 2);
        assert_eq!(task.artifacts[0].text_content(), "end");
    }
}
