//! The progress line shown while a command waits for a task: a spinner on
//! stderr with the task's current state and its latest status message
//! (`a2a send` waiting, `a2a task get --wait`, `a2a task subscribe`, and
//! the blocking turns of `a2a chat`).
//!
//! It is for a person watching a terminal, so it exists only when stderr
//! is a terminal, the output is `text` and `--debug` is off (its log lines
//! would be torn by the redrawn line). Piped, in CI or with `-o json`,
//! nothing of it is written (CLI SPEC 11.1: stdout carries the result, and
//! stdout is never touched here). The line is cleared before the command
//! prints its result.
//!
//! API: [`Progress::start`], then [`Progress::update`] (or the
//! [`Progress::task`] / [`Progress::event`] shorthands) at each point where
//! the waiting loop observes the task, then [`Progress::finish`] (dropping
//! it clears the line too, so early returns leave nothing behind).

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use agentwire_types::{Message, StreamResponse, Task, TaskState, stream_response};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::render;
use crate::{Globals, OutputFormat};

/// How often the spinner turns.
const TICK: Duration = Duration::from_millis(120);

/// A progress line on stderr (or nothing, where it does not belong).
pub struct Progress {
    line: Mutex<Line>,
}

#[derive(Default)]
struct Line {
    /// `None`: nothing is drawn (or no longer).
    bar: Option<ProgressBar>,
    /// What the line says before any state is known.
    waiting_for: String,
    /// The task followed, once known.
    task_id: Option<String>,
}

/// Whether a progress line may be drawn for these options.
pub fn enabled(g: &Globals) -> bool {
    g.output == OutputFormat::Text && !g.debug && std::io::stderr().is_terminal()
}

impl Progress {
    /// Starts the line with what is awaited ("waiting for Echo Agent").
    pub fn start(g: &Globals, waiting_for: impl Into<String>) -> Self {
        let waiting_for = waiting_for.into();
        let bar = enabled(g).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            // The template is a constant: it parses, or the line stays plain.
            if let Ok(style) = ProgressStyle::with_template("{spinner} {wide_msg} {elapsed:>4}") {
                bar.set_style(style);
            }
            bar.set_message(render::sanitize(&waiting_for).replace(['\n', '\r'], " "));
            bar.enable_steady_tick(TICK);
            bar
        });
        Self {
            line: Mutex::new(Line {
                bar,
                waiting_for,
                task_id: None,
            }),
        }
    }

    fn line(&self) -> std::sync::MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the line is drawn.
    pub fn is_visible(&self) -> bool {
        self.line().bar.is_some()
    }

    /// Names the task being followed (shown in the line from now on).
    pub fn set_task(&self, task_id: &str) {
        if task_id.is_empty() {
            return;
        }
        let mut line = self.line();
        if line.task_id.is_none() {
            line.task_id = Some(task_id.to_owned());
        }
    }

    /// The task's current state and its latest status message, if any.
    pub fn update(&self, state: TaskState, message: Option<&str>) {
        let line = self.line();
        if let Some(bar) = &line.bar {
            bar.set_message(compose(&line, state, message));
        }
    }

    /// [`Progress::update`] from a task read by polling.
    pub fn task(&self, task: &Task) {
        self.set_task(&task.id);
        let text = status_text(task.status.as_ref().and_then(|s| s.message.as_deref()));
        self.update(task.state(), text.as_deref());
    }

    /// [`Progress::update`] from a streamed event: a task snapshot or a
    /// status update moves the line; artifact chunks and messages leave it.
    pub fn event(&self, ev: &StreamResponse) {
        match &ev.payload {
            Some(stream_response::Payload::Task(t)) => self.task(t),
            Some(stream_response::Payload::StatusUpdate(s)) => {
                self.set_task(&s.task_id);
                let text = status_text(s.status.as_ref().and_then(|st| st.message.as_deref()));
                self.update(s.state(), text.as_deref());
            }
            _ => {}
        }
    }

    /// Clears the line for good (before the result is printed).
    pub fn finish(&self) {
        if let Some(bar) = self.line().bar.take() {
            bar.finish_and_clear();
        }
    }

    /// Runs `f` with the line out of the way (for a caller that writes to
    /// the terminal while the line is shown).
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        let line = self.line();
        match &line.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The text of a status message, if it has any.
fn status_text(m: Option<&Message>) -> Option<String> {
    let text = m?.text();
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The line: `task 1a2b3c4d WORKING: Checking 25 packages`.
fn compose(line: &Line, state: TaskState, message: Option<&str>) -> String {
    let mut s = match &line.task_id {
        Some(id) => format!("task {} {}", short(id), render::state_label(state)),
        None => format!("{} {}", line.waiting_for, render::state_label(state)),
    };
    if let Some(m) = message {
        s.push_str(": ");
        s.push_str(m);
    }
    // One line, and nothing that could drive the terminal.
    render::sanitize(&s).replace(['\n', '\r', '\t'], " ")
}

/// The short form of an id (its random tail: see [`crate::ledger::short_id`]).
fn short(id: &str) -> &str {
    crate::ledger::short_id(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_task_state_and_message() {
        let mut line = Line {
            waiting_for: "waiting for Lab".into(),
            ..Default::default()
        };
        assert_eq!(
            compose(&line, TaskState::Submitted, None),
            "waiting for Lab SUBMITTED"
        );
        line.task_id = Some("0123456789abcdef".into());
        assert_eq!(
            compose(
                &line,
                TaskState::Working,
                Some("Checking\n25 packages\u{1b}[2J")
            ),
            "task 89abcdef WORKING: Checking 25 packages\u{FFFD}[2J"
        );
    }
}
