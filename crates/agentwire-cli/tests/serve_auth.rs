//! `a2a serve` with authentication: `--api-key-file`, and `--auth-jwks`
//! with `--auth-issuer` and `--auth-audience` (JWTs minted here with a key
//! generated here). The card declares the schemes; good credentials work
//! on every binding; missing, wrong and expired ones exit 4 (the CLI
//! spec's authentication failure) on every binding; one principal's task
//! is not found by another.

mod common;

use base64::Engine as _;
use common::*;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

const BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];

/// Runs `a2a ARGS -o json` and returns the output.
fn a2a(env: &Env, args: &[&str]) -> Out {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    env.run(&all)
}

#[test]
fn api_keys_on_every_binding() {
    let env = Env::new();
    std::fs::write(
        env.cwd().join("api-keys.txt"),
        "# who:key\nalice:alice-key-0123456789\nbob:bob-key-0123456789\n",
    )
    .unwrap();
    let serving = Serving::start(&env, &["--api-key-file", "api-keys.txt"]);
    assert!(
        serving.stdout.contains("authentication: apiKey"),
        "{}",
        serving.stdout
    );
    let a = serving.addr();
    let card = a2a(&env, &["card", "get", "-a", &a]);
    card.expect(0);
    let card = card.json();
    assert_eq!(
        card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"], "X-API-Key",
        "{card}"
    );
    assert_eq!(
        card["securityRequirements"][0]["schemes"]["apiKey"],
        json!({}),
        "{card}"
    );
    for t in BINDINGS {
        let send = |extra: &[&str]| {
            let mut args = vec!["send", "-a", &a, "--transport", t];
            args.extend(extra);
            args.push("secret words");
            a2a(&env, &args)
        };
        // Missing and wrong keys: exit 4, nothing of the agent's answer.
        let out = send(&[]);
        out.expect(4);
        let out = send(&["--api-key", "wrong-key-0123456789"]);
        out.expect(4);
        assert!(!out.stdout.contains("wrong-key") && !out.stderr.contains("wrong-key"));
        // Alice's task is hers.
        let out = send(&["--api-key", "alice-key-0123456789"]);
        out.expect(0);
        let task = out.json()["task"]["id"]
            .as_str()
            .expect("a task id")
            .to_owned();
        a2a(
            &env,
            &[
                "task",
                "get",
                "-a",
                &a,
                "--transport",
                t,
                "--api-key",
                "alice-key-0123456789",
                &task,
            ],
        )
        .expect(0);
        let out = a2a(
            &env,
            &[
                "task",
                "get",
                "-a",
                &a,
                "--transport",
                t,
                "--api-key",
                "bob-key-0123456789",
                &task,
            ],
        );
        assert_ne!(out.code, 0, "[{t}] bob reads alice's task: {}", out.stdout);
        assert!(!out.stdout.contains("secret words"), "[{t}] {}", out.stdout);
        assert!(
            out.stdout.contains("TaskNotFound") || out.stderr.contains("TaskNotFound"),
            "[{t}] {}{}",
            out.stdout,
            out.stderr
        );
        let out = a2a(
            &env,
            &[
                "task",
                "list",
                "-a",
                &a,
                "--transport",
                t,
                "--api-key",
                "bob-key-0123456789",
            ],
        );
        out.expect(0);
        assert!(
            !out.stdout.contains(&task),
            "[{t}] bob's list: {}",
            out.stdout
        );
    }
}

/// An ES256 key and its JWKS.
fn key() -> (Vec<u8>, Value) {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .unwrap()
        .as_ref()
        .to_vec();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).unwrap();
    let point = pair.public_key().as_ref();
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let jwks = json!({"keys": [{
        "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "k1",
        "x": b64(&point[1..33]), "y": b64(&point[33..65]),
    }]});
    (pkcs8, jwks)
}

fn mint(pkcs8: &[u8], claims: Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("k1".into());
    jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_ec_der(pkcs8),
    )
    .unwrap()
}

#[test]
fn jwt_bearer_tokens_on_every_binding() {
    let env = Env::new();
    let (pkcs8, jwks) = key();
    std::fs::write(env.cwd().join("jwks.json"), jwks.to_string()).unwrap();
    let iss = "https://login.example.com";
    let aud = "https://agent.example.com";
    let serving = Serving::start(
        &env,
        &[
            "--auth-jwks",
            "jwks.json",
            "--auth-issuer",
            iss,
            "--auth-audience",
            aud,
        ],
    );
    let a = serving.addr();
    let card = a2a(&env, &["card", "get", "-a", &a]);
    card.expect(0);
    let card = card.json();
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer",
        "{card}"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let good = mint(
        &pkcs8,
        json!({"iss": iss, "aud": aud, "sub": "alice", "exp": now + 600}),
    );
    let expired = mint(
        &pkcs8,
        json!({"iss": iss, "aud": aud, "sub": "alice", "exp": now - 600}),
    );
    let other_aud = mint(
        &pkcs8,
        json!({"iss": iss, "aud": "https://other.example.com", "sub": "alice", "exp": now + 600}),
    );
    let bob = mint(
        &pkcs8,
        json!({"iss": iss, "aud": aud, "sub": "bob", "exp": now + 600}),
    );
    for t in BINDINGS {
        for (what, token) in [
            ("expired", &expired),
            ("other audience", &other_aud),
            ("not a JWT", &"nope".to_owned()),
        ] {
            let out = a2a(
                &env,
                &["send", "-a", &a, "--transport", t, "--bearer", token, "hi"],
            );
            assert_eq!(out.code, 4, "[{t}] {what}: {}{}", out.stdout, out.stderr);
        }
        a2a(&env, &["send", "-a", &a, "--transport", t, "hi"]).expect(4);
        let out = a2a(
            &env,
            &["send", "-a", &a, "--transport", t, "--bearer", &good, "hi"],
        );
        out.expect(0);
        let task = out.json()["task"]["id"]
            .as_str()
            .expect("a task id")
            .to_owned();
        let out = a2a(
            &env,
            &[
                "task",
                "get",
                "-a",
                &a,
                "--transport",
                t,
                "--bearer",
                &bob,
                &task,
            ],
        );
        assert_ne!(out.code, 0, "[{t}] bob reads alice's task");
        a2a(
            &env,
            &[
                "task",
                "get",
                "-a",
                &a,
                "--transport",
                t,
                "--bearer",
                &good,
                &task,
            ],
        )
        .expect(0);
    }
}

#[test]
fn auth_options_are_checked() {
    let env = Env::new();
    // Token options without a key source: a usage error.
    let out = env.run(&[
        "serve",
        "--store",
        "memory",
        "--port",
        "0",
        "--auth-audience",
        "x",
    ]);
    out.expect(2);
    assert!(out.stderr.contains("--auth-jwks"), "{}", out.stderr);
    // A missing key file, named.
    let out = env.run(&[
        "serve",
        "--store",
        "memory",
        "--port",
        "0",
        "--api-key-file",
        "nope.txt",
    ]);
    out.expect(2);
    assert!(out.stderr.contains("nope.txt"), "{}", out.stderr);
    // The help names the options.
    let out = env.run(&["serve", "--help"]);
    for name in [
        "--auth-jwks",
        "--auth-issuer",
        "--auth-audience",
        "--auth-oidc",
        "--api-key-file",
    ] {
        assert!(out.stdout.contains(name), "{name} not in the help");
    }
}

/// Issue 40, item 13: an API key named `alice` and a JWT whose `sub` is
/// `alice` are two owners (`apikey:alice`, `jwt:ISSUER#alice`), on every
/// binding: neither finds, lists, cancels or subscribes to the other's
/// task (each answer is the task-not-found of a task that does not exist),
/// and the task is left as it was. There is no option to make them one
/// owner (docs/authentication.md, "Owners").
#[test]
fn one_name_in_two_schemes_is_two_owners() {
    let env = Env::new();
    let (pkcs8, jwks) = key();
    std::fs::write(env.cwd().join("jwks.json"), jwks.to_string()).unwrap();
    std::fs::write(env.cwd().join("keys.txt"), "alice:alice-key-0123456789\n").unwrap();
    let iss = "https://login.example.com";
    let aud = "https://agent.example.com";
    let serving = Serving::start(
        &env,
        &[
            "--agent",
            "conformance",
            "--api-key-file",
            "keys.txt",
            "--auth-jwks",
            "jwks.json",
            "--auth-issuer",
            iss,
            "--auth-audience",
            aud,
        ],
    );
    let a = serving.addr();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let token = mint(
        &pkcs8,
        json!({"iss": iss, "aud": aud, "sub": "alice", "exp": now + 600}),
    );
    let by_key = ["--api-key", "alice-key-0123456789"];
    let by_jwt = ["--bearer", token.as_str()];
    for t in BINDINGS {
        let run = |cred: &[&str], args: &[&str]| {
            let mut all = args.to_vec();
            all.extend(["-a", &a, "--transport", t]);
            all.extend(cred);
            a2a(&env, &all)
        };
        let open = |cred: &[&str], id: &str| {
            let out = run(cred, &["send", "--message-id", id, "hello"]);
            let v = out.json();
            assert_eq!(
                v["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
                "[{t}] {v}"
            );
            v["task"]["id"].as_str().expect("a task id").to_owned()
        };
        let of_key = open(&by_key, &format!("tck-input-required-{t}-key"));
        let of_jwt = open(&by_jwt, &format!("tck-input-required-{t}-jwt"));
        for (task, owner, other, what) in [
            (&of_key, &by_key, &by_jwt, "the API key's task, by the JWT"),
            (&of_jwt, &by_jwt, &by_key, "the JWT's task, by the API key"),
        ] {
            for verb in [
                &["task", "get"][..],
                &["task", "cancel"],
                &["task", "subscribe"],
            ] {
                let mut args = verb.to_vec();
                args.push(task);
                let out = run(other, &args);
                assert_ne!(out.code, 0, "[{t}] {verb:?} {what}: {}", out.stdout);
                assert!(
                    out.stdout.contains("TaskNotFound") || out.stderr.contains("TaskNotFound"),
                    "[{t}] {verb:?} {what}: {}{}",
                    out.stdout,
                    out.stderr
                );
                assert!(!out.stdout.contains("INPUT_REQUIRED"), "[{t}] {what}");
            }
            let out = run(other, &["task", "list"]);
            out.expect(0);
            assert!(!out.stdout.contains(task.as_str()), "[{t}] list: {what}");
            // Its owner still finds it, as it was.
            let out = run(owner, &["task", "get", task]);
            out.expect(0);
            assert_eq!(
                out.json()["status"]["state"],
                "TASK_STATE_INPUT_REQUIRED",
                "[{t}] {what}: {}",
                out.stdout
            );
            let out = run(owner, &["task", "list"]);
            out.expect(0);
            assert!(out.stdout.contains(task.as_str()), "[{t}] own list");
        }
    }
}

/// Tasks stored before principals had namespaces (owned by the bare name,
/// as earlier versions wrote them) are still found after the upgrade by
/// every principal of that name, API key or JWT, on every binding, and by
/// no one else.
#[test]
fn tasks_of_a_bare_name_stay_their_owners_after_the_upgrade() {
    use agentwire_server::store::{Owner, SqliteStore, TaskStore};
    let env = Env::new();
    let db = env.cwd().join("tasks.db");
    // The row as an earlier version wrote it: the bare name as the owner.
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(&db).await.expect("open the store");
        let task = agentwire_types::Task {
            id: "legacy-task-1".into(),
            context_id: "legacy-context".into(),
            status: Some(agentwire_types::TaskStatus::new(
                agentwire_types::TaskState::Completed,
            )),
            ..Default::default()
        };
        let owner = Owner {
            tenant: String::new(),
            principal: "alice".into(),
        };
        store.create(&owner, task).await.expect("stored");
    });
    drop(runtime);
    let (pkcs8, jwks) = key();
    std::fs::write(env.cwd().join("jwks.json"), jwks.to_string()).unwrap();
    std::fs::write(
        env.cwd().join("keys.txt"),
        "alice:alice-key-0123456789\nbob:bob-key-0123456789\n",
    )
    .unwrap();
    let iss = "https://login.example.com";
    let aud = "https://agent.example.com";
    let serving = Serving::start_on(
        &env,
        "sqlite:tasks.db",
        &[
            "--api-key-file",
            "keys.txt",
            "--auth-jwks",
            "jwks.json",
            "--auth-issuer",
            iss,
            "--auth-audience",
            aud,
        ],
    );
    let a = serving.addr();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let token = |sub: &str| {
        mint(
            &pkcs8,
            json!({"iss": iss, "aud": aud, "sub": sub, "exp": now + 600}),
        )
    };
    let (alice_jwt, bob_jwt) = (token("alice"), token("bob"));
    let alice: [&[&str]; 2] = [
        &["--api-key", "alice-key-0123456789"],
        &["--bearer", &alice_jwt],
    ];
    let others: [&[&str]; 2] = [
        &["--api-key", "bob-key-0123456789"],
        &["--bearer", &bob_jwt],
    ];
    for t in BINDINGS {
        let run = |cred: &[&str], args: &[&str]| {
            let mut all = args.to_vec();
            all.extend(["-a", &a, "--transport", t]);
            all.extend(cred);
            a2a(&env, &all)
        };
        for cred in alice {
            let out = run(cred, &["task", "get", "legacy-task-1"]);
            out.expect(0);
            assert_eq!(out.json()["id"], "legacy-task-1", "[{t}] {cred:?}");
            let out = run(cred, &["task", "list"]);
            out.expect(0);
            assert!(
                out.stdout.contains("legacy-task-1"),
                "[{t}] {cred:?}: {}",
                out.stdout
            );
        }
        for cred in others {
            let out = run(cred, &["task", "get", "legacy-task-1"]);
            assert_ne!(out.code, 0, "[{t}] {cred:?}: {}", out.stdout);
            assert!(
                out.stdout.contains("TaskNotFound") || out.stderr.contains("TaskNotFound"),
                "[{t}] {cred:?}: {}{}",
                out.stdout,
                out.stderr
            );
            let out = run(cred, &["task", "list"]);
            out.expect(0);
            assert!(!out.stdout.contains("legacy-task-1"), "[{t}] {cred:?}");
        }
    }
}
