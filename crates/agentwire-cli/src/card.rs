//! `a2a card get`: resolve, show and validate an Agent Card (CLI SPEC 10.1).

use agentwire_client::card::validate_card;
use agentwire_client::{Binding, select_interfaces};
use agentwire_types::{AgentCard, ErrorKind};
use clap::{Args, Subcommand};

use crate::agent::{Agent, Settings};
use crate::error::{CliError, a2a_error_name, code, exit};
use crate::render::{self, Text};
use crate::{Globals, OutputFormat};

#[derive(Subcommand, Debug)]
pub enum CardCommand {
    /// Fetch and show the agent card (identity, capabilities, interfaces, security, skills).
    Get(GetArgs),
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// Check the card against the A2A schema's required fields and rules.
    #[arg(long)]
    pub validate: bool,
    /// Fetch the authenticated extended card (needs credentials the public card declares).
    #[arg(long)]
    pub extended: bool,
}

pub async fn run(g: &Globals, cmd: CardCommand) -> Result<u8, CliError> {
    let CardCommand::Get(args) = cmd;
    let settings = Settings::from_globals(g)?;
    let http = settings.http_client()?;
    let mut resolved = settings.resolve_card(&http).await?;
    if args.extended {
        // Refused below when the card does not declare one: make sure of it.
        resolved = settings
            .confirm_card(&http, resolved, AgentCard::supports_extended_card)
            .await?;
    }
    let mut card = resolved.card;
    let mut extended = false;
    if args.extended {
        card = fetch_extended(settings.clone(), http, card).await?;
        extended = true;
    }
    let problems = if args.validate {
        validate_card(&card)
    } else {
        Vec::new()
    };
    if args.validate && !problems.is_empty() {
        let mut e = CliError::new(
            code::CARD_INVALID,
            exit::FAILURE,
            format!("the agent card is invalid: {}", problems.join("; ")),
        );
        e.hint = Some("the agent's card must be fixed by its publisher".into());
        if g.output == OutputFormat::Text {
            let mut t = Text::new();
            t.field("Valid", "no");
            for p in &problems {
                t.field("Problem", p);
            }
            t.print();
        }
        return Err(e);
    }
    let selected = selected_interface(&card, &settings.bindings);
    match g.output {
        OutputFormat::Json => render::print_json(&card)?,
        OutputFormat::Text => {
            let mut t = Text::new();
            t.field("Source", &resolved.location);
            if extended {
                t.field("Card", "extended");
            }
            match &selected {
                Some(s) => t.field("Selected Interface", s),
                None => t.field("Selected Interface", "(none usable: no A2A 1.x interface)"),
            };
            if args.validate {
                t.field("Valid", "yes");
            }
            render::card(&mut t, &card, g.verbose);
            t.print();
        }
    }
    Ok(exit::OK)
}

/// The interface the tool would use (CLI SPEC 10.1: the card selects the
/// transport).
fn selected_interface(card: &AgentCard, prefer: &[Binding]) -> Option<String> {
    let picked = if prefer.is_empty() {
        select_interfaces(card, &Binding::ALL, false).ok()
    } else {
        select_interfaces(card, prefer, true)
            .ok()
            .or_else(|| select_interfaces(card, &Binding::ALL, false).ok())
    }?;
    let (b, i) = picked.into_iter().next()?;
    Some(format!("{b} {}", i.url))
}

async fn fetch_extended(
    mut settings: Settings,
    http: reqwest::Client,
    card: AgentCard,
) -> Result<AgentCard, CliError> {
    if !card.supports_extended_card() {
        return Err(CliError::new(
            &a2a_error_name(ErrorKind::UnsupportedOperation),
            exit::FAILURE,
            "the agent card does not declare capabilities.extendedAgentCard",
        )
        .with_hint(format!(
            "this agent has no extended card; use `{}` without --extended",
            crate::error::paste("card get", "")
        )));
    }
    // Only credentials a scheme of the public card accepts are presented
    // (CLI SPEC 12.4).
    let accepted = agentwire_client::auth::accepted_by(&card, &settings.credentials);
    if accepted != settings.credentials {
        eprintln!(
            "warning: not sending credentials the agent card declares no scheme for (see its security schemes with `{}`)",
            crate::error::paste("card get", "")
        );
    }
    settings.credentials = accepted;
    if settings.credentials.is_empty() && !settings.credentials_given() {
        let hint = crate::agent::auth_hint(&card).unwrap_or_else(|| {
            "the card declares no security scheme, so no credential can be presented for its extended card".into()
        });
        return Err(CliError::new(
            code::CREDENTIALS_MISSING,
            exit::AUTH,
            "the extended agent card needs credentials",
        )
        .with_hint(hint));
    }
    let reference = settings.reference()?.to_owned();
    let resolver = settings.resolver(http.clone());
    let agent = Agent::with_card(settings, http, card)?;
    resolver
        .fetch_extended(
            &reference,
            &agent.client,
            &agentwire_client::CallOptions::new(),
        )
        .await
        .map_err(|e| agent.err(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_card_has_problems() {
        let p = validate_card(&AgentCard::default());
        assert!(p.iter().any(|s| s.contains("name")), "{p:?}");
        assert!(p.iter().any(|s| s.contains("supportedInterfaces")), "{p:?}");
        let good = agentwire_agents::echo::card().with_interface("http://127.0.0.1:1/", "JSONRPC");
        assert!(
            validate_card(&good).is_empty(),
            "{:?}",
            validate_card(&good)
        );
    }
}
