//! Who may publish: bearer tokens mapped to publishers, read from a file
//! or from the environment. Each publisher owns the entries it publishes.
//!
//! Any [`agentwire_server::Authenticator`] can stand in for these tokens
//! (JWT or OAuth 2.0 validation, for instance): the publishing API only
//! needs the principal it returns.

use std::path::Path;

use agentwire_server::BearerTokens;

/// Parses publisher tokens: one `PUBLISHER TOKEN` pair a line (blank lines
/// and `#` comments ignored), or `PUBLISHER:TOKEN` pairs separated by
/// commas (the form of the environment variable).
pub fn parse_tokens(text: &str) -> Result<BearerTokens, String> {
    let mut tokens = BearerTokens::new();
    let mut n = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        for pair in line.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (who, token) = pair
                .split_once(char::is_whitespace)
                .or_else(|| pair.split_once(':'))
                .map(|(a, b)| (a.trim(), b.trim()))
                .ok_or_else(|| {
                    format!(
                        "line {}: expected \"PUBLISHER TOKEN\" (or PUBLISHER:TOKEN)",
                        i + 1
                    )
                })?;
            if who.is_empty() || token.is_empty() || token.contains(char::is_whitespace) {
                return Err(format!(
                    "line {}: expected \"PUBLISHER TOKEN\" (or PUBLISHER:TOKEN)",
                    i + 1
                ));
            }
            if token.len() < 8 {
                return Err(format!(
                    "line {}: the token of {who} is shorter than 8 characters",
                    i + 1
                ));
            }
            tokens = tokens.with_token(token, who);
            n += 1;
        }
    }
    if n == 0 {
        return Err("no publisher token given".into());
    }
    Ok(tokens)
}

/// Reads a tokens file.
pub fn tokens_file(path: &Path) -> Result<BearerTokens, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the tokens file {}: {e}", path.display()))?;
    parse_tokens(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_server::Authenticator;

    #[test]
    fn tokens_parse_in_both_forms() {
        let t = parse_tokens("# publishers\nalice s3cret-alice\n\nbob s3cret-bob\n").unwrap();
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::AUTHORIZATION,
            "Bearer s3cret-bob".parse().unwrap(),
        );
        assert_eq!(t.authenticate(&h).unwrap().as_deref(), Some("bob"));
        let t = parse_tokens("alice:s3cret-alice,bob:s3cret-bob").unwrap();
        assert_eq!(t.authenticate(&h).unwrap().as_deref(), Some("bob"));
        assert!(parse_tokens("alice").is_err());
        assert!(parse_tokens("alice short").is_err());
        assert!(parse_tokens("# nothing").is_err());
    }
}
