//! `a2a ledger ...`: read the ledger (contexts, the tasks of a context, an
//! artifact's versions and the accepted one) and accept a version.

use std::collections::BTreeMap;
use std::path::Path;

use agentwire_client::ledger::{ArtifactVersion, ContextRecord, Ledger, TaskRecord};
use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{err, find_context, short_id};
use crate::error::{CliError, exit};
use crate::render::{self, Text};
use crate::{Globals, OutputFormat};

#[derive(Subcommand, Debug)]
pub enum LedgerCommand {
    /// The recorded contexts, most recently updated first: agent, tasks and their states.
    Contexts,
    /// The tasks of a context (default: the last one), oldest first: state, artifacts.
    Tasks(ContextArg),
    /// The artifacts of a context (default: the last one): each one's versions, what each refines, the accepted one.
    #[command(alias = "versions")]
    Artifacts(ArtifactsArgs),
    /// Accept an artifact version (the other versions of that artifact in its context are no longer accepted).
    Accept(AcceptArgs),
}

#[derive(Args, Debug)]
pub struct ContextArg {
    /// The context: `last`, its id, or a short id (the start or end of the id) [default: last].
    #[arg(value_name = "CONTEXT", default_value = "last")]
    pub context: String,
}

#[derive(Args, Debug)]
pub struct ArtifactsArgs {
    #[command(flatten)]
    pub context: ContextArg,
    /// Only the artifact of this name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

#[derive(Args, Debug)]
pub struct AcceptArgs {
    /// The version: its artifact id or a short id (the start or end of the id); or the artifact's name, with VERSION.
    #[arg(value_name = "ARTIFACT")]
    pub artifact: String,
    /// The version number (as `a2a ledger artifacts` shows it) when ARTIFACT is a name.
    #[arg(value_name = "VERSION")]
    pub version: Option<usize>,
    /// The context of the named artifact: `last`, its id or a short id [default: last].
    #[arg(long, value_name = "CONTEXT", default_value = "last")]
    pub context: String,
}

pub async fn run(g: &Globals, cmd: LedgerCommand) -> Result<u8, CliError> {
    let Some((ledger, path)) = super::open(g).await? else {
        return Err(CliError::usage("the ledger is turned off (--no-ledger)")
            .with_hint("drop --no-ledger (or A2ACLI_NO_LEDGER) to read it"));
    };
    match cmd {
        LedgerCommand::Contexts => contexts(g, &ledger, &path).await,
        LedgerCommand::Tasks(a) => tasks(g, &ledger, &a.context).await,
        LedgerCommand::Artifacts(a) => {
            artifacts(g, &ledger, &a.context.context, a.name.as_deref()).await
        }
        LedgerCommand::Accept(a) => accept(g, &ledger, a).await,
    }?;
    Ok(exit::OK)
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn print(g: &Globals, doc: &Value, text: &Text) -> Result<(), CliError> {
    match g.output {
        OutputFormat::Json => render::print_json(doc),
        OutputFormat::Text => {
            text.print();
            Ok(())
        }
    }
}

/// "2 completed, 1 input-required".
fn states(tasks: &[&TaskRecord]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in tasks {
        *counts.entry(t.state.short_name()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn context_or_err(ledger: &Ledger, typed: &str) -> Result<ContextRecord, CliError> {
    find_context(ledger, typed, None).await?.ok_or_else(|| {
        CliError::usage(format!("the ledger has no context {typed}"))
            .with_hint("list the recorded contexts with `a2a ledger contexts`")
    })
}

async fn contexts(g: &Globals, ledger: &Ledger, path: &Path) -> Result<(), CliError> {
    let contexts = ledger.contexts().await.map_err(err)?;
    let tasks = ledger.store().tasks(None).await.map_err(err)?;
    let mut t = Text::new();
    t.field("Ledger", path.display().to_string());
    t.field("Contexts", contexts.len().to_string());
    let mut docs = Vec::new();
    for c in &contexts {
        let mine: Vec<&TaskRecord> = tasks.iter().filter(|r| r.context_id == c.id).collect();
        t.blank();
        t.field("Context ID", &c.id);
        t.field("Short ID", short_id(&c.id));
        t.field("Agent", c.agent.as_deref().unwrap_or("(unknown)"));
        if mine.is_empty() {
            t.field("Tasks", "0");
        } else {
            t.field("Tasks", format!("{} ({})", mine.len(), states(&mine)));
        }
        t.field("Updated", ts(c.updated_at));
        docs.push(json!({
            "contextId": c.id,
            "shortId": short_id(&c.id),
            "agent": c.agent,
            "tasks": mine.len(),
            "taskIds": mine.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            "createdAt": ts(c.created_at),
            "updatedAt": ts(c.updated_at),
        }));
    }
    let doc = json!({"ledger": path.display().to_string(), "contexts": docs});
    print(g, &doc, &t)
}

async fn tasks(g: &Globals, ledger: &Ledger, typed: &str) -> Result<(), CliError> {
    let c = context_or_err(ledger, typed).await?;
    let tasks = ledger.store().tasks(Some(&c.id)).await.map_err(err)?;
    let mut t = Text::new();
    t.field("Context ID", &c.id);
    t.field("Agent", c.agent.as_deref().unwrap_or("(unknown)"));
    t.field("Tasks", tasks.len().to_string());
    let mut docs = Vec::new();
    for r in &tasks {
        t.blank();
        t.field("Task ID", &r.id);
        t.field("Short ID", short_id(&r.id));
        t.field("Context ID", &r.context_id);
        t.field("State", render::state_label(r.state));
        if r.generation > 0 {
            t.field("Generation", r.generation.to_string());
        }
        let arts: Vec<String> = r
            .task
            .artifacts
            .iter()
            .map(|a| {
                let name = if a.name.is_empty() {
                    "(unnamed)"
                } else {
                    &a.name
                };
                format!("{name} ({})", short_id(&a.artifact_id))
            })
            .collect();
        t.field(
            "Artifacts",
            if arts.is_empty() {
                "0".to_owned()
            } else {
                arts.join(", ")
            },
        );
        if let Some(a) = &r.refines_artifact_id {
            t.field("Refines", a);
        }
        t.field("Updated", ts(r.updated_at));
        docs.push(json!({
            "taskId": r.id,
            "shortId": short_id(&r.id),
            "contextId": r.context_id,
            "state": r.state.as_str_name(),
            "refinesArtifactId": r.refines_artifact_id,
            "generation": r.generation,
            "createdAt": ts(r.created_at),
            "updatedAt": ts(r.updated_at),
            "task": r.task,
        }));
    }
    let doc = json!({"contextId": c.id, "agent": c.agent, "tasks": docs});
    print(g, &doc, &t)
}

/// The versions of a context grouped by artifact name, in the order the
/// names first appeared; each list oldest first.
fn by_name(versions: Vec<ArtifactVersion>) -> Vec<(String, Vec<ArtifactVersion>)> {
    let mut out: Vec<(String, Vec<ArtifactVersion>)> = Vec::new();
    for v in versions {
        match out.iter_mut().find(|(n, _)| *n == v.artifact_name) {
            Some((_, list)) => list.push(v),
            None => out.push((v.artifact_name.clone(), vec![v])),
        }
    }
    out
}

/// The 1-based number of a version among its artifact's versions.
fn number(list: &[ArtifactVersion], artifact_id: &str) -> Option<usize> {
    list.iter()
        .position(|v| v.artifact_id == artifact_id)
        .map(|i| i + 1)
}

async fn artifacts(
    g: &Globals,
    ledger: &Ledger,
    typed: &str,
    name: Option<&str>,
) -> Result<(), CliError> {
    let c = context_or_err(ledger, typed).await?;
    let versions = ledger.store().versions(&c.id).await.map_err(err)?;
    let mut groups = by_name(versions);
    if let Some(n) = name {
        groups.retain(|(g, _)| g == n);
        if groups.is_empty() {
            return Err(CliError::usage(format!(
                "the context {} has no artifact named {n:?}",
                c.id
            ))
            .with_hint(format!(
                "list its artifacts with `a2a ledger artifacts {}`",
                short_id(&c.id)
            )));
        }
    }
    let mut t = Text::new();
    t.field("Context ID", &c.id);
    t.field("Artifacts", groups.len().to_string());
    let mut docs = Vec::new();
    for (name, list) in &groups {
        let accepted = list.iter().find(|v| v.accepted_by_user);
        t.blank();
        t.field("Artifact", if name.is_empty() { "(unnamed)" } else { name });
        t.field("Versions", list.len().to_string());
        t.field(
            "Accepted Version",
            match accepted {
                Some(v) => format!(
                    "{} ({})",
                    number(list, &v.artifact_id).unwrap_or_default(),
                    v.artifact_id
                ),
                None => "none".to_owned(),
            },
        );
        let mut vdocs = Vec::new();
        for (i, v) in list.iter().enumerate() {
            t.blank();
            t.field("Version", (i + 1).to_string());
            t.field("Artifact ID", &v.artifact_id);
            t.field("Short ID", short_id(&v.artifact_id));
            t.field("Task ID", &v.task_id);
            if let Some(p) = &v.previous_artifact_id {
                t.field(
                    "Refines",
                    match number(list, p) {
                        Some(n) => format!("version {n} ({p})"),
                        None => p.clone(),
                    },
                );
            }
            t.field("Accepted", if v.accepted_by_user { "yes" } else { "no" });
            t.field("Created", ts(v.created_at));
            vdocs.push(json!({
                "version": i + 1,
                "artifactId": v.artifact_id,
                "shortId": short_id(&v.artifact_id),
                "taskId": v.task_id,
                "previousArtifactId": v.previous_artifact_id,
                "accepted": v.accepted_by_user,
                "createdAt": ts(v.created_at),
                "artifact": v.artifact,
            }));
        }
        docs.push(json!({
            "name": name,
            "acceptedArtifactId": accepted.map(|v| v.artifact_id.as_str()),
            "versions": vdocs,
        }));
    }
    let doc = json!({"contextId": c.id, "agent": c.agent, "artifacts": docs});
    print(g, &doc, &t)
}

/// The version an `accept` names: NAME and a number in a context, or an
/// artifact id (whole or short) anywhere in the ledger.
async fn accepted_id(ledger: &Ledger, a: &AcceptArgs) -> Result<String, CliError> {
    let typed = a.artifact.trim();
    if let Some(n) = a.version {
        let c = context_or_err(ledger, &a.context).await?;
        let list = ledger.versions(&c.id, typed).await.map_err(err)?;
        if list.is_empty() {
            return Err(CliError::usage(format!(
                "the context {} has no artifact named {typed:?}",
                c.id
            ))
            .with_hint(format!(
                "list its artifacts with `a2a ledger artifacts {}`",
                short_id(&c.id)
            )));
        }
        return list
            .get(n.wrapping_sub(1))
            .map(|v| v.artifact_id.clone())
            .ok_or_else(|| {
                CliError::usage(format!(
                    "{typed} has {} version(s) in the context {}: no version {n}",
                    list.len(),
                    c.id
                ))
            });
    }
    let mut all = Vec::new();
    for c in ledger.contexts().await.map_err(err)? {
        all.extend(ledger.store().versions(&c.id).await.map_err(err)?);
    }
    let found = super::pick(
        "artifact version",
        typed,
        all.iter().map(|v| v.artifact_id.as_str()),
    )?;
    match found {
        Some(id) => Ok(id.to_owned()),
        None if all.iter().any(|v| v.artifact_name == typed) => Err(CliError::usage(format!(
            "{typed} is an artifact name: give the version number too"
        ))
        .with_hint(format!(
            "list the versions with `a2a ledger artifacts --name {}`",
            render::shell_quote(typed)
        ))),
        None => Err(
            CliError::usage(format!("the ledger has no artifact version {typed}"))
                .with_hint("list the recorded versions with `a2a ledger artifacts`"),
        ),
    }
}

async fn accept(g: &Globals, ledger: &Ledger, a: AcceptArgs) -> Result<(), CliError> {
    let id = accepted_id(ledger, &a).await?;
    let v = ledger.accept(&id).await.map_err(err)?;
    let list = ledger
        .versions(&v.context_id, &v.artifact_name)
        .await
        .map_err(err)?;
    let n = number(&list, &v.artifact_id).unwrap_or_default();
    let mut t = Text::new();
    t.field("Accepted", &v.artifact_id);
    t.field("Artifact", &v.artifact_name);
    t.field("Version", format!("{n} of {}", list.len()));
    t.field("Task ID", &v.task_id);
    t.field("Context ID", &v.context_id);
    let doc = json!({
        "artifactId": v.artifact_id,
        "shortId": short_id(&v.artifact_id),
        "name": v.artifact_name,
        "version": n,
        "versions": list.len(),
        "taskId": v.task_id,
        "contextId": v.context_id,
        "accepted": true,
    });
    print(g, &doc, &t)
}
