//! `a2a chat`: an interactive multi-turn session (CLI SPEC 8.1, Tier 3).
//!
//! The session carries the `contextId` across turns and, while a task waits
//! for input or authorization, its `taskId`; it keeps a ledger (in memory,
//! for this session only) of the context's tasks and artifact versions, so
//! `/versions`, `/accept` and `/refine` work on what the agent produced.
//! Nothing is written to disk: the next `a2a` run knows nothing of it.
//!
//! On a terminal it prompts on stderr and streams replies live. With a
//! non-terminal standard input it reads one turn per line, never prompts,
//! and prints plain text (so it never blocks on interactive input).

use std::io::{IsTerminal, Write};

use agentwire_client::ledger::{ArtifactVersion, Ledger};
use agentwire_client::{CallOptions, Transport};
use agentwire_types::{
    CancelTaskRequest, Message, SendMessageResponse, TaskState, send_message_response,
};
use clap::Args;
use futures::StreamExt;
use tokio::io::AsyncBufReadExt;

use crate::agent::Agent;
use crate::error::{CliError, exit};
use crate::render::{self, Text};
use crate::send::EventPrinter;
use crate::{Globals, OutputFormat};

#[derive(Args, Debug)]
pub struct ChatArgs {
    /// Do not stream replies even when the agent supports it.
    #[arg(long)]
    pub no_stream: bool,
}

const HELP: &str = "\
Type a message and press Enter. Commands:
  /versions              artifact versions in this conversation
  /accept <artifactId>   mark a version as the accepted one (or its number from /versions)
  /refine <artifactId> <text>
                         ask for a new version of that artifact (new task, same context)
  /pending               tasks waiting for input or authorization
  /cancel                cancel the task waiting for input
  /context               the current context and its tasks
  /new                   start a new conversation (forget the context)
  /help                  this text
  /quit                  leave (also Ctrl-D)";

struct Session {
    agent: Agent,
    ledger: Ledger,
    context_id: Option<String>,
    /// The task waiting for the user, if any.
    active_task: Option<String>,
    interactive: bool,
    live: bool,
    stream: bool,
    verbose: bool,
    json: bool,
}

pub async fn run(g: &Globals, args: ChatArgs) -> Result<u8, CliError> {
    let interactive = std::io::stdin().is_terminal();
    let agent = Agent::connect(g).await?;
    let stream = !args.no_stream && agent.card.supports_streaming();
    let mut s = Session {
        live: std::io::stdout().is_terminal() && g.output == OutputFormat::Text,
        ledger: Ledger::in_memory(),
        context_id: g.context_id.clone(),
        active_task: g.task_id.clone(),
        interactive,
        stream,
        verbose: g.verbose,
        json: g.output == OutputFormat::Json,
        agent,
    };
    if interactive {
        eprintln!(
            "Chatting with {} ({}). /help for commands, /quit to leave.",
            s.agent.card.name,
            s.agent
                .client
                .inner
                .binding()
                .map(|b| b.to_string())
                .unwrap_or_default()
        );
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        if interactive {
            let prompt = match &s.active_task {
                Some(t) => format!("[reply to {}] > ", short(t)),
                None => "> ".to_owned(),
            };
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "{prompt}");
            let _ = e.flush();
        }
        let line = tokio::select! {
            l = lines.next_line() => l.map_err(|e| CliError::internal(format!("cannot read input: {e}")))?,
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(line) = line else { break };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match s.command(g, line).await {
            Ok(true) => {}
            Ok(false) => break,
            // A failed turn is reported and the session goes on; without a
            // terminal, the first failure ends the session with its status.
            Err(e) => {
                let code = crate::report_error(&e, s.json);
                if !interactive {
                    return Ok(code);
                }
            }
        }
    }
    Ok(exit::OK)
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

impl Session {
    /// Runs one input line; `Ok(false)` ends the session.
    async fn command(&mut self, g: &Globals, line: &str) -> Result<bool, CliError> {
        let (cmd, rest) = match line.split_once(char::is_whitespace) {
            Some((c, r)) => (c, r.trim()),
            None => (line, ""),
        };
        match cmd {
            "/quit" | "/exit" => return Ok(false),
            "/help" => println!("{HELP}"),
            "/new" => {
                self.context_id = None;
                self.active_task = None;
                self.say("New conversation.");
            }
            "/context" => self.show_context().await?,
            "/versions" => self.show_versions().await?,
            "/pending" => {
                let mut t = Text::new();
                let pending = self.ledger.pending().await.map_err(ledger_err)?;
                t.field("Pending Tasks", pending.len().to_string());
                for p in pending {
                    t.field("Task", format!("{} {}", p.id, render::state_label(p.state)));
                }
                t.print();
            }
            "/accept" => {
                let id = self.version_ref(rest).await?;
                let v = self.ledger.accept(&id).await.map_err(ledger_err)?;
                self.say(&format!(
                    "Accepted {} ({}).",
                    v.artifact_id, v.artifact_name
                ));
            }
            "/refine" => {
                let (which, text) = rest.split_once(char::is_whitespace).ok_or_else(|| {
                    CliError::usage("usage: /refine <artifactId or number> <what to change>")
                })?;
                let id = self.version_ref(which).await?;
                let m = self
                    .ledger
                    .refinement_message(&id, Message::user_text(text.trim()))
                    .await
                    .map_err(ledger_err)?;
                self.turn(g, m, Some(id)).await?;
            }
            "/cancel" => {
                let Some(id) = self.active_task.clone() else {
                    return Err(CliError::usage("no task is waiting; nothing to cancel"));
                };
                let t = self
                    .agent
                    .client
                    .cancel_task(
                        CancelTaskRequest {
                            id: id.clone(),
                            ..Default::default()
                        },
                        &CallOptions::new(),
                    )
                    .await
                    .map_err(|e| self.agent.task_err(&e, &id))?;
                self.ledger.record_task(&t).await.map_err(ledger_err)?;
                self.active_task = None;
                self.say(&format!(
                    "Task {} is {}.",
                    t.id,
                    render::state_label(t.state())
                ));
            }
            c if c.starts_with('/') => {
                return Err(CliError::usage(format!(
                    "unknown command {c}; /help lists them"
                )));
            }
            _ => {
                let mut m = Message::user_text(line);
                if let Some(c) = &self.context_id {
                    m.context_id.clone_from(c);
                }
                if let Some(t) = &self.active_task {
                    m.task_id.clone_from(t);
                }
                self.turn(g, m, None).await?;
            }
        }
        Ok(true)
    }

    fn say(&self, text: &str) {
        if self.interactive {
            eprintln!("{text}");
        } else {
            let mut t = Text::new();
            t.field("Note", text);
            t.print();
        }
    }

    /// An artifact id, or a number from `/versions`.
    async fn version_ref(&self, r: &str) -> Result<String, CliError> {
        let r = r.trim();
        if r.is_empty() {
            return Err(CliError::usage(
                "name an artifact version (its id, or its number from /versions)",
            ));
        }
        if let Ok(n) = r.parse::<usize>() {
            let all = self.versions().await?;
            return all
                .get(n.wrapping_sub(1))
                .map(|v| v.artifact_id.clone())
                .ok_or_else(|| CliError::usage(format!("no version number {n}; see /versions")));
        }
        Ok(r.to_owned())
    }

    async fn versions(&self) -> Result<Vec<ArtifactVersion>, CliError> {
        let Some(ctx) = &self.context_id else {
            return Ok(Vec::new());
        };
        Ok(self
            .ledger
            .context(ctx)
            .await
            .map_err(ledger_err)?
            .map(|v| v.versions)
            .unwrap_or_default())
    }

    async fn show_versions(&self) -> Result<(), CliError> {
        let all = self.versions().await?;
        let mut t = Text::new();
        t.field("Versions", all.len().to_string());
        for (i, v) in all.iter().enumerate() {
            let chain = self
                .ledger
                .chain(&v.artifact_id)
                .await
                .map_err(ledger_err)?;
            t.blank();
            t.field("Number", (i + 1).to_string());
            t.field("Artifact", &v.artifact_name);
            t.field("Version", chain.len().to_string());
            t.field("Artifact ID", &v.artifact_id);
            t.field("Task ID", &v.task_id);
            if let Some(p) = &v.previous_artifact_id {
                t.field("Refines", p);
            }
            t.field("Accepted", if v.accepted_by_user { "yes" } else { "no" });
        }
        t.print();
        Ok(())
    }

    async fn show_context(&self) -> Result<(), CliError> {
        let mut t = Text::new();
        match &self.context_id {
            None => {
                t.field("Context ID", "(none yet)");
            }
            Some(c) => {
                t.field("Context ID", c);
                if let Some(v) = self.ledger.context(c).await.map_err(ledger_err)? {
                    t.field("Tasks", v.tasks.len().to_string());
                    for task in v.tasks {
                        t.field(
                            "Task",
                            format!("{} {}", task.id, render::state_label(task.state)),
                        );
                    }
                }
            }
        }
        if let Some(a) = &self.active_task {
            t.field("Waiting Task", a);
        }
        t.print();
        Ok(())
    }

    /// Sends one message and shows the answer.
    async fn turn(
        &mut self,
        g: &Globals,
        message: Message,
        refines: Option<String>,
    ) -> Result<(), CliError> {
        let continuing = !message.task_id.is_empty();
        let response: SendMessageResponse = if let Some(target) = &refines {
            self.ledger
                .refine(&self.agent.client, target, message)
                .await
                .map_err(|e| self.ledger_call_err(e))?
        } else if self.stream && !continuing {
            let mut events = self
                .ledger
                .stream(&self.agent.client, message, &CallOptions::new())
                .await
                .map_err(|e| self.ledger_call_err(e))?;
            let mut printer = EventPrinter::new(g, self.agent.reference());
            let mut task_id = None;
            while let Some(ev) = events.next().await {
                let ev = ev.map_err(|e| self.agent.err(&e))?;
                if task_id.is_none() {
                    task_id = ev.task_id().map(str::to_owned);
                }
                if self.live || self.json {
                    printer.event(&ev)?;
                }
            }
            // The final state as recorded.
            match task_id {
                Some(id) => {
                    let rec = self.ledger.task(&id).await.map_err(ledger_err)?;
                    match rec {
                        Some(r) => SendMessageResponse::from(r.task),
                        None => SendMessageResponse::default(),
                    }
                }
                None => {
                    let ctx = self.context_id.clone().unwrap_or_default();
                    let last = self
                        .ledger
                        .context(&ctx)
                        .await
                        .map_err(ledger_err)?
                        .and_then(|v| v.messages.last().cloned());
                    match last {
                        Some(m) => SendMessageResponse::from(m),
                        None => SendMessageResponse::default(),
                    }
                }
            }
        } else {
            self.ledger
                .send(&self.agent.client, message)
                .await
                .map_err(|e| self.ledger_call_err(e))?
        };
        match &response.payload {
            Some(send_message_response::Payload::Task(task)) => {
                self.context_id = Some(task.context_id.clone());
                self.active_task = task.state().is_interrupted().then(|| task.id.clone());
                if !(self.stream && (self.live || self.json)) || refines.is_some() {
                    if self.json {
                        render::print_json(&response)?;
                    } else {
                        let mut t = Text::new();
                        render::task(&mut t, task, self.verbose);
                        t.print();
                    }
                }
                if !self.json {
                    let versions = self
                        .ledger
                        .versions_of_task(&task.id)
                        .await
                        .map_err(ledger_err)?;
                    let mut t = Text::new();
                    for v in versions {
                        let n = self
                            .ledger
                            .chain(&v.artifact_id)
                            .await
                            .map_err(ledger_err)?
                            .len();
                        t.field(
                            "Artifact Version",
                            format!(
                                "{} v{n} ({}){}",
                                v.artifact_name,
                                v.artifact_id,
                                match &v.previous_artifact_id {
                                    Some(p) => format!(", refines {p}"),
                                    None => String::new(),
                                }
                            ),
                        );
                    }
                    t.field("State", render::state_label(task.state()));
                    t.print();
                    match task.state() {
                        TaskState::InputRequired => {
                            self.say("The agent needs more input: type your reply.")
                        }
                        TaskState::AuthRequired => {
                            self.say("The agent needs authorization: complete it, then reply.")
                        }
                        _ => {}
                    }
                }
            }
            Some(send_message_response::Payload::Message(m)) => {
                if !m.context_id.is_empty() {
                    self.context_id = Some(m.context_id.clone());
                }
                self.active_task = None;
                if self.json {
                    if !(self.stream && self.json) {
                        render::print_json(&response)?;
                    }
                } else if !(self.stream && self.live) {
                    let mut t = Text::new();
                    render::message(&mut t, m, self.verbose);
                    t.print();
                }
            }
            None => {}
        }
        Ok(())
    }

    fn ledger_call_err(&self, e: agentwire_client::ledger::LedgerError) -> CliError {
        match e {
            agentwire_client::ledger::LedgerError::Client(c) => self.agent.err(&c),
            other => ledger_err(other),
        }
    }
}

fn ledger_err(e: agentwire_client::ledger::LedgerError) -> CliError {
    match e {
        agentwire_client::ledger::LedgerError::UnknownArtifact(id) => CliError::usage(format!(
            "no artifact version {id} in this session; see /versions"
        )),
        other => CliError::internal(other.to_string()),
    }
}
