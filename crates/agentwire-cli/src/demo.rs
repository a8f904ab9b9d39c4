//! `a2a demo`: the release coordination story end to end, in one command.
//!
//! The command serves the Dependency Compatibility Agent on a free loopback
//! port, in this process, and runs the release coordinator against it
//! (`agentwire_agents::coordinator`): card discovery, a quick question answered
//! with a Message, the analysis Task that stops in input-required, the
//! answer in the same task, the streamed report (status updates and
//! artifact chunks), completion, the refinement as a new task (which asks
//! which artifact is meant), and the client ledger with the two versions of
//! the report. Each step is printed as it happens; `-o json` prints the raw
//! protocol exchange instead, one JSON object per line.

use std::io::Write;
use std::time::Duration;

use agentwire_agents::coordinator::{
    ReleaseCoordinator, StoryEvent, payment_service_files, to_json,
};
use agentwire_agents::depcompat::{self, DepCompatAgent};
use agentwire_client::Binding;
use agentwire_server::A2aServer;
use agentwire_types::{Part, StreamResponse, stream_response};
use base64::Engine;
use clap::Args;
use serde_json::{Value, json};

use crate::error::{CliError, exit};
use crate::{Globals, OutputFormat};

/// Options of `a2a demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// The release coordinator's goal.
    #[arg(long, default_value = "upgrade payment-service to Node 24")]
    pub goal: String,
    /// Delegate to the Dependency Compatibility Agent at this URL (for
    /// example one `a2a serve --agent depcompat` runs) instead of serving
    /// one in this process.
    #[arg(long, value_name = "URL")]
    pub agent_url: Option<String>,
    #[command(flatten)]
    pub timeout: crate::TimeoutOpt,
    #[command(flatten)]
    pub transport: crate::TransportOpt,
    #[command(flatten)]
    pub registry: crate::RegistryOpt,
    #[command(flatten)]
    pub ledger: crate::ledger::LedgerOpts,
}

impl crate::Apply for DemoArgs {
    fn apply(&self, g: &mut Globals) {
        self.ledger.apply(g);
        self.transport.apply(g);
        self.registry.apply(g);
        self.timeout.apply(g);
    }
}

/// Prints a line, ignoring a closed stdout.
fn out(line: impl AsRef<str>) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{}", line.as_ref());
    let _ = o.flush();
}

/// The short form of an id (its random tail: see [`crate::ledger::short_id`]).
fn short(id: &str) -> String {
    crate::ledger::short_id(id).to_owned()
}

/// One line of text, at most `n` characters.
fn clip(s: &str, n: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= n {
        one
    } else {
        format!("{}...", one.chars().take(n).collect::<String>())
    }
}

/// A request body (ProtoJSON `SendMessageRequest`) in one line.
fn describe_request(body: &Value) -> String {
    let m = &body["message"];
    let mut parts = Vec::new();
    for p in m["parts"].as_array().into_iter().flatten() {
        let mut d = if let Some(t) = p["text"].as_str() {
            format!("text \"{}\"", clip(t, 70))
        } else if let Some(raw) = p["raw"].as_str() {
            let size = base64::engine::general_purpose::STANDARD
                .decode(raw)
                .map_or(0, |b| b.len());
            format!(
                "file {} ({size} bytes)",
                p["filename"].as_str().unwrap_or("(unnamed)")
            )
        } else if !p["data"].is_null() {
            format!("data {}", clip(&p["data"].to_string(), 60))
        } else {
            "a part".to_owned()
        };
        if let Some(id) = p["metadata"]["artifactId"].as_str() {
            d.push_str(&format!(" [metadata artifactId {}]", short(id)));
        }
        parts.push(d);
    }
    let mut s = parts.join(" + ");
    if let Some(t) = m["taskId"].as_str() {
        s.push_str(&format!("; taskId {}", short(t)));
    }
    if let Some(c) = m["contextId"].as_str() {
        s.push_str(&format!("; contextId {}", short(c)));
    }
    if let Some(refs) = m["referenceTaskIds"].as_array() {
        let refs: Vec<String> = refs.iter().filter_map(Value::as_str).map(short).collect();
        s.push_str(&format!("; referenceTaskIds [{}]", refs.join(", ")));
    }
    s
}

fn message_text(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(Part::as_text)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A streamed event in one line.
fn describe_event(e: &StreamResponse) -> String {
    match &e.payload {
        Some(stream_response::Payload::Task(t)) => format!(
            "Task {} {} (context {}){}",
            short(&t.id),
            t.state().as_str_name(),
            short(&t.context_id),
            if t.state().is_interrupted() {
                "  (the task as it was; this turn's events follow)"
            } else {
                ""
            }
        ),
        Some(stream_response::Payload::Message(m)) => {
            format!("Message \"{}\"", clip(&message_text(&m.parts), 90))
        }
        Some(stream_response::Payload::StatusUpdate(s)) => {
            let text = s
                .status
                .as_ref()
                .and_then(|st| st.message.as_deref())
                .map(|m| format!("  \"{}\"", clip(&message_text(&m.parts), 90)))
                .unwrap_or_default();
            format!("status {}{text}", s.state().as_str_name())
        }
        Some(stream_response::Payload::ArtifactUpdate(a)) => {
            let art = a.artifact.clone().unwrap_or_default();
            let what: Vec<String> = art
                .parts
                .iter()
                .map(|p| {
                    if let Some(t) = p.as_text() {
                        let title = t.lines().find(|l| l.starts_with('#')).unwrap_or("");
                        format!("{} lines {}", t.lines().count(), clip(title, 50))
                    } else if p.as_data().is_some() {
                        "a data part (the structured report)".to_owned()
                    } else {
                        "a part".to_owned()
                    }
                })
                .collect();
            let name = if art.name.is_empty() {
                "(chunk)".to_owned()
            } else {
                art.name
            };
            format!(
                "artifact {name} {}: {}{}{}",
                short(&art.artifact_id),
                what.join(", "),
                if a.append { "  append" } else { "" },
                if a.last_chunk { "  lastChunk" } else { "" }
            )
        }
        None => "(empty event)".to_owned(),
    }
}

/// Runs the demo.
pub async fn run(g: &Globals, args: DemoArgs) -> Result<u8, CliError> {
    let json_out = matches!(g.output, OutputFormat::Json);
    let bindings: Vec<Binding> = if g.transport.is_empty() {
        // The story picks HTTP+JSON; the others remain as fallbacks.
        vec![Binding::HttpJson, Binding::JsonRpc, Binding::Grpc]
    } else {
        let mut b = Vec::new();
        for name in &g.transport {
            b.push(Binding::parse(name).ok_or_else(|| {
                CliError::usage(format!(
                    "--transport {name}: not a binding (JSONRPC, HTTP+JSON, GRPC)"
                ))
            })?);
        }
        b
    };

    // With --registry, the coordinator finds the agent through the registry
    // (it must be published there); otherwise the demo serves it itself.
    if let Some(registry) = g.registry.as_deref().filter(|r| !r.trim().is_empty()) {
        let registry = agentwire_client::registry::Registry::new(registry)
            .map_err(|e| CliError::usage(format!("--registry {registry}: {e}")))?;
        if !json_out {
            // In words: what the story is and where the agent comes from.
            out(
                "a2a demo: the bundled example, with the agent found through a registry. A release",
            );
            out(format!(
                "coordinator (the client) asks the registry at {} for an agent that can check",
                registry.base_url()
            ));
            out("dependencies, then delegates the analysis to it, speaking A2A.");
            out(format!("Goal: {}", args.goal));
        }
        let coordinator = ReleaseCoordinator::new()
            .with_bindings(bindings)
            .with_wait(g.timeout.unwrap_or(Duration::from_secs(30)))
            .with_registry(registry)
            .with_ledger(crate::ledger::session(g, "").await);
        return tell(coordinator, "", &args.goal, json_out, None).await;
    }
    // With --agent-url, the coordinator delegates to the agent at that URL
    // (one that `a2a serve --agent depcompat` runs, say) instead of
    // serving one here.
    if let Some(agent) = args
        .agent_url
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        if !json_out {
            out(
                "a2a demo: the bundled example end to end. A release coordinator (the client) delegates a",
            );
            out(format!(
                "dependency analysis to the agent at {agent}, speaking A2A."
            ));
            out(format!("Goal: {}", args.goal));
        }
        let coordinator = ReleaseCoordinator::new()
            .with_bindings(bindings)
            .with_wait(g.timeout.unwrap_or(Duration::from_secs(30)))
            .with_ledger(crate::ledger::session(g, agent).await);
        return tell(coordinator, agent, &args.goal, json_out, None).await;
    }
    // The server keeps its tasks in SQLite, the default of `a2a serve`: a
    // file of its own, removed when the demo ends.
    let db = std::env::temp_dir().join(format!("a2a-demo-{}.db", std::process::id()));
    let _cleanup = RemoveOnDrop(db.clone());
    let store = agentwire_server::store::SqliteStore::open(&db)
        .await
        .map_err(|e| CliError::internal(format!("cannot open the SQLite task store: {e}")))?;
    let server = A2aServer::new(depcompat::card(), DepCompatAgent)
        .store(std::sync::Arc::new(store))
        .bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::internal(format!("cannot listen on a loopback port: {e}")))?
        .spawn();
    let url = server.base_url();
    if !json_out {
        out(
            "a2a demo: the bundled example end to end. A release coordinator (the client) delegates a",
        );
        out("dependency analysis to the Dependency Compatibility Agent (the server), both in");
        out("this process, speaking A2A over loopback.");
        out("");
        out(format!(
            "Serving the Dependency Compatibility Agent on {url} (JSON-RPC, HTTP+JSON, gRPC),"
        ));
        out(format!("tasks kept in SQLite at {}", db.display()));
        out(format!("Goal: {}", args.goal));
    }

    // The ledger records the story like any command's exchanges; the
    // agent served here ends with the demo, so its contexts are recorded
    // without an agent to continue them with.
    let coordinator = ReleaseCoordinator::new()
        .with_bindings(bindings)
        .with_wait(g.timeout.unwrap_or(Duration::from_secs(30)))
        .with_ledger(crate::ledger::session(g, "").await);
    tell(coordinator, &url, &args.goal, json_out, Some(server)).await
}

/// Runs the coordinator against `url` (or through its registry), printing
/// the story, and stops `server` (the in-process agent) at the end.
async fn tell(
    coordinator: ReleaseCoordinator,
    url: &str,
    goal: &str,
    json_out: bool,
    server: Option<agentwire_server::ServerHandle>,
) -> Result<u8, CliError> {
    let mut step = 0;
    let mut printer = |e: StoryEvent| {
        if json_out {
            let line = match e {
                StoryEvent::Card { url, card } => json!({
                    "type": "card", "method": "GET", "url": url, "body": to_json(&card)
                }),
                StoryEvent::Request {
                    method,
                    binding,
                    body,
                } => json!({"type": "request", "method": method, "binding": binding, "body": body}),
                StoryEvent::Response { method, body } => {
                    json!({"type": "response", "method": method, "body": body})
                }
                StoryEvent::Event { method, event } => {
                    json!({"type": "event", "method": method, "body": to_json(&event)})
                }
                // The story's steps and what it says of them, as in text.
                StoryEvent::Step(title) => {
                    step += 1;
                    json!({"type": "step", "step": step, "title": title})
                }
                StoryEvent::Say(text) => json!({"type": "note", "text": text}),
            };
            out(line.to_string());
            return;
        }
        match e {
            StoryEvent::Step(title) => {
                step += 1;
                out("");
                out(format!("[{step}] {title}"));
            }
            StoryEvent::Say(s) => out(format!("    {s}")),
            StoryEvent::Card { url, card } => {
                out(format!("    GET {url}"));
                let bindings: Vec<&str> = card
                    .supported_interfaces
                    .iter()
                    .map(|i| i.protocol_binding.as_str())
                    .collect();
                out(format!(
                    "    <- card \"{}\" {}: {} skills, interfaces {}, input {}, output {}",
                    card.name,
                    card.version,
                    card.skills.len(),
                    bindings.join(", "),
                    card.default_input_modes.join(", "),
                    card.default_output_modes.join(", ")
                ));
            }
            StoryEvent::Request {
                method,
                binding,
                body,
            } => out(format!(
                "    -> {method} ({binding}): {}",
                describe_request(&body)
            )),
            StoryEvent::Response { method, body } => {
                let what = if let Some(m) = body.get("message") {
                    let text: Vec<&str> = m["parts"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p["text"].as_str())
                        .collect();
                    format!(
                        "Message (no task; contextId {}) \"{}\"",
                        short(m["contextId"].as_str().unwrap_or("")),
                        clip(&text.join(" "), 90)
                    )
                } else if let Some(t) = body.get("task") {
                    format!(
                        "Task {} {}",
                        short(t["id"].as_str().unwrap_or("")),
                        t["status"]["state"].as_str().unwrap_or("")
                    )
                } else {
                    clip(&body.to_string(), 90)
                };
                out(format!("    <- {method}: {what}"));
            }
            StoryEvent::Event { event, .. } => {
                let ends = event.ends_stream();
                out(format!("    <- {}", describe_event(&event)));
                if ends && !matches!(event.payload, Some(stream_response::Payload::Task(_))) {
                    out("       (the agent closes the stream here)");
                }
            }
        }
    };
    // The whole story in one span: with traces on (an OTLP endpoint in the
    // environment), the agent's spans are its children, in the same trace.
    let span = tracing::info_span!(target: "a2a::demo", "a2a demo", goal = %goal);
    let result = tracing::Instrument::instrument(
        coordinator.run(url, goal, &payment_service_files(), &mut printer),
        span,
    )
    .await;
    if let Some(server) = server {
        let _ = server.shutdown().await;
    }
    let outcome = result.map_err(|e| CliError::internal(format!("the demo failed: {e}")))?;
    if json_out {
        out(outcome_json(&outcome).to_string());
        return Ok(exit::OK);
    }
    let report = &outcome.json_report["summary"];
    out("");
    out(format!(
        "Done over {}: 1 message, 2 tasks ({} and {}), {} artifact chunks streamed; verdict {} ({} high, {} medium, {} low).",
        outcome
            .binding
            .map_or_else(|| "?".to_owned(), |b| b.as_str().to_owned()),
        short(&outcome.analysis.id),
        short(&outcome.refinement.id),
        outcome.chunks,
        report["verdict"].as_str().unwrap_or("?"),
        report["high"],
        report["medium"],
        report["low"],
    ));
    let v = outcome.markdown_versions.len();
    out(format!(
        "The final report ({}, version {v} of {v}, accepted in the ledger):",
        depcompat::MARKDOWN_REPORT
    ));
    out("");
    out(outcome.final_markdown.trim_end());
    Ok(exit::OK)
}

/// The last line of `-o json`: the outcome, with the ledger's chain of
/// versions of the Markdown report (full ids: the JSON form never shortens
/// them).
fn outcome_json(outcome: &agentwire_agents::coordinator::Outcome) -> Value {
    let report = &outcome.json_report["summary"];
    let versions: Vec<Value> = outcome
        .markdown_versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({
                "version": i + 1,
                "artifactId": v.artifact_id,
                "artifactName": v.artifact_name,
                "taskId": v.task_id,
                "contextId": v.context_id,
                "previousArtifactId": v.previous_artifact_id,
                "accepted": v.accepted_by_user,
            })
        })
        .collect();
    json!({
        "type": "outcome",
        "binding": outcome.binding.map(|b| b.as_str()),
        "contextId": outcome.context_id,
        "tasks": [outcome.analysis.id, outcome.refinement.id],
        "artifactChunks": outcome.chunks,
        "verdict": report["verdict"],
        "high": report["high"],
        "medium": report["medium"],
        "low": report["low"],
        "ledger": {
            "artifactName": depcompat::MARKDOWN_REPORT,
            "versions": versions,
        },
    })
}

/// Removes the demo's database files when the demo ends (after the store
/// that held them: declared before it), its lock's side file included
/// (the name is the demo process's own, no other process uses it).
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", ".lock"] {
            let mut p = self.0.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_in_one_line() {
        let body = json!({"message": {
            "parts": [
                {"text": "Check the dependencies"},
                {"raw": "aGVsbG8=", "filename": "package.json"},
                {"text": "The Markdown report", "metadata": {"artifactId": "0123456789"}}
            ],
            "contextId": "abcdefghijk",
            "referenceTaskIds": ["t1234567890"]
        }});
        assert_eq!(
            describe_request(&body),
            "text \"Check the dependencies\" + file package.json (5 bytes) + text \"The Markdown report\" [metadata artifactId 0123456789]; contextId abcdefghijk; referenceTaskIds [t1234567890]"
        );
    }
}
