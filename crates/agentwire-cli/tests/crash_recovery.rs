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
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .args([
            "serve",
            "--agent",
            "conformance",
            "--port",
            "0",
            "--tck-streaming-timeout-ms",
            "600000",
            "--store",
        ])
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
