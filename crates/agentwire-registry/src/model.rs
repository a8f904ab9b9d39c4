//! What the registry keeps for each agent ([`Record`]) and how a record
//! becomes a catalog entry (ARD 4.2).

use agentwire_client::registry::{A2A_CARD_TYPE, CatalogEntry};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::card::{CardFacts, CardVersion, read_card};

/// How the card reaches the registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// By reference: the registry fetches the card from this URL and keeps
    /// it fresh.
    Url(String),
    /// By value: the publisher sent the card.
    Value,
}

/// Whether a registered agent answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Its card was fetched (or given) and it is searchable.
    #[default]
    Active,
    /// Its card could not be fetched several times in a row: left out of
    /// search, routing and the catalog until it answers again.
    Unreachable,
}

impl Status {
    /// `active` or `unreachable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Unreachable => "unreachable",
        }
    }
}

/// The state of the card's refreshes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchState {
    /// The card's `ETag`, for `If-None-Match`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The card's `Last-Modified`, for `If-Modified-Since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// Failed fetches in a row.
    #[serde(default)]
    pub failures: u32,
    /// Active or unreachable.
    #[serde(default)]
    pub status: Status,
    /// When the card was last fetched or confirmed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<String>,
    /// The last failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the card is due for a refresh (Unix milliseconds).
    #[serde(default)]
    pub next_check_ms: i64,
}

/// One registered agent, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The entry's URN.
    pub identifier: String,
    /// The principal that published it (the only one who may change it).
    pub owner: String,
    /// By reference or by value.
    pub source: Source,
    /// The card (as fetched, or as sent).
    pub card: Value,
    /// Sample requests given by the publisher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub representative_queries: Option<Vec<String>>,
    /// Tags given by the publisher.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_tags: Vec<String>,
    /// The publisher's trust manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_manifest: Option<Value>,
    /// When it was first published (RFC 3339).
    pub created_at: String,
    /// When the entry last changed (RFC 3339).
    pub updated_at: String,
    /// What the validation found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The signature check's result.
    pub signature: String,
    /// Refresh state (by-reference entries).
    #[serde(default)]
    pub fetch: FetchState,
    /// The skills' vectors of the router's embedder, kept with the record
    /// so that a restarted registry does not embed every card again. Not
    /// part of the record's JSON: the stores keep them beside it (a column
    /// of their own), and a store that cannot keep them gives `None`.
    #[serde(skip)]
    pub vectors: Option<StoredVectors>,
}

/// The skills' vectors of one record, as stored: computed by the embedder
/// whose [`crate::Embedder::model_id`] is `model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredVectors {
    /// The embedder's model id (and the way skill vectors are made from
    /// it: see `index::VECTOR_SCHEME`).
    pub model: String,
    /// One per embedded skill.
    pub skills: Vec<SkillVector>,
}

/// One skill's vector and what it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillVector {
    /// SHA-256 (hex) of the skill's texts that the vector comes from (its
    /// examples and description): a vector is reused only for the same
    /// texts.
    pub texts: String,
    /// The vector: little-endian `f32`s, base64 in the stored JSON.
    #[serde(with = "f32_base64")]
    pub vector: Vec<f32>,
}

/// `Vec<f32>` as base64 of its little-endian bytes (a quarter of the size
/// of the numbers written in JSON, and exact).
mod f32_base64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD_NO_PAD;

    pub fn serialize<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        s.serialize_str(&B64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = B64.decode(text).map_err(D::Error::custom)?;
        if bytes.len() % 4 != 0 {
            return Err(D::Error::custom("a vector of f32 is a multiple of 4 bytes"));
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// RFC 3339 UTC with `Z`, to the second.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Record {
    /// The card's facts (the card was validated when stored).
    pub fn facts(&self) -> CardFacts {
        read_card(&self.card).map(|(f, _)| f).unwrap_or_default()
    }

    /// The card's URL, for a by-reference entry.
    pub fn url(&self) -> Option<&str> {
        match &self.source {
            Source::Url(u) => Some(u),
            Source::Value => None,
        }
    }

    /// The catalog entry (ARD 4.2) of this record.
    pub fn entry(&self, facts: &CardFacts) -> CatalogEntry {
        let mut tags: Vec<String> = Vec::new();
        for t in facts
            .skills
            .iter()
            .flat_map(|s| s.tags.iter())
            .chain(self.extra_tags.iter())
        {
            if !tags.iter().any(|x| x.eq_ignore_ascii_case(t)) {
                tags.push(t.clone());
            }
        }
        let queries = match &self.representative_queries {
            Some(q) => q.clone(),
            None => {
                // The first example of each skill, then the others: 2 to 5.
                let mut q: Vec<String> = facts
                    .skills
                    .iter()
                    .filter_map(|s| s.examples.first().cloned())
                    .collect();
                for e in facts.skills.iter().flat_map(|s| s.examples.iter().skip(1)) {
                    if q.len() >= 5 {
                        break;
                    }
                    q.push(e.clone());
                }
                q.truncate(5);
                if q.len() < 2 { Vec::new() } else { q }
            }
        };
        let mut metadata = Map::new();
        metadata.insert("publisher".into(), json!(self.owner));
        metadata.insert("status".into(), json!(self.fetch.status.as_str()));
        metadata.insert("cardVersion".into(), json!(facts.card_version.as_str()));
        metadata.insert(
            "protocolVersion".into(),
            json!(facts.protocol_versions.join(",")),
        );
        metadata.insert("bindings".into(), json!(facts.bindings.join(",")));
        metadata.insert("streaming".into(), json!(facts.streaming));
        metadata.insert("pushNotifications".into(), json!(facts.push_notifications));
        metadata.insert("inputModes".into(), json!(facts.input_modes.join(",")));
        metadata.insert("outputModes".into(), json!(facts.output_modes.join(",")));
        metadata.insert("signature".into(), json!(self.signature));
        metadata.insert("createdAt".into(), json!(self.created_at));
        if let Some(t) = &self.fetch.checked_at {
            metadata.insert("checkedAt".into(), json!(t));
        }
        if let Some(e) = &self.fetch.last_error {
            metadata.insert("lastError".into(), json!(e));
        }
        if !self.warnings.is_empty() {
            metadata.insert("warnings".into(), json!(self.warnings.join("; ")));
        }
        CatalogEntry {
            context: None,
            identifier: self.identifier.clone(),
            display_name: facts.name.clone(),
            media_type: A2A_CARD_TYPE.into(),
            url: self.url().map(str::to_owned),
            data: match self.source {
                Source::Value => Some(self.card.clone()),
                Source::Url(_) => None,
            },
            description: Some(facts.description.clone()).filter(|d| !d.is_empty()),
            tags,
            capabilities: facts.skills.iter().map(|s| s.id.clone()).collect(),
            representative_queries: queries,
            version: Some(facts.version.clone()).filter(|v| !v.is_empty()),
            updated_at: Some(self.updated_at.clone()),
            metadata,
            trust_manifest: self.trust_manifest.clone(),
        }
    }

    /// Whether it may be offered to A2A 1.0 clients by routing.
    pub fn routable(&self, facts: &CardFacts) -> bool {
        self.fetch.status == Status::Active && facts.card_version == CardVersion::V1
    }
}
