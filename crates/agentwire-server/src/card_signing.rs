//! Signed agent cards (A2A specification 8.4): the keys that sign the card
//! an agent serves, and the JWKS that publishes their public keys.
//!
//! The handler signs its public card and its extended card when it is
//! built, after everything it sets in them (capabilities, interfaces), so
//! the signatures always cover the card as served. Each key adds one
//! signature; the protected header names the key (`kid`) and, by `jku`, the
//! JWKS served at [`CARD_JWKS_PATH`] on the agent's own origin.
//!
//! Each form of the card that is served is signed as it is served: the
//! 1.0 card, and the card with the 0.3 members added that clients of
//! protocol 0.3 are given (see `compat::v0_3::card`), which carries
//! signatures of its own over it, followed by the 1.0 card's.
//!
//! What the signatures sign is [`CardSignatureForm`]: RFC 8785 of the card
//! as served (the specification's form), the form the official SDKs
//! verify (the same without `null` and empty values), or both (the
//! default: the SDK form is signed too only when it differs).
//!
//! Rotating a key: sign with the new and the old key for a while (two
//! signatures: clients that know either verify the card), or sign with the
//! new one and [`CardSigning::publish`] the old one until the cards signed
//! with it are gone from caches (at least the card's `max-age`); then drop
//! the old key.
//!
//! ```
//! use agentwire_server::{A2aServer, CardSigning};
//! use agentwire_types::jws::SigningKey;
//! # fn demo(card: agentwire_types::AgentCard, agent: impl agentwire_server::AgentExecutor) -> Result<(), Box<dyn std::error::Error>> {
//! let key = SigningKey::from_pem_file("card-key.pem")?;
//! let server = A2aServer::new(card, agent).sign_card(CardSigning::new(key));
//! # Ok(()) }
//! ```

use agentwire_types::AgentCard;
use agentwire_types::jws::{self, KeySet, SigningKey, VerifyingKey};
pub use agentwire_types::jws::{CARD_JWKS_PATH, CardSignatureForm};
use bytes::Bytes;

/// How the agent card is signed.
#[derive(Debug, Clone, Default)]
pub struct CardSigning {
    keys: Vec<SigningKey>,
    published: Vec<VerifyingKey>,
    jku: Option<String>,
    form: CardSignatureForm,
}

impl CardSigning {
    /// Signs with `key`.
    pub fn new(key: SigningKey) -> Self {
        Self::default().key(key)
    }

    /// Signs with this key too (one signature per key).
    pub fn key(mut self, key: SigningKey) -> Self {
        self.keys.push(key);
        self
    }

    /// Publishes this public key in the JWKS without signing with it (the
    /// previous key during a rotation, for the cards it signed that
    /// clients still hold).
    pub fn publish(mut self, key: VerifyingKey) -> Self {
        self.published.push(key);
        self
    }

    /// The `jku` of the signatures: where clients find the JWKS (default:
    /// [`CARD_JWKS_PATH`] on the origin of the card's first HTTP
    /// interface).
    pub fn jku(mut self, url: impl Into<String>) -> Self {
        self.jku = Some(url.into());
        self
    }

    /// What the signatures sign (default [`CardSignatureForm::Both`]).
    pub fn form(mut self, form: CardSignatureForm) -> Self {
        self.form = form;
        self
    }

    /// The form the signatures sign.
    pub fn signature_form(&self) -> CardSignatureForm {
        self.form
    }

    /// The keys that sign.
    pub fn signing_keys(&self) -> &[SigningKey] {
        &self.keys
    }

    /// The JWKS: the signing keys' public keys and the published ones.
    pub fn key_set(&self) -> KeySet {
        let mut set = KeySet::new();
        for k in &self.published {
            set.push(k.clone());
        }
        for k in &self.keys {
            set.push(k.verifying_key().clone());
        }
        set
    }

    /// The JWKS document served at [`CARD_JWKS_PATH`].
    pub fn jwks_json(&self) -> Bytes {
        Bytes::from(self.key_set().to_jwks().to_string())
    }

    /// The `jku` for `card`: the one set, else the JWKS path on the origin
    /// of its first `http(s)` interface.
    pub fn jku_for(&self, card: &AgentCard) -> Option<String> {
        self.jku.clone().or_else(|| {
            card.supported_interfaces.iter().find_map(|i| {
                let u = url::Url::parse(&i.url).ok()?;
                matches!(u.scheme(), "http" | "https")
                    .then(|| format!("{}{CARD_JWKS_PATH}", u.origin().ascii_serialization()))
            })
        })
    }

    /// Signs `card` in the chosen form (replacing the signatures it had).
    pub fn sign(&self, card: &mut AgentCard, jku: Option<&str>) -> Result<(), jws::JwsError> {
        jws::sign_card_as(card, &self.keys, jku, self.form)
    }

    /// The signatures of a card document served as it is (the 0.3 form:
    /// the 1.0 card with the members 0.3 clients read beside its own),
    /// one per key over its RFC 8785 form; none in the SDK form, whose
    /// verifiers read the document as the 1.0 card it contains (the
    /// 1.0 card's signatures, which the document carries after these,
    /// are theirs).
    pub fn sign_document(
        &self,
        doc: &serde_json::Value,
        jku: Option<&str>,
    ) -> Result<Vec<agentwire_types::AgentCardSignature>, jws::JwsError> {
        if self.form == CardSignatureForm::Sdk {
            return Ok(Vec::new());
        }
        jws::sign_payload(&jws::document_signing_payload(doc)?, &self.keys, jku)
    }

    /// The signatures of a document over its RFC 8785 form exactly as it
    /// is, whatever the form chosen: for a card in a shape that no other
    /// signature covers (the 0.3 gRPC card, which its readers take from
    /// its protobuf form, where neither the 1.0 card nor the 0.3 JSON
    /// form fit).
    pub(crate) fn sign_as_is(
        &self,
        doc: &serde_json::Value,
        jku: Option<&str>,
    ) -> Result<Vec<agentwire_types::AgentCardSignature>, jws::JwsError> {
        jws::sign_payload(&jws::document_signing_payload(doc)?, &self.keys, jku)
    }
}
