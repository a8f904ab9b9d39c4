//! Proof of origin for push notifications: every notification carries a
//! compact JWS (a JWT signed with the server's Ed25519 key, `alg: EdDSA`)
//! in the `X-A2A-Notification-Signature` header, and the server publishes
//! its public keys as a JWKS at [`super::JWKS_PATH`].
//!
//! Claims: `iss` (when configured), `aud` (the webhook URL), `iat`, `exp`
//! (`iat` + a short lifetime, 5 minutes by default), `jti` (the
//! notification id, also in `X-A2A-Notification-Id`), `task_id`, `seq` (the
//! notification's sequence number in its config's stream) and
//! `request_body_sha256` (hex SHA-256 of the exact body bytes). A receiver
//! checks the signature with the key named by `kid`, the hash against the
//! body it received, and the times.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentwire_types::jws::{Algorithm, KeySet, SigningKey};
use agentwire_types::{A2aError, A2aResult};
use bytes::Bytes;

/// Signs push notifications with an Ed25519 key. Cheap to clone.
#[derive(Clone)]
pub struct PushSigner {
    inner: Arc<Inner>,
}

struct Inner {
    key: SigningKey,
    jwks: Bytes,
    issuer: Option<String>,
    lifetime: Duration,
}

impl std::fmt::Debug for PushSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        f.debug_struct("PushSigner")
            .field("kid", &self.inner.key.kid())
            .field("alg", &"EdDSA")
            .finish()
    }
}

/// Hex SHA-256 of `body` (the `request_body_sha256` claim).
pub fn body_sha256_hex(body: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, body);
    let mut s = String::with_capacity(64);
    for b in d.as_ref() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

impl PushSigner {
    /// A signer with a new random key (gone when the process ends: receivers
    /// refetch the JWKS when they meet an unknown `kid`).
    pub fn generate() -> A2aResult<Self> {
        Self::from_pkcs8(&Self::generate_pkcs8()?)
    }

    /// A new Ed25519 private key in PKCS#8 (DER), e.g. to keep in a file.
    pub fn generate_pkcs8() -> A2aResult<Vec<u8>> {
        SigningKey::generate_ed25519_pkcs8()
            .map_err(|e| A2aError::internal(format!("push signer: {e}")))
    }

    /// A signer with the Ed25519 key in `der` (PKCS#8). Its key id is the
    /// RFC 7638 thumbprint of the public key.
    pub fn from_pkcs8(der: &[u8]) -> A2aResult<Self> {
        let key = SigningKey::from_pkcs8_der(der)
            .ok()
            .filter(|k| k.algorithm() == Algorithm::EdDSA)
            .ok_or_else(|| A2aError::internal("push signer: not an Ed25519 PKCS#8 key"))?;
        let mut set = KeySet::new();
        set.push(key.verifying_key().clone());
        Ok(Self {
            inner: Arc::new(Inner {
                jwks: Bytes::from(set.to_jwks().to_string()),
                key,
                issuer: None,
                lifetime: Duration::from_secs(300),
            }),
        })
    }

    /// The key in the file at `path` (PKCS#8 DER), created (mode 0600) with
    /// a new key when the file does not exist: the key, and so the JWKS,
    /// survive restarts.
    pub fn load_or_create(path: impl AsRef<Path>) -> A2aResult<Self> {
        let path = path.as_ref();
        match std::fs::read(path) {
            Ok(der) => Self::from_pkcs8(&der),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let der = Self::generate_pkcs8()?;
                write_private(path, &der).map_err(|e| {
                    A2aError::internal(format!("push signer: cannot write {}: {e}", path.display()))
                })?;
                Self::from_pkcs8(&der)
            }
            Err(e) => Err(A2aError::internal(format!(
                "push signer: cannot read {}: {e}",
                path.display()
            ))),
        }
    }

    fn with_inner(self, f: impl FnOnce(&mut Inner)) -> Self {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => {
                f(&mut inner);
                Self {
                    inner: Arc::new(inner),
                }
            }
            Err(shared) => {
                // Settings are fixed once the signer is shared.
                tracing::warn!("push signer: settings changed on a shared signer are ignored");
                Self { inner: shared }
            }
        }
    }

    /// Sets the `iss` claim (e.g. the agent's base URL).
    pub fn issuer(self, iss: impl Into<String>) -> Self {
        let iss = iss.into();
        self.with_inner(|i| i.issuer = Some(iss))
    }

    /// How long a signature stays valid (default 5 minutes).
    pub fn lifetime(self, d: Duration) -> Self {
        self.with_inner(|i| i.lifetime = d)
    }

    /// The key id (RFC 7638 thumbprint).
    pub fn kid(&self) -> &str {
        self.inner.key.kid()
    }

    /// The JWKS document publishing the public key.
    pub fn jwks_json(&self) -> Bytes {
        self.inner.jwks.clone()
    }

    /// The signed JWT for one notification.
    pub(crate) fn sign(
        &self,
        audience: &str,
        notification_id: &str,
        task_id: &str,
        seq: u64,
        body: &[u8],
    ) -> String {
        let now = chrono::Utc::now().timestamp();
        let mut claims = serde_json::json!({
            "aud": audience,
            "iat": now,
            "exp": now + self.inner.lifetime.as_secs() as i64,
            "jti": notification_id,
            "task_id": task_id,
            "seq": seq,
            "request_body_sha256": body_sha256_hex(body),
        });
        if let Some(iss) = &self.inner.issuer {
            claims["iss"] = serde_json::Value::String(iss.clone());
        }
        // Ed25519 signing cannot fail once the key is read; an empty
        // signature would be refused by every receiver, never accepted.
        self.inner.key.sign_jwt(&claims).unwrap_or_else(|e| {
            tracing::error!(error = %e, "push signer: cannot sign");
            String::new()
        })
    }
}

fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(data)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_verifies_with_the_published_key() {
        let s = PushSigner::generate().unwrap().issuer("http://agent");
        let jwt = s.sign("http://hook/", "n1", "t1", 3, b"{\"task\":{}}");
        assert_eq!(jwt.split('.').count(), 3);
        let jwks: serde_json::Value = serde_json::from_slice(&s.jwks_json()).unwrap();
        assert_eq!(jwks["keys"][0]["kid"], s.kid());
        assert_eq!(jwks["keys"][0]["kty"], "OKP");
        assert_eq!(jwks["keys"][0]["alg"], "EdDSA");
        // Verified independently of the signer: ring on the JWK's bytes.
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let parts: Vec<&str> = jwt.split('.').collect();
        let x = b64.decode(jwks["keys"][0]["x"].as_str().unwrap()).unwrap();
        let key = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, x);
        let sig = b64.decode(parts[2]).unwrap();
        key.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
            .unwrap();
        let header: serde_json::Value =
            serde_json::from_slice(&b64.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(
            header,
            serde_json::json!({"alg": "EdDSA", "typ": "JWT", "kid": s.kid()})
        );
        let keys = KeySet::from_jwks(&jwks).unwrap();
        let (_, claims) = agentwire_types::jws::verify_jwt(&jwt, &keys, Duration::ZERO).unwrap();
        assert_eq!(claims["task_id"], "t1");
        assert_eq!(claims["seq"], 3);
        assert_eq!(claims["iss"], "http://agent");
        assert_eq!(
            claims["request_body_sha256"],
            body_sha256_hex(b"{\"task\":{}}")
        );
        assert!(format!("{s:?}").contains(s.kid()));
    }

    #[test]
    fn key_file_round_trip() {
        let dir = std::env::temp_dir().join(format!("a2a-push-key-{}", agentwire_types::new_id()));
        let a = PushSigner::load_or_create(&dir).unwrap();
        let b = PushSigner::load_or_create(&dir).unwrap();
        assert_eq!(a.kid(), b.kid());
        let _ = std::fs::remove_file(&dir);
    }
}
