//! `a2a task ...`: get (and poll), cancel, list, subscribe, download
//! artifacts, push-notification configs.

use std::path::{Path, PathBuf};

use agentwire_client::follow::{
    FollowOptions, OpenedBy, PollOptions, TaskView, follow, wait_for_task,
};
use agentwire_client::{CallOptions, Transport};
use agentwire_types::{
    AgentCard, AuthenticationInfo, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    ErrorKind, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, SubscribeToTaskRequest, Task,
    TaskPushNotificationConfig, TaskState, part,
};
use clap::{Args, Subcommand};
use futures::StreamExt;

use crate::agent::Agent;
use crate::error::{CliError, a2a_error_name, exit, paste};
use crate::ledger::Recorder;
use crate::progress::Progress;
use crate::render::{self, Text};
use crate::send::print_stream;
use crate::{Globals, OutputFormat, PollOpts, StreamOpt, TaskIdOpt, TimeoutOpt};

#[derive(Subcommand, Debug)]
pub enum TaskCommand {
    /// Show a task: state, artifacts, history (--wait polls until it is terminal or interrupted).
    Get(GetArgs),
    /// Cancel a task and show its resulting state.
    Cancel(IdArg),
    /// List tasks, newest first (filter with --context-id and --status).
    List(ListArgs),
    /// Follow a task's live events (SubscribeToTask), resubscribing if the connection drops.
    Subscribe(SubscribeArgs),
    /// Wait for a task to change: long-polls GetTask (A2A 1.1 generations) until it is terminal or interrupted, or its generation passes --after.
    Wait(WaitArgs),
    /// Save a task's artifacts to files.
    Download(DownloadArgs),
    /// Manage a task's push-notification configurations.
    PushConfig {
        #[command(subcommand)]
        command: PushCommand,
    },
}

#[derive(Args, Debug)]
#[command(mut_arg("task_id", |a| a.help(crate::TASK_ID_HELP)))]
pub struct IdArg {
    /// The task id (or --task-id).
    #[arg(value_name = "TASK_ID")]
    pub id: Option<String>,
    #[command(flatten)]
    pub task: TaskIdOpt,
}

#[derive(Args, Debug)]
#[command(mut_arg("task_id", |a| a.help(crate::TASK_ID_HELP)))]
pub struct GetArgs {
    /// The task id (or --task-id).
    #[arg(value_name = "TASK_ID")]
    pub id: Option<String>,
    /// How many of the most recent history messages to include.
    #[arg(long, value_name = "N")]
    pub history: Option<i32>,
    #[command(flatten)]
    pub task: TaskIdOpt,
    #[command(flatten)]
    pub poll: PollOpts,
    #[command(flatten)]
    pub timeout: TimeoutOpt,
}

#[derive(Args, Debug)]
#[command(mut_arg("task_id", |a| a.help(crate::TASK_ID_HELP)))]
pub struct SubscribeArgs {
    /// The task id (or --task-id).
    #[arg(value_name = "TASK_ID")]
    pub id: Option<String>,
    #[command(flatten)]
    pub task: TaskIdOpt,
    #[command(flatten)]
    pub stream: StreamOpt,
    #[command(flatten)]
    pub timeout: TimeoutOpt,
}

#[derive(Args, Debug)]
#[command(mut_arg("task_id", |a| a.help(crate::TASK_ID_HELP)))]
pub struct WaitArgs {
    /// The task id (or --task-id).
    #[arg(value_name = "TASK_ID")]
    pub id: Option<String>,
    /// Answer as soon as the task's generation is past N (A2A 1.1); without it, wait for a terminal or interrupted state.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub after: Option<i64>,
    /// How many of the most recent history messages to include.
    #[arg(long, value_name = "N")]
    pub history: Option<i32>,
    /// Without long-polling (an agent without generations): the first time between two polls, growing to 8 times it.
    #[arg(long, env = "A2ACLI_POLL_INTERVAL", default_value = "2s", value_parser = crate::parse_duration, value_name = "DURATION")]
    pub poll_interval: std::time::Duration,
    #[command(flatten)]
    pub task: TaskIdOpt,
    #[command(flatten)]
    pub timeout: TimeoutOpt,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only tasks in this state (e.g. working, input-required, TASK_STATE_COMPLETED).
    #[arg(long, value_name = "STATE")]
    pub status: Option<String>,
    /// Tasks per page.
    #[arg(long, value_name = "N")]
    pub page_size: Option<i32>,
    /// The page to read (nextPageToken of the previous page).
    #[arg(long, value_name = "TOKEN")]
    pub page_token: Option<String>,
    /// History messages per task.
    #[arg(long, value_name = "N")]
    pub history: Option<i32>,
    /// Include each task's artifacts.
    #[arg(long)]
    pub include_artifacts: bool,
    /// Follow nextPageToken and list every page.
    #[arg(long)]
    pub all: bool,
    /// Only tasks of this context.
    #[arg(long, env = "A2ACLI_CONTEXT_ID", value_name = "ID")]
    pub context_id: Option<String>,
    /// With -o json: one Task per line (JSONL) instead of one document. Never read from the environment.
    #[arg(long)]
    pub stream: bool,
}

#[derive(Args, Debug)]
#[command(mut_arg("task_id", |a| a.help(crate::TASK_ID_HELP)))]
pub struct DownloadArgs {
    /// The task id (or --task-id).
    #[arg(value_name = "TASK_ID")]
    pub id: Option<String>,
    /// Directory to write into.
    #[arg(long, short = 'd', default_value = ".", value_name = "DIR")]
    pub dir: PathBuf,
    /// Only this artifact.
    #[arg(long, value_name = "ID")]
    pub artifact_id: Option<String>,
    /// Overwrite existing files.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub task: TaskIdOpt,
}

#[derive(Subcommand, Debug)]
pub enum PushCommand {
    /// Create a push-notification config for a task.
    Create(PushCreateArgs),
    /// Show one config.
    Get(PushIdArgs),
    /// List a task's configs.
    List(IdArg),
    /// Delete one config.
    Delete(PushIdArgs),
}

#[derive(Args, Debug)]
#[command(mut_arg("task_id", |a| a.help(crate::TASK_ID_HELP)))]
pub struct PushCreateArgs {
    /// The task id (or --task-id).
    #[arg(value_name = "TASK_ID")]
    pub id: Option<String>,
    // The same names as the inline push config of `a2a send` (the former
    // --url, --token, --auth-scheme and --auth-credentials are hidden
    // aliases).
    /// The webhook URL the agent calls (e.g. one `a2a webhook` listens on).
    #[arg(long = "push-url", alias = "url", value_name = "URL")]
    pub url: String,
    /// Token the agent sends back with each notification (X-A2A-Notification-Token).
    #[arg(long = "push-token", alias = "token", value_name = "TOKEN")]
    pub token: Option<String>,
    /// The config id (default: chosen by the agent).
    #[arg(long = "config-id", value_name = "ID")]
    pub config_id: Option<String>,
    /// Authentication scheme the agent uses to call the webhook (e.g. Bearer).
    #[arg(
        long = "push-auth-scheme",
        alias = "auth-scheme",
        value_name = "SCHEME"
    )]
    pub auth_scheme: Option<String>,
    /// Credentials for that scheme.
    #[arg(
        long = "push-auth-credentials",
        alias = "auth-credentials",
        value_name = "CREDENTIALS",
        requires = "auth_scheme"
    )]
    pub auth_credentials: Option<String>,
    #[command(flatten)]
    pub task: TaskIdOpt,
}

#[derive(Args, Debug)]
pub struct PushIdArgs {
    /// The task id.
    #[arg(value_name = "TASK_ID")]
    pub id: String,
    /// The config id.
    #[arg(value_name = "CONFIG_ID")]
    pub config_id: String,
}

fn task_id(g: &Globals, positional: Option<String>) -> Result<String, CliError> {
    positional
        .or_else(|| g.task_id.clone())
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| CliError::usage("no task given: pass the task id (or --task-id)"))
}

pub async fn run(g: &Globals, cmd: TaskCommand) -> Result<u8, CliError> {
    match cmd {
        TaskCommand::Get(a) => get(&g.with(&a.task).with(&a.poll).with(&a.timeout), a).await,
        TaskCommand::Cancel(a) => cancel(&g.with(&a.task), a).await,
        TaskCommand::List(a) => {
            let mut g = g.clone();
            g.context_id.clone_from(&a.context_id);
            g.stream = a.stream;
            list(&g, a).await
        }
        TaskCommand::Subscribe(a) => {
            subscribe(&g.with(&a.task).with(&a.stream).with(&a.timeout), a).await
        }
        TaskCommand::Download(a) => download(&g.with(&a.task), a).await,
        TaskCommand::Wait(a) => wait(&g.with(&a.task).with(&a.timeout), a).await,
        TaskCommand::PushConfig { command } => {
            let g = match &command {
                PushCommand::Create(a) => g.with(&a.task),
                PushCommand::List(a) => g.with(&a.task),
                PushCommand::Get(_) | PushCommand::Delete(_) => g.clone(),
            };
            push(&g, command).await
        }
    }
}

fn print_task(g: &Globals, agent: &Agent, task: &Task) -> Result<(), CliError> {
    match g.output {
        OutputFormat::Json => {
            if let (Some(w), _) = render::outcome_notes(task, agent.reference()) {
                eprintln!("warning: {w}");
            }
            render::print_json(task)
        }
        OutputFormat::Text => {
            render::print_task_text(task, agent.reference(), g.verbose);
            Ok(())
        }
    }
}

async fn get(g: &Globals, a: GetArgs) -> Result<u8, CliError> {
    let id = task_id(g, a.id)?;
    let (g, id) = crate::ledger::resolve_task(g, id).await?;
    let g = &g;
    let agent = Agent::connect(g).await?;
    let call = CallOptions::new();
    let task = if g.wait {
        let poll = PollOptions {
            interval: g.poll_interval,
            max_interval: None,
            timeout: g.timeout,
            history_length: a.history,
        };
        let progress = Progress::start(g, format!("waiting for task {id}"));
        let res = tokio::select! {
            r = wait_for_task(&agent.client, &id, &poll, &call, |t| {
                tracing::debug!("poll: {} is {}", t.id, render::state_label(t.state()));
                progress.task(t);
            }) => r.map_err(|e| agent.task_err(&e, &id)),
            _ = tokio::signal::ctrl_c() => Err(crate::send::interrupted(Some(&id), false)),
        };
        progress.finish();
        res?
    } else {
        let req = GetTaskRequest {
            id: id.clone(),
            history_length: a.history,
            ..Default::default()
        };
        agent
            .client
            .get_task(req, &call)
            .await
            .map_err(|e| agent.task_err(&e, &id))?
    };
    Recorder::open(g, agent.reference()).await.task(&task).await;
    print_task(g, &agent, &task)?;
    Ok(exit::OK)
}

/// `a2a task wait`: long-polls until the task changes (see
/// [`agentwire_client::generation::wait_for_change`]).
async fn wait(g: &Globals, a: WaitArgs) -> Result<u8, CliError> {
    use agentwire_client::generation::{WaitEvent, WaitMode, WaitOptions, wait_for_change};
    let id = task_id(g, a.id)?;
    let (g, id) = crate::ledger::resolve_task(g, id).await?;
    let g = &g;
    let agent = Agent::connect(g).await?;
    let opts = WaitOptions {
        after: a.after,
        timeout: g.timeout,
        poll_interval: a.poll_interval,
        history_length: a.history,
        ..Default::default()
    };
    let verbose = g.verbose;
    let progress = Progress::start(g, format!("waiting for task {id} to change"));
    let call = CallOptions::new();
    let res = tokio::select! {
        r = wait_for_change(&agent.client, &id, &opts, &call, |e, t| {
            match (e, t) {
                (WaitEvent::FallingBack { reason }, _) => {
                    tracing::debug!("task wait: {reason}; polling with backoff");
                    if verbose {
                        eprintln!("note: {reason}; polling every {:?} with backoff instead of long-polling",
                            a.poll_interval);
                    }
                }
                (WaitEvent::Read(mode), Some(t)) => {
                    tracing::debug!(
                        "{}: {} is {} at generation {}",
                        if mode == WaitMode::LongPoll { "long-poll" } else { "poll" },
                        t.id,
                        render::state_label(t.state()),
                        t.generation
                    );
                    progress.task(t);
                }
                (WaitEvent::Read(_), None) => {}
            }
        }) => r.map_err(|e| agent.task_err(&e, &id)),
        _ = tokio::signal::ctrl_c() => Err(crate::send::interrupted(Some(&id), false)),
    };
    progress.finish();
    let (task, _) = res?;
    Recorder::open(g, agent.reference()).await.task(&task).await;
    print_task(g, &agent, &task)?;
    Ok(exit::OK)
}

async fn cancel(g: &Globals, a: IdArg) -> Result<u8, CliError> {
    let id = task_id(g, a.id)?;
    let (g, id) = crate::ledger::resolve_task(g, id).await?;
    let g = &g;
    let agent = Agent::connect(g).await?;
    let call = CallOptions::new();
    let req = CancelTaskRequest {
        id: id.clone(),
        metadata: crate::send::metadata(g)?,
        ..Default::default()
    };
    let task = match agent.client.cancel_task(req, &call).await {
        Ok(t) => t,
        Err(e) if e.kind() == Some(ErrorKind::TaskNotCancelable) => {
            // Idempotent: a task that is already canceled is what was asked.
            let get = GetTaskRequest {
                id: id.clone(),
                ..Default::default()
            };
            match agent.client.get_task(get, &call).await {
                Ok(t) if t.state() == TaskState::Canceled => t,
                Ok(t) => {
                    return Err(agent.task_err(&e, &id).with_hint(format!(
                        "task {id} already ended {}; nothing to cancel",
                        render::state_label(t.state())
                    )));
                }
                Err(_) => return Err(agent.task_err(&e, &id)),
            }
        }
        Err(e) => return Err(agent.task_err(&e, &id)),
    };
    Recorder::open(g, agent.reference()).await.task(&task).await;
    print_task(g, &agent, &task)?;
    Ok(exit::OK)
}

async fn list(g: &Globals, a: ListArgs) -> Result<u8, CliError> {
    let status = match &a.status {
        Some(s) => TaskState::parse(s).ok_or_else(|| {
            CliError::usage(format!(
                "--status {s}: unknown state (submitted, working, input-required, auth-required, completed, failed, canceled, rejected)"
            ))
        })? as i32,
        None => 0,
    };
    let agent = Agent::connect(g).await?;
    let call = CallOptions::new();
    let mut req = ListTasksRequest {
        context_id: g.context_id.clone().unwrap_or_default(),
        status,
        page_size: a.page_size,
        page_token: a.page_token.clone().unwrap_or_default(),
        history_length: a.history,
        include_artifacts: a.include_artifacts.then_some(true),
        ..Default::default()
    };
    let mut pages = Vec::new();
    loop {
        let page = agent
            .client
            .list_tasks(req.clone(), &call)
            .await
            .map_err(|e| agent.err(&e))?;
        let next = page.next_page_token.clone();
        pages.push(page);
        if !a.all || next.is_empty() || pages.len() >= 1000 {
            break;
        }
        req.page_token = next;
    }
    Recorder::open(g, agent.reference())
        .await
        .known_tasks(pages.iter().flat_map(|p| &p.tasks))
        .await;
    match (g.output, g.stream) {
        (OutputFormat::Json, true) => {
            for t in pages.iter().flat_map(|p| &p.tasks) {
                render::print_json(t)?;
            }
        }
        (OutputFormat::Json, false) => {
            let mut merged = pages.remove(0);
            for p in pages {
                merged.tasks.extend(p.tasks);
                merged.next_page_token = p.next_page_token;
            }
            render::print_json(&merged)?;
        }
        (OutputFormat::Text, _) => {
            let count: usize = pages.iter().map(|p| p.tasks.len()).sum();
            let last = pages.last().cloned().unwrap_or_default();
            let mut t = Text::new();
            t.field("Tasks", count.to_string());
            t.field("Total", last.total_size.to_string());
            if !last.next_page_token.is_empty() {
                t.field("Next Page Token", &last.next_page_token);
            }
            for task in pages.iter().flat_map(|p| &p.tasks) {
                t.blank();
                render::task_head(&mut t, task);
                if let Some(ts) = task.status_timestamp() {
                    t.field("Updated", ts.to_string());
                }
                if a.include_artifacts {
                    t.field("Artifacts", task.artifacts.len().to_string());
                }
            }
            t.print();
        }
    }
    Ok(exit::OK)
}

async fn subscribe(g: &Globals, a: SubscribeArgs) -> Result<u8, CliError> {
    let id = task_id(g, a.id)?;
    let (g, id) = crate::ledger::resolve_task(g, id).await?;
    let g = &g;
    let mut agent = Agent::connect(g).await?;
    if !agent.confirm(AgentCard::supports_streaming).await? {
        return Err(CliError::new(
            &a2a_error_name(ErrorKind::UnsupportedOperation),
            exit::FAILURE,
            "the agent card does not declare streaming, so tasks cannot be subscribed to",
        )
        .with_hint(format!(
            "poll instead: `{}`",
            paste("task get", &format!("--wait {id}"))
        )));
    }
    let call = CallOptions::new();
    let mut ctx = agent.error_context();
    ctx.task_id = Some(id.clone());
    // Open the subscription here so that refusals (unknown task, terminal
    // task) surface as they are; `follow` then survives dropped connections.
    let version = crate::send::stream_version(g, &agent);
    let stream_call = version.call(&call);
    let first = match agent
        .client
        .subscribe_to_task(
            SubscribeToTaskRequest {
                id: id.clone(),
                ..Default::default()
            },
            &stream_call,
        )
        .await
    {
        Ok(s) => s,
        Err(e) => return Err(subscribe_refused(&agent, &e, &id, &ctx).await),
    };
    let opts = FollowOptions {
        opened_by: OpenedBy::SubscribeToTask,
        ..crate::send::follow_options(&stream_call, version)
    };
    let events = follow(agent.client.clone(), Some(first), Some(id.clone()), opts);
    let events = Recorder::open(g, agent.reference())
        .await
        .wrap(events, None);
    if g.stream {
        return print_stream(g, &agent, events, &ctx).await;
    }
    let mut events = events;
    let mut view = TaskView::new();
    let deadline = g.timeout.map(|t| tokio::time::Instant::now() + t);
    let progress = Progress::start(g, format!("following task {id}"));
    loop {
        let next = async {
            match deadline {
                Some(d) => tokio::time::timeout_at(d, events.next()).await.ok(),
                None => Some(events.next().await),
            }
        };
        match next.await {
            None => {
                return Err(CliError::from_client(
                    &agentwire_client::ClientError::WaitTimeout {
                        task_id: id.clone(),
                        waited: g.timeout.unwrap_or_default(),
                        last_state: view.state().unwrap_or_default().short_name().into(),
                    },
                    &ctx,
                ));
            }
            Some(None) => break,
            Some(Some(Ok(ev))) => {
                progress.event(&ev);
                view.apply(&ev);
            }
            Some(Some(Err(e))) => return Err(CliError::from_client(&e, &ctx)),
        }
    }
    progress.finish();
    let task = view
        .task()
        .ok_or_else(|| CliError::internal("the subscription ended without a task"))?;
    print_task(g, &agent, &task)?;
    Ok(exit::OK)
}

/// A refused subscription: when the task is already finished (agents
/// refuse to subscribe to a terminal task), says so and how to see its
/// result; otherwise the agent's error as it is.
async fn subscribe_refused(
    agent: &Agent,
    e: &agentwire_client::ClientError,
    id: &str,
    ctx: &crate::error::ErrorContext,
) -> CliError {
    let err = CliError::from_client(e, ctx);
    if e.kind().is_none() || e.kind() == Some(ErrorKind::TaskNotFound) {
        return err;
    }
    let req = GetTaskRequest {
        id: id.to_owned(),
        history_length: Some(0),
        ..Default::default()
    };
    match agent.client.get_task(req, &CallOptions::new()).await {
        Ok(t) if t.state().is_terminal() => CliError {
            message: format!(
                "task {id} is already finished ({}): there is nothing left to follow",
                render::state_label(t.state())
            ),
            hint: Some(format!(
                "see its result with `{}` (or save its artifacts with `{}`)",
                paste("task get", id),
                paste("task download", id)
            )),
            ..err
        },
        _ => err,
    }
}

/// A safe file name: the last path component, no leading dots.
fn safe_name(name: &str) -> Option<String> {
    let base = Path::new(name).file_name()?.to_string_lossy().into_owned();
    let base = base.trim_start_matches('.').trim().to_owned();
    (!base.is_empty()).then_some(base)
}

fn extension_for(media_type: &str) -> &'static str {
    // The media type without parameters (`text/plain; charset=utf-8`).
    let media = media_type.split(';').next().unwrap_or_default().trim();
    match media {
        "text/plain" => "txt",
        "text/markdown" => "md",
        "text/csv" => "csv",
        "text/html" => "html",
        "application/json" => "json",
        "application/xml" | "text/xml" => "xml",
        "application/yaml" | "text/yaml" => "yaml",
        "application/pdf" => "pdf",
        "application/zip" => "zip",
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/mpeg" => "mp3",
        "audio/wav" => "wav",
        "video/mp4" => "mp4",
        _ => "bin",
    }
}

/// One file `task download` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    name: String,
    bytes: Vec<u8>,
    media: String,
    /// How many parts went into it.
    parts: usize,
}

/// What a run of parts of one artifact is, for joining.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Text,
    Raw,
    Data,
}

/// Consecutive parts of one artifact that make one file: text or bytes of
/// one media type (and file name) are joined, as a streamed artifact comes
/// in chunks; each data part stands alone (JSON documents do not join).
struct Run {
    kind: Kind,
    media: String,
    filename: String,
    bytes: Vec<u8>,
    parts: usize,
}

/// The files of one artifact (`names` holds the names planned so far, so
/// that no two files of one download share a name), and the parts that
/// are not downloaded (URLs).
fn plan_artifact(
    art: &agentwire_types::Artifact,
    names: &mut std::collections::HashSet<String>,
) -> (Vec<Planned>, Vec<String>) {
    let mut runs: Vec<Run> = Vec::new();
    let mut skipped = Vec::new();
    for p in &art.parts {
        let (kind, media, bytes) = match &p.content {
            Some(part::Content::Text(s)) => (
                Kind::Text,
                if p.media_type.is_empty() {
                    "text/plain".to_owned()
                } else {
                    p.media_type.clone()
                },
                s.as_bytes().to_vec(),
            ),
            Some(part::Content::Raw(b)) => (
                Kind::Raw,
                if p.media_type.is_empty() {
                    "application/octet-stream".to_owned()
                } else {
                    p.media_type.clone()
                },
                b.to_vec(),
            ),
            Some(part::Content::Data(_)) => (
                Kind::Data,
                "application/json".to_owned(),
                serde_json::to_vec_pretty(&p.as_data().unwrap_or_default()).unwrap_or_default(),
            ),
            Some(part::Content::Url(u)) => {
                skipped.push(format!("{u} (a URL: fetch it yourself)"));
                continue;
            }
            None => continue,
        };
        let filename = safe_name(&p.filename).unwrap_or_default();
        match runs.last_mut() {
            Some(r)
                if kind != Kind::Data
                    && r.kind == kind
                    && r.media == media
                    && (filename.is_empty() || filename == r.filename) =>
            {
                r.bytes.extend_from_slice(&bytes);
                r.parts += 1;
            }
            _ => runs.push(Run {
                kind,
                media,
                filename,
                bytes,
                parts: 1,
            }),
        }
    }
    let base = safe_name(&art.name).unwrap_or_else(|| format!("artifact-{}", art.artifact_id));
    let base_path = Path::new(&base);
    let stem = base_path
        .file_stem()
        .map_or_else(|| base.clone(), |s| s.to_string_lossy().into_owned());
    let has_ext = base_path.extension().is_some();
    let single = runs.len() == 1;
    let files = runs
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let ext = extension_for(&r.media);
            let name = match (single, r.filename.is_empty()) {
                // One file: the part's own file name, else the artifact's
                // name (with an extension for its media type if it has none).
                (true, false) => r.filename.clone(),
                (true, true) if has_ext => base.clone(),
                (true, true) => format!("{base}.{ext}"),
                // Several: the artifact's name, then the part's file name or
                // its position.
                (false, false) => format!("{stem}-{}", r.filename),
                (false, true) => format!("{stem}-part{}.{ext}", i + 1),
            };
            Planned {
                name: unique(name, names),
                bytes: r.bytes,
                media: r.media,
                parts: r.parts,
            }
        })
        .collect();
    (files, skipped)
}

/// `name`, or `name` with `-2`, `-3`... before its extension when a file
/// of this download already has it.
fn unique(name: String, names: &mut std::collections::HashSet<String>) -> String {
    if names.insert(name.clone()) {
        return name;
    }
    let p = Path::new(&name);
    let stem = p
        .file_stem()
        .map_or_else(|| name.clone(), |s| s.to_string_lossy().into_owned());
    let ext = p
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (2..)
        .map(|n| format!("{stem}-{n}{ext}"))
        .find(|candidate| names.insert(candidate.clone()))
        .unwrap_or(name)
}

async fn download(g: &Globals, a: DownloadArgs) -> Result<u8, CliError> {
    let id = task_id(g, a.id)?;
    let (g, id) = crate::ledger::resolve_task(g, id).await?;
    let g = &g;
    let agent = Agent::connect(g).await?;
    let task = agent
        .client
        .get_task(
            GetTaskRequest {
                id: id.clone(),
                ..Default::default()
            },
            &CallOptions::new(),
        )
        .await
        .map_err(|e| agent.task_err(&e, &id))?;
    Recorder::open(g, agent.reference()).await.task(&task).await;
    let artifacts: Vec<_> = task
        .artifacts
        .iter()
        .filter(|x| {
            a.artifact_id
                .as_deref()
                .is_none_or(|want| x.artifact_id == want)
        })
        .collect();
    if let Some(want) = &a.artifact_id
        && artifacts.is_empty()
    {
        return Err(
            CliError::usage(format!("task {id} has no artifact {want}")).with_hint(format!(
                "list its artifacts with `{}`",
                paste("task get", &id)
            )),
        );
    }
    let mut names = std::collections::HashSet::new();
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for art in &artifacts {
        let (f, s) = plan_artifact(art, &mut names);
        files.extend(f);
        skipped.extend(s);
    }
    // Nothing is written when a file is in the way.
    if !a.force {
        let existing: Vec<String> = files
            .iter()
            .map(|f| a.dir.join(&f.name))
            .filter(|p| p.exists())
            .map(|p| p.display().to_string())
            .collect();
        if !existing.is_empty() {
            // The caller's choice of destination is what must change: a
            // usage error (exit 2), nothing written.
            return Err(CliError::usage(format!(
                "{} already exist{}; nothing was written",
                existing.join(", "),
                if existing.len() == 1 { "s" } else { "" }
            ))
            .with_hint(format!(
                "pass --force to overwrite, or --dir to write elsewhere: `{}`",
                paste("task download", &format!("{id} --dir <DIR>"))
            )));
        }
    }
    std::fs::create_dir_all(&a.dir)
        .map_err(|e| CliError::internal(format!("cannot create {}: {e}", a.dir.display())))?;
    let mut saved: Vec<(String, String)> = Vec::new();
    for f in &files {
        let path = a.dir.join(&f.name);
        write_file(&path, &f.bytes, a.force)?;
        let parts = if f.parts > 1 {
            format!(", {} parts joined", f.parts)
        } else {
            String::new()
        };
        saved.push((
            path.display().to_string(),
            format!("{}{parts}, {} bytes", f.media, f.bytes.len()),
        ));
    }
    match g.output {
        OutputFormat::Json => {
            render::print_json(&task)?;
            for (p, _) in &saved {
                eprintln!("saved {p}");
            }
        }
        OutputFormat::Text => {
            let mut t = Text::new();
            render::task_head(&mut t, &task);
            t.field("Saved Files", saved.len().to_string());
            for (p, what) in &saved {
                t.field("Saved", format!("{p} ({what})"));
            }
            for s in &skipped {
                t.field("Not Downloaded", s);
            }
            t.print();
        }
    }
    for s in &skipped {
        eprintln!("warning: not downloaded: {s}");
    }
    Ok(exit::OK)
}

/// Writes a downloaded file: never over an existing one unless `force`
/// (a file that appeared since the check is not overwritten either).
fn write_file(path: &Path, bytes: &[u8], force: bool) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    options
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists && !force {
                CliError::usage(format!(
                    "{} already exists; it was not overwritten",
                    path.display()
                ))
                .with_hint("pass --force to overwrite it, or --dir to write elsewhere")
            } else {
                CliError::internal(format!("cannot write {}: {e}", path.display()))
            }
        })
}

async fn push(g: &Globals, cmd: PushCommand) -> Result<u8, CliError> {
    let mut agent = Agent::connect(g).await?;
    if !agent
        .confirm(AgentCard::supports_push_notifications)
        .await?
    {
        // Checked on the card before calling (CLI SPEC 13.3).
        return Err(CliError::new(
            &a2a_error_name(ErrorKind::PushNotificationNotSupported),
            exit::FAILURE,
            "the agent card does not declare capabilities.pushNotifications",
        )
        .with_hint(format!(
            "this agent does not support push notifications; follow tasks with `{}` or `{}`",
            paste("task subscribe", "<taskId>"),
            paste("task get", "--wait <taskId>")
        )));
    }
    push_call(g, &agent, cmd).await
}

/// A failed call on one push config. Agents answer `TaskNotFoundError`
/// for a config id the task does not have (the protocol has no error of
/// its own for it): when the task exists, the config is what is missing,
/// and the message and hint say so (the error keeps the agent's name).
async fn config_err(
    agent: &Agent,
    e: &agentwire_client::ClientError,
    task_id: &str,
    config_id: &str,
) -> CliError {
    let err = agent.task_err(e, task_id);
    if e.kind() != Some(ErrorKind::TaskNotFound) {
        return err;
    }
    let req = GetTaskRequest {
        id: task_id.to_owned(),
        history_length: Some(0),
        ..Default::default()
    };
    match agent.client.get_task(req, &CallOptions::new()).await {
        Ok(_) => CliError {
            message: format!("task {task_id} has no push notification config {config_id}"),
            hint: Some(format!(
                "the task exists; list its configs with `{}`",
                paste("task push-config list", task_id)
            )),
            ..err
        },
        Err(_) => err,
    }
}

/// The push-config calls, without the capability check (the agent's own
/// answer decides).
pub async fn push_call(g: &Globals, agent: &Agent, cmd: PushCommand) -> Result<u8, CliError> {
    let call = CallOptions::new();
    let json = g.output == OutputFormat::Json;
    match cmd {
        PushCommand::Create(a) => {
            let id = task_id(g, a.id)?;
            let req = TaskPushNotificationConfig {
                id: a.config_id.unwrap_or_default(),
                task_id: id.clone(),
                url: a.url,
                token: a.token.unwrap_or_default(),
                authentication: a.auth_scheme.map(|scheme| AuthenticationInfo {
                    scheme,
                    credentials: a.auth_credentials.unwrap_or_default(),
                }),
                ..Default::default()
            };
            let c = agent
                .client
                .create_task_push_notification_config(req, &call)
                .await
                .map_err(|e| agent.task_err(&e, &id))?;
            if json {
                render::print_json(&c)?;
            } else {
                let mut t = Text::new();
                render::push_config(&mut t, &c);
                t.print();
            }
        }
        PushCommand::Get(a) => {
            let req = GetTaskPushNotificationConfigRequest {
                task_id: a.id.clone(),
                id: a.config_id.clone(),
                ..Default::default()
            };
            let c = match agent
                .client
                .get_task_push_notification_config(req, &call)
                .await
            {
                Ok(c) => c,
                Err(e) => return Err(config_err(agent, &e, &a.id, &a.config_id).await),
            };
            if json {
                render::print_json(&c)?;
            } else {
                let mut t = Text::new();
                render::push_config(&mut t, &c);
                t.print();
            }
        }
        PushCommand::List(a) => {
            let id = task_id(g, a.id)?;
            let req = ListTaskPushNotificationConfigsRequest {
                task_id: id.clone(),
                ..Default::default()
            };
            let list = agent
                .client
                .list_task_push_notification_configs(req, &call)
                .await
                .map_err(|e| agent.task_err(&e, &id))?;
            if json {
                render::print_json(&list)?;
            } else {
                let mut t = Text::new();
                t.field("Task ID", &id);
                t.field("Configs", list.configs.len().to_string());
                for c in &list.configs {
                    t.blank();
                    render::push_config(&mut t, c);
                }
                t.print();
            }
        }
        PushCommand::Delete(a) => {
            let req = DeleteTaskPushNotificationConfigRequest {
                task_id: a.id.clone(),
                id: a.config_id.clone(),
                ..Default::default()
            };
            if let Err(e) = agent
                .client
                .delete_task_push_notification_config(req, &call)
                .await
            {
                return Err(config_err(agent, &e, &a.id, &a.config_id).await);
            }
            if json {
                render::print_json(&serde_json::json!({}))?;
            } else {
                let mut t = Text::new();
                t.field("Task ID", &a.id);
                t.field("Deleted Config ID", &a.config_id);
                t.print();
            }
        }
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{Artifact, Part};

    fn names(files: &[Planned]) -> Vec<&str> {
        files.iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn one_file_per_artifact_and_clear_names() {
        let mut seen = std::collections::HashSet::new();
        // Chunks of one media type: one file, named after the artifact.
        let chunks = Artifact::new(
            "report.md",
            vec![
                Part::text("# A").with_media_type("text/markdown"),
                Part::text("\nb").with_media_type("text/markdown"),
                Part::text("\nc").with_media_type("text/markdown"),
            ],
        );
        let (files, skipped) = plan_artifact(&chunks, &mut seen);
        assert_eq!(names(&files), ["report.md"]);
        assert_eq!(files[0].bytes, b"# A\nb\nc");
        assert_eq!(files[0].parts, 3);
        assert!(skipped.is_empty());
        // The same name again gets a suffix before its extension.
        let (files, _) = plan_artifact(&chunks, &mut seen);
        assert_eq!(names(&files), ["report-2.md"]);
        // Distinct parts: the artifact's stem, then the file name or position.
        let mixed = Artifact::new(
            "bundle.zip",
            vec![
                Part::text("a"),
                Part::data(serde_json::json!({"k": 1})),
                Part::data(serde_json::json!({"k": 2})),
                Part::file(&b"x"[..], "img.png", "image/png"),
                Part::url("https://example.com/big.csv"),
            ],
        );
        let (files, skipped) = plan_artifact(&mixed, &mut seen);
        assert_eq!(
            names(&files),
            [
                "bundle-part1.txt",
                "bundle-part2.json",
                "bundle-part3.json",
                "bundle-img.png"
            ]
        );
        assert_eq!(skipped.len(), 1);
        // One file part: its own name.
        let one = Artifact::new("x", vec![Part::file(&b"y"[..], "data.csv", "text/csv")]);
        assert_eq!(names(&plan_artifact(&one, &mut seen).0), ["data.csv"]);
        // No name: the artifact id, and an extension for the media type.
        let mut anon = Artifact::new("", vec![Part::text("t")]);
        anon.artifact_id = "a1".into();
        assert_eq!(
            names(&plan_artifact(&anon, &mut seen).0),
            ["artifact-a1.txt"]
        );
    }
}
