//! Crash recovery with the SQLite store: tasks in flight when the server
//! process is killed with SIGKILL are all found after a restart, and none is
//! left working (each is failed with a message saying why); interrupted and
//! finished tasks keep their state.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentwire_client::{JsonRpcTransport, Transport};
use agentwire_types::{
    GetTaskRequest, Message, SendMessageConfiguration, SendMessageRequest, TaskState,
};

const IN_FLIGHT: usize = 12;

/// Starts `a2a serve` on a free port with the given store; returns the
/// process and its base URL (read from its first line of output).
fn serve(db: &std::path::Path) -> (Child, String) {
    serve_agent(
        db,
        &[
            "--agent",
            "conformance",
            "--tck-streaming-timeout-ms",
            "600000",
        ],
    )
}

/// Starts `a2a serve ARGS` on a free port with the given store (see
/// [`serve`]).
fn serve_agent(db: &std::path::Path, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .arg("serve")
        .args(args)
        .args(["--port", "0", "--store"])
        .arg(format!("sqlite:{}", db.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a2a serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .expect("read the server's first line");
    // Keep reading (and discarding) what the server prints.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    (child, url)
}

fn send(id: &str, immediate: bool) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message::user_text("crash test").with_message_id(id)),
        configuration: Some(SendMessageConfiguration {
            return_immediately: immediate,
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn task_ids(rpc: &JsonRpcTransport, prefix: &str, n: usize, immediate: bool) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let r = rpc
            .send_message(
                send(&format!("{prefix}-{i}"), immediate),
                &Default::default(),
            )
            .await
            .expect("send");
        ids.push(r.task().expect("a task").id.clone());
    }
    ids
}

#[tokio::test]
async fn killed_server_restarts_with_every_task_and_none_working() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("tasks.db");

    let (mut first, url) = serve(&db);
    let rpc = JsonRpcTransport::new(format!("{url}/")).expect("transport");
    let result = tokio::time::timeout(Duration::from_secs(30), async {
        let working = task_ids(&rpc, "test-resubscribe-message-id", IN_FLIGHT, true).await;
        let waiting = task_ids(&rpc, "tck-input-required", 2, false).await;
        let done = task_ids(&rpc, "tck-complete-task", 2, false).await;
        // Every in-flight task has been accepted and is being worked on.
        for id in &working {
            let t = rpc
                .get_task(
                    GetTaskRequest {
                        id: id.clone(),
                        ..Default::default()
                    },
                    &Default::default(),
                )
                .await
                .expect("get");
            assert!(
                matches!(t.state(), TaskState::Submitted | TaskState::Working),
                "{id} is {:?} before the kill",
                t.state()
            );
        }
        (working, waiting, done)
    })
    .await;
    // SIGKILL: no chance to clean up.
    first.kill().expect("kill -9");
    let _ = first.wait();
    let (working, waiting, done) = result.expect("setup timed out");

    let (mut second, url) = serve(&db);
    let rpc = JsonRpcTransport::new(format!("{url}/")).expect("transport");
    let checked = tokio::time::timeout(Duration::from_secs(30), async {
        let rpc = &rpc;
        let get = |id: String| async move {
            rpc.get_task(
                GetTaskRequest {
                    id,
                    ..Default::default()
                },
                &Default::default(),
            )
            .await
            .expect("every accepted task is found after the restart")
        };
        for id in working {
            let t = get(id.clone()).await;
            assert_eq!(t.state(), TaskState::Failed, "{id} was in flight");
            let why = t
                .status
                .as_ref()
                .and_then(|s| s.message.as_deref())
                .map(Message::text)
                .unwrap_or_default();
            assert!(why.contains("restarted"), "{id}: status message {why:?}");
        }
        for id in waiting {
            assert_eq!(get(id).await.state(), TaskState::InputRequired);
        }
        for id in done {
            assert_eq!(get(id).await.state(), TaskState::Completed);
        }
    })
    .await;
    second.kill().ok();
    let _ = second.wait();
    checked.expect("checks timed out");
}

/// Clients sending at once while the server is killed: how many.
const BURST_CLIENTS: usize = 24;
/// Acknowledged tasks to wait for before the kill (the burst goes on).
const BURST_ACKED: usize = 60;

/// Group commit under SIGKILL: many clients send at once (tasks that stay
/// at work and tasks that complete in their request), the server is killed
/// in the middle of the burst, and after the restart every task the server
/// acknowledged is there: none left submitted or working, and every one
/// acknowledged as completed still completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_burst_keeps_every_acknowledged_task() {
    use std::sync::{Arc, Mutex};

    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("tasks.db");

    let (mut first, url) = serve(&db);
    let acked: Arc<Mutex<Vec<(String, TaskState)>>> = Arc::default();
    let mut clients = Vec::new();
    for c in 0..BURST_CLIENTS {
        let rpc = JsonRpcTransport::new(format!("{url}/")).expect("transport");
        let acked = Arc::clone(&acked);
        clients.push(tokio::spawn(async move {
            for i in 0.. {
                // Half the tasks stay at work (answered at once), half
                // complete inside their request.
                let (prefix, immediate) = if (c + i) % 2 == 0 {
                    ("test-resubscribe-message-id", true)
                } else {
                    ("tck-complete-task", false)
                };
                let answer = rpc
                    .send_message(
                        send(&format!("{prefix}-burst-{c}-{i}"), immediate),
                        &Default::default(),
                    )
                    .await;
                // After the kill, requests fail: the burst is over.
                let Ok(r) = answer else { return };
                if let Some(t) = r.task() {
                    acked.lock().expect("acked").push((t.id.clone(), t.state()));
                }
            }
        }));
    }
    let enough = tokio::time::timeout(Duration::from_secs(60), async {
        while acked.lock().expect("acked").len() < BURST_ACKED {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    // SIGKILL in the middle of the burst: requests are still in flight.
    first.kill().expect("kill -9");
    let _ = first.wait();
    for c in clients {
        c.abort();
        let _ = c.await;
    }
    enough.expect("the burst was not acknowledged in time");
    let acked = std::mem::take(&mut *acked.lock().expect("acked"));
    assert!(acked.len() >= BURST_ACKED);

    let (mut second, url) = serve(&db);
    let rpc = JsonRpcTransport::new(format!("{url}/")).expect("transport");
    let checked = tokio::time::timeout(Duration::from_secs(60), async {
        for (id, was) in &acked {
            let t = rpc
                .get_task(
                    GetTaskRequest {
                        id: id.clone(),
                        ..Default::default()
                    },
                    &Default::default(),
                )
                .await
                .unwrap_or_else(|e| panic!("acknowledged task {id} is lost: {e}"));
            let now = t.state();
            assert!(
                !matches!(now, TaskState::Submitted | TaskState::Working),
                "{id} is left {now:?} after the restart"
            );
            if *was == TaskState::Completed {
                assert_eq!(now, TaskState::Completed, "{id} was acknowledged completed");
            }
        }
    })
    .await;
    second.kill().ok();
    let _ = second.wait();
    checked.expect("checks timed out");
}

/// Words (so chunks: the echo agent streams a text word by word) of each
/// streamed task.
const STREAM_CHUNKS: usize = 100;
/// The pause between two chunks of a streamed task (the echo agent's
/// `chunkIntervalMs`): a stream takes about 2 s.
const CHUNK_INTERVAL_MS: u64 = 20;
/// Chunks of a stream the client has read when the kill is ordered.
const KILL_AT_CHUNK: usize = 30;

/// What a streaming client saw of one streamed task before the kill.
#[derive(Debug, Default, Clone)]
struct Streamed {
    id: String,
    /// The text of the chunks received, in order.
    text: String,
    chunks: usize,
    /// The stream ended with the task completed.
    completed: bool,
}

/// Group commit under SIGKILL, with streams: while clients send a burst
/// of echo tasks (long jobs answered at once, and echoes completed inside
/// their request), other clients stream 100-chunk tasks (paced by the
/// agent), and the server is killed while a stream is being read, half-way
/// through. After the
/// restart every acknowledged task is found and none is left working (the
/// crash recovery fails them, with a message), and each streamed task's
/// artifact holds at least every chunk its client received before the kill,
/// in order (each chunk is written before it is sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_stream_keeps_every_chunk_sent() {
    use futures::StreamExt;
    use std::sync::{Arc, Mutex};

    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("tasks.db");
    let (mut first, url) = serve_agent(&db, &["--agent", "echo"]);
    let acked: Arc<Mutex<Vec<(String, TaskState)>>> = Arc::default();
    let streams: Arc<Mutex<Vec<Streamed>>> = Arc::default();
    let kill = Arc::new(tokio::sync::Notify::new());
    let mut clients = Vec::new();
    for c in 0..BURST_CLIENTS {
        let rpc = JsonRpcTransport::new(format!("{url}/")).expect("transport");
        let acked = Arc::clone(&acked);
        clients.push(tokio::spawn(async move {
            for i in 0.. {
                // Half the tasks stay at work (answered at once), half
                // complete inside their request.
                let (text, immediate) = if (c + i) % 2 == 0 {
                    ("slow 600", true)
                } else {
                    ("echo me", false)
                };
                let req = SendMessageRequest {
                    message: Some(
                        Message::user_text(text).with_message_id(format!("burst-{c}-{i}")),
                    ),
                    configuration: Some(SendMessageConfiguration {
                        return_immediately: immediate,
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                let Ok(r) = rpc.send_message(req, &Default::default()).await else {
                    return;
                };
                if let Some(t) = r.task() {
                    acked.lock().expect("acked").push((t.id.clone(), t.state()));
                }
            }
        }));
    }
    let words: Vec<String> = (0..STREAM_CHUNKS).map(|i| format!("w{i}")).collect();
    let words = words.join(" ");
    for c in 0..2 {
        let rpc = JsonRpcTransport::new(format!("{url}/")).expect("transport");
        let (acked, streams, kill, words) = (
            Arc::clone(&acked),
            Arc::clone(&streams),
            Arc::clone(&kill),
            words.clone(),
        );
        clients.push(tokio::spawn(async move {
            for i in 0.. {
                let req = SendMessageRequest {
                    message: Some(
                        Message::user_text(words.clone())
                            .with_message_id(format!("stream-{c}-{i}"))
                            // Paced, so that the kill finds it half-way.
                            .with_metadata("chunkIntervalMs", serde_json::json!(CHUNK_INTERVAL_MS)),
                    ),
                    ..Default::default()
                };
                let Ok(mut events) = rpc.send_streaming_message(req, &Default::default()).await
                else {
                    return;
                };
                let mut slot = None;
                while let Some(Ok(event)) = events.next().await {
                    use agentwire_types::stream_response::Payload;
                    let mut all = streams.lock().expect("streams");
                    match &event.payload {
                        Some(Payload::Task(t)) => {
                            all.push(Streamed {
                                id: t.id.clone(),
                                ..Default::default()
                            });
                            slot = Some(all.len() - 1);
                        }
                        Some(Payload::ArtifactUpdate(u)) => {
                            let Some(s) = slot.map(|k| &mut all[k]) else {
                                continue;
                            };
                            s.chunks += 1;
                            s.text.push_str(
                                &u.artifact
                                    .as_ref()
                                    .map(|a| a.text_content())
                                    .unwrap_or_default(),
                            );
                            // Half-way through a stream, once the burst has
                            // been acknowledged long enough: the kill.
                            if s.chunks == KILL_AT_CHUNK
                                && acked.lock().expect("acked").len() >= BURST_ACKED
                            {
                                kill.notify_one();
                            }
                        }
                        Some(Payload::StatusUpdate(u)) => {
                            if let Some(s) = slot.map(|k| &mut all[k]) {
                                let state = u.status.as_ref().map(|s| s.state());
                                s.completed = state == Some(TaskState::Completed);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }));
    }
    let ordered = tokio::time::timeout(Duration::from_secs(60), kill.notified()).await;
    // SIGKILL while a stream is read: its task, and the burst's, in flight.
    first.kill().expect("kill -9");
    let _ = first.wait();
    for c in clients {
        c.abort();
        let _ = c.await;
    }
    ordered.expect("no stream reached the kill point in time");
    let acked = std::mem::take(&mut *acked.lock().expect("acked"));
    let streams = std::mem::take(&mut *streams.lock().expect("streams"));
    assert!(acked.len() >= BURST_ACKED);
    let cut = streams.iter().filter(|s| !s.completed).count();
    assert!(cut >= 1, "no stream was cut: {streams:?}");

    let (mut second, url) = serve_agent(&db, &["--agent", "echo"]);
    let rpc = JsonRpcTransport::new(format!("{url}/")).expect("transport");
    let checked = tokio::time::timeout(Duration::from_secs(60), async {
        let get = |id: String| {
            let rpc = &rpc;
            async move {
                rpc.get_task(
                    GetTaskRequest {
                        id: id.clone(),
                        ..Default::default()
                    },
                    &Default::default(),
                )
                .await
                .unwrap_or_else(|e| panic!("acknowledged task {id} is lost: {e}"))
            }
        };
        for (id, was) in &acked {
            let now = get(id.clone()).await.state();
            assert!(
                !matches!(now, TaskState::Submitted | TaskState::Working),
                "{id} is left {now:?} after the restart"
            );
            if *was == TaskState::Completed {
                assert_eq!(now, TaskState::Completed, "{id} was acknowledged completed");
            }
        }
        let mut failed = 0;
        for s in &streams {
            let t = get(s.id.clone()).await;
            let state = t.state();
            let stored: String = t.artifacts.iter().map(|a| a.text_content()).collect();
            let parts: usize = t.artifacts.iter().map(|a| a.parts.len()).sum();
            assert!(
                t.artifacts.len() <= 1,
                "{}: the chunks became {} artifacts",
                s.id,
                t.artifacts.len()
            );
            assert!(
                parts >= s.chunks && stored.starts_with(&s.text),
                "{}: {} chunks received, {parts} stored ({stored:?})",
                s.id,
                s.chunks
            );
            match state {
                TaskState::Completed => assert_eq!(parts, STREAM_CHUNKS, "{}", s.id),
                TaskState::Failed => {
                    assert!(!s.completed, "{} was seen completed", s.id);
                    let why = t
                        .status
                        .as_ref()
                        .and_then(|st| st.message.as_deref())
                        .map(Message::text)
                        .unwrap_or_default();
                    assert!(why.contains("restarted"), "{}: {why:?}", s.id);
                    failed += 1;
                }
                other => panic!("{} is left {other:?} after the restart", s.id),
            }
        }
        eprintln!(
            "{} acknowledged tasks; {} streams, {cut} cut by the kill, {failed} found failed \
             (killed before their end was written)",
            acked.len(),
            streams.len()
        );
    })
    .await;
    second.kill().ok();
    let _ = second.wait();
    checked.expect("checks timed out");
}

/// Starts `a2a serve --agent echo` on a SQLite file with `args` (and `env`),
/// and returns the start-up line naming the task store; stops the server.
fn store_line(db: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .args(["serve", "--agent", "echo", "--port", "0", "--store"])
        .arg(format!("sqlite:{}", db.display()))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a2a serve");
    let stdout = child.stdout.take().expect("stdout");
    // The server prints its start-up lines at once, then "Press Ctrl-C";
    // a server that exits ends the output (no line is waited for forever).
    let found = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .take_while(|l| !l.starts_with("Press Ctrl-C"))
        .find(|l| l.trim_start().starts_with("task store:"));
    let _ = child.kill();
    let _ = child.wait();
    found.unwrap_or_else(|| panic!("no task store line for {args:?}"))
}

/// `--sqlite-synchronous` is applied, not only accepted: the start-up line
/// says the level SQLite reports for the store's writer connection (read
/// back from it, `PRAGMA synchronous`), NORMAL unless FULL is asked for, by
/// option or by environment.
#[test]
fn the_sqlite_synchronous_level_asked_for_is_the_one_used() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("tasks.db");
    let line = store_line(&db, &[], &[]);
    assert!(line.ends_with("(synchronous NORMAL)"), "{line}");
    let line = store_line(&db, &["--sqlite-synchronous", "full"], &[]);
    assert!(line.ends_with("(synchronous FULL)"), "{line}");
    let line = store_line(&db, &["--sqlite-synchronous", "normal"], &[]);
    assert!(line.ends_with("(synchronous NORMAL)"), "{line}");
    let line = store_line(&db, &[], &[("A2A_SERVE_SQLITE_SYNCHRONOUS", "full")]);
    assert!(line.ends_with("(synchronous FULL)"), "{line}");
}

/// The option means nothing for another store: a usage error, before
/// anything is opened; an unknown level is refused too.
#[test]
fn sqlite_synchronous_is_refused_where_it_does_not_apply() {
    let out = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .args([
            "serve",
            "--port",
            "0",
            "--store",
            "memory",
            "--sqlite-synchronous",
            "full",
        ])
        .output()
        .expect("run a2a serve");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--sqlite-synchronous") && stderr.contains("SQLite store only"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .args(["serve", "--port", "0", "--sqlite-synchronous", "extra"])
        .current_dir(dir.path())
        .output()
        .expect("run a2a serve");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // The help names it, its levels and its variable.
    let out = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .args(["serve", "--help"])
        .output()
        .expect("run a2a serve --help");
    let help = String::from_utf8_lossy(&out.stdout);
    for word in [
        "--sqlite-synchronous",
        "normal",
        "full",
        "A2A_SERVE_SQLITE_SYNCHRONOUS",
        "power loss",
    ] {
        assert!(help.contains(word), "{word} not in the help: {help}");
    }
}
