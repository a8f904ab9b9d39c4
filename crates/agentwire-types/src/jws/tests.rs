use super::*;
use crate::{AgentCapabilities, AgentSkill, binding};

fn fixture(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/keys/");
    std::fs::read_to_string(format!("{path}{name}")).expect("fixture key")
}

fn ed25519() -> SigningKey {
    SigningKey::from_pkcs8_der(&SigningKey::generate_ed25519_pkcs8().unwrap()).unwrap()
}

fn p256() -> SigningKey {
    SigningKey::from_pkcs8_der(&SigningKey::generate_p256_pkcs8().unwrap()).unwrap()
}

fn rsa() -> SigningKey {
    SigningKey::from_pem(&fixture("rsa-pkcs8.pem")).unwrap()
}

fn card() -> AgentCard {
    let mut card = AgentCard::new("Echo", "Repeats what you say", "1.0.0")
        .with_interface("http://127.0.0.1:1/", binding::JSONRPC);
    card.capabilities = Some(AgentCapabilities {
        streaming: Some(true),
        push_notifications: Some(false),
        ..Default::default()
    });
    card.skills.push(AgentSkill {
        id: "echo".into(),
        name: "Echo".into(),
        description: "Echoes — ünïcode too".into(),
        tags: vec!["test".into()],
        ..Default::default()
    });
    card
}

fn trust(keys: &[&SigningKey]) -> KeySet {
    let mut set = KeySet::new();
    for k in keys {
        set.push(k.verifying_key().clone());
    }
    set
}

fn signed(keys: &[SigningKey], jku: Option<&str>) -> Value {
    let mut c = card();
    sign_card(&mut c, keys, jku).unwrap();
    serde_json::to_value(&c).unwrap()
}

#[test]
fn card_signatures_round_trip_for_each_algorithm() {
    for (key, alg) in [
        (ed25519(), Algorithm::EdDSA),
        (p256(), Algorithm::ES256),
        (rsa(), Algorithm::RS256),
    ] {
        assert_eq!(key.algorithm(), alg);
        let json = signed(
            std::slice::from_ref(&key),
            Some("https://agent.example/jwks"),
        );
        let sig = &json["signatures"][0];
        let (header, got) = decode_protected(sig["protected"].as_str().unwrap()).unwrap();
        assert_eq!(got, alg);
        assert_eq!(header["typ"], "JOSE");
        assert_eq!(header["kid"], key.kid());
        assert_eq!(header["jku"], "https://agent.example/jwks");
        assert_eq!(
            verify_card(&json, &trust(&[&key])),
            CardSignatureStatus::Verified {
                kid: key.kid().to_owned(),
                algorithm: alg,
                key: key.kid().to_owned(),
                form: CardSignatureForm::Rfc8785,
            },
            "{alg}"
        );
        // Through JSON text and back, as a client receives it.
        let text = serde_json::to_string(&json).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert!(verify_card(&back, &trust(&[&key])).is_verified());
    }
}

#[test]
fn the_payload_is_the_jcs_form_without_signatures() {
    let key = ed25519();
    let json = signed(std::slice::from_ref(&key), None);
    let payload = card_signing_payload(&serde_json::from_value(json.clone()).unwrap()).unwrap();
    let text = String::from_utf8(payload).unwrap();
    assert!(text.starts_with(r#"{"capabilities":{"pushNotifications":false,"streaming":true},"#));
    assert!(!text.contains("signatures"));
    // The signature is over exactly these bytes.
    let sig = &json["signatures"][0];
    let protected = sig["protected"].as_str().unwrap();
    let input = format!("{protected}.{}", B64.encode(text.as_bytes()));
    key.verifying_key()
        .verify(
            Algorithm::EdDSA,
            input.as_bytes(),
            sig["signature"].as_str().unwrap(),
        )
        .unwrap();
}

#[test]
fn any_change_to_the_card_breaks_the_signature() {
    let key = p256();
    let keys = trust(&[&key]);
    let json = signed(std::slice::from_ref(&key), None);
    type Tamper = Box<dyn Fn(&mut Value)>;
    let tampers: Vec<(&str, Tamper)> = vec![
        ("name", Box::new(|c| c["name"] = "Evil".into())),
        ("description", Box::new(|c| c["description"] = "".into())),
        (
            "interface url",
            Box::new(|c| c["supportedInterfaces"][0]["url"] = "http://evil/".into()),
        ),
        (
            "a capability",
            Box::new(|c| c["capabilities"]["streaming"] = false.into()),
        ),
        (
            "a skill",
            Box::new(|c| c["skills"][0]["tags"][0] = "other".into()),
        ),
        (
            "a new member",
            Box::new(|c| c["documentationUrl"] = "http://evil/".into()),
        ),
        (
            "the protected header",
            Box::new(|c| {
                let h = B64.encode(r#"{"alg":"ES256","typ":"JOSE","kid":"x"}"#);
                c["signatures"][0]["protected"] = h.into();
            }),
        ),
        (
            "the signature",
            Box::new(|c| {
                let s = c["signatures"][0]["signature"].as_str().unwrap().to_owned();
                let mut b = B64.decode(&s).unwrap();
                b[5] ^= 1;
                c["signatures"][0]["signature"] = B64.encode(b).into();
            }),
        ),
    ];
    for (what, tamper) in tampers {
        let mut c = json.clone();
        tamper(&mut c);
        match verify_card(&c, &keys) {
            CardSignatureStatus::Unverified { reason } => assert!(!reason.is_empty(), "{what}"),
            other => panic!("changing {what}: {other:?}"),
        }
    }
    // Unchanged, it verifies.
    assert!(verify_card(&json, &keys).is_verified());
}

#[test]
fn an_unknown_key_is_reported_as_such() {
    let signer = ed25519();
    let other = ed25519();
    let json = signed(std::slice::from_ref(&signer), None);
    match verify_card(&json, &trust(&[&other])) {
        CardSignatureStatus::Unverified { reason } => {
            assert!(reason.contains("no trusted key"), "{reason}");
            assert!(reason.contains(signer.kid()), "{reason}");
        }
        s => panic!("{s:?}"),
    }
    // The same key id on another key: the signature does not match.
    let impostor = other.verifying_key().clone().with_kid(signer.kid());
    let mut set = KeySet::new();
    set.push(impostor);
    match verify_card(&json, &set) {
        CardSignatureStatus::Unverified { reason } => {
            assert!(reason.contains("does not match"), "{reason}")
        }
        s => panic!("{s:?}"),
    }
    // A key of another type under the signer's key id: refused by algorithm.
    let mut set = KeySet::new();
    set.push(rsa().verifying_key().clone().with_kid(signer.kid()));
    match verify_card(&json, &set) {
        CardSignatureStatus::Unverified { reason } => assert!(reason.contains("RS256"), "{reason}"),
        s => panic!("{s:?}"),
    }
    assert_eq!(
        verify_card(&serde_json::to_value(card()).unwrap(), &set),
        CardSignatureStatus::Absent
    );
}

#[test]
fn key_rotation_through_the_jwks() {
    let old = ed25519();
    let new = p256();
    // Cards signed before the rotation (old key), during it (both) and
    // after (new key only).
    let before = signed(std::slice::from_ref(&old), None);
    let during = signed(&[new.clone(), old.clone()], None);
    let after = signed(std::slice::from_ref(&new), None);
    // The JWKS while both keys are published, as fetched by a client.
    let mut both = KeySet::new();
    both.push(old.verifying_key().clone());
    both.push(new.verifying_key().clone());
    let published = KeySet::from_jwks(&both.to_jwks()).unwrap();
    assert_eq!(published.len(), 2);
    for card in [&before, &during, &after] {
        assert!(verify_card(card, &published).is_verified());
    }
    // A client that only knows the old key still verifies the card signed
    // by both keys (with the old key's signature).
    match verify_card(&during, &trust(&[&old])) {
        CardSignatureStatus::Verified { kid, .. } => assert_eq!(kid, old.kid()),
        s => panic!("{s:?}"),
    }
    // Once the old key is withdrawn from the JWKS, old signatures no longer
    // verify; new ones do.
    let mut only_new = KeySet::new();
    only_new.push(new.verifying_key().clone());
    let published = KeySet::from_jwks(&only_new.to_jwks()).unwrap();
    assert!(matches!(
        verify_card(&before, &published),
        CardSignatureStatus::Unverified { .. }
    ));
    assert!(verify_card(&during, &published).is_verified());
    assert!(verify_card(&after, &published).is_verified());
}

#[test]
fn defaults_sent_by_the_signer_are_removed_before_checking() {
    let key = ed25519();
    let mut json = signed(std::slice::from_ref(&key), None);
    // A signer (or a proxy) that writes default values out.
    json["skills"][0]["examples"] = json!([]);
    json["documentationUrl"] = Value::Null;
    assert!(verify_card(&json, &trust(&[&key])).is_verified());
}

#[test]
fn keys_from_pem_files() {
    // RSA: PKCS#8 and PKCS#1 are the same key; the public key file too.
    let a = SigningKey::from_pem(&fixture("rsa-pkcs8.pem")).unwrap();
    let b = SigningKey::from_pem(&fixture("rsa-pkcs1.pem")).unwrap();
    let p = VerifyingKey::from_pem(&fixture("rsa-public.pem")).unwrap();
    assert_eq!(a.kid(), b.kid());
    assert_eq!(a.kid(), p.kid());
    assert_eq!(p.algorithm(), Algorithm::RS256);
    // EC in SEC1 with its parameters block first.
    let ec = SigningKey::from_pem(&fixture("ec-sec1.pem")).unwrap();
    assert_eq!(ec.algorithm(), Algorithm::ES256);
    let ec_pub = VerifyingKey::from_pem(&fixture("ec-public.pem")).unwrap();
    assert_eq!(ec.kid(), ec_pub.kid());
    let ed = SigningKey::from_pem(&fixture("ed25519.pem")).unwrap();
    let ed_pub = VerifyingKey::from_pem(&fixture("ed25519-public.pem")).unwrap();
    assert_eq!(ed.kid(), ed_pub.kid());
    // A private key file as a trusted key: its public part.
    assert_eq!(
        VerifyingKey::from_pem(&fixture("ed25519.pem")).unwrap(),
        ed_pub
    );
    // Signed with the file's key, verified with the public file.
    let json = signed(std::slice::from_ref(&ec), None);
    let mut set = KeySet::new();
    set.push(ec_pub);
    assert!(verify_card(&json, &set).is_verified());
    // Our PEM writers read back.
    let pem = public_key_pem(a.verifying_key()).unwrap();
    assert_eq!(VerifyingKey::from_pem(&pem).unwrap(), p);
    let pem = public_key_pem(ec.verifying_key()).unwrap();
    assert_eq!(VerifyingKey::from_pem(&pem).unwrap().kid(), ec.kid());
    let der = SigningKey::generate_ed25519_pkcs8().unwrap();
    let k = SigningKey::from_pem(&pkcs8_to_pem(&der).unwrap()).unwrap();
    assert_eq!(k.kid(), SigningKey::from_pkcs8_der(&der).unwrap().kid());
}

#[test]
fn unusable_keys_are_refused_with_a_reason() {
    let e = SigningKey::from_pem(&fixture("ec-p384.pem")).unwrap_err();
    assert!(e.to_string().contains("P-256"), "{e}");
    let e = SigningKey::from_pem(&fixture("rsa-public.pem")).unwrap_err();
    assert!(e.to_string().contains("private key"), "{e}");
    let e = SigningKey::from_pem("hello").unwrap_err();
    assert!(e.to_string().contains("not a PEM"), "{e}");
    let e = SigningKey::from_pem(
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMA==\n-----END ENCRYPTED PRIVATE KEY-----\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("encrypted"), "{e}");
    let e = SigningKey::from_pem_file("/nonexistent/key.pem").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/key.pem"), "{e}");
    assert!(VerifyingKey::from_jwk(&json!({"kty": "oct", "k": "AA"})).is_err());
    let jwk = ed25519().verifying_key().to_jwk();
    let mut wrong_alg = jwk.clone();
    wrong_alg["alg"] = "ES256".into();
    assert!(VerifyingKey::from_jwk(&wrong_alg).is_err());
    let mut enc = jwk.clone();
    enc["use"] = "enc".into();
    assert!(VerifyingKey::from_jwk(&enc).is_err());
    assert!(VerifyingKey::from_jwk(&jwk).is_ok());
}

#[test]
fn the_kid_is_the_rfc7638_thumbprint() {
    // RFC 7638 section 3.1's example key and thumbprint.
    let jwk = json!({
        "kty": "RSA",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29"
    });
    let key = VerifyingKey::from_jwk(&jwk).unwrap();
    assert_eq!(key.kid(), "2011-04-29");
    assert_eq!(
        key.thumbprint(),
        "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
    );
    // Without a kid, the thumbprint is the key id.
    let mut bare = jwk.clone();
    bare.as_object_mut().unwrap().remove("kid");
    assert_eq!(
        VerifyingKey::from_jwk(&bare).unwrap().kid(),
        "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
    );
}

#[test]
fn jwts_verify_with_times_checked() {
    let key = ed25519();
    let keys = trust(&[&key]);
    let now = chrono::Utc::now().timestamp();
    let jwt = key
        .sign_jwt(&json!({"exp": now + 60, "iat": now, "x": 1}))
        .unwrap();
    let (header, claims) = verify_jwt(&jwt, &keys, Duration::from_secs(5)).unwrap();
    assert_eq!(header["typ"], "JWT");
    assert_eq!(header["alg"], "EdDSA");
    assert_eq!(claims["x"], 1);
    let v = verify_compact(&jwt, &keys).unwrap();
    assert_eq!(v.kid, key.kid());
    let expired = key
        .sign_jwt(&json!({"exp": now - 600, "iat": now - 900}))
        .unwrap();
    assert_eq!(
        verify_jwt(&expired, &keys, Duration::from_secs(5)).unwrap_err(),
        JwsError::Claims("expired".into())
    );
    let no_exp = key.sign_jwt(&json!({"iat": now})).unwrap();
    assert!(matches!(
        verify_jwt(&no_exp, &keys, Duration::from_secs(5)),
        Err(JwsError::Claims(_))
    ));
    let future = key
        .sign_jwt(&json!({"exp": now + 9000, "iat": now + 3600}))
        .unwrap();
    assert!(matches!(
        verify_jwt(&future, &keys, Duration::from_secs(5)),
        Err(JwsError::Claims(_))
    ));
    let other = trust(&[&ed25519()]);
    assert!(matches!(
        verify_jwt(&jwt, &other, Duration::from_secs(5)),
        Err(JwsError::UnknownKey(_))
    ));
    // A signature made with another key under the same kid.
    let forged = {
        let mut parts: Vec<&str> = jwt.split('.').collect();
        let sig = ed25519()
            .sign(format!("{}.{}", parts[0], parts[1]).as_bytes())
            .unwrap();
        parts[2] = &sig;
        parts.join(".")
    };
    assert_eq!(
        verify_jwt(&forged, &keys, Duration::from_secs(5)).unwrap_err(),
        JwsError::BadSignature
    );
    // alg none, and a crit extension, are refused.
    let none = format!(
        "{}.{}.",
        B64.encode(r#"{"alg":"none"}"#),
        B64.encode(r#"{"exp":99999999999}"#)
    );
    assert!(matches!(
        verify_jwt(&none, &keys, Duration::ZERO),
        Err(JwsError::Algorithm(_))
    ));
    let crit = key
        .sign_compact(
            serde_json::from_value(json!({"crit": ["b64"], "b64": false})).unwrap(),
            b"{}",
        )
        .unwrap();
    assert!(matches!(
        verify_compact(&crit, &keys),
        Err(JwsError::Malformed(_))
    ));
}

/// A card whose extension parameters hold the values where the two forms
/// part: `null`, empty strings, lists and objects (and an object that only
/// holds such values), non-ASCII text and awkward numbers.
fn awkward_card() -> AgentCard {
    let mut c = card();
    c.description = "Grüße — 日本語 — 🦀".into();
    let params: crate::Struct = serde_json::from_value(json!({
        "null": null,
        "empty": "",
        "list": [],
        "object": {},
        "nested": {"gone": null, "also": [null, ""]},
        "kept": {"n": null, "zero": 0, "no": false, "big": 1e21, "tenth": 0.1,
                 "negzero": -0.0, "one": 1.0, "large": 12345678901234567890u64,
                 "\u{10000}": "astral key", "\u{ffff}": "bmp key"},
    }))
    .unwrap();
    c.capabilities
        .get_or_insert_with(Default::default)
        .extensions
        .push(crate::AgentExtension {
            uri: "https://example.com/ext/awkward".into(),
            params: Some(params),
            ..Default::default()
        });
    c
}

/// Signs `payload` the way an SDK hands the signature over (one key).
fn signature_over(key: &SigningKey, payload: &[u8]) -> Value {
    let sig = sign_payload(payload, std::slice::from_ref(key), None).unwrap();
    serde_json::to_value(&sig[0]).unwrap()
}

#[test]
fn the_sdk_form_drops_null_and_empty_values_recursively() {
    let c = awkward_card();
    let sdk: Value = serde_json::from_slice(&card_sdk_payload(&c).unwrap()).unwrap();
    let params = &sdk["capabilities"]["extensions"][0]["params"];
    assert_eq!(
        params.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["kept"],
        "{params}"
    );
    assert!(params["kept"].get("n").is_none());
    assert_eq!(params["kept"]["zero"], 0);
    assert_eq!(params["kept"]["no"], false);
    // The RFC 8785 form keeps them all.
    let strict: Value = serde_json::from_slice(&card_signing_payload(&c).unwrap()).unwrap();
    let params = &strict["capabilities"]["extensions"][0]["params"];
    assert_eq!(params["null"], Value::Null);
    assert_eq!(params["object"], json!({}));
    assert_eq!(params["nested"]["also"], json!([null, ""]));
    // Both are JCS: numbers as ECMAScript writes them, keys in UTF-16
    // order (the astral key, a surrogate pair, sorts before U+FFFF).
    let text = String::from_utf8(card_sdk_payload(&c).unwrap()).unwrap();
    assert!(text.contains(r#""big":1e+21"#), "{text}");
    assert!(text.contains(r#""large":12345678901234567000"#), "{text}");
    assert!(
        text.contains(r#""negzero":0,"no":false,"one":1,"tenth":0.1"#),
        "{text}"
    );
    assert!(text.find("astral key") < text.find("bmp key"), "{text}");
    assert!(text.contains("Grüße — 日本語 — 🦀"), "{text}");
}

#[test]
fn a_card_signed_in_the_sdk_form_verifies_null_values_included() {
    // How the official SDKs sign: null and empty values dropped. The
    // project used to keep null and refused such a card.
    let key = ed25519();
    let c = awkward_card();
    let mut v = serde_json::to_value(&c).unwrap();
    v["signatures"] = json!([signature_over(&key, &card_sdk_payload(&c).unwrap())]);
    match verify_card(&v, &trust(&[&key])) {
        CardSignatureStatus::Verified { form, .. } => assert_eq!(form, CardSignatureForm::Sdk),
        s => panic!("{s:?}"),
    }
    // Through JSON text, as received.
    let back: Value = serde_json::from_str(&v.to_string()).unwrap();
    assert!(verify_card(&back, &trust(&[&key])).is_verified());
    // A change to a kept value is caught; so is one to a dropped value
    // that makes it kept.
    let mut changed = back.clone();
    changed["capabilities"]["extensions"][0]["params"]["kept"]["zero"] = json!(1);
    assert!(!verify_card(&changed, &trust(&[&key])).is_verified());
    let mut changed = back;
    changed["capabilities"]["extensions"][0]["params"]["empty"] = json!("x");
    assert!(!verify_card(&changed, &trust(&[&key])).is_verified());
}

#[test]
fn each_form_signs_what_it_says() {
    let key = ed25519();
    let c = awkward_card();
    let strict = card_signing_payload(&c).unwrap();
    let sdk = card_sdk_payload(&c).unwrap();
    assert_ne!(strict, sdk);
    for (form, expected) in [
        (CardSignatureForm::Rfc8785, vec![strict.clone()]),
        (CardSignatureForm::Sdk, vec![sdk.clone()]),
        (CardSignatureForm::Both, vec![strict.clone(), sdk.clone()]),
    ] {
        assert_eq!(card_payloads(&c, form).unwrap(), expected, "{form}");
        let mut signed = c.clone();
        sign_card_as(&mut signed, std::slice::from_ref(&key), None, form).unwrap();
        assert_eq!(signed.signatures.len(), expected.len(), "{form}");
        let v = serde_json::to_value(&signed).unwrap();
        match verify_card(&v, &trust(&[&key])) {
            CardSignatureStatus::Verified { form: got, .. } => {
                let first = if form == CardSignatureForm::Sdk {
                    CardSignatureForm::Sdk
                } else {
                    CardSignatureForm::Rfc8785
                };
                assert_eq!(got, first, "{form}");
            }
            s => panic!("{form}: {s:?}"),
        }
    }
    // Without such values the forms are the same bytes: one signature.
    let mut plain = card();
    sign_card_as(
        &mut plain,
        std::slice::from_ref(&key),
        None,
        CardSignatureForm::Both,
    )
    .unwrap();
    assert_eq!(plain.signatures.len(), 1);
    for name in ["rfc8785", "sdk", "both"] {
        assert_eq!(CardSignatureForm::from_name(name).unwrap().as_str(), name);
    }
}

#[test]
fn a_key_without_a_key_id_of_its_own_verifies_any_key_id() {
    // A signer that names its key "sdk-key-1"; the verifier has only the
    // public key (a PEM file: no key id of its own).
    let key = p256();
    let named = key.clone().with_kid("sdk-key-1");
    let json = signed(std::slice::from_ref(&named), None);
    let pem = VerifyingKey::from_pem(&public_key_pem(key.verifying_key()).unwrap()).unwrap();
    assert!(!pem.has_declared_kid());
    let mut set = KeySet::new();
    set.push(pem.clone());
    assert_eq!(
        verify_card(&json, &set),
        CardSignatureStatus::Verified {
            kid: "sdk-key-1".into(),
            algorithm: Algorithm::ES256,
            key: pem.kid().to_owned(),
            form: CardSignatureForm::Rfc8785,
        }
    );
    // A key of a JWKS, which has its own key id, does not stand in for
    // another one.
    let mut jwks = KeySet::new();
    jwks.push(VerifyingKey::from_jwk(&pem.to_jwk()).unwrap());
    assert!(matches!(
        verify_card(&json, &jwks),
        CardSignatureStatus::Unverified { .. }
    ));
    // Another key without an id: reported as no trusted key.
    let mut other = KeySet::new();
    other.push(p256().verifying_key().clone());
    match verify_card(&json, &other) {
        CardSignatureStatus::Unverified { reason } => {
            assert!(reason.contains("no trusted key"), "{reason}")
        }
        s => panic!("{s:?}"),
    }
}
