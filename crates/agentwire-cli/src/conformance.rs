//! `a2a conformance`: a smoke check of a live agent against the A2A TCK
//! scenarios (messageId prefixes of the TCK's conformance agent), over each
//! binding the card offers.

use agentwire_client::{Binding, CallOptions, ClientError, Transport, select_interfaces};
use agentwire_types::{
    CancelTaskRequest, ErrorKind, GetTaskRequest, ListTasksRequest, Message, SendMessageRequest,
    StreamResponse, SubscribeToTaskRequest, TaskState, new_id, stream_response,
};
use clap::Args;
use futures::StreamExt;
use serde_json::json;

use crate::agent::{Agent, Settings};
use crate::error::{CliError, code, exit};
use crate::render::Text;
use crate::{Globals, OutputFormat};

#[derive(Args, Debug)]
pub struct ConformanceArgs {
    /// Exit with status 1 when a check fails.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub conn: crate::ConnOpts,
}

struct Check {
    binding: Binding,
    name: &'static str,
    result: Result<String, String>,
}

fn msg(prefix: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(
            Message::user_text(format!("conformance check {prefix}"))
                .with_message_id(format!("{prefix}-{}", new_id())),
        ),
        ..Default::default()
    }
}

fn expect_kind(
    r: Result<impl std::fmt::Debug, ClientError>,
    kind: ErrorKind,
) -> Result<String, String> {
    match r {
        Err(e) if e.kind() == Some(kind) => Ok(format!("{} as expected", kind.reason())),
        Err(e) => Err(format!("expected {}, got {e}", kind.reason())),
        Ok(v) => Err(format!("expected {}, got a success: {v:?}", kind.reason())),
    }
}

async fn checks(agent: &Agent, binding: Binding, out: &mut Vec<Check>) {
    let c = &agent.client;
    let o = CallOptions::new();
    let mut push = |name: &'static str, result: Result<String, String>| {
        out.push(Check {
            binding,
            name,
            result,
        })
    };
    // A completed task.
    let completed = c.send_message(msg("tck-complete-task"), &o).await;
    let done_id = match &completed {
        Ok(r) => match r.task() {
            Some(t) if t.state() == TaskState::Completed => {
                push("send: task completes", Ok(format!("task {}", t.id)));
                Some(t.id.clone())
            }
            Some(t) => {
                push(
                    "send: task completes",
                    Err(format!("state {:?}", t.state())),
                );
                Some(t.id.clone())
            }
            None => {
                push(
                    "send: task completes",
                    Err("a message instead of a task".into()),
                );
                None
            }
        },
        Err(e) => {
            push("send: task completes", Err(e.to_string()));
            None
        }
    };
    // A direct message.
    push(
        "send: direct message",
        match c.send_message(msg("tck-message-response"), &o).await {
            Ok(r) if r.message().is_some() => Ok("message".into()),
            Ok(r) => Err(format!("expected a message, got {r:?}")),
            Err(e) => Err(e.to_string()),
        },
    );
    // get
    if let Some(id) = &done_id {
        let req = GetTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        push(
            "get: task by id",
            match c.get_task(req, &o).await {
                Ok(t) if &t.id == id && t.state() == TaskState::Completed => Ok("same task".into()),
                Ok(t) => Err(format!("got {} in {:?}", t.id, t.state())),
                Err(e) => Err(e.to_string()),
            },
        );
        let req = CancelTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        push(
            "cancel: completed task is not cancelable",
            expect_kind(c.cancel_task(req, &o).await, ErrorKind::TaskNotCancelable),
        );
        if agent.card.supports_streaming() {
            let req = SubscribeToTaskRequest {
                id: id.clone(),
                ..Default::default()
            };
            push(
                "subscribe: terminal task is refused",
                expect_kind(
                    c.subscribe_to_task(req, &o).await.map(|_| ()),
                    ErrorKind::UnsupportedOperation,
                ),
            );
        }
    }
    let req = GetTaskRequest {
        id: format!("no-such-task-{}", new_id()),
        ..Default::default()
    };
    push(
        "get: unknown task",
        expect_kind(c.get_task(req, &o).await, ErrorKind::TaskNotFound),
    );
    // input-required, then cancel.
    match c.send_message(msg("tck-input-required"), &o).await {
        Ok(r) => match r.task() {
            Some(t) if t.state() == TaskState::InputRequired => {
                push("send: input-required", Ok(format!("task {}", t.id)));
                let req = CancelTaskRequest {
                    id: t.id.clone(),
                    ..Default::default()
                };
                push(
                    "cancel: interrupted task",
                    match c.cancel_task(req, &o).await {
                        Ok(t) if t.state() == TaskState::Canceled => Ok("canceled".into()),
                        Ok(t) => Err(format!("state {:?}", t.state())),
                        Err(e) => Err(e.to_string()),
                    },
                );
            }
            other => push("send: input-required", Err(format!("got {other:?}"))),
        },
        Err(e) => push("send: input-required", Err(e.to_string())),
    }
    // list
    push(
        "list: tasks",
        match c.list_tasks(ListTasksRequest::default(), &o).await {
            Ok(l)
                if done_id
                    .as_ref()
                    .is_none_or(|id| l.tasks.iter().any(|t| &t.id == id))
                    || !l.next_page_token.is_empty() =>
            {
                Ok(format!("{} tasks", l.tasks.len()))
            }
            Ok(l) => Err(format!(
                "the completed task is not in the first page ({} tasks)",
                l.tasks.len()
            )),
            Err(e) => Err(e.to_string()),
        },
    );
    // streaming
    if agent.card.supports_streaming() {
        let result = match c.send_streaming_message(msg("tck-stream-001"), &o).await {
            Ok(mut s) => {
                let mut events: Vec<StreamResponse> = Vec::new();
                let mut err = None;
                while let Some(e) = s.next().await {
                    match e {
                        Ok(e) => events.push(e),
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                let first_is_task = matches!(
                    events.first().and_then(|e| e.payload.as_ref()),
                    Some(stream_response::Payload::Task(_))
                );
                let last = events.last().and_then(StreamResponse::state);
                match (err, first_is_task, last) {
                    (Some(e), _, _) => Err(e.to_string()),
                    (None, true, Some(TaskState::Completed)) => Ok(format!(
                        "{} events, Task first, COMPLETED last",
                        events.len()
                    )),
                    (None, f, l) => Err(format!("first event is a Task: {f}; last state: {l:?}")),
                }
            }
            Err(e) => Err(e.to_string()),
        };
        push("stream: task lifecycle", result);
    }
}

pub async fn run(g: &Globals, args: ConformanceArgs) -> Result<u8, CliError> {
    let settings = Settings::from_globals(g)?;
    let http = settings.http_client()?;
    let card = settings.resolve_card(&http).await?.card;
    let mut results = Vec::new();
    let problems = crate::card::validate(&card);
    let bindings: Vec<Binding> = {
        let want = if settings.bindings.is_empty() {
            Binding::ALL.to_vec()
        } else {
            settings.bindings.clone()
        };
        let mut seen = Vec::new();
        for (b, _) in select_interfaces(&card, &want, true).unwrap_or_default() {
            if !seen.contains(&b) {
                seen.push(b);
            }
        }
        seen
    };
    if bindings.is_empty() {
        return Err(CliError::new(
            code::CARD_INVALID,
            exit::FAILURE,
            "the card offers no A2A 1.x interface this tool can test",
        ));
    }
    for b in &bindings {
        let mut s = settings.clone();
        s.bindings = vec![*b];
        let agent = Agent::with_card(s, http.clone(), card.clone())?;
        checks(&agent, *b, &mut results).await;
    }
    let failed =
        results.iter().filter(|c| c.result.is_err()).count() + usize::from(!problems.is_empty());
    let total = results.len() + 1;
    if g.output == OutputFormat::Json {
        let mut list = vec![json!({
            "binding": null, "check": "card: valid",
            "passed": problems.is_empty(), "detail": problems.join("; "),
        })];
        list.extend(results.iter().map(|c| {
            json!({
                "binding": c.binding.as_str(),
                "check": c.name,
                "passed": c.result.is_ok(),
                "detail": match &c.result { Ok(d) | Err(d) => d },
            })
        }));
        crate::render::print_json(&json!({
            "agent": card.name, "checks": list, "passed": total - failed, "failed": failed,
        }))?;
    } else {
        let mut t = Text::new();
        t.field("Agent", &card.name);
        t.field(
            "Bindings",
            bindings
                .iter()
                .map(|b| b.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        );
        t.blank();
        t.field("Check", "card: valid");
        t.field(
            "Result",
            if problems.is_empty() {
                "pass".to_owned()
            } else {
                format!("FAIL: {}", problems.join("; "))
            },
        );
        for c in &results {
            t.blank();
            t.field("Check", format!("[{}] {}", c.binding, c.name));
            t.field(
                "Result",
                match &c.result {
                    Ok(d) => format!("pass ({d})"),
                    Err(d) => format!("FAIL: {d}"),
                },
            );
        }
        t.blank();
        t.field("Passed", (total - failed).to_string());
        t.field("Failed", failed.to_string());
        t.print();
    }
    if failed > 0 {
        eprintln!("warning: {failed} of {total} conformance checks failed");
        if args.strict {
            return Ok(exit::FAILURE);
        }
    }
    Ok(exit::OK)
}
