//! Fetching an Agent Card (spec 8.2): from the well-known URI of an origin
//! or from a direct card URL.
//!
//! Kept minimal on purpose (one GET, no cache); HTTP caching (`ETag`,
//! `Cache-Control`, spec 8.6) and signature checks grow here.

use a2a_types::{AGENT_CARD_PATH, AgentCard};
use serde_json::Value;

use crate::error::{ClientError, ClientResult, truncate_body};
use crate::http::{
    MAX_ERROR_BODY, default_http_client, map_reqwest_error, read_body, service_headers,
};
use crate::transport::CallOptions;

/// The URL to fetch a card from, given what a user typed:
///
/// - a URL whose path ends in `.json` is used as it is;
/// - otherwise the well-known path is appended to the URL's path (an origin
///   gives `{origin}/.well-known/agent-card.json`; an agent mounted under a
///   prefix gives `{origin}/{prefix}/.well-known/agent-card.json`);
/// - without a scheme (`localhost:8080`, `10.0.0.5:9000/agent`), `http://`
///   is assumed.
///
/// ```
/// use a2a_client::card::agent_card_url;
/// assert_eq!(
///     agent_card_url("localhost:8080").unwrap(),
///     "http://localhost:8080/.well-known/agent-card.json"
/// );
/// assert_eq!(
///     agent_card_url("https://agents.example.com/cards/echo.json").unwrap(),
///     "https://agents.example.com/cards/echo.json"
/// );
/// ```
pub fn agent_card_url(input: &str) -> ClientResult<String> {
    let input = input.trim();
    if input.is_empty() {
        return Err(ClientError::InvalidRequest("empty agent URL".into()));
    }
    let with_scheme = if input.contains("://") {
        input.to_owned()
    } else {
        format!("http://{input}")
    };
    let mut url = reqwest::Url::parse(&with_scheme)
        .map_err(|e| ClientError::InvalidRequest(format!("invalid agent URL {input:?}: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ClientError::InvalidRequest(format!(
            "agent URL {input:?} must be http:// or https://"
        )));
    }
    if url.path().ends_with(".json") {
        return Ok(url.into());
    }
    url.set_fragment(None);
    url.set_query(None);
    let path = format!("{}{AGENT_CARD_PATH}", url.path().trim_end_matches('/'));
    url.set_path(&path);
    Ok(url.into())
}

/// Fetches and decodes an agent card with the default HTTP client.
///
/// `url` is an origin, a base URL or a card URL (see [`agent_card_url`]).
/// A card of an A2A 0.x agent (a top-level `url`, no `supportedInterfaces`)
/// is refused with [`ClientError::NoCompatibleInterface`].
///
/// ```no_run
/// # async fn demo() -> Result<(), a2a_client::ClientError> {
/// let card = a2a_client::fetch_agent_card("http://127.0.0.1:8080").await?;
/// println!("{} {}", card.name, card.version);
/// # Ok(()) }
/// ```
pub async fn fetch_agent_card(url: &str) -> ClientResult<AgentCard> {
    fetch_agent_card_with(&default_http_client(), url, &CallOptions::new()).await
}

/// Fetches a card with a given HTTP client and options (service parameters
/// such as `Authorization` are sent as headers; the timeout bounds the GET).
pub async fn fetch_agent_card_with(
    http: &reqwest::Client,
    url: &str,
    options: &CallOptions,
) -> ClientResult<AgentCard> {
    let card_url = agent_card_url(url)?;
    let mut rb = http
        .get(&card_url)
        .headers(service_headers(options)?)
        .header(http::header::ACCEPT, "application/json");
    if let Some(t) = options.timeout {
        rb = rb.timeout(t);
    }
    let resp = rb
        .send()
        .await
        .map_err(|e| map_reqwest_error(e, &card_url))?;
    let status = resp.status();
    let body = read_body(resp, &card_url).await?;
    if !status.is_success() {
        return Err(ClientError::Http {
            status: status.as_u16(),
            body: truncate_body(&body, MAX_ERROR_BODY),
        });
    }
    parse_agent_card(&body).map_err(|e| match e {
        ClientError::InvalidResponse(m) => {
            ClientError::InvalidResponse(format!("agent card at {card_url}: {m}"))
        }
        other => other,
    })
}

/// Decodes an agent card (ProtoJSON), refusing 0.x cards with a clear error.
pub fn parse_agent_card(body: &[u8]) -> ClientResult<AgentCard> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ClientError::invalid_response(format!("not JSON: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(ClientError::invalid_response("not a JSON object"));
    };
    let has_interfaces = ["supportedInterfaces", "supported_interfaces"]
        .iter()
        .filter_map(|k| obj.get(*k))
        .any(|v| v.as_array().is_some_and(|a| !a.is_empty()));
    if !has_interfaces {
        if let Some(url) = obj.get("url").and_then(Value::as_str) {
            let version = obj
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("0.x");
            return Err(ClientError::NoCompatibleInterface(format!(
                "the agent card is an A2A {version} card (top-level \"url\": {url:?}, no \
                 \"supportedInterfaces\"); this client speaks A2A 1.0 and does not fall back to 0.x"
            )));
        }
    }
    serde_json::from_value(value)
        .map_err(|e| ClientError::invalid_response(format!("invalid agent card: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn card_urls() {
        for (input, want) in [
            (
                "http://127.0.0.1:8080",
                "http://127.0.0.1:8080/.well-known/agent-card.json",
            ),
            (
                "http://127.0.0.1:8080/",
                "http://127.0.0.1:8080/.well-known/agent-card.json",
            ),
            (
                "127.0.0.1:8080",
                "http://127.0.0.1:8080/.well-known/agent-card.json",
            ),
            (
                "localhost:9",
                "http://localhost:9/.well-known/agent-card.json",
            ),
            (
                "https://a.example/agents/echo/",
                "https://a.example/agents/echo/.well-known/agent-card.json",
            ),
            (
                "https://a.example/x?y=1#z",
                "https://a.example/x/.well-known/agent-card.json",
            ),
            ("https://a.example/card.json", "https://a.example/card.json"),
            (
                "https://a.example/card.json?v=2",
                "https://a.example/card.json?v=2",
            ),
            (
                "http://h:1/.well-known/agent-card.json",
                "http://h:1/.well-known/agent-card.json",
            ),
        ] {
            assert_eq!(agent_card_url(input).unwrap(), want, "{input}");
        }
        assert!(agent_card_url("").is_err());
        assert!(agent_card_url("ftp://h/").is_err());
    }

    #[test]
    fn v1_card_parses() {
        let body = json!({
            "name": "Echo", "description": "d", "version": "1.0.0",
            "supportedInterfaces": [{"url": "http://h:1/", "protocolBinding": "JSONRPC",
                                      "protocolVersion": "1.0"}],
            "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [], "futureField": 1
        });
        let card = parse_agent_card(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert_eq!(card.supported_interfaces[0].protocol_binding, "JSONRPC");
        assert!(card.supports_streaming());
    }

    #[test]
    fn v0_card_is_refused_clearly() {
        let body = json!({
            "name": "Old", "description": "d", "version": "1", "protocolVersion": "0.3.0",
            "url": "http://h:1/a2a", "preferredTransport": "JSONRPC",
            "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": []
        });
        let err = parse_agent_card(&serde_json::to_vec(&body).unwrap()).unwrap_err();
        assert!(
            matches!(err, ClientError::NoCompatibleInterface(_)),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("0.3.0") && msg.contains("http://h:1/a2a"),
            "{msg}"
        );
    }

    #[test]
    fn garbage_is_an_invalid_response() {
        assert!(matches!(
            parse_agent_card(b"<html>"),
            Err(ClientError::InvalidResponse(_))
        ));
        assert!(matches!(
            parse_agent_card(b"[]"),
            Err(ClientError::InvalidResponse(_))
        ));
    }
}
