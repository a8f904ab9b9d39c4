//! What the registry reads in an agent card: validation against the A2A 1.0
//! card (a 0.x card is recognised and reported as such), the facts that
//! search, filters and routing use, the entry's URN, and the signature
//! check (a place for the verifier).
//!
//! Cards are read as JSON values rather than only as
//! [`agentwire_types::AgentCard`], so that a 0.x card (top-level `url`,
//! `preferredTransport`) can be listed and searched too, flagged as such.

use agentwire_types::AgentCard;
use serde_json::Value;

/// The facts of a card the index uses (both card versions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CardFacts {
    /// The agent's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its version.
    pub version: String,
    /// The A2A protocol versions its interfaces speak (`1.0`; `0.3.0` for a
    /// 0.x card).
    pub protocol_versions: Vec<String>,
    /// `1.x` for a 1.0 card, `0.x` for an older one.
    pub card_version: CardVersion,
    /// Bindings offered (`JSONRPC`, `HTTP+JSON`, `GRPC`).
    pub bindings: Vec<String>,
    /// Whether it streams.
    pub streaming: bool,
    /// Whether it sends push notifications.
    pub push_notifications: bool,
    /// Media types accepted (defaults and skills').
    pub input_modes: Vec<String>,
    /// Media types produced (defaults and skills').
    pub output_modes: Vec<String>,
    /// Its skills.
    pub skills: Vec<SkillFacts>,
    /// The first interface's URL (or a 0.x card's `url`).
    pub endpoint: Option<String>,
    /// The provider's URL, if declared.
    pub provider_url: Option<String>,
    /// Whether the card carries signatures.
    pub signed: bool,
}

/// Which generation of the A2A card format a card is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CardVersion {
    /// A2A 1.x (`supportedInterfaces`).
    #[default]
    V1,
    /// A2A 0.x (top-level `url`).
    V0,
}

impl CardVersion {
    /// `1.x` or `0.x`.
    pub fn as_str(self) -> &'static str {
        match self {
            CardVersion::V1 => "1.x",
            CardVersion::V0 => "0.x",
        }
    }
}

/// One skill of a card.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkillFacts {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its example requests.
    pub examples: Vec<String>,
    /// Media types it accepts (the card's defaults when it names none).
    pub input_modes: Vec<String>,
    /// Media types it produces (the card's defaults when it names none).
    pub output_modes: Vec<String>,
}

/// A card that cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct CardProblems(pub Vec<String>);

fn str_at<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| v.get(*k)).and_then(Value::as_str)
}

fn strings_at(v: &Value, keys: &[&str]) -> Vec<String> {
    keys.iter()
        .find_map(|k| v.get(*k))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn push_unique(list: &mut Vec<String>, items: impl IntoIterator<Item = String>) {
    for i in items {
        if !list.iter().any(|x| x.eq_ignore_ascii_case(&i)) {
            list.push(i);
        }
    }
}

/// Reads and validates a card. Returns the facts and warnings (what is
/// wrong but not fatal); a card that cannot be used at all (not an object,
/// no name, a 1.0 card missing required fields) is refused with every
/// problem found.
pub fn read_card(card: &Value) -> Result<(CardFacts, Vec<String>), CardProblems> {
    let Some(obj) = card.as_object() else {
        return Err(CardProblems(vec![
            "the agent card is not a JSON object".into(),
        ]));
    };
    let has_interfaces = ["supportedInterfaces", "supported_interfaces"]
        .iter()
        .filter_map(|k| obj.get(*k))
        .any(|v| v.as_array().is_some_and(|a| !a.is_empty()));
    let v0 = !has_interfaces && obj.get("url").and_then(Value::as_str).is_some();
    let mut warnings = Vec::new();
    let mut facts = CardFacts {
        name: str_at(card, &["name"])
            .unwrap_or_default()
            .trim()
            .to_owned(),
        description: str_at(card, &["description"])
            .unwrap_or_default()
            .to_owned(),
        version: str_at(card, &["version"]).unwrap_or_default().to_owned(),
        card_version: if v0 { CardVersion::V0 } else { CardVersion::V1 },
        ..Default::default()
    };
    if v0 {
        let version = str_at(card, &["protocolVersion", "protocol_version"]).unwrap_or("0.x");
        warnings.push(format!(
            "this is an A2A {version} card (a top-level \"url\", no \"supportedInterfaces\"): \
             it is listed as such, but A2A 1.0 clients cannot call it and routing leaves it out"
        ));
        facts.protocol_versions.push(version.to_owned());
        facts.endpoint = str_at(card, &["url"]).map(str::to_owned);
        let preferred = str_at(card, &["preferredTransport"]).unwrap_or("JSONRPC");
        facts.bindings.push(preferred.to_owned());
        for i in card
            .get("additionalInterfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(t) = str_at(i, &["transport"]) {
                push_unique(&mut facts.bindings, [t.to_owned()]);
            }
        }
        if facts.name.is_empty() {
            return Err(CardProblems(vec!["name is required".into()]));
        }
    } else {
        let parsed: AgentCard = serde_json::from_value(card.clone())
            .map_err(|e| CardProblems(vec![format!("not an A2A 1.0 agent card: {e}")]))?;
        let problems = validate_v1(&parsed);
        if !problems.is_empty() {
            return Err(CardProblems(problems));
        }
        for i in &parsed.supported_interfaces {
            push_unique(&mut facts.bindings, [i.protocol_binding.clone()]);
            push_unique(&mut facts.protocol_versions, [i.protocol_version.clone()]);
        }
        facts.endpoint = parsed.supported_interfaces.first().map(|i| i.url.clone());
        if !facts
            .protocol_versions
            .iter()
            .any(|v| v.split('.').next() == Some("1"))
        {
            warnings.push(format!(
                "no interface speaks A2A 1.x (protocol versions: {})",
                facts.protocol_versions.join(", ")
            ));
        }
    }
    let caps = card.get("capabilities");
    let flag = |k: &[&str]| {
        caps.and_then(|c| k.iter().find_map(|k| c.get(*k)))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    facts.streaming = flag(&["streaming"]);
    facts.push_notifications = flag(&["pushNotifications", "push_notifications"]);
    facts.provider_url = card
        .get("provider")
        .and_then(|p| str_at(p, &["url"]))
        .map(str::to_owned);
    facts.signed = card
        .get("signatures")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let default_in = strings_at(card, &["defaultInputModes", "default_input_modes"]);
    let default_out = strings_at(card, &["defaultOutputModes", "default_output_modes"]);
    push_unique(&mut facts.input_modes, default_in.clone());
    push_unique(&mut facts.output_modes, default_out.clone());
    for s in card
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut skill = SkillFacts {
            id: str_at(s, &["id"]).unwrap_or_default().to_owned(),
            name: str_at(s, &["name"]).unwrap_or_default().to_owned(),
            description: str_at(s, &["description"]).unwrap_or_default().to_owned(),
            tags: strings_at(s, &["tags"]),
            examples: strings_at(s, &["examples"]),
            input_modes: strings_at(s, &["inputModes", "input_modes"]),
            output_modes: strings_at(s, &["outputModes", "output_modes"]),
        };
        if skill.id.is_empty() {
            warnings.push(format!(
                "a skill without an id ({:?}) is left out",
                skill.name
            ));
            continue;
        }
        if skill.input_modes.is_empty() {
            skill.input_modes.clone_from(&default_in);
        }
        if skill.output_modes.is_empty() {
            skill.output_modes.clone_from(&default_out);
        }
        push_unique(&mut facts.input_modes, skill.input_modes.clone());
        push_unique(&mut facts.output_modes, skill.output_modes.clone());
        if skill.examples.is_empty() {
            warnings.push(format!(
                "skill {:?} has no examples: routing can only use its name, description and tags",
                skill.id
            ));
        }
        facts.skills.push(skill);
    }
    if facts.skills.is_empty() {
        warnings.push("the card declares no skills: it can be searched but never routed to".into());
    }
    Ok((facts, warnings))
}

/// What is wrong with an A2A 1.0 card (the client library's check, the
/// same one `a2a card get --validate` runs).
pub fn validate_v1(card: &AgentCard) -> Vec<String> {
    agentwire_client::card::validate_card(card)
}

/// The syntax of an entry identifier (the catalog schema's pattern,
/// `urn:air:<publisher>:<namespace...>:<agent-name>`), with the publisher a
/// domain name.
pub fn check_identifier(id: &str) -> Result<(), String> {
    let Some(rest) = id.strip_prefix("urn:air:") else {
        return Err(format!(
            "identifier {id:?} must be a URN of the form urn:air:<publisher>:<namespace>:<agent-name>"
        ));
    };
    let mut segments = rest.split(':');
    let publisher = segments.next().unwrap_or_default();
    let others: Vec<&str> = segments.collect();
    let publisher_ok = !publisher.is_empty()
        && publisher
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    let others_ok = !others.is_empty()
        && others.iter().all(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        });
    if !publisher_ok || !others_ok {
        return Err(format!(
            "identifier {id:?} does not match urn:air:<publisher>:<namespace>:<agent-name> \
             (letters, digits, '.', '-' and '_' only)"
        ));
    }
    if !publisher.contains('.') {
        return Err(format!(
            "the publisher {publisher:?} of {id:?} must be a domain name (for local agents use \
             agent.localhost)"
        ));
    }
    Ok(())
}

/// The publisher segment of an identifier.
pub fn publisher_of(id: &str) -> &str {
    id.strip_prefix("urn:air:")
        .and_then(|r| r.split(':').next())
        .unwrap_or_default()
}

/// A URN segment from a name: lower case, words joined by `-`.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_owned();
    if out.is_empty() { "agent".into() } else { out }
}

/// The domain an entry is anchored to, from a URL: its host, or
/// `agent.localhost` for loopback addresses, IP addresses and `localhost`
/// (not domains anyone can own, per the URN naming guide).
pub fn domain_of(url: &str) -> String {
    let host = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        .unwrap_or_default();
    let is_ip = host.parse::<std::net::IpAddr>().is_ok()
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok();
    if host.is_empty() || is_ip || host == "localhost" || !host.contains('.') {
        "agent.localhost".into()
    } else {
        host
    }
}

/// The identifier given to a card published without one:
/// `urn:air:<domain>:agent:<name>`, the domain taken from the card's URL,
/// provider or first interface.
pub fn derive_identifier(facts: &CardFacts, card_url: Option<&str>) -> String {
    let source = card_url
        .map(str::to_owned)
        .or_else(|| facts.provider_url.clone())
        .or_else(|| facts.endpoint.clone())
        .unwrap_or_default();
    format!("urn:air:{}:agent:{}", domain_of(&source), slug(&facts.name))
}

/// What the signature check says about a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureStatus {
    /// The card carries no signature.
    Unsigned,
    /// The card is signed, and no verifier is configured to check it.
    NotVerified,
    /// A verifier checked the signature.
    Verified {
        /// Who signed it (key id, issuer).
        signer: String,
    },
    /// A verifier rejected the signature.
    Invalid {
        /// Why.
        reason: String,
    },
}

impl SignatureStatus {
    /// The text shown in the entry's metadata (`signature`).
    pub fn describe(&self) -> String {
        match self {
            SignatureStatus::Unsigned => "unsigned".into(),
            SignatureStatus::NotVerified => "not verified (no verifier)".into(),
            SignatureStatus::Verified { signer } => format!("verified ({signer})"),
            SignatureStatus::Invalid { reason } => format!("invalid: {reason}"),
        }
    }
}

/// Checks the signatures of agent cards (A2A specification 8.4). The
/// registry starts without one ([`NoVerifier`]): signed cards are recorded
/// as "not verified (no verifier)". [`JwsVerifier`] checks them with the
/// keys the registry trusts.
pub trait SignatureVerifier: Send + Sync + 'static {
    /// Checks `card` (its `signatures` member).
    fn verify(&self, card: &Value) -> SignatureStatus;
}

/// No verifier: signed cards are not verified.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoVerifier;

impl SignatureVerifier for NoVerifier {
    fn verify(&self, card: &Value) -> SignatureStatus {
        let signed = card
            .get("signatures")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if signed {
            SignatureStatus::NotVerified
        } else {
            SignatureStatus::Unsigned
        }
    }
}

/// Verifies card signatures (JWS over the card's JCS form, A2A 8.4.3)
/// with a set of trusted public keys: the publishers' keys the registry
/// operator accepts (PEM files, JWKS documents).
///
/// ```
/// use std::sync::Arc;
/// use agentwire_registry::card::JwsVerifier;
/// use agentwire_types::jws::KeySet;
/// let verifier = Arc::new(JwsVerifier::new(KeySet::new()));
/// # let _ = verifier;
/// ```
#[derive(Debug, Clone, Default)]
pub struct JwsVerifier {
    keys: agentwire_types::jws::KeySet,
}

impl JwsVerifier {
    /// A verifier trusting these keys.
    pub fn new(keys: agentwire_types::jws::KeySet) -> Self {
        Self { keys }
    }

    /// A verifier trusting the keys of these PEM files (public keys, or
    /// private keys whose public part is taken).
    pub fn from_pem_files<P: AsRef<std::path::Path>>(
        paths: impl IntoIterator<Item = P>,
    ) -> Result<Self, agentwire_types::jws::JwsError> {
        let mut keys = agentwire_types::jws::KeySet::new();
        for p in paths {
            keys.push(agentwire_types::jws::VerifyingKey::from_pem_file(p)?);
        }
        Ok(Self { keys })
    }

    /// The trusted keys.
    pub fn keys(&self) -> &agentwire_types::jws::KeySet {
        &self.keys
    }
}

impl SignatureVerifier for JwsVerifier {
    fn verify(&self, card: &Value) -> SignatureStatus {
        use agentwire_types::jws::{CardSignatureStatus, verify_card};
        match verify_card(card, &self.keys) {
            CardSignatureStatus::Absent => SignatureStatus::Unsigned,
            CardSignatureStatus::Verified { kid, algorithm, .. } => SignatureStatus::Verified {
                signer: format!("{algorithm}, key {kid}"),
            },
            CardSignatureStatus::Unverified { reason } => SignatureStatus::Invalid { reason },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1() -> Value {
        json!({
            "name": "Dependency Compatibility Agent", "description": "d", "version": "1.0.0",
            "supportedInterfaces": [{"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC",
                                     "protocolVersion": "1.0"}],
            "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["application/json"],
            "skills": [{"id": "check", "name": "Check", "description": "d", "tags": ["npm"],
                        "examples": ["check my lockfile"], "inputModes": ["application/json"]}]
        })
    }

    #[test]
    fn a_v1_card_gives_its_facts() {
        let (f, w) = read_card(&v1()).unwrap();
        assert_eq!(f.card_version, CardVersion::V1);
        assert_eq!(f.bindings, ["JSONRPC"]);
        assert_eq!(f.protocol_versions, ["1.0"]);
        assert!(f.streaming && !f.push_notifications);
        assert_eq!(f.skills[0].output_modes, ["application/json"]);
        assert_eq!(f.input_modes, ["text/plain", "application/json"]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            derive_identifier(&f, Some("http://127.0.0.1:9/.well-known/agent-card.json")),
            "urn:air:agent.localhost:agent:dependency-compatibility-agent"
        );
        assert_eq!(
            derive_identifier(&f, Some("https://agents.acme.com/card.json")),
            "urn:air:agents.acme.com:agent:dependency-compatibility-agent"
        );
    }

    #[test]
    fn a_v0_card_is_reported_as_such() {
        let card = json!({"name": "Old", "description": "d", "version": "1",
            "protocolVersion": "0.3.0", "url": "http://h:1/a2a", "preferredTransport": "JSONRPC",
            "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": []});
        let (f, w) = read_card(&card).unwrap();
        assert_eq!(f.card_version, CardVersion::V0);
        assert_eq!(f.protocol_versions, ["0.3.0"]);
        assert!(w[0].contains("A2A 0.3.0 card"), "{w:?}");
    }

    #[test]
    fn invalid_cards_are_refused_with_every_problem() {
        let mut c = v1();
        c["version"] = json!("");
        c["skills"][0]["tags"] = json!([]);
        let e = read_card(&c).unwrap_err();
        assert_eq!(e.0.len(), 2, "{e}");
        assert!(read_card(&json!([1])).is_err());
    }

    #[test]
    fn identifiers() {
        assert!(check_identifier("urn:air:acme.com:agent:assistant").is_ok());
        assert!(check_identifier("urn:air:acme.com:finance:trading:bot_1").is_ok());
        assert!(check_identifier("urn:air:localhost:agent:x").is_err());
        assert!(check_identifier("urn:air:acme.com").is_err());
        assert!(check_identifier("https://acme.com/x").is_err());
        assert!(check_identifier("urn:air:acme.com:a b").is_err());
        assert_eq!(publisher_of("urn:air:acme.com:agent:x"), "acme.com");
        assert_eq!(slug("  Währung & FX Agent! "), "w-hrung-fx-agent");
    }

    #[test]
    fn signatures_are_not_verified_without_a_verifier() {
        assert_eq!(NoVerifier.verify(&v1()), SignatureStatus::Unsigned);
        let mut c = v1();
        c["signatures"] = json!([{"protected": "e30", "signature": "c2ln"}]);
        assert_eq!(
            NoVerifier.verify(&c).describe(),
            "not verified (no verifier)"
        );
    }

    #[test]
    fn the_jws_verifier_checks_signatures_with_its_keys() {
        use agentwire_types::jws::{KeySet, SigningKey, sign_card};
        let key =
            SigningKey::from_pkcs8_der(&SigningKey::generate_ed25519_pkcs8().unwrap()).unwrap();
        let mut card: AgentCard = serde_json::from_value(v1()).unwrap();
        sign_card(&mut card, std::slice::from_ref(&key), None).unwrap();
        let signed = serde_json::to_value(&card).unwrap();
        let mut keys = KeySet::new();
        keys.push(key.verifying_key().clone());
        let verifier = JwsVerifier::new(keys);
        assert_eq!(
            verifier.verify(&signed).describe(),
            format!("verified (EdDSA, key {})", key.kid())
        );
        let mut changed = signed.clone();
        changed["name"] = "Other".into();
        assert!(
            verifier
                .verify(&changed)
                .describe()
                .starts_with("invalid: "),
            "{:?}",
            verifier.verify(&changed)
        );
        assert_eq!(verifier.verify(&v1()), SignatureStatus::Unsigned);
        let stranger = JwsVerifier::new(KeySet::new());
        assert!(matches!(
            stranger.verify(&signed),
            SignatureStatus::Invalid { .. }
        ));
    }
}
