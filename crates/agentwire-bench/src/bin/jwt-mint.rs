//! `jwt-mint`: the signing key and the token of the JWT-auth rows of
//! `scripts/bench.sh`. Generates a P-256 key (ES256), writes its public key
//! as a JWKS file for `a2a serve --auth-jwks FILE`, and prints one JWT for
//! that key, issuer and audience, valid for `--ttl-secs` (an hour by
//! default), to send as `Authorization: Bearer`.
//!
//! ```text
//! jwt-mint --jwks /tmp/jwks.json --issuer https://bench.test --audience urn:a2a:bench
//! ```

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use agentwire_types::jws::{KeySet, SigningKey};
use anyhow::Context;
use clap::Parser;
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "Writes a fresh ES256 key's JWKS and prints a JWT signed with it")]
struct Args {
    /// Where to write the JWKS (the public key).
    #[arg(long)]
    jwks: PathBuf,
    /// The token's `iss`.
    #[arg(long)]
    issuer: String,
    /// The token's `aud`.
    #[arg(long)]
    audience: String,
    /// The token's `sub` (the principal).
    #[arg(long, default_value = "bench")]
    subject: String,
    /// How long the token is valid.
    #[arg(long, default_value_t = 3600)]
    ttl_secs: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let der = SigningKey::generate_p256_pkcs8()?;
    let key = SigningKey::from_pkcs8_der(&der)?.with_kid("bench-1");
    let mut keys = KeySet::new();
    keys.push(key.verifying_key().clone());
    std::fs::write(&args.jwks, keys.to_jwks().to_string())
        .with_context(|| format!("cannot write {}", args.jwks.display()))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let token = key.sign_jwt(&json!({
        "iss": args.issuer,
        "aud": args.audience,
        "sub": args.subject,
        "iat": now,
        "nbf": now,
        "exp": now + args.ttl_secs,
    }))?;
    println!("{token}");
    Ok(())
}
