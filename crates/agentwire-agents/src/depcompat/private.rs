//! Packages of a private registry, simulated locally, to show in-task
//! authorization (spec 7.6): a question about a package of the `@acme-internal`
//! scope needs a read token for the registry `npm.acme.internal`, so the
//! task goes to `TASK_STATE_AUTH_REQUIRED` saying so
//! ([`agentwire_server::TaskUpdater::request_auth`]); the reply in the same
//! task carries the token ([`agentwire_server::RequestContext::credential`])
//! and the task goes on with the registry's entry.
//!
//! Nothing leaves the machine: the registry is a table here, and the token
//! it accepts is [`DEMO_TOKEN`] (documented in docs/depcompat.md), so the
//! flow can be tried end to end without a real registry.

use agentwire_server::{A2aResult, AuthRequest, RequestContext, TaskUpdater};
use agentwire_types::{Artifact, Message, Part, Role, TaskState};
use serde_json::json;

use super::AWAITING_KEY;
use super::input::Inputs;
use super::npm::NodeTarget;
use super::semver::{Range, Version};

/// The scope of the private packages.
pub const SCOPE: &str = "@acme-internal/";
/// The private registry (simulated).
pub const REGISTRY: &str = "https://npm.acme.internal/";
/// The read token the simulated registry accepts.
pub const DEMO_TOKEN: &str = "acme-read-token";
/// The scope a real token for the registry would need.
pub const READ_SCOPE: &str = "read:packages";
/// The name of the artifact holding the registry entries read.
pub const ARTIFACT: &str = "private-packages.json";
/// What the task waits for (`AWAITING_KEY` on the status message).
pub const AWAITING: &str = "credential";

/// One published version: its `engines.node` range.
struct Published {
    version: &'static str,
    engines_node: &'static str,
}

/// The registry's packages.
const PACKAGES: &[(&str, &[Published])] = &[
    (
        "@acme-internal/widgets",
        &[
            Published {
                version: "1.4.2",
                engines_node: ">=16",
            },
            Published {
                version: "2.0.0",
                engines_node: ">=20",
            },
        ],
    ),
    (
        "@acme-internal/billing-core",
        &[Published {
            version: "3.1.0",
            engines_node: "^22.0.0 || >=24",
        }],
    ),
];

/// The `@acme-internal/...` packages named in the text, in order, without repeats.
pub fn mentioned(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, _) in text.match_indices(SCOPE) {
        let rest = &text[i + SCOPE.len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "-._".contains(*c))
            .collect();
        let name = name.trim_end_matches(['.', '_']);
        if !name.is_empty() {
            let full = format!("{SCOPE}{name}");
            if !out.contains(&full) {
                out.push(full);
            }
        }
    }
    out
}

fn request(names: &[String]) -> AuthRequest {
    AuthRequest::bearer(
        REGISTRY,
        format!(
            "{} {} in the private registry {REGISTRY}: I need a read token for it ({READ_SCOPE}). \
             Reply in this task with the token (as the message's only word, or as data \
             {{\"credential\": \"...\"}}), or say \"cancel\".",
            names.join(", "),
            if names.len() == 1 { "is" } else { "are" },
        ),
    )
    .with_scopes([READ_SCOPE])
}

/// Starts a task that needs the registry: asks for its token.
pub async fn ask(task: &TaskUpdater, names: &[String]) -> A2aResult<()> {
    task.start_work().await?;
    let message = task
        .auth_request_message(&request(names))
        .with_metadata(AWAITING_KEY, json!(AWAITING));
    task.set_status(TaskState::AuthRequired, Some(message))
        .await
}

/// The user messages of the task before this one.
fn question(ctx: &RequestContext) -> Vec<&Message> {
    ctx.task
        .iter()
        .flat_map(|t| t.history.iter())
        .filter(|m| m.role == Role::User as i32 && m.message_id != ctx.message.message_id)
        .collect()
}

/// Goes on with a task waiting for the registry's token.
pub async fn resume(ctx: &RequestContext, task: &TaskUpdater) -> A2aResult<()> {
    let earlier = question(ctx);
    let text: String = earlier
        .iter()
        .map(|m| m.text())
        .collect::<Vec<_>>()
        .join("\n");
    let names = mentioned(&text);
    let reply = ctx.text();
    if ["cancel", "no", "stop"].contains(&reply.trim().to_ascii_lowercase().as_str()) {
        return task
            .reject(format!(
                "No token for {REGISTRY}: {} not checked.",
                names.join(", ")
            ))
            .await;
    }
    let Some(token) = ctx.credential() else {
        let mut r = request(&names);
        r.description = format!("I still need the read token. {}", r.description);
        let message = task
            .auth_request_message(&r)
            .with_metadata(AWAITING_KEY, json!(AWAITING));
        return task
            .set_status(TaskState::AuthRequired, Some(message))
            .await;
    };
    if token != DEMO_TOKEN {
        // The registry refused it: ask again (spec 7.6.1: the client may
        // correct its answer while the task waits).
        let mut r = request(&names);
        r.description = format!(
            "The registry refused that token (HTTP 401). {}",
            r.description
        );
        let message = task
            .auth_request_message(&r)
            .with_metadata(AWAITING_KEY, json!(AWAITING));
        return task
            .set_status(TaskState::AuthRequired, Some(message))
            .await;
    }
    task.progress(format!("Reading {} from {REGISTRY}", names.join(", ")))
        .await?;
    let inputs = Inputs::gather(earlier.iter().copied());
    let node = inputs.node.as_deref().and_then(NodeTarget::parse);
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    for name in &names {
        let Some((_, versions)) = PACKAGES.iter().find(|(n, _)| n == name) else {
            lines.push(format!("{name}: not in {REGISTRY}"));
            entries.push(json!({"name": name, "found": false}));
            continue;
        };
        let wanted = inputs.packages.get(name).map(|t| t.version.clone());
        let published = match &wanted {
            Some(v) => versions.iter().find(|p| p.version == v),
            None => versions.last(),
        };
        let Some(p) = published else {
            let known: Vec<&str> = versions.iter().map(|p| p.version).collect();
            lines.push(format!(
                "{name}: version {} is not published (published: {})",
                wanted.unwrap_or_default(),
                known.join(", ")
            ));
            entries.push(json!({"name": name, "found": true, "published": known}));
            continue;
        };
        let verdict = node.as_ref().map(|n| {
            let v = lowest(n);
            let ok = Range::parse(p.engines_node, false)
                .map(|r| r.satisfies(&v))
                .unwrap_or(false);
            (n.describe(), ok)
        });
        lines.push(match &verdict {
            Some((target, true)) => format!(
                "{name} {}: engines.node \"{}\" allows {target}",
                p.version, p.engines_node
            ),
            Some((target, false)) => format!(
                "{name} {}: engines.node \"{}\" does not allow {target}",
                p.version, p.engines_node
            ),
            None => format!("{name} {}: engines.node \"{}\"", p.version, p.engines_node),
        });
        entries.push(json!({
            "name": name,
            "found": true,
            "version": p.version,
            "enginesNode": p.engines_node,
            "compatible": verdict.as_ref().map(|(_, ok)| *ok),
            "target": node.as_ref().map(NodeTarget::label),
        }));
    }
    task.add_artifact(
        Artifact::new(
            ARTIFACT,
            vec![
                Part::data(json!({"registry": REGISTRY, "packages": entries}))
                    .with_media_type("application/json"),
            ],
        )
        .with_description("The private registry's entries read with the token"),
    )
    .await?;
    task.complete_with(lines.join("\n")).await
}

/// The first version of a target (its line's `.0`).
fn lowest(n: &NodeTarget) -> Version {
    match n {
        NodeTarget::Exact(v) => v.clone(),
        NodeTarget::Line { major, minor } => Version::new(*major, minor.unwrap_or(0), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_private_names() {
        assert_eq!(
            mentioned(
                "Does @acme-internal/widgets 2.0.0 run on Node.js 18? And @acme-internal/widgets."
            ),
            ["@acme-internal/widgets"]
        );
        assert_eq!(
            mentioned("@acme-internal/billing-core@3.1.0 and @acme-internal/widgets"),
            ["@acme-internal/billing-core", "@acme-internal/widgets"]
        );
        assert!(mentioned("express 5 on Node 24").is_empty());
        assert!(mentioned("upgrade @acme/ledger-client to 3.0.0").is_empty());
    }

    #[test]
    fn lowest_of_a_line() {
        let n = NodeTarget::parse("18").unwrap();
        assert_eq!(lowest(&n), Version::new(18, 0, 0));
    }
}
