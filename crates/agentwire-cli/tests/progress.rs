//! The progress line: while `a2a send`, `a2a task get --wait` and `a2a
//! task subscribe` wait on a terminal, stderr shows the task's state and
//! its latest status message; stdout gets only the result. Piped stderr,
//! and `-o json`, get none of it.
//!
//! The agent here works until the test lets it finish (a semaphore), so
//! the tests wait on what the command shows, never on time.

mod common;
mod pty;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_server::{A2aResult, A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::Artifact;
use common::{Env, Recorder, assert_text_floor, host, lab_card, serve};
use pty::Pty;
use tokio::sync::{Semaphore, mpsc};

const STATUS: &str = "Checking 25 packages";

/// Works (with a status message) until a permit is released.
#[derive(Clone)]
struct Gate {
    permits: Arc<Semaphore>,
    working: mpsc::UnboundedSender<String>,
}

impl AgentExecutor for Gate {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        task.progress(STATUS).await?;
        let _ = self.working.send(task.task_id().to_owned());
        tokio::select! {
            p = self.permits.acquire() => {
                if let Ok(p) = p {
                    p.forget();
                }
                task.add_artifact(Artifact::text("result", "all good")).await?;
                task.complete().await
            }
            () = ctx.canceled() => Ok(()),
        }
    }
}

struct Agent {
    server: agentwire_server::ServerHandle,
    permits: Arc<Semaphore>,
    working: mpsc::UnboundedReceiver<String>,
    calls: Arc<Recorder>,
}

async fn agent() -> Agent {
    let permits = Arc::new(Semaphore::new(0));
    let (tx, rx) = mpsc::unbounded_channel();
    let calls = Arc::new(Recorder::default());
    let gate = Gate {
        permits: permits.clone(),
        working: tx,
    };
    let server = serve(A2aServer::new(lab_card(), gate).authenticator(calls.clone())).await;
    Agent {
        server,
        permits,
        working: rx,
        calls,
    }
}

impl Agent {
    /// Waits until the agent works on a task; its id.
    async fn working(&mut self) -> String {
        tokio::time::timeout(pty::WAIT, self.working.recv())
            .await
            .ok()
            .flatten()
            .expect("the agent starts working")
    }

    /// Waits until `n` more calls reached the agent than `since`.
    fn calls_after(&self, since: usize, n: usize) {
        let started = Instant::now();
        while self.calls.headers().len() < since + n {
            assert!(started.elapsed() < pty::WAIT, "the command stopped calling");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn release(&self) {
        self.permits.add_permits(1);
    }
}

/// A task started with `--async`: it works until released.
fn start_task(env: &Env, h: &str) -> String {
    let v = env
        .run(&["send", "-a", h, "--async", "-o", "json", "go"])
        .json();
    v["task"]["id"].as_str().expect("a task id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_shows_state_and_status_message_while_waiting_on_a_terminal() {
    let mut a = agent().await;
    let env = Env::new();
    let h = host(&a.server);
    // stdout to a file: what is left on the terminal is stderr.
    let mut t = Pty::shell(
        env.home(),
        &env.cwd(),
        &format!("\"$A2A\" send -a {h} go > out.txt"),
    );
    a.working().await;
    t.expect(&format!("WORKING: {STATUS}"));
    a.release();
    assert_eq!(t.wait(), 0, "{}", t.screen());
    let out = pty::read(&env.cwd().join("out.txt"));
    assert_text_floor(&out);
    assert!(out.contains("State: COMPLETED"), "{out}");
    assert!(!out.contains(STATUS) && !out.contains("WORKING"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_get_wait_and_subscribe_show_state_and_status_message() {
    let mut a = agent().await;
    let env = Env::new();
    let h = host(&a.server);
    for cmd in ["task get --wait --poll-interval 100ms", "task subscribe"] {
        let id = start_task(&env, &h);
        a.working().await;
        let mut t = Pty::shell(
            env.home(),
            &env.cwd(),
            &format!("\"$A2A\" {cmd} -a {h} {id} > out.txt"),
        );
        let line = t.expect(&format!("WORKING: {STATUS}"));
        assert!(
            line.contains(&format!("task {}", &id[id.len() - 8..])),
            "{line}"
        );
        a.release();
        assert_eq!(t.wait(), 0, "{cmd}: {}", t.screen());
        let out = pty::read(&env.cwd().join("out.txt"));
        assert_text_floor(&out);
        assert!(out.contains("State: COMPLETED"), "{cmd}: {out}");
        assert!(!out.contains("WORKING"), "{cmd}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_progress_on_piped_stderr_nor_with_json_output() {
    let mut a = agent().await;
    let env = Env::new();
    let h = host(&a.server);

    // Piped stderr: the command polls a working task, and says nothing of it.
    let id = start_task(&env, &h);
    a.working().await;
    let since = a.calls.headers().len();
    let run = {
        let cmd = env.cmd();
        let h = h.clone();
        let id = id.clone();
        std::thread::spawn(move || {
            let mut cmd = cmd;
            cmd.args([
                "task",
                "get",
                "--wait",
                "--poll-interval",
                "20ms",
                "-a",
                &h,
                &id,
            ])
            .output()
            .expect("run a2a")
        })
    };
    a.calls_after(since, 3);
    a.release();
    let out = run.join().expect("the run");
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "stderr: {stderr:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("State: COMPLETED"));

    // -o json on a terminal: nothing on stderr either.
    let id = start_task(&env, &h);
    a.working().await;
    let since = a.calls.headers().len();
    let mut t = Pty::shell(
        env.home(),
        &env.cwd(),
        &format!("\"$A2A\" task get --wait --poll-interval 20ms -o json -a {h} {id} > out.json"),
    );
    a.calls_after(since, 3);
    a.release();
    assert_eq!(t.wait(), 0, "{}", t.screen());
    assert!(t.raw().trim().is_empty(), "on the terminal: {:?}", t.raw());
    let doc: serde_json::Value =
        serde_json::from_str(&pty::read(&env.cwd().join("out.json"))).expect("one JSON document");
    assert_eq!(doc["status"]["state"], "TASK_STATE_COMPLETED");
}
