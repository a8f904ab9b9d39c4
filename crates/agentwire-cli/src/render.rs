//! Output: the `text` form for people (CLI SPEC 11.2: one `Label: value`
//! field per line, stable labels, no control sequences, blocks closed by a
//! blank line) and the `json` form (the protocol's own objects, Appendix B).

use std::io::Write;

use agentwire_types::{
    AgentCard, Artifact, Message, Part, Role, StreamResponse, Task, TaskPushNotificationConfig,
    TaskState, part, stream_response,
};
use serde::Serialize;

use crate::error::CliError;

/// Replaces control characters (escape sequences included) except newline
/// and tab, so agent-supplied text cannot drive the terminal.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c == '\n' || c == '\t' || !c.is_control() {
                c
            } else {
                '\u{FFFD}'
            }
        })
        .collect()
}

/// One line: newlines become spaces.
fn one_line(s: &str) -> String {
    sanitize(s).replace(['\n', '\r'], " ")
}

/// The state as people read it: `COMPLETED`, `INPUT_REQUIRED`, ... and
/// `UNSPECIFIED` as received.
pub fn state_label(state: TaskState) -> &'static str {
    state
        .as_str_name()
        .strip_prefix("TASK_STATE_")
        .unwrap_or("UNSPECIFIED")
}

/// Text output being built.
#[derive(Debug, Default)]
pub struct Text {
    out: String,
}

impl Text {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn field(&mut self, label: &str, value: impl AsRef<str>) -> &mut Self {
        self.out.push_str(label);
        self.out.push_str(": ");
        self.out.push_str(&one_line(value.as_ref()));
        self.out.push('\n');
        self
    }

    pub fn block(&mut self, label: &str, content: &str) -> &mut Self {
        self.out.push_str(label);
        self.out.push_str(":\n");
        let c = sanitize(content);
        self.out.push_str(c.trim_end_matches('\n'));
        self.out.push_str("\n\n");
        self
    }

    pub fn blank(&mut self) -> &mut Self {
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
        self
    }

    pub fn as_str(&self) -> &str {
        &self.out
    }

    pub fn print(&self) {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(self.out.as_bytes());
        let _ = o.flush();
    }
}

/// Prints one JSON document (or one JSONL line): always a single line.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<(), CliError> {
    let line = serde_json::to_string(value)
        .map_err(|e| CliError::internal(format!("cannot encode the output: {e}")))?;
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
    Ok(())
}

fn role_label(role: i32) -> &'static str {
    match Role::try_from(role) {
        Ok(Role::User) => "user",
        Ok(Role::Agent) => "agent",
        _ => "unspecified",
    }
}

fn human_size(n: usize) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else if n < 1024 * 1024 {
        format!("{n} bytes ({:.1} KiB)", n as f64 / 1024.0)
    } else {
        format!("{n} bytes ({:.1} MiB)", n as f64 / (1024.0 * 1024.0))
    }
}

/// Renders the parts of a message or artifact; never drops one.
pub fn parts(t: &mut Text, parts: &[Part], verbose: bool) {
    render_parts(t, parts, verbose, false);
}

/// Whether a part is plain text that may be joined with its neighbours
/// (the chunks of a streamed artifact).
fn joinable(p: &Part) -> bool {
    p.as_text().is_some() && p.metadata.is_none()
}

fn render_parts(t: &mut Text, parts: &[Part], verbose: bool, join_text: bool) {
    let mut i = 0;
    while i < parts.len() {
        if join_text && joinable(&parts[i]) {
            let mut j = i;
            let mut text = String::new();
            while j < parts.len()
                && joinable(&parts[j])
                && parts[j].media_type == parts[i].media_type
            {
                text.push_str(parts[j].as_text().unwrap_or_default());
                j += 1;
            }
            if j > i + 1 {
                if verbose && !parts[i].media_type.is_empty() {
                    t.field("Media Type", &parts[i].media_type);
                }
                t.block("Text", &text);
                i = j;
                continue;
            }
        }
        render_part(t, &parts[i], verbose);
        i += 1;
    }
}

fn render_part(t: &mut Text, p: &Part, verbose: bool) {
    {
        match &p.content {
            Some(part::Content::Text(s)) => {
                if verbose && !p.media_type.is_empty() {
                    t.field("Media Type", &p.media_type);
                }
                t.block("Text", s);
            }
            Some(part::Content::Data(_)) => {
                let v = p.as_data().unwrap_or(serde_json::Value::Null);
                let pretty = serde_json::to_string_pretty(&v).unwrap_or_default();
                t.block("Data", &pretty);
            }
            Some(part::Content::Raw(bytes)) => {
                t.field(
                    "File",
                    if p.filename.is_empty() {
                        "(unnamed)"
                    } else {
                        &p.filename
                    },
                );
                t.field(
                    "Media Type",
                    if p.media_type.is_empty() {
                        "(unspecified)"
                    } else {
                        &p.media_type
                    },
                );
                t.field("Size", human_size(bytes.len()));
                t.blank();
            }
            Some(part::Content::Url(u)) => {
                t.field(
                    "File",
                    if p.filename.is_empty() {
                        "(unnamed)"
                    } else {
                        &p.filename
                    },
                );
                t.field("URL", u);
                if !p.media_type.is_empty() {
                    t.field("Media Type", &p.media_type);
                }
                t.blank();
            }
            None => {
                t.field("Part", "(empty)");
            }
        }
        if verbose && let Some(m) = &p.metadata {
            let v = serde_json::Value::Object(agentwire_types::json::from_struct(m));
            t.block(
                "Part Metadata",
                &serde_json::to_string_pretty(&v).unwrap_or_default(),
            );
        }
    }
}

pub fn artifact(t: &mut Text, a: &Artifact, verbose: bool) {
    t.field(
        "Artifact",
        if a.name.is_empty() {
            "(unnamed)"
        } else {
            &a.name
        },
    );
    t.field("Artifact ID", &a.artifact_id);
    if !a.description.is_empty() {
        t.field("Description", &a.description);
    }
    render_parts(t, &a.parts, verbose, true);
}

pub fn message(t: &mut Text, m: &Message, verbose: bool) {
    t.field("Message ID", &m.message_id);
    t.field("Role", role_label(m.role));
    if !m.context_id.is_empty() {
        t.field("Context ID", &m.context_id);
    }
    if !m.task_id.is_empty() {
        t.field("Task ID", &m.task_id);
    }
    if verbose && !m.reference_task_ids.is_empty() {
        t.field("Reference Task IDs", m.reference_task_ids.join(", "));
    }
    parts(t, &m.parts, verbose);
}

/// The identifying fields of a task: id, context, state.
pub fn task_head(t: &mut Text, task: &Task) {
    t.field("Task ID", &task.id);
    t.field("Context ID", &task.context_id);
    t.field("State", state_label(task.state()));
}

pub fn task(t: &mut Text, task: &Task, verbose: bool) {
    task_head(t, task);
    if let Some(ts) = task.status_timestamp() {
        t.field("Updated", ts.to_string());
    }
    if let Some(m) = task.status.as_ref().and_then(|s| s.message.as_deref()) {
        let text = m.text();
        if !text.is_empty() && !text.contains('\n') {
            t.field("Status Message", &text);
        } else if !text.is_empty() {
            t.block("Status Message", &text);
        }
        if verbose || m.parts.iter().any(|p| p.as_text().is_none()) {
            t.blank();
            message(t, m, verbose);
        }
    }
    t.field("Artifacts", task.artifacts.len().to_string());
    if !task.history.is_empty() {
        t.field("History", format!("{} messages", task.history.len()));
    }
    for a in &task.artifacts {
        t.blank();
        artifact(t, a, verbose);
    }
    if verbose {
        for (i, m) in task.history.iter().enumerate() {
            t.blank();
            t.field("History Entry", (i + 1).to_string());
            message(t, m, verbose);
        }
    }
}

/// The line naming a paused or unsuccessful outcome (stderr) and the
/// command that resumes it.
pub fn outcome_notes(task: &Task, reference: &str) -> (Option<String>, Option<String>) {
    let state = task.state();
    let warn = match state {
        TaskState::InputRequired => Some(format!(
            "task {} is waiting for input (INPUT_REQUIRED)",
            task.id
        )),
        TaskState::AuthRequired => Some(match auth_request(task) {
            Some(r) => format!(
                "task {} is waiting for authorization (AUTH_REQUIRED): {}",
                task.id,
                describe_auth_request(&r)
            ),
            None => format!(
                "task {} is waiting for authorization (AUTH_REQUIRED)",
                task.id
            ),
        }),
        TaskState::Failed | TaskState::Rejected | TaskState::Canceled => {
            Some(format!("task {} ended {}", task.id, state_label(state)))
        }
        _ => None,
    };
    let next = match state {
        TaskState::AuthRequired if auth_request(task).is_some() => Some(format!(
            "a2a send -a {} --task-id {} \"<credential>\"",
            shell_quote(reference),
            task.id
        )),
        TaskState::InputRequired | TaskState::AuthRequired => Some(format!(
            "a2a send -a {} --task-id {} \"<reply>\"",
            shell_quote(reference),
            task.id
        )),
        TaskState::Submitted | TaskState::Working | TaskState::Unspecified => Some(format!(
            "a2a task get -a {} --wait {}",
            shell_quote(reference),
            task.id
        )),
        _ => None,
    };
    (warn, next)
}

/// What an auth-required task asks for, when its status message says it
/// as data (an agent using the in-task authorization extension).
pub fn auth_request(task: &Task) -> Option<agentwire_server::AuthRequest> {
    let m = task.status.as_ref()?.message.as_deref()?;
    agentwire_server::AuthRequest::from_message(m)
}

/// "a bearer token for URL (scopes: a b)".
pub fn describe_auth_request(r: &agentwire_server::AuthRequest) -> String {
    let mut s = match r.scheme.as_str() {
        "bearer" => "a bearer token".to_owned(),
        "apiKey" => "an API key".to_owned(),
        "" => "a credential".to_owned(),
        other => format!("a {other} credential"),
    };
    if let Some(res) = &r.resource {
        s.push_str(&format!(" for {res}"));
    }
    if !r.scopes.is_empty() {
        s.push_str(&format!(" (scopes: {})", r.scopes.join(" ")));
    }
    s
}

/// Quotes a word for a POSIX shell when it needs it.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Prints a task result in text form with the resume command, and names a
/// paused or unsuccessful outcome on stderr.
pub fn print_task_text(task_: &Task, reference: &str, verbose: bool) {
    let mut t = Text::new();
    task(&mut t, task_, verbose);
    let (warn, next) = outcome_notes(task_, reference);
    if let Some(n) = next {
        t.blank();
        t.field("Next", n);
    }
    t.print();
    if let Some(w) = warn {
        eprintln!("warning: {w}");
    }
}

/// One streamed event in text form.
pub fn event(t: &mut Text, ev: &StreamResponse, verbose: bool) {
    match &ev.payload {
        Some(stream_response::Payload::Task(tk)) => {
            t.field("Event", "task");
            task(t, tk, verbose);
        }
        Some(stream_response::Payload::Message(m)) => {
            t.field("Event", "message");
            message(t, m, verbose);
        }
        Some(stream_response::Payload::StatusUpdate(s)) => {
            t.field("Event", "status-update");
            t.field("Task ID", &s.task_id);
            t.field("Context ID", &s.context_id);
            t.field("State", state_label(s.state()));
            if let Some(m) = s.status.as_ref().and_then(|st| st.message.as_deref()) {
                let text = m.text();
                if !text.is_empty() {
                    t.field("Status Message", &text);
                }
            }
        }
        Some(stream_response::Payload::ArtifactUpdate(a)) => {
            t.field("Event", "artifact-update");
            t.field("Task ID", &a.task_id);
            t.field("Context ID", &a.context_id);
            if a.append {
                t.field("Append", "true");
            }
            if a.last_chunk {
                t.field("Last Chunk", "true");
            }
            if let Some(art) = &a.artifact {
                artifact(t, art, verbose);
            }
        }
        None => {
            t.field("Event", "empty");
        }
    }
    t.blank();
}

/// `signature` is the outcome of the signature check (`verified (...)`,
/// `unverified: ...`, `absent`).
pub fn card(t: &mut Text, c: &AgentCard, verbose: bool, signature: &str) {
    t.field("Name", &c.name);
    t.field("Description", &c.description);
    t.field("Version", &c.version);
    if let Some(p) = &c.provider {
        t.field("Provider", format!("{} ({})", p.organization, p.url));
    }
    if let Some(d) = &c.documentation_url {
        t.field("Documentation", d);
    }
    let caps = c.capabilities.clone().unwrap_or_default();
    let yes = |b: Option<bool>| if b.unwrap_or(false) { "yes" } else { "no" };
    t.field("Streaming", yes(caps.streaming));
    t.field("Push Notifications", yes(caps.push_notifications));
    t.field("Extended Card", yes(caps.extended_agent_card));
    for e in &caps.extensions {
        t.field(
            "Extension",
            format!("{}{}", e.uri, if e.required { " (required)" } else { "" }),
        );
    }
    for i in &c.supported_interfaces {
        let mut s = format!(
            "{} {} (A2A {})",
            i.protocol_binding,
            i.url,
            if i.protocol_version.is_empty() {
                "?"
            } else {
                &i.protocol_version
            }
        );
        if !i.tenant.is_empty() {
            s.push_str(&format!(" tenant={}", i.tenant));
        }
        t.field("Interface", s);
    }
    for s in agentwire_client::auth::describe_schemes(c) {
        t.field("Security Scheme", s);
    }
    if agentwire_client::auth::requires_credentials(c) {
        t.field("Credentials Required", "yes");
    }
    t.field("Input Modes", c.default_input_modes.join(", "));
    t.field("Output Modes", c.default_output_modes.join(", "));
    t.field("Signature", signature);
    t.field("Skills", c.skills.len().to_string());
    for s in &c.skills {
        t.blank();
        t.field("Skill", format!("{} ({})", s.name, s.id));
        t.field("Skill Description", &s.description);
        if !s.tags.is_empty() {
            t.field("Tags", s.tags.join(", "));
        }
        for ex in &s.examples {
            t.field("Example", ex);
        }
        if verbose {
            if !s.input_modes.is_empty() {
                t.field("Skill Input Modes", s.input_modes.join(", "));
            }
            if !s.output_modes.is_empty() {
                t.field("Skill Output Modes", s.output_modes.join(", "));
            }
        }
    }
}

pub fn push_config(t: &mut Text, c: &TaskPushNotificationConfig) {
    t.field("Config ID", &c.id);
    t.field("Task ID", &c.task_id);
    t.field("URL", &c.url);
    if !c.token.is_empty() {
        t.field("Token", "<set>");
    }
    if let Some(a) = &c.authentication {
        t.field("Authentication", &a.scheme);
    }
}

/// Rendering for a person at a terminal: what `a2a chat` prints when its
/// standard output is a terminal. The agent's words are shown as text
/// (Markdown laid out for the terminal), never as `Label: value` fields;
/// the `text` format above stays the contract of every other command and
/// of `chat` when its output is piped.
///
/// Markdown goes through `termimad`: the agents' reports are Markdown with
/// headings, lists, code and wide tables, and termimad fits tables and
/// paragraphs to the terminal's width (a table printed as its source, or
/// cut by the terminal, is unreadable). With `NO_COLOR` set, or a dumb
/// terminal, the Markdown source is printed as it is (cleaned of control
/// characters): without styles, the source is the most readable form.
pub mod terminal {
    use agentwire_types::{Artifact, Part, part};
    use termimad::MadSkin;
    use termimad::crossterm::style::Stylize;

    use super::{human_size, sanitize};

    /// Data parts longer than this are cut (the whole of it: `/show`).
    pub const DATA_LINES: usize = 16;

    /// How things look on this terminal.
    pub struct Screen {
        /// `None`: no styles (NO_COLOR, dumb terminal).
        skin: Option<MadSkin>,
        width: usize,
    }

    impl Screen {
        /// The screen of the current terminal (styles unless `NO_COLOR`
        /// or `TERM=dumb`).
        pub fn detect() -> Self {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
                || std::env::var("TERM").is_ok_and(|t| t == "dumb");
            let (w, _) = termimad::terminal_size();
            let width = if w < 20 { 80 } else { usize::from(w) };
            Self::new(!no_color, width)
        }

        pub fn new(styled: bool, width: usize) -> Self {
            let skin = styled.then(|| {
                let mut skin = MadSkin::default();
                // Headings on the left, as a reader of the source expects.
                for h in &mut skin.headers {
                    h.align = termimad::Alignment::Left;
                }
                skin
            });
            Self { skin, width }
        }

        pub fn styled(&self) -> bool {
            self.skin.is_some()
        }

        /// Markdown laid out for the terminal (ends with a newline).
        pub fn markdown(&self, md: &str) -> String {
            let clean = sanitize(md);
            match &self.skin {
                Some(skin) => skin.text(&clean, Some(self.width)).to_string(),
                None => with_newline(clean),
            }
        }

        /// Plain text as it is (ends with a newline).
        pub fn plain(&self, text: &str) -> String {
            with_newline(sanitize(text))
        }

        /// Text that is Markdown when its media type (or the file name of
        /// its artifact) says so.
        pub fn text_part(&self, text: &str, markdown: bool) -> String {
            if markdown {
                self.markdown(text)
            } else {
                self.plain(text)
            }
        }

        /// The line that opens an artifact: `── name ──`, bold.
        pub fn heading(&self, title: &str) -> String {
            let title = one_line(title);
            let line = format!("── {title} ──");
            if self.styled() {
                format!("{}\n", line.bold())
            } else {
                format!("{line}\n")
            }
        }

        /// A secondary line (states, identifiers, hints), dimmed.
        pub fn note(&self, text: &str) -> String {
            let text = one_line(text);
            if self.styled() {
                format!("{}\n", text.dim())
            } else {
                format!("{text}\n")
            }
        }

        /// What the agent asks (input or authorization), emphasised.
        pub fn question(&self, text: &str) -> String {
            let text = sanitize(text);
            if self.styled() {
                format!("{}\n", text.trim_end().bold())
            } else {
                with_newline(text)
            }
        }

        /// A JSON value, pretty, cut after `max_lines` lines (with how
        /// many were left out) unless `max_lines` is 0.
        pub fn data(&self, value: &serde_json::Value, max_lines: usize) -> String {
            let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
            let lines: Vec<&str> = pretty.lines().collect();
            let mut out = String::new();
            let shown = if max_lines == 0 {
                lines.len()
            } else {
                lines.len().min(max_lines)
            };
            for l in &lines[..shown] {
                out.push_str(&sanitize(l));
                out.push('\n');
            }
            if shown < lines.len() {
                out.push_str(&self.note(&format!(
                    "… {} more lines (/show prints it whole)",
                    lines.len() - shown
                )));
            }
            out
        }

        /// A file part: its name, type and size (or URL); the bytes are
        /// not printed.
        pub fn file(&self, p: &Part) -> String {
            let name = if p.filename.is_empty() {
                "(unnamed file)"
            } else {
                &p.filename
            };
            let kind = if p.media_type.is_empty() {
                "unknown type"
            } else {
                &p.media_type
            };
            match &p.content {
                Some(part::Content::Raw(b)) => {
                    self.note(&format!("file {name} ({kind}, {})", human_size(b.len())))
                }
                Some(part::Content::Url(u)) => self.note(&format!("file {name} ({kind}) at {u}")),
                _ => String::new(),
            }
        }

        /// Every part, in order: text as text, data as JSON (cut after
        /// `data_lines`, 0 for all), files by name.
        pub fn parts(&self, parts: &[Part], markdown: bool, data_lines: usize) -> String {
            let mut out = String::new();
            for p in parts {
                match &p.content {
                    Some(part::Content::Text(t)) => {
                        out.push_str(&self.text_part(t, markdown || is_markdown(&p.media_type, "")))
                    }
                    Some(part::Content::Data(_)) => {
                        let v = p.as_data().unwrap_or(serde_json::Value::Null);
                        out.push_str(&self.data(&v, data_lines));
                    }
                    Some(part::Content::Raw(_) | part::Content::Url(_)) => {
                        out.push_str(&self.file(p))
                    }
                    None => {}
                }
            }
            out
        }

        /// A whole artifact: its heading, then its parts.
        pub fn artifact(&self, a: &Artifact, title: &str, data_lines: usize) -> String {
            let mut out = self.heading(title);
            let md = a.parts.iter().any(|p| is_markdown(&p.media_type, &a.name));
            out.push_str(&self.parts(&a.parts, md, data_lines));
            out
        }
    }

    /// Whether text is Markdown: its media type says so, or (with none)
    /// the artifact's file name ends in `.md`.
    pub fn is_markdown(media_type: &str, name: &str) -> bool {
        let mt = media_type.split(';').next().unwrap_or_default().trim();
        mt.eq_ignore_ascii_case("text/markdown")
            || mt.eq_ignore_ascii_case("text/x-markdown")
            || (mt.is_empty() && {
                let n = name.to_ascii_lowercase();
                n.ends_with(".md") || n.ends_with(".markdown")
            })
    }

    fn with_newline(mut s: String) -> String {
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s
    }

    fn one_line(s: &str) -> String {
        sanitize(s).replace(['\n', '\r', '\t'], " ")
    }

    /// Markdown that arrives in chunks, shown as it arrives: each complete
    /// block (up to a blank line outside a code fence) is laid out as soon
    /// as it is there; the rest waits for the next chunk or the end.
    /// Laying out a half-received table or code block would show it
    /// broken, hence the block granularity.
    #[derive(Debug, Default)]
    pub struct MarkdownStream {
        pending: String,
    }

    impl MarkdownStream {
        pub fn new() -> Self {
            Self::default()
        }

        /// Adds a chunk; returns the Markdown now complete enough to show.
        pub fn push(&mut self, chunk: &str) -> Option<String> {
            self.pending.push_str(chunk);
            let cut = ready_prefix(&self.pending);
            if cut == 0 {
                return None;
            }
            let rest = self.pending.split_off(cut);
            Some(std::mem::replace(&mut self.pending, rest))
        }

        /// The end of the text: whatever is left.
        pub fn finish(&mut self) -> Option<String> {
            let rest = std::mem::take(&mut self.pending);
            (!rest.trim().is_empty()).then_some(rest)
        }
    }

    /// The length of the longest prefix of `s` that ends with a blank line
    /// outside a fenced code block (0 if none).
    fn ready_prefix(s: &str) -> usize {
        let mut in_fence = false;
        let mut cut = 0;
        let mut pos = 0;
        let mut prev_blank = false;
        for line in s.split_inclusive('\n') {
            pos += line.len();
            if !line.ends_with('\n') {
                break; // an incomplete line
            }
            let t = line.trim();
            if t.starts_with("```") || t.starts_with("~~~") {
                in_fence = !in_fence;
            }
            let blank = t.is_empty();
            if blank && !in_fence && !prev_blank {
                cut = pos;
            }
            prev_blank = blank;
        }
        cut
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn markdown_is_shown_block_by_block() {
            let mut m = MarkdownStream::new();
            assert_eq!(m.push("# Title\n\nfirst para"), Some("# Title\n\n".into()));
            assert_eq!(m.push("graph\n```\ncode\n\nmore"), None);
            assert_eq!(
                m.push(" code\n```\n\n| a |\n"),
                Some("first paragraph\n```\ncode\n\nmore code\n```\n\n".into())
            );
            assert_eq!(m.finish(), Some("| a |\n".into()));
            assert_eq!(m.finish(), None);
        }

        #[test]
        fn unstyled_markdown_is_its_clean_source() {
            let s = Screen::new(false, 80);
            assert_eq!(s.markdown("# T\n\x1b[31mred"), "# T\n\u{FFFD}[31mred\n");
            let styled = Screen::new(true, 80).markdown("# Report\n\n- one\n- two\n");
            assert!(styled.contains("Report") && styled.contains("one"));
            assert!(!styled.contains("# Report"), "{styled:?}");
        }

        #[test]
        fn long_data_is_cut() {
            let s = Screen::new(false, 80);
            let v = serde_json::json!({"a": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]});
            let out = s.data(&v, 4);
            assert_eq!(out.lines().count(), 5, "{out}");
            assert!(
                out.ends_with("… 10 more lines (/show prints it whole)\n"),
                "{out}"
            );
            assert_eq!(s.data(&v, 0).lines().count(), 14);
        }

        #[test]
        fn markdown_by_type_or_name() {
            assert!(is_markdown("text/markdown; charset=utf-8", "x"));
            assert!(is_markdown("", "report.md"));
            assert!(!is_markdown("text/plain", "report.md"));
            assert!(!is_markdown("", "notes.txt"));
        }
    }
}
