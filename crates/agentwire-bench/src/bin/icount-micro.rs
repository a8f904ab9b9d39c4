//! `icount-micro`: one hand-written fast path or its plain alternative,
//! run N times, for `valgrind --tool=callgrind` to count (see
//! benches/README.md, "The fast paths"). The difference between two runs
//! of the same N, divided by N, is what one call of the fast path saves.
//!
//! * `fast-task` / `serde-task`: the JSON of the echo agent's answer task
//!   (`SendMessage` "hello": completed, one artifact, the user message in
//!   history) by `agentwire_types::fast_json::write_task` / by its
//!   `Serialize` implementation through `serde_json`.
//! * `reader-plain` / `reader-serde`: the params of a JSON-RPC
//!   `SendMessage` "hello" read by `agentwire_types::json_reader` / by
//!   serde's derive.
//! * `none`: only the setup (the process's fixed cost).

use agentwire_types::{Artifact, Message, Task, TaskState, TaskStatus, new_id};
use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum What {
    None,
    FastTask,
    SerdeTask,
    ReaderPlain,
    ReaderSerde,
}

const PARAMS: &[u8] = br#"{"message":{"messageId":"0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a13","role":"ROLE_USER","parts":[{"text":"hello"}]}}"#;

#[derive(Parser, Debug)]
#[command(about = "A fast path or its plain alternative, N times, for callgrind")]
struct Args {
    #[arg(value_enum)]
    what: What,
    /// Calls.
    #[arg(long, default_value_t = 10_000)]
    n: usize,
}

fn echo_task() -> Task {
    let id = new_id();
    let context_id = new_id();
    let mut message = Message::user_text("hello");
    message.context_id = context_id.clone();
    message.task_id = id.clone();
    Task {
        id,
        context_id,
        status: Some(TaskStatus::new(TaskState::Completed)),
        artifacts: vec![Artifact::text("echo", "hello").with_id(new_id())],
        history: vec![message],
        ..Default::default()
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let task = echo_task();
    let mut bytes = 0usize;
    let mut out = Vec::with_capacity(1024);
    for _ in 0..args.n {
        match args.what {
            What::None => {}
            What::FastTask => {
                out.clear();
                agentwire_types::fast_json::write_task(&mut out, std::hint::black_box(&task))?;
                bytes += out.len();
            }
            What::SerdeTask => {
                out.clear();
                serde_json::to_writer(&mut out, std::hint::black_box(&task))?;
                bytes += out.len();
            }
            What::ReaderPlain => {
                let req = agentwire_types::json_reader::send_message_request(std::hint::black_box(
                    PARAMS,
                ));
                bytes += usize::from(req.is_some());
            }
            What::ReaderSerde => {
                let req: Option<agentwire_types::SendMessageRequest> =
                    serde_json::from_slice(std::hint::black_box(PARAMS)).ok();
                bytes += usize::from(req.is_some());
            }
        }
    }
    // The two writers must agree (the tests of fast_json say so too).
    let mut fast = Vec::new();
    agentwire_types::fast_json::write_task(&mut fast, &task)?;
    anyhow::ensure!(
        fast == serde_json::to_vec(&task)?,
        "fast_json and serde disagree on the echo task"
    );
    anyhow::ensure!(
        agentwire_types::json_reader::send_message_request(PARAMS)
            == serde_json::from_slice(PARAMS).ok(),
        "json_reader and serde disagree on the params"
    );
    println!("{:?} n={} bytes={bytes}", args.what, args.n);
    Ok(())
}
