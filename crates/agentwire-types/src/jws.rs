//! JSON Web Signatures (RFC 7515): the one place where this project signs
//! and verifies. Agent card signatures (A2A specification 8.4: a detached
//! JWS over the JCS canonical form of the card) and the JWTs that sign
//! push notifications both go through it.
//!
//! The cryptography is *ring*'s, through the `jsonwebtoken` crate (which
//! signs and verifies JWS signing inputs with it); the JSON
//! Canonicalization Scheme (RFC 8785) is `serde_json_canonicalizer`'s; keys
//! are read from PEM files with the RustCrypto `pkcs8` / `pkcs1` parsers.
//! What is written here is only the glue the specifications define:
//! which bytes are signed, the protected header, key ids (RFC 7638
//! thumbprints) and the JWKS documents (RFC 7517).
//!
//! Three algorithms, one for each kind of key: `EdDSA` (Ed25519), `ES256`
//! (ECDSA on P-256 with SHA-256) and `RS256` (RSA PKCS#1 v1.5 with
//! SHA-256, keys of 2048 bits or more).
//!
//! ```
//! use agentwire_types::AgentCard;
//! use agentwire_types::jws::{self, CardSignatureStatus, KeySet, SigningKey};
//!
//! let key = SigningKey::from_pkcs8_der(&SigningKey::generate_ed25519_pkcs8().unwrap()).unwrap();
//! let mut card = AgentCard::new("Echo", "Repeats what you say", "1.0.0");
//! jws::sign_card(&mut card, &[key.clone()], None).unwrap();
//!
//! let mut trusted = KeySet::new();
//! trusted.push(key.verifying_key().clone());
//! let json = serde_json::to_value(&card).unwrap();
//! assert!(matches!(jws::verify_card(&json, &trusted), CardSignatureStatus::Verified { .. }));
//! ```

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken as jwt;
use pkcs8::der::Encode;
use pkcs8::der::asn1::ObjectIdentifier;
use serde_json::{Map, Value, json};

use crate::{AgentCard, AgentCardSignature};

/// Where an agent of this project publishes the public keys of its card
/// signatures (a JWKS document), named by the `jku` of each signature.
pub const CARD_JWKS_PATH: &str = "/.well-known/jwks.json";

/// The `typ` of a card signature's protected header (spec 8.4.2).
pub const CARD_SIGNATURE_TYP: &str = "JOSE";

/// The most signatures of one card that are looked at.
const MAX_SIGNATURES: usize = 16;

const OID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
const OID_EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const OID_P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const OID_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");

/// A signature algorithm (RFC 7518 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Ed25519 (RFC 8037).
    EdDSA,
    /// ECDSA on P-256 with SHA-256.
    ES256,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    RS256,
}

impl Algorithm {
    /// The `alg` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::EdDSA => "EdDSA",
            Algorithm::ES256 => "ES256",
            Algorithm::RS256 => "RS256",
        }
    }

    /// The algorithm named by an `alg` value, if supported.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "EdDSA" => Some(Algorithm::EdDSA),
            "ES256" => Some(Algorithm::ES256),
            "RS256" => Some(Algorithm::RS256),
            _ => None,
        }
    }

    fn jwt(self) -> jwt::Algorithm {
        match self {
            Algorithm::EdDSA => jwt::Algorithm::EdDSA,
            Algorithm::ES256 => jwt::Algorithm::ES256,
            Algorithm::RS256 => jwt::Algorithm::RS256,
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a key could not be read, or a signature not made or verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwsError {
    /// The key cannot be used (unreadable, unsupported type or size).
    #[error("{0}")]
    Key(String),
    /// The JWS (or its header, payload or signature) is not well formed.
    #[error("malformed signature: {0}")]
    Malformed(String),
    /// The `alg` is not one of EdDSA, ES256, RS256, or not the key's.
    #[error("{0}")]
    Algorithm(String),
    /// No trusted key has this key id.
    #[error("no trusted key with key id {0:?}")]
    UnknownKey(String),
    /// The signature does not verify with the key.
    #[error("the signature does not verify")]
    BadSignature,
    /// The signature verifies but its claims are refused (expired...).
    #[error("{0}")]
    Claims(String),
}

fn b64_decode(s: &str) -> Option<Vec<u8>> {
    B64.decode(s.trim_end_matches('=')).ok()
}

/// The public part of a key, as the JWK members that define it.
#[derive(Clone, PartialEq, Eq)]
enum Public {
    Ed25519 { x: Vec<u8> },
    P256 { x: Vec<u8>, y: Vec<u8> },
    Rsa { n: Vec<u8>, e: Vec<u8> },
}

impl Public {
    fn algorithm(&self) -> Algorithm {
        match self {
            Public::Ed25519 { .. } => Algorithm::EdDSA,
            Public::P256 { .. } => Algorithm::ES256,
            Public::Rsa { .. } => Algorithm::RS256,
        }
    }

    fn p256_point(point: &[u8]) -> Result<Self, JwsError> {
        match point {
            [4, rest @ ..] if rest.len() == 64 => Ok(Public::P256 {
                x: rest[..32].to_vec(),
                y: rest[32..].to_vec(),
            }),
            _ => Err(JwsError::Key(
                "not an uncompressed P-256 public key (65 bytes starting with 4)".into(),
            )),
        }
    }

    fn rsa(n: &[u8], e: &[u8]) -> Result<Self, JwsError> {
        let strip = |b: &[u8]| {
            let first = b.iter().position(|&x| x != 0).unwrap_or(b.len());
            b[first..].to_vec()
        };
        let (n, e) = (strip(n), strip(e));
        if n.len() * 8 < 2048 {
            return Err(JwsError::Key(format!(
                "RSA keys of fewer than 2048 bits are refused (this one has about {})",
                n.len() * 8
            )));
        }
        if e.is_empty() {
            return Err(JwsError::Key("an RSA key without an exponent".into()));
        }
        Ok(Public::Rsa { n, e })
    }

    /// The members of the JWK that identify the key, in the order RFC 7638
    /// sorts them.
    fn jwk_members(&self) -> Map<String, Value> {
        let mut m = Map::new();
        match self {
            Public::Ed25519 { x } => {
                m.insert("crv".into(), "Ed25519".into());
                m.insert("kty".into(), "OKP".into());
                m.insert("x".into(), B64.encode(x).into());
            }
            Public::P256 { x, y } => {
                m.insert("crv".into(), "P-256".into());
                m.insert("kty".into(), "EC".into());
                m.insert("x".into(), B64.encode(x).into());
                m.insert("y".into(), B64.encode(y).into());
            }
            Public::Rsa { n, e } => {
                m.insert("e".into(), B64.encode(e).into());
                m.insert("kty".into(), "RSA".into());
                m.insert("n".into(), B64.encode(n).into());
            }
        }
        m
    }

    /// The RFC 7638 thumbprint (SHA-256): the required members in
    /// lexicographic order without whitespace, which is their JCS form.
    fn thumbprint(&self) -> String {
        let canonical = canonical_json(&Value::Object(self.jwk_members())).unwrap_or_default();
        B64.encode(ring::digest::digest(&ring::digest::SHA256, &canonical))
    }

    fn decoding_key(&self) -> jwt::DecodingKey {
        match self {
            // For Ed25519 and P-256, jsonwebtoken takes the raw public key
            // (the 32 bytes, the uncompressed point) under the name "der".
            Public::Ed25519 { x } => jwt::DecodingKey::from_ed_der(x),
            Public::P256 { x, y } => {
                let mut point = Vec::with_capacity(65);
                point.push(4);
                point.extend_from_slice(x);
                point.extend_from_slice(y);
                jwt::DecodingKey::from_ec_der(&point)
            }
            Public::Rsa { n, e } => jwt::DecodingKey::from_rsa_raw_components(n, e),
        }
    }
}

/// A public key that verifies signatures, with its key id.
#[derive(Clone)]
pub struct VerifyingKey {
    public: Public,
    kid: String,
    /// The key id was given (a JWK's `kid`, [`Self::with_kid`]) rather
    /// than derived (a PEM file's key has none of its own).
    declared: bool,
    key: jwt::DecodingKey,
}

impl std::fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("kid", &self.kid)
            .field("alg", &self.algorithm())
            .finish()
    }
}

impl PartialEq for VerifyingKey {
    fn eq(&self, other: &Self) -> bool {
        self.kid == other.kid && self.public == other.public
    }
}

impl VerifyingKey {
    fn new(public: Public) -> Self {
        Self {
            kid: public.thumbprint(),
            declared: false,
            key: public.decoding_key(),
            public,
        }
    }

    /// A key from a JWK (RFC 7517): `OKP`/`Ed25519`, `EC`/`P-256` or `RSA`.
    /// Its `kid` is the JWK's, else its RFC 7638 thumbprint. A JWK whose
    /// `alg` or `use` says it is not for these signatures is refused.
    pub fn from_jwk(jwk: &Value) -> Result<Self, JwsError> {
        let s = |k: &str| jwk.get(k).and_then(Value::as_str);
        let b = |k: &str| {
            s(k).and_then(b64_decode)
                .ok_or_else(|| JwsError::Key(format!("the JWK has no usable {k:?} member")))
        };
        let public = match (s("kty"), s("crv")) {
            (Some("OKP"), Some("Ed25519")) => {
                let x = b("x")?;
                if x.len() != 32 {
                    return Err(JwsError::Key("an Ed25519 key has 32 bytes".into()));
                }
                Public::Ed25519 { x }
            }
            (Some("EC"), Some("P-256")) => {
                let (x, y) = (b("x")?, b("y")?);
                if x.len() != 32 || y.len() != 32 {
                    return Err(JwsError::Key(
                        "a P-256 key has coordinates of 32 bytes".into(),
                    ));
                }
                Public::P256 { x, y }
            }
            (Some("RSA"), _) => Public::rsa(&b("n")?, &b("e")?)?,
            (kty, crv) => {
                return Err(JwsError::Key(format!(
                    "unsupported JWK (kty {}, crv {}): use OKP/Ed25519, EC/P-256 or RSA",
                    kty.unwrap_or("missing"),
                    crv.unwrap_or("none")
                )));
            }
        };
        if let Some(alg) = s("alg") {
            if alg != public.algorithm().as_str() {
                return Err(JwsError::Algorithm(format!(
                    "the JWK says alg {alg}, but it is a {} key",
                    public.algorithm()
                )));
            }
        }
        if let Some(u) = s("use") {
            if u != "sig" {
                return Err(JwsError::Key(format!(
                    "the JWK is for {u:?}, not signatures"
                )));
            }
        }
        let mut key = Self::new(public);
        if let Some(kid) = s("kid").filter(|k| !k.is_empty()) {
            key.kid = kid.to_owned();
            key.declared = true;
        }
        Ok(key)
    }

    /// A key from PEM text: a public key (`PUBLIC KEY`, `RSA PUBLIC KEY`)
    /// or a private key, whose public part is taken.
    pub fn from_pem(pem: &str) -> Result<Self, JwsError> {
        for (label, der) in pem_blocks(pem)? {
            match label.as_str() {
                "PUBLIC KEY" => return Self::from_spki_der(&der),
                "RSA PUBLIC KEY" => return rsa_public_pkcs1(&der).map(Self::new),
                "EC PARAMETERS" => continue,
                _ => return private_from_pem_block(&label, &der).map(|k| k.public),
            }
        }
        Err(JwsError::Key("no PEM key found".into()))
    }

    /// A key from a PEM file (see [`Self::from_pem`]).
    pub fn from_pem_file(path: impl AsRef<Path>) -> Result<Self, JwsError> {
        let path = path.as_ref();
        Self::from_pem(&read_text(path)?)
            .map_err(|e| JwsError::Key(format!("{}: {e}", path.display())))
    }

    /// A key from a DER `SubjectPublicKeyInfo`.
    pub fn from_spki_der(der: &[u8]) -> Result<Self, JwsError> {
        let spki = pkcs8::spki::SubjectPublicKeyInfoRef::try_from(der)
            .map_err(|e| JwsError::Key(format!("not a public key: {e}")))?;
        let bits = spki.subject_public_key.raw_bytes();
        let public = match spki.algorithm.oid {
            OID_ED25519 if bits.len() == 32 => Public::Ed25519 { x: bits.to_vec() },
            OID_ED25519 => return Err(JwsError::Key("an Ed25519 key has 32 bytes".into())),
            OID_EC_PUBLIC_KEY => {
                check_p256(spki.algorithm.parameters_oid().ok())?;
                Public::p256_point(bits)?
            }
            OID_RSA => rsa_public_pkcs1(bits)?,
            oid => return Err(unsupported_key(oid)),
        };
        Ok(Self::new(public))
    }

    /// The same key under another key id.
    pub fn with_kid(mut self, kid: impl Into<String>) -> Self {
        self.kid = kid.into();
        self.declared = true;
        self
    }

    /// Whether the key id was given (by a JWK or [`Self::with_kid`]) rather
    /// than derived from the key (the thumbprint of a key from a PEM file).
    pub fn has_declared_kid(&self) -> bool {
        self.declared
    }

    /// The key id.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The algorithm this key verifies.
    pub fn algorithm(&self) -> Algorithm {
        self.public.algorithm()
    }

    /// The RFC 7638 thumbprint of the key (its default key id).
    pub fn thumbprint(&self) -> String {
        self.public.thumbprint()
    }

    /// The public JWK, with `kid`, `alg` and `use`.
    pub fn to_jwk(&self) -> Value {
        let mut m = self.public.jwk_members();
        m.insert("kid".into(), self.kid.clone().into());
        m.insert("alg".into(), self.algorithm().as_str().into());
        m.insert("use".into(), "sig".into());
        Value::Object(m)
    }

    /// Verifies `signature` (base64url) over `signing_input` made with
    /// `alg`, which must be this key's algorithm.
    pub fn verify(
        &self,
        alg: Algorithm,
        signing_input: &[u8],
        signature: &str,
    ) -> Result<(), JwsError> {
        if alg != self.algorithm() {
            return Err(JwsError::Algorithm(format!(
                "the signature says {alg}, but key {:?} is a {} key",
                self.kid,
                self.algorithm()
            )));
        }
        match jwt::crypto::verify(
            signature.trim_end_matches('='),
            signing_input,
            &self.key,
            alg.jwt(),
        ) {
            Ok(true) => Ok(()),
            Ok(false) => Err(JwsError::BadSignature),
            Err(e) => Err(JwsError::Malformed(format!("unreadable signature: {e}"))),
        }
    }
}

/// A set of public keys (a JWKS, RFC 7517 section 5), looked up by key id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeySet {
    keys: Vec<VerifyingKey>,
}

impl KeySet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The usable keys of a JWKS document (`{"keys": [...]}`); keys of
    /// other types or uses are left out, as RFC 7517 asks.
    pub fn from_jwks(doc: &Value) -> Result<Self, JwsError> {
        let keys = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| JwsError::Key("not a JWKS document (no \"keys\" array)".into()))?;
        let mut set = Self::new();
        for k in keys {
            if let Ok(key) = VerifyingKey::from_jwk(k) {
                set.push(key);
            }
        }
        Ok(set)
    }

    /// Adds a key (replacing one with the same key id).
    pub fn push(&mut self, key: VerifyingKey) {
        self.keys.retain(|k| k.kid != key.kid);
        self.keys.push(key);
    }

    /// Adds every key of `other`.
    pub fn extend(&mut self, other: KeySet) {
        for k in other.keys {
            self.push(k);
        }
    }

    /// The key with this id; an empty id names the only key of a set of one.
    pub fn find(&self, kid: &str) -> Option<&VerifyingKey> {
        let only = match self.keys.as_slice() {
            [only] if kid.is_empty() => Some(only),
            _ => None,
        };
        self.keys.iter().find(|k| k.kid == kid).or(only)
    }

    /// The keys that may have made a signature with key id `kid` and
    /// algorithm `alg`: the key with that id, else the keys whose id is
    /// only derived (from PEM files: the signer's key id is not known for
    /// them) of that algorithm.
    pub fn candidates(&self, kid: &str, alg: Algorithm) -> Vec<&VerifyingKey> {
        match self.find(kid) {
            Some(k) => vec![k],
            None => self
                .keys
                .iter()
                .filter(|k| !k.declared && k.algorithm() == alg)
                .collect(),
        }
    }

    /// The keys.
    pub fn iter(&self) -> impl Iterator<Item = &VerifyingKey> {
        self.keys.iter()
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The JWKS document.
    pub fn to_jwks(&self) -> Value {
        json!({ "keys": self.keys.iter().map(VerifyingKey::to_jwk).collect::<Vec<_>>() })
    }
}

/// A private key that signs, with its algorithm and key id.
#[derive(Clone)]
pub struct SigningKey {
    encoding: jwt::EncodingKey,
    public: VerifyingKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        f.debug_struct("SigningKey")
            .field("kid", &self.public.kid)
            .field("alg", &self.algorithm())
            .finish()
    }
}

impl SigningKey {
    /// A key from PEM text: PKCS#8 (`PRIVATE KEY`: Ed25519, P-256 or RSA),
    /// PKCS#1 (`RSA PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`, P-256).
    /// Encrypted keys are refused.
    pub fn from_pem(pem: &str) -> Result<Self, JwsError> {
        for (label, der) in pem_blocks(pem)? {
            if label == "EC PARAMETERS" {
                continue;
            }
            return private_from_pem_block(&label, &der);
        }
        Err(JwsError::Key("no PEM key found".into()))
    }

    /// A key from a PEM file (see [`Self::from_pem`]).
    pub fn from_pem_file(path: impl AsRef<Path>) -> Result<Self, JwsError> {
        let path = path.as_ref();
        Self::from_pem(&read_text(path)?)
            .map_err(|e| JwsError::Key(format!("{}: {e}", path.display())))
    }

    /// A key from DER PKCS#8 (Ed25519, P-256 or RSA).
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, JwsError> {
        let info = pkcs8::PrivateKeyInfo::try_from(der)
            .map_err(|e| JwsError::Key(format!("not a PKCS#8 private key: {e}")))?;
        match info.algorithm.oid {
            OID_ED25519 => {
                use ring::signature::KeyPair;
                let kp = ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
                    .map_err(|e| JwsError::Key(format!("not a usable Ed25519 key: {e}")))?;
                let public = Public::Ed25519 {
                    x: kp.public_key().as_ref().to_vec(),
                };
                Ok(Self::with(jwt::EncodingKey::from_ed_der(der), public))
            }
            OID_EC_PUBLIC_KEY => {
                use ring::signature::KeyPair;
                check_p256(info.algorithm.parameters_oid().ok())?;
                let kp = ring::signature::EcdsaKeyPair::from_pkcs8(
                    &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    der,
                    &ring::rand::SystemRandom::new(),
                )
                .map_err(|e| {
                    JwsError::Key(format!(
                        "not a usable P-256 key: {e} (the key must include its public key)"
                    ))
                })?;
                let public = Public::p256_point(kp.public_key().as_ref())?;
                Ok(Self::with(jwt::EncodingKey::from_ec_der(der), public))
            }
            OID_RSA => Self::from_pkcs1_der(info.private_key),
            oid => Err(unsupported_key(oid)),
        }
    }

    /// An RSA key from DER PKCS#1 (`RSAPrivateKey`).
    pub fn from_pkcs1_der(der: &[u8]) -> Result<Self, JwsError> {
        let kp = ring::signature::RsaKeyPair::from_der(der)
            .map_err(|e| JwsError::Key(format!("not a usable RSA key: {e}")))?;
        let c = ring::signature::RsaPublicKeyComponents::<Vec<u8>>::from(kp.public());
        let public = Public::rsa(&c.n, &c.e)?;
        Ok(Self::with(jwt::EncodingKey::from_rsa_der(der), public))
    }

    fn with(encoding: jwt::EncodingKey, public: Public) -> Self {
        Self {
            encoding,
            public: VerifyingKey::new(public),
        }
    }

    /// A new Ed25519 private key in DER PKCS#8.
    pub fn generate_ed25519_pkcs8() -> Result<Vec<u8>, JwsError> {
        ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
            .map(|d| d.as_ref().to_vec())
            .map_err(|_| JwsError::Key("cannot generate an Ed25519 key".into()))
    }

    /// A new P-256 private key in DER PKCS#8.
    pub fn generate_p256_pkcs8() -> Result<Vec<u8>, JwsError> {
        ring::signature::EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &ring::rand::SystemRandom::new(),
        )
        .map(|d| d.as_ref().to_vec())
        .map_err(|_| JwsError::Key("cannot generate a P-256 key".into()))
    }

    /// The same key under another key id (default: the RFC 7638
    /// thumbprint of its public key).
    pub fn with_kid(mut self, kid: impl Into<String>) -> Self {
        self.public = self.public.with_kid(kid);
        self
    }

    /// The key id.
    pub fn kid(&self) -> &str {
        &self.public.kid
    }

    /// The algorithm it signs with.
    pub fn algorithm(&self) -> Algorithm {
        self.public.algorithm()
    }

    /// Its public key (same key id).
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.public
    }

    /// The signature (base64url) of a JWS signing input.
    pub fn sign(&self, signing_input: &[u8]) -> Result<String, JwsError> {
        jwt::crypto::sign(signing_input, &self.encoding, self.algorithm().jwt())
            .map_err(|e| JwsError::Key(format!("cannot sign: {e}")))
    }

    /// A JWS in compact serialization: `header` (its `alg` and `kid` set
    /// from this key) and `payload`.
    pub fn sign_compact(
        &self,
        mut header: Map<String, Value>,
        payload: &[u8],
    ) -> Result<String, JwsError> {
        let protected = self.protected_header(&mut header);
        let input = format!("{protected}.{}", B64.encode(payload));
        let sig = self.sign(input.as_bytes())?;
        Ok(format!("{input}.{sig}"))
    }

    /// A signed JWT (`typ: JWT`) carrying `claims`.
    pub fn sign_jwt(&self, claims: &Value) -> Result<String, JwsError> {
        let mut header = Map::new();
        header.insert("typ".into(), "JWT".into());
        let payload =
            serde_json::to_vec(claims).map_err(|e| JwsError::Malformed(format!("claims: {e}")))?;
        self.sign_compact(header, &payload)
    }

    /// The encoded protected header: `alg`, then the given members, then
    /// `kid`.
    fn protected_header(&self, header: &mut Map<String, Value>) -> String {
        let mut h = Map::new();
        h.insert("alg".into(), self.algorithm().as_str().into());
        for (k, v) in std::mem::take(header) {
            if k != "alg" && k != "kid" {
                h.insert(k, v);
            }
        }
        h.insert("kid".into(), self.kid().into());
        B64.encode(Value::Object(h).to_string())
    }
}

/// What a verified compact JWS carried.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    /// The protected header.
    pub header: Map<String, Value>,
    /// The payload bytes.
    pub payload: Vec<u8>,
    /// The id of the key that verified it.
    pub kid: String,
    /// Its algorithm.
    pub algorithm: Algorithm,
}

/// The protected header of a JWS (base64url JSON object), checked for what
/// a verifier must understand: a supported `alg` and no `crit` extension.
pub fn decode_protected(protected: &str) -> Result<(Map<String, Value>, Algorithm), JwsError> {
    let bytes = b64_decode(protected)
        .ok_or_else(|| JwsError::Malformed("the protected header is not base64url".into()))?;
    let header: Map<String, Value> = serde_json::from_slice(&bytes)
        .map_err(|_| JwsError::Malformed("the protected header is not a JSON object".into()))?;
    if header.contains_key("crit") {
        // RFC 7515 4.1.11: extensions this verifier does not know.
        return Err(JwsError::Malformed(
            "the protected header lists critical extensions (crit) this verifier does not support"
                .into(),
        ));
    }
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let alg = Algorithm::from_name(alg).ok_or_else(|| {
        JwsError::Algorithm(format!(
            "unsupported algorithm {alg:?} (supported: EdDSA, ES256, RS256)"
        ))
    })?;
    Ok((header, alg))
}

/// Verifies a compact JWS with the key its `kid` names in `keys`.
pub fn verify_compact(token: &str, keys: &KeySet) -> Result<Verified, JwsError> {
    let token = token.trim();
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwsError::Malformed(
            "not a compact JWS (three parts)".into(),
        ));
    };
    let (header, alg) = decode_protected(h)?;
    let kid = header
        .get("kid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let key = keys
        .find(&kid)
        .ok_or_else(|| JwsError::UnknownKey(kid.clone()))?;
    key.verify(alg, &token.as_bytes()[..h.len() + 1 + p.len()], s)?;
    let payload =
        b64_decode(p).ok_or_else(|| JwsError::Malformed("the payload is not base64url".into()))?;
    Ok(Verified {
        header,
        payload,
        kid: key.kid().to_owned(),
        algorithm: alg,
    })
}

/// Verifies a signed JWT and its times: `exp` is required and checked,
/// `nbf` when present, both with `leeway`; an `iat` in the future (beyond
/// the leeway) is refused. Returns the header and the claims.
pub fn verify_jwt(
    token: &str,
    keys: &KeySet,
    leeway: Duration,
) -> Result<(Map<String, Value>, Value), JwsError> {
    let h = token.trim().split('.').next().unwrap_or_default();
    let (header, _) = decode_protected(h)?;
    let kid = header
        .get("kid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let key = keys
        .find(kid)
        .ok_or_else(|| JwsError::UnknownKey(kid.to_owned()))?;
    verify_jwt_with(token, key, leeway)
}

/// [`verify_jwt`] with the key already chosen (e.g. by the `kid` of
/// [`decode_protected`]).
pub fn verify_jwt_with(
    token: &str,
    key: &VerifyingKey,
    leeway: Duration,
) -> Result<(Map<String, Value>, Value), JwsError> {
    let token = token.trim();
    let h = token.split('.').next().unwrap_or_default();
    let (header, alg) = decode_protected(h)?;
    if key.algorithm() != alg {
        return Err(JwsError::Algorithm(format!(
            "the token says {alg}, but key {:?} is a {} key",
            key.kid(),
            key.algorithm()
        )));
    }
    let mut validation = jwt::Validation::new(alg.jwt());
    validation.leeway = leeway.as_secs();
    validation.validate_nbf = true;
    // The audience is the receiver's business (a webhook may sit behind a
    // proxy that rewrote its URL).
    validation.validate_aud = false;
    let data = jwt::decode::<Value>(token, &key.key, &validation).map_err(|e| {
        use jwt::errors::ErrorKind as K;
        match e.kind() {
            K::InvalidSignature => JwsError::BadSignature,
            K::ExpiredSignature => JwsError::Claims("expired".into()),
            K::ImmatureSignature => JwsError::Claims("not valid yet (nbf)".into()),
            K::MissingRequiredClaim(c) => JwsError::Claims(format!("no {c} claim")),
            K::InvalidAlgorithm => JwsError::Algorithm("algorithm not allowed".into()),
            _ => JwsError::Malformed(e.to_string()),
        }
    })?;
    let now = chrono::Utc::now().timestamp();
    if data
        .claims
        .get("iat")
        .and_then(Value::as_i64)
        .is_some_and(|iat| iat.saturating_sub(leeway.as_secs() as i64) > now)
    {
        return Err(JwsError::Claims("issued in the future".into()));
    }
    Ok((header, data.claims))
}

/// The JCS (RFC 8785) form of a JSON value.
pub fn canonical_json(value: &Value) -> Result<Vec<u8>, JwsError> {
    serde_json_canonicalizer::to_vec(value)
        .map_err(|e| JwsError::Malformed(format!("cannot canonicalize: {e}")))
}

/// Which canonical form of the card a signature signs.
///
/// The specification's form is RFC 8785 (JCS) of the card's JSON without
/// `signatures` and without default values (spec 8.4.1). The official A2A
/// SDKs (Python and JavaScript) canonicalize another form: the card read
/// into their 1.0 model (members 1.0 does not define left out), then every
/// `null`, empty string, empty list and empty object removed, recursively
/// (an object or list left empty by that goes too), then JCS. The two are
/// the same bytes for a card without such values; they differ as soon as
/// one is there (an empty `params` object of an extension, a `null` inside
/// it, an empty description...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CardSignatureForm {
    /// RFC 8785 of the card as served (the specification's form).
    Rfc8785,
    /// The form the official SDKs sign and verify.
    Sdk,
    /// Both: each key signs the RFC 8785 form and, when it differs, the
    /// SDK form too (a second signature), so that verifiers of either kind
    /// find one they check. The default.
    #[default]
    Both,
}

impl CardSignatureForm {
    /// `rfc8785`, `sdk` or `both`.
    pub fn as_str(self) -> &'static str {
        match self {
            CardSignatureForm::Rfc8785 => "rfc8785",
            CardSignatureForm::Sdk => "sdk",
            CardSignatureForm::Both => "both",
        }
    }

    /// The form named `rfc8785`, `sdk` or `both`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "rfc8785" => Some(CardSignatureForm::Rfc8785),
            "sdk" => Some(CardSignatureForm::Sdk),
            "both" => Some(CardSignatureForm::Both),
            _ => None,
        }
    }
}

impl std::fmt::Display for CardSignatureForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bytes an agent card's signatures sign (spec 8.4.1): the card's JSON
/// with default values left out (its ProtoJSON form, which omits them) and
/// without `signatures`, in JCS form.
pub fn card_signing_payload(card: &AgentCard) -> Result<Vec<u8>, JwsError> {
    document_signing_payload(&card_value(card)?)
}

/// The bytes the official SDKs sign for `card` (see
/// [`CardSignatureForm::Sdk`]).
pub fn card_sdk_payload(card: &AgentCard) -> Result<Vec<u8>, JwsError> {
    let mut v = card_value(card)?;
    strip_signatures(&mut v);
    canonical_json(&without_empty(v).unwrap_or_else(|| Value::Object(Map::new())))
}

/// The RFC 8785 payload of a card document as it is (any members, e.g. a
/// card served with the members of another protocol version beside the
/// 1.0 ones): its JCS form without `signatures`.
pub fn document_signing_payload(doc: &Value) -> Result<Vec<u8>, JwsError> {
    let mut v = doc.clone();
    strip_signatures(&mut v);
    canonical_json(&v)
}

/// The payloads a card is signed over in `form`, RFC 8785 first (the SDK
/// form only when it differs).
pub fn card_payloads(card: &AgentCard, form: CardSignatureForm) -> Result<Vec<Vec<u8>>, JwsError> {
    let mut out = Vec::new();
    if form != CardSignatureForm::Sdk {
        out.push(card_signing_payload(card)?);
    }
    if form != CardSignatureForm::Rfc8785 {
        let sdk = card_sdk_payload(card)?;
        if !out.contains(&sdk) {
            out.push(sdk);
        }
    }
    Ok(out)
}

fn card_value(card: &AgentCard) -> Result<Value, JwsError> {
    serde_json::to_value(card)
        .map_err(|e| JwsError::Malformed(format!("the card cannot be serialized: {e}")))
}

fn strip_signatures(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        o.remove("signatures");
    }
}

/// One signature per key over `payload` (a detached JWS, spec 8.4.2): the
/// protected header has `alg`, `typ: JOSE`, `kid` and, when given, `jku`
/// (the URL of the JWKS publishing the keys).
pub fn sign_payload(
    payload: &[u8],
    keys: &[SigningKey],
    jku: Option<&str>,
) -> Result<Vec<AgentCardSignature>, JwsError> {
    let payload = B64.encode(payload);
    keys.iter()
        .map(|key| {
            let mut header = Map::new();
            header.insert("typ".into(), CARD_SIGNATURE_TYP.into());
            if let Some(jku) = jku {
                header.insert("jku".into(), jku.into());
            }
            let protected = key.protected_header(&mut header);
            let signature = key.sign(format!("{protected}.{payload}").as_bytes())?;
            Ok(AgentCardSignature {
                protected,
                signature,
                header: None,
            })
        })
        .collect()
}

/// Signs `card` with each key (spec 8.4.2) over its RFC 8785 form,
/// replacing the signatures it had (which the changes made to it since
/// would have broken anyway). See [`sign_card_as`] for the SDKs' form.
pub fn sign_card(
    card: &mut AgentCard,
    keys: &[SigningKey],
    jku: Option<&str>,
) -> Result<(), JwsError> {
    sign_card_as(card, keys, jku, CardSignatureForm::Rfc8785)
}

/// Signs `card` with each key over the payloads of `form`
/// ([`card_payloads`]: with [`CardSignatureForm::Both`], two signatures
/// per key when the forms differ, the RFC 8785 ones first), replacing the
/// signatures it had.
pub fn sign_card_as(
    card: &mut AgentCard,
    keys: &[SigningKey],
    jku: Option<&str>,
    form: CardSignatureForm,
) -> Result<(), JwsError> {
    card.signatures.clear();
    let mut signatures = Vec::new();
    for payload in card_payloads(card, form)? {
        signatures.extend(sign_payload(&payload, keys, jku)?);
    }
    card.signatures = signatures;
    Ok(())
}

/// What checking a card's signatures found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardSignatureStatus {
    /// The card carries no signature.
    Absent,
    /// A signature verified with a trusted key.
    Verified {
        /// The key id the signature names (else the trusted key's).
        kid: String,
        /// The algorithm.
        algorithm: Algorithm,
        /// The id of the trusted key that verified it (for a key from a
        /// PEM file, its thumbprint).
        key: String,
        /// The canonical form it signs (RFC 8785 is tried first).
        form: CardSignatureForm,
    },
    /// The card is signed, but no signature verified with a trusted key.
    Unverified {
        /// Why, for each signature.
        reason: String,
    },
}

impl CardSignatureStatus {
    /// `absent`, `verified` or `unverified`.
    pub fn as_str(&self) -> &'static str {
        match self {
            CardSignatureStatus::Absent => "absent",
            CardSignatureStatus::Verified { .. } => "verified",
            CardSignatureStatus::Unverified { .. } => "unverified",
        }
    }

    /// Whether a signature verified.
    pub fn is_verified(&self) -> bool {
        matches!(self, CardSignatureStatus::Verified { .. })
    }
}

/// The key-locating parameters of one card signature.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignatureKeyHint {
    /// `kid` (protected header, else the unprotected one).
    pub kid: Option<String>,
    /// `jku`: the URL of a JWKS with the key.
    pub jku: Option<String>,
    /// `alg`.
    pub alg: Option<String>,
}

fn signatures_of(card: &Value) -> &[Value] {
    card.get("signatures")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The `kid`, `jku` and `alg` of each signature of a card (JSON), for a
/// verifier to find the keys (e.g. fetch the JWKS a `jku` names) before
/// [`verify_card`]. Unreadable headers give an empty hint.
pub fn card_signature_hints(card: &Value) -> Vec<SignatureKeyHint> {
    signatures_of(card)
        .iter()
        .take(MAX_SIGNATURES)
        .map(|sig| {
            let protected = sig
                .get("protected")
                .and_then(Value::as_str)
                .and_then(b64_decode)
                .and_then(|b| serde_json::from_slice::<Map<String, Value>>(&b).ok())
                .unwrap_or_default();
            let get = |k: &str| {
                protected
                    .get(k)
                    .or_else(|| sig.get("header").and_then(|h| h.get(k)))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            SignatureKeyHint {
                kid: get("kid"),
                jku: protected
                    .get("jku")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                alg: protected
                    .get("alg")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            }
        })
        .collect()
}

/// Removes `null`, empty strings, empty arrays and empty objects,
/// recursively, an array or object emptied by that included (how the
/// official A2A SDKs prepare a card before canonicalizing it); `None` when
/// nothing is left.
fn without_empty(v: Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Array(a) => {
            let a: Vec<Value> = a.into_iter().filter_map(without_empty).collect();
            (!a.is_empty()).then_some(Value::Array(a))
        }
        Value::Object(o) => {
            let o: Map<String, Value> = o
                .into_iter()
                .filter_map(|(k, v)| without_empty(v).map(|v| (k, v)))
                .collect();
            (!o.is_empty()).then_some(Value::Object(o))
        }
        other => Some(other),
    }
}

/// The payloads a signature of `card` may sign, in the order they are
/// tried: RFC 8785 first, of the card as received and of the card with
/// its default values and the members 1.0 does not define removed (parsed
/// and written again as ProtoJSON, spec 8.4.3 step 3); then the SDKs' form
/// of the latter ([`CardSignatureForm::Sdk`]). Each leaves out
/// `signatures`.
fn card_payload_candidates(card: &Value) -> Vec<(Vec<u8>, CardSignatureForm)> {
    let mut out: Vec<(Vec<u8>, CardSignatureForm)> = Vec::new();
    let mut add = |mut v: Value, form: CardSignatureForm| {
        strip_signatures(&mut v);
        if let Ok(bytes) = canonical_json(&v) {
            if !out.iter().any(|(b, _)| *b == bytes) {
                out.push((bytes, form));
            }
        }
    };
    add(card.clone(), CardSignatureForm::Rfc8785);
    if let Some(normal) = serde_json::from_value::<AgentCard>(card.clone())
        .ok()
        .and_then(|c| serde_json::to_value(&c).ok())
    {
        add(normal.clone(), CardSignatureForm::Rfc8785);
        let mut normal = normal;
        strip_signatures(&mut normal);
        add(
            without_empty(normal).unwrap_or_else(|| Value::Object(Map::new())),
            CardSignatureForm::Sdk,
        );
    }
    out
}

/// Checks the signatures of a card (its JSON, as received) against the
/// trusted `keys` (spec 8.4.3): verified as soon as one signature verifies
/// with a key of the set, over the RFC 8785 form of the card or, failing
/// that, over the official SDKs' form ([`CardSignatureForm`]); otherwise
/// unverified with the reason for each.
pub fn verify_card(card: &Value, keys: &KeySet) -> CardSignatureStatus {
    let sigs = signatures_of(card);
    if sigs.is_empty() {
        return CardSignatureStatus::Absent;
    }
    let candidates = card_payload_candidates(card);
    let mut reasons = Vec::new();
    for (i, sig) in sigs.iter().take(MAX_SIGNATURES).enumerate() {
        match verify_one(sig, &candidates, keys) {
            Ok((kid, algorithm, key, form)) => {
                return CardSignatureStatus::Verified {
                    kid,
                    algorithm,
                    key,
                    form,
                };
            }
            Err(e) if sigs.len() == 1 => reasons.push(e.to_string()),
            Err(e) => reasons.push(format!("signature {}: {e}", i + 1)),
        }
    }
    CardSignatureStatus::Unverified {
        reason: reasons.join("; "),
    }
}

fn verify_one(
    sig: &Value,
    candidates: &[(Vec<u8>, CardSignatureForm)],
    keys: &KeySet,
) -> Result<(String, Algorithm, String, CardSignatureForm), JwsError> {
    let protected = sig
        .get("protected")
        .and_then(Value::as_str)
        .ok_or_else(|| JwsError::Malformed("no protected header".into()))?;
    let signature = sig
        .get("signature")
        .and_then(Value::as_str)
        .ok_or_else(|| JwsError::Malformed("no signature value".into()))?;
    let (header, alg) = decode_protected(protected)?;
    let kid = header
        .get("kid")
        .or_else(|| sig.get("header").and_then(|h| h.get("kid")))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let exact = keys.find(kid).is_some();
    let trusted = keys.candidates(kid, alg);
    if trusted.is_empty() {
        return Err(JwsError::UnknownKey(kid.to_owned()));
    }
    let mut last = JwsError::BadSignature;
    for key in trusted {
        for (payload, form) in candidates {
            let input = format!("{protected}.{}", B64.encode(payload));
            match key.verify(alg, input.as_bytes(), signature) {
                Ok(()) => {
                    let named = if kid.is_empty() { key.kid() } else { kid };
                    return Ok((named.to_owned(), alg, key.kid().to_owned(), *form));
                }
                Err(JwsError::BadSignature) => {}
                Err(e) => {
                    last = e;
                    break;
                }
            }
        }
    }
    Err(match last {
        // Only keys of unknown id were tried: none of them made it.
        JwsError::BadSignature if !exact => JwsError::UnknownKey(kid.to_owned()),
        JwsError::BadSignature => JwsError::Claims(format!(
            "the signature of key {kid:?} does not match the card's content \
             (the card was changed after it was signed, or signed with another key)"
        )),
        e => e,
    })
}

// --- PEM and DER ------------------------------------------------------------

fn read_text(path: &Path) -> Result<String, JwsError> {
    std::fs::read_to_string(path)
        .map_err(|e| JwsError::Key(format!("cannot read {}: {e}", path.display())))
}

/// The blocks of a PEM text (label and DER), in order. The PEM decoding is
/// `pem-rfc7468`'s; a file may hold several blocks (e.g. `openssl ecparam
/// -genkey` writes the curve's parameters before the key) and text around
/// them, which RFC 7468 allows.
fn pem_blocks(text: &str) -> Result<Vec<(String, Vec<u8>)>, JwsError> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let block = &rest[start..];
        let label_end = block["-----BEGIN ".len()..]
            .find("-----")
            .ok_or_else(|| JwsError::Key("a PEM block without its label's end".into()))?;
        let label = &block["-----BEGIN ".len().."-----BEGIN ".len() + label_end];
        let end_marker = format!("-----END {label}-----");
        let end = block
            .find(&end_marker)
            .ok_or_else(|| JwsError::Key(format!("the PEM block {label} has no end")))?
            + end_marker.len();
        let (decoded_label, der) = pkcs8::der::pem::decode_vec(&block.as_bytes()[..end])
            .map_err(|e| JwsError::Key(format!("unreadable PEM block {label}: {e}")))?;
        blocks.push((decoded_label.to_owned(), der));
        rest = &block[end..];
    }
    if blocks.is_empty() {
        return Err(JwsError::Key(
            "not a PEM file (no -----BEGIN ...----- line)".into(),
        ));
    }
    Ok(blocks)
}

fn private_from_pem_block(label: &str, der: &[u8]) -> Result<SigningKey, JwsError> {
    match label {
        "PRIVATE KEY" => SigningKey::from_pkcs8_der(der),
        "RSA PRIVATE KEY" => SigningKey::from_pkcs1_der(der),
        "EC PRIVATE KEY" => SigningKey::from_pkcs8_der(&sec1_to_pkcs8(der)?),
        "ENCRYPTED PRIVATE KEY" => Err(JwsError::Key(
            "the key is encrypted: write it decrypted (e.g. `openssl pkcs8 -in KEY -out PLAIN.pem`) to a file only the server can read".into(),
        )),
        "PUBLIC KEY" | "RSA PUBLIC KEY" | "CERTIFICATE" => Err(JwsError::Key(format!(
            "a {label} cannot sign: give the private key"
        ))),
        other => Err(JwsError::Key(format!(
            "unsupported PEM block {other:?} (expected PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)"
        ))),
    }
}

/// A SEC1 `ECPrivateKey` (RFC 5915) wrapped as PKCS#8 on P-256, which is
/// what *ring* reads (it checks that the curve inside matches).
fn sec1_to_pkcs8(sec1: &[u8]) -> Result<Vec<u8>, JwsError> {
    let params = pkcs8::der::asn1::AnyRef::from(&OID_P256);
    let info = pkcs8::PrivateKeyInfo {
        algorithm: pkcs8::spki::AlgorithmIdentifierRef {
            oid: OID_EC_PUBLIC_KEY,
            parameters: Some(params),
        },
        private_key: sec1,
        public_key: None,
    };
    info.to_der()
        .map_err(|e| JwsError::Key(format!("not a usable EC private key: {e}")))
}

fn rsa_public_pkcs1(der: &[u8]) -> Result<Public, JwsError> {
    let k = pkcs1::RsaPublicKey::try_from(der)
        .map_err(|e| JwsError::Key(format!("not an RSA public key: {e}")))?;
    Public::rsa(k.modulus.as_bytes(), k.public_exponent.as_bytes())
}

fn check_p256(curve: Option<ObjectIdentifier>) -> Result<(), JwsError> {
    match curve {
        Some(OID_P256) => Ok(()),
        Some(other) => Err(JwsError::Key(format!(
            "only the P-256 curve is supported for EC keys (ES256); this key is on curve {other}"
        ))),
        None => Err(JwsError::Key("an EC key that names no curve".into())),
    }
}

fn unsupported_key(oid: ObjectIdentifier) -> JwsError {
    JwsError::Key(format!(
        "unsupported key type (algorithm {oid}): use an Ed25519, P-256 or RSA key"
    ))
}

/// PEM text of DER PKCS#8 (`PRIVATE KEY`), e.g. to keep a generated key in
/// a file.
pub fn pkcs8_to_pem(der: &[u8]) -> Result<String, JwsError> {
    pkcs8::der::pem::encode_string("PRIVATE KEY", pkcs8::der::pem::LineEnding::LF, der)
        .map_err(|e| JwsError::Key(format!("cannot write the key as PEM: {e}")))
}

/// PEM text of a public key (`PUBLIC KEY`, DER SubjectPublicKeyInfo).
pub fn public_key_pem(key: &VerifyingKey) -> Result<String, JwsError> {
    use pkcs8::der::asn1::{AnyRef, BitStringRef};
    let rsa_der;
    let point;
    let (oid, params, bits): (ObjectIdentifier, Option<AnyRef<'_>>, &[u8]) = match &key.public {
        Public::Ed25519 { x } => (OID_ED25519, None, x),
        Public::P256 { x, y } => {
            point = [&[4u8][..], x, y].concat();
            (OID_EC_PUBLIC_KEY, Some(AnyRef::from(&OID_P256)), &point)
        }
        Public::Rsa { n, e } => {
            let k = pkcs1::RsaPublicKey {
                modulus: pkcs1::UintRef::new(n)
                    .map_err(|e| JwsError::Key(format!("RSA modulus: {e}")))?,
                public_exponent: pkcs1::UintRef::new(e)
                    .map_err(|e| JwsError::Key(format!("RSA exponent: {e}")))?,
            };
            rsa_der = k
                .to_der()
                .map_err(|e| JwsError::Key(format!("RSA key: {e}")))?;
            (
                OID_RSA,
                Some(AnyRef::from(pkcs8::der::asn1::Null)),
                &rsa_der,
            )
        }
    };
    let spki = pkcs8::spki::SubjectPublicKeyInfoRef {
        algorithm: pkcs8::spki::AlgorithmIdentifierRef {
            oid,
            parameters: params,
        },
        subject_public_key: BitStringRef::from_bytes(bits)
            .map_err(|e| JwsError::Key(format!("public key: {e}")))?,
    };
    let der = spki
        .to_der()
        .map_err(|e| JwsError::Key(format!("public key: {e}")))?;
    pkcs8::der::pem::encode_string("PUBLIC KEY", pkcs8::der::pem::LineEnding::LF, &der)
        .map_err(|e| JwsError::Key(format!("cannot write the key as PEM: {e}")))
}

#[cfg(test)]
mod tests;
