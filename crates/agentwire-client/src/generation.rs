//! The task generation of the A2A v1.1 draft (spec draft 3.2.7, "Task
//! Generation Semantics"): long-polling `GetTask`, the optimistic
//! concurrency check of a message, and gap detection in event streams.
//!
//! A server that implements the draft starts every task at generation `1`
//! and adds exactly `1` per state or artifact change, one event per step;
//! both update events carry the generation after them. What a client gets:
//!
//! - **Long-polling** ([`wait_for_change`]): `GetTask` with
//!   `currentGeneration = N` answers once the task is past `N`, or when the
//!   server's wait runs out (with the task as it is); no polling interval.
//! - **Optimistic concurrency**: a message with
//!   `configuration.ifGenerationMatch = N` to an existing task is refused
//!   with `TaskGenerationMismatchError` when the task moved on meanwhile
//!   ([`GenerationMismatch`], from [`ClientError::generation_mismatch`]).
//! - **Gap detection** ([`GenerationTracker`]): an event whose generation
//!   is more than one past the previous one means events were missed;
//!   [`crate::follow::follow`] then reads the task and carries on from that
//!   snapshot instead of assembling artifacts from a stream with holes.
//!
//! # Versions
//!
//! The client asks for these features with `A2A-Version: 1.1`
//! ([`GENERATION_VERSION`]) on the calls that use them, and only on those:
//! a `GetTask` with `currentGeneration`, a message with `ifGenerationMatch`,
//! and the streams of [`crate::follow::FollowOptions::generations`]. Every
//! other call stays `A2A-Version: 1.0`, as before. A server that does not
//! serve 1.1 answers such a call with `VersionNotSupportedError`:
//! [`wait_for_change`] then polls at 1.0 instead.
//!
//! The draft's fallback rule holds throughout: a client that sees a
//! generation of `0`, or two consecutive events of a task with the same
//! generation, concludes that the server does not implement generations and
//! stops using them for the rest of that interaction
//! ([`GenerationTracker::trusted`] turns false for good).

use std::time::{Duration, Instant};

use agentwire_types::{ErrorKind, GetTaskRequest, StreamResponse, Task, stream_response};

use crate::error::{ClientError, ClientResult};
use crate::transport::{CallOptions, Transport};

/// The protocol version a client asks for when it uses generations.
pub const GENERATION_VERSION: &str = "1.1";

/// The name of the version service parameter.
const VERSION_PARAM: &str = "A2A-Version";

/// `options` asking for [`GENERATION_VERSION`] when `uses` is true and the
/// caller did not set `A2A-Version` itself; `options` unchanged otherwise.
pub fn versioned(options: &CallOptions, uses: bool) -> std::borrow::Cow<'_, CallOptions> {
    let set = options
        .service_params
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case(VERSION_PARAM));
    if !uses || set {
        return std::borrow::Cow::Borrowed(options);
    }
    let mut o = options.clone();
    o.service_params
        .push((VERSION_PARAM.to_owned(), GENERATION_VERSION.to_owned()));
    std::borrow::Cow::Owned(o)
}

/// Whether a message request asks for the generation check
/// (`configuration.ifGenerationMatch`): it is then sent with
/// [`GENERATION_VERSION`].
pub fn checks_generation(request: &agentwire_types::SendMessageRequest) -> bool {
    request
        .configuration
        .as_ref()
        .is_some_and(|c| c.if_generation_match.is_some())
}

/// The generation an event carries: a `Task`'s, or an update event's;
/// `None` for a `Message` (which has none).
pub fn event_generation(event: &StreamResponse) -> Option<i64> {
    match event.payload.as_ref()? {
        stream_response::Payload::Task(t) => Some(t.generation),
        stream_response::Payload::StatusUpdate(e) => Some(e.generation),
        stream_response::Payload::ArtifactUpdate(e) => Some(e.generation),
        stream_response::Payload::Message(_) => None,
    }
}

/// A refused `ifGenerationMatch`: the task was not at the generation the
/// message expected (`TaskGenerationMismatchError`: JSON-RPC `-32010`,
/// gRPC `ABORTED`, HTTP `409`).
///
/// `expected` and `current` come from the error's `ErrorInfo` metadata
/// (`expectedGeneration`, `currentGeneration`), when the agent sent them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationMismatch {
    /// The task, when named (`taskId`).
    pub task_id: Option<String>,
    /// The generation the message expected.
    pub expected: Option<i64>,
    /// The task's generation when the message arrived.
    pub current: Option<i64>,
}

impl ClientError {
    /// The generation mismatch, when the agent refused a message's
    /// `ifGenerationMatch` (whatever the binding).
    ///
    /// ```
    /// use agentwire_client::ClientError;
    /// use agentwire_types::{A2aError, ErrorKind};
    /// let e = ClientError::from(
    ///     A2aError::new(ErrorKind::TaskGenerationMismatch, "stale")
    ///         .with_metadata("expectedGeneration", "3")
    ///         .with_metadata("currentGeneration", "5"),
    /// );
    /// let m = e.generation_mismatch().unwrap();
    /// assert_eq!((m.expected, m.current), (Some(3), Some(5)));
    /// ```
    pub fn generation_mismatch(&self) -> Option<GenerationMismatch> {
        let e = self.a2a()?;
        if e.kind != ErrorKind::TaskGenerationMismatch {
            return None;
        }
        let num = |k: &str| e.metadata.get(k).and_then(|v| v.trim().parse::<i64>().ok());
        Some(GenerationMismatch {
            task_id: e.metadata.get("taskId").cloned(),
            expected: num("expectedGeneration"),
            current: num("currentGeneration"),
        })
    }
}

/// What [`GenerationTracker::observe`] concluded about one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// In order (the next generation, or a snapshot), or not told (a
    /// `Message`, or generations no longer trusted).
    InOrder,
    /// Events were missed: the last generation seen was `after`, this
    /// event carries `got` (more than `after + 1`).
    Gap {
        /// The last generation seen.
        after: i64,
        /// This event's generation.
        got: i64,
    },
    /// An update event older than (or as old as a snapshot seen before)
    /// what was seen already: a replayed event the task view already
    /// holds.
    Stale {
        /// The last generation seen.
        after: i64,
        /// This event's generation.
        got: i64,
    },
    /// This event shows that the server does not implement generations
    /// (a `0`, or the same generation twice in a row): from now on the
    /// tracker trusts none ([`GenerationTracker::trusted`] is false).
    Untrusted,
}

/// Tracks the generations of one task's events (draft 3.2.7): detects
/// gaps, and applies the fallback rule (a `0`, or two consecutive events
/// with the same generation: generations are not used again).
///
/// ```
/// use agentwire_client::generation::{GenerationTracker, Observed};
/// use agentwire_types::{StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent};
///
/// let event = |g| {
///     let mut e = TaskStatusUpdateEvent::new("t", "c", TaskStatus::new(TaskState::Working));
///     e.generation = g;
///     StreamResponse::from(e)
/// };
/// let mut tracker = GenerationTracker::new();
/// assert_eq!(tracker.observe(&event(2)), Observed::InOrder);
/// assert_eq!(tracker.observe(&event(3)), Observed::InOrder);
/// assert_eq!(tracker.observe(&event(5)), Observed::Gap { after: 3, got: 5 });
/// ```
#[derive(Debug, Clone)]
pub struct GenerationTracker {
    last: Option<i64>,
    /// The last event seen was a `Task` snapshot (an update with the same
    /// generation is then one it already holds, not a repeat).
    last_was_snapshot: bool,
    trusted: bool,
}

impl Default for GenerationTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl GenerationTracker {
    /// Nothing seen yet; generations trusted until shown otherwise.
    pub fn new() -> Self {
        Self {
            last: None,
            last_was_snapshot: false,
            trusted: true,
        }
    }

    /// Whether generations may still be used in this interaction.
    pub fn trusted(&self) -> bool {
        self.trusted
    }

    /// The last generation seen (`None` before any, or once untrusted).
    pub fn last(&self) -> Option<i64> {
        self.last.filter(|_| self.trusted)
    }

    /// Gives up on generations for this interaction.
    pub fn distrust(&mut self) {
        self.trusted = false;
        self.last = None;
    }

    /// Takes a task read with `GetTask` as the state reached (after a gap).
    pub fn reset_to(&mut self, task: &Task) {
        if !self.trusted {
            return;
        }
        if task.generation <= 0 {
            self.distrust();
            return;
        }
        self.last = Some(
            self.last
                .map_or(task.generation, |l| l.max(task.generation)),
        );
        self.last_was_snapshot = true;
    }

    /// Looks at the next event of the stream.
    pub fn observe(&mut self, event: &StreamResponse) -> Observed {
        if !self.trusted {
            return Observed::InOrder;
        }
        let Some(g) = event_generation(event) else {
            return Observed::InOrder;
        };
        if g <= 0 {
            self.distrust();
            return Observed::Untrusted;
        }
        let snapshot = matches!(event.payload, Some(stream_response::Payload::Task(_)));
        let was_snapshot = std::mem::replace(&mut self.last_was_snapshot, snapshot);
        if snapshot {
            // A snapshot is the state as it is: whatever came before.
            self.last = Some(g);
            return Observed::InOrder;
        }
        match self.last {
            None => {
                self.last = Some(g);
                Observed::InOrder
            }
            Some(l) if g == l + 1 => {
                self.last = Some(g);
                Observed::InOrder
            }
            Some(l) if g > l + 1 => {
                self.last = Some(g);
                Observed::Gap { after: l, got: g }
            }
            // An update at or before the snapshot just received: the
            // snapshot already holds it.
            Some(l) if was_snapshot && g <= l => {
                self.last_was_snapshot = true;
                Observed::Stale { after: l, got: g }
            }
            Some(l) if g == l => {
                self.distrust();
                Observed::Untrusted
            }
            Some(l) => Observed::Stale { after: l, got: g },
        }
    }
}

/// How [`wait_for_change`] waits.
#[derive(Debug, Clone)]
pub struct WaitOptions {
    /// Answer once the task's generation is past this one (or the task is
    /// terminal). `None`: wait for the task to reach a terminal or
    /// interrupted state (the first `GetTask` reads the generation to wait
    /// from).
    pub after: Option<i64>,
    /// Give up after this long ([`ClientError::WaitTimeout`]); `None`:
    /// no bound.
    pub timeout: Option<Duration>,
    /// Bound on each long-poll request: the client asks again when the
    /// server held a request this long without answering (default 60 s,
    /// beyond the server's own wait).
    pub request_timeout: Duration,
    /// Without long-polling (a server without generations): time between
    /// two polls at first (default 1 s), growing by half to 8 times that.
    pub poll_interval: Duration,
    /// `historyLength` of each `GetTask`.
    pub history_length: Option<i32>,
}

impl Default for WaitOptions {
    fn default() -> Self {
        Self {
            after: None,
            timeout: None,
            request_timeout: Duration::from_secs(60),
            poll_interval: Duration::from_secs(1),
            history_length: None,
        }
    }
}

/// How [`wait_for_change`] got its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// Long-polls (`GetTask` with `currentGeneration`).
    LongPoll,
    /// Polls with backoff: the agent does not implement generations (it
    /// refused `A2A-Version: 1.1`, or its task has generation `0`).
    Polling,
}

/// What [`wait_for_change`] calls back with each answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEvent {
    /// A task read (a long-poll answer or a poll).
    Read(WaitMode),
    /// Long-polling is not possible with this agent: polling from now on.
    /// `reason` says why.
    FallingBack {
        /// Why: the agent refused 1.1, or gave generation 0.
        reason: &'static str,
    },
}

/// Waits until a task changes: its generation passes
/// [`WaitOptions::after`] (or it is terminal: it cannot change any more),
/// or, without `after`, it reaches a terminal or interrupted state. Long-polls `GetTask` with `currentGeneration`
/// (asking for `A2A-Version: 1.1`); each answer is given to `on_event`.
/// A long-poll answered without a change (the server's wait ran out) is
/// simply asked again.
///
/// Against an agent without generations (it refuses 1.1, or its task has
/// generation `0`) it polls instead, with backoff from
/// [`WaitOptions::poll_interval`], and says so once with
/// [`WaitEvent::FallingBack`]; then `after` cannot be checked and the wait
/// ends at a terminal or interrupted state.
///
/// Fails with [`ClientError::WaitTimeout`] when [`WaitOptions::timeout`]
/// runs out first.
///
/// ```no_run
/// # async fn demo(client: agentwire_client::Client) -> Result<(), agentwire_client::ClientError> {
/// use std::time::Duration;
/// use agentwire_client::CallOptions;
/// use agentwire_client::generation::{WaitOptions, wait_for_change};
/// let opts = WaitOptions {
///     after: Some(3),
///     timeout: Some(Duration::from_secs(60)),
///     ..Default::default()
/// };
/// let (task, _mode) = wait_for_change(&client, "task-1", &opts, &CallOptions::new(), |_, _| {}).await?;
/// println!("now at generation {}", task.generation);
/// # Ok(()) }
/// ```
pub async fn wait_for_change<T, F>(
    transport: &T,
    task_id: &str,
    opts: &WaitOptions,
    call: &CallOptions,
    mut on_event: F,
) -> ClientResult<(Task, WaitMode)>
where
    T: Transport + ?Sized,
    F: FnMut(WaitEvent, Option<&Task>),
{
    let started = Instant::now();
    let deadline = opts.timeout.map(|t| started + t);
    let mut mode = WaitMode::LongPoll;
    let mut after = opts.after;
    let floor = opts.poll_interval.max(Duration::from_millis(10));
    let ceiling = floor * 8;
    let mut interval = floor;
    let mut last_state = agentwire_types::TaskState::Unspecified;
    // With `after` (and generations): past it, or terminal (no change can
    // come); otherwise: terminal or interrupted.
    let done = |t: &Task, mode: WaitMode| -> bool {
        match (mode, opts.after) {
            (WaitMode::LongPoll, Some(n)) => t.generation > n || t.state().is_terminal(),
            _ => t.state().ends_turn(),
        }
    };
    loop {
        let left = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(timed_out(task_id, started, last_state));
                }
                Some(left)
            }
            None => None,
        };
        let long_poll = mode == WaitMode::LongPoll && after.is_some();
        let req = GetTaskRequest {
            id: task_id.to_owned(),
            history_length: opts.history_length,
            current_generation: after.filter(|_| long_poll),
            ..Default::default()
        };
        let mut per_call = call.clone();
        if long_poll {
            let bound = left.map_or(opts.request_timeout, |l| l.min(opts.request_timeout));
            per_call.timeout = Some(bound);
        }
        let per_call = versioned(&per_call, mode == WaitMode::LongPoll);
        let get = transport.get_task(req, &per_call);
        let answer = match left {
            Some(l) => match tokio::time::timeout(l, get).await {
                Ok(r) => r,
                Err(_) => return Err(timed_out(task_id, started, last_state)),
            },
            None => get.await,
        };
        let task = match answer {
            Ok(t) => t,
            Err(e)
                if mode == WaitMode::LongPoll
                    && e.kind() == Some(ErrorKind::VersionNotSupported) =>
            {
                mode = WaitMode::Polling;
                tracing::info!(error = %e, "the agent does not serve A2A 1.1: polling instead of long-polling");
                on_event(
                    WaitEvent::FallingBack {
                        reason: "the agent does not serve A2A 1.1 (no long-polling)",
                    },
                    None,
                );
                continue;
            }
            // The server's wait outlasted ours: ask again.
            Err(e) if long_poll && e.is_timeout() => continue,
            Err(e) => return Err(e),
        };
        last_state = task.state();
        if mode == WaitMode::LongPoll && task.generation <= 0 {
            mode = WaitMode::Polling;
            tracing::info!("the agent's task has no generation: polling instead of long-polling");
            on_event(
                WaitEvent::FallingBack {
                    reason: "the agent's task carries no generation (A2A 1.0 server)",
                },
                Some(&task),
            );
            if done(&task, mode) {
                return Ok((task, mode));
            }
        } else {
            on_event(WaitEvent::Read(mode), Some(&task));
            if done(&task, mode) {
                return Ok((task, mode));
            }
        }
        match mode {
            WaitMode::LongPoll => {
                // Wait from what was read (never go back before `after`).
                after = Some(after.map_or(task.generation, |a| a.max(task.generation)));
            }
            WaitMode::Polling => {
                let pause = match deadline {
                    Some(d) => interval.min(d.saturating_duration_since(Instant::now())),
                    None => interval,
                };
                tokio::time::sleep(pause).await;
                interval = (interval + interval / 2).min(ceiling);
            }
        }
    }
}

fn timed_out(task_id: &str, started: Instant, last: agentwire_types::TaskState) -> ClientError {
    ClientError::WaitTimeout {
        task_id: task_id.to_owned(),
        waited: started.elapsed(),
        last_state: last.short_name().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{
        Artifact, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
    };

    fn status(g: i64) -> StreamResponse {
        let mut e = TaskStatusUpdateEvent::new("t", "c", TaskStatus::new(TaskState::Working));
        e.generation = g;
        StreamResponse::from(e)
    }

    fn artifact(g: i64) -> StreamResponse {
        let mut e = TaskArtifactUpdateEvent::new("t", "c", Artifact::text("a", "x").with_id("a1"));
        e.generation = g;
        StreamResponse::from(e)
    }

    fn snapshot(g: i64) -> StreamResponse {
        StreamResponse::from(Task {
            id: "t".into(),
            context_id: "c".into(),
            generation: g,
            ..Default::default()
        })
    }

    #[test]
    fn in_order_then_gap() {
        let mut t = GenerationTracker::new();
        assert_eq!(t.observe(&snapshot(1)), Observed::InOrder);
        assert_eq!(t.observe(&status(2)), Observed::InOrder);
        assert_eq!(t.observe(&artifact(3)), Observed::InOrder);
        assert_eq!(t.observe(&artifact(6)), Observed::Gap { after: 3, got: 6 });
        assert_eq!(t.last(), Some(6));
        assert_eq!(t.observe(&status(7)), Observed::InOrder);
    }

    #[test]
    fn zero_means_no_generations_for_good() {
        let mut t = GenerationTracker::new();
        assert_eq!(t.observe(&status(2)), Observed::InOrder);
        assert_eq!(t.observe(&status(0)), Observed::Untrusted);
        assert!(!t.trusted());
        // Even a jump is no longer a gap.
        assert_eq!(t.observe(&status(9)), Observed::InOrder);
        assert_eq!(t.last(), None);
    }

    #[test]
    fn equal_consecutive_generations_mean_no_generations() {
        let mut t = GenerationTracker::new();
        assert_eq!(t.observe(&status(4)), Observed::InOrder);
        assert_eq!(t.observe(&artifact(4)), Observed::Untrusted);
        assert!(!t.trusted());
        assert_eq!(t.observe(&status(8)), Observed::InOrder);
    }

    #[test]
    fn snapshot_resets_and_covers_older_updates() {
        let mut t = GenerationTracker::new();
        assert_eq!(t.observe(&status(2)), Observed::InOrder);
        // A resubscription opens with the task at 5: not a gap.
        assert_eq!(t.observe(&snapshot(5)), Observed::InOrder);
        // An update the snapshot already holds (same generation).
        assert_eq!(t.observe(&status(5)), Observed::Stale { after: 5, got: 5 });
        assert!(t.trusted());
        assert_eq!(t.observe(&status(6)), Observed::InOrder);
        // A task read after a gap moves the tracker on.
        t.reset_to(&Task {
            generation: 9,
            ..Default::default()
        });
        assert_eq!(t.observe(&status(10)), Observed::InOrder);
    }

    #[test]
    fn messages_carry_no_generation() {
        let mut t = GenerationTracker::new();
        let m = StreamResponse::from(agentwire_types::Message::user_text("hi"));
        assert_eq!(t.observe(&m), Observed::InOrder);
        assert!(t.trusted());
        assert_eq!(event_generation(&m), None);
    }

    #[test]
    fn versioned_only_when_used_and_not_set() {
        let o = CallOptions::new();
        assert_eq!(versioned(&o, false).service_params.len(), 0);
        let v = versioned(&o, true);
        assert_eq!(
            v.service_params,
            vec![("A2A-Version".to_owned(), "1.1".to_owned())]
        );
        let own = CallOptions::new().with_service_param("a2a-version", "1.2");
        assert_eq!(versioned(&own, true).service_params.len(), 1);
        assert_eq!(versioned(&own, true).service_params[0].1, "1.2");
    }

    #[test]
    fn mismatch_read_from_metadata() {
        use agentwire_types::A2aError;
        let e = ClientError::from(
            A2aError::new(ErrorKind::TaskGenerationMismatch, "stale")
                .with_metadata("taskId", "t-1")
                .with_metadata("expectedGeneration", "3")
                .with_metadata("currentGeneration", "5"),
        );
        let m = e.generation_mismatch().expect("a mismatch");
        assert_eq!(m.task_id.as_deref(), Some("t-1"));
        assert_eq!((m.expected, m.current), (Some(3), Some(5)));
        let other = ClientError::from(A2aError::task_not_found("t"));
        assert_eq!(other.generation_mismatch(), None);
    }
}
