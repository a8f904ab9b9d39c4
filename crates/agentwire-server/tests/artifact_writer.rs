//! `TaskUpdater::artifact_writer` end to end: an agent streams one artifact
//! in 100 chunks to a streaming client on each binding (JSON-RPC,
//! HTTP+JSON, gRPC); the client assembles the chunks into what was
//! written, and `GetTask` afterwards shows one artifact with all the text.

#[macro_use]
mod common;

use agentwire_client::Binding;
use agentwire_server::{AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::stream_response::Payload;
use agentwire_types::{A2aResult, AgentCard, Message, Part, TaskState};
use common::*;

over_all_bindings!(a_hundred_chunks_assemble_into_one_artifact);

const CHUNKS: usize = 100;

/// Writes the chunks "chunk 0\n" .. "chunk 99\n" (every tenth one also
/// with a data part), then closes the artifact.
struct Hundred;

impl AgentExecutor for Hundred {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        let mut w = task
            .artifact_writer("numbers.txt")
            .with_description("a hundred lines")
            .with_metadata("lines", serde_json::json!(CHUNKS));
        for i in 0..CHUNKS {
            let mut parts = vec![Part::text(line(i))];
            if i % 10 == 0 {
                parts.push(Part::data(serde_json::json!({ "at": i })));
            }
            w.write(parts).await?;
        }
        w.close().await?;
        task.complete().await
    }
}

fn line(i: usize) -> String {
    format!("chunk {i}\n")
}

fn all_text() -> String {
    (0..CHUNKS).map(line).collect()
}

async fn a_hundred_chunks_assemble_into_one_artifact(b: Binding) {
    let server = start(AgentCard::new("Hundred", "chunks", "1.0.0"), Hundred).await;
    let c = client(&server, b).await;
    let stream = within(format!("[{b}] stream"), c.stream(Message::user_text("go")))
        .await
        .unwrap_or_else(|e| panic!("[{b}] stream: {e}"));
    let events = collect(b, "the stream", stream).await;

    let mut id = None;
    let mut assembled = String::new();
    let mut data = 0;
    let mut updates = Vec::new();
    for ev in &events {
        match &ev.payload {
            Some(Payload::Task(t)) => id = Some(t.id.clone()),
            Some(Payload::ArtifactUpdate(u)) => {
                let a = u.artifact.as_ref().expect("an artifact");
                assembled.push_str(&a.text_content());
                data += a.parts.iter().filter(|p| p.as_data().is_some()).count();
                updates.push((a.artifact_id.clone(), u.append, u.last_chunk));
                if !u.append {
                    assert_eq!(a.name, "numbers.txt", "[{b}]");
                    assert_eq!(a.description, "a hundred lines", "[{b}]");
                    assert!(a.metadata.is_some(), "[{b}] metadata on the first chunk");
                }
            }
            _ => {}
        }
    }
    // 100 chunks and the closing one, all of one artifact: the first
    // starts it, the others append, only the last says so.
    assert_eq!(updates.len(), CHUNKS + 1, "[{b}] {updates:?}");
    let artifact_id = &updates[0].0;
    assert!(updates.iter().all(|(a, ..)| a == artifact_id), "[{b}]");
    assert!(!updates[0].1, "[{b}] the first chunk does not append");
    assert!(updates[1..].iter().all(|u| u.1), "[{b}] the others append");
    let lasts: Vec<usize> = (0..updates.len()).filter(|&i| updates[i].2).collect();
    assert_eq!(lasts, [CHUNKS], "[{b}] only the closing chunk is the last");
    assert_eq!(assembled, all_text(), "[{b}]");
    assert_eq!(data, CHUNKS / 10, "[{b}]");
    assert_eq!(
        events.last().and_then(|e| e.state()),
        Some(TaskState::Completed),
        "[{b}]"
    );

    let id = id.unwrap_or_else(|| panic!("[{b}] the stream opened with the task"));
    let task = get_task(&c, b, &id).await;
    assert_eq!(task.state(), TaskState::Completed, "[{b}]");
    assert_eq!(task.artifacts.len(), 1, "[{b}] {:?}", task.artifacts);
    let artifact = &task.artifacts[0];
    assert_eq!(&artifact.artifact_id, artifact_id, "[{b}]");
    assert_eq!(artifact.name, "numbers.txt", "[{b}]");
    assert_eq!(artifact.text_content(), all_text(), "[{b}]");
}
