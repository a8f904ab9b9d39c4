//! `a2a card get`: resolve, show and validate an Agent Card (CLI SPEC 10.1);
//! `a2a card sign`: sign a card (A2A 8.4), e.g. one served as a file.

use agentwire_client::card::{CardVerifier, SignatureReport, validate_card};
use agentwire_client::{Binding, select_interfaces};
use agentwire_types::{AgentCard, ErrorKind};
use clap::{Args, Subcommand, ValueEnum};

use crate::agent::{Agent, Settings};
use crate::error::{CliError, a2a_error_name, code, exit};
use crate::render::{self, Text};
use crate::{Globals, OutputFormat};

#[derive(Subcommand, Debug)]
pub enum CardCommand {
    /// Fetch and show the agent card (identity, capabilities, interfaces, security, skills).
    Get(GetArgs),
    /// Sign the agent card (a file or a URL given with -a) and print it, signed, as JSON.
    Sign(SignArgs),
}

#[derive(Args, Debug)]
pub struct SignArgs {
    /// Sign with this private key (a PEM file: Ed25519 signs with EdDSA, P-256 with ES256, RSA with RS256). Repeatable: one signature per key.
    #[arg(long = "signing-key", value_name = "KEY_FILE", required = true)]
    pub signing_key: Vec<std::path::PathBuf>,
    /// The `jku` of the signatures: the URL of the JWKS publishing the public keys.
    #[arg(long, value_name = "URL")]
    pub jku: Option<String>,
    /// What the signatures sign (see `a2a serve --card-signature-form`).
    #[arg(long, value_enum, default_value = "both", value_name = "FORM")]
    pub card_signature_form: SignatureForm,
}

/// What card signatures sign (`--card-signature-form`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SignatureForm {
    /// The card in RFC 8785 form (the specification's).
    Rfc8785,
    /// The form the official A2A SDKs verify (without null and empty values).
    Sdk,
    /// The RFC 8785 form and, when it differs, the SDK form (two signatures per key).
    Both,
}

impl From<SignatureForm> for agentwire_types::jws::CardSignatureForm {
    fn from(f: SignatureForm) -> Self {
        use agentwire_types::jws::CardSignatureForm as F;
        match f {
            SignatureForm::Rfc8785 => F::Rfc8785,
            SignatureForm::Sdk => F::Sdk,
            SignatureForm::Both => F::Both,
        }
    }
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// Check the card against the A2A schema's required fields and rules.
    #[arg(long)]
    pub validate: bool,
    /// Fetch the authenticated extended card (needs credentials the public card declares).
    #[arg(long)]
    pub extended: bool,
    /// Trust this public key (a PEM file; a private key file gives its public part) to verify the card's signatures. Repeatable.
    #[arg(long = "trust-key", value_name = "FILE")]
    pub trust_key: Vec<std::path::PathBuf>,
    /// Trust the keys of the JWKS at this URL to verify the card's signatures. Repeatable.
    #[arg(long = "trust-jwks", value_name = "URL")]
    pub trust_jwks: Vec<String>,
    /// Fail (exit 1) unless a signature of the card verifies with a trusted key.
    #[arg(long)]
    pub require_signature: bool,
}

pub async fn run(g: &Globals, cmd: CardCommand) -> Result<u8, CliError> {
    let args = match cmd {
        CardCommand::Get(args) => args,
        CardCommand::Sign(args) => return sign(g, args).await,
    };
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
        card = fetch_extended(settings.clone(), http.clone(), card).await?;
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
    let signature = check_signature(&args, &http, &card, &resolved.location).await?;
    let selected = selected_interface(&card, &settings.bindings);
    if args.require_signature && !signature.status.is_verified() {
        // A card that must be signed and is not verified is not a card this
        // tool accepts: A2ACLI_ERR_CARD_INVALID (CLI SPEC Appendix D).
        let mut e = CliError::new(
            code::CARD_INVALID,
            exit::FAILURE,
            format!(
                "--require-signature: the agent card's signature is {}",
                signature.describe()
            ),
        );
        e.hint = Some(
            "give the publisher's public key with --trust-key FILE or its JWKS with --trust-jwks URL"
                .into(),
        );
        return Err(e);
    }
    match g.output {
        OutputFormat::Json => {
            // stdout carries the card unchanged; the outcome goes to stderr.
            eprintln!("signature: {}", signature.describe());
            render::print_json(&card)?
        }
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
            render::card(&mut t, &card, g.verbose, &signature.describe());
            t.print();
        }
    }
    Ok(exit::OK)
}

/// `a2a card sign`: the card with signatures of the keys given (replacing
/// those it had), as JSON on stdout.
async fn sign(g: &Globals, args: SignArgs) -> Result<u8, CliError> {
    let settings = Settings::from_globals(g)?;
    let http = settings.http_client()?;
    let mut card = settings.resolve_card(&http).await?.card;
    let mut signing =
        agentwire_server::CardSigning::default().form(args.card_signature_form.into());
    for f in &args.signing_key {
        let key = agentwire_types::jws::SigningKey::from_pem_file(f).map_err(|e| {
            CliError::usage(format!("--signing-key: {e}"))
                .with_hint("give a PEM private key: Ed25519, P-256 or RSA")
        })?;
        signing = signing.key(key);
    }
    signing
        .sign(&mut card, args.jku.as_deref())
        .map_err(|e| CliError::internal(format!("the card cannot be signed: {e}")))?;
    render::print_json(&card)?;
    Ok(exit::OK)
}

/// Checks the card's signatures (spec 8.4.3) with the keys given, or,
/// without any, the agent's own JWKS when the card came over HTTPS from its
/// origin.
async fn check_signature(
    args: &GetArgs,
    http: &reqwest::Client,
    card: &AgentCard,
    location: &str,
) -> Result<SignatureReport, CliError> {
    let mut verifier = CardVerifier::new().with_http_client(http.clone());
    for f in &args.trust_key {
        verifier = verifier.trust_key_file(f).map_err(|e| {
            CliError::usage(format!("--trust-key: {e}"))
                .with_hint("give a PEM public key (or private key) file: Ed25519, P-256 or RSA")
        })?;
    }
    for url in &args.trust_jwks {
        verifier = verifier.trust_jwks_url(url);
    }
    // Keys given: only they are trusted.
    let has_keys = verifier.has_trusted_keys();
    verifier = verifier.follow_jku(!has_keys);
    let url =
        (location.starts_with("http://") || location.starts_with("https://")).then_some(location);
    Ok(verifier.verify(card, url).await)
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
