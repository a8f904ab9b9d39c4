//! TLS and mutual TLS end to end: `a2a serve --tls-cert/--tls-key` (and
//! `--client-ca`) called by `a2a card get`, `a2a send` and `a2a send
//! --stream` with `--cacert` (and `--cert/--key`) on JSON-RPC, HTTP+JSON
//! and gRPC over TLS. An agent certificate the client does not trust exits
//! 3; no client certificate is a 401 (exit 4); a certificate of another
//! authority is refused at the handshake (exit 4, named as such); the
//! certificate's subject is the principal that owns the tasks; a live
//! stream outlives a certificate reload while new connections get the new
//! certificate.
//!
//! The certificates are generated here (rcgen).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use serde_json::Value;

/// Bound on every wait.
const LIMIT: Duration = Duration::from_secs(30);

const BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];

/// A certificate authority of the test.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("CA certificate");
        Self { cert, key }
    }

    /// A leaf certificate (PEM) and its key (PEM).
    fn issue(&self, cn: &str, sans: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let key = KeyPair::generate().expect("leaf key");
        let mut params =
            CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("leaf certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// Writes the CA certificate to `dir/name`.
    fn write(&self, dir: &Path, name: &str) -> String {
        write(dir, name, &self.cert.pem())
    }

    /// Writes a server certificate for 127.0.0.1 (and localhost) and its key.
    fn server_files(&self, dir: &Path, cert: &str, key: &str) {
        let (c, k) = self.issue(
            "agent",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        write(dir, cert, &c);
        write(dir, key, &k);
    }

    /// Writes a client certificate for `cn` and its key: the two paths.
    fn client_files(&self, dir: &Path, cn: &str) -> (String, String) {
        let (c, k) = self.issue(cn, &[], ExtendedKeyUsagePurpose::ClientAuth);
        (
            write(dir, &format!("{cn}.crt"), &c),
            write(dir, &format!("{cn}.key"), &k),
        )
    }
}

/// Writes `text` to `dir/name` and gives the path as a string.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, text).expect("write a PEM file");
    path.display().to_string()
}

/// Runs `a2a ARGS -o json`.
fn a2a(env: &Env, args: &[&str]) -> Out {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    env.run(&all)
}

/// The error code of a failed `-o json` run.
fn error_code(out: &Out) -> String {
    out.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn tls_on_every_binding_with_cacert() {
    let env = Env::new();
    let dir = env.cwd();
    let ca = Ca::new("test CA");
    ca.server_files(&dir, "server.crt", "server.key");
    let cacert = ca.write(&dir, "ca.pem");
    let serving = Serving::start(
        &env,
        &[
            "--tls-cert",
            "server.crt",
            "--tls-key",
            "server.key",
            "--metrics",
        ],
    );
    let a = serving.base();
    assert!(a.starts_with("https://"), "a TLS agent card: {a}");
    // /metrics on the agent's port is served over TLS too, and the banner
    // says so.
    let metrics = serving
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("metrics:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("a metrics line: {}", serving.stdout));
    assert!(metrics.starts_with("https://"), "{}", serving.stdout);

    // The agent's certificate is not signed by a system authority: refused,
    // exit 3, and the error says why.
    let out = a2a(&env, &["card", "get", "-a", &a, "--no-cache"]);
    out.expect(3);
    assert_eq!(error_code(&out), "A2ACLI_ERR_UNREACHABLE", "{}", out.stdout);
    assert!(out.stdout.contains("not trusted"), "{}", out.stdout);
    assert!(out.stderr.contains("--cacert"), "{}", out.stderr);

    let out = a2a(&env, &["card", "get", "-a", &a, "--cacert", &cacert]);
    out.expect(0);
    let card = out.json();
    for iface in card["supportedInterfaces"].as_array().expect("interfaces") {
        let url = iface["url"].as_str().expect("url");
        assert!(url.starts_with("https://"), "interface over TLS: {url}");
    }

    // The same through the environment variable.
    let out = env
        .cmd()
        .env("A2ACLI_CACERT", &cacert)
        .args(["card", "get", "-a", &a, "-o", "json", "--no-cache"])
        .output()
        .expect("run a2a");
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    for t in BINDINGS {
        let out = a2a(
            &env,
            &[
                "send",
                "-a",
                &a,
                "--cacert",
                &cacert,
                "--transport",
                t,
                "over tls",
            ],
        );
        out.expect(0);
        let answer = out.json();
        assert_eq!(
            answer["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "[{t}] {answer}"
        );
        assert!(answer.to_string().contains("over tls"), "[{t}] {answer}");

        let out = a2a(
            &env,
            &[
                "send",
                "-a",
                &a,
                "--cacert",
                &cacert,
                "--transport",
                t,
                "--stream",
                "streamed words",
            ],
        );
        out.expect(0);
        let events = out.jsonl();
        assert!(events.len() > 1, "[{t}] {}", out.stdout);
        assert!(out.stdout.contains("streamed"), "[{t}] {}", out.stdout);

        // Without --cacert, on this binding too: not trusted, exit 3.
        let out = a2a(
            &env,
            &["send", "-a", &a, "--transport", t, "--no-cache", "hi"],
        );
        out.expect(3);
        assert!(out.stdout.contains("not trusted"), "[{t}] {}", out.stdout);
    }
}

#[test]
fn mutual_tls_certificates_are_the_callers() {
    let env = Env::new();
    let dir = env.cwd();
    let ca = Ca::new("server CA");
    let clients = Ca::new("clients CA");
    let other = Ca::new("another CA");
    ca.server_files(&dir, "server.crt", "server.key");
    let cacert = ca.write(&dir, "ca.pem");
    clients.write(&dir, "clients.pem");
    let (alice_cert, alice_key) = clients.client_files(&dir, "alice");
    let (bob_cert, bob_key) = clients.client_files(&dir, "bob");
    let other_dir = dir.join("other");
    std::fs::create_dir_all(&other_dir).expect("dir");
    let (mallory_cert, mallory_key) = other.client_files(&other_dir, "alice");
    let serving = Serving::start(
        &env,
        &[
            "--tls-cert",
            "server.crt",
            "--tls-key",
            "server.key",
            "--client-ca",
            "clients.pem",
        ],
    );
    assert!(serving.stdout.contains("mutual TLS"), "{}", serving.stdout);
    let a = serving.base();
    assert!(a.starts_with("https://"), "a TLS agent card: {a}");

    // The card is public, and declares the scheme.
    let out = a2a(&env, &["card", "get", "-a", &a, "--cacert", &cacert]);
    out.expect(0);
    assert!(
        out.json()["securitySchemes"]["mtls"]["mtlsSecurityScheme"].is_object(),
        "{}",
        out.stdout
    );

    let alice = ["--cert", alice_cert.as_str(), "--key", alice_key.as_str()];
    let bob = ["--cert", bob_cert.as_str(), "--key", bob_key.as_str()];
    let mallory = [
        "--cert",
        mallory_cert.as_str(),
        "--key",
        mallory_key.as_str(),
    ];
    let call = |t: &str, identity: &[&str], rest: &[&str]| {
        let mut args = vec![
            "-a",
            a.as_str(),
            "--cacert",
            cacert.as_str(),
            "--transport",
            t,
        ];
        args.extend(identity);
        let mut all: Vec<&str> = rest.to_vec();
        all.extend(args);
        a2a(&env, &all)
    };
    for t in BINDINGS {
        // No certificate: a 401 / UNAUTHENTICATED, exit 4, no data.
        let out = call(t, &[], &["send", "private words"]);
        out.expect(4);
        assert_eq!(
            error_code(&out),
            "A2ACLI_ERR_CREDENTIALS_MISSING",
            "[{t}] {}",
            out.stdout
        );
        assert!(
            !out.stdout.contains("private words"),
            "[{t}] {}",
            out.stdout
        );
        assert!(out.stderr.contains("--cert"), "[{t}] {}", out.stderr);

        // A certificate of another authority: refused at the handshake.
        let out = call(t, &mallory, &["send", "private words"]);
        out.expect(4);
        assert_eq!(
            error_code(&out),
            "A2ACLI_ERR_AUTH_FAILED",
            "[{t}] {}",
            out.stdout
        );
        assert!(
            out.stdout
                .contains("refused the TLS connection over the client certificate"),
            "[{t}] {}",
            out.stdout
        );
        assert!(
            !out.stdout.contains("private words"),
            "[{t}] {}",
            out.stdout
        );

        // Alice's certificate: accepted, and her task is hers.
        let out = call(t, &alice, &["send", "private words"]);
        out.expect(0);
        let task = out.json()["task"]["id"]
            .as_str()
            .expect("a task id")
            .to_owned();
        let out = call(t, &alice, &["send", "--stream", "streamed private words"]);
        out.expect(0);
        assert!(out.stdout.contains("streamed"), "[{t}] {}", out.stdout);
        call(t, &alice, &["task", "get", &task]).expect(0);

        // Bob's certificate (same authority, another subject) sees nothing.
        let out = call(t, &bob, &["task", "get", &task]);
        out.expect(1);
        assert_eq!(
            error_code(&out),
            "TaskNotFoundError",
            "[{t}] {}",
            out.stdout
        );
        assert!(
            !out.stdout.contains("private words"),
            "[{t}] {}",
            out.stdout
        );
        let out = call(t, &bob, &["task", "list"]);
        out.expect(0);
        assert!(
            !out.stdout.contains(&task),
            "[{t}] bob's list: {}",
            out.stdout
        );
    }

    // The card fetch presents the certificate too: another authority's is
    // refused there as well.
    let out = a2a(
        &env,
        &[
            "card",
            "get",
            "-a",
            &a,
            "--no-cache",
            "--cacert",
            &cacert,
            "--cert",
            &mallory_cert,
            "--key",
            &mallory_key,
        ],
    );
    out.expect(4);

    // A --cert without its --key is a usage error.
    let out = a2a(&env, &["card", "get", "-a", &a, "--cert", &alice_cert]);
    out.expect(2);
    // A file that is not PEM, too.
    let out = a2a(
        &env,
        &[
            "card",
            "get",
            "-a",
            &a,
            "--cacert",
            &alice_key,
            "--no-cache",
        ],
    );
    out.expect(2);
    assert!(out.stdout.contains("--cacert"), "{}", out.stdout);
}

#[test]
fn a_stream_outlives_a_certificate_reload() {
    let env = Env::new();
    let dir = env.cwd();
    let first = Ca::new("first CA");
    let second = Ca::new("second CA");
    first.server_files(&dir, "server.crt", "server.key");
    let first_pem = first.write(&dir, "first.pem");
    let second_pem = second.write(&dir, "second.pem");
    let serving = Serving::start(
        &env,
        &["--tls-cert", "server.crt", "--tls-key", "server.key"],
    );
    let a = serving.base();
    assert!(a.starts_with("https://"), "a TLS agent card: {a}");

    // A long job, streamed: its events keep coming over one connection.
    let mut stream = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
    for (k, _) in std::env::vars() {
        if k.starts_with("A2ACLI_") || k.starts_with("XDG_") || k == "RUST_LOG" {
            stream.env_remove(k);
        }
    }
    stream
        .env("HOME", env.home())
        .env("XDG_CONFIG_HOME", env.home().join(".config"))
        .env("XDG_CACHE_HOME", env.home().join(".cache"))
        .current_dir(env.cwd())
        .stdin(Stdio::null())
        .args([
            "send", "-a", &a, "--cacert", &first_pem, "--stream", "-o", "json", "slow 120",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = stream.spawn().expect("start the stream");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| -> Value {
        let line = rx
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("no stream event ({what}) within {LIMIT:?}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    };
    let first_event = next("the first");
    let task = first_event
        .pointer("/task/id")
        .or_else(|| first_event.pointer("/statusUpdate/taskId"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("a task id in {first_event}"))
        .to_owned();

    // The certificate is replaced by one of another authority.
    second.server_files(&dir, "server.crt.new", "server.key.new");
    std::fs::rename(dir.join("server.key.new"), dir.join("server.key")).expect("new key");
    std::fs::rename(dir.join("server.crt.new"), dir.join("server.crt")).expect("new cert");

    // New connections get the new certificate (once the server has seen the
    // files change): trusted with the second authority...
    let started = Instant::now();
    loop {
        let out = a2a(
            &env,
            &[
                "card",
                "get",
                "-a",
                &a,
                "--no-cache",
                "--cacert",
                &second_pem,
            ],
        );
        if out.code == 0 {
            break;
        }
        assert!(
            started.elapsed() < LIMIT,
            "the new certificate was not served within {LIMIT:?}: {}",
            out.stdout
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // ...and no longer with the first.
    let out = a2a(
        &env,
        &[
            "card",
            "get",
            "-a",
            &a,
            "--no-cache",
            "--cacert",
            &first_pem,
        ],
    );
    out.expect(3);

    // The stream opened before the reload is still live: it receives the
    // progress that follows, then the cancellation made over a new
    // connection.
    next("after the reload");
    a2a(
        &env,
        &["task", "cancel", "-a", &a, "--cacert", &second_pem, &task],
    )
    .expect(0);
    let deadline = Instant::now() + LIMIT;
    let mut canceled = false;
    while Instant::now() < deadline {
        match rx.recv_timeout(LIMIT) {
            Ok(line) if line.contains("TASK_STATE_CANCELED") => {
                canceled = true;
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let status = loop {
        if let Some(s) = child.try_wait().expect("the stream's status") {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(canceled, "the live stream saw the cancellation: {err}");
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the stream ended cleanly: {err}"
    );
}

// ----- certificates made with `openssl req -x509` (issues 41 and 42) ------

/// Makes a self-signed certificate the common way (`openssl req -x509`,
/// which marks it as an authority: basicConstraints CA:TRUE) for
/// `subject_alt_names` (`DNS:localhost,IP:127.0.0.1`): `dir/NAME.pem` and
/// `dir/NAME.key`, the paths.
fn openssl_self_signed(dir: &Path, name: &str, subject_alt_names: &str) -> (String, String) {
    let cert = dir.join(format!("{name}.pem"));
    let key = dir.join(format!("{name}.key"));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "30"])
        .args(["-subj", "/CN=localhost", "-addext"])
        .arg(format!("subjectAltName={subject_alt_names}"))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl (install the openssl command)");
    assert!(out.status.success(), "openssl req -x509: {out:?}");
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&cert)
        .output()
        .expect("openssl x509");
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
        "openssl marks the certificate as an authority"
    );
    (cert.display().to_string(), key.display().to_string())
}

/// `a2a send --cacert` with the agent's own `openssl req -x509`
/// certificate: accepted on every binding, with the card fetched from
/// `https://localhost:PORT` and from `https://127.0.0.1:PORT`; the card
/// advertises a host the certificate names.
#[test]
fn openssl_self_signed_certificate_is_trusted_with_cacert() {
    let env = Env::new();
    let dir = env.cwd();
    let (cert, key) = openssl_self_signed(&dir, "agent", "DNS:localhost,IP:127.0.0.1");
    let serving = Serving::start(&env, &["--tls-cert", &cert, "--tls-key", &key]);
    let port = serving.port();
    for host in ["localhost", "127.0.0.1"] {
        let a = format!("https://{host}:{port}");
        for t in BINDINGS {
            let out = a2a(
                &env,
                &[
                    "send",
                    "-a",
                    &a,
                    "--cacert",
                    &cert,
                    "--transport",
                    t,
                    "--no-cache",
                    "self signed",
                ],
            );
            out.expect(0);
            let answer = out.json();
            assert_eq!(
                answer["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                "[{host} {t}] {answer}"
            );
        }
    }
    // A certificate for localhost only: the card of a server bound to
    // 127.0.0.1 advertises localhost (which the certificate covers).
    let (cert, key) = openssl_self_signed(&dir, "localhost-only", "DNS:localhost");
    let serving = Serving::start(&env, &["--tls-cert", &cert, "--tls-key", &key]);
    let port = serving.port();
    let a = format!("https://localhost:{port}");
    let out = a2a(
        &env,
        &["card", "get", "-a", &a, "--cacert", &cert, "--no-cache"],
    );
    out.expect(0);
    for iface in out.json()["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
    {
        let url = iface["url"].as_str().expect("url");
        assert!(
            url.starts_with(&format!("https://localhost:{port}")),
            "an advertised URL the certificate covers: {url}"
        );
    }
    for t in BINDINGS {
        let out = a2a(
            &env,
            &["send", "-a", &a, "--cacert", &cert, "--transport", t, "hi"],
        );
        out.expect(0);
    }
}

/// `--public-url` with a host the certificate does not name: a warning at
/// start; a wrong CA: one clean error (exit 3, no log line, no run of
/// spaces in the hint); `http://` to the TLS port: use https:// (exit 3);
/// `--insecure` applies to gRPC too.
#[test]
fn openssl_certificate_mistakes_are_explained() {
    let env = Env::new();
    let dir = env.cwd();
    let (cert, key) = openssl_self_signed(&dir, "agent", "DNS:localhost,IP:127.0.0.1");
    let (other, _) = openssl_self_signed(&dir, "other", "DNS:localhost");

    let serving = Serving::start(
        &env,
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--public-url",
            "https://agent.example.com:8443",
        ],
    );
    let err = serving.stop();
    assert!(
        err.contains("warning: --public-url") && err.contains("does not name agent.example.com"),
        "{err}"
    );

    let serving = Serving::start(&env, &["--tls-cert", &cert, "--tls-key", &key]);
    let port = serving.port();
    let a = format!("https://127.0.0.1:{port}");
    for t in BINDINGS {
        let out = env.run(&[
            "send",
            "-a",
            &a,
            "--cacert",
            &other,
            "--transport",
            t,
            "--no-cache",
            "hi",
        ]);
        out.expect(3);
        assert!(
            out.stderr.contains("is not trusted"),
            "[{t}] {}",
            out.stderr
        );
        assert!(!out.stderr.contains("ERROR"), "[{t}] {}", out.stderr);
        assert!(!out.stderr.contains("   "), "[{t}] {}", out.stderr);
        assert_eq!(
            out.stderr
                .lines()
                .filter(|l| l.starts_with("error:"))
                .count(),
            1,
            "[{t}] {}",
            out.stderr
        );
    }
    // Without --cacert (the system's roots): the same clean error.
    let out = env.run(&["send", "-a", &a, "--no-cache", "hi"]);
    out.expect(3);
    assert!(!out.stderr.contains("ERROR"), "{}", out.stderr);
    assert!(!out.stderr.contains("   "), "{}", out.stderr);

    let plain = format!("http://127.0.0.1:{port}");
    let out = a2a(&env, &["send", "-a", &plain, "--no-cache", "hi"]);
    out.expect(3);
    assert_eq!(error_code(&out), "A2ACLI_ERR_UNREACHABLE", "{}", out.stdout);
    assert!(out.stderr.contains("https://"), "{}", out.stderr);
    assert!(
        !out.stdout.contains("invalid HTTP version"),
        "{}",
        out.stdout
    );

    for t in BINDINGS {
        let out = a2a(
            &env,
            &[
                "send",
                "-a",
                &a,
                "--insecure",
                "--transport",
                t,
                "--no-cache",
                "hi",
            ],
        );
        out.expect(0);
    }
}

/// A TLS front for a plain loopback server (as a reverse proxy would put
/// in front of `a2a registry serve`): accepts TLS on a free port with this
/// certificate and key and passes the bytes to `backend`. Stops with the
/// test process.
fn tls_front(cert: &str, key: &str, backend: u16) -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .expect("read the certificate")
        .collect::<Result<_, _>>()
        .expect("parse the certificate");
    let key = PrivateKeyDer::from_pem_file(key).expect("read the key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("the server's certificate");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the TLS front");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A handshake refused by the client ends here.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) =
                        tokio::net::TcpStream::connect(("127.0.0.1", backend)).await
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    });
    port
}

/// A registry behind TLS with a private certificate (`openssl req
/// -x509`): `a2a registry` commands trust it with `--cacert` as the
/// agents' commands do, and without it say that the certificate is not
/// trusted (exit 3).
#[test]
fn registry_commands_trust_cacert() {
    let env = Env::new();
    let (cert, key) = openssl_self_signed(&env.cwd(), "registry", "DNS:localhost,IP:127.0.0.1");
    let registry = common::registry::Registry::start(
        &env,
        &[("alice", "alice-token-0123456789")],
        &[],
        Duration::from_secs(60),
    );
    let backend: u16 = registry
        .url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("the registry's port");
    let front = format!("https://localhost:{}", tls_front(&cert, &key, backend));
    let trusted = a2a(
        &env,
        &[
            "registry",
            "search",
            "--registry",
            &front,
            "--cacert",
            &cert,
            "weather",
        ],
    );
    trusted.expect(0);
    assert!(trusted.json().is_object(), "{}", trusted.stdout);
    let untrusted = a2a(
        &env,
        &["registry", "search", "--registry", &front, "weather"],
    );
    untrusted.expect(3);
    assert!(
        untrusted.stderr.contains("not trusted") || untrusted.stderr.contains("certificate"),
        "{}",
        untrusted.stderr
    );
    let insecure = a2a(
        &env,
        &[
            "registry",
            "search",
            "--registry",
            &front,
            "--insecure",
            "weather",
        ],
    );
    insecure.expect(0);
}
