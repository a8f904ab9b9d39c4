//! `a2a send`: send a message to start or continue an interaction
//! (CLI SPEC 10.2): blocking by default, `--async`, `--stream`.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::time::Instant;

use agentwire_client::follow::{FollowOptions, PollOptions, TaskView, follow, wait_for_task};
use agentwire_client::{CallOptions, EventStream, Transport};
use agentwire_types::{
    AgentCard, GetTaskRequest, Message, Part, Role, SendMessageConfiguration, SendMessageRequest,
    SendMessageResponse, StreamResponse, Task, send_message_response, stream_response,
};
use clap::Args;
use clap::parser::ValueSource;
use futures::StreamExt;

use crate::agent::Agent;
use crate::error::{CliError, ErrorContext, code, exit, paste};
use crate::ledger::Recorder;
use crate::progress::Progress;
use crate::render::{self, Text};
use crate::{
    Apply, AsyncOpt, ConnOpts, ContextIdOpt, Globals, MetadataOpt, OutputFormat, PollOpts,
    StreamOpt, TaskIdOpt, TimeoutOpt,
};

#[derive(Args, Debug)]
pub struct SendArgs {
    /// Message text (a text part; the part flags below may add more).
    #[arg(value_name = "TEXT")]
    pub message: Vec<String>,
    /// A text part (repeatable; parts keep their command-line order).
    #[arg(long = "text", value_name = "STRING")]
    pub text: Vec<String>,
    /// A file part: a local path (sent inline) or an http(s) URL (sent as a reference).
    #[arg(long = "file", value_name = "PATH|URL")]
    pub file: Vec<String>,
    /// A data part from a JSON file, or `-` for standard input.
    #[arg(long = "data", value_name = "PATH|-")]
    pub data: Vec<String>,
    /// Media type of the part flag just before it (otherwise inferred from the file name).
    #[arg(long = "media-type", value_name = "TYPE")]
    pub media_type: Vec<String>,
    /// The messageId (default: a new UUID); reuse it when retrying a turn.
    #[arg(long, value_name = "ID")]
    pub message_id: Option<String>,
    /// A task this message refers to (referenceTaskIds), repeatable; `last` or a short id from the ledger.
    #[arg(long = "reference-task", value_name = "TASK_ID")]
    pub reference_task: Vec<String>,
    /// An output media type the caller accepts, repeatable.
    #[arg(long = "accept", value_name = "TYPE")]
    pub accepted_output_modes: Vec<String>,
    /// An extension to activate (A2A-Extensions), repeatable.
    #[arg(long = "extension", value_name = "URI")]
    pub extensions: Vec<String>,
    /// How many history messages the returned task carries.
    #[arg(long, value_name = "N")]
    pub history: Option<i32>,
    /// With --task-id: send only if the task is still at generation N (A2A 1.1 ifGenerationMatch); otherwise TaskGenerationMismatchError, exit 1.
    #[arg(long = "if-generation", value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub if_generation: Option<i64>,
    #[command(flatten)]
    pub push: crate::push::InlinePushArgs,
    #[command(flatten)]
    pub task: TaskIdOpt,
    #[command(flatten)]
    pub context: ContextIdOpt,
    #[command(flatten)]
    pub metadata: MetadataOpt,
    #[command(flatten)]
    pub stream: StreamOpt,
    #[command(flatten)]
    pub async_: AsyncOpt,
    #[command(flatten)]
    pub poll: PollOpts,
    #[command(flatten)]
    pub timeout: TimeoutOpt,
    #[command(flatten)]
    pub conn: ConnOpts,
    #[command(flatten)]
    pub ledger: crate::ledger::LedgerOpts,
}

impl Apply for SendArgs {
    fn apply(&self, g: &mut Globals) {
        self.conn.apply(g);
        self.ledger.apply(g);
        self.task.apply(g);
        self.context.apply(g);
        self.metadata.apply(g);
        self.stream.apply(g);
        self.async_.apply(g);
        self.poll.apply(g);
        self.timeout.apply(g);
    }
}

/// How the caller wants to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Wait,
    Async,
    Stream,
}

fn mode(g: &Globals, sub: &clap::ArgMatches) -> Result<Mode, CliError> {
    let explicit = |id: &str| sub.value_source(id) == Some(ValueSource::CommandLine);
    let (mut async_, wait) = (g.async_, g.wait);
    if async_ && wait {
        match (explicit("async_"), explicit("wait")) {
            (true, true) => {
                return Err(CliError::usage("--async and --wait contradict each other"));
            }
            (false, true) => async_ = false, // the flag beats the configured default
            _ => {}
        }
    }
    if g.stream {
        if async_ && explicit("async_") {
            return Err(CliError::usage(
                "--stream and --async contradict each other (--stream follows the task live)",
            ));
        }
        return Ok(Mode::Stream);
    }
    Ok(if async_ { Mode::Async } else { Mode::Wait })
}

/// The parts, in command-line order, with `--media-type` bound to the part
/// flag just before it.
fn build_parts(args: &SendArgs, sub: &clap::ArgMatches) -> Result<Vec<Part>, CliError> {
    #[derive(Debug)]
    enum Item<'a> {
        Text(&'a str),
        File(&'a str),
        Data(&'a str),
        MediaType(&'a str),
    }
    let mut items: Vec<(usize, Item<'_>)> = Vec::new();
    let idx = |id: &str| -> Vec<usize> {
        sub.indices_of(id)
            .map(Iterator::collect)
            .unwrap_or_default()
    };
    for (i, v) in idx("message").into_iter().zip(&args.message) {
        items.push((i, Item::Text(v)));
    }
    for (i, v) in idx("text").into_iter().zip(&args.text) {
        items.push((i, Item::Text(v)));
    }
    for (i, v) in idx("file").into_iter().zip(&args.file) {
        items.push((i, Item::File(v)));
    }
    for (i, v) in idx("data").into_iter().zip(&args.data) {
        items.push((i, Item::Data(v)));
    }
    for (i, v) in idx("media_type").into_iter().zip(&args.media_type) {
        items.push((i, Item::MediaType(v)));
    }
    items.sort_by_key(|(i, _)| *i);
    let mut parts: Vec<Part> = Vec::new();
    let mut typed = false; // the last part already got a --media-type
    let mut stdin_used = false;
    for (_, item) in items {
        match item {
            Item::Text(s) => {
                parts.push(Part::text(s));
                typed = false;
            }
            Item::File(f) => {
                parts.push(file_part(f)?);
                typed = false;
            }
            Item::Data(d) => {
                let raw = if d == "-" {
                    if stdin_used {
                        return Err(CliError::usage("--data - may be given once"));
                    }
                    stdin_used = true;
                    let mut s = String::new();
                    std::io::stdin()
                        .read_to_string(&mut s)
                        .map_err(|e| CliError::usage(format!("cannot read stdin: {e}")))?;
                    s
                } else {
                    std::fs::read_to_string(d)
                        .map_err(|e| CliError::usage(format!("--data {d}: {e}")))?
                };
                let value: serde_json::Value = serde_json::from_str(&raw)
                    .map_err(|e| CliError::usage(format!("--data {d}: not valid JSON ({e})")))?;
                parts.push(Part::data(value));
                typed = false;
            }
            Item::MediaType(m) => {
                let Some(last) = parts.last_mut() else {
                    return Err(CliError::usage(format!(
                        "--media-type {m} must follow the part it describes (--text, --file or --data)"
                    )));
                };
                if typed {
                    return Err(CliError::usage(format!(
                        "--media-type {m}: the part before it already has a media type"
                    )));
                }
                last.media_type = m.to_owned();
                typed = true;
            }
        }
    }
    Ok(parts)
}

/// A media type from a file name, when the caller named none.
pub fn infer_media_type(name: &str) -> &'static str {
    let ext = Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "text" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        _ => "application/octet-stream",
    }
}

fn file_part(f: &str) -> Result<Part, CliError> {
    if f.starts_with("http://") || f.starts_with("https://") {
        let name = f
            .split(['?', '#'])
            .next()
            .and_then(|u| u.rsplit('/').next())
            .unwrap_or_default()
            .to_owned();
        let mut p = Part::url(f);
        if !name.is_empty() {
            p.media_type = infer_media_type(&name).to_owned();
            p.filename = name;
        }
        return Ok(p);
    }
    let path = f.strip_prefix("file://").unwrap_or(f);
    let bytes = std::fs::read(path).map_err(|e| CliError::usage(format!("--file {f}: {e}")))?;
    let name = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Part::file(bytes, name.clone(), infer_media_type(&name)))
}

/// Parses `--metadata`.
pub fn metadata(g: &Globals) -> Result<Option<agentwire_types::Struct>, CliError> {
    let Some(raw) = &g.metadata else {
        return Ok(None);
    };
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(serde_json::Value::Object(map)) => Ok(Some(agentwire_types::json::to_struct(map))),
        Ok(_) => Err(CliError::usage(
            "--metadata must be a JSON object, e.g. '{\"k\":\"v\"}'",
        )),
        Err(e) => Err(CliError::usage(format!(
            "--metadata is not valid JSON: {e}"
        ))),
    }
}

pub async fn run(g: &Globals, args: SendArgs, sub: &clap::ArgMatches) -> Result<u8, CliError> {
    // `--context-id last` or a short id: the ledger's context (and agent).
    let resolved = crate::ledger::resolve_ids(g).await?;
    let g = &resolved;
    let mode = mode(g, sub)?;
    if args.if_generation.is_some() && g.task_id.is_none() {
        return Err(CliError::usage(
            "--if-generation checks an existing task: give it with --task-id",
        )
        .with_hint("read the task's generation with `a2a task get <taskId> -o json`"));
    }
    let parts = build_parts(&args, sub)?;
    if parts.is_empty() {
        return Err(CliError::usage("nothing to send")
            .with_hint("give the text as an argument, or use --text, --file or --data"));
    }
    let mut message = Message::new(Role::User, parts);
    if let Some(id) = &args.message_id {
        message.message_id.clone_from(id);
    }
    if let Some(c) = &g.context_id {
        message.context_id.clone_from(c);
    }
    if let Some(t) = &g.task_id {
        message.task_id.clone_from(t);
    }
    message.reference_task_ids = crate::ledger::resolve_references(g, &args.reference_task).await?;
    message.metadata = metadata(g)?;
    let mut agent = Agent::connect(g).await?;
    // The card's word decides below: a cached card is made sure of first.
    if args.push.push_url.is_some() {
        agent
            .confirm(AgentCard::supports_push_notifications)
            .await?;
    }
    if mode == Mode::Stream {
        agent.confirm(AgentCard::supports_streaming).await?;
    }
    args.push.check(&agent)?;
    let rec = Recorder::open(g, agent.reference()).await;
    let mut call = CallOptions::new();
    call.extensions = args.extensions.clone();
    let configuration = SendMessageConfiguration {
        if_generation_match: args.if_generation,
        task_push_notification_config: args.push.config(),
        accepted_output_modes: args.accepted_output_modes.clone(),
        history_length: args.history,
        return_immediately: mode == Mode::Async,
    };
    let sent = message.clone();
    let request = SendMessageRequest {
        message: Some(message),
        configuration: Some(configuration),
        metadata: None,
        ..Default::default()
    };
    let mut ctx = agent.error_context();
    ctx.continuing = g.task_id.is_some();
    ctx.task_id = g.task_id.clone();
    match mode {
        Mode::Async => {
            let resp = agent
                .client
                .send_message(request, &call)
                .await
                .map_err(|e| CliError::from_client(&e, &ctx))?;
            rec.exchange(&sent, &resp).await;
            output_response(g, &agent, &resp)?;
            Ok(exit::OK)
        }
        Mode::Wait => {
            let resp = wait(g, &agent, request, &call, &ctx, args.history).await?;
            rec.exchange(&sent, &resp).await;
            output_response(g, &agent, &resp)?;
            Ok(exit::OK)
        }
        Mode::Stream => stream(g, &agent, request, &call, &ctx, &rec, sent).await,
    }
}

/// Prints a `SendMessageResponse`.
pub fn output_response(
    g: &Globals,
    agent: &Agent,
    resp: &SendMessageResponse,
) -> Result<(), CliError> {
    if g.output == OutputFormat::Json {
        if let Some(t) = resp.task()
            && let (Some(w), _) = render::outcome_notes(t, agent.reference())
        {
            eprintln!("warning: {w}");
        }
        return render::print_json(resp);
    }
    match &resp.payload {
        Some(send_message_response::Payload::Task(t)) => {
            render::print_task_text(t, agent.reference(), g.verbose)
        }
        Some(send_message_response::Payload::Message(m)) => {
            let mut t = Text::new();
            t.field("Response", "message (no task was created)");
            render::message(&mut t, m, g.verbose);
            t.print();
        }
        None => {
            let mut t = Text::new();
            t.field("Response", "empty");
            t.print();
        }
    }
    Ok(())
}

/// The default: wait until the task is terminal or interrupted. Streams
/// when the card declares streaming (the task id is known at once, and a
/// dropped stream falls back to resubscribing and polling), else blocks on
/// `SendMessage` and polls if the agent returned early.
async fn wait(
    g: &Globals,
    agent: &Agent,
    request: SendMessageRequest,
    call: &CallOptions,
    ctx: &ErrorContext,
    history: Option<i32>,
) -> Result<SendMessageResponse, CliError> {
    let deadline = g.timeout.map(|t| Instant::now() + t);
    let progress = Progress::start(g, format!("waiting for {}", agent.card.name));
    let known_task: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(ctx.task_id.clone());
    // A message that continues a task is sent with the blocking
    // SendMessage: some agents open the stream of a continued task with
    // its previous (interrupted) state and close it there.
    let continuing = request
        .message
        .as_ref()
        .is_some_and(|m| !m.task_id.is_empty());
    let work = async {
        if agent.card.supports_streaming() && !continuing {
            let version = stream_version(g, agent);
            let stream_call = version.call(call);
            let events = agent
                .client
                .send_streaming_message(request.clone(), &stream_call)
                .await
                .map_err(|e| CliError::from_client(&e, ctx))?;
            let opts = follow_options(&stream_call, version);
            let mut events = follow(agent.client.clone(), Some(events), None, opts);
            let mut view = TaskView::new();
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(ev) => {
                        let mut known = known_task.lock().unwrap_or_else(|p| p.into_inner());
                        if known.is_none()
                            && let Some(id) = ev.task_id()
                        {
                            *known = Some(id.to_owned());
                            if std::io::stderr().is_terminal() && g.output == OutputFormat::Text {
                                tracing::info!("task {id} started");
                            }
                        }
                        progress.event(&ev);
                        view.apply(&ev);
                    }
                    Err(e) => {
                        let task_id = view.task().map(|t| t.id);
                        match task_id {
                            // The stream failed for good: poll to the end.
                            Some(id) if e.kind().is_none() => {
                                tracing::debug!("stream failed ({e}); polling task {id}");
                                let task =
                                    poll(g, agent, &id, deadline, call, history, &progress).await?;
                                return Ok(SendMessageResponse::from(task));
                            }
                            _ => return Err(CliError::from_client(&e, ctx)),
                        }
                    }
                }
            }
            if let Some(m) = view.message() {
                return Ok(SendMessageResponse::from(m.clone()));
            }
            let Some(task) = view.task() else {
                return Err(CliError::internal(
                    "the agent closed the stream without answering",
                ));
            };
            if !task.state().ends_turn() {
                let task = poll(g, agent, &task.id, deadline, call, history, &progress).await?;
                return Ok(SendMessageResponse::from(task));
            }
            // The authoritative snapshot (history included), as a blocking
            // SendMessage would return it.
            let req = GetTaskRequest {
                id: task.id.clone(),
                history_length: history,
                ..Default::default()
            };
            Ok(SendMessageResponse::from(
                agent.client.get_task(req, call).await.unwrap_or(task),
            ))
        } else {
            let resp = agent
                .client
                .send_message(request.clone(), call)
                .await
                .map_err(|e| CliError::from_client(&e, ctx))?;
            match resp.task() {
                Some(t) if !t.state().ends_turn() => {
                    let task = poll(g, agent, &t.id, deadline, call, history, &progress).await?;
                    Ok(SendMessageResponse::from(task))
                }
                _ => Ok(resp),
            }
        }
    };
    let outcome = tokio::select! {
        r = async {
            match g.timeout {
                Some(t) => tokio::time::timeout(t, work).await.unwrap_or_else(|_| {
                    Err(timeout_error(g, known_task.lock().unwrap_or_else(|p| p.into_inner()).as_deref()))
                }),
                None => work.await,
            }
        } => r,
        _ = tokio::signal::ctrl_c() => Err(interrupted(
            known_task.lock().unwrap_or_else(|p| p.into_inner()).as_deref(),
            agent.card.supports_streaming(),
        )),
    };
    progress.finish();
    outcome
}

fn timeout_error(g: &Globals, task: Option<&str>) -> CliError {
    let waited = g.timeout.unwrap_or_default();
    match task {
        Some(id) => CliError::new(
            code::TIMEOUT,
            exit::TIMEOUT,
            format!(
                "task {id} did not reach a terminal or interrupted state within {:.1}s",
                waited.as_secs_f64()
            ),
        )
        .with_hint(format!(
            "the task keeps running: follow it with `{}` or `{}`",
            paste("task get", &format!("--wait {id}")),
            paste("task subscribe", id)
        )),
        None => CliError::new(
            code::TIMEOUT,
            exit::TIMEOUT,
            format!("no answer within {:.1}s", waited.as_secs_f64()),
        )
        .with_hint(format!(
            "raise --timeout, or use --async and poll with `{}`",
            paste("task get", "--wait <taskId>")
        )),
    }
}

/// Ctrl-C before the task ended: the command stops (exit 130), the task
/// keeps running at the agent, and the hint says how to follow it
/// (`task subscribe` when the agent streams, `task get --wait` always).
pub fn interrupted(task: Option<&str>, streaming: bool) -> CliError {
    let e = CliError::new(
        code::INTERRUPTED,
        exit::INTERRUPTED,
        "interrupted (Ctrl-C) before the task reached a final state",
    );
    match task {
        Some(id) if streaming => e.with_hint(format!(
            "task {id} keeps running at the agent: follow it with `{}` (or poll it with `{}`)",
            paste("task subscribe", id),
            paste("task get", &format!("--wait {id}"))
        )),
        Some(id) => e.with_hint(format!(
            "task {id} keeps running at the agent: follow it with `{}`",
            paste("task get", &format!("--wait {id}"))
        )),
        None => e.with_hint(
            "no task id was received yet: the agent may still have started one (`a2a task list` shows them)",
        ),
    }
}

async fn poll(
    g: &Globals,
    agent: &Agent,
    task_id: &str,
    deadline: Option<Instant>,
    call: &CallOptions,
    history: Option<i32>,
    progress: &Progress,
) -> Result<Task, CliError> {
    let poll = PollOptions {
        interval: g.poll_interval,
        max_interval: None,
        timeout: deadline.map(|d| d.saturating_duration_since(Instant::now())),
        history_length: history,
    };
    wait_for_task(&agent.client, task_id, &poll, call, |t| {
        tracing::debug!("poll: task {} is {}", t.id, render::state_label(t.state()));
        progress.task(t);
    })
    .await
    .map_err(|e| agent.task_err(&e, task_id))
}

/// `--stream`: every event as it arrives (JSONL with `-o json`).
async fn stream(
    g: &Globals,
    agent: &Agent,
    request: SendMessageRequest,
    call: &CallOptions,
    ctx: &ErrorContext,
    rec: &Recorder,
    sent: Message,
) -> Result<u8, CliError> {
    if !agent.card.supports_streaming() {
        // Capability checked before the call (CLI SPEC 13.3): fall back to
        // a blocking send, still one object per line.
        eprintln!("warning: the agent card does not declare streaming; sending without streaming");
        let resp = agent
            .client
            .send_message(request, call)
            .await
            .map_err(|e| CliError::from_client(&e, ctx))?;
        rec.exchange(&sent, &resp).await;
        let ev = match resp.payload {
            Some(send_message_response::Payload::Task(t)) => StreamResponse::from(t),
            Some(send_message_response::Payload::Message(m)) => StreamResponse::from(m),
            None => StreamResponse::default(),
        };
        let mut printer = EventPrinter::new(g, agent.reference());
        printer.event(&ev)?;
        printer.finish();
        return Ok(exit::OK);
    }
    let version = stream_version(g, agent);
    let stream_call = version.call(call);
    let events = agent
        .client
        .send_streaming_message(request, &stream_call)
        .await
        .map_err(|e| CliError::from_client(&e, ctx))?;
    let opts = follow_options(&stream_call, version);
    let events = follow(agent.client.clone(), Some(events), None, opts);
    let events = rec.wrap(events, Some(sent));
    print_stream(g, agent, events, ctx).await
}

/// How the command's streams use task generations (see
/// [`Agent::stream_version`]), said on stderr with `--verbose`.
pub fn stream_version(g: &Globals, agent: &Agent) -> crate::agent::StreamVersion {
    use crate::agent::StreamVersion;
    let version = agent.stream_version();
    if g.verbose {
        match version {
            StreamVersion::Declared => eprintln!(
                "note: the agent declares A2A 1.1: the stream asks for task generations \
                 and is checked for missed events"
            ),
            StreamVersion::Pinned => eprintln!(
                "note: A2A 1.1 (--a2a-version): the stream is checked for missed events \
                 (task generations)"
            ),
            StreamVersion::Off => {}
        }
    }
    version
}

/// The options `follow` runs with on the command's streams: reconnections
/// and healed gaps told on stderr; generations asked for and checked when
/// `version` says so (the calls `follow` makes itself then ask for 1.1:
/// `call` is the options of the call that opened the stream).
pub fn follow_options(call: &CallOptions, version: crate::agent::StreamVersion) -> FollowOptions {
    FollowOptions {
        call: call.clone(),
        on_reconnecting: Some(say_reconnecting()),
        generations: version.generations(),
        on_gap: Some(say_gap()),
        ..Default::default()
    }
}

/// Tells the user on stderr (one line, whatever the output format: the
/// healed task itself is the next event printed) that events of the
/// stream were lost and how the command made up for them.
pub fn say_gap() -> agentwire_client::follow::GapHook {
    std::sync::Arc::new(|gap: &agentwire_client::follow::GenerationGap| {
        eprintln!(
            "warning: {}",
            gap_line(&gap.task_id, gap.after, gap.got, gap.healed_at)
        );
    })
}

/// The line of [`say_gap`]: the events after generation `after` and
/// before `got` were lost; the task read again was at `healed_at`.
fn gap_line(task_id: &str, after: i64, got: i64, healed_at: Option<i64>) -> String {
    let lost = if got - after == 2 {
        format!("the event of generation {} was", after + 1)
    } else {
        format!(
            "the events of generations {} to {} were",
            after + 1,
            got - 1
        )
    };
    let task = render::sanitize(task_id);
    match healed_at {
        Some(at) => format!(
            "task {task}: {lost} lost on the way (a gap in the task generations); \
             healed: the task was read again (generation {at}) and replaces what the stream had given"
        ),
        None => format!(
            "task {task}: {lost} lost on the way (a gap in the task generations); \
             healed: subscribed to the task again, which restarts from the task as it is"
        ),
    }
}

/// Tells the user on stderr, before each attempt, that a cut stream is
/// being reconnected (instead of seconds of silence).
pub fn say_reconnecting() -> agentwire_client::follow::ReconnectingHook {
    std::sync::Arc::new(|r: &agentwire_client::follow::Reconnecting| {
        let cause = r
            .cause
            .as_deref()
            .map(|c| format!(" ({})", render::sanitize(c)))
            .unwrap_or_default();
        eprintln!(
            "warning: the connection to the agent was lost{cause}; reconnecting in {:.1}s \
             (attempt {} of {})",
            r.wait.as_secs_f64(),
            r.attempt,
            r.max_attempts
        );
    })
}

/// Prints a stream of events until it ends (used by `send --stream` and
/// `task subscribe --stream`).
pub async fn print_stream(
    g: &Globals,
    agent: &Agent,
    mut events: EventStream,
    ctx: &ErrorContext,
) -> Result<u8, CliError> {
    let mut printer = EventPrinter::new(g, agent.reference());
    let deadline = g.timeout.map(|t| tokio::time::Instant::now() + t);
    // One listener for the whole stream: a Ctrl-C that comes while an
    // event is being printed is not lost between two waits.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let next = async {
            match deadline {
                Some(d) => tokio::time::timeout_at(d, events.next()).await.ok(),
                None => Some(events.next().await),
            }
        };
        // Ctrl-C polled first, so that its listener is in place before the
        // first event is printed (and wins over an event ready with it).
        let item = tokio::select! {
            biased;
            _ = &mut ctrl_c => {
                // Not the end of the task: no "Final" summary of a state
                // that is still moving.
                printer.abandon();
                return Err(interrupted(printer.task_id(), true));
            }
            n = next => n,
        };
        match item {
            None => {
                printer.finish();
                return Err(timeout_error(g, printer.task_id()));
            }
            Some(None) => break,
            Some(Some(Ok(ev))) => printer.event(&ev)?,
            Some(Some(Err(e))) => {
                printer.finish();
                let mut ctx = ctx.clone();
                ctx.task_id = printer.task_id().map(str::to_owned).or(ctx.task_id);
                return Err(CliError::from_client(&e, &ctx));
            }
        }
    }
    printer.finish();
    Ok(exit::OK)
}

/// Prints events: JSONL, labelled text, or live text on a terminal.
pub struct EventPrinter {
    json: bool,
    live: bool,
    verbose: bool,
    reference: String,
    view: TaskView,
    /// Live mode: the artifact whose text is being printed.
    open_artifact: Option<String>,
    task_id: Option<String>,
}

impl EventPrinter {
    pub fn new(g: &Globals, reference: &str) -> Self {
        Self {
            json: g.output == OutputFormat::Json,
            live: g.output == OutputFormat::Text && std::io::stdout().is_terminal(),
            verbose: g.verbose,
            reference: reference.to_owned(),
            view: TaskView::new(),
            open_artifact: None,
            task_id: None,
        }
    }

    pub fn task_id(&self) -> Option<&str> {
        self.task_id.as_deref()
    }

    pub fn event(&mut self, ev: &StreamResponse) -> Result<(), CliError> {
        self.view.apply(ev);
        if self.task_id.is_none() {
            self.task_id = ev.task_id().map(str::to_owned);
        }
        if self.json {
            return render::print_json(ev);
        }
        if self.live {
            self.live_event(ev);
            return Ok(());
        }
        let mut t = Text::new();
        render::event(&mut t, ev, self.verbose);
        t.print();
        Ok(())
    }

    fn live_event(&mut self, ev: &StreamResponse) {
        let mut out = std::io::stdout().lock();
        match &ev.payload {
            Some(stream_response::Payload::ArtifactUpdate(a)) => {
                let Some(art) = &a.artifact else { return };
                let texts: Vec<&str> = art.parts.iter().filter_map(Part::as_text).collect();
                let only_text = texts.len() == art.parts.len();
                if a.append && self.open_artifact.as_deref() == Some(&art.artifact_id) && only_text
                {
                    let _ = write!(out, "{}", render::sanitize(&texts.concat()));
                } else {
                    if self.open_artifact.take().is_some() {
                        let _ = writeln!(out, "\n");
                    }
                    let mut t = Text::new();
                    t.field(
                        "Artifact",
                        if art.name.is_empty() {
                            "(unnamed)"
                        } else {
                            &art.name
                        },
                    );
                    if only_text {
                        let _ = write!(
                            out,
                            "{}Text:\n{}",
                            t.as_str(),
                            render::sanitize(&texts.concat())
                        );
                        self.open_artifact = Some(art.artifact_id.clone());
                    } else {
                        render::parts(&mut t, &art.parts, self.verbose);
                        let _ = write!(out, "{}", t.as_str());
                    }
                }
                if a.last_chunk && self.open_artifact.take().is_some() {
                    let _ = writeln!(out, "\n");
                }
            }
            _ => {
                if self.open_artifact.take().is_some() {
                    let _ = writeln!(out, "\n");
                }
                let mut t = Text::new();
                render::event(&mut t, ev, self.verbose);
                let _ = write!(out, "{}", t.as_str());
            }
        }
        let _ = out.flush();
    }

    /// Stops printing before the stream ended (Ctrl-C): closes a text
    /// artifact printed live, without the final summary of [`Self::finish`].
    pub fn abandon(&mut self) {
        if !self.json && self.open_artifact.take().is_some() {
            println!("\n");
        }
    }

    /// Restates the identifiers and the state (CLI SPEC 11.2 under
    /// `--stream`) and names a paused or unsuccessful outcome.
    pub fn finish(&mut self) {
        if self.json {
            return;
        }
        let mut out = std::io::stdout().lock();
        if self.open_artifact.take().is_some() {
            let _ = writeln!(out, "\n");
        }
        if let Some(task) = self.view.task() {
            let mut t = Text::new();
            t.field("Final", "yes");
            render::task_head(&mut t, &task);
            let (warn, next) = render::outcome_notes(&task, &self.reference);
            if let Some(n) = next {
                t.field("Next", n);
            }
            let _ = write!(out, "{}", t.as_str());
            let _ = out.flush();
            if let Some(w) = warn {
                eprintln!("warning: {w}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::gap_line;

    #[test]
    fn a_healed_gap_is_one_line_naming_what_was_lost() {
        let one = gap_line("t1", 4, 6, Some(7));
        assert_eq!(
            one,
            "task t1: the event of generation 5 was lost on the way (a gap in the task \
             generations); healed: the task was read again (generation 7) and replaces what the \
             stream had given"
        );
        let many = gap_line("t1", 2, 6, None);
        assert!(
            many.contains("the events of generations 3 to 5 were lost"),
            "{many}"
        );
        assert!(many.contains("subscribed to the task again"), "{many}");
        assert!(!many.contains('\n'));
    }
}
