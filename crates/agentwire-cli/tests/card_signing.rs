//! Signed agent cards end to end: `a2a serve --sign-card KEY` signs the card
//! it serves (EdDSA, ES256 or RS256 by the key's type) and publishes the
//! keys; `a2a card get --trust-key PUB` says verified, with another key
//! unverified and why, and absent for an unsigned card; `-o json` keeps the
//! card unchanged on stdout; `--require-signature` fails unless verified.

mod common;

use agentwire_types::jws::{self, SigningKey};
use common::*;

fn fixture(name: &str) -> String {
    format!(
        "{}/../agentwire-types/tests/fixtures/keys/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A new Ed25519 key pair as PEM files in `dir`: (private, public).
fn ed25519_files(dir: &std::path::Path, name: &str) -> (String, String) {
    let der = SigningKey::generate_ed25519_pkcs8().unwrap();
    let key = SigningKey::from_pkcs8_der(&der).unwrap();
    let private = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub.pem"));
    std::fs::write(&private, jws::pkcs8_to_pem(&der).unwrap()).unwrap();
    std::fs::write(&public, jws::public_key_pem(key.verifying_key()).unwrap()).unwrap();
    (private.display().to_string(), public.display().to_string())
}

#[test]
fn serve_sign_card_then_card_get_verifies_with_the_public_key() {
    let env = Env::new();
    let (key, public) = ed25519_files(env.home(), "card-key");
    let (_, other) = ed25519_files(env.home(), "other-key");
    let served = Serving::start(&env, &["--agent", "echo", "--sign-card", &key]);
    assert!(
        served.stdout.contains("card signed: EdDSA key "),
        "{}",
        served.stdout
    );
    assert!(
        served.stdout.contains("/.well-known/jwks.json"),
        "{}",
        served.stdout
    );
    let url = served.base();

    // The right key: verified.
    let out = env.run(&["card", "get", "-a", &url, "--trust-key", &public]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    let sig = out.field("Signature").expect("a Signature field");
    assert!(sig.starts_with("verified (EdDSA, key "), "{sig}");
    assert!(sig.contains(&public), "names the trusted key: {sig}");

    // Another key: unverified, with the reason; still exit 0 (a report).
    let out = env.run(&["card", "get", "-a", &url, "--trust-key", &other]);
    out.expect(0);
    let sig = out.field("Signature").expect("a Signature field");
    assert!(sig.starts_with("unverified: "), "{sig}");
    assert!(sig.contains("no trusted key with key id"), "{sig}");

    // The same with --require-signature: a failure with the CLI's code of
    // a card it does not accept (CLI SPEC Appendix D, as the README says).
    let out = env.run(&[
        "card",
        "get",
        "-a",
        &url,
        "--trust-key",
        &other,
        "--require-signature",
        "-o",
        "json",
    ]);
    out.expect(1);
    assert!(
        out.stderr.contains("A2ACLI_ERR_CARD_INVALID")
            && out.stderr.contains("--require-signature")
            && !out.stderr.contains("AGENTWIRE_"),
        "{}",
        out.stderr
    );

    // -o json: the card unchanged on stdout (its signatures included), the
    // outcome on stderr.
    let out = env.run(&[
        "card",
        "get",
        "-a",
        &url,
        "--trust-key",
        &public,
        "-o",
        "json",
    ]);
    out.expect(0);
    let card = out.json();
    assert_eq!(card["signatures"].as_array().map(Vec::len), Some(1));
    assert!(
        out.stderr.contains("signature: verified (EdDSA"),
        "{}",
        out.stderr
    );
    // Trusting the agent's JWKS by URL verifies too.
    let jwks = format!("{url}{}", jws::CARD_JWKS_PATH);
    let out = env.run(&["card", "get", "-a", &url, "--trust-jwks", &jwks]);
    out.expect(0);
    let sig = out.field("Signature").unwrap();
    assert!(sig.contains("from trusted JWKS"), "{sig}");
    // No key given: the agent's own JWKS is on plain HTTP, so the card is
    // not presented as verified.
    let out = env.run(&["card", "get", "-a", &url]);
    out.expect(0);
    let sig = out.field("Signature").unwrap();
    assert!(sig.starts_with("unverified: "), "{sig}");
    assert!(sig.contains("HTTPS"), "{sig}");
}

#[test]
fn each_key_type_signs_with_its_algorithm() {
    let env = Env::new();
    for (key, public, alg) in [
        (fixture("ec-sec1.pem"), fixture("ec-public.pem"), "ES256"),
        (fixture("rsa-pkcs8.pem"), fixture("rsa-public.pem"), "RS256"),
    ] {
        let served = Serving::start(&env, &["--agent", "echo", "--sign-card", &key]);
        let out = env.run(&["card", "get", "-a", &served.base(), "--trust-key", &public]);
        out.expect(0);
        let sig = out.field("Signature").unwrap();
        assert!(sig.starts_with(&format!("verified ({alg}, key ")), "{sig}");
    }
}

#[test]
fn an_unsigned_card_is_absent_and_a_bad_key_file_is_refused() {
    let env = Env::new();
    let served = Serving::start(&env, &["--agent", "echo"]);
    let out = env.run(&["card", "get", "-a", &served.base()]);
    out.expect(0);
    assert_eq!(out.field("Signature").as_deref(), Some("absent"));
    // A public key cannot sign: a clear start-up failure.
    let out = env.run(&[
        "serve",
        "--agent",
        "echo",
        "--store",
        "memory",
        "--port",
        "0",
        "--sign-card",
        &fixture("rsa-public.pem"),
    ]);
    out.expect(1);
    assert!(out.stderr.contains("--sign-card"), "{}", out.stderr);
    assert!(out.stderr.contains("private key"), "{}", out.stderr);
}
