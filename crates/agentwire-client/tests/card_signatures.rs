//! Card signature verification (spec 8.4.3) against the project's own
//! server signing its card: trusted key files, a trusted JWKS URL, the
//! agent's own `jku` (only over HTTPS from the card's origin), unknown keys
//! and rotation.

use agentwire_client::card::{CardVerifier, KeySource, fetch_agent_card};
use agentwire_server::{
    A2aResult, A2aServer, AgentExecutor, CardSigning, RequestContext, ServerHandle, TaskUpdater,
};
use agentwire_types::AgentCard;
use agentwire_types::jws::{self, CardSignatureStatus, SigningKey};

struct Idle;

impl AgentExecutor for Idle {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.complete().await
    }
}

fn ed25519() -> SigningKey {
    SigningKey::from_pkcs8_der(&SigningKey::generate_ed25519_pkcs8().unwrap()).unwrap()
}

async fn serve(signing: CardSigning) -> ServerHandle {
    A2aServer::new(AgentCard::new("Signed", "a signed card", "1.0.0"), Idle)
        .sign_card(signing)
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn()
}

#[tokio::test]
async fn verified_with_a_trusted_key_file_or_jwks_url() {
    let key = ed25519();
    let server = serve(CardSigning::new(key.clone())).await;
    let base = server.base_url();
    let card = fetch_agent_card(&base).await.unwrap();
    let card_url = format!("{base}/.well-known/agent-card.json");

    // The public key in a PEM file.
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("agent.pub.pem");
    std::fs::write(&pem, jws::public_key_pem(key.verifying_key()).unwrap()).unwrap();
    let r = CardVerifier::new()
        .trust_key_file(&pem)
        .unwrap()
        .follow_jku(false)
        .verify(&card, Some(&card_url))
        .await;
    assert!(r.status.is_verified(), "{}", r.describe());
    assert_eq!(
        r.key_source,
        Some(KeySource::Trusted(pem.display().to_string()))
    );
    assert!(
        r.describe().starts_with("verified (EdDSA, key "),
        "{}",
        r.describe()
    );

    // The JWKS the server publishes, trusted by URL.
    let jwks = format!("{base}{}", jws::CARD_JWKS_PATH);
    let r = CardVerifier::new()
        .trust_jwks_url(&jwks)
        .verify(&card, Some(&card_url))
        .await;
    assert!(r.status.is_verified(), "{}", r.describe());
    assert_eq!(r.key_source, Some(KeySource::TrustedJwks(jwks)));
    let _ = server.shutdown().await;
}

#[tokio::test]
async fn unverified_with_the_reason() {
    let server = serve(CardSigning::new(ed25519())).await;
    let base = server.base_url();
    let card = fetch_agent_card(&base).await.unwrap();
    let card_url = format!("{base}/.well-known/agent-card.json");

    // Another key: unknown key id.
    let other = ed25519();
    let r = CardVerifier::new()
        .trust_key(other.verifying_key().clone(), "other")
        .follow_jku(false)
        .verify(&card, Some(&card_url))
        .await;
    match &r.status {
        CardSignatureStatus::Unverified { reason } => {
            assert!(reason.contains("no trusted key"), "{reason}")
        }
        s => panic!("{s:?}"),
    }
    // No key at all: the agent's jku is on plain HTTP, so it is not used,
    // and the reason says so.
    let r = CardVerifier::new().verify(&card, Some(&card_url)).await;
    match &r.status {
        CardSignatureStatus::Unverified { reason } => {
            assert!(reason.contains("not fetched over HTTPS"), "{reason}")
        }
        s => panic!("{s:?}"),
    }
    // A changed card (as a man in the middle would serve it).
    let mut changed = card.clone();
    changed.name = "Evil".into();
    let r = CardVerifier::new()
        .trust_jwks_url(format!("{base}{}", jws::CARD_JWKS_PATH))
        .verify(&changed, Some(&card_url))
        .await;
    assert!(
        matches!(r.status, CardSignatureStatus::Unverified { .. }),
        "{r:?}"
    );
    // Unsigned: absent.
    let mut unsigned = card.clone();
    unsigned.signatures.clear();
    let r = CardVerifier::new().verify(&unsigned, None).await;
    assert_eq!(r.status, CardSignatureStatus::Absent);
    assert_eq!(r.describe(), "absent");
    let _ = server.shutdown().await;
}

/// Rotation: the server signs with the new key and still publishes the old
/// one; a card a client kept from before (signed by the old key) verifies
/// against the JWKS while the old key is published, and not once it is
/// withdrawn.
#[tokio::test]
async fn key_rotation_with_the_old_key_published() {
    let old = ed25519();
    let new = SigningKey::from_pkcs8_der(&SigningKey::generate_p256_pkcs8().unwrap()).unwrap();
    let before = serve(CardSigning::new(old.clone())).await;
    let kept = fetch_agent_card(&before.base_url()).await.unwrap();
    let _ = before.shutdown().await;

    let during = serve(CardSigning::new(new.clone()).publish(old.verifying_key().clone())).await;
    let jwks = format!("{}{}", during.base_url(), jws::CARD_JWKS_PATH);
    let verifier = CardVerifier::new().trust_jwks_url(&jwks);
    let fresh = fetch_agent_card(&during.base_url()).await.unwrap();
    assert!(verifier.verify(&fresh, None).await.status.is_verified());
    assert!(verifier.verify(&kept, None).await.status.is_verified());
    let _ = during.shutdown().await;

    let after = serve(CardSigning::new(new.clone())).await;
    let jwks = format!("{}{}", after.base_url(), jws::CARD_JWKS_PATH);
    let verifier = CardVerifier::new().trust_jwks_url(&jwks);
    let fresh = fetch_agent_card(&after.base_url()).await.unwrap();
    assert!(verifier.verify(&fresh, None).await.status.is_verified());
    assert!(matches!(
        verifier.verify(&kept, None).await.status,
        CardSignatureStatus::Unverified { .. }
    ));
    let _ = after.shutdown().await;
}
