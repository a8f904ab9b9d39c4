//! The agent card fields a 0.3 client needs, derived from the 1.0 card and
//! published in the same document, the way the official SDKs do: the 1.0
//! card as it is, and beside it, under names 1.0 does not use, what 0.3
//! calls them. Where both versions use a name (`securitySchemes`,
//! `skills`), the 1.0 members stay and the 0.3 ones are added next to them
//! (`type`, `in`... in a security scheme; `security` in a skill), so the
//! card stays a valid 1.0 card: 1.0 readers ignore members they do not know.
//!
//! The 0.3 fields:
//!
//! - `protocolVersion`: `0.3.0`;
//! - `url` and `preferredTransport`: the first JSON-RPC or HTTP+JSON
//!   interface of `supportedInterfaces` (else the gRPC one), and
//!   `additionalInterfaces`: every JSON-RPC, HTTP+JSON and gRPC interface
//!   (the bindings this server serves 0.3 on: the 0.3 gRPC service
//!   `a2a.v1.A2AService` is at the same address as the 1.0 one), the
//!   preferred one included (`{url, transport}`). Interfaces with a tenant are left out: 0.3 has
//!   no tenants. Without any such interface no 0.3 address is published;
//! - `supportsAuthenticatedExtendedCard`: `capabilities.extendedAgentCard`;
//! - `security` (card and skills): `securityRequirements` as 0.3 lists
//!   them (`[{"scheme": ["scope", ...]}]`);
//! - in each security scheme: `type` (`apiKey`, `http`, `oauth2`,
//!   `openIdConnect`, `mutualTLS`) and the scheme's members beside the
//!   1.0 wrapper (an API key's `location` as `in`).
//!
//! This form is not a valid 1.0 card for a strict reader (the 1.0 JSON
//! schema refuses members it does not define), so it is served only to
//! 0.3 clients: the agent card endpoint gives it to requests without
//! `A2A-Version` (or with a 0.x one), and 1.0 clients, which send
//! `A2A-Version: 1.0`, get the 1.0 card as it is
//! (`bindings::http::card`).
//!
//! A signed card is signed in this form too ([`v03_card`]): its
//! `signatures` are its own, one per key over the document as served
//! (RFC 8785), followed by the 1.0 card's, which cover the 1.0 card it
//! contains (what a verifier that reads it as a 1.0 card, leaving the 0.3
//! members out, checks: the official SDKs do).

use agentwire_types::{AgentCard, SecurityRequirement, binding};

use crate::handler::RequestHandler;
use serde_json::{Map, Value, json};

/// The protocol version 0.3 clients are told.
pub(crate) const PROTOCOL_VERSION_V03: &str = "0.3.0";

/// The 1.0 card's JSON (`json`, as serialized from `card`) with the 0.3
/// fields added; `json` as it is when 0.3 is not served or it is not an
/// object.
pub(crate) fn with_v03_fields(card: &AgentCard, json: &[u8], serves_v03: bool) -> Vec<u8> {
    if !serves_v03 {
        return json.to_vec();
    }
    let Ok(Value::Object(mut doc)) = serde_json::from_slice::<Value>(json) else {
        return json.to_vec();
    };
    add_v03_fields(card, &mut doc);
    serde_json::to_vec(&doc).unwrap_or_else(|_| json.to_vec())
}

/// The 0.3 form of `card` (as [`with_v03_fields`]), signed as served when
/// the handler signs its cards (see the module's documentation); the 1.0
/// card as it is when 0.3 is not served.
pub(crate) fn v03_card(handler: &RequestHandler, card: &AgentCard, serves_v03: bool) -> Vec<u8> {
    let v1 = || serde_json::to_vec(card).unwrap_or_default();
    if !serves_v03 {
        return v1();
    }
    let Ok(Value::Object(mut doc)) = serde_json::to_value(card) else {
        return v1();
    };
    let v1_signatures = match doc.remove("signatures") {
        Some(Value::Array(sigs)) => sigs,
        _ => Vec::new(),
    };
    add_v03_fields(card, &mut doc);
    if v1_signatures.is_empty() {
        return serde_json::to_vec(&doc).unwrap_or_else(|_| v1());
    }
    let mut doc = Value::Object(doc);
    let own = match handler.card_signer() {
        Some((signer, jku)) => match signer.sign_document(&doc, jku) {
            Ok(sigs) => sigs,
            Err(e) => {
                tracing::error!(error = %e, "the 0.3 form of the agent card cannot be signed");
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    let mut signatures: Vec<Value> = own
        .iter()
        .filter_map(|s| serde_json::to_value(s).ok())
        .collect();
    signatures.extend(v1_signatures);
    doc["signatures"] = Value::Array(signatures);
    serde_json::to_vec(&doc).unwrap_or_else(|_| v1())
}

/// Adds the 0.3 fields to a card document (members already there are
/// kept).
pub(crate) fn add_v03_fields(card: &AgentCard, doc: &mut Map<String, Value>) {
    let mut add = |key: &str, value: Value| {
        doc.entry(key.to_owned()).or_insert(value);
    };
    add("protocolVersion", json!(PROTOCOL_VERSION_V03));
    let interfaces: Vec<_> = card
        .supported_interfaces
        .iter()
        .filter(|i| {
            i.tenant.is_empty()
                && (i.protocol_binding == binding::JSONRPC
                    || i.protocol_binding == binding::HTTP_JSON
                    || i.protocol_binding == binding::GRPC)
        })
        .collect();
    // The preferred one is JSON-RPC or HTTP+JSON when there is one (every
    // 0.3 client speaks JSON-RPC; gRPC needs an extra of the SDKs).
    let preferred = interfaces
        .iter()
        .find(|i| i.protocol_binding != binding::GRPC)
        .or_else(|| interfaces.first());
    if let Some(first) = preferred {
        add("url", json!(first.url));
        add("preferredTransport", json!(first.protocol_binding));
        add(
            "additionalInterfaces",
            interfaces
                .iter()
                .map(|i| json!({"url": i.url, "transport": i.protocol_binding}))
                .collect(),
        );
    }
    if card
        .capabilities
        .as_ref()
        .and_then(|c| c.extended_agent_card)
        .unwrap_or(false)
    {
        add("supportsAuthenticatedExtendedCard", json!(true));
    }
    if !card.security_requirements.is_empty() {
        add("security", security_v03(&card.security_requirements));
    }
    if let Some(Value::Array(skills)) = doc.get_mut("skills") {
        for (json, skill) in skills.iter_mut().zip(&card.skills) {
            if let (Value::Object(json), false) = (json, skill.security_requirements.is_empty()) {
                json.entry("security")
                    .or_insert_with(|| security_v03(&skill.security_requirements));
            }
        }
    }
    if let Some(Value::Object(schemes)) = doc.get_mut("securitySchemes") {
        for scheme in schemes.values_mut() {
            if let Value::Object(scheme) = scheme {
                add_scheme_fields(scheme);
            }
        }
    }
}

/// `[{"schemes": {"name": {"list": [scopes]}}}]` as `[{"name": [scopes]}]`.
fn security_v03(reqs: &[SecurityRequirement]) -> Value {
    reqs.iter()
        .map(|r| {
            let mut names: Vec<_> = r.schemes.iter().collect();
            names.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                names
                    .into_iter()
                    .map(|(name, scopes)| (name.clone(), json!(scopes.list)))
                    .collect(),
            )
        })
        .collect()
}

/// One security scheme (`{"httpAuthSecurityScheme": {...}}`) with its 0.3
/// members added beside the wrapper.
fn add_scheme_fields(scheme: &mut Map<String, Value>) {
    const KINDS: [(&str, &str); 5] = [
        ("apiKeySecurityScheme", "apiKey"),
        ("httpAuthSecurityScheme", "http"),
        ("oauth2SecurityScheme", "oauth2"),
        ("openIdConnectSecurityScheme", "openIdConnect"),
        ("mtlsSecurityScheme", "mutualTLS"),
    ];
    let Some((inner, kind)) = KINDS
        .iter()
        .find_map(|(wrapper, kind)| match scheme.get(*wrapper) {
            Some(Value::Object(inner)) => Some((inner.clone(), *kind)),
            _ => None,
        })
    else {
        return;
    };
    scheme.entry("type").or_insert_with(|| json!(kind));
    for (key, value) in inner {
        let key = if kind == "apiKey" && key == "location" {
            "in".to_owned()
        } else {
            key
        };
        scheme.entry(key).or_insert(value);
    }
}
