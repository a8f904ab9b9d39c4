//! `a2a chat`: an interactive multi-turn session for a person at a terminal
//! (CLI SPEC 8.1, Tier 3).
//!
//! The session carries the `contextId` across turns and, while a task waits
//! for input or authorization, its `taskId`; it keeps a ledger of the
//! context's tasks and artifact versions (in memory for the session's
//! views, copied into the `a2a` ledger file), so `/versions`, `/show`,
//! `/accept` and `/refine` work on what the agent produced. `/file` and
//! `/data` attach parts to the next message.
//!
//! Leaving: `/quit`, Ctrl-D, or Ctrl-C at the prompt (exit 0: a user
//! ending a chat is not an error). Ctrl-C while a reply streams stops
//! following that reply; the session goes on, and the task keeps running
//! on the agent (the note says how to follow or cancel it).
//!
//! Chat is gated by terminal detection (CLI SPEC 6.1): it refuses to run
//! when standard input is not a terminal (scripts use `a2a send`). Lines
//! are read with `rustyline` (editing, history, completion of commands and
//! file names); the history is kept in memory for the session and, only
//! with `--save-history`, in a file (mode 600) under the state directory.
//! Replies to a task waiting for authorization, lines that look like they
//! carry a credential and lines starting with a space are never kept.
//!
//! What the agent says is printed for a person when standard output is a
//! terminal (text and Markdown, streamed as it arrives, see
//! [`render::terminal`]); when it is not, the session degrades to the
//! labelled `text` format (CLI SPEC 11.2), and `-o json` prints the
//! protocol objects, one per line. Prompts, notes and the progress line go
//! to the terminal, never to standard output.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use agentwire_client::follow::{PollOptions, wait_for_task};
use agentwire_client::ledger::{ArtifactVersion, Ledger, LedgerError};
use agentwire_client::{CallOptions, Transport};
use agentwire_types::{
    CancelTaskRequest, Message, Part, Role, SendMessageResponse, StreamResponse, Task, TaskState,
    TaskStatus, send_message_response, stream_response,
};
use clap::Args;
use futures::StreamExt;
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{Helper, Highlighter, Hinter, Validator};

use crate::agent::Agent;
use crate::error::{CliError, exit};
use crate::progress::Progress;
use crate::render::terminal::{MarkdownStream, Screen, is_markdown};
use crate::render::{self, Text};
use crate::{Globals, OutputFormat};

#[derive(Args, Debug)]
pub struct ChatArgs {
    /// Do not stream replies even when the agent supports it.
    #[arg(long)]
    pub no_stream: bool,
    /// Keep the typed lines for the next sessions, in a2a-cli/chat-history under
    /// $XDG_STATE_HOME (default ~/.local/state), mode 600. Lines that start with a
    /// space, look like credentials or answer an authorization request are never kept.
    #[arg(long)]
    pub save_history: bool,
    #[command(flatten)]
    pub ledger: crate::ledger::LedgerOpts,
}

/// The commands, in the order `/help` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Cmd {
    File,
    Data,
    Detach,
    Versions,
    Show,
    Accept,
    Refine,
    Pending,
    Cancel,
    Context,
    New,
    Help,
    Quit,
}

/// (command, name, arguments, what it does): the one list `/help`, the
/// completion and the dispatch use.
const COMMANDS: &[(Cmd, &str, &str, &str)] = &[
    (
        Cmd::File,
        "/file",
        "PATH [TYPE]",
        "attach a file (path or http(s) URL) to the next message; TYPE defaults from the extension",
    ),
    (
        Cmd::Data,
        "/data",
        "JSON",
        "attach a data part (any JSON value) to the next message",
    ),
    (Cmd::Detach, "/detach", "", "drop the attached parts"),
    (
        Cmd::Versions,
        "/versions",
        "",
        "the artifact versions of this conversation, numbered",
    ),
    (
        Cmd::Show,
        "/show",
        "N|ID",
        "print one artifact version in full",
    ),
    (
        Cmd::Accept,
        "/accept",
        "N|ID",
        "mark that version as the accepted one",
    ),
    (
        Cmd::Refine,
        "/refine",
        "N|ID TEXT",
        "ask for a new version of that artifact (a new task in this conversation)",
    ),
    (
        Cmd::Pending,
        "/pending",
        "",
        "tasks waiting for input or authorization",
    ),
    (
        Cmd::Cancel,
        "/cancel",
        "",
        "cancel the task waiting for your reply",
    ),
    (
        Cmd::Context,
        "/context",
        "",
        "this conversation: its context, tasks and attached parts",
    ),
    (
        Cmd::New,
        "/new",
        "",
        "start a new conversation (forget the context)",
    ),
    (Cmd::Help, "/help", "", "this list"),
    (Cmd::Quit, "/quit", "", "leave (also Ctrl-D)"),
];

/// Other spellings.
const ALIASES: &[(&str, Cmd)] = &[("/exit", Cmd::Quit), ("/?", Cmd::Help)];

fn lookup(name: &str) -> Option<Cmd> {
    COMMANDS
        .iter()
        .find(|(_, n, _, _)| *n == name)
        .map(|(c, ..)| *c)
        .or_else(|| ALIASES.iter().find(|(n, _)| *n == name).map(|(_, c)| *c))
}

fn help_text() -> String {
    format!(
        "Type a message and press Enter: it goes to the agent with the attached parts,\n\
         as the reply when a task waits for one. Commands:\n{}",
        command_list()
    )
}

/// One line per command.
fn command_list() -> String {
    let mut out = String::new();
    let width = COMMANDS
        .iter()
        .map(|(_, n, a, _)| n.len() + a.len() + 1)
        .max()
        .unwrap_or(0);
    for (_, name, args, what) in COMMANDS {
        let usage = if args.is_empty() {
            (*name).to_owned()
        } else {
            format!("{name} {args}")
        };
        out.push_str(&format!("  {usage:<width$}  {what}\n"));
    }
    out.push_str("N is a number from /versions. Tab completes commands and file names.\n");
    out.push_str(
        "Ctrl-C at the prompt leaves too; while a reply streams, it stops following the reply\n\
         (the task keeps running on the agent).\n",
    );
    out
}

/// Where the session's output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    /// Standard output is a terminal: text for a person.
    Terminal,
    /// Standard output is not a terminal: labelled `text` (SPEC 11.2).
    Text,
    /// `-o json`: the protocol objects, one per line.
    Json,
}

/// A part waiting for the next message, with how it was described.
struct Attachment {
    part: Part,
    label: String,
}

struct Session {
    agent: Agent,
    ledger: Ledger,
    context_id: Option<String>,
    /// The task waiting for the user, if any, and its status when it asked
    /// (to tell the agent's next answer from a repetition of the question).
    active_task: Option<String>,
    waiting: Option<TaskStatus>,
    attachments: Vec<Attachment>,
    out: Out,
    screen: Screen,
    stream: bool,
    verbose: bool,
    /// The task of the reply being streamed, once the stream named it.
    following: Option<String>,
}

pub async fn run(g: &Globals, args: ChatArgs) -> Result<u8, CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "a2a chat is interactive and needs a terminal, but its standard input is not one",
        )
        .with_hint(
            "in scripts and pipes use `a2a send` (--context-id continues a conversation, \
             --task-id answers a task waiting for input)",
        ));
    }
    // The session is copied into the ledger; `--context-id last` or a
    // short id names one of its contexts.
    let g = &crate::ledger::resolve_ids(&g.with(&args.ledger)).await?;
    let agent = Agent::connect(g).await?;
    let out = if g.output == OutputFormat::Json {
        Out::Json
    } else if std::io::stdout().is_terminal() {
        Out::Terminal
    } else {
        Out::Text
    };
    let stream = !args.no_stream && agent.card.supports_streaming();
    let ledger = crate::ledger::session(g, agent.reference()).await;
    let mut s = Session {
        ledger,
        context_id: g.context_id.clone(),
        active_task: g.task_id.clone(),
        waiting: None,
        attachments: Vec::new(),
        out,
        screen: Screen::detect(),
        stream,
        verbose: g.verbose,
        agent,
        following: None,
    };
    let mut editor = LineEditor::new(args.save_history)?;
    eprintln!(
        "Chatting with {} ({}). /help lists the commands, /quit leaves.",
        render::sanitize(&s.agent.card.name),
        s.agent
            .client
            .inner
            .binding()
            .map(|b| b.to_string())
            .unwrap_or_default()
    );
    loop {
        let line = match editor.read(&s.prompt()) {
            Ok(line) => line,
            // Ctrl-C at the prompt (typed, or a SIGINT sent to the
            // process) ends the session like Ctrl-D: the user leaving is
            // not an error.
            Err(ReadlineError::Interrupted | ReadlineError::Eof) => break,
            Err(ReadlineError::Signal(rustyline::error::Signal::Interrupt)) => break,
            Err(e) => {
                editor.save();
                return Err(CliError::internal(format!("cannot read the terminal: {e}")));
            }
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        editor.remember(&line, s.waiting_for_auth());
        s.following = None;
        let turn = s.command(g, text);
        // Ctrl-C while the agent answers stops following that reply (the
        // session goes on); the task, if one was started, keeps running.
        let result = tokio::select! {
            r = turn => r,
            _ = tokio::signal::ctrl_c() => {
                s.stopped_following();
                Ok(true)
            }
        };
        match result {
            Ok(true) => {}
            Ok(false) => break,
            // A failed turn is reported and the session goes on.
            Err(e) => {
                crate::report_error(&e, s.out == Out::Json);
            }
        }
    }
    editor.save();
    Ok(exit::OK)
}

/// The short form of an id (its random tail: see [`crate::ledger::short_id`]).
fn short(id: &str) -> &str {
    crate::ledger::short_id(id)
}

// ----- line editing ----------------------------------------------------

/// Completes the command names, and file names after `/file`.
#[derive(Helper, Hinter, Highlighter, Validator)]
struct ChatHelper {
    files: FilenameCompleter,
}

impl Completer for ChatHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let head = &line[..pos];
        if head.starts_with('/') && !head.contains(char::is_whitespace) {
            let names = COMMANDS
                .iter()
                .map(|(_, n, ..)| *n)
                .filter(|n| n.starts_with(head))
                .map(|n| Pair {
                    display: n.to_owned(),
                    replacement: format!("{n} "),
                })
                .collect();
            return Ok((0, names));
        }
        if head.starts_with("/file ") {
            return self.files.complete(line, pos, ctx);
        }
        Ok((pos, Vec::new()))
    }
}

struct LineEditor {
    editor: rustyline::Editor<ChatHelper, FileHistory>,
    /// Where the history is kept between sessions (`--save-history`).
    file: Option<PathBuf>,
}

impl LineEditor {
    fn new(save_history: bool) -> Result<Self, CliError> {
        let fail =
            |e: ReadlineError| CliError::internal(format!("cannot set up the terminal: {e}"));
        let config = rustyline::Config::builder()
            // Prompts and editing on the terminal itself, so that a
            // redirected standard output carries only the conversation.
            .behavior(rustyline::Behavior::PreferTerm)
            .auto_add_history(false)
            .history_ignore_space(true)
            .history_ignore_dups(true)
            .map_err(fail)?
            .max_history_size(1000)
            .map_err(fail)?
            .completion_type(rustyline::CompletionType::List)
            .build();
        let mut editor = rustyline::Editor::with_config(config).map_err(fail)?;
        editor.set_helper(Some(ChatHelper {
            files: FilenameCompleter::new(),
        }));
        let file = if save_history { history_file() } else { None };
        if let Some(path) = &file
            && path.exists()
            && let Err(e) = editor.load_history(path)
        {
            eprintln!(
                "warning: cannot read the chat history {}: {e}",
                path.display()
            );
        }
        Ok(Self { editor, file })
    }

    /// One line; the blocking read runs off the async worker.
    fn read(&mut self, prompt: &str) -> Result<String, ReadlineError> {
        tokio::task::block_in_place(|| self.editor.readline(prompt))
    }

    /// Adds a line to the history, unless it may carry a credential.
    fn remember(&mut self, line: &str, answers_auth: bool) {
        if answers_auth || may_hold_credentials(line) {
            return;
        }
        let _ = self.editor.add_history_entry(line);
    }

    fn save(&mut self) {
        let Some(path) = &self.file else { return };
        if let Some(dir) = path.parent() {
            let _ = create_private_dir(dir);
        }
        // rustyline writes the file with mode 600.
        if let Err(e) = self.editor.save_history(path) {
            eprintln!(
                "warning: cannot save the chat history {}: {e}",
                path.display()
            );
        }
    }
}

/// `$XDG_STATE_HOME/a2a-cli/chat-history`, else
/// `~/.local/state/a2a-cli/chat-history`.
fn history_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(base.join("a2a-cli").join("chat-history"))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir)
}

/// Whether a typed line looks like it carries a credential (then it is
/// kept out of the history).
fn may_hold_credentials(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    [
        "bearer",
        "password",
        "passwd",
        "secret",
        "token",
        "api key",
        "api-key",
        "api_key",
        "apikey",
        "authorization",
        "credential",
    ]
    .iter()
    .any(|w| l.contains(w))
}

// ----- the session -----------------------------------------------------

impl Session {
    fn prompt(&self) -> String {
        let mut tags = Vec::new();
        if let Some(t) = &self.active_task {
            tags.push(format!("reply to {}", short(t)));
        }
        match self.attachments.len() {
            0 => {}
            1 => tags.push("1 part attached".to_owned()),
            n => tags.push(format!("{n} parts attached")),
        }
        if tags.is_empty() {
            "> ".to_owned()
        } else {
            format!("[{}] > ", tags.join(", "))
        }
    }

    fn waiting_for_auth(&self) -> bool {
        self.active_task.is_some()
            && self
                .waiting
                .as_ref()
                .is_some_and(|s| s.state() == TaskState::AuthRequired)
    }

    /// A note for the person (on the terminal, never on standard output).
    fn say(&self, text: &str) {
        eprintln!("{}", render::sanitize(text));
    }

    /// Writes to standard output.
    fn print(&self, s: &str) {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(s.as_bytes());
        let _ = o.flush();
    }

    /// Runs one input line; `Ok(false)` ends the session.
    async fn command(&mut self, g: &Globals, line: &str) -> Result<bool, CliError> {
        if !line.starts_with('/') {
            let mut parts = vec![Part::text(line)];
            parts.extend(self.attachments.iter().map(|a| a.part.clone()));
            let mut m = Message::new(Role::User, parts);
            if let Some(c) = &self.context_id {
                m.context_id.clone_from(c);
            }
            if let Some(t) = &self.active_task {
                m.task_id.clone_from(t);
            }
            self.turn(g, m, None).await?;
            self.attachments.clear();
            return Ok(true);
        }
        let (name, rest) = match line.split_once(char::is_whitespace) {
            Some((c, r)) => (c, r.trim()),
            None => (line, ""),
        };
        let Some(cmd) = lookup(name) else {
            self.say(&format!(
                "Unknown command {name}. The commands are:\n{}",
                command_list().trim_end()
            ));
            return Ok(true);
        };
        match cmd {
            Cmd::Quit => return Ok(false),
            Cmd::Help => self.say(help_text().trim_end()),
            Cmd::File => self.attach_file(rest)?,
            Cmd::Data => self.attach_data(rest)?,
            Cmd::Detach => {
                let n = self.attachments.len();
                self.attachments.clear();
                self.say(&match n {
                    0 => "Nothing was attached.".to_owned(),
                    1 => "Dropped the attached part.".to_owned(),
                    n => format!("Dropped the {n} attached parts."),
                });
            }
            Cmd::New => {
                self.context_id = None;
                self.active_task = None;
                self.waiting = None;
                self.say("New conversation.");
            }
            Cmd::Context => self.show_context().await?,
            Cmd::Versions => self.show_versions().await?,
            Cmd::Show => self.show_version(rest).await?,
            Cmd::Pending => self.show_pending().await?,
            Cmd::Accept => {
                let id = self.version_ref(rest).await?;
                let v = self.ledger.accept(&id).await.map_err(ledger_err)?;
                self.say(&format!(
                    "Accepted {} ({}).",
                    v.artifact_name, v.artifact_id
                ));
            }
            Cmd::Refine => {
                let (which, text) = rest.split_once(char::is_whitespace).ok_or_else(|| {
                    CliError::usage("usage: /refine N|ID TEXT (what to change in that version)")
                })?;
                let id = self.version_ref(which).await?;
                let mut parts = vec![Part::text(text.trim())];
                parts.extend(self.attachments.iter().map(|a| a.part.clone()));
                self.turn(g, Message::new(Role::User, parts), Some(id))
                    .await?;
                self.attachments.clear();
            }
            Cmd::Cancel => self.cancel().await?,
        }
        Ok(true)
    }

    fn attach_file(&mut self, rest: &str) -> Result<(), CliError> {
        let words = shlex::split(rest)
            .ok_or_else(|| CliError::usage("/file: unbalanced quotes in the path"))?;
        let (path, media_type) = match words.as_slice() {
            [] => {
                self.show_attachments();
                return Ok(());
            }
            [p] => (p.as_str(), None),
            [p, t] => (p.as_str(), Some(t.as_str())),
            _ => {
                return Err(CliError::usage(
                    "usage: /file PATH [TYPE] (quote a path that has spaces)",
                ));
            }
        };
        if let Some(t) = media_type
            && !t.contains('/')
        {
            return Err(CliError::usage(format!(
                "/file: {t:?} is not a media type (e.g. application/json, text/csv)"
            )));
        }
        let (part, label) = if path.starts_with("http://") || path.starts_with("https://") {
            let name = path
                .split(['?', '#'])
                .next()
                .and_then(|u| u.rsplit('/').next())
                .unwrap_or_default()
                .to_owned();
            let mt = media_type.unwrap_or_else(|| crate::send::infer_media_type(&name));
            let part = Part::url(path).with_media_type(mt).with_filename(&name);
            (part, format!("{path} ({mt}, by reference)"))
        } else {
            let local = expand_home(path.strip_prefix("file://").unwrap_or(path));
            let bytes = std::fs::read(&local).map_err(|e| {
                CliError::usage(format!("/file: cannot read {}: {e}", local.display()))
            })?;
            let name = local
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mt = media_type.unwrap_or_else(|| crate::send::infer_media_type(&name));
            let label = format!("{name} ({mt}, {} bytes)", bytes.len());
            (Part::file(bytes, name, mt), label)
        };
        self.say(&format!(
            "Attached {label}; it goes with your next message."
        ));
        self.attachments.push(Attachment { part, label });
        Ok(())
    }

    fn attach_data(&mut self, rest: &str) -> Result<(), CliError> {
        if rest.is_empty() {
            self.show_attachments();
            return Ok(());
        }
        let value: serde_json::Value = serde_json::from_str(rest).map_err(|e| {
            CliError::usage(format!(
                "/data: not valid JSON ({e}); e.g. /data {{\"targetRuntime\": {{\"node\": \"24\"}}}}"
            ))
        })?;
        let label = format!("data {}", serde_json::to_string(&value).unwrap_or_default());
        let label = match label.char_indices().nth(60) {
            Some((i, _)) => format!("{}…", &label[..i]),
            None => label,
        };
        self.say(&format!(
            "Attached {label}; it goes with your next message."
        ));
        self.attachments.push(Attachment {
            part: Part::data(value),
            label,
        });
        Ok(())
    }

    fn show_attachments(&self) {
        if self.attachments.is_empty() {
            self.say("Nothing is attached (/file PATH or /data JSON attaches a part).");
            return;
        }
        self.say("Attached to the next message:");
        for a in &self.attachments {
            self.say(&format!("  {}", a.label));
        }
    }

    /// After Ctrl-C during a turn: says what became of the reply.
    fn stopped_following(&mut self) {
        eprintln!();
        match self.following.take() {
            Some(id) => self.say(&format!(
                "Stopped following the reply (Ctrl-C). Task {id} keeps running on the agent: \
                 `a2a task get --wait {id}` follows it, `a2a task cancel {id}` cancels it."
            )),
            None => self.say("Stopped waiting for the reply (Ctrl-C)."),
        }
    }

    async fn cancel(&mut self) -> Result<(), CliError> {
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
        self.waiting = None;
        match self.out {
            Out::Json => render::print_json(&t)?,
            _ => self.say(&format!(
                "Task {} is {}.",
                t.id,
                render::state_label(t.state())
            )),
        }
        Ok(())
    }

    /// An artifact id, or a number from `/versions`.
    async fn version_ref(&self, r: &str) -> Result<String, CliError> {
        let r = r.trim();
        if r.is_empty() {
            return Err(CliError::usage(
                "name an artifact version: its number from /versions, or its id",
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

    /// `name v2` for a version (its place in its chain).
    async fn version_name(&self, v: &ArtifactVersion) -> Result<String, CliError> {
        let n = self
            .ledger
            .chain(&v.artifact_id)
            .await
            .map_err(ledger_err)?
            .len();
        Ok(format!("{} v{n}", v.artifact_name))
    }

    async fn show_versions(&self) -> Result<(), CliError> {
        let all = self.versions().await?;
        match self.out {
            Out::Json => {
                let list: Vec<serde_json::Value> = all
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        serde_json::json!({
                            "number": i + 1,
                            "artifactId": v.artifact_id,
                            "name": v.artifact_name,
                            "taskId": v.task_id,
                            "contextId": v.context_id,
                            "previousArtifactId": v.previous_artifact_id,
                            "accepted": v.accepted_by_user,
                        })
                    })
                    .collect();
                render::print_json(&serde_json::json!({ "versions": list }))?;
            }
            Out::Text => {
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
            }
            Out::Terminal => {
                if all.is_empty() {
                    self.print(&self.screen.note("No artifact in this conversation yet."));
                    return Ok(());
                }
                let mut out = String::new();
                for (i, v) in all.iter().enumerate() {
                    let mut line = format!(
                        "{:>3}. {}  task {}",
                        i + 1,
                        self.version_name(v).await?,
                        short(&v.task_id)
                    );
                    if let Some(p) = &v.previous_artifact_id {
                        match all.iter().position(|o| &o.artifact_id == p) {
                            Some(k) => line.push_str(&format!(", refines {}", k + 1)),
                            None => line.push_str(&format!(", refines {p}")),
                        }
                    }
                    if v.accepted_by_user {
                        line.push_str(", accepted");
                    }
                    line.push_str(&format!("  ({})", v.artifact_id));
                    out.push_str(&render::sanitize(&line));
                    out.push('\n');
                }
                self.print(&out);
            }
        }
        Ok(())
    }

    async fn show_version(&self, which: &str) -> Result<(), CliError> {
        let id = self.version_ref(which).await?;
        let v = self
            .ledger
            .version(&id)
            .await
            .map_err(ledger_err)?
            .ok_or_else(|| ledger_err(LedgerError::UnknownArtifact(id.clone())))?;
        match self.out {
            Out::Json => render::print_json(&v.artifact)?,
            Out::Text => {
                let mut t = Text::new();
                render::artifact(&mut t, &v.artifact, self.verbose);
                t.print();
            }
            Out::Terminal => {
                let title = self.version_name(&v).await?;
                self.print(&self.screen.artifact(&v.artifact, &title, 0));
            }
        }
        Ok(())
    }

    async fn show_pending(&self) -> Result<(), CliError> {
        let pending = self.ledger.pending().await.map_err(ledger_err)?;
        match self.out {
            Out::Json => {
                let list: Vec<serde_json::Value> = pending
                    .iter()
                    .map(|p| serde_json::json!({"id": p.id, "contextId": p.context_id, "status": {"state": p.state.as_str_name()}}))
                    .collect();
                render::print_json(&serde_json::json!({ "tasks": list }))?;
            }
            Out::Text => {
                let mut t = Text::new();
                t.field("Pending Tasks", pending.len().to_string());
                for p in pending {
                    t.field("Task", format!("{} {}", p.id, render::state_label(p.state)));
                }
                t.print();
            }
            Out::Terminal => {
                if pending.is_empty() {
                    self.print(&self.screen.note("No task is waiting for you."));
                }
                for p in pending {
                    self.print(&render::sanitize(&format!(
                        "task {} {}\n",
                        p.id,
                        render::state_label(p.state)
                    )));
                }
            }
        }
        Ok(())
    }

    async fn show_context(&self) -> Result<(), CliError> {
        let view = match &self.context_id {
            Some(c) => self.ledger.context(c).await.map_err(ledger_err)?,
            None => None,
        };
        let tasks: Vec<(String, TaskState)> = view
            .map(|v| v.tasks.into_iter().map(|t| (t.id, t.state)).collect())
            .unwrap_or_default();
        match self.out {
            Out::Json => {
                let list: Vec<serde_json::Value> = tasks
                    .iter()
                    .map(|(id, s)| serde_json::json!({"id": id, "status": {"state": s.as_str_name()}}))
                    .collect();
                render::print_json(&serde_json::json!({
                    "contextId": self.context_id,
                    "tasks": list,
                    "waitingTaskId": self.active_task,
                }))?;
            }
            Out::Text => {
                let mut t = Text::new();
                t.field(
                    "Context ID",
                    self.context_id.as_deref().unwrap_or("(none yet)"),
                );
                if self.context_id.is_some() {
                    t.field("Tasks", tasks.len().to_string());
                }
                for (id, s) in &tasks {
                    t.field("Task", format!("{id} {}", render::state_label(*s)));
                }
                if let Some(a) = &self.active_task {
                    t.field("Waiting Task", a);
                }
                t.print();
            }
            Out::Terminal => {
                let mut out = format!(
                    "context {}\n",
                    self.context_id.as_deref().unwrap_or("(none yet)")
                );
                for (id, s) in &tasks {
                    out.push_str(&format!("  task {id} {}\n", render::state_label(*s)));
                }
                if let Some(a) = &self.active_task {
                    out.push_str(&format!("waiting for your reply: task {a}\n"));
                }
                self.print(&render::sanitize(&out));
            }
        }
        if !self.attachments.is_empty() {
            self.show_attachments();
        }
        Ok(())
    }

    // ----- turns -------------------------------------------------------

    /// Sends one message and shows the answer: streamed when the agent
    /// streams (a reply to a waiting task too), else one blocking call
    /// with the progress line; a refinement always blocks (the ledger
    /// chains its versions).
    async fn turn(
        &mut self,
        g: &Globals,
        message: Message,
        refines: Option<String>,
    ) -> Result<(), CliError> {
        let continuing = !message.task_id.is_empty();
        let waiting_before = if continuing {
            self.waiting.clone()
        } else {
            None
        };
        let progress = Progress::start(g, format!("waiting for {}", self.agent.card.name));
        let mut live = Live::new(&self.screen, &progress, self.out == Out::Terminal);
        let streamed = refines.is_none() && self.stream;
        let response: SendMessageResponse = if let Some(target) = &refines {
            self.ledger
                .refine(&self.agent.client, target, message)
                .await
                .map_err(|e| self.ledger_call_err(e))?
        } else if streamed {
            let mut events = self
                .ledger
                .stream(&self.agent.client, message, &CallOptions::new())
                .await
                .map_err(|e| self.ledger_call_err(e))?;
            let mut task_id = None;
            let mut direct = None;
            while let Some(ev) = events.next().await {
                let ev = ev.map_err(|e| self.agent.err(&e))?;
                progress.event(&ev);
                if task_id.is_none() {
                    task_id = ev.task_id().map(str::to_owned);
                    self.following.clone_from(&task_id);
                }
                if let Some(stream_response::Payload::Message(m)) = &ev.payload
                    && task_id.is_none()
                {
                    direct = Some(m.clone());
                }
                match self.out {
                    Out::Json => render::print_json(&ev)?,
                    Out::Terminal => live.event(&ev, waiting_before.as_ref()),
                    Out::Text => {}
                }
            }
            live.close();
            match (task_id, direct) {
                (Some(id), _) => {
                    let task = self
                        .settle(g, &id, waiting_before.as_ref(), &progress)
                        .await?;
                    SendMessageResponse::from(task)
                }
                (None, Some(m)) => SendMessageResponse::from(m),
                (None, None) => {
                    return Err(CliError::internal(
                        "the agent closed the stream without answering",
                    ));
                }
            }
        } else {
            self.ledger
                .send(&self.agent.client, message)
                .await
                .map_err(|e| self.ledger_call_err(e))?
        };
        progress.finish();
        match &response.payload {
            Some(send_message_response::Payload::Task(task)) => {
                self.context_id = Some(task.context_id.clone());
                let interrupted = task.state().is_interrupted();
                self.active_task = interrupted.then(|| task.id.clone());
                self.waiting = if interrupted {
                    task.status.clone()
                } else {
                    None
                };
                match self.out {
                    Out::Json => {
                        if !streamed {
                            render::print_json(&response)?;
                        }
                    }
                    Out::Text => {
                        let mut t = Text::new();
                        render::task(&mut t, task, self.verbose);
                        t.print();
                        self.text_versions(task).await?;
                    }
                    Out::Terminal => {
                        let rest = live.rest_of(task, waiting_before.as_ref());
                        self.print(&rest);
                        self.print(&self.footer(task).await?);
                    }
                }
                if self.out != Out::Json {
                    match task.state() {
                        TaskState::InputRequired => {
                            self.say("The agent needs more input: type your reply.")
                        }
                        TaskState::AuthRequired => match render::auth_request(task) {
                            Some(r) => self.say(&format!(
                                "The agent needs {}: type it as your reply (it is kept out of the history).",
                                render::describe_auth_request(&r)
                            )),
                            None => self.say(
                                "The agent needs authorization: complete it as it says, then reply.",
                            ),
                        },
                        _ => {}
                    }
                }
            }
            Some(send_message_response::Payload::Message(m)) => {
                if !m.context_id.is_empty() {
                    self.context_id = Some(m.context_id.clone());
                }
                self.active_task = None;
                self.waiting = None;
                match self.out {
                    Out::Json => {
                        if !streamed {
                            render::print_json(&response)?;
                        }
                    }
                    Out::Text => {
                        let mut t = Text::new();
                        render::message(&mut t, m, self.verbose);
                        t.print();
                    }
                    Out::Terminal => {
                        if !live.shown(&m.message_id) {
                            self.print(&live.message(m));
                        }
                    }
                }
            }
            None => {}
        }
        Ok(())
    }

    /// The task as the stream left it, followed to the end of its turn if
    /// the stream stopped early (a dropped connection), or if the stream of
    /// a reply only repeated the question it answers (some agents open the
    /// stream of a continued task with its previous state and close it
    /// there): then the task is polled until its status changes.
    async fn settle(
        &self,
        g: &Globals,
        task_id: &str,
        waiting_before: Option<&TaskStatus>,
        progress: &Progress,
    ) -> Result<Task, CliError> {
        let recorded = self
            .ledger
            .task(task_id)
            .await
            .map_err(ledger_err)?
            .map(|r| r.task);
        let call = CallOptions::new();
        let stale = |t: &Task| waiting_before.is_some() && t.status.as_ref() == waiting_before;
        match recorded {
            Some(t) if t.state().ends_turn() && !stale(&t) => Ok(t),
            _ => {
                let poll = PollOptions {
                    interval: g.poll_interval,
                    ..Default::default()
                };
                loop {
                    let t = wait_for_task(&self.agent.client, task_id, &poll, &call, |t| {
                        progress.task(t);
                    })
                    .await
                    .map_err(|e| self.agent.task_err(&e, task_id))?;
                    if !stale(&t) {
                        self.ledger.record_task(&t).await.map_err(ledger_err)?;
                        return Ok(t);
                    }
                    tokio::time::sleep(g.poll_interval).await;
                }
            }
        }
    }

    /// The versions a task produced, as labelled lines (`text` output).
    async fn text_versions(&self, task: &Task) -> Result<(), CliError> {
        let versions = self
            .ledger
            .versions_of_task(&task.id)
            .await
            .map_err(ledger_err)?;
        let mut t = Text::new();
        for v in versions {
            t.field(
                "Artifact Version",
                format!(
                    "{} ({}){}",
                    self.version_name(&v).await?,
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
        Ok(())
    }

    /// The closing line of a turn: the state, the task, the new versions
    /// with their numbers.
    async fn footer(&self, task: &Task) -> Result<String, CliError> {
        let all = self.versions().await?;
        let mut made = Vec::new();
        for (i, v) in all.iter().enumerate() {
            if v.task_id == task.id {
                made.push(format!("{} {}", i + 1, self.version_name(v).await?));
            }
        }
        let mut line = format!(
            "{} · task {}",
            render::state_label(task.state()),
            short(&task.id)
        );
        if !made.is_empty() {
            line.push_str(&format!(" · versions {} (/versions)", made.join(", ")));
        }
        Ok(self.screen.note(&line))
    }

    fn ledger_call_err(&self, e: LedgerError) -> CliError {
        match e {
            LedgerError::Client(c) => self.agent.err(&c),
            other => ledger_err(other),
        }
    }
}

fn expand_home(p: &str) -> PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(h) = std::env::var_os("HOME")
    {
        return PathBuf::from(h).join(rest);
    }
    PathBuf::from(p)
}

fn ledger_err(e: LedgerError) -> CliError {
    match e {
        LedgerError::UnknownArtifact(id) => CliError::usage(format!(
            "no artifact version {id} in this session; see /versions"
        )),
        other => CliError::internal(other.to_string()),
    }
}

// ----- live rendering for a person -----------------------------------------

/// An artifact being printed as its chunks arrive.
struct Open {
    id: String,
    /// Markdown waits for complete blocks; plain text is printed as is.
    markdown: Option<MarkdownStream>,
    /// The last character printed was not a newline.
    mid_line: bool,
}

/// Prints a turn's events for a person as they arrive: the agent's
/// questions and words as text, each artifact under its name with its
/// text (Markdown laid out block by block), its data and its files. What
/// the stream did not show (a task that came whole) is printed at the end
/// by [`Live::rest_of`].
struct Live<'a> {
    screen: &'a Screen,
    progress: &'a Progress,
    enabled: bool,
    open: Option<Open>,
    /// Status messages and messages already printed.
    messages: HashSet<String>,
    /// Artifacts already printed (in part or whole).
    artifacts: HashSet<String>,
}

impl<'a> Live<'a> {
    fn new(screen: &'a Screen, progress: &'a Progress, enabled: bool) -> Self {
        Self {
            screen,
            progress,
            enabled,
            open: None,
            messages: HashSet::new(),
            artifacts: HashSet::new(),
        }
    }

    fn print(&self, s: &str) {
        if s.is_empty() {
            return;
        }
        self.progress.suspend(|| {
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(s.as_bytes());
            let _ = o.flush();
        });
    }

    fn shown(&self, message_id: &str) -> bool {
        !message_id.is_empty() && self.messages.contains(message_id)
    }

    fn event(&mut self, ev: &StreamResponse, waiting_before: Option<&TaskStatus>) {
        if !self.enabled {
            return;
        }
        match &ev.payload {
            // A snapshot: its status is shown when it changes (a reply's
            // stream opens with the question being answered).
            Some(stream_response::Payload::Task(t)) => {
                if let Some(m) = t.status.as_ref().and_then(|s| s.message.as_ref())
                    && waiting_before.is_some()
                {
                    self.messages.insert(m.message_id.clone());
                }
            }
            Some(stream_response::Payload::StatusUpdate(s)) => {
                let Some(status) = &s.status else { return };
                let Some(m) = &status.message else { return };
                if self.shown(&m.message_id) {
                    return;
                }
                let state = status.state();
                // Progress words belong to the progress line when there is one.
                if state == TaskState::Working && self.progress.is_visible() {
                    return;
                }
                self.close();
                let s = self.status_message(state, m);
                self.print(&s);
                self.messages.insert(m.message_id.clone());
            }
            Some(stream_response::Payload::ArtifactUpdate(a)) => {
                let Some(art) = &a.artifact else { return };
                let same = self.open.as_ref().is_some_and(|o| o.id == art.artifact_id);
                if !(a.append && same) {
                    self.close();
                    let name = if art.name.is_empty() {
                        "artifact"
                    } else {
                        &art.name
                    };
                    self.print(&self.screen.heading(name));
                    let md = art
                        .parts
                        .iter()
                        .any(|p| is_markdown(&p.media_type, &art.name));
                    self.open = Some(Open {
                        id: art.artifact_id.clone(),
                        markdown: md.then(MarkdownStream::new),
                        mid_line: false,
                    });
                    self.artifacts.insert(art.artifact_id.clone());
                }
                for p in &art.parts {
                    self.part(p);
                }
                if a.last_chunk {
                    self.close();
                }
            }
            Some(stream_response::Payload::Message(m)) => {
                self.close();
                let s = self.message(m);
                self.print(&s);
                self.messages.insert(m.message_id.clone());
            }
            None => {}
        }
    }

    fn part(&mut self, p: &Part) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let out = match (p.as_text(), open.markdown.as_mut()) {
            (Some(t), Some(md)) => md.push(t).map(|ready| self.screen.markdown(&ready)),
            (Some(t), None) => {
                let clean = render::sanitize(t);
                if !clean.is_empty() {
                    open.mid_line = !clean.ends_with('\n');
                }
                Some(clean)
            }
            (None, _) => {
                let mut s = String::new();
                if open.mid_line {
                    s.push('\n');
                    open.mid_line = false;
                }
                s.push_str(&self.screen.parts(
                    std::slice::from_ref(p),
                    false,
                    render::terminal::DATA_LINES,
                ));
                Some(s)
            }
        };
        if let Some(s) = out {
            self.print(&s);
        }
    }

    /// Ends the artifact being printed.
    fn close(&mut self) {
        let Some(mut open) = self.open.take() else {
            return;
        };
        let mut s = String::new();
        if let Some(rest) = open.markdown.as_mut().and_then(MarkdownStream::finish) {
            s.push_str(&self.screen.markdown(&rest));
        }
        if open.mid_line {
            s.push('\n');
        }
        s.push('\n');
        self.print(&s);
    }

    /// A status message: a question stands out; other words are text.
    fn status_message(&self, state: TaskState, m: &Message) -> String {
        let text = m.text();
        let mut out = String::new();
        if state.is_interrupted() {
            out.push_str(&self.screen.question(&text));
        } else if state == TaskState::Working {
            out.push_str(&self.screen.note(&text));
        } else {
            let md = m.parts.iter().any(|p| is_markdown(&p.media_type, ""));
            out.push_str(&self.screen.text_part(&text, md));
        }
        // Data and files of a status message are for programs; shown when
        // there is no text to read.
        if text.trim().is_empty() {
            out.push_str(
                &self
                    .screen
                    .parts(&m.parts, false, render::terminal::DATA_LINES),
            );
        }
        out
    }

    /// A message from the agent: its text, data and files.
    fn message(&self, m: &Message) -> String {
        let md = m.parts.iter().any(|p| is_markdown(&p.media_type, ""));
        self.screen
            .parts(&m.parts, md, render::terminal::DATA_LINES)
    }

    /// What the stream did not show of the task: its artifacts not seen,
    /// and its status message (the question, the final words) unless it
    /// was shown or only repeats the question being answered.
    fn rest_of(&self, task: &Task, waiting_before: Option<&TaskStatus>) -> String {
        let mut out = String::new();
        for a in &task.artifacts {
            if self.artifacts.contains(&a.artifact_id) {
                continue;
            }
            let name = if a.name.is_empty() {
                "artifact"
            } else {
                &a.name
            };
            out.push_str(&self.screen.artifact(a, name, render::terminal::DATA_LINES));
            out.push('\n');
        }
        if let Some(status) = &task.status {
            let repeated = waiting_before.is_some_and(|w| w == status);
            if let Some(m) = &status.message
                && !repeated
                && !self.shown(&m.message_id)
            {
                out.push_str(&self.status_message(status.state(), m));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_command_once_on_one_line() {
        let help = help_text();
        let mut seen = HashSet::new();
        for (cmd, name, _, what) in COMMANDS {
            assert!(seen.insert(*cmd), "{cmd:?} listed twice");
            assert_eq!(lookup(name), Some(*cmd));
            let lines: Vec<&str> = help
                .lines()
                .filter(|l| l.trim_start().starts_with(&format!("{name} ")) || l.trim() == *name)
                .collect();
            assert_eq!(lines.len(), 1, "{name} in\n{help}");
            assert!(lines[0].ends_with(what));
        }
        // Every command the dispatch knows is in the list (the match in
        // `Session::command` is exhaustive over `Cmd`).
        for c in [
            Cmd::File,
            Cmd::Data,
            Cmd::Detach,
            Cmd::Versions,
            Cmd::Show,
            Cmd::Accept,
            Cmd::Refine,
            Cmd::Pending,
            Cmd::Cancel,
            Cmd::Context,
            Cmd::New,
            Cmd::Help,
            Cmd::Quit,
        ] {
            assert!(seen.contains(&c), "{c:?} missing from /help");
        }
        assert_eq!(lookup("/exit"), Some(Cmd::Quit));
        assert_eq!(lookup("/nope"), None);
    }

    #[test]
    fn credentials_stay_out_of_the_history() {
        assert!(may_hold_credentials("my API key is abc"));
        assert!(may_hold_credentials("Bearer eyJhbGci"));
        assert!(may_hold_credentials("password: hunter2"));
        assert!(!may_hold_credentials("Node.js 24"));
    }

    #[test]
    fn the_history_file_is_under_the_state_directory() {
        // Read only: the variables are the process's own.
        if let Some(p) = history_file() {
            assert!(p.ends_with("a2a-cli/chat-history"), "{}", p.display());
        }
    }
}
