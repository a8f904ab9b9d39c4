//! `a2a conformance`: a smoke check of a live agent against the A2A TCK
//! scenarios, over each binding the card offers.
//!
//! Most scenarios drive the TCK's system under test (`a2a serve --agent
//! conformance`) by messageId prefixes (`tck-complete-task`...); another
//! agent would just answer them as messages of its own. Those checks run
//! only when the card is the conformance agent's (it declares the TCK
//! skill), and are reported as skipped, by name, otherwise. The others
//! hold for any A2A agent.

use agentwire_client::{Binding, CallOptions, ClientError, Transport, select_interfaces};
use agentwire_types::{
    AgentCard, CancelTaskRequest, ErrorKind, GetTaskRequest, ListTasksRequest, Message,
    SendMessageRequest, SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task,
    TaskState, new_id, send_message_response, stream_response,
};
use clap::Args;
use futures::StreamExt;
use serde_json::json;

use crate::agent::{Agent, Settings};
use crate::error::{CliError, a2a_error_name, code, exit};
use crate::render::{Text, state_label};
use crate::{Globals, OutputFormat};

const AFTER_HELP: &str = "\
Checks for any A2A agent: the card is valid, an unknown task is TaskNotFoundError,
tasks can be listed.

Checks that need the TCK conformance agent (a2a serve --agent conformance), which
acts on the messageId prefixes of the A2A TCK: a task completes, a direct message,
get a task by id, a completed task is not cancelable, a terminal task cannot be
subscribed to, input-required then cancel, the streamed task lifecycle. The agent is
recognised by its card (a skill with the id or tag \"tck\"); on another agent these
checks are skipped and named.

Exit status: 0 when no check failed, 1 when one did (or, with --strict, when checks
were skipped).";

#[derive(Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct ConformanceArgs {
    /// Also fail (exit 1) when checks were skipped: the agent is not the TCK
    /// conformance agent, or its card lacks a capability a check needs.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub conn: crate::ConnOpts,
}

/// What a check found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mismatch {
    expected: String,
    got: String,
}

fn mismatch(expected: impl Into<String>, got: impl Into<String>) -> Mismatch {
    Mismatch {
        expected: expected.into(),
        got: got.into(),
    }
}

/// A check's outcome: what it saw when it passed, or what was expected.
type Outcome = Result<String, Mismatch>;

struct Check {
    binding: Option<Binding>,
    name: &'static str,
    result: Outcome,
}

/// A check not run, and why.
struct Skipped {
    name: &'static str,
    reason: &'static str,
}

/// The checks that need the conformance agent (its messageId scenarios).
const TCK_CHECKS: &[&str] = &[
    "send: task completes",
    "send: direct message",
    "get: task by id",
    "cancel: completed task is not cancelable",
    "subscribe: terminal task is refused",
    "send: input-required",
    "cancel: interrupted task",
    "stream: task lifecycle",
];

/// The checks that need the card to declare streaming.
const STREAMING_CHECKS: &[&str] = &[
    "subscribe: terminal task is refused",
    "stream: task lifecycle",
];

/// Whether the card is the TCK conformance agent's: a skill with the id or
/// tag `tck`.
pub fn is_conformance_agent(card: &AgentCard) -> bool {
    card.skills.iter().any(|s| {
        s.id.eq_ignore_ascii_case("tck") || s.tags.iter().any(|t| t.eq_ignore_ascii_case("tck"))
    })
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

/// A client error in words: the A2A error name and message, or what failed.
fn error_text(e: &ClientError) -> String {
    match e {
        ClientError::A2a(err) => format!("{}: {}", a2a_error_name(err.kind), err.message),
        other => format!("an error: {other}"),
    }
}

fn task_text(t: &Task) -> String {
    format!("task {} in {}", t.id, state_label(t.state()))
}

fn response_text(r: &SendMessageResponse) -> String {
    match &r.payload {
        Some(send_message_response::Payload::Task(t)) => format!("a {}", task_text(t)),
        Some(send_message_response::Payload::Message(_)) => "a message (no task)".into(),
        None => "an empty response".into(),
    }
}

fn expect_error<T>(
    r: Result<T, ClientError>,
    kind: ErrorKind,
    what: impl Fn(&T) -> String,
) -> Outcome {
    let want = a2a_error_name(kind);
    match r {
        Err(e) if e.kind() == Some(kind) => Ok(format!("{want} as expected")),
        Err(e) => Err(mismatch(&want, error_text(&e))),
        Ok(v) => Err(mismatch(&want, format!("a success: {}", what(&v)))),
    }
}

/// The checks for any agent.
async fn generic_checks(
    agent: &Agent,
    binding: Binding,
    completed: Option<&str>,
    out: &mut Vec<Check>,
) {
    let c = &agent.client;
    let o = CallOptions::new();
    let mut push = |name: &'static str, result: Outcome| {
        out.push(Check {
            binding: Some(binding),
            name,
            result,
        });
    };
    let req = GetTaskRequest {
        id: format!("no-such-task-{}", new_id()),
        ..Default::default()
    };
    push(
        "get: unknown task",
        expect_error(
            c.get_task(req, &o).await,
            ErrorKind::TaskNotFound,
            task_text,
        ),
    );
    push(
        "list: tasks",
        match c.list_tasks(ListTasksRequest::default(), &o).await {
            Ok(l)
                if completed.is_none_or(|id| l.tasks.iter().any(|t| t.id == id))
                    || !l.next_page_token.is_empty() =>
            {
                Ok(format!("{} tasks", l.tasks.len()))
            }
            Ok(l) => Err(mismatch(
                "the completed task in the first page",
                format!("{} other tasks and no next page", l.tasks.len()),
            )),
            Err(e) => Err(mismatch("a list of tasks", error_text(&e))),
        },
    );
}

/// The scenarios of the conformance agent; returns the completed task's id.
async fn tck_checks(agent: &Agent, binding: Binding, out: &mut Vec<Check>) -> Option<String> {
    let c = &agent.client;
    let o = CallOptions::new();
    let streaming = agent.card.supports_streaming();
    let mut push = |name: &'static str, result: Outcome| {
        out.push(Check {
            binding: Some(binding),
            name,
            result,
        });
    };
    // A completed task.
    let done = match c.send_message(msg("tck-complete-task"), &o).await {
        Ok(r) => match r.task() {
            Some(t) if t.state() == TaskState::Completed => {
                push("send: task completes", Ok(format!("task {}", t.id)));
                Some(t.id.clone())
            }
            Some(t) => {
                push(
                    "send: task completes",
                    Err(mismatch(
                        "a task in COMPLETED",
                        format!("a {}", task_text(t)),
                    )),
                );
                Some(t.id.clone())
            }
            None => {
                push(
                    "send: task completes",
                    Err(mismatch("a task in COMPLETED", response_text(&r))),
                );
                None
            }
        },
        Err(e) => {
            push(
                "send: task completes",
                Err(mismatch("a task in COMPLETED", error_text(&e))),
            );
            None
        }
    };
    // A direct message.
    push(
        "send: direct message",
        match c.send_message(msg("tck-message-response"), &o).await {
            Ok(r) if r.message().is_some() => Ok("a message".into()),
            Ok(r) => Err(mismatch("a message (no task)", response_text(&r))),
            Err(e) => Err(mismatch("a message (no task)", error_text(&e))),
        },
    );
    if let Some(id) = &done {
        let req = GetTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        let want = format!("task {id} in COMPLETED");
        push(
            "get: task by id",
            match c.get_task(req, &o).await {
                Ok(t) if &t.id == id && t.state() == TaskState::Completed => {
                    Ok("the same task".into())
                }
                Ok(t) => Err(mismatch(want, task_text(&t))),
                Err(e) => Err(mismatch(want, error_text(&e))),
            },
        );
        let req = CancelTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        push(
            "cancel: completed task is not cancelable",
            expect_error(
                c.cancel_task(req, &o).await,
                ErrorKind::TaskNotCancelable,
                task_text,
            ),
        );
        if streaming {
            let req = SubscribeToTaskRequest {
                id: id.clone(),
                ..Default::default()
            };
            push(
                "subscribe: terminal task is refused",
                expect_error(
                    c.subscribe_to_task(req, &o).await.map(|_| ()),
                    ErrorKind::UnsupportedOperation,
                    |()| "a stream".into(),
                ),
            );
        }
    }
    // input-required, then cancel.
    let want = "a task in INPUT_REQUIRED";
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
                        Ok(t) if t.state() == TaskState::Canceled => Ok("CANCELED".into()),
                        Ok(t) => Err(mismatch("the task in CANCELED", task_text(&t))),
                        Err(e) => Err(mismatch("the task in CANCELED", error_text(&e))),
                    },
                );
            }
            _ => push(
                "send: input-required",
                Err(mismatch(want, response_text(&r))),
            ),
        },
        Err(e) => push("send: input-required", Err(mismatch(want, error_text(&e)))),
    }
    if streaming {
        push("stream: task lifecycle", stream_check(agent).await);
    }
    done
}

/// `tck-stream-001`: the stream opens with the Task and ends COMPLETED.
async fn stream_check(agent: &Agent) -> Outcome {
    let want = "a stream that starts with the Task and ends in COMPLETED";
    let mut s = match agent
        .client
        .send_streaming_message(msg("tck-stream-001"), &CallOptions::new())
        .await
    {
        Ok(s) => s,
        Err(e) => return Err(mismatch(want, error_text(&e))),
    };
    let mut events: Vec<StreamResponse> = Vec::new();
    while let Some(e) = s.next().await {
        match e {
            Ok(e) => events.push(e),
            Err(e) => {
                return Err(mismatch(
                    want,
                    format!("{} events, then {}", events.len(), error_text(&e)),
                ));
            }
        }
    }
    let first = match events.first().and_then(|e| e.payload.as_ref()) {
        Some(stream_response::Payload::Task(_)) => "the Task",
        Some(stream_response::Payload::Message(_)) => "a message",
        Some(stream_response::Payload::StatusUpdate(_)) => "a status update",
        Some(stream_response::Payload::ArtifactUpdate(_)) => "an artifact update",
        None => "nothing",
    };
    let last = events.last().and_then(StreamResponse::state);
    match (first, last) {
        ("the Task", Some(TaskState::Completed)) => Ok(format!(
            "{} events, the Task first, COMPLETED last",
            events.len()
        )),
        (first, last) => Err(mismatch(
            want,
            format!(
                "{} events, starting with {first}, last state {}",
                events.len(),
                last.map_or("none", state_label)
            ),
        )),
    }
}

pub async fn run(g: &Globals, args: ConformanceArgs) -> Result<u8, CliError> {
    let settings = Settings::from_globals(g)?;
    let http = settings.http_client()?;
    let card = settings.resolve_card(&http).await?.card;
    let problems = agentwire_client::card::validate_card(&card);
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
    let tck = is_conformance_agent(&card);
    let mut results = vec![Check {
        binding: None,
        name: "card: valid",
        result: if problems.is_empty() {
            Ok("no problem found".into())
        } else {
            Err(mismatch("a valid card", problems.join("; ")))
        },
    }];
    for b in &bindings {
        let mut s = settings.clone();
        s.bindings = vec![*b];
        let agent = Agent::with_card(s, http.clone(), card.clone())?;
        let completed = if tck {
            tck_checks(&agent, *b, &mut results).await
        } else {
            None
        };
        generic_checks(&agent, *b, completed.as_deref(), &mut results).await;
    }
    let mut skipped: Vec<Skipped> = Vec::new();
    for name in TCK_CHECKS {
        if !tck {
            skipped.push(Skipped {
                name,
                reason: "needs the TCK conformance agent (a2a serve --agent conformance)",
            });
        } else if STREAMING_CHECKS.contains(name) && !card.supports_streaming() {
            skipped.push(Skipped {
                name,
                reason: "the card does not declare streaming",
            });
        }
    }
    let failed = results.iter().filter(|c| c.result.is_err()).count();
    let passed = results.len() - failed;
    if g.output == OutputFormat::Json {
        let mut list: Vec<serde_json::Value> = results
            .iter()
            .map(|c| match &c.result {
                Ok(d) => json!({
                    "binding": c.binding.map(|b| b.as_str()),
                    "check": c.name, "status": "pass", "passed": true, "detail": d,
                }),
                Err(m) => json!({
                    "binding": c.binding.map(|b| b.as_str()),
                    "check": c.name, "status": "fail", "passed": false,
                    "expected": m.expected, "got": m.got,
                }),
            })
            .collect();
        list.extend(skipped.iter().map(|s| {
            json!({
                "binding": null, "check": s.name, "status": "skip", "passed": null,
                "detail": s.reason,
            })
        }));
        crate::render::print_json(&json!({
            "agent": card.name,
            "conformanceAgent": tck,
            "checks": list,
            "passed": passed,
            "failed": failed,
            "skipped": skipped.len(),
        }))?;
    } else {
        let mut t = Text::new();
        t.field("Agent", &card.name);
        t.field(
            "Conformance Agent",
            if tck {
                "yes (its card declares the TCK skill): every check runs"
            } else {
                "no: the checks that need it are skipped (serve it with a2a serve --agent conformance)"
            },
        );
        t.field(
            "Bindings",
            bindings
                .iter()
                .map(|b| b.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        );
        for c in &results {
            t.blank();
            match c.binding {
                Some(b) => t.field("Check", format!("[{b}] {}", c.name)),
                None => t.field("Check", c.name),
            };
            match &c.result {
                Ok(d) => {
                    t.field("Result", format!("pass ({d})"));
                }
                Err(m) => {
                    t.field("Result", "FAIL");
                    t.field("Expected", &m.expected);
                    t.field("Got", &m.got);
                }
            }
        }
        for s in &skipped {
            t.blank();
            t.field("Check", s.name);
            t.field("Result", format!("skipped: {}", s.reason));
        }
        t.blank();
        t.field("Passed", passed.to_string());
        t.field("Failed", failed.to_string());
        t.field("Skipped", skipped.len().to_string());
        t.print();
    }
    let total = results.len();
    if failed > 0 {
        eprintln!("warning: {failed} of {total} conformance checks failed");
        return Ok(exit::FAILURE);
    }
    if !skipped.is_empty() {
        eprintln!(
            "warning: {} checks were skipped{}",
            skipped.len(),
            if args.strict {
                " (--strict: failing)"
            } else {
                ""
            }
        );
        if args.strict {
            return Ok(exit::FAILURE);
        }
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conformance_agent_is_known_by_its_card() {
        assert!(is_conformance_agent(&agentwire_agents::conformance::card()));
        assert!(!is_conformance_agent(&agentwire_agents::echo::card()));
    }

    #[test]
    fn failures_read_as_expected_and_got() {
        let e = ClientError::from(agentwire_types::A2aError::task_not_found("t1"));
        let r: Result<Task, ClientError> = Err(e);
        let m = expect_error(r, ErrorKind::TaskNotCancelable, task_text).unwrap_err();
        assert_eq!(m.expected, "TaskNotCancelableError");
        assert!(m.got.starts_with("TaskNotFoundError: "), "{}", m.got);
        let ok: Result<Task, ClientError> = Ok(Task::default());
        let m = expect_error(ok, ErrorKind::TaskNotFound, task_text).unwrap_err();
        assert!(
            m.got.contains("a success: task") && !m.got.contains('{'),
            "{}",
            m.got
        );
    }
}
