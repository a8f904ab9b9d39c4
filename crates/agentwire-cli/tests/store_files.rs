//! The task store files of `a2a serve` (SQLite), against real processes
//! on 127.0.0.1:
//!
//! - a task row that cannot be read (here: metadata nested deeper than the
//!   protobuf decoder's recursion limit, written into the file while the
//!   server was down) never stops the server: crash recovery sets it
//!   aside, logs its id, and the other tasks are served; `GetTask` of an
//!   unreadable task says so, `ListTasks` skips it;
//! - agents started in one directory without `--store` get files of their
//!   own;
//! - one server at a time uses a file: a second is refused, naming the
//!   holder's pid; ten first starts at once on a new file give one server
//!   and nine refusals, never a schema error; the lock of a killed server
//!   goes with it.

use std::io::{BufRead, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentwire_client::{JsonRpcTransport, Transport};
use agentwire_server::store::rusqlite;
use agentwire_types::{
    GetTaskRequest, ListTasksRequest, Message, SendMessageConfiguration, SendMessageRequest, Task,
    TaskState,
};
use prost::Message as _;

/// The bound of every wait.
const WAIT: Duration = Duration::from_secs(30);

/// A running `a2a serve`.
struct Server {
    child: Child,
    url: String,
    /// Its start-up lines (up to "Press Ctrl-C").
    lines: Vec<String>,
    /// Where its stderr goes.
    stderr: PathBuf,
}

impl Server {
    fn logs(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `a2a serve --port 0 ARGS` in `dir`, without `A2A_SERVE_STORE`: the
/// server once it printed its start-up lines, or what it said when it
/// exited instead (stdout and stderr).
fn serve(dir: &Path, args: &[&str]) -> Result<Server, String> {
    let stderr = dir.join(format!("serve-{}.log", agentwire_types::new_id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .arg("serve")
        .args(["--port", "0"])
        .args(args)
        .env_remove("A2A_SERVE_STORE")
        .env_remove("A2A_STORE")
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).expect("a log file"))
        .spawn()
        .expect("start a2a serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut reader = BufReader::new(stdout);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => {
                let _ = child.wait();
                let err = std::fs::read_to_string(&stderr).unwrap_or_default();
                return Err(format!("{}\n{err}", lines.join("")));
            }
            Ok(_) => {}
        }
        let done = line.starts_with("Press Ctrl-C");
        lines.push(line);
        if done {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let url = lines
        .iter()
        .flat_map(|l| l.split_whitespace())
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {lines:?}"))
        .to_owned();
    Ok(Server {
        child,
        url,
        lines,
        stderr,
    })
}

fn store_line(s: &Server) -> String {
    s.lines
        .iter()
        .find(|l| l.trim_start().starts_with("task store:"))
        .cloned()
        .unwrap_or_else(|| panic!("no task store line in {:?}", s.lines))
}

fn rpc(s: &Server) -> JsonRpcTransport {
    JsonRpcTransport::new(format!("{}/", s.url)).expect("transport")
}

async fn send(rpc: &JsonRpcTransport, text: &str, immediately: bool) -> Task {
    let req = SendMessageRequest {
        message: Some(Message::user_text(text)),
        configuration: Some(SendMessageConfiguration {
            return_immediately: immediately,
            ..Default::default()
        }),
        ..Default::default()
    };
    let r = tokio::time::timeout(WAIT, rpc.send_message(req, &Default::default()))
        .await
        .expect("send in time")
        .expect("send");
    r.task().expect("a task").clone()
}

async fn get(rpc: &JsonRpcTransport, id: &str) -> agentwire_client::ClientResult<Task> {
    let req = GetTaskRequest {
        id: id.to_owned(),
        ..Default::default()
    };
    tokio::time::timeout(WAIT, rpc.get_task(req, &Default::default()))
        .await
        .expect("get in time")
}

/// A `Struct` nested `depth` levels deep (`{"a": {"a": ...}}`): more than
/// the protobuf decoder's recursion limit (100) makes a task unreadable.
fn nested(depth: usize) -> agentwire_types::Struct {
    let mut v = serde_json::json!("bottom");
    for _ in 0..depth {
        v = serde_json::json!({ "a": v });
    }
    match v {
        serde_json::Value::Object(m) => agentwire_types::json::to_struct(m),
        _ => unreachable!(),
    }
}

/// Rewrites the stored head of task `id` with metadata nested 120 levels
/// deep, as a server that accepted such metadata would have stored it.
fn make_unreadable(db: &Path, id: &str) {
    let c = rusqlite::Connection::open(db).expect("open the file");
    let head: Vec<u8> = c
        .query_row("SELECT head FROM a2a_tasks WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .expect("the task's row");
    let mut task = Task::decode(head.as_slice()).expect("a readable head");
    task.metadata = Some(nested(120));
    let head = task.encode_to_vec();
    assert!(Task::decode(head.as_slice()).is_err(), "not readable now");
    c.execute(
        "UPDATE a2a_tasks SET head = ?1 WHERE id = ?2",
        rusqlite::params![head, id],
    )
    .expect("write the row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_task_never_stops_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("tasks.db");
    let store = format!("sqlite:{}", db.display());
    let args = ["--agent", "echo", "--metrics", "--store", store.as_str()];
    let first = serve(dir.path(), &args).unwrap_or_else(|e| panic!("first start: {e}"));
    let (broken, working, done, broken_done) = {
        let rpc = rpc(&first);
        let broken = send(&rpc, "slow 60", true).await.id;
        let working = send(&rpc, "slow 60", true).await.id;
        let done = send(&rpc, "hello", false).await.id;
        let broken_done = send(&rpc, "hello again", false).await.id;
        (broken, working, done, broken_done)
    };
    // Killed while two tasks work; then one of them, and a finished one,
    // become unreadable.
    first.kill();
    make_unreadable(&db, &broken);
    make_unreadable(&db, &broken_done);

    let second = serve(dir.path(), &args)
        .unwrap_or_else(|e| panic!("the restart failed on an unreadable task: {e}"));
    let rpc = rpc(&second);
    let checked = tokio::time::timeout(WAIT, async {
        // The other unfinished task was recovered as usual.
        let t = get(&rpc, &working).await.expect("the readable task");
        assert_eq!(t.state(), TaskState::Failed);
        assert_eq!(
            get(&rpc, &done).await.expect("a finished task").state(),
            TaskState::Completed
        );
        // The unreadable ones: a clear error naming them.
        for id in [&broken, &broken_done] {
            let e = match get(&rpc, id).await {
                Err(agentwire_client::ClientError::A2a(e)) => e,
                other => panic!("GetTask {id}: not an A2A error: {other:?}"),
            };
            assert_eq!(e.kind, agentwire_types::ErrorKind::Internal, "{e:?}");
            assert!(
                e.message.contains(id.as_str()) && e.message.contains("cannot be read"),
                "{e:?}"
            );
            assert_eq!(e.metadata.get("taskId"), Some(id), "{e:?}");
        }
        // A listing skips them, and shows the others.
        let page = rpc
            .list_tasks(
                ListTasksRequest {
                    page_size: Some(100),
                    ..Default::default()
                },
                &Default::default(),
            )
            .await
            .expect("ListTasks with an unreadable task");
        let ids: Vec<&str> = page.tasks.iter().map(|t| t.id.as_str()).collect();
        assert!(
            ids.contains(&working.as_str()) && ids.contains(&done.as_str()),
            "{ids:?}"
        );
        assert!(
            !ids.contains(&broken.as_str()) && !ids.contains(&broken_done.as_str()),
            "{ids:?}"
        );
        // Counted.
        let metrics = reqwest::get(format!("{}/metrics", second.url))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        let count = metrics
            .lines()
            .find(|l| l.starts_with("a2a_store_unreadable_rows_total "))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no unreadable rows counter in {metrics}"));
        assert!(count >= 3, "{count}");
    })
    .await;
    // The log names the task set aside, and where it is.
    let logs = second.logs();
    second.kill();
    checked.expect("checks timed out");
    let line = logs
        .lines()
        .find(|l| l.contains(&broken) && l.contains("set aside"))
        .unwrap_or_else(|| panic!("no log line names {broken}: {logs}"));
    assert!(line.contains("a2a_unreadable_tasks"), "{line}");
    // Kept, as it was, in the table the log names.
    let c = rusqlite::Connection::open(&db).expect("open the file");
    let kept: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM a2a_unreadable_tasks WHERE id = ?1",
            [&broken],
            |r| r.get(0),
        )
        .expect("the table of unreadable tasks");
    assert_eq!(kept, 1);
    let left: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM a2a_tasks WHERE state IN (1, 2)",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(left, 0, "no task left working");
}

#[test]
fn agents_in_one_directory_get_task_stores_of_their_own() {
    let dir = tempfile::tempdir().expect("temp dir");
    let echo = serve(dir.path(), &["--agent", "echo"]).unwrap_or_else(|e| panic!("echo: {e}"));
    let dep = serve(dir.path(), &["--agent", "depcompat"]);
    let echo_line = store_line(&echo);
    echo.kill();
    let dep = dep.unwrap_or_else(|e| panic!("depcompat beside echo: {e}"));
    let dep_line = store_line(&dep);
    dep.kill();
    assert!(echo_line.contains("a2a-tasks-echo.db"), "{echo_line}");
    assert!(dep_line.contains("a2a-tasks-depcompat.db"), "{dep_line}");
    assert!(dir.path().join("a2a-tasks-echo.db").exists());
    assert!(dir.path().join("a2a-tasks-depcompat.db").exists());
    assert!(!dir.path().join("a2a-tasks.db").exists());
}

/// What `a2a serve -o json` said when it stopped at once: its exit code
/// and error envelope.
fn refused(out: &std::process::Output) -> (Option<i32>, serde_json::Value) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let envelope = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "a JSON error envelope ({e}): {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), envelope)
}

/// Runs `a2a serve -o json ARGS` in `dir`, expecting it to stop by itself
/// within [`WAIT`] (a server that runs is killed, and `None` returned).
fn serve_expecting_refusal(dir: &Path, args: &[&str]) -> Option<std::process::Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .args(["serve", "--port", "0", "-o", "json"])
        .args(args)
        .env_remove("A2A_SERVE_STORE")
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a2a serve");
    let until = Instant::now() + WAIT;
    while Instant::now() < until {
        if child.try_wait().expect("wait").is_some() {
            return Some(child.wait_with_output().expect("output"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn one_server_at_a_time_uses_a_file_and_a_killed_one_lets_it_go() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = ["--agent", "echo", "--store", "sqlite:shared.db"];
    let first = serve(dir.path(), &args).unwrap_or_else(|e| panic!("first: {e}"));
    let pid = first.child.id().to_string();
    let out = serve_expecting_refusal(dir.path(), &args)
        .unwrap_or_else(|| panic!("a second server on the same file was not refused"));
    let (code, envelope) = refused(&out);
    assert_eq!(code, Some(1), "{envelope}");
    let error = &envelope["error"];
    assert_eq!(error["code"], "AGENTWIRE_SERVE_FAILED", "{envelope}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("shared.db") && message.contains(&pid) && message.contains("in use"),
        "names the file and the holder: {message}"
    );
    let hint = error["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains(&pid) && hint.contains("--store"),
        "says what to do: {hint}"
    );
    // kill -9: the system releases the lock with the process.
    first.kill();
    let again = serve(dir.path(), &args).unwrap_or_else(|e| panic!("after kill -9: {e}"));
    again.kill();
}

#[test]
fn ten_first_starts_at_once_give_one_server_and_nine_clear_refusals() {
    let dir = tempfile::tempdir().expect("temp dir");
    let children: Vec<Child> = (0..10)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_a2a"))
                .args([
                    "serve", "--port", "0", "-o", "json", "--agent", "echo", "--store",
                ])
                .arg("sqlite:new.db")
                .current_dir(dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a2a serve")
        })
        .collect();
    // Those refused stop at once; the one that runs is stopped once the
    // others have.
    let mut running = Vec::new();
    let mut outputs = Vec::new();
    let until = Instant::now() + WAIT;
    let mut pending = children;
    while !pending.is_empty() && Instant::now() < until {
        let mut still = Vec::new();
        for mut c in pending {
            if c.try_wait().expect("wait").is_some() {
                outputs.push(c.wait_with_output().expect("output"));
            } else {
                still.push(c);
            }
        }
        pending = still;
        if pending.len() <= 1 && outputs.len() >= 9 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for mut c in pending {
        // Still running: did it start serving?
        let _ = c.kill();
        let mut out = String::new();
        if let Some(mut s) = c.stdout.take() {
            let _ = s.read_to_string(&mut out);
        }
        let _ = c.wait();
        running.push(out);
    }
    assert_eq!(running.len(), 1, "one server runs: {running:?}");
    assert_eq!(outputs.len(), 9);
    for out in &outputs {
        let (code, envelope) = refused(out);
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(code, Some(1), "{envelope}");
        assert!(message.contains("in use"), "the lock error: {envelope}");
        assert!(
            !message.to_lowercase().contains("migrat"),
            "no schema error: {envelope}"
        );
    }
}
