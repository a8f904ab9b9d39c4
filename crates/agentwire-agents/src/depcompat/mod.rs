//! The Dependency Compatibility Agent: checks a project's
//! dependencies against a target runtime and target package versions, and
//! reports the risks.
//!
//! How it uses the protocol:
//!
//! - a quick question about what it supports ("do you support npm 11
//!   lockfiles?") is answered with one **Message**: no task;
//! - an analysis request becomes a **Task**. When something is missing (the
//!   target Node.js version, a lockfile) the task goes to
//!   `TASK_STATE_INPUT_REQUIRED` with a status message saying exactly what
//!   is missing (text, plus a data part listing the missing fields). The
//!   answer (a message with the task's id) resumes the same task: the files
//!   of the first message are found again in the task's history;
//! - the result streams as two artifacts: `compatibility-report.json` (one
//!   data part: the structured risk report) and `compatibility-report.md`
//!   (Markdown, in chunks with `append` / `lastChunk`);
//! - a refinement ("sort the fixes by risk") in the same context with
//!   `referenceTaskIds` is a **new task** whose artifact keeps the name of
//!   the one it refines, with a new `artifactId`. When the referenced tasks
//!   hold more than one report artifact and the message names none (part
//!   metadata `artifactId`, or "json" / "markdown" in the text), the agent
//!   asks which one (`input-required`) instead of guessing.
//!
//! - a question about a package of the private registry (the `@acme-internal`
//!   scope, simulated locally: [`private`]) becomes a task in
//!   `TASK_STATE_AUTH_REQUIRED` naming the token it needs; the reply in
//!   the task carries the token and the task completes with the registry's
//!   entry (in-task authorization, spec 7.6);
//!
//! The analysis itself ([`npm`], [`cargo`], [`semver`]) works offline on
//! the files sent: nothing is fetched from a registry, and the report says
//! what could not be checked.

pub mod answers;
pub mod cargo;
pub mod input;
pub mod npm;
pub mod private;
pub mod report;
pub mod semver;

use std::collections::BTreeMap;

use agentwire_server::{A2aResult, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{AgentCard, AgentSkill, Artifact, Message, Part, Role, Task, TaskState};
use serde_json::{Value, json};

use self::cargo::{CargoFiles, Manifest, RustTarget};
use self::input::{FileKind, Inputs};
use self::npm::{NodeTarget, NpmFiles, PackageTarget};
use self::report::{Report, Risk, Target};

/// The name of the structured report artifact.
pub const JSON_REPORT: &str = "compatibility-report.json";
/// The name of the Markdown report artifact.
pub const MARKDOWN_REPORT: &str = "compatibility-report.md";

/// Metadata key (on the agent's status messages) saying what the agent
/// waits for: `inputs`, `artifact` or `instruction`.
pub const AWAITING_KEY: &str = "depcompat/awaiting";
/// Metadata key (on a question about which artifact to refine) holding the
/// candidate artifacts, so that the resumed task can find them.
pub const CANDIDATES_KEY: &str = "depcompat/candidates";
/// Metadata key (on the Markdown report artifact) holding the structured
/// report it renders, so that a refinement of it needs nothing else.
pub const REPORT_KEY: &str = "depcompat/report";
/// Metadata key (on a refined artifact) naming the artifact it refines.
pub const REFINES_KEY: &str = "depcompat/refines";
/// The part metadata key a client uses to name the artifact a refinement
/// targets (the same key as the client ledger's).
pub const ARTIFACT_ID_KEY: &str = "artifactId";

/// The agent. Stateless: everything a resumed task needs is in the task.
#[derive(Debug, Clone, Copy, Default)]
pub struct DepCompatAgent;

impl AgentExecutor for DepCompatAgent {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        if let Some(existing) = &ctx.task {
            return match awaiting(existing).as_deref() {
                Some(private::AWAITING) => private::resume(&ctx, &task).await,
                Some("artifact") | Some("instruction") => refine(&ctx, &task).await,
                _ => analyse(&ctx, &task).await,
            };
        }
        let inputs = Inputs::gather([&ctx.message]);
        if inputs.has_files() {
            return analyse(&ctx, &task).await;
        }
        if !ctx.message.reference_task_ids.is_empty() {
            if ctx.reference_tasks.is_empty() {
                return task
                    .reply_text(format!(
                        "I cannot see the task(s) you reference ({}): unknown, or not yours. Send the \
                         project's files to start a new analysis.",
                        ctx.message.reference_task_ids.join(", ")
                    ))
                    .await;
            }
            return refine(&ctx, &task).await;
        }
        let text = ctx.text();
        // A package of the private registry: its token first (in-task
        // authorization).
        let private = private::mentioned(&text);
        if !private.is_empty() {
            return private::ask(&task, &private).await;
        }
        if answers::is_capability_question(&text) || !answers::asks_for_analysis(&text) {
            return task.reply_text(answers::answer(&text)).await;
        }
        analyse(&ctx, &task).await
    }
}

/// What the agent's last question asked for, from the task's status
/// message.
fn awaiting(task: &Task) -> Option<String> {
    task.status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .and_then(|m| m.metadata_value(AWAITING_KEY))
        .and_then(|v| v.as_str().map(str::to_owned))
}

/// The user messages of the task so far, then the new one.
fn conversation(ctx: &RequestContext) -> Vec<&Message> {
    let mut out: Vec<&Message> = ctx
        .task
        .iter()
        .flat_map(|t| t.history.iter())
        .filter(|m| m.role == Role::User as i32 && m.message_id != ctx.message.message_id)
        .collect();
    out.push(&ctx.message);
    out
}

/// One missing input: what, for which file, and how to give it.
struct Missing {
    field: &'static str,
    text: String,
    example: &'static str,
}

/// The analysis, ready to run.
struct Plan {
    npm: Option<(Option<serde_json::Value>, serde_json::Value, Vec<String>)>,
    cargo: Option<CargoFiles>,
    node: Option<NodeTarget>,
    rust: Option<RustTarget>,
    packages: BTreeMap<String, PackageTarget>,
    summary: Vec<String>,
}

fn plan(inputs: &Inputs) -> Result<Plan, Vec<Missing>> {
    let mut missing = Vec::new();
    let mut summary = Vec::new();
    let mut packages = inputs.packages.clone();

    // npm
    let manifests = inputs.files_of(FileKind::PackageJson);
    let locks = inputs.files_of(FileKind::PackageLock);
    let mut npm = None;
    let mut wants_node = false;
    if !manifests.is_empty() || !locks.is_empty() {
        wants_node = true;
        let manifest = match manifests.first().map(|f| f.json()) {
            Some(Ok(v)) => Some(v),
            Some(Err(e)) => {
                missing.push(Missing {
                    field: "files.package.json",
                    text: format!("a valid package.json ({e})"),
                    example: "package.json as a file part",
                });
                None
            }
            None => None,
        };
        // Other package.json files describe target versions of packages.
        for extra in manifests.iter().skip(1) {
            if let Ok(v) = extra.json() {
                let name = v.get("name").and_then(Value::as_str);
                let version = v.get("version").and_then(Value::as_str);
                if let (Some(name), Some(version)) = (name, version) {
                    if let Some(t) = packages.get_mut(name) {
                        if t.version == version {
                            t.engines_node = npm::engines_node(&v);
                            if let Some(p) = v.get("peerDependencies").and_then(Value::as_object) {
                                t.peer_dependencies = p
                                    .iter()
                                    .filter_map(|(k, v)| {
                                        v.as_str().map(|s| (k.clone(), s.to_owned()))
                                    })
                                    .collect();
                            }
                        }
                    }
                }
            }
        }
        match locks.first() {
            None => missing.push(Missing {
                field: "files.package-lock.json",
                text: "package-lock.json (the resolved versions: without it I cannot tell what is installed)".into(),
                example: "package-lock.json as a file part",
            }),
            Some(lock) => match lock.json().and_then(|v| npm::Lockfile::parse(&v).map(|l| (v, l))) {
                Ok((v, l)) => {
                    summary.push(format!(
                        "{} (lockfile v{}, {} packages)",
                        lock.name,
                        l.version,
                        l.installed().count()
                    ));
                    let mut names: Vec<String> =
                        manifests.first().map(|f| f.name.clone()).into_iter().collect();
                    names.push(lock.name.clone());
                    if let Some(m) = manifests.first() {
                        summary.insert(0, m.name.clone());
                    }
                    npm = Some((manifest, v, names));
                }
                Err(e) => missing.push(Missing {
                    field: "files.package-lock.json",
                    text: format!("a package-lock.json I can read: {} {e}", lock.name),
                    example: "package-lock.json (lockfileVersion 2 or 3) as a file part",
                }),
            },
        }
    }

    // Cargo
    let cargo_tomls = inputs.files_of(FileKind::CargoToml);
    let cargo_locks = inputs.files_of(FileKind::CargoLock);
    let mut cargo = None;
    let mut wants_rust = false;
    if !cargo_tomls.is_empty() || !cargo_locks.is_empty() {
        wants_rust = true;
        let mut files = CargoFiles::default();
        for f in &cargo_tomls {
            match f.toml() {
                Ok(t) => files.manifests.push(Manifest {
                    file: f.name.clone(),
                    toml: t,
                }),
                Err(e) => missing.push(Missing {
                    field: "files.Cargo.toml",
                    text: format!("a valid Cargo.toml ({e})"),
                    example: "Cargo.toml as a file part",
                }),
            }
        }
        if let Some(l) = cargo_locks.first() {
            match l.toml() {
                Ok(t) => {
                    files.lock = Some(t);
                    files.lock_file = Some(l.name.clone());
                }
                Err(e) => missing.push(Missing {
                    field: "files.Cargo.lock",
                    text: format!("a valid Cargo.lock ({e})"),
                    example: "Cargo.lock as a file part",
                }),
            }
        }
        summary.extend(files.manifests.iter().map(|m| m.file.clone()));
        summary.extend(files.lock_file.clone());
        cargo = Some(files);
    }

    if npm.is_none() && cargo.is_none() && missing.is_empty() {
        missing.push(Missing {
            field: "files",
            text: "the project's files: package.json and package-lock.json (npm), or Cargo.toml and Cargo.lock (Cargo), as file parts with their file names".into(),
            example: "package.json + package-lock.json as file parts",
        });
    }

    let node = match &inputs.node {
        Some(n) => match NodeTarget::parse(n) {
            Some(t) => Some(t),
            None => {
                missing.push(Missing {
                    field: "targetRuntime.node",
                    text: format!(
                        "the target Node.js version: \"{n}\" is not a version (say e.g. \"Node.js 24\" or \"24.1.0\")"
                    ),
                    example: "Node.js 24",
                });
                None
            }
        },
        None => None,
    };
    if wants_node && node.is_none() && inputs.node.is_none() {
        missing.push(Missing {
            field: "targetRuntime.node",
            text: "the target Node.js version to check package-lock.json against (a line such as \"Node.js 24\", or an exact version such as \"24.1.0\")".into(),
            example: "Node.js 24",
        });
    }
    let rust = match &inputs.rust {
        Some(r) => match RustTarget::parse(r) {
            Some(t) => Some(t),
            None => {
                missing.push(Missing {
                    field: "targetRuntime.rust",
                    text: format!(
                        "the target Rust version: \"{r}\" is not a Rust version (say e.g. \"Rust 1.80\")"
                    ),
                    example: "Rust 1.80",
                });
                None
            }
        },
        None => None,
    };
    if wants_rust && rust.is_none() && inputs.rust.is_none() {
        missing.push(Missing {
            field: "targetRuntime.rust",
            text: "the target Rust version to check the Cargo project against (e.g. \"Rust 1.80\")"
                .into(),
            example: "Rust 1.80",
        });
    }
    if !missing.is_empty() {
        return Err(missing);
    }
    Ok(Plan {
        npm,
        cargo,
        node,
        rust,
        packages,
        summary,
    })
}

/// Whether the client accepts `mode` (`acceptedOutputModes`, empty: any).
fn accepts(ctx: &RequestContext, mode: &str) -> bool {
    let accepted = ctx.accepted_output_modes();
    let family = mode.split('/').next().unwrap_or(mode);
    accepted.is_empty()
        || accepted.iter().any(|a| {
            let a = a.trim();
            a == mode || a == "*/*" || a.strip_suffix("/*") == Some(family)
        })
}

/// The error for a client that accepts neither report format.
fn no_output_mode(ctx: &RequestContext) -> agentwire_types::A2aError {
    agentwire_types::A2aError::content_type_not_supported(format!(
        "the reports are application/json ({JSON_REPORT}) and text/markdown ({MARKDOWN_REPORT}); acceptedOutputModes {:?} allows neither",
        ctx.accepted_output_modes()
    ))
}

/// Runs (or resumes) an analysis task.
async fn analyse(ctx: &RequestContext, task: &TaskUpdater) -> A2aResult<()> {
    let (want_json, want_md) = (
        accepts(ctx, "application/json"),
        accepts(ctx, "text/markdown"),
    );
    if !want_json && !want_md {
        return Err(no_output_mode(ctx));
    }
    let inputs = Inputs::gather(conversation(ctx));
    task.start_work().await?;
    let plan = match plan(&inputs) {
        Ok(p) => p,
        Err(missing) => return ask_for_inputs(task, &inputs, &missing).await,
    };
    task.progress(format!(
        "Checking {} against {}",
        plan.summary.join(", "),
        [
            plan.node.as_ref().map(NodeTarget::describe),
            plan.rust.map(|r| format!("Rust {}", r.label())),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" and ")
    ))
    .await?;

    let mut projects = Vec::new();
    let mut findings = Vec::new();
    let mut unchecked = Vec::new();
    let mut notes: Vec<String> = inputs
        .ignored
        .iter()
        .map(|i| format!("ignored {i}"))
        .collect();
    let mut target = Target::default();
    if let (Some((manifest, lock, names)), Some(node)) = (&plan.npm, &plan.node) {
        let files = NpmFiles {
            manifest: manifest.as_ref(),
            lockfile: lock,
            file_names: names.clone(),
        };
        // With a Cargo project too, the npm side takes the packages its
        // lockfile installs; the others are crates.
        let installed: Vec<String> = npm::Lockfile::parse(lock)
            .map(|l| l.installed().map(|e| e.name.clone()).collect())
            .unwrap_or_default();
        let npm_packages: BTreeMap<String, PackageTarget> = plan
            .packages
            .iter()
            .filter(|(name, _)| plan.cargo.is_none() || installed.contains(name))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match npm::analyse(&files, node, &npm_packages) {
            Ok(a) => {
                projects.push(a.project);
                findings.extend(a.findings);
                unchecked.extend(a.unchecked);
                notes.extend(a.notes);
            }
            Err(e) => return task.fail(format!("The npm analysis failed: {e}")).await,
        }
        target.node = Some(node.label());
        target.packages.extend(
            npm_packages
                .iter()
                .map(|(k, v)| (k.clone(), v.version.clone())),
        );
    }
    if task.is_canceled() {
        return Ok(());
    }
    if let (Some(files), Some(rust)) = (&plan.cargo, &plan.rust) {
        let crates: BTreeMap<String, String> = plan
            .packages
            .iter()
            .filter(|(name, _)| !target.packages.contains_key(*name))
            .map(|(k, v)| (k.clone(), v.version.clone()))
            .collect();
        let a = cargo::analyse(files, rust, &crates);
        projects.push(a.project);
        findings.extend(a.findings);
        unchecked.extend(a.unchecked);
        notes.extend(a.notes);
        target.rust = Some(rust.label());
        target.packages.extend(crates);
    }
    let report = Report::new(projects, target, findings, unchecked, notes);
    let mut names = Vec::new();
    if want_json {
        emit_json(task, &report, None).await?;
        names.push(JSON_REPORT);
    }
    if want_md {
        emit_markdown(task, &report, None).await?;
        names.push(MARKDOWN_REPORT);
    }
    task.complete_with(format!(
        "Report ready ({}): {}",
        names.join(", "),
        report.headline()
    ))
    .await
}

/// Moves the task to input-required, saying exactly what is missing.
async fn ask_for_inputs(task: &TaskUpdater, inputs: &Inputs, missing: &[Missing]) -> A2aResult<()> {
    let mut text = String::from("To run the analysis I still need ");
    let items: Vec<String> = missing.iter().map(|m| m.text.clone()).collect();
    text.push_str(&items.join("; and "));
    text.push('.');
    let received: Vec<&str> = inputs.files.iter().map(|f| f.name.as_str()).collect();
    if !received.is_empty() {
        text.push_str(&format!(" I have: {}.", received.join(", ")));
    }
    if missing.iter().any(|m| m.field.starts_with("targetRuntime")) {
        text.push_str(
            " Answer in this task, in words (\"Node.js 24\") or as data ({\"targetRuntime\": {\"node\": \"24\"}}).",
        );
    }
    let data = json!({
        "missing": missing.iter().map(|m| json!({
            "field": m.field,
            "description": m.text,
            "example": m.example,
        })).collect::<Vec<_>>(),
        "received": received,
        "ignored": inputs.ignored,
    });
    let message = task
        .agent_message(vec![Part::text(text), Part::data(data)])
        .with_metadata(AWAITING_KEY, json!("inputs"));
    task.set_status(TaskState::InputRequired, Some(message))
        .await
}

/// The JSON report artifact (one chunk: a data part is never split).
async fn emit_json(
    task: &TaskUpdater,
    report: &Report,
    refines: Option<&Candidate>,
) -> A2aResult<()> {
    let mut a = Artifact::new(
        JSON_REPORT,
        vec![Part::data(report.to_json()).with_media_type("application/json")],
    )
    .with_description(describe(report, "Structured risk report"));
    if let Some(c) = refines {
        a = a.with_metadata(
            REFINES_KEY,
            json!({"artifactId": c.artifact_id, "taskId": c.task_id}),
        );
    }
    task.artifact_chunk(a, false, true).await
}

/// The Markdown report artifact, streamed section by section.
async fn emit_markdown(
    task: &TaskUpdater,
    report: &Report,
    refines: Option<&Candidate>,
) -> A2aResult<()> {
    let sections = report.markdown_sections();
    let id = agentwire_types::new_id();
    let last = sections.len().saturating_sub(1);
    for (i, section) in sections.into_iter().enumerate() {
        if task.is_canceled() {
            return Ok(());
        }
        let mut chunk = Artifact::new(
            MARKDOWN_REPORT,
            vec![Part::text(section).with_media_type("text/markdown")],
        )
        .with_id(&id);
        if i == 0 {
            chunk = chunk
                .with_description(describe(report, "Markdown report"))
                .with_metadata(REPORT_KEY, report.to_json());
            if let Some(c) = refines {
                chunk = chunk.with_metadata(
                    REFINES_KEY,
                    json!({"artifactId": c.artifact_id, "taskId": c.task_id}),
                );
            }
        }
        task.artifact_chunk(chunk, i > 0, i == last).await?;
    }
    Ok(())
}

fn describe(report: &Report, what: &str) -> String {
    let mut s = format!("{what}: {}", report.headline());
    if report.fix_order == report::FixOrder::Risk {
        s.push_str("; fixes sorted by risk");
    }
    if let Some(min) = report.min_risk {
        s.push_str(&format!("; only {} risk and above", min.as_str()));
    }
    s
}

// ----- refinements -----------------------------------------------------

/// A report artifact a refinement could target.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    task_id: String,
    artifact_id: String,
    name: String,
    report: Report,
}

fn candidates_of(tasks: &[Task]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for t in tasks {
        for a in &t.artifacts {
            let report = if a.name == JSON_REPORT {
                a.parts
                    .iter()
                    .find_map(|p| p.as_data())
                    .and_then(|d| Report::from_json(&d))
            } else if a.name == MARKDOWN_REPORT {
                a.metadata
                    .as_ref()
                    .and_then(|m| m.fields.get(REPORT_KEY))
                    .map(agentwire_types::json::from_value)
                    .and_then(|d| Report::from_json(&d))
            } else {
                None
            };
            if let Some(report) = report {
                out.push(Candidate {
                    task_id: t.id.clone(),
                    artifact_id: a.artifact_id.clone(),
                    name: a.name.clone(),
                    report,
                });
            }
        }
    }
    out
}

/// What the refinement should change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Ops {
    sort: bool,
    min: Option<Risk>,
}

fn parse_ops(text: &str) -> Ops {
    let t = text.to_ascii_lowercase();
    let sort = ["sort", "order", "rank", "priorit"]
        .iter()
        .any(|w| t.contains(w));
    let filtering = [
        "only",
        "at least",
        "and above",
        "or higher",
        "or above",
        "filter",
        "just ",
    ]
    .iter()
    .any(|w| t.contains(w));
    let min = if filtering {
        ["high", "medium", "low"]
            .iter()
            .find(|w| t.contains(**w))
            .and_then(|w| Risk::parse(w))
    } else {
        None
    };
    Ops { sort, min }
}

/// The candidates a message names: part or message metadata `artifactId`,
/// an artifact id in the text, or "json" / "markdown".
fn named(message: &Message, cands: &[Candidate]) -> Vec<usize> {
    let mut ids: Vec<String> = message
        .parts
        .iter()
        .filter_map(|p| p.metadata.as_ref())
        .filter_map(|m| m.fields.get(ARTIFACT_ID_KEY))
        .map(agentwire_types::json::from_value)
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    if let Some(v) = message.metadata_value(ARTIFACT_ID_KEY) {
        ids.extend(v.as_str().map(str::to_owned));
    }
    let by_id: Vec<usize> = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| ids.contains(&c.artifact_id))
        .map(|(i, _)| i)
        .collect();
    if !by_id.is_empty() {
        return by_id;
    }
    let text = message.text();
    let in_text: Vec<usize> = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| text.contains(&c.artifact_id))
        .map(|(i, _)| i)
        .collect();
    if !in_text.is_empty() {
        return in_text;
    }
    let t = text.to_ascii_lowercase();
    let json = t.contains("json") || t.contains("structured") || t.contains("data");
    let md = t.contains("markdown") || t.contains(".md") || t.split_whitespace().any(|w| w == "md");
    let want = match (json, md) {
        (true, false) => JSON_REPORT,
        (false, true) => MARKDOWN_REPORT,
        _ => return Vec::new(),
    };
    // The newest artifact of that name.
    cands
        .iter()
        .enumerate()
        .rev()
        .find(|(_, c)| c.name == want)
        .map(|(i, _)| vec![i])
        .unwrap_or_default()
}

/// A refinement: a new task (or one resumed after a question).
async fn refine(ctx: &RequestContext, task: &TaskUpdater) -> A2aResult<()> {
    task.start_work().await?;
    // Candidates: from the question asked earlier in this task, else from
    // the referenced tasks.
    let cands: Vec<Candidate> = ctx
        .task
        .as_ref()
        .and_then(|t| t.status.as_ref())
        .and_then(|s| s.message.as_deref())
        .and_then(|m| m.metadata_value(CANDIDATES_KEY))
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_else(|| candidates_of(&ctx.reference_tasks));
    if cands.is_empty() {
        return task
            .reject(format!(
                "The referenced task(s) ({}) hold no compatibility report I can refine. Send the project's files to start a new analysis.",
                ctx.message.reference_task_ids.join(", ")
            ))
            .await;
    }
    let messages = conversation(ctx);
    let text: String = messages
        .iter()
        .map(|m| m.text())
        .collect::<Vec<_>>()
        .join("\n");
    let ops = parse_ops(&text);
    let mut chosen: Vec<usize> = Vec::new();
    for m in messages.iter().rev() {
        chosen = named(m, &cands);
        if !chosen.is_empty() {
            break;
        }
    }
    if chosen.is_empty() && cands.len() == 1 {
        chosen.push(0);
    }
    if chosen.len() != 1 {
        let list: Vec<String> = cands
            .iter()
            .map(|c| {
                format!(
                    "{} (artifactId {}, task {})",
                    c.name, c.artifact_id, c.task_id
                )
            })
            .collect();
        let question = format!(
            "Which artifact should I refine? The referenced task(s) produced {}: {}. Answer in this task naming one: put its artifactId in the part metadata (\"{ARTIFACT_ID_KEY}\"), or say \"the JSON report\" or \"the Markdown report\".",
            cands.len(),
            list.join("; ")
        );
        let data = json!({
            "missing": [{"field": "artifactId", "description": "the artifact to refine"}],
            "candidates": cands.iter().map(|c| json!({
                "artifactId": c.artifact_id, "name": c.name, "taskId": c.task_id
            })).collect::<Vec<_>>(),
        });
        let message = task
            .agent_message(vec![Part::text(question), Part::data(data)])
            .with_metadata(AWAITING_KEY, json!("artifact"))
            .with_metadata(
                CANDIDATES_KEY,
                serde_json::to_value(&cands).unwrap_or_default(),
            );
        return task
            .set_status(TaskState::InputRequired, Some(message))
            .await;
    }
    if ops == Ops::default() {
        let question = "What should change in the report? I can sort the fixes by risk (\"sort the fixes by risk\") or keep only findings of a minimum risk (\"only high risk\").";
        let message = task
            .agent_message(vec![Part::text(question)])
            .with_metadata(AWAITING_KEY, json!("instruction"))
            .with_metadata(
                CANDIDATES_KEY,
                serde_json::to_value(&cands).unwrap_or_default(),
            );
        return task
            .set_status(TaskState::InputRequired, Some(message))
            .await;
    }
    let Some(c) = cands.get(chosen[0]) else {
        return task.fail("internal: no artifact chosen").await;
    };
    let mode = if c.name == JSON_REPORT {
        "application/json"
    } else {
        "text/markdown"
    };
    if !accepts(ctx, mode) {
        return task
            .reject(format!(
                "{} is {mode}, which acceptedOutputModes {:?} does not allow",
                c.name,
                ctx.accepted_output_modes()
            ))
            .await;
    }
    let mut report = c.report.clone();
    if let Some(min) = ops.min {
        report = report.filtered(min);
    }
    if ops.sort {
        report = report.sorted_by_risk();
    }
    if c.name == JSON_REPORT {
        emit_json(task, &report, Some(c)).await?;
    } else {
        emit_markdown(task, &report, Some(c)).await?;
    }
    let mut what = Vec::new();
    if ops.sort {
        what.push("fixes sorted by risk".to_owned());
    }
    if let Some(min) = ops.min {
        what.push(format!("only {} risk and above", min.as_str()));
    }
    task.complete_with(format!(
        "Refined {} ({}): a new version of artifact {} from task {}",
        c.name,
        what.join(", "),
        c.artifact_id,
        c.task_id
    ))
    .await
}

// ----- card ----------------------------------------------------------------

/// The agent's card: what it does, what it accepts and returns.
pub fn card() -> AgentCard {
    let mut card = AgentCard::new(
        "Dependency Compatibility Agent",
        "Checks a project's dependencies against a target runtime (Node.js for npm projects, Rust for Cargo projects) and target package versions, and streams a structured risk report and a Markdown report. Works offline on the files sent.",
        env!("CARGO_PKG_VERSION"),
    )
    .with_streaming(true)
    .with_input_modes(["text/plain", "application/json", "application/toml"])
    .with_output_modes(["application/json", "text/markdown", "text/plain"])
    .with_skill(
        AgentSkill::new(
            "dependency-compatibility-analysis",
            "Dependency compatibility analysis",
            "Checks package.json + package-lock.json (v2/v3) against a target Node.js version or line: engines.node of the project and every package with npm's own semver rules (||, hyphen ranges, x-ranges, ~, ^, prereleases), peer ranges against the resolved versions, packages installed in several versions, deprecated packages, package.json out of sync; or Cargo.toml + Cargo.lock against a target Rust (rust-version and edition of the crates whose Cargo.toml is sent, lockfile format, duplicate crates). Asks for a missing target (input-required). Streams compatibility-report.json and compatibility-report.md.",
            ["dependencies", "compatibility", "npm", "node", "cargo", "rust", "semver", "upgrade"],
        )
        .with_example("Check payment-service for Node.js 24 (attach package.json and package-lock.json)")
        .with_example("Which dependencies block the upgrade to Node 24?")
        .with_example("Check this workspace against Rust 1.80 (attach Cargo.toml and Cargo.lock)")
        .with_input_modes(["application/json", "application/toml", "text/plain"])
        .with_output_modes(["application/json", "text/markdown"]),
    )
    .with_skill(
        AgentSkill::new(
            "package-upgrade-impact",
            "Package upgrade impact",
            "What upgrading named packages to target versions would violate: peer ranges of dependents (ERESOLVE), dependents' own ranges, the project's range, and the new version's engines and peers when given (targetPackages data or its package.json).",
            ["upgrade", "peer-dependencies", "npm", "semver"],
        )
        .with_example("Can we upgrade express to 5.1.0 on Node 22? (attach package.json and package-lock.json)")
        .with_example("Check express@5.1.0 and Node.js 24 together")
        .with_input_modes(["application/json", "text/plain"])
        .with_output_modes(["application/json", "text/markdown"]),
    )
    .with_skill(
        AgentSkill::new(
            "report-refinement",
            "Report refinement",
            "Refines an earlier report in the same context (referenceTaskIds): fixes sorted by risk, or only findings of a minimum risk. The result is a new task whose artifact keeps the name with a new artifactId; when the referenced task has several report artifacts and the request names none (part metadata artifactId), the agent asks which one.",
            ["refinement", "report", "risk"],
        )
        .with_example("Sort the fixes by risk")
        .with_example("Only high risk findings, in the Markdown report")
        .with_input_modes(["text/plain"])
        .with_output_modes(["application/json", "text/markdown"]),
    )
    .with_skill(
        AgentSkill::new(
            "compatibility-questions",
            "Quick questions",
            "Answers questions about what the agent supports (lockfile versions, package managers, runtimes) with a single message, without creating a task.",
            ["capabilities", "faq"],
        )
        .with_example("Do you support npm 11 lockfiles?")
        .with_example("Can you read Cargo.lock v4?")
        .with_input_modes(["text/plain"])
        .with_output_modes(["text/plain"]),
    )
    .with_skill(
        AgentSkill::new(
            "private-registry-packages",
            "Private registry packages",
            "Checks packages of the private registry npm.acme.internal (the @acme-internal scope; simulated, offline) against a target Node.js. Reading the registry needs its read token: the task goes to auth-required saying so, and the reply in the same task carries the token (in-task authorization, extension urn:agentwire:ext:in-task-auth:v1).",
            ["private-registry", "authorization", "npm", "node"],
        )
        .with_example("Does @acme-internal/widgets 2.0.0 run on Node.js 18?")
        .with_input_modes(["text/plain", "application/json"])
        .with_output_modes(["application/json", "text/plain"]),
    )
    ;
    card.capabilities
        .get_or_insert_with(Default::default)
        .extensions
        .push(agentwire_server::in_task_auth_extension());
    card
}
