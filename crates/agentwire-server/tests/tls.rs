//! TLS and mutual TLS serving: JSON-RPC over TLS with HTTP/2 chosen by
//! ALPN, the card's https:// interfaces, client certificates as
//! principals (a good one, none, one from another CA, two of them kept
//! apart), and a certificate reloaded from its files.
//!
//! The certificates are generated here (rcgen).

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentwire_server::auth::AuthSchemes;
use agentwire_server::{A2aServer, ServerHandle, TlsConfig};
use agentwire_types::new_id;
use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use serde_json::{Value, json};

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

    fn pem(&self) -> String {
        self.cert.pem()
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a PEM file");
    path
}

/// The server's certificate files in `dir`, signed by `ca`.
fn server_files(dir: &Path, ca: &Ca) -> (PathBuf, PathBuf) {
    let (cert, key) = ca.issue("agent", &["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    (
        write(dir, "server.crt", &cert),
        write(dir, "server.key", &key),
    )
}

fn https_base(server: &ServerHandle) -> String {
    format!("https://localhost:{}", server.local_addr().port())
}

/// A client trusting `ca` only, presenting `identity` (certificate and
/// key PEM) when given.
fn tls_client(ca: &Ca, identity: Option<&(String, String)>) -> reqwest::Client {
    agentwire_client::install_crypto_provider();
    let mut b = reqwest::Client::builder()
        .timeout(WAIT)
        .tls_certs_only([reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("CA PEM")]);
    if let Some((cert, key)) = identity {
        let pem = format!("{cert}\n{key}");
        b = b.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity PEM"));
    }
    b.build().expect("reqwest client")
}

async fn rpc(
    client: &reqwest::Client,
    base: &str,
    method: &str,
    params: Value,
) -> reqwest::Result<(http::Version, Value)> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp = client
        .post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await?;
    let version = resp.version();
    Ok((version, resp.json().await?))
}

fn send_params(text: &str) -> Value {
    json!({"message": {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}]}})
}

async fn tls_server(config: TlsConfig, auth: Option<AuthSchemes>) -> ServerHandle {
    let mut server = A2aServer::new(agents::echo_card(), agents::Echo).tls(config);
    if let Some(auth) = auth {
        server = server.authenticator(std::sync::Arc::new(auth));
    }
    start_server(server).await
}

#[tokio::test]
async fn json_rpc_over_tls_with_h2_by_alpn_and_https_interfaces() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("test CA");
    let (cert, key) = server_files(dir.path(), &ca);
    let server = tls_server(TlsConfig::new(cert, key), None).await;
    let base = https_base(&server);
    let client = tls_client(&ca, None);

    let card: Value = within("card over TLS", async {
        client
            .get(format!("{base}/.well-known/agent-card.json"))
            .send()
            .await
            .expect("card request")
            .json()
            .await
            .expect("card JSON")
    })
    .await;
    for iface in card["supportedInterfaces"].as_array().expect("interfaces") {
        let url = iface["url"].as_str().expect("url");
        assert!(url.starts_with("https://"), "interface over TLS: {url}");
    }

    let (version, answer) = within(
        "send over TLS",
        rpc(&client, &base, "SendMessage", send_params("hi")),
    )
    .await
    .expect("SendMessage over TLS");
    assert_eq!(version, http::Version::HTTP_2, "h2 chosen by ALPN");
    assert!(answer.get("result").is_some(), "{answer}");

    // A plain-HTTP request to the TLS port gets no answer.
    let plain = raw_http()
        .get(format!(
            "http://{}/.well-known/agent-card.json",
            server.local_addr()
        ))
        .send()
        .await;
    assert!(plain.is_err() || !plain.expect("answer").status().is_success());
}

#[tokio::test]
async fn mutual_tls_principals_are_the_certificates() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("server CA");
    let clients = Ca::new("clients CA");
    let other = Ca::new("another CA");
    let (cert, key) = server_files(dir.path(), &ca);
    let client_ca = write(dir.path(), "clients.crt", &clients.pem());
    let server = tls_server(
        TlsConfig::new(cert, key).client_ca(client_ca),
        Some(AuthSchemes::new().mutual_tls(true)),
    )
    .await;
    let base = https_base(&server);
    let alice = clients.issue("alice", &[], ExtendedKeyUsagePurpose::ClientAuth);
    let bob = clients.issue(
        "",
        &["bob.example.com"],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let mallory = other.issue("alice", &[], ExtendedKeyUsagePurpose::ClientAuth);

    // The card is public, and declares the scheme.
    let card: Value = tls_client(&ca, None)
        .get(format!("{base}/.well-known/agent-card.json"))
        .send()
        .await
        .expect("card without a certificate")
        .json()
        .await
        .expect("card JSON");
    assert!(
        card["securitySchemes"]["mtls"]["mtlsSecurityScheme"].is_object(),
        "{card}"
    );

    // No certificate: the JSON-RPC authentication error.
    let (_, answer) = rpc(
        &tls_client(&ca, None),
        &base,
        "SendMessage",
        send_params("x"),
    )
    .await
    .expect("answered");
    assert_eq!(answer["error"]["code"], -31401, "{answer}");

    // A certificate from another CA: refused at the handshake.
    let refused = rpc(
        &tls_client(&ca, Some(&mallory)),
        &base,
        "SendMessage",
        send_params("x"),
    )
    .await;
    assert!(
        refused.is_err(),
        "a certificate from another CA: {refused:?}"
    );

    // Alice's task is hers: Bob (named by his DNS SAN) does not see it.
    let alice_client = tls_client(&ca, Some(&alice));
    let (_, answer) = rpc(&alice_client, &base, "SendMessage", send_params("mine"))
        .await
        .expect("alice sends");
    let task_id = answer["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {answer}"))
        .to_owned();
    let (_, got) = rpc(&alice_client, &base, "GetTask", json!({"id": task_id}))
        .await
        .expect("alice reads");
    assert!(got.get("result").is_some(), "{got}");
    let (_, got) = rpc(
        &tls_client(&ca, Some(&bob)),
        &base,
        "GetTask",
        json!({"id": task_id}),
    )
    .await
    .expect("bob reads");
    assert_eq!(got["error"]["code"], -32001, "TaskNotFound for bob: {got}");
}

#[tokio::test]
async fn a_changed_certificate_is_served_to_new_connections() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = Ca::new("first CA");
    let second = Ca::new("second CA");
    let (cert, key) = server_files(dir.path(), &first);
    let server = tls_server(
        TlsConfig::new(&cert, &key).reload_interval(Duration::from_millis(100)),
        None,
    )
    .await;
    let base = https_base(&server);
    let old_client = tls_client(&first, None);
    rpc(&old_client, &base, "SendMessage", send_params("before"))
        .await
        .expect("served with the first certificate");

    // A broken file is not loaded: the first certificate stays.
    std::fs::write(&cert, "not a certificate").expect("write");
    tokio::time::sleep(Duration::from_millis(400)).await;
    rpc(
        &tls_client(&first, None),
        &base,
        "SendMessage",
        send_params("still"),
    )
    .await
    .expect("a failed reload keeps the old certificate");

    server_files(dir.path(), &second);
    let new_client = tls_client(&second, None);
    within("the new certificate served", async {
        loop {
            if rpc(&new_client, &base, "SendMessage", send_params("after"))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    // The connection opened before goes on.
    rpc(
        &old_client,
        &base,
        "SendMessage",
        send_params("old connection"),
    )
    .await
    .expect("the open connection keeps its certificate");
}
