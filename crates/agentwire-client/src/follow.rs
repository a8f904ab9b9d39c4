//! Streaming helpers: whole artifacts out of chunks, a task view built from
//! events, following a task across dropped connections, and polling.
//!
//! - [`ArtifactAssembler`]: applies `TaskArtifactUpdateEvent`s (`append`,
//!   `lastChunk`) and gives whole artifacts.
//! - [`TaskView`]: the task as a stream of events leaves it (the `Task`
//!   snapshot, then status and artifact updates).
//! - [`follow`]: a stream of a task's events that survives dropped
//!   connections: it resubscribes (`SubscribeToTask`) with the id of the
//!   last event received (`Last-Event-ID`), so that each event comes once,
//!   none missing, and otherwise reconciles with `GetTask`, so a final
//!   state is never missed.
//! - [`wait_for_task`]: polls `GetTask` until a terminal or interrupted
//!   state, with an interval, bounded backoff and a timeout.
//!
//! ```no_run
//! # async fn demo(client: agentwire_client::Client) -> Result<(), agentwire_client::ClientError> {
//! use agentwire_client::follow::{FollowOptions, TaskView, follow};
//! use agentwire_types::Message;
//! use futures::StreamExt;
//!
//! let events = client.stream(Message::user_text("write the report")).await?;
//! // Keep following even if the connection drops half-way.
//! let mut events = follow(client.clone(), Some(events), None, FollowOptions::default());
//! let mut view = TaskView::new();
//! while let Some(event) = events.next().await {
//!     view.apply(&event?);
//! }
//! let task = view.task().expect("a task");
//! for artifact in &task.artifacts {
//!     println!("{}: {}", artifact.name, artifact.text_content());
//! }
//! # Ok(()) }
//! ```

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_types::{
    Artifact, ErrorKind, GetTaskRequest, Message, StreamResponse, SubscribeToTaskRequest, Task,
    TaskArtifactUpdateEvent, TaskState, TaskStatus, stream_response,
};
use futures::StreamExt;

use crate::error::{ClientError, ClientResult};
use crate::generation::{GenerationTracker, Observed};
use crate::transport::{CallOptions, EventStream, LastEventId, Transport};

/// Builds whole artifacts from artifact update events.
///
/// An event with `append: false` sets the artifact (a new one, or a
/// replacement of the artifact with the same id); `append: true` adds its
/// parts to the artifact with that id. `lastChunk` marks it complete.
///
/// ```
/// use agentwire_client::follow::ArtifactAssembler;
/// use agentwire_types::{Artifact, TaskArtifactUpdateEvent};
///
/// let mut asm = ArtifactAssembler::new();
/// let mut first = TaskArtifactUpdateEvent::new("t", "c", Artifact::text("report", "Hello, ").with_id("a1"));
/// asm.push(&first);
/// let mut second = TaskArtifactUpdateEvent::new("t", "c", Artifact::text("report", "world").with_id("a1"));
/// second.append = true;
/// second.last_chunk = true;
/// asm.push(&second);
/// assert_eq!(asm.artifacts().len(), 1);
/// assert_eq!(asm.artifacts()[0].text_content(), "Hello, world");
/// assert!(asm.is_complete("a1"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ArtifactAssembler {
    artifacts: Vec<Artifact>,
    complete: HashSet<String>,
}

impl ArtifactAssembler {
    /// No artifacts yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts from the artifacts of a task snapshot (all complete).
    pub fn from_artifacts(artifacts: Vec<Artifact>) -> Self {
        let complete = artifacts.iter().map(|a| a.artifact_id.clone()).collect();
        Self {
            artifacts,
            complete,
        }
    }

    /// Applies one event; returns the artifact as it now stands.
    pub fn push(&mut self, event: &TaskArtifactUpdateEvent) -> Option<&Artifact> {
        let incoming = event.artifact.as_ref()?;
        let id = incoming.artifact_id.clone();
        let pos = self.artifacts.iter().position(|a| a.artifact_id == id);
        let index = match (pos, event.append) {
            (Some(i), true) => {
                let a = &mut self.artifacts[i];
                a.parts.extend(incoming.parts.iter().cloned());
                if a.name.is_empty() {
                    a.name.clone_from(&incoming.name);
                }
                if a.description.is_empty() {
                    a.description.clone_from(&incoming.description);
                }
                if let Some(meta) = &incoming.metadata {
                    let m = a.metadata.get_or_insert_with(Default::default);
                    m.fields
                        .extend(meta.fields.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                for e in &incoming.extensions {
                    if !a.extensions.contains(e) {
                        a.extensions.push(e.clone());
                    }
                }
                i
            }
            (Some(i), false) => {
                self.artifacts[i] = incoming.clone();
                self.complete.remove(&id);
                i
            }
            (None, _) => {
                self.artifacts.push(incoming.clone());
                self.artifacts.len() - 1
            }
        };
        if event.last_chunk {
            self.complete.insert(id);
        }
        self.artifacts.get(index)
    }

    /// The artifacts so far, in the order they first appeared.
    pub fn artifacts(&self) -> &[Artifact] {
        &self.artifacts
    }

    /// Whether the artifact's last chunk arrived (or it came whole in a
    /// task snapshot).
    pub fn is_complete(&self, artifact_id: &str) -> bool {
        self.complete.contains(artifact_id)
    }

    /// The artifacts.
    pub fn into_artifacts(self) -> Vec<Artifact> {
        self.artifacts
    }
}

/// The task (or direct message) a stream of events describes.
///
/// ```
/// use agentwire_client::follow::TaskView;
/// use agentwire_types::{StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};
///
/// let mut view = TaskView::new();
/// view.apply(&StreamResponse::from(Task {
///     id: "t".into(),
///     context_id: "c".into(),
///     status: Some(TaskStatus::new(TaskState::Submitted)),
///     ..Default::default()
/// }));
/// view.apply(&StreamResponse::from(TaskStatusUpdateEvent::new(
///     "t", "c", TaskStatus::new(TaskState::Completed),
/// )));
/// assert_eq!(view.state(), Some(TaskState::Completed));
/// assert!(view.is_final());
/// ```
#[derive(Debug, Clone, Default)]
pub struct TaskView {
    task: Option<Task>,
    message: Option<Message>,
    artifacts: ArtifactAssembler,
}

impl TaskView {
    /// Nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one event.
    pub fn apply(&mut self, event: &StreamResponse) {
        match &event.payload {
            Some(stream_response::Payload::Task(t)) => {
                self.artifacts = ArtifactAssembler::from_artifacts(t.artifacts.clone());
                self.task = Some(t.clone());
            }
            Some(stream_response::Payload::Message(m)) => {
                if let Some(t) = &mut self.task {
                    t.history.push(m.clone());
                } else {
                    self.message = Some(m.clone());
                }
            }
            Some(stream_response::Payload::StatusUpdate(e)) => {
                let t = self.task_entry(&e.task_id, &e.context_id);
                t.status = e.status.clone();
                t.generation = t.generation.max(e.generation);
            }
            Some(stream_response::Payload::ArtifactUpdate(e)) => {
                let t = self.task_entry(&e.task_id, &e.context_id);
                t.generation = t.generation.max(e.generation);
                self.artifacts.push(e);
            }
            None => {}
        }
    }

    fn task_entry(&mut self, task_id: &str, context_id: &str) -> &mut Task {
        self.task.get_or_insert_with(|| Task {
            id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            status: Some(TaskStatus {
                state: TaskState::Submitted as i32,
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// The task with its assembled artifacts, once any task event arrived.
    pub fn task(&self) -> Option<Task> {
        let mut t = self.task.clone()?;
        t.artifacts = self.artifacts.artifacts().to_vec();
        Some(t)
    }

    /// The direct message, when the agent answered with one instead of a
    /// task.
    pub fn message(&self) -> Option<&Message> {
        self.message.as_ref()
    }

    /// The artifacts so far.
    pub fn artifacts(&self) -> &ArtifactAssembler {
        &self.artifacts
    }

    /// The task's state, once known.
    pub fn state(&self) -> Option<TaskState> {
        self.task.as_ref().map(Task::state)
    }

    /// Whether the interaction is over for now: a direct message, or a task
    /// in a terminal or interrupted state.
    ///
    /// This is the state of the task as the events so far describe it.
    /// Right after the `Task` snapshot that opens the stream of a message
    /// continuing a task, it is still the interrupted state that message
    /// answers: to know whether a stream is over, use [`ends_interaction`]
    /// on each event (or read the stream [`follow`] gives to its end).
    pub fn is_final(&self) -> bool {
        self.message.is_some() || self.state().is_some_and(TaskState::ends_turn)
    }
}

/// The call that opened the stream given to [`follow`]: it decides what
/// the stream's first event, a `Task` snapshot, means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OpenedBy {
    /// `SendStreamingMessage` (the default). The opening `Task` shows the
    /// task as it stood when the message arrived; for a message that
    /// continues a task waiting for input, that is still the interrupted
    /// state the message answers. So the opening `Task` ends the stream
    /// only when it is already terminal; otherwise the stream ends at a
    /// status event in a terminal or interrupted state.
    #[default]
    SendStreamingMessage,
    /// `SubscribeToTask`. The opening `Task` is the task's current state:
    /// when it is terminal or interrupted, that is the end (an interrupted
    /// task waits for its caller; nothing follows until it answers).
    SubscribeToTask,
}

/// How [`follow`] reconnects.
///
/// ```
/// use std::sync::Arc;
/// use agentwire_client::follow::{FollowOptions, Reconnected};
///
/// let opts = FollowOptions {
///     // Tell the user when a reconnection could not pick up where the
///     // stream was cut.
///     on_reconnect: Some(Arc::new(|r: &Reconnected| {
///         if let Reconnected::Snapshot { .. } = r {
///             eprintln!("reconnected; the events missed meanwhile are summed up in a snapshot");
///         }
///     })),
///     ..Default::default()
/// };
/// assert!(opts.resume);
/// ```
#[derive(Clone)]
pub struct FollowOptions {
    /// Reconnections in a row without receiving an event before giving up.
    pub max_reconnects: u32,
    /// Wait before the first reconnection (doubled each time, at most 8 s).
    pub backoff: Duration,
    /// Options of every call.
    pub call: CallOptions,
    /// What opened the stream given to [`follow`] (default
    /// `SendStreamingMessage`). Streams `follow` opens itself are
    /// subscriptions.
    pub opened_by: OpenedBy,
    /// Resume a cut stream after the last event received (default on):
    /// reconnect with `SubscribeToTask` and the `Last-Event-ID` service
    /// parameter set to the id of that event
    /// ([`EventStream::last_event_id`]), so that the server sends exactly
    /// the events missed, then the live ones. Off, or when the server gives
    /// no event ids, `follow` reads the task (`GetTask`) and subscribes
    /// again from a snapshot of the task.
    pub resume: bool,
    /// Called at each reconnection, once the new stream's first event
    /// tells how it went (see [`Reconnected`]). Without it, reconnections
    /// are logged (`tracing`, a snapshot at `info` level).
    pub on_reconnect: Option<ReconnectHook>,
    /// Called when the stream was cut, before each reconnection attempt
    /// (see [`Reconnecting`]): what a user waiting on the stream is told
    /// while nothing arrives. Without it, attempts are logged (`tracing`,
    /// `debug` level).
    pub on_reconnecting: Option<ReconnectingHook>,
    /// Ask for the task generation (A2A v1.1 draft) on the calls `follow`
    /// makes itself (`SubscribeToTask`, `GetTask`): they are sent with
    /// `A2A-Version: 1.1` (default off: `1.0`, as before; a server that
    /// serves generations to 1.0 calls too is checked all the same). The
    /// stream given to `follow` is the caller's: open it with the same
    /// version (see [`crate::generation`]).
    ///
    /// Whatever this says, `follow` checks the generations the events
    /// carry (draft 3.2.7): an event more than one generation past the
    /// previous one means events were missed, and the task is read
    /// (`GetTask`) and yielded as a snapshot (a `Task` event, which
    /// [`TaskView::apply`] takes as the new state) instead of building
    /// artifacts from a stream with holes; reported to
    /// [`on_gap`](Self::on_gap). A generation of `0`, or the same
    /// generation twice in a row, means the server does not implement them:
    /// no check for the rest of the interaction.
    pub generations: bool,
    /// Called when a gap in the generations was seen, once it is healed
    /// (see [`GenerationGap`]). Without it, gaps are logged (`tracing`,
    /// `warn` level).
    pub on_gap: Option<GapHook>,
}

/// A function told of each gap in a stream's generations
/// ([`FollowOptions::on_gap`]).
pub type GapHook = Arc<dyn Fn(&GenerationGap) + Send + Sync>;

/// A gap in the generations of a task's events: events between `after`
/// and `got` were not delivered. Given to [`FollowOptions::on_gap`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GenerationGap {
    /// The task.
    pub task_id: String,
    /// The last generation received before the gap.
    pub after: i64,
    /// The generation of the event that showed the gap.
    pub got: i64,
    /// How it was healed: `Some(g)`, the task read with `GetTask` at
    /// generation `g` was yielded in place of the missed events; `None`,
    /// the read failed and the task was subscribed to again (the new
    /// subscription opens with a snapshot of the task).
    pub healed_at: Option<i64>,
}

/// A function told of each reconnection attempt
/// ([`FollowOptions::on_reconnecting`]).
pub type ReconnectingHook = Arc<dyn Fn(&Reconnecting) + Send + Sync>;

/// A reconnection about to be attempted, given to
/// [`FollowOptions::on_reconnecting`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reconnecting {
    /// This attempt (1 for the first after a cut).
    pub attempt: u32,
    /// The attempts allowed before giving up ([`FollowOptions::max_reconnects`]).
    pub max_attempts: u32,
    /// The wait before this attempt.
    pub wait: Duration,
    /// Why the stream is not there: the error of the cut or of the last
    /// attempt, or `None` when the stream closed early.
    pub cause: Option<String>,
}

/// A function told how each reconnection went
/// ([`FollowOptions::on_reconnect`]).
pub type ReconnectHook = Arc<dyn Fn(&Reconnected) + Send + Sync>;

impl Default for FollowOptions {
    fn default() -> Self {
        Self {
            max_reconnects: 5,
            backoff: Duration::from_millis(200),
            call: CallOptions::default(),
            opened_by: OpenedBy::default(),
            resume: true,
            on_reconnect: None,
            on_reconnecting: None,
            generations: false,
            on_gap: None,
        }
    }
}

impl fmt::Debug for FollowOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FollowOptions")
            .field("max_reconnects", &self.max_reconnects)
            .field("backoff", &self.backoff)
            .field("call", &self.call)
            .field("opened_by", &self.opened_by)
            .field("resume", &self.resume)
            .field("on_reconnect", &self.on_reconnect.as_ref().map(|_| "Fn"))
            .field(
                "on_reconnecting",
                &self.on_reconnecting.as_ref().map(|_| "Fn"),
            )
            .field("generations", &self.generations)
            .field("on_gap", &self.on_gap.as_ref().map(|_| "Fn"))
            .finish()
    }
}

/// How a reconnection of [`follow`] went, given to
/// [`FollowOptions::on_reconnect`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reconnected {
    /// The new stream carries on right after the last event received
    /// (`Last-Event-ID`): nothing was missed and nothing comes twice.
    Resumed {
        /// The id of the last event received before the cut.
        last_event_id: String,
    },
    /// The new stream starts over with a snapshot of the task as it is now
    /// (a `Task` event, which replaces what the events so far described):
    /// the events missed meanwhile are not sent one by one, because the
    /// server no longer held them (too old, a restarted server, another
    /// replica) or gave no event ids, or because resuming is off. Also
    /// reported when the task ended meanwhile and its final state was read
    /// with `GetTask` instead.
    Snapshot {
        /// The id the resumption was tried with, if any.
        last_event_id: Option<String>,
    },
}

/// Whether `event` ends the interaction for now, given the call that
/// opened its stream and whether it is the stream's first event (spec
/// 3.1.2, 3.1.6).
///
/// - A `Message` as the first event is the whole answer (a message-only
///   stream).
/// - A `Task` as the first event is a snapshot: it ends the stream when it
///   is terminal, and, for a subscription (the current state), when it is
///   interrupted too. The snapshot opening the stream of a message that
///   continues a task shows the state before that message (typically the
///   input-required state it answers): never the end.
/// - Afterwards, a status update (or a later `Task`) in a terminal or
///   interrupted state ends it.
///
/// ```
/// use agentwire_client::follow::{OpenedBy, ends_interaction};
/// use agentwire_types::{StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};
///
/// let waiting = StreamResponse::from(Task {
///     id: "t".into(),
///     context_id: "c".into(),
///     status: Some(TaskStatus::new(TaskState::InputRequired)),
///     ..Default::default()
/// });
/// // The answer's stream opens with the question's state: not the end.
/// assert!(!ends_interaction(&waiting, true, OpenedBy::SendStreamingMessage));
/// // A subscription to a task waiting for input: nothing more will come.
/// assert!(ends_interaction(&waiting, true, OpenedBy::SubscribeToTask));
/// let done = StreamResponse::from(TaskStatusUpdateEvent::new(
///     "t", "c", TaskStatus::new(TaskState::Completed),
/// ));
/// assert!(ends_interaction(&done, false, OpenedBy::SendStreamingMessage));
/// ```
pub fn ends_interaction(event: &StreamResponse, first: bool, opened_by: OpenedBy) -> bool {
    match &event.payload {
        Some(stream_response::Payload::Message(_)) => first,
        Some(stream_response::Payload::Task(t)) if first => match opened_by {
            OpenedBy::SendStreamingMessage => t.state().is_terminal(),
            OpenedBy::SubscribeToTask => t.state().ends_turn(),
        },
        _ => event.state().is_some_and(TaskState::ends_turn),
    }
}

/// Whether a stream error may be survived by reconnecting: a connection
/// that failed, broke or timed out; never an error the agent answered
/// (those are protocol errors) nor an undecodable stream.
fn reconnectable(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Connect { .. } | ClientError::Transport { .. } | ClientError::Timeout { .. }
    )
}

/// The name of the service parameter that resumes a stream.
const LAST_EVENT_ID: &str = "Last-Event-ID";

struct FollowState<T> {
    transport: T,
    task_id: Option<String>,
    current: Option<EventStream>,
    /// What opened `current`.
    opened_by: OpenedBy,
    /// The next event is the first of `current`.
    first: bool,
    options: FollowOptions,
    failures: u32,
    done: bool,
    last_error: Option<ClientError>,
    /// The id of the last event yielded, when known.
    last_id: Option<String>,
    /// `current` is a reconnection whose first event is still to come.
    reconnection: Option<Reconnection>,
    /// The id of the last event yielded, for the stream `follow` returns.
    out_ids: LastEventId,
    /// The generations seen (draft 3.2.7).
    tracker: GenerationTracker,
    /// An event to yield after the snapshot that healed a gap (when the
    /// task read was older than the event).
    pending: Option<(StreamResponse, Option<String>)>,
}

/// A reconnection waiting for its stream's first event.
enum Reconnection {
    /// Subscribed with `Last-Event-ID`.
    Resuming(String),
    /// Subscribed without: the stream opens with a snapshot.
    Resubscribed,
}

enum Step {
    Yield(Box<ClientResult<StreamResponse>>),
    Continue,
    End,
}

impl Step {
    fn ok(event: StreamResponse) -> Self {
        Step::Yield(Box::new(Ok(event)))
    }

    fn err(e: ClientError) -> Self {
        Step::Yield(Box::new(Err(e)))
    }
}

/// Follows a task to its end, surviving dropped connections.
///
/// `initial` is a stream already open (from `SendStreamingMessage`, or from
/// `SubscribeToTask` with [`FollowOptions::opened_by`] saying so); without
/// it, the task `task_id` is subscribed to. The stream ends after the
/// event that ends the interaction (see [`ends_interaction`]): a status
/// event in a terminal or interrupted state, never the `Task` snapshot
/// opening the stream of a message that continues a task (it shows the
/// state that message answers).
///
/// When the stream is cut before that event (the connection failed, broke
/// or timed out, or the stream closed early; not when the agent answered
/// an error), `follow` reconnects after a backoff
/// ([`FollowOptions::backoff`]):
///
/// - with [`FollowOptions::resume`] (the default) and the id of the last
///   event received ([`EventStream::last_event_id`]), it subscribes
///   (`SubscribeToTask`) with `Last-Event-ID`: the server sends the events
///   missed, then the live ones, so every event is yielded exactly once. A
///   server that no longer holds them opens the stream with a snapshot of
///   the task instead: it is yielded (a `Task` event, which
///   [`TaskView::apply`] takes as the new state) and reported as
///   [`Reconnected::Snapshot`]. A server that refuses the id is
///   subscribed to again without it;
/// - otherwise it reads the task with `GetTask`: if it reached a terminal
///   or interrupted state, that `Task` is yielded as the last event;
///   otherwise the task is subscribed to again (the first event of the new
///   subscription is the current `Task`, so nothing is lost).
///
/// A task that cannot be subscribed to because it already ended yields its
/// `Task` from `GetTask`. After [`FollowOptions::max_reconnects`] failures
/// in a row (reconnections that bring no event) the last error is yielded
/// and the stream ends.
///
/// The stream returned keeps the id of the last event it yielded
/// ([`EventStream::last_event_id`]).
pub fn follow<T>(
    transport: T,
    initial: Option<EventStream>,
    task_id: Option<String>,
    options: FollowOptions,
) -> EventStream
where
    T: Transport + Send + Sync + 'static,
{
    let out_ids = LastEventId::default();
    let state = FollowState {
        transport,
        task_id,
        current: initial,
        opened_by: options.opened_by,
        first: true,
        options,
        failures: 0,
        done: false,
        last_error: None,
        last_id: None,
        reconnection: None,
        out_ids: out_ids.clone(),
        tracker: GenerationTracker::new(),
        pending: None,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            match st.step().await {
                Step::Yield(item) => return Some((*item, st)),
                Step::Continue => continue,
                Step::End => return None,
            }
        }
    });
    EventStream::with_ids(stream, out_ids)
}

impl<T: Transport + Send + Sync> FollowState<T> {
    async fn step(&mut self) -> Step {
        if let Some((event, id)) = self.pending.take() {
            return self.deliver(event, id, false);
        }
        let Some(stream) = self.current.as_mut() else {
            return self.subscribe().await;
        };
        match stream.next().await {
            Some(Ok(event)) => {
                let id = stream.last_event_id();
                self.failures = 0;
                self.last_error = None;
                if self.task_id.is_none() {
                    self.task_id = event.task_id().map(str::to_owned);
                }
                let mut first = std::mem::take(&mut self.first);
                let is_task = matches!(event.payload, Some(stream_response::Payload::Task(_)));
                match self.reconnection.take() {
                    // The events after the last one received: this one
                    // continues the stream that was cut.
                    Some(Reconnection::Resuming(last)) if !is_task => {
                        first = false;
                        self.notify(Reconnected::Resumed {
                            last_event_id: last,
                        });
                    }
                    Some(Reconnection::Resuming(last)) => self.notify(Reconnected::Snapshot {
                        last_event_id: Some(last),
                    }),
                    Some(Reconnection::Resubscribed) => self.notify(Reconnected::Snapshot {
                        last_event_id: None,
                    }),
                    None => {}
                }
                match self.tracker.observe(&event) {
                    Observed::InOrder => {}
                    Observed::Gap { after, got } => return self.heal(event, id, after, got).await,
                    Observed::Stale { after, got } => {
                        // Already held by the snapshot received before.
                        tracing::debug!(after, got, "event already covered by the task snapshot");
                        self.last_id = id;
                        self.out_ids.set(self.last_id.clone());
                        return Step::Continue;
                    }
                    Observed::Untrusted => tracing::info!(
                        "an event with generation 0, or the same generation twice: the agent \
                         does not implement task generations; not checking them in this interaction"
                    ),
                }
                self.deliver(event, id, first)
            }
            Some(Err(e)) if reconnectable(&e) && self.task_id.is_some() => {
                tracing::debug!(error = %e, "stream cut; reconnecting");
                self.current = None;
                self.last_error = Some(e);
                self.reconnect(false).await
            }
            Some(Err(e)) => {
                self.done = true;
                Step::err(e)
            }
            None => {
                self.current = None;
                if self.task_id.is_none() {
                    // A stream that closed before saying anything.
                    return Step::End;
                }
                tracing::debug!("stream closed before a final state; reconnecting");
                // A resumed stream that closed without an event: the
                // server had nothing to replay and nothing more to send.
                let empty_resume = matches!(self.reconnection, Some(Reconnection::Resuming(_)));
                self.reconnect(empty_resume).await
            }
        }
    }

    /// Yields `event` (received with event id `id`).
    fn deliver(&mut self, event: StreamResponse, id: Option<String>, first: bool) -> Step {
        self.last_id = id;
        self.out_ids.set(self.last_id.clone());
        if ends_interaction(&event, first, self.opened_by) {
            self.done = true;
        }
        Step::ok(event)
    }

    /// The call options of the calls `follow` makes itself.
    fn own_call(&self) -> CallOptions {
        crate::generation::versioned(&self.options.call, self.options.generations).into_owned()
    }

    /// Events between generations `after` and `got` were missed: reads the
    /// task and yields it (a snapshot) in their place; `event` follows when
    /// the task read is older than it. When the read fails, subscribes
    /// again (from a snapshot).
    async fn heal(
        &mut self,
        event: StreamResponse,
        id: Option<String>,
        after: i64,
        got: i64,
    ) -> Step {
        let task_id = self
            .task_id
            .clone()
            .or_else(|| event.task_id().map(str::to_owned))
            .unwrap_or_default();
        let req = GetTaskRequest {
            id: task_id.clone(),
            ..Default::default()
        };
        let read = self.transport.get_task(req, &self.own_call()).await;
        let healed_at = read.as_ref().ok().map(|t| t.generation);
        tracing::warn!(
            task_id = %task_id,
            after,
            got,
            healed_at = healed_at.unwrap_or(-1),
            "events were missed (a gap in the task's generations); the task was read again"
        );
        if let Some(hook) = &self.options.on_gap {
            hook(&GenerationGap {
                task_id: task_id.clone(),
                after,
                got,
                healed_at,
            });
        }
        match read {
            Ok(task) => {
                self.tracker.reset_to(&task);
                if task.generation < got {
                    self.pending = Some((event, id.clone()));
                }
                // The snapshot's own event id: the event's, whose place it
                // takes (resuming after it misses nothing the task lacks).
                let id = if self.pending.is_some() {
                    self.last_id.clone()
                } else {
                    id
                };
                self.deliver(StreamResponse::from(task), id, false)
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading the task after a gap failed; subscribing again");
                self.current = None;
                self.last_id = None;
                self.tracker = GenerationTracker::new();
                self.reconnection = Some(Reconnection::Resubscribed);
                Step::Continue
            }
        }
    }

    fn notify(&self, how: Reconnected) {
        match &how {
            Reconnected::Resumed { last_event_id } => {
                tracing::debug!(%last_event_id, "stream resumed after the last event received");
            }
            Reconnected::Snapshot { last_event_id } => tracing::info!(
                last_event_id = last_event_id.as_deref().unwrap_or("none"),
                "reconnected; the events missed meanwhile are replaced by a snapshot of the task"
            ),
        }
        if let Some(hook) = &self.options.on_reconnect {
            hook(&how);
        }
    }

    /// After a cut: waits (backoff), then lets the next step resubscribe
    /// with the last event id, or reads the task when there is none or
    /// when a resumed stream closed without an event (`empty_resume`).
    async fn reconnect(&mut self, empty_resume: bool) -> Step {
        self.reconnection = None;
        self.failures += 1;
        if self.failures > self.options.max_reconnects {
            self.done = true;
            let tries = self.options.max_reconnects;
            let gave_up = format!(
                "the event stream was cut and {tries} reconnection{} failed",
                if tries == 1 { "" } else { "s" }
            );
            let e = match self.last_error.take() {
                Some(ClientError::Connect {
                    url,
                    message,
                    source,
                }) => ClientError::Connect {
                    url,
                    message: format!("{gave_up}; the last one: {message}"),
                    source,
                },
                Some(ClientError::Transport { message, source }) => ClientError::Transport {
                    message: format!("{gave_up}; the last one: {message}"),
                    source,
                },
                Some(other) => other,
                None => ClientError::Transport {
                    message: "the event stream kept closing before the task reached a final state"
                        .into(),
                    source: None,
                },
            };
            return Step::err(e);
        }
        let shift = self.failures.saturating_sub(1).min(6);
        let wait = (self.options.backoff * (1u32 << shift)).min(Duration::from_secs(8));
        let attempt = Reconnecting {
            attempt: self.failures,
            max_attempts: self.options.max_reconnects,
            wait,
            cause: self.last_error.as_ref().map(ToString::to_string),
        };
        tracing::debug!(
            attempt = attempt.attempt,
            wait_ms = wait.as_millis() as u64,
            "reconnecting"
        );
        if let Some(hook) = &self.options.on_reconnecting {
            hook(&attempt);
        }
        tokio::time::sleep(wait).await;
        if self.options.resume && self.last_id.is_some() && !empty_resume {
            return Step::Continue;
        }
        self.reconcile().await
    }

    /// Reads the task; yields it when final, otherwise lets the next step
    /// resubscribe.
    async fn reconcile(&mut self) -> Step {
        let Some(id) = self.task_id.clone() else {
            return Step::End;
        };
        let req = GetTaskRequest {
            id,
            ..Default::default()
        };
        match self.transport.get_task(req, &self.own_call()).await {
            Ok(task) if task.state().ends_turn() => {
                self.done = true;
                let last_event_id = self.last_id.take();
                self.notify(Reconnected::Snapshot { last_event_id });
                self.out_ids.set(None);
                Step::ok(StreamResponse::from(task))
            }
            Ok(_) => {
                // The subscription that follows starts from a snapshot.
                self.last_id = None;
                Step::Continue
            }
            Err(e) if reconnectable(&e) => {
                self.last_error = Some(e);
                Step::Continue
            }
            Err(e) => {
                self.done = true;
                Step::err(e)
            }
        }
    }

    async fn subscribe(&mut self) -> Step {
        let Some(id) = self.task_id.clone() else {
            self.done = true;
            return Step::err(ClientError::InvalidRequest(
                "follow: neither a stream nor a task id".into(),
            ));
        };
        let req = SubscribeToTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        let resume_from = self.last_id.clone().filter(|_| self.options.resume);
        let call = match &resume_from {
            Some(last) => self
                .options
                .call
                .merged(&CallOptions::new().with_service_param(LAST_EVENT_ID, last.clone())),
            None => self.options.call.clone(),
        };
        let call = crate::generation::versioned(&call, self.options.generations).into_owned();
        // A subscription follow opens itself (not the caller's first
        // stream) is a reconnection.
        let reconnecting = self.failures > 0 || resume_from.is_some();
        match self.transport.subscribe_to_task(req, &call).await {
            Ok(s) => {
                // A subscription opens with the task's current state (or,
                // resumed, with the events missed).
                self.current = Some(s);
                self.opened_by = OpenedBy::SubscribeToTask;
                self.first = true;
                self.reconnection = match resume_from {
                    Some(last) => Some(Reconnection::Resuming(last)),
                    None if reconnecting => Some(Reconnection::Resubscribed),
                    None => None,
                };
                Step::Continue
            }
            // The server does not know the id (not one of its own): start
            // again from a snapshot.
            Err(e) if resume_from.is_some() && e.kind() == Some(ErrorKind::InvalidParams) => {
                tracing::info!(error = %e, "the agent refused the last event id; subscribing without it");
                self.last_id = None;
                Step::Continue
            }
            // Subscribing to a task that already ended is refused (spec
            // 3.1.6): its final state is read instead.
            Err(e) if e.kind() == Some(ErrorKind::UnsupportedOperation) => {
                let req = GetTaskRequest {
                    id,
                    ..Default::default()
                };
                self.done = true;
                match self.transport.get_task(req, &self.own_call()).await {
                    Ok(task) if task.state().ends_turn() => {
                        if reconnecting {
                            self.notify(Reconnected::Snapshot {
                                last_event_id: resume_from,
                            });
                        }
                        self.out_ids.set(None);
                        Step::ok(StreamResponse::from(task))
                    }
                    Ok(_) | Err(_) => Step::err(e),
                }
            }
            Err(e) if reconnectable(&e) => {
                self.last_error = Some(e);
                self.reconnect(false).await
            }
            Err(e) => {
                self.done = true;
                Step::err(e)
            }
        }
    }
}

/// How [`wait_for_task`] polls.
#[derive(Debug, Clone)]
pub struct PollOptions {
    /// Time between two polls at first (default 2 s).
    pub interval: Duration,
    /// The interval grows by half after each poll up to this bound
    /// (default: 4 times `interval`, at least `interval`).
    pub max_interval: Option<Duration>,
    /// Give up after this long ([`ClientError::WaitTimeout`]).
    pub timeout: Option<Duration>,
    /// `historyLength` of each `GetTask`.
    pub history_length: Option<i32>,
}

impl Default for PollOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(2),
            max_interval: None,
            timeout: None,
            history_length: None,
        }
    }
}

/// Polls `GetTask` until the task is terminal or interrupted
/// (`TASK_STATE_UNSPECIFIED` is neither: polling goes on), calling
/// `on_poll` with every task read. Never busy-loops: the wait between polls
/// is at least `interval` (at least 10 ms) and grows by half up to
/// `max_interval`.
///
/// ```no_run
/// # async fn demo(client: agentwire_client::Client) -> Result<(), agentwire_client::ClientError> {
/// use std::time::Duration;
/// use agentwire_client::CallOptions;
/// use agentwire_client::follow::{PollOptions, wait_for_task};
/// let opts = PollOptions {
///     interval: Duration::from_millis(500),
///     timeout: Some(Duration::from_secs(60)),
///     ..Default::default()
/// };
/// let task = wait_for_task(&client, "task-1", &opts, &CallOptions::new(), |t| {
///     eprintln!("{:?}", t.state());
/// })
/// .await?;
/// # Ok(()) }
/// ```
pub async fn wait_for_task<T, F>(
    transport: &T,
    task_id: &str,
    poll: &PollOptions,
    call: &CallOptions,
    mut on_poll: F,
) -> ClientResult<Task>
where
    T: Transport + ?Sized,
    F: FnMut(&Task),
{
    let started = Instant::now();
    let deadline = poll.timeout.map(|t| started + t);
    let floor = poll.interval.max(Duration::from_millis(10));
    let ceiling = poll.max_interval.unwrap_or(floor * 4).max(floor);
    let mut interval = floor;
    let mut last_state = TaskState::Unspecified;
    loop {
        let req = GetTaskRequest {
            id: task_id.to_owned(),
            history_length: poll.history_length,
            ..Default::default()
        };
        let get = transport.get_task(req, call);
        let task = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, get).await {
                    Ok(r) => r?,
                    Err(_) => return Err(wait_timeout(task_id, started, last_state)),
                }
            }
            None => get.await?,
        };
        last_state = task.state();
        on_poll(&task);
        if last_state.ends_turn() {
            return Ok(task);
        }
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(wait_timeout(task_id, started, last_state));
            }
            tokio::time::sleep(interval.min(left)).await;
            if Instant::now() >= d {
                return Err(wait_timeout(task_id, started, last_state));
            }
        } else {
            tokio::time::sleep(interval).await;
        }
        interval = (interval + interval / 2).min(ceiling);
    }
}

fn wait_timeout(task_id: &str, started: Instant, last: TaskState) -> ClientError {
    ClientError::WaitTimeout {
        task_id: task_id.to_owned(),
        waited: started.elapsed(),
        last_state: last.short_name().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use agentwire_types::{
        AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
        GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest,
        ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
        ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse,
        TaskPushNotificationConfig, TaskStatusUpdateEvent,
    };

    fn task(state: TaskState) -> Task {
        Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: Some(TaskStatus::new(state)),
            ..Default::default()
        }
    }

    /// A transport whose subscriptions and GetTask answers are scripted.
    #[derive(Default)]
    pub(super) struct Scripted {
        pub(super) subscriptions: Mutex<Vec<Vec<ClientResult<StreamResponse>>>>,
        pub(super) states: Mutex<Vec<TaskState>>,
        pub(super) gets: AtomicUsize,
        pub(super) subscribes: AtomicUsize,
        /// When not empty: the subscriptions' events have ids `L-<n>`
        /// from these positions (one per subscription).
        pub(super) id_from: Mutex<Vec<u64>>,
        /// The `Last-Event-ID` of each subscription.
        pub(super) last_ids: Mutex<Vec<Option<String>>>,
        /// Subscriptions with a `Last-Event-ID` are refused.
        pub(super) refuse_ids: std::sync::atomic::AtomicBool,
        /// When set: `GetTask` answers this task (the gap tests).
        pub(super) read: Mutex<Option<Task>>,
    }

    /// A stream whose events have the ids `L-<from>`, `L-<from + 1>`...
    fn numbered(items: Vec<ClientResult<StreamResponse>>, from: u64) -> EventStream {
        let ids = LastEventId::default();
        let seen = ids.clone();
        let mut n = from;
        let events = futures::stream::iter(items).inspect(move |item| {
            if item.is_ok() {
                seen.set(Some(format!("L-{n}")));
                n += 1;
            }
        });
        EventStream::with_ids(events, ids)
    }

    /// Options recording the reconnections reported.
    fn recorded() -> (FollowOptions, Arc<Mutex<Vec<Reconnected>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hook = Arc::clone(&seen);
        let opts = FollowOptions {
            on_reconnect: Some(Arc::new(move |r: &Reconnected| {
                hook.lock().unwrap().push(r.clone());
            })),
            ..fast()
        };
        (opts, seen)
    }

    fn unsupported() -> ClientError {
        ClientError::InvalidRequest("not scripted".into())
    }

    #[async_trait::async_trait]
    impl Transport for Scripted {
        async fn send_message(
            &self,
            _: SendMessageRequest,
            _: &CallOptions,
        ) -> ClientResult<SendMessageResponse> {
            Err(unsupported())
        }
        async fn send_streaming_message(
            &self,
            _: SendMessageRequest,
            _: &CallOptions,
        ) -> ClientResult<EventStream> {
            Err(unsupported())
        }
        async fn get_task(&self, _: GetTaskRequest, _: &CallOptions) -> ClientResult<Task> {
            self.gets.fetch_add(1, Ordering::SeqCst);
            if let Some(t) = self.read.lock().unwrap().clone() {
                return Ok(t);
            }
            let mut states = self.states.lock().unwrap();
            let s = if states.len() > 1 {
                states.remove(0)
            } else {
                states[0]
            };
            Ok(task(s))
        }
        async fn list_tasks(
            &self,
            _: ListTasksRequest,
            _: &CallOptions,
        ) -> ClientResult<ListTasksResponse> {
            Err(unsupported())
        }
        async fn cancel_task(&self, _: CancelTaskRequest, _: &CallOptions) -> ClientResult<Task> {
            Err(unsupported())
        }
        async fn subscribe_to_task(
            &self,
            _: SubscribeToTaskRequest,
            options: &CallOptions,
        ) -> ClientResult<EventStream> {
            self.subscribes.fetch_add(1, Ordering::SeqCst);
            let last = options
                .service_params
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("last-event-id"))
                .map(|(_, v)| v.clone());
            let refuse = last.is_some() && self.refuse_ids.load(Ordering::SeqCst);
            self.last_ids.lock().unwrap().push(last);
            if refuse {
                return Err(ClientError::from(
                    agentwire_types::A2aError::invalid_params("Last-Event-ID", "unknown"),
                ));
            }
            let mut subs = self.subscriptions.lock().unwrap();
            if subs.is_empty() {
                return Err(ClientError::from(agentwire_types::A2aError::unsupported(
                    "task is terminal",
                )));
            }
            let items = subs.remove(0);
            let from = {
                let mut from = self.id_from.lock().unwrap();
                (!from.is_empty()).then(|| from.remove(0))
            };
            Ok(match from {
                Some(from) => numbered(items, from),
                None => EventStream::new(futures::stream::iter(items)),
            })
        }
        async fn create_task_push_notification_config(
            &self,
            _: TaskPushNotificationConfig,
            _: &CallOptions,
        ) -> ClientResult<TaskPushNotificationConfig> {
            Err(unsupported())
        }
        async fn get_task_push_notification_config(
            &self,
            _: GetTaskPushNotificationConfigRequest,
            _: &CallOptions,
        ) -> ClientResult<TaskPushNotificationConfig> {
            Err(unsupported())
        }
        async fn list_task_push_notification_configs(
            &self,
            _: ListTaskPushNotificationConfigsRequest,
            _: &CallOptions,
        ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
            Err(unsupported())
        }
        async fn delete_task_push_notification_config(
            &self,
            _: DeleteTaskPushNotificationConfigRequest,
            _: &CallOptions,
        ) -> ClientResult<()> {
            Err(unsupported())
        }
        async fn get_extended_agent_card(
            &self,
            _: GetExtendedAgentCardRequest,
            _: &CallOptions,
        ) -> ClientResult<AgentCard> {
            Err(unsupported())
        }
    }

    fn status(state: TaskState) -> ClientResult<StreamResponse> {
        Ok(StreamResponse::from(TaskStatusUpdateEvent::new(
            "t1",
            "c1",
            TaskStatus::new(state),
        )))
    }

    fn reset() -> ClientResult<StreamResponse> {
        Err(ClientError::Transport {
            message: "connection reset".into(),
            source: None,
        })
    }

    fn fast() -> FollowOptions {
        FollowOptions {
            backoff: Duration::from_millis(1),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn resubscribes_after_a_drop_and_sees_the_final_state() {
        let t = std::sync::Arc::new(Scripted::default());
        *t.subscriptions.lock().unwrap() = vec![
            vec![Ok(task(TaskState::Working).into()), reset()],
            vec![
                Ok(task(TaskState::Working).into()),
                status(TaskState::Completed),
            ],
        ];
        *t.states.lock().unwrap() = vec![TaskState::Working];
        let events: Vec<_> = follow(t.clone(), None, Some("t1".into()), fast())
            .collect()
            .await;
        let states: Vec<_> = events
            .iter()
            .map(|e| e.as_ref().unwrap().state().unwrap())
            .collect();
        assert_eq!(
            states,
            [TaskState::Working, TaskState::Working, TaskState::Completed]
        );
        assert_eq!(t.subscribes.load(Ordering::SeqCst), 2);
        assert_eq!(t.gets.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_final_state_reached_while_disconnected_comes_from_get_task() {
        let t = std::sync::Arc::new(Scripted::default());
        // The first stream dies; meanwhile the task completed.
        *t.subscriptions.lock().unwrap() = vec![vec![Ok(task(TaskState::Working).into()), reset()]];
        *t.states.lock().unwrap() = vec![TaskState::Completed];
        let events: Vec<_> = follow(t.clone(), None, Some("t1".into()), fast())
            .collect()
            .await;
        assert_eq!(events.len(), 2);
        let last = events[1].as_ref().unwrap();
        assert!(matches!(
            last.payload,
            Some(stream_response::Payload::Task(_))
        ));
        assert_eq!(last.state(), Some(TaskState::Completed));
    }

    #[tokio::test]
    async fn a_stream_closed_early_is_reconciled_too() {
        let t = std::sync::Arc::new(Scripted::default());
        let initial = EventStream::new(futures::stream::iter(vec![Ok(StreamResponse::from(
            task(TaskState::Working),
        ))]));
        *t.states.lock().unwrap() = vec![TaskState::InputRequired];
        let events: Vec<_> = follow(t.clone(), Some(initial), None, fast())
            .collect()
            .await;
        assert_eq!(
            events.last().unwrap().as_ref().unwrap().state(),
            Some(TaskState::InputRequired)
        );
        assert_eq!(t.subscribes.load(Ordering::SeqCst), 0);
    }

    fn artifact_chunk(text: &str, append: bool, last: bool) -> ClientResult<StreamResponse> {
        let mut e =
            TaskArtifactUpdateEvent::new("t1", "c1", Artifact::text("report", text).with_id("a1"));
        e.append = append;
        e.last_chunk = last;
        Ok(StreamResponse::from(e))
    }

    #[tokio::test]
    async fn a_continued_task_is_followed_past_its_opening_snapshot() {
        // The stream of an answer opens with the task as it was (waiting
        // for input), then the agent works and completes.
        let t = std::sync::Arc::new(Scripted::default());
        let initial = EventStream::new(futures::stream::iter(vec![
            Ok(StreamResponse::from(task(TaskState::InputRequired))),
            status(TaskState::Working),
            artifact_chunk("Hello, ", false, false),
            artifact_chunk("world", true, true),
            status(TaskState::Completed),
        ]));
        let events: Vec<_> = follow(t.clone(), Some(initial), None, fast())
            .collect()
            .await;
        assert_eq!(events.len(), 5);
        let mut view = TaskView::new();
        for e in &events {
            view.apply(e.as_ref().unwrap());
        }
        let done = view.task().unwrap();
        assert_eq!(done.state(), TaskState::Completed);
        assert_eq!(done.artifacts[0].text_content(), "Hello, world");
        assert_eq!(t.gets.load(Ordering::SeqCst), 0);
        assert_eq!(t.subscribes.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn an_interrupted_state_reached_on_the_stream_ends_it() {
        let t = std::sync::Arc::new(Scripted::default());
        let initial = EventStream::new(futures::stream::iter(vec![
            Ok(StreamResponse::from(task(TaskState::InputRequired))),
            status(TaskState::Working),
            status(TaskState::AuthRequired),
            status(TaskState::Working),
        ]));
        let states: Vec<_> = follow(t.clone(), Some(initial), None, fast())
            .map(|e| e.unwrap().state().unwrap())
            .collect()
            .await;
        assert_eq!(
            states,
            [
                TaskState::InputRequired,
                TaskState::Working,
                TaskState::AuthRequired
            ]
        );
    }

    #[tokio::test]
    async fn complete_answers_in_one_object_end_the_stream() {
        let t = std::sync::Arc::new(Scripted::default());
        // A terminal Task first: the whole answer.
        let initial = EventStream::new(futures::stream::iter(vec![
            Ok(StreamResponse::from(task(TaskState::Completed))),
            status(TaskState::Working),
        ]));
        let events: Vec<_> = follow(t.clone(), Some(initial), None, fast())
            .collect()
            .await;
        assert_eq!(events.len(), 1);
        // A message-only stream.
        let initial = EventStream::new(futures::stream::iter(vec![
            Ok(StreamResponse::from(Message::user_text("hi"))),
            status(TaskState::Working),
        ]));
        let events: Vec<_> = follow(t.clone(), Some(initial), None, fast())
            .collect()
            .await;
        assert_eq!(events.len(), 1);
        assert_eq!(t.gets.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_subscription_to_a_waiting_task_ends_at_its_snapshot() {
        // Opened by the caller.
        let t = std::sync::Arc::new(Scripted::default());
        let initial = EventStream::new(futures::stream::iter(vec![
            Ok(StreamResponse::from(task(TaskState::InputRequired))),
            status(TaskState::Working),
        ]));
        let opts = FollowOptions {
            opened_by: OpenedBy::SubscribeToTask,
            ..fast()
        };
        let events: Vec<_> = follow(t.clone(), Some(initial), Some("t1".into()), opts)
            .collect()
            .await;
        assert_eq!(events.len(), 1);
        // Opened by follow itself.
        *t.subscriptions.lock().unwrap() = vec![vec![
            Ok(task(TaskState::InputRequired).into()),
            status(TaskState::Working),
        ]];
        let events: Vec<_> = follow(t.clone(), None, Some("t1".into()), fast())
            .collect()
            .await;
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].as_ref().unwrap().state(),
            Some(TaskState::InputRequired)
        );
        assert_eq!(t.gets.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn gives_up_after_repeated_failures() {
        let t = std::sync::Arc::new(Scripted::default());
        *t.subscriptions.lock().unwrap() = (0..10).map(|_| vec![reset()]).collect();
        *t.states.lock().unwrap() = vec![TaskState::Working];
        let opts = FollowOptions {
            max_reconnects: 3,
            ..fast()
        };
        let events: Vec<_> = follow(t.clone(), None, Some("t1".into()), opts)
            .collect()
            .await;
        assert!(events.last().unwrap().is_err());
        assert_eq!(t.gets.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn terminal_task_subscription_yields_the_task() {
        let t = std::sync::Arc::new(Scripted::default());
        *t.states.lock().unwrap() = vec![TaskState::Completed];
        let events: Vec<_> = follow(t.clone(), None, Some("t1".into()), fast())
            .collect()
            .await;
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].as_ref().unwrap().state(),
            Some(TaskState::Completed)
        );
    }

    #[tokio::test]
    async fn polling_stops_on_interrupt_and_skips_unspecified() {
        let t = Scripted::default();
        *t.states.lock().unwrap() = vec![
            TaskState::Working,
            TaskState::Unspecified,
            TaskState::AuthRequired,
        ];
        let poll = PollOptions {
            interval: Duration::from_millis(10),
            timeout: Some(Duration::from_secs(5)),
            ..Default::default()
        };
        let mut seen = Vec::new();
        let task = wait_for_task(&t, "t1", &poll, &CallOptions::new(), |t| {
            seen.push(t.state())
        })
        .await
        .unwrap();
        assert_eq!(task.state(), TaskState::AuthRequired);
        assert_eq!(
            seen,
            [
                TaskState::Working,
                TaskState::Unspecified,
                TaskState::AuthRequired
            ]
        );
    }

    #[tokio::test]
    async fn polling_times_out() {
        let t = Scripted::default();
        *t.states.lock().unwrap() = vec![TaskState::Working];
        let poll = PollOptions {
            interval: Duration::from_millis(20),
            timeout: Some(Duration::from_millis(120)),
            ..Default::default()
        };
        let started = Instant::now();
        let err = wait_for_task(&t, "t1", &poll, &CallOptions::new(), |_| {})
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::WaitTimeout { .. }), "{err:?}");
        let polls = t.gets.load(Ordering::SeqCst);
        // Backoff: far fewer polls than 120 / 20 + 1 at a fixed pace would
        // allow would mean a sleep bug; more would mean a busy loop.
        assert!((2..=7).contains(&polls), "{polls} polls");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_cut_stream_resumes_after_the_last_event_received() {
        let t = Arc::new(Scripted::default());
        let initial = numbered(
            vec![
                Ok(task(TaskState::Working).into()),
                status(TaskState::Working),
                reset(),
            ],
            1,
        );
        // The server sends what followed L-2.
        *t.subscriptions.lock().unwrap() = vec![vec![
            artifact_chunk("Hello", false, true),
            status(TaskState::Completed),
        ]];
        *t.id_from.lock().unwrap() = vec![3];
        let (opts, seen) = recorded();
        let mut events = follow(t.clone(), Some(initial), None, opts);
        let mut got = Vec::new();
        let mut ids = Vec::new();
        while let Some(e) = events.next().await {
            got.push(e.unwrap());
            ids.push(events.last_event_id().unwrap());
        }
        assert_eq!(got.len(), 4, "each event once: {got:?}");
        assert_eq!(ids, ["L-1", "L-2", "L-3", "L-4"]);
        assert_eq!(got[3].state(), Some(TaskState::Completed));
        assert_eq!(*t.last_ids.lock().unwrap(), [Some("L-2".to_owned())]);
        assert_eq!(t.gets.load(Ordering::SeqCst), 0);
        assert_eq!(
            *seen.lock().unwrap(),
            [Reconnected::Resumed {
                last_event_id: "L-2".into()
            }]
        );
    }

    #[tokio::test]
    async fn a_resumed_stream_cut_again_is_resumed_again() {
        let t = Arc::new(Scripted::default());
        let initial = numbered(vec![Ok(task(TaskState::Working).into()), reset()], 1);
        *t.subscriptions.lock().unwrap() = vec![
            vec![reset()],
            vec![status(TaskState::Working), reset()],
            vec![status(TaskState::Completed)],
        ];
        *t.id_from.lock().unwrap() = vec![2, 2, 3];
        let events: Vec<_> = follow(t.clone(), Some(initial), None, fast())
            .map(|e| e.unwrap().state().unwrap())
            .collect()
            .await;
        assert_eq!(
            events,
            [TaskState::Working, TaskState::Working, TaskState::Completed]
        );
        assert_eq!(
            *t.last_ids.lock().unwrap(),
            [
                Some("L-1".to_owned()),
                Some("L-1".to_owned()),
                Some("L-2".to_owned())
            ]
        );
        assert_eq!(t.gets.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_resumed_stream_closed_without_events_reads_the_task() {
        let t = Arc::new(Scripted::default());
        let initial = numbered(vec![Ok(task(TaskState::Working).into()), reset()], 1);
        *t.subscriptions.lock().unwrap() = vec![vec![]];
        *t.id_from.lock().unwrap() = vec![2];
        *t.states.lock().unwrap() = vec![TaskState::Completed];
        let events: Vec<_> = follow(t.clone(), Some(initial), None, fast())
            .map(|e| e.unwrap().state().unwrap())
            .collect()
            .await;
        assert_eq!(events, [TaskState::Working, TaskState::Completed]);
        assert_eq!(t.gets.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_resumption_answered_with_a_snapshot_says_so_and_goes_on() {
        let t = Arc::new(Scripted::default());
        let initial = numbered(vec![Ok(task(TaskState::Working).into()), reset()], 1);
        *t.subscriptions.lock().unwrap() = vec![vec![
            Ok(task(TaskState::Working).into()),
            status(TaskState::Completed),
        ]];
        *t.id_from.lock().unwrap() = vec![40];
        let (opts, seen) = recorded();
        let events: Vec<_> = follow(t.clone(), Some(initial), None, opts)
            .map(|e| e.unwrap().state().unwrap())
            .collect()
            .await;
        assert_eq!(
            events,
            [TaskState::Working, TaskState::Working, TaskState::Completed]
        );
        assert_eq!(
            *seen.lock().unwrap(),
            [Reconnected::Snapshot {
                last_event_id: Some("L-1".into())
            }]
        );
    }

    #[tokio::test]
    async fn a_refused_id_is_dropped_and_the_task_subscribed_to_again() {
        let t = Arc::new(Scripted::default());
        t.refuse_ids.store(true, Ordering::SeqCst);
        let initial = numbered(vec![Ok(task(TaskState::Working).into()), reset()], 1);
        *t.subscriptions.lock().unwrap() = vec![vec![
            Ok(task(TaskState::Working).into()),
            status(TaskState::Completed),
        ]];
        let (opts, seen) = recorded();
        let events: Vec<_> = follow(t.clone(), Some(initial), None, opts).collect().await;
        assert_eq!(events.len(), 3);
        assert_eq!(*t.last_ids.lock().unwrap(), [Some("L-1".to_owned()), None]);
        assert_eq!(
            *seen.lock().unwrap(),
            [Reconnected::Snapshot {
                last_event_id: None
            }]
        );
    }

    #[tokio::test]
    async fn without_resume_the_task_is_read_and_subscribed_to_again() {
        let t = Arc::new(Scripted::default());
        let initial = numbered(vec![Ok(task(TaskState::Working).into()), reset()], 1);
        *t.subscriptions.lock().unwrap() = vec![vec![
            Ok(task(TaskState::Working).into()),
            status(TaskState::Completed),
        ]];
        *t.states.lock().unwrap() = vec![TaskState::Working];
        let (opts, seen) = recorded();
        let opts = FollowOptions {
            resume: false,
            ..opts
        };
        let events: Vec<_> = follow(t.clone(), Some(initial), None, opts).collect().await;
        assert_eq!(events.len(), 3);
        assert_eq!(*t.last_ids.lock().unwrap(), [None]);
        assert_eq!(t.gets.load(Ordering::SeqCst), 1);
        assert_eq!(
            *seen.lock().unwrap(),
            [Reconnected::Snapshot {
                last_event_id: None
            }]
        );
    }

    #[tokio::test]
    async fn an_error_the_agent_answers_is_not_survived() {
        let t = Arc::new(Scripted::default());
        let initial = numbered(
            vec![
                Ok(task(TaskState::Working).into()),
                Err(ClientError::from(
                    agentwire_types::A2aError::task_not_found("t1"),
                )),
            ],
            1,
        );
        let events: Vec<_> = follow(t.clone(), Some(initial), None, fast())
            .collect()
            .await;
        assert_eq!(events.len(), 2);
        assert!(events[1].is_err());
        assert_eq!(t.subscribes.load(Ordering::SeqCst), 0);
        assert_eq!(t.gets.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn assembler_replaces_and_appends() {
        let mut asm = ArtifactAssembler::new();
        let ev = |text: &str, append: bool, last: bool| {
            let mut e =
                TaskArtifactUpdateEvent::new("t", "c", Artifact::text("doc", text).with_id("a"));
            e.append = append;
            e.last_chunk = last;
            e
        };
        asm.push(&ev("one ", false, false));
        asm.push(&ev("two", true, false));
        assert_eq!(asm.artifacts()[0].text_content(), "one two");
        assert!(!asm.is_complete("a"));
        asm.push(&ev("fresh", false, true));
        assert_eq!(asm.artifacts()[0].text_content(), "fresh");
        assert!(asm.is_complete("a"));
        // An append for an unknown artifact starts it.
        let mut other = ev("x", true, true);
        other.artifact.as_mut().unwrap().artifact_id = "b".into();
        asm.push(&other);
        assert_eq!(asm.artifacts().len(), 2);
    }
}

#[cfg(test)]
mod gap_tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::Ordering;

    use agentwire_types::{TaskArtifactUpdateEvent, TaskStatusUpdateEvent};

    use super::tests::Scripted;

    fn chunk(text: &str, append: bool, last: bool, g: i64) -> ClientResult<StreamResponse> {
        let mut e =
            TaskArtifactUpdateEvent::new("t1", "c1", Artifact::text("r", text).with_id("a1"));
        e.append = append;
        e.last_chunk = last;
        e.generation = g;
        Ok(StreamResponse::from(e))
    }

    fn status(state: TaskState, g: i64) -> ClientResult<StreamResponse> {
        let mut e = TaskStatusUpdateEvent::new("t1", "c1", TaskStatus::new(state));
        e.generation = g;
        Ok(StreamResponse::from(e))
    }

    fn opening(g: i64) -> ClientResult<StreamResponse> {
        Ok(StreamResponse::from(Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: Some(TaskStatus::new(TaskState::Working)),
            generation: g,
            ..Default::default()
        }))
    }

    async fn run(
        events: Vec<ClientResult<StreamResponse>>,
        read: Option<Task>,
    ) -> (TaskView, Arc<Scripted>, Vec<GenerationGap>) {
        let t = Arc::new(Scripted::default());
        *t.read.lock().unwrap() = read;
        let gaps = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&gaps);
        let opts = FollowOptions {
            on_gap: Some(Arc::new(move |g: &GenerationGap| {
                seen.lock().unwrap().push(g.clone());
            })),
            backoff: Duration::from_millis(1),
            ..Default::default()
        };
        let mut s = follow(
            Arc::clone(&t),
            Some(EventStream::new(futures::stream::iter(events))),
            None,
            opts,
        );
        let mut view = TaskView::new();
        while let Some(e) = s.next().await {
            view.apply(&e.expect("no error"));
        }
        let gaps = gaps.lock().unwrap().clone();
        (view, t, gaps)
    }

    #[tokio::test]
    async fn a_gap_is_healed_from_the_task_read() {
        // Chunk "B" (generation 3) never arrives: assembled from the
        // stream alone, the artifact would read "AC".
        let whole = Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: Some(TaskStatus::new(TaskState::Working)),
            artifacts: vec![Artifact::text("r", "ABC").with_id("a1")],
            generation: 4,
            ..Default::default()
        };
        let (view, t, gaps) = run(
            vec![
                opening(1),
                chunk("A", false, false, 2),
                chunk("C", true, true, 4),
                status(TaskState::Completed, 5),
            ],
            Some(whole),
        )
        .await;
        let task = view.task().expect("a task");
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].text_content(), "ABC");
        assert_eq!(task.state(), TaskState::Completed);
        assert_eq!(t.gets.load(Ordering::SeqCst), 1);
        assert_eq!(
            gaps,
            vec![GenerationGap {
                task_id: "t1".into(),
                after: 2,
                got: 4,
                healed_at: Some(4),
            }]
        );
    }

    #[tokio::test]
    async fn a_task_read_older_than_the_event_is_followed_by_it() {
        let older = Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: Some(TaskStatus::new(TaskState::Working)),
            artifacts: vec![Artifact::text("r", "AB").with_id("a1")],
            generation: 3,
            ..Default::default()
        };
        let (view, _, gaps) = run(
            vec![
                opening(1),
                chunk("A", false, false, 2),
                chunk("C", true, true, 4),
                status(TaskState::Completed, 5),
            ],
            Some(older),
        )
        .await;
        let task = view.task().expect("a task");
        assert_eq!(task.artifacts[0].text_content(), "ABC");
        assert_eq!(gaps.len(), 1);
        assert_eq!(gaps[0].healed_at, Some(3));
    }

    #[tokio::test]
    async fn generation_zero_turns_the_check_off() {
        // A 1.0 server: every generation is 0; the stream is taken as it is.
        let (view, t, gaps) = run(
            vec![
                opening(0),
                chunk("A", false, false, 0),
                chunk("C", true, true, 0),
                status(TaskState::Completed, 0),
            ],
            None,
        )
        .await;
        assert_eq!(view.task().unwrap().artifacts[0].text_content(), "AC");
        assert_eq!(t.gets.load(Ordering::SeqCst), 0);
        assert!(gaps.is_empty());
    }

    #[tokio::test]
    async fn repeated_generations_turn_the_check_off() {
        // Two consecutive events with generation 2, then a jump: not a gap
        // (the draft: the server does not implement generations).
        let (_, t, gaps) = run(
            vec![
                opening(1),
                chunk("A", false, false, 2),
                chunk("B", true, false, 2),
                chunk("C", true, true, 7),
                status(TaskState::Completed, 8),
            ],
            None,
        )
        .await;
        assert_eq!(t.gets.load(Ordering::SeqCst), 0);
        assert!(gaps.is_empty());
    }
}
